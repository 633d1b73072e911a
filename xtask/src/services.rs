//! Throwaway PostgreSQL (`bc_testkit::postgres`) and nats-server instances on loopback
//! for tests and benchmarks.
//!
//! Each server runs in its own temporary directory on a free port; a guard stops it and
//! removes the directory when dropped, so early returns and panics clean up too.

use std::env;
use std::fmt;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

// The PostgreSQL half lives in bc-testkit, so a fault test can start (and stop, and
// restart) one of its own with the same code.
pub use bc_testkit::postgres::{Throwaway as Postgres, find as find_postgres};
use bc_testkit::server::{free_port, is_executable, tail, unique_temp_dir, which};

/// Environment variable that carries the PostgreSQL URL to the tests.
pub const POSTGRES_URL_VAR: &str = "BC_TEST_POSTGRES_URL";
/// Environment variable that carries the NATS URL to the tests.
pub const NATS_URL_VAR: &str = "BC_TEST_NATS_URL";
/// Environment variable that tells the tests that missing services are failures.
pub const REQUIRE_SERVICES_VAR: &str = "BC_REQUIRE_SERVICES";

/// How long to wait for nats-server to report that it is ready.
const NATS_READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long to wait for nats-server to exit after SIGTERM before killing it.
const NATS_STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Interval between polls while waiting for a server.
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// How many ports to try if a server fails to start (another process may take the port).
const START_ATTEMPTS: usize = 3;

/// Which services to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wanted {
    /// Start PostgreSQL.
    pub postgres: bool,
    /// Start nats-server.
    pub nats: bool,
}

/// An error while finding or starting a service.
#[derive(Debug)]
pub struct ServiceError(pub String);

impl fmt::Display for ServiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<io::Error> for ServiceError {
    fn from(e: io::Error) -> Self {
        ServiceError(e.to_string())
    }
}

/// Shorthand for results of this module.
pub type Result<T> = std::result::Result<T, ServiceError>;

/// Builds a [`ServiceError`] from format arguments.
macro_rules! err {
    ($($arg:tt)*) => { ServiceError(format!($($arg)*)) };
}

/// The services started for one run, stopped when dropped.
#[derive(Debug, Default)]
pub struct Services {
    /// The throwaway PostgreSQL, if one was started.
    pub postgres: Option<Postgres>,
    /// The throwaway nats-server, if one was started.
    pub nats: Option<Nats>,
    /// One line per wanted service telling whether it is used, for the final summary.
    pub summary: Vec<String>,
    /// Environment variables to export to the child process.
    pub env: Vec<(String, String)>,
}

impl Services {
    /// Finds and starts the wanted services.
    ///
    /// A service whose binaries are missing is skipped with a message, or is an error when
    /// `require` is set. A URL already present in the environment is passed through and
    /// counts as available.
    pub fn start(wanted: Wanted, require: bool) -> Result<Services> {
        // Locate everything first, so a missing required service fails before anything starts.
        let pg_preset = preset(POSTGRES_URL_VAR).filter(|_| wanted.postgres);
        let nats_preset = preset(NATS_URL_VAR).filter(|_| wanted.nats);
        let pg_bin = (wanted.postgres && pg_preset.is_none()).then(find_postgres).flatten();
        let nats_bin = (wanted.nats && nats_preset.is_none()).then(find_nats).flatten();
        let pg_missing = wanted.postgres && pg_preset.is_none() && pg_bin.is_none();
        let nats_missing = wanted.nats && nats_preset.is_none() && nats_bin.is_none();
        if require && (pg_missing || nats_missing) {
            let mut missing = Vec::new();
            if pg_missing {
                missing.push(
                    "PostgreSQL (no initdb in /usr/lib/postgresql/*/bin or on PATH; \
                     `apt-get install -y postgresql`)",
                );
            }
            if nats_missing {
                missing.push(
                    "NATS (no nats-server on PATH or in /usr/sbin; \
                     `apt-get install -y nats-server`)",
                );
            }
            return Err(err!(
                "services are required (--require-services) but not found: {}",
                missing.join("; ")
            ));
        }

        let mut services = Services::default();
        if let Some(url) = pg_preset {
            services.summary.push(format!("PostgreSQL: from the environment ({url}): used"));
            services.env.push((POSTGRES_URL_VAR.into(), url));
        } else if let Some(bin) = pg_bin {
            let pg = Postgres::start(bin)?;
            services
                .summary
                .push(format!("PostgreSQL {} at 127.0.0.1:{}: used", pg.bin.major, pg.port));
            services.env.push((POSTGRES_URL_VAR.into(), pg.url()));
            eprintln!("xtask: started PostgreSQL {} at {}", pg.bin.major, pg.url());
            services.postgres = Some(pg);
        } else if pg_missing {
            eprintln!("xtask: PostgreSQL not found: PostgreSQL tests will be skipped");
            services.summary.push("PostgreSQL: skipped (not found)".into());
        }
        if let Some(url) = nats_preset {
            services.summary.push(format!("NATS: from the environment ({url}): used"));
            services.env.push((NATS_URL_VAR.into(), url));
        } else if let Some(bin) = nats_bin {
            let nats = Nats::start(&bin)?;
            services
                .summary
                .push(format!("NATS {} at 127.0.0.1:{}: used", nats.version, nats.port));
            services.env.push((NATS_URL_VAR.into(), nats.url()));
            eprintln!("xtask: started nats-server {} at {}", nats.version, nats.url());
            services.nats = Some(nats);
        } else if nats_missing {
            eprintln!("xtask: NATS not found: NATS tests will be skipped");
            services.summary.push("NATS: skipped (not found)".into());
        }
        if require {
            services.env.push((REQUIRE_SERVICES_VAR.into(), "1".into()));
        }
        Ok(services)
    }

    /// Applies the exported variables to a command.
    pub fn apply(&self, cmd: &mut Command) {
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
    }

    /// Stops every started service now (dropping does the same).
    pub fn stop(&mut self) {
        // Drop order: NATS first, it is quicker to stop and independent of PostgreSQL.
        self.nats.take();
        self.postgres.take();
    }
}

/// Returns the non-empty value of an environment variable.
fn preset(var: &str) -> Option<String> {
    env::var(var).ok().filter(|v| !v.trim().is_empty())
}

/// Finds `nats-server` on PATH or in /usr/sbin.
pub fn find_nats() -> Option<PathBuf> {
    which("nats-server").or_else(|| {
        let p = PathBuf::from("/usr/sbin/nats-server");
        is_executable(&p).then_some(p)
    })
}

/// A throwaway nats-server with JetStream; stopped and its directory removed on drop.
#[derive(Debug)]
pub struct Nats {
    /// The running server process.
    child: Option<Child>,
    /// The port it listens on, at 127.0.0.1.
    pub port: u16,
    /// Its temporary directory (JetStream store, log).
    pub dir: PathBuf,
    /// Version as printed by `nats-server --version`, e.g. "2.9.10".
    pub version: String,
}

impl Nats {
    /// Starts nats-server in a temp dir and waits (bounded) until its log says it is ready.
    pub fn start(bin: &Path) -> Result<Nats> {
        let version = Command::new(bin)
            .arg("--version")
            .output()
            .ok()
            .map(|o| {
                let text = String::from_utf8_lossy(&o.stdout).to_string();
                text.split_whitespace().last().unwrap_or("").trim_start_matches('v').to_string()
            })
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "(unknown version)".into());
        let dir = unique_temp_dir("nats")?;
        let mut nats = Nats { child: None, port: 0, dir, version };
        let log = nats.dir.join("server.log");
        let mut last_error = None;
        for _ in 0..START_ATTEMPTS {
            let port = free_port()?;
            let _ = fs::remove_file(&log);
            let output = File::create(nats.dir.join("stdout.log"))?;
            let child = Command::new(bin)
                .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
                .arg(nats.dir.join("js"))
                .arg("-l")
                .arg(&log)
                .stdin(Stdio::null())
                .stdout(output.try_clone()?)
                .stderr(output)
                .spawn()
                .map_err(|e| err!("cannot run {}: {e}", bin.display()))?;
            nats.child = Some(child);
            match nats.wait_ready(&log) {
                Ok(()) => {
                    nats.port = port;
                    last_error = None;
                    break;
                }
                Err(e) => {
                    nats.stop_server();
                    last_error = Some(e);
                }
            }
        }
        match last_error {
            Some(e) => Err(e),
            None => Ok(nats),
        }
    }

    /// Polls the log every 100 ms, for at most 20 s, for "Server is ready".
    fn wait_ready(&mut self, log: &Path) -> Result<()> {
        let deadline = Instant::now() + NATS_READY_TIMEOUT;
        loop {
            if fs::read_to_string(log).map(|t| t.contains("Server is ready")).unwrap_or(false) {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(err!(
                    "nats-server exited ({status}) before it was ready; server.log:\n{}",
                    tail(log, 20)
                ));
            }
            if Instant::now() >= deadline {
                return Err(err!(
                    "nats-server not ready after {} s; server.log:\n{}",
                    NATS_READY_TIMEOUT.as_secs(),
                    tail(log, 20)
                ));
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    /// The client URL.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Sends SIGTERM, waits (bounded) for exit, then kills if still running.
    fn stop_server(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + NATS_STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            thread::sleep(POLL_INTERVAL);
        }
        eprintln!("xtask: nats-server did not stop after SIGTERM; killing it");
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        self.stop_server();
        if let Err(e) = fs::remove_dir_all(&self.dir) {
            eprintln!("xtask: removing {}: {e}", self.dir.display());
        }
    }
}
