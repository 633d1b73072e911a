//! `kubernetesNodePools.*` (SPEC §8): the worker groups of standard clusters: the
//! resource, its methods' wire types and their endpoints. Invariant: optional input
//! fields are left out when unset and output fields are read back as the server writes
//! them, so a type here round-trips through the wire; what a method does is bc-api's.

use bc_domain::model::{INTEGER_MAX, NodePool};
use bc_domain::name::ProviderSlug;
use bc_domain::policy::{AutoScale, MAX_LABELS, MAX_TAINTS, Scale, Taint};
use bc_domain::ports::Permission;
use bc_domain::{
    ClusterId, LabelKey, LabelValue, NodePoolId, NodePoolState, ObjectName, PoolId, RequestId,
    TenantId, Timestamp,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::endpoint::{Input, create_input, endpoint, list_input, list_output, object_ref};
use crate::meta::{Kind, Resource, ResourceType};
use Permission::{KubernetesManage as Manage, KubernetesRead as Read};
use ResourceType::{KubernetesCluster as OnCluster, KubernetesNodePool as OnNodePool};

object_ref!(
    /// Input of `kubernetesNodePools.get` and `kubernetesNodePools.delete`.
    NodePoolRef, node_pool_id: NodePoolId
);

/// The resource.
pub static KUBERNETES_NODE_POOLS: Resource = Resource {
    name: "kubernetesNodePools",
    page: "kubernetes-node-pools",
    module: "kubernetes",
    description: "Node pools are the groups of worker nodes of a `standard` Kubernetes cluster ([kubernetesClusters](/docs/reference/api/kubernetes-clusters)); an `autopilot` cluster has none, because the provider runs its nodes. A cluster's first node pools are created with it; these calls add, resize and remove pools later. Every call records what the tenant wants and returns at once: the node pool shows `pending`, `ready`, `updating`, `deleting`, `deleted` or `error` (with a `message`), and its cluster goes `updating` until the reconciler has converged the change, then `ready` again. A node pool the provider refuses is `error`, and so is its cluster, with the pool named in its `message`, until the pool is changed or deleted. The reconciler publishes `kubernetes.nodepool.ready`, `kubernetes.nodepool.error` and `kubernetes.nodepool.deleted` on the cluster's subject. A node pool's name is also its provider-side name.",
};

/// What a node pool is made of (also the items of `kubernetesClusters.create`'s
/// `nodePools`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = bc_domain::one_of::count_or_auto_scale)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodePoolSpec {
    /// Unique in the cluster; also the provider-side name. `bc-` is reserved.
    pub name: ObjectName,
    /// Provider size slug, e.g. s-2vcpu-4gb.
    #[schemars(with = "ProviderSlug")]
    pub size: String,
    /// Fixed node count; exclusive with `autoScale`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = bc_domain::rules::policy::MAX_NODES))]
    pub count: Option<u32>,
    /// Autoscaling bounds; exclusive with `count`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_scale: Option<AutoScale>,
    /// Node labels (at most 64).
    #[serde(default)]
    #[schemars(extend("maxProperties" = MAX_LABELS))]
    pub labels: BTreeMap<LabelKey, LabelValue>,
    /// Node taints (at most 32).
    #[serde(default)]
    #[schemars(length(max = MAX_TAINTS))]
    pub taints: Vec<Taint>,
}

impl NodePoolSpec {
    /// The node pool row it asks for in cluster `cluster_id` of `tenant_id`: `pending`,
    /// made by this system.
    pub fn record(
        &self,
        cluster_id: &ClusterId,
        tenant_id: &TenantId,
        id: NodePoolId,
        now: Timestamp,
    ) -> NodePool {
        NodePool {
            labels: self.labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            taints: self.taints.clone(),
            ..NodePool::pending(
                id,
                cluster_id.clone(),
                tenant_id.clone(),
                self.name.to_string(),
                self.size.clone(),
                scale_of(self.count, self.auto_scale),
                now,
            )
        }
    }
}

/// Whether the node pool's deletion was asked for (or is done).
pub fn is_deleting(np: &NodePool) -> bool {
    np.delete_requested || np.state == NodePoolState::Deleted
}

/// The scale of a checked input (exactly one of the two is set: [`validate_scale`]).
pub fn scale_of(count: Option<u32>, auto_scale: Option<AutoScale>) -> Scale {
    match (count, auto_scale) {
        (_, Some(a)) => Scale::AutoScale(a),
        (c, None) => Scale::Count(c.unwrap_or(1)),
    }
}

/// Input of `kubernetesNodePools.create`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = bc_domain::one_of::count_or_auto_scale)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubernetesNodePoolsCreateInput {
    /// The cluster's tenant.
    pub tenant_id: TenantId,
    /// The standard cluster to add the pool to.
    pub cluster_id: ClusterId,
    /// Unique in the cluster; also the provider-side name. `bc-` is reserved.
    pub name: ObjectName,
    /// Provider size slug, e.g. s-2vcpu-4gb.
    #[schemars(with = "ProviderSlug")]
    pub size: String,
    /// Fixed node count; exclusive with `autoScale`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = bc_domain::rules::policy::MAX_NODES))]
    pub count: Option<u32>,
    /// Autoscaling bounds; exclusive with `count`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_scale: Option<AutoScale>,
    /// Node labels (at most 64).
    #[serde(default)]
    #[schemars(extend("maxProperties" = MAX_LABELS))]
    pub labels: BTreeMap<LabelKey, LabelValue>,
    /// Node taints (at most 32).
    #[serde(default)]
    #[schemars(length(max = MAX_TAINTS))]
    pub taints: Vec<Taint>,
    /// Idempotency key: a repeat within 24 h returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<RequestId>,
}

impl KubernetesNodePoolsCreateInput {
    /// The node pool asked for.
    pub fn spec(&self) -> NodePoolSpec {
        NodePoolSpec {
            name: self.name.clone(),
            size: self.size.clone(),
            count: self.count,
            auto_scale: self.auto_scale,
            labels: self.labels.clone(),
            taints: self.taints.clone(),
        }
    }
}

list_input!(
    /// Input of `kubernetesNodePools.list`.
    KubernetesNodePoolsListInput {
        /// The cluster.
        cluster_id: ClusterId,
    }
);

/// Input of `kubernetesNodePools.resize`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = bc_domain::one_of::count_or_auto_scale)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubernetesNodePoolsResizeInput {
    /// The node pool's tenant.
    pub tenant_id: TenantId,
    /// The node pool.
    pub node_pool_id: NodePoolId,
    /// Fixed node count; exclusive with `autoScale`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = bc_domain::rules::policy::MAX_NODES))]
    pub count: Option<u32>,
    /// Autoscaling bounds; exclusive with `count`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_scale: Option<AutoScale>,
    /// Refuse (ABORTED) unless the node pool's generation is this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = INTEGER_MAX))]
    pub expected_generation: Option<u64>,
}

/// Node counts: a node pool's, or an autopilot cluster's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NodeCounts {
    /// Nodes the provider lists.
    pub listed: u32,
    /// Of them, the ones running.
    pub ready: u32,
}

/// A node pool as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "KubernetesNodePool")]
pub struct NodePoolView {
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
    /// Fixed node count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// Autoscaling bounds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_scale: Option<AutoScale>,
    /// Node labels.
    pub labels: BTreeMap<String, String>,
    /// Node taints.
    pub taints: Vec<Taint>,
    /// The pool whose substrate owns it (read-only here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub managed_by: Option<PoolId>,
    /// Node counts.
    pub nodes: NodeCounts,
    /// State.
    pub state: NodePoolState,
    /// What to fix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Bumped by each accepted change.
    pub generation: u64,
    /// Created.
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
}

impl From<&NodePool> for NodePoolView {
    fn from(n: &NodePool) -> Self {
        let (count, auto_scale) = match n.scale {
            Scale::Count(c) => (Some(c), None),
            Scale::AutoScale(a) => (None, Some(a)),
        };
        Self {
            node_pool_id: n.node_pool_id.clone(),
            cluster_id: n.cluster_id.clone(),
            tenant_id: n.tenant_id.clone(),
            name: n.name.clone(),
            size: n.size.clone(),
            count,
            auto_scale,
            labels: n.labels.clone(),
            taints: n.taints.clone(),
            managed_by: n.managed_by.clone(),
            nodes: NodeCounts { listed: n.nodes_listed, ready: n.nodes_ready },
            state: if is_deleting(n) && n.state != NodePoolState::Deleted {
                NodePoolState::Deleting
            } else {
                n.state
            },
            message: n.message.clone(),
            generation: n.generation,
            created_at: n.created_at,
            updated_at: n.updated_at,
        }
    }
}

list_output!(
    /// Output of `kubernetesNodePools.list`.
    KubernetesNodePoolsListOutput, kubernetes_node_pools, NodePoolView
);

create_input!(KubernetesNodePoolsCreateInput);
impl Input for KubernetesNodePoolsResizeInput {}

endpoint!(
    /// `kubernetesNodePools.create`.
    Create = KUBERNETES_NODE_POOLS.method(
        "create",
        Kind::Write,
        Manage,
        OnCluster,
        "Records a node pool to add to the standard cluster clusterId and returns it, state pending: name (unique in the cluster, also against the provider's own pools; names starting bc- are reserved for pool substrates), size (a provider size slug), exactly one of count (1–512) or autoScale ({ min, max }: min 0–512, max 1–512, min ≤ max), and optional labels and taints (keys under better-compute.dev/ are reserved). A name the provider already has in the cluster is ALREADY_EXISTS (a pool made outside this system is never taken over). An autopilot cluster has no node pools, and a cluster created for a pool's substrate goes with that pool: both are FAILED_PRECONDITION (for the latter, change the pool's flavors). A repeat with the same requestId and the same body within 24 hours returns the first node pool and creates nothing; the same requestId with another body is ALREADY_EXISTS. Decided as compute:kubernetes:manage on the cluster.",
    );
    KubernetesNodePoolsCreateInput => NodePoolView
);

endpoint!(
    /// `kubernetesNodePools.get`.
    Get = KUBERNETES_NODE_POOLS.method(
        "get",
        Kind::Read,
        Read,
        OnNodePool,
        "Returns the node pool: nodePoolId, clusterId, tenantId, name, size, count or autoScale, labels, taints, managedBy (the pool whose substrate owns it, when one does), nodes ({ listed, ready }), state with a message when there is something to fix, generation, createdAt and updatedAt. A node pool of another tenant is NOT_FOUND. Decided as compute:kubernetes:read on the node pool.",
    );
    NodePoolRef => NodePoolView
);

endpoint!(
    /// `kubernetesNodePools.list`.
    List = KUBERNETES_NODE_POOLS.method(
        "list",
        Kind::Read,
        Read,
        OnNodePool,
        "Lists the node pools of clusterId that the caller may read, by id, pageSize at a time (1–500, default 100), with nextPageToken while more remain. It shows the provider's pools that this system did not create too, without managedBy and read-only. Decided as compute:kubernetes:read on each node pool; a grant on its cluster or provider account covers it. A clusterId the caller may not read is refused as kubernetesClusters.get would refuse it.",
    );
    KubernetesNodePoolsListInput => KubernetesNodePoolsListOutput
);

endpoint!(
    /// `kubernetesNodePools.resize`.
    Resize = KUBERNETES_NODE_POOLS.method(
        "resize",
        Kind::Write,
        Manage,
        OnNodePool,
        "Sets the node pool's count, or its autoScale bounds (exactly one of them), and returns it with its generation bumped; it goes updating, and its cluster with it, until the provider has resized it. With expectedGeneration, a node pool changed since is ABORTED. A node pool with managedBy belongs to that pool's substrate (change the pool's flavors instead), and the provider's own pools are read-only: both are FAILED_PRECONDITION. Decided as compute:kubernetes:manage on the node pool.",
    );
    KubernetesNodePoolsResizeInput => NodePoolView
);

endpoint!(
    /// `kubernetesNodePools.delete`.
    Delete = KUBERNETES_NODE_POOLS.method(
        "delete",
        Kind::Write,
        Manage,
        OnNodePool,
        "Asks for the node pool to be removed and returns it; it goes deleting, then deleted. Deleting a deleted node pool returns it unchanged. A node pool with managedBy, or one of the provider's own, is FAILED_PRECONDITION. Decided as compute:kubernetes:manage on the node pool.",
    );
    NodePoolRef => NodePoolView
);
