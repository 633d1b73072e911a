//! Writes `crates/sim/tests/sim/data/gke_discovery.json`: the schemas of every answer the
//! simulator's GKE face serves ([`bc_sim::gke_api::routes::SERVED`]), taken from GKE's
//! discovery document (`container.v1.json`: google-api-go-client's
//! `container/v1/container-api.json`, or the copy google-api-python-client ships in
//! `googleapiclient/discovery_cache/documents/`), so the face can be checked against them
//! (crates/sim/tests/sim/gke_schema.rs) without the 400 kB document in the tree.
//!
//! ```text
//! cargo run -p bc-sim --example gke_discovery -- <container.v1.json> "<where it came from>" \
//!     > crates/sim/tests/sim/data/gke_discovery.json
//! ```
//!
//! Invariant: the extract holds only what validates an answer — `type`, `format`,
//! `properties`, `items`, `additionalProperties`, `enum`, `$ref` — for every schema
//! reachable from a served method's response; documentation keywords are dropped, and any
//! other keyword stops the generator, so nothing that constrains an answer is left out.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;

use serde_json::{Map, Value, json};

const VALIDATING: &[&str] =
    &["type", "format", "properties", "items", "additionalProperties", "enum", "$ref"];
const DOCUMENTING: &[&str] = &[
    "description",
    "enumDescriptions",
    "enumDeprecated",
    "readOnly",
    "deprecated",
    "id",
    "annotations",
    "default",
    "pattern",
    "location",
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(path), Some(source)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: gke_discovery <container.v1.json> <source note>");
        return ExitCode::FAILURE;
    };
    let doc: Value = match std::fs::read(path).map(|b| serde_json::from_slice(&b)) {
        Ok(Ok(v)) => v,
        _ => {
            eprintln!("{path}: not a readable discovery document");
            return ExitCode::FAILURE;
        }
    };
    let mut methods = BTreeMap::new();
    collect_methods(&doc["resources"], &mut methods);
    let mut responses = Map::new();
    let mut todo: Vec<String> = Vec::new();
    for (method, template) in bc_sim::gke_api::routes::SERVED {
        let flat = template.trim_start_matches('/');
        let Some(m) = methods.get(&(method.to_string(), flat.to_owned())) else {
            eprintln!("{method} {template}: not a method of the document");
            return ExitCode::FAILURE;
        };
        let Some(r) = m["response"]["$ref"].as_str() else {
            eprintln!("{method} {template}: no response schema");
            return ExitCode::FAILURE;
        };
        responses.insert(format!("{method} {template}"), json!(r));
        todo.push(r.to_owned());
    }
    let mut schemas = Map::new();
    let mut seen = BTreeSet::new();
    while let Some(name) = todo.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let Some(s) = doc["schemas"].get(&name) else {
            eprintln!("schema {name}: missing");
            return ExitCode::FAILURE;
        };
        match extract(s, &mut todo) {
            Ok(v) => {
                schemas.insert(name, v);
            }
            Err(e) => {
                eprintln!("schema {name}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let out = json!({
        "source": source,
        "revision": doc["revision"],
        "responses": responses,
        "schemas": schemas,
    });
    println!("{}", serde_json::to_string_pretty(&out).expect("JSON"));
    ExitCode::SUCCESS
}

fn collect_methods(resources: &Value, out: &mut BTreeMap<(String, String), Value>) {
    let Some(rs) = resources.as_object() else { return };
    for r in rs.values() {
        for m in r["methods"].as_object().into_iter().flatten().map(|(_, m)| m) {
            if let (Some(verb), Some(flat)) = (m["httpMethod"].as_str(), m["flatPath"].as_str()) {
                out.insert((verb.to_owned(), flat.to_owned()), m.clone());
            }
        }
        collect_methods(&r["resources"], out);
    }
}

fn extract(s: &Value, todo: &mut Vec<String>) -> Result<Value, String> {
    let Some(o) = s.as_object() else { return Err("not an object".into()) };
    let mut out = Map::new();
    for (k, v) in o {
        if DOCUMENTING.contains(&k.as_str()) {
            continue;
        }
        if !VALIDATING.contains(&k.as_str()) {
            return Err(format!("unknown keyword {k}"));
        }
        let v = match k.as_str() {
            "$ref" => {
                todo.push(v.as_str().unwrap_or_default().to_owned());
                v.clone()
            }
            "properties" => {
                let mut props = Map::new();
                for (p, ps) in v.as_object().into_iter().flatten() {
                    props.insert(p.clone(), extract(ps, todo)?);
                }
                Value::Object(props)
            }
            "items" | "additionalProperties" => extract(v, todo)?,
            _ => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    Ok(Value::Object(out))
}
