//! The Kubernetes API of every simulated cluster: an object store with the writes of an
//! API server (`store`: create, replace, patches, server-side apply, delete), its
//! decoding, defaults and validation (`decode`, `defaults`, `validate`) and Go's encoding
//! of every object it answers (by the field rules of `bc_domain::kube_wire`), the controllers
//! that make a cluster look real (`controllers`: system namespaces, Nodes from the
//! model, the DaemonSet controller whose pods run the simulated bcd), discovery and
//! OpenAPI (`discovery`, `openapi`), Table output (`table`) and the HTTP routes (`http`,
//! served over TLS per cluster, see `crate::Sim::serve`, or to a client in process, see
//! `crate::testing::Cloud`).
//!
//! Invariant: every request goes through the one gate ([`KubeStore::gate`]: cluster
//! present, bearer token right, cluster running, controllers caught up) and the one
//! store, however it arrived; every error is a metav1 Status with `reason` set
//! (research/kube-wire.md).

pub mod controllers;
pub mod decode;
pub mod defaults;
pub mod discovery;
pub mod error;
pub mod fields;
mod http;
pub mod openapi;
pub mod patch;
pub mod pod_security;
pub mod pod_start;
pub mod protobuf;
pub mod resource;
pub mod schema;
pub mod selector;
pub mod store;
pub mod table;
pub mod tokens;
pub mod validate;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use bc_domain::ports::{ObjectKind, Preconditions};
use bc_domain::time::Timestamp;
use serde_json::Value;

pub use decode::FieldValidation;
pub use error::KubeError;
pub use resource::Resource;
pub use selector::Selector;
pub use store::{
    Applied, ApplyRequest, Change, Deleted, Edit, EventType, FieldSelector, Page, Propagation,
    Query,
};

use crate::interleave::Moment;
use crate::{SimNode, SimState};

/// Kubernetes `Time`: RFC 3339 in whole seconds, as the apiserver writes it.
pub fn kube_time(t: Timestamp) -> String {
    let s = t.to_rfc3339();
    format!("{}Z", &s[..19])
}

/// What a request does, for counters and fault injection (the counter keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection with `watch=true`.
    Watch,
    /// POST to a collection.
    Create,
    /// PUT.
    Update,
    /// PATCH other than server-side apply.
    Patch,
    /// PATCH with server-side apply.
    Apply,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
}

impl Verb {
    /// Every verb.
    pub const ALL: [Verb; 9] = [
        Verb::Get,
        Verb::List,
        Verb::Watch,
        Verb::Create,
        Verb::Update,
        Verb::Patch,
        Verb::Apply,
        Verb::Delete,
        Verb::DeleteCollection,
    ];

    /// The Kubernetes audit verbs, with `apply` for server-side apply patches.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Apply => "apply",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }

    /// Whether it changes objects.
    pub fn writes(self) -> bool {
        matches!(
            self,
            Verb::Create
                | Verb::Update
                | Verb::Patch
                | Verb::Apply
                | Verb::Delete
                | Verb::DeleteCollection
        )
    }
}

/// The counter key of an operation: `"<verb> <plural>"`, e.g. `"apply secrets"`.
pub fn op_key(verb: Verb, resource: Resource) -> String {
    format!("{} {}", verb.as_str(), resource.plural())
}

/// The counter key of requests no route matched.
pub const UNMATCHED: &str = "(unmatched)";

/// The counter key of discovery, `/version` and OpenAPI requests.
pub const DISCOVERY: &str = "discovery";

/// Injected failures of one cluster's API.
#[derive(Debug, Default)]
struct Faults {
    /// (operation key or `None` for any, remaining count, HTTP status).
    pending: Vec<(Option<String>, usize, u16)>,
}

/// What the gate learned about a cluster it let a request through to.
#[derive(Debug, Clone)]
pub struct ClusterView {
    /// The cluster's nodes.
    pub nodes: Vec<SimNode>,
    /// The cluster's Kubernetes version (`v1.32.6`).
    pub version: String,
}

/// Kubernetes objects of every simulated cluster, request counters, injected faults, and
/// the signal watches wait on.
#[derive(Debug)]
pub struct KubeStore {
    /// Each cluster's objects under a lock of its own, as each real cluster has an API
    /// server of its own: requests to different clusters run at once (one lock over every
    /// cluster made the in-process clusters of the reconcile benchmark take turns on two
    /// cores).
    clusters: Mutex<BTreeMap<String, Arc<Mutex<store::Objects>>>>,
    /// The resourceVersion and uid sequences every cluster draws from.
    ids: Arc<store::Ids>,
    /// Requests per (cluster id, operation key).
    counters: Mutex<BTreeMap<(String, String), u64>>,
    faults: Mutex<BTreeMap<String, Faults>>,
    changed: tokio::sync::watch::Sender<u64>,
}

impl Default for KubeStore {
    fn default() -> Self {
        Self {
            clusters: Mutex::default(),
            ids: Arc::default(),
            counters: Mutex::default(),
            faults: Mutex::default(),
            changed: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl KubeStore {
    /// The lock of `cluster`'s objects, made when `make` and there is none yet.
    fn cell(&self, cluster: &str, make: bool) -> Option<Arc<Mutex<store::Objects>>> {
        let mut cells = self.clusters.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cell) = cells.get(cluster) {
            return Some(Arc::clone(cell));
        }
        make.then(|| {
            let cell = Arc::new(Mutex::new(store::Objects::sharing(&self.ids)));
            cells.insert(cluster.to_owned(), Arc::clone(&cell));
            cell
        })
    }

    /// Every cluster's id and lock, in cluster order (taken from the directory, which is
    /// let go before any of them is locked).
    fn cells(&self) -> Vec<(String, Arc<Mutex<store::Objects>>)> {
        let cells = self.clusters.lock().unwrap_or_else(|e| e.into_inner());
        cells.iter().map(|(id, cell)| (id.clone(), Arc::clone(cell))).collect()
    }

    fn objects(cell: &Mutex<store::Objects>) -> MutexGuard<'_, store::Objects> {
        // The lock order (crate::agents): a thread holding the joins that waited here
        // could deadlock against a write whose controllers wait for the joins — a bug to
        // fail on at once, whichever thread happens to be first.
        assert!(
            !crate::agents::joins_held_here(),
            "lock order: the clusters' objects are locked while the bcd joins are held"
        );
        cell.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs a change of `cluster`'s objects under its lock, then wakes the watches when
    /// the cluster changed.
    pub(crate) fn write<T>(&self, cluster: &str, f: impl FnOnce(&mut store::Objects) -> T) -> T {
        let cell = self.cell(cluster, true).expect("made when missing");
        let (out, moved) = {
            let mut o = Self::objects(&cell);
            let before = o.last_change_of(cluster);
            let out = f(&mut o);
            (out, o.last_change_of(cluster) != before)
        };
        if moved {
            self.changed.send_modify(|n| *n = n.wrapping_add(1));
        }
        out
    }

    /// Reads `cluster`'s objects under its lock (none when it never had any).
    pub(crate) fn read<T>(&self, cluster: &str, f: impl FnOnce(&store::Objects) -> T) -> T {
        match self.cell(cluster, false) {
            Some(cell) => f(&Self::objects(&cell)),
            None => f(&store::Objects::sharing(&self.ids)),
        }
    }

    /// Every cluster's objects as saved (`store::Objects::to_saved`: objects and
    /// counters, no watch history), copied one cluster at a time.
    pub(crate) fn copy_all(&self) -> store::Objects {
        let mut all = store::Objects::sharing(&self.ids);
        for (_, cell) in self.cells() {
            let o = Self::objects(&cell);
            all.clusters.extend(o.clusters.iter().map(|(id, c)| (id.clone(), c.saved_part())));
        }
        all
    }

    /// Replaces every cluster's objects and the sequences with `saved` (a restore, before
    /// any request).
    pub(crate) fn replace_all(&self, saved: store::Objects) {
        self.ids.go_on_from(saved.ids());
        let cells = saved.clusters.into_iter().map(|(id, c)| {
            let mut o = store::Objects::sharing(&self.ids);
            o.clusters.insert(id.clone(), c);
            (id, Arc::new(Mutex::new(o)))
        });
        *self.clusters.lock().unwrap_or_else(|e| e.into_inner()) = cells.collect();
    }

    /// A receiver that changes whenever any cluster's objects do (watches wait on it).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Counts one request of `op` (see [`op_key`]) at `cluster_id`.
    pub fn count(&self, cluster_id: &str, op: &str) {
        let mut c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        *c.entry((cluster_id.to_owned(), op.to_owned())).or_default() += 1;
    }

    /// Requests of `op` (e.g. `"apply secrets"`, `"list nodes"`) at `cluster_id`, however
    /// they arrived and whatever they were answered.
    pub fn request_count(&self, cluster_id: &str, op: &str) -> u64 {
        let c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        c.get(&(cluster_id.to_owned(), op.to_owned())).copied().unwrap_or(0)
    }

    /// The write requests (create, update, patch, apply, delete) made at `cluster_id`
    /// over both faces, per operation key, whatever they were answered.
    pub fn write_counts(&self, cluster_id: &str) -> BTreeMap<String, u64> {
        let writes = |op: &str| {
            let verb = op.split(' ').next().unwrap_or_default();
            Verb::ALL.iter().any(|v| v.writes() && v.as_str() == verb)
        };
        let c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        c.iter()
            .filter(|((cluster, op), _)| cluster == cluster_id && writes(op))
            .map(|((_, op), n)| (op.clone(), *n))
            .collect()
    }

    /// Every counter: (cluster id, operation key) → requests.
    pub fn request_counts(&self) -> BTreeMap<(String, String), u64> {
        self.counters.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Makes the next `n` requests at `cluster_id` (of operation `op`, or of any when
    /// `None`) that pass authentication fail with `code` (500 InternalError, 429
    /// TooManyRequests, 403 Forbidden, 409 Conflict, 503 ServiceUnavailable, else
    /// BadRequest).
    pub fn inject_failures(&self, cluster_id: &str, op: Option<&str>, n: usize, code: u16) {
        let mut f = self.faults.lock().unwrap_or_else(|e| e.into_inner());
        f.entry(cluster_id.to_owned()).or_default().pending.push((op.map(str::to_owned), n, code));
    }

    /// Drops every injected failure.
    pub fn clear_faults(&self) {
        self.faults.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    fn take_fault(&self, cluster_id: &str, op: &str) -> Option<u16> {
        let mut f = self.faults.lock().unwrap_or_else(|e| e.into_inner());
        let faults = f.get_mut(cluster_id)?;
        let slot = faults
            .pending
            .iter_mut()
            .find(|(o, n, _)| *n > 0 && o.as_deref().is_none_or(|o| o == op))?;
        slot.1 -= 1;
        let code = slot.2;
        faults.pending.retain(|(_, n, _)| *n > 0);
        Some(code)
    }

    /// Lets a `verb` request on `resource` at `cluster_id` through, or says why not (see
    /// [`Self::gate_op`]).
    pub fn gate(
        state: &SimState,
        cluster_id: &str,
        bearer: Option<&str>,
        verb: Verb,
        resource: Resource,
    ) -> Result<ClusterView, KubeError> {
        let moment = verb.writes().then_some(resource);
        Self::gate_op(state, cluster_id, bearer, &op_key(verb, resource), moment)
    }

    /// Lets a request (counted as `op`) at `cluster_id` through, or says why not: 404
    /// NotFound when the cluster does not exist (or is gone), 401 Unauthorized when
    /// `bearer` is not its token, 503 ServiceUnavailable while it is not running, then
    /// any injected failure. Counts the request first, advances the model to now and
    /// lets the cluster's controllers catch up; before a write to a `writes` object it
    /// runs what `SimState::interleave` queued for it.
    pub fn gate_op(
        state: &SimState,
        cluster_id: &str,
        bearer: Option<&str>,
        op: &str,
        writes: Option<Resource>,
    ) -> Result<ClusterView, KubeError> {
        state.kube.count(cluster_id, op);
        let now = state.clock.now();
        // Only an Autopilot cluster's nodes follow its workload: its Pods are counted
        // before the model is locked (the model lock is never held while waiting for the
        // store's).
        let autopilot = state.model().gke_is_autopilot(cluster_id);
        let workload = autopilot
            .then(|| state.kube.read(cluster_id, |o| controllers::workload_pods(o, cluster_id)));
        let mut model = state.model();
        model.advance(now);
        if let Some(workload) = workload {
            model.gke_autopilot_demand(cluster_id, workload, now);
        }
        let gone =
            || KubeError::new(404, "NotFound", format!("cluster \"{cluster_id}\" not found"));
        if model.cluster_api_token(cluster_id).is_none() {
            return Err(gone());
        }
        if !model.cluster_accepts(cluster_id, bearer, now) {
            return Err(KubeError::unauthorized());
        }
        // A cluster that is gone (deleted) answers like an unknown one.
        let Some(nodes) = model.cluster_nodes(cluster_id, now) else {
            return Err(gone());
        };
        if !model.cluster_is_running(cluster_id, now) {
            return Err(KubeError::new(
                503,
                "ServiceUnavailable",
                format!("the API of cluster \"{cluster_id}\" is not available yet"),
            ));
        }
        let version = model.cluster_kubernetes_version(cluster_id).unwrap_or_default();
        drop(model);
        if let Some(code) = state.kube.take_fault(cluster_id, op) {
            let reason = match code {
                500 => "InternalError",
                429 => "TooManyRequests",
                403 => "Forbidden",
                409 => "Conflict",
                503 => "ServiceUnavailable",
                _ => "BadRequest",
            };
            return Err(KubeError::new(code, reason, format!("injected failure of {op}")));
        }
        controllers::sync(state, cluster_id, &nodes, now);
        if let Some(resource) = writes {
            let moment = Moment::BeforeKubeWrite { cluster: cluster_id.to_owned(), resource };
            state.interleave.run(state, &moment);
        }
        Ok(ClusterView { nodes, version })
    }

    /// One object.
    pub fn get(
        &self,
        cluster_id: &str,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, KubeError> {
        self.read(cluster_id, |o| o.get(cluster_id, resource, namespace, name))
    }

    /// One object of a port kind, if present.
    pub fn get_object(
        &self,
        cluster_id: &str,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        self.get(cluster_id, Resource::of(kind), namespace, name).ok()
    }

    /// Objects of a resource, in one namespace (`None`: all), matching `selector`.
    pub fn list(
        &self,
        cluster_id: &str,
        resource: Resource,
        namespace: Option<&str>,
        selector: &Selector,
    ) -> Vec<Value> {
        self.read(cluster_id, |o| o.list(cluster_id, resource, namespace, selector))
    }

    /// One page of a list.
    pub fn page(
        &self,
        cluster_id: &str,
        resource: Resource,
        query: &Query,
    ) -> Result<Page, KubeError> {
        self.read(cluster_id, |o| o.page(cluster_id, resource, query))
    }

    /// The changes of a cluster after resourceVersion `since` (410 Gone when some are no
    /// longer kept).
    pub fn changes_since(&self, cluster_id: &str, since: u64) -> Result<Vec<Change>, KubeError> {
        self.read(cluster_id, |o| o.changes_since(cluster_id, since))
    }

    /// The changes of a cluster after `since` and the store's resourceVersion when they
    /// were read (every change of the cluster up to it is in the list).
    pub fn changes_after(
        &self,
        cluster_id: &str,
        since: u64,
    ) -> Result<(Vec<Change>, u64), KubeError> {
        // Read under the cluster's lock: every change of the cluster numbered up to the
        // sequence's value then is in the list, and every later one is numbered above it.
        self.read(cluster_id, |o| Ok((o.changes_since(cluster_id, since)?, o.resource_version())))
    }

    /// Lets a cluster's controllers catch up with the model at the clock's now, without
    /// counting a request (a quiet watch does this on its ticks).
    pub fn refresh(state: &SimState, cluster_id: &str) {
        let now = state.clock.now();
        let nodes = {
            let mut model = state.model();
            model.advance(now);
            if !model.cluster_is_running(cluster_id, now) {
                return;
            }
            model.cluster_nodes(cluster_id, now)
        };
        if let Some(nodes) = nodes {
            controllers::sync(state, cluster_id, &nodes, now);
        }
    }

    /// The current resource version of the store (list `metadata.resourceVersion`).
    pub fn resource_version(&self) -> u64 {
        self.ids.resource_version()
    }

    /// Server-side apply into a cluster's objects (unknown fields dropped with a
    /// warning, the server default).
    pub fn apply(
        &self,
        cluster_id: &str,
        req: &ApplyRequest<'_>,
        now: Timestamp,
    ) -> Result<Applied, KubeError> {
        self.apply_with(cluster_id, req, FieldValidation::Warn, now)
    }

    /// Server-side apply with a `fieldValidation` mode.
    pub fn apply_with(
        &self,
        cluster_id: &str,
        req: &ApplyRequest<'_>,
        validation: FieldValidation,
        now: Timestamp,
    ) -> Result<Applied, KubeError> {
        self.write(cluster_id, |o| o.apply(cluster_id, req, validation, now))
    }

    /// Applies a full manifest (its `apiVersion`, `kind`, `metadata.name` and
    /// `metadata.namespace` say where) as `manager` — e.g. a "foreign" Namespace made by
    /// `kubectl` without our label.
    pub fn apply_manifest(
        &self,
        cluster_id: &str,
        manager: &str,
        manifest: &Value,
        force: bool,
        now: Timestamp,
    ) -> Result<Applied, KubeError> {
        let s = |p: &str| manifest.pointer(p).and_then(Value::as_str);
        let resource =
            Resource::from_type(s("/apiVersion").unwrap_or(""), s("/kind").unwrap_or(""))
                .ok_or_else(|| KubeError::bad_request("unsupported apiVersion/kind"))?;
        let name = s("/metadata/name").ok_or_else(|| KubeError::bad_request("no metadata.name"))?;
        self.apply(
            cluster_id,
            &ApplyRequest {
                resource,
                namespace: s("/metadata/namespace"),
                name,
                body: manifest,
                manager,
                force,
            },
            now,
        )
    }

    /// Creates an object (409 AlreadyExists when its name is taken).
    pub fn create(
        &self,
        cluster_id: &str,
        req: &ApplyRequest<'_>,
        now: Timestamp,
    ) -> Result<Applied, KubeError> {
        self.create_with(cluster_id, req, FieldValidation::Warn, now)
    }

    /// Creates an object with a `fieldValidation` mode.
    pub fn create_with(
        &self,
        cluster_id: &str,
        req: &ApplyRequest<'_>,
        validation: FieldValidation,
        now: Timestamp,
    ) -> Result<Applied, KubeError> {
        self.write(cluster_id, |o| o.create(cluster_id, req, validation, now))
    }

    /// Replaces or patches an object as field manager `manager` (404 when absent, 409
    /// when a replace carries a stale resourceVersion).
    #[allow(clippy::too_many_arguments)]
    pub fn update(
        &self,
        cluster_id: &str,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
        edit: Edit<'_>,
        manager: &str,
        validation: FieldValidation,
        now: Timestamp,
    ) -> Result<Applied, KubeError> {
        self.write(cluster_id, |o| {
            o.update(cluster_id, resource, namespace, name, edit, manager, validation, now)
        })
    }

    /// Deletes an object if it meets `pre` (409 Conflict otherwise); its dependents go
    /// too (background propagation).
    pub fn delete(
        &self,
        cluster_id: &str,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
        pre: &Preconditions,
        now: Timestamp,
    ) -> Result<Deleted, KubeError> {
        self.delete_with(cluster_id, resource, namespace, name, pre, Propagation::Background, now)
    }

    /// Deletes an object with a propagation policy.
    #[allow(clippy::too_many_arguments)]
    pub fn delete_with(
        &self,
        cluster_id: &str,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
        pre: &Preconditions,
        propagation: Propagation,
        now: Timestamp,
    ) -> Result<Deleted, KubeError> {
        self.write(cluster_id, |o| {
            o.delete(cluster_id, resource, namespace, name, pre, propagation, now)
        })
    }

    /// The clusters that hold objects.
    pub fn cluster_ids(&self) -> Vec<String> {
        // A cell is made by the first write to its cluster, even one that stored nothing.
        self.cells()
            .into_iter()
            .filter(|(id, cell)| Self::objects(cell).clusters.contains_key(id))
            .map(|(id, _)| id)
            .collect()
    }
}

/// The routes of one cluster's API, served at the root of its own TLS address.
pub fn cluster_router(state: Arc<SimState>, cluster_id: &str) -> axum::Router {
    http::router(state, Some(cluster_id.to_owned()))
}

/// The routes under `/k8s/{cluster_id}` on the DigitalOcean listener (plain HTTP, kept for
/// curl and for clients given such a URL).
pub fn router(state: Arc<SimState>) -> axum::Router {
    http::router(state, None)
}

/// A handler for `/k8s/{cluster_id}/`: a nest does not reach the bare trailing slash, and
/// without this the request would fall through to the DigitalOcean face's answer instead
/// of the JSON 404 NotFound Status every unknown route gets (research/kube-wire.md).
pub fn root_route(state: Arc<SimState>) -> axum::routing::MethodRouter {
    axum::routing::any(http::unknown_route).with_state(http::Ctx { state, cluster: None })
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn namespace(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    }

    /// Each cluster's objects have a lock of their own: a write to one cluster goes
    /// through while another cluster's objects are held (under the one lock every
    /// cluster shared, it waited — and the reconcile benchmark's clusters took turns on
    /// two cores); the one sequence still numbers every change of every cluster apart.
    #[test]
    fn a_cluster_is_written_while_another_clusters_objects_are_held() {
        let now = Timestamp::from_unix_ms(1_800_000_000_000);
        let kube = Arc::new(KubeStore::default());
        let first = kube.apply_manifest("b", "test", &namespace("before"), false, now).unwrap();
        let (held_tx, held) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let k = kube.clone();
        let holder = std::thread::spawn(move || {
            k.write("b", |_| {
                held_tx.send(()).unwrap();
                // Bounded: the test releases it, or it lets go on its own.
                let _ = release_rx.recv_timeout(Duration::from_secs(60));
            })
        });
        held.recv().unwrap();
        let (done_tx, done) = mpsc::channel();
        let k = kube.clone();
        let writer = std::thread::spawn(move || {
            let r = k.apply_manifest("a", "test", &namespace("one"), false, now);
            let _ = done_tx.send(r.map(|a| a.object));
        });
        let written = done.recv_timeout(Duration::from_secs(20));
        release.send(()).unwrap();
        holder.join().unwrap();
        writer.join().unwrap();
        let a = written.expect("cluster a's write waited for cluster b's objects").unwrap();
        let b = kube.apply_manifest("b", "test", &namespace("after"), false, now).unwrap();
        let rv = |o: &Value| o["metadata"]["resourceVersion"].as_str().unwrap().parse::<u64>();
        let (first, a, b) = (rv(&first.object).unwrap(), rv(&a).unwrap(), rv(&b.object).unwrap());
        assert!(first < a && a < b, "one sequence for every cluster: {first}, {a}, {b}");
        assert_eq!(kube.resource_version(), b);
        assert_eq!(kube.cluster_ids(), vec!["a".to_owned(), "b".to_owned()]);
    }

    /// A write that changes its cluster wakes the watches; one that changes nothing
    /// does not.
    #[test]
    fn only_a_write_that_changes_its_cluster_wakes_the_watches() {
        let now = Timestamp::from_unix_ms(1_800_000_000_000);
        let kube = KubeStore::default();
        let mut watch = kube.subscribe();
        kube.apply_manifest("a", "test", &namespace("one"), false, now).unwrap();
        assert!(watch.has_changed().unwrap());
        watch.mark_unchanged();
        kube.apply_manifest("a", "test", &namespace("one"), false, now).unwrap();
        assert!(!watch.has_changed().unwrap(), "the same apply again changes nothing");
        kube.apply_manifest("b", "test", &namespace("two"), false, now).unwrap();
        assert!(watch.has_changed().unwrap());
    }
}
