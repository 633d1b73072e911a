//! `loadBalancers.*` (SPEC §11): regional and global load balancers on provider accounts.

use bc_domain::model::{
    Domain, ForwardingRule, GlobalSettings, HealthCheck, INTEGER_MAX, LoadBalancer,
    LoadBalancerSpec, LoadBalancerType, MAX_DOMAINS, ObservedStatus, PoolState, QuotaResource,
    StickySessions, Targets,
};
use bc_domain::name::ProviderSlug;
use bc_domain::ports::{LoadBalancerFilter, Permission, UnitOfWork, WorkKind, Write};
use bc_domain::rules::load_balancer::validate_load_balancer;
use bc_domain::{
    Error as DomainError, FieldViolation, LoadBalancerId, ObjectName, PoolId, ProviderAccountId,
    RequestId, ResourceState, TenantId, Timestamp,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::examples as ex;
use super::{check_generation, list_input, list_output, object_ref, shown_state};
use crate::access::Target;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::registry::{Call, Kind, Method, MethodInput, Resource, ResourceType};
use crate::write::Created;

pub(crate) static LOAD_BALANCERS: Resource = Resource {
    name: "loadBalancers",
    page: "load-balancers",
    module: "vps",
    description: "Load balancers on a provider account (DigitalOcean regional and global first). Every call records what the tenant wants and returns at once; the `vps.provider-resources` reconciler converges the provider through `ProviderImpl.loadBalancers`. Reading takes `compute:load-balancers:read`, everything else `compute:load-balancers:manage`, on `provider-load-balancer/{id}`. A load balancer books one `loadBalancers` quota on the pool (no quota row grants none) and bills `vps.load-balancer.hours` from `ready` until deleted.",
};

/// Input of `loadBalancers.create`.
#[derive(Debug, Deserialize, JsonSchema)]
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
    #[serde(default)]
    #[schemars(with = "Option<ProviderSlug>")]
    pub region: Option<String>,
    /// Forwarding rules (regional only).
    #[serde(default)]
    #[schemars(length(max = 25))]
    pub forwarding_rules: Vec<ForwardingRule>,
    /// Health check; SPEC §11's defaults when left out.
    #[serde(default)]
    pub health_check: Option<HealthCheck>,
    /// Sticky sessions.
    #[serde(default)]
    pub sticky_sessions: Option<StickySessions>,
    /// Exactly one kind of targets.
    pub targets: Targets,
    /// Load balancer nodes (regional only).
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    pub size_unit: Option<u32>,
    /// Redirect HTTP to HTTPS.
    #[serde(default)]
    pub redirect_http_to_https: bool,
    /// Global settings (global only).
    #[serde(default)]
    pub global_settings: Option<GlobalSettings>,
    /// Domains (global only; 1–10).
    #[serde(default)]
    #[schemars(length(min = 1, max = MAX_DOMAINS))]
    pub domains: Option<Vec<Domain>>,
    /// Idempotency key: a repeat within 24 h returns the first result.
    #[serde(default)]
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

impl MethodInput for LoadBalancersCreateInput {
    fn target(&self) -> Target {
        Target::ProviderAccount(self.tenant_id.clone(), self.provider_account_id.clone())
    }
    fn validate(&self) -> Vec<FieldViolation> {
        validate_load_balancer(&self.spec(), "")
    }
    fn example() -> Value {
        json!({
            "tenantId": ex::TENANT,
            "poolId": ex::POOL,
            "providerAccountId": ex::ACCOUNT,
            "name": "web-lb",
            "type": "regional",
            "region": "nyc1",
            "forwardingRules": [
                { "entryProtocol": "http", "entryPort": 80, "targetProtocol": "http", "targetPort": 8080 }
            ],
            "targets": { "tag": "web" },
            "requestId": "web-lb-1"
        })
    }
    fn request_id(&self) -> Option<&RequestId> {
        self.request_id.as_ref()
    }
}

object_ref!(
    /// Input of `loadBalancers.get` and `loadBalancers.delete`.
    LoadBalancerRef, load_balancer_id: LoadBalancerId, LoadBalancer,
    "loadBalancerId" = ex::LOAD_BALANCER
);

list_input!(
    /// Input of `loadBalancers.list`.
    LoadBalancersListInput {
        /// Only this pool's.
        #[serde(default)]
        pool_id: Option<PoolId>,
        /// Only this account's.
        #[serde(default)]
        provider_account_id: Option<ProviderAccountId>,
    }
);

impl MethodInput for LoadBalancersListInput {
    fn target(&self) -> Target {
        Target::list_in_account(&self.tenant_id, self.provider_account_id.as_ref())
    }
    fn example() -> Value {
        json!({ "tenantId": ex::TENANT, "poolId": ex::POOL })
    }
}

/// Input of `loadBalancers.update`: the fields given replace the recorded ones.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoadBalancersUpdateInput {
    /// The load balancer's tenant.
    pub tenant_id: TenantId,
    /// The load balancer.
    pub load_balancer_id: LoadBalancerId,
    /// New name.
    #[serde(default)]
    pub name: Option<ObjectName>,
    /// New forwarding rules (regional).
    #[serde(default)]
    #[schemars(length(max = 25))]
    pub forwarding_rules: Option<Vec<ForwardingRule>>,
    /// New health check.
    #[serde(default)]
    pub health_check: Option<HealthCheck>,
    /// New sticky sessions.
    #[serde(default)]
    pub sticky_sessions: Option<StickySessions>,
    /// New targets.
    #[serde(default)]
    pub targets: Option<Targets>,
    /// New size (regional).
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    pub size_unit: Option<u32>,
    /// Redirect HTTP to HTTPS.
    #[serde(default)]
    pub redirect_http_to_https: Option<bool>,
    /// New global settings (global).
    #[serde(default)]
    pub global_settings: Option<GlobalSettings>,
    /// New domains (global; 1–10).
    #[serde(default)]
    #[schemars(length(min = 1, max = MAX_DOMAINS))]
    pub domains: Option<Vec<Domain>>,
    /// Refuse (ABORTED) unless the load balancer's generation is this.
    #[serde(default)]
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

impl MethodInput for LoadBalancersUpdateInput {
    fn target(&self) -> Target {
        Target::LoadBalancer(self.tenant_id.clone(), self.load_balancer_id.clone())
    }
    fn example() -> Value {
        json!({
            "tenantId": ex::TENANT,
            "loadBalancerId": ex::LOAD_BALANCER,
            "targets": { "dropletIds": [3164444, 3164445] },
            "expectedGeneration": 1
        })
    }
}

/// A load balancer as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
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

pub(crate) fn methods() -> Vec<Method> {
    use Permission::{LoadBalancersManage as Manage, LoadBalancersRead as Read};
    use ResourceType::{ProviderAccount as OnAccount, ProviderLoadBalancer as OnLb};
    vec![
        Method::declare::<LoadBalancersCreateInput, Created<LoadBalancerView>>(
            LOAD_BALANCERS.method(
                "create",
                Kind::Write,
                Manage,
                OnAccount,
                "Records a load balancer on providerAccountId for poolId and returns it, state pending, booking one loadBalancers quota unit on the pool in the same transaction (RESOURCE_EXHAUSTED when none is free, or the pool has no quota row). A regional load balancer takes region, forwardingRules (1–25; udp pairs with udp) and targets (exactly one of tag or dropletIds, 1–10 of them), and optionally sizeUnit (1–100), stickySessions and redirectHttpToHttps. A global one takes no region and no forwardingRules, but globalSettings (targetProtocol http, https or http2; targetPort 80 or 443; cdn; regionPriorities; failoverThreshold), domains (at least one) and targets (exactly one of loadBalancerIds, regional load balancers of this system on the same account, tag or dropletIds). healthCheck defaults to http on port 80, path /, every 10 s with a 5 s timeout, healthy after 5 and unhealthy after 3. The name must be unique among the account's live load balancers. A repeat with the same requestId and the same body within 24 hours returns the first load balancer and creates nothing; the same requestId with another body is ALREADY_EXISTS. Decided as compute:load-balancers:manage on the provider account.",
            ),
            create,
        ),
        Method::declare::<LoadBalancerRef, LoadBalancerView>(
            LOAD_BALANCERS.method(
                "get",
                Kind::Read,
                Read,
                OnLb,
                "Returns the load balancer: loadBalancerId, tenantId, poolId, providerAccountId, providerLoadBalancerId once made, name, type, region, forwardingRules, healthCheck, stickySessions, targets, sizeUnit, redirectHttpToHttps, globalSettings and domains as recorded, ip once assigned, state with a message when there is something to fix, generation, createdAt, updatedAt, readyAt once it was first ready, and deletedAt once deleted. A load balancer of another tenant is NOT_FOUND. Decided as compute:load-balancers:read on the load balancer.",
            ),
            get,
        ),
        Method::declare::<LoadBalancersListInput, LoadBalancersListOutput>(
            LOAD_BALANCERS.method(
                "list",
                Kind::Read,
                Read,
                OnLb,
                "Lists the tenant's load balancers that the caller may read, by id, pageSize at a time (1–500, default 100), with nextPageToken while more remain; poolId and providerAccountId narrow it. Decided as compute:load-balancers:read on each load balancer; a grant on its provider account covers it.",
            ),
            list,
        ),
        Method::declare::<LoadBalancersUpdateInput, LoadBalancerView>(
            LOAD_BALANCERS.method(
                "update",
                Kind::Write,
                Manage,
                OnLb,
                "Replaces the fields given (name, forwardingRules, healthCheck, stickySessions, targets, sizeUnit, redirectHttpToHttps, globalSettings, domains) and returns the load balancer with its generation bumped; the provider gets the whole object again. type, region and the account are fixed. The result is checked whole, as a create is. With expectedGeneration, a load balancer changed since is ABORTED. Decided as compute:load-balancers:manage on the load balancer.",
            ),
            update,
        ),
        Method::declare::<LoadBalancerRef, LoadBalancerView>(
            LOAD_BALANCERS.method(
                "delete",
                Kind::Write,
                Manage,
                OnLb,
                "Asks for the load balancer to be deleted and returns it; it goes deleting, then deleted, its quota unit is released and its billing stops. Deleting a deleted load balancer returns it unchanged. Decided as compute:load-balancers:manage on the load balancer.",
            ),
            delete,
        ),
    ]
}

/// A global load balancer's `loadBalancerIds` must name live regional load balancers of
/// this system on the same account (SPEC §11), each checked in the tenant.
async fn check_target_balancers(
    ctx: &Ctx,
    tenant: &TenantId,
    account: &ProviderAccountId,
    targets: &Targets,
) -> Result<(), ApiError> {
    let mut violations = Vec::new();
    for (i, id) in targets.load_balancer_ids.iter().flatten().enumerate() {
        let target = ctx.store.load_balancer_get(tenant, id).await?;
        let usable = target.is_some_and(|t| {
            t.spec.kind == LoadBalancerType::Regional
                && t.provider_account_id == *account
                && !t.delete_requested
                && t.deleted_at.is_none()
        });
        if !usable {
            violations.push(FieldViolation::new(
                format!("targets.loadBalancerIds[{i}]"),
                format!("{id} is not a live regional load balancer of account {account}"),
            ));
        }
    }
    if violations.is_empty() {
        Ok(())
    } else {
        Err(DomainError::from_violations(&violations).into())
    }
}

async fn create(
    ctx: Ctx,
    call: Call<LoadBalancersCreateInput>,
) -> Result<Created<LoadBalancerView>, ApiError> {
    let input = &call.input;
    let account = call.access.account()?;
    let pool =
        ctx.store.pool_get(&input.tenant_id, &input.pool_id).await?.ok_or_else(|| {
            ApiError::not_found(format!("pool {} (poolId) not found", input.pool_id))
        })?;
    if pool.state == PoolState::Archived {
        return Err(ApiError::failed_precondition(format!(
            "pool {} is archived: a load balancer needs an active pool to book",
            pool.pool_id
        )));
    }
    let spec = input.spec();
    check_target_balancers(&ctx, &input.tenant_id, &account.provider_account_id, &spec.targets)
        .await?;
    let now = ctx.now();
    let lb = LoadBalancer {
        load_balancer_id: ctx.new_id(),
        tenant_id: input.tenant_id.clone(),
        pool_id: pool.pool_id.clone(),
        provider_account_id: account.provider_account_id.clone(),
        name: input.name.clone(),
        spec,
        generation: 1,
        created_at: now,
        delete_requested: false,
        provider_load_balancer_id: None,
        ip: None,
        status: ObservedStatus::pending(now),
        ready_at: None,
        deleted_at: None,
        quota_released: false,
    };
    // The quota unit is booked by the same transaction that records the load balancer:
    // with a limit of N, exactly N concurrent creates commit.
    let uow = UnitOfWork::new()
        .write(Write::InsertLoadBalancer(lb.clone()))
        .write(Write::BookQuota { pool_id: pool.pool_id, resource: QuotaResource::LoadBalancers })
        .enqueue(WorkKind::ProviderResources, lb.load_balancer_id.as_str(), now);
    ctx.commit_create(&call, uow, LoadBalancerView::from(&lb)).await
}

async fn get(_ctx: Ctx, call: Call<LoadBalancerRef>) -> Result<LoadBalancerView, ApiError> {
    Ok(LoadBalancerView::from(call.access.load_balancer()?))
}

async fn list(
    ctx: Ctx,
    call: Call<LoadBalancersListInput>,
) -> Result<LoadBalancersListOutput, ApiError> {
    let input = &call.input;
    let page = input.page(call.method)?;
    let filter = LoadBalancerFilter {
        pool_id: input.pool_id.clone(),
        provider_account_id: input.provider_account_id.clone(),
        include_deleted: false,
    };
    let scope = call.access.scope()?;
    let lbs = ctx.store.load_balancer_list(&input.tenant_id, scope, &filter, &page).await?;
    Ok(LoadBalancersListOutput::of(call.method, lbs, |l| LoadBalancerView::from(&l)))
}

/// Whether the load balancer's deletion was asked for (or is done).
fn is_deleting(lb: &LoadBalancer) -> bool {
    lb.delete_requested || lb.deleted_at.is_some()
}

async fn update(
    ctx: Ctx,
    call: Call<LoadBalancersUpdateInput>,
) -> Result<LoadBalancerView, ApiError> {
    let input = &call.input;
    let lb = call.access.load_balancer()?;
    if is_deleting(lb) {
        return Err(ApiError::failed_precondition(format!(
            "load balancer {} is being deleted",
            lb.load_balancer_id
        )));
    }
    let what = format!("load balancer {}", lb.load_balancer_id);
    check_generation(input.expected_generation, lb.generation, &what)?;
    let spec = input.apply(&lb.spec);
    let violations = validate_load_balancer(&spec, "");
    if !violations.is_empty() {
        return Err(DomainError::from_violations(&violations).into());
    }
    if input.targets.is_some() {
        check_target_balancers(&ctx, &lb.tenant_id, &lb.provider_account_id, &spec.targets).await?;
    }
    let name = input.name.clone().unwrap_or_else(|| lb.name.clone());
    if spec == lb.spec && name == lb.name {
        return Ok(LoadBalancerView::from(lb));
    }
    let updated = LoadBalancer { name, spec, generation: lb.generation + 1, ..lb.clone() };
    let now = ctx.now();
    let uow = UnitOfWork::new()
        .write(Write::UpdateLoadBalancer {
            load_balancer: updated.clone(),
            expected_generation: lb.generation,
        })
        .enqueue(WorkKind::ProviderResources, lb.load_balancer_id.as_str(), now);
    ctx.commit(uow).await?;
    Ok(LoadBalancerView::from(&updated))
}

async fn delete(ctx: Ctx, call: Call<LoadBalancerRef>) -> Result<LoadBalancerView, ApiError> {
    let lb = call.access.load_balancer()?;
    if is_deleting(lb) {
        return Ok(LoadBalancerView::from(lb));
    }
    let deleting =
        LoadBalancer { delete_requested: true, generation: lb.generation + 1, ..lb.clone() };
    let now = ctx.now();
    // The reconciler deletes it at the provider, then releases its quota unit once.
    let uow = UnitOfWork::new()
        .write(Write::UpdateLoadBalancer {
            load_balancer: deleting.clone(),
            expected_generation: lb.generation,
        })
        .enqueue(WorkKind::ProviderResources, lb.load_balancer_id.as_str(), now);
    ctx.commit(uow).await?;
    Ok(LoadBalancerView::from(&deleting))
}
