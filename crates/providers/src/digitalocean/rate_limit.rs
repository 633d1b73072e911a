//! The per-account request budget: a two-window token bucket (burst per minute, quota per
//! hour) corrected by the provider's `ratelimit-*` headers and paused by 429s.
//!
//! Invariant: every request of an account takes a token from the one bucket of that
//! account before it is sent, and the bucket never hands out a token while the provider
//! has told us to wait; the logic is pure (`now` is an argument), so it is unit-tested
//! without clocks or sleeps.

use std::time::Duration;

use bc_domain::Timestamp;

/// The local budget of one account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimitConfig {
    /// Requests per minute (the burst capacity; DigitalOcean allows 250).
    pub per_minute: u32,
    /// Requests per hour (DigitalOcean allows 5000).
    pub per_hour: u32,
    /// The longest a caller is made to wait for a token before the request is sent;
    /// beyond it the caller gets `RateLimited` and the reconcilers do the waiting.
    pub max_wait: Duration,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self { per_minute: 250, per_hour: 5000, max_wait: Duration::from_secs(2) }
    }
}

/// One refilling window: `capacity` tokens refilled evenly over `period`.
#[derive(Debug, Clone)]
struct Window {
    capacity: f64,
    /// Tokens now; may go negative by reservations made for waiting callers.
    tokens: f64,
    /// Tokens added per millisecond.
    per_ms: f64,
    /// When `tokens` was last brought up to date (ms since the epoch).
    updated_ms: i64,
}

impl Window {
    fn new(capacity: u32, period: Duration, now_ms: i64) -> Self {
        let capacity = f64::from(capacity.max(1));
        let period_ms = (period.as_millis() as f64).max(1.0);
        Self { capacity, tokens: capacity, per_ms: capacity / period_ms, updated_ms: now_ms }
    }

    fn refill(&mut self, now_ms: i64) {
        // A clock that steps backwards must not mint tokens.
        let elapsed = (now_ms - self.updated_ms).max(0) as f64;
        self.tokens = (self.tokens + elapsed * self.per_ms).min(self.capacity);
        self.updated_ms = self.updated_ms.max(now_ms);
    }

    /// Milliseconds until one whole token is available (0 if one is).
    fn wait_ms(&self) -> i64 {
        if self.tokens >= 1.0 {
            0
        } else {
            // The small slack keeps float rounding (1800000.0000001 ms) from adding a
            // whole millisecond to an exact wait.
            ((1.0 - self.tokens) / self.per_ms - 1e-6).ceil().max(0.0) as i64
        }
    }
}

/// The outcome of asking for a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquire {
    /// A token was taken; send after waiting this long (zero: send now).
    Granted(Duration),
    /// No token within the allowed wait; retry after this long.
    Denied(Duration),
}

/// The bucket of one account. Pure: every method takes `now`.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    minute: Window,
    hour: Window,
    /// Set by a 429 or by `ratelimit-remaining: 0`: no tokens before this instant.
    paused_until_ms: Option<i64>,
    max_wait: Duration,
}

impl TokenBucket {
    /// A full bucket at `now`.
    pub fn new(config: &RateLimitConfig, now: Timestamp) -> Self {
        let now_ms = now.unix_ms();
        Self {
            minute: Window::new(config.per_minute, Duration::from_secs(60), now_ms),
            hour: Window::new(config.per_hour, Duration::from_secs(3600), now_ms),
            paused_until_ms: None,
            max_wait: config.max_wait,
        }
    }

    /// Takes one token at `now`, or says how long to wait. A token due within
    /// `max_wait` is reserved now (so concurrent callers queue behind it rather than
    /// all waking at once) and `Granted(wait)` is returned; otherwise nothing is taken.
    pub fn try_acquire(&mut self, now: Timestamp) -> Acquire {
        let now_ms = now.unix_ms();
        self.minute.refill(now_ms);
        self.hour.refill(now_ms);
        let paused_ms = match self.paused_until_ms {
            Some(until) if until > now_ms => until - now_ms,
            Some(_) => {
                self.paused_until_ms = None;
                0
            }
            None => 0,
        };
        let wait_ms = paused_ms.max(self.minute.wait_ms()).max(self.hour.wait_ms());
        let wait = Duration::from_millis(wait_ms.max(0) as u64);
        if wait > self.max_wait {
            return Acquire::Denied(wait);
        }
        self.minute.tokens -= 1.0;
        self.hour.tokens -= 1.0;
        Acquire::Granted(wait)
    }

    /// Stops handing out tokens until `until` (a 429, or the provider's reset when it
    /// says nothing remains). A later pause wins over an earlier one.
    pub fn pause_until(&mut self, until: Timestamp) {
        let until_ms = until.unix_ms();
        self.paused_until_ms = Some(self.paused_until_ms.map_or(until_ms, |p| p.max(until_ms)));
    }

    /// Corrects the bucket from a response's `ratelimit-remaining` / `ratelimit-reset`.
    /// The provider counts every client of the token, so its `remaining` can only make
    /// our hourly budget smaller, never larger (responses arrive out of order, and a
    /// stale high reading must not undo a fresher low one).
    pub fn observe(&mut self, remaining: Option<u64>, reset: Option<Timestamp>, now: Timestamp) {
        let now_ms = now.unix_ms();
        self.hour.refill(now_ms);
        if let Some(remaining) = remaining {
            self.hour.tokens = self.hour.tokens.min(remaining as f64);
            if remaining == 0 {
                // Nothing left: the provider answers 429 until its oldest request ages
                // out at `reset`; without a reset, wait a second and look again.
                let until = reset.filter(|r| *r > now).unwrap_or(now + time::Duration::SECOND);
                self.pause_until(until);
            }
        }
    }

    /// Until when the bucket is paused, if it is at `now`.
    pub fn paused_until(&self, now: Timestamp) -> Option<Timestamp> {
        self.paused_until_ms.filter(|p| *p > now.unix_ms()).map(Timestamp::from_unix_ms)
    }

    /// Whole tokens left in the smaller window at `now` (for tests and metrics).
    pub fn available(&self, now: Timestamp) -> u32 {
        let mut b = self.clone();
        b.minute.refill(now.unix_ms());
        b.hour.refill(now.unix_ms());
        b.minute.tokens.min(b.hour.tokens).max(0.0).floor() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_unix_ms(1_800_000_000_000 + ms)
    }

    fn cfg(per_minute: u32, per_hour: u32, max_wait_ms: u64) -> RateLimitConfig {
        RateLimitConfig { per_minute, per_hour, max_wait: Duration::from_millis(max_wait_ms) }
    }

    #[test]
    fn burst_then_denied_then_refilled() {
        let mut b = TokenBucket::new(&cfg(3, 100, 0), t(0));
        for _ in 0..3 {
            assert_eq!(b.try_acquire(t(0)), Acquire::Granted(Duration::ZERO));
        }
        // 3 per minute = one token every 20 s.
        assert_eq!(b.try_acquire(t(0)), Acquire::Denied(Duration::from_secs(20)));
        assert_eq!(b.try_acquire(t(5_000)), Acquire::Denied(Duration::from_secs(15)));
        assert_eq!(b.try_acquire(t(20_000)), Acquire::Granted(Duration::ZERO));
    }

    #[test]
    fn hourly_quota_binds_when_smaller() {
        let mut b = TokenBucket::new(&cfg(250, 2, 0), t(0));
        assert!(matches!(b.try_acquire(t(0)), Acquire::Granted(_)));
        assert!(matches!(b.try_acquire(t(0)), Acquire::Granted(_)));
        // 2 per hour = one every 30 min.
        assert_eq!(b.try_acquire(t(0)), Acquire::Denied(Duration::from_secs(1800)));
    }

    #[test]
    fn short_waits_are_reserved_in_order() {
        // 60 per minute = one token a second; allow waiting 2.5 s.
        let mut b = TokenBucket::new(&cfg(60, 5000, 2_500), t(0));
        for _ in 0..60 {
            b.try_acquire(t(0));
        }
        assert_eq!(b.try_acquire(t(0)), Acquire::Granted(Duration::from_secs(1)));
        assert_eq!(b.try_acquire(t(0)), Acquire::Granted(Duration::from_secs(2)));
        assert_eq!(b.try_acquire(t(0)), Acquire::Denied(Duration::from_secs(3)));
    }

    #[test]
    fn pause_blocks_everyone_until_it_ends() {
        let mut b = TokenBucket::new(&cfg(250, 5000, 2_000), t(0));
        b.pause_until(t(30_000));
        assert_eq!(b.try_acquire(t(0)), Acquire::Denied(Duration::from_secs(30)));
        assert_eq!(b.try_acquire(t(29_000)), Acquire::Granted(Duration::from_secs(1)));
        assert_eq!(b.paused_until(t(29_500)), Some(t(30_000)));
        assert_eq!(b.try_acquire(t(30_000)), Acquire::Granted(Duration::ZERO));
        assert_eq!(b.paused_until(t(30_000)), None);
        // An earlier pause does not shorten a later one.
        b.pause_until(t(90_000));
        b.pause_until(t(60_000));
        assert_eq!(b.paused_until(t(31_000)), Some(t(90_000)));
    }

    #[test]
    fn provider_remaining_only_lowers_the_budget() {
        let mut b = TokenBucket::new(&cfg(250, 5000, 0), t(0));
        b.observe(Some(10), Some(t(60_000)), t(0));
        assert_eq!(b.available(t(0)), 10);
        b.observe(Some(4000), Some(t(60_000)), t(0));
        assert_eq!(b.available(t(0)), 10, "a higher reading is not trusted");
    }

    #[test]
    fn remaining_zero_waits_for_reset() {
        let mut b = TokenBucket::new(&cfg(250, 5000, 0), t(0));
        b.observe(Some(0), Some(t(42_000)), t(0));
        assert_eq!(b.try_acquire(t(0)), Acquire::Denied(Duration::from_secs(42)));
        assert!(matches!(b.try_acquire(t(42_000)), Acquire::Granted(_)));
        // A reset in the past still pauses briefly rather than not at all.
        let mut b = TokenBucket::new(&cfg(250, 5000, 0), t(0));
        b.observe(Some(0), Some(t(-5_000)), t(0));
        assert_eq!(b.paused_until(t(0)), Some(t(1_000)));
    }

    #[test]
    fn clock_going_backwards_mints_nothing() {
        let mut b = TokenBucket::new(&cfg(1, 100, 0), t(10_000));
        assert!(matches!(b.try_acquire(t(10_000)), Acquire::Granted(_)));
        assert!(matches!(b.try_acquire(t(0)), Acquire::Denied(_)));
    }

    proptest::proptest! {
        /// However requests and time interleave, no window hands out more than its
        /// capacity plus what it refilled since the start.
        #[test]
        fn grants_never_exceed_capacity_plus_refill(
            steps in proptest::collection::vec((0i64..5_000, 1usize..8), 1..200),
            per_minute in 1u32..300,
            per_hour in 1u32..6000,
        ) {
            let mut b = TokenBucket::new(&cfg(per_minute, per_hour, 0), t(0));
            let (mut now, mut granted) = (0i64, 0u64);
            for (advance, tries) in steps {
                now += advance;
                for _ in 0..tries {
                    if let Acquire::Granted(w) = b.try_acquire(t(now)) {
                        proptest::prop_assert_eq!(w, Duration::ZERO);
                        granted += 1;
                    }
                }
                let minute_cap = f64::from(per_minute) * (1.0 + now as f64 / 60_000.0);
                let hour_cap = f64::from(per_hour) * (1.0 + now as f64 / 3_600_000.0);
                proptest::prop_assert!(granted as f64 <= minute_cap.min(hour_cap) + 1e-6);
            }
        }

        /// While paused, nothing is granted; with `max_wait` zero, a denial's wait is
        /// never zero.
        #[test]
        fn paused_bucket_grants_nothing(pause_ms in 1i64..600_000, probes in proptest::collection::vec(0i64..600_000, 1..50)) {
            let mut b = TokenBucket::new(&cfg(250, 5000, 0), t(0));
            b.pause_until(t(pause_ms));
            for p in probes {
                match b.try_acquire(t(p.min(pause_ms - 1))) {
                    Acquire::Granted(_) => proptest::prop_assert!(false, "granted while paused"),
                    Acquire::Denied(w) => proptest::prop_assert!(!w.is_zero()),
                }
            }
        }
    }
}
