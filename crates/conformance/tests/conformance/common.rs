//! What the tests that run the `bc-conformance` binary share: starting it with only the
//! variables a test gives (none of the operator's, no proxy), bounding its run, and a
//! simulator on the wall clock for it to run against.
//!
//! Invariant kept: each run of the binary is bounded in time and killed if it overruns
//! or its handle is dropped.

#![allow(dead_code)] // Each test file uses its part.

use std::sync::Arc;
use std::time::Duration;

use bc_conformance::{GKE_KEY_VAR, GKE_LOCATION_VAR, REGION_VAR, TOKEN_VAR};
use bc_domain::ports::SystemClock;
use bc_sim::{Sim, SimConfig, SimServer};

/// How long one run of the binary may take against the simulator before the test fails
/// (the simulated transitions take seconds; the bound is for a loaded machine).
pub const RUN_BOUND: Duration = Duration::from_secs(300);

/// What one run of the binary printed and how it ended.
pub struct Run {
    /// The exit code.
    pub code: Option<i32>,
    /// What it printed.
    pub stdout: String,
}

/// `bc-conformance args…` with exactly the conformance variables `vars` set (every other
/// one unset) and no proxy, killed when dropped.
pub fn command_with(args: &[&str], vars: &[(&str, &str)]) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_bc-conformance"));
    c.args(args).kill_on_drop(true);
    for v in [REGION_VAR, TOKEN_VAR, GKE_KEY_VAR, GKE_LOCATION_VAR] {
        c.env_remove(v);
    }
    for v in ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"] {
        c.env_remove(v);
    }
    for (k, v) in vars {
        c.env(k, v);
    }
    c
}

/// `bc-conformance args…` with the DigitalOcean token variable set to `token` (unset
/// when `None`), as [`command_with`] makes it.
pub fn command(args: &[&str], token: Option<&str>) -> tokio::process::Command {
    let vars: Vec<(&str, &str)> = token.map(|t| (TOKEN_VAR, t)).into_iter().collect();
    command_with(args, &vars)
}

/// Waits (bounded by [`RUN_BOUND`]) for the child `c` to end, and reads its output.
pub async fn finish(c: tokio::process::Child) -> Run {
    let out = tokio::time::timeout(RUN_BOUND, c.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("bc-conformance did not finish within {RUN_BOUND:?}"))
        .expect("run bc-conformance");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    Run { code: out.status.code(), stdout }
}

/// Runs `bc-conformance args…` as [`command_with`] makes it, to its end.
pub async fn conformance_with(args: &[&str], vars: &[(&str, &str)]) -> Run {
    let mut c = command_with(args, vars);
    c.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    finish(c.spawn().expect("start bc-conformance")).await
}

/// Runs `bc-conformance args…` as [`command`] makes it, to its end.
pub async fn conformance(args: &[&str], token: Option<&str>) -> Run {
    let vars: Vec<(&str, &str)> = token.map(|t| (TOKEN_VAR, t)).into_iter().collect();
    conformance_with(args, &vars).await
}

/// A simulator on the wall clock (the binary cannot step a test's clock) with its
/// default fast delays, serving DigitalOcean and GKE over http and each cluster's API
/// over TLS on loopback.
pub async fn simulator() -> (Sim, SimServer) {
    let sim = Sim::new(SimConfig::default(), Arc::new(SystemClock));
    let server = sim.serve("127.0.0.1:0".parse().expect("addr")).await.expect("serve");
    (sim, server)
}
