//! Property tests of the input layer, over every method of the registry:
//! - every documented pattern: strings generated from it are accepted by the input type,
//!   and near misses are accepted exactly when the documented pattern and length accept
//!   them (the docs and the parser are one fact);
//! - random malformed bodies get a 4xx JSON error, never a 5xx.

use std::sync::LazyLock;

use bc_api::registry;
use bc_api::registry::Method;
use bc_domain::model::{Role, Scope};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use regex::Regex;
use serde_json::Value;

use crate::common::{Harness, grant};

/// A fresh in-memory store (these property tests run many cases on one harness).
async fn memory_store() -> crate::common::S {
    let store = bc_store::SqlStore::connect("sqlite::memory:").await.expect("store");
    store.enforce_index_plans(true);
    std::sync::Arc::new(store)
}

/// One step of a path into a JSON document.
#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

/// A string field with a documented pattern, present in a method's example.
#[derive(Debug, Clone)]
struct PatternField {
    method: &'static Method,
    path: Vec<Step>,
    pattern: String,
    max_len: Option<usize>,
}

fn unwrap_nullable(schema: &Value) -> &Value {
    match schema.get("anyOf").and_then(Value::as_array) {
        Some(b) => b.iter().find(|x| x.get("type") != Some(&Value::from("null"))).unwrap_or(schema),
        None => schema,
    }
}

/// Walks schema and example together, collecting the string fields with a pattern.
fn collect(
    method: &'static Method,
    schema: &Value,
    example: &Value,
    path: Vec<Step>,
    out: &mut Vec<PatternField>,
) {
    let schema = unwrap_nullable(schema);
    match example {
        Value::String(_) => {
            if let Some(p) = schema.get("pattern").and_then(Value::as_str) {
                let max_len = schema.get("maxLength").and_then(Value::as_u64).map(|m| m as usize);
                out.push(PatternField { method, path, pattern: p.to_owned(), max_len });
            }
        }
        Value::Object(map) => {
            let mut props =
                schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
            // Externally tagged enums: the variant the example uses.
            for branch in schema.get("oneOf").and_then(Value::as_array).into_iter().flatten() {
                if let Some(p) = branch.get("properties").and_then(Value::as_object) {
                    props.extend(p.clone());
                }
            }
            for (key, value) in map {
                if let Some(sub) = props.get(key) {
                    let mut p = path.clone();
                    p.push(Step::Key(key.clone()));
                    collect(method, sub, value, p, out);
                }
            }
        }
        Value::Array(items) => {
            if let (Some(first), Some(item_schema)) = (items.first(), schema.get("items")) {
                let mut p = path;
                p.push(Step::Index(0));
                collect(method, item_schema, first, p, out);
            }
        }
        _ => {}
    }
}

fn pattern_fields() -> Vec<PatternField> {
    let mut out = Vec::new();
    for m in registry().methods() {
        collect(m, m.input_schema(), m.example(), Vec::new(), &mut out);
    }
    out
}

fn with_value(body: &Value, path: &[Step], value: Value) -> Value {
    let mut body = body.clone();
    let mut at = &mut body;
    for step in path {
        at = match step {
            Step::Key(k) => &mut at[k.as_str()],
            Step::Index(i) => &mut at[*i],
        };
    }
    *at = value;
    body
}

/// Proptest's generator cannot take anchors: the pattern without `^…$`.
fn unanchored(pattern: &str) -> &str {
    pattern.strip_prefix('^').and_then(|p| p.strip_suffix('$')).unwrap_or(pattern)
}

#[test]
fn every_documented_pattern_is_what_the_input_accepts() {
    let fields = pattern_fields();
    let ids: Vec<String> =
        fields.iter().map(|f| format!("{} {:?}", f.method.info.id(), f.path)).collect();
    for required in ["tenantId", "poolId", "requestId", "pageToken", "policy", "nodeName"] {
        assert!(
            ids.iter().any(|i| i.contains(required)),
            "no pattern field {required} found: {ids:#?}"
        );
    }
    for field in &fields {
        let re = Regex::new(&field.pattern).expect("documented patterns compile");
        let generate =
            proptest::string::string_regex(unanchored(&field.pattern)).expect("generatable");
        let within = |s: &str| field.max_len.is_none_or(|m| s.chars().count() <= m);
        let accepts = |s: &str| {
            field
                .method
                .check_fields(&with_value(field.method.example(), &field.path, Value::from(s)))
                .is_ok()
        };
        let mut runner = TestRunner::new(Config { cases: 48, ..Config::default() });
        let near_miss_chars = prop::sample::select(vec![
            ' ', '/', '#', 'é', 'A', 'z', '_', '-', '.', ':', '\u{7}', '0', '\n',
        ]);
        runner
            .run(
                &(generate, any::<prop::sample::Index>(), near_miss_chars, 0usize..3),
                |(s, at, c, grow)| {
                    prop_assume!(within(&s));
                    prop_assert!(
                        accepts(&s),
                        "{} {:?}: generated {s:?} from {} but it is refused",
                        field.method.info.id(),
                        field.path,
                        field.pattern
                    );
                    // A near miss: one character replaced, or the string grown past its cap.
                    let mut chars: Vec<char> = s.chars().collect();
                    if chars.is_empty() || grow == 0 {
                        let n = field.max_len.unwrap_or(64) + 1
                            - chars.len().min(field.max_len.unwrap_or(64));
                        chars.extend(std::iter::repeat_n('a', n));
                    } else {
                        let i = at.index(chars.len());
                        chars[i] = c;
                    }
                    let miss: String = chars.into_iter().collect();
                    let documented = re.is_match(&miss) && within(&miss);
                    prop_assert_eq!(
                        accepts(&miss),
                        documented,
                        "{} {:?}: {:?} against {}",
                        field.method.info.id(),
                        field.path,
                        miss,
                        field.pattern
                    );
                    Ok(())
                },
            )
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Any JSON value, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z]{1,10}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A malformed body for `example`: raw bytes, a truncated document, a field replaced by
/// any value or removed, or an unknown field added.
fn malformed(example: &Value) -> impl Strategy<Value = Vec<u8>> {
    let text = example.to_string();
    let keys: Vec<String> =
        example.as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
    let keys = if keys.is_empty() { vec!["x".to_owned()] } else { keys };
    let base = example.clone();
    let (b1, b2, b3) = (base.clone(), base.clone(), base);
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..48),
        (0..text.len()).prop_map(move |n| text.as_bytes()[..n].to_vec()),
        (prop::sample::select(keys.clone()), any_json()).prop_map(move |(k, v)| {
            let mut b = b1.clone();
            b[k.as_str()] = v;
            b.to_string().into_bytes()
        }),
        prop::sample::select(keys).prop_map(move |k| {
            let mut b = b2.clone();
            b.as_object_mut().map(|m| m.remove(&k));
            b.to_string().into_bytes()
        }),
        ("[a-z]{1,12}", any_json()).prop_map(move |(k, v)| {
            let mut b = b3.clone();
            b[format!("x{k}").as_str()] = v;
            b.to_string().into_bytes()
        }),
    ]
}

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
});

#[test]
fn malformed_bodies_get_a_4xx_json_error_never_a_5xx() {
    let (h, operator, node) = RUNTIME.block_on(async {
        let h = Harness::on(memory_store().await).await;
        let operator = h.token(vec![grant(Role::Operator, Scope::System)]).await;
        let node = h.node_credential().await;
        (h, operator, node)
    });
    for method in registry().methods() {
        let token = match method.info.authorization {
            bc_api::registry::Authorization::NodeCredential => Some(node.as_str()),
            bc_api::registry::Authorization::JoinToken => None,
            _ => Some(operator.as_str()),
        };
        let path = method.info.path();
        let mut runner = TestRunner::new(Config { cases: 48, ..Config::default() });
        runner
            .run(&malformed(method.example()), |body| {
                let a = RUNTIME.block_on(h.post_raw(&path, token, body.clone()));
                let body = String::from_utf8_lossy(&body).into_owned();
                if a.status == 200 {
                    // Still valid after the change: then the input checks accept it too,
                    // and the answer is the method's JSON object.
                    let parsed: Value = serde_json::from_str(&body).expect("answered, so JSON");
                    prop_assert!(method.check(&parsed).is_ok(), "{}: {body}", method.info.id());
                    prop_assert!(a.json.is_object(), "{}: {}", method.info.id(), a.text);
                    return Ok(());
                }
                prop_assert!(
                    a.status.is_client_error(),
                    "{}: {body} → {} {}",
                    method.info.id(),
                    a.status,
                    a.text
                );
                prop_assert!(
                    a.json["error"]["code"].is_string(),
                    "{}: not a JSON error: {}",
                    method.info.id(),
                    a.text
                );
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{e}"));
    }
}
