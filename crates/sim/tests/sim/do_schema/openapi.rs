//! A small validator of responses against the extract of DigitalOcean's OpenAPI document
//! (`tests/sim/data/do_openapi.json`, written by `examples/do_openapi.rs`): the subset of
//! JSON Schema that document uses — `type`, `properties`, `required`, `items`, `enum`,
//! `allOf`/`anyOf`/`oneOf`, `nullable`, `additionalProperties`, `format`, `pattern`,
//! bounds and `writeOnly`.
//!
//! Invariant: nothing passes by omission. An object may carry only the properties its
//! schema names (through every `allOf` branch and every passing `anyOf`/`oneOf` branch,
//! as JSON Schema's `unevaluatedProperties: false` would judge it) unless the schema
//! allows more (`additionalProperties`, or a bare `type: object` — a free-form map such
//! as a node pool's `labels`); a required property must be there; a keyword or format
//! this validator does not know is an error, not a pass.

use std::collections::BTreeSet;

use serde_json::Value;

/// The extract.
pub struct Document {
    root: Value,
}

/// What one evaluation of an object saw: the property names some schema spoke for, or
/// all of them.
enum Seen {
    Some(BTreeSet<String>),
    All,
}

impl Seen {
    fn none() -> Self {
        Seen::Some(BTreeSet::new())
    }
    fn add(&mut self, other: Seen) {
        match (&mut *self, other) {
            (Seen::All, _) => {}
            (_, Seen::All) => *self = Seen::All,
            (Seen::Some(a), Seen::Some(b)) => a.extend(b),
        }
    }
}

impl Document {
    /// The committed extract.
    pub fn load() -> Self {
        let text = include_str!("../data/do_openapi.json");
        Self { root: serde_json::from_str(text).expect("do_openapi.json is JSON") }
    }

    /// The extract, with `property` (of schema `schema`) added to the named schema
    /// `name`: for a field DigitalOcean sends that its document leaves out.
    pub fn with_property(mut self, name: &str, property: &str, schema: Value) -> Self {
        let target = self
            .root
            .pointer_mut(&format!("/schemas/{}/properties", escape(name)))
            .and_then(Value::as_object_mut)
            .unwrap_or_else(|| panic!("{name} is not a schema with properties"));
        assert!(target.insert(property.to_owned(), schema).is_none(), "{name} has {property}");
        self
    }

    /// The commit of `digitalocean/openapi` the extract was taken from.
    pub fn commit(&self) -> &str {
        self.root["source"]["commit"].as_str().unwrap_or("?")
    }

    /// The documented response of `route_key` (`"GET /v2/…{cluster_id}"`) for `status`:
    /// its own, else the operation's `default`.
    pub fn response(&self, route_key: &str, status: u16) -> Result<&Value, String> {
        let op = self
            .root
            .pointer(&format!("/operations/{}", escape(route_key)))
            .ok_or_else(|| format!("{route_key}: not in the extract"))?;
        let name = op["responses"]
            .get(status.to_string())
            .or_else(|| op["responses"].get("default"))
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{route_key}: status {status} is not documented"))?;
        self.root
            .pointer(&format!("/responses/{}", escape(name)))
            .ok_or_else(|| format!("{route_key}: response {name} is missing"))
    }

    /// Every error of one answer of `route_key`: its documented headers, its media type
    /// and its body.
    pub fn check(
        &self,
        route_key: &str,
        status: u16,
        headers: &reqwest::header::HeaderMap,
        body: &str,
    ) -> Vec<String> {
        let resp = match self.response(route_key, status) {
            Ok(r) => r,
            Err(e) => return vec![e],
        };
        let mut errs = Vec::new();
        for (name, schema) in resp["headers"].as_object().into_iter().flatten() {
            match headers.get(name.as_str()).and_then(|v| v.to_str().ok()) {
                None => errs.push(format!("header {name}: missing")),
                Some(v) => {
                    let value = match schema["type"].as_str() {
                        Some("integer") => v.parse::<i64>().map(Value::from).unwrap_or(v.into()),
                        _ => Value::from(v),
                    };
                    self.closed(schema, &value, &format!("header {name}"), &mut errs);
                }
            }
        }
        let content = resp["content"].as_object();
        let media = headers
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or(v).trim().to_owned());
        match content.filter(|c| !c.is_empty()) {
            None if body.is_empty() => {}
            None => errs.push(format!("a body where none is documented: {body:?}")),
            Some(c) => match media.as_deref().and_then(|m| c.get(m).map(|s| (m, s))) {
                None => errs.push(format!(
                    "content type {media:?} is not one of {:?}",
                    c.keys().collect::<Vec<_>>()
                )),
                Some(("application/json", schema)) => match serde_json::from_str(body) {
                    Ok(v) => self.closed(schema, &v, "$", &mut errs),
                    Err(e) => errs.push(format!("body is not JSON ({e}): {body:?}")),
                },
                // The document has no schema for it (the kubeconfig): it must parse.
                Some((m, Value::Null)) if m.ends_with("yaml") => {
                    if let Err(e) = serde_saphyr::from_str::<Value>(body) {
                        errs.push(format!("body is not YAML ({e})"));
                    }
                }
                Some((m, _)) => errs.push(format!("media type {m} is not checked here")),
            },
        }
        errs
    }

    /// Validates `v` against `schema` as a whole value: no property beyond what the
    /// schema speaks for.
    pub fn closed(&self, schema: &Value, v: &Value, path: &str, errs: &mut Vec<String>) {
        let seen = self.eval(schema, v, path, errs);
        if let (Some(obj), Seen::Some(known)) = (v.as_object(), seen) {
            for key in obj.keys().filter(|k| !known.contains(*k)) {
                errs.push(format!("{path}.{key}: not in the schema"));
            }
        }
    }

    /// Validates `v` against `schema`; answers which properties of `v` it spoke for.
    fn eval(&self, schema: &Value, v: &Value, path: &str, errs: &mut Vec<String>) -> Seen {
        let Some(s) = schema.as_object() else {
            errs.push(format!("{path}: schema is not an object"));
            return Seen::All;
        };
        if let Some(name) = s.get("$ref").and_then(Value::as_str) {
            return match self.root.pointer(&format!("/schemas/{}", escape(name))) {
                Some(target) => self.eval(target, v, path, errs),
                None => {
                    errs.push(format!("{path}: $ref {name} is not in the extract"));
                    Seen::All
                }
            };
        }
        if v.is_null() {
            if s.get("nullable") == Some(&Value::Bool(true)) || !s.contains_key("type") {
                return Seen::All;
            }
            errs.push(format!("{path}: null, and the schema is not nullable"));
            return Seen::All;
        }
        let mut seen = Seen::none();
        let free_form = s.get("type") == Some(&Value::from("object"))
            && !["properties", "additionalProperties", "allOf", "anyOf", "oneOf"]
                .iter()
                .any(|k| s.contains_key(*k));
        if free_form {
            seen = Seen::All;
        }
        for (key, arg) in s {
            match key.as_str() {
                "type" => type_check(arg, v, path, errs),
                "nullable" => {}
                "enum" => {
                    if !arg.as_array().is_some_and(|vals| vals.contains(v)) {
                        errs.push(format!("{path}: {v} is not one of {arg}"));
                    }
                }
                "required" => {
                    if let Some(obj) = v.as_object() {
                        for name in arg.as_array().into_iter().flatten().filter_map(Value::as_str) {
                            if !obj.contains_key(name) {
                                errs.push(format!("{path}.{name}: required, missing"));
                            }
                        }
                    }
                }
                "properties" => {
                    if let Some(obj) = v.as_object() {
                        let mut named = BTreeSet::new();
                        for (name, sub) in arg.as_object().into_iter().flatten() {
                            named.insert(name.clone());
                            if let Some(value) = obj.get(name) {
                                let at = format!("{path}.{name}");
                                if sub.get("writeOnly") == Some(&Value::Bool(true)) {
                                    errs.push(format!("{at}: write-only, yet in a response"));
                                }
                                self.closed(sub, value, &at, errs);
                            }
                        }
                        seen.add(Seen::Some(named));
                    }
                }
                "additionalProperties" => {
                    if let Some(obj) = v.as_object() {
                        match arg {
                            Value::Bool(true) => seen.add(Seen::All),
                            Value::Bool(false) => {}
                            sub => {
                                let named: BTreeSet<&String> = s
                                    .get("properties")
                                    .and_then(Value::as_object)
                                    .map(|p| p.keys().collect())
                                    .unwrap_or_default();
                                for (name, value) in obj {
                                    if !named.contains(name) {
                                        self.closed(sub, value, &format!("{path}.{name}"), errs);
                                    }
                                }
                                seen.add(Seen::All);
                            }
                        }
                    }
                }
                "items" => {
                    for (i, item) in v.as_array().into_iter().flatten().enumerate() {
                        self.closed(arg, item, &format!("{path}[{i}]"), errs);
                    }
                }
                "allOf" => {
                    for sub in arg.as_array().into_iter().flatten() {
                        let got = self.eval(sub, v, path, errs);
                        seen.add(got);
                    }
                }
                "anyOf" | "oneOf" => {
                    let mut passed = 0;
                    let mut why = Vec::new();
                    for (i, sub) in arg.as_array().into_iter().flatten().enumerate() {
                        let mut branch = Vec::new();
                        let got = self.eval(sub, v, path, &mut branch);
                        if branch.is_empty() {
                            passed += 1;
                            seen.add(got);
                        } else {
                            why.push(format!("branch {i}: {}", branch.join("; ")));
                        }
                    }
                    if passed == 0 {
                        errs.push(format!("{path}: matches no {key} branch ({})", why.join(" | ")));
                    } else if key == "oneOf" && passed > 1 {
                        errs.push(format!("{path}: matches {passed} oneOf branches"));
                    }
                }
                "format" => format_check(arg.as_str().unwrap_or(""), v, path, errs),
                "pattern" => {
                    if let Some(text) = v.as_str() {
                        match regex::Regex::new(arg.as_str().unwrap_or("")) {
                            Ok(re) if re.is_match(text) => {}
                            Ok(_) => errs.push(format!("{path}: {text:?} does not match {arg}")),
                            Err(e) => errs.push(format!("{path}: pattern {arg}: {e}")),
                        }
                    }
                }
                "minimum" | "maximum" => {
                    if let (Some(n), Some(bound)) = (v.as_f64(), arg.as_f64()) {
                        let ok = if key == "minimum" { n >= bound } else { n <= bound };
                        if !ok {
                            errs.push(format!("{path}: {n} is beyond {key} {bound}"));
                        }
                    }
                }
                "minItems" | "maxItems" | "minLength" | "maxLength" => {
                    let len = match key.as_str() {
                        "minItems" | "maxItems" => v.as_array().map(Vec::len),
                        _ => v.as_str().map(|t| t.chars().count()),
                    };
                    if let (Some(len), Some(bound)) = (len, arg.as_u64()) {
                        let ok = if key.starts_with("min") {
                            len as u64 >= bound
                        } else {
                            len as u64 <= bound
                        };
                        if !ok {
                            errs.push(format!("{path}: length {len} is beyond {key} {bound}"));
                        }
                    }
                }
                // Judged by the parent's `properties`, which sees the value's name.
                "writeOnly" => {}
                other => errs.push(format!("{path}: schema keyword `{other}` is not supported")),
            }
        }
        seen
    }
}

/// A JSON pointer segment.
fn escape(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

fn type_check(t: &Value, v: &Value, path: &str, errs: &mut Vec<String>) {
    let ok = match t.as_str() {
        Some("object") => v.is_object(),
        Some("array") => v.is_array(),
        Some("string") => v.is_string(),
        Some("boolean") => v.is_boolean(),
        Some("integer") => v.is_i64() || v.is_u64(),
        Some("number") => v.is_number(),
        _ => {
            errs.push(format!("{path}: type {t} is not supported"));
            return;
        }
    };
    if !ok {
        errs.push(format!("{path}: {v} is not of type {t}"));
    }
}

/// The formats the document uses on response fields; another is an error.
fn format_check(format: &str, v: &Value, path: &str, errs: &mut Vec<String>) {
    use base64::Engine as _;
    let Some(text) = v.as_str() else { return };
    let ok = match format {
        "uuid" => {
            let groups: Vec<&str> = text.split('-').collect();
            groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
                && groups.iter().all(|g| g.chars().all(|c| c.is_ascii_hexdigit()))
        }
        "date-time" => {
            time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
                .is_ok()
        }
        "byte" => base64::engine::general_purpose::STANDARD.decode(text).is_ok(),
        "uri" => reqwest::Url::parse(text).is_ok(),
        "email" => text.split_once('@').is_some_and(|(a, b)| !a.is_empty() && b.contains('.')),
        "cidr" => text.split_once('/').is_some_and(|(ip, bits)| {
            ip.parse::<std::net::IpAddr>().is_ok() && bits.parse::<u8>().is_ok_and(|b| b <= 128)
        }),
        other => {
            errs.push(format!("{path}: format `{other}` is not supported"));
            return;
        }
    };
    if !ok {
        errs.push(format!("{path}: {text:?} is not a {format}"));
    }
}
