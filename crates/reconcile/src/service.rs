//! The reconciler service a binary runs: the runtime of the chosen work kinds (all four
//! by default — `kubernetes.substrates`, `kubernetes.clusters`, `kubernetes.nodepools`,
//! `vps.provider-resources`), the outbox relay and the idempotency purge, built from
//! the process's ports by one small builder ([`ReconcilerService::builder`]).
//!
//! Invariant: the builder only wires; every rule lives in the runtime, the reconcilers
//! and the relay. Provider calls go through one [`SharedObserver`] whose budget is
//! shared through the store by default, so several processes built here never spend
//! more of an account's provider rate than one would. `run` returns only after the
//! runtime released (or settled) every lease it held and the relay gave its lease up.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bc_domain::ports::{
    Clock, ClusterApi, EventPublisher, ProviderRegistry, Store, SystemClock, WorkKind,
};
use bc_domain::rules::budget::BudgetConfig;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::budget::{Budget, StoreBudget};
use crate::clusters::ClusterReconciler;
use crate::node_pools::NodePoolReconciler;
use crate::observe::{Observer, SharedObserver};
use crate::provider_resources::LoadBalancers;
use crate::reconciler::{Deps, Reconciler, Settings};
use crate::relay::{BroadcastPublisher, Relay, RelayConfig, run_idempotency_purge};
use crate::runtime::{Runtime, RuntimeConfig, RuntimeError, RuntimeStatus};
use crate::shared::{Entropy, OsEntropy};
use crate::substrates::SubstrateReconciler;

/// How often the idempotency purge runs (on the replica holding its lease).
pub const IDEMPOTENCY_PURGE_EVERY: Duration = Duration::from_secs(600);

/// Events the in-process broadcast keeps for a slow subscriber.
pub const BROADCAST_CAPACITY: usize = 1_024;

/// The reconciler for `kind`, drawing randomness (join tokens, event ids) from `entropy`.
pub fn reconciler_of(kind: WorkKind, entropy: Arc<dyn Entropy>) -> Arc<dyn Reconciler> {
    match kind {
        WorkKind::Substrates => Arc::new(SubstrateReconciler::new(entropy)),
        WorkKind::Clusters => Arc::new(ClusterReconciler::new(entropy)),
        WorkKind::NodePools => Arc::new(NodePoolReconciler::new(entropy)),
        WorkKind::ProviderResources => Arc::new(LoadBalancers::default()),
    }
}

/// Builds a [`ReconcilerService`]. Required: the store, the provider registry, the
/// cluster API and the settings; everything else has a production default.
#[must_use]
pub struct ReconcilerServiceBuilder {
    store: Arc<dyn Store>,
    providers: Arc<dyn ProviderRegistry>,
    clusters: Arc<dyn ClusterApi>,
    settings: Settings,
    clock: Arc<dyn Clock>,
    budget: Option<Arc<dyn Budget>>,
    observer: Option<Arc<dyn Observer>>,
    entropy: Arc<dyn Entropy>,
    only: BTreeSet<WorkKind>,
    config: RuntimeConfig,
    work_notify: Arc<Notify>,
    events_notify: Arc<Notify>,
    relay: bool,
    publishers: Vec<(String, Arc<dyn EventPublisher>)>,
}

impl ReconcilerServiceBuilder {
    /// The clock (default: the system clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The provider-call budget (default: [`StoreBudget`] with DigitalOcean's limits,
    /// shared by every replica on the same store).
    pub fn budget(mut self, budget: Arc<dyn Budget>) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Replaces the observer altogether (default: a [`SharedObserver`] over the
    /// registry, spending the budget). The registry is then unused.
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The randomness of join tokens and event ids (default: the OS's).
    pub fn entropy(mut self, entropy: Arc<dyn Entropy>) -> Self {
        self.entropy = entropy;
        self
    }

    /// Runs only these kinds (default, or when empty: all four). A process running
    /// some kinds leaves the others' work to another process.
    pub fn only(mut self, kinds: impl IntoIterator<Item = WorkKind>) -> Self {
        self.only = kinds.into_iter().collect();
        self
    }

    /// Activations of each kind running at once (default 32).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.config.concurrency = n.max(1);
        self
    }

    /// Activations of `kind` running at once, overriding [`Self::concurrency`].
    pub fn concurrency_of(mut self, kind: WorkKind, n: usize) -> Self {
        self.config.concurrency_by_kind.insert(kind, n.max(1));
        self
    }

    /// This replica's id, its lease owner name: unique per process (default
    /// `replica-<random>`).
    pub fn replica(mut self, id: impl Into<String>) -> Self {
        self.config.owner = id.into();
        self
    }

    /// The "work notify" (contracts.md): the API calls `notify_waiters()` on it after
    /// each commit that enqueued work, and the runtime claims at once.
    pub fn work_notify(mut self, notify: Arc<Notify>) -> Self {
        self.work_notify = notify;
        self
    }

    /// The "events notify": poked after the relay published events in-process (what
    /// wakes the API's SSE streams).
    pub fn events_notify(mut self, notify: Arc<Notify>) -> Self {
        self.events_notify = notify;
        self
    }

    /// Whether this process runs the outbox relay and the idempotency purge (default
    /// true; each runs on one replica at a time, by lease).
    pub fn relay(mut self, on: bool) -> Self {
        self.relay = on;
        self
    }

    /// Another relay target besides the in-process broadcast (e.g. `("nats",
    /// bc_nats::JetStreamPublisher)`); `name` keys its cursor: keep it stable.
    pub fn publisher(
        mut self,
        name: impl Into<String>,
        publisher: Arc<dyn EventPublisher>,
    ) -> Self {
        self.publishers.push((name.into(), publisher));
        self
    }

    /// Every scheduling knob at once (leases, poll, resync, backoff, shutdown grace);
    /// the replica id and concurrency set before are replaced by `config`'s.
    pub fn runtime_config(mut self, config: RuntimeConfig) -> Self {
        self.config = config;
        self
    }

    /// The service.
    pub fn build(self) -> Result<ReconcilerService, RuntimeError> {
        let budget = self.budget.unwrap_or_else(|| {
            Arc::new(StoreBudget::new(self.store.clone(), BudgetConfig::default()))
        });
        let observer = self.observer.unwrap_or_else(|| {
            Arc::new(SharedObserver::new(self.providers.clone(), budget, self.clock.clone()))
        });
        let deps = Deps {
            store: self.store.clone(),
            observer,
            clusters: self.clusters,
            clock: self.clock.clone(),
            settings: self.settings,
        };
        let kinds: Vec<WorkKind> = if self.only.is_empty() {
            WorkKind::ALL.to_vec()
        } else {
            self.only.into_iter().collect()
        };
        let reconcilers = kinds.into_iter().map(|k| reconciler_of(k, self.entropy.clone()));
        let owner = self.config.owner.clone();
        let runtime = Runtime::new(deps, reconcilers.collect(), self.config)?
            .with_work_notify(self.work_notify);
        let broadcast = BroadcastPublisher::new(BROADCAST_CAPACITY, self.events_notify);
        let relay = self.relay.then(|| {
            let mut publishers: Vec<(String, Arc<dyn EventPublisher>)> =
                vec![("in-process".to_owned(), Arc::new(broadcast.clone()))];
            publishers.extend(self.publishers);
            Relay::new(self.store.clone(), self.clock.clone(), RelayConfig::new(&owner), publishers)
        });
        Ok(ReconcilerService {
            runtime: Arc::new(runtime),
            relay,
            broadcast,
            store: self.store,
            clock: self.clock,
        })
    }
}

/// A reconciler process's work: the runtime, and (unless turned off) the relay and
/// the idempotency purge.
pub struct ReconcilerService {
    runtime: Arc<Runtime>,
    relay: Option<Relay>,
    broadcast: BroadcastPublisher,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for ReconcilerService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReconcilerService")
            .field("runtime", &self.runtime)
            .field("relay", &self.relay.is_some())
            .finish()
    }
}

impl ReconcilerService {
    /// A builder over the process's ports and settings.
    pub fn builder(
        store: Arc<dyn Store>,
        providers: Arc<dyn ProviderRegistry>,
        clusters: Arc<dyn ClusterApi>,
        settings: Settings,
    ) -> ReconcilerServiceBuilder {
        let owner = format!("replica-{:016x}", rand::random::<u64>());
        ReconcilerServiceBuilder {
            store,
            providers,
            clusters,
            settings,
            clock: Arc::new(SystemClock),
            budget: None,
            observer: None,
            entropy: Arc::new(OsEntropy),
            only: BTreeSet::new(),
            config: RuntimeConfig { seed: rand::random(), ..RuntimeConfig::new(owner) },
            work_notify: Arc::new(Notify::new()),
            events_notify: Arc::new(Notify::new()),
            relay: true,
            publishers: Vec::new(),
        }
    }

    /// The runtime (its [`Runtime::status`] feeds `/metrics` and logs).
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// What the activations so far came to, per kind.
    pub fn status(&self) -> RuntimeStatus {
        self.runtime.status()
    }

    /// The kinds this process runs.
    pub fn kinds(&self) -> Vec<WorkKind> {
        self.runtime.kinds()
    }

    /// The in-process event broadcast the relay publishes to (subscribe for events
    /// from now on).
    pub fn events(&self) -> &BroadcastPublisher {
        &self.broadcast
    }

    /// Runs until `shutdown` completes, then stops claiming, lets in-flight activations
    /// finish within the runtime's grace, releases the leases of the rest, gives the
    /// relay lease up, and returns.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        let cancel = CancellationToken::new();
        let mut tasks = tokio::task::JoinSet::new();
        tasks.spawn(self.runtime.clone().run(cancel.clone()));
        if let Some(relay) = self.relay {
            // Woken with the claim loops by API writes (which commit their events with
            // their work), else on its poll: a reconciler's events go out within it.
            tasks.spawn(relay.run(cancel.clone(), Some(self.runtime.work_notify())));
            tasks.spawn(run_idempotency_purge(
                self.store.clone(),
                self.clock.clone(),
                self.runtime.config().owner.clone(),
                IDEMPOTENCY_PURGE_EVERY,
                cancel.clone(),
            ));
        }
        shutdown.await;
        cancel.cancel();
        while tasks.join_next().await.is_some() {}
    }
}
