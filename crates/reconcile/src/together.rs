//! Taking turns together: calls of one kind that wait for the same turn (a store write
//! that must not race another of its kind) are carried out together by whichever of
//! them gets the turn, one store call for all of them instead of one each (issue 31:
//! settles, and the budget's compare-and-swap, every provider request paying one).
//!
//! Invariant: no call waits for another to arrive — a call whose turn comes carries out
//! whatever is pending at that moment, its own included, so a call alone goes at once —
//! and each caller gets its own answer, in the order the calls were made. A batch is
//! carried out under the turn, so batches of one kind never overlap.

use std::future::Future;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::oneshot;

type Pending<Req, Ans> = Vec<(Req, oneshot::Sender<Ans>)>;

/// The calls waiting for the next turn, and the turn.
pub(crate) struct Together<Req, Ans> {
    pending: Mutex<Pending<Req, Ans>>,
    turn: tokio::sync::Mutex<()>,
}

impl<Req, Ans> Default for Together<Req, Ans> {
    fn default() -> Self {
        Self { pending: Mutex::new(Vec::new()), turn: tokio::sync::Mutex::new(()) }
    }
}

impl<Req, Ans> Together<Req, Ans> {
    /// Carries out `req` with whatever else is pending when its turn comes: `run` gets the
    /// requests in the order they were made and answers each, in that order. A call the
    /// turn before took along gets that batch's answer; `interrupted` is the answer of a
    /// call whose batch was dropped unanswered (its caller was cancelled mid-batch).
    pub(crate) async fn call<F, Fut>(&self, req: Req, run: F, interrupted: fn() -> Ans) -> Ans
    where
        F: FnOnce(Vec<Req>) -> Fut,
        Fut: Future<Output = Vec<Ans>>,
    {
        let (tx, mut rx) = oneshot::channel();
        self.lock().push((req, tx));
        let turn = self.turn.lock().await;
        // The turn before took ours along (it answers before it gives the turn up).
        match rx.try_recv() {
            Ok(answer) => return answer,
            Err(oneshot::error::TryRecvError::Closed) => return interrupted(),
            Err(oneshot::error::TryRecvError::Empty) => {}
        }
        let (batch, answers): (Vec<_>, Vec<_>) =
            std::mem::take(&mut *self.lock()).into_iter().unzip();
        for (tx, a) in answers.into_iter().zip(run(batch).await) {
            let _ = tx.send(a);
        }
        drop(turn);
        rx.await.unwrap_or_else(|_| interrupted())
    }

    fn lock(&self) -> MutexGuard<'_, Pending<Req, Ans>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn calls_waiting_for_the_turn_go_in_one_batch_each_with_its_own_answer() {
        let together = Arc::new(Together::<u32, u32>::default());
        let batches = Arc::new(Mutex::new(Vec::new()));
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let run = |batches: Arc<Mutex<Vec<Vec<u32>>>>, gate: Arc<tokio::sync::Semaphore>| {
            move |reqs: Vec<u32>| async move {
                batches.lock().unwrap().push(reqs.clone());
                gate.acquire().await.unwrap().forget();
                reqs.iter().map(|r| r * 10).collect()
            }
        };
        let spawn = |i: u32| {
            let (t, b, g) = (together.clone(), batches.clone(), gate.clone());
            tokio::spawn(async move { t.call(i, run(b, g), || 0).await })
        };
        // The first call takes the turn at once; three more arrive while it runs.
        let first = spawn(1);
        while batches.lock().unwrap().is_empty() {
            tokio::task::yield_now().await;
        }
        let later: Vec<_> = (2..=4).map(spawn).collect();
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        gate.add_permits(2);
        assert_eq!(first.await.unwrap(), 10);
        let mut answers = Vec::new();
        for h in later {
            answers.push(h.await.unwrap());
        }
        assert_eq!(answers, vec![20, 30, 40]);
        assert_eq!(*batches.lock().unwrap(), vec![vec![1], vec![2, 3, 4]]);
    }
}
