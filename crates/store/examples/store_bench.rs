//! Store benchmark (`cargo xtask bench store`): with 10,000 pools stored (`--quick`:
//! 1,000), the throughput of a substrate point read by pool id, a quota booking (a
//! one-write unit of work) and work-queue claims, from 8 concurrent tasks, on a SQLite
//! file and, when `BC_TEST_POSTGRES_URL` is set, on PostgreSQL. Reads and bookings are
//! set against the backend's bare round trip (`SELECT 1` on a connection pool to the same
//! database) measured in the same runs; claims against Crossplane's reconcile-rate cap
//! (research/peers.md §4).
//!
//! Invariant: it measures and emits only (bc_testkit::bench), never asserts a time. Each
//! run does a fixed number of operations of each kind in turn, so the total stays within
//! about a minute and every figure's runs are paired with its ceiling's.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bc_domain::PoolId;
use bc_domain::model::QuotaResource;
use bc_domain::ports::{Store, SubstrateRepo, UnitOfWork, WorkKind, WorkQueue, Write};
use bc_store::SqlStore;
use bc_store::testing::{account, pool, substrate, t, tenant};
use bc_testkit::bench::{self, Against, Better, Figure, Reference};
use rand::RngExt;
use sea_orm::{ConnectionTrait, Database, DatabaseConnection};

/// The benchmark's name in the report.
const BENCH: &str = "store";
/// Writes per setup commit.
const BATCH: usize = 500;
/// Concurrent tasks per measured operation.
const TASKS: usize = 8;
/// Items per claim call.
const CLAIM_BATCH: u32 = 10;
/// Crossplane's `--max-reconcile-rate` default since 2024 (peers.md §4): a provider
/// reconciles at most about this many resources per second.
const CROSSPLANE_RATE: f64 = 100.0;

/// Sizes and counts of one run of the benchmark.
struct Plan {
    pools: usize,
    runs: usize,
    /// Point reads (and bare round trips) per run.
    reads: usize,
    /// Quota bookings per run.
    bookings: usize,
    /// Queue items claimed and completed per run.
    queue_items: usize,
}

const FULL: Plan = Plan { pools: 10_000, runs: 5, reads: 4_000, bookings: 400, queue_items: 800 };
const QUICK: Plan = Plan { pools: 1_000, runs: 3, reads: 1_000, bookings: 100, queue_items: 200 };

/// One run of one operation: items per second and p99 latency per call.
#[derive(Debug, Clone, Copy)]
struct Run {
    rate: f64,
    p99_ms: f64,
}

#[tokio::main]
async fn main() {
    let plan = if bench::quick() { &QUICK } else { &FULL };
    let dir = std::env::temp_dir().join(bc_testkit::fresh_database_name("bc_store_bench"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let url = format!("sqlite://{}?mode=rwc", dir.join("bench.db").display());
    let store = Arc::new(SqlStore::connect(&url).await.expect("open SQLite file"));
    let raw = Database::connect(url.as_str()).await.expect("open SQLite file again");
    run(plan, "sqlite-file", store, raw).await;
    let _ = std::fs::remove_dir_all(&dir);

    if let Some(url) = bc_testkit::postgres_url() {
        let name = bc_testkit::fresh_database_name("store_bench");
        let admin = Database::connect(url.as_str()).await.expect("connect to PostgreSQL");
        admin.execute_unprepared(&format!("CREATE DATABASE {name}")).await.expect("create db");
        let db_url = bc_testkit::with_database(&url, &name);
        let store = Arc::new(SqlStore::connect(&db_url).await.expect("open"));
        let raw = Database::connect(db_url.as_str()).await.expect("open again");
        run(plan, "postgres", store.clone(), raw).await;
        if let Ok(s) = Arc::try_unwrap(store) {
            let _ = s.close().await;
        }
        let _ =
            admin.execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
    }
}

/// Seeds the pools, measures the operations `plan.runs` times in turn, emits the figures.
async fn run(plan: &Plan, backend: &'static str, s: Arc<SqlStore>, raw: DatabaseConnection) {
    let started = Instant::now();
    let pools = Arc::new(seed(plan, &s).await);
    eprintln!("{backend}: seeded {} pools in {:.1?}", plan.pools, started.elapsed());
    let raw = Arc::new(raw);
    let mut runs: [Vec<Run>; 4] = Default::default();
    for round in 0..plan.runs {
        runs[0].push(
            measure(plan.reads, {
                let raw = raw.clone();
                move |_| {
                    let raw = raw.clone();
                    async move {
                        raw.execute_unprepared("SELECT 1").await.expect("SELECT 1");
                        1
                    }
                }
            })
            .await,
        );
        runs[1].push(
            measure(plan.reads, {
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
        runs[2].push(
            measure(plan.bookings, {
                let (s, pools) = (s.clone(), pools.clone());
                move |_| {
                    let (s, pools) = (s.clone(), pools.clone());
                    async move {
                        let pool_id = pools[rand::rng().random_range(0..pools.len())].clone();
                        let w =
                            Write::BookQuota { pool_id, resource: QuotaResource::LoadBalancers };
                        s.commit(UnitOfWork::new().write(w)).await.expect("book");
                        1
                    }
                }
            })
            .await,
        );
        // Fresh items for this run's claims (the keys of the previous run's are done).
        let mut uow = UnitOfWork::new();
        let first = round * plan.queue_items % pools.len();
        for (i, p) in pools.iter().cycle().skip(first).take(plan.queue_items).enumerate() {
            uow = uow.enqueue(WorkKind::Substrates, p.as_str(), t(i as i64));
            if uow.enqueue.len() == BATCH {
                s.commit(std::mem::take(&mut uow)).await.expect("enqueue");
            }
        }
        s.commit(uow).await.expect("enqueue");
        runs[3].push(
            measure(plan.queue_items / CLAIM_BATCH as usize, {
                let s = s.clone();
                move |task| {
                    let s = s.clone();
                    async move {
                        let owner = format!("bench-{task}");
                        let kinds = [WorkKind::Substrates];
                        let got =
                            s.claim(&owner, &kinds, CLAIM_BATCH, t(1_000_000), t(2_000_000)).await;
                        let got = got.expect("claim");
                        for w in &got {
                            s.complete(w.kind, &w.key, &owner).await.expect("complete");
                        }
                        got.len()
                    }
                }
            })
            .await,
        );
    }
    let rates = |k: usize| runs[k].iter().map(|r| r.rate).collect::<Vec<f64>>();
    let p99s = |k: usize| runs[k].iter().map(|r| r.p99_ms).collect::<Vec<f64>>();
    let ceiling = |samples: Vec<f64>, what: &str| Against {
        reference: Reference::Ceiling,
        name: format!("SELECT 1 round trip on the same database, {what} (same runs)"),
        samples,
    };
    let prefix = format!("{backend} · {} pools", plan.pools);
    for (k, op) in [(1, "substrate point read by pool id"), (2, "commit of one BookQuota")] {
        bench::emit(
            &Figure::new(BENCH, format!("{prefix} · {op}"), "ops/s", Better::Higher, rates(k))
                .against(ceiling(rates(0), "ops/s")),
        );
        bench::emit(
            &Figure::new(BENCH, format!("{prefix} · {op} p99"), "ms", Better::Lower, p99s(k))
                .against(ceiling(p99s(0), "p99")),
        );
    }
    bench::emit(
        &Figure::new(
            BENCH,
            format!("{prefix} · work items claimed (10 per call) and completed"),
            "items/s",
            Better::Higher,
            rates(3),
        )
        .against(Against::constant(
            Reference::Peer,
            "Crossplane max-reconcile-rate 100/s",
            CROSSPLANE_RATE,
        )),
    );
}

/// Stores the pools, one account, a substrate per pool and a quota row per pool.
async fn seed(plan: &Plan, s: &SqlStore) -> Vec<PoolId> {
    let tenant = tenant("bench");
    let acct = account(&tenant, "main");
    s.commit(UnitOfWork::new().write(Write::InsertAccount(acct.clone()))).await.expect("account");
    let mut ids = Vec::with_capacity(plan.pools);
    let mut uow = UnitOfWork::new();
    for i in 0..plan.pools {
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

/// Runs `op` `total` times from [`TASKS`] tasks (`op` returns how many items it handled):
/// items per second of wall time, and the p99 of the calls.
async fn measure<F, Fut>(total: usize, op: F) -> Run
where
    F: Fn(usize) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = usize> + Send,
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
    let mut latencies: Vec<Duration> = Vec::with_capacity(total);
    let mut items = 0;
    for t in tasks {
        let (lat, n) = t.await.expect("task");
        latencies.extend(lat);
        items += n;
    }
    let wall = started.elapsed();
    latencies.sort_unstable();
    let p99 = latencies
        .get(((latencies.len() as f64 - 1.0) * 0.99).round() as usize)
        .map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0);
    Run { rate: items as f64 / wall.as_secs_f64(), p99_ms: p99 }
}
