//! Who owns what (SPEC §6, §8): a cluster made for a substrate belongs to its pool, and a
//! provider node pool belongs to whoever made it — stepped on a manual clock against
//! the simulator.

use std::time::Duration;

use bc_domain::policy::Scale;
use bc_domain::ports::{Clock, ClusterRepo};
use bc_domain::{NodePoolState, PoolId, ResourceState};
use bc_reconcile::testing::{Env, adopt_policy, flavor};
use bc_sim::model::routes;
use bc_sim::testing::{NODE_SIZE, TEST_TOKEN, node_pool};

/// Longer than any wait a reconciler asks for.
const STEP: Duration = Duration::from_secs(600);

/// The provider id of the cluster of `pool`'s substrate.
async fn provider_cluster(env: &Env, pool: &PoolId) -> String {
    let s = env.substrate(pool).await;
    env.cluster(s.cluster_id.as_ref().unwrap()).await.provider_cluster_id.unwrap()
}

/// The names of the provider cluster's node pools, sorted.
fn pool_names(env: &Env, pid: &str) -> Vec<String> {
    let mut m = env.sim.state().model();
    let c = m.find_cluster(pid, env.clock.now());
    let mut names: Vec<String> =
        c.map(|c| c.node_pools.into_iter().map(|p| p.name).collect()).unwrap_or_default();
    names.sort();
    names
}

fn cluster_exists(env: &Env, pid: &str) -> bool {
    env.sim.state().model().find_cluster(pid, env.clock.now()).is_some()
}

#[tokio::test]
async fn another_pool_cannot_adopt_a_cluster_made_for_a_substrate() {
    let env = Env::start().await;
    let account = env.account.provider_account_id.clone();
    let (a, _, _) = env.creating_pool("latest", 1).await;
    let pid = provider_cluster(&env, &a.pool_id).await;
    let b =
        env.create_pool("b", adopt_policy(&account, &pid, vec![flavor("gpu", NODE_SIZE, 1)])).await;
    let s = env.until_substrate(&b.pool_id, ResourceState::Error, 20).await;
    let m = s.message.clone().unwrap_or_default();
    assert!(m.contains(a.pool_id.as_str()) && m.contains("add a flavor"), "{m}");
    let row = env.cluster(env.substrate(&a.pool_id).await.cluster_id.as_ref().unwrap()).await;
    assert_eq!(row.substrate_pool_ids, vec![a.pool_id.clone()], "B is not recorded on A's cluster");
    assert_eq!(
        pool_names(&env, &pid),
        vec![format!("bc-{}-cpu", a.pool_id.dashed())],
        "no pool of B"
    );
    // Not asked again while B's policy stands.
    let gets = env.count("GET", routes::CLUSTER);
    for _ in 0..5 {
        env.step(STEP).await;
    }
    assert_eq!(env.count("GET", routes::CLUSTER), gets, "B's refusal stands");
    assert_eq!(env.substrate(&b.pool_id).await.message, s.message);
}

#[tokio::test]
async fn teardown_does_not_delete_a_cluster_holding_a_node_pool_it_did_not_make() {
    let env = Env::start().await;
    let account = env.account.provider_account_id.clone();
    let (a, _, _) = env.creating_pool("latest", 1).await;
    let pid = provider_cluster(&env, &a.pool_id).await;
    // The tenant adds a pool of their own at the provider, on the pool's cluster.
    let now = env.clock.now();
    env.sim
        .state()
        .model()
        .create_node_pool(TEST_TOKEN, &pid, node_pool("extra", 1, &[]), now)
        .unwrap();
    env.archive(&a.pool_id).await;
    let s = env.until_substrate(&a.pool_id, ResourceState::Error, 20).await;
    let m = s.message.clone().unwrap_or_default();
    assert!(m.contains("extra"), "the message names what still uses the cluster: {m}");
    for _ in 0..3 {
        env.step(STEP).await;
    }
    assert!(cluster_exists(&env, &pid), "the cluster stays while another pool uses it");
    assert_eq!(env.count("DELETE", routes::ASSOCIATED_SELECTIVE), 0);
    // The tenant moves their pool away: teardown goes on.
    let extra = {
        let mut model = env.sim.state().model();
        let c = model.find_cluster(&pid, env.clock.now()).unwrap();
        c.node_pools.into_iter().find(|p| p.name == "extra").unwrap().id
    };
    env.sim.state().model().delete_node_pool(TEST_TOKEN, &pid, &extra, env.clock.now()).unwrap();
    env.until_substrate(&a.pool_id, ResourceState::Deleted, 40).await;
    assert_eq!(env.store.cluster_count_live_by_account(&account).await.unwrap(), 0);
}

#[tokio::test]
async fn a_tenant_node_pool_never_takes_over_a_provider_pool_of_its_name() {
    let env = Env::start().await;
    let (c, _, pid) = env.ready_cluster("alpha").await;
    // The tenant made a pool named `extra` at the provider, outside this system.
    let theirs = env
        .sim
        .state()
        .model()
        .create_node_pool(TEST_TOKEN, &pid, node_pool("extra", 3, &[]), env.clock.now())
        .unwrap();
    // A `kubernetesNodePools.create {name: "extra"}` that got through (the API refuses
    // it now; a row recorded before that check, or raced past it, must still be safe).
    let row = env.create_node_pool(&c.cluster_id, "extra", NODE_SIZE, Scale::Count(1)).await;
    let ok = env
        .run_until(10, async |e: &Env| {
            e.node_pool(&row.node_pool_id).await.state == NodePoolState::Error
        })
        .await;
    let got = env.node_pool(&row.node_pool_id).await;
    assert!(ok, "{got:?}");
    assert!(got.message.as_deref().unwrap_or_default().contains(&theirs.id), "{got:?}");
    assert_eq!(got.provider_node_pool_id, None, "never recorded as ours");
    env.change_node_pool(&row.node_pool_id, None, true).await;
    let ok = env
        .run_until(10, async |e: &Env| {
            e.node_pool(&row.node_pool_id).await.state == NodePoolState::Deleted
        })
        .await;
    assert!(ok);
    let mut m = env.sim.state().model();
    let now_theirs =
        m.get_node_pool(TEST_TOKEN, &pid, &theirs.id, env.clock.now()).expect("their pool stays");
    assert_eq!(now_theirs.count, 3, "never resized");
    drop(m);
    assert_eq!(env.count("PUT", routes::NODE_POOL), 0);
    assert_eq!(env.count("DELETE", routes::NODE_POOL), 0);
}
