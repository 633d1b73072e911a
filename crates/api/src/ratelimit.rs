//! Per-caller limits (SPEC §2, §12): a keyed GCRA rate limiter (governor) counting each
//! API token or node by its id, answering `RESOURCE_EXHAUSTED` with `Retry-After`; and a
//! keyed count of things a caller holds open at once ([`Concurrency`], the event streams
//! of a token).
//!
//! Invariant: the key is the caller's id, never its secret; idle keys are dropped now and
//! then, so memory follows the active callers, not every caller ever seen; a count held
//! open is given back when its [`Slot`] is dropped, however the holder ends.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

/// Drop idle keys after this many checks.
const SWEEP_EVERY: u64 = 4096;

/// The keyed limiter.
#[derive(Debug)]
pub struct RateLimiter {
    limiter: DefaultKeyedRateLimiter<String>,
    checks: AtomicU64,
}

impl RateLimiter {
    /// A limiter applying `limit` to each key.
    pub fn new(limit: RateLimit) -> Self {
        let quota = Quota::with_period(limit.replenish_every.max(Duration::from_nanos(1)))
            .expect("a non-zero period")
            .allow_burst(limit.burst);
        Self { limiter: governor::RateLimiter::keyed(quota), checks: AtomicU64::new(0) }
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
                Err(ApiError::rate_limited(secs))
            }
        }
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
