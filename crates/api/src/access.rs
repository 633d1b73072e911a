//! The authorization step every method passes before its handler (SPEC §2, §3): the
//! existence gate, the lookup of the object the call names (another tenant's is
//! `NOT_FOUND`), and the Cedar decision on that object's scope chain, or, for a list, the
//! readable scope it is filtered by; then, for a call that also acts on a second object
//! (a pool's substrate on its provider account), the same lookup and decision there.
//!
//! Invariants: the gate is decided from the token's grants before any read, so a caller
//! with no grant in the named tenant gets `PERMISSION_DENIED` and learns nothing; a
//! decision on `compute-tenant` or `compute-system` is made before the object is looked
//! up; an object of another tenant is indistinguishable from an absent one.

use bc_domain::model::{
    ApiToken, Booking, KubernetesCluster, LoadBalancer, NodePool, Pool, ProviderAccount, Scope,
};
use bc_domain::ports::{Permission, ReadScope};
use bc_domain::{
    BookingId, ClusterId, ErrorCode, LoadBalancerId, NodePoolId, PoolId, ProviderAccountId,
    TenantId,
};

use crate::auth::Caller;
use crate::authz::{has_grant_in, readable_scope};
use crate::ctx::Ctx;
use crate::error::{ApiError, Code};
use bc_api_types::meta::{AlsoAuthorization, Authorization, MethodInfo, ResourceType};

/// What a call acts on: declared by its input ([`crate::registry::MethodInput::target`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// An agent method: no tenant, no grants.
    Agent,
    /// The tenant itself (creates of top-level objects, billing, events).
    Tenant(TenantId),
    /// A pool of the tenant.
    Pool(TenantId, PoolId),
    /// A provider account of the tenant.
    ProviderAccount(TenantId, ProviderAccountId),
    /// A Kubernetes cluster of the tenant.
    Cluster(TenantId, ClusterId),
    /// A node pool of the tenant.
    NodePool(TenantId, NodePoolId),
    /// A load balancer of the tenant.
    LoadBalancer(TenantId, LoadBalancerId),
    /// A booking of the tenant (decided on its pool).
    Booking(TenantId, BookingId),
    /// A list in the tenant, inside a parent object when `within` is set.
    List {
        /// The tenant.
        tenant: TenantId,
        /// The parent the list is inside (e.g. the cluster of a node-pool list).
        within: Option<Box<Target>>,
    },
}

impl Target {
    /// A list in `tenant`, optionally inside `within`.
    pub fn list(tenant: &TenantId, within: Option<Target>) -> Self {
        Target::List { tenant: tenant.clone(), within: within.map(Box::new) }
    }

    /// A list in `tenant`, inside `account` when one is given.
    pub fn list_in_account(tenant: &TenantId, account: Option<&ProviderAccountId>) -> Self {
        Self::list(tenant, account.map(|a| Target::ProviderAccount(tenant.clone(), a.clone())))
    }

    /// The tenant the call names.
    pub fn tenant(&self) -> Option<&TenantId> {
        match self {
            Target::Agent => None,
            Target::Tenant(t)
            | Target::Pool(t, _)
            | Target::ProviderAccount(t, _)
            | Target::Cluster(t, _)
            | Target::NodePool(t, _)
            | Target::LoadBalancer(t, _)
            | Target::Booking(t, _)
            | Target::List { tenant: t, .. } => Some(t),
        }
    }
}

/// An object a call named, as looked up to authorize it (handlers may use it instead of
/// reading it again).
#[derive(Debug, Clone, PartialEq)]
pub enum Resolved {
    /// A pool.
    Pool(Pool),
    /// A provider account (not deleted).
    ProviderAccount(ProviderAccount),
    /// A cluster.
    Cluster(KubernetesCluster),
    /// A node pool and its cluster.
    NodePool {
        /// The node pool.
        node_pool: NodePool,
        /// Its cluster.
        cluster: KubernetesCluster,
    },
    /// A load balancer.
    LoadBalancer(LoadBalancer),
    /// A booking.
    Booking(Booking),
}

impl Resolved {
    /// The object's scope chain: itself first, each container after, `compute-system` last.
    pub fn chain(&self) -> Vec<Scope> {
        let tenant_and_system = |t: &TenantId| [Scope::Tenant(t.clone()), Scope::System];
        let mut chain = Vec::with_capacity(5);
        match self {
            Resolved::Pool(p) => {
                chain.push(Scope::Pool(p.pool_id.clone()));
                chain.extend(tenant_and_system(&p.tenant_id));
            }
            Resolved::ProviderAccount(a) => {
                chain.push(Scope::ProviderAccount(a.provider_account_id.clone()));
                chain.extend(tenant_and_system(&a.tenant_id));
            }
            Resolved::Cluster(c) => {
                chain.push(Scope::KubernetesCluster(c.cluster_id.clone()));
                chain.push(Scope::ProviderAccount(c.provider_account_id.clone()));
                chain.extend(tenant_and_system(&c.tenant_id));
            }
            Resolved::NodePool { node_pool, cluster } => {
                chain.push(Scope::KubernetesNodePool(node_pool.node_pool_id.clone()));
                chain.push(Scope::KubernetesCluster(cluster.cluster_id.clone()));
                chain.push(Scope::ProviderAccount(cluster.provider_account_id.clone()));
                chain.extend(tenant_and_system(&cluster.tenant_id));
            }
            Resolved::LoadBalancer(l) => {
                chain.push(Scope::LoadBalancer(l.load_balancer_id.clone()));
                chain.push(Scope::ProviderAccount(l.provider_account_id.clone()));
                chain.extend(tenant_and_system(&l.tenant_id));
            }
            Resolved::Booking(b) => {
                chain.push(Scope::Pool(b.pool_id.clone()));
                chain.extend(tenant_and_system(&b.tenant_id));
            }
        }
        chain
    }
}

/// What the authorization step allowed, handed to the handler.
#[derive(Debug, Clone, PartialEq)]
pub enum Access {
    /// An agent method (authenticated by its own credential).
    Agent,
    /// The permission holds on the tenant (or on `compute-system`).
    Tenant,
    /// The permission holds on the named object, looked up here.
    Object(Resolved),
    /// A list: what it may show, and its parent object, looked up here.
    List {
        /// The readable scope.
        scope: ReadScope,
        /// The parent the list is inside.
        parent: Option<Resolved>,
    },
}

/// The object an `Access` was expected to carry, missing: a declaration bug.
fn not_resolved(what: &str) -> ApiError {
    ApiError::internal(format!("the method's target resolved no {what}"))
}

impl Access {
    /// The pool the call was authorized on.
    pub fn pool(&self) -> Result<&Pool, ApiError> {
        match self {
            Access::Object(Resolved::Pool(p)) => Ok(p),
            _ => Err(not_resolved("pool")),
        }
    }

    /// The provider account the call was authorized on.
    pub fn account(&self) -> Result<&ProviderAccount, ApiError> {
        match self {
            Access::Object(Resolved::ProviderAccount(a)) => Ok(a),
            _ => Err(not_resolved("provider account")),
        }
    }

    /// The cluster the call was authorized on.
    pub fn cluster(&self) -> Result<&KubernetesCluster, ApiError> {
        match self {
            Access::Object(Resolved::Cluster(c)) => Ok(c),
            _ => Err(not_resolved("cluster")),
        }
    }

    /// The node pool the call was authorized on, and its cluster.
    pub fn node_pool(&self) -> Result<(&NodePool, &KubernetesCluster), ApiError> {
        match self {
            Access::Object(Resolved::NodePool { node_pool, cluster }) => Ok((node_pool, cluster)),
            _ => Err(not_resolved("node pool")),
        }
    }

    /// The load balancer the call was authorized on.
    pub fn load_balancer(&self) -> Result<&LoadBalancer, ApiError> {
        match self {
            Access::Object(Resolved::LoadBalancer(l)) => Ok(l),
            _ => Err(not_resolved("load balancer")),
        }
    }

    /// The booking the call was authorized on.
    pub fn booking(&self) -> Result<&Booking, ApiError> {
        match self {
            Access::Object(Resolved::Booking(b)) => Ok(b),
            _ => Err(not_resolved("booking")),
        }
    }

    /// The cluster a list is inside (a node-pool list's).
    pub fn list_cluster(&self) -> Result<&KubernetesCluster, ApiError> {
        match self {
            Access::List { parent: Some(Resolved::Cluster(c)), .. } => Ok(c),
            _ => Err(not_resolved("cluster of the list")),
        }
    }

    /// What a list may show.
    pub fn scope(&self) -> Result<&ReadScope, ApiError> {
        match self {
            Access::List { scope, .. } => Ok(scope),
            _ => Err(not_resolved("list scope")),
        }
    }
}

/// Authorizes a call of `method` by `caller` on `target`.
pub async fn authorize(
    ctx: &Ctx,
    method: &MethodInfo,
    caller: &Caller,
    target: Target,
) -> Result<Access, ApiError> {
    let bug = |what: &str| ApiError::internal(format!("registry: {}: {what}", method.id()));
    let (permission, on) = match method.authorization {
        Authorization::JoinToken | Authorization::NodeCredential => {
            return match target {
                Target::Agent => Ok(Access::Agent),
                _ => Err(bug("an agent method names a tenant")),
            };
        }
        Authorization::Permission { permission, on } => (permission, on),
    };
    let Caller::Token(token) = caller else { return Err(bug("no API token for a tenant method")) };
    let Some(tenant) = target.tenant().cloned() else {
        return Err(bug("a tenant method names no tenant"));
    };
    if !has_grant_in(&token.grants, &tenant) {
        return Err(ApiError::permission_denied(format!(
            "the token holds no grant in tenant {tenant}"
        )));
    }
    let decide = |chain: &[Scope]| decide(ctx, token, permission, chain);
    let tenant_chain = [Scope::Tenant(tenant.clone()), Scope::System];
    let above_objects = match on {
        ResourceType::ComputeSystem => Some(&tenant_chain[1..]),
        ResourceType::ComputeTenant => Some(&tenant_chain[..]),
        _ => None,
    };
    match target {
        Target::Agent => Err(bug("unreachable: no tenant")),
        Target::List { tenant, within } => {
            let parent = match within {
                Some(parent) => {
                    // SPEC §3: a parent named to filter a list is answered as a `get` of
                    // it would be, so a list tells nothing of a parent the caller may
                    // not read.
                    let parent = resolve(ctx, *parent).await?;
                    self::decide(ctx, token, get_permission(&parent, &bug)?, &parent.chain())?;
                    Some(parent)
                }
                None => None,
            };
            let parent_chain = parent.as_ref().map(Resolved::chain);
            let scope = readable_scope(
                ctx.authorizer.as_ref(),
                &token.token_id,
                &token.grants,
                permission,
                &tenant,
                parent_chain.as_deref(),
            );
            Ok(Access::List { scope, parent })
        }
        Target::Tenant(_) => {
            decide(above_objects.ok_or_else(|| bug("a tenant target below the tenant"))?)?;
            Ok(Access::Tenant)
        }
        object => {
            if let Some(chain) = above_objects {
                // Decided before the lookup: nothing about the object is read for a
                // caller who may not act on its tenant.
                decide(chain)?;
                return Ok(Access::Object(resolve(ctx, object).await?));
            }
            let resolved = resolve(ctx, object).await?;
            let chain = resolved.chain();
            let from = chain
                .iter()
                .position(|s| ResourceType::of(s) == on)
                .ok_or_else(|| bug(&format!("authorized on {} above its target", on.as_str())))?;
            decide(&chain[from..])?;
            Ok(Access::Object(resolved))
        }
    }
}

/// Whether [`readable_items`] can drop items for `caller`: only a token's call, and only
/// under object policies (without them, what the store's scope lets through is readable).
pub fn filters_items(ctx: &Ctx, caller: &Caller) -> bool {
    matches!(caller, Caller::Token(_)) && ctx.authorizer.has_object_policies()
}

/// Of the `items` a list read within its readable scope, those the caller may read one by
/// one (SPEC §3: an object a `forbid` policy hides from `get` is absent from lists and
/// from the events the caller reads). Asked only when the authorizer has policies that
/// decide on single objects; `chain` gives an item's scope chain (`None`: no object of
/// its own, decided by the scope the list was allowed on).
pub fn readable_items<T>(
    ctx: &Ctx,
    caller: &Caller,
    permission: Permission,
    items: Vec<T>,
    chain: impl Fn(&T) -> Option<Vec<Scope>>,
) -> Vec<T> {
    let Caller::Token(token) = caller else { return items };
    if !filters_items(ctx, caller) {
        return items;
    }
    items
        .into_iter()
        .filter(|item| {
            chain(item).is_none_or(|chain| {
                let decision =
                    ctx.authorizer.authorize(&token.token_id, &token.grants, permission, &chain);
                decision.is_allowed()
            })
        })
        .collect()
}

/// The scope chain of the object an event's subject names (`compute.pools.<id>`,
/// `compute.kubernetes.clusters.<id>`, `compute.load-balancers.<id>`), looked up in the
/// event's tenant; `None` for a subject naming no object, or one that is gone.
pub async fn event_object_chain(ctx: &Ctx, tenant: &TenantId, subject: &str) -> Option<Vec<Scope>> {
    let target = if let Some(id) = subject.strip_prefix("compute.pools.") {
        Target::Pool(tenant.clone(), PoolId::parse(id).ok()?)
    } else if let Some(id) = subject.strip_prefix("compute.kubernetes.clusters.") {
        Target::Cluster(tenant.clone(), ClusterId::parse(id).ok()?)
    } else if let Some(id) = subject.strip_prefix("compute.load-balancers.") {
        Target::LoadBalancer(tenant.clone(), LoadBalancerId::parse(id).ok()?)
    } else {
        return None;
    };
    resolve(ctx, target).await.ok().map(|r| r.chain())
}

/// The permission a `get` of `parent` is decided with: its `get` method's declaration.
fn get_permission(
    parent: &Resolved,
    bug: &dyn Fn(&str) -> ApiError,
) -> Result<Permission, ApiError> {
    use bc_api_types::endpoint::Endpoint as _;
    let info = match parent {
        Resolved::Pool(_) => bc_api_types::pools::Get::INFO,
        Resolved::ProviderAccount(_) => bc_api_types::provider_accounts::Get::INFO,
        Resolved::Cluster(_) => bc_api_types::clusters::Get::INFO,
        Resolved::NodePool { .. } => bc_api_types::node_pools::Get::INFO,
        Resolved::LoadBalancer(_) => bc_api_types::load_balancers::Get::INFO,
        Resolved::Booking(_) => return Err(bug("a list inside a booking")),
    };
    match info.authorization {
        Authorization::Permission { permission, .. } => Ok(permission),
        _ => Err(bug("a list's parent has no get decided by a permission")),
    }
}

/// Whether `token` may do `permission` on the first scope of `chain` (the rest are its
/// containers): `PERMISSION_DENIED` naming both when not.
fn decide(
    ctx: &Ctx,
    token: &ApiToken,
    permission: Permission,
    chain: &[Scope],
) -> Result<(), ApiError> {
    if ctx.authorizer.authorize(&token.token_id, &token.grants, permission, chain).is_allowed() {
        return Ok(());
    }
    let on = chain.first().map(Scope::to_scope_string).unwrap_or_default();
    Err(ApiError::permission_denied(format!(
        "the token's grants do not allow {} on {on}",
        permission.as_str()
    )))
}

/// Authorizes the second object a call of `method` acts on (SPEC §3: a pool's substrate
/// acts on its provider account), after the method's own authorization passed: the
/// object is looked up in the call's tenant (another tenant's or an absent one is
/// `NOT_FOUND`, naming the input field) and `rule.permission` is decided on its chain.
pub async fn authorize_also(
    ctx: &Ctx,
    method: &MethodInfo,
    caller: &Caller,
    rule: AlsoAuthorization,
    target: Target,
) -> Result<Resolved, ApiError> {
    let bug = |what: &str| ApiError::internal(format!("registry: {}: {what}", method.id()));
    let Caller::Token(token) = caller else { return Err(bug("no API token for a tenant method")) };
    let resolved = resolve(ctx, target).await.map_err(|e| match e.code() {
        Code::Spec(ErrorCode::NotFound) => {
            ApiError::not_found(format!("{} ({})", e.message(), rule.field))
        }
        _ => e,
    })?;
    let chain = resolved.chain();
    if chain.first().map(ResourceType::of) != Some(rule.on) {
        return Err(bug(&format!("{} names no {}", rule.field, rule.on.as_str())));
    }
    decide(ctx, token, rule.permission, &chain)?;
    Ok(resolved)
}

/// `NOT_FOUND` for an object that is absent or another tenant's (the same answer).
fn missing(noun: &str, id: &dyn std::fmt::Display) -> ApiError {
    ApiError::not_found(format!("{noun} {id} not found"))
}

/// Looks up the object a target names, refusing another tenant's as absent.
async fn resolve(ctx: &Ctx, target: Target) -> Result<Resolved, ApiError> {
    let store = ctx.store.as_ref();
    Ok(match target {
        Target::Pool(t, id) => {
            Resolved::Pool(store.pool_get(&t, &id).await?.ok_or_else(|| missing("pool", &id))?)
        }
        Target::ProviderAccount(t, id) => Resolved::ProviderAccount(
            store
                .account_get(&t, &id)
                .await?
                .filter(|a| a.deleted_at.is_none())
                .ok_or_else(|| missing("provider account", &id))?,
        ),
        Target::Cluster(t, id) => Resolved::Cluster(
            store.cluster_get(&t, &id).await?.ok_or_else(|| missing("cluster", &id))?,
        ),
        Target::NodePool(t, id) => {
            let node_pool =
                store.node_pool_get(&t, &id).await?.ok_or_else(|| missing("node pool", &id))?;
            let cluster = store.cluster_get_any(&node_pool.cluster_id).await?.ok_or_else(|| {
                ApiError::internal(format!(
                    "node pool {id} has no cluster {}",
                    node_pool.cluster_id
                ))
            })?;
            Resolved::NodePool { node_pool, cluster }
        }
        Target::LoadBalancer(t, id) => Resolved::LoadBalancer(
            store.load_balancer_get(&t, &id).await?.ok_or_else(|| missing("load balancer", &id))?,
        ),
        Target::Booking(t, id) => Resolved::Booking(
            store.booking_get(&t, &id).await?.ok_or_else(|| missing("booking", &id))?,
        ),
        Target::Agent | Target::Tenant(_) | Target::List { .. } => {
            return Err(ApiError::internal("resolve: the target names no object"));
        }
    })
}
