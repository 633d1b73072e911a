//! The `ClusterApi` port: reaching a cluster's Kubernetes API with its credentials.
//!
//! Invariant: `apply_owned` and `delete_owned` read the object first and never patch or
//! delete one that lacks the owner label (or carries another value of it); `force` is
//! used only on objects that carry it.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::model::SecretString;

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
/// `metadata.labels` including the owner label).
#[derive(Debug, Clone, PartialEq)]
pub struct KubeObject {
    /// Which object.
    pub object: ObjectRef,
    /// The manifest.
    pub manifest: serde_json::Value,
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

/// Errors reaching a cluster.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    /// The kubeconfig could not be used.
    #[error("invalid cluster credentials: {0}")]
    Credentials(String),
    /// The API could not be reached, or answered 5xx/429.
    #[error("cluster API unreachable: {0}")]
    Unreachable(String),
    /// The API refused the request (4xx other than not-found).
    #[error("cluster API refused the request: {0}")]
    Refused(String),
    /// Server-side apply conflicted with another field manager.
    #[error("apply conflict: {0}")]
    Conflict(String),
}

/// A connected client for one cluster.
#[async_trait]
pub trait ClusterClient: Send + Sync {
    /// An object's labels, or `None` if it does not exist.
    async fn get_labels(
        &self,
        object: &ObjectRef,
    ) -> Result<Option<BTreeMap<String, String>>, ClusterError>;
    /// Server-side applies `object` with field manager `better-compute`, unless it exists
    /// without `owner` (see [`ApplyOutcome::Foreign`]).
    async fn apply_owned(
        &self,
        object: &KubeObject,
        owner: &OwnerLabel,
    ) -> Result<ApplyOutcome, ClusterError>;
    /// Deletes the object if it carries `owner`.
    async fn delete_owned(
        &self,
        object: &ObjectRef,
        owner: &OwnerLabel,
    ) -> Result<DeleteOutcome, ClusterError>;
    /// Nodes matching a label selector (`k=v,k2 in (a,b)`).
    async fn list_nodes(&self, label_selector: &str) -> Result<Vec<ClusterNode>, ClusterError>;
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
