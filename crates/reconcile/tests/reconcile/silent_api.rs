//! One cluster whose Kubernetes API does not answer holds up only that cluster (issue 27,
//! on both providers): GKE reports no current size of a node pool, so its adapter counts
//! each pool's nodes through the cluster's own API, also in the account-wide listing every
//! steady object is observed by. A silent API once failed that whole listing, and no other
//! cluster or substrate of the account was made or observed until it answered.
//!
//! Invariant: a count that could not be read is never taken as a change — the silent
//! cluster's objects keep their state and recorded counts, make no resize call and record
//! no event — while every other object of the account converges; once the API answers
//! again all is as before.

use std::time::Duration;

use bc_domain::model::{ClusterMode, NodePool, subjects};
use bc_domain::policy::Scale;
use bc_domain::ports::LedgerRepo;
use bc_domain::{ClusterId, NodePoolState, PoolId, ResourceState};
use bc_reconcile::on_each_provider;
use bc_reconcile::testing::{Call, Env, OnProvider, flavor, with_flavors};

on_each_provider!(a_silent_cluster_api_holds_up_only_that_cluster_and_its_counts_are_kept);

/// Longer than any wait a reconciler asks for.
const STEP: Duration = Duration::from_secs(600);

/// Injected failures enough to outlast the test: the API answers 503 to every request.
const SILENT: usize = 1_000_000;

/// The kinds of the tenant's events on `subject`, oldest first.
async fn events_on(env: &Env, subject: &str) -> Vec<String> {
    let all = env.store.event_list(&env.tenant, Some(subject), 0, 10_000).await.expect("events");
    all.into_iter().map(|e| e.kind).collect()
}

/// What a node pool row shows: name, state, message, nodes listed and ready, observed
/// generation.
type RowShown = (String, NodePoolState, Option<String>, u32, u32, u64);

fn shown(rows: &[NodePool]) -> Vec<RowShown> {
    let mut v: Vec<RowShown> = rows
        .iter()
        .map(|r| {
            let (name, message) = (r.name.clone(), r.message.clone());
            (name, r.state, message, r.nodes_listed, r.nodes_ready, r.observed_generation)
        })
        .collect();
    v.sort_by(|x, y| x.0.cmp(&y.0));
    v
}

/// Everything the silent cluster's objects show: the substrate's row, its cluster's and
/// pools' rows, the tenant cluster's and its pool's rows, and the events on each.
#[derive(Debug, PartialEq)]
struct Shown {
    substrate: (ResourceState, Option<String>, u32, u32, u64),
    substrate_rows: Vec<RowShown>,
    tenant_cluster: (ResourceState, Option<String>),
    tenant_rows: Vec<RowShown>,
    events: Vec<Vec<String>>,
}

async fn shown_of(env: &Env, pool: &PoolId, tenant: &ClusterId, tenant_pool: &NodePool) -> Shown {
    let s = env.substrate(pool).await;
    let made = s.cluster_id.clone().expect("a cluster recorded");
    let c = env.cluster(tenant).await;
    Shown {
        substrate: (s.state, s.message, s.nodes_listed, s.nodes_joined, s.observed_generation),
        substrate_rows: shown(&env.substrate_rows(pool).await),
        tenant_cluster: (c.status.state, c.status.message),
        tenant_rows: shown(&[env.node_pool(&tenant_pool.node_pool_id).await]),
        events: vec![
            events_on(env, &subjects::pool(pool)).await,
            events_on(env, &subjects::cluster(&made)).await,
            events_on(env, &subjects::cluster(tenant)).await,
        ],
    }
}

/// A substrate and a tenant cluster, each with a pool resized from 1 to 2 nodes (so a
/// count GKE reports without reading the nodes — the pool's initial one — is wrong), are
/// ready; then both clusters' APIs stop answering. Meanwhile a new substrate and a new
/// tenant cluster on the same account are made and become ready; the silent clusters'
/// objects stay as they were — state, message, counts, events — with no resize asked.
/// Once the APIs answer again, steady resyncs change nothing.
async fn a_silent_cluster_api_holds_up_only_that_cluster_and_its_counts_are_kept(on: OnProvider) {
    let env = Env::start_on(on).await;
    let (a, policy, _) = env.creating_pool("latest", 1).await;
    env.update_policy(&a.pool_id, with_flavors(&policy, vec![flavor("cpu", on.node_size(), 2)]))
        .await;
    let (t, t_pools, t_pid) = env.ready_cluster("tenant").await;
    env.change_node_pool(&t_pools[0].node_pool_id, Some(Scale::Count(2)), false).await;
    let resized = env
        .run_until(40, async |e: &Env| {
            let s = e.substrate(&a.pool_id).await;
            let np = e.node_pool(&t_pools[0].node_pool_id).await;
            s.state == ResourceState::Ready
                && s.observed_generation == 2
                && s.nodes_joined == 2
                && np.state == NodePoolState::Ready
                && np.observed_generation == np.generation
                && np.nodes_listed == 2
        })
        .await;
    assert!(
        resized,
        "{:?} {:?}",
        env.substrate(&a.pool_id).await,
        env.node_pool(&t_pools[0].node_pool_id).await
    );
    // Steady, so both are read from the shared listing from here on.
    for _ in 0..2 {
        env.step(STEP).await;
    }
    let before = shown_of(&env, &a.pool_id, &t.cluster_id, &t_pools[0]).await;
    assert_eq!(before.substrate.0, ResourceState::Ready, "{before:?}");
    assert_eq!(before.tenant_cluster.0, ResourceState::Ready, "{before:?}");
    let resizes = env.calls(Call::UpdateNodePool);

    let kube = &env.sim.state().kube;
    let a_pid = env.substrate_cluster(&a.pool_id).await;
    for pid in [&a_pid, &t_pid] {
        kube.inject_failures(&env.kube_id(pid), None, SILENT, 503);
    }

    // The account's other objects are made and observed meanwhile.
    let cpu = flavor("cpu", on.node_size(), 1);
    let b = env.create_pool("api", env.create_policy("latest", vec![cpu])).await;
    let workers = ("workers", on.node_size(), Scale::Count(1));
    let (u, u_pools) = env.create_cluster("other", ClusterMode::Standard, vec![workers]).await;
    let made = env
        .run_until(40, async |e: &Env| {
            e.substrate(&b.pool_id).await.state == ResourceState::Ready
                && e.cluster(&u.cluster_id).await.status.state == ResourceState::Ready
                && e.node_pool(&u_pools[0].node_pool_id).await.state == NodePoolState::Ready
        })
        .await;
    assert!(
        made,
        "made while another cluster's API is silent: {:?} {:?}",
        env.substrate(&b.pool_id).await,
        env.cluster(&u.cluster_id).await
    );
    // Steady resyncs of everything, the silent clusters' included.
    for _ in 0..6 {
        env.step(STEP).await;
    }
    let silent = shown_of(&env, &a.pool_id, &t.cluster_id, &t_pools[0]).await;
    assert_eq!(silent, before, "the silent clusters' objects are as they were");
    assert_eq!(env.calls(Call::UpdateNodePool), resizes, "no resize asked");
    let b_ready = env.substrate(&b.pool_id).await;
    assert_eq!((b_ready.state, b_ready.nodes_joined), (ResourceState::Ready, 1), "{b_ready:?}");

    // The APIs answer again: all is as before, and stays so.
    kube.clear_faults();
    for _ in 0..6 {
        env.step(STEP).await;
    }
    let after = shown_of(&env, &a.pool_id, &t.cluster_id, &t_pools[0]).await;
    assert_eq!(after, before, "as before the APIs went silent");
    assert_eq!(env.calls(Call::UpdateNodePool), resizes, "no resize asked");
    assert_eq!(env.substrate(&b.pool_id).await.state, ResourceState::Ready);
    assert_eq!(env.cluster(&u.cluster_id).await.status.state, ResourceState::Ready);
}
