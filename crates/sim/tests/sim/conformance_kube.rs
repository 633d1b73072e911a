//! Black-box conformance of the simulated Kubernetes API and bcd against
//! research/kube-wire.md (what the `kube` 5 client sends and accepts) and SPEC §6/§9:
//! a served simulator's cluster is driven over loopback both with raw reqwest (the exact
//! wire: `?&fieldManager=…`, empty `?`, `+` for spaces, DELETE with `{}`) and with the
//! real `kube` client on typed `Api<K>`, one test per documented fact.

use std::collections::BTreeMap;

use bc_domain::name::LABEL_SUBSTRATE_POOL as POOL_LABEL;
use bc_domain::ports::ObjectKind;
use bc_sim::testing::{self, ClusterEnv, JoinServer, POOL, Reply, Substrate, bounded};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Secret, ServiceAccount};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
    Preconditions,
};
use reqwest::Method;
use serde_json::{Value, json};

const FM: &str = "better-compute";
/// The query kube writes for apply (kube-wire.md "URL shapes": `path?` then `&k=v`).
const APPLY_Q: &str = "?&fieldManager=better-compute";
/// The same, forced: `force` comes before `fieldManager` (kube-wire.md "Per operation").
const FORCE_Q: &str = "?&force=true&fieldManager=better-compute";
const APPLY_CT: &str = "application/apply-patch+yaml";

/// A served simulator with one running cluster: pool `bc-p1` (2 nodes, our pool label,
/// `gpu=true`, `tier=a`) and the tenant's pool `own` (1 node, `tier=b`, no pool label).
async fn setup() -> ClusterEnv {
    ClusterEnv::start().await
}

/// What these tests seed in the cluster.
trait Seed {
    async fn seed(&self);
    fn kubectl_takes_secret_data(&self);
}

impl Seed for ClusterEnv {
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
        self.apply_as(
            "kubectl",
            &json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"n"},"data":{"k":"eQ=="}}),
            true,
        );
    }
}

/// A DaemonSet `bcd` in `n` as SPEC §6/§9 describe it (testing::bcd_daemonset_spec),
/// with an optional nodeSelector and tolerations.
fn daemonset(node_selector: Option<Value>, tolerations: &[Value]) -> Value {
    json!({"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"bcd","namespace":"n"},
        "spec": testing::bcd_daemonset_spec(node_selector, tolerations)})
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
fn assert_status(r: &Reply, code: u16, reason: &str) {
    let v = &r.json();
    assert_eq!(r.status.as_u16(), code, "{v}");
    assert_eq!(v["kind"], "Status", "{v}");
    assert_eq!(v["apiVersion"], "v1", "{v}");
    assert_eq!(v["status"], "Failure", "{v}");
    assert_eq!(v["reason"], reason, "{v}");
    assert_eq!(v["code"], code, "{v}");
    assert!(v["metadata"].is_object(), "{v}");
    assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    let content_type = r.header("content-type").unwrap_or_default();
    assert!(content_type.starts_with("application/json"), "{content_type}");
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
    let node = env.node_names(None)[0].clone();
    for (path, api_version, kind) in [
        ("/api/v1/namespaces/n".to_owned(), "v1", "Namespace"),
        ("/api/v1/namespaces/n/secrets/s".to_owned(), "v1", "Secret"),
        ("/api/v1/namespaces/n/serviceaccounts/bcd".to_owned(), "v1", "ServiceAccount"),
        ("/apis/apps/v1/namespaces/n/daemonsets/bcd".to_owned(), "apps/v1", "DaemonSet"),
        (format!("/api/v1/nodes/{node}"), "v1", "Node"),
    ] {
        let r = env.get(&path).await;
        assert_eq!(r.status, 200, "{path}: {}", r.json());
        assert_eq!(r.json()["apiVersion"], api_version, "{path}");
        assert_eq!(r.json()["kind"], kind, "{path}");
        assert!(
            r.header("content-type").is_some_and(|t| t.starts_with("application/json")),
            "{path}"
        );
    }
}

/// kube-wire.md "URL shapes" and "Per operation", list: the empty query `?` works, and
/// the answer is `{items}` with `kind: XList`, `apiVersion` and `metadata.resourceVersion`.
#[tokio::test]
async fn raw_list_with_empty_query_has_items_kind_api_version_and_resource_version() {
    let env = setup().await;
    env.seed().await;
    // Besides what the seed made, a cluster has the system namespaces (`default`,
    // `kube-node-lease`, `kube-public`, `kube-system`) and every namespace its `default`
    // ServiceAccount, as the ServiceAccount controller makes it.
    for (path, api_version, kind, n) in [
        ("/api/v1/namespaces?", "v1", "NamespaceList", 5),
        ("/api/v1/namespaces/n/secrets?", "v1", "SecretList", 1),
        ("/api/v1/namespaces/n/serviceaccounts?", "v1", "ServiceAccountList", 2),
        ("/apis/apps/v1/namespaces/n/daemonsets?", "apps/v1", "DaemonSetList", 1),
        ("/api/v1/nodes?", "v1", "NodeList", 3),
    ] {
        let r = env.get(path).await;
        assert_eq!(r.status, 200, "{path}: {}", r.json());
        assert_eq!(r.json()["kind"], kind, "{path}");
        assert_eq!(r.json()["apiVersion"], api_version, "{path}");
        assert!(r.json()["metadata"]["resourceVersion"].is_string(), "{path}");
        let body = r.json();
        let items = body["items"].as_array().unwrap_or_else(|| panic!("{path}: items"));
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
    assert_eq!(r.json()["items"], json!([]));
}

/// kube-wire.md "Per operation", apply and gotcha 3: PATCH `?&fieldManager=…` with
/// content type application/apply-patch+yaml and a compact JSON body is taken as JSON
/// (no 415), creates with 201, answers 200 when present.
#[tokio::test]
async fn raw_apply_with_leading_ampersand_creates_201_then_200() {
    let env = setup().await;
    let ns = json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"bc-p1","labels":{POOL_LABEL:"p1"}}});
    let r = env.apply("/api/v1/namespaces/bc-p1", APPLY_Q, &ns).await;
    assert_eq!(r.status, 201, "{}", r.json());
    assert_eq!(r.json()["kind"], "Namespace");
    assert_eq!(r.json()["metadata"]["labels"][POOL_LABEL], "p1");
    let mut changed = ns.clone();
    changed["metadata"]["labels"]["extra"] = json!("1");
    let r2 = env.apply("/api/v1/namespaces/bc-p1", APPLY_Q, &changed).await;
    assert_eq!(r2.status, 200, "{}", r2.json());
    assert_eq!(r2.json()["metadata"]["labels"]["extra"], "1");
    assert!(rv_of(&r2.json()) > rv_of(&r.json()), "a change bumps resourceVersion");
    assert_eq!(r2.json()["metadata"]["uid"], r.json()["metadata"]["uid"]);
}

/// kube-wire.md "Minimal simulator surface": an apply that changes nothing keeps the
/// object's resourceVersion (forced or not).
#[tokio::test]
async fn raw_apply_no_op_keeps_resource_version() {
    let env = setup().await;
    env.seed().await;
    let ds = daemonset(None, &[]);
    let path = "/apis/apps/v1/namespaces/n/daemonsets/bcd";
    let before = env.get(path).await.json();
    for q in [APPLY_Q, FORCE_Q] {
        let r = env.apply(path, q, &ds).await;
        assert_eq!(r.status, 200, "{q}: {}", r.json());
        assert_eq!(r.json()["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"]);
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
    assert_eq!(r.json()["details"]["name"], "s");
    assert_eq!(r.json()["details"]["kind"], "secrets");
    let body = r.json();
    let causes = body["details"]["causes"].as_array().expect("details.causes");
    assert!(!causes.is_empty());
    assert_eq!(causes[0]["reason"], "FieldManagerConflict");
    assert_eq!(causes[0]["field"], ".data.k");
    assert!(causes[0]["message"].as_str().unwrap().contains("kubectl"));
    assert!(r.json()["message"].as_str().unwrap().starts_with("Apply failed with 1 conflict"));

    let r = env.apply(path, FORCE_Q, &ours).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json()["data"]["k"], "eA==");
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
        let uid = env.get(path).await.json()["metadata"]["uid"].clone();
        let r = env.delete(path).await;
        assert!(matches!(r.status.as_u16(), 200 | 202), "{path}: {}", r.json());
        deleted_answer(&r.json(), path);
        if r.json()["kind"] == "Status" {
            assert_eq!(r.json()["details"]["name"], name);
            assert_eq!(r.json()["details"]["kind"], plural);
            assert_eq!(r.json()["details"]["uid"], uid);
        }
        assert_status(&env.delete(path).await, 404, "NotFound");
        assert_status(&env.get(path).await, 404, "NotFound");
    }
    let r = env.delete("/api/v1/namespaces/n").await;
    assert!(matches!(r.status.as_u16(), 200 | 202), "{}", r.json());
    deleted_answer(&r.json(), "namespace");
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
        "/api/v1/persistentvolumeclaims",
        "/api/v1/namespaces/n/configmaps/x",
        "/api/v1/namespaces/n/persistentvolumeclaims?",
        "/apis/apps/v1/namespaces/n/deployments/x",
        "/apis/batch/v1/namespaces/n/jobs",
        "/apis/networking.k8s.io/v1/ingresses",
        "/api/v1/namespaces/n/pods/p/log",
        "/openapi/v2",
        "/",
        "",
        "//api/v1/nodes",
        "/api/v1/namespaces/n/secrets/s/extra/segments",
    ] {
        let r = env.get(path).await;
        assert_eq!(r.json()["reason"], "NotFound", "{path}: {}", r.json());
        assert_status(&r, 404, "NotFound");
    }
    // A missing object names itself in `details`.
    let r = env.get("/api/v1/namespaces/missing").await;
    assert_status(&r, 404, "NotFound");
    assert_eq!(r.json()["details"], json!({"name":"missing","kind":"namespaces"}));
    // Unknown cluster (through the `/k8s/<id>` path of the DigitalOcean listener).
    let r = env
        .http
        .get(format!("{}/k8s/no-such-cluster/api/v1/nodes", env.server.url()))
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
            Some("application/xml"),
            Some("{}".into()),
        )
        .await;
    assert_status(&r, 415, "UnsupportedMediaType");
    let r = env
        .raw(Method::POST, "/api/v1/namespaces/n", Some("application/json"), Some("{}".into()))
        .await;
    assert_status(&r, 405, "MethodNotAllowed");
    let r = env
        .raw(
            Method::PUT,
            "/api/v1/namespaces/n/secrets?",
            Some("application/json"),
            Some("{}".into()),
        )
        .await;
    assert_status(&r, 405, "MethodNotAllowed");
    // A create (POST to the collection) of an object without a name.
    let r = env
        .raw(
            Method::POST,
            "/api/v1/namespaces/n/secrets?",
            Some("application/json"),
            Some("{}".into()),
        )
        .await;
    assert_status(&r, 422, "Invalid");
    // A body that is neither JSON nor YAML, and one that is not an object.
    for body in ["{a: [", "- a list"] {
        let r = env
            .raw(
                Method::PATCH,
                "/api/v1/namespaces/n?&fieldManager=x",
                Some(APPLY_CT),
                Some(body.into()),
            )
            .await;
        assert_status(&r, 400, "BadRequest");
    }
}

/// kube-wire.md "Connecting" (the token goes out as `authorization: Bearer`): a wrong or
/// missing token is 401 `reason: Unauthorized`.
#[tokio::test]
async fn raw_wrong_or_missing_token_is_401_unauthorized() {
    let env = setup().await;
    for token in [Some("wrong"), None] {
        for path in ["/api/v1/nodes?", "/api/v1/namespaces/n", "/no/such/route"] {
            let r = env.raw_as(Method::GET, path, None, None, token).await;
            if path == "/no/such/route" {
                // Unrouted paths are 404 whoever asks; what matters is the Status.
                assert_eq!(r.json()["kind"], "Status");
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
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json()["items"].as_array().unwrap().len(), 2);
    for (selector, n) in selector_cases() {
        let r = env.get(&format!("/api/v1/nodes?&labelSelector={}", form(selector))).await;
        assert_eq!(r.status, 200, "{selector}: {}", r.json());
        assert_eq!(r.json()["kind"], "NodeList");
        assert_eq!(r.json()["items"].as_array().unwrap().len(), n, "{selector}");
    }
    // The watcher's initial list adds `limit` (kube-wire.md "watcher"): still a list.
    let r = env.get("/api/v1/nodes?&labelSelector=gpu%3Dtrue&limit=500").await;
    assert_eq!(r.json()["items"].as_array().unwrap().len(), 2);
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
        let m = &env.get(path).await.json()["metadata"];
        assert!(m["resourceVersion"].as_str().is_some_and(|s| s.parse::<u64>().is_ok()), "{path}");
        assert!(m["uid"].as_str().is_some_and(|s| !s.is_empty()), "{path}");
        let created = m["creationTimestamp"].as_str().unwrap_or_else(|| panic!("{path}"));
        assert!(bc_domain::Timestamp::parse_rfc3339(created).is_ok(), "{path}: {created}");
    }
    let node = env.node_names(None)[0].clone();
    let m = &env.get(&format!("/api/v1/nodes/{node}")).await.json()["metadata"];
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
    assert_eq!(r.status, 201, "{}", r.json());
    assert_eq!(r.json()["data"]["bin"], "AP8Q");
    assert_eq!(r.json()["data"]["joinToken"], "YWJjIGRlZg==");
    assert!(r.json().get("stringData").is_none(), "stringData is write-only");
    let r = env.get(path).await;
    assert_eq!(r.json()["data"], json!({"bin":"AP8Q","joinToken":"YWJjIGRlZg=="}));
    // `data` that is not base64 is refused as the apiserver refuses it, and leaves the
    // Secret as it was.
    let bad = json!({"metadata":{"name":"t","namespace":"n"},"data":{"bin":"not base64!"}});
    assert_status(&env.apply(path, FORCE_Q, &bad).await, 400, "BadRequest");
    assert_eq!(env.get(path).await.json()["data"]["bin"], "AP8Q");
}

/// kube-wire.md "Per operation", apply: the body is the object as compact JSON, also when
/// it leaves out `apiVersion`/`kind` (typed structs skip `None` fields, gotcha 7).
#[tokio::test]
async fn raw_apply_body_without_type_meta_is_accepted() {
    let env = setup().await;
    let r = env.apply("/api/v1/namespaces/x", APPLY_Q, &json!({"metadata":{"name":"x"}})).await;
    assert_eq!(r.status, 201, "{}", r.json());
    assert_eq!(
        (r.json()["apiVersion"].as_str(), r.json()["kind"].as_str()),
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
    let node = env.node_names(None)[0].clone();
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
    assert_eq!(names, env.node_names(None));
    // The seeded namespace and the four system ones.
    assert_eq!(
        bounded(Api::<Namespace>::all(c.clone()).list(&ListParams::default()))
            .await
            .unwrap()
            .items
            .len(),
        5
    );
    assert_eq!(
        bounded(Api::<Secret>::namespaced(c.clone(), "n").list(&ListParams::default()))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    // The seeded one and `default`.
    assert_eq!(
        bounded(Api::<ServiceAccount>::namespaced(c.clone(), "n").list(&ListParams::default()))
            .await
            .unwrap()
            .items
            .len(),
        2
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
    bounded(ds_api.patch("bcd", &pp, &Patch::Apply(&ds))).await.unwrap();
    // The DaemonSet controller writes the status in between (a write of its own); the
    // apply that changes nothing is no write.
    let a = bounded(ds_api.get("bcd")).await.unwrap();
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
    assert!(env.kubeconfig().contains(&env.token));
    let c = testing::kube_client(&env.kubeconfig().replace(&env.token, "wrong-token")).await;
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

/// Kubernetes API conventions (create): POST to the collection creates the object, 201
/// with it, its fields owned by the request's `fieldManager` (operation `Update`); a
/// name already taken is 409 `AlreadyExists` and leaves the existing object as it was.
#[tokio::test]
async fn raw_post_creates_201_and_a_taken_name_is_409_already_exists() {
    let env = setup().await;
    let ns =
        json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n","labels":{"team":"x"}}});
    let create = |body: &Value| {
        env.raw(
            Method::POST,
            "/api/v1/namespaces?&fieldManager=better-compute",
            Some("application/json"),
            Some(body.to_string()),
        )
    };
    let r = create(&ns).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let made = r.json();
    assert_eq!(made["metadata"]["labels"]["team"], "x");
    assert_eq!(made["metadata"]["managedFields"][0]["manager"], FM);
    assert_eq!(made["metadata"]["managedFields"][0]["operation"], "Update");
    let mut other = ns.clone();
    other["metadata"]["labels"]["team"] = json!("y");
    let r = create(&other).await;
    assert_status(&r, 409, "AlreadyExists");
    assert_eq!(r.json()["details"], json!({"name": "n", "kind": "namespaces"}));
    let now = env.get("/api/v1/namespaces/n").await.json();
    assert_eq!(now["metadata"]["labels"]["team"], "x", "the existing object is untouched");
    assert_eq!(now["metadata"]["resourceVersion"], made["metadata"]["resourceVersion"]);
    // Namespaced: the body's namespace must be the URL's, and the namespace must exist.
    let sa = |ns: &str| json!({"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"bcd","namespace":ns}});
    let post = |path: &'static str, body: Value| {
        env.raw(Method::POST, path, Some("application/json"), Some(body.to_string()))
    };
    assert_eq!(post("/api/v1/namespaces/n/serviceaccounts?", sa("n")).await.status, 201);
    assert_status(&post("/api/v1/namespaces/n/serviceaccounts?", sa("m")).await, 400, "BadRequest");
    assert_status(&post("/api/v1/namespaces/m/serviceaccounts?", sa("m")).await, 404, "NotFound");

    // The real client's create sees the same.
    let c = env.kube().await;
    let api = Api::<Namespace>::all(c);
    let pp = PostParams { field_manager: Some(FM.into()), ..Default::default() };
    let mut typed = Namespace::default();
    typed.metadata.name = Some("n".into());
    let e = bounded(api.create(&pp, &typed)).await.unwrap_err();
    assert_eq!(api_error(e).reason, "AlreadyExists");
    typed.metadata.name = Some("n2".into());
    let made = bounded(api.create(&pp, &typed)).await.unwrap();
    assert!(made.metadata.uid.is_some());
}

/// Kubernetes API conventions (DeleteOptions.preconditions): a delete whose uid or
/// resourceVersion does not match the object is 409 `Conflict` ("Precondition failed")
/// and deletes nothing; matching ones delete.
#[tokio::test]
async fn delete_preconditions_that_do_not_match_are_409_conflict() {
    let env = setup().await;
    env.seed().await;
    let path = "/api/v1/namespaces/n/secrets/s";
    let s = env.get(path).await.json();
    let (uid, rv) = (s["metadata"]["uid"].clone(), s["metadata"]["resourceVersion"].clone());
    let item = format!("{path}?");
    let delete = |body: Value| {
        env.raw(Method::DELETE, &item, Some("application/json"), Some(body.to_string()))
    };
    for pre in [json!({"uid": "someone-else"}), json!({"uid": uid, "resourceVersion": "1"})] {
        let r = delete(json!({"preconditions": pre})).await;
        assert_status(&r, 409, "Conflict");
        assert!(
            r.json()["message"].as_str().unwrap().contains("Precondition failed"),
            "{}",
            r.text
        );
        assert_eq!(env.get(path).await.status, 200, "not deleted");
    }
    assert_status(&delete(json!("not options")).await, 400, "BadRequest");

    // The real client sends DeleteParams.preconditions in the body.
    let api = Api::<Secret>::namespaced(env.kube().await, "n");
    let stale = DeleteParams {
        preconditions: Some(Preconditions { uid: Some("x".into()), resource_version: None }),
        ..DeleteParams::default()
    };
    assert!(api_error(bounded(api.delete("s", &stale)).await.unwrap_err()).is_conflict());
    let exact = DeleteParams {
        preconditions: Some(Preconditions {
            uid: uid.as_str().map(str::to_owned),
            resource_version: rv.as_str().map(str::to_owned),
        }),
        ..DeleteParams::default()
    };
    bounded(api.delete("s", &exact)).await.unwrap();
    assert_status(&env.get(path).await, 404, "NotFound");
}

// ---------------------------------------------------------------------------------------
// bcd (SPEC §9 and §6)
// ---------------------------------------------------------------------------------------

/// What the substrate reconciler applies (SPEC §6), through the real kube client:
/// testing::Substrate's Namespace `n`, Secret `bcd-join` (unless `with_secret` is
/// false), ServiceAccount `bcd` and DaemonSet with the pool label as nodeSelector and
/// `tolerations`.
async fn apply_substrate(
    env: &ClusterEnv,
    server_url: &str,
    with_secret: bool,
    tolerations: &[Value],
) {
    let c = env.kube().await;
    let pp = PatchParams::apply(FM);
    let substrate = Substrate {
        namespace: "n".into(),
        with_secret,
        tolerations: tolerations.to_vec(),
        ..Substrate::new(server_url, "join-token-1")
    };
    for o in substrate.objects() {
        let ar = match o.object.kind {
            ObjectKind::Namespace => ApiResource::erase::<Namespace>(&()),
            ObjectKind::Secret => ApiResource::erase::<Secret>(&()),
            ObjectKind::ServiceAccount => ApiResource::erase::<ServiceAccount>(&()),
            ObjectKind::DaemonSet => ApiResource::erase::<DaemonSet>(&()),
        };
        let api = match &o.object.namespace {
            Some(ns) => Api::<DynamicObject>::namespaced_with(c.clone(), ns, &ar),
            None => Api::<DynamicObject>::all_with(c.clone(), &ar),
        };
        bounded(api.patch(&o.object.name, &pp, &Patch::Apply(&o.manifest))).await.unwrap();
    }
}

/// The names of the nodes carrying the pool label, sorted.
fn pool_nodes(env: &ClusterEnv) -> Vec<String> {
    env.node_names(Some((POOL_LABEL, POOL)))
}

/// SPEC §9: a node matching the DaemonSet's nodeSelector, with the Secret present, POSTs
/// `/api/compute/agents/join` with `{joinToken, nodeName, providerNodeId?, bcdVersion,
/// serviceAccountToken}` (the pod's projected token, issue 29 item 4);
/// SPEC §6: the tenant's own nodes (no pool label) never do.
#[tokio::test]
async fn bcd_matching_nodes_join_with_the_documented_body() {
    let env = setup().await;
    let join = JoinServer::start().await;
    let url = join.url().to_owned();
    apply_substrate(&env, &url, true, &[]).await;
    testing::settle(&env.sim).await;
    let expected = pool_nodes(&env);
    assert_eq!(expected.len(), 2);
    assert_eq!(join.callers(), expected, "exactly the pool's nodes, once each");
    for call in join.calls().iter() {
        let keys: Vec<&str> = call.as_object().unwrap().keys().map(String::as_str).collect();
        for k in &keys {
            assert!(
                ["joinToken", "nodeName", "providerNodeId", "bcdVersion", "serviceAccountToken"]
                    .contains(k),
                "undocumented field {k} in {call}"
            );
        }
        assert_eq!(call["joinToken"], "join-token-1");
        assert!(call["bcdVersion"].as_str().is_some_and(|v| !v.is_empty()));
        assert!(call["serviceAccountToken"].as_str().is_some_and(|t| t.split('.').count() == 3));
        assert!(call.get("providerNodeId").is_none_or(Value::is_string));
    }
}

/// SPEC §9 (the DaemonSet maps the token from the Secret): without the Secret the pod
/// cannot start, so nothing calls.
#[tokio::test]
async fn bcd_without_the_secret_never_calls() {
    let env = setup().await;
    let join = JoinServer::start().await;
    let url = join.url().to_owned();
    apply_substrate(&env, &url, false, &[]).await;
    testing::settle(&env.sim).await;
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
    let env = ClusterEnv::running(vec![
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
    let join = JoinServer::start().await;
    let url = join.url().to_owned();

    apply_substrate(&env, &url, true, &[]).await;
    testing::settle(&env.sim).await;
    assert_eq!(join.callers(), vec![plain.clone()], "the untolerated taint keeps bcd off");

    let tol = json!({"key":"gpu","operator":"Equal","value":"true","effect":"NoSchedule"});
    apply_substrate(&env, &url, true, &[tol]).await;
    testing::settle(&env.sim).await;
    let mut both = vec![plain, gpu];
    both.sort();
    assert_eq!(join.callers(), both, "tolerated: the tainted node joins too, once");
}
