//! The objects of every simulated cluster as JSON to keep across restarts
//! (crate::persist), and back: each object as the JSON it is stored as — its content,
//! its status, its `managedFields` (as a read shows them) and its bookkeeping — with the
//! counters that keep resource versions, uids and service addresses growing.
//!
//! Invariant: what is read back serves every object exactly as before (same content,
//! uid, resourceVersion, creation time, generation and field ownership, its times to the
//! second as reads show them), and the next resourceVersion is above every one handed
//! out; only the watch history is not kept — a watch from before the restart is 410
//! Gone, as after an etcd compaction, and its client lists again.

use std::collections::BTreeMap;

use bc_domain::time::Timestamp;
use serde_json::{Value, json};

use super::types::{ClusterObjects, Ids, Objects, Stored};
use crate::kube::Resource;

impl Objects {
    /// Every cluster's objects and the shared counters, as JSON.
    pub(crate) fn to_saved(&self) -> Value {
        let clusters: serde_json::Map<String, Value> = self
            .clusters
            .iter()
            .map(|(id, c)| {
                let objects: Vec<Value> =
                    c.objects.iter().map(|(key, s)| saved_object(key, s)).collect();
                let saved = json!({
                    "lastChange": c.last_change,
                    "nextServiceIp": c.next_service_ip,
                    "objects": objects,
                });
                (id.clone(), saved)
            })
            .collect();
        let (rv, uids) = (self.ids.resource_version(), self.ids.uids());
        json!({"resourceVersion": rv, "uids": uids, "clusters": clusters})
    }

    /// The objects [`Self::to_saved`] wrote; an error names what does not read.
    pub(crate) fn from_saved(v: &Value) -> Result<Objects, String> {
        let ids = Ids::at(number(v, "resourceVersion")?, number(v, "uids")?);
        let mut out = Objects { clusters: BTreeMap::new(), ids: std::sync::Arc::new(ids) };
        let clusters = v.get("clusters").and_then(Value::as_object).ok_or("clusters: missing")?;
        for (id, c) in clusters {
            let last_change = number(c, "lastChange")?;
            let mut objects = BTreeMap::new();
            for o in c.get("objects").and_then(Value::as_array).into_iter().flatten() {
                let (key, stored) = read_object(o).map_err(|e| format!("cluster {id}: {e}"))?;
                objects.insert(key, stored);
            }
            let next_service_ip = u32::try_from(number(c, "nextServiceIp")?)
                .map_err(|_| format!("cluster {id}: nextServiceIp out of range"))?;
            out.clusters.insert(
                id.clone(),
                ClusterObjects {
                    objects,
                    // No history: a watch from before is 410 Gone, then lists again.
                    compacted: last_change,
                    last_change,
                    next_service_ip,
                    ..ClusterObjects::default()
                },
            );
        }
        Ok(out)
    }
}

fn number(v: &Value, field: &str) -> Result<u64, String> {
    v.get(field).and_then(Value::as_u64).ok_or_else(|| format!("{field}: not a number"))
}

fn saved_object(key: &super::Key, s: &Stored) -> Value {
    let (resource, namespace, name) = key;
    // `managedFields` as a read shows them (and as a client may hand them back).
    let rendered = super::render(*resource, key, s);
    let managed = rendered.pointer("/metadata/managedFields").cloned().unwrap_or(json!([]));
    json!({
        "apiVersion": resource.api_version(),
        "kind": resource.kind(),
        "namespace": namespace,
        "name": name,
        "uid": s.uid,
        "resourceVersion": s.resource_version,
        "creationTimestamp": s.created,
        "generation": s.generation,
        "content": s.content,
        "status": s.status,
        "managedFields": managed,
    })
}

fn read_object(o: &Value) -> Result<(super::Key, Stored), String> {
    let text = |field: &str| {
        o.get(field).and_then(Value::as_str).ok_or_else(|| format!("{field}: not a string"))
    };
    let (api_version, kind) = (text("apiVersion")?, text("kind")?);
    let resource = Resource::from_type(api_version, kind)
        .ok_or_else(|| format!("{api_version} {kind}: not a kind the simulator serves"))?;
    let name = text("name")?.to_owned();
    let created = o
        .get("creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| Timestamp::parse_rfc3339(t).ok())
        .ok_or_else(|| format!("{kind} {name}: creationTimestamp: not an RFC 3339 time"))?;
    let managed = o.get("managedFields").cloned().unwrap_or(json!([]));
    let stored = Stored {
        content: o.get("content").cloned().ok_or_else(|| format!("{kind} {name}: no content"))?,
        status: o.get("status").filter(|s| !s.is_null()).cloned(),
        managed: super::ownership::parse_managed(&managed, created),
        uid: text("uid")?.to_owned(),
        resource_version: number(o, "resourceVersion")?,
        created,
        generation: number(o, "generation")?,
        rendered: std::sync::OnceLock::new(),
    };
    Ok(((resource, text("namespace")?.to_owned(), name), stored))
}
