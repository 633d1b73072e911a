//! What every throwaway server of the tests needs: a free loopback port, a private
//! temporary directory, the programs found on the machine, and commands whose output goes
//! to a log that a failure quotes.
//!
//! Invariant: std only, so `xtask` and every test crate share these without a runtime.

use std::env;
use std::fs::{self, File};
use std::io;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// An `io::Error` carrying `message` (what was being done and why it failed).
pub fn failure(message: impl Into<String>) -> io::Error {
    io::Error::other(message.into())
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
pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// Runs a command with stdin closed and its output appended to a log file; fails with the
/// log's tail when the command fails.
pub fn run_logged(mut cmd: Command, log: &Path, what: &str) -> io::Result<()> {
    let out = File::options().create(true).append(true).open(log)?;
    let status = cmd
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .status()
        .map_err(|e| failure(format!("{what}: cannot run {:?}: {e}", cmd.get_program())))?;
    if status.success() {
        Ok(())
    } else {
        Err(failure(format!("{what} failed ({status}); {}:\n{}", log.display(), tail(log, 20))))
    }
}

/// The last `lines` lines of a file, or a note that it cannot be read.
pub fn tail(path: &Path, lines: usize) -> String {
    match fs::read_to_string(path) {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("({}: {e})", path.display()),
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
