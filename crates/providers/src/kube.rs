//! The cluster access adapter: `ClusterApi` over the `kube` crate, for any cluster a
//! kubeconfig names (DigitalOcean's, the simulator's). It implements the primitive
//! `ClusterOps`; the ownership rule on top of them is bc-domain's (`ports::cluster`).
//! A cluster is reached over the network, or, for the clusters an [`InProcessClusters`]
//! knows (the simulator's, in tests), through a service in this process with the same
//! client and the same requests.
//!
//! Invariants: every Status error is classified by [`crate::classify::kubernetes`];
//! transport failures are classified here; no message carries the token or the
//! kubeconfig — every message is scrubbed of the kubeconfig's credentials and of the
//! values of the Secret the call sent; a kubeconfig is used only with inline
//! credentials (token, client certificate and key data, CA data): one that would run a
//! program (`exec`, `auth-provider`) or read a file of this host is refused.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bc_domain::model::SecretString;
use bc_domain::name::FIELD_MANAGER;
use bc_domain::ports::{
    ClusterApi, ClusterClient, ClusterError, ClusterNode, ClusterOps, KubeObject,
    LoadBalancerService, NamespacedObject, ObjectError, ObjectKind, ObjectMeta, ObjectRef,
    OwnerReference, PersistentVolumeInfo, Preconditions, ProviderBacked, TokenReview,
};
use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body_util::combinators::UnsyncBoxBody;
use k8s_openapi::api::authentication::v1 as authn;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, Service};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::client::ConfigExt as _;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::{Scope, verbs};
use kube::{Client, Config};
use tower::BoxError;
use tower::util::BoxCloneService;

use crate::classify::kubernetes::classify_status;
use crate::classify::scrub_all_then_cut;
use crate::http::error_chain;

/// API groups whose namespaced resources are views or records of other objects, not
/// objects stored in the namespace (events, resource metrics).
const NOT_STORED_GROUPS: [&str; 2] = ["events.k8s.io", "metrics.k8s.io"];

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

/// The body of an in-process cluster API's answers.
pub type InProcessBody = UnsyncBoxBody<Bytes, BoxError>;

/// A cluster API answered in this process: a tower service taking the requests the
/// `kube` client makes (URI, headers, body as it sends them over the network) and
/// answering as the cluster's API server does over HTTP.
pub type InProcessService =
    BoxCloneService<Request<kube::client::Body>, Response<InProcessBody>, BoxError>;

/// The cluster APIs this process answers itself, by their kubeconfig `server` URL: the
/// seam through which tests reach simulated clusters with the production client and
/// encoding but without a socket, a TLS listener or a handshake per cluster.
pub trait InProcessClusters: Send + Sync {
    /// The service answering for `server` (a kubeconfig's cluster URL), or `None` when
    /// it is not one of them (the client then goes over the network).
    fn route(&self, server: &Uri) -> Option<InProcessService>;
}

/// `ClusterApi` over the `kube` client.
#[derive(Clone, Default)]
pub struct KubeClusterApi {
    timeouts: KubeTimeouts,
    in_process: Option<Arc<dyn InProcessClusters>>,
}

impl std::fmt::Debug for KubeClusterApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClusterApi")
            .field("timeouts", &self.timeouts)
            .field("in_process", &self.in_process.is_some())
            .finish()
    }
}

impl KubeClusterApi {
    /// An adapter with the default timeouts (connect 10 s, read 30 s).
    pub fn new() -> Self {
        Self::default()
    }

    /// An adapter with other timeouts.
    pub fn with_timeouts(timeouts: KubeTimeouts) -> Self {
        Self { timeouts, in_process: None }
    }

    /// An adapter that sends the requests of the clusters `routes` knows to their
    /// in-process services (the rest over the network). The client is the same `kube`
    /// client with the same layers (base URI, bearer token, extra headers; no built-in
    /// retry); only the hyper connection is replaced, so no timeout applies in process.
    pub fn in_process(routes: Arc<dyn InProcessClusters>) -> Self {
        Self { timeouts: KubeTimeouts::default(), in_process: Some(routes) }
    }
}

/// A `kube` client over `service`, with the layers of the network client that shape a
/// request: the kubeconfig's server as base URI, its credentials, its extra headers.
fn in_process_client(config: Config, service: InProcessService) -> Result<Client, ClusterError> {
    let refused =
        || ClusterError::Credentials("the kubeconfig's credentials cannot be used".into());
    let auth = config.auth_layer().map_err(|_| refused())?;
    let headers = config.extra_headers_layer().map_err(|_| refused())?;
    let stack = tower::ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(auth)
        .layer(headers)
        .service(service);
    Ok(Client::new(stack, config.default_namespace))
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
        inline_credentials_only(&kc)?;
        let credentials = credentials_of(&kc);
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
        let route = self.in_process.as_ref().and_then(|r| r.route(&config.cluster_url));
        let client = match route {
            Some(service) => in_process_client(config, service)?,
            None => Client::try_from(config).map_err(|_| {
                ClusterError::Credentials("the kubeconfig's cluster settings cannot be used".into())
            })?,
        };
        Ok(Arc::new(KubeClusterClient { client, credentials: Arc::new(credentials) }))
    }
}

/// Refuses a kubeconfig that would run a program or read a file here: a provider's
/// kubeconfig carries its credentials inline, and one that names `exec`, an
/// `auth-provider` or a path (`tokenFile`, `client-certificate`, `client-key`,
/// `certificate-authority`) is not one to follow — it would run commands or read files
/// of this host in the name of whoever controls the provider's answer.
fn inline_credentials_only(kc: &Kubeconfig) -> Result<(), ClusterError> {
    let refuse = |whose: &str, name: &str, field: &str| {
        Err(ClusterError::Credentials(format!(
            "the kubeconfig's {whose} {name} uses {field}: only inline credentials are used (token, client-certificate-data, client-key-data, certificate-authority-data)"
        )))
    };
    for user in &kc.auth_infos {
        let Some(a) = &user.auth_info else { continue };
        let fields = [
            ("exec", a.exec.is_some()),
            ("auth-provider", a.auth_provider.is_some()),
            ("tokenFile", a.token_file.is_some()),
            ("client-certificate", a.client_certificate.is_some()),
            ("client-key", a.client_key.is_some()),
        ];
        if let Some((field, _)) = fields.iter().find(|(_, set)| *set) {
            return refuse("user", &user.name, field);
        }
    }
    for cluster in &kc.clusters {
        if cluster.cluster.as_ref().is_some_and(|c| c.certificate_authority.is_some()) {
            return refuse("cluster", &cluster.name, "certificate-authority");
        }
    }
    Ok(())
}

/// The secret values of a kubeconfig's users (token, password, client key data): what
/// no message about its cluster may quote.
fn credentials_of(kc: &Kubeconfig) -> Vec<String> {
    let fields = ["token", "password", "client-key-data"];
    kc.auth_infos
        .iter()
        .filter_map(|u| serde_json::to_value(u.auth_info.as_ref()?).ok())
        .flat_map(|v| fields.map(|f| v.get(f).and_then(|s| s.as_str()).map(str::to_owned)))
        .flatten()
        .collect()
}

/// A connected client of one cluster.
#[derive(Clone)]
pub struct KubeClusterClient {
    client: Client,
    /// Its kubeconfig's credentials, scrubbed from every message.
    credentials: Arc<Vec<String>>,
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

/// Classifies a kube error: a Status answer as [`crate::classify::kubernetes`] says;
/// a refused kubeconfig as `Credentials`; transport
/// failures and unusable answers as `Unreachable`. Only the server's message and reason,
/// or the error class, are kept, with `secrets` scrubbed.
pub fn classify(e: &kube::Error, secrets: &[&str]) -> ObjectError {
    let failed = |e: ClusterError| ObjectError::Failed(e);
    match e {
        kube::Error::Api(s) => classify_status(s.code, &s.reason, &s.message, secrets),
        kube::Error::Auth(_) => {
            failed(ClusterError::Credentials("the kubeconfig's credentials cannot be used".into()))
        }
        kube::Error::SerdeError(_) => failed(ClusterError::Unreachable(
            "the cluster API answered something that is not a Kubernetes object".into(),
        )),
        kube::Error::HyperError(_) | kube::Error::Service(_) => {
            failed(ClusterError::Unreachable(format!(
                "cannot reach the cluster API: {}",
                scrub_all_then_cut(&error_chain(e), secrets)
            )))
        }
        other => failed(ClusterError::Unreachable(format!(
            "cluster API call failed: {}",
            kind_of(other)
        ))),
    }
}

fn kind_of(e: &kube::Error) -> &'static str {
    match e {
        kube::Error::HttpError(_) => "invalid request",
        kube::Error::BuildRequest(_) => "request could not be built",
        kube::Error::RustlsTls(_) => "TLS error",
        _ => "unexpected client error",
    }
}

impl KubeClusterClient {
    /// [`classify`] of a failed call, scrubbed of this client's credentials and of the
    /// secret values of `sent`, the object the call carried.
    fn failed(&self, e: &kube::Error, sent: Option<&KubeObject>) -> ObjectError {
        let values = sent.map(KubeObject::secret_values).unwrap_or_default();
        let secrets: Vec<&str> =
            self.credentials.iter().chain(values.iter()).map(String::as_str).collect();
        classify(e, &secrets)
    }

    fn api(&self, object: &ObjectRef) -> Api<DynamicObject> {
        let ar = api_resource(object.kind);
        match (&object.namespace, object.kind) {
            (_, ObjectKind::Namespace) | (None, _) => Api::all_with(self.client.clone(), &ar),
            (Some(ns), _) => Api::namespaced_with(self.client.clone(), ns, &ar),
        }
    }
}

#[async_trait]
impl ClusterOps for KubeClusterClient {
    async fn read(&self, object: &ObjectRef) -> Result<ObjectMeta, ObjectError> {
        match self.api(object).get_opt(&object.name).await.map_err(|e| self.failed(&e, None))? {
            None => Err(ObjectError::NotFound),
            Some(o) => {
                let json = serde_json::to_value(&o).map_err(|_| {
                    ObjectError::Failed(ClusterError::Unreachable(format!(
                        "{object} as read is not a Kubernetes object"
                    )))
                })?;
                Ok(ObjectMeta::of(object.kind, &json))
            }
        }
    }

    async fn create(&self, object: &KubeObject) -> Result<(), ObjectError> {
        let data: DynamicObject =
            serde_json::from_value(object.manifest.clone()).map_err(|_| {
                ObjectError::Failed(ClusterError::Refused(format!(
                    "the manifest of {} is not a Kubernetes object",
                    object.object
                )))
            })?;
        let params =
            PostParams { field_manager: Some(FIELD_MANAGER.to_owned()), ..Default::default() };
        let created = self.api(&object.object).create(&params, &data).await;
        created.map_err(|e| self.failed(&e, Some(object)))?;
        Ok(())
    }

    async fn apply(&self, object: &KubeObject, force: bool) -> Result<(), ObjectError> {
        let mut params = PatchParams::apply(FIELD_MANAGER);
        if force {
            params = params.force();
        }
        self.api(&object.object)
            .patch(&object.object.name, &params, &Patch::Apply(&object.manifest))
            .await
            .map_err(|e| self.failed(&e, Some(object)))?;
        Ok(())
    }

    async fn delete(
        &self,
        object: &ObjectRef,
        preconditions: &Preconditions,
    ) -> Result<(), ObjectError> {
        let params = DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                uid: preconditions.uid.clone(),
                resource_version: preconditions.resource_version.clone(),
            }),
            ..Default::default()
        };
        self.api(object).delete(&object.name, &params).await.map_err(|e| self.failed(&e, None))?;
        Ok(())
    }

    async fn list_nodes(&self, label_selector: &str) -> Result<Vec<ClusterNode>, ClusterError> {
        let mut params = ListParams::default();
        if !label_selector.is_empty() {
            params = params.labels(label_selector);
        }
        let nodes = Api::<Node>::all(self.client.clone())
            .list(&params)
            .await
            .map_err(|e| self.failed(&e, None).into_cluster_error(&"the Node list"))?;
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

    async fn list_namespace(&self, namespace: &str) -> Result<Vec<NamespacedObject>, ClusterError> {
        let discovery = kube::Discovery::new(self.client.clone())
            .run()
            .await
            .map_err(|e| self.failed(&e, None).into_cluster_error(&"the API discovery"))?;
        let mut out = Vec::new();
        for group in discovery.groups() {
            // Records about objects, not objects: what deleting a Namespace takes along
            // is what is stored in it.
            if NOT_STORED_GROUPS.contains(&group.name()) {
                continue;
            }
            for (ar, caps) in group.recommended_resources() {
                if caps.scope != Scope::Namespaced
                    || !caps.supports_operation(verbs::LIST)
                    || ar.kind == "Event"
                {
                    continue;
                }
                let api: Api<DynamicObject> =
                    Api::namespaced_with(self.client.clone(), namespace, &ar);
                let what = format!("the {} list of namespace {namespace}", ar.plural);
                let list = api
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| self.failed(&e, None).into_cluster_error(&what))?;
                out.extend(list.items.into_iter().map(|o| {
                    let m = o.metadata;
                    NamespacedObject {
                        kind: ar.kind.clone(),
                        name: m.name.unwrap_or_default(),
                        uid: m.uid,
                        labels: m.labels.unwrap_or_default(),
                        owners: m
                            .owner_references
                            .unwrap_or_default()
                            .into_iter()
                            .map(|r| OwnerReference { kind: r.kind, name: r.name, uid: r.uid })
                            .collect(),
                    }
                }));
            }
        }
        Ok(out)
    }

    async fn list_provider_backed(&self) -> Result<ProviderBacked, ClusterError> {
        let services = Api::<Service>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| self.failed(&e, None).into_cluster_error(&"the Service list"))?;
        let volumes = Api::<PersistentVolume>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| self.failed(&e, None).into_cluster_error(&"the PersistentVolume list"))?;
        let load_balancer_services = services
            .items
            .into_iter()
            .filter(|s| s.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer"))
            .map(|s| {
                let ingress = s
                    .status
                    .and_then(|s| s.load_balancer)
                    .and_then(|lb| lb.ingress)
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|i| i.ip.or(i.hostname))
                    .collect();
                LoadBalancerService {
                    namespace: s.metadata.namespace.unwrap_or_default(),
                    name: s.metadata.name.unwrap_or_default(),
                    uid: s.metadata.uid.unwrap_or_default(),
                    ingress,
                }
            })
            .collect();
        let persistent_volumes = volumes
            .items
            .into_iter()
            .map(|v| {
                let labels = v.metadata.labels.unwrap_or_default();
                let zone =
                    ["topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone"]
                        .iter()
                        .find_map(|k| labels.get(*k).cloned());
                let spec = v.spec.unwrap_or_default();
                let claim = spec
                    .claim_ref
                    .and_then(|c| Some(format!("{}/{}", c.namespace.unwrap_or_default(), c.name?)));
                PersistentVolumeInfo {
                    name: v.metadata.name.unwrap_or_default(),
                    csi_driver: spec.csi.as_ref().map(|c| c.driver.clone()),
                    volume_handle: spec.csi.map(|c| c.volume_handle),
                    gce_pd_name: spec.gce_persistent_disk.map(|d| d.pd_name),
                    zone,
                    claim,
                }
            })
            .collect();
        Ok(ProviderBacked { load_balancer_services, persistent_volumes })
    }

    async fn review_token(
        &self,
        token: &SecretString,
        audiences: &[String],
    ) -> Result<TokenReview, ClusterError> {
        let review = authn::TokenReview {
            spec: authn::TokenReviewSpec {
                token: token.expose().to_owned(),
                audiences: (!audiences.is_empty()).then(|| audiences.to_vec()),
            },
            ..Default::default()
        };
        // The reviewed token is a secret too: the server echoes the spec, and a message
        // about the call must not quote it.
        let secrets: Vec<&str> = self
            .credentials
            .iter()
            .map(String::as_str)
            .chain(std::iter::once(token.expose()))
            .collect();
        let answered = Api::<authn::TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| classify(&e, &secrets).into_cluster_error(&"the TokenReview"))?;
        let status = answered.status.unwrap_or_default();
        let user = status.user.unwrap_or_default();
        Ok(TokenReview {
            authenticated: status.authenticated.unwrap_or(false),
            username: user.username.unwrap_or_default(),
            uid: user.uid.unwrap_or_default(),
            groups: user.groups.unwrap_or_default(),
            extra: user.extra.unwrap_or_default().into_iter().collect(),
            audiences: status.audiences.unwrap_or_default(),
            error: status.error.filter(|e| !e.is_empty()),
        })
    }
}
