//! The Kubernetes API of every simulated cluster: an object store with server-side
//! apply (`store`), its HTTP face under `/k8s/{cluster_id}` (`http`), and a direct face
//! implementing the `ClusterApi` port without HTTP (`direct`).
//!
//! Invariant: both faces go through the same gate ([`KubeStore::gate`]: cluster present,
//! bearer token right, cluster running) and the same store, so they answer alike; every
//! error is a metav1 Status with `reason` set (research/kube-wire.md).

pub mod direct;
pub mod error;
pub mod fields;
mod http;
pub mod selector;
pub mod store;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use bc_domain::ports::{ObjectKind, Preconditions};
use bc_domain::time::Timestamp;
use serde_json::{Value, json};

pub use error::KubeError;
pub use selector::Selector;
pub use store::{Applied, ApplyRequest, Deleted};

use crate::interleave::Moment;
use crate::{SimNode, SimState};

/// The resources the simulated API serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    /// `v1` Namespace.
    Namespace,
    /// `v1` Secret.
    Secret,
    /// `v1` ServiceAccount.
    ServiceAccount,
    /// `apps/v1` DaemonSet.
    DaemonSet,
    /// `v1` Node (read-only; from the model).
    Node,
}

impl Resource {
    /// The URL plural.
    pub fn plural(self) -> &'static str {
        match self {
            Resource::Namespace => "namespaces",
            Resource::Secret => "secrets",
            Resource::ServiceAccount => "serviceaccounts",
            Resource::DaemonSet => "daemonsets",
            Resource::Node => "nodes",
        }
    }
    /// `kind`.
    pub fn kind(self) -> &'static str {
        match self {
            Resource::Namespace => "Namespace",
            Resource::Secret => "Secret",
            Resource::ServiceAccount => "ServiceAccount",
            Resource::DaemonSet => "DaemonSet",
            Resource::Node => "Node",
        }
    }
    /// `apiVersion`.
    pub fn api_version(self) -> &'static str {
        match self {
            Resource::DaemonSet => "apps/v1",
            _ => "v1",
        }
    }
    /// Whether objects live in a namespace.
    pub fn namespaced(self) -> bool {
        matches!(self, Resource::Secret | Resource::ServiceAccount | Resource::DaemonSet)
    }
    /// The resource of a port object kind.
    pub fn of(kind: ObjectKind) -> Self {
        match kind {
            ObjectKind::Namespace => Resource::Namespace,
            ObjectKind::Secret => Resource::Secret,
            ObjectKind::ServiceAccount => Resource::ServiceAccount,
            ObjectKind::DaemonSet => Resource::DaemonSet,
        }
    }
    /// The resource of an `apiVersion`/`kind` pair.
    pub fn from_type(api_version: &str, kind: &str) -> Option<Self> {
        [
            Resource::Namespace,
            Resource::Secret,
            Resource::ServiceAccount,
            Resource::DaemonSet,
            Resource::Node,
        ]
        .into_iter()
        .find(|r| r.api_version() == api_version && r.kind() == kind)
    }
}

/// Kubernetes `Time`: RFC 3339 in whole seconds, as the apiserver writes it.
pub fn kube_time(t: Timestamp) -> String {
    let s = t.to_rfc3339();
    format!("{}Z", &s[..19])
}

/// What a request does, for counters and fault injection: the same key on both faces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// POST to a collection.
    Create,
    /// PATCH with server-side apply.
    Apply,
    /// DELETE.
    Delete,
}

impl Verb {
    /// `get`, `list`, `create`, `apply`, `delete` (the Kubernetes audit verbs, with
    /// `apply` for server-side apply patches).
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Create => "create",
            Verb::Apply => "apply",
            Verb::Delete => "delete",
        }
    }

    /// Whether it changes objects.
    pub fn writes(self) -> bool {
        matches!(self, Verb::Create | Verb::Apply | Verb::Delete)
    }
}

/// The counter key of an operation: `"<verb> <plural>"`, e.g. `"apply secrets"`.
pub fn op_key(verb: Verb, resource: Resource) -> String {
    format!("{} {}", verb.as_str(), resource.plural())
}

/// The counter key of requests no route matched.
pub const UNMATCHED: &str = "(unmatched)";

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
}

/// Kubernetes objects of every simulated cluster, request counters and injected faults.
#[derive(Debug, Default)]
pub struct KubeStore {
    objects: Mutex<store::Objects>,
    /// Requests per (cluster id, operation key).
    counters: Mutex<BTreeMap<(String, String), u64>>,
    faults: Mutex<BTreeMap<String, Faults>>,
}

impl KubeStore {
    fn objects(&self) -> MutexGuard<'_, store::Objects> {
        self.objects.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts one request of `op` (see [`op_key`]) at `cluster_id`.
    pub fn count(&self, cluster_id: &str, op: &str) {
        let mut c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        *c.entry((cluster_id.to_owned(), op.to_owned())).or_default() += 1;
    }

    /// Requests of `op` (e.g. `"apply secrets"`, `"list nodes"`) at `cluster_id`, over
    /// both faces, whatever they were answered.
    pub fn request_count(&self, cluster_id: &str, op: &str) -> u64 {
        let c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        c.get(&(cluster_id.to_owned(), op.to_owned())).copied().unwrap_or(0)
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

    /// Lets a `verb` request on `resource` at `cluster_id` through, or says why not: 404
    /// NotFound when the cluster does not exist (or is gone), 401 Unauthorized when
    /// `bearer` is not its token, 503 ServiceUnavailable while it is not running, then
    /// any injected failure. Counts the request first and advances the model to now;
    /// before a write it runs what `SimState::interleave` queued for it.
    pub fn gate(
        state: &SimState,
        cluster_id: &str,
        bearer: Option<&str>,
        verb: Verb,
        resource: Resource,
    ) -> Result<ClusterView, KubeError> {
        let op = op_key(verb, resource);
        let op = op.as_str();
        state.kube.count(cluster_id, op);
        let now = state.clock.now();
        let mut model = state.model();
        model.advance(now);
        let Some(token) = model.cluster_api_token(cluster_id) else {
            return Err(KubeError::new(
                404,
                "NotFound",
                format!("cluster \"{cluster_id}\" not found"),
            ));
        };
        if bearer != Some(token.as_str()) {
            return Err(KubeError::unauthorized());
        }
        // A cluster that is gone (deleted) answers like an unknown one.
        let Some(nodes) = model.cluster_nodes(cluster_id, now) else {
            return Err(KubeError::new(
                404,
                "NotFound",
                format!("cluster \"{cluster_id}\" not found"),
            ));
        };
        if !model.cluster_is_running(cluster_id, now) {
            return Err(KubeError::new(
                503,
                "ServiceUnavailable",
                format!("the API of cluster \"{cluster_id}\" is not available yet"),
            ));
        }
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
        if verb.writes() {
            let moment = Moment::BeforeKubeWrite { cluster: cluster_id.to_owned(), resource };
            state.interleave.run(state, &moment);
        }
        Ok(ClusterView { nodes })
    }

    /// One object (`Node`s are not here: they come from the model).
    pub fn get(
        &self,
        cluster_id: &str,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, KubeError> {
        self.objects().get(cluster_id, resource, namespace, name)
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
        self.objects().list(cluster_id, resource, namespace, selector)
    }

    /// The current resource version of the store (list `metadata.resourceVersion`).
    pub fn resource_version(&self) -> u64 {
        self.objects().resource_version()
    }

    /// Server-side apply into a cluster's objects.
    pub fn apply(
        &self,
        cluster_id: &str,
        req: &ApplyRequest<'_>,
        now: Timestamp,
    ) -> Result<Applied, KubeError> {
        self.objects().apply(cluster_id, req, now)
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
                .filter(|r| *r != Resource::Node)
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
        self.objects().create(cluster_id, req, now)
    }

    /// Deletes an object if it meets `pre` (409 Conflict otherwise).
    pub fn delete(
        &self,
        cluster_id: &str,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
        pre: &Preconditions,
        now: Timestamp,
    ) -> Result<Deleted, KubeError> {
        self.objects().delete(cluster_id, resource, namespace, name, pre, now)
    }

    /// The clusters that hold objects.
    pub fn cluster_ids(&self) -> Vec<String> {
        self.objects().cluster_ids()
    }
}

/// A Node object as the API shows it.
pub fn node_json(n: &SimNode, resource_version: u64) -> Value {
    let taints: Vec<Value> = n
        .taints
        .iter()
        .map(|t| {
            let mut v = json!({"key": t.key, "effect": t.effect.as_str()});
            if !t.value.is_empty() {
                v["value"] = json!(t.value);
            }
            v
        })
        .collect();
    let (status, reason) =
        if n.ready { ("True", "KubeletReady") } else { ("False", "KubeletNotReady") };
    let mut spec = json!({"providerID": n.provider_id});
    if !taints.is_empty() {
        spec["taints"] = Value::Array(taints);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": n.name,
            "uid": format!("5e1a0000-0000-4000-9000-{:012x}", crate::fnv1a(&n.provider_id) & 0xffff_ffff_ffff),
            "resourceVersion": resource_version.to_string(),
            "labels": n.labels,
        },
        "spec": spec,
        "status": {
            "conditions": [{"type": "Ready", "status": status, "reason": reason}],
        },
    })
}

/// The routes under `/k8s/{cluster_id}`.
pub fn router(state: Arc<SimState>) -> axum::Router {
    http::router(state)
}

/// A handler for `/k8s/{cluster_id}/`: a nest does not reach the bare trailing slash, and
/// without this the request would fall through to the DigitalOcean face's answer instead
/// of the JSON 404 NotFound Status every unknown route gets (research/kube-wire.md).
pub fn root_route(state: Arc<SimState>) -> axum::routing::MethodRouter {
    axum::routing::any(http::unknown_route).with_state(state)
}
