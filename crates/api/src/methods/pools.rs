//! `pools.*` (SPEC §4): a tenant's pools and their policies.

use bc_domain::model::{
    INTEGER_MAX, NewEvent, Pool, PoolState, ProviderAccount, Substrate, subjects,
};
use bc_domain::policy::{PoolPolicy, SubstratePolicy};
use bc_domain::ports::{Permission, UnitOfWork, WorkKind, Write};
use bc_domain::rules::policy::{check_policy_change, validate_policy};
use bc_domain::{
    FieldViolation, ObjectName, PoolId, ProviderAccountId, RequestId, ResourceState, TenantId,
    Timestamp,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::examples as ex;
use super::{check_generation, list_input, list_output, object_ref};
use crate::access::{Resolved, Target};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::page::example_token;
use crate::registry::{
    AlsoAuthorization, Call, Kind, Method, MethodId, MethodInput, Resource, ResourceType,
};
use crate::write::Created;

pub(crate) static POOLS: Resource = Resource {
    name: "pools",
    page: "pools",
    module: "pools",
    description: "A pool is a tenant's group of compute, described by its `policy`: the `flavors` of node it is made of (each a provider size and a fixed `count` or `autoScale` bounds, with optional labels and taints) and, when it has a `substrate`, the managed Kubernetes cluster behind it ([kubernetesSubstrates](/docs/reference/api/kubernetes-substrates)). Every call records what the tenant wants and returns at once; the `kubernetes.substrates` reconciler converges the substrate to the policy. A pool's name is unique among the tenant's active pools; archiving a pool frees its name and tears its substrate down. Every accepted change bumps the pool's `generation`.",
};

/// Input of `pools.create`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PoolsCreateInput {
    /// The tenant that will own the pool.
    pub tenant_id: TenantId,
    /// Unique among the tenant's active pools.
    pub name: ObjectName,
    /// Flavors, and the substrate if any.
    pub policy: PoolPolicy,
    /// Idempotency key: a repeat within 24 h returns the first result.
    #[serde(default)]
    pub request_id: Option<RequestId>,
}

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
fn substrate_target(tenant: &TenantId, policy: &PoolPolicy) -> Option<Target> {
    let account = ProviderAccountId::parse(&policy.substrate.as_ref()?.account).ok()?;
    Some(Target::ProviderAccount(tenant.clone(), account))
}

impl MethodInput for PoolsCreateInput {
    const ALSO: Option<AlsoAuthorization> = Some(SUBSTRATE_ACCOUNT);

    fn target(&self) -> Target {
        Target::Tenant(self.tenant_id.clone())
    }
    fn also(&self) -> Option<Target> {
        substrate_target(&self.tenant_id, &self.policy)
    }
    fn validate(&self) -> Vec<FieldViolation> {
        validate_policy(&self.policy, "policy")
    }
    fn example() -> Value {
        json!({ "tenantId": ex::TENANT, "name": "web", "policy": example_policy(), "requestId": "create-web-1" })
    }
    fn request_id(&self) -> Option<&RequestId> {
        self.request_id.as_ref()
    }
}

object_ref!(
    /// Input of `pools.get`, `pools.archive` and `quotas.list`.
    PoolRef, pool_id: PoolId, Pool, "poolId" = ex::POOL
);

list_input!(
    /// Input of `pools.list`.
    PoolsListInput {
        /// Include archived pools.
        #[serde(default)]
        include_archived: bool,
    }
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

list_output!(
    /// Output of `pools.list`.
    PoolsListOutput, pools, Pool
);

/// Input of `pools.update`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PoolsUpdateInput {
    /// The pool's tenant.
    pub tenant_id: TenantId,
    /// The pool.
    pub pool_id: PoolId,
    /// The whole new policy.
    pub policy: PoolPolicy,
    /// Refuse (ABORTED) unless the pool's generation is this.
    #[serde(default)]
    #[schemars(range(max = INTEGER_MAX))]
    pub expected_generation: Option<u64>,
}

impl MethodInput for PoolsUpdateInput {
    const ALSO: Option<AlsoAuthorization> = Some(SUBSTRATE_ACCOUNT);

    fn target(&self) -> Target {
        Target::Pool(self.tenant_id.clone(), self.pool_id.clone())
    }
    fn also(&self) -> Option<Target> {
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
    use Permission::{PoolsManage, PoolsRead};
    use ResourceType::{ComputeTenant, Pool as OnPool};
    vec![
        Method::declare::<PoolsCreateInput, Created<Pool>>(
            POOLS.method(
                "create",
                Kind::Write,
                PoolsManage,
                ComputeTenant,
                "Creates a pool owned by tenantId with the given name and policy, and returns it: state active, generation 1. The name must be unique among the tenant's active pools (ALREADY_EXISTS otherwise). The policy is checked whole and every violation is named with its JSON path, e.g. policy.flavors[1].name; a substrate's account must be a provider account of the same tenant, on which the caller also needs compute:kubernetes:manage (the substrate makes or adopts clusters there). With a substrate, the kubernetes.substrates reconciler starts making it at once: follow it with kubernetesSubstrates.get. A repeat with the same requestId and the same body within 24 hours returns the first pool and creates nothing; the same requestId with another body is ALREADY_EXISTS. Decided as compute:pools:manage on the tenant and, with a substrate, compute:kubernetes:manage on its provider account.",
            ),
            create,
        ),
        Method::declare::<PoolRef, Pool>(
            POOLS.method(
                "get",
                Kind::Read,
                PoolsRead,
                OnPool,
                "Returns the pool: poolId, tenantId, name, policy, state (active or archived), generation, createdAt, updatedAt and, once archived, archivedAt. A pool of another tenant is NOT_FOUND. Decided as compute:pools:read on the pool.",
            ),
            get,
        ),
        Method::declare::<PoolsListInput, PoolsListOutput>(
            POOLS.method(
                "list",
                Kind::Read,
                PoolsRead,
                OnPool,
                "Lists the tenant's pools that the caller may read, by id (that is, by creation), pageSize at a time (1–500, default 100), with nextPageToken while more remain: pass it back as pageToken for the next page. Archived pools are left out unless includeArchived is true. Decided as compute:pools:read on each pool, so a caller whose grants cover some pools only sees those.",
            ),
            list,
        ),
        Method::declare::<PoolsUpdateInput, Pool>(
            POOLS.method(
                "update",
                Kind::Write,
                PoolsManage,
                OnPool,
                "Replaces the pool's policy and returns the pool with its generation bumped; the substrate converges to it. With expectedGeneration, a pool changed since is ABORTED and nothing is written. An archived pool is FAILED_PRECONDITION. Changes no provider can make to a live cluster (another substrate.account, create to adopt or back, another adopted providerClusterId, another region or cluster name, turning highAvailability off) are FAILED_PRECONDITION: remove the substrate first. Flavors, the version and upgrades change in place. Decided as compute:pools:manage on the pool and, while the policy has a substrate, compute:kubernetes:manage on its provider account.",
            ),
            update,
        ),
        Method::declare::<PoolRef, Pool>(
            POOLS.method(
                "archive",
                Kind::Write,
                PoolsManage,
                OnPool,
                "Archives the pool and returns it: state archived, with archivedAt. Its name is free again, and its substrate, if any, is torn down: the DaemonSet, Secret, ServiceAccount and Namespace it applied, then its node pools (adopt mode) or the cluster it created (create mode); the tenant's own node pools and objects are never touched. Archiving an archived pool returns it unchanged. Decided as compute:pools:manage on the pool.",
            ),
            archive,
        ),
    ]
}

/// The pool's first substrate row: `pending`, nothing observed (contracts.md: the API
/// records it so `kubernetesSubstrates.get` answers at once), its event and its work.
fn add_substrate(
    ctx: &Ctx,
    uow: UnitOfWork,
    pool: &Pool,
    account: &ProviderAccount,
    substrate: &SubstratePolicy,
    now: Timestamp,
) -> UnitOfWork {
    let row = Substrate::pending(
        pool.pool_id.clone(),
        pool.tenant_id.clone(),
        account.provider_account_id.clone(),
        substrate,
        now,
    );
    let event = NewEvent {
        event_id: ctx.new_id(),
        tenant_id: pool.tenant_id.clone(),
        subject: subjects::pool(&pool.pool_id),
        kind: format!("kubernetes.substrate.{}", ResourceState::Pending.as_str()),
        time: now,
        data: json!({ "poolId": pool.pool_id, "state": ResourceState::Pending }),
    };
    uow.write(Write::PutSubstrate(row)).event(event).enqueue(
        WorkKind::Substrates,
        pool.pool_id.as_str(),
        now,
    )
}

/// The provider account the call's substrate names, as authorized with the call
/// (`compute:kubernetes:manage` on it, SPEC §3).
fn substrate_account<I>(call: &Call<I>) -> Result<&ProviderAccount, ApiError> {
    match &call.also {
        Some(Resolved::ProviderAccount(a)) => Ok(a),
        _ => Err(ApiError::internal("a substrate without its authorized account")),
    }
}

async fn create(ctx: Ctx, call: Call<PoolsCreateInput>) -> Result<Created<Pool>, ApiError> {
    let input = &call.input;
    let now = ctx.now();
    let pool = Pool {
        pool_id: ctx.new_id(),
        tenant_id: input.tenant_id.clone(),
        name: input.name.clone(),
        policy: input.policy.clone(),
        state: PoolState::Active,
        generation: 1,
        created_at: now,
        updated_at: now,
        archived_at: None,
    };
    let mut uow = UnitOfWork::new().write(Write::InsertPool(pool.clone()));
    for (&resource, &limit) in &ctx.settings.default_pool_quotas {
        uow = uow.write(Write::SetQuota { pool_id: pool.pool_id.clone(), resource, limit });
    }
    if let Some(substrate) = &pool.policy.substrate {
        let account = substrate_account(&call)?;
        uow = add_substrate(&ctx, uow, &pool, account, substrate, now);
    }
    ctx.commit_create(&call, uow, pool).await
}

async fn get(_ctx: Ctx, call: Call<PoolRef>) -> Result<Pool, ApiError> {
    Ok(call.access.pool()?.clone())
}

async fn list(ctx: Ctx, call: Call<PoolsListInput>) -> Result<PoolsListOutput, ApiError> {
    let input = &call.input;
    let page = input.page(call.method)?;
    let scope = call.access.scope()?;
    let pools = ctx.store.pool_list(&input.tenant_id, scope, input.include_archived, &page).await?;
    Ok(PoolsListOutput::of(call.method, pools, |p| p))
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
    let now = ctx.now();
    let updated = Pool {
        policy: input.policy.clone(),
        generation: pool.generation + 1,
        updated_at: now,
        ..pool.clone()
    };
    let mut uow = UnitOfWork::new()
        .write(Write::UpdatePool { pool: updated.clone(), expected_generation: pool.generation });
    match (&pool.policy.substrate, &updated.policy.substrate) {
        (None, Some(substrate)) => {
            let account = substrate_account(&call)?;
            let previous = ctx.store.substrate_get(&pool.tenant_id, &pool.pool_id).await?;
            if let Some(p) = previous.filter(|p| p.state != ResourceState::Deleted) {
                return Err(ApiError::failed_precondition(format!(
                    "the previous substrate of pool {} is still {}: wait until it is deleted, then set the new one",
                    pool.pool_id,
                    p.state.as_str()
                )));
            }
            uow = add_substrate(&ctx, uow, &updated, account, substrate, now);
        }
        // Changed or removed: the reconciler converges or tears it down.
        (Some(_), _) => uow = uow.enqueue(WorkKind::Substrates, pool.pool_id.as_str(), now),
        (None, None) => {}
    }
    ctx.commit(uow).await?;
    Ok(updated)
}

async fn archive(ctx: Ctx, call: Call<PoolRef>) -> Result<Pool, ApiError> {
    let pool = call.access.pool()?;
    if pool.state == PoolState::Archived {
        return Ok(pool.clone());
    }
    let now = ctx.now();
    let archived = Pool {
        state: PoolState::Archived,
        archived_at: Some(now),
        generation: pool.generation + 1,
        updated_at: now,
        ..pool.clone()
    };
    let mut uow = UnitOfWork::new()
        .write(Write::UpdatePool { pool: archived.clone(), expected_generation: pool.generation });
    if pool.policy.substrate.is_some() {
        uow = uow.enqueue(WorkKind::Substrates, pool.pool_id.as_str(), now);
    }
    ctx.commit(uow).await?;
    Ok(archived)
}
