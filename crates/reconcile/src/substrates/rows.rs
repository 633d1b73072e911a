//! The `kubernetesNodePools` rows of a substrate's node pools (`managedBy` = the pool):
//! what to insert, change and report so the rows show the flavors' pools as the
//! provider has them (SPEC §6, §8; contracts.md "Who writes which rows").
//!
//! Invariants: a row is inserted for a flavor's pool before any provider call can make
//! that pool (the name is the intent a restarted reconciler finds its pool by); a row
//! name held by a row that is not this pool's (a tenant's or the provider's own) is
//! never inserted beside it; desired fields change only under the row's generation
//! (CAS); a status is written only when something in it changed, so a converged
//! substrate writes nothing; a row leaves `deleting` for `deleted` only once the
//! provider no longer lists a pool of ours by that name, and never for a live state (a
//! flavor put back meanwhile gets a new row once the old pool is gone).

use std::collections::BTreeMap;

use bc_domain::model::{KubernetesCluster, NodePool};
use bc_domain::policy::{AutoScale, Scale};
use bc_domain::ports::{NodePoolRequest, ProviderNodePool, Write};
use bc_domain::rules::plan::{is_our_node_pool, node_counts, pool_settled};
use bc_domain::{NodePoolId, NodePoolState, PoolId, Timestamp};

use crate::shared::records::{Moved, RowSync, converged_at_its_generation};

/// The scale a request asks for.
pub fn scale_of(r: &NodePoolRequest) -> Scale {
    match r.auto_scale {
        Some((min, max)) => Scale::AutoScale(AutoScale { min, max }),
        None => Scale::Count(r.count.unwrap_or(0)),
    }
}

/// The move to `to`, or staying put when the state machine refuses it.
fn moved(from: NodePoolState, to: NodePoolState) -> NodePoolState {
    if from.can_transition(to) { to } else { from }
}

/// What one sync knows.
pub struct Inputs<'a> {
    /// The pool whose substrate owns the rows.
    pub pool: &'a PoolId,
    /// The cluster row.
    pub cluster: &'a KubernetesCluster,
    /// The flavors' pools (`rules::plan::desired_node_pool`); empty on teardown.
    pub desired: &'a [NodePoolRequest],
    /// Every live row of the cluster (ours and others').
    pub rows: &'a [NodePool],
    /// The cluster's pools as the provider lists them (`None`: the cluster is gone).
    pub observed: Option<&'a [ProviderNodePool]>,
    /// Pools the provider refused this run, by name, with its message.
    pub refused: &'a BTreeMap<String, String>,
    /// Now.
    pub now: Timestamp,
}

/// The writes that bring the rows of `inputs.pool` in line. `new_id` makes row ids.
pub fn sync(inputs: &Inputs<'_>, new_id: &mut dyn FnMut() -> NodePoolId) -> RowSync {
    let mut out = RowSync::default();
    let mine: Vec<&NodePool> =
        inputs.rows.iter().filter(|r| r.managed_by.as_ref() == Some(inputs.pool)).collect();
    let ours_at_provider = |name: &str| -> Vec<&ProviderNodePool> {
        inputs
            .observed
            .unwrap_or_default()
            .iter()
            .filter(|p| p.name == name && is_our_node_pool(inputs.pool, p))
            .collect()
    };
    for want in inputs.desired {
        let row = mine.iter().find(|r| r.name == want.name);
        let held = inputs
            .rows
            .iter()
            .any(|r| r.name == want.name && r.managed_by.as_ref() != Some(inputs.pool));
        let current = match row {
            None if held => continue,
            None => {
                let r = new_row(inputs, want, new_id());
                out.writes.push(Write::InsertNodePool(r.clone()));
                r
            }
            // Size is immutable at providers: the old pool goes, then a new row. A flavor
            // put back while its removed pool is still being deleted is the same: that
            // deletion cannot be called off, so it finishes, then the flavor gets a new
            // row (a `deleting` row never comes back to life).
            Some(r) if r.size != want.size || r.state == NodePoolState::Deleting => {
                if ours_at_provider(&r.name).is_empty() {
                    finish(&mut out, r, None, NodePoolState::Deleted, None, inputs.now);
                    let fresh = new_row(inputs, want, new_id());
                    out.writes.push(Write::InsertNodePool(fresh.clone()));
                    fresh
                } else {
                    let observed = ours_at_provider(&r.name).first().copied();
                    finish(&mut out, r, observed, NodePoolState::Deleting, None, inputs.now);
                    continue;
                }
            }
            Some(r) => {
                let scale = scale_of(want);
                if r.scale != scale || r.labels != want.labels || r.taints != want.taints {
                    let next = NodePool {
                        scale,
                        labels: want.labels.clone(),
                        taints: want.taints.clone(),
                        generation: r.generation + 1,
                        ..(*r).clone()
                    };
                    out.writes.push(Write::UpdateNodePool {
                        node_pool: next.clone(),
                        expected_generation: r.generation,
                    });
                    next
                } else {
                    (*r).clone()
                }
            }
        };
        let at_provider = ours_at_provider(&want.name);
        let observed = at_provider.iter().copied().find(|p| p.size == want.size);
        let (state, message) = if let Some(m) = inputs.refused.get(&want.name) {
            (NodePoolState::Error, Some(m.clone()))
        } else {
            match observed {
                Some(p) if pool_settled(p, want, converged_at_its_generation(&current)) => {
                    (NodePoolState::Ready, None)
                }
                _ if current.observed_generation == 0 && current.state != NodePoolState::Ready => {
                    (NodePoolState::Pending, None)
                }
                _ => (NodePoolState::Updating, None),
            }
        };
        finish(&mut out, &current, observed, state, message, inputs.now);
    }
    for r in mine.iter().filter(|r| !inputs.desired.iter().any(|d| d.name == r.name)) {
        let at_provider = ours_at_provider(&r.name);
        let state =
            if at_provider.is_empty() { NodePoolState::Deleted } else { NodePoolState::Deleting };
        finish(&mut out, r, at_provider.first().copied(), state, None, inputs.now);
    }
    out
}

fn new_row(inputs: &Inputs<'_>, want: &NodePoolRequest, id: NodePoolId) -> NodePool {
    NodePool {
        labels: want.labels.clone(),
        taints: want.taints.clone(),
        managed_by: Some(inputs.pool.clone()),
        ..NodePool::pending(
            id,
            inputs.cluster.cluster_id.clone(),
            inputs.cluster.tenant_id.clone(),
            want.name.clone(),
            want.size.clone(),
            scale_of(want),
            inputs.now,
        )
    }
}

/// Writes the row's status if it changed, and notes a state move.
fn finish(
    out: &mut RowSync,
    row: &NodePool,
    observed: Option<&ProviderNodePool>,
    state: NodePoolState,
    message: Option<String>,
    now: Timestamp,
) {
    // Into `deleted` only through `deleting` (the state machine's one way out).
    if state == NodePoolState::Deleted
        && row.state != NodePoolState::Deleting
        && row.state.can_transition(NodePoolState::Deleting)
    {
        let before = out.moved.len();
        finish(out, row, observed, NodePoolState::Deleting, None, now);
        out.moved.truncate(before);
        let deleting = NodePool { state: NodePoolState::Deleting, message: None, ..row.clone() };
        return finish(out, &deleting, observed, state, message, now);
    }
    let state = moved(row.state, state);
    let (listed, ready) = match (observed, state) {
        (_, NodePoolState::Deleted) | (None, _) => (0, 0),
        (Some(p), _) => node_counts(p),
    };
    let provider_id = observed.map(|p| p.id.clone()).or_else(|| row.provider_node_pool_id.clone());
    let observed_generation =
        if state == NodePoolState::Ready { row.generation } else { row.observed_generation };
    let changed = row.state != state
        || row.message != message
        || row.provider_node_pool_id != provider_id
        || (row.nodes_listed, row.nodes_ready) != (listed, ready)
        || row.observed_generation != observed_generation;
    if !changed {
        return;
    }
    out.writes.push(Write::SetNodePoolStatus {
        node_pool_id: row.node_pool_id.clone(),
        provider_node_pool_id: provider_id.clone(),
        nodes_listed: listed,
        nodes_ready: ready,
        state,
        message: message.clone(),
        observed_generation,
        updated_at: now,
    });
    if row.state != state {
        out.moved.push(Moved {
            row: NodePool {
                provider_node_pool_id: provider_id,
                nodes_listed: listed,
                nodes_ready: ready,
                state,
                message,
                observed_generation,
                updated_at: now,
                ..row.clone()
            },
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bc_domain::TenantId;
    use bc_domain::model::{ClusterMode, ClusterOrigin, ObservedStatus};
    use bc_domain::policy::Flavor;
    use bc_domain::ports::{ProviderNode, ProviderNodeState};
    use bc_domain::rules::plan::desired_node_pool;

    fn pool() -> PoolId {
        PoolId::parse("pool_01hq3k5v9x8y7z6w5v4t3s2r1q").unwrap()
    }

    fn now() -> Timestamp {
        Timestamp::from_unix_ms(1_800_000_000_000)
    }

    fn cluster() -> KubernetesCluster {
        KubernetesCluster {
            cluster_id: bc_domain::ClusterId::generate(1, 1),
            tenant_id: TenantId::parse("acme").unwrap(),
            provider_account_id: bc_domain::ProviderAccountId::generate(1, 2),
            name: bc_domain::ObjectName::parse("bc-x").unwrap(),
            region: "nyc1".into(),
            desired_version: None,
            high_availability: false,
            mode: ClusterMode::Standard,
            origin: ClusterOrigin::Created,
            substrate_pool_ids: vec![pool()],
            delete_requested: false,
            generation: 1,
            created_at: now(),
            provider_cluster_id: None,
            version: None,
            nodes: None,
            status: ObservedStatus::pending(now()),
        }
    }

    fn want(name: &str, size: &str, count: u32) -> NodePoolRequest {
        let f = Flavor {
            name: name.into(),
            size: size.into(),
            count: Some(count),
            auto_scale: None,
            labels: Default::default(),
            taints: vec![],
        };
        desired_node_pool(&pool(), bc_domain::SubstrateNaming::LONG, &f).unwrap()
    }

    fn at_provider(req: &NodePoolRequest, running: u32) -> ProviderNodePool {
        ProviderNodePool {
            id: format!("np-{}", req.name),
            name: req.name.clone(),
            size: req.size.clone(),
            count: req.count.unwrap_or(0),
            auto_scale: false,
            min_nodes: 0,
            max_nodes: 0,
            labels: req.labels.clone(),
            taints: req.taints.clone(),
            tags: req.tags.clone(),
            version: None,
            nodes: (0..req.count.unwrap_or(0))
                .map(|i| ProviderNode {
                    id: format!("n{i}"),
                    name: format!("{}-{i}", req.name),
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

    fn run(
        desired: &[NodePoolRequest],
        rows: &[NodePool],
        observed: Option<&[ProviderNodePool]>,
    ) -> RowSync {
        let c = cluster();
        let refused = BTreeMap::new();
        let inputs = Inputs {
            pool: &pool(),
            cluster: &c,
            desired,
            rows,
            observed,
            refused: &refused,
            now: now(),
        };
        let mut n = 0;
        sync(&inputs, &mut || {
            n += 1;
            NodePoolId::generate(2, n)
        })
    }

    /// Applies the sync's writes to the rows, as the store would.
    fn apply(rows: &mut Vec<NodePool>, s: &RowSync) {
        for w in &s.writes {
            match w {
                Write::InsertNodePool(r) => rows.push(r.clone()),
                Write::UpdateNodePool { node_pool, .. } => {
                    let r =
                        rows.iter_mut().find(|r| r.node_pool_id == node_pool.node_pool_id).unwrap();
                    *r = node_pool.clone();
                }
                Write::SetNodePoolStatus {
                    node_pool_id,
                    provider_node_pool_id,
                    nodes_listed,
                    nodes_ready,
                    state,
                    message,
                    observed_generation,
                    ..
                } => {
                    let r = rows.iter_mut().find(|r| r.node_pool_id == *node_pool_id).unwrap();
                    if provider_node_pool_id.is_some() {
                        r.provider_node_pool_id = provider_node_pool_id.clone();
                    }
                    (r.nodes_listed, r.nodes_ready, r.state, r.message, r.observed_generation) = (
                        *nodes_listed,
                        *nodes_ready,
                        *state,
                        message.clone(),
                        *observed_generation,
                    );
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        rows.retain(|r| r.state != NodePoolState::Deleted);
    }

    #[test]
    fn rows_are_recorded_before_the_pools_exist_then_follow_them_to_ready() {
        let d = [want("cpu", "s-2vcpu-4gb", 2)];
        let mut rows = vec![];
        let first = run(&d, &rows, Some(&[]));
        assert!(
            matches!(&first.writes[..], [Write::InsertNodePool(r)] if r.state == NodePoolState::Pending && r.managed_by == Some(pool()))
        );
        apply(&mut rows, &first);
        assert_eq!(
            run(&d, &rows, Some(&[])),
            RowSync::default(),
            "nothing changed, nothing written"
        );
        let half = [at_provider(&d[0], 1)];
        let s = run(&d, &rows, Some(&half));
        apply(&mut rows, &s);
        assert_eq!(
            (rows[0].state, rows[0].nodes_listed, rows[0].nodes_ready),
            (NodePoolState::Pending, 2, 1)
        );
        let up = [at_provider(&d[0], 2)];
        let s = run(&d, &rows, Some(&up));
        assert_eq!(s.moved.len(), 1);
        apply(&mut rows, &s);
        assert_eq!((rows[0].state, rows[0].observed_generation), (NodePoolState::Ready, 1));
        assert_eq!(
            rows[0].provider_node_pool_id.as_deref(),
            Some("np-bc-pool-01hq3k5v9x8y7z6w5v4t3s2r1q-cpu")
        );
        assert_eq!(run(&d, &rows, Some(&up)), RowSync::default(), "converged: no write");
    }

    #[test]
    fn a_resize_updates_the_row_under_cas_and_shows_updating() {
        let d = [want("cpu", "s-2vcpu-4gb", 2)];
        let mut rows = vec![];
        let s = run(&d, &rows, Some(&[]));
        apply(&mut rows, &s);
        let up = [at_provider(&d[0], 2)];
        let s = run(&d, &rows, Some(&up));
        apply(&mut rows, &s);
        let bigger = [want("cpu", "s-2vcpu-4gb", 3)];
        let s = run(&bigger, &rows, Some(&up));
        assert!(
            matches!(&s.writes[0], Write::UpdateNodePool { expected_generation: 1, node_pool } if node_pool.generation == 2 && node_pool.scale == Scale::Count(3))
        );
        apply(&mut rows, &s);
        assert_eq!(rows[0].state, NodePoolState::Updating);
    }

    #[test]
    fn a_size_change_deletes_the_old_row_once_its_pool_is_gone() {
        let d = [want("cpu", "s-2vcpu-4gb", 1)];
        let mut rows = vec![];
        let s = run(&d, &rows, Some(&[]));
        apply(&mut rows, &s);
        let old = [at_provider(&d[0], 1)];
        let s = run(&d, &rows, Some(&old));
        apply(&mut rows, &s);
        let resized = [want("cpu", "c-4", 1)];
        let s = run(&resized, &rows, Some(&old));
        apply(&mut rows, &s);
        assert_eq!(rows[0].state, NodePoolState::Deleting);
        let s = run(&resized, &rows, Some(&[]));
        assert!(s.moved.iter().any(|m| m.row.state == NodePoolState::Deleted));
        apply(&mut rows, &s);
        assert_eq!(
            (rows.len(), rows[0].size.as_str(), rows[0].state),
            (1, "c-4", NodePoolState::Pending)
        );
    }

    #[test]
    fn a_row_whose_pool_never_came_is_deleted_through_deleting() {
        let d = [want("cpu", "s-2vcpu-4gb", 1)];
        let mut rows = vec![];
        let s = run(&d, &rows, Some(&[]));
        apply(&mut rows, &s);
        let s = run(&[], &rows, None);
        let states: Vec<NodePoolState> = s
            .writes
            .iter()
            .map(|w| match w {
                Write::SetNodePoolStatus { state, .. } => *state,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(states, vec![NodePoolState::Deleting, NodePoolState::Deleted]);
        assert_eq!(s.moved.len(), 1, "one event: deleted");
        apply(&mut rows, &s);
        assert!(rows.is_empty());
    }

    #[test]
    fn removed_flavors_go_deleting_then_deleted_and_foreign_names_get_no_row() {
        let d = [want("cpu", "s-2vcpu-4gb", 1)];
        let mut rows = vec![];
        let s = run(&d, &rows, Some(&[]));
        apply(&mut rows, &s);
        let there = [at_provider(&d[0], 1)];
        let s = run(&[], &rows, Some(&there));
        apply(&mut rows, &s);
        assert_eq!(rows[0].state, NodePoolState::Deleting);
        let s = run(&[], &rows, Some(&[]));
        assert_eq!(s.moved[0].row.state, NodePoolState::Deleted);
        apply(&mut rows, &s);
        assert!(rows.is_empty());
        // A tenant's row of the same name: no second row beside it.
        let mut theirs = new_row(
            &Inputs {
                pool: &pool(),
                cluster: &cluster(),
                desired: &[],
                rows: &[],
                observed: None,
                refused: &BTreeMap::new(),
                now: now(),
            },
            &d[0],
            NodePoolId::generate(9, 9),
        );
        theirs.managed_by = None;
        assert_eq!(run(&d, &[theirs], Some(&[])), RowSync::default());
    }
}
