//! The [`ProviderRegistry`] of GKE accounts: one cached [`Gke`] per account, so one token
//! cache and one budget.
//!
//! Invariant: every caller of an account gets the same instance until the account's
//! sealed credentials change; the key lives only inside that instance's signer.

use std::sync::Arc;

use async_trait::async_trait;
use bc_domain::ProviderError;
use bc_domain::model::ProviderAccount;
use bc_domain::ports::{
    AccountCredentials, Clock, ProviderImpl, ProviderRegistry, ProviderResult, SecretBox,
    ServiceAccount,
};

use super::{Gke, GkeConfig};
use crate::registry::AccountCache;

/// GKE accounts by id.
pub struct GkeRegistry {
    config: GkeConfig,
    secret_box: Arc<dyn SecretBox>,
    clock: Arc<dyn Clock>,
    cache: AccountCache<Gke>,
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
        Self { config, secret_box, clock, cache: AccountCache::default() }
    }

    /// The concrete adapter of `account` (shared; same as `provider_for`).
    pub fn gke_for(&self, account: &ProviderAccount) -> ProviderResult<Arc<Gke>> {
        self.cache.get_or_build(account, self.secret_box.as_ref(), |creds| {
            Gke::new(&self.config, service_account(creds)?, self.clock.clone(), None)
        })
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
