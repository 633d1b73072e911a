//! Issue 12, security bullet 1 (with `authn.rs` for malformed tokens and schemes).
//! The authorization matrix, generated from the registry: every tenant method × tokens of
//! every shape (SPEC §3's roles on the tenant and on the system, grants scoped inside and
//! outside the object, another tenant's, revoked, none), each method on a fresh fixture,
//! on SQLite and PostgreSQL. The expected answer comes from an independent statement of
//! SPEC §3 (roles, the scope tree), not from Cedar, so a new method is covered without a
//! new test and a wrong policy cannot agree with itself. An allowed call must get its
//! real answer — 200, and for a list exactly the fixture objects the caller may read.

use std::collections::BTreeSet;

use bc_api::Target;
use bc_api::methods::examples as ex;
use bc_api::registry;
use bc_api::registry::{Authorization, Method, ResourceType};
use bc_domain::model::{Grant, Role, Scope};
use bc_domain::ports::Permission;
use bc_store::testing::{Backend, run};
use serde_json::Value;

use crate::common::{
    Harness, OTHER_LB, OTHER_TENANT, S, acme, chain_of, grant, id, tenant, without,
};

/// What a call should get.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expect {
    Unauthenticated,
    Denied,
    NotFound,
    /// The method's real answer: 200 (or the code the fixture's state gives it), and for a
    /// list exactly these ids.
    Answered(Option<BTreeSet<String>>),
}

/// SPEC §3: a pool's substrate acts on its provider account, so these methods, when their
/// policy has a substrate, also need `compute:kubernetes:manage` on that account.
const SUBSTRATE_METHODS: &[&str] = &["pools.create", "pools.update"];

/// The provider account the body's policy's substrate names, for the methods above.
fn substrate_account(method: &Method, body: &Value) -> Option<Scope> {
    if !SUBSTRATE_METHODS.contains(&method.info.id().to_string().as_str()) {
        return None;
    }
    let account = body["policy"]["substrate"]["account"].as_str()?;
    Some(Scope::ProviderAccount(id(account)))
}

/// Allowed calls whose real answer on the fixture is not a 200: the account still has
/// clusters and load balancers, so deleting it is refused.
const FIXTURE_ANSWERS: &[(&str, &str)] = &[("providerAccounts.delete", "FAILED_PRECONDITION")];

/// SPEC §3: viewer has every `:read`, editor every `:read` and `:manage` but quotas,
/// operator everything.
fn role_allows(role: Role, permission: Permission) -> bool {
    match role {
        Role::Viewer => permission.as_str().ends_with(":read"),
        Role::Editor => permission != Permission::QuotasManage,
        Role::Operator => true,
    }
}

/// Whether `grants` allow `permission` somewhere on `chain`.
fn allows(grants: &[Grant], permission: Permission, chain: &[Scope]) -> bool {
    grants.iter().any(|g| role_allows(g.role, permission) && chain.contains(&g.scope))
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

/// A list's answer key, the id field of its items, and the fixture objects it holds.
fn fixture_list(method: &Method) -> (&'static str, &'static str, Vec<Scope>) {
    match method.info.resource.name {
        "pools" => ("pools", "poolId", vec![Scope::Pool(id(ex::POOL))]),
        "providerAccounts" => {
            ("providerAccounts", "providerAccountId", vec![Scope::ProviderAccount(id(ex::ACCOUNT))])
        }
        "kubernetesClusters" => {
            ("kubernetesClusters", "clusterId", vec![Scope::KubernetesCluster(id(ex::CLUSTER))])
        }
        "kubernetesNodePools" => (
            "kubernetesNodePools",
            "nodePoolId",
            vec![Scope::KubernetesNodePool(id(ex::NODE_POOL))],
        ),
        "loadBalancers" => (
            "loadBalancers",
            "loadBalancerId",
            vec![Scope::LoadBalancer(id(ex::LOAD_BALANCER)), Scope::LoadBalancer(id(OTHER_LB))],
        ),
        other => panic!("a list of {other}: add its fixture objects here"),
    }
}

/// The scope's id as the answer spells it.
fn scope_id(scope: &Scope) -> String {
    scope.to_scope_string().split_once('/').map(|(_, id)| id.to_owned()).unwrap_or_default()
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
        let (_, _, objects) = fixture_list(method);
        let visible = objects
            .iter()
            .filter(|o| allows(grants, permission, &chain_of(o)))
            .map(scope_id)
            .collect();
        return Expect::Answered(Some(visible));
    }
    let also = substrate_account(method, &matrix_body(method))
        .is_none_or(|account| allows(grants, Permission::KubernetesManage, &chain_of(&account)));
    if allows(grants, permission, &decision_chain(on, &target)) && also {
        Expect::Answered(None)
    } else {
        Expect::Denied
    }
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
        // Issue 20, item 1: a pool's editor alone may not make or change its substrate.
        ("editor on the pool", vec![grant(Role::Editor, Scope::Pool(id(ex::POOL)))]),
        (
            "editor on the pool and the account",
            vec![
                grant(Role::Editor, Scope::Pool(id(ex::POOL))),
                grant(Role::Editor, Scope::ProviderAccount(id(ex::ACCOUNT))),
            ],
        ),
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

/// The example, repeatable by every caller in turn: without `expectedGeneration` (each
/// accepted update bumps it), creates carry their `requestId` (repeats are replays), and
/// lists start at their first page.
fn matrix_body(method: &Method) -> Value {
    without(&without(method.example(), "expectedGeneration"), "pageToken")
}

async fn assert_answer(
    h: &Harness,
    method: &Method,
    token: Option<&str>,
    body: &Value,
    expect: &Expect,
    who: &str,
) {
    let name = method.info.id().to_string();
    let a = h.call(&name, token, body).await;
    let ok = match expect {
        Expect::Unauthenticated => a.status == 401 && a.code() == "UNAUTHENTICATED",
        Expect::Denied => a.status == 403 && a.code() == "PERMISSION_DENIED",
        Expect::NotFound => a.status == 404 && a.code() == "NOT_FOUND",
        Expect::Answered(list) => {
            let code = FIXTURE_ANSWERS.iter().find(|(m, _)| *m == name).map_or("OK", |(_, c)| c);
            let items = list.as_ref().map(|_| {
                let (key, id_field, _) = fixture_list(method);
                let items = a.json[key].as_array().cloned().unwrap_or_default();
                items.iter().filter_map(|i| i[id_field].as_str().map(str::to_owned)).collect()
            });
            a.code() == code && items == *list
        }
    };
    assert!(ok, "{name} by {who}: expected {expect:?}, got {} {}", a.status, a.text);
}

/// One method, by every caller, on a fresh fixture in `store`.
async fn method_by_every_caller(store: S, method: &'static Method) {
    let h = Harness::on(store).await;
    let mut tokens = Vec::new();
    for (who, grants) in profiles() {
        tokens.push((who, Some(grants.clone()), Some(h.token(grants).await)));
    }
    tokens.push(("no token", None, None));
    let revoked = h.revoked_token(vec![grant(Role::Operator, Scope::System)]).await;
    tokens.push(("a revoked token", None, Some(revoked)));
    let body = matrix_body(method);
    for (who, grants, token) in &tokens {
        let expect = expected(grants.as_deref(), method);
        assert_answer(&h, method, token.as_deref(), &body, &expect, who).await;
    }
}

async fn matrix_on(backend: Backend) {
    // The methods with a second authorization are exactly those SPEC §3 names.
    let also: Vec<String> = tenant_methods()
        .filter(|m| m.also_authorization().is_some())
        .map(|m| m.info.id().to_string())
        .collect();
    assert_eq!(also, SUBSTRATE_METHODS);
    for m in tenant_methods().filter(|m| m.also_authorization().is_some()) {
        assert!(substrate_account(m, &matrix_body(m)).is_some(), "its example has a substrate");
    }
    let mut checked = 0;
    for method in tenant_methods() {
        run(backend, |store| method_by_every_caller(store, method)).await;
        checked += 1;
    }
    assert_eq!(checked, 32, "every tenant method of the contract was called");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_method_by_every_kind_of_caller_on_sqlite() {
    matrix_on(Backend::Memory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_method_by_every_kind_of_caller_on_postgres() {
    matrix_on(Backend::Postgres).await;
}

bc_store::store_suite!(
    another_tenants_objects_are_not_found_and_unknown_tenants_are_denied_first,
    agent_methods_refuse_every_api_token_shape,
);

/// The methods that do not take an API token (SPEC §9: the join token in the body, the
/// node credential as bearer), by every token shape of the matrix and none: an API
/// token, of whatever grants or state, is not an agent credential — one 401.
async fn agent_methods_refuse_every_api_token_shape(s: S) {
    let h = Harness::on(s).await;
    let mut tokens =
        vec![None, Some(h.revoked_token(vec![grant(Role::Operator, Scope::System)]).await)];
    for (_, grants) in profiles() {
        tokens.push(Some(h.token(grants).await));
    }
    let mut checked = 0;
    for method in registry()
        .methods()
        .iter()
        .filter(|m| !matches!(m.info.authorization, Authorization::Permission { .. }))
    {
        for token in &tokens {
            let a = h.call(&method.info.id().to_string(), token.as_deref(), method.example()).await;
            assert_eq!(
                (a.status.as_u16(), a.code()),
                (401, "UNAUTHENTICATED"),
                "{} with {token:?}: {}",
                method.info.id(),
                a.text
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 2 * tokens.len(), "agents.join and agents.heartbeat");
}

/// What the other tenant's operator gets when it names its own tenant in our examples:
/// the objects they name are ours, so not found; what its own tenant holds is answered.
fn for_own_tenant(method: &Method, target: &Target, on: ResourceType) -> Expect {
    match target {
        // Our account (in the policy) and our pool's substrate are not in its tenant.
        Target::Tenant(_) => match method.info.id().to_string().as_str() {
            "pools.create" | "kubernetesSubstrates.get" => Expect::NotFound,
            _ => Expect::Answered(None),
        },
        // Its own objects, whatever earlier calls made there.
        Target::List { within: None, .. } => Expect::Answered(None),
        // Decided on compute-system before any lookup: a tenant grant is not enough.
        _ if on == ResourceType::ComputeSystem => Expect::Denied,
        _ => Expect::NotFound,
    }
}

async fn another_tenants_objects_are_not_found_and_unknown_tenants_are_denied_first(s: S) {
    let h = Harness::on(s).await;
    let other = h.token(vec![grant(Role::Operator, Scope::Tenant(tenant(OTHER_TENANT)))]).await;
    let own = h.token(vec![grant(Role::Operator, acme())]).await;
    for method in tenant_methods() {
        let Authorization::Permission { on, .. } = method.info.authorization else { continue };
        let mut body = matrix_body(method);
        body["tenantId"] = Value::from(OTHER_TENANT);
        let target = method.check(&body).expect("valid");
        let expect = for_own_tenant(method, &target, on);
        let who = "the other tenant, for its own tenant";
        assert_answer(&h, method, Some(&other), &body, &expect, who).await;
        // Naming our tenant, it learns nothing: denied before anything is looked up,
        // whether the object exists or not.
        let body = matrix_body(method);
        assert_answer(&h, method, Some(&other), &body, &Expect::Denied, "the other tenant").await;
    }
    // Our own operator asking about an object that does not exist: NOT_FOUND.
    let missing =
        serde_json::json!({ "tenantId": ex::TENANT, "poolId": "pool_01jq3k5v9x8y7z6w5v4t3s2000" });
    let a = h.call("pools.get", Some(&own), &missing).await;
    assert_eq!((a.status.as_u16(), a.code()), (404, "NOT_FOUND"), "{}", a.text);
    let a = h.call("pools.get", Some(&other), &missing).await;
    assert_eq!(a.status, 403, "no existence told to a caller with no grant in the tenant");
}
