//! How a create records what it was asked: its unit of work committed with its answer,
//! stored under the call's `requestId` in the same transaction when it has one (SPEC §2).
//!
//! Invariant: a create with a `requestId` stores its answer in the same unit of work as
//! the object, so a repeat either finds that answer (and makes nothing) or the first
//! commit fails as a whole — there is no state in which the object exists without it;
//! a concurrent twin that committed first is the store's `replayed` outcome, answered
//! with the twin's answer. The record is the unit of work's first write, so the twin is
//! recognised before a unique name it took refuses this one as `ALREADY_EXISTS`.

use std::borrow::Cow;

use bc_domain::model::IdempotencyRecord;
use bc_domain::ports::{UnitOfWork, Write};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::ctx::Ctx;
use crate::error::ApiError;
pub use crate::idempotency::Idempotency;
use crate::registry::{Answer, Call};

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

impl<O: Serialize + Send + 'static> Answer<O> for Created<O> {}

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

impl Ctx {
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
        // First in the unit of work: a twin that committed meanwhile is found by its
        // record, before this one's own writes fail on the names the twin took.
        let mut uow = uow;
        uow.writes.insert(0, Write::PutIdempotency(record));
        let committed = self.commit(uow).await?;
        Ok(match committed.replayed {
            Some(first) => Created::Replayed(first.response),
            None => Created::Made(made),
        })
    }
}
