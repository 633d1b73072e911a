//! Who owns what (SPEC §6, §8): a cluster made for a substrate belongs to its pool, and a
//! provider node pool belongs to whoever made it — stepped on a manual clock against
//! the simulator, on each provider.

use std::time::Duration;

use bc_domain::policy::Scale;
use bc_domain::ports::{ClusterRepo, NodePoolRequest, ProviderNodePool};
use bc_domain::{NodePoolState, ProviderError, ResourceState};
use bc_reconcile::ProviderCall;
use bc_reconcile::on_each_provider;
use bc_reconcile::testing::{Call, Env, OnProvider, adopt_policy, flavor};

on_each_provider!(
    another_pool_cannot_adopt_a_cluster_made_for_a_substrate,
    teardown_does_not_delete_a_cluster_holding_a_node_pool_it_did_not_make,
    a_tenant_node_pool_never_takes_over_a_provider_pool_of_its_name,
);

/// Longer than any wait a reconciler asks for.
const STEP: Duration = Duration::from_secs(600);

/// The tenant adds node pool `name` of `count` nodes to provider cluster `pid` at the
/// provider, outside this system.
async fn tenants_pool(env: &Env, pid: &str, name: &str, count: u32) -> ProviderNodePool {
    let req = NodePoolRequest {
        size: env.on.node_size().into(),
        ..bc_sim::testing::node_pool_request(name, count)
    };
    let k = env.provider();
    let made = k.kubernetes().create_node_pool(pid, &req).await.expect("the tenant's pool");
    // Its nodes come up (GKE counts a pool's nodes, not what was asked).
    for _ in 0..30 {
        if k.kubernetes().get_node_pool(pid, &made.id).await.expect("their pool").count == count {
            break;
        }
        env.cloud.step(60);
    }
    made
}

async fn another_pool_cannot_adopt_a_cluster_made_for_a_substrate(on: OnProvider) {
    let env = Env::start_on(on).await;
    let account = env.account.provider_account_id.clone();
    let (a, _, _) = env.creating_pool("latest", 1).await;
    let pid = env.substrate_cluster(&a.pool_id).await;
    let b = env
        .create_pool("b", adopt_policy(&account, &pid, vec![flavor("gpu", on.node_size(), 1)]))
        .await;
    let s = env.until_substrate(&b.pool_id, ResourceState::Error, 20).await;
    let m = s.message.clone().unwrap_or_default();
    assert!(m.contains(a.pool_id.as_str()) && m.contains("add a flavor"), "{m}");
    let row = env.cluster(env.substrate(&a.pool_id).await.cluster_id.as_ref().unwrap()).await;
    assert_eq!(row.substrate_pool_ids, vec![a.pool_id.clone()], "B is not recorded on A's cluster");
    assert_eq!(
        env.pool_names(&pid).await,
        vec![env.flavor_pool(&a.pool_id, "cpu")],
        "no pool of B"
    );
    // Not asked again while B's policy stands.
    let gets = env.made(ProviderCall::GetCluster);
    for _ in 0..5 {
        env.step(STEP).await;
    }
    assert_eq!(env.made(ProviderCall::GetCluster), gets, "B's refusal stands");
    assert_eq!(env.substrate(&b.pool_id).await.message, s.message);
}

async fn teardown_does_not_delete_a_cluster_holding_a_node_pool_it_did_not_make(on: OnProvider) {
    let env = Env::start_on(on).await;
    let account = env.account.provider_account_id.clone();
    let (a, _, _) = env.creating_pool("latest", 1).await;
    let pid = env.substrate_cluster(&a.pool_id).await;
    // The tenant adds a pool of their own at the provider, on the pool's cluster.
    let extra = tenants_pool(&env, &pid, "extra", 1).await;
    env.archive(&a.pool_id).await;
    let s = env.until_substrate(&a.pool_id, ResourceState::Error, 20).await;
    let m = s.message.clone().unwrap_or_default();
    assert!(m.contains("extra"), "the message names what still uses the cluster: {m}");
    for _ in 0..3 {
        env.step(STEP).await;
    }
    assert!(env.provider().kubernetes().get_cluster(&pid).await.is_ok(), "the cluster stays");
    assert_eq!(env.calls(Call::DeleteCluster), 0);
    // The tenant moves their pool away (once the provider takes the change): teardown
    // goes on.
    let mut removed = false;
    for _ in 0..10 {
        match env.provider().kubernetes().delete_node_pool(&pid, &extra.id).await {
            Ok(()) => {
                removed = true;
                break;
            }
            Err(ProviderError::Busy { .. }) => {
                env.step(Duration::from_secs(60)).await;
            }
            Err(e) => panic!("the tenant's delete: {e}"),
        }
    }
    assert!(removed, "the tenant's pool was deleted");
    env.until_substrate(&a.pool_id, ResourceState::Deleted, 40).await;
    assert_eq!(env.store.cluster_count_live_by_account(&account).await.unwrap(), 0);
}

async fn a_tenant_node_pool_never_takes_over_a_provider_pool_of_its_name(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (c, _, pid) = env.ready_cluster("alpha").await;
    // The tenant made a pool named `extra` at the provider, outside this system.
    let theirs = tenants_pool(&env, &pid, "extra", 3).await;
    // A `kubernetesNodePools.create {name: "extra"}` that got through (the API refuses
    // it now; a row recorded before that check, or raced past it, must still be safe).
    let row = env.create_node_pool(&c.cluster_id, "extra", on.node_size(), Scale::Count(1)).await;
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
    let now_theirs = env.provider().kubernetes().get_node_pool(&pid, &theirs.id).await;
    assert_eq!(now_theirs.expect("their pool stays").count, 3, "never resized");
    assert_eq!(env.calls(Call::UpdateNodePool), 0);
    assert_eq!(env.calls(Call::DeleteNodePool), 0);
}
