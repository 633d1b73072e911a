//! Load balancers in the model (research/digitalocean.md §5): REGIONAL,
//! REGIONAL_NETWORK and GLOBAL, their validation 422s, the `new` → `active` lifecycle,
//! the busy window after each change, and full-replace updates.
//!
//! Invariants: a PUT replaces the whole object — every omitted field takes its default
//! (except the create-only fields: type, network, network stack, VPC, tags, which keep
//! their values and refuse changes); while a change is being applied (from create or
//! PUT until `load_balancer_provision` later) further PUTs answer 403; names are unique
//! per account; GLOBAL targets reference existing regional load balancers.

use std::collections::BTreeMap;

use bc_domain::Timestamp;
use serde::{Deserialize, Serialize};

use super::{Account, ApiError, Ids, Model, catalog};

/// Load balancer type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LbType {
    /// HTTP(S) in one region (default).
    Regional,
    /// L4 in one region.
    RegionalNetwork,
    /// Global.
    Global,
}

impl LbType {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            LbType::Regional => "REGIONAL",
            LbType::RegionalNetwork => "REGIONAL_NETWORK",
            LbType::Global => "GLOBAL",
        }
    }
    fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_uppercase().as_str() {
            "REGIONAL" => Some(LbType::Regional),
            "REGIONAL_NETWORK" => Some(LbType::RegionalNetwork),
            "GLOBAL" => Some(LbType::Global),
            _ => None,
        }
    }
}

/// Load balancer status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LbStatus {
    /// Provisioning.
    New,
    /// Up.
    Active,
    /// Failed (injected).
    Errored,
}

impl LbStatus {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            LbStatus::New => "new",
            LbStatus::Active => "active",
            LbStatus::Errored => "errored",
        }
    }
}

/// A forwarding rule (request and response shape).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForwardingRule {
    /// http, https, http2, http3, tcp, udp.
    pub entry_protocol: String,
    /// 1–65535.
    pub entry_port: u32,
    /// http, https, http2, tcp, udp.
    pub target_protocol: String,
    /// 1–65535.
    pub target_port: u32,
    /// TLS certificate id.
    #[serde(default)]
    pub certificate_id: String,
    /// TLS passthrough.
    #[serde(default)]
    pub tls_passthrough: bool,
}

/// A health check (response shape; defaults healthy 5 / unhealthy 3 / interval 10 /
/// timeout 5 / path `/` / port 80 / http).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthCheck {
    /// http, https, tcp.
    pub protocol: String,
    /// Port.
    pub port: u32,
    /// Path.
    pub path: String,
    /// Seconds between checks.
    pub check_interval_seconds: u32,
    /// Seconds to wait.
    pub response_timeout_seconds: u32,
    /// Successes before healthy.
    pub healthy_threshold: u32,
    /// Failures before unhealthy.
    pub unhealthy_threshold: u32,
    /// PROXY protocol to the check target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy_protocol: Option<bool>,
}

impl Default for HealthCheck {
    fn default() -> Self {
        Self {
            protocol: "http".into(),
            port: 80,
            path: "/".into(),
            check_interval_seconds: 10,
            response_timeout_seconds: 5,
            healthy_threshold: 5,
            unhealthy_threshold: 3,
            proxy_protocol: None,
        }
    }
}

/// A health check in a request (omitted fields take defaults).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct HealthCheckSpec {
    /// Protocol.
    pub protocol: Option<String>,
    /// Port.
    pub port: Option<i64>,
    /// Path.
    pub path: Option<String>,
    /// Interval.
    pub check_interval_seconds: Option<i64>,
    /// Timeout.
    pub response_timeout_seconds: Option<i64>,
    /// Healthy threshold.
    pub healthy_threshold: Option<i64>,
    /// Unhealthy threshold.
    pub unhealthy_threshold: Option<i64>,
    /// PROXY protocol.
    pub proxy_protocol: Option<bool>,
}

/// Sticky sessions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StickySessions {
    /// `none` or `cookies`.
    #[serde(rename = "type", default = "none")]
    pub kind: String,
    /// Cookie name (cookies only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cookie_name: Option<String>,
    /// Cookie TTL (cookies only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cookie_ttl_seconds: Option<u32>,
}
fn none() -> String {
    "none".into()
}
impl Default for StickySessions {
    fn default() -> Self {
        Self { kind: none(), cookie_name: None, cookie_ttl_seconds: None }
    }
}

/// Firewall rules (`ip:…` / `cidr:…`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Firewall {
    /// Allowed sources.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Denied sources.
    #[serde(default)]
    pub deny: Vec<String>,
}

/// CDN settings of a GLOBAL load balancer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cdn {
    /// CDN on.
    #[serde(default)]
    pub is_enabled: bool,
}

/// GLOBAL settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GlbSettings {
    /// `http`, `https`, `http2` (any case in, lower-case out: the document's enum).
    pub target_protocol: String,
    /// 80 or 443.
    pub target_port: u32,
    /// CDN.
    #[serde(default)]
    pub cdn: Cdn,
    /// Region slug → priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region_priorities: Option<BTreeMap<String, u32>>,
    /// Failover threshold percent (1–99).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover_threshold: Option<u32>,
}

/// A GLOBAL domain in a request.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct DomainSpec {
    /// FQDN.
    pub name: Option<String>,
    /// DigitalOcean-managed DNS.
    #[serde(default)]
    pub is_managed: bool,
    /// Certificate id.
    #[serde(default)]
    pub certificate_id: Option<String>,
}

/// A GLOBAL domain as stored and shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Domain {
    /// FQDN.
    pub name: String,
    /// DigitalOcean-managed DNS.
    pub is_managed: bool,
    /// Certificate id.
    pub certificate_id: String,
    /// `CREATING` until the load balancer is active, then `ACTIVE` (kept by the model;
    /// the HTTP face does not show it, as DigitalOcean's document names no such field).
    pub status: String,
    /// Always empty here.
    pub verification_error_reasons: Vec<String>,
    /// Always empty here.
    pub ssl_validation_error_reasons: Vec<String>,
}

/// `POST /v2/load_balancers` and `PUT /v2/load_balancers/{id}` body.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct LoadBalancerSpec {
    /// Name.
    pub name: Option<String>,
    /// `REGIONAL` (default), `REGIONAL_NETWORK`, `GLOBAL`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Region slug (a region object, as a GET returns it, is accepted too).
    pub region: Option<serde_json::Value>,
    /// Size units.
    pub size_unit: Option<i64>,
    /// Deprecated size slug.
    pub size: Option<String>,
    /// Deprecated, echoed.
    pub algorithm: Option<String>,
    /// Forwarding rules.
    pub forwarding_rules: Option<Vec<ForwardingRule>>,
    /// Health check.
    pub health_check: Option<HealthCheckSpec>,
    /// Sticky sessions.
    pub sticky_sessions: Option<StickySessions>,
    /// Droplet ids.
    pub droplet_ids: Option<Vec<u64>>,
    /// Droplet tag.
    pub tag: Option<String>,
    /// Resource tags (create only).
    pub tags: Option<Vec<String>>,
    /// Redirect.
    pub redirect_http_to_https: Option<bool>,
    /// PROXY protocol.
    pub enable_proxy_protocol: Option<bool>,
    /// Keepalive.
    pub enable_backend_keepalive: Option<bool>,
    /// Idle timeout (30–600).
    pub http_idle_timeout_seconds: Option<i64>,
    /// VPC (create only).
    pub vpc_uuid: Option<String>,
    /// Project.
    pub project_id: Option<String>,
    /// Let's Encrypt DNS records off.
    pub disable_lets_encrypt_dns_records: Option<bool>,
    /// Firewall.
    pub firewall: Option<Firewall>,
    /// `EXTERNAL` / `INTERNAL` (create only).
    pub network: Option<String>,
    /// `IPV4` / `DUALSTACK` (create only).
    pub network_stack: Option<String>,
    /// `DEFAULT` / `STRONG`.
    pub tls_cipher_policy: Option<String>,
    /// GLOBAL domains.
    pub domains: Option<Vec<DomainSpec>>,
    /// GLOBAL settings.
    pub glb_settings: Option<GlbSettings>,
    /// GLOBAL backends.
    pub target_load_balancer_ids: Option<Vec<String>>,
}

/// A load balancer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadBalancer {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Type.
    pub kind: LbType,
    /// Region slug (None for GLOBAL).
    pub region: Option<String>,
    /// Status.
    pub status: LbStatus,
    /// Public IPv4, empty while `new`.
    pub ip: String,
    /// IPv6 (DUALSTACK), empty otherwise.
    pub ipv6: String,
    /// Size units.
    pub size_unit: u32,
    /// Deprecated algorithm, echoed.
    pub algorithm: String,
    /// Forwarding rules (empty for GLOBAL).
    pub forwarding_rules: Vec<ForwardingRule>,
    /// Health check.
    pub health_check: HealthCheck,
    /// Sticky sessions.
    pub sticky_sessions: StickySessions,
    /// Droplet ids.
    pub droplet_ids: Vec<u64>,
    /// Droplet tag (empty when unused).
    pub tag: String,
    /// Resource tags.
    pub tags: Vec<String>,
    /// Redirect.
    pub redirect_http_to_https: bool,
    /// PROXY protocol.
    pub enable_proxy_protocol: bool,
    /// Keepalive.
    pub enable_backend_keepalive: bool,
    /// Idle timeout.
    pub http_idle_timeout_seconds: u32,
    /// VPC.
    pub vpc_uuid: String,
    /// Project.
    pub project_id: String,
    /// Let's Encrypt DNS records off.
    pub disable_lets_encrypt_dns_records: bool,
    /// Firewall.
    pub firewall: Firewall,
    /// EXTERNAL / INTERNAL.
    pub network: String,
    /// IPV4 / DUALSTACK.
    pub network_stack: String,
    /// DEFAULT / STRONG.
    pub tls_cipher_policy: String,
    /// GLOBAL domains.
    pub domains: Vec<Domain>,
    /// GLOBAL settings.
    pub glb_settings: Option<GlbSettings>,
    /// GLOBAL backends.
    pub target_load_balancer_ids: Vec<String>,
    /// Created.
    pub created_at: Timestamp,
    pub(crate) due: Option<Timestamp>,
    pub(crate) busy_until: Option<Timestamp>,
    pub(crate) last_resize: Option<Timestamp>,
}

impl LoadBalancer {
    /// The deprecated size slug responses carry next to `size_unit`.
    pub fn size_slug(&self) -> &'static str {
        size_slug_of(self.size_unit)
    }
}

fn size_slug_of(size_unit: u32) -> &'static str {
    match size_unit {
        0..=2 => "lb-small",
        3..=5 => "lb-medium",
        _ => "lb-large",
    }
}

/// The project every load balancer lands in unless told otherwise.
pub const DEFAULT_PROJECT_ID: &str = "7f1e5c4a-1d2b-4c3e-9f8a-000000000001";

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::unprocessable(msg)
}

fn in_range(v: Option<i64>, default: u32, lo: u32, hi: u32, field: &str) -> Result<u32, ApiError> {
    match v {
        None => Ok(default),
        Some(v) if v >= i64::from(lo) && v <= i64::from(hi) => Ok(v as u32),
        Some(v) => Err(bad(format!("{field} must be between {lo} and {hi}, got {v}"))),
    }
}

fn one_of(
    v: Option<&str>,
    default: &str,
    allowed: &[&str],
    field: &str,
) -> Result<String, ApiError> {
    // An empty string is what omitempty-less clients send for "unset".
    let v = v.filter(|s| !s.is_empty()).unwrap_or(default);
    let up = v.to_ascii_uppercase();
    allowed
        .iter()
        .find(|a| a.to_ascii_uppercase() == up)
        .map(|a| (*a).to_owned())
        .ok_or_else(|| bad(format!("invalid {field} {v:?}: must be one of {}", allowed.join(", "))))
}

fn validate_rules(given: &[ForwardingRule], kind: LbType) -> Result<Vec<ForwardingRule>, ApiError> {
    let mut rules = Vec::new();
    for r in given.iter().cloned() {
        let entry_protocol = one_of(
            Some(&r.entry_protocol),
            "",
            &["http", "https", "http2", "http3", "tcp", "udp"],
            "entry_protocol",
        )?;
        let target_protocol = one_of(
            Some(&r.target_protocol),
            "",
            &["http", "https", "http2", "tcp", "udp"],
            "target_protocol",
        )?;
        for (p, f) in [(r.entry_port, "entry_port"), (r.target_port, "target_port")] {
            if !(1..=65535).contains(&p) {
                return Err(bad(format!("{f} must be between 1 and 65535")));
            }
        }
        if (50053..=50055).contains(&r.entry_port) {
            return Err(bad(format!("entry_port {} is reserved", r.entry_port)));
        }
        if (entry_protocol == "udp") != (target_protocol == "udp") {
            return Err(bad("udp forwarding rules must have udp on both sides"));
        }
        if kind == LbType::RegionalNetwork && !matches!(entry_protocol.as_str(), "tcp" | "udp") {
            return Err(bad("REGIONAL_NETWORK load balancers forward tcp and udp only"));
        }
        rules.push(ForwardingRule { entry_protocol, target_protocol, ..r });
    }
    Ok(rules)
}

fn region_slug(v: &Option<serde_json::Value>) -> Option<String> {
    match v {
        Some(serde_json::Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(serde_json::Value::Object(o)) => {
            o.get("slug").and_then(|s| s.as_str()).filter(|s| !s.is_empty()).map(str::to_owned)
        }
        _ => None,
    }
}

/// Validates a spec into a fresh object (id, status, timing left for the caller).
fn resolve(
    spec: &LoadBalancerSpec,
    account: &Account,
    self_id: Option<&str>,
    ids: &mut Ids,
    now: Timestamp,
) -> Result<LoadBalancer, ApiError> {
    let name = spec.name.as_deref().map(str::trim).unwrap_or("");
    if name.is_empty() {
        return Err(bad("name is required"));
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.') {
        return Err(bad("name may contain only letters, digits, '-' and '.'"));
    }
    if account.load_balancers.iter().any(|l| l.name == name && Some(l.id.as_str()) != self_id) {
        return Err(bad("name is not unique"));
    }
    let kind = match spec.kind.as_deref() {
        None | Some("") => LbType::Regional,
        Some(k) => LbType::parse(k).ok_or_else(|| bad(format!("invalid type {k:?}")))?,
    };
    let region = region_slug(&spec.region);
    let global = kind == LbType::Global;
    if global && region.is_some() {
        return Err(bad("region must not be set for a GLOBAL load balancer"));
    }
    if !global {
        let Some(r) = &region else { return Err(bad("region is required")) };
        if !catalog::is_region(r) {
            return Err(bad(format!("invalid region {r:?}")));
        }
    }
    // Size: size_unit or the deprecated slug, not both.
    if spec.size_unit.is_some() && spec.size.is_some() {
        return Err(bad("size and size_unit are mutually exclusive"));
    }
    let size_unit = match (&spec.size, spec.size_unit) {
        (Some(s), _) => match s.as_str() {
            "lb-small" => 1,
            "lb-medium" => 3,
            "lb-large" => 6,
            other => return Err(bad(format!("invalid size {other:?}"))),
        },
        (None, v) => in_range(v, 1, 1, 200, "size_unit")?,
    };
    if global && size_unit != 1 {
        return Err(bad("GLOBAL load balancers cannot be scaled"));
    }
    // Backends: exactly one kind.
    let mut droplet_ids = spec.droplet_ids.clone().unwrap_or_default();
    let tag = spec.tag.clone().unwrap_or_default();
    let targets = spec.target_load_balancer_ids.clone().unwrap_or_default();
    if !droplet_ids.is_empty() && !tag.is_empty() {
        // A GET of a tag-targeted load balancer lists the tagged droplets: sent back as
        // they are (a GET→PUT round trip), they are no second backend.
        let mut given = droplet_ids.clone();
        given.sort_unstable();
        if given != tagged_droplets(account, &tag) {
            return Err(bad("droplet_ids and tag are mutually exclusive: specify one"));
        }
        droplet_ids.clear();
    }
    if droplet_ids.len() > 10 {
        return Err(bad("at most 10 droplet_ids may be given; use a tag for more"));
    }
    // A tag-targeted load balancer's droplets are those carrying the tag when it is
    // shown ([`shown`]): none are kept.
    if !targets.is_empty() && (!droplet_ids.is_empty() || !tag.is_empty()) {
        return Err(bad(
            "all backends must be of one kind: target_load_balancer_ids, droplet_ids or tag",
        ));
    }
    if !global
        && (!targets.is_empty()
            || spec.glb_settings.is_some()
            || spec.domains.as_ref().is_some_and(|d| !d.is_empty()))
    {
        return Err(bad(
            "target_load_balancer_ids, glb_settings and domains are only for GLOBAL load balancers",
        ));
    }
    for t in &targets {
        let ok = account.load_balancers.iter().any(|l| l.id == *t && l.kind != LbType::Global);
        if !ok {
            return Err(bad(format!("target load balancer {t} does not exist or is not regional")));
        }
    }
    // Forwarding rules (regional only; GLOBAL has one, implied by its settings, which the
    // HTTP face renders; any sent are ignored, as a GET→PUT round trip sends that one).
    let mut rules = Vec::new();
    if !global {
        let given = spec.forwarding_rules.clone().unwrap_or_default();
        if given.is_empty() {
            return Err(bad("at least one forwarding rule is required"));
        }
        rules = validate_rules(&given, kind)?;
    }
    let hc = spec.health_check.clone().unwrap_or_default();
    let d = HealthCheck::default();
    let health_check = HealthCheck {
        protocol: one_of(
            hc.protocol.as_deref(),
            "http",
            &["http", "https", "tcp"],
            "health_check.protocol",
        )?,
        port: in_range(hc.port, d.port, 1, 65535, "health_check.port")?,
        path: hc.path.filter(|p| !p.is_empty()).unwrap_or(d.path),
        check_interval_seconds: in_range(
            hc.check_interval_seconds,
            d.check_interval_seconds,
            3,
            300,
            "health_check.check_interval_seconds",
        )?,
        response_timeout_seconds: in_range(
            hc.response_timeout_seconds,
            d.response_timeout_seconds,
            3,
            300,
            "health_check.response_timeout_seconds",
        )?,
        healthy_threshold: in_range(
            hc.healthy_threshold,
            d.healthy_threshold,
            2,
            10,
            "health_check.healthy_threshold",
        )?,
        unhealthy_threshold: in_range(
            hc.unhealthy_threshold,
            d.unhealthy_threshold,
            2,
            10,
            "health_check.unhealthy_threshold",
        )?,
        proxy_protocol: hc.proxy_protocol,
    };
    let mut sticky_sessions = spec.sticky_sessions.clone().unwrap_or_default();
    sticky_sessions.kind =
        one_of(Some(&sticky_sessions.kind), "none", &["none", "cookies"], "sticky_sessions.type")?;
    if sticky_sessions.kind == "none" {
        sticky_sessions.cookie_name = None;
        sticky_sessions.cookie_ttl_seconds = None;
    }
    let glb_settings = if global {
        let mut g = spec.glb_settings.clone().unwrap_or(GlbSettings {
            target_protocol: "http".into(),
            target_port: 80,
            cdn: Cdn::default(),
            region_priorities: None,
            failover_threshold: None,
        });
        g.target_protocol = one_of(
            Some(&g.target_protocol),
            "",
            &["http", "https", "http2"],
            "glb_settings.target_protocol",
        )?;
        if !matches!(g.target_port, 80 | 443) {
            return Err(bad("glb_settings.target_port must be 80 or 443"));
        }
        if g.failover_threshold.is_some_and(|t| !(1..=99).contains(&t)) {
            return Err(bad("glb_settings.failover_threshold must be between 1 and 99"));
        }
        for r in g.region_priorities.iter().flat_map(|m| m.keys()) {
            if !catalog::is_region(r) {
                return Err(bad(format!("glb_settings.region_priorities: invalid region {r:?}")));
            }
        }
        Some(g)
    } else {
        None
    };
    let mut domains = Vec::new();
    for d in spec.domains.iter().flatten() {
        let name = d
            .name
            .clone()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| bad("domains[].name is required"))?;
        domains.push(Domain {
            name,
            is_managed: d.is_managed,
            certificate_id: d.certificate_id.clone().unwrap_or_default(),
            status: "CREATING".into(),
            verification_error_reasons: Vec::new(),
            ssl_validation_error_reasons: Vec::new(),
        });
    }
    Ok(LoadBalancer {
        id: String::new(),
        name: name.to_owned(),
        kind,
        region,
        status: LbStatus::New,
        ip: String::new(),
        ipv6: String::new(),
        size_unit,
        algorithm: one_of(
            spec.algorithm.as_deref(),
            "round_robin",
            &["round_robin", "least_connections"],
            "algorithm",
        )?,
        forwarding_rules: rules,
        health_check,
        sticky_sessions,
        droplet_ids,
        tag,
        tags: spec.tags.clone().unwrap_or_default(),
        redirect_http_to_https: spec.redirect_http_to_https.unwrap_or(false),
        enable_proxy_protocol: spec.enable_proxy_protocol.unwrap_or(false),
        enable_backend_keepalive: spec.enable_backend_keepalive.unwrap_or(false),
        http_idle_timeout_seconds: in_range(
            spec.http_idle_timeout_seconds,
            60,
            30,
            600,
            "http_idle_timeout_seconds",
        )?,
        vpc_uuid: spec.vpc_uuid.clone().filter(|v| !v.is_empty()).unwrap_or_else(|| ids.uuid()),
        project_id: spec
            .project_id
            .clone()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| DEFAULT_PROJECT_ID.into()),
        disable_lets_encrypt_dns_records: spec.disable_lets_encrypt_dns_records.unwrap_or(false),
        firewall: spec.firewall.clone().unwrap_or_default(),
        network: one_of(spec.network.as_deref(), "EXTERNAL", &["EXTERNAL", "INTERNAL"], "network")?,
        network_stack: one_of(
            spec.network_stack.as_deref(),
            "IPV4",
            &["IPV4", "DUALSTACK"],
            "network_stack",
        )?,
        tls_cipher_policy: one_of(
            spec.tls_cipher_policy.as_deref(),
            "DEFAULT",
            &["DEFAULT", "STRONG"],
            "tls_cipher_policy",
        )?,
        domains,
        glb_settings,
        target_load_balancer_ids: targets,
        created_at: now,
        due: None,
        busy_until: None,
        last_resize: None,
    })
}

/// The ids of the droplets that carry `tag`, sorted: the nodes of every node pool whose
/// tags (its own and the server's `k8s`, `k8s:<cluster id>`, `k8s:worker`) include it.
pub(crate) fn tagged_droplets(account: &Account, tag: &str) -> Vec<u64> {
    let mut out: Vec<u64> = account
        .clusters
        .iter()
        .flat_map(|c| c.node_pools.iter().filter(move |p| p.has_tag(&c.id, tag)))
        .flat_map(|p| p.nodes.iter())
        .filter_map(|n| n.droplet_id.parse::<u64>().ok())
        .collect();
    out.sort_unstable();
    out
}

/// `lbs` as the API shows them: a tag-targeted load balancer's `droplet_ids` are the
/// droplets that carry its tag at the time of the read. Filled here, on the way out, once
/// per distinct tag: kept up to date on every call instead, load balancers × node pools
/// made every call cost the square of the account's size.
fn shown(account: &Account, mut lbs: Vec<LoadBalancer>) -> Vec<LoadBalancer> {
    let mut by_tag: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for l in lbs.iter_mut().filter(|l| !l.tag.is_empty()) {
        let droplets =
            by_tag.entry(l.tag.clone()).or_insert_with(|| tagged_droplets(account, &l.tag));
        l.droplet_ids.clone_from(droplets);
    }
    lbs
}

/// When `l` next changes by itself (a new load balancer turning active), if it will.
pub(super) fn pending_due(l: &LoadBalancer) -> Option<Timestamp> {
    l.due.filter(|_| l.status == LbStatus::New)
}

pub(super) fn advance_account(account: &mut Account, ids: &mut Ids, now: Timestamp) {
    for l in &mut account.load_balancers {
        if pending_due(l).is_some_and(|d| d <= now) {
            l.due = None;
            l.status = LbStatus::Active;
            l.ip = if l.network == "INTERNAL" {
                format!("10.10.0.{}", 2 + ids.droplet() % 250)
            } else {
                ids.ipv4()
            };
            if l.network_stack == "DUALSTACK" {
                l.ipv6 = ids.ipv6();
            }
            for d in &mut l.domains {
                d.status = "ACTIVE".into();
            }
        }
    }
}

impl Model {
    /// Every load balancer of the account, in creation order.
    pub fn list_load_balancers(
        &mut self,
        token: &str,
        now: Timestamp,
    ) -> Result<Vec<LoadBalancer>, ApiError> {
        self.list_load_balancers_page(token, now, |total| 0..total)
    }

    /// The account's load balancers that `window` picks out of those listed (in creation
    /// order; it is told how many there are), copied only once picked.
    pub fn list_load_balancers_page(
        &mut self,
        token: &str,
        now: Timestamp,
        window: impl FnOnce(usize) -> std::ops::Range<usize>,
    ) -> Result<Vec<LoadBalancer>, ApiError> {
        self.advance(now);
        let account = self.accounts.get(token).ok_or_else(ApiError::unauthorized)?;
        let listed: Vec<&LoadBalancer> =
            account.load_balancers.iter().filter(|l| !self.lagging(l.created_at, now)).collect();
        let range = window(listed.len());
        let page = listed.get(range).unwrap_or_default().iter().map(|l| (*l).clone()).collect();
        Ok(shown(account, page))
    }

    /// Creates a load balancer (`new`, no ip yet; `active` after the provision delay).
    pub fn create_load_balancer(
        &mut self,
        token: &str,
        spec: LoadBalancerSpec,
        now: Timestamp,
    ) -> Result<LoadBalancer, ApiError> {
        self.advance(now);
        let delay = self.delays.load_balancer_provision;
        let account = self.accounts.get(token).ok_or_else(ApiError::unauthorized)?;
        let mut lb = resolve(&spec, account, None, &mut self.ids, now)?;
        lb.id = self.ids.uuid();
        lb.due = Some(now + delay);
        lb.busy_until = lb.due;
        let account = self.accounts.get_mut(token).ok_or_else(ApiError::unauthorized)?;
        // Nothing else changed: the account stays settled but for the new one's due time.
        account.settled = account.settled.with_due(pending_due(&lb));
        account.load_balancers.push(lb.clone());
        Ok(self.shown_one(token, lb))
    }

    /// One load balancer (404 unknown, or inside the brief-404 window).
    pub fn get_load_balancer(
        &mut self,
        token: &str,
        id: &str,
        now: Timestamp,
    ) -> Result<LoadBalancer, ApiError> {
        let l = self
            .account_ref(token, now)?
            .load_balancers
            .iter()
            .find(|l| l.id == id)
            .cloned()
            .ok_or_else(ApiError::not_found)?;
        if self.hidden(l.created_at, now) {
            return Err(ApiError::not_found());
        }
        Ok(self.shown_one(token, l))
    }

    /// [`shown`] for the account of `token`.
    fn shown(&self, token: &str, lbs: Vec<LoadBalancer>) -> Vec<LoadBalancer> {
        match self.accounts.get(token) {
            Some(account) => shown(account, lbs),
            None => lbs,
        }
    }

    /// [`shown`] for one load balancer of the account of `token`.
    fn shown_one(&self, token: &str, lb: LoadBalancer) -> LoadBalancer {
        self.shown(token, vec![lb]).pop().expect("one in, one out")
    }

    /// Replaces a load balancer whole: omitted fields reset to defaults; 403 while a
    /// previous change is pending; 422 on immutable-field changes and on a resize within
    /// `load_balancer_resize_every` (DigitalOcean: a minute) of the last.
    pub fn update_load_balancer(
        &mut self,
        token: &str,
        id: &str,
        spec: LoadBalancerSpec,
        now: Timestamp,
    ) -> Result<LoadBalancer, ApiError> {
        self.advance(now);
        let delay = self.delays.load_balancer_provision;
        let resize_every = self.delays.load_balancer_resize_every;
        let account = self.accounts.get(token).ok_or_else(ApiError::unauthorized)?;
        let cur =
            account.load_balancers.iter().find(|l| l.id == id).ok_or_else(ApiError::not_found)?;
        if cur.busy_until.is_some_and(|b| b > now) {
            return Err(ApiError::forbidden(
                "Load Balancer can't be updated while it processes previous actions",
            ));
        }
        let mut spec = spec;
        // Create-only fields: omitted means unchanged; given must be equal.
        let kind = spec
            .kind
            .clone()
            .filter(|k| !k.is_empty())
            .unwrap_or_else(|| cur.kind.as_str().to_owned());
        if LbType::parse(&kind) != Some(cur.kind) {
            return Err(bad("type cannot be changed"));
        }
        spec.kind = Some(kind);
        if cur.kind != LbType::Global
            && region_slug(&spec.region).is_some_and(|r| Some(r) != cur.region)
        {
            return Err(bad("region cannot be changed"));
        }
        for (field, given, current) in [
            ("network", &mut spec.network, &cur.network),
            ("network_stack", &mut spec.network_stack, &cur.network_stack),
            ("vpc_uuid", &mut spec.vpc_uuid, &cur.vpc_uuid),
        ] {
            match given {
                Some(g) if !g.is_empty() && !g.eq_ignore_ascii_case(current) => {
                    return Err(bad(format!("{field} cannot be changed")));
                }
                _ => *given = Some(current.clone()),
            }
        }
        spec.tags = Some(cur.tags.clone());
        // The documented update recipe is GET, modify, PUT the whole object (research
        // §5.2), and a GET carries `size` next to `size_unit`: a `size` that merely echoes
        // the slug of the given `size_unit` is that echo, not a second size.
        if let (Some(s), Some(u)) = (&spec.size, spec.size_unit)
            && u32::try_from(u).is_ok_and(|u| size_slug_of(u) == s)
        {
            spec.size = None;
        }
        let mut lb = resolve(&spec, account, Some(id), &mut self.ids, now)?;
        let cur =
            account.load_balancers.iter().find(|l| l.id == id).ok_or_else(ApiError::not_found)?;
        lb.last_resize = cur.last_resize;
        if lb.size_unit != cur.size_unit {
            if cur.last_resize.is_some_and(|t| now - t < resize_every) {
                return Err(bad("Load Balancer can only be resized once per minute"));
            }
            lb.last_resize = Some(now);
        }
        lb.id = cur.id.clone();
        lb.status = cur.status;
        lb.ip = cur.ip.clone();
        lb.ipv6 = cur.ipv6.clone();
        lb.created_at = cur.created_at;
        lb.due = cur.due;
        if cur.status != LbStatus::New {
            for d in &mut lb.domains {
                d.status = if cur.domains.iter().any(|o| o.name == d.name && o.status == "ACTIVE") {
                    "ACTIVE".into()
                } else {
                    "CREATING".into()
                };
            }
        }
        lb.busy_until = Some(now + delay);
        let account = self.account_mut(token).ok_or_else(ApiError::unauthorized)?;
        if let Some(slot) = account.load_balancers.iter_mut().find(|l| l.id == id) {
            *slot = lb.clone();
        }
        Ok(self.shown_one(token, lb))
    }

    fn lb_change(
        &mut self,
        token: &str,
        id: &str,
        now: Timestamp,
        change: impl FnOnce(&mut LoadBalancer) -> Result<(), ApiError>,
    ) -> Result<(), ApiError> {
        let delay = self.delays.load_balancer_provision;
        let account = self.account(token, now)?;
        let l = account
            .load_balancers
            .iter_mut()
            .find(|l| l.id == id)
            .ok_or_else(ApiError::not_found)?;
        if l.busy_until.is_some_and(|b| b > now) {
            return Err(ApiError::forbidden(
                "Load Balancer can't be updated while it processes previous actions",
            ));
        }
        change(l)?;
        l.busy_until = Some(now + delay);
        Ok(())
    }

    /// `POST /v2/load_balancers/{id}/droplets` (`add`) or `DELETE` (remove): 422 on a
    /// tag-based load balancer.
    pub fn load_balancer_droplets(
        &mut self,
        token: &str,
        id: &str,
        droplet_ids: &[u64],
        add: bool,
        now: Timestamp,
    ) -> Result<(), ApiError> {
        self.lb_change(token, id, now, |l| {
            if !l.tag.is_empty() {
                return Err(bad(
                    "droplets cannot be added to or removed from a load balancer that uses a tag",
                ));
            }
            if !l.target_load_balancer_ids.is_empty() {
                return Err(bad(
                    "all backends must be of one kind: this load balancer targets load balancers",
                ));
            }
            if droplet_ids.is_empty() {
                return Err(bad("need to provide either a tag or a list of droplets"));
            }
            if add {
                for d in droplet_ids {
                    if !l.droplet_ids.contains(d) {
                        l.droplet_ids.push(*d);
                    }
                }
                if l.droplet_ids.len() > 10 {
                    return Err(bad("at most 10 droplet_ids may be given; use a tag for more"));
                }
            } else {
                l.droplet_ids.retain(|d| !droplet_ids.contains(d));
            }
            Ok(())
        })
    }

    /// `POST /v2/load_balancers/{id}/forwarding_rules` (`add`) or `DELETE` (remove).
    pub fn load_balancer_rules(
        &mut self,
        token: &str,
        id: &str,
        rules: &[ForwardingRule],
        add: bool,
        now: Timestamp,
    ) -> Result<(), ApiError> {
        self.lb_change(token, id, now, |l| {
            if l.kind == LbType::Global {
                return Err(bad("GLOBAL load balancers have no forwarding rules"));
            }
            if rules.is_empty() {
                return Err(bad("at least one forwarding rule is required"));
            }
            let rules = validate_rules(rules, l.kind)?;
            if add {
                for r in rules {
                    if !l.forwarding_rules.contains(&r) {
                        l.forwarding_rules.push(r);
                    }
                }
            } else {
                l.forwarding_rules.retain(|r| !rules.contains(r));
                if l.forwarding_rules.is_empty() {
                    return Err(bad("a load balancer needs at least one forwarding rule"));
                }
            }
            Ok(())
        })
    }

    /// Purges a GLOBAL load balancer's CDN cache (422 for regional ones).
    pub fn purge_load_balancer_cache(
        &mut self,
        token: &str,
        id: &str,
        now: Timestamp,
    ) -> Result<(), ApiError> {
        let account = self.account(token, now)?;
        let l =
            account.load_balancers.iter().find(|l| l.id == id).ok_or_else(ApiError::not_found)?;
        if l.kind != LbType::Global {
            return Err(bad("only GLOBAL load balancers have a CDN cache"));
        }
        Ok(())
    }

    /// Deletes a load balancer.
    pub fn delete_load_balancer(
        &mut self,
        token: &str,
        id: &str,
        now: Timestamp,
    ) -> Result<(), ApiError> {
        let account = self.account(token, now)?;
        let before = account.load_balancers.len();
        account.load_balancers.retain(|l| l.id != id);
        if account.load_balancers.len() == before {
            return Err(ApiError::not_found());
        }
        Ok(())
    }

    /// Puts a load balancer into `errored` (fault injection). False if unknown.
    pub fn force_load_balancer_errored(&mut self, id: &str) -> bool {
        for a in self.accounts_mut() {
            if let Some(l) = a.load_balancers.iter_mut().find(|l| l.id == id) {
                l.status = LbStatus::Errored;
                l.due = None;
                l.busy_until = None;
                return true;
            }
        }
        false
    }

    /// Deletes a load balancer "behind our back" (as if someone used the console).
    /// False if unknown.
    pub fn delete_load_balancer_behind_back(&mut self, id: &str) -> bool {
        for a in self.accounts_mut() {
            let before = a.load_balancers.len();
            a.load_balancers.retain(|l| l.id != id);
            if a.load_balancers.len() != before {
                return true;
            }
        }
        false
    }
}
