//! The outbox relay on the real store: every event in `seq` order, at least once, from
//! each publisher's stored cursor (so a restart resumes there), by the one holder of the
//! relay lease; a failing publisher holds back only itself; a relay that lost its lease
//! moves no cursor. The in-process broadcast and its events notify; the idempotency
//! purge under its own lease.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bc_domain::model::{Event, IdempotencyRecord};
use bc_domain::ports::{
    Clock, EventPublisher, LEASE_OUTBOX_RELAY, Leases, LedgerRepo, ManualClock, PublishError,
    Store, UnitOfWork, Write,
};
use bc_reconcile::relay::{BroadcastPublisher, Relay, RelayConfig, purge_idempotency};
use bc_store::testing as fx;

use crate::common::Env;

/// The store and clock through which another replica takes the relay lease over.
type Takeover = (Arc<dyn Store>, Arc<ManualClock>);

/// Records what it was given; fails from the `fail_at`-th publish on, while set.
#[derive(Default)]
struct Recording {
    got: Mutex<Vec<u64>>,
    fail_at: Mutex<Option<usize>>,
    /// On the first publish, the lease runs out and replica `b` takes the relay over.
    takeover: Mutex<Option<Takeover>>,
}

impl Recording {
    fn seqs(&self) -> Vec<u64> {
        self.got.lock().unwrap().clone()
    }
}

#[async_trait]
impl EventPublisher for Recording {
    async fn publish(&self, event: &Event) -> Result<(), PublishError> {
        let takeover = self.takeover.lock().unwrap().take();
        if let Some((store, clock)) = takeover {
            clock.advance(time::Duration::seconds(31));
            let now = clock.now();
            let until = now + time::Duration::seconds(30);
            assert!(store.lease_acquire(LEASE_OUTBOX_RELAY, "b", now, until).await.unwrap());
        }
        let mut got = self.got.lock().unwrap();
        if self.fail_at.lock().unwrap().is_some_and(|n| got.len() >= n) {
            return Err(PublishError("the server is away".into()));
        }
        got.push(event.seq);
        Ok(())
    }
}

async fn write_events(store: &dyn Store, n: usize) -> Vec<u64> {
    let mut seqs = Vec::new();
    for _ in 0..n {
        let e = fx::event(&fx::tenant("acme"), "compute.pools.p");
        seqs.extend(store.commit(UnitOfWork::new().event(e)).await.unwrap().event_seqs);
    }
    seqs
}

fn relay(
    env: &Env,
    owner: &str,
    batch: u32,
    publishers: Vec<(&str, Arc<dyn EventPublisher>)>,
) -> Relay {
    let config = RelayConfig { batch, ..RelayConfig::new(owner) };
    let publishers = publishers.into_iter().map(|(n, p)| (n.to_owned(), p)).collect();
    Relay::new(env.store.clone(), env.clock.clone(), config, publishers)
}

#[tokio::test]
async fn events_go_out_in_order_from_the_stored_cursor_and_a_restart_resumes_there() {
    let env = Env::start().await;
    let first = write_events(env.store.as_ref(), 7).await;
    let publisher = Arc::new(Recording::default());
    // Batches of 3: the pass reads on until the outbox is drained.
    let pass = relay(&env, "r1", 3, vec![("nats", publisher.clone())]).pass().await.unwrap();
    assert_eq!((pass.held, pass.published.clone()), (true, vec![7]));
    assert_eq!(publisher.seqs(), first);
    assert_eq!(env.store.relay_cursor("nats").await.unwrap(), *first.last().unwrap());

    // A new process (a restart) with the same publisher name starts after the cursor.
    env.store.lease_release(LEASE_OUTBOX_RELAY, "r1").await.unwrap();
    let more = write_events(env.store.as_ref(), 2).await;
    let restarted = Arc::new(Recording::default());
    relay(&env, "r1-restarted", 3, vec![("nats", restarted.clone())]).pass().await.unwrap();
    assert_eq!(restarted.seqs(), more, "nothing old again, nothing new missed");
}

#[tokio::test]
async fn only_the_lease_holder_publishes() {
    let env = Env::start().await;
    write_events(env.store.as_ref(), 3).await;
    let (a, b) = (Arc::new(Recording::default()), Arc::new(Recording::default()));
    let relay_a = relay(&env, "a", 100, vec![("nats", a.clone())]);
    let relay_b = relay(&env, "b", 100, vec![("nats", b.clone())]);
    assert!(relay_a.pass().await.unwrap().held);
    write_events(env.store.as_ref(), 2).await;
    let pass_b = relay_b.pass().await.unwrap();
    assert!(!pass_b.held);
    assert!(b.seqs().is_empty(), "the other replica publishes nothing while a holds the lease");
    // a stops renewing; once its lease ran out, b takes over where a's cursor stands.
    env.advance(31);
    assert!(relay_b.pass().await.unwrap().held);
    assert_eq!(b.seqs().len(), 2);
    assert!(!relay_a.pass().await.unwrap().held, "a does not take it back while b holds it");
    assert_eq!(a.seqs().len(), 3);
}

#[tokio::test]
async fn a_failing_publisher_holds_back_only_itself() {
    let env = Env::start().await;
    let seqs = write_events(env.store.as_ref(), 5).await;
    let (nats, local) = (Arc::new(Recording::default()), Arc::new(Recording::default()));
    *nats.fail_at.lock().unwrap() = Some(2);
    let r = relay(&env, "r1", 100, vec![("nats", nats.clone()), ("local", local.clone())]);
    let pass = r.pass().await.unwrap();
    assert_eq!(pass.published, vec![2, 5]);
    assert_eq!(pass.failures.len(), 1);
    assert_eq!(env.store.relay_cursor("nats").await.unwrap(), seqs[1], "stops at the failed event");
    assert_eq!(env.store.relay_cursor("local").await.unwrap(), seqs[4]);
    // The server is back: it gets the rest, from the event that failed.
    *nats.fail_at.lock().unwrap() = None;
    r.pass().await.unwrap();
    assert_eq!(nats.seqs(), seqs);
    assert_eq!(local.seqs(), seqs);
}

#[tokio::test]
async fn a_relay_that_lost_its_lease_moves_no_cursor() {
    let env = Env::start().await;
    write_events(env.store.as_ref(), 3).await;
    let publisher = Arc::new(Recording::default());
    // While a publishes, its lease runs out and b takes the relay over.
    *publisher.takeover.lock().unwrap() = Some((env.store.clone(), env.clock.clone()));
    let pass = relay(&env, "a", 100, vec![("nats", publisher.clone())]).pass().await.unwrap();
    assert!(!pass.held, "the pass noticed the lease was lost");
    assert_eq!(publisher.seqs().len(), 3, "published (at least once)");
    assert_eq!(env.store.relay_cursor("nats").await.unwrap(), 0, "but moved no cursor");
}

#[tokio::test]
async fn the_in_process_broadcast_delivers_and_pokes_the_events_notify() {
    let env = Env::start().await;
    let notify = Arc::new(tokio::sync::Notify::new());
    let broadcast = Arc::new(BroadcastPublisher::new(16, notify.clone()));
    let mut rx = broadcast.subscribe();
    let woken = notify.notified();
    tokio::pin!(woken);
    woken.as_mut().enable();
    let seqs = write_events(env.store.as_ref(), 2).await;
    relay(&env, "r1", 100, vec![("local", broadcast)]).pass().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), woken).await.expect("the SSE streams were woken");
    assert_eq!(rx.recv().await.unwrap().seq, seqs[0]);
    assert_eq!(rx.recv().await.unwrap().seq, seqs[1]);
}

#[tokio::test]
async fn the_idempotency_purge_drops_expired_records_under_its_lease() {
    let env = Env::start().await;
    let record = |request_id: &str, created_at| IdempotencyRecord {
        tenant_id: fx::tenant("acme"),
        method: "loadBalancers.create".into(),
        request_id: request_id.into(),
        body_hash: "h".into(),
        response: serde_json::json!({}),
        created_at,
    };
    let now = env.now();
    let day = time::Duration::hours(24);
    for (id, at) in
        [("old", now - day - time::Duration::seconds(1)), ("edge", now - day), ("new", now)]
    {
        env.store
            .commit(UnitOfWork::new().write(Write::PutIdempotency(record(id, at))))
            .await
            .unwrap();
    }
    let lease = Duration::from_secs(60);
    assert_eq!(purge_idempotency(env.store.as_ref(), "a", now, lease).await.unwrap(), Some(2));
    assert_eq!(
        purge_idempotency(env.store.as_ref(), "b", now, lease).await.unwrap(),
        None,
        "a holds it"
    );
    let t = fx::tenant("acme");
    assert!(
        env.store.idempotency_get(&t, "loadBalancers.create", "new", now).await.unwrap().is_some()
    );
}
