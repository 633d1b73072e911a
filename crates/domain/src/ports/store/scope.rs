//! What a caller may read inside one tenant, as a filter the store applies inside its list
//! queries (SPEC §3: "List methods return only the objects the caller may read").
//!
//! Invariant: the scope tree of SPEC §3 is applied in one place per list, in the store's
//! `WHERE` clause: a grant on a provider account covers its clusters (and their node
//! pools) and its load balancers, a grant on a cluster covers its node pools; the tenant
//! filter always applies too, so ids of another tenant in a scope widen nothing.

use std::collections::BTreeSet;

use crate::id::{ClusterId, LoadBalancerId, NodePoolId, PoolId, ProviderAccountId};
use crate::model::{Grant, Scope};
use crate::name::TenantId;

/// The objects of one tenant a caller may read with one permission.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ReadScope {
    /// Everything of the tenant (a grant on `compute-tenant/<tenantId>` or
    /// `compute-system`).
    Tenant,
    /// Only what these grants cover.
    Granted(GrantedIds),
}

/// The ids a caller holds grants on, per scope kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct GrantedIds {
    /// `pool/<id>`: those pools.
    pub pools: BTreeSet<PoolId>,
    /// `provider-account/<id>`: those accounts, their clusters, their clusters' node
    /// pools and their load balancers.
    pub accounts: BTreeSet<ProviderAccountId>,
    /// `kubernetes-cluster/<id>`: those clusters and their node pools.
    pub clusters: BTreeSet<ClusterId>,
    /// `kubernetes-node-pool/<id>`: those node pools.
    pub node_pools: BTreeSet<NodePoolId>,
    /// `provider-load-balancer/<id>`: those load balancers.
    pub load_balancers: BTreeSet<LoadBalancerId>,
}

impl ReadScope {
    /// Nothing at all (a caller whose grants carry the permission on no object here).
    pub fn nothing() -> Self {
        ReadScope::Granted(GrantedIds::default())
    }

    /// The scope of `grants` in `tenant`. Pass only the grants whose role carries the
    /// permission the list needs (the authorizer decides that): a grant on
    /// `compute-system` or on this tenant reads everything, grants on another tenant
    /// read nothing here, and object grants add their ids.
    pub fn from_grants<'a>(tenant: &TenantId, grants: impl IntoIterator<Item = &'a Grant>) -> Self {
        let mut ids = GrantedIds::default();
        for g in grants {
            match &g.scope {
                Scope::System => return ReadScope::Tenant,
                Scope::Tenant(t) if t == tenant => return ReadScope::Tenant,
                Scope::Tenant(_) => {}
                // An object grant counts only in its own tenant.
                _ if g.tenant_id.as_ref() != Some(tenant) => {}
                Scope::Pool(id) => {
                    ids.pools.insert(id.clone());
                }
                Scope::ProviderAccount(id) => {
                    ids.accounts.insert(id.clone());
                }
                Scope::KubernetesCluster(id) => {
                    ids.clusters.insert(id.clone());
                }
                Scope::KubernetesNodePool(id) => {
                    ids.node_pools.insert(id.clone());
                }
                Scope::LoadBalancer(id) => {
                    ids.load_balancers.insert(id.clone());
                }
            }
        }
        ReadScope::Granted(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Role;

    fn grant(scope: Scope, tenant: Option<&str>) -> Grant {
        Grant { role: Role::Viewer, scope, tenant_id: tenant.map(|t| TenantId::parse(t).unwrap()) }
    }

    #[test]
    fn tenant_and_system_grants_read_everything() {
        let acme = TenantId::parse("acme").unwrap();
        let on_tenant = grant(Scope::Tenant(acme.clone()), Some("acme"));
        assert_eq!(ReadScope::from_grants(&acme, [&on_tenant]), ReadScope::Tenant);
        let system = grant(Scope::System, None);
        assert_eq!(ReadScope::from_grants(&acme, [&system]), ReadScope::Tenant);
    }

    #[test]
    fn object_grants_count_only_in_their_tenant() {
        let acme = TenantId::parse("acme").unwrap();
        let other = TenantId::parse("other").unwrap();
        let pool = PoolId::generate(1, 1);
        let acct = ProviderAccountId::generate(1, 2);
        let grants = [
            grant(Scope::Tenant(other), Some("other")),
            grant(Scope::Pool(pool.clone()), Some("acme")),
            grant(Scope::ProviderAccount(acct.clone()), Some("acme")),
            grant(Scope::Pool(PoolId::generate(1, 3)), Some("other")),
        ];
        let ReadScope::Granted(ids) = ReadScope::from_grants(&acme, &grants) else {
            panic!("another tenant's tenant grant must not read this tenant");
        };
        assert_eq!(ids.pools, BTreeSet::from([pool]));
        assert_eq!(ids.accounts, BTreeSet::from([acct]));
        assert!(ids.clusters.is_empty() && ids.node_pools.is_empty());
        assert_eq!(ReadScope::from_grants(&acme, []), ReadScope::nothing());
    }
}
