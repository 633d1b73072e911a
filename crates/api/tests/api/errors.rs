//! The error model of SPEC §2 through the router: unknown methods and paths, other verbs,
//! bodies that are too large, not JSON, not an object, with unknown fields or wrong types,
//! each a JSON error naming the field where there is one.

use axum::body::Body;
use axum::http::Request;
use bc_api::methods::examples as ex;
use bc_domain::model::{Role, Scope};
use serde_json::{Value, json};

use crate::common::{Harness, S, grant};

async fn operator(h: &Harness) -> String {
    h.token(vec![grant(Role::Operator, Scope::System)]).await
}

bc_store::store_suite!(
    unknown_methods_and_paths_are_404_json,
    other_verbs_are_405_json,
    a_body_over_one_mebibyte_is_413_json,
    bad_bodies_are_invalid_argument_naming_the_field,
    a_body_that_says_it_is_not_json_is_refused,
);

async fn unknown_methods_and_paths_are_404_json(s: S) {
    let h = Harness::on(s).await;
    let t = operator(&h).await;
    for path in [
        "/api/compute/pools/frobnicate",
        "/api/compute/nope/get",
        "/api/compute/pools",
        "/api/compute/pools/get/x",
        "/nope",
    ] {
        let a = h.post_raw(path, Some(&t), "{}").await;
        assert_eq!((a.status.as_u16(), a.code()), (404, "NOT_FOUND"), "{path}: {}", a.text);
        assert!(!a.text.contains("frobnicate"), "the caller's text is not echoed");
    }
}

async fn other_verbs_are_405_json(s: S) {
    let h = Harness::on(s).await;
    for verb in ["GET", "PUT", "DELETE", "PATCH"] {
        let req = Request::builder()
            .method(verb)
            .uri("/api/compute/pools/get")
            .body(Body::empty())
            .unwrap();
        let a = h.send(req).await;
        assert_eq!(a.status, 405, "{verb}");
        assert_eq!(a.headers["allow"], "POST");
        assert_eq!(a.code(), "METHOD_NOT_ALLOWED");
    }
    // The event stream is a GET.
    let a = h.post_raw("/api/compute/events/stream", None, "{}").await;
    assert_eq!((a.status.as_u16(), a.headers["allow"].to_str().unwrap()), (405, "GET"));
    let a = h.post_raw("/healthz", None, "").await;
    assert_eq!((a.status.as_u16(), a.headers["allow"].to_str().unwrap()), (405, "GET"));
}

async fn a_body_over_one_mebibyte_is_413_json(s: S) {
    let h = Harness::on(s).await;
    let t = operator(&h).await;
    let filler = "x".repeat(1024 * 1024);
    let body = json!({ "tenantId": ex::TENANT, "poolId": ex::POOL, "pad": filler }).to_string();
    let a = h.post_raw("/api/compute/pools/get", Some(&t), body).await;
    assert_eq!(
        (a.status.as_u16(), a.code()),
        (413, "PAYLOAD_TOO_LARGE"),
        "{}",
        &a.text[..a.text.len().min(200)]
    );
}

async fn invalid(h: &Harness, token: &str, method: &str, body: &str) -> (Option<String>, String) {
    let path = format!("/api/compute/{}", method.replacen('.', "/", 1));
    let a = h.post_raw(&path, Some(token), body.to_owned()).await;
    assert_eq!((a.status.as_u16(), a.code()), (400, "INVALID_ARGUMENT"), "{body}: {}", a.text);
    let field = a.json["error"]["field"].as_str().map(str::to_owned);
    (field, a.json["error"]["message"].as_str().unwrap_or_default().to_owned())
}

async fn bad_bodies_are_invalid_argument_naming_the_field(s: S) {
    let h = Harness::on(s).await;
    let t = operator(&h).await;
    let cases: &[(&str, Value, Option<&str>)] = &[
        (
            "pools.get",
            json!({ "tenantId": ex::TENANT, "poolId": ex::POOL, "extra": 1 }),
            Some("extra"),
        ),
        ("pools.get", json!({ "tenantId": ex::TENANT }), Some("poolId")),
        ("pools.get", json!({ "tenantId": 7, "poolId": ex::POOL }), Some("tenantId")),
        ("pools.get", json!({ "tenantId": ex::TENANT, "poolId": "pool_short" }), Some("poolId")),
        ("pools.get", json!({ "tenantId": "a b", "poolId": ex::POOL }), Some("tenantId")),
        ("pools.list", json!({ "tenantId": ex::TENANT, "pageSize": 501 }), Some("pageSize")),
        ("pools.list", json!({ "tenantId": ex::TENANT, "pageToken": "!!" }), Some("pageToken")),
        (
            "pools.create",
            json!({ "tenantId": ex::TENANT, "name": "web", "policy": { "flavors": [{ "name": "cpu", "size": "s", "count": 0 }] } }),
            Some("policy.flavors[0].count"),
        ),
        (
            "pools.create",
            json!({ "tenantId": ex::TENANT, "name": "web", "policy": { "flavors": [{ "name": "cpu", "size": "s", "count": 1, "colour": "red" }] } }),
            Some("policy.flavors[0].colour"),
        ),
        (
            "kubernetesNodePools.create",
            json!({ "tenantId": ex::TENANT, "clusterId": ex::CLUSTER, "name": "bc-mine", "size": "s", "count": 1 }),
            Some("name"),
        ),
        (
            "kubernetesNodePools.create",
            json!({ "tenantId": ex::TENANT, "clusterId": ex::CLUSTER, "name": "x", "size": "s", "count": 1, "autoScale": { "min": 0, "max": 1 } }),
            Some("count"),
        ),
        (
            "loadBalancers.create",
            json!({ "tenantId": ex::TENANT, "poolId": ex::POOL, "providerAccountId": ex::ACCOUNT, "name": "lb", "type": "regional", "region": "nyc1",
                    "forwardingRules": [{ "entryProtocol": "http", "entryPort": 70000, "targetProtocol": "http", "targetPort": 80 }], "targets": { "tag": "web" } }),
            Some("forwardingRules[0].entryPort"),
        ),
        (
            "billing.usage",
            json!({ "tenantId": ex::TENANT, "from": "2026-12-02T00:00:00Z", "to": "2026-12-01T00:00:00Z" }),
            Some("to"),
        ),
        (
            "billing.usage",
            json!({ "tenantId": ex::TENANT, "from": "yesterday", "to": "2026-12-01T00:00:00Z" }),
            Some("from"),
        ),
    ];
    for (method, body, field) in cases {
        let (got, message) = invalid(&h, &t, method, &body.to_string()).await;
        assert_eq!(got.as_deref(), *field, "{method} {body}: {message}");
        assert!(!message.is_empty());
    }
    for body in ["", "not json", "[1,2]", "\"x\"", "{\"tenantId\":", "{'a':1}"] {
        let (field, message) = invalid(&h, &t, "pools.get", body).await;
        assert_eq!(field, None, "{body}");
        assert!(message.starts_with("the body"), "{body}: {message}");
    }
}

async fn a_body_that_says_it_is_not_json_is_refused(s: S) {
    let h = Harness::on(s).await;
    let t = operator(&h).await;
    let req = Request::post("/api/compute/pools/get")
        .header("authorization", format!("Bearer {t}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Body::from("tenantId=acme"))
        .unwrap();
    let a = h.send(req).await;
    assert_eq!((a.status.as_u16(), a.code()), (400, "INVALID_ARGUMENT"));
    let req = Request::post("/api/compute/pools/get")
        .header("authorization", format!("Bearer {t}"))
        .header("content-type", "application/json; charset=utf-8")
        .body(Body::from(json!({ "tenantId": ex::TENANT, "poolId": ex::POOL }).to_string()))
        .unwrap();
    assert_eq!(h.send(req).await.ok()["poolId"], ex::POOL);
}
