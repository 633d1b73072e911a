//! The cluster access adapter: `ClusterApi` over the `kube` crate, for any cluster a
//! kubeconfig names (DigitalOcean's, the simulator's under `/k8s/<id>`).
//!
//! Invariant: read before write — an object that exists without our owner label (or
//! with another value of it) is never patched or deleted, and `force` is used only on
//! objects that carry it. Errors are classified here once, and no message carries the
//! token or the kubeconfig.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bc_domain::model::SecretString;
use bc_domain::name::FIELD_MANAGER;
use bc_domain::ports::{
    ApplyOutcome, ClusterApi, ClusterClient, ClusterError, ClusterNode, DeleteOutcome, KubeObject,
    ObjectKind, ObjectRef, OwnerLabel,
};
use k8s_openapi::api::core::v1::Node;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// Timeouts of the cluster client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KubeTimeouts {
    /// TCP/TLS connect.
    pub connect: Duration,
    /// Reading a response.
    pub read: Duration,
}

impl Default for KubeTimeouts {
    fn default() -> Self {
        Self { connect: Duration::from_secs(10), read: Duration::from_secs(30) }
    }
}

/// `ClusterApi` over the `kube` client.
#[derive(Debug, Clone, Default)]
pub struct KubeClusterApi {
    timeouts: KubeTimeouts,
}

impl KubeClusterApi {
    /// An adapter with the default timeouts (connect 10 s, read 30 s).
    pub fn new() -> Self {
        Self::default()
    }

    /// An adapter with other timeouts.
    pub fn with_timeouts(timeouts: KubeTimeouts) -> Self {
        Self { timeouts }
    }
}

#[async_trait]
impl ClusterApi for KubeClusterApi {
    async fn connect(
        &self,
        kubeconfig: &SecretString,
    ) -> Result<Arc<dyn ClusterClient>, ClusterError> {
        crate::install_crypto_provider();
        // Fixed messages: the parser's errors may quote the kubeconfig.
        let kc = Kubeconfig::from_yaml(kubeconfig.expose()).map_err(|_| {
            ClusterError::Credentials("the kubeconfig is not valid kubeconfig YAML".into())
        })?;
        let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .map_err(|_| {
                ClusterError::Credentials(
                    "the kubeconfig names no usable context, cluster or user".into(),
                )
            })?;
        // HTTPS_PROXY in the environment would be copied in and then refused (kube has no
        // http-proxy feature here); cluster APIs are reached directly.
        config.proxy_url = None;
        config.connect_timeout = Some(self.timeouts.connect);
        config.read_timeout = Some(self.timeouts.read);
        // The reconcilers retry with their own backoff; kube's built-in retry of 503
        // would hold a reconciler for minutes.
        config.default_retry = false;
        let client = Client::try_from(config).map_err(|_| {
            ClusterError::Credentials("the kubeconfig's cluster settings cannot be used".into())
        })?;
        Ok(Arc::new(KubeClusterClient { client }))
    }
}

/// A connected client of one cluster.
#[derive(Clone)]
pub struct KubeClusterClient {
    client: Client,
}

impl std::fmt::Debug for KubeClusterClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KubeClusterClient")
    }
}

fn api_resource(kind: ObjectKind) -> ApiResource {
    let (group, plural) = match kind {
        ObjectKind::Namespace => ("", "namespaces"),
        ObjectKind::Secret => ("", "secrets"),
        ObjectKind::ServiceAccount => ("", "serviceaccounts"),
        ObjectKind::DaemonSet => ("apps", "daemonsets"),
    };
    let gvk = GroupVersionKind::gvk(group, "v1", kind.kind());
    ApiResource::from_gvk_with_plural(&gvk, plural)
}

/// Classifies a kube error: 409 → Conflict; 429 and 5xx → Unreachable; other 4xx →
/// Refused; transport failures → Unreachable; an unusable answer → Unreachable.
/// Only the server's message and reason, or the error class, are kept.
pub fn classify(e: &kube::Error) -> ClusterError {
    match e {
        kube::Error::Api(s) => {
            let msg = format!("{} ({} {})", s.message, s.code, s.reason);
            match s.code {
                409 => ClusterError::Conflict(msg),
                429 | 500..=599 => ClusterError::Unreachable(msg),
                _ if s.is_conflict() => ClusterError::Conflict(msg),
                _ => ClusterError::Refused(msg),
            }
        }
        kube::Error::Auth(_) => {
            ClusterError::Credentials("the kubeconfig's credentials cannot be used".into())
        }
        kube::Error::SerdeError(_) => ClusterError::Unreachable(
            "the cluster API answered something that is not a Kubernetes object".into(),
        ),
        kube::Error::HyperError(_) | kube::Error::Service(_) => {
            ClusterError::Unreachable(format!("cannot reach the cluster API: {}", error_chain(e)))
        }
        other => ClusterError::Unreachable(format!("cluster API call failed: {}", kind_of(other))),
    }
}

/// The error's chain of causes, each line once (transport errors name hosts and
/// ports, never credentials: the token travels only in a header).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        cur = s.source();
    }
    parts.join(": ")
}

fn kind_of(e: &kube::Error) -> &'static str {
    match e {
        kube::Error::HttpError(_) => "invalid request",
        kube::Error::BuildRequest(_) => "request could not be built",
        kube::Error::RustlsTls(_) => "TLS error",
        _ => "unexpected client error",
    }
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_not_found())
}

fn owner_check(
    labels: &BTreeMap<String, String>,
    owner: &OwnerLabel,
) -> Result<(), Option<String>> {
    match labels.get(&owner.key) {
        Some(v) if *v == owner.value => Ok(()),
        other => Err(other.cloned()),
    }
}

impl KubeClusterClient {
    fn api(&self, object: &ObjectRef) -> Api<DynamicObject> {
        let ar = api_resource(object.kind);
        match (&object.namespace, object.kind) {
            (_, ObjectKind::Namespace) | (None, _) => Api::all_with(self.client.clone(), &ar),
            (Some(ns), _) => Api::namespaced_with(self.client.clone(), ns, &ar),
        }
    }

    async fn read(&self, object: &ObjectRef) -> Result<Option<DynamicObject>, ClusterError> {
        self.api(object).get_opt(&object.name).await.map_err(|e| classify(&e))
    }

    async fn apply(&self, object: &KubeObject, force: bool) -> Result<(), ClusterError> {
        let mut params = PatchParams::apply(FIELD_MANAGER);
        if force {
            params = params.force();
        }
        self.api(&object.object)
            .patch(&object.object.name, &params, &Patch::Apply(&object.manifest))
            .await
            .map(|_| ())
            .map_err(|e| classify(&e))
    }
}

#[async_trait]
impl ClusterClient for KubeClusterClient {
    async fn get_labels(
        &self,
        object: &ObjectRef,
    ) -> Result<Option<BTreeMap<String, String>>, ClusterError> {
        Ok(self.read(object).await?.map(|o| o.metadata.labels.unwrap_or_default()))
    }

    async fn apply_owned(
        &self,
        object: &KubeObject,
        owner: &OwnerLabel,
    ) -> Result<ApplyOutcome, ClusterError> {
        match self.read(&object.object).await? {
            None => {
                // Not forced: if someone created it meanwhile, their fields conflict
                // instead of being taken.
                self.apply(object, false).await?;
                Ok(ApplyOutcome::Created)
            }
            Some(existing) => {
                match owner_check(&existing.metadata.labels.unwrap_or_default(), owner) {
                    Ok(()) => {
                        self.apply(object, true).await?;
                        Ok(ApplyOutcome::Applied)
                    }
                    Err(other) => Ok(ApplyOutcome::Foreign { owner: other }),
                }
            }
        }
    }

    async fn delete_owned(
        &self,
        object: &ObjectRef,
        owner: &OwnerLabel,
    ) -> Result<DeleteOutcome, ClusterError> {
        let Some(existing) = self.read(object).await? else {
            return Ok(DeleteOutcome::Absent);
        };
        if let Err(other) = owner_check(&existing.metadata.labels.unwrap_or_default(), owner) {
            return Ok(DeleteOutcome::Foreign { owner: other });
        }
        match self.api(object).delete(&object.name, &DeleteParams::default()).await {
            Ok(_) => Ok(DeleteOutcome::Deleted),
            Err(e) if is_not_found(&e) => Ok(DeleteOutcome::Absent),
            Err(e) => Err(classify(&e)),
        }
    }

    async fn list_nodes(&self, label_selector: &str) -> Result<Vec<ClusterNode>, ClusterError> {
        let mut params = ListParams::default();
        if !label_selector.is_empty() {
            params = params.labels(label_selector);
        }
        let nodes =
            Api::<Node>::all(self.client.clone()).list(&params).await.map_err(|e| classify(&e))?;
        Ok(nodes
            .items
            .into_iter()
            .map(|n| {
                let ready =
                    n.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|cs| {
                        cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                    });
                ClusterNode {
                    name: n.metadata.name.unwrap_or_default(),
                    labels: n.metadata.labels.unwrap_or_default(),
                    provider_id: n.spec.and_then(|s| s.provider_id),
                    ready,
                }
            })
            .collect())
    }
}
