//! The authorization matrix, generated from the registry: every tenant method × tokens of
//! every shape (SPEC §3's roles on the tenant and on the system, grants scoped inside and
//! outside the object, another tenant's, revoked, none). The expected answer comes from
//! an independent statement of SPEC §3 (roles, the scope tree), not from Cedar, so a new
//! method is covered without a new test and a wrong policy cannot agree with itself.

use bc_api::Target;
use bc_api::methods::examples as ex;
use bc_api::registry;
use bc_api::registry::{Authorization, Method, ResourceType};
use bc_domain::model::{Grant, Role, Scope};
use bc_domain::ports::Permission;
use serde_json::Value;

use crate::common::{Harness, OTHER_LB, OTHER_TENANT, acme, chain_of, grant, id, tenant};

/// What a call should get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Unauthenticated,
    Denied,
    NotFound,
    Reached,
}

/// SPEC §3: viewer has every `:read`, editor every `:read` and `:manage` but quotas,
/// operator everything.
fn role_allows(role: Role, permission: Permission) -> bool {
    match role {
        Role::Viewer => permission.as_str().ends_with(":read"),
        Role::Editor => permission != Permission::QuotasManage,
        Role::Operator => true,
    }
}

/// The scope an object target names.
fn object_scope(target: &Target) -> Option<Scope> {
    Some(match target {
        Target::Pool(_, p) => Scope::Pool(p.clone()),
        Target::ProviderAccount(_, a) => Scope::ProviderAccount(a.clone()),
        Target::Cluster(_, c) => Scope::KubernetesCluster(c.clone()),
        Target::NodePool(_, n) => Scope::KubernetesNodePool(n.clone()),
        Target::LoadBalancer(_, l) => Scope::LoadBalancer(l.clone()),
        // The fixture's booking is on the example pool.
        Target::Booking(..) => Scope::Pool(id(ex::POOL)),
        Target::Agent | Target::Tenant(_) | Target::List { .. } => return None,
    })
}

/// The chain a method's permission is decided on, for its example's target.
fn decision_chain(on: ResourceType, target: &Target) -> Vec<Scope> {
    match on {
        ResourceType::ComputeSystem => vec![Scope::System],
        ResourceType::ComputeTenant => vec![acme(), Scope::System],
        _ => {
            let chain = chain_of(&object_scope(target).expect("an object"));
            let from = chain.iter().position(|s| ResourceType::of(s) == on).expect("on the chain");
            chain[from..].to_vec()
        }
    }
}

fn expected(grants: Option<&[Grant]>, method: &Method) -> Expect {
    let Some(grants) = grants else { return Expect::Unauthenticated };
    let Authorization::Permission { permission, on } = method.info.authorization else {
        unreachable!("tenant methods only")
    };
    let in_tenant = grants
        .iter()
        .any(|g| g.scope == Scope::System || g.tenant_id.as_ref() == Some(&tenant(ex::TENANT)));
    if !in_tenant {
        return Expect::Denied;
    }
    let target = method.check(method.example()).expect("the example is valid");
    if matches!(target, Target::List { .. }) {
        return Expect::Reached;
    }
    let chain = decision_chain(on, &target);
    let allowed =
        grants.iter().any(|g| role_allows(g.role, permission) && chain.contains(&g.scope));
    if allowed { Expect::Reached } else { Expect::Denied }
}

fn profiles() -> Vec<(&'static str, Vec<Grant>)> {
    vec![
        ("viewer on the tenant", vec![grant(Role::Viewer, acme())]),
        ("editor on the tenant", vec![grant(Role::Editor, acme())]),
        ("operator on the tenant", vec![grant(Role::Operator, acme())]),
        ("operator on compute-system", vec![grant(Role::Operator, Scope::System)]),
        ("viewer on compute-system", vec![grant(Role::Viewer, Scope::System)]),
        (
            "editor on another load balancer",
            vec![grant(Role::Editor, Scope::LoadBalancer(id(OTHER_LB)))],
        ),
        ("viewer on the pool", vec![grant(Role::Viewer, Scope::Pool(id(ex::POOL)))]),
        (
            "editor on the account",
            vec![grant(Role::Editor, Scope::ProviderAccount(id(ex::ACCOUNT)))],
        ),
        (
            "operator on the cluster",
            vec![grant(Role::Operator, Scope::KubernetesCluster(id(ex::CLUSTER)))],
        ),
        (
            "operator on another tenant",
            vec![grant(Role::Operator, Scope::Tenant(tenant(OTHER_TENANT)))],
        ),
    ]
}

fn tenant_methods() -> impl Iterator<Item = &'static Method> {
    registry()
        .methods()
        .iter()
        .filter(|m| matches!(m.info.authorization, Authorization::Permission { .. }))
}

async fn assert_answer(
    h: &Harness,
    method: &Method,
    token: Option<&str>,
    body: &Value,
    expect: Expect,
    who: &str,
) {
    let a = h.call(&method.info.id().to_string(), token, body).await;
    let ok = match expect {
        Expect::Unauthenticated => a.status == 401 && a.code() == "UNAUTHENTICATED",
        Expect::Denied => a.status == 403 && a.code() == "PERMISSION_DENIED",
        Expect::NotFound => a.status == 404 && a.code() == "NOT_FOUND",
        Expect::Reached => a.reached_handler(),
    };
    assert!(ok, "{} by {who}: expected {expect:?}, got {} {}", method.info.id(), a.status, a.text);
}

#[tokio::test]
async fn every_method_by_every_kind_of_caller() {
    let h = Harness::new().await;
    let mut checked = 0;
    let mut tokens = Vec::new();
    for (who, grants) in profiles() {
        tokens.push((who, Some(grants.clone()), Some(h.token(grants).await)));
    }
    tokens.push(("no token", None, None));
    let revoked = h.revoked_token(vec![grant(Role::Operator, Scope::System)]).await;
    tokens.push(("a revoked token", None, Some(revoked)));
    for method in tenant_methods() {
        for (who, grants, token) in &tokens {
            let expect = expected(grants.as_deref(), method);
            assert_answer(&h, method, token.as_deref(), method.example(), expect, who).await;
            checked += 1;
        }
    }
    assert_eq!(checked, 32 * tokens.len(), "every tenant method of the contract was called");
}

#[tokio::test]
async fn another_tenants_objects_are_not_found_and_unknown_tenants_are_denied_first() {
    let h = Harness::new().await;
    let other = h.token(vec![grant(Role::Operator, Scope::Tenant(tenant(OTHER_TENANT)))]).await;
    let own = h.token(vec![grant(Role::Operator, acme())]).await;
    for method in tenant_methods() {
        let Authorization::Permission { on, .. } = method.info.authorization else { continue };
        let mut body = method.example().clone();
        body["tenantId"] = Value::from(OTHER_TENANT);
        let target = method.check(&body).expect("valid");
        // The other tenant's operator names its own tenant and our objects.
        let expect = match &target {
            Target::Tenant(_) | Target::List { within: None, .. } => Expect::Reached,
            // Decided on compute-system before any lookup: a tenant grant is not enough.
            _ if on == ResourceType::ComputeSystem => Expect::Denied,
            _ => Expect::NotFound,
        };
        assert_answer(
            &h,
            method,
            Some(&other),
            &body,
            expect,
            "the other tenant, for its own tenant",
        )
        .await;
        // Naming our tenant, it learns nothing: denied before anything is looked up,
        // whether the object exists or not.
        assert_answer(
            &h,
            method,
            Some(&other),
            method.example(),
            Expect::Denied,
            "the other tenant",
        )
        .await;
    }
    // Our own operator asking about an object that does not exist: NOT_FOUND.
    let missing =
        serde_json::json!({ "tenantId": ex::TENANT, "poolId": "pool_01jq3k5v9x8y7z6w5v4t3s2000" });
    let a = h.call("pools.get", Some(&own), &missing).await;
    assert_eq!((a.status.as_u16(), a.code()), (404, "NOT_FOUND"), "{}", a.text);
    let a = h.call("pools.get", Some(&other), &missing).await;
    assert_eq!(a.status, 403, "no existence told to a caller with no grant in the tenant");
}
