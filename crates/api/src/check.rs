//! Holds a parsed input to the constraints its JSON Schema states (lengths, patterns,
//! ranges, item counts, map keys and their count): the very schema the reference docs and
//! OpenAPI print.
//!
//! Invariant: a constraint that is documented is enforced, because both come from one
//! schema, derived from the types. The walk runs after serde accepted the body, so shapes
//! and types are already right and only the documented limits remain to check here; every
//! violation is reported with its JSON path, in document order.

use std::collections::HashMap;

use bc_domain::FieldViolation;
use regex::Regex;
use serde_json::{Map, Value};

use crate::body::push_key;

/// A compiled input schema: the schema and its patterns, compiled once at startup.
#[derive(Debug, Clone)]
pub struct Checker {
    schema: Value,
    patterns: HashMap<String, Regex>,
}

impl Checker {
    /// Compiles every `pattern` (and `patternProperties` key) of `schema`.
    ///
    /// # Panics
    ///
    /// When a pattern is not a valid regular expression: a bug in a type's schema, found
    /// by the registry test at the latest.
    pub fn new(schema: Value) -> Self {
        let mut patterns = HashMap::new();
        collect_patterns(&schema, &mut patterns);
        Self { schema, patterns }
    }

    /// The schema.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Every documented constraint `value` violates.
    pub fn violations(&self, value: &Value) -> Vec<FieldViolation> {
        let mut out = Vec::new();
        self.walk(&self.schema, value, &mut String::new(), &mut out);
        out
    }

    fn walk(
        &self,
        schema: &Value,
        value: &Value,
        path: &mut String,
        out: &mut Vec<FieldViolation>,
    ) {
        let Some(schema) = schema.as_object() else { return };
        // A union of shapes (an enum's variants, `T` or `null`) says which schema the value
        // is held to. Beside an object's own `properties`, a `oneOf` states a rule across
        // them (exactly one of `count`, `autoScale`) for the document's readers: the
        // input's own cross-field validation enforces it, naming the field in its words.
        let union = schema.get("anyOf").or_else(|| schema.get("oneOf"));
        if let Some(branches) = union.filter(|_| !schema.contains_key("properties")) {
            if let Some(branch) = pick_branch(branches, value) {
                self.walk(branch, value, path, out);
            }
            return;
        }
        match value {
            Value::String(s) => self.check_string(schema, s, path, out),
            Value::Number(n) => check_number(schema, n, path, out),
            Value::Array(items) => self.check_array(schema, items, path, out),
            Value::Object(map) => self.check_object(schema, map, path, out),
            Value::Bool(_) | Value::Null => {}
        }
    }

    fn check_string(
        &self,
        schema: &Map<String, Value>,
        s: &str,
        path: &str,
        out: &mut Vec<FieldViolation>,
    ) {
        let len = s.chars().count() as u64;
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && len > max
        {
            out.push(FieldViolation::new(
                path,
                format!("must be at most {max} characters, not {len}"),
            ));
            return;
        }
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && len < min
        {
            out.push(FieldViolation::new(path, format!("must be at least {min} characters")));
            return;
        }
        if let Some(p) = schema.get("pattern").and_then(Value::as_str)
            && !self.patterns.get(p).is_some_and(|re| re.is_match(s))
        {
            out.push(FieldViolation::new(path, format!("must match {p}")));
        }
    }

    fn check_array(
        &self,
        schema: &Map<String, Value>,
        items: &[Value],
        path: &mut String,
        out: &mut Vec<FieldViolation>,
    ) {
        let n = items.len() as u64;
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && n > max
        {
            out.push(FieldViolation::new(
                path.as_str(),
                format!("must have at most {max} items, not {n}"),
            ));
        }
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && n < min
        {
            out.push(FieldViolation::new(path.as_str(), format!("must have at least {min} items")));
        }
        if let Some(item_schema) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                self.walk(item_schema, item, path, out);
                path.truncate(len);
            }
        }
    }

    fn check_object(
        &self,
        schema: &Map<String, Value>,
        map: &Map<String, Value>,
        path: &mut String,
        out: &mut Vec<FieldViolation>,
    ) {
        let n = map.len() as u64;
        if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
            && n > max
        {
            out.push(FieldViolation::new(
                path.as_str(),
                format!("must have at most {max} keys, not {n}"),
            ));
        }
        if let Some(min) = schema.get("minProperties").and_then(Value::as_u64)
            && n < min
        {
            out.push(FieldViolation::new(path.as_str(), format!("must have at least {min} keys")));
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        let pattern_props = schema.get("patternProperties").and_then(Value::as_object);
        for (key, value) in map {
            let len = path.len();
            push_key(path, key);
            if let Some(prop) = properties.and_then(|p| p.get(key)) {
                self.walk(prop, value, path, out);
            } else if let Some(pattern_props) = pattern_props {
                // A map with constrained keys (label keys): the key is checked like a value.
                match pattern_props
                    .iter()
                    .find(|(p, _)| self.patterns.get(*p).is_some_and(|re| re.is_match(key)))
                {
                    Some((_, value_schema)) => self.walk(value_schema, value, path, out),
                    None => {
                        let rules = pattern_props.keys().cloned().collect::<Vec<_>>().join(" or ");
                        out.push(FieldViolation::new(
                            path.as_str(),
                            format!("key must match {rules}"),
                        ));
                    }
                }
            } else if let Some(additional) = schema.get("additionalProperties")
                && additional.is_object()
            {
                self.walk(additional, value, path, out);
            }
            path.truncate(len);
        }
    }
}

/// The branch of an `anyOf`/`oneOf` that describes `value`: `null` for null, the object
/// branch whose required key is present (serde's externally tagged enums), else the first
/// branch of the value's JSON type.
fn pick_branch<'a>(branches: &'a Value, value: &Value) -> Option<&'a Value> {
    let branches = branches.as_array()?;
    if let Value::Object(map) = value {
        let tagged = branches.iter().find(|b| {
            b.get("required").and_then(Value::as_array).is_some_and(|r| {
                !r.is_empty() && r.iter().all(|k| k.as_str().is_some_and(|k| map.contains_key(k)))
            })
        });
        if tagged.is_some() {
            return tagged;
        }
    }
    branches.iter().find(|b| type_admits(b, value))
}

/// Whether a schema's `type` (a name or a list of names) admits `value`.
fn type_admits(schema: &Value, value: &Value) -> bool {
    let name = match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_u64() || n.is_i64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let fits = |t: &str| t == name || (t == "number" && name == "integer");
    match schema.get("type") {
        Some(Value::String(t)) => fits(t),
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).any(fits),
        // No type: a nested anyOf/oneOf or an unconstrained schema.
        _ => true,
    }
}

fn check_number(
    schema: &Map<String, Value>,
    n: &serde_json::Number,
    path: &str,
    out: &mut Vec<FieldViolation>,
) {
    let min = schema.get("minimum").and_then(Value::as_number);
    let max = schema.get("maximum").and_then(Value::as_number);
    let below = min.is_some_and(|m| compare(n, m) == Some(std::cmp::Ordering::Less));
    let above = max.is_some_and(|m| compare(n, m) == Some(std::cmp::Ordering::Greater));
    if below || above {
        let range = match (min, max) {
            (Some(a), Some(b)) => format!("must be {a} to {b}"),
            (Some(a), None) => format!("must be at least {a}"),
            (None, Some(b)) => format!("must be at most {b}"),
            (None, None) => unreachable!("one bound was exceeded"),
        };
        out.push(FieldViolation::new(path, format!("{range}, not {n}")));
    }
}

/// Orders two JSON numbers exactly: as integers when both are (a bound of 2^63 − 1 and
/// a value of 2^63 are the same `f64`, but not the same number), else as floats.
fn compare(a: &serde_json::Number, b: &serde_json::Number) -> Option<std::cmp::Ordering> {
    let int =
        |n: &serde_json::Number| n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from));
    match (int(a), int(b)) {
        (Some(x), Some(y)) => Some(x.cmp(&y)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

/// Compiles every pattern of a schema tree (anchored as written).
fn collect_patterns(schema: &Value, out: &mut HashMap<String, Regex>) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map {
                if key == "pattern"
                    && let Some(p) = value.as_str()
                {
                    compile(p, out);
                }
                if key == "patternProperties"
                    && let Some(props) = value.as_object()
                {
                    for p in props.keys() {
                        compile(p, out);
                    }
                }
                collect_patterns(value, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_patterns(v, out)),
        _ => {}
    }
}

fn compile(pattern: &str, out: &mut HashMap<String, Regex>) {
    if !out.contains_key(pattern) {
        let re = Regex::new(pattern)
            .unwrap_or_else(|e| panic!("schema pattern {pattern:?} does not compile: {e}"));
        out.insert(pattern.to_owned(), re);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn checker() -> Checker {
        Checker::new(json!({
            "type": "object",
            "properties": {
                "name": { "type": "string", "maxLength": 5, "pattern": "^[a-z]+$" },
                "count": { "type": ["integer", "null"], "minimum": 1, "maximum": 9 },
                "items": { "type": "array", "maxItems": 2, "items": { "type": "integer", "minimum": 0 } },
                "labels": { "type": "object", "maxProperties": 2, "patternProperties": { "^[a-z]+$": { "type": "string", "maxLength": 2 } } },
                "seq": { "type": "integer", "minimum": 0, "maximum": 9223372036854775807u64 },
                "mode": { "oneOf": [
                    { "type": "object", "properties": { "a": { "type": "integer", "maximum": 1 } }, "required": ["a"] },
                    { "type": "object", "properties": { "b": { "type": "string", "pattern": "^b$" } }, "required": ["b"] }
                ] },
                "opt": { "anyOf": [ { "type": "string", "pattern": "^x$" }, { "type": "null" } ] }
            }
        }))
    }

    fn fields(value: Value) -> Vec<String> {
        checker().violations(&value).into_iter().map(|v| v.field).collect()
    }

    #[test]
    fn finds_every_documented_violation_with_its_path() {
        assert!(fields(json!({"name":"abc","count":3,"items":[1],"labels":{"k":"v"},"mode":{"b":"b"},"opt":null})).is_empty());
        assert_eq!(fields(json!({"name":"abcdef"})), ["name"]);
        assert_eq!(fields(json!({"name":"AB"})), ["name"]);
        assert_eq!(fields(json!({"count":0})), ["count"]);
        assert_eq!(fields(json!({"count":10})), ["count"]);
        assert!(fields(json!({"count":null})).is_empty());
        assert_eq!(fields(json!({"items":[1,-1,2]})), ["items", "items[1]"]);
        assert_eq!(
            fields(json!({"labels":{"K-1":"v","ok":"vvv"}})),
            [r#"labels["K-1"]"#, "labels.ok"]
        );
        assert_eq!(fields(json!({"mode":{"a":2}})), ["mode.a"]);
        assert_eq!(fields(json!({"mode":{"b":"c"}})), ["mode.b"]);
        assert_eq!(fields(json!({"opt":"y"})), ["opt"]);
        let v = checker().violations(&json!({"count": 10}));
        assert_eq!(v[0].message, "must be 1 to 9, not 10");
        assert_eq!(fields(json!({"labels":{"a":"v","b":"v","c":"v"}})), ["labels"]);
        // 2^63 is one past the bound, though both are the same f64.
        assert!(fields(json!({"seq": 9223372036854775807u64})).is_empty());
        assert_eq!(fields(json!({"seq": 9223372036854775808u64})), ["seq"]);
    }
}
