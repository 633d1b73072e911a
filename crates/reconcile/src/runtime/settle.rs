//! Group settling: the runs of one runtime that end together are settled in the queue
//! together, in one [`WorkQueue::settle`] call (one statement on the SQL store) instead
//! of one round trip each.
//!
//! Invariant: each run's settle is exactly what its own `requeue`, `fail` or `defer`
//! would be (the store applies each only while its owner holds the item, and answers per
//! item); batching only changes how many go in one call. No run waits for another to
//! finish: a run whose turn comes settles whatever is pending at that moment, its own
//! included, and a run alone settles alone at once, so an idle runtime adds no delay.

use bc_domain::StoreError;
use bc_domain::ports::{Settlement, WorkQueue};

use crate::together::Together;

type Answer = Result<bool, StoreError>;

/// The runs waiting to be settled, and the turn to settle them.
#[derive(Default)]
pub(crate) struct Settler {
    together: Together<Settlement, Answer>,
}

impl Settler {
    /// Settles `s` in `queue`, with whatever else is pending when its turn comes; whether
    /// its owner held it.
    pub(crate) async fn settle<Q: WorkQueue + ?Sized>(&self, queue: &Q, s: Settlement) -> Answer {
        let run = |batch: Vec<Settlement>| async move {
            match queue.settle(&batch).await {
                Ok(held) => held.into_iter().map(Ok).collect(),
                Err(e) => batch.iter().map(|_| Err(e.clone())).collect(),
            }
        };
        self.together.call(s, run, || Err(interrupted())).await
    }
}

/// The run that took this settle along was stopped before it answered (shutdown): the
/// item's lease runs out and it is taken over, as after any failed settle.
fn interrupted() -> StoreError {
    StoreError::Unavailable("settling was interrupted".into())
}
