//! `bc-api dev` restarted on its directory keeps the simulated cloud, not only the
//! database: a create-mode substrate and an adopted one come back `ready` on the same
//! provider clusters — and still reconcile (a flavor count changed after the restart
//! reaches its nodes) — the tenant's own simulated cluster is still there, and the
//! kubeconfig fetched for it before the restart still works, as does the simulator's URL.
//!
//! Invariants: as in `e2e.rs` — bounded polls, loopback, one directory, stopped stacks.

use bc_stack::dev::{DEV_TENANT, DevStack, SIM_STATE};
use bc_stack::testing::{self, Backend, Scratch, sim_get, wait_for};
use serde_json::{Value, json};

/// Waits until the substrate of `pool` is ready with `nodes` nodes listed and joined.
async fn ready_with(stack: &DevStack, pool: &str, nodes: u64) -> Value {
    wait_for(
        stack,
        &format!("substrate of {pool} ready with {nodes} nodes joined"),
        "kubernetesSubstrates.get",
        json!({"tenantId": DEV_TENANT, "poolId": pool}),
        |v| v["state"] == "ready" && v["nodesListed"] == nodes && v["nodesJoined"] == nodes,
    )
    .await
}

/// The provider cluster of `pool`'s substrate.
async fn provider_cluster(stack: &DevStack, substrate: &Value) -> String {
    let id = substrate["clusterId"].as_str().expect("clusterId");
    let c = stack
        .call("kubernetesClusters.get", json!({"tenantId": DEV_TENANT, "clusterId": id}))
        .await
        .expect("kubernetesClusters.get");
    c["providerClusterId"].as_str().expect("providerClusterId").to_owned()
}

/// Sets the count of `pool`'s first flavor.
async fn scale(stack: &DevStack, pool: &str, count: u64) {
    let at = json!({"tenantId": DEV_TENANT, "poolId": pool});
    let current = stack.call("pools.get", at).await.expect("pools.get");
    let mut policy = current["policy"].clone();
    policy["flavors"][0]["count"] = json!(count);
    stack
        .call(
            "pools.update",
            json!({"tenantId": DEV_TENANT, "poolId": pool, "policy": policy,
                   "expectedGeneration": current["generation"]}),
        )
        .await
        .expect("pools.update");
}

async fn nodes(kubeconfig: &str) -> Vec<String> {
    use k8s_openapi::api::core::v1::Node;
    let client = bc_sim::testing::kube_client(kubeconfig).await;
    let list = bc_sim::testing::bounded(kube::Api::<Node>::all(client).list(&Default::default()))
        .await
        .expect("the kubeconfig works");
    list.items.into_iter().filter_map(|n| n.metadata.name).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_dev_stack_keeps_its_simulated_cloud() {
    let scratch = Scratch::new("bc-e2e-restart");
    let options = testing::options(Backend::Sqlite, scratch.path()).await.expect("sqlite");
    let stack = DevStack::start(options.clone()).await.expect("dev stack");
    let account = stack.account_id.clone();

    let made = stack
        .call(
            "pools.create",
            json!({"tenantId": DEV_TENANT, "name": "made", "policy": {
                "substrate": {"kind": "kubernetes", "account": account, "cluster": {"create": {"region": "nyc1"}}},
                "flavors": [{"name": "cpu", "size": "s-2vcpu-4gb", "count": 1}]}}),
        )
        .await
        .expect("pools.create");
    let made = made["poolId"].as_str().expect("poolId").to_owned();

    // The tenant's own cluster, made in the simulator, its kubeconfig kept, then adopted.
    let own = bc_stack::testing::sim_call(
        &stack,
        &stack.sim_token,
        reqwest::Method::POST,
        "/v2/kubernetes/clusters",
        Some(json!({"name": "mine", "region": "nyc1", "version": "latest",
                    "node_pools": [{"name": "workers", "size": "s-2vcpu-4gb", "count": 1}]})),
    )
    .await;
    let own = own["kubernetes_cluster"]["id"].as_str().expect("cluster id").to_owned();
    let adopted = stack
        .call(
            "pools.create",
            json!({"tenantId": DEV_TENANT, "name": "adopted", "policy": {
                "substrate": {"kind": "kubernetes", "account": account, "cluster": {"adopt": {"providerClusterId": own}}},
                "flavors": [{"name": "cpu", "size": "s-2vcpu-4gb", "count": 1}]}}),
        )
        .await
        .expect("pools.create (adopt)");
    let adopted = adopted["poolId"].as_str().expect("poolId").to_owned();
    let made_before = ready_with(&stack, &made, 1).await;
    let adopted_before = ready_with(&stack, &adopted, 1).await;
    let made_cluster = provider_cluster(&stack, &made_before).await;
    let kubeconfig = reqwest::Client::new()
        .get(format!("{}/v2/kubernetes/clusters/{own}/kubeconfig", stack.sim_url))
        .bearer_auth(&stack.sim_token)
        .send()
        .await
        .expect("simulator")
        .error_for_status()
        .expect("a kubeconfig")
        .text()
        .await
        .expect("kubeconfig");
    let own_nodes = nodes(&kubeconfig).await;
    assert!(!own_nodes.is_empty(), "the tenant's cluster has nodes");
    let sim_url = stack.sim_url.clone();
    stack.stop().await;
    assert!(scratch.path().join(".bc-dev").join(SIM_STATE).exists(), "the cloud is saved");

    let stack = DevStack::start(options).await.expect("dev stack, again");
    assert_eq!(stack.sim_url, sim_url, "the simulator answers where it did");
    let mine = sim_get(&stack, &format!("/v2/kubernetes/clusters/{own}")).await;
    assert_eq!(mine["kubernetes_cluster"]["name"], "mine", "the tenant's cluster is there: {mine}");
    assert_eq!(nodes(&kubeconfig).await, own_nodes, "the kubeconfig from before still works");

    // Both substrates reconcile on the clusters they had: a changed count reaches them.
    scale(&stack, &made, 2).await;
    scale(&stack, &adopted, 2).await;
    let made_after = ready_with(&stack, &made, 2).await;
    let adopted_after = ready_with(&stack, &adopted, 2).await;
    assert_eq!(provider_cluster(&stack, &made_after).await, made_cluster, "the same cluster");
    assert_eq!(adopted_after["clusterId"], adopted_before["clusterId"]);
    assert_eq!(provider_cluster(&stack, &adopted_after).await, own);
    stack.stop().await;
}
