//! Store benchmark (`cargo xtask bench store`): with 10,000 pools stored, the throughput
//! and latency of a substrate point read by pool id, a quota booking (a one-write unit of
//! work), and work-queue claims, on a SQLite file and, when `BC_TEST_POSTGRES_URL` is set,
//! on PostgreSQL.
//!
//! Invariant: it measures and prints only — no assertion depends on timing. Each
//! operation runs a fixed number of times from a fixed number of tasks, so the total run
//! stays within about a minute per backend.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bc_domain::PoolId;
use bc_domain::model::QuotaResource;
use bc_domain::ports::{Store, SubstrateRepo, UnitOfWork, WorkKind, WorkQueue, Write};
use bc_store::SqlStore;
use bc_store::testing::{account, pool, substrate, t, tenant};
use rand::RngExt;
use sea_orm::{ConnectionTrait, Database};

/// Pools stored before measuring.
const POOLS: usize = 10_000;
/// Writes per setup commit.
const BATCH: usize = 500;
/// Concurrent tasks per measured operation.
const TASKS: usize = 8;
/// Point reads in all.
const READS: usize = 20_000;
/// Quota bookings in all.
const BOOKINGS: usize = 2_000;
/// Queue items claimed (and completed) in all.
const QUEUE_ITEMS: usize = 4_000;
/// Items per claim call.
const CLAIM_BATCH: u32 = 10;

/// One row of the result table.
struct Line {
    backend: &'static str,
    operation: &'static str,
    ops: usize,
    wall: Duration,
    latencies: Vec<Duration>,
}

#[tokio::main]
async fn main() {
    let mut lines = Vec::new();
    let dir = std::env::temp_dir().join(bc_testkit::fresh_database_name("bc_store_bench"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let url = format!("sqlite://{}?mode=rwc", dir.join("bench.db").display());
    let store = Arc::new(SqlStore::connect(&url).await.expect("open SQLite file"));
    lines.extend(run("sqlite-file", store).await);
    let _ = std::fs::remove_dir_all(&dir);

    match std::env::var(bc_testkit::POSTGRES_URL_VAR).ok().filter(|v| !v.is_empty()) {
        Some(url) => {
            let name = bc_testkit::fresh_database_name("store_bench");
            let admin = Database::connect(url.as_str()).await.expect("connect to PostgreSQL");
            admin.execute_unprepared(&format!("CREATE DATABASE {name}")).await.expect("create db");
            let store = Arc::new(
                SqlStore::connect(&bc_testkit::with_database(&url, &name)).await.expect("open"),
            );
            lines.extend(run("postgres", store.clone()).await);
            if let Ok(s) = Arc::try_unwrap(store) {
                let _ = s.close().await;
            }
            let _ = admin
                .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .await;
        }
        None => eprintln!("postgres: skipped ({} not set)", bc_testkit::POSTGRES_URL_VAR),
    }
    print_table(&lines);
}

/// Seeds 10,000 pools and measures the three operations.
async fn run(backend: &'static str, s: Arc<SqlStore>) -> Vec<Line> {
    let started = Instant::now();
    let pools = seed(&s).await;
    eprintln!("{backend}: seeded {POOLS} pools in {:.1?}", started.elapsed());
    let pools = Arc::new(pools);
    let mut out = Vec::new();

    out.push(
        measure(backend, "substrate_get by pool id", READS, {
            let (s, pools) = (s.clone(), pools.clone());
            move |_| {
                let (s, pools) = (s.clone(), pools.clone());
                async move {
                    let p = &pools[rand::rng().random_range(0..pools.len())];
                    let got = s.substrate_get_any(p).await.expect("read");
                    assert!(got.is_some());
                    1
                }
            }
        })
        .await,
    );

    out.push(
        measure(backend, "commit BookQuota", BOOKINGS, {
            let (s, pools) = (s.clone(), pools.clone());
            move |_| {
                let (s, pools) = (s.clone(), pools.clone());
                async move {
                    let pool_id = pools[rand::rng().random_range(0..pools.len())].clone();
                    let w = Write::BookQuota { pool_id, resource: QuotaResource::LoadBalancers };
                    s.commit(UnitOfWork::new().write(w)).await.expect("book");
                    1
                }
            }
        })
        .await,
    );

    let mut uow = UnitOfWork::new();
    for (i, p) in pools.iter().take(QUEUE_ITEMS).enumerate() {
        uow = uow.enqueue(WorkKind::Substrates, p.as_str(), t(i as i64));
        if uow.enqueue.len() == BATCH {
            s.commit(std::mem::take(&mut uow)).await.expect("enqueue");
        }
    }
    s.commit(uow).await.expect("enqueue");
    let calls = QUEUE_ITEMS / CLAIM_BATCH as usize;
    let mut line = measure(backend, "claim (10) + complete each", calls, {
        let s = s.clone();
        move |task| {
            let s = s.clone();
            async move {
                let owner = format!("bench-{task}");
                let kinds = [WorkKind::Substrates];
                let got = s.claim(&owner, &kinds, CLAIM_BATCH, t(1_000_000), t(2_000_000)).await;
                let got = got.expect("claim");
                for w in &got {
                    s.complete(w.kind, &w.key, &owner).await.expect("complete");
                }
                got.len()
            }
        }
    })
    .await;
    line.operation = "claim (10) + complete each [items]";
    out.push(line);
    out
}

/// Stores the pools, one account, a substrate per pool and a quota row per pool.
async fn seed(s: &SqlStore) -> Vec<PoolId> {
    let tenant = tenant("bench");
    let acct = account(&tenant, "main");
    s.commit(UnitOfWork::new().write(Write::InsertAccount(acct.clone()))).await.expect("account");
    let mut ids = Vec::with_capacity(POOLS);
    let mut uow = UnitOfWork::new();
    for i in 0..POOLS {
        let pool = pool(&tenant, &format!("pool-{i}"));
        let pool_id = pool.pool_id.clone();
        let substrate = substrate(&pool, &acct, None);
        uow = uow.write(Write::InsertPool(pool)).write(Write::PutSubstrate(substrate)).write(
            Write::SetQuota {
                pool_id: pool_id.clone(),
                resource: QuotaResource::LoadBalancers,
                limit: 1_000_000,
            },
        );
        ids.push(pool_id);
        if uow.writes.len() >= BATCH {
            s.commit(std::mem::take(&mut uow)).await.expect("seed");
        }
    }
    s.commit(uow).await.expect("seed");
    ids
}

/// Runs `op` `total` times from [`TASKS`] tasks; `op` returns how many items it handled.
async fn measure<F, Fut>(
    backend: &'static str,
    operation: &'static str,
    total: usize,
    op: F,
) -> Line
where
    F: Fn(usize) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = usize> + Send,
{
    let started = Instant::now();
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let op = op.clone();
        let n = total / TASKS + usize::from(task < total % TASKS);
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(n);
            let mut items = 0;
            for _ in 0..n {
                let t0 = Instant::now();
                items += op(task).await;
                lat.push(t0.elapsed());
            }
            (lat, items)
        }));
    }
    let mut latencies = Vec::with_capacity(total);
    let mut ops = 0;
    for t in tasks {
        let (lat, items) = t.await.expect("task");
        latencies.extend(lat);
        ops += items;
    }
    let wall = started.elapsed();
    latencies.sort_unstable();
    Line { backend, operation, ops, wall, latencies }
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn print_table(lines: &[Line]) {
    println!(
        "\n{POOLS} pools stored; {TASKS} concurrent tasks per operation; latency is per call\n"
    );
    println!(
        "| {:<11} | {:<36} | {:>8} | {:>10} | {:>9} | {:>9} |",
        "backend", "operation", "ops", "ops/s", "p50", "p99"
    );
    println!("|{:-<13}|{:-<38}|{:-<10}|{:-<12}|{:-<11}|{:-<11}|", "", "", "", "", "", "");
    for l in lines {
        let rate = l.ops as f64 / l.wall.as_secs_f64();
        println!(
            "| {:<11} | {:<36} | {:>8} | {:>10.0} | {:>9} | {:>9} |",
            l.backend,
            l.operation,
            l.ops,
            rate,
            format!("{:.2?}", pct(&l.latencies, 0.50)),
            format!("{:.2?}", pct(&l.latencies, 0.99)),
        );
    }
}
