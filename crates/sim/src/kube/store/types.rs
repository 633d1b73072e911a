//! What the store is made of: objects as stored (content, status, field ownership,
//! bookkeeping) keyed by resource, namespace and name, per cluster with its watch
//! history and its controllers' bookkeeping; the requests and answers of its reads and
//! writes; and the counters that hand out resource versions, uids and service addresses.
//!
//! Invariant: resource versions only grow (one sequence, [`Ids`], for every cluster,
//! drawn under the cluster's own lock, so a cluster's changes are numbered in the order
//! they happen), and a cluster's history keeps its newest [`WATCH_HISTORY`] changes,
//! remembering the newest it dropped so a watch from before it is 410 Gone.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use bc_domain::time::Timestamp;
use serde_json::Value;

use super::list::FieldSelector;
use crate::kube::fields::FieldPath;
use crate::kube::resource::Resource;
use crate::kube::selector::Selector;

/// Server-managed metadata: never taken from a request body.
pub(super) const SERVER_METADATA: &[&str] = &[
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
    pub(super) fn as_str(self) -> &'static str {
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
    /// The object as a read answers it, made on the first read after a change (every
    /// read rendered it anew, `managedFields` included: most of the simulated API's
    /// CPU). The store's writes replace a `Stored` whole, and its in-place changes
    /// (`modify`, `remove`) drop this with [`Stored::changed`].
    pub(crate) rendered: OnceLock<Arc<Value>>,
}

impl Stored {
    /// Drops the rendered object after an in-place change.
    pub(crate) fn changed(&mut self) {
        self.rendered = OnceLock::new();
    }
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
    pub(crate) controllers: ControllerState,
    pub(super) next_service_ip: u32,
}

/// Per-cluster controller bookkeeping, kept with the cluster's objects (`controllers`
/// reads and writes it).
#[derive(Debug, Default, Clone)]
pub struct ControllerState {
    pub(crate) bootstrapped: bool,
    /// The cluster change the controllers caught up to.
    pub(crate) seen: u64,
    /// Fingerprint of the model's nodes and the agents' outcomes at the last pass.
    pub(crate) world: u64,
}

/// Objects per cluster (the store keeps one cluster's in each, under a lock of its own)
/// and the sequences every cluster draws from.
#[derive(Debug, Default)]
pub(crate) struct Objects {
    pub(crate) clusters: BTreeMap<String, ClusterObjects>,
    pub(super) ids: Arc<Ids>,
}

/// The resourceVersion and uid sequences of the whole simulator: one, as before the
/// clusters had locks of their own, so a resourceVersion names one change of one cluster
/// and a watch woken by any cluster's change can tell whether its own moved.
#[derive(Debug, Default)]
pub(crate) struct Ids {
    resource_version: AtomicU64,
    uids: AtomicU64,
}

impl Ids {
    /// Sequences that go on from `resource_version` and `uids`.
    pub(super) fn at(resource_version: u64, uids: u64) -> Self {
        Self { resource_version: AtomicU64::new(resource_version), uids: AtomicU64::new(uids) }
    }

    /// Sequences that go on from where these stand, apart from them (a `dryRun`'s).
    fn apart(&self) -> Self {
        Self::at(self.resource_version(), self.uids())
    }

    /// Goes on from where `other` stands (a restore).
    pub(crate) fn go_on_from(&self, other: &Ids) {
        self.resource_version.store(other.resource_version(), Ordering::SeqCst);
        self.uids.store(other.uids(), Ordering::SeqCst);
    }

    /// The newest resourceVersion handed out.
    pub(crate) fn resource_version(&self) -> u64 {
        self.resource_version.load(Ordering::SeqCst)
    }

    /// The newest uid number handed out.
    pub(super) fn uids(&self) -> u64 {
        self.uids.load(Ordering::SeqCst)
    }

    /// The next resourceVersion (drawn under the changed cluster's lock).
    pub(super) fn next_rv(&self) -> u64 {
        self.resource_version.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn next_uid(&self) -> u64 {
        self.uids.fetch_add(1, Ordering::SeqCst) + 1
    }
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

pub(super) fn ns_key(resource: Resource, namespace: Option<&str>) -> String {
    if resource.namespaced() { namespace.unwrap_or_default().to_owned() } else { String::new() }
}

pub(super) fn manager_or_unknown(m: &str) -> &str {
    if m.is_empty() { "unknown" } else { m }
}

impl ClusterObjects {
    pub(super) fn record(&mut self, change: Change) {
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

    /// What saving keeps of the cluster (`Objects::to_saved`): its objects and counters,
    /// without the watch history or the controllers' bookkeeping.
    pub(crate) fn saved_part(&self) -> ClusterObjects {
        ClusterObjects {
            objects: self.objects.clone(),
            last_change: self.last_change,
            next_service_ip: self.next_service_ip,
            ..ClusterObjects::default()
        }
    }

    pub(super) fn namespace_exists(&self, ns: &str) -> bool {
        self.objects.contains_key(&(Resource::Namespace, String::new(), ns.to_owned()))
    }

    pub(super) fn service_ip(&mut self) -> String {
        // 10.245.0.1 is the `kubernetes` Service's (the first address of the service
        // subnet DOKS uses by default).
        self.next_service_ip += 1;
        let n = self.next_service_ip;
        format!("10.245.{}.{}", (n >> 8) & 0xff, n & 0xff)
    }
}

impl Objects {
    /// No objects, drawing from `ids`.
    pub(crate) fn sharing(ids: &Arc<Ids>) -> Objects {
        Objects { clusters: BTreeMap::new(), ids: Arc::clone(ids) }
    }

    /// The sequences these objects draw from.
    pub(crate) fn ids(&self) -> &Arc<Ids> {
        &self.ids
    }

    pub(super) fn next_rv(&mut self) -> u64 {
        self.ids.next_rv()
    }

    /// The current resource version (for list metadata).
    pub(crate) fn resource_version(&self) -> u64 {
        self.ids.resource_version()
    }

    pub(super) fn next_uid(&mut self) -> String {
        format!("5e1a0000-0000-4000-8000-{:012x}", self.ids.next_uid())
    }

    /// The resourceVersion of `cluster`'s last change (0: none).
    pub(crate) fn last_change_of(&self, cluster: &str) -> u64 {
        self.clusters.get(cluster).map_or(0, |c| c.last_change)
    }

    /// A copy of one cluster's objects to write on without keeping (`dryRun`): its
    /// sequences go on apart from the store's.
    pub(crate) fn scratch(&self, cluster: &str) -> Objects {
        let mut clusters = BTreeMap::new();
        if let Some(c) = self.clusters.get(cluster) {
            clusters.insert(cluster.to_owned(), c.clone());
        }
        Objects { clusters, ids: Arc::new(self.ids.apart()) }
    }

    pub(crate) fn cluster_mut(&mut self, cluster: &str) -> &mut ClusterObjects {
        self.clusters.entry(cluster.to_owned()).or_default()
    }

    pub(super) fn stored(&self, cluster: &str, key: &Key) -> Option<&Stored> {
        self.clusters.get(cluster).and_then(|c| c.objects.get(key))
    }

    pub(super) fn compacted_of(&self, cluster: &str) -> u64 {
        self.clusters.get(cluster).map_or(0, |c| c.compacted)
    }
}
