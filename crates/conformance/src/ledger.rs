//! What a run made, for how long, and what that costs at the provider's hourly list
//! prices.
//!
//! Neither provider's API names prices, so each provider's are a documented table
//! ([`PriceList`]). DigitalOcean ([`DIGITALOCEAN`]): docs.digitalocean.com/products/
//! kubernetes/details/pricing (worker nodes cost what their Droplet size costs, the
//! control plane is free without HA, the hourly price is the monthly one over 672 hours)
//! and docs.digitalocean.com/products/networking/load-balancers/details/pricing (a
//! regional load balancer costs per size unit). GKE ([`GKE`]): cloud.google.com/
//! kubernetes-engine/pricing (a cluster management fee of $0.10 per cluster-hour,
//! standard or autopilot; an autopilot cluster's pods are billed by their requests, and
//! the run schedules none) and cloud.google.com/compute/vm-instance-pricing (an e2-medium
//! node on demand in us-central1). Update them when they change; the bill prints the
//! table it used.
//!
//! Invariant: an object's time runs from the call that made it until the provider
//! answered that it is gone (or the sweeper confirmed it), so the bill is an upper
//! bound of the billed time.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// The item a load balancer's size unit is priced as.
pub const LB_SIZE_UNIT: &str = "load balancer size unit";

/// The item a cluster's control plane is priced as.
pub const CONTROL_PLANE: &str = "control plane";

/// DigitalOcean's hours in a billed month: hourly price = monthly price / 672.
pub const HOURS_PER_MONTH: f64 = 672.0;

/// A list price.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// The size slug or item.
    pub item: &'static str,
    /// US dollars per hour per unit.
    pub hourly_usd: f64,
}

/// One provider's list prices of what a run makes, and how to read them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PriceList {
    /// The provider, for the bill.
    pub provider: &'static str,
    /// The prices.
    pub prices: &'static [Price],
    /// How the provider bills beyond the table (minimums, credits).
    pub note: &'static str,
}

impl PriceList {
    /// The price of `item`, if listed.
    pub fn price(&self, item: &str) -> Option<Price> {
        self.prices.iter().copied().find(|p| p.item == item)
    }

    /// What `units` of `item` cost over `d` (an unlisted item counts as free, and the
    /// bill shows it).
    pub fn cost(&self, item: &str, units: u32, d: Duration) -> f64 {
        self.price(item).map_or(0.0, |p| p.hourly_usd * f64::from(units) * d.as_secs_f64() / 3600.0)
    }
}

/// DigitalOcean's list prices (see the module documentation for the source).
pub const DIGITALOCEAN: PriceList = PriceList {
    provider: "DigitalOcean",
    prices: &[
        Price { item: crate::NODE_SIZE, hourly_usd: 12.0 / HOURS_PER_MONTH },
        Price { item: LB_SIZE_UNIT, hourly_usd: 12.0 / HOURS_PER_MONTH },
        Price { item: CONTROL_PLANE, hourly_usd: 0.0 },
    ],
    note: "per hour = per month / 672; DigitalOcean bills a node pool at least $0.01 per node",
};

/// GKE's list prices (see the module documentation for the source).
pub const GKE: PriceList = PriceList {
    provider: "GKE",
    prices: &[
        Price { item: crate::GKE_NODE_SIZE, hourly_usd: 0.033_503 },
        Price { item: CONTROL_PLANE, hourly_usd: 0.10 },
    ],
    note: "GKE's free tier credits one zonal or autopilot cluster's management fee per billing account; node disks are billed apart",
};

/// One billable thing over one stretch of time at one size.
#[derive(Debug, Clone)]
struct Entry {
    key: String,
    label: String,
    item: &'static str,
    units: u32,
    from: Instant,
    until: Option<Instant>,
}

/// What a run made.
#[derive(Debug)]
pub struct Ledger {
    prices: PriceList,
    entries: Vec<Entry>,
}

impl Default for Ledger {
    fn default() -> Self {
        Self::new(DIGITALOCEAN)
    }
}

impl Ledger {
    /// An empty ledger priced by `prices`.
    pub fn new(prices: PriceList) -> Self {
        Self { prices, entries: Vec::new() }
    }

    /// `units` of `item` made now, known by `key` (its provider id), shown as `label`.
    pub fn made(&mut self, key: &str, label: &str, item: &'static str, units: u32) {
        self.entries.push(Entry {
            key: key.to_owned(),
            label: label.to_owned(),
            item,
            units,
            from: Instant::now(),
            until: None,
        });
    }

    /// `key` now has `units` (a resize): its stretch at the old size ends now.
    pub fn resized(&mut self, key: &str, units: u32) {
        let now = Instant::now();
        let mut next = None;
        for e in self.entries.iter_mut().filter(|e| e.key == key && e.until.is_none()) {
            e.until = Some(now);
            next = Some(Entry { units, from: now, until: None, ..e.clone() });
        }
        self.entries.extend(next);
    }

    /// `key` is gone now.
    pub fn gone(&mut self, key: &str) {
        let now = Instant::now();
        for e in self.entries.iter_mut().filter(|e| e.key == key && e.until.is_none()) {
            e.until = Some(now);
        }
    }

    /// Everything still open ends now (the last sweep confirmed it gone).
    pub fn sweep_closes_all(&mut self) {
        let now = Instant::now();
        for e in self.entries.iter_mut().filter(|e| e.until.is_none()) {
            e.until = Some(now);
        }
    }

    /// The total at list prices, in US dollars.
    pub fn total_usd(&self) -> f64 {
        self.entries.iter().map(|e| self.prices.cost(e.item, e.units, duration(e))).sum()
    }

    /// The bill: every stretch with its time and cost, the total, and the prices used.
    pub fn bill(&self) -> String {
        let mut s = String::from("made:\n");
        if self.entries.is_empty() {
            s.push_str("  nothing\n");
        }
        for e in &self.entries {
            let d = duration(e);
            let _ = writeln!(
                s,
                "  {}: {} × {} for {:.1} s: ${:.5}",
                e.label,
                e.units,
                e.item,
                d.as_secs_f64(),
                self.prices.cost(e.item, e.units, d)
            );
        }
        let _ = writeln!(s, "cost at list prices: ${:.4}", self.total_usd());
        let _ = write!(s, "{} prices used (US$ per hour per unit):", self.prices.provider);
        for p in self.prices.prices {
            let _ = write!(s, " {} {:.5};", p.item, p.hourly_usd);
        }
        let _ = writeln!(s, " {}", self.prices.note);
        s
    }
}

fn duration(e: &Entry) -> Duration {
    e.until.unwrap_or_else(Instant::now).saturating_duration_since(e.from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_hour_of_a_node_costs_its_monthly_price_over_672() {
        let hour = Duration::from_secs(3600);
        let cost = |item, units| DIGITALOCEAN.cost(item, units, hour);
        assert!((cost(crate::NODE_SIZE, 1) - 12.0 / 672.0).abs() < 1e-12);
        assert!((cost(crate::NODE_SIZE, 2) - 24.0 / 672.0).abs() < 1e-12);
        assert_eq!(cost(CONTROL_PLANE, 1), 0.0);
        assert_eq!(cost("unlisted", 1), 0.0);
        // GKE's management fee is per cluster-hour, standard or autopilot.
        assert!((GKE.cost(CONTROL_PLANE, 2, hour) - 0.20).abs() < 1e-12);
    }

    #[test]
    fn a_resize_splits_the_stretch_and_the_bill_lists_every_one() {
        let mut l = Ledger::default();
        l.made("p", "node pool x", crate::NODE_SIZE, 1);
        l.resized("p", 2);
        l.gone("p");
        l.made("lb", "load balancer y", LB_SIZE_UNIT, 1);
        l.sweep_closes_all();
        let bill = l.bill();
        assert!(bill.contains("node pool x: 1 × s-1vcpu-2gb"), "{bill}");
        assert!(bill.contains("node pool x: 2 × s-1vcpu-2gb"), "{bill}");
        assert!(bill.contains("load balancer y: 1 × load balancer size unit"), "{bill}");
        assert!(bill.contains("cost at list prices: $"), "{bill}");
        assert!(l.entries.iter().all(|e| e.until.is_some()));
    }
}
