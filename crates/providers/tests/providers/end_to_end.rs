//! End to end over loopback HTTP: the DigitalOcean adapter creates a cluster with two
//! node pools in the simulator, a `ClusterSession` reaches its API with the kubeconfig
//! the adapter mints, the kube adapter applies the join Secret and the bcd DaemonSet
//! into it, and the simulated bcd agents call a test join endpoint with their node
//! names.
//!
//! Invariant kept: the two adapters compose through the ports alone (kubeconfig text in,
//! objects applied, nodes joined); every wait is a bounded loop on the stepped clock or
//! on simulator rounds, never a sleep.

use std::collections::BTreeSet;
use std::sync::Arc;

use bc_domain::name::LABEL_SUBSTRATE_POOL;
use bc_domain::ports::{
    ApplyOutcome, ClusterClient, ClusterSession, KubernetesProvider, ProviderClusterState,
};
use bc_providers::kube::KubeClusterApi;
use bc_sim::SimConfig;
use bc_sim::testing::{self, JoinServer, Served, Substrate};

use crate::common;

const POOL: &str = "pool-01hq3k5v9x8y7z6w5v4t3s2r1q";
const JOIN_TOKEN: &str = "bcj_end_to_end_join_token";

#[tokio::test]
async fn cluster_to_joined_nodes_over_loopback() {
    let served = Served::start(SimConfig::default()).await;
    let join = JoinServer::start().await;
    let provider = Arc::new(common::adapter(&served));

    let pool = |name: &str, count| {
        let mut p = testing::node_pool_request(name, count);
        p.labels = [(LABEL_SUBSTRATE_POOL.to_owned(), POOL.to_owned())].into();
        p
    };
    let created = provider
        .create_cluster(&testing::cluster_request(
            "bc-e2e",
            vec![pool("bc-e2e-small", 2), pool("bc-e2e-large", 1)],
        ))
        .await
        .unwrap();

    // Step the clock until the cluster runs (bounded: the simulator's fast delays are
    // seconds).
    let mut cluster = created;
    for _ in 0..30 {
        if cluster.state == ProviderClusterState::Running {
            break;
        }
        served.step(1);
        cluster = provider.get_cluster(&cluster.id).await.unwrap();
    }
    assert_eq!(cluster.state, ProviderClusterState::Running);
    let node_names: BTreeSet<String> =
        cluster.node_pools.iter().flat_map(|p| &p.nodes).map(|n| n.name.clone()).collect();
    assert_eq!(node_names.len(), 3);

    let session = ClusterSession::new(provider, Arc::new(KubeClusterApi::new()), &cluster.id);
    let substrate = Substrate {
        pool: POOL.into(),
        namespace: format!("bc-{POOL}"),
        ..Substrate::new(join.url(), JOIN_TOKEN)
    };
    let owner = testing::owner(POOL);
    for object in substrate.objects() {
        let outcome = session.apply_owned(&object, &owner).await.unwrap();
        assert_eq!(outcome, ApplyOutcome::Created, "{}", object.object);
    }
    let listed = session.list_nodes(&format!("{LABEL_SUBSTRATE_POOL}={POOL}")).await.unwrap();
    assert_eq!(listed.iter().map(|n| n.name.clone()).collect::<BTreeSet<_>>(), node_names);

    // Bounded rounds of the simulated agents until every node has called.
    testing::settle(&served.sim).await;
    let joined: BTreeSet<String> = join.callers().into_iter().collect();
    assert_eq!(joined, node_names);
    assert_eq!(join.calls().len(), node_names.len(), "each node once");
    assert!(join.calls().iter().all(|c| c["joinToken"] == JOIN_TOKEN));
    // Joined nodes do not call again while the token is unchanged.
    assert_eq!(bc_sim::bcd::run_once(served.sim.state()).await, 0);
}
