//! `kubernetesNodePools.*` (SPEC §8): the worker groups of standard clusters.

use bc_api_types::node_pools as api;
pub use bc_api_types::node_pools::*;

use std::collections::BTreeMap;

use bc_domain::model::{ClusterMode, KubernetesCluster, NodePool, NodePoolOrigin};
use bc_domain::ports::ProviderNodePool;
use bc_domain::recipes::{node_pool_changed, node_pool_created};
use bc_domain::rules::plan::cluster_created_for;
use bc_domain::rules::policy::{is_reserved_label_key, validate_scale};
use bc_domain::{
    ErrorCode, FieldViolation, LabelKey, LabelValue, ProviderError, RESERVED_NODE_POOL_PREFIX,
    ResourceState,
};
use serde_json::{Value, json};

use super::examples as ex;
use super::{check_generation, object_ref};
use crate::access::Target;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::page::AnswerPage;
use crate::page::AskedPage;
use crate::registry::{Call, Method, MethodInput};
use crate::write::Created;

/// The rules across a node pool spec's fields, at `path` (empty at the top level).
pub fn spec_violations(spec: &NodePoolSpec, path: &str) -> Vec<FieldViolation> {
    let at = |f: &str| if path.is_empty() { f.to_owned() } else { format!("{path}.{f}") };
    let mut out = Vec::new();
    if spec.name.as_str().starts_with(RESERVED_NODE_POOL_PREFIX) {
        out.push(FieldViolation::new(
            at("name"),
            format!("names starting {RESERVED_NODE_POOL_PREFIX} are reserved for pool substrates"),
        ));
    }
    out.extend(validate_scale(spec.count, spec.auto_scale, path));
    out.extend(reserved_labels(&spec.labels, &at("labels")));
    out
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

impl MethodInput for KubernetesNodePoolsCreateInput {
    fn target(&self) -> Target {
        Target::Cluster(self.tenant_id.clone(), self.cluster_id.clone())
    }
    fn validate(&self) -> Vec<FieldViolation> {
        spec_violations(&self.spec(), "")
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
}

object_ref!(
    NodePoolRef, node_pool_id: NodePoolId, NodePool, "nodePoolId" = ex::NODE_POOL
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

pub(crate) fn methods() -> Vec<Method> {
    vec![
        Method::declare(api::Create, create),
        Method::declare(api::Get, get),
        Method::declare(api::List, list),
        Method::declare(api::Resize, resize),
        Method::declare(api::Delete, delete),
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
    // SPEC §6: a cluster created for a substrate goes with its pool (archiving the pool
    // deletes it), so nothing else is added to it.
    let users = ctx.store.substrate_list_by_cluster(&cluster.cluster_id).await?;
    if let Some(pool) = cluster_created_for(&users, None) {
        return Err(ApiError::failed_precondition(format!(
            "cluster {} was created for the substrate of pool {pool} and is deleted with it: add a flavor to pool {pool} instead",
            cluster.cluster_id
        )));
    }
    let name = call.input.name.as_str();
    check_name_length(&ctx, cluster, name).await?;
    if let Some(theirs) = provider_pool_named(&ctx, cluster, name).await? {
        return Err(ApiError::new(
            ErrorCode::AlreadyExists,
            format!(
                "cluster {} already has a node pool named {name} at the provider ({}): a node pool is never taken over by name; choose another name",
                cluster.cluster_id, theirs.id
            ),
        ));
    }
    let now = ctx.now();
    let row = call.input.spec().record(&cluster.cluster_id, &cluster.tenant_id, ctx.new_id(), now);
    let made = node_pool_created(row, now);
    ctx.commit_create(&call, made.uow, NodePoolView::from(&made.record)).await
}

/// A name longer than the cluster's provider takes (GKE: 40) is INVALID_ARGUMENT here,
/// from the provider's declaration, not a refusal later.
async fn check_name_length(
    ctx: &Ctx,
    cluster: &KubernetesCluster,
    name: &str,
) -> Result<(), ApiError> {
    let Some(account) = ctx.store.account_get_any(&cluster.provider_account_id).await? else {
        return Ok(());
    };
    let provider = ctx
        .providers
        .provider_for(&account)
        .await
        .map_err(|e| ApiError::provider("opening the account", &e))?;
    let offer = provider.offer();
    if name.len() > offer.name_max {
        return Err(ApiError::invalid(
            "name",
            format!(
                "{} takes node pool names of at most {} characters",
                offer.provider.as_str(),
                offer.name_max
            ),
        ));
    }
    Ok(())
}

/// The provider's node pool named `name` in `cluster`, read now (SPEC §8: a name is
/// also the provider-side name, checked against the provider's own pools — including on
/// clusters whose pools are not swept into rows). None while the cluster is not made at
/// the provider yet (its pools are its create's), or once its account or the provider's
/// cluster is gone (the clusters reconciler reports that).
async fn provider_pool_named(
    ctx: &Ctx,
    cluster: &KubernetesCluster,
    name: &str,
) -> Result<Option<ProviderNodePool>, ApiError> {
    let Some(pid) = &cluster.provider_cluster_id else { return Ok(None) };
    let account = ctx.store.account_get_any(&cluster.provider_account_id).await?;
    // An account gone is the cluster's error, which its reconciler reports.
    let Some(account) = account.filter(|a| a.deleted_at.is_none()) else { return Ok(None) };
    let what = "reading the cluster's node pools at the provider";
    let provider =
        ctx.providers.provider_for(&account).await.map_err(|e| ApiError::provider(what, &e))?;
    match provider.kubernetes().list_node_pools(pid).await {
        Ok(pools) => Ok(pools.into_iter().find(|p| p.name == name)),
        Err(ProviderError::NotFound) => Ok(None),
        Err(e) => Err(ApiError::provider(what, &e)),
    }
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
    let mut pools =
        ctx.store.node_pool_list(&input.tenant_id, &input.cluster_id, scope, false, &page).await?;
    // The list's target is the cluster; each pool is decided as its own `get` would be
    // (SPEC §3: a policy that hides a node pool hides it here too).
    let cluster = call.access.list_cluster()?;
    let read = bc_domain::ports::Permission::KubernetesRead;
    pools.items = crate::access::readable_items(&ctx, &call.caller, read, pools.items, |n| {
        let resolved =
            crate::access::Resolved::NodePool { node_pool: n.clone(), cluster: cluster.clone() };
        Some(resolved.chain())
    });
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
    let resized = node_pool_changed(np, scale, false, ctx.now());
    ctx.commit(resized.uow).await?;
    Ok(NodePoolView::from(&resized.record))
}

async fn delete(ctx: Ctx, call: Call<NodePoolRef>) -> Result<NodePoolView, ApiError> {
    let (np, _) = call.access.node_pool()?;
    refuse_unless_tenants(np)?;
    if is_deleting(np) {
        return Ok(NodePoolView::from(np));
    }
    let deleting = node_pool_changed(np, np.scale, true, ctx.now());
    ctx.commit(deleting.uow).await?;
    Ok(NodePoolView::from(&deleting.record))
}
