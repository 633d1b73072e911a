//! `loadBalancers.*` (SPEC §11): regional and global load balancers on provider accounts:
//! the resource, its methods' wire types and their endpoints. Invariant: optional input
//! fields are left out when unset and output fields are read back as the server writes
//! them, so a type here round-trips through the wire; what a method does is bc-api's.

use bc_domain::model::{
    Domain, ForwardingRule, GlobalSettings, HealthCheck, INTEGER_MAX, LoadBalancer,
    LoadBalancerSpec, LoadBalancerType, MAX_DOMAINS, MAX_FORWARDING_RULES, MAX_SIZE_UNIT,
    StickySessions, Targets,
};
use bc_domain::name::ProviderSlug;
use bc_domain::ports::Permission;
use bc_domain::{
    LoadBalancerId, ObjectName, PoolId, ProviderAccountId, RequestId, ResourceState, TenantId,
    Timestamp,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::endpoint::{Input, create_input, endpoint, list_input, list_output, object_ref};
use crate::meta::{Kind, Resource, ResourceType};
use crate::shown_state;
use Permission::{LoadBalancersManage as Manage, LoadBalancersRead as Read};
use ResourceType::{ProviderAccount as OnAccount, ProviderLoadBalancer as OnLb};

object_ref!(
    /// Input of `loadBalancers.get` and `loadBalancers.delete`.
    LoadBalancerRef, load_balancer_id: LoadBalancerId
);

/// The resource.
pub static LOAD_BALANCERS: Resource = Resource {
    name: "loadBalancers",
    page: "load-balancers",
    module: "vps",
    description: "Load balancers on a provider account (DigitalOcean regional and global first). Every call records what the tenant wants and returns at once; the `vps.provider-resources` reconciler converges the provider through `ProviderImpl.loadBalancers`. Reading takes `compute:load-balancers:read`, everything else `compute:load-balancers:manage`, on `provider-load-balancer/{id}`. A load balancer books one `loadBalancers` quota on the pool (no quota row grants none) and bills `vps.load-balancer.hours` from `ready` until deleted.",
};

/// Input of `loadBalancers.create`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoadBalancersCreateInput {
    /// The tenant.
    pub tenant_id: TenantId,
    /// The pool whose `loadBalancers` quota it books.
    pub pool_id: PoolId,
    /// The account to make it on.
    pub provider_account_id: ProviderAccountId,
    /// Unique among the account's live load balancers; also the provider-side name.
    pub name: ObjectName,
    /// `regional` or `global` (fixed).
    #[serde(rename = "type")]
    pub kind: LoadBalancerType,
    /// Region slug (regional only; fixed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<ProviderSlug>")]
    pub region: Option<String>,
    /// Forwarding rules (regional only).
    #[serde(default)]
    #[schemars(length(max = MAX_FORWARDING_RULES))]
    pub forwarding_rules: Vec<ForwardingRule>,
    /// Health check; SPEC §11's defaults when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
    /// Sticky sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sticky_sessions: Option<StickySessions>,
    /// Exactly one kind of targets.
    pub targets: Targets,
    /// Load balancer nodes (regional only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_SIZE_UNIT))]
    pub size_unit: Option<u32>,
    /// Redirect HTTP to HTTPS.
    #[serde(default)]
    pub redirect_http_to_https: bool,
    /// Global settings (global only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_settings: Option<GlobalSettings>,
    /// Domains (global only; 1–10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_DOMAINS))]
    pub domains: Option<Vec<Domain>>,
    /// Idempotency key: a repeat within 24 h returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<RequestId>,
}

impl LoadBalancersCreateInput {
    /// The desired state asked for, with defaults filled in.
    pub fn spec(&self) -> LoadBalancerSpec {
        LoadBalancerSpec {
            kind: self.kind,
            region: self.region.clone(),
            forwarding_rules: self.forwarding_rules.clone(),
            health_check: self.health_check.clone().unwrap_or_default(),
            sticky_sessions: self.sticky_sessions.clone(),
            targets: self.targets.clone(),
            size_unit: self.size_unit,
            redirect_http_to_https: self.redirect_http_to_https,
            global_settings: self.global_settings.clone(),
            domains: self.domains.clone(),
        }
    }
}

list_input!(
    /// Input of `loadBalancers.list`.
    LoadBalancersListInput {
        /// Only this pool's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pool_id: Option<PoolId>,
        /// Only this account's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_account_id: Option<ProviderAccountId>,
    }
);

/// Input of `loadBalancers.update`: the fields given replace the recorded ones.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoadBalancersUpdateInput {
    /// The load balancer's tenant.
    pub tenant_id: TenantId,
    /// The load balancer.
    pub load_balancer_id: LoadBalancerId,
    /// New name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<ObjectName>,
    /// New forwarding rules (regional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_FORWARDING_RULES))]
    pub forwarding_rules: Option<Vec<ForwardingRule>>,
    /// New health check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
    /// New sticky sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sticky_sessions: Option<StickySessions>,
    /// New targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<Targets>,
    /// New size (regional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_SIZE_UNIT))]
    pub size_unit: Option<u32>,
    /// Redirect HTTP to HTTPS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_http_to_https: Option<bool>,
    /// New global settings (global).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_settings: Option<GlobalSettings>,
    /// New domains (global; 1–10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_DOMAINS))]
    pub domains: Option<Vec<Domain>>,
    /// Refuse (ABORTED) unless the load balancer's generation is this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = INTEGER_MAX))]
    pub expected_generation: Option<u64>,
}

impl LoadBalancersUpdateInput {
    /// `spec` with the given fields replaced (then checked whole, like a create).
    pub fn apply(&self, spec: &LoadBalancerSpec) -> LoadBalancerSpec {
        let mut s = spec.clone();
        if let Some(v) = &self.forwarding_rules {
            s.forwarding_rules = v.clone();
        }
        if let Some(v) = &self.health_check {
            s.health_check = v.clone();
        }
        if let Some(v) = &self.sticky_sessions {
            s.sticky_sessions = Some(v.clone());
        }
        if let Some(v) = &self.targets {
            s.targets = v.clone();
        }
        if let Some(v) = self.size_unit {
            s.size_unit = Some(v);
        }
        if let Some(v) = self.redirect_http_to_https {
            s.redirect_http_to_https = v;
        }
        if let Some(v) = &self.global_settings {
            s.global_settings = Some(v.clone());
        }
        if let Some(v) = &self.domains {
            s.domains = Some(v.clone());
        }
        s
    }
}

/// A load balancer as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "LoadBalancer")]
pub struct LoadBalancerView {
    /// Id.
    pub load_balancer_id: LoadBalancerId,
    /// Owner.
    pub tenant_id: TenantId,
    /// The pool it books quota on.
    pub pool_id: PoolId,
    /// The account it lives in.
    pub provider_account_id: ProviderAccountId,
    /// The provider's id, once made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_load_balancer_id: Option<String>,
    /// Name (also the provider-side name).
    pub name: ObjectName,
    /// `regional` or `global`.
    #[serde(rename = "type")]
    pub kind: LoadBalancerType,
    /// Region (regional).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Forwarding rules (regional).
    pub forwarding_rules: Vec<ForwardingRule>,
    /// Health check.
    pub health_check: HealthCheck,
    /// Sticky sessions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sticky_sessions: Option<StickySessions>,
    /// Targets.
    pub targets: Targets,
    /// Load balancer nodes (regional).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_unit: Option<u32>,
    /// Redirect HTTP to HTTPS.
    pub redirect_http_to_https: bool,
    /// Global settings (global).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub global_settings: Option<GlobalSettings>,
    /// Domains (global).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domains: Option<Vec<Domain>>,
    /// Public IP, once assigned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    /// State.
    pub state: ResourceState,
    /// What to fix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Bumped by each accepted change.
    pub generation: u64,
    /// Created.
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
    /// First time ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_at: Option<Timestamp>,
    /// Deleted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted_at: Option<Timestamp>,
}

impl From<&LoadBalancer> for LoadBalancerView {
    fn from(l: &LoadBalancer) -> Self {
        let s = &l.spec;
        Self {
            load_balancer_id: l.load_balancer_id.clone(),
            tenant_id: l.tenant_id.clone(),
            pool_id: l.pool_id.clone(),
            provider_account_id: l.provider_account_id.clone(),
            provider_load_balancer_id: l.provider_load_balancer_id.clone(),
            name: l.name.clone(),
            kind: s.kind,
            region: s.region.clone(),
            forwarding_rules: s.forwarding_rules.clone(),
            health_check: s.health_check.clone(),
            sticky_sessions: s.sticky_sessions.clone(),
            targets: s.targets.clone(),
            size_unit: s.size_unit,
            redirect_http_to_https: s.redirect_http_to_https,
            global_settings: s.global_settings.clone(),
            domains: s.domains.clone(),
            ip: l.ip.clone(),
            state: shown_state(l.delete_requested && l.deleted_at.is_none(), l.status.state),
            message: l.status.message.clone(),
            generation: l.generation,
            created_at: l.created_at,
            updated_at: l.status.updated_at.max(l.created_at),
            ready_at: l.ready_at,
            deleted_at: l.deleted_at,
        }
    }
}

list_output!(
    /// Output of `loadBalancers.list`.
    LoadBalancersListOutput, load_balancers, LoadBalancerView
);

create_input!(LoadBalancersCreateInput);
impl Input for LoadBalancersUpdateInput {}

endpoint!(
    /// `loadBalancers.create`.
    Create = LOAD_BALANCERS.method(
        "create",
        Kind::Write,
        Manage,
        OnAccount,
        "Records a load balancer on providerAccountId for poolId and returns it, state pending, booking one loadBalancers quota unit on the pool in the same transaction (RESOURCE_EXHAUSTED when none is free, or the pool has no quota row). A regional load balancer takes region, forwardingRules (1–25; udp pairs with udp) and targets (exactly one of tag or dropletIds, 1–10 of them), and optionally sizeUnit (1–100), stickySessions and redirectHttpToHttps. A global one takes no region and no forwardingRules, but globalSettings (targetProtocol http, https or http2; targetPort 80 or 443; cdn; regionPriorities; failoverThreshold), domains (at least one) and targets (exactly one of loadBalancerIds, regional load balancers of this system on the same account, tag or dropletIds). healthCheck defaults to http on port 80, path /, every 10 s with a 5 s timeout, healthy after 5 and unhealthy after 3. The name must be unique among the account's live load balancers. A repeat with the same requestId and the same body within 24 hours returns the first load balancer and creates nothing; the same requestId with another body is ALREADY_EXISTS. Decided as compute:load-balancers:manage on the provider account, and also on the pool (whose quota it books) and on each of targets.loadBalancerIds.",
    );
    LoadBalancersCreateInput => LoadBalancerView
);

endpoint!(
    /// `loadBalancers.get`.
    Get = LOAD_BALANCERS.method(
        "get",
        Kind::Read,
        Read,
        OnLb,
        "Returns the load balancer: loadBalancerId, tenantId, poolId, providerAccountId, providerLoadBalancerId once made, name, type, region, forwardingRules, healthCheck, stickySessions, targets, sizeUnit, redirectHttpToHttps, globalSettings and domains as recorded, ip once assigned, state with a message when there is something to fix, generation, createdAt, updatedAt, readyAt once it was first ready, and deletedAt once deleted. A load balancer of another tenant is NOT_FOUND. Decided as compute:load-balancers:read on the load balancer.",
    );
    LoadBalancerRef => LoadBalancerView
);

endpoint!(
    /// `loadBalancers.list`.
    List = LOAD_BALANCERS.method(
        "list",
        Kind::Read,
        Read,
        OnLb,
        "Lists the tenant's load balancers that the caller may read, by id, pageSize at a time (1–500, default 100), with nextPageToken while more remain; poolId and providerAccountId narrow it. Decided as compute:load-balancers:read on each load balancer; a grant on its provider account covers it. A providerAccountId the caller may not read is refused as providerAccounts.get would refuse it.",
    );
    LoadBalancersListInput => LoadBalancersListOutput
);

endpoint!(
    /// `loadBalancers.update`.
    Update = LOAD_BALANCERS.method(
        "update",
        Kind::Write,
        Manage,
        OnLb,
        "Replaces the fields given (name, forwardingRules, healthCheck, stickySessions, targets, sizeUnit, redirectHttpToHttps, globalSettings, domains) and returns the load balancer with its generation bumped; the provider gets the whole object again. type, region and the account are fixed. The result is checked whole, as a create is. With expectedGeneration, a load balancer changed since is ABORTED. Decided as compute:load-balancers:manage on the load balancer, and also on each of targets.loadBalancerIds.",
    );
    LoadBalancersUpdateInput => LoadBalancerView
);

endpoint!(
    /// `loadBalancers.delete`.
    Delete = LOAD_BALANCERS.method(
        "delete",
        Kind::Write,
        Manage,
        OnLb,
        "Asks for the load balancer to be deleted and returns it; it goes deleting, then deleted, its quota unit is released and its billing stops. Deleting a deleted load balancer returns it unchanged. Decided as compute:load-balancers:manage on the load balancer.",
    );
    LoadBalancerRef => LoadBalancerView
);
