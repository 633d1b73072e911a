//! The simulated bcd against a recording join endpoint on loopback: which nodes call
//! (nodeSelector, tolerations, Secret present, server reachable), with what body, and
//! that joined nodes stay quiet until the token changes while failures retry.

use std::time::Duration;

use bc_domain::agent::JoinRequest;
use bc_domain::name::LABEL_SUBSTRATE_POOL;
use bc_domain::ports::Preconditions;
use bc_sim::kube::Resource;
use bc_sim::testing::{self, JoinServer, POOL, Substrate};
use bc_sim::{Sim, SimConfig, bcd};
use serde_json::json;

/// A running cluster: pool `bc-p1` (2 nodes, our label, tainted `gpu=true:NoSchedule`
/// when `taint`) and the tenant's pool `own` (1 node, no label).
fn cluster(config: SimConfig, taint: bool) -> (Sim, String) {
    let (sim, clock) = testing::sim(config);
    let mut bc = testing::node_pool("bc-p1", 2, &[(LABEL_SUBSTRATE_POOL, POOL)]);
    if taint {
        bc = testing::with_taint(bc, "gpu", "true", "NoSchedule");
    }
    let id = testing::create_cluster(&sim, "c1", vec![bc, testing::node_pool("own", 1, &[])]);
    testing::run_until_running(&sim, &clock, &id);
    (sim, id)
}

/// The substrate objects joining `join`'s server with `token`.
fn substrate(join: &JoinServer, token: &str) -> Substrate {
    Substrate::new(join.url(), token)
}

#[tokio::test]
async fn matching_nodes_join_once_and_rejoin_when_the_token_changes() {
    let join = JoinServer::start().await;
    let (sim, id) = cluster(SimConfig::default(), false);
    assert_eq!(testing::settle(&sim).await, 0, "no DaemonSet yet");
    substrate(&join, "tok-1").apply_direct(&sim, &id);

    assert_eq!(testing::settle(&sim).await, 2, "only the two labelled nodes call, once each");
    let nodes = sim.state().model().cluster_nodes(&id, sim.state().clock.now()).unwrap();
    let ours: Vec<_> =
        nodes.iter().filter(|n| n.labels.contains_key(LABEL_SUBSTRATE_POOL)).collect();
    for call in join.calls() {
        // The body is the agent contract's JoinRequest, field for field.
        let request: JoinRequest = serde_json::from_value(call.clone()).unwrap();
        assert_eq!(request.join_token.expose(), "tok-1");
        assert_eq!(request.bcd_version, bcd::BCD_VERSION);
        let node = ours.iter().find(|n| request.node_name == n.name).expect("a labelled node");
        assert_eq!(request.provider_node_id.as_deref(), Some(node.provider_id.as_str()));
        // The pod's projected token, bound to this node (issue 29, item 4).
        let review = bc_sim::kube::tokens::review(
            sim.state(),
            &id,
            request.service_account_token.expose(),
            &[],
        );
        assert_eq!(review["authenticated"], true, "{review}");
        assert_eq!(
            review["user"]["extra"]["authentication.kubernetes.io/node-name"],
            serde_json::json!([node.name])
        );
    }
    let outcomes = sim.state().bcd.join_outcomes();
    assert_eq!(outcomes.len(), 2);
    for ((cluster, node), o) in &outcomes {
        assert_eq!(cluster, &id);
        assert!(o.joined);
        assert_eq!(o.status, Some(201));
        assert_eq!(o.attempts, 1);
        assert_eq!(o.node_id, Some(testing::joined_node_id(node)));
        assert_eq!(o.daemonset, "bc-p1/bcd");
    }

    // Rotation: the Secret gets a new token, every node joins again.
    substrate(&join, "tok-2").apply_direct(&sim, &id);
    assert_eq!(testing::settle(&sim).await, 2);
    assert!(join.calls()[2..].iter().all(|c| c["joinToken"] == "tok-2"));

    // The DaemonSet goes away: its pods stop; when it comes back they join again.
    let now = sim.state().clock.now();
    let pre = Preconditions::default();
    sim.state().kube.delete(&id, Resource::DaemonSet, Some("bc-p1"), "bcd", &pre, now).unwrap();
    assert_eq!(testing::settle(&sim).await, 0);
    assert!(sim.state().bcd.join_outcomes().values().all(|o| !o.joined));
    substrate(&join, "tok-2").apply_direct(&sim, &id);
    assert_eq!(testing::settle(&sim).await, 2);
    assert_eq!(join.calls().len(), 6);
}

#[tokio::test]
async fn no_call_without_the_secret_the_node_name_or_on_untolerated_taints() {
    let join = JoinServer::start().await;
    let (sim, id) = cluster(SimConfig::default(), false);
    Substrate { with_secret: false, ..substrate(&join, "tok") }.apply_direct(&sim, &id);
    assert_eq!(testing::settle(&sim).await, 0, "the pod cannot start without its Secret");
    assert!(sim.state().bcd.join_outcomes().values().all(
        |o| o.attempts == 0 && o.last_error.as_deref().is_some_and(|e| e.contains("bcd-join"))
    ));

    // A DaemonSet that does not map NODE_NAME (SPEC §9): the agent cannot name its node.
    let (sim, id) = cluster(SimConfig::default(), false);
    let s = substrate(&join, "tok");
    s.apply_direct(&sim, &id);
    let mut ds = s.objects().pop().unwrap().manifest;
    let env = &mut ds["spec"]["template"]["spec"]["containers"][0]["env"];
    env.as_array_mut().unwrap().retain(|e| e["name"] != "NODE_NAME");
    let now = sim.state().clock.now();
    sim.state().kube.apply_manifest(&id, "better-compute", &ds, true, now).unwrap();
    assert_eq!(testing::settle(&sim).await, 0, "no NODE_NAME, no join");
    assert!(
        sim.state()
            .bcd
            .join_outcomes()
            .values()
            .all(|o| o.last_error.as_deref().is_some_and(|e| e.contains("NODE_NAME")))
    );

    let (sim, id) = cluster(SimConfig::default(), true);
    substrate(&join, "tok").apply_direct(&sim, &id);
    assert_eq!(testing::settle(&sim).await, 0, "tainted nodes without a toleration run no bcd");
    let tolerations = vec![json!({"key":"gpu","operator":"Exists","effect":"NoSchedule"})];
    Substrate { tolerations, ..substrate(&join, "tok") }.apply_direct(&sim, &id);
    assert_eq!(testing::settle(&sim).await, 2, "tolerated");
    assert_eq!(join.calls().len(), 2);
}

#[tokio::test]
async fn unreachable_server_failed_joins_and_answers_that_are_not_a_join_response() {
    let join = JoinServer::start().await;
    let config = SimConfig { bcd_reaches_server: false, ..SimConfig::default() };
    let (sim, id) = cluster(config, false);
    substrate(&join, "tok").apply_direct(&sim, &id);
    assert_eq!(bcd::run_once(sim.state()).await, 0);
    assert!(join.calls().is_empty());
    let outcomes = sim.state().bcd.join_outcomes();
    assert_eq!(outcomes.len(), 2);
    assert!(outcomes.values().all(|o| !o.joined && o.last_error.as_deref() == Some("unreachable")));

    // A refused join is retried on later rounds until it succeeds.
    let (sim, id) = cluster(SimConfig::default(), false);
    substrate(&join, "tok").apply_direct(&sim, &id);
    join.answer(Some(401));
    assert_eq!(bcd::run_once(sim.state()).await, 2);
    assert_eq!(bcd::run_once(sim.state()).await, 2);
    let outcomes = sim.state().bcd.join_outcomes();
    assert!(outcomes.values().all(|o| !o.joined && o.status == Some(401) && o.attempts == 2));
    join.answer(None);
    assert_eq!(testing::settle(&sim).await, 2);
    assert!(sim.state().bcd.join_outcomes().values().all(|o| o.joined && o.attempts == 3));

    // Nothing listens: a transport error, retried.
    let (sim, id) = cluster(SimConfig::default(), false);
    Substrate::new("http://127.0.0.1:9", "tok").apply_direct(&sim, &id);
    assert_eq!(bcd::run_once(sim.state()).await, 2);
    let outcomes = sim.state().bcd.join_outcomes();
    assert!(outcomes.values().all(|o| !o.joined && o.status.is_none() && o.last_error.is_some()));
}

#[tokio::test]
async fn spawn_runs_rounds_in_the_background_until_they_settle() {
    let join = JoinServer::start().await;
    let (sim, id) = cluster(SimConfig::default(), false);
    substrate(&join, "tok").apply_direct(&sim, &id);
    let mut agents = bcd::spawn(sim.state().clone(), Duration::from_millis(5));
    // Wait on the rounds themselves, bounded (a hang guard, not a timing assertion): the
    // first round joins both nodes, a later one finds nothing left to do.
    let rounds = testing::bounded(agents.wait_for(|r| r.calls >= 2 && r.settled())).await;
    assert_eq!(rounds.calls, 2);
    assert_eq!(join.calls().len(), 2, "each node joined exactly once");
    drop(agents);
}

/// c6e1c52: a bcd round read a pod's projected token (a cluster's objects) while it held
/// the joins — the reverse of the order the clusters' controllers take them in (objects,
/// then joins, inside a write): a deadlock when two threads met, which froze the whole
/// simulator. The lock-order check on every lock of the objects (`bc_sim::agents`) makes
/// the reverse order fail at once on one thread, so a round that takes it cannot pass.
#[tokio::test]
async fn a_bcd_round_locks_a_clusters_objects_before_the_joins_never_after() {
    let join = JoinServer::start().await;
    let (sim, id) = cluster(SimConfig::default(), false);
    substrate(&join, "tok-1").apply_direct(&sim, &id);
    assert_eq!(testing::settle(&sim).await, 2, "both labelled nodes join");
    substrate(&join, "tok-2").apply_direct(&sim, &id);
    assert_eq!(testing::settle(&sim).await, 2, "and join again with the new token");
}
