//! Per-caller limits (SPEC §2, §9, §12): a keyed GCRA rate limiter (governor) counting
//! each API token or node by its id — and each valid join token by its hash and the failed
//! joins of each client address of `agents.join` — answering `RESOURCE_EXHAUSTED` with
//! `Retry-After`; a keyed
//! count of things a caller holds open at once ([`Concurrency`], the event streams of a
//! token); and [`Recent`], an answer reused for a few seconds per key, however many ask
//! (a substrate's Node listing, so joins cannot hammer a cluster's API).
//!
//! Invariant: the key is the caller's id, never its secret; idle keys are dropped now and
//! then, so memory follows the active callers, not every caller ever seen; a count held
//! open is given back when its [`Slot`] is dropped, however the holder ends.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use governor::clock::Clock as _;
use governor::{DefaultKeyedRateLimiter, Quota};

use crate::error::ApiError;

/// How many requests a caller may make: a burst, refilled one request per period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Requests allowed at once.
    pub burst: NonZeroU32,
    /// Time to earn one more request.
    pub replenish_every: Duration,
}

impl Default for RateLimit {
    /// 100 at once, 100 per second after.
    fn default() -> Self {
        Self {
            burst: NonZeroU32::new(100).expect("non-zero"),
            replenish_every: Duration::from_millis(10),
        }
    }
}

/// The limits of `agents.join` (SPEC §9), per valid join token and on the failed joins of
/// each client address: loose enough that every Node of a large substrate joins within
/// minutes (a DaemonSet starts them all at once), tight enough that guessing tokens or
/// replaying one costs the caller, not the server. Only failures count against an
/// address, so a flood of bad tokens from an address its Nodes share (a NAT, a proxy)
/// never keeps a valid token's Nodes from joining.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinRateLimit {
    /// Joins per valid join token.
    pub per_token: RateLimit,
    /// Failed joins per client address (when the server knows it).
    pub per_address: RateLimit,
}

impl Default for JoinRateLimit {
    /// Per join token 200 at once, then 50 a second; per address 100 failures, then 20 a
    /// second.
    fn default() -> Self {
        let limit = |burst: u32, every_ms: u64| RateLimit {
            burst: NonZeroU32::new(burst).expect("non-zero"),
            replenish_every: Duration::from_millis(every_ms),
        };
        Self { per_token: limit(200, 20), per_address: limit(100, 50) }
    }
}

/// Drop idle keys after this many checks.
const SWEEP_EVERY: u64 = 4096;

/// The keyed limiter.
#[derive(Debug)]
pub struct RateLimiter {
    limiter: DefaultKeyedRateLimiter<String>,
    checks: AtomicU64,
    /// Whose limit it is, for the refusal's message ("this token").
    whose: &'static str,
}

impl RateLimiter {
    /// A limiter applying `limit` to each API token or node.
    pub fn new(limit: RateLimit) -> Self {
        Self::of("this token", limit)
    }

    /// A limiter applying `limit` to each key, refusing in the name of `whose`.
    pub fn of(whose: &'static str, limit: RateLimit) -> Self {
        let quota = Quota::with_period(limit.replenish_every.max(Duration::from_nanos(1)))
            .expect("a non-zero period")
            .allow_burst(limit.burst);
        Self { limiter: governor::RateLimiter::keyed(quota), checks: AtomicU64::new(0), whose }
    }

    /// Counts one request of `key`; `RESOURCE_EXHAUSTED` with the wait when over.
    pub fn check(&self, key: &str) -> Result<(), ApiError> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.limiter.retain_recent();
        }
        match self.limiter.check_key(&key.to_owned()) {
            Ok(()) => Ok(()),
            Err(not_until) => {
                let wait = not_until.wait_time_from(self.limiter.clock().now());
                // Whole seconds, rounded up: a client that waits this long gets through.
                let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                Err(ApiError::rate_limited_for(self.whose, secs))
            }
        }
    }
}

/// An answer per key, reused while it is younger than its time to live: the first to ask
/// computes it, whoever asks meanwhile waits for that answer instead of computing its own,
/// and a failure is reused like a success (a failing cluster is not asked more often).
pub struct Recent<V> {
    ttl: Duration,
    slots: Mutex<HashMap<String, Arc<RecentSlot<V>>>>,
}

/// One key's answer and when it was computed; its lock is held while computing it.
type RecentSlot<V> = tokio::sync::Mutex<Option<(Instant, V)>>;

/// Keys past which stale entries are dropped on the next miss.
const RECENT_PRUNE_ABOVE: usize = 4096;

impl<V: Clone> Recent<V> {
    /// Answers kept for `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self { ttl, slots: Mutex::default() }
    }

    /// The answer for `key` at `now`: the kept one while it is fresh, else `compute`'s
    /// (kept, as of `now`).
    pub async fn get_or<F, Fut>(&self, key: &str, now: Instant, compute: F) -> V
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = V>,
    {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            if slots.len() > RECENT_PRUNE_ABOVE {
                let ttl = self.ttl;
                slots.retain(|_, s| {
                    s.try_lock().map_or(true, |v| {
                        v.as_ref().is_some_and(|(t, _)| now.saturating_duration_since(*t) < ttl)
                    })
                });
            }
            slots.entry(key.to_owned()).or_default().clone()
        };
        let mut held = slot.lock().await;
        if let Some((at, v)) = held.as_ref()
            && now.saturating_duration_since(*at) < self.ttl
        {
            return v.clone();
        }
        let v = compute().await;
        *held = Some((now, v.clone()));
        v
    }
}

impl<V> std::fmt::Debug for Recent<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recent").field("ttl", &self.ttl).finish_non_exhaustive()
    }
}

/// How many things each key holds open at once (in this process).
#[derive(Debug, Clone, Default)]
pub struct Concurrency {
    open: Arc<Mutex<HashMap<String, usize>>>,
}

/// One of a key's open things; dropping it gives it back.
#[derive(Debug)]
pub struct Slot {
    open: Arc<Mutex<HashMap<String, usize>>>,
    key: String,
}

impl Concurrency {
    /// A slot for `key` if it holds fewer than `max`, else `None`.
    pub fn try_open(&self, key: &str, max: usize) -> Option<Slot> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(key.to_owned()).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(Slot { open: self.open.clone(), key: key.to_owned() })
    }

    /// How many `key` holds open now.
    pub fn open(&self, key: &str) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).get(key).copied().unwrap_or(0)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn recent_answers_are_reused_per_key_until_they_age() {
        let recent = Recent::new(Duration::from_secs(5));
        let computed = AtomicU64::new(0);
        let t0 = Instant::now();
        let ask = |key: &'static str, after: u64| {
            let (recent, computed) = (&recent, &computed);
            let now = t0 + Duration::from_secs(after);
            async move {
                recent.get_or(key, now, || async { computed.fetch_add(1, Ordering::Relaxed) }).await
            }
        };
        let (a, b) = tokio::join!(ask("p1", 0), ask("p1", 0));
        assert_eq!((a, b), (0, 0), "two at once share one answer");
        assert_eq!(ask("p2", 0).await, 1, "another key has its own");
        assert_eq!(ask("p1", 4).await, 0, "still fresh");
        assert_eq!(ask("p1", 6).await, 2, "aged: computed again");
        assert_eq!(ask("p1", 7).await, 2, "and kept from then");
    }

    #[test]
    fn slots_are_counted_per_key_and_given_back_on_drop() {
        let c = Concurrency::default();
        let a: Vec<Slot> = (0..2).map(|_| c.try_open("tok_a", 2).expect("a slot")).collect();
        assert!(c.try_open("tok_a", 2).is_none(), "the third is refused");
        let b = c.try_open("tok_b", 2);
        assert!(b.is_some(), "another key has its own count");
        drop(a);
        assert_eq!(c.open("tok_a"), 0);
        assert!(c.try_open("tok_a", 2).is_some());
    }

    #[test]
    fn limits_each_key_on_its_own() {
        let limiter = RateLimiter::new(RateLimit {
            burst: NonZeroU32::new(2).unwrap(),
            replenish_every: Duration::from_secs(60),
        });
        assert!(limiter.check("tok_a").is_ok());
        assert!(limiter.check("tok_a").is_ok());
        let e = limiter.check("tok_a").unwrap_err();
        assert_eq!(e.code().status(), 429);
        assert!(e.message().contains("retry in"), "{}", e.message());
        assert!(limiter.check("tok_b").is_ok(), "another key has its own budget");
    }
}
