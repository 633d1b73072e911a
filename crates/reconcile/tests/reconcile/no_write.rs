//! With `mockall`, where a call count is the point: reconciling a ready load balancer
//! again makes no provider write — two activations cost one shared list call and
//! nothing else.

use std::sync::Arc;

use async_trait::async_trait;
use bc_domain::ResourceState;
use bc_domain::model::ProviderAccount;
use bc_domain::ports::{
    AccountCredentials, LoadBalancerProvider, LoadBalancerRequest, ProviderImpl,
    ProviderLoadBalancer, ProviderRegistry, ProviderResult, WorkKind,
};
use bc_reconcile::Forward;
use bc_reconcile::runtime::ActivationResult;
use bc_reconcile::testing::Halves;
use mockall::mock;

use crate::common::Env;

mock! {
    Lbs {}
    #[async_trait]
    impl LoadBalancerProvider for Lbs {
        async fn list(&self) -> ProviderResult<Vec<ProviderLoadBalancer>>;
        async fn get(&self, id: &str) -> ProviderResult<ProviderLoadBalancer>;
        async fn create(&self, req: &LoadBalancerRequest) -> ProviderResult<ProviderLoadBalancer>;
        async fn update(&self, id: &str, req: &LoadBalancerRequest) -> ProviderResult<ProviderLoadBalancer>;
        async fn delete(&self, id: &str) -> ProviderResult<()>;
    }
}

/// An account whose load balancer half is the mock; its Kubernetes half is the
/// DigitalOcean adapter on the simulator (never called here).
struct OneAccount(Arc<Halves>);

#[async_trait]
impl ProviderRegistry for OneAccount {
    async fn provider_for(&self, _: &ProviderAccount) -> ProviderResult<Arc<dyn ProviderImpl>> {
        Ok(self.0.clone())
    }
    async fn provider_for_credentials(
        &self,
        _: &AccountCredentials,
    ) -> ProviderResult<Arc<dyn ProviderImpl>> {
        Ok(self.0.clone())
    }
}

#[tokio::test]
async fn reconciling_a_ready_load_balancer_again_makes_no_provider_write() {
    let env = Env::start().await;
    let id = env.create_lb("web").await.load_balancer_id;
    env.stepper(env.runtime("r1", env.deps())).run_until_idle(100).await.unwrap();
    assert_eq!(env.lb(&id).await.status.state, ResourceState::Ready);
    let listed = env.provider().load_balancers().list().await.unwrap();

    // A fresh replica whose provider is the mock: it may list once, and must not write.
    let mut lbs = MockLbs::new();
    lbs.expect_list().times(1).returning(move || Ok(listed.clone()));
    lbs.expect_get().times(0);
    lbs.expect_create().times(0);
    lbs.expect_update().times(0);
    lbs.expect_delete().times(0);
    let real = env.provider();
    let registry = Arc::new(OneAccount(Halves::provider(real.offer(), Forward::plain(real), lbs)));
    let runtime = env.runtime("r2", env.deps_with(registry.clone(), env.budget()));
    let stepper = env.stepper(runtime);
    for _ in 0..2 {
        let e = bc_domain::ports::Enqueue {
            kind: WorkKind::ProviderResources,
            key: id.to_string(),
            not_before: env.now(),
        };
        bc_domain::ports::WorkQueue::enqueue(env.store.as_ref(), e).await.unwrap();
        let reports = stepper.round().await.unwrap();
        assert!(matches!(reports[0].result, ActivationResult::Steady { .. }), "{reports:?}");
        env.advance(1);
    }
    assert_eq!(env.lb(&id).await.status.state, ResourceState::Ready);
    // The expectations are checked when the mock drops: make it drop here.
    drop(stepper);
    let mocked = Arc::try_unwrap(registry).ok().expect("only the test holds the registry now");
    drop(mocked);
}
