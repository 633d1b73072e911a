//! The reconciler service a binary builds: all four kinds by default (or `only` some),
//! per-kind concurrency, the work notify waking the claim loops, the relay publishing
//! to the in-process broadcast and poking the events notify, and `run` returning only
//! after every lease it held is given back.

use std::sync::Arc;

use bc_domain::ports::{LEASE_OUTBOX_RELAY, Leases, Store, UnitOfWork, WorkKind, WorkQueue};
use bc_reconcile::{ReconcilerService, ReconcilerServiceBuilder, RuntimeConfig};
use bc_store::testing as fx;
use tokio::sync::Notify;

use crate::common::Env;
use crate::runtime::until;

fn builder(env: &Env) -> ReconcilerServiceBuilder {
    ReconcilerService::builder(
        env.store.clone(),
        env.registry(),
        env.deps.clusters.clone(),
        env.deps.settings.clone(),
    )
    .clock(env.clock.clone())
}

#[tokio::test]
async fn it_runs_every_kind_unless_told_only_some_with_their_concurrency() {
    let env = Env::start().await;
    let all = builder(&env).build().unwrap();
    assert_eq!(all.kinds(), WorkKind::ALL.to_vec());
    let some = builder(&env)
        .only([WorkKind::ProviderResources, WorkKind::Substrates])
        .concurrency(8)
        .concurrency_of(WorkKind::Substrates, 2)
        .replica("replica-7")
        .build()
        .unwrap();
    let mut kinds = some.kinds();
    kinds.sort();
    let mut want = vec![WorkKind::ProviderResources, WorkKind::Substrates];
    want.sort();
    assert_eq!(kinds, want);
    let config: &RuntimeConfig = some.runtime().config();
    assert_eq!(config.owner, "replica-7");
    assert_eq!(config.concurrency_of(WorkKind::ProviderResources), 8);
    assert_eq!(config.concurrency_of(WorkKind::Substrates), 2);
    // Two builds are two replicas unless told otherwise.
    assert_ne!(
        all.runtime().config().owner,
        builder(&env).build().unwrap().runtime().config().owner
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn it_reconciles_on_the_work_notify_relays_events_and_gives_its_leases_back() {
    let env = Env::start().await;
    let (work, events) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    // A poll so long that only the notify can wake the claim loops.
    let config = RuntimeConfig {
        poll: std::time::Duration::from_secs(3600),
        ..RuntimeConfig::new("replica-1")
    };
    let service = builder(&env)
        .runtime_config(config)
        .work_notify(work.clone())
        .events_notify(events.clone())
        .build()
        .unwrap();
    let mut subscribed = service.events().subscribe();
    let runtime = service.runtime().clone();
    let stop = Arc::new(Notify::new());
    let run = tokio::spawn({
        let stop = stop.clone();
        async move { service.run(async move { stop.notified().await }).await }
    });
    // An API write: desired state + work item (+ an event) in one unit of work, then
    // the work notify.
    let poked = events.notified();
    let lb = env.create_lb("web").await;
    let event = fx::event(&env.tenant, "compute.load-balancers.x");
    env.store.commit(UnitOfWork::new().event(event.clone())).await.unwrap();
    work.notify_waiters();
    until("the load balancer was reconciled", || async {
        runtime.status().kinds[&WorkKind::ProviderResources].activations > 0
    })
    .await;
    poked.await;
    let got = subscribed.recv().await.unwrap();
    assert_eq!(got.event_id, event.event_id);
    assert_eq!(env.creates(), 1);

    stop.notify_one();
    run.await.unwrap();
    // Returned: the relay lease is free for another replica at once, and no item is
    // held by this one.
    let now = env.now();
    let until_t = now + time::Duration::seconds(30);
    assert!(env.store.lease_acquire(LEASE_OUTBOX_RELAY, "replica-2", now, until_t).await.unwrap());
    let item = env.store.work_get(WorkKind::ProviderResources, lb.load_balancer_id.as_str());
    assert_ne!(item.await.unwrap().and_then(|i| i.lease_owner).as_deref(), Some("replica-1"));
}
