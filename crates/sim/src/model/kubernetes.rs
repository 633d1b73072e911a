//! DOKS in the model: clusters, node pools and nodes, their requests and validation
//! (research/digitalocean.md §4 and §9), their clock-driven lifecycles, associated
//! resources, upgrades, kubeconfig/credentials, and the read API the Kubernetes face uses.
//!
//! Invariants: stored tags are the user's only (server tags `k8s`, `k8s:<cluster id>`,
//! `k8s:worker` are added when rendering and stripped from updates); a node has a name
//! and droplet id exactly once it has been `running`; a pool's `count` is what it
//! converges to — nodes beyond it drain, then delete, then vanish.

use std::collections::BTreeMap;

use base64::Engine as _;
use bc_domain::Timestamp;
use bc_domain::policy::{Taint, TaintEffect};
use serde::Deserialize;

use super::{Account, ApiError, Delays, Ids, Model, catalog};
use crate::SimNode;

/// Default kubeconfig token lifetime (research §4.4: 0/absent → 7 days).
pub const DEFAULT_EXPIRY_SECONDS: u64 = 7 * 24 * 3600;

/// A cluster's `status.state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ClusterState {
    /// Being made.
    Provisioning,
    /// Up.
    Running,
    /// Up but unhealthy (injected).
    Degraded,
    /// Failed (injected).
    Error,
    /// Upgrading.
    Upgrading,
    /// Being deleted.
    Deleting,
    /// Deleted (never stored: deleted clusters vanish).
    Deleted,
}

impl ClusterState {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterState::Provisioning => "provisioning",
            ClusterState::Running => "running",
            ClusterState::Degraded => "degraded",
            ClusterState::Error => "error",
            ClusterState::Upgrading => "upgrading",
            ClusterState::Deleting => "deleting",
            ClusterState::Deleted => "deleted",
        }
    }
}

/// A node's `status.state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum NodeState {
    /// Droplet being made.
    Provisioning,
    /// Up.
    Running,
    /// Being drained before deletion.
    Draining,
    /// Being deleted.
    Deleting,
}

impl NodeState {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Provisioning => "provisioning",
            NodeState::Running => "running",
            NodeState::Draining => "draining",
            NodeState::Deleting => "deleting",
        }
    }
    pub(crate) fn leaving(self) -> bool {
        matches!(self, NodeState::Draining | NodeState::Deleting)
    }
}

/// A worker node.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Node {
    /// Id (uuid).
    pub id: String,
    /// Name; empty until running.
    pub name: String,
    /// State.
    pub state: NodeState,
    /// Droplet id; empty until running.
    pub droplet_id: String,
    /// Labels applied to this node (pool labels at creation plus later additions: DOKS
    /// never removes a label from an existing node).
    pub labels: BTreeMap<String, String>,
    /// Created.
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    pub(crate) due: Option<Timestamp>,
}

/// A node pool.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NodePool {
    /// Id (uuid).
    pub id: String,
    /// Name.
    pub name: String,
    /// Droplet size slug (immutable).
    pub size: String,
    /// Desired node count.
    pub count: u32,
    /// User tags (server tags are added when rendering).
    pub tags: Vec<String>,
    /// Labels (`None` renders as `null`).
    pub labels: Option<BTreeMap<String, String>>,
    /// Taints (nodes always carry exactly these).
    pub taints: Vec<Taint>,
    /// Autoscaling.
    pub auto_scale: bool,
    /// Autoscale minimum (0 when off).
    pub min_nodes: u32,
    /// Autoscale maximum (0 when off).
    pub max_nodes: u32,
    /// Nodes, including leaving ones until they are gone.
    pub nodes: Vec<Node>,
    /// Whether the pool is being deleted (it vanishes once its nodes are gone).
    pub deleting: bool,
    /// Created.
    pub created_at: Timestamp,
}

/// Maintenance window.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct MaintenancePolicy {
    /// `HH:MM` UTC.
    #[serde(default = "default_start_time")]
    pub start_time: String,
    /// `any`, `monday` … `sunday`.
    #[serde(default = "default_day")]
    pub day: String,
    /// Read-only.
    #[serde(default = "default_duration", skip_deserializing)]
    pub duration: String,
}
fn default_start_time() -> String {
    "00:00".into()
}
fn default_day() -> String {
    "any".into()
}
fn default_duration() -> String {
    "4h0m0s".into()
}
impl Default for MaintenancePolicy {
    fn default() -> Self {
        Self { start_time: default_start_time(), day: default_day(), duration: default_duration() }
    }
}

/// A DOKS cluster.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Cluster {
    /// Id (uuid).
    pub id: String,
    /// Name.
    pub name: String,
    /// Region slug.
    pub region: String,
    /// Version slug.
    pub version: String,
    /// Pod subnet.
    pub cluster_subnet: String,
    /// Service subnet.
    pub service_subnet: String,
    /// VPC.
    pub vpc_uuid: String,
    /// Public IPv4 of the control plane; empty until provisioned (and for HA).
    pub ipv4: String,
    /// User tags.
    pub tags: Vec<String>,
    /// Node pools.
    pub node_pools: Vec<NodePool>,
    /// Maintenance window.
    pub maintenance_policy: MaintenancePolicy,
    /// Patch upgrades in the window (recorded, not acted on).
    pub auto_upgrade: bool,
    /// Surge upgrades.
    pub surge_upgrade: bool,
    /// HA control plane.
    pub ha: bool,
    /// State.
    pub state: ClusterState,
    /// `status.message`.
    pub message: String,
    /// Created.
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// Whether the control plane ever finished provisioning (kubeconfig served from then).
    pub provisioned: bool,
    /// The cluster's standing bearer token: what tests and the simulator's other faces
    /// call its API with. Kubeconfigs and credentials carry tokens of their own
    /// (`issued_tokens`).
    pub api_token: String,
    /// The tokens kubeconfig and credentials requests handed out, each with when it
    /// expires (`expiry_seconds`, 7 days when 0 or absent): as on DigitalOcean, one
    /// expired is refused with 401, so a client must fetch a new kubeconfig in time.
    pub issued_tokens: Vec<(String, Timestamp)>,
    /// The optional blocks ([`ADDONS`]: control-plane firewall, autoscaler, SSO,
    /// routing agent, plugins), each as rendered, defaults filled.
    pub addons: BTreeMap<String, serde_json::Value>,
    /// Worker nodes without public addresses (create-only).
    pub isolated_workers: bool,
    /// The VPC subnet of the workers (the VPC's default one when not given).
    pub worker_subnet_uuid: String,
    pub(crate) due: Option<Timestamp>,
    pub(crate) upgrade_to: Option<String>,
}

impl Cluster {
    /// Tags as the API shows them: user tags plus `k8s`, `k8s:<id>`.
    pub fn all_tags(&self) -> Vec<String> {
        let mut t = self.tags.clone();
        t.push("k8s".into());
        t.push(format!("k8s:{}", self.id));
        t
    }
    fn live(&self) -> bool {
        !matches!(self.state, ClusterState::Deleting | ClusterState::Deleted)
    }
    pub(crate) fn ready_at(&self, now: Timestamp) -> Timestamp {
        match (self.state, self.due) {
            (ClusterState::Provisioning, Some(d)) if d > now => d,
            _ => now,
        }
    }
}

impl NodePool {
    /// Tags as the API shows them: user tags plus `k8s`, `k8s:<cluster id>`, `k8s:worker`.
    pub fn all_tags(&self, cluster_id: &str) -> Vec<String> {
        let mut t = self.tags.clone();
        t.push("k8s".into());
        t.push(format!("k8s:{cluster_id}"));
        t.push("k8s:worker".into());
        t
    }

    /// Whether `tag` is one of [`Self::all_tags`], without building them (it is asked for
    /// every node pool on every call that advances the account).
    pub fn has_tag(&self, cluster_id: &str, tag: &str) -> bool {
        matches!(tag, "k8s" | "k8s:worker")
            || tag.strip_prefix("k8s:") == Some(cluster_id)
            || self.tags.iter().any(|t| t == tag)
    }
}

/// A taint as requests carry it (godo sends `Key`/`Value`/`Effect`, so keys match
/// either case).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TaintSpec {
    /// Key.
    #[serde(alias = "Key")]
    pub key: Option<String>,
    /// Value.
    #[serde(alias = "Value", default)]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    #[serde(alias = "Effect")]
    pub effect: Option<String>,
}

/// A node pool in a create or update request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct NodePoolSpec {
    /// Name (required).
    pub name: Option<String>,
    /// Size slug (create: required; update: must equal the current one if given).
    pub size: Option<String>,
    /// Count (create: required).
    pub count: Option<i64>,
    /// Tags.
    pub tags: Option<Vec<String>>,
    /// Labels.
    pub labels: Option<BTreeMap<String, String>>,
    /// Taints.
    pub taints: Option<Vec<TaintSpec>>,
    /// Autoscale.
    pub auto_scale: Option<bool>,
    /// Autoscale minimum.
    pub min_nodes: Option<i64>,
    /// Autoscale maximum.
    pub max_nodes: Option<i64>,
}

/// `POST /v2/kubernetes/clusters` body.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ClusterCreate {
    /// Name.
    pub name: Option<String>,
    /// Region slug.
    pub region: Option<String>,
    /// Version slug, minor, or `latest`.
    pub version: Option<String>,
    /// First node pools.
    pub node_pools: Option<Vec<NodePoolSpec>>,
    /// Tags.
    pub tags: Option<Vec<String>>,
    /// VPC.
    pub vpc_uuid: Option<String>,
    /// Pod subnet.
    pub cluster_subnet: Option<String>,
    /// Service subnet.
    pub service_subnet: Option<String>,
    /// Maintenance window.
    pub maintenance_policy: Option<MaintenancePolicy>,
    /// Auto upgrade.
    pub auto_upgrade: Option<bool>,
    /// Surge upgrade.
    pub surge_upgrade: Option<bool>,
    /// HA control plane.
    pub ha: Option<bool>,
    /// Worker subnet (needs `vpc_uuid`).
    pub worker_subnet_uuid: Option<String>,
    /// Workers without public addresses.
    pub isolated_workers: Option<bool>,
    /// The optional blocks ([`ADDONS`]) given (other keys are ignored).
    #[serde(flatten)]
    pub addons: BTreeMap<String, serde_json::Value>,
}

/// `PUT /v2/kubernetes/clusters/{id}` body.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ClusterUpdate {
    /// Name (required).
    pub name: Option<String>,
    /// Tags (replace; server tags may be included and are ignored).
    pub tags: Option<Vec<String>>,
    /// Maintenance window.
    pub maintenance_policy: Option<MaintenancePolicy>,
    /// Auto upgrade.
    pub auto_upgrade: Option<bool>,
    /// Surge upgrade.
    pub surge_upgrade: Option<bool>,
    /// HA (false → true only).
    pub ha: Option<bool>,
    /// The optional blocks ([`ADDONS`]) given (other keys are ignored).
    #[serde(flatten)]
    pub addons: BTreeMap<String, serde_json::Value>,
    /// Immutable: must equal the current value if given.
    pub region: Option<String>,
    /// Immutable here (use upgrade): must equal the current value if given.
    pub version: Option<String>,
    /// Immutable: must equal the current value if given.
    pub vpc_uuid: Option<String>,
}

/// `DELETE …/destroy_with_associated_resources/selective` body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Selection {
    /// Load balancer ids.
    #[serde(default)]
    pub load_balancers: Vec<String>,
    /// Volume ids.
    #[serde(default)]
    pub volumes: Vec<String>,
    /// Volume snapshot ids.
    #[serde(default)]
    pub volume_snapshots: Vec<String>,
}

/// A cluster's associated resources, as `(id, name)` pairs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AssociatedResources {
    /// Load balancers tagged `k8s:<cluster id>`.
    pub load_balancers: Vec<(String, String)>,
    /// Volumes.
    pub volumes: Vec<(String, String)>,
    /// Volume snapshots.
    pub volume_snapshots: Vec<(String, String)>,
}

/// `GET …/credentials` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// API server URL.
    pub server: String,
    /// Base64 of the CA PEM.
    pub certificate_authority_data: String,
    /// Bearer token.
    pub token: String,
    /// When the token expires.
    pub expires_at: Timestamp,
}

// ----- validation -------------------------------------------------------------------------

/// The optional blocks of a cluster object (DigitalOcean's `cluster.yml`): each shown on
/// every cluster, with its defaults when a create left it out.
pub const ADDONS: &[&str] = &[
    "control_plane_firewall",
    "cluster_autoscaler_configuration",
    "sso",
    "routing_agent",
    "amd_gpu_device_plugin",
    "amd_gpu_device_metrics_exporter_plugin",
    "nvidia_gpu_device_plugin",
    "rdma_shared_dev_plugin",
    "coredns_autoscaler",
    "p2p_oci_registry_plugin",
];

/// The blocks a cluster of `pools` has before a request sets any: everything off, the
/// NVIDIA device plugin on when a pool has NVIDIA GPUs ("enabled by default for clusters
/// with an Nvidia GPU node pool"), and the cluster autoscaler's own defaults
/// (utilization 0.5, 10 minutes unneeded; unconfirmed as DOKS renders them).
fn default_addons(pools: &[NodePool]) -> BTreeMap<String, serde_json::Value> {
    use serde_json::json;
    let nvidia =
        pools.iter().any(|p| p.size.starts_with("gpu-h100") || p.size.starts_with("gpu-l40"));
    let amd = pools.iter().any(|p| p.size.starts_with("gpu-mi"));
    let mut out = BTreeMap::new();
    for name in ADDONS {
        let v = match *name {
            "control_plane_firewall" => json!({"enabled": false, "allowed_addresses": []}),
            "cluster_autoscaler_configuration" => {
                json!({"scale_down_utilization_threshold": 0.5, "scale_down_unneeded_time": "10m0s"})
            }
            "sso" => json!({"enabled": false, "required": false}),
            "nvidia_gpu_device_plugin" => json!({"enabled": nvidia}),
            "amd_gpu_device_plugin" | "amd_gpu_device_metrics_exporter_plugin" => {
                json!({"enabled": amd})
            }
            _ => json!({"enabled": false}),
        };
        out.insert((*name).to_owned(), v);
    }
    out
}

/// Merges the blocks a request gives into `current` (fields given replace fields there;
/// `null` leaves a block as it is), checking each: objects only, `enabled` a boolean,
/// SSO's issuer and client when it is enabled, autoscaler expanders and threshold in
/// range.
fn merge_addons(
    current: &mut BTreeMap<String, serde_json::Value>,
    given: &BTreeMap<String, serde_json::Value>,
) -> Result<(), ApiError> {
    use serde_json::Value;
    for (name, v) in given.iter().filter(|(k, _)| ADDONS.contains(&k.as_str())) {
        let fields = match v {
            Value::Null => continue,
            Value::Object(m) => m,
            _ => return Err(ApiError::unprocessable(format!("{name} must be an object"))),
        };
        if fields.get("enabled").is_some_and(|e| !e.is_boolean()) {
            return Err(ApiError::unprocessable(format!("{name}.enabled must be a boolean")));
        }
        let block =
            current.entry(name.clone()).or_insert_with(|| Value::Object(Default::default()));
        if let Value::Object(b) = block {
            b.extend(fields.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    let sso = &current["sso"];
    let on = |k: &str| sso.get(k).and_then(Value::as_bool).unwrap_or(false);
    let text = |k: &str| sso.get(k).and_then(Value::as_str).is_some_and(|s| !s.is_empty());
    if on("required") && !on("enabled") {
        return Err(ApiError::unprocessable(
            "sso.required can only be true when sso.enabled is true",
        ));
    }
    if on("enabled") && !(text("issuer_url") && text("client_id")) {
        return Err(ApiError::unprocessable(
            "sso.issuer_url and sso.client_id are required when sso.enabled is true",
        ));
    }
    let ca = &current["cluster_autoscaler_configuration"];
    if let Some(t) = ca.get("scale_down_utilization_threshold")
        && !t.as_f64().is_some_and(|t| t > 0.0 && t <= 1.0)
    {
        return Err(ApiError::unprocessable(
            "cluster_autoscaler_configuration.scale_down_utilization_threshold must be a number in (0, 1]",
        ));
    }
    for e in ca.get("expanders").and_then(Value::as_array).into_iter().flatten() {
        if !matches!(e.as_str(), Some("random" | "priority" | "least_waste")) {
            return Err(ApiError::unprocessable(format!(
                "invalid cluster_autoscaler_configuration.expanders value {e}: must be one of random, priority, least_waste"
            )));
        }
    }
    let firewall = &current["control_plane_firewall"];
    if firewall
        .get("allowed_addresses")
        .is_some_and(|a| !a.as_array().is_some_and(|a| a.iter().all(Value::is_string)))
    {
        return Err(ApiError::unprocessable(
            "control_plane_firewall.allowed_addresses must be a list of addresses",
        ));
    }
    Ok(())
}

fn required(v: &Option<String>, field: &str) -> Result<String, ApiError> {
    match v.as_deref().map(str::trim) {
        Some(s) if !s.is_empty() => Ok(s.to_owned()),
        _ => Err(ApiError::unprocessable(format!("{field} is required"))),
    }
}

/// Rejects custom tags starting with `k8s`, after dropping the exact server tags
/// (`server` — what a client echoes back from a GET).
fn user_tags(tags: &Option<Vec<String>>, server: &[String]) -> Result<Vec<String>, ApiError> {
    let mut out = Vec::new();
    for t in tags.iter().flatten() {
        if server.contains(t) {
            continue;
        }
        if t.starts_with("k8s") {
            return Err(ApiError::unprocessable(format!(
                "tag {t:?} is invalid: tags starting with \"k8s\" are reserved"
            )));
        }
        if t.is_empty() {
            return Err(ApiError::unprocessable("tags must not be empty"));
        }
        if !out.contains(t) {
            out.push(t.clone());
        }
    }
    Ok(out)
}

fn taints(spec: &Option<Vec<TaintSpec>>) -> Result<Vec<Taint>, ApiError> {
    let mut out = Vec::new();
    for t in spec.iter().flatten() {
        let key = required(&t.key, "taint key")?;
        let effect = match t.effect.as_deref() {
            Some("NoSchedule") => TaintEffect::NoSchedule,
            Some("PreferNoSchedule") => TaintEffect::PreferNoSchedule,
            Some("NoExecute") => TaintEffect::NoExecute,
            other => {
                return Err(ApiError::unprocessable(format!(
                    "invalid taint effect {:?}: must be one of NoSchedule, PreferNoSchedule, NoExecute",
                    other.unwrap_or("")
                )));
            }
        };
        out.push(Taint { key, value: t.value.clone().unwrap_or_default(), effect });
    }
    Ok(out)
}

fn maintenance(p: Option<MaintenancePolicy>) -> Result<MaintenancePolicy, ApiError> {
    let p = p.unwrap_or_default();
    const DAYS: &[&str] =
        &["any", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"];
    if !DAYS.contains(&p.day.as_str()) {
        return Err(ApiError::unprocessable(format!("invalid maintenance day {:?}", p.day)));
    }
    let ok = p.start_time.split_once(':').is_some_and(|(h, m)| {
        h.parse::<u32>().is_ok_and(|h| h < 24)
            && m.len() == 2
            && m.parse::<u32>().is_ok_and(|m| m < 60)
    });
    if !ok {
        return Err(ApiError::unprocessable(format!(
            "invalid maintenance start_time {:?}: must be HH:MM",
            p.start_time
        )));
    }
    Ok(MaintenancePolicy { duration: default_duration(), ..p })
}

/// Count and autoscale bounds of a pool spec: `(count, auto_scale, min, max)`.
fn scale(
    spec: &NodePoolSpec,
    current: Option<&NodePool>,
) -> Result<(u32, bool, u32, u32), ApiError> {
    let auto = spec.auto_scale.unwrap_or(false);
    let to_u32 = |v: i64, what: &str| {
        u32::try_from(v)
            .map_err(|_| ApiError::unprocessable(format!("{what} must be a non-negative integer")))
    };
    let (min, max) = if auto {
        let min = to_u32(spec.min_nodes.unwrap_or(0), "min_nodes")?;
        let max = to_u32(spec.max_nodes.unwrap_or(0), "max_nodes")?;
        if max < 1 || min > max {
            return Err(ApiError::unprocessable(
                "autoscaling node pools need 0 <= min_nodes <= max_nodes and max_nodes >= 1",
            ));
        }
        (min, max)
    } else {
        (0, 0)
    };
    let count = match (spec.count, current) {
        (Some(c), _) => to_u32(c, "count")?,
        (None, Some(p)) => p.count,
        (None, None) if auto => min,
        (None, None) => return Err(ApiError::unprocessable("count is required")),
    };
    // With autoscaling on, an explicit count outside [min, max] falls back to min.
    let count = if auto && (count < min || count > max) { min } else { count };
    if count == 0 && !(auto && min == 0) {
        return Err(ApiError::unprocessable(
            "node pool count must be at least 1 (scale to zero needs auto_scale with min_nodes 0)",
        ));
    }
    Ok((count, auto, min, max))
}

fn new_pool(
    spec: &NodePoolSpec,
    ids: &mut Ids,
    delays: &Delays,
    ready_at: Timestamp,
    now: Timestamp,
) -> Result<NodePool, ApiError> {
    let name = required(&spec.name, "node pool name")?;
    let size = required(&spec.size, "node pool size")?;
    if !catalog::is_size(&size) {
        return Err(ApiError::unprocessable(format!("invalid size {size:?}")));
    }
    let (count, auto_scale, min_nodes, max_nodes) = scale(spec, None)?;
    let mut pool = NodePool {
        id: ids.uuid(),
        name,
        size,
        count,
        tags: user_tags(&spec.tags, &[])?,
        labels: spec.labels.clone(),
        taints: taints(&spec.taints)?,
        auto_scale,
        min_nodes,
        max_nodes,
        nodes: Vec::new(),
        deleting: false,
        created_at: now,
    };
    converge(&mut pool, ids, delays, ready_at, now);
    Ok(pool)
}

fn new_node(pool: &NodePool, ids: &mut Ids, due: Timestamp, now: Timestamp) -> Node {
    Node {
        id: ids.uuid(),
        name: String::new(),
        state: NodeState::Provisioning,
        droplet_id: String::new(),
        labels: pool.labels.clone().unwrap_or_default(),
        created_at: now,
        updated_at: now,
        due: Some(due),
    }
}

/// Adds provisioning nodes or drains the newest ones until the staying nodes match
/// `count`.
pub(crate) fn converge(
    pool: &mut NodePool,
    ids: &mut Ids,
    delays: &Delays,
    ready_at: Timestamp,
    now: Timestamp,
) {
    let staying = pool.nodes.iter().filter(|n| !n.state.leaving()).count() as u32;
    if staying < pool.count {
        let due = std::cmp::max(now + delays.node_provision, ready_at);
        for _ in staying..pool.count {
            let n = new_node(pool, ids, due, now);
            pool.nodes.push(n);
        }
    } else if staying > pool.count {
        let mut excess = staying - pool.count;
        // Newest first, so the longest-running nodes stay.
        for n in pool.nodes.iter_mut().rev() {
            if excess == 0 {
                break;
            }
            if !n.state.leaving() {
                start_leaving(n, false, delays, now);
                excess -= 1;
            }
        }
    }
}

pub(crate) fn start_leaving(n: &mut Node, skip_drain: bool, delays: &Delays, now: Timestamp) {
    n.state = if skip_drain { NodeState::Deleting } else { NodeState::Draining };
    n.updated_at = now;
    n.due = Some(now + delays.node_delete);
}

// ----- time ---------------------------------------------------------------------------------

pub(super) fn advance_account(
    account: &mut Account,
    ids: &mut Ids,
    delays: &Delays,
    now: Timestamp,
) {
    for c in &mut account.clusters {
        if let Some(due) = c.due.filter(|d| *d <= now) {
            c.due = None;
            match c.state {
                ClusterState::Provisioning => {
                    c.state = ClusterState::Running;
                    c.message.clear();
                    c.provisioned = true;
                    if !c.ha {
                        c.ipv4 = ids.ipv4();
                    }
                    c.updated_at = due;
                }
                ClusterState::Upgrading => {
                    if let Some(v) = c.upgrade_to.take() {
                        c.version = v;
                    }
                    c.state = ClusterState::Running;
                    c.message.clear();
                    c.updated_at = due;
                    // DOKS replaces every node on upgrade: new droplets, new names.
                    for p in &mut c.node_pools {
                        let pool_name = p.name.clone();
                        for n in p.nodes.iter_mut().filter(|n| n.state == NodeState::Running) {
                            n.id = ids.uuid();
                            n.name = format!("{pool_name}-{}", ids.suffix());
                            n.droplet_id = ids.droplet().to_string();
                            n.created_at = due;
                            n.updated_at = due;
                        }
                    }
                }
                ClusterState::Deleting => {
                    c.state = ClusterState::Deleted;
                }
                _ => {}
            }
        }
        for p in &mut c.node_pools {
            // Borrowed, not cloned: this runs for every pool on every call.
            let pool_name = &p.name;
            for n in &mut p.nodes {
                while let Some(due) = n.due.filter(|d| *d <= now) {
                    n.updated_at = due;
                    match n.state {
                        NodeState::Provisioning => {
                            n.state = NodeState::Running;
                            n.name = format!("{pool_name}-{}", ids.suffix());
                            n.droplet_id = ids.droplet().to_string();
                            n.due = None;
                        }
                        NodeState::Draining => {
                            n.state = NodeState::Deleting;
                            n.due = Some(due + delays.node_delete);
                        }
                        NodeState::Deleting => {
                            // Marked gone; removed below.
                            n.due = None;
                            n.droplet_id = "gone".into();
                        }
                        NodeState::Running => n.due = None,
                    }
                }
            }
            p.nodes.retain(|n| !(n.state == NodeState::Deleting && n.droplet_id == "gone"));
        }
        c.node_pools.retain(|p| !(p.deleting && p.nodes.is_empty()));
    }
    account.clusters.retain(|c| c.state != ClusterState::Deleted);
}

// ----- operations ----------------------------------------------------------------------------

fn find<'a>(account: &'a mut Account, id: &str) -> Result<&'a mut Cluster, ApiError> {
    account.clusters.iter_mut().find(|c| c.id == id).ok_or_else(ApiError::not_found)
}

/// [`find`] for a read: the account is not handed out to change, so it stays settled.
fn find_ref<'a>(account: &'a Account, id: &str) -> Result<&'a Cluster, ApiError> {
    account.clusters.iter().find(|c| c.id == id).ok_or_else(ApiError::not_found)
}

fn find_pool<'a>(c: &'a mut Cluster, id: &str) -> Result<&'a mut NodePool, ApiError> {
    c.node_pools.iter_mut().find(|p| p.id == id).ok_or_else(ApiError::not_found)
}

/// [`find_pool`] for a read.
fn find_pool_ref<'a>(c: &'a Cluster, id: &str) -> Result<&'a NodePool, ApiError> {
    c.node_pools.iter().find(|p| p.id == id).ok_or_else(ApiError::not_found)
}

fn live(c: &mut Cluster) -> Result<&mut Cluster, ApiError> {
    if c.live() { Ok(c) } else { Err(ApiError::unprocessable("cluster is being deleted")) }
}

/// A cluster whose node pools may be changed now: live, and not upgrading — DOKS answers
/// a node-pool change meanwhile with a 422 (research §8.5) that retrying after the
/// upgrade cures. Its wording carries `bc_providers::classify::digitalocean::
/// DOKS_BUSY_MARKER` (the model cannot depend on bc-providers; the model test
/// `node_pools_cannot_change_while_the_cluster_upgrades` ties the two).
fn editable(c: &mut Cluster) -> Result<&mut Cluster, ApiError> {
    let c = live(c)?;
    if c.state == ClusterState::Upgrading {
        return Err(ApiError::unprocessable(
            "node pools cannot be changed while the cluster is busy with another operation \
             (upgrading); try again when it is done",
        ));
    }
    Ok(c)
}

impl Model {
    fn parts(
        &mut self,
        token: &str,
        now: Timestamp,
    ) -> Result<(&mut Account, &mut Ids, Delays), ApiError> {
        self.advance(now);
        let delays = self.delays;
        let account = self.accounts.get_mut(token).ok_or_else(ApiError::unauthorized)?;
        // To change, as `account_mut` hands it out (borrowed apart from `ids` here).
        account.settled = super::Settled::Unknown;
        Ok((account, &mut self.ids, delays))
    }

    /// Every cluster of the account, in creation order.
    pub fn list_clusters(&mut self, token: &str, now: Timestamp) -> Result<Vec<Cluster>, ApiError> {
        self.advance(now);
        Ok(self.listed_clusters(token, now)?.into_iter().cloned().collect())
    }

    /// The clusters a list shows at `now`, by reference, the model already advanced to
    /// `now` ([`Self::advance`]): a page of the list clones and renders its own clusters,
    /// not the account's every cluster (a list of 1,000 clusters in pages of 200 cloned
    /// all 1,000 five times).
    pub fn listed_clusters(&self, token: &str, now: Timestamp) -> Result<Vec<&Cluster>, ApiError> {
        let account = self.accounts.get(token).ok_or_else(ApiError::unauthorized)?;
        Ok(account.clusters.iter().filter(|c| !self.lagging(c.created_at, now)).collect())
    }

    /// Creates a cluster (`provisioning`; nodes `provisioning` with empty names).
    pub fn create_cluster(
        &mut self,
        token: &str,
        req: ClusterCreate,
        now: Timestamp,
    ) -> Result<Cluster, ApiError> {
        let (account, ids, delays) = self.parts(token, now)?;
        let name = required(&req.name, "name")?;
        let region = required(&req.region, "region")?;
        if !catalog::is_region(&region) {
            return Err(ApiError::unprocessable(format!("invalid region {region:?}")));
        }
        let requested = required(&req.version, "version")?;
        let version = catalog::resolve_create_version(&requested).ok_or_else(|| {
            ApiError::unprocessable(format!(
                "invalid version {requested:?}: see /v2/kubernetes/options"
            ))
        })?;
        let specs = req.node_pools.clone().unwrap_or_default();
        if specs.is_empty() {
            return Err(ApiError::unprocessable("a cluster needs at least one node pool"));
        }
        let tags = user_tags(&req.tags, &[])?;
        let maintenance_policy = maintenance(req.maintenance_policy.clone())?;
        if account.clusters.iter().any(|c| c.live() && c.name == name) {
            return Err(ApiError::unprocessable(format!(
                "a cluster named {name:?} already exists"
            )));
        }
        let ready_at = now + delays.cluster_provision;
        let mut pools: Vec<NodePool> = Vec::new();
        for s in &specs {
            let p = new_pool(s, ids, &delays, ready_at, now)?;
            if pools.iter().any(|o| o.name == p.name) {
                return Err(ApiError::unprocessable(format!(
                    "node pool name {:?} is not unique",
                    p.name
                )));
            }
            pools.push(p);
        }
        if pools.iter().map(|p| p.count).sum::<u32>() < 1 {
            return Err(ApiError::unprocessable("a cluster needs at least one node"));
        }
        if req.worker_subnet_uuid.as_deref().is_some_and(|w| !w.is_empty())
            && req.vpc_uuid.as_deref().is_none_or(str::is_empty)
        {
            return Err(ApiError::unprocessable("worker_subnet_uuid requires vpc_uuid"));
        }
        let mut addons = default_addons(&pools);
        merge_addons(&mut addons, &req.addons)?;
        let cluster = Cluster {
            id: ids.uuid(),
            name,
            region,
            version: version.to_owned(),
            cluster_subnet: req.cluster_subnet.clone().unwrap_or_else(|| "10.244.0.0/16".into()),
            service_subnet: req.service_subnet.clone().unwrap_or_else(|| "10.245.0.0/16".into()),
            vpc_uuid: req.vpc_uuid.clone().filter(|v| !v.is_empty()).unwrap_or_else(|| ids.uuid()),
            ipv4: String::new(),
            tags,
            node_pools: pools,
            maintenance_policy,
            auto_upgrade: req.auto_upgrade.unwrap_or(false),
            surge_upgrade: req.surge_upgrade.unwrap_or(false),
            ha: req.ha.unwrap_or(false),
            state: ClusterState::Provisioning,
            message: "provisioning".into(),
            created_at: now,
            updated_at: now,
            provisioned: false,
            api_token: format!("doks-sim-{}", ids.uuid().replace('-', "")),
            issued_tokens: Vec::new(),
            addons,
            isolated_workers: req.isolated_workers.unwrap_or(false),
            worker_subnet_uuid: req
                .worker_subnet_uuid
                .clone()
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| ids.uuid()),
            due: Some(ready_at),
            upgrade_to: None,
        };
        account.clusters.push(cluster.clone());
        self.allocate_endpoint(&cluster.id);
        Ok(cluster)
    }

    /// One cluster (404 unknown, or inside the brief-404 window after create).
    pub fn get_cluster(
        &mut self,
        token: &str,
        id: &str,
        now: Timestamp,
    ) -> Result<Cluster, ApiError> {
        let c = find_ref(self.account_ref(token, now)?, id)?.clone();
        if self.hidden(c.created_at, now) {
            return Err(ApiError::not_found());
        }
        Ok(c)
    }

    /// Updates name, tags, maintenance policy, auto/surge upgrade, HA (false → true).
    pub fn update_cluster(
        &mut self,
        token: &str,
        id: &str,
        req: ClusterUpdate,
        now: Timestamp,
    ) -> Result<Cluster, ApiError> {
        let account = self.account(token, now)?;
        let name = required(&req.name, "name")?;
        if account.clusters.iter().any(|c| c.live() && c.id != id && c.name == name) {
            if find(account, id).is_err() {
                return Err(ApiError::not_found());
            }
            return Err(ApiError::unprocessable(format!(
                "a cluster named {name:?} already exists"
            )));
        }
        let c = live(find(account, id)?)?;
        for (field, given, current) in [
            ("region", &req.region, &c.region),
            ("version", &req.version, &c.version),
            ("vpc_uuid", &req.vpc_uuid, &c.vpc_uuid),
        ] {
            if given.as_ref().is_some_and(|g| !g.is_empty() && g != current) {
                return Err(ApiError::unprocessable(format!("{field} cannot be changed")));
            }
        }
        if c.ha && req.ha == Some(false) {
            return Err(ApiError::unprocessable(
                "high availability cannot be disabled once enabled",
            ));
        }
        let server = vec!["k8s".to_owned(), format!("k8s:{}", c.id)];
        let tags = match &req.tags {
            Some(_) => Some(user_tags(&req.tags, &server)?),
            None => None,
        };
        let mp = match req.maintenance_policy {
            Some(p) => Some(maintenance(Some(p))?),
            None => None,
        };
        c.name = name;
        if let Some(t) = tags {
            c.tags = t;
        }
        if let Some(p) = mp {
            c.maintenance_policy = p;
        }
        if let Some(v) = req.auto_upgrade {
            c.auto_upgrade = v;
        }
        if let Some(v) = req.surge_upgrade {
            c.surge_upgrade = v;
        }
        if let Some(v) = req.ha {
            c.ha = v;
        }
        let mut addons = c.addons.clone();
        merge_addons(&mut addons, &req.addons)?;
        c.addons = addons;
        c.updated_at = now;
        Ok(c.clone())
    }

    /// Deletes the cluster only (`deleting`, then gone); associated resources stay.
    pub fn delete_cluster(
        &mut self,
        token: &str,
        id: &str,
        now: Timestamp,
    ) -> Result<(), ApiError> {
        let delays = self.delays;
        let c = find(self.account(token, now)?, id)?;
        if c.live() {
            c.state = ClusterState::Deleting;
            c.message = "deleting".into();
            c.updated_at = now;
            c.due = Some(now + delays.cluster_delete);
            c.upgrade_to = None;
        }
        Ok(())
    }

    /// The resources associated with a cluster: LBs tagged `k8s:<id>`, its volumes and
    /// volume snapshots.
    pub fn associated_resources(
        &mut self,
        token: &str,
        id: &str,
        now: Timestamp,
    ) -> Result<AssociatedResources, ApiError> {
        let account = self.account_ref(token, now)?;
        find_ref(account, id)?;
        Ok(associated(account, id))
    }

    /// Deletes the cluster and the listed associated resources; unlisted ones stay.
    pub fn delete_cluster_selective(
        &mut self,
        token: &str,
        id: &str,
        sel: &Selection,
        now: Timestamp,
    ) -> Result<(), ApiError> {
        self.delete_cluster(token, id, now)?;
        let account = self.account(token, now)?;
        let assoc = associated(account, id);
        let pick = |list: &[(String, String)], wanted: &[String]| -> Vec<String> {
            list.iter().filter(|(i, _)| wanted.contains(i)).map(|(i, _)| i.clone()).collect()
        };
        let lbs = pick(&assoc.load_balancers, &sel.load_balancers);
        let vols = pick(&assoc.volumes, &sel.volumes);
        let snaps = pick(&assoc.volume_snapshots, &sel.volume_snapshots);
        account.load_balancers.retain(|l| !lbs.contains(&l.id));
        account.volumes.retain(|v| !vols.contains(&v.id));
        account.volume_snapshots.retain(|v| !snaps.contains(&v.id));
        Ok(())
    }

    /// Deletes the cluster and every associated resource.
    pub fn delete_cluster_dangerous(
        &mut self,
        token: &str,
        id: &str,
        now: Timestamp,
    ) -> Result<(), ApiError> {
        let account = self.account(token, now)?;
        find(account, id)?;
        let a = associated(account, id);
        let sel = Selection {
            load_balancers: a.load_balancers.into_iter().map(|(i, _)| i).collect(),
            volumes: a.volumes.into_iter().map(|(i, _)| i).collect(),
            volume_snapshots: a.volume_snapshots.into_iter().map(|(i, _)| i).collect(),
        };
        self.delete_cluster_selective(token, id, &sel, now)
    }

    /// Adds a volume associated with `cluster_id` (test injection); returns its id.
    pub fn inject_volume(&mut self, token: &str, cluster_id: &str, name: &str) -> Option<String> {
        let id = self.ids.uuid();
        let a = self.account_mut(token)?;
        a.volumes.push(super::Volume {
            id: id.clone(),
            name: name.into(),
            cluster_id: cluster_id.into(),
        });
        Some(id)
    }

    /// Adds a volume snapshot associated with `cluster_id` (test injection); returns its id.
    pub fn inject_volume_snapshot(
        &mut self,
        token: &str,
        cluster_id: &str,
        name: &str,
    ) -> Option<String> {
        let id = self.ids.uuid();
        let a = self.account_mut(token)?;
        a.volume_snapshots.push(super::Volume {
            id: id.clone(),
            name: name.into(),
            cluster_id: cluster_id.into(),
        });
        Some(id)
    }

    fn provisioned(&mut self, token: &str, id: &str, now: Timestamp) -> Result<Cluster, ApiError> {
        let c = find_ref(self.account_ref(token, now)?, id)?;
        if !c.provisioned || !c.live() {
            return Err(ApiError::not_found());
        }
        Ok(c.clone())
    }

    /// The kubeconfig YAML (404 until the cluster has provisioned), carrying a token of
    /// its own that expires after `expiry_seconds` (0/`None`: 7 days).
    pub fn kubeconfig(
        &mut self,
        token: &str,
        id: &str,
        expiry_seconds: Option<u64>,
        now: Timestamp,
    ) -> Result<String, ApiError> {
        let c = self.provisioned(token, id, now)?;
        let (bearer, _) = self.issue_token(&c.id, expiry_seconds, now);
        Ok(kubeconfig_yaml(&c, &bearer, &self.cluster_endpoint(&c.id), self.tls.ca_pem()))
    }

    /// The credentials (404 until the cluster has provisioned): a token of their own
    /// that expires after `expiry_seconds` (0/`None`: 7 days).
    pub fn credentials(
        &mut self,
        token: &str,
        id: &str,
        expiry_seconds: Option<u64>,
        now: Timestamp,
    ) -> Result<Credentials, ApiError> {
        let c = self.provisioned(token, id, now)?;
        let (bearer, expires_at) = self.issue_token(&c.id, expiry_seconds, now);
        Ok(Credentials {
            server: self.cluster_endpoint(&c.id),
            certificate_authority_data: base64::engine::general_purpose::STANDARD
                .encode(self.tls.ca_pem()),
            token: bearer,
            expires_at,
        })
    }

    /// A kubeconfig of cluster `cluster_id` (any account's, provisioned or not) carrying
    /// its standing token, which never expires (tests and the simulator's other faces;
    /// no request is counted). `None` if the cluster is unknown.
    pub fn standing_kubeconfig(&self, cluster_id: &str) -> Option<String> {
        let c =
            self.accounts.values().flat_map(|a| a.clusters.iter()).find(|c| c.id == cluster_id)?;
        Some(kubeconfig_yaml(c, &c.api_token, &self.cluster_endpoint(&c.id), self.tls.ca_pem()))
    }

    /// A new bearer token for cluster `id`'s API, valid until the returned time; the
    /// cluster's expired ones are dropped meanwhile.
    fn issue_token(
        &mut self,
        id: &str,
        expiry_seconds: Option<u64>,
        now: Timestamp,
    ) -> (String, Timestamp) {
        let secs = expiry_seconds.filter(|s| *s > 0).unwrap_or(DEFAULT_EXPIRY_SECONDS);
        let expires_at =
            now + time::Duration::seconds(i64::try_from(secs).unwrap_or(i64::MAX / 4_000));
        let bearer = format!("doks-sim-{}", self.ids.uuid().replace('-', ""));
        // Not `accounts_mut`: a token handed out moves no due time, so every account
        // stays settled (each kubeconfig fetched made the next call walk them all).
        if let Some(c) =
            self.accounts.values_mut().flat_map(|a| a.clusters.iter_mut()).find(|c| c.id == id)
        {
            c.issued_tokens.retain(|(_, until)| *until > now);
            c.issued_tokens.push((bearer.clone(), expires_at));
        }
        (bearer, expires_at)
    }

    /// Versions the cluster may upgrade to, oldest first (empty when up to date).
    pub fn upgrades(
        &mut self,
        token: &str,
        id: &str,
        now: Timestamp,
    ) -> Result<Vec<&'static str>, ApiError> {
        let c = find_ref(self.account_ref(token, now)?, id)?;
        Ok(catalog::upgrades_from(&c.version))
    }

    /// Starts an upgrade (`upgrading`, then `running` at the new version).
    pub fn upgrade_cluster(
        &mut self,
        token: &str,
        id: &str,
        version: &str,
        now: Timestamp,
    ) -> Result<(), ApiError> {
        let delays = self.delays;
        let c = live(find(self.account(token, now)?, id)?)?;
        if !catalog::upgrades_from(&c.version).contains(&version) {
            return Err(ApiError::unprocessable("invalid upgrade path"));
        }
        if !matches!(c.state, ClusterState::Running | ClusterState::Degraded) {
            return Err(ApiError::unprocessable(format!(
                "cluster is {}; it can be upgraded once running",
                c.state.as_str()
            )));
        }
        c.state = ClusterState::Upgrading;
        c.message = "upgrading".into();
        c.upgrade_to = Some(version.to_owned());
        c.due = Some(now + delays.cluster_upgrade);
        c.updated_at = now;
        Ok(())
    }

    /// A cluster's node pools.
    pub fn list_node_pools(
        &mut self,
        token: &str,
        cluster_id: &str,
        now: Timestamp,
    ) -> Result<Vec<NodePool>, ApiError> {
        Ok(find_ref(self.account_ref(token, now)?, cluster_id)?.node_pools.clone())
    }

    /// Adds a node pool (nodes `provisioning`).
    pub fn create_node_pool(
        &mut self,
        token: &str,
        cluster_id: &str,
        spec: NodePoolSpec,
        now: Timestamp,
    ) -> Result<NodePool, ApiError> {
        let (account, ids, delays) = self.parts(token, now)?;
        let c = editable(find(account, cluster_id)?)?;
        let pool = new_pool(&spec, ids, &delays, c.ready_at(now), now)?;
        if c.node_pools.iter().any(|p| p.name == pool.name) {
            return Err(ApiError::unprocessable(format!(
                "node pool name {:?} is not unique",
                pool.name
            )));
        }
        c.node_pools.push(pool.clone());
        c.updated_at = now;
        Ok(pool)
    }

    /// One node pool (404 unknown, or inside the brief-404 window).
    pub fn get_node_pool(
        &mut self,
        token: &str,
        cluster_id: &str,
        pool_id: &str,
        now: Timestamp,
    ) -> Result<NodePool, ApiError> {
        let p =
            find_pool_ref(find_ref(self.account_ref(token, now)?, cluster_id)?, pool_id)?.clone();
        if self.hidden(p.created_at, now) {
            return Err(ApiError::not_found());
        }
        Ok(p)
    }

    /// Updates a pool: name, count (resize), tags, labels, taints, autoscale. `size`
    /// must not change.
    pub fn update_node_pool(
        &mut self,
        token: &str,
        cluster_id: &str,
        pool_id: &str,
        spec: NodePoolSpec,
        now: Timestamp,
    ) -> Result<NodePool, ApiError> {
        let (account, ids, delays) = self.parts(token, now)?;
        let c = editable(find(account, cluster_id)?)?;
        let ready_at = c.ready_at(now);
        let cid = c.id.clone();
        let name = required(&spec.name, "name")?;
        if c.node_pools.iter().any(|p| p.id != pool_id && p.name == name) {
            find_pool(c, pool_id)?;
            return Err(ApiError::unprocessable(format!("node pool name {name:?} is not unique")));
        }
        let p = find_pool(c, pool_id)?;
        if p.deleting {
            return Err(ApiError::unprocessable("node pool is being deleted"));
        }
        if spec.size.as_ref().is_some_and(|s| *s != p.size) {
            return Err(ApiError::unprocessable(
                "size cannot be changed; add a new node pool instead",
            ));
        }
        let (count, auto_scale, min_nodes, max_nodes) = scale(&spec, Some(p))?;
        let server = vec!["k8s".to_owned(), format!("k8s:{cid}"), "k8s:worker".to_owned()];
        let tags = match &spec.tags {
            Some(_) => Some(user_tags(&spec.tags, &server)?),
            None => None,
        };
        let new_taints = match &spec.taints {
            Some(_) => Some(taints(&spec.taints)?),
            None => None,
        };
        p.name = name;
        p.count = count;
        p.auto_scale = auto_scale;
        p.min_nodes = min_nodes;
        p.max_nodes = max_nodes;
        if let Some(t) = tags {
            p.tags = t;
        }
        if let Some(t) = new_taints {
            p.taints = t;
        }
        if let Some(l) = spec.labels {
            // Existing nodes gain new/changed labels but never lose one (DOKS behaviour).
            for n in &mut p.nodes {
                n.labels.extend(l.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            p.labels = Some(l);
        }
        converge(p, ids, &delays, ready_at, now);
        Ok(p.clone())
    }

    /// Deletes a pool: its nodes drain and delete, then the pool is gone.
    pub fn delete_node_pool(
        &mut self,
        token: &str,
        cluster_id: &str,
        pool_id: &str,
        now: Timestamp,
    ) -> Result<(), ApiError> {
        let delays = self.delays;
        let p = find_pool(editable(find(self.account(token, now)?, cluster_id)?)?, pool_id)?;
        if !p.deleting {
            p.deleting = true;
            for n in p.nodes.iter_mut().filter(|n| !n.state.leaving()) {
                start_leaving(n, false, &delays, now);
            }
        }
        self.advance(now);
        Ok(())
    }

    /// Deletes one node: drained first unless `skip_drain`; with `replace` a new node
    /// takes its place (count kept), otherwise the pool shrinks by one.
    #[allow(clippy::too_many_arguments)]
    pub fn delete_node(
        &mut self,
        token: &str,
        cluster_id: &str,
        pool_id: &str,
        node_id: &str,
        skip_drain: bool,
        replace: bool,
        now: Timestamp,
    ) -> Result<(), ApiError> {
        let (account, ids, delays) = self.parts(token, now)?;
        let c = live(find(account, cluster_id)?)?;
        let ready_at = c.ready_at(now);
        let p = find_pool(c, pool_id)?;
        let n = p.nodes.iter_mut().find(|n| n.id == node_id).ok_or_else(ApiError::not_found)?;
        if n.state.leaving() {
            return Ok(());
        }
        start_leaving(n, skip_drain, &delays, now);
        if replace {
            let due = std::cmp::max(now + delays.node_provision, ready_at);
            let fresh = new_node(p, ids, due, now);
            p.nodes.push(fresh);
        } else {
            p.count = p.count.saturating_sub(1);
        }
        Ok(())
    }

    /// The deprecated `POST …/node_pools/{id}/recycle` (research §4.4): each listed node
    /// is drained and replaced by a new one (the count stays). All ids are checked first,
    /// so an unknown one (404) changes nothing.
    pub fn recycle_nodes(
        &mut self,
        token: &str,
        cluster_id: &str,
        pool_id: &str,
        node_ids: &[String],
        now: Timestamp,
    ) -> Result<(), ApiError> {
        if node_ids.is_empty() {
            return Err(ApiError::unprocessable("nodes is required"));
        }
        let pool = self.get_node_pool(token, cluster_id, pool_id, now)?;
        if node_ids.iter().any(|id| !pool.nodes.iter().any(|n| n.id == *id)) {
            return Err(ApiError::not_found());
        }
        for id in node_ids {
            self.delete_node(token, cluster_id, pool_id, id, false, true, now)?;
        }
        Ok(())
    }

    // ----- fault injection ---------------------------------------------------------------

    /// Forces a cluster into `state` (e.g. `Error`, `Degraded`, or back to `Running`)
    /// with `message`; pending transitions of the cluster stop. Returns false if unknown.
    pub fn force_cluster_state(
        &mut self,
        cluster_id: &str,
        state: ClusterState,
        message: &str,
    ) -> bool {
        for a in self.accounts_mut() {
            if let Some(c) = a.clusters.iter_mut().find(|c| c.id == cluster_id) {
                c.state = state;
                c.message = message.to_owned();
                c.due = None;
                if state == ClusterState::Running {
                    c.provisioned = true;
                }
                return true;
            }
        }
        false
    }

    /// Revokes the bearer token the cluster's kubeconfigs carry (as an expired or
    /// revoked DigitalOcean token): its API answers 401 to it from now on, and the next
    /// kubeconfig or credentials request hands out a new one. Returns the new token, or
    /// `None` if the cluster is unknown.
    pub fn revoke_cluster_token(&mut self, cluster_id: &str) -> Option<String> {
        let fresh = format!("doks-sim-{}", self.ids.uuid().replace('-', ""));
        let c =
            self.accounts_mut().flat_map(|a| a.clusters.iter_mut()).find(|c| c.id == cluster_id)?;
        c.api_token = fresh.clone();
        c.issued_tokens.clear();
        Some(fresh)
    }

    /// Sets a cluster's version directly (tests: start from a version not offered for
    /// new clusters, e.g. an older patch). Returns false if the cluster or version is
    /// unknown.
    pub fn force_cluster_version(&mut self, cluster_id: &str, version: &str) -> bool {
        if !catalog::is_known_version(version) {
            return false;
        }
        for a in self.accounts_mut() {
            if let Some(c) = a.clusters.iter_mut().find(|c| c.id == cluster_id) {
                c.version = version.to_owned();
                return true;
            }
        }
        false
    }

    /// Shows a cluster as `running` again while an upgrade it accepted is still due (tests:
    /// DigitalOcean may answer `running`, at the old version, for a while after `POST
    /// /upgrade`). Returns false if the cluster is unknown.
    pub fn force_cluster_running(&mut self, cluster_id: &str) -> bool {
        for a in self.accounts_mut() {
            if let Some(c) = a.clusters.iter_mut().find(|c| c.id == cluster_id) {
                c.state = ClusterState::Running;
                return true;
            }
        }
        false
    }

    // ----- the Kubernetes face's view ----------------------------------------------------

    fn live_cluster(&mut self, cluster_id: &str, now: Timestamp) -> Option<&Cluster> {
        self.advance(now);
        self.accounts
            .values()
            .flat_map(|a| a.clusters.iter())
            .find(|c| c.id == cluster_id && c.live())
    }

    /// The cluster's nodes that have names (None if no such live cluster), as its
    /// Kubernetes API shows them.
    pub fn cluster_nodes(&mut self, cluster_id: &str, now: Timestamp) -> Option<Vec<SimNode>> {
        if self.gke.cluster(cluster_id).is_some() {
            self.advance(now);
            let c = self
                .accounts
                .values()
                .flat_map(|a| a.clusters.iter())
                .find(|c| c.id == cluster_id && c.live())?;
            return self.gke_nodes(c);
        }
        let c = self.live_cluster(cluster_id, now)?;
        let kubelet = kubernetes_version(&c.version);
        let mut out = Vec::new();
        for p in &c.node_pools {
            for n in p.nodes.iter().filter(|n| !n.name.is_empty()) {
                // What DOKS nodes carry: the pool's labels, then the well-known ones the
                // kubelet and the cloud controller set, then DigitalOcean's own.
                let mut labels = n.labels.clone();
                for (k, v) in [
                    ("kubernetes.io/hostname", n.name.as_str()),
                    ("kubernetes.io/os", "linux"),
                    ("kubernetes.io/arch", "amd64"),
                    ("beta.kubernetes.io/os", "linux"),
                    ("beta.kubernetes.io/arch", "amd64"),
                    ("node.kubernetes.io/instance-type", p.size.as_str()),
                    ("beta.kubernetes.io/instance-type", p.size.as_str()),
                    ("topology.kubernetes.io/region", c.region.as_str()),
                    ("failure-domain.beta.kubernetes.io/region", c.region.as_str()),
                    ("region", c.region.as_str()),
                    ("doks.digitalocean.com/managed", "true"),
                    ("doks.digitalocean.com/node-id", n.id.as_str()),
                    ("doks.digitalocean.com/node-pool", p.name.as_str()),
                    ("doks.digitalocean.com/node-pool-id", p.id.as_str()),
                    ("doks.digitalocean.com/version", c.version.as_str()),
                ] {
                    labels.insert(k.into(), v.into());
                }
                let droplet = n.droplet_id.parse::<u64>().unwrap_or(0);
                out.push(SimNode {
                    name: n.name.clone(),
                    provider_id: format!("digitalocean://{}", n.droplet_id),
                    labels,
                    taints: p.taints.clone(),
                    ready: n.state == NodeState::Running,
                    size: p.size.clone(),
                    internal_ip: format!("10.108.{}.{}", (droplet >> 8) & 0xff, droplet & 0xff),
                    external_ip: format!("146.190.{}.{}", (droplet >> 8) & 0xff, droplet & 0xff),
                    created_at: n.created_at,
                    kubelet_version: kubelet.clone(),
                });
            }
        }
        Some(out)
    }

    /// The Kubernetes version a cluster's API reports (`v1.32.6` for `1.32.6-do.1`).
    pub fn cluster_kubernetes_version(&self, cluster_id: &str) -> Option<String> {
        if let Some(v) = self.gke_kubernetes_version(cluster_id) {
            return Some(v);
        }
        self.accounts
            .values()
            .flat_map(|a| a.clusters.iter())
            .find(|c| c.id == cluster_id)
            .map(|c| kubernetes_version(&c.version))
    }

    /// Any account's cluster by id, as it stands at `now` (for tests and other faces;
    /// no token, no brief-404 window).
    pub fn find_cluster(&mut self, cluster_id: &str, now: Timestamp) -> Option<Cluster> {
        self.advance(now);
        self.accounts.values().flat_map(|a| a.clusters.iter()).find(|c| c.id == cluster_id).cloned()
    }

    /// The bearer token the cluster's kubeconfig carries.
    pub fn cluster_api_token(&self, cluster_id: &str) -> Option<String> {
        self.accounts
            .values()
            .flat_map(|a| a.clusters.iter())
            .find(|c| c.id == cluster_id)
            .map(|c| c.api_token.clone())
    }

    /// Whether `bearer` may call the cluster's Kubernetes API at `now`: its standing
    /// token, a token a kubeconfig or credentials request handed out that has not
    /// expired, or — on a GKE cluster — an access token the simulator's token endpoint
    /// minted that has not expired.
    pub fn cluster_accepts(&self, cluster_id: &str, bearer: Option<&str>, now: Timestamp) -> bool {
        let Some(bearer) = bearer else { return false };
        let cluster =
            self.accounts.values().flat_map(|a| a.clusters.iter()).find(|c| c.id == cluster_id);
        if let Some(c) = cluster
            && (c.api_token == bearer
                || c.issued_tokens.iter().any(|(t, until)| t == bearer && now < *until))
        {
            return true;
        }
        self.gke.cluster(cluster_id).is_some() && self.gke.token_valid(bearer, now)
    }

    /// Whether the cluster's control plane serves its API: provisioned and `running`,
    /// `degraded` or `upgrading` (not provisioning, error, deleting or gone).
    pub fn cluster_is_running(&mut self, cluster_id: &str, now: Timestamp) -> bool {
        self.live_cluster(cluster_id, now).is_some_and(|c| {
            c.provisioned
                && matches!(
                    c.state,
                    ClusterState::Running | ClusterState::Degraded | ClusterState::Upgrading
                )
        })
    }
}

/// `v1.32.6` for the slug `1.32.6-do.1`.
fn kubernetes_version(slug: &str) -> String {
    match catalog::VersionSlug::parse(slug) {
        Some(v) => format!("v{}", v.kubernetes_version()),
        None => format!("v{}", slug.split('-').next().unwrap_or(slug)),
    }
}

fn associated(account: &Account, cluster_id: &str) -> AssociatedResources {
    let tag = format!("k8s:{cluster_id}");
    AssociatedResources {
        load_balancers: account
            .load_balancers
            .iter()
            .filter(|l| l.tags.contains(&tag))
            .map(|l| (l.id.clone(), l.name.clone()))
            .collect(),
        volumes: account
            .volumes
            .iter()
            .filter(|v| v.cluster_id == cluster_id)
            .map(|v| (v.id.clone(), v.name.clone()))
            .collect(),
        volume_snapshots: account
            .volume_snapshots
            .iter()
            .filter(|v| v.cluster_id == cluster_id)
            .map(|v| (v.id.clone(), v.name.clone()))
            .collect(),
    }
}

/// The kubeconfig DigitalOcean serves: cluster/context `do-<region>-<name>`, user
/// `do-<region>-<name>-admin` with bearer token `token`.
pub fn kubeconfig_yaml(c: &Cluster, token: &str, server: &str, ca_pem: &str) -> String {
    let q = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let ctx = format!("do-{}-{}", c.region, c.name);
    let user = format!("{ctx}-admin");
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: {server}\n  name: {ctx}\ncontexts:\n- context:\n    cluster: {ctx}\n    user: {user}\n  name: {ctx}\ncurrent-context: {ctx}\nkind: Config\npreferences: {{}}\nusers:\n- name: {user}\n  user:\n    token: {token}\n",
        ca = q(&ca),
        server = q(server),
        ctx = q(&ctx),
        user = q(&user),
        token = q(token),
    )
}

#[cfg(test)]
mod tests {
    use super::super::Settled;
    use super::*;
    use crate::testing::{TEST_TOKEN as T, cluster_create, node_pool, sim, step};
    use bc_domain::ports::Clock as _;

    /// A read (a cluster, its node pools, its upgrades, its associated resources) and a
    /// kubeconfig handed out change no due time: the account stays settled, so the next
    /// call does not walk every object of it again.
    #[test]
    fn reads_and_kubeconfigs_leave_the_account_settled() {
        let (sim, clock) = sim(crate::config::SimConfig::default());
        let pools = vec![node_pool("workers", 2, &[])];
        let made = sim.state().model().create_cluster(
            T,
            cluster_create("c", "latest", pools),
            clock.now(),
        );
        let id = made.expect("created").id;
        step(&clock, 600);
        let now = clock.now();
        let mut m = sim.state().model();
        m.advance(now);
        let settled = m.accounts[T].settled;
        assert_ne!(settled, Settled::Unknown, "advanced");
        let pool = m.get_cluster(T, &id, now).expect("cluster").node_pools[0].id.clone();
        m.list_node_pools(T, &id, now).expect("node pools");
        m.get_node_pool(T, &id, &pool, now).expect("node pool");
        m.upgrades(T, &id, now).expect("upgrades");
        m.associated_resources(T, &id, now).expect("associated resources");
        m.kubeconfig(T, &id, None, now).expect("kubeconfig");
        assert_eq!(m.accounts[T].settled, settled);
    }

    /// `has_tag` is `all_tags` without the allocations: they must agree on every tag a
    /// load balancer could target, including a user tag that repeats a server one.
    #[test]
    fn has_tag_agrees_with_all_tags() {
        let pool = NodePool {
            id: "p".into(),
            name: "pool".into(),
            size: "s-1vcpu-2gb".into(),
            count: 1,
            tags: vec!["web".into(), "k8s".into()],
            labels: None,
            taints: Vec::new(),
            auto_scale: false,
            min_nodes: 0,
            max_nodes: 0,
            nodes: Vec::new(),
            deleting: false,
            created_at: Timestamp::EPOCH,
        };
        let all = pool.all_tags("c1");
        for tag in ["web", "k8s", "k8s:c1", "k8s:worker", "k8s:c2", "k8s:", "db", "", "WEB"] {
            assert_eq!(pool.has_tag("c1", tag), all.iter().any(|t| t == tag), "tag {tag:?}");
        }
    }
}
