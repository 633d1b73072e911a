//! Faults combined with lifecycle steps (issue 28 item 13), on each provider and on the
//! production observer (`SharedObserver`, its listing cache included): an answer lost
//! and then an archive, a delete or a policy change; a stale listing and then a step
//! that fails. Each ends with the provider holding exactly what the desired state asks
//! — one object per row, none of what was archived or deleted — the rows `ready` or
//! `deleted`, and no second create.

use std::time::Duration;

use bc_domain::model::ClusterMode;
use bc_domain::policy::{PoolPolicy, Scale};
use bc_domain::ports::PoolRepo;
use bc_domain::{NodePoolState, PoolId, ResourceState};
use bc_reconcile::on_each_provider;
use bc_reconcile::testing::{Call, Env, OnProvider, flavor, with_flavors};

on_each_provider!(
    a_lost_node_pool_create_then_an_archive_leaves_nothing_at_the_provider,
    a_lost_node_pool_create_then_a_policy_change_makes_one_pool_of_the_new_size,
    a_stale_listing_then_a_failed_resize_makes_the_pool_again_once,
    a_lost_cluster_create_then_a_delete_leaves_nothing_at_the_provider,
    a_lost_tenant_pool_create_then_a_resize_makes_one_pool_of_the_new_size,
);

/// Longer than any wait a reconciler asks for.
const STEP: Duration = Duration::from_secs(600);

/// Steps until `pool`'s substrate is `ready` at its latest policy with every row of it
/// `ready` (panics otherwise).
async fn until_converged(env: &Env, pool: &PoolId) {
    let ok = env
        .run_until(40, async |e: &Env| {
            let generation = e.store.pool_get_any(pool).await.unwrap().unwrap().generation;
            let s = e.substrate(pool).await;
            let rows = e.substrate_rows(pool).await;
            s.state == ResourceState::Ready
                && s.observed_generation == generation
                && rows.iter().all(|r| r.state == NodePoolState::Ready)
        })
        .await;
    assert!(ok, "{:?} {:?}", env.substrate(pool).await, env.substrate_rows(pool).await);
}

/// A ready substrate of one flavor `cpu`; its policy, and the flavor `arm` added with
/// `nodes` nodes.
async fn with_arm(env: &Env, nodes: u32) -> (PoolId, PoolPolicy, PoolPolicy) {
    let (pool, policy, _) = env.creating_pool("latest", 1).await;
    let cpu = flavor("cpu", env.on.node_size(), 1);
    let arm = flavor("arm", env.on.other_size(), nodes);
    let added = with_flavors(&policy, vec![cpu, arm]);
    (pool.pool_id, policy, added)
}

/// Steps until the `n`th node pool create was sent (its answer lost, if it was to be).
async fn until_sent(env: &Env, call: Call, n: u64) {
    let sent = env.run_until(20, async |e: &Env| e.calls(call) == n).await;
    assert!(sent, "call {call:?} number {n} was not sent");
}

async fn a_lost_node_pool_create_then_an_archive_leaves_nothing_at_the_provider(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (pool, _, added) = with_arm(&env, 1).await;
    env.lose(Call::CreateNodePool, 1);
    env.update_policy(&pool, added).await;
    until_sent(&env, Call::CreateNodePool, 1).await;
    env.archive(&pool).await;
    env.until_substrate(&pool, ResourceState::Deleted, 40).await;
    let left = env.provider().kubernetes().list_clusters().await.unwrap();
    assert!(left.is_empty(), "nothing of the pool is left: {left:?}");
    assert_eq!(env.calls(Call::CreateNodePool), 1, "no second create");
    assert!(env.substrate_rows(&pool).await.is_empty(), "no live row");
}

async fn a_lost_node_pool_create_then_a_policy_change_makes_one_pool_of_the_new_size(
    on: OnProvider,
) {
    let env = Env::start_on(on).await;
    let (pool, policy, added) = with_arm(&env, 1).await;
    let pid = env.substrate_cluster(&pool).await;
    env.lose(Call::CreateNodePool, 1);
    env.update_policy(&pool, added).await;
    until_sent(&env, Call::CreateNodePool, 1).await;
    let grown = vec![flavor("cpu", on.node_size(), 1), flavor("arm", on.other_size(), 2)];
    env.update_policy(&pool, with_flavors(&policy, grown)).await;
    until_converged(&env, &pool).await;
    let names = [env.flavor_pool(&pool, "arm"), env.flavor_pool(&pool, "cpu")];
    assert_eq!(env.pool_names(&pid).await, names);
    let at = env.provider().kubernetes().get_cluster(&pid).await.unwrap();
    let arm = at.node_pools.iter().find(|p| p.name.ends_with("-arm")).unwrap();
    assert_eq!(arm.count, 2, "{arm:?}");
    assert_eq!(env.calls(Call::CreateNodePool), 1, "no second create");
    assert_eq!(env.substrate_rows(&pool).await.len(), 2, "one row per flavor");
}

async fn a_stale_listing_then_a_failed_resize_makes_the_pool_again_once(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (pool, policy, _) = env.creating_pool("latest", 1).await;
    let pid = env.substrate_cluster(&pool.pool_id).await;
    // The account is listed (the cache holds the pool), then the pool is deleted behind
    // our back and the provider finishes that at once (no reconciler runs meanwhile).
    env.driver_wake(&pool.pool_id).await;
    env.step(Duration::ZERO).await;
    let k = env.provider();
    let ours = k.kubernetes().get_cluster(&pid).await.unwrap().node_pools[0].clone();
    k.kubernetes().delete_node_pool(&pid, &ours.id).await.expect("deleted behind our back");
    let mut gone = false;
    for _ in 0..20 {
        env.cloud.step(30);
        gone = k.kubernetes().get_cluster(&pid).await.unwrap().node_pools.is_empty();
        if gone {
            break;
        }
    }
    assert!(gone, "the node pool is gone at the provider");
    // A resize while the cached listing still shows the pool: its update fails.
    let grown = with_flavors(&policy, vec![flavor("cpu", on.node_size(), 2)]);
    env.update_policy(&pool.pool_id, grown).await;
    until_converged(&env, &pool.pool_id).await;
    for _ in 0..3 {
        env.step(STEP).await;
    }
    assert_eq!(env.pool_names(&pid).await, [ours.name], "one pool of the flavor");
    let at = env.provider().kubernetes().get_cluster(&pid).await.unwrap();
    assert_eq!(at.node_pools[0].count, 2);
    assert_eq!(env.calls(Call::CreateNodePool), 1, "made again once");
    assert_eq!(env.substrate(&pool.pool_id).await.state, ResourceState::Ready);
}

async fn a_lost_cluster_create_then_a_delete_leaves_nothing_at_the_provider(on: OnProvider) {
    let env = Env::start_on(on).await;
    env.lose(Call::CreateCluster, 1);
    let workers = ("workers", on.node_size(), Scale::Count(1));
    let (c, rows) = env.create_cluster("alpha", ClusterMode::Standard, vec![workers]).await;
    until_sent(&env, Call::CreateCluster, 1).await;
    env.change_cluster(&c.cluster_id, None, None, true).await;
    let gone = env
        .run_until(40, async |e: &Env| {
            e.cluster(&c.cluster_id).await.status.state == ResourceState::Deleted
        })
        .await;
    assert!(gone, "{:?}", env.cluster(&c.cluster_id).await);
    let left = env.provider().kubernetes().list_clusters().await.unwrap();
    assert!(left.is_empty(), "nothing is left at the provider: {left:?}");
    assert_eq!(env.calls(Call::CreateCluster), 1, "no second create");
    assert_eq!(env.node_pool(&rows[0].node_pool_id).await.state, NodePoolState::Deleted);
}

async fn a_lost_tenant_pool_create_then_a_resize_makes_one_pool_of_the_new_size(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (c, _, pid) = env.ready_cluster("alpha").await;
    env.lose(Call::CreateNodePool, 1);
    let np = env.create_node_pool(&c.cluster_id, "more", on.node_size(), Scale::Count(1)).await;
    until_sent(&env, Call::CreateNodePool, 1).await;
    env.change_node_pool(&np.node_pool_id, Some(Scale::Count(2)), false).await;
    let ready = env
        .run_until(30, async |e: &Env| {
            let row = e.node_pool(&np.node_pool_id).await;
            row.state == NodePoolState::Ready
                && row.observed_generation == row.generation
                && e.cluster(&c.cluster_id).await.status.state == ResourceState::Ready
        })
        .await;
    assert!(ready, "{:?}", env.node_pool(&np.node_pool_id).await);
    let at = env.provider().kubernetes().get_cluster(&pid).await.unwrap();
    let more: Vec<_> = at.node_pools.iter().filter(|p| p.name == "more").collect();
    assert_eq!(more.len(), 1, "one pool of the name: {:?}", at.node_pools);
    assert_eq!(more[0].count, 2);
    assert_eq!(env.calls(Call::CreateNodePool), 1, "no second create");
    assert_eq!(env.cluster(&c.cluster_id).await.status.state, ResourceState::Ready);
}
