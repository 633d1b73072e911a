//! Billing usage (SPEC §11, §12): the lines `billing.usage` returns, computed from the
//! stored billing intervals, and the decisions of when a load balancer's interval opens
//! and closes.
//!
//! Invariant: usage is exact to the second and additive — every timestamp (interval
//! bounds, window bounds, `now`) is floored to a whole second *before* clipping, so the
//! seconds of `[a, b)` plus those of `[b, c)` are exactly those of `[a, c)`, and a
//! resource's overlapping intervals are billed once (their union), never twice.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::id::PoolId;
use crate::model::BillingInterval;
use crate::state::ResourceState;
use crate::time::Timestamp;

/// One line of `billing.usage`: one resource's use of one meter within the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageLine {
    /// Meter, e.g. `vps.load-balancer.hours`.
    pub meter: String,
    /// The resource's id.
    pub resource: String,
    /// The pool the resource belongs to.
    pub pool_id: PoolId,
    /// Whole seconds of use within the window.
    pub seconds: u64,
    /// Start of the billed use, clipped to the window (whole second).
    pub from: Timestamp,
    /// End of the billed use, clipped to the window and to `now` (whole second).
    pub to: Timestamp,
}

impl UsageLine {
    /// The wire quantity: hours as a decimal with 6 fractional digits
    /// (see [`hours_decimal`]).
    pub fn quantity(&self) -> String {
        hours_decimal(self.seconds)
    }
}

/// The wire shape of a [`UsageLine`] (SPEC §12): `{meter, resource, poolId, quantity, from,
/// to}` — `seconds` is carried as `quantity`, so the API cannot send both or neither.
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub(crate) struct UsageLineWire<'a> {
    /// Meter, e.g. `vps.load-balancer.hours`.
    meter: &'a str,
    /// The resource's id.
    resource: &'a str,
    /// The pool the resource belongs to.
    pool_id: &'a PoolId,
    /// Hours as a decimal with 6 fractional digits, exact to the second.
    #[cfg_attr(feature = "schema", schemars(regex(pattern = r"^[0-9]+\.[0-9]{6}$")))]
    quantity: String,
    /// Start of the billed use within the window.
    from: Timestamp,
    /// End of the billed use within the window.
    to: Timestamp,
}

impl Serialize for UsageLine {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        UsageLineWire {
            meter: &self.meter,
            resource: &self.resource,
            pool_id: &self.pool_id,
            quantity: self.quantity(),
            from: self.from,
            to: self.to,
        }
        .serialize(s)
    }
}

/// [`UsageLineWire`] as read back by a client: `quantity` owned, to be parsed.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct UsageLineRead {
    meter: String,
    resource: String,
    pool_id: PoolId,
    quantity: String,
    from: Timestamp,
    to: Timestamp,
}

impl<'de> Deserialize<'de> for UsageLine {
    /// The wire shape back into seconds: `quantity` is exact to the second, so rounding
    /// its micro-hours to the nearest second gives the seconds it was made from.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = UsageLineRead::deserialize(d)?;
        let seconds = seconds_of_hours(&w.quantity).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "quantity {:?} is not hours with 6 fractional digits",
                w.quantity
            ))
        })?;
        Ok(UsageLine {
            meter: w.meter,
            resource: w.resource,
            pool_id: w.pool_id,
            seconds,
            from: w.from,
            to: w.to,
        })
    }
}

/// The whole seconds of a [`hours_decimal`] string (`"1.000000"` → 3600); `None` unless
/// it has exactly that shape.
pub fn seconds_of_hours(text: &str) -> Option<u64> {
    let (whole, frac) = text.split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || frac.len() != 6 || !digits(frac) {
        return None;
    }
    let micro = u128::from(whole.parse::<u64>().ok()?) * 1_000_000 + frac.parse::<u128>().ok()?;
    u64::try_from((micro * 3_600 + 500_000) / 1_000_000).ok()
}

/// `seconds / 3600` as a decimal string with exactly 6 fractional digits, rounded half
/// up: `3600` → `1.000000`, `1` → `0.000278` (1 s is 0.000277… h), `0` → `0.000000`.
/// Six digits keep one second distinguishable from zero; integer arithmetic keeps it exact.
pub fn hours_decimal(seconds: u64) -> String {
    // Micro-hours, rounded half up: floor((s * 1e6 + 1800) / 3600).
    let micro = (u128::from(seconds) * 1_000_000 + 1_800) / 3_600;
    format!("{}.{:06}", micro / 1_000_000, micro % 1_000_000)
}

/// Whole seconds since the epoch, flooring (also before 1970).
fn floor_secs(t: Timestamp) -> i64 {
    t.unix_ms().div_euclid(1000)
}

/// `t` floored to a whole second.
pub fn floor_to_second(t: Timestamp) -> Timestamp {
    Timestamp::from_unix_ms(floor_secs(t) * 1000)
}

/// The usage lines of `intervals` within the window `[from, to)`, optionally of one
/// meter; an open interval runs until `now`. One line per (meter, resource), merging that
/// resource's intervals (overlaps billed once), with `from`/`to` the clipped bounds of
/// its use; lines with zero seconds are dropped. Sorted by meter, then resource. A
/// resource's pool never changes; should intervals disagree, the latest-starting one's
/// pool is named.
pub fn usage(
    intervals: &[BillingInterval],
    from: Timestamp,
    to: Timestamp,
    meter: Option<&str>,
    now: Timestamp,
) -> Vec<UsageLine> {
    let (w_from, w_to, now_s) = (floor_secs(from), floor_secs(to), floor_secs(now));
    // (meter, resource) -> (pool of the latest-starting interval, its start, clipped spans)
    type Acc<'a> = (&'a PoolId, i64, Vec<(i64, i64)>);
    let mut by_key: BTreeMap<(&str, &str), Acc<'_>> = BTreeMap::new();
    for iv in intervals {
        if meter.is_some_and(|m| m != iv.meter) {
            continue;
        }
        let start = floor_secs(iv.start);
        let end = iv.end.map_or(now_s, floor_secs);
        let (s, e) = (start.max(w_from), end.min(w_to));
        if e <= s {
            continue;
        }
        let acc = by_key.entry((&iv.meter, &iv.resource)).or_insert((&iv.pool_id, start, vec![]));
        if start >= acc.1 {
            acc.0 = &iv.pool_id;
            acc.1 = start;
        }
        acc.2.push((s, e));
    }
    by_key
        .into_iter()
        .filter_map(|((meter, resource), (pool_id, _, mut spans))| {
            spans.sort_unstable();
            let (first, last) = (spans[0].0, spans.iter().map(|&(_, e)| e).max()?);
            // Union length of the sorted spans.
            let mut seconds: u64 = 0;
            let mut cur: Option<(i64, i64)> = None;
            for (s, e) in spans {
                cur = match cur {
                    Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
                    Some((cs, ce)) => {
                        seconds += (ce - cs) as u64;
                        Some((s, e))
                    }
                    None => Some((s, e)),
                };
            }
            if let Some((cs, ce)) = cur {
                seconds += (ce - cs) as u64;
            }
            (seconds > 0).then(|| UsageLine {
                meter: meter.to_owned(),
                resource: resource.to_owned(),
                pool_id: pool_id.clone(),
                seconds,
                from: Timestamp::from_unix_ms(first * 1000),
                to: Timestamp::from_unix_ms(last * 1000),
            })
        })
        .collect()
}

/// Whether a load balancer's billing interval opens on this state write: the first time
/// it is `ready` (SPEC §11). "First time" is `ready_at` being unset — the stored fact that
/// survives restarts — so `ready` → `updating` → `ready` opens nothing new. A resource
/// already tearing down (`prev_state` not live) never starts billing.
pub fn should_open_billing(
    prev_state: ResourceState,
    new_state: ResourceState,
    ready_at: Option<Timestamp>,
) -> bool {
    prev_state.is_live() && new_state == ResourceState::Ready && ready_at.is_none()
}

/// Whether a load balancer's open billing interval closes on this state write: when it is
/// `deleted` (billing runs "until deleted", so `deleting` still bills).
pub fn should_close_billing(new_state: ResourceState) -> bool {
    new_state == ResourceState::Deleted
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::METER_LOAD_BALANCER_HOURS;
    use crate::name::TenantId;
    use proptest::prelude::*;

    const T0: i64 = 1_798_000_000_000; // a whole second, in ms

    fn pool(n: u128) -> PoolId {
        PoolId::generate(1, n)
    }

    fn ts(ms: i64) -> Timestamp {
        Timestamp::from_unix_ms(T0 + ms)
    }

    fn iv(resource: &str, start: i64, end: Option<i64>) -> BillingInterval {
        BillingInterval {
            meter: METER_LOAD_BALANCER_HOURS.into(),
            resource: resource.into(),
            tenant_id: TenantId::parse("acme").unwrap(),
            pool_id: pool(1),
            start: ts(start),
            end: end.map(ts),
        }
    }

    #[test]
    fn hours_are_six_digits_rounded_half_up() {
        assert_eq!(hours_decimal(0), "0.000000");
        assert_eq!(hours_decimal(1), "0.000278");
        assert_eq!(hours_decimal(2), "0.000556");
        assert_eq!(hours_decimal(1800), "0.500000");
        assert_eq!(hours_decimal(3600), "1.000000");
        assert_eq!(hours_decimal(3601), "1.000278");
        assert_eq!(hours_decimal(90_061), "25.016944");
        // 9 s is 0.0025 h exactly; 5 s is 0.0013888… h, rounded up in the 7th digit.
        assert_eq!(hours_decimal(5), "0.001389");
        assert_eq!(hours_decimal(9), "0.002500");
        assert_eq!(hours_decimal(u64::MAX).split('.').nth(1).unwrap().len(), 6);
    }

    proptest! {
        /// What a client reads back is what the server billed: the quantity's rounding
        /// never loses or gains a second.
        #[test]
        fn a_line_reads_back_to_its_seconds(seconds in 0u64..(1u64 << 48)) {
            let line = UsageLine {
                meter: METER_LOAD_BALANCER_HOURS.into(),
                resource: "lb_x".into(),
                pool_id: pool(1),
                seconds,
                from: ts(0),
                to: ts(1000),
            };
            let back: UsageLine = serde_json::from_value(serde_json::to_value(&line).unwrap()).unwrap();
            prop_assert_eq!(back, line);
        }
    }

    #[test]
    fn a_quantity_of_another_shape_is_refused() {
        for bad in ["1", "1.0", "1.0000000", "-1.000000", "a.000000", "1.00000x", ".000000"] {
            assert_eq!(seconds_of_hours(bad), None, "{bad}");
        }
        assert_eq!(seconds_of_hours("1.000278"), Some(3601));
    }

    #[test]
    fn clips_floors_and_merges() {
        let intervals = vec![
            // Closed, straddling the window start: billed from the window start.
            iv("lb_a", -10_500, Some(20_000)),
            // Same resource again later (re-created after a delete behind our back).
            iv("lb_a", 60_000, Some(70_999)),
            // Open: runs until now (90.9 s → floored to 90 s).
            iv("lb_b", 30_400, None),
            // Entirely before the window.
            iv("lb_c", -50_000, Some(-1_000)),
            // Other meter.
            BillingInterval { meter: "other.hours".into(), ..iv("lb_d", 0, Some(5_000)) },
        ];
        let lines = usage(&intervals, ts(0), ts(100_000), None, ts(90_900));
        let got: Vec<(&str, &str, u64, Timestamp, Timestamp)> = lines
            .iter()
            .map(|l| (l.meter.as_str(), l.resource.as_str(), l.seconds, l.from, l.to))
            .collect();
        assert_eq!(
            got,
            vec![
                ("other.hours", "lb_d", 5, ts(0), ts(5_000)),
                (METER_LOAD_BALANCER_HOURS, "lb_a", 20 + 10, ts(0), ts(70_000)),
                (METER_LOAD_BALANCER_HOURS, "lb_b", 60, ts(30_000), ts(90_000)),
            ]
        );
        let only = usage(&intervals, ts(0), ts(100_000), Some("other.hours"), ts(90_900));
        assert_eq!(only.len(), 1);
        assert_eq!(only[0].quantity(), "0.001389");
    }

    #[test]
    fn sub_second_use_and_empty_windows_give_nothing() {
        // 0.9 s inside one second floors to zero seconds: dropped.
        assert!(usage(&[iv("lb_a", 100, Some(999))], ts(0), ts(10_000), None, ts(0)).is_empty());
        // Window reversed or empty.
        assert!(usage(&[iv("lb_a", 0, None)], ts(5_000), ts(5_000), None, ts(9_000)).is_empty());
        assert!(usage(&[iv("lb_a", 0, None)], ts(5_000), ts(1_000), None, ts(9_000)).is_empty());
        // Open interval that starts after now (clock skew): nothing.
        assert!(usage(&[iv("lb_a", 8_000, None)], ts(0), ts(10_000), None, ts(5_000)).is_empty());
    }

    #[test]
    fn overlapping_intervals_are_billed_once() {
        let lines = usage(
            &[iv("lb_a", 0, Some(10_000)), iv("lb_a", 5_000, Some(12_000))],
            ts(0),
            ts(60_000),
            None,
            ts(60_000),
        );
        assert_eq!(lines[0].seconds, 12);
    }

    #[test]
    fn wire_shape() {
        let lines = usage(&[iv("lb_a", 0, Some(3_600_000))], ts(0), ts(7_200_000), None, ts(0));
        let v = serde_json::to_value(&lines[0]).unwrap();
        assert_eq!(v["quantity"], "1.000000");
        assert_eq!(v["poolId"], pool(1).as_str());
        assert_eq!(v["from"], ts(0).to_rfc3339());
        assert!(v.get("seconds").is_none());
        assert_eq!(v.as_object().unwrap().len(), 6);
    }

    #[test]
    fn billing_opens_on_first_ready_and_closes_on_deleted() {
        use ResourceState::*;
        assert!(should_open_billing(Provisioning, Ready, None));
        assert!(should_open_billing(Error, Ready, None));
        assert!(!should_open_billing(Updating, Ready, Some(ts(0))), "not the first time");
        assert!(!should_open_billing(Pending, Provisioning, None));
        assert!(!should_open_billing(Deleting, Ready, None));
        assert!(should_close_billing(Deleted));
        assert!(!should_close_billing(Deleting));
        assert!(!should_close_billing(Error));
    }

    fn intervals() -> impl Strategy<Value = Vec<BillingInterval>> {
        let one = (0usize..3, -5_000_000i64..5_000_000, proptest::option::of(0i64..3_000_000))
            .prop_map(|(r, start, len)| {
                iv(["lb_a", "lb_b", "lb_c"][r], start, len.map(|l| start + l))
            });
        proptest::collection::vec(one, 0..8)
    }

    fn seconds_of(lines: &[UsageLine]) -> BTreeMap<String, u64> {
        lines.iter().map(|l| (l.resource.clone(), l.seconds)).collect()
    }

    proptest! {
        /// Adjacent windows add up exactly, per resource, whatever the millisecond offsets.
        #[test]
        fn adjacent_windows_add_up(ivs in intervals(), a in -6_000_000i64..6_000_000, ab in 0i64..4_000_000, bc in 0i64..4_000_000, now in -6_000_000i64..9_000_000) {
            let (b, c) = (a + ab, a + ab + bc);
            let left = seconds_of(&usage(&ivs, ts(a), ts(b), None, ts(now)));
            let right = seconds_of(&usage(&ivs, ts(b), ts(c), None, ts(now)));
            let whole = seconds_of(&usage(&ivs, ts(a), ts(c), None, ts(now)));
            let mut sum = left.clone();
            for (k, v) in right { *sum.entry(k).or_default() += v; }
            prop_assert_eq!(sum, whole);
        }

        /// No line bills more than the window holds, and its bounds lie inside the window.
        #[test]
        fn never_more_than_the_window(ivs in intervals(), a in -6_000_000i64..6_000_000, len in 0i64..4_000_000, now in -6_000_000i64..9_000_000) {
            let lines = usage(&ivs, ts(a), ts(a + len), None, ts(now));
            let window = (floor_secs(ts(a + len)) - floor_secs(ts(a))).max(0) as u64;
            for l in &lines {
                prop_assert!(l.seconds > 0);
                prop_assert!(l.seconds <= window);
                prop_assert!(l.from >= floor_to_second(ts(a)) && l.to <= ts(a + len) && l.from < l.to);
                prop_assert!(l.seconds <= ((l.to - l.from).whole_seconds()) as u64);
            }
        }

        /// Intervals that end before the window or start after it give nothing.
        #[test]
        fn outside_the_window_gives_nothing(start in -5_000_000i64..5_000_000, len in 0i64..1_000_000, gap in 1_000i64..1_000_000, after in any::<bool>()) {
            let end = start + len;
            let (w_from, w_to) = if after { (end + gap, end + gap + 1_000_000) } else { (start - gap - 1_000_000, start - gap) };
            let lines = usage(&[iv("lb_a", start, Some(end))], ts(w_from), ts(w_to), None, ts(10_000_000));
            prop_assert!(lines.is_empty());
        }
    }
}
