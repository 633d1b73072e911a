//! A converged substrate re-derives everything on its next activation and writes
//! nothing: no provider write, no cluster write, no store write. The provider and the
//! cluster are `mockall` mocks that answer the reads with what the simulator showed a
//! moment before and have no expectation for any write, so a write fails the test.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bc_domain::model::{ProviderAccount, SecretString};
use bc_domain::name::LABEL_SUBSTRATE_POOL;
use bc_domain::ports::*;
use bc_domain::{ProviderError, Timestamp};
use bc_reconcile::on_each_provider;
use bc_reconcile::substrates::SubstrateReconciler;
use bc_reconcile::substrates::objects;
use bc_reconcile::testing::{Env, Halves, OnProvider, SeqEntropy};
use bc_reconcile::{Activation, Deps, Listing, Observer, Outcome, Reconciler};
use mockall::mock;

mock! {
    pub Kube {}
    #[async_trait]
    impl KubernetesProvider for Kube {
        async fn list_clusters(&self) -> ProviderResult<Vec<ProviderCluster>>;
        async fn get_cluster(&self, id: &str) -> ProviderResult<ProviderCluster>;
        async fn create_cluster(&self, req: &CreateClusterRequest) -> ProviderResult<ProviderCluster>;
        async fn update_cluster(&self, id: &str, req: &UpdateClusterRequest) -> ProviderResult<ProviderCluster>;
        async fn delete_cluster(&self, id: &str) -> ProviderResult<()>;
        async fn associated_resources(&self, id: &str) -> ProviderResult<AssociatedResources>;
        async fn delete_cluster_selective(&self, id: &str, load_balancer_ids: &[String]) -> ProviderResult<()>;
        async fn list_node_pools(&self, cluster_id: &str) -> ProviderResult<Vec<ProviderNodePool>>;
        async fn get_node_pool(&self, cluster_id: &str, node_pool_id: &str) -> ProviderResult<ProviderNodePool>;
        async fn create_node_pool(&self, cluster_id: &str, req: &NodePoolRequest) -> ProviderResult<ProviderNodePool>;
        async fn update_node_pool(&self, cluster_id: &str, node_pool_id: &str, req: &NodePoolRequest) -> ProviderResult<ProviderNodePool>;
        async fn delete_node_pool(&self, cluster_id: &str, node_pool_id: &str) -> ProviderResult<()>;
        async fn delete_node(&self, cluster_id: &str, node_pool_id: &str, node_id: &str, skip_drain: bool, replace: bool) -> ProviderResult<()>;
        async fn available_upgrades(&self, cluster_id: &str) -> ProviderResult<Vec<KubernetesVersion>>;
        async fn upgrade_cluster(&self, cluster_id: &str, version: &str) -> ProviderResult<()>;
        async fn options(&self) -> ProviderResult<ProviderOptions>;
        async fn credentials(&self, cluster_id: &str) -> ProviderResult<ClusterCredentials>;
        fn credentials_due(&self, expires_at: Timestamp) -> bool;
        fn invalidate_credentials(&self, cluster_id: &str);
    }
}

mock! {
    pub Balancers {}
    #[async_trait]
    impl LoadBalancerProvider for Balancers {
        async fn list(&self) -> ProviderResult<Vec<ProviderLoadBalancer>>;
        async fn get(&self, id: &str) -> ProviderResult<ProviderLoadBalancer>;
        async fn create(&self, req: &LoadBalancerRequest) -> ProviderResult<ProviderLoadBalancer>;
        async fn update(&self, id: &str, req: &LoadBalancerRequest) -> ProviderResult<ProviderLoadBalancer>;
        async fn delete(&self, id: &str) -> ProviderResult<()>;
    }
}

mock! {
    pub Ops {}
    #[async_trait]
    impl ClusterOps for Ops {
        async fn read(&self, object: &ObjectRef) -> Result<ObjectMeta, ObjectError>;
        async fn create(&self, object: &KubeObject) -> Result<(), ObjectError>;
        async fn apply(&self, object: &KubeObject, force: bool) -> Result<(), ObjectError>;
        async fn delete(&self, object: &ObjectRef, preconditions: &Preconditions) -> Result<(), ObjectError>;
        async fn list_nodes(&self, label_selector: &str) -> Result<Vec<ClusterNode>, ClusterError>;
        async fn list_namespace(&self, namespace: &str) -> Result<Vec<bc_domain::ports::NamespacedObject>, ClusterError>;
        async fn list_provider_backed(&self) -> Result<ProviderBacked, ClusterError>;
        async fn review_token(&self, token: &SecretString, audiences: &[String]) -> Result<bc_domain::ports::TokenReview, ClusterError>;
    }
}

mock! {
    pub Obs {}
    #[async_trait]
    impl Observer for Obs {
        async fn provider(&self, account: &ProviderAccount) -> Result<Arc<dyn ProviderImpl>, ProviderError>;
        async fn clusters(&self, account: &ProviderAccount, max_age: Duration) -> Result<Arc<Listing<ProviderCluster>>, ProviderError>;
        async fn load_balancers(&self, account: &ProviderAccount, max_age: Duration) -> Result<Arc<Listing<ProviderLoadBalancer>>, ProviderError>;
        fn invalidate(&self, account: &ProviderAccount);
    }
}

/// A cluster API that connects to the mocked operations.
struct MockedApi(Arc<MockOps>);

#[async_trait]
impl ClusterApi for MockedApi {
    async fn connect(
        &self,
        _kubeconfig: &SecretString,
    ) -> Result<Arc<dyn ClusterClient>, ClusterError> {
        Ok(self.0.clone())
    }
}

on_each_provider!(a_second_reconcile_of_a_ready_substrate_makes_no_provider_cluster_or_store_write);

async fn a_second_reconcile_of_a_ready_substrate_makes_no_provider_cluster_or_store_write(
    on: OnProvider,
) {
    let env = Env::start_on(on).await;
    let (pool, _, s) = env.creating_pool("latest", 2).await;
    let cluster = env.store.cluster_get_any(s.cluster_id.as_ref().unwrap()).await.unwrap().unwrap();
    let pid = cluster.provider_cluster_id.clone().unwrap();

    // What the simulator shows now: the reads the mocks will answer with.
    let provider = env.provider();
    let real = provider.kubernetes();
    let listing = real.list_clusters().await.unwrap();
    let creds = real.credentials(&pid).await.unwrap();
    let offered = real.available_upgrades(&pid).await.unwrap();
    let client = env.deps.clusters.connect(&creds.kubeconfig).await.unwrap();
    let mut metas = BTreeMap::new();
    for kind in objects::APPLY_ORDER {
        let r = objects::object_ref(&pool.pool_id, kind);
        metas.insert(r.to_string(), client.read_object(&r).await.unwrap().unwrap());
    }
    let selector = format!("{LABEL_SUBSTRATE_POOL}={}", pool.pool_id);
    let nodes = client.list_nodes(&selector).await.unwrap();

    let mut kube = MockKube::new();
    kube.expect_credentials().times(1).returning(move |_| Ok(creds.clone()));
    kube.expect_credentials_due().returning(|_| false);
    kube.expect_available_upgrades().times(..=1).returning(move |_| Ok(offered.clone()));
    kube.expect_get_cluster().never();
    kube.expect_create_cluster().never();
    kube.expect_update_cluster().never();
    kube.expect_delete_cluster().never();
    kube.expect_delete_cluster_selective().never();
    kube.expect_create_node_pool().never();
    kube.expect_update_node_pool().never();
    kube.expect_delete_node_pool().never();
    kube.expect_upgrade_cluster().never();
    let provider: Arc<dyn ProviderImpl> =
        Halves::provider(env.provider().offer(), kube, MockBalancers::new());
    let mut observer = MockObs::new();
    observer.expect_provider().returning(move |_| Ok(provider.clone()));
    let shared = Arc::new(Listing::new(listing, env.deps.clock.now()));
    observer.expect_clusters().times(1).returning(move |_, _| Ok(shared.clone()));
    observer.expect_invalidate().never();
    let mut ops = MockOps::new();
    ops.expect_read().times(4).returning(move |r| Ok(metas[&r.to_string()].clone()));
    ops.expect_list_nodes()
        .times(1)
        .withf(move |s| s == selector)
        .returning(move |_| Ok(nodes.clone()));
    ops.expect_create().never();
    ops.expect_apply().never();
    ops.expect_delete().never();

    let deps = Deps {
        observer: Arc::new(observer),
        clusters: Arc::new(MockedApi(Arc::new(ops))),
        ..env.deps.clone()
    };
    let events_before = env.store.event_list(&env.tenant, None, 0, 1000).await.unwrap().len();
    let claimed = env
        .store
        .claim(
            "steady",
            &[WorkKind::Substrates],
            1,
            env.deps.clock.now() + time::Duration::hours(1),
            env.deps.clock.now() + time::Duration::hours(2),
        )
        .await
        .unwrap();
    let item = claimed.into_iter().next().expect("the substrate's item");
    let act = Activation { fence: item.fence().unwrap(), item, now: env.deps.clock.now() };
    let reconciler = SubstrateReconciler::new(Arc::new(SeqEntropy::default()));
    let outcome = reconciler.reconcile(&deps, &act).await.unwrap();
    assert_eq!(outcome, Outcome::Steady);
    assert_eq!(env.substrate(&pool.pool_id).await, s, "the substrate row is unchanged");
    let events_after = env.store.event_list(&env.tenant, None, 0, 1000).await.unwrap().len();
    assert_eq!(events_after, events_before, "no event");
}

/// The budgeted provider asks its adapter whether credentials are due: the hand-written
/// forwarder answered the trait's default (`false`) instead, so credentials handed out
/// through the budget (GKE's access tokens) were renewed only once a cluster refused them.
#[tokio::test]
async fn the_budgeted_provider_asks_its_adapter_whether_credentials_are_due() {
    let env = Env::start().await;
    let mut kube = MockKube::new();
    kube.expect_credentials_due().times(1).returning(|_| true);
    let inner: Arc<dyn ProviderImpl> =
        Halves::provider(env.provider().offer(), kube, MockBalancers::new());
    let budget = Arc::new(bc_reconcile::LocalBudget::new(Default::default()));
    let account = env.account.provider_account_id.clone();
    let budgeted = bc_reconcile::BudgetedProvider::new(inner, budget, account, env.clock.clone());
    assert!(budgeted.kubernetes().credentials_due(env.clock.now()));
}
