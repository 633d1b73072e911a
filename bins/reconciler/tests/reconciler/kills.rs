//! Random SIGKILLs of `bc-reconciler` while it converges a mixed workload — load
//! balancers and Kubernetes substrates (clusters, node pools) on three simulated
//! accounts, with creates, updates and deletes in rounds between the kills — then one
//! last process runs to convergence and the books must balance: the simulator holds
//! exactly one object per live row (no duplicate, no orphan, as recorded), every quota
//! count equals the live load balancers, and every load balancer that was ever ready has
//! exactly one billing interval, closed once deleted.
//!
//! The schedule is seeded (printed; replay with `BC_KILL_SEED=N`); each restart is a new
//! process, killed with SIGKILL after a random 0.15–1.5 s. CI runs 20 kills; with
//! `cargo xtask test --soak` (BC_SOAK=1), 300.
//!
//! Invariants: every wait is bounded; every process is killed on every path; the test
//! needs the PostgreSQL of `cargo xtask test` (it returns early without one, or fails when
//! services are required).

use crate::common;

use std::time::Duration;

use bc_stack::testing::Scratch;
use common::{Rng, Workload, replica, soak, stack};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_sigkills_during_convergence_leave_exact_books() {
    let scratch = Scratch::new("bc-kills");
    let Some((stack, url, tokens)) = stack(&scratch, 2).await else { return };
    let kills = if soak() { 300 } else { 20 };
    let mut rng = Rng::from_env("BC_KILL_SEED");
    let mut work = Workload::start(&stack, &tokens, 3, 2).await;
    let log = scratch.path().join("reconciler.log");

    for i in 0..kills {
        let r = replica(&stack, &url, &format!("killed-{i}"), &log);
        tokio::time::sleep(Duration::from_millis(rng.between(150, 1_500))).await;
        r.kill();
        // A round of changes every few kills (the first three rounds include a flavor
        // removed and one added), so kills land on creates, updates and deletes alike.
        if i % 4 == 1 {
            work.round(&stack).await;
        }
    }

    let last = replica(&stack, &url, "survivor", &log);
    let started = std::time::Instant::now(); // reported, never asserted
    let summary = work.converge(&stack).await.unwrap_or_else(|e| common::fail_with_log(&e, &log));
    eprintln!(
        "after {kills} kills: {summary}; {} creates refused for quota; converged {:?} after the last kill",
        work.refused,
        started.elapsed()
    );
    drop(last);
    stack.stop().await;
}
