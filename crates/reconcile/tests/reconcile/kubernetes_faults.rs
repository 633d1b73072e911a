//! Fault schedules (proptest): the Kubernetes reconcilers run with random provider and
//! cluster faults — throttling, 5xx, "busy", timeouts before a call, and answers lost
//! after a call took effect (what a crash right after that step looks like) — and with
//! random restarts (caches gone) — with load balancers alongside, all four kinds in one
//! runtime under one schedule. Once the faults stop, everything converges with no
//! duplicate provider object, and a teardown leaves nothing behind, every quota unit
//! back and every billing interval closed.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bc_domain::model::QuotaResource;
use bc_domain::model::{ClusterMode, ProviderAccount, SecretString};
use bc_domain::policy::{PoolPolicy, Scale};
use bc_domain::ports::*;
use bc_domain::{ClusterId, NodePoolState, PoolId, ProviderError, ResourceState};
use bc_domain::{LoadBalancerId, Timestamp};
use bc_reconcile::forward::hooked;
use bc_reconcile::kinds::reconciler_of;
use bc_reconcile::testing::{Call, Env, OnProvider, Stepper, flavor};
use bc_reconcile::{
    CallHook, Deps, Entropy, Forward, Listing, Observer, ProviderCall, Runtime, RuntimeConfig,
};
use bc_store::testing::lb_spec;
use proptest::prelude::*;

/// What happens to one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// It goes through.
    Pass,
    /// 5xx before it reaches the provider.
    ServerError,
    /// 429.
    Throttled,
    /// The provider's "busy" answer.
    Busy,
    /// No answer in time; the call never reached the provider.
    Timeout,
    /// The call took effect, its answer was lost (a crash right after the step).
    Lost,
}

#[derive(Default)]
struct Schedule(Mutex<VecDeque<Action>>);

impl Schedule {
    fn next(&self) -> Action {
        self.0.lock().unwrap().pop_front().unwrap_or(Action::Pass)
    }
    fn load(&self, actions: &[Action]) {
        *self.0.lock().unwrap() = actions.iter().copied().collect();
    }
    fn clear(&self) {
        self.0.lock().unwrap().clear();
    }
    fn before(&self) -> Result<bool, ProviderError> {
        match self.next() {
            Action::Pass => Ok(false),
            Action::Lost => Ok(true),
            Action::ServerError => {
                Err(ProviderError::Transient { message: "500 server_error".into() })
            }
            Action::Throttled => Err(ProviderError::RateLimited { retry_after_ms: 2000 }),
            Action::Busy => Err(ProviderError::Busy {
                message: "403 busy, still applying a previous change".into(),
            }),
            Action::Timeout => Err(ProviderError::Transient { message: "timed out".into() }),
        }
    }
}

fn lost() -> ProviderError {
    ProviderError::Transient { message: "the answer was lost".into() }
}

/// Every provider call under the schedule: a fault before it, or its effect with the
/// answer lost.
#[async_trait]
impl CallHook for Schedule {
    /// Whether the call's answer is lost.
    type Ticket = bool;
    async fn before(&self, _: ProviderCall) -> ProviderResult<bool> {
        self.before()
    }
    async fn after(
        &self,
        _: ProviderCall,
        lose: bool,
        _: Result<(), &ProviderError>,
    ) -> ProviderResult<()> {
        if lose { Err(lost()) } else { Ok(()) }
    }
}

struct FaultyObserver {
    inner: Arc<dyn Observer>,
    s: Arc<Schedule>,
}

#[async_trait]
impl Observer for FaultyObserver {
    async fn provider(
        &self,
        account: &ProviderAccount,
    ) -> Result<Arc<dyn ProviderImpl>, ProviderError> {
        let inner = self.inner.provider(account).await?;
        Ok(Arc::new(Forward::with_hook(inner, self.s.clone())))
    }
    async fn clusters(
        &self,
        account: &ProviderAccount,
        max_age: Duration,
    ) -> Result<Arc<Listing<ProviderCluster>>, ProviderError> {
        let listing = self.inner.clusters(account, max_age);
        hooked(self.s.as_ref(), ProviderCall::ListClusters, listing).await
    }
    async fn load_balancers(
        &self,
        account: &ProviderAccount,
        max_age: Duration,
    ) -> Result<Arc<Listing<ProviderLoadBalancer>>, ProviderError> {
        let listing = self.inner.load_balancers(account, max_age);
        hooked(self.s.as_ref(), ProviderCall::ListLoadBalancers, listing).await
    }
    fn invalidate(&self, account: &ProviderAccount) {
        self.inner.invalidate(account)
    }
}

/// Cluster writes under the same schedule (reads pass).
struct FaultyClient {
    inner: Arc<dyn ClusterClient>,
    s: Arc<Schedule>,
}

fn cluster_fault(a: Action) -> Result<bool, ClusterError> {
    match a {
        Action::Pass => Ok(false),
        Action::Lost => Ok(true),
        other => Err(ClusterError::Unreachable(format!("{other:?}"))),
    }
}

#[async_trait]
impl ClusterClient for FaultyClient {
    async fn get_labels(
        &self,
        o: &ObjectRef,
    ) -> Result<Option<BTreeMap<String, String>>, ClusterError> {
        self.inner.get_labels(o).await
    }
    async fn read_object(&self, o: &ObjectRef) -> Result<Option<ObjectMeta>, ClusterError> {
        self.inner.read_object(o).await
    }
    async fn apply_owned(
        &self,
        o: &KubeObject,
        owner: &OwnerLabel,
    ) -> Result<ApplyOutcome, ClusterError> {
        let lose = cluster_fault(self.s.next())?;
        let r = self.inner.apply_owned(o, owner).await;
        if lose { Err(ClusterError::Unreachable("answer lost".into())) } else { r }
    }
    async fn delete_owned(
        &self,
        o: &ObjectRef,
        owner: &OwnerLabel,
    ) -> Result<DeleteOutcome, ClusterError> {
        let lose = cluster_fault(self.s.next())?;
        let r = self.inner.delete_owned(o, owner).await;
        if lose { Err(ClusterError::Unreachable("answer lost".into())) } else { r }
    }
    async fn list_nodes(&self, selector: &str) -> Result<Vec<ClusterNode>, ClusterError> {
        self.inner.list_nodes(selector).await
    }
    async fn list_namespace(
        &self,
        namespace: &str,
    ) -> Result<Vec<bc_domain::ports::NamespacedObject>, ClusterError> {
        self.inner.list_namespace(namespace).await
    }
    async fn list_provider_backed(&self) -> Result<bc_domain::ports::ProviderBacked, ClusterError> {
        self.inner.list_provider_backed().await
    }
    async fn review_token(
        &self,
        token: &SecretString,
        audiences: &[String],
    ) -> Result<bc_domain::ports::TokenReview, ClusterError> {
        self.inner.review_token(token, audiences).await
    }
}

struct FaultyApi {
    inner: Arc<dyn ClusterApi>,
    s: Arc<Schedule>,
}

#[async_trait]
impl ClusterApi for FaultyApi {
    async fn connect(
        &self,
        kubeconfig: &SecretString,
    ) -> Result<Arc<dyn ClusterClient>, ClusterError> {
        let inner = self.inner.connect(kubeconfig).await?;
        Ok(Arc::new(FaultyClient { inner, s: self.s.clone() }))
    }
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        6 => Just(Action::Pass),
        1 => Just(Action::ServerError),
        1 => Just(Action::Throttled),
        1 => Just(Action::Busy),
        1 => Just(Action::Timeout),
        2 => Just(Action::Lost),
    ]
}

/// A runtime of all four kinds on `deps` (fresh reconcilers: a restarted process).
fn all_kinds(deps: &Deps, env: &Env) -> Arc<Runtime> {
    let entropy: Arc<dyn Entropy> = env.entropy.clone();
    let reconcilers = WorkKind::ALL.into_iter().map(|k| reconciler_of(k, entropy.clone()));
    let config = RuntimeConfig::new("test-replica");
    Arc::new(Runtime::new(deps.clone(), reconcilers.collect(), config).expect("runtime"))
}

struct World {
    env: Env,
    deps: Deps,
    schedule: Arc<Schedule>,
    /// The driver of a runtime on the faulty ports.
    driver: Stepper,
}

impl World {
    async fn new(on: OnProvider) -> Self {
        let env = Env::start_on(on).await;
        let schedule = Arc::new(Schedule::default());
        let deps = Deps {
            observer: Arc::new(FaultyObserver {
                inner: env.deps.observer.clone(),
                s: schedule.clone(),
            }),
            clusters: Arc::new(FaultyApi { inner: env.deps.clusters.clone(), s: schedule.clone() }),
            ..env.deps.clone()
        };
        let driver = Stepper::new(all_kinds(&deps, &env), env.clock.clone());
        Self { env, deps, schedule, driver }
    }

    /// One step of the driver over the faulty ports (then bcd and joins, as `Env::step`).
    async fn step(&self) {
        self.driver.step(Duration::from_secs(600)).await.expect("store");
        bc_sim::testing::bounded(bc_sim::bcd::run_once(self.env.sim.state())).await;
        self.env.record_joins().await;
    }

    async fn converged(&self, pool: &PoolId, cluster: &ClusterId) -> bool {
        let e = &self.env;
        let s = e.substrate(pool).await;
        let generation = e.store.pool_get_any(pool).await.unwrap().unwrap().generation;
        let c = e.cluster(cluster).await;
        let rows = e
            .store
            .node_pool_list_by_cluster(cluster, &PageRequest::first(100))
            .await
            .unwrap()
            .items;
        s.state == ResourceState::Ready
            && s.observed_generation == generation
            && s.waiting_to_join.is_none()
            && c.status.state == ResourceState::Ready
            && rows
                .iter()
                .all(|r| r.state == NodePoolState::Ready && r.observed_generation == r.generation)
    }
}

fn pools_of(p: &ProviderCluster) -> Vec<(String, String, u32)> {
    let mut v: Vec<_> =
        p.node_pools.iter().map(|n| (n.name.clone(), n.size.clone(), n.count)).collect();
    v.sort();
    v
}

async fn scenario(on: OnProvider, actions: Vec<Action>, restart_at: Option<usize>) {
    let mut w = World::new(on).await;
    let (size, other) = (on.node_size(), on.other_size());
    let policy =
        w.env.create_policy("latest", vec![flavor("cpu", size, 1), flavor("arm", other, 1)]);
    let pool = w.env.create_pool("web", policy.clone()).await;
    let (c, rows) = w
        .env
        .create_cluster("tenant", ClusterMode::Standard, vec![("workers", size, Scale::Count(1))])
        .await;
    // Load balancers under the same schedule, where the provider offers them (GKE offers
    // none, SPEC §11): two kept, one deleted mid-way.
    let lb_pool = w.env.lb_pool("lbs", 10).await;
    let mut lbs = Vec::new();
    if !w.env.provider().offer().load_balancer_types.is_empty() {
        for n in ["lb-a", "lb-b", "lb-c"] {
            lbs.push(w.env.create_load_balancer(&lb_pool, n, lb_spec()).await.load_balancer_id);
        }
    }
    w.schedule.load(&actions);
    for i in 0..12 {
        if restart_at == Some(i) {
            w.driver.restart(vec![all_kinds(&w.deps, &w.env)]);
        }
        w.step().await;
        if i == 5 {
            // Changes land while faults still fly.
            let changed = PoolPolicy {
                flavors: vec![flavor("cpu", size, 2), flavor("gpu", other, 1)],
                ..policy.clone()
            };
            w.env.update_policy(&pool.pool_id, changed).await;
            w.env.change_node_pool(&rows[0].node_pool_id, Some(Scale::Count(2)), false).await;
            w.env.create_node_pool(&c.cluster_id, "extra", other, Scale::Count(1)).await;
            if let Some(lb) = lbs.get(2) {
                delete_lb(&w.env, lb).await;
            }
        }
    }
    w.schedule.clear();
    let mut done = false;
    for _ in 0..60 {
        if w.converged(&pool.pool_id, &c.cluster_id).await && lbs_settled(&w.env, &lbs).await {
            done = true;
            break;
        }
        w.step().await;
    }
    assert!(
        done,
        "not converged: {:?} {:?}",
        w.env.substrate(&pool.pool_id).await,
        w.env.cluster(&c.cluster_id).await
    );
    let provider = w.env.provider();
    let clusters = provider.kubernetes().list_clusters().await.unwrap();
    let mut names: Vec<&str> = clusters.iter().map(|c| c.name.as_str()).collect();
    names.sort();
    let ours = w.env.substrate_cluster_name(&pool.pool_id);
    let name = |flavor: &str| w.env.flavor_pool(&pool.pool_id, flavor);
    assert_eq!(names, vec![ours.as_str(), "tenant"], "one cluster each, never two");
    let sub = clusters.iter().find(|c| c.name == ours).unwrap();
    assert_eq!(pools_of(sub), vec![(name("cpu"), size.into(), 2), (name("gpu"), other.into(), 1)]);
    let tenant = clusters.iter().find(|c| c.name == "tenant").unwrap();
    assert_eq!(
        pools_of(tenant),
        vec![("extra".into(), other.into(), 1), ("workers".into(), size.into(), 2)]
    );
    assert_eq!(w.env.substrate(&pool.pool_id).await.nodes_joined, 3);
    // One provider load balancer per live one, none for the deleted one.
    if !lbs.is_empty() {
        let at_provider = provider.load_balancers().list().await.unwrap();
        assert_eq!(at_provider.len(), 2, "{at_provider:?}");
    }

    // Teardown under faults, then without.
    w.schedule.load(&actions);
    w.env.archive(&pool.pool_id).await;
    w.env.change_cluster(&c.cluster_id, None, None, true).await;
    for _ in 0..8 {
        w.step().await;
    }
    w.schedule.clear();
    let mut gone = false;
    for _ in 0..40 {
        let s = w.env.substrate(&pool.pool_id).await;
        let cl = w.env.cluster(&c.cluster_id).await;
        if s.state == ResourceState::Deleted && cl.status.state == ResourceState::Deleted {
            gone = true;
            break;
        }
        w.step().await;
    }
    assert!(
        gone,
        "not torn down: {:?} {:?}",
        w.env.substrate(&pool.pool_id).await,
        w.env.cluster(&c.cluster_id).await
    );
    // Nothing of ours is left at the provider, and no row is live.
    for _ in 0..3 {
        w.step().await;
    }
    assert!(
        provider.kubernetes().list_clusters().await.unwrap().is_empty(),
        "{:?}",
        provider.kubernetes().list_clusters().await
    );
    let sub_cluster = w.env.substrate(&pool.pool_id).await.cluster_id.unwrap();
    for cid in [&sub_cluster, &c.cluster_id] {
        let live = w
            .env
            .store
            .node_pool_list_by_cluster(cid, &PageRequest::first(100))
            .await
            .unwrap()
            .items;
        assert!(live.is_empty(), "{live:?}");
    }
    let tokens_live = w
        .env
        .join
        .calls()
        .iter()
        .filter_map(|c| c["joinToken"].as_str().map(str::to_owned))
        .collect::<Vec<_>>();
    for t in tokens_live {
        assert!(
            w.env
                .store
                .join_token_find(&bc_domain::token::sha256_hex(t.as_bytes()))
                .await
                .unwrap()
                .is_none()
        );
    }
    // Every cluster was made once.
    assert_eq!(w.env.calls(Call::CreateCluster), 2);
    if lbs.is_empty() {
        return;
    }

    // The load balancers deleted too, under faults: nothing left at the provider, every
    // quota unit back, and one billing interval per load balancer that was ever ready,
    // each closed.
    w.schedule.load(&actions);
    for id in &lbs[..2] {
        delete_lb(&w.env, id).await;
    }
    for _ in 0..12 {
        w.step().await;
    }
    w.schedule.clear();
    for _ in 0..40 {
        if lbs_settled(&w.env, &lbs).await {
            break;
        }
        w.step().await;
    }
    assert!(lbs_settled(&w.env, &lbs).await);
    assert!(provider.load_balancers().list().await.unwrap().is_empty());
    let quota = w.env.store.quota_get(&lb_pool.pool_id, QuotaResource::LoadBalancers).await;
    assert_eq!(quota.unwrap().unwrap().used, 0);
    let billing = w
        .env
        .store
        .billing_list(
            &w.env.tenant,
            Timestamp::EPOCH,
            w.env.clock.now() + time::Duration::days(1),
            None,
            &PageRequest::first(100),
        )
        .await
        .unwrap()
        .items;
    for id in &lbs {
        let of: Vec<_> = billing.iter().filter(|b| b.resource == id.as_str()).collect();
        assert!(of.len() <= 1 && of.iter().all(|b| b.end.is_some()), "{id}: {of:?}");
    }
    assert_eq!(
        billing.iter().filter(|b| lbs[..2].iter().any(|l| b.resource == l.as_str())).count(),
        2
    );
}

/// `loadBalancers.delete`'s writes: `delete_requested` under CAS, and the work item.
async fn delete_lb(env: &Env, id: &LoadBalancerId) {
    env.delete_load_balancer(id).await;
}

/// Whether every load balancer is where its desired state asks: `ready`, or `deleted`
/// with its quota unit released.
async fn lbs_settled(env: &Env, ids: &[LoadBalancerId]) -> bool {
    for id in ids {
        let lb = env.store.load_balancer_get_any(id).await.unwrap().unwrap();
        let want = if lb.delete_requested { ResourceState::Deleted } else { ResourceState::Ready };
        if lb.status.state != want || (lb.delete_requested && !lb.quota_released) {
            return false;
        }
    }
    true
}

/// One schedule on `on`, on a runtime of its own.
fn run(on: OnProvider, actions: Vec<Action>, restart_at: Option<usize>) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    rt.expect("runtime").block_on(scenario(on, actions, restart_at));
}

// One schedule body, each provider's cases in a test of its own (so both always run).
proptest! {
    #![proptest_config(ProptestConfig { cases: 8, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn faults_and_crashes_never_duplicate_or_leave_anything_on_do(
        actions in proptest::collection::vec(action(), 0..60),
        restart_at in proptest::option::of(0usize..12),
    ) {
        run(OnProvider::DigitalOcean, actions, restart_at);
    }

    #[test]
    fn faults_and_crashes_never_duplicate_or_leave_anything_on_gke(
        actions in proptest::collection::vec(action(), 0..60),
        restart_at in proptest::option::of(0usize..12),
    ) {
        run(OnProvider::Gke, actions, restart_at);
    }
}
