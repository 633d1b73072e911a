//! `quotas.*` (SPEC §4): how many of a resource a pool may hold.

use bc_api_types::quotas as api;
pub use bc_api_types::quotas::*;

use bc_domain::model::Quota;
use bc_domain::ports::{UnitOfWork, Write};
use serde_json::{Value, json};

use super::examples as ex;
use super::pools::PoolRef;
use crate::access::Target;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::registry::{Call, Method, MethodInput};

impl MethodInput for QuotasSetInput {
    fn target(&self) -> Target {
        Target::Pool(self.tenant_id.clone(), self.pool_id.clone())
    }
    fn example() -> Value {
        json!({ "tenantId": ex::TENANT, "poolId": ex::POOL, "resource": "loadBalancers", "limit": 5 })
    }
}

pub(crate) fn methods() -> Vec<Method> {
    vec![Method::declare(api::Set, set), Method::declare(api::List, list)]
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
