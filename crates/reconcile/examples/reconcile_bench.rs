//! `cargo xtask bench reconcile`: the reconcilers at scale against the simulator (zero
//! delays) through the production adapters — DigitalOcean over HTTP on loopback, each
//! cluster's API through the kube client in process — and the real store, every figure
//! emitted through
//! `bc_testkit::bench` with what it is judged against (issue 12, item 1).
//!
//! Each run is a child process of its own, so its peak RSS (`VmHWM`) is its own and a
//! size is repeated in fresh processes (the report's spread). Per run, N load balancers
//! plus N/10 substrates (3 flavors each) converge on a stepped clock (wall time,
//! objects/s, activations/s, provider calls per object); then a window of simulated
//! steady state (provider calls per hour per account, against per-object polling —
//! one GET per object per minute, 60·N/h, what peers do by default — and against
//! DigitalOcean's 5,000/h per-account budget); then, with the runtime's real claim loop
//! running behind the N steady objects, the wall time from an API-style write (a
//! commit and a work notify) to its first provider call. Runs on SQLite in memory, and on
//! PostgreSQL too when `BC_TEST_POSTGRES_URL` is set (`cargo xtask bench` sets it).
//!
//! Each size also runs on a GKE account (issue 27): the same N/10 substrates of three
//! flavors through the real GKE adapter (service-account key, JWT-bearer grant, GKE's
//! long-running operations), and no load balancers (GKE offers none), so its figures are
//! per provider: converge objects/s, provider calls per converged object and steady
//! provider calls per hour against GKE's budget of 3,000 requests per minute per project.
//!
//! Invariant: every loop is bounded in rounds or samples; nothing but wall time is
//! measured by sleeping; the steady window is named in the figure when it is shorter
//! than an hour (its count scaled to the hour).
//!
//! Usage: `cargo xtask bench reconcile [-- --quick]`; by hand, `--sizes 100,1000`,
//! `--repeat 3`, `--no-postgres`, `--providers digitalocean,gke`, `--baseline` (the
//! runtime and store as before issue 31, to measure against); a child alone with
//! `--ungrouped` runs the store's commits and point reads one call at a time, and
//! `--event-lock-apart` takes PostgreSQL's event lock in a statement of its own;
//! `--substrates-only` seeds no load balancers (the substrates' rounds' profile alone).
//! The converge flows as the production loop runs a burst of due work (per kind, claimed
//! again as a quarter of its slots free, `bc_reconcile::runtime::refill_at`), each
//! activation a task of its own; `--rounds` (and `--baseline`) runs it in rounds that
//! wait for their slowest activation, and `--together` (and `--baseline`) polls a round's
//! activations together in the benchmark's task.

#[path = "support/parts.rs"]
mod parts;

/// Every allocation counted by part (`parts`): the memory figures per part.
#[global_allocator]
static ALLOCATOR: parts::Counting = parts::Counting::system();

/// Sizes of the full run: the three (10,000 once, with a 20-minute steady window).
const DEFAULT_SIZES: [usize; 3] = [100, 1_000, 10_000];
/// The largest default size run on GKE (issue 27: N = 100 and 1,000).
const GKE_DEFAULT_MAX: usize = 1_000;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bc_domain::ResourceState;
use bc_domain::model::SecretString;
use bc_domain::ports::{
    Clock, ClusterApi, ClusterClient, ClusterError, LoadBalancerRepo, PageRequest, SubstrateRepo,
    WorkKind,
};
use bc_domain::rules::budget::BudgetConfig;
use bc_providers::kube::{InProcessClusters, InProcessService, KubeClusterApi};
use bc_reconcile::kinds::reconciler_of;
use bc_reconcile::runtime::{ActivationReport, ActivationResult};
use bc_reconcile::testing::{Env, OnProvider, SeqEntropy, Stepper, flavor};
use bc_reconcile::{
    Activation, Deps, Entropy, Outcome, ReconcileError, Reconciler, Runtime, RuntimeConfig,
    SharedObserver, StoreBudget,
};
use bc_sim::SimConfig;
use bc_sim::config::{Delays, RateLimits};
use bc_sim::model::routes;
use bc_sim::testing::cluster_routes;
use bc_store::SqlStore;
use bc_store::testing::Backend;
use bc_testkit::bench::{Against, Better, Figure, Reference, emit};
use http::Uri;
use parts::{Group, Part, tagged};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

/// Records when each key's first activation started (wall time), and how long the
/// reconcilers of each kind ran (the profile's split by kind).
struct Probe {
    inner: Arc<dyn Reconciler>,
    first: Arc<Mutex<HashMap<String, Instant>>>,
    spent: Arc<Mutex<BTreeMap<WorkKind, (usize, Duration)>>>,
}

#[async_trait]
impl Reconciler for Probe {
    fn kind(&self) -> WorkKind {
        self.inner.kind()
    }
    async fn reconcile(&self, deps: &Deps, a: &Activation) -> Result<Outcome, ReconcileError> {
        let started = Instant::now();
        self.first.lock().unwrap().entry(a.key().to_owned()).or_insert(started);
        let r = self.inner.reconcile(deps, a).await;
        let mut spent = self.spent.lock().unwrap();
        let e = spent.entry(self.kind()).or_default();
        e.0 += 1;
        e.1 += started.elapsed();
        r
    }
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
            load_balancer_resize_every: Duration::from_secs(60),
        },
        // The converge figure measures the reconcilers, not DigitalOcean's 250/min (nor
        // GKE's 3,000/min): the simulator and the budget are opened wide (the steady hour
        // is far below both).
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

/// Every provider call so far (all routes).
fn all_calls(env: &Env) -> u64 {
    env.sim.state().model().request_counts().values().sum()
}

struct World {
    env: Env,
    runtime: Arc<Runtime>,
    first: Arc<Mutex<HashMap<String, Instant>>>,
    /// Per kind: activations and the wall time their reconcilers ran (overlapping).
    spent: Arc<Mutex<BTreeMap<WorkKind, (usize, Duration)>>>,
}

async fn world(store: Arc<SqlStore>, on: OnProvider, baseline: bool) -> World {
    // The suite's index-plan check costs a query per read: off, as in service.
    store.enforce_index_plans(false);
    // The profile lists the statements by shape (a lock per statement: a small cost).
    store.count_statement_shapes(true);
    let env = Env::on_provider_with_production_timeout(store, zero_delays(), on).await;
    env.sim.state().model().set_gke_rate_limit(u32::MAX / 2);
    let wide = BudgetConfig::per_minute_and_hour(u32::MAX / 4, u32::MAX / 2);
    let budget = Arc::new(StoreBudget::new(env.store.clone(), wide));
    let observer = Arc::new(SharedObserver::new(
        env.cloud.all_providers(env.secret_box.clone()),
        budget,
        env.clock.clone(),
    ));
    // The same in-process cluster APIs, their answers filed under the simulator and the
    // kube clients' making under its own group (`parts`).
    let clusters = Arc::new(PartedClusters::new(cluster_routes(env.sim.state().clone())));
    let deps = Deps { observer, clusters, ..env.deps.clone() };
    let first = Arc::new(Mutex::new(HashMap::new()));
    let spent = Arc::new(Mutex::new(BTreeMap::new()));
    let entropy: Arc<dyn Entropy> = Arc::new(SeqEntropy::default());
    let reconcilers = WorkKind::ALL
        .into_iter()
        .map(|k| {
            let inner = reconciler_of(k, entropy.clone());
            Arc::new(Probe { inner, first: first.clone(), spent: spent.clone() })
                as Arc<dyn Reconciler>
        })
        .collect();
    let mut config = RuntimeConfig::new("bench");
    config.concurrency = 64;
    config.settle_together = !baseline;
    let runtime = Arc::new(Runtime::new(deps, reconcilers, config).expect("runtime"));
    World { env, runtime, first, spent }
}

/// A child run with `--substrates-only`: the N/10 substrates alone, so every statement,
/// Kubernetes call and provider call of its profile is the substrates' rounds'.
static SUBSTRATES_ONLY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A child run with `--together` (or `--baseline`): a round's activations polled
/// together in the benchmark's task, not each a task of its own on the runtime's workers
/// as the production loop runs them.
static TOGETHER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A child run with `--rounds` (or `--baseline`): the converge runs in rounds, each
/// claiming a full batch per kind and waiting for its slowest activation before the next
/// claim, as before the eleventh round, instead of flowing as the production loop runs a
/// burst of due work ([`Stepper::flow`]: claimed again as a quarter of the slots free).
static ROUNDS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// How many load balancers a run at size `n` converges on `on`: `n`, or none where the
/// provider offers none (GKE) or the run is of substrates only.
fn lbs(n: usize, on: OnProvider) -> usize {
    let only = SUBSTRATES_ONLY.load(std::sync::atomic::Ordering::Relaxed);
    if on == OnProvider::DigitalOcean && !only { n } else { 0 }
}

/// Every Kubernetes API request the simulated clusters answered so far, per operation
/// key (`get secrets`, `apply daemonsets`, `discovery`, …), summed over the clusters.
fn kube_calls(env: &Env) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for ((_, op), c) in env.sim.state().kube.request_counts() {
        *out.entry(op).or_default() += c;
    }
    out
}

/// The kube adapter reaching the simulator's clusters in process, as `Cloud::clusters`
/// makes it, with the memory of each part told apart: the kube clients being made
/// ([`Group::Connect`]) and the simulated cluster APIs answering them inside a round
/// ([`Group::InProcessCluster`]: the simulator's memory, though polled by the runtime).
struct PartedClusters {
    inner: KubeClusterApi,
}

impl PartedClusters {
    fn new(routes: Arc<dyn InProcessClusters>) -> Self {
        Self { inner: KubeClusterApi::in_process(Arc::new(SimulatorRoutes(routes))) }
    }
}

#[async_trait]
impl ClusterApi for PartedClusters {
    async fn connect(
        &self,
        kubeconfig: &SecretString,
    ) -> Result<Arc<dyn ClusterClient>, ClusterError> {
        tagged(Group::Connect, self.inner.connect(kubeconfig)).await
    }
}

/// The simulator's cluster routes, each built in [`Group::ClusterRouter`] and each answer
/// made in [`Group::InProcessCluster`].
struct SimulatorRoutes(Arc<dyn InProcessClusters>);

impl InProcessClusters for SimulatorRoutes {
    fn route(&self, server: &Uri) -> Option<InProcessService> {
        let service = parts::within(Group::ClusterRouter, || self.0.route(server))?;
        Some(InProcessService::new(
            service.map_future(|answer| tagged(Group::InProcessCluster, answer)),
        ))
    }
}

/// Seeds the load balancers and `n / 10` substrates the way the API writes them.
async fn seed(w: &World, n: usize) {
    let env = &w.env;
    let on = env.on;
    if lbs(n, on) > 0 {
        let pool = env.lb_pool("lbs", u32::try_from(n + 1_000).unwrap_or(u32::MAX)).await;
        for i in 0..lbs(n, on) {
            env.create_load_balancer(&pool, &format!("lb-{i}"), bc_store::testing::lb_spec()).await;
        }
    }
    for i in 0..n / 10 {
        let (size, other) = (on.node_size(), on.other_size());
        let flavors = vec![flavor("cpu", size, 1), flavor("mem", size, 1), flavor("arm", other, 1)];
        env.create_pool(&format!("sub-{i}"), env.create_policy("latest", flavors)).await;
    }
}

/// How many substrates are `ready`.
async fn substrates_ready(w: &World) -> usize {
    let mut subs = 0;
    let mut page = PageRequest::first(500);
    for _ in 0..100_000 {
        let p = w.env.store.substrate_sweep(&page).await.expect("sweep");
        subs += p.items.iter().filter(|s| s.state == ResourceState::Ready).count();
        match p.next {
            Some(next) => page = PageRequest { after: Some(next), limit: 500 },
            None => break,
        }
    }
    subs
}

/// Whether every load balancer and every substrate is `ready` (swept page by page:
/// called only once the activations say the load balancers are steady).
async fn converged(w: &World, n: usize) -> bool {
    // The substrates first: a tenth as many, and the last to be ready.
    if substrates_ready(w).await < n / 10 {
        return false;
    }
    let n = lbs(n, w.env.on);
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
    ready >= n
}

/// One burst of due work (or one round, `--rounds`); when nothing was due, the clock
/// moves on by whole `poll`s to the first at or after the next due time, as the
/// production loop — asleep until its poll (`RuntimeConfig::poll`) when nothing is due —
/// finds work: everything that came due since it last looked, together. (Until the
/// eleventh round the clock moved to the next due time itself, at least one `poll` on:
/// items due more than a poll ahead then ran one jittered due time per round, each
/// alone, where production claims all of them in the same wake-up.)
async fn quantum_step(stepper: &Stepper, poll: time::Duration) -> Vec<ActivationReport> {
    let reports = if ROUNDS.load(std::sync::atomic::Ordering::Relaxed) {
        tagged(Group::Round, stepper.round()).await.expect("store")
    } else {
        tagged(Group::Round, stepper.flow()).await.expect("store")
    };
    if reports.is_empty() {
        let now = stepper.clock().now();
        let next = stepper.next_due().await.expect("store").unwrap_or(now);
        stepper.clock().set(now + poll * polls_until(next - now, poll));
    }
    reports
}

/// How many whole `poll`s (at least one) reach `wait`.
fn polls_until(wait: time::Duration, poll: time::Duration) -> i32 {
    let (wait, poll) = (wait.whole_milliseconds(), poll.whole_milliseconds().max(1));
    i32::try_from(((wait + poll - 1) / poll).max(1)).unwrap_or(i32::MAX)
}

/// What one run measured, by name (printed by the child as one `RESULT` line).
type Measured = BTreeMap<String, f64>;

/// Converges `n` load balancers and `n / 10` substrates on `store`, then measures the
/// steady window (`steady_min` simulated minutes) and `samples` write-to-call latencies.
async fn measure(
    store: Arc<SqlStore>,
    on: OnProvider,
    n: usize,
    samples: usize,
    steady_min: i64,
    baseline: bool,
) -> Measured {
    let mut out = Measured::new();
    let w = world(store, on, baseline).await;
    let n_lbs = lbs(n, on);
    let seeding = Instant::now();
    seed(&w, n).await;
    out.insert("seed_s".into(), seeding.elapsed().as_secs_f64());
    // A round's activations each a task of its own, as the production loop runs them
    // (issue 31, tenth round: with the simulator's cuts, the round's one task was the
    // busiest thread, and spread over the workers the rounds end sooner on two cores);
    // their memory is the round's. `--together`: polled together in the benchmark's
    // task, one thread, as before.
    let stepper = Stepper::new(w.runtime.clone(), w.env.clock.clone());
    let poll = time::Duration::try_from(w.runtime.config().poll).expect("a poll in range");
    let stepper = if TOGETHER.load(std::sync::atomic::Ordering::Relaxed) {
        stepper
    } else {
        stepper.spawning(Arc::new(|run| Box::pin(tagged(Group::Round, run))))
    };

    // Converge.
    let from_clock = w.env.clock.now();
    let (stats_before, calls_before) = (w.env.store.stats(), all_calls(&w.env));
    let (kube_before, routes_before) =
        (kube_calls(&w.env), w.env.sim.state().model().request_counts());
    let connects_before = parts::group_made(Group::Connect);
    let answers_before = parts::group_made(Group::InProcessCluster);
    let sim_cpu_before =
        parts::group_cpu(Group::InProcessCluster) + parts::group_cpu(Group::ClusterRouter);
    let connect_cpu_before = parts::group_cpu(Group::Connect);
    let started = Instant::now();
    let mut steps = 0;
    let mut activations = 0usize;
    let mut steady: HashSet<String> = HashSet::new();
    let mut lbs_at = None;
    let cpu_before = process_cpu();
    // Where the converge's wall time went: rounds that ran activations, rounds that found
    // nothing due (then the clock moved), and the benchmark's own convergence sweeps.
    let (mut in_rounds, mut in_idle, mut in_sweeps) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let mut idle_steps = 0;
    let mut failed_by_cause: BTreeMap<String, usize> = BTreeMap::new();
    while steps < 100_000 {
        let round_started = Instant::now();
        let reports = quantum_step(&stepper, poll).await;
        if reports.is_empty() {
            idle_steps += 1;
            in_idle += round_started.elapsed();
        } else {
            in_rounds += round_started.elapsed();
        }
        steps += 1;
        activations += reports.len();
        for r in &reports {
            if let ActivationResult::Failed { error, .. } = &r.result {
                // Request ids and names vary: the first 80 characters tell the cause.
                let cause: String = error.chars().take(80).collect();
                *failed_by_cause.entry(format!("{} {cause}", r.kind)).or_insert(0usize) += 1;
            }
        }
        for r in reports.iter().filter(|r| r.kind == WorkKind::ProviderResources) {
            if matches!(r.result, ActivationResult::Steady { .. }) {
                steady.insert(r.key.clone());
            } else {
                steady.remove(&r.key);
            }
        }
        if steady.len() >= n_lbs {
            lbs_at.get_or_insert((started.elapsed(), steps));
            // Swept every step: the substrates, and the load balancers once they are ready.
            let sweep_started = Instant::now();
            let done = converged(&w, n).await;
            in_sweeps += sweep_started.elapsed();
            if done {
                break;
            }
        }
    }
    let wall = started.elapsed();
    eprintln!(
        "N={n}: load balancers steady after {lbs_at:?}; all after {wall:?}, {steps} steps, \
         {activations} activations, clock +{}, {} failed activations",
        w.env.clock.now() - from_clock,
        stepper.failures()
    );
    for (cause, count) in &failed_by_cause {
        eprintln!("profile: failed activations: {count} × {cause}");
    }
    let cpu = process_cpu().saturating_sub(cpu_before);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    eprintln!(
        "profile: wall {:.0} ms = rounds with activations {:.0} ms ({} rounds) + rounds \
         with none {:.0} ms ({idle_steps}) + convergence sweeps {:.0} ms; process CPU {:.0} \
         ms ({:.2} cores)",
        ms(wall),
        ms(in_rounds),
        steps - idle_steps,
        ms(in_idle),
        ms(in_sweeps),
        ms(cpu),
        cpu.as_secs_f64() / wall.as_secs_f64(),
    );
    for (kind, (count, spent)) in w.spent.lock().unwrap().iter() {
        eprintln!(
            "profile: kind {kind}: {count} activations, {:.3} ms each in the reconciler \
             (wall, overlapping)",
            ms(*spent) / (*count).max(1) as f64
        );
    }
    // The substrates' rounds (issue 31, item 1, fourth round): what their activations
    // asked of the clusters' Kubernetes APIs and of the provider, the kube clients made,
    // and the CPU of the simulated cluster APIs answered in process inside the rounds.
    let sub_acts: usize = w
        .spent
        .lock()
        .unwrap()
        .iter()
        .filter(|(k, _)| **k != WorkKind::ProviderResources)
        .map(|(_, (c, _))| *c)
        .sum();
    let kube_now = kube_calls(&w.env);
    let mut kube_total = 0;
    for (op, c) in &kube_now {
        let d = c - kube_before.get(op).copied().unwrap_or(0);
        if d > 0 {
            eprintln!(
                "profile: kube {op}: {d} ({:.3} per substrate-side activation)",
                d as f64 / sub_acts.max(1) as f64
            );
        }
        kube_total += d;
    }
    let mut k8s_provider = 0;
    for (route, c) in w.env.sim.state().model().request_counts() {
        let d = c - routes_before.get(&route).copied().unwrap_or(0);
        if !route.contains(routes::LOAD_BALANCERS) {
            k8s_provider += d;
        }
    }
    let sim_cpu = parts::group_cpu(Group::InProcessCluster)
        + parts::group_cpu(Group::ClusterRouter)
        - sim_cpu_before;
    let connect_cpu = parts::group_cpu(Group::Connect) - connect_cpu_before;
    let per_sub = |x: f64| x / sub_acts.max(1) as f64;
    eprintln!(
        "profile: substrate-side activations (substrates, clusters, node pools) {sub_acts}: \
         per activation {:.2} Kubernetes requests, {:.3} provider calls (routes other than \
         load balancers), {:.3} kube clients made; simulated cluster APIs answered in \
         process: {} answers, {:.0} ms CPU ({:.1}% of the process's), {:.3} ms per answer; \
         kube clients made: {:.0} ms CPU",
        per_sub(kube_total as f64),
        per_sub(k8s_provider as f64),
        per_sub((parts::group_made(Group::Connect) - connects_before) as f64),
        parts::group_made(Group::InProcessCluster) - answers_before,
        ms(sim_cpu),
        100.0 * sim_cpu.as_secs_f64() / cpu.as_secs_f64().max(1e-9),
        ms(sim_cpu) / (parts::group_made(Group::InProcessCluster) - answers_before).max(1) as f64,
        ms(connect_cpu),
    );
    out.insert("kube_calls_per_substrate_activation".into(), per_sub(kube_total as f64));
    out.insert("in_process_cluster_cpu_ms".into(), ms(sim_cpu));
    out.insert("converge_cpu_ms".into(), ms(cpu));
    memory_held(&mut out, "converged");
    let objects = (n_lbs + n / 10) as f64;
    out.insert("converge_cpu_ms_per_object".into(), ms(cpu) / objects);
    profile(&mut out, &w.env.store.stats().since(&stats_before), activations, wall, {
        all_calls(&w.env) - calls_before
    });
    out.insert("converge_s".into(), wall.as_secs_f64());
    out.insert("objects_per_s".into(), objects / wall.as_secs_f64());
    out.insert("activations_per_s".into(), activations as f64 / wall.as_secs_f64());
    if n_lbs > 0 {
        out.insert("lb_calls_per_lb".into(), lb_calls(&w.env) as f64 / n_lbs as f64);
    }
    out.insert("calls_per_object".into(), all_calls(&w.env) as f64 / objects);
    // What each provider's operations cost to converge, route by route (docs/benchmarks.md).
    for (route, c) in w.env.sim.state().model().request_counts() {
        eprintln!("N={n} {} converge: {route}: {c}", provider_name(on));
    }
    // Let the substrates' nodes join (bcd in the simulator, the join stand-in), so the
    // steady window is steady.
    let joining = Instant::now();
    let mut join_rounds = 0;
    for _ in 0..200 {
        join_rounds += 1;
        // Each simulated bcd joins over HTTP: at N/10 substrates × 3 nodes a round can
        // outlast the tests' 20 s call bound on a loaded machine; a round cut short
        // joins the rest next time.
        let joins = bc_sim::bcd::run_once(w.env.sim.state());
        let made = match tokio::time::timeout(Duration::from_secs(120), joins).await {
            Ok(made) => made,
            Err(_) => {
                eprintln!("N={n}: a bcd round outlasted 120 s");
                usize::MAX
            }
        };
        let recorded = w.env.record_joins().await;
        let reports =
            tagged(Group::Round, stepper.step(Duration::from_secs(60))).await.expect("store");
        // Done when no node is left to join, none was recorded and whatever ran is
        // steady: waiting instead for a minute with no activation at all never ends at
        // 1,000 substrates (some resync is always due within a minute).
        let quiet = reports.iter().all(|r| matches!(r.result, ActivationResult::Steady { .. }));
        if made == 0 && recorded == 0 && quiet {
            break;
        }
    }
    eprintln!("N={n}: nodes joined in {:?} ({join_rounds} rounds)", joining.elapsed());
    // Steady: every resync on its jittered schedule, claimed a quantum at a time.
    let before = w.env.sim.state().model().request_counts();
    let from = w.env.clock.now();
    let end = from + time::Duration::minutes(steady_min);
    let steady_started = Instant::now();
    let mut rounds = 0;
    while w.env.clock.now() < end && rounds < 1_000_000 {
        let reports = tagged(Group::Round, stepper.round()).await.expect("store");
        rounds += 1;
        if reports.is_empty() {
            let now = w.env.clock.now();
            let next = stepper.next_due().await.expect("store").unwrap_or(end);
            w.env.clock.set(next.max(now + STEADY_QUANTUM).min(end));
        }
    }
    let after = w.env.sim.state().model().request_counts();
    let mut calls = 0;
    for (route, c) in &after {
        let d = c - before.get(route).copied().unwrap_or(0);
        if d > 0 {
            eprintln!("N={n} steady {steady_min} min: {route}: {d}");
        }
        calls += d;
    }
    eprintln!("N={n}: steady window took {:?} ({rounds} rounds)", steady_started.elapsed());
    out.insert("steady_calls_per_h".into(), calls as f64 * 60.0 / steady_min as f64);

    memory_held(&mut out, "steady");
    out.insert("rss_mib".into(), bc_testkit::bench::peak_rss_mib(None));
    out.insert("runtime_mib".into(), parts::peak_mib(Part::Runtime));
    out.insert("simulator_mib".into(), parts::peak_mib(Part::Simulator));
    out.insert(
        "in_process_clusters_peak_mib".into(),
        parts::group_peak_mib(Group::InProcessCluster),
    );
    out.insert("kube_clients_peak_mib".into(), parts::group_peak_mib(Group::Connect));
    if let Some(mib) = sqlite_pages_mib(&w.env.store).await {
        out.insert("store_mib".into(), mib);
    }
    if n_lbs == 0 {
        // The latency probe writes load balancers: not on a provider without them.
        return out;
    }
    // Latency behind the N steady objects: the real claim loop, woken by the notify.
    let cancel = CancellationToken::new();
    let running = tokio::spawn(w.runtime.clone().run(cancel.clone()));
    let notify = w.runtime.work_notify();
    let pool = w.env.lb_pool("probe", u32::try_from(samples + 1).unwrap_or(u32::MAX)).await;
    let mut to_first = Vec::new();
    let mut to_call = Vec::new();
    let post = routes::key("POST", routes::LOAD_BALANCERS);
    for i in 0..samples {
        let posts = w.env.sim.state().model().request_count(&post);
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
            if called.is_none() && w.env.sim.state().model().request_count(&post) > posts {
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
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    out.insert("first_activation_p50_ms".into(), ms(percentile(&mut to_first, 0.5)));
    out.insert("write_to_call_p50_ms".into(), ms(percentile(&mut to_call, 0.5)));
    out.insert("write_to_call_p99_ms".into(), ms(percentile(&mut to_call, 0.99)));
    out.insert("rss_mib".into(), bc_testkit::bench::peak_rss_mib(None));
    out
}

/// What the runtime holds between rounds (no round is being polled): its live bytes and,
/// of them, the kube clients', recorded as `<at>_runtime_held_mib` and
/// `<at>_kube_clients_held_mib`, with the simulator's in-process cluster APIs' live bytes.
fn memory_held(out: &mut Measured, at: &str) {
    parts::settle_this_thread();
    let held = parts::live_mib(Part::Runtime);
    let clients = parts::group_live_mib(Group::Connect);
    let clusters = parts::group_live_mib(Group::InProcessCluster);
    let routers = parts::group_live_mib(Group::ClusterRouter);
    eprintln!(
        "memory {at}: runtime holds {held:.1} MiB between rounds, of which kube clients \
         {clients:.1} MiB; simulated cluster APIs (in process) {clusters:.1} MiB, and \
         their routers held by the clients {routers:.1} MiB"
    );
    out.insert(format!("{at}_cluster_routers_mib"), routers);
    out.insert(format!("{at}_runtime_held_mib"), held);
    out.insert(format!("{at}_kube_clients_held_mib"), clients);
    out.insert(format!("{at}_in_process_clusters_mib"), clusters);
}

/// Where the converge's time went, in counts that do not move with the machine's load:
/// the store's statements, transactions and named writes per activation and per provider
/// call, and the time the writes ran (after their turn at SQLite's write gate; on
/// PostgreSQL writes overlap, so their sum can pass the wall time). Printed as a table
/// (docs/benchmarks.md keeps one) and kept as figures.
fn profile(
    out: &mut Measured,
    stats: &bc_store::StoreStats,
    activations: usize,
    wall: Duration,
    calls: u64,
) {
    let per = |x: f64| x / activations.max(1) as f64;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    eprintln!(
        "profile: {activations} activations, {calls} provider calls, {} statements, {} \
         transactions, {} pool checkouts, {} write attempts in {:.1} ms wall",
        stats.statements,
        stats.transactions,
        stats.checkouts,
        stats.write_attempts(),
        ms(wall)
    );
    eprintln!(
        "profile: per activation {:.2} statements, {:.2} transactions, {:.2} checkouts, \
         {:.2} writes, {:.3} provider calls, {:.3} ms wall, {:.3} ms of writes",
        per(stats.statements as f64),
        per(stats.transactions as f64),
        per(stats.checkouts as f64),
        per(stats.write_attempts() as f64),
        per(calls as f64),
        per(ms(wall)),
        per(ms(stats.write_busy())),
    );
    for (name, s) in &stats.writes {
        eprintln!(
            "profile: write {name}: {:.3}/activation, {} missed, {:.3} ms each, {:.1}% of wall",
            per(s.attempts as f64),
            s.misses,
            ms(s.busy) / s.attempts.max(1) as f64,
            100.0 * s.busy.as_secs_f64() / wall.as_secs_f64(),
        );
    }
    let mut shapes: Vec<_> = stats.shapes.iter().collect();
    shapes.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for (shape, n) in shapes {
        eprintln!("profile: statement {shape}: {:.3}/activation", per(*n as f64));
    }
    out.insert("statements_per_activation".into(), per(stats.statements as f64));
    out.insert("transactions_per_activation".into(), per(stats.transactions as f64));
    out.insert("checkouts_per_activation".into(), per(stats.checkouts as f64));
    out.insert("provider_calls_per_activation".into(), per(calls as f64));
}

/// This process's CPU time so far (user and system, every thread, from `/proc`; zero
/// where there is none).
fn process_cpu() -> Duration {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else { return Duration::ZERO };
    // Fields after the command name (which may hold spaces) closed by the last ')'.
    let Some((_, rest)) = stat.rsplit_once(')') else { return Duration::ZERO };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line: 11 and 12 counting from the state
    // (field 3) as 0.
    let ticks: u64 = [11, 12].iter().filter_map(|&i| f.get(i)?.parse::<u64>().ok()).sum();
    // Linux reports them in USER_HZ, 100 per second on every platform it runs on.
    Duration::from_millis(ticks * 10)
}

/// The SQLite database's pages (`page_count × page_size`, free pages included) in MiB:
/// all of it in memory for `sqlite::memory:`, the store's part; `None` on PostgreSQL.
async fn sqlite_pages_mib(store: &SqlStore) -> Option<f64> {
    use sea_orm::{ConnectionTrait, DbBackend, Statement};
    if store.backend() != DbBackend::Sqlite {
        return None;
    }
    let pragma = |name: &str| {
        let st = Statement::from_string(DbBackend::Sqlite, format!("PRAGMA {name}"));
        async move {
            let row = store.connection().query_one_raw(st).await.ok()??;
            row.try_get_by_index::<i64>(0).ok()
        }
    };
    let (pages, size) = (pragma("page_count").await?, pragma("page_size").await?);
    Some((pages * size) as f64 / (1024.0 * 1024.0))
}

/// A provider's name on the command line and in the figures.
fn provider_name(on: OnProvider) -> &'static str {
    on.kind().as_str()
}

/// The provider named `s` (`digitalocean`, `gke`).
fn parse_provider(s: &str) -> Option<OnProvider> {
    [OnProvider::DigitalOcean, OnProvider::Gke].into_iter().find(|p| provider_name(*p) == s)
}

/// The `p` quantile of `v` (sorted in place), nearest rank.
fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    if v.is_empty() {
        return Duration::MAX;
    }
    v[((v.len() as f64 * p).ceil() as usize).saturating_sub(1).min(v.len() - 1)]
}

/// The steady window's quantum: resyncs due within it are claimed together. Only the
/// grouping of activations changes (a production loop claims what is due each time it
/// wakes); listings are refreshed by age, so the calls per hour are the same.
const STEADY_QUANTUM: time::Duration = time::Duration::seconds(30);

/// The child: one run at one size on one backend; prints its `RESULT` line.
fn child(args: &Args) {
    parts::start();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio");
    let backend = if args.postgres { Backend::Postgres } else { Backend::Memory };
    let (on, n, samples, steady_min) = (args.on, args.n, args.samples, args.steady_min);
    let result = Arc::new(Mutex::new(None));
    let slot = result.clone();
    let baseline = args.baseline;
    let options = bc_store::StoreOptions {
        ping_every_checkout: baseline,
        one_call_at_a_time: baseline || args.ungrouped,
        event_lock_apart: baseline || args.event_lock_apart,
        ..Default::default()
    };
    rt.block_on(bc_store::testing::run_with(backend, &options, |store| async move {
        let m = measure(store, on, n, samples, steady_min, baseline).await;
        *slot.lock().unwrap() = Some(m);
    }));
    let Some(m) = result.lock().unwrap().take() else {
        eprintln!("no PostgreSQL (BC_TEST_POSTGRES_URL unset): skipped");
        return;
    };
    let fields: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!("RESULT {}", fields.join(" "));
}

/// The flags of one child run.
struct Args {
    /// Run as before issue 31 (`--baseline`): each run settled alone, every pooled
    /// connection pinged as it is handed out.
    baseline: bool,
    /// The store's commits and point reads one call at a time, as before they were
    /// grouped (`--ungrouped`, a child's flag: the profile's before and after).
    ungrouped: bool,
    /// PostgreSQL's event lock in a statement of its own (`--event-lock-apart`, a child's
    /// flag), as before issue 31's fourth round: the before of that cut.
    event_lock_apart: bool,
    on: OnProvider,
    n: usize,
    postgres: bool,
    samples: usize,
    steady_min: i64,
}

/// One planned run: provider, size, backend, repeats, latency samples, steady window
/// (minutes).
#[derive(Clone, Copy)]
struct Plan {
    baseline: bool,
    /// A round's activations polled together in one task (`--together`).
    together: bool,
    /// The converge in rounds, not flowing (`--rounds`).
    rounds: bool,
    on: OnProvider,
    n: usize,
    postgres: bool,
    repeat: usize,
    samples: usize,
    steady_min: i64,
}

/// Runs `plan` as `repeat` child processes; each run's measurements.
fn run_plan(exe: &std::path::Path, plan: &Plan) -> Result<Vec<Measured>, String> {
    let mut runs = Vec::new();
    for _ in 0..plan.repeat {
        let mut cmd = Command::new(exe);
        cmd.args([
            "--child",
            &plan.n.to_string(),
            "--provider",
            provider_name(plan.on),
            "--samples",
            &plan.samples.to_string(),
            "--steady-min",
            &plan.steady_min.to_string(),
        ]);
        if plan.postgres {
            cmd.arg("--postgres");
        }
        if plan.baseline {
            cmd.arg("--baseline");
        }
        if plan.together {
            cmd.arg("--together");
        }
        if plan.rounds {
            cmd.arg("--rounds");
        }
        let out = cmd.stderr(Stdio::inherit()).output().map_err(|e| format!("child: {e}"))?;
        if !out.status.success() {
            let p = provider_name(plan.on);
            return Err(format!("child {p} N={} failed: {}", plan.n, out.status));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let Some(line) = text.lines().find_map(|l| l.strip_prefix("RESULT ")) else {
            return Ok(runs);
        };
        let m: Measured = line
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .filter_map(|(k, v)| Some((k.to_owned(), v.parse().ok()?)))
            .collect();
        runs.push(m);
    }
    Ok(runs)
}

/// Emits the figures of the runs of `plan`.
fn figures(plan: &Plan, runs: &[Measured]) {
    if runs.is_empty() {
        return;
    }
    let n = plan.n;
    let backend = match (plan.postgres, plan.baseline) {
        (true, false) => "postgres",
        (false, false) => "sqlite",
        (true, true) => "postgres (baseline: as before issue 31)",
        (false, true) => "sqlite (baseline: as before issue 31)",
    };
    let provider = provider_name(plan.on);
    let n_lbs = lbs(n, plan.on);
    let at = format!("{provider} · {backend} · N={n}: {n_lbs} LBs + {} substrates", n / 10);
    let col = |k: &str| runs.iter().map(|m| m.get(k).copied().unwrap_or(f64::NAN)).collect();
    let k = runs.len();
    let fig = |name: &str, unit: &'static str, better: Better, key: &str| {
        Figure::new("reconcile", format!("{at} · {name}"), unit, better, col(key))
    };
    emit(&fig("converge wall time", "s", Better::Lower, "converge_s"));
    emit(
        &fig("converge objects/s", "objects/s", Better::Higher, "objects_per_s")
            .against(Against::constant(Reference::Target, "issue 12: ≥ 500 objects/s", 500.0)),
    );
    emit(
        &fig("converge activations/s", "reconciles/s", Better::Higher, "activations_per_s")
            .against(Against::constant(
                Reference::Peer,
                "Crossplane 10–100 reconciles/s (upper end)",
                100.0,
            )),
    );
    if n_lbs > 0 {
        emit(
            &fig("provider calls per LB to converge", "calls/LB", Better::Lower, "lb_calls_per_lb")
                .against(Against::constant(Reference::Target, "issue 10: ≤ 1.5 per LB", 1.5)),
        );
    }
    emit(&fig(
        "provider calls per object to converge (all routes)",
        "calls/object",
        Better::Lower,
        "calls_per_object",
    ));
    let window = if plan.steady_min >= 60 {
        String::new()
    } else {
        format!(" ({} simulated min ×{})", plan.steady_min, 60 / plan.steady_min.max(1))
    };
    let polling = (60 * (n_lbs + n / 10)) as f64;
    emit(
        &fig(
            &format!("steady provider calls/h{window}"),
            "calls/h",
            Better::Lower,
            "steady_calls_per_h",
        )
        .against(Against {
            reference: Reference::Baseline,
            name: "per-object polling, 1 GET/object/min (60·N/h)".into(),
            samples: vec![polling; k],
        }),
    );
    emit(
        &fig(
            &format!("steady provider calls/h per account{window}"),
            "calls/h",
            Better::Lower,
            "steady_calls_per_h",
        )
        .against(match plan.on {
            OnProvider::DigitalOcean => Against::constant(
                Reference::Peer,
                "DigitalOcean budget 5,000/h per account",
                5_000.0,
            ),
            OnProvider::Gke => Against::constant(
                Reference::Peer,
                "GKE budget 3,000/min per project (180,000/h)",
                180_000.0,
            ),
        }),
    );
    if n_lbs > 0 {
        emit(
            &fig(
                "API write → first provider call p99",
                "ms",
                Better::Lower,
                "write_to_call_p99_ms",
            )
            .against(Against::constant(Reference::Target, "issue 10: ≤ 50 ms", 50.0)),
        );
        emit(&fig(
            "enqueue → first activation p50",
            "ms",
            Better::Lower,
            "first_activation_p50_ms",
        ));
    }
    emit(&fig("peak RSS, in-process (store, simulator, runtime)", "MiB", Better::Lower, "rss_mib"));
    // Per part, up to the steady window's end (the latency probe's claim loops run as
    // tasks of their own, outside the runtime's tag): see `support/parts.rs`.
    emit(
        &fig("peak heap of the runtime (tagged allocations)", "MiB", Better::Lower, "runtime_mib")
            .against(Against::constant(Reference::Target, "issue 31: ≤ 200 MiB", 200.0)),
    );
    emit(&fig(
        "heap the runtime holds once converged (between rounds)",
        "MiB",
        Better::Lower,
        "converged_runtime_held_mib",
    ));
    emit(&fig(
        "heap the runtime's kube clients hold once converged",
        "MiB",
        Better::Lower,
        "converged_kube_clients_held_mib",
    ));
    emit(&fig(
        "peak heap of the simulator and harness (untagged allocations and the simulated cluster APIs answered in process)",
        "MiB",
        Better::Lower,
        "simulator_mib",
    ));
    emit(&fig(
        "peak heap of the simulated cluster APIs answered in process (part of the simulator's)",
        "MiB",
        Better::Lower,
        "in_process_clusters_peak_mib",
    ));
    emit(&fig(
        "size of the store (the SQLite database's pages, all in memory; PostgreSQL: none here, another process)",
        "MiB",
        Better::Lower,
        "store_mib",
    ));
    if runs.iter().any(|m| m.contains_key("statements_per_activation")) {
        emit(&fig(
            "converge store statements per activation",
            "statements",
            Better::Lower,
            "statements_per_activation",
        ));
        emit(&fig(
            "converge store transactions per activation",
            "transactions",
            Better::Lower,
            "transactions_per_activation",
        ));
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag =
        |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let has = |name: &str| args.iter().any(|a| a == name);
    if let Some(n) = flag("--child") {
        SUBSTRATES_ONLY.store(has("--substrates-only"), std::sync::atomic::Ordering::Relaxed);
        TOGETHER
            .store(has("--together") || has("--baseline"), std::sync::atomic::Ordering::Relaxed);
        ROUNDS.store(has("--rounds") || has("--baseline"), std::sync::atomic::Ordering::Relaxed);
        let provider = flag("--provider").unwrap_or_else(|| "digitalocean".into());
        child(&Args {
            on: parse_provider(&provider).expect("--provider digitalocean|gke"),
            n: n.parse().expect("--child N"),
            postgres: has("--postgres"),
            samples: flag("--samples").and_then(|s| s.parse().ok()).unwrap_or(100),
            steady_min: flag("--steady-min").and_then(|s| s.parse().ok()).unwrap_or(60),
            baseline: has("--baseline"),
            ungrouped: has("--ungrouped"),
            event_lock_apart: has("--event-lock-apart"),
        });
        return;
    }
    let quick = has("--quick");
    let started = Instant::now();
    let sizes: Vec<usize> = flag("--sizes")
        .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| if quick { vec![100] } else { DEFAULT_SIZES.to_vec() });
    let repeat: Option<usize> = flag("--repeat").and_then(|s| s.parse().ok());
    let postgres = !has("--no-postgres") && bc_testkit::postgres_url().is_some();
    let providers: Vec<OnProvider> = flag("--providers")
        .map(|s| {
            s.split(',').map(|p| parse_provider(p).expect("--providers digitalocean,gke")).collect()
        })
        .unwrap_or_else(|| vec![OnProvider::DigitalOcean, OnProvider::Gke]);
    let mut plans = Vec::new();
    for (&n, &on) in sizes.iter().flat_map(|n| providers.iter().map(move |p| (n, p))) {
        // GKE at 100 and 1,000 (issue 27); 10,000 only when asked for by `--sizes`.
        if on == OnProvider::Gke && n > GKE_DEFAULT_MAX && flag("--sizes").is_none() {
            continue;
        }
        // Small sizes repeat for spread; 10,000 runs once (its converge alone is the
        // suite's largest single cost). `--quick` runs each plan once: it shows that
        // every path still runs and what it measures, not the spread.
        let times = repeat.unwrap_or(if !quick && n <= 1_000 { 3 } else { 1 });
        let steady_min = if n >= 10_000 { 20 } else { 60 };
        let samples = if quick { 30 } else { 100 };
        let baseline = has("--baseline");
        let together = has("--together");
        let rounds = has("--rounds");
        plans.push(Plan {
            on,
            n,
            postgres: false,
            repeat: times,
            samples,
            steady_min,
            baseline,
            together,
            rounds,
        });
    }
    if postgres {
        // Every size SQLite runs, so the two stores compare at each N (issue 31: within
        // 1.3×); once each at 1,000 and above.
        let on_sqlite: Vec<Plan> = plans
            .iter()
            .map(|p| Plan { postgres: true, repeat: if p.n <= 100 { p.repeat } else { 1 }, ..*p })
            .collect();
        plans.extend(on_sqlite);
    }
    println!("# reconcile benchmark ({} mode)", if quick { "quick" } else { "full" });
    let exe = std::env::current_exe().expect("exe");
    let mut failed = false;
    for plan in &plans {
        match run_plan(&exe, plan) {
            Ok(runs) => figures(plan, &runs),
            Err(e) => {
                eprintln!("{e}");
                failed = true;
            }
        }
    }
    eprintln!("reconcile bench: {:.1} s wall", started.elapsed().as_secs_f64());
    if failed {
        std::process::exit(1);
    }
}
