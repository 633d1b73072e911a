//! `kubernetesClusters.*` (SPEC §7): managed clusters on a tenant's provider accounts.

use std::collections::BTreeSet;

use std::cmp::Ordering;

use bc_domain::model::{
    ClusterMode, ClusterOrigin, INTEGER_MAX, KubernetesCluster, ObservedStatus,
};
use bc_domain::name::ProviderSlug;
use bc_domain::policy::{MAX_NODE_POOLS, VERSION_LATEST};
use bc_domain::ports::{ClusterFilter, Permission, UnitOfWork, WorkKind, Write};
use bc_domain::rules::drain::compare_versions;
use bc_domain::{
    ClusterId, FieldViolation, ObjectName, PoolId, ProviderAccountId, RequestId, ResourceState,
    TenantId, Timestamp,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::examples as ex;
use super::node_pools::NodePoolSpec;
use super::{check_generation, list_input, list_output, object_ref, shown_state};
use crate::access::Target;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::registry::{Call, Kind, Method, MethodInput, Resource, ResourceType};
use crate::write::Created;

pub(crate) static KUBERNETES_CLUSTERS: Resource = Resource {
    name: "kubernetesClusters",
    page: "kubernetes-clusters",
    module: "kubernetes",
    description: "A Kubernetes cluster is a managed cluster on one of the tenant's provider accounts, made by this system (`origin: created`) or adopted by a pool substrate (`origin: adopted`), with the pools whose substrates use it in `substratePoolIds`. Every call records what the tenant wants and returns at once: the cluster shows `pending`, `provisioning`, `ready`, `updating`, `error` (with a `message` saying what to fix), `deleting` or `deleted` while the `kubernetes.clusters` reconciler converges the provider to it, and the reconciler publishes `kubernetes.cluster.ready`, `kubernetes.cluster.error` and `kubernetes.cluster.deleted` on `compute.kubernetes.clusters.<clusterId>`. A `standard` cluster has worker node pools ([kubernetesNodePools](/docs/reference/api/kubernetes-node-pools)); an `autopilot` cluster has none, and only a provider that runs autopilot clusters accepts one. No method ever returns a kubeconfig.",
};

/// Input of `kubernetesClusters.create`.
#[derive(Debug, Deserialize, JsonSchema)]
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
    #[serde(default)]
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
    #[serde(default)]
    pub request_id: Option<RequestId>,
}

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
            out.extend(np.violations(&path));
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
    fn request_id(&self) -> Option<&RequestId> {
        self.request_id.as_ref()
    }
}

object_ref!(
    /// Input of `kubernetesClusters.get` and `kubernetesClusters.delete`.
    ClusterRef, cluster_id: ClusterId, Cluster, "clusterId" = ex::CLUSTER
);

list_input!(
    /// Input of `kubernetesClusters.list`.
    KubernetesClustersListInput {
        /// Only this account's clusters.
        #[serde(default)]
        provider_account_id: Option<ProviderAccountId>,
    }
);

impl MethodInput for KubernetesClustersListInput {
    fn target(&self) -> Target {
        Target::list_in_account(&self.tenant_id, self.provider_account_id.as_ref())
    }
    fn example() -> Value {
        json!({ "tenantId": ex::TENANT, "providerAccountId": ex::ACCOUNT })
    }
}

/// Input of `kubernetesClusters.upgrade`.
#[derive(Debug, Deserialize, JsonSchema)]
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
    #[serde(default)]
    #[schemars(range(max = INTEGER_MAX))]
    pub expected_generation: Option<u64>,
}

impl MethodInput for KubernetesClustersUpgradeInput {
    fn target(&self) -> Target {
        Target::Cluster(self.tenant_id.clone(), self.cluster_id.clone())
    }
    fn example() -> Value {
        json!({ "tenantId": ex::TENANT, "clusterId": ex::CLUSTER, "version": "1.32.1-do.0" })
    }
}

/// A cluster as the API shows it: never a kubeconfig.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
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

pub(crate) fn methods() -> Vec<Method> {
    use Permission::{KubernetesManage as Manage, KubernetesRead as Read};
    use ResourceType::{KubernetesCluster as OnCluster, ProviderAccount as OnAccount};
    vec![
        Method::declare::<KubernetesClustersCreateInput, Created<KubernetesClusterView>>(
            KUBERNETES_CLUSTERS.method(
                "create",
                Kind::Write,
                Manage,
                OnAccount,
                "Records a cluster to make on providerAccountId and returns it, state pending: name (unique among the account's live clusters, and also its provider-side name), region, version (an exact provider version slug, or latest, the default), mode, highAvailability and its first nodePools. A standard cluster needs at least one node pool and an autopilot cluster takes none; the account's provider decides which modes exist (DigitalOcean has only standard, so autopilot there is FAILED_PRECONDITION naming the provider). Node pool names starting bc- are reserved for pool substrates. A repeat with the same requestId and the same body within 24 hours returns the first cluster and creates nothing; the same requestId with another body is ALREADY_EXISTS. Decided as compute:kubernetes:manage on the provider account.",
            ),
            create,
        ),
        Method::declare::<ClusterRef, KubernetesClusterView>(
            KUBERNETES_CLUSTERS.method(
                "get",
                Kind::Read,
                Read,
                OnCluster,
                "Returns the cluster: clusterId, tenantId, providerAccountId, providerClusterId once the provider has made it, name, region, version once known, mode, highAvailability, origin, substratePoolIds, state with a message when there is something to fix or wait for, generation, createdAt and updatedAt. It never returns a kubeconfig or a credential. A cluster of another tenant is NOT_FOUND. Decided as compute:kubernetes:read on the cluster.",
            ),
            get,
        ),
        Method::declare::<KubernetesClustersListInput, KubernetesClustersListOutput>(
            KUBERNETES_CLUSTERS.method(
                "list",
                Kind::Read,
                Read,
                OnCluster,
                "Lists the tenant's clusters that the caller may read, by id, pageSize at a time (1–500, default 100), with nextPageToken while more remain; with providerAccountId, only that account's. Decided as compute:kubernetes:read on each cluster; a grant on its provider account covers it.",
            ),
            list,
        ),
        Method::declare::<KubernetesClustersUpgradeInput, KubernetesClusterView>(
            KUBERNETES_CLUSTERS.method(
                "upgrade",
                Kind::Write,
                Manage,
                OnCluster,
                "Asks for the cluster to run version, a provider version slug newer than the one it runs, and returns it with its generation bumped; it goes updating until the provider has upgraded it. With expectedGeneration, a cluster changed since is ABORTED. Decided as compute:kubernetes:manage on the cluster.",
            ),
            upgrade,
        ),
        Method::declare::<ClusterRef, KubernetesClusterView>(
            KUBERNETES_CLUSTERS.method(
                "delete",
                Kind::Write,
                Manage,
                OnCluster,
                "Asks for the cluster to be deleted at the provider and returns it; it goes deleting, then deleted. While a pool substrate uses the cluster the call is FAILED_PRECONDITION: archive the pool or remove the substrate from its policy. Decided as compute:kubernetes:manage on the cluster.",
            ),
            delete,
        ),
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
    if !provider.capabilities().cluster_modes.contains(&input.mode) {
        let mode = serde_json::to_value(input.mode).unwrap_or_default();
        return Err(ApiError::failed_precondition(format!(
            "{} offers no {} clusters: use mode standard",
            account.provider.as_str(),
            mode.as_str().unwrap_or("such")
        )));
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
    let clusters = ctx.store.cluster_list(&input.tenant_id, scope, &filter, &page).await?;
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
