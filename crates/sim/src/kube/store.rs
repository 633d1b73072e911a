//! The objects of every simulated cluster and the writes that change them: server-side
//! apply, create (POST) and delete with preconditions.
//!
//! Invariant: an apply never takes a changed field from another field manager without
//! `force` (409 Conflict instead); an apply that changes nothing leaves the object —
//! including its `resourceVersion` — exactly as it was; a create never touches an
//! existing object (409 AlreadyExists); a delete whose preconditions (uid,
//! resourceVersion) do not match leaves the object (409 Conflict); resource versions only
//! grow.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use bc_domain::time::Timestamp;
use serde_json::{Map, Value, json};

use bc_domain::ports::Preconditions;

use super::error::{Cause, KubeError};
use super::fields::{self, FieldPath};
use super::selector::Selector;
use super::{Resource, kube_time};

/// Server-managed metadata: never taken from an apply body, never owned by a manager.
const SERVER_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
];

/// An object as stored: the applied content and its bookkeeping.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    /// The merged content, without server metadata (rendered on read).
    content: Value,
    /// Which managers own each leaf.
    owners: BTreeMap<FieldPath, BTreeSet<String>>,
    /// When each manager last changed the object, and how (`Apply` or `Update`).
    manager_times: BTreeMap<String, (Timestamp, &'static str)>,
    uid: String,
    resource_version: u64,
    created: Timestamp,
    generation: u64,
}

/// Key of an object in a cluster: resource, namespace (`""` for cluster-scoped), name.
pub(crate) type Key = (Resource, String, String);

/// The objects of one cluster.
#[derive(Debug, Default)]
pub(crate) struct ClusterObjects {
    pub(crate) objects: BTreeMap<Key, Stored>,
}

/// Everything the store keeps: objects per cluster and the counters shared by them.
#[derive(Debug, Default)]
pub(crate) struct Objects {
    pub(crate) clusters: BTreeMap<String, ClusterObjects>,
    resource_version: u64,
    uids: u64,
}

/// What an apply did.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The resulting object.
    pub object: Value,
    /// Whether it was created (HTTP 201) rather than merged (200).
    pub created: bool,
}

/// What a delete did.
#[derive(Debug, Clone, PartialEq)]
pub enum Deleted {
    /// The object as its deletion left it (a Namespace with `status.phase: Terminating`).
    Object(Value),
    /// A Success Status (the object is gone).
    Status(Value),
}

/// An apply request.
#[derive(Debug, Clone)]
pub struct ApplyRequest<'a> {
    /// Which resource.
    pub resource: Resource,
    /// Namespace (ignored for cluster-scoped resources).
    pub namespace: Option<&'a str>,
    /// Name (from the URL).
    pub name: &'a str,
    /// The applied manifest.
    pub body: &'a Value,
    /// `fieldManager`.
    pub manager: &'a str,
    /// `force=true`.
    pub force: bool,
}

fn ns_key(resource: Resource, namespace: Option<&str>) -> String {
    if resource.namespaced() { namespace.unwrap_or_default().to_owned() } else { String::new() }
}

impl Objects {
    fn next_rv(&mut self) -> u64 {
        self.resource_version += 1;
        self.resource_version
    }

    /// The current resource version (for list metadata).
    pub(crate) fn resource_version(&self) -> u64 {
        self.resource_version
    }

    fn next_uid(&mut self) -> String {
        self.uids += 1;
        format!("5e1a0000-0000-4000-8000-{:012x}", self.uids)
    }

    /// One object, rendered.
    pub(crate) fn get(
        &self,
        cluster: &str,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, KubeError> {
        let key = (resource, ns_key(resource, namespace), name.to_owned());
        self.clusters
            .get(cluster)
            .and_then(|c| c.objects.get(&key))
            .map(|s| render(resource, &key, s))
            .ok_or_else(|| KubeError::not_found(resource.plural(), name))
    }

    /// Objects of a resource (in one namespace, or all), filtered by a selector.
    pub(crate) fn list(
        &self,
        cluster: &str,
        resource: Resource,
        namespace: Option<&str>,
        selector: &Selector,
    ) -> Vec<Value> {
        let Some(c) = self.clusters.get(cluster) else {
            return Vec::new();
        };
        c.objects
            .iter()
            .filter(|(k, _)| k.0 == resource)
            .filter(|(k, _)| namespace.is_none_or(|ns| !resource.namespaced() || k.1 == ns))
            .map(|(k, s)| render(resource, k, s))
            .filter(|o| selector.matches(&labels_of(o)))
            .collect()
    }

    /// Server-side apply.
    pub(crate) fn apply(
        &mut self,
        cluster: &str,
        req: &ApplyRequest<'_>,
        now: Timestamp,
    ) -> Result<Applied, KubeError> {
        self.write(cluster, req, now, "Apply")
    }

    /// Create (POST): the object must not exist (409 AlreadyExists); its fields are then
    /// owned by the request's field manager, as an `Update`.
    pub(crate) fn create(
        &mut self,
        cluster: &str,
        req: &ApplyRequest<'_>,
        now: Timestamp,
    ) -> Result<Applied, KubeError> {
        // The body is checked against the URL before the name is looked up.
        validate_body(req)?;
        let key = (req.resource, ns_key(req.resource, req.namespace), req.name.to_owned());
        if self.clusters.get(cluster).is_some_and(|c| c.objects.contains_key(&key)) {
            return Err(KubeError::new(
                409,
                "AlreadyExists",
                format!("{} \"{}\" already exists", req.resource.plural(), req.name),
            )
            .on(req.resource.plural(), req.name));
        }
        let manager = if req.manager.is_empty() { "unknown" } else { req.manager };
        self.write(cluster, &ApplyRequest { manager, force: false, ..req.clone() }, now, "Update")
    }

    fn write(
        &mut self,
        cluster: &str,
        req: &ApplyRequest<'_>,
        now: Timestamp,
        operation: &'static str,
    ) -> Result<Applied, KubeError> {
        let resource = req.resource;
        let name = req.name;
        if req.manager.is_empty() {
            return Err(KubeError::new(
                422,
                "Invalid",
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            ));
        }
        let body = validate_body(req)?;
        let ns = ns_key(resource, req.namespace);
        if resource.namespaced() {
            let ns_present = self.clusters.get(cluster).is_some_and(|c| {
                c.objects.contains_key(&(Resource::Namespace, String::new(), ns.clone()))
            });
            if !ns_present {
                return Err(KubeError::not_found("namespaces", &ns));
            }
        }
        let key: Key = (resource, ns, name.to_owned());
        let existing = self.clusters.get(cluster).and_then(|c| c.objects.get(&key)).cloned();
        let applied = fields::leaves(&body);
        let manager = req.manager.to_owned();

        let (mut content, mut owners) = match &existing {
            Some(s) => (s.content.clone(), s.owners.clone()),
            None => (json!({"metadata": {}}), BTreeMap::new()),
        };

        // Conflicts: a leaf (or subtree) we would change that another manager owns.
        let mut conflicts: Vec<(String, FieldPath)> = Vec::new();
        for (path, value) in &applied {
            if same(fields::get(&content, path), value) {
                continue;
            }
            for (owned, managers) in &owners {
                if fields::is_under(owned, path) || fields::is_under(path, owned) {
                    for m in managers {
                        if *m != manager
                            && fields::get(&content, owned).is_some()
                            && !conflicts.iter().any(|(cm, cp)| cm == m && cp == owned)
                        {
                            conflicts.push((m.clone(), owned.clone()));
                        }
                    }
                }
            }
        }
        if !conflicts.is_empty() && !req.force {
            return Err(conflict_error(resource, name, &conflicts));
        }

        // Fields this manager applied before but no longer does: released, and removed
        // when nobody else owns them.
        let previously: Vec<FieldPath> =
            owners.iter().filter(|(_, ms)| ms.contains(&manager)).map(|(p, _)| p.clone()).collect();
        for p in previously {
            if applied.contains_key(&p) {
                continue;
            }
            let ms = owners.get_mut(&p).expect("listed above");
            ms.remove(&manager);
            if ms.is_empty() {
                owners.remove(&p);
                fields::remove(&mut content, &p);
            }
        }

        // Set what was applied; a changed value is owned by this manager alone.
        for (path, value) in &applied {
            let changed = !same(fields::get(&content, path), value);
            if changed {
                // Forced (or unowned): other managers lose the leaf and anything under or
                // above it that the new value replaces.
                owners.retain(|owned, _| {
                    !(owned != path
                        && (fields::is_under(owned, path) || fields::is_under(path, owned)))
                });
                owners.insert(path.clone(), BTreeSet::from([manager.clone()]));
                fields::set(&mut content, path, value.clone());
            } else {
                owners.entry(path.clone()).or_default().insert(manager.clone());
            }
        }
        if resource == Resource::Secret {
            fold_string_data(&mut content, &mut owners);
        }

        if let Some(old) = &existing
            && old.content == content
            && old.owners == owners
        {
            // Nothing changed: the object keeps its resourceVersion.
            return Ok(Applied { object: render(resource, &key, old), created: false });
        }

        let rv = self.next_rv();
        let stored = match existing {
            Some(old) => {
                let generation = if old.content.get("spec") != content.get("spec") {
                    old.generation + 1
                } else {
                    old.generation
                };
                let mut manager_times = old.manager_times;
                manager_times.insert(manager, (now, operation));
                manager_times.retain(|m, _| owners.values().any(|ms| ms.contains(m)));
                Stored {
                    content,
                    owners,
                    manager_times,
                    uid: old.uid,
                    resource_version: rv,
                    created: old.created,
                    generation,
                }
            }
            None => Stored {
                content,
                owners,
                manager_times: BTreeMap::from([(manager, (now, operation))]),
                uid: self.next_uid(),
                resource_version: rv,
                created: now,
                generation: 1,
            },
        };
        let created = !self.clusters.get(cluster).is_some_and(|c| c.objects.contains_key(&key));
        let object = render(resource, &key, &stored);
        self.clusters.entry(cluster.to_owned()).or_default().objects.insert(key, stored);
        Ok(Applied { object, created })
    }

    /// Deletes an object if it meets `pre` (409 Conflict otherwise, as the apiserver's
    /// storage answers); a Namespace takes its namespaced objects with it.
    pub(crate) fn delete(
        &mut self,
        cluster: &str,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
        pre: &Preconditions,
        now: Timestamp,
    ) -> Result<Deleted, KubeError> {
        let key: Key = (resource, ns_key(resource, namespace), name.to_owned());
        let objects = self.clusters.get_mut(cluster).map(|c| &mut c.objects);
        let Some(current) = objects.as_ref().and_then(|o| o.get(&key)) else {
            return Err(KubeError::not_found(resource.plural(), name));
        };
        let failed = match (&pre.uid, &pre.resource_version) {
            (Some(uid), _) if *uid != current.uid => Some(format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                current.uid
            )),
            (_, Some(rv)) if *rv != current.resource_version.to_string() => Some(format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in \
                 object meta: {}",
                current.resource_version
            )),
            _ => None,
        };
        if let Some(why) = failed {
            return Err(KubeError::new(
                409,
                "Conflict",
                format!("Operation cannot be fulfilled on {} \"{name}\": {why}", resource.plural()),
            )
            .on(resource.plural(), name));
        }
        let removed = objects
            .and_then(|o| o.remove(&key))
            .ok_or_else(|| KubeError::not_found(resource.plural(), name))?;
        let rv = self.next_rv();
        if resource == Resource::Namespace {
            if let Some(c) = self.clusters.get_mut(cluster) {
                c.objects.retain(|k, _| !(k.0.namespaced() && k.1 == name));
            }
            // The answer shows the namespace terminating; since the simulator has no
            // finalizers to wait for, it is already gone for the next request.
            let mut object = render(resource, &key, &removed);
            object["metadata"]["resourceVersion"] = json!(rv.to_string());
            object["metadata"]["deletionTimestamp"] = json!(kube_time(now));
            object["status"] = json!({"phase": "Terminating"});
            return Ok(Deleted::Object(object));
        }
        Ok(Deleted::Status(json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": name, "kind": resource.plural(), "uid": removed.uid},
        })))
    }

    /// The clusters that hold at least one object.
    pub(crate) fn cluster_ids(&self) -> Vec<String> {
        self.clusters.keys().cloned().collect()
    }
}

/// Whether applying `new` over `existing` changes nothing. An empty object sets no
/// field: over an existing object (someone else's labels, say) it is no change.
fn same(existing: Option<&Value>, new: &Value) -> bool {
    match (existing, new) {
        (Some(Value::Object(_)), Value::Object(m)) if m.is_empty() => true,
        (e, n) => e == Some(n),
    }
}

/// Checks an apply body against the URL and strips what the server manages.
fn validate_body(req: &ApplyRequest<'_>) -> Result<Value, KubeError> {
    let resource = req.resource;
    let Some(obj) = req.body.as_object() else {
        return Err(KubeError::bad_request("apply patch must be a JSON object"));
    };
    let mut obj = obj.clone();
    match obj.remove("apiVersion") {
        Some(Value::String(v)) if v == resource.api_version() => {}
        None => {}
        Some(v) => {
            return Err(KubeError::bad_request(format!(
                "apiVersion {v} does not match {}",
                resource.api_version()
            )));
        }
    }
    match obj.remove("kind") {
        Some(Value::String(k)) if k == resource.kind() => {}
        None => {}
        Some(k) => {
            return Err(KubeError::bad_request(format!(
                "kind {k} does not match {}",
                resource.kind()
            )));
        }
    }
    obj.remove("status");
    if resource == Resource::Secret {
        validate_secret(&obj)?;
    }
    let mut metadata = match obj.remove("metadata") {
        Some(Value::Object(m)) => m,
        None => Map::new(),
        Some(_) => return Err(KubeError::bad_request("metadata must be an object")),
    };
    match metadata.remove("name") {
        Some(Value::String(n)) if n == req.name => {}
        None => {}
        Some(n) => {
            return Err(KubeError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({})",
                req.name
            )));
        }
    }
    match metadata.remove("namespace") {
        Some(Value::String(n)) if !resource.namespaced() || Some(n.as_str()) == req.namespace => {}
        None => {}
        Some(n) => {
            return Err(KubeError::bad_request(format!(
                "the namespace of the object ({n}) does not match the namespace on the URL"
            )));
        }
    }
    for f in SERVER_METADATA {
        metadata.remove(*f);
    }
    obj.insert("metadata".into(), Value::Object(metadata));
    Ok(Value::Object(obj))
}

/// Secret `data` values are base64 strings and `stringData` values strings; the
/// apiserver refuses anything else with 400 when decoding the body
/// (research/kube-wire.md gotcha 6: `data` is base64 both ways).
fn validate_secret(obj: &Map<String, Value>) -> Result<(), KubeError> {
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
        for (k, v) in map {
            let Some(text) = v.as_str() else {
                return Err(bad(format!("{field}.{k} must be a string")));
            };
            if base64 && base64::engine::general_purpose::STANDARD.decode(text).is_err() {
                return Err(bad(format!("illegal base64 data in data.{k}")));
            }
        }
    }
    Ok(())
}

fn conflict_error(resource: Resource, name: &str, conflicts: &[(String, FieldPath)]) -> KubeError {
    let causes: Vec<Cause> = conflicts
        .iter()
        .map(|(m, p)| Cause {
            reason: "FieldManagerConflict".into(),
            message: format!("conflict with \"{m}\" using {}", resource.api_version()),
            field: fields::display(p),
        })
        .collect();
    let list: Vec<String> = causes.iter().map(|c| format!("{}: {}", c.message, c.field)).collect();
    let n = conflicts.len();
    let mut e = KubeError::new(
        409,
        "Conflict",
        format!(
            "Apply failed with {n} conflict{}: {}",
            if n == 1 { "" } else { "s" },
            list.join(", ")
        ),
    )
    .on(resource.plural(), name);
    e.details.causes = causes;
    e
}

/// Secret `stringData` is write-only: the server folds it into base64 `data`, and the
/// manager that applied `stringData.k` owns `data.k` too.
fn fold_string_data(content: &mut Value, owners: &mut BTreeMap<FieldPath, BTreeSet<String>>) {
    let Some(Value::Object(sd)) = content.as_object_mut().and_then(|o| o.remove("stringData"))
    else {
        return;
    };
    for (k, v) in sd {
        let text = match v {
            Value::String(s) => s,
            other => other.to_string(),
        };
        let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
        let data_path = vec!["data".to_owned(), k.clone()];
        fields::set(content, &data_path, json!(encoded));
        let managers = owners.get(&vec!["stringData".to_owned(), k]).cloned().unwrap_or_default();
        owners.insert(data_path, managers);
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

/// The object as the API shows it: content plus server metadata and `managedFields`.
fn render(resource: Resource, key: &Key, s: &Stored) -> Value {
    let mut o = s.content.clone();
    let obj = o.as_object_mut().expect("content is an object");
    obj.insert("apiVersion".into(), json!(resource.api_version()));
    obj.insert("kind".into(), json!(resource.kind()));
    let mut by_manager: BTreeMap<&str, BTreeSet<FieldPath>> = BTreeMap::new();
    for (p, ms) in &s.owners {
        for m in ms {
            by_manager.entry(m.as_str()).or_default().insert(p.clone());
        }
    }
    let managed: Vec<Value> = by_manager
        .iter()
        .map(|(m, paths)| {
            let (time, operation) = s.manager_times.get(*m).copied().unzip();
            let mut e = json!({
                "manager": m,
                "operation": operation.unwrap_or("Apply"),
                "apiVersion": resource.api_version(),
                "fieldsType": "FieldsV1",
                "fieldsV1": fields::fields_v1(paths),
            });
            if let Some(t) = time {
                e["time"] = json!(kube_time(t));
            }
            e
        })
        .collect();
    let meta = obj
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .expect("metadata is an object");
    meta.insert("name".into(), json!(key.2));
    if resource.namespaced() {
        meta.insert("namespace".into(), json!(key.1));
    }
    meta.insert("uid".into(), json!(s.uid));
    meta.insert("resourceVersion".into(), json!(s.resource_version.to_string()));
    meta.insert("creationTimestamp".into(), json!(kube_time(s.created)));
    if resource == Resource::DaemonSet {
        meta.insert("generation".into(), json!(s.generation));
    }
    meta.insert("managedFields".into(), Value::Array(managed));
    match resource {
        Resource::Namespace => {
            obj.insert("status".into(), json!({"phase": "Active"}));
        }
        Resource::Secret => {
            obj.entry("type").or_insert_with(|| json!("Opaque"));
        }
        _ => {}
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> Timestamp {
        Timestamp::from_unix_ms(1_800_000_000_000)
    }

    fn apply(
        o: &mut Objects,
        resource: Resource,
        ns: Option<&str>,
        name: &str,
        body: Value,
        manager: &str,
        force: bool,
    ) -> Result<Applied, KubeError> {
        o.apply(
            "c1",
            &ApplyRequest { resource, namespace: ns, name, body: &body, manager, force },
            t(),
        )
    }

    #[test]
    fn create_merge_noop_conflict_force() {
        let mut o = Objects::default();
        let ns = json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n","labels":{"a":"1"}}});
        let a = apply(&mut o, Resource::Namespace, None, "n", ns.clone(), "bc", false).unwrap();
        assert!(a.created);
        let rv = a.object["metadata"]["resourceVersion"].clone();
        let b = apply(&mut o, Resource::Namespace, None, "n", ns.clone(), "bc", false).unwrap();
        assert!(!b.created);
        assert_eq!(b.object["metadata"]["resourceVersion"], rv);

        let sec = json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"n"},"stringData":{"k":"v"}});
        let s =
            apply(&mut o, Resource::Secret, Some("n"), "s", sec.clone(), "kubectl", false).unwrap();
        assert_eq!(s.object["data"]["k"], json!("dg=="));
        assert!(s.object.get("stringData").is_none());
        let s2 = apply(&mut o, Resource::Secret, Some("n"), "s", sec, "kubectl", false).unwrap();
        assert_eq!(
            s.object["metadata"]["resourceVersion"],
            s2.object["metadata"]["resourceVersion"]
        );
        let ours = json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"n"},"data":{"k":"eA=="}});
        let e =
            apply(&mut o, Resource::Secret, Some("n"), "s", ours.clone(), "bc", false).unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
        assert_eq!(e.details.causes[0].field, ".data.k");
        assert_eq!(e.details.causes[0].reason, "FieldManagerConflict");
        let f = apply(&mut o, Resource::Secret, Some("n"), "s", ours, "bc", true).unwrap();
        assert_eq!(f.object["data"]["k"], json!("eA=="));
    }

    #[test]
    fn an_empty_map_neither_conflicts_nor_wipes_other_managers_fields() {
        let mut o = Objects::default();
        let ns = json!({"metadata":{"name":"n","labels":{"team":"x"}}});
        apply(&mut o, Resource::Namespace, None, "n", ns, "kubectl", false).unwrap();
        let ours = json!({"metadata":{"name":"n","labels":{}}});
        let r = apply(&mut o, Resource::Namespace, None, "n", ours.clone(), "bc", false).unwrap();
        assert_eq!(r.object["metadata"]["labels"], json!({"team":"x"}));
        let r = apply(&mut o, Resource::Namespace, None, "n", ours, "bc", true).unwrap();
        assert_eq!(r.object["metadata"]["labels"], json!({"team":"x"}));
    }

    #[test]
    fn dropped_fields_are_removed_and_namespace_delete_cascades() {
        let mut o = Objects::default();
        let ns = json!({"metadata":{"name":"n"}});
        apply(&mut o, Resource::Namespace, None, "n", ns, "bc", false).unwrap();
        let sa = json!({"metadata":{"labels":{"a":"1","b":"2"}}});
        apply(&mut o, Resource::ServiceAccount, Some("n"), "x", sa, "bc", false).unwrap();
        let sa = json!({"metadata":{"labels":{"a":"1"}}});
        let r = apply(&mut o, Resource::ServiceAccount, Some("n"), "x", sa, "bc", false).unwrap();
        assert_eq!(r.object["metadata"]["labels"], json!({"a":"1"}));
        let e = apply(&mut o, Resource::ServiceAccount, Some("zz"), "x", json!({}), "bc", false)
            .unwrap_err();
        assert_eq!(e.reason, "NotFound");
        match o
            .delete("c1", Resource::Namespace, None, "n", &Preconditions::default(), t())
            .unwrap()
        {
            Deleted::Object(v) => assert_eq!(v["status"]["phase"], json!("Terminating")),
            other => panic!("{other:?}"),
        }
        assert!(o.get("c1", Resource::ServiceAccount, Some("n"), "x").is_err());
        assert!(
            o.delete("c1", Resource::Namespace, None, "n", &Preconditions::default(), t()).is_err()
        );
    }

    #[test]
    fn create_refuses_a_taken_name_and_delete_checks_its_preconditions() {
        let mut o = Objects::default();
        let ns = json!({"metadata":{"name":"n","labels":{"team":"x"}}});
        let req = ApplyRequest {
            resource: Resource::Namespace,
            namespace: None,
            name: "n",
            body: &ns,
            manager: "bc",
            force: false,
        };
        let made = o.create("c1", &req, t()).unwrap();
        assert!(made.created);
        assert_eq!(made.object["metadata"]["managedFields"][0]["operation"], "Update");
        let e = o.create("c1", &req, t()).unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));
        assert_eq!(e.message, "namespaces \"n\" already exists");

        let uid = made.object["metadata"]["uid"].as_str().unwrap().to_owned();
        let rv = made.object["metadata"]["resourceVersion"].as_str().unwrap().to_owned();
        for pre in [
            Preconditions { uid: Some("other".into()), resource_version: None },
            Preconditions { uid: Some(uid.clone()), resource_version: Some("999".into()) },
        ] {
            let e = o.delete("c1", Resource::Namespace, None, "n", &pre, t()).unwrap_err();
            assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"), "{pre:?}");
            assert!(e.message.contains("Precondition failed"), "{}", e.message);
            assert!(o.get("c1", Resource::Namespace, None, "n").is_ok(), "not deleted");
        }
        let pre = Preconditions { uid: Some(uid), resource_version: Some(rv) };
        o.delete("c1", Resource::Namespace, None, "n", &pre, t()).unwrap();
        assert!(o.get("c1", Resource::Namespace, None, "n").is_err());
    }
}
