//! The bc tour `bc-api dev` prints, run by bash exactly as printed with the `bc` just built
//! first on `PATH` (the curl tour's test is `crates/stack/tests/stack/e2e.rs`,
//! `the_printed_tour_works_as_printed`; both run through `bc_stack::testing::run_printed_tour`).

use std::path::Path;

use bc_stack::dev::DevStack;
use bc_stack::testing::{self, Backend, Scratch};

const BIN: &str = env!("CARGO_BIN_EXE_bc");

/// Every command of the banner's bc tour, in order, each retried a bounded number of times
/// while what it shows is on its way; it waits for the substrates (DigitalOcean and GKE),
/// the load balancer and the autopilot cluster itself (`bc wait`), and the adopted pool's
/// substrate gets ready too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_printed_bc_tour_works_as_printed() {
    if !(testing::have("curl") && testing::have("kubectl") && testing::have("bash")) {
        return;
    }
    let scratch = Scratch::new("bc-tour");
    let options = testing::options(Backend::Sqlite, scratch.path()).await.expect("sqlite");
    let stack = DevStack::start(options).await.expect("dev stack");
    let bin_dir = Path::new(BIN).parent().expect("the binary's directory");
    let made = testing::run_printed_tour(&stack, &stack.bc_tour(), Some(bin_dir)).await;
    testing::substrate_in(&stack, &made.pool, "ready").await;
    testing::substrate_in(&stack, &made.adopted, "ready").await;
    testing::gke_made_ready(&stack, &made).await;
    let lb = stack
        .call(
            "loadBalancers.get",
            serde_json::json!({"tenantId": "dev", "loadBalancerId": made.lb}),
        )
        .await
        .expect("the load balancer");
    assert_eq!(lb["state"], "ready", "bc wait lb returned once it was ready");
    stack.stop().await;
}
