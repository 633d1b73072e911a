//! The `Clock` port: the only source of "now" for the core, so rules and reconcilers can
//! be tested by stepping time instead of sleeping.

use std::sync::Mutex;

use crate::time::Timestamp;

/// A source of the current time.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> Timestamp;
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
