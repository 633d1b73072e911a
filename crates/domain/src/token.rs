//! API tokens (SPEC §3): the `bc_` + 43 base64url format, generation from randomness the
//! caller supplies (the domain has no RNG), and the SHA-256 hash under which a token is
//! stored and looked up. Also the one hash function every stored secret and request body
//! uses, [`sha256_hex`], and [`SecretString`], the in-memory form of every other secret.
//!
//! Invariant: a token exists in plaintext only inside an [`ApiTokenSecret`], whose `Debug`
//! never prints it; what is stored is [`ApiTokenSecret::hash`], and a string that is not
//! of the exact format never reaches a hash lookup.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// The prefix of every API token.
pub const API_TOKEN_PREFIX: &str = "bc_";
/// Characters after the prefix: 256 bits in unpadded base64url.
pub const API_TOKEN_BODY_LEN: usize = 43;

/// Why a string is not an API token. Deliberately vague: the API answers
/// `UNAUTHENTICATED` without saying which rule failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not an API token: expected \"bc_\" and 43 base64url characters")]
pub struct TokenFormatError;

/// An API token in plaintext: shown once when made, then only its hash is kept. `==`
/// is [`ct_eq`]: its time does not depend on where two tokens differ.
#[derive(Clone)]
pub struct ApiTokenSecret(String);

impl PartialEq for ApiTokenSecret {
    fn eq(&self, other: &Self) -> bool {
        ct_eq(self.0.as_bytes(), other.0.as_bytes())
    }
}
impl Eq for ApiTokenSecret {}

/// Equality of secret material whose time depends only on the lengths, never on where
/// the bytes first differ (so a guess cannot be refined a byte at a time). Every `==`
/// on a secret type goes through it; authentication itself compares no secrets at all
/// (it hashes the presented one and looks the hash up).
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // `black_box` keeps the optimizer from turning the fold into an early exit.
    std::hint::black_box(diff) == 0
}

/// A secret held in memory: `Debug` and `Display` never print it, and `==` takes the
/// same time wherever two secrets differ ([`ct_eq`]).
#[derive(Clone)]
pub struct SecretString(String);

impl PartialEq for SecretString {
    fn eq(&self, other: &Self) -> bool {
        ct_eq(self.0.as_bytes(), other.0.as_bytes())
    }
}
impl Eq for SecretString {}

impl SecretString {
    /// Wraps a secret.
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }
    /// The secret itself; call only where it must be used (a request header, a Secret).
    pub fn expose(&self) -> &str {
        &self.0
    }
}
impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}
/// Reading a secret in (a request body, an opened credentials document) is safe; writing
/// one out is not, so there is no `Serialize`: a document that must carry the secret
/// names [`SecretString::serialize_exposed`] on that one field.
impl<'de> Deserialize<'de> for SecretString {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(SecretString)
    }
}
impl SecretString {
    /// Serializes the secret itself, for `#[serde(serialize_with = …)]` on the few
    /// documents that must carry it (a join request, a sealed credentials document).
    pub fn serialize_exposed<S: serde::Serializer>(
        s: &SecretString,
        ser: S,
    ) -> Result<S::Ok, S::Error> {
        ser.serialize_str(&s.0)
    }
}

impl ApiTokenSecret {
    /// A new token from 256 random bits the caller draws from the operating system.
    pub fn generate(random: [u8; 32]) -> Self {
        Self(format!("{API_TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(random)))
    }

    /// A token as presented in `Authorization: Bearer …`, if it has the exact format.
    pub fn parse(s: &str) -> Result<Self, TokenFormatError> {
        let body = s.strip_prefix(API_TOKEN_PREFIX).ok_or(TokenFormatError)?;
        // Length first, then the alphabet; decoding also refuses non-canonical trailing
        // bits, so each 256-bit value has exactly one spelling (and one hash).
        if body.len() != API_TOKEN_BODY_LEN {
            return Err(TokenFormatError);
        }
        match URL_SAFE_NO_PAD.decode(body) {
            Ok(bytes) if bytes.len() == 32 => Ok(Self(s.to_owned())),
            _ => Err(TokenFormatError),
        }
    }

    /// The token itself: print it once to the operator, never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The stored form: SHA-256 of the token's text, lower-case hex
    /// (`ApiToken::token_hash`, looked up by `AgentRepo::api_token_find`).
    pub fn hash(&self) -> String {
        sha256_hex(self.0.as_bytes())
    }
}

impl fmt::Debug for ApiTokenSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiTokenSecret([redacted])")
    }
}

#[cfg(test)]
mod ct_tests {
    use super::*;

    #[test]
    fn ct_eq_is_equality() {
        assert!(ct_eq(b"", b""));
        assert!(ct_eq(b"bc_abc", b"bc_abc"));
        assert!(!ct_eq(b"bc_abc", b"bc_abd"));
        assert!(!ct_eq(b"bc_abc", b"xc_abc"));
        assert!(!ct_eq(b"bc_abc", b"bc_ab"));
        let t = ApiTokenSecret::generate([1; 32]);
        assert_eq!(t, ApiTokenSecret::parse(t.expose()).unwrap());
        assert_ne!(t, ApiTokenSecret::generate([2; 32]));
        let s = SecretString::new("x");
        assert!(s == SecretString::new("x"));
        assert!(s != SecretString::new("y"));
    }
}

/// The prefix of every join token (SPEC §9), so a leaked one is recognisable.
pub const JOIN_TOKEN_PREFIX: &str = "bcj_";

/// A substrate's join token from 256 random bits the caller draws: `bcj_` and 43
/// base64url characters. It exists in plaintext only in the cluster's `bcd-join` Secret;
/// the store keeps [`sha256_hex`] of its text, which is also what a Secret's digested
/// `joinToken` value reads (`ports::cluster::digest_secret_values`).
pub fn join_token(random: [u8; 32]) -> SecretString {
    SecretString::new(format!("{JOIN_TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(random)))
}

/// SHA-256 of `bytes` as 64 lower-case hex digits: the stored form of every secret that
/// is looked up by value (API tokens, join tokens, node credentials) and of a create
/// request's canonical body (idempotency).
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest.iter() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn generated_tokens_have_the_spec_format() {
        let t = ApiTokenSecret::generate([0xfb; 32]);
        assert_eq!(t.expose().len(), 3 + 43);
        assert!(t.expose().starts_with("bc_"));
        assert!(
            t.expose()[3..].bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        );
        assert_eq!(ApiTokenSecret::parse(t.expose()), Ok(t.clone()));
        assert!(!format!("{t:?}").contains(&t.expose()[3..]), "Debug never prints the token");
    }

    #[test]
    fn malformed_tokens_are_refused() {
        let good = ApiTokenSecret::generate([7; 32]).expose().to_owned();
        for bad in [
            "",
            "bc_",
            &good[..good.len() - 1],
            &format!("{good}A"),
            &good.replace("bc_", "xx_"),
            &format!("bc_{}", "+".repeat(43)),
            // Same length, but the last character carries bits outside the 256.
            &format!("{}B", &good[..good.len() - 1]),
        ] {
            if bad == good {
                continue;
            }
            assert_eq!(ApiTokenSecret::parse(bad), Err(TokenFormatError), "{bad:?}");
        }
    }

    #[test]
    fn join_tokens_carry_256_bits_and_hash_like_every_secret() {
        let t = join_token([9; 32]);
        assert!(t.expose().starts_with(JOIN_TOKEN_PREFIX));
        assert_eq!(t.expose().len(), JOIN_TOKEN_PREFIX.len() + API_TOKEN_BODY_LEN);
        assert_ne!(join_token([8; 32]), t);
        assert!(!format!("{t:?}").contains(&t.expose()[4..]));
    }

    #[test]
    fn hash_is_sha256_hex_of_the_token_text() {
        // FIPS 180-2 test vector.
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let t = ApiTokenSecret::generate([1; 32]);
        assert_eq!(t.hash(), sha256_hex(t.expose().as_bytes()));
        assert_ne!(t.hash(), ApiTokenSecret::generate([2; 32]).hash());
    }

    proptest! {
        /// Every 256-bit value makes a token that parses back to itself.
        #[test]
        fn every_random_value_round_trips(bytes in proptest::array::uniform32(any::<u8>())) {
            let t = ApiTokenSecret::generate(bytes);
            prop_assert_eq!(ApiTokenSecret::parse(t.expose()), Ok(t.clone()));
        }
    }
}
