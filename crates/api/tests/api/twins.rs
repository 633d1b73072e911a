//! Concurrent twins of a create (SPEC §2): two requests with one `requestId` and one
//! body, both past the idempotency look-up before either commits, both get the first
//! answer and make one object.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use bc_domain::model::ProviderAccount;
use bc_domain::ports::{AccountCredentials, ProviderImpl, ProviderRegistry, ProviderResult};
use serde_json::json;
use tokio::sync::Barrier;

use crate::common::{Harness, S, example, sim_config, test_settings};
use bc_api::methods::examples as ex;

bc_store::store_suite!(twin_creates_held_at_a_barrier_both_get_the_first_answer);

/// The real registry, whose first `held` openings wait for each other: the handlers
/// of twin creates open the cluster's account before they commit, so both are past the
/// `requestId` look-up when either commits.
struct HeldRegistry {
    inner: Arc<dyn ProviderRegistry>,
    barrier: Barrier,
    held: usize,
    calls: AtomicUsize,
}

#[async_trait]
impl ProviderRegistry for HeldRegistry {
    async fn provider_for(
        &self,
        account: &ProviderAccount,
    ) -> ProviderResult<Arc<dyn ProviderImpl>> {
        if self.calls.fetch_add(1, Ordering::SeqCst) < self.held {
            self.barrier.wait().await;
        }
        self.inner.provider_for(account).await
    }
    async fn provider_for_credentials(
        &self,
        credentials: &AccountCredentials,
    ) -> ProviderResult<Arc<dyn ProviderImpl>> {
        self.inner.provider_for_credentials(credentials).await
    }
}

async fn twin_creates_held_at_a_barrier_both_get_the_first_answer(s: S) {
    let h = Harness::with_providers(
        s,
        sim_config(),
        |inner| {
            Arc::new(HeldRegistry { inner, barrier: Barrier::new(2), held: 2, calls: 0.into() })
        },
        |api| api.settings(test_settings()),
    )
    .await;
    let token = h.operator().await;
    let list = json!({ "tenantId": ex::TENANT, "clusterId": ex::CLUSTER });
    let count = |v: serde_json::Value| v["kubernetesNodePools"].as_array().map_or(0, Vec::len);
    let before = count(h.call("kubernetesNodePools.list", Some(&token), &list).await.ok());
    let body = example("kubernetesNodePools.create");
    let (a, b) = tokio::join!(
        h.call("kubernetesNodePools.create", Some(&token), &body),
        h.call("kubernetesNodePools.create", Some(&token), &body),
    );
    let (a, b) = (a.ok(), b.ok());
    assert_eq!(a, b, "both twins answer as the first did");
    let after = h.call("kubernetesNodePools.list", Some(&token), &list).await.ok();
    assert_eq!(count(after), before + 1, "one node pool");
}
