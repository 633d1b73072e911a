//! [`Providers`], the registry of every provider: it hands each account (and credentials
//! being checked) to its provider's registry.
//!
//! Invariant: the account's `provider` alone picks the registry; nothing here knows what
//! a provider is beyond its kind.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use bc_domain::ProviderError;
use bc_domain::model::{ProviderAccount, ProviderKind};
use bc_domain::ports::{AccountCredentials, ProviderImpl, ProviderRegistry, ProviderResult};

/// Every provider's registry: an account goes to its provider's. A provider this server
/// was not configured for refuses its accounts, naming it.
pub struct Providers {
    registries: HashMap<ProviderKind, Arc<dyn ProviderRegistry>>,
}

impl std::fmt::Debug for Providers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kinds: Vec<&str> = self.registries.keys().map(|k| k.as_str()).collect();
        f.debug_struct("Providers").field("providers", &kinds).finish()
    }
}

impl Providers {
    /// No providers yet.
    pub fn new() -> Self {
        Self { registries: HashMap::new() }
    }

    /// With `registry` serving accounts of `kind`.
    pub fn with(mut self, kind: ProviderKind, registry: Arc<dyn ProviderRegistry>) -> Self {
        self.registries.insert(kind, registry);
        self
    }

    fn of(&self, kind: ProviderKind) -> ProviderResult<&Arc<dyn ProviderRegistry>> {
        self.registries.get(&kind).ok_or_else(|| ProviderError::Refused {
            message: format!("this server is not configured for {} accounts", kind.as_str()),
        })
    }
}

impl Default for Providers {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl ProviderRegistry for Providers {
    async fn provider_for(
        &self,
        account: &ProviderAccount,
    ) -> ProviderResult<Arc<dyn ProviderImpl>> {
        self.of(account.provider)?.provider_for(account).await
    }

    async fn provider_for_credentials(
        &self,
        credentials: &AccountCredentials,
    ) -> ProviderResult<Arc<dyn ProviderImpl>> {
        self.of(credentials.provider())?.provider_for_credentials(credentials).await
    }
}
