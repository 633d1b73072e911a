//! `bookings.*` (SPEC §10): what drain upgrades wait for: the resource, its methods' wire
//! types and their endpoints. Invariant: optional input fields are left out when unset
//! and output fields are read back as the server writes them, so a type here round-trips
//! through the wire; what a method does is bc-api's.

use bc_domain::agent::{NODE_NAME_MAX, NODE_NAME_PATTERN};
use bc_domain::model::{Booking, BookingState};
use bc_domain::ports::Permission;
use bc_domain::{BookingId, PoolId, RequestId, TenantId, Timestamp};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::endpoint::{create_input, endpoint, list_input, list_output, object_ref};
use crate::meta::{Kind, Resource, ResourceType};
use Permission::{BookingsManage as Manage, BookingsRead as Read};

object_ref!(
    /// Input of `bookings.end`.
    BookingsEndInput, booking_id: BookingId
);

/// The resource.
pub static BOOKINGS: Resource = Resource {
    name: "bookings",
    page: "bookings",
    module: "pools",
    description: "A booking holds a pool's capacity for a while, optionally on one node (`nodeName`). Drain upgrades wait for a pool's bookings to end before they ask the provider to upgrade its cluster. A booking is `active` until it is ended, or until its `endsAt` passes, when it counts as ended. While a drain upgrade waits on a pool, new bookings of that pool are refused with `FAILED_PRECONDITION` naming the upgrade.",
};

/// Input of `bookings.create`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BookingsCreateInput {
    /// The pool's tenant.
    pub tenant_id: TenantId,
    /// The pool to book.
    pub pool_id: PoolId,
    /// The node the booking runs on, if one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = NODE_NAME_MAX), regex(pattern = NODE_NAME_PATTERN))]
    pub node_name: Option<String>,
    /// When it ends by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<Timestamp>,
    /// Idempotency key: a repeat within 24 h returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<RequestId>,
}

list_input!(
    /// Input of `bookings.list`.
    BookingsListInput {
        /// The pool.
        pool_id: PoolId,
        /// Only active or only ended bookings.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<BookingState>,
    }
);

list_output!(
    /// Output of `bookings.list`.
    BookingsListOutput, bookings, Booking
);

create_input!(BookingsCreateInput);

endpoint!(
    /// `bookings.create`.
    Create = BOOKINGS.method("create", Kind::Write, Manage, ResourceType::Pool,
        "Books the pool and returns the booking, state active: on nodeName if given, and until endsAt (an RFC 3339 time) if given, else until it is ended. While a drain upgrade waits on the pool the call is FAILED_PRECONDITION naming the upgrade. A repeat with the same requestId and the same body within 24 hours returns the first booking and creates nothing; the same requestId with another body is ALREADY_EXISTS. Decided as compute:bookings:manage on the pool.",
    );
    BookingsCreateInput => Booking
);

endpoint!(
    /// `bookings.end`.
    End = BOOKINGS.method("end", Kind::Write, Manage, ResourceType::Pool,
        "Ends the booking and returns it, state ended, with endedAt. Ending an ended booking returns it unchanged. Decided as compute:bookings:manage on its pool.",
    );
    BookingsEndInput => Booking
);

endpoint!(
    /// `bookings.list`.
    List = BOOKINGS.method("list", Kind::Read, Read, ResourceType::Pool,
        "Lists the pool's bookings, by id, pageSize at a time (1–500, default 100), with nextPageToken while more remain; with state, only the active or only the ended ones (a booking past its endsAt counts as ended). Decided as compute:bookings:read on the pool.",
    );
    BookingsListInput => BookingsListOutput
);
