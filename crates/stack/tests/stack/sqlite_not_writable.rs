//! A SQLite database that cannot take writes — full, or read-only — behind bc-api over
//! real TCP: writes answer 503 `UNAVAILABLE` saying the store cannot accept writes (no
//! path, no SQL, no database text), reads are still served, a refused unit of work left
//! no row anywhere, and once space or permission returns the same request (same
//! `requestId`) succeeds, exactly once.
//!
//! How the faults are made, honestly and without root assumptions:
//! - full: `PRAGMA max_page_count` capped at the database's current size on the one
//!   connection of an in-memory store; SQLite itself then fails the write with
//!   `SQLITE_FULL` ("database or disk is full"), exactly as on a full disk;
//! - read-only: the database file, written first, is opened again with `mode=ro`. That is
//!   what SQLite does by itself for a file the process may not write (it falls back to a
//!   read-only open); file modes cannot show it here since the tests may run as root,
//!   which ignores them, and `chattr +i` or a read-only mount need privileges and
//!   filesystems CI may not have.
//!
//! Invariants: loopback only; every loop bounded in count; no timing asserted.

use std::collections::BTreeMap;
use std::sync::Arc;

use bc_api::Settings;
use bc_domain::model::{Grant, Role, Scope};
use bc_stack::config::ProviderUrls;
use bc_stack::testing::{Scratch, post};
use bc_stack::wire::{Adapters, Served, api_router};
use bc_store::SqlStore;
use sea_orm_migration::sea_orm::{ConnectionTrait as _, Statement};
use serde_json::{Value, json};
use tokio::sync::Notify;

const TENANT: &str = "acme";
/// Most creates tried before the capped database must have refused one.
const MAX_CREATES: usize = 2_000;
/// Any valid key: the tests store no credential.
const SECRET_KEY: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";

/// bc-api on `store`, served on a loopback port, with an operator token.
struct Served1 {
    api: String,
    token: String,
    served: Served,
}

async fn serve(store: Arc<SqlStore>) -> Served1 {
    // Pools need no provider: the DigitalOcean URL is never called.
    let adapters =
        Adapters::real(store, SECRET_KEY, &ProviderUrls::simulator("http://127.0.0.1:9"))
            .expect("adapters");
    let grants = vec![Grant { role: Role::Operator, scope: Scope::System, tenant_id: None }];
    let token = bc_stack::tokens::create(adapters.store.as_ref(), adapters.clock.as_ref(), grants)
        .await
        .map(|(_, t)| t);
    serve_with(adapters, token.ok()).await
}

async fn serve_with(adapters: Adapters, token: Option<String>) -> Served1 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let api = format!("http://{}", listener.local_addr().expect("addr"));
    let mut served = Served::default();
    let router = api_router(
        &adapters,
        Settings::default(),
        Arc::new(Notify::new()),
        Arc::new(Notify::new()),
        served.cancel.clone(),
    );
    served.http(listener, router);
    Served1 { api, token: token.unwrap_or_default(), served }
}

async fn call(s: &Served1, method: &str, body: &Value) -> (u16, Value) {
    let c = bc_stack::testing::client(&s.api, &s.token, std::time::Duration::from_secs(10));
    post(&c, method, body).await.expect("an answer")
}

fn create_body(name: &str) -> Value {
    json!({"tenantId": TENANT, "name": name, "requestId": format!("rid-{name}"),
           "policy": {"flavors": [{"name": "cpu", "size": "s-1vcpu-1gb", "count": 1}]}})
}

/// The row count of every table: a refused write must leave all of them as they were.
async fn row_counts(store: &SqlStore) -> BTreeMap<String, i64> {
    let db = store.connection();
    let q = |s: &str| Statement::from_string(db.get_database_backend(), s.to_owned());
    let tables = db
        .query_all_raw(q("SELECT name FROM sqlite_master WHERE type = 'table' \
                          AND name NOT LIKE 'sqlite_%' ORDER BY name"))
        .await
        .expect("tables");
    let mut out = BTreeMap::new();
    for t in tables {
        let name: String = t.try_get("", "name").expect("name");
        let row = db
            .query_one_raw(q(&format!("SELECT COUNT(*) AS n FROM \"{name}\"")))
            .await
            .expect("count")
            .expect("a row");
        out.insert(name, row.try_get::<i64>("", "n").expect("n"));
    }
    out
}

/// The 503 of a refused write: code, the message's promise, and nothing internal.
fn assert_refused_cleanly(status: u16, v: &Value, path_hint: &str) {
    assert_eq!(status, 503, "{v}");
    assert_eq!(v["error"]["code"], "UNAVAILABLE", "{v}");
    let msg = v["error"]["message"].as_str().expect("message");
    assert!(msg.contains("cannot accept writes"), "{msg}");
    for leak in ["disk is full", "sqlite", "SQLITE", "readonly", "INSERT", "code:", path_hint] {
        assert!(!msg.contains(leak), "{leak:?} in {msg}");
    }
}

fn names(v: &Value) -> Vec<String> {
    v["pools"]
        .as_array()
        .expect("pools")
        .iter()
        .map(|p| p["name"].as_str().expect("name").to_owned())
        .collect()
}

#[tokio::test]
async fn a_full_database_refuses_writes_whole_and_serves_reads() {
    let store = Arc::new(SqlStore::connect("sqlite::memory:").await.expect("store"));
    let s = serve(store.clone()).await;
    for i in 0..3 {
        let (status, v) = call(&s, "pools.create", &create_body(&format!("before-{i}"))).await;
        assert_eq!(status, 200, "{v}");
    }
    // The in-memory store has exactly one connection, so the cap holds for every call.
    let db = store.connection();
    let pages = db
        .query_one_raw(Statement::from_string(db.get_database_backend(), "PRAGMA page_count"))
        .await
        .expect("page_count")
        .expect("a row");
    let pages: i64 = pages.try_get_by_index(0).expect("pages");
    db.execute_unprepared(&format!("PRAGMA max_page_count = {pages}")).await.expect("cap");

    // Creates fill what room the last pages have, then one is refused.
    let mut acked = vec!["before-0".to_owned(), "before-1".to_owned(), "before-2".to_owned()];
    let mut refused = None;
    for i in 0..MAX_CREATES {
        let name = format!("p{i}");
        let before = row_counts(&store).await;
        let (status, v) = call(&s, "pools.create", &create_body(&name)).await;
        if status == 200 {
            acked.push(name);
            continue;
        }
        assert_refused_cleanly(status, &v, "memory");
        assert_eq!(row_counts(&store).await, before, "the refused create left rows behind");
        refused = Some(name);
        break;
    }
    let refused = refused.expect("the capped database refused a create");

    // Reads are served, and show exactly the acknowledged pools.
    let (status, listed) =
        call(&s, "pools.list", &json!({"tenantId": TENANT, "pageSize": 500})).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(names(&listed), acked);
    // Another kind of write is refused as cleanly.
    let id = listed["pools"][0]["poolId"].as_str().expect("poolId").to_owned();
    let before = row_counts(&store).await;
    let (status, v) = call(
        &s,
        "quotas.set",
        &json!({"tenantId": TENANT, "poolId": id, "resource": "loadBalancers", "limit": 7}),
    )
    .await;
    if status != 200 {
        assert_refused_cleanly(status, &v, "memory");
        assert_eq!(row_counts(&store).await, before, "the refused quota left rows behind");
    }

    // Room again: the refused request, repeated with its requestId, is made once.
    db.execute_unprepared("PRAGMA max_page_count = 1073741823").await.expect("uncap");
    for _ in 0..2 {
        let (status, v) = call(&s, "pools.create", &create_body(&refused)).await;
        assert_eq!(status, 200, "{v}");
    }
    let (_, listed) = call(&s, "pools.list", &json!({"tenantId": TENANT, "pageSize": 500})).await;
    let all = names(&listed);
    assert_eq!(all.iter().filter(|n| **n == refused).count(), 1, "{all:?}");
    assert_eq!(all.len(), acked.len() + 1);
    s.served.shutdown().await;
}

#[tokio::test]
async fn a_read_only_database_file_refuses_writes_and_serves_reads() {
    let dir = Scratch::new("bc-sqlite-ro");
    let path = dir.path().join("bc.db");
    let rw = format!("sqlite://{}?mode=rwc", path.display());
    // The operator token is made while the file is writable: a read-only server cannot.
    let token = {
        let store = Arc::new(SqlStore::connect(&rw).await.expect("store"));
        let s = serve(store.clone()).await;
        let (status, v) = call(&s, "pools.create", &create_body("kept")).await;
        assert_eq!(status, 200, "{v}");
        s.served.shutdown().await;
        store.connection().close_by_ref().await.expect("close");
        s.token
    };

    // The server starts on a file it may only read (the schema is current: no migration
    // has to write), serves reads and refuses writes.
    let ro = format!("sqlite://{}?mode=ro", path.display());
    let store = Arc::new(SqlStore::connect(&ro).await.expect("a read-only store opens"));
    let adapters =
        Adapters::real(store.clone(), SECRET_KEY, &ProviderUrls::simulator("http://127.0.0.1:9"))
            .expect("adapters");
    let s = serve_with(adapters, Some(token.clone())).await;
    let (status, listed) = call(&s, "pools.list", &json!({"tenantId": TENANT})).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(names(&listed), ["kept"]);
    let before = row_counts(&store).await;
    let (status, v) = call(&s, "pools.create", &create_body("refused")).await;
    assert_refused_cleanly(status, &v, &dir.path().display().to_string());
    assert_eq!(row_counts(&store).await, before, "the refused create left rows behind");
    s.served.shutdown().await;
    store.connection().close_by_ref().await.expect("close");

    // Writable again: the refused request goes through, once.
    let store = Arc::new(SqlStore::connect(&rw).await.expect("store"));
    let adapters =
        Adapters::real(store, SECRET_KEY, &ProviderUrls::simulator("http://127.0.0.1:9"))
            .expect("adapters");
    let s = serve_with(adapters, Some(token)).await;
    for _ in 0..2 {
        let (status, v) = call(&s, "pools.create", &create_body("refused")).await;
        assert_eq!(status, 200, "{v}");
    }
    let (_, listed) = call(&s, "pools.list", &json!({"tenantId": TENANT})).await;
    assert_eq!(names(&listed), ["kept", "refused"]);
    s.served.shutdown().await;
}
