//! The runtime's contract, with reconcilers written in the test: outcomes settle the
//! queue (steady resync jittered, converging waits, gone completes, failures back off
//! with attempts and `lastError`), a lost lease writes nothing, renewals keep the lease
//! while an activation runs, the claim loop wakes on the work notify and polls, and
//! shutdown finishes in-flight work or releases its leases.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bc_domain::ports::{Clock, Enqueue, UnitOfWork, WorkKind, WorkQueue};
use bc_domain::{ProviderError, Timestamp};
use bc_reconcile::runtime::{ActivationResult, RuntimeError};
use bc_reconcile::{Activation, Deps, Outcome, ReconcileError, Reconciler, Runtime, RuntimeConfig};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::common::Env;

const KIND: WorkKind = WorkKind::Substrates;

type Step = Box<
    dyn Fn(Deps, Activation) -> BoxFuture<'static, Result<Outcome, ReconcileError>> + Send + Sync,
>;

/// A reconciler whose every activation runs `step` (a test double: the runtime is what
/// is under test).
struct FnReconciler {
    kind: WorkKind,
    step: Step,
}

#[async_trait]
impl Reconciler for FnReconciler {
    fn kind(&self) -> WorkKind {
        self.kind
    }
    async fn reconcile(&self, deps: &Deps, a: &Activation) -> Result<Outcome, ReconcileError> {
        (self.step)(deps.clone(), a.clone()).await
    }
}

fn reconciler<F>(f: F) -> Arc<dyn Reconciler>
where
    F: Fn(Deps, Activation) -> BoxFuture<'static, Result<Outcome, ReconcileError>>
        + Send
        + Sync
        + 'static,
{
    Arc::new(FnReconciler { kind: KIND, step: Box::new(f) })
}

/// Answers from a per-key script, then `Steady`; logs every activation.
#[derive(Default)]
struct Script {
    answers: Mutex<BTreeMap<String, VecDeque<Result<Outcome, ReconcileError>>>>,
    seen: Mutex<Vec<(String, Timestamp, u32)>>,
}

impl Script {
    fn push(&self, key: &str, answer: Result<Outcome, ReconcileError>) {
        self.answers.lock().unwrap().entry(key.into()).or_default().push_back(answer);
    }
    fn reconciler(self: &Arc<Self>) -> Arc<dyn Reconciler> {
        let me = self.clone();
        reconciler(move |_deps, a| {
            me.seen.lock().unwrap().push((a.key().to_owned(), a.now, a.item.attempts));
            let next = me.answers.lock().unwrap().get_mut(a.key()).and_then(|q| q.pop_front());
            Box::pin(async move { next.unwrap_or(Ok(Outcome::Steady)) })
        })
    }
}

async fn enqueue(env: &Env, key: &str) {
    let e = Enqueue { kind: KIND, key: key.into(), not_before: env.now() };
    env.store.enqueue(e).await.unwrap();
}

fn runtime_with(env: &Env, r: Arc<dyn Reconciler>, config: RuntimeConfig) -> Arc<Runtime> {
    Arc::new(Runtime::new(env.deps(), vec![r], config).unwrap())
}

#[tokio::test]
async fn failures_back_off_capped_with_attempts_and_last_error() {
    let env = Env::start().await;
    let script = Arc::new(Script::default());
    for _ in 0..12 {
        script.push("a", Err(ReconcileError::Other("the thing broke".into())));
    }
    let rt = env.runtime_of("r1", env.deps(), vec![script.reconciler()]);
    enqueue(&env, "a").await;
    let reports = env.stepper(rt.clone()).run_until_idle(100).await.unwrap();
    let seen = script.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 13, "12 failures, then the success");
    // Each activation sees the attempts so far; the waits double (with jitter between
    // half and all of the doubled wait) up to the 5-minute cap.
    let schedule = &rt.config().schedule;
    for (i, w) in seen.windows(2).enumerate() {
        assert_eq!(w[0].2, i as u32);
        let waited: Duration = Duration::from_millis((w[1].1 - w[0].1).whole_milliseconds() as u64);
        let full = schedule.backoff_base.mul_f64(2f64.powi(i as i32)).min(schedule.backoff_max);
        assert!(
            waited >= full / 2 && waited <= full,
            "attempt {i}: waited {waited:?}, full {full:?}"
        );
    }
    // Recorded on the item while failing, and cleared by the success.
    let failed =
        reports.iter().filter(|r| matches!(r.result, ActivationResult::Failed { .. })).count();
    assert_eq!(failed, 12);
    let item = env.store.work_get(KIND, "a").await.unwrap().unwrap();
    assert_eq!((item.attempts, item.last_error), (0, None));
    let status = rt.status();
    let kind = &status.kinds[&KIND];
    assert_eq!((kind.activations, kind.failed, kind.steady), (13, 12, 1));
    assert_eq!(kind.recent_errors.back().unwrap().error, "the thing broke");
}

#[tokio::test]
async fn a_failing_item_shows_its_attempts_and_error_in_the_queue() {
    let env = Env::start().await;
    let script = Arc::new(Script::default());
    script.push("a", Err(ReconcileError::Other("first".into())));
    script.push(
        "a",
        Err(ReconcileError::Provider(ProviderError::RateLimited { retry_after_ms: 42_000 })),
    );
    let rt = env.runtime_of("r1", env.deps(), vec![script.reconciler()]);
    enqueue(&env, "a").await;
    let stepper = env.stepper(rt);
    stepper.round().await.unwrap();
    let item = env.store.work_get(KIND, "a").await.unwrap().unwrap();
    assert_eq!((item.attempts, item.last_error.as_deref()), (1, Some("first")));
    env.clock.set(item.not_before);
    stepper.round().await.unwrap();
    let item2 = env.store.work_get(KIND, "a").await.unwrap().unwrap();
    assert_eq!(item2.attempts, 2);
    assert!(item2.last_error.unwrap().contains("42000 ms"));
    // Throttling waits at least what the provider named, whatever the attempt.
    let waited = item2.not_before - env.now();
    assert!(
        waited >= time::Duration::seconds(42) && waited <= time::Duration::milliseconds(52_500),
        "{waited}"
    );
}

/// A budget denial is the budget pacing calls, not a failure: the item comes back when
/// the budget frees a call, however often it was refused, and a real failure after a
/// run of denials backs off from its first step. (Counted as failures, ten denials made
/// the next wait 2^10 s, capped at 5 minutes: items idled while the budget had room.)
#[tokio::test]
async fn budget_denials_retry_when_the_budget_frees_a_call_without_backing_off() {
    let env = Env::start().await;
    let script = Arc::new(Script::default());
    for _ in 0..10 {
        script.push(
            "a",
            Err(ReconcileError::Provider(ProviderError::OverBudget { retry_after_ms: 4_000 })),
        );
    }
    script.push("a", Err(ReconcileError::Other("the thing broke".into())));
    let rt = env.runtime_of("r1", env.deps(), vec![script.reconciler()]);
    enqueue(&env, "a").await;
    let stepper = env.stepper(rt.clone());
    for denial in 0..10 {
        stepper.round().await.unwrap();
        let item = env.store.work_get(KIND, "a").await.unwrap().unwrap();
        assert_eq!(item.attempts, 0, "denial {denial} counted as a failure");
        assert!(item.last_error.as_deref().unwrap().contains("budget"), "{item:?}");
        let waited = item.not_before - env.now();
        assert!(
            waited >= time::Duration::seconds(4) && waited <= time::Duration::seconds(5),
            "denial {denial}: due in {waited}"
        );
        env.clock.set(item.not_before);
    }
    stepper.round().await.unwrap();
    let item = env.store.work_get(KIND, "a").await.unwrap().unwrap();
    assert_eq!((item.attempts, item.last_error.as_deref()), (1, Some("the thing broke")));
    let waited = item.not_before - env.now();
    assert!(
        waited <= time::Duration::seconds(1),
        "the first failure's backoff, not the 11th: {waited}"
    );
    let kind = &rt.status().kinds[&KIND];
    assert_eq!((kind.activations, kind.over_budget, kind.failed), (11, 10, 1));
}

#[tokio::test]
async fn outcomes_settle_the_queue() {
    let env = Env::start().await;
    let script = Arc::new(Script::default());
    script.push("gone", Ok(Outcome::Gone));
    script.push("wait", Ok(Outcome::Converging { after: Duration::from_secs(30) }));
    let rt = env.runtime_of("r1", env.deps(), vec![script.reconciler()]);
    let keys: Vec<String> = (0..40).map(|i| format!("steady-{i}")).collect();
    for k in keys.iter().map(String::as_str).chain(["gone", "wait"]) {
        enqueue(&env, k).await;
    }
    let start = env.now();
    let reports = env.stepper(rt.clone()).round().await.unwrap();
    assert_eq!(reports.len(), 32, "one round claims up to the kind's concurrency");
    env.stepper(rt.clone()).round().await.unwrap();
    assert!(env.store.work_get(KIND, "gone").await.unwrap().is_none(), "gone completes");
    let wait = env.store.work_get(KIND, "wait").await.unwrap().unwrap();
    let after = wait.not_before - start;
    assert!(
        after >= time::Duration::seconds(30) && after <= time::Duration::seconds(33),
        "{after}"
    );
    // Steady items come back after the resync, spread ±10 % so they do not come due
    // together.
    let mut dues = Vec::new();
    for k in &keys {
        let w = env.store.work_get(KIND, k).await.unwrap().unwrap();
        assert_eq!((w.lease_owner, w.attempts), (None, 0));
        let d = w.not_before - start;
        assert!(d >= time::Duration::seconds(540) && d <= time::Duration::seconds(660), "{d}");
        dues.push(w.not_before);
    }
    dues.sort();
    dues.dedup();
    assert!(dues.len() > 30, "jittered, not all at one instant: {} distinct", dues.len());
}

/// The runs of a round that end together are settled in the queue together: one store
/// call for the batch (issue 31), where each used to make its own round trip.
#[tokio::test]
async fn runs_that_end_together_settle_in_one_call() {
    for together in [false, true] {
        let env = Env::start().await;
        let script = Arc::new(Script::default());
        let config = RuntimeConfig { settle_together: together, ..RuntimeConfig::new("r1") };
        let rt = runtime_with(&env, script.reconciler(), config);
        for i in 0..32 {
            enqueue(&env, &format!("steady-{i}")).await;
        }
        let before = env.store.stats();
        let reports = env.stepper(rt).round().await.unwrap();
        assert_eq!(reports.len(), 32);
        assert!(reports.iter().all(|r| matches!(r.result, ActivationResult::Steady { .. })));
        let writes = env.store.stats().since(&before).writes;
        let count = |name: &str| writes.get(name).map_or(0, |w| w.attempts);
        if together {
            // A batch of one goes as a plain requeue; the rest go as one statement.
            let calls = count("requeue") + count("settle");
            assert!((1..=3).contains(&calls), "batched: {writes:?}");
        } else {
            assert_eq!((count("requeue"), count("settle")), (32, 0), "{writes:?}");
        }
    }
}

#[tokio::test]
async fn the_same_seed_gives_the_same_schedule() {
    let mut runs = Vec::new();
    for _ in 0..2 {
        let env = Env::start().await;
        let script = Arc::new(Script::default());
        let config = RuntimeConfig { seed: 42, ..RuntimeConfig::new("r1") };
        let rt = runtime_with(&env, script.reconciler(), config);
        for i in 0..5 {
            enqueue(&env, &format!("k{i}")).await;
        }
        let start = env.now();
        let mut reports = env.stepper(rt).round().await.unwrap();
        reports.sort_by(|a, b| a.key.cmp(&b.key));
        // Draws are taken in settle order, which concurrency may change; the set of
        // waits is what the seed fixes.
        let mut waits: Vec<i64> = reports
            .iter()
            .map(|r| match r.result {
                ActivationResult::Steady { at } => (at - start).whole_milliseconds() as i64,
                ref other => panic!("{other:?}"),
            })
            .collect();
        waits.sort();
        runs.push(waits);
    }
    assert_eq!(runs[0], runs[1]);
}

#[tokio::test]
async fn a_replica_that_lost_its_lease_writes_nothing() {
    let env = Env::start().await;
    let lease = Duration::from_secs(30);
    let clock = env.clock.clone();
    // The activation stalls past its lease; meanwhile another replica takes the item
    // over; then the activation tries to commit.
    let rt = env.runtime_of(
        "r1",
        env.deps(),
        vec![reconciler(move |deps, a| {
            let clock = clock.clone();
            Box::pin(async move {
                clock.advance(time::Duration::seconds(31));
                let now = clock.now();
                let taken = deps
                    .store
                    .claim("r2", &[KIND], 10, now, now + time::Duration::seconds(30))
                    .await?;
                assert_eq!(taken.len(), 1, "the other replica takes the expired lease");
                let event =
                    bc_store::testing::event(&bc_store::testing::tenant("acme"), "compute.pools.x");
                deps.store.commit(UnitOfWork::new().fenced(a.fence.clone()).event(event)).await?;
                Ok(Outcome::Steady)
            })
        })],
    );
    assert_eq!(rt.config().lease, lease);
    enqueue(&env, "a").await;
    let reports = env.stepper(rt.clone()).round().await.unwrap();
    assert_eq!(reports[0].result, ActivationResult::LeaseLost);
    assert!(env.events().await.is_empty(), "the fenced commit wrote nothing");
    let item = env.store.work_get(KIND, "a").await.unwrap().unwrap();
    assert_eq!(
        (item.lease_owner.as_deref(), item.attempts, item.last_error),
        (Some("r2"), 0, None),
        "no fail, no requeue"
    );
    assert_eq!(rt.status().kinds[&KIND].lease_lost, 1);
}

/// Waits (bounded, in real time) until `cond` holds: for the production loop, which
/// runs on its own tasks.
pub(crate) async fn until<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..2_000 {
        if cond().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting until {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_keep_the_lease_while_an_activation_runs() {
    for renew in [true, false] {
        let env = Env::start().await;
        let clock = env.clock.clone();
        let owner = "r1";
        let rt = {
            let clock = clock.clone();
            let step = move |deps: Deps,
                             a: Activation|
                  -> BoxFuture<'static, Result<Outcome, ReconcileError>> {
                let clock = clock.clone();
                Box::pin(async move {
                    // Four times half a lease passes while the activation works.
                    for _ in 0..4 {
                        clock.advance(time::Duration::seconds(15));
                        let target = clock.now() + time::Duration::seconds(15);
                        if renew {
                            until("the lease is renewed", || async {
                                let w = deps.store.work_get(KIND, a.key()).await.unwrap().unwrap();
                                w.lease_until.is_some_and(|u| u >= target)
                            })
                            .await;
                        }
                        let now = clock.now();
                        let stolen = deps
                            .store
                            .claim("r2", &[KIND], 1, now, now + time::Duration::seconds(30))
                            .await?;
                        if !stolen.is_empty() {
                            return Err(ReconcileError::LeaseLost);
                        }
                    }
                    let event = bc_store::testing::event(
                        &bc_store::testing::tenant("acme"),
                        "compute.pools.y",
                    );
                    deps.store
                        .commit(UnitOfWork::new().fenced(a.fence.clone()).event(event))
                        .await?;
                    Ok(Outcome::Steady)
                })
            };
            let config = RuntimeConfig {
                renew_every: if renew {
                    Duration::from_millis(2)
                } else {
                    Duration::from_secs(3600)
                },
                ..RuntimeConfig::new(owner)
            };
            runtime_with(&env, reconciler(step), config)
        };
        enqueue(&env, "a").await;
        let reports = env.stepper(rt).round().await.unwrap();
        if renew {
            assert!(matches!(reports[0].result, ActivationResult::Steady { .. }), "{reports:?}");
            assert_eq!(env.events().await.len(), 1);
        } else {
            // The control: without renewals the other replica takes it over.
            assert_eq!(reports[0].result, ActivationResult::LeaseLost);
            assert!(env.events().await.is_empty());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loop_wakes_on_the_work_notify_and_polls_for_other_processes() {
    let env = Env::start().await;
    let script = Arc::new(Script::default());
    // A poll so long that only the notify can wake the loop.
    let config = RuntimeConfig { poll: Duration::from_secs(3600), ..RuntimeConfig::new("r1") };
    let notify = Arc::new(tokio::sync::Notify::new());
    let rt = Arc::new(
        Runtime::new(env.deps(), vec![script.reconciler()], config)
            .unwrap()
            .with_work_notify(notify.clone()),
    );
    // A first item runs on the loop's first claim; once it has, the loop waits (it
    // registered for the notify before that claim, so no wake-up can slip past).
    enqueue(&env, "first").await;
    let cancel = CancellationToken::new();
    let run = tokio::spawn(rt.clone().run(cancel.clone()));
    until("the first item ran", || async { !script.seen.lock().unwrap().is_empty() }).await;
    enqueue(&env, "woken").await;
    notify.notify_waiters();
    until("the woken item ran", || async {
        script.seen.lock().unwrap().iter().any(|(k, ..)| k == "woken")
    })
    .await;
    cancel.cancel();
    run.await.unwrap();

    // Another process's write, no notify: the poll finds it.
    let config = RuntimeConfig { poll: Duration::from_millis(10), ..RuntimeConfig::new("r2") };
    let script = Arc::new(Script::default());
    let rt = runtime_with(&env, script.reconciler(), config);
    let cancel = CancellationToken::new();
    let run = tokio::spawn(rt.clone().run(cancel.clone()));
    enqueue(&env, "polled").await;
    until("the polled item ran", || async {
        script.seen.lock().unwrap().iter().any(|(k, ..)| k == "polled")
    })
    .await;
    cancel.cancel();
    run.await.unwrap();
}

/// A backlog larger than the slots runs through as slots free, with no notify and no
/// poll: the loop claimed a full batch, found every slot busy, and then slept until the
/// poll — a backlog of N ran at one batch per poll (32 per second by default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_larger_than_the_slots_runs_as_slots_free_without_waiting_for_the_poll() {
    let env = Env::start().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let step =
        move |_deps: Deps, a: Activation| -> BoxFuture<'static, Result<Outcome, ReconcileError>> {
            let log = log.clone();
            Box::pin(async move {
                // Long enough that a claim's items are all still running when it returns.
                tokio::time::sleep(Duration::from_millis(5)).await;
                log.lock().unwrap().push(a.key().to_owned());
                Ok(Outcome::Steady)
            })
        };
    // Only the loop's own refills can run the backlog: no notify, a poll of an hour.
    let config = RuntimeConfig {
        poll: Duration::from_secs(3600),
        concurrency: 4,
        ..RuntimeConfig::new("r1")
    };
    let rt = runtime_with(&env, reconciler(step), config);
    for i in 0..40 {
        enqueue(&env, &format!("item-{i:02}")).await;
    }
    let cancel = CancellationToken::new();
    let run = tokio::spawn(rt.clone().run(cancel.clone()));
    until("the whole backlog ran", || async { seen.lock().unwrap().len() >= 40 }).await;
    cancel.cancel();
    run.await.unwrap();
    let mut ran = seen.lock().unwrap().clone();
    ran.sort();
    ran.dedup();
    assert_eq!(ran.len(), 40, "each item once: {ran:?}");
}

/// The stepped driver's flowing round (what the benchmark's converge runs, as the loop
/// above runs a burst) runs every due item once through slots smaller than the backlog,
/// without moving the clock, and then finds nothing due.
#[tokio::test]
async fn a_flowing_round_runs_a_backlog_larger_than_the_slots_once_each() {
    let env = Env::start().await;
    let script = Arc::new(Script::default());
    let config = RuntimeConfig { concurrency: 3, ..RuntimeConfig::new("r1") };
    let rt = runtime_with(&env, script.reconciler(), config);
    for i in 0..10 {
        enqueue(&env, &format!("item-{i}")).await;
    }
    let before = env.clock.now();
    let stepper = env.stepper(rt);
    let reports = stepper.flow().await.unwrap();
    let mut keys: Vec<String> = reports.iter().map(|r| r.key.clone()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!((reports.len(), keys.len()), (10, 10), "{reports:?}");
    assert!(reports.iter().all(|r| matches!(r.result, ActivationResult::Steady { .. })));
    assert_eq!(env.clock.now(), before, "the clock stands still");
    assert!(stepper.flow().await.unwrap().is_empty(), "nothing is due any more");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_in_flight_work_or_releases_its_lease() {
    for finishes in [true, false] {
        let env = Env::start().await;
        let started = Arc::new(tokio::sync::Notify::new());
        let release = Arc::new(tokio::sync::Semaphore::new(0));
        let r = {
            let (started, release) = (started.clone(), release.clone());
            reconciler(move |_, _| {
                let (started, release) = (started.clone(), release.clone());
                Box::pin(async move {
                    started.notify_one();
                    let _ = release.acquire().await;
                    Ok(Outcome::Converging { after: Duration::from_secs(60) })
                })
            })
        };
        let grace = if finishes { Duration::from_secs(30) } else { Duration::from_millis(20) };
        let config = RuntimeConfig { shutdown_grace: grace, ..RuntimeConfig::new("r1") };
        let rt = runtime_with(&env, r, config);
        enqueue(&env, "a").await;
        let cancel = CancellationToken::new();
        let run = tokio::spawn(rt.clone().run(cancel.clone()));
        started.notified().await;
        cancel.cancel();
        if finishes {
            release.add_permits(1);
        }
        run.await.unwrap();
        let item = env.store.work_get(KIND, "a").await.unwrap().unwrap();
        assert_eq!(item.lease_owner, None, "the lease is not left behind");
        let kind = &rt.status().kinds[&KIND];
        if finishes {
            assert_eq!(kind.converging, 1);
            assert!(item.not_before > env.now(), "settled as it answered");
        } else {
            assert_eq!(kind.released, 1);
            assert!(item.not_before <= env.now(), "due at once for another replica");
            assert_eq!(item.attempts, 0);
        }
    }
}

#[tokio::test]
async fn one_reconciler_per_kind() {
    let env = Env::start().await;
    let script = Arc::new(Script::default());
    let err = Runtime::new(
        env.deps(),
        vec![script.reconciler(), script.reconciler()],
        RuntimeConfig::new("r1"),
    )
    .unwrap_err();
    assert_eq!(err, RuntimeError::DuplicateKind(KIND));
}
