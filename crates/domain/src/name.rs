//! Validated names of SPEC §2 (tenant ids, object names, flavor names, label keys and
//! values, request ids) and the derived names of SPEC §6.
//!
//! Invariant: every value of these types satisfies its rule; the derived names are built
//! from validated parts only, so they are valid provider and Kubernetes names.

use std::fmt;
use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::id::PoolId;

/// Why a string is not a valid name of some kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NameError(pub String);

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("static regex"))
}

macro_rules! validated_string {
    ($(#[$doc:meta])* $name:ident, $check:path) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// Parses the value, saying which rule failed.
            pub fn parse(s: &str) -> Result<Self, NameError> {
                $check(s)?;
                Ok(Self(s.to_owned()))
            }
            /// The value as a string.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
        impl std::str::FromStr for $name {
            type Err = NameError;
            fn from_str(s: &str) -> Result<Self, NameError> {
                Self::parse(s)
            }
        }
        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Self::parse(&s).map_err(serde::de::Error::custom)
            }
        }
    };
}

/// Most characters of a tenant id.
pub const TENANT_ID_MAX: usize = 128;
/// The rule of tenant ids (SPEC §2); the parser matches it and the API docs print it.
pub const TENANT_ID_PATTERN: &str = "^[A-Za-z0-9._:-]{1,128}$";
/// Most characters of a request id.
pub const REQUEST_ID_MAX: usize = 64;
/// The rule of request ids (SPEC §2).
pub const REQUEST_ID_PATTERN: &str = "^[A-Za-z0-9._:-]{1,64}$";
/// Most characters of an object name (pool, cluster, node pool, load balancer).
pub const OBJECT_NAME_MAX: usize = 63;
/// Most characters of a flavor name.
pub const FLAVOR_NAME_MAX: usize = 20;
/// The DNS-label rule of object and flavor names (SPEC §2).
pub const NAME_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/// Most characters of a label value.
pub const LABEL_VALUE_MAX: usize = 63;
/// The rule of label values (Kubernetes; may be empty).
pub const LABEL_VALUE_PATTERN: &str = "^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$";
/// Most characters of a label key's DNS-subdomain prefix.
pub const LABEL_KEY_PREFIX_MAX: usize = 253;
/// Most characters of a label key's name part.
pub const LABEL_KEY_NAME_MAX: usize = 63;
/// The rule of a label key's prefix (a DNS subdomain).
pub const LABEL_KEY_PREFIX_PATTERN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// The rule of a label key's name part.
pub const LABEL_KEY_NAME_PATTERN: &str = "^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$";

/// Most characters of a provider slug or id (region, size, version, provider cluster id,
/// certificate id).
pub const SLUG_MAX: usize = 64;
/// The rule of provider slugs and ids (SPEC §2's identifier table): ASCII letters and
/// digits, then also `.`, `_` and `-` — so no whitespace, control or format character
/// (bidi overrides, zero-width) can reach a provider URL or a message, and the pattern
/// means the same to every regular-expression engine.
pub const SLUG_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9._-]*$";

/// The whole label key rule as one pattern (prefix and `/` optional), built from the two
/// parts' patterns so it cannot drift from them; the parts' length caps come on top.
pub fn label_key_pattern() -> String {
    let inner = |p: &'static str| p.trim_start_matches('^').trim_end_matches('$');
    format!("^({}/)?{}$", inner(LABEL_KEY_PREFIX_PATTERN), inner(LABEL_KEY_NAME_PATTERN))
}

/// The rule of tenant ids and request ids: `^[A-Za-z0-9._:-]{1,N}$`. The length is
/// checked first only to give the clearer message; `pattern` decides.
fn check_token_chars(
    s: &str,
    what: &str,
    max: usize,
    cell: &'static OnceLock<Regex>,
    pattern: &str,
) -> Result<(), NameError> {
    if s.is_empty() || s.len() > max {
        return Err(NameError(format!("{what} must be 1 to {max} characters")));
    }
    if !re(cell, pattern).is_match(s) {
        return Err(NameError(format!("{what} may only use the characters [A-Za-z0-9._:-]")));
    }
    Ok(())
}

/// A provider slug or id: [`SLUG_PATTERN`], 1 to [`SLUG_MAX`] characters.
fn check_slug(s: &str) -> Result<(), NameError> {
    static RE: OnceLock<Regex> = OnceLock::new();
    if s.is_empty() || s.chars().count() > SLUG_MAX {
        return Err(NameError(format!("must be 1 to {SLUG_MAX} characters")));
    }
    if !re(&RE, SLUG_PATTERN).is_match(s) {
        return Err(NameError(
            "must be ASCII letters, digits, '.', '_' and '-', starting with a letter or digit"
                .into(),
        ));
    }
    Ok(())
}

fn check_tenant_id(s: &str) -> Result<(), NameError> {
    static RE: OnceLock<Regex> = OnceLock::new();
    check_token_chars(s, "tenantId", TENANT_ID_MAX, &RE, TENANT_ID_PATTERN)
}

fn check_request_id(s: &str) -> Result<(), NameError> {
    static RE: OnceLock<Regex> = OnceLock::new();
    check_token_chars(s, "requestId", REQUEST_ID_MAX, &RE, REQUEST_ID_PATTERN)
}

/// The DNS-label rule of object and flavor names: [`NAME_PATTERN`].
fn check_dns_label(s: &str, what: &str, max: usize) -> Result<(), NameError> {
    static RE: OnceLock<Regex> = OnceLock::new();
    if s.is_empty() || s.len() > max {
        return Err(NameError(format!("{what} must be 1 to {max} characters")));
    }
    if !re(&RE, NAME_PATTERN).is_match(s) {
        return Err(NameError(format!(
            "{what} must be lower-case letters, digits and '-', starting and ending with a letter or digit"
        )));
    }
    Ok(())
}

fn check_object_name(s: &str) -> Result<(), NameError> {
    check_dns_label(s, "name", OBJECT_NAME_MAX)
}

fn check_flavor_name(s: &str) -> Result<(), NameError> {
    check_dns_label(s, "flavor name", FLAVOR_NAME_MAX)
}

fn check_label_value(s: &str) -> Result<(), NameError> {
    static RE: OnceLock<Regex> = OnceLock::new();
    if s.len() > LABEL_VALUE_MAX {
        return Err(NameError(format!("label value must be at most {LABEL_VALUE_MAX} characters")));
    }
    if !re(&RE, LABEL_VALUE_PATTERN).is_match(s) {
        return Err(NameError(
            "label value must be letters, digits, '-', '_' and '.', starting and ending with a letter or digit".into(),
        ));
    }
    Ok(())
}

/// Kubernetes label key: optional DNS-subdomain prefix (≤ 253) and `/`, then a name (≤ 63).
fn check_label_key(s: &str) -> Result<(), NameError> {
    static NAME: OnceLock<Regex> = OnceLock::new();
    static PREFIX: OnceLock<Regex> = OnceLock::new();
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if let Some(p) = prefix {
        if p.is_empty() || p.len() > LABEL_KEY_PREFIX_MAX {
            return Err(NameError(format!(
                "label key prefix must be 1 to {LABEL_KEY_PREFIX_MAX} characters"
            )));
        }
        if !re(&PREFIX, LABEL_KEY_PREFIX_PATTERN).is_match(p) {
            return Err(NameError("label key prefix must be a DNS subdomain".into()));
        }
    }
    if name.is_empty() || name.len() > LABEL_KEY_NAME_MAX {
        return Err(NameError(format!(
            "label key name must be 1 to {LABEL_KEY_NAME_MAX} characters"
        )));
    }
    if !re(&NAME, LABEL_KEY_NAME_PATTERN).is_match(name) {
        return Err(NameError(
            "label key name must be letters, digits, '-', '_' and '.', starting and ending with a letter or digit".into(),
        ));
    }
    Ok(())
}

validated_string!(
    /// A tenant id: `^[A-Za-z0-9._:-]{1,128}$`.
    TenantId, check_tenant_id
);
validated_string!(
    /// An object name (pool, cluster, node pool, load balancer): 1–63 characters of a DNS label.
    ObjectName, check_object_name
);
validated_string!(
    /// A flavor name: 1–20 characters of a DNS label.
    FlavorName, check_flavor_name
);
validated_string!(
    /// A Kubernetes label key.
    LabelKey, check_label_key
);
validated_string!(
    /// A Kubernetes label value (may be empty).
    LabelValue, check_label_value
);
validated_string!(
    /// An idempotency key of a create call: `^[A-Za-z0-9._:-]{1,64}$`.
    RequestId, check_request_id
);
validated_string!(
    /// A provider slug or id (region, size, version, provider cluster id, certificate id):
    /// [`SLUG_PATTERN`], 1 to [`SLUG_MAX`] characters. Fields that keep a plain `String`
    /// declare their schema with it and are checked by [`ProviderSlug::parse`].
    ProviderSlug, check_slug
);

/// The label every object the substrate reconciler makes carries.
pub const LABEL_SUBSTRATE_POOL: &str = "better-compute.dev/substrate-pool";
/// The label naming a substrate node pool's flavor.
pub const LABEL_FLAVOR: &str = "better-compute.dev/flavor";
/// The managed-by label and its value.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The value of [`LABEL_MANAGED_BY`].
pub const MANAGED_BY_VALUE: &str = "better-compute";
/// The server-side-apply field manager.
pub const FIELD_MANAGER: &str = "better-compute";
/// Node-pool names starting with this are reserved for substrates.
pub const RESERVED_NODE_POOL_PREFIX: &str = "bc-";
/// The join Secret's name in a substrate namespace.
pub const JOIN_SECRET_NAME: &str = "bcd-join";
/// The ServiceAccount and DaemonSet name in a substrate namespace.
pub const BCD_NAME: &str = "bcd";

/// `bc-<pool>`: the created cluster's default name and the substrate namespace.
/// At most 3 + 57 = 60 characters, so always a valid name.
pub fn substrate_base_name(pool: &PoolId) -> ObjectName {
    ObjectName(format!("bc-{}", pool.dashed()))
}

/// `bc-<pool>-<flavor>`: a substrate node pool's name (provider-side and ours). It can be
/// longer than 63 characters for long pool ids; providers accept up to 255 for node pool
/// names, so this is a plain string rather than an [`ObjectName`].
pub fn substrate_node_pool_name(pool: &PoolId, flavor: &FlavorName) -> String {
    format!("bc-{}-{}", pool.dashed(), flavor.as_str())
}

/// How a provider lets a substrate name what it makes there, from its offer
/// (`ProviderOffer::name_max`, `label_rule`), so no provider is named here (SPEC §6).
/// Where `bc-<pool>-<flavor>` always fits (DigitalOcean: 255), the names are those;
/// where it may not (GKE: 40), the pool id is written as `<d>`, the first 12 characters
/// of the lower-case base32 SHA-256 of the pool id: `bc-<d>` and `bc-<d>-<flavor>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubstrateNaming {
    /// Most characters of a cluster or node-pool name at the provider.
    pub name_max: usize,
    /// Whether the provider's resource labels are GCP's (no `/` or `.` in a key): the
    /// substrate's mark is then the label `better-compute-substrate-pool=<pool id>`.
    pub gcp_labels: bool,
}

/// The longest `bc-<pool>-<flavor>` (a pool id body of 52, a flavor of 20).
const LONG_NODE_POOL_NAME_MAX: usize = 3 + 5 + crate::id::ID_BODY_MAX + 1 + FLAVOR_NAME_MAX;

impl SubstrateNaming {
    /// Long names and tags (DigitalOcean's rules).
    pub const LONG: SubstrateNaming = SubstrateNaming { name_max: 255, gcp_labels: false };

    /// The naming of a provider offering `offer`.
    pub fn of(offer: &crate::ports::ProviderOffer) -> Self {
        Self {
            name_max: offer.name_max,
            gcp_labels: offer.label_rule == crate::ports::LabelRule::Gcp,
        }
    }

    /// Whether the pool id is written as its digest.
    pub fn short(self) -> bool {
        self.name_max < LONG_NODE_POOL_NAME_MAX
    }

    /// What stands for the pool in names: its dashed id, or its digest.
    fn pool_part(self, pool: &PoolId) -> String {
        if self.short() { pool_digest(pool) } else { pool.dashed() }
    }

    /// A created cluster's default name: `bc-<pool>` or `bc-<d>`.
    pub fn cluster_name(self, pool: &PoolId) -> ObjectName {
        ObjectName(format!("bc-{}", self.pool_part(pool)))
    }

    /// `bc-<pool>-` or `bc-<d>-`: every substrate node pool name of `pool` starts with it.
    pub fn node_pool_prefix(self, pool: &PoolId) -> String {
        format!("bc-{}-", self.pool_part(pool))
    }

    /// A substrate node pool's name: `bc-<pool>-<flavor>` or `bc-<d>-<flavor>`.
    pub fn node_pool_name(self, pool: &PoolId, flavor: &FlavorName) -> String {
        format!("{}{}", self.node_pool_prefix(pool), flavor.as_str())
    }
}

/// `<d>`: the first 12 characters of the lower-case base32 (RFC 4648) SHA-256 of the pool
/// id (60 bits: names of two pools of one account do not meet).
pub fn pool_digest(pool: &PoolId) -> String {
    use sha2::Digest as _;
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let digest = sha2::Sha256::digest(pool.as_str().as_bytes());
    let mut bits = 0u64;
    for b in &digest[..8] {
        bits = (bits << 8) | u64::from(*b);
    }
    (0..12).map(|i| char::from(ALPHABET[((bits >> (59 - 5 * i)) & 31) as usize])).collect()
}

/// The substrate namespace (`bc-<pool>`), one per pool, so two pools can share a cluster.
pub fn substrate_namespace(pool: &PoolId) -> String {
    substrate_base_name(pool).0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn provider_slugs_are_ascii_and_at_most_64_characters() {
        for ok in ["nyc1", "s-2vcpu-4gb", "1.32.1-do.0", "latest", "9a3c_1", &"a".repeat(64)] {
            assert!(ProviderSlug::parse(ok).is_ok(), "{ok}");
        }
        let hostile = [
            "",
            &"a".repeat(65),
            "nyc1\u{202e}",
            "ny\u{200b}c1",
            "nyc 1",
            "-nyc1",
            "nyc1\n",
            "nyc1/../x",
            "ｎｙｃ１",
        ];
        for bad in hostile {
            assert!(ProviderSlug::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn tenant_ids() {
        assert!(TenantId::parse("acme").is_ok());
        assert!(TenantId::parse("acme:prod.eu-1_x").is_ok());
        assert!(TenantId::parse("").is_err());
        assert!(TenantId::parse("a b").is_err());
        assert!(TenantId::parse(&"a".repeat(128)).is_ok());
        assert!(TenantId::parse(&"a".repeat(129)).is_err());
    }

    #[test]
    fn object_and_flavor_names() {
        assert!(ObjectName::parse("web-1").is_ok());
        assert!(ObjectName::parse("-web").is_err());
        assert!(ObjectName::parse("web-").is_err());
        assert!(ObjectName::parse("Web").is_err());
        assert!(ObjectName::parse(&"a".repeat(64)).is_err());
        assert!(FlavorName::parse("gpu").is_ok());
        assert!(FlavorName::parse(&"a".repeat(21)).is_err());
    }

    #[test]
    fn labels() {
        assert!(LabelKey::parse("better-compute.dev/substrate-pool").is_ok());
        assert!(LabelKey::parse("tier").is_ok());
        assert!(LabelKey::parse("/tier").is_err());
        assert!(LabelKey::parse("Example.com/tier").is_err());
        assert!(LabelKey::parse(&format!("{}/x", "a".repeat(254))).is_err());
        assert!(LabelValue::parse("").is_ok());
        assert!(LabelValue::parse("a_b.c-D").is_ok());
        assert!(LabelValue::parse("_a").is_err());
        assert!(LabelValue::parse(&"a".repeat(64)).is_err());
    }

    #[test]
    fn label_key_pattern_joins_the_parts() {
        let re = Regex::new(&label_key_pattern()).unwrap();
        for ok in ["tier", "better-compute.dev/flavor", "a.b-c/X_y.z"] {
            assert!(re.is_match(ok) && LabelKey::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["/tier", "Example.com/tier", "a/b/c", "-x", "x-"] {
            assert!(!re.is_match(bad) && LabelKey::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn derived_names() {
        let pool = PoolId::parse("pool_01hq3k5v9x8y7z6w5v4t3s2r1q").unwrap();
        assert_eq!(substrate_base_name(&pool).as_str(), "bc-pool-01hq3k5v9x8y7z6w5v4t3s2r1q");
        assert_eq!(substrate_namespace(&pool), "bc-pool-01hq3k5v9x8y7z6w5v4t3s2r1q");
        let gpu = FlavorName::parse("gpu").unwrap();
        assert_eq!(substrate_node_pool_name(&pool, &gpu), "bc-pool-01hq3k5v9x8y7z6w5v4t3s2r1q-gpu");
        // Where names hold 40 characters (GKE): the pool id's digest.
        let short = SubstrateNaming { name_max: 40, gcp_labels: true };
        let d = pool_digest(&pool);
        assert_eq!(d, "moxbibgz4uve", "RFC 4648 base32 of SHA-256, lower case");
        assert!(d.chars().all(|c| c.is_ascii_lowercase() || ('2'..='7').contains(&c)), "{d}");
        assert_eq!(short.cluster_name(&pool).as_str(), format!("bc-{d}"));
        assert_eq!(short.node_pool_name(&pool, &gpu), format!("bc-{d}-gpu"));
        let longest = FlavorName::parse(&"f".repeat(FLAVOR_NAME_MAX)).unwrap();
        assert!(short.node_pool_name(&pool, &longest).len() <= 40);
        assert_eq!(SubstrateNaming::LONG.cluster_name(&pool), substrate_base_name(&pool));
        assert_eq!(
            SubstrateNaming::LONG.node_pool_name(&pool, &gpu),
            substrate_node_pool_name(&pool, &gpu)
        );
        // The pool id itself is a valid label value.
        assert!(LabelValue::parse(pool.as_str()).is_ok());
    }

    proptest! {
        #[test]
        fn tenant_regex_agrees(s in proptest::string::string_regex("[A-Za-z0-9._:-]{1,128}").unwrap()) {
            prop_assert!(TenantId::parse(&s).is_ok());
        }
        #[test]
        fn tenant_rejects_others(s in proptest::string::string_regex("[A-Za-z0-9._:-]{0,10}[ /#@!é][A-Za-z0-9]{0,5}").unwrap()) {
            prop_assert!(TenantId::parse(&s).is_err());
        }
        #[test]
        fn name_regex_agrees(s in proptest::string::string_regex("[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?").unwrap()) {
            prop_assert!(ObjectName::parse(&s).is_ok());
        }
        #[test]
        fn name_rejects_any_mismatch(s in proptest::string::string_regex("[-a-zA-Z0-9_.]{0,70}").unwrap()) {
            let ok = s.len() <= 63 && regex::Regex::new("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$").unwrap().is_match(&s);
            prop_assert_eq!(ObjectName::parse(&s).is_ok(), ok);
        }
        #[test]
        fn label_value_regex_agrees(s in proptest::string::string_regex("[-A-Za-z0-9_.]{0,70}").unwrap()) {
            let ok = s.len() <= 63 && regex::Regex::new("^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$").unwrap().is_match(&s);
            prop_assert_eq!(LabelValue::parse(&s).is_ok(), ok);
        }
        #[test]
        fn flavor_name_agrees_with_its_regex(s in proptest::string::string_regex("[-a-zA-Z0-9_]{0,24}").unwrap()) {
            let ok = s.len() <= 20 && regex::Regex::new("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$").unwrap().is_match(&s);
            prop_assert_eq!(FlavorName::parse(&s).is_ok(), ok);
        }
        #[test]
        fn label_keys_accepted(
            prefix in proptest::option::of(proptest::string::string_regex("[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?){0,3}").unwrap()),
            name in proptest::string::string_regex("[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?").unwrap(),
        ) {
            let key = match prefix { Some(p) => format!("{p}/{name}"), None => name };
            prop_assert!(LabelKey::parse(&key).is_ok(), "{}", key);
        }
        #[test]
        fn label_keys_rejected(
            name in proptest::string::string_regex("[A-Za-z0-9]{0,10}[^-A-Za-z0-9_./][A-Za-z0-9]{0,10}|[-_.][A-Za-z0-9]{0,10}|[A-Za-z0-9]{0,10}[-_.]|[A-Za-z0-9]{64,70}").unwrap(),
        ) {
            prop_assert!(LabelKey::parse(&name).is_err(), "{}", name);
        }
        #[test]
        fn request_id_rejects_others(s in proptest::string::string_regex("[A-Za-z0-9]{0,10}[^A-Za-z0-9._:-][A-Za-z0-9]{0,10}|[A-Za-z0-9]{65,70}").unwrap()) {
            prop_assert!(RequestId::parse(&s).is_err());
        }
        #[test]
        fn request_id_regex_agrees(s in proptest::string::string_regex("[A-Za-z0-9._:-]{1,64}").unwrap()) {
            prop_assert!(RequestId::parse(&s).is_ok());
        }
        #[test]
        fn derived_names_are_valid(ms in 0u64..(1u64<<48), r in any::<u128>(), f in proptest::string::string_regex("[a-z0-9]([-a-z0-9]{0,18}[a-z0-9])?").unwrap()) {
            let pool = PoolId::generate(ms, r);
            let flavor = FlavorName::parse(&f).unwrap();
            prop_assert!(ObjectName::parse(substrate_base_name(&pool).as_str()).is_ok());
            let np = substrate_node_pool_name(&pool, &flavor);
            prop_assert!(regex::Regex::new("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$").unwrap().is_match(&np));
        }
    }
}
