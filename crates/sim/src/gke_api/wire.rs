//! GKE's JSON wire (research/gke.md §0): requests read as proto3 JSON is read — camelCase
//! or the proto's snake_case names, enums by name or number, 64-bit integers as strings or
//! numbers, unknown fields ignored — and answers written as Google's REST transport
//! writes them: camelCase, zero values left out, 64-bit integers as strings, enums by name,
//! or by number when the request asked for `$alt=json;enum-encoding=int`.
//!
//! Invariant: every enum this face writes goes through [`Enc::en`] with the proto's number
//! (`cluster_service.proto`), so both encodings always agree.

use std::collections::BTreeMap;

use bc_domain::Timestamp;
use bc_domain::policy::{Taint, TaintEffect};
use serde_json::{Map, Value, json};

use crate::model::gke::{
    Autoscaling, ClusterChange, ClusterSpec, ClusterView, GkeError, GkePool, Operation, PoolSpec,
    PoolUpdate, catalog, pool_etag, project_number, taint_effect,
};

/// Where the real API lives (selfLinks name it, as GKE's do).
pub const API_BASE: &str = "https://container.googleapis.com/v1";

/// How enums are written in an answer.
#[derive(Debug, Clone, Copy, Default)]
pub struct Enc {
    /// `$alt=json;enum-encoding=int`: numbers.
    pub ints: bool,
}

impl Enc {
    /// An enum value: its name, or its proto number.
    pub fn en(self, name: &str, table: &[(&str, i64)]) -> Value {
        if self.ints {
            json!(table.iter().find(|(n, _)| *n == name).map_or(0, |(_, v)| *v))
        } else {
            json!(name)
        }
    }
}

/// `Cluster.Status`.
pub const CLUSTER_STATUS: &[(&str, i64)] = &[
    ("STATUS_UNSPECIFIED", 0),
    ("PROVISIONING", 1),
    ("RUNNING", 2),
    ("RECONCILING", 3),
    ("STOPPING", 4),
    ("ERROR", 5),
    ("DEGRADED", 6),
];
/// `NodePool.Status`.
pub const POOL_STATUS: &[(&str, i64)] = &[
    ("STATUS_UNSPECIFIED", 0),
    ("PROVISIONING", 1),
    ("RUNNING", 2),
    ("RUNNING_WITH_ERROR", 3),
    ("RECONCILING", 4),
    ("STOPPING", 5),
    ("ERROR", 6),
];
/// `Operation.Status`.
pub const OP_STATUS: &[(&str, i64)] =
    &[("STATUS_UNSPECIFIED", 0), ("PENDING", 1), ("RUNNING", 2), ("DONE", 3), ("ABORTING", 4)];
/// `Operation.Type`.
pub const OP_TYPE: &[(&str, i64)] = &[
    ("TYPE_UNSPECIFIED", 0),
    ("CREATE_CLUSTER", 1),
    ("DELETE_CLUSTER", 2),
    ("UPGRADE_MASTER", 3),
    ("UPGRADE_NODES", 4),
    ("REPAIR_CLUSTER", 5),
    ("UPDATE_CLUSTER", 6),
    ("CREATE_NODE_POOL", 7),
    ("DELETE_NODE_POOL", 8),
    ("SET_NODE_POOL_MANAGEMENT", 9),
    ("AUTO_REPAIR_NODES", 10),
    ("AUTO_UPGRADE_NODES", 11),
    ("SET_LABELS", 12),
    ("SET_MASTER_AUTH", 13),
    ("SET_NODE_POOL_SIZE", 14),
    ("SET_NETWORK_POLICY", 15),
    ("SET_MAINTENANCE_POLICY", 16),
    ("RESIZE_CLUSTER", 18),
    ("FLEET_FEATURE_UPGRADE", 19),
];
/// `ReleaseChannel.Channel`.
pub const CHANNEL: &[(&str, i64)] =
    &[("UNSPECIFIED", 0), ("RAPID", 1), ("REGULAR", 2), ("STABLE", 3), ("EXTENDED", 4)];
/// `NodeTaint.Effect`.
pub const EFFECT: &[(&str, i64)] =
    &[("EFFECT_UNSPECIFIED", 0), ("NO_SCHEDULE", 1), ("PREFER_NO_SCHEDULE", 2), ("NO_EXECUTE", 3)];
/// `StatusCondition.Code`.
pub const CONDITION_CODE: &[(&str, i64)] = &[
    ("UNKNOWN", 0),
    ("GCE_STOCKOUT", 1),
    ("GKE_SERVICE_ACCOUNT_DELETED", 2),
    ("GCE_QUOTA_EXCEEDED", 3),
    ("SET_BY_OPERATOR", 4),
    ("CLOUD_KMS_KEY_ERROR", 7),
    ("CA_EXPIRING", 9),
];
/// `google.rpc.Code` (StatusCondition.canonicalCode).
pub const CANONICAL_CODE: &[(&str, i64)] =
    &[("OK", 0), ("CANCELLED", 1), ("RESOURCE_EXHAUSTED", 8), ("FAILED_PRECONDITION", 9)];
/// `NodePoolAutoscaling.LocationPolicy`.
pub const LOCATION_POLICY: &[(&str, i64)] =
    &[("LOCATION_POLICY_UNSPECIFIED", 0), ("BALANCED", 1), ("ANY", 2)];
/// `NodePoolUpdateStrategy`.
pub const STRATEGY: &[(&str, i64)] = &[
    ("NODE_POOL_UPDATE_STRATEGY_UNSPECIFIED", 0),
    ("BLUE_GREEN", 2),
    ("SURGE", 3),
    ("SHORT_LIVED", 5),
];

/// Drops proto3's zero values (null, false, 0, "", [], {}) below the top level, as
/// Google's JSON printer leaves them out.
pub fn prune(v: Value) -> Value {
    fn zero(v: &Value) -> bool {
        match v {
            Value::Null => true,
            Value::Bool(b) => !b,
            Value::Number(n) => n.as_f64() == Some(0.0),
            Value::String(s) => s.is_empty(),
            Value::Array(a) => a.is_empty(),
            Value::Object(o) => o.is_empty(),
        }
    }
    fn inner(v: Value) -> Value {
        match v {
            Value::Object(o) => Value::Object(
                o.into_iter().map(|(k, v)| (k, inner(v))).filter(|(_, v)| !zero(v)).collect(),
            ),
            Value::Array(a) => Value::Array(a.into_iter().map(inner).collect()),
            v => v,
        }
    }
    inner(v)
}

fn rfc3339(t: Timestamp) -> String {
    t.to_rfc3339()
}

/// `https://container.googleapis.com/v1/projects/<p>/<zones|locations>/<l>`: operation
/// links name the project by number, and zonal ones say `zones`.
fn op_base(project: &str, location: &str) -> String {
    let kind = match catalog::Location::parse(location) {
        Some(catalog::Location::Zone(..)) => "zones",
        _ => "locations",
    };
    format!("{API_BASE}/projects/{}/{kind}/{location}", project_number(project))
}

/// An Operation.
pub fn operation(o: &Operation, now: Timestamp, enc: Enc) -> Value {
    let status = o.status(now);
    let base = op_base(&o.project, &o.location);
    let target = o.target.split_once("/clusters/").map(|(_, t)| t).unwrap_or_default();
    let mut v = json!({
        "name": o.name,
        "zone": o.location,
        "location": o.location,
        "operationType": enc.en(&o.op_type, OP_TYPE),
        "status": enc.en(status, OP_STATUS),
        "selfLink": format!("{base}/operations/{}", o.name),
        "targetLink": format!("{base}/clusters/{target}"),
        "startTime": rfc3339(o.start),
    });
    if status == "DONE" {
        v["endTime"] = json!(rfc3339(o.done_at));
        if let Some(message) = &o.error {
            let (code, canonical) = match o.condition.as_deref() {
                Some(_) => (8, "RESOURCE_EXHAUSTED"),
                None => (1, "CANCELLED"),
            };
            v["statusMessage"] = json!(message);
            v["error"] = json!({"code": code, "message": message});
            if let Some(c) = &o.condition {
                v["clusterConditions"] = json!([{
                    "code": enc.en(c, CONDITION_CODE),
                    "message": message,
                    "canonicalCode": enc.en(canonical, CANONICAL_CODE),
                }]);
                if o.op_type == "CREATE_NODE_POOL" {
                    v["nodepoolConditions"] = v["clusterConditions"].clone();
                }
            }
        }
    }
    prune(v)
}

/// A NodePool of cluster `c`.
pub fn node_pool(c: &ClusterView, p: &GkePool, enc: Enc) -> Value {
    let g = &c.gke;
    let group = format!("{:08x}", crate::fnv1a(&p.model_id) & 0xffff_ffff);
    let model = c.model.as_ref().and_then(|m| m.node_pools.iter().find(|mp| mp.id == p.model_id));
    let labels = model.and_then(|m| m.labels.clone()).unwrap_or_default();
    let taints: Vec<Value> = model
        .map(|m| m.taints.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|t| json!({"key": t.key, "value": t.value, "effect": enc.en(effect_name(t.effect), EFFECT)}))
        .collect();
    let mut name = format!("gke-{}-{}", g.name, p.name);
    name.truncate(49);
    let igm: Vec<Value> = p
        .locations
        .iter()
        .map(|z| {
            json!(format!(
                "https://www.googleapis.com/compute/v1/projects/{}/zones/{z}/instanceGroupManagers/{}-{group}-grp",
                g.project,
                name.trim_end_matches('-')
            ))
        })
        .collect();
    let a = &p.autoscaling;
    prune(json!({
        "name": p.name,
        "config": {
            "machineType": p.machine_type,
            "diskSizeGb": p.disk_size_gb,
            "diskType": "pd-balanced",
            "imageType": p.image_type,
            "oauthScopes": ["https://www.googleapis.com/auth/cloud-platform"],
            "serviceAccount": "default",
            "metadata": {"disable-legacy-endpoints": "true"},
            "labels": labels,
            "taints": taints,
            "resourceLabels": p.resource_labels,
        },
        "initialNodeCount": p.initial_node_count,
        "locations": p.locations,
        "selfLink": format!("{API_BASE}/{}/nodePools/{}", g.path(), p.name),
        "version": p.version,
        "instanceGroupUrls": igm,
        "status": enc.en(c.pool_status(p), POOL_STATUS),
        "autoscaling": {
            "enabled": a.enabled,
            "minNodeCount": a.min,
            "maxNodeCount": a.max,
            "totalMinNodeCount": a.total_min,
            "totalMaxNodeCount": a.total_max,
            "locationPolicy": if a.location_policy.is_empty() { Value::Null } else { enc.en(&a.location_policy, LOCATION_POLICY) },
        },
        "management": {"autoUpgrade": p.auto_upgrade, "autoRepair": p.auto_repair},
        "maxPodsConstraint": {"maxPodsPerNode": p.max_pods.to_string()},
        "podIpv4CidrSize": 24,
        "upgradeSettings": {"maxSurge": 1, "strategy": enc.en("SURGE", STRATEGY)},
        "etag": pool_etag(p),
    }))
}

fn effect_name(e: TaintEffect) -> &'static str {
    match e {
        TaintEffect::NoSchedule => "NO_SCHEDULE",
        TaintEffect::PreferNoSchedule => "PREFER_NO_SCHEDULE",
        TaintEffect::NoExecute => "NO_EXECUTE",
    }
}

/// A Cluster.
pub fn cluster(c: &ClusterView, enc: Enc) -> Value {
    use base64::Engine as _;
    let g = &c.gke;
    let status = c.status();
    let serving = c.model.as_ref().is_some_and(|m| m.provisioned) && status != "PROVISIONING";
    let endpoint = c.endpoint.trim_start_matches("https://").trim_end_matches('/');
    let pools: Vec<Value> = if g.autopilot {
        Vec::new()
    } else {
        g.pools.iter().map(|p| node_pool(c, p, enc)).collect()
    };
    let nodes = c
        .model
        .as_ref()
        .map(|m| {
            m.node_pools
                .iter()
                .map(|p| p.nodes.iter().filter(|n| !n.name.is_empty()).count())
                .sum::<usize>()
        })
        .unwrap_or(0);
    let mut v = json!({
        "name": g.name,
        "id": c.model.as_ref().map(|m| m.id.replace('-', "")).unwrap_or_default(),
        "location": g.location,
        "zone": g.location,
        "locations": g.zones,
        "selfLink": format!("{API_BASE}/{}", g.path()),
        "status": enc.en(status, CLUSTER_STATUS),
        "initialClusterVersion": g.initial_version,
        "currentMasterVersion": g.master_version,
        "currentNodeVersion": g.pools.first().map(|p| p.version.clone()).unwrap_or_default(),
        "currentNodeCount": nodes,
        "createTime": rfc3339(g.create_time),
        "network": "default",
        "subnetwork": "default",
        "clusterIpv4Cidr": "10.4.0.0/14",
        "servicesIpv4Cidr": "34.118.224.0/20",
        "nodeIpv4CidrSize": 24,
        "loggingService": "logging.googleapis.com/kubernetes",
        "monitoringService": "monitoring.googleapis.com/kubernetes",
        "releaseChannel": {"channel": g.channel.as_deref().map(|ch| enc.en(ch, CHANNEL))},
        "resourceLabels": g.resource_labels,
        "labelFingerprint": g.label_fingerprint,
        "autopilot": {"enabled": g.autopilot},
        "nodePools": pools,
        "etag": c.etag(),
    });
    // What GKE says of a cluster it put in DEGRADED or ERROR (or is reconciling): the
    // deprecated `statusMessage` and the condition that replaces it.
    if let Some(m) = c.model.as_ref().map(|m| m.message.as_str()).filter(|m| !m.is_empty()) {
        v["statusMessage"] = json!(m);
        v["conditions"] = json!([{"message": m}]);
    }
    if serving {
        v["endpoint"] = json!(endpoint);
        let ca = base64::engine::general_purpose::STANDARD.encode(&c.ca_pem);
        v["masterAuth"] = json!({"clusterCaCertificate": ca});
    }
    prune(v)
}

/// The ServerConfig of a location.
pub fn server_config(enc: Enc) -> Value {
    let channels: Vec<Value> = catalog::CHANNELS
        .iter()
        .map(|(name, default, valid)| {
            json!({
                "channel": enc.en(name, CHANNEL),
                "defaultVersion": default,
                "validVersions": valid,
                "upgradeTargetVersion": valid.first(),
            })
        })
        .collect();
    prune(json!({
        "defaultClusterVersion": catalog::DEFAULT_VERSION,
        "validNodeVersions": catalog::VERSIONS,
        "defaultImageType": catalog::IMAGE_TYPES[0],
        "validImageTypes": catalog::IMAGE_TYPES,
        "validMasterVersions": catalog::VERSIONS,
        "channels": channels,
    }))
}

// ----- requests ----------------------------------------------------------------------------

/// `fooBar` → `foo_bar` (proto3 JSON accepts the proto's own field names too).
fn snake(camel: &str) -> String {
    let mut out = String::new();
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// A request object being read, with its path for messages (`cluster.node_pools[0]`).
#[derive(Clone, Copy)]
pub struct Msg<'a> {
    v: Option<&'a Value>,
    path: &'a str,
}

impl<'a> Msg<'a> {
    /// The request body (or a message in it) at `path`.
    pub fn new(v: &'a Value, path: &'a str) -> Self {
        Self { v: Some(v), path }
    }

    fn get(&self, camel: &str) -> Option<&'a Value> {
        let o = self.v?.as_object()?;
        o.get(camel).or_else(|| o.get(&snake(camel))).filter(|v| !v.is_null())
    }

    fn bad(&self, field: &str, ty: &str, v: &Value) -> GkeError {
        let at = if self.path.is_empty() {
            snake(field)
        } else {
            format!("{}.{}", self.path, snake(field))
        };
        GkeError::invalid(format!("Invalid value at '{at}' ({ty}), {v}"))
    }

    /// A nested message (absent: an empty one).
    pub fn msg(&self, camel: &str, path: &'a str) -> Result<Msg<'a>, GkeError> {
        match self.get(camel) {
            None => Ok(Msg { v: None, path }),
            Some(v) if v.is_object() => Ok(Msg { v: Some(v), path }),
            Some(v) => Err(self.bad(camel, "TYPE_MESSAGE", v)),
        }
    }

    /// Whether the message was given.
    pub fn present(&self) -> bool {
        self.v.is_some()
    }

    /// Whether field `camel` was given.
    pub fn has(&self, camel: &str) -> bool {
        self.get(camel).is_some()
    }

    /// A string field.
    pub fn str(&self, camel: &str) -> Result<Option<String>, GkeError> {
        match self.get(camel) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(self.bad(camel, "TYPE_STRING", v)),
        }
    }

    /// An integer field (a number, or a string of one: int64's JSON form).
    pub fn int(&self, camel: &str) -> Result<Option<i64>, GkeError> {
        match self.get(camel) {
            None => Ok(None),
            Some(Value::Number(n)) if n.as_i64().is_some() => Ok(n.as_i64()),
            Some(Value::String(s)) if s.parse::<i64>().is_ok() => Ok(s.parse().ok()),
            Some(v) => Err(self.bad(camel, "TYPE_INT64", v)),
        }
    }

    /// A boolean field.
    pub fn bool(&self, camel: &str) -> Result<bool, GkeError> {
        match self.get(camel) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(self.bad(camel, "TYPE_BOOL", v)),
        }
    }

    /// An enum field, by name or number, as its name (`None`: unset or the zero value).
    pub fn en(&self, camel: &str, table: &[(&str, i64)]) -> Result<Option<String>, GkeError> {
        let Some(v) = self.get(camel) else { return Ok(None) };
        let name = match v {
            Value::String(s) => table.iter().find(|(n, _)| n == s).map(|(n, _)| *n),
            Value::Number(n) => table.iter().find(|(_, k)| Some(*k) == n.as_i64()).map(|(n, _)| *n),
            _ => None,
        };
        match name {
            Some(n) if table.first().is_some_and(|(z, _)| *z == n) => Ok(None),
            Some(n) => Ok(Some(n.to_owned())),
            None => Err(self.bad(camel, "TYPE_ENUM", v)),
        }
    }

    /// A `map<string, string>` field.
    pub fn map(&self, camel: &str) -> Result<Option<BTreeMap<String, String>>, GkeError> {
        match self.get(camel) {
            None => Ok(None),
            Some(Value::Object(o)) => o
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), s.clone())),
                    v => Err(self.bad(camel, "TYPE_STRING", v)),
                })
                .collect::<Result<_, _>>()
                .map(Some),
            Some(v) => Err(self.bad(camel, "TYPE_MESSAGE", v)),
        }
    }

    /// A repeated string field.
    pub fn strings(&self, camel: &str) -> Result<Option<Vec<String>>, GkeError> {
        match self.get(camel) {
            None => Ok(None),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| {
                    v.as_str().map(str::to_owned).ok_or_else(|| self.bad(camel, "TYPE_STRING", v))
                })
                .collect::<Result<_, _>>()
                .map(Some),
            Some(v) => Err(self.bad(camel, "TYPE_STRING", v)),
        }
    }

    /// A repeated message field.
    pub fn msgs(&self, camel: &str) -> Result<Vec<&'a Value>, GkeError> {
        match self.get(camel) {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) => Ok(a.iter().collect()),
            Some(v) => Err(self.bad(camel, "TYPE_MESSAGE", v)),
        }
    }
}

/// Parses a JSON body (empty: `{}`).
pub fn body(bytes: &[u8]) -> Result<Value, GkeError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Object(Map::new()));
    }
    let v: Value = serde_json::from_slice(bytes)
        .map_err(|e| GkeError::invalid(format!("Invalid JSON payload received. {e}")))?;
    if !v.is_object() {
        return Err(GkeError::invalid("Invalid JSON payload received. Expected an object."));
    }
    Ok(v)
}

fn taints(m: &Msg<'_>, camel: &str) -> Result<Option<Vec<Taint>>, GkeError> {
    if !m.has(camel) {
        return Ok(None);
    }
    let mut out = Vec::new();
    for t in m.msgs(camel)? {
        let effect = t.get("effect").and_then(taint_effect).ok_or_else(|| {
            GkeError::invalid(format!(
                "Invalid value for field \"taints.effect\": {}. Must be one of NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE.",
                t.get("effect").cloned().unwrap_or(Value::Null)
            ))
        })?;
        let key = t.get("key").and_then(Value::as_str).unwrap_or_default().to_owned();
        if key.is_empty() {
            return Err(GkeError::invalid(
                "Invalid value for field \"taints.key\": a key is required.",
            ));
        }
        let value = t.get("value").and_then(Value::as_str).unwrap_or_default().to_owned();
        out.push(Taint { key, value, effect });
    }
    Ok(Some(out))
}

/// A NodePoolAutoscaling message.
pub fn autoscaling(m: &Msg<'_>) -> Result<Autoscaling, GkeError> {
    Ok(Autoscaling {
        enabled: m.bool("enabled")?,
        min: m.int("minNodeCount")?.unwrap_or(0),
        max: m.int("maxNodeCount")?.unwrap_or(0),
        total_min: m.int("totalMinNodeCount")?.unwrap_or(0),
        total_max: m.int("totalMaxNodeCount")?.unwrap_or(0),
        location_policy: m.en("locationPolicy", LOCATION_POLICY)?.unwrap_or_default(),
    })
}

/// A NodePool message (create).
pub fn pool_spec(v: &Value) -> Result<PoolSpec, GkeError> {
    let m = Msg::new(v, "node_pool");
    let config = m.msg("config", "node_pool.config")?;
    let auto = m.msg("autoscaling", "node_pool.autoscaling")?;
    let management = m.msg("management", "node_pool.management")?;
    let max_pods = m.msg("maxPodsConstraint", "node_pool.max_pods_constraint")?;
    Ok(PoolSpec {
        name: m.str("name")?.unwrap_or_default(),
        initial_node_count: m.int("initialNodeCount")?.unwrap_or(0),
        machine_type: config.str("machineType")?,
        disk_size_gb: config.int("diskSizeGb")?,
        image_type: config.str("imageType")?,
        labels: config.map("labels")?.unwrap_or_default(),
        taints: taints(&config, "taints")?.unwrap_or_default(),
        resource_labels: config.map("resourceLabels")?.unwrap_or_default(),
        locations: m.strings("locations")?.unwrap_or_default(),
        autoscaling: if auto.present() { Some(autoscaling(&auto)?) } else { None },
        management: if management.present() {
            Some((management.bool("autoUpgrade")?, management.bool("autoRepair")?))
        } else {
            None
        },
        version: m.str("version")?,
        max_pods: max_pods.int("maxPodsPerNode")?,
    })
}

/// A CreateClusterRequest.
pub fn cluster_spec(v: &Value) -> Result<ClusterSpec, GkeError> {
    let req = Msg::new(v, "");
    let m = req.msg("cluster", "cluster")?;
    if !m.present() {
        return Err(GkeError::invalid(
            "Invalid value for field \"cluster\": a cluster is required.",
        ));
    }
    let autopilot = m.msg("autopilot", "cluster.autopilot")?.bool("enabled")?;
    let channel = m.msg("releaseChannel", "cluster.release_channel")?.en("channel", CHANNEL)?;
    let mut pools = Vec::new();
    for p in m.msgs("nodePools")? {
        pools.push(pool_spec(p)?);
    }
    let default_pool = match m.int("initialNodeCount")? {
        Some(n) if n > 0 => {
            let mut spec = match m.msg("nodeConfig", "cluster.node_config")? {
                c if c.present() => pool_spec(&json!({"config": m.get("nodeConfig")}))?,
                _ => PoolSpec::default(),
            };
            spec.name = "default-pool".into();
            spec.initial_node_count = n;
            Some(spec)
        }
        _ => None,
    };
    Ok(ClusterSpec {
        name: m.str("name")?.unwrap_or_default(),
        autopilot,
        channel,
        version: m.str("initialClusterVersion")?,
        locations: m.strings("locations")?.unwrap_or_default(),
        resource_labels: m.map("resourceLabels")?.unwrap_or_default(),
        node_pools: pools,
        default_pool,
    })
}

/// An UpdateClusterRequest's `update`.
pub fn cluster_change(v: &Value) -> Result<ClusterChange, GkeError> {
    let req = Msg::new(v, "");
    let u = req.msg("update", "update")?;
    if !u.present() {
        return Err(GkeError::invalid(
            "Invalid value for field \"update\": an update is required.",
        ));
    }
    let pool = u.str("desiredNodePoolId")?.unwrap_or_default();
    let node_version = u.str("desiredNodeVersion")?;
    let auto = u.msg("desiredNodePoolAutoscaling", "update.desired_node_pool_autoscaling")?;
    let mut change = ClusterChange {
        master_version: u.str("desiredMasterVersion")?,
        locations: u.strings("desiredLocations")?,
        etag: u.str("etag")?,
        ..ClusterChange::default()
    };
    if let Some(v) = node_version {
        change.node_version = Some((pool.clone(), v));
    }
    if auto.present() {
        change.pool_autoscaling = Some((pool.clone(), autoscaling(&auto)?));
    }
    let channel = u.msg("desiredReleaseChannel", "update.desired_release_channel")?;
    if channel.present() {
        change.channel =
            Some(channel.en("channel", CHANNEL)?.unwrap_or_else(|| "UNSPECIFIED".into()));
    }
    let known = [
        "desiredMasterVersion",
        "desiredNodeVersion",
        "desiredNodePoolId",
        "desiredNodePoolAutoscaling",
        "desiredLocations",
        "desiredReleaseChannel",
        "etag",
    ];
    if let Some(o) = u.v.and_then(Value::as_object) {
        for (k, v) in o {
            let camel_known = known.iter().any(|n| *n == k || snake(n) == *k);
            if !camel_known && !v.is_null() && k.starts_with("desired") {
                change.other.push(k.clone());
            }
        }
    }
    Ok(change)
}

/// An UpdateNodePoolRequest. An empty `labels`, `taints` or `resourceLabels` counts as
/// not given: GKE refuses `labels: {}` as "no field specified" (#15848), so a pool's
/// last label cannot be cleared that way.
pub fn pool_update(v: &Value) -> Result<PoolUpdate, GkeError> {
    let m = Msg::new(v, "");
    let labels = m.msg("labels", "labels")?.map("labels")?.filter(|l| !l.is_empty());
    let resource_labels =
        m.msg("resourceLabels", "resource_labels")?.map("labels")?.filter(|l| !l.is_empty());
    let taint_list = m.msg("taints", "taints")?;
    Ok(PoolUpdate {
        node_version: m.str("nodeVersion")?,
        image_type: m.str("imageType")?.filter(|s| !s.is_empty()),
        labels,
        taints: taints(&taint_list, "taints")?.filter(|t| !t.is_empty()),
        resource_labels,
        locations: m.strings("locations")?.filter(|l| !l.is_empty()),
        machine_type: m.str("machineType")?.filter(|s| !s.is_empty()),
        disk_size_gb: m.int("diskSizeGb")?.filter(|d| *d > 0),
        etag: m.str("etag")?.filter(|s| !s.is_empty()),
    })
}

/// The top-level `Msg` of a request body.
pub fn top(v: &Value) -> Msg<'_> {
    Msg::new(v, "")
}
