//! `kubernetes.substrates` against the simulator through the production adapters and
//! the real SQLite store, stepped on a manual clock (no sleeps): create and adopt modes, ownership,
//! join tokens and accounting, flavor changes, upgrades, teardown.

use std::sync::Arc;
use std::time::Duration;

use bc_domain::model::{KubernetesCluster, Substrate};
use bc_domain::name::{LABEL_SUBSTRATE_POOL, substrate_namespace};
use bc_domain::policy::{ClusterPolicy, PoolPolicy, Taint, TaintEffect, UpgradePolicy};
use bc_domain::ports::*;
use bc_domain::rules::plan::substrate_tag_for;
use bc_domain::token::sha256_hex;
use bc_domain::{FlavorName, SubstrateNaming};
use bc_domain::{PoolId, ProviderError, ResourceState, StoreError};
use bc_reconcile::testing::{
    Call, Env, OnProvider, adopt_policy, flavor, with_flavors, with_version,
};
use bc_reconcile::{ProviderCall, on_each_provider};
use bc_sim::kube::Resource;
use bc_sim::testing::TEST_TOKEN;
use serde_json::{Value, json};

const STEP: Duration = Duration::from_secs(600);

/// The test account's DigitalOcean adapter (a new instance: its calls are counted), for
/// what only DigitalOcean offers here (load balancers, volumes).
fn digitalocean(env: &Env) -> Arc<impl KubernetesProvider + LoadBalancerProvider + use<>> {
    env.cloud.provider(TEST_TOKEN)
}

/// Provider cluster `pid` as the test account's adapter shows it.
async fn at_provider(env: &Env, pid: &str) -> ProviderResult<ProviderCluster> {
    env.provider().kubernetes().get_cluster(pid).await
}

async fn cluster_of(env: &Env, s: &Substrate) -> (KubernetesCluster, String) {
    let c = env
        .store
        .cluster_get_any(s.cluster_id.as_ref().expect("cluster id"))
        .await
        .unwrap()
        .unwrap();
    let pid = c.provider_cluster_id.clone().expect("provider id");
    (c, pid)
}

fn stored(
    env: &Env,
    cluster: &str,
    kind: ObjectKind,
    ns: Option<&str>,
    name: &str,
) -> Option<serde_json::Value> {
    env.sim.state().kube.get_object(&env.kube_id(cluster), kind, ns, name)
}

async fn steps(env: &Env, n: usize) {
    for _ in 0..n {
        env.step(STEP).await;
    }
}

on_each_provider!(
    create_mode_makes_the_cluster_pools_objects_and_nodes_join,
    substrates_without_taints_or_with_an_empty_valued_one_are_ready_and_write_nothing_at_steady_state,
    nodes_that_do_not_join_get_the_fifteen_minute_message_while_ready,
    a_drain_upgrade_waits_for_bookings_and_refuses_new_ones_meanwhile,
    an_immediate_upgrade_does_not_wait_for_bookings,
    adopt_mode_never_touches_a_foreign_bcd_daemonset_and_recovers_once_it_is_gone,
    adopt_mode_teardown_leaves_the_tenants_pools_and_nothing_of_ours,
    flavor_changes_add_resize_replace_and_remove_node_pools,
    a_resized_substrate_stays_ready_over_many_resyncs_and_records_no_event,
    the_join_token_rotates_when_the_secret_is_gone_or_altered_and_joined_nodes_stay,
    a_refused_node_pool_is_the_substrates_error_until_the_flavor_changes,
    throttling_and_server_errors_are_retried_never_shown_as_refusals,
    a_cluster_name_taken_by_someone_else_is_an_error_never_a_takeover,
    a_substrates_first_cluster_create_sends_no_listing,
    two_pools_share_an_adopted_cluster_and_leave_it_one_at_a_time,
    teardown_keeps_a_namespace_holding_a_foreign_object_until_it_is_removed,
    removing_the_substrate_from_the_policy_tears_it_down_and_it_can_come_back,
    an_adopted_cluster_that_is_gone_is_an_error_naming_it,
    a_flavor_removed_and_put_back_before_its_pool_is_gone_converges,
    a_standing_refusal_ends_a_drain_wait_and_bookings_are_taken_again,
    autoscaled_counts_are_left_to_the_provider,
);

/// A ready substrate whose pool was resized stays `ready` at steady state, resync after
/// resync, with no event: on GKE the steady path reads the shared cluster listing, which
/// once reported each pool's `initialNodeCount` (GKE has no current size) instead of its
/// Nodes, so the resized pool read as its first size and the substrate flipped between
/// `ready` and `updating` every few resyncs.
async fn a_resized_substrate_stays_ready_over_many_resyncs_and_records_no_event(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (pool, policy, _) = env.creating_pool("latest", 1).await;
    let two = with_flavors(&policy, vec![flavor("cpu", on.node_size(), 2)]);
    env.update_policy(&pool.pool_id, two).await;
    let resized = env
        .run_until(40, async |e: &Env| {
            let s = e.substrate(&pool.pool_id).await;
            s.state == ResourceState::Ready && s.observed_generation == 2 && s.nodes_joined == 2
        })
        .await;
    assert!(resized, "{:?}", env.substrate(&pool.pool_id).await);
    let events = env.event_kinds().await;
    let resizes = env.calls(Call::UpdateNodePool);
    for i in 0..12 {
        env.step(STEP).await;
        let s = env.substrate(&pool.pool_id).await;
        assert_eq!(
            (s.state, s.nodes_listed, s.message.clone()),
            (ResourceState::Ready, 2, None),
            "resync {i}: {s:?}"
        );
    }
    assert_eq!(env.event_kinds().await, events, "no event at steady state");
    assert_eq!(env.calls(Call::UpdateNodePool), resizes, "no resize at steady state");
}

async fn create_mode_makes_the_cluster_pools_objects_and_nodes_join(on: OnProvider) {
    let env = Env::start_on(on).await;
    let mut gpu = flavor("gpu", on.other_size(), 1);
    gpu.taints.push(Taint {
        key: "gpu".into(),
        value: "true".into(),
        effect: TaintEffect::NoSchedule,
    });
    gpu.labels.insert("team".into(), "ml".into());
    let policy = env.create_policy("latest", vec![flavor("cpu", on.node_size(), 2), gpu]);
    let pool = env.create_pool("web", policy).await;
    let s = env.until_substrate(&pool.pool_id, ResourceState::Ready, 40).await;
    assert_eq!(
        (s.nodes_listed, s.nodes_joined, s.waiting_to_join, s.message.clone()),
        (3, 3, None, None),
        "{s:?}"
    );
    let (cluster, pid) = cluster_of(&env, &s).await;
    // Names as the provider's offer allows (GKE: at most 40 characters, `bc-<d>`).
    let naming = SubstrateNaming::of(&env.provider().offer());
    let p = &pool.pool_id;
    assert_eq!(cluster.name, naming.cluster_name(p));
    assert!(cluster.name.as_str().len() <= env.provider().offer().name_max);
    assert_eq!(cluster.status.state, ResourceState::Ready);
    let [cpu, gpu] = ["cpu", "gpu"].map(|f| FlavorName::parse(f).unwrap());
    assert_eq!(
        env.pool_names(&pid).await,
        vec![naming.node_pool_name(p, &cpu), naming.node_pool_name(p, &gpu)]
    );
    let pc = env.provider().kubernetes().get_cluster(&pid).await.unwrap();
    // On GKE the tag is the label `better-compute-substrate-pool=<pool id>` (the adapter
    // reads a label back as `<key>-<value>`).
    assert_eq!(pc.tags, vec![substrate_tag_for(p, naming)]);
    if naming.gcp_labels {
        assert_eq!(pc.tags, vec![format!("better-compute-substrate-pool-{p}")]);
    }
    let gpu_pool = pc.node_pools.iter().find(|p| p.name.ends_with("-gpu")).unwrap();
    assert_eq!(gpu_pool.labels.get("team").map(String::as_str), Some("ml"));
    assert_eq!(gpu_pool.labels.get("better-compute.dev/flavor").map(String::as_str), Some("gpu"));
    let ns = substrate_namespace(&pool.pool_id);
    for (kind, nsref, name) in [
        (ObjectKind::Namespace, None, ns.as_str()),
        (ObjectKind::Secret, Some(ns.as_str()), "bcd-join"),
        (ObjectKind::ServiceAccount, Some(ns.as_str()), "bcd"),
        (ObjectKind::DaemonSet, Some(ns.as_str()), "bcd"),
    ] {
        let o = stored(&env, &pid, kind, nsref, name).unwrap_or_else(|| panic!("{kind:?} {name}"));
        assert_eq!(o["metadata"]["labels"][LABEL_SUBSTRATE_POOL], pool.pool_id.as_str());
        assert_eq!(o["metadata"]["labels"]["app.kubernetes.io/managed-by"], "better-compute");
    }
    let ds = stored(&env, &pid, ObjectKind::DaemonSet, Some(&ns), "bcd").unwrap();
    assert_eq!(
        ds["spec"]["template"]["spec"]["containers"][0]["image"],
        bc_reconcile::testing::BCD_IMAGE
    );
    assert_eq!(
        ds["spec"]["template"]["spec"]["tolerations"][0]["key"], "gpu",
        "tolerates the gpu taint: its node joined"
    );
    // As read back, the pod template passes the Pod Security Standards' `restricted`
    // profile (tenant clusters may enforce it), keeps a read-only root filesystem, runs
    // the image as built (its entrypoint, its non-root user) and asks small resources.
    let template = &ds["spec"]["template"];
    let violations =
        bc_sim::kube::pod_security::restricted(&template["metadata"], &template["spec"]);
    assert!(violations.is_empty(), "restricted profile: {violations:#?}");
    let bcd = &template["spec"]["containers"][0];
    assert_eq!(bcd["securityContext"]["readOnlyRootFilesystem"], true);
    assert!(bcd.get("command").is_none() && bcd.get("args").is_none(), "{bcd}");
    assert!(template["spec"]["securityContext"].get("runAsUser").is_none());
    assert_eq!(
        bcd["resources"],
        json!({"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}})
    );
    // Rows: one per flavor, managed by the pool, ready.
    let rows = env
        .store
        .node_pool_list_by_cluster(&cluster.cluster_id, &PageRequest::first(100))
        .await
        .unwrap()
        .items;
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r.managed_by.as_ref() == Some(&pool.pool_id)
        && r.state == bc_domain::NodePoolState::Ready
        && r.nodes_ready == r.nodes_listed));
    // The join token: only its hash is stored, and it is the one in the Secret.
    let token = env.join.calls()[0]["joinToken"].as_str().unwrap().to_owned();
    assert!(env.store.join_token_find(&sha256_hex(token.as_bytes())).await.unwrap().is_some());
    let kinds = env.event_kinds().await;
    for k in [
        "kubernetes.substrate.provisioning",
        "kubernetes.substrate.ready",
        "kubernetes.nodepool.ready",
        "kubernetes.cluster.ready",
    ] {
        assert!(kinds.iter().any(|x| x == k), "{k} missing in {kinds:?}");
    }
    let all =
        serde_json::to_string(&env.store.event_list(&env.tenant, None, 0, 1000).await.unwrap())
            .unwrap();
    assert!(!all.contains(&token), "no join token in events");
    let s2 = format!("{:?}", env.substrate(&pool.pool_id).await);
    assert!(!s2.contains(&token));
}

/// A real API server leaves out empty `omitempty` fields: the DaemonSet's
/// `tolerations: []` (no flavor has a taint) and a toleration's `value: ""` (a taint with
/// no value) never come back. Substrates in both cases still reach `ready`, and once there
/// make no write to their cluster's API (no create, update, patch, apply or delete) over a
/// simulated hour of resyncs.
async fn substrates_without_taints_or_with_an_empty_valued_one_are_ready_and_write_nothing_at_steady_state(
    on: OnProvider,
) {
    let env = Env::start_on(on).await;
    let mut tainted = flavor("gpu", on.node_size(), 1);
    tainted.taints.push(Taint {
        key: "gpu".into(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    });
    let plain = env.create_policy("latest", vec![flavor("cpu", on.node_size(), 1)]);
    let untainted = env.create_pool("plain", plain).await;
    let tainted = env.create_pool("tainted", env.create_policy("latest", vec![tainted])).await;
    let mut clusters = Vec::new();
    for pool in [&untainted, &tainted] {
        let s = env.until_substrate(&pool.pool_id, ResourceState::Ready, 40).await;
        assert_eq!((s.nodes_listed, s.nodes_joined), (1, 1), "{s:?}");
        let (_, pid) = cluster_of(&env, &s).await;
        // What the server answers carries neither field.
        let ns = substrate_namespace(&pool.pool_id);
        let ds = stored(&env, &pid, ObjectKind::DaemonSet, Some(&ns), "bcd").unwrap();
        let pod = &ds["spec"]["template"]["spec"];
        assert!(pod.get("tolerations").is_none_or(|t| t[0].get("value").is_none()), "{pod}");
        clusters.push((pool.pool_id.clone(), env.kube_id(&pid)));
    }
    let kube = &env.sim.state().kube;
    let before: Vec<_> = clusters.iter().map(|(_, c)| kube.write_counts(c)).collect();
    let end = env.clock.now() + time::Duration::hours(1);
    for _ in 0..100 {
        if env.clock.now() >= end {
            break;
        }
        env.step(STEP).await;
    }
    assert!(env.clock.now() >= end, "an hour went by");
    for ((pool, cluster), was) in clusters.iter().zip(before) {
        let s = env.substrate(pool).await;
        assert_eq!(s.state, ResourceState::Ready, "{s:?}");
        assert_eq!(kube.write_counts(cluster), was, "writes to cluster {cluster} at steady state");
    }
}

async fn nodes_that_do_not_join_get_the_fifteen_minute_message_while_ready(on: OnProvider) {
    let env = Env::start_on(on).await;
    env.join.answer(Some(503));
    let (pool, _, s) = env.creating_pool("latest", 2).await;
    let wait = s.waiting_to_join.expect("nodes wait to join");
    assert_eq!((s.nodes_listed, s.nodes_joined, wait.nodes), (2, 0, 2));
    assert_eq!(s.message, None, "no message before 15 minutes");
    let deadline = wait.since + time::Duration::minutes(15);
    while env.deps.clock.now() < deadline {
        env.step(STEP).await;
        let s = env.substrate(&pool.pool_id).await;
        assert_eq!(s.state, ResourceState::Ready);
        if env.deps.clock.now() < deadline {
            assert_eq!(s.message, None, "at {}", env.deps.clock.now());
        }
    }
    let reached =
        env.run_until(5, async |e: &Env| e.substrate(&pool.pool_id).await.message.is_some()).await;
    assert!(reached);
    let s = env.substrate(&pool.pool_id).await;
    assert_eq!(s.state, ResourceState::Ready, "the state stays ready");
    let m = s.message.unwrap();
    assert!(
        m.contains("2 nodes")
            && m.contains("bcd DaemonSet")
            && m.contains("public URL")
            && m.contains("bcd-join"),
        "{m}"
    );
    assert_eq!(
        s.waiting_to_join.unwrap().since,
        wait.since,
        "since does not move while nobody joins"
    );
    // The server answers again: the nodes join, the wait and the message go.
    env.join.answer(None);
    let done = env
        .run_until(10, async |e: &Env| e.substrate(&pool.pool_id).await.waiting_to_join.is_none())
        .await;
    assert!(done);
    let s = env.substrate(&pool.pool_id).await;
    assert_eq!((s.nodes_joined, s.message, s.state), (2, None, ResourceState::Ready));
}

async fn a_drain_upgrade_waits_for_bookings_and_refuses_new_ones_meanwhile(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (old, new) = on.versions();
    let (pool, policy, s) = env.creating_pool(old, 1).await;
    let (_, pid) = cluster_of(&env, &s).await;
    let b = env.booking(&pool.pool_id);
    env.store.commit(UnitOfWork::new().write(Write::InsertBooking(b.clone()))).await.unwrap();
    env.update_policy(&pool.pool_id, with_version(&policy, new)).await;
    let reached =
        env.run_until(5, async |e: &Env| e.substrate(&pool.pool_id).await.upgrade.is_some()).await;
    assert!(reached);
    let s = env.substrate(&pool.pool_id).await;
    assert_eq!(s.state, ResourceState::Updating);
    let wait = s.upgrade.clone().unwrap();
    assert_eq!(wait.version, new);
    assert!(s.message.as_deref().unwrap().contains("1 active booking"), "{s:?}");
    // New bookings are refused while the drain waits.
    let refused = env
        .store
        .commit(UnitOfWork::new().write(Write::InsertBooking(env.booking(&pool.pool_id))))
        .await;
    assert!(matches!(&refused, Err(StoreError::Conflict(m)) if m.contains(new)), "{refused:?}");
    steps(&env, 4).await;
    let s = env.substrate(&pool.pool_id).await;
    assert_eq!(s.upgrade.as_ref().map(|u| u.since), Some(wait.since), "since holds while waiting");
    assert_eq!(env.calls(Call::Upgrade), 0, "no upgrade while a booking is active");
    // The booking ends: the upgrade is asked for, once, and the cluster gets there.
    env.store
        .commit(
            UnitOfWork::new()
                .write(Write::EndBooking { booking_id: b.booking_id, at: env.deps.clock.now() }),
        )
        .await
        .unwrap();
    let done = env
        .run_until(30, async |e: &Env| {
            let s = e.substrate(&pool.pool_id).await;
            s.state == ResourceState::Ready && s.observed_generation == 2
        })
        .await;
    assert!(done, "{:?}", env.substrate(&pool.pool_id).await);
    assert_eq!(at_provider(&env, &pid).await.unwrap().version, new);
    assert_eq!(env.calls(Call::Upgrade), 1);
    assert_eq!(env.substrate(&pool.pool_id).await.upgrade, None);
    env.store
        .commit(UnitOfWork::new().write(Write::InsertBooking(env.booking(&pool.pool_id))))
        .await
        .expect("bookings accepted again");
}

async fn an_immediate_upgrade_does_not_wait_for_bookings(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (old, new) = on.versions();
    let mut policy = env.create_policy(old, vec![flavor("cpu", on.node_size(), 1)]);
    policy.upgrades = UpgradePolicy::Immediate;
    let pool = env.create_pool("web", policy.clone()).await;
    let s = env.until_substrate(&pool.pool_id, ResourceState::Ready, 40).await;
    let (_, pid) = cluster_of(&env, &s).await;
    env.store
        .commit(UnitOfWork::new().write(Write::InsertBooking(env.booking(&pool.pool_id))))
        .await
        .unwrap();
    env.update_policy(&pool.pool_id, with_version(&policy, new)).await;
    let done = env
        .run_until(30, async |e: &Env| {
            let s = e.substrate(&pool.pool_id).await;
            s.state == ResourceState::Ready && s.observed_generation == 2
        })
        .await;
    assert!(done);
    assert_eq!(at_provider(&env, &pid).await.unwrap().version, new);
    assert!(
        env.store
            .event_list(&env.tenant, None, 0, 1000)
            .await
            .unwrap()
            .iter()
            .all(|e| e.data.get("upgrade").is_none())
    );
}

async fn adopt_mode_never_touches_a_foreign_bcd_daemonset_and_recovers_once_it_is_gone(
    on: OnProvider,
) {
    let env = Env::start_on(on).await;
    let pid = env.their_cluster().await;
    let kid = env.kube_id(&pid);
    let policy = adopt_policy(
        &env.account.provider_account_id,
        &pid,
        vec![flavor("cpu", on.node_size(), 1)],
    );
    let pool = env.create_pool("web", policy).await;
    env.until_substrate(&pool.pool_id, ResourceState::Ready, 40).await;
    let joined = env
        .run_until(5, async |e: &Env| e.substrate(&pool.pool_id).await.waiting_to_join.is_none())
        .await;
    assert!(joined);
    let s = env.substrate(&pool.pool_id).await;
    assert_eq!((s.nodes_listed, s.nodes_joined), (1, 1), "only our pool's node is ours");
    let (cluster, _) = cluster_of(&env, &s).await;
    assert_eq!(cluster.origin, bc_domain::model::ClusterOrigin::Adopted);
    assert_eq!(
        env.pool_names(&pid).await,
        vec![env.flavor_pool(&pool.pool_id, "cpu"), "own".to_owned()]
    );

    // The tenant replaces our DaemonSet with one of their own.
    let ns = substrate_namespace(&pool.pool_id);
    let now = env.deps.clock.now();
    let kube = &env.sim.state().kube;
    kube.delete(&kid, Resource::DaemonSet, Some(&ns), "bcd", &Preconditions::default(), now)
        .unwrap();
    let theirs = json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "bcd", "namespace": ns, "labels": {"team": "tenant"}},
        "spec": bc_sim::testing::bcd_daemonset_spec(None, &[])});
    kube.apply_manifest(&kid, "kubectl", &theirs, false, now).unwrap();
    let before = stored(&env, &pid, ObjectKind::DaemonSet, Some(&ns), "bcd").unwrap();
    env.driver_wake(&pool.pool_id).await;
    let s = env.until_substrate(&pool.pool_id, ResourceState::Error, 5).await;
    let m = s.message.unwrap();
    assert!(
        m.contains(&format!("DaemonSet {ns}/bcd")) && m.contains("never changed or deleted"),
        "{m}"
    );
    steps(&env, 3).await;
    let after = stored(&env, &pid, ObjectKind::DaemonSet, Some(&ns), "bcd").unwrap();
    // What a client writes (spec, metadata, managers) is untouched; the status (and with
    // it the resourceVersion) is the DaemonSet controller's, which keeps running.
    let written = |mut v: Value| {
        v.as_object_mut().unwrap().remove("status");
        v["metadata"].as_object_mut().unwrap().remove("resourceVersion");
        v
    };
    assert_eq!(written(after), written(before), "the tenant's DaemonSet is not patched");
    // Gone: the substrate applies its own and is ready again.
    kube.delete(
        &kid,
        Resource::DaemonSet,
        Some(&ns),
        "bcd",
        &Preconditions::default(),
        env.deps.clock.now(),
    )
    .unwrap();
    env.until_substrate(&pool.pool_id, ResourceState::Ready, 10).await;
    let ours = stored(&env, &pid, ObjectKind::DaemonSet, Some(&ns), "bcd").unwrap();
    assert_eq!(ours["metadata"]["labels"][LABEL_SUBSTRATE_POOL], pool.pool_id.as_str());
    assert!(env.event_kinds().await.iter().any(|k| k == "kubernetes.substrate.error"));
}

async fn adopt_mode_teardown_leaves_the_tenants_pools_and_nothing_of_ours(on: OnProvider) {
    let env = Env::start_on(on).await;
    let pid = env.their_cluster().await;
    let policy = adopt_policy(
        &env.account.provider_account_id,
        &pid,
        vec![flavor("cpu", on.node_size(), 1), flavor("arm", on.other_size(), 1)],
    );
    let pool = env.create_pool("web", policy).await;
    let s = env.until_substrate(&pool.pool_id, ResourceState::Ready, 40).await;
    let (cluster, _) = cluster_of(&env, &s).await;
    let own_before = at_provider(&env, &pid)
        .await
        .unwrap()
        .node_pools
        .into_iter()
        .find(|p| p.name == "own")
        .unwrap();
    let token = env.join.calls()[0]["joinToken"].as_str().unwrap().to_owned();
    env.archive(&pool.pool_id).await;
    env.until_substrate(&pool.pool_id, ResourceState::Deleted, 40).await;
    let pc = at_provider(&env, &pid).await.expect("the adopted cluster stays");
    assert_eq!(pc.node_pools.len(), 1, "{:?}", pc.node_pools);
    assert_eq!(pc.node_pools[0], own_before, "the tenant's pool is untouched");
    let ns = substrate_namespace(&pool.pool_id);
    for (kind, nsref, name) in [
        (ObjectKind::Namespace, None, ns.as_str()),
        (ObjectKind::Secret, Some(ns.as_str()), "bcd-join"),
        (ObjectKind::ServiceAccount, Some(ns.as_str()), "bcd"),
        (ObjectKind::DaemonSet, Some(ns.as_str()), "bcd"),
    ] {
        assert!(stored(&env, &pid, kind, nsref, name).is_none(), "{kind:?} {name} left behind");
    }
    assert!(
        env.store.join_token_find(&sha256_hex(token.as_bytes())).await.unwrap().is_none(),
        "the join token is revoked"
    );
    // The adopted row closes once no substrate uses it (the cluster reconciler).
    steps(&env, 3).await;
    let row = env.store.cluster_get_any(&cluster.cluster_id).await.unwrap().unwrap();
    assert_eq!(row.status.state, ResourceState::Deleted);
    assert_eq!(env.calls(Call::DeleteCluster), 0, "an adopted cluster is never deleted");
    let live = env
        .store
        .node_pool_list_by_cluster(&cluster.cluster_id, &PageRequest::first(100))
        .await
        .unwrap()
        .items;
    assert!(live.is_empty(), "{live:?}");
}

/// DigitalOcean only: the load balancers and volumes it makes are DigitalOcean's (GKE
/// offers no load balancers here, SPEC §11, and the simulator injects volumes only there).
#[tokio::test]
async fn create_mode_teardown_deletes_the_cluster_with_its_load_balancers_and_names_its_volumes() {
    let env = Env::start().await;
    let (pool, _, s) = env.creating_pool("latest", 1).await;
    let (cluster, pid) = cluster_of(&env, &s).await;
    let lbs = digitalocean(&env);
    let mut svc = bc_sim::testing::lb_request("svc-lb");
    svc.tags = vec![format!("k8s:{pid}")];
    let svc = LoadBalancerProvider::create(&*lbs, &svc).await.unwrap();
    let other = LoadBalancerProvider::create(&*lbs, &bc_sim::testing::lb_request("tenant-lb"))
        .await
        .unwrap();
    let vol = env.sim.state().model().inject_volume(TEST_TOKEN, &pid, "pvc-data").unwrap();
    env.archive(&pool.pool_id).await;
    env.until_substrate(&pool.pool_id, ResourceState::Deleted, 40).await;
    assert!(matches!(lbs.get_cluster(&pid).await, Err(bc_domain::ProviderError::NotFound)));
    assert!(
        matches!(
            LoadBalancerProvider::get(&*lbs, &svc.id).await,
            Err(bc_domain::ProviderError::NotFound)
        ),
        "the associated LB goes"
    );
    assert!(LoadBalancerProvider::get(&*lbs, &other.id).await.is_ok(), "an unrelated LB stays");
    let events = env.store.event_list(&env.tenant, None, 0, 1000).await.unwrap();
    let kept = events
        .iter()
        .find(|e| e.kind == "kubernetes.substrate.resources-retained")
        .expect("volumes named");
    assert_eq!(kept.data["volumes"][0]["id"], vol.as_str());
    assert_eq!(kept.data["volumes"][0]["name"], "pvc-data");
    let row = env.store.cluster_get_any(&cluster.cluster_id).await.unwrap().unwrap();
    assert_eq!(row.status.state, ResourceState::Deleted);
    assert!(events.iter().any(|e| e.kind == "kubernetes.cluster.deleted"));
    assert!(events.iter().any(|e| e.kind == "kubernetes.substrate.deleted"));
    assert!(events.iter().any(|e| e.kind == "kubernetes.nodepool.deleted"));
    let live = env
        .store
        .node_pool_list_by_cluster(&cluster.cluster_id, &PageRequest::first(100))
        .await
        .unwrap()
        .items;
    assert!(live.is_empty());
    assert_eq!(env.count("POST", bc_sim::model::routes::CLUSTERS), 1, "one cluster made, ever");
    // The substrate is deleted for good: its work item is dropped.
    steps(&env, 2).await;
    assert_eq!(env.substrate(&pool.pool_id).await.state, ResourceState::Deleted);
}

/// Steps until the pool's substrate converged its latest policy; asserts after every
/// step that the cluster never holds two pools of one name.
async fn converge_policy(env: &Env, pool: &PoolId, pid: &str, max: usize) -> Substrate {
    let generation = env.store.pool_get_any(pool).await.unwrap().unwrap().generation;
    for _ in 0..max {
        let s = env.substrate(pool).await;
        if s.state == ResourceState::Ready && s.observed_generation == generation {
            return s;
        }
        env.step(STEP).await;
        let names = env.pool_names(pid).await;
        let mut dedup = names.clone();
        dedup.dedup();
        assert_eq!(names, dedup, "two pools of one name");
    }
    panic!("policy {generation} not converged: {:?}", env.substrate(pool).await);
}

async fn flavor_changes_add_resize_replace_and_remove_node_pools(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (size, other) = (on.node_size(), on.other_size());
    let (pool, policy, s) = env.creating_pool("latest", 1).await;
    let (_, pid) = cluster_of(&env, &s).await;
    let name = |flavor: &str| env.flavor_pool(&pool.pool_id, flavor);
    let pools = async |env: &Env| at_provider(env, &pid).await.unwrap().node_pools;
    // Add a flavor.
    env.update_policy(
        &pool.pool_id,
        with_flavors(&policy, vec![flavor("cpu", size, 1), flavor("arm", other, 1)]),
    )
    .await;
    let s = converge_policy(&env, &pool.pool_id, &pid, 30).await;
    assert_eq!(env.pool_names(&pid).await, vec![name("arm"), name("cpu")]);
    assert_eq!(s.nodes_listed, 2);
    assert!(env.event_kinds().await.iter().any(|k| k == "kubernetes.substrate.updating"));
    // Resize.
    env.update_policy(
        &pool.pool_id,
        with_flavors(&policy, vec![flavor("cpu", size, 3), flavor("arm", other, 1)]),
    )
    .await;
    converge_policy(&env, &pool.pool_id, &pid, 30).await;
    let cpu = pools(&env).await.into_iter().find(|p| p.name.ends_with("-cpu")).unwrap();
    assert_eq!((cpu.count, cpu.nodes.len()), (3, 3));
    // Size change: replaced (the old pool goes, then the new one is made; a pool's id may
    // be its name, as on GKE, so the calls say it was replaced).
    let made = (env.calls(Call::DeleteNodePool), env.calls(Call::CreateNodePool));
    env.update_policy(
        &pool.pool_id,
        with_flavors(&policy, vec![flavor("cpu", other, 3), flavor("arm", other, 1)]),
    )
    .await;
    converge_policy(&env, &pool.pool_id, &pid, 40).await;
    let cpu2 = pools(&env).await.into_iter().find(|p| p.name.ends_with("-cpu")).unwrap();
    assert_eq!((cpu2.size.as_str(), cpu2.count), (other, 3));
    let replaced = (env.calls(Call::DeleteNodePool), env.calls(Call::CreateNodePool));
    assert_eq!(replaced, (made.0 + 1, made.1 + 1), "replaced: one delete, one create");
    // Remove a flavor.
    env.update_policy(&pool.pool_id, with_flavors(&policy, vec![flavor("cpu", other, 3)])).await;
    let s = converge_policy(&env, &pool.pool_id, &pid, 30).await;
    assert_eq!(env.pool_names(&pid).await, vec![name("cpu")]);
    assert_eq!(s.nodes_listed, 3);
    let cluster = env.substrate(&pool.pool_id).await.cluster_id.unwrap();
    let rows = env
        .store
        .node_pool_list_by_cluster(&cluster, &PageRequest::first(100))
        .await
        .unwrap()
        .items;
    assert_eq!(rows.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), vec![name("cpu")]);
    assert_eq!(rows[0].size, other);
}

async fn autoscaled_counts_are_left_to_the_provider(on: OnProvider) {
    let env = Env::start_on(on).await;
    let mut auto = flavor("gpu", on.node_size(), 0);
    auto.count = None;
    auto.auto_scale = Some(bc_domain::policy::AutoScale { min: 1, max: 4 });
    let policy = env.create_policy("latest", vec![auto]);
    let pool = env.create_pool("web", policy).await;
    let s = env.until_substrate(&pool.pool_id, ResourceState::Ready, 40).await;
    let (_, pid) = cluster_of(&env, &s).await;
    // The autoscaler grows the pool to 3.
    on.autoscale_to(&env.sim, &pid, 3);
    let updates = env.calls(Call::UpdateNodePool);
    steps(&env, 4).await;
    env.driver_wake(&pool.pool_id).await;
    steps(&env, 2).await;
    assert_eq!(env.calls(Call::UpdateNodePool), updates, "no update of an autoscaled count");
    let np = at_provider(&env, &pid).await.unwrap().node_pools.remove(0);
    assert_eq!((np.count, np.auto_scale, np.min_nodes, np.max_nodes), (3, true, 1, 4));
    assert_eq!(env.substrate(&pool.pool_id).await.nodes_listed, 3);
}

async fn the_join_token_rotates_when_the_secret_is_gone_or_altered_and_joined_nodes_stay(
    on: OnProvider,
) {
    let env = Env::start_on(on).await;
    let (pool, _, _) = env.creating_pool("latest", 2).await;
    assert!(
        env.run_until(5, async |e: &Env| e.substrate(&pool.pool_id).await.nodes_joined == 2).await
    );
    let s = env.substrate(&pool.pool_id).await;
    let (_, pid) = cluster_of(&env, &s).await;
    let ns = substrate_namespace(&pool.pool_id);
    let digest = |env: &Env| {
        stored(env, &pid, ObjectKind::Secret, Some(&ns), "bcd-join").map(|o| {
            let meta = ObjectMeta::of(ObjectKind::Secret, &o);
            meta.content["data"]["joinToken"].as_str().unwrap().to_owned()
        })
    };
    let first = digest(&env).unwrap();
    assert!(env.store.join_token_find(&first).await.unwrap().is_some());
    let nodes_before =
        env.store.node_list_by_pool(&pool.pool_id, &PageRequest::first(100)).await.unwrap().items;
    // Gone.
    env.sim
        .state()
        .kube
        .delete(
            &env.kube_id(&pid),
            Resource::Secret,
            Some(&ns),
            "bcd-join",
            &Preconditions::default(),
            env.deps.clock.now(),
        )
        .unwrap();
    env.driver_wake(&pool.pool_id).await;
    steps(&env, 2).await;
    let second = digest(&env).expect("the Secret is back");
    assert_ne!(second, first);
    assert!(env.store.join_token_find(&first).await.unwrap().is_none(), "the old token is revoked");
    assert!(env.store.join_token_find(&second).await.unwrap().is_some());
    // Altered by someone (keeping our label): rotated again.
    let altered = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "bcd-join", "namespace": ns}, "stringData": {"joinToken": "bcj_guessed"}});
    env.sim
        .state()
        .kube
        .apply_manifest(&env.kube_id(&pid), "kubectl", &altered, true, env.deps.clock.now())
        .unwrap();
    assert_eq!(digest(&env).unwrap(), sha256_hex(b"bcj_guessed"));
    env.driver_wake(&pool.pool_id).await;
    steps(&env, 2).await;
    let third = digest(&env).unwrap();
    assert!(third != second && third != sha256_hex(b"bcj_guessed"));
    assert!(env.store.join_token_find(&third).await.unwrap().is_some());
    let nodes_after =
        env.store.node_list_by_pool(&pool.pool_id, &PageRequest::first(100)).await.unwrap().items;
    assert_eq!(
        nodes_after.iter().map(|n| &n.node_id).collect::<Vec<_>>(),
        nodes_before.iter().map(|n| &n.node_id).collect::<Vec<_>>(),
        "joined nodes keep their ids"
    );
    assert_eq!(env.substrate(&pool.pool_id).await.nodes_joined, 2);
}

/// DigitalOcean only: a zonal GKE cluster cannot become regional (its adapter refuses).
#[tokio::test]
async fn high_availability_is_turned_on_by_a_policy_change() {
    let env = Env::start().await;
    let (pool, policy, s) = env.creating_pool("latest", 1).await;
    let (_, pid) = cluster_of(&env, &s).await;
    assert!(!at_provider(&env, &pid).await.unwrap().high_availability);
    let mut ha = policy.clone();
    if let Some(sp) = &mut ha.substrate
        && let ClusterPolicy::Create(c) = &mut sp.cluster
    {
        c.high_availability = true;
    }
    env.update_policy(&pool.pool_id, ha).await;
    converge_policy(&env, &pool.pool_id, &pid, 20).await;
    assert!(at_provider(&env, &pid).await.unwrap().high_availability);
    assert_eq!(env.count("PUT", bc_sim::model::routes::CLUSTER), 1);
}

async fn a_refused_node_pool_is_the_substrates_error_until_the_flavor_changes(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (pool, policy, s) = env.creating_pool("latest", 1).await;
    let (cluster, pid) = cluster_of(&env, &s).await;
    let (size, big) = (on.node_size(), on.unknown_size());
    let refused = with_flavors(&policy, vec![flavor("cpu", size, 1), flavor("big", big, 1)]);
    env.update_policy(&pool.pool_id, refused).await;
    let s = env.until_substrate(&pool.pool_id, ResourceState::Error, 10).await;
    let m = s.message.unwrap();
    assert!(m.contains(&env.flavor_pool(&pool.pool_id, "big")) && m.contains(big), "{m}");
    let rows = env
        .store
        .node_pool_list_by_cluster(&cluster.cluster_id, &PageRequest::first(100))
        .await
        .unwrap()
        .items;
    let big = rows.iter().find(|r| r.name.ends_with("-big")).unwrap();
    assert_eq!(big.state, bc_domain::NodePoolState::Error);
    assert!(env.event_kinds().await.iter().any(|k| k == "kubernetes.nodepool.error"));
    env.update_policy(
        &pool.pool_id,
        with_flavors(&policy, vec![flavor("cpu", size, 1), flavor("big", on.other_size(), 1)]),
    )
    .await;
    converge_policy(&env, &pool.pool_id, &pid, 30).await;
    assert_eq!(env.pool_names(&pid).await.len(), 2);
}

async fn throttling_and_server_errors_are_retried_never_shown_as_refusals(on: OnProvider) {
    let env = Env::start_on(on).await;
    env.fail(Call::CreateCluster, 2);
    env.throttle(Call::CreateCluster, 1);
    let policy = env.create_policy("latest", vec![flavor("cpu", on.node_size(), 1)]);
    let pool = env.create_pool("web", policy).await;
    for _ in 0..40 {
        let s = env.substrate(&pool.pool_id).await;
        assert_ne!(s.state, ResourceState::Error, "{s:?}");
        if s.state == ResourceState::Ready {
            break;
        }
        env.step(STEP).await;
    }
    assert_eq!(env.substrate(&pool.pool_id).await.state, ResourceState::Ready);
    assert_eq!(env.driver.failures(), 3, "each fault retried by the runtime");
    assert_eq!(env.calls(Call::CreateCluster), 4);
    let clusters = env.provider().kubernetes().list_clusters().await.unwrap();
    assert_eq!(clusters.len(), 1);
}

async fn a_cluster_name_taken_by_someone_else_is_an_error_never_a_takeover(on: OnProvider) {
    let env = Env::start_on(on).await;
    let policy = env.create_policy("latest", vec![flavor("cpu", on.node_size(), 1)]);
    let pool = env.create_pool("web", policy).await;
    // Someone made a cluster of our derived name, without our tag.
    let theirs = env.made_outside(&env.substrate_cluster_name(&pool.pool_id), "x").await;
    let s = env.until_substrate(&pool.pool_id, ResourceState::Error, 10).await;
    assert!(s.message.as_deref().unwrap().contains(&theirs), "{s:?}");
    // The first create is sent without a listing and the provider refuses the taken
    // name; the name looked up then says whose it is, and no later run sends another.
    assert_eq!(env.made(ProviderCall::CreateCluster), 1, "one create, refused");
    for _ in 0..3 {
        env.step(STEP).await;
    }
    assert_eq!(env.made(ProviderCall::CreateCluster), 1, "the refusal is not sent again");
    let name = env.substrate_cluster_name(&pool.pool_id);
    let named: Vec<_> = env.provider().kubernetes().list_clusters().await.unwrap();
    let named: Vec<_> = named.into_iter().filter(|c| c.name == name).collect();
    assert_eq!(named.len(), 1, "no cluster made of the taken name: {named:?}");
    assert_eq!(named[0].id, theirs);
    // Archiving tears down only what is ours: their cluster stays.
    env.archive(&pool.pool_id).await;
    env.until_substrate(&pool.pool_id, ResourceState::Deleted, 10).await;
    assert!(at_provider(&env, &theirs).await.is_ok());
}

/// A cluster row the substrate records in this run has had no create sent, so nothing
/// can be found by its name: the create goes out without listing the account's clusters
/// first (once it holds hundreds, a listing is several requests of its hourly budget).
/// Before, every create listed: one list request ahead of the create.
async fn a_substrates_first_cluster_create_sends_no_listing(on: OnProvider) {
    let env = Env::start_on(on).await;
    env.made_outside("someone-elses", "x").await;
    let policy = env.create_policy("latest", vec![flavor("cpu", on.node_size(), 1)]);
    let pool = env.create_pool("web", policy).await;
    let sent = env.run_until(10, async |e: &Env| e.made(ProviderCall::CreateCluster) > 0).await;
    assert!(sent, "{:?}", env.substrate(&pool.pool_id).await);
    assert_eq!(env.made(ProviderCall::ListClusters), 0, "no listing ahead of the create");
    let s = env.until_substrate(&pool.pool_id, ResourceState::Ready, 40).await;
    assert_eq!(env.made(ProviderCall::CreateCluster), 1, "{s:?}");
}

async fn two_pools_share_an_adopted_cluster_and_leave_it_one_at_a_time(on: OnProvider) {
    let env = Env::start_on(on).await;
    let pid = env.made_outside("shared", "own").await;
    let cpu = vec![flavor("cpu", on.node_size(), 1)];
    let account = env.account.provider_account_id.clone();
    let a = env.create_pool("a", adopt_policy(&account, &pid, cpu.clone())).await;
    let b = env.create_pool("b", adopt_policy(&account, &pid, cpu)).await;
    let sa = env.until_substrate(&a.pool_id, ResourceState::Ready, 40).await;
    let sb = env.until_substrate(&b.pool_id, ResourceState::Ready, 40).await;
    assert_eq!(sa.cluster_id, sb.cluster_id, "one row for the provider cluster");
    let (row, _) = cluster_of(&env, &sa).await;
    assert_eq!(row.substrate_pool_ids.len(), 2);
    assert_eq!(env.pool_names(&pid).await.len(), 3);
    env.archive(&a.pool_id).await;
    env.until_substrate(&a.pool_id, ResourceState::Deleted, 40).await;
    steps(&env, 2).await;
    let row = env.cluster(&row.cluster_id).await;
    assert_eq!(
        (row.substrate_pool_ids.clone(), row.status.state),
        (vec![b.pool_id.clone()], ResourceState::Ready)
    );
    assert_eq!(
        env.pool_names(&pid).await,
        vec![env.flavor_pool(&b.pool_id, "cpu"), "own".to_owned()]
    );
    assert!(
        stored(&env, &pid, ObjectKind::DaemonSet, Some(&substrate_namespace(&b.pool_id)), "bcd")
            .is_some()
    );
    assert_eq!(env.substrate(&b.pool_id).await.state, ResourceState::Ready);
}

async fn teardown_keeps_a_namespace_holding_a_foreign_object_until_it_is_removed(on: OnProvider) {
    let env = Env::start_on(on).await;
    let pid = env.their_cluster().await;
    let pool = env.adopting_pool(&pid).await;
    let ns = substrate_namespace(&pool.pool_id);
    let kube = &env.sim.state().kube;
    env.tenant_replaces_the_join_secret(&pid, &pool.pool_id);
    env.archive(&pool.pool_id).await;
    let s = env.until_substrate(&pool.pool_id, ResourceState::Error, 20).await;
    assert!(s.message.as_deref().unwrap().contains(&format!("Secret {ns}/bcd-join")), "{s:?}");
    assert!(
        stored(&env, &pid, ObjectKind::Namespace, None, &ns).is_some(),
        "the namespace is kept: deleting it would take their Secret"
    );
    assert!(stored(&env, &pid, ObjectKind::Secret, Some(&ns), "bcd-join").is_some());
    assert!(stored(&env, &pid, ObjectKind::DaemonSet, Some(&ns), "bcd").is_none(), "ours went");
    kube.delete(
        &env.kube_id(&pid),
        Resource::Secret,
        Some(&ns),
        "bcd-join",
        &Preconditions::default(),
        env.deps.clock.now(),
    )
    .unwrap();
    env.until_substrate(&pool.pool_id, ResourceState::Deleted, 20).await;
    assert!(stored(&env, &pid, ObjectKind::Namespace, None, &ns).is_none());
    assert_eq!(env.pool_names(&pid).await, vec!["own".to_owned()]);
}

async fn removing_the_substrate_from_the_policy_tears_it_down_and_it_can_come_back(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (pool, policy, s) = env.creating_pool("latest", 1).await;
    let (_, first) = cluster_of(&env, &s).await;
    env.update_policy(&pool.pool_id, PoolPolicy { substrate: None, ..policy.clone() }).await;
    env.until_substrate(&pool.pool_id, ResourceState::Deleted, 40).await;
    assert!(env.provider().kubernetes().list_clusters().await.unwrap().is_empty());
    // Added again: a new substrate, a new cluster of the same derived name.
    env.update_policy(&pool.pool_id, policy).await;
    let s = env.until_substrate(&pool.pool_id, ResourceState::Ready, 40).await;
    let (_, second) = cluster_of(&env, &s).await;
    assert_ne!(first, second);
    assert_eq!(env.provider().kubernetes().list_clusters().await.unwrap().len(), 1);
}

on_each_provider!(
    a_created_cluster_deleted_behind_our_back_is_made_again,
    a_lost_node_pool_create_is_never_sent_twice_from_a_stale_listing,
);

/// SPEC §6: a created cluster the provider no longer has (deleted behind our back) is
/// made again under the same derived names, with its node pools, an event saying so, and
/// the join flow repeats on the new nodes; archiving the pool is how to stop it.
async fn a_created_cluster_deleted_behind_our_back_is_made_again(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (pool, _, s) = env.creating_pool("latest", 2).await;
    let (row, old) = cluster_of(&env, &s).await;
    let joins = env.join.calls().len();
    let k = env.provider();
    let k = k.kubernetes();
    k.delete_cluster(&old).await.expect("deleted behind our back");
    let back = env
        .run_until(80, async |e: &Env| {
            let s = e.substrate(&pool.pool_id).await;
            let c = e.cluster(&row.cluster_id).await;
            s.state == ResourceState::Ready
                && s.nodes_joined == 2
                && c.provider_cluster_id.as_deref().is_some_and(|p| p != old)
        })
        .await;
    let s = env.substrate(&pool.pool_id).await;
    assert!(back, "{s:?} {:?}", env.cluster(&row.cluster_id).await);
    let (again, new) = cluster_of(&env, &s).await;
    assert_eq!((&again.cluster_id, &again.name), (&row.cluster_id, &row.name), "the same row");
    assert_eq!(again.status.state, ResourceState::Ready);
    assert!(matches!(k.get_cluster(&old).await, Err(ProviderError::NotFound)));
    let naming = SubstrateNaming::of(&env.provider().offer());
    let p = &pool.pool_id;
    let pc = k.get_cluster(&new).await.unwrap();
    assert_eq!(pc.name, naming.cluster_name(p).as_str());
    assert_eq!(pc.tags, vec![substrate_tag_for(p, naming)]);
    let cpu = FlavorName::parse("cpu").unwrap();
    assert_eq!(env.pool_names(&new).await, vec![naming.node_pool_name(p, &cpu)]);
    let ns = substrate_namespace(&pool.pool_id);
    assert!(stored(&env, &new, ObjectKind::DaemonSet, Some(&ns), "bcd").is_some());
    assert!(env.join.calls().len() >= joins + 2, "the new cluster's nodes joined");
    // One live row for the flavor's pool, now the new cluster's.
    let rows: Vec<_> = env
        .store
        .node_pool_list_by_cluster(&row.cluster_id, &PageRequest::first(100))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|r| r.state != bc_domain::NodePoolState::Deleted)
        .collect();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let made = pc.node_pools.iter().map(|p| p.id.clone()).collect::<Vec<_>>();
    assert_eq!(rows[0].provider_node_pool_id.as_ref(), made.first(), "{rows:?}");
    assert_eq!(rows[0].state, bc_domain::NodePoolState::Ready);
    let events = env.store.event_list(&env.tenant, None, 0, 1000).await.unwrap();
    let recreated: Vec<_> =
        events.iter().filter(|e| e.kind == "kubernetes.cluster.recreated").collect();
    assert_eq!(recreated.len(), 1, "{:?}", events.iter().map(|e| &e.kind).collect::<Vec<_>>());
    assert_eq!(recreated[0].data["previousProviderClusterId"], old.as_str());
    assert_eq!(env.calls(Call::CreateCluster), 2, "made once more");
    // Archiving the pool stops it: the new cluster goes.
    env.archive(&pool.pool_id).await;
    env.until_substrate(&pool.pool_id, ResourceState::Deleted, 40).await;
    assert!(k.list_clusters().await.unwrap().is_empty());
}

/// SPEC §6: an adopted cluster that is gone is not ours to make again — the substrate is
/// `error` naming it, and nothing is created.
async fn an_adopted_cluster_that_is_gone_is_an_error_naming_it(on: OnProvider) {
    let env = Env::start_on(on).await;
    let pid = env.their_cluster().await;
    let pool = env.adopting_pool(&pid).await;
    env.provider().kubernetes().delete_cluster(&pid).await.expect("deleted by the tenant");
    let gone = env
        .run_until(80, async |e: &Env| {
            let s = e.substrate(&pool.pool_id).await;
            s.state == ResourceState::Error
                && s.message.as_deref().is_some_and(|m| m.contains("does not exist"))
        })
        .await;
    let s = env.substrate(&pool.pool_id).await;
    assert!(gone, "{s:?}");
    assert!(s.message.as_deref().unwrap().contains(&pid), "{s:?}");
    assert_eq!(env.made(ProviderCall::CreateCluster), 0, "not ours to make");
}

/// On the production observer (`SharedObserver`): a steady substrate whose node pool was
/// deleted behind our back makes it again, and that create's answer is lost. The
/// create changed what the cached listing shows, so the retry lists again and finds the
/// pool — one create, never a second one refused as "not unique" and shown as the
/// substrate's error.
async fn a_lost_node_pool_create_is_never_sent_twice_from_a_stale_listing(on: OnProvider) {
    let env = Env::shared_on(on).await;
    let (pool, _, s) = env.creating_pool("latest", 1).await;
    let (_, pid) = cluster_of(&env, &s).await;
    let p = env.provider();
    let p = p.kubernetes();
    let ours = p.get_cluster(&pid).await.unwrap().node_pools[0].clone();
    p.delete_node_pool(&pid, &ours.id).await.expect("deleted behind our back");
    // The provider finishes the deletion (its clock only: no reconciler runs meanwhile).
    let mut gone = false;
    for _ in 0..20 {
        env.cloud.step(30);
        gone = p.get_cluster(&pid).await.unwrap().node_pools.is_empty();
        if gone {
            break;
        }
    }
    assert!(gone, "the node pool is gone at the provider");
    env.lose(Call::CreateNodePool, 1);
    let sent = env.run_until(20, async |e: &Env| e.calls(Call::CreateNodePool) == 1).await;
    assert!(sent, "the node pool is made again");
    // The retries, and the steady resyncs after them.
    steps(&env, 8).await;
    let s = env.substrate(&pool.pool_id).await;
    assert_eq!(env.calls(Call::CreateNodePool), 1, "made once: {s:?}");
    assert_eq!(s.state, ResourceState::Ready, "{s:?}");
    assert_eq!(env.pool_names(&pid).await, vec![ours.name]);
}

/// A flavor removed and put back before its node pool is gone: the old pool's deletion
/// finishes, and the flavor gets a new live row and a new pool — the row never stays
/// `deleting`, and the adopted cluster (whose state follows its pools) ends `ready`.
async fn a_flavor_removed_and_put_back_before_its_pool_is_gone_converges(on: OnProvider) {
    let env = Env::start_on(on).await;
    let pid = env.their_cluster().await;
    let pool = env.adopting_pool(&pid).await;
    let policy = env.store.pool_get_any(&pool.pool_id).await.unwrap().unwrap().policy;
    let name = env.flavor_pool(&pool.pool_id, "cpu");
    env.update_policy(&pool.pool_id, with_flavors(&policy, vec![])).await;
    env.step(STEP).await;
    let cluster = env.substrate(&pool.pool_id).await.cluster_id.unwrap();
    let rows = async |env: &Env| {
        let page = PageRequest::first(100);
        let all = env.store.node_pool_list_by_cluster(&cluster, &page).await.unwrap().items;
        let all = all.into_iter();
        all.filter(|r| r.managed_by.as_ref() == Some(&pool.pool_id)).collect::<Vec<_>>()
    };
    let before = rows(&env).await;
    assert_eq!(before.len(), 1, "{before:?}");
    assert_eq!(before[0].state, bc_domain::NodePoolState::Deleting, "{before:?}");
    assert!(env.pool_names(&pid).await.contains(&name), "not gone yet");

    env.update_policy(&pool.pool_id, policy.clone()).await;
    converge_policy(&env, &pool.pool_id, &pid, 40).await;
    let after = rows(&env).await;
    assert_eq!(after.len(), 1, "one live row: {after:?}");
    assert_eq!(after[0].state, bc_domain::NodePoolState::Ready, "{after:?}");
    assert_eq!(env.pool_names(&pid).await, vec![name, "own".to_owned()]);
    let settled = env
        .run_until(10, async |e: &Env| {
            e.cluster(&cluster).await.status.state == ResourceState::Ready
        })
        .await;
    assert!(settled, "{:?}", env.cluster(&cluster).await);
}

/// A drain wait does not outlive a standing refusal: the pool waits for a booking to
/// end before an upgrade, then a policy change adds a flavor the provider refuses. The
/// refusal stands (no upgrade goes on until the policy changes), so the drain ends and
/// bookings are taken again.
async fn a_standing_refusal_ends_a_drain_wait_and_bookings_are_taken_again(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (old, new) = on.versions();
    let (pool, policy, _) = env.creating_pool(old, 1).await;
    let b = env.booking(&pool.pool_id);
    env.store.commit(UnitOfWork::new().write(Write::InsertBooking(b))).await.unwrap();
    let upgrading = with_version(&policy, new);
    env.update_policy(&pool.pool_id, upgrading.clone()).await;
    let reached =
        env.run_until(5, async |e: &Env| e.substrate(&pool.pool_id).await.upgrade.is_some()).await;
    assert!(reached, "the drain waits");
    let refused = vec![flavor("cpu", on.node_size(), 1), flavor("big", on.unknown_size(), 1)];
    env.update_policy(&pool.pool_id, with_flavors(&upgrading, refused)).await;
    let s = env.until_substrate(&pool.pool_id, ResourceState::Error, 10).await;
    steps(&env, 3).await;
    let s2 = env.substrate(&pool.pool_id).await;
    assert_eq!((s2.state, &s2.message), (s.state, &s.message), "the refusal stands");
    assert_eq!(s2.upgrade, None, "no drain under a standing refusal: {s2:?}");
    env.store
        .commit(UnitOfWork::new().write(Write::InsertBooking(env.booking(&pool.pool_id))))
        .await
        .expect("bookings accepted again");
}

/// GKE only (DigitalOcean has no autopilot clusters). SPEC §6: adopting an autopilot cluster is refused,
/// recorded once — one `error`, one event — and not asked again until the policy changes.
#[tokio::test]
async fn adopting_an_autopilot_cluster_is_refused_once() {
    let on = OnProvider::Gke;
    let env = Env::start_on(on).await;
    let req = CreateClusterRequest {
        region: on.multi_zone_region().into(),
        mode: bc_domain::model::ClusterMode::Autopilot,
        ..bc_sim::testing::cluster_request("theirs", vec![])
    };
    let made = env.provider().kubernetes().create_cluster(&req).await.unwrap();
    env.cloud.step(600);
    let policy = adopt_policy(
        &env.account.provider_account_id,
        &made.id,
        vec![flavor("cpu", on.node_size(), 1)],
    );
    let pool = env.create_pool("web", policy).await;
    let s = env.until_substrate(&pool.pool_id, ResourceState::Error, 10).await;
    let m = s.message.clone().unwrap();
    assert!(m.contains("autopilot") && m.contains(&made.id), "{m}");
    steps(&env, 5).await;
    assert_eq!(env.events_of("kubernetes.substrate.error").await, 1, "recorded once");
    assert_eq!(env.calls(Call::CreateNodePool), 0);
    assert!(
        env.store
            .cluster_find_by_provider_id(&env.account.provider_account_id, &made.id)
            .await
            .unwrap()
            .is_none(),
        "not recorded as adopted"
    );
}
