//! The Google Kubernetes Engine adapter of the provider ports: one [`Gke`] per account
//! (standard and autopilot clusters, node pools, over GKE's v1 REST API with access
//! tokens minted from the account's service-account key) and the [`GkeRegistry`] that
//! hands every caller of an account the same instance.
//!
//! Invariant: all requests of one account go through one transport, one token source and
//! one request budget; failures are classified once (`classify::gke`); GKE's per-zone
//! counts, name-only node pools and long-running operations are translated here, so
//! nothing above the port knows it talks to GKE.
//!
//! How counts are placed (SPEC §6): a port count is a pool's total. A node pool added to
//! an existing regional cluster is pinned to one zone of the cluster (`locations`), so
//! its per-zone count is the total; a zonal cluster's pools are in one zone anyway; a
//! regional cluster's first pools (made with it, before its zones are known) spread over
//! GKE's default three zones, and a fixed count that three does not divide is refused.
//! Autoscaled pools use GKE's pool-wide `totalMinNodeCount`/`totalMaxNodeCount`.

mod auth;
mod kubernetes;
mod registry;
mod transport;
mod wire;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bc_domain::ProviderError;
use bc_domain::model::{ClusterMode, ProviderKind};
use bc_domain::ports::{
    Clock, KubernetesProvider, LabelRule, LoadBalancerProvider, LoadBalancerRequest, PoolUpgrades,
    ProviderImpl, ProviderLoadBalancer, ProviderOffer, ProviderResult, ServiceAccount,
};

pub use auth::{AUDIENCE, SCOPES, signing_input};
pub use registry::GkeRegistry;

use crate::digitalocean::{RateLimitConfig, SharedBucket};
use crate::kube::KubeClusterApi;
use transport::Transport;

/// Google's API address.
pub const DEFAULT_API_URL: &str = "https://container.googleapis.com";
/// Google's token endpoint.
pub const DEFAULT_TOKEN_URL: &str = "https://oauth2.googleapis.com/token";

/// What GKE offers: standard and autopilot clusters (autopilot in regions only), node
/// pools on standard clusters, no load balancers yet; names of at most 40 characters;
/// GCP label rules; the control plane and each node pool have their own version, so
/// pools are upgraded one by one after the control plane.
pub fn offer() -> ProviderOffer {
    ProviderOffer {
        provider: ProviderKind::Gke,
        cluster_modes: vec![ClusterMode::Standard, ClusterMode::Autopilot],
        node_pools: true,
        load_balancer_types: Vec::new(),
        name_max: 40,
        label_rule: LabelRule::Gcp,
        autopilot_regions_only: true,
        pool_upgrades: PoolUpgrades::OneByOne,
        count_placement: "GKE counts a node pool's nodes per zone. A zonal cluster's pools are \
            in its one zone; a pool added to a regional cluster is placed in one of the \
            cluster's zones, so its count is its total; a regional cluster's first pools span \
            its zones (GKE's default three), so a fixed count must be a multiple of them, and \
            an autoscaled pool (its bounds set as totals) starts with a multiple of them within \
            its bounds — a count or bounds that cannot be met so are refused",
    }
}

/// How the adapter talks to GKE.
#[derive(Debug, Clone)]
pub struct GkeConfig {
    /// The API's base URL, without `/v1` (`--gke-api-url`).
    pub api_url: String,
    /// The OAuth 2.0 token endpoint (`--gcp-token-url`); the key's `token_uri` is never
    /// used.
    pub token_url: String,
    /// TCP/TLS connect timeout.
    pub connect_timeout: Duration,
    /// Whole-request timeout.
    pub request_timeout: Duration,
    /// The account's local request budget (GKE allows 3000 a minute per project).
    pub rate_limit: RateLimitConfig,
    /// How the adapter reaches a cluster's own API to count its Nodes (GKE reports no
    /// current size of a pool): over the network, or in process in tests.
    pub clusters: KubeClusterApi,
}

impl Default for GkeConfig {
    fn default() -> Self {
        Self {
            api_url: DEFAULT_API_URL.to_owned(),
            token_url: DEFAULT_TOKEN_URL.to_owned(),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(45),
            rate_limit: RateLimitConfig {
                per_minute: 3000,
                per_hour: 180_000,
                max_wait: Duration::from_secs(2),
            },
            clusters: KubeClusterApi::new(),
        }
    }
}

impl GkeConfig {
    /// The defaults, pointed at `api_url` and `token_url`.
    pub fn with_urls(api_url: impl Into<String>, token_url: impl Into<String>) -> Self {
        Self { api_url: api_url.into(), token_url: token_url.into(), ..Self::default() }
    }
}

/// One GKE account: implements [`ProviderImpl`] and [`KubernetesProvider`].
pub struct Gke {
    transport: Transport,
    project: String,
    api_url: String,
    /// Where each cluster id seen is (`id` → location, name): GKE's paths need the name
    /// and location, our records keep GKE's `id`. An id never moves; a cluster made
    /// again under the same name has another id, so a stale entry reads as gone.
    located: Mutex<HashMap<String, (String, String)>>,
    /// The way to each cluster's own API.
    clusters: KubeClusterApi,
}

impl std::fmt::Debug for Gke {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Without the transport: it holds the key and the token.
        f.debug_struct("Gke")
            .field("api_url", &self.api_url)
            .field("project", &self.project)
            .finish()
    }
}

impl Gke {
    /// An adapter for `account`, with its own budget unless `bucket` is shared.
    pub fn new(
        config: &GkeConfig,
        account: &ServiceAccount,
        clock: Arc<dyn Clock>,
        bucket: Option<SharedBucket>,
    ) -> ProviderResult<Self> {
        let client = crate::http::client(config.connect_timeout, config.request_timeout)?;
        Self::with_client(config, account, clock, bucket, client)
    }

    /// [`Self::new`] on `client` (a registry's, shared by its accounts).
    pub(crate) fn with_client(
        config: &GkeConfig,
        account: &ServiceAccount,
        clock: Arc<dyn Clock>,
        bucket: Option<SharedBucket>,
        client: reqwest::Client,
    ) -> ProviderResult<Self> {
        let signer = auth::Signer::new(&account.key)?;
        let tokens = auth::TokenSource::new(signer, config.token_url.clone(), client.clone());
        let transport =
            Transport::new(client, &config.api_url, tokens, &config.rate_limit, bucket, clock);
        Ok(Self {
            transport,
            project: account.project_id.clone(),
            api_url: config.api_url.clone(),
            located: Mutex::new(HashMap::new()),
            clusters: config.clusters.clone(),
        })
    }

    /// The account's request budget (for inspection and for sharing).
    pub fn bucket(&self) -> SharedBucket {
        self.transport.bucket()
    }

    /// The project the account manages.
    pub fn project(&self) -> &str {
        &self.project
    }
}

/// The refusal of every load-balancer call: GKE's load balancers come from Services
/// and Ingresses inside clusters, not from an API of this shape (research/gke.md §9).
fn no_load_balancers() -> ProviderError {
    ProviderError::Refused { message: "gke offers no load balancers".into() }
}

#[async_trait]
impl LoadBalancerProvider for Gke {
    async fn list(&self) -> ProviderResult<Vec<ProviderLoadBalancer>> {
        // None exist through this port.
        Ok(Vec::new())
    }
    async fn get(&self, _id: &str) -> ProviderResult<ProviderLoadBalancer> {
        Err(ProviderError::NotFound)
    }
    async fn create(&self, _req: &LoadBalancerRequest) -> ProviderResult<ProviderLoadBalancer> {
        Err(no_load_balancers())
    }
    async fn update(
        &self,
        _id: &str,
        _req: &LoadBalancerRequest,
    ) -> ProviderResult<ProviderLoadBalancer> {
        Err(no_load_balancers())
    }
    async fn delete(&self, _id: &str) -> ProviderResult<()> {
        Err(ProviderError::NotFound)
    }
}

#[async_trait]
impl ProviderImpl for Gke {
    fn offer(&self) -> ProviderOffer {
        offer()
    }

    async fn check_credentials(&self) -> ProviderResult<()> {
        // Minting a token checks the key; listing the project's clusters checks that
        // the account may read them (SPEC §5) — without counting their Nodes.
        self.list_wire().await.map(|_| ())
    }

    fn kubernetes(&self) -> &dyn KubernetesProvider {
        self
    }

    fn load_balancers(&self) -> &dyn LoadBalancerProvider {
        self
    }
}
