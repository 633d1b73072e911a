//! `bc-reconciler` against a chaotic provider: the simulator answers 20 % of calls with
//! 500 and, in a 3-second window of every 10, every call with 429 and `retry-after`
//! (`bc_sim::config::Chaos`, seeded; replay with `BC_CHAOS_SEED=N`). A mixed workload
//! (load balancers on three accounts, a Kubernetes substrate, a round of creates,
//! updates and deletes) converges to exact books, and no account's calls — every call
//! that reached the simulator, failed or not — ever exceeded the budget the reconciler's
//! `StoreBudget` is configured with (240 a minute, 4,800 an hour: inside
//! DigitalOcean's 250 and 5,000 per token) in any sliding window.
//!
//! Invariants: every wait is bounded; the process is killed on every path; needs the
//! PostgreSQL of `cargo xtask test`.

mod common;

use std::time::Duration;

use bc_domain::rules::budget::BudgetConfig;
use bc_sim::config::Chaos;
use bc_stack::testing::Scratch;
use common::{Rng, Workload, replica, stack};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converges_under_5xx_and_429_bursts_inside_the_account_budget() {
    let scratch = Scratch::new("bc-chaos");
    let Some((stack, url, tokens)) = stack(&scratch, 2).await else { return };
    let seed = Rng::from_env("BC_CHAOS_SEED").next();
    let mut work = Workload::start(&stack, &tokens, 3, 1).await;
    let chaos = Chaos::server_errors(0.2, seed)
        .with_throttle_bursts(Duration::from_secs(10), Duration::from_secs(3));
    stack.sim.state().model().set_chaos(Some(chaos));
    let log = scratch.path().join("reconciler.log");

    let running = replica(&stack, &url, "under-chaos", &log);
    tokio::time::sleep(Duration::from_secs(3)).await;
    work.round(&stack).await;
    let summary = work.converge(&stack).await.unwrap_or_else(|e| common::fail_with_log(&e, &log));
    drop(running);

    let (counts, peaks) = {
        let m = stack.sim.state().model();
        let peaks: Vec<_> = work
            .tokens
            .iter()
            .map(|(a, t)| (a.clone(), m.call_peaks(t).expect("a known token")))
            .collect();
        (m.chaos_counts(), peaks)
    };
    eprintln!("{summary}; chaos answered {counts:?}");
    assert!(counts.server_errors > 0, "the chaos mode failed calls: {counts:?}");
    let budget = BudgetConfig::default();
    for (account, peaks) in &peaks {
        eprintln!("account {account}: {peaks:?}");
        assert!(peaks.total > 0, "account {account} was called");
        assert!(
            peaks.minute <= budget.minute.limit,
            "account {account} over a minute's budget: {peaks:?}"
        );
        assert!(
            peaks.hour <= budget.hour.limit,
            "account {account} over an hour's budget: {peaks:?}"
        );
    }
    stack.stop().await;
}
