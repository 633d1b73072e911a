//! One forwarding decorator for provider implementations: [`Forward`] wraps a
//! [`ProviderImpl`] and sends every Kubernetes, load balancer and account call through a
//! [`CallHook`] — told which call it is before it goes and how it ended after — so a
//! decorator (the budget, a test's faults or recordings) is its hook, not another copy
//! of every method; [`ForwardRegistry`] hooks every provider a registry opens.
//!
//! Invariant: every call of the three provider traits that reaches the provider passes
//! `before` first and `after` once it answered; a call `before` refuses is never sent
//! (the call is a future, so nothing goes out before it is polled), and what `after`
//! answers with an error replaces the provider's answer. The calls that reach nobody
//! (`offer`, `kubernetes`, `load_balancers`, `credentials_due`,
//! `invalidate_credentials`) are forwarded as they are.

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use bc_domain::ProviderError;
use bc_domain::Timestamp;
use bc_domain::model::ProviderAccount;
use bc_domain::ports::{
    AccountCredentials, AssociatedResources, ClusterCredentials, CreateClusterRequest,
    KubernetesProvider, KubernetesVersion, LoadBalancerProvider, LoadBalancerRequest,
    NodePoolRequest, ProviderCluster, ProviderImpl, ProviderLoadBalancer, ProviderNodePool,
    ProviderOffer, ProviderOptions, ProviderRegistry, ProviderResult, RequestGate,
    UpdateClusterRequest, gated,
};

/// One provider call, by what it asks (its arguments are the provider's business).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProviderCall {
    /// `ProviderImpl::check_credentials`.
    CheckCredentials,
    /// `KubernetesProvider::list_clusters`.
    ListClusters,
    /// `KubernetesProvider::get_cluster`.
    GetCluster,
    /// `KubernetesProvider::create_cluster`.
    CreateCluster,
    /// `KubernetesProvider::update_cluster`.
    UpdateCluster,
    /// `KubernetesProvider::delete_cluster`.
    DeleteCluster,
    /// `KubernetesProvider::associated_resources`.
    AssociatedResources,
    /// `KubernetesProvider::delete_cluster_selective`.
    DeleteClusterSelective,
    /// `KubernetesProvider::list_node_pools`.
    ListNodePools,
    /// `KubernetesProvider::get_node_pool`.
    GetNodePool,
    /// `KubernetesProvider::create_node_pool`.
    CreateNodePool,
    /// `KubernetesProvider::update_node_pool`.
    UpdateNodePool,
    /// `KubernetesProvider::delete_node_pool`.
    DeleteNodePool,
    /// `KubernetesProvider::delete_node`.
    DeleteNode,
    /// `KubernetesProvider::available_upgrades`.
    AvailableUpgrades,
    /// `KubernetesProvider::upgrade_cluster`.
    UpgradeCluster,
    /// `KubernetesProvider::upgrade_node_pool`.
    UpgradeNodePool,
    /// `KubernetesProvider::options_in`.
    OptionsIn,
    /// `KubernetesProvider::options`.
    Options,
    /// `KubernetesProvider::credentials`.
    Credentials,
    /// `LoadBalancerProvider::list`.
    ListLoadBalancers,
    /// `LoadBalancerProvider::get`.
    GetLoadBalancer,
    /// `LoadBalancerProvider::create`.
    CreateLoadBalancer,
    /// `LoadBalancerProvider::update`.
    UpdateLoadBalancer,
    /// `LoadBalancerProvider::delete`.
    DeleteLoadBalancer,
}

impl ProviderCall {
    /// Whether the call may change the provider's objects (whatever its answer: a failed
    /// or unanswered write may still have taken effect).
    pub fn writes(self) -> bool {
        use ProviderCall::*;
        matches!(
            self,
            CreateCluster
                | UpdateCluster
                | DeleteCluster
                | DeleteClusterSelective
                | CreateNodePool
                | UpdateNodePool
                | DeleteNodePool
                | DeleteNode
                | UpgradeCluster
                | UpgradeNodePool
                | CreateLoadBalancer
                | UpdateLoadBalancer
                | DeleteLoadBalancer
        )
    }

    /// Whether the call may change the account's load balancers and nothing else: not
    /// its clusters, node pools or nodes. (A cluster's delete may take its load
    /// balancers with it, and a node's change changes the droplets a load balancer's
    /// tag targets: those writes change both.)
    pub fn writes_load_balancers_only(self) -> bool {
        use ProviderCall::*;
        matches!(self, CreateLoadBalancer | UpdateLoadBalancer | DeleteLoadBalancer)
    }
}

/// What a [`Forward`] does around each call it forwards.
#[async_trait]
pub trait CallHook: Send + Sync {
    /// What `before` hands to `after` about one call (when it started, what to do to
    /// its answer).
    type Ticket: Send;

    /// Before `call` is sent: an error is the call's answer, and the call is not sent.
    async fn before(&self, call: ProviderCall) -> ProviderResult<Self::Ticket>;

    /// After `call` answered `outcome` (its error, or `Ok` for any success): an error
    /// replaces the answer. By default the answer stands.
    async fn after(
        &self,
        call: ProviderCall,
        ticket: Self::Ticket,
        outcome: Result<(), &ProviderError>,
    ) -> ProviderResult<()> {
        let _ = (call, ticket, outcome);
        Ok(())
    }

    /// The gate every HTTP request the call sends passes first (the provider counts
    /// requests: a listing of three pages is three); by default none.
    fn request_gate(&self) -> Option<Arc<dyn RequestGate>> {
        None
    }
}

/// No hook: every call forwarded as it is.
#[async_trait]
impl CallHook for () {
    type Ticket = ();
    async fn before(&self, _: ProviderCall) -> ProviderResult<()> {
        Ok(())
    }
}

/// A shared hook is the hook.
#[async_trait]
impl<H: CallHook + ?Sized> CallHook for Arc<H> {
    type Ticket = H::Ticket;
    async fn before(&self, call: ProviderCall) -> ProviderResult<H::Ticket> {
        (**self).before(call).await
    }
    async fn after(
        &self,
        call: ProviderCall,
        ticket: H::Ticket,
        outcome: Result<(), &ProviderError>,
    ) -> ProviderResult<()> {
        (**self).after(call, ticket, outcome).await
    }
    fn request_gate(&self) -> Option<Arc<dyn RequestGate>> {
        (**self).request_gate()
    }
}

/// Runs the future `f` of `call` under `hook`: `before`, the call, `after`.
pub async fn hooked<H: CallHook + ?Sized, T>(
    hook: &H,
    call: ProviderCall,
    f: impl Future<Output = ProviderResult<T>>,
) -> ProviderResult<T> {
    let ticket = hook.before(call).await?;
    let result = match hook.request_gate() {
        Some(gate) => gated(gate, f).await,
        None => f.await,
    };
    hook.after(call, ticket, result.as_ref().map(|_| ())).await?;
    result
}

/// A provider whose every call goes through `hook` to `inner`.
pub struct Forward<H> {
    inner: Arc<dyn ProviderImpl>,
    hook: H,
}

impl<H: CallHook> Forward<H> {
    /// `inner`, each call going through `hook`.
    pub fn with_hook(inner: Arc<dyn ProviderImpl>, hook: H) -> Self {
        Self { inner, hook }
    }

    /// The hook.
    pub fn hook(&self) -> &H {
        &self.hook
    }

    /// The hook, to change it before the provider is shared.
    pub fn hook_mut(&mut self) -> &mut H {
        &mut self.hook
    }

    async fn call<T>(
        &self,
        call: ProviderCall,
        f: impl Future<Output = ProviderResult<T>>,
    ) -> ProviderResult<T> {
        hooked(&self.hook, call, f).await
    }
}

impl Forward<()> {
    /// `inner` as it is (a [`KubernetesProvider`] and a [`LoadBalancerProvider`] of its
    /// own, where one half of a provider is wanted).
    pub fn plain(inner: Arc<dyn ProviderImpl>) -> Self {
        Self::with_hook(inner, ())
    }
}

#[async_trait]
impl<H: CallHook> ProviderImpl for Forward<H> {
    fn offer(&self) -> ProviderOffer {
        self.inner.offer()
    }

    async fn check_credentials(&self) -> ProviderResult<()> {
        self.call(ProviderCall::CheckCredentials, self.inner.check_credentials()).await
    }

    fn kubernetes(&self) -> &dyn KubernetesProvider {
        self
    }

    fn load_balancers(&self) -> &dyn LoadBalancerProvider {
        self
    }
}

#[async_trait]
impl<H: CallHook> KubernetesProvider for Forward<H> {
    async fn list_clusters(&self) -> ProviderResult<Vec<ProviderCluster>> {
        self.call(ProviderCall::ListClusters, self.inner.kubernetes().list_clusters()).await
    }

    async fn get_cluster(&self, id: &str) -> ProviderResult<ProviderCluster> {
        self.call(ProviderCall::GetCluster, self.inner.kubernetes().get_cluster(id)).await
    }

    async fn create_cluster(&self, req: &CreateClusterRequest) -> ProviderResult<ProviderCluster> {
        self.call(ProviderCall::CreateCluster, self.inner.kubernetes().create_cluster(req)).await
    }

    async fn update_cluster(
        &self,
        id: &str,
        req: &UpdateClusterRequest,
    ) -> ProviderResult<ProviderCluster> {
        let f = self.inner.kubernetes().update_cluster(id, req);
        self.call(ProviderCall::UpdateCluster, f).await
    }

    async fn delete_cluster(&self, id: &str) -> ProviderResult<()> {
        self.call(ProviderCall::DeleteCluster, self.inner.kubernetes().delete_cluster(id)).await
    }

    async fn associated_resources(&self, id: &str) -> ProviderResult<AssociatedResources> {
        let f = self.inner.kubernetes().associated_resources(id);
        self.call(ProviderCall::AssociatedResources, f).await
    }

    async fn delete_cluster_selective(
        &self,
        id: &str,
        load_balancer_ids: &[String],
    ) -> ProviderResult<()> {
        let f = self.inner.kubernetes().delete_cluster_selective(id, load_balancer_ids);
        self.call(ProviderCall::DeleteClusterSelective, f).await
    }

    async fn list_node_pools(&self, cluster_id: &str) -> ProviderResult<Vec<ProviderNodePool>> {
        let f = self.inner.kubernetes().list_node_pools(cluster_id);
        self.call(ProviderCall::ListNodePools, f).await
    }

    async fn get_node_pool(
        &self,
        cluster_id: &str,
        node_pool_id: &str,
    ) -> ProviderResult<ProviderNodePool> {
        let f = self.inner.kubernetes().get_node_pool(cluster_id, node_pool_id);
        self.call(ProviderCall::GetNodePool, f).await
    }

    async fn create_node_pool(
        &self,
        cluster_id: &str,
        req: &NodePoolRequest,
    ) -> ProviderResult<ProviderNodePool> {
        let f = self.inner.kubernetes().create_node_pool(cluster_id, req);
        self.call(ProviderCall::CreateNodePool, f).await
    }

    async fn update_node_pool(
        &self,
        cluster_id: &str,
        node_pool_id: &str,
        req: &NodePoolRequest,
    ) -> ProviderResult<ProviderNodePool> {
        let f = self.inner.kubernetes().update_node_pool(cluster_id, node_pool_id, req);
        self.call(ProviderCall::UpdateNodePool, f).await
    }

    async fn delete_node_pool(&self, cluster_id: &str, node_pool_id: &str) -> ProviderResult<()> {
        let f = self.inner.kubernetes().delete_node_pool(cluster_id, node_pool_id);
        self.call(ProviderCall::DeleteNodePool, f).await
    }

    async fn delete_node(
        &self,
        cluster_id: &str,
        node_pool_id: &str,
        node_id: &str,
        skip_drain: bool,
        replace: bool,
    ) -> ProviderResult<()> {
        let k = self.inner.kubernetes();
        let f = k.delete_node(cluster_id, node_pool_id, node_id, skip_drain, replace);
        self.call(ProviderCall::DeleteNode, f).await
    }

    async fn available_upgrades(&self, cluster_id: &str) -> ProviderResult<Vec<KubernetesVersion>> {
        let f = self.inner.kubernetes().available_upgrades(cluster_id);
        self.call(ProviderCall::AvailableUpgrades, f).await
    }

    async fn upgrade_cluster(&self, cluster_id: &str, version: &str) -> ProviderResult<()> {
        let f = self.inner.kubernetes().upgrade_cluster(cluster_id, version);
        self.call(ProviderCall::UpgradeCluster, f).await
    }

    async fn upgrade_node_pool(
        &self,
        cluster_id: &str,
        node_pool_id: &str,
        version: &str,
    ) -> ProviderResult<()> {
        let f = self.inner.kubernetes().upgrade_node_pool(cluster_id, node_pool_id, version);
        self.call(ProviderCall::UpgradeNodePool, f).await
    }

    async fn options_in(&self, region: &str) -> ProviderResult<ProviderOptions> {
        self.call(ProviderCall::OptionsIn, self.inner.kubernetes().options_in(region)).await
    }

    async fn options(&self) -> ProviderResult<ProviderOptions> {
        self.call(ProviderCall::Options, self.inner.kubernetes().options()).await
    }

    async fn credentials(&self, cluster_id: &str) -> ProviderResult<ClusterCredentials> {
        self.call(ProviderCall::Credentials, self.inner.kubernetes().credentials(cluster_id)).await
    }

    fn credentials_due(&self, expires_at: Timestamp) -> bool {
        self.inner.kubernetes().credentials_due(expires_at)
    }

    fn invalidate_credentials(&self, cluster_id: &str) {
        self.inner.kubernetes().invalidate_credentials(cluster_id);
    }
}

#[async_trait]
impl<H: CallHook> LoadBalancerProvider for Forward<H> {
    async fn list(&self) -> ProviderResult<Vec<ProviderLoadBalancer>> {
        self.call(ProviderCall::ListLoadBalancers, self.inner.load_balancers().list()).await
    }

    async fn get(&self, id: &str) -> ProviderResult<ProviderLoadBalancer> {
        self.call(ProviderCall::GetLoadBalancer, self.inner.load_balancers().get(id)).await
    }

    async fn create(&self, req: &LoadBalancerRequest) -> ProviderResult<ProviderLoadBalancer> {
        self.call(ProviderCall::CreateLoadBalancer, self.inner.load_balancers().create(req)).await
    }

    async fn update(
        &self,
        id: &str,
        req: &LoadBalancerRequest,
    ) -> ProviderResult<ProviderLoadBalancer> {
        let f = self.inner.load_balancers().update(id, req);
        self.call(ProviderCall::UpdateLoadBalancer, f).await
    }

    async fn delete(&self, id: &str) -> ProviderResult<()> {
        self.call(ProviderCall::DeleteLoadBalancer, self.inner.load_balancers().delete(id)).await
    }
}

/// A registry whose every account's provider goes through the hook `hook_for` makes
/// for that account; credentials not stored yet belong to no account, and their
/// provider is the inner registry's as it is.
pub struct ForwardRegistry<H> {
    inner: Arc<dyn ProviderRegistry>,
    hook_for: Box<dyn Fn(&ProviderAccount) -> H + Send + Sync>,
}

impl<H: CallHook + 'static> ForwardRegistry<H> {
    /// `inner`, hooking each account's provider with `hook_for(account)`.
    pub fn new(
        inner: Arc<dyn ProviderRegistry>,
        hook_for: impl Fn(&ProviderAccount) -> H + Send + Sync + 'static,
    ) -> Self {
        Self { inner, hook_for: Box::new(hook_for) }
    }
}

#[async_trait]
impl<H: CallHook + 'static> ProviderRegistry for ForwardRegistry<H> {
    async fn provider_for(
        &self,
        account: &ProviderAccount,
    ) -> ProviderResult<Arc<dyn ProviderImpl>> {
        let inner = self.inner.provider_for(account).await?;
        Ok(Arc::new(Forward::with_hook(inner, (self.hook_for)(account))))
    }

    async fn provider_for_credentials(
        &self,
        credentials: &AccountCredentials,
    ) -> ProviderResult<Arc<dyn ProviderImpl>> {
        self.inner.provider_for_credentials(credentials).await
    }
}
