//! The direct face of the simulated Kubernetes API: `ClusterApi`/`ClusterClient` straight
//! on the [`KubeStore`] and the model, without HTTP.
//!
//! Invariant: it answers exactly as `bc_providers::kube::KubeClusterApi` does over the
//! HTTP face — same gate (token, cluster running), same read-before-write ownership
//! rule (never patch or delete an object without our label; `force` only on ours), same
//! error classes.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use bc_domain::model::SecretString;
use bc_domain::name::FIELD_MANAGER;
use bc_domain::ports::{
    ApplyOutcome, ClusterApi, ClusterClient, ClusterError, ClusterNode, DeleteOutcome, KubeObject,
    ObjectRef, OwnerLabel,
};

use super::store::labels_of;
use super::{ApplyRequest, KubeError, KubeStore, Resource, Selector, Verb, op_key};
use crate::SimState;

/// `ClusterApi` on the simulator's state.
#[derive(Clone)]
pub struct DirectClusterApi {
    state: Arc<SimState>,
}

impl DirectClusterApi {
    /// A cluster API over `state`.
    pub fn new(state: Arc<SimState>) -> Self {
        Self { state }
    }
}

/// The server URL and bearer token a kubeconfig carries (the first of each), read
/// line by line so both the YAML and the JSON spelling work without a YAML parser.
pub fn parse_kubeconfig(kubeconfig: &str) -> Option<(String, String)> {
    let mut server = None;
    let mut token = None;
    for line in kubeconfig.lines() {
        let line = line.trim().trim_start_matches("- ").trim();
        if server.is_none() {
            server = value_of(line, "server");
        }
        if token.is_none() {
            token = value_of(line, "token");
        }
    }
    Some((server?, token?))
}

fn value_of(line: &str, key: &str) -> Option<String> {
    let rest = line
        .strip_prefix(key)
        .or_else(|| line.strip_prefix(&format!("\"{key}\"")))?
        .trim_start()
        .strip_prefix(':')?;
    let v = rest.trim().trim_end_matches(',').trim();
    let v = v
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
        .unwrap_or(v);
    (!v.is_empty()).then(|| v.to_owned())
}

/// The cluster id in a simulated server URL: `http://…/k8s/<cluster id>` (the HTTP
/// face), or `https://<cluster id>.k8s.ondigitalocean.com` (what the model serves when
/// no listener runs, as DigitalOcean does).
pub fn cluster_id_of(server: &str) -> Option<String> {
    if let Some((_, rest)) = server.split_once("/k8s/") {
        let id = rest.split(['/', '?']).next()?;
        return (!id.is_empty()).then(|| id.to_owned());
    }
    let host = server.split_once("://").map_or(server, |(_, h)| h);
    let host = host.split(['/', ':', '?']).next()?;
    let id = host.strip_suffix(".k8s.ondigitalocean.com")?;
    (!id.is_empty() && !id.contains('.')).then(|| id.to_owned())
}

#[async_trait]
impl ClusterApi for DirectClusterApi {
    async fn connect(
        &self,
        kubeconfig: &SecretString,
    ) -> Result<Arc<dyn ClusterClient>, ClusterError> {
        let (server, token) = parse_kubeconfig(kubeconfig.expose()).ok_or_else(|| {
            ClusterError::Credentials("the kubeconfig names no server or no token".into())
        })?;
        let cluster_id = cluster_id_of(&server).ok_or_else(|| {
            ClusterError::Credentials("the kubeconfig's server is not a simulated cluster".into())
        })?;
        Ok(Arc::new(DirectClusterClient { state: self.state.clone(), cluster_id, token }))
    }
}

/// A connected direct client of one simulated cluster.
pub struct DirectClusterClient {
    state: Arc<SimState>,
    cluster_id: String,
    token: String,
}

/// The error classes of the real adapter: 409 → Conflict; 429 and 5xx → Unreachable;
/// any other 4xx → Refused. Messages never carry credentials.
pub fn classify(e: &KubeError) -> ClusterError {
    let msg = format!("{} ({})", e.message, e.reason);
    match e.code {
        409 => ClusterError::Conflict(msg),
        429 | 500..=599 => ClusterError::Unreachable(msg),
        _ => ClusterError::Refused(msg),
    }
}

fn owner_of(labels: &BTreeMap<String, String>, owner: &OwnerLabel) -> Result<(), Option<String>> {
    match labels.get(&owner.key) {
        Some(v) if *v == owner.value => Ok(()),
        other => Err(other.cloned()),
    }
}

impl DirectClusterClient {
    fn gate(&self, verb: Verb, resource: Resource) -> Result<super::ClusterView, KubeError> {
        KubeStore::gate(&self.state, &self.cluster_id, Some(&self.token), &op_key(verb, resource))
    }

    /// Like a GET of the item: 404 (object or, as over HTTP, the cluster) is `None`.
    fn read(&self, object: &ObjectRef) -> Result<Option<serde_json::Value>, ClusterError> {
        let got = self.gate(Verb::Get, Resource::of(object.kind)).and_then(|_| {
            self.state.kube.get(
                &self.cluster_id,
                Resource::of(object.kind),
                object.namespace.as_deref(),
                &object.name,
            )
        });
        match got {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(classify(&e)),
        }
    }

    fn apply(&self, object: &KubeObject, force: bool) -> Result<(), ClusterError> {
        self.gate(Verb::Apply, Resource::of(object.object.kind)).map_err(|e| classify(&e))?;
        let o = &object.object;
        self.state
            .kube
            .apply(
                &self.cluster_id,
                &ApplyRequest {
                    resource: Resource::of(o.kind),
                    namespace: o.namespace.as_deref(),
                    name: &o.name,
                    body: &object.manifest,
                    manager: FIELD_MANAGER,
                    force,
                },
                self.state.clock.now(),
            )
            .map(|_| ())
            .map_err(|e| classify(&e))
    }
}

#[async_trait]
impl ClusterClient for DirectClusterClient {
    async fn get_labels(
        &self,
        object: &ObjectRef,
    ) -> Result<Option<BTreeMap<String, String>>, ClusterError> {
        Ok(self.read(object)?.map(|v| labels_of(&v)))
    }

    async fn apply_owned(
        &self,
        object: &KubeObject,
        owner: &OwnerLabel,
    ) -> Result<ApplyOutcome, ClusterError> {
        match self.read(&object.object)? {
            None => {
                self.apply(object, false)?;
                Ok(ApplyOutcome::Created)
            }
            Some(existing) => match owner_of(&labels_of(&existing), owner) {
                Ok(()) => {
                    self.apply(object, true)?;
                    Ok(ApplyOutcome::Applied)
                }
                Err(other) => Ok(ApplyOutcome::Foreign { owner: other }),
            },
        }
    }

    async fn delete_owned(
        &self,
        object: &ObjectRef,
        owner: &OwnerLabel,
    ) -> Result<DeleteOutcome, ClusterError> {
        let Some(existing) = self.read(object)? else {
            return Ok(DeleteOutcome::Absent);
        };
        if let Err(other) = owner_of(&labels_of(&existing), owner) {
            return Ok(DeleteOutcome::Foreign { owner: other });
        }
        self.gate(Verb::Delete, Resource::of(object.kind)).map_err(|e| classify(&e))?;
        match self.state.kube.delete(
            &self.cluster_id,
            Resource::of(object.kind),
            object.namespace.as_deref(),
            &object.name,
            self.state.clock.now(),
        ) {
            Ok(_) => Ok(DeleteOutcome::Deleted),
            Err(e) if e.is_not_found() => Ok(DeleteOutcome::Absent),
            Err(e) => Err(classify(&e)),
        }
    }

    async fn list_nodes(&self, label_selector: &str) -> Result<Vec<ClusterNode>, ClusterError> {
        let view = self.gate(Verb::List, Resource::Node).map_err(|e| classify(&e))?;
        let selector =
            Selector::parse(label_selector).map_err(|e| classify(&KubeError::bad_request(e)))?;
        Ok(view
            .nodes
            .into_iter()
            .filter(|n| selector.matches(&n.labels))
            .map(|n| ClusterNode {
                name: n.name,
                labels: n.labels,
                provider_id: Some(n.provider_id),
                ready: n.ready,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfig_server_and_token() {
        let yaml = "apiVersion: v1\nclusters:\n- cluster:\n    server: http://127.0.0.1:8080/k8s/abc-123\n  name: c\nusers:\n- name: u\n  user:\n    token: \"tok\"\n";
        let (s, t) = parse_kubeconfig(yaml).unwrap();
        assert_eq!(cluster_id_of(&s).as_deref(), Some("abc-123"));
        assert_eq!(t, "tok");
        let json = r#"{"clusters":[{"cluster":{"server":"http://h/k8s/x"}}],"users":[{"user":{"token":"t2"}}]}"#;
        // One-line JSON has no line structure to scan: not supported, and says so.
        assert!(parse_kubeconfig(json).is_none());
        let pretty = "{\n  \"server\": \"http://h/k8s/x/\",\n  \"token\": \"t2\"\n}";
        let (s, t) = parse_kubeconfig(pretty).unwrap();
        assert_eq!((cluster_id_of(&s).as_deref(), t.as_str()), (Some("x"), "t2"));
        assert_eq!(cluster_id_of("https://u-1.k8s.ondigitalocean.com").as_deref(), Some("u-1"));
        assert_eq!(cluster_id_of("https://example.com"), None);
    }
}
