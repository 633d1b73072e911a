//! The provider-call budget of one account, shared by every replica (DESIGN.md, "Budget
//! the provider"): a GCRA ("generic cell rate algorithm", a token bucket kept as one
//! time per window) for a sliding minute and a sliding hour, plus a pause the provider
//! imposes with a 429.
//!
//! Invariant: however grants and time interleave, no window of the provider's kind —
//! each call counts for `period` after it is made, as DigitalOcean counts them
//! (research/digitalocean.md §2) — ever holds more than `limit` granted calls; a denial
//! says how long to wait, and nothing is granted while paused. The state is three
//! instants, so a store can share it across replicas by compare-and-swap and every
//! replica decides with this one function.

use crate::time::Timestamp;

/// One sliding window's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowLimit {
    /// At most this many calls in any `period`.
    pub limit: u32,
    /// The window, in milliseconds.
    pub period_ms: i64,
    /// How many calls may go at once from idle (at most `limit - 1`); the rest of the
    /// window's calls are spread evenly. A larger burst means a slower sustained rate:
    /// `limit - burst` calls per `period`.
    pub burst: u32,
}

impl WindowLimit {
    /// `limit` calls per `period_ms` with bursts of `burst` (clamped to `limit - 1`,
    /// and `limit` to at least 1).
    pub fn new(limit: u32, period_ms: i64, burst: u32) -> Self {
        let limit = limit.max(1);
        Self { limit, period_ms: period_ms.max(1), burst: burst.min(limit - 1) }
    }

    /// The emission interval `T`: one call per `T` sustained. `T = ⌈period / (limit −
    /// burst)⌉` keeps any window at `limit`: after a grant at `t`, the `k`-th next grant
    /// needs `t + k·T − burst·T`, so fewer than `period / T + burst ≤ limit` more fit
    /// before `t + period`.
    fn interval_ms(&self) -> i64 {
        let spread = i64::from(self.limit - self.burst);
        (self.period_ms + spread - 1) / spread
    }

    /// The tolerance `τ = burst · T`: how far ahead of now the window may be booked.
    fn tolerance_ms(&self) -> i64 {
        i64::from(self.burst) * self.interval_ms()
    }
}

/// An account's budget: a minute window and an hour window, both enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetConfig {
    /// The per-minute (burst) limit.
    pub minute: WindowLimit,
    /// The per-hour limit.
    pub hour: WindowLimit,
}

/// The default calls per account in any sliding minute.
pub const DEFAULT_PER_MINUTE: u32 = 240;

/// The default calls per account in any sliding hour.
pub const DEFAULT_PER_HOUR: u32 = 4_800;

impl Default for BudgetConfig {
    /// Under DigitalOcean's 250 per minute and 5,000 per hour per token, leaving room
    /// for the API's own calls (a token check per account create): 240 per minute
    /// (bursts of 40, then 200 a minute) and 4,800 per hour (bursts of 2,400, then 40 a
    /// minute).
    fn default() -> Self {
        Self::limits(DEFAULT_PER_MINUTE, DEFAULT_PER_HOUR)
    }
}

impl BudgetConfig {
    /// The default's shape at other limits (an operator's): `per_minute` with a sixth
    /// of it as burst, `per_hour` with half of it as burst, so
    /// `limits(DEFAULT_PER_MINUTE, DEFAULT_PER_HOUR)` is the default.
    pub fn limits(per_minute: u32, per_hour: u32) -> Self {
        Self {
            minute: WindowLimit::new(per_minute, 60_000, per_minute / 6),
            hour: WindowLimit::new(per_hour, 3_600_000, per_hour / 2),
        }
    }

    /// `per_minute` and `per_hour`, each with a sixth of its limit as burst.
    pub fn per_minute_and_hour(per_minute: u32, per_hour: u32) -> Self {
        Self {
            minute: WindowLimit::new(per_minute, 60_000, per_minute / 6),
            hour: WindowLimit::new(per_hour, 3_600_000, per_hour / 6),
        }
    }
}

/// The shared state of one budget: each window's theoretical arrival time (the instant
/// up to which its calls are booked) and the provider's pause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetState {
    /// The minute window's booked-until instant.
    pub minute_tat: Timestamp,
    /// The hour window's booked-until instant.
    pub hour_tat: Timestamp,
    /// No call before this instant (a 429's reset), if set.
    pub paused_until: Option<Timestamp>,
}

impl Default for BudgetState {
    /// Idle: every window free, not paused.
    fn default() -> Self {
        Self { minute_tat: Timestamp::EPOCH, hour_tat: Timestamp::EPOCH, paused_until: None }
    }
}

/// One window's decision: the new booked-until instant, or how long to wait.
fn take(window: &WindowLimit, tat: Timestamp, now: i64, n: u32) -> Result<i64, i64> {
    let t = window.interval_ms();
    let start = tat.unix_ms().max(now);
    // The last of the `n` calls must conform: it is booked at `start + (n-1)·T`, which
    // may be at most `τ` ahead of now.
    let last = start + i64::from(n.max(1) - 1) * t;
    let ahead = last - now - window.tolerance_ms();
    if ahead > 0 { Err(ahead) } else { Ok(start + i64::from(n.max(1)) * t) }
}

/// Takes `n` calls (at least one) from the budget at `now`: the new state, or how many
/// milliseconds to wait before asking again (the longest of the pause and each window's
/// wait, so the answer is never "now" while any of them refuses).
pub fn acquire(
    config: &BudgetConfig,
    state: &BudgetState,
    now: Timestamp,
    n: u32,
) -> Result<BudgetState, u64> {
    let now_ms = now.unix_ms();
    let paused = state.paused_until.map_or(0, |p| p.unix_ms() - now_ms).max(0);
    let minute = take(&config.minute, state.minute_tat, now_ms, n);
    let hour = take(&config.hour, state.hour_tat, now_ms, n);
    match (paused, minute, hour) {
        (0, Ok(m), Ok(h)) => Ok(BudgetState {
            minute_tat: Timestamp::from_unix_ms(m),
            hour_tat: Timestamp::from_unix_ms(h),
            // A pause that ended is forgotten, so an old reset never comes back.
            paused_until: None,
        }),
        (p, m, h) => {
            let wait = p.max(m.err().unwrap_or(0)).max(h.err().unwrap_or(0)).max(1);
            Err(u64::try_from(wait).unwrap_or(u64::MAX))
        }
    }
}

/// The state after the provider said "not before `until`" (a 429): a later pause wins
/// over an earlier one, and an earlier one never shortens it.
pub fn pause(state: &BudgetState, until: Timestamp) -> BudgetState {
    BudgetState { paused_until: Some(state.paused_until.map_or(until, |p| p.max(until))), ..*state }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_unix_ms(1_800_000_000_000 + ms)
    }

    fn minute_only(limit: u32, burst: u32) -> BudgetConfig {
        BudgetConfig {
            minute: WindowLimit::new(limit, 60_000, burst),
            hour: WindowLimit::new(1_000_000, 3_600_000, 999_999),
        }
    }

    #[test]
    fn bursts_then_spreads_the_rest() {
        // 10 a minute with bursts of 4: 5 at once, then one every 10 s (6 a minute).
        let c = minute_only(10, 4);
        let mut s = BudgetState::default();
        for _ in 0..5 {
            s = acquire(&c, &s, t(0), 1).expect("burst");
        }
        assert_eq!(acquire(&c, &s, t(0), 1), Err(10_000));
        assert_eq!(acquire(&c, &s, t(4_000), 1), Err(6_000));
        s = acquire(&c, &s, t(10_000), 1).expect("one more after T");
        assert_eq!(acquire(&c, &s, t(10_000), 1), Err(10_000));
    }

    #[test]
    fn several_at_once_and_the_hour_window() {
        let c = BudgetConfig {
            minute: WindowLimit::new(100, 60_000, 50),
            hour: WindowLimit::new(3, 3_600_000, 2),
        };
        let s = acquire(&c, &BudgetState::default(), t(0), 3).expect("three fit the hour burst");
        // The hour window binds: one call per 3600 s / (3 - 2).
        assert_eq!(acquire(&c, &s, t(0), 1), Err(3_600_000));
        assert_eq!(acquire(&c, &BudgetState::default(), t(0), 4), Err(3_600_000));
    }

    #[test]
    fn a_pause_blocks_until_it_ends_and_only_grows() {
        let c = BudgetConfig::default();
        let s = pause(&BudgetState::default(), t(30_000));
        assert_eq!(acquire(&c, &s, t(0), 1), Err(30_000));
        let s = pause(&s, t(10_000));
        assert_eq!(s.paused_until, Some(t(30_000)), "an earlier pause never shortens it");
        let after = acquire(&c, &s, t(30_000), 1).expect("granted once the pause ends");
        assert_eq!(after.paused_until, None);
    }

    #[test]
    fn the_default_is_its_own_shape_at_its_limits() {
        let d = BudgetConfig::default();
        assert_eq!(d, BudgetConfig::limits(DEFAULT_PER_MINUTE, DEFAULT_PER_HOUR));
        assert_eq!(
            (d.minute.limit, d.minute.burst, d.hour.limit, d.hour.burst),
            (240, 40, 4_800, 2_400)
        );
        let small = BudgetConfig::limits(20, 600);
        assert_eq!((small.minute.burst, small.hour.burst), (3, 300));
    }

    #[test]
    fn limits_are_clamped_to_something_grantable() {
        let w = WindowLimit::new(0, 0, 7);
        assert_eq!((w.limit, w.period_ms, w.burst), (1, 1, 0));
        let c = BudgetConfig::per_minute_and_hour(1, 1);
        let s = acquire(&c, &BudgetState::default(), t(0), 1).expect("one");
        assert_eq!(acquire(&c, &s, t(59_999), 1), Err(3_540_001), "the hour binds");
    }

    proptest! {
        /// Whatever the config and the request pattern, no sliding window (a call counts
        /// for `period` after it is made) holds more than its limit, and a denial's wait
        /// is never zero.
        #[test]
        fn no_window_ever_exceeds_its_limit(
            limit_m in 1u32..40, burst_m in 0u32..40,
            limit_h in 1u32..200, burst_h in 0u32..200,
            steps in proptest::collection::vec((0i64..4_000, 1u32..4), 1..300),
        ) {
            let c = BudgetConfig {
                minute: WindowLimit::new(limit_m, 60_000, burst_m),
                hour: WindowLimit::new(limit_h, 3_600_000, burst_h),
            };
            let (mut s, mut now, mut granted) = (BudgetState::default(), 0i64, Vec::new());
            for (advance, n) in steps {
                now += advance;
                match acquire(&c, &s, t(now), n) {
                    Ok(next) => {
                        s = next;
                        granted.extend(std::iter::repeat_n(now, n as usize));
                    }
                    Err(wait) => prop_assert!(wait > 0),
                }
            }
            for w in [c.minute, c.hour] {
                for (i, &start) in granted.iter().enumerate() {
                    let within = granted[i..].iter().take_while(|&&g| g < start + w.period_ms).count();
                    prop_assert!(within <= w.limit as usize, "{within} calls within {} ms of {start}", w.period_ms);
                }
            }
        }

        /// Asking again after the wait a denial named is granted (nothing else took calls).
        #[test]
        fn the_named_wait_is_enough(limit in 2u32..50, burst in 0u32..50, n in 1u32..5, first in 0u32..60) {
            let c = minute_only(limit, burst);
            let mut s = BudgetState::default();
            for _ in 0..first {
                if let Ok(next) = acquire(&c, &s, t(0), 1) { s = next; }
            }
            let n = n.min(c.minute.burst + 1);
            if let Err(wait) = acquire(&c, &s, t(0), n) {
                prop_assert!(acquire(&c, &s, t(wait as i64), n).is_ok());
            }
        }
    }
}
