//! bc-sim: one simulated cloud — a DigitalOcean API, a Kubernetes API per simulated
//! cluster, and nodes running a simulated bcd — over one model, answered over HTTP:
//! `do_api` under `/v2` on loopback, and each cluster's `kube` API over TLS at the root
//! of its own address, with the simulator's CA in its kubeconfig, as DOKS serves it (or,
//! for tests at scale, in process: `testing::Cloud`). There is no other way in: tests,
//! benchmarks and `bc-api dev` reach it through the production adapters of
//! `bc-providers`, so what they run is the production wire.
//!
//! Races are reproduced with `interleave` (another actor's action at a chosen moment of
//! a request); a cloud is kept across restarts with `persist`; the shared test fixtures
//! are `testing`, behind the `testing` feature.
//!
//! Invariant: there is one model. Every route reads and changes the same [`SimState`];
//! time comes from an injectable clock, so tests step it instead of sleeping.

pub mod agents;
pub mod bcd;
pub mod config;
pub mod do_api;
pub mod gke_api;
pub mod interleave;
pub mod kube;
pub mod model;
pub mod persist;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tls;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bc_domain::ports::Clock;

pub use config::SimConfig;

/// Installs ring as rustls's process-wide crypto provider, once. reqwest is built with
/// `rustls-no-provider` (no aws-lc), and panics at `Client::build` without one; the
/// simulated bcd's client and every test fixture that builds a client call this.
pub fn install_crypto() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // An error means another provider is installed already, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// FNV-1a: a stable hash for derived ids and fingerprints (not for security).
pub(crate) fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// A node as the cluster's Kubernetes API shows it: what `model` hands the `kube` face
/// and the simulated bcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimNode {
    /// Node name (also the Kubernetes Node name).
    pub name: String,
    /// `spec.providerID`, e.g. `digitalocean://<droplet id>`.
    pub provider_id: String,
    /// Labels: the node pool's labels plus the well-known and DOKS ones
    /// (`kubernetes.io/hostname`, `node.kubernetes.io/instance-type`,
    /// `topology.kubernetes.io/region`, `doks.digitalocean.com/node-pool`, …).
    pub labels: std::collections::BTreeMap<String, String>,
    /// Taints of its node pool.
    pub taints: Vec<bc_domain::policy::Taint>,
    /// Whether the node is running (Ready).
    pub ready: bool,
    /// The droplet size slug (capacity comes from it).
    pub size: String,
    /// The node's private (VPC) address.
    pub internal_ip: String,
    /// The node's public address.
    pub external_ip: String,
    /// When the node was made (its Node object's `creationTimestamp`).
    pub created_at: bc_domain::Timestamp,
    /// The kubelet version (`v1.32.6`).
    pub kubelet_version: String,
}

/// The shared state behind every route.
pub struct SimState {
    /// The cloud model (clusters, node pools, nodes, load balancers, rate limits…).
    pub model: Mutex<model::Model>,
    /// The Kubernetes objects of every simulated cluster.
    pub kube: kube::KubeStore,
    /// What the simulated bcd agents did.
    pub bcd: bcd::Agents,
    /// Each cluster's ServiceAccount token signing key (projected tokens, TokenReview).
    pub tokens: kube::tokens::TokenIssuer,
    /// Actions of other actors, run at chosen moments of request handling.
    pub interleave: interleave::Interleaves,
    /// The clock that drives every transition.
    pub clock: Arc<dyn Clock>,
    /// Knobs.
    pub config: SimConfig,
    /// Where the HTTP faces listen, once started (used to build endpoints/kubeconfigs).
    pub base_url: Mutex<Option<String>>,
    /// The simulator's CA and serving certificate (made on first use, or restored).
    pub tls: Arc<tls::SimTls>,
    /// The per-cluster API listeners started by [`Sim::serve`] and their addresses
    /// (stopped with it).
    listeners: Arc<Mutex<Vec<(tokio::task::AbortHandle, SocketAddr)>>>,
}

impl SimState {
    /// Locks the model (poisoning is ignored: the model stays usable after a test panic).
    pub fn model(&self) -> MutexGuard<'_, model::Model> {
        self.model.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The HTTP base URL (`http://127.0.0.1:PORT`), if the server runs.
    pub fn base_url(&self) -> Option<String> {
        self.base_url.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// A simulated cloud.
#[derive(Clone)]
pub struct Sim {
    state: Arc<SimState>,
}

impl Sim {
    /// A new simulated cloud with its own model.
    pub fn new(config: SimConfig, clock: Arc<dyn Clock>) -> Self {
        Self::with_tls(config, clock, Arc::new(tls::SimTls::default()))
    }

    /// A new simulated cloud serving with `tls` (a restored CA, see [`persist`]).
    fn with_tls(config: SimConfig, clock: Arc<dyn Clock>, tls: Arc<tls::SimTls>) -> Self {
        let mut model = model::Model::new(&config);
        model.tls = tls.clone();
        Self {
            state: Arc::new(SimState {
                model: Mutex::new(model),
                kube: kube::KubeStore::default(),
                bcd: bcd::Agents::default(),
                tokens: kube::tokens::TokenIssuer::default(),
                interleave: interleave::Interleaves::default(),
                clock,
                config,
                base_url: Mutex::new(None),
                tls,
                listeners: Arc::default(),
            }),
        }
    }

    /// The shared state.
    pub fn state(&self) -> &Arc<SimState> {
        &self.state
    }

    /// The GKE API's base URL (`http://127.0.0.1:PORT`: clients append `/v1/…`), once
    /// served.
    pub fn gke_api_url(&self) -> Option<String> {
        self.state.base_url()
    }

    /// The OAuth 2.0 token endpoint's URL (`http://127.0.0.1:PORT/token`), once served.
    pub fn gke_token_url(&self) -> Option<String> {
        self.state.base_url().map(|u| format!("{u}{}", gke_api::routes::TOKEN))
    }

    /// Issues a GKE service-account key of `project` that the token endpoint accepts: the
    /// key file's JSON (research/gke.md §1), its `token_uri` this simulator's token
    /// endpoint (Google's until the simulator is served).
    pub fn gke_key(&self, project: &str) -> String {
        let token_uri =
            self.gke_token_url().unwrap_or_else(|| model::gke::auth::GOOGLE_TOKEN_URL.to_owned());
        let key = self.state.model().gke_issue_key(project);
        serde_json::to_string_pretty(&key.key_file(&token_uri)).unwrap_or_default()
    }

    /// The HTTP router of the DigitalOcean API under `/v2`, GKE's under `/v1` with the
    /// token endpoint at `/token`, and every cluster's Kubernetes API under
    /// `/k8s/{cluster_id}`.
    pub fn router(&self) -> axum::Router {
        axum::Router::new()
            .merge(do_api::router(self.state.clone()))
            .merge(gke_api::router(self.state.clone()))
            .nest("/k8s/{cluster_id}", kube::router(self.state.clone()))
            .route("/k8s/{cluster_id}/", kube::root_route(self.state.clone()))
    }

    /// Serves the DigitalOcean face on `addr` (use `127.0.0.1:0` in tests) over plain
    /// HTTP, and each cluster's Kubernetes API over TLS on a loopback port of its own, in
    /// background tasks; returns the bound address. The tasks stop when the returned
    /// handle is dropped.
    pub async fn serve(&self, addr: SocketAddr) -> std::io::Result<SimServer> {
        self.serve_with(addr, ServeOptions::default()).await
    }

    /// [`Self::serve`] with options (the DigitalOcean face over https too).
    pub async fn serve_with(
        &self,
        addr: SocketAddr,
        options: ServeOptions,
    ) -> std::io::Result<SimServer> {
        install_crypto();
        let listener = std::net::TcpListener::bind(addr)?;
        let local = listener.local_addr()?;
        let scheme = if options.https { "https" } else { "http" };
        let url = format!("{scheme}://{local}");
        *self.state.base_url.lock().unwrap_or_else(|e| e.into_inner()) = Some(url.clone());
        let router = self.router();
        let task = if options.https {
            let tls = self.state.tls.listen(listener)?;
            tokio::spawn(async move {
                let _ = axum::serve(tls, router).await;
            })
        } else {
            listener.set_nonblocking(true)?;
            let listener = tokio::net::TcpListener::from_std(listener)?;
            tokio::spawn(async move {
                let _ = axum::serve(listener, router).await;
            })
        };
        let mut model = self.state.model();
        model.set_base_url(Some(url.clone()));
        if !options.in_process_clusters {
            model.set_endpoint_allocator(Some(self.endpoint_allocator()));
            model.allocate_endpoints();
        }
        drop(model);
        Ok(SimServer { addr: local, url, task, state: self.state.clone() })
    }

    /// Binds a cluster's API: a TLS listener on a free loopback port serving the
    /// cluster's routes at its root.
    fn endpoint_allocator(&self) -> model::EndpointAllocator {
        let weak = Arc::downgrade(&self.state);
        let runtime = tokio::runtime::Handle::current();
        let listeners = self.state.listeners.clone();
        model::EndpointAllocator(Arc::new(move |cluster_id: &str, previous: Option<&str>| {
            let state = weak.upgrade()?;
            // The address it had before a restart (kubeconfigs handed out name it), if
            // it is still free; else any.
            let again = previous
                .and_then(|url| url.strip_prefix("https://"))
                .and_then(|addr| addr.parse::<SocketAddr>().ok())
                .filter(|addr| addr.ip().is_loopback())
                .and_then(|addr| std::net::TcpListener::bind(addr).ok());
            let socket = match again {
                Some(socket) => socket,
                None => std::net::TcpListener::bind(("127.0.0.1", 0)).ok()?,
            };
            let addr = socket.local_addr().ok()?;
            let _in_runtime = runtime.enter();
            let tls = state.tls.listen(socket).ok()?;
            let router = kube::cluster_router(state.clone(), cluster_id);
            let task = runtime.spawn(async move {
                let _ = axum::serve(tls, router).await;
            });
            let mut listeners = listeners.lock().unwrap_or_else(|e| e.into_inner());
            listeners.push((task.abort_handle(), addr));
            Some(format!("https://{addr}"))
        }))
    }
}

/// How [`Sim::serve_with`] serves.
#[derive(Debug, Clone, Copy, Default)]
pub struct ServeOptions {
    /// Serve the DigitalOcean face over https (with the simulator's CA) rather than
    /// plain http.
    pub https: bool,
    /// Start no listener per cluster: kubeconfigs name the address DigitalOcean would
    /// give (`https://<id>.k8s.ondigitalocean.com`), which only a client routed in
    /// process reaches (`testing::Cloud`'s kube adapter). A listener per cluster costs a
    /// port, a file descriptor and a task, which ten thousand clusters run out of.
    pub in_process_clusters: bool,
}

/// A running HTTP server of the simulator; aborts on drop.
pub struct SimServer {
    /// The bound address.
    pub addr: SocketAddr,
    url: String,
    task: tokio::task::JoinHandle<()>,
    state: Arc<SimState>,
}

impl SimServer {
    /// `http://ADDR` (or `https://ADDR` when served over TLS).
    pub fn url(&self) -> String {
        self.url.clone()
    }
}

impl SimServer {
    /// Stops serving and returns once every address it listened on (the DigitalOcean
    /// face's and each cluster API's) can be bound again — so a simulator restored in
    /// the same process gets them back — or after a bound wait.
    pub async fn shutdown(self) {
        let mut addrs = vec![self.addr];
        addrs.extend(self.stop());
        for addr in addrs {
            // Aborted tasks drop their sockets when the runtime next polls them.
            for _ in 0..RELEASE_POLLS {
                if std::net::TcpListener::bind(addr).is_ok() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }

    /// Aborts every task; the cluster listeners' addresses.
    fn stop(&self) -> Vec<SocketAddr> {
        self.task.abort();
        // No new cluster listeners, and the running ones stop with the server.
        self.state.model().set_endpoint_allocator(None);
        let mut listeners = self.state.listeners.lock().unwrap_or_else(|e| e.into_inner());
        listeners
            .drain(..)
            .map(|(l, addr)| {
                l.abort();
                addr
            })
            .collect()
    }
}

/// How many times [`SimServer::shutdown`] checks (every 10 ms) that an address is free.
const RELEASE_POLLS: usize = 200;

impl Drop for SimServer {
    fn drop(&mut self) {
        self.stop();
    }
}
