//! The [`ProviderRegistry`] of DigitalOcean accounts: opens an account's sealed token and
//! hands out one cached [`DigitalOcean`] per account.
//!
//! Invariant: every caller of an account gets the same instance — so the same token
//! bucket and kubeconfig cache — until the account's sealed credentials change; the
//! plaintext token lives only inside that instance's transport.

use std::sync::Arc;

use async_trait::async_trait;
use bc_domain::ProviderError;
use bc_domain::model::{ProviderAccount, SecretString};
use bc_domain::ports::{
    AccountCredentials, Clock, ProviderImpl, ProviderRegistry, ProviderResult, SecretBox,
};

use super::{DigitalOcean, DigitalOceanConfig};
use crate::registry::AccountCache;

/// DigitalOcean accounts by id.
pub struct DigitalOceanRegistry {
    config: DigitalOceanConfig,
    secret_box: Arc<dyn SecretBox>,
    clock: Arc<dyn Clock>,
    cache: AccountCache<DigitalOcean>,
}

impl std::fmt::Debug for DigitalOceanRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DigitalOceanRegistry").field("base_url", &self.config.base_url).finish()
    }
}

impl DigitalOceanRegistry {
    /// A registry talking to `base_url` (normally [`super::DEFAULT_BASE_URL`]) with the
    /// default timeouts and budgets.
    pub fn new(base_url: String, secret_box: Arc<dyn SecretBox>, clock: Arc<dyn Clock>) -> Self {
        Self::with_config(DigitalOceanConfig::with_base_url(base_url), secret_box, clock)
    }

    /// A registry with explicit settings.
    pub fn with_config(
        config: DigitalOceanConfig,
        secret_box: Arc<dyn SecretBox>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self { config, secret_box, clock, cache: AccountCache::default() }
    }

    /// The concrete adapter of `account` (shared; same as `provider_for`), for callers
    /// that need the concrete type (its rate-limit bucket, say).
    pub fn digitalocean_for(&self, account: &ProviderAccount) -> ProviderResult<Arc<DigitalOcean>> {
        self.cache.get_or_build(account, self.secret_box.as_ref(), |creds| {
            DigitalOcean::new(self.config.clone(), token_of(creds)?, self.clock.clone())
        })
    }
}

#[async_trait]
impl ProviderRegistry for DigitalOceanRegistry {
    async fn provider_for(
        &self,
        account: &ProviderAccount,
    ) -> ProviderResult<Arc<dyn ProviderImpl>> {
        Ok(self.digitalocean_for(account)?)
    }

    async fn provider_for_credentials(
        &self,
        credentials: &AccountCredentials,
    ) -> ProviderResult<Arc<dyn ProviderImpl>> {
        // Not cached: the token is not an account yet (it is being checked).
        let token = token_of(credentials)?;
        Ok(Arc::new(DigitalOcean::new(self.config.clone(), token, self.clock.clone())?))
    }
}

/// The token of DigitalOcean credentials; another provider's are not this registry's.
fn token_of(credentials: &AccountCredentials) -> ProviderResult<&SecretString> {
    match credentials {
        AccountCredentials::Token(token) => Ok(token),
        other => Err(ProviderError::Refused {
            message: format!(
                "a {} account is not a DigitalOcean account",
                other.provider().as_str()
            ),
        }),
    }
}
