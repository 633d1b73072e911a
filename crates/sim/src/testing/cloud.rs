//! The simulated cloud behind the production adapters: the one entry for "cargo test with
//! mocked providers". [`Cloud`] serves a simulator and hands out the real DigitalOcean
//! adapter (`bc_providers::digitalocean`, over HTTP on loopback) and the real kube adapter
//! (`bc_providers::kube`, through each cluster's router in process), both on the
//! simulator's clock, while the simulator itself stays in reach for inspection and fault
//! injection.
//!
//! Invariants: every call a test makes through these adapters goes over the production
//! wire — the same requests, encoding, error classification and caches as against
//! DigitalOcean — and is counted by the simulator per endpoint; nothing sleeps on real
//! time (the adapter's token bucket is told never to wait: a wait is reported as
//! `RateLimited`, and the kube client has no built-in retry).

use std::sync::Arc;
use std::time::Duration;

use axum::http::{Request, Uri};
use bc_domain::ports::{Clock, SecretBox};
use bc_providers::digitalocean::{
    DigitalOcean, DigitalOceanConfig, DigitalOceanRegistry, RateLimitConfig,
};
use bc_providers::gke::{Gke, GkeConfig, GkeRegistry};
use bc_providers::kube::{InProcessClusters, InProcessService, KubeClusterApi};
use bc_providers::registry::Providers;
use http_body_util::BodyExt as _;
use tower::{BoxError, ServiceExt as _};

use super::Served;
use crate::config::RateLimits;
use crate::{ServeOptions, SimConfig, SimState};

/// A served simulator (the DigitalOcean face on loopback, no listener per cluster) and
/// the production adapters that reach it. Dereferences to [`Served`] (`sim`, `clock`,
/// `step`, `count`, …).
///
/// ```
/// use bc_domain::ports::{ClusterApi, ProviderImpl};
/// use bc_sim::model::routes;
/// use bc_sim::testing::{Cloud, TEST_TOKEN};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let cloud = Cloud::start().await;
/// // The adapter of one account (a registry for sealed accounts: `cloud.providers(box)`).
/// let provider = cloud.provider(TEST_TOKEN);
/// let k = provider.kubernetes();
/// let made = k
///     .create_cluster(&bc_sim::testing::cluster_request(
///         "c1",
///         vec![bc_sim::testing::node_pool_request("p1", 1)],
///     ))
///     .await
///     .unwrap();
/// cloud.step(60); // the simulator moves only when its clock does
/// let kubeconfig = k.credentials(&made.id).await.unwrap().kubeconfig;
/// let cluster = cloud.clusters().connect(&kubeconfig).await.unwrap();
/// assert_eq!(cluster.list_nodes("").await.unwrap().len(), 1);
/// // Counted per endpoint, and faults are injected into the model.
/// assert_eq!(cloud.count("POST", routes::CLUSTERS), 1);
/// cloud.sim.state().model().inject_failures(
///     &routes::key("GET", routes::CLUSTERS),
///     1,
///     bc_sim::model::Fault::ServerError,
/// );
/// assert!(k.list_clusters().await.is_err());
/// # });
/// ```
pub struct Cloud {
    served: Served,
    /// The whole-request timeout of every adapter this cloud hands out.
    request_timeout: Duration,
}

impl std::ops::Deref for Cloud {
    type Target = Served;
    fn deref(&self) -> &Served {
        &self.served
    }
}

impl Cloud {
    /// A simulated cloud with the default configuration, on a manual clock stopped at
    /// [`super::START`].
    pub async fn start() -> Self {
        Self::with_config(SimConfig::default()).await
    }

    /// A simulated cloud configured by `config`.
    pub async fn with_config(config: SimConfig) -> Self {
        let options = ServeOptions { in_process_clusters: true, ..ServeOptions::default() };
        let request_timeout = DigitalOceanConfig::default().request_timeout;
        Self { served: Served::start_with(config, options).await, request_timeout }
    }

    /// This cloud with every adapter it hands out from now on giving up on a request
    /// after `timeout` (the default is the DigitalOcean adapter's production default).
    /// A lost answer ([`crate::model::Model::lose_answers`]) is held for minutes, so a
    /// test waits out this timeout for each one: a scenario chooses a short one to see
    /// a lost answer soon. The timeout only shortens the wait; the request is still
    /// made, lands, and its answer is still lost.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// The DigitalOcean adapter's settings for this cloud: its URL, and the account
    /// limits the simulator enforces as the local budget (see [`adapter_config`]).
    pub fn adapter_config(&self) -> DigitalOceanConfig {
        DigitalOceanConfig {
            request_timeout: self.request_timeout,
            ..adapter_config(&self.server.url(), &self.sim.state().config.rate_limits)
        }
    }

    /// The registry of DigitalOcean accounts on this cloud (each account's token, sealed
    /// with `secret_box`, picks a simulated account).
    pub fn providers(&self, secret_box: Arc<dyn SecretBox>) -> Arc<DigitalOceanRegistry> {
        Arc::new(DigitalOceanRegistry::with_config(self.adapter_config(), secret_box, self.clock()))
    }

    /// A new DigitalOcean adapter of the account of `token` (its own token bucket and
    /// kubeconfig cache, like a second process of the same account).
    pub fn provider(&self, token: &str) -> Arc<DigitalOcean> {
        let token = bc_domain::model::SecretString::new(token);
        let adapter = DigitalOcean::new(self.adapter_config(), &token, self.clock());
        Arc::new(adapter.expect("a DigitalOcean adapter"))
    }

    /// The GKE adapter's settings for this cloud: its API and token URLs, its clusters
    /// reached in process, the project's limit as the local budget, never waiting, and
    /// this cloud's request timeout.
    pub fn gke_config(&self) -> GkeConfig {
        let per_minute = self.sim.state().model().gke_rate_limit();
        GkeConfig {
            rate_limit: RateLimitConfig {
                per_minute,
                per_hour: per_minute.saturating_mul(60),
                max_wait: Duration::ZERO,
            },
            request_timeout: self.request_timeout,
            clusters: (*self.clusters()).clone(),
            ..GkeConfig::with_urls(self.gke_api_url(), self.gke_token_url())
        }
    }

    /// The registry of both providers' accounts on this cloud (a DigitalOcean account's
    /// token or a GKE account's key, sealed with `secret_box`, picks a simulated account).
    pub fn all_providers(&self, secret_box: Arc<dyn SecretBox>) -> Arc<Providers> {
        let gke = GkeRegistry::new(self.gke_config(), secret_box.clone(), self.clock());
        let registry = Providers::new()
            .with(bc_domain::model::ProviderKind::Digitalocean, self.providers(secret_box))
            .with(bc_domain::model::ProviderKind::Gke, Arc::new(gke));
        Arc::new(registry)
    }

    /// A new GKE adapter of the account of service-account key file `key` (its own
    /// budget and token cache).
    pub fn gke_provider(&self, key: &str) -> Arc<Gke> {
        let checked = bc_domain::ports::ProviderCredentials::service_account(
            bc_domain::model::SecretString::new(key),
            None,
        )
        .check(bc_domain::model::ProviderKind::Gke)
        .expect("a service-account key");
        let bc_domain::ports::AccountCredentials::ServiceAccount(sa) = checked else {
            unreachable!("checked as a GKE key")
        };
        Arc::new(Gke::new(&self.gke_config(), &sa, self.clock(), None).expect("a GKE adapter"))
    }

    /// The kube adapter, reaching this cloud's clusters in process.
    pub fn clusters(&self) -> Arc<KubeClusterApi> {
        Arc::new(KubeClusterApi::in_process(cluster_routes(self.sim.state().clone())))
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }
}

/// The DigitalOcean adapter's settings for a simulator at `base_url` enforcing `limits`:
/// the local token bucket holds the same limits, and never waits (a wait would sleep on
/// real time while the test's clock stands still), so a caller that would wait gets
/// `RateLimited` and retries when the stepped clock says.
pub fn adapter_config(base_url: &str, limits: &RateLimits) -> DigitalOceanConfig {
    DigitalOceanConfig {
        rate_limit: RateLimitConfig {
            per_minute: limits.per_minute,
            per_hour: limits.per_hour,
            max_wait: Duration::ZERO,
        },
        ..DigitalOceanConfig::with_base_url(base_url)
    }
}

/// The in-process routes to the clusters of `state`, for
/// [`KubeClusterApi::in_process`]: a kubeconfig naming
/// `https://<id>.k8s.ondigitalocean.com`, or a cluster's own listener, reaches that
/// cluster's router.
pub fn cluster_routes(state: Arc<SimState>) -> Arc<dyn InProcessClusters> {
    Arc::new(Routes { state })
}

/// Each cluster's router, found by the `server` its kubeconfig names.
struct Routes {
    state: Arc<SimState>,
}

impl InProcessClusters for Routes {
    fn route(&self, server: &Uri) -> Option<InProcessService> {
        let url = server.to_string();
        let id = cluster_id_of(server).or_else(|| self.state.model().cluster_of_endpoint(&url))?;
        let router = crate::kube::cluster_router(self.state.clone(), &id);
        let service = router
            .map_request(|r: Request<::kube::client::Body>| r.map(axum::body::Body::new))
            .map_response(|r| r.map(|b| b.map_err(BoxError::from).boxed_unsync()))
            .map_err(BoxError::from);
        Some(InProcessService::new(service))
    }
}

/// The cluster id in the address DigitalOcean gives a cluster's API,
/// `https://<cluster id>.k8s.ondigitalocean.com` (what the simulator's kubeconfigs name
/// when it starts no listener per cluster).
pub fn cluster_id_of(server: &Uri) -> Option<String> {
    let id = server.host()?.strip_suffix(".k8s.ondigitalocean.com")?;
    (!id.is_empty() && !id.contains('.')).then(|| id.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_id_is_read_from_the_doks_host_only() {
        let id = |s: &str| cluster_id_of(&s.parse().unwrap());
        assert_eq!(id("https://u-1.k8s.ondigitalocean.com").as_deref(), Some("u-1"));
        assert_eq!(id("https://u-1.k8s.ondigitalocean.com:443/").as_deref(), Some("u-1"));
        assert_eq!(id("https://a.b.k8s.ondigitalocean.com"), None);
        assert_eq!(id("https://example.com"), None);
        assert_eq!(id("https://127.0.0.1:6443"), None);
    }
}
