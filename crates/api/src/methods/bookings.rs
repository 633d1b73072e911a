//! `bookings.*` (SPEC §10): what drain upgrades wait for.

use bc_domain::agent::{NODE_NAME_MAX, NODE_NAME_PATTERN};
use bc_domain::model::{Booking, BookingState, PoolState};
use bc_domain::ports::{Permission, UnitOfWork, WorkKind, Write};
use bc_domain::rules::drain::booking_state_at;
use bc_domain::{BookingId, PoolId, RequestId, TenantId, Timestamp};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::examples as ex;
use super::{list_input, list_output, object_ref};
use crate::access::Target;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::registry::{Call, Kind, Method, MethodInput, Resource, ResourceType};
use crate::write::Created;

pub(crate) static BOOKINGS: Resource = Resource {
    name: "bookings",
    page: "bookings",
    module: "pools",
    description: "A booking holds a pool's capacity for a while, optionally on one node (`nodeName`). Drain upgrades wait for a pool's bookings to end before they ask the provider to upgrade its cluster. A booking is `active` until it is ended, or until its `endsAt` passes, when it counts as ended. While a drain upgrade waits on a pool, new bookings of that pool are refused with `FAILED_PRECONDITION` naming the upgrade.",
};

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
        json!({ "tenantId": ex::TENANT, "poolId": ex::POOL, "nodeName": "pool-gpu-1", "endsAt": "2026-12-02T18:00:00.000Z", "requestId": "batch-7" })
    }
    fn request_id(&self) -> Option<&RequestId> {
        self.request_id.as_ref()
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
        Method::declare::<BookingsCreateInput, Created<Booking>>(
            BOOKINGS.method("create", Kind::Write, Manage, ResourceType::Pool,
                "Books the pool and returns the booking, state active: on nodeName if given, and until endsAt (an RFC 3339 time) if given, else until it is ended. While a drain upgrade waits on the pool the call is FAILED_PRECONDITION naming the upgrade. A repeat with the same requestId and the same body within 24 hours returns the first booking and creates nothing; the same requestId with another body is ALREADY_EXISTS. Decided as compute:bookings:manage on the pool.",
            ),
            create,
        ),
        Method::declare::<BookingsEndInput, Booking>(
            BOOKINGS.method("end", Kind::Write, Manage, ResourceType::Pool,
                "Ends the booking and returns it, state ended, with endedAt. Ending an ended booking returns it unchanged. Decided as compute:bookings:manage on its pool.",
            ),
            end,
        ),
        Method::declare::<BookingsListInput, BookingsListOutput>(
            BOOKINGS.method("list", Kind::Read, Read, ResourceType::Pool,
                "Lists the pool's bookings, by id, pageSize at a time (1–500, default 100), with nextPageToken while more remain; with state, only the active or only the ended ones (a booking past its endsAt counts as ended). Decided as compute:bookings:read on the pool.",
            ),
            list,
        ),
    ]
}

/// A booking as SPEC §10 shows it at `now`: `ended` once past its `endsAt`.
fn shown(booking: Booking, now: Timestamp) -> Booking {
    Booking { state: booking_state_at(&booking, now), ..booking }
}

async fn create(ctx: Ctx, call: Call<BookingsCreateInput>) -> Result<Created<Booking>, ApiError> {
    let input = &call.input;
    let pool = call.access.pool()?;
    if pool.state == PoolState::Archived {
        return Err(ApiError::failed_precondition(format!(
            "pool {} is archived: it takes no bookings",
            pool.pool_id
        )));
    }
    let now = ctx.now();
    if input.ends_at.is_some_and(|end| end <= now) {
        return Err(ApiError::invalid("endsAt", format!("must be after now ({now})")));
    }
    let booking = Booking {
        booking_id: ctx.new_id(),
        tenant_id: input.tenant_id.clone(),
        pool_id: pool.pool_id.clone(),
        node_name: input.node_name.clone(),
        state: BookingState::Active,
        created_at: now,
        ends_at: input.ends_at,
        ended_at: None,
    };
    // The store refuses it (FAILED_PRECONDITION naming the upgrade) while a drain waits
    // on the pool, in the inserting statement itself.
    let uow = UnitOfWork::new().write(Write::InsertBooking(booking.clone()));
    ctx.commit_create(&call, uow, booking).await
}

async fn end(ctx: Ctx, call: Call<BookingsEndInput>) -> Result<Booking, ApiError> {
    let booking = call.access.booking()?;
    let now = ctx.now();
    if booking.state == BookingState::Ended {
        return Ok(shown(booking.clone(), now));
    }
    let mut uow = UnitOfWork::new()
        .write(Write::EndBooking { booking_id: booking.booking_id.clone(), at: now });
    // A drain upgrade may be waiting for this booking to end.
    let pool = ctx.store.pool_get(&booking.tenant_id, &booking.pool_id).await?;
    if pool.is_some_and(|p| p.policy.substrate.is_some()) {
        uow = uow.enqueue(WorkKind::Substrates, booking.pool_id.as_str(), now);
    }
    ctx.commit(uow).await?;
    let ended = ctx.store.booking_get(&booking.tenant_id, &booking.booking_id).await?;
    let ended = ended.ok_or_else(|| {
        ApiError::internal(format!("booking {} vanished while ending", booking.booking_id))
    })?;
    Ok(shown(ended, now))
}

async fn list(ctx: Ctx, call: Call<BookingsListInput>) -> Result<BookingsListOutput, ApiError> {
    let input = &call.input;
    let page = input.page(call.method)?;
    let now = ctx.now();
    let bookings =
        ctx.store.booking_list(&input.tenant_id, &input.pool_id, input.state, now, &page).await?;
    Ok(BookingsListOutput::of(call.method, bookings, |b| shown(b, now)))
}
