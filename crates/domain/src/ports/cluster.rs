//! The `ClusterApi` port: reaching a cluster's Kubernetes API with its credentials; the
//! one ownership rule every cluster adapter applies (over the primitive operations of
//! [`ClusterOps`]); and [`ClusterSession`], which keeps a cluster reachable across token
//! expiry by minting new credentials at the provider.
//!
//! Invariant: `apply_owned` and `delete_owned` read the object first and never patch or
//! delete one that lacks the owner label (or carries another value of it): an absent
//! object is created (never applied, which could merge into one made meanwhile), a
//! delete carries the uid and resourceVersion it read as preconditions, and `force` is
//! used only on objects that carry the label. This rule exists once, here; adapters
//! implement only [`ClusterOps`].

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::Timestamp;
use crate::model::SecretString;
use crate::ports::provider::ProviderError;
use crate::ports::provider::ProviderImpl;

/// The kinds of object we manage in clusters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ObjectKind {
    /// `v1` Namespace (cluster-scoped).
    Namespace,
    /// `v1` Secret.
    Secret,
    /// `v1` ServiceAccount.
    ServiceAccount,
    /// `apps/v1` DaemonSet.
    DaemonSet,
}

impl ObjectKind {
    /// `apiVersion`.
    pub fn api_version(self) -> &'static str {
        match self {
            ObjectKind::DaemonSet => "apps/v1",
            _ => "v1",
        }
    }
    /// `kind`.
    pub fn kind(self) -> &'static str {
        match self {
            ObjectKind::Namespace => "Namespace",
            ObjectKind::Secret => "Secret",
            ObjectKind::ServiceAccount => "ServiceAccount",
            ObjectKind::DaemonSet => "DaemonSet",
        }
    }
}

/// Which object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ObjectRef {
    /// Kind.
    pub kind: ObjectKind,
    /// Namespace (`None` for Namespaces).
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {}/{}", self.kind.kind(), ns, self.name),
            None => write!(f, "{} {}", self.kind.kind(), self.name),
        }
    }
}

/// An object to apply: its ref and its full manifest (with `apiVersion`, `kind`,
/// `metadata.labels` including the owner label). `Debug` shows a Secret's keys but not
/// its values (the join token).
#[derive(Clone, PartialEq)]
pub struct KubeObject {
    /// Which object.
    pub object: ObjectRef,
    /// The manifest.
    pub manifest: serde_json::Value,
}

impl std::fmt::Debug for KubeObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut shown = self.manifest.clone();
        if self.object.kind == ObjectKind::Secret
            && let Some(m) = shown.as_object_mut()
        {
            for field in ["data", "stringData"] {
                if let Some(serde_json::Value::Object(values)) = m.get_mut(field) {
                    for v in values.values_mut() {
                        *v = serde_json::Value::String("[redacted]".into());
                    }
                } else if m.contains_key(field) {
                    m.insert(field.into(), serde_json::Value::String("[redacted]".into()));
                }
            }
        }
        f.debug_struct("KubeObject")
            .field("object", &self.object)
            .field("manifest", &shown)
            .finish()
    }
}

impl KubeObject {
    /// The values a Secret carries, each as sent and (for `data`) as decoded text: what
    /// an error about this object must not quote (a server's validation message may).
    /// Empty for any other kind.
    pub fn secret_values(&self) -> Vec<String> {
        use base64::Engine as _;
        if self.object.kind != ObjectKind::Secret {
            return Vec::new();
        }
        let mut out = Vec::new();
        for field in ["data", "stringData"] {
            let Some(serde_json::Value::Object(values)) = self.manifest.get(field) else {
                continue;
            };
            for v in values.values().filter_map(serde_json::Value::as_str) {
                out.push(v.to_owned());
                let decoded = (field == "data")
                    .then(|| base64::engine::general_purpose::STANDARD.decode(v).ok())
                    .flatten()
                    .and_then(|b| String::from_utf8(b).ok());
                out.extend(decoded);
            }
        }
        out
    }
}

/// The label that marks objects as ours: `key=value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerLabel {
    /// Key, e.g. `better-compute.dev/substrate-pool`.
    pub key: String,
    /// Value, e.g. the pool id.
    pub value: String,
}

/// What `apply_owned` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// The object did not exist and was created.
    Created,
    /// The object was ours and was applied (maybe with no change).
    Applied,
    /// The object exists without our label (or with another owner): not touched.
    Foreign {
        /// The owner label's value on it, if any.
        owner: Option<String>,
    },
}

/// What `delete_owned` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// Deleted (or deletion started).
    Deleted,
    /// Already absent.
    Absent,
    /// Exists without our label: not touched.
    Foreign {
        /// The owner label's value on it, if any.
        owner: Option<String>,
    },
}

/// A Node as the cluster lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterNode {
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// `spec.providerID`.
    pub provider_id: Option<String>,
    /// Ready condition true.
    pub ready: bool,
}

/// What a cluster's TokenReview API (`authentication.k8s.io/v1`) said of a bearer token:
/// the `status` of the review, as the API server fills it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenReview {
    /// Whether the token is valid for one of the audiences asked.
    pub authenticated: bool,
    /// `user.username` (`system:serviceaccount:<namespace>:<name>` for a ServiceAccount).
    pub username: String,
    /// `user.uid`.
    pub uid: String,
    /// `user.groups`.
    pub groups: Vec<String>,
    /// `user.extra`: for a bound token, `authentication.kubernetes.io/pod-name`,
    /// `pod-uid`, `node-name`, `node-uid` and `credential-id`.
    pub extra: BTreeMap<String, Vec<String>>,
    /// The audiences the token is valid for, of those asked.
    pub audiences: Vec<String>,
    /// Why the token was not authenticated, as the server says it.
    pub error: Option<String>,
}

/// A Service of type `LoadBalancer` as the cluster lists it: what the cloud's service
/// controller made a load balancer at the provider for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadBalancerService {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid` (cloud providers name their load balancer after it).
    pub uid: String,
    /// `status.loadBalancer.ingress[]`: each IP (or hostname) the provider gave it.
    pub ingress: Vec<String>,
}

/// A PersistentVolume by where its storage lives (a disk at the provider).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistentVolumeInfo {
    /// `metadata.name`.
    pub name: String,
    /// `spec.csi.driver`, for a CSI volume.
    pub csi_driver: Option<String>,
    /// `spec.csi.volumeHandle`, for a CSI volume.
    pub volume_handle: Option<String>,
    /// `spec.gcePersistentDisk.pdName`, for an in-tree GCE disk.
    pub gce_pd_name: Option<String>,
    /// Its zone, from the `topology.kubernetes.io/zone` label (or the older
    /// `failure-domain.beta.kubernetes.io/zone`).
    pub zone: Option<String>,
    /// `spec.claimRef` as `namespace/name`, when it is bound.
    pub claim: Option<String>,
}

/// What a cluster's own controllers asked its provider for, as the cluster records it:
/// its Services of type `LoadBalancer` (every namespace) and its PersistentVolumes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderBacked {
    /// Services of type `LoadBalancer`.
    pub load_balancer_services: Vec<LoadBalancerService>,
    /// PersistentVolumes.
    pub persistent_volumes: Vec<PersistentVolumeInfo>,
}

/// Errors reaching a cluster.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    /// The kubeconfig could not be used, or the cluster refused its token (401: expired
    /// or revoked). Mint new credentials at the provider ([`ClusterSession`] does).
    #[error("invalid cluster credentials: {0}")]
    Credentials(String),
    /// The API could not be reached, or answered 5xx/429.
    #[error("cluster API unreachable: {0}")]
    Unreachable(String),
    /// The API refused the request (4xx other than not-found).
    #[error("cluster API refused the request: {0}")]
    Refused(String),
    /// Server-side apply conflicted with another field manager, or the object kept
    /// changing under a read-then-write.
    #[error("apply conflict: {0}")]
    Conflict(String),
    /// The provider could not hand out the cluster's credentials (the cluster is gone,
    /// still provisioning, the account is refused, throttled…).
    #[error("cluster credentials from the provider: {0}")]
    Provider(ProviderError),
}

/// A failed primitive operation (see [`ClusterOps`]), as
/// `bc_providers::classify::kubernetes::classify_status` reads a Status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectError {
    /// The object (or its namespace) does not exist.
    NotFound,
    /// A create found the name taken.
    AlreadyExists,
    /// A field-manager conflict or a failed precondition.
    Conflict(String),
    /// Anything else.
    Failed(ClusterError),
}

impl From<ClusterError> for ObjectError {
    fn from(e: ClusterError) -> Self {
        ObjectError::Failed(e)
    }
}

impl ObjectError {
    /// As a [`ClusterError`], for a caller for whom no class of it is an answer
    /// (`what` names the object or list).
    pub fn into_cluster_error(self, what: &dyn std::fmt::Display) -> ClusterError {
        match self {
            // Not the object's own absence (callers answer that), but something it needs
            // (its namespace, the API path): retrying does not fix it.
            ObjectError::NotFound => ClusterError::Refused(format!("{what}: not found")),
            ObjectError::AlreadyExists => {
                ClusterError::Conflict(format!("{what} was created by someone else"))
            }
            ObjectError::Conflict(m) => ClusterError::Conflict(m),
            ObjectError::Failed(e) => e,
        }
    }
}

/// What a read of an object returns: its labels and identity, and its content with
/// every Secret value replaced by its digest (see [`ObjectMeta::of`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectMeta {
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.uid`.
    pub uid: Option<String>,
    /// `metadata.resourceVersion`.
    pub resource_version: Option<String>,
    /// The object as the server shows it, a Secret's values digested
    /// ([`digest_secret_values`]): what a caller compares with the manifest it would
    /// apply ([`manifest_in_place`]) without a secret ever leaving the adapter.
    pub content: serde_json::Value,
}

impl ObjectMeta {
    /// The meta of an object of `kind` as the server answered it (JSON). Every cluster
    /// adapter builds its answer to [`ClusterOps::read`] with this one function.
    pub fn of(kind: ObjectKind, object: &serde_json::Value) -> Self {
        let text = |p: &str| object.pointer(p).and_then(|v| v.as_str()).map(str::to_owned);
        let labels = object
            .pointer("/metadata/labels")
            .and_then(|l| l.as_object())
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        let content =
            if kind == ObjectKind::Secret { digest_secret_values(object) } else { object.clone() };
        Self {
            labels,
            uid: text("/metadata/uid"),
            resource_version: text("/metadata/resourceVersion"),
            content,
        }
    }
}

/// An object found in a namespace, by what decides whose it is: its labels and the
/// objects that own it (`metadata.ownerReferences`, as the garbage collector reads them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespacedObject {
    /// `kind`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: Option<String>,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.ownerReferences`.
    pub owners: Vec<OwnerReference>,
}

/// One entry of `metadata.ownerReferences`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnerReference {
    /// The owner's `kind`.
    pub kind: String,
    /// The owner's name (in the same namespace).
    pub name: String,
    /// The owner's uid.
    pub uid: String,
}

impl std::fmt::Display for NamespacedObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind, self.name)
    }
}

/// The value a Secret key's digest takes when its `data` is not valid base64.
pub const UNREADABLE_SECRET_VALUE: &str = "unreadable";

/// A Secret with its values replaced by their SHA-256 (`token::sha256_hex`, the hash
/// every stored secret has): `data` values are base64-decoded first, `stringData`
/// values (a server folds them into `data`) are taken as they are and folded into
/// `data`. So a join token in a Secret compares equal to its stored hash, and nothing
/// derived from the object carries the secret.
pub fn digest_secret_values(secret: &serde_json::Value) -> serde_json::Value {
    use base64::Engine as _;
    use serde_json::Value;
    let mut out = secret.clone();
    let Some(obj) = out.as_object_mut() else { return out };
    let mut digests = serde_json::Map::new();
    if let Some(Value::Object(data)) = obj.remove("data") {
        for (k, v) in data {
            let decoded =
                v.as_str().and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
            let digest = match decoded {
                Some(bytes) => crate::token::sha256_hex(&bytes),
                None => UNREADABLE_SECRET_VALUE.to_owned(),
            };
            digests.insert(k, Value::String(digest));
        }
    }
    if let Some(Value::Object(data)) = obj.remove("stringData") {
        for (k, v) in data {
            let digest = crate::token::sha256_hex(v.as_str().unwrap_or_default().as_bytes());
            digests.insert(k, Value::String(digest));
        }
    }
    if !digests.is_empty() {
        obj.insert("data".into(), Value::Object(digests));
    }
    out
}

/// Whether every field `desired` sets has that value in `observed`: objects key by key
/// (extra keys in `observed`, such as server defaults, status and other managers'
/// labels, are fine), arrays element by element with the same length, anything else
/// equal. This is how a reconciler tells an object already in place (no write) from one
/// to apply; drift in a field we set is a difference, and a list shortened or grown by
/// someone else is too.
pub fn manifest_in_place(desired: &serde_json::Value, observed: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (desired, observed) {
        (Value::Object(d), Value::Object(o)) => {
            d.iter().all(|(k, dv)| o.get(k).is_some_and(|ov| manifest_in_place(dv, ov)))
        }
        (Value::Array(d), Value::Array(o)) => {
            d.len() == o.len() && d.iter().zip(o).all(|(dv, ov)| manifest_in_place(dv, ov))
        }
        (d, o) => d == o,
    }
}

/// Whether an object of `kind` is in place: every field `desired` sets is in `observed`
/// as a Kubernetes API server writes it. `desired` is first normalised by the Go field
/// rules of its type ([`crate::kube_wire::normalise`]): a real server never answers an
/// empty `omitempty` field (`tolerations: []`, a toleration's `value: ""`) and writes
/// quantities in canonical form (`"0.1"` → `"100m"`), so comparing the manifest as sent
/// would find it missing forever. Every reconciler decides "apply or not" with this.
pub fn object_in_place(
    kind: ObjectKind,
    desired: &serde_json::Value,
    observed: &serde_json::Value,
) -> bool {
    let mut d = desired.clone();
    if let Some(t) = crate::kube_wire::root(kind.api_version(), kind.kind()) {
        crate::kube_wire::normalise(t, &mut d);
    }
    manifest_in_place(&d, observed)
}

/// Conditions a delete must meet (Kubernetes `DeleteOptions.preconditions`); the server
/// answers 409 Conflict when the object is not that one any more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// The uid it must have.
    pub uid: Option<String>,
    /// The resourceVersion it must have.
    pub resource_version: Option<String>,
}

/// The primitive operations of a Kubernetes API that the ownership rule is built on.
/// Each cluster adapter implements these over its transport, classifying failures with
/// `bc_providers::classify::kubernetes::classify_status`; [`ClusterClient`] comes with
/// them.
#[async_trait]
pub trait ClusterOps: Send + Sync {
    /// GET one object (`NotFound` when absent).
    async fn read(&self, object: &ObjectRef) -> Result<ObjectMeta, ObjectError>;
    /// POST the object to its collection, field manager `better-compute`
    /// (`AlreadyExists` when the name is taken).
    async fn create(&self, object: &KubeObject) -> Result<(), ObjectError>;
    /// Server-side apply, field manager `better-compute`, forced or not.
    async fn apply(&self, object: &KubeObject, force: bool) -> Result<(), ObjectError>;
    /// DELETE with `preconditions` (`NotFound` when absent, `Conflict` when they fail).
    async fn delete(
        &self,
        object: &ObjectRef,
        preconditions: &Preconditions,
    ) -> Result<(), ObjectError>;
    /// Nodes matching a label selector.
    async fn list_nodes(&self, label_selector: &str) -> Result<Vec<ClusterNode>, ClusterError>;
    /// Every object stored in `namespace`, of every namespaced kind the API serves with
    /// `list` (found through discovery), without records about objects (Events, metrics).
    async fn list_namespace(&self, namespace: &str) -> Result<Vec<NamespacedObject>, ClusterError>;
    /// The Services of type `LoadBalancer` in every namespace and every
    /// PersistentVolume (see [`ProviderBacked`]).
    async fn list_provider_backed(&self) -> Result<ProviderBacked, ClusterError>;
    /// Creates a TokenReview of `token` for `audiences` and returns its status.
    async fn review_token(
        &self,
        token: &SecretString,
        audiences: &[String],
    ) -> Result<TokenReview, ClusterError>;
}

/// Whose an object is, by its owner label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// It carries `owner`.
    Ours,
    /// It does not: its owner label's value, if any.
    Foreign(Option<String>),
}

/// The ownership rule: an object is ours exactly when it carries `owner.key=owner.value`.
pub fn ownership(labels: &BTreeMap<String, String>, owner: &OwnerLabel) -> Ownership {
    match labels.get(&owner.key) {
        Some(v) if *v == owner.value => Ownership::Ours,
        other => Ownership::Foreign(other.cloned()),
    }
}

/// How many read-decide-write rounds the ownership rule makes before it reports the
/// object as changing under it.
pub const OWNERSHIP_ATTEMPTS: usize = 3;

/// An object's labels, `None` when absent.
pub async fn get_labels<O: ClusterOps + ?Sized>(
    ops: &O,
    object: &ObjectRef,
) -> Result<Option<BTreeMap<String, String>>, ClusterError> {
    Ok(read_object(ops, object).await?.map(|meta| meta.labels))
}

/// Creates the object when absent; applies it (forced) when it carries `owner`; reports
/// it `Foreign` otherwise. A create that finds the name taken (someone made it since the
/// read) reads again and decides again, so the tenant's object is never merged into.
pub async fn apply_owned<O: ClusterOps + ?Sized>(
    ops: &O,
    object: &KubeObject,
    owner: &OwnerLabel,
) -> Result<ApplyOutcome, ClusterError> {
    apply_owned_after(ops, object, owner, None).await
}

/// [`apply_owned`], deciding its first round on `read` — what the caller read of the
/// object just before (`Some(None)`: absent) — instead of reading it again; a create that
/// finds the name taken since reads and decides again, as [`apply_owned`] does.
pub async fn apply_owned_after<O: ClusterOps + ?Sized>(
    ops: &O,
    object: &KubeObject,
    owner: &OwnerLabel,
    mut read: Option<Option<ObjectMeta>>,
) -> Result<ApplyOutcome, ClusterError> {
    let r = &object.object;
    for _ in 0..OWNERSHIP_ATTEMPTS {
        let seen = match read.take() {
            Some(Some(meta)) => Ok(meta),
            Some(None) => Err(ObjectError::NotFound),
            None => ops.read(r).await,
        };
        match seen {
            Err(ObjectError::NotFound) => match ops.create(object).await {
                Ok(()) => return Ok(ApplyOutcome::Created),
                // Made (or deleted and made again) since the read: decide again.
                Err(ObjectError::AlreadyExists) => continue,
                Err(e) => return Err(e.into_cluster_error(r)),
            },
            Err(e) => return Err(e.into_cluster_error(r)),
            Ok(meta) => match ownership(&meta.labels, owner) {
                Ownership::Foreign(owner) => return Ok(ApplyOutcome::Foreign { owner }),
                Ownership::Ours => {
                    ops.apply(object, true).await.map_err(|e| e.into_cluster_error(r))?;
                    return Ok(ApplyOutcome::Applied);
                }
            },
        }
    }
    Err(ClusterError::Conflict(format!(
        "{r} kept appearing and disappearing over {OWNERSHIP_ATTEMPTS} attempts"
    )))
}

/// Deletes the object if it carries `owner`, on the condition that it is still the
/// object read (same uid and resourceVersion); when that fails, reads and decides again.
pub async fn delete_owned<O: ClusterOps + ?Sized>(
    ops: &O,
    object: &ObjectRef,
    owner: &OwnerLabel,
) -> Result<DeleteOutcome, ClusterError> {
    for _ in 0..OWNERSHIP_ATTEMPTS {
        let meta = match ops.read(object).await {
            Ok(meta) => meta,
            Err(ObjectError::NotFound) => return Ok(DeleteOutcome::Absent),
            Err(e) => return Err(e.into_cluster_error(object)),
        };
        if let Ownership::Foreign(owner) = ownership(&meta.labels, owner) {
            return Ok(DeleteOutcome::Foreign { owner });
        }
        let pre = Preconditions { uid: meta.uid, resource_version: meta.resource_version };
        match ops.delete(object, &pre).await {
            Ok(()) => return Ok(DeleteOutcome::Deleted),
            Err(ObjectError::NotFound) => return Ok(DeleteOutcome::Absent),
            // Changed or replaced since the read: decide again on what is there now.
            Err(ObjectError::Conflict(_)) => continue,
            Err(e) => return Err(e.into_cluster_error(object)),
        }
    }
    Err(ClusterError::Conflict(format!(
        "{object} kept changing over {OWNERSHIP_ATTEMPTS} attempts"
    )))
}

/// An object's meta (labels, identity, digested content), `None` when absent.
pub async fn read_object<O: ClusterOps + ?Sized>(
    ops: &O,
    object: &ObjectRef,
) -> Result<Option<ObjectMeta>, ClusterError> {
    match ops.read(object).await {
        Ok(meta) => Ok(Some(meta)),
        Err(ObjectError::NotFound) => Ok(None),
        Err(e) => Err(e.into_cluster_error(object)),
    }
}

/// A connected client for one cluster. Every [`ClusterOps`] is one, with the ownership
/// rule of this module.
#[async_trait]
pub trait ClusterClient: Send + Sync {
    /// An object's labels, or `None` if it does not exist.
    async fn get_labels(
        &self,
        object: &ObjectRef,
    ) -> Result<Option<BTreeMap<String, String>>, ClusterError>;
    /// An object's meta with its content (Secret values digested), or `None` if it does
    /// not exist: what a reconciler reads to decide whether an apply is needed at all.
    async fn read_object(&self, object: &ObjectRef) -> Result<Option<ObjectMeta>, ClusterError>;
    /// Server-side applies `object` with field manager `better-compute`, unless it exists
    /// without `owner` (see [`ApplyOutcome::Foreign`]).
    async fn apply_owned(
        &self,
        object: &KubeObject,
        owner: &OwnerLabel,
    ) -> Result<ApplyOutcome, ClusterError>;
    /// [`Self::apply_owned`] after the caller's own read of the object (`read`: its meta,
    /// `None` when absent), which decides the first round instead of a second read; a
    /// client that cannot use it reads again.
    async fn apply_owned_after(
        &self,
        object: &KubeObject,
        owner: &OwnerLabel,
        read: Option<ObjectMeta>,
    ) -> Result<ApplyOutcome, ClusterError> {
        let _ = read;
        self.apply_owned(object, owner).await
    }
    /// Deletes the object if it carries `owner`.
    async fn delete_owned(
        &self,
        object: &ObjectRef,
        owner: &OwnerLabel,
    ) -> Result<DeleteOutcome, ClusterError>;
    /// Nodes matching a label selector (`k=v,k2 in (a,b)`).
    async fn list_nodes(&self, label_selector: &str) -> Result<Vec<ClusterNode>, ClusterError>;
    /// Every object stored in `namespace` (see [`ClusterOps::list_namespace`]): what a
    /// Namespace's deletion would take along.
    async fn list_namespace(&self, namespace: &str) -> Result<Vec<NamespacedObject>, ClusterError>;
    /// What the cluster's own controllers made at its provider, as the cluster records
    /// it (see [`ProviderBacked`]): what deleting the cluster may leave behind there.
    async fn list_provider_backed(&self) -> Result<ProviderBacked, ClusterError>;
    /// What the cluster's TokenReview API says of `token` for `audiences` (a token that
    /// is not valid is `Ok` with `authenticated: false`, not an error).
    async fn review_token(
        &self,
        token: &SecretString,
        audiences: &[String],
    ) -> Result<TokenReview, ClusterError>;
}

/// Builds cluster clients from credentials.
#[async_trait]
pub trait ClusterApi: Send + Sync {
    /// A client for the cluster the kubeconfig names.
    async fn connect(
        &self,
        kubeconfig: &SecretString,
    ) -> Result<Arc<dyn ClusterClient>, ClusterError>;
}

#[async_trait]
impl<O: ClusterOps + ?Sized> ClusterClient for O {
    async fn get_labels(
        &self,
        object: &ObjectRef,
    ) -> Result<Option<BTreeMap<String, String>>, ClusterError> {
        get_labels(self, object).await
    }
    async fn read_object(&self, object: &ObjectRef) -> Result<Option<ObjectMeta>, ClusterError> {
        read_object(self, object).await
    }
    async fn apply_owned(
        &self,
        object: &KubeObject,
        owner: &OwnerLabel,
    ) -> Result<ApplyOutcome, ClusterError> {
        apply_owned(self, object, owner).await
    }
    async fn apply_owned_after(
        &self,
        object: &KubeObject,
        owner: &OwnerLabel,
        read: Option<ObjectMeta>,
    ) -> Result<ApplyOutcome, ClusterError> {
        apply_owned_after(self, object, owner, Some(read)).await
    }
    async fn delete_owned(
        &self,
        object: &ObjectRef,
        owner: &OwnerLabel,
    ) -> Result<DeleteOutcome, ClusterError> {
        delete_owned(self, object, owner).await
    }
    async fn list_nodes(&self, label_selector: &str) -> Result<Vec<ClusterNode>, ClusterError> {
        ClusterOps::list_nodes(self, label_selector).await
    }
    async fn list_namespace(&self, namespace: &str) -> Result<Vec<NamespacedObject>, ClusterError> {
        ClusterOps::list_namespace(self, namespace).await
    }
    async fn list_provider_backed(&self) -> Result<ProviderBacked, ClusterError> {
        ClusterOps::list_provider_backed(self).await
    }
    async fn review_token(
        &self,
        token: &SecretString,
        audiences: &[String],
    ) -> Result<TokenReview, ClusterError> {
        ClusterOps::review_token(self, token, audiences).await
    }
}

/// One provider cluster reached through a [`ClusterApi`] with the credentials its
/// provider hands out: the client is made on first use and kept until the provider says
/// its credentials are due for renewal (`KubernetesProvider::credentials_due`, by the
/// adapter's clock; then it is made again with the provider's current credentials,
/// before the cluster would refuse them); when the
/// cluster refuses the credentials (`Credentials`: an expired or revoked token), the
/// provider's cached kubeconfig is dropped, a new one minted, and the call made once
/// more.
pub struct ClusterSession {
    provider: Arc<dyn ProviderImpl>,
    api: Arc<dyn ClusterApi>,
    cluster_id: String,
    client: Mutex<Option<Connected>>,
}

/// A session's client and when its credentials expire (if they say).
type Connected = (Arc<dyn ClusterClient>, Option<Timestamp>);

impl std::fmt::Debug for ClusterSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterSession").field("cluster_id", &self.cluster_id).finish()
    }
}

impl ClusterSession {
    /// A session with provider cluster `cluster_id` of `provider`'s account.
    pub fn new(
        provider: Arc<dyn ProviderImpl>,
        api: Arc<dyn ClusterApi>,
        cluster_id: impl Into<String>,
    ) -> Self {
        Self { provider, api, cluster_id: cluster_id.into(), client: Mutex::new(None) }
    }

    /// The provider cluster id.
    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    /// The client, unless none is made or its credentials are due for renewal.
    fn cached(&self) -> Option<Arc<dyn ClusterClient>> {
        let (client, expires_at) = self.client.lock().unwrap_or_else(|e| e.into_inner()).clone()?;
        match expires_at {
            Some(at) if self.provider.kubernetes().credentials_due(at) => None,
            _ => Some(client),
        }
    }

    /// Credentials from the provider (its cache, or a mint), connected.
    async fn connect(&self) -> Result<Arc<dyn ClusterClient>, ClusterError> {
        let creds = self
            .provider
            .kubernetes()
            .credentials(&self.cluster_id)
            .await
            .map_err(ClusterError::Provider)?;
        let client = self.api.connect(&creds.kubeconfig).await?;
        *self.client.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((client.clone(), creds.expires_at));
        Ok(client)
    }

    /// The connected client, connecting on first use and again when its credentials are
    /// due for renewal.
    pub async fn client(&self) -> Result<Arc<dyn ClusterClient>, ClusterError> {
        match self.cached() {
            Some(c) => Ok(c),
            None => self.connect().await,
        }
    }

    /// Drops the client and the provider's cached credentials, mints new ones and
    /// connects with them.
    pub async fn reconnect(&self) -> Result<Arc<dyn ClusterClient>, ClusterError> {
        *self.client.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.provider.kubernetes().invalidate_credentials(&self.cluster_id);
        self.connect().await
    }

    /// Runs `call` on the client; on `Credentials`, reconnects with new credentials and
    /// runs it once more.
    async fn with_client<T, F, Fut>(&self, call: F) -> Result<T, ClusterError>
    where
        F: Fn(Arc<dyn ClusterClient>) -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, ClusterError>> + Send,
        T: Send,
    {
        let client = match self.client().await {
            Err(ClusterError::Credentials(_)) => self.reconnect().await?,
            other => other?,
        };
        match call(client).await {
            Err(ClusterError::Credentials(_)) => call(self.reconnect().await?).await,
            other => other,
        }
    }
}

#[async_trait]
impl ClusterClient for ClusterSession {
    async fn get_labels(
        &self,
        object: &ObjectRef,
    ) -> Result<Option<BTreeMap<String, String>>, ClusterError> {
        self.with_client(|c| async move { c.get_labels(object).await }).await
    }
    async fn read_object(&self, object: &ObjectRef) -> Result<Option<ObjectMeta>, ClusterError> {
        self.with_client(|c| async move { c.read_object(object).await }).await
    }
    async fn apply_owned(
        &self,
        object: &KubeObject,
        owner: &OwnerLabel,
    ) -> Result<ApplyOutcome, ClusterError> {
        self.with_client(|c| async move { c.apply_owned(object, owner).await }).await
    }
    async fn apply_owned_after(
        &self,
        object: &KubeObject,
        owner: &OwnerLabel,
        read: Option<ObjectMeta>,
    ) -> Result<ApplyOutcome, ClusterError> {
        // The read answers the first attempt only: a retry after new credentials reads
        // again (the object may have changed while the call was refused).
        let first = std::sync::Mutex::new(Some(read));
        self.with_client(|c| {
            let read = first.lock().unwrap_or_else(|e| e.into_inner()).take();
            async move {
                match read {
                    Some(read) => c.apply_owned_after(object, owner, read).await,
                    None => c.apply_owned(object, owner).await,
                }
            }
        })
        .await
    }
    async fn delete_owned(
        &self,
        object: &ObjectRef,
        owner: &OwnerLabel,
    ) -> Result<DeleteOutcome, ClusterError> {
        self.with_client(|c| async move { c.delete_owned(object, owner).await }).await
    }
    async fn list_nodes(&self, label_selector: &str) -> Result<Vec<ClusterNode>, ClusterError> {
        self.with_client(|c| async move { c.list_nodes(label_selector).await }).await
    }
    async fn list_namespace(&self, namespace: &str) -> Result<Vec<NamespacedObject>, ClusterError> {
        self.with_client(|c| async move { c.list_namespace(namespace).await }).await
    }
    async fn list_provider_backed(&self) -> Result<ProviderBacked, ClusterError> {
        self.with_client(|c| async move { c.list_provider_backed().await }).await
    }
    async fn review_token(
        &self,
        token: &SecretString,
        audiences: &[String],
    ) -> Result<TokenReview, ClusterError> {
        self.with_client(|c| async move { c.review_token(token, audiences).await }).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_secrets_debug_hides_its_values_and_other_kinds_show_everything() {
        let secret = KubeObject {
            object: ObjectRef {
                kind: ObjectKind::Secret,
                namespace: Some("n".into()),
                name: "s".into(),
            },
            manifest: json!({"kind": "Secret", "metadata": {"name": "s"},
                "data": {"joinToken": "Ymo="}, "stringData": {"joinToken": "bcj_plain_token"}}),
        };
        let shown = format!("{secret:?}");
        assert!(!shown.contains("bcj_plain_token") && !shown.contains("Ymo="), "{shown}");
        assert!(shown.contains("joinToken") && shown.contains("[redacted]"), "{shown}");
        let ns = KubeObject {
            object: ObjectRef { kind: ObjectKind::Namespace, namespace: None, name: "n".into() },
            manifest: json!({"metadata": {"name": "n"}, "data": {"k": "v"}}),
        };
        assert!(format!("{ns:?}").contains("\"v\""));
    }

    #[test]
    fn a_secrets_values_are_listed_as_sent_and_decoded_other_kinds_have_none() {
        let secret = KubeObject {
            object: ObjectRef {
                kind: ObjectKind::Secret,
                namespace: Some("n".into()),
                name: "s".into(),
            },
            manifest: json!({"data": {"joinToken": "Ymo=", "bin": "/w=="},
                "stringData": {"serverUrl": "https://api"}}),
        };
        let mut values = secret.secret_values();
        values.sort();
        assert_eq!(values, ["/w==", "Ymo=", "bj", "https://api"]);
        let ns = KubeObject {
            object: ObjectRef { kind: ObjectKind::Namespace, namespace: None, name: "n".into() },
            manifest: json!({"data": {"k": "v"}}),
        };
        assert!(ns.secret_values().is_empty());
    }

    #[test]
    fn secret_values_are_digested_and_folded_into_data() {
        use base64::Engine as _;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let secret = json!({"kind": "Secret", "metadata": {"name": "s", "uid": "u1",
            "resourceVersion": "7", "labels": {"o": "p1"}},
            "data": {"joinToken": b64("bcj_plain"), "bad": "%%%"},
            "stringData": {"serverUrl": "http://x"}});
        let meta = ObjectMeta::of(ObjectKind::Secret, &secret);
        assert_eq!(meta.labels.get("o").map(String::as_str), Some("p1"));
        assert_eq!(
            (meta.uid.as_deref(), meta.resource_version.as_deref()),
            (Some("u1"), Some("7"))
        );
        let data = &meta.content["data"];
        assert_eq!(data["joinToken"], crate::token::sha256_hex(b"bcj_plain"));
        assert_eq!(data["serverUrl"], crate::token::sha256_hex(b"http://x"));
        assert_eq!(data["bad"], UNREADABLE_SECRET_VALUE);
        assert!(meta.content.get("stringData").is_none());
        assert!(!meta.content.to_string().contains("bcj_plain"));
        // Other kinds keep their content.
        let ns = json!({"metadata": {"name": "n"}, "data": {"k": "v"}});
        assert_eq!(ObjectMeta::of(ObjectKind::Namespace, &ns).content, ns);
    }

    #[test]
    fn a_manifest_is_in_place_when_every_field_it_sets_matches() {
        let desired = json!({"metadata": {"labels": {"a": "1"}},
            "spec": {"containers": [{"name": "bcd", "env": [{"name": "X"}]}]}});
        let mut observed = json!({"metadata": {"labels": {"a": "1", "other": "x"}, "uid": "u"},
            "spec": {"containers": [{"name": "bcd", "env": [{"name": "X", "extra": 1}],
                "imagePullPolicy": "IfNotPresent"}]}, "status": {}});
        assert!(manifest_in_place(&desired, &observed));
        observed["metadata"]["labels"]["a"] = json!("2");
        assert!(!manifest_in_place(&desired, &observed));
        observed["metadata"]["labels"]["a"] = json!("1");
        observed["spec"]["containers"].as_array_mut().unwrap().push(json!({"name": "sidecar"}));
        assert!(!manifest_in_place(&desired, &observed), "a list grown by someone else differs");
        assert!(!manifest_in_place(&desired, &json!(null)));
    }

    #[test]
    fn an_object_is_in_place_as_a_server_answers_it() {
        let desired = json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"labels": {"a": "1"}, "annotations": {}},
            "spec": {"template": {"spec": {"tolerations": [], "containers": [{"name": "c",
                "resources": {"requests": {"cpu": "0.1"}}}]}}}});
        // What a real server answers: empty omitempty fields gone, the quantity canonical.
        let observed = json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"labels": {"a": "1"}, "uid": "u"},
            "spec": {"template": {"metadata": {"creationTimestamp": null}, "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
                "dnsPolicy": "ClusterFirst"}}}});
        assert!(!manifest_in_place(&desired, &observed), "as sent, it never matches");
        assert!(object_in_place(ObjectKind::DaemonSet, &desired, &observed));
        let mut drifted = observed.clone();
        drifted["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] =
            json!("200m");
        assert!(!object_in_place(ObjectKind::DaemonSet, &desired, &drifted));
        let taint = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "spec": {"template":
            {"spec": {"tolerations": [{"key": "gpu", "operator": "Equal", "value": "",
                "effect": "NoSchedule"}]}}}});
        let answered = json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
            "spec": {"template": {"spec": {"tolerations": [
            {"key": "gpu", "operator": "Equal", "effect": "NoSchedule"}]}}}});
        assert!(object_in_place(ObjectKind::DaemonSet, &taint, &answered));
    }

    #[test]
    fn ownership_is_exactly_our_key_and_value() {
        let owner = OwnerLabel { key: "o".into(), value: "p1".into() };
        let labels = |v: &[(&str, &str)]| {
            v.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect::<BTreeMap<_, _>>()
        };
        assert_eq!(ownership(&labels(&[("o", "p1"), ("x", "y")]), &owner), Ownership::Ours);
        assert_eq!(
            ownership(&labels(&[("o", "p2")]), &owner),
            Ownership::Foreign(Some("p2".into()))
        );
        assert_eq!(ownership(&labels(&[]), &owner), Ownership::Foreign(None));
    }
}
