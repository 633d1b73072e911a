//! Issue 12, security bullet 4 — provider API URLs are never taken from tenant input
//! (SPEC §5: the base URL is server configuration). The only places a provider address
//! is chosen: `DigitalOceanConfig::base_url` (from `--digitalocean-api-url`, through
//! `Adapters::real`), the page number — only the number — of a `links.pages.next`
//! (`next_page_number`), and a cluster's API server from the kubeconfig the provider
//! itself returns. Here a dev stack talks to its simulator on one port while a "trap"
//! TCP listener waits on another; every request field that could carry an address (an
//! extra `apiUrl`/`endpoint`/`baseUrl`, at the top and inside `credentials`; a token,
//! name, region or adopted cluster id holding `http://127.0.0.1:<trap>`, `@127.0.0.1:<trap>`,
//! `//…` or `../`) is sent, the reconcilers are given time to act on the accepted ones
//! (since provider slugs have a rule of their own, none of these is: each is refused
//! naming its field), and the trap must have received no connection at all, while
//! unknown fields are refused by name.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bc_stack::dev::{DEV_TENANT, DevStack};
use bc_stack::testing::{self, Backend, Scratch, wait_for};
use serde_json::{Value, json};

/// A listener that counts connections and answers none.
async fn trap() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("loopback");
    let addr = listener.local_addr().expect("address").to_string();
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    tokio::spawn(async move {
        while let Ok((_socket, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
        }
    });
    (addr, hits)
}

async fn post(stack: &DevStack, method: &str, body: &Value) -> (u16, Value) {
    let client = testing::client(&stack.api_url, &stack.token, std::time::Duration::from_secs(30));
    testing::post(&client, method, body).await.expect("the API answers")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_request_field_can_point_a_provider_call_elsewhere() {
    let scratch = Scratch::new("bc-provider-urls");
    let Some(options) = testing::options(Backend::Sqlite, scratch.path()).await else { return };
    let stack = DevStack::start(options).await.expect("dev stack");
    let (trap, hits) = trap().await;
    let url = format!("http://{trap}/");
    let account = |extra: Value| {
        let mut b = json!({ "tenantId": DEV_TENANT, "provider": "digitalocean", "name": "elsewhere",
                            "credentials": { "token": stack.sim_token } });
        for (k, v) in extra.as_object().expect("object") {
            if let Some(inner) = k.strip_prefix("credentials.") {
                b["credentials"][inner] = v.clone();
            } else {
                b[k.as_str()] = v.clone();
            }
        }
        b
    };
    // Unknown fields that would name an address: refused, by name.
    for field in ["apiUrl", "endpoint", "baseUrl", "credentials.apiUrl", "credentials.endpoint"] {
        let (status, answer) =
            post(&stack, "providerAccounts.create", &account(json!({ field: url }))).await;
        assert_eq!(status, 400, "{field}: {answer}");
        assert_eq!(answer["error"]["field"], field, "{answer}");
    }
    // Addresses inside values the API does accept as text: refused by the provider (the
    // simulator, at its configured URL) or by the value's own rules — never followed.
    for token in [url.clone(), format!("dop_v1_x@{trap}"), format!("{url}v2/account")] {
        let body = account(json!({ "credentials.token": token }));
        let (status, answer) = post(&stack, "providerAccounts.create", &body).await;
        assert!((400..500).contains(&status), "token {token}: {status} {answer}");
    }
    let (status, _) =
        post(&stack, "providerAccounts.create", &account(json!({ "name": url }))).await;
    assert_eq!(status, 400);
    // Regions and adopted cluster ids are passed to the provider: as JSON body values or
    // one percent-encoded path segment of the configured URL.
    let hostile = [url.clone(), format!("@{trap}"), format!("//{trap}/v2"), "../../../..".into()];
    let mut pools = Vec::new();
    for (i, value) in hostile.iter().enumerate() {
        let substrates = [
            json!({ "create": { "region": value } }),
            json!({ "adopt": { "providerClusterId": value } }),
        ];
        for (j, cluster) in substrates.into_iter().enumerate() {
            let body = json!({ "tenantId": DEV_TENANT, "name": format!("p{i}-{j}"), "policy": {
                "substrate": { "kind": "kubernetes", "account": stack.account_id, "cluster": cluster },
                "flavors": [{ "name": "cpu", "size": "s-2vcpu-4gb", "count": 1 }] } });
            let (status, answer) = post(&stack, "pools.create", &body).await;
            assert!(status < 500, "{body}: {status} {answer}");
            if status == 200 {
                pools.push(answer["poolId"].as_str().expect("poolId").to_owned());
            } else {
                // Provider slugs are 1–64 of [A-Za-z0-9._-] (SPEC §2, issue 20 item 5):
                // an address is refused naming the field, before any provider call.
                let field = answer["error"]["field"].as_str().unwrap_or_default();
                assert!(status == 400 && field.starts_with("policy.substrate.cluster"), "{answer}");
            }
        }
        let body = json!({ "tenantId": DEV_TENANT, "providerAccountId": stack.account_id,
                           "name": format!("c{i}"), "region": value,
                           "nodePools": [{ "name": "cpu", "size": "s-2vcpu-4gb", "count": 1 }] });
        let (status, answer) = post(&stack, "kubernetesClusters.create", &body).await;
        assert!(status < 500, "{body}: {status} {answer}");
    }
    // Whatever was accepted as text goes to the provider at its configured URL only.
    // The reconcilers act on each accepted pool: wait until every substrate has had an
    // answer from the provider (a message or a state past pending).
    for pool in &pools {
        wait_for(
            &stack,
            &format!("the provider's answer for {pool}"),
            "kubernetesSubstrates.get",
            json!({ "tenantId": DEV_TENANT, "poolId": pool }),
            |v| v["message"].is_string() || matches!(v["state"].as_str(), Some("ready" | "error")),
        )
        .await;
    }
    let states = {
        let mut out = Vec::new();
        for pool in &pools {
            let v = stack
                .call("kubernetesSubstrates.get", json!({ "tenantId": DEV_TENANT, "poolId": pool }))
                .await
                .expect("substrate");
            out.push(format!("{}: {}", v["state"], v["message"]));
        }
        out
    };
    // Each was answered by the simulator at the configured URL: it saw the value as data.
    assert!(
        states
            .iter()
            .all(|s| s.contains("invalid region")
                || s.contains("does not exist in provider account")),
        "{states:#?}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0, "a provider call went to the trap at {trap}");
    stack.stop().await;
}
