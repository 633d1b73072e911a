//! DigitalOcean's JSON shapes (research/digitalocean.md §4, §5) and their translation to
//! and from the provider-neutral port types.
//!
//! Invariant: parsing a response never fails on what the provider may legitimately send —
//! unknown states become `Unknown(..)`, `null` lists are empty, the LB `region` may be an
//! object or a slug, droplet ids may be strings or numbers, timestamps may carry
//! fractional seconds — and the tags DigitalOcean adds to clusters and node pools (`k8s`,
//! `k8s:*`, `k8s-worker`) never reach the caller, while a load balancer's tags (it adds
//! none) come back exactly as sent, so desired and observed state compare equal.

use std::collections::BTreeMap;

use bc_domain::Timestamp;
use bc_domain::model::{
    Domain, ForwardingRule, GlobalSettings, HealthCheck, HealthCheckProtocol, Protocol,
    StickySessions,
};
use bc_domain::policy::{Taint, TaintEffect};
use bc_domain::ports::{
    AssociatedResources, CreateClusterRequest, KubernetesVersion, LoadBalancerRequest,
    MaintenanceWindow, NamedResource, NodePoolRequest, ProviderCluster, ProviderClusterState,
    ProviderLoadBalancer, ProviderLoadBalancerKind, ProviderLoadBalancerStatus, ProviderNode,
    ProviderNodePool, ProviderNodeState, ProviderOptions, ProviderTargets, UpdateClusterRequest,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------
// Shared helpers

/// Whether DigitalOcean added this tag itself (it re-adds them, so they are not ours to
/// diff or send back).
pub(crate) fn is_server_tag(tag: &str) -> bool {
    tag == "k8s" || tag.starts_with("k8s:") || tag == "k8s-worker"
}

fn strip_tags(tags: Option<Vec<String>>) -> Vec<String> {
    tags.unwrap_or_default().into_iter().filter(|t| !is_server_tag(t)).collect()
}

/// Whether DOKS added this label itself (a key under `doks.digitalocean.com`): it is
/// DigitalOcean's, not a difference for the plan to undo, and only this adapter knows
/// the domain (no provider is named above the adapters).
fn is_server_label(key: &str) -> bool {
    const DOKS: &str = "doks.digitalocean.com";
    key.split_once('/').is_some_and(|(prefix, _)| {
        prefix == DOKS || prefix.strip_suffix(DOKS).is_some_and(|p| p.ends_with('.'))
    })
}

fn strip_labels(labels: Option<BTreeMap<String, String>>) -> BTreeMap<String, String> {
    labels.unwrap_or_default().into_iter().filter(|(k, _)| !is_server_label(k)).collect()
}

fn parse_time(s: Option<&str>) -> Option<Timestamp> {
    // RFC 3339 with or without fractional seconds; an unparsable time is dropped, not fatal.
    s.filter(|s| !s.is_empty()).and_then(|s| Timestamp::parse_rfc3339(s).ok())
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

/// A droplet id as DOKS sends it (a string) or as LBs do (a number).
fn id_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// `links.pages` of a list response.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Links {
    #[serde(default)]
    pub pages: Option<Pages>,
}

/// `meta` of a list response.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Meta {
    #[serde(default)]
    pub total: Option<u64>,
}

/// One page of a paginated list (research §3): the objects under their plural key, the
/// page links and `meta.total`.
#[derive(Debug, Deserialize)]
#[serde(bound = "T: Deserialize<'de>")]
pub(crate) struct ListPage<T> {
    #[serde(default, alias = "kubernetes_clusters", alias = "load_balancers")]
    pub items: Option<Vec<T>>,
    #[serde(default)]
    pub links: Option<Links>,
    #[serde(default)]
    pub meta: Option<Meta>,
}

impl<T> ListPage<T> {
    /// Its objects, `links.pages.next` and `meta.total`.
    pub(crate) fn into_page(self) -> crate::digitalocean::Page<T> {
        crate::digitalocean::Page {
            items: self.items.unwrap_or_default(),
            next: self.links.and_then(|l| l.pages).and_then(|p| p.next),
            total: self.meta.and_then(|m| m.total),
        }
    }
}

/// The page links; only `next` matters to a client that reads to the end.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Pages {
    #[serde(default)]
    pub next: Option<String>,
}

// ---------------------------------------------------------------------------------------
// Kubernetes: responses

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Status {
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireNode {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub status: Option<Status>,
    #[serde(default)]
    pub droplet_id: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireTaint {
    #[serde(default, alias = "Key")]
    pub key: String,
    #[serde(default, alias = "Value")]
    pub value: Option<String>,
    #[serde(default, alias = "Effect")]
    pub effect: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireNodePool {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub size: String,
    #[serde(default)]
    pub count: Option<u32>,
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub taints: Option<Vec<WireTaint>>,
    #[serde(default)]
    pub auto_scale: Option<bool>,
    #[serde(default)]
    pub min_nodes: Option<u32>,
    #[serde(default)]
    pub max_nodes: Option<u32>,
    #[serde(default)]
    pub nodes: Option<Vec<WireNode>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireCluster {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub region: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub status: Option<Status>,
    #[serde(default)]
    pub endpoint: Option<String>,
    #[serde(default)]
    pub ha: Option<bool>,
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    #[serde(default)]
    pub auto_upgrade: Option<bool>,
    #[serde(default)]
    pub surge_upgrade: Option<bool>,
    #[serde(default)]
    pub maintenance_policy: Option<WireMaintenance>,
    #[serde(default)]
    pub node_pools: Option<Vec<WireNodePool>>,
    #[serde(default)]
    pub created_at: Option<String>,
}

/// `maintenance_policy`, in responses (with the read-only `duration`) and requests.
#[derive(Debug, Default, Deserialize, Serialize)]
pub(crate) struct WireMaintenance {
    #[serde(default)]
    pub start_time: Option<String>,
    #[serde(default)]
    pub day: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ClusterEnvelope {
    pub kubernetes_cluster: WireCluster,
}

#[derive(Debug, Deserialize)]
pub(crate) struct NodePoolEnvelope {
    pub node_pool: WireNodePool,
}

#[derive(Debug, Deserialize)]
pub(crate) struct NodePoolList {
    #[serde(default)]
    pub node_pools: Option<Vec<WireNodePool>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireNamed {
    #[serde(default)]
    pub id: Value,
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireAssociated {
    #[serde(default)]
    pub load_balancers: Option<Vec<WireNamed>>,
    #[serde(default)]
    pub volumes: Option<Vec<WireNamed>>,
    #[serde(default)]
    pub volume_snapshots: Option<Vec<WireNamed>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireVersion {
    #[serde(default)]
    pub slug: String,
    #[serde(default)]
    pub kubernetes_version: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Upgrades {
    #[serde(default)]
    pub available_upgrade_versions: Option<Vec<WireVersion>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireSlug {
    #[serde(default)]
    pub slug: String,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireOptions {
    #[serde(default)]
    pub regions: Option<Vec<WireSlug>>,
    #[serde(default)]
    pub versions: Option<Vec<WireVersion>>,
    #[serde(default)]
    pub sizes: Option<Vec<WireSlug>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct OptionsEnvelope {
    #[serde(default)]
    pub options: Option<WireOptions>,
}

pub(crate) fn cluster_state(s: Option<&str>) -> ProviderClusterState {
    match s.unwrap_or("") {
        "provisioning" => ProviderClusterState::Provisioning,
        "running" => ProviderClusterState::Running,
        "degraded" => ProviderClusterState::Degraded,
        "error" => ProviderClusterState::Error,
        "upgrading" => ProviderClusterState::Upgrading,
        "deleting" => ProviderClusterState::Deleting,
        "deleted" => ProviderClusterState::Deleted,
        other => ProviderClusterState::Unknown(other.to_owned()),
    }
}

pub(crate) fn node_state(s: Option<&str>) -> ProviderNodeState {
    match s.unwrap_or("") {
        "provisioning" => ProviderNodeState::Provisioning,
        "running" => ProviderNodeState::Running,
        "draining" => ProviderNodeState::Draining,
        "deleting" => ProviderNodeState::Deleting,
        other => ProviderNodeState::Unknown(other.to_owned()),
    }
}

fn taint_effect(s: &str) -> Option<TaintEffect> {
    // godo sends taints without JSON tags, so match the effect case-insensitively too.
    match s.to_ascii_lowercase().as_str() {
        "noschedule" => Some(TaintEffect::NoSchedule),
        "prefernoschedule" => Some(TaintEffect::PreferNoSchedule),
        "noexecute" => Some(TaintEffect::NoExecute),
        _ => None,
    }
}

impl WireNode {
    pub(crate) fn into_port(self) -> ProviderNode {
        let status = self.status.unwrap_or_default();
        ProviderNode {
            id: self.id,
            name: self.name.unwrap_or_default(),
            state: node_state(status.state.as_deref()),
            droplet_id: self.droplet_id.as_ref().and_then(id_string),
        }
    }
}

impl WireNodePool {
    pub(crate) fn into_port(self) -> ProviderNodePool {
        let taints = self
            .taints
            .unwrap_or_default()
            .into_iter()
            .filter_map(|t| match taint_effect(&t.effect) {
                Some(effect) => Some(Taint { key: t.key, value: t.value.unwrap_or_default(), effect }),
                None => {
                    // A taint effect this build does not know: leave it out rather than
                    // fail the whole observation.
                    tracing::warn!(effect = %t.effect, "ignoring node pool taint with unknown effect");
                    None
                }
            })
            .collect();
        ProviderNodePool {
            id: self.id,
            name: self.name,
            size: self.size,
            count: self.count.unwrap_or(0),
            auto_scale: self.auto_scale.unwrap_or(false),
            min_nodes: self.min_nodes.unwrap_or(0),
            max_nodes: self.max_nodes.unwrap_or(0),
            labels: strip_labels(self.labels),
            taints,
            tags: strip_tags(self.tags),
            version: None,
            nodes: self.nodes.unwrap_or_default().into_iter().map(WireNode::into_port).collect(),
        }
    }
}

impl WireCluster {
    pub(crate) fn into_port(self) -> ProviderCluster {
        let status = self.status.unwrap_or_default();
        ProviderCluster {
            // DOKS has no other mode.
            mode: bc_domain::model::ClusterMode::Standard,
            id: self.id,
            name: self.name,
            region: self.region.unwrap_or_default(),
            version: self.version.unwrap_or_default(),
            state: cluster_state(status.state.as_deref()),
            message: non_empty(status.message),
            endpoint: non_empty(self.endpoint),
            high_availability: self.ha.unwrap_or(false),
            tags: strip_tags(self.tags),
            auto_upgrade: self.auto_upgrade.unwrap_or(false),
            surge_upgrade: self.surge_upgrade.unwrap_or(false),
            maintenance_window: self.maintenance_policy.and_then(|m| {
                Some(MaintenanceWindow {
                    start_time: non_empty(m.start_time)?,
                    day: non_empty(m.day)?,
                })
            }),
            node_pools: self
                .node_pools
                .unwrap_or_default()
                .into_iter()
                .map(WireNodePool::into_port)
                .collect(),
            // DOKS clusters are standard: their nodes are their pools'.
            nodes: None,
            // DOKS reports every pool's nodes itself.
            nodes_unread: None,
            created_at: parse_time(self.created_at.as_deref()),
        }
    }
}

impl WireNamed {
    fn into_port(self) -> Option<NamedResource> {
        Some(NamedResource { id: id_string(&self.id)?, name: self.name.unwrap_or_default() })
    }
}

impl WireAssociated {
    pub(crate) fn into_port(self) -> AssociatedResources {
        let list = |v: Option<Vec<WireNamed>>| {
            v.unwrap_or_default().into_iter().filter_map(WireNamed::into_port).collect()
        };
        AssociatedResources {
            load_balancers: list(self.load_balancers),
            // DigitalOcean lists the load balancers its controllers made (tagged with
            // the cluster) and deletes the ones a selective delete names.
            retained_load_balancers: Vec::new(),
            volumes: list(self.volumes),
            volume_snapshots: list(self.volume_snapshots),
        }
    }
}

impl WireVersion {
    pub(crate) fn into_port(self) -> KubernetesVersion {
        // Older payloads lack `kubernetes_version`: derive it from the slug (`1.32.1-do.0`).
        let kubernetes_version =
            self.kubernetes_version.filter(|v| !v.is_empty()).unwrap_or_else(|| {
                self.slug.split_once("-do").map_or(self.slug.clone(), |(v, _)| v.to_owned())
            });
        KubernetesVersion { slug: self.slug, kubernetes_version }
    }
}

impl WireOptions {
    pub(crate) fn into_port(self) -> ProviderOptions {
        let slugs = |v: Option<Vec<WireSlug>>| {
            v.unwrap_or_default().into_iter().map(|s| s.slug).filter(|s| !s.is_empty()).collect()
        };
        ProviderOptions {
            regions: slugs(self.regions),
            versions: self
                .versions
                .unwrap_or_default()
                .into_iter()
                .map(WireVersion::into_port)
                .collect(),
            sizes: slugs(self.sizes),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Kubernetes: requests

#[derive(Debug, Serialize)]
pub(crate) struct TaintOut<'a> {
    pub key: &'a str,
    pub value: &'a str,
    pub effect: &'static str,
}

/// A node pool in a create or update body.
#[derive(Debug, Serialize)]
pub(crate) struct NodePoolOut<'a> {
    pub name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    pub tags: Vec<&'a str>,
    pub labels: &'a BTreeMap<String, String>,
    pub taints: Vec<TaintOut<'a>>,
    pub auto_scale: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_nodes: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_nodes: Option<u32>,
}

impl<'a> NodePoolOut<'a> {
    /// The body of a pool create (`with_size`) or update (size is immutable, not sent).
    pub(crate) fn from_request(req: &'a NodePoolRequest, with_size: bool) -> Self {
        let (min, max) = match req.auto_scale {
            Some((min, max)) => (Some(min), Some(max)),
            None => (None, None),
        };
        // A create needs a count; an autoscaled pool starts at its minimum (at least 1,
        // since DOKS needs a node to schedule system pods on a new cluster).
        let count = match (req.count, with_size) {
            (Some(c), _) => Some(c),
            (None, true) => Some(min.unwrap_or(1).max(1)),
            (None, false) => None,
        };
        Self {
            name: &req.name,
            size: with_size.then_some(req.size.as_str()),
            count,
            tags: req.tags.iter().map(String::as_str).filter(|t| !is_server_tag(t)).collect(),
            labels: &req.labels,
            taints: req
                .taints
                .iter()
                .map(|t| TaintOut { key: &t.key, value: &t.value, effect: t.effect.as_str() })
                .collect(),
            auto_scale: req.auto_scale.is_some(),
            min_nodes: min,
            max_nodes: max,
        }
    }
}

/// A cluster create body.
#[derive(Debug, Serialize)]
pub(crate) struct CreateClusterOut<'a> {
    pub name: &'a str,
    pub region: &'a str,
    pub version: &'a str,
    pub ha: bool,
    pub tags: Vec<&'a str>,
    pub node_pools: Vec<NodePoolOut<'a>>,
}

impl<'a> CreateClusterOut<'a> {
    pub(crate) fn from_request(req: &'a CreateClusterRequest) -> Self {
        Self {
            name: &req.name,
            region: &req.region,
            version: &req.version,
            ha: req.high_availability,
            tags: req.tags.iter().map(String::as_str).filter(|t| !is_server_tag(t)).collect(),
            node_pools: req.node_pools.iter().map(|p| NodePoolOut::from_request(p, true)).collect(),
        }
    }
}

/// A cluster update body (research §4.4): name and the whole tag list always; the rest
/// only when asked, so what is left out keeps its value.
#[derive(Debug, Serialize)]
pub(crate) struct UpdateClusterOut<'a> {
    pub name: &'a str,
    pub tags: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ha: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_upgrade: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub surge_upgrade: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maintenance_policy: Option<WireMaintenance>,
}

impl<'a> UpdateClusterOut<'a> {
    pub(crate) fn from_request(req: &'a UpdateClusterRequest) -> Self {
        Self {
            name: &req.name,
            tags: req.tags.iter().map(String::as_str).filter(|t| !is_server_tag(t)).collect(),
            ha: req.high_availability,
            auto_upgrade: req.auto_upgrade,
            surge_upgrade: req.surge_upgrade,
            maintenance_policy: req.maintenance_window.as_ref().map(|w| WireMaintenance {
                start_time: Some(w.start_time.clone()),
                day: Some(w.day.clone()),
            }),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Load balancers

/// A region as an LB response carries it (an object), or as a request does (a slug).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum WireRegion {
    Object {
        #[serde(default)]
        slug: Option<String>,
    },
    Slug(String),
}

impl WireRegion {
    fn slug(self) -> Option<String> {
        match self {
            WireRegion::Object { slug } => non_empty(slug),
            WireRegion::Slug(s) => non_empty(Some(s)),
        }
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireRule {
    #[serde(default)]
    pub entry_protocol: String,
    #[serde(default)]
    pub entry_port: u32,
    #[serde(default)]
    pub target_protocol: String,
    #[serde(default)]
    pub target_port: u32,
    #[serde(default)]
    pub certificate_id: Option<String>,
    #[serde(default)]
    pub tls_passthrough: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireHealthCheck {
    #[serde(default)]
    pub protocol: Option<String>,
    #[serde(default)]
    pub port: Option<u32>,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub check_interval_seconds: Option<u32>,
    #[serde(default)]
    pub response_timeout_seconds: Option<u32>,
    #[serde(default)]
    pub healthy_threshold: Option<u32>,
    #[serde(default)]
    pub unhealthy_threshold: Option<u32>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireSticky {
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub cookie_name: Option<String>,
    #[serde(default)]
    pub cookie_ttl_seconds: Option<u32>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireCdn {
    #[serde(default)]
    pub is_enabled: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireGlb {
    #[serde(default)]
    pub target_protocol: Option<String>,
    #[serde(default)]
    pub target_port: Option<u32>,
    #[serde(default)]
    pub cdn: Option<WireCdn>,
    #[serde(default)]
    pub region_priorities: Option<BTreeMap<String, u32>>,
    #[serde(default)]
    pub failover_threshold: Option<u32>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireDomain {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub is_managed: Option<bool>,
    #[serde(default)]
    pub certificate_id: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireLoadBalancer {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub region: Option<WireRegion>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub ip: Option<String>,
    #[serde(default)]
    pub size_unit: Option<u32>,
    #[serde(default)]
    pub forwarding_rules: Option<Vec<WireRule>>,
    #[serde(default)]
    pub health_check: Option<WireHealthCheck>,
    #[serde(default)]
    pub sticky_sessions: Option<WireSticky>,
    #[serde(default)]
    pub droplet_ids: Option<Vec<Value>>,
    #[serde(default)]
    pub tag: Option<String>,
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    #[serde(default)]
    pub redirect_http_to_https: Option<bool>,
    #[serde(default)]
    pub glb_settings: Option<WireGlb>,
    #[serde(default)]
    pub domains: Option<Vec<WireDomain>>,
    #[serde(default)]
    pub target_load_balancer_ids: Option<Vec<String>>,
    #[serde(default)]
    pub created_at: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct LoadBalancerEnvelope {
    pub load_balancer: WireLoadBalancer,
}

fn protocol(s: &str) -> Option<Protocol> {
    // Responses have been seen upper-cased (`"HTTP"` in glb_settings).
    match s.to_ascii_lowercase().as_str() {
        "http" => Some(Protocol::Http),
        "https" => Some(Protocol::Https),
        "http2" => Some(Protocol::Http2),
        "http3" => Some(Protocol::Http3),
        "tcp" => Some(Protocol::Tcp),
        "udp" => Some(Protocol::Udp),
        _ => None,
    }
}

fn health_protocol(s: &str) -> Option<HealthCheckProtocol> {
    match s.to_ascii_lowercase().as_str() {
        "http" => Some(HealthCheckProtocol::Http),
        "https" => Some(HealthCheckProtocol::Https),
        "tcp" => Some(HealthCheckProtocol::Tcp),
        _ => None,
    }
}

fn health_protocol_str(p: HealthCheckProtocol) -> &'static str {
    match p {
        HealthCheckProtocol::Http => "http",
        HealthCheckProtocol::Https => "https",
        HealthCheckProtocol::Tcp => "tcp",
    }
}

pub(crate) fn lb_status(s: Option<&str>) -> ProviderLoadBalancerStatus {
    match s.unwrap_or("") {
        "new" => ProviderLoadBalancerStatus::New,
        "active" => ProviderLoadBalancerStatus::Active,
        "errored" => ProviderLoadBalancerStatus::Errored,
        other => ProviderLoadBalancerStatus::Unknown(other.to_owned()),
    }
}

/// The provider's kind as it spells it; an absent type is its default, `REGIONAL`.
pub(crate) fn lb_kind(s: Option<&str>) -> ProviderLoadBalancerKind {
    match s {
        Some("REGIONAL") | Some("") | None => ProviderLoadBalancerKind::Regional,
        Some("REGIONAL_NETWORK") => ProviderLoadBalancerKind::RegionalNetwork,
        Some("GLOBAL") => ProviderLoadBalancerKind::Global,
        Some(other) => ProviderLoadBalancerKind::Unknown(other.to_owned()),
    }
}

/// The `type` a body sends: exactly the kind (kept from what was observed on update).
pub(crate) fn lb_kind_str(kind: &ProviderLoadBalancerKind) -> &str {
    match kind {
        ProviderLoadBalancerKind::Regional => "REGIONAL",
        ProviderLoadBalancerKind::RegionalNetwork => "REGIONAL_NETWORK",
        ProviderLoadBalancerKind::Global => "GLOBAL",
        ProviderLoadBalancerKind::Unknown(s) => s,
    }
}

impl WireHealthCheck {
    fn into_port(self) -> HealthCheck {
        // Missing fields take the provider's defaults, which HealthCheck::default() mirrors.
        let d = HealthCheck::default();
        HealthCheck {
            protocol: self.protocol.as_deref().and_then(health_protocol).unwrap_or(d.protocol),
            port: self.port.unwrap_or(d.port),
            path: non_empty(self.path).unwrap_or(d.path),
            check_interval_seconds: self.check_interval_seconds.unwrap_or(d.check_interval_seconds),
            response_timeout_seconds: self
                .response_timeout_seconds
                .unwrap_or(d.response_timeout_seconds),
            healthy_threshold: self.healthy_threshold.unwrap_or(d.healthy_threshold),
            unhealthy_threshold: self.unhealthy_threshold.unwrap_or(d.unhealthy_threshold),
        }
    }
}

impl WireLoadBalancer {
    pub(crate) fn into_port(self) -> ProviderLoadBalancer {
        let kind = lb_kind(self.kind.as_deref());
        let forwarding_rules = self
            .forwarding_rules
            .unwrap_or_default()
            .into_iter()
            .filter_map(|r| {
                let (Some(entry), Some(target)) =
                    (protocol(&r.entry_protocol), protocol(&r.target_protocol))
                else {
                    tracing::warn!(
                        entry = %r.entry_protocol,
                        target = %r.target_protocol,
                        "ignoring forwarding rule with unknown protocol"
                    );
                    return None;
                };
                Some(ForwardingRule {
                    entry_protocol: entry,
                    entry_port: r.entry_port,
                    target_protocol: target,
                    target_port: r.target_port,
                    certificate_id: non_empty(r.certificate_id),
                    tls_passthrough: r.tls_passthrough.unwrap_or(false),
                })
            })
            .collect();
        // "none" is the provider's default; report it as absent so it diffs equal to a
        // request that left sticky sessions out.
        let sticky_sessions = self.sticky_sessions.and_then(|s| match s.kind.as_deref() {
            None | Some("") | Some("none") => None,
            Some(kind) => Some(StickySessions {
                kind: kind.to_owned(),
                cookie_name: non_empty(s.cookie_name),
                cookie_ttl_seconds: s.cookie_ttl_seconds.filter(|t| *t > 0),
            }),
        });
        let lb_ids = self.target_load_balancer_ids.unwrap_or_default();
        let tag = non_empty(self.tag);
        let droplets: Vec<u64> = self
            .droplet_ids
            .unwrap_or_default()
            .iter()
            .filter_map(|v| match v {
                Value::Number(n) => n.as_u64(),
                Value::String(s) => s.parse().ok(),
                _ => None,
            })
            .collect();
        let targets = if !lb_ids.is_empty() {
            ProviderTargets::LoadBalancerIds(lb_ids)
        } else if let Some(tag) = tag {
            ProviderTargets::Tag(tag)
        } else if droplets.is_empty() && kind.is_global() {
            ProviderTargets::LoadBalancerIds(Vec::new())
        } else {
            ProviderTargets::DropletIds(droplets)
        };
        let global = kind.is_global();
        let global_settings = self.glb_settings.filter(|_| global).and_then(|g| {
            Some(GlobalSettings {
                target_protocol: protocol(g.target_protocol.as_deref().unwrap_or("http"))?,
                target_port: g.target_port.unwrap_or(80),
                cdn: g.cdn.and_then(|c| c.is_enabled).unwrap_or(false),
                region_priorities: g.region_priorities.filter(|m| !m.is_empty()),
                failover_threshold: g.failover_threshold.filter(|t| *t > 0),
            })
        });
        let domains = self
            .domains
            .unwrap_or_default()
            .into_iter()
            .map(|d| Domain {
                name: d.name,
                is_managed: d.is_managed.unwrap_or(false),
                certificate_id: non_empty(d.certificate_id),
            })
            .collect();
        ProviderLoadBalancer {
            id: self.id,
            status: lb_status(self.status.as_deref()),
            ip: non_empty(self.ip),
            spec: LoadBalancerRequest {
                name: self.name,
                kind,
                region: if global { None } else { self.region.and_then(WireRegion::slug) },
                // A GLOBAL balancer's one rule is implied by its settings (the document
                // requires at least one rule on every balancer, a request sends none).
                forwarding_rules: if global { Vec::new() } else { forwarding_rules },
                health_check: self.health_check.map(WireHealthCheck::into_port).unwrap_or_default(),
                sticky_sessions,
                targets,
                // Global load balancers cannot be scaled; their echoed size_unit is noise.
                size_unit: if global { None } else { self.size_unit },
                redirect_http_to_https: self.redirect_http_to_https.unwrap_or(false),
                global_settings,
                domains,
                // DigitalOcean adds no tags to load balancers: `k8s:<cluster id>` is one a
                // caller set (it associates the balancer with a cluster), so it is kept,
                // and observed tags compare equal to the requested ones.
                tags: self.tags.unwrap_or_default(),
            },
            created_at: parse_time(self.created_at.as_deref()),
        }
    }
}

/// The whole load balancer body, for create and for update alike: a PUT resets every
/// field it leaves out, so nothing may be left out.
pub(crate) fn load_balancer_body(req: &LoadBalancerRequest) -> Value {
    let global = req.kind.is_global();
    let mut body = serde_json::Map::new();
    body.insert("name".into(), json!(req.name));
    body.insert("type".into(), json!(lb_kind_str(&req.kind)));
    if !global && let Some(region) = &req.region {
        body.insert("region".into(), json!(region));
    }
    if !global || !req.forwarding_rules.is_empty() {
        let rules: Vec<Value> = req
            .forwarding_rules
            .iter()
            .map(|r| {
                let mut rule = json!({
                    "entry_protocol": r.entry_protocol.as_str(),
                    "entry_port": r.entry_port,
                    "target_protocol": r.target_protocol.as_str(),
                    "target_port": r.target_port,
                    "tls_passthrough": r.tls_passthrough,
                });
                if let Some(c) = &r.certificate_id {
                    rule["certificate_id"] = json!(c);
                }
                rule
            })
            .collect();
        body.insert("forwarding_rules".into(), Value::Array(rules));
    }
    let h = &req.health_check;
    body.insert(
        "health_check".into(),
        json!({
            "protocol": health_protocol_str(h.protocol),
            "port": h.port,
            "path": h.path,
            "check_interval_seconds": h.check_interval_seconds,
            "response_timeout_seconds": h.response_timeout_seconds,
            "healthy_threshold": h.healthy_threshold,
            "unhealthy_threshold": h.unhealthy_threshold,
        }),
    );
    let sticky = match &req.sticky_sessions {
        Some(s) => {
            let mut v = json!({ "type": s.kind });
            if let Some(n) = &s.cookie_name {
                v["cookie_name"] = json!(n);
            }
            if let Some(t) = s.cookie_ttl_seconds {
                v["cookie_ttl_seconds"] = json!(t);
            }
            v
        }
        // Sent explicitly: the whole object, even where it equals the default.
        None => json!({ "type": "none" }),
    };
    body.insert("sticky_sessions".into(), sticky);
    match &req.targets {
        ProviderTargets::Tag(tag) => {
            body.insert("tag".into(), json!(tag));
        }
        ProviderTargets::DropletIds(ids) => {
            body.insert("droplet_ids".into(), json!(ids));
        }
        ProviderTargets::LoadBalancerIds(ids) => {
            body.insert("target_load_balancer_ids".into(), json!(ids));
        }
    }
    if !global && let Some(size_unit) = req.size_unit {
        body.insert("size_unit".into(), json!(size_unit));
    }
    body.insert("redirect_http_to_https".into(), json!(req.redirect_http_to_https));
    if global {
        if let Some(g) = &req.global_settings {
            let mut glb = json!({
                "target_protocol": g.target_protocol.as_str(),
                "target_port": g.target_port,
                "cdn": { "is_enabled": g.cdn },
            });
            if let Some(p) = &g.region_priorities {
                glb["region_priorities"] = json!(p);
            }
            if let Some(t) = g.failover_threshold {
                glb["failover_threshold"] = json!(t);
            }
            body.insert("glb_settings".into(), glb);
        }
        let domains: Vec<Value> = req
            .domains
            .iter()
            .map(|d| {
                let mut v = json!({ "name": d.name, "is_managed": d.is_managed });
                if let Some(c) = &d.certificate_id {
                    v["certificate_id"] = json!(c);
                }
                v
            })
            .collect();
        body.insert("domains".into(), Value::Array(domains));
    }
    // Sent as asked: DigitalOcean adds no tags to load balancers, and `k8s:<cluster id>`
    // is how a caller associates one with a cluster (destroy_with_associated_resources).
    body.insert("tags".into(), json!(req.tags));
    Value::Object(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_parses_nulls_unknowns_and_fractional_times() {
        let c: ClusterEnvelope = serde_json::from_value(json!({"kubernetes_cluster": {
            "id": "c1", "name": "n", "region": "nyc1", "version": "1.32.1-do.0",
            "status": {"state": "hibernating", "message": ""},
            "endpoint": "", "ha": null, "tags": ["k8s", "k8s:c1", "team"],
            "created_at": "2019-11-09T11:50:28.889080521Z",
            "node_pools": [{"id": "p1", "name": "p", "size": "s-1vcpu-2gb", "count": 1,
                "labels": null, "taints": null, "tags": ["k8s", "k8s:worker", "k8s:c1", "x"],
                "nodes": [{"id": "n1", "name": "", "status": {"state": "running"}, "droplet_id": "205545370"},
                          {"id": "n2", "status": {"state": "rebooting"}, "droplet_id": 7}]}]
        }}))
        .unwrap();
        let c = c.kubernetes_cluster.into_port();
        assert_eq!(c.state, ProviderClusterState::Unknown("hibernating".into()));
        assert_eq!(c.message, None);
        assert_eq!(c.endpoint, None);
        assert_eq!(c.tags, vec!["team"]);
        assert_eq!(c.created_at.unwrap().to_rfc3339(), "2019-11-09T11:50:28.889Z");
        let p = &c.node_pools[0];
        assert!(p.labels.is_empty() && p.taints.is_empty());
        assert_eq!(p.tags, vec!["x"]);
        assert_eq!(p.nodes[0].droplet_id.as_deref(), Some("205545370"));
        assert_eq!(p.nodes[1].state, ProviderNodeState::Unknown("rebooting".into()));
        assert_eq!(p.nodes[1].droplet_id.as_deref(), Some("7"));
    }

    #[test]
    fn labels_doks_adds_itself_are_not_reported() {
        let p: WireNodePool = serde_json::from_value(json!({"id": "p1", "name": "p",
            "size": "s-1vcpu-2gb", "count": 1, "labels": {
                "doks.digitalocean.com/node-pool": "p", "x.doks.digitalocean.com/y": "1",
                "notdoks.digitalocean.com/z": "2", "team": "a", "node.kubernetes.io/k": "v"}}))
        .unwrap();
        let labels: Vec<String> = p.into_port().labels.into_keys().collect();
        assert_eq!(labels, ["node.kubernetes.io/k", "notdoks.digitalocean.com/z", "team"]);
    }

    #[test]
    fn load_balancer_response_region_object_and_round_trip() {
        let lb: LoadBalancerEnvelope = serde_json::from_value(json!({"load_balancer": {
            "id": "lb1", "name": "web", "type": "REGIONAL_NETWORK",
            "region": {"name": "New York 1", "slug": "nyc1", "sizes": [], "available": true},
            "status": "active", "ip": "1.2.3.4", "size": "lb-small", "size_unit": 2,
            "forwarding_rules": [{"entry_protocol": "TCP", "entry_port": 80, "target_protocol": "tcp", "target_port": 8080}],
            "health_check": {"protocol": "tcp", "port": 8080},
            "sticky_sessions": {"type": "none"},
            "droplet_ids": [3164444, 3164445], "tag": "", "tags": ["k8s:abc", "mine"],
            "created_at": "2018-11-15T16:00:11Z"
        }}))
        .unwrap();
        let lb = lb.load_balancer.into_port();
        assert_eq!(lb.spec.kind, ProviderLoadBalancerKind::RegionalNetwork);
        assert_eq!(lb.spec.region.as_deref(), Some("nyc1"));
        assert_eq!(lb.spec.targets, ProviderTargets::DropletIds(vec![3164444, 3164445]));
        assert_eq!(lb.spec.sticky_sessions, None);
        assert_eq!(lb.spec.tags, vec!["k8s:abc", "mine"], "LB tags are the caller's own");
        assert_eq!(lb.spec.health_check.healthy_threshold, 5);
        assert_eq!(lb.spec.forwarding_rules[0].entry_protocol, Protocol::Tcp);
        let body = load_balancer_body(&lb.spec);
        assert_eq!(body["region"], json!("nyc1"));
        assert_eq!(body["type"], json!("REGIONAL_NETWORK"), "a PUT keeps the real type");
        assert_eq!(body["droplet_ids"], json!([3164444, 3164445]));
        assert_eq!(body["size_unit"], json!(2));
        assert_eq!(body["sticky_sessions"], json!({"type": "none"}));
    }

    #[test]
    fn global_load_balancer_maps_settings_and_domains() {
        let lb: WireLoadBalancer = serde_json::from_value(json!({
            "id": "g1", "name": "glb", "type": "GLOBAL", "status": "weird",
            "size_unit": 1, "forwarding_rules": [], "droplet_ids": [], "tag": "",
            "glb_settings": {"target_protocol": "HTTP", "target_port": 80, "cdn": {"is_enabled": true}},
            "domains": [{"name": "x.example.com", "is_managed": true, "status": "CREATING"}],
            "target_load_balancer_ids": ["lb1", "lb2"]
        }))
        .unwrap();
        let lb = lb.into_port();
        assert_eq!(lb.status, ProviderLoadBalancerStatus::Unknown("weird".into()));
        assert_eq!(lb.spec.kind, ProviderLoadBalancerKind::Global);
        assert_eq!(lb.spec.size_unit, None);
        assert_eq!(lb.spec.global_settings.as_ref().unwrap().target_protocol, Protocol::Http);
        assert!(lb.spec.global_settings.as_ref().unwrap().cdn);
        assert_eq!(
            lb.spec.targets,
            ProviderTargets::LoadBalancerIds(vec!["lb1".into(), "lb2".into()])
        );
        let body = load_balancer_body(&lb.spec);
        assert_eq!(body["type"], json!("GLOBAL"));
        assert!(body.get("region").is_none());
        assert!(body.get("forwarding_rules").is_none());
        assert_eq!(body["glb_settings"]["cdn"], json!({"is_enabled": true}));
        assert_eq!(body["domains"][0]["name"], json!("x.example.com"));
        assert_eq!(body["target_load_balancer_ids"], json!(["lb1", "lb2"]));
    }

    #[test]
    fn global_load_balancer_leaves_its_implied_rule_out() {
        // As DigitalOcean's document shapes it: at least one rule on every balancer.
        let lb: WireLoadBalancer = serde_json::from_value(json!({
            "id": "g1", "name": "glb", "type": "GLOBAL", "status": "active",
            "forwarding_rules": [{"entry_protocol": "http", "entry_port": 80,
                                  "target_protocol": "http", "target_port": 80}],
            "glb_settings": {"target_protocol": "http", "target_port": 80},
            "target_load_balancer_ids": ["lb1"]
        }))
        .unwrap();
        let lb = lb.into_port();
        assert!(lb.spec.forwarding_rules.is_empty(), "{:?}", lb.spec.forwarding_rules);
        assert!(load_balancer_body(&lb.spec).get("forwarding_rules").is_none());
    }

    #[test]
    fn version_without_kubernetes_version_is_derived() {
        let v: WireVersion = serde_json::from_value(json!({"slug": "1.31.4-do.1"})).unwrap();
        assert_eq!(v.into_port().kubernetes_version, "1.31.4");
    }
}
