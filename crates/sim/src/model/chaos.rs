//! The seeded chaos mode ([`crate::config::Chaos`]) and the per-token call log that lets a
//! test check a client kept inside an account's budget.
//!
//! Invariants: the throttle windows are a pure function of the seed and the instant (the
//! same seed and clock give the same windows whatever the traffic), and the 5xx draws
//! are one seeded sequence over admitted calls in arrival order; the call log counts
//! every call that named a known token — admitted, throttled or failed — because
//! DigitalOcean's budget is spent by what a client sends, not by what succeeds.

use std::collections::VecDeque;

use bc_domain::Timestamp;

use super::{ApiError, splitmix64};
use crate::config::Chaos;

const MINUTE_MS: i64 = 60_000;
const HOUR_MS: i64 = 3_600_000;

/// How many faults the chaos mode answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChaosCounts {
    /// 500 answers drawn.
    pub server_errors: u64,
    /// 429 answers inside a throttle window.
    pub throttled: u64,
}

/// The chaos mode's running state.
#[derive(Debug, Clone)]
pub(crate) struct ChaosState {
    pub(crate) config: Chaos,
    draws: u64,
    pub(crate) counts: ChaosCounts,
}

impl ChaosState {
    pub(crate) fn new(config: Chaos) -> Self {
        Self { config, draws: 0, counts: ChaosCounts::default() }
    }

    /// The fault chaos answers for a call at `now`, if any.
    pub(crate) fn fault(&mut self, now: Timestamp) -> Option<ApiError> {
        if let Some(retry_after) = throttle_window(&self.config, now) {
            self.counts.throttled += 1;
            return Some(ApiError::too_many_requests(Some(retry_after)));
        }
        self.draws += 1;
        let x = splitmix64(self.config.seed ^ self.draws.wrapping_mul(0xA24B_AED4_963E_E407));
        // 53 random bits as a uniform number in [0, 1).
        let u = (x >> 11) as f64 / (1u64 << 53) as f64;
        (u < self.config.server_error_ratio).then(|| {
            self.counts.server_errors += 1;
            ApiError::server_error()
        })
    }
}

/// When `now` falls in a throttle window of `chaos`, the `retry-after` seconds until it
/// ends (at least 1); `None` outside every window.
pub fn throttle_window(chaos: &Chaos, now: Timestamp) -> Option<u64> {
    let every = i64::try_from(chaos.throttle_every?.as_millis()).ok().filter(|p| *p > 0)?;
    let length = i64::try_from(chaos.throttle_for.as_millis()).unwrap_or(every).min(every);
    if length == 0 {
        return None;
    }
    let now_ms = now.unix_ms();
    let period = now_ms.div_euclid(every);
    let slack = u64::try_from(every - length + 1).unwrap_or(1);
    let offset = (splitmix64(chaos.seed ^ (period as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
        % slack) as i64;
    let start = period * every + offset;
    let end = start + length;
    (now_ms >= start && now_ms < end).then(|| ((end - now_ms) as u64).div_ceil(1000).max(1))
}

/// The busiest windows of one token's calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallPeaks {
    /// Every call seen.
    pub total: u64,
    /// The most calls in any sliding minute.
    pub minute: u32,
    /// The most calls in any sliding hour (of the last hour kept: exact for runs
    /// shorter than an hour, which is every test's).
    pub hour: u32,
}

/// One token's calls of the last hour, and the peaks seen so far.
#[derive(Debug, Clone, Default)]
pub(crate) struct CallLog {
    recent: VecDeque<i64>,
    pub(crate) peaks: CallPeaks,
}

impl CallLog {
    /// Records one call at `now`.
    pub(crate) fn record(&mut self, now: Timestamp) {
        let now_ms = now.unix_ms();
        // Arrival order may be off by the moments between reading the clock and taking
        // the model's lock: insert in time order.
        let at = self.recent.partition_point(|t| *t <= now_ms);
        self.recent.insert(at, now_ms);
        let last = self.recent.back().copied().unwrap_or(now_ms);
        while self.recent.front().is_some_and(|t| t + HOUR_MS <= last) {
            self.recent.pop_front();
        }
        // The windows ending at this call: it and the calls of the minute before it.
        let in_minute =
            self.recent.len() - self.recent.partition_point(|t| t + MINUTE_MS <= now_ms);
        let in_minute = in_minute - self.recent.iter().rev().take_while(|t| **t > now_ms).count();
        let p = &mut self.peaks;
        p.total += 1;
        p.minute = p.minute.max(u32::try_from(in_minute).unwrap_or(u32::MAX));
        p.hour = p.hour.max(u32::try_from(self.recent.len()).unwrap_or(u32::MAX));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_unix_ms(ms)
    }

    #[test]
    fn throttle_windows_are_one_per_period_and_as_long_as_configured() {
        let chaos = Chaos::server_errors(0.0, 7)
            .with_throttle_bursts(Duration::from_secs(10), Duration::from_secs(2));
        for period in 0..50i64 {
            let inside: Vec<i64> = (0..10_000)
                .step_by(10)
                .map(|ms| period * 10_000 + ms)
                .filter(|ms| throttle_window(&chaos, at(1_700_000_000_000 + ms)).is_some())
                .collect();
            assert_eq!(inside.len(), 200, "2 s of 10 ms steps in period {period}");
            assert_eq!(inside.last().unwrap() - inside[0], 1_990, "one contiguous window");
        }
        let off = Chaos::server_errors(0.5, 7);
        assert_eq!(throttle_window(&off, at(1_700_000_000_000)), None);
    }

    #[test]
    fn retry_after_counts_down_to_the_window_end() {
        let chaos = Chaos::server_errors(0.0, 3)
            .with_throttle_bursts(Duration::from_secs(60), Duration::from_secs(5));
        let base = 1_700_000_040_000;
        let first =
            (0..60_000).find_map(|ms| throttle_window(&chaos, at(base + ms)).map(|r| (ms, r)));
        let (start, retry) = first.expect("a window in the minute");
        assert_eq!(retry, 5, "retry-after at the window's start");
        assert_eq!(throttle_window(&chaos, at(base + start + 4_100)), Some(1));
        assert_eq!(throttle_window(&chaos, at(base + start + 4_999)), Some(1));
        assert_eq!(throttle_window(&chaos, at(base + start + 5_000)), None, "the window ended");
    }

    #[test]
    fn server_errors_follow_the_ratio_and_the_seed() {
        let run = |seed| {
            let mut s = ChaosState::new(Chaos::server_errors(0.2, seed));
            (0..10_000).map(|_| s.fault(at(0)).is_some()).collect::<Vec<_>>()
        };
        let a = run(1);
        let failed = a.iter().filter(|f| **f).count();
        assert!((1_800..=2_200).contains(&failed), "{failed} of 10000 near 20 %");
        assert_eq!(a, run(1), "the same seed draws the same sequence");
        assert_ne!(a, run(2), "another seed another");
    }

    #[test]
    fn call_log_keeps_the_busiest_sliding_minute() {
        let mut log = CallLog::default();
        for i in 0..10 {
            log.record(at(i * 1_000));
        }
        // 59.5 s after the first: all ten and this one share a minute.
        log.record(at(59_500));
        assert_eq!(log.peaks.minute, 11);
        // Ten minutes later, a quiet call does not lower the peak.
        log.record(at(600_000));
        assert_eq!(log.peaks, CallPeaks { total: 12, minute: 11, hour: 12 });
        // Out of order by a moment: counted in its own minute.
        log.record(at(599_990));
        assert_eq!(log.peaks.minute, 11);
        assert_eq!(log.peaks.total, 13);
    }
}
