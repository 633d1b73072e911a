//! Test support (feature `testing`): the stepped driver ([`Stepper`]) that runs
//! runtimes' due work on a manual clock, and the environment the Kubernetes
//! reconcilers' tests share — the real SQLite store, the simulated cloud reached through
//! the production adapters (`bc_sim::testing::Cloud`: DigitalOcean over HTTP on
//! loopback, each cluster's API through the kube client in process), a provider account
//! with sealed credentials, and a stand-in for `agents.join` that records the joins the
//! simulated bcd makes.
//!
//! Invariants: nothing sleeps — time moves only when the driver jumps the clock to the
//! next due item; every loop is bounded in rounds; items are claimed, run and settled
//! by the production [`Runtime`] (its leases, fences, resync, converging waits and
//! backoff), and every provider and cluster call goes over the production wire, so a
//! test means what a deployment does, minus the waiting.

mod calls;
mod fixtures;
mod stepper;

pub use calls::CallCounts;
pub use fixtures::{Halves, with_flavors};
pub use stepper::{StepError, Stepper, Wrap};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bc_domain::model::{
    ClusterMode, KubernetesCluster, LoadBalancer, LoadBalancerSpec, Node, NodePool, Pool,
    ProviderAccount, ProviderKind, QuotaResource, SealedSecret, SecretString, Substrate,
};
use bc_domain::name::LABEL_SUBSTRATE_POOL;
use bc_domain::policy::{
    AdoptClusterPolicy, ClusterPolicy, CreateClusterPolicy, Flavor, PoolPolicy, Scale,
    SubstrateKind, SubstratePolicy, UpgradePolicy,
};
use bc_domain::ports::{
    AgentRepo, Clock, ClusterApi, ClusterRepo, LoadBalancerRepo, ManualClock, PoolRepo,
    ProviderCredentials, ProviderImpl, ProviderRegistry, SecretBox, Store, SubstrateRepo,
    UnitOfWork, WorkKind, WorkQueue, Write,
};
use bc_domain::recipes::{
    ClusterChange, NewCluster, NewLoadBalancer, NewPool, Recipe, StartedSubstrate, cluster_changed,
    cluster_created, load_balancer_changed, load_balancer_created, load_balancer_deleted,
    node_pool_changed, node_pool_created, pool_archived, pool_changed, pool_created,
};
use bc_domain::token::sha256_hex;
use bc_domain::{
    ClusterId, LoadBalancerId, NodeId, NodePoolId, NodePoolState, ObjectName, PoolId,
    ProviderAccountId, ResourceState, TenantId,
};
pub use bc_sim::testing::{Call, OnProvider};
use bc_sim::testing::{Cloud, JoinServer, TEST_TOKEN};
use bc_sim::{Sim, SimConfig};
use bc_store::{AeadSecretBox, SqlStore};

use crate::budget::StoreBudget;
use crate::forward::{ForwardRegistry, ProviderCall};
use crate::kinds::reconciler_of;
use crate::observe::{Observer, SharedObserver};
use crate::reconciler::{Deps, Reconciler, Settings};
use crate::runtime::{ActivationReport, Runtime, RuntimeConfig};
use crate::shared::Entropy;
use bc_domain::rules::budget::BudgetConfig;

/// The longest the clock jumps in one [`Env::run_until`] step: the runtime's default
/// resync, so a steady object is looked at again within a step or two.
pub const STEADY_RESYNC: Duration = Duration::from_secs(600);

/// How long the environment's provider adapters wait for an answer (production's: 30 s
/// on DigitalOcean, 45 s on GKE). The simulator holds a lost answer ([`Env::lose`]) for
/// minutes, so each lost answer costs a scenario this much real time before the
/// adapter reports it; the simulator answers every other request over loopback in
/// milliseconds, far inside it even on a loaded machine.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// The server URL the join Secret names in tests is the join stand-in's.
pub const BCD_IMAGE: &str = "registry.example/bcd:test";

/// Repeatable randomness: every call gives the next value of a counter, mixed. Each
/// instance counts in a stream of its own (2³² values; the default ones above those of
/// [`SeqEntropy::stream`]), so two of them — an environment's and a runtime made beside
/// it — never hand out the same value: under a stepped clock their ids share a
/// millisecond, and the same 80 random bits made the same id (an event "already
/// exists", the activation failed and retried).
#[derive(Debug)]
pub struct SeqEntropy(AtomicU64);

impl Default for SeqEntropy {
    /// A stream no other instance of the process counts in.
    fn default() -> Self {
        static STREAMS: AtomicU64 = AtomicU64::new(1 << 16);
        Self(AtomicU64::new(STREAMS.fetch_add(1, Ordering::Relaxed) << 32))
    }
}

impl SeqEntropy {
    /// The values of stream `n`, from its start: two instances of one stream give the
    /// same values (a run repeated with the same entropy). No default instance counts in
    /// these streams.
    pub fn stream(n: u16) -> Self {
        Self(AtomicU64::new(u64::from(n) << 32))
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Entropy for SeqEntropy {
    fn bytes32(&self) -> [u8; 32] {
        let n = self.0.fetch_add(1, Ordering::Relaxed);
        let mut out = [0u8; 32];
        for (i, chunk) in out.chunks_mut(8).enumerate() {
            chunk.copy_from_slice(
                &splitmix(n.wrapping_mul(4).wrapping_add(i as u64 + 1)).to_le_bytes(),
            );
        }
        out
    }
}

/// The environment of the Kubernetes reconcilers' tests.
pub struct Env {
    /// The store (SQLite in memory; a SQLite file for [`Env::shared`]).
    pub store: Arc<SqlStore>,
    /// The simulated cloud and the production adapters that reach it.
    pub cloud: Cloud,
    /// The simulator (the cloud's).
    pub sim: Sim,
    /// Its clock (also the reconcilers').
    pub clock: Arc<ManualClock>,
    /// The server's secret box (the account's credentials are sealed with it).
    pub secret_box: Arc<AeadSecretBox>,
    /// The ports.
    pub deps: Deps,
    /// The join stand-in (its URL is the server's public URL).
    pub join: JoinServer,
    /// The tenant.
    pub tenant: TenantId,
    /// The provider the scenario runs on.
    pub on: OnProvider,
    /// The provider account (the simulator's [`TEST_TOKEN`] account on DigitalOcean, a
    /// key of its project on GKE).
    pub account: ProviderAccount,
    /// The stepped driver of a runtime of the three Kubernetes reconcilers on `deps`.
    pub driver: Stepper,
    /// The entropy the reconcilers draw from.
    pub entropy: Arc<SeqEntropy>,
    /// The provider calls the reconcilers made, by kind (see [`Env::made`]).
    pub calls_made: Arc<CallCounts>,
    /// The quota rows every pool the environment creates gets: the API's
    /// `default_pool_quotas` (`--default-pool-quota`) it stands for — none, as the API's
    /// default settings give none, until a test sets some.
    pub default_pool_quotas: BTreeMap<QuotaResource, u32>,
    /// The directory of a file-backed store ([`Env::shared`]), removed with the env.
    _dir: Option<Arc<bc_store::testing::TempDir>>,
}

/// A runtime (replica `test-replica`, a fixed jitter seed) of the three Kubernetes
/// reconcilers on `deps`, drawing from `entropy`; fresh reconcilers each call, so a new
/// one stands for a restarted process (its in-memory caches gone).
pub fn kubernetes_runtime(deps: &Deps, entropy: &Arc<SeqEntropy>) -> Arc<Runtime> {
    let config = RuntimeConfig::new("test-replica");
    let reconcilers = kubernetes_reconcilers(entropy.clone());
    Arc::new(Runtime::new(deps.clone(), reconcilers, config).expect("one reconciler per kind"))
}

/// The three Kubernetes reconcilers drawing from `entropy`.
pub fn kubernetes_reconcilers(entropy: Arc<dyn Entropy>) -> Vec<Arc<dyn Reconciler>> {
    [WorkKind::Substrates, WorkKind::Clusters, WorkKind::NodePools]
        .into_iter()
        .map(|k| reconciler_of(k, entropy.clone()))
        .collect()
}

/// A flavor of `count` nodes of `size`.
pub fn flavor(name: &str, size: &str, count: u32) -> Flavor {
    Flavor {
        name: name.into(),
        size: size.into(),
        count: Some(count),
        auto_scale: None,
        labels: BTreeMap::new(),
        taints: vec![],
    }
}

impl Env {
    /// A fresh environment with the default simulator, its account on DigitalOcean, its
    /// reconcilers on the production observer ([`SharedObserver`]), its store a SQLite
    /// file (see [`Self::shared`]).
    pub async fn start() -> Self {
        Self::shared_on(OnProvider::DigitalOcean).await
    }

    /// A fresh environment with the default simulator, its account on `on`, its store a
    /// SQLite file (see [`Self::shared`]).
    pub async fn start_on(on: OnProvider) -> Self {
        Self::shared_on(on).await
    }

    /// A fresh environment with the simulator configured by `config`.
    pub async fn with_config(config: SimConfig) -> Self {
        let store = Arc::new(SqlStore::connect("sqlite::memory:").await.expect("store"));
        Self::on(store, config).await
    }

    /// A fresh environment with the default simulator on a store as production runs it.
    /// (Every environment's reconcilers are on the production observer,
    /// [`SharedObserver`]: one budgeted provider and one cached listing per kind and
    /// account, the default budget kept in the store.)
    ///
    /// Its store is a SQLite file (a pool of connections in WAL mode, as production runs),
    /// not `sqlite::memory:`: an in-memory database lives on one connection, and a
    /// connection closed mid-query (a future dropped while it waited) is replaced by an
    /// empty database — seen as "no such table: join_tokens" in a lost-answer scenario
    /// on GKE.
    pub async fn shared() -> Self {
        Self::shared_on(OnProvider::DigitalOcean).await
    }

    /// [`Self::shared`] with its account on `on`.
    pub async fn shared_on(on: OnProvider) -> Self {
        let dir = bc_store::testing::TempDir::new();
        let url = format!("sqlite://{}?mode=rwc", dir.0.join("store.db").display());
        let store = Arc::new(SqlStore::connect(&url).await.expect("store"));
        let mut env = Self::build(store, SimConfig::default(), on, Some(REQUEST_TIMEOUT)).await;
        env._dir = Some(Arc::new(dir));
        env
    }

    /// An environment on `store` (any backend of `bc_store::testing`, migrated and
    /// empty), with the simulator configured by `config`.
    pub async fn on(store: Arc<SqlStore>, config: SimConfig) -> Self {
        Self::build(store, config, OnProvider::DigitalOcean, Some(REQUEST_TIMEOUT)).await
    }

    /// [`Self::on`] with its account on provider `on`.
    pub async fn on_provider(store: Arc<SqlStore>, config: SimConfig, on: OnProvider) -> Self {
        Self::build(store, config, on, Some(REQUEST_TIMEOUT)).await
    }

    /// [`Self::on_provider`] with the adapters' production request timeout instead of
    /// [`REQUEST_TIMEOUT`]: for a benchmark, which loses no answer and whose thousands
    /// of objects may keep a loaded machine from answering within seconds.
    pub async fn on_provider_with_production_timeout(
        store: Arc<SqlStore>,
        config: SimConfig,
        on: OnProvider,
    ) -> Self {
        Self::build(store, config, on, None).await
    }

    /// `request_timeout`: the adapters' (`None`: production's).
    async fn build(
        store: Arc<SqlStore>,
        config: SimConfig,
        on: OnProvider,
        request_timeout: Option<Duration>,
    ) -> Self {
        let mut cloud = Cloud::with_config(config).await;
        if let Some(timeout) = request_timeout {
            cloud = cloud.with_request_timeout(timeout);
        }
        let (sim, clock) = (cloud.sim.clone(), cloud.clock.clone());
        let secret_box: Arc<AeadSecretBox> = Arc::new(AeadSecretBox::new(&[7u8; 32]).expect("key"));
        let tenant = TenantId::parse("acme").expect("tenant");
        let id = ProviderAccountId::generate(1, 42);
        let (creds, project_id) = match on.kind() {
            ProviderKind::Gke => {
                let key = SecretString::new(cloud.gke_key());
                let creds = ProviderCredentials::service_account(key, None);
                let checked = creds.check(ProviderKind::Gke).expect("the simulator's key");
                let project = checked.project_id().map(str::to_owned);
                (creds, project)
            }
            _ => (ProviderCredentials::new(SecretString::new(TEST_TOKEN)).expect("token"), None),
        };
        let sealed = secret_box.seal(&creds.to_plaintext(), id.as_str().as_bytes()).expect("seal");
        let account = ProviderAccount {
            provider_account_id: id,
            tenant_id: tenant.clone(),
            provider: on.kind(),
            name: ObjectName::parse("main").expect("name"),
            project_id,
            credentials: SealedSecret(sealed),
            created_at: clock.now(),
            deleted_at: None,
        };
        store
            .commit(UnitOfWork::new().write(Write::InsertAccount(account.clone())))
            .await
            .expect("account");
        let made = Arc::new(CallCounts::default());
        let counted = made.clone();
        let registry: Arc<dyn ProviderRegistry> =
            Arc::new(ForwardRegistry::new(cloud.all_providers(secret_box.clone()), move |_| {
                counted.clone()
            }));
        // The production observer: one budgeted provider and one cached listing per kind
        // and account, so every scenario meets the listing cache a deployment has.
        let budget = Arc::new(StoreBudget::new(store.clone(), BudgetConfig::default()));
        let observer: Arc<dyn Observer> =
            Arc::new(SharedObserver::new(registry, budget, clock.clone()));
        let clusters: Arc<dyn ClusterApi> = cloud.clusters();
        let join = JoinServer::start().await;
        let deps = Deps {
            store: store.clone(),
            observer,
            clusters,
            clock: clock.clone(),
            settings: Settings { public_url: join.url().to_owned(), bcd_image: BCD_IMAGE.into() },
        };
        let entropy = Arc::new(SeqEntropy::default());
        let driver = Stepper::new(kubernetes_runtime(&deps, &entropy), clock.clone());
        Self {
            store,
            cloud,
            sim,
            clock,
            secret_box,
            deps,
            join,
            tenant,
            on,
            account,
            driver,
            entropy,
            calls_made: made,
            default_pool_quotas: BTreeMap::new(),
            _dir: None,
        }
    }

    /// `pools.create`'s writes: bc-domain's recipe, as the API commits it, with the
    /// environment's [`Self::default_pool_quotas`].
    pub async fn create_pool(&self, name: &str, policy: PoolPolicy) -> Pool {
        let pool_id = self.new_id(self.clock.now());
        self.create_pool_with(pool_id, name, policy, &self.default_pool_quotas).await
    }

    /// [`Self::create_pool`] of id `pool_id` with `quotas` for default quotas.
    async fn create_pool_with(
        &self,
        pool_id: PoolId,
        name: &str,
        policy: PoolPolicy,
        quotas: &BTreeMap<QuotaResource, u32>,
    ) -> Pool {
        let now = self.clock.now();
        let new = NewPool {
            pool_id,
            tenant_id: self.tenant.clone(),
            name: ObjectName::parse(name).expect("pool name"),
            policy,
        };
        let started = new.policy.substrate.as_ref().map(|_| self.started_substrate(now));
        let made = pool_created(new, quotas, started.as_ref(), now);
        self.commit(made, "create pool").await
    }

    /// Commits a recipe's unit of work (panics naming `what` if it fails): its record.
    async fn commit<T>(&self, made: Recipe<T>, what: &str) -> T {
        self.store.commit(made.uow).await.unwrap_or_else(|e| panic!("{what}: {e}"));
        made.record
    }

    /// A new id of kind `K` at `now`, from the environment's entropy.
    fn new_id<K: bc_domain::IdKind>(&self, now: bc_domain::Timestamp) -> bc_domain::Id<K> {
        bc_domain::Id::generate(u64::try_from(now.unix_ms()).unwrap_or(0), self.entropy.u128())
    }

    /// A substrate started on the environment's account now.
    fn started_substrate(&self, now: bc_domain::Timestamp) -> StartedSubstrate {
        StartedSubstrate {
            account: self.account.provider_account_id.clone(),
            event_id: self.new_id(now),
        }
    }

    /// `pools.update`'s writes: bc-domain's recipe (a substrate the policy adds is
    /// started; the API checks the previous one is gone first).
    pub async fn update_policy(&self, pool_id: &PoolId, policy: PoolPolicy) -> Pool {
        let now = self.clock.now();
        let old = self.store.pool_get_any(pool_id).await.expect("read").expect("pool");
        let adds = old.policy.substrate.is_none() && policy.substrate.is_some();
        let started = adds.then(|| self.started_substrate(now));
        let changed = pool_changed(&old, policy, started.as_ref(), now);
        self.store.commit(changed.uow).await.expect("update pool");
        changed.record
    }

    /// `pools.archive`'s writes: bc-domain's recipe.
    pub async fn archive(&self, pool_id: &PoolId) {
        let old = self.store.pool_get_any(pool_id).await.expect("read").expect("pool");
        let archived = pool_archived(&old, self.clock.now());
        self.store.commit(archived.uow).await.expect("archive");
    }

    /// Enqueues the pool's substrate now (what a change elsewhere, a watch or the steady
    /// resync would do).
    pub async fn driver_wake(&self, pool_id: &PoolId) {
        let e = bc_domain::ports::Enqueue {
            kind: WorkKind::Substrates,
            key: pool_id.to_string(),
            not_before: self.clock.now(),
        };
        self.store.enqueue(e).await.expect("enqueue");
    }

    /// A pool without a substrate (`pools.create`'s recipe), with room for `quota` load
    /// balancers: the API's default quotas with `loadBalancers` at `quota`.
    pub async fn lb_pool(&self, name: &str, quota: u32) -> Pool {
        let mut quotas = self.default_pool_quotas.clone();
        quotas.insert(QuotaResource::LoadBalancers, quota);
        // Its id is not drawn from the reconcilers' entropy (nor the load balancers'), so
        // their sequence of draws is the one the load balancer tests were written on.
        let pool_id = bc_store::testing::id();
        self.create_pool_with(pool_id, name, PoolPolicy::default(), &quotas).await
    }

    /// `loadBalancers.create`'s writes (bc-domain's recipe): the row (pending), its quota
    /// unit and its work item, in one unit of work, due now.
    pub async fn create_load_balancer(
        &self,
        pool: &Pool,
        name: &str,
        spec: LoadBalancerSpec,
    ) -> LoadBalancer {
        let now = self.clock.now();
        let new = NewLoadBalancer {
            load_balancer_id: bc_store::testing::id(),
            tenant_id: pool.tenant_id.clone(),
            pool_id: pool.pool_id.clone(),
            provider_account_id: self.account.provider_account_id.clone(),
            name: ObjectName::parse(name).expect("load balancer name"),
            spec,
        };
        self.commit(load_balancer_created(new, now), "create load balancer").await
    }

    /// `loadBalancers.update`'s writes (bc-domain's recipe): the load balancer's spec as
    /// `change` leaves it, under generation CAS, and its work item.
    pub async fn update_load_balancer(
        &self,
        id: &LoadBalancerId,
        change: impl FnOnce(&mut LoadBalancerSpec),
    ) -> LoadBalancer {
        let old = self.store.load_balancer_get_any(id).await.expect("read").expect("lb");
        let mut spec = old.spec.clone();
        change(&mut spec);
        let changed = load_balancer_changed(&old, old.name.clone(), spec, self.clock.now());
        self.commit(changed, "update load balancer").await
    }

    /// `loadBalancers.delete`'s writes (bc-domain's recipe): the deletion asked under
    /// generation CAS, and its work item.
    pub async fn delete_load_balancer(&self, id: &LoadBalancerId) -> LoadBalancer {
        let old = self.store.load_balancer_get_any(id).await.expect("read").expect("lb");
        self.commit(load_balancer_deleted(&old, self.clock.now()), "delete load balancer").await
    }

    /// A running provider cluster the tenant made outside this system (`tenant`, with a
    /// node pool `own` of one node): its provider id.
    pub fn tenant_cluster(&self) -> String {
        let own = vec![bc_sim::testing::node_pool("own", 1, &[])];
        let pid = bc_sim::testing::create_cluster(&self.sim, "tenant", own);
        bc_sim::testing::run_until_running(&self.sim, &self.clock, &pid);
        pid
    }

    /// [`Self::tenant_cluster`] on the env's provider (on GKE made through the adapter,
    /// in the provider's region, and stepped until it runs): its provider id.
    pub async fn their_cluster(&self) -> String {
        if self.on == OnProvider::DigitalOcean {
            return self.tenant_cluster();
        }
        self.made_outside("tenant", "own").await
    }

    /// Pool `web` adopting provider cluster `pid` with one flavor `cpu` of one node,
    /// stepped until its substrate is `ready` (panics otherwise).
    pub async fn adopting_pool(&self, pid: &str) -> Pool {
        let cpu = flavor("cpu", self.on.node_size(), 1);
        let pool = self
            .create_pool("web", adopt_policy(&self.account.provider_account_id, pid, vec![cpu]))
            .await;
        self.until_substrate(&pool.pool_id, ResourceState::Ready, 40).await;
        pool
    }

    /// The provider's autoscaler moves the first node pool of provider cluster `pid` to
    /// `count` nodes, within autoscale bounds of 1 to 4 (DigitalOcean's doing, not ours).
    pub fn provider_autoscales_to(&self, pid: &str, count: u32) {
        let mut model = self.sim.state().model();
        let now = self.clock.now();
        let np = model.find_cluster(pid, now).expect("the cluster").node_pools.remove(0);
        let spec = bc_sim::model::NodePoolSpec {
            name: Some(np.name.clone()),
            count: Some(i64::from(count)),
            auto_scale: Some(true),
            min_nodes: Some(1),
            max_nodes: Some(4),
            ..Default::default()
        };
        model
            .update_node_pool(bc_sim::testing::TEST_TOKEN, pid, &np.id, spec, now)
            .expect("the autoscaler's update");
    }

    /// The tenant replaces the join Secret of `pool`'s substrate on provider cluster `pid`
    /// with a Secret of their own under the same name (no label of ours): deleting the
    /// substrate's Namespace would now take the tenant's object along.
    pub fn tenant_replaces_the_join_secret(&self, pid: &str, pool: &PoolId) {
        let ns = bc_domain::name::substrate_namespace(pool);
        let kube = &self.sim.state().kube;
        let now = self.clock.now();
        let name = bc_domain::name::JOIN_SECRET_NAME;
        let pid = &self.kube_id(pid);
        kube.delete(
            pid,
            bc_sim::kube::Resource::Secret,
            Some(&ns),
            name,
            &bc_domain::ports::Preconditions::default(),
            now,
        )
        .expect("delete the join Secret");
        let theirs = serde_json::json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": ns}, "stringData": {"k": "v"}});
        kube.apply_manifest(pid, "kubectl", &theirs, false, now).expect("apply the tenant's");
    }

    /// Pool `web` with a create-mode substrate at `version` and one flavor `cpu` of
    /// `nodes` nodes, stepped until the substrate is `ready` (panics otherwise): the
    /// pool, its policy and the substrate.
    pub async fn creating_pool(&self, version: &str, nodes: u32) -> (Pool, PoolPolicy, Substrate) {
        let cpu = flavor("cpu", self.on.node_size(), nodes);
        let policy = self.create_policy(version, vec![cpu]);
        let pool = self.create_pool("web", policy.clone()).await;
        let s = self.until_substrate(&pool.pool_id, ResourceState::Ready, 40).await;
        (pool, policy, s)
    }

    /// A standard cluster `name` with one node pool `workers` of one node, created
    /// through the clusters reconciler and stepped until both are `ready` (panics
    /// otherwise): its row, its first pools' rows and its provider id.
    pub async fn ready_cluster(&self, name: &str) -> (KubernetesCluster, Vec<NodePool>, String) {
        let workers = ("workers", self.on.node_size(), Scale::Count(1));
        let (c, rows) = self.create_cluster(name, ClusterMode::Standard, vec![workers]).await;
        let ready = self
            .run_until(30, async |e: &Self| {
                e.cluster(&c.cluster_id).await.status.state == ResourceState::Ready
                    && e.node_pool(&rows[0].node_pool_id).await.state == NodePoolState::Ready
            })
            .await;
        let c = self.cluster(&c.cluster_id).await;
        assert!(ready, "{c:?}");
        let pid = c.provider_cluster_id.clone().expect("made at the provider");
        (c, rows, pid)
    }

    /// `kubernetesClusters.create`'s writes: the cluster and its first node pools,
    /// pending, and the cluster's work item.
    pub async fn create_cluster(
        &self,
        name: &str,
        mode: ClusterMode,
        pools: Vec<(&str, &str, Scale)>,
    ) -> (KubernetesCluster, Vec<NodePool>) {
        self.create_cluster_in(name, self.on.region(), mode, pools).await
    }

    /// [`Self::create_cluster`] in `region`.
    pub async fn create_cluster_in(
        &self,
        name: &str,
        region: &str,
        mode: ClusterMode,
        pools: Vec<(&str, &str, Scale)>,
    ) -> (KubernetesCluster, Vec<NodePool>) {
        let now = self.clock.now();
        let cluster_id: ClusterId = self.new_id(now);
        let rows = pools
            .into_iter()
            .map(|(n, size, scale)| self.node_pool_row(&cluster_id, n, size, scale))
            .collect();
        let new = NewCluster {
            cluster_id,
            tenant_id: self.tenant.clone(),
            provider_account_id: self.account.provider_account_id.clone(),
            name: ObjectName::parse(name).expect("cluster name"),
            region: region.into(),
            version: None,
            high_availability: false,
            mode,
        };
        self.commit(cluster_created(new, rows, now), "create cluster").await
    }

    /// A pending node pool row of cluster `cluster`, as `kubernetesNodePools.create`
    /// makes it.
    fn node_pool_row(&self, cluster: &ClusterId, name: &str, size: &str, scale: Scale) -> NodePool {
        let now = self.clock.now();
        NodePool::pending(
            self.new_id(now),
            cluster.clone(),
            self.tenant.clone(),
            name.into(),
            size.into(),
            scale,
            now,
        )
    }

    /// `kubernetesNodePools.create`'s writes.
    pub async fn create_node_pool(
        &self,
        cluster: &ClusterId,
        name: &str,
        size: &str,
        scale: Scale,
    ) -> NodePool {
        let c = self.store.cluster_get_any(cluster).await.expect("read").expect("cluster");
        let row = self.node_pool_row(&c.cluster_id, name, size, scale);
        self.commit(node_pool_created(row, self.clock.now()), "create node pool").await
    }

    /// `kubernetesNodePools.resize`'s (and `delete`'s, with `delete`) writes: the new
    /// desired fields under CAS, the work item.
    pub async fn change_node_pool(
        &self,
        id: &NodePoolId,
        scale: Option<Scale>,
        delete: bool,
    ) -> NodePool {
        let old = self.store.node_pool_get_any(id).await.expect("read").expect("node pool");
        let changed = node_pool_changed(&old, scale.unwrap_or(old.scale), delete, self.clock.now());
        self.commit(changed, "change node pool").await
    }

    /// `kubernetesClusters.upgrade`'s (`version`) and `delete`'s (`delete`) writes, and
    /// a high-availability change.
    pub async fn change_cluster(
        &self,
        id: &ClusterId,
        version: Option<&str>,
        high_availability: Option<bool>,
        delete: bool,
    ) -> KubernetesCluster {
        let old = self.store.cluster_get_any(id).await.expect("read").expect("cluster");
        let change =
            ClusterChange { version: version.map(str::to_owned), high_availability, delete };
        self.commit(cluster_changed(&old, change, self.clock.now()), "change cluster").await
    }

    /// A cluster row.
    pub async fn cluster(&self, id: &ClusterId) -> KubernetesCluster {
        self.store.cluster_get_any(id).await.expect("read").expect("cluster")
    }

    /// A node pool row.
    pub async fn node_pool(&self, id: &NodePoolId) -> NodePool {
        self.store.node_pool_get_any(id).await.expect("read").expect("node pool")
    }

    /// The pool's substrate row.
    pub async fn substrate(&self, pool_id: &PoolId) -> Substrate {
        self.store.substrate_get_any(pool_id).await.expect("read").expect("substrate")
    }

    /// One driver round, then one round of the simulated bcd, whose joins are recorded.
    /// When nothing was due, the clock first jumps to the next due item (at most
    /// `max_jump` ahead).
    pub async fn step(&self, max_jump: Duration) -> Vec<ActivationReport> {
        let reports = self.driver.step(max_jump).await.expect("store");
        // One round of the simulated agents per step: each bcd whose pod can start calls
        // once (and again on later steps while its join fails).
        bc_sim::testing::bounded(bc_sim::bcd::run_once(self.sim.state())).await;
        self.record_joins().await;
        reports
    }

    /// Steps (see [`Self::step`]) until `done` holds, at most `max_steps` times; whether
    /// it held.
    pub async fn run_until(
        &self,
        max_steps: usize,
        mut done: impl AsyncFnMut(&Self) -> bool,
    ) -> bool {
        for _ in 0..max_steps {
            if done(self).await {
                return true;
            }
            self.step(STEADY_RESYNC).await;
        }
        done(self).await
    }

    /// Steps until the pool's substrate is in `state`, at most `max_steps` times.
    pub async fn until_substrate(
        &self,
        pool: &PoolId,
        state: ResourceState,
        max_steps: usize,
    ) -> Substrate {
        let reached = self
            .run_until(max_steps, async |env: &Self| env.substrate(pool).await.state == state)
            .await;
        let s = self.substrate(pool).await;
        assert!(reached, "substrate of {pool} not {state} after {max_steps} steps: {s:?}");
        s
    }

    /// The stand-in for `agents.join`: records (`PutNode`) every join the simulated bcd
    /// made with a live join token whose node the cluster lists with the pool label —
    /// what the API's method does — and returns how many it recorded.
    pub async fn record_joins(&self) -> usize {
        let calls = self.join.calls();
        // Only joins the stand-in answered with success (the simulated bcd says so).
        let joined: BTreeSet<String> = self
            .sim
            .state()
            .bcd
            .join_outcomes()
            .into_iter()
            .filter(|(_, o)| o.joined)
            .map(|((_, node), _)| node)
            .collect();
        let mut recorded = 0;
        // What the clusters list, read once when a join first needs it (not per join:
        // that was every cluster's Nodes per join, minutes at 1,000 clusters).
        let mut listed: Option<BTreeSet<(String, String)>> = None;
        for c in calls {
            let token = c["joinToken"].as_str().unwrap_or_default();
            let node = c["nodeName"].as_str().unwrap_or_default().to_owned();
            if !joined.contains(&node) {
                continue;
            }
            let Some(t) =
                self.store.join_token_find(&sha256_hex(token.as_bytes())).await.expect("read")
            else {
                continue;
            };
            if self.store.node_find_by_name(&t.pool_id, &node).await.expect("read").is_some() {
                continue;
            }
            let listed = listed.get_or_insert_with(|| self.listed_nodes());
            if !listed.contains(&(node.clone(), t.pool_id.as_str().to_owned())) {
                continue;
            }
            let now = self.clock.now();
            let n = Node {
                node_id: NodeId::generate(
                    u64::try_from(now.unix_ms()).unwrap_or(0),
                    self.entropy.u128(),
                ),
                pool_id: t.pool_id.clone(),
                node_name: node,
                provider_node_id: c["providerNodeId"].as_str().map(str::to_owned),
                bcd_version: c["bcdVersion"].as_str().unwrap_or_default().to_owned(),
                credential_hash: sha256_hex(&self.entropy.bytes32()),
                joined_at: now,
                last_heartbeat_at: None,
            };
            self.store.commit(UnitOfWork::new().write(Write::PutNode(n))).await.expect("join");
            recorded += 1;
        }
        recorded
    }

    /// Every Node the simulated clusters list with a pool's label: (Node name, pool id).
    fn listed_nodes(&self) -> BTreeSet<(String, String)> {
        let now = self.clock.now();
        let state = self.sim.state();
        // The clusters' objects before the model: the model's lock is never held while
        // waiting for theirs.
        let clusters = state.kube.cluster_ids();
        let mut model = state.model();
        let mut listed = BTreeSet::new();
        for c in clusters {
            for n in model.cluster_nodes(&c, now).unwrap_or_default() {
                if let Some(pool) = n.labels.get(LABEL_SUBSTRATE_POOL) {
                    listed.insert((n.name, pool.clone()));
                }
            }
        }
        listed
    }

    /// The provider requests made so far on `method template` (see `bc_sim::model::routes`).
    pub fn count(&self, method: &str, template: &str) -> u64 {
        self.cloud.count(method, template)
    }

    /// A new adapter of the test account's provider (its own budget and caches; on GKE
    /// a new key of the same project), for what a test reads from the provider; its
    /// calls are counted like the reconcilers'.
    pub fn provider(&self) -> Arc<dyn ProviderImpl> {
        match self.on {
            OnProvider::DigitalOcean => self.cloud.provider(TEST_TOKEN),
            OnProvider::Gke => self.cloud.gke_provider(&self.cloud.gke_key()),
        }
    }

    /// The simulator's id of provider cluster `pid` (its Kubernetes API's key): GKE shows
    /// the simulator's id without its dashes.
    pub fn kube_id(&self, pid: &str) -> String {
        let ids = self.sim.state().kube.cluster_ids();
        ids.into_iter()
            .find(|id| id == pid || id.replace('-', "") == pid)
            .unwrap_or_else(|| pid.to_owned())
    }

    /// The provider calls of kind `call` the reconcilers made so far (not the test's own
    /// reads through [`Env::provider`]).
    pub fn made(&self, call: ProviderCall) -> u64 {
        self.calls_made.of(call)
    }

    /// The provider requests made so far for `call` (on every route it may take).
    pub fn calls(&self, call: Call) -> u64 {
        let model = self.sim.state().model();
        self.on.routes(call).iter().map(|k| model.request_count(k)).sum()
    }

    /// The next `n` requests for `call` fail with a server error (500).
    pub fn fail(&self, call: Call, n: usize) {
        let mut model = self.sim.state().model();
        for key in self.on.routes(call) {
            match self.on {
                OnProvider::DigitalOcean => {
                    model.inject_failures(&key, n, bc_sim::model::Fault::ServerError)
                }
                OnProvider::Gke => {
                    model.gke_inject(&key, n, bc_sim::model::gke::GkeFault::ServerError)
                }
            }
        }
    }

    /// The next `n` requests for `call` are throttled (429).
    pub fn throttle(&self, call: Call, n: usize) {
        let mut model = self.sim.state().model();
        for key in self.on.routes(call) {
            match self.on {
                OnProvider::DigitalOcean => model.inject_failures(
                    &key,
                    n,
                    bc_sim::model::Fault::TooManyRequests { retry_after: 3 },
                ),
                OnProvider::Gke => {
                    model.gke_inject(&key, n, bc_sim::model::gke::GkeFault::RateLimited)
                }
            }
        }
    }

    /// The answers of the next `n` successful requests for `call` are lost (the change
    /// is made; the caller times out, after [`REQUEST_TIMEOUT`] of real time).
    pub fn lose(&self, call: Call, n: usize) {
        let mut model = self.sim.state().model();
        for key in self.on.routes(call) {
            model.lose_answers(&key, n);
        }
    }

    /// A create-mode substrate policy in the provider's region at `version`.
    pub fn create_policy(&self, version: &str, flavors: Vec<Flavor>) -> PoolPolicy {
        let mut p = create_policy(&self.account.provider_account_id, version, flavors);
        if let Some(s) = &mut p.substrate
            && let ClusterPolicy::Create(c) = &mut s.cluster
        {
            c.region = self.on.region().into();
        }
        p
    }
}

/// A create-mode substrate policy in `nyc1` at `version`, with `flavors`.
pub fn create_policy(
    account: &ProviderAccountId,
    version: &str,
    flavors: Vec<Flavor>,
) -> PoolPolicy {
    PoolPolicy {
        substrate: Some(SubstratePolicy {
            kind: SubstrateKind::Kubernetes,
            account: account.to_string(),
            cluster: ClusterPolicy::Create(CreateClusterPolicy {
                region: "nyc1".into(),
                version: version.into(),
                high_availability: false,
                name: None,
            }),
        }),
        flavors,
        upgrades: UpgradePolicy::Drain,
    }
}

/// `p` with its create-mode cluster asking for `version`.
pub fn with_version(p: &PoolPolicy, version: &str) -> PoolPolicy {
    let mut p = p.clone();
    if let Some(s) = &mut p.substrate
        && let ClusterPolicy::Create(c) = &mut s.cluster
    {
        c.version = version.into();
    }
    p
}

/// An adopt-mode substrate policy of provider cluster `provider_cluster_id`.
pub fn adopt_policy(
    account: &ProviderAccountId,
    provider_cluster_id: &str,
    flavors: Vec<Flavor>,
) -> PoolPolicy {
    PoolPolicy {
        substrate: Some(SubstratePolicy {
            kind: SubstrateKind::Kubernetes,
            account: account.to_string(),
            cluster: ClusterPolicy::Adopt(AdoptClusterPolicy {
                provider_cluster_id: provider_cluster_id.into(),
            }),
        }),
        flavors,
        upgrades: UpgradePolicy::Drain,
    }
}

/// One scenario, run on each provider: for every `async fn name(on: OnProvider)` named,
/// a module `name` with the tests `on_do` and `on_gke`, each running the one body on its
/// provider. A scenario that cannot apply to a provider is written as a plain test
/// instead, with a comment saying why.
#[macro_export]
macro_rules! on_each_provider {
    ($($name:ident),* $(,)?) => { $(
        mod $name {
            #[tokio::test]
            async fn on_do() {
                super::$name($crate::testing::OnProvider::DigitalOcean).await
            }
            #[tokio::test]
            async fn on_gke() {
                super::$name($crate::testing::OnProvider::Gke).await
            }
        }
    )* };
}

#[cfg(test)]
mod tests {
    use super::*;
    use bc_domain::ports::LedgerRepo;

    /// Two instances — the environment's and one a benchmark or test makes for a runtime
    /// beside it — give different ids in the same millisecond (they gave the same
    /// sequence: 265 of a 10,000-object converge's activations failed on an event id
    /// that "already exists").
    #[test]
    fn two_seq_entropies_never_make_the_same_id_in_one_millisecond() {
        let (a, b) = (SeqEntropy::default(), SeqEntropy::default());
        let ms = 1_780_000_000_000;
        let ids = |e: &SeqEntropy| -> Vec<bc_domain::id::EventId> {
            (0..1_000).map(|_| bc_domain::Id::generate(ms, e.u128())).collect()
        };
        let from_a: BTreeSet<_> = ids(&a).into_iter().collect();
        let shared = ids(&b).into_iter().filter(|id| from_a.contains(id)).count();
        assert_eq!(from_a.len(), 1_000);
        assert_eq!(shared, 0, "ids made by both instances");
    }

    /// The harness's pools are the API's: the default quotas it is set with (as the API
    /// is with `--default-pool-quota`) and a started substrate's event, from the one
    /// recipe; `lb_pool` is the same recipe with its `loadBalancers` limit.
    #[tokio::test]
    async fn harness_pools_get_the_apis_default_quotas_and_events() {
        let mut env = Env::start().await;
        env.default_pool_quotas = BTreeMap::from([(QuotaResource::LoadBalancers, 3)]);
        let cpu = flavor("cpu", env.on.node_size(), 1);
        let pool = env.create_pool("web", env.create_policy("latest", vec![cpu])).await;
        let quota = env.store.quota_get(&pool.pool_id, QuotaResource::LoadBalancers).await;
        assert_eq!(quota.expect("read").map(|q| (q.limit, q.used)), Some((3, 0)));
        let subject = bc_domain::model::subjects::pool(&pool.pool_id);
        let events = env.store.event_list(&env.tenant, Some(&subject), 0, 10).await.expect("read");
        let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["kubernetes.substrate.pending"]);

        let lbs = env.lb_pool("lbs", 2).await;
        let quota = env.store.quota_get(&lbs.pool_id, QuotaResource::LoadBalancers).await;
        assert_eq!(quota.expect("read").map(|q| (q.limit, q.used)), Some((2, 0)));
        let lb = env.create_load_balancer(&lbs, "front", bc_store::testing::lb_spec()).await;
        let quota = env.store.quota_get(&lbs.pool_id, QuotaResource::LoadBalancers).await;
        assert_eq!(quota.expect("read").map(|q| q.used), Some(1), "booked with {lb:?}");
    }
}
