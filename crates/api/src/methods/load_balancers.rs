//! `loadBalancers.*` (SPEC §11): regional and global load balancers on provider accounts.

use bc_api_types::load_balancers as api;
pub use bc_api_types::load_balancers::*;

use bc_domain::model::{LoadBalancer, LoadBalancerType, PoolState, Targets};
use bc_domain::ports::{LoadBalancerFilter, Permission};
use bc_domain::recipes::{
    NewLoadBalancer, load_balancer_changed, load_balancer_created, load_balancer_deleted,
};
use bc_domain::rules::load_balancer::validate_load_balancer;
use bc_domain::{Error as DomainError, FieldViolation, ProviderAccountId, TenantId};
use serde_json::{Value, json};

use super::examples as ex;
use super::{check_generation, object_ref};
use crate::access::{Resolved, Target};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::page::AnswerPage;
use crate::page::AskedPage;
use crate::registry::{AlsoAuthorization, Call, Method, MethodInput, ResourceType};
use crate::write::Created;

/// SPEC §3: a load balancer books its pool's quota and bills to it.
const POOL: AlsoAuthorization = AlsoAuthorization {
    permission: Permission::LoadBalancersManage,
    on: ResourceType::Pool,
    field: "poolId",
};

/// SPEC §3: a global load balancer sends traffic to the regional ones it names.
const TARGET_BALANCERS: AlsoAuthorization = AlsoAuthorization {
    permission: Permission::LoadBalancersManage,
    on: ResourceType::ProviderLoadBalancer,
    field: "targets.loadBalancerIds",
};

/// Each load balancer `targets` names, as a target in `tenant`.
fn target_balancers(tenant: &TenantId, targets: &Targets) -> Vec<(AlsoAuthorization, Target)> {
    let ids = targets.load_balancer_ids.iter().flatten();
    ids.map(|id| (TARGET_BALANCERS, Target::LoadBalancer(tenant.clone(), id.clone()))).collect()
}

impl MethodInput for LoadBalancersCreateInput {
    const ALSO: &'static [AlsoAuthorization] = &[POOL, TARGET_BALANCERS];
    // The handler only reads (and asks the account's provider what it offers, no call)
    // before its one commit: a repeat is recognised there, a read fewer per create.
    const REPLAY_AT_COMMIT: bool = true;

    fn target(&self) -> Target {
        Target::ProviderAccount(self.tenant_id.clone(), self.provider_account_id.clone())
    }
    fn also(&self) -> Vec<(AlsoAuthorization, Target)> {
        let pool = (POOL, Target::Pool(self.tenant_id.clone(), self.pool_id.clone()));
        let mut also = vec![pool];
        also.extend(target_balancers(&self.tenant_id, &self.targets));
        also
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
}

object_ref!(
    LoadBalancerRef, load_balancer_id: LoadBalancerId, LoadBalancer, "loadBalancerId" = ex::LOAD_BALANCER
);

impl MethodInput for LoadBalancersListInput {
    fn target(&self) -> Target {
        Target::list_in_account(&self.tenant_id, self.provider_account_id.as_ref())
    }
    fn example() -> Value {
        json!({ "tenantId": ex::TENANT, "poolId": ex::POOL })
    }
}

impl MethodInput for LoadBalancersUpdateInput {
    const ALSO: &'static [AlsoAuthorization] = &[TARGET_BALANCERS];

    fn target(&self) -> Target {
        Target::LoadBalancer(self.tenant_id.clone(), self.load_balancer_id.clone())
    }
    fn also(&self) -> Vec<(AlsoAuthorization, Target)> {
        self.targets.as_ref().map_or_else(Vec::new, |t| target_balancers(&self.tenant_id, t))
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

pub(crate) fn methods() -> Vec<Method> {
    vec![
        Method::declare(api::Create, create),
        Method::declare(api::Get, get),
        Method::declare(api::List, list),
        Method::declare(api::Update, update),
        Method::declare(api::Delete, delete),
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
    // The account's provider declares which load balancers it offers (no call: a static
    // fact); one it lacks is refused naming it (SPEC §11: none on gke yet).
    let provider = ctx
        .providers
        .provider_for(account)
        .await
        .map_err(|e| ApiError::provider("opening the account", &e))?;
    if let Some(lack) = provider.offer().lacks_load_balancer(input.kind) {
        return Err(ApiError::failed_precondition(format!(
            "{lack} (account {}): create load balancers on an account of a provider that offers them",
            account.provider_account_id
        )));
    }
    // Looked up and authorized with the call (`compute:load-balancers:manage` on it).
    let Some(Resolved::Pool(pool)) = call.also.first().cloned() else {
        return Err(ApiError::internal("a load balancer without its authorized pool"));
    };
    if pool.state == PoolState::Archived {
        return Err(ApiError::failed_precondition(format!(
            "pool {} is archived: a load balancer needs an active pool to book",
            pool.pool_id
        )));
    }
    let spec = input.spec();
    check_target_balancers(&ctx, &input.tenant_id, &account.provider_account_id, &spec.targets)
        .await?;
    let new = NewLoadBalancer {
        load_balancer_id: ctx.new_id(),
        tenant_id: input.tenant_id.clone(),
        pool_id: pool.pool_id.clone(),
        provider_account_id: account.provider_account_id.clone(),
        name: input.name.clone(),
        spec,
    };
    let made = load_balancer_created(new, ctx.now());
    ctx.commit_create(&call, made.uow, LoadBalancerView::from(&made.record)).await
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
    let mut lbs = ctx.store.load_balancer_list(&input.tenant_id, scope, &filter, &page).await?;
    lbs.items = crate::access::readable_items(
        &ctx,
        &call.caller,
        bc_domain::ports::Permission::LoadBalancersRead,
        lbs.items,
        |l| Some(crate::access::Resolved::LoadBalancer(l.clone()).chain()),
    );
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
    let changed = load_balancer_changed(lb, name, spec, ctx.now());
    ctx.commit(changed.uow).await?;
    Ok(LoadBalancerView::from(&changed.record))
}

async fn delete(ctx: Ctx, call: Call<LoadBalancerRef>) -> Result<LoadBalancerView, ApiError> {
    let lb = call.access.load_balancer()?;
    if is_deleting(lb) {
        return Ok(LoadBalancerView::from(lb));
    }
    // The reconciler deletes it at the provider, then releases its quota unit once.
    let deleting = load_balancer_deleted(lb, ctx.now());
    ctx.commit(deleting.uow).await?;
    Ok(LoadBalancerView::from(&deleting.record))
}
