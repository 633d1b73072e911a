//! `pools.*` (SPEC §4): a tenant's pools and their policies.

use bc_api_types::pools as api;
pub use bc_api_types::pools::*;

use bc_domain::model::{ClusterMode, Pool, PoolState, ProviderAccount};
use bc_domain::policy::{ClusterPolicy, PoolPolicy, SubstratePolicy};
use bc_domain::ports::Permission;
use bc_domain::recipes::{NewPool, StartedSubstrate, pool_archived, pool_changed, pool_created};
use bc_domain::rules::plan::cluster_created_for;
use bc_domain::rules::policy::{check_policy_change, validate_policy};
use bc_domain::{FieldViolation, PoolId, ProviderAccountId, ResourceState, TenantId};
use serde_json::{Value, json};

use super::examples as ex;
use super::{check_generation, object_ref};
use crate::access::{Resolved, Target};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::list_cache::{PageJson, PageKey};
use crate::page::AnswerPage;
use crate::page::example_token;
use crate::page::{AskedPage, ListInput};
use crate::registry::{AlsoAuthorization, Call, Method, MethodId, MethodInput, ResourceType};
use crate::write::Created;

/// A policy for the examples: one substrate on the example account, two flavors.
fn example_policy() -> Value {
    json!({
        "substrate": {
            "kind": "kubernetes",
            "account": ex::ACCOUNT,
            "cluster": { "create": { "region": "nyc1", "version": "latest", "highAvailability": false } }
        },
        "flavors": [
            { "name": "cpu", "size": "s-2vcpu-4gb", "count": 3 },
            { "name": "gpu", "size": "gpu-h100x1-80gb", "autoScale": { "min": 0, "max": 4 } }
        ],
        "upgrades": "drain"
    })
}

/// SPEC §3: a policy's substrate acts on its provider account.
const SUBSTRATE_ACCOUNT: AlsoAuthorization = AlsoAuthorization {
    permission: Permission::KubernetesManage,
    on: ResourceType::ProviderAccount,
    field: "policy.substrate.account",
};

/// The provider account a policy's substrate names, as a target in `tenant`.
fn substrate_target(tenant: &TenantId, policy: &PoolPolicy) -> Vec<(AlsoAuthorization, Target)> {
    let Some(substrate) = policy.substrate.as_ref() else { return Vec::new() };
    let Ok(account) = ProviderAccountId::parse(&substrate.account) else { return Vec::new() };
    vec![(SUBSTRATE_ACCOUNT, Target::ProviderAccount(tenant.clone(), account))]
}

impl MethodInput for PoolsCreateInput {
    const ALSO: &'static [AlsoAuthorization] = &[SUBSTRATE_ACCOUNT];

    fn target(&self) -> Target {
        Target::Tenant(self.tenant_id.clone())
    }
    fn also(&self) -> Vec<(AlsoAuthorization, Target)> {
        substrate_target(&self.tenant_id, &self.policy)
    }
    fn validate(&self) -> Vec<FieldViolation> {
        validate_policy(&self.policy, "policy")
    }
    fn example() -> Value {
        json!({ "tenantId": ex::TENANT, "name": "web", "policy": example_policy(), "requestId": "create-web-1" })
    }
}

object_ref!(
    PoolRef, pool_id: PoolId, Pool, "poolId" = ex::POOL
);

impl MethodInput for PoolsListInput {
    fn target(&self) -> Target {
        Target::list(&self.tenant_id, None)
    }
    fn example() -> Value {
        let pool: PoolId = ex::POOL.parse().expect("the example pool id is valid");
        let next = example_token(MethodId { resource: "pools", name: "list" }, pool);
        json!({ "tenantId": ex::TENANT, "pageSize": 50, "pageToken": next })
    }
}

impl MethodInput for PoolsUpdateInput {
    const ALSO: &'static [AlsoAuthorization] = &[SUBSTRATE_ACCOUNT];

    fn target(&self) -> Target {
        Target::Pool(self.tenant_id.clone(), self.pool_id.clone())
    }
    fn also(&self) -> Vec<(AlsoAuthorization, Target)> {
        substrate_target(&self.tenant_id, &self.policy)
    }
    fn validate(&self) -> Vec<FieldViolation> {
        validate_policy(&self.policy, "policy")
    }
    fn example() -> Value {
        json!({ "tenantId": ex::TENANT, "poolId": ex::POOL, "policy": example_policy(), "expectedGeneration": 1 })
    }
}

pub(crate) fn methods() -> Vec<Method> {
    vec![
        Method::declare(api::Create, create),
        Method::declare(api::Get, get),
        Method::declare(api::List, list),
        Method::declare(api::Update, update),
        Method::declare(api::Archive, archive),
    ]
}

/// The provider account the call's substrate names, as authorized with the call
/// (`compute:kubernetes:manage` on it, SPEC §3).
fn substrate_account<I>(call: &Call<I>) -> Result<&ProviderAccount, ApiError> {
    match call.also.first() {
        Some(Resolved::ProviderAccount(a)) => Ok(a),
        _ => Err(ApiError::internal("a substrate without its authorized account")),
    }
}

/// SPEC §6: a cluster created for a pool's substrate belongs to that pool (archiving it
/// deletes the cluster), so `substrate` may not adopt it from another pool (`pool`); nor
/// may it adopt a cluster whose deletion is pending, nor a known autopilot cluster (a
/// substrate's cluster is standard: an autopilot one takes no node pools; one not known
/// here is refused by the substrate reconciler, once it reads it).
async fn refuse_adopting_a_pools_cluster(
    ctx: &Ctx,
    account: &ProviderAccount,
    substrate: &SubstratePolicy,
    pool: Option<&PoolId>,
) -> Result<(), ApiError> {
    let ClusterPolicy::Adopt(adopt) = &substrate.cluster else { return Ok(()) };
    let id = &adopt.provider_cluster_id;
    let Some(row) = ctx.store.cluster_find_by_provider_id(&account.provider_account_id, id).await?
    else {
        return Ok(());
    };
    if row.mode == ClusterMode::Autopilot {
        return Err(ApiError::failed_precondition(format!(
            "cluster {id} (policy.substrate.cluster.adopt.providerClusterId) is an autopilot cluster, which takes no node pools: adopt a standard cluster, or let the substrate create one (policy.substrate.cluster.create)"
        )));
    }
    // A pool that adopted it before the deletion was asked keeps its row until its
    // teardown; no other pool adopts a cluster about to go.
    if row.delete_requested && pool.is_none_or(|p| !row.substrate_pool_ids.contains(p)) {
        return Err(ApiError::failed_precondition(format!(
            "cluster {id} (policy.substrate.cluster.adopt.providerClusterId) is being deleted (kubernetesClusters.delete of {} is pending): adopt another cluster",
            row.cluster_id
        )));
    }
    let users = ctx.store.substrate_list_by_cluster(&row.cluster_id).await?;
    match cluster_created_for(&users, pool) {
        Some(owner) => Err(ApiError::failed_precondition(format!(
            "cluster {id} (policy.substrate.cluster.adopt.providerClusterId) was created for pool {owner} and is deleted with it: add a flavor to pool {owner} instead of adopting its cluster"
        ))),
        None => Ok(()),
    }
}

async fn create(ctx: Ctx, call: Call<PoolsCreateInput>) -> Result<Created<Pool>, ApiError> {
    let input = &call.input;
    let new = NewPool {
        pool_id: ctx.new_id(),
        tenant_id: input.tenant_id.clone(),
        name: input.name.clone(),
        policy: input.policy.clone(),
    };
    let mut started = None;
    if let Some(substrate) = &input.policy.substrate {
        let account = substrate_account(&call)?;
        refuse_adopting_a_pools_cluster(&ctx, account, substrate, None).await?;
        started = Some(start_substrate(&ctx, account));
    }
    let made = pool_created(new, &ctx.settings.default_pool_quotas, started.as_ref(), ctx.now());
    ctx.commit_create(&call, made.uow, made.record).await
}

/// A substrate started now on `account`, with a new event id.
fn start_substrate(ctx: &Ctx, account: &ProviderAccount) -> StartedSubstrate {
    StartedSubstrate { account: account.provider_account_id.clone(), event_id: ctx.new_id() }
}

async fn get(_ctx: Ctx, call: Call<PoolRef>) -> Result<Pool, ApiError> {
    Ok(call.access.pool()?.clone())
}

/// A page of pools. Without object policies (nothing hides a pool the scope lets
/// through) the page depends on the store and the [`PageKey`] alone, so one answered
/// before is answered again while the tenant's pools' version stands (`list_cache`).
async fn list(ctx: Ctx, call: Call<PoolsListInput>) -> Result<PageJson<PoolsListOutput>, ApiError> {
    let input = &call.input;
    let page = input.page(call.method)?;
    let scope = call.access.scope()?;
    let kept = if crate::access::filters_items(&ctx, &call.caller) {
        None
    } else {
        // Read before the page: the page is then at least as new as this version.
        let version = ctx.store.pool_list_version(&input.tenant_id).await?;
        let key = PageKey {
            method: call.method,
            tenant: input.tenant_id.clone(),
            scope: scope.clone(),
            filters: u64::from(input.include_archived),
            page_size: input.page_size().map(|s| s.get()),
            page_token: input.page_token().map(|t| t.as_str().to_owned()),
        };
        if let Some(hit) = ctx.list_cache.get(&key, version) {
            return Ok(hit);
        }
        Some((key, version))
    };
    let mut pools =
        ctx.store.pool_list(&input.tenant_id, scope, input.include_archived, &page).await?;
    let read = bc_domain::ports::Permission::PoolsRead;
    pools.items = crate::access::readable_items(&ctx, &call.caller, read, pools.items, |p| {
        Some(crate::access::Resolved::Pool(p.clone()).chain())
    });
    let answer = PageJson::of(call.method, &PoolsListOutput::of(call.method, pools, |p| p))?;
    if let Some((key, version)) = kept {
        ctx.list_cache.put(key, version, &answer);
    }
    Ok(answer)
}

async fn update(ctx: Ctx, call: Call<PoolsUpdateInput>) -> Result<Pool, ApiError> {
    let input = &call.input;
    let pool = call.access.pool()?;
    if pool.state == PoolState::Archived {
        return Err(ApiError::failed_precondition(format!(
            "pool {} is archived: its policy no longer changes (create a new pool)",
            pool.pool_id
        )));
    }
    check_generation(
        input.expected_generation,
        pool.generation,
        &format!("pool {}", pool.pool_id),
    )?;
    check_policy_change(&pool.policy, &input.policy)?;
    if input.policy == pool.policy {
        return Ok(pool.clone());
    }
    let mut started = None;
    if let (None, Some(substrate)) = (&pool.policy.substrate, &input.policy.substrate) {
        let account = substrate_account(&call)?;
        refuse_adopting_a_pools_cluster(&ctx, account, substrate, Some(&pool.pool_id)).await?;
        let previous = ctx.store.substrate_get(&pool.tenant_id, &pool.pool_id).await?;
        if let Some(p) = previous.filter(|p| p.state != ResourceState::Deleted) {
            return Err(ApiError::failed_precondition(format!(
                "the previous substrate of pool {} is still {}: wait until it is deleted, then set the new one",
                pool.pool_id,
                p.state.as_str()
            )));
        }
        started = Some(start_substrate(&ctx, account));
    }
    let changed = pool_changed(pool, input.policy.clone(), started.as_ref(), ctx.now());
    ctx.commit(changed.uow).await?;
    Ok(changed.record)
}

async fn archive(ctx: Ctx, call: Call<PoolRef>) -> Result<Pool, ApiError> {
    let pool = call.access.pool()?;
    if pool.state == PoolState::Archived {
        return Ok(pool.clone());
    }
    let archived = pool_archived(pool, ctx.now());
    ctx.commit(archived.uow).await?;
    Ok(archived.record)
}
