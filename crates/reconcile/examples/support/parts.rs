//! The reconcile benchmark's memory split by part (issue 31, item 3): a counting global
//! allocator (`tracking-allocator`) that files every Rust allocation under the part whose
//! code was running when it was made, and SQLite's own heap for the store.
//!
//! How a part is told: an allocation group entered while [`Tagged`] polls a future — the
//! benchmark wraps the runtime's rounds (every activation: its reconciler, its adapter's
//! client side, its store calls up to the driver) as [`Part::Runtime`]. Everything else
//! is [`Part::Simulator`]: the simulated cloud's servers and model (tasks of their own,
//! never polled inside a round), the HTTP client's connection tasks and the harness. The
//! store's part is measured by the benchmark itself: SQLite allocates with the C
//! allocator, which no Rust global allocator sees, so it is the in-memory database's
//! pages (`page_count × page_size`, freed pages included); on PostgreSQL the store is
//! another process. The allocator keeps each block's group beside it, so a block is
//! taken off the part that made it, wherever it is freed.
//!
//! Invariant: counting never changes what is allocated. Peaks are of live bytes per part
//! (each part's own high-water mark, not at one instant), allocator bytes rather than
//! resident pages: the process's `VmHWM` stays the figure of the whole.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::task::{Context, Poll};

use tracking_allocator::{
    AllocationGroupId, AllocationGroupToken, AllocationRegistry, AllocationTracker, Allocator,
};

/// What the memory belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The simulated cloud, the HTTP client's connection tasks and the harness.
    Simulator = 0,
    /// The runtime: claims, activations, reconcilers, adapters, store calls.
    Runtime = 1,
}

static LIVE: [AtomicI64; 2] = [AtomicI64::new(0), AtomicI64::new(0)];
static PEAK: [AtomicI64; 2] = [AtomicI64::new(0), AtomicI64::new(0)];

/// The global allocator: the system's, with a group id beside each block.
pub type Counting = Allocator<std::alloc::System>;

/// Every group but the root is one of the runtime's rounds.
fn part_of(group: &AllocationGroupId) -> usize {
    usize::from(*group != AllocationGroupId::ROOT)
}

fn add(part: usize, bytes: i64) {
    let now = LIVE[part].fetch_add(bytes, Ordering::Relaxed) + bytes;
    if bytes > 0 {
        PEAK[part].fetch_max(now, Ordering::Relaxed);
    }
}

struct Tracker;

impl AllocationTracker for Tracker {
    fn allocated(&self, _addr: usize, _object: usize, wrapped: usize, group: AllocationGroupId) {
        add(part_of(&group), wrapped as i64);
    }

    fn deallocated(
        &self,
        _addr: usize,
        _object: usize,
        wrapped: usize,
        source: AllocationGroupId,
        _current: AllocationGroupId,
    ) {
        add(part_of(&source), -(wrapped as i64));
    }
}

/// Starts counting (once, before the work to measure).
pub fn start() {
    if AllocationRegistry::set_global_tracker(Tracker).is_ok() {
        AllocationRegistry::enable_tracking();
    }
}

/// A future whose polls (and so whose allocations) belong to the runtime.
pub struct Tagged<F> {
    token: Option<AllocationGroupToken>,
    inner: Pin<Box<F>>,
}

/// Runs `future` as `part`.
pub fn tagged<F: Future>(part: Part, future: F) -> Tagged<F> {
    let token = match part {
        Part::Runtime => AllocationGroupToken::register(),
        Part::Simulator => None,
    };
    Tagged { token, inner: Box::pin(future) }
}

impl<F: Future> Future for Tagged<F> {
    type Output = F::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let _entered = this.token.as_mut().map(AllocationGroupToken::enter);
        this.inner.as_mut().poll(cx)
    }
}

/// The peak live bytes of `part`, in MiB.
pub fn peak_mib(part: Part) -> f64 {
    PEAK[part as usize].load(Ordering::Relaxed) as f64 / (1024.0 * 1024.0)
}
