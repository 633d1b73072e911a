//! The per-request gate of provider calls: a caller that keeps a provider budget runs a
//! port call inside [`gated`], and the adapter asks [`admit_request`] before every HTTP
//! request it sends — each page of a listing, each retry — so the budget counts what the
//! provider counts (DigitalOcean's per-token limit, GKE's requests per minute per
//! project), not port calls.
//!
//! Invariant: a gate admits the requests of the call it was given to, and only those (it
//! is in place while that call's future is polled, on whichever thread polls it, and the
//! previous one is back after each poll, also when the poll panics); an adapter sends no
//! request its gate refused. Plain `std`: no runtime is named, nothing here does I/O.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use async_trait::async_trait;

use super::provider::ProviderResult;

/// Admits a provider's HTTP requests, one per call of [`RequestGate::admit`].
#[async_trait]
pub trait RequestGate: Send + Sync {
    /// Takes one request from the budget, or says why not (`OverBudget` with the wait;
    /// `Transient` when the budget cannot be read).
    async fn admit(&self) -> ProviderResult<()>;
}

thread_local! {
    static GATE: RefCell<Option<Arc<dyn RequestGate>>> = const { RefCell::new(None) };
}

/// `call`, with `gate` admitting each request an adapter sends while it runs.
pub fn gated<F: Future>(gate: Arc<dyn RequestGate>, call: F) -> Gated<F> {
    Gated { gate: Some(gate), call: Box::pin(call) }
}

/// The future of [`gated`].
pub struct Gated<F> {
    gate: Option<Arc<dyn RequestGate>>,
    call: Pin<Box<F>>,
}

/// Puts the gate in place for one poll; puts the previous one back when dropped.
struct InPlace(Option<Arc<dyn RequestGate>>);

impl Drop for InPlace {
    fn drop(&mut self) {
        let previous = self.0.take();
        GATE.with(|g| *g.borrow_mut() = previous);
    }
}

impl<F: Future> Future for Gated<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let _in_place = InPlace(GATE.with(|g| g.replace(this.gate.clone())));
        this.call.as_mut().poll(cx)
    }
}

/// For adapters, before each request they send: one admission from the gate of the call
/// they run in. Without one (a caller that keeps no budget) the request goes.
pub async fn admit_request() -> ProviderResult<()> {
    let gate = GATE.with(|g| g.borrow().clone());
    match gate {
        Some(gate) => gate.admit().await,
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ProviderError;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Admits `left` requests, then refuses.
    struct Counted {
        admitted: AtomicU32,
        left: u32,
    }

    #[async_trait]
    impl RequestGate for Counted {
        async fn admit(&self) -> ProviderResult<()> {
            if self.admitted.load(Ordering::SeqCst) == self.left {
                return Err(ProviderError::OverBudget { retry_after_ms: 1000 });
            }
            self.admitted.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    /// Polls a future that never waits to its end.
    fn ready<F: Future>(f: F) -> F::Output {
        let mut f = Box::pin(f);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match f.as_mut().poll(&mut cx) {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("never pending"),
        }
    }

    #[test]
    fn each_request_of_the_call_is_admitted_by_its_gate_and_only_by_it() {
        let gate = Arc::new(Counted { admitted: AtomicU32::new(0), left: 2 });
        let pages = async {
            let mut sent = 0;
            for _ in 0..3 {
                if admit_request().await.is_err() {
                    break;
                }
                sent += 1;
            }
            sent
        };
        assert_eq!(ready(gated(gate.clone(), pages)), 2, "the third page is refused");
        assert_eq!(gate.admitted.load(Ordering::SeqCst), 2);
        // Outside the call no gate is in place.
        assert_eq!(ready(admit_request()), Ok(()));
        assert_eq!(gate.admitted.load(Ordering::SeqCst), 2);
    }
}
