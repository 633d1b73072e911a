//! Authentication (SPEC §2, §3, §9): bearer API tokens and node credentials, each looked
//! up by its SHA-256 hash through the store port.
//!
//! Invariants: a missing, malformed, unknown or revoked credential is one and the same
//! `UNAUTHENTICATED` answer; the secret is never compared as a string, only hashed (the
//! format check reads every byte whatever it finds, so its time says nothing of where a
//! token differs); the credential never reaches a log line, an error or a response.
//! The token's format and hash are used in ONE function, [`api_token_lookup_hash`], so
//! they can be pointed at bc-domain's helpers when those land there.

use axum::http::{HeaderMap, header};
use bc_domain::model::{ApiToken, Node};
use bc_domain::ports::Store;
use sha2::{Digest, Sha256};

use crate::error::ApiError;

/// `bc_` then 43 base64url characters (256 random bits).
const API_TOKEN_PREFIX: &str = "bc_";
/// Length of an API token's random part.
const API_TOKEN_BODY_LEN: usize = 43;
/// Most bytes of a node credential we are willing to hash.
const NODE_CREDENTIAL_MAX: usize = 256;

/// How a method authenticates its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authentication {
    /// `Authorization: Bearer <api token>` (every tenant method).
    ApiToken,
    /// The join token in the body (`agents.join`); the handler checks it.
    JoinToken,
    /// `Authorization: Bearer <node credential>` (`agents.heartbeat`).
    NodeCredential,
}

/// Who is calling, once authenticated.
#[derive(Debug, Clone)]
pub enum Caller {
    /// An API token and its grants.
    Token(ApiToken),
    /// A joined node.
    Node(Node),
    /// No bearer credential: the method authenticates from its body (`agents.join`).
    Anonymous,
}

impl Caller {
    /// The key the rate limiter counts this caller under (never the secret).
    pub fn rate_key(&self) -> Option<String> {
        match self {
            Caller::Token(t) => Some(t.token_id.to_string()),
            Caller::Node(n) => Some(n.node_id.to_string()),
            Caller::Anonymous => None,
        }
    }
}

/// The lookup hash of a presented API token, or `None` when it is not shaped like one.
/// The single place that knows the token format and its hash.
pub fn api_token_lookup_hash(presented: &str) -> Option<String> {
    let bytes = presented.as_bytes();
    let shaped = bytes.len() == API_TOKEN_PREFIX.len() + API_TOKEN_BODY_LEN
        && bytes.starts_with(API_TOKEN_PREFIX.as_bytes())
        // `fold`, not `all`: read every byte, not up to the first bad one.
        && bytes[API_TOKEN_PREFIX.len()..].iter().fold(true, |ok, b| ok & is_base64url(*b));
    shaped.then(|| sha256_hex(bytes))
}

/// The lookup hash of a presented node credential, or `None` when it cannot be one
/// (empty, over 256 bytes, or not visible ASCII).
pub fn node_credential_lookup_hash(presented: &str) -> Option<String> {
    let bytes = presented.as_bytes();
    let shaped = !bytes.is_empty()
        && bytes.len() <= NODE_CREDENTIAL_MAX
        && bytes.iter().fold(true, |ok, b| ok & b.is_ascii_graphic());
    shaped.then(|| sha256_hex(bytes))
}

fn is_base64url(b: u8) -> bool {
    b.is_ascii_alphanumeric() | (b == b'-') | (b == b'_')
}

/// SHA-256 of `bytes` as lower-case hex: how tokens and credentials are stored.
fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The bearer credential of a request, if it has an `Authorization: Bearer …` header.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, credential) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| credential.trim())
}

/// The one answer for every failed authentication, so no failure tells another apart.
fn refused() -> ApiError {
    ApiError::unauthenticated("a valid credential is required: Authorization: Bearer <token>")
}

/// Authenticates a request the way its method asks.
pub async fn authenticate(
    store: &dyn Store,
    how: Authentication,
    headers: &HeaderMap,
) -> Result<Caller, ApiError> {
    match how {
        Authentication::JoinToken => Ok(Caller::Anonymous),
        Authentication::ApiToken => {
            let hash = bearer(headers).and_then(api_token_lookup_hash).ok_or_else(refused)?;
            match store.api_token_find(&hash).await? {
                Some(token) if token.revoked_at.is_none() => Ok(Caller::Token(token)),
                _ => Err(refused()),
            }
        }
        Authentication::NodeCredential => {
            let hash = bearer(headers).and_then(node_credential_lookup_hash).ok_or_else(refused)?;
            store.node_find_by_credential_hash(&hash).await?.map(Caller::Node).ok_or_else(refused)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "bc_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA-";

    #[test]
    fn token_shape_and_hash() {
        assert_eq!(TOKEN.len(), 46);
        let h = api_token_lookup_hash(TOKEN).unwrap();
        assert_eq!(h.len(), 64);
        assert_eq!(h, sha256_hex(TOKEN.as_bytes()));
        for bad in [
            "",
            "bc_",
            &TOKEN[..45],
            &format!("{TOKEN}A"),
            &TOKEN.replace("bc_", "xx_"),
            &TOKEN.replace('-', "+"),
        ] {
            assert_eq!(api_token_lookup_hash(bad), None, "{bad}");
        }
        assert!(node_credential_lookup_hash("n0de-cred").is_some());
        assert!(node_credential_lookup_hash("has space").is_none());
        assert!(node_credential_lookup_hash(&"x".repeat(257)).is_none());
    }

    #[test]
    fn reads_the_bearer() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h), None);
        h.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer(&h), None);
        h.insert(header::AUTHORIZATION, format!("bearer {TOKEN}").parse().unwrap());
        assert_eq!(bearer(&h), Some(TOKEN));
    }
}
