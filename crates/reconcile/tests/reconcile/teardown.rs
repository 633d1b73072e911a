//! Teardown (SPEC §6): what archiving a pool removes, what it leaves, and how it shows a
//! teardown that cannot go on — stepped on a manual clock against the simulator.

use std::time::Duration;

use bc_domain::ResourceState;
use bc_domain::name::substrate_namespace;
use bc_domain::ports::{Clock, ObjectKind, Preconditions};
use bc_reconcile::on_each_provider;
use bc_reconcile::testing::{Call, Env, OnProvider};
use bc_sim::kube::Resource;

on_each_provider!(
    a_blocked_teardown_stays_in_one_state_with_one_event_per_cause,
    archiving_right_after_a_lost_re_create_leaves_no_cluster_behind,
    adopt_mode_teardown_waits_for_an_unreachable_cluster_and_leaves_nothing_behind,
    a_teardown_refused_again_and_again_is_one_error_event,
);

/// Longer than any wait a reconciler asks for.
const STEP: Duration = Duration::from_secs(600);

async fn a_blocked_teardown_stays_in_one_state_with_one_event_per_cause(on: OnProvider) {
    let env = Env::start_on(on).await;
    let pid = env.their_cluster().await;
    let pool = env.adopting_pool(&pid).await;
    let kid = env.kube_id(&pid);
    // The tenant puts a Secret of their own where ours was: deleting our Namespace would
    // take it along, so teardown stops there.
    env.tenant_replaces_the_join_secret(&pid, &pool.pool_id);
    let ns = substrate_namespace(&pool.pool_id);
    let kube = &env.sim.state().kube;
    env.archive(&pool.pool_id).await;
    let blocked = env.until_substrate(&pool.pool_id, ResourceState::Error, 20).await;
    let before = env.substrate_events(&pool.pool_id).await;
    for _ in 0..10 {
        env.step(STEP).await;
        let s = env.substrate(&pool.pool_id).await;
        assert_eq!((s.state, &s.message), (blocked.state, &blocked.message), "no flapping");
    }
    assert_eq!(
        env.substrate_events(&pool.pool_id).await,
        before,
        "no event while the cause stands"
    );
    let tail: Vec<&str> = before.iter().rev().take(2).rev().map(String::as_str).collect();
    assert_eq!(tail, ["kubernetes.substrate.deleting", "kubernetes.substrate.error"]);

    // The cause goes: teardown goes on, through deleting, to deleted.
    kube.delete(
        &kid,
        Resource::Secret,
        Some(&ns),
        "bcd-join",
        &Preconditions::default(),
        env.clock.now(),
    )
    .unwrap();
    env.until_substrate(&pool.pool_id, ResourceState::Deleted, 20).await;
    let after = env.substrate_events(&pool.pool_id).await;
    assert_eq!(
        &after[before.len()..],
        ["kubernetes.substrate.deleting", "kubernetes.substrate.deleted"],
        "{after:?}"
    );
    assert!(env.sim.state().kube.get_object(&kid, ObjectKind::Namespace, None, &ns).is_none());
}

/// The tenant's cluster is being upgraded by the provider (DigitalOcean's `upgrading`,
/// GKE's `RECONCILING` under its auto-upgrade) when the pool is archived: teardown waits,
/// removing nothing, then removes what is ours and only that.
async fn adopt_mode_teardown_waits_for_an_unreachable_cluster_and_leaves_nothing_behind(
    on: OnProvider,
) {
    let env = Env::start_on(on).await;
    let pid = env.their_cluster().await;
    let pool = env.adopting_pool(&pid).await;
    let kid = env.kube_id(&pid);
    let ns = substrate_namespace(&pool.pool_id);
    let ours = |env: &Env| {
        let kube = &env.sim.state().kube;
        [
            kube.get_object(&kid, ObjectKind::Namespace, None, &ns),
            kube.get_object(&kid, ObjectKind::DaemonSet, Some(&ns), "bcd"),
            kube.get_object(&kid, ObjectKind::Secret, Some(&ns), "bcd-join"),
        ]
        .iter()
        .filter(|o| o.is_some())
        .count()
    };
    let pools = |env: &Env| {
        let c = env.sim.state().model().find_cluster(&kid, env.clock.now()).unwrap();
        c.node_pools.into_iter().map(|p| p.name).collect::<Vec<_>>()
    };
    assert_eq!(ours(&env), 3);
    let upgrading = bc_sim::model::kubernetes::ClusterState::Upgrading;
    assert!(on.force_cluster_state(&env.sim, &pid, upgrading, ""));
    env.archive(&pool.pool_id).await;
    for _ in 0..5 {
        env.step(STEP).await;
    }
    let s = env.substrate(&pool.pool_id).await;
    assert_eq!(s.state, ResourceState::Deleting, "it waits: {s:?}");
    assert!(s.message.as_deref().unwrap_or_default().contains("waiting for cluster"), "{s:?}");
    assert_eq!(ours(&env), 3, "nothing of ours removed yet, nothing forgotten");
    assert_eq!(pools(&env).len(), 2, "our node pool stays while our objects do: they run on it");

    let running = bc_sim::model::kubernetes::ClusterState::Running;
    assert!(on.force_cluster_state(&env.sim, &pid, running, ""));
    env.until_substrate(&pool.pool_id, ResourceState::Deleted, 20).await;
    assert_eq!(ours(&env), 0, "our objects are gone");
    assert_eq!(pools(&env), ["own"], "only the tenant's pool stays");
}

/// A created cluster deleted behind our back is made again, but the answer of that
/// re-create is lost, and the pool is archived right then: the row still holds the old
/// (gone) provider id, yet teardown finds the new cluster by its derived name and the
/// pool's tag and deletes it — nothing of the pool is left billing.
async fn archiving_right_after_a_lost_re_create_leaves_no_cluster_behind(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (pool, _, _) = env.creating_pool("latest", 1).await;
    let provider = env.provider();
    let old = provider.kubernetes().list_clusters().await.unwrap()[0].id.clone();
    provider.kubernetes().delete_cluster(&old).await.expect("deleted behind our back");
    env.lose(Call::CreateCluster, 1);
    env.driver_wake(&pool.pool_id).await;
    // Stepped until the re-create is sent (the provider first shows the old cluster
    // deleting), and not one step further.
    let sent = env.run_until(20, async |e: &Env| e.calls(Call::CreateCluster) == 2).await;
    assert!(sent, "the re-create was sent");
    let made = provider.kubernetes().list_clusters().await.unwrap();
    assert_eq!(made.len(), 1, "made again, its answer lost: {made:?}");

    env.archive(&pool.pool_id).await;
    env.until_substrate(&pool.pool_id, ResourceState::Deleted, 40).await;
    let left = provider.kubernetes().list_clusters().await.unwrap();
    assert!(left.is_empty(), "no cluster of the pool is left: {left:?}");
}

/// A teardown the provider keeps refusing (DigitalOcean's message carries a new request
/// id on every answer; GKE's 403 PERMISSION_DENIED answers each delete alike) is one
/// cause — one `error` event, however many retries.
async fn a_teardown_refused_again_and_again_is_one_error_event(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (pool, _, _) = env.creating_pool("latest", 1).await;
    on.refuse(&env.sim, Call::DeleteCluster, "cluster is locked");
    env.archive(&pool.pool_id).await;
    let s = env.until_substrate(&pool.pool_id, ResourceState::Error, 20).await;
    assert!(s.message.as_deref().unwrap_or_default().contains("cluster is locked"), "{s:?}");
    for _ in 0..6 {
        env.step(STEP).await;
    }
    assert!(env.calls(Call::DeleteCluster) >= 3, "asked again");
    let events = env.substrate_events(&pool.pool_id).await;
    let errors = events.iter().filter(|k| *k == "kubernetes.substrate.error").count();
    assert_eq!(errors, 1, "{events:?}");
    on.lift_refusal(&env.sim, Call::DeleteCluster);
    env.until_substrate(&pool.pool_id, ResourceState::Deleted, 20).await;
}
