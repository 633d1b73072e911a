//! `events.list` (SPEC §12): the outbox, read by tenant and subject.

use bc_api_types::events as api;
pub use bc_api_types::events::*;

use bc_domain::ports::PAGE_SIZE_DEFAULT;
use serde_json::{Value, json};

use super::examples as ex;
use crate::access::Target;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::registry::{Call, Method, MethodInput};

impl MethodInput for EventsListInput {
    fn target(&self) -> Target {
        Target::Tenant(self.tenant_id.clone())
    }
    fn example() -> Value {
        json!({ "tenantId": ex::TENANT, "subject": format!("compute.pools.{}", ex::POOL), "afterSeq": 0, "limit": 100 })
    }
}

pub(crate) fn methods() -> Vec<Method> {
    vec![Method::declare(api::List, list)]
}

async fn list(ctx: Ctx, call: Call<EventsListInput>) -> Result<EventsListOutput, ApiError> {
    let input = &call.input;
    let events = ctx
        .store
        .event_list(
            &input.tenant_id,
            input.subject.as_deref(),
            input.after_seq.unwrap_or(0),
            input.limit.unwrap_or(PAGE_SIZE_DEFAULT),
        )
        .await?;
    Ok(EventsListOutput { events })
}
