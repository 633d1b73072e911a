//! Group calls: calls of one kind that arrive while earlier batches of them are at the
//! database (one, or up to a group's `lanes`) go together in the next batch — one query
//! or one transaction for all — instead of one round trip each (issue 31: an
//! activation's reads and commits were most of its round trips).
//!
//! Invariant: a call's request reaches the database only after the call began, so it
//! reads or writes what a call of its own would (a read sees every commit made before
//! the call began); no call waits for another to arrive — a call that finds fewer
//! batches in flight than the group's lanes goes at once — and each caller gets its own
//! answer. A batch runs in a task of its own, so a caller that is dropped (a cancelled
//! activation) never takes the others' answers with it.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

type Waiting<Req, Ans> = Vec<(Req, oneshot::Sender<Ans>)>;

/// The calls of one kind waiting for the next batch, and how many batches are running.
pub(crate) struct Group<Req, Ans> {
    state: Mutex<State<Req, Ans>>,
    /// Most calls in one batch.
    max: usize,
    /// Most batches at the database at once.
    lanes: usize,
}

struct State<Req, Ans> {
    pending: Waiting<Req, Ans>,
    /// Drains running (at most `lanes`).
    draining: usize,
}

impl<Req, Ans> std::fmt::Debug for Group<Req, Ans> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group").field("max", &self.max).finish_non_exhaustive()
    }
}

impl<Req: Send + 'static, Ans: Send + 'static> Group<Req, Ans> {
    /// A group sending at most `max` calls in one batch, one batch at a time.
    pub(crate) fn new(max: usize) -> Self {
        Self::with_lanes(max, 1)
    }

    /// A group sending at most `max` calls in one batch and up to `lanes` batches at
    /// once: a call that arrives while fewer are running goes at once.
    pub(crate) fn with_lanes(max: usize, lanes: usize) -> Self {
        let state = Mutex::new(State { pending: Vec::new(), draining: 0 });
        Self { state, max: max.max(1), lanes: lanes.max(1) }
    }

    /// Sends `req` in the next batch, which `run` carries out: it gets the batch's
    /// requests in order and answers each, in the same order. `None` when the batch
    /// ended without answering (it panicked, or the runtime is shutting down).
    pub(crate) async fn call<F, Fut>(self: &Arc<Self>, req: Req, run: F) -> Option<Ans>
    where
        F: Fn(Vec<Req>) -> Fut + Send + 'static,
        Fut: Future<Output = Vec<Ans>> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        if self.enqueue(req, tx) {
            let mut drain = Drain { group: self.clone(), ran_out: false };
            tokio::spawn(async move {
                while let Some(batch) = drain.next() {
                    let (reqs, answers): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
                    for (tx, a) in answers.into_iter().zip(run(reqs).await) {
                        let _ = tx.send(a);
                    }
                }
            });
        }
        rx.await.ok()
    }

    /// Puts a call in the next batch; `true` when fewer drains than lanes are running,
    /// so the caller must start one.
    fn enqueue(&self, req: Req, answer: oneshot::Sender<Ans>) -> bool {
        let mut s = self.lock();
        s.pending.push((req, answer));
        let start = s.draining < self.lanes;
        s.draining += usize::from(start);
        start
    }
}

impl<Req, Ans> Group<Req, Ans> {
    fn lock(&self) -> MutexGuard<'_, State<Req, Ans>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The one task sending batches while calls keep coming. However it ends (out of work,
/// a panic in `run`), the group is left ready for the next call to start another.
struct Drain<Req, Ans> {
    group: Arc<Group<Req, Ans>>,
    /// It found nothing waiting and gave up draining: from then on `draining` and
    /// `pending` belong to the next drain, which a call may already have started.
    ran_out: bool,
}

impl<Req, Ans> Drain<Req, Ans> {
    /// The next batch, or `None` (and no longer draining) when nothing waits.
    fn next(&mut self) -> Option<Waiting<Req, Ans>> {
        let mut s = self.group.lock();
        if s.pending.is_empty() {
            s.draining = s.draining.saturating_sub(1);
            self.ran_out = true;
            return None;
        }
        let take = s.pending.len().min(self.group.max);
        let rest = s.pending.split_off(take);
        Some(std::mem::replace(&mut s.pending, rest))
    }
}

impl<Req, Ans> Drop for Drain<Req, Ans> {
    fn drop(&mut self) {
        // A drain that ran out owns nothing: a call arriving after it let go has started
        // the next drain, and clearing here took that call's answer (it got
        // "interrupted": the chaos test's failure at e27f6b0).
        if self.ran_out {
            return;
        }
        // After a panic the callers still waiting are answered `None` (their senders go)
        // rather than left waiting for a task that is gone — unless another drain is
        // running, which takes them.
        let mut s = self.group.lock();
        s.draining = s.draining.saturating_sub(1);
        if s.draining == 0 {
            s.pending.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// The batches a runner was given, in order.
    type Batches = Arc<Mutex<Vec<Vec<u32>>>>;
    /// A runner's answers to one batch.
    type Answers = futures::future::BoxFuture<'static, Vec<u32>>;

    /// A batch runner that records each batch, waits for a permit of the gate, then
    /// answers each request times ten: the batches, the gate and the runner.
    fn gated() -> (Batches, Arc<tokio::sync::Semaphore>, impl Fn(Vec<u32>) -> Answers + Clone) {
        let batches = Arc::new(Mutex::new(Vec::new()));
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let run = {
            let (batches, gate) = (batches.clone(), gate.clone());
            move |reqs: Vec<u32>| {
                let (batches, gate) = (batches.clone(), gate.clone());
                let run: Answers = Box::pin(async move {
                    batches.lock().unwrap().push(reqs.clone());
                    gate.acquire().await.unwrap().forget();
                    reqs.iter().map(|r| r * 10).collect()
                });
                run
            }
        };
        (batches, gate, run)
    }

    /// With two lanes a call that finds one batch in flight goes at once, in a second;
    /// calls that find both busy wait and go together in the next.
    #[tokio::test]
    async fn with_two_lanes_a_second_batch_goes_beside_the_first() {
        let group = Arc::new(Group::<u32, u32>::with_lanes(100, 2));
        let (batches, gate, run) = gated();
        let call = |i: u32| {
            let (g, run) = (group.clone(), run.clone());
            tokio::spawn(async move { g.call(i, run).await })
        };
        let in_flight = |n: usize| {
            let batches = batches.clone();
            async move {
                for _ in 0..10_000 {
                    if batches.lock().unwrap().len() >= n {
                        return;
                    }
                    tokio::task::yield_now().await;
                }
                panic!("{n} batches never started");
            }
        };
        let first = call(1);
        in_flight(1).await;
        let second = call(2);
        in_flight(2).await;
        let later: Vec<_> = (3..=4).map(call).collect();
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        assert_eq!(batches.lock().unwrap().len(), 2, "both lanes busy: 3 and 4 wait");
        gate.add_permits(3);
        assert_eq!((first.await.unwrap(), second.await.unwrap()), (Some(10), Some(20)));
        let mut answers = Vec::new();
        for h in later {
            answers.push(h.await.unwrap());
        }
        assert_eq!(answers, vec![Some(30), Some(40)]);
        assert_eq!(*batches.lock().unwrap(), vec![vec![1], vec![2], vec![3, 4]]);
    }

    #[tokio::test]
    async fn a_call_alone_goes_alone_and_calls_meanwhile_go_together() {
        let group = Arc::new(Group::<u32, u32>::new(100));
        let (batches, gate, run) = gated();
        // The first call goes at once; three more arrive while it is at the "database".
        let first = tokio::spawn({
            let (g, run) = (group.clone(), run.clone());
            async move { g.call(1, run).await }
        });
        while batches.lock().unwrap().is_empty() {
            tokio::task::yield_now().await;
        }
        let later: Vec<_> = (2..=4)
            .map(|i| {
                let (g, run) = (group.clone(), run.clone());
                tokio::spawn(async move { g.call(i, run).await })
            })
            .collect();
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        gate.add_permits(2);
        assert_eq!(first.await.unwrap(), Some(10));
        let mut answers = Vec::new();
        for h in later {
            answers.push(h.await.unwrap());
        }
        assert_eq!(answers, vec![Some(20), Some(30), Some(40)]);
        assert_eq!(*batches.lock().unwrap(), vec![vec![1], vec![2, 3, 4]]);
    }

    #[tokio::test]
    async fn a_batch_that_panics_answers_none_and_the_group_goes_on() {
        let group = Arc::new(Group::<u32, u32>::new(10));
        let runs = Arc::new(AtomicUsize::new(0));
        let run = {
            let runs = runs.clone();
            move |reqs: Vec<u32>| {
                let n = runs.fetch_add(1, Ordering::SeqCst);
                async move {
                    assert!(n > 0, "the first batch fails");
                    reqs
                }
            }
        };
        assert_eq!(group.call(7, run.clone()).await, None);
        assert_eq!(group.call(8, run).await, Some(8));
    }

    #[tokio::test]
    async fn a_dropped_caller_does_not_stop_the_batch_it_was_sent_in() {
        let group = Arc::new(Group::<u32, u32>::new(10));
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let run = {
            let gate = gate.clone();
            move |reqs: Vec<u32>| {
                let gate = gate.clone();
                async move {
                    gate.acquire().await.unwrap().forget();
                    reqs
                }
            }
        };
        let lead = tokio::spawn({
            let (g, run) = (group.clone(), run.clone());
            async move { g.call(1, run).await }
        });
        tokio::task::yield_now().await;
        let other = tokio::spawn({
            let (g, run) = (group.clone(), run.clone());
            async move { g.call(2, run).await }
        });
        tokio::task::yield_now().await;
        lead.abort();
        gate.add_permits(2);
        assert_eq!(other.await.unwrap(), Some(2));
    }

    #[test]
    fn a_drain_that_ran_out_leaves_the_calls_of_the_next_drain_alone() {
        let group = Arc::new(Group::<u32, u32>::new(10));
        let mut old = Drain { group: group.clone(), ran_out: false };
        assert!(old.next().is_none(), "nothing waits");
        // A call arrives between the old drain letting go and its task ending, and
        // starts the next drain.
        let (tx, mut rx) = oneshot::channel();
        assert!(group.enqueue(1, tx), "the call leads the next drain");
        drop(old);
        assert!(
            matches!(rx.try_recv(), Err(oneshot::error::TryRecvError::Empty)),
            "the call still waits for its answer"
        );
        let mut next = Drain { group: group.clone(), ran_out: false };
        assert_eq!(next.next().map(|b| b.len()), Some(1), "the next drain sends it");
    }
}
