//! A measurement, not a test (SPEC §14: "a page of 1,000 pools loads in under a second
//! on the dev stack"): run it on demand with
//! `cargo test -p bc-stack --release --test console_load -- --ignored --nocapture`; it
//! prints how long the console's pools view takes to show the first page of 1,000 pools,
//! each with a substrate, in headless chromium — from the navigation to the last API
//! answer the view needed, and to the page showing "1–25 of 1,000". The figure is
//! recorded in docs/benchmarks.md; nothing here asserts a time.

// The console test's WebDriver client; this measurement uses part of it.
#[allow(dead_code)]
use crate::console::webdriver;

use bc_stack::dev::{DEV_TENANT, DevStack};
use bc_stack::testing::{self, Backend, Scratch};
use serde_json::json;
use webdriver::Browser;

/// Pools stored.
const POOLS: usize = 1_000;
/// Loads measured (the first warms chromium's caches; all are printed).
const LOADS: usize = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run it on demand (see the file's header)"]
async fn a_page_of_a_thousand_pools() {
    let Some((chromium, driver)) = webdriver::tools() else { return };
    let scratch = Scratch::new("bc-console-load");
    let mut options = testing::options(Backend::Sqlite, scratch.path()).await.expect("sqlite");
    // Stored substrates stay pending: the view reads them as it would any others.
    options.reconcile = false;
    let stack = DevStack::start(options).await.expect("dev stack");
    let client = stack.client().expect("client");
    for n in 0..POOLS {
        let policy = json!({"flavors": [{"name": "cpu", "size": "s-2vcpu-4gb", "count": 1}],
            "substrate": {"kind": "kubernetes", "account": stack.account_id,
                          "cluster": {"create": {"region": "nyc1"}}}});
        client
            .call_method(
                "pools.create",
                json!({"tenantId": DEV_TENANT, "name": format!("p{n:04}"), "policy": policy}),
            )
            .await
            .expect("pools.create");
    }
    let browser = Browser::start(&chromium, &driver, 1440, 900).await;
    for load in 0..LOADS {
        browser.goto("about:blank").await;
        browser.goto(&stack.console_link()).await;
        browser
            .wait(
                "the first page of 1,000 pools",
                "document.getElementById('pool-count').textContent.includes('1,000')",
            )
            .await;
        let times = browser
            .js(
                "const api = performance.getEntriesByType('resource').filter(e => e.name.includes('/api/compute/')); \
                 return [Math.max(...api.map(e => e.responseEnd)), performance.now(), api.length];",
                json!([]),
            )
            .await;
        println!(
            "load {load}: last API answer at {:.0} ms, page seen at {:.0} ms (polled every 100 ms), {} API calls",
            times[0].as_f64().unwrap_or(f64::NAN),
            times[1].as_f64().unwrap_or(f64::NAN),
            times[2]
        );
    }
    browser.close().await;
    stack.stop().await;
}
