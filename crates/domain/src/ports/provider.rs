//! The provider ports: `ProviderImpl` with `kubernetes()` and `load_balancers()`, and the
//! `ProviderRegistry` that maps an account to its implementation.
//!
//! Invariant: adapters classify every failure once into [`ProviderError`] (the port's own
//! error, defined here); the types here are provider-neutral — what differs between
//! providers is declared once per adapter in [`ProviderOffer`] — and unknown provider
//! states parse into `Unknown(..)` rather than failing.

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
    /// One change at a time: the object is busy with an earlier change (GKE's "Cluster
    /// is running incompatible operation", a DigitalOcean load balancer still applying
    /// an update). The change waits and is retried; never a refusal, never an `error`.
    #[error("busy with an earlier change at the provider: {message}")]
    Busy {
        /// The provider's words (no secrets).
        message: String,
    },
    /// Worth retrying: 5xx, timeouts, connection errors.
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
                | ProviderError::Busy { .. }
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
    /// The version of the pool's nodes where the provider versions each pool apart from
    /// the control plane ([`PoolUpgrades::OneByOne`], GKE's `NodePool.version`); `None`
    /// where the nodes follow the control plane (DigitalOcean).
    pub version: Option<String>,
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
    /// Mode (`autopilot`: the provider runs the nodes; it has no node pools).
    pub mode: ClusterMode,
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
    /// An autopilot cluster's nodes, counted from the cluster's own Nodes (the provider
    /// runs them; they belong to no node pool). `None` for a standard cluster, and while
    /// the cluster's API cannot be read (`nodes_unread`).
    pub nodes: Option<crate::model::ClusterNodes>,
    /// Why the cluster's Nodes could not be read, when it serves its API and they could
    /// not: a provider with no current size of a pool (GKE) counts each pool's nodes
    /// through the cluster's own API. Then no pool's `count` or `nodes` (nor `nodes`) is
    /// an observation — nothing may be compared with them or decided from them. A
    /// listing carries it, so that one cluster whose API does not answer does not fail
    /// the listing every other object of the account is observed by; a GET of a
    /// standard cluster, whose caller acts on its counts, fails instead (`Transient`).
    /// Always `None` where the provider reports its pools' nodes itself (DigitalOcean).
    #[serde(default)]
    pub nodes_unread: Option<String>,
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
    /// Load balancers the provider deletes with the cluster when
    /// [`KubernetesProvider::delete_cluster_selective`] names them.
    pub load_balancers: Vec<NamedResource>,
    /// Load balancers the cluster's own controllers made that the provider leaves in
    /// place when the cluster goes, whatever is asked (GKE: a Service's forwarding
    /// rule, target pool and firewall rules): named, never deleted.
    #[serde(default)]
    pub retained_load_balancers: Vec<NamedResource>,
    /// Volumes (left in place when the cluster goes).
    pub volumes: Vec<NamedResource>,
    /// Volume snapshots (left in place when the cluster goes).
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

/// How a provider's resource labels (DigitalOcean's tags, GKE's `resourceLabels`)
/// may be written: the ownership marks above the adapters are tags of
/// `[a-z0-9-]`, which every rule here takes; the rule says what else a provider
/// allows, for names derived from tenant input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelRule {
    /// DigitalOcean tags: up to 255 characters of letters, digits, `:`, `-`, `_`.
    Tags,
    /// GCP labels: keys of 1–63 `[a-z0-9_-]` starting with a letter, values of 0–63; no
    /// `/` or `.` (so `better-compute.dev/…` is not a key there).
    Gcp,
}

impl LabelRule {
    /// The rule in a sentence, for the reference docs.
    pub fn describe(self) -> &'static str {
        match self {
            LabelRule::Tags => "tags: up to 255 characters of letters, digits, `:`, `-` and `_`",
            LabelRule::Gcp => {
                "resource labels: keys of 1–63 characters of `[a-z0-9_-]` starting with a \
                 letter, values of 0–63 characters, no `/` or `.`"
            }
        }
    }
}

/// How a provider upgrades a cluster's nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolUpgrades {
    /// The nodes follow the control plane: one upgrade of the cluster upgrades every
    /// pool (DigitalOcean's `POST …/upgrade`).
    WithControlPlane,
    /// The control plane and each node pool have their own version: after the control
    /// plane, each pool is upgraded by its own call, one operation at a time
    /// ([`KubernetesProvider::upgrade_node_pool`]; GKE's `nodePools.update` with
    /// `nodeVersion`, never above the control plane's version).
    OneByOne,
}

/// What a provider offers: one declaration per adapter, read by the API and the
/// reconcilers instead of asking which provider it is (SPEC §5). A call a provider
/// cannot serve is refused naming [`ProviderOffer::provider`] and what it lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderOffer {
    /// The provider, for messages.
    pub provider: crate::model::ProviderKind,
    /// Cluster modes it offers.
    pub cluster_modes: Vec<ClusterMode>,
    /// Whether standard clusters take node pools through this system (an autopilot
    /// cluster never has any).
    pub node_pools: bool,
    /// Load balancer types it offers (none: `loadBalancers.create` is refused).
    pub load_balancer_types: Vec<LoadBalancerType>,
    /// Most characters of a cluster or node-pool name at the provider.
    pub name_max: usize,
    /// Its resource-label rule.
    pub label_rule: LabelRule,
    /// Whether an autopilot cluster's `region` must be a region (not a zone).
    pub autopilot_regions_only: bool,
    /// Whether node pools follow the control plane's upgrade or are upgraded one by one.
    pub pool_upgrades: PoolUpgrades,
    /// How the adapter places a node pool so that its `count` (and `autoScale` min and
    /// max), a total on every provider, holds — for the reference docs (SPEC §6).
    pub count_placement: &'static str,
}

impl ProviderOffer {
    /// `None` when the provider offers `mode`, else why not (for FAILED_PRECONDITION).
    pub fn lacks_mode(&self, mode: ClusterMode) -> Option<String> {
        if self.cluster_modes.contains(&mode) {
            return None;
        }
        let m = match mode {
            ClusterMode::Standard => "standard",
            ClusterMode::Autopilot => "autopilot",
        };
        Some(format!("{} offers no {m} clusters", self.provider.as_str()))
    }

    /// `None` when the provider offers load balancers of `t`, else why not.
    pub fn lacks_load_balancer(&self, t: LoadBalancerType) -> Option<String> {
        if self.load_balancer_types.contains(&t) {
            return None;
        }
        let p = self.provider.as_str();
        Some(if self.load_balancer_types.is_empty() {
            format!("{p} offers no load balancers")
        } else {
            let t = match t {
                LoadBalancerType::Regional => "regional",
                LoadBalancerType::Global => "global",
            };
            format!("{p} offers no {t} load balancers")
        })
    }
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
    /// Starts an upgrade of the control plane (and, where pools follow it
    /// ([`PoolUpgrades::WithControlPlane`]), of every node pool).
    async fn upgrade_cluster(&self, cluster_id: &str, version: &str) -> ProviderResult<()>;
    /// Starts an upgrade of one node pool's nodes to `version` (at most the control
    /// plane's), where the provider upgrades pools one by one
    /// ([`PoolUpgrades::OneByOne`]). One operation at a time: asked while another runs
    /// on the cluster it is `Busy`. Providers whose pools follow the control plane keep
    /// this default, a refusal.
    async fn upgrade_node_pool(
        &self,
        cluster_id: &str,
        node_pool_id: &str,
        version: &str,
    ) -> ProviderResult<()> {
        let _ = (cluster_id, node_pool_id, version);
        Err(ProviderError::Refused {
            message:
                "this provider upgrades node pools with the control plane: upgrade the cluster"
                    .into(),
        })
    }
    /// Regions, versions and sizes, where the provider has one answer for every region.
    async fn options(&self) -> ProviderResult<ProviderOptions>;
    /// Regions, versions and sizes for new clusters in `region`: GKE's versions are per
    /// location, so its adapter answers this and refuses [`KubernetesProvider::options`];
    /// DigitalOcean's are the same everywhere (the default asks `options`).
    async fn options_in(&self, region: &str) -> ProviderResult<ProviderOptions> {
        let _ = region;
        self.options().await
    }
    /// A kubeconfig (bearer-token type) for the cluster; adapters cache it until near
    /// expiry. `Transient` while the cluster still provisions (its kubeconfig is not
    /// served yet), `NotFound` once the cluster is gone.
    async fn credentials(&self, cluster_id: &str) -> ProviderResult<ClusterCredentials>;
    /// Whether credentials this adapter handed out that expire at `expires_at` are due
    /// for renewal now, by the adapter's own clock (the one that set `expires_at`): a
    /// `ClusterSession` then asks `credentials` again before the cluster would refuse
    /// them, and gets new ones. Adapters whose credentials are only renewed when refused
    /// keep this default.
    fn credentials_due(&self, _expires_at: Timestamp) -> bool {
        false
    }
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
    /// Replaces one whole ("busy" answers are `Busy`).
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
    /// What the provider offers (a static declaration; no call).
    fn offer(&self) -> ProviderOffer;
    /// Checks the account's credentials (`Unauthorized` when refused).
    async fn check_credentials(&self) -> ProviderResult<()>;
    /// Managed Kubernetes.
    fn kubernetes(&self) -> &dyn KubernetesProvider;
    /// Load balancers.
    fn load_balancers(&self) -> &dyn LoadBalancerProvider;
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
    /// checks them before it stores them); the credentials say which provider.
    async fn provider_for_credentials(
        &self,
        credentials: &crate::ports::AccountCredentials,
    ) -> ProviderResult<Arc<dyn ProviderImpl>>;
}
