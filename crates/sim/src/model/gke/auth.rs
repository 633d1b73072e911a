//! Google's OAuth 2.0 side of the simulated GKE: the service-account keys the simulator
//! issues, the JWT-bearer grant it verifies (RFC 7523, research/gke.md §1) and the access
//! tokens it mints.
//!
//! Invariants: a token is minted only for an assertion signed (RS256, checked with ring)
//! by a key the simulator issued and has not deleted, whose claims name that key's
//! account, an accepted audience and a lifetime of at most an hour around `now`; every
//! refusal is `invalid_grant` with Google's description and never echoes the assertion.
//!
//! Keys: ring signs and verifies RSA but cannot generate RSA keys, and the `rsa` crate
//! carries an unfixed advisory (RUSTSEC-2023-0071), so the simulator ships four 2048-bit
//! PKCS#8 keys made once with `openssl genpkey` (`gke_api/keys/`) and each issued key
//! takes one of them under a fresh `private_key_id`. They are test keys, published here.

use std::collections::BTreeMap;

use base64::Engine as _;
use bc_domain::Timestamp;

/// The key material the simulator hands out (PKCS#8 PEM, never used outside it).
const KEY_PEMS: [&str; 4] = [
    include_str!("../../gke_api/keys/key0.pem"),
    include_str!("../../gke_api/keys/key1.pem"),
    include_str!("../../gke_api/keys/key2.pem"),
    include_str!("../../gke_api/keys/key3.pem"),
];

/// Google's token URL: the audience google-auth always sends, wherever it posts.
pub const GOOGLE_TOKEN_URL: &str = "https://oauth2.googleapis.com/token";

/// An access token's lifetime (Google's: one hour).
pub const TOKEN_LIFETIME_SECONDS: i64 = 3600;

/// How far `iat` may lie in the future, and `exp` in the past, for clock skew.
pub const SKEW_SECONDS: i64 = 300;

/// A service-account key the simulator issued.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IssuedKey {
    /// `private_key_id` (the JWT header's `kid`).
    pub kid: String,
    /// `client_email`.
    pub client_email: String,
    /// `project_id`.
    pub project_id: String,
    /// Which of the shipped key materials it is.
    pub material: usize,
    /// Deleted keys sign nothing the simulator accepts.
    pub deleted: bool,
}

impl IssuedKey {
    /// The PKCS#8 PEM of the private key.
    pub fn private_key_pem(&self) -> &'static str {
        KEY_PEMS[self.material % KEY_PEMS.len()]
    }

    /// The key file Google hands out (research/gke.md §1), with `token_uri` set to
    /// `token_uri` (the simulator's own).
    pub fn key_file(&self, token_uri: &str) -> serde_json::Value {
        serde_json::json!({
            "type": "service_account",
            "project_id": self.project_id,
            "private_key_id": self.kid,
            "private_key": self.private_key_pem(),
            "client_email": self.client_email,
            "client_id": client_id(&self.kid),
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": token_uri,
            "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
            "client_x509_cert_url": format!(
                "https://www.googleapis.com/robot/v1/metadata/x509/{}",
                self.client_email.replace('@', "%40")
            ),
            "universe_domain": "googleapis.com",
        })
    }
}

/// A numeric client id derived from the key id (stable, 21 digits as Google's).
fn client_id(kid: &str) -> String {
    format!("1{:020}", crate::fnv1a(kid))
}

/// The DER of a PKCS#8 PEM.
pub fn pem_der(pem: &str) -> Option<Vec<u8>> {
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD.decode(body.trim()).ok()
}

/// The RSA key pair of an issued key.
pub fn key_pair(key: &IssuedKey) -> Option<ring::rsa::KeyPair> {
    ring::rsa::KeyPair::from_pkcs8(&pem_der(key.private_key_pem())?).ok()
}

/// Base64url with or without padding (gcp_auth and yup-oauth2 pad their segments).
fn b64url(s: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(s.trim_end_matches('=')).ok()
}

/// An access token the simulator minted.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AccessToken {
    /// The service account it was minted for.
    pub client_email: String,
    /// The key that signed the grant.
    pub kid: String,
    /// When it stops working.
    pub expires_at: Timestamp,
}

/// Why an assertion is refused: Google's `error_description` (the `error` is always
/// `invalid_grant`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantError(pub String);

const BAD_SIGNATURE: &str = "Invalid JWT Signature.";
const BAD_TIMES: &str = "Invalid JWT: Token must be a short-lived token (60 minutes) and in a \
                         reasonable timeframe. Check your iat and exp values in the JWT claim.";

/// Verifies a JWT-bearer assertion against `keys` at `now` for one of `audiences`; the key
/// that signed it.
pub fn verify(
    assertion: &str,
    keys: &BTreeMap<String, IssuedKey>,
    audiences: &[&str],
    now: Timestamp,
) -> Result<IssuedKey, GrantError> {
    let bad = |m: &str| GrantError(m.to_owned());
    let parts: Vec<&str> = assertion.split('.').collect();
    let [h, c, s] = parts[..] else {
        return Err(bad("Invalid JWT: the assertion is not a signed JWT (three segments)."));
    };
    let header: serde_json::Value = b64url(h)
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| bad("Invalid JWT: the header is not base64url-encoded JSON."))?;
    let claims: serde_json::Value = b64url(c)
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| bad("Invalid JWT: the claim set is not base64url-encoded JSON."))?;
    if header.get("alg").and_then(|a| a.as_str()) != Some("RS256") {
        return Err(bad("Invalid JWT: the signing algorithm must be RS256."));
    }
    let iss = claims.get("iss").and_then(|v| v.as_str()).unwrap_or_default();
    let key = match header.get("kid").and_then(|k| k.as_str()) {
        Some(kid) => keys.get(kid),
        None => keys.values().find(|k| !k.deleted && k.client_email == iss),
    };
    let key = key.filter(|k| !k.deleted).ok_or_else(|| bad(BAD_SIGNATURE))?;
    let signature = b64url(s).ok_or_else(|| bad(BAD_SIGNATURE))?;
    let pair = key_pair(key).ok_or_else(|| bad(BAD_SIGNATURE))?;
    let public = ring::signature::UnparsedPublicKey::new(
        &ring::signature::RSA_PKCS1_2048_8192_SHA256,
        pair.public().as_ref(),
    );
    // The signature covers the segments exactly as sent (padded ones included).
    let signed = &assertion[..h.len() + 1 + c.len()];
    public.verify(signed.as_bytes(), &signature).map_err(|_| bad(BAD_SIGNATURE))?;
    if iss != key.client_email {
        return Err(bad("Invalid JWT: the issuer (iss) is not the key's service account."));
    }
    let aud = claims.get("aud").and_then(|v| v.as_str()).unwrap_or_default();
    if !audiences.contains(&aud) {
        return Err(GrantError(format!(
            "Invalid JWT: Failed audience check. The right audience is {GOOGLE_TOKEN_URL}"
        )));
    }
    let number = |k: &str| claims.get(k).and_then(|v| v.as_i64());
    let (Some(iat), Some(exp)) = (number("iat"), number("exp")) else {
        return Err(bad(BAD_TIMES));
    };
    let now = now.unix_ms().div_euclid(1000);
    if exp <= iat
        || exp - iat > TOKEN_LIFETIME_SECONDS
        || iat > now + SKEW_SECONDS
        || exp < now - SKEW_SECONDS
    {
        return Err(bad(BAD_TIMES));
    }
    Ok(key.clone())
}

/// Signs `claims` with `key` as google-auth does (header `{typ, alg, kid}`), base64url
/// without padding — or with it (`padded`), as gcp_auth and yup-oauth2 write it. For
/// tests and tools that need an assertion.
pub fn sign(key: &IssuedKey, claims: &serde_json::Value, padded: bool) -> String {
    let engine = if padded {
        base64::engine::general_purpose::URL_SAFE
    } else {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
    };
    let header = serde_json::json!({"typ": "JWT", "alg": "RS256", "kid": key.kid});
    let signed =
        format!("{}.{}", engine.encode(header.to_string()), engine.encode(claims.to_string()));
    let pair = key_pair(key).expect("a shipped key parses");
    let mut sig = vec![0; pair.public().modulus_len()];
    pair.sign(
        &ring::signature::RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        signed.as_bytes(),
        &mut sig,
    )
    .expect("signing with a shipped key");
    format!("{signed}.{}", engine.encode(sig))
}
