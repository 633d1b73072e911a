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
use crate::http::SharedClient;
use crate::registry::AccountCache;

/// DigitalOcean accounts by id.
pub struct DigitalOceanRegistry {
    config: DigitalOceanConfig,
    secret_box: Arc<dyn SecretBox>,
    clock: Arc<dyn Clock>,
    cache: AccountCache<DigitalOcean>,
    /// The one HTTP client of every account's adapter.
    http: SharedClient,
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
        let http = SharedClient::new(config.connect_timeout, config.request_timeout);
        Self { config, secret_box, clock, cache: AccountCache::default(), http }
    }

    /// The concrete adapter of `account` (shared; same as `provider_for`), for callers
    /// that need the concrete type (its rate-limit bucket, say).
    pub fn digitalocean_for(&self, account: &ProviderAccount) -> ProviderResult<Arc<DigitalOcean>> {
        self.cache.get_or_build(account, self.secret_box.as_ref(), |creds| self.adapter(creds))
    }

    /// An adapter of `credentials` on the registry's one HTTP client.
    fn adapter(&self, credentials: &AccountCredentials) -> ProviderResult<DigitalOcean> {
        let token = token_of(credentials)?;
        DigitalOcean::with_client(
            self.config.clone(),
            token,
            self.clock.clone(),
            None,
            self.http.get()?,
        )
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
        Ok(Arc::new(self.adapter(credentials)?))
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

#[cfg(test)]
mod tests {
    use super::*;
    use bc_domain::ports::ManualClock;

    /// Every adapter the registry makes — checking new tokens, and each account's — runs
    /// on the registry's one HTTP client: a client each held its own copy of the
    /// platform's trust anchors, per account.
    #[tokio::test]
    async fn every_adapter_of_the_registry_shares_one_http_client() {
        let clock = Arc::new(ManualClock::new(bc_domain::Timestamp::EPOCH));
        let registry = DigitalOceanRegistry::new(
            "http://127.0.0.1:9".into(),
            Arc::new(crate::registry::NoSecrets),
            clock,
        );
        let before = crate::http::BUILT.with(std::cell::Cell::get);
        for token in ["dop_v1_a", "dop_v1_b", "dop_v1_c"] {
            let creds = AccountCredentials::Token(SecretString::new(token));
            registry.provider_for_credentials(&creds).await.expect("adapter");
        }
        assert_eq!(crate::http::BUILT.with(std::cell::Cell::get) - before, 1);
    }
}
