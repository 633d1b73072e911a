//! API benchmark (`cargo xtask bench api`): `kubernetesSubstrates.get` through a real
//! TCP server on loopback, 64 concurrent keep-alive clients, with 1,000, 10,000 and
//! 100,000 pools (each with a substrate) stored, on a SQLite file and, when
//! `BC_TEST_POSTGRES_URL` is set, on PostgreSQL; beside it the same server's cheapest
//! authenticated method (`events.list` on a tenant without events) as the ceiling, and
//! the ratio of the two. Prints requests/s, p50 and p99.
//!
//! Invariant: it measures and prints only. Each measurement runs for a fixed time after a
//! warm-up, the seeding writes many rows per commit, and the servers it starts bind
//! loopback and stop with it, so the whole run stays within a few minutes on 2 cores.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bc_api::{Api, Ports, Settings};
use bc_domain::model::{ApiToken, Grant, Role, Scope};
use bc_domain::ports::{Store, SystemClock, UnitOfWork, Write};
use bc_domain::token::ApiTokenSecret;
use bc_sim::direct::DirectRegistry;
use bc_sim::kube::direct::DirectClusterApi;
use bc_sim::{Sim, SimConfig};
use bc_store::testing::{self as rows, Backend};
use bc_store::{AeadSecretBox, SqlStore};
use rand::RngExt;

/// Pools stored, per run.
const SIZES: [usize; 3] = [1_000, 10_000, 100_000];
/// Concurrent keep-alive clients.
const CLIENTS: usize = 64;
/// Requests before measuring (connections open, caches warm).
const WARM_UP: Duration = Duration::from_millis(500);
/// How long each method is measured.
const MEASURE: Duration = Duration::from_secs(3);
/// Pools per seeding commit (each with its substrate: twice as many rows).
const SEED_BATCH: usize = 1_000;
/// The tenant.
const TENANT: &str = "acme";

/// One row of the result table.
struct Line {
    backend: &'static str,
    pools: usize,
    method: &'static str,
    rps: f64,
    p50_ms: f64,
    p99_ms: f64,
    errors: usize,
}

#[tokio::main]
async fn main() {
    bc_sim::install_crypto();
    let lines = Arc::new(Mutex::new(Vec::new()));
    for (backend, name) in [(Backend::File, "sqlite-file"), (Backend::Postgres, "postgres")] {
        let has_postgres = std::env::var("BC_TEST_POSTGRES_URL").is_ok_and(|v| !v.is_empty());
        if backend == Backend::Postgres && !has_postgres {
            eprintln!("postgres: skipped (BC_TEST_POSTGRES_URL not set)");
            continue;
        }
        for pools in SIZES {
            let lines = lines.clone();
            rows::run(backend, |store| async move {
                let measured = bench(name, pools, store).await;
                lines.lock().unwrap().extend(measured);
            })
            .await;
        }
    }
    print_table(&lines.lock().unwrap());
}

/// Seeds `pools` pools, serves the API on loopback and measures both methods.
async fn bench(backend: &'static str, pools: usize, store: Arc<SqlStore>) -> Vec<Line> {
    // The per-read plan check of the test harness is for tests, not for measuring.
    store.enforce_index_plans(false);
    let started = Instant::now();
    let ids = seed(&store, pools).await;
    eprintln!("{backend}: seeded {pools} pools with substrates in {:.1?}", started.elapsed());
    let token = ApiTokenSecret::generate(rand::random());
    let tenant = rows::tenant(TENANT);
    let record = ApiToken {
        token_id: rows::id(),
        token_hash: token.hash(),
        grants: vec![Grant {
            role: Role::Viewer,
            scope: Scope::Tenant(tenant.clone()),
            tenant_id: Some(tenant),
        }],
        created_at: rows::t(0),
        revoked_at: None,
    };
    store.commit(UnitOfWork::new().write(Write::InsertApiToken(record))).await.expect("token");
    let sim = Sim::new(SimConfig::default(), Arc::new(SystemClock));
    let secrets = Arc::new(AeadSecretBox::new(&[7u8; 32]).expect("key"));
    let ports = Ports {
        store: store.clone(),
        clock: Arc::new(SystemClock),
        providers: Arc::new(DirectRegistry::new(sim.state().clone(), secrets.clone())),
        clusters: Arc::new(DirectClusterApi::new(sim.state().clone())),
        secrets,
    };
    let settings = Settings { rate_limit: None, ..Settings::default() };
    let router = Api::new(ports).settings(settings).router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
    let addr = listener.local_addr().expect("address");
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let ids = Arc::new(ids);
    let substrates = {
        let ids = ids.clone();
        move || {
            let id = &ids[rand::rng().random_range(0..ids.len())];
            format!(r#"{{"tenantId":"{TENANT}","poolId":"{id}"}}"#)
        }
    };
    let events = || format!(r#"{{"tenantId":"{TENANT}","limit":1}}"#);
    let mut out = Vec::new();
    let path = "/api/compute/kubernetesSubstrates/get";
    let (rps, p50, p99, errors) = measure(addr, token.expose(), path, substrates).await;
    out.push(Line {
        backend,
        pools,
        method: "kubernetesSubstrates.get",
        rps,
        p50_ms: p50,
        p99_ms: p99,
        errors,
    });
    let (rps, p50, p99, errors) =
        measure(addr, token.expose(), "/api/compute/events/list", events).await;
    out.push(Line {
        backend,
        pools,
        method: "events.list (ceiling)",
        rps,
        p50_ms: p50,
        p99_ms: p99,
        errors,
    });
    server.abort();
    out
}

/// `pools` pools of the tenant, each with a substrate, written `SEED_BATCH` pools per
/// commit; their ids.
async fn seed(store: &SqlStore, pools: usize) -> Vec<String> {
    let tenant = rows::tenant(TENANT);
    let account = rows::account(&tenant, "main");
    let first = UnitOfWork::new().write(Write::InsertAccount(account.clone()));
    store.commit(first).await.expect("account");
    let mut ids = Vec::with_capacity(pools);
    for start in (0..pools).step_by(SEED_BATCH) {
        let mut uow = UnitOfWork::new();
        for i in start..(start + SEED_BATCH).min(pools) {
            let pool = rows::pool(&tenant, &format!("p{i}"));
            let substrate = rows::substrate(&pool, &account, None);
            ids.push(pool.pool_id.to_string());
            uow = uow.write(Write::InsertPool(pool)).write(Write::PutSubstrate(substrate));
        }
        store.commit(uow).await.expect("seed");
    }
    ids
}

/// `CLIENTS` keep-alive clients calling `path` with bodies from `body` for `WARM_UP` then
/// `MEASURE`: requests/s, p50 and p99 in milliseconds of the measured window, and the
/// answers that were not 200.
async fn measure(
    addr: SocketAddr,
    token: &str,
    path: &str,
    body: impl Fn() -> String + Clone + Send + 'static,
) -> (f64, f64, f64, usize) {
    let url = format!("http://{addr}{path}");
    let start = Instant::now();
    let (measure_from, until) = (start + WARM_UP, start + WARM_UP + MEASURE);
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let (url, body, bearer) = (url.clone(), body.clone(), format!("Bearer {token}"));
        tasks.push(tokio::spawn(async move {
            let client =
                reqwest::Client::builder().pool_max_idle_per_host(1).build().expect("a client");
            let (mut latencies, mut errors) = (Vec::new(), 0usize);
            loop {
                let sent = Instant::now();
                if sent >= until {
                    break;
                }
                let resp = client
                    .post(&url)
                    .header("authorization", &bearer)
                    .header("content-type", "application/json")
                    .body(body())
                    .send()
                    .await;
                let ok = match resp {
                    Ok(r) => r.status() == 200 && r.bytes().await.is_ok(),
                    Err(_) => false,
                };
                let done = Instant::now();
                if sent >= measure_from && done <= until {
                    if ok {
                        latencies.push(done - sent);
                    } else {
                        errors += 1;
                    }
                }
            }
            (latencies, errors)
        }));
    }
    let (mut all, mut errors) = (Vec::new(), 0);
    for t in tasks {
        let (l, e) = t.await.expect("client task");
        all.extend(l);
        errors += e;
    }
    all.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let pick = |q: f64| all.get(((all.len() as f64) * q) as usize).copied().map_or(0.0, ms);
    (all.len() as f64 / MEASURE.as_secs_f64(), pick(0.5), pick(0.99), errors)
}

fn print_table(lines: &[Line]) {
    println!();
    println!("| backend | pools | method | requests/s | p50 ms | p99 ms | vs ceiling | errors |");
    println!("|---|---:|---|---:|---:|---:|---:|---:|");
    for l in lines {
        let ceiling = lines
            .iter()
            .find(|c| {
                c.backend == l.backend && c.pools == l.pools && c.method.ends_with("(ceiling)")
            })
            .map_or(f64::NAN, |c| c.rps);
        println!(
            "| {} | {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {} |",
            l.backend,
            l.pools,
            l.method,
            l.rps,
            l.p50_ms,
            l.p99_ms,
            l.rps / ceiling,
            l.errors
        );
    }
}
