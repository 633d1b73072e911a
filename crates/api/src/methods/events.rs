//! `events.list` (SPEC §12): the outbox, read by tenant and subject.

use bc_domain::TenantId;
use bc_domain::model::{Event, INTEGER_MAX};
use bc_domain::ports::{PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX, Permission};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::examples as ex;
use crate::access::Target;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::registry::{Call, Kind, Method, MethodInput, ResourceType};
use crate::stream::{EVENTS, SUBJECT_MAX, SUBJECT_PATTERN};

/// Input of `events.list`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventsListInput {
    /// The tenant.
    pub tenant_id: TenantId,
    /// Only this subject's events.
    #[serde(default)]
    #[schemars(length(max = SUBJECT_MAX), regex(pattern = SUBJECT_PATTERN))]
    pub subject: Option<String>,
    /// Only events after this seq.
    #[serde(default)]
    #[schemars(range(max = INTEGER_MAX))]
    pub after_seq: Option<u64>,
    /// Most events to return.
    #[serde(default)]
    #[schemars(range(min = 1, max = PAGE_SIZE_MAX), extend("default" = PAGE_SIZE_DEFAULT))]
    pub limit: Option<u32>,
}

impl MethodInput for EventsListInput {
    fn target(&self) -> Target {
        Target::Tenant(self.tenant_id.clone())
    }
    fn example() -> Value {
        json!({ "tenantId": ex::TENANT, "subject": format!("compute.pools.{}", ex::POOL), "afterSeq": 0, "limit": 100 })
    }
}

/// Output of `events.list`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventsListOutput {
    /// Events in seq order.
    pub events: Vec<Event>,
}

pub(crate) fn methods() -> Vec<Method> {
    vec![Method::declare::<EventsListInput, EventsListOutput>(
        EVENTS.method("list", Kind::Read, Permission::EventsRead, ResourceType::ComputeTenant, "Returns events: the tenant's events with a seq after afterSeq (default 0), in seq order, at most limit of them (1–500, default 100); with subject, only that subject's. Ask again with the last seq seen as afterSeq for the next ones. Decided as compute:events:read on the tenant."),
        list,
    )]
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
