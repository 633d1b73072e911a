//! End to end on the simulated GKE account of a dev stack (issue 27): the real GKE
//! adapter (service-account key, JWT-bearer grant, GKE's v1 REST API) and the real kube
//! adapter against the simulator over loopback, the reconcilers in process — an autopilot
//! cluster and a substrate reach `ready`, the substrate's nodes joined; what GKE does not
//! offer is refused from the adapter's declaration; `bc-api dev` writes the GKE details
//! SPEC §13 names.
//!
//! Invariants: every wait is a bounded count of short polls (never an assertion on
//! elapsed time); the simulator runs the fastest delays; each test has its own directory,
//! database and ports, and stops its stack.

use bc_stack::dev::{DEV_GKE_ACCOUNT_NAME, DEV_TENANT, DevStack, GKE_KEY};
use bc_stack::testing::{self, Backend, Scratch, wait_for};
use serde_json::{Value, json};

/// The GKE account beside the DigitalOcean one, and what `simulator.json` says of it.
async fn the_dev_stack_has_a_simulated_gke_account(stack: &DevStack) {
    let accounts = stack
        .call("providerAccounts.list", json!({"tenantId": DEV_TENANT}))
        .await
        .expect("providerAccounts.list");
    let accounts = accounts["providerAccounts"].as_array().expect("accounts").clone();
    let providers: Vec<&str> = accounts.iter().filter_map(|a| a["provider"].as_str()).collect();
    assert!(providers.contains(&"digitalocean") && providers.contains(&"gke"), "{providers:?}");
    let gke = accounts.iter().find(|a| a["name"] == DEV_GKE_ACCOUNT_NAME).expect("the gke account");
    assert_eq!(gke["provider"], "gke");
    assert_eq!(gke["providerAccountId"], stack.gke_account_id.as_str());
    assert_eq!(gke["name"], DEV_GKE_ACCOUNT_NAME);
    assert_eq!(gke["projectId"], bc_sim::model::gke::SIM_PROJECT);
    let sim: Value = serde_json::from_str(
        &std::fs::read_to_string(stack.dir.join("simulator.json")).expect("simulator.json"),
    )
    .expect("JSON");
    assert_eq!(sim["digitaloceanApiUrl"], stack.sim_url.as_str());
    assert_eq!(sim["gkeApiUrl"], stack.gke_api_url.as_str());
    assert_eq!(sim["gcpTokenUrl"], stack.gcp_token_url.as_str());
    let key_path = stack.dir.join(GKE_KEY);
    assert_eq!(sim["gkeServiceAccountKeyFile"], key_path.display().to_string());
    let key: Value =
        serde_json::from_str(&std::fs::read_to_string(&key_path).expect("the key")).expect("JSON");
    assert_eq!(key["type"], "service_account");
    assert_eq!(key["project_id"], bc_sim::model::gke::SIM_PROJECT);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&key_path).expect("the key").permissions().mode();
        assert_eq!(mode & 0o077, 0, "the key is its owner's only: {mode:o}");
    }
}

/// `bc-api dev` makes the GKE account and writes its details; a second start on the same
/// directory keeps the account, and the key it wrote still makes an account (the simulated
/// cloud kept the key it issued), as `bc accounts create --service-account-key @…` would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dev_stack_makes_a_simulated_gke_account_and_keeps_it() {
    let scratch = Scratch::new("bc-dev-gke");
    let options = testing::options(Backend::Sqlite, scratch.path()).await.expect("sqlite");
    let stack = DevStack::start(options.clone()).await.expect("dev stack");
    the_dev_stack_has_a_simulated_gke_account(&stack).await;
    let (gke, banner) = (stack.gke_account_id.clone(), stack.banner());
    assert!(banner.contains(&gke) && banner.contains(GKE_KEY), "{banner}");
    stack.stop().await;
    let again = DevStack::start(options).await.expect("dev stack again");
    assert_eq!(again.gke_account_id, gke, "the account is kept");
    the_dev_stack_has_a_simulated_gke_account(&again).await;
    let key = std::fs::read_to_string(again.dir.join(GKE_KEY)).expect("the key");
    let made = again
        .call(
            "providerAccounts.create",
            json!({"tenantId": DEV_TENANT, "provider": "gke", "name": "mine",
                   "credentials": {"serviceAccountKey": key}}),
        )
        .await
        .expect("the kept key is checked at the simulated GKE and accepted");
    assert_eq!(made["projectId"], bc_sim::model::gke::SIM_PROJECT);
    let banner = again.banner();
    for secret in [key.as_str(), "PRIVATE KEY"] {
        assert!(!banner.contains(secret), "the banner never prints the key");
    }
    again.stop().await;
}

/// The autopilot cluster and the substrate on GKE, both `ready` (the substrate's two nodes
/// listed and joined); node pools on the autopilot cluster and load balancers on the
/// account are refused naming the provider.
async fn an_autopilot_cluster_and_a_substrate_on_gke(backend: Backend) {
    let scratch = Scratch::new("bc-e2e-gke");
    let Some(options) = testing::options(backend, scratch.path()).await else { return };
    let stack = DevStack::start(options).await.expect("dev stack");
    let gke = stack.gke_account_id.clone();

    let auto = stack
        .call(
            "kubernetesClusters.create",
            json!({"tenantId": DEV_TENANT, "providerAccountId": gke, "name": "auto",
                   "region": "us-central1", "version": "latest", "mode": "autopilot",
                   "nodePools": []}),
        )
        .await
        .expect("kubernetesClusters.create (autopilot)");
    let cluster_id = auto["clusterId"].as_str().expect("clusterId").to_owned();
    let pool = stack
        .call(
            "pools.create",
            json!({"tenantId": DEV_TENANT, "name": "on-gke", "policy": {
                "substrate": {"kind": "kubernetes", "account": gke,
                              "cluster": {"create": {"region": "us-central1-a"}}},
                "flavors": [{"name": "cpu", "size": "e2-standard-2", "count": 2}]}}),
        )
        .await
        .expect("pools.create on gke");
    let pool_id = pool["poolId"].as_str().expect("poolId").to_owned();

    let substrate = wait_for(
        &stack,
        "the GKE substrate ready with 2 nodes joined",
        "kubernetesSubstrates.get",
        json!({"tenantId": DEV_TENANT, "poolId": pool_id}),
        |v| v["state"] == "ready" && v["nodesListed"] == 2 && v["nodesJoined"] == 2,
    )
    .await;
    assert!(substrate.get("waitingToJoin").is_none(), "{substrate}");
    let ready = wait_for(
        &stack,
        "the autopilot cluster ready",
        "kubernetesClusters.get",
        json!({"tenantId": DEV_TENANT, "clusterId": cluster_id}),
        |v| v["state"] == "ready",
    )
    .await;
    assert_eq!(ready["mode"], "autopilot", "{ready}");
    assert!(ready["providerClusterId"].as_str().is_some(), "{ready}");

    // What GKE's adapter does not declare is refused, naming the provider.
    let refused = stack
        .call(
            "kubernetesNodePools.create",
            json!({"tenantId": DEV_TENANT, "clusterId": cluster_id, "name": "extra",
                   "size": "e2-standard-2", "count": 1}),
        )
        .await
        .expect_err("no node pools on an autopilot cluster")
        .to_string();
    assert!(refused.contains("FAILED_PRECONDITION"), "{refused}");
    let refused = stack
        .call(
            "loadBalancers.create",
            json!({"tenantId": DEV_TENANT, "poolId": pool_id, "providerAccountId": gke,
                   "name": "web", "type": "regional", "region": "us-central1",
                   "forwardingRules": [{"entryProtocol": "http", "entryPort": 80,
                                        "targetProtocol": "http", "targetPort": 8080}],
                   "targets": {"tag": "web"}}),
        )
        .await
        .expect_err("no load balancers on gke")
        .to_string();
    assert!(refused.contains("gke offers no load balancers"), "{refused}");
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_autopilot_cluster_and_a_substrate_on_gke_sqlite() {
    an_autopilot_cluster_and_a_substrate_on_gke(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_autopilot_cluster_and_a_substrate_on_gke_postgres() {
    an_autopilot_cluster_and_a_substrate_on_gke(Backend::Postgres).await;
}

/// `bc-api dev --demo` drives both providers: it returns once everything it made is
/// `ready` — on GKE an autopilot cluster and a substrate among them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_drives_both_providers_to_ready() {
    let scratch = Scratch::new("bc-demo");
    let options = testing::options(Backend::Sqlite, scratch.path()).await.expect("sqlite");
    let stack = DevStack::start(options).await.expect("dev stack");
    bc_stack::dev::demo(&stack).await.expect("the demo reaches ready");
    let on_gke = json!({"tenantId": DEV_TENANT, "providerAccountId": stack.gke_account_id});
    let clusters =
        stack.call("kubernetesClusters.list", on_gke).await.expect("kubernetesClusters.list");
    let clusters = clusters["kubernetesClusters"].as_array().expect("clusters").clone();
    let modes: Vec<(&str, &str)> = clusters
        .iter()
        .map(|c| (c["mode"].as_str().unwrap_or(""), c["state"].as_str().unwrap_or("")))
        .collect();
    assert!(modes.contains(&("autopilot", "ready")), "{modes:?}");
    assert!(modes.contains(&("standard", "ready")), "the substrate's cluster: {modes:?}");
    stack.stop().await;
}
