//! API benchmark (`cargo xtask bench api`): `kubernetesSubstrates.get`, `pools.list`,
//! `loadBalancers.create` and `providerAccounts.list` (the ceiling until issue 31's ninth
//! round) through a real TCP server on loopback under 64 concurrent
//! keep-alive clients, with 1,000, 10,000 and 100,000 pools (each with a substrate)
//! stored, on a SQLite file and, when `BC_TEST_POSTGRES_URL` is set, on PostgreSQL. Each
//! is set against the same server's cheapest authenticated method (`providerAccounts.get`
//! of the tenant's one account) measured in the same runs, and the scale curve is summed up as
//! (requests/s ÷ the ceiling's in the same round) at 100,000 pools ÷ the same at 1,000 (1.0:
//! flat, the lookups are indexed; the ceiling reads no pools, so dividing by it cancels the
//! shared machine's drift between the two sizes' runs).
//! `--quick`: 1,000 pools only, three short runs. `--ceiling-candidates`: instead, the
//! cheap authenticated methods side by side at 1,000 pools on SQLite, each against the
//! ceiling, to check that the ceiling is the cheapest. `--store`, `--sizes`: one store,
//! chosen sizes. `--costs`: instead of rates, what one request of each method costs
//! (statements, transactions, CPU time), alone and under 64 clients.
//! `--help` says it all.
//!
//! Invariant: it measures and emits only (bc_testkit::bench), never asserts a time. The
//! methods are measured in interleaved windows (ceiling, get, list, create, then again,
//! each round opened by the next method), so each method's run is paired with a ceiling
//! run under the same conditions; every
//! loop is bounded by a window's end; the seeding writes many rows per commit; the server
//! binds loopback and stops with the run.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bc_api::{Api, Ports, Settings};
use bc_domain::model::{ApiToken, Grant, QuotaResource, Role, Scope, SealedSecret, SecretString};
use bc_domain::ports::{ProviderCredentials, SecretBox, Store, SystemClock, UnitOfWork, Write};
use bc_domain::token::ApiTokenSecret;
use bc_sim::testing::Cloud;
use bc_store::testing::{self as rows, Backend};
use bc_store::{AeadSecretBox, SqlStore};
use bc_testkit::bench::{self, Against, Better, Figure, Reference};
use rand::RngExt;

const USAGE: &str = "\
api_bench: the HTTP API under 64 concurrent clients (docs/benchmarks.md, \"api\").

  --quick                 1,000 pools only, three rounds of 0.4-second windows
  --store NAME            only this store: sqlite-file or postgres (postgres needs
                          BC_TEST_POSTGRES_URL; without it only sqlite-file runs)
  --sizes N[,N…]          pools stored, increasing (default 1000,10000,100000)
  --costs                 what one request of each method costs instead of rates: store
                          statements (by shape), transactions and pool checkouts, and
                          CPU time (this process: server, client and SQLite), one client
                          at a time, then per answered request under 64 clients
  --method NAME           with --costs: only this method (e.g. pools.list), for a
                          profiler attached to the process
  --requests N            with --costs: N requests from the one client (default 1000)
                          and no 64-client window, so a profiler's count is exact: run
                          twice with different N and subtract (docs/benchmarks.md)
  --ceiling-candidates    the cheap authenticated methods side by side (SQLite, 1,000)
  --help                  this text
";

/// The benchmark's name in the report.
const BENCH: &str = "api";
/// Concurrent keep-alive clients.
const CLIENTS: usize = 64;
/// A request that takes longer is an error (a stall shows in the report, never hangs it).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Pools per seeding commit (each with its substrate: twice as many rows).
const SEED_BATCH: usize = 2_000;
/// Pools that load balancers are created on (each with a quota row).
const LB_POOLS: usize = 1_000;
/// The tenant.
const TENANT: &str = "acme";
/// Name of the ceiling in the report.
const CEILING: &str = "providerAccounts.get, 1 account (cheapest authenticated method)";

/// How long and how often to measure.
struct Plan {
    /// Pools stored, in increasing order (each size adds to the previous one's rows).
    sizes: &'static [usize],
    /// Measured windows per method and size.
    runs: usize,
    /// Length of one window.
    window: Duration,
    /// Requests per method before the first window (connections open, caches warm).
    warm_up: Duration,
}

const FULL: Plan = Plan {
    sizes: &[1_000, 10_000, 100_000],
    runs: 5,
    window: Duration::from_secs(1),
    warm_up: Duration::from_millis(500),
};
const QUICK: Plan = Plan {
    sizes: &[1_000],
    runs: 3,
    window: Duration::from_millis(400),
    warm_up: Duration::from_millis(200),
};

/// The methods measured, the ceiling first.
const METHODS: [&str; 5] = [
    "providerAccounts.get",
    "kubernetesSubstrates.get",
    "pools.list",
    "loadBalancers.create",
    "providerAccounts.list",
];

/// What one window saw.
#[derive(Default, Clone)]
struct Window {
    /// 200 answers completed within the window, per second.
    rps: f64,
    /// Their p99 latency, ms.
    p99_ms: f64,
    /// Answers other than 200, and requests that failed or timed out.
    errors: u64,
    /// 200 answers that completed after the window ended (not in `rps`).
    late: u64,
}

/// The command line.
struct Options {
    /// Only this store (`sqlite-file`, `postgres`).
    store: Option<String>,
    /// Sizes instead of the plan's.
    sizes: Option<Vec<usize>>,
    /// Costs per request instead of rates.
    costs: bool,
    /// With `costs`: only this method.
    method: Option<String>,
    /// With `costs`: this many one-client requests, and no window of [`CLIENTS`].
    requests: Option<usize>,
}

impl Options {
    fn parse() -> Result<Self, String> {
        let mut o =
            Options { store: None, sizes: None, costs: false, method: None, requests: None };
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            match a.as_str() {
                "--quick" | "--ceiling-candidates" => {}
                "--costs" => o.costs = true,
                "--store" => o.store = Some(args.next().ok_or("--store needs a name")?),
                "--method" => o.method = Some(args.next().ok_or("--method needs a name")?),
                "--requests" => {
                    let n = args.next().ok_or("--requests needs a number")?;
                    o.requests = Some(n.parse().map_err(|e| format!("--requests {n}: {e}"))?);
                }
                "--sizes" => {
                    let list = args.next().ok_or("--sizes needs a list")?;
                    let sizes = list
                        .split(',')
                        .map(|n| n.trim().parse::<usize>().map_err(|e| format!("--sizes {n}: {e}")))
                        .collect::<Result<Vec<_>, _>>()?;
                    if sizes.is_empty() || sizes.windows(2).any(|w| w[0] >= w[1]) {
                        return Err("--sizes must increase".into());
                    }
                    o.sizes = Some(sizes);
                }
                other => return Err(format!("unknown argument {other}")),
            }
        }
        if let Some(s) = &o.store
            && s != "sqlite-file"
            && s != "postgres"
        {
            return Err(format!("--store {s}: sqlite-file or postgres"));
        }
        Ok(o)
    }
}

#[tokio::main]
async fn main() {
    bc_sim::install_crypto();
    if std::env::args().any(|a| a == "--help" || a == "-h") {
        print!("{USAGE}");
        return;
    }
    let options = match Options::parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}\n\n{USAGE}");
            std::process::exit(2);
        }
    };
    let plan = if bench::quick() { &QUICK } else { &FULL };
    if std::env::args().any(|a| a == "--ceiling-candidates") {
        rows::run(Backend::File, |store| ceiling_candidates(plan, store)).await;
        return;
    }
    let sizes: Vec<usize> = options.sizes.clone().unwrap_or_else(|| plan.sizes.to_vec());
    for (backend, name) in [(Backend::File, "sqlite-file"), (Backend::Postgres, "postgres")] {
        if backend == Backend::Postgres && bc_testkit::postgres_url().is_none() {
            continue;
        }
        if options.store.as_deref().is_some_and(|s| s != name) {
            continue;
        }
        if options.costs {
            let only = options.method.as_deref();
            let requests = options.requests;
            rows::run(backend, |store| costs(name, &sizes, only, requests, store)).await;
        } else {
            rows::run(backend, |store| run_backend(name, plan, &sizes, store)).await;
        }
    }
}

/// Every size on one backend: seed up to the size, measure, emit; then the scale curve.
async fn run_backend(backend: &'static str, plan: &Plan, sizes: &[usize], store: Arc<SqlStore>) {
    // The per-read plan check of the test harness is for tests, not for measuring.
    store.enforce_index_plans(false);
    let fixture = Fixture::new(store.clone()).await;
    let mut pool_ids = Vec::new();
    let mut by_size: Vec<(usize, Vec<Vec<Window>>)> = Vec::new();
    for &size in sizes {
        let started = Instant::now();
        fixture.seed(&mut pool_ids, size).await;
        eprintln!("{backend}: {size} pools with substrates stored ({:.1?})", started.elapsed());
        let server = fixture.serve().await;
        let windows = measure_all(&server, &fixture, requests(&fixture, &pool_ids), plan).await;
        server.stop();
        emit_size(backend, size, &windows);
        by_size.push((size, windows));
    }
    let (Some((small, first)), Some((large, last))) = (by_size.first(), by_size.last()) else {
        return;
    };
    if small == large {
        return;
    }
    // Each size's req/s is first taken relative to the ceiling of the same round (the
    // ceiling reads no pools, so its own drift is the machine's), then large ÷ small: the
    // shared machine's noise between the two sizes' runs cancels out.
    let relative = |windows: &[Vec<Window>], m: usize| -> Vec<f64> {
        windows[m].iter().zip(&windows[0]).map(|(w, c)| w.rps / c.rps).collect()
    };
    for (m, method) in METHODS.iter().enumerate().skip(1) {
        let per_run: Vec<f64> =
            relative(first, m).iter().zip(relative(last, m)).map(|(a, b)| b / a).collect();
        bench::emit(
            &Figure::new(
                BENCH,
                format!(
                    "{backend} · {method}: (req/s ÷ ceiling) at {large} pools ÷ at {small} pools"
                ),
                "×",
                Better::Higher,
                per_run,
            )
            .against(Against::constant(
                Reference::Target,
                "flat (indexed lookups)",
                1.0,
            )),
        );
    }
}

/// Emits one size's figures: requests/s and p99 of each method, against the ceiling's.
fn emit_size(backend: &str, size: usize, windows: &[Vec<Window>]) {
    let ceiling = &windows[0];
    let ceiling_rps: Vec<f64> = ceiling.iter().map(|w| w.rps).collect();
    let ceiling_p99: Vec<f64> = ceiling.iter().map(|w| w.p99_ms).collect();
    let ceiling_errors: u64 = ceiling.iter().map(|w| w.errors).sum();
    if ceiling_errors > 0 {
        eprintln!("{backend}: {ceiling_errors} errors on the ceiling ({CEILING})");
    }
    for (m, method) in METHODS.iter().enumerate().skip(1) {
        let w = &windows[m];
        let errors: u64 = w.iter().map(|w| w.errors).sum();
        let prefix = format!("{backend} · {size} pools · {method}");
        bench::emit(
            &Figure::new(
                BENCH,
                format!("{prefix} req/s"),
                "req/s",
                Better::Higher,
                w.iter().map(|w| w.rps).collect(),
            )
            .against(Against {
                reference: Reference::Ceiling,
                name: format!("{CEILING}, req/s"),
                samples: ceiling_rps.clone(),
            })
            .with_errors(errors + ceiling_errors),
        );
        bench::emit(
            &Figure::new(
                BENCH,
                format!("{prefix} p99"),
                "ms",
                Better::Lower,
                w.iter().map(|w| w.p99_ms).collect(),
            )
            .against(Against {
                reference: Reference::Ceiling,
                name: format!("{CEILING}, p99"),
                samples: ceiling_p99.clone(),
            }),
        );
    }
}

/// The server's key for provider credentials.
fn secret_box() -> AeadSecretBox {
    AeadSecretBox::new(&[7u8; 32]).expect("key")
}

/// The store's fixed rows and the API token.
struct Fixture {
    store: Arc<SqlStore>,
    token: ApiTokenSecret,
    account_id: String,
    account: bc_domain::model::ProviderAccount,
    /// Makes load balancer names and request ids unique across windows and sizes.
    next: Arc<AtomicU64>,
}

impl Fixture {
    /// The account and an editor token of the tenant.
    async fn new(store: Arc<SqlStore>) -> Self {
        let tenant = rows::tenant(TENANT);
        let mut account = rows::account(&tenant, "main");
        // Sealed as `providerAccounts.create` seals them, with the server's key: a create
        // opens its account's provider (to ask what it offers) before it books.
        let creds = ProviderCredentials::new(SecretString::new("bench-token")).expect("a token");
        let sealed = secret_box()
            .seal(&creds.to_plaintext(), account.provider_account_id.as_str().as_bytes())
            .expect("sealed credentials");
        account.credentials = SealedSecret(sealed);
        let token = ApiTokenSecret::generate(rand::random());
        let record = ApiToken {
            token_id: rows::id(),
            token_hash: token.hash(),
            grants: vec![Grant {
                role: Role::Editor,
                scope: Scope::Tenant(tenant.clone()),
                tenant_id: Some(tenant),
            }],
            created_at: rows::t(0),
            revoked_at: None,
        };
        let uow = UnitOfWork::new()
            .write(Write::InsertAccount(account.clone()))
            .write(Write::InsertApiToken(record));
        store.commit(uow).await.expect("account and token");
        Fixture {
            store,
            token,
            account_id: account.provider_account_id.to_string(),
            account,
            next: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Adds pools (each with a substrate) until `ids` holds `size`, `SEED_BATCH` per
    /// commit; the first `LB_POOLS` get a quota load balancers are booked on.
    async fn seed(&self, ids: &mut Vec<String>, size: usize) {
        let tenant = rows::tenant(TENANT);
        while ids.len() < size {
            let mut uow = UnitOfWork::new();
            for i in ids.len()..(ids.len() + SEED_BATCH).min(size) {
                let pool = rows::pool(&tenant, &format!("p{i}"));
                let substrate = rows::substrate(&pool, &self.account, None);
                let pool_id = pool.pool_id.clone();
                ids.push(pool_id.to_string());
                uow = uow.write(Write::InsertPool(pool)).write(Write::PutSubstrate(substrate));
                if i < LB_POOLS {
                    let resource = QuotaResource::LoadBalancers;
                    uow = uow.write(Write::SetQuota { pool_id, resource, limit: 10_000_000 });
                }
            }
            self.store.commit(uow).await.expect("seed");
        }
    }

    /// The API on loopback, with the rate limit off (it would measure the limiter).
    async fn serve(&self) -> Server {
        // The production adapters on a simulated cloud (no measured method calls one).
        let cloud = Cloud::start().await;
        let secrets = Arc::new(secret_box());
        let ports = Ports {
            store: self.store.clone(),
            clock: Arc::new(SystemClock),
            providers: cloud.providers(secrets.clone()),
            clusters: cloud.clusters(),
            secrets,
        };
        let settings = Settings { rate_limit: None, ..Settings::default() };
        let router = Api::new(ports).settings(settings).router();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let addr = listener.local_addr().expect("address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Server { addr, task, _cloud: cloud }
    }
}

/// A running API server.
struct Server {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
    _cloud: Cloud,
}

impl Server {
    fn stop(self) {
        self.task.abort();
    }
}

/// A request body maker for one method.
type Body = Arc<dyn Fn() -> String + Send + Sync>;

/// Path and body maker of each of [`METHODS`].
fn requests(fixture: &Fixture, pool_ids: &[String]) -> Vec<(&'static str, Body)> {
    let ids: Arc<Vec<String>> = Arc::new(pool_ids.to_vec());
    let get: Body = {
        let ids = ids.clone();
        Arc::new(move || {
            let id = &ids[rand::rng().random_range(0..ids.len())];
            format!(r#"{{"tenantId":"{TENANT}","poolId":"{id}"}}"#)
        })
    };
    let create: Body = {
        let (ids, next, account) = (ids.clone(), fixture.next.clone(), fixture.account_id.clone());
        Arc::new(move || {
            let n = next.fetch_add(1, Ordering::Relaxed);
            let pool = &ids[rand::rng().random_range(0..LB_POOLS.min(ids.len()))];
            format!(
                r#"{{"tenantId":"{TENANT}","poolId":"{pool}","providerAccountId":"{account}","name":"lb-{n}","type":"regional","region":"nyc1","forwardingRules":[{{"entryProtocol":"http","entryPort":80,"targetProtocol":"http","targetPort":8080}}],"targets":{{"tag":"web"}},"requestId":"bench-{n}"}}"#
            )
        })
    };
    let account = fixture.account_id.clone();
    vec![
        // The cheapest authenticated method measured (`--ceiling-candidates`); it reads
        // no pools, so the scale curve's division by it cancels only the machine's drift.
        (
            "/api/compute/providerAccounts/get",
            Arc::new(move || {
                format!(r#"{{"tenantId":"{TENANT}","providerAccountId":"{account}"}}"#)
            }),
        ),
        ("/api/compute/kubernetesSubstrates/get", get),
        // The first page (100 pools, the default page size).
        ("/api/compute/pools/list", Arc::new(|| format!(r#"{{"tenantId":"{TENANT}"}}"#))),
        ("/api/compute/loadBalancers/create", create),
        // The ceiling until issue 31's ninth round, kept so earlier ratios can be redone.
        (
            "/api/compute/providerAccounts/list",
            Arc::new(|| format!(r#"{{"tenantId":"{TENANT}"}}"#)),
        ),
    ]
}

/// The cheap authenticated methods measured side by side (1,000 pools, SQLite file),
/// each against the ceiling: which one is the cheapest, to serve as the ceiling.
async fn ceiling_candidates(plan: &Plan, store: Arc<SqlStore>) {
    store.enforce_index_plans(false);
    let fixture = Fixture::new(store).await;
    let mut pool_ids = Vec::new();
    fixture.seed(&mut pool_ids, 1_000).await;
    let server = fixture.serve().await;
    let pool = pool_ids[0].clone();
    let tenant_only = format!(r#"{{"tenantId":"{TENANT}"}}"#);
    let fixed = |body: String| -> Body { Arc::new(move || body.clone()) };
    let mut candidates = requests(&fixture, &pool_ids);
    candidates.truncate(1);
    let more = [
        ("/api/compute/providerAccounts/list", tenant_only.clone()),
        (
            "/api/compute/events/list",
            // Past any seq there will be: an indexed lookup that finds nothing.
            format!(r#"{{"tenantId":"{TENANT}","afterSeq":1000000000000,"limit":1}}"#),
        ),
        ("/api/compute/kubernetesClusters/list", tenant_only.clone()),
        ("/api/compute/pools/get", format!(r#"{{"tenantId":"{TENANT}","poolId":"{pool}"}}"#)),
        ("/api/compute/quotas/list", format!(r#"{{"tenantId":"{TENANT}","poolId":"{pool}"}}"#)),
    ];
    candidates.extend(more.into_iter().map(|(path, body)| (path, fixed(body))));
    let paths: Vec<&str> = candidates.iter().map(|(p, _)| *p).collect();
    let windows = measure_all(&server, &fixture, candidates, plan).await;
    server.stop();
    let ceiling: Vec<f64> = windows[0].iter().map(|w| w.rps).collect();
    for (path, w) in paths.iter().zip(&windows).skip(1) {
        let method = path.trim_start_matches("/api/compute/").replace('/', ".");
        bench::emit(
            &Figure::new(
                BENCH,
                format!("ceiling candidate · sqlite-file · 1000 pools · {method} req/s"),
                "req/s",
                Better::Higher,
                w.iter().map(|w| w.rps).collect(),
            )
            .against(Against {
                reference: Reference::Ceiling,
                name: format!("{CEILING}, req/s"),
                samples: ceiling.clone(),
            })
            .with_errors(w.iter().map(|w| w.errors).sum()),
        );
    }
}

/// Warms each method up, then measures `plan.runs` rounds of one window per method, in
/// turn, each round starting one method later; per method, its windows.
async fn measure_all(
    server: &Server,
    fixture: &Fixture,
    requests: Vec<(&'static str, Body)>,
    plan: &Plan,
) -> Vec<Vec<Window>> {
    let clients = clients(server, fixture.token.expose());
    for (path, body) in &requests {
        let _ = window(&clients, path, body, plan.warm_up).await;
    }
    let mut out = vec![Vec::new(); requests.len()];
    for round in 0..plan.runs {
        // Each method opens a round as often as the others: none pays for its position.
        for j in 0..requests.len() {
            let m = (round + j) % requests.len();
            let (path, body) = &requests[m];
            out[m].push(window(&clients, path, body, plan.window).await);
        }
    }
    out
}

/// A keep-alive client of `server` with `token` and no retry, so every answer other than
/// 200 counts as an error.
fn bench_client(server: &Server, token: &str) -> bc_client::Client {
    bc_client::Client::builder(&format!("http://{}", server.addr))
        .token(token)
        .timeout(REQUEST_TIMEOUT)
        .retry(bc_client::Retry { attempts: 1, ..bc_client::Retry::default() })
        .build()
        .expect("a client")
}

/// [`CLIENTS`] keep-alive clients, built before any window: building one loads the
/// system's TLS roots (~3 ms), which a window's clock must not include.
fn clients(server: &Server, token: &str) -> Vec<bc_client::Client> {
    (0..CLIENTS).map(|_| bench_client(server, token)).collect()
}

/// `clients` calling `path` back to back for `length`: the 200 answers that
/// completed within it, per second, and their p99. A request still in flight at the end
/// is neither counted nor an error. The clients read each answer's bytes and do not parse
/// them: they run on the server's two cores, and parsing a page of 100 pools into a
/// `Value` cost them about as much as the server's page (docs/benchmarks.md "The
/// pools.list page"); what is measured is the server.
async fn window(
    clients: &[bc_client::Client],
    path: &str,
    body: &Body,
    length: Duration,
) -> Window {
    let method = path.trim_start_matches("/api/compute/").replacen('/', ".", 1);
    let until = Instant::now() + length;
    let mut tasks = Vec::with_capacity(clients.len());
    for client in clients {
        // Each client calls back to back on its own connection.
        let (client, method, body) = (client.clone(), method.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            let (mut latencies, mut errors, mut late) = (Vec::new(), 0u64, 0u64);
            loop {
                let sent = Instant::now();
                if sent >= until {
                    break;
                }
                let input = serde_json::from_str(&body()).expect("a JSON body");
                let ok = client.call_method_raw(&method, input).await.is_ok();
                let done = Instant::now();
                match (ok, done <= until) {
                    (true, true) => latencies.push(done - sent),
                    (true, false) => late += 1,
                    (false, _) => errors += 1,
                }
            }
            (latencies, errors, late)
        }));
    }
    let (mut all, mut errors, mut late) = (Vec::new(), 0, 0);
    for t in tasks {
        let (l, e, after) = t.await.expect("client task");
        all.extend(l);
        errors += e;
        late += after;
    }
    all.sort_unstable();
    let p99 = all
        .get(((all.len() as f64) * 0.99) as usize)
        .or(all.last())
        .map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0);
    Window { rps: all.len() as f64 / length.as_secs_f64(), p99_ms: p99, errors, late }
}

/// Requests per method in `--costs`' one-client run.
const COST_REQUESTS: usize = 1_000;

/// The CPU time of every thread of this process so far (`/proc/self/task/*/schedstat`,
/// nanoseconds on CPU); threads that ended no longer count, so take differences only
/// over a span in which none ends (the runtime's and the pool's threads live on).
fn cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
    tasks
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()))
        .sum()
}

/// What a span of requests cost, per answered request.
struct Cost {
    answered: u64,
    errors: u64,
    stats: bc_store::StoreStats,
    cpu_ns: u64,
    wall: Duration,
}

impl Cost {
    fn print(&self, backend: &str, size: usize, method: &str, how: &str) {
        let n = self.answered.max(1) as f64;
        let per = |x: u64| x as f64 / n;
        println!(
            "{backend} · {size} pools · {method} · {how}: {} answered, {} errors; per request: \
             {:.2} statements, {:.2} transactions, {:.2} checkouts, {:.0} µs CPU, \
             {:.0} µs wall",
            self.answered,
            self.errors,
            per(self.stats.statements),
            per(self.stats.transactions),
            per(self.stats.checkouts),
            self.cpu_ns as f64 / n / 1000.0,
            self.wall.as_secs_f64() * 1e6 / n,
        );
        let shapes: BTreeMap<&String, f64> =
            self.stats.shapes.iter().map(|(k, v)| (k, *v as f64 / n)).collect();
        for (shape, per) in shapes {
            println!("    {per:>6.2}  {shape}");
        }
    }
}

/// Measures `run` (which answers how many requests it made, and how many failed).
async fn cost_of<F, Fut>(store: &SqlStore, run: F) -> Cost
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = (u64, u64)>,
{
    let (stats, cpu) = (store.stats(), cpu_ns());
    let started = Instant::now();
    let (answered, errors) = run().await;
    let wall = started.elapsed();
    Cost {
        answered,
        errors,
        stats: store.stats().since(&stats),
        cpu_ns: cpu_ns().saturating_sub(cpu),
        wall,
    }
}

/// `--costs`: per method, what one request costs with one client calling
/// [`COST_REQUESTS`] (or `requests`) times back to back, then, unless `requests` was
/// given, per answered request of a one-second window of [`CLIENTS`] clients (where the
/// store groups what arrives together).
async fn costs(
    backend: &'static str,
    sizes: &[usize],
    only: Option<&str>,
    exact: Option<usize>,
    store: Arc<SqlStore>,
) {
    let alone_requests = exact.unwrap_or(COST_REQUESTS);
    store.enforce_index_plans(false);
    store.count_statement_shapes(true);
    let fixture = Fixture::new(store.clone()).await;
    let mut pool_ids = Vec::new();
    for &size in sizes {
        fixture.seed(&mut pool_ids, size).await;
        let server = fixture.serve().await;
        let token = fixture.token.expose();
        // The 64-client windows' clients, built once per server, outside every measure.
        let clients = clients(&server, token);
        for (path, body) in requests(&fixture, &pool_ids) {
            let method = path.trim_start_matches("/api/compute/").replacen('/', ".", 1);
            if only.is_some_and(|m| m != method) {
                continue;
            }
            let client = bench_client(&server, token);
            let call = |client: bc_client::Client, body: Body, method: String| async move {
                let input = serde_json::from_str(&body()).expect("a JSON body");
                client.call_method_raw(&method, input).await
            };
            match call(client.clone(), body.clone(), method.clone()).await {
                Ok(answer) => println!(
                    "{backend} · {size} pools · {method}: the answer is {} bytes of JSON",
                    answer.len()
                ),
                Err(e) => eprintln!("{backend} · {method}: the first call failed: {e}"),
            }
            for _ in 0..50 {
                let _ = call(client.clone(), body.clone(), method.clone()).await;
            }
            // For a profiler started with collection off (`valgrind --tool=callgrind
            // --collect-atstart=no`): what follows is the measured part.
            eprintln!("{backend} · {size} pools · {method}: measuring");
            let alone = cost_of(&store, || async {
                let mut ok = 0;
                for _ in 0..alone_requests {
                    ok +=
                        u64::from(call(client.clone(), body.clone(), method.clone()).await.is_ok());
                }
                (ok, alone_requests as u64 - ok)
            })
            .await;
            alone.print(backend, size, &method, "1 client");
            if exact.is_some() {
                continue;
            }
            // The window's clients warm up first, as in the rate runs, so the measured
            // window is the steady state.
            let _ = window(&clients, path, &body, QUICK.warm_up).await;
            let together = cost_of(&store, || async {
                let w = window(&clients, path, &body, Duration::from_secs(1)).await;
                (w.rps.round() as u64 + w.late, w.errors)
            })
            .await;
            together.print(backend, size, &method, &format!("{CLIENTS} clients, 1 s"));
            eprintln!("{backend} · {size} pools · {method}: measured");
        }
        server.stop();
    }
}
