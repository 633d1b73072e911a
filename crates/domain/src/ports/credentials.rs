//! The credentials document of a provider account (SPEC §5): what
//! `providerAccounts.create` takes in, checks for the account's provider, seals with the
//! `SecretBox`, and what every `ProviderRegistry` opens.
//!
//! Invariant: no error, `Debug` output or message built here quotes any part of a
//! credential (a token, a service-account key or a piece of one); a document is checked
//! by the same function when it comes in and when it is opened again, so what is stored
//! is what the adapters can use. Pure: the key's JSON and PEM armour are read here, the
//! RSA key itself is loaded by the adapter that signs with it.

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::provider::{ProviderError, ProviderResult};
use crate::model::{ProviderAccount, ProviderKind, SecretString};

/// Most characters of a provider API token.
pub const PROVIDER_TOKEN_MAX: usize = 1024;
/// The rule of a provider API token, as [`ProviderCredentials::new`] applies it: visible
/// ASCII only — no whitespace, control or format characters — since it travels in an HTTP
/// header (and a portable pattern: it means the same to every regex engine).
pub const PROVIDER_TOKEN_PATTERN: &str = "^[!-~]+$";
/// Most characters of a service-account key file (Google's are about 2,400).
pub const SERVICE_ACCOUNT_KEY_MAX: usize = 16_384;
/// A Google Cloud project id: 6–30 characters of lower-case letters, digits and `-`,
/// starting with a letter and not ending with `-`, optionally after a legacy
/// `domain:` prefix.
pub const PROJECT_ID_PATTERN: &str = "^([a-z0-9.-]{1,63}:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$";
/// Most characters of a project id: the longest [`PROJECT_ID_PATTERN`] admits (a 63-character
/// domain prefix, its `:`, and 30 characters).
pub const PROJECT_ID_MAX: usize = 94;

/// The document as it travels and as it is sealed: `{token}` for DigitalOcean,
/// `{serviceAccountKey, projectId?}` for GKE. Which fields a provider needs is decided
/// by [`ProviderCredentials::check`]. `Debug` never prints a secret.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderCredentials {
    /// DigitalOcean: the API token (`dop_v1_…`); write-only.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "serialize_exposed_opt"
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(
            length(min = 1, max = PROVIDER_TOKEN_MAX),
            regex(pattern = PROVIDER_TOKEN_PATTERN),
            extend("writeOnly" = true)
        )
    )]
    pub token: Option<SecretString>,
    /// GKE: the text of a Google service-account key file (JSON with `type:
    /// service_account`, `client_email`, `private_key_id` and an RSA `private_key` in
    /// PKCS#8 PEM); write-only. Its `token_uri` is never used.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "serialize_exposed_opt"
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = SERVICE_ACCOUNT_KEY_MAX), extend("writeOnly" = true))
    )]
    pub service_account_key: Option<SecretString>,
    /// GKE: the project whose clusters the account manages; defaults to the key's
    /// `project_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 6, max = PROJECT_ID_MAX), regex(pattern = PROJECT_ID_PATTERN))
    )]
    pub project_id: Option<String>,
}

fn serialize_exposed_opt<S: serde::Serializer>(
    s: &Option<SecretString>,
    ser: S,
) -> Result<S::Ok, S::Error> {
    match s {
        Some(s) => SecretString::serialize_exposed(s, ser),
        None => ser.serialize_none(),
    }
}

impl std::fmt::Debug for ProviderCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderCredentials")
            .field("token", &self.token)
            .field("service_account_key", &self.service_account_key)
            .field("project_id", &self.project_id)
            .finish()
    }
}

/// Why a credentials document is not usable (never quoting it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    /// Not the document the provider takes.
    #[error("credentials must be the JSON object {0}")]
    Shape(&'static str),
    /// The token is empty, too long, or holds anything but visible ASCII (it travels in
    /// an HTTP header).
    #[error(
        "credentials.token must be a token of 1 to 1024 visible ASCII characters (no spaces, control or format characters)"
    )]
    Token,
    /// The service-account key is not one (why, in words that quote none of it).
    #[error(
        "credentials.serviceAccountKey must be the text of a Google service-account key file: {0}"
    )]
    ServiceAccountKey(&'static str),
    /// No project: neither `projectId` nor the key's `project_id`, or not a project id.
    #[error(
        "credentials.projectId must be a Google Cloud project id (6 to 30 lower-case letters, digits or '-', starting with a letter); it defaults to the key's project_id"
    )]
    ProjectId,
}

impl CredentialsError {
    /// The input field the error is about, as a JSON path under the method's input.
    pub fn field(&self) -> &'static str {
        match self {
            CredentialsError::Shape(_) => "credentials",
            CredentialsError::Token => "credentials.token",
            CredentialsError::ServiceAccountKey(_) => "credentials.serviceAccountKey",
            CredentialsError::ProjectId => "credentials.projectId",
        }
    }
}

/// A checked service-account key: what signing an access-token request needs. `Debug`
/// shows the account's email only.
#[derive(Clone, PartialEq, Eq)]
pub struct ServiceAccountKey {
    /// The key file's text, as given (what is sealed).
    text: SecretString,
    /// `client_email`: the JWT's issuer.
    pub client_email: String,
    /// `private_key_id`: the JWT header's `kid`.
    pub private_key_id: String,
    /// `project_id`, when the file has one.
    pub project_id: Option<String>,
    /// The private key, PKCS#8 DER (RSA).
    pkcs8: Vec<u8>,
}

impl std::fmt::Debug for ServiceAccountKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountKey")
            .field("client_email", &self.client_email)
            .field("private_key", &"[redacted]")
            .finish_non_exhaustive()
    }
}

/// The fields of a key file this system reads; the rest (`token_uri` among them) is
/// ignored on purpose.
#[derive(Deserialize)]
struct KeyFile {
    #[serde(rename = "type")]
    kind: Option<String>,
    client_email: Option<String>,
    private_key_id: Option<String>,
    private_key: Option<String>,
    project_id: Option<String>,
}

const PKCS8_BEGIN: &str = "-----BEGIN PRIVATE KEY-----";
const PKCS8_END: &str = "-----END PRIVATE KEY-----";
/// The DER of the rsaEncryption OID (1.2.840.113549.1.1.1) with its tag and length.
const RSA_ENCRYPTION_OID: [u8; 11] =
    [0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];

impl ServiceAccountKey {
    /// Reads a key file's text. Every failure names what is wrong and quotes nothing:
    /// a parser's message could echo the key.
    pub fn parse(text: &SecretString) -> Result<Self, CredentialsError> {
        use CredentialsError::ServiceAccountKey as Bad;
        let t = text.expose();
        if t.is_empty() || t.len() > SERVICE_ACCOUNT_KEY_MAX {
            return Err(Bad("it must hold 1 to 16384 characters"));
        }
        let file: KeyFile =
            serde_json::from_str(t).map_err(|_| Bad("it is not a JSON object of strings"))?;
        if file.kind.as_deref() != Some("service_account") {
            return Err(Bad("its type must be \"service_account\""));
        }
        let client_email = file
            .client_email
            .filter(|e| is_email(e))
            .ok_or(Bad("client_email must be the service account's email address"))?;
        let private_key_id = file
            .private_key_id
            .filter(|k| {
                !k.is_empty() && k.len() <= 128 && k.bytes().all(|b| b.is_ascii_alphanumeric())
            })
            .ok_or(Bad("private_key_id must be the key's id (letters and digits)"))?;
        let pem = file.private_key.ok_or(Bad("private_key is missing"))?;
        let pkcs8 = pkcs8_rsa_der(&pem)?;
        let project_id = file.project_id.filter(|p| !p.is_empty());
        Ok(Self { text: text.clone(), client_email, private_key_id, project_id, pkcs8 })
    }

    /// The private key, PKCS#8 DER; use only to sign.
    pub fn pkcs8_der(&self) -> &[u8] {
        &self.pkcs8
    }

    /// The key file's text; use only to seal it.
    pub fn text(&self) -> &SecretString {
        &self.text
    }
}

/// An email address as Google writes service accounts' (`name@project.iam.gserviceaccount.com`):
/// one `@`, something either side, no whitespace or control characters.
fn is_email(e: &str) -> bool {
    let Some((local, domain)) = e.split_once('@') else { return false };
    !local.is_empty()
        && domain.contains('.')
        && !domain.contains('@')
        && e.len() <= 254
        && e.bytes().all(|b| b.is_ascii_graphic())
}

/// The DER inside a PKCS#8 PEM, checked to be a PrivateKeyInfo of an RSA key (a
/// SEQUENCE naming rsaEncryption); whether the numbers inside make a usable key is the
/// signer's to say.
fn pkcs8_rsa_der(pem: &str) -> Result<Vec<u8>, CredentialsError> {
    use CredentialsError::ServiceAccountKey as Bad;
    let pem = pem.trim();
    if pem.starts_with("-----BEGIN RSA PRIVATE KEY-----") {
        return Err(Bad("private_key is PKCS#1 (BEGIN RSA PRIVATE KEY); it must be PKCS#8"));
    }
    let body = pem
        .strip_prefix(PKCS8_BEGIN)
        .and_then(|rest| rest.strip_suffix(PKCS8_END))
        .ok_or(Bad("private_key must be a PKCS#8 PEM (BEGIN PRIVATE KEY … END PRIVATE KEY)"))?;
    let b64: String = body.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(b64.as_bytes())
        .map_err(|_| Bad("private_key's PEM body is not base64"))?;
    let head = &der[..der.len().min(32)];
    let names_rsa = head.windows(RSA_ENCRYPTION_OID.len()).any(|w| w == RSA_ENCRYPTION_OID);
    if der.first() != Some(&0x30) || !names_rsa {
        return Err(Bad("private_key must be an RSA key in PKCS#8"));
    }
    Ok(der)
}

/// A GKE account's credentials, checked: the key and the project its clusters are in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccount {
    /// The key.
    pub key: ServiceAccountKey,
    /// The project (the account's `projectId`, else the key's `project_id`).
    pub project_id: String,
}

/// A document checked for its provider: what a registry builds an adapter from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccountCredentials {
    /// DigitalOcean: an API token.
    Token(SecretString),
    /// GKE: a service-account key and a project.
    ServiceAccount(ServiceAccount),
}

impl AccountCredentials {
    /// The provider these credentials are for.
    pub fn provider(&self) -> ProviderKind {
        match self {
            AccountCredentials::Token(_) => ProviderKind::Digitalocean,
            AccountCredentials::ServiceAccount(_) => ProviderKind::Gke,
        }
    }

    /// The project shown on the account (GKE), if any.
    pub fn project_id(&self) -> Option<&str> {
        match self {
            AccountCredentials::Token(_) => None,
            AccountCredentials::ServiceAccount(sa) => Some(&sa.project_id),
        }
    }

    /// The document to seal (the project resolved, so opening it needs no default).
    pub fn document(&self) -> ProviderCredentials {
        match self {
            AccountCredentials::Token(t) => {
                ProviderCredentials { token: Some(t.clone()), ..Default::default() }
            }
            AccountCredentials::ServiceAccount(sa) => ProviderCredentials {
                service_account_key: Some(sa.key.text().clone()),
                project_id: Some(sa.project_id.clone()),
                ..Default::default()
            },
        }
    }

    /// The plaintext to seal: the document's JSON.
    pub fn to_plaintext(&self) -> Vec<u8> {
        self.document().to_plaintext()
    }

    /// Opens an account's sealed credentials with the server's `SecretBox` (the account
    /// id is the AAD) and checks them for the account's provider; every
    /// `ProviderRegistry` goes through this one function, so a failure reads the same
    /// whichever provider is behind it, and never quotes the document.
    pub fn unseal(
        secret_box: &dyn crate::ports::SecretBox,
        account: &ProviderAccount,
    ) -> ProviderResult<Self> {
        let id = account.provider_account_id.as_str();
        let plain = secret_box.open(&account.credentials.0, id.as_bytes()).map_err(|_| {
            ProviderError::Refused {
                message: format!("credentials of account {id} could not be opened"),
            }
        })?;
        ProviderCredentials::open(&plain).and_then(|doc| doc.check(account.provider)).map_err(|e| {
            ProviderError::Refused { message: format!("credentials of account {id}: {e}") }
        })
    }
}

impl ProviderCredentials {
    /// DigitalOcean credentials of `token`, checked as [`ProviderCredentials::check`]
    /// checks them.
    pub fn new(token: SecretString) -> Result<Self, CredentialsError> {
        check_token(&token)?;
        Ok(Self { token: Some(token), ..Default::default() })
    }

    /// GKE credentials of a key file's text and an optional project.
    pub fn service_account(key: SecretString, project_id: Option<String>) -> Self {
        Self { service_account_key: Some(key), project_id, ..Default::default() }
    }

    /// The document checked for `provider`: the fields it takes and no others, each
    /// valid.
    pub fn check(&self, provider: ProviderKind) -> Result<AccountCredentials, CredentialsError> {
        match provider {
            ProviderKind::Digitalocean => {
                let (Some(token), None, None) =
                    (&self.token, &self.service_account_key, &self.project_id)
                else {
                    return Err(CredentialsError::Shape("{\"token\": \"…\"} for digitalocean"));
                };
                check_token(token)?;
                Ok(AccountCredentials::Token(token.clone()))
            }
            ProviderKind::Gke => {
                let (None, Some(text)) = (&self.token, &self.service_account_key) else {
                    return Err(CredentialsError::Shape(
                        "{\"serviceAccountKey\": \"…\", \"projectId\"?: \"…\"} for gke",
                    ));
                };
                let key = ServiceAccountKey::parse(text)?;
                let project_id = self
                    .project_id
                    .clone()
                    .or_else(|| key.project_id.clone())
                    .filter(|p| is_project_id(p))
                    .ok_or(CredentialsError::ProjectId)?;
                Ok(AccountCredentials::ServiceAccount(ServiceAccount { key, project_id }))
            }
        }
    }

    /// The plaintext to seal: the document's JSON.
    pub fn to_plaintext(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Reads an opened document. The parser's message is dropped: it can quote the input.
    pub fn open(plaintext: &[u8]) -> Result<Self, CredentialsError> {
        serde_json::from_slice(plaintext)
            .map_err(|_| CredentialsError::Shape("of the account's provider"))
    }
}

fn check_token(token: &SecretString) -> Result<(), CredentialsError> {
    let t = token.expose();
    let visible_ascii = t.bytes().all(|b| b.is_ascii_graphic());
    if t.is_empty() || t.len() > PROVIDER_TOKEN_MAX || !visible_ascii {
        return Err(CredentialsError::Token);
    }
    Ok(())
}

/// Whether `p` is a project id ([`PROJECT_ID_PATTERN`]).
pub fn is_project_id(p: &str) -> bool {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| regex::Regex::new(PROJECT_ID_PATTERN).expect("pattern")).is_match(p)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_project_id_bounds_are_the_patterns() {
        let longest = format!("{}:a{}", "d".repeat(63), "b".repeat(29));
        assert_eq!(longest.len(), super::PROJECT_ID_MAX);
        assert!(super::is_project_id(&longest));
        assert!(!super::is_project_id(&format!("{}:a{}", "d".repeat(64), "b".repeat(29))));
        assert!(!super::is_project_id(&format!("{}:a{}", "d".repeat(63), "b".repeat(30))));
        assert!(super::is_project_id("a1234b") && !super::is_project_id("a123b"));
    }

    use super::*;

    /// A well-formed PKCS#8 RSA PEM body: the first bytes of a real 2048-bit key's DER
    /// (SEQUENCE, version 0, rsaEncryption) — enough for the shape check, which is all
    /// this module does.
    fn pem() -> String {
        let der = [
            0x30, 0x82, 0x04, 0xbe, 0x02, 0x01, 0x00, 0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48,
            0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00, 0x04, 0x82, 0x04, 0xa8,
        ];
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        format!("{PKCS8_BEGIN}\n{b64}\n{PKCS8_END}\n")
    }

    fn key_file(edit: impl FnOnce(&mut serde_json::Value)) -> SecretString {
        let mut v = serde_json::json!({
            "type": "service_account",
            "project_id": "my-proj-1",
            "private_key_id": "1f2e3d4c5b6a",
            "private_key": pem(),
            "client_email": "bc@my-proj-1.iam.gserviceaccount.com",
            "token_uri": "https://attacker.example/token",
        });
        edit(&mut v);
        SecretString::new(v.to_string())
    }

    #[test]
    fn credentials_document_round_trips_and_never_shows_the_token() {
        let c = ProviderCredentials::new(SecretString::new("dop_v1_abc")).unwrap();
        assert_eq!(c.to_plaintext(), br#"{"token":"dop_v1_abc"}"#.to_vec());
        assert_eq!(ProviderCredentials::open(&c.to_plaintext()).unwrap(), c);
        assert!(!format!("{c:?}").contains("dop_v1_abc"));
        for bad in [&br#"{"token":"dop_v1_abc","x":1}"#[..], b"dop_v1_abc", br#"{"tok":"a"}"#] {
            let e = ProviderCredentials::open(bad).unwrap_err();
            assert!(matches!(e, CredentialsError::Shape(_)));
            assert!(!e.to_string().contains("dop_v1_abc"));
        }
        let long = "x".repeat(PROVIDER_TOKEN_MAX + 1);
        for bad in ["", "a b", "a\nb", "a\u{7}", long.as_str()] {
            assert_eq!(
                ProviderCredentials::new(SecretString::new(bad)).unwrap_err(),
                CredentialsError::Token
            );
        }
        // The documented pattern is the rule `new` applies.
        let re = regex::Regex::new(PROVIDER_TOKEN_PATTERN).unwrap();
        for t in
            ["dop_v1_abc", "a b", "a\tb", "a\u{7}", "é\u{a0}x", "x\u{2028}", "a\u{200b}b", "!~"]
        {
            assert_eq!(
                re.is_match(t),
                ProviderCredentials::new(SecretString::new(t)).is_ok(),
                "{t:?}"
            );
        }
    }

    #[test]
    fn each_provider_takes_its_own_document_only() {
        let token = ProviderCredentials::new(SecretString::new("dop_v1_abc")).unwrap();
        assert!(matches!(
            token.check(ProviderKind::Digitalocean),
            Ok(AccountCredentials::Token(_))
        ));
        assert!(matches!(token.check(ProviderKind::Gke), Err(CredentialsError::Shape(_))));
        let sa = ProviderCredentials::service_account(key_file(|_| {}), None);
        assert!(matches!(sa.check(ProviderKind::Digitalocean), Err(CredentialsError::Shape(_))));
        let checked = sa.check(ProviderKind::Gke).unwrap();
        assert_eq!(checked.provider(), ProviderKind::Gke);
        // projectId defaults to the key's, and the sealed document names it.
        assert_eq!(checked.project_id(), Some("my-proj-1"));
        let opened = ProviderCredentials::open(&checked.to_plaintext()).unwrap();
        assert_eq!(opened.project_id.as_deref(), Some("my-proj-1"));
        assert_eq!(opened.check(ProviderKind::Gke).unwrap(), checked);
        let other =
            ProviderCredentials::service_account(key_file(|_| {}), Some("other-proj".into()));
        assert_eq!(other.check(ProviderKind::Gke).unwrap().project_id(), Some("other-proj"));
        let Ok(AccountCredentials::ServiceAccount(s)) = other.check(ProviderKind::Gke) else {
            panic!()
        };
        assert_eq!(s.key.private_key_id, "1f2e3d4c5b6a");
        assert!(!format!("{s:?}").contains("BEGIN"), "{s:?}");
    }

    #[test]
    fn a_malformed_key_names_the_field_and_quotes_none_of_it() {
        use serde_json::json;
        let cases: Vec<SecretString> = vec![
            SecretString::new("not json SECRETBITS"),
            SecretString::new(""),
            key_file(|v| v["type"] = json!("authorized_user")),
            key_file(|v| v["client_email"] = json!("SECRETBITS")),
            key_file(|v| v["private_key_id"] = json!("")),
            key_file(|v| {
                v["private_key"] = json!(
                    "-----BEGIN RSA PRIVATE KEY-----\nSECRETBITS\n-----END RSA PRIVATE KEY-----"
                )
            }),
            key_file(|v| {
                v["private_key"] =
                    json!("-----BEGIN PRIVATE KEY-----\nSECRET*BITS\n-----END PRIVATE KEY-----")
            }),
            // Base64 of an EC key's PKCS#8 prefix (id-ecPublicKey), not RSA.
            key_file(|v| {
                v["private_key"] = json!(
                    "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----"
                )
            }),
            key_file(|v| {
                v.as_object_mut().unwrap().remove("private_key");
            }),
        ];
        for text in cases {
            let e = ProviderCredentials::service_account(text.clone(), None)
                .check(ProviderKind::Gke)
                .unwrap_err();
            assert_eq!(e.field(), "credentials.serviceAccountKey", "{e}");
            let m = e.to_string();
            assert!(!m.contains("SECRETBITS") && !m.contains("MIG"), "{m}");
        }
        // No project anywhere, or a bad one.
        let none = key_file(|v| {
            v.as_object_mut().unwrap().remove("project_id");
        });
        let e = ProviderCredentials::service_account(none, None).check(ProviderKind::Gke);
        assert_eq!(e.unwrap_err().field(), "credentials.projectId");
        let bad = ProviderCredentials::service_account(key_file(|_| {}), Some("Bad Proj".into()));
        assert_eq!(bad.check(ProviderKind::Gke).unwrap_err(), CredentialsError::ProjectId);
        for ok in ["bc-sim-project", "my-proj-1", "example.com:my-proj"] {
            assert!(is_project_id(ok), "{ok}");
        }
        for bad in ["short", "1abcdef", "abcdef-", "a".repeat(31).as_str()] {
            assert!(!is_project_id(bad), "{bad}");
        }
    }
}
