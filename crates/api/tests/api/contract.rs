//! The cross-cutting rules of SPEC §2, checked for every method of the registry on each
//! store backend, so a new method is covered without a new test:
//! - every documented constraint of every field its example sends (length, pattern,
//!   range, item count, enum, type), every required field left out and an unknown field
//!   added is `INVALID_ARGUMENT` naming that field by its JSON path;
//! - every create with a `requestId` answers a repeat (fields in another order) with its
//!   first answer and makes nothing, and the same `requestId` with another body is
//!   `ALREADY_EXISTS`;
//! - every method with `expectedGeneration` answers a stale one with `ABORTED` and
//!   changes nothing.

use bc_api::registry;
use bc_api::registry::{Authorization, Method};
use regex::Regex;
use serde_json::{Value, json};

use crate::common::{Answer, Harness, S, fields, path_text, reordered, set_at, with};

bc_store::store_suite!(
    every_documented_constraint_is_invalid_argument_naming_its_field,
    every_create_replays_its_first_answer_and_refuses_another_body,
    every_stale_expected_generation_is_aborted,
);

/// Calls `method` with `body` as the method authenticates.
async fn call(h: &Harness, token: &str, node: &str, method: &Method, body: &Value) -> Answer {
    let bearer = match method.info.authorization {
        Authorization::Permission { .. } => Some(token),
        Authorization::NodeCredential => Some(node),
        Authorization::JoinToken => None,
    };
    h.call(&method.info.id().to_string(), bearer, body).await
}

/// A string the pattern refuses (within `max` characters).
fn not_matching(pattern: &str, max: Option<u64>) -> Option<String> {
    let re = Regex::new(pattern).expect("documented patterns compile");
    ["!", " ", "A B", "\u{7}", "a/b", ".", "-"]
        .into_iter()
        .find(|c| !re.is_match(c) && max.is_none_or(|m| c.len() as u64 <= m))
        .map(str::to_owned)
}

/// Violations of a value's documented constraints: `(what, the violating value)`.
fn violations(schema: &Value, value: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    // Bounds as wide integers: a maximum of 2^63 − 1 has a successor to send.
    let num = |k: &str| {
        let v = schema.get(k)?;
        v.as_i64().map(i128::from).or_else(|| v.as_u64().map(i128::from))
    };
    let int = |n: i128| match u64::try_from(n) {
        Ok(u) => json!(u),
        Err(_) => json!(i64::try_from(n).expect("a 64-bit bound's neighbour")),
    };
    match value {
        Value::String(_) => {
            out.push(("a number for a string".into(), json!(5)));
            let max = schema.get("maxLength").and_then(Value::as_u64);
            if let Some(m) = max {
                out.push((format!("over {m} characters"), Value::from("a".repeat(m as usize + 1))));
            }
            if schema.get("minLength").and_then(Value::as_u64).is_some_and(|m| m > 0) {
                out.push(("empty".into(), Value::from("")));
            }
            if let Some(p) = schema.get("pattern").and_then(Value::as_str)
                && let Some(miss) = not_matching(p, max)
            {
                out.push((format!("not matching {p}"), Value::from(miss)));
            }
            if schema.get("enum").is_some() {
                out.push(("not one of the enum".into(), Value::from("no-such-value")));
            }
        }
        Value::Number(_) => {
            out.push(("a string for a number".into(), json!("7")));
            if let Some(min) = num("minimum") {
                out.push((format!("below {min}"), int(min - 1)));
            }
            if let Some(max) = num("maximum") {
                out.push((format!("above {max}"), int(max + 1)));
            }
        }
        Value::Bool(_) => out.push(("a string for a boolean".into(), json!("yes"))),
        Value::Array(items) => {
            out.push(("an object for an array".into(), json!({})));
            if let (Some(m), Some(first)) =
                (schema.get("maxItems").and_then(Value::as_u64), items.first())
            {
                out.push((
                    format!("over {m} items"),
                    Value::Array(vec![first.clone(); m as usize + 1]),
                ));
            }
            if schema.get("minItems").and_then(Value::as_u64).is_some_and(|m| m > 0) {
                out.push(("no items".into(), json!([])));
            }
        }
        Value::Object(_) => out.push(("a string for an object".into(), json!("x"))),
        Value::Null => {}
    }
    out
}

async fn every_documented_constraint_is_invalid_argument_naming_its_field(s: S) {
    let h = Harness::on(s).await;
    let token = h.operator().await;
    let node = h.node_credential().await;
    let mut checked = 0;
    for method in registry().methods() {
        let example = method.example();
        let mut cases: Vec<(String, String, Value)> = Vec::new();
        let mut all = Vec::new();
        fields(method.input_schema(), example, Vec::new(), &mut all);
        for (path, schema, value) in all {
            for (what, bad) in violations(&schema, &value) {
                cases.push((path_text(&path), what, set_at(example, &path, bad)));
            }
        }
        let required = method.input_schema()["required"].as_array().cloned().unwrap_or_default();
        for field in required.iter().filter_map(Value::as_str) {
            let mut body = example.clone();
            body.as_object_mut().expect("an object").remove(field);
            cases.push((field.to_owned(), "left out".into(), body));
        }
        cases.push(("surplus".into(), "unknown".into(), with(example, "surplus", json!(1))));
        for (field, what, body) in cases {
            let a = call(&h, &token, &node, method, &body).await;
            let id = method.info.id();
            assert_eq!(
                (a.status.as_u16(), a.code(), a.field()),
                (400, "INVALID_ARGUMENT", Some(field.as_str())),
                "{id}: {field} {what}: {body} → {}",
                a.text
            );
            checked += 1;
        }
    }
    assert!(checked > 300, "only {checked} constraints were checked");
}

/// Each create, the list that shows what it made, and the list's body.
fn creates() -> Vec<(&'static str, &'static str, Value, &'static str)> {
    use bc_api::methods::examples as ex;
    let tenant = json!({ "tenantId": ex::TENANT });
    vec![
        ("pools.create", "pools.list", tenant.clone(), "pools"),
        ("providerAccounts.create", "providerAccounts.list", tenant.clone(), "providerAccounts"),
        (
            "kubernetesClusters.create",
            "kubernetesClusters.list",
            tenant.clone(),
            "kubernetesClusters",
        ),
        (
            "kubernetesNodePools.create",
            "kubernetesNodePools.list",
            json!({ "tenantId": ex::TENANT, "clusterId": ex::CLUSTER }),
            "kubernetesNodePools",
        ),
        ("loadBalancers.create", "loadBalancers.list", tenant, "loadBalancers"),
        (
            "bookings.create",
            "bookings.list",
            json!({ "tenantId": ex::TENANT, "poolId": ex::POOL }),
            "bookings",
        ),
    ]
}

async fn every_create_replays_its_first_answer_and_refuses_another_body(s: S) {
    let h = Harness::on(s).await;
    let token = h.operator().await;
    let with_request_id: Vec<String> = registry()
        .methods()
        .iter()
        .filter(|m| m.input_schema()["properties"].get("requestId").is_some())
        .map(|m| m.info.id().to_string())
        .collect();
    let creates = creates();
    assert_eq!(
        with_request_id,
        creates.iter().map(|c| c.0).collect::<Vec<_>>(),
        "every method with a requestId is checked here"
    );
    for (create, list, list_body, key) in creates {
        let count = |a: Answer| a.ok()[key].as_array().map_or(0, Vec::len);
        let before = count(h.call(list, Some(&token), &list_body).await);
        let body = crate::common::example(create);
        assert!(body["requestId"].is_string(), "{create}'s example carries a requestId");
        let first = h.call(create, Some(&token), &body).await.ok();
        let path = format!("/api/compute/{}", create.replacen('.', "/", 1));
        let again = h.post_raw(&path, Some(&token), reordered(&body)).await.ok();
        assert_eq!(again, first, "{create}: the same body, its fields reordered, replays");
        let after = count(h.call(list, Some(&token), &list_body).await);
        assert_eq!(after, before + 1, "{create}: the repeat made nothing");
        let name_field = if body.get("name").is_some() { "name" } else { "nodeName" };
        let other = with(&body, name_field, json!("another-one"));
        let a = h.call(create, Some(&token), &other).await;
        let message = a.err("ALREADY_EXISTS");
        assert!(message.contains("requestId"), "{create}: {message}");
        assert_eq!(count(h.call(list, Some(&token), &list_body).await), after, "{create}");
    }
}

async fn every_stale_expected_generation_is_aborted(s: S) {
    let h = Harness::on(s).await;
    let token = h.operator().await;
    let mut checked = 0;
    for method in registry().methods() {
        let example = method.example();
        if example.get("expectedGeneration").is_none() {
            continue;
        }
        let stale = with(example, "expectedGeneration", json!(999));
        let a = h.call(&method.info.id().to_string(), Some(&token), &stale).await;
        assert_eq!(a.status, 409, "{}: {}", method.info.id(), a.text);
        a.err("ABORTED");
        // The current generation is accepted.
        let fresh = with(example, "expectedGeneration", json!(1));
        h.call(&method.info.id().to_string(), Some(&token), &fresh).await.ok();
        checked += 1;
    }
    assert_eq!(checked, 3, "pools.update, kubernetesNodePools.resize, loadBalancers.update");
}
