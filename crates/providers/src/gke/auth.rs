//! Access tokens for one GKE account: a JWT-bearer grant (RFC 7523) signed RS256 with
//! the account's service-account key, POSTed to the server's `--gcp-token-url`, and the
//! token it returns, cached until [`REFRESH_MARGIN`] before it expires.
//!
//! Invariant: the key's own `token_uri` is never read (a tenant cannot aim our signed
//! assertions anywhere); the assertion and the access token never appear in a message or
//! a log line (both are scrubbed from everything the endpoint sends back); one mint at a
//! time per account, so concurrent first callers share one token. The JWT's assembly
//! takes `now` as an argument and is unit-tested without I/O. A cluster's refusal forgets
//! the account's token only if it is the one that cluster was handed, so sessions refused
//! the same old token share one new one.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bc_domain::model::SecretString;
use bc_domain::ports::{ProviderResult, ServiceAccountKey};
use bc_domain::{ProviderError, Timestamp};
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use serde::Deserialize;

use crate::classify::gke::classify_token;
use crate::http::failure_kind;

/// The scopes asked for: the API's one scope, and the account's email so a cluster's
/// RBAC sees the service account by name (as gke-gcloud-auth-plugin asks).
pub const SCOPES: &str =
    "https://www.googleapis.com/auth/cloud-platform https://www.googleapis.com/auth/userinfo.email";
/// The assertion's audience: Google's token endpoint, whatever URL the grant is POSTed
/// to (as google-auth sends it).
pub const AUDIENCE: &str = "https://oauth2.googleapis.com/token";
/// An assertion's lifetime (Google's maximum: an hour).
pub const ASSERTION_LIFETIME_SECS: i64 = 3600;
/// A cached token is replaced once less than this is left of its life; a cluster
/// session's credentials are due for renewal from the same moment, so the kubeconfig it
/// then asks for carries the new token.
pub const REFRESH_MARGIN: Duration = Duration::from_secs(300);
/// How long after its token expired a holder's record of it is kept: a holder refused
/// within it keeps a newer token another holder got (a cluster whose credentials nobody
/// used for longer is forgotten).
const HANDED_KEPT: time::Duration = time::Duration::hours(1);
/// The grant type of RFC 7523.
const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// The signing half of a service-account key. Not `Debug`: it holds the private key.
pub struct Signer {
    pair: RsaKeyPair,
    client_email: String,
    key_id: String,
}

impl Signer {
    /// Loads the key. A key the shape check let through that ring cannot use is a
    /// refusal naming the field and quoting none of it.
    pub fn new(key: &ServiceAccountKey) -> ProviderResult<Self> {
        let pair = RsaKeyPair::from_pkcs8(key.pkcs8_der()).map_err(|_| ProviderError::Refused {
            message: "credentials.serviceAccountKey: private_key is not a usable RSA key (PKCS#8)"
                .into(),
        })?;
        Ok(Self {
            pair,
            client_email: key.client_email.clone(),
            key_id: key.private_key_id.clone(),
        })
    }

    /// The signed assertion for a grant at `now` (Unix seconds).
    pub fn assertion(&self, now_secs: i64) -> ProviderResult<String> {
        let signing_input = signing_input(&self.key_id, &self.client_email, now_secs);
        let mut sig = vec![0u8; self.pair.public().modulus_len()];
        self.pair
            .sign(
                &RSA_PKCS1_SHA256,
                &ring::rand::SystemRandom::new(),
                signing_input.as_bytes(),
                &mut sig,
            )
            .map_err(|_| ProviderError::Transient {
                message: "signing the token request failed".into(),
            })?;
        Ok(format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(sig)))
    }
}

/// `base64url(header).base64url(claims)` of the grant (unpadded, as RFC 7515 has it).
pub fn signing_input(key_id: &str, client_email: &str, now_secs: i64) -> String {
    let header = serde_json::json!({"alg": "RS256", "typ": "JWT", "kid": key_id});
    let claims = serde_json::json!({
        "iss": client_email,
        "scope": SCOPES,
        "aud": AUDIENCE,
        "iat": now_secs,
        "exp": now_secs + ASSERTION_LIFETIME_SECS,
    });
    format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    )
}

/// The endpoint's answer (`expires_in` may be a string).
#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    expires_in: Option<serde_json::Value>,
}

/// An access token and when it stops working.
#[derive(Clone)]
pub struct AccessToken {
    /// The bearer.
    pub token: SecretString,
    /// When it expires.
    pub expires_at: Timestamp,
}

/// Whether `cached` may still be handed out at `now`.
pub fn fresh(cached: &AccessToken, now: Timestamp) -> bool {
    fresh_until(cached.expires_at, now)
}

/// Whether a token expiring at `expires_at` has more than [`REFRESH_MARGIN`] left at
/// `now`.
pub fn fresh_until(expires_at: Timestamp, now: Timestamp) -> bool {
    let margin = time::Duration::try_from(REFRESH_MARGIN).unwrap_or(time::Duration::ZERO);
    now < expires_at - margin
}

/// The token source of one account.
pub struct TokenSource {
    signer: Signer,
    token_url: String,
    client: reqwest::Client,
    cached: Mutex<Option<AccessToken>>,
    minting: tokio::sync::Mutex<()>,
    /// The token each holder (a cluster's credentials) was last handed, until it expires.
    handed: Mutex<HashMap<String, AccessToken>>,
}

impl TokenSource {
    /// A source minting at `token_url` with `client`.
    pub fn new(signer: Signer, token_url: String, client: reqwest::Client) -> Self {
        Self {
            signer,
            token_url,
            client,
            cached: Mutex::new(None),
            minting: tokio::sync::Mutex::new(()),
            handed: Mutex::new(HashMap::new()),
        }
    }

    fn handed(&self) -> std::sync::MutexGuard<'_, HashMap<String, AccessToken>> {
        self.handed.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn cached(&self) -> std::sync::MutexGuard<'_, Option<AccessToken>> {
        self.cached.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A token with at least [`REFRESH_MARGIN`] of life left at `now`, minting one when
    /// the cache has none.
    pub async fn token(&self, now: Timestamp) -> ProviderResult<AccessToken> {
        if let Some(t) = self.cached().clone().filter(|t| fresh(t, now)) {
            return Ok(t);
        }
        let _one = self.minting.lock().await;
        // Another caller may have minted while this one waited.
        if let Some(t) = self.cached().clone().filter(|t| fresh(t, now)) {
            return Ok(t);
        }
        let t = self.mint(now).await?;
        *self.cached() = Some(t.clone());
        Ok(t)
    }

    /// Forgets the cached token if it is `refused` (a 401 answered it), so the next
    /// call mints anew; a token minted meanwhile by another caller is kept.
    pub fn invalidate(&self, refused: &SecretString) {
        let mut c = self.cached();
        if c.as_ref().is_some_and(|t| t.token == *refused) {
            *c = None;
        }
    }

    /// Forgets the cached token, whichever it is.
    pub fn invalidate_all(&self) {
        *self.cached() = None;
    }

    /// Records that `holder` was handed `token` at `now`. A record is kept for
    /// [`HANDED_KEPT`] after its token expired (a holder still using it then is refused
    /// and must not forget a newer token), so there is one per holder served lately.
    pub fn hand(&self, holder: &str, token: &AccessToken, now: Timestamp) {
        let mut handed = self.handed();
        handed.retain(|_, t| now < t.expires_at + HANDED_KEPT);
        handed.insert(holder.to_owned(), token.clone());
    }

    /// `holder` was refused its token: the cached token is forgotten if it is that one
    /// (the next call mints anew), kept if it is newer — every holder refused one old
    /// token then shares one new one, instead of each forgetting the one the previous
    /// holder just got. A holder with no token on record forgets whichever is cached.
    pub fn invalidate_for(&self, holder: &str) {
        let refused = self.handed().remove(holder);
        match refused {
            Some(t) => self.invalidate(&t.token),
            None => self.invalidate_all(),
        }
    }

    async fn mint(&self, now: Timestamp) -> ProviderResult<AccessToken> {
        let now_secs = now.unix_ms().div_euclid(1000);
        let assertion = self.signer.assertion(now_secs)?;
        let form = [("grant_type", GRANT_TYPE), ("assertion", assertion.as_str())];
        let body = serde_urlencoded_pairs(&form);
        let resp = self
            .client
            .post(&self.token_url)
            .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .map_err(|e| ProviderError::Transient {
                message: format!("POST token: {}", failure_kind(&e)),
            })?;
        let status = resp.status().as_u16();
        let text = resp.text().await.map_err(|e| ProviderError::Transient {
            message: format!("POST token: {}", failure_kind(&e)),
        })?;
        if !(200..300).contains(&status) {
            let e = classify_token(status, &text, &[&assertion]);
            tracing::debug!(status, error = %e, "the GKE token endpoint refused");
            return Err(e);
        }
        let answer: TokenAnswer =
            serde_json::from_str(&text).map_err(|_| ProviderError::Transient {
                message: format!("POST token: {status}: the answer is not a token"),
            })?;
        let secs = match answer.expires_in {
            Some(serde_json::Value::Number(n)) => n.as_i64(),
            Some(serde_json::Value::String(s)) => s.trim().parse().ok(),
            _ => None,
        }
        .unwrap_or(3600)
        .clamp(0, 24 * 3600);
        if answer.access_token.is_empty() {
            return Err(ProviderError::Transient {
                message: format!("POST token: {status}: empty token"),
            });
        }
        Ok(AccessToken {
            token: SecretString::new(answer.access_token),
            expires_at: now + time::Duration::seconds(secs),
        })
    }
}

/// `application/x-www-form-urlencoded` of `pairs` (base64url and the grant URN need
/// only `:` escaped, but every reserved byte is).
fn serde_urlencoded_pairs(pairs: &[(&str, &str)]) -> String {
    let mut out = reqwest::Url::parse("http://x/").expect("static url");
    out.query_pairs_mut().extend_pairs(pairs);
    out.query().unwrap_or_default().to_owned()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn decode(part: &str) -> serde_json::Value {
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
    }

    #[test]
    fn the_grant_names_the_key_the_scopes_and_googles_audience() {
        let input = signing_input("kid123", "bc@p.iam.gserviceaccount.com", 1_800_000_000);
        let (h, c) = input.split_once('.').unwrap();
        assert!(!input.contains('='), "unpadded");
        assert_eq!(decode(h), serde_json::json!({"alg": "RS256", "typ": "JWT", "kid": "kid123"}));
        let claims = decode(c);
        assert_eq!(claims["iss"], "bc@p.iam.gserviceaccount.com");
        assert_eq!(claims["aud"], AUDIENCE);
        assert_eq!(claims["iat"], 1_800_000_000);
        assert_eq!(claims["exp"], 1_800_000_000 + 3600);
        let scopes: Vec<&str> = claims["scope"].as_str().unwrap().split(' ').collect();
        assert_eq!(
            scopes,
            [
                "https://www.googleapis.com/auth/cloud-platform",
                "https://www.googleapis.com/auth/userinfo.email"
            ]
        );
        assert!(claims.get("sub").is_none(), "no domain-wide delegation");
    }

    /// A throwaway 2048-bit RSA key made for these tests (`openssl genpkey`), in a key
    /// file as Google writes one.
    pub(crate) fn test_key() -> ServiceAccountKey {
        let pem = include_str!("../../tests/data/gke-test-key.pem");
        let file = serde_json::json!({"type": "service_account", "project_id": "bc-test-project",
            "private_key_id": "0123abcd", "private_key": pem,
            "client_email": "bc@bc-test-project.iam.gserviceaccount.com",
            "token_uri": "https://attacker.example/token"});
        ServiceAccountKey::parse(&SecretString::new(file.to_string())).expect("test key")
    }

    #[test]
    fn the_assertion_is_signed_rs256_by_the_accounts_key() {
        use ring::signature::{KeyPair, RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};
        let key = test_key();
        let signer = Signer::new(&key).unwrap();
        let jwt = signer.assertion(1_800_000_000).unwrap();
        let (input, sig) = jwt.rsplit_once('.').unwrap();
        assert_eq!(input, signing_input("0123abcd", &key.client_email, 1_800_000_000));
        let sig = URL_SAFE_NO_PAD.decode(sig).unwrap();
        assert_eq!(sig.len(), 256);
        let public = signer.pair.public_key().as_ref().to_vec();
        let verifier = UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, public);
        verifier.verify(input.as_bytes(), &sig).expect("verifies");
        assert!(verifier.verify(b"other", &sig).is_err());
        // A key the shape check passes but ring cannot load is refused without quoting it.
        let mut der = key.pkcs8_der().to_vec();
        der.truncate(60);
        let b64 = base64::engine::general_purpose::STANDARD.encode(&der);
        let pem = format!("-----BEGIN PRIVATE KEY-----\n{b64}\n-----END PRIVATE KEY-----\n");
        let file = serde_json::json!({"type": "service_account", "private_key_id": "k1",
            "private_key": pem, "client_email": "a@b.iam.gserviceaccount.com"});
        let broken = ServiceAccountKey::parse(&SecretString::new(file.to_string())).unwrap();
        let Err(ProviderError::Refused { message }) = Signer::new(&broken) else { panic!() };
        assert!(message.contains("credentials.serviceAccountKey") && !message.contains(&b64[..20]));
    }

    #[test]
    fn a_token_is_replaced_five_minutes_before_it_expires() {
        let at = |ms: i64| Timestamp::from_unix_ms(ms);
        let t = AccessToken { token: SecretString::new("ya29.x"), expires_at: at(3_600_000) };
        assert!(fresh(&t, at(0)));
        assert!(fresh(&t, at(3_299_999)));
        assert!(!fresh(&t, at(3_300_000)));
        assert!(!fresh(&t, at(4_000_000)));
    }

    #[test]
    fn a_holder_refused_a_token_that_expired_keeps_the_newer_one_another_holder_got() {
        let at = |secs: i64| Timestamp::from_unix_ms(secs * 1000);
        let token = |t: &str, expires: i64| AccessToken {
            token: SecretString::new(t),
            expires_at: at(expires),
        };
        let source = TokenSource::new(
            Signer::new(&test_key()).unwrap(),
            "http://127.0.0.1:9/token".into(),
            crate::http::client(Duration::from_secs(1), Duration::from_secs(1)).unwrap(),
        );
        let (old, new) = (token("ya29.old", 3_600), token("ya29.new", 7_300));
        source.hand("c1", &old, at(0));
        source.hand("c2", &old, at(0));
        // The old token expired unrenewed; c1 is refused first and gets the new one.
        *source.cached() = Some(new.clone());
        source.invalidate_for("c1");
        assert!(source.cached().is_some(), "c1 was refused the old token, not the new one");
        source.hand("c1", &new, at(3_700));
        // c2, refused the same old token after c1 got the new one, keeps it too.
        source.invalidate_for("c2");
        assert!(source.cached().as_ref().is_some_and(|t| t.token == new.token));
        // A refusal of the token that is cached forgets it.
        source.invalidate_for("c1");
        assert!(source.cached().is_none());
    }

    #[test]
    fn the_form_escapes_the_grant_and_keeps_the_assertion_whole() {
        let body = serde_urlencoded_pairs(&[("grant_type", GRANT_TYPE), ("assertion", "a.b-c_d")]);
        assert_eq!(
            body,
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=a.b-c_d"
        );
    }
}
