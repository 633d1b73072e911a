//! Parity between the two ways tests reach the simulated cloud: the DigitalOcean adapter
//! over the simulator's HTTP face, and the simulator's in-process direct face. Reconciler
//! tests use the direct face and `bc-api dev` uses the adapter, so they must agree.
//!
//! Invariant kept: for the same model, both faces return equal port values (clusters,
//! node pools, load balancers, options, upgrades) and the same error classes — down to
//! the equal `RateLimited` wait — because both classify with
//! `bc_domain::classify::digitalocean`.

use std::mem::discriminant;

use bc_domain::ProviderError;
use bc_domain::model::Protocol;
use bc_domain::ports::{
    CreateClusterRequest, KubernetesProvider, LoadBalancerProvider, LoadBalancerRequest,
    ProviderImpl, ProviderResult, ProviderTargets, UpdateClusterRequest,
};
use bc_providers::digitalocean::DigitalOcean;
use bc_sim::SimConfig;
use bc_sim::direct::DirectProvider;
use bc_sim::model::{Fault, routes};
use bc_sim::testing::{self, Served, TEST_TOKEN};

mod common;

/// The adapter of account `token` over `served`'s HTTP face.
fn http(served: &Served, token: &str) -> DigitalOcean {
    common::adapter_with(served, common::config(served), token)
}

fn direct(served: &Served, token: &str) -> DirectProvider {
    DirectProvider::new(served.sim.state().clone(), token)
}

/// A TCP load balancer targeting a tag, two size units.
fn lb(name: &str) -> LoadBalancerRequest {
    let mut r = testing::lb_request(name);
    r.region = Some("ams3".into());
    r.forwarding_rules[0].entry_protocol = Protocol::Tcp;
    r.forwarding_rules[0].target_protocol = Protocol::Tcp;
    r.targets = ProviderTargets::Tag("web".into());
    r.size_unit = Some(2);
    r.tags = vec!["bc".into()];
    r
}

/// Asserts both answers are the same class (and equal when they are not messages).
fn same_class<T: std::fmt::Debug>(what: &str, a: ProviderResult<T>, b: ProviderResult<T>) {
    let (a, b) = (a.unwrap_err(), b.unwrap_err());
    assert_eq!(discriminant(&a), discriminant(&b), "{what}: {a:?} vs {b:?}");
    if !matches!(a, ProviderError::Refused { .. } | ProviderError::Transient { .. }) {
        assert_eq!(a, b, "{what}");
    }
}

#[tokio::test]
async fn both_faces_report_the_same_objects_and_errors() {
    let served = Served::start(SimConfig::default()).await;
    let (http, direct) = (http(&served, TEST_TOKEN), direct(&served, TEST_TOKEN));

    let created = http
        .create_cluster(&CreateClusterRequest {
            region: "ams3".into(),
            high_availability: true,
            ..testing::cluster_request(
                "parity",
                vec![
                    testing::node_pool_request("small", 2),
                    testing::node_pool_request("large", 1),
                ],
            )
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
        served.step(5);
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
    same_class("unknown id", http.get_cluster("nope").await, direct.get_cluster("nope").await);
    same_class(
        "duplicate name",
        http.create(&lb("parity-lb")).await,
        direct.create(&lb("parity-lb")).await,
    );
    let mut changed = lb("parity-lb");
    changed.size_unit = Some(3);
    http.update(&lb_made.id, &changed).await.unwrap();
    // Both are now inside the busy window of that update.
    let busy = http.update(&lb_made.id, &changed).await;
    assert!(matches!(busy, Err(ProviderError::Transient { .. })), "{busy:?}");
    same_class("busy", busy, direct.update(&lb_made.id, &changed).await);
}

/// Every error class the simulator produces, through both faces: a scope refusal (403
/// that is not "busy"), a wrong token, injected 500 and 429, a refusal (422), the HA
/// downgrade DigitalOcean refuses.
#[tokio::test]
async fn every_error_class_is_the_same_on_both_faces() {
    let served = Served::start(SimConfig::default()).await;
    served.sim.state().model().add_scoped_token("dop_v1_reader", &["kubernetes:read"]);
    let req = testing::cluster_request("c", vec![testing::node_pool_request("p", 1)]);
    let (reader_http, reader_direct) =
        (http(&served, "dop_v1_reader"), direct(&served, "dop_v1_reader"));
    let refused = reader_http.create_cluster(&req).await;
    assert!(matches!(refused, Err(ProviderError::Refused { .. })), "{refused:?}");
    same_class("403 out of scope", refused, reader_direct.create_cluster(&req).await);

    let (wrong_http, wrong_direct) =
        (http(&served, "dop_v1_wrong"), direct(&served, "dop_v1_wrong"));
    same_class("401", wrong_http.check_credentials().await, wrong_direct.check_credentials().await);

    let (http, direct) = (http(&served, TEST_TOKEN), direct(&served, TEST_TOKEN));
    let key = routes::key("GET", routes::LOAD_BALANCERS);
    for fault in [Fault::ServerError, Fault::TooManyRequests { retry_after: 7 }] {
        served.sim.state().model().inject_failures(&key, 2, fault);
        same_class("injected", http.list().await, direct.list().await);
    }
    // The adapter's account bucket honours the 429's retry-after for every later call.
    served.step(8);
    served.sim.state().model().refuse(&routes::key("POST", routes::CLUSTERS), "no capacity");
    same_class("422", http.create_cluster(&req).await, direct.create_cluster(&req).await);
    served.sim.state().model().clear_faults();

    let ha = http
        .create_cluster(&CreateClusterRequest { high_availability: true, ..req.clone() })
        .await
        .unwrap();
    let down = UpdateClusterRequest {
        high_availability: Some(false),
        ..UpdateClusterRequest::keeping(&ha)
    };
    let e = http.update_cluster(&ha.id, &down).await;
    assert!(matches!(e, Err(ProviderError::Refused { .. })), "{e:?}");
    same_class("HA true → false", e, direct.update_cluster(&ha.id, &down).await);
}

/// Research §4.4: the cluster PUT through both faces changes the same cluster the same
/// way (name, tags, HA false → true, upgrade settings, maintenance window).
#[tokio::test]
async fn cluster_update_is_the_same_on_both_faces() {
    let served = Served::start(SimConfig::default()).await;
    let (http, direct) = (http(&served, TEST_TOKEN), direct(&served, TEST_TOKEN));
    let pools = || vec![testing::node_pool_request("p", 1)];
    let a = http.create_cluster(&testing::cluster_request("a", pools())).await.unwrap();
    let b = http.create_cluster(&testing::cluster_request("b", pools())).await.unwrap();
    served.step(60);
    let change = |c: &bc_domain::ports::ProviderCluster, name: &str| UpdateClusterRequest {
        name: name.into(),
        tags: vec!["bc".into(), "team".into()],
        high_availability: Some(true),
        auto_upgrade: Some(true),
        maintenance_window: Some(bc_domain::ports::MaintenanceWindow {
            start_time: "04:30".into(),
            day: "tuesday".into(),
        }),
        ..UpdateClusterRequest::keeping(c)
    };
    let via_http = http.update_cluster(&a.id, &change(&a, "a2")).await.unwrap();
    let via_direct = direct.update_cluster(&b.id, &change(&b, "b2")).await.unwrap();
    assert_eq!((via_http.name.as_str(), via_direct.name.as_str()), ("a2", "b2"));
    for c in [&via_http, &via_direct] {
        assert!(c.high_availability && c.auto_upgrade && !c.surge_upgrade);
        assert_eq!(c.tags, vec!["bc", "team"]);
        assert_eq!(c.maintenance_window.as_ref().unwrap().day, "tuesday");
    }
    // What each face reports is what the other reads back.
    assert_eq!(direct.get_cluster(&a.id).await.unwrap(), via_http);
    assert_eq!(http.get_cluster(&b.id).await.unwrap(), via_direct);
    assert_eq!(served.count("PUT", routes::CLUSTER), 2);
}

/// One rule for what a load balancer reads back: its tags come back as sent (`k8s:<id>`
/// included: DigitalOcean adds none to load balancers), and its kind as the provider has
/// it (`REGIONAL_NETWORK` stays that, so a PUT keeps it) — so the observed spec equals
/// the requested one and a reconciler sees no change to make.
#[tokio::test]
async fn a_load_balancer_reads_back_as_requested_on_both_faces() {
    let served = Served::start(SimConfig::default()).await;
    let (http, direct) = (http(&served, TEST_TOKEN), direct(&served, TEST_TOKEN));
    let mut tagged = lb("tagged");
    tagged.tags = vec!["k8s:4d2c0f3e-0000-4000-8000-000000000000".into(), "team".into()];
    let mut network = lb("network");
    network.kind = bc_domain::ports::ProviderLoadBalancerKind::RegionalNetwork;
    for (made_by, req) in [(&http as &dyn ProviderImpl, tagged), (&direct, network)] {
        let made = made_by.load_balancers().create(&req).await.unwrap();
        served.step(60);
        for face in [&http as &dyn ProviderImpl, &direct] {
            let got = face.load_balancers().get(&made.id).await.unwrap();
            assert_eq!(got.spec, req, "observed equals desired");
            // A PUT of what was read is accepted: same kind, same tags.
            face.load_balancers().update(&made.id, &got.spec).await.unwrap();
            served.step(60);
        }
    }
}
