//! The direct face (`DirectProvider`) on the model: the provider ports' view of the same
//! rules, error classification as the HTTP adapter would do it, shared counters and
//! faults, autopilot as a provider flag, and credentials equal to what HTTP serves.

use std::sync::Arc;

use bc_domain::ProviderError;
use bc_domain::model::ClusterMode;
use bc_domain::policy::{Taint, TaintEffect};
use bc_domain::ports::{
    Clock, CreateClusterRequest, MaintenanceWindow, ManualClock, NodePoolRequest,
    ProviderClusterState, ProviderImpl, ProviderLoadBalancerStatus, ProviderNodeState,
    UpdateClusterRequest,
};
use bc_sim::Sim;
use bc_sim::config::{RateLimits, SimConfig};
use bc_sim::direct::DirectProvider;
use bc_sim::model::{Fault, routes};
use bc_sim::testing::{self, TEST_TOKEN, step};

fn setup(config: SimConfig) -> (Arc<ManualClock>, Sim, DirectProvider) {
    let (sim, clock) = testing::sim(config);
    let p = DirectProvider::new(sim.state().clone(), TEST_TOKEN);
    (clock, sim, p)
}

/// A pool labelled `bc/pool`, tainted `bc=x:NoExecute`, tagged `team`.
fn pool_req(name: &str, count: u32) -> NodePoolRequest {
    NodePoolRequest {
        taints: vec![Taint { key: "bc".into(), value: "x".into(), effect: TaintEffect::NoExecute }],
        tags: vec!["team".into()],
        ..testing::node_pool_request(name, count)
    }
}

fn cluster_req(name: &str, mode: ClusterMode, pools: Vec<NodePoolRequest>) -> CreateClusterRequest {
    CreateClusterRequest { mode, ..testing::cluster_request(name, pools) }
}

#[tokio::test]
async fn cluster_and_pools_through_the_port() {
    let (clock, sim, p) = setup(SimConfig::default());
    assert_eq!(p.capabilities().cluster_modes, vec![ClusterMode::Standard]);
    p.check_credentials().await.unwrap();
    let k = p.kubernetes();
    let c = k
        .create_cluster(&cluster_req("a", ClusterMode::Standard, vec![pool_req("p1", 2)]))
        .await
        .unwrap();
    assert_eq!(c.state, ProviderClusterState::Provisioning);
    assert_eq!(c.endpoint, None);
    assert_eq!(c.tags, vec!["bc".to_owned()], "server tags stripped");
    assert_eq!(c.node_pools[0].tags, vec!["team".to_owned()]);
    assert!(c.node_pools[0].nodes.iter().all(|n| n.droplet_id.is_none() && n.name.is_empty()));
    // Research §8.1: the kubeconfig is not served while the cluster provisions; that is
    // "not ready yet", never "gone".
    assert!(matches!(k.credentials(&c.id).await.unwrap_err(), ProviderError::Transient { .. }));
    step(&clock, 2);
    let c = k.get_cluster(&c.id).await.unwrap();
    assert_eq!(c.state, ProviderClusterState::Running);
    assert!(c.endpoint.is_some());
    let pool = &c.node_pools[0];
    assert!(
        pool.nodes.iter().all(|n| n.state == ProviderNodeState::Running && n.droplet_id.is_some())
    );
    assert_eq!(pool.taints[0].effect, TaintEffect::NoExecute);

    // Autoscaled update without a count keeps the provider's count.
    let mut upd = pool_req("p1", 0);
    upd.count = None;
    upd.auto_scale = Some((1, 5));
    let np = k.update_node_pool(&c.id, &pool.id, &upd).await.unwrap();
    assert_eq!((np.count, np.auto_scale, np.min_nodes, np.max_nodes), (2, true, 1, 5));
    k.delete_node(&c.id, &pool.id, &pool.nodes[0].id, false, false).await.unwrap();
    assert_eq!(k.get_node_pool(&c.id, &pool.id).await.unwrap().count, 1);
    let added = k.create_node_pool(&c.id, &pool_req("p2", 1)).await.unwrap();
    assert_eq!(k.list_node_pools(&c.id).await.unwrap().len(), 2);
    k.delete_node_pool(&c.id, &added.id).await.unwrap();
    assert!(k.available_upgrades(&c.id).await.unwrap().is_empty());
    let e = k.upgrade_cluster(&c.id, "1.31.9-do.0").await.unwrap_err();
    // The message reads as the HTTP adapter's: method, path, status, request id, text.
    let ProviderError::Refused { message } = e else { panic!("{e:?}") };
    assert!(message.starts_with(&format!("POST /v2/kubernetes/clusters/{}/upgrade: 422", c.id)));
    assert!(message.ends_with("invalid upgrade path"), "{message}");
    let opts = k.options().await.unwrap();
    assert_eq!(opts.versions[0].slug, "1.33.1-do.0");
    assert_eq!(opts.regions.len(), 10);
    assert!(opts.sizes.contains(&"gpu-h100x1-80gb".to_owned()));
    assert_eq!(k.list_clusters().await.unwrap().len(), 1);

    // Counted under the HTTP route keys.
    {
        let m = sim.state().model();
        assert_eq!(m.request_count(&routes::key("POST", routes::CLUSTERS)), 1);
        assert_eq!(m.request_count(&routes::key("PUT", routes::NODE_POOL)), 1);
        assert_eq!(m.request_count(&routes::key("DELETE", routes::NODE)), 1);
    }

    // Associated resources and selective delete.
    let mut lb = testing::lb_request("assoc");
    lb.tags = vec![format!("k8s:{}", c.id)];
    let lb = p.load_balancers().create(&lb).await.unwrap();
    let a = k.associated_resources(&c.id).await.unwrap();
    assert_eq!(a.load_balancers[0].id, lb.id);
    k.delete_cluster_selective(&c.id, std::slice::from_ref(&lb.id)).await.unwrap();
    assert_eq!(p.load_balancers().get(&lb.id).await.unwrap_err(), ProviderError::NotFound);
    step(&clock, 2);
    assert_eq!(k.get_cluster(&c.id).await.unwrap_err(), ProviderError::NotFound);
}

#[tokio::test]
async fn autopilot_is_a_provider_flag() {
    let (_clock, _sim, p) = setup(SimConfig::default());
    let e = p
        .kubernetes()
        .create_cluster(&cluster_req("ap", ClusterMode::Autopilot, vec![]))
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::Refused { .. }));

    let (clock, _sim, p) = setup(SimConfig { offer_autopilot: true, ..SimConfig::default() });
    assert_eq!(p.capabilities().cluster_modes, vec![ClusterMode::Standard, ClusterMode::Autopilot]);
    let c = p
        .kubernetes()
        .create_cluster(&cluster_req("ap", ClusterMode::Autopilot, vec![]))
        .await
        .unwrap();
    assert!(c.node_pools.is_empty());
    step(&clock, 2);
    assert_eq!(
        p.kubernetes().get_cluster(&c.id).await.unwrap().state,
        ProviderClusterState::Running
    );
}

#[tokio::test]
async fn errors_are_classified_like_the_http_adapter() {
    let (clock, sim, p) = setup(SimConfig::default());
    let k = p.kubernetes();
    assert_eq!(k.get_cluster("nope").await.unwrap_err(), ProviderError::NotFound);
    let bad = DirectProvider::new(sim.state().clone(), "dop_v1_wrong");
    assert_eq!(bad.check_credentials().await.unwrap_err(), ProviderError::Unauthorized);
    let mut r = cluster_req("x", ClusterMode::Standard, vec![pool_req("p", 1)]);
    r.region = "mars1".into();
    assert!(matches!(k.create_cluster(&r).await.unwrap_err(), ProviderError::Refused { .. }));

    let key = routes::key("GET", routes::CLUSTERS);
    sim.state().model().inject_failures(&key, 1, Fault::ServerError);
    sim.state().model().inject_failures(&key, 1, Fault::TooManyRequests { retry_after: 9 });
    assert!(matches!(k.list_clusters().await.unwrap_err(), ProviderError::Transient { .. }));
    assert_eq!(
        k.list_clusters().await.unwrap_err(),
        ProviderError::RateLimited { retry_after_ms: 9000 }
    );
    assert!(k.list_clusters().await.is_ok());

    // LB busy → Transient; after the window the update goes through.
    let lbs = p.load_balancers();
    let lb = lbs.create(&testing::lb_request("web")).await.unwrap();
    assert_eq!(lb.status, ProviderLoadBalancerStatus::New);
    assert!(matches!(
        lbs.update(&lb.id, &testing::lb_request("web")).await.unwrap_err(),
        ProviderError::Transient { .. }
    ));
    step(&clock, 1);
    let got = lbs.get(&lb.id).await.unwrap();
    assert_eq!(got.status, ProviderLoadBalancerStatus::Active);
    assert!(got.ip.is_some());
    // What the provider holds reads back as the request that made it (diffable).
    assert_eq!(got.spec, testing::lb_request("web"));
    assert!(lbs.update(&lb.id, &testing::lb_request("web")).await.is_ok());
    assert_eq!(lbs.list().await.unwrap().len(), 1);
    lbs.delete(&lb.id).await.unwrap();
    assert_eq!(lbs.delete(&lb.id).await.unwrap_err(), ProviderError::NotFound);
}

#[tokio::test]
async fn hourly_exhaustion_waits_until_the_oldest_request_ages_out() {
    let config = SimConfig {
        rate_limits: RateLimits { per_hour: 2, per_minute: 100 },
        ..SimConfig::default()
    };
    let (clock, _sim, p) = setup(config);
    p.check_credentials().await.unwrap();
    step(&clock, 600);
    p.check_credentials().await.unwrap();
    step(&clock, 600);
    // The first request expires 3600 s after it was made, 2400 s from now.
    assert_eq!(
        p.check_credentials().await.unwrap_err(),
        ProviderError::RateLimited { retry_after_ms: 2_400_000 }
    );
}

#[tokio::test]
async fn credentials_match_the_http_kubeconfig() {
    let served = testing::Served::start(SimConfig::default()).await;
    let (clock, p) = (&served.clock, DirectProvider::new(served.sim.state().clone(), TEST_TOKEN));
    let c = p
        .kubernetes()
        .create_cluster(&cluster_req("k", ClusterMode::Standard, vec![pool_req("p", 1)]))
        .await
        .unwrap();
    served.step(2);
    let creds = p.kubernetes().credentials(&c.id).await.unwrap();
    assert_eq!(creds.expires_at, Some(clock.now() + time::Duration::days(7)));
    let http = served.get(&format!("/v2/kubernetes/clusters/{}/kubeconfig", c.id)).await.text;
    assert_eq!(creds.kubeconfig.expose(), http);
    let endpoint = served.sim.state().model().cluster_endpoint(&c.id);
    assert!(endpoint.starts_with("https://127.0.0.1:"), "its own TLS listener: {endpoint}");
    assert!(http.contains(&endpoint));
}

/// Research §1: a 403 is retryable only when it is the load balancer's "busy" answer; a
/// scope refusal is `Refused`, exactly as the HTTP adapter classifies it (one
/// classification, bc_domain::classify::digitalocean).
#[tokio::test]
async fn only_the_busy_403_is_transient() {
    let (_clock, sim, p) = setup(SimConfig::default());
    sim.state().model().add_scoped_token("dop_v1_reader", &["kubernetes:read"]);
    let reader = DirectProvider::new(sim.state().clone(), "dop_v1_reader");
    let e = reader
        .kubernetes()
        .create_cluster(&cluster_req("a", ClusterMode::Standard, vec![pool_req("p", 1)]))
        .await
        .unwrap_err();
    let ProviderError::Refused { message } = &e else { panic!("{e:?}") };
    assert!(message.contains("403") && !message.contains("dop_v1_reader"), "{message}");
    assert!(!e.is_retryable());

    let lbs = p.load_balancers();
    let lb = lbs.create(&testing::lb_request("web")).await.unwrap();
    let busy = lbs.update(&lb.id, &testing::lb_request("web")).await.unwrap_err();
    assert!(matches!(busy, ProviderError::Transient { .. }), "{busy:?}");
}

/// Research §4.4: PUT changes name and tags, and HA only false → true.
#[tokio::test]
async fn cluster_update_changes_name_tags_and_ha_only_upwards() {
    let (clock, _sim, p) = setup(SimConfig::default());
    let k = p.kubernetes();
    let c = k
        .create_cluster(&cluster_req("a", ClusterMode::Standard, vec![pool_req("p", 1)]))
        .await
        .unwrap();
    step(&clock, 2);
    let c = k.get_cluster(&c.id).await.unwrap();
    assert!(!c.high_availability);
    let up = UpdateClusterRequest {
        name: "b".into(),
        tags: vec!["bc".into(), "team".into()],
        high_availability: Some(true),
        surge_upgrade: Some(true),
        maintenance_window: Some(MaintenanceWindow {
            start_time: "03:00".into(),
            day: "sunday".into(),
        }),
        ..UpdateClusterRequest::keeping(&c)
    };
    let changed = k.update_cluster(&c.id, &up).await.unwrap();
    assert_eq!((changed.name.as_str(), changed.high_availability), ("b", true));
    assert_eq!(changed.tags, vec!["bc", "team"], "server tags stay stripped");
    assert!(changed.surge_upgrade && !changed.auto_upgrade);
    assert_eq!(changed.maintenance_window, up.maintenance_window);
    assert_eq!(k.get_cluster(&c.id).await.unwrap(), changed, "it stuck");

    let down = UpdateClusterRequest {
        high_availability: Some(false),
        ..UpdateClusterRequest::keeping(&changed)
    };
    let e = k.update_cluster(&c.id, &down).await.unwrap_err();
    assert!(
        matches!(&e, ProviderError::Refused { message } if message.contains("high availability")),
        "{e:?}"
    );
    assert!(k.get_cluster(&c.id).await.unwrap().high_availability);
    assert_eq!(k.update_cluster("nope", &down).await.unwrap_err(), ProviderError::NotFound);
}
