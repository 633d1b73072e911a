//! Throwaway PostgreSQL and nats-server instances on loopback for tests and benchmarks.
//!
//! Each server runs in its own temporary directory on a free port; a guard stops it and
//! removes the directory when dropped, so early returns and panics clean up too.

use std::env;
use std::fmt;
use std::fs::{self, File};
use std::io;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Environment variable that carries the PostgreSQL URL to the tests.
pub const POSTGRES_URL_VAR: &str = "BC_TEST_POSTGRES_URL";
/// Environment variable that carries the NATS URL to the tests.
pub const NATS_URL_VAR: &str = "BC_TEST_NATS_URL";
/// Environment variable that tells the tests that missing services are failures.
pub const REQUIRE_SERVICES_VAR: &str = "BC_REQUIRE_SERVICES";

/// Name of the database created in the throwaway PostgreSQL.
const TEST_DATABASE: &str = "bc_test";
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

/// Returns a free TCP port on 127.0.0.1 (bound, then released).
pub fn free_port() -> io::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// Creates a fresh, uniquely named directory under the system temp dir.
pub fn unique_temp_dir(kind: &str) -> io::Result<PathBuf> {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = env::temp_dir().join(format!("bc-xtask-{kind}-{}-{}-{n}", std::process::id(), nanos));
    fs::create_dir(&dir)?;
    Ok(dir)
}

/// Parses a dotted version ("15", "9.6", "2.10.1") into numbers; `None` if not numeric.
pub fn parse_version(s: &str) -> Option<Vec<u64>> {
    let s = s.trim().trim_start_matches('v');
    if s.is_empty() {
        return None;
    }
    s.split('.').map(|part| part.parse::<u64>().ok()).collect()
}

/// Chooses the newest version among directory names, ignoring names that are not versions.
pub fn newest_version<'a, I>(names: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    names
        .into_iter()
        .filter_map(|n| parse_version(n).map(|v| (v, n)))
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, n)| n)
}

/// Extracts the effective uid from the text of `/proc/self/status`.
pub fn parse_euid(status: &str) -> Option<u32> {
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line["Uid:".len()..].split_whitespace().nth(1)?.parse().ok()
}

/// Tells whether this process runs as root (effective uid 0).
pub fn running_as_root() -> bool {
    if let Some(uid) = fs::read_to_string("/proc/self/status").ok().as_deref().and_then(parse_euid)
    {
        return uid == 0;
    }
    Command::new("id")
        .arg("-u")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// Finds an executable by name on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = env::var_os("PATH")?;
    env::split_paths(&path).map(|dir| dir.join(name)).find(|p| is_executable(p))
}

/// Tells whether a path is an executable regular file (or a symlink to one).
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// The PostgreSQL programs used to run a throwaway server.
#[derive(Debug, Clone)]
pub struct PostgresBin {
    /// `initdb`.
    pub initdb: PathBuf,
    /// `pg_ctl`.
    pub pg_ctl: PathBuf,
    /// `psql`.
    pub psql: PathBuf,
    /// Major version as printed by `initdb --version`, e.g. "15".
    pub major: String,
}

/// Finds PostgreSQL: the newest `/usr/lib/postgresql/*/bin`, else `initdb` on PATH.
pub fn find_postgres() -> Option<PostgresBin> {
    let from_lib = fs::read_dir("/usr/lib/postgresql").ok().and_then(|entries| {
        let names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.path().join("bin/initdb").is_file())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        let newest = newest_version(names.iter().map(String::as_str))?;
        Some(PathBuf::from("/usr/lib/postgresql").join(newest).join("bin"))
    });
    let bin_dir = from_lib.or_else(|| {
        // initdb on PATH is often a symlink into the real bin dir; psql may live only there.
        let initdb = which("initdb")?;
        fs::canonicalize(&initdb).ok()?.parent().map(Path::to_path_buf)
    })?;
    let in_dir_or_path = |name: &str| {
        let p = bin_dir.join(name);
        if is_executable(&p) { Some(p) } else { which(name) }
    };
    let initdb = in_dir_or_path("initdb")?;
    let pg_ctl = in_dir_or_path("pg_ctl")?;
    let psql = in_dir_or_path("psql")?;
    let major = Command::new(&initdb)
        .arg("--version")
        .output()
        .ok()
        .map(|o| postgres_major(&String::from_utf8_lossy(&o.stdout)))
        .unwrap_or_default();
    Some(PostgresBin { initdb, pg_ctl, psql, major })
}

/// Extracts the major version from `initdb --version` output
/// ("initdb (PostgreSQL) 15.18 (Debian ...)" → "15").
pub fn postgres_major(version_output: &str) -> String {
    version_output
        .split_whitespace()
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))
        .map(|w| w.split('.').next().unwrap_or(w).to_string())
        .unwrap_or_else(|| "(unknown version)".into())
}

/// A throwaway PostgreSQL server; stopped and its directory removed on drop.
#[derive(Debug)]
pub struct Postgres {
    /// The programs used.
    pub bin: PostgresBin,
    /// The port it listens on, at 127.0.0.1.
    pub port: u16,
    /// Its temporary directory (data, logs, unix socket).
    pub dir: PathBuf,
    /// Whether it runs as the `postgres` user through `runuser` (we are root).
    as_postgres_user: bool,
    /// Whether the server was started (and needs stopping).
    running: bool,
}

impl Postgres {
    /// Initialises a cluster in a temp dir, starts it and creates the `bc_test` database.
    pub fn start(bin: PostgresBin) -> Result<Postgres> {
        let as_postgres_user = running_as_root();
        if as_postgres_user {
            ensure_postgres_user()?;
        }
        let dir = unique_temp_dir("pg")?;
        let mut pg = Postgres { bin, port: 0, dir, as_postgres_user, running: false };
        if as_postgres_user {
            let status = Command::new("chown")
                .arg("postgres:")
                .arg(&pg.dir)
                .status()
                .map_err(|e| err!("chown: {e}"))?;
            if !status.success() {
                return Err(err!("chown postgres: {} failed", pg.dir.display()));
            }
        }
        let data = pg.dir.join("data");
        let initdb_log = pg.dir.join("initdb.log");
        let mut initdb = pg.command(&pg.bin.initdb);
        initdb.arg("-D").arg(&data).args([
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-locale",
            "--no-sync",
        ]);
        run_logged(initdb, &initdb_log, "initdb")?;

        let mut last_error = None;
        for _ in 0..START_ATTEMPTS {
            let port = free_port()?;
            let options = format!(
                "-c listen_addresses=127.0.0.1 -p {port} -k {} -c fsync=off \
                 -c synchronous_commit=off -c full_page_writes=off -c max_connections=300",
                pg.dir.display()
            );
            let mut start = pg.command(&pg.bin.pg_ctl);
            start
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(pg.dir.join("server.log"))
                .args(["-w", "-t", "30", "-o", &options, "start"]);
            // pg_ctl may leave a server behind even when it reports failure: always try to stop.
            pg.running = true;
            match run_logged(start, &pg.dir.join("pg_ctl.log"), "pg_ctl start") {
                Ok(()) => {
                    pg.port = port;
                    last_error = None;
                    break;
                }
                Err(e) => {
                    pg.stop_server();
                    let log = tail(&pg.dir.join("server.log"), 20);
                    last_error = Some(err!("{e}\nserver.log:\n{log}"));
                }
            }
        }
        if let Some(e) = last_error {
            return Err(e);
        }

        let mut psql = Command::new(&pg.bin.psql);
        psql.args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p"])
            .arg(pg.port.to_string())
            .args(["-U", "postgres", "-d", "postgres", "-c"])
            .arg(format!("CREATE DATABASE {TEST_DATABASE}"))
            .current_dir(&pg.dir);
        run_logged(psql, &pg.dir.join("psql.log"), "psql CREATE DATABASE")?;
        Ok(pg)
    }

    /// The URL of the test database.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{TEST_DATABASE}", self.port)
    }

    /// A command for a PostgreSQL program, through `runuser -u postgres --` when root.
    fn command(&self, program: &Path) -> Command {
        let mut cmd = if self.as_postgres_user {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            Command::new(program)
        };
        // The postgres user may not be able to enter the caller's working directory.
        cmd.current_dir(&self.dir);
        cmd
    }

    /// Stops the server (fast shutdown, bounded wait) if it was started.
    fn stop_server(&mut self) {
        if !self.running {
            return;
        }
        self.running = false;
        let mut stop = self.command(&self.bin.pg_ctl);
        stop.arg("-D").arg(self.dir.join("data")).args(["-m", "fast", "-w", "-t", "30", "stop"]);
        if let Err(e) = run_logged(stop, &self.dir.join("pg_ctl-stop.log"), "pg_ctl stop") {
            // Not running at all (failed start) is fine; anything else is worth a line.
            if self.port != 0 {
                eprintln!("xtask: stopping PostgreSQL: {e}");
            }
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop_server();
        if let Err(e) = fs::remove_dir_all(&self.dir) {
            eprintln!("xtask: removing {}: {e}", self.dir.display());
        }
    }
}

/// Creates the `postgres` system user if it does not exist.
fn ensure_postgres_user() -> Result<()> {
    let exists = Command::new("id")
        .arg("postgres")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if exists {
        return Ok(());
    }
    let status = Command::new("useradd")
        .args(["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres"])
        .status()
        .map_err(|e| err!("useradd postgres: {e}"))?;
    if status.success() { Ok(()) } else { Err(err!("useradd postgres failed: {status}")) }
}

/// Runs a command with stdin closed and its output appended to a log file; fails with the
/// log's tail when the command fails.
fn run_logged(mut cmd: Command, log: &Path, what: &str) -> Result<()> {
    let out = File::options().create(true).append(true).open(log)?;
    let status = cmd
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .status()
        .map_err(|e| err!("{what}: cannot run {:?}: {e}", cmd.get_program()))?;
    if status.success() {
        Ok(())
    } else {
        Err(err!("{what} failed ({status}); {}:\n{}", log.display(), tail(log, 20)))
    }
}

/// The last `lines` lines of a file, or a note that it cannot be read.
fn tail(path: &Path, lines: usize) -> String {
    match fs::read_to_string(path) {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("({}: {e})", path.display()),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_version_compares_numerically_and_ignores_other_names() {
        assert_eq!(newest_version(["9.6", "15", "13", "common", ""]), Some("15"));
        assert_eq!(newest_version(["10", "9.6"]), Some("10"));
        assert_eq!(newest_version(["16", "17", "9"]), Some("17"));
        assert_eq!(newest_version(["x", "15beta"]), None);
        assert_eq!(newest_version(std::iter::empty()), None);
    }

    #[test]
    fn parse_version_accepts_dotted_numbers_only() {
        assert_eq!(parse_version("2.10.1"), Some(vec![2, 10, 1]));
        assert_eq!(parse_version("v2.9"), Some(vec![2, 9]));
        assert_eq!(parse_version("15.x"), None);
        assert_eq!(parse_version(""), None);
    }

    #[test]
    fn parse_euid_reads_the_effective_uid() {
        let status = "Name:\tcat\nUid:\t1000\t0\t1000\t1000\nGid:\t0\t0\t0\t0\n";
        assert_eq!(parse_euid(status), Some(0));
        assert_eq!(parse_euid("Name:\tcat\n"), None);
    }

    #[test]
    fn postgres_major_from_version_output() {
        assert_eq!(postgres_major("initdb (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)\n"), "15");
        assert_eq!(postgres_major("initdb (PostgreSQL) 9.6.24"), "9");
    }

    #[test]
    fn free_port_is_bindable_again() {
        let port = free_port().unwrap();
        assert_ne!(port, 0);
        TcpListener::bind(("127.0.0.1", port)).unwrap();
    }

    #[test]
    fn unique_temp_dirs_differ() {
        let a = unique_temp_dir("test").unwrap();
        let b = unique_temp_dir("test").unwrap();
        assert_ne!(a, b);
        fs::remove_dir(a).unwrap();
        fs::remove_dir(b).unwrap();
    }
}
