//! The reads the API and the reconcilers are built on, run against SQLite in memory, a
//! SQLite file and PostgreSQL (`store_suite!`), with every SQLite read checked to be an
//! index search: tenant-scoped gets, lists filtered by a `ReadScope` and paged inside the
//! query with opaque tokens, cross-tenant sweeps, the booking `state` filter, the queue's
//! status, singleton leases and relay cursors.
//!
//! Invariant checked: the port's read contract — another tenant's object is never
//! returned by a scoped read, a list returns exactly what its scope covers in key order
//! with full pages until the last, and a sweep returns every live row once.

use std::collections::BTreeSet;
use std::sync::Arc;

use bc_domain::model::*;
use bc_domain::ports::*;
use bc_domain::{ClusterId, NodePoolId, PoolId, ResourceState, TenantId};
use bc_store::testing::*;
use bc_store::{SqlStore, store_suite};

store_suite!(
    scoped_gets_hide_other_tenants,
    lists_follow_the_read_scope,
    scoped_pages_are_full_until_the_last,
    page_tokens_walk_a_whole_list,
    sweeps_return_every_live_row_once,
    cluster_and_node_pool_lists_say_which_rows_are_deleted,
    booking_list_filters_by_state_at_now,
    queue_status_and_failing_items,
    singleton_leases_have_one_holder,
    relay_cursors_only_move_forward,
);

type S = Arc<SqlStore>;

async fn ok(s: &S, uow: UnitOfWork) {
    s.commit(uow).await.expect("commit");
}

fn one(w: Write) -> UnitOfWork {
    UnitOfWork::new().write(w)
}

/// Every item of a list, walked page by page (at most 100 pages), checking that only the
/// last page is short.
async fn walk<T, K, F, Fut>(limit: u32, mut read: F) -> Vec<T>
where
    K: CursorKey,
    F: FnMut(PageRequest<K>) -> Fut,
    Fut: Future<Output = StoreResult<Page<T, K>>>,
{
    let mut out = Vec::new();
    let mut req = Some(PageRequest::first(limit));
    for _ in 0..100 {
        let Some(r) = req else { return out };
        let page = read(r).await.expect("read");
        assert!(page.items.len() == limit as usize || page.next.is_none(), "a short page");
        req = page.next_request(limit);
        out.extend(page.items);
    }
    panic!("more than 100 pages");
}

/// A tenant's objects: two accounts, three pools, clusters, node pools, load balancers.
struct World {
    tenant: TenantId,
    accounts: [ProviderAccount; 2],
    pools: [Pool; 3],
    /// Two clusters in account 0, one in account 1.
    clusters: [KubernetesCluster; 3],
    /// One node pool in cluster 0, two in cluster 2.
    node_pools: [NodePool; 3],
    /// One load balancer per account.
    load_balancers: [LoadBalancer; 2],
}

impl World {
    fn new(tenant_name: &str) -> World {
        let tenant = tenant(tenant_name);
        let accounts = [account(&tenant, "main"), account(&tenant, "spare")];
        let pools = [pool(&tenant, "one"), pool(&tenant, "two"), pool(&tenant, "three")];
        let clusters = [
            cluster(&accounts[0], "alpha"),
            cluster(&accounts[0], "beta"),
            cluster(&accounts[1], "gamma"),
        ];
        let node_pools = [
            node_pool(&clusters[0], "cpu"),
            node_pool(&clusters[2], "cpu"),
            node_pool(&clusters[2], "gpu"),
        ];
        let load_balancers = [
            load_balancer(&pools[0], &accounts[0], "front"),
            load_balancer(&pools[1], &accounts[1], "back"),
        ];
        World { tenant, accounts, pools, clusters, node_pools, load_balancers }
    }

    fn unit_of_work(&self) -> UnitOfWork {
        let mut uow = UnitOfWork::new();
        for a in &self.accounts {
            uow = uow.write(Write::InsertAccount(a.clone()));
        }
        for p in &self.pools {
            uow = uow.write(Write::InsertPool(p.clone()));
        }
        for c in &self.clusters {
            uow = uow.write(Write::InsertCluster(c.clone()));
        }
        for n in &self.node_pools {
            uow = uow.write(Write::InsertNodePool(n.clone()));
        }
        for l in &self.load_balancers {
            uow = uow.write(Write::InsertLoadBalancer(l.clone()));
        }
        uow
    }

    async fn store(s: &S, tenant_name: &str) -> World {
        let w = World::new(tenant_name);
        ok(s, w.unit_of_work()).await;
        w
    }
}

async fn scoped_gets_hide_other_tenants(s: S) {
    let w = World::store(&s, "acme").await;
    let other = tenant("other");
    let (p, a, c, n, l) =
        (&w.pools[0], &w.accounts[0], &w.clusters[0], &w.node_pools[0], &w.load_balancers[0]);
    let x = Substrate { upgrade: None, ..substrate(p, a, Some(c.cluster_id.clone())) };
    let b = booking(p, None);
    ok(
        &s,
        UnitOfWork::new()
            .write(Write::PutSubstrate(x.clone()))
            .write(Write::InsertBooking(b.clone())),
    )
    .await;
    let acme = &w.tenant;

    assert_eq!(s.pool_get(acme, &p.pool_id).await.unwrap().as_ref(), Some(p));
    assert_eq!(s.pool_get(&other, &p.pool_id).await.unwrap(), None);
    assert_eq!(s.pool_get_any(&p.pool_id).await.unwrap().as_ref(), Some(p));
    let aid = &a.provider_account_id;
    assert_eq!(s.account_get(acme, aid).await.unwrap().as_ref(), Some(a));
    assert_eq!(s.account_get(&other, aid).await.unwrap(), None);
    assert_eq!(s.account_get_any(aid).await.unwrap().as_ref(), Some(a));
    assert_eq!(s.substrate_get(acme, &p.pool_id).await.unwrap().as_ref(), Some(&x));
    assert_eq!(s.substrate_get(&other, &p.pool_id).await.unwrap(), None);
    assert_eq!(s.substrate_get_any(&p.pool_id).await.unwrap(), Some(x));
    assert_eq!(s.cluster_get(acme, &c.cluster_id).await.unwrap().as_ref(), Some(c));
    assert_eq!(s.cluster_get(&other, &c.cluster_id).await.unwrap(), None);
    assert_eq!(s.cluster_get_any(&c.cluster_id).await.unwrap().as_ref(), Some(c));
    assert_eq!(s.node_pool_get(acme, &n.node_pool_id).await.unwrap().as_ref(), Some(n));
    assert_eq!(s.node_pool_get(&other, &n.node_pool_id).await.unwrap(), None);
    assert_eq!(s.node_pool_get_any(&n.node_pool_id).await.unwrap().as_ref(), Some(n));
    let lid = &l.load_balancer_id;
    assert_eq!(s.load_balancer_get(acme, lid).await.unwrap().as_ref(), Some(l));
    assert_eq!(s.load_balancer_get(&other, lid).await.unwrap(), None);
    assert_eq!(s.load_balancer_get_any(lid).await.unwrap().as_ref(), Some(l));
    assert_eq!(s.booking_get(acme, &b.booking_id).await.unwrap(), Some(b.clone()));
    assert_eq!(s.booking_get(&other, &b.booking_id).await.unwrap(), None);
}

/// The ids each list returns for `scope`, in order.
struct Seen {
    pools: Vec<PoolId>,
    accounts: Vec<bc_domain::ProviderAccountId>,
    clusters: Vec<ClusterId>,
    /// Node pools of clusters 0 and 2, in that order.
    node_pools: Vec<NodePoolId>,
    load_balancers: Vec<bc_domain::LoadBalancerId>,
}

async fn seen(s: &S, w: &World, scope: &ReadScope) -> Seen {
    let t = &w.tenant;
    let pools = s.pool_list(t, scope, false, &PageRequest::first(50)).await.unwrap();
    let accounts = s.account_list(t, scope, &PageRequest::first(50)).await.unwrap();
    let clusters =
        s.cluster_list(t, scope, &ClusterFilter::default(), &PageRequest::first(50)).await.unwrap();
    let mut node_pools = Vec::new();
    for c in [&w.clusters[0], &w.clusters[2]] {
        let page = s
            .node_pool_list(t, &c.cluster_id, scope, false, &PageRequest::first(50))
            .await
            .unwrap();
        node_pools.extend(page.items.into_iter().map(|n| n.node_pool_id));
    }
    let lbs = s
        .load_balancer_list(t, scope, &LoadBalancerFilter::default(), &PageRequest::first(50))
        .await
        .unwrap();
    Seen {
        pools: pools.items.into_iter().map(|p| p.pool_id).collect(),
        accounts: accounts.items.into_iter().map(|a| a.provider_account_id).collect(),
        clusters: clusters.items.into_iter().map(|c| c.cluster_id).collect(),
        node_pools,
        load_balancers: lbs.items.into_iter().map(|l| l.load_balancer_id).collect(),
    }
}

async fn lists_follow_the_read_scope(s: S) {
    let w = World::store(&s, "acme").await;
    let theirs = World::store(&s, "other").await;
    // A scope of only the grants `f` adds.
    let only = |f: &dyn Fn(&mut GrantedIds)| {
        let mut ids = GrantedIds::default();
        f(&mut ids);
        ReadScope::Granted(ids)
    };

    // The whole tenant: everything of it, nothing of the other tenant.
    let all = seen(&s, &w, &ReadScope::Tenant).await;
    assert_eq!(all.pools, w.pools.iter().map(|p| p.pool_id.clone()).collect::<Vec<_>>());
    assert_eq!(all.accounts.len(), 2);
    assert_eq!(all.clusters, w.clusters.iter().map(|c| c.cluster_id.clone()).collect::<Vec<_>>());
    assert_eq!(all.node_pools.len(), 3);
    assert_eq!(all.load_balancers.len(), 2);

    // An account grant covers the account, its clusters, their node pools and its load
    // balancers — not pools.
    let scope = only(&|g| {
        g.accounts.insert(w.accounts[0].provider_account_id.clone());
    });
    let acct = seen(&s, &w, &scope).await;
    assert_eq!(acct.accounts, vec![w.accounts[0].provider_account_id.clone()]);
    assert_eq!(
        acct.clusters,
        vec![w.clusters[0].cluster_id.clone(), w.clusters[1].cluster_id.clone()]
    );
    assert_eq!(acct.node_pools, vec![w.node_pools[0].node_pool_id.clone()]);
    assert_eq!(acct.load_balancers, vec![w.load_balancers[0].load_balancer_id.clone()]);
    assert!(acct.pools.is_empty());

    // A cluster grant covers the cluster and its node pools.
    let scope = only(&|g| {
        g.clusters.insert(w.clusters[2].cluster_id.clone());
    });
    let clus = seen(&s, &w, &scope).await;
    assert_eq!(clus.clusters, vec![w.clusters[2].cluster_id.clone()]);
    assert_eq!(
        clus.node_pools,
        vec![w.node_pools[1].node_pool_id.clone(), w.node_pools[2].node_pool_id.clone()]
    );
    assert!(clus.accounts.is_empty() && clus.load_balancers.is_empty());

    // Object grants cover only themselves.
    let scope = only(&|g| {
        g.pools.insert(w.pools[1].pool_id.clone());
        g.node_pools.insert(w.node_pools[2].node_pool_id.clone());
        g.load_balancers.insert(w.load_balancers[1].load_balancer_id.clone());
    });
    let objs = seen(&s, &w, &scope).await;
    assert_eq!(objs.pools, vec![w.pools[1].pool_id.clone()]);
    assert_eq!(objs.node_pools, vec![w.node_pools[2].node_pool_id.clone()]);
    assert_eq!(objs.load_balancers, vec![w.load_balancers[1].load_balancer_id.clone()]);
    assert!(objs.clusters.is_empty() && objs.accounts.is_empty());

    // Grants on another tenant's objects widen nothing; no grant reads nothing.
    let foreign = ReadScope::Granted(GrantedIds {
        pools: theirs.pools.iter().map(|p| p.pool_id.clone()).collect(),
        accounts: theirs.accounts.iter().map(|a| a.provider_account_id.clone()).collect(),
        clusters: theirs.clusters.iter().map(|c| c.cluster_id.clone()).collect(),
        node_pools: theirs.node_pools.iter().map(|n| n.node_pool_id.clone()).collect(),
        load_balancers: theirs.load_balancers.iter().map(|l| l.load_balancer_id.clone()).collect(),
    });
    for scope in [foreign, ReadScope::nothing()] {
        let none = seen(&s, &w, &scope).await;
        assert!(
            none.pools.is_empty()
                && none.accounts.is_empty()
                && none.clusters.is_empty()
                && none.node_pools.is_empty()
                && none.load_balancers.is_empty()
        );
    }
    // The other tenant's cluster through this tenant's node-pool list: nothing.
    let cross = s
        .node_pool_list(
            &w.tenant,
            &theirs.clusters[2].cluster_id,
            &ReadScope::Tenant,
            false,
            &PageRequest::first(10),
        )
        .await
        .unwrap();
    assert!(cross.items.is_empty());
}

async fn scoped_pages_are_full_until_the_last(s: S) {
    let acme = tenant("acme");
    let a = account(&acme, "a");
    let b = account(&acme, "b");
    let mut uow = UnitOfWork::new()
        .write(Write::InsertAccount(a.clone()))
        .write(Write::InsertAccount(b.clone()));
    let mut readable = Vec::new();
    // Interleaved: every other cluster is in the readable account.
    for i in 0..14 {
        let c = cluster(if i % 2 == 0 { &a } else { &b }, &format!("c{i}"));
        if i % 2 == 0 {
            readable.push(c.cluster_id.clone());
        }
        uow = uow.write(Write::InsertCluster(c));
    }
    ok(&s, uow).await;
    let scope = ReadScope::Granted(GrantedIds {
        accounts: BTreeSet::from([a.provider_account_id.clone()]),
        ..Default::default()
    });
    let got = walk(2, |r| {
        let (s, acme, scope) = (s.clone(), acme.clone(), scope.clone());
        async move { s.cluster_list(&acme, &scope, &ClusterFilter::default(), &r).await }
    })
    .await;
    assert_eq!(got.into_iter().map(|c| c.cluster_id).collect::<Vec<_>>(), readable);
}

async fn page_tokens_walk_a_whole_list(s: S) {
    let acme = tenant("acme");
    let mut uow = UnitOfWork::new();
    let mut ids = Vec::new();
    for i in 0..5 {
        let p = pool(&acme, &format!("p{i}"));
        ids.push(p.pool_id.clone());
        uow = uow.write(Write::InsertPool(p));
    }
    ok(&s, uow).await;
    // As the API does it: pageSize and pageToken in, nextPageToken out.
    let mut token: Option<String> = None;
    let mut got = Vec::new();
    for _ in 0..10 {
        let req = PageRequest::<PoolId>::from_api("pools.list", Some(2), token.as_deref()).unwrap();
        let page = s.pool_list(&acme, &ReadScope::Tenant, false, &req).await.unwrap();
        token = page.next_page_token("pools.list");
        got.extend(page.items.into_iter().map(|p| p.pool_id));
        if token.is_none() {
            break;
        }
    }
    assert_eq!(got, ids);
    // Another list's token is an input error naming pageToken.
    let c = cluster(&account(&acme, "x"), "c");
    let foreign = PageCursor::after(c.cluster_id).encode("kubernetesClusters.list");
    let e = PageRequest::<PoolId>::from_api("pools.list", Some(2), Some(&foreign)).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("pageToken"));
}

async fn sweeps_return_every_live_row_once(s: S) {
    let w1 = World::store(&s, "acme").await;
    let w2 = World::store(&s, "other").await;
    // Substrates on both tenants' first pools; one of them deleted.
    let x1 = substrate(&w1.pools[0], &w1.accounts[0], None);
    let mut x2 = substrate(&w2.pools[0], &w2.accounts[1], None);
    let mut x3 = substrate(&w2.pools[1], &w2.accounts[1], None);
    x3.state = ResourceState::Deleted;
    ok(
        &s,
        UnitOfWork::new()
            .write(Write::PutSubstrate(x1.clone()))
            .write(Write::PutSubstrate(x2.clone()))
            .write(Write::PutSubstrate(x3)),
    )
    .await;
    // Delete one cluster, one node pool, one load balancer and one account of w2.
    let gone = status(ResourceState::Deleted);
    ok(
        &s,
        UnitOfWork::new()
            .write(Write::SetClusterStatus {
                cluster_id: w2.clusters[1].cluster_id.clone(),
                provider_cluster_id: None,
                version: None,
                status: gone.clone(),
            })
            .write(Write::SetNodePoolStatus {
                node_pool_id: w2.node_pools[1].node_pool_id.clone(),
                provider_node_pool_id: None,
                nodes_listed: 0,
                nodes_ready: 0,
                state: bc_domain::NodePoolState::Deleted,
                message: None,
                observed_generation: 1,
                updated_at: t(9),
            })
            .write(Write::SetLoadBalancerStatus {
                load_balancer_id: w2.load_balancers[0].load_balancer_id.clone(),
                provider_load_balancer_id: None,
                ip: None,
                status: gone,
                ready_at: None,
                deleted_at: Some(t(9)),
            }),
    )
    .await;
    let spare = account(&w2.tenant, "unused");
    ok(&s, one(Write::InsertAccount(spare.clone()))).await;
    ok(
        &s,
        one(Write::DeleteAccount {
            provider_account_id: spare.provider_account_id.clone(),
            at: t(9),
        }),
    )
    .await;

    fn sorted<T: Ord + Clone>(v: impl IntoIterator<Item = T>) -> Vec<T> {
        v.into_iter().collect::<BTreeSet<_>>().into_iter().collect()
    }
    let subs = walk(1, |r| {
        let s = s.clone();
        async move { s.substrate_sweep(&r).await }
    })
    .await;
    assert_eq!(
        subs.iter().map(|x| x.pool_id.clone()).collect::<Vec<_>>(),
        sorted([x1.pool_id.clone(), x2.pool_id.clone()])
    );
    let clusters = walk(2, |r| {
        let s = s.clone();
        async move { s.cluster_sweep(&r).await }
    })
    .await;
    let live_clusters =
        w1.clusters.iter().chain([&w2.clusters[0], &w2.clusters[2]]).map(|c| c.cluster_id.clone());
    assert_eq!(
        clusters.into_iter().map(|c| c.cluster_id).collect::<Vec<_>>(),
        sorted(live_clusters)
    );
    let nps = walk(2, |r| {
        let s = s.clone();
        async move { s.node_pool_sweep(&r).await }
    })
    .await;
    let live_nps = w1.node_pools.iter().chain([&w2.node_pools[0], &w2.node_pools[2]]);
    let live_nps = live_nps.map(|n| n.node_pool_id.clone());
    assert_eq!(nps.into_iter().map(|n| n.node_pool_id).collect::<Vec<_>>(), sorted(live_nps));
    let lbs = walk(2, |r| {
        let s = s.clone();
        async move { s.load_balancer_sweep(&r).await }
    })
    .await;
    let live_lbs =
        w1.load_balancers.iter().chain(&w2.load_balancers[1..]).map(|l| l.load_balancer_id.clone());
    assert_eq!(lbs.into_iter().map(|l| l.load_balancer_id).collect::<Vec<_>>(), sorted(live_lbs));
    let accts = walk(3, |r| {
        let s = s.clone();
        async move { s.account_sweep(&r).await }
    })
    .await;
    let live_accts = w1.accounts.iter().chain(&w2.accounts).map(|a| a.provider_account_id.clone());
    assert_eq!(
        accts.into_iter().map(|a| a.provider_account_id).collect::<Vec<_>>(),
        sorted(live_accts)
    );

    // Per account: what a reconciler matches against one provider listing.
    let a = w2.accounts[0].provider_account_id.clone();
    let in_a = walk(1, |r| {
        let (s, a) = (s.clone(), a.clone());
        async move { s.cluster_list_by_account(&a, &r).await }
    })
    .await;
    assert_eq!(
        in_a.into_iter().map(|c| c.cluster_id).collect::<Vec<_>>(),
        vec![w2.clusters[0].cluster_id.clone()]
    );
    let lbs_a = walk(1, |r| {
        let (s, a) = (s.clone(), a.clone());
        async move { s.load_balancer_list_by_account(&a, &r).await }
    })
    .await;
    assert!(lbs_a.is_empty(), "its load balancer is deleted");
    let b = w2.accounts[1].provider_account_id.clone();
    let subs_b = walk(1, |r| {
        let (s, b) = (s.clone(), b.clone());
        async move { s.substrate_list_by_account(&b, &r).await }
    })
    .await;
    assert_eq!(subs_b, vec![x2.clone()]);
    let lbs_b = walk(1, |r| {
        let (s, b) = (s.clone(), b.clone());
        async move { s.load_balancer_list_by_account(&b, &r).await }
    })
    .await;
    assert_eq!(lbs_b, vec![w2.load_balancers[1].clone()]);
    let c2 = w2.clusters[2].cluster_id.clone();
    let nps_c2 = walk(1, |r| {
        let (s, c) = (s.clone(), c2.clone());
        async move { s.node_pool_list_by_cluster(&c, &r).await }
    })
    .await;
    assert_eq!(nps_c2, vec![w2.node_pools[2].clone()], "the deleted node pool is not swept");
    x2.state = ResourceState::Deleted;
    ok(&s, one(Write::PutSubstrate(x2))).await;
    let subs = walk(5, |r| {
        let s = s.clone();
        async move { s.substrate_sweep(&r).await }
    })
    .await;
    assert_eq!(subs, vec![x1]);
}

async fn cluster_and_node_pool_lists_say_which_rows_are_deleted(s: S) {
    let w = World::store(&s, "acme").await;
    let c = &w.clusters[2];
    ok(
        &s,
        UnitOfWork::new()
            .write(Write::SetClusterStatus {
                cluster_id: w.clusters[0].cluster_id.clone(),
                provider_cluster_id: None,
                version: None,
                status: status(ResourceState::Deleted),
            })
            .write(Write::SetNodePoolStatus {
                node_pool_id: w.node_pools[1].node_pool_id.clone(),
                provider_node_pool_id: None,
                nodes_listed: 0,
                nodes_ready: 0,
                state: bc_domain::NodePoolState::Deleted,
                message: None,
                observed_generation: 1,
                updated_at: t(3),
            }),
    )
    .await;
    let t_ = &w.tenant;
    let first = PageRequest::first(10);
    let live =
        s.cluster_list(t_, &ReadScope::Tenant, &ClusterFilter::default(), &first).await.unwrap();
    assert_eq!(live.items.len(), 2);
    assert!(live.items.iter().all(|c| c.status.state != ResourceState::Deleted));
    let with = ClusterFilter { include_deleted: true, ..Default::default() };
    let all = s.cluster_list(t_, &ReadScope::Tenant, &with, &first).await.unwrap();
    assert_eq!(all.items.len(), 3);
    assert_eq!(all.items[0].status.state, ResourceState::Deleted, "says it is deleted");

    let np = |include| {
        let (s, t_, c) = (s.clone(), t_.clone(), c.cluster_id.clone());
        async move {
            let first = PageRequest::first(10);
            s.node_pool_list(&t_, &c, &ReadScope::Tenant, include, &first).await.unwrap().items
        }
    };
    assert_eq!(np(false).await, vec![w.node_pools[2].clone()]);
    let both = np(true).await;
    assert_eq!(both.len(), 2);
    assert_eq!(both[0].state, bc_domain::NodePoolState::Deleted);
}

async fn booking_list_filters_by_state_at_now(s: S) {
    let acme = tenant("acme");
    let p = pool(&acme, "web");
    let open = booking(&p, None);
    let until_100 = booking(&p, Some(t(100)));
    let ended = booking(&p, None);
    let mut uow = one(Write::InsertPool(p.clone()));
    for b in [&open, &until_100, &ended] {
        uow = uow.write(Write::InsertBooking(b.clone()));
    }
    ok(&s, uow.write(Write::EndBooking { booking_id: ended.booking_id.clone(), at: t(10) })).await;
    let ids = |state, now| {
        let (s, acme, pool_id) = (s.clone(), acme.clone(), p.pool_id.clone());
        async move {
            walk(1, |r| {
                let (s, acme, pool_id) = (s.clone(), acme.clone(), pool_id.clone());
                async move { s.booking_list(&acme, &pool_id, state, now, &r).await }
            })
            .await
            .into_iter()
            .map(|b| b.booking_id)
            .collect::<Vec<_>>()
        }
    };
    let (o, u, e) =
        (open.booking_id.clone(), until_100.booking_id.clone(), ended.booking_id.clone());
    assert_eq!(ids(None, t(50)).await, vec![o.clone(), u.clone(), e.clone()]);
    assert_eq!(ids(Some(BookingState::Active), t(50)).await, vec![o.clone(), u.clone()]);
    assert_eq!(ids(Some(BookingState::Ended), t(50)).await, vec![e.clone()]);
    // At its endsAt a booking has ended (the rule of `booking_state_at`).
    assert_eq!(ids(Some(BookingState::Active), t(100)).await, vec![o.clone()]);
    assert_eq!(ids(Some(BookingState::Ended), t(100)).await, vec![u.clone(), e]);
    for b in [&open, &until_100] {
        let expected = if b.booking_id == o { BookingState::Active } else { BookingState::Ended };
        assert_eq!(bc_domain::rules::drain::booking_state_at(b, t(100)), expected);
    }
    assert!(ids(None, t(50)).await.len() == 3);
    assert_eq!(
        s.booking_list(&tenant("other"), &p.pool_id, None, t(50), &PageRequest::first(10))
            .await
            .unwrap()
            .items,
        vec![]
    );
}

async fn queue_status_and_failing_items(s: S) {
    use WorkKind::*;
    let mut uow = UnitOfWork::new();
    for (kind, key, at) in [
        (Substrates, "a", t(0)),
        (Substrates, "b", t(5)),
        (Substrates, "c", t(1000)),
        (Clusters, "x", t(3)),
        (ProviderResources, "l1", t(1)),
        (ProviderResources, "l2", t(2)),
    ] {
        uow = uow.enqueue(kind, key, at);
    }
    ok(&s, uow).await;
    // "a" is being worked on; "l1" and "l2" failed.
    assert_eq!(s.claim("r", &[Substrates], 1, t(10), t(500)).await.unwrap()[0].key, "a");
    for key in ["l1", "l2"] {
        s.claim("r", &[ProviderResources], 1, t(10), t(500)).await.unwrap();
        assert!(s.fail(ProviderResources, key, "r", "refused: name taken", t(20)).await.unwrap());
    }
    let status = s.queue_status(t(10)).await.unwrap();
    assert_eq!(status.iter().map(|q| q.kind).collect::<Vec<_>>(), WorkKind::ALL.to_vec());
    let by = |k: WorkKind| status.iter().find(|q| q.kind == k).unwrap().clone();
    let subs = by(Substrates);
    assert_eq!((subs.depth, subs.due, subs.failing), (3, 1, 0));
    assert_eq!(subs.oldest_due.map(|w| w.key), Some("b".to_string()), "a is leased, c not due");
    let lbs = by(ProviderResources);
    assert_eq!((lbs.depth, lbs.due, lbs.failing, lbs.oldest_due), (2, 0, 2, None), "backing off");
    let nps = by(NodePools);
    assert_eq!((nps.depth, nps.due, nps.failing, nps.oldest_due), (0, 0, 0, None));
    assert_eq!(by(Clusters).due, 1);

    let failing = walk(1, |r| {
        let s = s.clone();
        async move { s.work_list_failing(ProviderResources, &r).await }
    })
    .await;
    assert_eq!(failing.iter().map(|w| w.key.as_str()).collect::<Vec<_>>(), vec!["l1", "l2"]);
    assert!(
        failing
            .iter()
            .all(|w| w.last_error.as_deref() == Some("refused: name taken") && w.attempts == 1)
    );
    assert!(
        s.work_list_failing(Substrates, &PageRequest::first(5)).await.unwrap().items.is_empty()
    );
}

async fn singleton_leases_have_one_holder(s: S) {
    const L: &str = LEASE_IDEMPOTENCY_PURGE;
    assert_eq!(s.lease_get(L).await.unwrap(), None);
    assert!(s.lease_acquire(L, "a", t(0), t(100)).await.unwrap());
    assert!(!s.lease_acquire(L, "b", t(50), t(150)).await.unwrap(), "held by a");
    assert!(s.lease_acquire(L, "a", t(60), t(160)).await.unwrap(), "a renews");
    assert!(!s.lease_acquire(L, "b", t(160), t(260)).await.unwrap(), "until its end, inclusive");
    assert!(s.lease_acquire(L, "b", t(161), t(261)).await.unwrap(), "expired: taken over");
    assert_eq!(
        s.lease_get(L).await.unwrap(),
        Some(Lease { name: L.into(), owner: "b".into(), until: t(261) })
    );
    assert!(!s.lease_acquire(L, "a", t(162), t(300)).await.unwrap());
    assert!(!s.lease_release(L, "a").await.unwrap());
    assert!(s.lease_release(L, "b").await.unwrap());
    assert_eq!(s.lease_get(L).await.unwrap(), None);

    // Many replicas at once: exactly one wins.
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let s = s.clone();
            tokio::spawn(async move {
                s.lease_acquire(LEASE_OUTBOX_RELAY, &format!("r{i}"), t(0), t(100)).await.unwrap()
            })
        })
        .collect();
    let mut won = 0;
    for task in tasks {
        won += usize::from(task.await.unwrap());
    }
    assert_eq!(won, 1);
}

async fn relay_cursors_only_move_forward(s: S) {
    assert_eq!(s.relay_cursor("nats").await.unwrap(), 0);
    let advance = |seq| one(Write::AdvanceRelayCursor { publisher: "nats".into(), seq });
    ok(&s, advance(5)).await;
    ok(&s, advance(3)).await;
    assert_eq!(s.relay_cursor("nats").await.unwrap(), 5, "never back");
    ok(&s, advance(9)).await;
    assert_eq!(s.relay_cursor("nats").await.unwrap(), 9);
    assert_eq!(s.relay_cursor("other").await.unwrap(), 0);
}
