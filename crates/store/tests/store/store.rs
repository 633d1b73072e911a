//! The store suite: every repository method and every `Write` variant, the atomicity of
//! a unit of work, and the work queue's leases, run against SQLite in memory, a SQLite
//! file and PostgreSQL (see `common::suite!`).
//!
//! Invariant checked: the module contract of `bc_domain::ports::store`. No test sleeps or
//! times anything; concurrency tests count outcomes, and every loop is bounded.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bc_domain::StoreError;
use bc_domain::model::*;
use bc_domain::policy::{AutoScale, PoolPolicy, Scale, UpgradePolicy};
use bc_domain::ports::*;
use bc_domain::rules::quota::QuotaError;
use bc_domain::{Error, ErrorCode, NodePoolState, ResourceState, TenantId, Timestamp};
use bc_store::testing::*;
use bc_store::{SqlStore, store_suite};
use sea_orm::ConnectionTrait;

store_suite!(
    ready_and_migrations_are_idempotent,
    pools_names_lists_and_archive,
    pool_updates_are_compare_and_swap,
    quotas_book_and_release,
    quota_exhaustion_is_resource_exhausted,
    load_balancer_quota_is_released_once,
    accounts_live_names_and_soft_delete,
    accounts_in_use_are_not_deleted,
    substrates_put_and_list_by_cluster,
    clusters_desired_and_observed,
    cluster_high_availability_is_persisted,
    node_pools_desired_and_observed,
    delete_requests_and_provider_pools_persist,
    load_balancers_filters_and_status,
    nodes_and_tokens,
    rejoin_keeps_the_node_id,
    a_deleted_substrate_ends_its_nodes,
    bookings_count_active,
    bookings_are_refused_while_a_drain_waits,
    concurrent_bookings_and_a_drain_never_miss_each_other,
    billing_intervals_are_idempotent,
    events_and_idempotency,
    idempotency_window_and_distinct_errors,
    failed_unit_of_work_leaves_nothing,
    queue_lifecycle,
    queue_reenqueue_during_lease_is_kept,
    a_settled_batch_is_each_settle_alone,
    queue_expired_lease_is_taken_over,
    future_enqueue_during_a_lease_keeps_its_time,
    fenced_commits_need_the_lease,
    data_errors_are_final_not_busy,
    concurrent_claimers_never_share_an_item,
    concurrent_quota_bookings_never_overbook,
    concurrent_cas_has_one_winner,
    concurrent_events_are_visible_in_seq_order,
    concurrent_takeover_of_expired_leases,
    concurrent_readers_never_see_half_a_commit,
    closed_pool_is_unavailable,
    queue_release_and_next_due,
    budgets_are_compare_and_swap,
    concurrent_budget_takers_never_overspend,
);

type S = Arc<SqlStore>;

async fn ok(s: &S, uow: UnitOfWork) -> Committed {
    s.commit(uow).await.expect("commit")
}

fn one(w: Write) -> UnitOfWork {
    UnitOfWork::new().write(w)
}

/// The key the next page starts after, if any.
fn next_key<T, K: CursorKey>(p: &Page<T, K>) -> Option<K> {
    p.next.as_ref().map(|c| c.key().clone())
}

async fn ready_and_migrations_are_idempotent(s: S) {
    s.ready().await.unwrap();
    s.migrate().await.unwrap();
    s.ready().await.unwrap();
    // The newest migration (15, list versions) rolls back and applies again on both
    // backends.
    s.migrate_down(1).await.unwrap();
    assert!(matches!(s.ready().await, Err(StoreError::Unavailable(_))), "one pending");
    s.migrate().await.unwrap();
    // So do 14 (cluster nodes), 11 (account projects), 10 (node ends), 9 (substrate
    // refusals), 8 (provider budgets), 7 (Kubernetes intents) and 6, under it.
    s.migrate_down(8).await.unwrap();
    assert!(matches!(s.ready().await, Err(StoreError::Unavailable(_))), "eight pending");
    // A run re-enqueued under the old schema keeps its pending work across migration 6.
    s.connection()
        .execute_unprepared(
            "INSERT INTO work_queue (kind, item_key, not_before, attempts, lease_owner, \
             lease_until, last_error, requeued) \
             VALUES ('kubernetes.substrates', 'p', 5, 0, 'r1', 100, NULL, TRUE)",
        )
        .await
        .unwrap();
    s.migrate().await.unwrap();
    s.ready().await.unwrap();
    assert!(s.complete(K, "p", "r1").await.unwrap());
    let kept = s.work_get(K, "p").await.unwrap().expect("the re-enqueued work is kept");
    assert_eq!((kept.not_before, kept.lease_owner), (Timestamp::from_unix_ms(5), None));
    assert_eq!(s.commit(UnitOfWork::new()).await.unwrap(), Committed::default());
}

async fn pools_names_lists_and_archive(s: S) {
    let acme = tenant("acme");
    let other = tenant("other");
    let web = pool(&acme, "web");
    let mut db = pool(&acme, "db");
    db.policy = PoolPolicy { upgrades: UpgradePolicy::Immediate, ..PoolPolicy::default() };
    let theirs = pool(&other, "web");
    for p in [&web, &db, &theirs] {
        ok(&s, one(Write::InsertPool(p.clone()))).await;
    }
    assert_eq!(s.pool_get_any(&web.pool_id).await.unwrap(), Some(web.clone()));
    assert_eq!(s.pool_get_any(&id()).await.unwrap(), None);
    assert_eq!(s.pool_find_by_name(&acme, &name("db")).await.unwrap(), Some(db.clone()));
    assert_eq!(s.pool_find_by_name(&other, &name("db")).await.unwrap(), None);

    // The name is taken among the tenant's active pools; nothing of the UoW stays.
    let dup = pool(&acme, "web");
    let err = s.commit(one(Write::InsertPool(dup.clone()))).await.unwrap_err();
    assert!(matches!(err, StoreError::AlreadyExists(ref m) if m.contains("web")), "{err:?}");
    assert_eq!(s.pool_get_any(&dup.pool_id).await.unwrap(), None);
    // Same id again is refused too.
    assert!(matches!(
        s.commit(one(Write::InsertPool(web.clone()))).await,
        Err(StoreError::AlreadyExists(_))
    ));

    // Archive frees the name.
    let mut archived = web.clone();
    archived.state = PoolState::Archived;
    archived.archived_at = Some(t(10));
    archived.generation = 2;
    archived.updated_at = t(10);
    ok(&s, one(Write::UpdatePool { pool: archived.clone(), expected_generation: 1 })).await;
    assert_eq!(s.pool_find_by_name(&acme, &name("web")).await.unwrap(), None);
    let web2 = pool(&acme, "web");
    ok(&s, one(Write::InsertPool(web2.clone()))).await;
    assert_eq!(s.pool_find_by_name(&acme, &name("web")).await.unwrap(), Some(web2.clone()));
    // Un-archiving the old one would now clash with the new active name.
    let mut back = archived.clone();
    back.state = PoolState::Active;
    back.archived_at = None;
    back.generation = 3;
    assert!(matches!(
        s.commit(one(Write::UpdatePool { pool: back, expected_generation: 2 })).await,
        Err(StoreError::AlreadyExists(_))
    ));

    // Lists: by tenant, active only unless asked, ordered by id, paged.
    let active =
        s.pool_list(&acme, &ReadScope::Tenant, false, &PageRequest::first(10)).await.unwrap();
    assert_eq!(active.items, vec![db.clone(), web2.clone()]);
    assert_eq!(active.next, None);
    let all = s.pool_list(&acme, &ReadScope::Tenant, true, &PageRequest::first(10)).await.unwrap();
    assert_eq!(all.items, vec![archived.clone(), db.clone(), web2.clone()]);
    let mut seen = vec![];
    let mut page = PageRequest::first(1);
    for _ in 0..10 {
        let p = s.pool_list(&acme, &ReadScope::Tenant, true, &page).await.unwrap();
        assert!(p.items.len() <= 1);
        seen.extend(p.items);
        match p.next {
            Some(a) => page.after = Some(a),
            None => break,
        }
    }
    assert_eq!(seen, all.items);
    let two = s.pool_list(&acme, &ReadScope::Tenant, true, &PageRequest::first(2)).await.unwrap();
    assert_eq!(next_key(&two), Some(db.pool_id.clone()));
}

async fn pool_updates_are_compare_and_swap(s: S) {
    let acme = tenant("acme");
    let p = pool(&acme, "web");
    ok(&s, one(Write::InsertPool(p.clone()))).await;
    let mut next = p.clone();
    next.generation = 2;
    next.policy.upgrades = UpgradePolicy::Immediate;
    next.updated_at = t(5);
    let stale =
        s.commit(one(Write::UpdatePool { pool: next.clone(), expected_generation: 7 })).await;
    assert!(matches!(stale, Err(StoreError::Stale(_))), "{stale:?}");
    let mut ghost = next.clone();
    ghost.pool_id = id();
    let missing = s.commit(one(Write::UpdatePool { pool: ghost, expected_generation: 1 })).await;
    assert!(matches!(missing, Err(StoreError::NotFound(_))), "{missing:?}");
    assert_eq!(s.pool_get_any(&p.pool_id).await.unwrap(), Some(p.clone()));
    ok(&s, one(Write::UpdatePool { pool: next.clone(), expected_generation: 1 })).await;
    assert_eq!(s.pool_get_any(&p.pool_id).await.unwrap(), Some(next.clone()));
    // The old generation is now stale.
    let again = s.commit(one(Write::UpdatePool { pool: next, expected_generation: 1 })).await;
    assert!(matches!(again, Err(StoreError::Stale(_))));
}

async fn quotas_book_and_release(s: S) {
    let acme = tenant("acme");
    let p = pool(&acme, "web");
    let a = account(&acme, "main");
    ok(
        &s,
        UnitOfWork::new()
            .write(Write::InsertPool(p.clone()))
            .write(Write::InsertAccount(a.clone())),
    )
    .await;
    let r = QuotaResource::LoadBalancers;
    let book = || one(Write::BookQuota { pool_id: p.pool_id.clone(), resource: r });

    // No row: nothing to book, and the rule's reason says so.
    let e = s.commit(book()).await.unwrap_err();
    assert_eq!(e, StoreError::QuotaExhausted(QuotaError::Absent));
    assert_eq!(s.quota_get(&p.pool_id, r).await.unwrap(), None);
    assert_eq!(s.quota_list(&p.pool_id).await.unwrap(), vec![]);

    ok(&s, one(Write::SetQuota { pool_id: p.pool_id.clone(), resource: r, limit: 2 })).await;
    // Each load balancer books its unit in the unit of work that creates it.
    let l1 = load_balancer(&p, &a, "one");
    let l2 = load_balancer(&p, &a, "two");
    for l in [&l1, &l2] {
        ok(&s, book().write(Write::InsertLoadBalancer(l.clone()))).await;
    }
    let third = book().write(Write::InsertLoadBalancer(load_balancer(&p, &a, "three")));
    let e = s.commit(third).await.unwrap_err();
    assert_eq!(
        e,
        StoreError::QuotaExhausted(QuotaError::Exhausted { resource: r, limit: 2, used: 2 })
    );
    assert_eq!(
        s.quota_get(&p.pool_id, r).await.unwrap(),
        Some(Quota { resource: r, limit: 2, used: 2 })
    );
    // Raising the limit keeps `used`.
    ok(&s, one(Write::SetQuota { pool_id: p.pool_id.clone(), resource: r, limit: 5 })).await;
    assert_eq!(
        s.quota_list(&p.pool_id).await.unwrap(),
        vec![Quota { resource: r, limit: 5, used: 2 }]
    );
    let release = |l: &LoadBalancer| {
        one(Write::ReleaseLoadBalancerQuota { load_balancer_id: l.load_balancer_id.clone() })
    };
    ok(&s, release(&l1)).await;
    ok(&s, release(&l2)).await;
    assert_eq!(s.quota_get(&p.pool_id, r).await.unwrap().unwrap().used, 0);
    let missing = LoadBalancer { load_balancer_id: id(), ..l1.clone() };
    assert!(matches!(s.commit(release(&missing)).await, Err(StoreError::NotFound(_))));
    // A quota for a pool that does not exist.
    let res = s.commit(one(Write::SetQuota { pool_id: id(), resource: r, limit: 1 })).await;
    assert!(matches!(res, Err(StoreError::NotFound(_))), "{res:?}");
}

/// Bug 8: quota exhaustion was `Conflict` (FAILED_PRECONDITION, 400); SPEC §2 says
/// RESOURCE_EXHAUSTED (429), the mapping of `rules::quota`.
async fn quota_exhaustion_is_resource_exhausted(s: S) {
    let p = pool(&tenant("acme"), "web");
    let r = QuotaResource::LoadBalancers;
    ok(&s, one(Write::InsertPool(p.clone()))).await;
    let book = || one(Write::BookQuota { pool_id: p.pool_id.clone(), resource: r });
    let absent: Error = s.commit(book()).await.unwrap_err().into();
    assert_eq!(absent.code, ErrorCode::ResourceExhausted);
    assert!(absent.message.contains("quotas.set"), "{}", absent.message);
    ok(&s, one(Write::SetQuota { pool_id: p.pool_id.clone(), resource: r, limit: 1 })).await;
    ok(&s, book()).await;
    let full: Error = s.commit(book()).await.unwrap_err().into();
    assert_eq!(full.code, ErrorCode::ResourceExhausted);
    assert!(full.message.contains("1 of 1 used"), "{}", full.message);
}

/// Bug 3: a load balancer's quota unit is released exactly once, however often the
/// release repeats (a reconcile run again after a crash, or twice by two replicas).
async fn load_balancer_quota_is_released_once(s: S) {
    let acme = tenant("acme");
    let p = pool(&acme, "web");
    let a = account(&acme, "main");
    let r = QuotaResource::LoadBalancers;
    let l1 = load_balancer(&p, &a, "one");
    let l2 = load_balancer(&p, &a, "two");
    let mut uow = UnitOfWork::new()
        .write(Write::InsertPool(p.clone()))
        .write(Write::InsertAccount(a.clone()))
        .write(Write::SetQuota { pool_id: p.pool_id.clone(), resource: r, limit: 5 });
    for l in [&l1, &l2] {
        uow = uow
            .write(Write::BookQuota { pool_id: p.pool_id.clone(), resource: r })
            .write(Write::InsertLoadBalancer(l.clone()));
    }
    ok(&s, uow).await;
    let release = Write::ReleaseLoadBalancerQuota { load_balancer_id: l1.load_balancer_id.clone() };
    for _ in 0..3 {
        ok(&s, one(release.clone())).await;
    }
    assert_eq!(s.quota_get(&p.pool_id, r).await.unwrap().unwrap().used, 1, "l2's unit stays");
    let got = s.load_balancer_get_any(&l1.load_balancer_id).await.unwrap().unwrap();
    assert!(got.quota_released);
    assert!(!s.load_balancer_get_any(&l2.load_balancer_id).await.unwrap().unwrap().quota_released);
    // Concurrent repeats release once too.
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (s, w) = (
                s.clone(),
                Write::ReleaseLoadBalancerQuota { load_balancer_id: l2.load_balancer_id.clone() },
            );
            tokio::spawn(async move { s.commit(one(w)).await })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(s.quota_get(&p.pool_id, r).await.unwrap().unwrap().used, 0);
}

async fn accounts_live_names_and_soft_delete(s: S) {
    let acme = tenant("acme");
    let a = account(&acme, "main");
    let b = account(&acme, "spare");
    ok(
        &s,
        UnitOfWork::new()
            .write(Write::InsertAccount(a.clone()))
            .write(Write::InsertAccount(b.clone())),
    )
    .await;
    assert_eq!(s.account_get_any(&a.provider_account_id).await.unwrap(), Some(a.clone()));
    let dup = s.commit(one(Write::InsertAccount(account(&acme, "main")))).await;
    assert!(matches!(dup, Err(StoreError::AlreadyExists(_))), "{dup:?}");
    // Another tenant may use the name.
    ok(&s, one(Write::InsertAccount(account(&tenant("other"), "main")))).await;

    let first = s.account_list(&acme, &ReadScope::Tenant, &PageRequest::first(1)).await.unwrap();
    assert_eq!(first.items, vec![a.clone()]);
    let rest = s
        .account_list(
            &acme,
            &ReadScope::Tenant,
            &PageRequest { after: first.next.clone(), limit: 1 },
        )
        .await
        .unwrap();
    assert_eq!((rest.items, rest.next), (vec![b.clone()], None));

    let del = Write::DeleteAccount { provider_account_id: a.provider_account_id.clone(), at: t(9) };
    ok(&s, one(del.clone())).await;
    ok(&s, one(del)).await;
    let got = s.account_get_any(&a.provider_account_id).await.unwrap().unwrap();
    assert_eq!(got.deleted_at, Some(t(9)));
    assert_eq!(
        s.account_list(&acme, &ReadScope::Tenant, &PageRequest::first(10)).await.unwrap().items,
        vec![b]
    );
    ok(&s, one(Write::InsertAccount(account(&acme, "main")))).await;
    let missing = s
        .commit(one(Write::DeleteAccount { provider_account_id: missing_account(), at: t(1) }))
        .await;
    assert!(matches!(missing, Err(StoreError::NotFound(_))));
}

/// Bug 3: an account is deleted only while no live cluster, load balancer or substrate
/// uses it (SPEC §5), checked inside the deleting statement.
async fn accounts_in_use_are_not_deleted(s: S) {
    let acme = tenant("acme");
    let a = account(&acme, "main");
    let p = pool(&acme, "web");
    let c = cluster(&a, "alpha");
    let lb = load_balancer(&p, &a, "front");
    let mut x = substrate(&p, &a, None);
    ok(
        &s,
        UnitOfWork::new()
            .write(Write::InsertAccount(a.clone()))
            .write(Write::InsertPool(p.clone()))
            .write(Write::InsertCluster(c.clone()))
            .write(Write::InsertLoadBalancer(lb.clone()))
            .write(Write::PutSubstrate(x.clone())),
    )
    .await;
    let id = a.provider_account_id.clone();
    let delete = || one(Write::DeleteAccount { provider_account_id: id.clone(), at: t(9) });
    let refused = async |users: &str| {
        let e = s.commit(delete()).await.unwrap_err();
        let StoreError::Conflict(m) = &e else { panic!("{e:?}") };
        assert!(m.contains(users), "{m}");
        assert_eq!(Error::from(e).code, ErrorCode::FailedPrecondition);
        let got = s.account_get(&acme, &id).await.unwrap().unwrap();
        assert_eq!(got.deleted_at, None, "still live");
    };
    refused("1 live cluster, 1 live load balancer, 1 live substrate").await;
    let gone = status(ResourceState::Deleted);
    ok(
        &s,
        one(Write::SetClusterStatus {
            cluster_id: c.cluster_id.clone(),
            provider_cluster_id: None,
            version: None,
            status: gone.clone(),
        }),
    )
    .await;
    refused("1 live load balancer, 1 live substrate").await;
    ok(
        &s,
        one(Write::SetLoadBalancerStatus {
            load_balancer_id: lb.load_balancer_id.clone(),
            provider_load_balancer_id: None,
            ip: None,
            status: gone,
            ready_at: None,
            deleted_at: Some(t(5)),
        }),
    )
    .await;
    refused("1 live substrate").await;
    x.state = ResourceState::Deleted;
    ok(&s, one(Write::PutSubstrate(x))).await;
    ok(&s, delete()).await;
    let got = s.account_get(&acme, &id).await.unwrap().unwrap();
    assert_eq!(got.deleted_at, Some(t(9)));
}

async fn substrates_put_and_list_by_cluster(s: S) {
    let acme = tenant("acme");
    let a = account(&acme, "main");
    let p1 = pool(&acme, "one");
    let p2 = pool(&acme, "two");
    let c = cluster(&a, "bc-one");
    ok(
        &s,
        UnitOfWork::new()
            .write(Write::InsertAccount(a.clone()))
            .write(Write::InsertPool(p1.clone()))
            .write(Write::InsertPool(p2.clone()))
            .write(Write::InsertCluster(c.clone())),
    )
    .await;
    let mut s1 = substrate(&p1, &a, None);
    s1.waiting_to_join = None;
    s1.upgrade = None;
    ok(&s, one(Write::PutSubstrate(s1.clone()))).await;
    assert_eq!(s.substrate_get_any(&p1.pool_id).await.unwrap(), Some(s1.clone()));
    assert_eq!(s.substrate_list_by_cluster(&c.cluster_id).await.unwrap(), vec![]);
    // Replace: now on the cluster, with the optional parts set.
    let s1b = substrate(&p1, &a, Some(c.cluster_id.clone()));
    let s2 = substrate(&p2, &a, Some(c.cluster_id.clone()));
    ok(
        &s,
        UnitOfWork::new()
            .write(Write::PutSubstrate(s1b.clone()))
            .write(Write::PutSubstrate(s2.clone())),
    )
    .await;
    assert_eq!(s.substrate_get_any(&p1.pool_id).await.unwrap(), Some(s1b.clone()));
    assert_eq!(s.substrate_list_by_cluster(&c.cluster_id).await.unwrap(), vec![s1b, s2]);
    assert_eq!(s.substrate_get_any(&id()).await.unwrap(), None);
    let orphan = substrate(&pool(&acme, "ghost"), &a, None);
    assert!(matches!(
        s.commit(one(Write::PutSubstrate(orphan))).await,
        Err(StoreError::NotFound(_))
    ));
}

async fn clusters_desired_and_observed(s: S) {
    let acme = tenant("acme");
    let a = account(&acme, "main");
    let b = account(&acme, "spare");
    let c1 = cluster(&a, "alpha");
    let c2 = cluster(&b, "beta");
    ok(
        &s,
        UnitOfWork::new()
            .write(Write::InsertAccount(a.clone()))
            .write(Write::InsertAccount(b.clone()))
            .write(Write::InsertCluster(c1.clone()))
            .write(Write::InsertCluster(c2.clone())),
    )
    .await;
    assert_eq!(s.cluster_get_any(&c1.cluster_id).await.unwrap(), Some(c1.clone()));
    let dup = s.commit(one(Write::InsertCluster(cluster(&a, "alpha")))).await;
    assert!(matches!(dup, Err(StoreError::AlreadyExists(_))), "{dup:?}");
    let orphan = cluster(&account(&acme, "ghost"), "x");
    assert!(matches!(
        s.commit(one(Write::InsertCluster(orphan))).await,
        Err(StoreError::NotFound(_))
    ));

    let list = |t: TenantId, f: ClusterFilter| {
        let s = s.clone();
        async move {
            s.cluster_list(&t, &ReadScope::Tenant, &f, &PageRequest::first(10)).await.unwrap().items
        }
    };
    assert_eq!(list(acme.clone(), ClusterFilter::default()).await, vec![c1.clone(), c2.clone()]);
    let of_b = ClusterFilter {
        provider_account_id: Some(b.provider_account_id.clone()),
        ..Default::default()
    };
    assert_eq!(list(acme.clone(), of_b).await, vec![c2.clone()]);
    assert_eq!(list(tenant("other"), ClusterFilter::default()).await, vec![]);

    // Desired fields under CAS.
    let mut d = c1.clone();
    d.name = name("alpha2");
    d.desired_version = Some("1.34.0-do.0".into());
    d.substrate_pool_ids = vec![id(), id()];
    d.generation = 2;
    let stale =
        s.commit(one(Write::UpdateCluster { cluster: d.clone(), expected_generation: 5 })).await;
    assert!(matches!(stale, Err(StoreError::Stale(_))));
    let mut ghost = d.clone();
    ghost.cluster_id = id();
    assert!(matches!(
        s.commit(one(Write::UpdateCluster { cluster: ghost, expected_generation: 1 })).await,
        Err(StoreError::NotFound(_))
    ));
    ok(&s, one(Write::UpdateCluster { cluster: d.clone(), expected_generation: 1 })).await;
    assert_eq!(s.cluster_get_any(&c1.cluster_id).await.unwrap(), Some(d.clone()));

    // Observed fields only; the provider id, once known, is not erased.
    let st = ObservedStatus {
        state: ResourceState::Ready,
        message: Some("ok".into()),
        observed_generation: 2,
        updated_at: t(20),
    };
    ok(
        &s,
        one(Write::SetClusterStatus {
            cluster_id: c1.cluster_id.clone(),
            provider_cluster_id: Some("do-1".into()),
            version: Some("1.34.0-do.0".into()),
            status: st.clone(),
        }),
    )
    .await;
    ok(
        &s,
        one(Write::SetClusterStatus {
            cluster_id: c1.cluster_id.clone(),
            provider_cluster_id: None,
            version: None,
            status: st.clone(),
        }),
    )
    .await;
    let got = s.cluster_get_any(&c1.cluster_id).await.unwrap().unwrap();
    assert_eq!(
        (got.provider_cluster_id.as_deref(), got.version.as_deref()),
        (Some("do-1"), Some("1.34.0-do.0"))
    );
    assert_eq!((got.status.clone(), got.generation, got.name.clone()), (st, 2, name("alpha2")));
    assert_eq!(
        s.cluster_find_by_provider_id(&a.provider_account_id, "do-1").await.unwrap(),
        Some(got)
    );
    assert_eq!(s.cluster_find_by_provider_id(&b.provider_account_id, "do-1").await.unwrap(), None);
    assert_eq!(s.cluster_count_live_by_account(&a.provider_account_id).await.unwrap(), 1);

    // Deleted: not live, not found by provider id, and the name is free again.
    let gone = ObservedStatus {
        state: ResourceState::Deleted,
        message: None,
        observed_generation: 2,
        updated_at: t(30),
    };
    ok(
        &s,
        one(Write::SetClusterStatus {
            cluster_id: c1.cluster_id.clone(),
            provider_cluster_id: None,
            version: None,
            status: gone,
        }),
    )
    .await;
    assert_eq!(s.cluster_count_live_by_account(&a.provider_account_id).await.unwrap(), 0);
    assert_eq!(s.cluster_find_by_provider_id(&a.provider_account_id, "do-1").await.unwrap(), None);
    ok(&s, one(Write::InsertCluster(cluster(&a, "alpha2")))).await;
    let missing = s
        .commit(one(Write::SetClusterStatus {
            cluster_id: id(),
            provider_cluster_id: None,
            version: None,
            status: status(ResourceState::Ready),
        }))
        .await;
    assert!(matches!(missing, Err(StoreError::NotFound(_))));
}

/// Bug 5: `UpdateCluster` dropped `highAvailability`; false → true must persist.
async fn cluster_high_availability_is_persisted(s: S) {
    let a = account(&tenant("acme"), "main");
    let c = cluster(&a, "alpha");
    ok(&s, UnitOfWork::new().write(Write::InsertAccount(a)).write(Write::InsertCluster(c.clone())))
        .await;
    let ha = KubernetesCluster { high_availability: true, generation: 2, ..c.clone() };
    ok(&s, one(Write::UpdateCluster { cluster: ha.clone(), expected_generation: 1 })).await;
    let got = s.cluster_get_any(&c.cluster_id).await.unwrap().unwrap();
    assert!(got.high_availability);
    assert_eq!(got, ha);
}

async fn node_pools_desired_and_observed(s: S) {
    let acme = tenant("acme");
    let a = account(&acme, "main");
    let c = cluster(&a, "alpha");
    let other = cluster(&a, "beta");
    let n1 = node_pool(&c, "cpu");
    let mut n2 = node_pool(&c, "gpu");
    n2.managed_by = Some(id());
    n2.scale = Scale::AutoScale(AutoScale { min: 0, max: 4 });
    ok(
        &s,
        UnitOfWork::new()
            .write(Write::InsertAccount(a.clone()))
            .write(Write::InsertCluster(c.clone()))
            .write(Write::InsertCluster(other.clone()))
            .write(Write::InsertNodePool(n1.clone()))
            .write(Write::InsertNodePool(n2.clone()))
            .write(Write::InsertNodePool(node_pool(&other, "cpu"))),
    )
    .await;
    assert_eq!(s.node_pool_get_any(&n2.node_pool_id).await.unwrap(), Some(n2.clone()));
    let dup = s.commit(one(Write::InsertNodePool(node_pool(&c, "cpu")))).await;
    assert!(matches!(dup, Err(StoreError::AlreadyExists(_))), "{dup:?}");
    let mut orphan = node_pool(&c, "x");
    orphan.cluster_id = id();
    assert!(matches!(
        s.commit(one(Write::InsertNodePool(orphan))).await,
        Err(StoreError::NotFound(_))
    ));

    let p1 = s.node_pool_list_by_cluster(&c.cluster_id, &PageRequest::first(1)).await.unwrap();
    assert_eq!(p1.items, vec![n1.clone()]);
    let p2 = s
        .node_pool_list_by_cluster(&c.cluster_id, &PageRequest { after: p1.next, limit: 1 })
        .await
        .unwrap();
    assert_eq!((p2.items, p2.next), (vec![n2.clone()], None));

    let mut d = n1.clone();
    d.scale = Scale::Count(5);
    d.labels.insert("zone".into(), "a".into());
    d.taints.clear();
    d.generation = 2;
    assert!(matches!(
        s.commit(one(Write::UpdateNodePool { node_pool: d.clone(), expected_generation: 2 })).await,
        Err(StoreError::Stale(_))
    ));
    let mut ghost = d.clone();
    ghost.node_pool_id = id();
    assert!(matches!(
        s.commit(one(Write::UpdateNodePool { node_pool: ghost, expected_generation: 1 })).await,
        Err(StoreError::NotFound(_))
    ));
    ok(&s, one(Write::UpdateNodePool { node_pool: d.clone(), expected_generation: 1 })).await;
    assert_eq!(s.node_pool_get_any(&n1.node_pool_id).await.unwrap(), Some(d.clone()));

    let status = |state, listed| Write::SetNodePoolStatus {
        node_pool_id: n1.node_pool_id.clone(),
        provider_node_pool_id: (listed > 0).then(|| "np-1".to_string()),
        nodes_listed: listed,
        nodes_ready: listed,
        state,
        message: Some("m".into()),
        observed_generation: 2,
        updated_at: t(40),
    };
    ok(&s, one(status(NodePoolState::Ready, 5))).await;
    ok(&s, one(status(NodePoolState::Updating, 0))).await;
    let got = s.node_pool_get_any(&n1.node_pool_id).await.unwrap().unwrap();
    assert_eq!(got.provider_node_pool_id.as_deref(), Some("np-1"));
    assert_eq!(
        (got.state, got.nodes_listed, got.observed_generation, got.updated_at),
        (NodePoolState::Updating, 0, 2, t(40))
    );
    assert_eq!((got.scale, got.generation), (Scale::Count(5), 2));
    ok(&s, one(status(NodePoolState::Deleted, 0))).await;
    ok(&s, one(Write::InsertNodePool(node_pool(&c, "cpu")))).await;
    let mut missing = status(NodePoolState::Ready, 1);
    if let Write::SetNodePoolStatus { node_pool_id, .. } = &mut missing {
        *node_pool_id = id();
    }
    assert!(matches!(s.commit(one(missing)).await, Err(StoreError::NotFound(_))));
}

/// Migration 7: a delete request is a desired field (CAS, kept by status writes), and a
/// provider's own node pool is recorded with origin `provider`.
async fn delete_requests_and_provider_pools_persist(s: S) {
    let a = account(&tenant("acme"), "main");
    let c = cluster(&a, "alpha");
    let mine = node_pool(&c, "cpu");
    let mut theirs = node_pool(&c, "default");
    theirs.origin = NodePoolOrigin::Provider;
    ok(
        &s,
        UnitOfWork::new()
            .write(Write::InsertAccount(a))
            .write(Write::InsertCluster(c.clone()))
            .write(Write::InsertNodePool(mine.clone()))
            .write(Write::InsertNodePool(theirs.clone())),
    )
    .await;
    let got = s.node_pool_get_any(&theirs.node_pool_id).await.unwrap().unwrap();
    assert_eq!((got.origin, got.delete_requested), (NodePoolOrigin::Provider, false));
    assert_eq!(
        s.node_pool_get_any(&mine.node_pool_id).await.unwrap().unwrap().origin,
        NodePoolOrigin::Created
    );

    let gone = NodePool { delete_requested: true, generation: 2, ..mine.clone() };
    ok(&s, one(Write::UpdateNodePool { node_pool: gone.clone(), expected_generation: 1 })).await;
    let del = KubernetesCluster { delete_requested: true, generation: 2, ..c.clone() };
    ok(&s, one(Write::UpdateCluster { cluster: del.clone(), expected_generation: 1 })).await;
    // A status write afterwards keeps the request.
    ok(
        &s,
        one(Write::SetClusterStatus {
            cluster_id: c.cluster_id.clone(),
            provider_cluster_id: None,
            version: None,
            status: status(ResourceState::Ready),
        }),
    )
    .await;
    let got = s.cluster_get_any(&c.cluster_id).await.unwrap().unwrap();
    assert!(got.delete_requested);
    assert_eq!(s.node_pool_get_any(&mine.node_pool_id).await.unwrap(), Some(gone));
    let stale = s.commit(one(Write::UpdateCluster { cluster: del, expected_generation: 1 })).await;
    assert!(matches!(stale, Err(StoreError::Stale(_))), "{stale:?}");
}

async fn load_balancers_filters_and_status(s: S) {
    let acme = tenant("acme");
    let a = account(&acme, "main");
    let b = account(&acme, "spare");
    let p = pool(&acme, "web");
    let q = pool(&acme, "db");
    let l1 = load_balancer(&p, &a, "front");
    let l2 = load_balancer(&q, &a, "back");
    let l3 = load_balancer(&p, &b, "front");
    let mut uow = UnitOfWork::new();
    for w in [
        Write::InsertAccount(a.clone()),
        Write::InsertAccount(b.clone()),
        Write::InsertPool(p.clone()),
        Write::InsertPool(q.clone()),
    ] {
        uow = uow.write(w);
    }
    for l in [&l1, &l2, &l3] {
        uow = uow.write(Write::InsertLoadBalancer(l.clone()));
    }
    ok(&s, uow).await;
    assert_eq!(s.load_balancer_get_any(&l1.load_balancer_id).await.unwrap(), Some(l1.clone()));
    let dup = s.commit(one(Write::InsertLoadBalancer(load_balancer(&p, &a, "front")))).await;
    assert!(matches!(dup, Err(StoreError::AlreadyExists(_))), "{dup:?}");
    let orphan = load_balancer(&pool(&acme, "ghost"), &a, "x");
    assert!(matches!(
        s.commit(one(Write::InsertLoadBalancer(orphan))).await,
        Err(StoreError::NotFound(_))
    ));

    let list = |f: LoadBalancerFilter| {
        let s = s.clone();
        let acme = acme.clone();
        async move {
            let page = PageRequest::first(10);
            s.load_balancer_list(&acme, &ReadScope::Tenant, &f, &page).await.unwrap().items
        }
    };
    assert_eq!(list(LoadBalancerFilter::default()).await, vec![l1.clone(), l2.clone(), l3.clone()]);
    assert_eq!(
        list(LoadBalancerFilter { pool_id: Some(p.pool_id.clone()), ..Default::default() }).await,
        vec![l1.clone(), l3.clone()]
    );
    assert_eq!(
        list(LoadBalancerFilter {
            pool_id: Some(p.pool_id.clone()),
            provider_account_id: Some(a.provider_account_id.clone()),
            include_deleted: false
        })
        .await,
        vec![l1.clone()]
    );
    let page = s
        .load_balancer_list(
            &acme,
            &ReadScope::Tenant,
            &LoadBalancerFilter::default(),
            &PageRequest::first(2),
        )
        .await
        .unwrap();
    assert_eq!(next_key(&page), Some(l2.load_balancer_id.clone()));

    let mut d = l1.clone();
    d.spec.size_unit = Some(3);
    d.delete_requested = true;
    d.generation = 2;
    assert!(matches!(
        s.commit(one(Write::UpdateLoadBalancer {
            load_balancer: d.clone(),
            expected_generation: 9
        }))
        .await,
        Err(StoreError::Stale(_))
    ));
    let mut ghost = d.clone();
    ghost.load_balancer_id = id();
    assert!(matches!(
        s.commit(one(Write::UpdateLoadBalancer { load_balancer: ghost, expected_generation: 1 }))
            .await,
        Err(StoreError::NotFound(_))
    ));
    ok(&s, one(Write::UpdateLoadBalancer { load_balancer: d.clone(), expected_generation: 1 }))
        .await;
    assert_eq!(s.load_balancer_get_any(&l1.load_balancer_id).await.unwrap(), Some(d.clone()));

    let set = |st, ready_at, deleted_at| Write::SetLoadBalancerStatus {
        load_balancer_id: l1.load_balancer_id.clone(),
        provider_load_balancer_id: Some("lb-do-1".into()),
        ip: Some("203.0.113.7".into()),
        status: ObservedStatus {
            state: st,
            message: None,
            observed_generation: 2,
            updated_at: t(50),
        },
        ready_at,
        deleted_at,
    };
    ok(&s, one(set(ResourceState::Ready, Some(t(50)), None))).await;
    ok(&s, one(set(ResourceState::Ready, Some(t(60)), None))).await;
    let got = s.load_balancer_get_any(&l1.load_balancer_id).await.unwrap().unwrap();
    assert_eq!(got.ready_at, Some(t(50)), "first ready is kept");
    assert_eq!(
        (got.ip.as_deref(), got.status.state, got.spec.size_unit),
        (Some("203.0.113.7"), ResourceState::Ready, Some(3))
    );
    assert_eq!(
        s.load_balancer_find_by_provider_id(&a.provider_account_id, "lb-do-1").await.unwrap(),
        Some(got)
    );
    assert_eq!(
        s.load_balancer_find_by_provider_id(&b.provider_account_id, "lb-do-1").await.unwrap(),
        None
    );
    assert_eq!(s.load_balancer_count_live_by_account(&a.provider_account_id).await.unwrap(), 2);

    ok(&s, one(set(ResourceState::Deleted, None, Some(t(70))))).await;
    assert_eq!(s.load_balancer_count_live_by_account(&a.provider_account_id).await.unwrap(), 1);
    assert_eq!(list(LoadBalancerFilter::default()).await, vec![l2.clone(), l3.clone()]);
    let with_deleted =
        list(LoadBalancerFilter { include_deleted: true, ..Default::default() }).await;
    assert_eq!(with_deleted.len(), 3);
    assert_eq!(with_deleted[0].deleted_at, Some(t(70)));
    // The name is free again in the account.
    ok(&s, one(Write::InsertLoadBalancer(load_balancer(&p, &a, "front")))).await;
    let mut missing = set(ResourceState::Ready, None, None);
    if let Write::SetLoadBalancerStatus { load_balancer_id, .. } = &mut missing {
        *load_balancer_id = id();
    }
    assert!(matches!(s.commit(one(missing)).await, Err(StoreError::NotFound(_))));
}

async fn nodes_and_tokens(s: S) {
    let acme = tenant("acme");
    let p = pool(&acme, "web");
    ok(&s, one(Write::InsertPool(p.clone()))).await;
    let n1 = node(&p.pool_id, "node-a");
    let n2 = node(&p.pool_id, "node-b");
    ok(&s, UnitOfWork::new().write(Write::PutNode(n1.clone())).write(Write::PutNode(n2.clone())))
        .await;
    assert_eq!(s.node_get(&n1.node_id).await.unwrap(), Some(n1.clone()));
    assert_eq!(s.node_find_by_name(&p.pool_id, "node-b").await.unwrap(), Some(n2.clone()));
    assert_eq!(s.node_find_by_name(&p.pool_id, "node-c").await.unwrap(), None);
    assert_eq!(
        s.node_find_by_credential_hash(&n1.credential_hash).await.unwrap(),
        Some(n1.clone())
    );
    assert_eq!(s.node_find_by_credential_hash("nope").await.unwrap(), None);
    let page = s.node_list_by_pool(&p.pool_id, &PageRequest::first(1)).await.unwrap();
    assert_eq!((next_key(&page), page.items), (Some(n1.node_id.clone()), vec![n1.clone()]));

    assert!(matches!(
        s.commit(one(Write::PutNode(node(&id(), "x")))).await,
        Err(StoreError::NotFound(_))
    ));

    ok(&s, one(Write::Heartbeat { node_id: n1.node_id.clone(), at: t(77) })).await;
    assert_eq!(s.node_get(&n1.node_id).await.unwrap().unwrap().last_heartbeat_at, Some(t(77)));
    assert!(matches!(
        s.commit(one(Write::Heartbeat { node_id: id(), at: t(1) })).await,
        Err(StoreError::NotFound(_))
    ));

    // Join tokens: live ones are found; revocation hides every live one of the pool.
    let jt = |h: &str| JoinToken {
        pool_id: p.pool_id.clone(),
        token_hash: h.into(),
        created_at: t(0),
        revoked_at: None,
    };
    ok(
        &s,
        UnitOfWork::new()
            .write(Write::InsertJoinToken(jt("j1")))
            .write(Write::InsertJoinToken(jt("j2"))),
    )
    .await;
    assert!(matches!(
        s.commit(one(Write::InsertJoinToken(jt("j1")))).await,
        Err(StoreError::AlreadyExists(_))
    ));
    assert_eq!(s.join_token_find("j2").await.unwrap(), Some(jt("j2")));
    ok(&s, one(Write::RevokeJoinTokens { pool_id: p.pool_id.clone(), at: t(3) })).await;
    assert_eq!(s.join_token_find("j1").await.unwrap(), None);
    assert_eq!(s.join_token_find("j2").await.unwrap(), None);
    ok(&s, one(Write::InsertJoinToken(jt("j3")))).await;
    assert_eq!(s.join_token_find("j3").await.unwrap(), Some(jt("j3")));

    // API tokens.
    let tok = ApiToken {
        token_id: id(),
        token_hash: "h1".into(),
        grants: vec![
            Grant { role: Role::Operator, scope: Scope::System, tenant_id: None },
            Grant {
                role: Role::Viewer,
                scope: Scope::Pool(p.pool_id.clone()),
                tenant_id: Some(acme.clone()),
            },
        ],
        created_at: t(0),
        revoked_at: None,
    };
    ok(&s, one(Write::InsertApiToken(tok.clone()))).await;
    let mut same_hash = tok.clone();
    same_hash.token_id = id();
    assert!(matches!(
        s.commit(one(Write::InsertApiToken(same_hash))).await,
        Err(StoreError::AlreadyExists(_))
    ));
    assert_eq!(s.api_token_find("h1").await.unwrap(), Some(tok.clone()));
    assert_eq!(s.api_token_get(&tok.token_id).await.unwrap(), Some(tok.clone()));
    ok(&s, one(Write::RevokeApiToken { token_id: tok.token_id.clone(), at: t(4) })).await;
    ok(&s, one(Write::RevokeApiToken { token_id: tok.token_id.clone(), at: t(8) })).await;
    assert_eq!(s.api_token_find("h1").await.unwrap().unwrap().revoked_at, Some(t(4)));
    // The operator's listing holds every token, revoked ones too, a page at a time.
    let other = ApiToken { token_id: id(), token_hash: "h2".into(), ..tok.clone() };
    ok(&s, one(Write::InsertApiToken(other.clone()))).await;
    let first = s.api_token_sweep(&PageRequest::first(1)).await.unwrap();
    assert_eq!(first.items.len(), 1);
    let rest = PageRequest { after: first.next.clone(), limit: 10 };
    let second = s.api_token_sweep(&rest).await.unwrap();
    assert!(second.next.is_none());
    let mut listed: Vec<ApiToken> = first.items.into_iter().chain(second.items).collect();
    listed.sort_by(|a, b| a.token_id.as_str().cmp(b.token_id.as_str()));
    let mut revoked = tok.clone();
    revoked.revoked_at = Some(t(4));
    let mut expected = vec![revoked, other];
    expected.sort_by(|a, b| a.token_id.as_str().cmp(b.token_id.as_str()));
    assert_eq!(listed, expected);
    assert!(matches!(
        s.commit(one(Write::RevokeApiToken { token_id: id(), at: t(1) })).await,
        Err(StoreError::NotFound(_))
    ));
}

/// Bug 4: joining again with the same node name is idempotent (SPEC §9): the node keeps
/// its `nodeId` (and first join time); the new credential replaces the old one.
async fn rejoin_keeps_the_node_id(s: S) {
    let p = pool(&tenant("acme"), "web");
    ok(&s, one(Write::InsertPool(p.clone()))).await;
    let first = node(&p.pool_id, "node-a");
    ok(&s, one(Write::PutNode(first.clone()))).await;
    ok(&s, one(Write::Heartbeat { node_id: first.node_id.clone(), at: t(5) })).await;
    let mut again = node(&p.pool_id, "node-a");
    again.bcd_version = "0.2.0".into();
    again.joined_at = t(50);
    assert_ne!(again.node_id, first.node_id);
    ok(&s, one(Write::PutNode(again.clone()))).await;

    let got = s.node_find_by_name(&p.pool_id, "node-a").await.unwrap().unwrap();
    assert_eq!(got.node_id, first.node_id, "the node keeps its id");
    assert_eq!((got.joined_at, got.last_heartbeat_at), (t(0), Some(t(5))));
    assert_eq!((got.bcd_version.as_str(), &got.credential_hash), ("0.2.0", &again.credential_hash));
    assert_eq!(s.node_get(&again.node_id).await.unwrap(), None);
    assert_eq!(s.node_find_by_credential_hash(&first.credential_hash).await.unwrap(), None);
    assert_eq!(s.node_find_by_credential_hash(&again.credential_hash).await.unwrap(), Some(got));
}

/// Issue 20, item 4: node credentials end with their substrate (SPEC §9). The row written
/// `deleted` ends the pool's nodes in its transaction: their credentials no longer find
/// them and they are no longer the pool's joined nodes; the rows stay, and a join of a
/// new substrate under the same name makes the node live again.
async fn a_deleted_substrate_ends_its_nodes(s: S) {
    let acme = tenant("acme");
    let a = account(&acme, "main");
    let p = pool(&acme, "web");
    let other = pool(&acme, "other");
    let uow = UnitOfWork::new()
        .write(Write::InsertAccount(a.clone()))
        .write(Write::InsertPool(p.clone()))
        .write(Write::InsertPool(other.clone()));
    ok(&s, uow).await;
    let n = node(&p.pool_id, "node-a");
    let theirs = node(&other.pool_id, "node-a");
    let uow =
        UnitOfWork::new().write(Write::PutNode(n.clone())).write(Write::PutNode(theirs.clone()));
    ok(&s, uow).await;
    let mut row = substrate(&p, &a, None);
    row.state = ResourceState::Deleting;
    ok(&s, one(Write::PutSubstrate(row.clone()))).await;
    assert!(s.node_find_by_credential_hash(&n.credential_hash).await.unwrap().is_some());
    row.state = ResourceState::Deleted;
    ok(&s, one(Write::PutSubstrate(row))).await;
    assert_eq!(s.node_find_by_credential_hash(&n.credential_hash).await.unwrap(), None);
    let listed = s.node_list_by_pool(&p.pool_id, &PageRequest::first(10)).await.unwrap();
    assert!(listed.items.is_empty(), "{:?}", listed.items);
    assert!(s.node_get(&n.node_id).await.unwrap().is_some(), "the row is kept");
    let still = s.node_find_by_credential_hash(&theirs.credential_hash).await.unwrap();
    assert_eq!(still, Some(theirs), "another pool's nodes are untouched");
    // A new substrate's join under the same name: live again, with the new credential.
    let again = node(&p.pool_id, "node-a");
    ok(&s, one(Write::PutNode(again.clone()))).await;
    let live = s.node_find_by_credential_hash(&again.credential_hash).await.unwrap();
    assert_eq!(live.map(|l| l.node_id), Some(n.node_id));
}

async fn bookings_count_active(s: S) {
    let acme = tenant("acme");
    let p = pool(&acme, "web");
    ok(&s, one(Write::InsertPool(p.clone()))).await;
    let b = |ends_at| booking(&p, ends_at);
    let open = b(None);
    let until_100 = b(Some(t(100)));
    let ended = b(None);
    for x in [&open, &until_100, &ended] {
        ok(&s, one(Write::InsertBooking(x.clone()))).await;
    }
    assert!(matches!(
        s.commit(one(Write::InsertBooking(open.clone()))).await,
        Err(StoreError::AlreadyExists(_))
    ));
    let mut orphan = b(None);
    orphan.pool_id = id();
    assert!(matches!(
        s.commit(one(Write::InsertBooking(orphan))).await,
        Err(StoreError::NotFound(_))
    ));
    ok(&s, one(Write::EndBooking { booking_id: ended.booking_id.clone(), at: t(10) })).await;
    ok(&s, one(Write::EndBooking { booking_id: ended.booking_id.clone(), at: t(20) })).await;
    let got = s.booking_get(&acme, &ended.booking_id).await.unwrap().unwrap();
    assert_eq!((got.state, got.ended_at), (BookingState::Ended, Some(t(10))));
    assert_eq!(s.booking_count_active(&p.pool_id, t(50)).await.unwrap(), 2);
    assert_eq!(s.booking_count_active(&p.pool_id, t(100)).await.unwrap(), 1);
    let all =
        s.booking_list(&acme, &p.pool_id, None, t(50), &PageRequest::first(10)).await.unwrap();
    assert_eq!(all.items.len(), 3);
    assert_eq!(all.items[0], open);
    assert_eq!(s.booking_get(&acme, &id()).await.unwrap(), None);
    assert!(matches!(
        s.commit(one(Write::EndBooking { booking_id: id(), at: t(1) })).await,
        Err(StoreError::NotFound(_))
    ));
}

/// Bug 3: `InsertBooking` only while no drain upgrade waits on the pool (SPEC §6, §10);
/// the refusal is `FAILED_PRECONDITION` naming the upgrade, and nothing is inserted.
async fn bookings_are_refused_while_a_drain_waits(s: S) {
    let acme = tenant("acme");
    let p = pool(&acme, "web");
    let a = account(&acme, "main");
    let mut x = substrate(&p, &a, None);
    x.upgrade = None;
    ok(
        &s,
        UnitOfWork::new()
            .write(Write::InsertPool(p.clone()))
            .write(Write::InsertAccount(a.clone()))
            .write(Write::PutSubstrate(x.clone())),
    )
    .await;
    ok(&s, one(Write::InsertBooking(booking(&p, None)))).await;
    x.upgrade = Some(UpgradeWait { version: "1.34.1-do.0".into(), since: t(10) });
    ok(&s, one(Write::PutSubstrate(x.clone()))).await;

    let refused = booking(&p, None);
    let e = s.commit(one(Write::InsertBooking(refused.clone()))).await.unwrap_err();
    let StoreError::Conflict(m) = &e else { panic!("{e:?}") };
    assert!(m.contains("1.34.1-do.0") && m.contains(p.pool_id.as_str()), "{m}");
    assert_eq!(Error::from(e).code, ErrorCode::FailedPrecondition);
    assert_eq!(s.booking_get(&acme, &refused.booking_id).await.unwrap(), None);
    // Once the upgrade has started (no wait recorded), bookings are taken again.
    x.upgrade = None;
    ok(&s, one(Write::PutSubstrate(x))).await;
    ok(&s, one(Write::InsertBooking(refused))).await;
    assert_eq!(s.booking_count_active(&p.pool_id, t(20)).await.unwrap(), 2);
}

/// Many bookings race one drain, done as the substrate reconciler does it (record the
/// wait, then count the active bookings): every booking is either refused or counted,
/// so an upgrade is never asked for while a booking the count missed is active.
async fn concurrent_bookings_and_a_drain_never_miss_each_other(s: S) {
    let acme = tenant("acme");
    let a = account(&acme, "main");
    ok(&s, one(Write::InsertAccount(a.clone()))).await;
    for round in 0..20 {
        let p = pool(&acme, &format!("web-{round}"));
        let mut x = substrate(&p, &a, None);
        x.upgrade = None;
        ok(
            &s,
            UnitOfWork::new()
                .write(Write::InsertPool(p.clone()))
                .write(Write::PutSubstrate(x.clone())),
        )
        .await;
        let mut bookings = Vec::new();
        let mut drain = None;
        for i in 0..40 {
            if i == 20 {
                let (s, mut x) = (s.clone(), x.clone());
                drain = Some(tokio::spawn(async move {
                    x.upgrade = Some(UpgradeWait { version: "1.34.1-do.0".into(), since: t(10) });
                    s.commit(one(Write::PutSubstrate(x.clone())))
                        .await
                        .expect("the drain is recorded");
                    s.booking_count_active(&x.pool_id, t(10)).await.expect("count")
                }));
            }
            let (s, b) = (s.clone(), booking(&p, None));
            bookings
                .push(tokio::spawn(async move { s.commit(one(Write::InsertBooking(b))).await }));
        }
        let counted = drain.expect("spawned").await.unwrap();
        let mut taken = 0;
        for b in bookings {
            match b.await.unwrap() {
                Ok(_) => taken += 1,
                Err(StoreError::Conflict(m)) => assert!(m.contains("1.34.1-do.0"), "{m}"),
                Err(e) => panic!("unexpected {e:?}"),
            }
        }
        assert_eq!(taken, counted, "round {round}: a booking taken after the drain's count");
    }
}

/// Every interval of `tenant` overlapping `[from, to)`, walked page by page.
async fn billing_all(
    s: &S,
    tenant: &TenantId,
    from: Timestamp,
    to: Timestamp,
    meter: Option<&str>,
) -> Vec<BillingInterval> {
    let mut out = Vec::new();
    let mut req = Some(PageRequest::first(2));
    for _ in 0..100 {
        let Some(r) = req else { break };
        let page = s.billing_list(tenant, from, to, meter, &r).await.unwrap();
        assert!(page.items.len() == 2 || page.next.is_none(), "only the last page is short");
        req = page.next_request(2);
        out.extend(page.items);
    }
    out
}

async fn billing_intervals_are_idempotent(s: S) {
    let acme = tenant("acme");
    let p = pool(&acme, "web");
    let iv = |resource: &str, start| BillingInterval {
        meter: METER_LOAD_BALANCER_HOURS.into(),
        resource: resource.into(),
        tenant_id: acme.clone(),
        pool_id: p.pool_id.clone(),
        start,
        end: None,
    };
    ok(&s, one(Write::OpenBilling(iv("lb_a", t(0))))).await;
    ok(&s, one(Write::OpenBilling(iv("lb_a", t(5))))).await; // already open: no-op
    ok(&s, one(Write::OpenBilling(iv("lb_b", t(10))))).await;
    let mut other_meter = iv("lb_a", t(0));
    other_meter.meter = "other.meter".into();
    ok(&s, one(Write::OpenBilling(other_meter))).await;
    let close = Write::CloseBilling {
        meter: METER_LOAD_BALANCER_HOURS.into(),
        resource: "lb_a".into(),
        at: t(100),
    };
    ok(&s, one(close.clone())).await;
    ok(&s, one(close)).await; // nothing open any more: no-op
    ok(&s, one(Write::OpenBilling(iv("lb_a", t(200))))).await;

    let m = Some(METER_LOAD_BALANCER_HOURS);
    let got = billing_all(&s, &acme, t(0), t(1000), m).await;
    let mut first = iv("lb_a", t(0));
    first.end = Some(t(100));
    assert_eq!(got, vec![first.clone(), iv("lb_b", t(10)), iv("lb_a", t(200))]);
    assert_eq!(billing_all(&s, &acme, t(0), t(1000), None).await.len(), 4);
    // Overlap is half-open: [0,100) does not overlap [100, 150).
    assert_eq!(billing_all(&s, &acme, t(100), t(150), m).await, vec![iv("lb_b", t(10))]);
    assert_eq!(billing_all(&s, &acme, t(0), t(5), m).await, vec![first]);
    assert_eq!(billing_all(&s, &tenant("other"), t(0), t(1000), None).await, vec![]);
    // Filtering happens inside the query: one page of 2 holds 2 matches, although an
    // interval of another meter lies between them in the table.
    let page = s.billing_list(&acme, t(0), t(1000), m, &PageRequest::first(2)).await.unwrap();
    assert_eq!(page.items.len(), 2);
    assert!(page.next.is_some());
}

async fn events_and_idempotency(s: S) {
    let acme = tenant("acme");
    let other = tenant("other");
    let e1 = event(&acme, "compute.pools.a");
    let e2 = event(&acme, "compute.pools.b");
    let e3 = event(&other, "compute.pools.c");
    let c = ok(&s, UnitOfWork::new().event(e1.clone()).event(e2.clone())).await;
    let c2 = ok(&s, UnitOfWork::new().event(e3.clone())).await;
    assert_eq!(c.event_seqs.len(), 2);
    assert!(c.event_seqs[0] < c.event_seqs[1] && c.event_seqs[1] < c2.event_seqs[0]);
    let stored = |e: &NewEvent, seq| Event {
        event_id: e.event_id.clone(),
        seq,
        tenant_id: e.tenant_id.clone(),
        subject: e.subject.clone(),
        kind: e.kind.clone(),
        time: e.time,
        data: e.data.clone(),
    };
    assert_eq!(
        s.event_list(&acme, None, 0, 10).await.unwrap(),
        vec![stored(&e1, c.event_seqs[0]), stored(&e2, c.event_seqs[1])]
    );
    assert_eq!(
        s.event_list(&acme, Some("compute.pools.b"), 0, 10).await.unwrap(),
        vec![stored(&e2, c.event_seqs[1])]
    );
    assert_eq!(s.event_list(&acme, None, c.event_seqs[0], 10).await.unwrap().len(), 1);
    assert_eq!(s.event_list(&acme, None, 0, 1).await.unwrap().len(), 1);
    let all = s.event_list_all(0, 10).await.unwrap();
    assert_eq!(
        all.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![c.event_seqs[0], c.event_seqs[1], c2.event_seqs[0]]
    );
    assert_eq!(
        s.event_list_all(c.event_seqs[1], 10).await.unwrap(),
        vec![stored(&e3, c2.event_seqs[0])]
    );
    assert!(matches!(
        s.commit(UnitOfWork::new().event(e1.clone())).await,
        Err(StoreError::AlreadyExists(_))
    ));

    let rec = |rid: &str, at| IdempotencyRecord {
        tenant_id: acme.clone(),
        method: "pools.create".into(),
        request_id: rid.into(),
        body_hash: "abc".into(),
        response: serde_json::json!({"poolId": "pool_x", "n": [1, 2]}),
        created_at: at,
    };
    ok(
        &s,
        UnitOfWork::new()
            .write(Write::PutIdempotency(rec("r1", t(0))))
            .write(Write::PutIdempotency(rec("r2", t(100)))),
    )
    .await;
    let replayed = s.commit(one(Write::PutIdempotency(rec("r1", t(5))))).await.unwrap();
    assert_eq!(replayed.replayed.as_deref(), Some(&rec("r1", t(0))));
    assert_eq!(
        s.idempotency_get(&acme, "pools.create", "r1", t(5)).await.unwrap(),
        Some(rec("r1", t(0)))
    );
    assert_eq!(s.idempotency_get(&other, "pools.create", "r1", t(5)).await.unwrap(), None);
    assert_eq!(s.idempotency_purge(t(50)).await.unwrap(), 1);
    assert_eq!(s.idempotency_get(&acme, "pools.create", "r1", t(5)).await.unwrap(), None);
    assert!(s.idempotency_get(&acme, "pools.create", "r2", t(100)).await.unwrap().is_some());
}

/// Bug 7: the 24-hour window holds on read (not only through a purge), and a `requestId`
/// reused with another body is told apart from a taken name and from a true repeat.
async fn idempotency_window_and_distinct_errors(s: S) {
    const DAY: i64 = 24 * 60 * 60 * 1000;
    let acme = tenant("acme");
    let rec = |hash: &str, at| IdempotencyRecord {
        tenant_id: acme.clone(),
        method: "loadBalancers.create".into(),
        request_id: "req-1".into(),
        body_hash: hash.into(),
        response: serde_json::json!({"loadBalancerId": hash}),
        created_at: at,
    };
    let get = |at| s.idempotency_get(&acme, "loadBalancers.create", "req-1", at);
    ok(&s, one(Write::PutIdempotency(rec("first", t(0))))).await;
    assert_eq!(get(t(DAY - 1)).await.unwrap(), Some(rec("first", t(0))));
    assert_eq!(get(t(DAY)).await.unwrap(), None, "24 h later the record no longer answers");

    // Within the window: the same body is a replay — an `Ok` outcome carrying the first
    // response, with nothing applied; another body is `RequestIdReused` (ALREADY_EXISTS),
    // distinct from a taken name.
    let first = s.commit(one(Write::PutIdempotency(rec("first", t(10))))).await.unwrap();
    assert_eq!(
        first,
        Committed { event_seqs: vec![], replayed: Some(Box::new(rec("first", t(0)))) }
    );
    let twin = pool(&acme, "twin");
    let uow = UnitOfWork::new()
        .write(Write::InsertPool(twin.clone()))
        .write(Write::PutIdempotency(rec("first", t(11))));
    assert!(s.commit(uow).await.unwrap().replayed.is_some());
    assert_eq!(s.pool_get(&acme, &twin.pool_id).await.unwrap(), None, "a replay applies nothing");
    let e = s.commit(one(Write::PutIdempotency(rec("second", t(10))))).await.unwrap_err();
    let StoreError::RequestIdReused(m) = &e else { panic!("{e:?}") };
    assert!(m.contains("req-1") && m.contains("different body"), "{m}");
    assert_eq!(Error::from(e).code, ErrorCode::AlreadyExists);
    let p = pool(&acme, "web");
    ok(&s, one(Write::InsertPool(p.clone()))).await;
    let taken = s.commit(one(Write::InsertPool(pool(&acme, "web")))).await.unwrap_err();
    assert!(matches!(taken, StoreError::AlreadyExists(_)), "{taken:?}");

    // After the window, the key is free again: a new create stores its own result.
    ok(&s, one(Write::PutIdempotency(rec("second", t(DAY))))).await;
    assert_eq!(get(t(DAY + 1)).await.unwrap(), Some(rec("second", t(DAY))));
}

async fn failed_unit_of_work_leaves_nothing(s: S) {
    let acme = tenant("acme");
    let p = pool(&acme, "web");
    ok(&s, one(Write::InsertPool(p.clone()))).await;
    let fresh = pool(&acme, "db");
    let ev = event(&acme, "compute.pools.db");
    let mut stale = p.clone();
    stale.generation = 9;
    let uow = UnitOfWork::new()
        .write(Write::InsertPool(fresh.clone()))
        .write(Write::SetQuota {
            pool_id: p.pool_id.clone(),
            resource: QuotaResource::LoadBalancers,
            limit: 3,
        })
        .write(Write::UpdatePool { pool: stale, expected_generation: 5 })
        .event(ev.clone())
        .enqueue(K, fresh.pool_id.as_str(), t(0));
    assert!(matches!(s.commit(uow).await, Err(StoreError::Stale(_))));
    assert_eq!(s.pool_get_any(&fresh.pool_id).await.unwrap(), None);
    assert_eq!(s.quota_list(&p.pool_id).await.unwrap(), vec![]);
    assert_eq!(s.event_list_all(0, 10).await.unwrap(), vec![]);
    assert_eq!(s.work_get(K, fresh.pool_id.as_str()).await.unwrap(), None);

    // An event that fails (duplicate id) takes the state change with it, too.
    ok(&s, UnitOfWork::new().event(ev.clone())).await;
    let uow = UnitOfWork::new().write(Write::InsertPool(fresh.clone())).event(ev);
    assert!(matches!(s.commit(uow).await, Err(StoreError::AlreadyExists(_))));
    assert_eq!(s.pool_get_any(&fresh.pool_id).await.unwrap(), None);

    // And the same unit, valid, lands whole.
    let ev2 = event(&acme, "compute.pools.db");
    let uow = UnitOfWork::new().write(Write::InsertPool(fresh.clone())).event(ev2.clone()).enqueue(
        K,
        fresh.pool_id.as_str(),
        t(0),
    );
    let c = ok(&s, uow).await;
    assert!(s.pool_get_any(&fresh.pool_id).await.unwrap().is_some());
    assert_eq!(s.event_list_all(c.event_seqs[0] - 1, 10).await.unwrap()[0].event_id, ev2.event_id);
    assert!(s.work_get(K, fresh.pool_id.as_str()).await.unwrap().is_some());
}

const K: WorkKind = WorkKind::Substrates;

async fn queue_lifecycle(s: S) {
    let enq = |key: &str, at| Enqueue { kind: K, key: key.into(), not_before: at };
    s.enqueue(enq("a", t(10))).await.unwrap();
    s.enqueue(enq("a", t(5))).await.unwrap(); // earlier wins
    s.enqueue(enq("a", t(50))).await.unwrap(); // later does not move it
    s.enqueue(enq("b", t(20))).await.unwrap();
    s.enqueue(Enqueue { kind: WorkKind::ProviderResources, key: "a".into(), not_before: t(0) })
        .await
        .unwrap();
    let a = s.work_get(K, "a").await.unwrap().unwrap();
    assert_eq!((a.not_before, a.attempts, a.lease_owner.clone()), (t(5), 0, None));
    assert_eq!(s.work_get(K, "zzz").await.unwrap(), None);

    // Only due items, only the kinds asked for, oldest first, at most `max`.
    let kinds = vec![K];
    assert_eq!(s.claim("r1", &kinds, 10, t(1), t(1000)).await.unwrap(), vec![]);
    assert_eq!(s.claim("r1", &kinds, 0, t(100), t(1000)).await.unwrap(), vec![]);
    let got = s.claim("r1", &kinds, 1, t(100), t(1000)).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].key.as_str(), got[0].lease_owner.as_deref(), got[0].lease_until),
        ("a", Some("r1"), Some(t(1000)))
    );
    let got = s.claim("r2", &kinds, 10, t(100), t(1000)).await.unwrap();
    assert_eq!(got.iter().map(|w| w.key.as_str()).collect::<Vec<_>>(), vec!["b"]);
    // All kinds when none is named.
    let got = s.claim("r3", &[], 10, t(100), t(1000)).await.unwrap();
    assert_eq!(got.iter().map(|w| w.kind).collect::<Vec<_>>(), vec![WorkKind::ProviderResources]);

    // Only the holder may act.
    assert!(!s.complete(K, "a", "r2").await.unwrap());
    assert!(!s.fail(K, "a", "r2", "x", t(1)).await.unwrap());
    assert!(!s.requeue(K, "a", "r2", t(1)).await.unwrap());
    assert!(!s.defer(K, "a", "r2", "x", t(1)).await.unwrap());
    assert!(!s.extend(K, "a", "r2", t(5000)).await.unwrap());
    assert!(s.extend(K, "a", "r1", t(5000)).await.unwrap());
    assert_eq!(s.work_get(K, "a").await.unwrap().unwrap().lease_until, Some(t(5000)));

    // Fail: attempts + 1, error kept, due at retry time, lease dropped.
    assert!(s.fail(K, "a", "r1", "provider said no", t(300)).await.unwrap());
    let a = s.work_get(K, "a").await.unwrap().unwrap();
    assert_eq!(
        (a.attempts, a.last_error.as_deref(), a.not_before, a.lease_owner, a.lease_until),
        (1, Some("provider said no"), t(300), None, None)
    );
    assert!(!s.complete(K, "a", "r1").await.unwrap(), "the lease is gone");
    assert_eq!(s.claim("r1", &kinds, 10, t(299), t(1000)).await.unwrap(), vec![]);
    assert_eq!(s.claim("r1", &kinds, 10, t(300), t(1000)).await.unwrap().len(), 1);
    assert!(s.fail(K, "a", "r1", "again", t(400)).await.unwrap());
    assert_eq!(s.work_get(K, "a").await.unwrap().unwrap().attempts, 2);

    // Defer: waiting for the budget is no failure — attempts kept, the reason shown,
    // due at the named time, lease dropped.
    assert_eq!(s.claim("r1", &kinds, 10, t(400), t(1000)).await.unwrap().len(), 1);
    assert!(s.defer(K, "a", "r1", "over budget", t(350)).await.unwrap());
    let a = s.work_get(K, "a").await.unwrap().unwrap();
    assert_eq!(
        (a.attempts, a.last_error.as_deref(), a.not_before, a.lease_owner, a.lease_until),
        (2, Some("over budget"), t(350), None, None)
    );
    assert!(!s.defer(K, "a", "r1", "over budget", t(360)).await.unwrap(), "the lease is gone");

    // Requeue: success with another run wanted; attempts reset.
    assert_eq!(s.claim("r1", &kinds, 10, t(400), t(1000)).await.unwrap().len(), 1);
    assert!(s.requeue(K, "a", "r1", t(900)).await.unwrap());
    let a = s.work_get(K, "a").await.unwrap().unwrap();
    assert_eq!((a.attempts, a.last_error, a.not_before, a.lease_owner), (0, None, t(900), None));

    // Complete removes it.
    assert!(s.complete(K, "b", "r2").await.unwrap());
    assert_eq!(s.work_get(K, "b").await.unwrap(), None);
    assert!(!s.complete(K, "b", "r2").await.unwrap());
}

/// `settle` (one statement for the batch) leaves each row as its own `requeue`, `fail`
/// or `defer` would, lands only where its owner holds the item, and answers per item.
async fn a_settled_batch_is_each_settle_alone(s: S) {
    let kinds = vec![K];
    for (i, key) in ["a", "b", "c", "p", "d"].into_iter().enumerate() {
        s.enqueue(Enqueue { kind: K, key: key.into(), not_before: t(i as i64) }).await.unwrap();
    }
    // Oldest due first: r1 takes a, b, c and p; r2 takes d.
    assert_eq!(s.claim("r1", &kinds, 4, t(10), t(1000)).await.unwrap().len(), 4);
    assert_eq!(s.claim("r2", &kinds, 1, t(10), t(1000)).await.unwrap().len(), 1);
    // p is enqueued again during r1's run, for t(20): that earlier time wins.
    ok(&s, UnitOfWork::new().enqueue(K, "p", t(20))).await;
    let by = |key: &str, owner: &str, how: Settle| Settlement {
        kind: K,
        key: key.into(),
        owner: owner.into(),
        how,
    };
    let batch = vec![
        by("a", "r1", Settle::Requeue { at: t(900) }),
        by("b", "r1", Settle::Fail { error: "boom".into(), at: t(300) }),
        by("c", "r1", Settle::Defer { why: "over budget".into(), at: t(350) }),
        by("d", "r1", Settle::Requeue { at: t(900) }),
        by("p", "r1", Settle::Requeue { at: t(900) }),
    ];
    assert_eq!(s.settle(&batch).await.unwrap(), vec![true, true, true, false, true]);
    let row = |k: &'static str| {
        let s = s.clone();
        async move {
            let w = s.work_get(K, k).await.unwrap().unwrap();
            (w.attempts, w.last_error, w.not_before, w.lease_owner, w.lease_until)
        }
    };
    assert_eq!(row("a").await, (0, None, t(900), None, None));
    assert_eq!(row("b").await, (1, Some("boom".into()), t(300), None, None));
    assert_eq!(row("c").await, (0, Some("over budget".into()), t(350), None, None));
    assert_eq!(row("d").await, (0, None, t(4), Some("r2".into()), Some(t(1000))), "not r1's");
    assert_eq!(row("p").await, (0, None, t(20), None, None));
    // The same item twice (two claims of it): only its holder's settle lands.
    let twice = vec![
        by("d", "r1", Settle::Requeue { at: t(500) }),
        by("d", "r2", Settle::Requeue { at: t(600) }),
    ];
    assert_eq!(s.settle(&twice).await.unwrap(), vec![false, true]);
    assert_eq!(row("d").await, (0, None, t(600), None, None));
}

async fn queue_reenqueue_during_lease_is_kept(s: S) {
    let kinds = vec![K];
    s.enqueue(Enqueue { kind: K, key: "p".into(), not_before: t(0) }).await.unwrap();
    assert_eq!(s.claim("r1", &kinds, 1, t(10), t(1000)).await.unwrap().len(), 1);
    // A change lands while r1 works (through a unit of work, as writers do).
    ok(&s, UnitOfWork::new().enqueue(K, "p", t(20))).await;
    let w = s.work_get(K, "p").await.unwrap().unwrap();
    assert_eq!(w.lease_owner.as_deref(), Some("r1"), "the lease is kept");
    assert_eq!(s.claim("r2", &kinds, 1, t(30), t(1000)).await.unwrap(), vec![], "still leased");
    assert!(s.complete(K, "p", "r1").await.unwrap());
    let w = s.work_get(K, "p").await.unwrap().expect("the new work is not lost");
    assert_eq!((w.lease_owner, w.lease_until), (None, None));
    assert!(w.not_before <= t(20), "due");
    assert_eq!(s.claim("r2", &kinds, 1, t(30), t(1000)).await.unwrap().len(), 1);
    // Without another enqueue, completing removes it.
    assert!(s.complete(K, "p", "r2").await.unwrap());
    assert_eq!(s.work_get(K, "p").await.unwrap(), None);
}

/// Bug 1: an enqueue for a later time that lands while the item is leased (a reconciler
/// scheduling its own next run) used to collapse to "due now" (`MIN(old, new)` with the
/// old, past due time), so the item looped hot. The time asked for survives the lease.
async fn future_enqueue_during_a_lease_keeps_its_time(s: S) {
    let kinds = [K];
    s.enqueue(Enqueue { kind: K, key: "p".into(), not_before: t(0) }).await.unwrap();
    let item = s.claim("r1", &kinds, 1, t(10), t(1000)).await.unwrap().remove(0);
    let fence = item.fence().unwrap();
    ok(&s, UnitOfWork::new().fenced(fence).enqueue(K, "p", t(500))).await;
    assert!(s.complete(K, "p", "r1").await.unwrap());
    let w = s.work_get(K, "p").await.unwrap().expect("kept for the scheduled run");
    assert_eq!((w.not_before, w.lease_owner), (t(500), None));
    assert_eq!(s.claim("r2", &kinds, 1, t(100), t(1000)).await.unwrap(), vec![], "not due yet");
    assert_eq!(s.claim("r2", &kinds, 1, t(500), t(1000)).await.unwrap().len(), 1);

    // Several enqueues during one run: the earliest wins, also over `requeue`'s time.
    s.enqueue(Enqueue { kind: K, key: "p".into(), not_before: t(900) }).await.unwrap();
    s.enqueue(Enqueue { kind: K, key: "p".into(), not_before: t(700) }).await.unwrap();
    assert_eq!(
        s.work_get(K, "p").await.unwrap().unwrap().not_before,
        t(500),
        "the claimed due time"
    );
    assert!(s.requeue(K, "p", "r2", t(2000)).await.unwrap());
    assert_eq!(s.work_get(K, "p").await.unwrap().unwrap().not_before, t(700));
    // A failed run: the earlier of the backoff and what was enqueued meanwhile.
    assert_eq!(s.claim("r3", &kinds, 1, t(700), t(1000)).await.unwrap().len(), 1);
    s.enqueue(Enqueue { kind: K, key: "p".into(), not_before: t(800) }).await.unwrap();
    assert!(s.fail(K, "p", "r3", "boom", t(5000)).await.unwrap());
    let w = s.work_get(K, "p").await.unwrap().unwrap();
    assert_eq!((w.not_before, w.attempts), (t(800), 1));
    // A takeover starts a run after every enqueue so far: the pending time is dropped.
    assert_eq!(s.claim("r4", &kinds, 1, t(800), t(900)).await.unwrap().len(), 1);
    s.enqueue(Enqueue { kind: K, key: "p".into(), not_before: t(3000) }).await.unwrap();
    assert_eq!(s.claim("r5", &kinds, 1, t(901), t(2000)).await.unwrap().len(), 1);
    assert!(s.complete(K, "p", "r5").await.unwrap());
    assert_eq!(s.work_get(K, "p").await.unwrap(), None);
}

/// Bug 2: a unit of work fenced by a work lease commits only while its owner holds the
/// lease; after a takeover the old holder's commit fails whole with `LeaseLost`.
async fn fenced_commits_need_the_lease(s: S) {
    let acme = tenant("acme");
    let kinds = [K];
    s.enqueue(Enqueue { kind: K, key: "p".into(), not_before: t(0) }).await.unwrap();
    let mine = s.claim("r1", &kinds, 1, t(10), t(100)).await.unwrap().remove(0);
    let fence = mine.fence().unwrap();
    let p1 = pool(&acme, "one");
    ok(&s, UnitOfWork::new().fenced(fence.clone()).write(Write::InsertPool(p1.clone()))).await;

    // r1 stalls past its lease; r2 takes the item over.
    let theirs = s.claim("r2", &kinds, 1, t(101), t(200)).await.unwrap().remove(0);
    let p2 = pool(&acme, "two");
    let ev = event(&acme, "compute.pools.two");
    let late = UnitOfWork::new()
        .fenced(fence.clone())
        .write(Write::InsertPool(p2.clone()))
        .event(ev)
        .enqueue(WorkKind::Clusters, "c", t(0));
    let e = s.commit(late).await.unwrap_err();
    assert!(matches!(&e, StoreError::LeaseLost(m) if m.contains("r1")), "{e:?}");
    assert_eq!(Error::from(e).code, ErrorCode::Aborted);
    assert_eq!(s.pool_get_any(&p2.pool_id).await.unwrap(), None, "nothing of it applied");
    assert_eq!(s.event_list_all(0, 10).await.unwrap(), vec![]);
    assert_eq!(s.work_get(WorkKind::Clusters, "c").await.unwrap(), None);
    // A fence alone checks too; the new holder commits.
    let only = UnitOfWork::new().fenced(fence);
    assert!(matches!(s.commit(only).await, Err(StoreError::LeaseLost(_))));
    ok(&s, UnitOfWork::new().fenced(theirs.fence().unwrap()).write(Write::InsertPool(p2))).await;
    // Completed: no one holds it any more.
    assert!(s.complete(K, "p", "r2").await.unwrap());
    let after = UnitOfWork::new().fenced(theirs.fence().unwrap());
    assert!(matches!(s.commit(after).await, Err(StoreError::LeaseLost(_))));

    // Singleton leases fence the same way: the relay's cursor moves only for the holder.
    assert!(s.lease_acquire(LEASE_OUTBOX_RELAY, "a", t(0), t(100)).await.unwrap());
    let relay = |owner: &str, seq| {
        UnitOfWork::new()
            .fenced(Fence::singleton(LEASE_OUTBOX_RELAY, owner))
            .write(Write::AdvanceRelayCursor { publisher: "nats".into(), seq })
    };
    ok(&s, relay("a", 5)).await;
    assert!(s.lease_acquire(LEASE_OUTBOX_RELAY, "b", t(101), t(200)).await.unwrap());
    assert!(matches!(s.commit(relay("a", 9)).await, Err(StoreError::LeaseLost(_))));
    assert_eq!(s.relay_cursor("nats").await.unwrap(), 5);
    ok(&s, relay("b", 7)).await;
    assert_eq!(s.relay_cursor("nats").await.unwrap(), 7);
}

/// Bug 6: PostgreSQL errors were read with SQLite's "busy" test (22021 & 0xff == 5), so a
/// bad byte sequence was retried ten times and reported `Unavailable`. It is final, and
/// its database text stays out of what callers see (bug 13).
async fn data_errors_are_final_not_busy(s: S) {
    let acme = tenant("acme");
    let bad = event(&acme, "compute.pools.\0nul");
    match (s.backend(), s.commit(UnitOfWork::new().event(bad)).await) {
        (sea_orm::DbBackend::Postgres, Err(StoreError::Internal(d))) => {
            assert!(d.for_logs().contains("0x00"), "{d:?}");
            let shown = StoreError::Internal(d).to_string();
            assert_eq!(shown, "internal store error");
        }
        // SQLite stores the NUL as text: nothing to refuse.
        (sea_orm::DbBackend::Sqlite, Ok(_)) => {}
        (backend, other) => panic!("{backend:?}: {other:?}"),
    }
}

async fn queue_expired_lease_is_taken_over(s: S) {
    let kinds = vec![K];
    s.enqueue(Enqueue { kind: K, key: "p".into(), not_before: t(0) }).await.unwrap();
    // r1 claims until t(100) and "crashes".
    assert_eq!(s.claim("r1", &kinds, 1, t(10), t(100)).await.unwrap().len(), 1);
    assert_eq!(s.claim("r2", &kinds, 1, t(99), t(200)).await.unwrap(), vec![], "lease still valid");
    let got = s.claim("r2", &kinds, 1, t(101), t(200)).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].lease_owner.as_deref(), Some("r2"));
    // The crashed owner coming back can no longer touch it.
    assert!(!s.complete(K, "p", "r1").await.unwrap());
    assert!(!s.extend(K, "p", "r1", t(500)).await.unwrap());
    assert_eq!(s.work_get(K, "p").await.unwrap().unwrap().lease_owner.as_deref(), Some("r2"));
    assert!(s.complete(K, "p", "r2").await.unwrap());
}

async fn concurrent_claimers_never_share_an_item(s: S) {
    const ITEMS: usize = 60;
    const CLAIMERS: usize = 8;
    let mut uow = UnitOfWork::new();
    for i in 0..ITEMS {
        uow = uow.enqueue(K, format!("k{i:03}"), t(i as i64));
    }
    ok(&s, uow).await;
    let kinds = vec![K];
    let mut tasks = Vec::new();
    for c in 0..CLAIMERS {
        let s = s.clone();
        let kinds = kinds.clone();
        tasks.push(tokio::spawn(async move {
            let owner = format!("r{c}");
            let mut mine = Vec::new();
            // Bounded: at most ITEMS rounds; leases outlive the test, so nothing is
            // claimable twice unless two claimers held it at once.
            for _ in 0..ITEMS {
                let got = s.claim(&owner, &kinds, 3, t(10_000), t(1_000_000)).await.unwrap();
                if got.is_empty() {
                    break;
                }
                for w in got {
                    assert_eq!(w.lease_owner.as_deref(), Some(owner.as_str()));
                    mine.push(w.key);
                }
                tokio::task::yield_now().await;
            }
            (owner, mine)
        }));
    }
    let mut seen = HashSet::new();
    let mut total = 0;
    for t in tasks {
        let (owner, keys) = t.await.unwrap();
        for k in keys {
            total += 1;
            assert!(seen.insert(k.clone()), "{k} claimed twice (second time by {owner})");
            let w = s.work_get(K, &k).await.unwrap().unwrap();
            assert_eq!(w.lease_owner.as_deref(), Some(owner.as_str()));
        }
    }
    assert_eq!((total, seen.len()), (ITEMS, ITEMS));
}

async fn concurrent_quota_bookings_never_overbook(s: S) {
    let acme = tenant("acme");
    let p = pool(&acme, "web");
    let r = QuotaResource::LoadBalancers;
    ok(
        &s,
        UnitOfWork::new().write(Write::InsertPool(p.clone())).write(Write::SetQuota {
            pool_id: p.pool_id.clone(),
            resource: r,
            limit: 10,
        }),
    )
    .await;
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let s = s.clone();
        let pool_id = p.pool_id.clone();
        tasks.push(tokio::spawn(async move {
            s.commit(UnitOfWork::new().write(Write::BookQuota { pool_id, resource: r })).await
        }));
    }
    let (mut won, mut refused) = (0, 0);
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => won += 1,
            Err(StoreError::QuotaExhausted(_)) => refused += 1,
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    assert_eq!((won, refused), (10, 40));
    assert_eq!(s.quota_get(&p.pool_id, r).await.unwrap().unwrap().used, 10);
}

async fn concurrent_cas_has_one_winner(s: S) {
    let acme = tenant("acme");
    let p = pool(&acme, "web");
    ok(&s, one(Write::InsertPool(p.clone()))).await;
    let mut tasks = Vec::new();
    for i in 0..20u32 {
        let s = s.clone();
        let mut next = p.clone();
        next.generation = 2;
        next.policy.flavors = vec![bc_domain::policy::Flavor {
            name: format!("f{i}"),
            size: "s-1vcpu-2gb".into(),
            count: Some(1),
            auto_scale: None,
            labels: Default::default(),
            taints: vec![],
        }];
        tasks.push(tokio::spawn(async move {
            let r = s
                .commit(one(Write::UpdatePool { pool: next.clone(), expected_generation: 1 }))
                .await;
            (r, next)
        }));
    }
    let mut winners = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            (Ok(_), next) => winners.push(next),
            (Err(StoreError::Stale(_)), _) => {}
            (Err(e), _) => panic!("unexpected {e:?}"),
        }
    }
    assert_eq!(winners.len(), 1);
    // The stored row is exactly the winner's: no lost or mixed update.
    assert_eq!(s.pool_get_any(&p.pool_id).await.unwrap().as_ref(), winners.first());
}

/// Bug 14: `seq` follows commit order, so a relay reading `seq > last` never skips an
/// event. Writers commit batches of events at once while a relay polls and advances its
/// cursor to the largest `seq` it saw; at the end it must have seen every event. Without
/// the event lock on PostgreSQL, a transaction that took a lower `seq` and committed
/// after a higher one is skipped (checked: the test fails with the lock removed). The
/// writers' commits go ungrouped, each its own transaction, so they overlap at the
/// database as commits of separate processes do (grouped, one store sends one batch at a
/// time, and the test passed without the lock).
async fn concurrent_events_are_visible_in_seq_order(s: S) {
    const WRITERS: usize = 8;
    const COMMITS: usize = 25;
    const PER_COMMIT: usize = 4;
    let acme = tenant("acme");
    let done = Arc::new(AtomicBool::new(false));
    let relay = {
        let (s, done) = (s.clone(), done.clone());
        tokio::spawn(async move {
            let (mut last, mut seen, mut polls) = (0u64, Vec::new(), 0u32);
            // Bounded: at most this many polls; the last one starts after every commit.
            for _ in 0..200_000 {
                let finished = done.load(Ordering::SeqCst);
                let batch = s.event_list_all(last, 100).await.unwrap();
                polls += 1;
                if let Some(e) = batch.last() {
                    last = e.seq;
                }
                let drained = batch.is_empty();
                seen.extend(batch.into_iter().map(|e| e.seq));
                if finished && drained {
                    break;
                }
                tokio::task::yield_now().await;
            }
            (seen, polls)
        })
    };
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| {
            let (s, acme) = (s.ungrouped(), acme.clone());
            tokio::spawn(async move {
                let mut mine = Vec::new();
                for _ in 0..COMMITS {
                    let mut uow = UnitOfWork::new();
                    for _ in 0..PER_COMMIT {
                        uow = uow.event(event(&acme, "compute.pools.x"));
                    }
                    let seqs = s.commit(uow).await.unwrap().event_seqs;
                    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "in order within a commit");
                    mine.extend(seqs);
                }
                mine
            })
        })
        .collect();
    let mut committed = Vec::new();
    for w in writers {
        committed.extend(w.await.unwrap());
    }
    done.store(true, Ordering::SeqCst);
    let (mut seen, polls) = relay.await.unwrap();
    committed.sort_unstable();
    committed.dedup();
    assert_eq!(committed.len(), WRITERS * COMMITS * PER_COMMIT, "every seq is unique");
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "the relay reads in seq order");
    assert!(polls > 1, "the relay polled while writers ran");
    seen.sort_unstable();
    let missed: Vec<_> = committed.iter().filter(|q| seen.binary_search(q).is_err()).collect();
    assert!(missed.is_empty(), "the relay skipped events that committed late: {missed:?}");
}

async fn closed_pool_is_unavailable(s: S) {
    s.connection().close_by_ref().await.unwrap();
    let e = s.pool_get_any(&id()).await.unwrap_err();
    assert!(matches!(e, StoreError::Unavailable(_)), "{e:?}");
    let e = s.commit(one(Write::InsertPool(pool(&tenant("acme"), "web")))).await.unwrap_err();
    assert!(matches!(e, StoreError::Unavailable(_)), "{e:?}");
    assert!(matches!(s.ready().await, Err(StoreError::Unavailable(_))));
    assert!(matches!(s.claim("r", &[], 1, t(0), t(1)).await, Err(StoreError::Unavailable(_))));
}

#[tokio::test]
async fn unreachable_database_is_unavailable() {
    let dir = TempDir::new();
    let url = format!("sqlite://{}?mode=rw", dir.0.join("no/such/dir/x.db").display());
    let e = SqlStore::connect(&url).await.unwrap_err();
    assert!(matches!(e, StoreError::Unavailable(_)), "{e:?}");
}

async fn concurrent_takeover_of_expired_leases(s: S) {
    const ITEMS: usize = 40;
    let mut uow = UnitOfWork::new();
    for i in 0..ITEMS {
        uow = uow.enqueue(K, format!("k{i:03}"), t(0));
    }
    ok(&s, uow).await;
    let kinds = vec![K];
    // A replica claims everything until t(100), then crashes.
    let crashed = s.claim("crashed", &kinds, ITEMS as u32, t(1), t(100)).await.unwrap();
    assert_eq!(crashed.len(), ITEMS);
    let mut tasks = Vec::new();
    for c in 0..6 {
        let (s, kinds) = (s.clone(), kinds.clone());
        tasks.push(tokio::spawn(async move {
            let owner = format!("r{c}");
            let mut done = Vec::new();
            for _ in 0..ITEMS {
                let got = s.claim(&owner, &kinds, 4, t(101), t(1_000_000)).await.unwrap();
                if got.is_empty() {
                    break;
                }
                for w in got {
                    // The crashed replica, back, cannot complete what was taken over.
                    assert!(!s.complete(K, &w.key, "crashed").await.unwrap());
                    assert!(s.complete(K, &w.key, &owner).await.unwrap());
                    done.push(w.key);
                }
            }
            done
        }));
    }
    let mut seen = HashSet::new();
    for task in tasks {
        for k in task.await.unwrap() {
            assert!(seen.insert(k.clone()), "{k} taken over twice");
        }
    }
    assert_eq!(seen.len(), ITEMS);
    assert_eq!(s.claim("late", &kinds, 10, t(2_000_000), t(3_000_000)).await.unwrap(), vec![]);
}

async fn concurrent_readers_never_see_half_a_commit(s: S) {
    const WRITERS: usize = 4;
    const PER_WRITER: usize = 10;
    let acme = tenant("acme");
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (s, acme) = (s.clone(), acme.clone());
        writers.push(tokio::spawn(async move {
            for i in 0..PER_WRITER {
                let p = pool(&acme, &format!("p-{w}-{i}"));
                let mut ev = event(&acme, &subjects::pool(&p.pool_id));
                ev.data = serde_json::json!({ "poolId": p.pool_id.as_str() });
                let uow = UnitOfWork::new().write(Write::InsertPool(p.clone())).event(ev).enqueue(
                    K,
                    p.pool_id.as_str(),
                    t(0),
                );
                s.commit(uow).await.unwrap();
            }
        }));
    }
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (s, done) = (s.clone(), done.clone());
            tokio::spawn(async move {
                let mut checked = 0;
                // Passes while the writers run, and one more after they finished, so the
                // checks below run on every event at least once. Bounded all the same.
                for _ in 0..10_000 {
                    let finished = done.load(Ordering::SeqCst);
                    for e in s.event_list_all(0, 1000).await.unwrap() {
                        let id: bc_domain::PoolId =
                            e.data["poolId"].as_str().unwrap().parse().unwrap();
                        // Event visible ⇒ its state change and its work item are too.
                        assert!(s.pool_get_any(&id).await.unwrap().is_some(), "event without pool");
                        assert!(s.work_get(K, id.as_str()).await.unwrap().is_some());
                        checked += 1;
                    }
                    let page = s
                        .pool_list(
                            &tenant("acme"),
                            &ReadScope::Tenant,
                            false,
                            &PageRequest::first(500),
                        )
                        .await
                        .unwrap();
                    let events = s.event_list_all(0, 1000).await.unwrap();
                    let with_event: HashSet<String> =
                        events.iter().map(|e| e.subject.clone()).collect();
                    for p in page.items {
                        // Pool visible ⇒ its event is too (read after the pool list).
                        assert!(
                            with_event.contains(&subjects::pool(&p.pool_id)),
                            "pool without event"
                        );
                    }
                    if finished {
                        break;
                    }
                    tokio::task::yield_now().await;
                }
                checked
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    done.store(true, Ordering::SeqCst);
    for r in readers {
        let checked = r.await.unwrap();
        assert!(checked >= WRITERS * PER_WRITER, "only {checked} events were checked");
    }
    assert_eq!(s.event_list_all(0, 1000).await.unwrap().len(), WRITERS * PER_WRITER);
}

/// `release` drops the lease and leaves the entry due with its attempts and error;
/// `next_due` names when the next entry of a kind becomes claimable, leases included.
async fn queue_release_and_next_due(s: S) {
    let kinds = vec![K];
    assert_eq!(s.next_due(K).await.unwrap(), None);
    s.enqueue(Enqueue { kind: K, key: "a".into(), not_before: t(100) }).await.unwrap();
    s.enqueue(Enqueue { kind: K, key: "b".into(), not_before: t(300) }).await.unwrap();
    s.enqueue(Enqueue { kind: WorkKind::Clusters, key: "c".into(), not_before: t(5) })
        .await
        .unwrap();
    assert_eq!(s.next_due(K).await.unwrap(), Some(t(100)));
    assert_eq!(s.next_due(WorkKind::Clusters).await.unwrap(), Some(t(5)));

    // Leased until 1000: claimable again just after the lease ends.
    assert_eq!(s.claim("r1", &kinds, 1, t(100), t(1000)).await.unwrap().len(), 1);
    assert_eq!(s.next_due(K).await.unwrap(), Some(t(300)));
    assert_eq!(s.claim("r2", &kinds, 1, t(300), t(2000)).await.unwrap().len(), 1);
    assert_eq!(s.next_due(K).await.unwrap(), Some(t(1001)), "a's lease ends first");

    // Release: only by the holder; lease gone, due at once, attempts and error kept.
    assert!(s.fail(K, "a", "r1", "boom", t(150)).await.unwrap());
    assert_eq!(s.claim("r1", &kinds, 1, t(150), t(1000)).await.unwrap().len(), 1);
    assert!(!s.release(K, "a", "r2").await.unwrap());
    assert!(s.release(K, "a", "r1").await.unwrap());
    let a = s.work_get(K, "a").await.unwrap().unwrap();
    assert_eq!(
        (a.lease_owner, a.lease_until, a.not_before, a.attempts, a.last_error.as_deref()),
        (None, None, t(150), 1, Some("boom"))
    );
    assert!(!s.release(K, "a", "r1").await.unwrap(), "nothing left to release");
    let got = s.claim("r3", &kinds, 5, t(151), t(900)).await.unwrap();
    assert_eq!(got.iter().map(|w| w.key.as_str()).collect::<Vec<_>>(), vec!["a"]);
}

/// A budget is written by compare-and-swap on its version: the first write inserts,
/// a write with a stale version (or a second first write) changes nothing.
async fn budgets_are_compare_and_swap(s: S) {
    use bc_domain::rules::budget::BudgetState;
    assert_eq!(s.budget_get("acct_a").await.unwrap(), None);
    let one = BudgetState { minute_tat: t(10), hour_tat: t(20), paused_until: None };
    assert!(s.budget_put("acct_a", None, &one).await.unwrap());
    assert!(!s.budget_put("acct_a", None, &one).await.unwrap(), "the row exists");
    let got = s.budget_get("acct_a").await.unwrap().unwrap();
    assert_eq!((got.state, got.version), (one, 1));
    let two = BudgetState { minute_tat: t(11), hour_tat: t(21), paused_until: Some(t(99)) };
    assert!(!s.budget_put("acct_a", Some(7), &two).await.unwrap(), "stale version");
    assert!(s.budget_put("acct_a", Some(1), &two).await.unwrap());
    let got = s.budget_get("acct_a").await.unwrap().unwrap();
    assert_eq!((got.state, got.version), (two, 2));
    assert!(!s.budget_put("acct_a", Some(1), &one).await.unwrap(), "version 1 is gone");
    assert_eq!(s.budget_get("acct_b").await.unwrap(), None, "keys are apart");
}

/// Writers racing on one budget, each reading, deciding with `rules::budget` and
/// writing by compare-and-swap (retrying when beaten), grant exactly what the budget
/// holds: never more, however they interleave.
async fn concurrent_budget_takers_never_overspend(s: S) {
    use bc_domain::rules::budget::{self, BudgetConfig, WindowLimit};
    const TAKERS: usize = 6;
    // 20 at once (a burst of 19 plus one), then nothing for a minute.
    let config = BudgetConfig {
        minute: WindowLimit::new(20, 60_000, 19),
        hour: WindowLimit::new(1_000, 3_600_000, 999),
    };
    let tasks: Vec<_> = (0..TAKERS)
        .map(|_| {
            let s = s.clone();
            tokio::spawn(async move {
                let mut granted = 0;
                for _ in 0..10 {
                    loop {
                        let cur = s.budget_get("acct_race").await.unwrap();
                        let state = cur.map(|c| c.state).unwrap_or_default();
                        let Ok(next) = budget::acquire(&config, &state, t(0), 1) else { break };
                        if s.budget_put("acct_race", cur.map(|c| c.version), &next).await.unwrap() {
                            granted += 1;
                            break;
                        }
                    }
                }
                granted
            })
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    assert_eq!(total, 20, "exactly the budget, across {TAKERS} racing takers");
}
