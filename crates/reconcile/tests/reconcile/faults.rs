//! Random fault schedules (proptest): provider faults on the calls — 429 and 5xx from
//! the simulator, requests lost before they reach it, answers lost after it acted (a
//! timeout) — the provider's natural "busy" answers while tenants change and delete
//! load balancers, deletions behind our back, and a crash (the activation dropped, its
//! lease left to expire) before or after any provider call or after any activation.
//! Whatever the schedule, once the faults stop every load balancer converges: ready or
//! deleted, exactly one provider object per live one and none of the deleted, quota
//! units and billing intervals exact, one `deleted` event per deleted one.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bc_domain::model::LoadBalancerSpec;
use bc_domain::ports::{ProviderRegistry, ProviderResult, WorkKind};
use bc_domain::{LoadBalancerId, ProviderError, ResourceState};
use bc_reconcile::provider_resources::plan::{events, ownership_tag};
use bc_reconcile::testing::Stepper;
use bc_reconcile::{
    Activation, CallHook, Deps, ForwardRegistry, LoadBalancers, Outcome, ProviderCall,
    ReconcileError, Reconciler, RuntimeConfig,
};
use bc_sim::model::{Fault, routes};
use proptest::prelude::*;

use crate::common::Env;

/// What happens to one provider call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallFault {
    None,
    /// The simulator answers 429 (retry-after 2 s).
    Throttled,
    /// The simulator answers 500.
    ServerError,
    /// The request never reaches the provider (a connect timeout).
    LostRequest,
    /// The provider acts, the answer is lost (a read timeout).
    LostAnswer,
}

/// Where the one crash of a schedule happens (counted over provider calls, or over
/// activations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Crash {
    BeforeCall(usize),
    AfterCall(usize),
    AfterActivation(usize),
}

/// A tenant's or an operator's action at a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// Change load balancer `i` (its target port).
    Update(usize),
    /// Delete load balancer `i`.
    Delete(usize),
    /// Delete load balancer `i`'s provider object at the console.
    BehindBack(usize),
}

#[derive(Debug)]
struct Plan {
    faults: Mutex<VecDeque<CallFault>>,
    crash: Mutex<Option<Crash>>,
    calls: AtomicUsize,
    activations: AtomicUsize,
    crashed: tokio::sync::Notify,
}

impl Plan {
    /// Whether the crash is due at `at` (once); a crash inside a call also wakes the
    /// activation's watcher, which drops the activation.
    fn crash_now(&self, at: Crash) -> bool {
        let mut c = self.crash.lock().unwrap();
        if *c == Some(at) {
            *c = None;
            if !matches!(at, Crash::AfterActivation(_)) {
                self.crashed.notify_one();
            }
            true
        } else {
            false
        }
    }
}

/// The simulator's provider with the schedule's faults and crash applied to its load
/// balancer calls (the only calls the load balancer reconciler makes).
struct Faulty {
    sim: Arc<bc_sim::SimState>,
    plan: Arc<Plan>,
}

/// The simulator's route of a load balancer call.
fn route(call: ProviderCall) -> Option<String> {
    let (method, template) = match call {
        ProviderCall::ListLoadBalancers => ("GET", routes::LOAD_BALANCERS),
        ProviderCall::GetLoadBalancer => ("GET", routes::LOAD_BALANCER),
        ProviderCall::CreateLoadBalancer => ("POST", routes::LOAD_BALANCERS),
        ProviderCall::UpdateLoadBalancer => ("PUT", routes::LOAD_BALANCER),
        ProviderCall::DeleteLoadBalancer => ("DELETE", routes::LOAD_BALANCER),
        _ => return None,
    };
    Some(routes::key(method, template))
}

#[async_trait]
impl CallHook for Faulty {
    /// The call's number, its fault and its route (none for a call it leaves alone).
    type Ticket = Option<(usize, CallFault, String)>;

    async fn before(&self, call: ProviderCall) -> ProviderResult<Self::Ticket> {
        let Some(key) = route(call) else { return Ok(None) };
        let n = self.plan.calls.fetch_add(1, Ordering::SeqCst);
        if self.plan.crash_now(Crash::BeforeCall(n)) {
            std::future::pending::<()>().await;
        }
        let fault = self.plan.faults.lock().unwrap().pop_front().unwrap_or(CallFault::None);
        match fault {
            CallFault::Throttled => {
                self.sim.model().inject_failures(&key, 1, Fault::TooManyRequests { retry_after: 2 })
            }
            CallFault::ServerError => self.sim.model().inject_failures(&key, 1, Fault::ServerError),
            CallFault::LostRequest => {
                if self.plan.crash_now(Crash::AfterCall(n)) {
                    std::future::pending::<()>().await;
                }
                return Err(ProviderError::Transient {
                    message: format!("{key}: timed out connecting"),
                });
            }
            CallFault::None | CallFault::LostAnswer => {}
        }
        Ok(Some((n, fault, key)))
    }

    async fn after(
        &self,
        _: ProviderCall,
        ticket: Self::Ticket,
        _: Result<(), &ProviderError>,
    ) -> ProviderResult<()> {
        let Some((n, fault, key)) = ticket else { return Ok(()) };
        if self.plan.crash_now(Crash::AfterCall(n)) {
            std::future::pending::<()>().await;
        }
        if fault == CallFault::LostAnswer {
            return Err(ProviderError::Transient { message: format!("{key}: timed out reading") });
        }
        Ok(())
    }
}

/// The registry of `env`, its providers under `plan`.
fn faulty_registry(env: &Env, plan: Arc<Plan>) -> Arc<dyn ProviderRegistry> {
    let sim = env.sim.state().clone();
    Arc::new(ForwardRegistry::new(env.registry(), move |_| Faulty {
        sim: sim.clone(),
        plan: plan.clone(),
    }))
}

/// The load balancer reconciler, dropped mid-flight at the schedule's crash: the
/// activation answers "lease lost", so the runtime settles nothing and the lease is left
/// to expire, exactly as when a replica dies.
struct Crashing {
    inner: LoadBalancers,
    plan: Arc<Plan>,
}

#[async_trait]
impl Reconciler for Crashing {
    fn kind(&self) -> WorkKind {
        self.inner.kind()
    }
    async fn reconcile(&self, deps: &Deps, a: &Activation) -> Result<Outcome, ReconcileError> {
        let crashed = self.plan.crashed.notified();
        tokio::select! {
            r = self.inner.reconcile(deps, a) => {
                let n = self.plan.activations.fetch_add(1, Ordering::SeqCst);
                if self.plan.crash_now(Crash::AfterActivation(n)) {
                    return Err(ReconcileError::LeaseLost);
                }
                r
            }
            () = crashed => Err(ReconcileError::LeaseLost),
        }
    }
}

fn fault() -> impl Strategy<Value = CallFault> {
    prop_oneof![
        6 => Just(CallFault::None),
        1 => Just(CallFault::Throttled),
        1 => Just(CallFault::ServerError),
        1 => Just(CallFault::LostRequest),
        1 => Just(CallFault::LostAnswer),
    ]
}

fn crash() -> impl Strategy<Value = Option<Crash>> {
    proptest::option::of(prop_oneof![
        (0usize..20).prop_map(Crash::BeforeCall),
        (0usize..20).prop_map(Crash::AfterCall),
        (0usize..12).prop_map(Crash::AfterActivation),
    ])
}

fn action(lbs: usize) -> impl Strategy<Value = Action> {
    prop_oneof![
        (0..lbs).prop_map(Action::Update),
        (0..lbs).prop_map(Action::Delete),
        (0..lbs).prop_map(Action::BehindBack),
    ]
}

/// Load balancers, call faults, a crash, and the desired-state changes by step.
type Schedule = (usize, Vec<CallFault>, Option<Crash>, Vec<(usize, Action)>);

fn schedule() -> impl Strategy<Value = Schedule> {
    (1usize..4).prop_flat_map(|lbs| {
        (
            Just(lbs),
            proptest::collection::vec(fault(), 0..40),
            crash(),
            proptest::collection::vec((0usize..30, action(lbs)), 0..5),
        )
    })
}

/// Rounds of the stepped runtime, applying `actions` at their rounds, moving the clock
/// to the next due time when nothing runs (at most `max` rounds).
async fn drive(
    env: &Env,
    stepper: &Stepper,
    ids: &[LoadBalancerId],
    mut actions: BTreeMap<usize, Vec<Action>>,
    max: usize,
) {
    for round in 0..max {
        for a in actions.remove(&round).unwrap_or_default() {
            match a {
                Action::Update(i) => {
                    if !env.lb(&ids[i]).await.delete_requested {
                        env.update_lb(&ids[i], |s: &mut LoadBalancerSpec| {
                            s.forwarding_rules[0].target_port += 1
                        })
                        .await
                    }
                }
                Action::Delete(i) => {
                    if !env.lb(&ids[i]).await.delete_requested {
                        env.delete_lb(&ids[i]).await;
                    }
                }
                Action::BehindBack(i) => {
                    if let Some(p) = env.lb(&ids[i]).await.provider_load_balancer_id {
                        env.sim.state().model().delete_load_balancer_behind_back(&p);
                    }
                }
            }
        }
        if !stepper.round().await.unwrap().is_empty() {
            continue;
        }
        // Nothing ran: the next action comes at its round; with none left, stop once
        // only steady resyncs remain.
        if !actions.is_empty() {
            continue;
        }
        let horizon = time::Duration::minutes(9);
        match stepper.next_due().await.unwrap() {
            Some(t) if t - env.now() >= horizon => return,
            Some(t) if t > env.now() => env.clock.set(t),
            Some(_) => {}
            None => return,
        }
    }
}

async fn run_schedule(
    lbs: usize,
    faults: Vec<CallFault>,
    crash: Option<Crash>,
    actions: Vec<(usize, Action)>,
) {
    let env = Env::start().await;
    let plan = Arc::new(Plan {
        faults: Mutex::new(faults.into()),
        crash: Mutex::new(crash),
        calls: AtomicUsize::new(0),
        activations: AtomicUsize::new(0),
        crashed: tokio::sync::Notify::new(),
    });
    let registry = faulty_registry(&env, plan.clone());
    let deps = env.deps_with(registry, env.budget());
    let reconciler: Arc<dyn Reconciler> =
        Arc::new(Crashing { inner: LoadBalancers::default(), plan: plan.clone() });
    // One activation at a time, so the crash lands on the activation that made the call.
    let config = RuntimeConfig { concurrency: 1, ..RuntimeConfig::new("r1") };
    let runtime = Arc::new(bc_reconcile::Runtime::new(deps, vec![reconciler], config).unwrap());
    let stepper = env.stepper(runtime);
    let mut ids = Vec::new();
    for i in 0..lbs {
        ids.push(env.create_lb(&format!("lb-{i}")).await.load_balancer_id);
    }
    let mut by_round: BTreeMap<usize, Vec<Action>> = BTreeMap::new();
    for (round, a) in actions {
        by_round.entry(round).or_default().push(a);
    }
    drive(&env, &stepper, &ids, by_round, 2_000).await;
    // Faults over: a deletion behind our back is noticed within two resyncs; then
    // everything must settle.
    plan.faults.lock().unwrap().clear();
    stepper.run_until(env.now() + time::Duration::minutes(30), 2_000).await.unwrap();
    stepper.run_until_idle(2_000).await.unwrap();

    let provider = env.provider_lbs();
    let mut live = 0;
    for id in &ids {
        let row = env.lb(id).await;
        let tag = ownership_tag(id);
        let objects: Vec<_> = provider.iter().filter(|p| p.tags.contains(&tag)).collect();
        let types = env.event_types(id).await;
        let intervals: Vec<_> =
            env.billing().await.into_iter().filter(|b| b.resource == id.as_str()).collect();
        if row.delete_requested {
            assert_eq!(row.status.state, ResourceState::Deleted, "{id}: {:?}", row.status);
            assert!(
                objects.is_empty(),
                "{id}: deleted, yet {} provider objects remain",
                objects.len()
            );
            assert!(row.quota_released);
            assert_eq!(types.iter().filter(|t| *t == events::DELETED).count(), 1, "{types:?}");
            match row.ready_at {
                Some(_) => {
                    assert_eq!(intervals.len(), 1, "{intervals:?}");
                    assert_eq!(
                        (intervals[0].start, intervals[0].end),
                        (row.ready_at.unwrap(), row.deleted_at)
                    );
                }
                None => assert!(intervals.is_empty()),
            }
        } else {
            live += 1;
            assert_eq!(row.status.state, ResourceState::Ready, "{id}: {:?}", row.status);
            assert_eq!(objects.len(), 1, "{id}: exactly one provider object");
            assert_eq!(row.provider_load_balancer_id.as_deref(), Some(objects[0].id.as_str()));
            assert_eq!(
                objects[0].forwarding_rules[0].target_port,
                row.spec.forwarding_rules[0].target_port,
                "converged to the last change"
            );
            assert_eq!(intervals.len(), 1, "{intervals:?}");
            assert_eq!((intervals[0].start, intervals[0].end), (row.ready_at.unwrap(), None));
        }
    }
    assert_eq!(provider.len(), live, "no provider object of ours or anyone's is left over");
    assert_eq!(env.quota_used().await, live as u32);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, max_shrink_iters: 64, .. ProptestConfig::default() })]

    #[test]
    fn every_load_balancer_converges_whatever_the_faults((lbs, faults, crash, actions) in schedule()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(run_schedule(lbs, faults, crash, actions));
    }
}

/// The schedules that once broke things, kept as plain tests.
#[tokio::test]
async fn a_crash_right_after_the_create_never_makes_a_second_object() {
    run_schedule(1, vec![], Some(Crash::AfterCall(0)), vec![]).await;
    run_schedule(
        2,
        vec![CallFault::LostAnswer, CallFault::LostAnswer],
        None,
        vec![(3, Action::Delete(1))],
    )
    .await;
}

/// Found by the fault schedules: a create retried after a failed attempt must record
/// its intent again, or a listing taken between the two attempts (by any object of the
/// account) is trusted to speak for the second, and a delete then leaves its object
/// behind at the provider.
#[tokio::test]
async fn a_retried_create_records_its_intent_again() {
    use CallFault::*;
    let env = Env::start().await;
    // The first create never reaches the provider, the listing goes through, the second
    // create lands but its answer is lost.
    let plan = Arc::new(Plan {
        faults: Mutex::new(vec![LostRequest, None, LostAnswer].into()),
        crash: Mutex::new(Option::None),
        calls: AtomicUsize::new(0),
        activations: AtomicUsize::new(0),
        crashed: tokio::sync::Notify::new(),
    });
    let registry = faulty_registry(&env, plan);
    let deps = env.deps_with(registry, env.budget());
    let runtime = env.runtime("r1", deps.clone());
    let stepper = env.stepper(runtime);
    let id = env.create_lb("web").await.load_balancer_id;
    let t0 = env.now();
    assert!(matches!(
        stepper.round().await.unwrap()[0].result,
        bc_reconcile::runtime::ActivationResult::Failed { .. }
    ));
    // Some other object of the account has the account listed, well after the intent
    // (past the longest its create may have been in flight) and recently enough for the
    // retry to take it (a converging look accepts a listing up to half its poll wait
    // old: 12.5 s here).
    env.clock.set(t0 + time::Duration::seconds(47));
    deps.observer.load_balancers(&env.account, std::time::Duration::ZERO).await.unwrap();
    env.clock.set(t0 + time::Duration::seconds(50));
    assert!(matches!(
        stepper.round().await.unwrap()[0].result,
        bc_reconcile::runtime::ActivationResult::Failed { .. }
    ));
    assert_eq!(env.provider_lbs().len(), 1, "the second create landed");
    env.clock.set(t0 + time::Duration::milliseconds(50_001));
    env.delete_lb(&id).await;
    stepper.run_until_idle(200).await.unwrap();
    assert_eq!(env.lb(&id).await.status.state, ResourceState::Deleted);
    assert!(env.provider_lbs().is_empty(), "nothing left behind at the provider");
}

/// How many load balancers the provider holds a few seconds after a first create failed
/// with `fault`: past the failure's backoff and the listing margin, well inside the call
/// timeout; and the calls made by then.
async fn made_soon_after_a_failed_create(fault: CallFault) -> (usize, usize) {
    let env = Env::start().await;
    let plan = Arc::new(Plan {
        faults: Mutex::new(vec![fault].into()),
        crash: Mutex::new(Option::None),
        calls: AtomicUsize::new(0),
        activations: AtomicUsize::new(0),
        crashed: tokio::sync::Notify::new(),
    });
    let registry = faulty_registry(&env, plan.clone());
    let deps = env.deps_with(registry, env.budget());
    let stepper = env.stepper(env.runtime("r1", deps.clone()));
    env.create_lb("web").await;
    let t0 = env.now();
    assert!(matches!(
        stepper.round().await.unwrap()[0].result,
        bc_reconcile::runtime::ActivationResult::Failed { .. }
    ));
    assert!(env.provider_lbs().is_empty(), "the failed create made nothing");
    // The 429's retry-after (2 s, plus a quarter) and the listing margin (2 s) are over.
    let timing = bc_reconcile::provider_resources::plan::Timing::default();
    let later = timing.listing_margin + std::time::Duration::from_secs(3);
    assert!(later + timing.listing_margin < timing.call_timeout);
    env.clock.set(t0 + time::Duration::try_from(later).unwrap());
    stepper.round().await.unwrap();
    (env.provider_lbs().len(), plan.calls.load(Ordering::SeqCst))
}

/// A create the provider throttled made nothing and nothing of it is in flight: once a
/// listing that started after the 429 (plus the margin for the replicas' clocks) shows
/// nothing, the create goes again — not only a call timeout after the intent, the
/// allowance for a create that may still be in flight, which had cost each throttled
/// create half a minute. A 500 is not so sure (a gateway's 5xx may answer while the
/// create goes on behind it): that create keeps the intent's wait.
#[tokio::test]
async fn a_throttled_create_goes_again_once_a_listing_after_the_429_shows_nothing() {
    let (made, calls) = made_soon_after_a_failed_create(CallFault::Throttled).await;
    assert_eq!((made, calls), (1, 3), "429, a listing, the create again");
    let (made, calls) = made_soon_after_a_failed_create(CallFault::ServerError).await;
    assert_eq!((made, calls), (0, 1), "after a 500, the wait for a call in flight stands");
}

/// Found by the fault schedules: a listing that started at the very instant of a
/// create's intent (on a stepped clock, or on another replica whose clock runs a little
/// behind) may predate the create; its absence must not let a delete skip the object.
#[tokio::test]
async fn a_listing_from_the_instant_of_the_intent_is_not_trusted() {
    use CallFault::*;
    let env = Env::start().await;
    let plan = Arc::new(Plan {
        faults: Mutex::new(vec![None, LostAnswer].into()),
        crash: Mutex::new(Option::None),
        calls: AtomicUsize::new(0),
        activations: AtomicUsize::new(0),
        crashed: tokio::sync::Notify::new(),
    });
    let registry = faulty_registry(&env, plan);
    let deps = env.deps_with(registry, env.budget());
    let stepper = env.stepper(env.runtime("r1", deps.clone()));
    let id = env.create_lb("web").await.load_balancer_id;
    // Listed, then (same instant) the intent and a create whose answer is lost.
    deps.observer.load_balancers(&env.account, std::time::Duration::ZERO).await.unwrap();
    assert!(matches!(
        stepper.round().await.unwrap()[0].result,
        bc_reconcile::runtime::ActivationResult::Failed { .. }
    ));
    assert_eq!(env.provider_lbs().len(), 1);
    env.delete_lb(&id).await;
    stepper.run_until_idle(200).await.unwrap();
    assert_eq!(env.lb(&id).await.status.state, ResourceState::Deleted);
    assert!(env.provider_lbs().is_empty(), "nothing left behind at the provider");
}
