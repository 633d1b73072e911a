//! The DigitalOcean adapter of the provider ports: one [`DigitalOcean`] per account
//! (DOKS clusters, node pools, load balancers over reqwest/rustls) and the
//! [`DigitalOceanRegistry`] that hands every caller of an account the same instance.
//!
//! Invariant: all requests of one account go through one transport and one token bucket,
//! failures are classified once (`transport::classify`), list calls read every page or
//! fail (a truncated list must never look like deleted objects), and the token never
//! appears in a message.

mod kubernetes;
mod load_balancers;
pub mod rate_limit;
mod registry;
mod transport;
mod wire;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bc_domain::ProviderError;
use bc_domain::model::{ClusterMode, LoadBalancerType, ProviderKind, SecretString};
use bc_domain::ports::{
    Clock, KubernetesProvider, LabelRule, LoadBalancerProvider, PoolUpgrades, ProviderImpl,
    ProviderOffer, ProviderResult,
};
use serde::de::DeserializeOwned;

pub use rate_limit::{Acquire, RateLimitConfig, TokenBucket};
pub use registry::DigitalOceanRegistry;
pub use transport::SharedBucket;

use kubernetes::CredentialCache;
pub(crate) use kubernetes::seg;
use transport::Transport;

/// What DigitalOcean offers: standard clusters only (DOKS has worker node pools, no
/// autopilot mode), node pools, regional and global load balancers; names up to 255
/// characters (ours are at most 63); tags; a cluster's upgrade upgrades its nodes too.
pub fn offer() -> ProviderOffer {
    ProviderOffer {
        provider: ProviderKind::Digitalocean,
        cluster_modes: vec![ClusterMode::Standard],
        node_pools: true,
        load_balancer_types: vec![LoadBalancerType::Regional, LoadBalancerType::Global],
        name_max: 255,
        label_rule: LabelRule::Tags,
        autopilot_regions_only: false,
        pool_upgrades: PoolUpgrades::WithControlPlane,
        count_placement: "as asked: DigitalOcean counts a node pool's nodes in total",
    }
}

/// The public API's address.
pub const DEFAULT_BASE_URL: &str = "https://api.digitalocean.com";

/// How the adapter talks to DigitalOcean.
#[derive(Debug, Clone)]
pub struct DigitalOceanConfig {
    /// Base URL without `/v2` (the simulator's `http://127.0.0.1:PORT` in tests).
    pub base_url: String,
    /// TCP/TLS connect timeout.
    pub connect_timeout: Duration,
    /// Whole-request timeout.
    pub request_timeout: Duration,
    /// The account's local request budget.
    pub rate_limit: RateLimitConfig,
    /// The lifetime asked for a kubeconfig's token (`expiry_seconds`).
    pub kubeconfig_expiry: Duration,
    /// A cached kubeconfig is replaced once less than this is left of its lifetime.
    pub kubeconfig_refresh_margin: Duration,
    /// Page size of list calls (DigitalOcean caps it at 200).
    pub per_page: u32,
    /// The most pages a list call reads before it fails (a bound, not a truncation).
    pub max_pages: u32,
}

impl Default for DigitalOceanConfig {
    fn default() -> Self {
        Self {
            base_url: DEFAULT_BASE_URL.to_owned(),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            rate_limit: RateLimitConfig::default(),
            kubeconfig_expiry: Duration::from_secs(3600),
            kubeconfig_refresh_margin: Duration::from_secs(300),
            per_page: 200,
            max_pages: 1000,
        }
    }
}

impl DigitalOceanConfig {
    /// The defaults, pointed at `base_url`.
    pub fn with_base_url(base_url: impl Into<String>) -> Self {
        Self { base_url: base_url.into(), ..Self::default() }
    }
}

/// One DigitalOcean account: implements [`ProviderImpl`], [`KubernetesProvider`] and
/// [`LoadBalancerProvider`].
pub struct DigitalOcean {
    transport: Transport,
    config: DigitalOceanConfig,
    credentials: Mutex<HashMap<String, CredentialCache>>,
    /// Per cluster, held while its kubeconfig is minted, so concurrent first callers of
    /// a cluster wait for one mint instead of each minting their own, while other
    /// clusters' mints go ahead.
    minting: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl std::fmt::Debug for DigitalOcean {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Deliberately without the transport: it holds the token.
        f.debug_struct("DigitalOcean").field("base_url", &self.config.base_url).finish()
    }
}

impl DigitalOcean {
    /// An adapter for the account whose API token is `token`, with its own bucket.
    pub fn new(
        config: DigitalOceanConfig,
        token: &SecretString,
        clock: Arc<dyn Clock>,
    ) -> ProviderResult<Self> {
        Self::with_bucket(config, token, clock, None)
    }

    /// An adapter that takes its tokens from `bucket` (shared with other instances of
    /// the same account), or from a new one when `None`.
    pub fn with_bucket(
        config: DigitalOceanConfig,
        token: &SecretString,
        clock: Arc<dyn Clock>,
        bucket: Option<SharedBucket>,
    ) -> ProviderResult<Self> {
        let client = crate::http::client(config.connect_timeout, config.request_timeout)?;
        Self::with_client(config, token, clock, bucket, client)
    }

    /// [`Self::with_bucket`] on `client` (a registry's, shared by its accounts).
    pub(crate) fn with_client(
        config: DigitalOceanConfig,
        token: &SecretString,
        clock: Arc<dyn Clock>,
        bucket: Option<SharedBucket>,
        client: reqwest::Client,
    ) -> ProviderResult<Self> {
        let transport =
            Transport::new(client, &config.base_url, token, &config.rate_limit, bucket, clock)?;
        Ok(Self {
            transport,
            config,
            credentials: Mutex::new(HashMap::new()),
            minting: Mutex::new(HashMap::new()),
        })
    }

    /// The account's token bucket (for inspection and for sharing).
    pub fn bucket(&self) -> SharedBucket {
        self.transport.bucket()
    }

    /// Reads every page of a list endpoint (`id_of` names an object). Page-number
    /// paging over a list that changes meanwhile can skip an object (a delete on an
    /// earlier page shifts the rest left) or repeat one (an insert shifts them right), so
    /// a walk during which `meta.total` moved, an id came twice, or the objects read do
    /// not add up to `meta.total` is thrown away and the list walked again, at most
    /// [`LIST_WALKS`] times. What a walk cannot see (as many objects inserted after the
    /// read position as deleted before it) is left to the caller's GET before it acts
    /// on an absence.
    async fn list_all<T: DeserializeOwned>(
        &self,
        path: &str,
        id_of: impl Fn(&T) -> &str,
    ) -> ProviderResult<Vec<T>> {
        let mut changed = String::new();
        for _ in 0..LIST_WALKS {
            match self.walk(path, &id_of).await? {
                Walk::Whole(items) => return Ok(items),
                Walk::Changed(why) => changed = why,
            }
        }
        Err(ProviderError::Transient {
            message: format!(
                "GET {path}: the list changed during each of {LIST_WALKS} reads ({changed}); \
                 refusing a list that may miss objects"
            ),
        })
    }

    /// One walk over every page.
    async fn walk<T: DeserializeOwned>(
        &self,
        path: &str,
        id_of: &impl Fn(&T) -> &str,
    ) -> ProviderResult<Walk<T>> {
        let mut out: Vec<T> = Vec::new();
        let mut seen = HashSet::new();
        let mut total = None;
        let mut page: u64 = 1;
        for read in 0..self.config.max_pages {
            let query =
                [("page", page.to_string()), ("per_page", self.config.per_page.to_string())];
            let p = self.transport.get_json::<wire::ListPage<T>>(path, &query).await?.into_page();
            if read == 0 {
                total = p.total;
            } else if p.total != total {
                let show = |t: Option<u64>| t.map_or("none".to_owned(), |t| t.to_string());
                let (before, now) = (show(total), show(p.total));
                return Ok(Walk::Changed(format!("meta.total went from {before} to {now}")));
            }
            for item in p.items {
                if !seen.insert(id_of(&item).to_owned()) {
                    return Ok(Walk::Changed(format!("{} came on two pages", id_of(&item))));
                }
                out.push(item);
            }
            let Some(next) = p.next else {
                return Ok(match total {
                    Some(t) if t != out.len() as u64 => {
                        Walk::Changed(format!("read {} objects of meta.total {t}", out.len()))
                    }
                    _ => Walk::Whole(out),
                });
            };
            // Only the page number is taken from `next`: the request goes to our own base
            // URL, so a `next` naming another host never receives the token.
            let next_page = next_page_number(&next).unwrap_or(page + 1);
            if next_page <= page {
                return Err(ProviderError::Transient {
                    message: format!("GET {path}: page {page} links back to page {next_page}"),
                });
            }
            page = next_page;
        }
        Err(ProviderError::Transient {
            message: format!(
                "GET {path}: more than {} pages; refusing a partial list",
                self.config.max_pages
            ),
        })
    }
}

/// How many times a list is walked before a list that keeps changing is an error.
pub const LIST_WALKS: usize = 3;

/// One page of a list: its items, `links.pages.next`, `meta.total`.
pub(crate) struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<String>,
    pub total: Option<u64>,
}

/// What one walk over the pages saw.
enum Walk<T> {
    /// Every object, each once.
    Whole(Vec<T>),
    /// The list changed under the walk (why).
    Changed(String),
}

/// The `page` query parameter of a `links.pages.next` URL.
fn next_page_number(next: &str) -> Option<u64> {
    let url = reqwest::Url::parse(next).ok()?;
    url.query_pairs().find(|(k, _)| k == "page").and_then(|(_, v)| v.parse().ok())
}

#[async_trait]
impl ProviderImpl for DigitalOcean {
    fn offer(&self) -> ProviderOffer {
        offer()
    }

    async fn check_credentials(&self) -> ProviderResult<()> {
        // `GET /v2/account` is the cheapest authenticated call, and needs no scope beyond
        // the token being valid.
        self.transport.send(reqwest::Method::GET, "/v2/account", &[], None).await.map(|_| ())
    }

    fn kubernetes(&self) -> &dyn KubernetesProvider {
        self
    }

    fn load_balancers(&self) -> &dyn LoadBalancerProvider {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_page_is_read_from_the_link() {
        assert_eq!(
            next_page_number("https://api.digitalocean.com/v2/load_balancers?page=3&per_page=200"),
            Some(3)
        );
        assert_eq!(next_page_number("not a url"), None);
    }
}
