//! What the runtime reports: one [`ActivationReport`] per activation, and the running
//! totals per kind in [`RuntimeStatus`] (for `/metrics` and logs).
//!
//! Invariant: every activation is counted exactly once, under exactly one outcome;
//! errors keep only the newest few (with the text already stored as `lastError`, so no
//! secret), so the status stays small however long the runtime runs.

use std::collections::{BTreeMap, VecDeque};

use bc_domain::Timestamp;
use bc_domain::ports::WorkKind;

/// How many recent errors each kind keeps.
pub const RECENT_ERRORS: usize = 16;

/// How one activation ended, as settled in the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActivationResult {
    /// Converged; due again at `at` (the steady resync).
    Steady {
        /// Next run.
        at: Timestamp,
    },
    /// Still converging; due again at `at`.
    Converging {
        /// Next run.
        at: Timestamp,
    },
    /// The object is gone; the item was completed.
    Gone,
    /// The activation failed; the item records the error and is retried at `retry_at`
    /// (`None` when even recording it failed: the lease then runs out and the item is
    /// taken over).
    Failed {
        /// The error, as recorded in `lastError`.
        error: String,
        /// When it is retried.
        retry_at: Option<Timestamp>,
    },
    /// The account's provider-call budget had no call to spare: the item is due again at
    /// `at`, when the budget frees one (attempts kept: not a failure).
    OverBudget {
        /// Next run.
        at: Timestamp,
    },
    /// The lease was lost (taken over by another replica): nothing was settled.
    LeaseLost,
    /// Stopped by shutdown; the lease was given back for another replica.
    Released,
}

/// One activation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivationReport {
    /// Kind.
    pub kind: WorkKind,
    /// Key.
    pub key: String,
    /// How it ended.
    pub result: ActivationResult,
    /// When it started.
    pub started: Timestamp,
    /// When it was settled.
    pub finished: Timestamp,
}

/// One recent failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecentError {
    /// The item's key.
    pub key: String,
    /// The error (no secrets).
    pub error: String,
    /// When.
    pub at: Timestamp,
}

/// The running totals of one kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KindStatus {
    /// Activations finished.
    pub activations: u64,
    /// …that ended converged.
    pub steady: u64,
    /// …still converging.
    pub converging: u64,
    /// …with the object gone.
    pub gone: u64,
    /// …failed (retried with backoff).
    pub failed: u64,
    /// …waited for the account's provider-call budget (retried when it frees a call).
    pub over_budget: u64,
    /// …that lost their lease.
    pub lease_lost: u64,
    /// …stopped by shutdown.
    pub released: u64,
    /// Activations running now.
    pub in_flight: u64,
    /// The newest failures, oldest first.
    pub recent_errors: VecDeque<RecentError>,
}

impl KindStatus {
    /// Counts one finished activation.
    pub(crate) fn count(&mut self, r: &ActivationReport) {
        self.activations += 1;
        match &r.result {
            ActivationResult::Steady { .. } => self.steady += 1,
            ActivationResult::Converging { .. } => self.converging += 1,
            ActivationResult::Gone => self.gone += 1,
            ActivationResult::LeaseLost => self.lease_lost += 1,
            ActivationResult::Released => self.released += 1,
            ActivationResult::OverBudget { .. } => self.over_budget += 1,
            ActivationResult::Failed { error, .. } => {
                self.failed += 1;
                if self.recent_errors.len() == RECENT_ERRORS {
                    self.recent_errors.pop_front();
                }
                let e = RecentError { key: r.key.clone(), error: error.clone(), at: r.finished };
                self.recent_errors.push_back(e);
            }
        }
    }
}

/// What a runtime's activations came to, per kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeStatus {
    /// The replica's lease owner name.
    pub owner: String,
    /// Per kind.
    pub kinds: BTreeMap<WorkKind, KindStatus>,
}

impl RuntimeStatus {
    /// Zero totals for `kinds`.
    pub(crate) fn new(owner: &str, kinds: impl IntoIterator<Item = WorkKind>) -> Self {
        Self {
            owner: owner.to_owned(),
            kinds: kinds.into_iter().map(|k| (k, KindStatus::default())).collect(),
        }
    }

    /// The totals of every kind added up (recent errors left out).
    pub fn total(&self) -> KindStatus {
        let mut t = KindStatus::default();
        for k in self.kinds.values() {
            t.activations += k.activations;
            t.steady += k.steady;
            t.converging += k.converging;
            t.gone += k.gone;
            t.failed += k.failed;
            t.lease_lost += k.lease_lost;
            t.released += k.released;
            t.in_flight += k.in_flight;
        }
        t
    }
}
