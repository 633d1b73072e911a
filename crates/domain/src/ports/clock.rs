//! The `Clock` port: the only source of "now" for the core, so rules and reconcilers can
//! be tested by stepping time instead of sleeping; [`SystemClock`] for binaries and
//! [`ManualClock`] for tests are its two implementations.
//!
//! Invariant: nothing in bc-domain reads the wall clock except [`SystemClock`], and only
//! when a caller asks it for the time.

use std::sync::Mutex;

use crate::time::Timestamp;

/// A source of the current time.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> Timestamp;
}

/// The wall clock (`std::time::SystemTime`), for the binaries and `bc-sim` served by
/// hand; tests use [`ManualClock`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        // Before 1970 (a broken clock) reads as the epoch; beyond i64 milliseconds as the
        // largest time: neither panics.
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        Timestamp::from_unix_ms(ms)
    }
}

/// A clock that moves only when told: the shared fake for tests.
#[derive(Debug)]
pub struct ManualClock(Mutex<Timestamp>);

impl ManualClock {
    /// A clock stopped at `t`.
    pub fn new(t: Timestamp) -> Self {
        Self(Mutex::new(t))
    }
    /// Moves the clock forward.
    pub fn advance(&self, d: time::Duration) {
        let mut t = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *t = *t + d;
    }
    /// Sets the clock.
    pub fn set(&self, t: Timestamp) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = t;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clock_reads_the_wall_clock_and_manual_clock_only_moves_when_told() {
        // 2026-01-01T00:00:00Z: any machine running this is later.
        assert!(SystemClock.now().unix_ms() > 1_767_225_600_000);
        let c = ManualClock::new(Timestamp::from_unix_ms(1_000));
        assert_eq!(c.now(), c.now());
        c.advance(time::Duration::seconds(2));
        assert_eq!(c.now().unix_ms(), 3_000);
    }
}
