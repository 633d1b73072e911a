//! End to end through the HTTP API of a dev stack, adopt mode and unjoined nodes: a
//! cluster made in the simulator with the tenant's own node pool and a foreign `bcd`
//! DaemonSet in `bc-<pool>` → the substrate is `error` naming it and nothing of the
//! tenant's changes → the foreign object removed → `ready` → archive → the tenant's node
//! pool and objects are still there. And nodes whose bcd cannot reach the server:
//! `waitingToJoin` counts them while `state` stays `ready`, and 15 minutes on (a clock
//! moved forward) the message says so.
//!
//! Invariants: as in `e2e.rs` — bounded polls, loopback, one stack per test, stopped.

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use bc_stack::dev::{DEV_TENANT, DevStack};
use bc_stack::testing::{self, Backend, Later, Scratch, sim_call, sim_get, substrate_in, wait_for};
use serde_json::{Value, json};

fn kubectl(kubeconfig: &std::path::Path, args: &[&str], stdin: Option<&str>) -> (bool, String) {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    if let Some(text) = stdin {
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

fn have_kubectl() -> bool {
    let found = Command::new("kubectl").args(["version", "--client"]).output().is_ok();
    assert!(found || !bc_testkit::services_required(), "kubectl is required (.ci/run installs it)");
    found
}

async fn sim_cluster(stack: &DevStack, id: &str) -> Value {
    sim_get(stack, &format!("/v2/kubernetes/clusters/{id}")).await["kubernetes_cluster"].clone()
}

fn pool_names(cluster: &Value) -> Vec<String> {
    cluster["node_pools"]
        .as_array()
        .map(|a| a.iter().filter_map(|p| p["name"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopt_mode_refuses_a_foreign_bcd_then_adopts_and_leaves_the_tenants_objects() {
    if !have_kubectl() {
        return;
    }
    let scratch = Scratch::new("bc-e2e-adopt");
    let options = testing::options(Backend::Sqlite, scratch.path()).await.expect("sqlite");
    let stack = DevStack::start(options).await.expect("dev stack");
    let made = sim_call(
        &stack,
        &stack.sim_token,
        reqwest::Method::POST,
        "/v2/kubernetes/clusters",
        Some(json!({"name": "tenants-own", "region": "nyc1", "version": "latest",
                    "node_pools": [{"name": "own", "size": "s-2vcpu-4gb", "count": 1}]})),
    )
    .await;
    let cluster = made["kubernetes_cluster"]["id"].as_str().expect("cluster id").to_owned();
    let pool = stack
        .call("pools.create", json!({"tenantId": DEV_TENANT, "name": "adopter", "policy": {}}))
        .await
        .expect("pools.create");
    let pool_id = pool["poolId"].as_str().expect("poolId").to_owned();
    let namespace = format!("bc-{}", pool_id.replace('_', "-"));

    // A namespace as the substrate makes it (our labels), and the tenant's own bcd
    // DaemonSet in it.
    let kubeconfig = scratch.path().join("kubeconfig");
    let foreign = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {namespace}\n  labels:\n    better-compute.dev/substrate-pool: {pool_id}\n    app.kubernetes.io/managed-by: better-compute\n---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: bcd\n  namespace: {namespace}\nspec:\n  selector:\n    matchLabels: {{app: mine}}\n  template:\n    metadata:\n      labels: {{app: mine}}\n    spec:\n      containers:\n      - name: mine\n        image: example.com/mine:1\n"
    );
    let mut applied = (false, String::new());
    for _ in 0..testing::POLLS {
        let fetched = reqwest::Client::new()
            .get(format!("{}/v2/kubernetes/clusters/{cluster}/kubeconfig", stack.sim_url))
            .bearer_auth(&stack.sim_token)
            .send()
            .await
            .expect("simulator");
        if fetched.status().is_success() {
            std::fs::write(&kubeconfig, fetched.text().await.expect("kubeconfig")).unwrap();
            applied = kubectl(&kubeconfig, &["apply", "-f", "-"], Some(&foreign));
            if applied.0 {
                break;
            }
        }
        tokio::time::sleep(testing::POLL).await;
    }
    assert!(applied.0, "the foreign objects apply: {}", applied.1);

    let current =
        stack.call("pools.get", json!({"tenantId": DEV_TENANT, "poolId": pool_id})).await.unwrap();
    stack
        .call(
            "pools.update",
            json!({"tenantId": DEV_TENANT, "poolId": pool_id, "expectedGeneration": current["generation"],
                   "policy": {"substrate": {"kind": "kubernetes", "account": stack.account_id,
                                            "cluster": {"adopt": {"providerClusterId": cluster}}},
                              "flavors": [{"name": "cpu", "size": "s-2vcpu-4gb", "count": 1}]}}),
        )
        .await
        .expect("pools.update");
    let refused = substrate_in(&stack, &pool_id, "error").await;
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("DaemonSet") && message.contains("/bcd"),
        "the message names the object: {message}"
    );
    let (_, ds) =
        kubectl(&kubeconfig, &["get", "daemonset", "bcd", "-n", &namespace, "-o", "json"], None);
    let ds: Value = serde_json::from_str(&ds).expect("the tenant's DaemonSet");
    assert_eq!(
        ds["spec"]["template"]["spec"]["containers"][0]["image"], "example.com/mine:1",
        "untouched"
    );
    assert!(pool_names(&sim_cluster(&stack, &cluster).await).contains(&"own".to_owned()));

    let (deleted, text) =
        kubectl(&kubeconfig, &["delete", "daemonset", "bcd", "-n", &namespace], None);
    assert!(deleted, "{text}");
    wait_for(
        &stack,
        "the adopted substrate ready with its node joined",
        "kubernetesSubstrates.get",
        json!({"tenantId": DEV_TENANT, "poolId": pool_id}),
        |v| v["state"] == "ready" && v["nodesJoined"] == 1,
    )
    .await;
    stack
        .call("pools.archive", json!({"tenantId": DEV_TENANT, "poolId": pool_id}))
        .await
        .expect("archive");
    substrate_in(&stack, &pool_id, "deleted").await;
    let after = sim_cluster(&stack, &cluster).await;
    assert_eq!(after["id"], cluster.as_str(), "the tenant's cluster is still there");
    let names = pool_names(&after);
    assert!(names.contains(&"own".to_owned()), "the tenant's node pool is still there: {names:?}");
    assert!(!names.iter().any(|n| n.starts_with("bc-")), "ours are gone: {names:?}");
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_whose_bcd_cannot_reach_the_server_wait_to_join_while_ready() {
    let scratch = Scratch::new("bc-e2e-waiting");
    let mut options = testing::options(Backend::Sqlite, scratch.path()).await.expect("sqlite");
    options.bcd_reaches_server = false;
    let later = Arc::new(Later::default());
    options.clock = Some(later.clone());
    let stack = DevStack::start(options).await.expect("dev stack");
    let pool = stack
        .call(
            "pools.create",
            json!({"tenantId": DEV_TENANT, "name": "unreachable", "policy": {
                "substrate": {"kind": "kubernetes", "account": stack.account_id, "cluster": {"create": {"region": "nyc1"}}},
                "flavors": [{"name": "cpu", "size": "s-2vcpu-4gb", "count": 2}]}}),
        )
        .await
        .expect("pools.create");
    let waiting = wait_for(
        &stack,
        "two nodes waiting to join",
        "kubernetesSubstrates.get",
        json!({"tenantId": DEV_TENANT, "poolId": pool["poolId"]}),
        |v| v["state"] == "ready" && v["nodesListed"] == 2 && v["waitingToJoin"]["nodes"] == 2,
    )
    .await;
    assert_eq!(waiting["nodesJoined"], 0, "{waiting}");
    assert!(waiting.get("message").is_none(), "no message before 15 minutes: {waiting}");
    // 16 minutes later for the whole stack and the simulator: the message names the
    // wait, the count holds, and the substrate stays `ready`.
    later.advance(Duration::from_secs(16 * 60));
    let told = wait_for(
        &stack,
        "the 15-minute message",
        "kubernetesSubstrates.get",
        json!({"tenantId": DEV_TENANT, "poolId": pool["poolId"]}),
        |v| v["message"].as_str().is_some_and(|m| m.contains("have had no joined bcd for")),
    )
    .await;
    assert_eq!(told["state"], "ready", "{told}");
    assert_eq!(told["waitingToJoin"]["nodes"], 2, "{told}");
    assert_eq!(told["waitingToJoin"]["since"], waiting["waitingToJoin"]["since"], "{told}");
    stack.stop().await;
}
