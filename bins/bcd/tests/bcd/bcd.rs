//! The `bcd` binary as a process: a missing variable is named and exits 2, and so is a
//! plain http:// server URL without BCD_INSECURE_HTTP=1; SIGTERM stops a running agent
//! cleanly (exit 0) while it retries an unreachable server.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_bcd");

#[test]
fn a_missing_variable_is_named_and_exits_2() {
    let out = Command::new(BIN)
        .env_clear()
        .env("BCD_SERVER_URL", "http://127.0.0.1:1")
        .env("NODE_NAME", "n1")
        .output()
        .expect("bcd runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("BCD_JOIN_TOKEN is not set"), "{err}");
}

/// Issue 20, item 8 (SPEC §9): the join token would travel in clear.
#[test]
fn a_plain_http_server_url_is_refused_without_insecure_http() {
    let mut child = Command::new(BIN)
        .env_clear()
        .env("BCD_SERVER_URL", "http://203.0.113.9:8080")
        .env("BCD_JOIN_TOKEN", "bcj_never-logged")
        .env("NODE_NAME", "n1")
        .stderr(Stdio::piped())
        .spawn()
        .expect("bcd starts");
    // Bounded: an agent that accepted the URL would retry it for ever.
    let deadline = Instant::now() + Duration::from_secs(20);
    let exit = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().expect("bcd's output");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(exit.and_then(|s| s.code()), Some(2), "bcd took the URL: {err}");
    assert!(err.contains("plain http://") && err.contains("BCD_INSECURE_HTTP=1"), "{err}");
    assert!(!err.contains("bcj_never-logged"), "{err}");
}

#[test]
fn sigterm_stops_an_agent_that_is_retrying() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let mut child = Command::new(BIN)
        .env_clear()
        .env("BCD_SERVER_URL", format!("http://{free}"))
        .env("BCD_INSECURE_HTTP", "1")
        .env("BCD_JOIN_TOKEN", "bcj_never-logged")
        .env("NODE_NAME", "n1")
        .env("BC_LOG_FORMAT", "json")
        .stderr(Stdio::piped())
        .spawn()
        .expect("bcd starts");
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    // Wait (bounded by the reader: the child ends when killed below at the latest) for
    // the first retry, so the signal arrives while the loop runs.
    let first = lines.next().expect("a log line").unwrap();
    assert!(first.contains("join failed; retrying"), "{first}");
    assert!(!first.contains("bcj_never-logged"));
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let exit = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "bcd did not stop after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(exit.code(), Some(0));
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(rest.iter().any(|l| l.contains("stopping")), "{rest:?}");
    assert!(!rest.iter().any(|l| l.contains("bcj_never-logged")));
}
