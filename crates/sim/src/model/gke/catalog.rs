//! What the simulated GKE offers: its locations (regions and their zones), machine types,
//! Kubernetes versions and release channels (research/gke.md §2 "ServerConfig", §8), and
//! how a requested version or alias resolves.
//!
//! Invariant: every list here is in GKE's order (versions descending), and every version a
//! channel offers is one of [`VERSIONS`], so an alias that resolves always resolves to a
//! version `serverConfig` lists.

/// Regions and their zones (the first three are where a regional cluster's nodes go unless
/// `locations` says otherwise; "regional clusters default to 3 zones").
pub const REGIONS: &[(&str, &[&str])] = &[
    ("us-central1", &["us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"]),
    ("us-east1", &["us-east1-b", "us-east1-c", "us-east1-d"]),
    ("us-west1", &["us-west1-a", "us-west1-b", "us-west1-c"]),
    ("europe-west1", &["europe-west1-b", "europe-west1-c", "europe-west1-d"]),
    ("europe-west4", &["europe-west4-a", "europe-west4-b", "europe-west4-c"]),
    ("asia-east1", &["asia-east1-a", "asia-east1-b", "asia-east1-c"]),
];

/// A GKE location: a region or one of its zones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// A region (a regional cluster).
    Region(&'static str),
    /// A zone and its region (a zonal cluster).
    Zone(&'static str, &'static str),
}

impl Location {
    /// The location named `name`, if GKE has it.
    pub fn parse(name: &str) -> Option<Location> {
        for (region, zones) in REGIONS {
            if *region == name {
                return Some(Location::Region(region));
            }
            if let Some(z) = zones.iter().find(|z| **z == name) {
                return Some(Location::Zone(z, region));
            }
        }
        None
    }

    /// The region it is (in).
    pub fn region(self) -> &'static str {
        match self {
            Location::Region(r) | Location::Zone(_, r) => r,
        }
    }

    /// Where nodes go by default: the zone, or the region's first three zones.
    pub fn default_zones(self) -> Vec<String> {
        match self {
            Location::Zone(z, _) => vec![z.to_owned()],
            Location::Region(r) => REGIONS
                .iter()
                .find(|(name, _)| *name == r)
                .map(|(_, zones)| zones.iter().take(3).map(|z| (*z).to_owned()).collect())
                .unwrap_or_default(),
        }
    }

    /// Whether `zone` is in this location's region.
    pub fn has_zone(self, zone: &str) -> bool {
        REGIONS.iter().any(|(r, zones)| *r == self.region() && zones.contains(&zone))
    }
}

/// Machine types the simulator offers (`e2-medium` is GKE's default).
pub const MACHINE_TYPES: &[&str] = &[
    "e2-medium",
    "e2-standard-2",
    "e2-standard-4",
    "e2-standard-8",
    "n2-standard-4",
    "n2-standard-8",
    "g2-standard-4",
];

/// GKE's default machine type.
pub const DEFAULT_MACHINE_TYPE: &str = "e2-medium";

/// GKE's default boot disk size (GB).
pub const DEFAULT_DISK_SIZE_GB: i64 = 100;

/// The image type GKE defaults to and the ones it offers.
pub const IMAGE_TYPES: &[&str] = &["COS_CONTAINERD", "UBUNTU_CONTAINERD"];

/// Every version offered, descending, across two minors.
pub const VERSIONS: &[&str] =
    &["1.35.7-gke.1150000", "1.35.6-gke.1062000", "1.34.9-gke.1341000", "1.34.8-gke.1200000"];

/// Release channels: `(name, default version, valid versions)`.
pub const CHANNELS: &[(&str, &str, &[&str])] = &[
    ("RAPID", "1.35.7-gke.1150000", &["1.35.7-gke.1150000", "1.35.6-gke.1062000"]),
    ("REGULAR", "1.35.6-gke.1062000", &["1.35.6-gke.1062000", "1.34.9-gke.1341000"]),
    ("STABLE", "1.34.9-gke.1341000", &["1.34.9-gke.1341000", "1.34.8-gke.1200000"]),
    ("EXTENDED", "1.34.8-gke.1200000", &["1.34.9-gke.1341000", "1.34.8-gke.1200000"]),
];

/// The version a cluster gets with neither a channel nor a version (REGULAR's default).
pub const DEFAULT_VERSION: &str = "1.35.6-gke.1062000";

/// The channel a cluster with no channel and no version joins.
pub const DEFAULT_CHANNEL: &str = "REGULAR";

/// The versions of `channel` (every version with none).
pub fn channel_versions(channel: Option<&str>) -> &'static [&'static str] {
    match channel.and_then(|c| CHANNELS.iter().find(|(n, _, _)| *n == c)) {
        Some((_, _, v)) => v,
        None => VERSIONS,
    }
}

/// The default version of `channel` ([`DEFAULT_VERSION`] with none).
pub fn channel_default(channel: Option<&str>) -> &'static str {
    match channel.and_then(|c| CHANNELS.iter().find(|(n, _, _)| *n == c)) {
        Some((_, d, _)) => d,
        None => DEFAULT_VERSION,
    }
}

/// Resolves a requested version among `offered` (descending) as GKE does
/// (ClusterUpdate.desired_master_version): `latest` the newest; `1.X` the newest 1.X;
/// `1.X.Y` the newest 1.X.Y-gke.N; `1.X.Y-gke.N` exactly; `-` or empty the default.
pub fn resolve<'a>(requested: &str, offered: &[&'a str], default: &'a str) -> Option<&'a str> {
    match requested {
        "" | "-" => Some(default),
        "latest" => offered.first().copied(),
        v if v.contains("-gke.") => offered.iter().find(|o| **o == v).copied(),
        v => {
            let prefix = format!("{v}.");
            let dash = format!("{v}-");
            offered.iter().find(|o| o.starts_with(&prefix) || o.starts_with(&dash)).copied()
        }
    }
}

/// The most mature channel offering `version` (STABLE, then REGULAR, then RAPID).
pub fn channel_of(version: &str) -> Option<&'static str> {
    ["STABLE", "REGULAR", "RAPID"]
        .into_iter()
        .find(|c| channel_versions(Some(c)).contains(&version))
}

/// Orders two GKE versions (`1.35.7-gke.1150000`) numerically.
pub fn version_key(v: &str) -> Vec<u64> {
    v.split(['.', '-']).filter_map(|p| p.parse().ok()).collect()
}
