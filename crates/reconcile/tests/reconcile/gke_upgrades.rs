//! Upgrades where the provider versions each node pool apart from the control plane
//! (GKE) and where the nodes follow the control plane (DigitalOcean), one body on each:
//! the control plane first, then every pool, one operation at a time; an operation in
//! flight is `updating` with a message, never `error`; a lost answer starts no second
//! operation. Stepped on a manual clock against the simulator through the real adapters.

use std::cell::RefCell;

use bc_domain::model::ClusterMode;
use bc_domain::policy::Scale;
use bc_domain::ports::ProviderCluster;
use bc_domain::{ClusterId, ResourceState};
use bc_reconcile::on_each_provider;
use bc_reconcile::testing::{Call, Env, OnProvider, flavor, with_version};

on_each_provider!(
    a_tenant_cluster_upgrade_ends_with_the_control_plane_and_every_pool_at_the_new_version,
    a_substrate_drain_upgrade_ends_with_the_control_plane_and_every_pool_at_the_new_version,
    a_lost_answer_of_a_pool_upgrade_starts_no_second_operation,
);

/// Whether the provider's cluster runs `version`: its control plane and every pool (a
/// pool that follows the control plane shows no version of its own).
fn all_at(pc: &ProviderCluster, version: &str) -> bool {
    pc.version == version
        && pc.node_pools.iter().all(|p| p.version.as_deref().is_none_or(|v| v == version))
}

async fn provider_cluster(env: &Env, pid: &str) -> ProviderCluster {
    env.provider().kubernetes().get_cluster(pid).await.expect("the provider's cluster")
}

/// The states (and messages) a row went through, as a run saw them.
type Seen = RefCell<Vec<(ResourceState, Option<String>)>>;

/// Never `error`, and `updating` with a message naming the upgrade at some point.
fn updating_never_error(seen: Seen) {
    let seen = seen.into_inner();
    assert!(!seen.iter().any(|(s, _)| *s == ResourceState::Error), "{seen:?}");
    assert!(
        seen.iter().any(|(s, m)| *s == ResourceState::Updating
            && m.as_deref().is_some_and(|m| m.contains("upgrad"))),
        "{seen:?}"
    );
}

/// A standard tenant cluster whose pools `pools` run the provider's older test version,
/// stepped until ready: its id and provider id.
async fn cluster_at_old(env: &Env, pools: &[&str]) -> (ClusterId, String) {
    let (old, _) = env.on.versions();
    let size = env.on.node_size();
    let pools = pools.iter().map(|n| (*n, size, Scale::Count(1))).collect();
    let (c, _) = env.create_cluster("alpha", ClusterMode::Standard, pools).await;
    // Pinned before the first run, as the API's create stores it.
    env.change_cluster(&c.cluster_id, Some(old), None, false).await;
    let ready = env
        .run_until(40, async |e: &Env| {
            e.cluster(&c.cluster_id).await.status.state == ResourceState::Ready
        })
        .await;
    let row = env.cluster(&c.cluster_id).await;
    assert!(ready, "{row:?}");
    let pid = row.provider_cluster_id.expect("made at the provider");
    assert!(all_at(&provider_cluster(env, &pid).await, old));
    (c.cluster_id, pid)
}

/// Asks for `version` and steps until the row is `ready` at it, recording what it showed.
async fn upgrade_tenant_cluster(env: &Env, id: &ClusterId, version: &str) -> Seen {
    env.change_cluster(id, Some(version), None, false).await;
    let seen = Seen::default();
    let done = env
        .run_until(60, async |e: &Env| {
            let c = e.cluster(id).await;
            seen.borrow_mut().push((c.status.state, c.status.message.clone()));
            c.status.state == ResourceState::Ready
                && c.version.as_deref() == Some(version)
                && c.status.observed_generation == c.generation
        })
        .await;
    assert!(done, "{:?}", env.cluster(id).await);
    seen
}

/// A tenant cluster of two pools upgraded: the control plane and both pools end at the
/// new version (on GKE each pool by its own operation after the control plane).
async fn a_tenant_cluster_upgrade_ends_with_the_control_plane_and_every_pool_at_the_new_version(
    on: OnProvider,
) {
    let env = Env::start_on(on).await;
    let (_, new) = on.versions();
    let (id, pid) = cluster_at_old(&env, &["workers", "batch"]).await;
    let seen = upgrade_tenant_cluster(&env, &id, new).await;
    let pc = provider_cluster(&env, &pid).await;
    assert!(all_at(&pc, new), "{pc:?}");
    assert_eq!(env.calls(Call::Upgrade), 1, "the control plane once");
    updating_never_error(seen);
}

/// A create-mode substrate of two flavors moved to the new version under `upgrades:
/// drain`: the control plane and both flavors' pools end at it, the drain marker gone.
async fn a_substrate_drain_upgrade_ends_with_the_control_plane_and_every_pool_at_the_new_version(
    on: OnProvider,
) {
    let env = Env::start_on(on).await;
    let (old, new) = on.versions();
    let size = on.node_size();
    let policy = env.create_policy(old, vec![flavor("cpu", size, 1), flavor("mem", size, 1)]);
    let pool = env.create_pool("web", policy.clone()).await;
    let s = env.until_substrate(&pool.pool_id, ResourceState::Ready, 40).await;
    let c = env.cluster(s.cluster_id.as_ref().expect("its cluster")).await;
    let pid = c.provider_cluster_id.expect("made at the provider");
    assert!(all_at(&provider_cluster(&env, &pid).await, old));

    env.update_policy(&pool.pool_id, with_version(&policy, new)).await;
    let seen = Seen::default();
    let done = env
        .run_until(60, async |e: &Env| {
            let s = e.substrate(&pool.pool_id).await;
            seen.borrow_mut().push((s.state, s.message.clone()));
            s.state == ResourceState::Ready && s.observed_generation == 2
        })
        .await;
    let s = env.substrate(&pool.pool_id).await;
    assert!(done, "{s:?}");
    let pc = provider_cluster(&env, &pid).await;
    assert!(all_at(&pc, new), "{pc:?}");
    assert_eq!(pc.node_pools.len(), 2, "{pc:?}");
    assert_eq!(s.upgrade, None, "the drain ends with the upgrade");
    assert_eq!(env.calls(Call::Upgrade), 1, "the control plane once");
    updating_never_error(seen);
}

/// The answer of the call that upgrades the pool's nodes is lost (the operation runs):
/// the retried activation finds it in flight or done, and never asks again.
async fn a_lost_answer_of_a_pool_upgrade_starts_no_second_operation(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (_, new) = on.versions();
    let (id, pid) = cluster_at_old(&env, &["workers"]).await;
    env.lose(Call::UpgradeNodePool, 1);
    let seen = upgrade_tenant_cluster(&env, &id, new).await;
    let pc = provider_cluster(&env, &pid).await;
    assert!(all_at(&pc, new), "{pc:?}");
    assert_eq!(env.calls(Call::UpgradeNodePool), 1, "one operation, its answer lost");
    updating_never_error(seen);
}
