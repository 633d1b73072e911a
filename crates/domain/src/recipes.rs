//! One recipe per write (issue 29 item 10): what each change a caller asks for writes —
//! the record and its whole unit of work (rows, default quotas, quota bookings, events,
//! work items) — built here, purely, and called by the API's handlers and the test
//! harnesses alike, so a harness can never write a unit of work the API would not. The
//! writes: pool created, changed, archived; load balancer created, changed, deleted;
//! cluster created, changed; node pool created, changed.
//!
//! Invariant: a recipe decides nothing that needs I/O (the caller checks what it must
//! read first — authorization, preconditions — and passes ids and `now` in); the same
//! inputs give the same unit of work.

use std::collections::BTreeMap;

use serde_json::json;

use crate::TenantId;
use crate::id::{ClusterId, EventId, LoadBalancerId, PoolId, ProviderAccountId};
use crate::model::{
    ClusterMode, ClusterOrigin, KubernetesCluster, LoadBalancer, LoadBalancerSpec, NewEvent,
    NodePool, ObservedStatus, Pool, PoolState, QuotaResource, Substrate, subjects,
};
use crate::name::ObjectName;
use crate::policy::{PoolPolicy, Scale, VERSION_LATEST};
use crate::ports::{UnitOfWork, WorkKind, Write};
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

/// `kubernetes.substrate.<state>` on the pool's subject, saying the substrate `row` is
/// in its state (with its cluster and message when it has them): the one builder of the
/// event, for the write that starts a substrate and for its reconciler alike.
pub fn substrate_event(row: &Substrate, event_id: EventId, now: Timestamp) -> NewEvent {
    let mut data = json!({ "poolId": row.pool_id, "state": row.state.as_str() });
    if let Some(c) = &row.cluster_id {
        data["clusterId"] = json!(c);
    }
    if let Some(m) = &row.message {
        data["message"] = json!(m);
    }
    NewEvent {
        event_id,
        tenant_id: row.tenant_id.clone(),
        subject: subjects::pool(&row.pool_id),
        kind: format!("kubernetes.substrate.{}", row.state.as_str()),
        time: now,
        data,
    }
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
    let event = substrate_event(&row, started.event_id.clone(), now);
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

/// What a new load balancer is made of (`loadBalancers.create`'s input, with its id
/// chosen and its pool and account authorized by the caller).
#[derive(Debug, Clone, PartialEq)]
pub struct NewLoadBalancer {
    /// Its id.
    pub load_balancer_id: LoadBalancerId,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// The pool whose quota it books and that it bills to.
    pub pool_id: PoolId,
    /// The account it lives in.
    pub provider_account_id: ProviderAccountId,
    /// Its name (also the provider-side name, recorded before the provider's create).
    pub name: ObjectName,
    /// Its desired state.
    pub spec: LoadBalancerSpec,
}

/// `loadBalancers.create`: the load balancer (`pending`, generation 1), one unit of its
/// pool's `loadBalancers` quota booked by the same transaction (with a limit of N,
/// exactly N concurrent creates commit), and its work, due `now`.
pub fn load_balancer_created(new: NewLoadBalancer, now: Timestamp) -> Recipe<LoadBalancer> {
    let lb = LoadBalancer {
        load_balancer_id: new.load_balancer_id,
        tenant_id: new.tenant_id,
        pool_id: new.pool_id,
        provider_account_id: new.provider_account_id,
        name: new.name,
        spec: new.spec,
        generation: 1,
        created_at: now,
        delete_requested: false,
        provider_load_balancer_id: None,
        ip: None,
        status: ObservedStatus::pending(now),
        ready_at: None,
        deleted_at: None,
        quota_released: false,
    };
    let uow = UnitOfWork::new()
        .write(Write::InsertLoadBalancer(lb.clone()))
        .write(Write::BookQuota {
            pool_id: lb.pool_id.clone(),
            resource: QuotaResource::LoadBalancers,
        })
        .enqueue(WorkKind::ProviderResources, lb.load_balancer_id.as_str(), now);
    Recipe { record: lb, uow }
}

/// The load balancer's desired fields written by compare-and-swap on its generation,
/// and its work, due `now`.
fn load_balancer_write(
    old: &LoadBalancer,
    next: LoadBalancer,
    now: Timestamp,
) -> Recipe<LoadBalancer> {
    let uow = UnitOfWork::new()
        .write(Write::UpdateLoadBalancer {
            load_balancer: next.clone(),
            expected_generation: old.generation,
        })
        .enqueue(WorkKind::ProviderResources, old.load_balancer_id.as_str(), now);
    Recipe { record: next, uow }
}

/// `loadBalancers.update`: the load balancer with `name` and `spec`, its generation
/// bumped, given to its reconciler.
pub fn load_balancer_changed(
    lb: &LoadBalancer,
    name: ObjectName,
    spec: LoadBalancerSpec,
    now: Timestamp,
) -> Recipe<LoadBalancer> {
    let next = LoadBalancer { name, spec, generation: lb.generation + 1, ..lb.clone() };
    load_balancer_write(lb, next, now)
}

/// `loadBalancers.delete`: the deletion asked (generation bumped) and given to the
/// reconciler, which deletes it at the provider and then releases its quota unit once.
pub fn load_balancer_deleted(lb: &LoadBalancer, now: Timestamp) -> Recipe<LoadBalancer> {
    let next = LoadBalancer { delete_requested: true, generation: lb.generation + 1, ..lb.clone() };
    load_balancer_write(lb, next, now)
}

/// What a new cluster is made of (`kubernetesClusters.create`'s input, with its id
/// chosen and its account authorized by the caller).
#[derive(Debug, Clone, PartialEq)]
pub struct NewCluster {
    /// Its id.
    pub cluster_id: ClusterId,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// The account it is made in.
    pub provider_account_id: ProviderAccountId,
    /// Its name (also the provider-side name, recorded before the provider's create).
    pub name: ObjectName,
    /// Its region.
    pub region: String,
    /// The version asked for; `None` is `latest`.
    pub version: Option<String>,
    /// A high-availability control plane.
    pub high_availability: bool,
    /// Its mode.
    pub mode: ClusterMode,
}

/// The row a cluster this system makes starts as, recorded before the provider is asked:
/// `pending`, origin `created`, generation 1, in no pool's substrate, nothing observed.
pub fn new_cluster_row(new: NewCluster, now: Timestamp) -> KubernetesCluster {
    KubernetesCluster {
        cluster_id: new.cluster_id,
        tenant_id: new.tenant_id,
        provider_account_id: new.provider_account_id,
        name: new.name,
        region: new.region,
        desired_version: Some(new.version.unwrap_or_else(|| VERSION_LATEST.into())),
        high_availability: new.high_availability,
        mode: new.mode,
        origin: ClusterOrigin::Created,
        substrate_pool_ids: vec![],
        delete_requested: false,
        generation: 1,
        created_at: now,
        provider_cluster_id: None,
        version: None,
        nodes: None,
        status: ObservedStatus::pending(now),
    }
}

/// `kubernetesClusters.create`: the cluster ([`new_cluster_row`]), its first node pools
/// (`pending`, each put in the cluster and its tenant whatever row it is given) and the
/// cluster's work, due `now`: the cluster reconciler makes its first node pools with it.
pub fn cluster_created(
    new: NewCluster,
    node_pools: Vec<NodePool>,
    now: Timestamp,
) -> Recipe<(KubernetesCluster, Vec<NodePool>)> {
    let cluster = new_cluster_row(new, now);
    let rows: Vec<NodePool> = node_pools
        .into_iter()
        .map(|np| NodePool {
            cluster_id: cluster.cluster_id.clone(),
            tenant_id: cluster.tenant_id.clone(),
            ..np
        })
        .collect();
    let mut uow = UnitOfWork::new().write(Write::InsertCluster(cluster.clone()));
    for row in &rows {
        uow = uow.write(Write::InsertNodePool(row.clone()));
    }
    uow = uow.enqueue(WorkKind::Clusters, cluster.cluster_id.as_str(), now);
    Recipe { record: (cluster, rows), uow }
}

/// A change of a cluster's desired fields; `None` keeps a field as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterChange {
    /// The version to run (`kubernetesClusters.upgrade`).
    pub version: Option<String>,
    /// A high-availability control plane.
    pub high_availability: Option<bool>,
    /// Ask for its deletion (`kubernetesClusters.delete`); a deletion asked once stays
    /// asked.
    pub delete: bool,
}

/// `kubernetesClusters.upgrade` and `delete`: the cluster with `change` applied, its
/// generation bumped (written by compare-and-swap on the old one), given to its
/// reconciler.
pub fn cluster_changed(
    cluster: &KubernetesCluster,
    change: ClusterChange,
    now: Timestamp,
) -> Recipe<KubernetesCluster> {
    let next = KubernetesCluster {
        desired_version: change.version.or_else(|| cluster.desired_version.clone()),
        high_availability: change.high_availability.unwrap_or(cluster.high_availability),
        delete_requested: cluster.delete_requested || change.delete,
        generation: cluster.generation + 1,
        ..cluster.clone()
    };
    let uow = UnitOfWork::new()
        .write(Write::UpdateCluster {
            cluster: next.clone(),
            expected_generation: cluster.generation,
        })
        .enqueue(WorkKind::Clusters, cluster.cluster_id.as_str(), now);
    Recipe { record: next, uow }
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

    fn lb_spec() -> LoadBalancerSpec {
        serde_json::from_value(json!({
            "type": "regional", "region": "nyc1",
            "forwardingRules": [{ "entryProtocol": "http", "entryPort": 80, "targetProtocol": "http", "targetPort": 8080 }],
            "targets": { "tag": "web" }
        }))
        .unwrap()
    }

    #[test]
    fn a_load_balancer_books_its_pools_quota_with_its_row_and_changes_under_cas() {
        let now = Timestamp::from_unix_ms(4_000);
        let pool = pool_created(new_pool(false), &BTreeMap::new(), None, now).record;
        let new = NewLoadBalancer {
            load_balancer_id: LoadBalancerId::generate(1, 6),
            tenant_id: pool.tenant_id.clone(),
            pool_id: pool.pool_id.clone(),
            provider_account_id: ProviderAccountId::generate(1, 2),
            name: ObjectName::parse("web-lb").unwrap(),
            spec: lb_spec(),
        };
        let made = load_balancer_created(new, now);
        assert_eq!(made.record.status, ObservedStatus::pending(now));
        assert!(matches!(made.uow.writes[0], Write::InsertLoadBalancer(_)));
        assert_eq!(
            made.uow.writes[1],
            Write::BookQuota { pool_id: pool.pool_id, resource: QuotaResource::LoadBalancers }
        );
        assert_eq!(made.uow.enqueue[0].kind, WorkKind::ProviderResources);
        let renamed = ObjectName::parse("web-lb-2").unwrap();
        let changed = load_balancer_changed(&made.record, renamed.clone(), lb_spec(), now);
        assert_eq!((changed.record.generation, &changed.record.name), (2, &renamed));
        assert!(matches!(
            changed.uow.writes[0],
            Write::UpdateLoadBalancer { expected_generation: 1, .. }
        ));
        let deleted = load_balancer_deleted(&changed.record, now);
        assert!(deleted.record.delete_requested && !deleted.record.quota_released);
        assert_eq!(deleted.record.generation, 3);
        assert_eq!(deleted.uow.enqueue.len(), 1, "the reconciler deletes it and releases");
    }

    #[test]
    fn a_cluster_takes_its_first_node_pools_and_keeps_a_deletion_asked() {
        let now = Timestamp::from_unix_ms(5_000);
        let new = NewCluster {
            cluster_id: ClusterId::generate(1, 7),
            tenant_id: TenantId::parse("acme").unwrap(),
            provider_account_id: ProviderAccountId::generate(1, 2),
            name: ObjectName::parse("prod").unwrap(),
            region: "nyc1".into(),
            version: None,
            high_availability: false,
            mode: ClusterMode::Standard,
        };
        // A row made for another cluster is put in this one.
        let stray = NodePool::pending(
            crate::id::NodePoolId::generate(1, 8),
            ClusterId::generate(1, 9),
            TenantId::parse("other").unwrap(),
            "workers".into(),
            "s-2vcpu-4gb".into(),
            Scale::Count(1),
            now,
        );
        let made = cluster_created(new, vec![stray], now);
        let (cluster, rows) = &made.record;
        assert_eq!(cluster.desired_version.as_deref(), Some(VERSION_LATEST));
        assert_eq!(rows[0].cluster_id, cluster.cluster_id);
        assert_eq!(rows[0].tenant_id, cluster.tenant_id);
        assert_eq!(made.uow.writes.len(), 2);
        assert_eq!(made.uow.enqueue[0].kind, WorkKind::Clusters);
        let deleting =
            cluster_changed(cluster, ClusterChange { delete: true, ..Default::default() }, now);
        let upgraded = cluster_changed(
            &deleting.record,
            ClusterChange { version: Some("1.33.1-do.0".into()), ..Default::default() },
            now,
        );
        assert!(upgraded.record.delete_requested, "a deletion asked stays asked");
        assert_eq!(upgraded.record.desired_version.as_deref(), Some("1.33.1-do.0"));
        assert_eq!(upgraded.record.generation, 3);
        assert!(matches!(
            upgraded.uow.writes[0],
            Write::UpdateCluster { expected_generation: 2, .. }
        ));
    }

    #[test]
    fn the_substrate_event_names_its_state_cluster_and_message() {
        let now = Timestamp::from_unix_ms(6_000);
        let pool = pool_created(new_pool(true), &BTreeMap::new(), Some(&started()), now);
        let Write::PutSubstrate(mut row) = pool.uow.writes[1].clone() else { panic!() };
        assert_eq!(pool.uow.events[0], substrate_event(&row, started().event_id, now));
        row.state = crate::state::ResourceState::Error;
        row.cluster_id = Some(ClusterId::generate(1, 7));
        row.message = Some("no room".into());
        let e = substrate_event(&row, started().event_id, now);
        assert_eq!(e.kind, "kubernetes.substrate.error");
        assert_eq!(e.data["message"], "no room");
        assert_eq!(e.data["clusterId"], json!(row.cluster_id));
    }
}
