//! The protobuf bodies kubectl's typed commands send (`kubectl create namespace`,
//! `create configmap`, `create secret generic`, `create serviceaccount`): the
//! `k8s\0`-prefixed `runtime.Unknown` envelope and, inside it, the fields of those kinds
//! (numbered as in `k8s.io/api/core/v1/generated.proto`), turned into the JSON object
//! every other write takes.
//!
//! Invariant: only the kinds and fields listed here are read; any other kind is refused
//! (415, so the caller knows to send JSON), and a body that does not parse is an error,
//! never a partial object.

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::Resource;

/// One field of a protobuf message.
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

fn varint(buf: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut out = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*at).ok_or("truncated varint")?;
        *at += 1;
        out |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(out);
        }
    }
    Err("varint too long".into())
}

/// The fields of a message, in order.
fn fields(buf: &[u8]) -> Result<Vec<(u64, Wire<'_>)>, String> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < buf.len() {
        let key = varint(buf, &mut at)?;
        let (field, wire) = (key >> 3, key & 7);
        let value = match wire {
            0 => Wire::Varint(varint(buf, &mut at)?),
            1 | 5 => {
                at += if wire == 1 { 8 } else { 4 };
                Wire::Fixed
            }
            2 => {
                let len = usize::try_from(varint(buf, &mut at)?).map_err(|_| "length too large")?;
                let end =
                    at.checked_add(len).filter(|e| *e <= buf.len()).ok_or("truncated field")?;
                let bytes = &buf[at..end];
                at = end;
                Wire::Bytes(bytes)
            }
            other => return Err(format!("unsupported wire type {other}")),
        };
        out.push((field, value));
    }
    if at > buf.len() {
        return Err("truncated field".into());
    }
    Ok(out)
}

fn text(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|_| "a string field is not UTF-8".to_owned())
}

/// Sets `key` to the string `b` unless it is empty: Go's generated marshallers write a
/// non-pointer string field even when it is `""`, and the server decodes that as the zero
/// value, which JSON (`omitempty`) shows as absent — so defaults such as a Secret's
/// `type: Opaque` still apply.
fn put_text(m: &mut Map<String, Value>, key: &str, b: &[u8]) -> Result<(), String> {
    if !b.is_empty() {
        m.insert(key.to_owned(), json!(text(b)?));
    }
    Ok(())
}

/// A `map<string, string>` (or `map<string, bytes>`, base64-encoded) entry.
fn entry(b: &[u8], bytes: bool) -> Result<(String, Value), String> {
    let (mut k, mut v) = (String::new(), Value::String(String::new()));
    for (f, w) in fields(b)? {
        match (f, w) {
            (1, Wire::Bytes(x)) => k = text(x)?,
            (2, Wire::Bytes(x)) if bytes => {
                v = json!(base64::engine::general_purpose::STANDARD.encode(x));
            }
            (2, Wire::Bytes(x)) => v = json!(text(x)?),
            _ => {}
        }
    }
    Ok((k, v))
}

fn object_meta(b: &[u8]) -> Result<Value, String> {
    let mut m = Map::new();
    let (mut labels, mut annotations, mut finalizers) = (Map::new(), Map::new(), Vec::new());
    for (f, w) in fields(b)? {
        let Wire::Bytes(x) = w else { continue };
        match f {
            1 => put_text(&mut m, "name", x)?,
            2 => put_text(&mut m, "generateName", x)?,
            3 => put_text(&mut m, "namespace", x)?,
            11 => {
                let (k, v) = entry(x, false)?;
                labels.insert(k, v);
            }
            12 => {
                let (k, v) = entry(x, false)?;
                annotations.insert(k, v);
            }
            14 => finalizers.push(json!(text(x)?)),
            _ => {}
        }
    }
    if !labels.is_empty() {
        m.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        m.insert("annotations".into(), Value::Object(annotations));
    }
    if !finalizers.is_empty() {
        m.insert("finalizers".into(), Value::Array(finalizers));
    }
    Ok(Value::Object(m))
}

/// The object a protobuf body of `resource` carries, as JSON; `None` when the kind is
/// not one decoded here.
pub fn decode(resource: Resource, body: &[u8]) -> Option<Result<Value, String>> {
    if !matches!(
        resource,
        Resource::Namespace | Resource::ConfigMap | Resource::Secret | Resource::ServiceAccount
    ) {
        return None;
    }
    Some(decode_known(resource, body))
}

fn decode_known(resource: Resource, body: &[u8]) -> Result<Value, String> {
    let inner = body.strip_prefix(b"k8s\0").ok_or("no k8s protobuf envelope")?;
    let mut raw = None;
    for (f, w) in fields(inner)? {
        if let (2, Wire::Bytes(x)) = (f, w) {
            raw = Some(x);
        }
    }
    let raw = raw.ok_or("the envelope carries no object")?;
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!(resource.api_version()));
    out.insert("kind".into(), json!(resource.kind()));
    let (mut data, mut binary, mut string_data) = (Map::new(), Map::new(), Map::new());
    let list = |out: &mut Map<String, Value>, key: &str, v: Value| {
        if let Value::Array(a) =
            out.entry(key.to_owned()).or_insert_with(|| Value::Array(Vec::new()))
        {
            a.push(v);
        }
    };
    for (f, w) in fields(raw)? {
        match (resource, f, w) {
            (_, 1, Wire::Bytes(x)) => drop(out.insert("metadata".into(), object_meta(x)?)),
            (Resource::Namespace, 2, Wire::Bytes(x)) => {
                let finalizers: Result<Vec<Value>, String> = fields(x)?
                    .into_iter()
                    .filter_map(|(f, w)| match (f, w) {
                        (1, Wire::Bytes(s)) => Some(text(s).map(Value::String)),
                        _ => None,
                    })
                    .collect();
                out.insert("spec".into(), json!({"finalizers": finalizers?}));
            }
            (Resource::ConfigMap, 2, Wire::Bytes(x)) => {
                let (k, v) = entry(x, false)?;
                data.insert(k, v);
            }
            (Resource::ConfigMap, 3, Wire::Bytes(x)) => {
                let (k, v) = entry(x, true)?;
                binary.insert(k, v);
            }
            (Resource::ConfigMap, 4, Wire::Varint(b)) | (Resource::Secret, 5, Wire::Varint(b)) => {
                out.insert("immutable".into(), json!(b != 0));
            }
            (Resource::Secret, 2, Wire::Bytes(x)) => {
                let (k, v) = entry(x, true)?;
                data.insert(k, v);
            }
            (Resource::Secret, 3, Wire::Bytes(x)) => put_text(&mut out, "type", x)?,
            (Resource::Secret, 4, Wire::Bytes(x)) => {
                let (k, v) = entry(x, false)?;
                string_data.insert(k, v);
            }
            (Resource::ServiceAccount, 3, Wire::Bytes(x)) => {
                let mut name = String::new();
                for (f, w) in fields(x)? {
                    if let (1, Wire::Bytes(s)) = (f, w) {
                        name = text(s)?;
                    }
                }
                list(&mut out, "imagePullSecrets", json!({"name": name}));
            }
            (Resource::ServiceAccount, 4, Wire::Varint(b)) => {
                out.insert("automountServiceAccountToken".into(), json!(b != 0));
            }
            _ => {}
        }
    }
    for (key, m) in [("data", data), ("binaryData", binary), ("stringData", string_data)] {
        if !m.is_empty() {
            out.insert(key.into(), Value::Object(m));
        }
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(n: u64, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![((n << 3) | 2) as u8, payload.len() as u8];
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn a_namespace_with_labels() {
        let label = [field(1, b"team"), field(2, b"x")].concat();
        let meta = [field(1, b"demo"), field(11, &label)].concat();
        let ns = field(1, &meta);
        let unknown =
            [field(1, &[field(1, b"v1"), field(2, b"Namespace")].concat()), field(2, &ns)].concat();
        let body = [b"k8s\0".as_slice(), &unknown].concat();
        let v = decode(Resource::Namespace, &body).unwrap().unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo", "labels": {"team": "x"}}})
        );
        assert!(decode(Resource::DaemonSet, &body).is_none());
        assert!(decode(Resource::Namespace, b"k8s\0\x12\x09short").unwrap().is_err());
    }

    /// Go writes `type: ""` and `namespace: ""` on the wire; they decode as absent.
    #[test]
    fn empty_strings_are_absent() {
        let meta = [field(1, b"s"), field(3, b"")].concat();
        let entry = [field(1, b"k"), field(2, b"\x00\xff")].concat();
        let secret = [field(1, &meta), field(2, &entry), field(3, b"")].concat();
        let body = [b"k8s\0".as_slice(), &field(2, &secret)].concat();
        let v = decode(Resource::Secret, &body).unwrap().unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "AP8="}})
        );
    }
}
