//! The cluster reconciler's pure decisions: the rows of the provider's own node pools
//! (read-only, origin `provider`), and a tenant cluster's state from what the provider
//! shows and what its node pools' rows say (SPEC §7, §8).
//!
//! Invariants: a provider pool gets a row only when no live row holds its id or name
//! (ours are recorded before they are made, so ours never get a second, read-only row);
//! a provider-origin row is only ever written from observation; the cluster is `error`
//! while any of its pools is, naming the pool; `updating` while any converges.

use bc_domain::model::{KubernetesCluster, NodePool, NodePoolOrigin};
use bc_domain::policy::{AutoScale, Scale};
use bc_domain::ports::{ProviderClusterState, ProviderNodePool, Write};
use bc_domain::{NodePoolId, NodePoolState, ResourceState, Timestamp};

use bc_domain::rules::plan::node_counts;

use crate::shared::records::RowSync;

/// A provider pool's scale as it shows it.
fn observed_scale(p: &ProviderNodePool) -> Scale {
    if p.auto_scale {
        Scale::AutoScale(AutoScale { min: p.min_nodes, max: p.max_nodes })
    } else {
        Scale::Count(p.count)
    }
}

/// The writes that record the provider's own pools of `cluster` (`observed`) as
/// read-only rows and follow them; `rows` are the cluster's live rows.
pub fn provider_rows(
    cluster: &KubernetesCluster,
    rows: &[NodePool],
    observed: &[ProviderNodePool],
    now: Timestamp,
    new_id: &mut dyn FnMut() -> NodePoolId,
) -> RowSync {
    let mut out = RowSync::default();
    for p in observed {
        let held = rows
            .iter()
            .any(|r| r.provider_node_pool_id.as_deref() == Some(p.id.as_str()) || r.name == p.name);
        if held {
            continue;
        }
        let (listed, ready) = node_counts(p);
        let row = NodePool {
            node_pool_id: new_id(),
            cluster_id: cluster.cluster_id.clone(),
            tenant_id: cluster.tenant_id.clone(),
            name: p.name.clone(),
            size: p.size.clone(),
            scale: observed_scale(p),
            labels: p.labels.clone(),
            taints: p.taints.clone(),
            managed_by: None,
            origin: NodePoolOrigin::Provider,
            delete_requested: false,
            generation: 1,
            created_at: now,
            provider_node_pool_id: Some(p.id.clone()),
            nodes_listed: listed,
            nodes_ready: ready,
            state: NodePoolState::Ready,
            message: None,
            observed_generation: 1,
            updated_at: now,
        };
        out.writes.push(Write::InsertNodePool(row));
    }
    for r in rows.iter().filter(|r| r.origin == NodePoolOrigin::Provider) {
        let found =
            observed.iter().find(|p| r.provider_node_pool_id.as_deref() == Some(p.id.as_str()));
        match found {
            None => {
                for state in [NodePoolState::Deleting, NodePoolState::Deleted] {
                    if r.state == NodePoolState::Deleting && state == NodePoolState::Deleting {
                        continue;
                    }
                    out.writes.push(status_write(r, state, (0, 0), now));
                }
            }
            Some(p) => {
                let scale = observed_scale(p);
                if r.scale != scale
                    || r.labels != p.labels
                    || r.taints != p.taints
                    || r.size != p.size
                {
                    out.writes.push(Write::UpdateNodePool {
                        node_pool: NodePool {
                            scale,
                            labels: p.labels.clone(),
                            taints: p.taints.clone(),
                            generation: r.generation + 1,
                            ..r.clone()
                        },
                        expected_generation: r.generation,
                    });
                }
                if (r.nodes_listed, r.nodes_ready) != node_counts(p) {
                    out.writes.push(status_write(r, r.state, node_counts(p), now));
                }
            }
        }
    }
    out
}

fn status_write(
    r: &NodePool,
    state: NodePoolState,
    (listed, ready): (u32, u32),
    now: Timestamp,
) -> Write {
    Write::SetNodePoolStatus {
        node_pool_id: r.node_pool_id.clone(),
        provider_node_pool_id: None,
        nodes_listed: listed,
        nodes_ready: ready,
        state,
        message: None,
        observed_generation: r.observed_generation,
        updated_at: now,
    }
}

/// The tenant's node pools of the cluster made through this system (no substrate's, not
/// the provider's own), deleted ones included: what goes into the cluster's create.
pub fn tenant_pools(rows: &[NodePool]) -> impl Iterator<Item = &NodePool> {
    rows.iter().filter(|r| r.origin == NodePoolOrigin::Created && r.managed_by.is_none())
}

/// Whether the cluster's create stands refused as it is asked now: not made, `error`
/// stamped at its generation, and every first pool refused with it at its own
/// generation — a change of the cluster or of a first pool (added, resized, deleted)
/// asks again (SPEC §8: a refusal waits for the tenant's change).
pub fn create_refused(cluster: &KubernetesCluster, rows: &[NodePool]) -> bool {
    cluster.provider_cluster_id.is_none()
        && cluster.status.state == ResourceState::Error
        && cluster.status.observed_generation == cluster.generation
        && tenant_pools(rows).all(|r| {
            !r.delete_requested
                && r.state == NodePoolState::Error
                && r.observed_generation == r.generation
        })
}

/// Where a tenant cluster is, derived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Derived {
    /// Converged.
    Ready,
    /// Being made or changed (by the provider or by its pools).
    Converging(String),
    /// Something to fix.
    Error(String),
}

/// A running cluster's state from the rows of the node pools made through this system
/// (the tenant's and the substrates'; not the provider's own): `error` naming the first
/// refused pool, `updating` while any converges (SPEC §8).
pub fn from_pools(rows: &[NodePool]) -> Derived {
    let ours: Vec<&NodePool> =
        rows.iter().filter(|r| r.origin == NodePoolOrigin::Created).collect();
    if let Some(r) = ours.iter().find(|r| r.state == NodePoolState::Error) {
        let fix = match &r.managed_by {
            Some(pool) => format!("change that flavor in the policy of pool {pool}"),
            None => "change or delete that node pool".to_owned(),
        };
        return Derived::Error(format!(
            "node pool {} ({}) is in error: {}; {fix}",
            r.name,
            r.node_pool_id,
            r.message.as_deref().unwrap_or("refused by the provider")
        ));
    }
    let busy: Vec<&str> = ours
        .iter()
        .filter(|r| {
            matches!(
                r.state,
                NodePoolState::Pending | NodePoolState::Updating | NodePoolState::Deleting
            )
        })
        .map(|r| r.name.as_str())
        .collect();
    if busy.is_empty() {
        Derived::Ready
    } else {
        Derived::Converging(format!("node pools converging: {}", busy.join(", ")))
    }
}

/// The message of a cluster the provider is working on: what it does when the provider
/// says (GKE's operation in flight), else that it is being upgraded.
pub fn at_work(name: &str, message: Option<&str>) -> String {
    match message {
        Some(m) => format!("cluster {name} is being changed by the provider: {m}"),
        None => format!("cluster {name} is being upgraded by the provider"),
    }
}

/// What the provider's cluster state means for the row, or `None` when it runs (the
/// pools decide then).
pub fn from_provider(
    name: &str,
    state: &ProviderClusterState,
    message: Option<&str>,
) -> Option<Derived> {
    match state {
        ProviderClusterState::Running
        | ProviderClusterState::Degraded
        | ProviderClusterState::Unknown(_) => None,
        ProviderClusterState::Provisioning => Some(Derived::Converging(format!(
            "cluster {name} is being provisioned by the provider"
        ))),
        ProviderClusterState::Upgrading => Some(Derived::Converging(at_work(name, message))),
        ProviderClusterState::Error => Some(Derived::Error(format!(
            "the provider reports cluster {name} in error{}: see the provider's console, or delete the cluster",
            message.map(|m| format!(" ({m})")).unwrap_or_default()
        ))),
        ProviderClusterState::Deleting | ProviderClusterState::Deleted => {
            Some(Derived::Error(format!(
                "cluster {name} is being deleted at the provider outside this system: delete it here too"
            )))
        }
    }
}

/// The state and message `derived` shows on a cluster row: converging is
/// `provisioning` until the cluster was first ready, `updating` after.
pub fn shown(cluster: &KubernetesCluster, derived: &Derived) -> (ResourceState, Option<String>) {
    match derived {
        Derived::Ready => (ResourceState::Ready, None),
        Derived::Converging(m) if cluster.status.observed_generation == 0 => {
            (ResourceState::Provisioning, Some(m.clone()))
        }
        Derived::Converging(m) => (ResourceState::Updating, Some(m.clone())),
        Derived::Error(m) => (ResourceState::Error, Some(m.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bc_domain::model::{ClusterMode, ClusterOrigin, ObservedStatus};
    use bc_domain::ports::{ProviderNode, ProviderNodeState};
    use bc_domain::{ClusterId, ObjectName, PoolId, ProviderAccountId, TenantId};

    fn now() -> Timestamp {
        Timestamp::from_unix_ms(1_800_000_000_000)
    }

    fn cluster() -> KubernetesCluster {
        KubernetesCluster {
            cluster_id: ClusterId::generate(1, 1),
            tenant_id: TenantId::parse("acme").unwrap(),
            provider_account_id: ProviderAccountId::generate(1, 2),
            name: ObjectName::parse("alpha").unwrap(),
            region: "nyc1".into(),
            desired_version: None,
            high_availability: false,
            mode: ClusterMode::Standard,
            origin: ClusterOrigin::Adopted,
            substrate_pool_ids: vec![],
            delete_requested: false,
            generation: 1,
            created_at: now(),
            provider_cluster_id: Some("c1".into()),
            version: None,
            nodes: None,
            status: ObservedStatus::pending(now()),
        }
    }

    fn pool(id: &str, name: &str, nodes: u32) -> ProviderNodePool {
        ProviderNodePool {
            id: id.into(),
            name: name.into(),
            size: "s-2vcpu-4gb".into(),
            count: nodes,
            auto_scale: false,
            min_nodes: 0,
            max_nodes: 0,
            labels: Default::default(),
            taints: vec![],
            tags: vec![],
            version: None,
            nodes: (0..nodes)
                .map(|i| ProviderNode {
                    id: format!("{i}"),
                    name: format!("{name}-{i}"),
                    state: ProviderNodeState::Running,
                    droplet_id: None,
                })
                .collect(),
        }
    }

    fn sync(rows: &[NodePool], observed: &[ProviderNodePool]) -> RowSync {
        let mut n = 0;
        provider_rows(&cluster(), rows, observed, now(), &mut || {
            n += 1;
            NodePoolId::generate(3, n)
        })
    }

    #[test]
    fn the_providers_pools_get_read_only_rows_once_and_follow_the_provider() {
        let observed = [pool("p1", "default", 2)];
        let s = sync(&[], &observed);
        let [Write::InsertNodePool(row)] = s.writes.as_slice() else { panic!("{:?}", s.writes) };
        assert_eq!(
            (row.origin, row.state, row.nodes_listed, row.managed_by.clone()),
            (NodePoolOrigin::Provider, NodePoolState::Ready, 2, None)
        );
        assert!(sync(std::slice::from_ref(row), &observed).writes.is_empty(), "recorded once");
        let grown = [pool("p1", "default", 3)];
        let s = sync(std::slice::from_ref(row), &grown);
        assert!(
            matches!(&s.writes[0], Write::UpdateNodePool { node_pool, expected_generation: 1 } if node_pool.scale == Scale::Count(3))
        );
        let s = sync(std::slice::from_ref(row), &[]);
        let states: Vec<NodePoolState> = s
            .writes
            .iter()
            .filter_map(|w| match w {
                Write::SetNodePoolStatus { state, .. } => Some(*state),
                _ => None,
            })
            .collect();
        assert_eq!(states, vec![NodePoolState::Deleting, NodePoolState::Deleted]);
    }

    #[test]
    fn pools_with_a_row_of_ours_get_no_provider_row() {
        let mut ours = match &sync(&[], &[pool("p9", "bc-pool-x-cpu", 1)]).writes[0] {
            Write::InsertNodePool(r) => r.clone(),
            _ => unreachable!(),
        };
        ours.origin = NodePoolOrigin::Created;
        ours.managed_by = Some(PoolId::generate(1, 1));
        ours.provider_node_pool_id = None;
        assert!(sync(&[ours], &[pool("p9", "bc-pool-x-cpu", 1)]).writes.is_empty());
    }

    #[test]
    fn the_cluster_is_error_naming_the_refused_pool_and_updating_while_pools_converge() {
        let mut a = match &sync(&[], &[pool("p1", "workers", 1)]).writes[0] {
            Write::InsertNodePool(r) => r.clone(),
            _ => unreachable!(),
        };
        a.origin = NodePoolOrigin::Created;
        a.state = NodePoolState::Updating;
        assert_eq!(
            from_pools(std::slice::from_ref(&a)),
            Derived::Converging("node pools converging: workers".into())
        );
        a.state = NodePoolState::Error;
        a.message = Some("422 bad size".into());
        let Derived::Error(m) = from_pools(std::slice::from_ref(&a)) else { panic!() };
        assert!(m.contains("workers") && m.contains("422 bad size"), "{m}");
        a.state = NodePoolState::Ready;
        assert_eq!(from_pools(&[a]), Derived::Ready);
        let c = cluster();
        assert_eq!(shown(&c, &Derived::Converging("x".into())).0, ResourceState::Provisioning);
    }
}
