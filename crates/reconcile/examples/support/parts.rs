//! The reconcile benchmark's memory split by part (issue 31, item 3): a counting global
//! allocator (`tracking-allocator`) that files every Rust allocation under the part whose
//! code was running when it was made, and SQLite's own heap for the store.
//!
//! How a part is told: an allocation group entered while [`Tagged`] polls a future (or
//! [`within`] runs a closure). The benchmark wraps the runtime's rounds (every
//! activation: its reconciler, its adapter's client side, its store calls up to the
//! driver) as [`Group::Round`], and inside a round the kube clients being made
//! ([`Group::Connect`], runtime too) and the simulated cluster APIs that answer the kube
//! client in process ([`Group::InProcessCluster`]: the simulator's code and objects,
//! reached without a socket, so inline in the round's poll; [`Group::ClusterRouter`]:
//! the router each in-process client is given, where a network client has its
//! transport). Everything else is
//! [`Part::Simulator`]: the simulated cloud's servers and model (tasks of their own),
//! the HTTP client's connection tasks and the harness. The store's part is measured by
//! the benchmark itself: SQLite allocates with the C allocator, which no Rust global
//! allocator sees, so it is the in-memory database's pages (`page_count × page_size`,
//! freed pages included); on PostgreSQL the store is another process. The allocator
//! keeps each block's group beside it, so a block is taken off the group that made it,
//! wherever it is freed.
//!
//! A group's kind is its id modulo [`KINDS`] (a token is registered until its id has the
//! kind asked for), so telling an allocation's part takes no table and no lock.
//!
//! Each thread adds its allocations up on its own and adds them to the shared totals
//! once a group kind's sum moves [`FLUSH_AT`] bytes: two locked adds on lines every thread
//! writes, on every allocation and free, were a fifth of the converge's busiest thread.
//!
//! Invariant: counting never changes what is allocated. Peaks are of live bytes per part
//! (each part's own high-water mark, not at one instant), allocator bytes rather than
//! resident pages: the process's `VmHWM` stays the figure of the whole. A total read is
//! within `FLUSH_AT` per thread and group kind of the exact one (what threads hold unadded).

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::task::{Context, Poll};

use tracking_allocator::{
    AllocationGroupId, AllocationGroupToken, AllocationRegistry, AllocationTracker, Allocator,
};

/// What the memory belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The simulated cloud (its in-process cluster APIs included), the HTTP client's
    /// connection tasks and the harness.
    Simulator = 0,
    /// The runtime: claims, activations, reconcilers, adapters, store calls.
    Runtime = 1,
}

/// What code was running, finer than [`Part`]: the groups the benchmark enters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// A round of the runtime (runtime).
    Round = 1,
    /// A simulated cluster API answering the kube client in process (simulator).
    InProcessCluster = 2,
    /// A kube client being made, `ClusterApi::connect` (runtime).
    Connect = 3,
    /// A simulated cluster's API router being built for a kube client (simulator: in
    /// production the client's transport is hyper and rustls instead).
    ClusterRouter = 4,
}

/// Group kinds: untagged (`ROOT` and kind 0) and the four [`Group`]s.
const KINDS: usize = 5;

static LIVE: [AtomicI64; 2] = [AtomicI64::new(0), AtomicI64::new(0)];
static PEAK: [AtomicI64; 2] = [AtomicI64::new(0), AtomicI64::new(0)];
static LIVE_OF: [AtomicI64; KINDS] = [const { AtomicI64::new(0) }; KINDS];
static PEAK_OF: [AtomicI64; KINDS] = [const { AtomicI64::new(0) }; KINDS];

/// The global allocator: the system's, with a group id beside each block.
pub type Counting = Allocator<std::alloc::System>;

/// The group kind of `group` (0: untagged).
fn kind_of(group: &AllocationGroupId) -> usize {
    if *group == AllocationGroupId::ROOT { 0 } else { group.as_usize().get() % KINDS }
}

fn part_of_kind(kind: usize) -> usize {
    match kind {
        k if k == Group::Round as usize || k == Group::Connect as usize => Part::Runtime as usize,
        _ => Part::Simulator as usize,
    }
}

fn bump(live: &AtomicI64, peak: &AtomicI64, bytes: i64) {
    let now = live.fetch_add(bytes, Ordering::Relaxed) + bytes;
    // A read first: the peak rarely moves, and a locked read-modify-write on every
    // allocation, on a line both threads write, added to the tracker's cost (a tenth of
    // the converge's CPU with the counting around it).
    if bytes > 0 && now > peak.load(Ordering::Relaxed) {
        peak.fetch_max(now, Ordering::Relaxed);
    }
}

/// How far a thread's unadded sum of one group kind may move before the thread adds
/// what it holds to the shared totals (8 KiB: with a dozen threads and five kinds, a total
/// is at most ~0.5 MiB from the exact one, and in practice far less: allocations and frees
/// mostly cancel out before a sum gets there).
const FLUSH_AT: i64 = 8 * 1024;

thread_local! {
    /// This thread's bytes per group kind not yet added to the shared totals. Constant
    /// and without a destructor, so the allocator may touch it at any point of a thread's
    /// life (a thread that ends leaves at most `FLUSH_AT` per kind unadded).
    static UNADDED: [Cell<i64>; KINDS] = const { [const { Cell::new(0) }; KINDS] };
}

fn add(group: &AllocationGroupId, bytes: i64) {
    let kind = kind_of(group);
    UNADDED.with(|unadded| {
        let sum = unadded[kind].get() + bytes;
        if sum.abs() < FLUSH_AT {
            unadded[kind].set(sum);
            return;
        }
        unadded[kind].set(sum);
        add_to_totals(&std::array::from_fn(|k| unadded[k].replace(0)));
    });
}

/// Adds one thread's sums to the shared totals: each kind's, then each part's (the sum
/// of its kinds), so a part's peak is taken once per addition.
fn add_to_totals(unadded: &[i64; KINDS]) {
    let mut of_part = [0i64; 2];
    for (kind, &bytes) in unadded.iter().enumerate() {
        if bytes != 0 {
            bump(&LIVE_OF[kind], &PEAK_OF[kind], bytes);
            of_part[part_of_kind(kind)] += bytes;
        }
    }
    for (part, &bytes) in of_part.iter().enumerate() {
        if bytes != 0 {
            bump(&LIVE[part], &PEAK[part], bytes);
        }
    }
}

/// Adds what the calling thread holds unadded to the shared totals (before reading them
/// between rounds: the reading thread's own sums are then in them).
pub fn settle_this_thread() {
    let unadded = UNADDED.with(|u| std::array::from_fn(|k| u[k].replace(0)));
    add_to_totals(&unadded);
}

struct Tracker;

impl AllocationTracker for Tracker {
    fn allocated(&self, _addr: usize, _object: usize, wrapped: usize, group: AllocationGroupId) {
        add(&group, wrapped as i64);
    }

    fn deallocated(
        &self,
        _addr: usize,
        _object: usize,
        wrapped: usize,
        source: AllocationGroupId,
        _current: AllocationGroupId,
    ) {
        add(&source, -(wrapped as i64));
    }
}

/// Starts counting (once, before the work to measure).
pub fn start() {
    if AllocationRegistry::set_global_tracker(Tracker).is_ok() {
        AllocationRegistry::enable_tracking();
    }
}

/// A token of a fresh group of `group`'s kind (`None` once ids are exhausted: then
/// untagged).
fn token(group: Group) -> Option<AllocationGroupToken> {
    // Ids are handed out in turn, so at most KINDS registrations find one of the kind.
    for _ in 0..KINDS {
        let t = AllocationGroupToken::register()?;
        if kind_of(&t.id()) == group as usize {
            return Some(t);
        }
    }
    None
}

/// CPU time (ns) spent polling futures of each group kind that is timed ([`timed`]).
static CPU_OF: [AtomicU64; KINDS] = [const { AtomicU64::new(0) }; KINDS];
/// Futures of each group kind made ([`tagged`]): for [`Group::Connect`], the kube clients
/// made; for [`Group::InProcessCluster`], the in-process cluster API answers.
static MADE_OF: [AtomicU64; KINDS] = [const { AtomicU64::new(0) }; KINDS];

/// Whether polls of `group` are timed: the simulated cluster APIs answered inside a round
/// and the kube clients being made (the simulator's and the client's CPU inside the
/// runtime's rounds). A round itself is not: its polls are many, and the whole process's
/// CPU is read from `/proc` instead.
fn timed(group: Group) -> bool {
    matches!(group, Group::InProcessCluster | Group::Connect | Group::ClusterRouter)
}

/// This thread's CPU time so far, in ns (`/proc/thread-self/schedstat`'s first field,
/// nanoseconds on the CPU; 0 where there is none). Read around a timed poll: a poll runs
/// on one thread from start to end.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// A future whose polls (and so whose allocations) belong to a group.
pub struct Tagged<F> {
    token: Option<AllocationGroupToken>,
    /// The group, when its polls are timed.
    timed: Option<Group>,
    inner: Pin<Box<F>>,
}

/// Runs `future` in `group`.
pub fn tagged<F: Future>(group: Group, future: F) -> Tagged<F> {
    MADE_OF[group as usize].fetch_add(1, Ordering::Relaxed);
    let timed = timed(group).then_some(group);
    Tagged { token: token(group), timed, inner: Box::pin(future) }
}

impl<F: Future> Future for Tagged<F> {
    type Output = F::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let _entered = this.token.as_mut().map(AllocationGroupToken::enter);
        let Some(group) = this.timed else { return this.inner.as_mut().poll(cx) };
        let before = thread_cpu_ns();
        let out = this.inner.as_mut().poll(cx);
        let spent = thread_cpu_ns().saturating_sub(before);
        CPU_OF[group as usize].fetch_add(spent, Ordering::Relaxed);
        out
    }
}

/// The CPU spent polling `group`'s futures so far (timed groups only, else zero).
pub fn group_cpu(group: Group) -> std::time::Duration {
    std::time::Duration::from_nanos(CPU_OF[group as usize].load(Ordering::Relaxed))
}

/// How many futures of `group` were made so far.
pub fn group_made(group: Group) -> u64 {
    MADE_OF[group as usize].load(Ordering::Relaxed)
}

/// Runs `f` in `group`.
pub fn within<R>(group: Group, f: impl FnOnce() -> R) -> R {
    MADE_OF[group as usize].fetch_add(1, Ordering::Relaxed);
    let mut token = token(group);
    let _entered = token.as_mut().map(AllocationGroupToken::enter);
    let before = timed(group).then(thread_cpu_ns);
    let out = f();
    if let Some(before) = before {
        CPU_OF[group as usize].fetch_add(thread_cpu_ns().saturating_sub(before), Ordering::Relaxed);
    }
    out
}

const MIB: f64 = 1024.0 * 1024.0;

/// The peak live bytes of `part`, in MiB.
pub fn peak_mib(part: Part) -> f64 {
    PEAK[part as usize].load(Ordering::Relaxed) as f64 / MIB
}

/// The bytes of `part` live now, in MiB.
pub fn live_mib(part: Part) -> f64 {
    LIVE[part as usize].load(Ordering::Relaxed) as f64 / MIB
}

/// The peak live bytes made in `group`, in MiB.
pub fn group_peak_mib(group: Group) -> f64 {
    PEAK_OF[group as usize].load(Ordering::Relaxed) as f64 / MIB
}

/// The bytes made in `group` and live now, in MiB.
pub fn group_live_mib(group: Group) -> f64 {
    LIVE_OF[group as usize].load(Ordering::Relaxed) as f64 / MIB
}
