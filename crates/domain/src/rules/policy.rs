//! Policy validation and the allowed-change rule of SPEC §4.
//!
//! Invariant: [`validate_policy`] reports *every* violated constraint of a policy, each
//! with the JSON path of its field, so a caller fixes a document in one round trip; and
//! [`check_policy_change`] refuses exactly the changes a reconciler cannot converge in
//! place (another account, another cluster, another region or cluster name, dropping
//! high availability), so an accepted policy is always reachable from the current one.

use std::collections::BTreeMap;

use crate::error::{Error, FieldViolation};
use crate::id::ProviderAccountId;
use crate::name::{FlavorName, LABEL_MANAGED_BY, LabelKey, LabelValue, ObjectName, ProviderSlug};
use crate::policy::{
    AutoScale, ClusterPolicy, Flavor, PoolPolicy, SubstratePolicy, VERSION_LATEST,
};

// The policy's bounds are declared with its types; named here by their old paths too.
pub use crate::policy::{MAX_FLAVORS, MAX_NODES};
/// The label-key prefix the system sets itself (`better-compute.dev/substrate-pool`,
/// `better-compute.dev/flavor`); flavors may not set keys under it, or under any
/// subdomain of `better-compute.dev`, so a tenant label can never forge pool ownership.
pub const RESERVED_LABEL_DOMAIN: &str = "better-compute.dev";

/// Checks a pool name (SPEC §2: 1–63 characters of a DNS label), returning it parsed or
/// the violation at `field` (e.g. `name`).
pub fn validate_pool_name(name: &str, field: &str) -> Result<ObjectName, FieldViolation> {
    ObjectName::parse(name).map_err(|e| FieldViolation::new(field, e.0))
}

/// Every violation of a policy's constraints (SPEC §4), each with its JSON path under
/// `prefix` (e.g. `policy` gives `policy.flavors[1].name`). Empty means valid. The order
/// is the document's order, so the first violation is the first field a reader meets.
pub fn validate_policy(policy: &PoolPolicy, prefix: &str) -> Vec<FieldViolation> {
    let mut out = Vec::new();
    if let Some(substrate) = &policy.substrate {
        validate_substrate(substrate, &format!("{prefix}.substrate"), &mut out);
    }
    let flavors_path = format!("{prefix}.flavors");
    let n = policy.flavors.len();
    if policy.substrate.is_some() && n == 0 {
        out.push(FieldViolation::new(
            &flavors_path,
            "a pool with a substrate needs at least 1 flavor (its node pools are made from them)",
        ));
    }
    if n > MAX_FLAVORS {
        out.push(FieldViolation::new(
            &flavors_path,
            format!("at most {MAX_FLAVORS} flavors, not {n}"),
        ));
    }
    // First index of each name, to name the earlier flavor in a duplicate's message.
    let mut first_index: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, flavor) in policy.flavors.iter().enumerate() {
        let path = format!("{flavors_path}[{i}]");
        if let Some(&j) = first_index.get(flavor.name.as_str()) {
            out.push(FieldViolation::new(
                format!("{path}.name"),
                format!(
                    "flavor names must be unique: \"{}\" is also {flavors_path}[{j}]",
                    flavor.name
                ),
            ));
        } else {
            first_index.insert(&flavor.name, i);
        }
        validate_flavor(flavor, &path, &mut out);
    }
    out
}

fn validate_substrate(s: &SubstratePolicy, path: &str, out: &mut Vec<FieldViolation>) {
    if let Err(e) = ProviderAccountId::parse(&s.account) {
        out.push(FieldViolation::new(
            format!("{path}.account"),
            format!("must be a provider account id: {e}"),
        ));
    }
    match &s.cluster {
        ClusterPolicy::Create(c) => {
            let cpath = format!("{path}.cluster.create");
            if let Some(msg) = slug_problem(&c.region) {
                out.push(FieldViolation::new(
                    format!("{cpath}.region"),
                    format!("must be a provider region slug, e.g. nyc1: {msg}"),
                ));
            }
            // `latest`, or something shaped like a provider slug; whether the provider
            // offers it is for the reconciler to find out (it knows the account).
            if c.version != VERSION_LATEST
                && let Some(msg) = slug_problem(&c.version)
            {
                out.push(FieldViolation::new(
                    format!("{cpath}.version"),
                    format!(
                        "must be \"latest\" or a provider version slug, e.g. 1.32.1-do.0: {msg}"
                    ),
                ));
            }
            if let Some(name) = &c.name
                && let Err(e) = ObjectName::parse(name)
            {
                out.push(FieldViolation::new(format!("{cpath}.name"), e.0));
            }
        }
        ClusterPolicy::Adopt(a) => {
            if let Some(msg) = slug_problem(&a.provider_cluster_id) {
                out.push(FieldViolation::new(
                    format!("{path}.cluster.adopt.providerClusterId"),
                    format!("must be the provider's id of the cluster to adopt: {msg}"),
                ));
            }
        }
    }
}

/// Why `s` cannot be a provider slug or id ([`ProviderSlug`]'s rule: SPEC §2's identifier
/// table), or `None` when it can be one.
pub(crate) fn slug_problem(s: &str) -> Option<String> {
    ProviderSlug::parse(s).err().map(|e| e.0)
}

fn validate_flavor(f: &Flavor, path: &str, out: &mut Vec<FieldViolation>) {
    if let Err(e) = FlavorName::parse(&f.name) {
        out.push(FieldViolation::new(format!("{path}.name"), e.0));
    }
    if let Some(msg) = slug_problem(&f.size) {
        out.push(FieldViolation::new(
            format!("{path}.size"),
            format!("must be a provider size slug, e.g. s-2vcpu-4gb: {msg}"),
        ));
    }
    out.extend(validate_scale(f.count, f.auto_scale, path));
    for (key, value) in &f.labels {
        // The key is quoted as a JSON string, so any key (spaces, quotes) gives one path.
        let lpath = format!("{path}.labels[{}]", json_string(key));
        match LabelKey::parse(key) {
            Err(e) => out.push(FieldViolation::new(&lpath, e.0)),
            Ok(_) if is_reserved_label_key(key) => out.push(FieldViolation::new(
                &lpath,
                format!(
                    "label keys under {RESERVED_LABEL_DOMAIN}/ and {LABEL_MANAGED_BY} are reserved: the system sets them on every node pool"
                ),
            )),
            Ok(_) => {}
        }
        if let Err(e) = LabelValue::parse(value) {
            out.push(FieldViolation::new(&lpath, e.0));
        }
    }
    for (j, t) in f.taints.iter().enumerate() {
        let tpath = format!("{path}.taints[{j}]");
        if let Err(e) = LabelKey::parse(&t.key) {
            out.push(FieldViolation::new(format!("{tpath}.key"), e.0.replace("label", "taint")));
        }
        if let Err(e) = LabelValue::parse(&t.value) {
            out.push(FieldViolation::new(format!("{tpath}.value"), e.0.replace("label", "taint")));
        }
        // Kubernetes refuses two taints with the same key and effect on one node.
        if let Some(k) = f.taints[..j].iter().position(|o| o.key == t.key && o.effect == t.effect) {
            out.push(FieldViolation::new(
                format!("{tpath}.effect"),
                format!(
                    "duplicate taint: key \"{}\" with effect {} is also {path}.taints[{k}]",
                    t.key,
                    t.effect.as_str()
                ),
            ));
        }
    }
}

/// The scale rule of flavors and node pools (SPEC §4, §8): exactly one of `count`
/// (1–512) or `autoScale {min 0–512, max 1–512, min ≤ max}`, each violation at its path
/// under `path` (the object holding `count` and `autoScale`; empty at the top level).
pub fn validate_scale(
    count: Option<u32>,
    auto_scale: Option<AutoScale>,
    path: &str,
) -> Vec<FieldViolation> {
    let mut out = Vec::new();
    // Top-level fields (`path` empty) are named bare: `count`, not `.count`.
    let at =
        |field: &str| if path.is_empty() { field.to_owned() } else { format!("{path}.{field}") };
    match (count, auto_scale) {
        (Some(_), Some(_)) | (None, None) => out.push(FieldViolation::new(
            if path.is_empty() { "count" } else { path },
            "set exactly one of count (a fixed node count) or autoScale {min, max}",
        )),
        _ => {}
    }
    if let Some(count) = count
        && !(1..=MAX_NODES).contains(&count)
    {
        out.push(FieldViolation::new(
            at("count"),
            format!("must be 1 to {MAX_NODES}, not {count}"),
        ));
    }
    if let Some(a) = auto_scale {
        let mut bounds_ok = true;
        if a.min > MAX_NODES {
            bounds_ok = false;
            out.push(FieldViolation::new(
                at("autoScale.min"),
                format!("must be 0 to {MAX_NODES}, not {}", a.min),
            ));
        }
        if !(1..=MAX_NODES).contains(&a.max) {
            bounds_ok = false;
            out.push(FieldViolation::new(
                at("autoScale.max"),
                format!("must be 1 to {MAX_NODES}, not {}", a.max),
            ));
        }
        // Only when both bounds are in range: otherwise the range message already says it.
        if bounds_ok && a.min > a.max {
            out.push(FieldViolation::new(
                at("autoScale.max"),
                format!("must be at least autoScale.min ({}), not {}", a.min, a.max),
            ));
        }
    }
    out
}

/// Whether a label key is one the system sets on substrate node pools:
/// `better-compute.dev/…` (or a subdomain's), and `app.kubernetes.io/managed-by`.
pub fn is_reserved_label_key(key: &str) -> bool {
    if key == LABEL_MANAGED_BY {
        return true;
    }
    match key.split_once('/') {
        Some((prefix, _)) => {
            prefix == RESERVED_LABEL_DOMAIN
                || prefix.strip_suffix(RESERVED_LABEL_DOMAIN).is_some_and(|p| p.ends_with('.'))
        }
        None => false,
    }
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

const REMOVE_FIRST: &str = "remove the substrate first (update the policy without a substrate and wait until the substrate is deleted), then set the new one";

/// Whether a pool's policy may change from `old` to `new` (SPEC §4); `FAILED_PRECONDITION`
/// naming every refused change otherwise. Both policies are assumed valid.
///
/// Adding or removing a substrate, and changing flavors, the version or `upgrades`, are
/// converged in place. Refused, because no provider can change them on a live cluster
/// (and the derived cluster name is how a restarted reconciler finds what it made):
/// another `substrate.account`, `create`↔`adopt`, another adopted `providerClusterId`,
/// another `create.region`, another `create.name` (unset and set count as different,
/// even if the set name equals the default: the comparison is of what the tenant wrote),
/// and `highAvailability` true→false (providers turn HA on, never off). false→true is
/// allowed.
pub fn check_policy_change(old: &PoolPolicy, new: &PoolPolicy) -> Result<(), Error> {
    let (Some(o), Some(n)) = (&old.substrate, &new.substrate) else {
        return Ok(());
    };
    let mut refused: Vec<String> = Vec::new();
    if o.account != n.account {
        refused.push(format!(
            "policy.substrate.account cannot change from {} to {}",
            o.account, n.account
        ));
    }
    match (&o.cluster, &n.cluster) {
        (ClusterPolicy::Create(oc), ClusterPolicy::Create(nc)) => {
            if oc.region != nc.region {
                refused.push(format!(
                    "policy.substrate.cluster.create.region cannot change from {} to {} (a cluster cannot move)",
                    oc.region, nc.region
                ));
            }
            if oc.name != nc.name {
                refused.push(format!(
                    "policy.substrate.cluster.create.name cannot change from {} to {}",
                    oc.name.as_deref().unwrap_or("the default"),
                    nc.name.as_deref().unwrap_or("the default")
                ));
            }
            if oc.high_availability && !nc.high_availability {
                refused.push(
                    "policy.substrate.cluster.create.highAvailability cannot be turned off once on"
                        .to_owned(),
                );
            }
        }
        (ClusterPolicy::Adopt(oa), ClusterPolicy::Adopt(na)) => {
            if oa.provider_cluster_id != na.provider_cluster_id {
                refused.push(format!(
                    "policy.substrate.cluster.adopt.providerClusterId cannot change from {} to {}",
                    oa.provider_cluster_id, na.provider_cluster_id
                ));
            }
        }
        (ClusterPolicy::Create(_), ClusterPolicy::Adopt(_)) => {
            refused.push("policy.substrate.cluster cannot change from create to adopt".to_owned())
        }
        (ClusterPolicy::Adopt(_), ClusterPolicy::Create(_)) => {
            refused.push("policy.substrate.cluster cannot change from adopt to create".to_owned())
        }
    }
    if refused.is_empty() {
        Ok(())
    } else {
        Err(Error::failed_precondition(format!("{}: {REMOVE_FIRST}", refused.join("; "))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use crate::policy::{
        AdoptClusterPolicy, AutoScale, CreateClusterPolicy, SubstrateKind, Taint, TaintEffect,
        UpgradePolicy,
    };
    use proptest::prelude::*;

    const ACCT: &str = "acct_01hq3k5v9x8y7z6w5v4t3s2r1q";

    fn flavor(name: &str, count: Option<u32>, auto: Option<(u32, u32)>) -> Flavor {
        Flavor {
            name: name.into(),
            size: "s-2vcpu-4gb".into(),
            count,
            auto_scale: auto.map(|(min, max)| AutoScale { min, max }),
            labels: BTreeMap::new(),
            taints: vec![],
        }
    }

    fn create(region: &str) -> CreateClusterPolicy {
        CreateClusterPolicy {
            region: region.into(),
            version: "latest".into(),
            high_availability: false,
            name: None,
        }
    }

    fn with_cluster(cluster: ClusterPolicy) -> PoolPolicy {
        PoolPolicy {
            substrate: Some(SubstratePolicy {
                kind: SubstrateKind::Kubernetes,
                account: ACCT.into(),
                cluster,
            }),
            flavors: vec![flavor("cpu", Some(3), None), flavor("gpu", None, Some((0, 4)))],
            upgrades: UpgradePolicy::Drain,
        }
    }

    fn valid() -> PoolPolicy {
        with_cluster(ClusterPolicy::Create(create("nyc1")))
    }

    fn fields(v: &[FieldViolation]) -> Vec<&str> {
        v.iter().map(|v| v.field.as_str()).collect()
    }

    #[test]
    fn scale_at_the_top_level_names_bare_fields() {
        let v = validate_scale(Some(0), Some(AutoScale { min: 3, max: 2 }), "");
        assert_eq!(fields(&v), ["count", "count", "autoScale.max"]);
        assert!(validate_scale(None, Some(AutoScale { min: 0, max: 2 }), "").is_empty());
    }

    #[test]
    fn the_spec_example_is_valid() {
        let p: PoolPolicy = serde_json::from_str(&format!(
            r#"{{"substrate":{{"kind":"kubernetes","account":"{ACCT}","cluster":{{"create":{{"region":"nyc1","version":"latest","highAvailability":false}}}}}},
            "flavors":[{{"name":"cpu","size":"s-2vcpu-4gb","count":3}},{{"name":"gpu","size":"gpu-h100x1-80gb","autoScale":{{"min":0,"max":4}}}}],"upgrades":"drain"}}"#
        ))
        .unwrap();
        assert_eq!(validate_policy(&p, "policy"), vec![]);
        assert_eq!(validate_policy(&valid(), "policy"), vec![]);
        assert_eq!(validate_policy(&PoolPolicy::default(), "policy"), vec![]);
    }

    #[test]
    fn substrate_fields_are_checked_with_their_paths() {
        let mut p = valid();
        p.substrate.as_mut().unwrap().account = "acct_nope".into();
        let ClusterPolicy::Create(c) = &mut p.substrate.as_mut().unwrap().cluster else {
            unreachable!()
        };
        c.region = "".into();
        c.version = "1.32 latest".into();
        c.name = Some("Bad_Name".into());
        let v = validate_policy(&p, "policy");
        assert_eq!(
            fields(&v),
            vec![
                "policy.substrate.account",
                "policy.substrate.cluster.create.region",
                "policy.substrate.cluster.create.version",
                "policy.substrate.cluster.create.name",
            ]
        );
        assert!(v[0].message.contains("acct_"), "{}", v[0].message);

        let adopt = with_cluster(ClusterPolicy::Adopt(AdoptClusterPolicy {
            provider_cluster_id: "".into(),
        }));
        assert_eq!(
            fields(&validate_policy(&adopt, "p")),
            vec!["p.substrate.cluster.adopt.providerClusterId"]
        );
        let adopt = with_cluster(ClusterPolicy::Adopt(AdoptClusterPolicy {
            provider_cluster_id: "6f1c0e0a-1b2c".into(),
        }));
        assert_eq!(validate_policy(&adopt, "p"), vec![]);
    }

    #[test]
    fn versions_latest_or_slug() {
        for (version, ok) in [
            ("latest", true),
            ("1.32.1-do.0", true),
            ("1.31", true),
            ("", false),
            (" 1.32.1-do.0", false),
        ] {
            let mut p = valid();
            let ClusterPolicy::Create(c) = &mut p.substrate.as_mut().unwrap().cluster else {
                unreachable!()
            };
            c.version = version.into();
            assert_eq!(validate_policy(&p, "policy").is_empty(), ok, "{version:?}");
        }
    }

    #[test]
    fn flavor_count_bounds_depend_on_the_substrate() {
        let mut p = valid();
        p.flavors.clear();
        assert_eq!(fields(&validate_policy(&p, "policy")), vec!["policy.flavors"]);
        p.flavors = (0..17).map(|i| flavor(&format!("f{i}"), Some(1), None)).collect();
        assert_eq!(fields(&validate_policy(&p, "policy")), vec!["policy.flavors"]);
        p.flavors.pop();
        assert_eq!(validate_policy(&p, "policy"), vec![]);
        // Without a substrate, 0 to 16.
        p.substrate = None;
        assert_eq!(validate_policy(&p, "policy"), vec![]);
        p.flavors.clear();
        assert_eq!(validate_policy(&p, "policy"), vec![]);
        p.flavors = (0..17).map(|i| flavor(&format!("f{i}"), Some(1), None)).collect();
        assert_eq!(fields(&validate_policy(&p, "policy")), vec!["policy.flavors"]);
    }

    #[test]
    fn every_flavor_violation_is_reported() {
        let mut p = valid();
        p.flavors = vec![
            flavor("cpu", Some(0), None),
            flavor("cpu", Some(513), None),
            flavor("GPU", None, None),
            flavor("x", Some(1), Some((1, 2))),
            flavor("y", None, Some((513, 0))),
            flavor("z", None, Some((5, 4))),
            flavor("w", None, Some((0, 512))),
        ];
        p.flavors[6].size = "".into();
        let v = validate_policy(&p, "policy");
        assert_eq!(
            fields(&v),
            vec![
                "policy.flavors[0].count",
                "policy.flavors[1].name",
                "policy.flavors[1].count",
                "policy.flavors[2].name",
                "policy.flavors[2]",
                "policy.flavors[3]",
                "policy.flavors[4].autoScale.min",
                "policy.flavors[4].autoScale.max",
                "policy.flavors[5].autoScale.max",
                "policy.flavors[6].size",
            ]
        );
        assert!(v[1].message.contains("policy.flavors[0]"), "{}", v[1].message);
        assert!(v[8].message.contains("at least autoScale.min (5)"), "{}", v[8].message);
    }

    #[test]
    fn labels_and_taints() {
        let mut p = valid();
        let f = &mut p.flavors[0];
        f.labels.insert("bad key".into(), "v".into());
        f.labels.insert("tier".into(), "-bad".into());
        f.labels.insert("better-compute.dev/flavor".into(), "x".into());
        f.labels.insert("x.better-compute.dev/y".into(), "x".into());
        f.labels.insert("notbetter-compute.dev/y".into(), "ok".into());
        f.labels.insert("example.com/team".into(), "web".into());
        f.labels.insert("app.kubernetes.io/managed-by".into(), "me".into());
        f.labels.insert("app.kubernetes.io/name".into(), "ok".into());
        f.taints = vec![
            Taint { key: "gpu".into(), value: "true".into(), effect: TaintEffect::NoSchedule },
            Taint { key: "gpu".into(), value: "x".into(), effect: TaintEffect::NoExecute },
            Taint { key: "gpu".into(), value: "y".into(), effect: TaintEffect::NoSchedule },
            Taint { key: "a/b/c".into(), value: "_".into(), effect: TaintEffect::NoSchedule },
        ];
        let v = validate_policy(&p, "policy");
        assert_eq!(
            fields(&v),
            vec![
                r#"policy.flavors[0].labels["app.kubernetes.io/managed-by"]"#,
                r#"policy.flavors[0].labels["bad key"]"#,
                r#"policy.flavors[0].labels["better-compute.dev/flavor"]"#,
                r#"policy.flavors[0].labels["tier"]"#,
                r#"policy.flavors[0].labels["x.better-compute.dev/y"]"#,
                "policy.flavors[0].taints[2].effect",
                "policy.flavors[0].taints[3].key",
                "policy.flavors[0].taints[3].value",
            ]
        );
        assert!(v[0].message.contains("reserved"), "{}", v[0].message);
        assert!(v[2].message.contains("reserved"), "{}", v[2].message);
        assert!(v[5].message.contains("taints[0]"), "{}", v[5].message);
    }

    #[test]
    fn pool_names() {
        assert_eq!(validate_pool_name("web", "name").unwrap().as_str(), "web");
        assert_eq!(validate_pool_name("Web", "name").unwrap_err().field, "name");
        assert!(validate_pool_name("", "name").is_err());
        assert!(validate_pool_name(&"a".repeat(64), "name").is_err());
    }

    fn assert_refused(old: &PoolPolicy, new: &PoolPolicy, what: &str) {
        let e = check_policy_change(old, new).unwrap_err();
        assert_eq!(e.code, ErrorCode::FailedPrecondition);
        assert!(e.message.contains(what), "{}", e.message);
        assert!(e.message.contains("remove the substrate first"), "{}", e.message);
    }

    #[test]
    fn refused_changes() {
        let old = valid();
        let mut new = old.clone();
        new.substrate.as_mut().unwrap().account = "acct_01hq3k5v9x8y7z6w5v4t3s2r1r".into();
        assert_refused(&old, &new, "policy.substrate.account");

        let adopt = |id: &str| {
            with_cluster(ClusterPolicy::Adopt(AdoptClusterPolicy {
                provider_cluster_id: id.into(),
            }))
        };
        assert_refused(&old, &adopt("c1"), "from create to adopt");
        assert_refused(&adopt("c1"), &old, "from adopt to create");
        assert_refused(&adopt("c1"), &adopt("c2"), "providerClusterId");
        assert!(check_policy_change(&adopt("c1"), &adopt("c1")).is_ok());

        let mut moved = old.clone();
        moved.substrate.as_mut().unwrap().cluster = ClusterPolicy::Create(create("ams3"));
        assert_refused(&old, &moved, "region");

        let mut named = old.clone();
        let ClusterPolicy::Create(c) = &mut named.substrate.as_mut().unwrap().cluster else {
            unreachable!()
        };
        c.name = Some("mine".into());
        assert_refused(&old, &named, "create.name");

        let mut ha = old.clone();
        let ClusterPolicy::Create(c) = &mut ha.substrate.as_mut().unwrap().cluster else {
            unreachable!()
        };
        c.high_availability = true;
        assert!(check_policy_change(&old, &ha).is_ok(), "HA may be turned on");
        assert_refused(&ha, &old, "highAvailability");
    }

    #[test]
    fn allowed_changes() {
        let old = valid();
        let mut new = old.clone();
        let ClusterPolicy::Create(c) = &mut new.substrate.as_mut().unwrap().cluster else {
            unreachable!()
        };
        c.version = "1.32.1-do.0".into();
        new.flavors.pop();
        new.flavors[0].count = Some(7);
        new.upgrades = UpgradePolicy::Immediate;
        assert!(check_policy_change(&old, &new).is_ok());
        // Removing and adding a substrate, even with another account.
        let none = PoolPolicy { substrate: None, ..old.clone() };
        assert!(check_policy_change(&old, &none).is_ok());
        let mut other = old.clone();
        other.substrate.as_mut().unwrap().account = "acct_01hq3k5v9x8y7z6w5v4t3s2r1r".into();
        assert!(check_policy_change(&none, &other).is_ok());
    }

    proptest! {
        /// Every broken field is reported, and only those: break a random subset of
        /// flavors' counts and check the reported paths are exactly that subset.
        #[test]
        fn reports_exactly_the_broken_counts(broken in proptest::collection::vec(any::<bool>(), 1..=16)) {
            let mut p = valid();
            p.flavors = broken
                .iter()
                .enumerate()
                .map(|(i, &b)| flavor(&format!("f{i}"), Some(if b { 0 } else { 2 }), None))
                .collect();
            let got: Vec<String> = validate_policy(&p, "policy").into_iter().map(|v| v.field).collect();
            let want: Vec<String> = broken
                .iter()
                .enumerate()
                .filter(|(_, b)| **b)
                .map(|(i, _)| format!("policy.flavors[{i}].count"))
                .collect();
            prop_assert_eq!(got, want);
        }

        /// autoScale is valid exactly when the bounds are in range and ordered.
        #[test]
        fn autoscale_bounds(min in 0u32..600, max in 0u32..600) {
            let mut p = valid();
            p.flavors = vec![flavor("a", None, Some((min, max)))];
            let ok = min <= 512 && (1..=512).contains(&max) && min <= max;
            prop_assert_eq!(validate_policy(&p, "policy").is_empty(), ok);
        }

        /// A change touching only flavors and the version is always allowed.
        #[test]
        fn flavor_and_version_changes_are_allowed(n in 1usize..16, count in 1u32..512, v in "[0-9]\\.[0-9]{2}\\.[0-9]-do\\.[0-9]") {
            let old = valid();
            let mut new = old.clone();
            new.flavors = (0..n).map(|i| flavor(&format!("f{i}"), Some(count), None)).collect();
            if let ClusterPolicy::Create(c) = &mut new.substrate.as_mut().unwrap().cluster { c.version = v; }
            prop_assert!(validate_policy(&new, "policy").is_empty());
            prop_assert!(check_policy_change(&old, &new).is_ok());
        }
    }
}
