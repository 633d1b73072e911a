//! The DigitalOcean adapter against the simulator's HTTP face over loopback: every port
//! operation, and every error class the simulator can produce (401, 404, 422, busy 403,
//! 429 with `retry-after` and with only `ratelimit-reset`, 500), with time stepped on a
//! shared `ManualClock`.
//!
//! Invariant kept: what the adapter reports is what the simulated cloud holds, and the
//! number of provider calls is what the budget rules say (asserted by the simulator's
//! per-route counters, never by timing).

use bc_domain::ProviderError;
use bc_domain::policy::{Taint, TaintEffect};
use bc_domain::ports::{
    CreateClusterRequest, KubernetesProvider, LoadBalancerProvider, LoadBalancerRequest,
    MaintenanceWindow, NodePoolRequest, ProviderClusterState, ProviderLoadBalancerStatus,
    ProviderNodeState, ProviderTargets, UpdateClusterRequest,
};
use bc_providers::digitalocean::DigitalOceanConfig;
use bc_sim::SimConfig;
use bc_sim::model::{ClusterState, Fault, routes};
use bc_sim::testing::{self, Served, TEST_TOKEN};

use crate::common;

use common::{adapter, adapter_with, config};

/// Pool `name` of `count` nodes, labelled `bc/pool=<name>`, tagged `bc`.
fn pool(name: &str, count: u32) -> NodePoolRequest {
    testing::node_pool_request(name, count)
}

/// Cluster `name` with pools `alpha` (2 nodes) and `beta` (1 node).
fn cluster_request(name: &str) -> CreateClusterRequest {
    testing::cluster_request(name, vec![pool("alpha", 2), pool("beta", 1)])
}

#[tokio::test]
async fn cluster_lifecycle_through_every_kubernetes_operation() {
    let w = Served::start(SimConfig::default()).await;
    let a = adapter(&w);

    let options = a.options().await.unwrap();
    assert!(options.regions.contains(&"nyc1".to_owned()));
    assert!(options.sizes.contains(&"s-1vcpu-2gb".to_owned()));
    assert!(!options.versions.is_empty());

    let created = a.create_cluster(&cluster_request("bc-one")).await.unwrap();
    assert_eq!(created.state, ProviderClusterState::Provisioning);
    assert_eq!(created.endpoint, None);
    assert_eq!(created.tags, vec!["bc"], "k8s and k8s:<id> are stripped");
    assert_eq!(created.node_pools.len(), 2);
    assert!(created.node_pools.iter().all(|p| p.tags == vec!["bc"]));
    let id = created.id.clone();

    // Not provisioned yet: no kubeconfig, which is "not ready yet" (research §8.1).
    let e = a.credentials(&id).await.unwrap_err();
    assert!(
        matches!(&e, ProviderError::Transient { message } if message.contains("not served yet")),
        "{e:?}"
    );

    w.step(5);
    let c = a.get_cluster(&id).await.unwrap();
    assert_eq!(c.state, ProviderClusterState::Running);
    assert!(c.endpoint.is_some());
    assert!(c.created_at.is_some());
    let nodes: Vec<_> = c.node_pools.iter().flat_map(|p| &p.nodes).collect();
    assert_eq!(nodes.len(), 3);
    assert!(nodes.iter().all(|n| n.state == ProviderNodeState::Running && !n.name.is_empty()));
    assert!(nodes.iter().all(|n| n.droplet_id.is_some()));

    let listed = a.list_clusters().await.unwrap();
    assert_eq!(listed.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), [id.as_str()]);

    // Node pools: list, get, create, update, delete node, delete pool.
    let pools = a.list_node_pools(&id).await.unwrap();
    assert_eq!(pools.len(), 2);
    let alpha = pools.iter().find(|p| p.name == "alpha").unwrap().clone();
    assert_eq!(a.get_node_pool(&id, &alpha.id).await.unwrap().count, 2);
    assert_eq!(alpha.labels.get("bc/pool").map(String::as_str), Some("alpha"));

    let gamma = a
        .create_node_pool(
            &id,
            &NodePoolRequest { count: None, auto_scale: Some((1, 3)), ..pool("gamma", 0) },
        )
        .await
        .unwrap();
    assert!(gamma.auto_scale);
    assert_eq!((gamma.count, gamma.min_nodes, gamma.max_nodes), (1, 1, 3));

    let resized = a.update_node_pool(&id, &alpha.id, &pool("alpha", 3)).await.unwrap();
    assert_eq!(resized.count, 3);
    // An autoscaled pool updated without a count keeps the provider's count.
    let g2 = a
        .update_node_pool(
            &id,
            &gamma.id,
            &NodePoolRequest { count: None, auto_scale: Some((1, 5)), ..pool("gamma", 0) },
        )
        .await
        .unwrap();
    assert_eq!((g2.count, g2.max_nodes), (1, 5));

    let node = alpha.nodes[0].id.clone();
    a.delete_node(&id, &alpha.id, &node, true, true).await.unwrap();
    let after = a.get_node_pool(&id, &alpha.id).await.unwrap();
    assert_eq!(after.count, 3, "replace keeps the count");
    let beta = pools.iter().find(|p| p.name == "beta").unwrap();
    a.delete_node(&id, &beta.id, &beta.nodes[0].id, false, false).await.unwrap();
    assert_eq!(a.get_node_pool(&id, &beta.id).await.unwrap().count, 0, "no replace shrinks");

    a.delete_node_pool(&id, &gamma.id).await.unwrap();
    w.step(10);
    assert_eq!(a.get_node_pool(&id, &gamma.id).await.unwrap_err(), ProviderError::NotFound);

    // Upgrades: from an older patch there is a path; upgrade and watch it run.
    assert!(w.sim.state().model().force_cluster_version(&id, "1.32.5-do.0"));
    let ups = a.available_upgrades(&id).await.unwrap();
    assert!(ups.iter().any(|v| v.slug == "1.32.6-do.1"), "{ups:?}");
    a.upgrade_cluster(&id, "1.32.6-do.1").await.unwrap();
    assert_eq!(a.get_cluster(&id).await.unwrap().state, ProviderClusterState::Upgrading);
    w.step(5);
    let up = a.get_cluster(&id).await.unwrap();
    assert_eq!((up.state, up.version.as_str()), (ProviderClusterState::Running, "1.32.6-do.1"));
    // An invalid path is refused with the provider's message passed through.
    let e = a.upgrade_cluster(&id, "1.31.9-do.0").await.unwrap_err();
    assert!(matches!(&e, ProviderError::Refused { message } if message.contains("422")), "{e:?}");

    // Kubeconfig: YAML passed through, minted once and reused.
    let creds = a.credentials(&id).await.unwrap();
    assert!(creds.kubeconfig.expose().contains("kind: Config"));
    let endpoint = w.sim.state().model().cluster_endpoint(&id);
    assert!(creds.kubeconfig.expose().contains(&format!("server: \"{endpoint}\"")));
    a.credentials(&id).await.unwrap();
    assert_eq!(w.count("GET", routes::KUBECONFIG), 2, "one 404 before running, then one mint");

    // Associated resources: an LB tagged k8s:<id> is listed and deleted selectively.
    let lb = a
        .create(&LoadBalancerRequest {
            tags: vec![format!("k8s:{id}")],
            ..testing::lb_request("svc")
        })
        .await
        .unwrap();
    let keep = a.create(&testing::lb_request("keep")).await.unwrap();
    let assoc = a.associated_resources(&id).await.unwrap();
    assert_eq!(
        assoc.load_balancers.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        [lb.id.as_str()]
    );
    a.delete_cluster_selective(&id, std::slice::from_ref(&lb.id)).await.unwrap();
    assert_eq!(a.get(&lb.id).await.unwrap_err(), ProviderError::NotFound);
    assert!(a.get(&keep.id).await.is_ok());
    w.step(5);
    assert_eq!(a.get_cluster(&id).await.unwrap_err(), ProviderError::NotFound);
}

#[tokio::test]
async fn plain_delete_leaves_the_cluster_gone_and_404s_are_not_found() {
    let w = Served::start(SimConfig::default()).await;
    let a = adapter(&w);
    let c = a.create_cluster(&cluster_request("bc-two")).await.unwrap();
    w.step(5);
    a.delete_cluster(&c.id).await.unwrap();
    w.step(5);
    assert_eq!(a.get_cluster(&c.id).await.unwrap_err(), ProviderError::NotFound);
    assert_eq!(a.delete_cluster(&c.id).await.unwrap_err(), ProviderError::NotFound);
    assert_eq!(a.get_cluster("no-such-cluster").await.unwrap_err(), ProviderError::NotFound);
    assert_eq!(a.list_node_pools("no-such-cluster").await.unwrap_err(), ProviderError::NotFound);
}

#[tokio::test]
async fn forced_error_state_is_reported_with_its_message() {
    let w = Served::start(SimConfig::default()).await;
    let a = adapter(&w);
    let c = a.create_cluster(&cluster_request("bc-err")).await.unwrap();
    assert!(w.sim.state().model().force_cluster_state(
        &c.id,
        ClusterState::Error,
        "droplet limit exceeded"
    ));
    let got = a.get_cluster(&c.id).await.unwrap();
    assert_eq!(got.state, ProviderClusterState::Error);
    assert_eq!(got.message.as_deref(), Some("droplet limit exceeded"));
}

#[tokio::test]
async fn load_balancer_lifecycle_with_busy_update() {
    let w = Served::start(SimConfig::default()).await;
    let a = adapter(&w);
    let lb = a.create(&testing::lb_request("web")).await.unwrap();
    assert_eq!(lb.status, ProviderLoadBalancerStatus::New);
    assert_eq!(lb.ip, None);
    assert_eq!(lb.spec, testing::lb_request("web"), "what came back diffs equal to what was asked");

    // Still applying the create: a PUT is refused as busy, which is retryable.
    let mut changed = testing::lb_request("web");
    changed.targets = ProviderTargets::Tag("web-backends".into());
    changed.size_unit = Some(2);
    let e = a.update(&lb.id, &changed).await.unwrap_err();
    assert!(matches!(&e, ProviderError::Busy { message } if message.contains("403")), "{e:?}");
    assert!(e.is_retryable());

    w.step(2);
    let active = a.get(&lb.id).await.unwrap();
    assert_eq!(active.status, ProviderLoadBalancerStatus::Active);
    assert!(active.ip.is_some());

    let updated = a.update(&lb.id, &changed).await.unwrap();
    assert_eq!(updated.spec, changed, "the whole object was replaced");
    assert_eq!(updated.ip, active.ip);

    // A duplicate name is refused with the provider's message passed through.
    let e = a.create(&testing::lb_request("web")).await.unwrap_err();
    assert!(
        matches!(&e, ProviderError::Refused { message } if message.contains("name is not unique")),
        "{e:?}"
    );

    a.delete(&lb.id).await.unwrap();
    assert_eq!(a.get(&lb.id).await.unwrap_err(), ProviderError::NotFound);
    assert_eq!(a.delete(&lb.id).await.unwrap_err(), ProviderError::NotFound);
}

#[tokio::test]
async fn global_load_balancer_round_trips() {
    let w = Served::start(SimConfig::default()).await;
    let a = adapter(&w);
    let regional = a.create(&testing::lb_request("r1")).await.unwrap();
    let req = LoadBalancerRequest {
        redirect_http_to_https: true,
        ..testing::global_lb_request("g1", &[&regional.id])
    };
    let g = a.create(&req).await.unwrap();
    assert_eq!(g.spec, req);
    w.step(2);
    assert_eq!(a.get(&g.id).await.unwrap().status, ProviderLoadBalancerStatus::Active);
}

#[tokio::test]
async fn list_reads_every_page() {
    let w = Served::start(SimConfig::default()).await;
    let a = adapter(&w);
    for i in 0..45 {
        a.create(&testing::lb_request(&format!("lb-{i:02}"))).await.unwrap();
    }
    // Default page size 200: one call.
    assert_eq!(a.list().await.unwrap().len(), 45);
    assert_eq!(w.count("GET", routes::LOAD_BALANCERS), 1);
    // Page size 20: three calls, every object once, in order.
    let small = adapter_with(&w, DigitalOceanConfig { per_page: 20, ..config(&w) }, TEST_TOKEN);
    let all = small.list().await.unwrap();
    assert_eq!(w.count("GET", routes::LOAD_BALANCERS), 4);
    let names: Vec<_> = all.iter().map(|l| l.spec.name.clone()).collect();
    let expected: Vec<_> = (0..45).map(|i| format!("lb-{i:02}")).collect();
    assert_eq!(names, expected);

    // Clusters page the same way.
    for i in 0..3 {
        a.create_cluster(&cluster_request(&format!("c-{i}"))).await.unwrap();
    }
    let tiny = adapter_with(&w, DigitalOceanConfig { per_page: 2, ..config(&w) }, TEST_TOKEN);
    assert_eq!(tiny.list_clusters().await.unwrap().len(), 3);
    assert_eq!(w.count("GET", routes::CLUSTERS), 2);
}

#[tokio::test]
async fn wrong_token_is_unauthorized() {
    let w = Served::start(SimConfig::default()).await;
    let a = adapter_with(&w, config(&w), "dop_v1_not_this_one");
    assert_eq!(a.list_clusters().await.unwrap_err(), ProviderError::Unauthorized);
    assert_eq!(a.get("x").await.unwrap_err(), ProviderError::Unauthorized);
}

#[tokio::test]
async fn injected_429_pauses_every_caller_for_retry_after() {
    let w = Served::start(SimConfig::default()).await;
    let a = adapter(&w);
    let lb = a.create(&testing::lb_request("web")).await.unwrap();
    w.sim.state().model().inject_failures(
        &routes::key("GET", routes::LOAD_BALANCER),
        1,
        Fault::TooManyRequests { retry_after: 7 },
    );
    assert_eq!(
        a.get(&lb.id).await.unwrap_err(),
        ProviderError::RateLimited { retry_after_ms: 7_000 }
    );
    // Another operation of the same account waits too, without a request.
    let before = w.sim.state().model().total_requests();
    assert!(matches!(a.list().await, Err(ProviderError::RateLimited { .. })));
    assert_eq!(w.sim.state().model().total_requests(), before);
    w.step(7);
    assert!(a.get(&lb.id).await.is_ok());
}

#[tokio::test]
async fn hourly_limit_429_carries_only_ratelimit_reset() {
    let mut config = SimConfig::default();
    config.rate_limits.per_hour = 3;
    let w = Served::start(config).await;
    // The first adapter learns from the headers and stops by itself after the third call.
    let a = adapter(&w);
    for _ in 0..3 {
        a.options().await.unwrap();
    }
    w.step(10);
    let e = a.options().await.unwrap_err();
    let ProviderError::RateLimited { retry_after_ms } = e else { panic!("{e:?}") };
    assert_eq!(retry_after_ms, 3_590_000, "until the oldest request ages out");
    assert_eq!(w.count("GET", routes::OPTIONS), 3, "paused locally, no fourth call");

    // A second client of the token (its own bucket, no headers seen yet) gets the
    // provider's 429, which has no retry-after: the wait comes from ratelimit-reset.
    let b = adapter(&w);
    assert_eq!(
        b.options().await.unwrap_err(),
        ProviderError::RateLimited { retry_after_ms: 3_590_000 }
    );
    assert_eq!(w.count("GET", routes::OPTIONS), 4);
    w.step(3_590);
    assert!(b.options().await.is_ok());
}

#[tokio::test]
async fn burst_limit_429_carries_retry_after() {
    let mut config = SimConfig::default();
    config.rate_limits.per_minute = 2;
    let w = Served::start(config).await;
    // A generous local budget, so the provider's burst limit is what trips.
    let a = adapter(&w);
    a.options().await.unwrap();
    w.step(20);
    a.options().await.unwrap();
    let e = a.options().await.unwrap_err();
    assert_eq!(e, ProviderError::RateLimited { retry_after_ms: 40_000 });
    w.step(40);
    assert!(a.options().await.is_ok());
}

#[tokio::test]
async fn server_errors_are_transient_and_refusals_pass_the_message() {
    let w = Served::start(SimConfig::default()).await;
    let a = adapter(&w);
    let key = routes::key("POST", routes::CLUSTERS);
    w.sim.state().model().inject_failures(&key, 1, Fault::ServerError);
    let e = a.create_cluster(&cluster_request("bc-x")).await.unwrap_err();
    assert!(matches!(&e, ProviderError::Transient { message } if message.contains("500")), "{e:?}");
    w.sim.state().model().refuse(&key, "cluster limit reached for this account");
    let e = a.create_cluster(&cluster_request("bc-x")).await.unwrap_err();
    let ProviderError::Refused { message } = &e else { panic!("{e:?}") };
    assert!(message.starts_with("POST /v2/kubernetes/clusters: 422 (request \""), "{message}");
    assert!(message.ends_with("cluster limit reached for this account"), "{message}");
    assert!(!message.contains(TEST_TOKEN));
    w.sim.state().model().clear_faults();
    // Validation refusals of the simulated cloud pass through too.
    let bad = CreateClusterRequest { region: "mars1".into(), ..cluster_request("bc-y") };
    let e = a.create_cluster(&bad).await.unwrap_err();
    assert!(matches!(&e, ProviderError::Refused { message } if message.contains("mars1")), "{e:?}");
}

/// Deletes the account's oldest load balancer (as another client would).
fn delete_oldest(state: &bc_sim::SimState) {
    let now = state.clock.now();
    let mut m = state.model();
    let oldest = m.list_load_balancers(TEST_TOKEN, now).unwrap()[0].id.clone();
    m.delete_load_balancer(TEST_TOKEN, &oldest, now).unwrap();
}

/// Research §3: pages are numbered, so a delete on an earlier page while a client walks
/// them shifts a live object from a later page onto one already read. The walk notices
/// (`meta.total` moved) and walks again: every live object is listed, the deleted one
/// is not.
#[tokio::test]
async fn a_list_that_changes_between_pages_is_walked_again() {
    let w = Served::start(SimConfig::default()).await;
    let a = adapter_with(&w, DigitalOceanConfig { per_page: 2, ..config(&w) }, TEST_TOKEN);
    for i in 1..=5 {
        a.create(&testing::lb_request(&format!("lb-{i}"))).await.unwrap();
    }
    let route = routes::key("GET", routes::LOAD_BALANCERS);
    w.sim.state().interleave.after_list_page(&route, 1, delete_oldest);
    let names: Vec<String> = a.list().await.unwrap().into_iter().map(|l| l.spec.name).collect();
    assert_eq!(names, ["lb-2", "lb-3", "lb-4", "lb-5"], "lb-3 is not skipped, lb-1 is gone");
    // Page 2 shows the change (meta.total 5 → 4); the second walk reads two pages.
    assert_eq!(w.count("GET", routes::LOAD_BALANCERS), 2 + 2);

    // A list that changes under every walk is an error, never a partial list.
    for i in 6..=12 {
        a.create(&testing::lb_request(&format!("lb-{i}"))).await.unwrap();
    }
    for _ in 0..bc_providers::digitalocean::LIST_WALKS {
        w.sim.state().interleave.after_list_page(&route, 1, delete_oldest);
    }
    let e = a.list().await.unwrap_err();
    assert!(
        matches!(&e, ProviderError::Transient { message } if message.contains("changed")),
        "{e:?}"
    );
}

/// What the adapter reads back of the catalogue and of a pool's taints.
#[tokio::test]
async fn options_and_taints_read_back() {
    let w = Served::start(SimConfig::default()).await;
    let a = adapter(&w);
    let opts = a.options().await.unwrap();
    assert_eq!(opts.versions[0].slug, "1.33.1-do.0", "newest first");
    assert_eq!(opts.regions.len(), 10);
    assert!(opts.sizes.contains(&"gpu-h100x1-80gb".to_owned()));
    let tainted = NodePoolRequest {
        taints: vec![Taint { key: "bc".into(), value: "x".into(), effect: TaintEffect::NoExecute }],
        ..pool("t", 1)
    };
    let c = a.create_cluster(&testing::cluster_request("bc-t", vec![tainted.clone()])).await;
    let pool = c.unwrap().node_pools.remove(0);
    assert_eq!((pool.taints, pool.labels), (tainted.taints, tainted.labels));
}

/// Research §1: a 403 is retryable only when it is the load balancer's "busy" answer; a
/// scope refusal is `Refused`, and its message does not carry the token.
#[tokio::test]
async fn only_the_busy_403_is_transient() {
    let w = Served::start(SimConfig::default()).await;
    w.sim.state().model().add_scoped_token("dop_v1_reader", &["kubernetes:read"]);
    let reader = adapter_with(&w, config(&w), "dop_v1_reader");
    let e = reader.create_cluster(&cluster_request("bc-r")).await.unwrap_err();
    let ProviderError::Refused { message } = &e else { panic!("{e:?}") };
    assert!(message.contains("403") && !message.contains("dop_v1_reader"), "{message}");
    assert!(!e.is_retryable());
    assert!(reader.list_clusters().await.is_ok(), "reading is in its scope");

    let a = adapter(&w);
    let lb = a.create(&testing::lb_request("web")).await.unwrap();
    let busy = a.update(&lb.id, &testing::lb_request("web")).await.unwrap_err();
    assert!(matches!(busy, ProviderError::Busy { .. }), "{busy:?}");
}

/// Research §4.4: PUT changes name and tags, and high availability only false → true.
#[tokio::test]
async fn cluster_update_changes_name_tags_and_ha_only_upwards() {
    let w = Served::start(SimConfig::default()).await;
    let a = adapter(&w);
    let c = a.create_cluster(&cluster_request("bc-a")).await.unwrap();
    w.step(5);
    let c = a.get_cluster(&c.id).await.unwrap();
    assert!(!c.high_availability);
    let up = UpdateClusterRequest {
        name: "bc-b".into(),
        tags: vec!["bc".into(), "team".into()],
        high_availability: Some(true),
        surge_upgrade: Some(true),
        maintenance_window: Some(MaintenanceWindow {
            start_time: "03:00".into(),
            day: "sunday".into(),
        }),
        ..UpdateClusterRequest::keeping(&c)
    };
    let changed = a.update_cluster(&c.id, &up).await.unwrap();
    assert_eq!((changed.name.as_str(), changed.high_availability), ("bc-b", true));
    assert_eq!(changed.tags, vec!["bc", "team"], "server tags stay stripped");
    assert!(changed.surge_upgrade && !changed.auto_upgrade);
    assert_eq!(changed.maintenance_window, up.maintenance_window);
    assert_eq!(a.get_cluster(&c.id).await.unwrap(), changed, "it stuck");

    let down = UpdateClusterRequest {
        high_availability: Some(false),
        ..UpdateClusterRequest::keeping(&changed)
    };
    let e = a.update_cluster(&c.id, &down).await.unwrap_err();
    assert!(
        matches!(&e, ProviderError::Refused { message } if message.contains("high availability")),
        "{e:?}"
    );
    assert!(a.get_cluster(&c.id).await.unwrap().high_availability);
    assert_eq!(a.update_cluster("nope", &down).await.unwrap_err(), ProviderError::NotFound);
}
