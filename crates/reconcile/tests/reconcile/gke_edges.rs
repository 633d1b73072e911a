//! The edges of GKE's contract (SPEC §6, §7) run on both providers where they apply:
//! what a created cluster's teardown leaves at the provider, named in an event.

use std::time::Duration;

use bc_domain::ResourceState;
use bc_domain::ports::{Clock, LedgerRepo};
use bc_reconcile::on_each_provider;
use bc_reconcile::testing::{Env, OnProvider};
use bc_sim::kube::Resource;
use serde_json::json;

on_each_provider!(a_created_clusters_service_load_balancer_and_disk_are_named_at_teardown);

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
