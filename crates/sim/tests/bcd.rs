//! The simulated bcd against a recording join endpoint on loopback: which nodes call
//! (nodeSelector, tolerations, Secret present, server reachable), with what body, and
//! that joined nodes stay quiet until the token changes while failures retry.

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use bc_domain::ports::ManualClock;
use bc_sim::kube::Resource;
use bc_sim::{Sim, SimConfig, bcd, testing};
use serde_json::{Value, json};

const POOL_LABEL: &str = "better-compute.dev/substrate-pool";

/// The join endpoint: records every body; answers `status` (201 by default).
#[derive(Clone, Default)]
struct JoinServer {
    calls: Arc<Mutex<Vec<Value>>>,
    status: Arc<Mutex<Option<u16>>>,
}

impl JoinServer {
    async fn serve(&self) -> String {
        async fn join(
            State(s): State<JoinServer>,
            Json(body): Json<Value>,
        ) -> (StatusCode, Json<Value>) {
            s.calls.lock().unwrap().push(body.clone());
            let code = s.status.lock().unwrap().unwrap_or(201);
            let name = body["nodeName"].as_str().unwrap_or_default().to_owned();
            (
                StatusCode::from_u16(code).unwrap(),
                Json(
                    json!({"nodeId": format!("node-{name}"), "poolId": "p1", "nodeCredential": "c", "heartbeatSeconds": 30}),
                ),
            )
        }
        let app = axum::Router::new()
            .route("/api/compute/agents/join", post(join))
            .with_state(self.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        url
    }
    fn calls(&self) -> Vec<Value> {
        self.calls.lock().unwrap().clone()
    }
}

/// A running cluster: pool `bc` (2 nodes, our label, tainted when `taint`) and the
/// tenant's pool `own` (1 node, no label).
fn cluster(config: SimConfig, taint: bool) -> (Sim, Arc<ManualClock>, String) {
    let (sim, clock) = testing::sim(config);
    let mut bc = testing::node_pool("bc-p1", 2, &[(POOL_LABEL, "p1")]);
    if taint {
        bc = testing::with_taint(bc, "gpu", "true", "NoSchedule");
    }
    let id = testing::create_cluster(&sim, "c1", vec![bc, testing::node_pool("own", 1, &[])]);
    testing::run_until_running(&sim, &clock, &id);
    (sim, clock, id)
}

/// What the substrate reconciler applies (SPEC §6): Namespace, Secret, SA, DaemonSet.
fn apply_substrate(
    sim: &Sim,
    id: &str,
    server_url: &str,
    token: &str,
    secret: bool,
    tolerate: bool,
) {
    let kube = &sim.state().kube;
    let now = sim.state().clock.now();
    let labels = json!({POOL_LABEL: "p1", "app.kubernetes.io/managed-by": "better-compute"});
    let ns = "bc-p1";
    let apply = |m: Value| kube.apply_manifest(id, "better-compute", &m, true, now).unwrap();
    apply(json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":ns,"labels":labels}}));
    if secret {
        apply(
            json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"bcd-join","namespace":ns,"labels":labels},
            "stringData":{"serverUrl":server_url,"joinToken":token}}),
        );
    }
    apply(
        json!({"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"bcd","namespace":ns,"labels":labels}}),
    );
    let tolerations = if tolerate {
        json!([{"key":"gpu","operator":"Exists","effect":"NoSchedule"}])
    } else {
        json!([])
    };
    let env = |name: &str, key: &str| json!({"name":name,"valueFrom":{"secretKeyRef":{"name":"bcd-join","key":key}}});
    apply(
        json!({"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"bcd","namespace":ns,"labels":labels},
        "spec":{"selector":{"matchLabels":{"app":"bcd"}},"template":{"metadata":{"labels":{"app":"bcd"}},"spec":{
            "serviceAccountName":"bcd","nodeSelector":{POOL_LABEL:"p1"},"tolerations":tolerations,
            "containers":[{"name":"bcd","image":"bcd:sim","env":[env("BCD_SERVER_URL","serverUrl"),env("BCD_JOIN_TOKEN","joinToken"),{"name":"OTHER","value":"x"}]}]}}}}),
    );
}

/// Rounds until one makes no call (at most 50); the total number of calls.
async fn settle(sim: &Sim) -> usize {
    let mut total = 0;
    for _ in 0..50 {
        let n = bcd::run_once(sim.state()).await;
        if n == 0 {
            return total;
        }
        total += n;
    }
    panic!("bcd did not settle in 50 rounds");
}

#[tokio::test]
async fn matching_nodes_join_once_and_rejoin_when_the_token_changes() {
    let join = JoinServer::default();
    let url = join.serve().await;
    let (sim, _clock, id) = cluster(SimConfig::default(), false);
    assert_eq!(settle(&sim).await, 0, "no DaemonSet yet");
    apply_substrate(&sim, &id, &url, "tok-1", true, false);

    assert_eq!(settle(&sim).await, 2, "only the two labelled nodes call, once each");
    let calls = join.calls();
    let bc_nodes = sim.state().model().cluster_nodes(&id, sim.state().clock.now()).unwrap();
    let ours: Vec<_> = bc_nodes.iter().filter(|n| n.labels.contains_key(POOL_LABEL)).collect();
    for call in &calls {
        assert_eq!(call["joinToken"], "tok-1");
        assert_eq!(call["bcdVersion"], "sim");
        let node =
            ours.iter().find(|n| call["nodeName"] == n.name.as_str()).expect("a labelled node");
        assert_eq!(call["providerNodeId"], node.provider_id.as_str());
    }
    let outcomes = sim.state().bcd.join_outcomes();
    assert_eq!(outcomes.len(), 2);
    for ((cluster, node), o) in &outcomes {
        assert_eq!(cluster, &id);
        assert!(o.joined);
        assert_eq!(o.status, Some(201));
        assert_eq!(o.attempts, 1);
        assert_eq!(o.node_id.as_deref(), Some(format!("node-{node}").as_str()));
        assert_eq!(o.daemonset, "bc-p1/bcd");
    }

    // Rotation: the Secret gets a new token, every node joins again.
    apply_substrate(&sim, &id, &url, "tok-2", true, false);
    assert_eq!(settle(&sim).await, 2);
    assert!(join.calls()[2..].iter().all(|c| c["joinToken"] == "tok-2"));

    // The DaemonSet goes away: its pods stop; when it comes back they join again.
    let now = sim.state().clock.now();
    sim.state().kube.delete(&id, Resource::DaemonSet, Some("bc-p1"), "bcd", now).unwrap();
    assert_eq!(settle(&sim).await, 0);
    assert!(sim.state().bcd.join_outcomes().values().all(|o| !o.joined));
    apply_substrate(&sim, &id, &url, "tok-2", true, false);
    assert_eq!(settle(&sim).await, 2);
    assert_eq!(join.calls().len(), 6);
}

#[tokio::test]
async fn no_call_without_the_secret_or_on_untolerated_taints() {
    let join = JoinServer::default();
    let url = join.serve().await;
    let (sim, _clock, id) = cluster(SimConfig::default(), false);
    apply_substrate(&sim, &id, &url, "tok", false, false);
    assert_eq!(settle(&sim).await, 0, "the pod cannot start without its Secret");
    let outcomes = sim.state().bcd.join_outcomes();
    assert!(outcomes.values().all(
        |o| o.attempts == 0 && o.last_error.as_deref().is_some_and(|e| e.contains("bcd-join"))
    ));

    let (sim, _clock, id) = cluster(SimConfig::default(), true);
    apply_substrate(&sim, &id, &url, "tok", true, false);
    assert_eq!(settle(&sim).await, 0, "tainted nodes without a toleration run no bcd");
    apply_substrate(&sim, &id, &url, "tok", true, true);
    assert_eq!(settle(&sim).await, 2, "tolerated");
    assert_eq!(join.calls().len(), 2);
}

#[tokio::test]
async fn unreachable_server_and_failed_joins() {
    let join = JoinServer::default();
    let url = join.serve().await;
    let config = SimConfig { bcd_reaches_server: false, ..SimConfig::default() };
    let (sim, _clock, id) = cluster(config, false);
    apply_substrate(&sim, &id, &url, "tok", true, false);
    assert_eq!(bcd::run_once(sim.state()).await, 0);
    assert!(join.calls().is_empty());
    let outcomes = sim.state().bcd.join_outcomes();
    assert_eq!(outcomes.len(), 2);
    assert!(outcomes.values().all(|o| !o.joined && o.last_error.as_deref() == Some("unreachable")));

    // A refused join is retried on later rounds until it succeeds.
    let (sim, _clock, id) = cluster(SimConfig::default(), false);
    apply_substrate(&sim, &id, &url, "tok", true, false);
    *join.status.lock().unwrap() = Some(401);
    assert_eq!(bcd::run_once(sim.state()).await, 2);
    assert_eq!(bcd::run_once(sim.state()).await, 2);
    assert!(
        sim.state()
            .bcd
            .join_outcomes()
            .values()
            .all(|o| !o.joined && o.status == Some(401) && o.attempts == 2)
    );
    *join.status.lock().unwrap() = None;
    assert_eq!(settle(&sim).await, 2);
    assert!(sim.state().bcd.join_outcomes().values().all(|o| o.joined && o.attempts == 3));

    // Nothing listens: a transport error, retried.
    let (sim, _clock, id) = cluster(SimConfig::default(), false);
    apply_substrate(&sim, &id, "http://127.0.0.1:9", "tok", true, false);
    assert_eq!(bcd::run_once(sim.state()).await, 2);
    assert!(
        sim.state()
            .bcd
            .join_outcomes()
            .values()
            .all(|o| !o.joined && o.status.is_none() && o.last_error.is_some())
    );
}

#[tokio::test]
async fn spawn_runs_rounds_in_the_background() {
    let join = JoinServer::default();
    let url = join.serve().await;
    let (sim, _clock, id) = cluster(SimConfig::default(), false);
    apply_substrate(&sim, &id, &url, "tok", true, false);
    let task = bcd::spawn(sim.state().clone(), std::time::Duration::from_millis(5));
    // Bounded wait for the background rounds (not a timing assertion): up to ~20 s, so a
    // loaded CI machine that schedules the 5 ms rounds late still gets there.
    for _ in 0..4000 {
        if join.calls().len() >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    task.abort();
    assert_eq!(join.calls().len(), 2);
}
