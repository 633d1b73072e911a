//! The [`ProviderRegistry`] of GKE accounts: one cached [`Gke`] per account, so one token
//! cache and one budget.
//!
//! Invariant: every caller of an account gets the same instance until the account's
//! sealed credentials change; the key lives only inside that instance's signer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bc_domain::ProviderAccountId;
use bc_domain::ProviderError;
use bc_domain::model::ProviderAccount;
use bc_domain::ports::{
    AccountCredentials, Clock, ProviderImpl, ProviderRegistry, ProviderResult, SecretBox,
    ServiceAccount,
};

use super::{Gke, GkeConfig};

struct Cached {
    sealed: Vec<u8>,
    provider: Arc<Gke>,
}

/// GKE accounts by id.
pub struct GkeRegistry {
    config: GkeConfig,
    secret_box: Arc<dyn SecretBox>,
    clock: Arc<dyn Clock>,
    cache: Mutex<HashMap<ProviderAccountId, Cached>>,
}

impl std::fmt::Debug for GkeRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GkeRegistry")
            .field("api_url", &self.config.api_url)
            .field("token_url", &self.config.token_url)
            .finish()
    }
}

impl GkeRegistry {
    /// A registry with `config`.
    pub fn new(config: GkeConfig, secret_box: Arc<dyn SecretBox>, clock: Arc<dyn Clock>) -> Self {
        Self { config, secret_box, clock, cache: Mutex::new(HashMap::new()) }
    }

    /// The concrete adapter of `account` (shared; same as `provider_for`).
    pub fn gke_for(&self, account: &ProviderAccount) -> ProviderResult<Arc<Gke>> {
        let sealed = &account.credentials.0;
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = cache.get(&account.provider_account_id)
            && c.sealed == *sealed
        {
            return Ok(c.provider.clone());
        }
        let creds = AccountCredentials::unseal(self.secret_box.as_ref(), account)?;
        let provider =
            Arc::new(Gke::new(&self.config, service_account(&creds)?, self.clock.clone(), None)?);
        cache.insert(
            account.provider_account_id.clone(),
            Cached { sealed: sealed.clone(), provider: provider.clone() },
        );
        Ok(provider)
    }
}

fn service_account(credentials: &AccountCredentials) -> ProviderResult<&ServiceAccount> {
    match credentials {
        AccountCredentials::ServiceAccount(sa) => Ok(sa),
        other => Err(ProviderError::Refused {
            message: format!("a {} account is not a GKE account", other.provider().as_str()),
        }),
    }
}

#[async_trait]
impl ProviderRegistry for GkeRegistry {
    async fn provider_for(
        &self,
        account: &ProviderAccount,
    ) -> ProviderResult<Arc<dyn ProviderImpl>> {
        Ok(self.gke_for(account)?)
    }

    async fn provider_for_credentials(
        &self,
        credentials: &AccountCredentials,
    ) -> ProviderResult<Arc<dyn ProviderImpl>> {
        // Not cached: not an account yet (being checked).
        Ok(Arc::new(Gke::new(
            &self.config,
            service_account(credentials)?,
            self.clock.clone(),
            None,
        )?))
    }
}
