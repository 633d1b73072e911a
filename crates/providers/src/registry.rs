//! [`Providers`], the registry of every provider: it hands each account (and credentials
//! being checked) to its provider's registry.
//!
//! Invariant: the account's `provider` alone picks the registry; nothing here knows what
//! a provider is beyond its kind.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bc_domain::model::{ProviderAccount, ProviderKind};
use bc_domain::ports::{
    AccountCredentials, ProviderImpl, ProviderRegistry, ProviderResult, SecretBox,
};
use bc_domain::{ProviderAccountId, ProviderError};

/// One adapter instance per account, shared by every caller (so one token cache and one
/// budget), until the account's sealed credentials change: a rotated secret seals to
/// other bytes, and then a new instance is built. Each provider's registry keeps one.
pub(crate) struct AccountCache<P> {
    entries: Mutex<HashMap<ProviderAccountId, Cached<P>>>,
}

/// The ciphertext an instance was built from, and the instance.
type Cached<P> = (Vec<u8>, Arc<P>);

impl<P> Default for AccountCache<P> {
    fn default() -> Self {
        Self { entries: Mutex::new(HashMap::new()) }
    }
}

impl<P> AccountCache<P> {
    /// The instance of `account`, built by `build` from its opened credentials when there
    /// is none yet or its sealed credentials changed.
    pub(crate) fn get_or_build(
        &self,
        account: &ProviderAccount,
        secret_box: &dyn SecretBox,
        build: impl FnOnce(&AccountCredentials) -> ProviderResult<P>,
    ) -> ProviderResult<Arc<P>> {
        let sealed = &account.credentials.0;
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((s, provider)) = entries.get(&account.provider_account_id)
            && s == sealed
        {
            return Ok(provider.clone());
        }
        let creds = AccountCredentials::unseal(secret_box, account)?;
        let provider = Arc::new(build(&creds)?);
        entries.insert(account.provider_account_id.clone(), (sealed.clone(), provider.clone()));
        Ok(provider)
    }
}

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

/// A secret box that opens nothing: for tests of adapters made from credentials given
/// in the clear (`provider_for_credentials`), where nothing sealed is read.
#[cfg(test)]
pub(crate) struct NoSecrets;

#[cfg(test)]
impl SecretBox for NoSecrets {
    fn seal(&self, _: &[u8], _: &[u8]) -> Result<Vec<u8>, bc_domain::ports::SecretError> {
        Err(bc_domain::ports::SecretError::Config("no secrets in this test".into()))
    }
    fn open(&self, _: &[u8], _: &[u8]) -> Result<Vec<u8>, bc_domain::ports::SecretError> {
        Err(bc_domain::ports::SecretError::Open)
    }
}
