//! `KubeClusterApi` (the real `kube` 5 client) against the simulator's Kubernetes API,
//! connected with the kubeconfig the simulated DigitalOcean serves, on every way there:
//! the cluster's own TLS address (verified against the simulator's CA, as with DOKS),
//! the plain-http `/k8s/<cluster id>` path prefix, and in process (the seam the
//! reconcilers' tests use: the same client and layers, the cluster's router as the
//! service).

use std::sync::Arc;

use bc_domain::model::SecretString;
use bc_domain::name::{FIELD_MANAGER, LABEL_SUBSTRATE_POOL};
use bc_domain::ports::{
    ApplyOutcome, Clock, ClusterApi, ClusterClient, ClusterError, DeleteOutcome, KubeObject,
    ObjectError, ObjectKind,
};
use bc_providers::kube::{KubeClusterApi, classify};
use bc_sim::testing::{
    self, ClusterEnv, Face, bounded, namespace_object as namespace, object_ref as obj, owner,
};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::common;

/// Every scenario runs on every face.
macro_rules! on_every_face {
    ($($name:ident),* $(,)?) => {
        mod tls {
            $(#[tokio::test]
            async fn $name() {
                super::$name(super::Face::Tls).await
            })*
        }
        mod path_prefixed {
            $(#[tokio::test]
            async fn $name() {
                super::$name(super::Face::PathPrefixed).await
            })*
        }
        mod in_process {
            $(#[tokio::test]
            async fn $name() {
                super::$name(super::Face::InProcess).await
            })*
        }
    };
}

on_every_face!(
    apply_create_then_no_op_then_change,
    foreign_objects_are_reported_and_never_touched,
    unforced_apply_against_another_manager_is_a_conflict,
    list_nodes_by_label_selector,
    errors_are_classified_without_leaking_credentials,
);

/// A served simulator with a running cluster (pools `bc-p1` with our label and two
/// nodes, `own` with one node); its kubeconfig names the cluster's TLS address, signed
/// by the CA it carries.
async fn setup() -> ClusterEnv {
    let env = ClusterEnv::start().await;
    let kubeconfig = env.kubeconfig();
    assert!(kubeconfig.contains(&format!("server: \"{}\"", env.server(Face::Tls))));
    assert!(env.server(Face::Tls).starts_with("https://127.0.0.1:"));
    assert!(kubeconfig.contains("certificate-authority-data: "));
    env
}

/// The adapter that reaches the cluster on `face`.
fn api(env: &ClusterEnv, face: Face) -> KubeClusterApi {
    match face {
        Face::InProcess => {
            KubeClusterApi::in_process(testing::cluster_routes(env.sim.state().clone()))
        }
        Face::Tls | Face::PathPrefixed => KubeClusterApi::new(),
    }
}

/// Where a raw `kube` client (built as research/kube-wire.md says, without the seam)
/// reaches the cluster when the adapter is on `face`: the same way, or over TLS.
fn networked(face: Face) -> Face {
    match face {
        Face::InProcess => Face::Tls,
        other => other,
    }
}

async fn client(env: &ClusterEnv, face: Face) -> Arc<dyn ClusterClient> {
    let kubeconfig = SecretString::new(env.kubeconfig_on(face));
    bounded(api(env, face).connect(&kubeconfig)).await.unwrap()
}

fn rv_of(env: &ClusterEnv, kind: ObjectKind, ns: Option<&str>, name: &str) -> String {
    env.stored(kind, ns, name).unwrap()["metadata"]["resourceVersion"].as_str().unwrap().to_owned()
}

/// Our bcd DaemonSet in `ns` for `pool`, running `image`.
fn daemonset(ns: &str, pool: &str, image: &str) -> KubeObject {
    let mut spec = testing::bcd_daemonset_spec(Some(json!({LABEL_SUBSTRATE_POOL: pool})), &[]);
    spec["template"]["spec"]["containers"][0]["image"] = json!(image);
    testing::owned_object(ObjectKind::DaemonSet, Some(ns), "bcd", pool, json!({"spec": spec}))
}

async fn apply_create_then_no_op_then_change(face: Face) {
    let env = setup().await;
    let c = client(&env, face).await;
    let ns = namespace("bc-p1", "p1");
    assert_eq!(
        bounded(c.get_labels(&ns.object)).await.unwrap(),
        None,
        "get_opt of a missing object"
    );
    assert_eq!(bounded(c.apply_owned(&ns, &owner("p1"))).await.unwrap(), ApplyOutcome::Created);
    // The first apply after the create adds an `Apply` entry to managedFields (the create
    // was an `Update`); from then on a re-apply changes nothing.
    assert_eq!(bounded(c.apply_owned(&ns, &owner("p1"))).await.unwrap(), ApplyOutcome::Applied);
    let rv = rv_of(&env, ObjectKind::Namespace, None, "bc-p1");
    assert_eq!(bounded(c.apply_owned(&ns, &owner("p1"))).await.unwrap(), ApplyOutcome::Applied);
    assert_eq!(rv_of(&env, ObjectKind::Namespace, None, "bc-p1"), rv, "re-apply changed nothing");
    // The requests reached the cluster (on the path-prefixed face, kube kept the prefix).
    let kube = &env.sim.state().kube;
    assert_eq!(kube.request_count(&env.id, "get namespaces"), 4);
    // Absent: created (POST), never applied; then ours: applied.
    assert_eq!(kube.request_count(&env.id, "create namespaces"), 1);
    assert_eq!(kube.request_count(&env.id, "apply namespaces"), 2);
    assert_eq!(kube.request_count(&env.id, bc_sim::kube::UNMATCHED), 0);
    let labels = bounded(c.get_labels(&ns.object)).await.unwrap().unwrap();
    assert_eq!(labels.get(LABEL_SUBSTRATE_POOL).map(String::as_str), Some("p1"));

    // Secret with stringData, ServiceAccount, DaemonSet: typed reads parse what we serve.
    let secret = KubeObject {
        object: obj(ObjectKind::Secret, Some("bc-p1"), "bcd-join"),
        manifest: json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"bcd-join","namespace":"bc-p1",
            "labels":{LABEL_SUBSTRATE_POOL:"p1"}},"stringData":{"joinToken":"t","serverUrl":"http://x"}}),
    };
    assert_eq!(bounded(c.apply_owned(&secret, &owner("p1"))).await.unwrap(), ApplyOutcome::Created);
    let sa = KubeObject {
        object: obj(ObjectKind::ServiceAccount, Some("bc-p1"), "bcd"),
        manifest: json!({"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"bcd","namespace":"bc-p1","labels":{LABEL_SUBSTRATE_POOL:"p1"}}}),
    };
    assert_eq!(bounded(c.apply_owned(&sa, &owner("p1"))).await.unwrap(), ApplyOutcome::Created);
    let ds = daemonset("bc-p1", "p1", "bcd:1");
    assert_eq!(bounded(c.apply_owned(&ds, &owner("p1"))).await.unwrap(), ApplyOutcome::Created);
    let rv = rv_of(&env, ObjectKind::DaemonSet, Some("bc-p1"), "bcd");
    assert_eq!(
        bounded(c.apply_owned(&daemonset("bc-p1", "p1", "bcd:2"), &owner("p1"))).await.unwrap(),
        ApplyOutcome::Applied
    );
    assert_ne!(rv_of(&env, ObjectKind::DaemonSet, Some("bc-p1"), "bcd"), rv, "a change bumps it");

    let raw = testing::kube_client(&env.kubeconfig_on(networked(face))).await;
    let typed: DaemonSet =
        bounded(Api::<DaemonSet>::namespaced(raw.clone(), "bc-p1").get("bcd")).await.unwrap();
    let image = typed.spec.template.spec.unwrap().containers[0].image.clone();
    assert_eq!(image.as_deref(), Some("bcd:2"));
    assert_eq!(typed.metadata.generation, Some(2));
    let managed = typed.metadata.managed_fields.unwrap();
    assert_eq!(managed[0].manager.as_deref(), Some(FIELD_MANAGER));
    let s: Secret =
        bounded(Api::<Secret>::namespaced(raw.clone(), "bc-p1").get("bcd-join")).await.unwrap();
    assert_eq!(s.data.unwrap()["joinToken"].0, b"t".to_vec());
    let n: Namespace = bounded(Api::<Namespace>::all(raw).get("bc-p1")).await.unwrap();
    assert_eq!(n.status.unwrap().phase.as_deref(), Some("Active"));
}

async fn foreign_objects_are_reported_and_never_touched(face: Face) {
    let env = setup().await;
    let c = client(&env, face).await;
    let now = env.clock.now();
    // Made by kubectl without our label.
    env.sim
        .state()
        .kube
        .apply_manifest(&env.id, "kubectl", &json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"bc-p1","labels":{"team":"x"}}}), false, now)
        .unwrap();
    let rv = rv_of(&env, ObjectKind::Namespace, None, "bc-p1");
    let ns = namespace("bc-p1", "p1");
    assert_eq!(
        bounded(c.apply_owned(&ns, &owner("p1"))).await.unwrap(),
        ApplyOutcome::Foreign { owner: None }
    );
    assert_eq!(rv_of(&env, ObjectKind::Namespace, None, "bc-p1"), rv, "not patched");
    assert_eq!(
        bounded(c.delete_owned(&ns.object, &owner("p1"))).await.unwrap(),
        DeleteOutcome::Foreign { owner: None }
    );
    assert!(env.stored(ObjectKind::Namespace, None, "bc-p1").is_some(), "not deleted");

    // Another pool's object.
    assert_eq!(
        bounded(c.apply_owned(&namespace("bc-p2", "p2"), &owner("p2"))).await.unwrap(),
        ApplyOutcome::Created
    );
    assert_eq!(
        bounded(c.apply_owned(&namespace("bc-p2", "p1"), &owner("p1"))).await.unwrap(),
        ApplyOutcome::Foreign { owner: Some("p2".into()) }
    );
    assert_eq!(
        bounded(c.delete_owned(&obj(ObjectKind::Namespace, None, "bc-p2"), &owner("p1")))
            .await
            .unwrap(),
        DeleteOutcome::Foreign { owner: Some("p2".into()) }
    );

    // Ours: deleted, then absent.
    assert_eq!(
        bounded(c.delete_owned(&obj(ObjectKind::Namespace, None, "bc-p2"), &owner("p2")))
            .await
            .unwrap(),
        DeleteOutcome::Deleted
    );
    assert!(env.stored(ObjectKind::Namespace, None, "bc-p2").is_none());
    assert_eq!(
        bounded(c.delete_owned(&obj(ObjectKind::Namespace, None, "bc-p2"), &owner("p2")))
            .await
            .unwrap(),
        DeleteOutcome::Absent
    );
    // A namespaced delete (Success Status branch).
    assert_eq!(
        bounded(c.apply_owned(&namespace("bc-p3", "p3"), &owner("p3"))).await.unwrap(),
        ApplyOutcome::Created
    );
    let sa = KubeObject {
        object: obj(ObjectKind::ServiceAccount, Some("bc-p3"), "bcd"),
        manifest: json!({"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"bcd","namespace":"bc-p3","labels":{LABEL_SUBSTRATE_POOL:"p3"}}}),
    };
    assert_eq!(bounded(c.apply_owned(&sa, &owner("p3"))).await.unwrap(), ApplyOutcome::Created);
    assert_eq!(
        bounded(c.delete_owned(&sa.object, &owner("p3"))).await.unwrap(),
        DeleteOutcome::Deleted
    );
}

async fn unforced_apply_against_another_manager_is_a_conflict(face: Face) {
    let env = setup().await;
    let now = env.clock.now();
    let kube = &env.sim.state().kube;
    kube.apply_manifest(
        &env.id,
        "kubectl",
        &json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n"}}),
        false,
        now,
    )
    .unwrap();
    kube.apply_manifest(&env.id, "kubectl", &json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"n"},"data":{"k":"eA=="}}), false, now).unwrap();
    let raw = testing::kube_client(&env.kubeconfig_on(networked(face))).await;
    let api = Api::<Secret>::namespaced(raw, "n");
    let patch = json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"n"},"data":{"k":"eQ=="}});
    let err = bounded(api.patch("s", &PatchParams::apply(FIELD_MANAGER), &Patch::Apply(&patch)))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = &err else { panic!("{err:?}") };
    assert!(status.is_conflict());
    assert_eq!(status.code, 409);
    let causes = &status.details.as_ref().unwrap().causes;
    assert_eq!(causes[0].field, ".data.k");
    assert_eq!(causes[0].reason, "FieldManagerConflict");
    assert!(matches!(classify(&err, &[]), ObjectError::Conflict(_)));
    let ok =
        bounded(api.patch("s", &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&patch)))
            .await
            .unwrap();
    assert_eq!(ok.data.unwrap()["k"].0, b"y".to_vec());
}

async fn list_nodes_by_label_selector(face: Face) {
    let env = setup().await;
    let c = client(&env, face).await;
    let names = |sel: &'static str| {
        let c = c.clone();
        async move {
            let mut v: Vec<String> =
                bounded(c.list_nodes(sel)).await.unwrap().into_iter().map(|n| n.name).collect();
            v.sort();
            v
        }
    };
    let all = names("").await;
    assert_eq!(all.len(), 3);
    let ours = names("better-compute.dev/substrate-pool=p1").await;
    assert_eq!(ours.len(), 2);
    assert_eq!(names("better-compute.dev/substrate-pool in (p1,p9)").await, ours);
    assert_eq!(names("better-compute.dev/substrate-pool notin (p1)").await.len(), 1);
    assert_eq!(names("better-compute.dev/substrate-pool").await, ours);
    assert_eq!(names("!better-compute.dev/substrate-pool").await.len(), 1);
    assert_eq!(names("tier=a,better-compute.dev/substrate-pool!=p2").await, ours);
    let nodes = bounded(c.list_nodes("tier=a")).await.unwrap();
    assert!(
        nodes.iter().all(|n| n.ready
            && n.provider_id.as_deref().is_some_and(|p| p.starts_with("digitalocean://")))
    );
    let err = bounded(c.list_nodes("tier in (a")).await.unwrap_err();
    assert!(matches!(err, ClusterError::Refused(_)), "{err:?}");
}

async fn errors_are_classified_without_leaking_credentials(face: Face) {
    let env = setup().await;
    let token = env.sim.state().model().cluster_api_token(&env.id).unwrap();
    // Wrong (expired, revoked) token: 401 Unauthorized → Credentials (mint new ones).
    let bad = SecretString::new(env.kubeconfig_on(face).replace(&token, "wrong-token"));
    let c = bounded(api(&env, face).connect(&bad)).await.unwrap();
    let err = bounded(c.list_nodes("")).await.unwrap_err();
    assert!(matches!(err, ClusterError::Credentials(_)), "{err:?}");
    assert!(!err.to_string().contains("wrong-token"));

    // Not a kubeconfig: Credentials, without quoting it.
    let junk = SecretString::new(format!("{token}: [unbalanced"));
    let err = bounded(api(&env, face).connect(&junk)).await.err().unwrap();
    assert!(matches!(err, ClusterError::Credentials(_)));
    assert!(!err.to_string().contains(&token));

    // A cluster whose API is not up yet answers 503: Unreachable at once (no retry loop).
    let c2 = testing::create_cluster(&env.sim, "c2", vec![testing::node_pool("p", 1, &[])]);
    let tok2 = env.sim.state().model().cluster_api_token(&c2).unwrap();
    let kc2 = env
        .kubeconfig_on(face)
        .replace(&env.server(face), &env.server_of(face, &c2))
        .replace(&token, &tok2);
    let kc2 = SecretString::new(kc2);
    let c = bounded(api(&env, face).connect(&kc2)).await.unwrap();
    let err = bounded(c.get_labels(&obj(ObjectKind::Namespace, None, "x"))).await.unwrap_err();
    assert!(matches!(err, ClusterError::Unreachable(_)), "{err:?}");
    assert!(!err.to_string().contains(&tok2));

    // Nothing listening (and, in process, not a simulated cluster: over the network):
    // Unreachable.
    let nowhere = match face {
        Face::Tls | Face::InProcess => "https://127.0.0.1:9",
        Face::PathPrefixed => "http://127.0.0.1:9",
    };
    let dead = SecretString::new(env.kubeconfig_on(face).replace(&env.server(face), nowhere));
    let c = bounded(api(&env, face).connect(&dead)).await.unwrap();
    let err = bounded(c.list_nodes("")).await.unwrap_err();
    assert!(matches!(err, ClusterError::Unreachable(_)), "{err:?}");
    assert!(!err.to_string().contains(&token));
}

/// The cluster's certificate is verified against the kubeconfig's CA: a kubeconfig
/// carrying another simulator's CA (or none, so the system roots) cannot reach it, and
/// the failure is Unreachable without the token in it.
#[tokio::test]
async fn the_tls_face_is_verified_against_the_kubeconfigs_ca() {
    let env = setup().await;
    let token = env.token.clone();
    let other = ClusterEnv::start().await;
    let mine = env.sim.state().tls.ca_data();
    let theirs = other.sim.state().tls.ca_data();
    assert_ne!(mine, theirs, "a CA per simulator");
    let wrong_ca = SecretString::new(env.kubeconfig().replace(&mine, &theirs));
    let no_ca = SecretString::new(
        env.kubeconfig().replace(&format!("certificate-authority-data: \"{mine}\"\n"), ""),
    );
    for kc in [wrong_ca, no_ca] {
        let c = bounded(KubeClusterApi::new().connect(&kc)).await.unwrap();
        let err = bounded(c.list_nodes("")).await.unwrap_err();
        assert!(matches!(err, ClusterError::Unreachable(_)), "{err:?}");
        assert!(!err.to_string().contains(&token));
    }
    // With its own CA, the same client gets through.
    assert_eq!(bounded(client(&env, Face::Tls).await.list_nodes("")).await.unwrap().len(), 3);
}

/// SPEC §6 under races, through the kube adapter over TLS
/// (bc_sim::testing::check_ownership_races).
#[tokio::test]
async fn ownership_holds_when_the_tenant_acts_between_read_and_write() {
    let env = setup().await;
    testing::check_ownership_races(&env, &KubeClusterApi::new()).await;
}

/// A revoked cluster token: the session over the real adapters mints a new kubeconfig
/// and the call succeeds.
#[tokio::test]
async fn a_revoked_cluster_token_is_replaced_by_a_new_mint() {
    let env = setup().await;
    let provider = Arc::new(common::adapter(&env));
    testing::check_session_recovers_from_a_revoked_token(
        &env,
        provider,
        Arc::new(KubeClusterApi::new()),
    )
    .await;
}
