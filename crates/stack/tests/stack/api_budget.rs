//! Issue 29, item 9: the provider calls the API makes itself (a node pool's name checked
//! against the cluster's pools at the provider, a join's cluster credentials) spend from
//! the account's provider budget the reconcilers share, kept in the store.
//!
//! Invariants: as in `restart.rs` — bounded polls, loopback, one directory, stopped
//! stacks; the second start runs no reconcilers, so the API is the only spender.

use bc_domain::ports::BudgetRepo as _;
use bc_stack::dev::{DEV_TENANT, DevStack};
use bc_stack::testing::{self, Backend, Scratch, wait_for};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_apis_own_provider_calls_spend_the_accounts_budget() {
    let scratch = Scratch::new("bc-api-budget");
    let options = testing::options(Backend::Sqlite, scratch.path()).await.expect("sqlite");
    // A cluster made at the provider by the reconcilers.
    let stack = DevStack::start(options.clone()).await.expect("dev stack");
    let account = stack.account_id.clone();
    let made = stack
        .call(
            "kubernetesClusters.create",
            json!({"tenantId": DEV_TENANT, "providerAccountId": account, "name": "budgeted",
                   "region": "nyc1", "version": "latest", "mode": "standard",
                   "nodePools": [{"name": "default", "size": "s-2vcpu-4gb", "count": 1}]}),
        )
        .await
        .expect("kubernetesClusters.create");
    let cluster = made["clusterId"].as_str().expect("clusterId").to_owned();
    wait_for(
        &stack,
        "the cluster made at the provider",
        "kubernetesClusters.get",
        json!({"tenantId": DEV_TENANT, "clusterId": cluster}),
        |c| c["state"] == "ready" && c["providerClusterId"].is_string(),
    )
    .await;
    stack.stop().await;

    // The API alone now.
    let mut quiet = options;
    quiet.reconcile = false;
    let stack = DevStack::start(quiet).await.expect("dev stack again");
    let store = stack.adapters.store.clone();
    let before =
        store.budget_get(&account).await.expect("budget").expect("spent by the reconcilers");
    stack
        .call(
            "kubernetesNodePools.create",
            json!({"tenantId": DEV_TENANT, "clusterId": cluster, "name": "more",
                   "size": "s-2vcpu-4gb", "count": 1}),
        )
        .await
        .expect("kubernetesNodePools.create");
    let after = store.budget_get(&account).await.expect("budget").expect("budget row");
    assert!(
        after.version > before.version && after.state.minute_tat > before.state.minute_tat,
        "the name check at the provider spent from the account's budget: {before:?} → {after:?}"
    );
    stack.stop().await;
}
