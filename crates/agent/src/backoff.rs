//! Capped exponential backoff with full jitter, as a pure function of the attempt number
//! and a random fraction (so it is tested without a clock or an RNG).
//!
//! Invariant: a delay is never above the cap and never zero; the ceiling doubles per
//! attempt until it reaches the cap.

use std::time::Duration;

/// A backoff policy: attempt `n` (0-based) waits a uniformly jittered time in
/// `[ceiling/2, ceiling]`, where `ceiling = min(cap, base · 2ⁿ)`. Keeping half the
/// ceiling as a floor avoids hot retries while still spreading a fleet of agents that
/// lost the server at the same moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first ceiling.
    pub base: Duration,
    /// The largest ceiling.
    pub cap: Duration,
}

impl Default for Backoff {
    /// 1 s doubling to 60 s: an agent retries quickly after a blip and at most once a
    /// minute during an outage.
    fn default() -> Self {
        Self { base: Duration::from_secs(1), cap: Duration::from_secs(60) }
    }
}

impl Backoff {
    /// The ceiling of attempt `attempt`.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// The wait before retry `attempt`, given `jitter` in `[0, 1)`.
    pub fn delay(&self, attempt: u32, jitter: f64) -> Duration {
        let ceiling = self.ceiling(attempt);
        let jitter = if jitter.is_finite() { jitter.clamp(0.0, 1.0) } else { 0.0 };
        let d = ceiling.mul_f64(0.5 + 0.5 * jitter);
        d.max(Duration::from_millis(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ceilings_double_up_to_the_cap() {
        let b = Backoff::default();
        let secs: Vec<u64> = (0..9).map(|n| b.ceiling(n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(b.ceiling(u32::MAX), b.cap);
    }

    proptest! {
        #[test]
        fn delays_stay_within_half_the_ceiling_and_the_ceiling(attempt in 0u32..200, jitter in 0.0f64..1.0) {
            let b = Backoff::default();
            let d = b.delay(attempt, jitter);
            prop_assert!(d <= b.ceiling(attempt));
            prop_assert!(d >= b.ceiling(attempt) / 2);
            prop_assert!(d <= b.cap);
        }
    }
}
