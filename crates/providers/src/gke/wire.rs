//! GKE's v1 wire types as Google's REST transport writes them (proto3 JSON: camelCase,
//! zero values left out, 64-bit integers as strings, enums by name; unknown fields
//! ignored) and their translation into the port's language.
//!
//! Invariant: a field GKE leaves out reads as its zero value, never as an error; counts
//! cross here and only here — GKE's are per zone, the port's are a pool's total.

use std::collections::BTreeMap;

use bc_domain::ProviderError;
use bc_domain::Timestamp;
use bc_domain::model::ClusterMode;
use bc_domain::policy::{Taint, TaintEffect};
use bc_domain::ports::{
    NodePoolRequest, ProviderCluster, ProviderClusterState, ProviderNode, ProviderNodePool,
    ProviderResult,
};
use serde::Deserialize;
use serde_json::{Value, json};

/// A cluster (`google.container.v1.Cluster`, the fields read).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Cluster {
    pub name: String,
    pub id: String,
    pub location: String,
    pub locations: Vec<String>,
    pub status: String,
    pub status_message: String,
    pub conditions: Vec<Condition>,
    pub endpoint: String,
    pub master_auth: MasterAuth,
    pub current_master_version: String,
    pub resource_labels: BTreeMap<String, String>,
    pub label_fingerprint: String,
    pub node_pools: Vec<NodePool>,
    pub autopilot: Autopilot,
    pub create_time: String,
    pub release_channel: ReleaseChannel,
}

/// `ReleaseChannel` (`channel` by name; absent or `UNSPECIFIED`: not enrolled).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub struct ReleaseChannel {
    pub channel: String,
}

/// `StatusCondition`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Condition {
    pub message: String,
}

/// `MasterAuth`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MasterAuth {
    /// Base64 of the PEM.
    pub cluster_ca_certificate: String,
}

/// `Autopilot`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub struct Autopilot {
    pub enabled: bool,
}

/// A node pool.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NodePool {
    pub name: String,
    pub status: String,
    pub version: String,
    pub initial_node_count: i64,
    pub config: NodeConfig,
    pub autoscaling: Autoscaling,
    pub locations: Vec<String>,
}

/// `NodeConfig`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeConfig {
    pub machine_type: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<WireTaint>,
    pub resource_labels: BTreeMap<String, String>,
}

/// `NodeTaint` (effect by name or number).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub struct WireTaint {
    pub key: String,
    pub value: String,
    pub effect: Value,
}

/// `NodePoolAutoscaling`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Autoscaling {
    pub enabled: bool,
    pub min_node_count: i64,
    pub max_node_count: i64,
    pub total_min_node_count: i64,
    pub total_max_node_count: i64,
}

/// `ListClustersResponse`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClusterList {
    pub clusters: Vec<Cluster>,
    /// Zones that could not be read: the list is partial.
    pub missing_zones: Vec<String>,
}

/// An `Operation` (the fields read).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Operation {
    pub name: String,
    /// By name or by number.
    pub status: Value,
    /// By name or by number.
    pub operation_type: Value,
    pub target_link: String,
    pub status_message: String,
    pub error: Option<OpError>,
}

/// `ListOperationsResponse`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct OperationList {
    pub operations: Vec<Operation>,
}

/// `Operation.Type`'s numbers (google/container/v1/cluster_service.proto), for a
/// transport that writes enums by number.
const OPERATION_TYPES: &[(i64, &str)] = &[
    (1, "CREATE_CLUSTER"),
    (2, "DELETE_CLUSTER"),
    (3, "UPGRADE_MASTER"),
    (4, "UPGRADE_NODES"),
    (5, "REPAIR_CLUSTER"),
    (6, "UPDATE_CLUSTER"),
    (7, "CREATE_NODE_POOL"),
    (8, "DELETE_NODE_POOL"),
    (9, "SET_NODE_POOL_MANAGEMENT"),
    (10, "AUTO_REPAIR_NODES"),
    (11, "AUTO_UPGRADE_NODES"),
    (12, "SET_LABELS"),
    (13, "SET_MASTER_AUTH"),
    (14, "SET_NODE_POOL_SIZE"),
    (15, "SET_NETWORK_POLICY"),
    (16, "SET_MAINTENANCE_POLICY"),
    (18, "RESIZE_CLUSTER"),
    (19, "FLEET_FEATURE_UPGRADE"),
];

impl Operation {
    /// Its `operationType` by name, whether written by name or by number.
    pub fn type_name(&self) -> String {
        match &self.operation_type {
            Value::String(s) => s.clone(),
            Value::Number(n) => n
                .as_i64()
                .and_then(|n| OPERATION_TYPES.iter().find(|(k, _)| *k == n))
                .map_or_else(|| n.to_string(), |(_, name)| (*name).to_owned()),
            _ => "TYPE_UNSPECIFIED".to_owned(),
        }
    }

    /// Whether it is still at work (`PENDING`, `RUNNING` or `ABORTING`, by name or number).
    pub fn in_flight(&self) -> bool {
        match &self.status {
            Value::String(s) => matches!(s.as_str(), "PENDING" | "RUNNING" | "ABORTING"),
            Value::Number(n) => matches!(n.as_i64(), Some(1 | 2 | 4)),
            _ => false,
        }
    }

    /// The node pool it acts on, from its `targetLink` (`…/clusters/c/nodePools/np`).
    fn pool(&self) -> Option<&str> {
        self.target_link.split_once("/nodePools/").map(|(_, p)| p.split('/').next().unwrap_or(p))
    }

    /// Whether it acts on cluster `name` (or one of its node pools).
    pub fn targets(&self, name: &str) -> bool {
        let Some((_, rest)) = self.target_link.split_once("/clusters/") else { return false };
        rest.split('/').next() == Some(name)
    }

    /// What it does, in words, naming its node pool when it acts on one:
    /// `resizing node pool bc-x-cpu (SET_NODE_POOL_SIZE)`.
    pub fn describe(&self) -> String {
        let kind = self.type_name();
        let pool = self.pool().map(|p| format!("node pool {p}"));
        let pool = pool.as_deref().unwrap_or("a node pool");
        let what = match kind.as_str() {
            "UPGRADE_MASTER" => "upgrading the control plane".to_owned(),
            "UPGRADE_NODES" | "AUTO_UPGRADE_NODES" => format!("updating {pool}"),
            "SET_NODE_POOL_SIZE" => format!("resizing {pool}"),
            "CREATE_NODE_POOL" => format!("creating {pool}"),
            "DELETE_NODE_POOL" => format!("deleting {pool}"),
            "SET_NODE_POOL_MANAGEMENT" => format!("changing the management of {pool}"),
            "AUTO_REPAIR_NODES" => format!("repairing nodes of {pool}"),
            "REPAIR_CLUSTER" => "repairing the cluster".to_owned(),
            "RESIZE_CLUSTER" => "resizing the cluster".to_owned(),
            "SET_LABELS" => "setting the cluster's labels".to_owned(),
            _ => "updating the cluster".to_owned(),
        };
        format!("{what} ({kind})")
    }
}

/// `google.rpc.Status` of a failed operation.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub struct OpError {
    pub message: String,
}

/// `ServerConfig`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServerConfig {
    pub default_cluster_version: String,
    pub valid_master_versions: Vec<String>,
    pub valid_node_versions: Vec<String>,
    pub channels: Vec<ReleaseChannelConfig>,
}

/// `ServerConfig.ReleaseChannelConfig`: the versions a cluster enrolled in `channel` may
/// run (and be upgraded to).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReleaseChannelConfig {
    pub channel: String,
    pub valid_versions: Vec<String>,
}

impl ServerConfig {
    /// The control-plane versions a cluster in `channel` may move to: its channel's
    /// `validVersions` when enrolled (GKE refuses any other for such a cluster), every
    /// `validMasterVersions` when not (`""` or `UNSPECIFIED`). A channel the answer does
    /// not list offers nothing.
    pub fn master_versions_for(&self, channel: &str) -> &[String] {
        if channel.is_empty() || channel == "UNSPECIFIED" {
            return &self.valid_master_versions;
        }
        self.channels
            .iter()
            .find(|c| c.channel == channel)
            .map(|c| c.valid_versions.as_slice())
            .unwrap_or_default()
    }
}

/// The prefix of labels GKE adds itself (`goog-gke-node-pool-provisioning-model`):
/// never ours, never shown as tags.
const GOOGLE_LABEL_PREFIX: &str = "goog-";

/// The GCP label that carries a tag. Tags are `[a-z0-9-]` tokens (our ownership marks,
/// up to 77 characters with a long pool id), GCP keys and values hold at most 63: a tag
/// is split at its last `-` that leaves both halves within 63 and a value that is not
/// empty (an empty value is the one zero value a label map could lose on the way), and
/// [`tags_of`] joins key and value back with `-`. A tag without such a `-` is a key with
/// an empty value.
pub fn label_of_tag(tag: &str) -> (String, String) {
    let split = tag
        .char_indices()
        .filter(|&(i, c)| c == '-' && i > 0 && i + 1 < tag.len())
        .map(|(i, _)| i)
        .rfind(|&i| i <= 63 && tag.len() - i - 1 <= 63);
    match split {
        Some(i) => (tag[..i].to_owned(), tag[i + 1..].to_owned()),
        None => (tag.to_owned(), String::new()),
    }
}

/// The tags a label set carries ([`label_of_tag`]'s inverse), GKE's own labels left out.
pub fn tags_of(labels: &BTreeMap<String, String>) -> Vec<String> {
    labels
        .iter()
        .filter(|(k, _)| !k.starts_with(GOOGLE_LABEL_PREFIX))
        .map(|(k, v)| if v.is_empty() { k.clone() } else { format!("{k}-{v}") })
        .collect()
}

/// The labels of `tags`.
pub fn labels_of(tags: &[String]) -> BTreeMap<String, String> {
    tags.iter().map(|t| label_of_tag(t)).collect()
}

/// Whether `location` is a zone (`us-central1-a`) rather than a region (`us-central1`):
/// a zone has three dash-separated parts.
pub fn is_zone(location: &str) -> bool {
    location.split('-').count() >= 3
}

/// The zones a pool's nodes spread over: its own `locations`, else the cluster's, else
/// one (a zonal cluster) or GKE's default three (a regional one).
pub fn zones(pool: &NodePool, cluster_location: &str, cluster_zones: &[String]) -> u32 {
    let n = if !pool.locations.is_empty() {
        pool.locations.len()
    } else if !cluster_zones.is_empty() {
        cluster_zones.len()
    } else if is_zone(cluster_location) {
        1
    } else {
        3
    };
    u32::try_from(n).unwrap_or(u32::MAX).max(1)
}

/// The per-zone count GKE takes for a pool of `total` nodes over `zones` zones: the
/// port's counts are totals, so a total that does not divide evenly is refused (an
/// uneven spread cannot be asked for) — use a zonal location, or a multiple.
pub fn per_zone(total: u32, zones: u32, field: &str) -> ProviderResult<i64> {
    if zones <= 1 {
        return Ok(i64::from(total));
    }
    if !total.is_multiple_of(zones) {
        return Err(ProviderError::Refused {
            message: format!(
                "{field} {total}: GKE counts nodes per zone and this node pool spans {zones} zones, so its count must be a multiple of {zones} (or use a zonal location such as <region>-a)"
            ),
        });
    }
    Ok(i64::from(total / zones))
}

/// The per-zone `initialNodeCount` of an autoscaled pool over `zones` zones whose
/// bounds are the totals `(min, max)`, starting near `start` nodes: GKE starts the same
/// count in every zone, so the pool starts with a multiple of `zones` nodes — the
/// smallest that reaches `start`, else the largest within `max` — and that total must lie
/// within the bounds, or the pool would start outside them (refused, naming the field).
pub fn initial_per_zone(start: u32, (min, max): (u32, u32), zones: u32) -> ProviderResult<u32> {
    let zones = zones.max(1);
    let start = start.clamp(min, max.max(min));
    let mut per = start.div_ceil(zones);
    if per.saturating_mul(zones) > max {
        per = max / zones;
    }
    let total = per.saturating_mul(zones);
    if total < min {
        return Err(ProviderError::Refused {
            message: format!(
                "autoScale {min}–{max}: GKE starts the same number of nodes in each zone and this node pool spans {zones} zones, so it starts with a multiple of {zones} nodes, and none lies within {min}–{max} (widen the bounds, or use a zonal location such as <region>-a)"
            ),
        });
    }
    Ok(per)
}

fn cluster_state(s: &str) -> ProviderClusterState {
    match s {
        "PROVISIONING" => ProviderClusterState::Provisioning,
        "RUNNING" => ProviderClusterState::Running,
        // Work in progress (upgrades, pool changes): the cluster serves, a change waits.
        "RECONCILING" => ProviderClusterState::Upgrading,
        "STOPPING" => ProviderClusterState::Deleting,
        "ERROR" => ProviderClusterState::Error,
        "DEGRADED" => ProviderClusterState::Degraded,
        other => ProviderClusterState::Unknown(other.to_owned()),
    }
}

/// Whether a cluster in `status` serves its API: running, or running while GKE works on
/// it (`RECONCILING`, `DEGRADED`).
pub fn serves(status: &str) -> bool {
    matches!(status, "RUNNING" | "RECONCILING" | "DEGRADED")
}

fn taint_effect(v: &Value) -> TaintEffect {
    match v {
        Value::String(s) if s == "PREFER_NO_SCHEDULE" => TaintEffect::PreferNoSchedule,
        Value::String(s) if s == "NO_EXECUTE" => TaintEffect::NoExecute,
        Value::Number(n) if n.as_i64() == Some(2) => TaintEffect::PreferNoSchedule,
        Value::Number(n) if n.as_i64() == Some(3) => TaintEffect::NoExecute,
        _ => TaintEffect::NoSchedule,
    }
}

fn effect_name(e: TaintEffect) -> &'static str {
    match e {
        TaintEffect::NoSchedule => "NO_SCHEDULE",
        TaintEffect::PreferNoSchedule => "PREFER_NO_SCHEDULE",
        TaintEffect::NoExecute => "NO_EXECUTE",
    }
}

fn clamp_u32(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

/// The Nodes of each node pool (by its name), read from the cluster's own API by GKE's
/// `cloud.google.com/gke-nodepool` label, each with its `gce://` provider id.
pub type PoolNodes = BTreeMap<String, Vec<ProviderNode>>;

impl NodePool {
    /// The port's pool: the id is the name (GKE has no pool ids); `count` the pool's
    /// total, `nodes` the Nodes counted from the cluster when they could be
    /// (`node_counts`), else (a cluster not serving its API yet, so never resized; or
    /// one listed with its Nodes unread, whose count is then no observation) the
    /// per-zone initial count times its zones.
    pub fn into_port(
        self,
        cluster_location: &str,
        cluster_zones: &[String],
        node_counts: Option<&PoolNodes>,
    ) -> ProviderNodePool {
        let zones = zones(&self, cluster_location, cluster_zones);
        let a = &self.autoscaling;
        let (min, max) = if a.total_max_node_count > 0 {
            (clamp_u32(a.total_min_node_count), clamp_u32(a.total_max_node_count))
        } else {
            (
                clamp_u32(a.min_node_count).saturating_mul(zones),
                clamp_u32(a.max_node_count).saturating_mul(zones),
            )
        };
        // Counted Nodes are the truth (a pool with none counted has none); GKE reports
        // no current size, and the adapter asks for counts whenever the cluster serves,
        // so `None` is a cluster still being made, whose initial count is its size — or
        // one whose API did not answer, which the adapter marks `nodes_unread`.
        let nodes = node_counts.and_then(|c| c.get(&self.name)).cloned().unwrap_or_default();
        let count = match node_counts {
            Some(_) => u32::try_from(nodes.len()).unwrap_or(u32::MAX),
            None => clamp_u32(self.initial_node_count).saturating_mul(zones),
        };
        let taints = self
            .config
            .taints
            .iter()
            .map(|t| Taint {
                key: t.key.clone(),
                value: t.value.clone(),
                effect: taint_effect(&t.effect),
            })
            .collect();
        ProviderNodePool {
            id: self.name.clone(),
            name: self.name,
            size: self.config.machine_type,
            count,
            auto_scale: a.enabled,
            min_nodes: if a.enabled { min } else { 0 },
            max_nodes: if a.enabled { max } else { 0 },
            labels: self.config.labels,
            taints,
            tags: tags_of(&self.config.resource_labels),
            nodes,
            version: Some(self.version).filter(|v| !v.is_empty()),
        }
    }
}

impl Cluster {
    /// The port's cluster.
    pub fn into_port(self, node_counts: Option<&PoolNodes>) -> ProviderCluster {
        let message = Some(self.status_message.clone())
            .filter(|m| !m.is_empty())
            .or_else(|| self.conditions.iter().map(|c| c.message.clone()).find(|m| !m.is_empty()));
        let (location, zones) = (self.location.clone(), self.locations.clone());
        ProviderCluster {
            id: self.id,
            name: self.name,
            region: self.location,
            version: self.current_master_version,
            state: cluster_state(&self.status),
            mode: if self.autopilot.enabled {
                ClusterMode::Autopilot
            } else {
                ClusterMode::Standard
            },
            message,
            endpoint: Some(self.endpoint).filter(|e| !e.is_empty()),
            // A regional cluster's control plane is replicated across zones.
            high_availability: !is_zone(&location),
            tags: tags_of(&self.resource_labels),
            // Release channels upgrade clusters themselves.
            auto_upgrade: true,
            surge_upgrade: true,
            maintenance_window: None,
            node_pools: self
                .node_pools
                .into_iter()
                .map(|p| p.into_port(&location, &zones, node_counts))
                .collect(),
            // Counted from the cluster's API, when it is read (`Gke::port_cluster`).
            nodes: None,
            nodes_unread: None,
            created_at: parse_time(&self.create_time),
        }
    }
}

fn parse_time(s: &str) -> Option<Timestamp> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    Some(Timestamp::from_unix_ms(i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()?))
}

/// The `nodePool` body of a create: `total` nodes spread over `zones` zones.
pub fn node_pool_body(req: &NodePoolRequest, zones: u32) -> ProviderResult<Value> {
    let mut pool = json!({
        "name": req.name,
        "config": config_body(req),
        "management": {"autoUpgrade": true, "autoRepair": true},
    });
    let initial = match req.auto_scale {
        Some((min, max)) => {
            // Pool-wide bounds: exact whatever the zones.
            pool["autoscaling"] = json!({"enabled": true, "totalMinNodeCount": min,
                "totalMaxNodeCount": max, "locationPolicy": "BALANCED"});
            initial_per_zone(req.count.unwrap_or(min), (min, max), zones)?
        }
        None => clamp_u32(per_zone(req.count.unwrap_or(0), zones, "count")?),
    };
    if initial > 0 {
        pool["initialNodeCount"] = json!(initial);
    }
    Ok(pool)
}

/// `NodeConfig` of a request: machine type, Kubernetes labels, taints, and the tags as
/// resource labels.
pub fn config_body(req: &NodePoolRequest) -> Value {
    let mut config = json!({"machineType": req.size});
    if !req.labels.is_empty() {
        config["labels"] = json!(req.labels);
    }
    if !req.taints.is_empty() {
        config["taints"] = taints_body(&req.taints);
    }
    if !req.tags.is_empty() {
        config["resourceLabels"] = json!(labels_of(&req.tags));
    }
    config
}

/// Taints as `NodeTaint`s.
pub fn taints_body(taints: &[Taint]) -> Value {
    Value::Array(
        taints
            .iter()
            .map(|t| json!({"key": t.key, "value": t.value, "effect": effect_name(t.effect)}))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bc_domain::ports::ProviderNodeState;

    #[test]
    fn tags_cross_as_gcp_labels_and_come_back_whole() {
        let short = "better-compute-cluster-cluster-01jd8xk3m4n5p6q7r8s9t0v1w2".to_owned();
        let long = format!("better-compute-pool-pool-{}", "a".repeat(52));
        let labels = labels_of(&[short.clone(), long.clone()]);
        assert!(labels.keys().all(|k| k.len() <= 63) && labels.values().all(|v| v.len() <= 63));
        let mut with_google = labels.clone();
        with_google.insert("goog-gke-node-pool-provisioning-model".into(), "on-demand".into());
        assert!(labels.values().all(|v| !v.is_empty()), "{labels:?}");
        let mut back = tags_of(&with_google);
        back.sort();
        let mut want = vec![short, long];
        want.sort();
        assert_eq!(back, want);
    }

    #[test]
    fn counts_are_totals_on_our_side_and_per_zone_on_gkes() {
        assert!(is_zone("us-central1-a") && !is_zone("us-central1"));
        let pool = |locations: &[&str]| NodePool {
            name: "p".into(),
            initial_node_count: 2,
            locations: locations.iter().map(|s| (*s).to_owned()).collect(),
            ..Default::default()
        };
        // A zonal cluster: per zone is the total.
        assert_eq!(zones(&pool(&[]), "us-central1-a", &[]), 1);
        assert_eq!(pool(&[]).into_port("us-central1-a", &[], None).count, 2);
        // A regional one spreads over three zones unless the pool says otherwise.
        assert_eq!(zones(&pool(&[]), "us-central1", &[]), 3);
        assert_eq!(pool(&[]).into_port("us-central1", &[], None).count, 6);
        assert_eq!(pool(&["us-central1-b"]).into_port("us-central1", &[], None).count, 2);
        // Nodes counted from the cluster win over the initial count.
        let node = |i: usize| ProviderNode {
            id: format!("gce://bc-sim-project/us-central1-a/n{i}"),
            name: format!("n{i}"),
            state: ProviderNodeState::Running,
            droplet_id: None,
        };
        let counted = BTreeMap::from([("p".to_owned(), (0..5).map(node).collect())]);
        assert_eq!(pool(&[]).into_port("us-central1", &[], Some(&counted)).count, 5);
        let none_counted = BTreeMap::new();
        assert_eq!(pool(&[]).into_port("us-central1", &[], Some(&none_counted)).count, 0);
        assert_eq!(per_zone(6, 3, "count").unwrap(), 2);
        assert_eq!(per_zone(5, 1, "count").unwrap(), 5);
        let ProviderError::Refused { message } = per_zone(4, 3, "count").unwrap_err() else {
            panic!()
        };
        assert!(message.contains("multiple of 3"), "{message}");
    }

    #[test]
    fn an_autoscaled_pool_starts_within_its_totals_or_is_refused() {
        // Totals 2–5 over three zones: one a zone, three in all.
        assert_eq!(initial_per_zone(2, (2, 5), 3).unwrap(), 1);
        // Totals 1–2: one a zone would start three, above the maximum; none starts
        // nothing, below the minimum — no start lies within the bounds.
        let ProviderError::Refused { message } = initial_per_zone(1, (1, 2), 3).unwrap_err() else {
            panic!()
        };
        assert!(message.contains("autoScale 1–2") && message.contains("3 zones"), "{message}");
        // Totals 0–2 start empty; 3–4 start at three.
        assert_eq!(initial_per_zone(0, (0, 2), 3).unwrap(), 0);
        assert_eq!(initial_per_zone(3, (3, 4), 3).unwrap(), 1);
        // A zonal pool starts where asked.
        assert_eq!(initial_per_zone(2, (1, 2), 1).unwrap(), 2);
    }

    #[test]
    fn a_request_becomes_googles_node_pool() {
        let req = NodePoolRequest {
            name: "bc-abc-cpu".into(),
            size: "e2-standard-4".into(),
            count: Some(3),
            auto_scale: None,
            labels: BTreeMap::from([("better-compute.dev/flavor".into(), "cpu".into())]),
            taints: vec![Taint {
                key: "bc/gpu".into(),
                value: "true".into(),
                effect: TaintEffect::NoSchedule,
            }],
            tags: vec!["better-compute-node-pool-x".into()],
        };
        let body = node_pool_body(&req, 3).unwrap();
        assert_eq!(body["initialNodeCount"], 1);
        assert_eq!(body["config"]["machineType"], "e2-standard-4");
        assert_eq!(body["config"]["taints"][0]["effect"], "NO_SCHEDULE");
        assert_eq!(body["config"]["resourceLabels"]["better-compute-node-pool"], "x");
        assert!(body.get("autoscaling").is_none());
        let scaled = NodePoolRequest { count: None, auto_scale: Some((1, 4)), ..req };
        let body = node_pool_body(&scaled, 3).unwrap();
        assert_eq!(body["autoscaling"]["totalMinNodeCount"], 1);
        assert_eq!(body["autoscaling"]["totalMaxNodeCount"], 4);
        assert_eq!(body["initialNodeCount"], 1);
        // Read back, bounds are the pool's totals.
        let wire: NodePool = serde_json::from_value(json!({"name": "bc-abc-cpu",
            "autoscaling": {"enabled": true, "totalMinNodeCount": 1, "totalMaxNodeCount": 4},
            "config": {"machineType": "e2-standard-4", "taints": [{"key": "k", "effect": 3}]},
            "initialNodeCount": 1, "unknownField": {"x": "1"}}))
        .unwrap();
        let p = wire.into_port("us-central1", &[], None);
        assert_eq!((p.auto_scale, p.min_nodes, p.max_nodes), (true, 1, 4));
        assert_eq!(p.taints[0].effect, TaintEffect::NoExecute);
        assert_eq!(p.id, "bc-abc-cpu");
    }

    #[test]
    fn a_cluster_reads_with_zero_values_left_out() {
        let c: Cluster = serde_json::from_value(json!({"name": "c1", "id": "4d1c", "location": "us-central1",
            "status": "PROVISIONING", "autopilot": {"enabled": true}, "createTime": "2026-08-01T10:00:00.123Z"}))
        .unwrap();
        let p = c.into_port(None);
        assert_eq!(p.state, ProviderClusterState::Provisioning);
        assert_eq!(p.mode, ClusterMode::Autopilot);
        assert_eq!(p.endpoint, None);
        assert!(p.high_availability);
        assert_eq!(p.created_at, Some(Timestamp::from_unix_ms(1_785_578_400_123)));
    }
}
