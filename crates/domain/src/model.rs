//! The records the store keeps and the API serves: pools, quotas, provider accounts,
//! substrates, clusters, node pools, load balancers, nodes, bookings, tokens, billing
//! intervals, events and idempotency records.
//!
//! Invariant: objects with desired state keep it apart from what reconcilers observe
//! (`…Status`), so a status write can never undo a desired-state change; secrets appear
//! only as hashes or as [`SealedSecret`] ciphertext.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::id::{
    BookingId, ClusterId, EventId, LoadBalancerId, NodeId, NodePoolId, PoolId, ProviderAccountId,
    TokenId,
};
use crate::name::{ObjectName, TenantId};
use crate::policy::{PoolPolicy, Scale, Taint};
use crate::state::{NodePoolState, ResourceState};
use crate::time::Timestamp;

// The in-memory secret type is the token module's, named here by its old path too.
pub use crate::token::SecretString;

/// AEAD ciphertext of a secret, as produced by the `SecretBox` port.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedSecret(pub Vec<u8>);
impl fmt::Debug for SealedSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SealedSecret({} bytes)", self.0.len())
    }
}

/// A pool's lifecycle state.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PoolState {
    /// In use.
    Active,
    /// Archived: its substrate is torn down; its name is free again.
    Archived,
}

/// A tenant's pool.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pool {
    /// Id.
    pub pool_id: PoolId,
    /// Owner.
    pub tenant_id: TenantId,
    /// Name, unique among the tenant's active pools.
    pub name: ObjectName,
    /// Desired state.
    pub policy: PoolPolicy,
    /// Lifecycle.
    pub state: PoolState,
    /// Bumped by each accepted change.
    pub generation: u64,
    /// Created.
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// Archived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived_at: Option<Timestamp>,
}

/// A quota resource.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum QuotaResource {
    /// Load balancers of a pool.
    LoadBalancers,
}

impl QuotaResource {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            QuotaResource::LoadBalancers => "loadBalancers",
        }
    }
    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        (s == "loadBalancers").then_some(QuotaResource::LoadBalancers)
    }
}

/// A pool's quota row for one resource. No row grants none.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Quota {
    /// The resource.
    pub resource: QuotaResource,
    /// Most units.
    pub limit: u32,
    /// Units booked.
    pub used: u32,
}

/// A provider kind.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// DigitalOcean.
    Digitalocean,
    /// Google Kubernetes Engine.
    Gke,
}

impl ProviderKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Digitalocean => "digitalocean",
            ProviderKind::Gke => "gke",
        }
    }
}

/// A tenant's account at a provider; its credentials are stored sealed only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderAccount {
    /// Id.
    pub provider_account_id: ProviderAccountId,
    /// Owner.
    pub tenant_id: TenantId,
    /// Provider.
    pub provider: ProviderKind,
    /// Name.
    pub name: ObjectName,
    /// The project the account manages (GKE), shown on the account.
    pub project_id: Option<String>,
    /// The credentials document (`{token}` or `{serviceAccountKey, projectId}`), sealed
    /// with the server's key.
    pub credentials: SealedSecret,
    /// Created.
    pub created_at: Timestamp,
    /// Deleted (soft).
    pub deleted_at: Option<Timestamp>,
}

impl ProviderAccount {
    /// Why this account is never used for a provider call again, if it is not: it was
    /// deleted, or its sealed credentials were erased (which only a delete does, in its
    /// transaction: SPEC §5). Every object left on it is unreachable at the provider.
    pub fn unreachable(&self) -> Option<String> {
        (self.deleted_at.is_some() || self.credentials.0.is_empty()).then(|| {
            format!(
                "provider account {} was deleted: nothing it holds can be reached at the provider any more",
                self.provider_account_id
            )
        })
    }
}

/// Create or adopt.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SubstrateMode {
    /// The cluster is created for the pool.
    Create,
    /// An existing cluster is adopted.
    Adopt,
}

/// `waitingToJoin` of SPEC §6.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitingToJoin {
    /// Listed Nodes without a joined bcd.
    pub nodes: u32,
    /// When the wait began or, if later, when a node last joined.
    pub since: Timestamp,
}

/// `upgrade` of SPEC §6: a drain upgrade waiting for bookings to end.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeWait {
    /// The target version.
    pub version: String,
    /// Since when it waits.
    pub since: Timestamp,
}

/// A pool's substrate: what the substrate reconciler observed and recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Substrate {
    /// The pool.
    pub pool_id: PoolId,
    /// The pool's tenant.
    pub tenant_id: TenantId,
    /// The account the cluster lives in.
    pub provider_account_id: ProviderAccountId,
    /// Create or adopt.
    pub mode: SubstrateMode,
    /// The kubernetesClusters row, once recorded.
    pub cluster_id: Option<ClusterId>,
    /// State.
    pub state: ResourceState,
    /// What to fix or wait for.
    pub message: Option<String>,
    /// Nodes listed with the pool label.
    pub nodes_listed: u32,
    /// Of them, the ones whose bcd joined.
    pub nodes_joined: u32,
    /// While listed Nodes lack a joined bcd.
    pub waiting_to_join: Option<WaitingToJoin>,
    /// While a drain upgrade waits.
    pub upgrade: Option<UpgradeWait>,
    /// The pool generation last converged.
    pub observed_generation: u64,
    /// The pool generation at which the provider refused a call of this substrate: while
    /// the pool stays at it, the refused call is not made again (SPEC §6).
    pub refused_generation: Option<u64>,
    /// Created.
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
}

impl Substrate {
    /// The row a pool's substrate starts as, written with the pool's desired state
    /// (contracts: `pools.create`/`pools.update` adding a substrate): `pending`, no
    /// cluster yet, nothing observed.
    pub fn pending(
        pool_id: PoolId,
        tenant_id: TenantId,
        provider_account_id: ProviderAccountId,
        policy: &crate::policy::SubstratePolicy,
        now: Timestamp,
    ) -> Self {
        let mode = match policy.cluster {
            crate::policy::ClusterPolicy::Create(_) => SubstrateMode::Create,
            crate::policy::ClusterPolicy::Adopt(_) => SubstrateMode::Adopt,
        };
        Self {
            pool_id,
            tenant_id,
            provider_account_id,
            mode,
            cluster_id: None,
            state: ResourceState::Pending,
            message: None,
            nodes_listed: 0,
            nodes_joined: 0,
            waiting_to_join: None,
            upgrade: None,
            observed_generation: 0,
            refused_generation: None,
            created_at: now,
            updated_at: now,
        }
    }
}

/// A cluster's mode.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ClusterMode {
    /// Worker node pools managed through this system.
    Standard,
    /// The provider runs the nodes; no node pools.
    Autopilot,
}

/// Whether a cluster was created by this system or adopted.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ClusterOrigin {
    /// Created by this system.
    Created,
    /// Adopted.
    Adopted,
}

/// What reconcilers observe of an object with desired state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObservedStatus {
    /// State.
    pub state: ResourceState,
    /// What to fix or wait for.
    pub message: Option<String>,
    /// The generation last converged.
    pub observed_generation: u64,
    /// Last changed.
    pub updated_at: Timestamp,
}

impl ObservedStatus {
    /// The status of an object just recorded: `pending`, nothing converged yet.
    pub fn pending(now: Timestamp) -> Self {
        ObservedStatus {
            state: ResourceState::Pending,
            message: None,
            observed_generation: 0,
            updated_at: now,
        }
    }
}

/// A Kubernetes cluster row (tenant cluster or substrate cluster).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubernetesCluster {
    /// Id.
    pub cluster_id: ClusterId,
    /// Owner.
    pub tenant_id: TenantId,
    /// The account it lives in.
    pub provider_account_id: ProviderAccountId,
    /// Name (also the provider-side name when created; recorded before the create call).
    pub name: ObjectName,
    /// Region slug.
    pub region: String,
    /// Desired version (`None`: provider default / as adopted).
    pub desired_version: Option<String>,
    /// High-availability control plane.
    pub high_availability: bool,
    /// Mode.
    pub mode: ClusterMode,
    /// Created or adopted.
    pub origin: ClusterOrigin,
    /// Pools whose substrate uses it.
    pub substrate_pool_ids: Vec<PoolId>,
    /// Delete requested (desired; `kubernetesClusters.delete`, under CAS).
    pub delete_requested: bool,
    /// Bumped by each accepted change.
    pub generation: u64,
    /// Created.
    pub created_at: Timestamp,
    /// Observed: the provider's id.
    pub provider_cluster_id: Option<String>,
    /// Observed: the running version.
    pub version: Option<String>,
    /// Observed: an autopilot cluster's nodes, counted from the cluster (SPEC §7: the
    /// provider runs them and they belong to no node pool); `None` for a standard
    /// cluster, whose nodes are its node pools', and until they are first counted.
    pub nodes: Option<ClusterNodes>,
    /// Observed state.
    pub status: ObservedStatus,
}

/// How many Nodes a cluster lists, and how many of them are ready.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterNodes {
    /// Nodes listed.
    pub listed: u32,
    /// Of them, those whose `Ready` condition is true.
    pub ready: u32,
}

/// Who made a node pool.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum NodePoolOrigin {
    /// Made through this system: a tenant's `kubernetesNodePools` row, or a substrate's
    /// (`managed_by`).
    Created,
    /// The provider's own pool of a cluster, which this system did not make: recorded
    /// read-only by the cluster reconciler, never changed or deleted by it.
    Provider,
}

/// A node pool row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePool {
    /// Id.
    pub node_pool_id: NodePoolId,
    /// Its cluster.
    pub cluster_id: ClusterId,
    /// Owner.
    pub tenant_id: TenantId,
    /// Name (also the provider-side name).
    pub name: String,
    /// Provider size slug.
    pub size: String,
    /// Count or autoscale bounds.
    pub scale: Scale,
    /// Node labels.
    pub labels: BTreeMap<String, String>,
    /// Node taints.
    pub taints: Vec<Taint>,
    /// The pool whose substrate owns it.
    pub managed_by: Option<PoolId>,
    /// Made here, or the provider's own (read-only).
    pub origin: NodePoolOrigin,
    /// Delete requested (desired; `kubernetesNodePools.delete`, under CAS).
    pub delete_requested: bool,
    /// Bumped by each accepted change.
    pub generation: u64,
    /// Created.
    pub created_at: Timestamp,
    /// Observed: the provider's id.
    pub provider_node_pool_id: Option<String>,
    /// Observed: nodes listed by the provider.
    pub nodes_listed: u32,
    /// Observed: nodes running.
    pub nodes_ready: u32,
    /// Observed state.
    pub state: NodePoolState,
    /// Observed: what to fix.
    pub message: Option<String>,
    /// Observed: the generation last converged.
    pub observed_generation: u64,
    /// Last changed.
    pub updated_at: Timestamp,
}

impl NodePool {
    /// The row of a node pool this system is about to create in the cluster
    /// `cluster_id` of `tenant_id` (`kubernetesNodePools.create`, or a substrate's
    /// reconciler for its pool): `pending`, generation 1, no labels, taints or owning pool
    /// (set them with struct update), nothing observed.
    pub fn pending(
        node_pool_id: NodePoolId,
        cluster_id: ClusterId,
        tenant_id: TenantId,
        name: String,
        size: String,
        scale: Scale,
        now: Timestamp,
    ) -> Self {
        NodePool {
            node_pool_id,
            cluster_id,
            tenant_id,
            name,
            size,
            scale,
            labels: BTreeMap::new(),
            taints: Vec::new(),
            managed_by: None,
            origin: NodePoolOrigin::Created,
            delete_requested: false,
            generation: 1,
            created_at: now,
            provider_node_pool_id: None,
            nodes_listed: 0,
            nodes_ready: 0,
            state: NodePoolState::Pending,
            message: None,
            observed_generation: 0,
            updated_at: now,
        }
    }
}

/// Load balancer type.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum LoadBalancerType {
    /// One region.
    Regional,
    /// Global (anycast, domains).
    Global,
}

/// An entry or target protocol.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// HTTP.
    Http,
    /// HTTPS.
    Https,
    /// HTTP/2.
    Http2,
    /// HTTP/3 (entry only).
    Http3,
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

impl Protocol {
    /// The lower-case wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Https => "https",
            Protocol::Http2 => "http2",
            Protocol::Http3 => "http3",
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        }
    }
}

/// The largest integer an input may carry where the store keeps it (a signed 64-bit
/// column): event `seq`s, generations, droplet ids. One more is `INVALID_ARGUMENT`, not
/// a failed query.
pub const INTEGER_MAX: u64 = i64::MAX as u64;
/// Most characters of a health check's path.
pub const HEALTH_CHECK_PATH_MAX: usize = 255;
/// The rule of a health check's path: empty, or `/` and visible ASCII.
pub const HEALTH_CHECK_PATH_PATTERN: &str = "^(/[!-~]*)?$";
/// Most characters of a sticky-sessions cookie name.
pub const COOKIE_NAME_MAX: usize = 64;
/// The rule of a cookie name: letters, digits, `.`, `_` and `-`.
pub const COOKIE_NAME_PATTERN: &str = "^[A-Za-z0-9._-]+$";
/// The longest a sticky-sessions cookie may live: a year, in seconds.
pub const COOKIE_TTL_MAX: u32 = 365 * 24 * 60 * 60;
/// Most characters of a droplet tag (DigitalOcean's limit).
pub const TAG_MAX: usize = 255;
/// The rule of a droplet tag (DigitalOcean's): letters, digits, `:`, `_` and `-`.
pub const TAG_PATTERN: &str = "^[A-Za-z0-9:_-]+$";
/// Most droplets a load balancer targets by id (SPEC §11).
pub const MAX_TARGET_DROPLETS: usize = 10;
/// Most regional load balancers a global one targets.
pub const MAX_TARGET_LOAD_BALANCERS: usize = 10;
/// Most regions a global load balancer ranks.
pub const MAX_REGION_PRIORITIES: usize = 32;
/// The largest region priority (lower is preferred).
pub const REGION_PRIORITY_MAX: u32 = 100;
/// Most domains of a global load balancer.
pub const MAX_DOMAINS: usize = 10;
/// Most forwarding rules of a regional load balancer (DigitalOcean's limit).
pub const MAX_FORWARDING_RULES: usize = 25;
/// The largest size of a regional load balancer, in DigitalOcean size units.
pub const MAX_SIZE_UNIT: u32 = 100;
/// Most characters of a domain name (DNS).
pub const DOMAIN_NAME_MAX: usize = 253;
/// The rule of a domain name: DNS labels of letters, digits and `-`, dot-separated, with
/// an optional leading `*.` wildcard.
pub const DOMAIN_NAME_PATTERN: &str =
    r"^(\*\.)?[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*$";

/// A regional forwarding rule.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForwardingRule {
    /// Entry protocol.
    pub entry_protocol: Protocol,
    /// Entry port.
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 65535)))]
    pub entry_port: u32,
    /// Target protocol.
    pub target_protocol: Protocol,
    /// Target port.
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 65535)))]
    pub target_port: u32,
    /// TLS certificate (provider id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::name::ProviderSlug>"))]
    pub certificate_id: Option<String>,
    /// Pass TLS through.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tls_passthrough: bool,
}

/// Health check protocol.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HealthCheckProtocol {
    /// HTTP.
    Http,
    /// HTTPS.
    Https,
    /// TCP.
    Tcp,
}

/// A health check; the defaults are those of SPEC §11.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct HealthCheck {
    /// Protocol.
    pub protocol: HealthCheckProtocol,
    /// Port.
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 65535)))]
    pub port: u32,
    /// Path (http/https).
    #[cfg_attr(
        feature = "schema",
        schemars(length(max = HEALTH_CHECK_PATH_MAX), regex(pattern = HEALTH_CHECK_PATH_PATTERN))
    )]
    pub path: String,
    /// Seconds between checks.
    #[cfg_attr(feature = "schema", schemars(range(min = 3, max = 300)))]
    pub check_interval_seconds: u32,
    /// Seconds to wait for an answer.
    #[cfg_attr(feature = "schema", schemars(range(min = 3, max = 300)))]
    pub response_timeout_seconds: u32,
    /// Successes before healthy.
    #[cfg_attr(feature = "schema", schemars(range(min = 2, max = 10)))]
    pub healthy_threshold: u32,
    /// Failures before unhealthy.
    #[cfg_attr(feature = "schema", schemars(range(min = 2, max = 10)))]
    pub unhealthy_threshold: u32,
}

impl Default for HealthCheck {
    fn default() -> Self {
        Self {
            protocol: HealthCheckProtocol::Http,
            port: 80,
            path: "/".into(),
            check_interval_seconds: 10,
            response_timeout_seconds: 5,
            healthy_threshold: 5,
            unhealthy_threshold: 3,
        }
    }
}

/// Sticky sessions.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StickySessions {
    /// `cookies` or `none`.
    #[serde(rename = "type")]
    #[cfg_attr(feature = "schema", schemars(length(max = 7), regex(pattern = "^(cookies|none)$")))]
    pub kind: String,
    /// Cookie name (cookies only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(max = COOKIE_NAME_MAX), regex(pattern = COOKIE_NAME_PATTERN))
    )]
    pub cookie_name: Option<String>,
    /// Cookie TTL (cookies only), 1 s to a year.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = COOKIE_TTL_MAX)))]
    pub cookie_ttl_seconds: Option<u32>,
}

/// Load balancer targets: exactly one kind.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(transform = crate::one_of::one_kind_of_targets))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Targets {
    /// A droplet tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = TAG_MAX), regex(pattern = TAG_PATTERN)))]
    pub tag: Option<String>,
    /// Droplet ids (1–10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(
            length(min = 1, max = MAX_TARGET_DROPLETS),
            inner(range(min = 1, max = INTEGER_MAX))
        )
    )]
    pub droplet_ids: Option<Vec<u64>>,
    /// Regional load balancers of this system (global only; 1–10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = MAX_TARGET_LOAD_BALANCERS)))]
    pub load_balancer_ids: Option<Vec<LoadBalancerId>>,
}

/// Global load balancer settings.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GlobalSettings {
    /// http, https or http2.
    pub target_protocol: Protocol,
    /// 80 or 443.
    #[cfg_attr(feature = "schema", schemars(range(min = 80, max = 443)))]
    pub target_port: u32,
    /// CDN on.
    #[serde(default)]
    pub cdn: bool,
    /// Region slug → priority (lower preferred; 1–100), at most 32 regions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(
            with = "Option<BTreeMap<crate::name::ProviderSlug, RegionPriority>>",
            extend("maxProperties" = MAX_REGION_PRIORITIES)
        )
    )]
    pub region_priorities: Option<BTreeMap<String, u32>>,
    /// Failover threshold percent (1–99).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 99)))]
    pub failover_threshold: Option<u32>,
}

/// A region's priority in [`GlobalSettings::region_priorities`], for its schema only.
#[cfg(feature = "schema")]
#[derive(schemars::JsonSchema)]
#[schemars(inline)]
#[allow(dead_code, reason = "a schema, never a value")]
struct RegionPriority(#[schemars(range(min = 1, max = REGION_PRIORITY_MAX))] u32);

/// A global load balancer domain.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Domain {
    /// FQDN.
    #[cfg_attr(
        feature = "schema",
        schemars(length(max = DOMAIN_NAME_MAX), regex(pattern = DOMAIN_NAME_PATTERN))
    )]
    pub name: String,
    /// Managed by the provider's DNS.
    pub is_managed: bool,
    /// Certificate (provider id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::name::ProviderSlug>"))]
    pub certificate_id: Option<String>,
}

/// What a tenant wants of a load balancer (the part `update` may change, plus the fixed
/// `type` and `region`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerSpec {
    /// Regional or global (fixed).
    #[serde(rename = "type")]
    pub kind: LoadBalancerType,
    /// Region (regional only; fixed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Forwarding rules (regional).
    #[serde(default)]
    pub forwarding_rules: Vec<ForwardingRule>,
    /// Health check.
    #[serde(default)]
    pub health_check: HealthCheck,
    /// Sticky sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sticky_sessions: Option<StickySessions>,
    /// Targets.
    pub targets: Targets,
    /// Size units (regional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_unit: Option<u32>,
    /// Redirect HTTP to HTTPS.
    #[serde(default)]
    pub redirect_http_to_https: bool,
    /// Global settings (global).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_settings: Option<GlobalSettings>,
    /// Domains (global).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domains: Option<Vec<Domain>>,
}

/// A load balancer row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadBalancer {
    /// Id.
    pub load_balancer_id: LoadBalancerId,
    /// Owner.
    pub tenant_id: TenantId,
    /// The pool it books quota on.
    pub pool_id: PoolId,
    /// The account.
    pub provider_account_id: ProviderAccountId,
    /// Name (also the provider-side name; recorded before the create call).
    pub name: ObjectName,
    /// Desired state.
    pub spec: LoadBalancerSpec,
    /// Bumped by each accepted change.
    pub generation: u64,
    /// Created.
    pub created_at: Timestamp,
    /// Delete requested (desired).
    pub delete_requested: bool,
    /// Observed: the provider's id.
    pub provider_load_balancer_id: Option<String>,
    /// Observed: public IP.
    pub ip: Option<String>,
    /// Observed state.
    pub status: ObservedStatus,
    /// First time ready.
    pub ready_at: Option<Timestamp>,
    /// Deleted.
    pub deleted_at: Option<Timestamp>,
    /// Whether its `loadBalancers` quota unit was given back (set once, by
    /// `Write::ReleaseLoadBalancerQuota`).
    pub quota_released: bool,
}

/// A node whose bcd joined its pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Id.
    pub node_id: NodeId,
    /// Pool.
    pub pool_id: PoolId,
    /// Kubernetes node name (unique per pool).
    pub node_name: String,
    /// Provider node id, if reported.
    pub provider_node_id: Option<String>,
    /// Agent version.
    pub bcd_version: String,
    /// SHA-256 hex of the node credential.
    pub credential_hash: String,
    /// First joined.
    pub joined_at: Timestamp,
    /// Last heartbeat.
    pub last_heartbeat_at: Option<Timestamp>,
}

/// Booking state as stored.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum BookingState {
    /// Holds its pool.
    Active,
    /// Over.
    Ended,
}

/// A booking of a pool (what drain upgrades wait for).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Booking {
    /// Id.
    pub booking_id: BookingId,
    /// Owner.
    pub tenant_id: TenantId,
    /// Pool.
    pub pool_id: PoolId,
    /// Node, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// Stored state (a booking past `endsAt` counts as ended; see the rules).
    pub state: BookingState,
    /// Created.
    pub created_at: Timestamp,
    /// Planned end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<Timestamp>,
    /// Ended by a call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Timestamp>,
}

/// A substrate's join token (hash only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinToken {
    /// Pool.
    pub pool_id: PoolId,
    /// SHA-256 hex of the token.
    pub token_hash: String,
    /// Issued.
    pub created_at: Timestamp,
    /// Revoked (rotation or teardown).
    pub revoked_at: Option<Timestamp>,
}

/// A role of a grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Role {
    /// Every `:read`.
    Viewer,
    /// Every `:read` and `:manage` except quotas.
    Editor,
    /// Everything.
    Operator,
}

/// A scope of the scope tree (SPEC §3).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// `compute-system`.
    System,
    /// `compute-tenant/<tenantId>`.
    Tenant(TenantId),
    /// `pool/<id>`.
    Pool(PoolId),
    /// `provider-account/<id>`.
    ProviderAccount(ProviderAccountId),
    /// `kubernetes-cluster/<id>`.
    KubernetesCluster(ClusterId),
    /// `kubernetes-node-pool/<id>`.
    KubernetesNodePool(NodePoolId),
    /// `provider-load-balancer/<id>`.
    LoadBalancer(LoadBalancerId),
}

impl Scope {
    /// The textual form, e.g. `provider-load-balancer/lb_…`.
    pub fn to_scope_string(&self) -> String {
        match self {
            Scope::System => "compute-system".into(),
            Scope::Tenant(t) => format!("compute-tenant/{t}"),
            Scope::Pool(p) => format!("pool/{p}"),
            Scope::ProviderAccount(a) => format!("provider-account/{a}"),
            Scope::KubernetesCluster(c) => format!("kubernetes-cluster/{c}"),
            Scope::KubernetesNodePool(n) => format!("kubernetes-node-pool/{n}"),
            Scope::LoadBalancer(l) => format!("provider-load-balancer/{l}"),
        }
    }

    /// Parses the textual form.
    pub fn parse(s: &str) -> Result<Scope, String> {
        if s == "compute-system" {
            return Ok(Scope::System);
        }
        let (kind, id) = s.split_once('/').ok_or_else(|| format!("unknown scope {s:?}"))?;
        let e = |e: &dyn fmt::Display| format!("scope {s:?}: {e}");
        Ok(match kind {
            "compute-tenant" => Scope::Tenant(TenantId::parse(id).map_err(|x| e(&x))?),
            "pool" => Scope::Pool(id.parse().map_err(|x| e(&x))?),
            "provider-account" => Scope::ProviderAccount(id.parse().map_err(|x| e(&x))?),
            "kubernetes-cluster" => Scope::KubernetesCluster(id.parse().map_err(|x| e(&x))?),
            "kubernetes-node-pool" => Scope::KubernetesNodePool(id.parse().map_err(|x| e(&x))?),
            "provider-load-balancer" => Scope::LoadBalancer(id.parse().map_err(|x| e(&x))?),
            _ => return Err(format!("unknown scope kind {kind:?}")),
        })
    }
}

impl Serialize for Scope {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_scope_string())
    }
}
impl<'de> Deserialize<'de> for Scope {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Scope::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A role on a scope, with the scope's tenant kept for the existence gate (SPEC §2:
/// a caller with no grant in a tenant learns nothing of it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    /// Role.
    pub role: Role,
    /// Scope.
    pub scope: Scope,
    /// The scope's tenant (`None` only for `compute-system`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<TenantId>,
}

/// An API token (hash only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiToken {
    /// Id.
    pub token_id: TokenId,
    /// SHA-256 hex of the token.
    pub token_hash: String,
    /// Grants.
    pub grants: Vec<Grant>,
    /// Created.
    pub created_at: Timestamp,
    /// Revoked.
    pub revoked_at: Option<Timestamp>,
}

/// The load-balancer-hours meter.
pub const METER_LOAD_BALANCER_HOURS: &str = "vps.load-balancer.hours";

/// A billed interval of one resource on one meter; open while `end` is `None`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BillingInterval {
    /// Meter, e.g. `vps.load-balancer.hours`.
    pub meter: String,
    /// The resource's id.
    pub resource: String,
    /// Owner.
    pub tenant_id: TenantId,
    /// Pool.
    pub pool_id: PoolId,
    /// Start.
    pub start: Timestamp,
    /// End (exclusive); open while `None`.
    pub end: Option<Timestamp>,
}

/// An event to append to the outbox (the store assigns `seq`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewEvent {
    /// Id (also the NATS message id).
    pub event_id: EventId,
    /// Owner.
    pub tenant_id: TenantId,
    /// Subject, e.g. `compute.pools.<id>`.
    pub subject: String,
    /// Type, e.g. `vps.load-balancer.ready`.
    #[serde(rename = "type")]
    pub kind: String,
    /// When it happened.
    pub time: Timestamp,
    /// Payload.
    pub data: serde_json::Value,
}

/// A stored event.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// Id.
    pub event_id: EventId,
    /// Global increasing sequence.
    pub seq: u64,
    /// Owner.
    pub tenant_id: TenantId,
    /// Subject.
    pub subject: String,
    /// Type.
    #[serde(rename = "type")]
    pub kind: String,
    /// When it happened.
    pub time: Timestamp,
    /// Payload.
    pub data: serde_json::Value,
}

/// A stored result of a create call, keyed by `(tenant, method, requestId)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyRecord {
    /// Tenant.
    pub tenant_id: TenantId,
    /// Method, e.g. `pools.create`.
    pub method: String,
    /// The caller's request id.
    pub request_id: String,
    /// SHA-256 hex of the canonical request body.
    pub body_hash: String,
    /// The first response.
    pub response: serde_json::Value,
    /// When it was stored (kept 24 h).
    pub created_at: Timestamp,
}

/// Subject helpers (SPEC §12).
pub mod subjects {
    use crate::id::{ClusterId, LoadBalancerId, PoolId};

    /// `compute.pools.<poolId>`.
    pub fn pool(id: &PoolId) -> String {
        format!("compute.pools.{id}")
    }
    /// `compute.kubernetes.clusters.<clusterId>`.
    pub fn cluster(id: &ClusterId) -> String {
        format!("compute.kubernetes.clusters.{id}")
    }
    /// `compute.load-balancers.<id>`.
    pub fn load_balancer(id: &LoadBalancerId) -> String {
        format!("compute.load-balancers.{id}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_do_not_print() {
        let s = SecretString::new("dop_v1_supersecret");
        assert_eq!(format!("{s:?}"), "[redacted]");
        assert!(!format!("{:?}", SealedSecret(vec![1, 2, 3])).contains('1'));
    }

    #[test]
    fn health_check_defaults_match_spec() {
        let h: HealthCheck = serde_json::from_str("{}").unwrap();
        assert_eq!(h, HealthCheck::default());
        assert_eq!((h.healthy_threshold, h.unhealthy_threshold), (5, 3));
        assert!(serde_json::from_str::<HealthCheck>(r#"{"bogus":1}"#).is_err());
    }

    #[test]
    fn scopes_round_trip() {
        for s in ["compute-system", "compute-tenant/acme", "pool/pool_01hq3k5v9x8y7z6w5v4t3s2r1q"] {
            assert_eq!(Scope::parse(s).unwrap().to_scope_string(), s);
        }
        assert!(Scope::parse("cluster/x").is_err());
        assert!(Scope::parse("pool/nope").is_err());
    }
}
