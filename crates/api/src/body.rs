//! Reading a request body into a method's input: the 1 MiB limit, the minimum rate a
//! body must arrive at (SPEC §13), JSON syntax, the top-level object, duplicate keys, and
//! serde's own errors turned into `INVALID_ARGUMENT` naming the field by its JSON path.
//!
//! Invariant: every way a body can be wrong ends here as a 4xx with a JSON error; nothing
//! about the body can reach a handler unparsed, and nothing here panics on input. A key
//! repeated in one object is refused (naming it), never resolved by "the last one
//! wins": two readers of the same bytes (a proxy, an audit log, this API) must not see
//! two different requests.

use std::cell::RefCell;
use std::fmt;
use std::time::Duration;

use axum::body::{Body, Bytes};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde::de::{self, DeserializeOwned, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use tokio::time::Instant;

use crate::error::ApiError;

/// The largest body accepted: 1 MiB (SPEC §2).
pub const BODY_LIMIT: usize = 1024 * 1024;

/// The time any body has, whatever its size, before [`BODY_MIN_RATE`] applies.
pub const BODY_GRACE: Duration = Duration::from_secs(10);
/// The slowest a body may arrive after [`BODY_GRACE`], in bytes a second: by `t` seconds
/// into the body at least `(t − 10) × 4096` bytes must have come, so a 1 MiB body has
/// 266 s and a client trickling a byte now and then is cut off after 10 s.
pub const BODY_MIN_RATE: u64 = 4096;

/// The latest the next part of a body may arrive, `received` bytes of it having come
/// since `start`.
fn body_deadline(start: Instant, received: u64) -> Instant {
    start + BODY_GRACE + Duration::from_millis(received.saturating_mul(1000) / BODY_MIN_RATE)
}

/// Reads the whole body, refusing more than `limit` bytes with `PAYLOAD_TOO_LARGE` and a
/// body slower than [`BODY_MIN_RATE`] with `INVALID_ARGUMENT` (the connection is then
/// closed, its body unread).
///
/// A body whose `Content-Length` already says it is too large is refused before a byte
/// of it is read: a client that sent `Expect: 100-continue` then gets the 413 instead of
/// being told to send, and never sends the body — whereas a refusal after reading part of
/// it closes the connection with unread bytes, which resets it and can lose the answer.
pub(crate) async fn read_limited(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    if axum::body::HttpBody::size_hint(&body).lower() > limit as u64 {
        return Err(ApiError::too_large(limit));
    }
    let mut body = Limited::new(body, limit);
    let (start, mut read) = (Instant::now(), Vec::new());
    loop {
        let next = tokio::time::timeout_at(body_deadline(start, read.len() as u64), body.frame());
        match next.await {
            Err(_) => {
                return Err(ApiError::invalid_body(format!(
                    "the request body arrived too slowly (after {} s, at least {BODY_MIN_RATE} bytes a second): send it at once",
                    BODY_GRACE.as_secs()
                )));
            }
            Ok(None) => return Ok(Bytes::from(read)),
            Ok(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    read.extend_from_slice(data);
                }
            }
            Ok(Some(Err(e))) if e.downcast_ref::<LengthLimitError>().is_some() => {
                return Err(ApiError::too_large(limit));
            }
            Ok(Some(Err(_))) => {
                return Err(ApiError::invalid_body("the request body could not be read"));
            }
        }
    }
}

/// Parses a body as a JSON object (an empty body is not one).
pub(crate) fn parse_object(bytes: &[u8]) -> Result<Value, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::invalid_body("the body must be a JSON object, e.g. {}"));
    }
    let duplicate = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = StrictValue { path: String::new(), duplicate: &duplicate }
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v));
    let value = parsed.map_err(|e| match duplicate.take() {
        Some(field) => {
            ApiError::invalid(field, "this key appears twice in one object: send it once")
        }
        None => {
            ApiError::invalid_body(format!("the body is not valid JSON: {}", without_position(&e)))
        }
    })?;
    if !value.is_object() {
        return Err(ApiError::invalid_body("the body must be a JSON object, e.g. {}"));
    }
    Ok(value)
}

/// A JSON value that refuses a key repeated in one object, recording the repeated key's
/// JSON path in `duplicate` (serde's error cannot carry it). serde_json's own recursion
/// limit still applies: it is checked by the deserializer, not by the visitor.
struct StrictValue<'a> {
    path: String,
    duplicate: &'a RefCell<Option<String>>,
}

impl<'de> DeserializeSeed<'de> for StrictValue<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // As serde_json's own `Value` does: a float it parsed is finite.
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            let path = format!("{}[{}]", self.path, items.len());
            match seq.next_element_seed(StrictValue { path, duplicate: self.duplicate })? {
                Some(v) => items.push(v),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let mut path = self.path.clone();
            push_key(&mut path, &key);
            if out.contains_key(&key) {
                *self.duplicate.borrow_mut() = Some(path);
                return Err(de::Error::custom("duplicate key"));
            }
            let value = map.next_value_seed(StrictValue { path, duplicate: self.duplicate })?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// Deserializes a method's input from a parsed body; a failure names the field.
pub(crate) fn deserialize<I: DeserializeOwned>(value: &Value) -> Result<I, ApiError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let mut path = json_path(e.path());
        let message = scrub(&without_position(e.inner()));
        // serde reports a missing field at its parent: name the field itself.
        if let Some(name) =
            message.strip_prefix("missing field `").and_then(|m| m.strip_suffix('`'))
        {
            push_key(&mut path, name);
        }
        // And an unknown field is reported at the field (the path already ends with it).
        let field = if path.is_empty() { ".".to_owned() } else { path };
        ApiError::invalid(field, message)
    })
}

/// serde's message without the caller's strings it quotes (`invalid type: string "…"`,
/// `unknown variant `…``): a secret sent in the wrong place (a token where an object was
/// expected) must not come back in the error.
fn scrub(message: &str) -> String {
    let mut out = message.to_owned();
    if let Some(at) = out.find("string \"") {
        let rest = &out[at + "string \"".len()..];
        let mut escaped = false;
        let end = rest.char_indices().find_map(|(i, c)| {
            let closes = c == '"' && !escaped;
            escaped = c == '\\' && !escaped;
            closes.then_some(i)
        });
        let cut = at + "string \"".len() + end.map_or(rest.len(), |i| i + 1);
        out.replace_range(at..cut, "a string");
    }
    if let Some(at) = out.find("unknown variant `")
        && let Some(len) = out[at + "unknown variant `".len()..].find('`')
    {
        out.replace_range(at..at + "unknown variant `".len() + len + 1, "unknown variant");
    }
    out
}

/// serde_json's message without its ` at line 1 column 5` suffix (the caller has the
/// field path; the position in a one-line body says nothing more).
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_owned(),
        None => text,
    }
}

/// The JSON path of serde's error position: `policy.flavors[1].name`, with keys that are
/// not identifiers quoted: `labels["better-compute.dev/x"]`.
fn json_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => push_key(&mut out, key),
            Segment::Unknown => out.push_str("[?]"),
        }
    }
    out
}

/// Appends an object key to a JSON path.
pub(crate) fn push_key(path: &mut String, key: &str) {
    let ident = key.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ident {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
    } else {
        path.push('[');
        path.push_str(&serde_json::to_string(key).unwrap_or_default());
        path.push(']');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        pool_id: String,
        #[serde(default)]
        items: Vec<Inner>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        count: u32,
    }

    fn err(body: &str) -> ApiError {
        let value = match parse_object(body.as_bytes()) {
            Ok(v) => v,
            Err(e) => return e,
        };
        deserialize::<Outer>(&value).unwrap_err()
    }

    #[test]
    fn names_the_field_of_each_kind_of_error() {
        assert_eq!(
            err(r#"{"poolId":"p","items":[{"count":"x"}]}"#).field(),
            Some("items[0].count")
        );
        assert_eq!(err(r#"{"poolId":"p","bogus":1}"#).field(), Some("bogus"));
        assert_eq!(
            err(r#"{"poolId":"p","items":[{"count":1,"x-y":2}]}"#).field(),
            Some(r#"items[0]["x-y"]"#)
        );
        assert_eq!(err(r#"{"items":[]}"#).field(), Some("poolId"));
        assert_eq!(err(r#"{"poolId":null}"#).field(), Some("poolId"));
        let e = err(r#"{"poolId":1}"#);
        assert_eq!(e.message(), "invalid type: integer `1`, expected a string");
    }

    #[test]
    fn never_echoes_the_callers_strings() {
        let e = err(r#"{"poolId":"p","items":"dop_v1_se\"cret"}"#);
        assert_eq!(e.message(), "invalid type: a string, expected a sequence");
        assert_eq!(
            scrub("unknown variant `dop_v1_secret`, expected `digitalocean`"),
            "unknown variant, expected `digitalocean`"
        );
        assert_eq!(scrub("invalid type: string \"x"), "invalid type: a string");
    }

    #[test]
    fn refuses_what_is_not_an_object() {
        for body in ["", "  ", "[]", "3", "\"x\"", "{", "{\"a\":}", "nul"] {
            let e = err(body);
            assert_eq!(e.field(), None, "{body}");
            assert_eq!(e.code().status(), 400, "{body}");
        }
        assert!(err("{").message().starts_with("the body is not valid JSON"));
    }

    #[test]
    fn refuses_a_repeated_key_naming_it() {
        let e = parse_object(br#"{"poolId":"a","poolId":"b"}"#).unwrap_err();
        assert_eq!((e.code().status().as_u16(), e.field()), (400, Some("poolId")));
        let e = parse_object(br#"{"items":[{"count":1},{"count":1,"count":2}]}"#).unwrap_err();
        assert_eq!(e.field(), Some("items[1].count"));
        let e = parse_object(br#"{"a":{"x-y":1,"x-y":1}}"#).unwrap_err();
        assert_eq!(e.field(), Some(r#"a["x-y"]"#));
        // The same key in two objects is no repeat; values are read as serde_json reads them.
        let v = parse_object(br#"{"a":{"k":1},"b":{"k":-2.5,"n":null,"s":"\u00e9","t":[true]}}"#)
            .unwrap();
        assert_eq!(v, serde_json::json!({"a":{"k":1},"b":{"k":-2.5,"n":null,"s":"é","t":[true]}}));
        // The parser's depth limit still holds.
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert_eq!(parse_object(deep.as_bytes()).unwrap_err().field(), None);
    }

    #[tokio::test]
    async fn limits_the_body() {
        let big = Body::from(vec![b' '; BODY_LIMIT + 1]);
        assert_eq!(read_limited(big, BODY_LIMIT).await.unwrap_err().code().status(), 413);
        // Declared too large (its exact size known up front, as with `Content-Length`);
        // that it is refused before a byte is read is shown over HTTP by the API suite's
        // `hostile` test (no `100 Continue` comes).
        let declared = http_body_util::Full::new(Bytes::from(vec![b' '; BODY_LIMIT + 1]));
        let e = read_limited(Body::new(declared), BODY_LIMIT).await.unwrap_err();
        assert_eq!(e.code().status(), 413);
        let ok = Body::from(vec![b' '; BODY_LIMIT]);
        assert_eq!(read_limited(ok, BODY_LIMIT).await.unwrap().len(), BODY_LIMIT);
    }
}
