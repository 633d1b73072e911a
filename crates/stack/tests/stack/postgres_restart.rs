//! PostgreSQL stopped (as in a crash) and restarted under API load: while it is down
//! every answer of bc-api is 503 `UNAVAILABLE` (never a 500, never a hang: the clients'
//! own timeout is far below the old 30 s pool wait), after the restart full service
//! returns by itself, and no acknowledged write is lost; a write refused with 503 is
//! either absent or, retried with its `requestId`, present exactly once.
//!
//! Invariants: the test runs its own PostgreSQL (`bc_testkit::postgres::Throwaway`,
//! durable commits, loopback, stopped on drop), never the shared one; every loop is
//! bounded in count; nothing asserts elapsed time — the 5 s client timeout is a bound
//! whose breach fails the test, not a measurement.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bc_domain::model::{Grant, Role, Scope};
use bc_stack::dev::{DEV_TENANT, DevStack};
use bc_stack::testing::{self, Backend, Scratch, post};
use bc_testkit::postgres::{self, Shutdown, Throwaway};
use serde_json::{Value, json};

/// Concurrent API clients, each with a token of its own.
const CLIENTS: usize = 4;
/// Most iterations (a create, a get, a list) per client.
const MAX_ITERATIONS: usize = 400;
/// Each call's bound: an outage must answer long before this.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// Acknowledged creates before PostgreSQL is stopped, and again after it is back.
const ACKS_BEFORE_STOP: usize = 20;
/// See [`ACKS_BEFORE_STOP`].
const ACKS_AFTER_RESTART: usize = 20;
/// Calls the test itself makes while PostgreSQL is down.
const PROBES: usize = 6;
/// Bounded waits: polls of [`POLL`].
const POLLS: usize = 600;
/// The pause between polls.
const POLL: Duration = Duration::from_millis(50);

/// One `pools.create` a client sent.
#[derive(Debug, Clone)]
struct Create {
    request_id: String,
    name: String,
    /// The id answered, when acknowledged.
    pool_id: Option<String>,
}

/// What one client saw.
#[derive(Debug, Default)]
struct Seen {
    acked: Vec<Create>,
    refused: Vec<Create>,
    statuses: BTreeMap<u16, usize>,
    /// Any answer other than 200 or a well-formed 503 `UNAVAILABLE`.
    wrong: Vec<String>,
}

impl Seen {
    fn judge(&mut self, what: &str, status: u16, v: &Value) {
        *self.statuses.entry(status).or_default() += 1;
        match status {
            200 => {}
            503 => {
                let msg = v["error"]["message"].as_str().unwrap_or("");
                let leak = ["127.0.0.1", "postgres", "sqlx", "SELECT", "INSERT", "error returned"]
                    .iter()
                    .any(|w| msg.contains(w));
                if v["error"]["code"] != "UNAVAILABLE" || msg.is_empty() || leak {
                    self.wrong.push(format!("{what}: 503 {v}"));
                }
            }
            _ => self.wrong.push(format!("{what}: {status} {v}")),
        }
    }
}

fn create_body(name: &str, request_id: &str) -> Value {
    json!({"tenantId": DEV_TENANT, "name": name, "requestId": request_id,
           "policy": {"flavors": [{"name": "cpu", "size": "s-1vcpu-1gb", "count": 1}]}})
}

fn http(api: &str, token: &str) -> bc_client::Client {
    testing::client(api, token, CLIENT_TIMEOUT)
}

/// Calls, failing the test when no answer comes within [`CLIENT_TIMEOUT`].
async fn call(c: &bc_client::Client, method: &str, body: &Value) -> (u16, Value) {
    post(c, method, body)
        .await
        .unwrap_or_else(|e| panic!("{method} got no answer within {CLIENT_TIMEOUT:?}: {e}"))
}

/// A client: creates (unique name and `requestId`), gets the last acknowledged pool and
/// lists a page, until told to stop or [`MAX_ITERATIONS`].
async fn client(
    k: usize,
    api: String,
    token: String,
    stop: Arc<AtomicBool>,
    acks: Arc<AtomicUsize>,
) -> Seen {
    let c = http(&api, &token);
    let mut seen = Seen::default();
    let mut last: Option<String> = None;
    for i in 0..MAX_ITERATIONS {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let (name, request_id) = (format!("c{k}-{i}"), format!("rid-c{k}-{i}"));
        let (status, v) = call(&c, "pools.create", &create_body(&name, &request_id)).await;
        seen.judge(&format!("pools.create {name}"), status, &v);
        let mut create = Create { request_id, name, pool_id: None };
        if status == 200 {
            create.pool_id = v["poolId"].as_str().map(str::to_owned);
            last.clone_from(&create.pool_id);
            seen.acked.push(create);
            acks.fetch_add(1, Ordering::SeqCst);
        } else if status == 503 {
            seen.refused.push(create);
        }
        if let Some(id) = &last {
            let (status, v) =
                call(&c, "pools.get", &json!({"tenantId": DEV_TENANT, "poolId": id})).await;
            seen.judge("pools.get", status, &v);
        }
        let (status, v) =
            call(&c, "pools.list", &json!({"tenantId": DEV_TENANT, "pageSize": 5})).await;
        seen.judge("pools.list", status, &v);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    seen
}

/// Every pool of the tenant, through the paged list.
async fn all_pools(api: &str, token: &str) -> Vec<Value> {
    let c = http(api, token);
    let (mut out, mut page) = (Vec::new(), None::<String>);
    for _ in 0..1_000 {
        let mut body = json!({"tenantId": DEV_TENANT, "pageSize": 500});
        if let Some(p) = &page {
            body["pageToken"] = json!(p);
        }
        let (status, v) = call(&c, "pools.list", &body).await;
        assert_eq!(status, 200, "pools.list: {v}");
        out.extend(v["pools"].as_array().cloned().unwrap_or_default());
        match v["nextPageToken"].as_str() {
            Some(p) => page = Some(p.to_owned()),
            None => return out,
        }
    }
    panic!("pools.list did not end within 1000 pages");
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..POLLS {
        if done() {
            return;
        }
        tokio::time::sleep(POLL).await;
    }
    panic!("gave up waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_restart_under_api_load() {
    let Some(bin) = postgres::find() else {
        assert!(!bc_testkit::services_required(), "PostgreSQL is required but not installed");
        eprintln!("skipped: no PostgreSQL installed");
        return;
    };
    let mut pg = tokio::task::spawn_blocking(move || Throwaway::start_durable(bin))
        .await
        .expect("join")
        .expect("start a PostgreSQL of our own");
    let scratch = Scratch::new("bc-pg-restart");
    let mut options = testing::options(Backend::Sqlite, scratch.path()).await.expect("options");
    options.database_url = Some(pg.url());
    options.reconcile = false;
    let stack = DevStack::start(options).await.expect("dev stack on our PostgreSQL");
    let api = stack.api_url.clone();

    let (stop, acks) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
    let mut clients = Vec::new();
    for k in 0..CLIENTS {
        // A token each: the per-token rate limit must not be what refuses the load.
        let grants = vec![Grant { role: Role::Operator, scope: Scope::System, tenant_id: None }];
        let (_, token) = bc_stack::tokens::create(
            stack.adapters.store.as_ref(),
            stack.adapters.clock.as_ref(),
            grants,
        )
        .await
        .expect("token");
        clients.push(tokio::spawn(client(k, api.clone(), token, stop.clone(), acks.clone())));
    }

    wait_until("acknowledged creates before the stop", || {
        acks.load(Ordering::SeqCst) >= ACKS_BEFORE_STOP
    })
    .await;
    tokio::task::block_in_place(|| pg.stop(Shutdown::Immediate)).expect("stop PostgreSQL");

    // While it is down: each of these answers 503 UNAVAILABLE, within the client timeout.
    let mut probes = Seen::default();
    let calls = (0..PROBES).map(|j| {
        let (api, token) = (api.clone(), stack.token.clone());
        async move {
            let c = http(&api, &token);
            let (name, rid) = (format!("probe-{j}"), format!("rid-probe-{j}"));
            let created = call(&c, "pools.create", &create_body(&name, &rid)).await;
            let listed = call(&c, "pools.list", &json!({"tenantId": DEV_TENANT})).await;
            (Create { request_id: rid, name, pool_id: None }, created, listed)
        }
    });
    for (create, created, listed) in futures::future::join_all(calls).await {
        assert_eq!(created.0, 503, "create while PostgreSQL is down: {}", created.1);
        assert_eq!(listed.0, 503, "list while PostgreSQL is down: {}", listed.1);
        probes.judge("probe pools.create", created.0, &created.1);
        probes.judge("probe pools.list", listed.0, &listed.1);
        probes.refused.push(create);
    }
    assert!(probes.wrong.is_empty(), "{:?}", probes.wrong);

    tokio::task::block_in_place(|| pg.start_again()).expect("restart PostgreSQL");
    let acks_at_restart = acks.load(Ordering::SeqCst);
    // Full service again, by itself: the pool drops dead connections and makes new ones.
    let c = http(&api, &stack.token);
    let mut back = false;
    for _ in 0..POLLS {
        let (status, _) = call(&c, "pools.list", &json!({"tenantId": DEV_TENANT})).await;
        if status == 200 {
            back = true;
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    assert!(back, "the API did not serve again after PostgreSQL came back");
    wait_until("acknowledged creates after the restart", || {
        acks.load(Ordering::SeqCst) >= acks_at_restart + ACKS_AFTER_RESTART
    })
    .await;
    stop.store(true, Ordering::SeqCst);

    let mut seen = vec![probes];
    for h in clients {
        seen.push(h.await.expect("client"));
    }
    let wrong: Vec<&String> = seen.iter().flat_map(|s| &s.wrong).collect();
    assert!(wrong.is_empty(), "answers other than 200 / 503 UNAVAILABLE: {wrong:?}");
    let mut statuses = BTreeMap::<u16, usize>::new();
    for s in &seen {
        for (k, n) in &s.statuses {
            *statuses.entry(*k).or_default() += n;
        }
    }
    eprintln!("answers by status: {statuses:?}");

    // Every refused create, retried with its requestId, is answered 200 and exists once.
    let mut acked: Vec<Create> = seen.iter().flat_map(|s| s.acked.clone()).collect();
    let refused: Vec<Create> = seen.iter().flat_map(|s| s.refused.clone()).collect();
    assert!(refused.len() >= PROBES, "the outage refused writes");
    for mut r in refused {
        let (status, v) = call(&c, "pools.create", &create_body(&r.name, &r.request_id)).await;
        assert_eq!(status, 200, "retrying {} with its requestId: {v}", r.name);
        r.pool_id = v["poolId"].as_str().map(str::to_owned);
        acked.push(r);
    }
    let pools = all_pools(&api, &stack.token).await;
    let mut by_name = BTreeMap::<String, Vec<String>>::new();
    for p in &pools {
        let name = p["name"].as_str().expect("name").to_owned();
        by_name.entry(name).or_default().push(p["poolId"].as_str().expect("poolId").to_owned());
    }
    for a in &acked {
        let ids = by_name.get(&a.name).cloned().unwrap_or_default();
        assert_eq!(ids.len(), 1, "{} is stored {} times: {ids:?}", a.name, ids.len());
        assert_eq!(Some(&ids[0]), a.pool_id.as_ref(), "{} answered another id", a.name);
    }
    assert_eq!(pools.len(), acked.len(), "no pool beyond the ones asked for");
    eprintln!("{} creates acknowledged in the end, {} pools stored", acked.len(), pools.len());
    stack.stop().await;
    drop(pg);
}
