//! What a DaemonSet's pod on a node would start with: whether the DaemonSet schedules
//! onto the node (its `nodeSelector` and its tolerations of the node's taints) and the
//! bcd env its containers map from Secrets and the downward API. The controllers start
//! pods by these rules and the simulated bcd reads its env by them, so both agree.
//!
//! Invariant: pure — objects are read through the caller's lookup, never the store.

use std::collections::BTreeMap;

use base64::Engine as _;
use bc_domain::agent::{
    ENV_JOIN_TOKEN, ENV_NODE_NAME, ENV_SERVER_URL, ENV_SERVICE_ACCOUNT_TOKEN_FILE,
    SERVICE_ACCOUNT_TOKEN_FILE,
};
use bc_domain::policy::TaintEffect;
use serde_json::Value;

use super::resource::Resource;
use crate::SimNode;

/// The env a bcd pod would start with, resolved from its DaemonSet and Secrets.
pub(crate) struct PodEnv {
    pub(crate) daemonset: String,
    pub(crate) server_url: String,
    pub(crate) join_token: String,
    pub(crate) node_name: String,
    /// Where the container reads its projected ServiceAccount token.
    pub(crate) token_file: String,
}

/// `namespace/name` of a DaemonSet.
pub(crate) fn ds_name(ds: &Value) -> String {
    let s = |p: &str| ds.pointer(p).and_then(Value::as_str).unwrap_or_default();
    format!("{}/{}", s("/metadata/namespace"), s("/metadata/name"))
}

/// Whether the DaemonSet's pod would be scheduled onto `node`.
pub fn schedules_onto(ds: &Value, node: &SimNode) -> bool {
    let pod = ds.pointer("/spec/template/spec");
    let selector_ok =
        pod.and_then(|p| p.get("nodeSelector")).and_then(Value::as_object).is_none_or(|sel| {
            sel.iter().all(|(k, v)| {
                v.as_str().is_some_and(|v| node.labels.get(k).map(String::as_str) == Some(v))
            })
        });
    if !selector_ok {
        return false;
    }
    let tolerations: Vec<&Value> = pod
        .and_then(|p| p.get("tolerations"))
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    node.taints
        .iter()
        .filter(|t| matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute))
        .all(|t| tolerations.iter().any(|tol| tolerates(tol, t)))
}

/// Kubernetes toleration matching: an empty effect matches every effect; `Exists` with
/// an empty key matches every taint; `Equal` (the default) needs key and value.
fn tolerates(tol: &Value, taint: &bc_domain::policy::Taint) -> bool {
    let s = |k: &str| tol.get(k).and_then(Value::as_str).unwrap_or_default();
    let effect_ok = s("effect").is_empty() || s("effect") == taint.effect.as_str();
    let key_ok = match s("operator") {
        "Exists" => s("key").is_empty() || s("key") == taint.key,
        "" | "Equal" => s("key") == taint.key && s("value") == taint.value,
        _ => false,
    };
    effect_ok && key_ok
}

/// The env of the DaemonSet's first container that has every bcd variable, as
/// `crate::bcd::pod_env` resolves it, reading objects through `lookup` (resource, namespace, name).
pub(crate) fn pod_env_with(
    lookup: &dyn Fn(Resource, &str, &str) -> Option<Value>,
    ds: &Value,
    node: &SimNode,
) -> Result<Option<PodEnv>, String> {
    let ns = ds.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
    let pod = ds.pointer("/spec/template/spec").cloned().unwrap_or(Value::Null);
    if let Some(sa) = pod.get("serviceAccountName").and_then(Value::as_str)
        && lookup(Resource::ServiceAccount, ns, sa).is_none()
    {
        return Err(format!("serviceaccount {ns}/{sa} not found"));
    }
    let secret = |name: &str| lookup(Resource::Secret, ns, name);
    let containers = pod.get("containers").and_then(Value::as_array).cloned().unwrap_or_default();
    for c in &containers {
        let env = container_env(c, &secret, node)?;
        if let (Some(url), Some(tok), Some(name)) =
            (env.get(ENV_SERVER_URL), env.get(ENV_JOIN_TOKEN), env.get(ENV_NODE_NAME))
        {
            return Ok(Some(PodEnv {
                daemonset: ds_name(ds),
                server_url: url.clone(),
                join_token: tok.clone(),
                node_name: name.clone(),
                token_file: env
                    .get(ENV_SERVICE_ACCOUNT_TOKEN_FILE)
                    .cloned()
                    .unwrap_or_else(|| SERVICE_ACCOUNT_TOKEN_FILE.to_owned()),
            }));
        }
    }
    Ok(None)
}

/// One container's env: `envFrom.secretRef`, then `env` (`value`,
/// `valueFrom.secretKeyRef`, or `valueFrom.fieldRef` of `spec.nodeName`), later entries
/// winning as in Kubernetes.
fn container_env(
    c: &Value,
    secret: &dyn Fn(&str) -> Option<Value>,
    node: &SimNode,
) -> Result<BTreeMap<String, String>, String> {
    let mut env = BTreeMap::new();
    for from in c.get("envFrom").and_then(Value::as_array).into_iter().flatten() {
        let Some(r) = from.get("secretRef") else { continue };
        let name = r.get("name").and_then(Value::as_str).unwrap_or_default();
        let optional = r.get("optional").and_then(Value::as_bool).unwrap_or(false);
        let prefix = from.get("prefix").and_then(Value::as_str).unwrap_or_default();
        match secret(name) {
            Some(s) => {
                for k in secret_keys(&s) {
                    if let Some(v) = secret_value(&s, &k) {
                        env.insert(format!("{prefix}{k}"), v);
                    }
                }
            }
            None if optional => {}
            None => return Err(format!("secret {name:?} not found")),
        }
    }
    for e in c.get("env").and_then(Value::as_array).into_iter().flatten() {
        let Some(name) = e.get("name").and_then(Value::as_str) else { continue };
        if let Some(v) = e.get("value").and_then(Value::as_str) {
            env.insert(name.to_owned(), v.to_owned());
            continue;
        }
        if let Some(path) = e.pointer("/valueFrom/fieldRef/fieldPath").and_then(Value::as_str) {
            // The downward API; the simulated pod has only the field bcd uses.
            if path == "spec.nodeName" {
                env.insert(name.to_owned(), node.name.clone());
            }
            continue;
        }
        let Some(r) = e.pointer("/valueFrom/secretKeyRef") else { continue };
        let sname = r.get("name").and_then(Value::as_str).unwrap_or_default();
        let key = r.get("key").and_then(Value::as_str).unwrap_or_default();
        let optional = r.get("optional").and_then(Value::as_bool).unwrap_or(false);
        match secret(sname).and_then(|s| secret_value(&s, key)) {
            Some(v) => {
                env.insert(name.to_owned(), v);
            }
            None if optional => {}
            None => return Err(format!("secret {sname:?} or its key {key:?} not found")),
        }
    }
    Ok(env)
}

fn secret_keys(s: &Value) -> Vec<String> {
    let mut keys: Vec<String> = ["data", "stringData"]
        .iter()
        .filter_map(|f| s.get(*f).and_then(Value::as_object))
        .flat_map(|m| m.keys().cloned())
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// A Secret value: `stringData` as is, `data` base64-decoded.
fn secret_value(s: &Value, key: &str) -> Option<String> {
    if let Some(v) = s.pointer("/stringData").and_then(|d| d.get(key)).and_then(Value::as_str) {
        return Some(v.to_owned());
    }
    let b64 = s.pointer("/data").and_then(|d| d.get(key)).and_then(Value::as_str)?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    String::from_utf8(bytes).ok()
}
