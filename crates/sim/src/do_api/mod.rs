//! The DigitalOcean v2 HTTP face (research/digitalocean.md §4.4, §5.2): DOKS clusters,
//! node pools, nodes (delete and the deprecated recycle), options, upgrades,
//! kubeconfig/credentials, associated resources, cluster user and status messages; load
//! balancers with their droplets, forwarding rules and CDN cache; and `/v2/account` —
//! over the shared model.
//!
//! Invariant: every response — success, error, throttled or unknown route — passes the
//! one `gate` middleware, so each carries `x-request-id` and the `ratelimit-*` headers,
//! each error has the body `{id, message, request_id}`, and each request is counted
//! under `"<METHOD> <route template>"` before anything else happens.

pub mod render;

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Extension, MatchedPath, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::SimState;
use crate::interleave::Moment;
use crate::model::{
    ApiError, ClusterCreate, ClusterUpdate, LoadBalancerSpec, NodePoolSpec, Selection, catalog,
    routes,
};

/// The authenticated caller (its account token), set by the gate for handlers.
#[derive(Debug, Clone)]
struct Caller(String);

type Shared = Arc<SimState>;
type Res = Result<Response, ApiError>;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        // The gate renders the body, because only it knows the request id.
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut r = status.into_response();
        r.extensions_mut().insert(self);
        r
    }
}

fn error_body(e: &ApiError, request_id: &str) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = (status, axum::Json(e.body(request_id))).into_response();
    if let Some(s) = e.retry_after
        && let Ok(v) = HeaderValue::from_str(&s.to_string())
    {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

/// The bearer token of a request (`Authorization: Bearer …`), shared by every face.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<String> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim().to_owned())
}

async fn gate(State(state): State<Shared>, mut req: Request, next: Next) -> Response {
    let request_id = state.model().ids.uuid();
    let template = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned())
        .unwrap_or_else(|| routes::UNMATCHED.to_owned());
    let key = routes::key(req.method().as_str(), &template);
    let token = bearer(req.headers());
    let now = state.clock.now();
    let admission = state.model().admit(token.as_deref(), &key, now);
    let mut resp = match (admission.result, token) {
        (Ok(()), Some(token)) => {
            req.extensions_mut().insert(Caller(token));
            let resp = next.run(req).await;
            if resp.status().is_success() && state.model().take_lost_answer(&key) {
                // The change is made; the caller hears nothing until long after any
                // request timeout (or dies waiting).
                tokio::time::sleep(crate::model::LOST_ANSWER_HOLD).await;
            }
            resp
        }
        (Ok(()), None) => error_body(&ApiError::unauthorized(), &request_id),
        (Err(e), _) => error_body(&e, &request_id),
    };
    if let Some(e) = resp.extensions_mut().remove::<ApiError>() {
        resp = error_body(&e, &request_id);
    }
    let h = resp.headers_mut();
    let mut set = |name: &'static str, v: String| {
        if let Ok(v) = HeaderValue::from_str(&v) {
            h.insert(name, v);
        }
    };
    set("x-request-id", request_id);
    set("ratelimit-limit", admission.rate.limit.to_string());
    set("ratelimit-remaining", admission.rate.remaining.to_string());
    set("ratelimit-reset", admission.rate.reset.to_string());
    resp
}

async fn unknown_route() -> ApiError {
    ApiError::not_found()
}

/// The `/v2` routes.
pub fn router(state: Arc<SimState>) -> Router {
    Router::new()
        .route(routes::CLUSTERS, get(list_clusters).post(create_cluster))
        .route(routes::CLUSTER, get(get_cluster).put(update_cluster).delete(delete_cluster))
        .route(routes::ASSOCIATED, get(associated))
        .route(routes::ASSOCIATED_SELECTIVE, delete(delete_selective))
        .route(routes::ASSOCIATED_DANGEROUS, delete(delete_dangerous))
        .route(routes::KUBECONFIG, get(kubeconfig))
        .route(routes::CREDENTIALS, get(credentials))
        .route(routes::UPGRADES, get(upgrades))
        .route(routes::UPGRADE, axum::routing::post(upgrade))
        .route(routes::NODE_POOLS, get(list_pools).post(create_pool))
        .route(routes::NODE_POOL, get(get_pool).put(update_pool).delete(delete_pool))
        .route(routes::NODE, delete(delete_node))
        .route(routes::NODE_POOL_RECYCLE, axum::routing::post(recycle_nodes))
        .route(routes::OPTIONS, get(options))
        .route(routes::ACCOUNT, get(account))
        .route(routes::LOAD_BALANCER_CACHE, delete(purge_cache))
        .route(routes::CLUSTER_USER, get(cluster_user))
        .route(routes::STATUS_MESSAGES, get(status_messages))
        .route(routes::LOAD_BALANCERS, get(list_lbs).post(create_lb))
        .route(routes::LOAD_BALANCER, get(get_lb).put(update_lb).delete(delete_lb))
        .route(
            routes::LOAD_BALANCER_DROPLETS,
            axum::routing::post(add_droplets).delete(remove_droplets),
        )
        .route(routes::LOAD_BALANCER_RULES, axum::routing::post(add_rules).delete(remove_rules))
        .fallback(unknown_route)
        .method_not_allowed_fallback(unknown_route)
        .layer(middleware::from_fn_with_state(state.clone(), gate))
        .with_state(state)
}

// ----- helpers ------------------------------------------------------------------------------

fn body<T: DeserializeOwned>(bytes: &Bytes) -> Result<T, ApiError> {
    let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) { b"{}" } else { bytes };
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("error parsing request body: {e}")))
}

fn json(status: StatusCode, v: Value) -> Response {
    (status, axum::Json(v)).into_response()
}

fn flag(q: &HashMap<String, String>, name: &str) -> bool {
    q.get(name).is_some_and(|v| matches!(v.as_str(), "1" | "true" | "True" | "TRUE"))
}

fn expiry(q: &HashMap<String, String>) -> Option<u64> {
    q.get("expiry_seconds").and_then(|v| v.parse().ok())
}

/// Runs what another actor does once page `page` of list `template` is served.
fn after_page(s: &SimState, template: &str, page: usize) {
    let moment = Moment::AfterListPage { route: routes::key("GET", template), page };
    s.interleave.run(s, &moment);
}

/// Slices `items` by `page`/`per_page` and builds `links` (full URLs, only the ones
/// that make sense) and `meta`; the page number served comes last.
fn paginate<T>(
    items: Vec<T>,
    q: &HashMap<String, String>,
    headers: &HeaderMap,
    uri: &Uri,
) -> (Vec<T>, Value, Value, usize) {
    let (window, links, meta, page) = page_window(items.len(), q, headers, uri);
    let slice = items.into_iter().skip(window.start).take(window.len()).collect();
    (slice, links, meta, page)
}

/// Which of `total` items `page`/`per_page` asks for, with `links` (full URLs, only the
/// ones that make sense) and `meta`; the page number served comes last. For a list too
/// long to copy whole for every page ([`paginate`] takes the copy).
fn page_window(
    total: usize,
    q: &HashMap<String, String>,
    headers: &HeaderMap,
    uri: &Uri,
) -> (std::ops::Range<usize>, Value, Value, usize) {
    let per_page = q
        .get("per_page")
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|v| *v >= 1)
        .unwrap_or(20)
        .min(200);
    let page = q.get("page").and_then(|v| v.parse::<usize>().ok()).filter(|v| *v >= 1).unwrap_or(1);
    let last = total.div_ceil(per_page).max(1);
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("localhost");
    let url = |p: usize| format!("http://{host}{}?page={p}&per_page={per_page}", uri.path());
    let mut pages = serde_json::Map::new();
    if page > 1 {
        pages.insert("first".into(), json!(url(1)));
        pages.insert("prev".into(), json!(url((page - 1).min(last))));
    }
    if page < last {
        pages.insert("next".into(), json!(url(page + 1)));
        pages.insert("last".into(), json!(url(last)));
    }
    let links = if pages.is_empty() { json!({}) } else { json!({"pages": pages}) };
    let from = (page - 1).saturating_mul(per_page).min(total);
    (from..from.saturating_add(per_page).min(total), links, json!({"total": total}), page)
}

// ----- clusters -----------------------------------------------------------------------------

async fn list_clusters(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    uri: Uri,
) -> Res {
    let now = s.clock.now();
    let mut m = s.model();
    m.advance(now);
    let all = m.listed_clusters(&t, now)?;
    let (page, links, meta, n) = paginate(all, &q, &headers, &uri);
    let items: Vec<Value> = page.into_iter().map(|c| render::cluster(c, &m)).collect();
    drop(m);
    after_page(&s, routes::CLUSTERS, n);
    Ok(json(StatusCode::OK, json!({"kubernetes_clusters": items, "links": links, "meta": meta})))
}

async fn create_cluster(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    b: Bytes,
) -> Res {
    let req: ClusterCreate = body(&b)?;
    let now = s.clock.now();
    let mut m = s.model();
    let c = m.create_cluster(&t, req, now)?;
    Ok(json(StatusCode::CREATED, json!({"kubernetes_cluster": render::cluster(&c, &m)})))
}

async fn get_cluster(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path(id): Path<String>,
) -> Res {
    let now = s.clock.now();
    let mut m = s.model();
    let c = m.get_cluster(&t, &id, now)?;
    Ok(json(StatusCode::OK, json!({"kubernetes_cluster": render::cluster(&c, &m)})))
}

async fn update_cluster(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path(id): Path<String>,
    b: Bytes,
) -> Res {
    let req: ClusterUpdate = body(&b)?;
    let now = s.clock.now();
    let mut m = s.model();
    let c = m.update_cluster(&t, &id, req, now)?;
    Ok(json(StatusCode::ACCEPTED, json!({"kubernetes_cluster": render::cluster(&c, &m)})))
}

async fn delete_cluster(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path(id): Path<String>,
) -> Res {
    s.model().delete_cluster(&t, &id, s.clock.now())?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn associated(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path(id): Path<String>,
) -> Res {
    let a = s.model().associated_resources(&t, &id, s.clock.now())?;
    let named = |v: &[(String, String)]| -> Vec<Value> {
        v.iter().map(|(id, name)| json!({"id": id, "name": name})).collect()
    };
    Ok(json(
        StatusCode::OK,
        json!({
            "load_balancers": named(&a.load_balancers),
            "volumes": named(&a.volumes),
            "volume_snapshots": named(&a.volume_snapshots),
        }),
    ))
}

async fn delete_selective(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path(id): Path<String>,
    b: Bytes,
) -> Res {
    let sel: Selection = body(&b)?;
    s.model().delete_cluster_selective(&t, &id, &sel, s.clock.now())?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn delete_dangerous(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path(id): Path<String>,
) -> Res {
    s.model().delete_cluster_dangerous(&t, &id, s.clock.now())?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn kubeconfig(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Res {
    let yaml = s.model().kubeconfig(&t, &id, expiry(&q), s.clock.now())?;
    Ok(([(header::CONTENT_TYPE, "application/yaml")], Body::from(yaml)).into_response())
}

async fn credentials(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Res {
    let c = s.model().credentials(&t, &id, expiry(&q), s.clock.now())?;
    Ok(json(
        StatusCode::OK,
        json!({
            "server": c.server,
            "certificate_authority_data": c.certificate_authority_data,
            "client_certificate_data": null,
            "client_key_data": null,
            "token": c.token,
            "expires_at": c.expires_at.to_rfc3339(),
        }),
    ))
}

fn version_json(slug: &str) -> Value {
    let kv = catalog::VersionSlug::parse(slug).map(|v| v.kubernetes_version()).unwrap_or_default();
    json!({"slug": slug, "kubernetes_version": kv, "supported_features": catalog::SUPPORTED_FEATURES})
}

async fn upgrades(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path(id): Path<String>,
) -> Res {
    let v = s.model().upgrades(&t, &id, s.clock.now())?;
    let list = if v.is_empty() {
        Value::Null
    } else {
        Value::Array(v.iter().map(|s| version_json(s)).collect())
    };
    Ok(json(StatusCode::OK, json!({"available_upgrade_versions": list})))
}

#[derive(serde::Deserialize)]
struct UpgradeBody {
    version: Option<String>,
}

async fn upgrade(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path(id): Path<String>,
    b: Bytes,
) -> Res {
    let req: UpgradeBody = body(&b)?;
    let version = req
        .version
        .filter(|v| !v.is_empty())
        .ok_or_else(|| ApiError::unprocessable("version is required"))?;
    s.model().upgrade_cluster(&t, &id, &version, s.clock.now())?;
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn options(State(s): State<Shared>) -> Res {
    let _ = s;
    let regions: Vec<Value> =
        catalog::REGIONS.iter().map(|(slug, name)| json!({"name": name, "slug": slug})).collect();
    let sizes: Vec<Value> = catalog::SIZES.iter().map(|s| json!({"name": s, "slug": s})).collect();
    let versions: Vec<Value> =
        catalog::offered_versions().iter().map(|v| version_json(v)).collect();
    Ok(json(
        StatusCode::OK,
        json!({"options": {"regions": regions, "versions": versions, "sizes": sizes}}),
    ))
}

async fn account(State(s): State<Shared>, Extension(Caller(t)): Extension<Caller>) -> Res {
    let _ = s;
    // Stable per token: a hash of it, shaped like a UUID.
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    t.hash(&mut h);
    let a = h.finish();
    "account".hash(&mut h);
    let b = h.finish();
    let x = format!("{a:016x}{b:016x}");
    let uuid = format!("{}-{}-4{}-8{}-{}", &x[0..8], &x[8..12], &x[13..16], &x[17..20], &x[20..32]);
    Ok(json(
        StatusCode::OK,
        json!({"account": {
            "droplet_limit": 25,
            "floating_ip_limit": 3,
            "email": "sim@example.com",
            "uuid": uuid,
            "email_verified": true,
            "status": "active",
            "status_message": "",
        }}),
    ))
}

// ----- node pools ---------------------------------------------------------------------------

async fn list_pools(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path(cid): Path<String>,
) -> Res {
    let pools = s.model().list_node_pools(&t, &cid, s.clock.now())?;
    let items: Vec<Value> = pools.iter().map(|p| render::node_pool(p, &cid)).collect();
    Ok(json(StatusCode::OK, json!({"node_pools": items})))
}

async fn create_pool(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path(cid): Path<String>,
    b: Bytes,
) -> Res {
    let spec: NodePoolSpec = body(&b)?;
    let p = s.model().create_node_pool(&t, &cid, spec, s.clock.now())?;
    Ok(json(StatusCode::CREATED, json!({"node_pool": render::node_pool(&p, &cid)})))
}

async fn get_pool(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path((cid, pid)): Path<(String, String)>,
) -> Res {
    let p = s.model().get_node_pool(&t, &cid, &pid, s.clock.now())?;
    Ok(json(StatusCode::OK, json!({"node_pool": render::node_pool(&p, &cid)})))
}

async fn update_pool(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path((cid, pid)): Path<(String, String)>,
    b: Bytes,
) -> Res {
    let spec: NodePoolSpec = body(&b)?;
    let p = s.model().update_node_pool(&t, &cid, &pid, spec, s.clock.now())?;
    Ok(json(StatusCode::ACCEPTED, json!({"node_pool": render::node_pool(&p, &cid)})))
}

async fn delete_pool(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path((cid, pid)): Path<(String, String)>,
) -> Res {
    s.model().delete_node_pool(&t, &cid, &pid, s.clock.now())?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn delete_node(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path((cid, pid, nid)): Path<(String, String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> Res {
    let (skip, replace) = (flag(&q, "skip_drain"), flag(&q, "replace"));
    s.model().delete_node(&t, &cid, &pid, &nid, skip, replace, s.clock.now())?;
    Ok(StatusCode::ACCEPTED.into_response())
}

#[derive(serde::Deserialize)]
struct RecycleBody {
    #[serde(default)]
    nodes: Vec<String>,
}

async fn recycle_nodes(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path((cid, pid)): Path<(String, String)>,
    b: Bytes,
) -> Res {
    let req: RecycleBody = body(&b)?;
    s.model().recycle_nodes(&t, &cid, &pid, &req.nodes, s.clock.now())?;
    Ok(StatusCode::ACCEPTED.into_response())
}

// ----- load balancers -----------------------------------------------------------------------

async fn list_lbs(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    uri: Uri,
) -> Res {
    // A page copies only its own load balancers (an account may hold thousands, and a
    // listing asks for every page of them).
    let mut window = None;
    let page = s.model().list_load_balancers_page(&t, s.clock.now(), |total| {
        let w = page_window(total, &q, &headers, &uri);
        let range = w.0.clone();
        window = Some(w);
        range
    })?;
    let (_, links, meta, n) = window.expect("the window is asked for before the page");
    let items: Vec<Value> = page.iter().map(render::load_balancer).collect();
    after_page(&s, routes::LOAD_BALANCERS, n);
    Ok(json(StatusCode::OK, json!({"load_balancers": items, "links": links, "meta": meta})))
}

async fn create_lb(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    b: Bytes,
) -> Res {
    let spec: LoadBalancerSpec = body(&b)?;
    let l = s.model().create_load_balancer(&t, spec, s.clock.now())?;
    Ok(json(StatusCode::ACCEPTED, json!({"load_balancer": render::load_balancer(&l)})))
}

async fn get_lb(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path(id): Path<String>,
) -> Res {
    let l = s.model().get_load_balancer(&t, &id, s.clock.now())?;
    Ok(json(StatusCode::OK, json!({"load_balancer": render::load_balancer(&l)})))
}

async fn update_lb(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path(id): Path<String>,
    b: Bytes,
) -> Res {
    let spec: LoadBalancerSpec = body(&b)?;
    let l = s.model().update_load_balancer(&t, &id, spec, s.clock.now())?;
    Ok(json(StatusCode::OK, json!({"load_balancer": render::load_balancer(&l)})))
}

async fn delete_lb(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path(id): Path<String>,
) -> Res {
    s.model().delete_load_balancer(&t, &id, s.clock.now())?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(serde::Deserialize)]
struct DropletsBody {
    #[serde(default)]
    droplet_ids: Vec<u64>,
}

#[derive(serde::Deserialize)]
struct RulesBody {
    #[serde(default)]
    forwarding_rules: Vec<crate::model::ForwardingRule>,
}

async fn droplets(s: Shared, t: String, id: String, b: Bytes, add: bool) -> Res {
    let req: DropletsBody = body(&b)?;
    s.model().load_balancer_droplets(&t, &id, &req.droplet_ids, add, s.clock.now())?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn add_droplets(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path(id): Path<String>,
    b: Bytes,
) -> Res {
    droplets(s, t, id, b, true).await
}

async fn remove_droplets(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path(id): Path<String>,
    b: Bytes,
) -> Res {
    droplets(s, t, id, b, false).await
}

async fn rules(s: Shared, t: String, id: String, b: Bytes, add: bool) -> Res {
    let req: RulesBody = body(&b)?;
    s.model().load_balancer_rules(&t, &id, &req.forwarding_rules, add, s.clock.now())?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn add_rules(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path(id): Path<String>,
    b: Bytes,
) -> Res {
    rules(s, t, id, b, true).await
}

async fn remove_rules(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path(id): Path<String>,
    b: Bytes,
) -> Res {
    rules(s, t, id, b, false).await
}

async fn purge_cache(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path(id): Path<String>,
) -> Res {
    s.model().purge_load_balancer_cache(&t, &id, s.clock.now())?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn cluster_user(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path(id): Path<String>,
) -> Res {
    s.model().get_cluster(&t, &id, s.clock.now())?;
    Ok(json(
        StatusCode::OK,
        json!({"kubernetes_cluster_user": {"username": "sim@example.com", "groups": ["k8saas:authenticated"]}}),
    ))
}

async fn status_messages(
    State(s): State<Shared>,
    Extension(Caller(t)): Extension<Caller>,
    Path(id): Path<String>,
) -> Res {
    s.model().get_cluster(&t, &id, s.clock.now())?;
    Ok(json(StatusCode::OK, json!({"messages": []})))
}
