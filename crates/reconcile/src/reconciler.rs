//! The contract between the runtime and each reconciler: what one activation receives
//! ([`Activation`]), what it answers ([`Outcome`] or [`ReconcileError`]), and the ports it
//! works through ([`Deps`]).
//!
//! Invariant: a reconciler decides from (desired, observed, now) alone; the runtime owns
//! scheduling (leases, renewals, backoff with jitter, the steady resync) and never
//! passes a hint of what changed.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bc_domain::ports::{Clock, ClusterApi, Fence, Store, WorkItem, WorkKind};
use bc_domain::{ProviderError, StoreError, Timestamp};

use crate::observe::Observer;

/// Deployment settings the reconcilers need.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The server's public URL, written into each substrate's `bcd-join` Secret
    /// (`serverUrl`): what bcd calls.
    pub public_url: String,
    /// The bcd container image of the DaemonSet.
    pub bcd_image: String,
}

/// The ports every reconciler works through (shared by all activations).
#[derive(Clone)]
pub struct Deps {
    /// The store (desired and observed state, work queue, outbox).
    pub store: Arc<dyn Store>,
    /// Provider access: budgeted provider instances and shared account listings.
    pub observer: Arc<dyn Observer>,
    /// Kubernetes API access to a cluster, given its credentials.
    pub clusters: Arc<dyn ClusterApi>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// Settings.
    pub settings: Settings,
}

/// One activation: the claimed item, the fence its commits must carry, and `now`.
#[derive(Debug, Clone)]
pub struct Activation {
    /// The claimed work item (kind, key, attempts so far).
    pub item: WorkItem,
    /// The lease fence; every unit of work committed during this activation carries it
    /// (`UnitOfWork::fenced`).
    pub fence: Fence,
    /// The time the activation started (decisions take it; long activations read the
    /// clock again where a later time matters).
    pub now: Timestamp,
}

impl Activation {
    /// The key: the id of the object to converge.
    pub fn key(&self) -> &str {
        &self.item.key
    }

    /// `Ok` while this activation still holds its item's lease, as the store has it now;
    /// else [`ReconcileError::LeaseLost`]. Checked before each provider (or cluster)
    /// mutation: a fenced commit refuses a write after the lease is lost, but nothing can
    /// take back a call, so an activation whose renewals failed and whose item another
    /// replica took makes none.
    pub async fn ensure_held(&self, deps: &Deps) -> Result<(), ReconcileError> {
        let Fence::Work { kind, key, owner } = &self.fence else { return Ok(()) };
        let now = deps.clock.now();
        let held = deps.store.work_get(*kind, key).await?.is_some_and(|i| {
            i.lease_owner.as_deref() == Some(owner.as_str())
                && i.lease_until.is_some_and(|u| u > now)
        });
        if held { Ok(()) } else { Err(ReconcileError::LeaseLost) }
    }
}

/// What a successful activation asks of the runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Converged: check again on the steady resync (the runtime's long, jittered period).
    Steady,
    /// Still converging: run again after this wait, tuned to what it waits for (a
    /// cluster being provisioned takes minutes; a load balancer becoming active, tens of
    /// seconds).
    Converging {
        /// The wait before the next activation.
        after: Duration,
    },
    /// The object is in `error`, its cause recorded in its status (`message`, also the
    /// item's `lastError`): look again after a capped, jittered backoff from `after` that
    /// grows with each run ending so in a row (the item's `attempts`, kept until a run
    /// ends otherwise). A fix that changes desired state enqueues the object at once.
    Failing {
        /// The shortest wait (the first retry's).
        after: Duration,
        /// The cause, as the object shows it (no secret).
        message: String,
    },
    /// The object is gone for good (deleted, or never existed): drop the work item.
    Gone,
}

/// Why an activation failed. Every variant but [`ReconcileError::LeaseLost`] is retried
/// with capped, jittered backoff and recorded as the item's `lastError` (so its text
/// never carries a secret).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// Another replica took the lease over: stop, commit nothing more.
    #[error("lease lost")]
    LeaseLost,
    /// The provider failed in a way retrying may fix (throttling, 5xx, timeouts).
    #[error("provider: {0}")]
    Provider(ProviderError),
    /// The store failed.
    #[error("store: {0}")]
    Store(StoreError),
    /// Anything else worth retrying, with a message for `lastError`.
    #[error("{0}")]
    Other(String),
}

impl From<StoreError> for ReconcileError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::LeaseLost(_) => ReconcileError::LeaseLost,
            other => ReconcileError::Store(other),
        }
    }
}

impl From<ProviderError> for ReconcileError {
    fn from(e: ProviderError) -> Self {
        ReconcileError::Provider(e)
    }
}

/// A reconciler of one kind.
#[async_trait]
pub trait Reconciler: Send + Sync {
    /// The work kind it claims.
    fn kind(&self) -> WorkKind;
    /// Converges the object named by `activation.key()` one step further. Errors that
    /// are the object's own (a provider refusal, a foreign Kubernetes object) are not
    /// `Err`: they are recorded on the object (`error` state with its message) and
    /// answered with an [`Outcome`].
    async fn reconcile(
        &self,
        deps: &Deps,
        activation: &Activation,
    ) -> Result<Outcome, ReconcileError>;
}
