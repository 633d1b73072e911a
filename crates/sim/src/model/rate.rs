//! Per-token rate limiting with DigitalOcean's sliding windows (research/digitalocean.md
//! §2): each admitted request counts for one hour (and, for the burst limit, one minute)
//! after it was made.
//!
//! Invariant: only admitted requests are recorded, so a throttled client regains quota
//! exactly as its oldest counted requests age out; `ratelimit-reset` is when the oldest
//! counted request expires.

use std::collections::VecDeque;

use bc_domain::Timestamp;

use crate::config::RateLimits;

/// The values of the `ratelimit-*` headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateHeaders {
    /// `ratelimit-limit`: requests per hour.
    pub limit: u32,
    /// `ratelimit-remaining`.
    pub remaining: u32,
    /// `ratelimit-reset`: Unix seconds when the oldest counted request expires.
    pub reset: i64,
}

/// Why a request was throttled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Throttle {
    /// The hourly quota is used up.
    Hourly,
    /// The per-minute burst limit tripped; retry after this many seconds.
    Burst {
        /// Seconds until the oldest request of the last minute ages out.
        retry_after: u64,
    },
}

/// One token's window of admitted requests.
#[derive(Debug, Clone, Default)]
pub struct RateWindow {
    hits: VecDeque<Timestamp>,
}

const HOUR_MS: i64 = 3_600_000;
const MINUTE_MS: i64 = 60_000;

impl RateWindow {
    /// Admits (and records) one request at `now`, or says why not.
    pub fn admit(
        &mut self,
        limits: &RateLimits,
        now: Timestamp,
    ) -> (RateHeaders, Option<Throttle>) {
        let now_ms = now.unix_ms();
        while self.hits.front().is_some_and(|t| t.unix_ms() + HOUR_MS <= now_ms) {
            self.hits.pop_front();
        }
        let throttle = if self.hits.len() >= limits.per_hour as usize {
            Some(Throttle::Hourly)
        } else {
            // Hits are in arrival order, so the last minute is a suffix.
            let start = self.hits.partition_point(|t| t.unix_ms() + MINUTE_MS <= now_ms);
            if self.hits.len() - start >= limits.per_minute as usize {
                let oldest = self.hits.get(start).map(|t| t.unix_ms()).unwrap_or(now_ms);
                let wait_ms = (oldest + MINUTE_MS - now_ms).max(1);
                Some(Throttle::Burst { retry_after: (wait_ms as u64).div_ceil(1000) })
            } else {
                None
            }
        };
        if throttle.is_none() {
            // Keep arrival order even if a test clock is set backwards.
            let at = self.hits.partition_point(|t| *t <= now);
            self.hits.insert(at, now);
        }
        (self.headers(limits, now), throttle)
    }

    /// The headers as they stand (without recording anything).
    pub fn headers(&self, limits: &RateLimits, now: Timestamp) -> RateHeaders {
        let used = u32::try_from(self.hits.len()).unwrap_or(u32::MAX);
        let reset_ms = self.hits.front().map(|t| t.unix_ms() + HOUR_MS).unwrap_or(now.unix_ms());
        RateHeaders {
            limit: limits.per_hour,
            remaining: limits.per_hour.saturating_sub(used),
            reset: reset_ms.div_euclid(1000) + i64::from(reset_ms.rem_euclid(1000) != 0),
        }
    }
}
