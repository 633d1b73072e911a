//! Several replicas: two runtimes on one PostgreSQL database sharing 200 objects of all
//! four kinds never reconcile one object at the same time, make no provider object
//! twice, and both do work; two runtimes on one
//! account never spend more than the account's budget in any minute, measured at the
//! simulator — and, as the control that shows the measurement bites, two runtimes with
//! a budget each do; and one replica's concurrent calls on one account take turns at
//! the shared budget instead of racing their own compare-and-swap.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bc_domain::model::ClusterMode;
use bc_domain::policy::Scale;
use bc_domain::ports::{BudgetRepo, Clock, ProviderResult, WorkKind, WorkQueue};
use bc_domain::rules::budget::{BudgetConfig, WindowLimit};
use bc_domain::{ProviderError, ResourceState, Timestamp};
use bc_reconcile::Entropy;
use bc_reconcile::kinds::reconciler_of;
use bc_reconcile::testing::{STEADY_RESYNC, SeqEntropy, Stepper, create_policy, flavor};
use bc_reconcile::{
    Activation, Budget, CallHook, Deps, ForwardRegistry, LoadBalancers, LocalBudget, Outcome,
    ProviderCall, ReconcileError, Reconciler, RuntimeConfig, StoreBudget,
};
use bc_sim::SimConfig;
use bc_sim::config::RateLimits;
use bc_sim::testing::NODE_SIZE;
use bc_store::testing::{Backend, run};

use crate::common::Env;

/// A reconciler of any kind, instrumented: it records which objects are being
/// reconciled right now (by any replica) and counts every time one starts while it is.
struct Exclusive {
    inner: Arc<dyn Reconciler>,
    owner: String,
    running: Arc<Mutex<HashSet<(WorkKind, String)>>>,
    overlaps: Arc<AtomicUsize>,
    by_owner: Arc<Mutex<BTreeMap<String, usize>>>,
}

#[async_trait]
impl Reconciler for Exclusive {
    fn kind(&self) -> WorkKind {
        self.inner.kind()
    }
    async fn reconcile(&self, deps: &Deps, a: &Activation) -> Result<Outcome, ReconcileError> {
        let object = (a.item.kind, a.key().to_owned());
        if !self.running.lock().unwrap().insert(object.clone()) {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
        *self.by_owner.lock().unwrap().entry(self.owner.clone()).or_default() += 1;
        // Give the other replica every chance to run the same object meanwhile.
        tokio::task::yield_now().await;
        let r = self.inner.reconcile(deps, a).await;
        tokio::task::yield_now().await;
        self.running.lock().unwrap().remove(&object);
        r
    }
}

/// Whether every load balancer and tenant cluster is `ready`, every substrate has its
/// cluster (and no error), and the provider has all 40 clusters with their 60 node pools.
async fn converged(
    env: &Env,
    lbs: &[bc_domain::LoadBalancerId],
    clusters: &[bc_domain::ClusterId],
    pools: &[bc_domain::PoolId],
) -> bool {
    if !env.states(lbs).await.iter().all(|s| *s == ResourceState::Ready) {
        return false;
    }
    for c in clusters {
        if env.cluster(c).await.status.state != ResourceState::Ready {
            return false;
        }
    }
    for p in pools {
        let s = env.substrate(p).await;
        if s.cluster_id.is_none() || s.state == ResourceState::Error {
            return false;
        }
    }
    let made = env.sim.state().model().list_clusters(bc_sim::testing::TEST_TOKEN, env.now());
    let made = made.expect("the account");
    made.len() >= 40 && made.iter().map(|c| c.node_pools.len()).sum::<usize>() >= 60
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_on_postgres_never_reconcile_one_object_at_once() {
    run(Backend::Postgres, |store| async move {
        let config = SimConfig {
            rate_limits: RateLimits { per_hour: 1_000_000, per_minute: 1_000_000 },
            ..SimConfig::default()
        };
        let env = Env::on(store, config).await;
        let roomy = BudgetConfig::per_minute_and_hour(1_000_000, 10_000_000);
        let (running, overlaps, by_owner) =
            (Arc::default(), Arc::new(AtomicUsize::new(0)), Arc::default());
        let replica = |owner: &str| {
            let deps =
                env.deps_with(env.registry(), Arc::new(StoreBudget::new(env.store.clone(), roomy)));
            // All four kinds, each reconciler wrapped; one entropy per replica (as two
            // processes have).
            let entropy: Arc<dyn Entropy> = Arc::new(SeqEntropy::default());
            let reconcilers = WorkKind::ALL
                .into_iter()
                .map(|k| {
                    Arc::new(Exclusive {
                        inner: reconciler_of(k, entropy.clone()),
                        owner: owner.into(),
                        running: Arc::clone(&running),
                        overlaps: Arc::clone(&overlaps),
                        by_owner: Arc::clone(&by_owner),
                    }) as Arc<dyn Reconciler>
                })
                .collect();
            env.runtime_of(owner, deps, reconcilers)
        };
        let replicas = vec![replica("replica-a"), replica("replica-b")];
        // 200 objects of mixed kinds: 120 load balancers, 20 substrates (a created
        // cluster and one node pool each), 20 tenant clusters with 2 node pools each.
        let mut ids = Vec::new();
        for i in 0..120 {
            ids.push(env.create_lb(&format!("lb-{i}")).await.load_balancer_id);
        }
        let acct = env.account.provider_account_id.clone();
        let mut pools = Vec::new();
        for i in 0..20 {
            let policy = create_policy(&acct, "latest", vec![flavor("cpu", NODE_SIZE, 1)]);
            pools.push(env.create_pool(&format!("sub-{i}"), policy).await.pool_id);
        }
        let mut clusters = Vec::new();
        for i in 0..20 {
            let first = vec![("a", NODE_SIZE, Scale::Count(1)), ("b", NODE_SIZE, Scale::Count(1))];
            let (c, _) = env.create_cluster(&format!("c-{i}"), ClusterMode::Standard, first).await;
            clusters.push(c.cluster_id);
        }
        // While the replicas work, writes keep re-enqueueing objects (some of them
        // leased at that moment), as API calls would.
        let stepper = Stepper::together(replicas, env.clock.clone());
        let churned = AtomicBool::new(false);
        let churned = &churned;
        let churn = {
            let (store, clock) = (env.store.clone(), env.clock.clone());
            let mut keys: Vec<(WorkKind, String)> =
                ids.iter().map(|i| (WorkKind::ProviderResources, i.to_string())).collect();
            keys.extend(pools.iter().map(|p| (WorkKind::Substrates, p.to_string())));
            keys.extend(clusters.iter().map(|c| (WorkKind::Clusters, c.to_string())));
            async move {
                for round in 0..400usize {
                    let (kind, key) = keys[(round * 37) % keys.len()].clone();
                    let e = bc_domain::ports::Enqueue { kind, key, not_before: clock.now() };
                    store.enqueue(e).await.unwrap();
                    tokio::task::yield_now().await;
                }
                churned.store(true, Ordering::SeqCst);
            }
        };
        // Substrates wait for nodes to join (no bcd runs here), so the replicas never go
        // idle: they run 5-minute stretches of simulated time (an hour at most) until the
        // churn is over and every object is where the assertions below want it (about 20
        // minutes), then one steady resync period more, in which both replicas look at
        // every converged object again. (It ran a whole hour before: 99 s, most of it
        // the waiting substrates' polls after everything had converged.)
        let stepping = async {
            let end = env.now() + time::Duration::hours(1);
            while env.now() < end {
                let stretch = (env.now() + time::Duration::minutes(5)).min(end);
                stepper.run_until(stretch, 20_000).await.unwrap();
                if churned.load(Ordering::SeqCst) && converged(&env, &ids, &clusters, &pools).await
                {
                    eprintln!("converged at {}", env.now());
                    break;
                }
            }
            let resync = time::Duration::try_from(STEADY_RESYNC).unwrap();
            stepper.run_until(env.now() + resync, 20_000).await.unwrap();
        };
        tokio::join!(stepping, churn);
        assert_eq!(
            overlaps.load(Ordering::SeqCst),
            0,
            "an object was reconciled by both replicas at once"
        );
        let by_owner = by_owner.lock().unwrap().clone();
        eprintln!("activations per replica: {by_owner:?}");
        assert_eq!(by_owner.len(), 2, "both replicas worked: {by_owner:?}");
        assert!(by_owner.values().all(|n| *n >= 100), "work was shared: {by_owner:?}");
        assert!(env.states(&ids).await.iter().all(|s| *s == ResourceState::Ready));
        assert_eq!(env.provider_lbs().len(), 120, "one provider object each, none twice");
        assert_eq!(env.creates(), 120);
        for c in &clusters {
            assert_eq!(env.cluster(c).await.status.state, ResourceState::Ready);
        }
        for p in &pools {
            let s = env.substrate(p).await;
            assert!(s.cluster_id.is_some() && s.state != ResourceState::Error, "{s:?}");
        }
        // One provider cluster per row — 20 substrates' and 20 tenant clusters — each
        // with exactly its node pools.
        let made = env.provider().kubernetes().list_clusters().await.unwrap();
        let names: HashSet<&str> = made.iter().map(|c| c.name.as_str()).collect();
        assert_eq!((made.len(), names.len()), (40, 40), "no cluster made twice");
        let pools_made: usize = made.iter().map(|c| c.node_pools.len()).sum();
        assert_eq!(pools_made, 20 + 40, "no node pool made twice");
    })
    .await;
}

#[tokio::test]
async fn the_overlap_check_sees_an_overlap() {
    let env = Env::start().await;
    let overlaps = Arc::new(AtomicUsize::new(0));
    let r = Exclusive {
        inner: Arc::new(LoadBalancers::default()),
        owner: "x".into(),
        running: Arc::default(),
        overlaps: overlaps.clone(),
        by_owner: Arc::default(),
    };
    let id = env.create_lb("web").await.load_balancer_id;
    let items = env
        .store
        .claim(
            "x",
            &[WorkKind::ProviderResources],
            1,
            env.now(),
            env.now() + time::Duration::minutes(1),
        )
        .await
        .unwrap();
    let a = Activation { fence: items[0].fence().unwrap(), item: items[0].clone(), now: env.now() };
    let deps = env.deps();
    let _ = tokio::join!(r.reconcile(&deps, &a), r.reconcile(&deps, &a));
    assert_eq!(overlaps.load(Ordering::SeqCst), 1);
    let _ = id;
}

/// Every provider call that reached the simulator: when, whether it was throttled, and
/// which replica made it.
#[derive(Default)]
struct Calls(Mutex<Vec<(Timestamp, bool, &'static str)>>);

/// Records every provider call with when it started.
struct Recording {
    calls: Arc<Calls>,
    clock: Arc<dyn Clock>,
    replica: &'static str,
}

#[async_trait]
impl CallHook for Recording {
    /// When the call started.
    type Ticket = Timestamp;
    async fn before(&self, _: ProviderCall) -> ProviderResult<Timestamp> {
        Ok(self.clock.now())
    }
    async fn after(
        &self,
        _: ProviderCall,
        at: Timestamp,
        outcome: Result<(), &ProviderError>,
    ) -> ProviderResult<()> {
        // The budget refuses a request before the adapter sends it (the budget admits
        // each request, inside the call): such a call never reached the simulator.
        if matches!(outcome, Err(ProviderError::OverBudget { .. })) {
            return Ok(());
        }
        let throttled = matches!(outcome, Err(ProviderError::RateLimited { .. }));
        self.calls.0.lock().unwrap().push((at, throttled, self.replica));
        Ok(())
    }
}

/// What the simulator saw: the most calls it admitted in any minute (each call counts
/// for the minute after it, as DigitalOcean counts), how many it throttled, and the
/// calls per replica.
struct Measured {
    peak_per_minute: usize,
    throttled: usize,
    per_replica: BTreeMap<&'static str, usize>,
}

fn measure(calls: &Calls) -> Measured {
    let mut all = calls.0.lock().unwrap().clone();
    all.sort_by_key(|c| c.0);
    let admitted: Vec<Timestamp> = all.iter().filter(|c| !c.1).map(|c| c.0).collect();
    let peak_per_minute = admitted
        .iter()
        .enumerate()
        .map(|(i, &t)| {
            admitted[i..].iter().take_while(|&&u| u - t < time::Duration::minutes(1)).count()
        })
        .max()
        .unwrap_or(0);
    let mut per_replica = BTreeMap::new();
    for c in &all {
        *per_replica.entry(c.2).or_default() += 1;
    }
    Measured { peak_per_minute, throttled: all.iter().filter(|c| c.1).count(), per_replica }
}

/// Two replicas converge 80 load balancers of one account whose provider allows 60
/// calls a minute, each replica with the budget `budget(replica)` gives it.
async fn two_replicas_on_one_account(budget: impl Fn(&Env) -> Arc<dyn Budget>) -> Measured {
    const LIMIT: u32 = 60;
    let config = SimConfig {
        rate_limits: RateLimits { per_hour: 100_000, per_minute: LIMIT },
        ..SimConfig::default()
    };
    let store = Arc::new(bc_store::SqlStore::connect("sqlite::memory:").await.unwrap());
    let env = Env::on(store, config).await;
    let calls = Arc::new(Calls::default());
    // Few slots each, so both replicas claim work every round.
    let replica = |name: &'static str| {
        let (calls, clock): (_, Arc<dyn Clock>) = (calls.clone(), env.clock.clone());
        let registry = Arc::new(ForwardRegistry::new(env.registry(), move |_| Recording {
            calls: calls.clone(),
            clock: clock.clone(),
            replica: name,
        }));
        let deps = env.deps_with(registry, budget(&env));
        let reconcilers: Vec<Arc<dyn Reconciler>> = vec![Arc::new(LoadBalancers::default())];
        let config = RuntimeConfig {
            concurrency: 4,
            seed: bc_store::testing::uniq(),
            ..RuntimeConfig::new(name)
        };
        Arc::new(bc_reconcile::Runtime::new(deps, reconcilers, config).unwrap())
    };
    let stepper =
        Stepper::together(vec![replica("replica-a"), replica("replica-b")], env.clock.clone());
    let mut ids = Vec::new();
    for i in 0..80 {
        ids.push(env.create_lb(&format!("lb-{i}")).await.load_balancer_id);
    }
    let reports = stepper.run_until_idle(50_000).await.unwrap();
    eprintln!(
        "{} activations over {} of stepped time",
        reports.len(),
        env.now() - Timestamp::parse_rfc3339(bc_sim::testing::START).unwrap()
    );
    assert!(env.states(&ids).await.iter().all(|s| *s == ResourceState::Ready));
    assert_eq!(env.provider_lbs().len(), 80);
    measure(&calls)
}

/// The account's budget: 60 calls in any minute, bursts of 10.
fn sixty_a_minute() -> BudgetConfig {
    BudgetConfig {
        minute: WindowLimit::new(60, 60_000, 10),
        hour: WindowLimit::new(100_000, 3_600_000, 50_000),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_one_account_budget_through_the_store() {
    let shared = two_replicas_on_one_account(|env| {
        Arc::new(StoreBudget::new(env.store.clone(), sixty_a_minute()))
    })
    .await;
    eprintln!(
        "shared budget: peak {} calls/min at the simulator (limit 60), {} throttled, per replica {:?}",
        shared.peak_per_minute, shared.throttled, shared.per_replica
    );
    assert!(shared.peak_per_minute <= 60, "peak {} calls in a minute", shared.peak_per_minute);
    assert_eq!(shared.throttled, 0, "the provider never had to throttle");
    assert!(
        shared.per_replica.len() == 2 && shared.per_replica.values().all(|n| *n >= 20),
        "{:?}",
        shared.per_replica
    );

    // The control: a budget per replica lets the two together overspend, which the same
    // measurement sees.
    let apart = two_replicas_on_one_account(|_| Arc::new(LocalBudget::new(sixty_a_minute()))).await;
    eprintln!(
        "a budget per replica: peak {} calls/min, {} throttled by the simulator",
        apart.peak_per_minute, apart.throttled
    );
    assert!(apart.throttled > 0 || apart.peak_per_minute > 60, "the control did not overspend");
}

/// One replica's concurrent activations on one account take turns at the shared budget:
/// 64 calls at once are all granted and each spends exactly one call. Before the turns,
/// they raced each other's compare-and-swap and most gave up as "contended" after 16
/// misses — contention no other replica caused. The calls waiting for a turn go together
/// in one swap (issue 31), so the row is written fewer times than there are calls, and
/// holds what 64 calls one by one come to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replicas_concurrent_calls_on_one_account_never_contend() {
    for backend in [Backend::Memory, Backend::Postgres] {
        run(backend, |store| async move {
            let roomy = BudgetConfig::per_minute_and_hour(1_000_000, 10_000_000);
            let budget = Arc::new(StoreBudget::new(store.clone(), roomy));
            let account = bc_store::testing::missing_account();
            let now = Timestamp::parse_rfc3339(bc_sim::testing::START).unwrap();
            let calls = (0..64).map(|_| {
                let (budget, account) = (budget.clone(), account.clone());
                tokio::spawn(async move { budget.acquire(&account, now).await })
            });
            let results = futures::future::join_all(calls).await;
            let refused: Vec<_> =
                results.into_iter().map(|r| r.expect("task")).filter_map(Result::err).collect();
            assert!(refused.is_empty(), "{} of 64 refused: {:?}", refused.len(), refused.first());
            // Every grant spent one call: the row holds 64 calls taken at `now`.
            let row = store.budget_get(account.as_str()).await.unwrap().expect("budget row");
            let spent = bc_domain::rules::budget::acquire(&roomy, &Default::default(), now, 64);
            assert_eq!(Ok(row.state), spent);
            assert!((1..=64).contains(&row.version), "{} swaps", row.version);
        })
        .await;
    }
}
