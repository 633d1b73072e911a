//! The NATS JetStream publisher against a real nats-server (the one `cargo xtask test`
//! starts; skipped without it unless services are required), driven by the real outbox
//! relay on the real store: the stream is made when missing, every event lands once with
//! its event id as message id, a relay restarted mid-way resumes from its stored cursor,
//! a re-publish of everything is dropped as duplicates, and a publisher whose stream is
//! gone holds its cursor until it is back.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bc_domain::Timestamp;
use bc_domain::model::Event;
use bc_domain::ports::{
    EventPublisher, LEASE_OUTBOX_RELAY, Leases, LedgerRepo, ManualClock, PublishError, Store,
    UnitOfWork,
};
use bc_nats::{JetStreamPublisher, NatsConfig};
use bc_reconcile::relay::{Relay, RelayConfig};
use bc_store::SqlStore;
use bc_store::testing as fx;

/// A stream of its own for each test, on a subject of its own (streams may not share
/// subjects), with the events written on that subject.
struct World {
    store: Arc<SqlStore>,
    clock: Arc<ManualClock>,
    config: NatsConfig,
    subject: String,
}

impl World {
    async fn start(url: String) -> World {
        let store = Arc::new(SqlStore::connect("sqlite::memory:").await.expect("store"));
        let clock =
            Arc::new(ManualClock::new(Timestamp::parse_rfc3339("2026-12-02T12:00:00Z").unwrap()));
        // Unique across test processes (nextest runs each test in its own).
        let unique = bc_testkit::fresh_database_name("events");
        // Outside `compute.>`: the production stream on it (which bc-stack's end-to-end
        // test makes on the same nats-server, and keeps) would overlap this one's subject,
        // and JetStream refuses a stream whose subjects overlap another's.
        let subject = format!("bctest.pools.{unique}");
        let name = unique.to_ascii_uppercase();
        let config =
            NatsConfig { stream: name, subjects: vec![subject.clone()], ..NatsConfig::new(url) };
        World { store, clock, config, subject }
    }

    async fn write_events(&self, n: usize) -> Vec<u64> {
        let mut seqs = Vec::new();
        for _ in 0..n {
            let e = fx::event(&fx::tenant("acme"), &self.subject);
            seqs.extend(self.store.commit(UnitOfWork::new().event(e)).await.unwrap().event_seqs);
        }
        seqs
    }

    fn relay(&self, owner: &str, batch: u32, publisher: Arc<dyn EventPublisher>) -> Relay {
        let config = RelayConfig { batch, ..RelayConfig::new(owner) };
        Relay::new(self.store.clone(), self.clock.clone(), config, vec![("nats".into(), publisher)])
    }

    /// The events in the stream, in stream order, with their message ids.
    async fn stream(&self, publisher: &JetStreamPublisher) -> Vec<(String, Event)> {
        let stream = publisher.context().get_stream(&self.config.stream).await.expect("stream");
        let mut out = Vec::new();
        for seq in 1.. {
            let Ok(m) = stream.get_raw_message(seq).await else { break };
            let id = m.headers.get("Nats-Msg-Id").map(|v| v.to_string()).unwrap_or_default();
            out.push((id, serde_json::from_slice(&m.payload).expect("an event")));
        }
        out
    }

    async fn cleanup(&self, publisher: &JetStreamPublisher) {
        let _ = publisher.context().delete_stream(&self.config.stream).await;
    }
}

/// Forwards `left` publishes, then fails every one (a process that died mid-way).
struct StopAfter {
    inner: Arc<JetStreamPublisher>,
    left: AtomicUsize,
}

#[async_trait::async_trait]
impl EventPublisher for StopAfter {
    async fn publish(&self, event: &Event) -> Result<(), PublishError> {
        if self.left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_err()
        {
            return Err(PublishError("the process died".into()));
        }
        self.inner.publish(event).await
    }
}

async fn connect(world: &World) -> JetStreamPublisher {
    tokio::time::timeout(Duration::from_secs(30), JetStreamPublisher::connect(&world.config))
        .await
        .expect("connect is bounded")
        .expect("connect")
}

#[tokio::test]
async fn every_event_lands_once_across_a_relay_restart_and_a_republish() {
    let Some(url) = bc_testkit::nats_url() else { return };
    let world = World::start(url).await;
    let seqs = world.write_events(7).await;
    // The stream does not exist yet: connecting makes it.
    let publisher = Arc::new(connect(&world).await);

    // A relay publishes three events and then its process dies (its publisher fails
    // from then on)…
    let dying = Arc::new(StopAfter { inner: publisher.clone(), left: AtomicUsize::new(3) });
    let pass = world.relay("r1", 2, dying).pass().await.unwrap();
    assert_eq!(pass.published, vec![3]);
    assert_eq!(world.store.relay_cursor("nats").await.unwrap(), seqs[2]);
    // …and another process resumes from the cursor once the lease ran out.
    world.clock.advance(time::Duration::seconds(31));
    let second_publisher = Arc::new(connect(&world).await);
    let pass = world.relay("r2", 3, second_publisher.clone()).pass().await.unwrap();
    assert_eq!((pass.held, pass.published.clone()), (true, vec![4]));
    let landed = world.stream(&publisher).await;
    assert_eq!(landed.iter().map(|(_, e)| e.seq).collect::<Vec<_>>(), seqs, "each once, in order");
    for (id, e) in &landed {
        assert_eq!(id, e.event_id.as_str(), "the message id is the event id");
    }

    // Everything published again (a relay that lost its cursor): JetStream drops every
    // one as a duplicate.
    world.store.lease_release(LEASE_OUTBOX_RELAY, "r2").await.unwrap();
    let again = Relay::new(
        world.store.clone(),
        world.clock.clone(),
        RelayConfig::new("r3"),
        vec![("nats-replay".into(), publisher.clone())],
    );
    assert_eq!(again.pass().await.unwrap().published, vec![7]);
    assert_eq!(world.stream(&publisher).await.len(), 7, "no duplicate in the stream");
    world.cleanup(&publisher).await;
}

#[tokio::test]
async fn a_publisher_whose_stream_is_gone_holds_its_cursor_until_it_is_back() {
    let Some(url) = bc_testkit::nats_url() else { return };
    let world = World::start(url).await;
    let seqs = world.write_events(2).await;
    let publisher = Arc::new(connect(&world).await);
    let relay = world.relay("r1", 100, publisher.clone());
    relay.pass().await.unwrap();
    assert_eq!(world.store.relay_cursor("nats").await.unwrap(), seqs[1]);

    // The stream disappears (an operator, a server without its storage): publishing
    // fails, the cursor stays.
    publisher.context().delete_stream(&world.config.stream).await.unwrap();
    let more = world.write_events(2).await;
    let pass = relay.pass().await.unwrap();
    assert_eq!((pass.published.clone(), pass.failures.len()), (vec![0], 1), "{pass:?}");
    assert_eq!(world.store.relay_cursor("nats").await.unwrap(), seqs[1]);

    // Reconnecting makes the stream again; the relay delivers what it held back.
    let back = Arc::new(connect(&world).await);
    world.relay("r1", 100, back.clone()).pass().await.unwrap();
    assert_eq!(world.store.relay_cursor("nats").await.unwrap(), more[1]);
    let landed = world.stream(&back).await;
    assert_eq!(landed.iter().map(|(_, e)| e.seq).collect::<Vec<_>>(), more);
    world.cleanup(&back).await;
}

#[tokio::test]
async fn an_unreachable_server_fails_within_the_timeout() {
    // A loopback port nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = NatsConfig {
        timeout: Duration::from_millis(500),
        ..NatsConfig::new(format!("nats://127.0.0.1:{port}"))
    };
    let e = tokio::time::timeout(Duration::from_secs(10), JetStreamPublisher::connect(&config))
        .await
        .expect("bounded by the configured timeout")
        .unwrap_err();
    assert!(e.0.contains("connecting to NATS"), "{e}");
}
