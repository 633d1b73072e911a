//! bc-sim: one simulated cloud — a DigitalOcean API, a Kubernetes API per simulated
//! cluster, and nodes running a simulated bcd — over one model with two faces: HTTP on
//! loopback (`do_api` under `/v2`, `kube` under `/k8s/<cluster id>`) and a direct,
//! in-memory face (`direct`) implementing the bc-domain provider and cluster ports.
//!
//! Races are reproduced with `interleave` (another actor's action at a chosen moment of
//! a request); the shared test fixtures are `testing`, behind the `testing` feature.
//!
//! Invariant: there is one model. Both faces read and change the same [`SimState`], so a
//! test that drives the direct face sees exactly what the HTTP face would serve; time
//! comes from an injectable clock, so tests step it instead of sleeping.

pub mod bcd;
pub mod config;
pub mod direct;
pub mod do_api;
pub mod interleave;
pub mod kube;
pub mod model;
#[cfg(feature = "testing")]
pub mod testing;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

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
    /// Labels: the node pool's labels plus the usual `kubernetes.io/hostname`,
    /// `doks.digitalocean.com/node-pool`, … labels.
    pub labels: std::collections::BTreeMap<String, String>,
    /// Taints of its node pool.
    pub taints: Vec<bc_domain::policy::Taint>,
    /// Whether the node is running (Ready).
    pub ready: bool,
}

/// The shared state behind every face.
pub struct SimState {
    /// The cloud model (clusters, node pools, nodes, load balancers, rate limits…).
    pub model: Mutex<model::Model>,
    /// The Kubernetes objects of every simulated cluster.
    pub kube: kube::KubeStore,
    /// What the simulated bcd agents did.
    pub bcd: bcd::Agents,
    /// Actions of other actors, run at chosen moments of request handling.
    pub interleave: interleave::Interleaves,
    /// The clock that drives every transition.
    pub clock: Arc<dyn Clock>,
    /// Knobs.
    pub config: SimConfig,
    /// Where the HTTP faces listen, once started (used to build endpoints/kubeconfigs).
    pub base_url: Mutex<Option<String>>,
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
        let model = model::Model::new(&config);
        Self {
            state: Arc::new(SimState {
                model: Mutex::new(model),
                kube: kube::KubeStore::default(),
                bcd: bcd::Agents::default(),
                interleave: interleave::Interleaves::default(),
                clock,
                config,
                base_url: Mutex::new(None),
            }),
        }
    }

    /// The shared state.
    pub fn state(&self) -> &Arc<SimState> {
        &self.state
    }

    /// The HTTP router of both faces: DigitalOcean under `/v2`, Kubernetes under
    /// `/k8s/{cluster_id}`.
    pub fn router(&self) -> axum::Router {
        axum::Router::new()
            .merge(do_api::router(self.state.clone()))
            .nest("/k8s/{cluster_id}", kube::router(self.state.clone()))
            .route("/k8s/{cluster_id}/", kube::root_route(self.state.clone()))
    }

    /// Serves both faces on `addr` (use `127.0.0.1:0` in tests) in a background task and
    /// returns the bound address. The task stops when the returned handle is dropped.
    pub async fn serve(&self, addr: SocketAddr) -> std::io::Result<SimServer> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let url = format!("http://{local}");
        *self.state.base_url.lock().unwrap_or_else(|e| e.into_inner()) = Some(url.clone());
        // Cluster endpoints and kubeconfig servers point at this listener.
        self.state.model().set_base_url(Some(url));
        let router = self.router();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(SimServer { addr: local, task })
    }
}

/// A running HTTP server of the simulator; aborts on drop.
pub struct SimServer {
    /// The bound address.
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl SimServer {
    /// `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
