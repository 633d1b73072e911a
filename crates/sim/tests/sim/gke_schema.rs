//! The GKE face answers by GKE's discovery document: every route it serves
//! (`gke_api::routes::SERVED`) is called in the states its objects go through, and each
//! answer is checked against the response schema the document names for that method (the
//! extract in `data/gke_discovery.json`, made by `examples/gke_discovery.rs`), enums by
//! name or — with `$alt=json;enum-encoding=int` — by number. An undocumented field fails,
//! a zero value written out fails (Google's JSON printer leaves them out), and a field
//! GKE always fills ([`REQUIRED`]) fails when missing.

use std::collections::BTreeSet;
use std::sync::Mutex;

use bc_sim::SimConfig;
use bc_sim::gke_api::routes;
use bc_sim::testing::{Served, bounded};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// What GKE fills in every answer of these schemas (output-only fields the proto documents
/// as always set: names, states, links, versions). The discovery document marks no
/// response field required, so these are the test's.
const REQUIRED: &[(&str, &[&str])] = &[
    (
        "Cluster",
        &["name", "status", "selfLink", "location", "currentMasterVersion", "createTime", "etag"],
    ),
    ("NodePool", &["name", "status", "version", "selfLink", "config", "etag"]),
    ("Operation", &["name", "status", "operationType", "selfLink", "targetLink", "startTime"]),
    ("ServerConfig", &["defaultClusterVersion", "validMasterVersions", "channels"]),
];

struct Doc {
    doc: Value,
}

impl Doc {
    fn load() -> Self {
        let text = include_str!("data/gke_discovery.json");
        Self { doc: serde_json::from_str(text).expect("extract JSON") }
    }

    fn response(&self, route: &str) -> String {
        self.doc["responses"][route]
            .as_str()
            .unwrap_or_else(|| panic!("no schema for {route}"))
            .to_owned()
    }

    /// Every way `v` breaks schema `name` (empty: it conforms).
    fn check(&self, name: &str, v: &Value, ints: bool) -> Vec<String> {
        let mut out = Vec::new();
        self.check_ref(name, v, ints, name, &mut out);
        out
    }

    fn check_ref(&self, name: &str, v: &Value, ints: bool, at: &str, out: &mut Vec<String>) {
        let schema = &self.doc["schemas"][name];
        if schema.is_null() {
            out.push(format!("{at}: unknown schema {name}"));
            return;
        }
        if let Some((_, required)) = REQUIRED.iter().find(|(n, _)| *n == name) {
            for r in *required {
                if v.get(r).is_none() {
                    out.push(format!("{at}: required {r} missing"));
                }
            }
        }
        self.check_schema(schema, v, ints, at, out);
    }

    fn check_schema(&self, s: &Value, v: &Value, ints: bool, at: &str, out: &mut Vec<String>) {
        if let Some(r) = s["$ref"].as_str() {
            return self.check_ref(r, v, ints, at, out);
        }
        let ty = s["type"].as_str().unwrap_or("any");
        let fmt = s["format"].as_str().unwrap_or("");
        let ok = match ty {
            "object" => {
                let Some(o) = v.as_object() else {
                    out.push(format!("{at}: expected an object, got {v}"));
                    return;
                };
                for (k, x) in o {
                    if is_zero(x) {
                        out.push(format!("{at}.{k}: zero value written out: {x}"));
                    }
                    if let Some(p) = s["properties"].get(k) {
                        self.check_schema(p, x, ints, &format!("{at}.{k}"), out);
                    } else if let Some(a) = s.get("additionalProperties") {
                        self.check_schema(a, x, ints, &format!("{at}.{k}"), out);
                    } else {
                        out.push(format!("{at}.{k}: undocumented field"));
                    }
                }
                true
            }
            "array" => {
                let Some(a) = v.as_array() else {
                    out.push(format!("{at}: expected an array, got {v}"));
                    return;
                };
                for (i, x) in a.iter().enumerate() {
                    self.check_schema(&s["items"], x, ints, &format!("{at}[{i}]"), out);
                }
                true
            }
            "string" if s.get("enum").is_some() => {
                if ints {
                    v.as_i64().is_some_and(|n| n >= 0)
                } else {
                    v.as_str().is_some_and(|x| s["enum"].as_array().unwrap().iter().any(|e| e == x))
                }
            }
            "string" if matches!(fmt, "int64" | "uint64") => {
                v.as_str().is_some_and(|x| x.parse::<i128>().is_ok())
            }
            "string" => v.is_string(),
            "integer" => v.as_i64().is_some(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "any" => true,
            other => {
                out.push(format!("{at}: unhandled type {other}"));
                true
            }
        };
        if !ok {
            out.push(format!("{at}: {v} is not a {ty} {fmt}"));
        }
    }
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

#[test]
fn the_validator_fails_an_unknown_field_a_missing_one_and_a_wrong_type() {
    let doc = Doc::load();
    let op = json!({"name": "operation-1", "status": "DONE", "operationType": "CREATE_CLUSTER",
        "selfLink": "x", "targetLink": "y", "startTime": "2026-01-01T00:00:00Z"});
    assert_eq!(doc.check("Operation", &op, false), Vec::<String>::new());
    let mut unknown = op.clone();
    unknown["nodeCount"] = json!(3);
    assert!(
        doc.check("Operation", &unknown, false).iter().any(|e| e.contains("undocumented field"))
    );
    let mut missing = op.clone();
    missing.as_object_mut().unwrap().remove("targetLink");
    assert!(
        doc.check("Operation", &missing, false).iter().any(|e| e.contains("required targetLink"))
    );
    let mut wrong = op.clone();
    wrong["status"] = json!("FINISHED");
    assert!(!doc.check("Operation", &wrong, false).is_empty());
    let mut zero = op;
    zero["detail"] = json!("");
    assert!(doc.check("Operation", &zero, false).iter().any(|e| e.contains("zero value")));
    let pool = json!({"name": "p", "status": "RUNNING", "version": "1", "selfLink": "s", "etag": "e",
        "config": {"machineType": "e2-medium"}, "maxPodsConstraint": {"maxPodsPerNode": 110}});
    assert!(
        doc.check("NodePool", &pool, false).iter().any(|e| e.contains("maxPodsPerNode")),
        "int64 must be a string"
    );
}

struct Checked {
    s: Served,
    token: String,
    doc: Doc,
    failures: Mutex<Vec<String>>,
    covered: Mutex<BTreeSet<String>>,
}

impl Checked {
    async fn call(&self, method: Method, template: &str, path: &str, body: Option<Value>) -> Value {
        for ints in [false, true] {
            let path =
                if ints { format!("{path}?$alt=json;enum-encoding=int") } else { path.to_owned() };
            // A mutation runs once, with the encoding the Python client uses.
            if method != Method::GET && !ints {
                continue;
            }
            let reply = self.s.gke_call(method.clone(), &path, &self.token, body.clone()).await;
            let (status, v) = reply.parts();
            assert_eq!(status, StatusCode::OK, "{method} {path}: {v}");
            let route = format!("{method} {template}");
            let schema = self.doc.response(&route);
            for e in self.doc.check(&schema, &v, ints) {
                self.failures.lock().unwrap().push(format!("{route} (ints {ints}): {e}"));
            }
            self.covered.lock().unwrap().insert(route);
            if method == Method::GET && ints {
                return v;
            }
            if method != Method::GET {
                return v;
            }
        }
        unreachable!()
    }
}

#[tokio::test]
async fn every_served_answer_conforms_to_the_discovery_document() {
    bounded(async {
        let s = Served::start(SimConfig::default()).await;
        let token = s.gke_access_token().await;
        let c = Checked {
            s,
            token,
            doc: Doc::load(),
            failures: Mutex::default(),
            covered: Mutex::default(),
        };
        use routes::*;
        let pool = json!({"name": "cpu", "initialNodeCount": 1, "locations": ["us-central1-a"],
            "config": {"machineType": "e2-standard-4", "labels": {"k": "v"},
                       "taints": [{"key": "t", "value": "v", "effect": "NO_SCHEDULE"}]},
            "autoscaling": {"enabled": true, "minNodeCount": 1, "maxNodeCount": 3}});
        c.call(Method::GET, SERVER_CONFIG, "us-central1/serverConfig", None).await;
        let op = c
            .call(
                Method::POST,
                CLUSTERS,
                "us-central1/clusters",
                Some(json!({"cluster": {"name": "c1",
            "resourceLabels": {"bc-substrate-pool": "p1"}, "nodePools": [pool]}})),
            )
            .await;
        let op_name = op["name"].as_str().unwrap().to_owned();
        c.call(
            Method::POST,
            CLUSTERS,
            "us-central1/clusters",
            Some(json!({"cluster": {"name": "ap", "autopilot": {"enabled": true}}})),
        )
        .await;
        // Provisioning, then running.
        c.call(Method::GET, CLUSTER, "us-central1/clusters/c1", None).await;
        c.call(Method::GET, NODE_POOLS, "us-central1/clusters/c1/nodePools", None).await;
        c.s.step(3);
        c.call(Method::GET, OPERATION, &format!("us-central1/operations/{op_name}"), None).await;
        c.call(Method::GET, OPERATIONS, "-/operations", None).await;
        let cl = c.call(Method::GET, CLUSTER, "us-central1/clusters/c1", None).await;
        c.call(Method::GET, CLUSTERS, "-/clusters", None).await;
        c.call(
            Method::POST,
            SET_RESOURCE_LABELS,
            "us-central1/clusters/c1:setResourceLabels",
            Some(json!({"resourceLabels": {"a": "b"}, "labelFingerprint": cl["labelFingerprint"]})),
        )
        .await;
        c.s.step(2);
        c.call(
            Method::POST,
            NODE_POOLS,
            "us-central1/clusters/c1/nodePools",
            Some(json!({"nodePool": {"name": "two", "initialNodeCount": 2}})),
        )
        .await;
        c.call(Method::GET, NODE_POOL, "us-central1/clusters/c1/nodePools/two", None).await;
        c.s.step(2);
        c.call(
            Method::POST,
            SET_SIZE,
            "us-central1/clusters/c1/nodePools/two:setSize",
            Some(json!({"nodeCount": 1})),
        )
        .await;
        c.s.step(3);
        c.call(
            Method::POST,
            SET_AUTOSCALING,
            "us-central1/clusters/c1/nodePools/cpu:setAutoscaling",
            Some(json!({"autoscaling": {"enabled": true, "maxNodeCount": 5}})),
        )
        .await;
        c.s.step(2);
        c.call(
            Method::PUT,
            NODE_POOL,
            "us-central1/clusters/c1/nodePools/cpu",
            Some(json!({"labels": {"labels": {"x": "y"}}})),
        )
        .await;
        c.s.step(2);
        c.call(
            Method::PUT,
            CLUSTER,
            "us-central1/clusters/c1",
            Some(json!({"update": {"desiredMasterVersion": "latest"}})),
        )
        .await;
        c.call(Method::GET, CLUSTER, "us-central1/clusters/c1", None).await;
        let up = c.call(Method::GET, OPERATIONS, "us-central1/operations", None).await;
        let running =
            up["operations"].as_array().unwrap().iter().find(|o| o["status"] != 3).unwrap()["name"]
                .as_str()
                .unwrap()
                .to_owned();
        c.call(
            Method::POST,
            CANCEL,
            &format!("us-central1/operations/{running}:cancel"),
            Some(json!({})),
        )
        .await;
        c.s.step(3);
        c.call(
            Method::POST,
            UPDATE_MASTER,
            "us-central1/clusters/c1:updateMaster",
            Some(json!({"masterVersion": "-"})),
        )
        .await;
        c.s.step(3);
        c.call(Method::DELETE, NODE_POOL, "us-central1/clusters/c1/nodePools/two", None).await;
        c.call(Method::GET, NODE_POOL, "us-central1/clusters/c1/nodePools/two", None).await;
        c.s.step(3);
        c.call(Method::DELETE, CLUSTER, "us-central1/clusters/c1", None).await;
        c.call(Method::GET, CLUSTER, "us-central1/clusters/c1", None).await;
        let failures = c.failures.lock().unwrap().clone();
        assert!(
            failures.is_empty(),
            "answers outside the discovery document:\n{}",
            failures.join("\n")
        );
        let covered = c.covered.lock().unwrap().clone();
        let missing: Vec<String> = SERVED
            .iter()
            .map(|(m, t)| format!("{m} {t}"))
            .filter(|r| !covered.contains(r))
            .collect();
        assert!(missing.is_empty(), "routes not exercised: {missing:?}");
    })
    .await;
}
