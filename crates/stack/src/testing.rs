//! Test support (feature `testing`) for the end-to-end tests of this crate and of the
//! binaries: a dev stack per backend (SQLite in a scratch directory, or a fresh
//! PostgreSQL database of the `cargo xtask test` server), and bounded waits through the
//! HTTP API.
//!
//! Invariants: every wait is a bounded loop (a count of short polls) that fails naming
//! what it waited for and the last answer — never an assertion on elapsed time; every
//! address is loopback; scratch directories are removed on drop.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use bc_domain::Timestamp;
use bc_domain::ports::{Clock, SystemClock};

use bc_sim::config::Delays;
use sea_orm_migration::sea_orm::ConnectionTrait as _;
use serde_json::Value;

use crate::dev::{DevOptions, DevStack};

/// Polls made by [`wait_for`] before it gives up (at [`POLL`] each).
pub const POLLS: u32 = 3_000;
/// The pause between polls.
pub const POLL: Duration = Duration::from_millis(100);

/// The store a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// SQLite in the stack's directory.
    Sqlite,
    /// A fresh database on the PostgreSQL of `cargo xtask test`.
    Postgres,
}

/// A directory under the system temp dir, removed on drop.
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Scratch {
    /// A new empty directory named after `prefix`.
    pub fn new(prefix: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "{prefix}-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&path).expect("scratch dir");
        Self(path)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh PostgreSQL database's URL, or `None` when no server was started (the test
/// then returns early; with services required, `bc_testkit` panics instead).
pub async fn fresh_postgres(prefix: &str) -> Option<String> {
    let url = bc_testkit::postgres_url()?;
    let name = bc_testkit::fresh_database_name(prefix);
    let admin = bc_store::SqlStore::connect_unmigrated(&url).await.expect("postgres");
    admin
        .connection()
        .execute_unprepared(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create database");
    let _ = admin.close().await;
    Some(bc_testkit::with_database(&url, &name))
}

/// Seconds-scale delays (the simulator's fastest), so flows take seconds.
pub fn test_delays() -> Delays {
    Delays::fast()
}

/// Dev options for a test in `dir` on `backend` (any free port, fast delays, agents
/// polling often); `None` when the backend is not available.
pub async fn options(backend: Backend, dir: &Path) -> Option<DevOptions> {
    let mut o = DevOptions::new(dir.join(".bc-dev"));
    o.listen = "127.0.0.1:0".parse().expect("loopback");
    o.delays = test_delays();
    o.bcd_every = Duration::from_millis(100);
    if backend == Backend::Postgres {
        o.database_url = Some(fresh_postgres("e2e").await?);
    }
    Some(o)
}

/// Calls `method` with `body` until `done` holds for the answer, at most [`POLLS`]
/// times; panics naming `what` and the last answer otherwise.
pub async fn wait_for(
    stack: &DevStack,
    what: &str,
    method: &str,
    body: Value,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let mut last = Value::Null;
    for _ in 0..POLLS {
        match stack.call(method, body.clone()).await {
            Ok(v) if done(&v) => return v,
            Ok(v) => last = v,
            Err(e) => last = Value::String(e.to_string()),
        }
        tokio::time::sleep(POLL).await;
    }
    panic!("gave up waiting for {what}; last answer: {last}");
}

/// Waits until the substrate of `pool` is in `state`.
pub async fn substrate_in(stack: &DevStack, pool: &str, state: &str) -> Value {
    wait_for(
        stack,
        &format!("substrate of {pool} {state}"),
        "kubernetesSubstrates.get",
        serde_json::json!({"tenantId": crate::dev::DEV_TENANT, "poolId": pool}),
        |v| v["state"] == state,
    )
    .await
}

/// `GET path` of the simulator's DigitalOcean API as the dev account.
pub async fn sim_get(stack: &DevStack, path: &str) -> Value {
    sim_call(stack, &stack.sim_token, reqwest::Method::GET, path, None).await
}

/// A call of the simulator's DigitalOcean API as the account of `token`, its JSON answer
/// (`Null` when the body is not JSON).
pub async fn sim_call(
    stack: &DevStack,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> Value {
    let mut req = reqwest::Client::new()
        .request(method, format!("{}{path}", stack.sim_url))
        .bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    req.send().await.expect("simulator answers").json().await.unwrap_or(Value::Null)
}

/// A bc-client of `api_url` as `token` that never retries and gives up after `timeout`,
/// so a test sees every answer as the server gave it (a 429 or a 503 included).
pub fn client(api_url: &str, token: &str, timeout: Duration) -> bc_client::Client {
    bc_client::Client::builder(api_url)
        .token(token)
        .timeout(timeout)
        .retry(bc_client::Retry { attempts: 1, ..bc_client::Retry::default() })
        .build()
        .expect("a loopback URL")
}

/// One call of API method `method` (`pools.create`) through `client` (see [`client`]):
/// the status and the JSON answer — an error answer as the server's error body — or the
/// transport error (a timeout included) for the caller to judge.
pub async fn post(
    client: &bc_client::Client,
    method: &str,
    body: &Value,
) -> Result<(u16, Value), bc_client::Error> {
    match client.call_method(method, body.clone()).await {
        Ok(v) => Ok((200, v)),
        Err(bc_client::Error::Api(e)) => {
            let mut error = serde_json::json!({ "code": e.code.as_str(), "message": e.message });
            if let Some(f) = e.field {
                error["field"] = Value::String(f);
            }
            Ok((e.status, serde_json::json!({ "error": error })))
        }
        Err(e) => Err(e),
    }
}

/// Whether `tool` is on `PATH` (with services required, it must be: `.ci/run` installs
/// it).
pub fn have(tool: &str) -> bool {
    use std::process::Command;
    let found = Command::new(tool).arg("--help").output().is_ok()
        || Command::new(tool).arg("version").arg("--client").output().is_ok();
    assert!(found || !bc_testkit::services_required(), "{tool} is required (.ci/run installs it)");
    found
}

/// What a printed tour made.
#[derive(Debug, Clone)]
pub struct TourIds {
    /// The pool whose substrate is made on DigitalOcean.
    pub pool: String,
    /// The pool adopting the cluster made in the simulator.
    pub adopted: String,
    /// The load balancer.
    pub lb: String,
    /// The pool whose substrate is made on GKE.
    pub gke_pool: String,
    /// The autopilot cluster on GKE.
    pub autopilot: String,
}

/// Runs a printed tour of `stack` (in `stack`'s parent directory, where `.bc-dev/` is)
/// as [`run_tour`] does, after checking the banner prints each step as is; wants it to
/// succeed and kubectl to have listed Ready nodes. Returns the ids it made.
pub async fn run_printed_tour(
    stack: &DevStack,
    steps: &[(&'static str, String)],
    path: Option<&Path>,
) -> TourIds {
    let banner = stack.banner();
    for (i, (_, cmd)) in steps.iter().enumerate() {
        // The banner prints each command verbatim after its comment line.
        assert!(banner.contains(cmd.as_str()), "the banner prints step {i} as is");
    }
    let dir = stack.dir.parent().expect("the directory holding .bc-dev");
    let out = run_tour(dir, steps, path).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "tour failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains(" Ready "), "kubectl listed Ready nodes:\n{stdout}");
    let last = stdout.lines().find(|l| l.starts_with("POOLS ")).expect("the ids");
    let ids: Vec<&str> = last.split_whitespace().collect();
    assert_eq!(ids.len(), 8, "{last}");
    let made = TourIds {
        pool: ids[1].to_owned(),
        adopted: ids[2].to_owned(),
        lb: ids[4].to_owned(),
        gke_pool: ids[6].to_owned(),
        autopilot: ids[7].to_owned(),
    };
    let pools = [&made.pool, &made.adopted, &made.gke_pool];
    assert!(pools.iter().all(|p| p.starts_with("pool_")), "{last}");
    assert!(made.lb.starts_with("lb_") && made.autopilot.starts_with("cluster_"), "{last}");
    made
}

/// Waits until what a tour made on GKE is ready: the autopilot cluster, and the substrate
/// with its two nodes listed and joined.
pub async fn gke_made_ready(stack: &DevStack, made: &TourIds) {
    wait_for(
        stack,
        &format!("autopilot cluster {} ready", made.autopilot),
        "kubernetesClusters.get",
        serde_json::json!({"tenantId": crate::dev::DEV_TENANT, "clusterId": made.autopilot}),
        |v| v["state"] == "ready" && v["mode"] == "autopilot",
    )
    .await;
    wait_for(
        stack,
        &format!("substrate of {} ready with 2 nodes joined", made.gke_pool),
        "kubernetesSubstrates.get",
        serde_json::json!({"tenantId": crate::dev::DEV_TENANT, "poolId": made.gke_pool}),
        |v| v["state"] == "ready" && v["nodesListed"] == 2 && v["nodesJoined"] == 2,
    )
    .await;
}

/// Runs a printed tour's steps (`(what, shell command)`, as [`DevStack::tour`] and
/// [`DevStack::bc_tour`] give them) with bash in `dir`, in order, each retried (a state
/// may not be reached yet) at most 150 times 0.2 s apart, with `path` put first on `PATH`;
/// the last line prints `POOLS $POOL $ADOPTED LB $LB GKE $GKEPOOL $AUTO`. Returns bash's
/// output.
pub async fn run_tour(
    dir: &Path,
    steps: &[(&'static str, String)],
    path: Option<&Path>,
) -> std::process::Output {
    let mut driver = String::from("set -o pipefail\n");
    if let Some(p) = path {
        driver.push_str(&format!("export PATH='{}':\"$PATH\"\n", p.display()));
    }
    for (i, (_, cmd)) in steps.iter().enumerate() {
        let file = dir.join(format!("step{i}.sh"));
        std::fs::write(&file, format!("{cmd}\n")).expect("step file");
        driver.push_str(&format!(
            "ok=; for n in $(seq 150); do if . '{}'; then echo; ok=1; break; fi; sleep 0.2; done; [ -n \"$ok\" ] || {{ echo 'step {i} failed' >&2; exit 1; }}\n",
            file.display()
        ));
    }
    driver.push_str("echo \"POOLS $POOL $ADOPTED LB $LB GKE $GKEPOOL $AUTO\"\n");
    let dir = dir.to_owned();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new("bash")
            .arg("-c")
            .arg(driver)
            .current_dir(dir)
            .output()
            .expect("bash")
    })
    .await
    .expect("join")
}

/// The wall clock plus an offset (milliseconds) the test moves forward ("16 minutes
/// later"), shared by a dev stack and its simulator as dev mode shares its clock (give it
/// as [`DevOptions::clock`]).
#[derive(Debug, Default)]
pub struct Later(pub AtomicI64);

impl Later {
    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for Later {
    fn now(&self) -> Timestamp {
        let wall = SystemClock.now();
        Timestamp::from_unix_ms(wall.unix_ms() + self.0.load(Ordering::SeqCst))
    }
}
