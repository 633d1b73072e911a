//! The `bc` binary against a dev stack (SQLite, the simulated cloud, in this process), run
//! as a user runs it: in the directory holding `.bc-dev/`, with nothing configured.
//!
//! Every wait is bounded (a count of reads of the child's output, or `bc wait`'s own
//! timeout); every child is killed and every stack stopped at the end of its test.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use bc_stack::dev::DevStack;
use bc_stack::testing::{self, Backend, Scratch};
use bc_stack::wire::{self, ReconcileOptions};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const BIN: &str = env!("CARGO_BIN_EXE_bc");

/// `bc args…` in `dir` with a clean environment (no BC_*, HOME in `dir`).
fn bc_in(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("BC_API_URL")
        .env_remove("BC_TOKEN")
        .env_remove("BC_TENANT")
        .env("NO_COLOR", "1");
    cmd
}

/// Runs `bc args…` in `dir` to its end (off the runtime's threads).
async fn bc(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = bc_in(dir, args);
    tokio::task::spawn_blocking(move || cmd.output().expect("bc runs")).await.expect("join")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `bc args…` and wants it to succeed; its standard output.
async fn ok(dir: &Path, args: &[&str]) -> String {
    let out = bc(dir, args).await;
    assert!(
        out.status.success(),
        "bc {args:?} failed ({:?}):\n{}\n{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// A dev stack in a scratch directory (with or without its reconcilers).
async fn stack(reconcile: bool) -> (Scratch, DevStack) {
    let scratch = Scratch::new("bc-cli");
    let mut options = testing::options(Backend::Sqlite, scratch.path()).await.expect("sqlite");
    options.reconcile = reconcile;
    let stack = DevStack::start(options).await.expect("dev stack");
    (scratch, stack)
}

const FLAVORS: &str = r#"[{"name":"cpu","size":"s-2vcpu-4gb","count":1}]"#;

fn substrate_policy(account: &str) -> String {
    format!(
        r#"{{"substrate":{{"kind":"kubernetes","account":"{account}","cluster":{{"create":{{"region":"nyc1"}}}}}},"flavors":{FLAVORS}}}"#
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_get_and_a_list_in_every_output_format() {
    let (scratch, stack) = stack(false).await;
    let dir = scratch.path();
    let policy = format!(r#"{{"flavors":{FLAVORS}}}"#);
    let made: Value = serde_json::from_str(
        &ok(dir, &["pools", "create", "--name", "web", "--policy", &policy, "-o", "json"]).await,
    )
    .expect("json");
    let id = made["poolId"].as_str().expect("an id").to_owned();
    assert_eq!(made["name"], "web");

    // get: json is the answer, yaml the same document, table a header and a row, id the id.
    let json: Value =
        serde_json::from_str(&ok(dir, &["pools", "get", &id, "-o", "json"]).await).expect("json");
    assert_eq!(json, made);
    let yaml: Value =
        serde_saphyr::from_str(&ok(dir, &["pools", "get", &id, "-o", "yaml"]).await).expect("yaml");
    assert_eq!(yaml, made);
    let table = ok(dir, &["pools", "get", &id]).await;
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 2, "{table}");
    assert!(lines[0].starts_with("POOL") && lines[0].contains("STATE"), "{table}");
    assert!(lines[1].starts_with(&id) && lines[1].contains("web") && lines[1].contains("active"));
    assert_eq!(ok(dir, &["pools", "get", &id, "-o", "id"]).await, format!("{id}\n"));

    // list: every page joined (a page size of 1 makes two pages of two pools).
    ok(dir, &["pools", "create", "--name", "api", "--policy", &policy]).await;
    let list: Value =
        serde_json::from_str(&ok(dir, &["pools", "list", "--page-size", "1", "-o", "json"]).await)
            .expect("json");
    let names: Vec<&str> = list["pools"]
        .as_array()
        .expect("pools")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["web", "api"], "{list}");
    assert!(list.get("nextPageToken").is_none());
    let yaml: Value =
        serde_saphyr::from_str(&ok(dir, &["pools", "list", "-o", "yaml"]).await).expect("yaml");
    assert_eq!(yaml, list);
    let table = ok(dir, &["pools", "list"]).await;
    assert_eq!(table.lines().count(), 3, "a header and two rows:\n{table}");
    let ids = ok(dir, &["pools", "list", "-o", "id"]).await;
    assert_eq!(ids.lines().count(), 2);
    assert!(ids.starts_with(&id));
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_sees_a_substrate_go_from_pending_to_ready() {
    // No reconciler yet: the substrate stays pending until this test starts one.
    let (scratch, stack) = stack(false).await;
    let dir = scratch.path();
    let policy = substrate_policy(&stack.account_id);
    let pool = ok(dir, &["pools", "create", "--name", "watched", "--policy", &policy, "-o", "id"])
        .await
        .trim()
        .to_owned();
    let mut child = bc_in(dir, &["substrates", "get", &pool, "--watch", "-o", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("bc runs");
    let stdout = child.stdout.take().expect("piped");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let state = |line: &str| -> String {
        let v: Value = serde_json::from_str(line).expect("one JSON document per line");
        v["state"].as_str().expect("a state").to_owned()
    };
    let first = rx.recv().await.expect("the first print");
    assert_eq!(state(&first), "pending");

    let cancel = CancellationToken::new();
    let mut options = ReconcileOptions::new("bc-test", &stack.api_url, "bc-sim/bcd:dev");
    // At the simulator's pace, as dev mode's own reconcilers (not 30 s per cluster look).
    options.wait_max = Some(bc_stack::dev::SIM_WAIT_MAX);
    let runtime = wire::runtime(&stack.adapters, &options, stack.work.clone()).expect("runtime");
    let running = tokio::spawn({
        let (runtime, cancel) = (Arc::clone(&runtime), cancel.clone());
        async move { runtime.run(cancel).await }
    });
    let mut seen = vec![state(&first)];
    // Bounded: a few hundred reprints at most, each after a change or a 2 s poll.
    for _ in 0..600 {
        let line = tokio::time::timeout(std::time::Duration::from_secs(120), rx.recv())
            .await
            .expect("bc prints within two minutes")
            .expect("bc is still running");
        seen.push(state(&line));
        if seen.last().map(String::as_str) == Some("ready") {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    cancel.cancel();
    let _ = running.await;
    assert_eq!(seen.first().map(String::as_str), Some("pending"), "{seen:?}");
    assert_eq!(seen.last().map(String::as_str), Some("ready"), "{seen:?}");
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn wait_reaches_ready_and_times_out_with_exit_3() {
    let (scratch, stack) = stack(true).await;
    let dir = scratch.path();
    let policy = substrate_policy(&stack.account_id);
    let pool = ok(dir, &["pools", "create", "--name", "waited", "--policy", &policy, "-o", "id"])
        .await
        .trim()
        .to_owned();
    let out = bc(
        dir,
        &["wait", "substrate", &pool, "--for", "state=ready", "--timeout", "5m", "-o", "json"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let reached: Value = serde_json::from_str(&text(&out.stdout)).expect("the object as JSON");
    assert_eq!(reached["state"], "ready");
    // Plain lines, not a spinner, when standard error is not a terminal.
    let progress = text(&out.stderr);
    assert!(progress.lines().all(|l| l.starts_with("substrate ")), "{progress}");
    assert!(!progress.contains('\r'));

    let out =
        bc(dir, &["wait", "substrate", &pool, "--for", "state=deleted", "--timeout", "1s"]).await;
    assert_eq!(out.status.code(), Some(3));
    let err = text(&out.stderr);
    assert!(err.contains("timed out after 1s") && err.contains("state=ready"), "{err}");

    let out = bc(dir, &["wait", "substrate", &pool, "--for", "state", "--timeout", "1s"]).await;
    assert_eq!(out.status.code(), Some(2), "KEY=VALUE is a usage error");
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_are_one_line_naming_the_field_with_an_exit_code_by_class() {
    let (scratch, stack) = stack(false).await;
    let dir = scratch.path();

    // A token passed without its URL is refused (one source for both), with its URL it is sent.
    let out = bc(dir, &["--token", "bc_not_a_token", "pools", "list"]).await;
    assert_eq!(out.status.code(), Some(2), "a token without its URL: {}", text(&out.stderr));
    let url = stack.api_url.as_str();
    let out = bc(
        dir,
        &["--api-url", url, "--token", "bc_not_a_token", "--tenant", "dev", "pools", "list"],
    )
    .await;
    assert_eq!(out.status.code(), Some(4), "unauthenticated");
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("bc: UNAUTHENTICATED: "), "{err}");
    assert!(!err.contains("bc_not_a_token"), "the token is never printed");

    let out =
        bc(dir, &["pools", "create", "--name", "Not A Name", "--policy", r#"{"flavors":[]}"#])
            .await;
    assert_eq!(out.status.code(), Some(2), "invalid input");
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("bc: INVALID_ARGUMENT: ") && err.contains("(field name)"), "{err}");

    let out = bc(dir, &["pools", "get", "pool_01jq3k5v9x8y7z6w5v4t3s2r1q"]).await;
    assert_eq!(out.status.code(), Some(5), "not found");

    let out = bc(dir, &["pools", "frobnicate"]).await;
    assert_eq!(out.status.code(), Some(2), "an unknown command is a usage error");

    let nowhere = Scratch::new("bc-cli-nowhere");
    let out = bc(nowhere.path(), &["pools", "list"]).await;
    assert_eq!(out.status.code(), Some(2), "no configuration");
    assert!(text(&out.stderr).contains("no API URL"), "{}", text(&out.stderr));
    let out = bc(
        nowhere.path(),
        &["--api-url", "http://127.0.0.1:9", "--token", "t", "--tenant", "dev", "pools", "list"],
    )
    .await;
    assert_eq!(out.status.code(), Some(8), "unreachable: {}", text(&out.stderr));
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn login_writes_a_private_config_that_later_commands_use() {
    let (scratch, stack) = stack(false).await;
    let elsewhere = Scratch::new("bc-cli-login");
    let home = elsewhere.path();
    let out = bc(
        home,
        &["login", "--api-url", &stack.api_url, "--token", &stack.token, "--tenant", "dev"],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!text(&out.stdout).contains(&stack.token), "login never prints the token");
    let path = home.join(".config/bc/config.toml");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).expect("written").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    // Outside the dev directory, the saved configuration is what bc calls with.
    // The dev stack's two simulated accounts, DigitalOcean's and GKE's.
    let accounts = ok(home, &["accounts", "list", "-o", "id"]).await;
    let mut listed: Vec<&str> = accounts.lines().collect();
    listed.sort_unstable();
    let mut made = vec![stack.account_id.as_str(), stack.gke_account_id.as_str()];
    made.sort_unstable();
    assert_eq!(listed, made);
    drop(scratch);
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn events_tail_follows_the_stream() {
    let (scratch, stack) = stack(false).await;
    let dir = scratch.path();
    let policy = substrate_policy(&stack.account_id);
    let pool = ok(dir, &["pools", "create", "--name", "tailed", "--policy", &policy, "-o", "id"])
        .await
        .trim()
        .to_owned();
    let subject = format!("compute.pools.{pool}");
    let out = ok(dir, &["events", "tail", "--subject", &subject, "-n", "1", "-o", "json"]).await;
    let event: Value = serde_json::from_str(out.trim()).expect("one event per line");
    assert_eq!(event["subject"], json!(subject));
    assert_eq!(event["type"], "kubernetes.substrate.pending");
    stack.stop().await;
}

#[tokio::test]
async fn completions_are_generated_for_each_shell() {
    let dir = Scratch::new("bc-cli-completions");
    for shell in ["bash", "zsh", "fish"] {
        let out = ok(dir.path(), &["completions", shell]).await;
        assert!(out.contains("substrates") && out.contains("wait"), "{shell}:\n{out}");
    }
    let out = bc(dir.path(), &["completions", "tcsh"]).await;
    assert_eq!(out.status.code(), Some(2));
}

/// A test that fails when a method of the server's registry has no command: each one is
/// `bc <resource> <method>`, its help the method's description.
#[test]
fn every_method_has_a_command() {
    let cli = bc_cli::cli();
    for method in bc_api::registry().methods() {
        let info = &method.info;
        let resource = bc_cli::commands::resource_command(info.resource);
        let cmd = cli
            .find_subcommand(&resource)
            .and_then(|r| r.find_subcommand(bc_cli::commands::kebab(info.name)))
            .unwrap_or_else(|| panic!("{} has no command", info.id()));
        let help = cmd.get_long_about().map(ToString::to_string).unwrap_or_default();
        assert!(help.contains(&info.description.replace('`', "")), "{}: {help}", info.id());
    }
}
