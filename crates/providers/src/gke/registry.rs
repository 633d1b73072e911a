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
use crate::http::SharedClient;
use crate::registry::AccountCache;

/// GKE accounts by id.
pub struct GkeRegistry {
    config: GkeConfig,
    secret_box: Arc<dyn SecretBox>,
    clock: Arc<dyn Clock>,
    cache: AccountCache<Gke>,
    /// The one HTTP client of every account's adapter.
    http: SharedClient,
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
        let http = SharedClient::new(config.connect_timeout, config.request_timeout);
        Self { config, secret_box, clock, cache: AccountCache::default(), http }
    }

    /// The concrete adapter of `account` (shared; same as `provider_for`).
    pub fn gke_for(&self, account: &ProviderAccount) -> ProviderResult<Arc<Gke>> {
        self.cache.get_or_build(account, self.secret_box.as_ref(), |creds| self.adapter(creds))
    }

    /// An adapter of `credentials` on the registry's one HTTP client.
    fn adapter(&self, credentials: &AccountCredentials) -> ProviderResult<Gke> {
        let account = service_account(credentials)?;
        Gke::with_client(&self.config, account, self.clock.clone(), None, self.http.get()?)
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
        Ok(Arc::new(self.adapter(credentials)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bc_domain::ports::ManualClock;

    /// Every adapter the registry makes runs on the registry's one HTTP client (see the
    /// DigitalOcean registry's test).
    #[tokio::test]
    async fn every_adapter_of_the_registry_shares_one_http_client() {
        let clock = Arc::new(ManualClock::new(bc_domain::Timestamp::EPOCH));
        let config = GkeConfig::with_urls("http://127.0.0.1:9", "http://127.0.0.1:9/token");
        let registry = GkeRegistry::new(config, Arc::new(crate::registry::NoSecrets), clock);
        let before = crate::http::BUILT.with(std::cell::Cell::get);
        for project in ["p-a", "p-b", "p-c"] {
            let key = crate::gke::auth::tests::test_key();
            let creds = AccountCredentials::ServiceAccount(ServiceAccount {
                key,
                project_id: project.into(),
            });
            registry.provider_for_credentials(&creds).await.expect("adapter");
        }
        assert_eq!(crate::http::BUILT.with(std::cell::Cell::get) - before, 1);
    }
}
