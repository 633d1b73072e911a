//! A load balancer change the provider turns away as "busy" (a second resize within the
//! minute DigitalOcean allows between resizes, research/digitalocean.md §5) waits at
//! the load balancer's own converging pace — the status says what it waits for — and is
//! sent again within one poll of the provider allowing it, not after a failure backoff
//! that doubled all through the wait (the SQLite load test's load balancer stuck at
//! `updating` for ~110 s).
//!
//! Invariant: the simulator through the DigitalOcean adapter, the real store, a stepped
//! clock; every bound is on that clock.

use std::sync::Arc;
use std::time::Duration;

use bc_domain::ResourceState;
use bc_domain::ports::{WorkKind, WorkQueue};
use bc_reconcile::LoadBalancers;
use bc_reconcile::provider_resources::plan::{Timing, events};
use bc_reconcile::runtime::ActivationResult;
use bc_reconcile::shared::OsEntropy;

use crate::common::Env;

const ROUNDS: usize = 400;

/// The dev stack's load balancer polling (seconds-scale, a look at most 5 s apart).
fn quick() -> Timing {
    Timing {
        poll_min: Duration::from_secs(1),
        poll_max: Duration::from_secs(5),
        ..Timing::default()
    }
}

#[tokio::test]
async fn a_resize_turned_away_as_too_soon_is_sent_again_within_a_poll_of_the_minute_ending() {
    let env = Env::start().await;
    let timing = quick();
    let poll_max = timing.poll_max;
    let lbs = Arc::new(LoadBalancers::new(timing, Arc::new(OsEntropy)));
    let runtime = env.runtime_of("r1", env.deps(), vec![lbs]);
    let id = env.create_lb("web").await.load_balancer_id;
    env.stepper(runtime.clone()).run_until_idle(ROUNDS).await.unwrap();

    // The first resize goes through at `resized`; the provider allows the next one a
    // minute later.
    env.advance(5);
    let resized = env.now();
    env.update_lb(&id, |s| s.size_unit = Some(2)).await;
    env.stepper(runtime.clone()).run_until_idle(ROUNDS).await.unwrap();
    assert_eq!(env.provider_lbs()[0].size_unit, 2);

    // The second, 5 s later, is turned away: the object waits (not an error, not a
    // failure counted against the item), and says so.
    env.clock.set(resized + time::Duration::seconds(5));
    env.update_lb(&id, |s| s.size_unit = Some(3)).await;
    let reports = env.stepper(runtime.clone()).round().await.unwrap();
    assert!(matches!(reports[0].result, ActivationResult::Converging { .. }), "{reports:?}");
    let row = env.lb(&id).await;
    assert_eq!(row.status.state, ResourceState::Updating);
    assert!(
        row.status.message.as_deref().is_some_and(|m| m.contains("earlier change")),
        "{:?}",
        row.status.message
    );
    let item = env.store.work_get(WorkKind::ProviderResources, id.as_str()).await.unwrap().unwrap();
    assert_eq!((item.attempts, item.last_error), (0, None), "a wait, not a failure");

    // Within one poll (and its jitter) of the minute ending, the resize is sent again
    // and lands.
    let slack = time::Duration::try_from(poll_max.mul_f64(1.1)).expect("a short wait");
    let bound = resized + time::Duration::minutes(1) + slack;
    env.stepper(runtime.clone()).run_until(bound, ROUNDS).await.unwrap();
    assert_eq!(env.provider_lbs()[0].size_unit, 3, "resized again by {bound}");

    env.stepper(runtime).run_until_idle(ROUNDS).await.unwrap();
    let row = env.lb(&id).await;
    assert_eq!(
        (row.status.state, row.status.observed_generation, row.status.message.as_deref()),
        (ResourceState::Ready, row.generation, None)
    );
    assert!(!env.event_types(&id).await.iter().any(|e| e == events::ERROR));
}
