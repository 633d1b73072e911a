//! How every write method records what it was asked: one unit of work (desired state,
//! outbox events, work-queue entries) committed at once, the in-process wake-ups poked
//! after it, and `requestId` idempotency (SPEC §2) for creates.
//!
//! Invariants: a write is one [`Ctx::commit`], so its desired state, events and work item
//! are seen together or not at all; the work wake-up is poked only after a commit that
//! enqueued work; a create with a `requestId` stores its answer in the same unit of work
//! as the object, so a repeat either finds that answer (and makes nothing) or the first
//! commit fails as a whole — there is no state in which the object exists without it.

use std::borrow::Cow;

use bc_domain::id::{Id, IdKind};
use bc_domain::model::IdempotencyRecord;
use bc_domain::ports::{Committed, UnitOfWork, Write};
use bc_domain::rules::idempotency::{Replay, body_hash, replay, reused_error};
use bc_domain::{RequestId, StoreError, TenantId, Timestamp};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::error::ApiError;
use crate::registry::{Call, MethodId};
use crate::service::Ctx;

/// A create's answer: the object made now, or the first answer to the same request
/// (SPEC §2: the same `requestId` and body within 24 hours makes nothing). Both serialize
/// as the object itself; the schema is the object's.
#[derive(Debug, Clone)]
pub enum Created<O> {
    /// Made by this call.
    Made(O),
    /// The answer a previous call with the same `requestId` and body got.
    Replayed(Value),
}

impl<O: Serialize> Serialize for Created<O> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Created::Made(o) => o.serialize(s),
            Created::Replayed(v) => v.serialize(s),
        }
    }
}

impl<O: JsonSchema> JsonSchema for Created<O> {
    fn inline_schema() -> bool {
        O::inline_schema()
    }
    fn schema_name() -> Cow<'static, str> {
        O::schema_name()
    }
    fn schema_id() -> Cow<'static, str> {
        O::schema_id()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        O::json_schema(generator)
    }
}

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

impl Ctx {
    /// The clock's time.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// A new id of kind `K`, later than every id this process made before.
    pub fn new_id<K: IdKind>(&self) -> Id<K> {
        self.ids.next(self.now())
    }

    /// Commits `uow` as one transaction, then pokes the work wake-up if it enqueued work
    /// and the events wake-up if it wrote events.
    pub async fn commit(&self, uow: UnitOfWork) -> Result<Committed, ApiError> {
        Ok(self.commit_store(uow).await?)
    }

    /// [`Ctx::commit`] with the store's own error.
    async fn commit_store(&self, uow: UnitOfWork) -> Result<Committed, StoreError> {
        let enqueued = !uow.enqueue.is_empty();
        let evented = !uow.events.is_empty();
        let committed = self.store.commit(uow).await?;
        if enqueued && let Some(n) = &self.work_notify {
            n.notify_waiters();
        }
        if evented && let Some(n) = &self.events_notify {
            n.notify_waiters();
        }
        Ok(committed)
    }

    /// Commits a create's unit of work with its answer `made`, storing the answer under
    /// the call's `requestId` in the same transaction when it has one. A concurrent
    /// request with the same `requestId` and body that committed first makes this one
    /// answer as that one did (and nothing of this one is written).
    pub async fn commit_create<I, O: Serialize>(
        &self,
        call: &Call<I>,
        uow: UnitOfWork,
        made: O,
    ) -> Result<Created<O>, ApiError> {
        let Some(key) = &call.idempotency else {
            self.commit(uow).await?;
            return Ok(Created::Made(made));
        };
        let response = serde_json::to_value(&made)
            .map_err(|e| ApiError::internal(format!("{}: the answer as JSON: {e}", key.method)))?;
        let record = IdempotencyRecord {
            tenant_id: key.tenant.clone(),
            method: key.method.to_string(),
            request_id: key.request_id.as_str().to_owned(),
            body_hash: key.body_hash.clone(),
            response,
            created_at: self.now(),
        };
        match self.commit_store(uow.write(Write::PutIdempotency(record))).await {
            Ok(_) => Ok(Created::Made(made)),
            // Only here is a replay an answer; anywhere else it is an error like any other.
            Err(StoreError::RequestReplayed(first)) => Ok(Created::Replayed(first.response)),
            Err(e) => Err(e.into()),
        }
    }
}
