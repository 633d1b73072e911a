//! Provider access for reconcilers: the budgeted provider instance of an account, and
//! the account's clusters and load balancers as one shared, paginated listing.
//!
//! Invariant: at steady state an account is observed with list calls shared by all its
//! objects, never one GET per object per resync (DESIGN.md, "Observe in bulk"); a
//! listing may be older than `max_age` never, and an absence seen in a listing is not
//! proof that an object is gone (confirm with a GET before re-creating it).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bc_domain::ProviderError;
use bc_domain::Timestamp;
use bc_domain::model::ProviderAccount;
use bc_domain::ports::{
    Clock, ProviderCluster, ProviderImpl, ProviderLoadBalancer, ProviderRegistry,
};

/// One listing of an account's objects of one kind.
#[derive(Debug, Clone)]
pub struct Listing<T> {
    /// The objects, as the provider listed them.
    pub items: Vec<T>,
    /// When the list was taken.
    pub listed_at: Timestamp,
}

/// Provider access shared by every reconciler of a process.
#[async_trait]
pub trait Observer: Send + Sync {
    /// The provider implementation of `account` (the same instance, so the same budget,
    /// for every caller).
    async fn provider(
        &self,
        account: &ProviderAccount,
    ) -> Result<Arc<dyn ProviderImpl>, ProviderError>;
    /// The account's clusters (with their node pools), listed at most `max_age` ago.
    async fn clusters(
        &self,
        account: &ProviderAccount,
        max_age: Duration,
    ) -> Result<Arc<Listing<ProviderCluster>>, ProviderError>;
    /// The account's load balancers, listed at most `max_age` ago.
    async fn load_balancers(
        &self,
        account: &ProviderAccount,
        max_age: Duration,
    ) -> Result<Arc<Listing<ProviderLoadBalancer>>, ProviderError>;
    /// Forgets the account's listings (after a write that changes what they show).
    fn invalidate(&self, account: &ProviderAccount);
}

/// The simplest observer: every listing is taken fresh from the provider (no sharing).
/// Correct, but it spends one list call per question; the runtime's shared observer
/// replaces it where calls are budgeted.
pub struct DirectObserver {
    registry: Arc<dyn ProviderRegistry>,
    clock: Arc<dyn Clock>,
}

impl DirectObserver {
    /// An observer over `registry`.
    pub fn new(registry: Arc<dyn ProviderRegistry>, clock: Arc<dyn Clock>) -> Self {
        Self { registry, clock }
    }
}

#[async_trait]
impl Observer for DirectObserver {
    async fn provider(
        &self,
        account: &ProviderAccount,
    ) -> Result<Arc<dyn ProviderImpl>, ProviderError> {
        self.registry.provider_for(account).await
    }

    async fn clusters(
        &self,
        account: &ProviderAccount,
        _max_age: Duration,
    ) -> Result<Arc<Listing<ProviderCluster>>, ProviderError> {
        let provider = self.provider(account).await?;
        let items = provider.kubernetes().list_clusters().await?;
        Ok(Arc::new(Listing { items, listed_at: self.clock.now() }))
    }

    async fn load_balancers(
        &self,
        account: &ProviderAccount,
        _max_age: Duration,
    ) -> Result<Arc<Listing<ProviderLoadBalancer>>, ProviderError> {
        let provider = self.provider(account).await?;
        let items = provider.load_balancers().list().await?;
        Ok(Arc::new(Listing { items, listed_at: self.clock.now() }))
    }

    fn invalidate(&self, _account: &ProviderAccount) {}
}
