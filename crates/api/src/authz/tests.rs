//! The Cedar matrix of research/cedar.md on the real engine: scope tree × roles, scoped
//! grants, other tenants, operator policies, and the readable scope of lists.

use bc_domain::model::{Grant, Role, Scope};
use bc_domain::ports::{Authorizer, Decision, Permission};
use bc_domain::{
    ClusterId, LoadBalancerId, NodePoolId, PoolId, ProviderAccountId, TenantId, TokenId,
};

use super::*;

fn tenant(s: &str) -> TenantId {
    TenantId::parse(s).unwrap()
}

/// Ids of one tenant's objects: an account holding a cluster (with a node pool) and two
/// load balancers, and a pool.
struct World {
    tenant: TenantId,
    pool: PoolId,
    account: ProviderAccountId,
    cluster: ClusterId,
    node_pool: NodePoolId,
    lb1: LoadBalancerId,
    lb2: LoadBalancerId,
}

impl World {
    fn new(name: &str, seed: u128) -> Self {
        Self {
            tenant: tenant(name),
            pool: PoolId::generate(1, seed),
            account: ProviderAccountId::generate(2, seed),
            cluster: ClusterId::generate(3, seed),
            node_pool: NodePoolId::generate(4, seed),
            lb1: LoadBalancerId::generate(5, seed),
            lb2: LoadBalancerId::generate(6, seed),
        }
    }
    fn tenant_chain(&self) -> Vec<Scope> {
        vec![Scope::Tenant(self.tenant.clone()), Scope::System]
    }
    fn account_chain(&self) -> Vec<Scope> {
        let mut c = vec![Scope::ProviderAccount(self.account.clone())];
        c.extend(self.tenant_chain());
        c
    }
    fn lb_chain(&self, lb: &LoadBalancerId) -> Vec<Scope> {
        let mut c = vec![Scope::LoadBalancer(lb.clone())];
        c.extend(self.account_chain());
        c
    }
    fn node_pool_chain(&self) -> Vec<Scope> {
        let mut c = vec![
            Scope::KubernetesNodePool(self.node_pool.clone()),
            Scope::KubernetesCluster(self.cluster.clone()),
        ];
        c.extend(self.account_chain());
        c
    }
    fn pool_chain(&self) -> Vec<Scope> {
        let mut c = vec![Scope::Pool(self.pool.clone())];
        c.extend(self.tenant_chain());
        c
    }
    fn grant(&self, role: Role, scope: Scope) -> Grant {
        Grant { role, scope, tenant_id: Some(self.tenant.clone()) }
    }
    fn on_tenant(&self, role: Role) -> Grant {
        self.grant(role, Scope::Tenant(self.tenant.clone()))
    }
}

fn system(role: Role) -> Grant {
    Grant { role, scope: Scope::System, tenant_id: None }
}

fn token() -> TokenId {
    TokenId::generate(9, 9)
}

fn allows(a: &CedarAuthorizer, grants: &[Grant], p: Permission, chain: &[Scope]) -> bool {
    a.authorize(&token(), grants, p, chain).is_allowed()
}

use Permission::*;

#[test]
fn viewer_reads_everything_below_its_tenant_and_manages_nothing() {
    let a = CedarAuthorizer::new();
    let w = World::new("acme", 1);
    let g = [w.on_tenant(Role::Viewer)];
    assert!(allows(&a, &g, LoadBalancersRead, &w.lb_chain(&w.lb1)));
    assert!(allows(&a, &g, EventsRead, &w.lb_chain(&w.lb1)));
    assert!(!allows(&a, &g, LoadBalancersManage, &w.lb_chain(&w.lb1)));
    assert!(allows(&a, &g, KubernetesRead, &w.node_pool_chain()));
    assert!(!allows(&a, &g, KubernetesManage, &w.node_pool_chain()));
    assert!(allows(&a, &g, PoolsRead, &w.pool_chain()));
    assert!(!allows(&a, &g, PoolsManage, &w.pool_chain()));
}

#[test]
fn editor_manages_all_but_quotas_and_operator_everything_in_its_scope() {
    let a = CedarAuthorizer::new();
    let w = World::new("acme", 1);
    let editor = [w.on_tenant(Role::Editor)];
    assert!(!allows(&a, &editor, QuotasManage, &w.tenant_chain()));
    for p in [PoolsManage, BillingRead, ProviderAccountsManage, BookingsManage] {
        assert!(allows(&a, &editor, p, &w.tenant_chain()), "{p:?}");
    }
    assert!(allows(&a, &editor, LoadBalancersManage, &w.lb_chain(&w.lb2)));
    let operator = [w.on_tenant(Role::Operator)];
    assert!(allows(&a, &operator, QuotasManage, &w.tenant_chain()));
    // SPEC §4: quotas.set is decided on compute-system, which a tenant grant does not cover.
    assert!(!allows(&a, &operator, QuotasManage, &[Scope::System]));
    let root = [system(Role::Operator)];
    let other = World::new("globex", 2);
    assert!(allows(&a, &root, QuotasManage, &[Scope::System]));
    assert!(allows(&a, &root, QuotasManage, &other.tenant_chain()));
    assert!(allows(&a, &root, LoadBalancersManage, &other.lb_chain(&other.lb1)));
}

#[test]
fn a_scoped_grant_covers_its_subtree_only() {
    let a = CedarAuthorizer::new();
    let w = World::new("acme", 1);
    let g = [w.grant(Role::Editor, Scope::LoadBalancer(w.lb1.clone()))];
    assert!(allows(&a, &g, LoadBalancersRead, &w.lb_chain(&w.lb1)));
    assert!(allows(&a, &g, LoadBalancersManage, &w.lb_chain(&w.lb1)));
    assert!(!allows(&a, &g, LoadBalancersRead, &w.lb_chain(&w.lb2)));
    assert!(!allows(&a, &g, LoadBalancersRead, &w.account_chain()));
    assert!(!allows(&a, &g, LoadBalancersRead, &w.tenant_chain()));
    let cluster = [w.grant(Role::Viewer, Scope::KubernetesCluster(w.cluster.clone()))];
    assert!(allows(&a, &cluster, KubernetesRead, &w.node_pool_chain()));
    assert!(!allows(&a, &cluster, LoadBalancersRead, &w.lb_chain(&w.lb1)));
}

#[test]
fn another_tenant_is_never_reached() {
    let a = CedarAuthorizer::new();
    let acme = World::new("acme", 1);
    let other = World::new("acme:prod.eu-1", 2);
    let g = [acme.on_tenant(Role::Operator)];
    for p in Permission::ALL {
        assert!(!allows(&a, &g, p, &other.tenant_chain()), "{p:?}");
    }
    assert!(!allows(&a, &g, LoadBalancersRead, &other.lb_chain(&other.lb1)));
    assert!(!allows(&a, &[], PoolsRead, &acme.pool_chain()));
    // Without its ancestors, the resource is not inside the tenant the grant is on.
    assert!(!allows(&a, &g, LoadBalancersRead, &acme.lb_chain(&acme.lb1)[..1]));
}

#[test]
fn decisions_name_every_grant_that_allowed() {
    let a = CedarAuthorizer::new();
    let w = World::new("acme", 1);
    let g = [
        w.on_tenant(Role::Viewer),
        w.grant(Role::Viewer, Scope::Pool(PoolId::generate(7, 7))),
        w.grant(Role::Editor, Scope::Pool(w.pool.clone())),
    ];
    let d = a.authorize(&token(), &g, PoolsRead, &w.pool_chain());
    assert_eq!(d, Decision::Allow(vec!["grant:0".into(), "grant:2".into()]));
}

#[test]
fn a_permission_asked_about_a_type_it_does_not_apply_to_is_refused() {
    let a = CedarAuthorizer::new();
    let w = World::new("acme", 1);
    let g = [system(Role::Operator)];
    assert!(a.decide(&token(), &g, QuotasManage, &w.lb_chain(&w.lb1)).is_err());
    assert!(!allows(&a, &g, QuotasManage, &w.lb_chain(&w.lb1)));
    assert!(a.decide(&token(), &g, PoolsRead, &w.account_chain()).is_err());
}

#[test]
fn operator_policies_add_and_forbid() {
    let w = World::new("acme", 1);
    let tok = token();
    let forbid = format!(
        r#"forbid(principal == Token::"{tok}", action == Action::"compute:pools:manage", resource);"#
    );
    let a = CedarAuthorizer::with_policies(&forbid).unwrap();
    let g = [w.on_tenant(Role::Editor)];
    assert!(!a.authorize(&tok, &g, PoolsManage, &w.pool_chain()).is_allowed());
    assert!(a.authorize(&tok, &g, PoolsRead, &w.pool_chain()).is_allowed());
    let permit = format!(
        r#"permit(principal, action == Action::"compute:billing:read", resource in Tenant::"{}");"#,
        w.tenant
    );
    let a = CedarAuthorizer::with_policies(&permit).unwrap();
    assert_eq!(
        a.authorize(&tok, &[], BillingRead, &w.tenant_chain()),
        Decision::Allow(vec!["operator:0".into()])
    );
    for bad in [
        "permit(principal, action in Action::\"role:veiwer\", resource);",
        "permit(principal == Tenant::\"x\", action, resource);",
        "permit(principal == ?principal, action, resource);",
        "permit(principal, action, resource",
    ] {
        assert!(CedarAuthorizer::with_policies(bad).is_err(), "{bad}");
    }
}

#[test]
fn the_gate_needs_a_grant_in_the_tenant() {
    let w = World::new("acme", 1);
    let other = tenant("acme:prod");
    assert!(has_grant_in(&[w.grant(Role::Viewer, Scope::Pool(w.pool.clone()))], &w.tenant));
    assert!(!has_grant_in(&[w.on_tenant(Role::Operator)], &other));
    assert!(has_grant_in(&[system(Role::Viewer)], &other));
    assert!(!has_grant_in(&[], &w.tenant));
}

#[test]
fn readable_scope_follows_the_grants() {
    let a = CedarAuthorizer::new();
    let w = World::new("acme", 1);
    let tok = token();
    let read = |g: &[Grant], p, within: Option<&[Scope]>| {
        readable_scope(&a, &tok, g, p, &w.tenant, within)
    };
    assert_eq!(read(&[w.on_tenant(Role::Viewer)], PoolsRead, None), ReadScope::Tenant);
    assert_eq!(read(&[system(Role::Viewer)], LoadBalancersRead, None), ReadScope::Tenant);
    let scoped = [
        w.grant(Role::Viewer, Scope::ProviderAccount(w.account.clone())),
        w.grant(Role::Editor, Scope::LoadBalancer(w.lb2.clone())),
        w.grant(Role::Viewer, Scope::Pool(w.pool.clone())),
        // Another tenant's grant never widens this tenant's scope.
        World::new("globex", 2).on_tenant(Role::Operator),
    ];
    let ReadScope::Granted(lbs) = read(&scoped, LoadBalancersRead, None) else { panic!() };
    assert_eq!(lbs.accounts.len(), 1);
    assert_eq!(lbs.load_balancers.len(), 1);
    assert!(lbs.pools.is_empty(), "pools:read is not load-balancers:read");
    let ReadScope::Granted(pools) = read(&scoped, PoolsRead, None) else { panic!() };
    assert_eq!(pools.pools.iter().collect::<Vec<_>>(), [&w.pool]);
    assert!(pools.accounts.is_empty(), "an account holds no pools");
    assert_eq!(read(&scoped, QuotasManage, None), ReadScope::nothing());
    // Inside a parent the caller may read as a whole, the list is not narrowed.
    let cluster = [w.grant(Role::Viewer, Scope::KubernetesCluster(w.cluster.clone()))];
    let cluster_chain = &w.node_pool_chain()[1..];
    assert_eq!(read(&cluster, KubernetesRead, Some(cluster_chain)), ReadScope::Tenant);
    assert!(
        matches!(read(&cluster, KubernetesRead, None), ReadScope::Granted(ids) if ids.clusters.len() == 1)
    );
}
