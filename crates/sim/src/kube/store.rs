//! The objects of every simulated cluster and the writes that change them, as an API
//! server's registry carries them out: create (POST), replace (PUT), JSON merge, JSON
//! and strategic merge patch, server-side apply with per-field ownership, delete with
//! preconditions and propagation; each write decoded through the kind's type, defaulted,
//! encoded as the Go type writes it (`bc_domain::kube_wire`: what is stored is what a
//! real API server would answer, so every answer — get, list, watch, write — is), then
//! validated, recorded in `managedFields` and in the cluster's watch history.
//!
//! Invariants: an apply never takes a changed field from another field manager without
//! `force` (409 Conflict naming each field); a write that changes nothing leaves the
//! object — including its `resourceVersion` and `managedFields` times — exactly as it was
//! and records no event (compared as encoded: `tolerations: []` over an object without
//! them is no change); a create never touches an existing object (409 AlreadyExists); a
//! replace or delete whose resourceVersion/uid precondition does not match leaves the
//! object (409 Conflict); `status` is the server's (clients' writes never change it);
//! resource versions only grow, and every change is one event in the history watches
//! read.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use base64::Engine as _;
use bc_domain::kube_wire;
use bc_domain::ports::Preconditions;
use bc_domain::time::Timestamp;
use serde_json::{Map, Value, json};

use super::decode::{self, FieldValidation};
use super::error::{Cause, KubeError};
use super::fields::{self, FieldPath, Leaf, Seg};
use super::schema::Ty;
use super::selector::Selector;
use super::{Resource, defaults, kube_time, patch, validate};

mod persist;

/// Server-managed metadata: never taken from a request body.
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

/// How many changes of one cluster a watch can resume from; an older resourceVersion is
/// 410 Gone, as after an etcd compaction.
pub const WATCH_HISTORY: usize = 2048;

/// `Apply` or `Update`, the two operations `managedFields` records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Every other write.
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Managed {
    pub(crate) manager: String,
    pub(crate) operation: Operation,
    pub(crate) time: Timestamp,
    pub(crate) fields: BTreeSet<FieldPath>,
}

/// An object as stored: the content clients write, the status the server writes, and
/// the bookkeeping.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    /// Without `apiVersion`, `kind`, `status` and server metadata (rendered on read).
    pub(crate) content: Value,
    pub(crate) status: Option<Value>,
    pub(crate) managed: Vec<Managed>,
    pub(crate) uid: String,
    pub(crate) resource_version: u64,
    pub(crate) created: Timestamp,
    pub(crate) generation: u64,
}

/// Key of an object in a cluster: resource, namespace (`""` for cluster-scoped), name.
pub(crate) type Key = (Resource, String, String);

/// `ADDED`, `MODIFIED`, `DELETED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Changed.
    Modified,
    /// Deleted.
    Deleted,
}

impl EventType {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change in a cluster's history.
#[derive(Debug, Clone)]
pub struct Change {
    /// The resourceVersion it made.
    pub rv: u64,
    /// What happened.
    pub kind: EventType,
    /// The resource.
    pub resource: Resource,
    /// The namespace (`""` for cluster-scoped objects).
    pub namespace: String,
    /// The object after the change (before it, for a delete), rendered.
    pub object: Arc<Value>,
    /// The object before the change (modifications only), to tell a watch with a
    /// selector that an object left or entered it.
    pub previous: Option<Arc<Value>>,
}

/// The objects of one cluster, its history and its controllers' bookkeeping.
#[derive(Debug, Default, Clone)]
pub(crate) struct ClusterObjects {
    pub(crate) objects: BTreeMap<Key, Stored>,
    pub(crate) history: VecDeque<Change>,
    /// The newest resourceVersion dropped from `history` (0: none).
    pub(crate) compacted: u64,
    /// The resourceVersion of the cluster's last change.
    pub(crate) last_change: u64,
    /// Controller state (see `controllers`).
    pub(crate) controllers: super::controllers::State,
    next_service_ip: u32,
}

/// Everything the store keeps: objects per cluster and the counters shared by them.
#[derive(Debug, Default)]
pub(crate) struct Objects {
    pub(crate) clusters: BTreeMap<String, ClusterObjects>,
    resource_version: u64,
    uids: u64,
}

/// What a write did.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The resulting object.
    pub object: Value,
    /// Whether it was created (HTTP 201) rather than changed or left (200).
    pub created: bool,
    /// `Warning` headers to send (unknown fields dropped under `fieldValidation=Warn`).
    pub warnings: Vec<String>,
}

/// What a delete did.
#[derive(Debug, Clone, PartialEq)]
pub enum Deleted {
    /// The object as its deletion left it (a Namespace with `status.phase: Terminating`).
    Object(Value),
    /// A Success Status (the object is gone).
    Status(Value),
}

/// An apply (or create) request.
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

/// A write other than apply or create: what it carries.
#[derive(Debug, Clone, Copy)]
pub enum Edit<'a> {
    /// PUT: the whole object.
    Replace(&'a Value),
    /// `application/merge-patch+json`.
    MergePatch(&'a Value),
    /// `application/json-patch+json`.
    JsonPatch(&'a Value),
    /// `application/strategic-merge-patch+json`.
    StrategicPatch(&'a Value),
}

/// `DeleteOptions.propagationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Propagation {
    /// Dependents are deleted after the owner (the server default).
    #[default]
    Background,
    /// Dependents are deleted first.
    Foreground,
    /// Dependents lose their owner reference and stay.
    Orphan,
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The objects.
    pub items: Vec<Value>,
    /// The resourceVersion the list was read at.
    pub resource_version: u64,
    /// The `continue` token of the next page, if any.
    pub next: Option<String>,
    /// How many objects the next pages hold.
    pub remaining: usize,
}

/// What a list (or watch) selects.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// Namespace (`None`: all).
    pub namespace: Option<String>,
    /// `labelSelector`.
    pub labels: Selector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `limit` (0: all).
    pub limit: usize,
    /// `continue`.
    pub continue_from: Option<String>,
}

fn ns_key(resource: Resource, namespace: Option<&str>) -> String {
    if resource.namespaced() { namespace.unwrap_or_default().to_owned() } else { String::new() }
}

fn manager_or_unknown(m: &str) -> &str {
    if m.is_empty() { "unknown" } else { m }
}

impl ClusterObjects {
    fn record(&mut self, change: Change) {
        self.last_change = change.rv;
        self.history.push_back(change);
        while self.history.len() > WATCH_HISTORY {
            if let Some(old) = self.history.pop_front() {
                self.compacted = old.rv;
            }
        }
    }

    /// The changes after resourceVersion `since`, oldest first (read from the newest end:
    /// a caller that keeps up reads only what is new).
    pub(crate) fn changes_after(&self, since: u64) -> impl Iterator<Item = &Change> {
        let newer = self.history.iter().rev().take_while(|e| e.rv > since).count();
        self.history.iter().skip(self.history.len() - newer)
    }

    fn namespace_exists(&self, ns: &str) -> bool {
        self.objects.contains_key(&(Resource::Namespace, String::new(), ns.to_owned()))
    }

    fn service_ip(&mut self) -> String {
        // 10.245.0.1 is the `kubernetes` Service's (the first address of the service
        // subnet DOKS uses by default).
        self.next_service_ip += 1;
        let n = self.next_service_ip;
        format!("10.245.{}.{}", (n >> 8) & 0xff, n & 0xff)
    }
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

    /// A copy of one cluster's objects to write on without keeping (`dryRun`).
    pub(crate) fn scratch(&self, cluster: &str) -> Objects {
        let mut clusters = BTreeMap::new();
        if let Some(c) = self.clusters.get(cluster) {
            clusters.insert(cluster.to_owned(), c.clone());
        }
        Objects { clusters, resource_version: self.resource_version, uids: self.uids }
    }

    pub(crate) fn cluster_mut(&mut self, cluster: &str) -> &mut ClusterObjects {
        self.clusters.entry(cluster.to_owned()).or_default()
    }

    fn stored(&self, cluster: &str, key: &Key) -> Option<&Stored> {
        self.clusters.get(cluster).and_then(|c| c.objects.get(key))
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
        self.stored(cluster, &key)
            .map(|s| render(resource, &key, s))
            .ok_or_else(|| KubeError::missing(resource, name))
    }

    /// Objects of a resource (in one namespace, or all), filtered by a label selector.
    pub(crate) fn list(
        &self,
        cluster: &str,
        resource: Resource,
        namespace: Option<&str>,
        selector: &Selector,
    ) -> Vec<Value> {
        let query = Query {
            namespace: namespace.map(str::to_owned),
            labels: selector.clone(),
            ..Query::default()
        };
        self.page(cluster, resource, &query).map(|p| p.items).unwrap_or_default()
    }

    /// One page of a list.
    pub(crate) fn page(
        &self,
        cluster: &str,
        resource: Resource,
        query: &Query,
    ) -> Result<Page, KubeError> {
        let rv = self.resource_version;
        let start = match &query.continue_from {
            Some(token) => Some(decode_continue(token, self.compacted_of(cluster))?),
            None => None,
        };
        let Some(c) = self.clusters.get(cluster) else {
            return Ok(Page { items: Vec::new(), resource_version: rv, next: None, remaining: 0 });
        };
        let ns_filter = query.namespace.as_deref().filter(|_| resource.namespaced());
        let lo = (resource, ns_filter.unwrap_or_default().to_owned(), String::new());
        let mut selected = c
            .objects
            .range(lo..)
            .take_while(|(k, _)| k.0 == resource && ns_filter.is_none_or(|ns| k.1 == ns))
            .filter(|(k, _)| start.as_ref().is_none_or(|(sns, sname)| (&k.1, &k.2) > (sns, sname)))
            .map(|(k, s)| (k, render(resource, k, s)))
            .filter(|(_, o)| query.labels.matches(&labels_of(o)) && query.fields.matches(o));
        let mut items = Vec::new();
        let mut last = None;
        for (k, o) in selected.by_ref() {
            if query.limit > 0 && items.len() == query.limit {
                // One more exists: the page ends at the previous item.
                let remaining = 1 + selected.count();
                let next = last.map(|(ns, name): (String, String)| encode_continue(rv, &ns, &name));
                return Ok(Page { items, resource_version: rv, next, remaining });
            }
            last = Some((k.1.clone(), k.2.clone()));
            items.push(o);
        }
        Ok(Page { items, resource_version: rv, next: None, remaining: 0 })
    }

    fn compacted_of(&self, cluster: &str) -> u64 {
        self.clusters.get(cluster).map_or(0, |c| c.compacted)
    }

    /// The changes of `cluster` after `since`, or 410 Gone when some of them are no
    /// longer kept.
    pub(crate) fn changes_since(
        &self,
        cluster: &str,
        since: u64,
    ) -> Result<Vec<Change>, KubeError> {
        let Some(c) = self.clusters.get(cluster) else { return Ok(Vec::new()) };
        if since < c.compacted {
            return Err(KubeError::expired(format!(
                "too old resource version: {since} ({})",
                c.compacted + 1
            )));
        }
        Ok(c.changes_after(since).cloned().collect())
    }

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

    fn require_namespace(&self, cluster: &str, key: &Key) -> Result<(), KubeError> {
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
    fn commit(
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
            },
        };
        let c = self.cluster_mut(cluster);
        let previous = c.objects.get(&key).map(|old| Arc::new(render(resource, &key, old)));
        let created = previous.is_none();
        let object = render(resource, &key, &stored);
        c.objects.insert(key.clone(), stored);
        c.record(Change {
            rv,
            kind: if created { EventType::Added } else { EventType::Modified },
            resource,
            namespace: key.1.clone(),
            object: Arc::new(object.clone()),
            previous,
        });
        Ok(Applied { object, created, warnings })
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
    fn modify(&mut self, cluster: &str, key: &Key, edit: impl FnOnce(&mut Stored) -> bool) -> bool {
        let rv = self.resource_version + 1;
        let c = self.cluster_mut(cluster);
        let Some(s) = c.objects.get_mut(key) else { return false };
        let previous = Arc::new(render(key.0, key, s));
        if !edit(s) {
            return false;
        }
        s.resource_version = rv;
        let object = Arc::new(render(key.0, key, s));
        c.record(Change {
            rv,
            kind: EventType::Modified,
            resource: key.0,
            namespace: key.1.clone(),
            object,
            previous: Some(previous),
        });
        self.resource_version = rv;
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
        Ok(Deleted::Status(super::error::status_body(json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": name, "group": resource.group(), "kind": resource.plural(), "uid": uid},
        }))))
    }

    /// Records an object's graceful deletion starting: `deletionTimestamp` set (and a
    /// Namespace's phase `Terminating`).
    fn mark_terminating(&mut self, cluster: &str, key: &Key, now: Timestamp) {
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
        let rv = self.resource_version + 1;
        let c = self.clusters.get_mut(cluster)?;
        let mut gone = c.objects.remove(key)?;
        gone.resource_version = rv;
        let object = render(key.0, key, &gone);
        c.record(Change {
            rv,
            kind: EventType::Deleted,
            resource: key.0,
            namespace: key.1.clone(),
            object: Arc::new(object.clone()),
            previous: None,
        });
        self.resource_version = rv;
        Some(object)
    }

    fn orphan(&mut self, cluster: &str, key: &Key, owner_uid: &str, now: Timestamp) {
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

    /// The clusters that hold at least one object.
    pub(crate) fn cluster_ids(&self) -> Vec<String> {
        self.clusters.keys().cloned().collect()
    }
}

/// Whether `p` names an associative list item.
fn is_item(p: &[Seg]) -> bool {
    matches!(p.last(), Some(Seg::Key(_)))
}

/// Whether `p` names a key field of an associative list item (`containers[name="c"].name`).
fn is_key_field(p: &[Seg]) -> bool {
    match p {
        [.., Seg::Key(kvs), Seg::Field(f)] => kvs.iter().any(|(k, _)| k == f),
        _ => false,
    }
}

fn obj(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    v.as_object_mut().expect("just made an object")
}

/// Lower-case letters and digits only (a generated name suffix).
fn to_name_chars(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { 'x' })
        .collect()
}

fn owner_uids(content: &Value) -> impl Iterator<Item = &str> {
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
fn initial_status(resource: Resource, content: &Value) -> Option<Value> {
    match resource {
        Resource::Pod => Some(json!({"phase": "Pending", "qosClass": qos_class(content)})),
        Resource::Namespace => Some(json!({"phase": "Active"})),
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

fn set_manager(
    managed: &mut Vec<Managed>,
    manager: &str,
    operation: Operation,
    fields: BTreeSet<FieldPath>,
    now: Timestamp,
) {
    match managed.iter_mut().find(|m| m.manager == manager && m.operation == operation) {
        Some(m) => {
            if m.fields != fields {
                m.time = now;
            }
            m.fields = fields;
        }
        None => managed.push(Managed { manager: manager.to_owned(), operation, time: now, fields }),
    }
}

/// The ownership after an `Update` by `manager` from `old` to `new` (both contents):
/// what it changed or added becomes its alone; what it removed, nobody's.
fn update_ownership(
    resource: Resource,
    old: &Value,
    new: &Value,
    mut managed: Vec<Managed>,
    manager: &str,
    now: Timestamp,
) -> Vec<Managed> {
    let ty = Ty::Root(resource);
    let before = fields::leaves(&without_ownerless(old), ty);
    let after = fields::leaves(&without_ownerless(new), ty);
    let changed: BTreeSet<FieldPath> =
        after.iter().filter(|(p, l)| before.get(*p) != Some(*l)).map(|(p, _)| p.clone()).collect();
    if changed.is_empty() && before.len() == after.len() {
        return managed;
    }
    for m in &mut managed {
        if !(m.manager == manager && m.operation == Operation::Update) {
            m.fields.retain(|f| !changed.contains(f));
        }
    }
    let mut mine = managed
        .iter()
        .find(|m| m.manager == manager && m.operation == Operation::Update)
        .map(|m| m.fields.clone())
        .unwrap_or_default();
    mine.extend(changed);
    set_manager(&mut managed, manager, Operation::Update, mine, now);
    managed
}

/// The content as ownership sees it: without name and namespace (nobody owns those).
fn without_ownerless(content: &Value) -> Value {
    let mut c = content.clone();
    strip_for_ownership(&mut c);
    c
}

fn strip_for_ownership(content: &mut Value) {
    if let Some(m) = content.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("name");
        m.remove("namespace");
        m.remove("generateName");
        for f in SERVER_METADATA {
            m.remove(*f);
        }
    }
}

/// The content as the Go type holds it after defaulting, written as `encoding/json`
/// writes it (`kube_wire::encode`: empty `omitempty` fields gone, every other field
/// written), without what the store keeps apart: the server's metadata (rendered on
/// read) and `status`.
fn encode_content(resource: Resource, content: &mut Value) {
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
fn encode_status(resource: Resource, status: Option<Value>) -> Option<Value> {
    let t = resource.status_wire()?;
    let mut status = status.unwrap_or_else(|| json!({}));
    defaults::status(resource, &mut status);
    let problems = kube_wire::encode(t, &mut status);
    debug_assert!(problems.is_empty(), "{problems:?}");
    Some(status)
}

fn strip_server_metadata(content: &mut Value) {
    if let Some(m) = content.get_mut("metadata").and_then(Value::as_object_mut) {
        for f in SERVER_METADATA {
            m.remove(*f);
        }
    }
}

fn same_ownership(a: &[Managed], b: &[Managed]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.manager == y.manager && x.operation == y.operation && x.fields == y.fields
        })
}

/// `managedFields` as a client handed them over.
fn parse_managed(given: &Value, now: Timestamp) -> Vec<Managed> {
    given
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let manager = e.get("manager").and_then(Value::as_str)?.to_owned();
            let operation = match e.get("operation").and_then(Value::as_str) {
                Some("Apply") => Operation::Apply,
                _ => Operation::Update,
            };
            let fields = fields::parse_fields_v1(e.get("fieldsV1")?)?;
            let time = e
                .get("time")
                .and_then(Value::as_str)
                .and_then(|t| Timestamp::parse_rfc3339(t).ok())
                .unwrap_or(now);
            Some(Managed { manager, operation, time, fields })
        })
        .collect()
}

/// Whether applying `new` over `existing` changes nothing. An empty object sets no
/// field: over an existing object (someone else's labels, say) it is no change.
fn same(existing: Option<&Value>, new: &Value) -> bool {
    match (existing, new) {
        (Some(Value::Object(_)), Value::Object(m)) if m.is_empty() => true,
        (e, n) => e == Some(n),
    }
}

/// Checks a body against the URL (kind, name, namespace) and strips what the server
/// manages: `apiVersion`, `kind` and `status` go, server metadata stays for the caller
/// (a replace reads its resourceVersion).
fn check_body(
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
fn check_secret(obj: &mut Map<String, Value>) -> Result<(), KubeError> {
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

fn conflict_error(resource: Resource, name: &str, conflicts: &[(Managed, FieldPath)]) -> KubeError {
    // How the apiserver prints a manager: an Update manager with its API version.
    let who = |m: &Managed| match m.operation {
        Operation::Apply => format!("\"{}\"", m.manager),
        Operation::Update => format!("\"{}\" using {}", m.manager, resource.api_version()),
    };
    let causes: Vec<Cause> = conflicts
        .iter()
        .map(|(m, p)| Cause {
            reason: "FieldManagerConflict".into(),
            message: format!("conflict with {}", who(m)),
            field: fields::display(p),
        })
        .collect();
    let message = match conflicts {
        [(m, p)] => format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            who(m),
            fields::display(p)
        ),
        many => {
            let mut by: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (m, p) in many {
                by.entry(who(m)).or_default().push(fields::display(p));
            }
            let mut lines = Vec::new();
            for (m, paths) in by {
                lines.push(format!("conflicts with {m}:"));
                lines.extend(paths.into_iter().map(|p| format!("- {p}")));
            }
            format!("Apply failed with {} conflicts: {}", many.len(), lines.join("\n"))
        }
    };
    let mut e = KubeError::new(409, "Conflict", message).about(resource, name);
    e.details.causes = causes;
    e
}

/// Secret `stringData` is write-only: the server folds it into base64 `data` as it
/// decodes the body (so whoever wrote `stringData.k` owns `data.k`).
fn fold_string_data(obj: &mut Map<String, Value>) {
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

/// A field selector: `a=b`, `a==b`, `a!=b`, comma = AND.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses `s` for `resource`; a field the resource does not index is 400, with the
    /// apiserver's words.
    pub fn parse(s: &str, resource: Resource) -> Result<Self, KubeError> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, eq, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(KubeError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            if !Self::supported(resource).contains(&field) {
                return Err(KubeError::bad_request(format!("field label not supported: {field}")));
            }
            out.push((field.to_owned(), eq, value.trim().to_owned()));
        }
        Ok(Self(out))
    }

    fn supported(resource: Resource) -> &'static [&'static str] {
        match resource {
            Resource::Pod => &[
                "metadata.name",
                "metadata.namespace",
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
            ],
            Resource::Event => &[
                "metadata.name",
                "metadata.namespace",
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type",
            ],
            Resource::Secret => &["metadata.name", "metadata.namespace", "type"],
            Resource::Node => &["metadata.name", "spec.unschedulable"],
            Resource::Namespace => &["metadata.name", "status.phase"],
            _ => &["metadata.name", "metadata.namespace"],
        }
    }

    /// Whether the rendered object `o` is selected.
    pub fn matches(&self, o: &Value) -> bool {
        self.0.iter().all(|(field, eq, want)| {
            let pointer = format!("/{}", field.replace('.', "/"));
            let have = match o.pointer(&pointer) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) => n.to_string(),
                // An absent field reads as its zero value (`spec.unschedulable=false`).
                _ if field == "spec.unschedulable" => "false".to_owned(),
                _ => String::new(),
            };
            (have == *want) == *eq
        })
    }
}

/// A `continue` token as the apiserver makes it: base64 of
/// `{"v":"meta.k8s.io/v1","rv":N,"start":"<ns>/<name>\u0000"}`.
fn encode_continue(rv: u64, ns: &str, name: &str) -> String {
    let token = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{ns}/{name}\u{0}")});
    base64::engine::general_purpose::STANDARD.encode(token.to_string())
}

/// The (namespace, name) a page continues after; a token from before a compaction is
/// 410 Gone, an unreadable one 400.
fn decode_continue(token: &str, compacted: u64) -> Result<(String, String), KubeError> {
    let bad = || {
        KubeError::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let bytes = base64::engine::general_purpose::STANDARD.decode(token).map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    if rv < compacted {
        return Err(KubeError::expired(
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
        ));
    }
    let start = v.get("start").and_then(Value::as_str).ok_or_else(bad)?;
    let start = start.trim_end_matches('\u{0}');
    let (ns, name) = start.split_once('/').ok_or_else(bad)?;
    Ok((ns.to_owned(), name.to_owned()))
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
            FieldValidation::Strict,
            t(),
        )
    }

    fn ns(o: &mut Objects, name: &str) {
        apply(o, Resource::Namespace, None, name, json!({"metadata":{"name":name}}), "test", false)
            .unwrap();
    }

    /// A new Pod is `Pending` with its QoS class whatever status the client sent
    /// (the pod strategy's `PrepareForCreate`; "Configure Quality of Service for Pods").
    #[test]
    fn a_new_pod_is_pending_with_its_qos_class() {
        let mut o = Objects::default();
        ns(&mut o, "n");
        let pod = |name: &str, resources: Value| {
            json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":name,"namespace":"n"},
              "spec":{"containers":[{"name":"c","image":"i:1","resources":resources}]},
              "status":{"phase":"Running"}})
        };
        for (name, resources, qos) in [
            ("b", json!({}), "BestEffort"),
            ("u", json!({"requests":{"cpu":"100m"}}), "Burstable"),
            ("g", json!({"limits":{"cpu":"1","memory":"1Gi"}}), "Guaranteed"),
            (
                "h",
                json!({"limits":{"cpu":"1","memory":"1Gi"},"requests":{"cpu":"500m"}}),
                "Burstable",
            ),
        ] {
            let a = apply(&mut o, Resource::Pod, Some("n"), name, pod(name, resources), "k", false)
                .unwrap();
            assert_eq!(a.object["status"], json!({"phase":"Pending","qosClass":qos}), "{name}");
        }
    }

    fn bcd_like_daemonset(tolerations: Value) -> Value {
        json!({"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"d","namespace":"n",
            "labels":{"a":"b"}},
            "spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},
                "spec":{"tolerations":tolerations,"automountServiceAccountToken":false,
                    "containers":[{"name":"c","image":"i:1","args":[],
                        "resources":{"requests":{"cpu":"0.1","memory":"1024Mi"}}}]}}}})
    }

    /// Every answer is what the Go types write: each served kind, as created, read, listed
    /// and seen by a watch, is a fixed point of `kube_wire::encode`.
    #[test]
    fn every_answer_is_written_as_the_go_types_write_it() {
        let mut o = Objects::default();
        ns(&mut o, "n");
        let objects = [
            (Resource::Secret, json!({"metadata":{"name":"x","namespace":"n"},"data":{}})),
            (
                Resource::ServiceAccount,
                json!({"metadata":{"name":"x","namespace":"n"},"secrets":[]}),
            ),
            (
                Resource::ConfigMap,
                json!({"metadata":{"name":"x","namespace":"n","annotations":{}}}),
            ),
            (
                Resource::Service,
                json!({"metadata":{"name":"x","namespace":"n"},"spec":{"ports":[{"port":80}]}}),
            ),
            (
                Resource::Event,
                json!({"metadata":{"name":"x","namespace":"n"},
                "involvedObject":{"kind":"Pod","namespace":"n","name":"p"},"reason":"R"}),
            ),
            (
                Resource::Pod,
                json!({"metadata":{"name":"x","namespace":"n"},
                "spec":{"containers":[{"name":"c","image":"i","resources":{"limits":{"cpu":"0.5"}}}]}}),
            ),
            (Resource::DaemonSet, bcd_like_daemonset(json!([]))),
            (
                Resource::Deployment,
                json!({"metadata":{"name":"x","namespace":"n"},
                "spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},
                    "spec":{"containers":[{"name":"c","image":"i"}]}}}}),
            ),
            (Resource::Node, json!({"metadata":{"name":"x"},"spec":{"taints":[]}})),
        ];
        for (r, body) in objects {
            let name = body["metadata"]["name"].as_str().unwrap().to_owned();
            let made = apply(&mut o, r, r.namespaced().then_some("n"), &name, body, "t", false)
                .unwrap_or_else(|e| panic!("{r:?}: {e:?}"));
            let read = o.get("c1", r, Some("n"), &name).unwrap();
            assert_eq!(made.object, read);
            let mut encoded = read.clone();
            assert!(kube_wire::encode(r.wire(), &mut encoded).is_empty());
            assert_eq!(encoded, read, "{r:?} as answered is as Go writes it");
            assert_eq!(read["apiVersion"], r.api_version());
        }
        let pod = o.get("c1", Resource::Pod, Some("n"), "x").unwrap();
        assert_eq!(pod["spec"]["containers"][0]["resources"]["limits"]["cpu"], "500m");
        let ds = o.get("c1", Resource::DaemonSet, Some("n"), "d").unwrap();
        let spec = &ds["spec"]["template"]["spec"];
        assert!(spec.get("tolerations").is_none(), "{spec}");
        assert_eq!(
            spec["containers"][0]["resources"]["requests"],
            json!({"cpu":"100m","memory":"1Gi"})
        );
        assert!(spec["containers"][0].get("args").is_none());
        assert_eq!(spec["automountServiceAccountToken"], false);
        assert_eq!(ds["spec"]["template"]["metadata"]["creationTimestamp"], Value::Null);
        assert_eq!(ds["status"]["numberReady"], 0);
        assert_eq!(o.get("c1", Resource::Secret, Some("n"), "x").unwrap()["type"], "Opaque");
        for change in o.changes_since("c1", 0).unwrap() {
            let mut encoded = (*change.object).clone();
            kube_wire::encode(change.resource.wire(), &mut encoded);
            assert_eq!(encoded, *change.object, "watch event of {:?}", change.resource);
        }
    }

    /// A server-side apply that changes nothing changes nothing — including one whose body
    /// carries empty `omitempty` fields (`tolerations: []`, a toleration's `value: ""`)
    /// over an object stored without them: same resourceVersion, same managedFields time,
    /// no watch event.
    #[test]
    fn a_no_op_apply_with_empty_omitempty_fields_changes_nothing() {
        for tolerations in
            [json!([]), json!([{"key":"gpu","operator":"Equal","value":"","effect":"NoSchedule"}])]
        {
            let mut o = Objects::default();
            ns(&mut o, "n");
            let body = bcd_like_daemonset(tolerations.clone());
            let req = ApplyRequest {
                resource: Resource::DaemonSet,
                namespace: Some("n"),
                name: "d",
                body: &body,
                manager: "bc",
                force: true,
            };
            let at = |minutes| t() + time::Duration::minutes(minutes);
            let first = o.create("c1", &req, FieldValidation::Strict, at(0)).unwrap();
            let applied = o.apply("c1", &req, FieldValidation::Strict, at(5)).unwrap();
            let rv = applied.object["metadata"]["resourceVersion"].clone();
            let managed = applied.object["metadata"]["managedFields"].clone();
            let history = o.changes_since("c1", 0).unwrap().len();
            assert_ne!(first.object["metadata"]["resourceVersion"], rv, "the Apply manager is new");
            for minutes in [10, 20] {
                let again = o.apply("c1", &req, FieldValidation::Strict, at(minutes)).unwrap();
                assert_eq!(again.object["metadata"]["resourceVersion"], rv, "{tolerations}");
                assert_eq!(again.object["metadata"]["managedFields"], managed, "{tolerations}");
                assert_eq!(o.changes_since("c1", 0).unwrap().len(), history, "no watch event");
            }
        }
    }

    #[test]
    fn create_merge_noop_conflict_force() {
        let mut o = Objects::default();
        let nsv = json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n","labels":{"a":"1"}}});
        let a = apply(&mut o, Resource::Namespace, None, "n", nsv.clone(), "bc", false).unwrap();
        assert!(a.created);
        let rv = a.object["metadata"]["resourceVersion"].clone();
        let b = apply(&mut o, Resource::Namespace, None, "n", nsv.clone(), "bc", false).unwrap();
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
        assert_eq!(e.message, "Apply failed with 1 conflict: conflict with \"kubectl\": .data.k");
        let f = apply(&mut o, Resource::Secret, Some("n"), "s", ours, "bc", true).unwrap();
        assert_eq!(f.object["data"]["k"], json!("eA=="));
    }

    /// A `data` value wrapped over lines, as `kubectl kustomize` writes a long one, is
    /// taken (Go's base64 decoder skips line breaks) and reads back unwrapped; a value
    /// that is not base64 once unwrapped is still a 400.
    #[test]
    fn a_secret_value_wrapped_over_lines_is_taken_and_stored_unwrapped() {
        let mut o = Objects::default();
        ns(&mut o, "n");
        let wrapped = "cG9zdGdyZXM6Ly9iYzpjaGFuZ2UtbWVAcG9zdGdyZXMuYmV0dGVyLWNvbXB1dGUuc3ZjLm\nNsdXN0ZXIubG9jYWw6NTQzMi9iYw==\n";
        let sec = |v: &str| json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"n"},"data":{"url":v,"k":"dg=="}});
        let s = apply(&mut o, Resource::Secret, Some("n"), "s", sec(wrapped), "k", false).unwrap();
        assert_eq!(
            s.object["data"],
            json!({"url": wrapped.replace('\n', ""), "k": "dg=="}),
            "stored as the bytes it holds"
        );
        let e = apply(&mut o, Resource::Secret, Some("n"), "s", sec("no\tbase64\n"), "k", false)
            .unwrap_err();
        assert_eq!(e.code, 400);
        assert!(e.message.contains("illegal base64 data in data.url"), "{}", e.message);
    }

    #[test]
    fn conflicts_are_per_field_in_associative_lists_and_force_takes_exactly_them() {
        let mut o = Objects::default();
        ns(&mut o, "n");
        let ds = |image: &str, extra: Value| {
            let mut c = json!({"name":"c","image":image});
            patch::merge_patch(&mut c, &extra);
            json!({"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"x","namespace":"n"},
              "spec":{"selector":{"matchLabels":{"app":"x"}},"template":{"metadata":{"labels":{"app":"x"}},
              "spec":{"containers":[c]}}}})
        };
        apply(&mut o, Resource::DaemonSet, Some("n"), "x", ds("a:1", json!({})), "x", false)
            .unwrap();
        // Another manager sets the same image (shared) and its own env: no conflict.
        let theirs = ds("a:1", json!({"env":[{"name":"E","value":"1"}]}));
        apply(&mut o, Resource::DaemonSet, Some("n"), "x", theirs, "y", false).unwrap();
        // "x" changes the image: one conflict, named as Kubernetes names it.
        let e =
            apply(&mut o, Resource::DaemonSet, Some("n"), "x", ds("a:2", json!({})), "x", false)
                .unwrap_err();
        assert_eq!(
            e.message,
            "Apply failed with 1 conflict: conflict with \"y\": .spec.template.spec.containers[name=\"c\"].image"
        );
        let forced =
            apply(&mut o, Resource::DaemonSet, Some("n"), "x", ds("a:2", json!({})), "x", true)
                .unwrap();
        let c = &forced.object["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], "a:2");
        assert_eq!(c["env"], json!([{"name":"E","value":"1"}]), "y keeps its env");
        let managed = forced.object["metadata"]["managedFields"].as_array().unwrap();
        let y = managed.iter().find(|m| m["manager"] == "y").unwrap();
        let yc =
            &y["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"];
        assert!(yc.get("f:image").is_none(), "the forced field changed hands: {yc}");
        assert!(yc.get("f:env").is_some(), "nothing else did: {yc}");
        // Defaults are nobody's.
        assert_eq!(forced.object["spec"]["revisionHistoryLimit"], 10);
        assert!(
            managed.iter().all(|m| m["fieldsV1"]["f:spec"].get("f:revisionHistoryLimit").is_none())
        );
    }

    #[test]
    fn a_list_item_dropped_from_an_apply_goes_whole_even_with_defaults_in_it() {
        let mut o = Objects::default();
        ns(&mut o, "n");
        let ds = |env: Value| {
            json!({"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"x","namespace":"n"},
              "spec":{"selector":{"matchLabels":{"app":"x"}},"template":{"metadata":{"labels":{"app":"x"}},
              "spec":{"containers":[{"name":"c","image":"i:1","env":env}]}}}})
        };
        let node = json!({"name":"NODE","valueFrom":{"fieldRef":{"fieldPath":"spec.nodeName"}}});
        let a = apply(
            &mut o,
            Resource::DaemonSet,
            Some("n"),
            "x",
            ds(json!([{"name":"A","value":"1"}, node])),
            "m",
            false,
        )
        .unwrap();
        let env = &a.object["spec"]["template"]["spec"]["containers"][0]["env"];
        assert_eq!(env[1]["valueFrom"]["fieldRef"]["apiVersion"], "v1", "defaulted, nobody's");
        let b = apply(
            &mut o,
            Resource::DaemonSet,
            Some("n"),
            "x",
            ds(json!([{"name":"A","value":"1"}])),
            "m",
            false,
        )
        .unwrap();
        assert_eq!(
            b.object["spec"]["template"]["spec"]["containers"][0]["env"],
            json!([{"name":"A","value":"1"}])
        );
    }

    #[test]
    fn an_empty_map_neither_conflicts_nor_wipes_other_managers_fields() {
        let mut o = Objects::default();
        let nsv = json!({"metadata":{"name":"n","labels":{"team":"x"}}});
        apply(&mut o, Resource::Namespace, None, "n", nsv, "kubectl", false).unwrap();
        let ours = json!({"metadata":{"name":"n","labels":{}}});
        let r = apply(&mut o, Resource::Namespace, None, "n", ours.clone(), "bc", false).unwrap();
        assert_eq!(r.object["metadata"]["labels"]["team"], "x");
        let r = apply(&mut o, Resource::Namespace, None, "n", ours, "bc", true).unwrap();
        assert_eq!(r.object["metadata"]["labels"]["team"], "x");
    }

    #[test]
    fn dropped_fields_are_removed_and_namespace_delete_cascades() {
        let mut o = Objects::default();
        ns(&mut o, "n");
        let sa = json!({"metadata":{"labels":{"a":"1","b":"2"}}});
        apply(&mut o, Resource::ServiceAccount, Some("n"), "x", sa, "bc", false).unwrap();
        let sa = json!({"metadata":{"labels":{"a":"1"}}});
        let r = apply(&mut o, Resource::ServiceAccount, Some("n"), "x", sa, "bc", false).unwrap();
        assert_eq!(r.object["metadata"]["labels"], json!({"a":"1"}));
        let e = apply(&mut o, Resource::ServiceAccount, Some("zz"), "x", json!({}), "bc", false)
            .unwrap_err();
        assert_eq!(e.reason, "NotFound");
        let gone = o
            .delete(
                "c1",
                Resource::Namespace,
                None,
                "n",
                &Preconditions::default(),
                Propagation::Background,
                t(),
            )
            .unwrap();
        match gone {
            Deleted::Object(v) => assert_eq!(v["status"]["phase"], json!("Terminating")),
            other => panic!("{other:?}"),
        }
        assert!(o.get("c1", Resource::ServiceAccount, Some("n"), "x").is_err());
    }

    #[test]
    fn create_refuses_a_taken_name_and_replace_and_delete_check_their_preconditions() {
        let mut o = Objects::default();
        let nsv = json!({"metadata":{"name":"n","labels":{"team":"x"}}});
        let req = ApplyRequest {
            resource: Resource::Namespace,
            namespace: None,
            name: "n",
            body: &nsv,
            manager: "bc",
            force: false,
        };
        let made = o.create("c1", &req, FieldValidation::Strict, t()).unwrap();
        assert!(made.created);
        assert_eq!(made.object["metadata"]["managedFields"][0]["operation"], "Update");
        let e = o.create("c1", &req, FieldValidation::Strict, t()).unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));
        assert_eq!(e.message, "namespaces \"n\" already exists");

        let mut stale = made.object.clone();
        stale["metadata"]["resourceVersion"] = json!("1");
        stale["metadata"]["labels"]["team"] = json!("y");
        let newer = o
            .update(
                "c1",
                Resource::Namespace,
                None,
                "n",
                Edit::MergePatch(&json!({"metadata":{"labels":{"z":"1"}}})),
                "kubectl",
                FieldValidation::Strict,
                t(),
            )
            .unwrap();
        let e = o
            .update(
                "c1",
                Resource::Namespace,
                None,
                "n",
                Edit::Replace(&stale),
                "kubectl",
                FieldValidation::Strict,
                t(),
            )
            .unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
        assert!(e.message.contains("the object has been modified"), "{}", e.message);

        let uid = newer.object["metadata"]["uid"].as_str().unwrap().to_owned();
        let rv = newer.object["metadata"]["resourceVersion"].as_str().unwrap().to_owned();
        for pre in [
            Preconditions { uid: Some("other".into()), resource_version: None },
            Preconditions { uid: Some(uid.clone()), resource_version: Some("999".into()) },
        ] {
            let e = o
                .delete("c1", Resource::Namespace, None, "n", &pre, Propagation::Background, t())
                .unwrap_err();
            assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"), "{pre:?}");
            assert!(e.message.contains("Precondition failed"), "{}", e.message);
        }
        let pre = Preconditions { uid: Some(uid), resource_version: Some(rv) };
        o.delete("c1", Resource::Namespace, None, "n", &pre, Propagation::Background, t()).unwrap();
        assert!(o.get("c1", Resource::Namespace, None, "n").is_err());
    }

    #[test]
    fn pages_continue_and_history_compacts() {
        let mut o = Objects::default();
        for i in 0..5 {
            ns(&mut o, &format!("n{i}"));
        }
        let q = Query { limit: 2, ..Query::default() };
        let p1 = o.page("c1", Resource::Namespace, &q).unwrap();
        assert_eq!(p1.items.len(), 2);
        assert_eq!(p1.remaining, 3);
        let q2 = Query { limit: 2, continue_from: p1.next.clone(), ..Query::default() };
        let p2 = o.page("c1", Resource::Namespace, &q2).unwrap();
        assert_eq!(p2.items[0]["metadata"]["name"], "n2");
        let changes = o.changes_since("c1", 0).unwrap();
        assert_eq!(changes.len(), 5);
        for i in 0..WATCH_HISTORY + 10 {
            apply(
                &mut o,
                Resource::Namespace,
                None,
                "n0",
                json!({"metadata":{"labels":{"i":i.to_string()}}}),
                "test",
                false,
            )
            .unwrap();
        }
        let e = o.changes_since("c1", 1).unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
        let e = o.page("c1", Resource::Namespace, &q2).unwrap_err();
        assert_eq!(e.code, 410);
    }
}
