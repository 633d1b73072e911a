//! The account's provider budget counts requests, not port calls (issue 28 item 12): a
//! listing the adapter reads in three pages spends three calls — DigitalOcean limits
//! requests per token, GKE per project — through the real DigitalOcean adapter against
//! the simulator.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bc_domain::model::SecretString;
use bc_domain::ports::{Clock, ProviderImpl, ProviderResult};
use bc_domain::{ProviderAccountId, Timestamp};
use bc_providers::digitalocean::{DigitalOcean, DigitalOceanConfig};
use bc_reconcile::{Budget, BudgetedProvider};
use bc_sim::model::routes;
use bc_sim::testing::{Cloud, TEST_TOKEN, create_cluster, node_pool};

/// A budget that grants every call and counts them.
#[derive(Default)]
struct Counting(AtomicU64);

#[async_trait]
impl Budget for Counting {
    async fn acquire(&self, _: &ProviderAccountId, _: Timestamp) -> ProviderResult<()> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    async fn pause(&self, _: &ProviderAccountId, _: Timestamp) -> ProviderResult<()> {
        Ok(())
    }
    async fn peek(&self, _: &ProviderAccountId, _: Timestamp) -> ProviderResult<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_listing_of_three_pages_spends_three_calls_of_the_budget() {
    let cloud = Cloud::start().await;
    for name in ["a", "b", "c"] {
        create_cluster(&cloud.sim, name, vec![node_pool("p", 1, &[])]);
    }
    // One cluster a page.
    let config = DigitalOceanConfig { per_page: 1, ..cloud.adapter_config() };
    let clock: Arc<dyn Clock> = cloud.clock.clone();
    let token = SecretString::new(TEST_TOKEN);
    let adapter = DigitalOcean::new(config, &token, clock.clone()).expect("adapter");
    let budget = Arc::new(Counting::default());
    let account = ProviderAccountId::generate(1, 1);
    let p = BudgetedProvider::new(Arc::new(adapter), budget.clone(), account, clock);
    let before = cloud.count("GET", routes::CLUSTERS);
    let listed = p.kubernetes().list_clusters().await.expect("listed");
    assert_eq!(listed.len(), 3);
    let pages = cloud.count("GET", routes::CLUSTERS) - before;
    assert_eq!(pages, 3, "one cluster a page");
    assert_eq!(budget.0.load(Ordering::SeqCst), pages, "one call of the budget per request");
}
