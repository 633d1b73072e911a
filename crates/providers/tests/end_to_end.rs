//! End to end over loopback HTTP: the DigitalOcean adapter creates a cluster with two
//! node pools in the simulator, fetches its kubeconfig, the kube adapter applies the
//! join Secret and the bcd DaemonSet into it, and the simulated bcd agents call a test
//! join endpoint with their node names.
//!
//! Invariant kept: the two adapters compose through the ports alone (kubeconfig text in,
//! objects applied, nodes joined); every wait is a bounded loop on the stepped clock or
//! on simulator rounds, never a sleep.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use bc_domain::Timestamp;
use bc_domain::model::{ClusterMode, SecretString};
use bc_domain::name::{BCD_NAME, JOIN_SECRET_NAME, LABEL_SUBSTRATE_POOL};
use bc_domain::ports::{
    ApplyOutcome, ClusterApi, CreateClusterRequest, KubeObject, KubernetesProvider, ManualClock,
    NodePoolRequest, ObjectKind, ObjectRef, OwnerLabel, ProviderClusterState,
};
use bc_providers::digitalocean::{DigitalOcean, DigitalOceanConfig};
use bc_providers::kube::KubeClusterApi;
use bc_sim::testing::TEST_TOKEN;
use bc_sim::{Sim, SimConfig};
use serde_json::{Value, json};

const POOL: &str = "pool-01hq3k5v9x8y7z6w5v4t3s2r1q";
const NAMESPACE: &str = "bc-pool-01hq3k5v9x8y7z6w5v4t3s2r1q";
const JOIN_TOKEN: &str = "bcj_end_to_end_join_token";

/// What the test join endpoint received: (node name, join token).
type Joins = Arc<Mutex<Vec<(String, String)>>>;

async fn join(State(joins): State<Joins>, Json(body): Json<Value>) -> Json<Value> {
    let name = body["nodeName"].as_str().unwrap_or_default().to_owned();
    let token = body["joinToken"].as_str().unwrap_or_default().to_owned();
    let id = format!("node-{}", joins.lock().unwrap().len());
    joins.lock().unwrap().push((name, token));
    Json(json!({"nodeId": id}))
}

/// Serves `POST /api/compute/agents/join` on loopback; returns its base URL.
async fn join_server(joins: Joins) -> (String, tokio::task::JoinHandle<()>) {
    let app = axum::Router::new().route("/api/compute/agents/join", post(join)).with_state(joins);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, task)
}

fn pool(name: &str, count: u32) -> NodePoolRequest {
    NodePoolRequest {
        name: name.into(),
        size: "s-1vcpu-2gb".into(),
        count: Some(count),
        auto_scale: None,
        labels: [(LABEL_SUBSTRATE_POOL.to_owned(), POOL.to_owned())].into(),
        taints: vec![],
        tags: vec![],
    }
}

fn owned(kind: ObjectKind, namespace: Option<&str>, name: &str, manifest: Value) -> KubeObject {
    KubeObject {
        object: ObjectRef { kind, namespace: namespace.map(str::to_owned), name: name.into() },
        manifest,
    }
}

#[tokio::test]
async fn cluster_to_joined_nodes_over_loopback() {
    let clock = Arc::new(ManualClock::new(Timestamp::from_unix_ms(1_800_000_000_000)));
    let sim = Sim::new(SimConfig::default(), clock.clone());
    let server = sim.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let joins: Joins = Arc::default();
    let (join_url, _join_task) = join_server(joins.clone()).await;

    let provider = DigitalOcean::new(
        DigitalOceanConfig::with_base_url(server.url()),
        &SecretString::new(TEST_TOKEN),
        clock.clone(),
    )
    .unwrap();
    let created = provider
        .create_cluster(&CreateClusterRequest {
            name: "bc-e2e".into(),
            region: "nyc1".into(),
            version: "latest".into(),
            high_availability: false,
            mode: ClusterMode::Standard,
            tags: vec![],
            node_pools: vec![pool("bc-e2e-small", 2), pool("bc-e2e-large", 1)],
        })
        .await
        .unwrap();

    // Step the clock until the cluster runs (bounded: the simulator's fast delays are
    // seconds).
    let mut cluster = created;
    for _ in 0..30 {
        if cluster.state == ProviderClusterState::Running {
            break;
        }
        clock.advance(time::Duration::seconds(1));
        cluster = provider.get_cluster(&cluster.id).await.unwrap();
    }
    assert_eq!(cluster.state, ProviderClusterState::Running);
    let node_names: BTreeSet<String> =
        cluster.node_pools.iter().flat_map(|p| &p.nodes).map(|n| n.name.clone()).collect();
    assert_eq!(node_names.len(), 3);

    let creds = provider.credentials(&cluster.id).await.unwrap();
    let client = KubeClusterApi::new().connect(&creds.kubeconfig).await.unwrap();

    let owner = OwnerLabel { key: LABEL_SUBSTRATE_POOL.into(), value: POOL.into() };
    let labels = json!({ LABEL_SUBSTRATE_POOL: POOL });
    let namespace = owned(
        ObjectKind::Namespace,
        None,
        NAMESPACE,
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": NAMESPACE, "labels": labels}}),
    );
    let secret = owned(
        ObjectKind::Secret,
        Some(NAMESPACE),
        JOIN_SECRET_NAME,
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
               "metadata": {"name": JOIN_SECRET_NAME, "namespace": NAMESPACE, "labels": labels},
               "stringData": {"serverUrl": join_url, "joinToken": JOIN_TOKEN}}),
    );
    let from_secret = |key: &str| json!({"secretKeyRef": {"name": JOIN_SECRET_NAME, "key": key}});
    let daemonset = owned(
        ObjectKind::DaemonSet,
        Some(NAMESPACE),
        BCD_NAME,
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": BCD_NAME, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"app": BCD_NAME}},
            "template": {
                "metadata": {"labels": {"app": BCD_NAME}},
                "spec": {
                    "nodeSelector": { LABEL_SUBSTRATE_POOL: POOL },
                    "containers": [{
                        "name": BCD_NAME,
                        "image": "better-compute/bcd:dev",
                        "env": [
                            {"name": "BCD_SERVER_URL", "valueFrom": from_secret("serverUrl")},
                            {"name": "BCD_JOIN_TOKEN", "valueFrom": from_secret("joinToken")}
                        ]
                    }]
                }
            }
        }}),
    );
    for object in [&namespace, &secret, &daemonset] {
        let outcome = client.apply_owned(object, &owner).await.unwrap();
        assert_eq!(outcome, ApplyOutcome::Created, "{}", object.object);
    }
    let listed = client.list_nodes(&format!("{LABEL_SUBSTRATE_POOL}={POOL}")).await.unwrap();
    assert_eq!(listed.iter().map(|n| n.name.clone()).collect::<BTreeSet<_>>(), node_names);

    // Bounded rounds of the simulated agents until every node has called.
    for _ in 0..5 {
        if joins.lock().unwrap().len() >= node_names.len() {
            break;
        }
        bc_sim::bcd::run_once(sim.state()).await;
    }
    let received = joins.lock().unwrap().clone();
    let joined: BTreeSet<String> = received.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(joined, node_names);
    assert!(received.iter().all(|(_, t)| t == JOIN_TOKEN));
    // Joined nodes do not call again while the token is unchanged.
    assert_eq!(bc_sim::bcd::run_once(sim.state()).await, 0);
}
