//! `bookings.*` (SPEC §10): what drain upgrades wait for.

use bc_api_types::bookings as api;
pub use bc_api_types::bookings::*;

use bc_domain::Timestamp;
use bc_domain::model::{Booking, BookingState, PoolState};
use bc_domain::ports::{UnitOfWork, WorkKind, Write};
use bc_domain::rules::drain::booking_state_at;
use serde_json::{Value, json};

use super::examples as ex;
use super::object_ref;
use crate::access::Target;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::page::AnswerPage;
use crate::page::AskedPage;
use crate::registry::{Call, Method, MethodInput};
use crate::write::Created;

impl MethodInput for BookingsCreateInput {
    fn target(&self) -> Target {
        Target::Pool(self.tenant_id.clone(), self.pool_id.clone())
    }
    fn example() -> Value {
        json!({ "tenantId": ex::TENANT, "poolId": ex::POOL, "nodeName": "pool-gpu-1", "endsAt": "2026-12-02T18:00:00.000Z", "requestId": "batch-7" })
    }
}

object_ref!(
    BookingsEndInput, booking_id: BookingId, Booking, "bookingId" = ex::BOOKING
);

impl MethodInput for BookingsListInput {
    fn target(&self) -> Target {
        Target::Pool(self.tenant_id.clone(), self.pool_id.clone())
    }
    fn example() -> Value {
        json!({ "tenantId": ex::TENANT, "poolId": ex::POOL, "state": "active" })
    }
}

pub(crate) fn methods() -> Vec<Method> {
    vec![
        Method::declare(api::Create, create),
        Method::declare(api::End, end),
        Method::declare(api::List, list),
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
    // No booking is filtered one by one (as node pools and the tenant-wide lists are):
    // a booking is no Cedar entity of its own (SPEC §3: `compute:bookings:read @ pool`),
    // so each booking's decision is its pool's, which this list was authorized on.
    let bookings =
        ctx.store.booking_list(&input.tenant_id, &input.pool_id, input.state, now, &page).await?;
    Ok(BookingsListOutput::of(call.method, bookings, |b| shown(b, now)))
}
