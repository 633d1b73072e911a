//! The store suite: every repository method and every `Write` variant, the atomicity of
//! a unit of work, and the work queue's leases, run against SQLite in memory, a SQLite
//! file and PostgreSQL (see `common::suite!`).
//!
//! Invariant checked: the module contract of `bc_domain::ports::store`. No test sleeps or
//! times anything; concurrency tests count outcomes, and every loop is bounded.

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use bc_domain::StoreError;
use bc_domain::model::*;
use bc_domain::policy::{AutoScale, PoolPolicy, Scale, UpgradePolicy};
use bc_domain::ports::*;
use bc_domain::{NodePoolState, ResourceState};
use bc_store::SqlStore;
use common::*;

suite!(
    ready_and_migrations_are_idempotent,
    pools_names_lists_and_archive,
    pool_updates_are_compare_and_swap,
    quotas_book_and_release,
    accounts_live_names_and_soft_delete,
    substrates_put_and_list_by_cluster,
    clusters_desired_and_observed,
    node_pools_desired_and_observed,
    load_balancers_filters_and_status,
    nodes_and_tokens,
    bookings_count_active,
    billing_intervals_are_idempotent,
    events_and_idempotency,
    failed_unit_of_work_leaves_nothing,
    queue_lifecycle,
    queue_reenqueue_during_lease_is_kept,
    queue_expired_lease_is_taken_over,
    concurrent_claimers_never_share_an_item,
    concurrent_quota_bookings_never_overbook,
    concurrent_cas_has_one_winner,
    concurrent_events_get_unique_increasing_seqs,
    concurrent_takeover_of_expired_leases,
    concurrent_readers_never_see_half_a_commit,
    closed_pool_is_unavailable,
);

type S = Arc<SqlStore>;

async fn ok(s: &S, uow: UnitOfWork) -> Committed {
    s.commit(uow).await.expect("commit")
}

fn one(w: Write) -> UnitOfWork {
    UnitOfWork::new().write(w)
}

async fn ready_and_migrations_are_idempotent(s: S) {
    s.ready().await.unwrap();
    s.migrate().await.unwrap();
    s.ready().await.unwrap();
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
    assert_eq!(s.pool_get(&web.pool_id).await.unwrap(), Some(web.clone()));
    assert_eq!(s.pool_get(&id()).await.unwrap(), None);
    assert_eq!(s.pool_find_by_name(&acme, &name("db")).await.unwrap(), Some(db.clone()));
    assert_eq!(s.pool_find_by_name(&other, &name("db")).await.unwrap(), None);

    // The name is taken among the tenant's active pools; nothing of the UoW stays.
    let dup = pool(&acme, "web");
    let err = s.commit(one(Write::InsertPool(dup.clone()))).await.unwrap_err();
    assert!(matches!(err, StoreError::AlreadyExists(ref m) if m.contains("web")), "{err:?}");
    assert_eq!(s.pool_get(&dup.pool_id).await.unwrap(), None);
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
    let active = s.pool_list(&acme, false, &PageRequest::first(10)).await.unwrap();
    assert_eq!(active.items, vec![db.clone(), web2.clone()]);
    assert_eq!(active.next_after, None);
    let all = s.pool_list(&acme, true, &PageRequest::first(10)).await.unwrap();
    assert_eq!(all.items, vec![archived.clone(), db.clone(), web2.clone()]);
    let mut seen = vec![];
    let mut page = PageRequest::first(1);
    for _ in 0..10 {
        let p = s.pool_list(&acme, true, &page).await.unwrap();
        assert!(p.items.len() <= 1);
        seen.extend(p.items);
        match p.next_after {
            Some(a) => page.after = Some(a),
            None => break,
        }
    }
    assert_eq!(seen, all.items);
    let two = s.pool_list(&acme, true, &PageRequest::first(2)).await.unwrap();
    assert_eq!(two.next_after.as_deref(), Some(db.pool_id.as_str()));
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
    assert_eq!(s.pool_get(&p.pool_id).await.unwrap(), Some(p.clone()));
    ok(&s, one(Write::UpdatePool { pool: next.clone(), expected_generation: 1 })).await;
    assert_eq!(s.pool_get(&p.pool_id).await.unwrap(), Some(next.clone()));
    // The old generation is now stale.
    let again = s.commit(one(Write::UpdatePool { pool: next, expected_generation: 1 })).await;
    assert!(matches!(again, Err(StoreError::Stale(_))));
}

async fn quotas_book_and_release(s: S) {
    let acme = tenant("acme");
    let p = pool(&acme, "web");
    ok(&s, one(Write::InsertPool(p.clone()))).await;
    let r = QuotaResource::LoadBalancers;
    let book = || one(Write::BookQuota { pool_id: p.pool_id.clone(), resource: r });
    let release = || one(Write::ReleaseQuota { pool_id: p.pool_id.clone(), resource: r });

    // No row: nothing to book, and the message says so; release is a no-op.
    match s.commit(book()).await {
        Err(StoreError::Conflict(m)) => assert!(m.contains("no quota"), "{m}"),
        other => panic!("{other:?}"),
    }
    ok(&s, release()).await;
    assert_eq!(s.quota_get(&p.pool_id, r).await.unwrap(), None);
    assert_eq!(s.quota_list(&p.pool_id).await.unwrap(), vec![]);

    ok(&s, one(Write::SetQuota { pool_id: p.pool_id.clone(), resource: r, limit: 2 })).await;
    ok(&s, book()).await;
    ok(&s, book()).await;
    match s.commit(book()).await {
        Err(StoreError::Conflict(m)) => {
            assert!(m.contains("exhausted") && m.contains(p.pool_id.as_str()), "{m}")
        }
        other => panic!("{other:?}"),
    }
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
    for _ in 0..4 {
        ok(&s, release()).await;
    }
    assert_eq!(s.quota_get(&p.pool_id, r).await.unwrap().unwrap().used, 0);
    // A quota for a pool that does not exist.
    let res = s.commit(one(Write::SetQuota { pool_id: id(), resource: r, limit: 1 })).await;
    assert!(matches!(res, Err(StoreError::NotFound(_))), "{res:?}");
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
    assert_eq!(s.account_get(&a.provider_account_id).await.unwrap(), Some(a.clone()));
    let dup = s.commit(one(Write::InsertAccount(account(&acme, "main")))).await;
    assert!(matches!(dup, Err(StoreError::AlreadyExists(_))), "{dup:?}");
    // Another tenant may use the name.
    ok(&s, one(Write::InsertAccount(account(&tenant("other"), "main")))).await;

    let first = s.account_list(&acme, &PageRequest::first(1)).await.unwrap();
    assert_eq!(first.items, vec![a.clone()]);
    let rest = s
        .account_list(&acme, &PageRequest { after: first.next_after.clone(), limit: 1 })
        .await
        .unwrap();
    assert_eq!((rest.items, rest.next_after), (vec![b.clone()], None));

    let del = Write::DeleteAccount { provider_account_id: a.provider_account_id.clone(), at: t(9) };
    ok(&s, one(del.clone())).await;
    ok(&s, one(del)).await;
    let got = s.account_get(&a.provider_account_id).await.unwrap().unwrap();
    assert_eq!(got.deleted_at, Some(t(9)));
    assert_eq!(s.account_list(&acme, &PageRequest::first(10)).await.unwrap().items, vec![b]);
    ok(&s, one(Write::InsertAccount(account(&acme, "main")))).await;
    let missing = s
        .commit(one(Write::DeleteAccount { provider_account_id: missing_account(), at: t(1) }))
        .await;
    assert!(matches!(missing, Err(StoreError::NotFound(_))));
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
    assert_eq!(s.substrate_get(&p1.pool_id).await.unwrap(), Some(s1.clone()));
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
    assert_eq!(s.substrate_get(&p1.pool_id).await.unwrap(), Some(s1b.clone()));
    assert_eq!(s.substrate_list_by_cluster(&c.cluster_id).await.unwrap(), vec![s1b, s2]);
    assert_eq!(s.substrate_get(&id()).await.unwrap(), None);
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
    assert_eq!(s.cluster_get(&c1.cluster_id).await.unwrap(), Some(c1.clone()));
    let dup = s.commit(one(Write::InsertCluster(cluster(&a, "alpha")))).await;
    assert!(matches!(dup, Err(StoreError::AlreadyExists(_))), "{dup:?}");
    let orphan = cluster(&account(&acme, "ghost"), "x");
    assert!(matches!(
        s.commit(one(Write::InsertCluster(orphan))).await,
        Err(StoreError::NotFound(_))
    ));

    let all = s.cluster_list(&acme, None, &PageRequest::first(10)).await.unwrap();
    assert_eq!(all.items, vec![c1.clone(), c2.clone()]);
    let of_b =
        s.cluster_list(&acme, Some(&b.provider_account_id), &PageRequest::first(10)).await.unwrap();
    assert_eq!(of_b.items, vec![c2.clone()]);
    assert_eq!(
        s.cluster_list(&tenant("other"), None, &PageRequest::first(10)).await.unwrap().items,
        vec![]
    );

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
    assert_eq!(s.cluster_get(&c1.cluster_id).await.unwrap(), Some(d.clone()));

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
    let got = s.cluster_get(&c1.cluster_id).await.unwrap().unwrap();
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
    assert_eq!(s.node_pool_get(&n2.node_pool_id).await.unwrap(), Some(n2.clone()));
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
        .node_pool_list_by_cluster(&c.cluster_id, &PageRequest { after: p1.next_after, limit: 1 })
        .await
        .unwrap();
    assert_eq!((p2.items, p2.next_after), (vec![n2.clone()], None));

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
    assert_eq!(s.node_pool_get(&n1.node_pool_id).await.unwrap(), Some(d.clone()));

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
    let got = s.node_pool_get(&n1.node_pool_id).await.unwrap().unwrap();
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
    assert_eq!(s.load_balancer_get(&l1.load_balancer_id).await.unwrap(), Some(l1.clone()));
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
        async move { s.load_balancer_list(&acme, &f, &PageRequest::first(10)).await.unwrap().items }
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
        .load_balancer_list(&acme, &LoadBalancerFilter::default(), &PageRequest::first(2))
        .await
        .unwrap();
    assert_eq!(page.next_after.as_deref(), Some(l2.load_balancer_id.as_str()));

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
    assert_eq!(s.load_balancer_get(&l1.load_balancer_id).await.unwrap(), Some(d.clone()));

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
    let got = s.load_balancer_get(&l1.load_balancer_id).await.unwrap().unwrap();
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
    assert_eq!(
        (page.items, page.next_after.as_deref()),
        (vec![n1.clone()], Some(n1.node_id.as_str()))
    );

    // Re-join replaces the node of that name.
    let mut rejoin = node(&p.pool_id, "node-a");
    rejoin.bcd_version = "0.2.0".into();
    ok(&s, one(Write::PutNode(rejoin.clone()))).await;
    assert_eq!(s.node_find_by_name(&p.pool_id, "node-a").await.unwrap(), Some(rejoin.clone()));
    assert_eq!(s.node_get(&n1.node_id).await.unwrap(), None);
    assert!(matches!(
        s.commit(one(Write::PutNode(node(&id(), "x")))).await,
        Err(StoreError::NotFound(_))
    ));

    ok(&s, one(Write::Heartbeat { node_id: rejoin.node_id.clone(), at: t(77) })).await;
    assert_eq!(s.node_get(&rejoin.node_id).await.unwrap().unwrap().last_heartbeat_at, Some(t(77)));
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
    assert!(matches!(
        s.commit(one(Write::RevokeApiToken { token_id: id(), at: t(1) })).await,
        Err(StoreError::NotFound(_))
    ));
}

async fn bookings_count_active(s: S) {
    let acme = tenant("acme");
    let p = pool(&acme, "web");
    ok(&s, one(Write::InsertPool(p.clone()))).await;
    let b = |ends_at| Booking {
        booking_id: id(),
        tenant_id: acme.clone(),
        pool_id: p.pool_id.clone(),
        node_name: Some("node-a".into()),
        state: BookingState::Active,
        created_at: t(0),
        ends_at,
        ended_at: None,
    };
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
    let got = s.booking_get(&ended.booking_id).await.unwrap().unwrap();
    assert_eq!((got.state, got.ended_at), (BookingState::Ended, Some(t(10))));
    assert_eq!(s.booking_count_active(&p.pool_id, t(50)).await.unwrap(), 2);
    assert_eq!(s.booking_count_active(&p.pool_id, t(100)).await.unwrap(), 1);
    let all = s.booking_list(&p.pool_id, &PageRequest::first(10)).await.unwrap();
    assert_eq!(all.items.len(), 3);
    assert_eq!(all.items[0], open);
    assert_eq!(s.booking_get(&id()).await.unwrap(), None);
    assert!(matches!(
        s.commit(one(Write::EndBooking { booking_id: id(), at: t(1) })).await,
        Err(StoreError::NotFound(_))
    ));
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
    let got = s.billing_list(&acme, t(0), t(1000), m).await.unwrap();
    let mut first = iv("lb_a", t(0));
    first.end = Some(t(100));
    assert_eq!(got, vec![first.clone(), iv("lb_b", t(10)), iv("lb_a", t(200))]);
    assert_eq!(s.billing_list(&acme, t(0), t(1000), None).await.unwrap().len(), 4);
    // Overlap is half-open: [0,100) does not overlap [100, 150).
    assert_eq!(s.billing_list(&acme, t(100), t(150), m).await.unwrap(), vec![iv("lb_b", t(10))]);
    assert_eq!(s.billing_list(&acme, t(0), t(5), m).await.unwrap(), vec![first]);
    assert_eq!(s.billing_list(&tenant("other"), t(0), t(1000), None).await.unwrap(), vec![]);
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
    assert!(matches!(
        s.commit(one(Write::PutIdempotency(rec("r1", t(5))))).await,
        Err(StoreError::AlreadyExists(_))
    ));
    assert_eq!(
        s.idempotency_get(&acme, "pools.create", "r1").await.unwrap(),
        Some(rec("r1", t(0)))
    );
    assert_eq!(s.idempotency_get(&other, "pools.create", "r1").await.unwrap(), None);
    assert_eq!(s.idempotency_purge(t(50)).await.unwrap(), 1);
    assert_eq!(s.idempotency_get(&acme, "pools.create", "r1").await.unwrap(), None);
    assert!(s.idempotency_get(&acme, "pools.create", "r2").await.unwrap().is_some());
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
        .enqueue("kubernetes.substrates", fresh.pool_id.as_str(), t(0));
    assert!(matches!(s.commit(uow).await, Err(StoreError::Stale(_))));
    assert_eq!(s.pool_get(&fresh.pool_id).await.unwrap(), None);
    assert_eq!(s.quota_list(&p.pool_id).await.unwrap(), vec![]);
    assert_eq!(s.event_list_all(0, 10).await.unwrap(), vec![]);
    assert_eq!(s.work_get("kubernetes.substrates", fresh.pool_id.as_str()).await.unwrap(), None);

    // An event that fails (duplicate id) takes the state change with it, too.
    ok(&s, UnitOfWork::new().event(ev.clone())).await;
    let uow = UnitOfWork::new().write(Write::InsertPool(fresh.clone())).event(ev);
    assert!(matches!(s.commit(uow).await, Err(StoreError::AlreadyExists(_))));
    assert_eq!(s.pool_get(&fresh.pool_id).await.unwrap(), None);

    // And the same unit, valid, lands whole.
    let ev2 = event(&acme, "compute.pools.db");
    let uow = UnitOfWork::new().write(Write::InsertPool(fresh.clone())).event(ev2.clone()).enqueue(
        "kubernetes.substrates",
        fresh.pool_id.as_str(),
        t(0),
    );
    let c = ok(&s, uow).await;
    assert!(s.pool_get(&fresh.pool_id).await.unwrap().is_some());
    assert_eq!(s.event_list_all(c.event_seqs[0] - 1, 10).await.unwrap()[0].event_id, ev2.event_id);
    assert!(s.work_get("kubernetes.substrates", fresh.pool_id.as_str()).await.unwrap().is_some());
}

const K: &str = "kubernetes.substrates";

async fn queue_lifecycle(s: S) {
    let enq = |key: &str, at| Enqueue { kind: K.into(), key: key.into(), not_before: at };
    s.enqueue(enq("a", t(10))).await.unwrap();
    s.enqueue(enq("a", t(5))).await.unwrap(); // earlier wins
    s.enqueue(enq("a", t(50))).await.unwrap(); // later does not move it
    s.enqueue(enq("b", t(20))).await.unwrap();
    s.enqueue(Enqueue { kind: "vps.provider-resources".into(), key: "a".into(), not_before: t(0) })
        .await
        .unwrap();
    let a = s.work_get(K, "a").await.unwrap().unwrap();
    assert_eq!((a.not_before, a.attempts, a.lease_owner.clone()), (t(5), 0, None));
    assert_eq!(s.work_get(K, "zzz").await.unwrap(), None);

    // Only due items, only the kinds asked for, oldest first, at most `max`.
    let kinds = vec![K.to_string()];
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
    assert_eq!(
        got.iter().map(|w| w.kind.as_str()).collect::<Vec<_>>(),
        vec!["vps.provider-resources"]
    );

    // Only the holder may act.
    assert!(!s.complete(K, "a", "r2").await.unwrap());
    assert!(!s.fail(K, "a", "r2", "x", t(1)).await.unwrap());
    assert!(!s.requeue(K, "a", "r2", t(1)).await.unwrap());
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

async fn queue_reenqueue_during_lease_is_kept(s: S) {
    let kinds = vec![K.to_string()];
    s.enqueue(Enqueue { kind: K.into(), key: "p".into(), not_before: t(0) }).await.unwrap();
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

async fn queue_expired_lease_is_taken_over(s: S) {
    let kinds = vec![K.to_string()];
    s.enqueue(Enqueue { kind: K.into(), key: "p".into(), not_before: t(0) }).await.unwrap();
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
    let kinds = vec![K.to_string()];
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
            Err(StoreError::Conflict(_)) => refused += 1,
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
    assert_eq!(s.pool_get(&p.pool_id).await.unwrap().as_ref(), winners.first());
}

async fn concurrent_events_get_unique_increasing_seqs(s: S) {
    let acme = tenant("acme");
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let s = s.clone();
        let acme = acme.clone();
        tasks.push(tokio::spawn(async move {
            let mut uow = UnitOfWork::new();
            for _ in 0..5 {
                uow = uow.event(event(&acme, "compute.pools.x"));
            }
            s.commit(uow).await.unwrap().event_seqs
        }));
    }
    let mut seqs = Vec::new();
    for t in tasks {
        let mine = t.await.unwrap();
        assert!(mine.windows(2).all(|w| w[0] < w[1]), "in order within a commit");
        seqs.extend(mine);
    }
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), 50);
    let listed: Vec<u64> = s.event_list_all(0, 100).await.unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(listed, seqs);
}

async fn closed_pool_is_unavailable(s: S) {
    s.connection().close_by_ref().await.unwrap();
    let e = s.pool_get(&id()).await.unwrap_err();
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
    let kinds = vec![K.to_string()];
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
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let s = s.clone();
            tokio::spawn(async move {
                let mut checked = 0;
                // Bounded: a fixed number of passes while the writers run.
                for _ in 0..30 {
                    for e in s.event_list_all(0, 1000).await.unwrap() {
                        let id: bc_domain::PoolId =
                            e.data["poolId"].as_str().unwrap().parse().unwrap();
                        // Event visible ⇒ its state change and its work item are too.
                        assert!(s.pool_get(&id).await.unwrap().is_some(), "event without pool");
                        assert!(s.work_get(K, id.as_str()).await.unwrap().is_some());
                        checked += 1;
                    }
                    let page = s
                        .pool_list(&tenant("acme"), false, &PageRequest::first(500))
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
                    tokio::task::yield_now().await;
                }
                checked
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    for r in readers {
        r.await.unwrap();
    }
    assert_eq!(s.event_list_all(0, 1000).await.unwrap().len(), WRITERS * PER_WRITER);
}
