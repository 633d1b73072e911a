//! The Google Kubernetes Engine v1 REST face (research/gke.md §2–§5) and Google's OAuth 2.0
//! token endpoint (§1), over the shared model: clusters, node pools, operations and
//! `serverConfig` under `/v1/projects/{project}/locations/{location}/…`, and `POST /token`.
//!
//! Invariants: every request passes one gate that counts it under `"<METHOD> <route>"`
//! ([`routes`]), authenticates its bearer (an access token `/token` minted), applies the
//! project's request limit and injected faults, and writes every error in Google's
//! envelope (`{"error": {code, message, status, errors: [{message, domain, reason}],
//! details}}`); answers are written by [`wire`] as Google's REST transport writes them.

pub mod token;
pub mod wire;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, post};
use serde_json::{Value, json};

use crate::SimState;
use crate::model::gke::{ClusterName, GkeError};
use crate::model::routes::key;
use wire::Enc;

/// Route templates of the GKE face (the discovery document's `flatPath`s), the keys of its
/// request counters and injected faults (with [`crate::model::routes::key`]).
pub mod routes {
    /// Clusters of a location (list, create).
    pub const CLUSTERS: &str = "/v1/projects/{projectsId}/locations/{locationsId}/clusters";
    /// One cluster (get, update, delete).
    pub const CLUSTER: &str =
        "/v1/projects/{projectsId}/locations/{locationsId}/clusters/{clustersId}";
    /// Upgrade the control plane.
    pub const UPDATE_MASTER: &str =
        "/v1/projects/{projectsId}/locations/{locationsId}/clusters/{clustersId}:updateMaster";
    /// Set resource labels.
    pub const SET_RESOURCE_LABELS: &str =
        "/v1/projects/{projectsId}/locations/{locationsId}/clusters/{clustersId}:setResourceLabels";
    /// Node pools of a cluster (list, create).
    pub const NODE_POOLS: &str =
        "/v1/projects/{projectsId}/locations/{locationsId}/clusters/{clustersId}/nodePools";
    /// One node pool (get, update, delete).
    pub const NODE_POOL: &str = "/v1/projects/{projectsId}/locations/{locationsId}/clusters/{clustersId}/nodePools/{nodePoolsId}";
    /// Resize a node pool.
    pub const SET_SIZE: &str = "/v1/projects/{projectsId}/locations/{locationsId}/clusters/{clustersId}/nodePools/{nodePoolsId}:setSize";
    /// A node pool's autoscaling.
    pub const SET_AUTOSCALING: &str = "/v1/projects/{projectsId}/locations/{locationsId}/clusters/{clustersId}/nodePools/{nodePoolsId}:setAutoscaling";
    /// Operations of a location.
    pub const OPERATIONS: &str = "/v1/projects/{projectsId}/locations/{locationsId}/operations";
    /// One operation.
    pub const OPERATION: &str =
        "/v1/projects/{projectsId}/locations/{locationsId}/operations/{operationsId}";
    /// Cancel an operation.
    pub const CANCEL: &str =
        "/v1/projects/{projectsId}/locations/{locationsId}/operations/{operationsId}:cancel";
    /// The server config of a location.
    pub const SERVER_CONFIG: &str =
        "/v1/projects/{projectsId}/locations/{locationsId}/serverConfig";
    /// The OAuth 2.0 token endpoint.
    pub const TOKEN: &str = "/token";
    /// A path under `/v1` the face does not serve.
    pub const UNMATCHED: &str = "/v1/<unmatched>";

    /// Every `(method, template)` the face serves: what the discovery-schema test covers.
    pub const SERVED: &[(&str, &str)] = &[
        ("GET", CLUSTERS),
        ("POST", CLUSTERS),
        ("GET", CLUSTER),
        ("PUT", CLUSTER),
        ("DELETE", CLUSTER),
        ("POST", UPDATE_MASTER),
        ("POST", SET_RESOURCE_LABELS),
        ("GET", NODE_POOLS),
        ("POST", NODE_POOLS),
        ("GET", NODE_POOL),
        ("PUT", NODE_POOL),
        ("DELETE", NODE_POOL),
        ("POST", SET_SIZE),
        ("POST", SET_AUTOSCALING),
        ("GET", OPERATIONS),
        ("GET", OPERATION),
        ("POST", CANCEL),
        ("GET", SERVER_CONFIG),
    ];
}

type Shared = Arc<SimState>;

/// The GKE routes (`/v1/…`) and the token endpoint (`/token`).
pub fn router(state: Arc<SimState>) -> Router {
    Router::new()
        .route("/v1/{*rest}", any(serve))
        .route(routes::TOKEN, post(token::token))
        .with_state(state)
}

/// Google's error envelope.
pub fn error_response(e: &GkeError, request_id: &str) -> Response {
    let mut details = Vec::new();
    if let Some(reason) = e.info {
        details.push(json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": reason,
            "domain": "container.googleapis.com",
        }));
    }
    details.push(json!({
        "@type": "type.googleapis.com/google.rpc.RequestInfo",
        "requestId": request_id,
    }));
    let body = json!({"error": {
        "code": e.code,
        "message": e.message,
        "errors": [{"message": e.message, "domain": "global", "reason": e.reason}],
        "status": e.status,
        "details": details,
    }});
    let status = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = (status, axum::Json(body)).into_response();
    if e.code == 401 {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer realm=\"https://accounts.google.com/\""),
        );
    }
    r
}

/// A request's target: the route template and the names in its path.
#[derive(Debug, Default)]
struct Target {
    template: &'static str,
    project: String,
    location: String,
    cluster: String,
    pool: String,
    operation: String,
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) =
                u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Which route `path` is (under `/v1/`), by GKE's path templates.
fn route(method: &Method, path: &str) -> Option<Target> {
    let path = percent_decode(path);
    let rest = path.strip_prefix("/v1/")?;
    let seg: Vec<&str> = rest.split('/').collect();
    if seg.len() < 5 || seg[0] != "projects" || seg[2] != "locations" {
        return None;
    }
    let mut t =
        Target { project: seg[1].to_owned(), location: seg[3].to_owned(), ..Target::default() };
    let split = |s: &str| -> (String, Option<String>) {
        match s.split_once(':') {
            Some((a, b)) => (a.to_owned(), Some(b.to_owned())),
            None => (s.to_owned(), None),
        }
    };
    use routes::*;
    let m = method.as_str();
    t.template = match (&seg[4..], m) {
        (["clusters"], "GET" | "POST") => CLUSTERS,
        (["serverConfig"], "GET") => SERVER_CONFIG,
        (["operations"], "GET") => OPERATIONS,
        (["operations", op], _) => {
            let (name, verb) = split(op);
            t.operation = name;
            match (verb.as_deref(), m) {
                (None, "GET") => OPERATION,
                (Some("cancel"), "POST") => CANCEL,
                _ => return None,
            }
        }
        (["clusters", c], _) => {
            let (name, verb) = split(c);
            t.cluster = name;
            match (verb.as_deref(), m) {
                (None, "GET" | "PUT" | "DELETE") => CLUSTER,
                (Some("updateMaster"), "POST") => UPDATE_MASTER,
                (Some("setResourceLabels"), "POST") => SET_RESOURCE_LABELS,
                _ => return None,
            }
        }
        (["clusters", c, "nodePools"], "GET" | "POST") => {
            t.cluster = (*c).to_owned();
            NODE_POOLS
        }
        (["clusters", c, "nodePools", p], _) => {
            t.cluster = (*c).to_owned();
            let (name, verb) = split(p);
            t.pool = name;
            match (verb.as_deref(), m) {
                (None, "GET" | "PUT" | "DELETE") => NODE_POOL,
                (Some("setSize"), "POST") => SET_SIZE,
                (Some("setAutoscaling"), "POST") => SET_AUTOSCALING,
                _ => return None,
            }
        }
        _ => return None,
    };
    Some(t)
}

async fn serve(
    State(s): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
    body: Bytes,
) -> Response {
    let request_id = format!("0x{:016x}", crate::fnv1a(&s.model().ids.uuid()));
    let target = route(&method, uri.path());
    let template = target.as_ref().map_or(routes::UNMATCHED, |t| t.template);
    let route_key = key(method.as_str(), template);
    let enc =
        Enc { ints: query.iter().any(|(k, v)| k == "$alt" && v.contains("enum-encoding=int")) };
    let now = s.clock.now();
    let bearer = crate::do_api::bearer(&headers);
    let project = target.as_ref().map(|t| t.project.clone());
    let admitted = s.model().gke_admit(bearer.as_deref(), project.as_deref(), &route_key, now);
    let result = match (admitted, target) {
        (Err(e), _) => Err(e),
        (Ok(()), None) => Err(GkeError::not_found(uri.path().trim_start_matches("/v1/"))),
        (Ok(()), Some(t)) => handle(&s, &t, &route_key, &body, enc),
    };
    match result {
        Ok(v) => {
            if s.model().take_lost_answer(&route_key) {
                // The change is made; the caller hears nothing until its timeout.
                tokio::time::sleep(crate::model::LOST_ANSWER_HOLD).await;
            }
            (StatusCode::OK, axum::Json(v)).into_response()
        }
        Err(e) => error_response(&e, &request_id),
    }
}

fn handle(
    s: &SimState,
    t: &Target,
    route_key: &str,
    body: &Bytes,
    enc: Enc,
) -> Result<Value, GkeError> {
    use routes::*;
    let now = s.clock.now();
    let (p, l) = (t.project.as_str(), t.location.as_str());
    let c = &ClusterName { project: p, location: l, name: t.cluster.as_str() };
    let op = |o: crate::model::gke::Operation| wire::operation(&o, now, enc);
    let body = wire::body(body)?;
    let m = wire::top(&body);
    let mut model = s.model();
    Ok(match t.template {
        CLUSTERS if route_key.starts_with("GET") => {
            let all = model.gke_clusters(p, l, now)?;
            let list: Vec<Value> = all.iter().map(|c| wire::cluster(c, enc)).collect();
            json!({"clusters": list})
        }
        CLUSTERS => {
            let spec = wire::cluster_spec(&body)?;
            op(model.gke_create_cluster(p, l, spec, route_key, now)?)
        }
        CLUSTER => match route_key.split_once(' ').map(|(m, _)| m) {
            Some("GET") => wire::cluster(&model.gke_cluster(c, now)?, enc),
            Some("DELETE") => op(model.gke_delete_cluster(c, now)?),
            _ => op(model.gke_update_cluster(c, wire::cluster_change(&body)?, now)?),
        },
        UPDATE_MASTER => {
            let v = m.str("masterVersion")?.unwrap_or_default();
            if v.is_empty() {
                return Err(GkeError::invalid(
                    "Invalid value for field \"master_version\": a version is required.",
                ));
            }
            op(model.gke_update_master(c, &v, now)?)
        }
        SET_RESOURCE_LABELS => {
            let labels = m.map("resourceLabels")?.unwrap_or_default();
            let fp = m.str("labelFingerprint")?.unwrap_or_default();
            op(model.gke_set_labels(c, labels, &fp, now)?)
        }
        NODE_POOLS if route_key.starts_with("GET") => {
            let view = model.gke_pools(c, now)?;
            let list: Vec<Value> =
                view.gke.pools.iter().map(|np| wire::node_pool(&view, np, enc)).collect();
            json!({"nodePools": list})
        }
        NODE_POOLS => {
            let pool = m.msg("nodePool", "node_pool")?;
            if !pool.present() {
                return Err(GkeError::invalid(
                    "Invalid value for field \"node_pool\": a node pool is required.",
                ));
            }
            let spec = wire::pool_spec(
                body.get("nodePool").or_else(|| body.get("node_pool")).unwrap_or(&Value::Null),
            )?;
            op(model.gke_create_pool(c, spec, route_key, now)?)
        }
        NODE_POOL => match route_key.split_once(' ').map(|(m, _)| m) {
            Some("GET") => {
                let view = model.gke_pool(c, &t.pool, now)?;
                let np = view.gke.pools.iter().find(|np| np.name == t.pool).expect("checked");
                wire::node_pool(&view, np, enc)
            }
            Some("DELETE") => op(model.gke_delete_pool(c, &t.pool, now)?),
            _ => op(model.gke_update_pool(c, &t.pool, wire::pool_update(&body)?, now)?),
        },
        SET_SIZE => {
            let n = m.int("nodeCount")?.unwrap_or(0);
            op(model.gke_set_size(c, &t.pool, n, now)?)
        }
        SET_AUTOSCALING => {
            let a = wire::autoscaling(&m.msg("autoscaling", "autoscaling")?)?;
            op(model.gke_set_autoscaling(c, &t.pool, a, now)?)
        }
        OPERATIONS => {
            let list: Vec<Value> = model.gke_operations(p, l, now)?.into_iter().map(op).collect();
            json!({"operations": list})
        }
        OPERATION => op(model.gke_operation(p, l, &t.operation, now)?),
        CANCEL => {
            model.gke_cancel(p, l, &t.operation, now)?;
            json!({})
        }
        SERVER_CONFIG => {
            crate::model::gke::check_location(l)?;
            wire::server_config(enc)
        }
        _ => return Err(GkeError::not_found(route_key)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_to_gke_templates() {
        let t = route(
            &Method::POST,
            "/v1/projects/p/locations/us-central1/clusters/c/nodePools/np:setSize",
        )
        .unwrap();
        assert_eq!(
            (t.template, t.cluster.as_str(), t.pool.as_str()),
            (routes::SET_SIZE, "c", "np")
        );
        let t =
            route(&Method::POST, "/v1/projects/p/locations/us-central1/clusters/c%3AupdateMaster")
                .unwrap();
        assert_eq!(t.template, routes::UPDATE_MASTER);
        assert!(route(&Method::PATCH, "/v1/projects/p/locations/l/clusters/c").is_none());
        assert!(route(&Method::GET, "/v1/projects/p/locations/l/clusters/c:nothing").is_none());
    }
}
