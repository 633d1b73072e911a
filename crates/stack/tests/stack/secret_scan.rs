//! Issue 12, security bullet 3 — the database and the logs hold no plaintext secret. A
//! dev stack (SQLite file, and PostgreSQL) goes through every kind of secret it
//! handles: a provider account made with a distinctive token, a pool whose substrate
//! makes a cluster (the cluster's API token and kubeconfig, the join token written to
//! its `bcd-join` Secret, the simulated bcd agents joining), a node credential issued to
//! a join made here and used for a heartbeat, the operator's API token and the server's
//! secret key. Then the SQLite files (`bc.db`, `-wal`, `-shm`), every row of every
//! PostgreSQL table (as text: bytea shows as hex) and every log line the process wrote
//! (tracing at DEBUG, all targets) are scanned for each secret in plaintext, base64
//! (standard and URL-safe) and hex. A failure lists each secret's kind and where it was.
//! The scan proves it can find: the operator token IS in `.bc-dev/token`, where it is
//! written on purpose.

use std::sync::{Arc, Mutex, OnceLock};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bc_stack::dev::{DEV_TENANT, DevStack};
use bc_stack::testing::{self, Backend, Scratch, sim_call, substrate_in, wait_for};
use sea_orm_migration::sea_orm::{ConnectionTrait as _, Statement};
use serde_json::{Value, json};

/// Every log line of this test process.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Logs;
    fn make_writer(&'a self) -> Logs {
        self.clone()
    }
}

/// The process's log capture, installed once (a process has one global subscriber).
fn logs() -> &'static Logs {
    static LOGS: OnceLock<Logs> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Logs::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(logs.clone())
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("one subscriber");
        logs
    })
}

/// The forms a secret could be stored or logged in.
fn forms(secret: &str) -> Vec<(&'static str, String)> {
    let hex: String = secret.bytes().map(|b| format!("{b:02x}")).collect();
    vec![
        ("plaintext", secret.to_owned()),
        ("base64", STANDARD.encode(secret)),
        ("base64url", URL_SAFE_NO_PAD.encode(secret)),
        ("hex", hex),
    ]
}

/// Where in `haystack` (named `place`) any form of any secret appears.
fn scan(place: &str, haystack: &[u8], secrets: &[(&str, String)], found: &mut Vec<String>) {
    for (kind, secret) in secrets {
        for (form, needle) in forms(secret) {
            if haystack.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                found.push(format!("the {kind} ({form}) in {place}"));
            }
        }
    }
}

/// Every row of every table of the PostgreSQL database at `url`, as text.
async fn postgres_rows(url: &str) -> Vec<(String, String)> {
    let db = bc_store::SqlStore::connect_unmigrated(url).await.expect("postgres");
    let conn = db.connection();
    let backend = conn.get_database_backend();
    let tables = conn
        .query_all_raw(Statement::from_string(
            backend,
            "SELECT table_name::text AS name FROM information_schema.tables WHERE table_schema = 'public'",
        ))
        .await
        .expect("tables");
    let mut out = Vec::new();
    for t in tables {
        let table: String = t.try_get("", "name").expect("name");
        let rows = conn
            .query_all_raw(Statement::from_string(
                backend,
                format!("SELECT t::text AS row_text FROM \"{table}\" t"),
            ))
            .await
            .expect("rows");
        for r in rows {
            out.push((table.clone(), r.try_get("", "row_text").expect("text")));
        }
    }
    let _ = db.close().await;
    out
}

/// A `data` or `stringData` value of a Secret object.
fn secret_value(secret: &Value, key: &str) -> Option<String> {
    if let Some(s) = secret["stringData"][key].as_str() {
        return Some(s.to_owned());
    }
    let b64 = secret["data"][key].as_str()?;
    String::from_utf8(STANDARD.decode(b64).ok()?).ok()
}

async fn post(stack: &DevStack, method: &str, bearer: Option<&str>, body: &Value) -> Value {
    let client = match bearer {
        Some(b) => testing::client(&stack.api_url, b, std::time::Duration::from_secs(30)),
        // `agents.join` authenticates with the join token in its body.
        None => bc_client::Client::builder(&stack.api_url).build().expect("client"),
    };
    let (status, v) = testing::post(&client, method, body).await.expect("the API answers");
    assert_eq!(status, 200, "{method}: {status} {v}");
    v
}

async fn no_plaintext_secret_at_rest_or_in_logs(backend: Backend) {
    let logs = logs();
    let scratch = Scratch::new("bc-secret-scan");
    let Some(mut options) = testing::options(backend, scratch.path()).await else { return };
    let database_url = options.database_url.clone();
    let provider_token = format!("dop_v1_scan{:032x}", rand::random::<u128>());
    options.extra_sim_tokens = vec![provider_token.clone()];
    let stack = DevStack::start(options).await.expect("dev stack");

    let account = stack
        .call(
            "providerAccounts.create",
            json!({ "tenantId": DEV_TENANT, "provider": "digitalocean", "name": "scanned",
                    "credentials": { "token": provider_token } }),
        )
        .await
        .expect("account");
    let account = account["providerAccountId"].as_str().expect("id").to_owned();
    let pool = stack
        .call(
            "pools.create",
            json!({"tenantId": DEV_TENANT, "name": "scan", "policy": {
                "substrate": {"kind": "kubernetes", "account": account,
                              "cluster": {"create": {"region": "nyc1"}}},
                "flavors": [{"name": "cpu", "size": "s-2vcpu-4gb", "count": 2}]}}),
        )
        .await
        .expect("pools.create");
    let pool_id = pool["poolId"].as_str().expect("poolId").to_owned();
    substrate_in(&stack, &pool_id, "ready").await;
    let sub = json!({"tenantId": DEV_TENANT, "poolId": pool_id});
    let ready = wait_for(&stack, "2 nodes joined", "kubernetesSubstrates.get", sub, |v| {
        v["nodesJoined"] == 2
    })
    .await;
    let cluster_id = ready["clusterId"].as_str().expect("clusterId");
    let cluster = stack
        .call("kubernetesClusters.get", json!({"tenantId": DEV_TENANT, "clusterId": cluster_id}))
        .await
        .expect("cluster");
    let provider_cluster = cluster["providerClusterId"].as_str().expect("providerClusterId");

    // The cluster's credentials as the provider hands them out (the adapter fetched them
    // to apply bcd's objects).
    let creds = sim_call(
        &stack,
        &provider_token,
        reqwest::Method::GET,
        &format!("/v2/kubernetes/clusters/{provider_cluster}/credentials"),
        None,
    )
    .await;
    let cluster_token = creds["token"].as_str().expect("a cluster token").to_owned();
    // The join token, from the Secret the reconciler applied.
    let secrets_in_cluster = stack.sim.state().kube.list(
        provider_cluster,
        bc_sim::kube::Resource::Secret,
        None,
        &Default::default(),
    );
    let secret = secrets_in_cluster
        .into_iter()
        .find(|s| s["metadata"]["name"] == "bcd-join")
        .expect("the bcd-join Secret");
    let join_token = secret_value(&secret, "joinToken").expect("a join token");
    assert!(join_token.starts_with("bcj_"), "a join token");
    // A node credential issued to a join made here, then used.
    let nodes = stack.sim.state().kube.list(
        provider_cluster,
        bc_sim::kube::Resource::Node,
        None,
        &Default::default(),
    );
    let node_name = nodes[0]["metadata"]["name"].as_str().expect("name").to_owned();
    // The projected token of the bcd pod on that node (SPEC §9), as its kubelet wrote it.
    let namespace = secret["metadata"]["namespace"].as_str().expect("namespace").to_owned();
    let pods = stack.sim.state().kube.list(
        provider_cluster,
        bc_sim::kube::Resource::Pod,
        Some(&namespace),
        &Default::default(),
    );
    let pod = pods
        .iter()
        .find(|p| p["spec"]["nodeName"] == node_name.as_str())
        .and_then(|p| p["metadata"]["name"].as_str())
        .expect("the bcd pod on the node")
        .to_owned();
    let sa_token = bc_sim::kube::tokens::projected_token(
        stack.sim.state(),
        provider_cluster,
        &namespace,
        &pod,
        bc_domain::agent::SERVICE_ACCOUNT_TOKEN_FILE,
    )
    .expect("minted")
    .expect("mounted");
    let joined = post(
        &stack,
        "agents.join",
        None,
        &json!({ "joinToken": join_token, "nodeName": node_name, "bcdVersion": "scan",
            "serviceAccountToken": sa_token }),
    )
    .await;
    let node_credential = joined["nodeCredential"].as_str().expect("credential").to_owned();
    post(&stack, "agents.heartbeat", Some(&node_credential), &json!({})).await;

    let secrets = vec![
        ("provider token", provider_token),
        ("cluster API token (kubeconfig)", cluster_token),
        ("join token", join_token),
        ("projected ServiceAccount token", sa_token),
        ("node credential", node_credential),
        ("operator API token", stack.token.clone()),
        ("server secret key", stack.secret_key.clone()),
    ];
    let dir = stack.dir.clone();
    stack.stop().await;

    let mut found = Vec::new();
    let mut scanned = Vec::new();
    match &database_url {
        None => {
            for file in ["bc.db", "bc.db-wal", "bc.db-shm"] {
                if let Ok(bytes) = std::fs::read(dir.join(file)) {
                    scan(file, &bytes, &secrets, &mut found);
                    scanned.push(format!("{file} ({} bytes)", bytes.len()));
                }
            }
            assert!(scanned.iter().any(|s| s.starts_with("bc.db ")), "the database was read");
        }
        Some(url) => {
            let rows = postgres_rows(url).await;
            assert!(rows.iter().any(|(t, _)| t == "provider_accounts"), "the rows were read");
            for (table, text) in &rows {
                scan(&format!("table {table}"), text.as_bytes(), &secrets, &mut found);
            }
            scanned.push(format!("{} PostgreSQL rows", rows.len()));
        }
    }
    let log_bytes = logs.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(String::from_utf8_lossy(&log_bytes).contains("answered"), "the logs were captured");
    scan("the logs", &log_bytes, &secrets, &mut found);
    assert!(found.is_empty(), "plaintext secrets found (scanned {scanned:?}): {found:#?}");

    // The scan finds a secret where one is: the operator token is written to
    // `.bc-dev/token` on purpose.
    let mut control = Vec::new();
    let token_file = std::fs::read(dir.join("token")).expect("the token file");
    scan("the token file", &token_file, &secrets, &mut control);
    assert_eq!(control, vec!["the operator API token (plaintext) in the token file".to_owned()]);
    eprintln!("secret scan: {scanned:?} and {} bytes of logs, clean", log_bytes.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_plaintext_secret_in_the_sqlite_files_or_the_logs() {
    no_plaintext_secret_at_rest_or_in_logs(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_plaintext_secret_in_postgres_rows_or_the_logs() {
    no_plaintext_secret_at_rest_or_in_logs(Backend::Postgres).await;
}
