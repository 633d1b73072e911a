//! Leases and provider calls (DESIGN "Reconcilers", SPEC §13: replicas share the work
//! queue by leases): an activation whose lease ran out — its renewals failing while
//! another replica took the item — makes no further provider call; the fence is
//! checked before each provider mutation, not only at the commit after it.

use bc_domain::policy::Scale;
use bc_domain::ports::{Clock, WorkKind, WorkQueue};
use bc_reconcile::on_each_provider;
use bc_reconcile::testing::{Call, Env, OnProvider};
use bc_reconcile::{Activation, ReconcileError, reconciler_of};

on_each_provider!(
    an_activation_that_lost_its_lease_makes_no_provider_call,
    a_replica_that_claims_an_item_again_fences_off_its_own_earlier_activation,
);

async fn an_activation_that_lost_its_lease_makes_no_provider_call(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (_, rows, _) = env.ready_cluster("alpha").await;
    let np = rows[0].node_pool_id.clone();
    env.change_node_pool(&np, Some(Scale::Count(2)), false).await;
    // Replica 1 claims the resize; its renewals fail (a store outage on its side), the
    // lease runs out, and replica 2 takes the item over.
    let now = env.clock.now();
    let lease = time::Duration::seconds(30);
    let claimed =
        env.store.claim("replica-1", &[WorkKind::NodePools], 1, now, now + lease).await.unwrap();
    let item = claimed.into_iter().next().expect("the resize is due");
    env.clock.advance(lease + time::Duration::seconds(1));
    let later = env.clock.now();
    let taken = env
        .store
        .claim("replica-2", &[WorkKind::NodePools], 1, later, later + lease)
        .await
        .unwrap();
    assert_eq!(taken.len(), 1, "replica 2 holds the item now");
    // Replica 1's activation goes on, unaware.
    let puts = env.calls(Call::UpdateNodePool);
    let activation = Activation { fence: item.fence().unwrap(), item, now: later };
    let reconciler = reconciler_of(WorkKind::NodePools, env.entropy.clone());
    let r = reconciler.reconcile(&env.deps, &activation).await;
    assert!(matches!(r, Err(ReconcileError::LeaseLost)), "{r:?}");
    assert_eq!(env.calls(Call::UpdateNodePool), puts, "no provider call without the lease");
}

/// One replica can lose an item and take it again: its renewals fail for longer than the
/// lease while its first activation still runs, and its next claim takes the item back.
/// The lease epoch (bumped on every claim) fences the first activation off like any
/// other holder: it makes no provider call and commits nothing after the re-claim.
async fn a_replica_that_claims_an_item_again_fences_off_its_own_earlier_activation(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (_, rows, _) = env.ready_cluster("alpha").await;
    let np = rows[0].node_pool_id.clone();
    env.change_node_pool(&np, Some(Scale::Count(2)), false).await;
    let runtime = bc_reconcile::testing::kubernetes_runtime(&env.deps, &env.entropy);
    let first = runtime.claim(WorkKind::NodePools, 1).await.unwrap();
    let first = first.into_iter().next().expect("the resize is due");
    // The first activation stalls; its renewals fail past the lease; the same replica
    // claims the item again.
    let lease = time::Duration::seconds(31);
    env.clock.advance(lease);
    let again = runtime.claim(WorkKind::NodePools, 1).await.unwrap();
    assert_eq!(again.len(), 1, "the same replica holds the item again");
    let puts = env.calls(Call::UpdateNodePool);
    let stale = Activation { fence: first.fence().unwrap(), item: first, now: env.clock.now() };
    let reconciler = reconciler_of(WorkKind::NodePools, env.entropy.clone());
    let r = reconciler.reconcile(&env.deps, &stale).await;
    assert!(matches!(r, Err(ReconcileError::LeaseLost)), "{r:?}");
    assert_eq!(env.calls(Call::UpdateNodePool), puts, "no provider call from the stale run");
    // The current claim goes on.
    let current = again.into_iter().next().unwrap();
    let fresh = Activation { fence: current.fence().unwrap(), item: current, now: env.clock.now() };
    let r = reconciler.reconcile(&env.deps, &fresh).await;
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(env.calls(Call::UpdateNodePool), puts + 1, "the current run resizes");
}
