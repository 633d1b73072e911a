//! The HTTP face of the simulated Kubernetes API (routes relative to `/k8s/{cluster_id}`),
//! shaped after what the `kube` 5 client sends and accepts (research/kube-wire.md).
//!
//! Serves GET (get, list), POST (create), PATCH (server-side apply only) and DELETE (with
//! `DeleteOptions.preconditions`) on the stored kinds, and GET on Nodes.
//!
//! Invariant: every answer is JSON, and every error — including unknown routes and
//! methods — is a metav1 Status with `reason` set and HTTP status equal to `code`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use serde_json::{Value, json};

use bc_domain::ports::Preconditions;

use super::{KubeError, KubeStore, Resource, Selector, UNMATCHED, Verb, node_json};
use crate::SimState;

type Params = HashMap<String, String>;
type QueryResult = Result<Query<HashMap<String, String>>, QueryRejection>;

/// The routes; `cluster_id` comes from the enclosing nest.
pub(super) fn router(state: Arc<SimState>) -> Router {
    Router::new()
        .route("/api/v1/namespaces", any(namespaces))
        .route("/api/v1/namespaces/{ns}", any(namespace))
        .route("/api/v1/namespaces/{ns}/{plural}", any(core_collection))
        .route("/api/v1/namespaces/{ns}/{plural}/{name}", any(core_item))
        .route("/api/v1/nodes", any(nodes))
        .route("/api/v1/nodes/{name}", any(node))
        .route("/apis/apps/v1/namespaces/{ns}/daemonsets", any(daemonsets))
        .route("/apis/apps/v1/namespaces/{ns}/daemonsets/{name}", any(daemonset))
        .fallback(unknown_route)
        .with_state(state)
}

/// The request's parts every handler passes on.
struct Call {
    state: Arc<SimState>,
    params: Params,
    method: Method,
    headers: HeaderMap,
    query: QueryResult,
    body: Bytes,
}

fn respond(code: u16, body: &Value) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

fn error(e: &KubeError) -> Response {
    respond(e.code, &e.to_status())
}

/// The answer to paths no route matches (also `/k8s/{cluster_id}/`, which the nest
/// does not reach: see `crate::Sim::router`).
pub(super) async fn unknown_route(
    State(state): State<Arc<SimState>>,
    params: Result<Path<Params>, PathRejection>,
    method: Method,
    uri: axum::http::Uri,
) -> Response {
    if let Some(id) = params.ok().and_then(|Path(p)| p.get("cluster_id").cloned()) {
        state.kube.count(&id, UNMATCHED);
    }
    error(&KubeError::new(
        404,
        "NotFound",
        format!("the server could not find the requested resource ({method} {})", uri.path()),
    ))
}

fn method_not_allowed(method: &Method) -> Response {
    error(&KubeError::new(
        405,
        "MethodNotAllowed",
        format!("the server does not allow this method on the requested resource ({method})"),
    ))
}

impl Call {
    fn cluster(&self) -> &str {
        self.params.get("cluster_id").map(String::as_str).unwrap_or_default()
    }

    fn param(&self, name: &str) -> Option<&str> {
        self.params.get(name).map(String::as_str)
    }

    fn bearer(&self) -> Option<&str> {
        self.headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
    }

    fn query(&self) -> Result<&HashMap<String, String>, KubeError> {
        self.query
            .as_ref()
            .map(|q| &q.0)
            .map_err(|e| KubeError::bad_request(format!("invalid query: {e}")))
    }

    fn selector(&self) -> Result<Selector, KubeError> {
        let q = self.query()?;
        if q.get("watch").is_some_and(|w| w == "true" || w == "1") {
            return Err(KubeError::bad_request("watch is not supported by the simulator"));
        }
        Selector::parse(q.get("labelSelector").map(String::as_str).unwrap_or_default())
            .map_err(|e| KubeError::bad_request(format!("unable to parse requirement: {e}")))
    }

    fn gate(&self, verb: Verb, resource: Resource) -> Result<super::ClusterView, KubeError> {
        KubeStore::gate(&self.state, self.cluster(), self.bearer(), verb, resource)
    }

    /// The verb of a request on one object.
    fn item_verb(&self) -> Option<Verb> {
        match self.method {
            Method::GET => Some(Verb::Get),
            Method::PATCH => Some(Verb::Apply),
            Method::DELETE => Some(Verb::Delete),
            _ => None,
        }
    }

    /// 415 UnsupportedMediaType unless the body is `wanted` (`what` says what is served).
    fn expect_content_type(&self, wanted: &str, what: &str) -> Result<(), KubeError> {
        let content_type = self
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if content_type.starts_with(wanted) {
            return Ok(());
        }
        Err(KubeError::new(
            415,
            "UnsupportedMediaType",
            format!("the simulator {what}, not {content_type:?}"),
        ))
    }

    /// `DeleteOptions.preconditions` of a DELETE body (an empty body has none).
    fn preconditions(&self) -> Result<Preconditions, KubeError> {
        if self.body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Preconditions::default());
        }
        let v: Value = serde_json::from_slice(&self.body)
            .ok()
            .filter(Value::is_object)
            .ok_or_else(|| KubeError::bad_request("the body is not a DeleteOptions object"))?;
        let s = |p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_owned);
        Ok(Preconditions {
            uid: s("/preconditions/uid"),
            resource_version: s("/preconditions/resourceVersion"),
        })
    }

    /// GET (list) or POST (create) on a collection of stored objects.
    fn collection(
        &self,
        resource: Resource,
        namespace: Option<&str>,
    ) -> Result<Response, KubeError> {
        match self.method {
            Method::GET => self.list(resource, namespace),
            Method::POST => self.create(resource, namespace),
            _ => Ok(method_not_allowed(&self.method)),
        }
    }

    /// POST: creates the object the JSON body describes, 201, or 409 AlreadyExists.
    fn create(&self, resource: Resource, namespace: Option<&str>) -> Result<Response, KubeError> {
        self.gate(Verb::Create, resource)?;
        self.expect_content_type("application/json", "creates from application/json only")?;
        let body: Value = serde_json::from_slice(&self.body)
            .map_err(|e| KubeError::bad_request(format!("the body is not JSON: {e}")))?;
        let Some(name) = body.pointer("/metadata/name").and_then(Value::as_str) else {
            return Err(KubeError::new(
                422,
                "Invalid",
                format!(
                    "{} \"\" is invalid: metadata.name: Required value: name or generateName is required",
                    resource.kind()
                ),
            ));
        };
        let q = self.query()?;
        let user_agent =
            self.headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let manager = q.get("fieldManager").map(String::as_str).unwrap_or(user_agent);
        let created = self.state.kube.create(
            self.cluster(),
            &super::ApplyRequest { resource, namespace, name, body: &body, manager, force: false },
            self.state.clock.now(),
        )?;
        Ok(respond(201, &created.object))
    }

    /// GET on a collection of stored objects.
    fn list(&self, resource: Resource, namespace: Option<&str>) -> Result<Response, KubeError> {
        self.gate(Verb::List, resource)?;
        let selector = self.selector()?;
        let kube = &self.state.kube;
        let items = kube.list(self.cluster(), resource, namespace, &selector);
        Ok(respond(200, &list_body(resource, kube.resource_version(), items)))
    }

    /// GET, PATCH (apply) or DELETE on one stored object.
    fn item(
        &self,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Response, KubeError> {
        let Some(verb) = self.item_verb() else {
            return Ok(method_not_allowed(&self.method));
        };
        self.gate(verb, resource)?;
        let kube = &self.state.kube;
        let cluster = self.cluster();
        match self.method {
            Method::GET => Ok(respond(200, &kube.get(cluster, resource, namespace, name)?)),
            Method::PATCH => {
                self.expect_content_type(
                    "application/apply-patch+yaml",
                    "supports only server-side apply (application/apply-patch+yaml)",
                )?;
                // kube sends JSON, which is valid YAML; the Json extractor would reject
                // the content type, hence the raw body.
                let body: Value = serde_json::from_slice(&self.body).map_err(|e| {
                    KubeError::bad_request(format!("the apply body is not JSON: {e}"))
                })?;
                let q = self.query()?;
                let manager = q.get("fieldManager").map(String::as_str).unwrap_or_default();
                let force = q.get("force").is_some_and(|f| f == "true");
                let applied = kube.apply(
                    cluster,
                    &super::ApplyRequest { resource, namespace, name, body: &body, manager, force },
                    self.state.clock.now(),
                )?;
                Ok(respond(if applied.created { 201 } else { 200 }, &applied.object))
            }
            Method::DELETE => {
                let pre = self.preconditions()?;
                let now = self.state.clock.now();
                match kube.delete(cluster, resource, namespace, name, &pre, now)? {
                    super::Deleted::Object(o) | super::Deleted::Status(o) => Ok(respond(200, &o)),
                }
            }
            _ => Ok(method_not_allowed(&self.method)),
        }
    }
}

fn list_body(resource: Resource, rv: u64, items: Vec<Value>) -> Value {
    json!({
        "apiVersion": resource.api_version(),
        "kind": format!("{}List", resource.kind()),
        "metadata": {"resourceVersion": rv.to_string()},
        "items": items,
    })
}

fn run(f: impl FnOnce() -> Result<Response, KubeError>) -> Response {
    f().unwrap_or_else(|e| error(&e))
}

macro_rules! handler {
    ($name:ident, |$call:ident| $body:expr) => {
        async fn $name(
            State(state): State<Arc<SimState>>,
            params: Result<Path<Params>, PathRejection>,
            method: Method,
            headers: HeaderMap,
            query: QueryResult,
            body: Result<Bytes, BytesRejection>,
        ) -> Response {
            // The extractors' own rejections are plain text; every answer must be a
            // Status with `reason` (research/kube-wire.md), so they are mapped here.
            let Ok(Path(params)) = params else {
                return error(&KubeError::new(
                    404,
                    "NotFound",
                    "the server could not find the requested resource (the path does not decode)",
                ));
            };
            let body = match body {
                Ok(b) => b,
                Err(e) => {
                    let code = e.status().as_u16();
                    let reason = if code == 413 { "RequestEntityTooLarge" } else { "BadRequest" };
                    return error(&KubeError::new(code, reason, e.body_text()));
                }
            };
            let $call = Call { state, params, method, headers, query, body };
            run(|| $body)
        }
    };
}

handler!(namespaces, |c| c.collection(Resource::Namespace, None));

handler!(namespace, |c| {
    let name = c.param("ns").unwrap_or_default().to_owned();
    c.item(Resource::Namespace, None, &name)
});

fn core_resource(c: &Call) -> Result<Resource, KubeError> {
    match c.param("plural").unwrap_or_default() {
        "secrets" => Ok(Resource::Secret),
        "serviceaccounts" => Ok(Resource::ServiceAccount),
        other => Err({
            c.state.kube.count(c.cluster(), UNMATCHED);
            KubeError::new(
                404,
                "NotFound",
                format!("the server could not find the requested resource ({other})"),
            )
        }),
    }
}

handler!(core_collection, |c| {
    let resource = core_resource(&c)?;
    let ns = c.param("ns").map(str::to_owned);
    c.collection(resource, ns.as_deref())
});

handler!(core_item, |c| {
    let resource = core_resource(&c)?;
    let ns = c.param("ns").map(str::to_owned);
    let name = c.param("name").unwrap_or_default().to_owned();
    c.item(resource, ns.as_deref(), &name)
});

handler!(daemonsets, |c| {
    let ns = c.param("ns").map(str::to_owned);
    c.collection(Resource::DaemonSet, ns.as_deref())
});

handler!(daemonset, |c| {
    let ns = c.param("ns").map(str::to_owned);
    let name = c.param("name").unwrap_or_default().to_owned();
    c.item(Resource::DaemonSet, ns.as_deref(), &name)
});

handler!(nodes, |c| {
    if c.method != Method::GET {
        return Ok(method_not_allowed(&c.method));
    }
    let view = c.gate(Verb::List, Resource::Node)?;
    let selector = c.selector()?;
    let rv = c.state.kube.resource_version();
    let items: Vec<Value> = view
        .nodes
        .iter()
        .filter(|n| selector.matches(&n.labels))
        .map(|n| node_json(n, rv))
        .collect();
    Ok(respond(200, &list_body(Resource::Node, rv, items)))
});

handler!(node, |c| {
    if c.method != Method::GET {
        return Ok(method_not_allowed(&c.method));
    }
    let view = c.gate(Verb::Get, Resource::Node)?;
    let name = c.param("name").unwrap_or_default();
    let rv = c.state.kube.resource_version();
    view.nodes
        .iter()
        .find(|n| n.name == name)
        .map(|n| respond(200, &node_json(n, rv)))
        .ok_or_else(|| KubeError::not_found("nodes", name))
});
