//! When an item runs next: the runtime's scheduling rules — the steady resync, the wait
//! a converging object asked for, capped exponential backoff after a failure, the wait
//! the provider named, the wait until the account's budget frees a call — each spread
//! by jitter drawn from a seedable generator, so a test with a fixed seed gets the same
//! schedule every run.
//!
//! Invariant: pure arithmetic on durations and a unit draw `u ∈ [0, 1)`; no clock, no
//! global RNG. A failure never comes back sooner than the provider asked, a backoff
//! never exceeds its cap, and the steady resync stays within its jitter band.

use std::time::Duration;

use bc_domain::{ProviderError, Timestamp};

use crate::reconciler::ReconcileError;

/// A small seedable generator (SplitMix64): enough to spread retries, and the same
/// sequence for the same seed.
#[derive(Debug, Clone)]
pub struct Jitter(u64);

impl Jitter {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next draw in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // The top 53 bits as a fraction: exact in an f64.
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The runtime's waits.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// A converged object is looked at again after this long…
    pub resync: Duration,
    /// …give or take this fraction of it (0.1: ±10 %), so objects converged together do
    /// not come due together.
    pub resync_jitter: f64,
    /// A converging object's own wait is stretched by up to this fraction.
    pub converging_jitter: f64,
    /// The wait an object asked for — converging, or in `error` (after its doubling) —
    /// is at most this long before jitter. The reconcilers' waits suit a real provider (a
    /// cluster takes minutes, so it is looked at every 30 s; an object in error every 2
    /// minutes and more); a runtime on a provider whose changes take seconds (the
    /// simulator of `bc-api dev` and the end-to-end tests) looks again at its pace.
    /// `Duration::MAX` (the default): the object's own wait.
    pub wait_max: Duration,
    /// The first retry after a failure waits about this long…
    pub backoff_base: Duration,
    /// …doubling per failed attempt, never beyond this.
    pub backoff_max: Duration,
}

impl Default for Schedule {
    /// A 10-minute resync ±10 % (research/peers.md §4: the poll period peers converged
    /// on), retries from 1 s doubling to 5 minutes.
    fn default() -> Self {
        Self {
            resync: Duration::from_secs(600),
            resync_jitter: 0.1,
            converging_jitter: 0.1,
            wait_max: Duration::MAX,
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(300),
        }
    }
}

impl Schedule {
    /// The wait before a converged object is looked at again.
    pub fn steady(&self, u: f64) -> Duration {
        let j = self.resync_jitter.clamp(0.0, 1.0);
        self.resync.mul_f64(1.0 - j + 2.0 * j * u)
    }

    /// The shortest steady wait: anything due sooner is still converging or failing.
    pub fn earliest_steady(&self) -> Duration {
        self.resync.mul_f64(1.0 - self.resync_jitter.clamp(0.0, 1.0))
    }

    /// The wait a converging object asked for (at most `wait_max`), stretched by jitter
    /// (never shortened).
    pub fn converging(&self, after: Duration, u: f64) -> Duration {
        after.min(self.wait_max).mul_f64(1.0 + self.converging_jitter.clamp(0.0, 1.0) * u)
    }

    /// The wait after the `attempts`-th failure in a row (1 for the first): "equal
    /// jitter" on a doubling backoff — half of it fixed, half drawn — capped; and never
    /// less than the wait a throttling answer named (plus up to a quarter of it, so the
    /// items it throttled do not all return at one instant).
    pub fn failed(&self, attempts: u32, error: &ReconcileError, u: f64) -> Duration {
        let doubling = 2f64.powi(attempts.saturating_sub(1).min(62) as i32);
        let exp = self.backoff_base.mul_f64(doubling).min(self.backoff_max);
        let backoff = exp / 2 + (exp / 2).mul_f64(u);
        match error {
            ReconcileError::Provider(ProviderError::RateLimited { retry_after_ms }) => {
                let named = Duration::from_millis(*retry_after_ms);
                backoff.max(named + (named / 4).mul_f64(u))
            }
            _ => backoff,
        }
    }
}

/// The longest an object in `error` waits between looks: its cause is usually the
/// tenant's to fix, and a fix that changes desired state enqueues it at once.
pub const ERROR_BACKOFF_MAX: Duration = Duration::from_secs(30 * 60);

impl Schedule {
    /// The wait after the `attempts`-th run in a row that ended with the object in
    /// `error` (1 for the first): `floor` doubling per run, capped at
    /// [`ERROR_BACKOFF_MAX`] (or `floor`, if longer) and at `wait_max`, plus up to a
    /// quarter of it drawn (never shorter than the object asked, unless `wait_max` is).
    pub fn erring(&self, attempts: u32, floor: Duration, u: f64) -> Duration {
        let doubling = 2f64.powi(attempts.saturating_sub(1).min(62) as i32);
        let exp = floor.mul_f64(doubling).min(ERROR_BACKOFF_MAX.max(floor)).min(self.wait_max);
        exp + (exp / 4).mul_f64(u)
    }

    /// The wait after the account's budget refused a call for `named`: that wait plus up
    /// to a quarter of it (so the items it refused together do not all return at one
    /// instant), whatever came before — a denial is the budget pacing calls, not a
    /// failure, so it never grows into backoff.
    pub fn over_budget(&self, named: Duration, u: f64) -> Duration {
        named + (named / 4).mul_f64(u)
    }
}

/// `t` plus `d` (saturating far in the future).
pub fn later(t: Timestamp, d: Duration) -> Timestamp {
    t + time::Duration::try_from(d).unwrap_or(time::Duration::days(365 * 100))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_object_in_error_backs_off_from_its_floor_to_the_cap_with_jitter() {
        let s = Schedule::default();
        let floor = Duration::from_secs(120);
        let waits: Vec<Duration> = (1..=8).map(|n| s.erring(n, floor, 0.0)).collect();
        let secs: Vec<u64> = waits.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [120, 240, 480, 960, 1_800, 1_800, 1_800, 1_800]);
        for n in 1..=8 {
            let (lo, hi) = (s.erring(n, floor, 0.0), s.erring(n, floor, 0.999));
            assert!(hi > lo && hi <= lo + lo / 4, "jittered within a quarter: {lo:?} {hi:?}");
        }
        // A floor above the cap is kept.
        let long = Duration::from_secs(3_600);
        assert_eq!(s.erring(5, long, 0.0), long);
    }

    #[test]
    fn the_same_seed_gives_the_same_draws() {
        let (mut a, mut b) = (Jitter::new(7), Jitter::new(7));
        let xs: Vec<f64> = (0..5).map(|_| a.unit()).collect();
        let ys: Vec<f64> = (0..5).map(|_| b.unit()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, (0..5).map(|_| Jitter::new(8).unit()).collect::<Vec<_>>());
        assert!(xs.iter().all(|x| (0.0..1.0).contains(x)));
    }

    #[test]
    fn backoff_doubles_to_its_cap() {
        let s = Schedule::default();
        let other = ReconcileError::Other("x".into());
        assert_eq!(s.failed(1, &other, 0.0), Duration::from_millis(500));
        assert_eq!(s.failed(1, &other, 0.999_999).as_millis(), 999);
        assert_eq!(s.failed(4, &other, 0.0), Duration::from_secs(4));
        assert_eq!(s.failed(30, &other, 0.0), Duration::from_secs(150));
        assert!(s.failed(u32::MAX, &other, 0.99) <= Duration::from_secs(300));
        let throttled =
            ReconcileError::Provider(ProviderError::RateLimited { retry_after_ms: 29_000 });
        assert_eq!(s.failed(1, &throttled, 0.0), Duration::from_secs(29));
        assert_eq!(s.failed(1, &throttled, 0.5), Duration::from_millis(29_000 + 3_625));
        let named = Duration::from_millis(4_000);
        assert_eq!(s.over_budget(named, 0.0), named);
        assert_eq!(s.over_budget(named, 0.5), Duration::from_millis(4_500));
    }

    #[test]
    fn a_converging_or_erring_wait_is_capped_before_its_jitter() {
        let (thirty, two_minutes) = (Duration::from_secs(30), Duration::from_secs(120));
        let default = Schedule::default();
        assert_eq!(default.converging(thirty, 0.0), thirty, "no cap by default");
        assert_eq!(default.erring(3, two_minutes, 0.0), two_minutes * 4, "no cap by default");
        let s = Schedule { wait_max: Duration::from_secs(1), ..Schedule::default() };
        assert_eq!(s.converging(thirty, 0.0), Duration::from_secs(1));
        assert_eq!(s.converging(thirty, 0.5), Duration::from_millis(1_050));
        let short = Duration::from_millis(200);
        assert_eq!(s.converging(short, 0.0), short, "a shorter wait is the object's own");
        assert_eq!(s.erring(1, two_minutes, 0.0), Duration::from_secs(1));
        assert_eq!(s.erring(9, two_minutes, 0.5), Duration::from_millis(1_125));
        assert_eq!(s.erring(1, short, 0.0), short, "a shorter floor is the object's own");
    }

    proptest! {
        #[test]
        fn waits_stay_in_their_bands(u in 0.0f64..1.0, attempts in 1u32..100, named in 0u64..10_000_000, after_ms in 0u64..3_600_000) {
            let s = Schedule::default();
            let steady = s.steady(u);
            prop_assert!(steady >= s.earliest_steady() && steady <= Duration::from_secs(660));
            let after = Duration::from_millis(after_ms);
            let c = s.converging(after, u);
            prop_assert!(c >= after && c <= after.mul_f64(1.1) + Duration::from_millis(1));
            let f = s.failed(attempts, &ReconcileError::Other("x".into()), u);
            prop_assert!(f <= s.backoff_max && f >= s.backoff_base / 2);
            let t = s.failed(attempts, &ReconcileError::Provider(ProviderError::RateLimited { retry_after_ms: named }), u);
            prop_assert!(t >= Duration::from_millis(named));
        }
    }
}
