//! `kubernetesSubstrates.get` (SPEC §6): the managed cluster behind a pool, exactly as
//! the seed's reference page describes it.

use bc_api_types::substrates as api;
pub use bc_api_types::substrates::*;

use serde_json::{Value, json};

use super::examples as ex;
use crate::access::Target;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::registry::{Call, Method, MethodInput};

impl MethodInput for KubernetesSubstratesGetInput {
    /// Decided on the tenant (SPEC §6: on the pool owner's tenant) before anything is
    /// read; the one read is then the tenant-scoped substrate row itself, so a pool of
    /// another tenant is as absent as a pool without a substrate.
    fn target(&self) -> Target {
        Target::Tenant(self.tenant_id.clone())
    }
    fn example() -> Value {
        json!({ "tenantId": ex::TENANT, "poolId": ex::POOL })
    }
}

pub(crate) fn methods() -> Vec<Method> {
    vec![Method::declare(api::Get, get)]
}

async fn get(
    ctx: Ctx,
    call: Call<KubernetesSubstratesGetInput>,
) -> Result<KubernetesSubstrateView, ApiError> {
    let input = &call.input;
    match ctx.store.substrate_get(&input.tenant_id, &input.pool_id).await? {
        Some(substrate) => Ok(KubernetesSubstrateView::from(&substrate)),
        None => Err(ApiError::not_found(format!("pool {} has no substrate", input.pool_id))),
    }
}
