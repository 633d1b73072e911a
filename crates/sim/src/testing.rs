//! Test support: the simulator fixture that tests (here and in downstream crates) build
//! again and again — a stopped clock, a simulator on it, a cluster of node pools created
//! on the default account, stepped until it runs, and its kubeconfig.
//!
//! Always compiled (it is small) so other crates' tests and dev tooling can use it. Every
//! helper panics with a clear message on failure: it is meant for tests, not for serving.

use std::sync::Arc;

use bc_domain::Timestamp;
use bc_domain::ports::ManualClock;

use crate::model::{ClusterCreate, NodePoolSpec, NodeState, TaintSpec};
use crate::{Sim, SimConfig};

/// The bearer token of the one account the default [`SimConfig`] accepts.
pub use crate::config::DEFAULT_TOKEN as TEST_TOKEN;

/// Where [`clock`] starts (RFC 3339).
pub const START: &str = "2026-12-02T12:00:00Z";

/// The node size every helper pool uses.
pub const NODE_SIZE: &str = "s-2vcpu-4gb";

/// How far [`run_until_running`] moves the clock per step.
pub const RUN_STEP: time::Duration = time::Duration::seconds(60);

/// How many steps [`run_until_running`] takes before it gives up.
pub const RUN_MAX_STEPS: usize = 30;

/// A manual clock stopped at [`START`].
pub fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(Timestamp::parse_rfc3339(START).expect("START is RFC 3339")))
}

/// A simulator with `config` on a fresh [`clock`] (not served: call `Sim::serve` for the
/// HTTP faces), and that clock.
pub fn sim(config: SimConfig) -> (Sim, Arc<ManualClock>) {
    let clock = clock();
    (Sim::new(config, clock.clone()), clock)
}

/// A node pool request: `count` nodes of [`NODE_SIZE`] named `name`, with `labels`
/// (present even when empty) and no taints.
pub fn node_pool(name: &str, count: i64, labels: &[(&str, &str)]) -> NodePoolSpec {
    NodePoolSpec {
        name: Some(name.into()),
        size: Some(NODE_SIZE.into()),
        count: Some(count),
        labels: Some(labels.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()),
        ..Default::default()
    }
}

/// `spec` with one more taint `key=value:effect`.
pub fn with_taint(mut spec: NodePoolSpec, key: &str, value: &str, effect: &str) -> NodePoolSpec {
    spec.taints.get_or_insert_with(Vec::new).push(TaintSpec {
        key: Some(key.into()),
        value: Some(value.into()),
        effect: Some(effect.into()),
    });
    spec
}

/// Creates cluster `name` (region `nyc1`, version `latest`, node pools `pools`) on the
/// [`TEST_TOKEN`] account at the simulator's current time; returns its id. The cluster
/// starts provisioning: see [`run_until_running`].
pub fn create_cluster(sim: &Sim, name: &str, pools: Vec<NodePoolSpec>) -> String {
    let now = sim.state().clock.now();
    let req = ClusterCreate {
        name: Some(name.into()),
        region: Some("nyc1".into()),
        version: Some("latest".into()),
        node_pools: Some(pools),
        ..Default::default()
    };
    match sim.state().model().create_cluster(TEST_TOKEN, req, now) {
        Ok(c) => c.id,
        Err(e) => panic!("creating test cluster {name:?}: {e:?}"),
    }
}

/// Whether the cluster's API serves and every node of every pool is running.
fn fully_running(sim: &Sim, cluster_id: &str) -> bool {
    let now = sim.state().clock.now();
    let mut model = sim.state().model();
    model.cluster_is_running(cluster_id, now)
        && model.find_cluster(cluster_id, now).is_some_and(|c| {
            c.node_pools.iter().all(|p| p.nodes.iter().all(|n| n.state == NodeState::Running))
        })
}

/// Steps `clock` (the simulator's clock) by [`RUN_STEP`] until the cluster's API serves
/// and all its nodes run; panics after [`RUN_MAX_STEPS`] steps. With the default (fast)
/// delays one step is enough, so a provisioning cluster ends exactly one minute later.
pub fn run_until_running(sim: &Sim, clock: &ManualClock, cluster_id: &str) {
    for _ in 0..RUN_MAX_STEPS {
        if fully_running(sim, cluster_id) {
            return;
        }
        clock.advance(RUN_STEP);
    }
    assert!(
        fully_running(sim, cluster_id),
        "cluster {cluster_id} is not running with all its nodes after {RUN_MAX_STEPS} steps of \
         {RUN_STEP}"
    );
}

/// The kubeconfig YAML the DigitalOcean face serves for the cluster now (it points at the
/// HTTP face once the simulator is served); panics until the cluster has provisioned.
pub fn kubeconfig(sim: &Sim, cluster_id: &str) -> String {
    let now = sim.state().clock.now();
    match sim.state().model().kubeconfig(TEST_TOKEN, cluster_id, None, now) {
        Ok(yaml) => yaml,
        Err(e) => panic!("kubeconfig of test cluster {cluster_id}: {e:?}"),
    }
}
