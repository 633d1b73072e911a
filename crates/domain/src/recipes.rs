//! One recipe per write (issue 29 item 10; pools and node pools so far): what each change a caller asks for writes —
//! the record and its whole unit of work (rows, default quotas, events, work items) —
//! built here, purely, and called by the API's handlers and the test harnesses alike, so
//! a harness can never write a unit of work the API would not.
//!
//! Invariant: a recipe decides nothing that needs I/O (the caller checks what it must
//! read first — authorization, preconditions — and passes ids and `now` in); the same
//! inputs give the same unit of work.

use std::collections::BTreeMap;

use serde_json::json;

use crate::TenantId;
use crate::id::{EventId, PoolId, ProviderAccountId};
use crate::model::{NewEvent, NodePool, Pool, PoolState, QuotaResource, Substrate, subjects};
use crate::name::ObjectName;
use crate::policy::{PoolPolicy, Scale};
use crate::ports::{UnitOfWork, WorkKind, Write};
use crate::state::ResourceState;
use crate::time::Timestamp;

/// A record as written, and the unit of work that writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Recipe<T> {
    /// The record as it is after the write.
    pub record: T,
    /// Everything the write commits, in one transaction.
    pub uow: UnitOfWork,
}

/// What a new pool is made of (`pools.create`'s input, with its id chosen).
#[derive(Debug, Clone, PartialEq)]
pub struct NewPool {
    /// Its id.
    pub pool_id: PoolId,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// Its name.
    pub name: ObjectName,
    /// Its policy.
    pub policy: PoolPolicy,
}

/// A substrate a write starts: the account its policy names (authorized by the caller)
/// and the id of its `kubernetes.substrate.pending` event.
#[derive(Debug, Clone, PartialEq)]
pub struct StartedSubstrate {
    /// The provider account of the policy's substrate.
    pub account: ProviderAccountId,
    /// The id of the event that says it is pending.
    pub event_id: EventId,
}

/// The pool's first substrate row — `pending`, nothing observed, so
/// `kubernetesSubstrates.get` answers at once — its event and its work, due `now`.
fn add_substrate(
    uow: UnitOfWork,
    pool: &Pool,
    started: &StartedSubstrate,
    now: Timestamp,
) -> UnitOfWork {
    let Some(policy) = &pool.policy.substrate else { return uow };
    let row = Substrate::pending(
        pool.pool_id.clone(),
        pool.tenant_id.clone(),
        started.account.clone(),
        policy,
        now,
    );
    let event = NewEvent {
        event_id: started.event_id.clone(),
        tenant_id: pool.tenant_id.clone(),
        subject: subjects::pool(&pool.pool_id),
        kind: format!("kubernetes.substrate.{}", ResourceState::Pending.as_str()),
        time: now,
        data: json!({ "poolId": pool.pool_id, "state": ResourceState::Pending }),
    };
    uow.write(Write::PutSubstrate(row)).event(event).enqueue(
        WorkKind::Substrates,
        pool.pool_id.as_str(),
        now,
    )
}

/// `pools.create`: the pool (`active`, generation 1), a quota row per default quota,
/// and — when its policy has a substrate, started on `substrate` — the pending
/// substrate, its event and its work.
pub fn pool_created(
    new: NewPool,
    default_quotas: &BTreeMap<QuotaResource, u32>,
    substrate: Option<&StartedSubstrate>,
    now: Timestamp,
) -> Recipe<Pool> {
    let pool = Pool {
        pool_id: new.pool_id,
        tenant_id: new.tenant_id,
        name: new.name,
        policy: new.policy,
        state: PoolState::Active,
        generation: 1,
        created_at: now,
        updated_at: now,
        archived_at: None,
    };
    let mut uow = UnitOfWork::new().write(Write::InsertPool(pool.clone()));
    for (&resource, &limit) in default_quotas {
        uow = uow.write(Write::SetQuota { pool_id: pool.pool_id.clone(), resource, limit });
    }
    if let Some(started) = substrate {
        uow = add_substrate(uow, &pool, started, now);
    }
    Recipe { record: pool, uow }
}

/// `pools.update`: the pool with `policy`, its generation bumped (written by
/// compare-and-swap on the old one); a substrate the policy adds is started on
/// `substrate` (the caller has checked the previous one is gone), and a substrate it
/// keeps, changes or removes is given to its reconciler.
pub fn pool_changed(
    pool: &Pool,
    policy: PoolPolicy,
    substrate: Option<&StartedSubstrate>,
    now: Timestamp,
) -> Recipe<Pool> {
    let updated = Pool { policy, generation: pool.generation + 1, updated_at: now, ..pool.clone() };
    let mut uow = UnitOfWork::new()
        .write(Write::UpdatePool { pool: updated.clone(), expected_generation: pool.generation });
    match (&pool.policy.substrate, &updated.policy.substrate, substrate) {
        (None, Some(_), Some(started)) => uow = add_substrate(uow, &updated, started, now),
        // Changed or removed: the reconciler converges or tears it down.
        (Some(_), _, _) => uow = uow.enqueue(WorkKind::Substrates, pool.pool_id.as_str(), now),
        _ => {}
    }
    Recipe { record: updated, uow }
}

/// `pools.archive`: the pool `archived` (generation bumped, by compare-and-swap), and
/// its substrate, if any, given to its reconciler to tear down.
pub fn pool_archived(pool: &Pool, now: Timestamp) -> Recipe<Pool> {
    let archived = Pool {
        state: PoolState::Archived,
        archived_at: Some(now),
        generation: pool.generation + 1,
        updated_at: now,
        ..pool.clone()
    };
    let mut uow = UnitOfWork::new()
        .write(Write::UpdatePool { pool: archived.clone(), expected_generation: pool.generation });
    if pool.policy.substrate.is_some() {
        uow = uow.enqueue(WorkKind::Substrates, pool.pool_id.as_str(), now);
    }
    Recipe { record: archived, uow }
}

/// `kubernetesNodePools.create`: the pending node pool `row` (as `NodePool::pending`
/// makes it) and its work, due `now`.
pub fn node_pool_created(row: NodePool, now: Timestamp) -> Recipe<NodePool> {
    let uow = UnitOfWork::new().write(Write::InsertNodePool(row.clone())).enqueue(
        WorkKind::NodePools,
        row.node_pool_id.as_str(),
        now,
    );
    Recipe { record: row, uow }
}

/// `kubernetesNodePools.resize` (a new `scale`) and `delete` (`delete`): the node pool
/// with its generation bumped (written by compare-and-swap on the old one), given to its
/// reconciler. A deletion asked once stays asked.
pub fn node_pool_changed(
    node_pool: &NodePool,
    scale: Scale,
    delete: bool,
    now: Timestamp,
) -> Recipe<NodePool> {
    let changed = NodePool {
        scale,
        delete_requested: node_pool.delete_requested || delete,
        generation: node_pool.generation + 1,
        ..node_pool.clone()
    };
    let uow = UnitOfWork::new()
        .write(Write::UpdateNodePool {
            node_pool: changed.clone(),
            expected_generation: node_pool.generation,
        })
        .enqueue(WorkKind::NodePools, node_pool.node_pool_id.as_str(), now);
    Recipe { record: changed, uow }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{ClusterPolicy, SubstratePolicy};

    fn policy(substrate: bool) -> PoolPolicy {
        let mut p = PoolPolicy::default();
        if substrate {
            p.substrate = Some(SubstratePolicy {
                kind: crate::policy::SubstrateKind::Kubernetes,
                account: "acct_01jq3k5v9x8y7z6w5v4t3s2r1a".into(),
                cluster: ClusterPolicy::Adopt(crate::policy::AdoptClusterPolicy {
                    provider_cluster_id: "c1".into(),
                }),
            });
        }
        p
    }

    fn new_pool(substrate: bool) -> NewPool {
        NewPool {
            pool_id: PoolId::generate(1, 1),
            tenant_id: TenantId::parse("acme").unwrap(),
            name: ObjectName::parse("web").unwrap(),
            policy: policy(substrate),
        }
    }

    fn started() -> StartedSubstrate {
        StartedSubstrate {
            account: ProviderAccountId::generate(1, 2),
            event_id: EventId::generate(1, 3),
        }
    }

    #[test]
    fn a_pool_with_a_substrate_starts_it_with_its_event_work_and_default_quotas() {
        let now = Timestamp::from_unix_ms(1_000);
        let quotas = BTreeMap::from([(QuotaResource::LoadBalancers, 5)]);
        let made = pool_created(new_pool(true), &quotas, Some(&started()), now);
        assert_eq!(made.record.generation, 1);
        assert_eq!(made.uow.writes.len(), 3, "{:?}", made.uow.writes);
        assert!(matches!(made.uow.writes[1], Write::SetQuota { limit: 5, .. }));
        assert!(matches!(made.uow.writes[2], Write::PutSubstrate(_)));
        assert_eq!(made.uow.events[0].kind, "kubernetes.substrate.pending");
        assert_eq!(made.uow.enqueue.len(), 1);
        let plain = pool_created(new_pool(false), &BTreeMap::new(), None, now);
        assert_eq!(plain.uow.writes.len(), 1);
        assert!(plain.uow.events.is_empty() && plain.uow.enqueue.is_empty());
    }

    #[test]
    fn a_change_starts_an_added_substrate_and_wakes_a_kept_one() {
        let now = Timestamp::from_unix_ms(2_000);
        let pool = pool_created(new_pool(false), &BTreeMap::new(), None, now).record;
        let added = pool_changed(&pool, policy(true), Some(&started()), now);
        assert_eq!(added.record.generation, 2);
        assert!(matches!(added.uow.writes[1], Write::PutSubstrate(_)));
        assert_eq!(added.uow.events.len(), 1);
        let kept = pool_changed(&added.record, policy(true), None, now);
        assert_eq!(kept.uow.writes.len(), 1);
        assert_eq!(kept.uow.enqueue.len(), 1);
        let archived = pool_archived(&kept.record, now);
        assert_eq!(archived.record.state, PoolState::Archived);
        assert_eq!(archived.uow.enqueue.len(), 1);
        assert!(matches!(archived.uow.writes[0], Write::UpdatePool { expected_generation: 3, .. }));
    }

    #[test]
    fn a_node_pool_change_bumps_its_generation_and_keeps_a_deletion_asked() {
        let now = Timestamp::from_unix_ms(3_000);
        let row = NodePool::pending(
            crate::id::NodePoolId::generate(1, 4),
            crate::id::ClusterId::generate(1, 5),
            TenantId::parse("acme").unwrap(),
            "workers".into(),
            "s-2vcpu-4gb".into(),
            Scale::Count(2),
            now,
        );
        let made = node_pool_created(row, now);
        assert_eq!(made.uow.enqueue.len(), 1);
        let deleting = node_pool_changed(&made.record, made.record.scale, true, now);
        assert!(deleting.record.delete_requested);
        let resized = node_pool_changed(&deleting.record, Scale::Count(3), false, now);
        assert!(resized.record.delete_requested, "a deletion asked stays asked");
        assert_eq!(resized.record.generation, made.record.generation + 2);
        assert!(matches!(resized.uow.writes[0], Write::UpdateNodePool { .. }));
    }
}
