//! Test and benchmark support: the figures every benchmark emits ([`bench`]), the URLs
//! of the throwaway PostgreSQL and NATS that `cargo xtask test` starts, a crate's module
//! graph and its circles ([`layers`]), unique database
//! names, and the throwaway PostgreSQL itself ([`postgres`], on the helpers of
//! [`server`]), which xtask starts for everyone and a fault test starts for itself.
//!
//! `cargo xtask test` exports `BC_TEST_POSTGRES_URL` and `BC_TEST_NATS_URL` when it could
//! start the servers. A test asks for a URL and returns early when it gets `None`:
//!
//! ```
//! fn my_postgres_test() {
//!     let Some(url) = bc_testkit::postgres_url() else { return };
//!     let db = bc_testkit::with_database(&url, &bc_testkit::fresh_database_name("store"));
//!     // CREATE DATABASE through `url`, then use `db`.
//!     # let _ = db;
//! }
//! # my_postgres_test();
//! ```
//!
//! When a URL is missing and services are required (`BC_REQUIRE_SERVICES` set, as by
//! `cargo xtask test --require-services`, or `CI=true`), the helpers panic instead, so a
//! CI run cannot go green without touching the services.

pub mod bench;
pub mod layers;
pub mod postgres;
pub mod server;

use std::env;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Environment variable holding the PostgreSQL URL (database `bc_test`).
pub const POSTGRES_URL_VAR: &str = "BC_TEST_POSTGRES_URL";
/// Environment variable holding the NATS URL.
pub const NATS_URL_VAR: &str = "BC_TEST_NATS_URL";
/// Environment variable that makes a missing service a failure.
pub const REQUIRE_SERVICES_VAR: &str = "BC_REQUIRE_SERVICES";

/// The PostgreSQL URL from `BC_TEST_POSTGRES_URL`, or `None` (with a "skipped" line on
/// stderr) when unset.
///
/// # Panics
///
/// When the variable is unset and services are required (see [`services_required`]).
pub fn postgres_url() -> Option<String> {
    resolve(POSTGRES_URL_VAR, "PostgreSQL", env_value(POSTGRES_URL_VAR), services_required())
}

/// The NATS URL from `BC_TEST_NATS_URL`, or `None` (with a "skipped" line on stderr) when
/// unset.
///
/// # Panics
///
/// When the variable is unset and services are required (see [`services_required`]).
pub fn nats_url() -> Option<String> {
    resolve(NATS_URL_VAR, "NATS", env_value(NATS_URL_VAR), services_required())
}

/// Tells whether missing services are failures: `BC_REQUIRE_SERVICES` is set (to anything
/// but empty, `0` or `false`), or `CI` is `true`/`1`.
pub fn services_required() -> bool {
    required_by(env_value(REQUIRE_SERVICES_VAR).as_deref(), env_value("CI").as_deref())
}

/// A database name unique to this process and call: `<prefix>_<pid>_<counter>_<time>`,
/// lowercase, at most 63 bytes (PostgreSQL's identifier limit), safe to use unquoted.
pub fn fresh_database_name(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let mut clean: String = prefix
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' })
        .take(24)
        .collect();
    if !clean.starts_with(|c: char| c.is_ascii_lowercase() || c == '_') {
        clean.insert_str(0, "db");
    }
    format!("{clean}_{}_{n}_{}", std::process::id(), base36(nanos))
}

/// Replaces the database (the path) of a PostgreSQL URL, keeping user, host, port and
/// query: `with_database("postgres://u@h:1/a?x=1", "b")` is `postgres://u@h:1/b?x=1`.
pub fn with_database(url: &str, name: &str) -> String {
    let authority_start = url.find("://").map(|i| i + 3).unwrap_or(0);
    let after = &url[authority_start..];
    let authority_len = after.find(['/', '?', '#']).unwrap_or(after.len());
    let (head, rest) = url.split_at(authority_start + authority_len);
    let suffix = rest.find(['?', '#']).map(|i| &rest[i..]).unwrap_or("");
    format!("{head}/{name}{suffix}")
}

/// Reads an environment variable, treating empty (or whitespace) as unset.
fn env_value(var: &str) -> Option<String> {
    env::var(var).ok().filter(|v| !v.trim().is_empty())
}

/// Decides the requirement from the values of `BC_REQUIRE_SERVICES` and `CI`.
fn required_by(require: Option<&str>, ci: Option<&str>) -> bool {
    let truthy = |v: &str| !matches!(v.trim().to_ascii_lowercase().as_str(), "" | "0" | "false");
    let ci_on = |v: &str| matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "1");
    require.is_some_and(truthy) || ci.is_some_and(ci_on)
}

/// Returns the URL, panics if it is missing but required, or reports the skip.
fn resolve(var: &str, service: &str, value: Option<String>, required: bool) -> Option<String> {
    match value {
        Some(url) => Some(url),
        None if required => panic!(
            "{var} not set, but {service} is required ({REQUIRE_SERVICES_VAR} or CI=true): \
             run the tests through `cargo xtask test`, which starts {service}, and install it \
             if xtask says it was not found"
        ),
        None => {
            eprintln!("skipped: {var} not set (run through cargo xtask test)");
            None
        }
    }
}

/// Formats a number in base 36 (lowercase), to keep names short (also a valid
/// DigitalOcean and Kubernetes name part).
pub fn base36(mut n: u128) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::net::{TcpStream, ToSocketAddrs};
    use std::time::Duration;

    #[test]
    fn with_database_replaces_only_the_path() {
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:5432/bc_test", "x1"),
            "postgres://postgres@127.0.0.1:5432/x1"
        );
        assert_eq!(with_database("postgres://h:1", "d"), "postgres://h:1/d");
        assert_eq!(with_database("postgres://h:1/", "d"), "postgres://h:1/d");
        assert_eq!(
            with_database("postgres://u:p@h/a?sslmode=disable#f", "b"),
            "postgres://u:p@h/b?sslmode=disable#f"
        );
        assert_eq!(with_database("postgres://h?x=1", "b"), "postgres://h/b?x=1");
    }

    #[test]
    fn fresh_database_names_are_unique_and_valid_identifiers() {
        let names: Vec<String> =
            (0..100).map(|_| fresh_database_name("Store-Tests.with a very long prefix")).collect();
        let unique: HashSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), names.len());
        for name in &names {
            assert!(name.len() <= 63, "{name}");
            assert!(name.starts_with("store_tests_with_a_very_"), "{name}");
            assert!(name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'));
        }
        assert!(fresh_database_name("9lives").starts_with("db9lives_"));
    }

    #[test]
    fn requirement_comes_from_either_variable() {
        assert!(!required_by(None, None));
        assert!(required_by(Some("1"), None));
        assert!(!required_by(Some("0"), Some("false")));
        assert!(required_by(None, Some("true")));
        assert!(!required_by(None, Some("")));
    }

    #[test]
    fn resolve_skips_or_returns() {
        assert_eq!(resolve("V", "S", None, false), None);
        assert_eq!(resolve("V", "S", Some("u".into()), true), Some("u".into()));
    }

    #[test]
    #[should_panic(expected = "BC_TEST_NATS_URL not set, but NATS is required")]
    fn resolve_panics_when_required() {
        resolve(NATS_URL_VAR, "NATS", None, true);
    }

    #[test]
    fn base36_round_numbers() {
        assert_eq!(base36(0), "0");
        assert_eq!(base36(35), "z");
        assert_eq!(base36(36), "10");
    }

    /// Connects to the host and port of a service URL, proving the server is listening.
    fn assert_reachable(url: &str) {
        let authority = url.split("://").nth(1).unwrap_or(url);
        let authority = authority.split(['/', '?']).next().unwrap_or(authority);
        let host_port = authority.rsplit('@').next().unwrap_or(authority);
        let addr = host_port.to_socket_addrs().unwrap().next().unwrap();
        TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("{url} is not reachable: {e}"));
    }

    #[test]
    fn exported_postgres_is_reachable() {
        let Some(url) = postgres_url() else { return };
        assert!(url.starts_with("postgres://"), "{url}");
        assert_reachable(&url);
    }

    #[test]
    fn exported_nats_is_reachable() {
        let Some(url) = nats_url() else { return };
        assert!(url.starts_with("nats://"), "{url}");
        assert_reachable(&url);
    }
}
