//! Issue 12, security bullet 2 — hostile inputs, generated from the OpenAPI document for
//! every method: the document is fetched from the server itself (`GET /api/openapi.json`,
//! the registry's; `docs.rs` proves the committed copy is the same), and for every
//! method and every field of its request schema the generator sends oversized strings
//! (1 MB, and one over `maxLength`), every wrong JSON type, numbers out of range, deep
//! nesting (10,000 levels, and 100 — under the parser's limit), unicode (RTL override,
//! combining marks, emoji, zero-width, a lone-surrogate escape), NUL, SQL / command / path
//! / URL / template injection strings, huge arrays (100,000 items) and duplicate keys;
//! and per method: invalid JSON, invalid UTF-8, a BOM, a raw NUL byte, duplicate
//! top-level keys, wrong content types and bodies beyond the 1 MiB limit.
//!
//! Each field gets one value of each kind (type, size, unicode, NUL, injection, nesting,
//! array, duplicate key), picked by a fixed seed (`SEED`), and the heavy values (1 MB,
//! 100,000 items) on every method's first field and a seeded quarter of the others:
//! about 1,900 requests per backend (the count is printed), instead of the ~6,000 of the
//! full product.
//!
//! Everything goes through real HTTP (the router served by hyper on a loopback port)
//! with a valid operator token (the node credential for `agents.heartbeat`), on a SQLite
//! file and on PostgreSQL. Invariants checked for every answer: never a 5xx; an error is
//! exactly SPEC §2's shape; no message carries a stack trace, SQL, a driver's name or a
//! file path; a field-level problem names the field (its JSON path or one inside it), a
//! body-level one names none; and afterwards the fixture objects are unchanged unless an
//! accepted write (a body the registry's own checks accept) named them.

use std::collections::{BTreeMap, BTreeSet};

use bc_api::methods::examples as ex;
use bc_store::testing::{Backend, run};
use serde_json::{Value, json};

use crate::common::{
    Harness, OTHER_LB, OTHER_POOL, OTHER_TENANT, S, Step, fields, path_text, set_at,
};

/// The placeholder whose serialized form a hostile value's raw text replaces in a body
/// (so text `serde_json::Value` cannot hold — a lone surrogate, 10,000 levels — is sent).
const HOLE: &str = "\u{1}HOSTILE\u{1}";

/// Text no error message may contain: SQL, drivers, panics, stack traces, file paths.
const FORBIDDEN: &[&str] = &[
    "SELECT ",
    "INSERT ",
    "UPDATE ",
    "DELETE FROM",
    " WHERE ",
    "SQLSTATE",
    "sqlx",
    "sea_orm",
    "sea-orm",
    "SeaORM",
    "DbErr",
    "error returned from database",
    "sqlite",
    "SQLite",
    "postgres",
    "panicked",
    "stack backtrace",
    "RUST_BACKTRACE",
    ".rs:",
    "/src/",
    "/home/",
    "/work/",
    "/tmp/",
    "/root/",
    "/usr/",
    "/etc/passwd",
];

/// One method of the OpenAPI document.
struct Op {
    /// `pools.create`.
    name: String,
    /// `/api/compute/pools/create`.
    path: String,
    /// `read` or `write`.
    kind: String,
    /// `apiToken`, `nodeCredential` or none.
    security: Option<String>,
    schema: Value,
    example: Value,
}

/// The methods with a JSON request body, from the served OpenAPI document.
fn operations(doc: &Value) -> Vec<Op> {
    let schemas = &doc["components"]["schemas"];
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        let Some(post) = item.get("post") else { continue };
        let Some(content) = post["requestBody"]["content"].get("application/json") else {
            continue;
        };
        let reference = content["schema"]["$ref"].as_str().expect("a $ref");
        let name = reference.rsplit('/').next().expect("a name");
        out.push(Op {
            name: post["summary"].as_str().expect("summary").to_owned(),
            path: path.clone(),
            kind: post["x-kind"].as_str().expect("x-kind").to_owned(),
            security: post["security"][0].as_object().and_then(|m| m.keys().next().cloned()),
            schema: schemas[name].clone(),
            example: content["example"].clone(),
        });
    }
    out
}

/// What an answer must be.
#[derive(Debug, Clone)]
enum Expect {
    /// The body parses: an `INVALID_ARGUMENT` must name this field or one inside it.
    Field(String),
    /// The field set to `null` (the same as leaving it out): a rule between it and its
    /// siblings may name any field of the object holding it (`count` or `autoScale`).
    FieldOrSibling(String),
    /// The body parses but the problem is its own (a duplicate key): any field, but one.
    Named,
    /// The body is not a JSON object: 400 `INVALID_ARGUMENT` naming no field.
    Body,
    /// Over the 1 MiB limit: 413.
    TooLarge,
}

/// One request to send.
struct Case {
    op: usize,
    what: String,
    content_type: &'static str,
    body: Vec<u8>,
    expect: Expect,
}

fn quoted(s: &str) -> String {
    Value::from(s).to_string()
}

/// `n` levels of arrays, or of `{"a": …}`.
fn nested(n: usize, objects: bool) -> String {
    if objects {
        format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n))
    } else {
        format!("{}1{}", "[".repeat(n), "]".repeat(n))
    }
}

/// The seed of the sampling of heavy values (change it to sample other fields).
const SEED: u64 = 0x1205_ec01;

/// Whether a field gets the heavy values (the 1 MB string, the 100,000-item arrays):
/// every method's first field, and a seeded quarter of the rest — the full product
/// would send ~200 MB per backend for little more coverage (the parser, not the field,
/// meets the size).
fn heavy(method: &str, field: &str, first: bool) -> bool {
    first || pick(&[method, field], 4) == 0
}

/// The kind of a hostile value: each field gets one value of each kind, chosen by the
/// seeded hash, so every kind meets every field while the run stays ~1,900 requests.
fn kind(what: &str) -> &'static str {
    match what {
        "a 1 MB string" | "one over maxLength" => "size",
        "an RTL override"
        | "combining marks"
        | "emoji"
        | "a zero-width space"
        | "a lone surrogate escape" => "unicode",
        "a NUL escape" => "nul",
        "10,000 nested arrays" | "10,000 nested objects" | "100 nested arrays" => "nesting",
        "100,000 numbers" | "100,000 copies of an item" => "array",
        "a duplicate key" => "duplicate",
        w if w.contains("injection") || w.contains("traversal") => "injection",
        "a URL" | "a template" | "CRLF" => "injection",
        _ => "type",
    }
}

/// Seeded choice of one of `n`, stable across runs.
fn pick(parts: &[&str], n: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ SEED;
    for p in parts {
        for b in p.bytes().chain([0]) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    (h % n as u64) as usize
}

/// Hostile values for a field: `(what, raw JSON text, whether it parses)`; with `heavy`,
/// also the 1 MB and 100,000-item ones.
fn hostile_values(schema: &Value, example: &Value, heavy: bool) -> Vec<(String, String, bool)> {
    let mut out: Vec<(String, String, bool)> = Vec::new();
    let mut v = |what: &str, raw: String| {
        let parses = serde_json::from_str::<Value>(&raw).is_ok();
        out.push((what.to_owned(), raw, parses));
    };
    // Every JSON type, whatever the field's.
    v("a number", "12345".into());
    v("a negative number", "-1".into());
    v("a fraction", "1.5".into());
    v("2^64", "18446744073709551616".into());
    v("1e309 (out of range)", "1e309".into());
    v("a boolean", "true".into());
    v("null", "null".into());
    v("an array", "[\"x\"]".into());
    v("an object", "{\"x\":1}".into());
    v("a string", "\"x\"".into());
    // Strings.
    if heavy {
        v("a 1 MB string", quoted(&"a".repeat(1_000_000)));
    }
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
        v("one over maxLength", quoted(&"a".repeat(max as usize + 1)));
    }
    v("an RTL override", quoted("\u{202e}gnp.exe"));
    v("combining marks", quoted(&format!("a{}", "\u{301}".repeat(200))));
    v("emoji", quoted("\u{1f980}\u{1f525}\u{1f469}\u{200d}\u{1f467}"));
    v("a zero-width space", quoted("\u{200b}"));
    v("a lone surrogate escape", "\"\\ud800\"".into());
    v("a NUL escape", "\"a\\u0000b\"".into());
    v("SQL injection", quoted("' OR '1'='1' --"));
    v("SQL injection without spaces", quoted("x');DROP/**/TABLE/**/pools;--"));
    v("command injection", quoted("$(touch${IFS}/tmp/pwned)`id`"));
    v("path traversal", quoted("../../../../etc/passwd"));
    v("encoded path traversal", quoted("..%2f..%2f..%2fetc%2fpasswd%00"));
    v("a URL", quoted("http://127.0.0.1:9/@evil.example"));
    v("a template", quoted("${jndi:ldap://127.0.0.1/a}{{7*7}}%s%n"));
    v("CRLF", quoted("a\r\nX-Injected: 1"));
    // Nesting and size.
    v("10,000 nested arrays", nested(10_000, false));
    v("10,000 nested objects", nested(10_000, true));
    v("100 nested arrays", nested(100, false));
    if heavy {
        v("100,000 numbers", format!("[{}0]", "0,".repeat(99_999)));
    }
    if heavy && let Some(first) = example.as_array().and_then(|a| a.first()) {
        let item = first.to_string();
        if item.len() * 100_000 < 1_000_000 {
            v("100,000 copies of an item", format!("[{}]", vec![item; 100_000].join(",")));
        }
    }
    // A duplicate key inside an object field.
    if let Some(map) = example.as_object()
        && let Some((k, val)) = map.iter().next()
    {
        let inner = example.to_string();
        let dup = format!("{{{}:{},{}", quoted(k), val, &inner[1..]);
        v("a duplicate key", dup);
    }
    out
}

/// The fields of a request: every field its example sends (nested, through `fields`)
/// and every top-level property it leaves out.
fn request_fields(op: &Op) -> Vec<(Vec<Step>, Value, Value)> {
    let mut all = Vec::new();
    fields(&op.schema, &op.example, Vec::new(), &mut all);
    for (key, schema) in op.schema["properties"].as_object().into_iter().flatten() {
        if op.example.get(key).is_none() {
            all.push((vec![Step::Key(key.clone())], schema.clone(), Value::Null));
        }
    }
    all
}

/// The body the field cases start from: the example, repeatable (no
/// `expectedGeneration`: an accepted update would make every later one stale).
fn base(op: &Op) -> Value {
    let mut body = op.example.clone();
    body.as_object_mut().expect("an object").remove("expectedGeneration");
    body
}

/// The hostile requests of `ops[i]` (made per method, so at most one method's bodies
/// are held at a time).
fn cases(ops: &[Op], i: usize) -> Vec<Case> {
    let mut out = Vec::new();
    let json = "application/json";
    {
        let op = &ops[i];
        let base = base(op);
        for (n, (path, schema, value)) in request_fields(op).into_iter().enumerate() {
            let field = path_text(&path);
            let heavy = heavy(&op.name, &field, n == 0);
            let template = set_at(&base, &path, Value::from(HOLE)).to_string();
            let hole = quoted(HOLE);
            let all = hostile_values(&schema, &value, heavy);
            let mut by_kind: BTreeMap<&str, Vec<&(String, String, bool)>> = BTreeMap::new();
            for v in &all {
                by_kind.entry(kind(&v.0)).or_default().push(v);
            }
            // Heavy fields get every size and array value; the rest one of each kind.
            let chosen: Vec<&(String, String, bool)> = by_kind
                .iter()
                .flat_map(|(k, vs)| {
                    if heavy && matches!(*k, "size" | "array") {
                        vs.clone()
                    } else {
                        vec![vs[pick(&[&op.name, &field, k], vs.len())]]
                    }
                })
                .collect();
            for (what, raw, parses) in chosen.into_iter().cloned() {
                let body = template.replacen(&hole, &raw, 1);
                let expect = if !parses {
                    Expect::Body
                } else if what == "a duplicate key" {
                    Expect::Named
                } else if raw == "null" {
                    Expect::FieldOrSibling(field.clone())
                } else {
                    Expect::Field(field.clone())
                };
                out.push(Case {
                    op: i,
                    what: format!("{field}: {what}"),
                    content_type: json,
                    body: body.into_bytes(),
                    expect,
                });
            }
        }
        let example = op.example.to_string();
        let mut whole = |what: &str, content_type: &'static str, body: Vec<u8>, expect| {
            out.push(Case { op: i, what: what.to_owned(), content_type, body, expect });
        };
        for (what, body) in [
            ("an empty body", String::new()),
            ("an unclosed object", "{".to_owned()),
            ("single quotes", "{'tenantId':'acme'}".to_owned()),
            ("a trailing comma", format!("{},}}", &example[..example.len() - 1])),
            ("trailing garbage", format!("{example}garbage")),
            ("a top-level array", "[1,2,3]".to_owned()),
            ("a top-level string", "\"x\"".to_owned()),
            ("100,000 top-level items", format!("[{}0]", "0,".repeat(99_999))),
            ("10,000 nested arrays", nested(10_000, false)),
            ("10,000 nested objects", nested(10_000, true)),
            ("a lone surrogate key", "{\"\\udc00\":1}".to_owned()),
        ] {
            whole(what, json, body.into_bytes(), Expect::Body);
        }
        let mut raw_nul = example.clone().into_bytes();
        raw_nul.insert(1, 0);
        whole("a raw NUL byte", json, raw_nul, Expect::Body);
        let mut bad_utf8 = b"{\"tenantId\":\"".to_vec();
        bad_utf8.extend_from_slice(&[0xff, 0xfe, 0xc3]);
        bad_utf8.extend_from_slice(b"\"}");
        whole("invalid UTF-8", json, bad_utf8, Expect::Body);
        let mut bom = vec![0xef, 0xbb, 0xbf];
        bom.extend_from_slice(example.as_bytes());
        whole("a byte-order mark", json, bom, Expect::Body);
        // Every top-level key twice: first another tenant's value, then the example's.
        if let Some((k, _)) = op.example.as_object().and_then(|m| m.iter().next()) {
            let dup = format!("{{{}:{},{}", quoted(k), quoted(OTHER_TENANT), &example[1..]);
            whole("a duplicate top-level key", json, dup.into_bytes(), Expect::Named);
        }
        for content_type in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/xml",
            "application/jsonx",
        ] {
            let what = format!("Content-Type {content_type}");
            whole(&what, content_type, example.clone().into_bytes(), Expect::Body);
        }
        let pad = |n: usize| {
            let mut b = op.example.clone();
            b["pad"] = Value::from("x".repeat(n));
            b.to_string().into_bytes()
        };
        whole("one byte over 1 MiB", json, pad(1024 * 1024), Expect::TooLarge);
        whole("8 MiB", json, pad(8 * 1024 * 1024), Expect::TooLarge);
    }
    out
}

/// `POST` over a raw TCP connection with `Expect: 100-continue`, as careful clients
/// send large bodies: the body goes only once the server asks for it. (A server that
/// refuses a body it has not read closes with unread bytes, which resets the connection
/// and can take the answer with it; so a client that sends 8 MiB blindly may see a reset
/// instead of the 413. The header lets the answer arrive first.)
/// Returns the final status and body, and whether the server asked for the body.
async fn raw_post(
    url: &str,
    path: &str,
    headers: &[(&str, String)],
    body: Vec<u8>,
) -> (u16, String, bool) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = url.strip_prefix("http://").expect("http");
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut read, mut write) = stream.into_split();
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\nexpect: 100-continue\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    write.write_all(head.as_bytes()).await.expect("headers sent");
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut pending = Some((write, body));
    let mut writer = None;
    let exchange = async {
        loop {
            let n = read.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
            let end = got.windows(4).position(|w| w == b"\r\n\r\n");
            if got.starts_with(b"HTTP/1.1 100")
                && let Some(end) = end
                && let Some((mut write, body)) = pending.take()
            {
                got.drain(..end + 4);
                writer = Some(tokio::spawn(async move {
                    // The server may close mid-body: its right, not this test's concern.
                    let _ = write.write_all(&body).await;
                }));
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(30), exchange).await;
    let asked = writer.is_some();
    if let Some(w) = writer {
        w.abort();
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or(String::new(), |(_, b)| b.to_owned());
    (status, body, asked)
}

/// What went wrong with one answer, if anything.
fn judge(case: &Case, status: u16, text: &str) -> Option<String> {
    if status >= 500 {
        return Some(format!("a {status}"));
    }
    // (An accepted write may echo what it stored; an error never quotes anything.)
    for bad in FORBIDDEN.iter().filter(|_| status != 200) {
        if text.contains(bad) {
            return Some(format!("the answer contains {bad:?}"));
        }
    }
    let json: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(_) => return Some("not JSON".into()),
    };
    if status == 200 {
        return (!json.is_object()).then(|| "a 200 that is not an object".into());
    }
    let error = json["error"].as_object();
    let shape_ok = json.as_object().is_some_and(|m| m.len() == 1)
        && error.is_some_and(|e| {
            e["code"].is_string()
                && e["message"].as_str().is_some_and(|m| !m.is_empty())
                && e.keys().all(|k| ["code", "message", "field"].contains(&k.as_str()))
                && e.get("field").is_none_or(Value::is_string)
        });
    if !shape_ok {
        return Some("not SPEC §2's error shape".into());
    }
    let code = json["error"]["code"].as_str().unwrap_or_default();
    let field = json["error"]["field"].as_str();
    match &case.expect {
        Expect::TooLarge => {
            (status != 413 || code != "PAYLOAD_TOO_LARGE").then(|| "not 413".into())
        }
        Expect::Body => (status != 400 || code != "INVALID_ARGUMENT" || field.is_some())
            .then(|| "not a 400 about the body".into()),
        Expect::Named => (code != "INVALID_ARGUMENT" || field.is_none())
            .then(|| "a duplicate key not refused by name".into()),
        Expect::Field(f) => {
            let inside = |got: &str| {
                got == f || got.starts_with(&format!("{f}.")) || got.starts_with(&format!("{f}["))
            };
            (code == "INVALID_ARGUMENT" && !field.is_some_and(inside))
                .then(|| format!("INVALID_ARGUMENT not naming {f}"))
        }
        Expect::FieldOrSibling(f) => {
            let parent = f.rfind(['.', '[']).map_or("", |i| &f[..i]);
            let within = |got: &str| got.starts_with(parent);
            (code == "INVALID_ARGUMENT" && !field.is_some_and(within))
                .then(|| format!("INVALID_ARGUMENT naming nothing in the object of {f}"))
        }
    }
}

/// The fixture objects, read through every `get` of the document (their examples name
/// the fixture) plus the second load balancer and the other tenant's pool: id → answer.
async fn snapshot(h: &Harness, token: &str, ops: &[Op]) -> BTreeMap<String, Value> {
    let mut bodies: Vec<(String, Value)> = ops
        .iter()
        .filter(|o| o.name.ends_with(".get"))
        .map(|o| (o.name.clone(), o.example.clone()))
        .collect();
    bodies.push((
        "loadBalancers.get".into(),
        json!({ "tenantId": ex::TENANT, "loadBalancerId": OTHER_LB }),
    ));
    bodies.push(("pools.get".into(), json!({ "tenantId": OTHER_TENANT, "poolId": OTHER_POOL })));
    let mut out = BTreeMap::new();
    for (method, body) in bodies {
        let key = format!("{method} {body}");
        out.insert(key, h.call(&method, Some(token), &body).await.ok());
    }
    out
}

/// Every string leaf of a JSON value.
fn strings(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::String(s) => {
            out.insert(s.clone());
        }
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(m) => m.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

async fn barrage(store: S) {
    let h = Harness::on(store).await;
    let token = h.operator().await;
    let node = h.node_credential().await;
    let server = h.serve().await;
    bc_sim::install_crypto();
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .expect("client");
    let doc: Value = client
        .get(format!("{}/api/openapi.json", server.url))
        .send()
        .await
        .expect("served")
        .json()
        .await
        .expect("JSON");
    let ops = operations(&doc);
    assert_eq!(
        ops.len(),
        bc_api::registry().methods().len(),
        "every method of the registry is in the document"
    );
    let before = snapshot(&h, &token, &ops).await;
    let mut failures = Vec::new();
    let mut accepted_writes: Vec<(String, Value)> = Vec::new();
    let mut by_status: BTreeMap<u16, usize> = BTreeMap::new();
    let mut sent = 0;
    for case in (0..ops.len()).flat_map(|i| cases(&ops, i)) {
        sent += 1;
        let op = &ops[case.op];
        let bearer = match op.security.as_deref() {
            Some("apiToken") => Some(&token),
            Some("nodeCredential") => Some(&node),
            _ => None,
        };
        let (status, text) = if matches!(case.expect, Expect::TooLarge) {
            let mut headers = vec![("content-type", case.content_type.to_owned())];
            headers.extend(bearer.map(|b| ("authorization", format!("Bearer {b}"))));
            let (status, text, asked) =
                raw_post(&server.url, &op.path, &headers, case.body.clone()).await;
            if asked {
                failures.push(format!(
                    "{} {}: the server asked for a body its Content-Length says is too large",
                    op.name, case.what
                ));
            }
            (status, text)
        } else {
            let mut req = client
                .post(format!("{}{}", server.url, op.path))
                .header("content-type", case.content_type)
                .body(case.body.clone());
            if let Some(b) = bearer {
                req = req.bearer_auth(b);
            }
            let resp =
                req.send().await.unwrap_or_else(|e| panic!("{} {}: {e}", op.name, case.what));
            (resp.status().as_u16(), resp.text().await.expect("an answer"))
        };
        h.capture.response(&op.path, &text);
        *by_status.entry(status).or_default() += 1;
        if let Some(why) = judge(&case, status, &text) {
            failures.push(format!(
                "{} {}: {why}: {status} {}",
                op.name,
                case.what,
                &text[..text.len().min(300)]
            ));
        }
        if status == 200 && op.kind == "write" {
            let body: Value = serde_json::from_slice(&case.body).expect("answered, so JSON");
            let (resource, name) = op.name.split_once('.').expect("resource.method");
            let method = bc_api::registry().find(resource, name).expect("registered");
            if let Err(e) = method.check(&body) {
                failures.push(format!(
                    "{} {}: accepted what its checks refuse: {e:?}",
                    op.name, case.what
                ));
            }
            accepted_writes.push((op.name.clone(), body));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} hostile requests misanswered:\n{}",
        failures.len(),
        sent,
        failures.join("\n")
    );
    // No data lost or corrupted: what no accepted update, delete or end named is as it was.
    let mut named = BTreeSet::new();
    for (method, body) in &accepted_writes {
        if !method.ends_with(".create") {
            strings(body, &mut named);
        }
    }
    let after = snapshot(&h, &token, &ops).await;
    for (key, was) in &before {
        let mut ids = BTreeSet::new();
        strings(
            &serde_json::from_str(key.split_once(' ').expect("key").1).expect("JSON"),
            &mut ids,
        );
        let touched = ids.iter().any(|id| id != ex::TENANT && named.contains(id));
        if !touched {
            assert_eq!(&after[key], was, "{key} changed under hostile input");
        }
    }
    let accepted: BTreeSet<&str> = accepted_writes.iter().map(|(m, _)| m.as_str()).collect();
    eprintln!(
        "hostile inputs: {} requests over {} methods; answers by status {by_status:?}; writes accepted by {accepted:?}",
        sent,
        ops.len()
    );
    assert!(sent > 1_500, "only {sent} hostile requests");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_inputs_to_every_method_over_http_on_sqlite() {
    run(Backend::File, barrage).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_inputs_to_every_method_over_http_on_postgres() {
    run(Backend::Postgres, barrage).await;
}
