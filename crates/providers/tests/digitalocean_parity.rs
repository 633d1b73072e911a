//! Parity between the two ways tests reach the simulated cloud: the DigitalOcean adapter
//! over the simulator's HTTP face, and the simulator's in-process direct face. Reconciler
//! tests use the direct face and `bc-api dev` uses the adapter, so they must agree.
//!
//! Invariant kept: for the same model, both faces return equal port values (clusters,
//! node pools, load balancers, options, upgrades) and the same error classes.

use std::sync::Arc;
use std::time::Duration;

use bc_domain::model::{
    ClusterMode, ForwardingRule, HealthCheck, LoadBalancerType, Protocol, SecretString,
};
use bc_domain::ports::{
    CreateClusterRequest, KubernetesProvider, LoadBalancerProvider, LoadBalancerRequest,
    ManualClock, NodePoolRequest, ProviderTargets,
};
use bc_domain::{ProviderError, Timestamp};
use bc_providers::digitalocean::{DigitalOcean, DigitalOceanConfig, RateLimitConfig};
use bc_sim::direct::DirectProvider;
use bc_sim::testing::TEST_TOKEN;
use bc_sim::{Sim, SimConfig};

fn pool(name: &str, count: u32) -> NodePoolRequest {
    NodePoolRequest {
        name: name.into(),
        size: "s-2vcpu-4gb".into(),
        count: Some(count),
        auto_scale: None,
        labels: [("bc/flavor".to_owned(), name.to_owned())].into(),
        taints: vec![],
        tags: vec!["bc".into()],
    }
}

fn lb(name: &str) -> LoadBalancerRequest {
    LoadBalancerRequest {
        name: name.into(),
        kind: LoadBalancerType::Regional,
        region: Some("ams3".into()),
        forwarding_rules: vec![ForwardingRule {
            entry_protocol: Protocol::Tcp,
            entry_port: 443,
            target_protocol: Protocol::Tcp,
            target_port: 8443,
            certificate_id: None,
            tls_passthrough: false,
        }],
        health_check: HealthCheck::default(),
        sticky_sessions: None,
        targets: ProviderTargets::Tag("web".into()),
        size_unit: Some(2),
        redirect_http_to_https: false,
        global_settings: None,
        domains: vec![],
        tags: vec!["bc".into()],
    }
}

#[tokio::test]
async fn both_faces_report_the_same_objects_and_errors() {
    let clock = Arc::new(ManualClock::new(Timestamp::from_unix_ms(1_800_000_000_000)));
    let sim = Sim::new(SimConfig::default(), clock.clone());
    let server = sim.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let http = DigitalOcean::new(
        DigitalOceanConfig {
            rate_limit: RateLimitConfig { max_wait: Duration::ZERO, ..RateLimitConfig::default() },
            ..DigitalOceanConfig::with_base_url(server.url())
        },
        &SecretString::new(TEST_TOKEN),
        clock.clone(),
    )
    .unwrap();
    let direct = DirectProvider::new(sim.state().clone(), TEST_TOKEN);

    let created = http
        .create_cluster(&CreateClusterRequest {
            name: "parity".into(),
            region: "ams3".into(),
            version: "latest".into(),
            high_availability: true,
            mode: ClusterMode::Standard,
            tags: vec!["bc".into()],
            node_pools: vec![pool("small", 2), pool("large", 1)],
        })
        .await
        .unwrap();
    let lb_made = http.create(&lb("parity-lb")).await.unwrap();

    // Provisioning, then running: compare at both instants.
    for _ in 0..2 {
        assert_eq!(
            http.get_cluster(&created.id).await.unwrap(),
            direct.get_cluster(&created.id).await.unwrap()
        );
        assert_eq!(http.list_clusters().await.unwrap(), direct.list_clusters().await.unwrap());
        assert_eq!(
            http.list_node_pools(&created.id).await.unwrap(),
            direct.list_node_pools(&created.id).await.unwrap()
        );
        assert_eq!(http.get(&lb_made.id).await.unwrap(), direct.get(&lb_made.id).await.unwrap());
        assert_eq!(http.list().await.unwrap(), direct.list().await.unwrap());
        clock.advance(time::Duration::seconds(5));
    }
    assert_eq!(http.options().await.unwrap(), direct.options().await.unwrap());
    assert_eq!(
        http.available_upgrades(&created.id).await.unwrap(),
        direct.available_upgrades(&created.id).await.unwrap()
    );
    assert_eq!(
        http.associated_resources(&created.id).await.unwrap(),
        direct.associated_resources(&created.id).await.unwrap()
    );

    // Error classes agree.
    assert_eq!(
        http.get_cluster("nope").await.unwrap_err(),
        direct.get_cluster("nope").await.unwrap_err()
    );
    let dup_http = http.create(&lb("parity-lb")).await.unwrap_err();
    let dup_direct = direct.create(&lb("parity-lb")).await.unwrap_err();
    assert!(matches!(dup_http, ProviderError::Refused { .. }), "{dup_http:?}");
    assert!(matches!(dup_direct, ProviderError::Refused { .. }), "{dup_direct:?}");
    let mut changed = lb("parity-lb");
    changed.size_unit = Some(3);
    http.update(&lb_made.id, &changed).await.unwrap();
    // Both are now inside the busy window of that update.
    let busy_http = http.update(&lb_made.id, &changed).await.unwrap_err();
    let busy_direct = direct.update(&lb_made.id, &changed).await.unwrap_err();
    assert!(matches!(busy_http, ProviderError::Transient { .. }), "{busy_http:?}");
    assert!(matches!(busy_direct, ProviderError::Transient { .. }), "{busy_direct:?}");
}
