//! The edges of GKE's contract (SPEC §6, §7) run on both providers where they apply:
//! what a created cluster's teardown leaves at the provider, named in an event; an
//! autopilot cluster's nodes, counted from the cluster; a regional substrate's totals.

use std::time::Duration;

use bc_domain::ResourceState;
use bc_domain::model::{ClusterMode, ClusterNodes};
use bc_domain::name::LABEL_FLAVOR;
use bc_domain::policy::{AutoScale, ClusterPolicy, Flavor, PoolPolicy};
use bc_domain::ports::{Clock, LedgerRepo, Preconditions};
use bc_reconcile::on_each_provider;
use bc_reconcile::testing::{Env, OnProvider, flavor};
use bc_sim::kube::Resource;
use serde_json::json;

on_each_provider!(
    a_created_clusters_service_load_balancer_and_disk_are_named_at_teardown,
    a_regional_substrate_holds_exactly_count_nodes_per_flavor,
);

/// Longer than any wait a reconciler asks for.
const STEP: Duration = Duration::from_secs(600);

/// A substrate's created cluster holds a Service of type LoadBalancer and a
/// PersistentVolume on a disk, both of which the provider's controllers made something
/// for; the pool is archived. The cluster goes; the disk stays and is named in one
/// `resources-retained` event; the Service's load balancer goes with the cluster where
/// the provider deletes it (DigitalOcean) and is named, as GCE names its forwarding
/// rule, where the provider leaves it (GKE).
async fn a_created_clusters_service_load_balancer_and_disk_are_named_at_teardown(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (pool, _, s) = env.creating_pool("latest", 1).await;
    let cluster = env.cluster(s.cluster_id.as_ref().expect("recorded")).await;
    let pid = cluster.provider_cluster_id.clone().expect("made");
    let kid = env.kube_id(&pid);
    let kube = &env.sim.state().kube;
    let service = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"type": "LoadBalancer", "selector": {"app": "web"},
            "ports": [{"port": 80, "targetPort": 8080}]}});
    kube.apply_manifest(&kid, "kubectl", &service, false, env.clock.now()).expect("the Service");
    let uid =
        kube.get(&kid, Resource::Service, Some("default"), "web").expect("the Service")["metadata"]
            ["uid"]
            .as_str()
            .expect("a uid")
            .to_owned();
    let made = on.cloud_controllers_made(&env.cloud, &pid, &uid, "pvc-5e1d2c").await;
    kube.apply_manifest(&kid, "kubectl", &made.volume, false, env.clock.now())
        .expect("the PersistentVolume");

    env.archive(&pool.pool_id).await;
    env.until_substrate(&pool.pool_id, ResourceState::Deleted, 40).await;
    assert!(
        matches!(
            env.provider().kubernetes().get_cluster(&pid).await,
            Err(bc_domain::ProviderError::NotFound)
        ),
        "the cluster is deleted"
    );
    let events = env.store.event_list(&env.tenant, None, 0, 1000).await.unwrap();
    let kept: Vec<_> =
        events.iter().filter(|e| e.kind == "kubernetes.substrate.resources-retained").collect();
    assert_eq!(kept.len(), 1, "one event names what is left: {events:?}");
    let data = &kept[0].data;
    let volumes = data["volumes"].as_array().expect("volumes");
    assert_eq!(volumes.len(), 1, "{data}");
    assert_eq!(volumes[0]["id"], made.disk_id.as_str(), "{data}");
    assert!(volumes[0]["name"].as_str().unwrap_or_default().starts_with("pvc-5e1d2c"), "{data}");
    // The name every cloud controller gives a Service's load balancer
    // (`cloudprovider.DefaultLoadBalancerName`).
    let rule: String = format!("a{}", uid.replace('-', "")).chars().take(32).collect();
    let lbs = data["loadBalancers"].as_array().expect("load balancers");
    if on.deletes_service_load_balancers() {
        assert!(lbs.is_empty(), "deleted with the cluster, not left: {data}");
        let left = env.provider().load_balancers().list().await.expect("load balancers");
        assert!(left.iter().all(|l| l.spec.name != rule), "the Service's LB is gone: {left:?}");
    } else {
        assert_eq!(lbs.len(), 1, "{data}");
        let region = on.region().rsplit_once('-').map_or(on.region(), |(r, _)| r);
        assert_eq!(
            lbs[0]["id"],
            format!("projects/bc-sim-project/regions/{region}/forwardingRules/{rule}").as_str(),
            "{data}"
        );
        assert_eq!(lbs[0]["name"], "default/web", "{data}");
    }
    // Named once: later looks at the deleted substrate add nothing.
    for _ in 0..3 {
        env.step(STEP).await;
    }
    let again = env.store.event_list(&env.tenant, None, 0, 1000).await.unwrap();
    let kept_again =
        again.iter().filter(|e| e.kind == "kubernetes.substrate.resources-retained").count();
    assert_eq!(kept_again, 1);
}

/// SPEC §7: an autopilot cluster's nodes are counted from the cluster — GKE runs them,
/// in no node pool this system can read — and the count follows them as workloads bring
/// and take them. GKE only: DigitalOcean offers no autopilot clusters.
#[tokio::test]
async fn an_autopilot_clusters_nodes_are_counted_from_the_cluster_as_they_change() {
    let on = OnProvider::Gke;
    let env = Env::start_on(on).await;
    let (c, _) =
        env.create_cluster_in("ap", on.multi_zone_region(), ClusterMode::Autopilot, vec![]).await;
    let id = c.cluster_id.clone();
    let counted = |n: u32| Some(ClusterNodes { listed: n, ready: n });
    let ready = env
        .run_until(40, async |e: &Env| {
            let c = e.cluster(&id).await;
            c.status.state == ResourceState::Ready && c.nodes == counted(0)
        })
        .await;
    assert!(ready, "ready, no workload and so no node: {:?}", env.cluster(&id).await);
    let pid = env.cluster(&id).await.provider_cluster_id.expect("made");
    let kid = env.kube_id(&pid);
    let kube = &env.sim.state().kube;
    // Nine workload pods: GKE brings two nodes (eight pods a node in the simulator).
    for i in 0..9 {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("work-{i}"), "namespace": "default"},
            "spec": {"containers": [{"name": "w", "image": "busybox"}]}});
        kube.apply_manifest(&kid, "kubectl", &pod, false, env.clock.now()).expect("a pod");
    }
    let grown = env.run_until(20, async |e: &Env| e.cluster(&id).await.nodes == counted(2)).await;
    assert!(grown, "the count follows the nodes GKE brought: {:?}", env.cluster(&id).await);
    assert_eq!(env.cluster(&id).await.status.state, ResourceState::Ready);
    // The workloads go, and GKE takes the nodes away.
    for i in 0..9 {
        let name = format!("work-{i}");
        kube.delete(
            &kid,
            Resource::Pod,
            Some("default"),
            &name,
            &Preconditions::default(),
            env.clock.now(),
        )
        .expect("deleted");
    }
    let shrunk = env.run_until(20, async |e: &Env| e.cluster(&id).await.nodes == counted(0)).await;
    assert!(shrunk, "the count follows the nodes GKE took: {:?}", env.cluster(&id).await);
}

/// SPEC §6: a flavor's `count`, and its `autoScale` min and max, are the pool's totals
/// on every provider — also on a regional GKE cluster, whose node pools GKE counts per
/// zone. A create-mode substrate in a location of several zones holds exactly `count`
/// nodes of its fixed flavor, and its autoscaled flavor's bounds are the totals asked.
async fn a_regional_substrate_holds_exactly_count_nodes_per_flavor(on: OnProvider) {
    let env = Env::start_on(on).await;
    let fixed = flavor("cpu", on.node_size(), 3);
    let scaled = Flavor {
        count: None,
        auto_scale: Some(AutoScale { min: 2, max: 5 }),
        ..flavor("burst", on.node_size(), 0)
    };
    let policy =
        in_region(env.create_policy("latest", vec![fixed, scaled]), on.multi_zone_region());
    let pool = env.create_pool("web", policy).await;
    let s = env.until_substrate(&pool.pool_id, ResourceState::Ready, 40).await;
    let pid = env.cluster(s.cluster_id.as_ref().expect("recorded")).await.provider_cluster_id;
    let pc = env.provider().kubernetes().get_cluster(&pid.expect("made")).await.expect("cluster");
    let pool_of = |f: &str| {
        pc.node_pools
            .iter()
            .find(|p| p.labels.get(LABEL_FLAVOR).map(String::as_str) == Some(f))
            .unwrap_or_else(|| panic!("flavor {f}'s pool: {pc:?}"))
            .clone()
    };
    let cpu = pool_of("cpu");
    assert_eq!((cpu.count, cpu.auto_scale), (3, false), "{cpu:?}");
    assert_eq!(cpu.nodes.len(), 3, "three nodes in total, however many zones: {cpu:?}");
    let burst = pool_of("burst");
    assert!(burst.auto_scale, "{burst:?}");
    assert_eq!((burst.min_nodes, burst.max_nodes), (2, 5), "totals: {burst:?}");
    assert!((2..=5).contains(&burst.count), "within the totals: {burst:?}");
    let listed = u32::try_from(cpu.nodes.len() + burst.nodes.len()).unwrap();
    assert_eq!(s.nodes_listed, listed, "{s:?}");
}

/// `policy` with its create-mode cluster in `region`.
fn in_region(mut policy: PoolPolicy, region: &str) -> PoolPolicy {
    if let Some(s) = &mut policy.substrate
        && let ClusterPolicy::Create(c) = &mut s.cluster
    {
        c.region = region.into();
    }
    policy
}

/// SPEC §6: where a flavor's totals cannot be met the substrate is refused, once,
/// naming the flavor's bounds. GKE only: a regional GKE pool starts the same number of
/// nodes in each of its zones, so autoScale 1–2 over three zones would start with three
/// (above the maximum) or none (below the minimum); DigitalOcean places a pool's nodes
/// as asked.
#[tokio::test]
async fn regional_autoscale_bounds_no_start_can_meet_are_refused_once() {
    let on = OnProvider::Gke;
    let env = Env::start_on(on).await;
    let scaled = Flavor {
        count: None,
        auto_scale: Some(AutoScale { min: 1, max: 2 }),
        ..flavor("burst", on.node_size(), 0)
    };
    let policy = in_region(env.create_policy("latest", vec![scaled]), on.multi_zone_region());
    let pool = env.create_pool("web", policy).await;
    let s = env.until_substrate(&pool.pool_id, ResourceState::Error, 40).await;
    let m = s.message.clone().unwrap_or_default();
    assert!(m.contains("autoScale 1–2") && m.contains("3 zones"), "{m}");
    let provider = env.provider();
    let made = provider.kubernetes().list_clusters().await.expect("clusters");
    assert!(
        made.iter().all(|c| c.node_pools.iter().all(|p| p.count <= 2)),
        "no pool starts above its maximum: {made:?}"
    );
    for _ in 0..5 {
        env.step(STEP).await;
    }
    let again = env.substrate(&pool.pool_id).await;
    assert_eq!((again.state, &again.message), (ResourceState::Error, &s.message), "recorded once");
}
