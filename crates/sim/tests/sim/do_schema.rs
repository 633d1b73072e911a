//! The DigitalOcean face answers by DigitalOcean's documented schemas: every route it
//! serves (`routes::SERVED`, a superset of what the adapter calls), in the states its
//! objects go through, its error answers and its pages, is checked against the response
//! schemas of DigitalOcean's OpenAPI document (the extract in `data/do_openapi.json`),
//! where an undocumented field and a missing required one both fail.
//!
//! The reference is the document, never our adapter or research notes: where the face
//! disagreed, the face was changed (see the commit that added this test).

#[path = "do_schema/openapi.rs"]
mod openapi;

use std::collections::BTreeSet;
use std::sync::Mutex;

use bc_sim::SimConfig;
use bc_sim::model::{Fault, routes};
use bc_sim::testing::{Reply, Served, TEST_TOKEN};
use openapi::Document;
use reqwest::Method;
use serde_json::{Value, json};

use routes::{
    ACCOUNT, ASSOCIATED, ASSOCIATED_DANGEROUS, ASSOCIATED_SELECTIVE, CLUSTER, CLUSTER_USER,
    CLUSTERS, CREDENTIALS, KUBECONFIG, LOAD_BALANCER, LOAD_BALANCER_CACHE, LOAD_BALANCER_DROPLETS,
    LOAD_BALANCER_RULES, LOAD_BALANCERS, NODE, NODE_POOL, NODE_POOL_RECYCLE, NODE_POOLS, OPTIONS,
    STATUS_MESSAGES, UPGRADE, UPGRADES,
};

/// What DigitalOcean sends that its document leaves out, with the evidence that it is
/// sent: `(schema, property, its schema)`. Nothing else undocumented passes.
///
/// - A load balancer's `tags`: godo's `LoadBalancer` reads them ("Tags can only be
///   provided upon the creation of a Load Balancer"), and DOKS counts a balancer tagged
///   `k8s:<cluster id>` among the cluster's associated resources; the adapter finds a
///   balancer it made before a crash by its ownership tag.
const UNDOCUMENTED: &[(&str, &str, &str)] = &[(
    "resources/load_balancers/models/load_balancer_base.yml",
    "tags",
    r#"{"type": "array", "items": {"type": "string"}}"#,
)];

/// The extract, with [`UNDOCUMENTED`] added.
fn document() -> Document {
    UNDOCUMENTED.iter().fold(Document::load(), |doc, (schema, property, json)| {
        doc.with_property(schema, property, serde_json::from_str(json).expect("schema JSON"))
    })
}

/// The most clock steps a wait takes (each of a few seconds).
const MAX_STEPS: usize = 60;

/// A served simulator whose every answer is checked against the document; it collects
/// what failed (so one run lists every disagreement) and what was covered.
struct Checked {
    h: Served,
    doc: Document,
    failures: Mutex<Vec<String>>,
    /// `(route key, status)` of every checked answer.
    covered: Mutex<BTreeSet<(String, u16)>>,
}

impl Checked {
    async fn start() -> Self {
        Self {
            h: Served::start(SimConfig::default()).await,
            doc: document(),
            failures: Mutex::default(),
            covered: Mutex::default(),
        }
    }

    /// `method template?query` with `ids` filled in, as `token`, checked.
    async fn call_as(
        &self,
        method: Method,
        template: &str,
        ids: &[&str],
        query: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Reply {
        let mut path = routes::fill(template, ids);
        if !query.is_empty() {
            path = format!("{path}?{query}");
        }
        let r = self.h.call_as(method.clone(), &path, token, body).await;
        let key = routes::key(method.as_str(), template);
        let status = r.status.as_u16();
        for e in self.doc.check(&key, status, &r.headers, &r.text) {
            self.failures.lock().unwrap().push(format!("{key} → {status}: {e}"));
        }
        self.covered.lock().unwrap().insert((key, status));
        r
    }

    async fn call(
        &self,
        method: Method,
        template: &str,
        ids: &[&str],
        body: Option<Value>,
    ) -> Reply {
        self.call_as(method, template, ids, "", Some(TEST_TOKEN), body).await
    }

    async fn get(&self, template: &str, ids: &[&str]) -> Value {
        let r = self.call(Method::GET, template, ids, None).await;
        assert_eq!(r.status, 200, "GET {template}: {}", r.text);
        r.json()
    }

    /// Creates a cluster from `body` (checking the answer) and answers its id.
    async fn cluster(&self, body: Value) -> String {
        let r = self.call(Method::POST, CLUSTERS, &[], Some(body)).await;
        assert_eq!(r.status, 201, "{}", r.text);
        r.json()["kubernetes_cluster"]["id"].as_str().expect("id").to_owned()
    }

    /// Steps the clock (bounded), reading the cluster each step, until it and its nodes
    /// run.
    async fn running(&self, id: &str) {
        for _ in 0..MAX_STEPS {
            let c = self.get(CLUSTER, &[id]).await["kubernetes_cluster"].clone();
            let nodes_run = c["node_pools"].as_array().into_iter().flatten().all(|p| {
                p["nodes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .all(|n| n["status"]["state"] == "running")
            });
            if c["status"]["state"] == "running" && nodes_run {
                return;
            }
            self.h.step(5);
        }
        panic!("cluster {id} did not run within {MAX_STEPS} steps");
    }

    /// Creates a load balancer from `body` and answers its id.
    async fn lb(&self, body: Value) -> String {
        let r = self.call(Method::POST, LOAD_BALANCERS, &[], Some(body)).await;
        assert_eq!(r.status, 202, "{}", r.text);
        r.json()["load_balancer"]["id"].as_str().expect("id").to_owned()
    }

    fn failures(&self) -> Vec<String> {
        self.failures.lock().unwrap().clone()
    }
}

fn pool(name: &str, count: u32) -> Value {
    json!({"name": name, "size": "s-2vcpu-4gb", "count": count})
}

#[tokio::test]
async fn every_served_answer_matches_digitaloceans_response_schemas() {
    let c = Checked::start().await;
    let tok = Some(TEST_TOKEN);

    c.get(OPTIONS, &[]).await;
    c.get(ACCOUNT, &[]).await;

    // A cluster with everything a create may carry: pools with labels, taints and
    // autoscaling, tags, a maintenance window, and the optional blocks set.
    let full = c
        .cluster(json!({
            "name": "full", "region": "nyc1", "version": "latest", "tags": ["team-a"],
            "maintenance_policy": {"start_time": "03:00", "day": "sunday"},
            "auto_upgrade": true, "surge_upgrade": true, "ha": true,
            "control_plane_firewall": {"enabled": true, "allowed_addresses": ["1.2.3.4/32"]},
            "sso": {"enabled": true, "issuer_url": "https://idp.example.com", "client_id": "bc"},
            "cluster_autoscaler_configuration": {"expanders": ["priority"]},
            "routing_agent": {"enabled": true},
            "node_pools": [
                {"name": "plain", "size": "s-2vcpu-4gb", "count": 1},
                {"name": "rich", "size": "s-2vcpu-4gb", "count": 2, "tags": ["web"],
                 "labels": {"tier": "web"},
                 "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"},
                            {"key": "empty", "value": "", "effect": "NoExecute"}]},
                {"name": "auto", "size": "s-2vcpu-4gb", "count": 1, "auto_scale": true,
                 "min_nodes": 1, "max_nodes": 3},
            ],
        }))
        .await;
    // Provisioning: no endpoint or address yet, nodes without names or droplets.
    c.get(CLUSTER, &[&full]).await;
    c.running(&full).await;

    // An older version (upgrades offered) and a minimal one (for paging and deletes).
    let old = c
        .cluster(json!({"name": "old", "region": "fra1", "version": "1.31.9-do.0",
                        "node_pools": [pool("w", 1)]}))
        .await;
    let small = c
        .cluster(json!({"name": "small", "region": "nyc1", "version": "latest",
                        "node_pools": [pool("w", 1)]}))
        .await;
    c.running(&old).await;
    c.running(&small).await;

    // Paging: every page of one cluster a page (first/prev/next/last links, meta).
    for page in 1..=3 {
        let q = format!("page={page}&per_page=1");
        let r = c.call_as(Method::GET, CLUSTERS, &[], &q, tok, None).await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    c.get(CLUSTERS, &[]).await;

    let r = c
        .call(Method::PUT, CLUSTER, &[&full], Some(json!({"name": "full-2", "tags": ["team-b"]})))
        .await;
    assert_eq!(r.status, 202, "{}", r.text);

    for q in ["expiry_seconds=600", "expiry_seconds=600&type=token"] {
        let r = c.call_as(Method::GET, KUBECONFIG, &[&full], q, tok, None).await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    c.get(CREDENTIALS, &[&full]).await;
    c.get(CLUSTER_USER, &[&full]).await;
    c.get(STATUS_MESSAGES, &[&full]).await;

    // Upgrades: none (null) on the latest, some on the older one; then upgrading.
    c.get(UPGRADES, &[&full]).await;
    let offered = c.get(UPGRADES, &[&old]).await;
    let to = offered["available_upgrade_versions"][0]["slug"].as_str().expect("an upgrade");
    let r = c.call(Method::POST, UPGRADE, &[&old], Some(json!({"version": to}))).await;
    assert_eq!(r.status, 202, "{}", r.text);
    c.get(CLUSTER, &[&old]).await;

    // Node pools through their life.
    c.get(NODE_POOLS, &[&full]).await;
    let r = c
        .call(
            Method::POST,
            NODE_POOLS,
            &[&full],
            Some(json!({"name": "extra", "size": "s-2vcpu-4gb", "count": 2, "labels": {"a": "b"}})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let extra = r.json()["node_pool"]["id"].as_str().expect("pool id").to_owned();
    c.get(NODE_POOL, &[&full, &extra]).await;
    c.running(&full).await;
    let p = c.get(NODE_POOL, &[&full, &extra]).await;
    let node = p["node_pool"]["nodes"][0]["id"].as_str().expect("node id").to_owned();
    let r = c
        .call(
            Method::PUT,
            NODE_POOL,
            &[&full, &extra],
            Some(json!({"name": "extra", "count": 3, "taints": []})),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.text);
    let q = "skip_drain=1&replace=1";
    let r = c.call_as(Method::DELETE, NODE, &[&full, &extra, &node], q, tok, None).await;
    assert_eq!(r.status, 202, "{}", r.text);
    c.get(NODE_POOL, &[&full, &extra]).await;
    c.running(&full).await;
    let p = c.get(NODE_POOL, &[&full, &extra]).await;
    let node = p["node_pool"]["nodes"][0]["id"].as_str().expect("node id").to_owned();
    let body = json!({"nodes": [node]});
    let r = c.call(Method::POST, NODE_POOL_RECYCLE, &[&full, &extra], Some(body)).await;
    assert_eq!(r.status, 202, "{}", r.text);
    let r = c.call(Method::DELETE, NODE_POOL, &[&full, &extra], None).await;
    assert_eq!(r.status, 204, "{}", r.text);
    c.get(NODE_POOLS, &[&full]).await;

    // Load balancers of each type, in each state, and paged.
    let rule = json!({"entry_protocol": "http", "entry_port": 80,
                      "target_protocol": "http", "target_port": 8080});
    let by_ids = c
        .lb(json!({"name": "by-ids", "region": "nyc1", "forwarding_rules": [rule],
                   "droplet_ids": [3164444], "tags": [format!("k8s:{small}")],
                   "sticky_sessions": {"type": "cookies", "cookie_name": "bc", "cookie_ttl_seconds": 300},
                   "health_check": {"protocol": "http", "port": 8080, "path": "/healthz",
                                    "proxy_protocol": true},
                   "enable_proxy_protocol": true, "enable_backend_keepalive": true,
                   "http_idle_timeout_seconds": 90, "tls_cipher_policy": "STRONG"}))
        .await;
    let by_tag = c
        .lb(json!({"name": "by-tag", "region": "nyc1", "type": "REGIONAL_NETWORK",
                   "network_stack": "DUALSTACK", "size_unit": 3,
                   "forwarding_rules": [{"entry_protocol": "tcp", "entry_port": 443,
                                         "target_protocol": "tcp", "target_port": 443}],
                   "tag": "web", "firewall": {"allow": ["ip:1.2.3.4"], "deny": ["cidr:2.3.0.0/16"]}}))
        .await;
    c.get(LOAD_BALANCER, &[&by_ids]).await;
    for _ in 0..MAX_STEPS {
        let l = c.get(LOAD_BALANCER, &[&by_tag]).await;
        if l["load_balancer"]["status"] == "active" {
            break;
        }
        c.h.step(5);
    }
    let global = c
        .lb(json!({"name": "global", "type": "GLOBAL", "target_load_balancer_ids": [by_ids],
                   "domains": [{"name": "x.example.com", "is_managed": true},
                               {"name": "y.example.com", "is_managed": false,
                                "certificate_id": "892071a0-bb95-49bc-8021-3afd67a210bf"}],
                   "glb_settings": {"target_protocol": "http", "target_port": 80,
                                    "cdn": {"is_enabled": true}, "region_priorities": {"nyc1": 1},
                                    "failover_threshold": 50}}))
        .await;
    c.get(LOAD_BALANCER, &[&global]).await;
    for page in 1..=2 {
        let q = format!("page={page}&per_page=2");
        let r = c.call_as(Method::GET, LOAD_BALANCERS, &[], &q, tok, None).await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    c.get(LOAD_BALANCERS, &[]).await;
    let mut update = c.get(LOAD_BALANCER, &[&by_ids]).await["load_balancer"].clone();
    update["region"] = json!("nyc1");
    update["redirect_http_to_https"] = json!(true);
    let r = c.call(Method::PUT, LOAD_BALANCER, &[&by_ids], Some(update)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let body = json!({"droplet_ids": [3164445]});
    // Each change keeps a load balancer busy for a while: step past it before the next.
    c.h.step(120);
    let r = c.call(Method::POST, LOAD_BALANCER_DROPLETS, &[&by_ids], Some(body.clone())).await;
    assert_eq!(r.status, 204, "{}", r.text);
    c.h.step(120);
    let r = c.call(Method::DELETE, LOAD_BALANCER_DROPLETS, &[&by_ids], Some(body)).await;
    assert_eq!(r.status, 204, "{}", r.text);
    let body = json!({"forwarding_rules": [{"entry_protocol": "https", "entry_port": 443,
                                            "target_protocol": "http", "target_port": 8080,
                                            "tls_passthrough": true}]});
    c.h.step(120);
    let r = c.call(Method::POST, LOAD_BALANCER_RULES, &[&by_ids], Some(body.clone())).await;
    assert_eq!(r.status, 204, "{}", r.text);
    c.h.step(120);
    let r = c.call(Method::DELETE, LOAD_BALANCER_RULES, &[&by_ids], Some(body)).await;
    assert_eq!(r.status, 204, "{}", r.text);
    let r = c.call(Method::DELETE, LOAD_BALANCER_CACHE, &[&global], None).await;
    assert_eq!(r.status, 204, "{}", r.text);
    let r = c.call(Method::DELETE, LOAD_BALANCER, &[&global], None).await;
    assert_eq!(r.status, 204, "{}", r.text);

    // Associated resources, and the three deletes.
    let a = c.get(ASSOCIATED, &[&small]).await;
    assert_eq!(a["load_balancers"][0]["id"], json!(by_ids), "the tagged LB is associated");
    let body = json!({"load_balancers": [by_ids], "volumes": [], "volume_snapshots": []});
    let r = c.call(Method::DELETE, ASSOCIATED_SELECTIVE, &[&small], Some(body)).await;
    assert_eq!(r.status, 204, "{}", r.text);
    let r = c.call(Method::DELETE, ASSOCIATED_DANGEROUS, &[&old], None).await;
    assert_eq!(r.status, 204, "{}", r.text);
    let r = c.call(Method::DELETE, CLUSTER, &[&full], None).await;
    assert_eq!(r.status, 204, "{}", r.text);
    let r = c.call(Method::DELETE, LOAD_BALANCER, &[&by_tag], None).await;
    assert_eq!(r.status, 204, "{}", r.text);
    c.get(CLUSTERS, &[]).await;

    // Errors: each class the face answers, with the documented body.
    let missing = "bd5f5959-5e1e-4205-a714-a914373942af";
    let r = c.call_as(Method::GET, CLUSTERS, &[], "", None, None).await;
    assert_eq!(r.status, 401);
    let r = c.call(Method::GET, CLUSTER, &[missing], None).await;
    assert_eq!(r.status, 404);
    let r = c.call(Method::GET, LOAD_BALANCER, &[missing], None).await;
    assert_eq!(r.status, 404);
    let r =
        c.call(Method::POST, CLUSTERS, &[], Some(json!({"name": "x", "region": "nowhere"}))).await;
    assert_eq!(r.status, 422);
    let r = c.call(Method::POST, LOAD_BALANCERS, &[], Some(json!("not an object"))).await;
    assert_eq!(r.status, 400);
    {
        let mut m = c.h.sim.state().model();
        m.inject_failures(&routes::key("GET", OPTIONS), 1, Fault::ServerError);
        m.inject_failures(
            &routes::key("GET", ACCOUNT),
            1,
            Fault::TooManyRequests { retry_after: 3 },
        );
        m.add_scoped_token("dop_v1_reader", &["kubernetes:read"]);
    }
    let r = c.call(Method::GET, OPTIONS, &[], None).await;
    assert_eq!(r.status, 500);
    let r = c.call(Method::GET, ACCOUNT, &[], None).await;
    assert_eq!(r.status, 429);
    let r = c.call_as(Method::GET, LOAD_BALANCERS, &[], "", Some("dop_v1_reader"), None).await;
    assert_eq!(r.status, 403);

    let failures = c.failures();
    assert!(
        failures.is_empty(),
        "{} answers disagree with digitalocean/openapi@{}:\n{}",
        failures.len(),
        c.doc.commit(),
        failures.join("\n")
    );
    // Every served route was checked on a success, and every error class on some route.
    let covered = c.covered.lock().unwrap().clone();
    for (method, template) in routes::SERVED {
        let key = routes::key(method, template);
        assert!(
            covered.iter().any(|(k, s)| *k == key && (200..300).contains(s)),
            "{key} was never checked on a success"
        );
    }
    for status in [400, 401, 403, 404, 422, 429, 500] {
        assert!(covered.iter().any(|(_, s)| *s == status), "no {status} was checked");
    }
}

/// The checks can fail: a field the document does not name, a required one left out,
/// a wrong type, a value outside an enum, and a link the paging schema does not know.
#[tokio::test]
async fn the_check_refuses_unknown_fields_and_missing_required_ones() {
    let c = Checked::start().await;
    let id = c
        .cluster(json!({"name": "c", "region": "nyc1", "version": "latest",
                              "node_pools": [pool("w", 1)]}))
        .await;
    let r = c.call(Method::GET, CLUSTER, &[&id], None).await;
    assert!(c.failures().is_empty(), "{:?}", c.failures());
    let key = routes::key("GET", CLUSTER);
    let check = |v: &Value| c.doc.check(&key, 200, &r.headers, &v.to_string());
    let good = r.json();
    assert!(check(&good).is_empty());

    let mut v = good.clone();
    v["kubernetes_cluster"]["surprise"] = json!(1);
    assert_eq!(check(&v), ["$.kubernetes_cluster.surprise: not in the schema"]);
    let mut v = good.clone();
    v["kubernetes_cluster"]["node_pools"][0]["nodes"][0]["status"]["why"] = json!("x");
    assert_eq!(
        check(&v),
        ["$.kubernetes_cluster.node_pools[0].nodes[0].status.why: not in the schema"]
    );
    let mut v = good.clone();
    v["kubernetes_cluster"]["node_pools"][0].as_object_mut().unwrap().remove("size");
    assert_eq!(check(&v), ["$.kubernetes_cluster.node_pools[0].size: required, missing"]);
    let mut v = good.clone();
    v["kubernetes_cluster"]["ha"] = json!("yes");
    assert_eq!(check(&v), ["$.kubernetes_cluster.ha: \"yes\" is not of type \"boolean\""]);
    let mut v = good.clone();
    v["kubernetes_cluster"]["status"]["state"] = json!("hibernating");
    assert_eq!(check(&v).len(), 1, "{:?}", check(&v));
    // A free-form map takes any key.
    let mut v = good.clone();
    v["kubernetes_cluster"]["node_pools"][0]["labels"] = json!({"any": "thing"});
    assert!(check(&v).is_empty(), "{:?}", check(&v));

    // An error body without its message.
    let r = c.call(Method::GET, CLUSTER, &["nope"], None).await;
    assert_eq!(r.status, 404);
    let mut v = r.json();
    v.as_object_mut().unwrap().remove("message");
    assert_eq!(
        c.doc.check(&key, 404, &r.headers, &v.to_string()),
        ["$.message: required, missing"]
    );

    // A page link the document does not name.
    let list_key = routes::key("GET", CLUSTERS);
    let r = c.call(Method::GET, CLUSTERS, &[], None).await;
    let mut v = r.json();
    v["links"] = json!({"pages": {"next": "http://x/?page=2", "after": "http://x/?page=3"}});
    assert_eq!(
        c.doc.check(&list_key, 200, &r.headers, &v.to_string()),
        ["$.links.pages.after: not in the schema"]
    );
    // A list without meta.
    v.as_object_mut().unwrap().remove("meta");
    v["links"] = json!({});
    assert_eq!(
        c.doc.check(&list_key, 200, &r.headers, &v.to_string()),
        ["$.meta: required, missing"]
    );
}
