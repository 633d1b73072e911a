//! The pool policy of SPEC §4, with its serde shape exactly as written there (camelCase,
//! `cluster: {create}|{adopt}`, `count` xor `autoScale`, taints, `upgrades`).
//!
//! Invariant: deserializing accepts any well-typed document (unknown fields refused);
//! the constraints are checked by [`crate::rules::policy::validate_policy`], which reports
//! every violation with its JSON path instead of stopping at the first. The bounds are
//! declared here, beside the fields they bound, for the validator and the schema alike.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Most flavors a pool may have.
pub const MAX_FLAVORS: usize = 16;
/// Most nodes of a fixed-count flavor, and the autoscale bounds' cap.
pub const MAX_NODES: u32 = 512;
/// Most node pools a cluster is created with (as many as a pool has flavors).
pub const MAX_NODE_POOLS: usize = MAX_FLAVORS;
/// Most labels of a flavor or a node pool (SPEC §2).
pub const MAX_LABELS: usize = 64;
/// Most taints of a flavor or a node pool (SPEC §2).
pub const MAX_TAINTS: usize = 32;

/// A pool's policy.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PoolPolicy {
    /// The managed Kubernetes cluster behind the pool, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub substrate: Option<SubstratePolicy>,
    /// The pool's flavors (1–16 when a substrate is set).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(max = MAX_FLAVORS)))]
    pub flavors: Vec<Flavor>,
    /// How upgrades treat active bookings.
    #[serde(default)]
    pub upgrades: UpgradePolicy,
}

/// The substrate part of a policy.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubstratePolicy {
    /// Must be `kubernetes`.
    pub kind: SubstrateKind,
    /// A provider account id of the same tenant (checked as `acct_…` by the validator).
    #[cfg_attr(feature = "schema", schemars(with = "crate::id::ProviderAccountId"))]
    pub account: String,
    /// Create a cluster, or adopt one.
    pub cluster: ClusterPolicy,
}

/// The only substrate kind.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SubstrateKind {
    /// A managed Kubernetes cluster.
    Kubernetes,
}

/// Exactly one of `create` or `adopt`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum ClusterPolicy {
    /// Create a cluster at the provider.
    Create(CreateClusterPolicy),
    /// Adopt an existing cluster.
    Adopt(AdoptClusterPolicy),
}

/// `cluster.create`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateClusterPolicy {
    /// Provider region slug (required).
    #[cfg_attr(feature = "schema", schemars(with = "crate::name::ProviderSlug"))]
    pub region: String,
    /// An exact provider version slug, or `latest`.
    #[serde(default = "latest")]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "crate::name::ProviderSlug", extend("default" = VERSION_LATEST))
    )]
    pub version: String,
    /// High-availability control plane.
    #[serde(default)]
    pub high_availability: bool,
    /// Cluster name; default `bc-<pool>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::name::ObjectName>"))]
    pub name: Option<String>,
}

fn latest() -> String {
    VERSION_LATEST.to_owned()
}

/// The version keyword that means the provider's newest.
pub const VERSION_LATEST: &str = "latest";

// The provider slug rule is the identifier table's, declared with the other names; named
// here by its old path too.
pub use crate::name::{SLUG_MAX, SLUG_PATTERN};

/// `cluster.adopt`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdoptClusterPolicy {
    /// The provider's id of the cluster to adopt.
    #[cfg_attr(feature = "schema", schemars(with = "crate::name::ProviderSlug"))]
    pub provider_cluster_id: String,
}

/// One flavor: a node size and its scale.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(transform = crate::one_of::count_or_auto_scale))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Flavor {
    #[cfg_attr(feature = "schema", schemars(with = "crate::name::FlavorName"))]
    /// Flavor name, unique in the pool (1–20 characters).
    pub name: String,
    /// Provider size slug.
    #[cfg_attr(feature = "schema", schemars(with = "crate::name::ProviderSlug"))]
    pub size: String,
    /// Fixed node count (1–512); exclusive with `autoScale`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = MAX_NODES)))]
    pub count: Option<u32>,
    /// Autoscaling bounds; exclusive with `count`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_scale: Option<AutoScale>,
    /// Node labels added to the pool's own (at most 64).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[cfg_attr(
        feature = "schema",
        schemars(
            with = "BTreeMap<crate::name::LabelKey, crate::name::LabelValue>",
            extend("maxProperties" = MAX_LABELS)
        )
    )]
    pub labels: BTreeMap<String, String>,
    /// Node taints (at most 32).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = MAX_TAINTS)))]
    pub taints: Vec<Taint>,
}

/// Autoscaling bounds.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AutoScale {
    /// Fewest nodes (0–512).
    #[cfg_attr(feature = "schema", schemars(range(max = MAX_NODES)))]
    pub min: u32,
    /// Most nodes (1–512, ≥ min).
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = MAX_NODES)))]
    pub max: u32,
}

/// A node taint.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Taint {
    /// Taint key (a label key).
    #[cfg_attr(feature = "schema", schemars(with = "crate::name::LabelKey"))]
    pub key: String,
    /// Taint value (a label value).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(with = "crate::name::LabelValue"))]
    pub value: String,
    /// Effect.
    pub effect: TaintEffect,
}

/// A taint's effect.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TaintEffect {
    /// Do not schedule.
    NoSchedule,
    /// Prefer not to schedule.
    PreferNoSchedule,
    /// Evict running pods.
    NoExecute,
}

impl TaintEffect {
    /// The Kubernetes spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

/// How an upgrade treats active bookings.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum UpgradePolicy {
    /// Wait until the pool has no active bookings.
    #[default]
    Drain,
    /// Upgrade at once.
    Immediate,
}

/// A node pool's scale: a fixed count or autoscaling bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Scale {
    /// A fixed node count.
    Count(u32),
    /// Autoscaling between bounds; the provider decides the count.
    AutoScale(AutoScale),
}

impl Flavor {
    /// The flavor's scale, when exactly one of `count`/`autoScale` is set.
    pub fn scale(&self) -> Option<Scale> {
        match (self.count, self.auto_scale) {
            (Some(c), None) => Some(Scale::Count(c)),
            (None, Some(a)) => Some(Scale::AutoScale(a)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC_EXAMPLE: &str = r#"{
      "substrate": {
        "kind": "kubernetes",
        "account": "acct_01hq3k5v9x8y7z6w5v4t3s2r1q",
        "cluster": { "create": { "region": "nyc1", "version": "latest", "highAvailability": false } }
      },
      "flavors": [ { "name": "cpu", "size": "s-2vcpu-4gb", "count": 3 },
                   { "name": "gpu", "size": "gpu-h100x1-80gb", "autoScale": { "min": 0, "max": 4 } } ],
      "upgrades": "drain"
    }"#;

    #[test]
    fn spec_example_round_trips() {
        let p: PoolPolicy = serde_json::from_str(SPEC_EXAMPLE).unwrap();
        let s = p.substrate.as_ref().unwrap();
        assert!(
            matches!(&s.cluster, ClusterPolicy::Create(c) if c.region == "nyc1" && !c.high_availability)
        );
        assert_eq!(p.flavors[1].scale(), Some(Scale::AutoScale(AutoScale { min: 0, max: 4 })));
        let back: PoolPolicy = serde_json::from_value(serde_json::to_value(&p).unwrap()).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn defaults_and_adopt() {
        let p: PoolPolicy = serde_json::from_str(
            r#"{"substrate":{"kind":"kubernetes","account":"a","cluster":{"create":{"region":"nyc1"}}},"flavors":[]}"#,
        )
        .unwrap();
        let ClusterPolicy::Create(c) = &p.substrate.unwrap().cluster else { panic!() };
        assert_eq!(c.version, "latest");
        assert_eq!(p.upgrades, UpgradePolicy::Drain);
        let a: ClusterPolicy =
            serde_json::from_str(r#"{"adopt":{"providerClusterId":"x"}}"#).unwrap();
        assert_eq!(a, ClusterPolicy::Adopt(AdoptClusterPolicy { provider_cluster_id: "x".into() }));
    }

    #[test]
    fn unknown_fields_and_both_modes_are_refused() {
        assert!(serde_json::from_str::<PoolPolicy>(r#"{"flavours":[]}"#).is_err());
        assert!(
            serde_json::from_str::<ClusterPolicy>(
                r#"{"create":{"region":"a"},"adopt":{"providerClusterId":"x"}}"#
            )
            .is_err()
        );
        assert!(
            serde_json::from_str::<Flavor>(r#"{"name":"a","size":"s","count":1,"extra":1}"#)
                .is_err()
        );
        assert!(serde_json::from_str::<Taint>(r#"{"key":"a","effect":"Sometimes"}"#).is_err());
    }
}
