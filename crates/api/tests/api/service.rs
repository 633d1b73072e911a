//! The service endpoints and the layer every request passes: `/healthz`, `/readyz`,
//! `/metrics`, `/api/openapi.json`, the web console's assets, request ids, and the
//! per-token rate limit.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use bc_api::methods::examples as ex;
use bc_api::ratelimit::RateLimit;
use bc_api::{Api, Ports, Settings};
use bc_domain::model::{Role, Scope};
use bc_store::{AeadSecretBox, SqlStore};
use serde_json::json;
use tower::ServiceExt;

use crate::common::{Harness, S, example, grant, sim_config};

bc_store::store_suite!(
    health_readiness_and_the_openapi_document,
    metrics_count_requests_by_method_and_code_and_report_queue_depth,
    every_answer_carries_a_request_id,
    the_rate_limit_is_per_token_with_retry_after,
    the_router_serves_the_console_under_its_policy,
);

/// The console is part of the API's router (so `bc-api serve` and `dev` both serve it),
/// needs no token to load (it holds none: the page asks its reader), and every answer under
/// `/console` carries the policy that keeps it to its own scripts and styles.
async fn the_router_serves_the_console_under_its_policy(s: S) {
    let h = Harness::on(s).await;
    let page = h.get("/console").await;
    assert_eq!(page.status, 200);
    assert!(page.headers["content-type"].to_str().unwrap().starts_with("text/html"));
    assert!(page.text.contains(r#"<script type="module" src="/console/app.js">"#), "{}", page.text);
    for name in bc_api::console::asset_names() {
        let a = h.get(&format!("/console/{name}")).await;
        assert_eq!(a.status, 200, "{name}");
        assert_eq!(a.headers["content-security-policy"], "default-src 'self'", "{name}");
        assert!(a.headers.contains_key("x-request-id"), "{name}: the common layer runs");
    }
    assert_eq!(page.headers["content-security-policy"], "default-src 'self'");
    let missing = h.get("/console/../api/openapi.json").await;
    assert_ne!(missing.status, 200, "no way out of /console");
    let missing = h.get("/console/nope.js").await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.headers["content-security-policy"], "default-src 'self'");
}

async fn health_readiness_and_the_openapi_document(s: S) {
    let h = Harness::on(s).await;
    let a = h.get("/healthz").await;
    assert_eq!((a.status.as_u16(), a.json["status"].as_str()), (200, Some("ok")));
    let a = h.get("/readyz").await;
    assert_eq!((a.status.as_u16(), a.json["status"].as_str()), (200, Some("ready")));
    let a = h.get("/api/openapi.json").await;
    assert_eq!(a.status, 200);
    assert_eq!(a.json, bc_api::docs::openapi(bc_api::registry()));
}

#[tokio::test]
async fn readyz_is_503_json_while_migrations_are_not_current() {
    let store = Arc::new(SqlStore::connect_unmigrated("sqlite::memory:").await.expect("store"));
    let cloud = bc_sim::testing::Cloud::with_config(sim_config()).await;
    let secrets = Arc::new(AeadSecretBox::new(&[7u8; 32]).expect("key"));
    let app = Api::new(Ports {
        store,
        clock: cloud.clock.clone(),
        providers: cloud.providers(secrets.clone()),
        clusters: cloud.clusters(),
        secrets,
    })
    .router();
    let resp = app.oneshot(Request::get("/readyz").body(Body::empty()).unwrap()).await.unwrap();
    assert!(resp.status().is_server_error(), "{}", resp.status());
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 16).await.unwrap();
    let body: serde_json::Value = serde_json::from_slice(&bytes).expect("a JSON error");
    assert!(body["error"]["code"].is_string(), "{body}");
}

async fn metrics_count_requests_by_method_and_code_and_report_queue_depth(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let body = json!({ "tenantId": ex::TENANT, "poolId": ex::POOL });
    h.call("pools.get", Some(&t), &body).await.ok();
    h.call("pools.get", None, &body).await;
    h.post_raw("/api/compute/pools/nope", None, "{}").await;
    // Two writes that enqueue work: a pool with a substrate, a load balancer.
    h.call("pools.create", Some(&t), &example("pools.create")).await.ok();
    h.call("loadBalancers.create", Some(&t), &example("loadBalancers.create")).await.ok();
    let m = h.get("/metrics").await;
    assert_eq!(m.status, 200);
    assert!(
        m.headers["content-type"].to_str().unwrap().starts_with("application/openmetrics-text")
    );
    // Besides: the fixture's work — its pool's substrate (looked at, due again later),
    // its cluster, and its load balancers (due: no reconciler ran).
    let lbs = crate::common::EXAMPLE_POOL_LBS.len() + 1;
    for line in [
        r#"bc_api_requests_total{method="pools.get",code="OK"} 1"#.to_owned(),
        r#"bc_api_requests_total{method="pools.get",code="UNAUTHENTICATED"} 1"#.to_owned(),
        r#"bc_api_requests_total{method="unknown.method",code="NOT_FOUND"} 1"#.to_owned(),
        r#"bc_api_request_duration_seconds_count{method="pools.get"} 2"#.to_owned(),
        r#"bc_work_queue_depth{kind="kubernetes.substrates"} 2"#.to_owned(),
        r#"bc_work_queue_due{kind="kubernetes.substrates"} 1"#.to_owned(),
        format!(r#"bc_work_queue_depth{{kind="vps.provider-resources"}} {lbs}"#),
        r#"bc_work_queue_depth{kind="kubernetes.clusters"} 1"#.to_owned(),
        r#"bc_work_queue_failing{kind="kubernetes.nodepools"} 0"#.to_owned(),
    ] {
        assert!(m.text.contains(&line), "missing {line} in\n{}", m.text);
    }
}

async fn every_answer_carries_a_request_id(s: S) {
    let h = Harness::on(s).await;
    let mut seen = std::collections::BTreeSet::new();
    for path in ["/healthz", "/nope", "/api/compute/pools/get"] {
        let a = h.get(path).await;
        let id = a.headers["x-request-id"].to_str().unwrap().to_owned();
        assert!(id.starts_with("req_"), "{path}: {id}");
        seen.insert(id);
    }
    assert_eq!(seen.len(), 3, "each request its own id");
    let given =
        Request::get("/healthz").header("x-request-id", "trace-42").body(Body::empty()).unwrap();
    assert_eq!(h.send(given).await.headers["x-request-id"], "trace-42");
    let odd =
        Request::get("/healthz").header("x-request-id", "has space").body(Body::empty()).unwrap();
    assert!(h.send(odd).await.headers["x-request-id"].to_str().unwrap().starts_with("req_"));
}

async fn the_rate_limit_is_per_token_with_retry_after(s: S) {
    let limit =
        RateLimit { burst: NonZeroU32::new(2).unwrap(), replenish_every: Duration::from_secs(60) };
    let h = Harness::with(s, sim_config(), |api| {
        api.settings(Settings { rate_limit: Some(limit), ..Settings::default() })
    })
    .await;
    let a_token = h.token(vec![grant(Role::Viewer, Scope::System)]).await;
    let b_token = h.token(vec![grant(Role::Viewer, Scope::System)]).await;
    let body = json!({ "tenantId": ex::TENANT, "poolId": ex::POOL });
    for _ in 0..2 {
        h.call("pools.get", Some(&a_token), &body).await.ok();
    }
    let limited = h.call("pools.get", Some(&a_token), &body).await;
    assert_eq!((limited.status.as_u16(), limited.code()), (429, "RESOURCE_EXHAUSTED"));
    let retry: u64 = limited.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    let other = h.call("pools.get", Some(&b_token), &body).await;
    assert_eq!(other.status, 200, "another token is not limited: {}", other.text);
}
