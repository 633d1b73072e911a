//! `quotas.*` (SPEC §4): how many of a resource a pool may hold: the resource, its
//! methods' wire types and their endpoints. Invariant: optional input fields are left out
//! when unset and output fields are read back as the server writes them, so a type here
//! round-trips through the wire; what a method does is bc-api's.

use bc_domain::model::{Quota, QuotaResource};
use bc_domain::ports::Permission;
use bc_domain::{PoolId, TenantId};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::endpoint::{Input, endpoint};
use crate::meta::{Kind, Resource, ResourceType};
use crate::pools::PoolRef;

/// The resource.
pub static QUOTAS: Resource = Resource {
    name: "quotas",
    page: "quotas",
    module: "pools",
    description: "Quotas cap how many of a resource a pool may hold; today the one resource is `loadBalancers`. A pool without a quota row for a resource may hold none of it: creating one is `RESOURCE_EXHAUSTED`. A load balancer books one unit when it is created, in the same transaction as its record, so with a limit of N exactly N concurrent creates succeed; the unit is released when the load balancer is deleted. The server flag `--default-pool-quota loadBalancers=N` gives new pools that row.",
};

/// Input of `quotas.set`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QuotasSetInput {
    /// The pool's tenant.
    pub tenant_id: TenantId,
    /// The pool.
    pub pool_id: PoolId,
    /// The resource the limit is for.
    pub resource: QuotaResource,
    /// Most units the pool may hold (0 or more).
    #[schemars(range(min = 0, max = u32::MAX))]
    pub limit: u32,
}

/// Output of `quotas.list`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuotasListOutput {
    /// The pool's quota rows.
    pub quotas: Vec<Quota>,
}

impl Input for QuotasSetInput {}

endpoint!(
    /// `quotas.set`.
    Set = QUOTAS.method("set", Kind::Write, Permission::QuotasManage, ResourceType::ComputeSystem, "Sets the pool's limit for resource (loadBalancers) to limit (0 or more) and returns the quota row: resource, limit, and used, the units booked now. A limit below used releases nothing: new bookings are refused until enough are released. Decided as compute:quotas:manage on compute-system: quotas are set by the operator of the whole system, not by tenants.");
    QuotasSetInput => Quota
);

endpoint!(
    /// `quotas.list`.
    List = QUOTAS.method("list", Kind::Read, Permission::PoolsRead, ResourceType::Pool, "Returns the pool's quota rows, quotas: [{ resource, limit, used }]. A resource without a row grants none. Decided as compute:pools:read on the pool.");
    PoolRef => QuotasListOutput
);
