//! Black-box conformance of the simulated Kubernetes API and bcd against
//! research/kube-wire.md (what the `kube` 5 client sends and accepts) and SPEC §6/§9:
//! a served simulator's cluster is driven over loopback both with raw reqwest (the exact
//! wire: `?&fieldManager=…`, empty `?`, `+` for spaces, DELETE with `{}`) and with the
//! real `kube` client on typed `Api<K>`, one test per documented fact.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode as AxumStatus;
use axum::routing::post;
use bc_domain::ports::ManualClock;
use bc_sim::{Sim, SimConfig, SimServer, bcd, testing};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Secret, ServiceAccount};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const POOL_LABEL: &str = "better-compute.dev/substrate-pool";
const FM: &str = "better-compute";
/// The query kube writes for apply (kube-wire.md "URL shapes": `path?` then `&k=v`).
const APPLY_Q: &str = "?&fieldManager=better-compute";
/// The same, forced: `force` comes before `fieldManager` (kube-wire.md "Per operation").
const FORCE_Q: &str = "?&force=true&fieldManager=better-compute";
const APPLY_CT: &str = "application/apply-patch+yaml";

/// Every network call is bounded: a hanging simulator fails the test instead of hanging
/// it (kube-wire.md gotcha 5: the client has no read timeout).
async fn bounded<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), f).await.expect("call timed out")
}

struct Env {
    _server: SimServer,
    sim: Sim,
    _clock: Arc<ManualClock>,
    id: String,
    http: reqwest::Client,
    /// `http://127.0.0.1:PORT/k8s/<cluster id>`.
    base: String,
    token: String,
    kubeconfig: String,
}

/// A served simulator with one running cluster: pool `bc-p1` (2 nodes, our pool label,
/// `gpu=true`, `tier=a`) and the tenant's pool `own` (1 node, `tier=b`, no pool label).
async fn setup() -> Env {
    setup_with(vec![
        testing::node_pool("bc-p1", 2, &[(POOL_LABEL, "p1"), ("gpu", "true"), ("tier", "a")]),
        testing::node_pool("own", 1, &[("tier", "b")]),
    ])
    .await
}

async fn setup_with(pools: Vec<bc_sim::model::NodePoolSpec>) -> Env {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (sim, clock) = testing::sim(SimConfig::default());
    let server = sim.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let id = testing::create_cluster(&sim, "c1", pools);
    testing::run_until_running(&sim, &clock, &id);
    let kubeconfig = testing::kubeconfig(&sim, &id);
    let token = sim.state().model().cluster_api_token(&id).unwrap();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let base = format!("{}/k8s/{}", server.url(), id);
    Env { _server: server, sim, _clock: clock, id, http, base, token, kubeconfig }
}

/// A raw answer: status, content type, body as JSON (panics when it is not JSON, which
/// is itself a finding: every answer must be JSON).
struct Raw {
    status: StatusCode,
    content_type: String,
    body: Value,
}

impl Env {
    /// The real client from the kubeconfig the DigitalOcean face serves (kube-wire.md
    /// "Connecting"; gotcha 2: no proxy). One per test, built inside its runtime.
    async fn kube(&self) -> kube::Client {
        self.kube_with(&self.kubeconfig).await
    }

    async fn kube_with(&self, yaml: &str) -> kube::Client {
        let kc = kube::config::Kubeconfig::from_yaml(yaml).unwrap();
        let mut config =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .unwrap();
        config.proxy_url = None;
        kube::Client::try_from(config).unwrap()
    }

    /// One raw request: `path_and_query` is appended verbatim to the cluster base.
    async fn raw(
        &self,
        method: Method,
        path_and_query: &str,
        content_type: Option<&str>,
        body: Option<String>,
    ) -> Raw {
        self.raw_token(method, path_and_query, content_type, body, Some(&self.token)).await
    }

    async fn raw_token(
        &self,
        method: Method,
        path_and_query: &str,
        content_type: Option<&str>,
        body: Option<String>,
        token: Option<&str>,
    ) -> Raw {
        let mut req = self.http.request(method, format!("{}{path_and_query}", self.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        if let Some(b) = body {
            req = req.body(b);
        }
        let resp = bounded(req.send()).await.unwrap();
        let status = resp.status();
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let text = bounded(resp.text()).await.unwrap();
        let body = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{path_and_query}: answer is not JSON ({e}): {text:?}"));
        Raw { status, content_type, body }
    }

    /// GET with no query and no body, as kube's `get` sends it.
    async fn get(&self, path: &str) -> Raw {
        self.raw(Method::GET, path, None, None).await
    }

    /// PATCH as kube's apply sends it: compact JSON body, apply-patch+yaml content type.
    async fn apply(&self, path: &str, query: &str, body: &Value) -> Raw {
        self.raw(Method::PATCH, &format!("{path}{query}"), Some(APPLY_CT), Some(body.to_string()))
            .await
    }

    /// DELETE as kube's delete sends it: `path?`, JSON content type, body `{}`.
    async fn delete(&self, path: &str) -> Raw {
        self.raw(
            Method::DELETE,
            &format!("{path}?"),
            Some("application/json"),
            Some("{}".to_owned()),
        )
        .await
    }

    /// The namespace `n` with a ServiceAccount, a Secret and a DaemonSet in it, applied
    /// over the raw wire by `better-compute`.
    async fn seed(&self) {
        let ns = json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n"}});
        assert_eq!(self.apply("/api/v1/namespaces/n", APPLY_Q, &ns).await.status, 201);
        let sa = json!({"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"bcd","namespace":"n"}});
        let r = self.apply("/api/v1/namespaces/n/serviceaccounts/bcd", APPLY_Q, &sa).await;
        assert_eq!(r.status, 201);
        let secret = json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"n"},"data":{"k":"eA=="}});
        assert_eq!(
            self.apply("/api/v1/namespaces/n/secrets/s", APPLY_Q, &secret).await.status,
            201
        );
        let r = self
            .apply("/apis/apps/v1/namespaces/n/daemonsets/bcd", APPLY_Q, &daemonset(None, &[]))
            .await;
        assert_eq!(r.status, 201);
    }

    /// Manager `kubectl` force-applies another value of `.data.k` of the seeded Secret
    /// `n/s`, so that it owns the field and an unforced apply of ours conflicts.
    fn kubectl_takes_secret_data(&self) {
        let now = self.sim.state().clock.now();
        self.sim
            .state()
            .kube
            .apply_manifest(
                &self.id,
                "kubectl",
                &json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"n"},"data":{"k":"eQ=="}}),
                true,
                now,
            )
            .unwrap();
    }

    fn node_names(&self) -> Vec<String> {
        let now = self.sim.state().clock.now();
        let mut names: Vec<String> = self
            .sim
            .state()
            .model()
            .cluster_nodes(&self.id, now)
            .unwrap()
            .into_iter()
            .map(|n| n.name)
            .collect();
        names.sort();
        names
    }
}

/// A DaemonSet `bcd` in `n` mapping the bcd env from Secret `bcd-join` (SPEC §6), with
/// an optional nodeSelector and tolerations.
fn daemonset(node_selector: Option<Value>, tolerations: &[Value]) -> Value {
    let env = |name: &str, key: &str| json!({"name":name,"valueFrom":{"secretKeyRef":{"name":"bcd-join","key":key}}});
    let mut pod = json!({
        "serviceAccountName": "bcd",
        "containers": [{"name":"bcd","image":"bcd:sim","env":[
            env(bcd::ENV_SERVER_URL, "serverUrl"), env(bcd::ENV_JOIN_TOKEN, "joinToken")]}],
    });
    if let Some(sel) = node_selector {
        pod["nodeSelector"] = sel;
    }
    if !tolerations.is_empty() {
        pod["tolerations"] = Value::Array(tolerations.to_vec());
    }
    json!({"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"bcd","namespace":"n"},
        "spec":{"selector":{"matchLabels":{"app":"bcd"}},
            "template":{"metadata":{"labels":{"app":"bcd"}},"spec":pod}}})
}

/// Form-encodes a query value as kube does (kube-wire.md "URL shapes": a space becomes
/// `+`, everything but unreserved characters is percent-encoded).
fn form(v: &str) -> String {
    let mut out = String::new();
    for b in v.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                out.push(char::from(b));
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A metav1 Status as kube-wire.md "404 and 409 bodies" shows it: `reason` set, `code`
/// equal to the HTTP status, JSON.
fn assert_status(r: &Raw, code: u16, reason: &str) {
    let v = &r.body;
    assert_eq!(r.status.as_u16(), code, "{v}");
    assert_eq!(v["kind"], "Status", "{v}");
    assert_eq!(v["apiVersion"], "v1", "{v}");
    assert_eq!(v["status"], "Failure", "{v}");
    assert_eq!(v["reason"], reason, "{v}");
    assert_eq!(v["code"], code, "{v}");
    assert!(v["metadata"].is_object(), "{v}");
    assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    assert!(r.content_type.starts_with("application/json"), "{}", r.content_type);
}

fn rv_of(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"].as_str().expect("resourceVersion is a string").parse().unwrap()
}

fn api_error(e: kube::Error) -> Box<kube::core::Status> {
    match e {
        kube::Error::Api(s) => s,
        other => panic!("expected kube::Error::Api, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// Raw wire
// ---------------------------------------------------------------------------------------

/// kube-wire.md "Per operation", get: a bare item path answers 200 with the object, whose
/// `apiVersion`/`kind` match the resource exactly; answers are JSON.
#[tokio::test]
async fn raw_get_item_is_200_with_matching_api_version_and_kind() {
    let env = setup().await;
    env.seed().await;
    let node = env.node_names()[0].clone();
    for (path, api_version, kind) in [
        ("/api/v1/namespaces/n".to_owned(), "v1", "Namespace"),
        ("/api/v1/namespaces/n/secrets/s".to_owned(), "v1", "Secret"),
        ("/api/v1/namespaces/n/serviceaccounts/bcd".to_owned(), "v1", "ServiceAccount"),
        ("/apis/apps/v1/namespaces/n/daemonsets/bcd".to_owned(), "apps/v1", "DaemonSet"),
        (format!("/api/v1/nodes/{node}"), "v1", "Node"),
    ] {
        let r = env.get(&path).await;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        assert_eq!(r.body["apiVersion"], api_version, "{path}");
        assert_eq!(r.body["kind"], kind, "{path}");
        assert!(r.content_type.starts_with("application/json"), "{path}");
    }
}

/// kube-wire.md "URL shapes" and "Per operation", list: the empty query `?` works, and
/// the answer is `{items}` with `kind: XList`, `apiVersion` and `metadata.resourceVersion`.
#[tokio::test]
async fn raw_list_with_empty_query_has_items_kind_api_version_and_resource_version() {
    let env = setup().await;
    env.seed().await;
    for (path, api_version, kind, n) in [
        ("/api/v1/namespaces?", "v1", "NamespaceList", 1),
        ("/api/v1/namespaces/n/secrets?", "v1", "SecretList", 1),
        ("/api/v1/namespaces/n/serviceaccounts?", "v1", "ServiceAccountList", 1),
        ("/apis/apps/v1/namespaces/n/daemonsets?", "apps/v1", "DaemonSetList", 1),
        ("/api/v1/nodes?", "v1", "NodeList", 3),
    ] {
        let r = env.get(path).await;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        assert_eq!(r.body["kind"], kind, "{path}");
        assert_eq!(r.body["apiVersion"], api_version, "{path}");
        assert!(r.body["metadata"]["resourceVersion"].is_string(), "{path}");
        let items = r.body["items"].as_array().unwrap_or_else(|| panic!("{path}: items"));
        assert_eq!(items.len(), n, "{path}");
        // Items may leave out apiVersion/kind; when present they must match exactly.
        let item_kind = kind.trim_end_matches("List");
        for i in items {
            assert!(i.get("kind").is_none_or(|k| k == item_kind), "{path}: {i}");
            assert!(i.get("apiVersion").is_none_or(|v| v == api_version), "{path}: {i}");
        }
    }
    // An empty collection still has `items` (an array, not missing).
    let r = env.get("/api/v1/namespaces/n2/secrets?").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["items"], json!([]));
}

/// kube-wire.md "Per operation", apply and gotcha 3: PATCH `?&fieldManager=…` with
/// content type application/apply-patch+yaml and a compact JSON body is taken as JSON
/// (no 415), creates with 201, answers 200 when present.
#[tokio::test]
async fn raw_apply_with_leading_ampersand_creates_201_then_200() {
    let env = setup().await;
    let ns = json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"bc-p1","labels":{POOL_LABEL:"p1"}}});
    let r = env.apply("/api/v1/namespaces/bc-p1", APPLY_Q, &ns).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["kind"], "Namespace");
    assert_eq!(r.body["metadata"]["labels"][POOL_LABEL], "p1");
    let mut changed = ns.clone();
    changed["metadata"]["labels"]["extra"] = json!("1");
    let r2 = env.apply("/api/v1/namespaces/bc-p1", APPLY_Q, &changed).await;
    assert_eq!(r2.status, 200, "{}", r2.body);
    assert_eq!(r2.body["metadata"]["labels"]["extra"], "1");
    assert!(rv_of(&r2.body) > rv_of(&r.body), "a change bumps resourceVersion");
    assert_eq!(r2.body["metadata"]["uid"], r.body["metadata"]["uid"]);
}

/// kube-wire.md "Minimal simulator surface": an apply that changes nothing keeps the
/// object's resourceVersion (forced or not).
#[tokio::test]
async fn raw_apply_no_op_keeps_resource_version() {
    let env = setup().await;
    env.seed().await;
    let ds = daemonset(None, &[]);
    let path = "/apis/apps/v1/namespaces/n/daemonsets/bcd";
    let before = env.get(path).await.body;
    for q in [APPLY_Q, FORCE_Q] {
        let r = env.apply(path, q, &ds).await;
        assert_eq!(r.status, 200, "{q}: {}", r.body);
        assert_eq!(r.body["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"]);
    }
}

/// kube-wire.md "404 and 409 bodies": apply without force against a field another
/// manager owns is 409 `reason: Conflict`, `details.causes[].reason: FieldManagerConflict`
/// naming the field; the same request with `?&force=true&fieldManager=…` is 200.
#[tokio::test]
async fn raw_apply_conflict_is_409_with_causes_and_force_wins() {
    let env = setup().await;
    env.seed().await;
    // kubectl takes `.data.k` by force; better-compute applied it first.
    env.kubectl_takes_secret_data();
    let ours = json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"n"},"data":{"k":"eA=="}});
    let path = "/api/v1/namespaces/n/secrets/s";
    let r = env.apply(path, APPLY_Q, &ours).await;
    assert_status(&r, 409, "Conflict");
    assert_eq!(r.body["details"]["name"], "s");
    assert_eq!(r.body["details"]["kind"], "secrets");
    let causes = r.body["details"]["causes"].as_array().expect("details.causes");
    assert!(!causes.is_empty());
    assert_eq!(causes[0]["reason"], "FieldManagerConflict");
    assert_eq!(causes[0]["field"], ".data.k");
    assert!(causes[0]["message"].as_str().unwrap().contains("kubectl"));
    assert!(r.body["message"].as_str().unwrap().starts_with("Apply failed with 1 conflict"));

    let r = env.apply(path, FORCE_Q, &ours).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["data"]["k"], "eA==");
}

/// kube-wire.md "Per operation", delete: DELETE `path?` with content type
/// application/json and body `{}` answers either the object with
/// `metadata.deletionTimestamp` or a Success Status; a missing object is 404 NotFound.
#[tokio::test]
async fn raw_delete_with_empty_body_answers_object_or_success_status() {
    let env = setup().await;
    env.seed().await;
    for (path, plural, name) in [
        ("/api/v1/namespaces/n/secrets/s", "secrets", "s"),
        ("/api/v1/namespaces/n/serviceaccounts/bcd", "serviceaccounts", "bcd"),
        ("/apis/apps/v1/namespaces/n/daemonsets/bcd", "daemonsets", "bcd"),
    ] {
        let uid = env.get(path).await.body["metadata"]["uid"].clone();
        let r = env.delete(path).await;
        assert!(matches!(r.status.as_u16(), 200 | 202), "{path}: {}", r.body);
        deleted_answer(&r.body, path);
        if r.body["kind"] == "Status" {
            assert_eq!(r.body["details"]["name"], name);
            assert_eq!(r.body["details"]["kind"], plural);
            assert_eq!(r.body["details"]["uid"], uid);
        }
        assert_status(&env.delete(path).await, 404, "NotFound");
        assert_status(&env.get(path).await, 404, "NotFound");
    }
    let r = env.delete("/api/v1/namespaces/n").await;
    assert!(matches!(r.status.as_u16(), 200 | 202), "{}", r.body);
    deleted_answer(&r.body, "namespace");
    assert_status(&env.delete("/api/v1/namespaces/n/secrets/s").await, 404, "NotFound");
}

/// Either branch kube's delete accepts: a Success Status, or the object with
/// `metadata.deletionTimestamp` (kube-wire.md "Per operation", delete).
fn deleted_answer(v: &Value, what: &str) {
    if v["kind"] == "Status" {
        assert_eq!(v["apiVersion"], "v1", "{what}: {v}");
        assert_eq!(v["status"], "Success", "{what}: {v}");
        assert!(v["metadata"].is_object(), "{what}: {v}");
    } else {
        assert!(v["metadata"]["deletionTimestamp"].is_string(), "{what}: {v}");
    }
}

/// kube-wire.md "404 and 409 bodies" and "Minimal simulator surface": unknown routes are
/// 404 JSON Status with `reason: NotFound` (not an empty 404), and every other error is
/// a Status with `reason` and `code` equal to the HTTP status.
#[tokio::test]
async fn raw_every_error_is_a_status_with_reason() {
    let env = setup().await;
    env.seed().await;
    for path in [
        "/api/v1/pods",
        "/api/v1/namespaces/n/configmaps/x",
        "/api/v1/namespaces/n/configmaps?",
        "/apis/apps/v1/namespaces/n/deployments/x",
        "/apis/batch/v1/namespaces/n/jobs",
        "/api",
        "/apis",
        "/version",
        "/openapi/v2",
        "/",
        "",
        "//api/v1/nodes",
        "/api/v1/namespaces/n/secrets/s/extra/segments",
    ] {
        let r = env.get(path).await;
        assert_eq!(r.body["reason"], "NotFound", "{path}: {}", r.body);
        assert_status(&r, 404, "NotFound");
    }
    // A missing object names itself in `details`.
    let r = env.get("/api/v1/namespaces/missing").await;
    assert_status(&r, 404, "NotFound");
    assert_eq!(r.body["details"], json!({"name":"missing","kind":"namespaces"}));
    // Unknown cluster.
    let r = env
        .http
        .get(format!("{}/api/v1/nodes", env.base.replace(&env.id, "no-such-cluster")))
        .bearer_auth(&env.token)
        .send()
        .await
        .unwrap();
    let status = r.status();
    let body: Value = r.json().await.unwrap();
    assert_eq!(status, 404);
    assert_eq!(body["reason"], "NotFound");
    // A path segment that is not UTF-8 once decoded is still answered with a Status.
    assert_status(&env.get("/api/v1/namespaces/%FF").await, 404, "NotFound");
    // Selector that does not parse, wrong patch type, method not served.
    assert_status(&env.get("/api/v1/nodes?&labelSelector=tier+in+%28a").await, 400, "BadRequest");
    let r = env
        .raw(
            Method::PATCH,
            "/api/v1/namespaces/n?&fieldManager=x",
            Some("application/merge-patch+json"),
            Some("{}".into()),
        )
        .await;
    assert_status(&r, 415, "UnsupportedMediaType");
    let r = env
        .raw(Method::PUT, "/api/v1/namespaces/n", Some("application/json"), Some("{}".into()))
        .await;
    assert_status(&r, 405, "MethodNotAllowed");
    let r = env
        .raw(
            Method::POST,
            "/api/v1/namespaces/n/secrets?",
            Some("application/json"),
            Some("{}".into()),
        )
        .await;
    assert_status(&r, 405, "MethodNotAllowed");
    // A body that is not JSON.
    let r = env
        .raw(
            Method::PATCH,
            "/api/v1/namespaces/n?&fieldManager=x",
            Some(APPLY_CT),
            Some("a: b".into()),
        )
        .await;
    assert_status(&r, 400, "BadRequest");
}

/// kube-wire.md "Connecting" (the token goes out as `authorization: Bearer`): a wrong or
/// missing token is 401 `reason: Unauthorized`.
#[tokio::test]
async fn raw_wrong_or_missing_token_is_401_unauthorized() {
    let env = setup().await;
    for token in [Some("wrong"), None] {
        for path in ["/api/v1/nodes?", "/api/v1/namespaces/n", "/no/such/route"] {
            let r = env.raw_token(Method::GET, path, None, None, token).await;
            if path == "/no/such/route" {
                // Unrouted paths are 404 whoever asks; what matters is the Status.
                assert_eq!(r.body["kind"], "Status");
                continue;
            }
            assert_status(&r, 401, "Unauthorized");
        }
    }
}

/// kube-wire.md "URL shapes": values are form-encoded, so spaces arrive as `+`; the
/// documented example `gpu%3Dtrue%2Ctier+in+%28a%2Cb%29` and every selector form
/// (equality, `!=`, `in`, `notin`, existence, `!key`, comma AND) select Nodes.
#[tokio::test]
async fn raw_node_label_selectors_with_plus_for_spaces() {
    let env = setup().await;
    let r = env.get("/api/v1/nodes?&labelSelector=gpu%3Dtrue%2Ctier+in+%28a%2Cb%29").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["items"].as_array().unwrap().len(), 2);
    for (selector, n) in selector_cases() {
        let r = env.get(&format!("/api/v1/nodes?&labelSelector={}", form(selector))).await;
        assert_eq!(r.status, 200, "{selector}: {}", r.body);
        assert_eq!(r.body["kind"], "NodeList");
        assert_eq!(r.body["items"].as_array().unwrap().len(), n, "{selector}");
    }
    // The watcher's initial list adds `limit` (kube-wire.md "watcher"): still a list.
    let r = env.get("/api/v1/nodes?&labelSelector=gpu%3Dtrue&limit=500").await;
    assert_eq!(r.body["items"].as_array().unwrap().len(), 2);
}

/// Selector and expected Node count over [`setup`]'s nodes (2 × gpu/tier a, 1 × tier b).
fn selector_cases() -> Vec<(&'static str, usize)> {
    vec![
        ("", 3),
        ("gpu=true", 2),
        ("gpu==true", 2),
        ("tier!=a", 1),
        ("gpu!=true", 1),
        ("tier in (a,b)", 3),
        ("tier in (a, b)", 3),
        ("tier notin (a)", 1),
        ("gpu", 2),
        (POOL_LABEL, 2),
        ("!gpu", 1),
        ("gpu=true,tier=b", 0),
        ("gpu=true,tier in (a,b)", 2),
        ("!gpu,tier notin (a)", 1),
        ("better-compute.dev/substrate-pool=p1,tier", 2),
    ]
}

/// kube-wire.md "Minimal simulator surface": applied objects carry
/// `metadata.resourceVersion`, `uid` and `creationTimestamp`; Nodes a resourceVersion
/// and uid.
#[tokio::test]
async fn raw_server_metadata_is_set() {
    let env = setup().await;
    env.seed().await;
    for path in [
        "/api/v1/namespaces/n",
        "/api/v1/namespaces/n/secrets/s",
        "/api/v1/namespaces/n/serviceaccounts/bcd",
        "/apis/apps/v1/namespaces/n/daemonsets/bcd",
    ] {
        let m = &env.get(path).await.body["metadata"];
        assert!(m["resourceVersion"].as_str().is_some_and(|s| s.parse::<u64>().is_ok()), "{path}");
        assert!(m["uid"].as_str().is_some_and(|s| !s.is_empty()), "{path}");
        let created = m["creationTimestamp"].as_str().unwrap_or_else(|| panic!("{path}"));
        assert!(bc_domain::Timestamp::parse_rfc3339(created).is_ok(), "{path}: {created}");
    }
    let node = env.node_names()[0].clone();
    let m = &env.get(&format!("/api/v1/nodes/{node}")).await.body["metadata"];
    assert!(m["resourceVersion"].is_string());
    assert!(m["uid"].is_string());
}

/// kube-wire.md gotcha 6: Secret `data` values are base64 both ways; `stringData` is
/// folded into `data` by the server.
#[tokio::test]
async fn raw_secret_data_is_base64_and_string_data_is_folded() {
    let env = setup().await;
    env.seed().await;
    let path = "/api/v1/namespaces/n/secrets/t";
    let body = json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"t","namespace":"n"},
        "data":{"bin":"AP8Q"},"stringData":{"joinToken":"abc def"}});
    let r = env.apply(path, APPLY_Q, &body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["data"]["bin"], "AP8Q");
    assert_eq!(r.body["data"]["joinToken"], "YWJjIGRlZg==");
    assert!(r.body.get("stringData").is_none(), "stringData is write-only");
    let r = env.get(path).await;
    assert_eq!(r.body["data"], json!({"bin":"AP8Q","joinToken":"YWJjIGRlZg=="}));
    // `data` that is not base64 is refused as the apiserver refuses it, and leaves the
    // Secret as it was.
    let bad = json!({"metadata":{"name":"t","namespace":"n"},"data":{"bin":"not base64!"}});
    assert_status(&env.apply(path, FORCE_Q, &bad).await, 400, "BadRequest");
    assert_eq!(env.get(path).await.body["data"]["bin"], "AP8Q");
}

/// kube-wire.md "Per operation", apply: the body is the object as compact JSON, also when
/// it leaves out `apiVersion`/`kind` (typed structs skip `None` fields, gotcha 7).
#[tokio::test]
async fn raw_apply_body_without_type_meta_is_accepted() {
    let env = setup().await;
    let r = env.apply("/api/v1/namespaces/x", APPLY_Q, &json!({"metadata":{"name":"x"}})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(
        (r.body["apiVersion"].as_str(), r.body["kind"].as_str()),
        (Some("v1"), Some("Namespace"))
    );
}

// ---------------------------------------------------------------------------------------
// The real kube client, typed
// ---------------------------------------------------------------------------------------

/// kube-wire.md "Per operation", get: typed `get` of every served kind deserializes.
#[tokio::test]
async fn kube_get_every_kind() {
    let env = setup().await;
    env.seed().await;
    let c = env.kube().await;
    let node = env.node_names()[0].clone();
    let ns = bounded(Api::<Namespace>::all(c.clone()).get("n")).await.unwrap();
    assert_eq!(ns.metadata.name.as_deref(), Some("n"));
    let s = bounded(Api::<Secret>::namespaced(c.clone(), "n").get("s")).await.unwrap();
    assert_eq!(s.data.unwrap()["k"], ByteString(b"x".to_vec()));
    let sa = bounded(Api::<ServiceAccount>::namespaced(c.clone(), "n").get("bcd")).await.unwrap();
    assert_eq!(sa.metadata.namespace.as_deref(), Some("n"));
    let ds = bounded(Api::<DaemonSet>::namespaced(c.clone(), "n").get("bcd")).await.unwrap();
    assert_eq!(ds.metadata.generation, Some(1));
    let n = bounded(Api::<Node>::all(c).get(&node)).await.unwrap();
    assert!(n.spec.unwrap().provider_id.unwrap().starts_with("digitalocean://"));
}

/// kube-wire.md "404 and 409 bodies": `get_opt` of a missing object is `Ok(None)` for
/// every kind, a namespaced one in a missing namespace too.
#[tokio::test]
async fn kube_get_opt_missing_is_none() {
    let env = setup().await;
    let c = env.kube().await;
    assert!(bounded(Api::<Namespace>::all(c.clone()).get_opt("none")).await.unwrap().is_none());
    assert!(bounded(Api::<Node>::all(c.clone()).get_opt("none")).await.unwrap().is_none());
    for ns in ["default", "missing"] {
        assert!(
            bounded(Api::<Secret>::namespaced(c.clone(), ns).get_opt("x")).await.unwrap().is_none()
        );
        assert!(
            bounded(Api::<ServiceAccount>::namespaced(c.clone(), ns).get_opt("x"))
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            bounded(Api::<DaemonSet>::namespaced(c.clone(), ns).get_opt("x"))
                .await
                .unwrap()
                .is_none()
        );
    }
    // And `get` of a missing object is Error::Api with is_not_found.
    let e = bounded(Api::<Namespace>::all(c).get("none")).await.unwrap_err();
    let s = api_error(e);
    assert!(s.is_not_found());
    assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
}

/// kube-wire.md "404 and 409 bodies": an unrouted kind answers a JSON 404 NotFound, so
/// `get_opt` on it is `Ok(None)`, not an error.
#[tokio::test]
async fn kube_get_opt_on_an_unrouted_kind_is_none() {
    let env = setup().await;
    let c = env.kube().await;
    let got = bounded(Api::<ConfigMap>::namespaced(c, "default").get_opt("x")).await;
    assert!(got.unwrap().is_none());
}

/// kube-wire.md "Per operation", list: typed lists of every kind; Nodes by every
/// selector form (sent form-encoded by the client itself).
#[tokio::test]
async fn kube_list_with_label_selectors() {
    let env = setup().await;
    env.seed().await;
    let c = env.kube().await;
    let nodes = Api::<Node>::all(c.clone());
    for (selector, n) in selector_cases() {
        let list = bounded(nodes.list(&ListParams::default().labels(selector))).await.unwrap();
        assert_eq!(list.items.len(), n, "{selector}");
        assert!(list.metadata.resource_version.is_some(), "{selector}");
    }
    let all = bounded(nodes.list(&ListParams::default())).await.unwrap();
    let mut names: Vec<String> = all.items.iter().filter_map(|n| n.metadata.name.clone()).collect();
    names.sort();
    assert_eq!(names, env.node_names());
    assert_eq!(
        bounded(Api::<Namespace>::all(c.clone()).list(&ListParams::default()))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    assert_eq!(
        bounded(Api::<Secret>::namespaced(c.clone(), "n").list(&ListParams::default()))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    assert_eq!(
        bounded(Api::<ServiceAccount>::namespaced(c.clone(), "n").list(&ListParams::default()))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    assert_eq!(
        bounded(Api::<DaemonSet>::namespaced(c, "n").list(&ListParams::default()))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
}

/// kube-wire.md "Per operation", apply, and "Minimal simulator surface": typed apply
/// creates (201), merges (200) and a no-op keeps resourceVersion, for every kind.
#[tokio::test]
async fn kube_apply_create_present_and_no_op() {
    let env = setup().await;
    let c = env.kube().await;
    let pp = PatchParams::apply(FM);
    let labels = BTreeMap::from([(POOL_LABEL.to_owned(), "p1".to_owned())]);

    let ns_api = Api::<Namespace>::all(c.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("bc-p1".into());
    ns.metadata.labels = Some(labels.clone());
    let a = bounded(ns_api.patch("bc-p1", &pp, &Patch::Apply(&ns))).await.unwrap();
    let b = bounded(ns_api.patch("bc-p1", &pp, &Patch::Apply(&ns))).await.unwrap();
    assert_eq!(a.metadata.resource_version, b.metadata.resource_version, "no-op");
    assert!(a.metadata.uid.is_some() && a.metadata.creation_timestamp.is_some());
    assert_eq!(env.sim.state().kube.request_count(&env.id, "apply namespaces"), 2);

    let sa_api = Api::<ServiceAccount>::namespaced(c.clone(), "bc-p1");
    let mut sa = ServiceAccount::default();
    sa.metadata.name = Some("bcd".into());
    sa.metadata.labels = Some(labels.clone());
    let a = bounded(sa_api.patch("bcd", &pp, &Patch::Apply(&sa))).await.unwrap();
    sa.metadata.labels.as_mut().unwrap().insert("extra".into(), "1".into());
    let b = bounded(sa_api.patch("bcd", &pp.clone().force(), &Patch::Apply(&sa))).await.unwrap();
    assert_ne!(a.metadata.resource_version, b.metadata.resource_version, "merged");
    assert_eq!(b.metadata.labels.unwrap()["extra"], "1");

    let ds_api = Api::<DaemonSet>::namespaced(c, "bc-p1");
    let mut v = daemonset(Some(json!({POOL_LABEL: "p1"})), &[]);
    v["metadata"]["namespace"] = json!("bc-p1");
    let ds: DaemonSet = serde_json::from_value(v).unwrap();
    let a = bounded(ds_api.patch("bcd", &pp, &Patch::Apply(&ds))).await.unwrap();
    let b = bounded(ds_api.patch("bcd", &pp, &Patch::Apply(&ds))).await.unwrap();
    assert_eq!(a.metadata.resource_version, b.metadata.resource_version, "no-op");
    let sel = b.spec.template.spec.unwrap().node_selector.unwrap();
    assert_eq!(sel[POOL_LABEL], "p1");
}

/// kube-wire.md "404 and 409 bodies": the client surfaces an unforced conflict as
/// `Error::Api` with `is_conflict()`, code 409 and `details.causes` kept; `.force()`
/// then succeeds.
#[tokio::test]
async fn kube_apply_conflict_then_force() {
    let env = setup().await;
    env.seed().await;
    env.kubectl_takes_secret_data();
    let c = env.kube().await;
    let api = Api::<Secret>::namespaced(c, "n");
    let mut s = Secret::default();
    s.metadata.name = Some("s".into());
    s.data = Some(BTreeMap::from([("k".to_owned(), ByteString(b"x".to_vec()))]));
    let e = bounded(api.patch("s", &PatchParams::apply(FM), &Patch::Apply(&s))).await.unwrap_err();
    let st = api_error(e);
    assert!(st.is_conflict());
    assert_eq!((st.code, st.reason.as_str()), (409, "Conflict"));
    let causes = st.details.expect("details").causes;
    assert_eq!(causes[0].reason, "FieldManagerConflict");
    assert_eq!(causes[0].field, ".data.k");
    let ok =
        bounded(api.patch("s", &PatchParams::apply(FM).force(), &Patch::Apply(&s))).await.unwrap();
    assert_eq!(ok.data.unwrap()["k"], ByteString(b"x".to_vec()));
}

/// kube-wire.md "Per operation", delete: `Either::Left` (object with deletionTimestamp)
/// or `Either::Right` (Success Status); missing is `Error::Api` with `is_not_found`.
#[tokio::test]
async fn kube_delete_every_kind() {
    let env = setup().await;
    env.seed().await;
    let c = env.kube().await;
    let dp = DeleteParams::default();
    let check = |what: &str, left_has_ts: Option<bool>, right_success: Option<bool>| {
        assert!(
            left_has_ts.unwrap_or(false) || right_success.unwrap_or(false),
            "{what}: neither an object with deletionTimestamp nor a Success Status"
        );
    };
    let r = bounded(Api::<Secret>::namespaced(c.clone(), "n").delete("s", &dp)).await.unwrap();
    check(
        "secret",
        r.as_ref().left().map(|o| o.metadata.deletion_timestamp.is_some()),
        r.as_ref().right().map(|s| s.is_success()),
    );
    let r = bounded(Api::<ServiceAccount>::namespaced(c.clone(), "n").delete("bcd", &dp))
        .await
        .unwrap();
    check(
        "sa",
        r.as_ref().left().map(|o| o.metadata.deletion_timestamp.is_some()),
        r.as_ref().right().map(|s| s.is_success()),
    );
    let r = bounded(Api::<DaemonSet>::namespaced(c.clone(), "n").delete("bcd", &dp)).await.unwrap();
    check(
        "ds",
        r.as_ref().left().map(|o| o.metadata.deletion_timestamp.is_some()),
        r.as_ref().right().map(|s| s.is_success()),
    );
    let r = bounded(Api::<Namespace>::all(c.clone()).delete("n", &dp)).await.unwrap();
    check(
        "ns",
        r.as_ref().left().map(|o| o.metadata.deletion_timestamp.is_some()),
        r.as_ref().right().map(|s| s.is_success()),
    );

    let e = bounded(Api::<Secret>::namespaced(c.clone(), "n").delete("s", &dp)).await.unwrap_err();
    assert!(api_error(e).is_not_found());
    let e = bounded(Api::<Namespace>::all(c).delete("n", &dp)).await.unwrap_err();
    assert!(api_error(e).is_not_found());
}

/// kube-wire.md "Connecting": the kubeconfig's token is the bearer; a wrong one is
/// `Error::Api` 401 Unauthorized.
#[tokio::test]
async fn kube_wrong_token_is_401() {
    let env = setup().await;
    assert!(env.kubeconfig.contains(&env.token));
    let c = env.kube_with(&env.kubeconfig.replace(&env.token, "wrong-token")).await;
    let e = bounded(Api::<Namespace>::all(c).get_opt("n")).await.unwrap_err();
    let s = api_error(e);
    assert_eq!((s.code, s.reason.as_str()), (401, "Unauthorized"));
}

/// kube-wire.md gotcha 6: ByteString `data` survives both ways (also bytes that are not
/// UTF-8), and `stringData` comes back folded into `data`.
#[tokio::test]
async fn kube_secret_bytes_round_trip_and_string_data_folds() {
    let env = setup().await;
    env.seed().await;
    let c = env.kube().await;
    let api = Api::<Secret>::namespaced(c, "n");
    let mut s = Secret::default();
    s.metadata.name = Some("t".into());
    s.data = Some(BTreeMap::from([("bin".to_owned(), ByteString(vec![0, 255, 16]))]));
    s.string_data = Some(BTreeMap::from([("joinToken".to_owned(), "tok".to_owned())]));
    let out = bounded(api.patch("t", &PatchParams::apply(FM), &Patch::Apply(&s))).await.unwrap();
    let data = out.data.unwrap();
    assert_eq!(data["bin"], ByteString(vec![0, 255, 16]));
    assert_eq!(data["joinToken"], ByteString(b"tok".to_vec()));
    assert!(out.string_data.is_none());
    let got = bounded(api.get("t")).await.unwrap();
    assert_eq!(got.data.unwrap()["joinToken"], ByteString(b"tok".to_vec()));
}

/// kube-wire.md "Other statuses tried": a 500 with reason InternalError is `Error::Api`
/// after a single request (no built-in retry on 500).
#[tokio::test]
async fn kube_internal_error_is_one_request() {
    let env = setup().await;
    let c = env.kube().await;
    let kube = &env.sim.state().kube;
    kube.inject_failures(&env.id, Some("get namespaces"), 1, 500);
    let before = kube.request_count(&env.id, "get namespaces");
    let e = bounded(Api::<Namespace>::all(c).get_opt("n")).await.unwrap_err();
    let s = api_error(e);
    assert_eq!((s.code, s.reason.as_str()), (500, "InternalError"));
    assert_eq!(kube.request_count(&env.id, "get namespaces"), before + 1);
}

// ---------------------------------------------------------------------------------------
// bcd (SPEC §9 and §6)
// ---------------------------------------------------------------------------------------

/// A join endpoint that records every body and answers 201.
#[derive(Clone, Default)]
struct JoinServer {
    calls: Arc<Mutex<Vec<Value>>>,
}

impl JoinServer {
    async fn serve(&self) -> String {
        async fn join(
            State(s): State<JoinServer>,
            Json(body): Json<Value>,
        ) -> (AxumStatus, Json<Value>) {
            s.calls.lock().unwrap().push(body.clone());
            let name = body["nodeName"].as_str().unwrap_or_default().to_owned();
            (
                AxumStatus::CREATED,
                Json(json!({"nodeId": format!("node-{name}"), "poolId": "p1",
                    "nodeCredential": "c", "heartbeatSeconds": 30})),
            )
        }
        let app = axum::Router::new()
            .route("/api/compute/agents/join", post(join))
            .with_state(self.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        url
    }

    /// The node names that called, sorted.
    fn callers(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .calls
            .lock()
            .unwrap()
            .iter()
            .map(|c| c["nodeName"].as_str().unwrap_or_default().to_owned())
            .collect();
        v.sort();
        v
    }
}

/// bcd rounds until one makes no call (at most 20).
async fn settle(sim: &Sim) {
    for _ in 0..20 {
        if bounded(bcd::run_once(sim.state())).await == 0 {
            return;
        }
    }
    panic!("bcd did not settle in 20 rounds");
}

/// What the substrate reconciler applies (SPEC §6), through the real kube client:
/// Namespace `n`, ServiceAccount `bcd`, Secret `bcd-join` (unless `secret` is false)
/// and the DaemonSet with the pool label as nodeSelector and `tolerations`.
async fn apply_substrate(env: &Env, server_url: &str, secret: bool, tolerations: &[Value]) {
    let c = env.kube().await;
    let pp = PatchParams::apply(FM);
    let labels = BTreeMap::from([(POOL_LABEL.to_owned(), "p1".to_owned())]);
    let mut ns = Namespace::default();
    ns.metadata.name = Some("n".into());
    ns.metadata.labels = Some(labels.clone());
    bounded(Api::<Namespace>::all(c.clone()).patch("n", &pp, &Patch::Apply(&ns))).await.unwrap();
    let mut sa = ServiceAccount::default();
    sa.metadata.name = Some("bcd".into());
    bounded(Api::<ServiceAccount>::namespaced(c.clone(), "n").patch(
        "bcd",
        &pp,
        &Patch::Apply(&sa),
    ))
    .await
    .unwrap();
    if secret {
        let mut s = Secret::default();
        s.metadata.name = Some("bcd-join".into());
        s.string_data = Some(BTreeMap::from([
            ("serverUrl".to_owned(), server_url.to_owned()),
            ("joinToken".to_owned(), "join-token-1".to_owned()),
        ]));
        bounded(Api::<Secret>::namespaced(c.clone(), "n").patch(
            "bcd-join",
            &pp,
            &Patch::Apply(&s),
        ))
        .await
        .unwrap();
    }
    let ds: DaemonSet =
        serde_json::from_value(daemonset(Some(json!({POOL_LABEL: "p1"})), tolerations)).unwrap();
    bounded(Api::<DaemonSet>::namespaced(c, "n").patch("bcd", &pp, &Patch::Apply(&ds)))
        .await
        .unwrap();
}

/// The names of the nodes carrying the pool label, sorted.
fn pool_nodes(env: &Env) -> Vec<String> {
    let now = env.sim.state().clock.now();
    let mut v: Vec<String> = env
        .sim
        .state()
        .model()
        .cluster_nodes(&env.id, now)
        .unwrap()
        .into_iter()
        .filter(|n| n.labels.get(POOL_LABEL).is_some_and(|v| v == "p1"))
        .map(|n| n.name)
        .collect();
    v.sort();
    v
}

/// SPEC §9: a node matching the DaemonSet's nodeSelector, with the Secret present, POSTs
/// `/api/compute/agents/join` with `{joinToken, nodeName, providerNodeId?, bcdVersion}`;
/// SPEC §6: the tenant's own nodes (no pool label) never do.
#[tokio::test]
async fn bcd_matching_nodes_join_with_the_documented_body() {
    let env = setup().await;
    let join = JoinServer::default();
    let url = join.serve().await;
    apply_substrate(&env, &url, true, &[]).await;
    settle(&env.sim).await;
    let expected = pool_nodes(&env);
    assert_eq!(expected.len(), 2);
    assert_eq!(join.callers(), expected, "exactly the pool's nodes, once each");
    for call in join.calls.lock().unwrap().iter() {
        let keys: Vec<&str> = call.as_object().unwrap().keys().map(String::as_str).collect();
        for k in &keys {
            assert!(
                ["joinToken", "nodeName", "providerNodeId", "bcdVersion"].contains(k),
                "undocumented field {k} in {call}"
            );
        }
        assert_eq!(call["joinToken"], "join-token-1");
        assert!(call["bcdVersion"].as_str().is_some_and(|v| !v.is_empty()));
        assert!(call.get("providerNodeId").is_none_or(Value::is_string));
    }
}

/// SPEC §9 (the DaemonSet maps the token from the Secret): without the Secret the pod
/// cannot start, so nothing calls.
#[tokio::test]
async fn bcd_without_the_secret_never_calls() {
    let env = setup().await;
    let join = JoinServer::default();
    let url = join.serve().await;
    apply_substrate(&env, &url, false, &[]).await;
    settle(&env.sim).await;
    assert!(join.callers().is_empty());
}

/// SPEC §6 (the DaemonSet tolerates the flavors' taints): a tainted pool node joins only
/// when the DaemonSet tolerates the taint.
#[tokio::test]
async fn bcd_tainted_nodes_join_only_when_tolerated() {
    let tainted = testing::with_taint(
        testing::node_pool("bc-p1-gpu", 1, &[(POOL_LABEL, "p1")]),
        "gpu",
        "true",
        "NoSchedule",
    );
    let env = setup_with(vec![
        testing::node_pool("bc-p1-cpu", 1, &[(POOL_LABEL, "p1")]),
        tainted,
        testing::node_pool("own", 1, &[]),
    ])
    .await;
    let now = env.sim.state().clock.now();
    let nodes = env.sim.state().model().cluster_nodes(&env.id, now).unwrap();
    let name_of = |pool_tainted: bool| {
        nodes
            .iter()
            .find(|n| n.labels.contains_key(POOL_LABEL) && n.taints.is_empty() != pool_tainted)
            .unwrap()
            .name
            .clone()
    };
    let (plain, gpu) = (name_of(false), name_of(true));
    let join = JoinServer::default();
    let url = join.serve().await;

    apply_substrate(&env, &url, true, &[]).await;
    settle(&env.sim).await;
    assert_eq!(join.callers(), vec![plain.clone()], "the untolerated taint keeps bcd off");

    let tol = json!({"key":"gpu","operator":"Equal","value":"true","effect":"NoSchedule"});
    apply_substrate(&env, &url, true, &[tol]).await;
    settle(&env.sim).await;
    let mut both = vec![plain, gpu];
    both.sort();
    assert_eq!(join.callers(), both, "tolerated: the tainted node joins too, once");
}
