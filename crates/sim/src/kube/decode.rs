//! Decoding a body as the apiserver decodes it into its Go types: through the
//! `k8s-openapi` type of the kind, so a value of the wrong type is a 400 BadRequest and a
//! field the type does not have is unknown — refused under `fieldValidation=Strict`
//! (what kubectl sends), reported as a warning under `Warn` (the default), and dropped
//! from the stored object either way, as the real server drops it.
//!
//! What is kept is what the Go type holds, as `encoding/json` would write it without
//! the fields that were not given (`bc_domain::kube_wire::normalise`): an empty
//! `omitempty` field (`tolerations: []`, `value: ""`) is gone, a quantity is in its
//! canonical form, a quantity or a time that Go cannot parse is a 400 BadRequest.
//!
//! Invariant: decoding never adds a field (the typed round trip only finds the unknown
//! ones; the object kept is the body minus those, normalised), so a missing required
//! field stays missing for validation to report as `Required value`.

use bc_domain::kube_wire;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{KubeError, Resource};

/// The `fieldValidation` query parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Unknown fields are dropped silently.
    Ignore,
    /// Unknown fields are dropped with a `Warning` header (the server default).
    #[default]
    Warn,
    /// Unknown fields fail the request (400).
    Strict,
}

impl FieldValidation {
    /// Parses the query value (`Strict`, `Warn`, `Ignore`; absent = `Warn`).
    pub fn parse(v: Option<&str>) -> Result<Self, KubeError> {
        match v {
            None | Some("") | Some("Warn") => Ok(Self::Warn),
            Some("Strict") => Ok(Self::Strict),
            Some("Ignore") => Ok(Self::Ignore),
            Some(other) => Err(KubeError::bad_request(format!(
                "fieldValidation {other:?} is invalid: supported values: \"Ignore\", \"Strict\", \"Warn\""
            ))),
        }
    }
}

/// A decoded body: the object without its unknown fields, and the warnings to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// The object.
    pub object: Value,
    /// `unknown field "spec.foo"` warnings (empty under `Ignore`).
    pub warnings: Vec<String>,
}

/// Decodes `body` as an object of `resource`.
pub fn decode(
    resource: Resource,
    body: Value,
    mode: FieldValidation,
) -> Result<Decoded, KubeError> {
    use k8s_openapi::api::{apps::v1 as apps, core::v1 as core};
    let typed = match resource {
        Resource::Namespace => round_trip::<core::Namespace>(&body),
        Resource::Secret => round_trip::<core::Secret>(&body),
        Resource::ServiceAccount => round_trip::<core::ServiceAccount>(&body),
        Resource::Node => round_trip::<core::Node>(&body),
        Resource::Pod => round_trip::<core::Pod>(&body),
        Resource::ConfigMap => round_trip::<core::ConfigMap>(&body),
        Resource::Service => round_trip::<core::Service>(&body),
        Resource::Event => round_trip::<core::Event>(&body),
        Resource::DaemonSet => round_trip::<apps::DaemonSet>(&body),
        Resource::Deployment => round_trip::<apps::Deployment>(&body),
        Resource::PersistentVolume => round_trip::<core::PersistentVolume>(&body),
    };
    known_fields_only(resource.kind(), resource.version(), Some(resource.wire()), body, typed, mode)
}

/// [`decode`] through the `k8s-openapi` type `T` of a kind the simulator does not serve
/// (a PodDisruptionBudget, a Job), so a manifest of it is checked exactly as a served
/// kind is: a wrong type is a 400, an unknown field is refused under `Strict`. The field
/// table covers served kinds only, so the object is not normalised by it.
pub fn decode_as<T>(body: Value, mode: FieldValidation) -> Result<Decoded, KubeError>
where
    T: DeserializeOwned + Serialize + k8s_openapi::Resource,
{
    let typed = round_trip::<T>(&body);
    known_fields_only(T::KIND, T::VERSION, None, body, typed, mode)
}

/// The rest of [`decode`] once the body went through its type (`typed`): the unknown
/// fields refused, warned about or dropped as `mode` says, and the object normalised by
/// the Go field rules of `wire` (what the Go type would hold), when given.
fn known_fields_only(
    kind: &str,
    version: &str,
    wire: Option<kube_wire::Ty>,
    body: Value,
    typed: Result<Value, String>,
    mode: FieldValidation,
) -> Result<Decoded, KubeError> {
    let cannot = |message: &str| {
        KubeError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {message}"
        ))
    };
    let known = typed.map_err(|e| cannot(&e))?;
    let mut unknown = Vec::new();
    find_unknown(&body, &known, &mut String::new(), &mut unknown);
    let messages: Vec<String> = unknown.iter().map(|p| format!("unknown field \"{p}\"")).collect();
    if mode == FieldValidation::Strict && !messages.is_empty() {
        let message = match messages.as_slice() {
            [one] => format!("strict decoding error: {one}"),
            many => format!("strict decoding error: {}", many.join(", ")),
        };
        return Err(KubeError::bad_request(message));
    }
    let mut object = body;
    if !unknown.is_empty() {
        drop_unknown(&mut object, &known);
    }
    if let Some(wire) = wire
        && let Some(p) = kube_wire::normalise(wire, &mut object).first()
    {
        return Err(cannot(&p.message));
    }
    let warnings = if mode == FieldValidation::Warn { messages } else { Vec::new() };
    Ok(Decoded { object, warnings })
}

fn round_trip<T: DeserializeOwned + Serialize>(body: &Value) -> Result<Value, String> {
    let typed: T = serde_path_to_error::deserialize(body).map_err(|e| {
        let at = e.path().to_string();
        if at == "." { e.inner().to_string() } else { format!("{at}: {}", e.inner()) }
    })?;
    serde_json::to_value(&typed).map_err(|e| e.to_string())
}

/// Paths (`spec.template.spec.containers[0].imagee`) present in `body` — with a value
/// other than `null` — that the typed round trip `known` does not have.
fn find_unknown(body: &Value, known: &Value, at: &mut String, out: &mut Vec<String>) {
    match (body, known) {
        (Value::Object(b), Value::Object(k)) => {
            for (key, v) in b {
                if v.is_null() {
                    continue;
                }
                let len = at.len();
                if !at.is_empty() {
                    at.push('.');
                }
                at.push_str(key);
                match k.get(key) {
                    Some(kv) => find_unknown(v, kv, at, out),
                    None => out.push(at.clone()),
                }
                at.truncate(len);
            }
        }
        (Value::Array(b), Value::Array(k)) => {
            for (i, (bv, kv)) in b.iter().zip(k).enumerate() {
                let len = at.len();
                at.push_str(&format!("[{i}]"));
                find_unknown(bv, kv, at, out);
                at.truncate(len);
            }
        }
        _ => {}
    }
}

fn drop_unknown(body: &mut Value, known: &Value) {
    match (body, known) {
        (Value::Object(b), Value::Object(k)) => {
            b.retain(|key, v| v.is_null() || k.contains_key(key));
            for (key, v) in b.iter_mut() {
                if let Some(kv) = k.get(key) {
                    drop_unknown(v, kv);
                }
            }
        }
        (Value::Array(b), Value::Array(k)) => {
            for (bv, kv) in b.iter_mut().zip(k) {
                drop_unknown(bv, kv);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ds(extra: Value) -> Value {
        let mut v = json!({"metadata":{"name":"x"},"spec":{"template":{"spec":{"containers":[{"name":"c","image":"i"}]}}}});
        super::super::patch::merge_patch(&mut v, &extra);
        v
    }

    #[test]
    fn unknown_fields_by_mode_and_type_errors() {
        let body = ds(
            json!({"spec":{"bogus":1,"template":{"spec":{"containers":[{"name":"c","image":"i","imagee":"j"}]}}}}),
        );
        let e = decode(Resource::DaemonSet, body.clone(), FieldValidation::Strict).unwrap_err();
        assert_eq!(e.code, 400);
        assert!(e.message.contains("unknown field \"spec.bogus\""), "{}", e.message);
        assert!(e.message.contains("spec.template.spec.containers[0].imagee"), "{}", e.message);
        let d = decode(Resource::DaemonSet, body, FieldValidation::Warn).unwrap();
        assert_eq!(d.warnings.len(), 2);
        assert!(d.object["spec"].get("bogus").is_none());
        assert_eq!(
            d.object["spec"]["template"]["spec"]["containers"][0],
            json!({"name":"c","image":"i"})
        );
        // Nothing is added: a missing selector stays missing.
        assert!(d.object["spec"].get("selector").is_none());
        let e = decode(
            Resource::Deployment,
            ds(json!({"spec":{"replicas":"3"}})),
            FieldValidation::Warn,
        )
        .unwrap_err();
        assert_eq!(e.code, 400);
        assert!(
            e.message.starts_with(
                "Deployment in version \"v1\" cannot be handled as a Deployment: spec.replicas"
            ),
            "{}",
            e.message
        );
    }

    /// What is kept is what the Go type holds: empty `omitempty` fields are gone, a
    /// quantity is canonical, and one Go cannot parse is a 400 as the apiserver's.
    #[test]
    fn what_is_kept_is_what_the_go_type_holds() {
        let body = ds(json!({"spec":{"template":{"spec":{"tolerations":[],"containers":[
            {"name":"c","image":"i","resources":{"limits":{"cpu":"0.25"}}}]}}}}));
        let d = decode(Resource::DaemonSet, body, FieldValidation::Strict).unwrap();
        let pod = &d.object["spec"]["template"]["spec"];
        assert!(pod.get("tolerations").is_none(), "{pod}");
        assert_eq!(pod["containers"][0]["resources"]["limits"]["cpu"], "250m");
        let bad = ds(json!({"spec":{"template":{"spec":{"containers":[
            {"name":"c","image":"i","resources":{"limits":{"memory":"1 Gi"}}}]}}}}));
        let e = decode(Resource::DaemonSet, bad, FieldValidation::Warn).unwrap_err();
        assert_eq!(e.code, 400);
        assert!(
            e.message.starts_with("DaemonSet in version \"v1\" cannot be handled as a DaemonSet: quantities must match"),
            "{}",
            e.message
        );
    }
}
