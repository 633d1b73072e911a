//! Authentication (SPEC §2, §3, §9): bearer API tokens and node credentials, each looked
//! up by its SHA-256 hash through the store port.
//!
//! Invariants: a missing, malformed, unknown or revoked credential is one and the same
//! `UNAUTHENTICATED` answer; the secret is never compared as a string, only hashed and
//! looked up by its hash (so no comparison's time depends on where a guess differs from
//! a real token); the credential never reaches a log line, an error or a response. The
//! token format and hash are bc-domain's ([`ApiTokenSecret`], [`sha256_hex`]).

use axum::http::{HeaderMap, header};
use bc_domain::agent::AGENT_SECRET_MAX;
use bc_domain::model::{ApiToken, Node};
use bc_domain::ports::Store;
use bc_domain::token::{ApiTokenSecret, sha256_hex};

use crate::error::ApiError;

pub use bc_api_types::meta::Authentication;

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
pub fn api_token_lookup_hash(presented: &str) -> Option<String> {
    ApiTokenSecret::parse(presented).ok().map(|t| t.hash())
}

/// The lookup hash of a presented agent secret (join token or node credential), or
/// `None` when it cannot be one (empty, over 256 bytes, or not visible ASCII).
pub fn agent_secret_lookup_hash(presented: &str) -> Option<String> {
    let bytes = presented.as_bytes();
    let shaped = !bytes.is_empty()
        && bytes.len() <= AGENT_SECRET_MAX
        && bytes.iter().all(u8::is_ascii_graphic);
    shaped.then(|| sha256_hex(bytes))
}

/// The bearer credential of a request, if it has an `Authorization: Bearer …` header.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, credential) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| credential.trim())
}

/// The one answer for every failed authentication, so no failure tells another apart.
pub(crate) fn refused() -> ApiError {
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
            let hash = bearer(headers).and_then(agent_secret_lookup_hash).ok_or_else(refused)?;
            store.node_find_by_credential_hash(&hash).await?.map(Caller::Node).ok_or_else(refused)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_shape_and_hash_are_bc_domains() {
        let token = ApiTokenSecret::generate([7; 32]);
        let plain = token.expose();
        assert_eq!(api_token_lookup_hash(plain), Some(token.hash()));
        for bad in ["", "bc_", &plain[..45], &format!("{plain}A"), &plain.replace("bc_", "xx_")] {
            assert_eq!(api_token_lookup_hash(bad), None, "{bad}");
        }
        assert_eq!(agent_secret_lookup_hash("n0de-cred"), Some(sha256_hex(b"n0de-cred")));
        assert!(agent_secret_lookup_hash("has space").is_none());
        assert!(agent_secret_lookup_hash(&"x".repeat(257)).is_none());
    }

    #[test]
    fn reads_the_bearer() {
        let token = ApiTokenSecret::generate([7; 32]);
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h), None);
        h.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer(&h), None);
        h.insert(header::AUTHORIZATION, format!("bearer {}", token.expose()).parse().unwrap());
        assert_eq!(bearer(&h), Some(token.expose()));
    }
}
