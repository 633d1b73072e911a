//! The provider ports: `ProviderImpl` with `kubernetes()` and `load_balancers()`, and the
//! `ProviderRegistry` that maps an account to its implementation.
//!
//! Invariant: adapters classify every failure once into [`ProviderError`] (the port's own
//! error, defined here); the types here
//! are provider-neutral (DigitalOcean is the first provider), and unknown provider states
//! parse into `Unknown(..)` rather than failing.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::model::{
    ClusterMode, Domain, ForwardingRule, GlobalSettings, HealthCheck, LoadBalancerType,
    ProviderAccount, SecretString, StickySessions,
};
use crate::policy::Taint;
use crate::time::Timestamp;

/// The provider error classes of DESIGN.md, decided once, in the adapter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The object does not exist (or no longer does).
    #[error("not found at the provider")]
    NotFound,
    /// A 4xx that retrying cannot fix, with the provider's message.
    #[error("refused by the provider: {message}")]
    Refused {
        /// The provider's message.
        message: String,
    },
    /// Throttled: try again after this many milliseconds.
    #[error("rate limited by the provider; retry in {retry_after_ms} ms")]
    RateLimited {
        /// How long to wait, in milliseconds.
        retry_after_ms: u64,
    },
    /// Not sent: the account's provider-call budget (this control plane's own, shared
    /// by its replicas) has no call to spare for this many milliseconds. Unlike a
    /// failure, retrying after the wait is all there is to do.
    #[error("over the account's provider-call budget; retry in {retry_after_ms} ms")]
    OverBudget {
        /// How long until the budget frees a call, in milliseconds.
        retry_after_ms: u64,
    },
    /// The account's credentials were refused.
    #[error("the provider refused the account's credentials")]
    Unauthorized,
    /// Worth retrying: 5xx, timeouts, connection errors, "busy" answers.
    #[error("transient provider error: {message}")]
    Transient {
        /// What happened (no secrets).
        message: String,
    },
}

impl ProviderError {
    /// Whether a later retry of the same request may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ProviderError::RateLimited { .. }
                | ProviderError::OverBudget { .. }
                | ProviderError::Transient { .. }
        )
    }
}

/// Result alias of the provider ports.
pub type ProviderResult<T> = Result<T, ProviderError>;

/// A provider cluster's state (DigitalOcean's `status.state`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProviderClusterState {
    /// Being made.
    Provisioning,
    /// Up.
    Running,
    /// Up but unhealthy.
    Degraded,
    /// Failed.
    Error,
    /// Upgrading.
    Upgrading,
    /// Being deleted.
    Deleting,
    /// Deleted.
    Deleted,
    /// A state this adapter does not know.
    Unknown(String),
}

impl ProviderClusterState {
    /// The provider's spelling (`running`, `upgrading`, …; an unknown state as it came),
    /// for messages.
    pub fn as_str(&self) -> &str {
        match self {
            ProviderClusterState::Provisioning => "provisioning",
            ProviderClusterState::Running => "running",
            ProviderClusterState::Degraded => "degraded",
            ProviderClusterState::Error => "error",
            ProviderClusterState::Upgrading => "upgrading",
            ProviderClusterState::Deleting => "deleting",
            ProviderClusterState::Deleted => "deleted",
            ProviderClusterState::Unknown(s) => s,
        }
    }
}

/// A provider node's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProviderNodeState {
    /// Being made.
    Provisioning,
    /// Up.
    Running,
    /// Being drained.
    Draining,
    /// Being deleted.
    Deleting,
    /// Unknown.
    Unknown(String),
}

/// A node of a provider node pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderNode {
    /// Provider id.
    pub id: String,
    /// Node (and Kubernetes Node) name; empty right after create.
    pub name: String,
    /// State.
    pub state: ProviderNodeState,
    /// Droplet id, once it exists.
    pub droplet_id: Option<String>,
}

/// A provider node pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderNodePool {
    /// Provider id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Size slug.
    pub size: String,
    /// Node count (the provider's, also when autoscaled).
    pub count: u32,
    /// Autoscaling on.
    pub auto_scale: bool,
    /// Autoscale minimum.
    pub min_nodes: u32,
    /// Autoscale maximum.
    pub max_nodes: u32,
    /// Labels (server-added ones included).
    pub labels: BTreeMap<String, String>,
    /// Taints.
    pub taints: Vec<Taint>,
    /// Tags, server-added ones stripped.
    pub tags: Vec<String>,
    /// Nodes.
    pub nodes: Vec<ProviderNode>,
}

/// A provider cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderCluster {
    /// Provider id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Region slug.
    pub region: String,
    /// Version slug.
    pub version: String,
    /// State.
    pub state: ProviderClusterState,
    /// The provider's status message.
    pub message: Option<String>,
    /// API endpoint, once provisioned.
    pub endpoint: Option<String>,
    /// HA control plane.
    pub high_availability: bool,
    /// Tags, server-added ones stripped.
    pub tags: Vec<String>,
    /// Patch upgrades in the maintenance window.
    pub auto_upgrade: bool,
    /// Surge upgrades (new nodes before old ones go).
    pub surge_upgrade: bool,
    /// The maintenance window, when the provider reports one.
    pub maintenance_window: Option<MaintenanceWindow>,
    /// Node pools.
    pub node_pools: Vec<ProviderNodePool>,
    /// Created.
    pub created_at: Option<Timestamp>,
}

/// A cluster's weekly maintenance window (DigitalOcean's `maintenance_policy`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MaintenanceWindow {
    /// Start, `HH:MM` UTC.
    pub start_time: String,
    /// `any`, or `monday` … `sunday`.
    pub day: String,
}

/// A change to a cluster (DigitalOcean `PUT /v2/kubernetes/clusters/{id}`,
/// research/digitalocean.md §4.4). `name` and the whole `tags` list are always sent (tags
/// replace, server tags excluded); the rest only when `Some`, so what is left out keeps
/// its value. Region, version (use `upgrade_cluster`), VPC and node pools are not
/// changed here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateClusterRequest {
    /// Name (the current one to keep it).
    pub name: String,
    /// Every user tag.
    pub tags: Vec<String>,
    /// HA control plane: only false → true is possible; asking true → false is `Refused`.
    pub high_availability: Option<bool>,
    /// Patch upgrades in the maintenance window.
    pub auto_upgrade: Option<bool>,
    /// Surge upgrades.
    pub surge_upgrade: Option<bool>,
    /// The maintenance window.
    pub maintenance_window: Option<MaintenanceWindow>,
}

impl UpdateClusterRequest {
    /// A request that keeps `cluster` as it is (its name and tags, nothing else sent):
    /// change what needs changing from here.
    pub fn keeping(cluster: &ProviderCluster) -> Self {
        Self {
            name: cluster.name.clone(),
            tags: cluster.tags.clone(),
            high_availability: None,
            auto_upgrade: None,
            surge_upgrade: None,
            maintenance_window: None,
        }
    }
}

/// What to ask for a node pool (create or update).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePoolRequest {
    /// Name.
    pub name: String,
    /// Size slug (create only; immutable).
    pub size: String,
    /// Count (fixed) or initial count (autoscaled). `None` on update of an autoscaled
    /// pool, so the provider's count is never reset.
    pub count: Option<u32>,
    /// Autoscale bounds.
    pub auto_scale: Option<(u32, u32)>,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Taints.
    pub taints: Vec<Taint>,
    /// Tags.
    pub tags: Vec<String>,
}

/// What to ask for a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateClusterRequest {
    /// Name (recorded before the call, so a retry finds it).
    pub name: String,
    /// Region slug.
    pub region: String,
    /// Version slug or `latest`.
    pub version: String,
    /// HA control plane.
    pub high_availability: bool,
    /// Mode (a provider refuses modes it lacks).
    pub mode: ClusterMode,
    /// Tags.
    pub tags: Vec<String>,
    /// First node pools.
    pub node_pools: Vec<NodePoolRequest>,
}

/// A named provider object (associated resources).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamedResource {
    /// Provider id.
    pub id: String,
    /// Name.
    pub name: String,
}

/// The resources a provider associates with a cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssociatedResources {
    /// Load balancers.
    pub load_balancers: Vec<NamedResource>,
    /// Volumes.
    pub volumes: Vec<NamedResource>,
    /// Volume snapshots.
    pub volume_snapshots: Vec<NamedResource>,
}

/// A version offered for clusters or upgrades.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesVersion {
    /// Provider slug, e.g. `1.32.1-do.0`.
    pub slug: String,
    /// Kubernetes version, e.g. `1.32.1`.
    pub kubernetes_version: String,
}

/// What a provider offers for new clusters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderOptions {
    /// Region slugs.
    pub regions: Vec<String>,
    /// Versions, newest first.
    pub versions: Vec<KubernetesVersion>,
    /// Size slugs.
    pub sizes: Vec<String>,
}

/// Credentials to reach a cluster's API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterCredentials {
    /// The kubeconfig (YAML).
    pub kubeconfig: SecretString,
    /// When its token expires, if known.
    pub expires_at: Option<Timestamp>,
}

/// Static facts about a provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderCapabilities {
    /// Cluster modes it offers.
    pub cluster_modes: Vec<ClusterMode>,
}

/// Managed Kubernetes at a provider.
#[async_trait]
pub trait KubernetesProvider: Send + Sync {
    /// Every cluster of the account (all pages; a list that changed while it was read
    /// is read again, and one that keeps changing is `Transient`, never partial). An
    /// object missing from a list may still exist: confirm with a GET before acting on
    /// its absence.
    async fn list_clusters(&self) -> ProviderResult<Vec<ProviderCluster>>;
    /// One cluster.
    async fn get_cluster(&self, id: &str) -> ProviderResult<ProviderCluster>;
    /// Creates a cluster.
    async fn create_cluster(&self, req: &CreateClusterRequest) -> ProviderResult<ProviderCluster>;
    /// Changes a cluster's name, tags, HA (false → true only), upgrade settings or
    /// maintenance window; the answer is the cluster as changed.
    async fn update_cluster(
        &self,
        id: &str,
        req: &UpdateClusterRequest,
    ) -> ProviderResult<ProviderCluster>;
    /// Deletes a cluster only (associated resources stay).
    async fn delete_cluster(&self, id: &str) -> ProviderResult<()>;
    /// The resources the provider associates with a cluster.
    async fn associated_resources(&self, id: &str) -> ProviderResult<AssociatedResources>;
    /// Deletes a cluster and the listed associated resources only.
    async fn delete_cluster_selective(
        &self,
        id: &str,
        load_balancer_ids: &[String],
    ) -> ProviderResult<()>;
    /// A cluster's node pools.
    async fn list_node_pools(&self, cluster_id: &str) -> ProviderResult<Vec<ProviderNodePool>>;
    /// One node pool.
    async fn get_node_pool(
        &self,
        cluster_id: &str,
        node_pool_id: &str,
    ) -> ProviderResult<ProviderNodePool>;
    /// Adds a node pool.
    async fn create_node_pool(
        &self,
        cluster_id: &str,
        req: &NodePoolRequest,
    ) -> ProviderResult<ProviderNodePool>;
    /// Changes a node pool (count, autoscale, labels, taints).
    async fn update_node_pool(
        &self,
        cluster_id: &str,
        node_pool_id: &str,
        req: &NodePoolRequest,
    ) -> ProviderResult<ProviderNodePool>;
    /// Removes a node pool.
    async fn delete_node_pool(&self, cluster_id: &str, node_pool_id: &str) -> ProviderResult<()>;
    /// Removes (or replaces) one node.
    async fn delete_node(
        &self,
        cluster_id: &str,
        node_pool_id: &str,
        node_id: &str,
        skip_drain: bool,
        replace: bool,
    ) -> ProviderResult<()>;
    /// Versions a cluster may upgrade to (empty when up to date).
    async fn available_upgrades(&self, cluster_id: &str) -> ProviderResult<Vec<KubernetesVersion>>;
    /// Starts an upgrade.
    async fn upgrade_cluster(&self, cluster_id: &str, version: &str) -> ProviderResult<()>;
    /// Regions, versions and sizes.
    async fn options(&self) -> ProviderResult<ProviderOptions>;
    /// A kubeconfig (bearer-token type) for the cluster; adapters cache it until near
    /// expiry. `Transient` while the cluster still provisions (its kubeconfig is not
    /// served yet), `NotFound` once the cluster is gone.
    async fn credentials(&self, cluster_id: &str) -> ProviderResult<ClusterCredentials>;
    /// Forgets cached credentials of the cluster, so the next `credentials` call mints
    /// new ones. Call it when the cluster's API refuses them (401). Adapters that cache
    /// nothing keep this default.
    fn invalidate_credentials(&self, _cluster_id: &str) {}
}

/// A provider load balancer's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProviderLoadBalancerStatus {
    /// Being made.
    New,
    /// Up.
    Active,
    /// Failed.
    Errored,
    /// Unknown.
    Unknown(String),
}

/// Provider-resolved targets (our load balancer ids already mapped to provider ids).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProviderTargets {
    /// A droplet tag.
    Tag(String),
    /// Droplet ids.
    DropletIds(Vec<u64>),
    /// Provider ids of regional load balancers (global only).
    LoadBalancerIds(Vec<String>),
}

/// A provider load balancer's kind, as fine as the provider has it (DigitalOcean:
/// `REGIONAL` for HTTP, `REGIONAL_NETWORK` for L4, `GLOBAL`). The kind cannot change and
/// a PUT sends it, so observed state keeps the provider's exact kind and an update sends
/// it back unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ProviderLoadBalancerKind {
    /// One region, HTTP(S) (the kind SPEC §11 `regional` creates).
    Regional,
    /// One region, layer 4 (TCP/UDP).
    RegionalNetwork,
    /// Global.
    Global,
    /// A kind this adapter does not know, as the provider spells it.
    Unknown(String),
}

impl ProviderLoadBalancerKind {
    /// The SPEC §11 type it counts as (an unknown kind counts as regional).
    pub fn lb_type(&self) -> LoadBalancerType {
        match self {
            Self::Global => LoadBalancerType::Global,
            Self::Regional | Self::RegionalNetwork | Self::Unknown(_) => LoadBalancerType::Regional,
        }
    }

    /// Whether it is global (no region, no forwarding rules, no size units).
    pub fn is_global(&self) -> bool {
        *self == Self::Global
    }
}

impl From<LoadBalancerType> for ProviderLoadBalancerKind {
    /// The kind a load balancer of SPEC §11 `type` is created as.
    fn from(t: LoadBalancerType) -> Self {
        match t {
            LoadBalancerType::Regional => Self::Regional,
            LoadBalancerType::Global => Self::Global,
        }
    }
}

/// The whole desired provider object (updates replace it whole).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadBalancerRequest {
    /// Name.
    pub name: String,
    /// Kind (create-only: an update sends the kind the balancer has).
    pub kind: ProviderLoadBalancerKind,
    /// Region (regional).
    pub region: Option<String>,
    /// Forwarding rules (regional).
    pub forwarding_rules: Vec<ForwardingRule>,
    /// Health check.
    pub health_check: HealthCheck,
    /// Sticky sessions.
    pub sticky_sessions: Option<StickySessions>,
    /// Targets.
    pub targets: ProviderTargets,
    /// Size units (regional).
    pub size_unit: Option<u32>,
    /// Redirect HTTP to HTTPS.
    pub redirect_http_to_https: bool,
    /// Global settings.
    pub global_settings: Option<GlobalSettings>,
    /// Domains (global).
    pub domains: Vec<Domain>,
    /// Resource tags (create only).
    pub tags: Vec<String>,
}

/// A provider load balancer as observed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderLoadBalancer {
    /// Provider id.
    pub id: String,
    /// Status.
    pub status: ProviderLoadBalancerStatus,
    /// Public IPv4 once active.
    pub ip: Option<String>,
    /// What the provider holds, in request form (for diffing).
    pub spec: LoadBalancerRequest,
    /// Created.
    pub created_at: Option<Timestamp>,
}

/// Load balancers at a provider.
#[async_trait]
pub trait LoadBalancerProvider: Send + Sync {
    /// Every load balancer of the account (all pages, as `list_clusters` reads them).
    async fn list(&self) -> ProviderResult<Vec<ProviderLoadBalancer>>;
    /// One load balancer.
    async fn get(&self, id: &str) -> ProviderResult<ProviderLoadBalancer>;
    /// Creates one.
    async fn create(&self, req: &LoadBalancerRequest) -> ProviderResult<ProviderLoadBalancer>;
    /// Replaces one whole ("busy" answers are `Transient`).
    async fn update(
        &self,
        id: &str,
        req: &LoadBalancerRequest,
    ) -> ProviderResult<ProviderLoadBalancer>;
    /// Deletes one (`NotFound` when already gone).
    async fn delete(&self, id: &str) -> ProviderResult<()>;
}

/// One provider account's API.
#[async_trait]
pub trait ProviderImpl: Send + Sync {
    /// Static facts.
    fn capabilities(&self) -> ProviderCapabilities;
    /// Checks the account's credentials (`Unauthorized` when refused).
    async fn check_credentials(&self) -> ProviderResult<()>;
    /// Managed Kubernetes.
    fn kubernetes(&self) -> &dyn KubernetesProvider;
    /// Load balancers.
    fn load_balancers(&self) -> &dyn LoadBalancerProvider;
}

/// Most characters of a provider API token.
pub const PROVIDER_TOKEN_MAX: usize = 1024;
/// The rule of a provider API token, as [`ProviderCredentials::new`] applies it: visible
/// ASCII only — no whitespace, control or format characters — since it travels in an HTTP
/// header (and a portable pattern: it means the same to every regex engine).
pub const PROVIDER_TOKEN_PATTERN: &str = "^[!-~]+$";

/// The credentials document of a provider account (SPEC §5 `credentials: {token}`): what
/// `providerAccounts.create` takes in and seals with the `SecretBox`, and what a
/// `ProviderRegistry` opens. `Debug` never prints the token.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderCredentials {
    /// The provider API token (DigitalOcean: `dop_v1_…`); write-only.
    #[serde(serialize_with = "SecretString::serialize_exposed")]
    #[cfg_attr(
        feature = "schema",
        schemars(
            length(min = 1, max = PROVIDER_TOKEN_MAX),
            regex(pattern = PROVIDER_TOKEN_PATTERN),
            extend("writeOnly" = true)
        )
    )]
    pub token: SecretString,
}

impl std::fmt::Debug for ProviderCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderCredentials").field("token", &self.token).finish()
    }
}

/// Why a credentials document is not usable (never quoting it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    /// Not the JSON object `{"token": "…"}`.
    #[error("credentials must be the JSON object {{\"token\": \"…\"}}")]
    Shape,
    /// The token is empty, too long, or holds anything but visible ASCII (it travels in
    /// an HTTP header).
    #[error(
        "credentials.token must be a token of 1 to 1024 visible ASCII characters (no spaces, control or format characters)"
    )]
    Token,
}

impl ProviderCredentials {
    /// Credentials of `token`, checked as [`ProviderCredentials::open`] checks them.
    pub fn new(token: SecretString) -> Result<Self, CredentialsError> {
        let t = token.expose();
        let visible_ascii = t.bytes().all(|b| b.is_ascii_graphic());
        if t.is_empty() || t.len() > PROVIDER_TOKEN_MAX || !visible_ascii {
            return Err(CredentialsError::Token);
        }
        Ok(Self { token })
    }

    /// The plaintext to seal: the document's JSON.
    pub fn to_plaintext(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Opens an account's sealed credentials with the server's `SecretBox` (the account
    /// id is the AAD); every `ProviderRegistry` goes through this one function, so a
    /// failure reads the same whichever provider face is behind it, and never quotes
    /// the document.
    pub fn unseal(
        secret_box: &dyn crate::ports::SecretBox,
        account: &crate::model::ProviderAccount,
    ) -> ProviderResult<Self> {
        let id = account.provider_account_id.as_str();
        let plain = secret_box.open(&account.credentials.0, id.as_bytes()).map_err(|_| {
            ProviderError::Refused {
                message: format!("credentials of account {id} could not be opened"),
            }
        })?;
        Self::open(&plain).map_err(|e| ProviderError::Refused {
            message: format!("credentials of account {id}: {e}"),
        })
    }

    /// Reads an opened document. The parser's message is dropped: it can quote the input.
    pub fn open(plaintext: &[u8]) -> Result<Self, CredentialsError> {
        let doc: Self = serde_json::from_slice(plaintext).map_err(|_| CredentialsError::Shape)?;
        Self::new(doc.token)
    }
}

/// Maps an account to its provider implementation.
#[async_trait]
pub trait ProviderRegistry: Send + Sync {
    /// The implementation for `account` (opening its credentials).
    async fn provider_for(
        &self,
        account: &ProviderAccount,
    ) -> ProviderResult<Arc<dyn ProviderImpl>>;
    /// An implementation for credentials not stored yet (`providerAccounts.create`
    /// checks the token before it stores it).
    async fn provider_for_token(
        &self,
        provider: crate::model::ProviderKind,
        token: &SecretString,
    ) -> ProviderResult<Arc<dyn ProviderImpl>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_document_round_trips_and_never_shows_the_token() {
        let c = ProviderCredentials::new(SecretString::new("dop_v1_abc")).unwrap();
        assert_eq!(c.to_plaintext(), br#"{"token":"dop_v1_abc"}"#.to_vec());
        assert_eq!(ProviderCredentials::open(&c.to_plaintext()).unwrap(), c);
        assert!(!format!("{c:?}").contains("dop_v1_abc"));
        for bad in [&br#"{"token":"dop_v1_abc","x":1}"#[..], b"dop_v1_abc", br#"{"tok":"a"}"#] {
            let e = ProviderCredentials::open(bad).unwrap_err();
            assert_eq!(e, CredentialsError::Shape);
            assert!(!e.to_string().contains("dop_v1_abc"));
        }
        let long = "x".repeat(PROVIDER_TOKEN_MAX + 1);
        for bad in ["", "a b", "a\nb", "a\u{7}", long.as_str()] {
            assert_eq!(
                ProviderCredentials::new(SecretString::new(bad)).unwrap_err(),
                CredentialsError::Token
            );
        }
        // The documented pattern is the rule `new` applies.
        let re = regex::Regex::new(PROVIDER_TOKEN_PATTERN).unwrap();
        for t in
            ["dop_v1_abc", "a b", "a\tb", "a\u{7}", "é\u{a0}x", "x\u{2028}", "a\u{200b}b", "!~"]
        {
            assert_eq!(
                re.is_match(t),
                ProviderCredentials::new(SecretString::new(t)).is_ok(),
                "{t:?}"
            );
        }
    }
}
