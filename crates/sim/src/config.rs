//! Simulator knobs: delays per transition, fault injection, rate limits, the account
//! tokens it accepts, and the seeded chaos mode.
//!
//! Invariant: the defaults describe a working simulated cloud with one account,
//! [`DEFAULT_TOKEN`], seconds-scale delays and no chaos (so conformance tests see
//! DigitalOcean's behaviour and nothing else).

use std::time::Duration;

/// How long transitions take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delays {
    /// Cluster `provisioning` → `running`.
    pub cluster_provision: Duration,
    /// Node `provisioning` → `running`.
    pub node_provision: Duration,
    /// Node `draining`/`deleting` → removed.
    pub node_delete: Duration,
    /// Cluster `upgrading` → `running`.
    pub cluster_upgrade: Duration,
    /// Cluster `deleting` → gone.
    pub cluster_delete: Duration,
    /// Load balancer `new` → `active`, and a pending update → applied (busy window).
    pub load_balancer_provision: Duration,
    /// The least time between two resizes of one load balancer: DigitalOcean allows one
    /// a minute (research/digitalocean.md §5), and every preset keeps that; a test
    /// whose traffic resizes at random may shorten it as it shortens the other waits.
    pub load_balancer_resize_every: Duration,
}

impl Delays {
    /// Seconds-scale delays for tests and `bc-api dev`.
    pub fn fast() -> Self {
        let s = Duration::from_secs;
        Self {
            cluster_provision: s(2),
            node_provision: s(1),
            node_delete: s(1),
            cluster_upgrade: s(2),
            cluster_delete: s(1),
            load_balancer_provision: s(1),
            load_balancer_resize_every: s(60),
        }
    }
    /// DigitalOcean-like delays (research/digitalocean.md §7).
    pub fn realistic() -> Self {
        let s = Duration::from_secs;
        Self {
            cluster_provision: s(6 * 60),
            node_provision: s(3 * 60),
            node_delete: s(60),
            cluster_upgrade: s(8 * 60),
            cluster_delete: s(30),
            load_balancer_provision: s(2 * 60),
            load_balancer_resize_every: s(60),
        }
    }
}

/// Rate limits per token (sliding windows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimits {
    /// Requests per hour.
    pub per_hour: u32,
    /// Requests per minute (burst).
    pub per_minute: u32,
}

impl Default for RateLimits {
    fn default() -> Self {
        Self { per_hour: 5000, per_minute: 250 }
    }
}

/// The bearer token of the one account the default [`SimConfig`] accepts.
pub const DEFAULT_TOKEN: &str = "dop_v1_simulated";

/// The simulator's configuration.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Transition delays.
    pub delays: Delays,
    /// Rate limits.
    pub rate_limits: RateLimits,
    /// Bearer tokens the DigitalOcean face accepts (each is one account).
    pub tokens: Vec<String>,
    /// Whether simulated bcd agents may reach the server named in the join Secret.
    pub bcd_reaches_server: bool,
    /// Seeded random faults on every authenticated call (`None`: off).
    pub chaos: Option<Chaos>,
}

/// A seeded random fault mode (research §9 chaos knobs): a share of calls answers 5xx,
/// and in recurring windows every call answers 429 with `retry-after` — what a
/// flaky, overloaded DigitalOcean looks like. Applied where requests are admitted
/// ([`crate::model::Model::admit`]), so every route fails alike.
///
/// Reproducible: the 5xx draws are one seeded sequence over the calls in arrival order,
/// and the throttle windows are a pure function of the seed and the clock (one window at
/// a seeded offset within each `throttle_every`), so the same seed and the same clock
/// give the same windows whatever the traffic.
#[derive(Debug, Clone, PartialEq)]
pub struct Chaos {
    /// The share of calls (0.0–1.0) that answer 500 `server_error` (those outside a
    /// throttle window, that the rate limits and scopes admitted).
    pub server_error_ratio: f64,
    /// One throttle window per period of this length (`None` or zero: no 429 bursts).
    pub throttle_every: Option<Duration>,
    /// How long each throttle window lasts (clamped to `throttle_every`).
    pub throttle_for: Duration,
    /// The seed of both.
    pub seed: u64,
}

impl Chaos {
    /// `server_error_ratio` 5xx with no throttle windows, seeded by `seed`.
    pub fn server_errors(server_error_ratio: f64, seed: u64) -> Self {
        Self { server_error_ratio, throttle_every: None, throttle_for: Duration::ZERO, seed }
    }

    /// Adds a throttle window of `length` in every `every`.
    pub fn with_throttle_bursts(mut self, every: Duration, length: Duration) -> Self {
        self.throttle_every = Some(every);
        self.throttle_for = length;
        self
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            delays: Delays::fast(),
            rate_limits: RateLimits::default(),
            tokens: vec![DEFAULT_TOKEN.to_owned()],
            bcd_reaches_server: true,
            chaos: None,
        }
    }
}
