//! `kubernetes.clusters` and `kubernetes.nodepools` against the simulator through the
//! production adapters and the real SQLite store, stepped on a manual clock: create with the first pools,
//! add, resize, delete pools, refusals and their recovery, retried faults, upgrade, HA,
//! delete, the provider's own pools, autopilot.

use std::time::Duration;

use bc_domain::model::{ClusterMode, NodePoolOrigin};
use bc_domain::policy::{AutoScale, Scale};
use bc_domain::ports::*;
use bc_domain::{ClusterId, NodePoolState, ResourceState};
use bc_reconcile::on_each_provider;
use bc_reconcile::testing::{Call, Env, OnProvider};
use bc_sim::model::routes;
use bc_sim::testing::NODE_SIZE;

const STEP: Duration = Duration::from_secs(600);

/// A new adapter of the test account (its calls are counted).
fn provider(env: &Env) -> std::sync::Arc<dyn ProviderImpl> {
    env.provider()
}

on_each_provider!(
    a_cluster_is_created_with_its_first_pools_then_pools_are_added_resized_and_deleted,
    a_refused_pool_that_is_deleted_lets_the_cluster_be_ready,
    a_refused_node_pool_errors_the_pool_and_the_cluster_and_waits_for_a_change,
    server_errors_and_throttling_on_pools_are_retried_not_refusals,
    upgrade_and_delete,
    the_providers_own_pools_are_recorded_read_only,
    a_first_pool_deleted_after_a_lost_create_does_not_survive_at_the_provider,
);

async fn until_cluster(
    env: &Env,
    id: &ClusterId,
    state: ResourceState,
    max: usize,
) -> bc_domain::model::KubernetesCluster {
    let ok = env.run_until(max, async |e: &Env| e.cluster(id).await.status.state == state).await;
    let c = env.cluster(id).await;
    assert!(ok, "cluster not {state}: {c:?}");
    c
}

/// Asks for `version` and steps until the cluster runs it, `ready`.
async fn upgrade_to(env: &Env, id: &ClusterId, version: &str) {
    env.change_cluster(id, Some(version), None, false).await;
    let ok = env
        .run_until(30, async |e: &Env| {
            let c = e.cluster(id).await;
            c.status.state == ResourceState::Ready && c.version.as_deref() == Some(version)
        })
        .await;
    assert!(ok, "{:?}", env.cluster(id).await);
}

/// Steps until the cluster is ready with every tenant pool of it ready.
async fn until_all_ready(env: &Env, id: &ClusterId, max: usize) {
    let ok = env
        .run_until(max, async |e: &Env| {
            let rows = e
                .store
                .node_pool_list_by_cluster(id, &PageRequest::first(100))
                .await
                .unwrap()
                .items;
            e.cluster(id).await.status.state == ResourceState::Ready
                && rows.iter().filter(|r| r.origin == NodePoolOrigin::Created).all(|r| {
                    r.state == NodePoolState::Ready && r.observed_generation == r.generation
                })
        })
        .await;
    let rows = env.store.node_pool_list_by_cluster(id, &PageRequest::first(100)).await.unwrap();
    assert!(ok, "{:?} {:?}", env.cluster(id).await, rows.items);
}

async fn a_cluster_is_created_with_its_first_pools_then_pools_are_added_resized_and_deleted(
    on: OnProvider,
) {
    let env = Env::start_on(on).await;
    let (c, rows) = env
        .create_cluster(
            "alpha",
            ClusterMode::Standard,
            vec![
                ("workers", on.node_size(), Scale::Count(2)),
                ("batch", on.other_size(), Scale::Count(1)),
            ],
        )
        .await;
    until_all_ready(&env, &c.cluster_id, 30).await;
    let c = env.cluster(&c.cluster_id).await;
    let pid = c.provider_cluster_id.clone().unwrap();
    let pc = provider(&env).kubernetes().get_cluster(&pid).await.unwrap();
    assert_eq!(pc.name, "alpha");
    assert_eq!(pc.node_pools.len(), 2, "the first pools came with the create call");
    assert_eq!(env.calls(Call::CreateNodePool), 0);
    assert_eq!(c.version.as_deref(), Some(pc.version.as_str()));
    let w = env.node_pool(&rows[0].node_pool_id).await;
    assert_eq!((w.nodes_listed, w.nodes_ready, w.provider_node_pool_id.is_some()), (2, 2, true));

    // Add a pool: the cluster is updating while it converges.
    let extra = env
        .create_node_pool(
            &c.cluster_id,
            "extra",
            on.node_size(),
            Scale::AutoScale(AutoScale { min: 1, max: 3 }),
        )
        .await;
    let saw_updating = env
        .run_until(10, async |e: &Env| {
            e.cluster(&c.cluster_id).await.status.state == ResourceState::Updating
        })
        .await;
    assert!(saw_updating);
    until_all_ready(&env, &c.cluster_id, 20).await;
    assert_eq!(env.calls(Call::CreateNodePool), 1);
    // Resize.
    env.change_node_pool(&rows[0].node_pool_id, Some(Scale::Count(3)), false).await;
    until_all_ready(&env, &c.cluster_id, 20).await;
    assert_eq!(env.node_pool(&rows[0].node_pool_id).await.nodes_listed, 3);
    // Delete.
    env.change_node_pool(&extra.node_pool_id, None, true).await;
    let gone = env
        .run_until(20, async |e: &Env| {
            e.node_pool(&extra.node_pool_id).await.state == NodePoolState::Deleted
        })
        .await;
    assert!(gone);
    until_all_ready(&env, &c.cluster_id, 10).await;
    let names: Vec<String> = provider(&env)
        .kubernetes()
        .get_cluster(&pid)
        .await
        .unwrap()
        .node_pools
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert!(!names.contains(&"extra".to_owned()), "{names:?}");
    let k = env.event_kinds().await;
    for want in
        ["kubernetes.cluster.ready", "kubernetes.nodepool.ready", "kubernetes.nodepool.deleted"]
    {
        assert!(k.iter().any(|x| x == want), "{want} not in {k:?}");
    }
    let events = env.store.event_list(&env.tenant, None, 0, 1000).await.unwrap();
    assert!(
        events
            .iter()
            .filter(|e| e.kind.starts_with("kubernetes."))
            .all(|e| e.subject == format!("compute.kubernetes.clusters.{}", c.cluster_id))
    );
}

/// A standing refusal of the pool's create (the provider's own: DigitalOcean's 422,
/// GKE's 403 PERMISSION_DENIED) errors the pool and the cluster, and is not asked again
/// until the pool changes.
async fn a_refused_node_pool_errors_the_pool_and_the_cluster_and_waits_for_a_change(
    on: OnProvider,
) {
    let env = Env::start_on(on).await;
    let (c, _, _) = env.ready_cluster("alpha").await;
    on.refuse(&env.sim, Call::CreateNodePool, "node pool quota exceeded");
    let np = env.create_node_pool(&c.cluster_id, "more", on.node_size(), Scale::Count(1)).await;
    let c2 = until_cluster(&env, &c.cluster_id, ResourceState::Error, 10).await;
    let m = c2.status.message.unwrap();
    assert!(m.contains("more") && m.contains("node pool quota exceeded"), "{m}");
    let row = env.node_pool(&np.node_pool_id).await;
    assert_eq!(row.state, NodePoolState::Error);
    let m = row.message.unwrap();
    assert!(m.contains(&on.refusal_status().to_string()), "{m}");
    let calls = env.calls(Call::CreateNodePool);
    for _ in 0..5 {
        env.step(STEP).await;
    }
    assert_eq!(env.calls(Call::CreateNodePool), calls, "not asked again until the pool changes");
    assert!(env.event_kinds().await.iter().any(|k| k == "kubernetes.nodepool.error"));
    assert!(env.event_kinds().await.iter().any(|k| k == "kubernetes.cluster.error"));
    // The refusal is lifted at the provider and the tenant changes the pool: it is made.
    on.lift_refusal(&env.sim, Call::CreateNodePool);
    env.change_node_pool(&np.node_pool_id, Some(Scale::Count(2)), false).await;
    until_all_ready(&env, &c.cluster_id, 20).await;
    assert_eq!(env.node_pool(&np.node_pool_id).await.nodes_ready, 2);
}

async fn a_refused_pool_that_is_deleted_lets_the_cluster_be_ready(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (c, _, _) = env.ready_cluster("alpha").await;
    let np = env.create_node_pool(&c.cluster_id, "huge", on.unknown_size(), Scale::Count(1)).await;
    until_cluster(&env, &c.cluster_id, ResourceState::Error, 10).await;
    env.change_node_pool(&np.node_pool_id, None, true).await;
    until_cluster(&env, &c.cluster_id, ResourceState::Ready, 10).await;
    assert_eq!(env.node_pool(&np.node_pool_id).await.state, NodePoolState::Deleted);
}

async fn server_errors_and_throttling_on_pools_are_retried_not_refusals(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (c, _, _) = env.ready_cluster("alpha").await;
    env.fail(Call::CreateNodePool, 2);
    env.throttle(Call::CreateNodePool, 1);
    let np = env.create_node_pool(&c.cluster_id, "more", on.node_size(), Scale::Count(1)).await;
    for _ in 0..30 {
        let row = env.node_pool(&np.node_pool_id).await;
        assert_ne!(row.state, NodePoolState::Error);
        assert_ne!(env.cluster(&c.cluster_id).await.status.state, ResourceState::Error);
        if row.state == NodePoolState::Ready {
            break;
        }
        env.step(STEP).await;
    }
    assert_eq!(env.node_pool(&np.node_pool_id).await.state, NodePoolState::Ready);
    assert_eq!(env.calls(Call::CreateNodePool), 4);
}

/// Upgraded (control plane, then its pools where the provider upgrades them apart),
/// then deleted: one create call, the pools' rows deleted with the cluster.
async fn upgrade_and_delete(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (old, new) = on.versions();
    let (c, rows) = env
        .create_cluster(
            "alpha",
            ClusterMode::Standard,
            vec![("workers", on.node_size(), Scale::Count(1))],
        )
        .await;
    // Pin the version before the first run (as the API's create would store it).
    env.change_cluster(&c.cluster_id, Some(old), None, false).await;
    until_all_ready(&env, &c.cluster_id, 30).await;
    let pid = env.cluster(&c.cluster_id).await.provider_cluster_id.unwrap();
    let k = provider(&env);
    assert_eq!(k.kubernetes().get_cluster(&pid).await.unwrap().version, old);
    upgrade_to(&env, &c.cluster_id, new).await;
    assert_eq!(k.kubernetes().get_cluster(&pid).await.unwrap().version, new);
    assert_eq!(env.calls(Call::Upgrade), 1, "one upgrade call");
    env.change_cluster(&c.cluster_id, None, None, true).await;
    until_cluster(&env, &c.cluster_id, ResourceState::Deleted, 20).await;
    assert!(matches!(
        k.kubernetes().get_cluster(&pid).await,
        Err(bc_domain::ProviderError::NotFound)
    ));
    assert_eq!(env.node_pool(&rows[0].node_pool_id).await.state, NodePoolState::Deleted);
    assert!(env.event_kinds().await.iter().any(|k| k == "kubernetes.cluster.deleted"));
    assert_eq!(env.calls(Call::CreateCluster), 1);
}

/// DigitalOcean only: its high-availability control plane is a switch on a running
/// cluster; on GKE it is where the cluster is (regional), fixed when it is made.
#[tokio::test]
async fn high_availability_is_turned_on() {
    let env = Env::start().await;
    let (c, _, _) = env.ready_cluster("alpha").await;
    let pid = env.cluster(&c.cluster_id).await.provider_cluster_id.unwrap();
    env.change_cluster(&c.cluster_id, None, Some(true), false).await;
    let ok = env
        .run_until(30, async |e: &Env| {
            let ha = e.provider().kubernetes().get_cluster(&pid).await.unwrap().high_availability;
            e.cluster(&c.cluster_id).await.status.state == ResourceState::Ready && ha
        })
        .await;
    assert!(ok, "{:?}", env.cluster(&c.cluster_id).await);
}

async fn the_providers_own_pools_are_recorded_read_only(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (c, _, _) = env.ready_cluster("alpha").await;
    let pid = env.cluster(&c.cluster_id).await.provider_cluster_id.unwrap();
    // Someone adds a pool in the provider's console.
    let console = NodePoolRequest {
        size: on.node_size().into(),
        ..bc_sim::testing::node_pool_request("console", 1)
    };
    let outside = loop {
        // On GKE a pool is added once the cluster's last operation is done.
        match provider(&env).kubernetes().create_node_pool(&pid, &console).await {
            Err(bc_domain::ProviderError::Busy { .. }) => env.step(STEP).await,
            made => break made.unwrap(),
        };
    };
    env.change_cluster(&c.cluster_id, None, None, false).await; // a resync
    let ok = env
        .run_until(10, async |e: &Env| {
            let rows = e
                .store
                .node_pool_list_by_cluster(&c.cluster_id, &PageRequest::first(100))
                .await
                .unwrap()
                .items;
            rows.iter().any(|r| r.name == "console")
        })
        .await;
    assert!(ok);
    let rows = env
        .store
        .node_pool_list_by_cluster(&c.cluster_id, &PageRequest::first(100))
        .await
        .unwrap()
        .items;
    let console = rows.iter().find(|r| r.name == "console").unwrap();
    assert_eq!(
        (console.origin, console.managed_by.clone(), console.provider_node_pool_id.as_deref()),
        (NodePoolOrigin::Provider, None, Some(outside.id.as_str()))
    );
    // The node-pool reconciler never acts on it.
    let puts = env.calls(Call::UpdateNodePool);
    env.store
        .enqueue(Enqueue {
            kind: WorkKind::NodePools,
            key: console.node_pool_id.to_string(),
            not_before: env.deps.clock.now(),
        })
        .await
        .unwrap();
    env.step(STEP).await;
    assert_eq!(env.calls(Call::UpdateNodePool), puts);
    // Removed at the provider: its row goes.
    loop {
        match provider(&env).kubernetes().delete_node_pool(&pid, &outside.id).await {
            Err(bc_domain::ProviderError::Busy { .. }) => env.step(STEP).await,
            done => break done.unwrap(),
        };
    }
    for _ in 0..3 {
        env.step(Duration::from_secs(60)).await;
    }
    env.change_cluster(&c.cluster_id, None, None, false).await;
    let ok = env
        .run_until(10, async |e: &Env| {
            e.node_pool(&console.node_pool_id).await.state == NodePoolState::Deleted
        })
        .await;
    assert!(ok);
}

#[tokio::test]
async fn autopilot_clusters_have_no_node_pools() {
    // DigitalOcean offers no autopilot, so the cluster itself ends in `error` (see the
    // next test); a node pool added to an autopilot cluster is refused either way,
    // before any provider call.
    let env = Env::start().await;
    let (c, _) = env.create_cluster("auto", ClusterMode::Autopilot, vec![]).await;
    until_cluster(&env, &c.cluster_id, ResourceState::Error, 10).await;
    let np = env.create_node_pool(&c.cluster_id, "nope", NODE_SIZE, Scale::Count(1)).await;
    let ok = env
        .run_until(5, async |e: &Env| {
            e.node_pool(&np.node_pool_id).await.state == NodePoolState::Error
        })
        .await;
    assert!(ok);
    assert!(env.node_pool(&np.node_pool_id).await.message.unwrap().contains("autopilot"));
    assert_eq!(env.count("POST", routes::NODE_POOLS), 0);
}

/// DigitalOcean only: the provider without autopilot clusters.
#[tokio::test]
async fn autopilot_on_a_provider_without_it_is_an_error_naming_the_account() {
    let env = Env::start().await;
    let (c, _) = env.create_cluster("auto", ClusterMode::Autopilot, vec![]).await;
    let c = until_cluster(&env, &c.cluster_id, ResourceState::Error, 10).await;
    assert!(c.status.message.unwrap().contains("autopilot"));
    assert_eq!(env.count("POST", routes::CLUSTERS), 0);
}

/// A cluster's create with pools a and b loses its answer; the tenant deletes b; the
/// retried create finds the cluster by its name, with b in it: b is deleted at the
/// provider (never left billing as a pool nobody can delete), a stays.
async fn a_first_pool_deleted_after_a_lost_create_does_not_survive_at_the_provider(on: OnProvider) {
    let env = Env::start_on(on).await;
    let size = on.node_size();
    let pools = vec![("a", size, Scale::Count(1)), ("b", size, Scale::Count(1))];
    env.lose(Call::CreateCluster, 1);
    let (c, rows) = env.create_cluster("web", ClusterMode::Standard, pools).await;
    let sent = env.run_until(10, async |e: &Env| e.calls(Call::CreateCluster) == 1).await;
    assert!(sent, "the create was sent");
    assert!(env.cluster(&c.cluster_id).await.provider_cluster_id.is_none(), "its answer lost");
    env.change_node_pool(&rows[1].node_pool_id, None, true).await;
    let gone = env
        .run_until(40, async |e: &Env| {
            e.node_pool(&rows[1].node_pool_id).await.state == NodePoolState::Deleted
                && e.cluster(&c.cluster_id).await.status.state == ResourceState::Ready
        })
        .await;
    let b = env.node_pool(&rows[1].node_pool_id).await;
    assert!(gone, "{b:?} {:?}", env.cluster(&c.cluster_id).await);
    assert_eq!(env.calls(Call::CreateCluster), 1, "found by its name, never made twice");
    let pid = env.cluster(&c.cluster_id).await.provider_cluster_id.expect("recorded");
    let left = provider(&env).kubernetes().get_cluster(&pid).await.unwrap().node_pools;
    let names: Vec<&str> = left.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["a"], "b is gone at the provider too");
}

/// An autopilot cluster on a provider that offers them (GKE; DigitalOcean offers none,
/// see the two tests above): made in a region, `ready` with no node pool, a node pool
/// asked for on it refused before any provider call, upgraded, deleted.
#[tokio::test]
async fn an_autopilot_cluster_is_created_upgraded_and_deleted_with_no_node_pools() {
    let on = OnProvider::Gke;
    let env = Env::start_on(on).await;
    let (old, new) = on.versions();
    let region = on.multi_zone_region();
    let (c, rows) = env.create_cluster_in("auto", region, ClusterMode::Autopilot, vec![]).await;
    assert!(rows.is_empty());
    env.change_cluster(&c.cluster_id, Some(old), None, false).await;
    let c = until_cluster(&env, &c.cluster_id, ResourceState::Ready, 30).await;
    assert_eq!(c.version.as_deref(), Some(old));
    let pid = c.provider_cluster_id.clone().unwrap();
    let pc = provider(&env).kubernetes().get_cluster(&pid).await.unwrap();
    assert_eq!((pc.mode, pc.region.as_str()), (ClusterMode::Autopilot, region));
    // A node pool on it: refused by the reconciler from the cluster's mode.
    let np = env.create_node_pool(&c.cluster_id, "nope", on.node_size(), Scale::Count(1)).await;
    let refused = env
        .run_until(5, async |e: &Env| {
            e.node_pool(&np.node_pool_id).await.state == NodePoolState::Error
        })
        .await;
    assert!(refused);
    assert!(env.node_pool(&np.node_pool_id).await.message.unwrap().contains("autopilot"));
    assert_eq!(env.calls(Call::CreateNodePool), 0);
    env.change_node_pool(&np.node_pool_id, None, true).await;
    // Upgraded.
    upgrade_to(&env, &c.cluster_id, new).await;
    assert_eq!(env.calls(Call::Upgrade), 1);
    // Deleted.
    env.change_cluster(&c.cluster_id, None, None, true).await;
    until_cluster(&env, &c.cluster_id, ResourceState::Deleted, 20).await;
    assert!(matches!(
        provider(&env).kubernetes().get_cluster(&pid).await,
        Err(bc_domain::ProviderError::NotFound)
    ));
    assert_eq!(env.calls(Call::CreateCluster), 1);
}

/// The provider offers cluster `pid` a version newer than the one it runs, as if a
/// release came out after it was made at `latest`: where none is offered yet (`latest`
/// is the newest its release channel offers), the cluster is set back to an older version.
async fn a_newer_version_is_offered(env: &Env, pid: &str) {
    let k = env.provider();
    if k.kubernetes().available_upgrades(pid).await.unwrap().is_empty() {
        let state = env.sim.state();
        let mut model = state.model();
        let forced = match env.on {
            OnProvider::DigitalOcean => {
                model.force_cluster_version(&env.kube_id(pid), bc_sim::model::catalog::VERSIONS[2])
            }
            // The older of the two versions REGULAR offers.
            OnProvider::Gke => model.gke_force_version(&env.kube_id(pid), env.on.versions().0),
        };
        assert!(forced);
    }
    let offered = k.kubernetes().available_upgrades(pid).await.unwrap();
    assert!(!offered.is_empty(), "a newer version is offered");
}

/// SPEC §6: a tenant cluster or a substrate made with `latest` records the version it got
/// and is not upgraded when the provider offers a newer one, over hours of resyncs.
async fn latest_resolves_once_and_is_recorded(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (c, _, pid) = env.ready_cluster("alpha").await;
    assert_eq!(c.desired_version.as_deref(), Some("latest"));
    let running = provider(&env).kubernetes().get_cluster(&pid).await.unwrap().version;
    assert_eq!(c.version.as_deref(), Some(running.as_str()), "the version it got is recorded");
    let (pool, _, s) = env.creating_pool("latest", 1).await;
    let substrate = env.cluster(s.cluster_id.as_ref().unwrap()).await;
    let sub_pid = substrate.provider_cluster_id.clone().unwrap();
    a_newer_version_is_offered(&env, &pid).await;
    a_newer_version_is_offered(&env, &sub_pid).await;
    let running = provider(&env).kubernetes().get_cluster(&pid).await.unwrap().version;
    for _ in 0..30 {
        env.change_cluster(&c.cluster_id, None, None, false).await; // a resync
        env.step(STEP).await;
    }
    let after = env.cluster(&c.cluster_id).await;
    assert_eq!(after.status.state, ResourceState::Ready, "{after:?}");
    assert_eq!(after.version.as_deref(), Some(running.as_str()));
    assert_eq!(env.calls(Call::Upgrade), 0, "never upgraded on its own");
    assert_eq!(env.substrate(&pool.pool_id).await.state, ResourceState::Ready);
}

on_each_provider!(latest_resolves_once_and_is_recorded);

/// SPEC §8: a provider busy with an earlier change (GKE runs one operation per cluster at
/// a time) makes the change wait: the cluster and the pool are `updating` (or still
/// `pending`) with a message saying so, never `error`, and the change is made after.
/// DigitalOcean takes concurrent pool changes, so the scenario is GKE's.
#[tokio::test]
async fn a_change_while_the_provider_runs_another_operation_waits_and_is_no_error() {
    let on = OnProvider::Gke;
    let env = Env::start_on(on).await;
    let (c, rows, _) = env.ready_cluster("alpha").await;
    // A resize (an operation that runs a while: the cloud's clock stands still until
    // the loop below moves it), sent before the new pool is asked for. Asking for both
    // at once left the order of the two activations to the runtime, and a create sent
    // first was made at once (one call, not two).
    let updates = env.calls(Call::UpdateNodePool);
    env.change_node_pool(&rows[0].node_pool_id, Some(Scale::Count(2)), false).await;
    for _ in 0..10 {
        if env.calls(Call::UpdateNodePool) > updates {
            break;
        }
        env.driver.step(Duration::ZERO).await.unwrap();
    }
    assert_eq!(env.calls(Call::UpdateNodePool), updates + 1, "the resize was sent");
    let np = env.create_node_pool(&c.cluster_id, "more", on.node_size(), Scale::Count(1)).await;
    let mut waited = None;
    for _ in 0..30 {
        env.driver.step(Duration::ZERO).await.unwrap();
        let (cl, more) = (env.cluster(&c.cluster_id).await, env.node_pool(&np.node_pool_id).await);
        assert_ne!(cl.status.state, ResourceState::Error, "{cl:?}");
        assert_ne!(more.state, NodePoolState::Error, "{more:?}");
        if let Some(m) = more.message.clone().filter(|m| m.contains("earlier change")) {
            waited = Some((more.state, m));
        }
        if more.state == NodePoolState::Ready {
            break;
        }
        env.cloud.step(1);
    }
    let (state, message) = waited.expect("the pool said it waits for the earlier change");
    assert_eq!(state, NodePoolState::Pending, "{message}");
    until_all_ready(&env, &c.cluster_id, 20).await;
    assert_eq!(env.node_pool(&rows[0].node_pool_id).await.nodes_listed, 2);
    assert_eq!(env.calls(Call::CreateNodePool), 2, "asked again once the resize was done");
}
