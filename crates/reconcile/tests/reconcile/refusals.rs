//! Refusals (SPEC §6 "A refusal …", §8): a 4xx that retrying cannot fix is recorded once
//! — one `error` state, one event — and the refused call is not made again until the
//! desired state changes; throttling, 5xx and the provider's "busy" answers are retried.
//! Stepped on a manual clock against the simulator, whose request counters say which
//! calls were made.

use std::time::Duration;

use bc_domain::model::ClusterMode;
use bc_domain::policy::Scale;
use bc_domain::ports::{Clock, LoadBalancerRepo, Store, UnitOfWork, WorkKind, Write};
use bc_domain::{NodePoolState, ResourceState};
use bc_reconcile::on_each_provider;
use bc_reconcile::testing::{
    Call, Env, OnProvider, adopt_policy, flavor, with_flavors, with_version,
};

/// Longer than any wait a reconciler asks for (`waits::ERROR` is two minutes), so each
/// step is at least one more look at an object in `error`.
const STEP: Duration = Duration::from_secs(600);

on_each_provider!(
    a_refused_node_pool_is_asked_once_and_again_only_after_the_policy_changes,
    a_refused_cluster_create_is_asked_once_and_again_after_its_pools_change,
    an_adopted_cluster_shows_the_error_of_a_refused_substrate_pool,
    a_refused_drain_upgrade_stops_refusing_bookings,
    a_node_pool_change_refused_while_the_cluster_is_busy_is_retried_not_an_error,
);

async fn a_refused_node_pool_is_asked_once_and_again_only_after_the_policy_changes(on: OnProvider) {
    let env = Env::start_on(on).await;
    let cpu = flavor("cpu", on.node_size(), 1);
    let policy = env.create_policy("latest", vec![cpu.clone()]);
    let pool = env.create_pool("web", policy.clone()).await;
    env.until_substrate(&pool.pool_id, ResourceState::Ready, 40).await;
    let posts = || env.calls(Call::CreateNodePool);
    let big = on.unknown_size();
    let refused = with_flavors(&policy, vec![cpu.clone(), flavor("big", big, 1)]);
    env.update_policy(&pool.pool_id, refused).await;
    let s = env.until_substrate(&pool.pool_id, ResourceState::Error, 10).await;
    assert!(s.message.as_deref().unwrap_or_default().contains(big), "{s:?}");
    assert_eq!(posts(), 1, "the refused create was asked once");

    // Ten more looks at the error: no call repeated, no state flapping, no new event.
    for _ in 0..10 {
        env.step(STEP).await;
        let now = env.substrate(&pool.pool_id).await;
        assert_eq!((now.state, &now.message), (ResourceState::Error, &s.message));
        let rows = env.substrate_rows(&pool.pool_id).await;
        let row = rows.iter().find(|r| r.name.ends_with("-big")).expect("the refused row");
        assert_eq!(row.state, NodePoolState::Error, "{row:?}");
    }
    assert_eq!(posts(), 1, "a refusal is not asked again while the policy stands");
    assert_eq!(env.events_of("kubernetes.nodepool.error").await, 1);
    assert_eq!(env.events_of("kubernetes.substrate.error").await, 1);

    // Any change of the pool's policy asks again (here the refused flavor is untouched:
    // the provider's answer may depend on what else the pool holds, e.g. its quota).
    let grown =
        with_flavors(&policy, vec![flavor("cpu", on.node_size(), 2), flavor("big", big, 1)]);
    env.update_policy(&pool.pool_id, grown).await;
    for _ in 0..5 {
        env.step(STEP).await;
    }
    assert_eq!(posts(), 2, "asked once more at the new generation");
    assert_eq!(env.substrate(&pool.pool_id).await.state, ResourceState::Error);
}

async fn a_refused_cluster_create_is_asked_once_and_again_after_its_pools_change(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (c, rows) = env
        .create_cluster(
            "alpha",
            ClusterMode::Standard,
            vec![
                ("workers", on.node_size(), Scale::Count(1)),
                ("huge", on.unknown_size(), Scale::Count(1)),
            ],
        )
        .await;
    let posts = || env.calls(Call::CreateCluster);
    let ok = env
        .run_until(10, async |e: &Env| {
            e.cluster(&c.cluster_id).await.status.state == ResourceState::Error
        })
        .await;
    let refused = env.cluster(&c.cluster_id).await;
    assert!(ok, "{refused:?}");
    assert_eq!(posts(), 1);
    for _ in 0..10 {
        env.step(STEP).await;
        assert_eq!(env.cluster(&c.cluster_id).await.status, refused.status, "no flapping");
    }
    assert_eq!(posts(), 1, "the refused create is not asked again while nothing changed");
    assert_eq!(env.events_of("kubernetes.cluster.error").await, 1);

    // The tenant removes the pool the provider refused: the create is asked again, without it.
    let huge = rows.iter().find(|r| r.name == "huge").unwrap();
    env.change_node_pool(&huge.node_pool_id, None, true).await;
    let ok = env
        .run_until(20, async |e: &Env| {
            e.cluster(&c.cluster_id).await.status.state == ResourceState::Ready
        })
        .await;
    assert!(ok, "{:?}", env.cluster(&c.cluster_id).await);
    assert_eq!(posts(), 2);
    assert_eq!(env.node_pool(&huge.node_pool_id).await.state, NodePoolState::Deleted);
    let workers = rows.iter().find(|r| r.name == "workers").unwrap();
    let ok = env
        .run_until(20, async |e: &Env| {
            e.node_pool(&workers.node_pool_id).await.state == NodePoolState::Ready
        })
        .await;
    assert!(ok, "{:?}", env.node_pool(&workers.node_pool_id).await);
}

async fn a_refused_drain_upgrade_stops_refusing_bookings(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (old, new) = on.versions();
    let (pool, policy, _) = env.creating_pool(old, 1).await;
    let b = env.booking(&pool.pool_id);
    env.store.commit(UnitOfWork::new().write(Write::InsertBooking(b.clone()))).await.unwrap();
    on.refuse(&env.sim, Call::Upgrade, "the cluster cannot be upgraded now");
    env.update_policy(&pool.pool_id, with_version(&policy, new)).await;
    let draining =
        env.run_until(5, async |e: &Env| e.substrate(&pool.pool_id).await.upgrade.is_some()).await;
    assert!(draining, "the drain waits for the booking first");
    let end = Write::EndBooking { booking_id: b.booking_id.clone(), at: env.clock.now() };
    env.store.commit(UnitOfWork::new().write(end)).await.unwrap();
    let s = env.until_substrate(&pool.pool_id, ResourceState::Error, 10).await;
    assert!(s.message.as_deref().unwrap_or_default().contains("cannot be upgraded now"), "{s:?}");
    assert_eq!(s.upgrade, None, "the drain marker is cleared with the refusal");
    env.store
        .commit(UnitOfWork::new().write(Write::InsertBooking(env.booking(&pool.pool_id))))
        .await
        .expect("bookings are taken again");
    for _ in 0..5 {
        env.step(STEP).await;
    }
    assert_eq!(env.calls(Call::Upgrade), 1, "the refused upgrade is not asked again");
    assert_eq!(env.substrate(&pool.pool_id).await.upgrade, None);
}

async fn an_adopted_cluster_shows_the_error_of_a_refused_substrate_pool(on: OnProvider) {
    let env = Env::start_on(on).await;
    let pid = env.their_cluster().await;
    let cpu = flavor("cpu", on.node_size(), 1);
    let policy = adopt_policy(&env.account.provider_account_id, &pid, vec![cpu.clone()]);
    let pool = env.create_pool("web", policy.clone()).await;
    let s = env.until_substrate(&pool.pool_id, ResourceState::Ready, 40).await;
    let cluster = s.cluster_id.clone().unwrap();
    let ready = env
        .run_until(5, async |e: &Env| {
            e.cluster(&cluster).await.status.state == ResourceState::Ready
        })
        .await;
    assert!(ready);
    env.update_policy(
        &pool.pool_id,
        with_flavors(&policy, vec![cpu.clone(), flavor("big", on.unknown_size(), 1)]),
    )
    .await;
    env.until_substrate(&pool.pool_id, ResourceState::Error, 10).await;
    let shown = env
        .run_until(5, async |e: &Env| {
            e.cluster(&cluster).await.status.state == ResourceState::Error
        })
        .await;
    let c = env.cluster(&cluster).await;
    assert!(shown, "the cluster follows its pools: {c:?}");
    let m = c.status.message.unwrap_or_default();
    assert!(m.contains(&env.flavor_pool(&pool.pool_id, "big")), "names the pool: {m}");
    // The flavor is fixed: the pool converges and the cluster is ready again.
    let fixed = with_flavors(&policy, vec![cpu, flavor("big", on.node_size(), 1)]);
    env.update_policy(&pool.pool_id, fixed).await;
    env.until_substrate(&pool.pool_id, ResourceState::Ready, 30).await;
    let back = env
        .run_until(5, async |e: &Env| {
            e.cluster(&cluster).await.status.state == ResourceState::Ready
        })
        .await;
    assert!(back, "{:?}", env.cluster(&cluster).await);
}

/// The provider is upgrading the cluster on its own (DOKS answers node-pool changes with
/// a 422 meanwhile; GKE, running its auto-upgrade, with "Cluster is running incompatible
/// operation"): busy, retried, never the pool's error.
async fn a_node_pool_change_refused_while_the_cluster_is_busy_is_retried_not_an_error(
    on: OnProvider,
) {
    let env = Env::start_on(on).await;
    let (c, _, pid) = env.ready_cluster("alpha").await;
    let upgrading = bc_sim::model::kubernetes::ClusterState::Upgrading;
    assert!(on.force_cluster_state(&env.sim, &pid, upgrading, ""));
    let np = env.create_node_pool(&c.cluster_id, "more", on.node_size(), Scale::Count(1)).await;
    for _ in 0..3 {
        env.step(Duration::from_secs(60)).await;
        let row = env.node_pool(&np.node_pool_id).await;
        assert_eq!(row.state, NodePoolState::Pending, "busy is not a refusal: {row:?}");
    }
    assert!(env.calls(Call::CreateNodePool) >= 2, "asked again while busy");
    // Waiting, with the reason on the row (SPEC §8), not a failure of the activation.
    let row = env.node_pool(&np.node_pool_id).await;
    let m = row.message.unwrap_or_default();
    assert!(m.contains("waiting for the provider to finish an earlier change"), "{m}");
    let running = bc_sim::model::kubernetes::ClusterState::Running;
    assert!(on.force_cluster_state(&env.sim, &pid, running, ""));
    let made = env
        .run_until(20, async |e: &Env| {
            e.node_pool(&np.node_pool_id).await.state == NodePoolState::Ready
        })
        .await;
    assert!(made, "{:?}", env.node_pool(&np.node_pool_id).await);
    assert_eq!(env.events_of("kubernetes.nodepool.error").await, 0);
}

/// GKE only: SPEC §11: a load balancer on an account whose provider offers none (GKE's adapter
/// declares none) is `error` naming the provider, from the adapter's declaration, once,
/// and stays so; deleting it still ends it.
#[tokio::test]
async fn a_load_balancer_on_a_provider_offering_none_is_refused_from_its_offer() {
    use bc_reconcile::kinds::reconciler_of;
    use bc_reconcile::runtime::{Runtime, RuntimeConfig};
    let env = Env::start_on(bc_reconcile::testing::OnProvider::Gke).await;
    let reconcilers = vec![reconciler_of(WorkKind::ProviderResources, env.entropy.clone())];
    let runtime = Runtime::new(env.deps.clone(), reconcilers, RuntimeConfig::new("lb"));
    let stepper = bc_reconcile::testing::Stepper::new(
        std::sync::Arc::new(runtime.expect("one reconciler")),
        env.clock.clone(),
    );
    let pool = env.lb_pool("edge", 2).await;
    let spec = bc_store::testing::load_balancer(&pool, &env.account, "x").spec;
    let lb = env.create_load_balancer(&pool, "web", spec).await;
    for _ in 0..5 {
        stepper.step(STEP).await.unwrap();
    }
    let row = env.store.load_balancer_get_any(&lb.load_balancer_id).await.unwrap().unwrap();
    assert_eq!(row.status.state, ResourceState::Error, "{row:?}");
    let m = row.status.message.unwrap_or_default();
    assert!(m.contains("gke offers no load balancers"), "{m}");
    assert_eq!(env.events_of(bc_reconcile::provider_resources::plan::events::ERROR).await, 1);
}
