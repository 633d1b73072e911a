//! `bc-conformance` — the binary `cargo xtask conformance` runs — against the simulator
//! served on loopback with the wall clock and its fast (seconds) delays, through the
//! same variables and `--digitalocean-api-url` an operator uses for DigitalOcean: the
//! whole contract passes end to end (its clusters reached by the kube adapter over TLS
//! with the kubeconfig the simulator hands out); a failed check still leaves nothing
//! behind; what a crashed run left is swept and nothing else is; an interrupted run
//! sweeps what it made; without the token the run is skipped.
//!
//! Invariant kept: every simulated object the run made is gone afterwards, as the
//! simulator itself (not the run's output) says; each run of the binary is bounded in
//! time and killed if it overruns.

use std::sync::Arc;
use std::time::Duration;

use bc_conformance::{NAME_PREFIX, PASSED, SKIPPED, TAG, TOKEN_VAR};
use bc_domain::model::SecretString;
use bc_domain::ports::{
    KubernetesProvider, LoadBalancerProvider, LoadBalancerRequest, SystemClock,
};
use bc_providers::digitalocean::DigitalOcean;
use bc_sim::SimServer;
use bc_sim::model::routes;
use bc_sim::testing::{self, TEST_TOKEN};

use crate::common;
use common::{command, conformance, finish, simulator};

/// The production adapter of the simulator's account, on the wall clock.
fn adapter(server: &SimServer) -> DigitalOcean {
    let config = testing::adapter_config(&server.url(), &Default::default());
    DigitalOcean::new(config, &SecretString::new(TEST_TOKEN), Arc::new(SystemClock))
        .expect("adapter")
}

/// Names of the account's clusters and load balancers, as the simulator holds them.
async fn names(a: &DigitalOcean) -> (Vec<String>, Vec<String>) {
    let mut clusters: Vec<_> =
        a.list_clusters().await.expect("clusters").into_iter().map(|c| c.name).collect();
    let mut lbs: Vec<_> = a.list().await.expect("lbs").into_iter().map(|l| l.spec.name).collect();
    clusters.sort();
    lbs.sort();
    (clusters, lbs)
}

/// The provider id after `cluster <name> (` on the line that reports the create.
fn created_cluster_id(stdout: &str) -> String {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("ok   cluster ") && l.ends_with("created, provisioning"))
        .unwrap_or_else(|| panic!("no cluster create line in:\n{stdout}"));
    line.split('(').nth(1).and_then(|s| s.split(')').next()).expect("id").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_contract_passes_against_the_simulator() {
    let (sim, server) = simulator().await;
    let url = server.url();
    let run = conformance(&["--digitalocean-api-url", &url], Some(TEST_TOKEN)).await;
    assert_eq!(run.code, Some(0), "{}", run.stdout);
    assert_eq!(run.stdout.lines().last(), Some(PASSED));
    for step in [
        "ok   options: region nyc1, size s-1vcpu-2gb",
        "ok   node pool bc-conf-",
        "resized to 2, listed, deleted",
        "ok   load balancer bc-conf-",
        "created, in place, re-applied without change",
        "refused, not changed, not deleted",
        "ours and the tenant's deleted",
        "sweep (before): nothing named",
        "sweep (after): nothing named",
        "cost at list prices: $",
    ] {
        assert!(run.stdout.contains(step), "{step:?} missing from:\n{}", run.stdout);
    }
    assert!(!run.stdout.contains(TEST_TOKEN), "the token is never printed");

    // The simulator saw every call the contract makes.
    let m =
        |method: &str, route: &str| sim.state().model().request_count(&routes::key(method, route));
    assert_eq!(m("POST", routes::CLUSTERS), 1);
    assert_eq!(m("POST", routes::NODE_POOLS), 1);
    assert_eq!(m("PUT", routes::NODE_POOL), 1);
    assert_eq!(m("DELETE", routes::NODE_POOL), 1);
    assert_eq!(m("POST", routes::LOAD_BALANCERS), 1);
    assert!(m("PUT", routes::LOAD_BALANCER) >= 1);
    assert_eq!(m("DELETE", routes::CLUSTER), 1);
    let id = created_cluster_id(&run.stdout);
    let kube = |op: &str| sim.state().kube.request_count(&id, op);
    for plural in ["namespaces", "secrets", "serviceaccounts", "daemonsets"] {
        // Ours and the tenant's, each created once; ours applied three times.
        assert_eq!(kube(&format!("create {plural}")), 2, "{plural}");
        assert_eq!(kube(&format!("apply {plural}")), 3, "{plural}");
    }
    assert!(kube("list nodes") >= 1);

    // Nothing is left, as the simulator says.
    assert_eq!(names(&adapter(&server)).await, (vec![], vec![]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_check_and_a_crashed_run_leave_nothing_but_what_is_not_ours() {
    let (sim, server) = simulator().await;
    let a = adapter(&server);
    // What a crashed run left, and a tenant's objects that have only one of the two marks.
    let tagged = |mut c: bc_domain::ports::CreateClusterRequest| {
        c.tags = vec![TAG.to_owned()];
        c
    };
    let pool = || vec![testing::node_pool_request("p", 1)];
    a.create_cluster(&tagged(testing::cluster_request(&format!("{NAME_PREFIX}crashed-c"), pool())))
        .await
        .unwrap();
    a.create_cluster(&tagged(testing::cluster_request("prod", pool()))).await.unwrap();
    let lb = |name: &str, tags: &[&str]| LoadBalancerRequest {
        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        ..testing::lb_request(name)
    };
    a.create(&lb(&format!("{NAME_PREFIX}crashed-lb"), &[TAG])).await.unwrap();
    a.create(&lb(&format!("{NAME_PREFIX}tenant"), &["team"])).await.unwrap();
    a.create(&lb("web", &[TAG])).await.unwrap();
    // The provider refuses every load balancer change: the contract fails there, after
    // the load balancer was made.
    sim.state()
        .model()
        .refuse(&routes::key("PUT", routes::LOAD_BALANCER), "size unit changes are disabled");

    let run = conformance(&["--digitalocean-api-url", &server.url()], Some(TEST_TOKEN)).await;
    assert_eq!(run.code, Some(1), "{}", run.stdout);
    let last = run.stdout.lines().last().unwrap_or_default();
    assert!(last.starts_with("FAILED: load balancer update: provider:"), "{last}");
    assert!(last.contains("size unit changes are disabled"), "{last}");
    for step in [
        "sweep (before): deleting cluster bc-conf-crashed-c",
        "sweep (before): deleting load balancer bc-conf-crashed-lb",
        "ok   cluster bc-conf-",
        "sweep (after): deleting load balancer bc-conf-",
        "made:",
    ] {
        assert!(run.stdout.contains(step), "{step:?} missing from:\n{}", run.stdout);
    }
    // The run's own cluster was deleted by the contract, its load balancer by the sweep;
    // the crashed run's objects are gone; the tenant's stay.
    let (clusters, lbs) = names(&a).await;
    assert_eq!(clusters, ["prod"]);
    assert_eq!(lbs, [format!("{NAME_PREFIX}tenant"), "web".to_owned()]);

    // A sweep-only run finds nothing more.
    sim.state().model().clear_faults();
    let run =
        conformance(&["--sweep-only", "--digitalocean-api-url", &server.url()], Some(TEST_TOKEN))
            .await;
    assert_eq!(run.code, Some(0), "{}", run.stdout);
    assert!(run.stdout.contains("sweep (before): nothing named"), "{}", run.stdout);
}

/// Ctrl-C (SIGINT) in the middle of the contract: the run stops where it stands, sweeps
/// what it made, and fails saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_run_sweeps_what_it_made() {
    let (_sim, server) = simulator().await;
    let a = adapter(&server);
    let mut c = command(&["--digitalocean-api-url", &server.url()], Some(TEST_TOKEN));
    c.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let child = c.spawn().expect("start bc-conformance");
    // Until the run's cluster exists (bounded: 600 looks, 100 ms apart).
    let mut made = false;
    for _ in 0..600 {
        made = names(&a).await.0.iter().any(|n| n.starts_with(NAME_PREFIX));
        if made {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(made, "the run made no cluster");
    let pid = child.id().expect("running").to_string();
    let kill = std::process::Command::new("kill").args(["-INT", &pid]).status().expect("kill");
    assert!(kill.success());

    let run = finish(child).await;
    assert_eq!(run.code, Some(1), "{}", run.stdout);
    assert_eq!(run.stdout.lines().last(), Some("FAILED: interrupted"), "{}", run.stdout);
    assert!(
        run.stdout.contains("conformance: interrupted; sweeping what is left"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("sweep (after): deleting cluster bc-conf-"), "{}", run.stdout);
    assert_eq!(names(&a).await, (vec![], vec![]));
}

#[tokio::test]
async fn a_refused_token_fails_at_the_first_call_without_printing_it() {
    let (_sim, server) = simulator().await;
    let wrong = "dop_v1_not_this_account";
    let run = conformance(&["--digitalocean-api-url", &server.url()], Some(wrong)).await;
    assert_eq!(run.code, Some(1), "{}", run.stdout);
    let last = run.stdout.lines().last().unwrap_or_default();
    assert!(last.starts_with("FAILED: sweep (before): provider:"), "{last}");
    assert!(!run.stdout.contains(wrong), "{}", run.stdout);
}

#[tokio::test]
async fn without_the_token_it_says_which_variable_to_set_and_skips() {
    for token in [None, Some("")] {
        let run = conformance(&[], token).await;
        assert_eq!(run.code, Some(0), "{}", run.stdout);
        assert!(run.stdout.contains(TOKEN_VAR), "{}", run.stdout);
        assert_eq!(run.stdout.lines().last(), Some(SKIPPED));
    }
    // A bad argument is a usage error naming it, token or not.
    let run = conformance(&["--digitalocean-api-url", "localhost:1"], None).await;
    assert_eq!(run.code, Some(2), "{}", run.stdout);
    assert!(run.stdout.contains("--digitalocean-api-url"), "{}", run.stdout);
}
