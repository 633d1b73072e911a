//! bc-nats: the NATS JetStream adapter of the `EventPublisher` port (SPEC §12: with
//! `--nats-url`, events are also published to NATS JetStream). Each stored event is
//! published on its own subject (`compute.pools.<id>`, …) into one stream, its JSON as
//! the payload and its event id as the message id.
//!
//! Invariant: a publish succeeds only once JetStream acknowledged it (it is stored);
//! publishing the same event again within the stream's duplicate window is dropped by
//! the server (message id = event id), so the relay's at-least-once delivery lands once;
//! every wait is bounded by the configured timeout, so a server that is down fails the
//! publish (the relay retries later) instead of hanging it.

use std::time::Duration;

use async_nats::jetstream::{self, message::PublishMessage, stream};
use async_trait::async_trait;
use bc_domain::model::Event;
use bc_domain::ports::{EventPublisher, PublishError};

/// Where and how events are published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatsConfig {
    /// The server, e.g. `nats://127.0.0.1:4222`.
    pub url: String,
    /// The stream (created if missing).
    pub stream: String,
    /// The subjects it stores (every event subject must match one).
    pub subjects: Vec<String>,
    /// How long the server remembers message ids to drop re-publishes: longer than a
    /// relay can take to resume after a crash.
    pub duplicate_window: Duration,
    /// The bound on connecting and on each acknowledgement.
    pub timeout: Duration,
}

impl NatsConfig {
    /// The defaults at `url`: stream `COMPUTE_EVENTS` on `compute.>`, a 2-hour duplicate
    /// window, 5-second timeouts.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            stream: "COMPUTE_EVENTS".into(),
            subjects: vec!["compute.>".into()],
            duplicate_window: Duration::from_secs(2 * 3600),
            timeout: Duration::from_secs(5),
        }
    }
}

/// Publishes events into a JetStream stream.
#[derive(Clone)]
pub struct JetStreamPublisher {
    js: jetstream::Context,
    stream: String,
}

impl std::fmt::Debug for JetStreamPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JetStreamPublisher").field("stream", &self.stream).finish()
    }
}

fn failed(what: &str, e: impl std::fmt::Display) -> PublishError {
    PublishError(format!("{what}: {e}"))
}

impl JetStreamPublisher {
    /// Connects to `config.url` and makes sure the stream exists (creating it with
    /// `config`'s subjects and duplicate window when missing).
    pub async fn connect(config: &NatsConfig) -> Result<Self, PublishError> {
        let options = async_nats::ConnectOptions::new()
            .connection_timeout(config.timeout)
            .request_timeout(Some(config.timeout));
        let client = tokio::time::timeout(config.timeout, options.connect(config.url.as_str()))
            .await
            .map_err(|_| failed("connecting to NATS", "timed out"))?
            .map_err(|e| failed("connecting to NATS", e))?;
        let mut js = jetstream::new(client);
        js.set_timeout(config.timeout);
        js.get_or_create_stream(stream::Config {
            name: config.stream.clone(),
            subjects: config.subjects.clone(),
            duplicate_window: config.duplicate_window,
            ..Default::default()
        })
        .await
        .map_err(|e| failed(&format!("creating stream {}", config.stream), e))?;
        Ok(Self { js, stream: config.stream.clone() })
    }

    /// The JetStream context (for tests and tools that read the stream back).
    pub fn context(&self) -> &jetstream::Context {
        &self.js
    }
}

#[async_trait]
impl EventPublisher for JetStreamPublisher {
    async fn publish(&self, event: &Event) -> Result<(), PublishError> {
        let payload = serde_json::to_vec(event).map_err(|e| failed("encoding the event", e))?;
        let message =
            PublishMessage::build().message_id(event.event_id.as_str()).payload(payload.into());
        let ack = self
            .js
            .send_publish(event.subject.clone(), message)
            .await
            .map_err(|e| failed(&format!("publishing event {}", event.event_id), e))?;
        let ack = ack
            .await
            .map_err(|e| failed(&format!("acknowledgement of event {}", event.event_id), e))?;
        if ack.duplicate {
            tracing::debug!(event = %event.event_id, "NATS dropped a re-published event");
        }
        Ok(())
    }
}
