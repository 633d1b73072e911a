//! The `EventPublisher` port: where the outbox relay sends stored events (in-process
//! broadcast, NATS JetStream).
//!
//! Invariant: publishing the same event twice is harmless; the event id is the
//! deduplication key.

use async_trait::async_trait;

use crate::model::Event;

/// Why a publish failed; the relay retries later.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("publish failed: {0}")]
pub struct PublishError(pub String);

/// A sink for stored events.
#[async_trait]
pub trait EventPublisher: Send + Sync {
    /// Publishes one event; idempotent by `event.event_id`.
    async fn publish(&self, event: &Event) -> Result<(), PublishError>;
}
