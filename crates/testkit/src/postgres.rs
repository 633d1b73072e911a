//! A throwaway PostgreSQL on loopback: `initdb` in a temporary directory, `pg_ctl start`
//! on a free port, a `bc_test` database; stopped and removed on drop. `cargo xtask test`
//! and `cargo xtask bench` start the shared one through this; a fault test starts its own
//! and stops and restarts it on the same port.
//!
//! Invariant: a [`Throwaway`] that was started is stopped (bounded wait) and its directory
//! removed when dropped, so early returns and panics clean up too; it listens on
//! 127.0.0.1 only.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::server::{
    failure, free_port, is_executable, newest_version, run_logged, running_as_root, tail,
    unique_temp_dir, which,
};

/// Name of the database created in the throwaway PostgreSQL.
pub const TEST_DATABASE: &str = "bc_test";
/// How many ports to try if the server fails to start (another process may take one).
const START_ATTEMPTS: usize = 3;
/// Seconds `pg_ctl` waits for a start or a stop to complete.
const PG_CTL_WAIT_SECS: &str = "30";

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
pub fn find() -> Option<PostgresBin> {
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
        .map(|o| major_version(&String::from_utf8_lossy(&o.stdout)))
        .unwrap_or_default();
    Some(PostgresBin { initdb, pg_ctl, psql, major })
}

/// Extracts the major version from `initdb --version` output
/// ("initdb (PostgreSQL) 15.18 (Debian ...)" → "15").
pub fn major_version(version_output: &str) -> String {
    version_output
        .split_whitespace()
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))
        .map(|w| w.split('.').next().unwrap_or(w).to_string())
        .unwrap_or_else(|| "(unknown version)".into())
}

/// How `pg_ctl stop` ends the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// `-m fast`: sessions are terminated (SQLSTATE 57P01), then a clean shutdown.
    Fast,
    /// `-m immediate`: every server process quits at once, as in a crash; the next start
    /// recovers from the write-ahead log.
    Immediate,
}

/// A throwaway PostgreSQL server; stopped and its directory removed on drop.
#[derive(Debug)]
pub struct Throwaway {
    /// The programs used.
    pub bin: PostgresBin,
    /// The port it listens on, at 127.0.0.1 (the same across [`Throwaway::start_again`]).
    pub port: u16,
    /// Its temporary directory (data, logs, unix socket).
    pub dir: PathBuf,
    /// Whether it runs as the `postgres` user through `runuser` (we are root).
    as_postgres_user: bool,
    /// Whether a commit waits for its WAL flush (see [`Throwaway::start_durable`]).
    durable: bool,
    /// Whether the server was started (and needs stopping).
    running: bool,
}

impl Throwaway {
    /// A server tuned for test speed: no fsync, asynchronous commit. Fine while the server
    /// is only ever stopped cleanly (the shared server of `cargo xtask test`).
    pub fn start(bin: PostgresBin) -> io::Result<Throwaway> {
        Self::start_with(bin, false)
    }

    /// A server whose acknowledged commits survive an [`Shutdown::Immediate`] stop: the
    /// commit waits for its WAL write (`synchronous_commit` on). `fsync` stays off: the
    /// operating system keeps what was written, only a machine crash would lose it.
    pub fn start_durable(bin: PostgresBin) -> io::Result<Throwaway> {
        Self::start_with(bin, true)
    }

    fn start_with(bin: PostgresBin, durable: bool) -> io::Result<Throwaway> {
        let as_postgres_user = running_as_root();
        if as_postgres_user {
            ensure_postgres_user()?;
        }
        let dir = unique_temp_dir("pg")?;
        let mut pg = Throwaway { bin, port: 0, dir, as_postgres_user, durable, running: false };
        if as_postgres_user {
            let status = Command::new("chown")
                .arg("postgres:")
                .arg(&pg.dir)
                .status()
                .map_err(|e| failure(format!("chown: {e}")))?;
            if !status.success() {
                return Err(failure(format!("chown postgres: {} failed", pg.dir.display())));
            }
        }
        let mut initdb = pg.command(&pg.bin.initdb);
        initdb.arg("-D").arg(pg.data()).args([
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-locale",
            "--no-sync",
        ]);
        run_logged(initdb, &pg.dir.join("initdb.log"), "initdb")?;

        let mut last_error = None;
        for _ in 0..START_ATTEMPTS {
            pg.port = free_port()?;
            match pg.start_again() {
                Ok(()) => {
                    last_error = None;
                    break;
                }
                Err(e) => last_error = Some(e),
            }
        }
        if let Some(e) = last_error {
            pg.port = 0;
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

    /// Whether the server is running (started and not stopped since).
    pub fn is_running(&self) -> bool {
        self.running
    }

    /// Stops the server (bounded wait); a no-op when it is not running.
    pub fn stop(&mut self, mode: Shutdown) -> io::Result<()> {
        if !self.running {
            return Ok(());
        }
        self.running = false;
        let mode = match mode {
            Shutdown::Fast => "fast",
            Shutdown::Immediate => "immediate",
        };
        let mut stop = self.command(&self.bin.pg_ctl);
        stop.arg("-D").arg(self.data()).args(["-m", mode, "-w", "-t", PG_CTL_WAIT_SECS, "stop"]);
        run_logged(stop, &self.dir.join("pg_ctl-stop.log"), "pg_ctl stop")
    }

    /// Starts the (stopped) server again on the same port and data directory, waiting
    /// (bounded) until it accepts connections; a no-op when it is running.
    pub fn start_again(&mut self) -> io::Result<()> {
        if self.running {
            return Ok(());
        }
        let mut options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c fsync=off -c full_page_writes=off \
             -c max_connections=300",
            self.port,
            self.dir.display()
        );
        if !self.durable {
            options.push_str(" -c synchronous_commit=off");
        }
        let mut start = self.command(&self.bin.pg_ctl);
        start.arg("-D").arg(self.data()).arg("-l").arg(self.dir.join("server.log")).args([
            "-w",
            "-t",
            PG_CTL_WAIT_SECS,
            "-o",
            &options,
            "start",
        ]);
        // pg_ctl may leave a server behind even when it reports failure: always try to stop.
        self.running = true;
        match run_logged(start, &self.dir.join("pg_ctl.log"), "pg_ctl start") {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = self.stop(Shutdown::Fast);
                let log = tail(&self.dir.join("server.log"), 20);
                Err(failure(format!("{e}\nserver.log:\n{log}")))
            }
        }
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
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
}

impl Drop for Throwaway {
    fn drop(&mut self) {
        if let Err(e) = self.stop(Shutdown::Fast) {
            eprintln!("stopping PostgreSQL: {e}");
        }
        if let Err(e) = fs::remove_dir_all(&self.dir) {
            eprintln!("removing {}: {e}", self.dir.display());
        }
    }
}

/// Creates the `postgres` system user if it does not exist.
fn ensure_postgres_user() -> io::Result<()> {
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
        .map_err(|e| failure(format!("useradd postgres: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(failure(format!("useradd postgres failed: {status}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn major_version_from_version_output() {
        assert_eq!(major_version("initdb (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)\n"), "15");
        assert_eq!(major_version("initdb (PostgreSQL) 9.6.24"), "9");
    }
}
