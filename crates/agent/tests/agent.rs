//! The agent loop against a loopback server speaking the agent methods' wire (the
//! `bc_domain::agent` types and SPEC §2 error bodies), with a recording [`Pause`] so no
//! test sleeps: join, heartbeat on the server's interval, retries with backoff, rejoin
//! after a refused credential, a refused join token, shutdown.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use bc_agent::{AgentClient, AgentConfig, AgentState, Backoff, ConfigError, Pause, RunError, run};
use bc_domain::agent::{HEARTBEAT_PATH, HeartbeatResponse, JOIN_PATH, JoinRequest, JoinResponse};
use bc_domain::id::{NodeId, PoolId};
use bc_domain::model::SecretString;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "bcj_join-token-secret";
/// What the kubelet wrote into the pod's projected token file.
const SA_TOKEN: &str = "eyJhbGciOiJFUzI1NiJ9.projected.token";
const NODE_ID: &str = "node_01hq3k5v9x8y7z6w5v4t3s2r1q";
const POOL_ID: &str = "pool_01hq3k5v9x8y7z6w5v4t3s2r1q";

/// Scripted answers: each queue is consumed first; an empty queue answers success.
#[derive(Default)]
struct Script {
    join: VecDeque<(u16, &'static str)>,
    heartbeat: VecDeque<(u16, &'static str)>,
    joins: Vec<JoinRequest>,
    heartbeat_auth: Vec<String>,
    issued: u32,
}

type Shared = Arc<Mutex<Script>>;

fn error(status: u16, code: &str) -> (StatusCode, Json<Value>) {
    (
        StatusCode::from_u16(status).unwrap(),
        Json(json!({"error": {"code": code, "message": format!("scripted {code}")}})),
    )
}

async fn join(State(s): State<Shared>, Json(req): Json<JoinRequest>) -> (StatusCode, Json<Value>) {
    let mut s = s.lock().unwrap();
    s.joins.push(req);
    if let Some((status, code)) = s.join.pop_front() {
        return error(status, code);
    }
    s.issued += 1;
    let answer = JoinResponse {
        node_id: NodeId::parse(NODE_ID).unwrap(),
        pool_id: PoolId::parse(POOL_ID).unwrap(),
        node_credential: SecretString::new(format!("cred-{}", s.issued)),
        heartbeat_seconds: 30,
    };
    (StatusCode::OK, Json(serde_json::to_value(answer).unwrap()))
}

async fn heartbeat(State(s): State<Shared>, headers: HeaderMap) -> (StatusCode, Json<Value>) {
    let mut s = s.lock().unwrap();
    let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default();
    s.heartbeat_auth.push(auth.to_owned());
    if let Some((status, code)) = s.heartbeat.pop_front() {
        return error(status, code);
    }
    (
        StatusCode::OK,
        Json(serde_json::to_value(HeartbeatResponse { heartbeat_seconds: 20 }).unwrap()),
    )
}

/// Serves the script on a loopback port; the task ends with the test's runtime.
async fn serve(script: Script) -> (String, Shared) {
    let shared = Arc::new(Mutex::new(script));
    let app = Router::new()
        .route(JOIN_PATH, post(join))
        .route(HEARTBEAT_PATH, post(heartbeat))
        .with_state(shared.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, shared)
}

/// Records each requested wait and returns at once.
#[derive(Default, Clone)]
struct Recorder(Arc<Mutex<Vec<Duration>>>);

impl Pause for Recorder {
    async fn pause(&self, d: Duration) {
        self.0.lock().unwrap().push(d);
        tokio::task::yield_now().await;
    }
}

/// A file of this test's own holding `content` (the projected token's volume).
fn token_file(content: Option<&str>) -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("bc-agent-test-{}-{n}-token", std::process::id()));
    let _ = std::fs::remove_file(&path);
    if let Some(c) = content {
        std::fs::write(&path, c).unwrap();
    }
    path
}

fn config_with(url: &str, token: &std::path::Path) -> AgentConfig {
    // The test servers are plain http on loopback, as in dev mode.
    let token = token.display().to_string();
    let env = [
        ("BCD_SERVER_URL", url),
        ("BCD_JOIN_TOKEN", TOKEN),
        ("NODE_NAME", "node-a"),
        ("BCD_INSECURE_HTTP", "1"),
        ("BCD_SERVICE_ACCOUNT_TOKEN_FILE", token.as_str()),
    ];
    AgentConfig::from_env(|k| env.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned()))
        .unwrap()
}

fn config(url: &str) -> AgentConfig {
    config_with(url, &token_file(Some(SA_TOKEN)))
}

/// Runs the agent until `done` holds for its state (bounded by a generous limit, so a
/// broken loop fails the test instead of hanging it), then stops it.
async fn run_until(
    url: &str,
    pause: &Recorder,
    done: impl Fn(&AgentState) -> bool,
) -> (Result<(), RunError>, AgentState) {
    run_with(config(url), pause, done).await
}

async fn run_with(
    cfg: AgentConfig,
    pause: &Recorder,
    done: impl Fn(&AgentState) -> bool,
) -> (Result<(), RunError>, AgentState) {
    let client = AgentClient::new(&cfg.server_url).unwrap();
    let shutdown = CancellationToken::new();
    let (tx, mut rx) = watch::channel(AgentState::Joining { attempt: 0, last_error: None });
    let agent = run(&client, &cfg, pause, || 0.5, &shutdown, &tx);
    let watcher = async {
        rx.wait_for(|s| done(s)).await.map(|s| s.clone()).ok();
        shutdown.cancel();
    };
    // The agent may end by itself (a refused join); otherwise the watcher stops it.
    let result = tokio::time::timeout(Duration::from_secs(30), async {
        tokio::pin!(agent);
        tokio::select! {
            r = &mut agent => r,
            () = watcher => agent.await,
        }
    })
    .await
    .expect("the agent reached the state within the bound");
    let last = tx.borrow().clone();
    (result, last)
}

fn joined_with(heartbeats: u64, joins: u64) -> impl Fn(&AgentState) -> bool {
    move |s| matches!(s, AgentState::Joined { heartbeats: h, joins: j, .. } if *h >= heartbeats && *j >= joins)
}

#[test]
fn config_names_the_missing_variable_and_hides_the_token() {
    let only = |k: &str| (k == "BCD_SERVER_URL").then(|| "http://x".to_owned());
    let err = AgentConfig::from_env(only).unwrap_err();
    assert_eq!(err, ConfigError::Missing("BCD_JOIN_TOKEN"));
    let cfg = config("http://127.0.0.1:1");
    assert!(!format!("{cfg:?}").contains(TOKEN));
    let blank = |k: &str| Some(if k == "NODE_NAME" { "  ".to_owned() } else { "v".to_owned() });
    assert_eq!(AgentConfig::from_env(blank).unwrap_err(), ConfigError::Missing("NODE_NAME"));
}

/// Issue 20, item 8 (SPEC §9): a plain http:// server URL is refused unless
/// BCD_INSECURE_HTTP=1 — the join token would travel in clear; https:// needs nothing.
#[test]
fn a_plain_http_server_url_needs_insecure_http() {
    let with = |url: &'static str, insecure: Option<&'static str>| {
        move |k: &str| match k {
            "BCD_SERVER_URL" => Some(url.to_owned()),
            "BCD_INSECURE_HTTP" => insecure.map(str::to_owned),
            _ => Some("v".to_owned()),
        }
    };
    let refused = AgentConfig::from_env(with("http://10.0.0.5:8080", None)).unwrap_err();
    assert_eq!(refused, ConfigError::PlainHttp("http://10.0.0.5:8080".into()));
    assert!(refused.to_string().contains("BCD_INSECURE_HTTP=1"), "{refused}");
    for other in ["0", "true", ""] {
        let got = AgentConfig::from_env(with("HTTP://api", Some(other)));
        assert!(matches!(got, Err(ConfigError::PlainHttp(_))), "BCD_INSECURE_HTTP={other}");
    }
    assert!(AgentConfig::from_env(with("http://10.0.0.5:8080", Some("1"))).is_ok());
    assert!(AgentConfig::from_env(with("https://api.example", None)).is_ok());
}

#[tokio::test]
async fn joins_then_heartbeats_on_the_interval_the_server_names() {
    let (url, script) = serve(Script::default()).await;
    let pause = Recorder::default();
    let (result, last) = run_until(&url, &pause, joined_with(3, 1)).await;
    assert_eq!(result, Ok(()));
    assert_eq!(last, AgentState::Stopped);
    let s = script.lock().unwrap();
    assert_eq!(s.joins.len(), 1);
    assert_eq!(s.joins[0].node_name, "node-a");
    assert_eq!(s.joins[0].join_token.expose(), TOKEN);
    assert_eq!(s.joins[0].service_account_token.expose(), SA_TOKEN);
    assert!(s.heartbeat_auth.iter().all(|a| a == "Bearer cred-1"), "{:?}", s.heartbeat_auth);
    let waits = pause.0.lock().unwrap().clone();
    // The join answer names 30 s; each heartbeat answer then names 20 s.
    assert_eq!(
        &waits[..3],
        &[Duration::from_secs(30), Duration::from_secs(20), Duration::from_secs(20)]
    );
}

/// Issue 29, item 4 (SPEC §9): bcd sends the projected token as the file holds it at
/// each join (the kubelet renews it), and a missing file is retried with a message that
/// names the file, without a call.
#[tokio::test]
async fn each_join_sends_the_projected_token_the_file_holds_then() {
    let mut script = Script::default();
    script.heartbeat.push_back((401, "UNAUTHENTICATED"));
    let (url, shared) = serve(script).await;
    let file = token_file(None);
    let cfg = config_with(&url, &file);
    let pause = Recorder::default();
    let (result, last) = run_with(
        cfg.clone(),
        &pause,
        |s| matches!(s, AgentState::Joining { attempt, .. } if *attempt >= 2),
    )
    .await;
    assert_eq!(result, Ok(()));
    assert_eq!(last, AgentState::Stopped);
    assert!(shared.lock().unwrap().joins.is_empty(), "no join without the token");
    let waits = pause.0.lock().unwrap().len();
    assert!(waits >= 2, "the missing file is retried with backoff");

    // The kubelet wrote it, then renewed it before the second join.
    std::fs::write(&file, format!("{SA_TOKEN}-1\n")).unwrap();
    let renew = {
        let (shared, file) = (shared.clone(), file.clone());
        move |s: &AgentState| {
            if matches!(s, AgentState::Joined { joins: 1, .. })
                && shared.lock().unwrap().joins.len() == 1
            {
                std::fs::write(&file, format!("{SA_TOKEN}-2")).unwrap();
            }
            joined_with(0, 2)(s)
        }
    };
    let (result, _) = run_with(cfg, &Recorder::default(), renew).await;
    assert_eq!(result, Ok(()));
    let sent: Vec<String> = shared
        .lock()
        .unwrap()
        .joins
        .iter()
        .map(|j| j.service_account_token.expose().to_owned())
        .collect();
    assert_eq!(sent, [format!("{SA_TOKEN}-1"), format!("{SA_TOKEN}-2")]);
    let _ = std::fs::remove_file(&file);
}

#[tokio::test]
async fn an_unavailable_server_is_retried_with_growing_capped_waits() {
    let mut script = Script::default();
    for _ in 0..8 {
        script.join.push_back((503, "UNAVAILABLE"));
    }
    script.join.push_back((400, "FAILED_PRECONDITION"));
    let (url, shared) = serve(script).await;
    let pause = Recorder::default();
    let (result, _) = run_until(&url, &pause, joined_with(0, 1)).await;
    assert_eq!(result, Ok(()));
    assert_eq!(shared.lock().unwrap().joins.len(), 10);
    let waits = pause.0.lock().unwrap().clone();
    let b = Backoff::default();
    let expected: Vec<Duration> = (0..9).map(|n| b.delay(n, 0.5)).collect();
    assert_eq!(&waits[..9], &expected[..]);
    assert!(waits[..9].windows(2).all(|w| w[0] <= w[1]));
    assert!(waits.iter().all(|w| *w <= b.cap));
}

#[tokio::test]
async fn an_unreachable_server_is_retried_until_shutdown() {
    // A port that was just free: nothing listens there.
    let url = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let pause = Recorder::default();
    let (result, last) = run_until(
        &url,
        &pause,
        |s| matches!(s, AgentState::Joining { attempt, .. } if *attempt >= 4),
    )
    .await;
    assert_eq!(result, Ok(()));
    assert_eq!(last, AgentState::Stopped);
    assert!(pause.0.lock().unwrap().len() >= 4);
}

#[tokio::test]
async fn a_refused_join_token_ends_the_loop_without_quoting_it() {
    let mut script = Script::default();
    script.join.push_back((401, "UNAUTHENTICATED"));
    let (url, _) = serve(script).await;
    let pause = Recorder::default();
    let (result, _) = run_until(&url, &pause, |_| false).await;
    let err = result.unwrap_err();
    assert!(matches!(&err, RunError::JoinRefused(e) if e.is_unauthenticated()));
    assert!(!err.to_string().contains(TOKEN), "{err}");
    assert!(pause.0.lock().unwrap().is_empty(), "no retry of a refused token");
}

#[tokio::test]
async fn a_refused_credential_makes_the_agent_join_again() {
    let mut script = Script::default();
    script.heartbeat.push_back((500, "INTERNAL"));
    script.heartbeat.push_back((401, "UNAUTHENTICATED"));
    let (url, shared) = serve(script).await;
    let pause = Recorder::default();
    let (result, _) = run_until(&url, &pause, joined_with(1, 2)).await;
    assert_eq!(result, Ok(()));
    let s = shared.lock().unwrap();
    assert_eq!(s.joins.len(), 2);
    assert_eq!(s.heartbeat_auth[..2], ["Bearer cred-1", "Bearer cred-1"]);
    assert_eq!(s.heartbeat_auth[2], "Bearer cred-2", "the new credential replaces the old");
    let waits = pause.0.lock().unwrap().clone();
    // After the failed heartbeat the retry waits a backoff delay, not the full interval.
    assert_eq!(waits[1], Backoff::default().delay(0, 0.5));
}

#[tokio::test]
async fn the_agent_survives_a_server_restart() {
    let (url, first) = serve(Script::default()).await;
    let pause = Recorder::default();
    let client = AgentClient::new(&url).unwrap();
    let cfg = config(&url);
    let shutdown = CancellationToken::new();
    let (tx, mut rx) = watch::channel(AgentState::Joining { attempt: 0, last_error: None });
    // The "restarted" server answers heartbeats of the old credential with 401, as a
    // fresh server without the node would; the agent then joins it again.
    let mut restarted = Script::default();
    restarted.heartbeat.push_back((401, "UNAUTHENTICATED"));
    let second = Arc::new(Mutex::new(restarted));
    let steps = async {
        rx.wait_for(joined_with(1, 1)).await.unwrap();
        *first.lock().unwrap() = std::mem::take(&mut *second.lock().unwrap());
        rx.wait_for(joined_with(1, 2)).await.unwrap();
        shutdown.cancel();
    };
    let agent = run(&client, &cfg, &pause, || 0.5, &shutdown, &tx);
    let (result, ()) =
        tokio::time::timeout(Duration::from_secs(30), async { tokio::join!(agent, steps) })
            .await
            .expect("bounded");
    assert_eq!(result, Ok(()));
    assert_eq!(first.lock().unwrap().joins.len(), 1, "one join at the restarted server");
}
