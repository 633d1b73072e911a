//! Two `bc-reconciler` processes on one PostgreSQL converge 200 load balancers made
//! through the API of a dev server (no reconcilers of its own) on four simulated
//! accounts; one replica is killed with SIGKILL midway and the other finishes; the
//! simulator then holds exactly one load balancer per object — no duplicates.
//!
//! Invariants: every wait is a bounded count of short polls; both processes are killed on
//! every path; the test needs the PostgreSQL of `cargo xtask test` (it returns early
//! without one, or fails when services are required).

use std::collections::BTreeMap;

use bc_stack::dev::{DEV_TENANT, DevStack};
use bc_stack::testing::{self, Backend, Scratch, sim_call};
use serde_json::json;

use common::replica;

use crate::common;

const ACCOUNTS: usize = 4;
const POOLS: usize = 40;
const PER_POOL: usize = 5;

/// The state of every load balancer of the tenant, by id (all pages).
async fn states(stack: &DevStack) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut token: Option<String> = None;
    loop {
        let mut body = json!({"tenantId": DEV_TENANT, "pageSize": 100});
        if let Some(t) = &token {
            body["pageToken"] = json!(t);
        }
        let page = stack.call("loadBalancers.list", body).await.expect("loadBalancers.list");
        for lb in page["loadBalancers"].as_array().expect("items") {
            out.insert(
                lb["loadBalancerId"].as_str().unwrap_or_default().to_owned(),
                lb["state"].as_str().unwrap_or_default().to_owned(),
            );
        }
        match page["nextPageToken"].as_str() {
            Some(t) => token = Some(t.to_owned()),
            None => return out,
        }
    }
}

/// The names of the load balancers the simulator holds for `token` (all pages).
async fn sim_names(stack: &DevStack, token: &str) -> Vec<String> {
    let mut names = Vec::new();
    for page in 1..=10 {
        let path = format!("/v2/load_balancers?per_page=200&page={page}");
        let v = sim_call(stack, token, reqwest::Method::GET, &path, None).await;
        let items = v["load_balancers"].as_array().cloned().unwrap_or_default();
        if items.is_empty() {
            break;
        }
        names.extend(items.iter().filter_map(|l| l["name"].as_str().map(str::to_owned)));
    }
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_converge_200_load_balancers_through_a_sigkill() {
    let scratch = Scratch::new("bc-e2e-replicas");
    let Some(mut options) = testing::options(Backend::Postgres, scratch.path()).await else {
        return;
    };
    let url = options.database_url.clone().expect("postgres url");
    options.reconcile = false;
    let tokens: Vec<String> = (1..ACCOUNTS).map(|i| format!("dop_v1_replicas_{i}")).collect();
    options.extra_sim_tokens = tokens.clone();
    let stack = DevStack::start(options).await.expect("dev stack");
    let mut accounts = vec![stack.account_id.clone()];
    let mut all_tokens = vec![stack.sim_token.clone()];
    for (i, t) in tokens.iter().enumerate() {
        let made = stack
            .call(
                "providerAccounts.create",
                json!({"tenantId": DEV_TENANT, "provider": "digitalocean", "name": format!("extra-{i}"),
                       "credentials": {"token": t}}),
            )
            .await
            .expect("providerAccounts.create");
        accounts.push(made["providerAccountId"].as_str().expect("id").to_owned());
        all_tokens.push(t.clone());
    }
    for p in 0..POOLS {
        let pool = stack
            .call(
                "pools.create",
                json!({"tenantId": DEV_TENANT, "name": format!("p{p}"), "policy": {}}),
            )
            .await
            .expect("pools.create");
        for n in 0..PER_POOL {
            stack
                .call(
                    "loadBalancers.create",
                    json!({"tenantId": DEV_TENANT, "poolId": pool["poolId"],
                           "providerAccountId": accounts[p % ACCOUNTS],
                           "name": format!("lb-{p}-{n}"), "type": "regional", "region": "nyc1",
                           "forwardingRules": [{"entryProtocol": "http", "entryPort": 80, "targetProtocol": "http", "targetPort": 8080}],
                           "targets": {"tag": "web"}}),
                )
                .await
                .expect("loadBalancers.create");
        }
    }
    let total = POOLS * PER_POOL;

    let mut first = replica(&stack, &url, "replica-a", &scratch.path().join("a.log"));
    let second = replica(&stack, &url, "replica-b", &scratch.path().join("b.log"));
    // Midway: a quarter ready, then replica a dies without releasing anything.
    let mut killed_at = 0;
    for _ in 0..testing::POLLS {
        killed_at = states(&stack).await.values().filter(|s| *s == "ready").count();
        if killed_at >= total / 4 {
            break;
        }
        tokio::time::sleep(testing::POLL).await;
    }
    assert!(killed_at >= total / 4, "replicas made progress before the kill");
    first.0.kill().expect("SIGKILL");
    let _ = first.0.wait();
    assert!(killed_at < total, "the kill came before the end ({killed_at} of {total} ready)");

    let mut last = BTreeMap::new();
    for _ in 0..testing::POLLS * 2 {
        last = states(&stack).await;
        if last.len() == total && last.values().all(|s| s == "ready") {
            break;
        }
        tokio::time::sleep(testing::POLL).await;
    }
    let not_ready: Vec<_> = last.iter().filter(|(_, s)| *s != "ready").collect();
    assert!(not_ready.is_empty() && last.len() == total, "not ready: {not_ready:?}");

    let mut names = Vec::new();
    for t in &all_tokens {
        names.extend(sim_names(&stack, t).await);
    }
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(names.len(), total, "one load balancer per object at the simulator");
    assert_eq!(unique.len(), total, "no duplicates at the simulator");
    drop(second);
    stack.stop().await;
}
