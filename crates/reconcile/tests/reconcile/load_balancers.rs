//! Every path of `vps.provider-resources` for load balancers (SPEC §11) against the
//! simulator through the DigitalOcean adapter and the real SQLite store, on a stepped
//! clock: create to
//! ready with billing and events, updates converged whole, the busy answer retried, a
//! refusal held until the desired state changes, delete with billing closed and the
//! quota unit released once, a load balancer deleted behind our back made again only
//! after a GET confirms it, crash windows that never make a second object, a foreign
//! object of our name, global load balancers waiting for their targets.

use std::sync::Arc;
use std::time::Duration;

use bc_domain::ResourceState;
use bc_domain::model::{METER_LOAD_BALANCER_HOURS, Protocol};
use bc_domain::ports::{WorkKind, WorkQueue};
use bc_reconcile::provider_resources::plan::{self, events};
use bc_reconcile::runtime::ActivationResult;
use bc_sim::SimConfig;
use bc_sim::model::Fault;
use bc_sim::model::routes;
use bc_sim::testing::TEST_TOKEN;
use bc_store::SqlStore;

use crate::common::Env;

const ROUNDS: usize = 200;

#[tokio::test]
async fn create_to_ready_opens_billing_once_with_one_create_call() {
    let env = Env::start().await;
    let runtime = env.runtime("r1", env.deps());
    let lb = env.create_lb("web").await;
    let id = lb.load_balancer_id.clone();

    // The first activation creates at once (nothing was ever sent: no listing needed)
    // and records the provider id; the object is still `new`.
    let reports = env.stepper(runtime.clone()).round().await.unwrap();
    assert!(matches!(reports[0].result, ActivationResult::Converging { .. }), "{reports:?}");
    let row = env.lb(&id).await;
    assert_eq!(row.status.state, ResourceState::Provisioning);
    let provider_id = row.provider_load_balancer_id.clone().expect("provider id recorded");
    assert_eq!((env.creates(), env.total_calls()), (1, 1));

    env.stepper(runtime.clone()).run_until_idle(ROUNDS).await.unwrap();
    let row = env.lb(&id).await;
    assert_eq!(row.status.state, ResourceState::Ready);
    assert_eq!(row.status.observed_generation, row.generation);
    assert!(row.ip.is_some() && row.ready_at.is_some());
    // Made once, observed through the shared listing (no GET of the object).
    assert_eq!(env.creates(), 1);
    assert_eq!(env.calls("GET", routes::LOAD_BALANCER), 0);
    let provider = env.provider_lbs();
    assert_eq!(provider.len(), 1);
    assert_eq!((provider[0].id.as_str(), provider[0].name.as_str()), (provider_id.as_str(), "web"));
    assert!(provider[0].tags.contains(&plan::ownership_tag(&id)), "made with our tag");
    assert_eq!(env.event_types(&id).await, [events::READY]);
    let billing = env.billing().await;
    assert_eq!(billing.len(), 1);
    assert_eq!(
        (billing[0].meter.as_str(), billing[0].resource.as_str()),
        (METER_LOAD_BALANCER_HOURS, id.as_str())
    );
    assert_eq!((billing[0].start, billing[0].end), (row.ready_at.unwrap(), None));

    // The steady resync: one shared listing per resync, no provider write, nothing new.
    let before = env.total_calls();
    let end = env.now() + time::Duration::hours(1);
    env.stepper(runtime).run_until(end, ROUNDS).await.unwrap();
    let lists = env.total_calls() - before;
    assert!((1..=7).contains(&lists), "at most one listing per 10 minutes, got {lists}");
    assert_eq!(env.calls("GET", routes::LOAD_BALANCERS), lists + 1, "every call a listing");
    assert_eq!(env.creates(), 1);
    assert_eq!(env.event_types(&id).await, [events::READY]);
    assert_eq!(env.billing().await.len(), 1);
}

#[tokio::test]
async fn a_slow_provider_object_is_seen_ready_at_the_next_poll_not_the_next_resync() {
    // The provider takes 2 minutes to make it active, longer than the first looks wait:
    // the listing those looks share shows it `new`, and waiting writes nothing.
    let store = Arc::new(SqlStore::connect("sqlite::memory:").await.expect("store"));
    let mut config = SimConfig::default();
    config.delays.load_balancer_provision = Duration::from_secs(120);
    let env = Env::on(store, config).await;
    let runtime = env.runtime("r1", env.deps());
    let id = env.create_lb("web").await.load_balancer_id;
    let created = env.now();
    env.stepper(runtime).run_until_idle(ROUNDS).await.unwrap();
    let row = env.lb(&id).await;
    assert_eq!(row.status.state, ResourceState::Ready);
    // Each look needs a listing newer than the look before, so one of the looks at most
    // `poll_max` (60 s, +10 % jitter) apart after the object turned active sees it — not
    // the steady listing age (10 minutes) later. Stepped clock: no wall time is measured.
    let ready_at = row.ready_at.expect("ready_at");
    let bound = created + time::Duration::seconds(120 + 2 * 66);
    assert!(
        ready_at <= bound,
        "ready at {ready_at}, created at {created}: a stale listing answered the looks"
    );
    assert_eq!(env.creates(), 1);
}

#[tokio::test]
async fn a_second_resize_within_a_minute_is_retried_not_an_error() {
    let env = Env::start().await;
    let runtime = env.runtime("r1", env.deps());
    let id = env.create_lb("web").await.load_balancer_id;
    env.stepper(runtime.clone()).run_until_idle(ROUNDS).await.unwrap();
    env.advance(5);
    env.update_lb(&id, |s| s.size_unit = Some(2)).await;
    env.stepper(runtime.clone()).run_until_idle(ROUNDS).await.unwrap();
    assert_eq!(env.provider_lbs()[0].size_unit, 2);
    // The provider resizes at most once a minute: the second resize is refused as too
    // soon, which a later PUT fixes — not the tenant's error to correct.
    env.advance(5);
    env.update_lb(&id, |s| s.size_unit = Some(3)).await;
    env.stepper(runtime).run_until_idle(ROUNDS).await.unwrap();
    let row = env.lb(&id).await;
    assert_eq!(
        (row.status.state, row.status.observed_generation),
        (ResourceState::Ready, row.generation),
        "{:?}",
        row.status.message
    );
    assert_eq!(env.provider_lbs()[0].size_unit, 3);
    assert!(!env.event_types(&id).await.iter().any(|e| e == events::ERROR));
}

#[tokio::test]
async fn an_update_is_sent_whole_and_converges_back_to_ready() {
    let env = Env::start().await;
    let runtime = env.runtime("r1", env.deps());
    let id = env.create_lb("web").await.load_balancer_id;
    env.stepper(runtime.clone()).run_until_idle(ROUNDS).await.unwrap();
    let generation = env.lb(&id).await.generation;

    env.advance(5);
    env.update_lb(&id, |s| {
        s.forwarding_rules[0].target_port = 9090;
        s.redirect_http_to_https = true;
    })
    .await;
    let reports = env.stepper(runtime.clone()).round().await.unwrap();
    assert!(matches!(reports[0].result, ActivationResult::Converging { .. }), "{reports:?}");
    let row = env.lb(&id).await;
    assert_eq!((row.status.state, row.generation), (ResourceState::Updating, generation + 1));
    assert_eq!(env.calls("PUT", routes::LOAD_BALANCER), 1);
    // The whole object went: the fields not changed are still what was asked.
    let p = &env.provider_lbs()[0];
    assert_eq!(p.forwarding_rules[0].target_port, 9090);
    assert!(p.redirect_http_to_https);
    assert_eq!(p.droplet_ids.len() + usize::from(!p.tag.is_empty()), 1, "targets kept");
    assert_eq!(p.health_check.path, "/");

    env.stepper(runtime).run_until_idle(ROUNDS).await.unwrap();
    let row = env.lb(&id).await;
    assert_eq!(
        (row.status.state, row.status.observed_generation),
        (ResourceState::Ready, generation + 1)
    );
    assert_eq!(env.calls("PUT", routes::LOAD_BALANCER), 1, "converged: no second update");
    assert_eq!(env.event_types(&id).await, [events::READY, events::READY]);
    assert_eq!(env.billing().await.len(), 1, "billing opened once");
}

/// Found by the kill test (bins/reconciler/tests/kills.rs): a second change while the
/// first is still applying. The second PUT's "applying the change" status read the same
/// as the first's, so it was not written; the listing cached after the first PUT (and
/// before the second) then stayed "newer than the last write" for ever, showed the old
/// object, and the reconciler sent the same PUT again every poll without ever converging.
#[tokio::test]
async fn a_second_change_while_the_first_applies_converges_with_one_put_each() {
    let env = Env::start().await;
    let runtime = env.runtime("r1", env.deps());
    let id = env.create_lb("web").await.load_balancer_id;
    env.stepper(runtime.clone()).run_until_idle(ROUNDS).await.unwrap();
    let generation = env.lb(&id).await.generation;

    env.advance(5);
    env.update_lb(&id, |s| s.forwarding_rules[0].target_port = 9090).await;
    env.stepper(runtime.clone()).round().await.unwrap();
    assert_eq!(env.calls("PUT", routes::LOAD_BALANCER), 1);
    // The first change is applying; the tenant changes it again.
    env.update_lb(&id, |s| s.forwarding_rules[0].target_port = 9191).await;
    env.advance(2);
    env.stepper(runtime.clone()).round().await.unwrap();
    assert_eq!(env.calls("PUT", routes::LOAD_BALANCER), 2, "the second change sent");

    let _ = env.stepper(runtime).run_until_idle(ROUNDS).await;
    let row = env.lb(&id).await;
    assert_eq!(env.provider_lbs()[0].forwarding_rules[0].target_port, 9191);
    assert_eq!(
        (row.status.state, row.status.observed_generation),
        (ResourceState::Ready, generation + 2),
        "{:?}",
        row.status
    );
    assert_eq!(env.calls("PUT", routes::LOAD_BALANCER), 2, "one PUT per change, no more");
}

#[tokio::test]
async fn the_busy_answer_is_retried_never_shown_as_a_refusal() {
    let env = Env::start().await;
    let runtime = env.runtime("r1", env.deps());
    let id = env.create_lb("web").await.load_balancer_id;
    env.stepper(runtime.clone()).run_until_idle(ROUNDS).await.unwrap();

    // Someone else changes it at the provider; while that change applies, the provider
    // answers every PUT with its 403 "busy". Then the tenant changes it too.
    let provider_id = env.lb(&id).await.provider_load_balancer_id.unwrap();
    env.advance(1);
    {
        let now = env.now();
        let mut m = env.sim.state().model();
        let spec = bc_sim::model::LoadBalancerSpec {
            name: Some("web".into()),
            region: Some(serde_json::json!("nyc1")),
            forwarding_rules: Some(vec![bc_sim::model::ForwardingRule {
                entry_protocol: "http".into(),
                entry_port: 80,
                target_protocol: "http".into(),
                target_port: 8080,
                certificate_id: String::new(),
                tls_passthrough: false,
            }]),
            tag: Some("web".into()),
            ..Default::default()
        };
        m.update_load_balancer(TEST_TOKEN, &provider_id, spec, now).expect("console change");
    }
    env.update_lb(&id, |s| s.forwarding_rules[0].entry_protocol = Protocol::Https).await;
    // A wait at the object's poll pace, saying so — not a failure backing off.
    let reports = env.stepper(runtime.clone()).round().await.unwrap();
    assert!(matches!(reports[0].result, ActivationResult::Converging { .. }), "{reports:?}");
    let row = env.lb(&id).await;
    assert_ne!(row.status.state, ResourceState::Error, "busy is not a refusal");
    assert_eq!(row.status.message.as_deref(), Some(plan::BUSY));
    let item = env.store.work_get(WorkKind::ProviderResources, id.as_str()).await.unwrap().unwrap();
    assert_eq!((item.attempts, item.last_error), (0, None));

    env.stepper(runtime).run_until_idle(ROUNDS).await.unwrap();
    let row = env.lb(&id).await;
    assert_eq!(row.status.state, ResourceState::Ready);
    assert_eq!(env.provider_lbs()[0].forwarding_rules[0].entry_protocol, "https");
    let item = env.store.work_get(WorkKind::ProviderResources, id.as_str()).await.unwrap().unwrap();
    assert_eq!((item.attempts, item.last_error), (0, None));
}

#[tokio::test]
async fn a_refusal_is_an_error_not_retried_until_the_desired_state_changes() {
    let env = Env::start().await;
    let runtime = env.runtime("r1", env.deps());
    let key = routes::key("POST", routes::LOAD_BALANCERS);
    env.sim.state().model().refuse(&key, "region nyc1 is out of load balancer capacity");
    let id = env.create_lb("web").await.load_balancer_id;
    env.stepper(runtime.clone()).run_until_idle(ROUNDS).await.unwrap();
    let row = env.lb(&id).await;
    assert_eq!(row.status.state, ResourceState::Error);
    let message = row.status.message.clone().unwrap();
    assert!(message.contains("out of load balancer capacity"), "{message}");
    assert_eq!(env.creates(), 1);
    assert_eq!(env.event_types(&id).await, [events::ERROR]);

    // Hours of resyncs: no second create, no new event; the cause going away at the
    // provider changes nothing by itself (the refusal was for this desired state).
    env.sim.state().model().clear_refusal(&key);
    let end = env.now() + time::Duration::hours(2);
    env.stepper(runtime.clone()).run_until(end, ROUNDS).await.unwrap();
    assert_eq!(env.creates(), 1);
    assert_eq!(env.lb(&id).await.status.state, ResourceState::Error);
    assert_eq!(env.event_types(&id).await, [events::ERROR]);
    assert!(env.billing().await.is_empty());

    // The tenant changes it: tried again, and it converges.
    env.update_lb(&id, |s| s.size_unit = Some(2)).await;
    env.stepper(runtime).run_until_idle(ROUNDS).await.unwrap();
    assert_eq!(env.lb(&id).await.status.state, ResourceState::Ready);
    assert_eq!(env.creates(), 2);
    assert_eq!(env.provider_lbs().len(), 1);
    assert_eq!(env.event_types(&id).await, [events::ERROR, events::READY]);
}

#[tokio::test]
async fn delete_closes_billing_and_releases_the_quota_unit_exactly_once() {
    let env = Env::start().await;
    let runtime = env.runtime("r1", env.deps());
    let id = env.create_lb("web").await.load_balancer_id;
    let other = env.create_lb("api").await.load_balancer_id;
    env.stepper(runtime.clone()).run_until_idle(ROUNDS).await.unwrap();
    assert_eq!(env.quota_used().await, 2);

    env.advance(3600);
    env.delete_lb(&id).await;
    let reports = env.stepper(runtime.clone()).run_until_idle(ROUNDS).await.unwrap();
    assert!(reports.iter().any(|r| r.result == ActivationResult::Gone), "{reports:?}");
    let row = env.lb(&id).await;
    assert_eq!(row.status.state, ResourceState::Deleted);
    let deleted_at = row.deleted_at.expect("deleted_at");
    assert!(row.quota_released);
    assert_eq!(env.quota_used().await, 1, "one unit back, the other still booked");
    assert_eq!(env.provider_lbs().iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["api"]);
    assert_eq!(env.event_types(&id).await, [events::READY, events::DELETED]);
    let closed: Vec<_> =
        env.billing().await.into_iter().filter(|b| b.resource == id.as_str()).collect();
    assert_eq!(closed.len(), 1);
    assert_eq!(closed[0].end, Some(deleted_at));
    assert!(env.store.work_get(WorkKind::ProviderResources, id.as_str()).await.unwrap().is_none());

    // Deleting again, or a stray work item for it, changes nothing: no call, no second
    // release, no second event.
    let before = env.total_calls();
    env.store
        .enqueue(bc_domain::ports::Enqueue {
            kind: WorkKind::ProviderResources,
            key: id.to_string(),
            not_before: env.now(),
        })
        .await
        .unwrap();
    env.stepper(runtime.clone()).run_until_idle(ROUNDS).await.unwrap();
    assert_eq!(env.total_calls(), before);
    assert_eq!(env.quota_used().await, 1);
    assert_eq!(env.event_types(&id).await, [events::READY, events::DELETED]);
    assert_eq!(env.lb(&other).await.status.state, ResourceState::Ready);
}

#[tokio::test]
async fn a_load_balancer_never_made_is_deleted_without_a_call() {
    let env = Env::start().await;
    let runtime = env.runtime("r1", env.deps());
    let id = env.create_lb("web").await.load_balancer_id;
    env.delete_lb(&id).await;
    env.stepper(runtime).run_until_idle(ROUNDS).await.unwrap();
    assert_eq!(env.total_calls(), 0);
    assert_eq!(env.lb(&id).await.status.state, ResourceState::Deleted);
    assert_eq!(env.quota_used().await, 0);
    assert!(env.billing().await.is_empty(), "never ready, never billed");
    assert_eq!(env.event_types(&id).await, [events::DELETED]);
}

#[tokio::test]
async fn deleted_behind_our_back_it_is_made_again_after_a_get_confirms_it() {
    let env = Env::start().await;
    let runtime = env.runtime("r1", env.deps());
    let id = env.create_lb("web").await.load_balancer_id;
    env.stepper(runtime.clone()).run_until_idle(ROUNDS).await.unwrap();
    let old = env.lb(&id).await.provider_load_balancer_id.unwrap();
    assert!(env.sim.state().model().delete_load_balancer_behind_back(&old));

    // The next resync's listing misses it; a GET confirms; it is made again.
    env.stepper(runtime.clone())
        .run_until(env.now() + time::Duration::minutes(25), ROUNDS)
        .await
        .unwrap();
    env.stepper(runtime).run_until_idle(ROUNDS).await.unwrap();
    assert_eq!(env.calls("GET", routes::LOAD_BALANCER), 1, "one GET confirmed the absence");
    assert_eq!(env.creates(), 2);
    let row = env.lb(&id).await;
    assert_eq!(row.status.state, ResourceState::Ready);
    let new = row.provider_load_balancer_id.unwrap();
    assert_ne!(new, old);
    assert_eq!(env.provider_lbs().iter().map(|p| p.id.clone()).collect::<Vec<_>>(), [new]);
    assert_eq!(env.event_types(&id).await, [events::READY, events::RECREATED, events::READY]);
    assert_eq!(env.billing().await.len(), 1, "still the one interval from the first ready");
}

/// A re-create is guarded like a first create: its answer is lost and, for 20 s,
/// listings do not show what it made; the next look waits for a listing surely taken
/// after the create, finds the new object by its tag, and makes nothing more — one
/// re-create, one `recreated` event.
#[tokio::test]
async fn a_re_create_whose_answer_was_lost_is_made_once_with_one_event() {
    let env = Env::start().await;
    let runtime = env.runtime("r1", env.deps());
    let id = env.create_lb("web").await.load_balancer_id;
    env.stepper(runtime.clone()).run_until_idle(ROUNDS).await.unwrap();
    let old = env.lb(&id).await.provider_load_balancer_id.unwrap();
    assert!(env.sim.state().model().delete_load_balancer_behind_back(&old));
    {
        let mut m = env.sim.state().model();
        m.lose_answers(&routes::key("POST", routes::LOAD_BALANCERS), 1);
        m.set_list_lag(Some(std::time::Duration::from_secs(20)));
    }
    env.stepper(runtime.clone())
        .run_until(env.now() + time::Duration::minutes(25), ROUNDS)
        .await
        .unwrap();
    env.sim.state().model().set_list_lag(None);
    env.stepper(runtime).run_until_idle(ROUNDS).await.unwrap();
    assert_eq!(env.creates(), 2, "made again once");
    assert_eq!(env.provider_lbs().len(), 1, "never made twice");
    let row = env.lb(&id).await;
    assert_eq!(row.status.state, ResourceState::Ready, "{row:?}");
    assert_eq!(env.event_types(&id).await, [events::READY, events::RECREATED, events::READY]);
}

#[tokio::test]
async fn missing_from_a_lagging_listing_is_not_proof_of_deletion() {
    let env = Env::start().await;
    let runtime = env.runtime("r1", env.deps());
    let id = env.create_lb("web").await.load_balancer_id;
    env.stepper(runtime.clone()).round().await.unwrap();
    // Lists leave new objects out for an hour (eventual consistency).
    env.sim.state().model().set_list_lag(Some(std::time::Duration::from_secs(3600)));
    env.stepper(runtime).run_until_idle(ROUNDS).await.unwrap();
    assert_eq!(env.creates(), 1, "never made twice");
    assert!(env.calls("GET", routes::LOAD_BALANCER) >= 1, "the absence was checked with a GET");
    assert_eq!(env.lb(&id).await.status.state, ResourceState::Ready);
    assert_eq!(env.event_types(&id).await, [events::READY]);
}

#[tokio::test]
async fn a_create_whose_answer_was_lost_is_found_by_its_tag_not_made_twice() {
    let env = Env::start().await;
    let runtime = env.runtime("r1", env.deps());
    let id = env.create_lb("web").await.load_balancer_id;
    // The create lands at the provider but its answer is lost: a 500 after the fact is
    // what a timeout looks like to the caller. (The simulator's fault would stop the
    // create, so make the object as the provider would and fail the call.)
    let intent_recorded = {
        env.sim.state().model().inject_failures(
            &routes::key("POST", routes::LOAD_BALANCERS),
            1,
            Fault::ServerError,
        );
        let reports = env.stepper(runtime.clone()).round().await.unwrap();
        assert!(matches!(reports[0].result, ActivationResult::Failed { .. }), "{reports:?}");
        env.lb(&id).await
    };
    assert_eq!(intent_recorded.status.state, ResourceState::Provisioning, "intent recorded first");
    assert!(intent_recorded.provider_load_balancer_id.is_none());
    let request = plan::desired_request(
        &id,
        "web",
        &intent_recorded.spec,
        bc_domain::ports::ProviderTargets::Tag("web".into()),
    );
    let made = env
        .provider()
        .load_balancers()
        .create(&request)
        .await
        .expect("made behind the lost answer");

    env.stepper(runtime).run_until_idle(ROUNDS).await.unwrap();
    let row = env.lb(&id).await;
    assert_eq!(row.status.state, ResourceState::Ready);
    assert_eq!(row.provider_load_balancer_id.as_deref(), Some(made.id.as_str()), "adopted by tag");
    assert_eq!(env.provider_lbs().len(), 1, "no second object");
    assert_eq!(env.creates(), 2, "the failed attempt and the one that landed; none after");
}

#[tokio::test]
async fn a_create_in_flight_is_not_judged_absent_by_a_listing_taken_meanwhile() {
    let env = Env::start().await;
    let runtime = env.runtime("r1", env.deps());
    let id = env.create_lb("web").await.load_balancer_id;
    // The create's answer is lost, and for 20 s listings do not show what it made: a
    // listing taken while a create is still in flight at the provider looks the same.
    {
        let mut m = env.sim.state().model();
        m.lose_answers(&routes::key("POST", routes::LOAD_BALANCERS), 1);
        m.set_list_lag(Some(Duration::from_secs(20)));
    }
    env.stepper(runtime).run_until_idle(ROUNDS).await.unwrap();
    env.sim.state().model().set_list_lag(None);
    assert_eq!(env.provider_lbs().len(), 1, "never made twice");
    assert_eq!(env.creates(), 1);
    let row = env.lb(&id).await;
    assert_eq!(row.status.state, ResourceState::Ready, "{row:?}");
    assert_eq!(row.provider_load_balancer_id, Some(env.provider_lbs()[0].id.clone()));
}

/// Like the other reconcilers, the load balancer reconciler draws its randomness (event
/// ids) from the injected entropy: the same run with the same entropy writes the same
/// events, so a replayed scenario is repeatable.
#[tokio::test]
async fn the_same_run_with_the_same_entropy_writes_the_same_events() {
    async fn run() -> Vec<(bc_domain::EventId, bc_domain::Timestamp)> {
        let env = Env::start().await;
        let entropy = Arc::new(bc_reconcile::testing::SeqEntropy::stream(7));
        let lbs = bc_reconcile::reconciler_of(WorkKind::ProviderResources, entropy);
        // A fixed jitter seed, so both runs step the same times.
        let config = bc_reconcile::RuntimeConfig::new("r1");
        let runtime = Arc::new(bc_reconcile::Runtime::new(env.deps(), vec![lbs], config).unwrap());
        let id = env.create_lb("web").await.load_balancer_id;
        env.stepper(runtime.clone()).run_until_idle(ROUNDS).await.unwrap();
        env.delete_lb(&id).await;
        env.stepper(runtime).run_until_idle(ROUNDS).await.unwrap();
        let events = env.events().await.into_iter().filter(|e| e.kind.starts_with("vps."));
        events.map(|e| (e.event_id, e.time)).collect()
    }
    let (a, b) = (run().await, run().await);
    assert_eq!(a.len(), 2, "ready and deleted: {a:?}");
    assert_eq!(a, b);
}

#[tokio::test]
async fn a_foreign_load_balancer_of_our_name_is_never_adopted() {
    let env = Env::start().await;
    let runtime = env.runtime("r1", env.deps());
    // The tenant made "web" at the console, without our tag.
    let theirs =
        env.provider().load_balancers().create(&bc_sim::testing::lb_request("web")).await.unwrap();
    let id = env.create_lb("web").await.load_balancer_id;
    // Our first create is refused (the name is taken); the listing then names theirs.
    env.stepper(runtime.clone()).run_until_idle(ROUNDS).await.unwrap();
    env.stepper(runtime.clone())
        .run_until(env.now() + time::Duration::minutes(25), ROUNDS)
        .await
        .unwrap();
    let row = env.lb(&id).await;
    assert_eq!(row.status.state, ResourceState::Error);
    assert!(row.provider_load_balancer_id.is_none(), "not adopted");
    let message = row.status.message.unwrap();
    assert!(
        message.contains(&theirs.id) && message.contains("not made by this system"),
        "{message}"
    );
    assert_eq!(
        env.calls("PUT", routes::LOAD_BALANCER) + env.calls("DELETE", routes::LOAD_BALANCER),
        0,
        "theirs untouched"
    );

    // The tenant removes theirs: within two resyncs ours is made.
    assert!(env.sim.state().model().delete_load_balancer_behind_back(&theirs.id));
    env.stepper(runtime.clone())
        .run_until(env.now() + time::Duration::minutes(25), ROUNDS)
        .await
        .unwrap();
    env.stepper(runtime).run_until_idle(ROUNDS).await.unwrap();
    assert_eq!(env.lb(&id).await.status.state, ResourceState::Ready);
    assert_eq!(env.provider_lbs().len(), 1);
}

#[tokio::test]
async fn a_global_load_balancer_waits_for_its_regional_targets() {
    let env = Env::start().await;
    let runtime = env.runtime("r1", env.deps());
    let regional = env.create_lb("eu").await.load_balancer_id;
    let mut spec = bc_store::testing::lb_spec();
    spec.kind = bc_domain::model::LoadBalancerType::Global;
    spec.region = None;
    spec.forwarding_rules.clear();
    spec.size_unit = None;
    spec.targets = bc_domain::model::Targets {
        tag: None,
        droplet_ids: None,
        load_balancer_ids: Some(vec![regional.clone()]),
    };
    spec.global_settings = Some(bc_domain::model::GlobalSettings {
        target_protocol: Protocol::Http,
        target_port: 80,
        cdn: true,
        region_priorities: None,
        failover_threshold: None,
    });
    spec.domains = Some(vec![bc_domain::model::Domain {
        name: "app.example.com".into(),
        is_managed: true,
        certificate_id: None,
    }]);
    // The global one is activated first (enqueued first would do too): it waits.
    let global = env.create_lb_with("world", spec).await.load_balancer_id;
    env.stepper(runtime.clone()).run_until_idle(ROUNDS).await.unwrap();
    let (r, g) = (env.lb(&regional).await, env.lb(&global).await);
    assert_eq!((r.status.state, g.status.state), (ResourceState::Ready, ResourceState::Ready));
    let p = env.provider_lbs().into_iter().find(|p| p.name == "world").unwrap();
    assert_eq!(p.target_load_balancer_ids, vec![r.provider_load_balancer_id.unwrap()]);
    assert_eq!(env.creates(), 2);

    // Its target deleted: the global one says what to fix.
    env.delete_lb(&regional).await;
    env.update_lb(&global, |_| {}).await;
    env.stepper(runtime).run_until_idle(ROUNDS).await.unwrap();
    let g = env.lb(&global).await;
    assert_eq!(g.status.state, ResourceState::Error);
    assert!(g.status.message.unwrap().contains("change targets.loadBalancerIds"));
}

#[tokio::test]
async fn an_errored_provider_object_is_reported() {
    let env = Env::start().await;
    let runtime = env.runtime("r1", env.deps());
    let id = env.create_lb("web").await.load_balancer_id;
    env.stepper(runtime.clone()).run_until_idle(ROUNDS).await.unwrap();
    let provider_id = env.lb(&id).await.provider_load_balancer_id.unwrap();
    assert!(env.sim.state().model().force_load_balancer_errored(&provider_id));
    env.stepper(runtime).run_until(env.now() + time::Duration::minutes(25), ROUNDS).await.unwrap();
    let row = env.lb(&id).await;
    assert_eq!(row.status.state, ResourceState::Error);
    assert!(row.status.message.unwrap().contains("errored"));
    assert_eq!(env.event_types(&id).await, [events::READY, events::ERROR]);
    assert_eq!(env.creates(), 1);
}
