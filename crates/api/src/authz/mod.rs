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

use bc_domain::model::{Grant, Scope};
use bc_domain::ports::{Authorizer, Permission, ReadScope};
use bc_domain::{TenantId, TokenId};

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

/// The readable scope of `permission` in `tenant` for a token, as the store's list
/// filter: [`ReadScope::Tenant`] when the permission holds on the tenant (or on `within`,
/// the chain of the list's parent, when the list is inside one), else the scope of the
/// grants below the tenant on which Cedar says it holds ([`ReadScope::from_grants`]). A
/// grant whose scope the permission does not apply to (`compute:pools:read` on a provider
/// account) contributes nothing, because Cedar says so.
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
        return ReadScope::Tenant;
    }
    let readable = grants.iter().filter(|grant| {
        let below_tenant = !matches!(grant.scope, Scope::System | Scope::Tenant(_));
        // The grant's scope placed directly in its tenant: Cedar accepts a chain that
        // skips levels, and tenant-wide operator policies still apply.
        let chain = || [grant.scope.clone(), Scope::Tenant(tenant.clone()), Scope::System];
        below_tenant
            && grant.tenant_id.as_ref() == Some(tenant)
            && authorizer.authorize(principal, grants, permission, &chain()).is_allowed()
    });
    ReadScope::from_grants(tenant, readable)
}
