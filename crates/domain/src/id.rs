//! Typed object ids (SPEC §2): `<prefix>_` then 26–52 lower-case Crockford base32
//! characters. One generic `Id<K>` serves every kind, so the parsing rule exists once.
//!
//! Invariant: an `Id<K>` value always satisfies its kind's rule; the only ways to build
//! one are `parse` (checked) and `from_ulid`/`generate` (valid by construction).

use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::str::FromStr;
use std::sync::OnceLock;

use regex::Regex;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The alphabet of the id body: lower-case Crockford base32 (no i, l, o, u).
pub const ID_ALPHABET: &str = "0123456789abcdefghjkmnpqrstvwxyz";
/// Fewest characters after `<prefix>_`.
pub const ID_BODY_MIN: usize = 26;
/// Most characters after `<prefix>_`.
pub const ID_BODY_MAX: usize = 52;
/// The rule of an id's body (after `<prefix>_`): [`ID_ALPHABET`], 26 to 52 characters.
/// The parser matches it and [`Id::pattern`] prints it, so the two cannot drift.
pub const ID_BODY_PATTERN: &str = "[0-9a-hjkmnp-tv-z]{26,52}";

/// A kind of id: its prefix and its total length cap.
pub trait IdKind: 'static {
    /// The prefix before `_`, e.g. `pool`.
    const PREFIX: &'static str;
    /// Most characters in all (prefix, `_` and body); `usize::MAX` when only the body rule caps it.
    const MAX_LEN: usize = usize::MAX;
    /// A noun for messages, e.g. `pool id`.
    const NOUN: &'static str;
}

/// Why a string is not an id of a kind: each variant names the rule that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The string does not start with `<prefix>_`.
    #[error("{noun} must start with \"{prefix}_\"")]
    Prefix {
        /// The noun of the kind.
        noun: &'static str,
        /// The expected prefix.
        prefix: &'static str,
    },
    /// The body is shorter than 26 or longer than 52 characters.
    #[error("{noun} must have 26 to 52 characters after \"{prefix}_\", not {len}")]
    BodyLength {
        /// The noun of the kind.
        noun: &'static str,
        /// The expected prefix.
        prefix: &'static str,
        /// The body's length.
        len: usize,
    },
    /// The body has a character outside `[0-9a-hjkmnp-tv-z]`.
    #[error("{noun} may only use the characters [0-9a-hjkmnp-tv-z] after \"{prefix}_\"")]
    Alphabet {
        /// The noun of the kind.
        noun: &'static str,
        /// The expected prefix.
        prefix: &'static str,
    },
    /// The whole id is longer than its kind allows.
    #[error("{noun} must be at most {max} characters")]
    TooLong {
        /// The noun of the kind.
        noun: &'static str,
        /// The cap.
        max: usize,
    },
}

/// A typed id. Cheap to clone; compares and hashes as its string.
pub struct Id<K: IdKind> {
    value: String,
    kind: PhantomData<fn() -> K>,
}

/// Whether an id body (already of a valid length) matches [`ID_BODY_PATTERN`].
fn body_matches(body: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(&format!("^{ID_BODY_PATTERN}$")).expect("static regex"))
        .is_match(body)
}

impl<K: IdKind> Id<K> {
    /// Parses an id with the exact rules of SPEC §2.
    pub fn parse(s: &str) -> Result<Self, IdError> {
        let body = s
            .strip_prefix(K::PREFIX)
            .and_then(|rest| rest.strip_prefix('_'))
            .ok_or(IdError::Prefix { noun: K::NOUN, prefix: K::PREFIX })?;
        let len = body.chars().count();
        if !(ID_BODY_MIN..=ID_BODY_MAX).contains(&len) {
            return Err(IdError::BodyLength { noun: K::NOUN, prefix: K::PREFIX, len });
        }
        if !body_matches(body) {
            return Err(IdError::Alphabet { noun: K::NOUN, prefix: K::PREFIX });
        }
        if s.len() > K::MAX_LEN {
            return Err(IdError::TooLong { noun: K::NOUN, max: K::MAX_LEN });
        }
        Ok(Self { value: s.to_owned(), kind: PhantomData })
    }

    /// An id whose body is the lower-case form of `ulid` (26 characters).
    pub fn from_ulid(ulid: ulid::Ulid) -> Self {
        let body = ulid.to_string().to_ascii_lowercase();
        Self { value: format!("{}_{}", K::PREFIX, body), kind: PhantomData }
    }

    /// A new id from a time (milliseconds since the Unix epoch) and 80 random bits, so
    /// ids sort by creation. The caller supplies both: the domain has no clock or RNG.
    pub fn generate(unix_ms: u64, random: u128) -> Self {
        Self::from_ulid(ulid::Ulid::from_parts(unix_ms, random))
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.value
    }

    /// The rule of this kind's ids as a regular expression, e.g.
    /// `^pool_[0-9a-hjkmnp-tv-z]{26,52}$` (the length cap comes on top: [`Self::max_len`]).
    pub fn pattern() -> String {
        format!("^{}_{ID_BODY_PATTERN}$", K::PREFIX)
    }

    /// Most characters of this kind's ids: the kind's cap, or what the body rule allows.
    pub fn max_len() -> usize {
        K::MAX_LEN.min(K::PREFIX.len() + 1 + ID_BODY_MAX)
    }

    /// The id's body with `_` written as `-`, for provider and Kubernetes names
    /// (`pool_01h…` → `pool-01h…`).
    pub fn dashed(&self) -> String {
        self.value.replace('_', "-")
    }
}

impl<K: IdKind> Clone for Id<K> {
    fn clone(&self) -> Self {
        Self { value: self.value.clone(), kind: PhantomData }
    }
}
impl<K: IdKind> PartialEq for Id<K> {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}
impl<K: IdKind> Eq for Id<K> {}
impl<K: IdKind> PartialOrd for Id<K> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<K: IdKind> Ord for Id<K> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.value.cmp(&other.value)
    }
}
impl<K: IdKind> Hash for Id<K> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.value.hash(state);
    }
}
impl<K: IdKind> fmt::Debug for Id<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.value)
    }
}
impl<K: IdKind> fmt::Display for Id<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.value)
    }
}
impl<K: IdKind> FromStr for Id<K> {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}
impl<K: IdKind> AsRef<str> for Id<K> {
    fn as_ref(&self) -> &str {
        &self.value
    }
}
impl<K: IdKind> Serialize for Id<K> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.value)
    }
}
impl<'de, K: IdKind> Deserialize<'de> for Id<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

macro_rules! id_kinds {
    ($($(#[$doc:meta])* $alias:ident, $kind:ident, $prefix:literal, $noun:literal $(, $max:literal)?;)*) => {$(
        #[doc = concat!("The kind of `", $prefix, "_…` ids.")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $kind {}
        impl IdKind for $kind {
            const PREFIX: &'static str = $prefix;
            const NOUN: &'static str = $noun;
            $(const MAX_LEN: usize = $max;)?
        }
        $(#[$doc])*
        pub type $alias = Id<$kind>;
    )*};
}

id_kinds! {
    /// A pool (at most 57 characters, so it is a valid label value).
    PoolId, PoolKind, "pool", "pool id", 57;
    /// A provider account.
    ProviderAccountId, ProviderAccountKind, "acct", "provider account id";
    /// A Kubernetes cluster row.
    ClusterId, ClusterKind, "cluster", "cluster id";
    /// A Kubernetes node pool row.
    NodePoolId, NodePoolKind, "nodepool", "node pool id";
    /// A load balancer.
    LoadBalancerId, LoadBalancerKind, "lb", "load balancer id";
    /// A booking.
    BookingId, BookingKind, "booking", "booking id";
    /// A joined node.
    NodeId, NodeKind, "node", "node id";
    /// An event.
    EventId, EventKind, "evt", "event id";
    /// An API token.
    TokenId, TokenKind, "tok", "token id";
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_a_ulid_id() {
        let id = PoolId::parse("pool_01hq3k5v9x8y7z6w5v4t3s2r1q").unwrap();
        assert_eq!(id.as_str(), "pool_01hq3k5v9x8y7z6w5v4t3s2r1q");
        assert_eq!(id.dashed(), "pool-01hq3k5v9x8y7z6w5v4t3s2r1q");
    }

    #[test]
    fn names_the_rule_that_failed() {
        assert!(matches!(
            PoolId::parse("acct_01hq3k5v9x8y7z6w5v4t3s2r1q"),
            Err(IdError::Prefix { .. })
        ));
        assert!(matches!(
            PoolId::parse("pool01hq3k5v9x8y7z6w5v4t3s2r1q"),
            Err(IdError::Prefix { .. })
        ));
        assert!(matches!(PoolId::parse("pool_01hq"), Err(IdError::BodyLength { len: 4, .. })));
        assert!(matches!(
            PoolId::parse("pool_01hq3k5v9x8y7z6w5v4t3s2r1i"),
            Err(IdError::Alphabet { .. })
        ));
        assert!(matches!(
            PoolId::parse("pool_01HQ3K5V9X8Y7Z6W5V4T3S2R1Q"),
            Err(IdError::Alphabet { .. })
        ));
        // "pool_" + 52 is exactly the 57-character cap, so both rules agree for pools.
        assert_eq!(PoolId::parse(&format!("pool_{}", "a".repeat(52))).unwrap().as_str().len(), 57);
        assert!(matches!(
            PoolId::parse(&format!("pool_{}", "a".repeat(53))),
            Err(IdError::BodyLength { len: 53, .. })
        ));
        assert!(ClusterId::parse(&format!("cluster_{}", "a".repeat(52))).is_ok());
        assert!(ClusterId::parse(&format!("cluster_{}", "a".repeat(53))).is_err());
        let msg = PoolId::parse("pool_x").unwrap_err().to_string();
        assert!(msg.contains("26 to 52"), "{msg}");
    }

    #[test]
    fn body_pattern_is_the_alphabet() {
        for c in 0u8..128 {
            let body = (c as char).to_string().repeat(ID_BODY_MIN);
            assert_eq!(body_matches(&body), ID_ALPHABET.contains(c as char), "{c}");
        }
        assert_eq!(PoolId::pattern(), "^pool_[0-9a-hjkmnp-tv-z]{26,52}$");
        assert_eq!((PoolId::max_len(), TokenId::max_len()), (57, 56));
    }

    #[test]
    fn generated_ids_sort_by_time_and_parse() {
        let a = LoadBalancerId::generate(1_700_000_000_000, 7);
        let b = LoadBalancerId::generate(1_700_000_000_001, 3);
        assert!(a < b);
        assert_eq!(LoadBalancerId::parse(a.as_str()).unwrap(), a);
        assert_eq!(a.as_str().len(), "lb_".len() + 26);
    }

    #[test]
    fn serde_uses_the_string_and_reports_the_rule() {
        let id = TokenId::generate(1, 2);
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"{id}\""));
        assert_eq!(serde_json::from_str::<TokenId>(&json).unwrap(), id);
        let err = serde_json::from_str::<TokenId>("\"tok_short\"").unwrap_err().to_string();
        assert!(err.contains("26 to 52"), "{err}");
    }

    proptest! {
        #[test]
        fn every_regex_match_parses(s in proptest::string::string_regex("pool_[0-9a-hjkmnp-tv-z]{26,52}").unwrap()) {
            prop_assert_eq!(PoolId::parse(&s).is_ok(), s.len() <= 57);
        }

        #[test]
        fn every_regex_match_parses_for_uncapped_kinds(s in proptest::string::string_regex("nodepool_[0-9a-hjkmnp-tv-z]{26,52}").unwrap()) {
            prop_assert!(NodePoolId::parse(&s).is_ok());
        }

        #[test]
        fn near_misses_fail(body in proptest::string::string_regex("[0-9a-zA-Z_-]{0,60}").unwrap()) {
            let s = format!("evt_{body}");
            let accepted = regex::Regex::new("^evt_[0-9a-hjkmnp-tv-z]{26,52}$").unwrap().is_match(&s);
            prop_assert_eq!(EventId::parse(&s).is_ok(), accepted);
        }

        #[test]
        fn ulid_round_trip(ms in 0u64..(1u64 << 48), r in any::<u128>()) {
            let id = BookingId::generate(ms, r);
            let back: BookingId = serde_json::from_str(&serde_json::to_string(&id).unwrap()).unwrap();
            prop_assert_eq!(back, id);
        }
    }
}
