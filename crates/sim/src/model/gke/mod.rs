//! Google Kubernetes Engine in the model: GKE's clusters, node pools and long-running
//! operations over the shared clusters, node pools and nodes of [`super::kubernetes`]
//! (research/gke.md §2–§6), the service-account keys and access tokens of its OAuth face
//! ([`auth`]), its per-project request limit and injected faults.
//!
//! A GKE cluster is a model [`Cluster`] in the account `gke/<project>` plus what only GKE
//! has ([`GkeCluster`], keyed by the model cluster's id): its location and zones, release
//! channel, resource labels and their fingerprint, versions, and per pool its machine
//! type, zones, per-zone count, autoscaling and management. The model's nodes, endpoints
//! and Kubernetes API serve it unchanged; only the node names, labels and provider ids
//! are GKE's.
//!
//! Invariants: a cluster runs at most one operation at a time (another change is refused
//! with the running operation's name); an operation's status and the states it shows are
//! functions of `now` (PENDING, then RUNNING until its due time, then DONE), and what it
//! does at its end is applied once, by [`Model::advance`]; GKE counts nodes per zone, so a
//! pool's model count is always its per-zone count times its zones.

pub mod auth;
pub mod catalog;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bc_domain::Timestamp;
use bc_domain::policy::{Taint, TaintEffect};

use super::kubernetes::{
    Cluster, ClusterState, MaintenancePolicy, NodePool, converge, start_leaving,
};
use super::{Account, Model};
use crate::SimNode;
use auth::{AccessToken, GrantError, IssuedKey};
use catalog::Location;

/// How many workload pods an Autopilot node holds in the simulator (GKE sizes its nodes
/// to the pods' requests; the simulator does not).
pub const AUTOPILOT_PODS_PER_NODE: usize = 8;

/// The project of the key `bc-sim --gke-key-out` writes.
pub const SIM_PROJECT: &str = "bc-sim-project";

/// GKE's default API rate per project (research/gke.md §4: 3000 requests per minute).
pub const DEFAULT_REQUESTS_PER_MINUTE: u32 = 3000;

/// The model account holding `project`'s clusters.
fn account_key(project: &str) -> String {
    format!("gke/{project}")
}

/// A GKE error answer: HTTP code, canonical status, the `errors[].reason`, the message,
/// and an ErrorInfo reason when GKE sends one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GkeError {
    /// HTTP status.
    pub code: u16,
    /// `error.status` (`INVALID_ARGUMENT`, …).
    pub status: &'static str,
    /// `error.errors[0].reason` (`badRequest`, …).
    pub reason: &'static str,
    /// `error.message`.
    pub message: String,
    /// `google.rpc.ErrorInfo.reason`, if any.
    pub info: Option<&'static str>,
}

impl GkeError {
    fn new(
        code: u16,
        status: &'static str,
        reason: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self { code, status, reason, message: message.into(), info: None }
    }
    /// 400 INVALID_ARGUMENT `badRequest`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(400, "INVALID_ARGUMENT", "badRequest", message)
    }
    /// 400 FAILED_PRECONDITION `failedPrecondition`.
    pub fn precondition(message: impl Into<String>) -> Self {
        Self::new(400, "FAILED_PRECONDITION", "failedPrecondition", message)
    }
    /// 400 FAILED_PRECONDITION: the cluster runs `op` (GKE's words, research §3).
    pub fn busy(op: &str) -> Self {
        let mut e = Self::precondition(format!("Cluster is running incompatible operation {op}."));
        e.info = Some("CLUSTER_ALREADY_HAS_OPERATION");
        e
    }
    /// 404 NOT_FOUND `Not found: <path>.`.
    pub fn not_found(path: &str) -> Self {
        Self::new(404, "NOT_FOUND", "notFound", format!("Not found: {path}."))
    }
    /// 409 ALREADY_EXISTS `Already exists: <path>.`.
    pub fn exists(path: &str) -> Self {
        Self::new(409, "ALREADY_EXISTS", "alreadyExists", format!("Already exists: {path}."))
    }
    /// 409 ABORTED (an etag that is not the current one).
    pub fn aborted(message: impl Into<String>) -> Self {
        Self::new(409, "ABORTED", "aborted", message)
    }
    /// 401 UNAUTHENTICATED.
    pub fn unauthenticated() -> Self {
        Self::new(
            401,
            "UNAUTHENTICATED",
            "authError",
            "Request had invalid authentication credentials. Expected OAuth 2 access token, \
             login cookie or other valid authentication credential. See \
             https://developers.google.com/identity/sign-in/web/devconsole-project.",
        )
    }
    /// 403 PERMISSION_DENIED (the caller's account may not use the project).
    pub fn permission_denied(project: &str) -> Self {
        Self::new(
            403,
            "PERMISSION_DENIED",
            "forbidden",
            format!(
                "Required \"container.clusters.list\" permission(s) for \"projects/{project}\"."
            ),
        )
    }
    /// 403 PERMISSION_DENIED `forbidden` saying `message`: GKE's standing refusal of a
    /// call the caller may not make (a missing IAM permission, an organisation policy),
    /// answered again until the cause is removed.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "PERMISSION_DENIED", "forbidden", message)
    }
    /// 403 `Insufficient regional quota…` (a refusal, not a permission error).
    pub fn quota(region: &str) -> Self {
        Self::new(
            403,
            "PERMISSION_DENIED",
            "forbidden",
            format!(
                "Insufficient regional quota to satisfy request: resource \"CPUS\": request \
                 requires '4.0' and is short '4.0'. project has a quota of '24.0' with '0.0' \
                 available. View and manage quotas at \
                 https://console.cloud.google.com/iam-admin/quotas?usage=USED&project={region}."
            ),
        )
    }
    /// 429 RESOURCE_EXHAUSTED (the per-project request rate).
    pub fn rate_limited(project_number: &str) -> Self {
        Self::new(
            429,
            "RESOURCE_EXHAUSTED",
            "rateLimitExceeded",
            format!(
                "Quota exceeded for quota metric 'Requests' and limit 'Requests per minute' of \
                 service 'container.googleapis.com' for consumer 'project_number:{project_number}'."
            ),
        )
    }
    /// 500 INTERNAL.
    pub fn internal() -> Self {
        Self::new(500, "INTERNAL", "backendError", "Internal error encountered.")
    }
    /// 503 UNAVAILABLE.
    pub fn unavailable() -> Self {
        Self::new(503, "UNAVAILABLE", "backendError", "The service is currently unavailable.")
    }
}

/// A failure injected for the next requests to one GKE route (see [`Model::gke_inject`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GkeFault {
    /// 500 INTERNAL.
    ServerError,
    /// 503 UNAVAILABLE.
    Unavailable,
    /// 429 RESOURCE_EXHAUSTED.
    RateLimited,
    /// 403 `Insufficient regional quota…`.
    Quota,
    /// The create is accepted, and its operation fails with GCE_STOCKOUT (the pool stays
    /// in ERROR).
    Stockout,
}

/// Node-pool autoscaling (counts per zone, or `total_*` pool-wide).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Autoscaling {
    /// `enabled`.
    pub enabled: bool,
    /// `minNodeCount` (per zone).
    pub min: i64,
    /// `maxNodeCount` (per zone).
    pub max: i64,
    /// `totalMinNodeCount`.
    pub total_min: i64,
    /// `totalMaxNodeCount`.
    pub total_max: i64,
    /// `locationPolicy` (`BALANCED` | `ANY`).
    pub location_policy: String,
}

/// What a node pool request asks for (create, or the pools of a cluster create).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolSpec {
    /// `name`.
    pub name: String,
    /// `initialNodeCount` (per zone).
    pub initial_node_count: i64,
    /// `config.machineType`.
    pub machine_type: Option<String>,
    /// `config.diskSizeGb`.
    pub disk_size_gb: Option<i64>,
    /// `config.imageType`.
    pub image_type: Option<String>,
    /// `config.labels`.
    pub labels: BTreeMap<String, String>,
    /// `config.taints`.
    pub taints: Vec<Taint>,
    /// `config.resourceLabels`.
    pub resource_labels: BTreeMap<String, String>,
    /// `locations` (zones).
    pub locations: Vec<String>,
    /// `autoscaling`.
    pub autoscaling: Option<Autoscaling>,
    /// `management` (`autoUpgrade`, `autoRepair`).
    pub management: Option<(bool, bool)>,
    /// `version`.
    pub version: Option<String>,
    /// `maxPodsConstraint.maxPodsPerNode`.
    pub max_pods: Option<i64>,
}

/// A cluster's resource name, `projects/{project}/locations/{location}/clusters/{name}`:
/// what every call on one cluster (and its node pools) is addressed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterName<'a> {
    /// The project.
    pub project: &'a str,
    /// The location (zone or region).
    pub location: &'a str,
    /// The cluster's name.
    pub name: &'a str,
}

impl ClusterName<'_> {
    /// The resource name, as GKE's messages write it.
    pub fn path(&self) -> String {
        format!("projects/{}/locations/{}/clusters/{}", self.project, self.location, self.name)
    }
}

/// What a cluster create asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterSpec {
    /// `name`.
    pub name: String,
    /// `autopilot.enabled`.
    pub autopilot: bool,
    /// `releaseChannel.channel` (None: unset or UNSPECIFIED).
    pub channel: Option<String>,
    /// `initialClusterVersion`.
    pub version: Option<String>,
    /// `locations` (zones).
    pub locations: Vec<String>,
    /// `resourceLabels`.
    pub resource_labels: BTreeMap<String, String>,
    /// `nodePools`.
    pub node_pools: Vec<PoolSpec>,
    /// The deprecated `initialNodeCount` + `nodeConfig` (a pool `default-pool`).
    pub default_pool: Option<PoolSpec>,
}

/// An UpdateNodePool request: each field given replaces the pool's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolUpdate {
    /// `nodeVersion`.
    pub node_version: Option<String>,
    /// `imageType`.
    pub image_type: Option<String>,
    /// `labels.labels` (whole set).
    pub labels: Option<BTreeMap<String, String>>,
    /// `taints.taints` (whole set).
    pub taints: Option<Vec<Taint>>,
    /// `resourceLabels.labels` (whole set).
    pub resource_labels: Option<BTreeMap<String, String>>,
    /// `locations`.
    pub locations: Option<Vec<String>>,
    /// `machineType`.
    pub machine_type: Option<String>,
    /// `diskSizeGb`.
    pub disk_size_gb: Option<i64>,
    /// `etag`.
    pub etag: Option<String>,
}

/// A ClusterUpdate (one change per call).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterChange {
    /// `desiredMasterVersion`.
    pub master_version: Option<String>,
    /// `desiredNodeVersion` (with `desiredNodePoolId`).
    pub node_version: Option<(String, String)>,
    /// `desiredLocations`.
    pub locations: Option<Vec<String>>,
    /// `desiredReleaseChannel`.
    pub channel: Option<String>,
    /// `desiredNodePoolAutoscaling` (with `desiredNodePoolId`).
    pub pool_autoscaling: Option<(String, Autoscaling)>,
    /// `etag`.
    pub etag: Option<String>,
    /// Fields given that the simulator does not model (accepted as a no-op change).
    pub other: Vec<String>,
}

/// GKE's view of one of its node pools.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GkePool {
    /// `name`.
    pub name: String,
    /// The model pool's id.
    pub model_id: String,
    /// `config.machineType`.
    pub machine_type: String,
    /// `config.diskSizeGb`.
    pub disk_size_gb: i64,
    /// `config.imageType`.
    pub image_type: String,
    /// `config.resourceLabels` (GKE's `goog-*` included).
    pub resource_labels: BTreeMap<String, String>,
    /// `initialNodeCount` (never changes).
    pub initial_node_count: i64,
    /// The per-zone count the pool converges to.
    pub per_zone: i64,
    /// `locations`.
    pub locations: Vec<String>,
    /// `version`.
    pub version: String,
    /// `autoscaling`.
    pub autoscaling: Autoscaling,
    /// `management.autoUpgrade`.
    pub auto_upgrade: bool,
    /// `management.autoRepair`.
    pub auto_repair: bool,
    /// `maxPodsConstraint.maxPodsPerNode`.
    pub max_pods: i64,
    /// Bumped on every change (the `etag`).
    pub generation: u64,
    /// Its create failed (GCE_STOCKOUT): `ERROR` once that operation is done.
    pub failed: bool,
}

/// GKE's view of one of its clusters.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GkeCluster {
    /// The project.
    pub project: String,
    /// The location (zone or region).
    pub location: String,
    /// `name`.
    pub name: String,
    /// `autopilot.enabled`.
    pub autopilot: bool,
    /// `locations`: the zones its nodes go to.
    pub zones: Vec<String>,
    /// `releaseChannel.channel`, if enrolled.
    pub channel: Option<String>,
    /// `resourceLabels`.
    pub resource_labels: BTreeMap<String, String>,
    /// `labelFingerprint`: changes on every label change.
    pub label_fingerprint: String,
    /// `currentMasterVersion`.
    pub master_version: String,
    /// `initialClusterVersion`.
    pub initial_version: String,
    /// Node pools, in creation order.
    pub pools: Vec<GkePool>,
    /// `createTime`.
    pub create_time: Timestamp,
    /// Bumped on every change (the `etag`).
    pub generation: u64,
}

impl GkeCluster {
    /// `projects/<p>/locations/<l>/clusters/<c>`.
    pub fn path(&self) -> String {
        format!("projects/{}/locations/{}/clusters/{}", self.project, self.location, self.name)
    }
}

/// What an operation does when it ends.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Effect {
    /// The control plane runs `version`.
    MasterVersion(String),
    /// Pool `pool`'s nodes run `version`.
    NodeVersion {
        /// The pool.
        pool: String,
        /// The version.
        version: String,
    },
    /// The pool's create failed for lack of capacity.
    Stockout {
        /// The pool.
        pool: String,
    },
    /// The pool is gone.
    RemovePool {
        /// The pool.
        pool: String,
    },
}

/// A long-running operation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Operation {
    /// The bare `name` (`operation-<ms>-<uuid>`).
    pub name: String,
    /// The project.
    pub project: String,
    /// The location (of the cluster).
    pub location: String,
    /// `operationType`.
    pub op_type: String,
    /// The model cluster it acts on.
    pub cluster_id: String,
    /// `targetLink`'s path (`projects/…/clusters/c[/nodePools/np]`).
    pub target: String,
    /// `startTime`.
    pub start: Timestamp,
    /// When it is done.
    pub done_at: Timestamp,
    /// Failed: `error.message` and `statusMessage`.
    pub error: Option<String>,
    /// The failure's `clusterConditions[].code` (`GCE_STOCKOUT`).
    pub condition: Option<String>,
    /// What happens when it ends.
    pub effect: Option<Effect>,
    /// Whether `effect` has been applied.
    pub applied: bool,
    /// GKE started it itself (an auto-upgrade [`Model::gke_force_status`] stands for),
    /// not a caller: it runs until the status is forced again.
    #[serde(default)]
    pub by_gke: bool,
}

impl Operation {
    /// `PENDING` (its first second), `RUNNING` or `DONE` at `now`.
    pub fn status(&self, now: Timestamp) -> &'static str {
        if now >= self.done_at {
            "DONE"
        } else if now < self.start + time::Duration::seconds(1) {
            "PENDING"
        } else {
            "RUNNING"
        }
    }
}

/// GKE's part of the model.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Gke {
    keys: BTreeMap<String, IssuedKey>,
    tokens: BTreeMap<String, AccessToken>,
    clusters: BTreeMap<String, GkeCluster>,
    operations: Vec<Operation>,
    #[serde(skip)]
    windows: BTreeMap<String, (i64, u32)>,
    #[serde(skip)]
    faults: BTreeMap<String, VecDeque<GkeFault>>,
    #[serde(skip, default = "default_rate")]
    per_minute: u32,
    #[serde(skip)]
    denied: BTreeSet<String>,
    /// Standing refusals by route key (see [`Model::gke_refuse`]).
    #[serde(skip)]
    refusals: BTreeMap<String, GkeError>,
    /// How many operations of each `operationType` were started (what a test counts to
    /// say a lost answer started no second one; the log itself is pruned).
    #[serde(default)]
    started: BTreeMap<String, u64>,
}

fn default_rate() -> u32 {
    DEFAULT_REQUESTS_PER_MINUTE
}

impl Default for Gke {
    fn default() -> Self {
        Self {
            keys: BTreeMap::new(),
            tokens: BTreeMap::new(),
            clusters: BTreeMap::new(),
            operations: Vec::new(),
            windows: BTreeMap::new(),
            faults: BTreeMap::new(),
            per_minute: DEFAULT_REQUESTS_PER_MINUTE,
            denied: BTreeSet::new(),
            refusals: BTreeMap::new(),
            started: BTreeMap::new(),
        }
    }
}

/// The project number GKE puts in operation links (stable per project).
pub fn project_number(project: &str) -> String {
    format!("{}", 100_000_000_000 + crate::fnv1a(project) % 900_000_000_000)
}

/// A short hex fingerprint of `s` (labelFingerprint, etags).
fn fingerprint(s: &str) -> String {
    format!("{:016x}", crate::fnv1a(s))
}

fn labels_fingerprint(labels: &BTreeMap<String, String>, generation: u64) -> String {
    fingerprint(&format!("{generation}:{labels:?}"))[..8].to_owned()
}

const NAME_RULE: &str = "(?:[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?)";

/// Checks a cluster or node-pool name by GKE's rule (research §0), naming `field`.
pub fn check_name(field: &str, name: &str) -> Result<(), GkeError> {
    let b = name.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 40
        && b[0].is_ascii_lowercase()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[b.len() - 1] != b'-';
    if ok {
        return Ok(());
    }
    Err(GkeError::invalid(format!(
        "Invalid value for field \"{field}\": \"{name}\". Must be a match of regex '{NAME_RULE}' \
         (only alphanumerics and '-' allowed, must start with a letter and end with an \
         alphanumeric, and must be no longer than 40 characters)."
    )))
}

/// Checks GCP resource labels (≤ 64; keys 1–63 of `[a-z0-9_-]` starting with a letter;
/// values 0–63 of the same).
pub fn check_resource_labels(
    field: &str,
    labels: &BTreeMap<String, String>,
) -> Result<(), GkeError> {
    let allowed = |s: &str| {
        s.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-')
    };
    if labels.len() > 64 {
        return Err(GkeError::invalid(format!(
            "Invalid value for field \"{field}\": at most 64 labels are allowed."
        )));
    }
    for (k, v) in labels {
        let key_ok =
            !k.is_empty() && k.len() <= 63 && k.as_bytes()[0].is_ascii_lowercase() && allowed(k);
        if !key_ok {
            return Err(GkeError::invalid(format!(
                "Invalid value for field \"{field}\": label key \"{k}\" must be 1-63 characters \
                 of lowercase letters, digits, '_' and '-', starting with a lowercase letter."
            )));
        }
        if v.len() > 63 || !allowed(v) {
            return Err(GkeError::invalid(format!(
                "Invalid value for field \"{field}\": the value of label \"{k}\" must be at most \
                 63 characters of lowercase letters, digits, '_' and '-'."
            )));
        }
    }
    Ok(())
}

/// The unix seconds of `t`.
fn minute(t: Timestamp) -> i64 {
    t.unix_ms().div_euclid(60_000)
}

fn unsupported(v: &str) -> GkeError {
    GkeError::invalid(format!("Master version \"{v}\" is unsupported."))
}

/// The names of UpdateNodePoolRequest's fields GKE lists when none is given (#15848).
const POOL_UPDATE_FIELDS: &str = "['node_version', 'image_type', 'locations', \
    'workload_metadata_config', 'upgrade_settings', 'linux_node_config', 'kubelet_config', \
    'node_network_config', 'gcfs_config', 'gvnic', 'tags', 'taints', 'labels', \
    'resource_labels', 'logging_config', 'windows_node_config', 'machine_type', 'disk_type', \
    'disk_size_gb', 'confidential_nodes', 'fast_socket', 'resource_manager_tags', \
    'containerd_config', 'queued_provisioning', 'storage_pools', 'max_run_duration', \
    'flex_start', 'boot_disk', 'node_drain_config', 'consolidation_delay']";

impl Gke {
    /// The per-project request limit (per minute).
    pub fn per_minute(&self) -> u32 {
        self.per_minute
    }

    /// Sets the per-project request limit (per minute).
    pub fn set_per_minute(&mut self, per_minute: u32) {
        self.per_minute = per_minute;
    }

    /// Issues a service-account key for `project` (a fresh `private_key_id`).
    pub fn issue_key(&mut self, project: &str, kid: String) -> IssuedKey {
        let material = self.keys.len();
        let key = IssuedKey {
            client_email: format!(
                "bc-sim-{}@{project}.iam.gserviceaccount.com",
                self.keys.len() + 1
            ),
            project_id: project.to_owned(),
            kid: kid.clone(),
            material,
            deleted: false,
        };
        self.keys.insert(kid, key.clone());
        key
    }

    /// The GKE face's view of a model cluster, if it is a GKE cluster.
    pub fn cluster(&self, cluster_id: &str) -> Option<&GkeCluster> {
        self.clusters.get(cluster_id)
    }

    /// Sets a GKE cluster's control plane and node pool versions directly (tests: a
    /// cluster made at its channel's newest version is offered a newer one, as when a
    /// release comes out after it was made). Returns false if the cluster or the version
    /// is unknown.
    pub fn force_version(&mut self, cluster_id: &str, version: &str) -> bool {
        match self.clusters.get_mut(cluster_id) {
            Some(g) if catalog::VERSIONS.contains(&version) => {
                g.master_version = version.to_owned();
                for p in &mut g.pools {
                    p.version = version.to_owned();
                }
                true
            }
            _ => false,
        }
    }

    /// Drops every injected fault and standing refusal.
    pub(crate) fn clear_faults(&mut self) {
        self.faults.clear();
        self.refusals.clear();
    }

    /// Whether `bearer` is an access token the simulator minted that is valid at `now`.
    pub fn token_valid(&self, bearer: &str, now: Timestamp) -> bool {
        self.tokens.get(bearer).is_some_and(|t| now < t.expires_at)
    }

    /// The operation running on `cluster_id` at `now`, if any.
    fn running_op(&self, cluster_id: &str, now: Timestamp) -> Option<&Operation> {
        self.operations.iter().find(|o| o.cluster_id == cluster_id && o.status(now) != "DONE")
    }

    /// Applies the effects of operations that ended by `now`.
    pub(crate) fn settle(&mut self, accounts: &mut BTreeMap<String, Account>, now: Timestamp) {
        for op in self.operations.iter_mut().filter(|o| !o.applied && o.done_at <= now) {
            op.applied = true;
            let Some(effect) = op.effect.clone() else { continue };
            let Some(g) = self.clusters.get_mut(&op.cluster_id) else { continue };
            let account = accounts.get_mut(&account_key(&g.project));
            let model = account.and_then(|a| {
                a.settled = super::Settled::Unknown;
                a.clusters.iter_mut().find(|c| c.id == op.cluster_id)
            });
            match effect {
                Effect::MasterVersion(v) => {
                    if let Some(c) = model {
                        c.version = v.clone();
                    }
                    g.master_version = v;
                }
                Effect::NodeVersion { pool, version } => {
                    if let Some(p) = g.pools.iter_mut().find(|p| p.name == pool) {
                        p.version = version;
                    }
                }
                Effect::Stockout { pool } => {
                    if let Some(p) = g.pools.iter_mut().find(|p| p.name == pool) {
                        p.failed = true;
                    }
                }
                Effect::RemovePool { pool } => g.pools.retain(|p| p.name != pool),
            }
            g.generation += 1;
        }
        // GKE's view of a cluster goes with the model cluster.
        self.clusters.retain(|id, g| {
            accounts
                .get(&account_key(&g.project))
                .is_some_and(|a| a.clusters.iter().any(|c| &c.id == id))
        });
        // Keep the log bounded: operations done for an hour go.
        let horizon = now - time::Duration::hours(1);
        self.operations.retain(|o| !(o.applied && o.done_at < horizon));
        self.tokens.retain(|_, t| t.expires_at > horizon);
    }
}

/// The zone of the `index`th node of a pool spread over `zones`.
fn zone_of(zones: &[String], index: usize) -> &str {
    zones.get(index % zones.len().max(1)).map(String::as_str).unwrap_or_default()
}

/// The instance (node) name GKE gives the `index`th node of a pool:
/// `gke-<cluster>-<pool>-<8 hex>-<4>`, the prefix cut so the name fits GCE's 63.
fn instance_name(cluster: &str, pool: &GkePool, node_name: &str) -> String {
    let mut prefix = format!("gke-{cluster}-{}", pool.name);
    prefix.truncate(49);
    let group = format!("{:08x}", crate::fnv1a(&pool.model_id) & 0xffff_ffff);
    let tail: String =
        node_name.chars().rev().take(4).collect::<Vec<_>>().into_iter().rev().collect();
    format!("{}-{group}-{tail}", prefix.trim_end_matches('-'))
}

impl Model {
    /// The per-project request limit of the GKE face (per minute).
    pub fn gke_rate_limit(&self) -> u32 {
        self.gke.per_minute()
    }

    /// Sets the per-project request limit of the GKE face (per minute).
    pub fn set_gke_rate_limit(&mut self, per_minute: u32) {
        self.gke.per_minute = per_minute;
    }

    /// Issues a service-account key for `project` (see [`auth::IssuedKey::key_file`]).
    pub fn gke_issue_key(&mut self, project: &str) -> IssuedKey {
        // Google's key ids are 40 hex digits.
        let kid =
            format!("{}{}", self.ids.uuid(), self.ids.uuid()).replace('-', "")[..40].to_owned();
        self.gke.issue_key(project, kid)
    }

    /// Deletes a key: assertions it signs are refused from now on (tokens already minted
    /// stay valid until they expire, as Google's do).
    pub fn gke_delete_key(&mut self, kid: &str) -> bool {
        match self.gke.keys.get_mut(kid) {
            Some(k) => {
                k.deleted = true;
                true
            }
            None => false,
        }
    }

    /// Every key issued (deleted ones included).
    pub fn gke_keys(&self) -> Vec<IssuedKey> {
        self.gke.keys.values().cloned().collect()
    }

    /// The account whose calls are refused with 403 PERMISSION_DENIED (`Some`), or no
    /// longer (`None` for `email`… see [`Model::gke_allow`]).
    pub fn gke_deny(&mut self, client_email: &str) {
        self.gke.denied.insert(client_email.to_owned());
    }

    /// Lets a denied account in again.
    pub fn gke_allow(&mut self, client_email: &str) {
        self.gke.denied.remove(client_email);
    }

    /// The JWT-bearer grant: verifies `assertion` and mints an access token for an hour.
    pub fn gke_grant(
        &mut self,
        assertion: &str,
        audiences: &[&str],
        now: Timestamp,
    ) -> Result<(String, i64), GrantError> {
        let key = auth::verify(assertion, &self.gke.keys, audiences, now)?;
        let token = format!("ya29.sim-{}", self.ids.uuid().replace('-', ""));
        let expires_at = now + time::Duration::seconds(auth::TOKEN_LIFETIME_SECONDS);
        self.gke.tokens.insert(
            token.clone(),
            AccessToken { client_email: key.client_email.clone(), kid: key.kid, expires_at },
        );
        Ok((token, auth::TOKEN_LIFETIME_SECONDS))
    }

    /// Forgets every minted access token (as if all expired).
    pub fn gke_revoke_tokens(&mut self) {
        self.gke.tokens.clear();
    }

    /// [`Gke::force_version`] (tests).
    pub fn gke_force_version(&mut self, cluster_id: &str, version: &str) -> bool {
        self.gke.force_version(cluster_id, version)
    }

    /// Whether `bearer` is a valid access token at `now`.
    pub fn gke_token_valid(&self, bearer: &str, now: Timestamp) -> bool {
        self.gke.token_valid(bearer, now)
    }

    /// The next `n` requests to the GKE route `route_key` fail with `fault` (a stockout
    /// fails the next `n` creates' operations instead).
    pub fn gke_inject(&mut self, route_key: &str, n: usize, fault: GkeFault) {
        let q = self.gke.faults.entry(route_key.to_owned()).or_default();
        q.extend(std::iter::repeat_n(fault, n));
    }

    /// Every request to the GKE route `route_key` is answered with `refusal` (Google's
    /// envelope of its code, status, reason and message) until
    /// [`Model::gke_clear_refusal`]: GKE's counterpart of [`Model::refuse`], e.g.
    /// [`GkeError::forbidden`] for a permission the caller lacks. Injected faults of the
    /// route are answered first, as on DigitalOcean's face.
    pub fn gke_refuse(&mut self, route_key: &str, refusal: GkeError) {
        self.gke.refusals.insert(route_key.to_owned(), refusal);
    }

    /// Stops refusing the GKE route `route_key`.
    pub fn gke_clear_refusal(&mut self, route_key: &str) {
        self.gke.refusals.remove(route_key);
    }

    /// Admits one GKE request to `route_key` by `bearer` for `project`: counts it, checks
    /// the token (401) and the account's access (403), the project's request rate (429),
    /// then injected faults and standing refusals.
    pub fn gke_admit(
        &mut self,
        bearer: Option<&str>,
        project: Option<&str>,
        route_key: &str,
        now: Timestamp,
    ) -> Result<(), GkeError> {
        *self.counters.entry(route_key.to_owned()).or_default() += 1;
        let Some(token) =
            bearer.and_then(|b| self.gke.tokens.get(b)).filter(|t| now < t.expires_at)
        else {
            return Err(GkeError::unauthenticated());
        };
        let Some(project) = project else { return Ok(()) };
        if self.gke.denied.contains(&token.client_email) {
            return Err(GkeError::permission_denied(project));
        }
        let limit = self.gke.per_minute;
        let w = self.gke.windows.entry(project.to_owned()).or_insert((minute(now), 0));
        if w.0 != minute(now) {
            *w = (minute(now), 0);
        }
        w.1 += 1;
        if w.1 > limit {
            return Err(GkeError::rate_limited(&project_number(project)));
        }
        let fault = self.gke.faults.get_mut(route_key).and_then(|q| {
            // A stockout waits for the create it fails.
            if q.front() == Some(&GkeFault::Stockout) { None } else { q.pop_front() }
        });
        match fault {
            Some(GkeFault::ServerError) => Err(GkeError::internal()),
            Some(GkeFault::Unavailable) => Err(GkeError::unavailable()),
            Some(GkeFault::RateLimited) => Err(GkeError::rate_limited(&project_number(project))),
            Some(GkeFault::Quota) => Err(GkeError::quota(&project_number(project))),
            Some(GkeFault::Stockout) | None => match self.gke.refusals.get(route_key) {
                Some(refusal) => Err(refusal.clone()),
                None => Ok(()),
            },
        }
    }

    fn take_stockout(&mut self, route_key: &str) -> bool {
        match self.gke.faults.get_mut(route_key) {
            Some(q) if q.front() == Some(&GkeFault::Stockout) => {
                q.pop_front();
                true
            }
            _ => false,
        }
    }

    // ----- reads -----------------------------------------------------------------------

    /// The model cluster and GKE's view of `project/location/name` at `now`.
    fn gke_find(&mut self, at: &ClusterName<'_>, now: Timestamp) -> Result<String, GkeError> {
        self.advance(now);
        let account = self.accounts.get(&account_key(at.project));
        let found = self.gke.clusters.iter().find(|(id, g)| {
            g.location == at.location
                && g.name == at.name
                && g.project == at.project
                && account.is_some_and(|a| a.clusters.iter().any(|c| &c.id == *id))
        });
        found.map(|(id, _)| id.clone()).ok_or_else(|| GkeError::not_found(&at.path()))
    }

    /// A cluster as GKE shows it: its GKE view, the model cluster, and what shows at `now`.
    pub fn gke_cluster(
        &mut self,
        at: &ClusterName<'_>,
        now: Timestamp,
    ) -> Result<ClusterView, GkeError> {
        let id = self.gke_find(at, now)?;
        Ok(self.gke_view(&id, now))
    }

    fn gke_view(&self, id: &str, now: Timestamp) -> ClusterView {
        let g = self.gke.clusters[id].clone();
        let model = self
            .accounts
            .get(&account_key(&g.project))
            .and_then(|a| a.clusters.iter().find(|c| c.id == id))
            .cloned();
        let running = self.gke.running_op(id, now).cloned();
        let endpoint = self.cluster_endpoint(id);
        ClusterView { gke: g, model, running, endpoint, ca_pem: self.ca_pem() }
    }

    /// Every cluster of `project` in `location` (`-`: every location), in creation order.
    pub fn gke_clusters(
        &mut self,
        project: &str,
        location: &str,
        now: Timestamp,
    ) -> Result<Vec<ClusterView>, GkeError> {
        if location != "-" {
            check_location(location)?;
        }
        self.advance(now);
        let ids: Vec<String> = self
            .accounts
            .get(&account_key(project))
            .map(|a| a.clusters.iter().map(|c| c.id.clone()).collect())
            .unwrap_or_default();
        Ok(ids
            .iter()
            .filter(|id| {
                self.gke
                    .clusters
                    .get(*id)
                    .is_some_and(|g| location == "-" || g.location == location)
            })
            .map(|id| self.gke_view(id, now))
            .collect())
    }

    /// An operation by name (404 unknown in `project/location`).
    pub fn gke_operation(
        &mut self,
        project: &str,
        location: &str,
        name: &str,
        now: Timestamp,
    ) -> Result<Operation, GkeError> {
        self.advance(now);
        self.gke
            .operations
            .iter()
            .find(|o| {
                o.name == name
                    && o.project == project
                    && (location == "-" || o.location == location)
            })
            .cloned()
            .ok_or_else(|| {
                GkeError::not_found(&format!(
                    "projects/{project}/locations/{location}/operations/{name}"
                ))
            })
    }

    /// The operations of `project` in `location` (`-`: all).
    pub fn gke_operations(
        &mut self,
        project: &str,
        location: &str,
        now: Timestamp,
    ) -> Result<Vec<Operation>, GkeError> {
        if location != "-" {
            check_location(location)?;
        }
        self.advance(now);
        Ok(self
            .gke
            .operations
            .iter()
            .filter(|o| o.project == project && (location == "-" || o.location == location))
            .cloned()
            .collect())
    }

    /// Cancels an operation: done at once, failed as cancelled, its effect not applied.
    pub fn gke_cancel(
        &mut self,
        project: &str,
        location: &str,
        name: &str,
        now: Timestamp,
    ) -> Result<(), GkeError> {
        self.gke_operation(project, location, name, now)?;
        if let Some(o) =
            self.gke.operations.iter_mut().find(|o| o.name == name && o.status(now) != "DONE")
        {
            o.done_at = now;
            o.applied = true;
            o.error = Some("Operation was cancelled.".into());
        }
        Ok(())
    }

    // ----- changes ---------------------------------------------------------------------

    fn new_operation(
        &mut self,
        cluster_id: &str,
        op_type: &str,
        target: String,
        done_at: Timestamp,
        effect: Option<Effect>,
        now: Timestamp,
    ) -> Operation {
        let g = &self.gke.clusters[cluster_id];
        let op = Operation {
            name: format!("operation-{}-{}", now.unix_ms(), self.ids.uuid()),
            project: g.project.clone(),
            location: g.location.clone(),
            op_type: op_type.to_owned(),
            cluster_id: cluster_id.to_owned(),
            target,
            start: now,
            done_at,
            error: None,
            condition: None,
            effect,
            applied: false,
            by_gke: false,
        };
        self.gke.operations.push(op.clone());
        *self.gke.started.entry(op.op_type.clone()).or_default() += 1;
        op
    }

    /// How many operations of `op_type` (`UPGRADE_NODES`, …) the GKE face has started.
    pub fn gke_operations_started(&self, op_type: &str) -> u64 {
        self.gke.started.get(op_type).copied().unwrap_or(0)
    }

    /// The cluster `id` may start an operation: no other runs (400 FAILED_PRECONDITION
    /// naming it), and it is not being deleted.
    fn gke_idle(&self, id: &str, now: Timestamp) -> Result<(), GkeError> {
        if let Some(op) = self.gke.running_op(id, now) {
            return Err(GkeError::busy(&op.name));
        }
        Ok(())
    }

    fn gke_model_cluster(&mut self, id: &str) -> Option<&mut Cluster> {
        let project = self.gke.clusters.get(id)?.project.clone();
        let a = self.account_mut(&account_key(&project))?;
        a.clusters.iter_mut().find(|c| c.id == id)
    }

    /// Creates a cluster: `CREATE_CLUSTER`, done when its nodes run.
    pub fn gke_create_cluster(
        &mut self,
        project: &str,
        location: &str,
        spec: ClusterSpec,
        route_key: &str,
        now: Timestamp,
    ) -> Result<Operation, GkeError> {
        self.advance(now);
        let loc = check_location(location)?;
        check_name("cluster.name", &spec.name)?;
        check_resource_labels("cluster.resource_labels", &spec.resource_labels)?;
        let at = ClusterName { project, location, name: &spec.name };
        let path = at.path();
        if self.gke_find(&at, now).is_ok() {
            return Err(GkeError::exists(&path));
        }
        let zones =
            if spec.locations.is_empty() { loc.default_zones() } else { spec.locations.clone() };
        for z in &zones {
            if !loc.has_zone(z) {
                return Err(GkeError::invalid(format!(
                    "Invalid value for field \"cluster.locations\": zone \"{z}\" is not in region \"{}\".",
                    loc.region()
                )));
            }
        }
        let mut pools = spec.node_pools.clone();
        if spec.autopilot {
            if matches!(loc, Location::Zone(..)) {
                return Err(GkeError::invalid("Autopilot clusters must be regional clusters."));
            }
            if !pools.is_empty() || spec.default_pool.is_some() {
                return Err(GkeError::invalid(
                    "Autopilot clusters cannot be created with node pools; GKE manages their nodes.",
                ));
            }
        } else {
            if let Some(p) = spec.default_pool.clone() {
                if !pools.is_empty() {
                    return Err(GkeError::invalid(
                        "Cannot specify both node_pools and initial_node_count or node_config.",
                    ));
                }
                pools.push(p);
            }
            if pools.is_empty() {
                return Err(GkeError::invalid(
                    "Cluster.initial_node_count must be greater than zero.",
                ));
            }
        }
        // Version and channel (research §2): aliases within the channel; a version with no
        // channel joins the most mature channel offering it; neither: REGULAR's default.
        let channel = match (&spec.channel, &spec.version) {
            (Some(c), _) => Some(c.clone()),
            (None, Some(v)) if !v.is_empty() && v != "-" => {
                let resolved = catalog::resolve(v, catalog::VERSIONS, catalog::DEFAULT_VERSION)
                    .ok_or_else(|| unsupported(v))?;
                catalog::channel_of(resolved).map(str::to_owned)
            }
            _ => Some(catalog::DEFAULT_CHANNEL.to_owned()),
        };
        let requested = spec.version.clone().unwrap_or_default();
        let version = catalog::resolve(
            &requested,
            catalog::channel_versions(channel.as_deref()),
            catalog::channel_default(channel.as_deref()),
        )
        .ok_or_else(|| unsupported(&requested))?
        .to_owned();
        let mut names = BTreeSet::new();
        for p in &pools {
            if !names.insert(p.name.clone()) {
                return Err(GkeError::invalid(format!(
                    "Node pool names must be unique: \"{}\" is given twice.",
                    p.name
                )));
            }
        }
        let id = self.ids.uuid();
        let delays = self.delays;
        let ready_at = now + delays.cluster_provision;
        let stockout = self.take_stockout(route_key);
        let mut model_pools = Vec::new();
        let mut gke_pools = Vec::new();
        let mut done_at = ready_at;
        let pool_specs: Vec<PoolSpec> = if spec.autopilot {
            // Autopilot's nodes come as workloads need them: one hidden pool, empty.
            vec![PoolSpec {
                name: "default-pool".into(),
                initial_node_count: 0,
                ..PoolSpec::default()
            }]
        } else {
            pools
        };
        for p in &pool_specs {
            let (gp, mut mp) =
                self.gke_new_pool(p, &zones, channel.as_deref(), &version, spec.autopilot, now)?;
            let mut gp = gp;
            if stockout {
                gp.failed = true;
                mp.count = 0;
            }
            converge(&mut mp, &mut self.ids, &delays, ready_at, now);
            done_at = done_at.max(ready_at.max(now + delays.node_provision));
            gke_pools.push(gp);
            model_pools.push(mp);
        }
        let cluster = Cluster {
            id: id.clone(),
            name: spec.name.clone(),
            region: location.to_owned(),
            version: version.clone(),
            cluster_subnet: "10.4.0.0/14".into(),
            service_subnet: "34.118.224.0/20".into(),
            vpc_uuid: "default".into(),
            ipv4: String::new(),
            tags: Vec::new(),
            node_pools: model_pools,
            maintenance_policy: MaintenancePolicy::default(),
            auto_upgrade: true,
            surge_upgrade: true,
            ha: matches!(loc, Location::Region(_)),
            state: ClusterState::Provisioning,
            message: String::new(),
            created_at: now,
            updated_at: now,
            provisioned: false,
            api_token: format!("gke-sim-{}", self.ids.uuid().replace('-', "")),
            issued_tokens: Vec::new(),
            addons: BTreeMap::new(),
            isolated_workers: false,
            worker_subnet_uuid: String::new(),
            due: Some(ready_at),
            upgrade_to: None,
        };
        let g = GkeCluster {
            project: project.to_owned(),
            location: location.to_owned(),
            name: spec.name.clone(),
            autopilot: spec.autopilot,
            zones,
            channel,
            label_fingerprint: labels_fingerprint(&spec.resource_labels, 0),
            resource_labels: spec.resource_labels,
            master_version: version.clone(),
            initial_version: version,
            pools: gke_pools,
            create_time: now,
            generation: 1,
        };
        self.accounts.entry(account_key(project)).or_default().settled = super::Settled::Unknown;
        if let Some(a) = self.account_mut(&account_key(project)) {
            a.clusters.push(cluster);
        }
        self.gke.clusters.insert(id.clone(), g);
        self.allocate_endpoint(&id);
        let mut op = self.new_operation(&id, "CREATE_CLUSTER", path, done_at, None, now);
        if stockout {
            let pool =
                self.gke.clusters[&id].pools.first().map(|p| p.name.clone()).unwrap_or_default();
            op = self.fail_stockout(&op.name, &pool, location);
        }
        Ok(op)
    }

    fn fail_stockout(&mut self, op: &str, pool: &str, location: &str) -> Operation {
        let o = self.gke.operations.iter_mut().find(|o| o.name == op).expect("just made");
        o.error = Some(format!(
            "Try a different location, or try again later: Google Compute Engine does not have \
             enough resources available to fulfill request: {location}."
        ));
        o.condition = Some("GCE_STOCKOUT".into());
        o.effect = Some(Effect::Stockout { pool: pool.to_owned() });
        o.clone()
    }

    /// A pool as GKE and as the model keep it, from `p`.
    fn gke_new_pool(
        &mut self,
        p: &PoolSpec,
        cluster_zones: &[String],
        channel: Option<&str>,
        master: &str,
        autopilot: bool,
        now: Timestamp,
    ) -> Result<(GkePool, NodePool), GkeError> {
        check_name("node_pool.name", &p.name)?;
        let machine_type = p
            .machine_type
            .clone()
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| catalog::DEFAULT_MACHINE_TYPE.into());
        if !catalog::MACHINE_TYPES.contains(&machine_type.as_str()) {
            return Err(GkeError::invalid(format!(
                "Invalid value for field \"node_pool.config.machine_type\": \"{machine_type}\". Machine type does not exist."
            )));
        }
        let image_type = p
            .image_type
            .clone()
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| "COS_CONTAINERD".into());
        if !catalog::IMAGE_TYPES.contains(&image_type.as_str()) {
            return Err(GkeError::invalid(format!("Invalid image type \"{image_type}\".")));
        }
        check_resource_labels("node_pool.config.resource_labels", &p.resource_labels)?;
        if p.initial_node_count < 0 {
            return Err(GkeError::invalid(
                "Invalid value for field \"node_pool.initial_node_count\": must be non-negative.",
            ));
        }
        if !autopilot
            && p.initial_node_count == 0
            && !p.autoscaling.as_ref().is_some_and(|a| a.enabled)
        {
            return Err(GkeError::invalid(
                "Node_pool.initial_node_count must be greater than zero.",
            ));
        }
        let zones =
            if p.locations.is_empty() { cluster_zones.to_vec() } else { p.locations.clone() };
        let mut autoscaling = p.autoscaling.clone().unwrap_or_default();
        check_autoscaling(&autoscaling)?;
        if autoscaling.enabled && autoscaling.location_policy.is_empty() {
            autoscaling.location_policy = "BALANCED".into();
        }
        let (auto_upgrade, auto_repair) = p.management.unwrap_or((true, true));
        if let Some(c) = channel
            && (!auto_upgrade || !auto_repair)
        {
            return Err(GkeError::invalid(format!(
                "Auto_upgrade and auto_repair cannot be false when release_channel {c} is set."
            )));
        }
        let version = match p.version.as_deref() {
            None | Some("") | Some("-") => master.to_owned(),
            Some(v) => {
                let resolved =
                    catalog::resolve(v, catalog::VERSIONS, master).ok_or_else(|| unsupported(v))?;
                check_node_version(resolved, master)?;
                resolved.to_owned()
            }
        };
        let mut resource_labels = p.resource_labels.clone();
        resource_labels.insert("goog-gke-node-pool-provisioning-model".into(), "on-demand".into());
        let model = NodePool {
            id: self.ids.uuid(),
            name: p.name.clone(),
            size: machine_type.clone(),
            count: (p.initial_node_count.max(0) as u32) * zones.len() as u32,
            tags: Vec::new(),
            labels: Some(p.labels.clone()),
            taints: p.taints.clone(),
            auto_scale: autoscaling.enabled,
            min_nodes: node_limits(&autoscaling, zones.len() as i64).0.max(0) as u32,
            max_nodes: node_limits(&autoscaling, zones.len() as i64).1.max(0) as u32,
            nodes: Vec::new(),
            deleting: false,
            created_at: now,
        };
        let gke = GkePool {
            name: p.name.clone(),
            model_id: model.id.clone(),
            machine_type,
            disk_size_gb: p
                .disk_size_gb
                .filter(|d| *d > 0)
                .unwrap_or(catalog::DEFAULT_DISK_SIZE_GB),
            image_type,
            resource_labels,
            initial_node_count: p.initial_node_count,
            per_zone: p.initial_node_count,
            locations: zones,
            version,
            autoscaling,
            auto_upgrade,
            auto_repair,
            max_pods: p.max_pods.filter(|m| *m > 0).unwrap_or(if autopilot { 32 } else { 110 }),
            generation: 1,
            failed: false,
        };
        Ok((gke, model))
    }

    /// Deletes a cluster: STOPPING, then gone (404).
    pub fn gke_delete_cluster(
        &mut self,
        at: &ClusterName<'_>,
        now: Timestamp,
    ) -> Result<Operation, GkeError> {
        let id = self.gke_find(at, now)?;
        if let Some(op) = self.gke.running_op(&id, now) {
            if op.op_type == "DELETE_CLUSTER" {
                return Err(GkeError::busy(&op.name));
            }
            return Err(GkeError::busy(&op.name));
        }
        let delay = self.delays.cluster_delete;
        if let Some(c) = self.gke_model_cluster(&id) {
            c.state = ClusterState::Deleting;
            c.updated_at = now;
            c.due = Some(now + delay);
        }
        let path = self.gke.clusters[&id].path();
        Ok(self.new_operation(&id, "DELETE_CLUSTER", path, now + delay, None, now))
    }

    /// Upgrades the control plane (`UPGRADE_MASTER`): the version must be offered (by the
    /// channel when enrolled), and never below the current one's minor… (GKE refuses
    /// downgrades of the minor).
    pub fn gke_update_master(
        &mut self,
        at: &ClusterName<'_>,
        requested: &str,
        now: Timestamp,
    ) -> Result<Operation, GkeError> {
        let id = self.gke_find(at, now)?;
        self.gke_idle(&id, now)?;
        let g = &self.gke.clusters[&id];
        let current = g.master_version.clone();
        let version = catalog::resolve(
            requested,
            catalog::channel_versions(g.channel.as_deref()),
            catalog::channel_default(g.channel.as_deref()),
        )
        .ok_or_else(|| unsupported(requested))?
        .to_owned();
        let (cur, new) = (catalog::version_key(&current), catalog::version_key(&version));
        if new.get(..2) < cur.get(..2) {
            return Err(GkeError::invalid(format!(
                "Master cannot be downgraded from \"{current}\" to \"{version}\"."
            )));
        }
        let path = g.path();
        let delay = self.delays.cluster_upgrade;
        Ok(self.new_operation(
            &id,
            "UPGRADE_MASTER",
            path,
            now + delay,
            Some(Effect::MasterVersion(version)),
            now,
        ))
    }

    /// `PUT` a ClusterUpdate (one change per call).
    pub fn gke_update_cluster(
        &mut self,
        at: &ClusterName<'_>,
        change: ClusterChange,
        now: Timestamp,
    ) -> Result<Operation, GkeError> {
        let id = self.gke_find(at, now)?;
        let g = &self.gke.clusters[&id];
        if let Some(etag) = &change.etag
            && *etag != cluster_etag(g)
        {
            return Err(GkeError::aborted(format!(
                "Cluster \"{}\" has been modified since the etag was read; read it again.",
                g.name
            )));
        }
        let given = [
            change.master_version.is_some(),
            change.node_version.is_some(),
            change.locations.is_some(),
            change.channel.is_some(),
            change.pool_autoscaling.is_some(),
        ]
        .iter()
        .filter(|b| **b)
        .count()
            + change.other.len();
        if given == 0 {
            return Err(GkeError::invalid("Must specify a field to update."));
        }
        if given > 1 {
            return Err(GkeError::invalid(
                "Only one update can be applied to the cluster at a time.",
            ));
        }
        if let Some(v) = change.master_version {
            return self.gke_update_master(at, &v, now);
        }
        self.gke_idle(&id, now)?;
        let path = g.path();
        let channel = g.channel.clone();
        if let Some((pool, v)) = change.node_version {
            return self.gke_update_pool(
                at,
                &pool,
                PoolUpdate { node_version: Some(v), ..PoolUpdate::default() },
                now,
            );
        }
        if let Some((pool, a)) = change.pool_autoscaling {
            return self.gke_set_autoscaling(at, &pool, a, now);
        }
        if let Some(zones) = change.locations {
            let loc = check_location(at.location)?;
            if zones.is_empty() || zones.iter().any(|z| !loc.has_zone(z)) {
                return Err(GkeError::invalid(
                    "Invalid value for field \"update.desired_locations\": every location must be a zone of the cluster's region.",
                ));
            }
            if let Some(g) = self.gke.clusters.get_mut(&id) {
                g.zones = zones;
                g.generation += 1;
            }
        }
        if let Some(c) = change.channel {
            let c = (c != "UNSPECIFIED").then_some(c);
            if let Some(g) = self.gke.clusters.get_mut(&id) {
                g.channel = c;
                g.generation += 1;
            }
        }
        let _ = channel;
        let delay = self.delays.node_provision;
        Ok(self.new_operation(&id, "UPDATE_CLUSTER", path, now + delay, None, now))
    }

    /// `setResourceLabels`: the fingerprint must be the current one; every change makes a
    /// new one.
    pub fn gke_set_labels(
        &mut self,
        at: &ClusterName<'_>,
        labels: BTreeMap<String, String>,
        fingerprint: &str,
        now: Timestamp,
    ) -> Result<Operation, GkeError> {
        let id = self.gke_find(at, now)?;
        check_resource_labels("resource_labels", &labels)?;
        if fingerprint.is_empty() {
            return Err(GkeError::invalid(
                "Invalid value for field \"label_fingerprint\": a fingerprint is required; read the cluster for its current one.",
            ));
        }
        self.gke_idle(&id, now)?;
        let g = self.gke.clusters.get_mut(&id).expect("found");
        if fingerprint != g.label_fingerprint {
            return Err(GkeError::precondition(format!(
                "Labels could not be set due to fingerprint mismatch: expected {}, got {fingerprint}.",
                g.label_fingerprint
            )));
        }
        if labels != g.resource_labels {
            g.generation += 1;
            g.label_fingerprint = labels_fingerprint(&labels, g.generation);
            g.resource_labels = labels;
        }
        let path = g.path();
        let delay = self.delays.node_provision;
        Ok(self.new_operation(&id, "SET_LABELS", path, now + delay, None, now))
    }

    /// Refuses every node-pool call on an Autopilot cluster (listing included).
    fn gke_standard(&self, id: &str) -> Result<(), GkeError> {
        if self.gke.clusters[id].autopilot {
            return Err(GkeError::invalid("Autopilot node pools cannot be accessed or modified."));
        }
        Ok(())
    }

    /// The node pools of a cluster.
    pub fn gke_pools(
        &mut self,
        at: &ClusterName<'_>,
        now: Timestamp,
    ) -> Result<ClusterView, GkeError> {
        let id = self.gke_find(at, now)?;
        self.gke_standard(&id)?;
        Ok(self.gke_view(&id, now))
    }

    /// One node pool (404 unknown): the cluster's view and the pool's name.
    pub fn gke_pool(
        &mut self,
        at: &ClusterName<'_>,
        pool: &str,
        now: Timestamp,
    ) -> Result<ClusterView, GkeError> {
        let view = self.gke_pools(at, now)?;
        if !view.gke.pools.iter().any(|p| p.name == pool) {
            return Err(GkeError::not_found(&format!("{}/nodePools/{pool}", view.gke.path())));
        }
        Ok(view)
    }

    /// Creates a node pool: `CREATE_NODE_POOL`.
    pub fn gke_create_pool(
        &mut self,
        at: &ClusterName<'_>,
        spec: PoolSpec,
        route_key: &str,
        now: Timestamp,
    ) -> Result<Operation, GkeError> {
        let id = self.gke_find(at, now)?;
        self.gke_standard(&id)?;
        let g = self.gke.clusters[&id].clone();
        let path = format!("{}/nodePools/{}", g.path(), spec.name);
        check_name("node_pool.name", &spec.name)?;
        if g.pools.iter().any(|p| p.name == spec.name) {
            return Err(GkeError::exists(&path));
        }
        self.gke_idle(&id, now)?;
        for z in &spec.locations {
            if !g.zones.contains(z) && !check_location(at.location)?.has_zone(z) {
                return Err(GkeError::invalid(format!(
                    "Invalid value for field \"node_pool.locations\": zone \"{z}\" is not in the cluster's region."
                )));
            }
        }
        let (mut gp, mut mp) = self.gke_new_pool(
            &spec,
            &g.zones,
            g.channel.as_deref(),
            &g.master_version,
            false,
            now,
        )?;
        let stockout = self.take_stockout(route_key);
        if stockout {
            gp.failed = true;
            mp.count = 0;
        }
        let delays = self.delays;
        let ready_at = now;
        converge(&mut mp, &mut self.ids, &delays, ready_at, now);
        let pool_name = gp.name.clone();
        if let Some(c) = self.gke_model_cluster(&id) {
            c.node_pools.push(mp);
            c.updated_at = now;
        }
        let g = self.gke.clusters.get_mut(&id).expect("found");
        g.pools.push(gp);
        g.generation += 1;
        let op = self.new_operation(
            &id,
            "CREATE_NODE_POOL",
            path,
            now + delays.node_provision,
            None,
            now,
        );
        Ok(if stockout { self.fail_stockout(&op.name, &pool_name, at.location) } else { op })
    }

    fn pool_mut<'a>(g: &'a mut GkeCluster, pool: &str) -> Result<&'a mut GkePool, GkeError> {
        let path = format!("{}/nodePools/{pool}", g.path());
        g.pools.iter_mut().find(|p| p.name == pool).ok_or_else(|| GkeError::not_found(&path))
    }

    /// Brings the model pool to `per_zone × zones` nodes, its labels and taints.
    fn sync_model_pool(&mut self, id: &str, pool: &str, now: Timestamp) {
        let Some(gp) = self
            .gke
            .clusters
            .get(id)
            .and_then(|g| g.pools.iter().find(|p| p.name == pool))
            .cloned()
        else {
            return;
        };
        let delays = self.delays;
        let project = self.gke.clusters[id].project.clone();
        let Self { accounts, ids, .. } = self;
        let Some(a) = accounts.get_mut(&account_key(&project)) else { return };
        a.settled = super::Settled::Unknown;
        let Some(c) = a.clusters.iter_mut().find(|c| c.id == id) else { return };
        let ready_at = now;
        if let Some(mp) = c.node_pools.iter_mut().find(|p| p.id == gp.model_id) {
            let zones = gp.locations.len() as u32;
            mp.count = (gp.per_zone.max(0) as u32) * zones;
            mp.auto_scale = gp.autoscaling.enabled;
            let (min, max) = node_limits(&gp.autoscaling, i64::from(zones));
            mp.min_nodes = min.max(0) as u32;
            mp.max_nodes = max.max(0) as u32;
            mp.size = gp.machine_type.clone();
            converge(mp, ids, &delays, ready_at, now);
        }
    }

    /// `setSize`: `nodeCount` per zone.
    pub fn gke_set_size(
        &mut self,
        at: &ClusterName<'_>,
        pool: &str,
        count: i64,
        now: Timestamp,
    ) -> Result<Operation, GkeError> {
        let id = self.gke_find(at, now)?;
        self.gke_standard(&id)?;
        let g = self.gke.clusters.get_mut(&id).expect("found");
        let p = Self::pool_mut(g, pool)?;
        if count < 0 {
            return Err(GkeError::invalid(
                "Invalid value for field \"node_count\": must be non-negative.",
            ));
        }
        // GKE's behaviour on an autoscaled pool is unverified (research "must reproduce"
        // 13): refused, so nothing fights the autoscaler.
        if p.autoscaling.enabled {
            return Err(GkeError::precondition(format!(
                "Node pool \"{pool}\" has autoscaling enabled; disable it to set its size."
            )));
        }
        let path = format!("{}/nodePools/{pool}", g.path());
        self.gke_idle(&id, now)?;
        let g = self.gke.clusters.get_mut(&id).expect("found");
        let p = Self::pool_mut(g, pool)?;
        p.per_zone = count;
        p.generation += 1;
        self.sync_model_pool(&id, pool, now);
        let delay = self.delays.node_provision.max(self.delays.node_delete * 2);
        Ok(self.new_operation(&id, "SET_NODE_POOL_SIZE", path, now + delay, None, now))
    }

    /// `setAutoscaling`.
    pub fn gke_set_autoscaling(
        &mut self,
        at: &ClusterName<'_>,
        pool: &str,
        autoscaling: Autoscaling,
        now: Timestamp,
    ) -> Result<Operation, GkeError> {
        let id = self.gke_find(at, now)?;
        self.gke_standard(&id)?;
        check_autoscaling(&autoscaling)?;
        let g = self.gke.clusters.get_mut(&id).expect("found");
        Self::pool_mut(g, pool)?;
        let path = format!("{}/nodePools/{pool}", g.path());
        self.gke_idle(&id, now)?;
        let g = self.gke.clusters.get_mut(&id).expect("found");
        let p = Self::pool_mut(g, pool)?;
        // The count moves into the new bounds (as the autoscaler would), per zone: total
        // limits hold the pool's nodes in all, which the simulator keeps even per zone.
        if autoscaling.enabled {
            let zones = p.locations.len().max(1) as i64;
            let (min, max) = node_limits(&autoscaling, zones);
            let (min, max) = (div_ceil(min, zones), max / zones);
            p.per_zone = p.per_zone.clamp(min, max.max(min));
        }
        p.autoscaling = Autoscaling {
            location_policy: if autoscaling.enabled && autoscaling.location_policy.is_empty() {
                "BALANCED".into()
            } else {
                autoscaling.location_policy.clone()
            },
            ..autoscaling
        };
        p.generation += 1;
        self.sync_model_pool(&id, pool, now);
        let delay = self.delays.node_provision;
        Ok(self.new_operation(&id, "UPDATE_CLUSTER", path, now + delay, None, now))
    }

    /// `PUT` a node pool: each field given replaces the pool's (labels, taints and
    /// resource labels wholesale); none known → 400 naming them; a stale etag → ABORTED.
    pub fn gke_update_pool(
        &mut self,
        at: &ClusterName<'_>,
        pool: &str,
        u: PoolUpdate,
        now: Timestamp,
    ) -> Result<Operation, GkeError> {
        let id = self.gke_find(at, now)?;
        self.gke_standard(&id)?;
        let g = self.gke.clusters.get_mut(&id).expect("found");
        let master = g.master_version.clone();
        let p = Self::pool_mut(g, pool)?;
        if let Some(etag) = &u.etag
            && *etag != pool_etag(p)
        {
            return Err(GkeError::aborted(format!(
                "Node pool \"{pool}\" has been modified since the etag was read; read it again."
            )));
        }
        let known = u.node_version.is_some()
            || u.image_type.is_some()
            || u.labels.is_some()
            || u.taints.is_some()
            || u.resource_labels.is_some()
            || u.locations.is_some()
            || u.machine_type.is_some()
            || u.disk_size_gb.is_some();
        if !known {
            return Err(GkeError::invalid(format!(
                "At least one of {POOL_UPDATE_FIELDS} must be specified."
            )));
        }
        let version = match u.node_version.as_deref() {
            None => None,
            Some("" | "-") => Some(master.clone()),
            Some(v) => {
                let resolved = catalog::resolve(v, catalog::VERSIONS, &master)
                    .ok_or_else(|| unsupported(v))?;
                check_node_version(resolved, &master)?;
                Some(resolved.to_owned())
            }
        };
        if let Some(m) = &u.machine_type
            && !catalog::MACHINE_TYPES.contains(&m.as_str())
        {
            return Err(GkeError::invalid(format!(
                "Invalid value for field \"machine_type\": \"{m}\". Machine type does not exist."
            )));
        }
        if let Some(l) = &u.resource_labels {
            check_resource_labels("resource_labels", l)?;
        }
        let path = format!("{}/nodePools/{pool}", g.path());
        self.gke_idle(&id, now)?;
        let g = self.gke.clusters.get_mut(&id).expect("found");
        let loc = Location::parse(&g.location);
        let p = Self::pool_mut(g, pool)?;
        if let Some(zones) = &u.locations {
            if zones.is_empty() || zones.iter().any(|z| !loc.is_some_and(|l| l.has_zone(z))) {
                return Err(GkeError::invalid(
                    "Invalid value for field \"locations\": every location must be a zone of the cluster's region.",
                ));
            }
            p.locations = zones.clone();
        }
        if let Some(t) = &u.image_type {
            p.image_type = t.clone();
        }
        if let Some(m) = &u.machine_type {
            p.machine_type = m.clone();
        }
        if let Some(d) = u.disk_size_gb {
            p.disk_size_gb = d;
        }
        if let Some(l) = &u.resource_labels {
            let mut l = l.clone();
            l.insert("goog-gke-node-pool-provisioning-model".into(), "on-demand".into());
            p.resource_labels = l;
        }
        p.generation += 1;
        let model_id = p.model_id.clone();
        if let Some(c) = self.gke_model_cluster(&id)
            && let Some(mp) = c.node_pools.iter_mut().find(|mp| mp.id == model_id)
        {
            // Pool labels and taints reach every node without recreating it.
            if let Some(l) = u.labels {
                mp.labels = Some(l);
            }
            if let Some(t) = u.taints {
                mp.taints = t;
            }
        }
        self.sync_model_pool(&id, pool, now);
        let delay = self.delays.node_provision;
        let effect = version.map(|version| Effect::NodeVersion { pool: pool.to_owned(), version });
        Ok(self.new_operation(&id, "UPGRADE_NODES", path, now + delay, effect, now))
    }

    /// Deletes a node pool: `DELETE_NODE_POOL`, STOPPING until its nodes are gone.
    pub fn gke_delete_pool(
        &mut self,
        at: &ClusterName<'_>,
        pool: &str,
        now: Timestamp,
    ) -> Result<Operation, GkeError> {
        let id = self.gke_find(at, now)?;
        self.gke_standard(&id)?;
        let g = self.gke.clusters.get_mut(&id).expect("found");
        let model_id = Self::pool_mut(g, pool)?.model_id.clone();
        let path = format!("{}/nodePools/{pool}", g.path());
        self.gke_idle(&id, now)?;
        let delays = self.delays;
        if let Some(c) = self.gke_model_cluster(&id)
            && let Some(mp) = c.node_pools.iter_mut().find(|mp| mp.id == model_id)
        {
            mp.deleting = true;
            for n in mp.nodes.iter_mut().filter(|n| !n.state.leaving()) {
                start_leaving(n, false, &delays, now);
            }
        }
        let done = now + delays.node_delete * 2;
        Ok(self.new_operation(
            &id,
            "DELETE_NODE_POOL",
            path,
            done,
            Some(Effect::RemovePool { pool: pool.to_owned() }),
            now,
        ))
    }

    /// Whether `cluster_id` is a GKE Autopilot cluster (whose nodes follow its workloads,
    /// [`Self::gke_autopilot_demand`]).
    pub fn gke_is_autopilot(&self, cluster_id: &str) -> bool {
        self.gke.clusters.get(cluster_id).is_some_and(|g| g.autopilot)
    }

    /// An Autopilot cluster's nodes follow its workloads: one node per
    /// [`AUTOPILOT_PODS_PER_NODE`] workload pods (none for none), made and removed as
    /// `workload_pods` changes. Other clusters are left alone.
    pub fn gke_autopilot_demand(&mut self, cluster_id: &str, workload_pods: usize, now: Timestamp) {
        let Some(g) = self.gke.clusters.get(cluster_id).filter(|g| g.autopilot) else { return };
        let Some(pool) = g.pools.first() else { return };
        let (project, model_id) = (g.project.clone(), pool.model_id.clone());
        let want = workload_pods.div_ceil(AUTOPILOT_PODS_PER_NODE) as u32;
        let delays = self.delays;
        let Self { accounts, ids, .. } = self;
        let Some(a) = accounts.get_mut(&account_key(&project)) else { return };
        let Some(c) = a.clusters.iter_mut().find(|c| c.id == cluster_id) else { return };
        let ready_at = c.ready_at(now);
        let Some(mp) = c.node_pools.iter_mut().find(|p| p.id == model_id) else { return };
        if mp.count != want {
            a.settled = super::Settled::Unknown;
            mp.count = want;
            converge(mp, ids, &delays, ready_at, now);
        }
    }

    /// The model id of GKE cluster `cluster`, given as GKE's `id` (the model's without
    /// dashes) or as the model's.
    pub(crate) fn gke_id_of(&self, cluster: &str) -> Option<String> {
        self.gke
            .clusters
            .keys()
            .find(|id| *id == cluster || id.replace('-', "") == cluster)
            .cloned()
    }

    /// Puts GKE cluster `cluster` (GKE's `id` or the model's) into `status`, as GKE
    /// itself does (research/gke.md "must reproduce" 6), until the status is forced
    /// again: `RECONCILING` is GKE at work on it of its own accord — an auto-upgrade,
    /// an `UPGRADE_MASTER` operation the operations list shows and no caller started, so
    /// every change meanwhile is refused as "running incompatible operation"; `DEGRADED`
    /// (needs the user's action) and `ERROR` (unusable) show `message` as the cluster's
    /// `statusMessage` and condition; `RUNNING` ends GKE's own operation and clears the
    /// message. The DigitalOcean face's counterpart is [`Model::force_cluster_state`].
    /// Returns false for an unknown cluster, another status, or `RECONCILING` while a
    /// caller's operation runs (GKE starts nothing then).
    pub fn gke_force_status(
        &mut self,
        cluster: &str,
        status: &str,
        message: &str,
        now: Timestamp,
    ) -> bool {
        self.advance(now);
        let Some(id) = self.gke_id_of(cluster) else { return false };
        let state = match status {
            "RUNNING" | "RECONCILING" => ClusterState::Running,
            "DEGRADED" => ClusterState::Degraded,
            "ERROR" => ClusterState::Error,
            _ => return false,
        };
        let caller_busy = self.gke.running_op(&id, now).is_some_and(|o| !o.by_gke);
        if status == "RECONCILING" && caller_busy {
            return false;
        }
        for o in self.gke.operations.iter_mut().filter(|o| o.cluster_id == id && o.by_gke) {
            if o.status(now) != "DONE" {
                o.done_at = now;
                o.applied = true;
            }
        }
        if status == "RECONCILING" {
            let path = self.gke.clusters[&id].path();
            // Running until forced again (a century stands for "not on its own").
            let until = now + time::Duration::days(36_500);
            let name = self.new_operation(&id, "UPGRADE_MASTER", path, until, None, now).name;
            if let Some(o) = self.gke.operations.iter_mut().find(|o| o.name == name) {
                o.by_gke = true;
            }
            // A caller started none of it.
            if let Some(n) = self.gke.started.get_mut("UPGRADE_MASTER") {
                *n = n.saturating_sub(1);
            }
        }
        let message = if status == "RUNNING" { "" } else { message };
        if let Some(g) = self.gke.clusters.get_mut(&id) {
            g.generation += 1;
        }
        self.force_cluster_state(&id, state, message)
    }

    /// GKE's cluster autoscaler moves node pool `pool` of cluster `cluster` (GKE's `id`
    /// or the model's) to `nodes` nodes in all — what it does when pods wait for room or
    /// nodes stand idle (research/gke.md "must reproduce" 13): only on a pool with
    /// autoscaling enabled, only within its limits (`min/maxNodeCount` per zone, or
    /// `totalMin/MaxNodeCount` for the pool), by resizing the pool's instance groups
    /// directly — no operation, and the NodePool (which has no size field) and its etag
    /// stay as they are; the nodes come and go as any resize's. The simulator keeps the
    /// same count in every zone of a pool, so `nodes` must be a multiple of its zones.
    /// The DigitalOcean face's counterpart is a node-pool update of `count` within
    /// `min_nodes..max_nodes`.
    pub fn gke_autoscale(
        &mut self,
        cluster: &str,
        pool: &str,
        nodes: u32,
        now: Timestamp,
    ) -> Result<(), String> {
        self.advance(now);
        let id = self.gke_id_of(cluster).ok_or_else(|| format!("no GKE cluster {cluster}"))?;
        let g = self.gke.clusters.get_mut(&id).expect("found");
        let p = g
            .pools
            .iter_mut()
            .find(|p| p.name == pool)
            .ok_or_else(|| format!("no node pool {pool} in cluster {cluster}"))?;
        let a = &p.autoscaling;
        if !a.enabled {
            return Err(format!("node pool {pool} has autoscaling off: the autoscaler leaves it"));
        }
        let zones = p.locations.len().max(1) as i64;
        let nodes = i64::from(nodes);
        let (min, max) = node_limits(a, zones);
        if nodes < min || nodes > max {
            return Err(format!(
                "{nodes} nodes lie outside node pool {pool}'s limits {min}..{max}"
            ));
        }
        if nodes % zones != 0 {
            return Err(format!("{nodes} nodes do not spread evenly over {zones} zones"));
        }
        p.per_zone = nodes / zones;
        self.sync_model_pool(&id, pool, now);
        Ok(())
    }

    // ----- the Kubernetes face's view ----------------------------------------------------

    /// The Nodes of GKE cluster `id` as its Kubernetes API shows them (`None`: not GKE's).
    pub(crate) fn gke_nodes(&self, c: &Cluster) -> Option<Vec<SimNode>> {
        let g = self.gke.clusters.get(&c.id)?;
        let region = Location::parse(&g.location).map(|l| l.region()).unwrap_or_default();
        let mut out = Vec::new();
        for gp in &g.pools {
            let Some(mp) = c.node_pools.iter().find(|p| p.id == gp.model_id) else { continue };
            for (i, n) in mp.nodes.iter().enumerate() {
                if n.name.is_empty() {
                    continue;
                }
                let zone = zone_of(&gp.locations, i);
                let name = instance_name(&g.name, gp, &n.name);
                let mut labels = mp.labels.clone().unwrap_or_default();
                for (k, v) in [
                    ("kubernetes.io/hostname", name.as_str()),
                    ("kubernetes.io/os", "linux"),
                    ("kubernetes.io/arch", "amd64"),
                    ("beta.kubernetes.io/os", "linux"),
                    ("beta.kubernetes.io/arch", "amd64"),
                    ("node.kubernetes.io/instance-type", gp.machine_type.as_str()),
                    ("beta.kubernetes.io/instance-type", gp.machine_type.as_str()),
                    ("topology.kubernetes.io/region", region),
                    ("topology.kubernetes.io/zone", zone),
                    ("failure-domain.beta.kubernetes.io/region", region),
                    ("failure-domain.beta.kubernetes.io/zone", zone),
                    ("topology.gke.io/zone", zone),
                    ("cloud.google.com/gke-nodepool", gp.name.as_str()),
                    ("cloud.google.com/gke-os-distribution", "cos"),
                    ("cloud.google.com/gke-container-runtime", "containerd"),
                ] {
                    labels.insert(k.into(), v.into());
                }
                let h = crate::fnv1a(&n.id);
                out.push(SimNode {
                    provider_id: format!("gce://{}/{zone}/{name}", g.project),
                    name,
                    labels,
                    taints: mp.taints.clone(),
                    ready: n.state == super::NodeState::Running,
                    size: gp.machine_type.clone(),
                    internal_ip: format!("10.128.{}.{}", (h >> 8) & 0xff, h & 0xff),
                    external_ip: format!(
                        "34.{}.{}.{}",
                        16 + (h >> 16) % 200,
                        (h >> 8) & 0xff,
                        h & 0xff
                    ),
                    created_at: n.created_at,
                    kubelet_version: format!("v{}", gp.version),
                });
            }
        }
        Some(out)
    }

    /// The Kubernetes version GKE cluster `id`'s API reports (`v1.35.6-gke.1062000`).
    pub(crate) fn gke_kubernetes_version(&self, id: &str) -> Option<String> {
        self.gke.clusters.get(id).map(|g| format!("v{}", g.master_version))
    }
}

/// What the GKE face renders a cluster from.
#[derive(Debug, Clone)]
pub struct ClusterView {
    /// GKE's view.
    pub gke: GkeCluster,
    /// The model cluster (its state, nodes).
    pub model: Option<Cluster>,
    /// The operation running on it, if any.
    pub running: Option<Operation>,
    /// Its Kubernetes API's URL.
    pub endpoint: String,
    /// The CA its API's certificate chains to (PEM).
    pub ca_pem: String,
}

impl ClusterView {
    /// `status` at the time it was read.
    pub fn status(&self) -> &'static str {
        let Some(c) = &self.model else { return "STOPPING" };
        match self.running.as_ref().map(|o| o.op_type.as_str()) {
            Some("CREATE_CLUSTER") => return "PROVISIONING",
            Some("DELETE_CLUSTER") => return "STOPPING",
            Some(_) => return "RECONCILING",
            None => {}
        }
        match c.state {
            ClusterState::Provisioning => "PROVISIONING",
            ClusterState::Running => "RUNNING",
            ClusterState::Upgrading => "RECONCILING",
            ClusterState::Degraded => "DEGRADED",
            ClusterState::Error => "ERROR",
            ClusterState::Deleting | ClusterState::Deleted => "STOPPING",
        }
    }

    /// A pool's `status`.
    pub fn pool_status(&self, pool: &GkePool) -> &'static str {
        let target = format!("{}/nodePools/{}", self.gke.path(), pool.name);
        match self.running.as_ref() {
            Some(o) if o.op_type == "CREATE_CLUSTER" => return "PROVISIONING",
            Some(o) if o.target == target => {
                return match o.op_type.as_str() {
                    "CREATE_NODE_POOL" => "PROVISIONING",
                    "DELETE_NODE_POOL" => "STOPPING",
                    _ => "RECONCILING",
                };
            }
            _ => {}
        }
        if pool.failed { "ERROR" } else { "RUNNING" }
    }

    /// The cluster's etag.
    pub fn etag(&self) -> String {
        cluster_etag(&self.gke)
    }
}

/// A cluster's etag (changes with every change to it).
pub fn cluster_etag(g: &GkeCluster) -> String {
    fingerprint(&format!("{}:{}", g.path(), g.generation))
}

/// A node pool's etag.
pub fn pool_etag(p: &GkePool) -> String {
    fingerprint(&format!("{}:{}:{}", p.name, p.model_id, p.generation))
}

/// The location named `name` (400 unknown).
pub fn check_location(name: &str) -> Result<Location, GkeError> {
    Location::parse(name).ok_or_else(|| {
        GkeError::invalid(format!("Location \"{name}\" is not a valid zone or region."))
    })
}

/// The least and most nodes autoscaling `a` allows a pool over `zones` zones in all: its
/// total limits, or its per-zone ones times the zones.
fn node_limits(a: &Autoscaling, zones: i64) -> (i64, i64) {
    if a.total_min != 0 || a.total_max != 0 {
        (a.total_min, a.total_max)
    } else {
        (a.min * zones, a.max * zones)
    }
}

/// `n / d` rounded up, for non-negative `n` and positive `d`.
fn div_ceil(n: i64, d: i64) -> i64 {
    (n + d - 1).div_euclid(d)
}

fn check_autoscaling(a: &Autoscaling) -> Result<(), GkeError> {
    if !a.enabled {
        return Ok(());
    }
    let per_zone = a.min != 0 || a.max != 0;
    let total = a.total_min != 0 || a.total_max != 0;
    if per_zone && total {
        return Err(GkeError::invalid(
            "Autoscaling limits must be set either per zone (min/max_node_count) or in total (total_min/max_node_count), not both.",
        ));
    }
    let (min, max) = if total { (a.total_min, a.total_max) } else { (a.min, a.max) };
    if min < 0 || max < 1 || min > max {
        return Err(GkeError::invalid(format!(
            "Invalid value for field \"autoscaling\": min_node_count ({min}) must be at least 0 and at most max_node_count ({max}), which must be at least 1."
        )));
    }
    Ok(())
}

fn check_node_version(node: &str, master: &str) -> Result<(), GkeError> {
    if catalog::version_key(node) > catalog::version_key(master) {
        return Err(GkeError::invalid(format!(
            "desired node version \"{node}\" cannot be greater than current master version \"{master}\"."
        )));
    }
    Ok(())
}

/// The taint effect named or numbered `v` (`NO_SCHEDULE` or 1, …).
pub fn taint_effect(v: &serde_json::Value) -> Option<TaintEffect> {
    match (v.as_str(), v.as_i64()) {
        (Some("NO_SCHEDULE"), _) | (_, Some(1)) => Some(TaintEffect::NoSchedule),
        (Some("PREFER_NO_SCHEDULE"), _) | (_, Some(2)) => Some(TaintEffect::PreferNoSchedule),
        (Some("NO_EXECUTE"), _) | (_, Some(3)) => Some(TaintEffect::NoExecute),
        _ => None,
    }
}
