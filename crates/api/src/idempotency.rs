//! `requestId` idempotency of creates (SPEC §2), the step the pipeline runs after
//! authorization and before the handler: a live record of the same request answers it
//! again, one of another body is `ALREADY_EXISTS`, and otherwise the key the handler's
//! create stores its answer under ([`crate::write`]). A create that is replayed at commit
//! (`MethodInput::REPLAY_AT_COMMIT`) skips the read: its commit finds the record, and
//! only when its handler fails is the record read, then.
//!
//! Invariant: the key is the tenant, the method and the caller's `requestId`, with the
//! hash of the body's canonical JSON beside it, so the same `requestId` of two tenants or
//! two methods never meet, and a repeat is recognised by its body, not by its id alone.

use bc_domain::rules::idempotency::{Replay, body_hash, replay, reused_error};
use bc_domain::{RequestId, TenantId};
use serde_json::Value;

use crate::ctx::Ctx;
use crate::error::ApiError;
use bc_api_types::MethodId;

/// The idempotency key of a create carrying a `requestId`, with the hash of its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idempotency {
    /// The tenant the call names.
    pub tenant: TenantId,
    /// The method, e.g. `pools.create`.
    pub method: MethodId,
    /// The caller's request id.
    pub request_id: RequestId,
    /// SHA-256 hex of the body's canonical JSON.
    pub body_hash: String,
}

/// What a create with a `requestId` does before its handler runs.
pub(crate) enum Before {
    /// No live record: run the handler, which stores its answer under this key.
    Run(Idempotency),
    /// The same request was answered already: its answer.
    Answered(Value),
}

/// Looks up a create's `requestId` (after authorization, before the handler): the stored
/// answer for the same body, `ALREADY_EXISTS` for another body, else the key to store
/// the answer under.
pub(crate) async fn before_create(
    ctx: &Ctx,
    tenant: TenantId,
    method: MethodId,
    request_id: RequestId,
    body: &Value,
) -> Result<Before, ApiError> {
    let key = at_commit(tenant, method, request_id, body);
    match recorded(ctx, &key).await? {
        Recorded::First(answer) => Ok(Before::Answered(answer)),
        Recorded::OtherBody(e) => Err(e),
        Recorded::Nothing => Ok(Before::Run(key)),
    }
}

/// What a live record of a create's key says of the call.
pub(crate) enum Recorded {
    /// The same body: the first call's answer.
    First(Value),
    /// Another body: the `ALREADY_EXISTS` to answer.
    OtherBody(ApiError),
    /// No live record.
    Nothing,
}

/// The key of a create's `requestId` (built here only: [`before_create`] reads under it).
/// A create whose repeat is recognised when it commits, not by a read before its handler
/// ([`crate::registry::MethodInput::REPLAY_AT_COMMIT`]), takes it as is: its answer is stored
/// under it, first in the unit of work, where a live record of the key makes the commit
/// answer as the first call did or refuse another body (the store's `PutIdempotency`).
pub(crate) fn at_commit(
    tenant: TenantId,
    method: MethodId,
    request_id: RequestId,
    body: &Value,
) -> Idempotency {
    Idempotency { tenant, method, request_id, body_hash: body_hash(body) }
}

/// What the live record of `key` says ([`Recorded`]); `Err` only when it cannot be read.
/// Read before the handler, or — for a create replayed at commit — after its handler
/// failed, so a repeat answers as the first call did even where the handler would now
/// refuse it (its pool archived since, say).
pub(crate) async fn recorded(ctx: &Ctx, key: &Idempotency) -> Result<Recorded, ApiError> {
    let now = ctx.now();
    let (method, request_id) = (key.method.to_string(), key.request_id.as_str());
    let record = ctx.store.idempotency_get(&key.tenant, &method, request_id, now).await?;
    Ok(match replay(record.as_ref(), &key.body_hash, now) {
        Replay::Repeat(answer) => Recorded::First(answer.clone()),
        Replay::Reused => Recorded::OtherBody(reused_error(&method, request_id).into()),
        Replay::Create => Recorded::Nothing,
    })
}
