//! What the reconcilers' tests read and write besides the API's writes: bookings, a
//! policy's flavors swapped, the tenant's events by kind, a provider cluster's node pool
//! names, and a provider whose two halves come from different places (a mock for one).
//!
//! Invariant: one helper per question, shared by every suite, so two suites never ask
//! the same thing two ways; reads of the provider go through the production adapter
//! ([`Env::provider`]), so they are counted like the reconcilers' calls.

use std::sync::Arc;

use async_trait::async_trait;
use bc_domain::model::{Booking, BookingState, NodePool};
use bc_domain::policy::{Flavor, PoolPolicy};
use bc_domain::ports::{
    Clock, ClusterRepo, KubernetesProvider, LedgerRepo, LoadBalancerProvider, PageRequest,
    ProviderImpl, ProviderOffer, ProviderResult,
};
use bc_domain::{FlavorName, PoolId, SubstrateNaming};

use super::Env;

/// `p` with `flavors` instead of its own.
pub fn with_flavors(p: &PoolPolicy, flavors: Vec<Flavor>) -> PoolPolicy {
    PoolPolicy { flavors, ..p.clone() }
}

impl Env {
    /// An active booking of `pool` made now (not stored).
    pub fn booking(&self, pool: &PoolId) -> Booking {
        let now = self.clock.now();
        Booking {
            booking_id: self.new_id(now),
            tenant_id: self.tenant.clone(),
            pool_id: pool.clone(),
            node_name: None,
            state: BookingState::Active,
            created_at: now,
            ends_at: None,
            ended_at: None,
        }
    }

    /// The kinds of the tenant's events, oldest first.
    pub async fn event_kinds(&self) -> Vec<String> {
        let all = self.store.event_list(&self.tenant, None, 0, 10_000).await.expect("events");
        all.into_iter().map(|e| e.kind).collect()
    }

    /// How many of the tenant's events are of `kind`.
    pub async fn events_of(&self, kind: &str) -> usize {
        self.event_kinds().await.iter().filter(|k| *k == kind).count()
    }

    /// The kinds of `pool`'s substrate events (`kubernetes.substrate.*`), oldest first.
    pub async fn substrate_events(&self, pool: &PoolId) -> Vec<String> {
        let subject = bc_domain::model::subjects::pool(pool);
        let all =
            self.store.event_list(&self.tenant, Some(&subject), 0, 10_000).await.expect("events");
        all.into_iter().map(|e| e.kind).filter(|k| k.starts_with("kubernetes.substrate.")).collect()
    }

    /// The provider id of the cluster of `pool`'s substrate.
    pub async fn substrate_cluster(&self, pool: &PoolId) -> String {
        let s = self.substrate(pool).await;
        let c = self.cluster(s.cluster_id.as_ref().expect("a cluster recorded")).await;
        c.provider_cluster_id.expect("made at the provider")
    }

    /// The node pool rows of `pool`'s substrate cluster.
    pub async fn substrate_rows(&self, pool: &PoolId) -> Vec<NodePool> {
        let s = self.substrate(pool).await;
        let c = s.cluster_id.expect("a cluster recorded");
        let page = self.store.node_pool_list_by_cluster(&c, &PageRequest::first(100)).await;
        page.expect("node pools").items
    }

    /// How this provider names what a substrate makes (SPEC §6).
    pub fn naming(&self) -> SubstrateNaming {
        SubstrateNaming::of(&self.provider().offer())
    }

    /// The provider name of the cluster `pool`'s substrate makes.
    pub fn substrate_cluster_name(&self, pool: &PoolId) -> String {
        self.naming().cluster_name(pool).as_str().to_owned()
    }

    /// The provider name of `pool`'s node pool of flavor `flavor`.
    pub fn flavor_pool(&self, pool: &PoolId, flavor: &str) -> String {
        let flavor = FlavorName::parse(flavor).expect("a flavor name");
        self.naming().node_pool_name(pool, &flavor)
    }

    /// The names of provider cluster `pid`'s node pools, sorted (empty when it is gone),
    /// read through the adapter.
    pub async fn pool_names(&self, pid: &str) -> Vec<String> {
        let cluster = self.provider().kubernetes().get_cluster(pid).await;
        let mut names: Vec<String> =
            cluster.map(|c| c.node_pools.into_iter().map(|p| p.name).collect()).unwrap_or_default();
        names.sort();
        names
    }
}

impl Env {
    /// A provider cluster `name` someone made outside this system, through the adapter in
    /// the provider's region, with one node pool `pool` of one node and no tag of ours,
    /// stepped until it runs: its provider id.
    pub async fn made_outside(&self, name: &str, pool: &str) -> String {
        let first = bc_domain::ports::NodePoolRequest {
            size: self.on.node_size().into(),
            ..bc_sim::testing::node_pool_request(pool, 1)
        };
        let req = bc_domain::ports::CreateClusterRequest {
            region: self.on.region().into(),
            ..bc_sim::testing::cluster_request(name, vec![first])
        };
        let k = self.provider();
        let made = k.kubernetes().create_cluster(&req).await.expect("their cluster");
        for _ in 0..30 {
            let c = k.kubernetes().get_cluster(&made.id).await.expect("their cluster");
            if c.state == bc_domain::ports::ProviderClusterState::Running {
                break;
            }
            self.cloud.step(60);
        }
        made.id
    }
}

/// A provider whose Kubernetes calls go to one place and whose load balancer calls go to
/// another (a mock of one half beside a real or mocked other half).
pub struct Halves {
    /// What it declares it offers.
    pub offer: ProviderOffer,
    /// Its Kubernetes half.
    pub kubernetes: Box<dyn KubernetesProvider>,
    /// Its load balancer half.
    pub load_balancers: Box<dyn LoadBalancerProvider>,
}

impl Halves {
    /// A shared provider of the two halves; credentials always check.
    pub fn provider(
        offer: ProviderOffer,
        kubernetes: impl KubernetesProvider + 'static,
        load_balancers: impl LoadBalancerProvider + 'static,
    ) -> Arc<Self> {
        Arc::new(Self {
            offer,
            kubernetes: Box::new(kubernetes),
            load_balancers: Box::new(load_balancers),
        })
    }
}

#[async_trait]
impl ProviderImpl for Halves {
    fn offer(&self) -> ProviderOffer {
        self.offer.clone()
    }
    async fn check_credentials(&self) -> ProviderResult<()> {
        Ok(())
    }
    fn kubernetes(&self) -> &dyn KubernetesProvider {
        self.kubernetes.as_ref()
    }
    fn load_balancers(&self) -> &dyn LoadBalancerProvider {
        self.load_balancers.as_ref()
    }
}
