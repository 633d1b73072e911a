//! The direct `ClusterApi` face on the simulator (no HTTP): the same ownership rules and
//! error classes as the real adapter over HTTP, driven with the kubeconfig the
//! simulated DigitalOcean serves.

use std::sync::Arc;

use bc_domain::model::SecretString;
use bc_domain::name::LABEL_SUBSTRATE_POOL;
use bc_domain::ports::{
    ApplyOutcome, ClusterApi, ClusterError, DeleteOutcome, ObjectKind, ObjectRef,
};
use bc_domain::ports::{Clock, ManualClock};
use bc_sim::direct::DirectProvider;
use bc_sim::kube::direct::DirectClusterApi;
use bc_sim::{Sim, SimConfig, testing};
use serde_json::json;

fn ns_ref(name: &str) -> ObjectRef {
    testing::object_ref(ObjectKind::Namespace, None, name)
}

/// A simulator (not served: the direct face needs no listener) with one cluster that
/// is still provisioning, and its kubeconfig once it runs.
fn setup() -> (Sim, Arc<ManualClock>, String) {
    let (sim, clock) = testing::sim(SimConfig::default());
    let id = testing::create_cluster(
        &sim,
        "c1",
        vec![
            testing::node_pool("bc-p1", 2, &[(LABEL_SUBSTRATE_POOL, "p1")]),
            testing::node_pool("own", 1, &[]),
        ],
    );
    (sim, clock, id)
}

fn kubeconfig(sim: &Sim, id: &str) -> SecretString {
    SecretString::new(testing::kubeconfig(sim, id))
}

#[tokio::test]
async fn direct_face_keeps_the_ownership_rules() {
    let (sim, clock, id) = setup();
    testing::run_until_running(&sim, &clock, &id);
    let api = DirectClusterApi::new(sim.state().clone());
    let c = api.connect(&kubeconfig(&sim, &id)).await.unwrap();

    assert_eq!(c.get_labels(&ns_ref("bc-p1")).await.unwrap(), None);
    assert_eq!(
        c.apply_owned(&testing::namespace_object("bc-p1", "p1"), &testing::owner("p1"))
            .await
            .unwrap(),
        ApplyOutcome::Created
    );
    let rv = |name: &str| {
        sim.state().kube.get_object(&id, ObjectKind::Namespace, None, name).unwrap()["metadata"]
            ["resourceVersion"]
            .clone()
    };
    // The first apply after the create records an `Apply` entry in managedFields (the
    // create was an `Update`), as the apiserver does; an apply after that changes nothing.
    for _ in 0..2 {
        assert_eq!(
            c.apply_owned(&testing::namespace_object("bc-p1", "p1"), &testing::owner("p1"))
                .await
                .unwrap(),
            ApplyOutcome::Applied
        );
    }
    let before = rv("bc-p1");
    assert_eq!(
        c.apply_owned(&testing::namespace_object("bc-p1", "p1"), &testing::owner("p1"))
            .await
            .unwrap(),
        ApplyOutcome::Applied
    );
    assert_eq!(rv("bc-p1"), before);
    assert_eq!(
        c.apply_owned(&testing::namespace_object("bc-p1", "p2"), &testing::owner("p2"))
            .await
            .unwrap(),
        ApplyOutcome::Foreign { owner: Some("p1".into()) }
    );

    sim.state()
        .kube
        .apply_manifest(
            &id,
            "kubectl",
            &json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"theirs"}}),
            false,
            clock.now(),
        )
        .unwrap();
    let theirs = rv("theirs");
    assert_eq!(
        c.apply_owned(&testing::namespace_object("theirs", "p1"), &testing::owner("p1"))
            .await
            .unwrap(),
        ApplyOutcome::Foreign { owner: None }
    );
    assert_eq!(rv("theirs"), theirs, "not patched");
    assert_eq!(
        c.delete_owned(&ns_ref("theirs"), &testing::owner("p1")).await.unwrap(),
        DeleteOutcome::Foreign { owner: None }
    );
    assert_eq!(
        c.delete_owned(&ns_ref("bc-p1"), &testing::owner("p1")).await.unwrap(),
        DeleteOutcome::Deleted
    );
    assert_eq!(
        c.delete_owned(&ns_ref("bc-p1"), &testing::owner("p1")).await.unwrap(),
        DeleteOutcome::Absent
    );

    let ours = c.list_nodes("better-compute.dev/substrate-pool=p1").await.unwrap();
    assert_eq!(ours.len(), 2);
    assert!(ours.iter().all(|n| n.ready));
    assert_eq!(c.list_nodes("!better-compute.dev/substrate-pool").await.unwrap().len(), 1);
    assert!(matches!(c.list_nodes("a in (b").await, Err(ClusterError::Refused(_))));
}

#[tokio::test]
async fn direct_face_gates_like_the_http_face() {
    let (sim, clock, id) = setup();
    let api = DirectClusterApi::new(sim.state().clone());
    // The kubeconfig is served only once the cluster provisioned; build one by hand for
    // the provisioning window, as a stale one would look.
    let token = sim.state().model().cluster_api_token(&id).unwrap();
    let early = SecretString::new(format!(
        "clusters:\n- cluster:\n    server: \"http://127.0.0.1:1/k8s/{id}\"\nusers:\n- user:\n    token: \"{token}\"\n"
    ));
    let c = api.connect(&early).await.unwrap();
    assert!(
        matches!(c.list_nodes("").await, Err(ClusterError::Unreachable(_))),
        "503 while provisioning"
    );

    testing::run_until_running(&sim, &clock, &id);
    let good = kubeconfig(&sim, &id);
    let bad = SecretString::new(good.expose().replace(&token, "nope"));
    let c = api.connect(&bad).await.unwrap();
    let err = c.list_nodes("").await.unwrap_err();
    // 401: an expired or revoked token is a credentials error (mint new ones), as the
    // kube adapter classifies it.
    assert!(matches!(err, ClusterError::Credentials(_)), "{err:?}");

    let elsewhere = SecretString::new(good.expose().replace(&id, "no-such-cluster"));
    let c = api.connect(&elsewhere).await.unwrap();
    assert_eq!(
        c.get_labels(&ns_ref("x")).await.unwrap(),
        None,
        "404 on GET reads as absent, as over HTTP"
    );
    assert!(matches!(c.list_nodes("").await, Err(ClusterError::Refused(_))));

    assert!(matches!(
        api.connect(&SecretString::new("not a kubeconfig")).await.err(),
        Some(ClusterError::Credentials(_))
    ));
    assert!(matches!(
        api.connect(&SecretString::new("server: https://example.com\ntoken: t\n")).await.err(),
        Some(ClusterError::Credentials(_))
    ));
}

/// SPEC §6 under races, through the direct face: the same scenario as the kube
/// adapter's over HTTP (testing::check_ownership_races).
#[tokio::test]
async fn ownership_holds_when_the_tenant_acts_between_read_and_write() {
    let env = testing::ClusterEnv::start().await;
    testing::check_ownership_races(&env, &DirectClusterApi::new(env.sim.state().clone())).await;
}

/// A revoked cluster token, through the direct faces: the session mints anew.
#[tokio::test]
async fn a_revoked_cluster_token_is_replaced_by_a_new_mint() {
    let env = testing::ClusterEnv::start().await;
    let state = env.sim.state().clone();
    testing::check_session_recovers_from_a_revoked_token(
        &env,
        Arc::new(DirectProvider::new(state.clone(), testing::TEST_TOKEN)),
        Arc::new(DirectClusterApi::new(state)),
    )
    .await;
}
