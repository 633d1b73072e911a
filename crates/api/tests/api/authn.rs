//! Authentication (SPEC §2, §3, §9): every way a credential can be wrong is the same 401,
//! and a valid one gets through.

use axum::body::Body;
use axum::http::Request;
use bc_api::methods::examples as ex;
use bc_domain::model::{Role, Scope};
use serde_json::json;

use crate::common::{Harness, S, grant, new_token};

fn substrate_get() -> serde_json::Value {
    json!({ "tenantId": ex::TENANT, "poolId": ex::POOL })
}

bc_store::store_suite!(
    missing_malformed_unknown_and_revoked_tokens_are_one_401,
    a_body_is_not_read_before_authentication,
    agents_authenticate_with_their_own_credentials,
);

async fn missing_malformed_unknown_and_revoked_tokens_are_one_401(s: S) {
    let h = Harness::on(s).await;
    let operator = vec![grant(Role::Operator, Scope::System)];
    let revoked = h.revoked_token(operator.clone()).await;
    let (unknown, _) = new_token(operator.clone());
    let valid = h.token(operator).await;
    let mut bodies = Vec::new();
    let malformed = [
        "nope".to_owned(),
        format!("{valid}x"),
        valid[..valid.len() - 1].to_owned(),
        valid.replacen("bc_", "xx_", 1),
        format!("{}+", &valid[..valid.len() - 1]),
    ];
    let mut credentials: Vec<Option<String>> = vec![None, Some(unknown), Some(revoked)];
    credentials.extend(malformed.into_iter().map(Some));
    for credential in &credentials {
        let a = h.call("kubernetesSubstrates.get", credential.as_deref(), &substrate_get()).await;
        assert_eq!(a.status, 401, "{credential:?}");
        assert_eq!(a.code(), "UNAUTHENTICATED");
        bodies.push(a.text);
    }
    // Another scheme than Bearer.
    let req = Request::post("/api/compute/kubernetesSubstrates/get")
        .header("authorization", format!("Basic {valid}"))
        .body(Body::from(substrate_get().to_string()))
        .unwrap();
    let basic = h.send(req).await;
    assert_eq!(basic.status, 401);
    bodies.push(basic.text);
    bodies.dedup();
    assert_eq!(bodies.len(), 1, "every failure reads the same: {bodies:?}");
    assert!(!bodies[0].contains(&valid[3..]), "the credential is never echoed");
    let ok = h.call("kubernetesSubstrates.get", Some(&valid), &substrate_get()).await.ok();
    assert_eq!(ok["poolId"], ex::POOL);
}

async fn a_body_is_not_read_before_authentication(s: S) {
    let h = Harness::on(s).await;
    let a = h.post_raw("/api/compute/pools/get", None, "this is not json").await;
    assert_eq!(a.status, 401, "authentication comes first: {}", a.text);
}

async fn agents_authenticate_with_their_own_credentials(s: S) {
    let h = Harness::on(s).await;
    let heartbeat = |token: Option<String>| {
        let h = &h;
        async move { h.call("agents.heartbeat", token.as_deref(), &json!({})).await }
    };
    assert_eq!(heartbeat(None).await.status, 401);
    assert_eq!(heartbeat(Some("nc_unknown".into())).await.status, 401);
    assert_eq!(heartbeat(Some("has space".into())).await.status, 401);
    // An API token is not a node credential.
    let api_token = h.token(vec![grant(Role::Operator, Scope::System)]).await;
    assert_eq!(heartbeat(Some(api_token)).await.status, 401);
    let credential = h.node_credential().await;
    let beat = heartbeat(Some(credential)).await.ok();
    assert_eq!(beat["heartbeatSeconds"], 30);
    // Joining carries its credential in the body: no bearer is asked for, and a join
    // token that opens no pool is the same 401.
    let join = json!({ "joinToken": "jt", "nodeName": "pool-gpu-1", "bcdVersion": "0.1.0",
        "serviceAccountToken": "sa" });
    let a = h.call("agents.join", None, &join).await;
    assert_eq!((a.status.as_u16(), a.code()), (401, "UNAUTHENTICATED"), "{}", a.text);
}
