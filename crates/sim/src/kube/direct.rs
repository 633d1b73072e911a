//! The direct face of the simulated Kubernetes API: `ClusterApi` over the primitive
//! `ClusterOps` straight on the [`KubeStore`] and the model, without HTTP.
//!
//! Invariant: it answers exactly as `bc_providers::kube::KubeClusterApi` does over the
//! HTTP face — the same gate (token, cluster running, faults, interleaved actors), the
//! same store operations, the same classification of their Status errors
//! (`bc_domain::classify::kubernetes`) and, through `ClusterOps`, the same ownership
//! rule (`bc_domain::ports::cluster`), none of it copied here.

use std::sync::Arc;

use async_trait::async_trait;
use bc_domain::classify::kubernetes::classify_status;
use bc_domain::model::SecretString;
use bc_domain::name::FIELD_MANAGER;
use bc_domain::ports::{
    ClusterApi, ClusterClient, ClusterError, ClusterNode, ClusterOps, KubeObject, ObjectError,
    ObjectMeta, ObjectRef, Preconditions,
};

use super::{ApplyRequest, KubeError, KubeStore, Resource, Selector, Verb};
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

/// The cluster id in a simulated server URL that names it: `http://…/k8s/<cluster id>`
/// (the path on the DigitalOcean listener), or `https://<cluster id>.k8s.ondigitalocean.com`
/// (what the model serves when no listener runs, as DigitalOcean does). A served
/// cluster's own address (`https://127.0.0.1:PORT`) names no id: the model knows it
/// (`Model::cluster_of_endpoint`).
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
        let cluster_id = cluster_id_of(&server)
            .or_else(|| self.state.model().cluster_of_endpoint(&server))
            .ok_or_else(|| {
                ClusterError::Credentials(
                    "the kubeconfig's server is not a simulated cluster".into(),
                )
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

/// A Status error as every face classifies it.
fn classify(e: KubeError) -> ObjectError {
    classify_status(e.code, &e.reason, &e.message)
}

impl DirectClusterClient {
    fn gate(&self, verb: Verb, resource: Resource) -> Result<super::ClusterView, ObjectError> {
        KubeStore::gate(&self.state, &self.cluster_id, Some(&self.token), verb, resource)
            .map_err(classify)
    }

    fn request<'a>(&self, object: &'a KubeObject, force: bool) -> ApplyRequest<'a> {
        let o = &object.object;
        ApplyRequest {
            resource: Resource::of(o.kind),
            namespace: o.namespace.as_deref(),
            name: &o.name,
            body: &object.manifest,
            manager: FIELD_MANAGER,
            force,
        }
    }
}

#[async_trait]
impl ClusterOps for DirectClusterClient {
    async fn read(&self, object: &ObjectRef) -> Result<ObjectMeta, ObjectError> {
        let resource = Resource::of(object.kind);
        self.gate(Verb::Get, resource)?;
        let v = self
            .state
            .kube
            .get(&self.cluster_id, resource, object.namespace.as_deref(), &object.name)
            .map_err(classify)?;
        Ok(ObjectMeta::of(object.kind, &v))
    }

    async fn create(&self, object: &KubeObject) -> Result<(), ObjectError> {
        self.gate(Verb::Create, Resource::of(object.object.kind))?;
        let now = self.state.clock.now();
        self.state
            .kube
            .create(&self.cluster_id, &self.request(object, false), now)
            .map_err(classify)?;
        Ok(())
    }

    async fn apply(&self, object: &KubeObject, force: bool) -> Result<(), ObjectError> {
        self.gate(Verb::Apply, Resource::of(object.object.kind))?;
        let now = self.state.clock.now();
        self.state
            .kube
            .apply(&self.cluster_id, &self.request(object, force), now)
            .map_err(classify)?;
        Ok(())
    }

    async fn delete(
        &self,
        object: &ObjectRef,
        preconditions: &Preconditions,
    ) -> Result<(), ObjectError> {
        let resource = Resource::of(object.kind);
        self.gate(Verb::Delete, resource)?;
        let now = self.state.clock.now();
        let ns = object.namespace.as_deref();
        self.state
            .kube
            .delete(&self.cluster_id, resource, ns, &object.name, preconditions, now)
            .map_err(classify)?;
        Ok(())
    }

    async fn list_nodes(&self, label_selector: &str) -> Result<Vec<ClusterNode>, ClusterError> {
        let failed = |e: ObjectError| e.into_cluster_error(&"the Node list");
        let view = self.gate(Verb::List, Resource::Node).map_err(failed)?;
        let selector = Selector::parse(label_selector)
            .map_err(|e| failed(classify(KubeError::bad_request(e))))?;
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
