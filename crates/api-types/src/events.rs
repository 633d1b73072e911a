//! `events.list` and the event stream (SPEC §12): the outbox, read by tenant and subject:
//! the resource, its methods' wire types and their endpoints. Invariant: optional input
//! fields are left out when unset and output fields are read back as the server writes
//! them, so a type here round-trips through the wire; what a method does is bc-api's.

use bc_domain::TenantId;
use bc_domain::model::{Event, INTEGER_MAX};
use bc_domain::ports::{PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX, Permission};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::endpoint::{Input, endpoint};
use crate::meta::{Kind, MethodInfo, Resource, ResourceType};

/// The rule of event subjects: dot-separated tokens (`compute.pools.<poolId>`).
pub const SUBJECT_PATTERN: &str = r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$";

/// Most characters of a subject.
pub const SUBJECT_MAX: usize = 256;

/// The resource.
pub static EVENTS: Resource = Resource {
    name: "events",
    page: "events",
    module: "events",
    description: "Events say what the reconcilers did (`vps.load-balancer.ready`, `kubernetes.nodepool.error`, …). Each is written in the same transaction as the state change it reports and carries `{eventId, seq, tenantId, subject, type, time, data}`, `seq` increasing in commit order. Subjects are `compute.pools.<poolId>`, `compute.kubernetes.clusters.<clusterId>` and `compute.load-balancers.<id>`. `GET /api/compute/events/stream?tenantId=…&subject=…` streams them as Server-Sent Events, resumable with `Last-Event-ID` set to the last `seq` seen; with `--nats-url` they are also published to NATS JetStream, the event id being the message id.",
};

/// Input of `events.list`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventsListInput {
    /// The tenant.
    pub tenant_id: TenantId,
    /// Only this subject's events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = SUBJECT_MAX), regex(pattern = SUBJECT_PATTERN))]
    pub subject: Option<String>,
    /// Only events after this seq.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = INTEGER_MAX))]
    pub after_seq: Option<u64>,
    /// Most events to return.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = PAGE_SIZE_MAX), extend("default" = PAGE_SIZE_DEFAULT))]
    pub limit: Option<u32>,
}

/// Output of `events.list`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventsListOutput {
    /// Events in seq order.
    pub events: Vec<Event>,
}

impl Input for EventsListInput {}

endpoint!(
    /// `events.list`.
    List = EVENTS.method("list", Kind::Read, Permission::EventsRead, ResourceType::ComputeTenant, "Returns events: the tenant's events with a seq after afterSeq (default 0), in seq order, at most limit of them (1–500, default 100); with subject, only that subject's. Ask again with the last seq seen as afterSeq for the next ones. Decided as compute:events:read on the tenant.");
    EventsListInput => EventsListOutput
);

/// The stream's path (`GET`, Server-Sent Events).
pub const STREAM_PATH: &str = "/api/compute/events/stream";
/// The header a reconnecting client sends with the last `seq` it saw.
pub const LAST_EVENT_ID: &str = "last-event-id";

/// The stream's facts: read like `events.list`, decided on the tenant.
pub static STREAM: MethodInfo = EVENTS.method(
    "stream",
    Kind::Read,
    Permission::EventsRead,
    ResourceType::ComputeTenant,
    "Streams the tenant's events as Server-Sent Events.",
);

/// The stream's query string: `tenantId`, and `subject` to follow one object.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StreamQuery {
    /// The tenant.
    pub tenant_id: TenantId,
    /// Only this subject's events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}
