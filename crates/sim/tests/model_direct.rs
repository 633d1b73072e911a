//! The direct face (`DirectProvider`) on the model: the provider ports' view of the same
//! rules, error classification as the HTTP adapter would do it, shared counters and
//! faults, autopilot as a provider flag, and credentials equal to what HTTP serves.

use std::collections::BTreeMap;
use std::sync::Arc;

use bc_domain::model::{ClusterMode, ForwardingRule, HealthCheck, LoadBalancerType, Protocol};
use bc_domain::policy::{Taint, TaintEffect};
use bc_domain::ports::{
    Clock, CreateClusterRequest, LoadBalancerRequest, ManualClock, NodePoolRequest,
    ProviderClusterState, ProviderImpl, ProviderLoadBalancerStatus, ProviderNodeState,
    ProviderTargets,
};
use bc_domain::{ProviderError, Timestamp};
use bc_sim::Sim;
use bc_sim::config::{RateLimits, SimConfig};
use bc_sim::direct::DirectProvider;
use bc_sim::model::{Fault, routes};
use bc_sim::testing::TEST_TOKEN;

fn setup(config: SimConfig) -> (Arc<ManualClock>, Sim, DirectProvider) {
    let clock = Arc::new(ManualClock::new(Timestamp::from_unix_ms(1_800_000_000_000)));
    let sim = Sim::new(config, clock.clone());
    let p = DirectProvider::new(sim.state().clone(), TEST_TOKEN);
    (clock, sim, p)
}

fn step(clock: &ManualClock, secs: i64) {
    clock.advance(time::Duration::seconds(secs));
}

fn pool_req(name: &str, count: u32) -> NodePoolRequest {
    NodePoolRequest {
        name: name.into(),
        size: "s-2vcpu-4gb".into(),
        count: Some(count),
        auto_scale: None,
        labels: BTreeMap::from([("bc/pool".to_owned(), "p1".to_owned())]),
        taints: vec![Taint { key: "bc".into(), value: "x".into(), effect: TaintEffect::NoExecute }],
        tags: vec!["team".into()],
    }
}

fn cluster_req(name: &str, mode: ClusterMode, pools: Vec<NodePoolRequest>) -> CreateClusterRequest {
    CreateClusterRequest {
        name: name.into(),
        region: "ams3".into(),
        version: "latest".into(),
        high_availability: false,
        mode,
        tags: vec!["bc".into()],
        node_pools: pools,
    }
}

fn lb_req(name: &str) -> LoadBalancerRequest {
    LoadBalancerRequest {
        name: name.into(),
        kind: LoadBalancerType::Regional,
        region: Some("nyc1".into()),
        forwarding_rules: vec![ForwardingRule {
            entry_protocol: Protocol::Http,
            entry_port: 80,
            target_protocol: Protocol::Http,
            target_port: 8080,
            certificate_id: None,
            tls_passthrough: false,
        }],
        health_check: HealthCheck::default(),
        sticky_sessions: None,
        targets: ProviderTargets::DropletIds(vec![11, 12]),
        size_unit: Some(1),
        redirect_http_to_https: false,
        global_settings: None,
        domains: vec![],
        tags: vec!["k8s:abc".into()],
    }
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
    assert_eq!(k.credentials(&c.id).await.unwrap_err(), ProviderError::NotFound);
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
    assert_eq!(e, ProviderError::Refused { message: "invalid upgrade path".into() });
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
    let mut lb = lb_req("assoc");
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
    let lb = lbs.create(&lb_req("web")).await.unwrap();
    assert_eq!(lb.status, ProviderLoadBalancerStatus::New);
    assert!(matches!(
        lbs.update(&lb.id, &lb_req("web")).await.unwrap_err(),
        ProviderError::Transient { .. }
    ));
    step(&clock, 1);
    let got = lbs.get(&lb.id).await.unwrap();
    assert_eq!(got.status, ProviderLoadBalancerStatus::Active);
    assert!(got.ip.is_some());
    // What the provider holds reads back as the request that made it (diffable).
    assert_eq!(got.spec, lb_req("web"));
    assert!(lbs.update(&lb.id, &lb_req("web")).await.is_ok());
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
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (clock, sim, p) = setup(SimConfig::default());
    let server = sim.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let c = p
        .kubernetes()
        .create_cluster(&cluster_req("k", ClusterMode::Standard, vec![pool_req("p", 1)]))
        .await
        .unwrap();
    step(&clock, 2);
    let creds = p.kubernetes().credentials(&c.id).await.unwrap();
    assert_eq!(creds.expires_at, Some(clock.now() + time::Duration::days(7)));
    let http = reqwest::Client::new()
        .get(format!("{}/v2/kubernetes/clusters/{}/kubeconfig", server.url(), c.id))
        .bearer_auth(TEST_TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(creds.kubeconfig.expose(), http);
    assert!(http.contains(&format!("{}/k8s/{}", server.url(), c.id)));
}
