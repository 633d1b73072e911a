//! The DigitalOcean adapter against wiremock: pins the exact requests it sends (paths,
//! query, Authorization, whole-object LB bodies) and its handling of answers the
//! simulator cannot produce (unknown states, odd headers, bad links).
//!
//! Invariant kept: every error class of `transport::classify` is reached over real HTTP,
//! and no error message carries the token.

use std::sync::Arc;
use std::time::Duration;

use bc_domain::ProviderError;
use bc_domain::Timestamp;
use bc_domain::model::{
    ClusterMode, ForwardingRule, HealthCheck, Protocol, ProviderAccount, ProviderKind,
    SealedSecret, SecretString, StickySessions,
};
use bc_domain::policy::{Taint, TaintEffect};
use bc_domain::ports::{
    AccountCredentials, Clock, CreateClusterRequest, KubernetesProvider, LoadBalancerProvider,
    LoadBalancerRequest, MaintenanceWindow, ManualClock, NodePoolRequest, ProviderClusterState,
    ProviderCredentials, ProviderImpl, ProviderLoadBalancerKind, ProviderRegistry, ProviderTargets,
    SecretBox, SecretError, UpdateClusterRequest,
};
use bc_providers::digitalocean::{
    DigitalOcean, DigitalOceanConfig, DigitalOceanRegistry, RateLimitConfig,
};
use serde_json::{Value, json};
use wiremock::matchers::{body_json, header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::common;

const TOKEN: &str = "dop_v1_test_secret_token";

use bc_sim::testing::{self, clock};

/// When [`clock`] starts, in Unix milliseconds.
fn t0_ms() -> i64 {
    clock().now().unix_ms()
}

fn config(server: &MockServer) -> DigitalOceanConfig {
    common::config_for(&server.uri())
}

fn adapter(server: &MockServer, clock: &Arc<ManualClock>) -> DigitalOcean {
    DigitalOcean::new(config(server), &SecretString::new(TOKEN), clock.clone()).unwrap()
}

fn cluster_json(id: &str, state: &str) -> Value {
    json!({
        "id": id, "name": format!("name-{id}"), "region": "nyc1", "version": "1.32.1-do.0",
        "status": {"state": state, "message": ""}, "endpoint": "", "ha": false,
        "tags": ["k8s", format!("k8s:{id}"), "team-a"],
        "created_at": "2026-11-15T16:00:11Z",
        "node_pools": [{"id": "p1", "name": "pool", "size": "s-1vcpu-2gb", "count": 1,
            "labels": null, "taints": null, "auto_scale": false, "min_nodes": 0, "max_nodes": 0,
            "tags": ["k8s", "k8s:worker"], "nodes": []}]
    })
}

fn lb_json(id: &str, name: &str) -> Value {
    json!({
        "id": id, "name": name, "type": "REGIONAL",
        "region": {"name": "New York 1", "slug": "nyc1", "sizes": ["lb-small"], "features": [], "available": true},
        "status": "active", "ip": "203.0.113.7", "size": "lb-small", "size_unit": 1,
        "forwarding_rules": [{"entry_protocol": "http", "entry_port": 80, "target_protocol": "http", "target_port": 8080, "tls_passthrough": false}],
        "health_check": {"protocol": "http", "port": 8080, "path": "/healthz", "check_interval_seconds": 10,
            "response_timeout_seconds": 5, "healthy_threshold": 5, "unhealthy_threshold": 3},
        "sticky_sessions": {"type": "none"}, "droplet_ids": [3164444], "tag": "", "tags": [],
        "redirect_http_to_https": false, "created_at": "2026-11-15T16:00:11.123456Z"
    })
}

fn regional_request() -> LoadBalancerRequest {
    LoadBalancerRequest {
        name: "web".into(),
        kind: ProviderLoadBalancerKind::Regional,
        region: Some("nyc1".into()),
        forwarding_rules: vec![ForwardingRule {
            entry_protocol: Protocol::Https,
            entry_port: 443,
            target_protocol: Protocol::Http,
            target_port: 8080,
            certificate_id: Some("cert-1".into()),
            tls_passthrough: false,
        }],
        health_check: HealthCheck { path: "/healthz".into(), port: 8080, ..HealthCheck::default() },
        sticky_sessions: Some(StickySessions {
            kind: "cookies".into(),
            cookie_name: Some("sid".into()),
            cookie_ttl_seconds: Some(300),
        }),
        targets: ProviderTargets::DropletIds(vec![11, 12]),
        size_unit: Some(2),
        redirect_http_to_https: true,
        global_settings: None,
        domains: vec![],
        tags: vec!["bc".into()],
    }
}

fn error_response(status: u16, id: &str, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status)
        .insert_header("x-request-id", "req-123")
        .set_body_json(json!({"id": id, "message": message}))
}

fn assert_no_token(e: &ProviderError) {
    let shown = format!("{e} {e:?}");
    assert!(!shown.contains(TOKEN), "token leaked into {shown}");
}

#[tokio::test]
async fn list_clusters_follows_every_page_with_per_page_200_and_bearer_token() {
    let server = MockServer::start().await;
    let auth = format!("Bearer {TOKEN}");
    // The `next` link names the real API host: the adapter must take only the page number
    // and keep talking to its own base URL (the token never goes anywhere else).
    Mock::given(method("GET"))
        .and(path("/v2/kubernetes/clusters"))
        .and(query_param("page", "1"))
        .and(query_param("per_page", "200"))
        .and(header("authorization", auth.as_str()))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "kubernetes_clusters": [cluster_json("a", "running"), cluster_json("b", "provisioning")],
            "links": {"pages": {"next": "https://api.digitalocean.com/v2/kubernetes/clusters?page=2&per_page=200",
                                "last": "https://api.digitalocean.com/v2/kubernetes/clusters?page=2&per_page=200"}},
            "meta": {"total": 3}
        })))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v2/kubernetes/clusters"))
        .and(query_param("page", "2"))
        .and(query_param("per_page", "200"))
        .and(header("authorization", auth.as_str()))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "kubernetes_clusters": [cluster_json("c", "hibernating")],
            "links": {"pages": {"first": "https://api.digitalocean.com/v2/kubernetes/clusters?page=1&per_page=200"}},
            "meta": {"total": 3}
        })))
        .expect(1)
        .mount(&server)
        .await;
    let clock = clock();
    let clusters = adapter(&server, &clock).list_clusters().await.unwrap();
    let ids: Vec<_> = clusters.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c"]);
    assert_eq!(clusters[0].state, ProviderClusterState::Running);
    assert_eq!(clusters[2].state, ProviderClusterState::Unknown("hibernating".into()));
    assert_eq!(clusters[0].tags, vec!["team-a"], "server-added tags are stripped");
    assert!(clusters[0].node_pools[0].tags.is_empty());
    assert!(clusters[0].node_pools[0].labels.is_empty(), "labels: null parses as empty");
    assert_eq!(clusters[0].endpoint, None);
}

#[tokio::test]
async fn a_page_linking_backwards_fails_instead_of_looping() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v2/load_balancers"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "load_balancers": [lb_json("x", "x")],
            "links": {"pages": {"next": "http://elsewhere/v2/load_balancers?page=1"}}
        })))
        .expect(1)
        .mount(&server)
        .await;
    let clock = clock();
    let err = adapter(&server, &clock).list().await.unwrap_err();
    assert!(matches!(err, ProviderError::Transient { .. }), "{err:?}");
}

#[tokio::test]
async fn create_cluster_sends_pools_without_server_tags_and_parses_201() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v2/kubernetes/clusters"))
        .and(body_json(json!({
            "name": "bc-pool-1", "region": "nyc1", "version": "latest", "ha": true, "tags": ["bc"],
            "node_pools": [
                {"name": "bc-pool-1-small", "size": "s-1vcpu-2gb", "count": 2, "tags": ["bc"],
                 "labels": {"bc/pool": "pool-1"}, "taints": [], "auto_scale": false},
                {"name": "bc-pool-1-gpu", "size": "gpu-h100x1-80gb", "count": 1, "tags": [],
                 "labels": {}, "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
                 "auto_scale": true, "min_nodes": 1, "max_nodes": 3}
            ]
        })))
        .respond_with(
            ResponseTemplate::new(201)
                .set_body_json(json!({"kubernetes_cluster": cluster_json("new", "provisioning")})),
        )
        .expect(1)
        .mount(&server)
        .await;
    let clock = clock();
    let req = CreateClusterRequest {
        name: "bc-pool-1".into(),
        region: "nyc1".into(),
        version: "latest".into(),
        high_availability: true,
        mode: ClusterMode::Standard,
        tags: vec!["bc".into(), "k8s:should-not-be-sent".into()],
        node_pools: vec![
            NodePoolRequest {
                name: "bc-pool-1-small".into(),
                size: "s-1vcpu-2gb".into(),
                count: Some(2),
                auto_scale: None,
                labels: [("bc/pool".to_owned(), "pool-1".to_owned())].into(),
                taints: vec![],
                tags: vec!["bc".into()],
            },
            NodePoolRequest {
                name: "bc-pool-1-gpu".into(),
                size: "gpu-h100x1-80gb".into(),
                count: None,
                auto_scale: Some((1, 3)),
                labels: Default::default(),
                taints: vec![Taint {
                    key: "gpu".into(),
                    value: "true".into(),
                    effect: TaintEffect::NoSchedule,
                }],
                tags: vec![],
            },
        ],
    };
    let c = adapter(&server, &clock).create_cluster(&req).await.unwrap();
    assert_eq!(c.id, "new");
    assert_eq!(c.state, ProviderClusterState::Provisioning);

    // Autopilot is refused without a call (the mock above expects exactly one POST).
    let auto = CreateClusterRequest { mode: ClusterMode::Autopilot, ..req };
    let err = adapter(&server, &clock).create_cluster(&auto).await.unwrap_err();
    assert!(matches!(err, ProviderError::Refused { .. }));
}

#[tokio::test]
async fn node_pool_update_sends_no_size_and_no_count_when_autoscaled() {
    let server = MockServer::start().await;
    Mock::given(method("PUT"))
        .and(path("/v2/kubernetes/clusters/c1/node_pools/p1"))
        .and(body_json(json!({
            "name": "pool", "tags": [], "labels": {}, "taints": [],
            "auto_scale": true, "min_nodes": 2, "max_nodes": 5
        })))
        .respond_with(ResponseTemplate::new(202).set_body_json(json!({"node_pool": {
            "id": "p1", "name": "pool", "size": "s-1vcpu-2gb", "count": 3, "auto_scale": true,
            "min_nodes": 2, "max_nodes": 5, "labels": null, "taints": null, "tags": null, "nodes": null
        }})))
        .expect(1)
        .mount(&server)
        .await;
    let clock = clock();
    let req = NodePoolRequest {
        name: "pool".into(),
        size: "s-1vcpu-2gb".into(),
        count: None,
        auto_scale: Some((2, 5)),
        labels: Default::default(),
        taints: vec![],
        tags: vec![],
    };
    let p = adapter(&server, &clock).update_node_pool("c1", "p1", &req).await.unwrap();
    assert_eq!((p.count, p.auto_scale, p.min_nodes, p.max_nodes), (3, true, 2, 5));
    assert!(p.nodes.is_empty());
}

#[tokio::test]
async fn delete_node_sends_flags_only_when_set() {
    let server = MockServer::start().await;
    Mock::given(method("DELETE"))
        .and(path("/v2/kubernetes/clusters/c1/node_pools/p1/nodes/n1"))
        .respond_with(ResponseTemplate::new(202))
        .expect(2)
        .mount(&server)
        .await;
    let clock = clock();
    let a = adapter(&server, &clock);
    a.delete_node("c1", "p1", "n1", true, true).await.unwrap();
    a.delete_node("c1", "p1", "n1", false, false).await.unwrap();
    let reqs = server.received_requests().await.unwrap();
    assert_eq!(reqs[0].url.query(), Some("skip_drain=1&replace=1"));
    assert_eq!(reqs[1].url.query(), None);
}

#[tokio::test]
async fn upgrades_null_is_empty_and_upgrade_posts_the_slug() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v2/kubernetes/clusters/c1/upgrades"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"available_upgrade_versions": null})),
        )
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v2/kubernetes/clusters/c1/upgrade"))
        .and(body_json(json!({"version": "1.33.0-do.0"})))
        .respond_with(ResponseTemplate::new(202))
        .expect(1)
        .mount(&server)
        .await;
    let clock = clock();
    let a = adapter(&server, &clock);
    assert!(a.available_upgrades("c1").await.unwrap().is_empty());
    a.upgrade_cluster("c1", "1.33.0-do.0").await.unwrap();
}

#[tokio::test]
async fn associated_resources_and_selective_delete() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v2/kubernetes/clusters/c1/destroy_with_associated_resources"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "load_balancers": [{"id": "lb1", "name": "a"}], "volumes": null, "volume_snapshots": []
        })))
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path("/v2/kubernetes/clusters/c1/destroy_with_associated_resources/selective"))
        .and(body_json(json!({"load_balancers": ["lb1"], "volumes": [], "volume_snapshots": []})))
        .respond_with(ResponseTemplate::new(204))
        .expect(1)
        .mount(&server)
        .await;
    let clock = clock();
    let a = adapter(&server, &clock);
    let assoc = a.associated_resources("c1").await.unwrap();
    assert_eq!(assoc.load_balancers[0].id, "lb1");
    assert!(assoc.volumes.is_empty());
    a.delete_cluster_selective("c1", &["lb1".into()]).await.unwrap();
}

#[tokio::test]
async fn options_parse() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v2/kubernetes/options"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"options": {
            "regions": [{"name": "New York 1", "slug": "nyc1"}],
            "versions": [{"slug": "1.32.1-do.0", "kubernetes_version": "1.32.1", "supported_features": []}],
            "sizes": [{"name": "s-1vcpu-2gb", "slug": "s-1vcpu-2gb"}]
        }})))
        .mount(&server)
        .await;
    let clock = clock();
    let o = adapter(&server, &clock).options().await.unwrap();
    assert_eq!(o.regions, vec!["nyc1"]);
    assert_eq!(o.versions[0].kubernetes_version, "1.32.1");
    assert_eq!(o.sizes, vec!["s-1vcpu-2gb"]);
}

#[tokio::test]
async fn kubeconfig_is_cached_until_near_expiry_and_after_invalidation_refetched() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v2/kubernetes/clusters/c1/kubeconfig"))
        .and(query_param("expiry_seconds", "3600"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "application/yaml")
                .set_body_string("apiVersion: v1\nkind: Config\n"),
        )
        .mount(&server)
        .await;
    let clock = clock();
    let a = adapter(&server, &clock);
    let count = || async { server.received_requests().await.unwrap().len() };
    let c = a.credentials("c1").await.unwrap();
    assert_eq!(c.kubeconfig.expose(), "apiVersion: v1\nkind: Config\n");
    assert_eq!(c.expires_at, Some(Timestamp::from_unix_ms(t0_ms() + 3_600_000)));
    a.credentials("c1").await.unwrap();
    assert_eq!(count().await, 1, "reused, not minted again");
    clock.advance(time::Duration::minutes(54));
    a.credentials("c1").await.unwrap();
    assert_eq!(count().await, 1, "6 min left: still reused");
    clock.advance(time::Duration::minutes(2));
    a.credentials("c1").await.unwrap();
    assert_eq!(count().await, 2, "4 min left: refreshed");
    a.credentials("c1").await.unwrap();
    assert_eq!(count().await, 2);
    a.invalidate_credentials("c1");
    a.credentials("c1").await.unwrap();
    assert_eq!(count().await, 3, "invalidated: minted again");
}

#[tokio::test]
async fn concurrent_first_callers_share_one_kubeconfig_mint() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v2/kubernetes/clusters/c1/kubeconfig"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_string("kind: Config\n")
                .set_delay(Duration::from_millis(50)),
        )
        .expect(1)
        .mount(&server)
        .await;
    let clock = clock();
    let a = Arc::new(adapter(&server, &clock));
    let calls: Vec<_> = (0..4)
        .map(|_| {
            let a = a.clone();
            tokio::spawn(async move { a.credentials("c1").await })
        })
        .collect();
    for c in calls {
        assert_eq!(c.await.unwrap().unwrap().kubeconfig.expose(), "kind: Config\n");
    }
}

/// The mint lock is per cluster: a slow mint of one cluster's kubeconfig does not hold
/// back another cluster's.
#[tokio::test]
async fn kubeconfigs_of_different_clusters_are_minted_in_parallel() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v2/kubernetes/clusters/slow/kubeconfig"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_string("kind: Config\n")
                .set_delay(Duration::from_secs(600)),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v2/kubernetes/clusters/fast/kubeconfig"))
        .respond_with(ResponseTemplate::new(200).set_body_string("kind: Config\n"))
        .mount(&server)
        .await;
    let clock = clock();
    let a = Arc::new(adapter(&server, &clock));
    let slow = tokio::spawn({
        let a = a.clone();
        async move { a.credentials("slow").await }
    });
    // Bounded wait until the slow mint is in flight (holding its lock).
    for _ in 0..500 {
        if !server.received_requests().await.unwrap().is_empty() {
            break;
        }
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(server.received_requests().await.unwrap().len(), 1, "the slow mint started");
    // A hang guard, not a timing assertion: with one lock per account this never returns
    // while the slow mint is held up.
    let fast = tokio::time::timeout(Duration::from_secs(20), a.credentials("fast")).await;
    assert!(fast.expect("the other cluster's mint waited on the slow one").is_ok());
    slow.abort();
}

/// Research §4.4: ask for a bearer-token kubeconfig (`type=token`; an SSO account's
/// default would need an exec plugin). Research §8.1: its 404 while the cluster exists
/// is "not ready yet", retryable; with the cluster gone too, `NotFound`.
#[tokio::test]
async fn kubeconfig_is_token_type_and_its_404_is_not_ready_while_the_cluster_exists() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v2/kubernetes/clusters/c1/kubeconfig"))
        .and(query_param("type", "token"))
        .respond_with(ResponseTemplate::new(200).set_body_string("kind: Config\n"))
        .mount(&server)
        .await;
    for id in ["young", "gone"] {
        Mock::given(method("GET"))
            .and(path(format!("/v2/kubernetes/clusters/{id}/kubeconfig")))
            .respond_with(error_response(
                404,
                "not_found",
                "The resource you were accessing could not be found.",
            ))
            .mount(&server)
            .await;
    }
    Mock::given(method("GET"))
        .and(path("/v2/kubernetes/clusters/young"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(
                json!({"kubernetes_cluster": cluster_json("young", "provisioning")}),
            ),
        )
        .mount(&server)
        .await;
    let clock = clock();
    let a = adapter(&server, &clock);
    assert!(a.credentials("c1").await.is_ok());
    let e = a.credentials("young").await.unwrap_err();
    assert!(matches!(e, ProviderError::Transient { .. }) && e.is_retryable(), "{e:?}");
    assert_eq!(a.credentials("gone").await.unwrap_err(), ProviderError::NotFound);
}

/// Research §4.4: the cluster PUT sends name and the whole tag list (no server tags),
/// and `ha` and the other settings only when asked, so what is left out keeps its value;
/// the answer is 202 with the cluster.
#[tokio::test]
async fn cluster_update_sends_name_tags_and_only_what_is_asked() {
    let server = MockServer::start().await;
    let mut answer = cluster_json("c1", "running");
    answer["ha"] = json!(true);
    answer["maintenance_policy"] =
        json!({"start_time": "03:00", "day": "sunday", "duration": "4h0m0s"});
    Mock::given(method("PUT"))
        .and(path("/v2/kubernetes/clusters/c1"))
        .and(body_json(json!({"name": "renamed", "tags": ["team-a", "team-b"], "ha": true,
            "maintenance_policy": {"start_time": "03:00", "day": "sunday"}})))
        .respond_with(
            ResponseTemplate::new(202).set_body_json(json!({"kubernetes_cluster": answer})),
        )
        .expect(1)
        .mount(&server)
        .await;
    let clock = clock();
    let req = UpdateClusterRequest {
        name: "renamed".into(),
        tags: vec!["k8s:c1".into(), "team-a".into(), "team-b".into()],
        high_availability: Some(true),
        auto_upgrade: None,
        surge_upgrade: None,
        maintenance_window: Some(MaintenanceWindow {
            start_time: "03:00".into(),
            day: "sunday".into(),
        }),
    };
    let c = adapter(&server, &clock).update_cluster("c1", &req).await.unwrap();
    assert!(c.high_availability);
    assert_eq!(c.tags, vec!["team-a"]);
    assert_eq!(c.maintenance_window, req.maintenance_window);
}

#[tokio::test]
async fn load_balancer_update_puts_the_whole_object() {
    let server = MockServer::start().await;
    Mock::given(method("PUT"))
        .and(path("/v2/load_balancers/lb1"))
        .and(body_json(json!({
            "name": "web", "type": "REGIONAL", "region": "nyc1",
            "forwarding_rules": [{"entry_protocol": "https", "entry_port": 443, "target_protocol": "http",
                "target_port": 8080, "certificate_id": "cert-1", "tls_passthrough": false}],
            "health_check": {"protocol": "http", "port": 8080, "path": "/healthz", "check_interval_seconds": 10,
                "response_timeout_seconds": 5, "healthy_threshold": 5, "unhealthy_threshold": 3},
            "sticky_sessions": {"type": "cookies", "cookie_name": "sid", "cookie_ttl_seconds": 300},
            "droplet_ids": [11, 12], "size_unit": 2, "redirect_http_to_https": true, "tags": ["bc"]
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"load_balancer": lb_json("lb1", "web")})))
        .expect(1)
        .mount(&server)
        .await;
    let clock = clock();
    let lb = adapter(&server, &clock).update("lb1", &regional_request()).await.unwrap();
    assert_eq!(lb.spec.region.as_deref(), Some("nyc1"), "region object → slug");
    assert_eq!(lb.spec.targets, ProviderTargets::DropletIds(vec![3164444]));
    assert_eq!(lb.ip.as_deref(), Some("203.0.113.7"));
    assert!(lb.created_at.is_some(), "fractional seconds parse");
}

#[tokio::test]
async fn global_load_balancer_create_sends_glb_settings_domains_and_targets() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v2/load_balancers"))
        .and(body_json(json!({
            "name": "glb", "type": "GLOBAL",
            "health_check": {"protocol": "http", "port": 80, "path": "/", "check_interval_seconds": 10,
                "response_timeout_seconds": 5, "healthy_threshold": 5, "unhealthy_threshold": 3},
            "sticky_sessions": {"type": "none"},
            "target_load_balancer_ids": ["lb1", "lb2"], "redirect_http_to_https": false,
            "glb_settings": {"target_protocol": "https", "target_port": 443, "cdn": {"is_enabled": true},
                "region_priorities": {"nyc1": 1, "ams3": 2}, "failover_threshold": 50},
            "domains": [{"name": "app.example.com", "is_managed": true}],
            "tags": []
        })))
        .respond_with(ResponseTemplate::new(202).set_body_json(json!({"load_balancer": {
            "id": "g1", "name": "glb", "type": "GLOBAL", "status": "new", "ip": "", "size": "lb-small",
            "size_unit": 1, "forwarding_rules": [], "droplet_ids": [], "tag": "",
            "glb_settings": {"target_protocol": "HTTPS", "target_port": 443, "cdn": {"is_enabled": true},
                "region_priorities": {"nyc1": 1, "ams3": 2}, "failover_threshold": 50},
            "domains": [{"name": "app.example.com", "is_managed": true, "status": "CREATING"}],
            "target_load_balancer_ids": ["lb1", "lb2"]
        }})))
        .expect(1)
        .mount(&server)
        .await;
    let clock = clock();
    let mut req = testing::global_lb_request("glb", &["lb1", "lb2"]);
    let g = req.global_settings.as_mut().unwrap();
    (g.target_protocol, g.target_port) = (Protocol::Https, 443);
    g.region_priorities = Some([("nyc1".to_owned(), 1), ("ams3".to_owned(), 2)].into());
    let lb = adapter(&server, &clock).create(&req).await.unwrap();
    // What came back diffs equal to what was asked.
    assert_eq!(lb.spec, req);
    assert_eq!(lb.ip, None);
}

#[tokio::test]
async fn every_error_class_over_http() {
    let server = MockServer::start().await;
    let routes: [(&str, u16, &str, &str); 7] = [
        ("/v2/load_balarefused422", 422, "unprocessable_entity", "name is not unique"),
        (
            "/v2/load_balabusy403",
            403,
            "forbidden",
            "Load Balancer can't be updated while it processes previous actions",
        ),
        (
            "/v2/load_balaforbidden403",
            403,
            "forbidden",
            "You are not authorized to perform this operation",
        ),
        ("/v2/load_balabad400", 400, "bad_request", "error parsing request body"),
        (
            "/v2/load_balamissing404",
            404,
            "not_found",
            "The resource you were accessing could not be found.",
        ),
        ("/v2/load_balaunauth401", 401, "unauthorized", "Unable to authenticate you"),
        (
            "/v2/load_balaserver500",
            500,
            "server_error",
            "Server was unable to give you a response.",
        ),
    ];
    for (p, status, id, message) in routes {
        let lb = p.trim_start_matches("/v2/load_bala");
        Mock::given(path(format!("/v2/load_balancers/{lb}")))
            .respond_with(error_response(status, id, message))
            .mount(&server)
            .await;
    }
    let clock = clock();
    let a = adapter(&server, &clock);
    let req = regional_request();
    let e = a.update("refused422", &req).await.unwrap_err();
    assert_no_token(&e);
    let ProviderError::Refused { message } = e else { panic!("{e:?}") };
    assert_eq!(
        message,
        "PUT /v2/load_balancers/refused422: 422 (request \"req-123\") name is not unique"
    );
    let e = a.update("busy403", &req).await.unwrap_err();
    assert_no_token(&e);
    assert!(
        matches!(&e, ProviderError::Busy { message } if message.contains("can't be updated")),
        "{e:?}"
    );
    assert!(e.is_retryable());
    let e = a.update("forbidden403", &req).await.unwrap_err();
    assert!(matches!(e, ProviderError::Refused { .. }), "{e:?}");
    let e = a.create(&req).await.unwrap_err();
    // No mock for POST /v2/load_balancers: wiremock answers 404.
    assert_eq!(e, ProviderError::NotFound);
    let e = a.update("bad400", &req).await.unwrap_err();
    assert!(matches!(e, ProviderError::Refused { .. }), "{e:?}");
    assert_eq!(a.get("missing404").await.unwrap_err(), ProviderError::NotFound);
    assert_eq!(a.delete("unauth401").await.unwrap_err(), ProviderError::Unauthorized);
    let e = a.get("server500").await.unwrap_err();
    assert_no_token(&e);
    assert!(matches!(&e, ProviderError::Transient { message } if message.contains("500")), "{e:?}");
    assert!(!format!("{a:?}").contains(TOKEN));
}

#[tokio::test]
async fn a_token_echoed_by_the_server_is_scrubbed_from_messages() {
    let server = MockServer::start().await;
    let echo = format!("bad request; you sent Authorization: Bearer {TOKEN}");
    Mock::given(method("GET"))
        .and(path("/v2/load_balancers/echo422"))
        .respond_with(error_response(422, "unprocessable_entity", &echo))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v2/load_balancers/echo502"))
        .respond_with(ResponseTemplate::new(502).set_body_string(format!("<html>{TOKEN}</html>")))
        .mount(&server)
        .await;
    let clock = clock();
    let a = adapter(&server, &clock);
    // The token straddles the 200-character cut of a long body: scrubbed before the cut,
    // so not even its first characters survive.
    let long = format!("{}{TOKEN} and more", "x".repeat(195));
    Mock::given(method("GET"))
        .and(path("/v2/load_balancers/echo503"))
        .respond_with(ResponseTemplate::new(503).set_body_string(long))
        .mount(&server)
        .await;
    for id in ["echo422", "echo502", "echo503"] {
        let e = a.get(id).await.unwrap_err();
        assert_no_token(&e);
        assert!(!format!("{e}").contains(&TOKEN[..5]), "{e}");
        // The marker may itself be cut at the end of a long body.
        assert!(format!("{e}").contains("[reda"), "{e}");
    }
}

#[tokio::test]
async fn a_429_pauses_the_account_for_retry_after() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v2/load_balancers/lb1"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "29")
                .insert_header("ratelimit-limit", "5000")
                .insert_header("ratelimit-remaining", "4000")
                .insert_header("ratelimit-reset", (t0_ms() / 1000 + 600).to_string())
                .set_body_json(
                    json!({"id": "too_many_requests", "message": "API rate limit exceeded."}),
                ),
        )
        .expect(1)
        .mount(&server)
        .await;
    let clock = clock();
    let a = adapter(&server, &clock);
    assert_eq!(
        a.get("lb1").await.unwrap_err(),
        ProviderError::RateLimited { retry_after_ms: 29_000 }
    );
    // The next call does not reach the provider: the bucket is paused for everyone.
    clock.advance(time::Duration::seconds(9));
    assert_eq!(
        a.get("lb1").await.unwrap_err(),
        ProviderError::RateLimited { retry_after_ms: 20_000 }
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_429_without_retry_after_waits_for_ratelimit_reset() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v2/kubernetes/clusters/c1"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("ratelimit-remaining", "0")
                .insert_header("ratelimit-reset", (t0_ms() / 1000 + 42).to_string()),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v2/kubernetes/clusters/c1"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"kubernetes_cluster": cluster_json("c1", "running")})),
        )
        .mount(&server)
        .await;
    let clock = clock();
    let a = adapter(&server, &clock);
    assert_eq!(
        a.get_cluster("c1").await.unwrap_err(),
        ProviderError::RateLimited { retry_after_ms: 42_000 }
    );
    assert!(matches!(a.get_cluster("c1").await, Err(ProviderError::RateLimited { .. })));
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
    clock.advance(time::Duration::seconds(42));
    assert_eq!(a.get_cluster("c1").await.unwrap().state, ProviderClusterState::Running);
}

#[tokio::test]
async fn remaining_zero_on_a_success_pauses_until_reset() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v2/kubernetes/options"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("ratelimit-remaining", "0")
                .insert_header("ratelimit-reset", (t0_ms() / 1000 + 10).to_string())
                .set_body_json(json!({"options": {}})),
        )
        .mount(&server)
        .await;
    let clock = clock();
    let a = adapter(&server, &clock);
    a.options().await.unwrap();
    assert_eq!(
        a.options().await.unwrap_err(),
        ProviderError::RateLimited { retry_after_ms: 10_000 }
    );
    clock.advance(time::Duration::seconds(10));
    a.options().await.unwrap();
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

#[tokio::test]
async fn local_budget_is_taken_before_sending() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v2/kubernetes/options"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"options": {}})))
        .mount(&server)
        .await;
    let clock = clock();
    let cfg = DigitalOceanConfig {
        rate_limit: RateLimitConfig { per_minute: 2, per_hour: 100, max_wait: Duration::ZERO },
        ..config(&server)
    };
    let a = DigitalOcean::new(cfg, &SecretString::new(TOKEN), clock.clone()).unwrap();
    a.options().await.unwrap();
    a.options().await.unwrap();
    assert_eq!(
        a.options().await.unwrap_err(),
        ProviderError::RateLimited { retry_after_ms: 30_000 }
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
    clock.advance(time::Duration::seconds(30));
    a.options().await.unwrap();
}

#[tokio::test]
async fn timeouts_and_refused_connections_are_transient() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v2/load_balancers/slow"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(5)))
        .mount(&server)
        .await;
    let clock = clock();
    let cfg = DigitalOceanConfig { request_timeout: Duration::from_millis(200), ..config(&server) };
    let a = DigitalOcean::new(cfg, &SecretString::new(TOKEN), clock.clone()).unwrap();
    let e = a.get("slow").await.unwrap_err();
    assert!(
        matches!(&e, ProviderError::Transient { message } if message.contains("timed out")),
        "{e:?}"
    );
    assert_no_token(&e);

    // A port nothing listens on: bind, note the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let cfg = DigitalOceanConfig::with_base_url(format!("http://127.0.0.1:{port}"));
    let a = DigitalOcean::new(cfg, &SecretString::new(TOKEN), clock.clone()).unwrap();
    let e = a.get("x").await.unwrap_err();
    assert!(
        matches!(&e, ProviderError::Transient { message } if message.contains("connect")),
        "{e:?}"
    );
    assert_no_token(&e);
}

#[tokio::test]
async fn unparsable_success_body_is_transient() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v2/load_balancers/lb1"))
        .respond_with(ResponseTemplate::new(200).set_body_string("<html>proxy</html>"))
        .mount(&server)
        .await;
    let clock = clock();
    let e = adapter(&server, &clock).get("lb1").await.unwrap_err();
    assert!(matches!(e, ProviderError::Transient { .. }), "{e:?}");
}

/// A SecretBox for tests: "seals" by prefixing the aad, so a wrong aad fails to open.
struct PrefixBox;
impl SecretBox for PrefixBox {
    fn seal(&self, plaintext: &[u8], aad: &[u8]) -> Result<Vec<u8>, SecretError> {
        Ok([aad, b"|", plaintext].concat())
    }
    fn open(&self, sealed: &[u8], aad: &[u8]) -> Result<Vec<u8>, SecretError> {
        let prefix = [aad, b"|"].concat();
        sealed.strip_prefix(prefix.as_slice()).map(<[u8]>::to_vec).ok_or(SecretError::Open)
    }
}

fn creds(token: &str) -> ProviderCredentials {
    ProviderCredentials::new(SecretString::new(token)).unwrap()
}

fn account(id_body: &str, token: &str) -> ProviderAccount {
    let id: bc_domain::ProviderAccountId = format!("acct_{id_body}").parse().unwrap();
    let sealed = PrefixBox.seal(&creds(token).to_plaintext(), id.as_str().as_bytes()).unwrap();
    ProviderAccount {
        provider_account_id: id,
        tenant_id: "acme".parse().unwrap(),
        provider: ProviderKind::Digitalocean,
        name: "main".parse().unwrap(),
        project_id: None,
        credentials: SealedSecret(sealed),
        created_at: Timestamp::from_unix_ms(t0_ms()),
        deleted_at: None,
    }
}

#[tokio::test]
async fn registry_shares_one_adapter_and_bucket_per_account() {
    let server = MockServer::start().await;
    let auth = format!("Bearer {TOKEN}");
    Mock::given(method("GET"))
        .and(path("/v2/account"))
        .and(header("authorization", auth.as_str()))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"account": {"status": "active"}})),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v2/account"))
        .respond_with(error_response(401, "unauthorized", "Unable to authenticate you"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v2/load_balancers/lb1"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "5"))
        .mount(&server)
        .await;
    let clock = clock();
    let registry = DigitalOceanRegistry::new(
        server.uri(),
        Arc::new(PrefixBox),
        clock.clone() as Arc<dyn Clock>,
    );
    let acct = account("01hq3k5v9x8y7z6w5v4t3s2r1q", TOKEN);
    let a = registry.digitalocean_for(&acct).unwrap();
    let b = registry.digitalocean_for(&acct).unwrap();
    assert!(Arc::ptr_eq(&a, &b), "one adapter per account");
    let p = registry.provider_for(&acct).await.unwrap();
    p.check_credentials().await.unwrap();

    // A 429 seen by one caller pauses every caller of the account.
    assert!(matches!(p.load_balancers().get("lb1").await, Err(ProviderError::RateLimited { .. })));
    let before = server.received_requests().await.unwrap().len();
    assert_eq!(
        a.check_credentials().await.unwrap_err(),
        ProviderError::RateLimited { retry_after_ms: 5_000 }
    );
    assert_eq!(server.received_requests().await.unwrap().len(), before);

    // Another account has its own budget.
    let other = registry.digitalocean_for(&account("01hq3k5v9x8y7z6w5v4t3s2r1r", TOKEN)).unwrap();
    assert!(!Arc::ptr_eq(&a, &other));
    other.check_credentials().await.unwrap();

    // Credentials sealed for another row do not open.
    let mut stolen = account("01hq3k5v9x8y7z6w5v4t3s2r1s", TOKEN);
    stolen.credentials = acct.credentials.clone();
    assert!(matches!(registry.provider_for(&stolen).await, Err(ProviderError::Refused { .. })));

    // A token not stored yet: uncached, and a wrong one is Unauthorized.
    let wrong = registry
        .provider_for_credentials(&AccountCredentials::Token(SecretString::new("dop_v1_wrong")))
        .await
        .unwrap();
    assert_eq!(wrong.check_credentials().await.unwrap_err(), ProviderError::Unauthorized);
    assert_eq!(wrong.offer().cluster_modes, vec![ClusterMode::Standard]);
    assert!(wrong.offer().lacks_mode(ClusterMode::Autopilot).is_some());
}
