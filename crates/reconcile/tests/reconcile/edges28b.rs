//! Edges of issue 28 (items 10–12) and issue 29 item 6 (the reconcilers' side): a
//! deleted provider account's objects are unreachable — no provider call is made with a
//! deleted or erased account, and each object says why — and the edge cases of node
//! ends, tenant objects in our Namespace, backoff and the listing cache (`latest` is
//! clusters.rs's `latest_resolves_once_and_is_recorded`, on each provider).
//!
//! Invariant: every test runs the production reconcilers on the production observer
//! against the simulator through the real adapters, on a stepped clock.

use std::sync::Arc;
use std::time::Duration;

use bc_domain::policy::AutoScale;
use bc_domain::ports::{AgentRepo, PageRequest};
use bc_domain::ports::{
    Clock, ClusterRepo, Enqueue, LedgerRepo, LoadBalancerRepo, ObjectKind, Store, UnitOfWork,
    WorkKind, WorkQueue, Write,
};
use bc_domain::{NodePoolState, ResourceState};
use bc_reconcile::runtime::ActivationResult;
use bc_reconcile::testing::{Env, STEADY_RESYNC, Stepper, create_policy, flavor};
use bc_reconcile::{LoadBalancers, Runtime, RuntimeConfig};
use sea_orm::ConnectionTrait as _;

/// What a create that raced the delete could leave before the store re-checked the
/// account in the create's own transaction (and what such a race leaves on a store
/// restored from before it): the account deleted, its sealed credentials erased, while
/// objects on it are live. Written by hand, since the store now refuses to get there.
async fn delete_account_under_live_objects(env: &Env) {
    let sql = format!(
        "UPDATE provider_accounts SET deleted_at = {}, live_name = NULL, credentials = X'' \
         WHERE provider_account_id = '{}'",
        env.clock.now().unix_ms(),
        env.account.provider_account_id
    );
    env.store.connection().execute_unprepared(&sql).await.expect("delete the account");
}

/// Every request the simulated provider has answered.
fn provider_requests(env: &Env) -> u64 {
    env.sim.state().model().total_requests()
}

async fn wake(env: &Env, kind: WorkKind, key: &str) {
    let e = Enqueue { kind, key: key.to_owned(), not_before: env.clock.now() };
    env.store.enqueue(e).await.expect("enqueue");
}

#[tokio::test]
async fn a_deleted_accounts_load_balancer_is_unreachable_and_its_delete_calls_nobody() {
    let env = Env::shared().await;
    let runtime = Runtime::new(
        env.deps.clone(),
        vec![Arc::new(LoadBalancers::default())],
        RuntimeConfig::new("lb-replica"),
    )
    .expect("runtime");
    let lbs = Stepper::new(Arc::new(runtime), env.clock.clone());
    let pool = env.lb_pool("web", 5).await;
    let lb = env.create_load_balancer(&pool, "front", bc_store::testing::lb_spec()).await;
    let id = lb.load_balancer_id.clone();
    for _ in 0..30 {
        if env.store.load_balancer_get_any(&id).await.expect("read").expect("row").status.state
            == ResourceState::Ready
        {
            break;
        }
        lbs.step(STEADY_RESYNC).await.expect("step");
    }
    let ready = env.store.load_balancer_get_any(&id).await.expect("read").expect("row");
    assert_eq!(ready.status.state, ResourceState::Ready, "{ready:?}");

    delete_account_under_live_objects(&env).await;
    let before = provider_requests(&env);
    wake(&env, WorkKind::ProviderResources, id.as_str()).await;
    lbs.step(STEADY_RESYNC).await.expect("step");
    lbs.step(STEADY_RESYNC).await.expect("step");
    let row = env.store.load_balancer_get_any(&id).await.expect("read").expect("row");
    assert_eq!(row.status.state, ResourceState::Error, "{row:?}");
    let message = row.status.message.clone().unwrap_or_default();
    assert!(
        message.contains(env.account.provider_account_id.as_str()) && message.contains("deleted"),
        "the message names the deleted account: {message}"
    );
    assert_eq!(provider_requests(&env), before, "no provider call with a deleted account");

    // The tenant deletes it: nothing can be called, so the row ends with the reason.
    env.delete_load_balancer(&id).await;
    lbs.step(STEADY_RESYNC).await.expect("step");
    let row = env.store.load_balancer_get_any(&id).await.expect("read").expect("row");
    assert_eq!(row.status.state, ResourceState::Deleted, "{row:?}");
    assert!(row.status.message.unwrap_or_default().contains("deleted"));
    assert_eq!(provider_requests(&env), before, "no provider call with a deleted account");
}

#[tokio::test]
async fn a_deleted_accounts_substrate_cluster_and_node_pool_say_so_and_call_nobody() {
    let env = Env::shared().await;
    let (pool, _, _) = env.creating_pool("latest", 1).await;
    let (cluster, rows, _) = env.ready_cluster("tenant-c").await;

    delete_account_under_live_objects(&env).await;
    let before = provider_requests(&env);
    // The tenant changes its node pool (so the node-pool reconciler has something to do).
    env.change_node_pool(&rows[0].node_pool_id, Some(bc_domain::policy::Scale::Count(2)), false)
        .await;
    wake(&env, WorkKind::Substrates, pool.pool_id.as_str()).await;
    wake(&env, WorkKind::Clusters, cluster.cluster_id.as_str()).await;
    for _ in 0..4 {
        env.step(STEADY_RESYNC).await;
    }
    assert_eq!(provider_requests(&env), before, "no provider call with a deleted account");

    let account = env.account.provider_account_id.as_str();
    let s = env.substrate(&pool.pool_id).await;
    assert_eq!(s.state, ResourceState::Error, "{s:?}");
    let m = s.message.unwrap_or_default();
    assert!(m.contains(account) && m.contains("deleted"), "{m}");
    let c = env.store.cluster_get_any(&cluster.cluster_id).await.expect("read").expect("row");
    assert_eq!(c.status.state, ResourceState::Error, "{c:?}");
    let m = c.status.message.unwrap_or_default();
    assert!(m.contains(account) && m.contains("deleted"), "{m}");
    let np = env.store.node_pool_get_any(&rows[0].node_pool_id).await.expect("read").expect("row");
    assert_eq!(np.state, NodePoolState::Error, "{np:?}");
    let m = np.message.unwrap_or_default();
    assert!(m.contains(account) && m.contains("deleted"), "{m}");
}

/// A create-mode policy at `latest` with one flavor `cpu` autoscaled from `min` to `max`.
fn autoscaled(env: &Env, min: u32, max: u32) -> bc_domain::policy::PoolPolicy {
    let mut auto = flavor("cpu", bc_sim::testing::NODE_SIZE, 0);
    auto.count = None;
    auto.auto_scale = Some(AutoScale { min, max });
    create_policy(&env.account.provider_account_id, "latest", vec![auto])
}

/// The live nodes of `pool` as the store pages them.
async fn live_nodes(env: &Env, pool: &bc_domain::PoolId) -> Vec<bc_domain::model::Node> {
    let page = PageRequest::first(100);
    env.store.node_list_by_pool(pool, &page).await.expect("nodes").items
}

#[tokio::test]
async fn nodes_the_autoscaler_removed_end_after_the_grace_with_their_credentials() {
    let env = Env::shared().await;
    let pool = env.create_pool("web", autoscaled(&env, 1, 4)).await;
    let s = env.until_substrate(&pool.pool_id, ResourceState::Ready, 40).await;
    let pid = env.cluster(s.cluster_id.as_ref().unwrap()).await.provider_cluster_id.unwrap();
    env.provider_autoscales_to(&pid, 3);
    let grown =
        env.run_until(20, async |e: &Env| e.substrate(&pool.pool_id).await.nodes_joined == 3).await;
    assert!(grown, "{:?}", env.substrate(&pool.pool_id).await);
    let before = live_nodes(&env, &pool.pool_id).await;
    assert_eq!(before.len(), 3);

    // The autoscaler takes two away. Every bcd heartbeated until then (its last sign of
    // life); the runs that follow see one Node listed.
    env.provider_autoscales_to(&pid, 1);
    let left_at = env.clock.now();
    for n in &before {
        let beat = Write::Heartbeat { node_id: n.node_id.clone(), at: left_at };
        env.store.commit(UnitOfWork::new().write(beat)).await.expect("heartbeat");
    }
    let grace = time::Duration::seconds(600);
    let mut ended_at = None;
    let mut seen_unlisted = false;
    for _ in 0..40 {
        env.step(Duration::from_secs(60)).await;
        let live = live_nodes(&env, &pool.pool_id).await.len();
        if env.clock.now() - left_at < grace {
            assert_eq!(live, 3, "a node ended within the grace, at {}", env.clock.now() - left_at);
            seen_unlisted |= env.substrate(&pool.pool_id).await.nodes_listed == 1;
        }
        if live == 1 {
            ended_at = Some(env.clock.now());
            break;
        }
    }
    let ended_at = ended_at.expect("the removed nodes end");
    assert!(seen_unlisted, "the substrate saw them unlisted within the grace");
    assert!(ended_at - left_at >= grace);
    let s = env.substrate(&pool.pool_id).await;
    assert_eq!(s.nodes_listed, 1, "{s:?}");
    let listed: Vec<String> = {
        let mut model = env.sim.state().model();
        let nodes = model.cluster_nodes(&pid, env.clock.now()).expect("nodes");
        nodes.into_iter().map(|n| n.name).collect()
    };
    let gone: Vec<_> = before.iter().filter(|n| !listed.contains(&n.node_name)).collect();
    assert_eq!(gone.len(), 2, "{listed:?}");
    for n in &gone {
        let found = env.store.node_find_by_credential_hash(&n.credential_hash).await.unwrap();
        assert!(found.is_none(), "{} keeps a valid credential", n.node_name);
    }
    let kept = &live_nodes(&env, &pool.pool_id).await[0];
    assert!(listed.contains(&kept.node_name));
    let found = env.store.node_find_by_credential_hash(&kept.credential_hash).await.unwrap();
    assert!(found.is_some(), "the listed node keeps its credential");
    let s = env.substrate(&pool.pool_id).await;
    assert_eq!((s.state, s.nodes_listed, s.nodes_joined), (ResourceState::Ready, 1, 1), "{s:?}");
}

#[tokio::test]
async fn a_namespace_holding_the_tenants_objects_stays_named_in_one_event() {
    let env = Env::shared().await;
    let pid = env.tenant_cluster();
    let pool = env.adopting_pool(&pid).await;
    let ns = bc_domain::name::substrate_namespace(&pool.pool_id);
    let kube = &env.sim.state().kube;
    // The tenant keeps a ConfigMap of their own in the pool's Namespace.
    let theirs = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "app-config", "namespace": ns}, "data": {"k": "v"}});
    kube.apply_manifest(&pid, "kubectl", &theirs, false, env.clock.now()).expect("tenant's");

    env.archive(&pool.pool_id).await;
    env.until_substrate(&pool.pool_id, ResourceState::Deleted, 30).await;
    let kept = |kind, name: &str| kube.get_object(&pid, kind, Some(&ns), name).is_some();
    assert!(
        kube.get_object(&pid, ObjectKind::Namespace, None, &ns).is_some(),
        "the Namespace holding the tenant's ConfigMap stays"
    );
    assert!(kube.get(&pid, bc_sim::kube::Resource::ConfigMap, Some(&ns), "app-config").is_ok());
    for (kind, name) in [
        (ObjectKind::DaemonSet, "bcd"),
        (ObjectKind::Secret, "bcd-join"),
        (ObjectKind::ServiceAccount, "bcd"),
    ] {
        assert!(!kept(kind, name), "our {name} is deleted");
    }
    let subject = bc_domain::model::subjects::pool(&pool.pool_id);
    let events = env.store.event_list(&env.tenant, Some(&subject), 0, 10_000).await.unwrap();
    let retained: Vec<_> =
        events.iter().filter(|e| e.kind == "kubernetes.substrate.resources-retained").collect();
    assert_eq!(retained.len(), 1, "one event: {events:?}");
    let m = retained[0].data["message"].as_str().unwrap_or_default();
    assert!(m.contains(&ns) && m.contains("ConfigMap app-config"), "{m}");
}

#[tokio::test]
async fn a_namespace_holding_only_what_we_and_the_cluster_made_is_deleted() {
    let env = Env::shared().await;
    let pid = env.tenant_cluster();
    let pool = env.adopting_pool(&pid).await;
    let ns = bc_domain::name::substrate_namespace(&pool.pool_id);
    env.archive(&pool.pool_id).await;
    env.until_substrate(&pool.pool_id, ResourceState::Deleted, 30).await;
    let kube = &env.sim.state().kube;
    assert!(kube.get_object(&pid, ObjectKind::Namespace, None, &ns).is_none());
}

#[tokio::test]
async fn a_substrate_of_scale_to_zero_flavors_starts_its_cluster_with_one_node() {
    let env = Env::shared().await;
    let pool = env.create_pool("web", autoscaled(&env, 0, 3)).await;
    let s = env.until_substrate(&pool.pool_id, ResourceState::Ready, 40).await;
    let pid = env.cluster(s.cluster_id.as_ref().unwrap()).await.provider_cluster_id.unwrap();
    let mut model = env.sim.state().model();
    let c = model.find_cluster(&pid, env.clock.now()).expect("the cluster");
    let np = &c.node_pools[0];
    assert_eq!((np.count, np.auto_scale, np.min_nodes, np.max_nodes), (1, true, 0, 3), "{np:?}");
}

/// The provider now offers versions newer than what the cluster `pid` runs.
fn a_newer_version_comes_out(env: &Env, pid: &str) {
    let older = bc_sim::model::catalog::VERSIONS[2];
    assert!(env.sim.state().model().force_cluster_version(pid, older));
}

#[tokio::test]
async fn an_upgrade_is_asked_once_while_the_provider_still_says_running() {
    let env = Env::shared().await;
    let (cluster, _, pid) = env.ready_cluster("tenant-c").await;
    a_newer_version_comes_out(&env, &pid);
    let target = bc_sim::model::catalog::VERSIONS[3];
    env.change_cluster(&cluster.cluster_id, Some(target), None, false).await;
    let upgrades = || env.count("POST", bc_sim::model::routes::UPGRADE);
    for _ in 0..10 {
        env.step(Duration::from_secs(5)).await;
        if upgrades() > 0 {
            break;
        }
    }
    assert_eq!(upgrades(), 1, "the upgrade was asked");
    // DigitalOcean may go on showing the cluster running (at its old version) for a while
    // after accepting POST /upgrade.
    let still_running = |env: &Env| {
        assert!(env.sim.state().model().force_cluster_running(&pid));
    };
    for _ in 0..10 {
        still_running(&env);
        env.step(Duration::from_secs(30)).await;
    }
    assert_eq!(upgrades(), 1, "asked once, not again on every look at a cluster still running");
}

#[tokio::test]
async fn a_substrate_in_error_backs_off_with_jitter_and_keeps_counting() {
    let env = Env::shared().await;
    let (pool, _, _) = env.creating_pool("latest", 1).await;
    // A cause that stays: the account is gone.
    delete_account_under_live_objects(&env).await;
    wake(&env, WorkKind::Substrates, pool.pool_id.as_str()).await;
    let mut waits = Vec::new();
    for _ in 0..40 {
        for r in env.step(Duration::from_secs(3_600)).await {
            if r.kind == WorkKind::Substrates
                && r.key == pool.pool_id.as_str()
                && let ActivationResult::Converging { at } = r.result
            {
                waits.push((at - r.finished).whole_seconds());
            }
        }
        if waits.len() == 6 {
            break;
        }
    }
    assert_eq!(env.substrate(&pool.pool_id).await.state, ResourceState::Error);
    assert_eq!(waits.len(), 6, "{waits:?}");
    // 120 s doubling to the half-hour cap, each up to a quarter longer.
    for (w, floor) in waits.iter().zip([120, 240, 480, 960, 1_800, 1_800]) {
        assert!((floor..=floor + floor / 4 + 1).contains(w), "{waits:?}");
    }
}
