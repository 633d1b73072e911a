//! The runtime: claims due work items of each kind with leases, runs them on their
//! reconciler with bounded concurrency per kind, keeps each lease renewed while its
//! activation runs, and settles every item by its outcome (requeue after the steady
//! resync or the converging wait, complete when gone, fail with backoff on error, defer
//! to when the account's call budget frees a call on a budget denial).
//!
//! Invariant: an item is worked on only under its lease, every activation's commits
//! carry that lease's fence (the holder name of that one claim, so a replica that
//! claims an item again fences off its own earlier activation), and an activation whose lease is lost (renewal refused, or
//! a fenced commit refused) stops and writes nothing more — no `fail`, no `requeue` —
//! so a replica that lost an item can never disturb its new holder. Nothing in memory
//! outlives an activation but the queue itself: scheduling lives in the store
//! (`not_before`), so a restart or another replica picks up exactly where work stands.

pub mod schedule;
mod settle;
mod status;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bc_domain::ports::{Settle, Settlement, WorkItem, WorkKind, settle_each};
use bc_domain::{ProviderError, StoreError};
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::reconciler::{Activation, Deps, Outcome, ReconcileError, Reconciler};
use schedule::{Jitter, Schedule, later};
use settle::Settler;
pub use status::{ActivationReport, ActivationResult, KindStatus, RecentError, RuntimeStatus};

/// The longest `lastError` the runtime records, in characters.
pub const LAST_ERROR_CAP: usize = 1_000;

/// How the runtime schedules work.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// This replica's lease owner name: unique per replica (a host name plus a random
    /// suffix, say), since holding a lease is by owner alone.
    pub owner: String,
    /// How long a claim holds an item before another replica may take it over.
    pub lease: Duration,
    /// How often a running activation renews its lease (well under `lease`).
    pub renew_every: Duration,
    /// How often each kind looks for due work when nothing wakes it (writes of other
    /// processes); writes of this process wake it at once through the work notify.
    pub poll: Duration,
    /// Activations of one kind running at once, unless `concurrency_by_kind` says
    /// otherwise.
    pub concurrency: usize,
    /// Per-kind overrides of `concurrency`.
    pub concurrency_by_kind: BTreeMap<WorkKind, usize>,
    /// Resync, converging and backoff waits.
    pub schedule: Schedule,
    /// On shutdown, how long in-flight activations may take to finish before they are
    /// stopped and their leases released.
    pub shutdown_grace: Duration,
    /// The seed of the jitter generator.
    pub seed: u64,
    /// Settle runs that end together in one store call (on by default; off, each run
    /// settles alone, one round trip each, as before issue 31: kept to measure against).
    pub settle_together: bool,
}

impl RuntimeConfig {
    /// The defaults for replica `owner`: 30 s leases renewed every 10 s, a 1 s poll, 32
    /// activations per kind, the default [`Schedule`], 10 s to finish on shutdown.
    pub fn new(owner: impl Into<String>) -> Self {
        Self {
            owner: owner.into(),
            lease: Duration::from_secs(30),
            renew_every: Duration::from_secs(10),
            poll: Duration::from_secs(1),
            concurrency: 32,
            concurrency_by_kind: BTreeMap::new(),
            schedule: Schedule::default(),
            shutdown_grace: Duration::from_secs(10),
            seed: 0x5eed,
            settle_together: true,
        }
    }

    /// The concurrency of `kind`.
    pub fn concurrency_of(&self, kind: WorkKind) -> usize {
        self.concurrency_by_kind.get(&kind).copied().unwrap_or(self.concurrency).max(1)
    }
}

/// Lease epochs: one number per claim in this process, so no two claims share a holder
/// name (replicas differ by their owner names).
static LEASE_EPOCH: AtomicU64 = AtomicU64::new(0);

/// The lease holder name of one claim by replica `owner`: `owner#epoch`, the epoch
/// bumped on every claim.
pub fn lease_holder(owner: &str) -> String {
    let epoch = LEASE_EPOCH.fetch_add(1, Ordering::Relaxed) + 1;
    format!("{owner}#{epoch}")
}

/// Why a runtime could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeError {
    /// Two reconcilers claim the same kind.
    #[error("two reconcilers claim kind {0}")]
    DuplicateKind(WorkKind),
}

/// The runtime of one replica: its reconcilers, one per kind, and their scheduling.
pub struct Runtime {
    deps: Deps,
    reconcilers: BTreeMap<WorkKind, Arc<dyn Reconciler>>,
    config: RuntimeConfig,
    jitter: Mutex<Jitter>,
    status: Mutex<RuntimeStatus>,
    work_notify: Arc<Notify>,
    settler: Settler,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("owner", &self.config.owner)
            .field("kinds", &self.reconcilers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Runtime {
    /// A runtime running `reconcilers` (any kinds, one reconciler per kind) on `deps`.
    pub fn new(
        deps: Deps,
        reconcilers: Vec<Arc<dyn Reconciler>>,
        config: RuntimeConfig,
    ) -> Result<Self, RuntimeError> {
        let mut by_kind = BTreeMap::new();
        for r in reconcilers {
            let kind = r.kind();
            if by_kind.insert(kind, r).is_some() {
                return Err(RuntimeError::DuplicateKind(kind));
            }
        }
        let status = RuntimeStatus::new(&config.owner, by_kind.keys().copied());
        Ok(Self {
            deps,
            reconcilers: by_kind,
            jitter: Mutex::new(Jitter::new(config.seed)),
            config,
            status: Mutex::new(status),
            work_notify: Arc::new(Notify::new()),
            settler: Settler::default(),
        })
    }

    /// Wakes the claim loops on `notify` (the API's "work notify": it calls
    /// `notify_waiters()` after each commit that enqueued work).
    pub fn with_work_notify(mut self, notify: Arc<Notify>) -> Self {
        self.work_notify = notify;
        self
    }

    /// The work notify the claim loops wait on.
    pub fn work_notify(&self) -> Arc<Notify> {
        self.work_notify.clone()
    }

    /// The kinds this runtime runs.
    pub fn kinds(&self) -> Vec<WorkKind> {
        self.reconcilers.keys().copied().collect()
    }

    /// The configuration.
    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// The ports.
    pub fn deps(&self) -> &Deps {
        &self.deps
    }

    /// What the activations so far came to (for `/metrics` and logs).
    pub fn status(&self) -> RuntimeStatus {
        self.status.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn draw(&self) -> f64 {
        self.jitter.lock().unwrap_or_else(|e| e.into_inner()).unit()
    }

    /// Claims up to `max` due items of `kind` for this replica, under a lease holder
    /// name of this claim alone ([`lease_holder`]): the replica's owner name with a
    /// lease epoch bumped on every claim. So when this replica takes an item again
    /// (its renewals failed past the lease while the first activation still runs),
    /// the first activation's fence no longer holds: `ensure_held` and every fenced
    /// commit refuse it, as they would for another replica.
    pub async fn claim(&self, kind: WorkKind, max: usize) -> Result<Vec<WorkItem>, StoreError> {
        if !self.reconcilers.contains_key(&kind) || max == 0 {
            return Ok(Vec::new());
        }
        let now = self.deps.clock.now();
        let until = later(now, self.config.lease);
        let max = u32::try_from(max).unwrap_or(u32::MAX);
        let holder = lease_holder(&self.config.owner);
        self.deps.store.claim(&holder, &[kind], max, now, until).await
    }

    /// Renews `item`'s lease every `renew_every` for as long as it is held; returns
    /// only when a renewal is refused (another claim holds the item now).
    async fn hold(&self, item: &WorkItem) {
        let Some(holder) = item.lease_owner.as_deref() else { return };
        loop {
            tokio::time::sleep(self.config.renew_every).await;
            let until = later(self.deps.clock.now(), self.config.lease);
            match self.deps.store.extend(item.kind, &item.key, holder, until).await {
                Ok(true) => {}
                Ok(false) => return,
                // A store hiccup: try again next time; fenced commits keep us safe
                // meanwhile, and a lease that does run out is refused at the next try.
                Err(e) => {
                    tracing::warn!(kind = %item.kind, key = %item.key, error = %e, "lease renewal failed")
                }
            }
        }
    }

    /// Runs one claimed item on its reconciler and settles it in the queue. `stop`
    /// cancels the activation (shutdown past its grace): its lease is released.
    pub async fn activate(&self, item: WorkItem, stop: &CancellationToken) -> ActivationReport {
        let started = self.deps.clock.now();
        let (kind, key) = (item.kind, item.key.clone());
        self.record(kind, |s| s.in_flight += 1);
        let result = self.run_and_settle(item, stop).await;
        let finished = self.deps.clock.now();
        let report = ActivationReport { kind, key, result, started, finished };
        self.record(kind, |s| {
            s.in_flight = s.in_flight.saturating_sub(1);
            s.count(&report);
        });
        if let ActivationResult::Failed { error, .. } = &report.result {
            tracing::warn!(%kind, key = %report.key, %error, "activation failed");
        }
        report
    }

    fn record(&self, kind: WorkKind, f: impl FnOnce(&mut KindStatus)) {
        let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        f(status.kinds.entry(kind).or_default());
    }

    async fn run_and_settle(&self, item: WorkItem, stop: &CancellationToken) -> ActivationResult {
        let Some(reconciler) = self.reconcilers.get(&item.kind).cloned() else {
            return ActivationResult::Failed {
                error: format!("no reconciler runs kind {}", item.kind),
                retry_at: None,
            };
        };
        let Some(fence) = item.fence() else {
            // Only claimed items reach here; an unleased one is a caller's bug.
            return ActivationResult::LeaseLost;
        };
        let activation = Activation { item: item.clone(), fence, now: self.deps.clock.now() };
        let outcome = tokio::select! {
            biased;
            r = reconciler.reconcile(&self.deps, &activation) => Some(r),
            () = self.hold(&item) => return ActivationResult::LeaseLost,
            () = stop.cancelled() => None,
        };
        let Some(owner) = item.lease_owner.as_deref() else {
            return ActivationResult::LeaseLost;
        };
        let (kind, key) = (item.kind, item.key.as_str());
        let queue = &self.deps.store;
        let now = self.deps.clock.now();
        // Runs that end together settle together (`settle`): one round trip for all.
        let settle = |how: Settle, result: ActivationResult| async move {
            let s = Settlement { kind, key: key.to_owned(), owner: owner.to_owned(), how };
            let store = self.deps.store.as_ref();
            let held = if self.config.settle_together {
                self.settler.settle(store, s).await
            } else {
                settle_each(store, std::slice::from_ref(&s)).await.map(|h| h.first() == Some(&true))
            };
            held.map(|h| (h, result))
        };
        let settled: Result<(bool, ActivationResult), StoreError> = match outcome {
            None => queue.release(kind, key, owner).await.map(|h| (h, ActivationResult::Released)),
            Some(Ok(Outcome::Gone)) => {
                queue.complete(kind, key, owner).await.map(|h| (h, ActivationResult::Gone))
            }
            Some(Ok(Outcome::Steady)) => {
                let at = later(now, self.config.schedule.steady(self.draw()));
                settle(Settle::Requeue { at }, ActivationResult::Steady { at }).await
            }
            Some(Ok(Outcome::Converging { after })) => {
                let at = later(now, self.config.schedule.converging(after, self.draw()));
                settle(Settle::Requeue { at }, ActivationResult::Converging { at }).await
            }
            Some(Ok(Outcome::Failing { after, message })) => {
                // Counted like a failure (attempts grow, the cause is the lastError), so
                // the wait backs off; the activation itself went as it should.
                let attempts = item.attempts.saturating_add(1);
                let at = later(now, self.config.schedule.erring(attempts, after, self.draw()));
                let error: String = message.chars().take(LAST_ERROR_CAP).collect();
                settle(Settle::Fail { error, at }, ActivationResult::Converging { at }).await
            }
            Some(Err(ReconcileError::LeaseLost)) => return ActivationResult::LeaseLost,
            Some(Err(
                e @ ReconcileError::Provider(ProviderError::OverBudget { retry_after_ms }),
            )) => {
                let named = Duration::from_millis(retry_after_ms);
                let at = later(now, self.config.schedule.over_budget(named, self.draw()));
                let why: String = e.to_string().chars().take(LAST_ERROR_CAP).collect();
                settle(Settle::Defer { why, at }, ActivationResult::OverBudget { at }).await
            }
            Some(Err(e)) => {
                let attempts = item.attempts.saturating_add(1);
                let at = later(now, self.config.schedule.failed(attempts, &e, self.draw()));
                // Every error's text is built without secrets (provider messages are
                // scrubbed and capped where they are classified); this cap only bounds
                // what the queue row holds.
                let error: String = e.to_string().chars().take(LAST_ERROR_CAP).collect();
                let r = ActivationResult::Failed { error: error.clone(), retry_at: Some(at) };
                settle(Settle::Fail { error, at }, r).await
            }
        };
        match settled {
            Ok((true, result)) => result,
            // The settle found the lease in other hands: it changed nothing.
            Ok((false, _)) => ActivationResult::LeaseLost,
            Err(e) => ActivationResult::Failed {
                error: format!("settling the item failed: {e}"),
                retry_at: None,
            },
        }
    }

    /// Runs every kind until `cancel` fires: per kind, claims due items while slots are
    /// free — again as soon as [`refill_at`] of them free while more is due, else on the
    /// work notify or after `poll`. On cancel it stops claiming, lets
    /// in-flight activations finish for `shutdown_grace`, then stops the rest and
    /// releases their leases.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        let stop = CancellationToken::new();
        let mut loops = JoinSet::new();
        for kind in self.kinds() {
            let (rt, cancel, stop) = (self.clone(), cancel.clone(), stop.clone());
            loops.spawn(async move { rt.kind_loop(kind, cancel, stop).await });
        }
        cancel.cancelled().await;
        let grace = tokio::time::sleep(self.config.shutdown_grace);
        tokio::pin!(grace);
        loop {
            tokio::select! {
                joined = loops.join_next() => if joined.is_none() { break },
                () = &mut grace, if !stop.is_cancelled() => stop.cancel(),
            }
        }
    }

    async fn kind_loop(
        self: Arc<Self>,
        kind: WorkKind,
        cancel: CancellationToken,
        stop: CancellationToken,
    ) {
        let concurrency = self.config.concurrency_of(kind);
        let slots = Arc::new(Semaphore::new(concurrency));
        let refill = u32::try_from(refill_at(concurrency)).unwrap_or(u32::MAX);
        let mut running = JoinSet::new();
        while !cancel.is_cancelled() {
            while running.try_join_next().is_some() {}
            // Registered before the claim, so a wake-up during the claim is not lost.
            let notify = self.work_notify.clone();
            let woken = notify.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let free = slots.available_permits();
            let mut filled = false;
            if refill_due(free, concurrency) {
                match self.claim(kind, free).await {
                    Ok(items) => {
                        filled = items.len() == free;
                        for item in items {
                            let Ok(permit) = slots.clone().try_acquire_owned() else { break };
                            let (rt, stop) = (self.clone(), stop.clone());
                            running.spawn(async move {
                                rt.activate(item, &stop).await;
                                drop(permit);
                            });
                        }
                    }
                    Err(e) => tracing::warn!(%kind, error = %e, "claiming work failed"),
                }
            }
            // More may be due (the claim took all it asked for, or there was no room to
            // ask): claim again as soon as enough slots free — at once if they have. A
            // claim that found less than it asked for waits for the notify or the poll.
            let more = filled || !refill_due(free, concurrency);
            if more && refill_due(slots.available_permits(), concurrency) {
                continue;
            }
            tokio::select! {
                () = &mut woken => {}
                () = tokio::time::sleep(self.config.poll) => {}
                () = cancel.cancelled() => {}
                Ok(p) = slots.acquire_many(refill), if more => drop(p),
            }
        }
        while running.join_next().await.is_some() {}
    }
}

/// How many of a kind's `concurrency` slots must be free before its loop claims again
/// while work is still due: a quarter. Claiming the moment one slot frees made a claim
/// (a write at the store's one writer) per activation and left each commit alone; at a
/// quarter a claim takes a batch and the slots never drain (measured in
/// docs/benchmarks.md, issue 31, eleventh round).
pub fn refill_at(concurrency: usize) -> usize {
    (concurrency / 4).max(1)
}

/// Whether a kind's loop with `free` of its `concurrency` slots free claims now.
pub fn refill_due(free: usize, concurrency: usize) -> bool {
    free >= refill_at(concurrency)
}
