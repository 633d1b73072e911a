//! Upgrades (SPEC §6, §7): what the provider offers a running version is asked at most
//! once an hour per account and version — unless the desired version changes, which
//! asks again. Stepped on a manual clock against the simulator.

use bc_domain::ResourceState;
use bc_reconcile::on_each_provider;
use bc_reconcile::testing::{Call, Env, OnProvider, with_version};

on_each_provider!(a_new_desired_version_asks_the_provider_again_whatever_was_asked_before);

async fn a_new_desired_version_asks_the_provider_again_whatever_was_asked_before(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (old, new) = on.versions();
    let (pool, policy, _) = env.creating_pool(old, 1).await;
    let asked = || env.calls(Call::Upgrades);
    let before = asked();
    // A version the provider does not offer this cluster: an error, asked once.
    env.update_policy(&pool.pool_id, with_version(&policy, on.unknown_version())).await;
    let s = env.until_substrate(&pool.pool_id, ResourceState::Error, 10).await;
    assert!(s.message.as_deref().unwrap_or_default().contains(on.unknown_version()), "{s:?}");
    assert_eq!(asked(), before + 1);
    // Within the hour the tenant names another version: the provider is asked again
    // (what it offers may have changed since), and the upgrade goes on.
    env.update_policy(&pool.pool_id, with_version(&policy, new)).await;
    let done = env
        .run_until(30, async |e: &Env| {
            let s = e.substrate(&pool.pool_id).await;
            s.state == ResourceState::Ready && s.observed_generation == 3
        })
        .await;
    assert!(done, "{:?}", env.substrate(&pool.pool_id).await);
    assert_eq!(asked(), before + 2, "asked again for the new desired version");
}
