//! Issue 20, item 5: bounds on every input (SPEC §2 and its identifier table). Every
//! string input has a maximum length, every list a maximum count, every map a maximum
//! number of keys and every integer a range, declared in the method's input schema — the
//! one declaration the checks, the OpenAPI document and the reference docs all read — and
//! a value past a bound is `INVALID_ARGUMENT` naming the field, never `INTERNAL`.

use axum::body::Body;
use axum::http::Request;
use bc_api::methods::examples as ex;
use bc_api::registry;
use serde_json::{Value, json};

use crate::common::{Answer, Harness, S, example, without};

/// The unbounded fields of a schema: `(path, what is missing)`.
fn unbounded(schema: &Value, path: &str, out: &mut Vec<(String, &'static str)>) {
    let Some(map) = schema.as_object() else { return };
    for key in ["anyOf", "oneOf", "allOf"] {
        for branch in map.get(key).and_then(Value::as_array).into_iter().flatten() {
            unbounded(branch, path, out);
        }
    }
    let types: Vec<&str> = match map.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    let fixed = map.contains_key("enum") || map.contains_key("const");
    if types.contains(&"string") && !fixed && !map.contains_key("maxLength") {
        out.push((path.to_owned(), "maxLength"));
    }
    if types.contains(&"integer") && !(map.contains_key("minimum") && map.contains_key("maximum")) {
        out.push((path.to_owned(), "minimum and maximum"));
    }
    if types.contains(&"array") && !map.contains_key("maxItems") {
        out.push((path.to_owned(), "maxItems"));
    }
    if let Some(items) = map.get("items") {
        unbounded(items, &format!("{path}[]"), out);
    }
    let is_map = map.contains_key("additionalProperties") || map.contains_key("patternProperties");
    let open = map.get("additionalProperties").is_some_and(|a| a.is_object());
    if types.contains(&"object") && (open || map.contains_key("patternProperties")) {
        if !map.contains_key("maxProperties") {
            out.push((path.to_owned(), "maxProperties"));
        }
    } else if types.contains(&"object") && !is_map && !map.contains_key("properties") {
        out.push((path.to_owned(), "properties (an object of any keys)"));
    }
    for (name, prop) in map.get("properties").and_then(Value::as_object).into_iter().flatten() {
        let p = if path.is_empty() { name.clone() } else { format!("{path}.{name}") };
        unbounded(prop, &p, out);
    }
    for (_, value) in map.get("patternProperties").and_then(Value::as_object).into_iter().flatten()
    {
        unbounded(value, &format!("{path}{{}}"), out);
    }
    if let Some(value) = map.get("additionalProperties").filter(|v| v.is_object()) {
        unbounded(value, &format!("{path}{{}}"), out);
    }
}

#[test]
fn every_input_field_declares_its_bounds() {
    let mut missing = Vec::new();
    for method in registry().methods() {
        let mut out = Vec::new();
        unbounded(method.input_schema(), "", &mut out);
        missing
            .extend(out.into_iter().map(|(p, what)| format!("{}: {p}: {what}", method.info.id())));
    }
    assert!(missing.is_empty(), "inputs without their bounds:\n{}", missing.join("\n"));
}

bc_store::store_suite!(
    integers_past_their_range_are_invalid_naming_the_field,
    slugs_refuse_format_characters_and_more_than_64_characters,
    labels_taints_and_domains_have_a_maximum_count,
    times_past_the_years_0000_to_9999_are_invalid_naming_the_field,
);

/// An `INVALID_ARGUMENT` naming `field`.
#[track_caller]
fn invalid_at(a: &Answer, field: &str) {
    assert_eq!(
        (a.status.as_u16(), a.code(), a.field()),
        (400, "INVALID_ARGUMENT", Some(field)),
        "{}",
        a.text
    );
}

/// SPEC §2: an integer outside its range, including one beyond 64 bits, is
/// `INVALID_ARGUMENT` naming the field — `afterSeq` 2^63 was a 500 (the store's column is
/// signed), and the same value as `Last-Event-ID` opened a stream that never delivered.
async fn integers_past_their_range_are_invalid_naming_the_field(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let list = |after: &str| format!(r#"{{"tenantId":"{}","afterSeq":{after}}}"#, ex::TENANT);
    for after in ["9223372036854775808", "18446744073709551615", "18446744073709551616", "-1"] {
        let a = h.post_raw("/api/compute/events/list", Some(&t), list(after)).await;
        invalid_at(&a, "afterSeq");
    }
    let a = h.post_raw("/api/compute/events/list", Some(&t), list("9223372036854775807")).await;
    assert_eq!(a.json["events"], json!([]), "the largest seq is a valid bound: {}", a.text);
    for last in ["9223372036854775808", "18446744073709551616", "-1"] {
        let req = Request::get("/api/compute/events/stream?tenantId=acme")
            .header("authorization", format!("Bearer {t}"))
            .header("last-event-id", last)
            .body(Body::empty())
            .unwrap();
        invalid_at(&h.send(req).await, "Last-Event-ID");
    }
    let mut update = without(&example("pools.update"), "expectedGeneration");
    update["expectedGeneration"] = json!(9_223_372_036_854_775_808u64);
    invalid_at(&h.call("pools.update", Some(&t), &update).await, "expectedGeneration");
}

/// SPEC §2: provider slugs are 1–64 characters of `^[A-Za-z0-9][A-Za-z0-9._-]*$`: no
/// bidi override, zero-width or other format character, no whitespace, at every place a
/// slug is taken.
async fn slugs_refuse_format_characters_and_more_than_64_characters(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let hostile = ["nyc1\u{202e}", "ny\u{200b}c1", "\u{2066}nyc1", "nyc 1", &"a".repeat(65)];
    let places: [(&str, &[&str]); 5] = [
        ("pools.create", &["policy", "substrate", "cluster", "create", "region"]),
        ("pools.create", &["policy", "flavors", "0", "size"]),
        ("kubernetesClusters.create", &["region"]),
        ("kubernetesNodePools.create", &["size"]),
        ("loadBalancers.create", &["region"]),
    ];
    for (method, path) in places {
        for value in hostile {
            let mut body = example(method);
            let mut at = &mut body;
            for step in path {
                at = match step.parse::<usize>() {
                    Ok(i) => &mut at[i],
                    Err(_) => &mut at[*step],
                };
            }
            *at = json!(value);
            let field = path.join(".").replace(".0.", "[0].");
            invalid_at(&h.call(method, Some(&t), &body).await, &field);
        }
    }
    let mut adopt = example("pools.create");
    adopt["policy"]["substrate"]["cluster"] =
        json!({ "adopt": { "providerClusterId": "c\u{200d}1" } });
    let field = "policy.substrate.cluster.adopt.providerClusterId";
    invalid_at(&h.call("pools.create", Some(&t), &adopt).await, field);
    let mut upgrade = example("kubernetesClusters.upgrade");
    upgrade["version"] = json!("1.32.1\u{202c}");
    invalid_at(&h.call("kubernetesClusters.upgrade", Some(&t), &upgrade).await, "version");
    let mut fine = example("pools.create");
    fine["policy"]["substrate"]["cluster"]["create"]["region"] = json!("a".repeat(64));
    fine["requestId"] = json!("slug-64");
    fine["name"] = json!("slug-64");
    h.call("pools.create", Some(&t), &fine).await.ok();
}

/// SPEC §2: at most 64 labels and 32 taints per flavor or node pool; `domains` has a
/// maximum too.
async fn labels_taints_and_domains_have_a_maximum_count(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let labels = |n: usize| -> Value { (0..n).map(|i| (format!("k{i}"), json!("v"))).collect() };
    let taints = |n: usize| -> Value {
        (0..n).map(|i| json!({ "key": format!("k{i}"), "effect": "NoSchedule" })).collect()
    };
    let mut pool = example("pools.create");
    pool["policy"]["flavors"][0]["labels"] = labels(65);
    invalid_at(&h.call("pools.create", Some(&t), &pool).await, "policy.flavors[0].labels");
    let mut pool = example("pools.create");
    pool["policy"]["flavors"][0]["taints"] = taints(33);
    invalid_at(&h.call("pools.create", Some(&t), &pool).await, "policy.flavors[0].taints");
    let mut node_pool = example("kubernetesNodePools.create");
    node_pool["labels"] = labels(65);
    invalid_at(&h.call("kubernetesNodePools.create", Some(&t), &node_pool).await, "labels");
    let mut node_pool = example("kubernetesNodePools.create");
    node_pool["taints"] = taints(33);
    invalid_at(&h.call("kubernetesNodePools.create", Some(&t), &node_pool).await, "taints");
    let mut cluster = example("kubernetesClusters.create");
    cluster["nodePools"][0]["labels"] = labels(65);
    invalid_at(
        &h.call("kubernetesClusters.create", Some(&t), &cluster).await,
        "nodePools[0].labels",
    );
    let domains: Vec<Value> = (0..11)
        .map(|i| json!({ "name": format!("d{i}.example.com"), "isManaged": true }))
        .collect();
    let mut global =
        without(&without(&example("loadBalancers.create"), "region"), "forwardingRules");
    global["type"] = json!("global");
    global["globalSettings"] = json!({ "targetProtocol": "http", "targetPort": 80 });
    global["targets"] = json!({ "loadBalancerIds": [ex::LOAD_BALANCER] });
    global["domains"] = json!(domains);
    invalid_at(&h.call("loadBalancers.create", Some(&t), &global).await, "domains");
    // At the bound, the same bodies are accepted.
    let mut pool = example("pools.create");
    pool["policy"]["flavors"][0]["labels"] = labels(64);
    pool["policy"]["flavors"][0]["taints"] = taints(32);
    pool["name"] = json!("bounds-at-limit");
    pool["requestId"] = json!("bounds-at-limit");
    h.call("pools.create", Some(&t), &pool).await.ok();
}

/// Issue 29, item 3: a time whose UTC instant leaves the years 0000–9999 (an offset
/// pushing the last second of 9999 into 10000, or the first of 0000 back into -0001) is
/// `INVALID_ARGUMENT` naming the field, never a panic or a dropped connection.
async fn times_past_the_years_0000_to_9999_are_invalid_naming_the_field(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    for time in ["9999-12-31T23:59:59-01:00", "0000-01-01T00:00:00+01:00"] {
        let mut booking = without(&example("bookings.create"), "requestId");
        booking["endsAt"] = json!(time);
        invalid_at(&h.call("bookings.create", Some(&t), &booking).await, "endsAt");
        for field in ["from", "to"] {
            let mut usage = example("billing.usage");
            usage[field] = json!(time);
            invalid_at(&h.call("billing.usage", Some(&t), &usage).await, field);
        }
    }
    // The last millisecond of 9999 in UTC is a valid bound.
    let mut usage = example("billing.usage");
    usage["to"] = json!("9999-12-31T23:59:59.999Z");
    let a = h.call("billing.usage", Some(&t), &usage).await;
    assert_eq!(a.status, 200, "{}", a.text);
}
