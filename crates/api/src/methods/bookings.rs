//! `bookings.*` (SPEC §10): what drain upgrades wait for.

use bc_domain::model::{Booking, BookingState};
use bc_domain::ports::Permission;
use bc_domain::{BookingId, PoolId, RequestId, TenantId, Timestamp};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::examples as ex;
use super::{list_input, list_output, not_served, object_ref};
use crate::access::Target;
use crate::registry::{Kind, Method, MethodInput, Resource, ResourceType};

pub(crate) static BOOKINGS: Resource = Resource {
    name: "bookings",
    page: "bookings",
    module: "pools",
    description: "A booking holds a pool's capacity for a while, optionally on one node (`nodeName`). Drain upgrades wait for a pool's bookings to end before they ask the provider to upgrade its cluster. A booking is `active` until it is ended, or until its `endsAt` passes, when it counts as ended. While a drain upgrade waits on a pool, new bookings of that pool are refused with `FAILED_PRECONDITION` naming the upgrade.",
};

/// Most characters of a Kubernetes node name (a DNS subdomain).
const NODE_NAME_MAX: usize = 253;

/// The rule of Kubernetes node names.
// TODO(issue 7): move beside the bcd join types when they land in bc-domain.
pub(crate) const NODE_NAME_PATTERN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// Input of `bookings.create`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BookingsCreateInput {
    /// The pool's tenant.
    pub tenant_id: TenantId,
    /// The pool to book.
    pub pool_id: PoolId,
    /// The node the booking runs on, if one.
    #[serde(default)]
    #[schemars(length(max = NODE_NAME_MAX), regex(pattern = NODE_NAME_PATTERN))]
    pub node_name: Option<String>,
    /// When it ends by itself.
    #[serde(default)]
    pub ends_at: Option<Timestamp>,
    /// Idempotency key: a repeat within 24 h returns the first result.
    #[serde(default)]
    pub request_id: Option<RequestId>,
}

impl MethodInput for BookingsCreateInput {
    fn target(&self) -> Target {
        Target::Pool(self.tenant_id.clone(), self.pool_id.clone())
    }
    fn example() -> Value {
        json!({ "tenantId": ex::TENANT, "poolId": ex::POOL, "nodeName": "pool-gpu-1", "endsAt": "2026-12-02T18:00:00.000Z" })
    }
}

object_ref!(
    /// Input of `bookings.end`.
    BookingsEndInput, booking_id: BookingId, Booking, "bookingId" = ex::BOOKING
);

list_input!(
    /// Input of `bookings.list`.
    BookingsListInput {
        /// The pool.
        pool_id: PoolId,
        /// Only active or only ended bookings.
        #[serde(default)]
        state: Option<BookingState>,
    }
);

impl MethodInput for BookingsListInput {
    fn target(&self) -> Target {
        Target::Pool(self.tenant_id.clone(), self.pool_id.clone())
    }
    fn example() -> Value {
        json!({ "tenantId": ex::TENANT, "poolId": ex::POOL, "state": "active" })
    }
}

list_output!(
    /// Output of `bookings.list`.
    BookingsListOutput, bookings, Booking
);

pub(crate) fn methods() -> Vec<Method> {
    use Permission::{BookingsManage as Manage, BookingsRead as Read};
    vec![
        Method::declare::<BookingsCreateInput, Booking>(
            BOOKINGS.method("create", Kind::Write, Manage, ResourceType::Pool,
                "Books the pool and returns the booking, state active: on nodeName if given, and until endsAt (an RFC 3339 time) if given, else until it is ended. While a drain upgrade waits on the pool the call is FAILED_PRECONDITION naming the upgrade. A repeat with the same requestId and the same body within 24 hours returns the first booking and creates nothing; the same requestId with another body is ALREADY_EXISTS. Decided as compute:bookings:manage on the pool.",
            ),
            not_served,
        ),
        Method::declare::<BookingsEndInput, Booking>(
            BOOKINGS.method("end", Kind::Write, Manage, ResourceType::Pool,
                "Ends the booking and returns it, state ended, with endedAt. Ending an ended booking returns it unchanged. Decided as compute:bookings:manage on its pool.",
            ),
            not_served,
        ),
        Method::declare::<BookingsListInput, BookingsListOutput>(
            BOOKINGS.method("list", Kind::Read, Read, ResourceType::Pool,
                "Lists the pool's bookings, by id, pageSize at a time (1–500, default 100), with nextPageToken while more remain; with state, only the active or only the ended ones (a booking past its endsAt counts as ended). Decided as compute:bookings:read on the pool.",
            ),
            not_served,
        ),
    ]
}
