//! `requestId` idempotency of creates (SPEC §2), the step the pipeline runs after
//! authorization and before the handler: a live record of the same request answers it
//! again, one of another body is `ALREADY_EXISTS`, and otherwise the key the handler's
//! create stores its answer under ([`crate::write`]).
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
    let now = ctx.now();
    let hash = body_hash(body);
    let method_name = method.to_string();
    let record = ctx.store.idempotency_get(&tenant, &method_name, request_id.as_str(), now).await?;
    Ok(match replay(record.as_ref(), &hash, now) {
        Replay::Repeat(answer) => Before::Answered(answer.clone()),
        Replay::Reused => return Err(reused_error(&method_name, request_id.as_str()).into()),
        Replay::Create => Before::Run(Idempotency { tenant, method, request_id, body_hash: hash }),
    })
}
