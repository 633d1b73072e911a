//! Node churn (SPEC §6, §8): the provider's autoscaler adding or removing nodes, or
//! replacing one, is not a policy change — the counts move, the state stays `ready`,
//! and no event is written. Stepped on a manual clock against the simulator.

use std::time::Duration;

use bc_domain::policy::AutoScale;
use bc_domain::{NodePoolState, PoolId, ResourceState};
use bc_reconcile::on_each_provider;
use bc_reconcile::testing::{Env, OnProvider, flavor};

async fn row_states(env: &Env, pool: &PoolId) -> Vec<NodePoolState> {
    env.substrate_rows(pool).await.into_iter().map(|r| r.state).collect()
}

on_each_provider!(the_autoscaler_growing_a_pool_is_no_policy_change);

async fn the_autoscaler_growing_a_pool_is_no_policy_change(on: OnProvider) {
    let env = Env::start_on(on).await;
    let mut auto = flavor("gpu", on.node_size(), 0);
    auto.count = None;
    auto.auto_scale = Some(AutoScale { min: 1, max: 4 });
    let policy = env.create_policy("latest", vec![auto]);
    let pool = env.create_pool("web", policy).await;
    let s = env.until_substrate(&pool.pool_id, ResourceState::Ready, 40).await;
    let pid = env.cluster(s.cluster_id.as_ref().unwrap()).await.provider_cluster_id.unwrap();
    let before = env.event_kinds().await;
    // The autoscaler grows the pool to 3: two nodes are being made for a while.
    on.autoscale_to(&env.sim, &pid, 3);
    // Woken again and again while they are made (the clock does not move meanwhile).
    for _ in 0..10 {
        env.driver_wake(&pool.pool_id).await;
        env.step(Duration::from_secs(15)).await;
        let s = env.substrate(&pool.pool_id).await;
        assert_eq!(s.state, ResourceState::Ready, "{s:?}");
        assert_eq!(row_states(&env, &pool.pool_id).await, [NodePoolState::Ready]);
    }
    // The nodes come up: the counts move, the state stays.
    let grown =
        env.run_until(10, async |e: &Env| e.substrate(&pool.pool_id).await.nodes_listed == 3).await;
    let s = env.substrate(&pool.pool_id).await;
    assert!(grown, "the counts move: {s:?}");
    assert_eq!(s.state, ResourceState::Ready);
    assert_eq!(env.event_kinds().await, before, "no event for the provider's own churn");
}
