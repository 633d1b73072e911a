//! The node-pool reconciler's pure decisions: the provider request a tenant's node pool
//! row asks for, and the state, message and next step from what the provider shows.
//!
//! Invariants: a refused pool stays `error` at the generation it was refused at (the
//! stamp is `observed_generation`) and is not asked again until that generation moves
//! (the tenant changed or deleted it); an autoscaled pool's count is the provider's and
//! is never sent on update; the state only moves as `NodePoolState::transition` allows.

use bc_domain::NodePoolState;
use bc_domain::model::NodePool;
use bc_domain::ports::{NodePoolRequest, ProviderNodePool};
use bc_domain::rules::plan::{node_counts, node_pool_needs_update, pool_settled};

use crate::shared::records::{converged_at_its_generation, node_pool_request};

/// The update form: no count for an autoscaled pool.
pub fn update_request(row: &NodePool) -> NodePoolRequest {
    let mut r = node_pool_request(row);
    if r.auto_scale.is_some() {
        r.count = None;
    }
    r
}

/// Whether the row was refused by the provider at its current generation (so it is not
/// asked again until the tenant changes or deletes it).
pub fn refused_at_this_generation(row: &NodePool) -> bool {
    row.state == NodePoolState::Error && row.observed_generation == row.generation
}

/// What to do about an observed pool of the row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Send this update.
    Update(NodePoolRequest),
    /// Wait: the provider converges it (nodes provisioning or draining).
    Wait,
    /// Converged.
    Ready,
}

/// The next step for a row whose pool the provider shows as `observed`.
pub fn next(row: &NodePool, observed: &ProviderNodePool) -> Next {
    let want = node_pool_request(row);
    if node_pool_needs_update(observed, &want) {
        Next::Update(update_request(row))
    } else if pool_settled(observed, &want, converged_at_its_generation(row)) {
        Next::Ready
    } else {
        Next::Wait
    }
}

/// The status a row shows: `(state, nodes listed, nodes ready, observed generation)`.
/// Before it was first ready it is `pending`; afterwards a change shows `updating`.
pub fn status(
    row: &NodePool,
    observed: Option<&ProviderNodePool>,
    next: &Next,
) -> (NodePoolState, u32, u32, u64) {
    let (listed, ready) = observed.map(node_counts).unwrap_or((0, 0));
    let (state, generation) = match next {
        Next::Ready => (NodePoolState::Ready, row.generation),
        _ if row.state == NodePoolState::Pending
            || (row.state == NodePoolState::Error && row.provider_node_pool_id.is_none()) =>
        {
            (NodePoolState::Pending, row.observed_generation)
        }
        _ => (NodePoolState::Updating, row.observed_generation),
    };
    let state = if row.state.can_transition(state) { state } else { row.state };
    (state, listed, ready, generation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bc_domain::policy::{AutoScale, Scale};
    use bc_domain::ports::{ProviderNode, ProviderNodeState};
    use bc_domain::{ClusterId, NodePoolId, TenantId, Timestamp};

    fn row(scale: Scale) -> NodePool {
        let t = Timestamp::from_unix_ms(1_800_000_000_000);
        NodePool::pending(
            NodePoolId::generate(1, 1),
            ClusterId::generate(1, 2),
            TenantId::parse("acme").unwrap(),
            "workers".into(),
            "s-2vcpu-4gb".into(),
            scale,
            t,
        )
    }

    fn observed(req: &NodePoolRequest, nodes: u32, running: u32) -> ProviderNodePool {
        let (min, max) = req.auto_scale.unwrap_or((0, 0));
        ProviderNodePool {
            id: "np1".into(),
            name: req.name.clone(),
            size: req.size.clone(),
            count: nodes,
            auto_scale: req.auto_scale.is_some(),
            min_nodes: min,
            max_nodes: max,
            labels: req.labels.clone(),
            taints: req.taints.clone(),
            // What we asked for, and the provider's own.
            tags: req.tags.iter().cloned().chain(["k8s".to_owned()]).collect(),
            version: None,
            nodes: (0..nodes)
                .map(|i| ProviderNode {
                    id: format!("n{i}"),
                    name: format!("w-{i}"),
                    state: if i < running {
                        ProviderNodeState::Running
                    } else {
                        ProviderNodeState::Provisioning
                    },
                    droplet_id: None,
                })
                .collect(),
        }
    }

    #[test]
    fn a_pool_is_pending_until_its_nodes_run_then_ready() {
        let r = row(Scale::Count(2));
        let o = observed(&node_pool_request(&r), 2, 1);
        assert_eq!(next(&r, &o), Next::Wait);
        assert_eq!(status(&r, Some(&o), &Next::Wait), (NodePoolState::Pending, 2, 1, 0));
        let o = observed(&node_pool_request(&r), 2, 2);
        assert_eq!(next(&r, &o), Next::Ready);
        assert_eq!(status(&r, Some(&o), &Next::Ready), (NodePoolState::Ready, 2, 2, 1));
        // A pool made before it carried our tag gets it.
        let mut untagged = o.clone();
        untagged.tags.retain(|t| t == "k8s");
        assert!(matches!(next(&r, &untagged), Next::Update(req) if req.tags.len() == 1));
    }

    #[test]
    fn a_resize_is_an_update_and_autoscaled_counts_are_never_sent() {
        let mut r = row(Scale::Count(2));
        let o = observed(&node_pool_request(&r), 2, 2);
        r.scale = Scale::Count(3);
        r.generation = 2;
        r.state = NodePoolState::Ready;
        r.observed_generation = 1;
        assert!(matches!(next(&r, &o), Next::Update(req) if req.count == Some(3)));
        assert_eq!(status(&r, Some(&o), &Next::Wait).0, NodePoolState::Updating);
        let mut a = row(Scale::AutoScale(AutoScale { min: 1, max: 5 }));
        let mut o = observed(&node_pool_request(&a), 4, 4);
        o.count = 4; // the autoscaler's choice
        assert_eq!(next(&a, &o), Next::Ready);
        a.scale = Scale::AutoScale(AutoScale { min: 2, max: 6 });
        assert!(
            matches!(next(&a, &o), Next::Update(req) if req.count.is_none() && req.auto_scale == Some((2, 6)))
        );
    }

    #[test]
    fn node_churn_of_a_converged_pool_is_no_change() {
        let mut r = row(Scale::AutoScale(AutoScale { min: 1, max: 5 }));
        let o = observed(&node_pool_request(&r), 1, 1);
        assert_eq!(next(&r, &o), Next::Ready);
        (r.state, r.observed_generation) = (NodePoolState::Ready, 1);
        // The autoscaler adds two nodes, still being made: the pool stays ready.
        let grown = observed(&node_pool_request(&r), 3, 1);
        assert_eq!(next(&r, &grown), Next::Ready);
        // Before it first converged, the same view is a wait.
        r.observed_generation = 0;
        assert_eq!(next(&r, &grown), Next::Wait);
    }

    #[test]
    fn a_refusal_holds_until_the_generation_moves() {
        let mut r = row(Scale::Count(2));
        r.state = NodePoolState::Error;
        r.observed_generation = 1;
        assert!(refused_at_this_generation(&r));
        r.generation = 2;
        assert!(!refused_at_this_generation(&r));
    }
}
