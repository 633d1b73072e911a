//! The stepped driver (cargo feature `testing`): runs one or more runtimes' due work in
//! rounds on a shared [`ManualClock`] and moves the clock to the next due time, so tests
//! and benchmarks go through minutes or hours of scheduling without sleeping.
//!
//! Invariant: every loop is bounded (by `max_rounds`); the clock only moves forward,
//! and only to the next time something becomes claimable (or to the end asked for);
//! activations go through the same [`Runtime::claim`] and [`Runtime::activate`] as the
//! production loop, so what a test sees is what production does, minus the waiting.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bc_domain::ports::{Clock, ManualClock, WorkKind};
use bc_domain::{StoreError, Timestamp};
use futures::future::join_all;
use tokio_util::sync::CancellationToken;

use super::{ActivationReport, ActivationResult, Runtime};

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
}

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
        }
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

    /// One round: each runtime claims, per kind, as many due items as its concurrency
    /// allows and runs them all; the runtimes run at the same time, a different one
    /// first each round. The reports of every activation, in no particular order.
    pub async fn round(&self) -> Result<Vec<ActivationReport>, StoreError> {
        let first = self.rounds.load(Ordering::Relaxed) % self.runtimes.len().max(1);
        let order = self.runtimes.iter().cycle().skip(first).take(self.runtimes.len());
        let per_runtime = order.map(|rt| async move {
            let mut claimed = Vec::new();
            for kind in rt.kinds() {
                claimed.extend(rt.claim(kind, rt.config().concurrency_of(kind)).await?);
            }
            let runs = claimed.into_iter().map(|item| rt.activate(item, &self.stop));
            Ok::<_, StoreError>(join_all(runs).await)
        });
        let mut reports = Vec::new();
        for r in join_all(per_runtime).await {
            reports.extend(r?);
        }
        if !reports.is_empty() {
            self.rounds.fetch_add(1, Ordering::Relaxed);
        }
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        for r in &reports {
            last.insert((r.kind, r.key.clone()), r.result.clone());
        }
        Ok(reports)
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
