//! The direct `ClusterApi` face on the simulator (no HTTP): the same ownership rules and
//! error classes as the real adapter over HTTP, driven with the kubeconfig the
//! simulated DigitalOcean serves.

use std::sync::Arc;

use bc_domain::model::SecretString;
use bc_domain::name::LABEL_SUBSTRATE_POOL;
use bc_domain::ports::{
    ApplyOutcome, ClusterApi, ClusterError, DeleteOutcome, KubeObject, ObjectKind, ObjectRef,
    OwnerLabel,
};
use bc_domain::ports::{Clock, ManualClock};
use bc_sim::kube::direct::DirectClusterApi;
use bc_sim::{Sim, SimConfig, testing};
use serde_json::json;

fn owner(pool: &str) -> OwnerLabel {
    OwnerLabel { key: LABEL_SUBSTRATE_POOL.into(), value: pool.into() }
}

fn ns_ref(name: &str) -> ObjectRef {
    ObjectRef { kind: ObjectKind::Namespace, namespace: None, name: name.into() }
}

fn namespace(name: &str, pool: &str) -> KubeObject {
    KubeObject {
        object: ns_ref(name),
        manifest: json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":name,"labels":{LABEL_SUBSTRATE_POOL:pool}}}),
    }
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
        c.apply_owned(&namespace("bc-p1", "p1"), &owner("p1")).await.unwrap(),
        ApplyOutcome::Created
    );
    let rv = |name: &str| {
        sim.state().kube.get_object(&id, ObjectKind::Namespace, None, name).unwrap()["metadata"]
            ["resourceVersion"]
            .clone()
    };
    let before = rv("bc-p1");
    assert_eq!(
        c.apply_owned(&namespace("bc-p1", "p1"), &owner("p1")).await.unwrap(),
        ApplyOutcome::Applied
    );
    assert_eq!(rv("bc-p1"), before);
    assert_eq!(
        c.apply_owned(&namespace("bc-p1", "p2"), &owner("p2")).await.unwrap(),
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
        c.apply_owned(&namespace("theirs", "p1"), &owner("p1")).await.unwrap(),
        ApplyOutcome::Foreign { owner: None }
    );
    assert_eq!(rv("theirs"), theirs, "not patched");
    assert_eq!(
        c.delete_owned(&ns_ref("theirs"), &owner("p1")).await.unwrap(),
        DeleteOutcome::Foreign { owner: None }
    );
    assert_eq!(
        c.delete_owned(&ns_ref("bc-p1"), &owner("p1")).await.unwrap(),
        DeleteOutcome::Deleted
    );
    assert_eq!(
        c.delete_owned(&ns_ref("bc-p1"), &owner("p1")).await.unwrap(),
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
    assert!(matches!(err, ClusterError::Refused(_)), "{err:?}");

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
