//! `cargo xtask conformance --provider gke` — the `bc-conformance` binary — against the
//! simulator's GKE face and token endpoint on loopback, on the wall clock with its fast
//! delays, through the variables and flags an operator uses for real GKE: the whole
//! contract passes end to end (a zonal standard cluster, a second node pool resized and
//! deleted, the in-cluster objects applied and refused through the kube adapter with the
//! access token the GKE adapter minted, an autopilot cluster, the sweeps and the bill);
//! without the key file the run is skipped naming the variables; a file that is no key
//! is a usage error that quotes none of it.
//!
//! Invariant kept: every simulated object the run made is gone afterwards, as the
//! simulator itself says; each run is bounded in time and killed if it overruns.

use std::path::PathBuf;
use std::sync::Arc;

use bc_conformance::{GKE_KEY_VAR, GKE_LOCATION_VAR, PASSED, SKIPPED};
use bc_domain::model::{ProviderKind, SecretString};
use bc_domain::ports::{AccountCredentials, KubernetesProvider, ProviderCredentials, SystemClock};
use bc_providers::gke::{Gke, GkeConfig};
use bc_sim::gke_api::routes;
use bc_sim::model::gke::SIM_PROJECT;
use bc_sim::model::routes::key;

use crate::common;
use common::{conformance_with, simulator};

/// A file holding `text`, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("bc-conformance-gke-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("key.json");
        std::fs::write(&path, text).expect("write the key file");
        Self(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("utf-8 path")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_contract_passes_against_the_simulated_gke() {
    let (sim, server) = simulator().await;
    let key_text = sim.gke_key(SIM_PROJECT);
    let key_file = TempFile::new("pass", &key_text);
    let url = server.url();
    let token_url = format!("{url}{}", routes::TOKEN);
    let args = ["--provider", "gke", "--gke-api-url", &url, "--gcp-token-url", &token_url];
    let run = conformance_with(&args, &[(GKE_KEY_VAR, key_file.path())]).await;
    assert_eq!(run.code, Some(0), "{}", run.stdout);
    assert_eq!(run.stdout.lines().last(), Some(PASSED));
    for step in [
        "conformance: GKE API http://127.0.0.1:",
        "ok   options: region us-central1-a, size e2-medium",
        "ok   node pool bc-conf-",
        "resized to 2, listed, deleted",
        "--   load balancer: the provider offers none",
        "created, in place, re-applied without change",
        "refused, not changed, not deleted",
        "ours and the tenant's deleted",
        "ok   autopilot cluster bc-conf-",
        "in us-central1: running, node pools refused, deleted",
        "sweep (before): nothing named",
        "sweep (after): nothing named",
        "GKE prices used",
        "cost at list prices: $",
    ] {
        assert!(run.stdout.contains(step), "{step:?} missing from:\n{}", run.stdout);
    }
    assert!(!run.stdout.contains("PRIVATE KEY"), "the key is never printed");

    // The simulated GKE saw every call the contract makes.
    let m = |method: &str, route: &str| sim.state().model().request_count(&key(method, route));
    assert_eq!(m("POST", routes::CLUSTERS), 2, "the standard and the autopilot cluster");
    assert_eq!(m("POST", routes::NODE_POOLS), 1, "autopilot's node pool is refused unasked");
    assert!(m("POST", routes::SET_SIZE) >= 1);
    assert!(m("DELETE", routes::NODE_POOL) >= 1);
    assert!(m("DELETE", routes::CLUSTER) >= 2);
    assert!(m("POST", routes::TOKEN) >= 1);
    // The objects reached the standard cluster's API: ours and the tenant's created
    // once each, ours applied three times.
    let kube = sim.state().kube.request_counts();
    let total =
        |op: String| -> u64 { kube.iter().filter(|((_, o), _)| *o == op).map(|(_, n)| n).sum() };
    for plural in ["namespaces", "secrets", "serviceaccounts", "daemonsets"] {
        assert_eq!(total(format!("create {plural}")), 2u64, "{plural}");
        assert_eq!(total(format!("apply {plural}")), 3u64, "{plural}");
    }

    // Nothing is left, as the simulator says.
    let checked = ProviderCredentials::service_account(SecretString::new(key_text), None)
        .check(ProviderKind::Gke)
        .expect("the simulator's key");
    let AccountCredentials::ServiceAccount(account) = checked else { unreachable!("gke") };
    let config = GkeConfig::with_urls(url, token_url);
    let gke = Gke::new(&config, &account, Arc::new(SystemClock), None).expect("adapter");
    assert_eq!(gke.list_clusters().await.expect("list").len(), 0);
}

#[tokio::test]
async fn without_the_key_file_it_names_the_variables_and_a_bad_key_is_not_quoted() {
    let run = conformance_with(&["--provider", "gke"], &[]).await;
    assert_eq!(run.code, Some(0), "{}", run.stdout);
    assert!(run.stdout.contains(GKE_KEY_VAR), "{}", run.stdout);
    assert!(run.stdout.contains(GKE_LOCATION_VAR), "{}", run.stdout);
    assert_eq!(run.stdout.lines().last(), Some(SKIPPED));

    let not_a_key =
        TempFile::new("bad", r#"{"type": "service_account", "private_key": "zq-secret"}"#);
    let run = conformance_with(&["--provider", "gke"], &[(GKE_KEY_VAR, not_a_key.path())]).await;
    assert_eq!(run.code, Some(2), "{}", run.stdout);
    assert!(run.stdout.contains(GKE_KEY_VAR), "{}", run.stdout);
    assert!(!run.stdout.contains("zq-secret"), "{}", run.stdout);

    // A region where the standard cluster's zone belongs is a usage error naming it.
    let (sim, _server) = simulator().await;
    let key_file = TempFile::new("region", &sim.gke_key(SIM_PROJECT));
    let vars = [(GKE_KEY_VAR, key_file.path()), (GKE_LOCATION_VAR, "us-central1")];
    let run = conformance_with(&["--provider", "gke"], &vars).await;
    assert_eq!(run.code, Some(2), "{}", run.stdout);
    assert!(run.stdout.contains(GKE_LOCATION_VAR), "{}", run.stdout);
}
