//! What the simulated cloud offers: region, size and Kubernetes version slugs
//! (research/digitalocean.md §4.4 "Options"), and the upgrade-path rule.
//!
//! Invariant: new clusters may use only the latest patch of the three newest minors; an
//! upgrade moves to a newer patch of the same minor, or — only from the latest patch of
//! the current minor — to the next minor (no skipping minors, no downgrades).

use std::cmp::Ordering;

/// Region slugs and names.
pub const REGIONS: &[(&str, &str)] = &[
    ("nyc1", "New York 1"),
    ("nyc3", "New York 3"),
    ("sfo3", "San Francisco 3"),
    ("ams3", "Amsterdam 3"),
    ("fra1", "Frankfurt 1"),
    ("lon1", "London 1"),
    ("sgp1", "Singapore 1"),
    ("tor1", "Toronto 1"),
    ("blr1", "Bangalore 1"),
    ("syd1", "Sydney 1"),
];

/// Droplet size slugs offered for node pools.
pub const SIZES: &[&str] = &[
    "s-1vcpu-2gb",
    "s-2vcpu-4gb",
    "s-4vcpu-8gb",
    "s-8vcpu-16gb",
    "c-4",
    "g-4vcpu-16gb",
    "gpu-h100x1-80gb",
];

/// Every version the simulated cloud knows (clusters may run any of them; only some are
/// offered for new clusters).
pub const VERSIONS: &[&str] = &["1.31.9-do.0", "1.32.5-do.0", "1.32.6-do.1", "1.33.1-do.0"];

/// Features every simulated version lists.
pub const SUPPORTED_FEATURES: &[&str] =
    &["cluster-autoscaler", "docr-integration", "ha-control-plane", "token-authentication"];

/// A parsed DOKS version slug, `1.32.6-do.1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct VersionSlug {
    /// Major.
    pub major: u32,
    /// Minor.
    pub minor: u32,
    /// Patch.
    pub patch: u32,
    /// DigitalOcean revision (`-do.N`).
    pub revision: u32,
}

impl VersionSlug {
    /// Parses `1.32.6-do.1`.
    pub fn parse(slug: &str) -> Option<Self> {
        let (kube, rev) = slug.split_once("-do.")?;
        let mut parts = kube.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let patch = parts.next()?.parse().ok()?;
        if parts.next().is_some() {
            return None;
        }
        Some(Self { major, minor, patch, revision: rev.parse().ok()? })
    }

    /// `1.32.6`.
    pub fn kubernetes_version(&self) -> String {
        format!("{}.{}.{}", self.major, self.minor, self.patch)
    }
}

fn known() -> Vec<(VersionSlug, &'static str)> {
    let mut v: Vec<_> =
        VERSIONS.iter().filter_map(|s| VersionSlug::parse(s).map(|p| (p, *s))).collect();
    v.sort_by_key(|a| std::cmp::Reverse(a.0));
    v
}

/// Whether `slug` is a region this cloud has.
pub fn is_region(slug: &str) -> bool {
    REGIONS.iter().any(|(s, _)| *s == slug)
}

/// Whether `slug` is a node size this cloud offers.
pub fn is_size(slug: &str) -> bool {
    SIZES.contains(&slug)
}

/// Whether `slug` is any version this cloud knows.
pub fn is_known_version(slug: &str) -> bool {
    VERSIONS.contains(&slug)
}

/// Versions offered for new clusters, newest first: the latest patch of each of the
/// three newest minors.
pub fn offered_versions() -> Vec<&'static str> {
    let mut out: Vec<(VersionSlug, &'static str)> = Vec::new();
    for (v, s) in known() {
        if out.iter().any(|(o, _)| o.major == v.major && o.minor == v.minor) {
            continue;
        }
        if out.len() == 3 {
            break;
        }
        out.push((v, s));
    }
    out.into_iter().map(|(_, s)| s).collect()
}

/// Resolves what a create request names — an offered slug, a minor (`1.32`) or `latest` —
/// to an offered slug.
pub fn resolve_create_version(requested: &str) -> Option<&'static str> {
    let offered = offered_versions();
    if requested == "latest" {
        return offered.first().copied();
    }
    if let Some(s) = offered.iter().find(|s| **s == requested) {
        return Some(s);
    }
    // A minor like "1.32" resolves to that minor's newest offered patch.
    offered.into_iter().find(|s| {
        s.strip_prefix(requested).is_some_and(|rest| rest.starts_with('.'))
            && requested.matches('.').count() == 1
    })
}

/// Versions `current` may upgrade to, oldest first (empty when up to date).
pub fn upgrades_from(current: &str) -> Vec<&'static str> {
    let Some(cur) = VersionSlug::parse(current) else { return Vec::new() };
    let all = known();
    let latest_of_minor = all
        .iter()
        .filter(|(v, _)| v.major == cur.major && v.minor == cur.minor)
        .map(|(v, _)| *v)
        .max();
    let at_latest_patch = latest_of_minor.is_none_or(|l| l.cmp(&cur) != Ordering::Greater);
    let mut out: Vec<(VersionSlug, &'static str)> = all
        .into_iter()
        .filter(|(v, _)| {
            if *v <= cur || v.major != cur.major {
                return false;
            }
            v.minor == cur.minor || (at_latest_patch && v.minor == cur.minor + 1)
        })
        .collect();
    out.sort_by_key(|a| a.0);
    out.into_iter().map(|(_, s)| s).collect()
}

/// The region's human name.
pub fn region_name(slug: &str) -> &'static str {
    REGIONS.iter().find(|(s, _)| *s == slug).map(|(_, n)| *n).unwrap_or("Unknown")
}

/// What a droplet size offers: vCPUs, memory in GiB and GPUs (DigitalOcean's size table).
pub fn size_resources(slug: &str) -> (u32, u32, u32) {
    match slug {
        "s-1vcpu-2gb" => (1, 2, 0),
        "s-2vcpu-4gb" => (2, 4, 0),
        "s-4vcpu-8gb" => (4, 8, 0),
        "s-8vcpu-16gb" => (8, 16, 0),
        "c-4" => (4, 8, 0),
        "g-4vcpu-16gb" => (4, 16, 0),
        "gpu-h100x1-80gb" => (20, 240, 1),
        _ => (1, 2, 0),
    }
}
