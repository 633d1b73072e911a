//! `kubernetesClusters.*` (SPEC §7): managed clusters on a tenant's provider accounts:
//! the resource, its methods' wire types and their endpoints. Invariant: optional input
//! fields are left out when unset and output fields are read back as the server writes
//! them, so a type here round-trips through the wire; what a method does is bc-api's.

use bc_domain::model::{ClusterMode, ClusterOrigin, INTEGER_MAX, KubernetesCluster};
use bc_domain::name::ProviderSlug;
use bc_domain::policy::{MAX_NODE_POOLS, VERSION_LATEST};
use bc_domain::ports::Permission;
use bc_domain::{
    ClusterId, ObjectName, PoolId, ProviderAccountId, RequestId, ResourceState, TenantId, Timestamp,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::endpoint::{Input, create_input, endpoint, list_input, list_output, object_ref};
use crate::meta::{Kind, Resource, ResourceType};
use crate::node_pools::{NodeCounts, NodePoolSpec};
use crate::shown_state;
use Permission::{KubernetesManage as Manage, KubernetesRead as Read};
use ResourceType::{KubernetesCluster as OnCluster, ProviderAccount as OnAccount};

object_ref!(
    /// Input of `kubernetesClusters.get` and `kubernetesClusters.delete`.
    ClusterRef, cluster_id: ClusterId
);

/// The resource.
pub static KUBERNETES_CLUSTERS: Resource = Resource {
    name: "kubernetesClusters",
    page: "kubernetes-clusters",
    module: "kubernetes",
    description: "A Kubernetes cluster is a managed cluster on one of the tenant's provider accounts, made by this system (`origin: created`) or adopted by a pool substrate (`origin: adopted`), with the pools whose substrates use it in `substratePoolIds`. Every call records what the tenant wants and returns at once: the cluster shows `pending`, `provisioning`, `ready`, `updating`, `error` (with a `message` saying what to fix), `deleting` or `deleted` while the `kubernetes.clusters` reconciler converges the provider to it, and the reconciler publishes `kubernetes.cluster.ready`, `kubernetes.cluster.error` and `kubernetes.cluster.deleted` on `compute.kubernetes.clusters.<clusterId>`. A `standard` cluster has worker node pools ([kubernetesNodePools](/docs/reference/api/kubernetes-node-pools)); an `autopilot` cluster has none, and only a provider that runs autopilot clusters accepts one. No method ever returns a kubeconfig.",
};

/// Input of `kubernetesClusters.create`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubernetesClustersCreateInput {
    /// The tenant.
    pub tenant_id: TenantId,
    /// The account to make the cluster on.
    pub provider_account_id: ProviderAccountId,
    /// Unique among the account's live clusters; also the provider-side name.
    pub name: ObjectName,
    /// Provider region slug, e.g. nyc1.
    #[schemars(with = "ProviderSlug")]
    pub region: String,
    /// An exact provider version slug, or `latest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<ProviderSlug>", extend("default" = VERSION_LATEST))]
    pub version: Option<String>,
    /// `standard` (with node pools) or `autopilot` (none).
    pub mode: ClusterMode,
    /// A highly available control plane.
    #[serde(default)]
    pub high_availability: bool,
    /// The first node pools: at least one for standard, none for autopilot (at most 16).
    #[serde(default)]
    #[schemars(length(max = MAX_NODE_POOLS))]
    pub node_pools: Vec<NodePoolSpec>,
    /// Idempotency key: a repeat within 24 h returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<RequestId>,
}

list_input!(
    /// Input of `kubernetesClusters.list`.
    KubernetesClustersListInput {
        /// Only this account's clusters.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_account_id: Option<ProviderAccountId>,
    }
);

/// Input of `kubernetesClusters.upgrade`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubernetesClustersUpgradeInput {
    /// The cluster's tenant.
    pub tenant_id: TenantId,
    /// The cluster.
    pub cluster_id: ClusterId,
    /// The provider version slug to run.
    #[schemars(with = "ProviderSlug")]
    pub version: String,
    /// Refuse (ABORTED) unless the cluster's generation is this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = INTEGER_MAX))]
    pub expected_generation: Option<u64>,
}

/// A cluster as the API shows it: never a kubeconfig.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "KubernetesCluster")]
pub struct KubernetesClusterView {
    /// Id.
    pub cluster_id: ClusterId,
    /// Owner.
    pub tenant_id: TenantId,
    /// The account it lives in.
    pub provider_account_id: ProviderAccountId,
    /// The provider's id, once it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_cluster_id: Option<String>,
    /// Name (also the provider-side name).
    pub name: ObjectName,
    /// Region slug.
    pub region: String,
    /// The version it runs, once known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// `standard` or `autopilot`.
    pub mode: ClusterMode,
    /// A highly available control plane.
    pub high_availability: bool,
    /// Made here or adopted.
    pub origin: ClusterOrigin,
    /// The pools whose substrates use it.
    pub substrate_pool_ids: Vec<PoolId>,
    /// An autopilot cluster's nodes, counted from the cluster (the provider runs them and
    /// they belong to no node pool), once counted; a standard cluster's nodes are counted
    /// on its node pools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<NodeCounts>,
    /// State.
    pub state: ResourceState,
    /// What to fix or wait for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Bumped by each accepted change.
    pub generation: u64,
    /// Created.
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
}

impl From<&KubernetesCluster> for KubernetesClusterView {
    fn from(c: &KubernetesCluster) -> Self {
        Self {
            cluster_id: c.cluster_id.clone(),
            tenant_id: c.tenant_id.clone(),
            provider_account_id: c.provider_account_id.clone(),
            provider_cluster_id: c.provider_cluster_id.clone(),
            name: c.name.clone(),
            region: c.region.clone(),
            version: c.version.clone(),
            mode: c.mode,
            high_availability: c.high_availability,
            origin: c.origin,
            substrate_pool_ids: c.substrate_pool_ids.clone(),
            nodes: c.nodes.map(|n| NodeCounts { listed: n.listed, ready: n.ready }),
            state: shown_state(c.delete_requested, c.status.state),
            message: c.status.message.clone(),
            generation: c.generation,
            created_at: c.created_at,
            updated_at: c.status.updated_at.max(c.created_at),
        }
    }
}

list_output!(
    /// Output of `kubernetesClusters.list`.
    KubernetesClustersListOutput, kubernetes_clusters, KubernetesClusterView
);

create_input!(KubernetesClustersCreateInput);
impl Input for KubernetesClustersUpgradeInput {}

endpoint!(
    /// `kubernetesClusters.create`.
    Create = KUBERNETES_CLUSTERS.method(
        "create",
        Kind::Write,
        Manage,
        OnAccount,
        "Records a cluster to make on providerAccountId and returns it, state pending: name (unique among the account's live clusters, and also its provider-side name), region, version (an exact provider version slug, or latest, the default), mode, highAvailability and its first nodePools. A standard cluster needs at least one node pool and an autopilot cluster takes none; the account's provider decides which modes exist (DigitalOcean has only standard, so autopilot there is FAILED_PRECONDITION naming the provider). Node pool names starting bc- are reserved for pool substrates. A repeat with the same requestId and the same body within 24 hours returns the first cluster and creates nothing; the same requestId with another body is ALREADY_EXISTS. Decided as compute:kubernetes:manage on the provider account.",
    );
    KubernetesClustersCreateInput => KubernetesClusterView
);

endpoint!(
    /// `kubernetesClusters.get`.
    Get = KUBERNETES_CLUSTERS.method(
        "get",
        Kind::Read,
        Read,
        OnCluster,
        "Returns the cluster: clusterId, tenantId, providerAccountId, providerClusterId once the provider has made it, name, region, version once known, mode, highAvailability, origin, substratePoolIds, nodes ({ listed, ready }: an autopilot cluster's nodes, counted from the cluster, since they belong to no node pool; absent on a standard cluster, whose node pools count theirs), state with a message when there is something to fix or wait for, generation, createdAt and updatedAt. It never returns a kubeconfig or a credential. A cluster of another tenant is NOT_FOUND. Decided as compute:kubernetes:read on the cluster.",
    );
    ClusterRef => KubernetesClusterView
);

endpoint!(
    /// `kubernetesClusters.list`.
    List = KUBERNETES_CLUSTERS.method(
        "list",
        Kind::Read,
        Read,
        OnCluster,
        "Lists the tenant's clusters that the caller may read, by id, pageSize at a time (1–500, default 100), with nextPageToken while more remain; with providerAccountId, only that account's. Decided as compute:kubernetes:read on each cluster; a grant on its provider account covers it. A providerAccountId the caller may not read is refused as providerAccounts.get would refuse it.",
    );
    KubernetesClustersListInput => KubernetesClustersListOutput
);

endpoint!(
    /// `kubernetesClusters.upgrade`.
    Upgrade = KUBERNETES_CLUSTERS.method(
        "upgrade",
        Kind::Write,
        Manage,
        OnCluster,
        "Asks for the cluster to run version, a provider version slug newer than the one it runs, and returns it with its generation bumped; it goes updating until the provider has upgraded it. With expectedGeneration, a cluster changed since is ABORTED. Decided as compute:kubernetes:manage on the cluster.",
    );
    KubernetesClustersUpgradeInput => KubernetesClusterView
);

endpoint!(
    /// `kubernetesClusters.delete`.
    Delete = KUBERNETES_CLUSTERS.method(
        "delete",
        Kind::Write,
        Manage,
        OnCluster,
        "Asks for the cluster to be deleted at the provider and returns it; it goes deleting, then deleted. While a pool substrate uses the cluster the call is FAILED_PRECONDITION: archive the pool or remove the substrate from its policy. Decided as compute:kubernetes:manage on the cluster.",
    );
    ClusterRef => KubernetesClusterView
);
