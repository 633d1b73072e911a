//! Wiring: the real adapters on a store, the API router, the reconciler runtime, the
//! event relay, the HTTP server, and shutdown on a signal.
//!
//! Invariants: every long-running part runs under one cancellation token and stops
//! through it (the HTTP server finishes in-flight requests, the runtime lets in-flight
//! activations finish and releases their leases); binding a taken address is an error
//! naming the address. Adapting to a new reconciler builder means changing
//! [`runtime`] alone.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use bc_api::{Api, Ports, Settings};
use bc_domain::model::ProviderKind;
use bc_domain::ports::{
    Clock, ClusterApi, EventPublisher, ProviderRegistry, SystemClock, WorkKind,
};
use bc_domain::rules::budget::BudgetConfig;
use bc_providers::digitalocean::{DigitalOceanConfig, DigitalOceanRegistry};
use bc_providers::gke::{GkeConfig, GkeRegistry};
use bc_providers::kube::KubeClusterApi;
use bc_providers::registry::Providers;
use bc_reconcile::provider_resources::plan::Timing;
use bc_reconcile::shared::OsEntropy;
use bc_reconcile::{
    BroadcastPublisher, Budget, BudgetedProvider, Deps, Relay, RelayConfig, Runtime, RuntimeConfig,
    SharedObserver, StoreBudget,
};
use bc_store::{AeadSecretBox, SqlStore};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::ProviderUrls;
use crate::conn::{self, ConnectionLimits, LimitedListener};

/// The adapters a process works on.
#[derive(Clone)]
pub struct Adapters {
    /// The store.
    pub store: Arc<SqlStore>,
    /// The clock.
    pub clock: Arc<dyn Clock>,
    /// Encryption of provider credentials.
    pub secrets: Arc<AeadSecretBox>,
    /// Provider accounts (each provider at its configured URLs).
    pub providers: Arc<dyn ProviderRegistry>,
    /// Clusters' Kubernetes APIs.
    pub clusters: Arc<dyn ClusterApi>,
    /// The DigitalOcean adapter's whole-request timeout: the longest a call of it may be
    /// in flight, which the load balancer reconciler's guard of its creates waits out.
    pub digitalocean_timeout: Duration,
}

impl Adapters {
    /// The real adapters: each provider at its URL in `urls`, `kube` for clusters, the
    /// wall clock, credentials sealed with `secret_key` (base64 of 32 bytes).
    pub fn real(
        store: Arc<SqlStore>,
        secret_key: &str,
        urls: &ProviderUrls,
    ) -> anyhow::Result<Self> {
        Self::real_with_clock(store, secret_key, urls, Arc::new(SystemClock))
    }

    /// [`Adapters::real`] on another clock (the tests' stepped clock, shared with the
    /// simulator).
    pub fn real_with_clock(
        store: Arc<SqlStore>,
        secret_key: &str,
        urls: &ProviderUrls,
        clock: Arc<dyn Clock>,
    ) -> anyhow::Result<Self> {
        bc_providers::install_crypto_provider();
        // The key's own error names what is wrong with it, never the key.
        let secrets = Arc::new(
            AeadSecretBox::from_base64_key(secret_key.trim())
                .map_err(|e| anyhow::anyhow!("--secret-key: {e}"))?,
        );
        let digitalocean = DigitalOceanRegistry::with_config(
            DigitalOceanConfig {
                request_timeout: urls.digitalocean_timeout,
                ..DigitalOceanConfig::with_base_url(urls.digitalocean.trim_end_matches('/'))
            },
            secrets.clone(),
            clock.clone(),
        );
        let gke = GkeRegistry::new(
            GkeConfig::with_urls(urls.gke.trim_end_matches('/'), urls.gcp_token.clone()),
            secrets.clone(),
            clock.clone(),
        );
        let providers = Arc::new(
            Providers::new()
                .with(ProviderKind::Digitalocean, Arc::new(digitalocean))
                .with(ProviderKind::Gke, Arc::new(gke)),
        );
        Ok(Self {
            store,
            clock,
            secrets,
            providers,
            clusters: Arc::new(KubeClusterApi::new()),
            digitalocean_timeout: urls.digitalocean_timeout,
        })
    }

    /// The API's ports: its provider calls spend from each account's budget of
    /// `budget`, kept in the store and shared with the reconcilers.
    pub fn ports(&self, budget: BudgetConfig) -> Ports {
        let store: Arc<dyn bc_domain::ports::Store> = self.store.clone();
        Ports {
            store: self.store.clone(),
            clock: self.clock.clone(),
            providers: Arc::new(BudgetedRegistry {
                inner: self.providers.clone(),
                budget: Arc::new(StoreBudget::new(store, budget)),
                clock: self.clock.clone(),
            }),
            clusters: self.clusters.clone(),
            secrets: self.secrets.clone(),
        }
    }
}

/// A registry whose providers spend every call from their account's budget — the one
/// the reconcilers spend from, so the API's own calls (a node pool's name checked at the
/// provider, a join's cluster credentials) count against the provider's limit too.
struct BudgetedRegistry {
    inner: Arc<dyn ProviderRegistry>,
    budget: Arc<dyn Budget>,
    clock: Arc<dyn Clock>,
}

#[async_trait::async_trait]
impl ProviderRegistry for BudgetedRegistry {
    async fn provider_for(
        &self,
        account: &bc_domain::model::ProviderAccount,
    ) -> bc_domain::ports::ProviderResult<Arc<dyn bc_domain::ports::ProviderImpl>> {
        let inner = self.inner.provider_for(account).await?;
        Ok(Arc::new(BudgetedProvider::new(
            inner,
            self.budget.clone(),
            account.provider_account_id.clone(),
            self.clock.clone(),
        )))
    }

    /// Credentials not stored yet belong to no account: nothing to count them on (the
    /// default budget leaves room for these checks).
    async fn provider_for_credentials(
        &self,
        credentials: &bc_domain::ports::AccountCredentials,
    ) -> bc_domain::ports::ProviderResult<Arc<dyn bc_domain::ports::ProviderImpl>> {
        self.inner.provider_for_credentials(credentials).await
    }
}

/// The API router on `adapters`, poking `work` after writes that enqueue work, waking
/// event streams on `events` and ending them when `shutdown` is cancelled (pass
/// [`Served::cancel`], so a client holding a stream open never keeps the server running).
pub fn api_router(
    adapters: &Adapters,
    settings: Settings,
    work: Arc<Notify>,
    events: Arc<Notify>,
    shutdown: CancellationToken,
) -> axum::Router {
    api_router_authorized(adapters, settings, None, BudgetConfig::default(), work, events, shutdown)
}

/// [`api_router`] deciding with `authorizer` (Cedar with the operator's `--policy-file`)
/// when given, its provider calls spending from each account's `budget` (the
/// reconcilers', `--budget-per-minute` and `--budget-per-hour`).
pub fn api_router_authorized(
    adapters: &Adapters,
    settings: Settings,
    authorizer: Option<Arc<dyn bc_domain::ports::Authorizer>>,
    budget: BudgetConfig,
    work: Arc<Notify>,
    events: Arc<Notify>,
    shutdown: CancellationToken,
) -> axum::Router {
    let mut api = Api::new(adapters.ports(budget)).settings(settings);
    if let Some(a) = authorizer {
        api = api.authorizer(a);
    }
    api.work_notify(work).events_notify(events).shutdown(shutdown).router()
}

/// What the reconcilers of one replica run.
#[derive(Debug, Clone)]
pub struct ReconcileOptions {
    /// This replica's id (lease owner): unique per replica.
    pub replica: String,
    /// The kinds to run (empty: all).
    pub kinds: Vec<WorkKind>,
    /// Activations per kind at once (`None`: the runtime's default).
    pub concurrency: Option<usize>,
    /// The URL bcd calls, written into each join Secret.
    pub public_url: String,
    /// The bcd image of the DaemonSet.
    pub bcd_image: String,
    /// Load balancer polling (`None`: DigitalOcean-scale defaults).
    pub load_balancer_timing: Option<Timing>,
    /// How often each kind polls for work written by other processes.
    pub poll: Option<Duration>,
    /// The longest a converging object, or one in `error`, waits before it is looked at
    /// again (`None`: the reconcilers' own waits, made for a real provider's minutes).
    pub wait_max: Option<Duration>,
    /// Each provider account's call budget, shared by every replica through the store.
    pub budget: BudgetConfig,
}

impl ReconcileOptions {
    /// Every kind, default concurrency and budget, replica `replica`.
    pub fn new(
        replica: impl Into<String>,
        public_url: impl Into<String>,
        bcd_image: impl Into<String>,
    ) -> Self {
        Self {
            replica: replica.into(),
            kinds: Vec::new(),
            concurrency: None,
            public_url: public_url.into(),
            bcd_image: bcd_image.into(),
            load_balancer_timing: None,
            poll: None,
            wait_max: None,
            budget: BudgetConfig::default(),
        }
    }
}

/// A replica id: the host name and a random suffix.
pub fn replica_id(prefix: &str) -> String {
    let host =
        std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| "local".into());
    format!("{prefix}-{host}-{:08x}", rand::random::<u32>())
}

/// The reconciler runtime of one replica: the four kinds (or `options.kinds`) on the
/// shared observer with the store-kept provider budget of `options.budget`, woken by
/// `work`.
pub fn runtime(
    adapters: &Adapters,
    options: &ReconcileOptions,
    work: Arc<Notify>,
) -> anyhow::Result<Arc<Runtime>> {
    let store: Arc<dyn bc_domain::ports::Store> = adapters.store.clone();
    let budget = Arc::new(StoreBudget::new(store.clone(), options.budget));
    let observer =
        Arc::new(SharedObserver::new(adapters.providers.clone(), budget, adapters.clock.clone()));
    let deps = Deps {
        store,
        observer,
        clusters: adapters.clusters.clone(),
        clock: adapters.clock.clone(),
        settings: bc_reconcile::Settings {
            public_url: options.public_url.clone(),
            bcd_image: options.bcd_image.clone(),
        },
    };
    let mut timing = options.load_balancer_timing.clone().unwrap_or_default();
    // A create may land as long as the adapter may keep its request in flight: the one
    // timeout both go by.
    timing.call_timeout = adapters.digitalocean_timeout;
    let chosen = bc_reconcile::reconcilers(&options.kinds, Arc::new(OsEntropy), &timing);
    let mut config = RuntimeConfig::new(options.replica.clone());
    if let Some(c) = options.concurrency {
        config.concurrency = c.max(1);
    }
    if let Some(p) = options.poll {
        config.poll = p;
    }
    if let Some(m) = options.wait_max {
        config.schedule.wait_max = m;
    }
    let rt = Runtime::new(deps, chosen, config).context("building the reconciler runtime")?;
    Ok(Arc::new(rt.with_work_notify(work)))
}

/// The outbox relay: to the in-process event streams (`events` poked per batch) and,
/// with `nats_url`, to NATS JetStream.
pub async fn relay(
    adapters: &Adapters,
    replica: &str,
    events: Option<Arc<Notify>>,
    nats_url: Option<&str>,
) -> anyhow::Result<Option<Relay>> {
    let mut publishers: Vec<(String, Arc<dyn EventPublisher>)> = Vec::new();
    if let Some(notify) = events {
        publishers.push(("local".into(), Arc::new(BroadcastPublisher::new(1024, notify))));
    }
    if let Some(url) = nats_url {
        let config = bc_nats::NatsConfig::new(url);
        let nats = bc_nats::JetStreamPublisher::connect(&config)
            .await
            .map_err(|e| anyhow::anyhow!("--nats-url {}: {e}", crate::config::redact_url(url)))?;
        publishers.push(("nats".into(), Arc::new(nats)));
    }
    if publishers.is_empty() {
        return Ok(None);
    }
    Ok(Some(Relay::new(
        adapters.store.clone(),
        adapters.clock.clone(),
        RelayConfig::new(replica.to_owned()),
        publishers,
    )))
}

/// Binds `addr`; a taken or forbidden address is an error naming it.
pub async fn bind(addr: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::AddrInUse => anyhow::anyhow!(
            "cannot listen on {addr}: the address is already in use (another bc-api dev? pick another with --listen 127.0.0.1:PORT)"
        ),
        _ => anyhow::anyhow!("cannot listen on {addr}: {e}"),
    })
}

/// Everything a process runs in the background, stopped together.
pub struct Served {
    /// Cancels every part.
    pub cancel: CancellationToken,
    tasks: JoinSet<()>,
}

impl Default for Served {
    fn default() -> Self {
        Self { cancel: CancellationToken::new(), tasks: JoinSet::new() }
    }
}

impl Served {
    /// Serves `router` on `listener` until cancelled; in-flight requests finish. Slow
    /// and idle clients are cut off ([`ConnectionLimits::default`], SPEC §13).
    pub fn http(&mut self, listener: tokio::net::TcpListener, router: axum::Router) {
        self.http_limited(listener, router, ConnectionLimits::default());
    }

    /// [`Served::http`] with connections held to `limits`.
    pub fn http_limited(
        &mut self,
        listener: tokio::net::TcpListener,
        router: axum::Router,
        limits: ConnectionLimits,
    ) {
        let cancel = self.cancel.clone();
        self.tasks.spawn(async move {
            let shutdown = async move { cancel.cancelled().await };
            let listener = LimitedListener::new(listener, limits);
            // Each request is in flight on its connection (no deadline) until its response
            // ends; the peer's address rides along: agents.join is limited per address.
            let app = router
                .layer(axum::middleware::from_fn(conn::track))
                .into_make_service_with_connect_info::<conn::Peer>();
            if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(shutdown).await {
                tracing::error!(error = %e, "the HTTP server stopped");
            }
        });
    }

    /// Runs the reconcilers until cancelled (leases released on the way out).
    pub fn reconcilers(&mut self, runtime: Arc<Runtime>) {
        let cancel = self.cancel.clone();
        self.tasks.spawn(async move { runtime.run(cancel).await });
    }

    /// Runs the relay until cancelled.
    pub fn relay(&mut self, relay: Relay, wake: Option<Arc<Notify>>) {
        let cancel = self.cancel.clone();
        self.tasks.spawn(async move { relay.run(cancel, wake).await });
    }

    /// Runs the purge of expired `requestId` records until cancelled.
    pub fn idempotency_purge(&mut self, adapters: &Adapters, replica: &str) {
        let (store, clock) = (adapters.store.clone(), adapters.clock.clone());
        let (cancel, owner) = (self.cancel.clone(), replica.to_owned());
        self.tasks.spawn(async move {
            bc_reconcile::relay::run_idempotency_purge(
                store,
                clock,
                owner,
                Duration::from_secs(3600),
                cancel,
            )
            .await
        });
    }

    /// Runs any other task until cancelled (it must watch `self.cancel`).
    pub fn spawn(&mut self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        self.tasks.spawn(task);
    }

    /// Stops everything and waits for it.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        while self.tasks.join_next().await.is_some() {}
    }

    /// Waits for SIGINT/SIGTERM (or for every part to stop), then stops everything.
    pub async fn until_signal(self) {
        shutdown_signal().await;
        tracing::info!("shutting down: finishing in-flight requests and activations");
        self.shutdown().await;
    }
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { () = ctrl_c => {}, () = term => {} }
}
