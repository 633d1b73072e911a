//! The rows the Kubernetes reconcilers write in common: a batch of node pool row writes
//! with the rows whose state moved ([`RowSync`]), the provider request a tenant's node
//! pool row stands for, and a cluster row's status moves — what the substrate, cluster
//! and node-pool reconcilers share instead of reaching into one another.
//!
//! Invariants: a status is proposed only when something in it changed (so a converged
//! object writes nothing) and only along `ResourceState::transition`; a cluster row
//! closes through `deleting`, the state machine's one way to `deleted`.

use bc_domain::model::{KubernetesCluster, NodePool, ObservedStatus};
use bc_domain::policy::Scale;
use bc_domain::ports::{NodePoolRequest, Write};
use bc_domain::{NodePoolId, NodePoolState, ResourceState, Timestamp};

/// A row whose state moved, for its `kubernetes.nodepool.<state>` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// The row as written.
    pub row: NodePool,
}

/// What to commit for a set of node pool rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowSync {
    /// Inserts, CAS updates and status writes, in commit order.
    pub writes: Vec<Write>,
    /// Rows whose state changed.
    pub moved: Vec<Moved>,
}

/// The ownership tag of a tenant's node pool made through this system:
/// `better-compute-node-pool-<node pool id, dashed>`. A provider pool of the row's name
/// without it was not made here and is never taken over (SPEC §8).
pub fn node_pool_tag(id: &NodePoolId) -> String {
    format!("better-compute-node-pool-{}", id.dashed())
}

/// The provider request of a tenant's node pool row, in create form (an autoscaled
/// pool starts at its minimum), with its ownership tag.
pub fn node_pool_request(row: &NodePool) -> NodePoolRequest {
    let (count, auto_scale) = match row.scale {
        Scale::Count(c) => (Some(c), None),
        Scale::AutoScale(a) => (Some(a.min), Some((a.min, a.max))),
    };
    NodePoolRequest {
        name: row.name.clone(),
        size: row.size.clone(),
        count,
        auto_scale,
        labels: row.labels.clone(),
        taints: row.taints.clone(),
        tags: vec![node_pool_tag(&row.node_pool_id)],
    }
}

/// The node pools of a cluster create, starting with at least one node: when every pool
/// asks for none (autoscaled flavors with `min: 0`), the first starts at one node, within
/// its bounds (`0 ≤ 1 ≤ max`). A cluster needs a node for its system components, and
/// DigitalOcean refuses a cluster whose pools all start at zero; the autoscaler may scale
/// that pool down later where the provider allows it.
pub fn with_a_first_node(mut pools: Vec<NodePoolRequest>) -> Vec<NodePoolRequest> {
    if pools.iter().all(|p| p.count.unwrap_or(0) == 0)
        && let Some(first) =
            pools.iter_mut().find(|p| p.auto_scale.is_some_and(|(_, max)| max >= 1))
    {
        first.count = Some(1);
    }
    pools
}

/// Whether a node pool row converged at the desired state it has now (it was `ready` at
/// its generation): from then on its provider pool's node churn is not a change.
pub fn converged_at_its_generation(row: &NodePool) -> bool {
    row.state == NodePoolState::Ready && row.observed_generation == row.generation
}

/// The cluster row's status in `state` with `message`, or `None` when it already shows
/// that (or the state machine refuses the move).
pub fn cluster_status(
    cluster: &KubernetesCluster,
    state: ResourceState,
    message: Option<String>,
    now: Timestamp,
) -> Option<ObservedStatus> {
    let state = if cluster.status.state.can_transition(state) { state } else { return None };
    let observed_generation = if state == ResourceState::Ready {
        cluster.generation
    } else {
        cluster.status.observed_generation
    };
    let same = cluster.status.state == state
        && cluster.status.message == message
        && cluster.status.observed_generation == observed_generation;
    (!same).then_some(ObservedStatus { state, message, observed_generation, updated_at: now })
}

/// The status writes that close a cluster row: through `deleting` (the state machine's
/// one way out) to `deleted`; none when it is already deleted.
pub fn cluster_closed(cluster: &KubernetesCluster, now: Timestamp) -> Vec<ObservedStatus> {
    let status = |state| ObservedStatus {
        state,
        message: None,
        observed_generation: cluster.status.observed_generation,
        updated_at: now,
    };
    match cluster.status.state {
        ResourceState::Deleted => vec![],
        ResourceState::Deleting => vec![status(ResourceState::Deleted)],
        _ => vec![status(ResourceState::Deleting), status(ResourceState::Deleted)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(name: &str, count: u32, auto_scale: Option<(u32, u32)>) -> NodePoolRequest {
        NodePoolRequest {
            name: name.into(),
            size: "s-2vcpu-4gb".into(),
            count: Some(count),
            auto_scale,
            labels: Default::default(),
            taints: vec![],
            tags: vec![],
        }
    }

    #[test]
    fn a_cluster_never_starts_with_every_pool_at_zero() {
        let counts = |v: Vec<NodePoolRequest>| -> Vec<Option<u32>> {
            with_a_first_node(v).into_iter().map(|p| p.count).collect()
        };
        // Only scale-to-zero pools: the first starts at one node.
        assert_eq!(
            counts(vec![req("a", 0, Some((0, 3))), req("b", 0, Some((0, 2)))]),
            [Some(1), Some(0)]
        );
        // Another pool has nodes: nothing changes.
        assert_eq!(counts(vec![req("a", 0, Some((0, 3))), req("b", 2, None)]), [Some(0), Some(2)]);
        assert_eq!(counts(vec![req("a", 1, Some((1, 3)))]), [Some(1)]);
    }
}
