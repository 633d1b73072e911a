//! A crash between the provider's create and recording its id, at process level: the
//! simulator makes a load balancer and a cluster and withholds both answers (what the
//! reconciler sees of a crash right after the call); the test SIGKILLs `bc-reconciler`
//! while it waits, checks that nothing recorded the ids, starts a new process, and the
//! books must balance with exactly one create call of each — found by tag and name, not
//! made twice. (The in-process variants, on a stepped clock, are in
//! crates/reconcile/tests; this is the same promise across a real process death.)
//!
//! Invariants: every wait is bounded; every process is killed on every path; needs the
//! PostgreSQL of `cargo xtask test`.

use crate::common;

use bc_domain::ports::ClusterRepo as _;
use bc_domain::ports::LoadBalancerRepo as _;
use bc_sim::model::routes;
use bc_stack::testing::{self, Scratch};
use common::{Workload, replica, stack};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_whose_answer_died_with_the_process_is_found_not_made_twice() {
    let scratch = Scratch::new("bc-lost-answers");
    let Some((stack, url, tokens)) = stack(&scratch, 0).await else { return };
    let post_lb = routes::key("POST", routes::LOAD_BALANCERS);
    let post_cluster = routes::key("POST", routes::CLUSTERS);
    {
        let mut m = stack.sim.state().model();
        m.lose_answers(&post_lb, 1);
        m.lose_answers(&post_cluster, 1);
    }
    // Two pools of one load balancer each, and one substrate: two LB creates and a
    // cluster create, the first of each kind losing its answer.
    let work = Workload::start(&stack, &tokens, 1, 1).await;
    let log = scratch.path().join("reconciler.log");

    let first = replica(&stack, &url, "crashes", &log);
    let mut made = (0, 0);
    for _ in 0..testing::POLLS {
        made = {
            let now = stack.adapters.clock.now();
            let mut m = stack.sim.state().model();
            (
                m.list_load_balancers(&stack.sim_token, now).map_or(0, |l| l.len()),
                m.list_clusters(&stack.sim_token, now).map_or(0, |c| c.len()),
            )
        };
        if made.0 >= 1 && made.1 >= 1 {
            break;
        }
        tokio::time::sleep(testing::POLL).await;
    }
    assert!(made.0 >= 1 && made.1 >= 1, "the creates reached the simulator: {made:?}");
    first.kill();

    // The answers never arrived: whatever the provider made is not recorded (at least
    // one load balancer and the cluster wait to be found).
    let store = stack.adapters.store.as_ref();
    let mut unrecorded = 0;
    let page = bc_domain::ports::PageRequest::first(100);
    for lb in store.load_balancer_sweep(&page).await.expect("sweep").items {
        unrecorded += usize::from(lb.provider_load_balancer_id.is_none());
    }
    let clusters = store.cluster_sweep(&bc_domain::ports::PageRequest::first(100)).await;
    let cluster_unrecorded = clusters
        .expect("cluster sweep")
        .items
        .iter()
        .filter(|c| c.provider_cluster_id.is_none())
        .count();
    assert!(unrecorded >= 1, "a load balancer made at the provider, its id never recorded");
    assert_eq!(cluster_unrecorded, 1, "the cluster made at the provider, its id never recorded");

    let second = replica(&stack, &url, "recovers", &log);
    let summary = work.converge(&stack).await.unwrap_or_else(|e| common::fail_with_log(&e, &log));
    eprintln!("{summary}");
    let calls = {
        let m = stack.sim.state().model();
        (m.request_count(&post_lb), m.request_count(&post_cluster))
    };
    assert_eq!(calls.0, 2, "one create per load balancer, none repeated");
    assert_eq!(calls.1, 1, "one cluster create, not repeated");
    drop(second);
    stack.stop().await;
}
