//! `cargo xtask bench reconcile`: the reconcilers at scale against the simulator's direct
//! face (zero delays) and the real store (SQLite in memory), each figure printed with
//! the target it is judged by (issue 10, item 8).
//!
//! Each size runs in a child process of its own, so its peak RSS (`VmHWM`) is its own.
//! Per size N: converge N load balancers plus N/10 substrates (3 flavors each) on a
//! stepped clock (objects/s; provider calls per load balancer); then one simulated hour
//! of steady state (provider calls per hour per account, against 6·⌈N/200⌉+6 and
//! against 60·N for per-object polling); then, with the runtime's real claim loop
//! running behind the N steady objects, the wall time from enqueue to a new object's
//! first activation and from an API-style write (commit + work notify) to its first
//! provider call (p50/p99 over samples). `--size N` adds a size that only seeds and
//! measures peak RSS at N objects.
//!
//! Invariant: every loop is bounded in rounds or samples; nothing but wall time is
//! measured by sleeping; a target missed is printed as such, never hidden.
//!
//! Usage: `cargo xtask bench reconcile [-- --quick | --sizes 1000,10000 | --rss 100000]`.

use std::collections::{HashMap, HashSet};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bc_domain::ResourceState;
use bc_domain::ports::{Clock, LoadBalancerRepo, PageRequest, SubstrateRepo, WorkKind};
use bc_domain::rules::budget::BudgetConfig;
use bc_reconcile::runtime::{ActivationReport, ActivationResult};
use bc_reconcile::service::reconciler_of;
use bc_reconcile::testing::{Env, SeqEntropy, Stepper, create_policy, flavor};
use bc_reconcile::{
    Activation, Deps, Entropy, Outcome, ReconcileError, Reconciler, Runtime, RuntimeConfig,
    SharedObserver, StoreBudget,
};
use bc_sim::SimConfig;
use bc_sim::config::{Delays, RateLimits};
use bc_sim::model::routes;
use bc_sim::testing::NODE_SIZE;
use tokio_util::sync::CancellationToken;

/// Records when each key's first activation started (wall time).
struct Probe {
    inner: Arc<dyn Reconciler>,
    first: Arc<Mutex<HashMap<String, Instant>>>,
}

#[async_trait]
impl Reconciler for Probe {
    fn kind(&self) -> WorkKind {
        self.inner.kind()
    }
    async fn reconcile(&self, deps: &Deps, a: &Activation) -> Result<Outcome, ReconcileError> {
        self.first.lock().unwrap().entry(a.key().to_owned()).or_insert_with(Instant::now);
        self.inner.reconcile(deps, a).await
    }
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn zero_delays() -> SimConfig {
    let z = Duration::ZERO;
    SimConfig {
        delays: Delays {
            cluster_provision: z,
            node_provision: z,
            node_delete: z,
            cluster_upgrade: z,
            cluster_delete: z,
            load_balancer_provision: z,
        },
        // The converge figure measures the reconcilers, not DigitalOcean's 250/min: the
        // simulator and the budget are opened wide (the steady hour is far below both).
        rate_limits: RateLimits { per_hour: u32::MAX / 2, per_minute: u32::MAX / 2 },
        ..SimConfig::default()
    }
}

/// The load balancer provider calls so far (every load balancer route).
fn lb_calls(env: &Env) -> u64 {
    let m = env.sim.state().model();
    m.request_counts()
        .iter()
        .filter(|(k, _)| k.contains(routes::LOAD_BALANCERS))
        .map(|(_, n)| n)
        .sum()
}

fn line(figure: &str, value: String, target: String, ok: Option<bool>) {
    let verdict = match ok {
        Some(true) => "met",
        Some(false) => "MISSED",
        None => "-",
    };
    println!("| {figure} | {value} | {target} | {verdict} |");
}

struct World {
    env: Env,
    runtime: Arc<Runtime>,
    first: Arc<Mutex<HashMap<String, Instant>>>,
}

async fn world() -> World {
    let env = Env::with_config(zero_delays()).await;
    let wide = BudgetConfig::per_minute_and_hour(u32::MAX / 4, u32::MAX / 2);
    let budget = Arc::new(StoreBudget::new(env.store.clone(), wide));
    let observer = Arc::new(SharedObserver::new(
        Arc::new(bc_sim::direct::DirectRegistry::new(
            env.sim.state().clone(),
            env.secret_box.clone(),
        )),
        budget,
        env.clock.clone(),
    ));
    let deps = Deps { observer, ..env.deps.clone() };
    let first = Arc::new(Mutex::new(HashMap::new()));
    let entropy: Arc<dyn Entropy> = Arc::new(SeqEntropy::default());
    let reconcilers = WorkKind::ALL
        .into_iter()
        .map(|k| {
            Arc::new(Probe { inner: reconciler_of(k, entropy.clone()), first: first.clone() })
                as Arc<dyn Reconciler>
        })
        .collect();
    let mut config = RuntimeConfig::new("bench");
    config.concurrency = 64;
    let runtime = Arc::new(Runtime::new(deps, reconcilers, config).expect("runtime"));
    World { env, runtime, first }
}

/// Seeds `n` load balancers and `n / 10` substrates the way the API writes them.
async fn seed(w: &World, n: usize) {
    let env = &w.env;
    let pool = env.lb_pool("lbs", u32::try_from(n + 1_000).unwrap_or(u32::MAX)).await;
    for i in 0..n {
        env.create_load_balancer(&pool, &format!("lb-{i}"), bc_store::testing::lb_spec()).await;
    }
    let acct = env.account.provider_account_id.clone();
    for i in 0..n / 10 {
        let flavors =
            vec![flavor("cpu", NODE_SIZE, 1), flavor("mem", NODE_SIZE, 1), flavor("arm", "c-4", 1)];
        env.create_pool(&format!("sub-{i}"), create_policy(&acct, "latest", flavors)).await;
    }
}

/// Whether every load balancer and every substrate is `ready` (swept page by page:
/// called only once the activations say the load balancers are steady).
async fn converged(w: &World, n: usize) -> bool {
    let store = &w.env.store;
    let mut ready = 0;
    let mut page = PageRequest::first(500);
    loop {
        let p = store.load_balancer_sweep(&page).await.expect("sweep");
        ready += p.items.iter().filter(|l| l.status.state == ResourceState::Ready).count();
        match p.next {
            Some(next) => page = PageRequest { after: Some(next), limit: 500 },
            None => break,
        }
    }
    let mut subs = 0;
    let mut page = PageRequest::first(500);
    loop {
        let p = store.substrate_sweep(&page).await.expect("sweep");
        subs += p.items.iter().filter(|s| s.state == ResourceState::Ready).count();
        match p.next {
            Some(next) => page = PageRequest { after: Some(next), limit: 500 },
            None => break,
        }
    }
    ready >= n && subs >= n / 10
}

/// One round; when nothing was due, the clock moves to the next due time but at least
/// [`QUANTUM`] ahead, so items that come due a few jittered milliseconds apart are
/// claimed together, as the production loop (which claims what is due when it wakes)
/// does, rather than one round per millisecond.
async fn quantum_step(stepper: &Stepper) -> Vec<ActivationReport> {
    let reports = stepper.round().await.expect("store");
    if reports.is_empty() {
        let now = stepper.clock().now();
        let next = stepper.next_due().await.expect("store").unwrap_or(now);
        stepper.clock().set(next.max(now + QUANTUM));
    }
    reports
}

/// The stepped clock's granularity while converging.
const QUANTUM: time::Duration = time::Duration::seconds(1);

async fn one_size(n: usize, samples: usize) {
    let w = world().await;
    let seeding = Instant::now();
    seed(&w, n).await;
    let seeded_in = seeding.elapsed();
    let stepper = Stepper::new(w.runtime.clone(), w.env.clock.clone());

    // Converge.
    let from_clock = w.env.clock.now();
    let started = Instant::now();
    let mut steps = 0;
    let mut steady: HashSet<String> = HashSet::new();
    let mut lbs_at = None;
    while steps < 100_000 {
        let reports = quantum_step(&stepper).await;
        steps += 1;
        for r in reports.iter().filter(|r| r.kind == WorkKind::ProviderResources) {
            if matches!(r.result, ActivationResult::Steady { .. }) {
                steady.insert(r.key.clone());
            } else {
                steady.remove(&r.key);
            }
        }
        if steady.len() >= n && lbs_at.is_none() {
            lbs_at = Some((started.elapsed(), steps));
        }
        if steady.len() >= n && steps % 20 == 0 && converged(&w, n).await {
            break;
        }
    }
    let wall = started.elapsed();
    eprintln!(
        "load balancers steady after {lbs_at:?}; all after {wall:?}, {steps} steps, clock +{}",
        w.env.clock.now() - from_clock
    );
    let objects = n + n / 10;
    let per_s = objects as f64 / wall.as_secs_f64();
    let per_lb = lb_calls(&w.env) as f64 / n as f64;
    // Let the substrates' nodes join (bcd in the simulator, the join stand-in), so the
    // steady hour is steady.
    for _ in 0..200 {
        bc_sim::testing::bounded(bc_sim::bcd::run_once(w.env.sim.state())).await;
        w.env.record_joins().await;
        let reports = stepper.step(Duration::from_secs(60)).await.expect("store");
        if reports.is_empty() {
            break;
        }
    }
    // Steady: one simulated hour, every resync on its jittered schedule.
    let before = w.env.sim.state().model().request_counts();
    let from = w.env.clock.now();
    stepper.run_until(from + time::Duration::hours(1), 1_000_000).await.expect("store");
    let after = w.env.sim.state().model().request_counts();
    let mut per_hour = 0;
    for (route, n) in &after {
        let d = n - before.get(route).copied().unwrap_or(0);
        if d > 0 {
            eprintln!("steady hour: {route}: {d}");
        }
        per_hour += d;
    }
    let target = 6 * n.div_ceil(200) + 6;
    let polling = 60 * n;

    // Latency behind the N steady objects: the real claim loop, woken by the notify.
    let cancel = CancellationToken::new();
    let running = tokio::spawn(w.runtime.clone().run(cancel.clone()));
    let notify = w.runtime.work_notify();
    let pool = w.env.lb_pool("probe", u32::try_from(samples + 1).unwrap_or(u32::MAX)).await;
    let mut to_first = Vec::new();
    let mut to_call = Vec::new();
    for i in 0..samples {
        let posts =
            w.env.sim.state().model().request_count(&routes::key("POST", routes::LOAD_BALANCERS));
        let t0 = Instant::now();
        let lb = w
            .env
            .create_load_balancer(&pool, &format!("p-{i}"), bc_store::testing::lb_spec())
            .await;
        notify.notify_waiters();
        let key = lb.load_balancer_id.to_string();
        let mut reconciled = None;
        let mut called = None;
        for _ in 0..20_000 {
            if reconciled.is_none() {
                reconciled = w.first.lock().unwrap().get(&key).map(|t| t.duration_since(t0));
            }
            let now = w
                .env
                .sim
                .state()
                .model()
                .request_count(&routes::key("POST", routes::LOAD_BALANCERS));
            if called.is_none() && now > posts {
                called = Some(t0.elapsed());
            }
            if reconciled.is_some() && called.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        to_first.push(reconciled.unwrap_or(Duration::MAX));
        to_call.push(called.unwrap_or(Duration::MAX));
    }
    cancel.cancel();
    let _ = running.await;
    to_first.sort();
    to_call.sort();
    let pct = |v: &[Duration], p: f64| {
        v[((v.len() as f64 * p).ceil() as usize).saturating_sub(1).min(v.len() - 1)]
    };
    let first_max = *to_first.last().unwrap_or(&Duration::MAX);
    let call_p99 = pct(&to_call, 0.99);

    println!("\n### N = {n} load balancers + {} substrates (3 flavors each)\n", n / 10);
    println!("| figure | value | target | verdict |\n|---|---|---|---|");
    line(
        "seeding (API-style writes)",
        format!("{:.1} s", seeded_in.as_secs_f64()),
        "-".into(),
        None,
    );
    line(
        "converge wall time",
        format!("{:.2} s ({steps} steps)", wall.as_secs_f64()),
        "-".into(),
        None,
    );
    line(
        "objects/s",
        format!("{per_s:.0}"),
        "≥ 500/s at 10,000".into(),
        (n >= 10_000).then_some(per_s >= 500.0),
    );
    line(
        "provider calls per load balancer",
        format!("{per_lb:.3}"),
        "≤ 1.5".into(),
        Some(per_lb <= 1.5),
    );
    line(
        "steady calls/h/account",
        format!("{per_hour}"),
        format!("≤ {target} (6·⌈N/200⌉+6)"),
        Some(per_hour as usize <= target),
    );
    line(
        "ratio to per-object polling (60·N/h)",
        format!("1 : {:.0}", polling as f64 / per_hour.max(1) as f64),
        format!("60·N = {polling}/h"),
        None,
    );
    line(
        "enqueue → first reconcile (max)",
        format!(
            "{:.2} ms (p50 {:.2} ms)",
            first_max.as_secs_f64() * 1e3,
            pct(&to_first, 0.5).as_secs_f64() * 1e3
        ),
        "≤ 1 s behind 10,000 steady".into(),
        (n >= 10_000).then_some(first_max <= Duration::from_secs(1)),
    );
    line(
        "API write → first provider call p99",
        format!(
            "{:.2} ms (p50 {:.2} ms, {samples} samples)",
            call_p99.as_secs_f64() * 1e3,
            pct(&to_call, 0.5).as_secs_f64() * 1e3
        ),
        "≤ 50 ms".into(),
        Some(call_p99 <= Duration::from_millis(50)),
    );
    let rss = peak_rss_mib();
    line(
        "peak RSS (process: store, simulator, runtime)",
        format!("{rss:.0} MiB"),
        "≤ 200 MiB at 100,000".into(),
        None,
    );
}

/// Seeds `n` load balancers, runs one pass over all of them (every one activated once:
/// intent recorded, create called), and reports the peak RSS.
async fn rss_only(n: usize) {
    let w = world().await;
    let started = Instant::now();
    let pool = w.env.lb_pool("lbs", u32::try_from(n).unwrap_or(u32::MAX)).await;
    for i in 0..n {
        w.env.create_load_balancer(&pool, &format!("lb-{i}"), bc_store::testing::lb_spec()).await;
    }
    let stepper = Stepper::new(w.runtime.clone(), w.env.clock.clone());
    let mut rounds = 0;
    while w.first.lock().unwrap().len() < n && rounds < 1_000_000 {
        stepper.round().await.expect("store");
        rounds += 1;
    }
    let rss = peak_rss_mib();
    println!("\n### N = {n} load balancers (RSS only)\n");
    println!("| figure | value | target | verdict |\n|---|---|---|---|");
    line(
        "peak RSS (process: store, simulator, runtime)",
        format!("{rss:.0} MiB ({:.0} s)", started.elapsed().as_secs_f64()),
        "≤ 200 MiB at 100,000".into(),
        (n >= 100_000).then_some(rss <= 200.0),
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag =
        |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    if let Some(n) = flag("--child") {
        let n: usize = n.parse().expect("--child N");
        let samples: usize = flag("--samples").and_then(|s| s.parse().ok()).unwrap_or(200);
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio");
        if args.iter().any(|a| a == "--rss-only") {
            rt.block_on(rss_only(n));
        } else {
            rt.block_on(one_size(n, samples));
        }
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let sizes: Vec<usize> = flag("--sizes")
        .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| if quick { vec![1_000] } else { vec![1_000, 10_000] });
    let rss: Vec<usize> = flag("--rss")
        .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| if quick { vec![] } else { vec![100_000] });
    let samples = if quick { "50" } else { "200" };
    println!("# reconcile benchmark ({} mode)", if quick { "quick" } else { "full" });
    let exe = std::env::current_exe().expect("exe");
    let mut failed = false;
    for n in sizes {
        let status =
            Command::new(&exe).args(["--child", &n.to_string(), "--samples", samples]).status();
        failed |= !status.is_ok_and(|s| s.success());
    }
    for n in rss {
        let status = Command::new(&exe).args(["--child", &n.to_string(), "--rss-only"]).status();
        failed |= !status.is_ok_and(|s| s.success());
    }
    if failed {
        std::process::exit(1);
    }
}
