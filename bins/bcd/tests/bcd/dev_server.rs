//! The real `bcd` binary against a dev server (`bc_stack::DevStack`: the API, the
//! reconcilers, the simulated cloud): it joins with the token of the cluster's
//! `bcd-join` Secret, a node name the cluster lists and the projected ServiceAccount
//! token the kubelet wrote for the DaemonSet's pod on that node (the server reviews it
//! with the cluster's TokenReview), heartbeats on the interval the
//! server returns, keeps heartbeating after the server restarts on the same address and
//! data, and exits 0 on SIGTERM; its log never carries the join token.
//!
//! Invariants: every wait is a bounded count of short polls; the process is killed on
//! every path (a guard), and the stack is stopped.

use std::process::{Child, Command, Stdio};

use base64::Engine as _;
use bc_domain::PoolId;
use bc_domain::ports::AgentRepo as _;
use bc_sim::kube::resource::Resource;
use bc_stack::dev::{DEV_TENANT, DevStack};
use bc_stack::testing::{self, Backend, Scratch, sim_get, wait_for};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_bcd");

/// Kills the agent if the test ends early.
struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The last heartbeat the store holds for `node` of `pool`.
async fn last_heartbeat(
    stack: &DevStack,
    pool: &PoolId,
    node: &str,
) -> Option<bc_domain::Timestamp> {
    stack
        .adapters
        .store
        .node_find_by_name(pool, node)
        .await
        .ok()
        .flatten()
        .and_then(|n| n.last_heartbeat_at)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bcd_joins_heartbeats_and_survives_a_server_restart() {
    let scratch = Scratch::new("bc-e2e-bcd");
    let mut options = testing::options(Backend::Sqlite, scratch.path()).await.expect("sqlite");
    options.heartbeat_seconds = 1;
    let stack = DevStack::start(options.clone()).await.expect("dev stack");
    let account = stack.account_id.clone();
    let pool = stack
        .call(
            "pools.create",
            json!({"tenantId": DEV_TENANT, "name": "agents", "policy": {
                "substrate": {"kind": "kubernetes", "account": account, "cluster": {"create": {"region": "nyc1"}}},
                "flavors": [{"name": "cpu", "size": "s-2vcpu-4gb", "count": 1}]}}),
        )
        .await
        .expect("pools.create");
    let pool_id = pool["poolId"].as_str().expect("poolId").to_owned();
    let ready = wait_for(
        &stack,
        "the node joined",
        "kubernetesSubstrates.get",
        json!({"tenantId": DEV_TENANT, "poolId": pool_id}),
        |v| v["state"] == "ready" && v["nodesJoined"] == 1,
    )
    .await;
    let cluster = stack
        .call(
            "kubernetesClusters.get",
            json!({"tenantId": DEV_TENANT, "clusterId": ready["clusterId"]}),
        )
        .await
        .expect("kubernetesClusters.get");
    let provider_cluster = cluster["providerClusterId"].as_str().expect("provider id").to_owned();

    // What the DaemonSet would map into the pod: the Secret's token, a listed node's name.
    let namespace = format!("bc-{}", pool_id.replace('_', "-"));
    let secret = stack
        .sim
        .state()
        .kube
        .get(&provider_cluster, Resource::Secret, Some(&namespace), "bcd-join")
        .expect("the join Secret");
    let value = |key: &str| match secret["stringData"][key].as_str() {
        Some(t) => Some(t.to_owned()),
        None => secret["data"][key].as_str().map(|b| {
            let bytes = base64::engine::general_purpose::STANDARD.decode(b).expect("base64");
            String::from_utf8(bytes).expect("utf-8")
        }),
    };
    let token = value("joinToken").expect("joinToken");
    // The dev server's public URL is http:// on loopback: the Secret says so, and the
    // DaemonSet maps it to BCD_INSECURE_HTTP (without it bcd refuses the URL).
    let insecure = value("insecureHttp").expect("insecureHttp for an http:// public URL");
    let described = sim_get(&stack, &format!("/v2/kubernetes/clusters/{provider_cluster}")).await;
    let node = described["kubernetes_cluster"]["node_pools"][0]["nodes"][0]["name"]
        .as_str()
        .expect("a node")
        .to_owned();

    // What the kubelet writes into the DaemonSet pod's projected volume on that node
    // (issue 29, item 4): a token bound to the pod and node, for the server's URL.
    let pods = stack.sim.state().kube.list(
        &provider_cluster,
        Resource::Pod,
        Some(&namespace),
        &Default::default(),
    );
    let pod = pods
        .iter()
        .find(|p| p["spec"]["nodeName"] == node.as_str())
        .and_then(|p| p["metadata"]["name"].as_str())
        .expect("the bcd pod on the node")
        .to_owned();
    let sa_token = bc_sim::kube::tokens::projected_token(
        stack.sim.state(),
        &provider_cluster,
        &namespace,
        &pod,
        bc_domain::agent::SERVICE_ACCOUNT_TOKEN_FILE,
    )
    .expect("the pod's token")
    .expect("the DaemonSet mounts a projected token at the file bcd reads");
    let token_file = scratch.path().join("sa-token");
    std::fs::write(&token_file, &sa_token).expect("token file");

    let log = scratch.path().join("bcd.log");
    let mut agent = Agent(
        Command::new(BIN)
            .env_clear()
            .env("BCD_SERVER_URL", &stack.api_url)
            .env("BCD_INSECURE_HTTP", &insecure)
            .env("BCD_JOIN_TOKEN", &token)
            .env("NODE_NAME", &node)
            .env("BCD_SERVICE_ACCOUNT_TOKEN_FILE", &token_file)
            .env("BC_LOG_FORMAT", "json")
            .stderr(Stdio::from(std::fs::File::create(&log).expect("log file")))
            .spawn()
            .expect("bcd starts"),
    );
    let pool_id = PoolId::parse(&pool_id).expect("pool id");
    let mut first = None;
    for _ in 0..testing::POLLS {
        first = last_heartbeat(&stack, &pool_id, &node).await;
        if first.is_some() {
            break;
        }
        tokio::time::sleep(testing::POLL).await;
    }
    let first = first.expect("bcd heartbeats");

    // Restart the server on the same address and data.
    let addr: std::net::SocketAddr =
        stack.api_url.trim_start_matches("http://").parse().expect("addr");
    stack.stop().await;
    let mut again = options;
    again.listen = addr;
    let stack = DevStack::start(again).await.expect("dev stack again");
    let mut after = None;
    for _ in 0..testing::POLLS {
        after = last_heartbeat(&stack, &pool_id, &node).await.filter(|t| *t > first);
        if after.is_some() {
            break;
        }
        assert!(agent.0.try_wait().expect("status").is_none(), "bcd exited during the restart");
        tokio::time::sleep(testing::POLL).await;
    }
    assert!(after.is_some(), "bcd heartbeats after the restart");

    let status =
        Command::new("kill").args(["-TERM", &agent.0.id().to_string()]).status().expect("kill");
    assert!(status.success());
    let mut exit = None;
    for _ in 0..testing::POLLS {
        exit = agent.0.try_wait().expect("status");
        if exit.is_some() {
            break;
        }
        tokio::time::sleep(testing::POLL).await;
    }
    assert_eq!(exit.and_then(|s| s.code()), Some(0), "bcd exits 0 on SIGTERM");
    let logged = std::fs::read_to_string(&log).expect("log");
    assert!(!logged.contains(&token), "the join token was logged");
    assert!(!logged.contains(&sa_token), "the ServiceAccount token was logged");
    stack.stop().await;
}
