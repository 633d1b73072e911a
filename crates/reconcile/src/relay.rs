//! The outbox relay and the other singleton jobs: the relay publishes every stored event,
//! in `seq` order, to each [`EventPublisher`] from that publisher's stored cursor; the
//! idempotency purge drops expired `requestId` records. Each runs on the one replica
//! that holds its singleton lease.
//!
//! Invariant: a publisher's cursor moves only past events it acknowledged, in a unit of
//! work fenced by the relay lease, so delivery is at least once and in order per
//! publisher, resumes exactly there after a restart or a takeover, and a relay that lost
//! the lease moves no cursor. A publisher that fails stops at the event it failed on
//! and holds back no other publisher.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bc_domain::model::Event;
use bc_domain::ports::{
    Clock, EventPublisher, Fence, LEASE_IDEMPOTENCY_PURGE, LEASE_OUTBOX_RELAY, PublishError, Store,
    UnitOfWork, Write,
};
use bc_domain::rules::idempotency;
use bc_domain::{StoreError, Timestamp};
use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;

use crate::runtime::schedule::later;

/// The in-process publisher: a broadcast channel for in-process subscribers, and a poke
/// of the "events notify" (contracts.md) that wakes the API's SSE streams, which then
/// read the outbox themselves.
#[derive(Debug, Clone)]
pub struct BroadcastPublisher {
    sender: broadcast::Sender<Event>,
    notify: Arc<Notify>,
}

impl BroadcastPublisher {
    /// A channel keeping `capacity` events for slow subscribers, poking `notify`.
    pub fn new(capacity: usize, notify: Arc<Notify>) -> Self {
        Self { sender: broadcast::channel(capacity.max(1)).0, notify }
    }

    /// A new subscription (events published from now on).
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.sender.subscribe()
    }
}

#[async_trait]
impl EventPublisher for BroadcastPublisher {
    async fn publish(&self, event: &Event) -> Result<(), PublishError> {
        // No subscriber is not a failure: the SSE streams read the store.
        let _ = self.sender.send(event.clone());
        self.notify.notify_waiters();
        Ok(())
    }
}

/// How the relay runs.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// This replica's lease owner name (unique per replica).
    pub owner: String,
    /// How long a pass may hold the relay lease before another replica may take over.
    pub lease: Duration,
    /// Events read per store query.
    pub batch: u32,
    /// How often to look for new events when nothing wakes the relay.
    pub poll: Duration,
}

impl RelayConfig {
    /// The defaults for replica `owner`: a 30 s lease, batches of 500, a 1 s poll.
    pub fn new(owner: impl Into<String>) -> Self {
        Self {
            owner: owner.into(),
            lease: Duration::from_secs(30),
            batch: 500,
            poll: Duration::from_secs(1),
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RelayPass {
    /// Whether this replica held the lease (else it did nothing).
    pub held: bool,
    /// Events acknowledged per publisher, in publisher order.
    pub published: Vec<u64>,
    /// Publishers that failed this pass, with the error.
    pub failures: Vec<(String, String)>,
}

/// The outbox relay.
pub struct Relay {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    config: RelayConfig,
    publishers: Vec<(String, Arc<dyn EventPublisher>)>,
}

impl Relay {
    /// A relay of `store`'s outbox to `publishers`, each named (its cursor's key, e.g.
    /// `nats`; keep names stable, or a publisher starts over from the first event).
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        config: RelayConfig,
        publishers: Vec<(String, Arc<dyn EventPublisher>)>,
    ) -> Self {
        Self { store, clock, config, publishers }
    }

    fn fence(&self) -> Fence {
        Fence::singleton(LEASE_OUTBOX_RELAY, &self.config.owner)
    }

    /// One pass: takes (or renews) the relay lease, then brings every publisher up to
    /// the newest event. Store errors end the pass; a lost lease ends it quietly.
    pub async fn pass(&self) -> Result<RelayPass, StoreError> {
        let now = self.clock.now();
        let until = later(now, self.config.lease);
        if !self.store.lease_acquire(LEASE_OUTBOX_RELAY, &self.config.owner, now, until).await? {
            return Ok(RelayPass::default());
        }
        let mut pass = RelayPass { held: true, ..RelayPass::default() };
        for (name, publisher) in &self.publishers {
            match self.drain(name, publisher.as_ref()).await {
                Ok((n, failure)) => {
                    pass.published.push(n);
                    if let Some(e) = failure {
                        tracing::warn!(publisher = %name, error = %e, "publishing events failed; retrying later");
                        pass.failures.push((name.clone(), e.to_string()));
                    }
                }
                Err(StoreError::LeaseLost(_)) => {
                    pass.held = false;
                    return Ok(pass);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(pass)
    }

    /// Publishes everything after `name`'s cursor, batch by batch; how many events were
    /// acknowledged, and the failure that stopped it, if any.
    async fn drain(
        &self,
        name: &str,
        publisher: &dyn EventPublisher,
    ) -> Result<(u64, Option<PublishError>), StoreError> {
        let mut cursor = self.store.relay_cursor(name).await?;
        let mut published = 0;
        loop {
            // Renewed per batch, so a long backlog does not outlive the lease.
            let now = self.clock.now();
            let (owner, until) = (&self.config.owner, later(now, self.config.lease));
            if !self.store.lease_acquire(LEASE_OUTBOX_RELAY, owner, now, until).await? {
                return Err(StoreError::LeaseLost(LEASE_OUTBOX_RELAY.into()));
            }
            let events = self.store.event_list_all(cursor, self.config.batch).await?;
            let mut last = cursor;
            let mut failure = None;
            for e in &events {
                match publisher.publish(e).await {
                    Ok(()) => {
                        last = e.seq;
                        published += 1;
                    }
                    Err(err) => {
                        failure = Some(err);
                        break;
                    }
                }
            }
            if last > cursor {
                let advance = Write::AdvanceRelayCursor { publisher: name.to_owned(), seq: last };
                self.store.commit(UnitOfWork::new().fenced(self.fence()).write(advance)).await?;
                cursor = last;
            }
            if failure.is_some() || events.len() < self.config.batch as usize {
                return Ok((published, failure));
            }
        }
    }

    /// Runs passes until `cancel` fires: after each, waits for `wake` (when given) or
    /// the poll period. On cancel it gives the lease up, so another replica takes over
    /// at once.
    pub async fn run(self, cancel: CancellationToken, wake: Option<Arc<Notify>>) {
        let wake = wake.unwrap_or_default();
        while !cancel.is_cancelled() {
            let woken = wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if let Err(e) = self.pass().await {
                tracing::warn!(error = %e, "outbox relay pass failed");
            }
            tokio::select! {
                () = &mut woken => {}
                () = tokio::time::sleep(self.config.poll) => {}
                () = cancel.cancelled() => {}
            }
        }
        let _ = self.store.lease_release(LEASE_OUTBOX_RELAY, &self.config.owner).await;
    }
}

/// One run of the idempotency purge, on the replica holding `LEASE_IDEMPOTENCY_PURGE`:
/// drops the `requestId` records expired at `now` (`rules::idempotency`). `None` when
/// another replica holds the lease.
pub async fn purge_idempotency(
    store: &dyn Store,
    owner: &str,
    now: Timestamp,
    lease: Duration,
) -> Result<Option<u64>, StoreError> {
    if !store.lease_acquire(LEASE_IDEMPOTENCY_PURGE, owner, now, later(now, lease)).await? {
        return Ok(None);
    }
    // Records created at or before the bound are expired; the purge drops those
    // strictly before its argument.
    let bound = idempotency::expired_at_or_before(now) + time::Duration::milliseconds(1);
    store.idempotency_purge(bound).await.map(Some)
}

/// Runs [`purge_idempotency`] every `period` until `cancel` fires.
pub async fn run_idempotency_purge(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    owner: String,
    period: Duration,
    cancel: CancellationToken,
) {
    while !cancel.is_cancelled() {
        match purge_idempotency(store.as_ref(), &owner, clock.now(), period * 2).await {
            Ok(Some(n)) if n > 0 => tracing::info!(purged = n, "expired requestId records purged"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "idempotency purge failed"),
        }
        tokio::select! {
            () = tokio::time::sleep(period) => {}
            () = cancel.cancelled() => {}
        }
    }
}
