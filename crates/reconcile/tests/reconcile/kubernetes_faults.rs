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
use bc_reconcile::kinds::reconciler_of;
use bc_reconcile::testing::{Env, Stepper, create_policy, flavor};
use bc_reconcile::{Deps, Entropy, Listing, Observer, Runtime, RuntimeConfig};
use bc_sim::testing::NODE_SIZE;
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

/// Runs `$call` under the schedule: a fault before it, or its effect with the answer lost.
macro_rules! faulty {
    ($s:expr, $call:expr) => {{
        let lose = $s.before()?;
        let r = $call.await;
        if lose { Err(lost()) } else { r }
    }};
}

struct Faulty {
    inner: Arc<dyn ProviderImpl>,
    s: Arc<Schedule>,
}

#[async_trait]
impl KubernetesProvider for Faulty {
    async fn list_clusters(&self) -> ProviderResult<Vec<ProviderCluster>> {
        faulty!(self.s, self.inner.kubernetes().list_clusters())
    }
    async fn get_cluster(&self, id: &str) -> ProviderResult<ProviderCluster> {
        faulty!(self.s, self.inner.kubernetes().get_cluster(id))
    }
    async fn create_cluster(&self, req: &CreateClusterRequest) -> ProviderResult<ProviderCluster> {
        faulty!(self.s, self.inner.kubernetes().create_cluster(req))
    }
    async fn update_cluster(
        &self,
        id: &str,
        req: &UpdateClusterRequest,
    ) -> ProviderResult<ProviderCluster> {
        faulty!(self.s, self.inner.kubernetes().update_cluster(id, req))
    }
    async fn delete_cluster(&self, id: &str) -> ProviderResult<()> {
        faulty!(self.s, self.inner.kubernetes().delete_cluster(id))
    }
    async fn associated_resources(&self, id: &str) -> ProviderResult<AssociatedResources> {
        faulty!(self.s, self.inner.kubernetes().associated_resources(id))
    }
    async fn delete_cluster_selective(&self, id: &str, lbs: &[String]) -> ProviderResult<()> {
        faulty!(self.s, self.inner.kubernetes().delete_cluster_selective(id, lbs))
    }
    async fn list_node_pools(&self, c: &str) -> ProviderResult<Vec<ProviderNodePool>> {
        faulty!(self.s, self.inner.kubernetes().list_node_pools(c))
    }
    async fn get_node_pool(&self, c: &str, n: &str) -> ProviderResult<ProviderNodePool> {
        faulty!(self.s, self.inner.kubernetes().get_node_pool(c, n))
    }
    async fn create_node_pool(
        &self,
        c: &str,
        req: &NodePoolRequest,
    ) -> ProviderResult<ProviderNodePool> {
        faulty!(self.s, self.inner.kubernetes().create_node_pool(c, req))
    }
    async fn update_node_pool(
        &self,
        c: &str,
        n: &str,
        req: &NodePoolRequest,
    ) -> ProviderResult<ProviderNodePool> {
        faulty!(self.s, self.inner.kubernetes().update_node_pool(c, n, req))
    }
    async fn delete_node_pool(&self, c: &str, n: &str) -> ProviderResult<()> {
        faulty!(self.s, self.inner.kubernetes().delete_node_pool(c, n))
    }
    async fn delete_node(
        &self,
        c: &str,
        p: &str,
        n: &str,
        skip: bool,
        replace: bool,
    ) -> ProviderResult<()> {
        faulty!(self.s, self.inner.kubernetes().delete_node(c, p, n, skip, replace))
    }
    async fn available_upgrades(&self, c: &str) -> ProviderResult<Vec<KubernetesVersion>> {
        faulty!(self.s, self.inner.kubernetes().available_upgrades(c))
    }
    async fn upgrade_cluster(&self, c: &str, v: &str) -> ProviderResult<()> {
        faulty!(self.s, self.inner.kubernetes().upgrade_cluster(c, v))
    }
    async fn options(&self) -> ProviderResult<ProviderOptions> {
        faulty!(self.s, self.inner.kubernetes().options())
    }
    async fn credentials(&self, c: &str) -> ProviderResult<ClusterCredentials> {
        faulty!(self.s, self.inner.kubernetes().credentials(c))
    }
    fn invalidate_credentials(&self, c: &str) {
        self.inner.kubernetes().invalidate_credentials(c)
    }
}

#[async_trait]
impl ProviderImpl for Faulty {
    fn offer(&self) -> ProviderOffer {
        self.inner.offer()
    }
    async fn check_credentials(&self) -> ProviderResult<()> {
        self.inner.check_credentials().await
    }
    fn kubernetes(&self) -> &dyn KubernetesProvider {
        self
    }
    fn load_balancers(&self) -> &dyn LoadBalancerProvider {
        self
    }
}

#[async_trait]
impl LoadBalancerProvider for Faulty {
    async fn list(&self) -> ProviderResult<Vec<ProviderLoadBalancer>> {
        faulty!(self.s, self.inner.load_balancers().list())
    }
    async fn get(&self, id: &str) -> ProviderResult<ProviderLoadBalancer> {
        faulty!(self.s, self.inner.load_balancers().get(id))
    }
    async fn create(&self, req: &LoadBalancerRequest) -> ProviderResult<ProviderLoadBalancer> {
        faulty!(self.s, self.inner.load_balancers().create(req))
    }
    async fn update(
        &self,
        id: &str,
        req: &LoadBalancerRequest,
    ) -> ProviderResult<ProviderLoadBalancer> {
        faulty!(self.s, self.inner.load_balancers().update(id, req))
    }
    async fn delete(&self, id: &str) -> ProviderResult<()> {
        faulty!(self.s, self.inner.load_balancers().delete(id))
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
        Ok(Arc::new(Faulty { inner, s: self.s.clone() }))
    }
    async fn clusters(
        &self,
        account: &ProviderAccount,
        max_age: Duration,
    ) -> Result<Arc<Listing<ProviderCluster>>, ProviderError> {
        faulty!(self.s, self.inner.clusters(account, max_age))
    }
    async fn load_balancers(
        &self,
        account: &ProviderAccount,
        max_age: Duration,
    ) -> Result<Arc<Listing<ProviderLoadBalancer>>, ProviderError> {
        faulty!(self.s, self.inner.load_balancers(account, max_age))
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
    async fn new() -> Self {
        let env = Env::start().await;
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

async fn scenario(actions: Vec<Action>, restart_at: Option<usize>) {
    let mut w = World::new().await;
    let acct = w.env.account.provider_account_id.clone();
    let policy =
        create_policy(&acct, "latest", vec![flavor("cpu", NODE_SIZE, 1), flavor("arm", "c-4", 1)]);
    let pool = w.env.create_pool("web", policy.clone()).await;
    let (c, rows) = w
        .env
        .create_cluster(
            "tenant",
            ClusterMode::Standard,
            vec![("workers", NODE_SIZE, Scale::Count(1))],
        )
        .await;
    // Load balancers under the same schedule: two kept, one deleted mid-way.
    let lb_pool = w.env.lb_pool("lbs", 10).await;
    let mut lbs = Vec::new();
    for n in ["lb-a", "lb-b", "lb-c"] {
        lbs.push(w.env.create_load_balancer(&lb_pool, n, lb_spec()).await.load_balancer_id);
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
                flavors: vec![flavor("cpu", NODE_SIZE, 2), flavor("gpu", "g-4vcpu-16gb", 1)],
                ..policy.clone()
            };
            w.env.update_policy(&pool.pool_id, changed).await;
            w.env.change_node_pool(&rows[0].node_pool_id, Some(Scale::Count(2)), false).await;
            w.env.create_node_pool(&c.cluster_id, "extra", "c-4", Scale::Count(1)).await;
            delete_lb(&w.env, &lbs[2]).await;
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
    let d = pool.pool_id.dashed();
    let ours = format!("bc-{d}");
    assert_eq!(names, vec![ours.as_str(), "tenant"], "one cluster each, never two");
    let sub = clusters.iter().find(|c| c.name == ours).unwrap();
    assert_eq!(
        pools_of(sub),
        vec![
            (format!("bc-{d}-cpu"), NODE_SIZE.into(), 2),
            (format!("bc-{d}-gpu"), "g-4vcpu-16gb".into(), 1)
        ]
    );
    let tenant = clusters.iter().find(|c| c.name == "tenant").unwrap();
    assert_eq!(
        pools_of(tenant),
        vec![("extra".into(), "c-4".into(), 1), ("workers".into(), NODE_SIZE.into(), 2)]
    );
    assert_eq!(w.env.substrate(&pool.pool_id).await.nodes_joined, 3);
    // One provider load balancer per live one, none for the deleted one.
    let at_provider = provider.load_balancers().list().await.unwrap();
    assert_eq!(at_provider.len(), 2, "{at_provider:?}");

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
    assert_eq!(w.env.count("POST", bc_sim::model::routes::CLUSTERS), 2);

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
    let mut lb = env.store.load_balancer_get_any(id).await.unwrap().unwrap();
    let expected = lb.generation;
    lb.generation += 1;
    lb.delete_requested = true;
    let uow = UnitOfWork::new()
        .write(Write::UpdateLoadBalancer { load_balancer: lb, expected_generation: expected })
        .enqueue(WorkKind::ProviderResources, id.as_str(), env.clock.now());
    env.store.commit(uow).await.unwrap();
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn faults_and_crashes_never_duplicate_or_leave_anything(
        actions in proptest::collection::vec(action(), 0..60),
        restart_at in proptest::option::of(0usize..12),
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(scenario(actions, restart_at));
    }
}
