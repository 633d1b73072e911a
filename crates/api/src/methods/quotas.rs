//! `quotas.*` (SPEC §4): how many of a resource a pool may hold.

use bc_domain::model::{Quota, QuotaResource};
use bc_domain::ports::{Permission, UnitOfWork, Write};
use bc_domain::{PoolId, TenantId};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::examples as ex;
use super::pools::PoolRef;
use crate::access::Target;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::registry::{Call, Kind, Method, MethodInput, Resource, ResourceType};

pub(crate) static QUOTAS: Resource = Resource {
    name: "quotas",
    page: "quotas",
    module: "pools",
    description: "Quotas cap how many of a resource a pool may hold; today the one resource is `loadBalancers`. A pool without a quota row for a resource may hold none of it: creating one is `RESOURCE_EXHAUSTED`. A load balancer books one unit when it is created, in the same transaction as its record, so with a limit of N exactly N concurrent creates succeed; the unit is released when the load balancer is deleted. The server flag `--default-pool-quota loadBalancers=N` gives new pools that row.",
};

/// Input of `quotas.set`.
#[derive(Debug, Deserialize, JsonSchema)]
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

impl MethodInput for QuotasSetInput {
    fn target(&self) -> Target {
        Target::Pool(self.tenant_id.clone(), self.pool_id.clone())
    }
    fn example() -> Value {
        json!({ "tenantId": ex::TENANT, "poolId": ex::POOL, "resource": "loadBalancers", "limit": 5 })
    }
}

/// Output of `quotas.list`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuotasListOutput {
    /// The pool's quota rows.
    pub quotas: Vec<Quota>,
}

pub(crate) fn methods() -> Vec<Method> {
    vec![
        Method::declare::<QuotasSetInput, Quota>(
            QUOTAS.method("set", Kind::Write, Permission::QuotasManage, ResourceType::ComputeSystem, "Sets the pool's limit for resource (loadBalancers) to limit (0 or more) and returns the quota row: resource, limit, and used, the units booked now. A limit below used releases nothing: new bookings are refused until enough are released. Decided as compute:quotas:manage on compute-system: quotas are set by the operator of the whole system, not by tenants."),
            set,
        ),
        Method::declare::<PoolRef, QuotasListOutput>(
            QUOTAS.method("list", Kind::Read, Permission::PoolsRead, ResourceType::Pool, "Returns the pool's quota rows, quotas: [{ resource, limit, used }]. A resource without a row grants none. Decided as compute:pools:read on the pool."),
            list,
        ),
    ]
}

async fn set(ctx: Ctx, call: Call<QuotasSetInput>) -> Result<Quota, ApiError> {
    let input = &call.input;
    let pool = call.access.pool()?;
    let write = Write::SetQuota {
        pool_id: pool.pool_id.clone(),
        resource: input.resource,
        limit: input.limit,
    };
    ctx.commit(UnitOfWork::new().write(write)).await?;
    // Read back: `used` is whatever is booked at this moment, not what was read before.
    ctx.store.quota_get(&pool.pool_id, input.resource).await?.ok_or_else(|| {
        ApiError::internal(format!(
            "quota {} of pool {} vanished",
            input.resource.as_str(),
            pool.pool_id
        ))
    })
}

async fn list(ctx: Ctx, call: Call<PoolRef>) -> Result<QuotasListOutput, ApiError> {
    let pool = call.access.pool()?;
    Ok(QuotasListOutput { quotas: ctx.store.quota_list(&pool.pool_id).await? })
}
