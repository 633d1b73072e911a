//! The store's writes as an API server's registry carries them out: create, replace,
//! server-side apply with per-field ownership, status updates, delete with
//! preconditions and propagation (orphaning or cascading to dependents and a
//! Namespace's objects).
//!
//! Invariants: see the module `store` — a write that changes nothing leaves the object
//! as it was and records no event; a create never touches an existing object; a failed
//! precondition leaves the object.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use bc_domain::ports::Preconditions;
use bc_domain::time::Timestamp;
use serde_json::{Value, json};

use super::encode::{
    check_body, encode_content, encode_status, initial_status, obj, owner_uids, render, rendered,
    same, strip_server_metadata, to_name_chars,
};
use super::ownership::{
    conflict_error, is_item, is_key_field, parse_managed, same_ownership, set_manager,
    strip_for_ownership, update_ownership,
};
use super::types::{
    Applied, ApplyRequest, Change, Deleted, Edit, EventType, Key, Managed, Objects, Operation,
    Propagation, Stored, manager_or_unknown, ns_key,
};
use crate::kube::decode::{self, FieldValidation};
use crate::kube::error::KubeError;
use crate::kube::fields::{self, FieldPath, Leaf};
use crate::kube::resource::Resource;
use crate::kube::schema::Ty;
use crate::kube::{defaults, kube_time, patch, validate};

impl Objects {
    /// Server-side apply.
    pub(crate) fn apply(
        &mut self,
        cluster: &str,
        req: &ApplyRequest<'_>,
        validation: FieldValidation,
        now: Timestamp,
    ) -> Result<Applied, KubeError> {
        let resource = req.resource;
        if req.manager.is_empty() {
            return Err(KubeError::new(
                422,
                "Invalid",
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            ));
        }
        let body = check_body(req.resource, req.namespace, Some(req.name), req.body)?;
        let decoded = decode::decode(resource, body, validation)?;
        let mut applied = decoded.object;
        strip_for_ownership(&mut applied);
        let key: Key = (resource, ns_key(resource, req.namespace), req.name.to_owned());
        self.require_namespace(cluster, &key)?;
        let existing = self.stored(cluster, &key).cloned();
        let ty = Ty::Root(resource);
        let applied_leaves = fields::leaves(&applied, ty);
        let me = (req.manager.to_owned(), Operation::Apply);
        let (mut content, mut managed) = match &existing {
            Some(s) => (s.content.clone(), s.managed.clone()),
            None => (json!({"metadata": {}}), Vec::new()),
        };

        // Conflicts: a leaf we would change that another manager owns (at it or below).
        let mut conflicts: Vec<(Managed, FieldPath)> = Vec::new();
        for (path, leaf) in &applied_leaves {
            let Leaf::Value(value) = leaf else { continue };
            if same(fields::get(&content, path), value) {
                continue;
            }
            for m in &managed {
                if (m.manager.as_str(), m.operation) == (me.0.as_str(), me.1) {
                    continue;
                }
                for owned in &m.fields {
                    if fields::is_under(owned, path)
                        && fields::get(&content, owned).is_some()
                        && !conflicts.iter().any(|(cm, cp)| cm.manager == m.manager && cp == owned)
                    {
                        conflicts.push((m.clone(), owned.clone()));
                    }
                }
            }
        }
        if !conflicts.is_empty() && !req.force {
            return Err(conflict_error(resource, req.name, &conflicts));
        }

        // Fields this manager applied before but no longer does: released, and removed
        // when nobody else owns them (values first, then list items nobody holds).
        let before: BTreeSet<FieldPath> = managed
            .iter()
            .find(|m| (m.manager.as_str(), m.operation) == (me.0.as_str(), me.1))
            .map(|m| m.fields.clone())
            .unwrap_or_default();
        let owned_by_others = |managed: &[Managed], p: &FieldPath| {
            managed.iter().any(|m| {
                (m.manager.as_str(), m.operation) != (me.0.as_str(), me.1)
                    && m.fields.iter().any(|f| fields::is_under(f, p))
            })
        };
        let released: Vec<&FieldPath> =
            before.iter().filter(|p| !applied_leaves.contains_key(*p)).collect();
        // List items nobody else holds go whole (outermost first); then the values, but
        // never the key fields of an item that stays.
        for p in released.iter().filter(|p| is_item(p)) {
            if !owned_by_others(&managed, p) {
                fields::remove(&mut content, p);
            }
        }
        for p in released.iter().filter(|p| !is_item(p) && !is_key_field(p)) {
            if !owned_by_others(&managed, p) {
                fields::remove(&mut content, p);
            }
        }

        // Set what was applied; a changed value is owned by this manager alone.
        for (path, leaf) in &applied_leaves {
            match leaf {
                Leaf::Item => fields::ensure_item(&mut content, path),
                Leaf::Value(value) => {
                    if !same(fields::get(&content, path), value) {
                        for m in &mut managed {
                            if (m.manager.as_str(), m.operation) != (me.0.as_str(), me.1) {
                                m.fields.retain(|f| !fields::is_under(f, path));
                            }
                        }
                        fields::set(&mut content, path, value.clone());
                    }
                }
            }
        }
        let mine: BTreeSet<FieldPath> = applied_leaves.into_keys().collect();
        set_manager(&mut managed, &me.0, me.1, mine, now);
        self.commit(cluster, key, content, managed, existing, decoded.warnings, now)
    }

    /// Create (POST): the object must not exist (409 AlreadyExists); its fields are then
    /// owned by the request's field manager, as an `Update`. A `generateName` without a
    /// name gets a name made from it.
    pub(crate) fn create(
        &mut self,
        cluster: &str,
        req: &ApplyRequest<'_>,
        validation: FieldValidation,
        now: Timestamp,
    ) -> Result<Applied, KubeError> {
        let resource = req.resource;
        let name_hint = (!req.name.is_empty()).then_some(req.name);
        let body = check_body(resource, req.namespace, name_hint, req.body)?;
        let decoded = decode::decode(resource, body, validation)?;
        let mut content = decoded.object;
        let name = match content.pointer("/metadata/name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => n.to_owned(),
            _ => match content.pointer("/metadata/generateName").and_then(Value::as_str) {
                Some(prefix) if !prefix.is_empty() => {
                    let suffix = format!("{:05x}", crate::fnv1a(&self.next_uid()) & 0xf_ffff);
                    format!("{prefix}{}", to_name_chars(&suffix))
                }
                _ => {
                    return Err(KubeError::invalid(
                        resource,
                        "",
                        &[validate::Problem {
                            reason: "FieldValueRequired",
                            field: "metadata.name".into(),
                            detail: "Required value: name or generateName is required".into(),
                        }],
                    ));
                }
            },
        };
        let key: Key = (resource, ns_key(resource, req.namespace), name.clone());
        self.require_namespace(cluster, &key)?;
        if self.stored(cluster, &key).is_some() {
            return Err(KubeError::already_exists(resource, &name));
        }
        strip_server_metadata(&mut content);
        content["metadata"]["name"] = json!(name);
        let manager = manager_or_unknown(req.manager).to_owned();
        let managed = update_ownership(
            resource,
            &json!({"metadata": {}}),
            &content,
            Vec::new(),
            &manager,
            now,
        );
        self.commit(cluster, key, content, managed, None, decoded.warnings, now)
    }

    /// PUT or a patch other than apply, as field manager `manager` (an `Update`); a
    /// replace whose `metadata.resourceVersion` is not the object's is 409 Conflict.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn update(
        &mut self,
        cluster: &str,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
        change: Edit<'_>,
        manager: &str,
        validation: FieldValidation,
        now: Timestamp,
    ) -> Result<Applied, KubeError> {
        let key: Key = (resource, ns_key(resource, namespace), name.to_owned());
        let Some(existing) = self.stored(cluster, &key).cloned() else {
            return Err(KubeError::missing(resource, name));
        };
        let current = render(resource, &key, &existing);
        let ty = Ty::Root(resource);
        let bad_patch = |e: String| KubeError::new(422, "Invalid", e).about(resource, name);
        let (body, precondition) = match change {
            Edit::Replace(body) => {
                let rv = body.pointer("/metadata/resourceVersion").and_then(Value::as_str);
                (body.clone(), rv.map(str::to_owned))
            }
            Edit::MergePatch(p) => {
                let mut v = current.clone();
                patch::merge_patch(&mut v, p);
                let rv = p.pointer("/metadata/resourceVersion").and_then(Value::as_str);
                (v, rv.map(str::to_owned))
            }
            Edit::JsonPatch(p) => (patch::json_patch(&current, p).map_err(bad_patch)?, None),
            Edit::StrategicPatch(p) => {
                let v = patch::strategic_merge_patch(&current, p, ty).map_err(bad_patch)?;
                let rv = p.pointer("/metadata/resourceVersion").and_then(Value::as_str);
                (v, rv.map(str::to_owned))
            }
        };
        if let Some(rv) = precondition.filter(|rv| !rv.is_empty())
            && rv != existing.resource_version.to_string()
        {
            return Err(KubeError::modified(resource, name));
        }
        let body = check_body(resource, namespace, Some(name), &body)?;
        let decoded = decode::decode(resource, body, validation)?;
        let mut content = decoded.object;
        // A client may hand managedFields over (kubectl does, when it moves an object from
        // client-side to server-side apply): those become the object's.
        let given_managed = content.pointer("/metadata/managedFields").cloned();
        strip_server_metadata(&mut content);
        let mut managed = existing.managed.clone();
        if let Some(given) = given_managed
            && given != current["metadata"]["managedFields"]
        {
            managed = parse_managed(&given, now);
        }
        let managed = update_ownership(
            resource,
            &existing.content,
            &content,
            managed,
            manager_or_unknown(manager),
            now,
        );
        self.commit(cluster, key, content, managed, Some(existing), decoded.warnings, now)
    }

    pub(super) fn require_namespace(&self, cluster: &str, key: &Key) -> Result<(), KubeError> {
        let (resource, ns, _) = key;
        if resource.namespaced()
            && !self.clusters.get(cluster).is_some_and(|c| c.namespace_exists(ns))
        {
            return Err(KubeError::missing(Resource::Namespace, ns));
        }
        Ok(())
    }

    /// Defaults, validation, no-op detection, then the write and its event.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn commit(
        &mut self,
        cluster: &str,
        key: Key,
        mut content: Value,
        mut managed: Vec<Managed>,
        existing: Option<Stored>,
        warnings: Vec<String>,
        now: Timestamp,
    ) -> Result<Applied, KubeError> {
        let resource = key.0;
        {
            let meta = obj(obj(&mut content).entry("metadata").or_insert(Value::Null));
            meta.insert("name".into(), json!(key.2));
            if resource.namespaced() {
                meta.insert("namespace".into(), json!(key.1));
            } else {
                meta.remove("namespace");
            }
        }
        let c = self.cluster_mut(cluster);
        defaults::apply(resource, &mut content, &mut || c.service_ip());
        encode_content(resource, &mut content);
        let problems =
            validate::validate(resource, &content, existing.as_ref().map(|s| &s.content));
        if !problems.is_empty() {
            return Err(KubeError::invalid(resource, &key.2, &problems));
        }
        // Ownership only of what the object holds.
        let present: BTreeSet<FieldPath> =
            fields::leaves(&content, Ty::Root(resource)).into_keys().collect();
        for m in &mut managed {
            m.fields.retain(|f| present.contains(f));
        }
        managed.retain(|m| !m.fields.is_empty());

        if let Some(old) = &existing
            && old.content == content
            && same_ownership(&old.managed, &managed)
        {
            // Nothing changed: the object keeps its resourceVersion.
            return Ok(Applied { object: render(resource, &key, old), created: false, warnings });
        }
        let rv = self.next_rv();
        let stored = match existing {
            Some(old) => {
                let generation = if old.content.get("spec") != content.get("spec") {
                    old.generation + 1
                } else {
                    old.generation
                };
                Stored {
                    content,
                    status: old.status.clone(),
                    managed,
                    uid: old.uid.clone(),
                    resource_version: rv,
                    created: old.created,
                    generation,
                    rendered: OnceLock::new(),
                }
            }
            None => Stored {
                status: encode_status(resource, initial_status(resource, &content)),
                content,
                managed,
                uid: self.next_uid(),
                resource_version: rv,
                created: now,
                generation: 1,
                rendered: OnceLock::new(),
            },
        };
        let c = self.cluster_mut(cluster);
        let previous = c.objects.get(&key).map(|old| rendered(resource, &key, old));
        let created = previous.is_none();
        let object = rendered(resource, &key, &stored);
        c.objects.insert(key.clone(), stored);
        c.record(Change {
            rv,
            kind: if created { EventType::Added } else { EventType::Modified },
            resource,
            namespace: key.1.clone(),
            object: object.clone(),
            previous,
        });
        Ok(Applied { object: Value::clone(&object), created, warnings })
    }

    /// Sets the status of an object (the server's own write: no validation, no
    /// ownership); a status that does not change is no write.
    pub(crate) fn set_status(&mut self, cluster: &str, key: &Key, status: Value) -> bool {
        let status = encode_status(key.0, Some(status));
        self.modify(cluster, key, |s| {
            if s.status == status {
                return false;
            }
            s.status = status;
            true
        })
    }

    /// The server's own change of a stored object: `edit` changes it (false: it changed
    /// nothing, and nothing is written); a change gets the next resourceVersion and a
    /// `MODIFIED` watch event. False when the object is not there or did not change.
    pub(super) fn modify(
        &mut self,
        cluster: &str,
        key: &Key,
        edit: impl FnOnce(&mut Stored) -> bool,
    ) -> bool {
        let c = self.clusters.entry(cluster.to_owned()).or_default();
        let Some(s) = c.objects.get_mut(key) else { return false };
        let previous = rendered(key.0, key, s);
        if !edit(s) {
            return false;
        }
        let rv = self.ids.next_rv();
        s.resource_version = rv;
        s.changed();
        let object = rendered(key.0, key, s);
        c.record(Change {
            rv,
            kind: EventType::Modified,
            resource: key.0,
            namespace: key.1.clone(),
            object,
            previous: Some(previous),
        });
        true
    }

    /// Deletes an object if it meets `pre` (409 Conflict otherwise, as the apiserver's
    /// storage answers); its dependents (objects whose `ownerReferences` name it) are
    /// deleted too, or orphaned; a Namespace takes its namespaced objects with it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn delete(
        &mut self,
        cluster: &str,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
        pre: &Preconditions,
        propagation: Propagation,
        now: Timestamp,
    ) -> Result<Deleted, KubeError> {
        let key: Key = (resource, ns_key(resource, namespace), name.to_owned());
        let Some(current) = self.stored(cluster, &key) else {
            return Err(KubeError::missing(resource, name));
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
                format!(
                    "Operation cannot be fulfilled on {} \"{name}\": {why}",
                    resource.qualified()
                ),
            )
            .about(resource, name));
        }
        let uid = current.uid.clone();
        // Dependents first (their events come before the owner's, as the garbage
        // collector's deletes would, only sooner).
        let dependents: Vec<Key> = self
            .clusters
            .get(cluster)
            .map(|c| {
                c.objects
                    .iter()
                    .filter(|(k, s)| {
                        (!resource.namespaced() || k.1 == key.1)
                            && owner_uids(&s.content).any(|u| u == uid)
                    })
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default();
        for dep in dependents {
            match propagation {
                Propagation::Orphan => self.orphan(cluster, &dep, &uid, now),
                _ => {
                    self.remove(cluster, &dep);
                }
            }
        }
        if matches!(resource, Resource::Namespace | Resource::Pod) {
            // Watches see it terminating first (deletionTimestamp set), as the apiserver's
            // graceful deletion shows it, then gone: the simulator has no finalizers or
            // grace period to wait for.
            self.mark_terminating(cluster, &key, now);
        }
        if resource == Resource::Namespace {
            let inside: Vec<Key> = self
                .clusters
                .get(cluster)
                .map(|c| {
                    c.objects.keys().filter(|k| k.0.namespaced() && k.1 == name).cloned().collect()
                })
                .unwrap_or_default();
            for k in inside {
                self.remove(cluster, &k);
            }
        }
        let removed =
            self.remove(cluster, &key).ok_or_else(|| KubeError::missing(resource, name))?;
        if matches!(resource, Resource::Namespace | Resource::Pod) {
            // The answer is the object as its deletion left it (terminating); it is
            // already gone for the next request.
            return Ok(Deleted::Object(removed));
        }
        Ok(Deleted::Status(crate::kube::error::status_body(json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": name, "group": resource.group(), "kind": resource.plural(), "uid": uid},
        }))))
    }

    /// Records an object's graceful deletion starting: `deletionTimestamp` set (and a
    /// Namespace's phase `Terminating`).
    pub(super) fn mark_terminating(&mut self, cluster: &str, key: &Key, now: Timestamp) {
        self.modify(cluster, key, |s| {
            let meta = obj(obj(&mut s.content).entry("metadata").or_insert(Value::Null));
            meta.insert("deletionTimestamp".into(), json!(kube_time(now)));
            meta.insert("deletionGracePeriodSeconds".into(), json!(0));
            if key.0 == Resource::Namespace {
                s.status = encode_status(key.0, Some(json!({"phase": "Terminating"})));
            }
            true
        });
    }

    /// Removes an object and records its deletion; the object as last seen.
    pub(crate) fn remove(&mut self, cluster: &str, key: &Key) -> Option<Value> {
        let c = self.clusters.get_mut(cluster)?;
        let mut gone = c.objects.remove(key)?;
        let rv = self.ids.next_rv();
        gone.resource_version = rv;
        gone.changed();
        let object = render(key.0, key, &gone);
        c.record(Change {
            rv,
            kind: EventType::Deleted,
            resource: key.0,
            namespace: key.1.clone(),
            object: Arc::new(object.clone()),
            previous: None,
        });
        Some(object)
    }

    pub(super) fn orphan(&mut self, cluster: &str, key: &Key, owner_uid: &str, now: Timestamp) {
        let Some(s) = self.stored(cluster, key).cloned() else { return };
        let mut content = s.content.clone();
        if let Some(refs) =
            content.pointer_mut("/metadata/ownerReferences").and_then(Value::as_array_mut)
        {
            refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(owner_uid));
            if refs.is_empty() {
                obj(&mut content["metadata"]).remove("ownerReferences");
            }
        }
        let managed = update_ownership(
            key.0,
            &s.content,
            &content,
            s.managed.clone(),
            "kube-controller-manager",
            now,
        );
        let _ = self.commit(cluster, key.clone(), content, managed, Some(s), Vec::new(), now);
    }
}
