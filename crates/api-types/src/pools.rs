//! `pools.*` (SPEC §4): a tenant's pools and their policies: the resource, its methods'
//! wire types and their endpoints. Invariant: optional input fields are left out when
//! unset and output fields are read back as the server writes them, so a type here round-
//! trips through the wire; what a method does is bc-api's.

use bc_domain::model::{INTEGER_MAX, Pool};
use bc_domain::policy::PoolPolicy;
use bc_domain::ports::Permission;
use bc_domain::{ObjectName, PoolId, RequestId, TenantId};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::endpoint::{Input, create_input, endpoint, list_input, list_output, object_ref};
use crate::meta::{Kind, Resource, ResourceType};
use Permission::{PoolsManage, PoolsRead};
use ResourceType::{ComputeTenant, Pool as OnPool};

object_ref!(
    /// Input of `pools.get`, `pools.archive` and `quotas.list`.
    PoolRef, pool_id: PoolId
);

/// The resource.
pub static POOLS: Resource = Resource {
    name: "pools",
    page: "pools",
    module: "pools",
    description: "A pool is a tenant's group of compute, described by its `policy`: the `flavors` of node it is made of (each a provider size and a fixed `count` or `autoScale` bounds, with optional labels and taints) and, when it has a `substrate`, the managed Kubernetes cluster behind it ([kubernetesSubstrates](/docs/reference/api/kubernetes-substrates)). Every call records what the tenant wants and returns at once; the `kubernetes.substrates` reconciler converges the substrate to the policy. A pool's name is unique among the tenant's active pools; archiving a pool frees its name and tears its substrate down. Every accepted change bumps the pool's `generation`.",
};

/// Input of `pools.create`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PoolsCreateInput {
    /// The tenant that will own the pool.
    pub tenant_id: TenantId,
    /// Unique among the tenant's active pools.
    pub name: ObjectName,
    /// Flavors, and the substrate if any.
    pub policy: PoolPolicy,
    /// Idempotency key: a repeat within 24 h returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<RequestId>,
}

list_input!(
    /// Input of `pools.list`.
    PoolsListInput {
        /// Include archived pools.
        #[serde(default)]
        include_archived: bool,
    }
);

list_output!(
    /// Output of `pools.list`.
    PoolsListOutput, pools, Pool
);

/// Input of `pools.update`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PoolsUpdateInput {
    /// The pool's tenant.
    pub tenant_id: TenantId,
    /// The pool.
    pub pool_id: PoolId,
    /// The whole new policy.
    pub policy: PoolPolicy,
    /// Refuse (ABORTED) unless the pool's generation is this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = INTEGER_MAX))]
    pub expected_generation: Option<u64>,
}

create_input!(PoolsCreateInput);
impl Input for PoolsUpdateInput {}

endpoint!(
    /// `pools.create`.
    Create = POOLS.method(
        "create",
        Kind::Write,
        PoolsManage,
        ComputeTenant,
        "Creates a pool owned by tenantId with the given name and policy, and returns it: state active, generation 1. The name must be unique among the tenant's active pools (ALREADY_EXISTS otherwise). The policy is checked whole and every violation is named with its JSON path, e.g. policy.flavors[1].name; a substrate's account must be a provider account of the same tenant, on which the caller also needs compute:kubernetes:manage (the substrate makes or adopts clusters there), and a cluster created for another pool's substrate cannot be adopted (FAILED_PRECONDITION naming that pool: add a flavor to it instead). With a substrate, the kubernetes.substrates reconciler starts making it at once: follow it with kubernetesSubstrates.get. A repeat with the same requestId and the same body within 24 hours returns the first pool and creates nothing; the same requestId with another body is ALREADY_EXISTS. Decided as compute:pools:manage on the tenant and, with a substrate, compute:kubernetes:manage on its provider account.",
    );
    PoolsCreateInput => Pool
);

endpoint!(
    /// `pools.get`.
    Get = POOLS.method(
        "get",
        Kind::Read,
        PoolsRead,
        OnPool,
        "Returns the pool: poolId, tenantId, name, policy, state (active or archived), generation, createdAt, updatedAt and, once archived, archivedAt. A pool of another tenant is NOT_FOUND. Decided as compute:pools:read on the pool.",
    );
    PoolRef => Pool
);

endpoint!(
    /// `pools.list`.
    List = POOLS.method(
        "list",
        Kind::Read,
        PoolsRead,
        OnPool,
        "Lists the tenant's pools that the caller may read, by id (that is, by creation), pageSize at a time (1–500, default 100), with nextPageToken while more remain: pass it back as pageToken for the next page. Archived pools are left out unless includeArchived is true. Decided as compute:pools:read on each pool, so a caller whose grants cover some pools only sees those.",
    );
    PoolsListInput => PoolsListOutput
);

endpoint!(
    /// `pools.update`.
    Update = POOLS.method(
        "update",
        Kind::Write,
        PoolsManage,
        OnPool,
        "Replaces the pool's policy and returns the pool with its generation bumped; the substrate converges to it. With expectedGeneration, a pool changed since is ABORTED and nothing is written. An archived pool is FAILED_PRECONDITION. Changes no provider can make to a live cluster (another substrate.account, create to adopt or back, another adopted providerClusterId, another region or cluster name, turning highAvailability off) are FAILED_PRECONDITION: remove the substrate first. Flavors, the version and upgrades change in place. Decided as compute:pools:manage on the pool and, while the policy has a substrate, compute:kubernetes:manage on its provider account.",
    );
    PoolsUpdateInput => Pool
);

endpoint!(
    /// `pools.archive`.
    Archive = POOLS.method(
        "archive",
        Kind::Write,
        PoolsManage,
        OnPool,
        "Archives the pool and returns it: state archived, with archivedAt. Its name is free again, and its substrate, if any, is torn down: the DaemonSet, Secret, ServiceAccount and Namespace it applied, then its node pools (adopt mode) or the cluster it created (create mode); the tenant's own node pools and objects are never touched. Archiving an archived pool returns it unchanged. Decided as compute:pools:manage on the pool.",
    );
    PoolRef => Pool
);
