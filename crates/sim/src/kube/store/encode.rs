//! Objects as the Go types hold them: a request body checked and decoded, content and
//! status encoded as `encoding/json` writes them, the status a new object starts with,
//! and a stored object rendered back with its server metadata.
//!
//! Invariant: what is stored is what a real API server would answer, so every answer is
//! (`bc_domain::kube_wire`); `status` and server metadata never come from a body.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use bc_domain::kube_wire;
use serde_json::{Map, Value, json};

use super::types::{Key, SERVER_METADATA, Stored};
use crate::kube::error::KubeError;
use crate::kube::fields::{self};
use crate::kube::resource::Resource;
use crate::kube::{defaults, kube_time};

pub(super) fn obj(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    v.as_object_mut().expect("just made an object")
}

/// Lower-case letters and digits only (a generated name suffix).
pub(super) fn to_name_chars(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { 'x' })
        .collect()
}

pub(super) fn owner_uids(content: &Value) -> impl Iterator<Item = &str> {
    content
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("uid").and_then(Value::as_str))
}

/// The status the API server gives a new object (the registry strategies'
/// `PrepareForCreate`, which drop what the client sent): a Pod starts `Pending` with its
/// QoS class, a Namespace `Active` (`SetDefaults_NamespaceStatus`); every other kind with
/// a status starts with the zero one ([`encode_status`] writes it).
pub(super) fn initial_status(resource: Resource, content: &Value) -> Option<Value> {
    match resource {
        Resource::Pod => Some(json!({"phase": "Pending", "qosClass": qos_class(content)})),
        Resource::Namespace => Some(json!({"phase": "Active"})),
        // The PersistentVolume strategy's PrepareForCreate: `Pending` until the volume
        // controller looks at it.
        Resource::PersistentVolume => Some(json!({"phase": "Pending"})),
        _ => None,
    }
}

/// A pod's QoS class ("Configure Quality of Service for Pods"): `BestEffort` when no
/// container requests or limits CPU or memory, `Guaranteed` when every container limits
/// both and requests what it limits (a request left out defaults to the limit), else
/// `Burstable`.
pub(crate) fn qos_class(pod: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|l| pod.pointer(&format!("/spec/{l}")).and_then(Value::as_array))
        .flatten()
        .collect();
    let get = |c: &Value, kind: &str, r: &str| {
        c.pointer(&format!("/resources/{kind}/{r}")).filter(|v| !v.is_null()).cloned()
    };
    let any = containers.iter().any(|c| {
        ["requests", "limits"]
            .iter()
            .any(|k| ["cpu", "memory"].iter().any(|r| get(c, k, r).is_some()))
    });
    if !any {
        return "BestEffort";
    }
    let guaranteed = containers.iter().all(|c| {
        ["cpu", "memory"].iter().all(|r| match (get(c, "limits", r), get(c, "requests", r)) {
            (Some(l), Some(q)) => l == q,
            (Some(_), None) => true,
            _ => false,
        })
    });
    if guaranteed { "Guaranteed" } else { "Burstable" }
}

/// The content as the Go type holds it after defaulting, written as `encoding/json`
/// writes it (`kube_wire::encode`: empty `omitempty` fields gone, every other field
/// written), without what the store keeps apart: the server's metadata (rendered on
/// read) and `status`.
pub(super) fn encode_content(resource: Resource, content: &mut Value) {
    let problems = kube_wire::encode(resource.wire(), content);
    // Decoding refused what does not parse; defaults only write valid values.
    debug_assert!(problems.is_empty(), "{problems:?}");
    strip_server_metadata(content);
    if let Some(m) = content.as_object_mut() {
        for k in ["apiVersion", "kind", "status"] {
            m.remove(k);
        }
    }
}

/// A status, defaulted, as the Go type writes it; `None` for a kind without one (a kind
/// with one always has one: Go never leaves a struct out).
pub(super) fn encode_status(resource: Resource, status: Option<Value>) -> Option<Value> {
    let t = resource.status_wire()?;
    let mut status = status.unwrap_or_else(|| json!({}));
    defaults::status(resource, &mut status);
    let problems = kube_wire::encode(t, &mut status);
    debug_assert!(problems.is_empty(), "{problems:?}");
    Some(status)
}

pub(super) fn strip_server_metadata(content: &mut Value) {
    if let Some(m) = content.get_mut("metadata").and_then(Value::as_object_mut) {
        for f in SERVER_METADATA {
            m.remove(*f);
        }
    }
}

/// Whether applying `new` over `existing` changes nothing. An empty object sets no
/// field: over an existing object (someone else's labels, say) it is no change.
pub(super) fn same(existing: Option<&Value>, new: &Value) -> bool {
    match (existing, new) {
        (Some(Value::Object(_)), Value::Object(m)) if m.is_empty() => true,
        (e, n) => e == Some(n),
    }
}

/// Checks a body against the URL (kind, name, namespace) and strips what the server
/// manages: `apiVersion`, `kind` and `status` go, server metadata stays for the caller
/// (a replace reads its resourceVersion).
pub(super) fn check_body(
    resource: Resource,
    namespace: Option<&str>,
    name: Option<&str>,
    body: &Value,
) -> Result<Value, KubeError> {
    let Some(obj) = body.as_object() else {
        return Err(KubeError::bad_request("the body must be a JSON object"));
    };
    let mut obj = obj.clone();
    match obj.remove("apiVersion") {
        Some(Value::String(v)) if v == resource.api_version() => {}
        None => {}
        Some(v) => {
            return Err(KubeError::bad_request(format!(
                "the API version in the data ({}) does not match the expected API version ({})",
                v.as_str().unwrap_or_default(),
                resource.api_version()
            )));
        }
    }
    match obj.remove("kind") {
        Some(Value::String(k)) if k == resource.kind() => {}
        None => {}
        Some(k) => {
            return Err(KubeError::bad_request(format!(
                "the kind in the data ({}) does not match the expected kind ({})",
                k.as_str().unwrap_or_default(),
                resource.kind()
            )));
        }
    }
    obj.remove("status");
    if resource == Resource::Secret {
        check_secret(&mut obj)?;
        fold_string_data(&mut obj);
    }
    let mut metadata = match obj.remove("metadata") {
        Some(Value::Object(m)) => m,
        None | Some(Value::Null) => Map::new(),
        Some(_) => return Err(KubeError::bad_request("metadata must be an object")),
    };
    match (metadata.get("name"), name) {
        (Some(Value::String(n)), Some(url)) if n != url => {
            return Err(KubeError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({url})"
            )));
        }
        (None, Some(url)) => {
            metadata.insert("name".into(), json!(url));
        }
        _ => {}
    }
    match metadata.get("namespace") {
        Some(Value::String(n)) if resource.namespaced() && Some(n.as_str()) != namespace => {
            return Err(KubeError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        _ => {}
    }
    let mut out = Map::new();
    out.insert("metadata".into(), Value::Object(metadata));
    out.extend(obj);
    Ok(Value::Object(out))
}

/// Secret `data` values are base64 strings and `stringData` values strings; the
/// apiserver refuses anything else with 400 when decoding the body
/// (research/kube-wire.md gotcha 6: `data` is base64 both ways). Go's base64 decoder,
/// which decodes `[]byte` from JSON, skips `\r` and `\n`: a value wrapped over lines (as
/// `kubectl kustomize` writes long ones) is taken, and stored as the bytes it holds, so
/// it reads back unwrapped.
pub(super) fn check_secret(obj: &mut Map<String, Value>) -> Result<(), KubeError> {
    let bad = |why: String| {
        KubeError::bad_request(format!(
            "Secret in version \"v1\" cannot be handled as a Secret: {why}"
        ))
    };
    for (field, base64) in [("data", true), ("stringData", false)] {
        let map = match obj.get(field) {
            None | Some(Value::Null) => continue,
            Some(Value::Object(m)) => m,
            Some(_) => return Err(bad(format!("{field} must be an object"))),
        };
        let mut unwrapped = Vec::new();
        for (k, v) in map {
            let Some(text) = v.as_str() else {
                return Err(bad(format!("{field}.{k} must be a string")));
            };
            if !base64 {
                continue;
            }
            let joined: String = text.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
            let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(&joined) else {
                return Err(bad(format!("illegal base64 data in data.{k}")));
            };
            if joined.len() != text.len() {
                let canonical = base64::engine::general_purpose::STANDARD.encode(bytes);
                unwrapped.push((k.clone(), canonical));
            }
        }
        if let Some(Value::Object(data)) = obj.get_mut(field) {
            for (k, canonical) in unwrapped {
                data.insert(k, json!(canonical));
            }
        }
    }
    Ok(())
}

/// Secret `stringData` is write-only: the server folds it into base64 `data` as it
/// decodes the body (so whoever wrote `stringData.k` owns `data.k`).
pub(super) fn fold_string_data(obj: &mut Map<String, Value>) {
    let Some(Value::Object(sd)) = obj.remove("stringData") else { return };
    let data = obj.entry("data").or_insert_with(|| Value::Object(Map::new()));
    let data = self::obj(data);
    for (k, v) in sd {
        let text = match v {
            Value::String(s) => s,
            other => other.to_string(),
        };
        data.insert(k, json!(base64::engine::general_purpose::STANDARD.encode(text.as_bytes())));
    }
}

/// The labels of a rendered object.
pub(crate) fn labels_of(o: &Value) -> BTreeMap<String, String> {
    o.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter().filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned()))).collect()
        })
        .unwrap_or_default()
}

/// The object as the API shows it: type, metadata (with the server's), content, status.
pub(crate) fn render(resource: Resource, key: &Key, s: &Stored) -> Value {
    Value::clone(&rendered(resource, key, s))
}

/// A stored object as a read answers it, shared (made once per change of the object).
pub(crate) fn rendered(resource: Resource, key: &Key, s: &Stored) -> Arc<Value> {
    s.rendered.get_or_init(|| Arc::new(build(resource, key, s))).clone()
}

fn build(resource: Resource, key: &Key, s: &Stored) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!(resource.api_version()));
    out.insert("kind".into(), json!(resource.kind()));
    let mut meta = Map::new();
    meta.insert("name".into(), json!(key.2));
    if resource.namespaced() {
        meta.insert("namespace".into(), json!(key.1));
    }
    meta.insert("uid".into(), json!(s.uid));
    meta.insert("resourceVersion".into(), json!(s.resource_version.to_string()));
    if matches!(resource, Resource::DaemonSet | Resource::Deployment) {
        meta.insert("generation".into(), json!(s.generation));
    }
    meta.insert("creationTimestamp".into(), json!(kube_time(s.created)));
    if let Some(m) = s.content.get("metadata").and_then(Value::as_object) {
        for (k, v) in m {
            if k != "name" && k != "namespace" {
                meta.insert(k.clone(), v.clone());
            }
        }
    }
    let managed: Vec<Value> = s
        .managed
        .iter()
        .map(|m| {
            json!({
                "manager": m.manager,
                "operation": m.operation.as_str(),
                "apiVersion": resource.api_version(),
                "time": kube_time(m.time),
                "fieldsType": "FieldsV1",
                "fieldsV1": fields::fields_v1(&m.fields),
            })
        })
        .collect();
    if !managed.is_empty() {
        meta.insert("managedFields".into(), Value::Array(managed));
    }
    out.insert("metadata".into(), Value::Object(meta));
    if let Some(c) = s.content.as_object() {
        for (k, v) in c {
            if k != "metadata" {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    if let Some(st) = &s.status {
        out.insert("status".into(), st.clone());
    }
    Value::Object(out)
}
