//! The model's rules under a stepped `ManualClock` (research/digitalocean.md §9): no
//! sleeps, no timing assertions — time moves only when a test says so.

use std::time::Duration;

use bc_domain::ports::{Clock, ManualClock};
use bc_sim::SimState;
use bc_sim::config::{RateLimits, SimConfig};
use bc_sim::model::{
    ClusterCreate, ClusterState, ClusterUpdate, Fault, LbStatus, LoadBalancerSpec, Model,
    NodePoolSpec, NodeState, Selection, TaintSpec, catalog, routes,
};
use bc_sim::testing::{self, TEST_TOKEN as T, cluster_create, step};
use serde_json::json;

fn pool(name: &str, count: i64) -> NodePoolSpec {
    testing::node_pool(name, count, &[])
}

fn lb_req(v: serde_json::Value) -> LoadBalancerSpec {
    serde_json::from_value(v).expect("valid spec")
}

fn regional(name: &str) -> LoadBalancerSpec {
    lb_req(testing::lb_body(name))
}

/// Create a cluster and run the clock until it is running.
fn running_cluster(state: &SimState, clock: &ManualClock, pools: Vec<NodePoolSpec>) -> String {
    let now = clock.now();
    let c = state.model().create_cluster(T, cluster_create("c", "latest", pools), now).unwrap();
    step(clock, 10);
    assert!(state.model().cluster_is_running(&c.id, clock.now()));
    c.id
}

#[test]
fn cluster_provisioning_fills_endpoint_ipv4_node_names_and_droplets() {
    let (sim, clock) = testing::sim(SimConfig::default());
    let st = sim.state();
    let spec = testing::with_taint(
        testing::node_pool("workers", 2, &[("role", "bc")]),
        "dedicated",
        "bc",
        "NoSchedule",
    );
    let c = st
        .model()
        .create_cluster(T, cluster_create("alpha", "latest", vec![spec]), clock.now())
        .unwrap();
    assert_eq!(c.state, ClusterState::Provisioning);
    assert_eq!(c.message, "provisioning");
    assert_eq!(c.ipv4, "");
    assert_eq!(c.version, catalog::offered_versions()[0]);
    assert!(
        c.all_tags().contains(&format!("k8s:{}", c.id)) && c.all_tags().contains(&"k8s".to_owned())
    );
    let nodes = &c.node_pools[0].nodes;
    assert_eq!(nodes.len(), 2);
    assert!(nodes.iter().all(|n| n.name.is_empty()
        && n.droplet_id.is_empty()
        && n.state == NodeState::Provisioning));
    assert_eq!(st.model().cluster_nodes(&c.id, clock.now()), Some(vec![]));
    assert!(st.model().kubeconfig(T, &c.id, None, clock.now()).unwrap_err().status == 404);
    assert!(st.model().credentials(T, &c.id, None, clock.now()).unwrap_err().status == 404);
    assert!(!st.model().cluster_is_running(&c.id, clock.now()));

    step(&clock, 1);
    assert_eq!(
        st.model().get_cluster(T, &c.id, clock.now()).unwrap().state,
        ClusterState::Provisioning
    );
    step(&clock, 1);
    let c = st.model().get_cluster(T, &c.id, clock.now()).unwrap();
    assert_eq!(c.state, ClusterState::Running);
    assert!(!c.ipv4.is_empty());
    assert!(st.model().cluster_is_running(&c.id, clock.now()));
    let p = &c.node_pools[0];
    for n in &p.nodes {
        assert_eq!(n.state, NodeState::Running);
        assert!(n.name.starts_with("workers-"), "{}", n.name);
        assert!(n.droplet_id.parse::<u64>().is_ok());
    }
    let nodes = st.model().cluster_nodes(&c.id, clock.now()).unwrap();
    assert_eq!(nodes.len(), 2);
    let n = &nodes[0];
    assert!(n.ready);
    assert_eq!(n.provider_id, format!("digitalocean://{}", p.nodes[0].droplet_id));
    assert_eq!(n.labels["role"], "bc");
    assert_eq!(n.labels["kubernetes.io/hostname"], n.name);
    assert_eq!(n.labels["doks.digitalocean.com/node-pool"], "workers");
    assert_eq!(n.labels["doks.digitalocean.com/node-pool-id"], p.id);
    assert_eq!(n.taints[0].key, "dedicated");

    let yaml = st.model().kubeconfig(T, &c.id, None, clock.now()).unwrap();
    let token = yaml_token(&yaml);
    assert!(st.model().cluster_accepts(&c.id, Some(&token), clock.now()));
    assert!(yaml.contains("current-context: \"do-nyc1-alpha\""));
    assert!(yaml.contains("do-nyc1-alpha-admin"));
    let creds = st.model().credentials(T, &c.id, Some(3600), clock.now()).unwrap();
    assert_ne!(creds.token, token, "each request hands out a token of its own");
    assert_eq!(creds.expires_at, clock.now() + time::Duration::hours(1));
    let creds = st.model().credentials(T, &c.id, None, clock.now()).unwrap();
    assert_eq!(creds.expires_at, clock.now() + time::Duration::days(7));
}

/// The bearer token of a kubeconfig YAML the simulator rendered.
fn yaml_token(yaml: &str) -> String {
    let line = yaml.lines().find_map(|l| l.trim().strip_prefix("token: ")).expect("a token line");
    serde_json::from_str(line).expect("a quoted token")
}

/// A kubeconfig's or credentials' token lives `expiry_seconds` (DigitalOcean: 0 or none
/// is 7 days) and the cluster's API refuses it after that, so a client that never
/// fetches a new kubeconfig in time is caught here as on DigitalOcean. Revoking the
/// cluster's tokens ends every one handed out.
#[test]
fn a_kubeconfig_token_expires_after_expiry_seconds() {
    let (sim, clock) = testing::sim(SimConfig::default());
    let c = testing::create_cluster(&sim, "alpha", vec![testing::node_pool("workers", 1, &[])]);
    testing::run_until_running(&sim, &clock, &c);
    let st = sim.state();
    let t0 = clock.now();
    let short = yaml_token(&st.model().kubeconfig(T, &c, Some(600), t0).unwrap());
    let week = yaml_token(&st.model().kubeconfig(T, &c, Some(0), t0).unwrap());
    let creds = st.model().credentials(T, &c, Some(60), t0).unwrap();
    let accepts = |token: &str, after: time::Duration| {
        st.model().cluster_accepts(&c, Some(token), t0 + after)
    };
    assert!(accepts(&short, time::Duration::seconds(599)));
    assert!(!accepts(&short, time::Duration::seconds(600)), "expired after 600 s");
    assert!(accepts(&creds.token, time::Duration::seconds(59)));
    assert!(!accepts(&creds.token, time::Duration::seconds(60)));
    assert!(accepts(&week, time::Duration::days(7) - time::Duration::seconds(1)));
    assert!(!accepts(&week, time::Duration::days(7)));
    assert!(!accepts("doks-sim-made-up", time::Duration::ZERO));

    st.model().revoke_cluster_token(&c).unwrap();
    assert!(!accepts(&week, time::Duration::seconds(1)), "revoked with the cluster's tokens");
}

#[test]
fn create_validation_refuses_per_options() {
    let (sim, clock) = testing::sim(SimConfig::default());
    let mut m = sim.state().model();
    let now = clock.now();
    let err = |m: &mut Model, r: ClusterCreate| m.create_cluster(T, r, now).unwrap_err();
    assert_eq!(err(&mut m, ClusterCreate::default()).status, 422);
    let mut r = cluster_create("a", "latest", vec![pool("p", 1)]);
    r.region = Some("mars1".into());
    assert_eq!(err(&mut m, r).status, 422);
    assert_eq!(err(&mut m, cluster_create("a", "1.20.0-do.0", vec![pool("p", 1)])).status, 422);
    // 1.32.5 exists but is not offered for new clusters (only each minor's latest patch).
    assert_eq!(err(&mut m, cluster_create("a", "1.32.5-do.0", vec![pool("p", 1)])).status, 422);
    assert_eq!(err(&mut m, cluster_create("a", "latest", vec![])).status, 422);
    assert_eq!(err(&mut m, cluster_create("a", "latest", vec![pool("p", 0)])).status, 422);
    let mut p = pool("p", 1);
    p.size = Some("s-64vcpu".into());
    assert_eq!(err(&mut m, cluster_create("a", "latest", vec![p])).status, 422);
    let mut p = pool("p", 1);
    p.taints = Some(vec![TaintSpec {
        key: Some("k".into()),
        value: None,
        effect: Some("Sometimes".into()),
    }]);
    assert_eq!(err(&mut m, cluster_create("a", "latest", vec![p])).status, 422);
    let mut r = cluster_create("a", "latest", vec![pool("p", 1)]);
    r.tags = Some(vec!["k8s-mine".into()]);
    assert_eq!(err(&mut m, r).status, 422);
    // Scale to zero is allowed with autoscaling from 0.
    let mut p = pool("p", 0);
    p.auto_scale = Some(true);
    p.min_nodes = Some(0);
    p.max_nodes = Some(3);
    let ok = m.create_cluster(T, cluster_create("a", "1.32", vec![p, pool("q", 1)]), now).unwrap();
    assert_eq!(ok.version, "1.32.6-do.1");
    // Names are unique per account.
    assert_eq!(err(&mut m, cluster_create("a", "latest", vec![pool("p", 1)])).status, 422);
    // Unknown token → 401.
    assert_eq!(
        m.create_cluster("nope", cluster_create("b", "latest", vec![pool("p", 1)]), now)
            .unwrap_err()
            .status,
        401
    );
}

#[test]
fn cluster_update_keeps_server_tags_and_immutables() {
    let (sim, clock) = testing::sim(SimConfig::default());
    let st = sim.state();
    let id = running_cluster(st, &clock, vec![pool("p", 1)]);
    let now = clock.now();
    let mut m = st.model();
    let upd = |name: &str, tags: Vec<String>| ClusterUpdate {
        name: Some(name.into()),
        tags: Some(tags),
        ..Default::default()
    };
    let c = m
        .update_cluster(
            T,
            &id,
            upd("renamed", vec!["k8s".into(), format!("k8s:{id}"), "team-a".into()]),
            now,
        )
        .unwrap();
    assert_eq!(c.name, "renamed");
    assert_eq!(c.tags, vec!["team-a".to_owned()]);
    assert_eq!(c.all_tags().len(), 3);
    assert_eq!(m.update_cluster(T, &id, ClusterUpdate::default(), now).unwrap_err().status, 422);
    let bad = ClusterUpdate {
        name: Some("renamed".into()),
        region: Some("ams3".into()),
        ..Default::default()
    };
    assert_eq!(m.update_cluster(T, &id, bad, now).unwrap_err().status, 422);
    let ha = ClusterUpdate { name: Some("renamed".into()), ha: Some(true), ..Default::default() };
    assert!(m.update_cluster(T, &id, ha, now).unwrap().ha);
    let no_ha =
        ClusterUpdate { name: Some("renamed".into()), ha: Some(false), ..Default::default() };
    assert_eq!(m.update_cluster(T, &id, no_ha, now).unwrap_err().status, 422);
}

#[test]
fn upgrade_path_needs_latest_patch_before_next_minor() {
    assert_eq!(catalog::offered_versions(), vec!["1.33.1-do.0", "1.32.6-do.1", "1.31.9-do.0"]);
    assert_eq!(catalog::upgrades_from("1.31.9-do.0"), vec!["1.32.5-do.0", "1.32.6-do.1"]);
    assert_eq!(catalog::upgrades_from("1.32.5-do.0"), vec!["1.32.6-do.1"]);
    assert_eq!(catalog::upgrades_from("1.32.6-do.1"), vec!["1.33.1-do.0"]);
    assert!(catalog::upgrades_from("1.33.1-do.0").is_empty());

    let (sim, clock) = testing::sim(SimConfig::default());
    let st = sim.state();
    let c = st
        .model()
        .create_cluster(T, cluster_create("u", "1.31", vec![pool("p", 1)]), clock.now())
        .unwrap();
    assert_eq!(c.version, "1.31.9-do.0");
    // Not while provisioning.
    assert_eq!(
        st.model().upgrade_cluster(T, &c.id, "1.32.5-do.0", clock.now()).unwrap_err().status,
        422
    );
    step(&clock, 5);
    assert!(st.model().force_cluster_version(&c.id, "1.32.5-do.0"));
    let now = clock.now();
    assert_eq!(st.model().upgrades(T, &c.id, now).unwrap(), vec!["1.32.6-do.1"]);
    let e = st.model().upgrade_cluster(T, &c.id, "1.33.1-do.0", now).unwrap_err();
    assert_eq!((e.status, e.message.as_str()), (422, "invalid upgrade path"));
    assert_eq!(st.model().upgrade_cluster(T, &c.id, "1.31.9-do.0", now).unwrap_err().status, 422);
    let before = st.model().cluster_nodes(&c.id, now).unwrap();
    st.model().upgrade_cluster(T, &c.id, "1.32.6-do.1", now).unwrap();
    let up = st.model().get_cluster(T, &c.id, now).unwrap();
    assert_eq!((up.state, up.version.as_str()), (ClusterState::Upgrading, "1.32.5-do.0"));
    step(&clock, 2);
    let done = st.model().get_cluster(T, &c.id, clock.now()).unwrap();
    assert_eq!((done.state, done.version.as_str()), (ClusterState::Running, "1.32.6-do.1"));
    assert_eq!(st.model().upgrades(T, &c.id, clock.now()).unwrap(), vec!["1.33.1-do.0"]);
    // Nodes were replaced by new droplets.
    let after = st.model().cluster_nodes(&c.id, clock.now()).unwrap();
    assert_eq!(after.len(), before.len());
    assert_ne!(after[0].name, before[0].name);
}

#[test]
fn node_pools_cannot_change_while_the_cluster_upgrades() {
    let (sim, clock) = testing::sim(SimConfig::default());
    let st = sim.state();
    let c = running_cluster(st, &clock, vec![pool("p", 1)]);
    let p = st.model().get_cluster(T, &c, clock.now()).unwrap().node_pools[0].id.clone();
    st.model().upgrade_cluster(T, &c, "1.33.1-do.0", clock.now()).unwrap_or_default();
    assert!(st.model().force_cluster_state(&c, ClusterState::Upgrading, ""));
    let now = clock.now();
    let busy = bc_providers::classify::digitalocean::DOKS_BUSY_MARKER;
    // One lock of the model per call (temporaries in the array would hold each).
    let created = st.model().create_node_pool(T, &c, pool("q", 1), now).unwrap_err();
    let updated = st.model().update_node_pool(T, &c, &p, pool("p", 2), now).unwrap_err();
    let deleted = st.model().delete_node_pool(T, &c, &p, now).unwrap_err();
    for e in [created, updated, deleted] {
        assert_eq!(e.status, 422);
        assert!(e.message.contains(busy), "{}", e.message);
    }
    assert!(st.model().force_cluster_state(&c, ClusterState::Running, ""));
    st.model().create_node_pool(T, &c, pool("q", 1), clock.now()).expect("done upgrading");
}

#[test]
fn resize_down_drains_then_deletes_then_removes() {
    let (sim, clock) = testing::sim(SimConfig::default());
    let st = sim.state();
    let id = running_cluster(st, &clock, vec![pool("p", 3)]);
    let pid = st.model().list_node_pools(T, &id, clock.now()).unwrap()[0].id.clone();
    let mut spec = pool("p", 1);
    spec.size = None;
    let p = st.model().update_node_pool(T, &id, &pid, spec, clock.now()).unwrap();
    assert_eq!(p.count, 1);
    let states: Vec<_> = p.nodes.iter().map(|n| n.state).collect();
    assert_eq!(states, vec![NodeState::Running, NodeState::Draining, NodeState::Draining]);
    step(&clock, 1);
    let p = st.model().get_node_pool(T, &id, &pid, clock.now()).unwrap();
    let states: Vec<_> = p.nodes.iter().map(|n| n.state).collect();
    assert_eq!(states, vec![NodeState::Running, NodeState::Deleting, NodeState::Deleting]);
    step(&clock, 1);
    let p = st.model().get_node_pool(T, &id, &pid, clock.now()).unwrap();
    assert_eq!(p.nodes.len(), 1);
    // Resize up adds provisioning nodes with no name yet.
    let p = st.model().update_node_pool(T, &id, &pid, pool("p", 2), clock.now()).unwrap();
    assert_eq!(p.nodes[1].state, NodeState::Provisioning);
    assert!(p.nodes[1].name.is_empty());
    // The size is immutable.
    let mut other = pool("p", 2);
    other.size = Some("c-4".into());
    assert_eq!(
        st.model().update_node_pool(T, &id, &pid, other, clock.now()).unwrap_err().status,
        422
    );
    // Delete the pool: nodes drain, then it is gone.
    st.model().delete_node_pool(T, &id, &pid, clock.now()).unwrap();
    assert!(st.model().get_node_pool(T, &id, &pid, clock.now()).unwrap().deleting);
    step(&clock, 2);
    assert_eq!(st.model().get_node_pool(T, &id, &pid, clock.now()).unwrap_err().status, 404);
}

#[test]
fn delete_node_replace_keeps_count_shrink_drops_one() {
    let (sim, clock) = testing::sim(SimConfig::default());
    let st = sim.state();
    let id = running_cluster(st, &clock, vec![pool("p", 2)]);
    let p = st.model().list_node_pools(T, &id, clock.now()).unwrap().remove(0);
    let (a, b) = (p.nodes[0].id.clone(), p.nodes[1].id.clone());
    st.model().delete_node(T, &id, &p.id, &a, false, true, clock.now()).unwrap();
    let q = st.model().get_node_pool(T, &id, &p.id, clock.now()).unwrap();
    assert_eq!(q.count, 2);
    assert_eq!(q.nodes.len(), 3);
    assert_eq!(q.nodes[0].state, NodeState::Draining);
    assert_eq!(q.nodes[2].state, NodeState::Provisioning);
    st.model().delete_node(T, &id, &p.id, &b, true, false, clock.now()).unwrap();
    let q = st.model().get_node_pool(T, &id, &p.id, clock.now()).unwrap();
    assert_eq!(q.count, 1);
    assert_eq!(q.nodes[1].state, NodeState::Deleting, "skip_drain goes straight to deleting");
    step(&clock, 5);
    let q = st.model().get_node_pool(T, &id, &p.id, clock.now()).unwrap();
    assert_eq!(q.nodes.len(), 1);
    assert_eq!(q.nodes[0].state, NodeState::Running);
    assert_eq!(
        st.model()
            .delete_node(T, &id, &p.id, "nope", false, false, clock.now())
            .unwrap_err()
            .status,
        404
    );
}

#[test]
fn cluster_delete_goes_deleting_then_404() {
    let (sim, clock) = testing::sim(SimConfig::default());
    let st = sim.state();
    let id = running_cluster(st, &clock, vec![pool("p", 1)]);
    st.model().delete_cluster(T, &id, clock.now()).unwrap();
    assert_eq!(st.model().get_cluster(T, &id, clock.now()).unwrap().state, ClusterState::Deleting);
    assert_eq!(st.model().cluster_nodes(&id, clock.now()), None);
    step(&clock, 1);
    assert_eq!(st.model().get_cluster(T, &id, clock.now()).unwrap_err().status, 404);
    assert_eq!(st.model().delete_cluster(T, &id, clock.now()).unwrap_err().status, 404);
}

#[test]
fn forced_error_and_degraded_carry_messages() {
    let (sim, clock) = testing::sim(SimConfig::default());
    let st = sim.state();
    let c = st
        .model()
        .create_cluster(T, cluster_create("e", "latest", vec![pool("p", 1)]), clock.now())
        .unwrap();
    assert!(st.model().force_cluster_state(&c.id, ClusterState::Error, "droplet create failed"));
    step(&clock, 10);
    let got = st.model().get_cluster(T, &c.id, clock.now()).unwrap();
    assert_eq!((got.state, got.message.as_str()), (ClusterState::Error, "droplet create failed"));
    assert!(st.model().force_cluster_state(&c.id, ClusterState::Degraded, "etcd slow"));
    assert_eq!(
        st.model().get_cluster(T, &c.id, clock.now()).unwrap().state,
        ClusterState::Degraded
    );
}

#[test]
fn load_balancer_new_to_active_and_busy_window() {
    let (sim, clock) = testing::sim(SimConfig::default());
    let st = sim.state();
    let lb = st.model().create_load_balancer(T, regional("web"), clock.now()).unwrap();
    assert_eq!((lb.status, lb.ip.as_str()), (LbStatus::New, ""));
    assert_eq!(lb.region.as_deref(), Some("nyc1"));
    let e = st.model().update_load_balancer(T, &lb.id, regional("web"), clock.now()).unwrap_err();
    assert_eq!((e.status, e.id), (403, "forbidden"));
    assert!(e.message.contains("processes previous actions"));
    step(&clock, 1);
    let got = st.model().get_load_balancer(T, &lb.id, clock.now()).unwrap();
    assert_eq!(got.status, LbStatus::Active);
    assert!(!got.ip.is_empty());
    st.model().update_load_balancer(T, &lb.id, regional("web"), clock.now()).unwrap();
    assert_eq!(
        st.model()
            .update_load_balancer(T, &lb.id, regional("web"), clock.now())
            .unwrap_err()
            .status,
        403
    );
    step(&clock, 1);
    assert!(st.model().update_load_balancer(T, &lb.id, regional("web"), clock.now()).is_ok());
    // Errored injection and deletion behind our back.
    assert!(st.model().force_load_balancer_errored(&lb.id));
    assert_eq!(
        st.model().get_load_balancer(T, &lb.id, clock.now()).unwrap().status,
        LbStatus::Errored
    );
    assert!(st.model().delete_load_balancer_behind_back(&lb.id));
    assert_eq!(st.model().get_load_balancer(T, &lb.id, clock.now()).unwrap_err().status, 404);
    assert_eq!(st.model().delete_load_balancer(T, &lb.id, clock.now()).unwrap_err().status, 404);
}

#[test]
fn load_balancer_put_is_full_replace_with_defaults() {
    let (sim, clock) = testing::sim(SimConfig::default());
    let st = sim.state();
    let full = lb_req(json!({
        "name": "full", "region": "fra1", "size_unit": 2,
        "forwarding_rules": [{"entry_protocol": "https", "entry_port": 443, "target_protocol": "http", "target_port": 80, "certificate_id": "cert-1"}],
        "health_check": {"protocol": "tcp", "port": 8080, "check_interval_seconds": 20, "response_timeout_seconds": 10, "healthy_threshold": 2, "unhealthy_threshold": 4},
        "sticky_sessions": {"type": "cookies", "cookie_name": "s", "cookie_ttl_seconds": 300},
        "tag": "web", "redirect_http_to_https": true, "http_idle_timeout_seconds": 120,
        "firewall": {"allow": ["ip:1.2.3.4"], "deny": []}, "tags": ["k8s:abc"],
    }));
    let lb = st.model().create_load_balancer(T, full, clock.now()).unwrap();
    assert_eq!(lb.health_check.port, 8080);
    step(&clock, 1);
    let minimal = lb_req(json!({
        "name": "full", "region": "fra1",
        "forwarding_rules": [{"entry_protocol": "http", "entry_port": 80, "target_protocol": "http", "target_port": 80}],
    }));
    let got = st.model().update_load_balancer(T, &lb.id, minimal, clock.now()).unwrap();
    let hc = &got.health_check;
    assert_eq!(
        (
            hc.protocol.as_str(),
            hc.port,
            hc.path.as_str(),
            hc.check_interval_seconds,
            hc.response_timeout_seconds,
            hc.healthy_threshold,
            hc.unhealthy_threshold
        ),
        ("http", 80, "/", 10, 5, 5, 3)
    );
    assert_eq!(got.sticky_sessions.kind, "none");
    assert_eq!(got.tag, "");
    assert!(!got.redirect_http_to_https);
    assert_eq!(got.http_idle_timeout_seconds, 60);
    assert!(got.firewall.allow.is_empty());
    assert_eq!(got.size_unit, 1);
    // Tags are create-only: kept.
    assert_eq!(got.tags, vec!["k8s:abc".to_owned()]);
    assert_eq!(got.status, LbStatus::Active);
}

#[test]
fn load_balancer_validation_422s() {
    let (sim, clock) = testing::sim(SimConfig::default());
    let st = sim.state();
    let now = clock.now();
    let mut m = st.model();
    let mut e = |v: serde_json::Value| m.create_load_balancer(T, lb_req(v), now).unwrap_err();
    let rule = json!([{"entry_protocol": "http", "entry_port": 80, "target_protocol": "http", "target_port": 80}]);
    assert_eq!(e(json!({"region": "nyc1", "forwarding_rules": rule})).status, 422);
    assert_eq!(
        e(json!({"name": "a", "forwarding_rules": rule})).status,
        422,
        "regional needs a region"
    );
    assert_eq!(e(json!({"name": "a", "region": "nyc1"})).status, 422, "needs a forwarding rule");
    assert_eq!(e(json!({"name": "a", "region": "nyc1", "forwarding_rules": rule, "tag": "t", "droplet_ids": [1]})).status, 422);
    assert_eq!(
        e(json!({"name": "a", "type": "GLOBAL", "region": "nyc1"})).status,
        422,
        "GLOBAL with a region"
    );
    assert_eq!(
        e(json!({"name": "a", "type": "GLOBAL", "target_load_balancer_ids": ["nope"]})).status,
        422
    );
    assert_eq!(e(json!({"name": "a", "region": "nyc1", "forwarding_rules": [{"entry_protocol": "udp", "entry_port": 53, "target_protocol": "tcp", "target_port": 53}]})).status, 422);
    assert_eq!(e(json!({"name": "a", "region": "nyc1", "forwarding_rules": rule, "http_idle_timeout_seconds": 5})).status, 422);
    assert_eq!(e(json!({"name": "a", "region": "nyc1", "forwarding_rules": rule, "size": "lb-small", "size_unit": 1})).status, 422);
    m.create_load_balancer(T, regional("dup"), now).unwrap();
    let dup = m.create_load_balancer(T, regional("dup"), now).unwrap_err();
    assert_eq!((dup.status, dup.message.as_str()), (422, "name is not unique"));
}

#[test]
fn load_balancer_resize_once_per_minute_and_immutables() {
    let (sim, clock) = testing::sim(SimConfig::default());
    let st = sim.state();
    let lb = st.model().create_load_balancer(T, regional("r"), clock.now()).unwrap();
    step(&clock, 1);
    let mut bigger = regional("r");
    bigger.size_unit = Some(2);
    assert_eq!(
        st.model().update_load_balancer(T, &lb.id, bigger.clone(), clock.now()).unwrap().size_unit,
        2
    );
    step(&clock, 5);
    bigger.size_unit = Some(3);
    let e = st.model().update_load_balancer(T, &lb.id, bigger.clone(), clock.now()).unwrap_err();
    assert_eq!(e.status, 422);
    step(&clock, 60);
    assert_eq!(
        st.model().update_load_balancer(T, &lb.id, bigger, clock.now()).unwrap().size_unit,
        3
    );
    step(&clock, 2);
    let mut moved = regional("r");
    moved.size_unit = Some(3);
    moved.region = Some(json!("ams3"));
    assert_eq!(
        st.model().update_load_balancer(T, &lb.id, moved, clock.now()).unwrap_err().status,
        422
    );
    let mut retyped = regional("r");
    retyped.size_unit = Some(3);
    retyped.kind = Some("REGIONAL_NETWORK".into());
    assert_eq!(
        st.model().update_load_balancer(T, &lb.id, retyped, clock.now()).unwrap_err().status,
        422
    );
}

#[test]
fn global_load_balancer_rules() {
    let (sim, clock) = testing::sim(SimConfig::default());
    let st = sim.state();
    let r = st.model().create_load_balancer(T, regional("backend"), clock.now()).unwrap();
    let g = st
        .model()
        .create_load_balancer(
            T,
            lb_req(json!({
                "name": "glb", "type": "GLOBAL",
                "glb_settings": {"target_protocol": "http", "target_port": 80},
                "domains": [{"name": "example.com", "is_managed": true}],
                "target_load_balancer_ids": [r.id],
            })),
            clock.now(),
        )
        .unwrap();
    assert_eq!(g.region, None);
    assert!(g.forwarding_rules.is_empty());
    assert_eq!(g.glb_settings.as_ref().unwrap().target_protocol, "http");
    assert_eq!(g.domains[0].status, "CREATING");
    assert_eq!(g.target_load_balancer_ids, vec![r.id.clone()]);
    // A global load balancer cannot target another global one.
    let bad = lb_req(json!({"name": "glb2", "type": "GLOBAL", "target_load_balancer_ids": [g.id]}));
    assert_eq!(st.model().create_load_balancer(T, bad, clock.now()).unwrap_err().status, 422);
    step(&clock, 1);
    let g2 = st.model().get_load_balancer(T, &g.id, clock.now()).unwrap();
    assert_eq!(g2.status, LbStatus::Active);
    assert_eq!(g2.domains[0].status, "ACTIVE");
    // GLOBAL cannot be scaled.
    let scaled = lb_req(
        json!({"name": "glb", "type": "GLOBAL", "size_unit": 2, "target_load_balancer_ids": [r.id]}),
    );
    assert_eq!(
        st.model().update_load_balancer(T, &g.id, scaled, clock.now()).unwrap_err().status,
        422
    );
}

#[test]
fn associated_resources_plain_selective_dangerous() {
    let (sim, clock) = testing::sim(SimConfig::default());
    let st = sim.state();
    let make = |name: &str| {
        let id = running_cluster(st, &clock, vec![pool("p", 1)]);
        // Cluster names are unique; rename so the next one can be "c" again.
        st.model()
            .update_cluster(
                T,
                &id,
                ClusterUpdate { name: Some(name.into()), ..Default::default() },
                clock.now(),
            )
            .unwrap();
        let mut lb = regional(&format!("lb-{name}"));
        lb.tags = Some(vec![format!("k8s:{id}")]);
        let lb = st.model().create_load_balancer(T, lb, clock.now()).unwrap();
        let vol = st.model().inject_volume(T, &id, &format!("pvc-{name}")).unwrap();
        let snap = st.model().inject_volume_snapshot(T, &id, &format!("snap-{name}")).unwrap();
        (id, lb.id, vol, snap)
    };
    let (plain, plain_lb, _, _) = make("plain");
    let a = st.model().associated_resources(T, &plain, clock.now()).unwrap();
    assert_eq!(a.load_balancers, vec![(plain_lb.clone(), "lb-plain".to_owned())]);
    assert_eq!((a.volumes.len(), a.volume_snapshots.len()), (1, 1));
    st.model().delete_cluster(T, &plain, clock.now()).unwrap();
    step(&clock, 2);
    assert!(
        st.model().get_load_balancer(T, &plain_lb, clock.now()).is_ok(),
        "plain delete leaves LBs"
    );

    let (sel, sel_lb, sel_vol, sel_snap) = make("sel");
    let selection = Selection { volumes: vec![sel_vol.clone()], ..Default::default() };
    st.model().delete_cluster_selective(T, &sel, &selection, clock.now()).unwrap();
    // While the cluster is still deleting, what was not listed is still associated.
    let left = st.model().associated_resources(T, &sel, clock.now()).unwrap();
    assert_eq!(
        left.load_balancers,
        vec![(sel_lb.clone(), "lb-sel".to_owned())],
        "unlisted LB survives"
    );
    assert!(left.volumes.is_empty(), "listed volume is gone");
    assert_eq!(left.volume_snapshots.len(), 1);
    assert_eq!(left.volume_snapshots[0].0, sel_snap);

    let (dang, dang_lb, _, _) = make("dang");
    st.model().delete_cluster_dangerous(T, &dang, clock.now()).unwrap();
    assert_eq!(st.model().get_load_balancer(T, &dang_lb, clock.now()).unwrap_err().status, 404);
    step(&clock, 2);
    assert_eq!(st.model().get_cluster(T, &dang, clock.now()).unwrap_err().status, 404);
}

#[test]
fn rate_limits_slide_per_minute_and_per_hour() {
    let config = SimConfig {
        rate_limits: RateLimits { per_hour: 8, per_minute: 3 },
        ..SimConfig::default()
    };
    let (sim, clock) = testing::sim(config);
    let st = sim.state();
    let key = routes::key("GET", routes::CLUSTERS);
    let t0 = clock.now();
    for i in 0..3 {
        let a = st.model().admit(Some(T), &key, clock.now());
        assert!(a.result.is_ok());
        assert_eq!(a.rate.limit, 8);
        assert_eq!(a.rate.remaining, 7 - i);
        assert_eq!(a.rate.reset, t0.unix_ms() / 1000 + 3600);
        step(&clock, 10);
    }
    // t0+30: burst of 3 in the last minute → 429 with retry-after until t0+60.
    let a = st.model().admit(Some(T), &key, clock.now());
    let e = a.result.unwrap_err();
    assert_eq!(
        (e.status, e.id, e.message.as_str()),
        (429, "too_many_requests", "API rate limit exceeded.")
    );
    assert_eq!(e.retry_after, Some(30));
    assert_eq!(a.rate.remaining, 5, "a refused request is not counted");
    step(&clock, 30);
    assert!(st.model().admit(Some(T), &key, clock.now()).result.is_ok());
    // Use the rest of the hour's quota, one minute apart.
    for _ in 0..4 {
        step(&clock, 60);
        assert!(st.model().admit(Some(T), &key, clock.now()).result.is_ok());
    }
    step(&clock, 60);
    let a = st.model().admit(Some(T), &key, clock.now());
    let e = a.result.unwrap_err();
    assert_eq!((e.status, e.retry_after), (429, None), "hourly exhaustion carries no retry-after");
    assert_eq!(a.rate.remaining, 0);
    assert_eq!(a.rate.reset, t0.unix_ms() / 1000 + 3600);
    // The oldest request ages out an hour after it was made: quota returns one by one.
    clock.set(t0 + time::Duration::seconds(3600));
    let a = st.model().admit(Some(T), &key, clock.now());
    assert!(a.result.is_ok());
    assert_eq!(a.rate.reset, t0.unix_ms() / 1000 + 3610);
    // Unknown token: 401 without counting.
    assert_eq!(st.model().admit(Some("bad"), &key, clock.now()).result.unwrap_err().status, 401);
    assert_eq!(st.model().admit(None, &key, clock.now()).result.unwrap_err().id, "unauthorized");
}

#[test]
fn faults_refusals_counters_and_brief_404() {
    let (sim, clock) = testing::sim(SimConfig::default());
    let st = sim.state();
    let key = routes::key("PUT", routes::NODE_POOL);
    st.model().inject_failures(&key, 2, Fault::ServerError);
    st.model().inject_failures(&key, 1, Fault::TooManyRequests { retry_after: 7 });
    let mut m = st.model();
    let now = clock.now();
    assert_eq!(m.admit(Some(T), &key, now).result.unwrap_err().status, 500);
    assert_eq!(m.admit(Some(T), &key, now).result.unwrap_err().id, "server_error");
    assert_eq!(m.admit(Some(T), &key, now).result.unwrap_err().retry_after, Some(7));
    assert!(m.admit(Some(T), &key, now).result.is_ok());
    assert!(m.admit(Some(T), &routes::key("GET", routes::CLUSTERS), now).result.is_ok());
    assert_eq!(m.request_count(&key), 4);
    assert_eq!(m.total_requests(), 5);
    m.refuse(&routes::key("POST", routes::UPGRADE), "upgrades are paused");
    let e = m.admit(Some(T), &routes::key("POST", routes::UPGRADE), now).result.unwrap_err();
    assert_eq!((e.status, e.message.as_str()), (422, "upgrades are paused"));
    m.clear_refusal(&routes::key("POST", routes::UPGRADE));
    assert!(m.admit(Some(T), &routes::key("POST", routes::UPGRADE), now).result.is_ok());
    m.reset_request_counts();
    assert_eq!(m.total_requests(), 0);

    m.set_brief_not_found(Some(Duration::from_secs(3)));
    let c = m.create_cluster(T, cluster_create("b", "latest", vec![pool("p", 1)]), now).unwrap();
    let lb = m.create_load_balancer(T, regional("b"), now).unwrap();
    assert_eq!(m.get_cluster(T, &c.id, now).unwrap_err().status, 404);
    assert_eq!(m.get_load_balancer(T, &lb.id, now).unwrap_err().status, 404);
    assert_eq!(m.list_clusters(T, now).unwrap().len(), 1, "lists are not affected");
    drop(m);
    step(&clock, 3);
    assert!(st.model().get_cluster(T, &c.id, clock.now()).is_ok());
    assert!(st.model().get_load_balancer(T, &lb.id, clock.now()).is_ok());
}

#[test]
fn scoped_tokens_get_403_outside_their_scopes() {
    let (sim, clock) = testing::sim(SimConfig::default());
    let mut m = sim.state().model();
    m.add_scoped_token("dop_v1_ro", &["kubernetes:read", "kubernetes:access_cluster"]);
    let now = clock.now();
    assert!(m.admit(Some("dop_v1_ro"), &routes::key("GET", routes::CLUSTERS), now).result.is_ok());
    assert!(
        m.admit(Some("dop_v1_ro"), &routes::key("GET", routes::KUBECONFIG), now).result.is_ok()
    );
    for (method, route) in [
        ("POST", routes::CLUSTERS),
        ("PUT", routes::NODE_POOL),
        ("POST", routes::UPGRADE),
        ("GET", routes::LOAD_BALANCERS),
        ("DELETE", routes::LOAD_BALANCER),
    ] {
        let e = m.admit(Some("dop_v1_ro"), &routes::key(method, route), now).result.unwrap_err();
        assert_eq!((e.status, e.id), (403, "forbidden"), "{method} {route}");
    }
    assert_eq!(routes::scope(&routes::key("DELETE", routes::NODE)), Some("kubernetes:update"));
    assert_eq!(
        routes::scope(&routes::key("POST", routes::LOAD_BALANCER_DROPLETS)),
        Some("load_balancer:update")
    );
    // Full-access tokens are not scope-checked.
    assert!(m.admit(Some(T), &routes::key("POST", routes::CLUSTERS), now).result.is_ok());
}

#[test]
fn dualstack_gets_ipv6_and_internal_gets_a_private_ip() {
    let (sim, clock) = testing::sim(SimConfig::default());
    let st = sim.state();
    let mut ds = regional("ds");
    ds.network_stack = Some("DUALSTACK".into());
    let ds = st.model().create_load_balancer(T, ds, clock.now()).unwrap();
    let mut internal = regional("internal");
    internal.network = Some("INTERNAL".into());
    let internal = st.model().create_load_balancer(T, internal, clock.now()).unwrap();
    assert_eq!(ds.ipv6, "");
    step(&clock, 1);
    let ds = st.model().get_load_balancer(T, &ds.id, clock.now()).unwrap();
    assert!(!ds.ipv6.is_empty() && !ds.ip.is_empty());
    let internal = st.model().get_load_balancer(T, &internal.id, clock.now()).unwrap();
    assert!(internal.ip.starts_with("10."), "{}", internal.ip);
    assert_eq!(internal.ipv6, "");
    // Create-only fields refuse changes on PUT.
    let mut flip = regional("internal");
    flip.network = Some("EXTERNAL".into());
    assert_eq!(
        st.model().update_load_balancer(T, &internal.id, flip, clock.now()).unwrap_err().status,
        422
    );
}

/// The model skips an account that has nothing due (each call advances every account):
/// a change made after that skip — a second load balancer created while the first is
/// still provisioning, a cluster created while nothing else is pending — still comes due
/// on time, and nothing turns before its time.
#[test]
fn changes_made_while_an_account_is_settled_still_come_due_on_time() {
    let (sim, clock) = testing::sim(SimConfig::default());
    let st = sim.state();
    let first = st.model().create_load_balancer(T, regional("first"), clock.now()).unwrap();
    // Advanced (and settled until the first comes due) by a read.
    let _ = st.model().list_load_balancers(T, clock.now()).unwrap();
    step(&clock, 1);
    let second = st.model().create_load_balancer(T, regional("second"), clock.now()).unwrap();
    let status = |id: &str| st.model().get_load_balancer(T, id, clock.now()).unwrap().status;
    for _ in 0..600 {
        if status(&second.id) == LbStatus::Active {
            break;
        }
        assert_eq!(status(&second.id), LbStatus::New);
        step(&clock, 1);
    }
    assert_eq!(status(&first.id), LbStatus::Active);
    assert_eq!(status(&second.id), LbStatus::Active);

    // Everything settled (nothing due at all): a cluster created now still provisions.
    let c = st.model().create_cluster(
        T,
        cluster_create("c", "latest", vec![pool("p", 2)]),
        clock.now(),
    );
    let c = c.unwrap();
    assert!(!st.model().cluster_is_running(&c.id, clock.now()));
    let mut ran = false;
    for _ in 0..600 {
        step(&clock, 1);
        if st.model().cluster_is_running(&c.id, clock.now()) {
            ran = true;
            break;
        }
    }
    assert!(ran, "the cluster created while the account was settled never ran");
}
