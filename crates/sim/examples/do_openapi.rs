//! Writes `crates/sim/tests/sim/data/do_openapi.json`: the response schemas of every route
//! the simulator's DigitalOcean face serves ([`bc_sim::model::routes::SERVED`]), taken
//! from DigitalOcean's OpenAPI document (`digitalocean/openapi`), so the face can be
//! checked against them (crates/sim/tests/sim/do_schema.rs) without the YAML in the tree.
//!
//! ```text
//! cargo run -p bc-sim --example do_openapi -- <openapi git checkout or mirror> [rev] \
//!     > crates/sim/tests/sim/data/do_openapi.json
//! ```
//!
//! Invariant: the extract holds only what validates a response — `type`, `properties`,
//! `required`, `items`, `enum`, `allOf`/`anyOf`/`oneOf`, `nullable`,
//! `additionalProperties`, `format`, `pattern`, bounds, `writeOnly` — and every `$ref`
//! of a schema becomes an entry of `schemas` (of a response, of `responses`) named by
//! its file (and pointer) under `specification/`; documentation keywords are dropped, and any other keyword stops
//! the generator, so nothing that constrains a response is silently left out.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, ExitCode};

use bc_sim::model::routes;
use serde_json::{Map, Value, json};

/// Keywords that constrain a value: kept.
const VALIDATING: &[&str] = &[
    "type",
    "properties",
    "required",
    "items",
    "enum",
    "allOf",
    "anyOf",
    "oneOf",
    "nullable",
    "additionalProperties",
    "format",
    "pattern",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "writeOnly",
];

/// Keywords that only document: dropped.
const DOCUMENTING: &[&str] =
    &["description", "example", "examples", "default", "deprecated", "title", "readOnly"];

/// Reads the document's files at one revision of a git repository.
struct Spec {
    repo: String,
    rev: String,
    /// Every file read, under `specification/`.
    read: BTreeSet<String>,
    cache: BTreeMap<String, Value>,
}

impl Spec {
    fn file(&mut self, path: &str) -> Result<Value, String> {
        if let Some(v) = self.cache.get(path) {
            return Ok(v.clone());
        }
        let spec = format!("{}:specification/{path}", self.rev);
        let out = Command::new("git")
            .args(["-C", &self.repo, "show", &spec])
            .output()
            .map_err(|e| format!("git show {spec}: {e}"))?;
        if !out.status.success() {
            return Err(format!("git show {spec}: {}", String::from_utf8_lossy(&out.stderr)));
        }
        let text = String::from_utf8(out.stdout).map_err(|e| format!("{path}: {e}"))?;
        let v: Value = serde_saphyr::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
        self.read.insert(path.to_owned());
        self.cache.insert(path.to_owned(), v.clone());
        Ok(v)
    }

    /// The node a `$ref` written in `from` names, and its canonical name
    /// (`<file>` or `<file>#<pointer>`).
    fn resolve(&mut self, from: &str, reference: &str) -> Result<(String, Value), String> {
        let (file, pointer) = reference.split_once('#').unwrap_or((reference, ""));
        let file = if file.is_empty() { from.to_owned() } else { join(from, file)? };
        let doc = self.file(&file)?;
        let node = if pointer.is_empty() { Some(&doc) } else { doc.pointer(pointer) };
        let node = node.ok_or_else(|| format!("{from}: $ref {reference} names nothing"))?;
        let name = if pointer.is_empty() { file.clone() } else { format!("{file}#{pointer}") };
        Ok((name, node.clone()))
    }
}

/// `rel` resolved against the directory of `from` (both under `specification/`).
fn join(from: &str, rel: &str) -> Result<String, String> {
    let mut parts: Vec<&str> = from.split('/').collect();
    parts.pop();
    for seg in rel.split('/') {
        match seg {
            "." | "" => {}
            ".." => {
                parts.pop().ok_or_else(|| format!("{rel} climbs out of the document"))?;
            }
            s => parts.push(s),
        }
    }
    Ok(parts.join("/"))
}

/// The file part of a canonical name (`<file>#<pointer>`).
fn file_of(name: &str) -> String {
    name.split('#').next().unwrap_or(name).to_owned()
}

/// Turns the document's schemas into the extract's, collecting named ones.
struct Extract {
    spec: Spec,
    schemas: BTreeMap<String, Value>,
    responses: BTreeMap<String, Value>,
}

impl Extract {
    /// A schema found in file `from`.
    fn schema(&mut self, node: &Value, from: &str) -> Result<Value, String> {
        let Some(obj) = node.as_object() else {
            return Err(format!("{from}: a schema that is not an object: {node}"));
        };
        if let Some(r) = obj.get("$ref").and_then(Value::as_str) {
            // OpenAPI 3.0: a `$ref`'s siblings are ignored.
            let (name, target) = self.spec.resolve(from, r)?;
            if !self.schemas.contains_key(&name) {
                // Claimed first, so a schema that refers to itself ends.
                self.schemas.insert(name.clone(), Value::Null);
                let converted = self.schema(&target, &file_of(&name))?;
                self.schemas.insert(name.clone(), converted);
            }
            return Ok(json!({ "$ref": name }));
        }
        let mut out = Map::new();
        for (key, value) in obj {
            let kept = match key.as_str() {
                "properties" => Value::Object(self.properties(value, from)?),
                "items" | "not" => self.schema(value, from)?,
                "additionalProperties" => match value {
                    Value::Bool(_) => value.clone(),
                    _ => self.schema(value, from)?,
                },
                "allOf" | "anyOf" | "oneOf" => Value::Array(
                    value
                        .as_array()
                        .ok_or_else(|| format!("{from}: {key} is not a list"))?
                        .iter()
                        .map(|s| self.schema(s, from))
                        .collect::<Result<_, _>>()?,
                ),
                k if VALIDATING.contains(&k) => value.clone(),
                k if DOCUMENTING.contains(&k) || k.starts_with("x-") => continue,
                k => return Err(format!("{from}: keyword `{k}` is neither kept nor dropped")),
            };
            out.insert(key.clone(), kept);
        }
        Ok(Value::Object(out))
    }

    /// A `properties` map; the document also writes one as a `$ref` to a map.
    fn properties(&mut self, node: &Value, from: &str) -> Result<Map<String, Value>, String> {
        let (map, file) = match node.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                let (name, target) = self.spec.resolve(from, r)?;
                (target, file_of(&name))
            }
            None => (node.clone(), from.to_owned()),
        };
        let map = map.as_object().ok_or_else(|| format!("{from}: properties is not a map"))?;
        map.iter().map(|(k, v)| Ok((k.clone(), self.schema(v, &file)?))).collect()
    }

    /// One response of an operation (`at` names it where it is written inline): adds
    /// its body schema per media type and its headers to `responses`, answers its name.
    fn response(&mut self, node: &Value, from: &str, at: String) -> Result<String, String> {
        let (name, node, from) = match node.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                let (name, target) = self.spec.resolve(from, r)?;
                let file = file_of(&name);
                (name, target, file)
            }
            None => (at, node.clone(), from.to_owned()),
        };
        if self.responses.contains_key(&name) {
            return Ok(name);
        }
        let mut out = Map::new();
        let mut headers = Map::new();
        for (name, h) in node.get("headers").and_then(Value::as_object).into_iter().flatten() {
            let (h, file) = match h.get("$ref").and_then(Value::as_str) {
                Some(r) => {
                    let (at, h) = self.spec.resolve(&from, r)?;
                    (h, file_of(&at))
                }
                None => (h.clone(), from.clone()),
            };
            let schema = h.get("schema").cloned().unwrap_or(json!({}));
            headers.insert(name.clone(), self.schema(&schema, &file)?);
        }
        out.insert("headers".into(), Value::Object(headers));
        let mut content = Map::new();
        for (media, body) in node.get("content").and_then(Value::as_object).into_iter().flatten() {
            let schema = match body.get("schema") {
                Some(s) => self.schema(s, &from)?,
                // A body documented by example only (the kubeconfig's YAML): `null`.
                None => Value::Null,
            };
            content.insert(media.clone(), schema);
        }
        out.insert("content".into(), Value::Object(content));
        self.responses.insert(name.clone(), Value::Object(out));
        Ok(name)
    }
}

fn run(repo: &str, rev: &str) -> Result<Value, String> {
    let commit = Command::new("git")
        .args(["-C", repo, "rev-parse", &format!("{rev}^{{commit}}")])
        .output()
        .map_err(|e| format!("git rev-parse: {e}"))?;
    if !commit.status.success() {
        return Err(format!("git rev-parse {rev}: {}", String::from_utf8_lossy(&commit.stderr)));
    }
    let commit = String::from_utf8_lossy(&commit.stdout).trim().to_owned();
    let spec = Spec {
        repo: repo.to_owned(),
        rev: commit.clone(),
        read: BTreeSet::new(),
        cache: BTreeMap::new(),
    };
    let mut x = Extract { spec, schemas: BTreeMap::new(), responses: BTreeMap::new() };
    let root_file = "DigitalOcean-public.v2.yaml";
    let root = x.spec.file(root_file)?;
    let mut operations = Map::new();
    for (method, template) in routes::SERVED {
        let op_ref = root
            .pointer(&format!(
                "/paths/{}/{}",
                template.replace('~', "~0").replace('/', "~1"),
                method.to_ascii_lowercase()
            ))
            .ok_or_else(|| format!("the document has no {method} {template}"))?;
        let (op_file, op) = match op_ref.get("$ref").and_then(Value::as_str) {
            Some(r) => x.spec.resolve(root_file, r)?,
            None => (root_file.to_owned(), op_ref.clone()),
        };
        let mut responses = Map::new();
        for (status, resp) in op.get("responses").and_then(Value::as_object).into_iter().flatten() {
            let at = format!("{op_file}#/responses/{status}");
            responses.insert(status.clone(), Value::String(x.response(resp, &op_file, at)?));
        }
        operations.insert(
            routes::key(method, template),
            json!({
                "operationId": op.get("operationId").cloned().unwrap_or(Value::Null),
                "file": op_file,
                "responses": responses,
            }),
        );
    }
    Ok(json!({
        "source": {
            "repository": "https://github.com/digitalocean/openapi",
            "commit": commit,
            "root": format!("specification/{root_file}"),
            "files": x.spec.read.iter().map(|f| format!("specification/{f}")).collect::<Vec<_>>(),
            "generator": "cargo run -p bc-sim --example do_openapi -- <checkout> [rev]",
            "note": "Response schemas only, reduced to their validating keywords; operations name their responses, $refs name schemas, both by file#pointer under specification/.",
        },
        "operations": operations,
        "responses": x.responses,
        "schemas": x.schemas,
    }))
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(repo) = args.next() else {
        eprintln!("usage: do_openapi <digitalocean/openapi checkout or mirror> [rev]");
        return ExitCode::from(2);
    };
    let rev = args.next().unwrap_or_else(|| "HEAD".to_owned());
    match run(&repo, &rev) {
        Ok(v) => match serde_json::to_string_pretty(&v) {
            Ok(s) => {
                println!("{s}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("do_openapi: {e}");
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("do_openapi: {e}");
            ExitCode::FAILURE
        }
    }
}
