//! The HTTP surface: the router built from the ports (no globals), the dispatch of
//! `POST /api/compute/<resource>/<method>` through the registry, and the cross-cutting
//! layer every request passes (request id, span, metrics, log line, a caught panic).
//!
//! Invariants: every answer, success or error, of every path carries an `x-request-id`,
//! and every error is the JSON error of SPEC §2 (404 for an unknown method, 405 for
//! another verb, 413 over 1 MiB, 429 with `Retry-After`); the order per request is
//! method → verb → authentication → rate limit → body → input checks → authorization →
//! handler, so nothing is read from the body of a caller that did not authenticate.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, FromRef, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method as Verb, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use bc_domain::ports::{Authorizer, Clock, ClusterApi, ProviderRegistry, SecretBox, Store};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::auth::authenticate;
use crate::authz::CedarAuthorizer;
use crate::body::{parse_object, read_limited};
// The services' and settings' paths of old, kept for callers that name them so.
pub use crate::ctx::{Ctx, Services, Settings};
use crate::error::{ApiError, Code};
use crate::ids::IdSource;
use crate::methods::agents::{CLUSTER_CALLS_AT_ONCE, NODE_LISTING_TTL};
use crate::methods::registry;
use crate::metrics::{self, MethodLabel, Metrics};
use crate::ratelimit::{Concurrency, RateLimiter, Recent};
use crate::registry::Registry;

/// The ports the API works on: every one a bc-domain trait, so a service embeds the API
/// on adapters of its choosing (pointed at the providers, or at the simulator in tests).
#[derive(Clone)]
pub struct Ports {
    /// The store.
    pub store: Arc<dyn Store>,
    /// The clock.
    pub clock: Arc<dyn Clock>,
    /// Provider implementations per account (their API URLs are server configuration).
    pub providers: Arc<dyn ProviderRegistry>,
    /// Reaching clusters' Kubernetes APIs (`agents.join` checks the node is listed).
    pub clusters: Arc<dyn ClusterApi>,
    /// Encryption of provider credentials at rest.
    pub secrets: Arc<dyn SecretBox>,
}

/// Builds the API's router from its ports. The result is a plain axum `Router`, so a
/// service can serve it alone or mount it inside its own app; nothing is global, so one
/// process may hold several.
pub struct Api {
    services: Services,
    registry: &'static Registry,
}

impl Api {
    /// The API on these ports, with the Cedar authorizer (role templates only), the
    /// default settings and no wake-ups.
    pub fn new(ports: Ports) -> Self {
        let Ports { store, clock, providers, clusters, secrets } = ports;
        Self {
            services: Services {
                store,
                authorizer: Arc::new(CedarAuthorizer::new()),
                clock,
                providers,
                clusters,
                secrets,
                settings: Settings::default(),
                work_notify: None,
                events_notify: None,
                shutdown: None,
                ids: IdSource::default(),
                limiter: None,
                streams: Concurrency::default(),
                join_limiters: None,
                node_listings: Recent::new(NODE_LISTING_TTL),
                cluster_calls: Arc::new(tokio::sync::Semaphore::new(CLUSTER_CALLS_AT_ONCE)),
                list_cache: Default::default(),
            },
            registry: registry(),
        }
    }

    /// Serves another registry instead of the contract's (tests of the pipeline itself,
    /// or a service that declares methods of its own).
    pub fn registry(mut self, registry: &'static Registry) -> Self {
        self.registry = registry;
        self
    }

    /// Uses another authorizer (e.g. Cedar with operator policies).
    pub fn authorizer(mut self, authorizer: Arc<dyn Authorizer>) -> Self {
        self.services.authorizer = authorizer;
        self
    }

    /// Uses these settings.
    pub fn settings(mut self, settings: Settings) -> Self {
        self.services.settings = settings;
        self
    }

    /// The settings in use: the defaults unless [`Api::settings`] replaced them (so an
    /// embedder or a test harness can write what the API's handlers would, such as a new
    /// pool's default quotas).
    pub fn current_settings(&self) -> &Settings {
        &self.services.settings
    }

    /// Pokes `notify` (`notify_waiters`) after each commit that enqueued work, so
    /// reconcilers in this process start at once instead of at their next poll.
    pub fn work_notify(mut self, notify: Arc<Notify>) -> Self {
        self.services.work_notify = Some(notify);
        self
    }

    /// Wakes the Server-Sent Events streams when `notify` is poked (by the in-process
    /// event relay); without it, or for events written by other processes, they poll.
    pub fn events_notify(mut self, notify: Arc<Notify>) -> Self {
        self.services.events_notify = Some(notify);
        self
    }

    /// Ends the event streams when `token` is cancelled (the server's shutdown): a graceful
    /// shutdown waits for responses to finish, and a stream's never would.
    pub fn shutdown(mut self, token: CancellationToken) -> Self {
        self.services.shutdown = Some(token);
        self
    }

    /// The router: `/api/compute/*`, the event stream, `/api/openapi.json`, `/healthz`,
    /// `/readyz`, `/metrics`, and the web console under `/console` ([`crate::console`]).
    pub fn router(mut self) -> Router {
        self.services.limiter = self.services.settings.rate_limit.map(RateLimiter::new);
        self.services.join_limiters = self.services.settings.join_rate_limit.map(|l| {
            let per_token = RateLimiter::of("this join token", l.per_token);
            (per_token, RateLimiter::of("this address", l.per_address))
        });
        let openapi = serde_json::to_vec_pretty(&crate::docs::openapi(self.registry))
            .expect("the OpenAPI document serializes");
        let state = AppState {
            ctx: Ctx::new(self.services),
            registry: self.registry,
            metrics: Arc::new(Metrics::default()),
            openapi: Arc::new(openapi),
        };
        Router::new()
            .route(crate::stream::STREAM_PATH, get(crate::stream::serve).fallback(verb_not_allowed))
            .route("/api/compute/{*method}", any(dispatch))
            .route("/api/openapi.json", get(serve_openapi).fallback(verb_not_allowed))
            .route("/healthz", get(healthz).fallback(verb_not_allowed))
            .route("/readyz", get(readyz).fallback(verb_not_allowed))
            .route("/metrics", get(serve_metrics).fallback(verb_not_allowed))
            .merge(crate::console::router())
            .fallback(no_such_path)
            .layer(middleware::from_fn(catch_panic))
            .layer(middleware::from_fn_with_state(state.clone(), observe))
            .with_state(state)
    }
}

/// What every route shares.
#[derive(Clone)]
struct AppState {
    ctx: Ctx,
    registry: &'static Registry,
    metrics: Arc<Metrics>,
    openapi: Arc<Vec<u8>>,
}

/// The event stream's handler takes the services alone.
impl FromRef<AppState> for Ctx {
    fn from_ref(state: &AppState) -> Ctx {
        state.ctx.clone()
    }
}

/// The header carrying the request id.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// A caller's own request id is kept when it is short and plain; otherwise a new one.
fn request_id(headers: &HeaderMap) -> String {
    let given = headers.get(REQUEST_ID_HEADER).and_then(|v| v.to_str().ok()).filter(|v| {
        !v.is_empty()
            && v.len() <= 128
            && v.bytes().all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b))
    });
    match given {
        Some(v) => v.to_owned(),
        None => format!("req_{}", ulid::Ulid(rand::random()).to_string().to_ascii_lowercase()),
    }
}

/// A panic anywhere on a request's path (a handler, a library it calls) is answered as
/// the JSON `INTERNAL` of SPEC §2 with an error id and logged with that id, instead of
/// dropping the connection; the rest of the server goes on (issue 29).
async fn catch_panic(req: Request, next: Next) -> Response {
    use futures::FutureExt as _;
    match std::panic::AssertUnwindSafe(next.run(req)).catch_unwind().await {
        Ok(resp) => resp,
        Err(payload) => {
            let text = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_owned());
            let text: String = text.chars().take(300).collect();
            ApiError::internal(format!("the request panicked: {text}")).into_response()
        }
    }
}

/// Request id, span, metrics and one log line for every request.
async fn observe(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let id = request_id(req.headers());
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        verb = %req.method(),
        path = %req.uri().path(),
    );
    let start = Instant::now();
    let mut resp = next.run(req).instrument(span.clone()).await;
    let elapsed = start.elapsed();
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert(REQUEST_ID_HEADER, v);
    }
    let code = resp.extensions().get::<Code>().map_or("OK", |c| c.as_str());
    let method = resp.extensions().get::<MethodLabel>().copied();
    let label = method.map(|MethodLabel(r, m)| format!("{r}.{m}"));
    if let Some(label) = &label {
        state.metrics.observe(label, code, elapsed);
    }
    span.in_scope(|| {
        tracing::info!(
            status = resp.status().as_u16(),
            code,
            method = label.as_deref().unwrap_or("-"),
            latency_ms = elapsed.as_secs_f64() * 1000.0,
            "answered"
        );
    });
    resp
}

/// `POST /api/compute/<resource>/<method>`.
async fn dispatch(State(state): State<AppState>, req: Request) -> Response {
    let path = req.uri().path().to_owned();
    let rest = path.strip_prefix("/api/compute/").unwrap_or_default();
    let Some((resource, name)) = rest.split_once('/').filter(|(_, n)| !n.contains('/')) else {
        return unknown_method();
    };
    let Some(method) = state.registry.find(resource, name) else {
        return unknown_method();
    };
    let info = method.info;
    let (parts, body) = req.into_parts();
    let result = async {
        if parts.method != Verb::POST {
            return Err(ApiError::method_not_allowed(&info.path()));
        }
        check_content_type(&parts.headers)?;
        let caller = authenticate(
            state.ctx.store.as_ref(),
            info.authorization.authentication(),
            &parts.headers,
        )
        .await?;
        let key = caller.rate_key();
        let credentialed = key.is_some();
        state.ctx.rate_limit(key)?;
        let answer = async {
            let bytes = read_limited(body, state.ctx.settings.body_limit).await?;
            let value = parse_object(&bytes)?;
            method.run(state.ctx.clone(), caller, value).await
        }
        .await;
        // A caller without a credential yet (`agents.join`) is counted by its address
        // when it fails (SPEC §9): a valid join token is never refused for what others
        // behind the same address sent; a flood of bad ones soon costs its sender.
        match answer {
            Err(e) if !credentialed && failed_join(&e) => {
                let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>();
                if let Some(ConnectInfo(peer)) = peer {
                    let client =
                        state.ctx.settings.trusted_proxies.client(peer.ip(), &parts.headers);
                    state.ctx.limit_join_address(client)?;
                }
                Err(e)
            }
            other => other,
        }
    }
    .await;
    let mut resp = match result {
        Ok(bytes) => json_response(StatusCode::OK, bytes),
        Err(e) => e.into_response(),
    };
    resp.extensions_mut().insert(MethodLabel(info.resource.name, info.name));
    resp
}

/// Whether an error answered to a caller without a credential is a failed join its
/// address is counted for: a token that opens nothing, or a body that is no join.
fn failed_join(e: &ApiError) -> bool {
    matches!(
        e.code(),
        Code::Spec(bc_domain::ErrorCode::Unauthenticated | bc_domain::ErrorCode::InvalidArgument)
    )
}

/// A body is JSON: a `Content-Type` other than `application/json` is refused (a missing
/// one is taken as JSON, as curl and most clients send it).
fn check_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(value) = headers.get(header::CONTENT_TYPE) else { return Ok(()) };
    let mime = value.to_str().unwrap_or("").split(';').next().unwrap_or("").trim();
    if mime.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(ApiError::invalid_body("Content-Type must be application/json"))
    }
}

/// 404 for a path under `/api/compute/` that names no method. The path is not echoed:
/// it is the caller's text and may be anything.
fn unknown_method() -> Response {
    let mut resp = ApiError::not_found(
        "no such method: see /api/openapi.json for the methods (POST /api/compute/<resource>/<method>)",
    )
    .into_response();
    resp.extensions_mut().insert(MethodLabel("unknown", "method"));
    resp
}

fn json_response(status: StatusCode, bytes: Vec<u8>) -> Response {
    let mut resp = (status, bytes).into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

async fn no_such_path() -> Response {
    ApiError::not_found("no such path").into_response()
}

async fn verb_not_allowed(req: Request<Body>) -> Response {
    let mut e = ApiError::method_not_allowed(req.uri().path()).into_response();
    e.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET"));
    e
}

async fn healthz() -> Response {
    json_response(StatusCode::OK, br#"{"status":"ok"}"#.to_vec())
}

async fn readyz(State(state): State<AppState>) -> Response {
    match state.ctx.store.ready().await {
        Ok(()) => json_response(StatusCode::OK, br#"{"status":"ready"}"#.to_vec()),
        Err(e) => ApiError::from(e).into_response(),
    }
}

async fn serve_metrics(State(state): State<AppState>) -> Response {
    let now = state.ctx.clock.now();
    match state.ctx.store.queue_status(now).await {
        Ok(status) => state.metrics.set_queue_depth(&status),
        // The request metrics are still worth serving; the gauges keep their last value.
        Err(e) => tracing::warn!(error = %e, "metrics: reading the work queue failed"),
    }
    let mut resp = state.metrics.encode().into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(metrics::CONTENT_TYPE));
    resp
}

async fn serve_openapi(State(state): State<AppState>) -> Response {
    json_response(StatusCode::OK, state.openapi.as_ref().clone())
}
