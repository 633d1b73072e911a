//! Group settling: the runs of one runtime that end together are settled in the queue
//! together, in one [`WorkQueue::settle`] call (one statement on the SQL store) instead
//! of one round trip each.
//!
//! Invariant: each run's settle is exactly what its own `requeue`, `fail` or `defer`
//! would be (the store applies each only while its owner holds the item, and answers per
//! item); batching only changes how many go in one call. No run waits for another to
//! finish: a run whose turn comes settles whatever is pending at that moment, its own
//! included, and a run alone settles alone at once, so an idle runtime adds no delay.

use std::sync::Mutex;

use bc_domain::StoreError;
use bc_domain::ports::{Settlement, WorkQueue};
use tokio::sync::oneshot;

type Answer = Result<bool, StoreError>;

/// The runs waiting to be settled, and the turn to settle them.
#[derive(Default)]
pub(crate) struct Settler {
    pending: Mutex<Vec<(Settlement, oneshot::Sender<Answer>)>>,
    turn: tokio::sync::Mutex<()>,
}

impl Settler {
    /// Settles `s` in `queue`, with whatever else is pending when its turn comes; whether
    /// its owner held it.
    pub(crate) async fn settle<Q: WorkQueue + ?Sized>(&self, queue: &Q, s: Settlement) -> Answer {
        let (tx, mut rx) = oneshot::channel();
        self.lock().push((s, tx));
        let turn = self.turn.lock().await;
        // The run before took ours along (it answers before it gives the turn up).
        match rx.try_recv() {
            Ok(answer) => return answer,
            Err(oneshot::error::TryRecvError::Closed) => return Err(interrupted()),
            Err(oneshot::error::TryRecvError::Empty) => {}
        }
        let (batch, answers): (Vec<_>, Vec<_>) =
            std::mem::take(&mut *self.lock()).into_iter().unzip();
        match queue.settle(&batch).await {
            Ok(held) => {
                for (tx, h) in answers.into_iter().zip(held) {
                    let _ = tx.send(Ok(h));
                }
            }
            Err(e) => {
                for tx in answers {
                    let _ = tx.send(Err(e.clone()));
                }
            }
        }
        drop(turn);
        rx.await.unwrap_or_else(|_| Err(interrupted()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Settlement, oneshot::Sender<Answer>)>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The run that took this settle along was stopped before it answered (shutdown): the
/// item's lease runs out and it is taken over, as after any failed settle.
fn interrupted() -> StoreError {
    StoreError::Unavailable("settling was interrupted".into())
}
