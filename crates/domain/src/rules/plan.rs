//! The flavor → node-pool plan of a substrate (SPEC §6): which provider node pools to
//! create, update or delete so that a cluster holds exactly one `bc-<pool>-<flavor>` pool
//! per flavor.
//!
//! Invariants:
//! - **Foreign pools are never touched.** A step only ever names a pool that is ours:
//!   its name is in the pool's namespace (`bc-<pool>-…`) *and* it carries our mark (the
//!   label `better-compute.dev/substrate-pool=<pool id>` or the tag of
//!   [`substrate_tag`]). A pool in our namespace without our mark was not made by us: it
//!   is reported by [`node_pool_conflicts`], never updated or deleted, and its name is
//!   never created beside it.
//! - **Never two pools of one name.** A Create is planned only when no observed pool has
//!   that name. A size change (size is immutable at providers) is a Delete now and the
//!   Create on a later run, once the old pool is gone from the listing; meanwhile the
//!   flavor has no nodes, which is the price of the name being the identity a restarted
//!   reconciler finds its pools by.
//! - **The provider owns autoscaled counts.** Updates of autoscaled pools send
//!   `count: None`, so the count the autoscaler chose is never reset; a count difference
//!   alone never triggers an update of an autoscaled pool.
//! - **Deterministic and idempotent.** Steps are ordered by name (deletes before the
//!   update of the same name); applying a plan and planning again gives no step, unless
//!   a size changed, in which case the second plan holds only the re-creates and the
//!   third is empty.

use std::collections::{BTreeMap, BTreeSet};

use crate::id::PoolId;
use crate::model::{Substrate, SubstrateMode};
use crate::name::{
    FlavorName, LABEL_FLAVOR, LABEL_MANAGED_BY, LABEL_SUBSTRATE_POOL, MANAGED_BY_VALUE,
    SubstrateNaming,
};
use crate::policy::{Flavor, Scale, Taint};
use crate::ports::provider::{NodePoolRequest, ProviderNodePool, ProviderNodeState};
use crate::state::ResourceState;

/// One provider call of a node-pool plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodePoolStep {
    /// Add a node pool (record its name as intent before the call).
    Create(NodePoolRequest),
    /// Change a node pool in place (count, autoscale bounds, labels, taints, tags).
    Update {
        /// The provider's node pool id.
        node_pool_id: String,
        /// The whole desired pool; `count` is `None` for autoscaled pools.
        request: NodePoolRequest,
    },
    /// Remove a node pool of ours.
    Delete {
        /// The provider's node pool id.
        node_pool_id: String,
        /// Its name, for events and messages.
        name: String,
    },
}

impl NodePoolStep {
    /// The name of the node pool the step acts on.
    pub fn name(&self) -> &str {
        match self {
            NodePoolStep::Create(r) | NodePoolStep::Update { request: r, .. } => &r.name,
            NodePoolStep::Delete { name, .. } => name,
        }
    }
}

/// The tag every substrate node pool (and a create-mode substrate's cluster) carries:
/// `better-compute-pool-<pool dashed>`. DigitalOcean tags allow `:`, but a hyphenated
/// tag is valid at every provider we know, stays clear of DigitalOcean's reserved `k8s`
/// prefix, and reads as one token.
pub fn substrate_tag(pool: &PoolId) -> String {
    format!("{SUBSTRATE_TAG_PREFIX}{}", pool.dashed())
}

const SUBSTRATE_TAG_PREFIX: &str = "better-compute-pool-";

/// The tag under GCP's label rule: `better-compute-substrate-pool-<pool id>`, which the
/// adapter writes as the label `better-compute-substrate-pool=<pool id>` (SPEC §6; a
/// pool id has no `-`, so the split is at the key's end).
const GCP_SUBSTRATE_TAG_PREFIX: &str = "better-compute-substrate-pool-";

/// The tag of `pool` under `naming`'s label rule ([`substrate_tag`], or the one
/// that becomes the GCP label `better-compute-substrate-pool=<pool id>`).
pub fn substrate_tag_for(pool: &PoolId, naming: SubstrateNaming) -> String {
    if naming.gcp_labels {
        format!("{GCP_SUBSTRATE_TAG_PREFIX}{pool}")
    } else {
        substrate_tag(pool)
    }
}

/// The pool whose substrate tag (either form) `tag` is, if it is one.
pub fn substrate_tag_pool(tag: &str) -> Option<PoolId> {
    if let Some(id) = tag.strip_prefix(GCP_SUBSTRATE_TAG_PREFIX) {
        return PoolId::parse(id).ok();
    }
    let dashed = tag.strip_prefix(SUBSTRATE_TAG_PREFIX)?;
    PoolId::parse(&dashed.replacen('-', "_", 1)).ok()
}

/// The pool a cluster was created for, among the substrates recorded on it (`users`),
/// other than `except`: a live create-mode substrate's. SPEC §6: such a cluster belongs
/// to that pool and goes with it, so no other pool adopts it and no tenant node pool is
/// added to it.
pub fn cluster_created_for<'a>(
    users: &'a [Substrate],
    except: Option<&PoolId>,
) -> Option<&'a PoolId> {
    users
        .iter()
        .find(|s| {
            Some(&s.pool_id) != except
                && s.mode == SubstrateMode::Create
                && s.state != ResourceState::Deleted
        })
        .map(|s| &s.pool_id)
}

/// `bc-<pool>-`: every long substrate node pool name of `pool` starts with it (short
/// ones with `bc-<d>-`, see [`SubstrateNaming`]). Pool id bodies have no `-`, so no
/// other pool's names share this prefix.
pub fn node_pool_name_prefix(pool: &PoolId) -> String {
    SubstrateNaming::LONG.node_pool_prefix(pool)
}

/// Whether a node pool carries our mark: the pool label with this pool's id, or our tag
/// (either form).
fn carries_our_mark(pool: &PoolId, np: &ProviderNodePool) -> bool {
    np.labels.get(LABEL_SUBSTRATE_POOL).is_some_and(|v| v == pool.as_str())
        || np.tags.iter().any(|t| substrate_tag_pool(t).as_ref() == Some(pool))
}

/// Whether an observed node pool belongs to `pool`'s substrate: named in its namespace
/// (long or short, whichever the provider's naming made) and carrying its mark. Only
/// such pools are ever updated or deleted.
pub fn is_our_node_pool(pool: &PoolId, np: &ProviderNodePool) -> bool {
    let short = SubstrateNaming { name_max: 0, gcp_labels: false };
    (np.name.starts_with(&node_pool_name_prefix(pool))
        || np.name.starts_with(&short.node_pool_prefix(pool)))
        && carries_our_mark(pool, np)
}

/// A node pool that holds the name one of our flavors needs but was not made by us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePoolConflict {
    /// The provider's node pool id.
    pub node_pool_id: String,
    /// Its name (`bc-<pool>-<flavor>`).
    pub name: String,
}

impl NodePoolConflict {
    /// The substrate's `error` message: which object and how to resolve it.
    pub fn message(&self, pool: &PoolId) -> String {
        format!(
            "node pool {} ({}) exists in the cluster without the label {LABEL_SUBSTRATE_POOL}={pool}: it was not made by this pool's substrate and is never changed or deleted; delete or rename it at the provider, or rename the flavor",
            self.name, self.node_pool_id
        )
    }
}

/// The observed node pools that hold the name of one of `flavors`' pools without our
/// mark, by name. The plan leaves them alone; the reconciler reports them as `error`.
pub fn node_pool_conflicts(
    pool: &PoolId,
    naming: SubstrateNaming,
    flavors: &[Flavor],
    observed: &[ProviderNodePool],
) -> Vec<NodePoolConflict> {
    let wanted: BTreeSet<String> =
        flavors.iter().filter_map(|f| desired_node_pool(pool, naming, f)).map(|r| r.name).collect();
    let mut out: Vec<NodePoolConflict> = observed
        .iter()
        .filter(|np| wanted.contains(&np.name) && !carries_our_mark(pool, np))
        .map(|np| NodePoolConflict { node_pool_id: np.id.clone(), name: np.name.clone() })
        .collect();
    out.sort_by(|a, b| (&a.name, &a.node_pool_id).cmp(&(&b.name, &b.node_pool_id)));
    out
}

/// The node pool a flavor wants, in create form: `bc-<pool>-<flavor>`, the flavor's
/// size, labels (the flavor's, then the system's `substrate-pool`, `flavor` and
/// `managed-by`, which win), taints and our tag. An autoscaled flavor starts at its
/// `min` (0 allowed: a scale-to-zero pool should not start paying for a node). `None`
/// for a flavor that fails validation (its name or scale), which never reaches here
/// from a stored policy.
pub fn desired_node_pool(
    pool: &PoolId,
    naming: SubstrateNaming,
    flavor: &Flavor,
) -> Option<NodePoolRequest> {
    let name = FlavorName::parse(&flavor.name).ok()?;
    let (count, auto_scale) = match flavor.scale()? {
        Scale::Count(c) => (c, None),
        Scale::AutoScale(a) => (a.min, Some((a.min, a.max))),
    };
    let mut labels = flavor.labels.clone();
    labels.insert(LABEL_SUBSTRATE_POOL.to_owned(), pool.as_str().to_owned());
    labels.insert(LABEL_FLAVOR.to_owned(), name.as_str().to_owned());
    labels.insert(LABEL_MANAGED_BY.to_owned(), MANAGED_BY_VALUE.to_owned());
    Some(NodePoolRequest {
        name: naming.node_pool_name(pool, &name),
        size: flavor.size.clone(),
        count: Some(count),
        auto_scale,
        labels,
        taints: flavor.taints.clone(),
        tags: vec![substrate_tag_for(pool, naming)],
    })
}

fn sorted_taints(t: &[Taint]) -> Vec<&Taint> {
    let mut v: Vec<&Taint> = t.iter().collect();
    v.sort();
    v
}

/// Label-key domains Kubernetes adds on its own; an observed key under one of them that
/// we do not want is the provider's, not a difference to undo (else an adapter reporting
/// such labels would make every plan an update, forever). A provider's own domains
/// (DOKS's `doks.digitalocean.com`) are its adapter's to leave out of what it reports:
/// no provider is named here.
const PROVIDER_LABEL_DOMAINS: [&str; 2] = ["kubernetes.io", "k8s.io"];

fn is_provider_label(key: &str) -> bool {
    key.split_once('/').is_some_and(|(prefix, _)| {
        PROVIDER_LABEL_DOMAINS
            .iter()
            .any(|d| prefix == *d || prefix.strip_suffix(d).is_some_and(|p| p.ends_with('.')))
    })
}

/// Every desired label must be there with its value; an extra observed label is a
/// difference (a label removed from the flavor) unless the provider added it.
fn labels_differ(observed: &BTreeMap<String, String>, desired: &BTreeMap<String, String>) -> bool {
    desired.iter().any(|(k, v)| observed.get(k) != Some(v))
        || observed.keys().any(|k| !desired.contains_key(k) && !is_provider_label(k))
}

/// Whether an observed pool of ours differs from the desired one in anything an update
/// can change. The count matters only for fixed-count pools. Tags: the desired ones must
/// be present (providers add their own, which are not ours to remove).
pub fn node_pool_needs_update(observed: &ProviderNodePool, desired: &NodePoolRequest) -> bool {
    let scale_differs = match desired.auto_scale {
        None => observed.auto_scale || Some(observed.count) != desired.count,
        Some((min, max)) => {
            !observed.auto_scale || observed.min_nodes != min || observed.max_nodes != max
        }
    };
    scale_differs
        || labels_differ(&observed.labels, &desired.labels)
        || sorted_taints(&observed.taints) != sorted_taints(&desired.taints)
        || desired.tags.iter().any(|t| !observed.tags.contains(t))
}

/// A provider node pool's nodes: `(listed, running)`.
pub fn node_counts(p: &ProviderNodePool) -> (u32, u32) {
    let running = p.nodes.iter().filter(|n| n.state == ProviderNodeState::Running).count();
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    (count(p.nodes.len()), count(running))
}

/// Whether an observed pool is configured as `want` asks (size, scale, labels, taints,
/// tags), whatever its nodes are doing.
pub fn pool_in_place(p: &ProviderNodePool, want: &NodePoolRequest) -> bool {
    p.size == want.size && !node_pool_needs_update(p, want)
}

/// Whether an observed pool has what `want` asks for, all its nodes running (an
/// autoscaled pool's count is the provider's, so any count will do).
pub fn pool_converged(p: &ProviderNodePool, want: &NodePoolRequest) -> bool {
    let (listed, running) = node_counts(p);
    let count_ok = match want.auto_scale {
        Some(_) => true,
        None => Some(listed) == want.count,
    };
    pool_in_place(p, want) && listed == running && count_ok
}

/// Whether a pool is settled: converged, or — once it converged at the desired state it
/// has now (`converged_before`) — still in place while the provider's nodes come and go
/// (the autoscaler, repairs): node counts move, but no policy changed, so nothing is
/// `updating`.
pub fn pool_settled(p: &ProviderNodePool, want: &NodePoolRequest, converged_before: bool) -> bool {
    pool_converged(p, want) || (converged_before && pool_in_place(p, want))
}

/// The steps that converge `observed` (a cluster's node pools, the tenant's included) to
/// one pool per flavor. See the module invariants; an empty plan means converged.
pub fn plan_node_pools(
    pool: &PoolId,
    naming: SubstrateNaming,
    flavors: &[Flavor],
    observed: &[ProviderNodePool],
) -> Vec<NodePoolStep> {
    let desired: BTreeMap<String, NodePoolRequest> = flavors
        .iter()
        .filter_map(|f| desired_node_pool(pool, naming, f))
        .map(|r| (r.name.clone(), r))
        .collect();
    // Every observed name, ours or not: a Create never lands beside a pool of that name.
    let taken: BTreeSet<&str> = observed.iter().map(|np| np.name.as_str()).collect();
    let mut ours: BTreeMap<&str, Vec<&ProviderNodePool>> = BTreeMap::new();
    for np in observed.iter().filter(|np| is_our_node_pool(pool, np)) {
        ours.entry(&np.name).or_default().push(np);
    }
    for pools in ours.values_mut() {
        pools.sort_by(|a, b| a.id.cmp(&b.id));
    }
    let names: BTreeSet<&str> =
        desired.keys().map(String::as_str).chain(ours.keys().copied()).collect();
    let mut steps = Vec::new();
    for name in names {
        let mine = ours.get(name).map(Vec::as_slice).unwrap_or_default();
        let delete = |np: &ProviderNodePool| NodePoolStep::Delete {
            node_pool_id: np.id.clone(),
            name: np.name.clone(),
        };
        match desired.get(name) {
            None => steps.extend(mine.iter().map(|np| delete(np))),
            Some(want) if mine.is_empty() => {
                if !taken.contains(name) {
                    steps.push(NodePoolStep::Create(want.clone()));
                }
            }
            Some(want) => {
                // Keep the first pool of the right size; any other of that name (a
                // duplicate left by a crash, or the old size) goes.
                let keeper = mine.iter().find(|np| np.size == want.size);
                steps.extend(
                    mine.iter()
                        .filter(|np| keeper.is_none_or(|k| k.id != np.id))
                        .map(|np| delete(np)),
                );
                if let Some(k) = keeper
                    && node_pool_needs_update(k, want)
                {
                    let mut request = want.clone();
                    if request.auto_scale.is_some() {
                        request.count = None;
                    }
                    steps.push(NodePoolStep::Update { node_pool_id: k.id.clone(), request });
                }
            }
        }
    }
    steps
}

/// Whether `observed` already matches `flavors` (the plan is empty).
pub fn plan_is_converged(
    pool: &PoolId,
    naming: SubstrateNaming,
    flavors: &[Flavor],
    observed: &[ProviderNodePool],
) -> bool {
    plan_node_pools(pool, naming, flavors, observed).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{AutoScale, TaintEffect};
    use proptest::prelude::*;

    const LONG: SubstrateNaming = SubstrateNaming::LONG;

    fn pool_id() -> PoolId {
        PoolId::parse("pool_01hq3k5v9x8y7z6w5v4t3s2r1q").unwrap()
    }

    fn fixed(name: &str, size: &str, count: u32) -> Flavor {
        Flavor {
            name: name.into(),
            size: size.into(),
            count: Some(count),
            auto_scale: None,
            labels: BTreeMap::new(),
            taints: vec![],
        }
    }

    fn auto(name: &str, size: &str, min: u32, max: u32) -> Flavor {
        Flavor { count: None, auto_scale: Some(AutoScale { min, max }), ..fixed(name, size, 0) }
    }

    #[test]
    fn a_cluster_is_created_for_the_live_create_mode_substrate_on_it() {
        use crate::policy::{AdoptClusterPolicy, ClusterPolicy, CreateClusterPolicy};
        use crate::policy::{SubstrateKind, SubstratePolicy};
        let substrate = |pool: &str, cluster: ClusterPolicy, state: ResourceState| {
            let policy =
                SubstratePolicy { kind: SubstrateKind::Kubernetes, account: "a".into(), cluster };
            let (tenant, account) =
                (crate::TenantId::parse("acme").unwrap(), crate::ProviderAccountId::generate(1, 1));
            let now = crate::Timestamp::from_unix_ms(0);
            let pool = PoolId::parse(pool).unwrap();
            Substrate { state, ..Substrate::pending(pool, tenant, account, &policy, now) }
        };
        let create = ClusterPolicy::Create(CreateClusterPolicy {
            region: "nyc1".into(),
            version: "latest".into(),
            high_availability: false,
            name: None,
        });
        let adopt = ClusterPolicy::Adopt(AdoptClusterPolicy { provider_cluster_id: "c".into() });
        let (a, b) = ("pool_01hq3k5v9x8y7z6w5v4t3s2r1a", "pool_01hq3k5v9x8y7z6w5v4t3s2r1b");
        let made = substrate(a, create.clone(), ResourceState::Ready);
        let adopting = substrate(b, adopt, ResourceState::Ready);
        let users = [adopting.clone(), made.clone()];
        assert_eq!(cluster_created_for(&users, None), Some(&made.pool_id));
        assert_eq!(cluster_created_for(&users, Some(&adopting.pool_id)), Some(&made.pool_id));
        assert_eq!(cluster_created_for(&users, Some(&made.pool_id)), None, "its own pool");
        let gone = substrate(a, create, ResourceState::Deleted);
        assert_eq!(cluster_created_for(&[adopting, gone], None), None, "deleted with its pool");
    }

    /// What the provider would hold after creating `req` with id `id`.
    fn made(id: &str, req: &NodePoolRequest) -> ProviderNodePool {
        let (min, max) = req.auto_scale.unwrap_or((0, 0));
        ProviderNodePool {
            id: id.into(),
            name: req.name.clone(),
            size: req.size.clone(),
            count: req.count.unwrap_or(0),
            auto_scale: req.auto_scale.is_some(),
            min_nodes: min,
            max_nodes: max,
            labels: req.labels.clone(),
            taints: req.taints.clone(),
            // The provider adds its own tags.
            tags: [req.tags.clone(), vec!["k8s".into()]].concat(),
            version: None,
            nodes: vec![],
        }
    }

    fn foreign(id: &str, name: &str) -> ProviderNodePool {
        ProviderNodePool {
            id: id.into(),
            name: name.into(),
            size: "s-1vcpu-2gb".into(),
            count: 2,
            auto_scale: false,
            min_nodes: 0,
            max_nodes: 0,
            labels: BTreeMap::new(),
            taints: vec![],
            tags: vec![],
            version: None,
            nodes: vec![],
        }
    }

    /// Applies a plan to a model of the provider's node pools.
    fn apply(observed: &mut Vec<ProviderNodePool>, steps: &[NodePoolStep], next_id: &mut u32) {
        for step in steps {
            match step {
                NodePoolStep::Create(req) => {
                    *next_id += 1;
                    observed.push(made(&format!("new-{next_id}"), req));
                }
                NodePoolStep::Update { node_pool_id, request } => {
                    let np = observed.iter_mut().find(|np| np.id == *node_pool_id).unwrap();
                    let count = request.count.unwrap_or(np.count);
                    let mut next = made(node_pool_id, request);
                    next.size = np.size.clone();
                    next.count = count;
                    *np = next;
                }
                NodePoolStep::Delete { node_pool_id, .. } => {
                    observed.retain(|np| np.id != *node_pool_id)
                }
            }
        }
    }

    #[test]
    fn a_substrate_tag_names_its_pool_and_nothing_else_does() {
        let p = pool_id();
        assert_eq!(substrate_tag_pool(&substrate_tag(&p)), Some(p));
        assert_eq!(
            substrate_tag_pool("better-compute-cluster-cluster-01hq3k5v9x8y7z6w5v4t3s2r1q"),
            None
        );
        assert_eq!(substrate_tag_pool("better-compute-pool-nonsense"), None);
        assert_eq!(substrate_tag_pool("k8s"), None);
    }

    #[test]
    fn names_labels_and_tags() {
        let p = pool_id();
        let mut f = auto("gpu", "gpu-h100x1-80gb", 0, 4);
        f.labels.insert("team".into(), "ml".into());
        f.taints.push(Taint {
            key: "gpu".into(),
            value: "".into(),
            effect: TaintEffect::NoSchedule,
        });
        let r = desired_node_pool(&p, LONG, &f).unwrap();
        assert_eq!(r.name, "bc-pool-01hq3k5v9x8y7z6w5v4t3s2r1q-gpu");
        assert_eq!(r.labels.get("better-compute.dev/substrate-pool").unwrap(), p.as_str());
        assert_eq!(r.labels.get("better-compute.dev/flavor").unwrap(), "gpu");
        assert_eq!(r.labels.get("team").unwrap(), "ml");
        assert_eq!(r.tags, vec!["better-compute-pool-pool-01hq3k5v9x8y7z6w5v4t3s2r1q".to_string()]);
        assert_eq!((r.count, r.auto_scale), (Some(0), Some((0, 4))));
        assert_eq!(r.taints.len(), 1);
        assert_eq!(desired_node_pool(&p, LONG, &fixed("Bad", "s", 1)), None);
    }

    #[test]
    fn creates_missing_and_leaves_the_tenants_pools() {
        let p = pool_id();
        let observed =
            vec![foreign("t1", "default"), foreign("t2", "bc-pool-01hq3k5v9x8y7z6w5v4t3s2r1r-cpu")];
        let steps = plan_node_pools(
            &p,
            LONG,
            &[fixed("cpu", "s-2vcpu-4gb", 3), fixed("arm", "c-4", 1)],
            &observed,
        );
        let names: Vec<&str> = steps.iter().map(NodePoolStep::name).collect();
        assert_eq!(
            names,
            vec![
                "bc-pool-01hq3k5v9x8y7z6w5v4t3s2r1q-arm",
                "bc-pool-01hq3k5v9x8y7z6w5v4t3s2r1q-cpu"
            ]
        );
        assert!(steps.iter().all(|s| matches!(s, NodePoolStep::Create(_))));
    }

    #[test]
    fn fixed_count_changes_update_with_the_count() {
        let p = pool_id();
        let want = desired_node_pool(&p, LONG, &fixed("cpu", "s-2vcpu-4gb", 3)).unwrap();
        let observed = vec![made("np1", &want)];
        assert!(plan_is_converged(&p, LONG, &[fixed("cpu", "s-2vcpu-4gb", 3)], &observed));
        let steps = plan_node_pools(&p, LONG, &[fixed("cpu", "s-2vcpu-4gb", 5)], &observed);
        let [NodePoolStep::Update { node_pool_id, request }] = steps.as_slice() else {
            panic!("{steps:?}")
        };
        assert_eq!(
            (node_pool_id.as_str(), request.count, request.auto_scale),
            ("np1", Some(5), None)
        );
    }

    #[test]
    fn autoscaled_counts_are_the_providers() {
        let p = pool_id();
        let f = auto("gpu", "g-4vcpu-16gb", 1, 4);
        let mut np = made("np1", &desired_node_pool(&p, LONG, &f).unwrap());
        np.count = 3; // the autoscaler's choice
        assert!(plan_is_converged(&p, LONG, std::slice::from_ref(&f), std::slice::from_ref(&np)));
        // Bounds change: update without a count.
        let steps = plan_node_pools(&p, LONG, &[auto("gpu", "g-4vcpu-16gb", 2, 6)], &[np.clone()]);
        let [NodePoolStep::Update { request, .. }] = steps.as_slice() else { panic!("{steps:?}") };
        assert_eq!((request.count, request.auto_scale), (None, Some((2, 6))));
        // Fixed → autoscaled, and autoscaled → fixed.
        let fixed_np =
            made("np2", &desired_node_pool(&p, LONG, &fixed("gpu", "g-4vcpu-16gb", 2)).unwrap());
        let steps = plan_node_pools(&p, LONG, std::slice::from_ref(&f), &[fixed_np]);
        assert!(
            matches!(&steps[..], [NodePoolStep::Update { request, .. }] if request.count.is_none())
        );
        let steps = plan_node_pools(&p, LONG, &[fixed("gpu", "g-4vcpu-16gb", 3)], &[np]);
        assert!(
            matches!(&steps[..], [NodePoolStep::Update { request, .. }] if request.count == Some(3) && request.auto_scale.is_none())
        );
    }

    #[test]
    fn labels_taints_and_tags_differences_update() {
        let p = pool_id();
        let f = fixed("cpu", "s-2vcpu-4gb", 2);
        let base = made("np1", &desired_node_pool(&p, LONG, &f).unwrap());
        let mut f2 = f.clone();
        f2.labels.insert("tier".into(), "web".into());
        assert_eq!(plan_node_pools(&p, LONG, &[f2], std::slice::from_ref(&base)).len(), 1);
        let mut f3 = f.clone();
        f3.taints.push(Taint {
            key: "k".into(),
            value: "v".into(),
            effect: TaintEffect::NoExecute,
        });
        assert_eq!(plan_node_pools(&p, LONG, &[f3], std::slice::from_ref(&base)).len(), 1);
        // A label removed from the flavor is removed from the pool.
        let mut extra = base.clone();
        extra.labels.insert("old".into(), "x".into());
        assert_eq!(plan_node_pools(&p, LONG, std::slice::from_ref(&f), &[extra]).len(), 1);
        // Provider-added labels are not ours to remove.
        let mut provider = base.clone();
        provider.labels.insert("node.kubernetes.io/instance-type".into(), "x".into());
        assert!(plan_is_converged(&p, LONG, std::slice::from_ref(&f), &[provider]));
        let mut lookalike = base.clone();
        lookalike.labels.insert("notkubernetes.io/x".into(), "x".into());
        assert!(!plan_is_converged(&p, LONG, std::slice::from_ref(&f), &[lookalike]));
        // Our tag lost (label kept, so still ours): put back; provider tags are no reason.
        let mut untagged = base.clone();
        untagged.tags = vec!["k8s".into()];
        let steps = plan_node_pools(&p, LONG, std::slice::from_ref(&f), &[untagged]);
        assert!(
            matches!(&steps[..], [NodePoolStep::Update { request, .. }] if request.tags == vec![substrate_tag(&p)])
        );
        // Taint order is not a difference.
        let mut f4 = f.clone();
        let t =
            |k: &str| Taint { key: k.into(), value: "".into(), effect: TaintEffect::NoSchedule };
        f4.taints = vec![t("a"), t("b")];
        let mut np = made("np1", &desired_node_pool(&p, LONG, &f4).unwrap());
        np.taints.reverse();
        assert!(plan_is_converged(&p, LONG, &[f4], &[np]));
    }

    #[test]
    fn size_change_deletes_now_and_creates_later() {
        let p = pool_id();
        let old =
            made("np1", &desired_node_pool(&p, LONG, &fixed("cpu", "s-2vcpu-4gb", 2)).unwrap());
        let flavors = [fixed("cpu", "s-4vcpu-8gb", 2)];
        let steps = plan_node_pools(&p, LONG, &flavors, std::slice::from_ref(&old));
        assert_eq!(
            steps,
            vec![NodePoolStep::Delete { node_pool_id: "np1".into(), name: old.name.clone() }]
        );
        // Once gone, the new size is created.
        let steps = plan_node_pools(&p, LONG, &flavors, &[]);
        assert!(matches!(&steps[..], [NodePoolStep::Create(r)] if r.size == "s-4vcpu-8gb"));
    }

    #[test]
    fn removed_flavors_and_duplicates_are_deleted() {
        let p = pool_id();
        let cpu = desired_node_pool(&p, LONG, &fixed("cpu", "s-2vcpu-4gb", 2)).unwrap();
        let mut gone =
            made("np9", &desired_node_pool(&p, LONG, &fixed("old", "s-2vcpu-4gb", 2)).unwrap());
        gone.labels.clear(); // only the tag left: still ours
        let observed = vec![made("np2", &cpu), made("np1", &cpu), gone];
        let steps = plan_node_pools(&p, LONG, &[fixed("cpu", "s-2vcpu-4gb", 2)], &observed);
        assert_eq!(
            steps,
            vec![
                NodePoolStep::Delete { node_pool_id: "np2".into(), name: cpu.name.clone() },
                NodePoolStep::Delete {
                    node_pool_id: "np9".into(),
                    name: "bc-pool-01hq3k5v9x8y7z6w5v4t3s2r1q-old".into()
                },
            ]
        );
    }

    #[test]
    fn a_squatter_is_a_conflict_never_a_step() {
        let p = pool_id();
        let flavors = [fixed("cpu", "s-2vcpu-4gb", 2)];
        let squatter = foreign("t1", "bc-pool-01hq3k5v9x8y7z6w5v4t3s2r1q-cpu");
        // Another pool's label does not make it ours either.
        let mut others = foreign("t2", "bc-pool-01hq3k5v9x8y7z6w5v4t3s2r1q-old");
        others.labels.insert(LABEL_SUBSTRATE_POOL.into(), "pool_01hq3k5v9x8y7z6w5v4t3s2r1r".into());
        let observed = vec![squatter, others];
        assert_eq!(plan_node_pools(&p, LONG, &flavors, &observed), vec![]);
        let conflicts = node_pool_conflicts(&p, LONG, &flavors, &observed);
        assert_eq!(
            conflicts,
            vec![NodePoolConflict {
                node_pool_id: "t1".into(),
                name: "bc-pool-01hq3k5v9x8y7z6w5v4t3s2r1q-cpu".into()
            }]
        );
        let msg = conflicts[0].message(&p);
        assert!(msg.contains("t1") && msg.contains("never changed or deleted"), "{msg}");
    }

    fn flavor_strategy() -> impl Strategy<Value = Flavor> {
        let sizes = prop::sample::select(vec!["s-2vcpu-4gb", "c-4", "g-4vcpu-16gb"]);
        let scale = prop_oneof![
            (1u32..5).prop_map(|c| (Some(c), None)),
            (0u32..3, 0u32..3)
                .prop_map(|(a, b)| (None, Some(AutoScale { min: a, max: a + b + 1 }))),
        ];
        let labels = proptest::collection::btree_map("[a-c]", "[x-z]", 0..2);
        let taints = proptest::collection::vec(
            ("[a-b]", prop::sample::select(vec![TaintEffect::NoSchedule, TaintEffect::NoExecute]))
                .prop_map(|(key, effect)| Taint { key, value: String::new(), effect }),
            0..2,
        );
        (sizes, scale, labels, taints).prop_map(|(size, (count, auto_scale), labels, taints)| {
            Flavor { name: String::new(), size: size.into(), count, auto_scale, labels, taints }
        })
    }

    /// Flavors named f0…, and an observed cluster: some of our pools (possibly stale in
    /// size, scale, labels; some for removed flavors), the tenant's pools, and squatters.
    fn scenario() -> impl Strategy<Value = (Vec<Flavor>, Vec<ProviderNodePool>, BTreeSet<String>)> {
        (
            proptest::collection::vec(flavor_strategy(), 0..5),
            proptest::collection::vec((0usize..7, flavor_strategy(), 0u32..6, any::<bool>()), 0..6),
            proptest::collection::vec((0usize..7, any::<bool>()), 0..4),
        )
            .prop_map(|(mut flavors, ours, foreigners)| {
                let p = pool_id();
                for (i, f) in flavors.iter_mut().enumerate() {
                    f.name = format!("f{i}");
                }
                let mut observed = Vec::new();
                for (k, (idx, mut f, count, tag_only)) in ours.into_iter().enumerate() {
                    f.name = format!("f{idx}");
                    let mut np =
                        made(&format!("ours-{k}"), &desired_node_pool(&p, LONG, &f).unwrap());
                    np.count = count;
                    if tag_only {
                        np.labels.remove(LABEL_SUBSTRATE_POOL);
                    }
                    observed.push(np);
                }
                let mut foreign_ids = BTreeSet::new();
                for (k, (idx, in_our_namespace)) in foreigners.into_iter().enumerate() {
                    let id = format!("tenant-{k}");
                    let name = if in_our_namespace {
                        format!("{}f{idx}", node_pool_name_prefix(&p))
                    } else {
                        format!("tenant-pool-{idx}")
                    };
                    foreign_ids.insert(id.clone());
                    observed.push(foreign(&id, &name));
                }
                (flavors, observed, foreign_ids)
            })
    }

    proptest! {
        /// Foreign pools never appear in a step, no Create lands beside an existing name,
        /// and applying the plan converges: at once when no size changed, else in two.
        #[test]
        fn plans_converge_and_leave_foreign_pools((flavors, mut observed, foreign_ids) in scenario()) {
            let p = pool_id();
            let foreign_names: BTreeSet<String> = observed.iter().filter(|np| foreign_ids.contains(&np.id)).map(|np| np.name.clone()).collect();
            let size_changed = observed.iter().filter(|np| !foreign_ids.contains(&np.id)).any(|np| {
                flavors.iter().any(|f| desired_node_pool(&p, LONG, f).unwrap().name == np.name && f.size != np.size)
            });
            let mut next_id = 0;
            let mut rounds = 0;
            loop {
                let steps = plan_node_pools(&p, LONG, &flavors, &observed);
                let names_now: BTreeSet<&str> = observed.iter().map(|np| np.name.as_str()).collect();
                for s in &steps {
                    match s {
                        NodePoolStep::Create(r) => prop_assert!(!names_now.contains(r.name.as_str()), "create beside {}", r.name),
                        NodePoolStep::Update { node_pool_id, request } => {
                            prop_assert!(!foreign_ids.contains(node_pool_id));
                            if request.auto_scale.is_some() { prop_assert_eq!(request.count, None); }
                        }
                        NodePoolStep::Delete { node_pool_id, .. } => prop_assert!(!foreign_ids.contains(node_pool_id)),
                    }
                    prop_assert!(s.name().starts_with(&node_pool_name_prefix(&p)));
                }
                if steps.is_empty() { break; }
                rounds += 1;
                prop_assert!(rounds <= 2, "not converged after two rounds: {:?}", steps);
                apply(&mut observed, &steps, &mut next_id);
            }
            if !size_changed { prop_assert!(rounds <= 1); }
            // Foreign pools are all still there, unchanged in name.
            let after: BTreeSet<String> = observed.iter().filter(|np| foreign_ids.contains(&np.id)).map(|np| np.name.clone()).collect();
            prop_assert_eq!(after, foreign_names.clone());
            // Every flavor has at most one pool of ours, exactly one where its name is not squatted.
            for f in &flavors {
                let name = desired_node_pool(&p, LONG, f).unwrap().name;
                let n = observed.iter().filter(|np| np.name == name && is_our_node_pool(&p, np)).count();
                // (A squatted name keeps our pool if we already had one, but gets no new one.)
                prop_assert!(n <= 1);
                if !foreign_names.contains(&name) { prop_assert_eq!(n, 1); }
            }
            // The autoscaler moving counts within bounds needs no step.
            for np in observed.iter_mut().filter(|np| np.auto_scale) { np.count = np.max_nodes; }
            prop_assert!(plan_is_converged(&p, LONG, &flavors, &observed));
        }
    }
}
