//! `kubernetesClusters.*` (SPEC §7): managed clusters on a tenant's provider accounts.

use bc_api_types::clusters as api;
pub use bc_api_types::clusters::*;

use std::collections::BTreeSet;

use std::cmp::Ordering;

use bc_domain::model::{ClusterMode, ClusterOrigin, KubernetesCluster, ObservedStatus};
use bc_domain::policy::VERSION_LATEST;
use bc_domain::ports::{ClusterFilter, UnitOfWork, WorkKind, Write};
use bc_domain::rules::drain::compare_versions;
use bc_domain::{FieldViolation, PoolId, ResourceState};
use serde_json::{Value, json};

use super::examples as ex;
use super::node_pools::spec_violations;
use super::{check_generation, object_ref, shown_state};
use crate::access::Target;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::page::AnswerPage;
use crate::page::AskedPage;
use crate::registry::{Call, Method, MethodInput};
use crate::write::Created;

impl MethodInput for KubernetesClustersCreateInput {
    fn target(&self) -> Target {
        Target::ProviderAccount(self.tenant_id.clone(), self.provider_account_id.clone())
    }
    fn validate(&self) -> Vec<FieldViolation> {
        let mut out = Vec::new();
        match (self.mode, self.node_pools.is_empty()) {
            (ClusterMode::Standard, true) => out.push(FieldViolation::new(
                "nodePools",
                "a standard cluster needs at least one node pool",
            )),
            (ClusterMode::Autopilot, false) => out.push(FieldViolation::new(
                "nodePools",
                "an autopilot cluster has no node pools: the provider runs its nodes",
            )),
            _ => {}
        }
        let mut seen = BTreeSet::new();
        for (i, np) in self.node_pools.iter().enumerate() {
            let path = format!("nodePools[{i}]");
            if !seen.insert(np.name.as_str()) {
                out.push(FieldViolation::new(
                    format!("{path}.name"),
                    format!(
                        "node pool names must be unique in the cluster: {} is given twice",
                        np.name
                    ),
                ));
            }
            out.extend(spec_violations(np, &path));
        }
        out
    }
    fn example() -> Value {
        json!({
            "tenantId": ex::TENANT,
            "providerAccountId": ex::ACCOUNT,
            "name": "prod",
            "region": "nyc1",
            "version": "latest",
            "mode": "standard",
            "nodePools": [ { "name": "default", "size": "s-2vcpu-4gb", "count": 3 } ],
            "requestId": "prod-1"
        })
    }
}

object_ref!(
    ClusterRef, cluster_id: ClusterId, Cluster, "clusterId" = ex::CLUSTER
);

impl MethodInput for KubernetesClustersListInput {
    fn target(&self) -> Target {
        Target::list_in_account(&self.tenant_id, self.provider_account_id.as_ref())
    }
    fn example() -> Value {
        json!({ "tenantId": ex::TENANT, "providerAccountId": ex::ACCOUNT })
    }
}

impl MethodInput for KubernetesClustersUpgradeInput {
    fn target(&self) -> Target {
        Target::Cluster(self.tenant_id.clone(), self.cluster_id.clone())
    }
    fn example() -> Value {
        json!({ "tenantId": ex::TENANT, "clusterId": ex::CLUSTER, "version": "1.32.1-do.0" })
    }
}

pub(crate) fn methods() -> Vec<Method> {
    vec![
        Method::declare(api::Create, create),
        Method::declare(api::Get, get),
        Method::declare(api::List, list),
        Method::declare(api::Upgrade, upgrade),
        Method::declare(api::Delete, delete),
    ]
}

/// A cluster that is being deleted takes no other change.
fn refuse_if_deleting(c: &KubernetesCluster) -> Result<(), ApiError> {
    if c.delete_requested || c.status.state == ResourceState::Deleted {
        return Err(ApiError::failed_precondition(format!(
            "cluster {} is {}",
            c.cluster_id,
            shown_state(c.delete_requested, c.status.state).as_str()
        )));
    }
    Ok(())
}

/// A pool substrate's cluster changes through the pool's policy only.
fn refuse_if_substrate(c: &KubernetesCluster, change: &str) -> Result<(), ApiError> {
    if c.substrate_pool_ids.is_empty() {
        return Ok(());
    }
    let pools = c.substrate_pool_ids.iter().map(PoolId::as_str).collect::<Vec<_>>().join(", ");
    Err(ApiError::failed_precondition(format!(
        "cluster {} is the substrate of pool {pools}: {change}",
        c.cluster_id
    )))
}

async fn create(
    ctx: Ctx,
    call: Call<KubernetesClustersCreateInput>,
) -> Result<Created<KubernetesClusterView>, ApiError> {
    let input = &call.input;
    let account = call.access.account()?;
    // The account's provider decides which modes exist (no call: a static fact).
    let provider = ctx
        .providers
        .provider_for(account)
        .await
        .map_err(|e| ApiError::provider("opening the account", &e))?;
    let offer = provider.offer();
    if let Some(lack) = offer.lacks_mode(input.mode) {
        return Err(ApiError::failed_precondition(format!("{lack}: use mode standard")));
    }
    // Names are the provider's names too: one longer than it takes is refused here, not
    // by the provider later.
    if input.name.as_str().len() > offer.name_max {
        return Err(ApiError::invalid(
            "name",
            format!(
                "{} takes cluster names of at most {} characters",
                offer.provider.as_str(),
                offer.name_max
            ),
        ));
    }
    for (i, pool) in input.node_pools.iter().enumerate() {
        if pool.name.as_str().len() > offer.name_max {
            return Err(ApiError::invalid(
                format!("nodePools[{i}].name"),
                format!(
                    "{} takes node pool names of at most {} characters",
                    offer.provider.as_str(),
                    offer.name_max
                ),
            ));
        }
    }
    let now = ctx.now();
    let cluster = KubernetesCluster {
        cluster_id: ctx.new_id(),
        tenant_id: input.tenant_id.clone(),
        provider_account_id: account.provider_account_id.clone(),
        name: input.name.clone(),
        region: input.region.clone(),
        desired_version: Some(input.version.clone().unwrap_or_else(|| VERSION_LATEST.into())),
        high_availability: input.high_availability,
        mode: input.mode,
        origin: ClusterOrigin::Created,
        substrate_pool_ids: vec![],
        generation: 1,
        created_at: now,
        delete_requested: false,
        provider_cluster_id: None,
        version: None,
        nodes: None,
        status: ObservedStatus::pending(now),
    };
    let mut uow = UnitOfWork::new().write(Write::InsertCluster(cluster.clone()));
    for spec in &input.node_pools {
        uow = uow.write(Write::InsertNodePool(spec.record(&cluster, ctx.new_id(), now)));
    }
    // The cluster reconciler makes its first node pools with it (contracts.md).
    uow = uow.enqueue(WorkKind::Clusters, cluster.cluster_id.as_str(), now);
    ctx.commit_create(&call, uow, KubernetesClusterView::from(&cluster)).await
}

async fn get(_ctx: Ctx, call: Call<ClusterRef>) -> Result<KubernetesClusterView, ApiError> {
    Ok(KubernetesClusterView::from(call.access.cluster()?))
}

async fn list(
    ctx: Ctx,
    call: Call<KubernetesClustersListInput>,
) -> Result<KubernetesClustersListOutput, ApiError> {
    let input = &call.input;
    let page = input.page(call.method)?;
    let filter = ClusterFilter {
        provider_account_id: input.provider_account_id.clone(),
        include_deleted: false,
    };
    let scope = call.access.scope()?;
    let mut clusters = ctx.store.cluster_list(&input.tenant_id, scope, &filter, &page).await?;
    let read = bc_domain::ports::Permission::KubernetesRead;
    clusters.items = crate::access::readable_items(&ctx, &call.caller, read, clusters.items, |c| {
        Some(crate::access::Resolved::Cluster(c.clone()).chain())
    });
    Ok(KubernetesClustersListOutput::of(call.method, clusters, |c| KubernetesClusterView::from(&c)))
}

async fn upgrade(
    ctx: Ctx,
    call: Call<KubernetesClustersUpgradeInput>,
) -> Result<KubernetesClusterView, ApiError> {
    let input = &call.input;
    let cluster = call.access.cluster()?;
    refuse_if_deleting(cluster)?;
    refuse_if_substrate(cluster, "change cluster.create.version in that pool's policy")?;
    if cluster.origin == ClusterOrigin::Adopted {
        return Err(ApiError::failed_precondition(format!(
            "cluster {} was adopted: its owner upgrades it",
            cluster.cluster_id
        )));
    }
    check_generation(
        input.expected_generation,
        cluster.generation,
        &format!("cluster {}", cluster.cluster_id),
    )?;
    if let Some(running) = &cluster.version
        && compare_versions(&input.version, running) != Ordering::Greater
    {
        return Err(ApiError::failed_precondition(format!(
            "cluster {} runs {running}: {} is not newer",
            cluster.cluster_id, input.version
        )));
    }
    if cluster.desired_version.as_deref() == Some(input.version.as_str()) {
        return Ok(KubernetesClusterView::from(cluster));
    }
    let upgraded = KubernetesCluster {
        desired_version: Some(input.version.clone()),
        generation: cluster.generation + 1,
        ..cluster.clone()
    };
    let now = ctx.now();
    let uow = UnitOfWork::new()
        .write(Write::UpdateCluster {
            cluster: upgraded.clone(),
            expected_generation: cluster.generation,
        })
        .enqueue(WorkKind::Clusters, cluster.cluster_id.as_str(), now);
    ctx.commit(uow).await?;
    Ok(KubernetesClusterView::from(&upgraded))
}

async fn delete(ctx: Ctx, call: Call<ClusterRef>) -> Result<KubernetesClusterView, ApiError> {
    let cluster = call.access.cluster()?;
    if cluster.delete_requested || cluster.status.state == ResourceState::Deleted {
        return Ok(KubernetesClusterView::from(cluster));
    }
    let hint = "archive the pool or remove the substrate from its policy";
    refuse_if_substrate(cluster, hint)?;
    // A substrate row records its cluster before the cluster row lists the pool.
    let users = ctx.store.substrate_list_by_cluster(&cluster.cluster_id).await?;
    let live: Vec<&str> = users
        .iter()
        .filter(|s| s.state != ResourceState::Deleted)
        .map(|s| s.pool_id.as_str())
        .collect();
    if !live.is_empty() {
        return Err(ApiError::failed_precondition(format!(
            "cluster {} is the substrate of pool {}: {hint}",
            cluster.cluster_id,
            live.join(", ")
        )));
    }
    let deleting = KubernetesCluster {
        delete_requested: true,
        generation: cluster.generation + 1,
        ..cluster.clone()
    };
    let now = ctx.now();
    let uow = UnitOfWork::new()
        .write(Write::UpdateCluster {
            cluster: deleting.clone(),
            expected_generation: cluster.generation,
        })
        .enqueue(WorkKind::Clusters, cluster.cluster_id.as_str(), now);
    ctx.commit(uow).await?;
    Ok(KubernetesClusterView::from(&deleting))
}
