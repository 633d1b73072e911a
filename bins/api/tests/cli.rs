//! The `bc-api` binary as a process: `--secret-key` required outside dev; a taken
//! `--listen` port named; `migrate` applies the schema and refuses one newer than the
//! binary; `token create` prints a token the server then accepts, `token revoke` ends it,
//! `token list` shows it without its secret; `serve` answers and stops cleanly on
//! SIGTERM; `dev` prints its banner and keeps its data across starts; no secret is logged.
//!
//! Invariants: every process is killed on every path; every wait is a bounded count of
//! short polls.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use bc_stack::testing::Scratch;
use sea_orm_migration::sea_orm::ConnectionTrait as _;

const BIN: &str = env!("CARGO_BIN_EXE_bc-api");

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn bc_api(dir: &Scratch, args: &[&str]) -> Output {
    Command::new(BIN).env_clear().current_dir(dir.path()).args(args).output().expect("bc-api runs")
}

fn sqlite(dir: &Scratch) -> String {
    format!("sqlite://{}?mode=rwc", dir.path().join("bc.db").display())
}

const KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Polls `url` until it answers 200 (bounded).
fn wait_healthy(url: &str) -> bool {
    for _ in 0..300 {
        let ok = Command::new("curl")
            .args(["-sf", "-o", "/dev/null", url])
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

#[test]
fn serve_requires_a_secret_key() {
    let dir = Scratch::new("bc-cli-key");
    let out = bc_api(&dir, &["serve", "--database-url", &sqlite(&dir), "--listen", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--secret-key (BC_SECRET_KEY) is required"), "{err}");
}

/// Issue 29, item 8 (SPEC §3): `--policy-file` is validated against the schema at start;
/// a policy naming an action the schema lacks stops the start, naming the file and line.
#[test]
fn a_bad_policy_file_stops_the_start_naming_the_line() {
    let dir = Scratch::new("bc-cli-policy");
    let file = dir.path().join("policies.cedar");
    std::fs::write(
        &file,
        "// operator policies\nforbid(principal, action, resource == LoadBalancer::\"lb_1\");\n\nforbid(principal, action == Action::\"compute:pools:reed\", resource);\n",
    )
    .unwrap();
    let serve = || {
        Command::new(BIN)
            .env_clear()
            .env("BC_SECRET_KEY", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
            .env("BC_DATABASE_URL", sqlite(&dir))
            .args(["serve", "--listen", "127.0.0.1:0", "--policy-file"])
            .arg(&file)
            .output()
            .expect("runs")
    };
    let out = serve();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--policy-file") && err.contains("policies.cedar"), "{err}");
    assert!(err.contains("line 4"), "{err}");
    // A file that does not parse names its line too.
    std::fs::write(&file, "forbid(principal, action, resource);\npermit(principal,\n").unwrap();
    let out = serve();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2") || err.contains("line 3"), "{err}");
}

#[test]
fn a_bad_secret_key_is_named_and_not_echoed() {
    let dir = Scratch::new("bc-cli-badkey");
    let out = Command::new(BIN)
        .env_clear()
        .env("BC_SECRET_KEY", "not-base64-secret-value")
        .env("BC_DATABASE_URL", sqlite(&dir))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--secret-key"), "{err}");
    assert!(!err.contains("not-base64-secret-value"), "{err}");
}

#[test]
fn a_taken_port_is_named() {
    let dir = Scratch::new("bc-cli-port");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    for args in [
        vec!["serve", "--database-url", &sqlite(&dir), "--secret-key", KEY, "--listen", &addr],
        vec!["dev", "--dir", ".bc-dev", "--listen", &addr],
    ] {
        let out = bc_api(&dir, &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("cannot listen on {addr}: the address is already in use")),
            "{err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_applies_and_refuses_a_newer_schema() {
    let dir = Scratch::new("bc-cli-migrate");
    let url = sqlite(&dir);
    let out = bc_api(&dir, &["migrate", "--database-url", &url]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&bc_stack::db::newest_migration()));
    // A newer binary's migration recorded in the database.
    let store = bc_store::SqlStore::connect_unmigrated(&url).await.expect("open");
    store
        .connection()
        .execute_unprepared("INSERT INTO seaql_migrations (version, applied_at) VALUES ('m20991231_000001_future', 0)")
        .await
        .expect("insert");
    let _ = store.close().await;
    for args in [
        vec!["migrate", "--database-url", url.as_str()],
        vec![
            "serve",
            "--database-url",
            url.as_str(),
            "--secret-key",
            KEY,
            "--listen",
            "127.0.0.1:0",
        ],
    ] {
        let out = bc_api(&dir, &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("the database schema is newer than this binary"), "{err}");
        assert!(err.contains("m20991231_000001_future"), "{err}");
    }
}

/// Issue 20, item 8 (SPEC §9): `serve` warns at start when the public URL bcd calls is
/// plain http:// and not loopback — and not when it is loopback (dev, tests).
#[test]
fn serve_warns_of_a_plain_http_public_url_off_loopback() {
    let dir = Scratch::new("bc-cli-public-url");
    let url = sqlite(&dir);
    let warning = "is plain http:// and not loopback";
    for (public, warned) in [(Some("http://203.0.113.5:8080"), true), (None, false)] {
        let listen = format!("127.0.0.1:{}", free_port());
        let log = dir.path().join("serve-url.log");
        let mut command = Command::new(BIN);
        command
            .env_clear()
            .env("BC_DATABASE_URL", &url)
            .env("BC_SECRET_KEY", KEY)
            .env("BC_LISTEN", &listen)
            .arg("serve")
            .stderr(Stdio::from(std::fs::File::create(&log).unwrap()));
        if let Some(public) = public {
            command.env("BC_PUBLIC_URL", public);
        }
        let server = Running(command.spawn().expect("serve starts"));
        assert!(wait_healthy(&format!("http://{listen}/healthz")), "serve answers");
        drop(server);
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(text.contains(warning), warned, "{public:?}: {text}");
    }
}

#[test]
fn tokens_made_by_the_cli_work_until_revoked_and_serve_stops_on_sigterm() {
    let dir = Scratch::new("bc-cli-token");
    let url = sqlite(&dir);
    let made = bc_api(
        &dir,
        &["token", "create", "--database-url", &url, "--tenant", "acme", "--role", "viewer"],
    );
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let token = String::from_utf8_lossy(&made.stdout).trim().to_owned();
    assert!(token.starts_with("bc_"), "{token}");
    let note = String::from_utf8_lossy(&made.stderr).into_owned();
    let id =
        note.split_whitespace().find(|w| w.starts_with("tok_")).expect("the token id").to_owned();
    let bad = bc_api(
        &dir,
        &["token", "create", "--database-url", &url, "--tenant", "acme", "--role", "owner"],
    );
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--role \"owner\""));

    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let log = dir.path().join("serve.log");
    let mut server = Running(
        Command::new(BIN)
            .env_clear()
            .env("BC_DATABASE_URL", &url)
            .env("BC_SECRET_KEY", KEY)
            .env("BC_LISTEN", &listen)
            .env("BC_LOG_FORMAT", "json")
            .arg("serve")
            .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
            .spawn()
            .expect("serve starts"),
    );
    let base = format!("http://{listen}");
    assert!(wait_healthy(&format!("{base}/healthz")), "serve answers");
    // pools.list through bc-client (no retries): the status the server answered.
    let list = |token: &str| {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let client = bc_stack::testing::client(&base, token, Duration::from_secs(10));
            let body = serde_json::json!({ "tenantId": "acme" });
            bc_stack::testing::post(&client, "pools.list", &body).await.expect("an answer").0
        })
    };
    assert_eq!(list(&token), 200);
    let revoked = bc_api(&dir, &["token", "revoke", "--database-url", &url, &id]);
    assert!(revoked.status.success(), "{}", String::from_utf8_lossy(&revoked.stderr));
    assert_eq!(list(&token), 401);
    // `token list` names the token, its state and grant, and never prints the secret.
    let listed = bc_api(&dir, &["token", "list", "--database-url", &url]);
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    let line = listed.lines().find(|l| l.starts_with(&id)).expect("the token is listed");
    assert!(line.contains("revoked") && line.contains("viewer@compute-tenant/acme"), "{line}");
    assert!(!listed.contains(&token), "token list printed a secret");

    Command::new("kill").args(["-TERM", &server.0.id().to_string()]).status().expect("kill");
    let mut code = None;
    for _ in 0..300 {
        if let Some(s) = server.0.try_wait().expect("status") {
            code = s.code();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(code, Some(0), "serve exits 0 on SIGTERM");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("shutting down"), "{logged}");
    for secret in [token.as_str(), KEY] {
        assert!(!logged.contains(secret), "a secret was logged");
    }
}

#[test]
fn dev_prints_its_banner_and_keeps_its_data_across_starts() {
    let dir = Scratch::new("bc-cli-dev");
    let start = || {
        let port = free_port();
        let mut child = Running(
            Command::new(BIN)
                .env_clear()
                .current_dir(dir.path())
                .args(["dev", "--listen", &format!("127.0.0.1:{port}")])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("dev starts"),
        );
        let stdout = child.0.stdout.take().unwrap();
        let banner: Vec<String> = BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .take_while(|l| !l.starts_with("Try it"))
            .collect();
        (child, banner.join("\n"))
    };
    let (first, banner) = start();
    assert!(banner.contains("OpenAPI"), "{banner}");
    let token = std::fs::read_to_string(dir.path().join(".bc-dev/token")).unwrap();
    assert!(banner.contains(token.trim()), "{banner}");
    let account =
        banner.lines().find(|l| l.trim_start().starts_with("account")).unwrap().to_owned();
    let sim: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join(".bc-dev/simulator.json")).unwrap(),
    )
    .unwrap();
    assert!(sim["digitaloceanApiUrl"].as_str().unwrap().starts_with("http://127.0.0.1:"));
    assert_eq!(sim["token"], "dop_v1_simulated");
    drop(first);
    let (second, again) = start();
    assert!(again.contains(token.trim()), "the token is kept:\n{again}");
    let account_again =
        again.lines().find(|l| l.trim_start().starts_with("account")).unwrap().to_owned();
    assert_eq!(account, account_again, "the account is kept");
    drop(second);
}
