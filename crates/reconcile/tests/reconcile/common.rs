//! The harness of the load balancer and runtime tests: `bc_reconcile::testing::Env`
//! (the real store — SQLite in memory, or any store of `bc_store::testing` — the
//! simulator behind the production adapters on a stepped clock, one tenant and a
//! provider account whose sealed token opens to the simulator's account) plus a pool with a load balancer
//! quota, the load balancer writes the API makes (contracts.md: desired state + work
//! item in one unit of work, due now), and production's budgeted observer.
//!
//! Invariant: everything is built the way production builds it — credentials sealed
//! with the real `SecretBox` and opened by the registry, providers budgeted through the
//! store — so what a test sees is what a deployment does, minus the waiting.

#![allow(dead_code)]

use std::ops::Deref;
use std::sync::Arc;

use bc_domain::model::{
    BillingInterval, Event, LoadBalancer, LoadBalancerSpec, Pool, QuotaResource,
};
use bc_domain::ports::{
    Clock, LedgerRepo, LoadBalancerRepo, PageRequest, PoolRepo, ProviderRegistry,
};
use bc_domain::rules::budget::BudgetConfig;
use bc_domain::{LoadBalancerId, ResourceState, Timestamp};
use bc_reconcile::testing::Stepper;
use bc_reconcile::{
    Budget, Deps, LoadBalancers, Reconciler, Runtime, RuntimeConfig, SharedObserver, StoreBudget,
};
use bc_sim::SimConfig;
use bc_sim::model::routes;
use bc_sim::testing::TEST_TOKEN;
use bc_store::SqlStore;
use bc_store::testing as fx;

/// The quota the harness gives its pool.
pub const QUOTA: u32 = 1_000;

/// The shared environment plus a pool for load balancers.
pub struct Env {
    /// Store, simulator, clock, tenant, account (`bc_reconcile::testing::Env`).
    pub kube: bc_reconcile::testing::Env,
    /// A pool with [`QUOTA`] load balancers.
    pub pool: Pool,
}

impl Deref for Env {
    type Target = bc_reconcile::testing::Env;
    fn deref(&self) -> &Self::Target {
        &self.kube
    }
}

impl Env {
    /// On SQLite in memory, with the simulator's defaults.
    pub async fn start() -> Env {
        let store = Arc::new(SqlStore::connect("sqlite::memory:").await.expect("store"));
        Env::on(store, SimConfig::default()).await
    }

    /// On `store`, with a simulator of `config`.
    pub async fn on(store: Arc<SqlStore>, config: SimConfig) -> Env {
        let kube = bc_reconcile::testing::Env::on(store, config).await;
        let pool = kube.lb_pool(&format!("web-{}", fx::uniq()), QUOTA).await;
        Env { kube, pool }
    }

    /// The registry production uses, on the simulator: the DigitalOcean adapter, opening
    /// each account's sealed token (a new registry: a process of its own).
    pub fn registry(&self) -> Arc<dyn ProviderRegistry> {
        self.cloud.providers(self.secret_box.clone())
    }

    /// The store-shared budget with the default limits.
    pub fn budget(&self) -> Arc<dyn Budget> {
        Arc::new(StoreBudget::new(self.store.clone(), BudgetConfig::default()))
    }

    /// The ports of a reconciler process over `registry`, spending `budget`.
    pub fn deps_with(&self, registry: Arc<dyn ProviderRegistry>, budget: Arc<dyn Budget>) -> Deps {
        Deps {
            store: self.store.clone(),
            observer: Arc::new(SharedObserver::new(registry, budget, self.clock.clone())),
            clusters: self.kube.deps.clusters.clone(),
            clock: self.clock.clone(),
            settings: self.kube.deps.settings.clone(),
        }
    }

    /// The ports of a reconciler process as production wires them on the simulator.
    pub fn deps(&self) -> Deps {
        self.deps_with(self.registry(), self.budget())
    }

    /// A runtime of replica `owner` running the load balancer reconciler on `deps`.
    pub fn runtime(&self, owner: &str, deps: Deps) -> Arc<Runtime> {
        self.runtime_of(owner, deps, vec![Arc::new(LoadBalancers::default())])
    }

    /// A runtime of replica `owner` running `reconcilers` on `deps`.
    pub fn runtime_of(
        &self,
        owner: &str,
        deps: Deps,
        reconcilers: Vec<Arc<dyn Reconciler>>,
    ) -> Arc<Runtime> {
        let config = RuntimeConfig { seed: fx::uniq(), ..RuntimeConfig::new(owner) };
        Arc::new(Runtime::new(deps, reconcilers, config).expect("runtime"))
    }

    /// A stepped driver of `runtime` on the harness clock.
    pub fn stepper(&self, runtime: Arc<Runtime>) -> Stepper {
        Stepper::new(runtime, self.clock.clone())
    }

    /// Now.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Moves the clock.
    pub fn advance(&self, secs: i64) {
        self.clock.advance(time::Duration::seconds(secs));
    }

    // ----- the API's writes (contracts.md) ------------------------------------------

    /// `loadBalancers.create`: the row (pending), its quota unit and its work item, in one
    /// unit of work, due now.
    pub async fn create_lb(&self, name: &str) -> LoadBalancer {
        self.create_lb_with(name, fx::lb_spec()).await
    }

    /// `loadBalancers.create` with `spec`.
    pub async fn create_lb_with(&self, name: &str, spec: LoadBalancerSpec) -> LoadBalancer {
        self.kube.create_load_balancer(&self.pool, name, spec).await
    }

    /// `loadBalancers.update`: a new spec under generation CAS, and the work item.
    pub async fn update_lb(&self, id: &LoadBalancerId, change: impl FnOnce(&mut LoadBalancerSpec)) {
        self.kube.update_load_balancer(id, change).await;
    }

    /// `loadBalancers.delete`: `delete_requested` under generation CAS, and the work item.
    pub async fn delete_lb(&self, id: &LoadBalancerId) {
        self.kube.delete_load_balancer(id).await;
    }

    // ----- what happened ---------------------------------------------------------------

    /// The row as stored.
    pub async fn lb(&self, id: &LoadBalancerId) -> LoadBalancer {
        self.store.load_balancer_get_any(id).await.expect("read").expect("row exists")
    }

    /// The rows' states.
    pub async fn states(&self, ids: &[LoadBalancerId]) -> Vec<ResourceState> {
        let mut out = Vec::new();
        for id in ids {
            out.push(self.lb(id).await.status.state);
        }
        out
    }

    /// The provider's load balancers of the account (read from the model: no request
    /// is counted).
    pub fn provider_lbs(&self) -> Vec<bc_sim::model::LoadBalancer> {
        let now = self.now();
        self.sim.state().model().list_load_balancers(TEST_TOKEN, now).expect("account")
    }

    /// Requests the simulator received on `method template`.
    pub fn calls(&self, method: &str, template: &str) -> u64 {
        self.sim.state().model().request_count(&routes::key(method, template))
    }

    /// Every request the simulator received.
    pub fn total_calls(&self) -> u64 {
        self.sim.state().model().total_requests()
    }

    /// Load balancer creates the simulator received.
    pub fn creates(&self) -> u64 {
        self.calls("POST", routes::LOAD_BALANCERS)
    }

    /// Every outbox event.
    pub async fn events(&self) -> Vec<Event> {
        self.store.event_list_all(0, 100_000).await.expect("events")
    }

    /// The event types of one load balancer's subject, in order.
    pub async fn event_types(&self, id: &LoadBalancerId) -> Vec<String> {
        let subject = bc_domain::model::subjects::load_balancer(id);
        self.events().await.into_iter().filter(|e| e.subject == subject).map(|e| e.kind).collect()
    }

    /// Every billing interval of the tenant.
    pub async fn billing(&self) -> Vec<BillingInterval> {
        let (from, to) = (Timestamp::EPOCH, self.now() + time::Duration::days(365 * 100));
        let mut out = Vec::new();
        let mut page = PageRequest::first(500);
        loop {
            let p = self
                .store
                .billing_list(&self.tenant, from, to, None, &page)
                .await
                .expect("billing");
            out.extend(p.items);
            match p.next {
                Some(next) => page = PageRequest { after: Some(next), limit: 500 },
                None => return out,
            }
        }
    }

    /// The pool's booked load balancer units.
    pub async fn quota_used(&self) -> u32 {
        let q = self.store.quota_get(&self.pool.pool_id, QuotaResource::LoadBalancers).await;
        q.expect("quota").expect("quota row").used
    }
}
