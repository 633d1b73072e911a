//! Upgrades and the bookings they drain (SPEC §6, §10): which version a create-mode
//! substrate's cluster should move to next, whether an `upgrades: drain` upgrade must
//! wait for bookings, when a booking counts as active, and the refusal of new bookings
//! while a drain waits.
//!
//! Invariants: an upgrade is only ever asked for a version the provider offers (never a
//! downgrade, never a skipped minor: DigitalOcean moves to a new minor only from the
//! latest patch of the current one, so a target in a later minor goes through the
//! current minor's newest offered patch first, then through each next minor); a drain
//! never upgrades while a booking is active; the wait's `since` never moves while the
//! wait lasts. (A step over a minor happens only when the provider offers nothing
//! nearer: it knows its own upgrade paths.)

use std::cmp::Ordering;

use crate::error::Error;
use crate::id::PoolId;
use crate::model::{Booking, BookingState, UpgradeWait};
use crate::policy::{UpgradePolicy, VERSION_LATEST};
use crate::ports::provider::{KubernetesVersion, PoolUpgrades, ProviderCluster, ProviderNodePool};
use crate::time::Timestamp;

/// What a substrate's cluster should do about its version now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpgradeDecision {
    /// The cluster runs the desired version (or `latest` and nothing newer is offered).
    UpToDate,
    /// A drain upgrade waits for the pool's active bookings to end (shown as
    /// `upgrade {version, since}`; new bookings are refused meanwhile).
    Wait {
        /// The version the next upgrade goes to.
        version: String,
        /// Since when it waits.
        since: Timestamp,
    },
    /// Ask the provider to upgrade to `version` now (possibly an intermediate step).
    Upgrade {
        /// The version slug to ask for.
        version: String,
    },
    /// The desired version cannot be reached by upgrades (a downgrade, a version the
    /// provider does not offer): the substrate's `error` message.
    Invalid {
        /// What is wrong and how to fix it.
        message: String,
    },
}

/// A version ordered as Kubernetes releases are: major, minor, patch, then the provider's
/// revision (`1.32.1-do.2` → `(1, 32, 1, 2)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Ver {
    major: u64,
    minor: u64,
    patch: u64,
    rev: u64,
}

impl Ver {
    fn minor_key(self) -> (u64, u64) {
        (self.major, self.minor)
    }
}

/// Parses `1.32.1-do.0` (or `1.32.1`, or the minor-only `1.32`, which gets `patch` and
/// `rev` as `u64::MAX`, meaning "the newest of that minor").
fn parse_version(s: &str) -> Option<Ver> {
    let s = s.strip_prefix('v').unwrap_or(s);
    let (core, suffix) = match s.split_once('-') {
        Some((c, suf)) => (c, Some(suf)),
        None => (s, None),
    };
    let nums: Vec<u64> = core.split('.').map(|p| p.parse().ok()).collect::<Option<_>>()?;
    let rev = match suffix {
        Some(suf) => suf.rsplit('.').next()?.parse().ok()?,
        None => 0,
    };
    match nums[..] {
        [major, minor, patch] => Some(Ver { major, minor, patch, rev }),
        [major, minor] if suffix.is_none() => {
            Some(Ver { major, minor, patch: u64::MAX, rev: u64::MAX })
        }
        _ => None,
    }
}

fn ver_of(v: &KubernetesVersion) -> Option<Ver> {
    parse_version(&v.slug).or_else(|| parse_version(&v.kubernetes_version))
}

fn is_minor_only(v: Ver) -> bool {
    v.patch == u64::MAX
}

/// The next version a cluster running `running` should move to on its way to
/// `desired`, or why there is none. Pure version logic; see [`upgrade_decision`].
fn next_version(
    desired: &str,
    running: &str,
    offered: &[KubernetesVersion],
) -> Result<Option<String>, String> {
    let offered_list = || {
        if offered.is_empty() {
            "none".to_owned()
        } else {
            offered.iter().map(|v| v.slug.as_str()).collect::<Vec<_>>().join(", ")
        }
    };
    let not_offered = || {
        format!(
            "version {desired} is not an upgrade the provider offers for this cluster (it runs {running}; offered: {}): set policy.substrate.cluster.create.version to one of those or to \"latest\"",
            offered_list()
        )
    };
    let newest = |pred: &dyn Fn(Ver) -> bool| {
        offered
            .iter()
            .filter_map(|v| ver_of(v).map(|p| (p, v)))
            .filter(|(p, _)| pred(*p))
            .max_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.slug.cmp(&b.1.slug)))
            .map(|(_, v)| v.slug.clone())
    };
    if desired == running {
        return Ok(None);
    }
    let exact_offered = offered.iter().any(|v| v.slug == desired);
    // The goal: the newest offered for `latest`, else the desired version itself.
    let goal = if desired == VERSION_LATEST {
        match newest(&|_| true) {
            Some(slug) => parse_version(&slug).map(|v| (v, Some(slug))),
            None => return Ok(None),
        }
    } else {
        parse_version(desired).map(|v| (v, (!is_minor_only(v)).then(|| desired.to_owned())))
    };
    let (Some((goal, goal_slug)), Some(run)) = (goal, parse_version(running)) else {
        // Without comparable versions only an exact offer can be trusted.
        return match desired {
            VERSION_LATEST => Ok(newest(&|_| true)),
            _ if exact_offered => Ok(Some(desired.to_owned())),
            _ => Err(not_offered()),
        };
    };
    if goal.minor_key() == run.minor_key() && is_minor_only(goal) {
        // `1.32` on a 1.32 cluster: follow that minor's newest patch.
        return Ok(newest(&|v| v > run && v.minor_key() == run.minor_key()));
    }
    if goal <= run {
        return if goal == run {
            Ok(None)
        } else {
            Err(format!(
                "version {desired} is older than the {running} the cluster runs, and a cluster cannot be downgraded: set policy.substrate.cluster.create.version to {running} or newer, or to \"latest\""
            ))
        };
    }
    if goal.major != run.major || goal.minor_key() == run.minor_key() {
        return if exact_offered
            || goal_slug.as_ref().is_some_and(|g| offered.iter().any(|v| v.slug == *g))
        {
            Ok(goal_slug.or_else(|| Some(desired.to_owned())))
        } else {
            Err(not_offered())
        };
    }
    // A later minor: first the newest offered patch of the current minor.
    if let Some(step) = newest(&|v| v > run && v.minor_key() == run.minor_key()) {
        return Ok(Some(step));
    }
    let next_minor = (run.major, run.minor + 1);
    if goal.minor_key() == next_minor {
        if let Some(g) = goal_slug.filter(|g| offered.iter().any(|v| v.slug == *g)) {
            return Ok(Some(g));
        }
        if is_minor_only(goal)
            && let Some(step) = newest(&|v| v.minor_key() == next_minor)
        {
            return Ok(Some(step));
        }
        return Err(not_offered());
    }
    // Two or more minors ahead: through the nearest offered minor (the next one, unless
    // the provider offers a longer step itself), at its newest patch not past the goal.
    let nearest = offered
        .iter()
        .filter_map(ver_of)
        .filter(|v| v.major == run.major && v.minor > run.minor && *v <= goal)
        .map(Ver::minor_key)
        .min();
    nearest
        .and_then(|m| newest(&|v| v.minor_key() == m && v <= goal))
        .map(Some)
        .ok_or_else(not_offered)
}

/// Whether a cluster running `running` is to be moved toward `desired` at all (SPEC §6):
/// `latest` resolved once, when the cluster was made, to what the provider gave it, so a
/// newer version offered later upgrades nothing; only an exact version (or a minor)
/// other than the running one does.
pub fn wants_upgrade(desired: &str, running: &str) -> bool {
    desired != running && desired != VERSION_LATEST
}

/// What a create-mode substrate's cluster should do about its version (SPEC §6).
///
/// `desired_version` is `cluster.create.version` (`latest`, an exact slug, or a
/// minor like `1.32` meaning its newest patch); `available_upgrades` is what the
/// provider offers this cluster now. `latest` resolves to the newest offered (none:
/// up to date). A target in a later minor is approached one offered step at a time (see
/// the module invariants), so `Upgrade`/`Wait` may name an intermediate version; the
/// next run continues from there. With `drain` and active bookings the decision is
/// `Wait`, keeping `waiting_since` (or starting now); with no active bookings, or
/// `immediate`, it is `Upgrade`.
pub fn upgrade_decision(
    policy: UpgradePolicy,
    desired_version: &str,
    running_version: &str,
    available_upgrades: &[KubernetesVersion],
    active_bookings: u64,
    waiting_since: Option<Timestamp>,
    now: Timestamp,
) -> UpgradeDecision {
    match next_version(desired_version, running_version, available_upgrades) {
        Err(message) => UpgradeDecision::Invalid { message },
        Ok(None) => UpgradeDecision::UpToDate,
        Ok(Some(version)) => match policy {
            UpgradePolicy::Drain if active_bookings > 0 => {
                UpgradeDecision::Wait { version, since: waiting_since.unwrap_or(now) }
            }
            UpgradePolicy::Drain | UpgradePolicy::Immediate => UpgradeDecision::Upgrade { version },
        },
    }
}

/// The node pool to upgrade next once the control plane runs its version, where the
/// provider upgrades pools one by one ([`PoolUpgrades::OneByOne`]): the first pool whose
/// nodes run another version than the control plane. `None` where pools follow the
/// control plane, or when every pool is at its version. The control plane goes first
/// and pools follow it, one operation at a time, because a provider refuses nodes newer
/// than their control plane (GKE: "desired node version … cannot be greater than current
/// master version").
pub fn pool_behind(upgrades: PoolUpgrades, cluster: &ProviderCluster) -> Option<&ProviderNodePool> {
    if upgrades == PoolUpgrades::WithControlPlane {
        return None;
    }
    cluster
        .node_pools
        .iter()
        .find(|p| p.version.as_deref().is_some_and(|v| !v.is_empty() && v != cluster.version))
}

/// The control plane's version as the one upgrade a lagging pool is offered (see
/// [`pool_behind`]): what [`upgrade_decision`] takes to decide a pool's step (drained
/// first under `upgrades: drain`, like the control plane's).
pub fn control_plane_offer(cluster: &ProviderCluster) -> Vec<KubernetesVersion> {
    let slug = cluster.version.clone();
    let kubernetes_version = slug.split('-').next().unwrap_or(&slug).to_owned();
    vec![KubernetesVersion { slug, kubernetes_version }]
}

/// Whether a booking holds its pool at `now`: stored `active` and not past `endsAt`.
/// A booking ending at `t` holds `[createdAt, t)`: at `t` itself it has ended, the same
/// half-open rule as billing intervals (the store's count must use `ends_at > now`).
pub fn booking_is_active(booking: &Booking, now: Timestamp) -> bool {
    booking.state == BookingState::Active && booking.ends_at.is_none_or(|end| now < end)
}

/// The state SPEC §10 shows for a booking at `now`: `ended` once past its `endsAt`, even
/// while it is stored `active` (the store's `state` filter uses the same rule).
pub fn booking_state_at(booking: &Booking, now: Timestamp) -> BookingState {
    if booking_is_active(booking, now) { BookingState::Active } else { BookingState::Ended }
}

/// The refusal of `bookings.create` on a pool whose drain upgrade waits (SPEC §10):
/// `FAILED_PRECONDITION` naming the upgrade's version, or `Ok` when none waits.
pub fn booking_refused_by_upgrade(
    pool: &PoolId,
    upgrade: Option<&UpgradeWait>,
) -> Result<(), Error> {
    match upgrade {
        None => Ok(()),
        Some(u) => Err(Error::failed_precondition(format!(
            "pool {pool} is draining for an upgrade of its cluster to {} (waiting since {} for its active bookings to end; upgrades: drain): new bookings are refused until the upgrade has started",
            u.version, u.since
        ))),
    }
}

/// Orders version slugs as releases (unparseable ones last, by string), e.g. to show
/// offered versions newest first.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    match (parse_version(a), parse_version(b)) {
        (Some(x), Some(y)) => x.cmp(&y).then_with(|| a.cmp(b)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use crate::id::BookingId;
    use crate::name::TenantId;
    use proptest::prelude::*;
    use time::Duration;

    fn cluster_at(version: &str, pools: &[Option<&str>]) -> ProviderCluster {
        let pool = |i: usize, v: Option<&str>| ProviderNodePool {
            id: format!("p{i}"),
            name: format!("p{i}"),
            size: "e2-standard-4".into(),
            count: 1,
            auto_scale: false,
            min_nodes: 0,
            max_nodes: 0,
            labels: Default::default(),
            taints: vec![],
            tags: vec![],
            nodes: vec![],
            version: v.map(str::to_owned),
        };
        ProviderCluster {
            id: "c".into(),
            name: "c".into(),
            region: "us-central1-a".into(),
            version: version.into(),
            state: crate::ports::ProviderClusterState::Running,
            mode: crate::model::ClusterMode::Standard,
            message: None,
            endpoint: None,
            high_availability: false,
            tags: vec![],
            auto_upgrade: false,
            surge_upgrade: false,
            maintenance_window: None,
            node_pools: pools.iter().enumerate().map(|(i, v)| pool(i, *v)).collect(),
            nodes: None,
            nodes_unread: None,
            created_at: None,
        }
    }

    #[test]
    fn pools_follow_the_control_plane_one_by_one_where_the_provider_versions_them() {
        let (old, new) = ("1.34.9-gke.1341000", "1.35.6-gke.1062000");
        let c = cluster_at(new, &[Some(new), Some(old), Some(old)]);
        assert_eq!(pool_behind(PoolUpgrades::OneByOne, &c).map(|p| p.name.as_str()), Some("p1"));
        assert_eq!(pool_behind(PoolUpgrades::WithControlPlane, &c), None, "DigitalOcean's way");
        assert_eq!(pool_behind(PoolUpgrades::OneByOne, &cluster_at(new, &[Some(new)])), None);
        assert_eq!(pool_behind(PoolUpgrades::OneByOne, &cluster_at(new, &[None])), None);
        // A pool's step is an ordinary upgrade decision toward the control plane's version.
        let now = Timestamp::from_unix_ms(1_800_000_000_000);
        let offer = control_plane_offer(&c);
        let d = upgrade_decision(UpgradePolicy::Drain, new, old, &offer, 0, None, now);
        assert_eq!(d, UpgradeDecision::Upgrade { version: new.into() });
        let d = upgrade_decision(UpgradePolicy::Drain, new, old, &offer, 2, None, now);
        assert_eq!(d, UpgradeDecision::Wait { version: new.into(), since: now });
    }

    fn v(slug: &str) -> KubernetesVersion {
        KubernetesVersion {
            slug: slug.into(),
            kubernetes_version: slug.split('-').next().unwrap().into(),
        }
    }

    fn vs(slugs: &[&str]) -> Vec<KubernetesVersion> {
        slugs.iter().map(|s| v(s)).collect()
    }

    fn now() -> Timestamp {
        Timestamp::from_unix_ms(1_798_000_000_000)
    }

    fn decide(desired: &str, running: &str, offered: &[&str]) -> UpgradeDecision {
        upgrade_decision(UpgradePolicy::Immediate, desired, running, &vs(offered), 0, None, now())
    }

    fn up(v: &str) -> UpgradeDecision {
        UpgradeDecision::Upgrade { version: v.into() }
    }

    #[test]
    fn latest_never_asks_for_an_upgrade_once_the_cluster_runs() {
        assert!(!wants_upgrade("latest", "1.31.9-do.0"));
        assert!(!wants_upgrade("1.31.9-do.0", "1.31.9-do.0"));
        assert!(wants_upgrade("1.32.1-do.0", "1.31.9-do.0"));
        assert!(wants_upgrade("1.32", "1.31.9-do.0"));
    }

    #[test]
    fn latest_resolves_to_the_newest_offered() {
        assert_eq!(decide("latest", "1.31.9-do.0", &[]), UpgradeDecision::UpToDate);
        // Offered out of order: the newest by version, not by position or string.
        assert_eq!(
            decide("latest", "1.31.9-do.0", &["1.32.10-do.0", "1.32.9-do.1"]),
            up("1.32.10-do.0")
        );
        assert_eq!(decide("latest", "1.32.1-do.0", &["1.32.1-do.1"]), up("1.32.1-do.1"));
    }

    #[test]
    fn exact_versions() {
        assert_eq!(
            decide("1.32.1-do.0", "1.32.1-do.0", &["1.32.5-do.0"]),
            UpgradeDecision::UpToDate
        );
        assert_eq!(decide("1.32.5-do.0", "1.32.1-do.0", &["1.32.5-do.0"]), up("1.32.5-do.0"));
        let UpgradeDecision::Invalid { message } =
            decide("1.31.1-do.0", "1.32.1-do.0", &["1.32.5-do.0"])
        else {
            panic!()
        };
        assert!(message.contains("cannot be downgraded"), "{message}");
        let UpgradeDecision::Invalid { message } =
            decide("1.32.4-do.0", "1.32.1-do.0", &["1.32.5-do.0"])
        else {
            panic!()
        };
        assert!(message.contains("offered: 1.32.5-do.0"), "{message}");
        assert!(
            message.contains("1.32.4-do.0") && message.contains("runs 1.32.1-do.0"),
            "{message}"
        );
    }

    #[test]
    fn a_later_minor_goes_through_the_current_minors_latest_patch() {
        // Offered both: the latest patch of 1.31 first, even though 1.32.5 is offered.
        assert_eq!(
            decide("1.32.5-do.0", "1.31.1-do.0", &["1.31.9-do.0", "1.31.4-do.0", "1.32.5-do.0"]),
            up("1.31.9-do.0")
        );
        assert_eq!(
            decide("latest", "1.31.1-do.0", &["1.31.9-do.0", "1.32.5-do.0"]),
            up("1.31.9-do.0")
        );
        // Target not offered (only the patch is): still the patch first.
        assert_eq!(decide("1.32.5-do.0", "1.31.1-do.0", &["1.31.9-do.0"]), up("1.31.9-do.0"));
        // At the latest patch: the target itself.
        assert_eq!(decide("1.32.5-do.0", "1.31.9-do.0", &["1.32.5-do.0"]), up("1.32.5-do.0"));
        // Two minors ahead: through the next minor's newest.
        assert_eq!(
            decide("1.33.2-do.0", "1.31.9-do.0", &["1.32.1-do.0", "1.32.5-do.0", "1.33.2-do.0"]),
            up("1.32.5-do.0")
        );
        // Next minor, exact target not offered, nothing of the current minor: invalid.
        assert!(matches!(
            decide("1.32.7-do.0", "1.31.9-do.0", &["1.32.5-do.0"]),
            UpgradeDecision::Invalid { .. }
        ));
    }

    #[test]
    fn minor_only_tracks_that_minors_newest() {
        assert_eq!(
            decide("1.32", "1.32.1-do.0", &["1.32.5-do.0", "1.33.0-do.0"]),
            up("1.32.5-do.0")
        );
        assert_eq!(decide("1.32", "1.32.5-do.0", &["1.33.0-do.0"]), UpgradeDecision::UpToDate);
        assert_eq!(
            decide("1.32", "1.31.9-do.0", &["1.32.1-do.0", "1.32.5-do.0"]),
            up("1.32.5-do.0")
        );
        assert!(matches!(decide("1.31", "1.32.5-do.0", &[]), UpgradeDecision::Invalid { .. }));
    }

    #[test]
    fn unparseable_versions_trust_only_exact_offers() {
        assert_eq!(decide("weird", "other", &["weird"]), up("weird"));
        assert!(matches!(decide("weird", "other", &["x"]), UpgradeDecision::Invalid { .. }));
        assert_eq!(decide("latest", "other", &["1.2.3-do.0"]), up("1.2.3-do.0"));
    }

    #[test]
    fn drain_waits_for_bookings() {
        let offered = vs(&["1.32.5-do.0"]);
        let d = |policy, bookings, since| {
            upgrade_decision(policy, "latest", "1.32.1-do.0", &offered, bookings, since, now())
        };
        assert_eq!(
            d(UpgradePolicy::Drain, 2, None),
            UpgradeDecision::Wait { version: "1.32.5-do.0".into(), since: now() }
        );
        let earlier = now() - Duration::hours(1);
        assert_eq!(
            d(UpgradePolicy::Drain, 1, Some(earlier)),
            UpgradeDecision::Wait { version: "1.32.5-do.0".into(), since: earlier }
        );
        assert_eq!(d(UpgradePolicy::Drain, 0, Some(earlier)), up("1.32.5-do.0"));
        assert_eq!(d(UpgradePolicy::Immediate, 5, None), up("1.32.5-do.0"));
        // Nothing to do: no wait even with bookings.
        assert_eq!(
            upgrade_decision(
                UpgradePolicy::Drain,
                "latest",
                "1.32.5-do.0",
                &[],
                3,
                Some(earlier),
                now()
            ),
            UpgradeDecision::UpToDate
        );
    }

    fn booking(state: BookingState, ends_at: Option<Timestamp>) -> Booking {
        Booking {
            booking_id: BookingId::generate(1, 1),
            tenant_id: TenantId::parse("acme").unwrap(),
            pool_id: PoolId::generate(1, 2),
            node_name: None,
            state,
            created_at: now() - Duration::hours(2),
            ends_at,
            ended_at: None,
        }
    }

    #[test]
    fn bookings_past_their_end_are_not_active() {
        assert!(booking_is_active(&booking(BookingState::Active, None), now()));
        assert!(booking_is_active(
            &booking(BookingState::Active, Some(now() + Duration::milliseconds(1))),
            now()
        ));
        assert!(!booking_is_active(&booking(BookingState::Active, Some(now())), now()));
        assert!(!booking_is_active(
            &booking(BookingState::Active, Some(now() - Duration::hours(1))),
            now()
        ));
        assert!(!booking_is_active(&booking(BookingState::Ended, None), now()));
        let past = booking(BookingState::Active, Some(now()));
        assert_eq!(booking_state_at(&past, now()), BookingState::Ended);
        let open = booking(BookingState::Active, None);
        assert_eq!(booking_state_at(&open, now()), BookingState::Active);
    }

    #[test]
    fn bookings_are_refused_naming_the_upgrade() {
        let pool = PoolId::generate(1, 2);
        assert!(booking_refused_by_upgrade(&pool, None).is_ok());
        let wait = UpgradeWait { version: "1.32.5-do.0".into(), since: now() };
        let e = booking_refused_by_upgrade(&pool, Some(&wait)).unwrap_err();
        assert_eq!(e.code, ErrorCode::FailedPrecondition);
        assert!(
            e.message.contains("1.32.5-do.0") && e.message.contains(pool.as_str()),
            "{}",
            e.message
        );
    }

    #[test]
    fn versions_order_as_releases() {
        let mut v = vec!["1.32.10-do.0", "junk", "1.32.9-do.1", "1.32.9-do.0", "1.4.0-do.0"];
        v.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(v, vec!["1.4.0-do.0", "1.32.9-do.0", "1.32.9-do.1", "1.32.10-do.0", "junk"]);
    }

    fn slug() -> impl Strategy<Value = String> {
        (1u64..2, 29u64..34, 0u64..12, 0u64..2)
            .prop_map(|(a, b, c, d)| format!("{a}.{b}.{c}-do.{d}"))
    }

    proptest! {
        /// Whatever is desired, an upgrade only ever asks for an offered version newer
        /// than the running one, never skipping a minor, and never from the current
        /// minor's non-latest patch to a later minor.
        #[test]
        fn upgrades_are_offered_and_never_skip(
            desired in prop_oneof![Just("latest".to_owned()), slug()],
            running in slug(),
            offered in proptest::collection::vec(slug(), 0..8),
        ) {
            let run = parse_version(&running).unwrap();
            let offered: Vec<String> = offered.into_iter().filter(|s| parse_version(s).unwrap() > run).collect();
            let d = upgrade_decision(UpgradePolicy::Immediate, &desired, &running, &vs(&offered.iter().map(String::as_str).collect::<Vec<_>>()), 0, None, now());
            if let UpgradeDecision::Upgrade { version } = &d {
                prop_assert!(offered.contains(version));
                let to = parse_version(version).unwrap();
                prop_assert!(to > run);
                let skipped = offered.iter().any(|s| { let p = parse_version(s).unwrap(); p.minor > run.minor && p.minor < to.minor });
                prop_assert!(!skipped, "skipped an offered minor");
                if to.minor > run.minor {
                    let newer_patch = offered.iter().any(|s| { let p = parse_version(s).unwrap(); p.minor == run.minor && p > run });
                    prop_assert!(!newer_patch, "skipped the current minor's patch");
                }
                if desired != "latest" { prop_assert!(to <= parse_version(&desired).unwrap()); }
            }
            if desired == running { prop_assert_eq!(d, UpgradeDecision::UpToDate); }
        }

        /// Following the decisions from any start reaches `latest` in few steps.
        #[test]
        fn latest_is_reached(running in slug(), offered in proptest::collection::vec(slug(), 0..10)) {
            let mut running = running;
            let newest = offered.iter().max_by(|a, b| compare_versions(a, b)).cloned();
            for _ in 0..12 {
                let run = parse_version(&running).unwrap();
                let avail: Vec<&str> = offered.iter().map(String::as_str).filter(|s| parse_version(s).unwrap() > run).collect();
                match decide("latest", &running, &avail) {
                    UpgradeDecision::Upgrade { version } => running = version,
                    UpgradeDecision::UpToDate => break,
                    other => prop_assert!(false, "{:?}", other),
                }
            }
            let done = newest.is_none_or(|n| compare_versions(&running, &n) != Ordering::Less);
            prop_assert!(done, "stuck at {}", running);
        }
    }
}
