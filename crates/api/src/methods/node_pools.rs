//! `kubernetesNodePools.*` (SPEC §8): the worker groups of standard clusters.

use std::collections::BTreeMap;

use bc_domain::model::{ClusterMode, INTEGER_MAX, KubernetesCluster, NodePool, NodePoolOrigin};
use bc_domain::name::ProviderSlug;
use bc_domain::policy::{AutoScale, MAX_LABELS, MAX_TAINTS, Scale, Taint};
use bc_domain::ports::{Permission, UnitOfWork, WorkKind, Write};
use bc_domain::rules::policy::{is_reserved_label_key, validate_scale};
use bc_domain::{
    ClusterId, FieldViolation, LabelKey, LabelValue, NodePoolId, NodePoolState, ObjectName, PoolId,
    RESERVED_NODE_POOL_PREFIX, RequestId, ResourceState, TenantId, Timestamp,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::examples as ex;
use super::{check_generation, list_input, list_output, object_ref};
use crate::access::Target;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::registry::{Call, Kind, Method, MethodInput, Resource, ResourceType};
use crate::write::Created;

pub(crate) static KUBERNETES_NODE_POOLS: Resource = Resource {
    name: "kubernetesNodePools",
    page: "kubernetes-node-pools",
    module: "kubernetes",
    description: "Node pools are the groups of worker nodes of a `standard` Kubernetes cluster ([kubernetesClusters](/docs/reference/api/kubernetes-clusters)); an `autopilot` cluster has none, because the provider runs its nodes. A cluster's first node pools are created with it; these calls add, resize and remove pools later. Every call records what the tenant wants and returns at once: the node pool shows `pending`, `ready`, `updating`, `deleting`, `deleted` or `error` (with a `message`), and its cluster goes `updating` until the reconciler has converged the change, then `ready` again. A node pool the provider refuses is `error`, and so is its cluster, with the pool named in its `message`, until the pool is changed or deleted. The reconciler publishes `kubernetes.nodepool.ready`, `kubernetes.nodepool.error` and `kubernetes.nodepool.deleted` on the cluster's subject. A node pool's name is also its provider-side name.",
};

/// What a node pool is made of (also the items of `kubernetesClusters.create`'s
/// `nodePools`).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(transform = bc_domain::one_of::count_or_auto_scale)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodePoolSpec {
    /// Unique in the cluster; also the provider-side name. `bc-` is reserved.
    pub name: ObjectName,
    /// Provider size slug, e.g. s-2vcpu-4gb.
    #[schemars(with = "ProviderSlug")]
    pub size: String,
    /// Fixed node count; exclusive with `autoScale`.
    #[serde(default)]
    #[schemars(range(min = 1, max = bc_domain::rules::policy::MAX_NODES))]
    pub count: Option<u32>,
    /// Autoscaling bounds; exclusive with `count`.
    #[serde(default)]
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
    /// The rules across its fields, at `path` (empty at the top level).
    pub fn violations(&self, path: &str) -> Vec<FieldViolation> {
        let at = |f: &str| if path.is_empty() { f.to_owned() } else { format!("{path}.{f}") };
        let mut out = Vec::new();
        if self.name.as_str().starts_with(RESERVED_NODE_POOL_PREFIX) {
            out.push(FieldViolation::new(
                at("name"),
                format!(
                    "names starting {RESERVED_NODE_POOL_PREFIX} are reserved for pool substrates"
                ),
            ));
        }
        out.extend(validate_scale(self.count, self.auto_scale, path));
        out.extend(reserved_labels(&self.labels, &at("labels")));
        out
    }

    /// The node pool row it asks for in `cluster`: `pending`, made by this system.
    pub fn record(&self, cluster: &KubernetesCluster, id: NodePoolId, now: Timestamp) -> NodePool {
        NodePool {
            node_pool_id: id,
            cluster_id: cluster.cluster_id.clone(),
            tenant_id: cluster.tenant_id.clone(),
            name: self.name.to_string(),
            size: self.size.clone(),
            scale: scale_of(self.count, self.auto_scale),
            labels: self.labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            taints: self.taints.clone(),
            managed_by: None,
            origin: NodePoolOrigin::Created,
            generation: 1,
            created_at: now,
            delete_requested: false,
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

/// The scale of a checked input (exactly one of the two is set: [`validate_scale`]).
fn scale_of(count: Option<u32>, auto_scale: Option<AutoScale>) -> Scale {
    match (count, auto_scale) {
        (_, Some(a)) => Scale::AutoScale(a),
        (c, None) => Scale::Count(c.unwrap_or(1)),
    }
}

/// Label keys the system sets itself may not be given.
fn reserved_labels(labels: &BTreeMap<LabelKey, LabelValue>, path: &str) -> Vec<FieldViolation> {
    labels
        .keys()
        .filter(|k| is_reserved_label_key(k.as_str()))
        .map(|k| {
            let mut p = path.to_owned();
            crate::body::push_key(&mut p, k.as_str());
            FieldViolation::new(
                p,
                "this label key is reserved: the system sets it on substrate node pools",
            )
        })
        .collect()
}

/// Input of `kubernetesNodePools.create`.
#[derive(Debug, Deserialize, JsonSchema)]
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
    #[serde(default)]
    #[schemars(range(min = 1, max = bc_domain::rules::policy::MAX_NODES))]
    pub count: Option<u32>,
    /// Autoscaling bounds; exclusive with `count`.
    #[serde(default)]
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
    #[serde(default)]
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

impl MethodInput for KubernetesNodePoolsCreateInput {
    fn target(&self) -> Target {
        Target::Cluster(self.tenant_id.clone(), self.cluster_id.clone())
    }
    fn validate(&self) -> Vec<FieldViolation> {
        self.spec().violations("")
    }
    fn example() -> Value {
        json!({
            "tenantId": ex::TENANT,
            "clusterId": ex::CLUSTER,
            "name": "workers",
            "size": "s-4vcpu-8gb",
            "autoScale": { "min": 1, "max": 5 },
            "labels": { "tier": "batch" },
            "requestId": "workers-1"
        })
    }
    fn request_id(&self) -> Option<&RequestId> {
        self.request_id.as_ref()
    }
}

object_ref!(
    /// Input of `kubernetesNodePools.get` and `kubernetesNodePools.delete`.
    NodePoolRef, node_pool_id: NodePoolId, NodePool, "nodePoolId" = ex::NODE_POOL
);

list_input!(
    /// Input of `kubernetesNodePools.list`.
    KubernetesNodePoolsListInput {
        /// The cluster.
        cluster_id: ClusterId,
    }
);

impl MethodInput for KubernetesNodePoolsListInput {
    fn target(&self) -> Target {
        Target::list(
            &self.tenant_id,
            Some(Target::Cluster(self.tenant_id.clone(), self.cluster_id.clone())),
        )
    }
    fn example() -> Value {
        json!({ "tenantId": ex::TENANT, "clusterId": ex::CLUSTER })
    }
}

/// Input of `kubernetesNodePools.resize`.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = bc_domain::one_of::count_or_auto_scale)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubernetesNodePoolsResizeInput {
    /// The node pool's tenant.
    pub tenant_id: TenantId,
    /// The node pool.
    pub node_pool_id: NodePoolId,
    /// Fixed node count; exclusive with `autoScale`.
    #[serde(default)]
    #[schemars(range(min = 1, max = bc_domain::rules::policy::MAX_NODES))]
    pub count: Option<u32>,
    /// Autoscaling bounds; exclusive with `count`.
    #[serde(default)]
    pub auto_scale: Option<AutoScale>,
    /// Refuse (ABORTED) unless the node pool's generation is this.
    #[serde(default)]
    #[schemars(range(max = INTEGER_MAX))]
    pub expected_generation: Option<u64>,
}

impl MethodInput for KubernetesNodePoolsResizeInput {
    fn target(&self) -> Target {
        Target::NodePool(self.tenant_id.clone(), self.node_pool_id.clone())
    }
    fn validate(&self) -> Vec<FieldViolation> {
        validate_scale(self.count, self.auto_scale, "")
    }
    fn example() -> Value {
        json!({ "tenantId": ex::TENANT, "nodePoolId": ex::NODE_POOL, "count": 4, "expectedGeneration": 1 })
    }
}

/// A node pool's node counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct NodeCounts {
    /// Nodes the provider lists.
    pub listed: u32,
    /// Of them, the ones running.
    pub ready: u32,
}

/// A node pool as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
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

pub(crate) fn methods() -> Vec<Method> {
    use Permission::{KubernetesManage as Manage, KubernetesRead as Read};
    use ResourceType::{KubernetesCluster as OnCluster, KubernetesNodePool as OnNodePool};
    vec![
        Method::declare::<KubernetesNodePoolsCreateInput, Created<NodePoolView>>(
            KUBERNETES_NODE_POOLS.method(
                "create",
                Kind::Write,
                Manage,
                OnCluster,
                "Records a node pool to add to the standard cluster clusterId and returns it, state pending: name (unique in the cluster, also against the provider's own pools; names starting bc- are reserved for pool substrates), size (a provider size slug), exactly one of count (1–512) or autoScale ({ min, max }: min 0–512, max 1–512, min ≤ max), and optional labels and taints (keys under better-compute.dev/ are reserved). An autopilot cluster has no node pools: FAILED_PRECONDITION. A repeat with the same requestId and the same body within 24 hours returns the first node pool and creates nothing; the same requestId with another body is ALREADY_EXISTS. Decided as compute:kubernetes:manage on the cluster.",
            ),
            create,
        ),
        Method::declare::<NodePoolRef, NodePoolView>(
            KUBERNETES_NODE_POOLS.method(
                "get",
                Kind::Read,
                Read,
                OnNodePool,
                "Returns the node pool: nodePoolId, clusterId, tenantId, name, size, count or autoScale, labels, taints, managedBy (the pool whose substrate owns it, when one does), nodes ({ listed, ready }), state with a message when there is something to fix, generation, createdAt and updatedAt. A node pool of another tenant is NOT_FOUND. Decided as compute:kubernetes:read on the node pool.",
            ),
            get,
        ),
        Method::declare::<KubernetesNodePoolsListInput, KubernetesNodePoolsListOutput>(
            KUBERNETES_NODE_POOLS.method(
                "list",
                Kind::Read,
                Read,
                OnNodePool,
                "Lists the node pools of clusterId that the caller may read, by id, pageSize at a time (1–500, default 100), with nextPageToken while more remain. It shows the provider's pools that this system did not create too, without managedBy and read-only. Decided as compute:kubernetes:read on each node pool; a grant on its cluster or provider account covers it.",
            ),
            list,
        ),
        Method::declare::<KubernetesNodePoolsResizeInput, NodePoolView>(
            KUBERNETES_NODE_POOLS.method(
                "resize",
                Kind::Write,
                Manage,
                OnNodePool,
                "Sets the node pool's count, or its autoScale bounds (exactly one of them), and returns it with its generation bumped; it goes updating, and its cluster with it, until the provider has resized it. With expectedGeneration, a node pool changed since is ABORTED. A node pool with managedBy belongs to that pool's substrate (change the pool's flavors instead), and the provider's own pools are read-only: both are FAILED_PRECONDITION. Decided as compute:kubernetes:manage on the node pool.",
            ),
            resize,
        ),
        Method::declare::<NodePoolRef, NodePoolView>(
            KUBERNETES_NODE_POOLS.method(
                "delete",
                Kind::Write,
                Manage,
                OnNodePool,
                "Asks for the node pool to be removed and returns it; it goes deleting, then deleted. Deleting a deleted node pool returns it unchanged. A node pool with managedBy, or one of the provider's own, is FAILED_PRECONDITION. Decided as compute:kubernetes:manage on the node pool.",
            ),
            delete,
        ),
    ]
}

/// Resize and delete go through these calls only for pools this system made for the
/// tenant: a substrate's pools change with the pool's flavors, the provider's own are
/// read-only.
fn refuse_unless_tenants(np: &NodePool) -> Result<(), ApiError> {
    let id = &np.node_pool_id;
    if let Some(pool) = &np.managed_by {
        return Err(ApiError::failed_precondition(format!(
            "node pool {id} belongs to the substrate of pool {pool}: change that pool's flavors instead"
        )));
    }
    if np.origin == NodePoolOrigin::Provider {
        return Err(ApiError::failed_precondition(format!(
            "node pool {id} is the provider's own, not made by this system: it is read-only here"
        )));
    }
    Ok(())
}

/// Whether the node pool's deletion was asked for (or is done).
fn is_deleting(np: &NodePool) -> bool {
    np.delete_requested || np.state == NodePoolState::Deleted
}

async fn create(
    ctx: Ctx,
    call: Call<KubernetesNodePoolsCreateInput>,
) -> Result<Created<NodePoolView>, ApiError> {
    let cluster = call.access.cluster()?;
    if cluster.mode == ClusterMode::Autopilot {
        return Err(ApiError::failed_precondition(format!(
            "cluster {} is an autopilot cluster: the provider runs its nodes, it has no node pools",
            cluster.cluster_id
        )));
    }
    if cluster.delete_requested || cluster.status.state == ResourceState::Deleted {
        return Err(ApiError::failed_precondition(format!(
            "cluster {} is being deleted",
            cluster.cluster_id
        )));
    }
    let now = ctx.now();
    let node_pool = call.input.spec().record(cluster, ctx.new_id(), now);
    let uow = UnitOfWork::new().write(Write::InsertNodePool(node_pool.clone())).enqueue(
        WorkKind::NodePools,
        node_pool.node_pool_id.as_str(),
        now,
    );
    ctx.commit_create(&call, uow, NodePoolView::from(&node_pool)).await
}

async fn get(_ctx: Ctx, call: Call<NodePoolRef>) -> Result<NodePoolView, ApiError> {
    Ok(NodePoolView::from(call.access.node_pool()?.0))
}

async fn list(
    ctx: Ctx,
    call: Call<KubernetesNodePoolsListInput>,
) -> Result<KubernetesNodePoolsListOutput, ApiError> {
    let input = &call.input;
    let page = input.page(call.method)?;
    let scope = call.access.scope()?;
    let pools =
        ctx.store.node_pool_list(&input.tenant_id, &input.cluster_id, scope, false, &page).await?;
    Ok(KubernetesNodePoolsListOutput::of(call.method, pools, |n| NodePoolView::from(&n)))
}

async fn resize(
    ctx: Ctx,
    call: Call<KubernetesNodePoolsResizeInput>,
) -> Result<NodePoolView, ApiError> {
    let input = &call.input;
    let (np, _) = call.access.node_pool()?;
    refuse_unless_tenants(np)?;
    if is_deleting(np) {
        return Err(ApiError::failed_precondition(format!(
            "node pool {} is being deleted: create a new one",
            np.node_pool_id
        )));
    }
    check_generation(
        input.expected_generation,
        np.generation,
        &format!("node pool {}", np.node_pool_id),
    )?;
    let scale = scale_of(input.count, input.auto_scale);
    if scale == np.scale {
        return Ok(NodePoolView::from(np));
    }
    let resized = NodePool { scale, generation: np.generation + 1, ..np.clone() };
    let now = ctx.now();
    let uow = UnitOfWork::new()
        .write(Write::UpdateNodePool {
            node_pool: resized.clone(),
            expected_generation: np.generation,
        })
        .enqueue(WorkKind::NodePools, np.node_pool_id.as_str(), now);
    ctx.commit(uow).await?;
    Ok(NodePoolView::from(&resized))
}

async fn delete(ctx: Ctx, call: Call<NodePoolRef>) -> Result<NodePoolView, ApiError> {
    let (np, _) = call.access.node_pool()?;
    refuse_unless_tenants(np)?;
    if is_deleting(np) {
        return Ok(NodePoolView::from(np));
    }
    let deleting = NodePool { delete_requested: true, generation: np.generation + 1, ..np.clone() };
    let now = ctx.now();
    let uow = UnitOfWork::new()
        .write(Write::UpdateNodePool {
            node_pool: deleting.clone(),
            expected_generation: np.generation,
        })
        .enqueue(WorkKind::NodePools, np.node_pool_id.as_str(), now);
    ctx.commit(uow).await?;
    Ok(NodePoolView::from(&deleting))
}
