//! `kubernetesSubstrates.get` (SPEC §6): the managed cluster behind a pool: the resource,
//! its methods' wire types and their endpoints. Invariant: optional input fields are left
//! out when unset and output fields are read back as the server writes them, so a type
//! here round-trips through the wire; what a method does is bc-api's.

use bc_domain::model::{Substrate, SubstrateMode, UpgradeWait, WaitingToJoin};
use bc_domain::ports::Permission;
use bc_domain::{ClusterId, PoolId, ProviderAccountId, ResourceState, TenantId};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::endpoint::{Input, endpoint};
use crate::meta::{Kind, Resource, ResourceType};

/// The resource.
pub static KUBERNETES_SUBSTRATES: Resource = Resource {
    name: "kubernetesSubstrates",
    page: "kubernetes-substrates",
    module: "kubernetes",
    description: "A pool substrate is the managed Kubernetes cluster behind a pool whose policy has a `substrate` (`kind: 'kubernetes'`, an `account`, and `cluster: { create }` or `cluster: { adopt }`). The `kubernetes.substrates` reconciler records it here: it creates the cluster with one node pool per flavor (or adopts an existing cluster and adds the flavors' node pools to it, named `bc-<pool>-<flavor>` so they never collide with the tenant's own pools), server-side applies bcd's DaemonSet with a hosted join token, and the cluster's Nodes join the pool. Every object it applies carries the label `better-compute.dev/substrate-pool=<pool id>`; on an adopted cluster an object of the same name it did not create is never taken over or deleted. There is nothing to call to create or delete a substrate: change the pool's policy, or archive the pool to tear it down.",
};

/// Input of `kubernetesSubstrates.get`: the seed's two fields.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubernetesSubstratesGetInput {
    /// The pool's tenant.
    pub tenant_id: TenantId,
    /// The pool.
    pub pool_id: PoolId,
}

/// A pool's substrate as the API shows it (SPEC §6: these fields and no other; never
/// the join token, its id, a kubeconfig or a credential).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "KubernetesSubstrate")]
pub struct KubernetesSubstrateView {
    /// The pool.
    pub pool_id: PoolId,
    /// The pool's tenant.
    pub tenant_id: TenantId,
    /// The account the cluster lives in.
    pub provider_account_id: ProviderAccountId,
    /// `create` or `adopt`.
    pub mode: SubstrateMode,
    /// The kubernetesClusters row, once recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<ClusterId>,
    /// State.
    pub state: ResourceState,
    /// What to fix or wait for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The substrate's Nodes the cluster last listed.
    pub nodes_listed: u32,
    /// Of them, the ones whose bcd joined the pool.
    pub nodes_joined: u32,
    /// While listed Nodes have no joined bcd.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_to_join: Option<WaitingToJoin>,
    /// While a drain upgrade waits for bookings to end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<UpgradeWait>,
}

impl From<&Substrate> for KubernetesSubstrateView {
    fn from(s: &Substrate) -> Self {
        Self {
            pool_id: s.pool_id.clone(),
            tenant_id: s.tenant_id.clone(),
            provider_account_id: s.provider_account_id.clone(),
            mode: s.mode,
            cluster_id: s.cluster_id.clone(),
            state: s.state,
            message: s.message.clone(),
            nodes_listed: s.nodes_listed,
            nodes_joined: s.nodes_joined,
            waiting_to_join: s.waiting_to_join,
            upgrade: s.upgrade.clone(),
        }
    }
}

impl Input for KubernetesSubstratesGetInput {}

endpoint!(
    /// `kubernetesSubstrates.get`.
    Get = KUBERNETES_SUBSTRATES.method("get", Kind::Read, Permission::KubernetesRead, ResourceType::ComputeTenant, "Returns the pool's substrate: poolId, tenantId, providerAccountId, mode (create or adopt), the clusterId of its kubernetesClusters row once recorded, state (pending, provisioning, ready, updating, error, deleting, deleted) with a message when there is something to fix or wait for, nodesListed and nodesJoined (the substrate's Nodes the cluster last listed, and of them the ones whose bcd joined the pool), waitingToJoin ({ nodes, since }: how many listed Nodes have no joined bcd, and since when none has joined; after 15 minutes the message says what to check, while the state stays ready), and upgrade ({ version, since }) while an upgrades: 'drain' upgrade waits for bookings to end. It never returns the join token, its id or a credential. A pool without a substrate is NOT_FOUND. Decided as compute:kubernetes:read on the pool owner's tenant.");
    KubernetesSubstratesGetInput => KubernetesSubstrateView
);
