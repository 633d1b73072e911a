//! The HTTP face of a simulated cluster's Kubernetes API: what kubectl, kube-rs and the
//! Python client send (research/kube-wire.md) — `/version`, discovery, OpenAPI v3, and
//! on every served resource get, list (selectors, `limit`/`continue`, Table output),
//! watch (resourceVersion, bookmarks, 410 Gone), create, replace, the four PATCH kinds,
//! delete (preconditions, propagation) and deletecollection.
//!
//! Served at the root of each cluster's own TLS address (the cluster id comes with the
//! router), and under `/k8s/{cluster_id}` on the DigitalOcean listener.
//!
//! Invariant: every answer is JSON, and every error — including unknown routes and
//! methods — is a metav1 Status with `reason` set and HTTP status equal to `code`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use bc_domain::kube_wire;
use bc_domain::ports::Preconditions;
use serde_json::{Value, json};

use super::store::{EventType, Page, Query as ListQuery};
use super::table::{self, Include};
use super::{
    DISCOVERY, Edit, FieldSelector, FieldValidation, KubeError, KubeStore, Propagation, Resource,
    Selector, UNMATCHED, Verb, discovery, openapi,
};
use crate::SimState;

type Params = HashMap<String, String>;
type QueryResult = Result<Query<HashMap<String, String>>, QueryRejection>;

/// The handlers' state: the simulator, and the cluster when the router serves only one.
#[derive(Clone)]
pub(super) struct Ctx {
    pub(super) state: Arc<SimState>,
    pub(super) cluster: Option<String>,
}

/// The routes of one cluster (`cluster` given) or of every cluster under
/// `/k8s/{cluster_id}` (`None`: the id comes from the path).
pub(super) fn router(state: Arc<SimState>, cluster: Option<String>) -> Router {
    Router::new()
        .route("/version", any(version))
        .route("/version/", any(version))
        .route("/healthz", any(health))
        .route("/livez", any(health))
        .route("/readyz", any(health))
        .route("/api", any(api))
        .route("/api/", any(api))
        .route("/api/{version}", any(api_version))
        .route("/apis", any(apis))
        .route("/apis/", any(apis))
        .route("/apis/{group}", any(apis_group))
        .route("/apis/{group}/{version}", any(apis_group_version))
        .route("/openapi/v3", any(openapi_root))
        .route("/openapi/v3/api/{version}", any(openapi_core))
        .route("/openapi/v3/apis/{group}/{version}", any(openapi_group))
        .route("/api/{version}/{plural}", any(core_top))
        .route("/api/{version}/{plural}/{name}", any(core_top_item))
        .route("/api/{version}/namespaces/{ns}/{plural}", any(core_ns))
        .route("/api/{version}/namespaces/{ns}/{plural}/{name}", any(core_ns_item))
        .route("/apis/authentication.k8s.io/v1/tokenreviews", any(token_review))
        .route("/apis/{group}/{version}/{plural}", any(group_top))
        .route("/apis/{group}/{version}/{plural}/{name}", any(group_top_item))
        .route("/apis/{group}/{version}/namespaces/{ns}/{plural}", any(group_ns))
        .route("/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}", any(group_ns_item))
        .fallback(unknown_route)
        .with_state(Ctx { state, cluster })
}

/// The request's parts every handler passes on.
struct Call {
    state: Arc<SimState>,
    cluster: String,
    params: Params,
    method: Method,
    headers: HeaderMap,
    query: QueryResult,
    body: Bytes,
}

fn respond(code: u16, body: &Value) -> Response {
    respond_as(code, "application/json", body)
}

fn respond_as(code: u16, content_type: &str, body: &Value) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let ct =
        HeaderValue::from_str(content_type).unwrap_or(HeaderValue::from_static("application/json"));
    (status, [(header::CONTENT_TYPE, ct)], body.to_string()).into_response()
}

fn error(e: &KubeError) -> Response {
    respond(e.code, &e.to_status())
}

fn not_found_route(what: &str) -> KubeError {
    KubeError::new(
        404,
        "NotFound",
        format!("the server could not find the requested resource ({what})"),
    )
}

/// The answer to paths no route matches (also `/k8s/{cluster_id}/`, which the nest
/// does not reach: see `crate::Sim::router`).
pub(super) async fn unknown_route(
    State(ctx): State<Ctx>,
    params: Result<Path<Params>, PathRejection>,
    method: Method,
    uri: axum::http::Uri,
) -> Response {
    let id = ctx
        .cluster
        .clone()
        .or_else(|| params.ok().and_then(|Path(p)| p.get("cluster_id").cloned()));
    if let Some(id) = id {
        ctx.state.kube.count(&id, UNMATCHED);
    }
    error(&not_found_route(&format!("{method} {}", uri.path())))
}

/// Where a resource request points.
struct Target {
    resource: Resource,
    namespace: Option<String>,
    name: Option<String>,
}

impl Call {
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

    fn header(&self, name: header::HeaderName) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
    }

    fn query(&self) -> Result<&HashMap<String, String>, KubeError> {
        self.query
            .as_ref()
            .map(|q| &q.0)
            .map_err(|e| KubeError::bad_request(format!("invalid query: {e}")))
    }

    fn q(&self, name: &str) -> Option<&str> {
        self.query().ok().and_then(|q| q.get(name)).map(String::as_str).filter(|v| !v.is_empty())
    }

    /// A boolean query parameter as apimachinery's `Convert_Slice_string_To_bool` reads
    /// it: present and neither `0` nor `false` (any case) is true, so the Python client's
    /// `watch=True` is a watch.
    fn flag(&self, name: &str) -> bool {
        self.q(name).is_some_and(|v| v != "0" && !v.eq_ignore_ascii_case("false"))
    }

    fn gate(&self, verb: Verb, resource: Resource) -> Result<super::ClusterView, KubeError> {
        KubeStore::gate(&self.state, &self.cluster, self.bearer(), verb, resource)
    }

    /// The gate of discovery, `/version` and OpenAPI requests (`public`: no token needed,
    /// as anonymous clients may read `/version`).
    fn gate_info(&self, public: bool) -> Result<super::ClusterView, KubeError> {
        let bearer = match self.bearer() {
            None if public => {
                let token = self.state.model().cluster_api_token(&self.cluster);
                return KubeStore::gate_op(
                    &self.state,
                    &self.cluster,
                    token.as_deref(),
                    DISCOVERY,
                    None,
                );
            }
            b => b,
        };
        KubeStore::gate_op(&self.state, &self.cluster, bearer, DISCOVERY, None)
    }

    /// The field manager of a write: `fieldManager`, else the User-Agent's product (as
    /// the apiserver derives it).
    fn manager(&self) -> String {
        if let Some(m) = self.q("fieldManager") {
            return m.to_owned();
        }
        let ua = self.header(header::USER_AGENT);
        let product = ua.split('/').next().unwrap_or_default();
        product.chars().take(128).collect()
    }

    fn validation(&self) -> Result<FieldValidation, KubeError> {
        FieldValidation::parse(self.q("fieldValidation"))
    }

    fn content_type(&self) -> &str {
        self.header(header::CONTENT_TYPE).split(';').next().unwrap_or_default().trim()
    }

    /// The body as JSON (or YAML, which clients may send for creates, replaces and
    /// applies).
    fn body_value(&self, yaml_ok: bool) -> Result<Value, KubeError> {
        self.body_of(yaml_ok, None)
    }

    /// The body of a create or replace of `resource`: JSON, YAML, or the protobuf kubectl's
    /// typed commands send for the kinds `protobuf` reads.
    fn body_of(&self, yaml_ok: bool, resource: Option<Resource>) -> Result<Value, KubeError> {
        let ct = self.content_type();
        if ct.starts_with("application/vnd.kubernetes.protobuf")
            && let Some(decoded) = resource.and_then(|r| super::protobuf::decode(r, &self.body))
        {
            return decoded
                .map_err(|e| KubeError::bad_request(format!("error decoding protobuf: {e}")));
        }
        if ct.starts_with("application/vnd.kubernetes.protobuf") || ct == "application/cbor" {
            // Other kinds only as JSON (or YAML).
            return Err(KubeError::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (not {ct:?})"
                ),
            ));
        }
        if yaml_ok && (ct.ends_with("yaml") || ct.is_empty()) {
            let text = std::str::from_utf8(&self.body)
                .map_err(|_| KubeError::bad_request("the body is not UTF-8"))?;
            if let Ok(v) = serde_json::from_str::<Value>(text) {
                return Ok(v);
            }
            return serde_saphyr::from_str::<Value>(text)
                .map_err(|e| KubeError::bad_request(format!("error decoding YAML: {e}")));
        }
        serde_json::from_slice(&self.body)
            .map_err(|e| KubeError::bad_request(format!("the body is not JSON: {e}")))
    }

    fn target(&self, group: &str) -> Result<Target, KubeError> {
        let version = self.param("version").unwrap_or_default();
        let plural = self.param("plural").unwrap_or_default();
        let namespace = self.param("ns").map(str::to_owned);
        let name = self.param("name").map(str::to_owned);
        let unmatched = || {
            self.state.kube.count(&self.cluster, UNMATCHED);
            not_found_route(plural)
        };
        let resource = Resource::from_path(group, version, plural).ok_or_else(unmatched)?;
        // `/api/v1/namespaces/x` is the Namespace x; other cluster-scoped kinds have no
        // namespaced path, and namespaced items need their namespace.
        if (namespace.is_some() && !resource.namespaced())
            || (name.is_some() && namespace.is_none() && resource.namespaced())
        {
            return Err(unmatched());
        }
        Ok(Target { resource, namespace, name })
    }

    fn serve(&self, t: Target) -> Result<Response, KubeError> {
        let ns = t.namespace.as_deref();
        match (&self.method, t.name.as_deref()) {
            (&Method::GET, None) if self.flag("watch") => self.watch(t.resource, ns),
            (&Method::GET, None) => self.list(t.resource, ns),
            (&Method::GET, Some(name)) => self.get(t.resource, ns, name),
            (&Method::POST, None) if ns.is_some() || !t.resource.namespaced() => {
                self.create(t.resource, ns)
            }
            (&Method::PUT, Some(name)) => self.replace(t.resource, ns, name),
            (&Method::PATCH, Some(name)) => self.patch(t.resource, ns, name),
            (&Method::DELETE, Some(name)) => self.delete(t.resource, ns, name),
            (&Method::DELETE, None) => self.delete_collection(t.resource, ns),
            _ => Err(KubeError::method_not_allowed(self.method.as_str())),
        }
    }

    fn list_query(&self, resource: Resource, ns: Option<&str>) -> Result<ListQuery, KubeError> {
        self.query()?;
        let labels = Selector::parse(self.q("labelSelector").unwrap_or_default())
            .map_err(|e| KubeError::bad_request(format!("unable to parse requirement: {e}")))?;
        let fields = FieldSelector::parse(self.q("fieldSelector").unwrap_or_default(), resource)?;
        let limit = match self.q("limit") {
            None => 0,
            Some(l) => l
                .parse::<usize>()
                .map_err(|_| KubeError::bad_request(format!("invalid limit {l:?}")))?,
        };
        Ok(ListQuery {
            namespace: ns.map(str::to_owned),
            labels,
            fields,
            limit,
            continue_from: self.q("continue").map(str::to_owned),
        })
    }

    fn list(&self, resource: Resource, ns: Option<&str>) -> Result<Response, KubeError> {
        self.gate(Verb::List, resource)?;
        let query = self.list_query(resource, ns)?;
        if self.q("resourceVersionMatch") == Some("Exact")
            && let Some(rv) = self.q("resourceVersion")
            && rv != self.state.kube.resource_version().to_string()
        {
            return Err(KubeError::expired(format!("too old resource version: {rv}")));
        }
        let page = self.state.kube.page(&self.cluster, resource, &query)?;
        let accept = self.header(header::ACCEPT);
        if let Some(v) = table::wants_table(accept) {
            let include = Include::parse(self.q("includeObject"));
            let now = self.state.clock.now();
            let t = table::table(
                resource,
                &page.items,
                now,
                include,
                v,
                page.resource_version,
                page.next.as_deref(),
            );
            return Ok(respond_as(200, &table::content_type(v), &t));
        }
        Ok(respond(200, &list_body(resource, page)))
    }

    fn get(&self, resource: Resource, ns: Option<&str>, name: &str) -> Result<Response, KubeError> {
        self.gate(Verb::Get, resource)?;
        let object = self.state.kube.get(&self.cluster, resource, ns, name)?;
        if let Some(v) = table::wants_table(self.header(header::ACCEPT)) {
            let include = Include::parse(self.q("includeObject"));
            let rv = object["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|r| r.parse().ok())
                .unwrap_or(0);
            let t = table::table(resource, &[object], self.state.clock.now(), include, v, rv, None);
            return Ok(respond_as(200, &table::content_type(v), &t));
        }
        Ok(respond(200, &object))
    }

    fn written(&self, code: u16, applied: super::Applied) -> Response {
        let mut r = respond(code, &applied.object);
        for w in applied.warnings {
            if let Ok(v) = HeaderValue::from_str(&format!("299 - {}", super::validate::quote(&w))) {
                r.headers_mut().append(header::WARNING, v);
            }
        }
        r
    }

    fn create(&self, resource: Resource, ns: Option<&str>) -> Result<Response, KubeError> {
        self.gate(Verb::Create, resource)?;
        let body = self.body_of(true, Some(resource))?;
        let name = body.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        let manager = self.manager();
        let req = super::ApplyRequest {
            resource,
            namespace: ns,
            name,
            body: &body,
            manager: &manager,
            force: false,
        };
        let validation = self.validation()?;
        let now = self.state.clock.now();
        if self.dry_run() {
            return self.dry(|o| o.create(&self.cluster, &req, validation, now), 201);
        }
        let made = self.state.kube.create_with(&self.cluster, &req, validation, now)?;
        Ok(self.written(201, made))
    }

    fn dry_run(&self) -> bool {
        self.q("dryRun") == Some("All")
    }

    /// A write carried out on a copy of the cluster's objects (`dryRun=All`): validated,
    /// defaulted, answered, not kept.
    fn dry(
        &self,
        f: impl FnOnce(&mut super::store::Objects) -> Result<super::Applied, KubeError>,
        code: u16,
    ) -> Result<Response, KubeError> {
        let mut scratch = self.state.kube.read(&self.cluster, |o| o.scratch(&self.cluster));
        let applied = f(&mut scratch)?;
        Ok(self.written(code, applied))
    }

    fn replace(
        &self,
        resource: Resource,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Response, KubeError> {
        self.gate(Verb::Update, resource)?;
        let body = self.body_of(true, Some(resource))?;
        self.edit(resource, ns, name, Edit::Replace(&body))
    }

    fn edit(
        &self,
        resource: Resource,
        ns: Option<&str>,
        name: &str,
        edit: Edit<'_>,
    ) -> Result<Response, KubeError> {
        let manager = self.manager();
        let validation = self.validation()?;
        let now = self.state.clock.now();
        let cluster = &self.cluster;
        if self.dry_run() {
            return self.dry(
                |o| o.update(cluster, resource, ns, name, edit, &manager, validation, now),
                200,
            );
        }
        let done =
            self.state.kube.update(cluster, resource, ns, name, edit, &manager, validation, now)?;
        Ok(self.written(200, done))
    }

    fn patch(
        &self,
        resource: Resource,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Response, KubeError> {
        let ct = self.content_type().to_owned();
        let verb = if ct == "application/apply-patch+yaml" { Verb::Apply } else { Verb::Patch };
        self.gate(verb, resource)?;
        match ct.as_str() {
            "application/apply-patch+yaml" => {
                // kube sends JSON, kubectl YAML or JSON: both parse as YAML.
                let body = self.body_value(true)?;
                let manager = self.q("fieldManager").unwrap_or_default().to_owned();
                let force = self.flag("force");
                let validation = self.validation()?;
                let now = self.state.clock.now();
                let req = super::ApplyRequest {
                    resource,
                    namespace: ns,
                    name,
                    body: &body,
                    manager: &manager,
                    force,
                };
                if self.dry_run() {
                    return self.dry(|o| o.apply(&self.cluster, &req, validation, now), 200);
                }
                let applied = self.state.kube.apply_with(&self.cluster, &req, validation, now)?;
                let code = if applied.created { 201 } else { 200 };
                Ok(self.written(code, applied))
            }
            "application/merge-patch+json" => {
                let p = self.body_value(false)?;
                self.edit(resource, ns, name, Edit::MergePatch(&p))
            }
            "application/json-patch+json" => {
                let p = self.body_value(false)?;
                self.edit(resource, ns, name, Edit::JsonPatch(&p))
            }
            "application/strategic-merge-patch+json" => {
                let p = self.body_value(false)?;
                self.edit(resource, ns, name, Edit::StrategicPatch(&p))
            }
            other => Err(KubeError::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (not {other:?})"
                ),
            )),
        }
    }

    /// `DeleteOptions` (body, or query) : preconditions and propagation.
    fn delete_options(&self) -> Result<(Preconditions, Propagation), KubeError> {
        let body: Value = if self.body.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else {
            serde_json::from_slice(&self.body)
                .ok()
                .filter(Value::is_object)
                .ok_or_else(|| KubeError::bad_request("the body is not a DeleteOptions object"))?
        };
        let s = |p: &str| body.pointer(p).and_then(Value::as_str).map(str::to_owned);
        let pre = Preconditions {
            uid: s("/preconditions/uid"),
            resource_version: s("/preconditions/resourceVersion"),
        };
        let policy =
            s("/propagationPolicy").or_else(|| self.q("propagationPolicy").map(str::to_owned));
        let orphan = body.get("orphanDependents") == Some(&Value::Bool(true));
        let propagation = match policy.as_deref() {
            None if orphan => Propagation::Orphan,
            None | Some("Background") => Propagation::Background,
            Some("Foreground") => Propagation::Foreground,
            Some("Orphan") => Propagation::Orphan,
            Some(other) => {
                return Err(KubeError::new(
                    422,
                    "Invalid",
                    format!(
                        "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: {}: supported values: \"Foreground\", \"Background\", \"Orphan\"",
                        super::validate::quote(other)
                    ),
                ));
            }
        };
        Ok((pre, propagation))
    }

    fn delete(
        &self,
        resource: Resource,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Response, KubeError> {
        self.gate(Verb::Delete, resource)?;
        let (pre, propagation) = self.delete_options()?;
        let now = self.state.clock.now();
        if self.dry_run() {
            let object = self.state.kube.get(&self.cluster, resource, ns, name)?;
            return Ok(respond(200, &object));
        }
        match self.state.kube.delete_with(
            &self.cluster,
            resource,
            ns,
            name,
            &pre,
            propagation,
            now,
        )? {
            super::Deleted::Object(o) | super::Deleted::Status(o) => Ok(respond(200, &o)),
        }
    }

    fn delete_collection(
        &self,
        resource: Resource,
        ns: Option<&str>,
    ) -> Result<Response, KubeError> {
        if resource == Resource::Namespace {
            return Err(KubeError::method_not_allowed("DELETE"));
        }
        self.gate(Verb::DeleteCollection, resource)?;
        let (_, propagation) = self.delete_options()?;
        let mut query = self.list_query(resource, ns)?;
        query.limit = 0;
        query.continue_from = None;
        let page = self.state.kube.page(&self.cluster, resource, &query)?;
        let now = self.state.clock.now();
        let mut gone = Vec::new();
        for o in &page.items {
            let s = |p: &str| o.pointer(p).and_then(Value::as_str).map(str::to_owned);
            let (ons, name) = (s("/metadata/namespace"), s("/metadata/name").unwrap_or_default());
            let done = self.state.kube.delete_with(
                &self.cluster,
                resource,
                ons.as_deref(),
                &name,
                &Preconditions::default(),
                propagation,
                now,
            );
            if done.is_ok() {
                gone.push(o.clone());
            }
        }
        let rv = self.state.kube.resource_version();
        Ok(respond(
            200,
            &list_body(
                resource,
                Page { items: gone, resource_version: rv, next: None, remaining: 0 },
            ),
        ))
    }

    /// A watch: the events after `resourceVersion` (or the current objects as ADDED when
    /// none is given), then every change as it happens, bookmarks when asked for, until
    /// `timeoutSeconds` or the client goes; a version older than the history kept is an
    /// ERROR event with a 410 Expired Status, as the apiserver sends it.
    fn watch(&self, resource: Resource, ns: Option<&str>) -> Result<Response, KubeError> {
        self.gate(Verb::Watch, resource)?;
        let query = self.list_query(resource, ns)?;
        let table = table::wants_table(self.header(header::ACCEPT));
        let include = Include::parse(self.q("includeObject"));
        let bookmarks = self.flag("allowWatchBookmarks");
        let initial_events = self.flag("sendInitialEvents");
        let timeout = match self.q("timeoutSeconds") {
            Some(t) => Duration::from_secs(
                t.parse()
                    .map_err(|_| KubeError::bad_request(format!("invalid timeoutSeconds {t:?}")))?,
            ),
            None => Duration::from_secs(1800),
        };
        let start = self.q("resourceVersion").filter(|rv| *rv != "0");
        let mut first: Vec<Value> = Vec::new();
        let from = match start {
            Some(rv) if !initial_events => rv
                .parse::<u64>()
                .map_err(|_| KubeError::bad_request(format!("invalid resource version: {rv}")))?,
            _ => {
                let page = self.state.kube.page(
                    &self.cluster,
                    resource,
                    &ListQuery { limit: 0, continue_from: None, ..query.clone() },
                )?;
                first = page.items.into_iter().map(|o| event_line("ADDED", o)).collect();
                if initial_events {
                    first.push(bookmark(resource, page.resource_version, true));
                }
                page.resource_version
            }
        };
        let ctx = WatchCtx {
            state: self.state.clone(),
            cluster: self.cluster.clone(),
            resource,
            query,
            table,
            include,
        };
        let pending = first.into_iter().map(|e| ctx.present(e)).collect();
        let changes = self.state.kube.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        let watch = Watching { ctx, pending, bookmarks, deadline, from, changes, ended: false };
        Ok(stream_response(futures::stream::unfold(watch, Watching::next)))
    }
}

/// A running watch: what is left to send and where it stands.
struct Watching {
    ctx: WatchCtx,
    pending: std::collections::VecDeque<Value>,
    bookmarks: bool,
    deadline: tokio::time::Instant,
    /// Every change of the cluster up to this resourceVersion has been considered.
    from: u64,
    changes: tokio::sync::watch::Receiver<u64>,
    ended: bool,
}

/// How often a quiet watch lets the controllers catch up with the clock (and sends a
/// bookmark, when asked for).
const WATCH_TICK: Duration = Duration::from_secs(1);

impl Watching {
    async fn next(mut self) -> Option<(Result<Bytes, std::io::Error>, Self)> {
        loop {
            if let Some(line) = self.pending.pop_front() {
                return Some((Ok(Bytes::from(format!("{line}\n"))), self));
            }
            if self.ended {
                return None;
            }
            match self.ctx.state.kube.changes_after(&self.ctx.cluster, self.from) {
                Err(e) => {
                    // A version older than the history kept: the apiserver's ERROR event.
                    self.pending.push_back(json!({"type": "ERROR", "object": e.to_status()}));
                    self.ended = true;
                    continue;
                }
                Ok((list, upto)) => {
                    for c in list {
                        if let Some(e) = self.ctx.event(&c) {
                            self.pending.push_back(e);
                        }
                    }
                    self.from = self.from.max(upto);
                    if !self.pending.is_empty() {
                        continue;
                    }
                }
            }
            // Wait for a change, a tick (controllers catch up with the clock; a bookmark
            // goes out), or the end.
            tokio::select! {
                changed = self.changes.changed() => {
                    if changed.is_err() {
                        self.ended = true;
                    }
                }
                _ = tokio::time::sleep(WATCH_TICK) => {
                    KubeStore::refresh(&self.ctx.state, &self.ctx.cluster);
                    if self.bookmarks {
                        let b = bookmark(self.ctx.resource, self.from, false);
                        self.pending.push_back(b);
                    }
                }
                _ = tokio::time::sleep_until(self.deadline) => self.ended = true,
            }
        }
    }
}

fn stream_response<S>(stream: S) -> Response
where
    S: futures::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
{
    let mut r = Response::new(Body::from_stream(stream));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

fn event_line(kind: &str, object: Value) -> Value {
    json!({"type": kind, "object": object})
}

/// A BOOKMARK event: an empty object of the kind with only the resourceVersion (and the
/// end-of-initial-events annotation), written as Go writes that object — zero fields and
/// all (`"spec":{"containers":null}`, `"creationTimestamp":null`).
fn bookmark(resource: Resource, rv: u64, initial_end: bool) -> Value {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let mut object = json!({"kind": resource.kind(), "apiVersion": resource.api_version(), "metadata": metadata});
    kube_wire::encode(resource.wire(), &mut object);
    json!({"type": "BOOKMARK", "object": object})
}

/// What a running watch needs to filter and shape events.
struct WatchCtx {
    state: Arc<SimState>,
    cluster: String,
    resource: Resource,
    query: ListQuery,
    table: Option<&'static str>,
    include: Include,
}

impl WatchCtx {
    fn selects(&self, o: &Value) -> bool {
        let ns_ok =
            self.query.namespace.as_deref().filter(|_| self.resource.namespaced()).is_none_or(
                |ns| o.pointer("/metadata/namespace").and_then(Value::as_str) == Some(ns),
            );
        ns_ok
            && self.query.labels.matches(&super::store::labels_of(o))
            && self.query.fields.matches(o)
    }

    /// The event a change makes for this watch: an object entering the selection is
    /// ADDED, one leaving it DELETED.
    fn event(&self, c: &super::Change) -> Option<Value> {
        if c.resource != self.resource {
            return None;
        }
        let now = self.selects(&c.object);
        let before = c.previous.as_ref().is_none_or(|p| self.selects(p));
        let kind = match (c.kind, now, before) {
            (EventType::Added, true, _) => "ADDED",
            (EventType::Deleted, true, _) => "DELETED",
            (EventType::Modified, true, true) => "MODIFIED",
            (EventType::Modified, true, false) => "ADDED",
            (EventType::Modified, false, true) => "DELETED",
            _ => return None,
        };
        Some(self.present(event_line(kind, (*c.object).clone())))
    }

    /// An event as the client asked for it (its object a Table when it asked for one).
    fn present(&self, mut event: Value) -> Value {
        if let Some(v) = self.table
            && event["type"] != "BOOKMARK"
            && event["type"] != "ERROR"
        {
            let object = event["object"].take();
            let rv = object["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|r| r.parse().ok())
                .unwrap_or(0);
            event["object"] = table::table(
                self.resource,
                &[object],
                self.state.clock.now(),
                self.include,
                v,
                rv,
                None,
            );
        }
        event
    }
}

/// A list: its items as the store renders them (each already as Go writes it), its
/// `ListMeta` written by the generated field rules.
fn list_body(resource: Resource, page: Page) -> Value {
    let mut metadata = json!({"resourceVersion": page.resource_version.to_string()});
    if let Some(c) = page.next {
        metadata["continue"] = json!(c);
        metadata["remainingItemCount"] = json!(page.remaining);
    }
    if let Some(t) = kube_wire::ty("meta/v1.ListMeta") {
        kube_wire::encode(t, &mut metadata);
    }
    json!({
        "apiVersion": resource.api_version(),
        "kind": format!("{}List", resource.kind()),
        "metadata": metadata,
        "items": page.items,
    })
}

fn run(f: impl FnOnce() -> Result<Response, KubeError>) -> Response {
    f().unwrap_or_else(|e| error(&e))
}

macro_rules! handler {
    ($name:ident, |$call:ident| $body:expr) => {
        async fn $name(
            State(ctx): State<Ctx>,
            params: Result<Path<Params>, PathRejection>,
            method: Method,
            headers: HeaderMap,
            query: QueryResult,
            body: Result<Bytes, BytesRejection>,
        ) -> Response {
            // The extractors' own rejections are plain text; every answer must be a
            // Status with `reason` (research/kube-wire.md), so they are mapped here.
            let Ok(Path(params)) = params else {
                return error(&not_found_route("the path does not decode"));
            };
            let body = match body {
                Ok(b) => b,
                Err(e) => {
                    let code = e.status().as_u16();
                    let reason = if code == 413 { "RequestEntityTooLarge" } else { "BadRequest" };
                    return error(&KubeError::new(code, reason, e.body_text()));
                }
            };
            let cluster = ctx
                .cluster
                .clone()
                .or_else(|| params.get("cluster_id").cloned())
                .unwrap_or_default();
            let $call = Call { state: ctx.state, cluster, params, method, headers, query, body };
            run(|| $body)
        }
    };
}

handler!(version, |c| {
    if c.method != Method::GET {
        return Err(KubeError::method_not_allowed(c.method.as_str()));
    }
    let view = c.gate_info(true)?;
    Ok(respond(200, &discovery::version(&view.version)))
});

async fn health() -> Response {
    (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "ok").into_response()
}

/// Aggregated discovery when the client asks for it, else the legacy document.
fn discovery_answer(c: &Call, core: bool, legacy: Value) -> Result<Response, KubeError> {
    if c.method != Method::GET {
        return Err(KubeError::method_not_allowed(c.method.as_str()));
    }
    c.gate_info(false)?;
    match discovery::wants_aggregated(c.header(header::ACCEPT)) {
        Some(v) => Ok(respond_as(
            200,
            &discovery::aggregated_content_type(v),
            &discovery::aggregated(core, v),
        )),
        None => Ok(respond(200, &legacy)),
    }
}

handler!(api, |c| discovery_answer(&c, true, discovery::core_versions()));
handler!(apis, |c| discovery_answer(&c, false, discovery::group_list()));

handler!(api_version, |c| {
    c.gate_info(false)?;
    let v = c.param("version").unwrap_or_default();
    discovery::resource_list("", v).map(|l| respond(200, &l)).ok_or_else(|| not_found_route(v))
});

handler!(apis_group, |c| {
    c.gate_info(false)?;
    let g = c.param("group").unwrap_or_default();
    discovery::group(g).map(|l| respond(200, &l)).ok_or_else(|| not_found_route(g))
});

handler!(apis_group_version, |c| {
    c.gate_info(false)?;
    let (g, v) = (c.param("group").unwrap_or_default(), c.param("version").unwrap_or_default());
    discovery::resource_list(g, v).map(|l| respond(200, &l)).ok_or_else(|| not_found_route(g))
});

handler!(openapi_root, |c| {
    let view = c.gate_info(false)?;
    Ok(respond(200, &openapi::root(&view.version)))
});

fn openapi_doc(c: &Call, group: &str) -> Result<Response, KubeError> {
    let view = c.gate_info(false)?;
    let version = c.param("version").unwrap_or_default();
    let doc =
        openapi::document(group, version, &view.version).ok_or_else(|| not_found_route(version))?;
    let mut r = Response::new(Body::from(doc.bytes.clone()));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if c.q("hash").is_some() {
        r.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("public, immutable"));
    }
    Ok(r)
}

handler!(openapi_core, |c| openapi_doc(&c, ""));
handler!(openapi_group, |c| {
    let g = c.param("group").unwrap_or_default().to_owned();
    openapi_doc(&c, &g)
});

handler!(core_top, |c| c.target("").and_then(|t| c.serve(t)));
handler!(core_top_item, |c| c.target("").and_then(|t| c.serve(t)));
handler!(core_ns, |c| c.target("").and_then(|t| c.serve(t)));
handler!(core_ns_item, |c| c.target("").and_then(|t| c.serve(t)));
handler!(group_top, |c| {
    let g = c.param("group").unwrap_or_default().to_owned();
    c.target(&g).and_then(|t| c.serve(t))
});
// TokenReview is create-only and stores nothing: answered by `tokens`.
handler!(token_review, |c| {
    if c.method != Method::POST {
        return Err(KubeError::method_not_allowed(c.method.as_str()));
    }
    KubeStore::gate_op(&c.state, &c.cluster, c.bearer(), super::tokens::REVIEW_OP, None)?;
    let body = c.body_value(true)?;
    Ok(respond(201, &super::tokens::create_review(&c.state, &c.cluster, &body)?))
});
handler!(group_top_item, |c| {
    let g = c.param("group").unwrap_or_default().to_owned();
    c.target(&g).and_then(|t| c.serve(t))
});
handler!(group_ns, |c| {
    let g = c.param("group").unwrap_or_default().to_owned();
    c.target(&g).and_then(|t| c.serve(t))
});
handler!(group_ns_item, |c| {
    let g = c.param("group").unwrap_or_default().to_owned();
    c.target(&g).and_then(|t| c.serve(t))
});
