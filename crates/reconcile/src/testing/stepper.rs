//! The stepped driver: runs one or more runtimes' due work in
//! rounds (or flowing, as the production loop runs a burst: [`Stepper::flow`]) on a
//! shared [`ManualClock`] and moves the clock to the next due time, so tests and
//! benchmarks go through minutes or hours of scheduling without sleeping.
//!
//! Invariant: every loop is bounded (by `max_rounds`); the clock only moves forward,
//! and only to the next time something becomes claimable (or to the end asked for);
//! activations go through the same [`Runtime::claim`] and [`Runtime::activate`] as the
//! production loop, so what a test sees is what production does, minus the waiting.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bc_domain::ports::{Clock, ManualClock, WorkItem, WorkKind};
use bc_domain::{StoreError, Timestamp};
use futures::StreamExt as _;
use futures::future::{BoxFuture, join_all};
use futures::stream::FuturesUnordered;
use tokio_util::sync::CancellationToken;

use crate::runtime::{ActivationReport, ActivationResult, Runtime, refill_due};

/// Why a stepped run stopped before it was done.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// Work was still due (or coming due before the horizon) after `rounds` rounds.
    #[error("not idle after {rounds} rounds; next due at {next_due:?}")]
    NotIdle {
        /// Rounds run.
        rounds: usize,
        /// When the next item comes due.
        next_due: Option<Timestamp>,
    },
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
}

/// Drives runtimes sharing one manual clock (several runtimes stand for several
/// replicas: each round they claim and run concurrently, racing for the same items).
pub struct Stepper {
    runtimes: Vec<Arc<Runtime>>,
    clock: Arc<ManualClock>,
    horizon: Duration,
    stop: CancellationToken,
    /// How each item's latest activation ended.
    last: Mutex<HashMap<(WorkKind, String), ActivationResult>>,
    /// Rounds that ran something: each starts with the next runtime, so no replica
    /// always gets first pick of the work and of the budget.
    rounds: AtomicUsize,
    /// Activations that ended failed (retried with backoff) so far.
    failures: AtomicUsize,
    /// When set, each activation runs as a task of its own, wrapped by this first
    /// ([`Self::spawning`]); else a round's activations are polled together in the
    /// caller's task.
    spawn: Option<Wrap>,
}

/// What [`Stepper::spawning`] does to an activation before it is spawned (a benchmark
/// files its memory under a group of its own).
pub type Wrap = Arc<
    dyn Fn(BoxFuture<'static, ActivationReport>) -> BoxFuture<'static, ActivationReport>
        + Send
        + Sync,
>;

impl Stepper {
    /// A driver of `runtime` on `clock`.
    pub fn new(runtime: Arc<Runtime>, clock: Arc<ManualClock>) -> Self {
        Self::together(vec![runtime], clock)
    }

    /// A driver of several replicas on one `clock`. The idle horizon is the earliest
    /// steady resync of the first runtime: anything due sooner is still converging (or
    /// failing), anything later is a converged object's resync.
    pub fn together(runtimes: Vec<Arc<Runtime>>, clock: Arc<ManualClock>) -> Self {
        let horizon = runtimes
            .first()
            .map(|r| r.config().schedule.earliest_steady())
            .unwrap_or(Duration::ZERO);
        Self {
            runtimes,
            clock,
            horizon,
            stop: CancellationToken::new(),
            last: Mutex::default(),
            rounds: AtomicUsize::new(0),
            failures: AtomicUsize::new(0),
            spawn: None,
        }
    }

    /// Runs each activation as a task of its own, `wrap`ped, as the production loop
    /// does ([`Runtime::run`] spawns every claimed item): on a multi-threaded runtime a
    /// round's activations then use every worker, where polled together in one task
    /// they share one thread — a benchmark of the stepped converge measured a core of
    /// two. Tests keep the default: one task, the same order every run.
    pub fn spawning(mut self, wrap: Wrap) -> Self {
        self.spawn = Some(wrap);
        self
    }

    /// Counts work due within `horizon` of now as not idle (default: the earliest
    /// steady resync).
    pub fn with_horizon(mut self, horizon: Duration) -> Self {
        self.horizon = horizon;
        self
    }

    /// The clock.
    pub fn clock(&self) -> &Arc<ManualClock> {
        &self.clock
    }

    /// Replaces the runtimes (a restart: the old processes' in-memory state is gone;
    /// what they left in the queue — leases included — stays).
    pub fn restart(&mut self, runtimes: Vec<Arc<Runtime>>) {
        self.runtimes = runtimes;
    }

    /// How many activations so far ended failed (and were retried with backoff).
    pub fn failures(&self) -> usize {
        self.failures.load(Ordering::Relaxed)
    }

    /// One round: each runtime claims, per kind, as many due items as its concurrency
    /// allows and runs them all; the runtimes run at the same time, a different one
    /// first each round. The reports of every activation, in no particular order.
    pub async fn round(&self) -> Result<Vec<ActivationReport>, StoreError> {
        let per_runtime = self.in_turn().map(|rt| async move {
            let mut claimed = Vec::new();
            for kind in rt.kinds() {
                claimed.extend(rt.claim(kind, rt.config().concurrency_of(kind)).await?);
            }
            let runs = claimed.into_iter().map(|item| self.start(rt, item));
            Ok::<_, StoreError>(join_all(runs).await)
        });
        let mut reports = Vec::new();
        for r in join_all(per_runtime).await {
            reports.extend(r?);
        }
        Ok(self.recorded(reports))
    }

    /// The runtimes, a different one first each round, so no replica always gets first
    /// pick of the work and of the budget.
    fn in_turn(&self) -> impl Iterator<Item = &Arc<Runtime>> {
        let first = self.rounds.load(Ordering::Relaxed) % self.runtimes.len().max(1);
        self.runtimes.iter().cycle().skip(first).take(self.runtimes.len())
    }

    /// Books a round's reports: the round count, failures, each item's latest result.
    fn recorded(&self, reports: Vec<ActivationReport>) -> Vec<ActivationReport> {
        if !reports.is_empty() {
            self.rounds.fetch_add(1, Ordering::Relaxed);
        }
        let failed = reports.iter().filter(|r| matches!(r.result, ActivationResult::Failed { .. }));
        self.failures.fetch_add(failed.count(), Ordering::Relaxed);
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        for r in &reports {
            last.insert((r.kind, r.key.clone()), r.result.clone());
        }
        drop(last);
        reports
    }

    /// One flowing round, as the production loop ([`Runtime::run`]) runs a burst of due
    /// work: per runtime and kind, up to its concurrency in flight, and claimed again as
    /// activations end (when [`refill_due`] says so) rather than after the slowest of a
    /// round; the clock stands still throughout. Ends when a claim with nothing in
    /// flight finds nothing due. The reports of every activation, in no particular order.
    pub async fn flow(&self) -> Result<Vec<ActivationReport>, StoreError> {
        let lanes =
            self.in_turn().flat_map(|rt| rt.kinds().into_iter().map(move |kind| (rt, kind)));
        let mut reports = Vec::new();
        for r in join_all(lanes.map(|(rt, kind)| self.lane(rt, kind))).await {
            reports.extend(r?);
        }
        Ok(self.recorded(reports))
    }

    /// One kind of one runtime in a flowing round (see [`Self::flow`]).
    async fn lane(
        &self,
        rt: &Arc<Runtime>,
        kind: WorkKind,
    ) -> Result<Vec<ActivationReport>, StoreError> {
        let concurrency = rt.config().concurrency_of(kind);
        let mut running: FuturesUnordered<BoxFuture<'_, ActivationReport>> =
            FuturesUnordered::new();
        let mut reports = Vec::new();
        // The last claim found less than it asked for: nothing more is due until what is
        // in flight ends (its requeues may be due at once).
        let mut dry = false;
        loop {
            let free = concurrency - running.len();
            if running.is_empty() || (!dry && refill_due(free, concurrency)) {
                let claimed = rt.claim(kind, free).await?;
                if claimed.is_empty() && running.is_empty() {
                    return Ok(reports);
                }
                dry = claimed.len() < free;
                for item in claimed {
                    running.push(self.start(rt, item));
                }
            }
            if let Some(report) = running.next().await {
                reports.push(report);
            }
        }
    }

    /// An activation, as a task of its own when spawning (see [`Self::spawning`]).
    fn start(&self, rt: &Arc<Runtime>, item: WorkItem) -> BoxFuture<'static, ActivationReport> {
        let (rt, stop) = (rt.clone(), self.stop.clone());
        let run = Box::pin(async move { rt.activate(item, &stop).await });
        let Some(wrap) = &self.spawn else { return run };
        let task = tokio::spawn(wrap(run));
        Box::pin(async move {
            match task.await {
                Ok(report) => report,
                // An activation that panicked panics the round, as it does in one task.
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => panic!("an activation's task was cancelled: {e}"),
            }
        })
    }

    /// Whether every item this driver ran ended its latest activation converged (or
    /// gone): with nothing due now, only steady resyncs are left.
    fn settled(&self) -> bool {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        !last.is_empty()
            && last
                .values()
                .all(|r| matches!(r, ActivationResult::Steady { .. } | ActivationResult::Gone))
    }

    /// When the next item of any kind of any runtime becomes claimable.
    pub async fn next_due(&self) -> Result<Option<Timestamp>, StoreError> {
        let mut next: Option<Timestamp> = None;
        for rt in &self.runtimes {
            for kind in rt.kinds() {
                if let Some(t) = rt.deps().store.next_due(kind).await? {
                    next = Some(next.map_or(t, |n| n.min(t)));
                }
            }
        }
        Ok(next)
    }

    /// One round; when nothing was due, the clock first jumps to the next due item, at
    /// most `max_jump` ahead (to `max_jump` ahead when nothing is due sooner).
    pub async fn step(&self, max_jump: Duration) -> Result<Vec<ActivationReport>, StoreError> {
        let reports = self.round().await?;
        if !reports.is_empty() {
            return Ok(reports);
        }
        let now = self.clock.now();
        let limit = now + horizon_of(max_jump);
        let to = self.next_due().await?.filter(|t| *t <= limit).unwrap_or(limit);
        if to > now {
            self.clock.set(to);
        }
        self.round().await
    }

    /// Runs rounds, moving the clock to the next due time whenever nothing is due now,
    /// until it is idle: nothing due now and every item it ran converged (or gone) at
    /// its latest activation, or nothing coming due within the horizon. Every report,
    /// in order of rounds.
    pub async fn run_until_idle(
        &self,
        max_rounds: usize,
    ) -> Result<Vec<ActivationReport>, StepError> {
        let mut all = Vec::new();
        for _ in 0..max_rounds {
            let reports = self.round().await?;
            if !reports.is_empty() {
                all.extend(reports);
                continue;
            }
            if self.settled() {
                return Ok(all);
            }
            let now = self.clock.now();
            match self.next_due().await? {
                None => return Ok(all),
                Some(t) if t - now > horizon_of(self.horizon) => return Ok(all),
                Some(t) if t > now => self.clock.set(t),
                // Due, yet nothing was claimed: a race with another claimer; go again.
                Some(_) => {}
            }
        }
        Err(StepError::NotIdle { rounds: max_rounds, next_due: self.next_due().await? })
    }

    /// Runs everything that comes due until `end`, moving the clock from due time to
    /// due time, and leaves the clock at `end`.
    pub async fn run_until(
        &self,
        end: Timestamp,
        max_rounds: usize,
    ) -> Result<Vec<ActivationReport>, StepError> {
        let mut all = Vec::new();
        for _ in 0..max_rounds {
            let reports = self.round().await?;
            if !reports.is_empty() {
                all.extend(reports);
                continue;
            }
            let now = self.clock.now();
            match self.next_due().await? {
                Some(t) if t <= now => {}
                Some(t) if t <= end => self.clock.set(t),
                _ => {
                    if end > now {
                        self.clock.set(end);
                    }
                    return Ok(all);
                }
            }
        }
        Err(StepError::NotIdle { rounds: max_rounds, next_due: self.next_due().await? })
    }
}

fn horizon_of(d: Duration) -> time::Duration {
    time::Duration::try_from(d).unwrap_or(time::Duration::MAX)
}
