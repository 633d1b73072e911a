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
    // SPEC §3: the events of an object a policy hides are hidden with it.
    let events = if ctx.authorizer.has_object_policies() {
        let mut pairs = Vec::with_capacity(events.len());
        for e in events {
            let chain = crate::access::event_object_chain(&ctx, &input.tenant_id, &e.subject).await;
            pairs.push((e, chain));
        }
        let read = bc_domain::ports::Permission::EventsRead;
        let kept = crate::access::readable_items(&ctx, &call.caller, read, pairs, |p| p.1.clone());
        kept.into_iter().map(|(e, _)| e).collect()
    } else {
        events
    };
    Ok(EventsListOutput { events })
}
