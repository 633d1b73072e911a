//! Authorization (SPEC §2, §3): the existence gate, Cedar decisions on a resource's scope
//! chain, and the readable scope a list is filtered by.
//!
//! Invariants: the gate runs before anything is looked up, so a caller without a grant in
//! a tenant learns nothing about it; what a role allows is said once, in the Cedar schema
//! ([`cedar::CEDAR_SCHEMA`]), and the readable scope is derived by asking the same
//! [`Authorizer`], never by a second table of roles.

pub mod cedar;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use bc_domain::model::{Grant, Scope};
use bc_domain::ports::{Authorizer, Permission};
use bc_domain::{
    ClusterId, LoadBalancerId, NodePoolId, PoolId, ProviderAccountId, TenantId, TokenId,
};

pub use cedar::{CedarAuthorizer, PolicyError};

/// Whether a token holds any grant in `tenant` (a grant on `compute-system` counts): the
/// existence rule of SPEC §2, decided from the grant rows alone, before any lookup.
pub fn has_grant_in(grants: &[Grant], tenant: &TenantId) -> bool {
    grants.iter().any(|g| match (&g.scope, &g.tenant_id) {
        (Scope::System, _) => true,
        (_, Some(t)) => t == tenant,
        (_, None) => false,
    })
}

/// What a list may show a caller: everything its filters select, or only the objects at
/// or below the listed scopes. The handlers map it onto the store's scope filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadScope {
    /// Every object the list's own filters (tenant, parent) select.
    All,
    /// Only objects at or below these scopes (possibly none).
    Only(ScopedIds),
}

/// Scopes below a tenant that a caller's grants let it read, by kind. An object is
/// readable when it, or one of its containers, is listed: a cluster is readable through
/// its own id or its provider account's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScopedIds {
    /// `pool/<id>` grants.
    pub pools: BTreeSet<PoolId>,
    /// `provider-account/<id>` grants.
    pub provider_accounts: BTreeSet<ProviderAccountId>,
    /// `kubernetes-cluster/<id>` grants.
    pub clusters: BTreeSet<ClusterId>,
    /// `kubernetes-node-pool/<id>` grants.
    pub node_pools: BTreeSet<NodePoolId>,
    /// `provider-load-balancer/<id>` grants.
    pub load_balancers: BTreeSet<LoadBalancerId>,
}

impl ScopedIds {
    /// Whether no scope is listed (the list is empty).
    pub fn is_empty(&self) -> bool {
        self.pools.is_empty()
            && self.provider_accounts.is_empty()
            && self.clusters.is_empty()
            && self.node_pools.is_empty()
            && self.load_balancers.is_empty()
    }

    fn insert(&mut self, scope: &Scope) {
        match scope {
            Scope::Pool(id) => {
                self.pools.insert(id.clone());
            }
            Scope::ProviderAccount(id) => {
                self.provider_accounts.insert(id.clone());
            }
            Scope::KubernetesCluster(id) => {
                self.clusters.insert(id.clone());
            }
            Scope::KubernetesNodePool(id) => {
                self.node_pools.insert(id.clone());
            }
            Scope::LoadBalancer(id) => {
                self.load_balancers.insert(id.clone());
            }
            Scope::System | Scope::Tenant(_) => {}
        }
    }
}

/// The readable scope of `permission` in `tenant` for a token: [`ReadScope::All`] when the
/// permission holds on the tenant (or on `within`, the chain of the list's parent, when
/// the list is inside one), else the grants' own scopes on which it holds. A grant whose
/// scope the permission does not apply to (`compute:pools:read` on a provider account)
/// contributes nothing, because Cedar says so.
pub fn readable_scope(
    authorizer: &dyn Authorizer,
    principal: &TokenId,
    grants: &[Grant],
    permission: Permission,
    tenant: &TenantId,
    within: Option<&[Scope]>,
) -> ReadScope {
    let tenant_chain = [Scope::Tenant(tenant.clone()), Scope::System];
    let whole = within.unwrap_or(&tenant_chain);
    if authorizer.authorize(principal, grants, permission, whole).is_allowed() {
        return ReadScope::All;
    }
    let mut ids = ScopedIds::default();
    for grant in grants {
        let below_tenant = !matches!(grant.scope, Scope::System | Scope::Tenant(_));
        if !below_tenant || grant.tenant_id.as_ref() != Some(tenant) {
            continue;
        }
        // The grant's scope placed directly in its tenant: Cedar accepts a chain that
        // skips levels, and tenant-wide operator policies still apply.
        let chain = [grant.scope.clone(), Scope::Tenant(tenant.clone()), Scope::System];
        if authorizer.authorize(principal, grants, permission, &chain).is_allowed() {
            ids.insert(&grant.scope);
        }
    }
    ReadScope::Only(ids)
}
