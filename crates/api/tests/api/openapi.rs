//! Issue 20, item 6: the OpenAPI document works with common tools (SPEC §2). Every
//! `pattern` means the same in ECMA-262, Python's `re` and Go's RE2 (no `\p{…}` class, no
//! engine-specific escape), compiled here by the `regex` crate and by `python3`; the
//! rules across fields JSON Schema can say (`count` xor `autoScale`, `targets` exactly one
//! of) are said with `oneOf`, so what the document calls valid the API accepts; and each
//! create links to the calls on what it made (its get, update and delete).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::process::{Command, Stdio};

use bc_api::docs::openapi;
use bc_api::registry;
use serde_json::{Value, json};

use crate::common::{Harness, S, example};

/// Every `pattern` and `patternProperties` key of a document, each once.
fn patterns(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("pattern", Value::String(p)) => {
                        out.insert(p.clone());
                    }
                    ("patternProperties", Value::Object(props)) => {
                        out.extend(props.keys().cloned());
                    }
                    _ => {}
                }
                patterns(v, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|i| patterns(i, out)),
        _ => {}
    }
}

/// Escapes and groups whose meaning differs between ECMA-262, Python `re` and RE2 (or
/// that one of them lacks): Unicode property classes, the shorthand classes (ASCII in
/// one engine, Unicode in another), word boundaries, anchors and group extensions.
const NOT_PORTABLE: &[&str] = &[
    r"\p", r"\P", r"\d", r"\D", r"\w", r"\W", r"\s", r"\S", r"\b", r"\B", r"\A", r"\z", r"\Z",
    r"\h", r"\u", r"\x", "(?",
];

#[test]
fn every_pattern_of_the_document_is_portable() {
    let mut all = BTreeSet::new();
    patterns(&openapi(registry()), &mut all);
    assert!(all.len() > 10, "the document's patterns were found: {all:?}");
    for p in &all {
        let bad: Vec<&&str> = NOT_PORTABLE.iter().filter(|e| p.contains(**e)).collect();
        assert!(bad.is_empty(), "{p} uses {bad:?}, which engines read differently");
        assert!(p.is_ascii(), "{p}: a pattern of ASCII only reads the same in every engine");
        regex::Regex::new(p).unwrap_or_else(|e| panic!("{p} does not compile: {e}"));
    }
    // Python's `re`, as Python-based OpenAPI tools compile them.
    let Some(python) = bc_sim::testing::required_tool("python3", "it compiles the patterns") else {
        return;
    };
    let script = "import json, re, sys\n\
        bad = []\n\
        for p in json.load(sys.stdin):\n\
        \x20   try: re.compile(p)\n\
        \x20   except re.error as e: bad.append(f'{p}: {e}')\n\
        print(json.dumps(bad))\n";
    let mut child = Command::new(python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let input = serde_json::to_vec(&all).expect("JSON");
    child.stdin.take().expect("stdin").write_all(&input).expect("written");
    let out = child.wait_with_output().expect("python3 ends");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bad: Vec<String> = serde_json::from_slice(&out.stdout).expect("a JSON list");
    assert!(bad.is_empty(), "python3 cannot compile: {bad:?}");
}

/// The component schema of a method's input.
fn input_schema<'a>(doc: &'a Value, method: &str) -> &'a Value {
    let (resource, name) = method.split_once('.').expect("resource.method");
    let m = registry().find(resource, name).expect("a method");
    &doc["components"]["schemas"][m.input_name()]
}

/// The keys of an object schema's `oneOf` "exactly one of" rule.
fn one_of_keys(schema: &Value) -> Vec<String> {
    let branches = schema["oneOf"].as_array().cloned().unwrap_or_default();
    branches.iter().filter_map(|b| b["required"][0].as_str().map(str::to_owned)).collect()
}

#[test]
fn rules_across_fields_are_said_with_one_of() {
    let doc = openapi(registry());
    let scale = ["count", "autoScale"];
    let flavor = &input_schema(&doc, "pools.create")["properties"]["policy"]["properties"]["flavors"]
        ["items"];
    assert_eq!(one_of_keys(flavor), scale);
    assert_eq!(one_of_keys(input_schema(&doc, "kubernetesNodePools.create")), scale);
    assert_eq!(one_of_keys(input_schema(&doc, "kubernetesNodePools.resize")), scale);
    let first =
        &input_schema(&doc, "kubernetesClusters.create")["properties"]["nodePools"]["items"];
    assert_eq!(one_of_keys(first), scale);
    let targets = &input_schema(&doc, "loadBalancers.create")["properties"]["targets"];
    assert_eq!(one_of_keys(targets), ["tag", "dropletIds", "loadBalancerIds"]);
}

/// Whether an object meets a `oneOf` of "required and not null" branches, as any JSON
/// Schema validator reads it: exactly one branch holds.
fn one_of_holds(schema: &Value, object: &Value) -> bool {
    let Some(branches) = schema["oneOf"].as_array() else { return true };
    let holds = |b: &Value| {
        b["required"].as_array().into_iter().flatten().filter_map(Value::as_str).all(|k| {
            object.get(k).is_some_and(|v| !(v.is_null() && b["properties"][k]["not"].is_object()))
        })
    };
    branches.iter().filter(|b| holds(b)).count() == 1
}

/// The places the rules apply: the method, the path of the object in its example body
/// (empty for the body), and the variants of that object's keys to try.
fn variants() -> Vec<(&'static str, Vec<&'static str>, Vec<Value>)> {
    let scale = vec![
        json!({ "count": 2 }),
        json!({ "autoScale": { "min": 0, "max": 3 } }),
        json!({ "count": null, "autoScale": { "min": 1, "max": 2 } }),
        json!({ "count": 2, "autoScale": null }),
        json!({ "count": 2, "autoScale": { "min": 0, "max": 3 } }),
        json!({}),
        json!({ "count": null, "autoScale": null }),
    ];
    let targets = vec![
        json!({ "tag": "web" }),
        json!({ "dropletIds": [3164444] }),
        json!({ "tag": "web", "dropletIds": null }),
        json!({ "tag": "web", "dropletIds": [3164444] }),
        json!({}),
    ];
    vec![
        ("pools.create", vec!["policy", "flavors", "0"], scale.clone()),
        ("kubernetesClusters.create", vec!["nodePools", "0"], scale.clone()),
        ("kubernetesNodePools.create", vec![], scale.clone()),
        ("kubernetesNodePools.resize", vec![], scale),
        ("loadBalancers.create", vec!["targets"], targets),
    ]
}

bc_store::store_suite!(what_the_document_calls_valid_the_api_accepts);

/// For every variant of the keys a `oneOf` governs, the document's verdict and the
/// server's agree: valid is accepted (no input error), invalid is `INVALID_ARGUMENT`.
async fn what_the_document_calls_valid_the_api_accepts(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let doc = openapi(registry());
    for (method, path, cases) in variants() {
        let mut schema = input_schema(&doc, method);
        for step in &path {
            schema = match step.parse::<usize>() {
                Ok(_) => &schema["items"],
                Err(_) => &schema["properties"][*step],
            };
        }
        for (i, case) in cases.iter().enumerate() {
            // A new name and requestId each, so no variant meets another's record.
            let mut body = example(method);
            for key in ["name", "requestId"] {
                if body.get(key).is_some() {
                    body[key] = json!(format!("variant-{i}"));
                }
            }
            let mut at = &mut body;
            for step in &path {
                at = match step.parse::<usize>() {
                    Ok(i) => &mut at[i],
                    Err(_) => &mut at[*step],
                };
            }
            let object = at.as_object_mut().expect("an object");
            for key in one_of_keys(schema) {
                object.remove(&key);
            }
            object.extend(case.as_object().expect("an object").clone());
            let valid = one_of_holds(schema, at);
            let a = h.call(method, Some(&t), &body).await;
            let refused_input = a.code() == "INVALID_ARGUMENT";
            assert_eq!(
                refused_input,
                !valid,
                "{method} with {case}: the document says {}, the API answered {}",
                if valid { "valid" } else { "invalid" },
                a.text
            );
        }
    }
}

#[test]
fn each_create_links_to_the_calls_on_what_it_made() {
    let doc = openapi(registry());
    let expected: BTreeMap<&str, &[&str]> = [
        ("pools", &["archive", "get", "update"][..]),
        ("providerAccounts", &["delete", "get"]),
        ("kubernetesClusters", &["delete", "get", "upgrade"]),
        ("kubernetesNodePools", &["delete", "get", "resize"]),
        ("loadBalancers", &["delete", "get", "update"]),
        ("bookings", &["end"]),
    ]
    .into();
    let operations: BTreeMap<String, (&str, &Value)> = doc["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .filter_map(|(path, item)| {
            let op = item.get("post")?;
            Some((op["operationId"].as_str()?.to_owned(), (path.as_str(), op)))
        })
        .collect();
    for m in registry().methods().iter().filter(|m| m.info.name == "create") {
        let resource = m.info.resource.name;
        let op = &doc["paths"][m.info.path()]["post"];
        let links = op["responses"]["200"]["links"].as_object().cloned().unwrap_or_default();
        let names: BTreeSet<&str> = links.keys().map(String::as_str).collect();
        let want: BTreeSet<&str> = expected[resource].iter().copied().collect();
        assert_eq!(names, want, "{resource}.create's links");
        let made = &m.output_schema()["properties"];
        for (name, link) in &links {
            let target = link["operationId"].as_str().expect("an operationId");
            let (_, target_op) = operations.get(target).unwrap_or_else(|| panic!("{target}"));
            let input = &doc["components"]["schemas"]
                [target_op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
                    .as_str()
                    .expect("a reference")
                    .trim_start_matches("#/components/schemas/")];
            let body = link["requestBody"].as_object().expect("a request body");
            for required in input["required"].as_array().into_iter().flatten() {
                let field = required.as_str().expect("a name");
                assert!(body.contains_key(field), "{resource}.{name} lacks {field}");
            }
            for (field, expression) in body {
                assert!(input["properties"].get(field).is_some(), "{resource}.{name}: {field}");
                assert_eq!(expression, &json!(format!("$response.body#/{field}")));
                assert!(made.get(field).is_some(), "{resource}.create answers no {field}");
            }
        }
    }
}
