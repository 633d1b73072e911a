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

/// SPEC §3: ids named in a body besides the target are authorized too — a pool's
/// substrate account (`compute:kubernetes:manage`), a load balancer's pool and target load
/// balancers (`compute:load-balancers:manage`). These methods declare such a rule.
const ALSO_METHODS: &[&str] =
    &["pools.create", "pools.update", "loadBalancers.create", "loadBalancers.update"];

/// Each object `body` names besides the target, with the permission SPEC §3 needs on it.
fn also_scopes(method: &Method, body: &Value) -> Vec<(Permission, Scope)> {
    let mut also = Vec::new();
    let lb_targets = |also: &mut Vec<(Permission, Scope)>| {
        for lb in body["targets"]["loadBalancerIds"].as_array().into_iter().flatten() {
            let lb = Scope::LoadBalancer(id(lb.as_str().expect("an id")));
            also.push((Permission::LoadBalancersManage, lb));
        }
    };
    match method.info.id().to_string().as_str() {
        "pools.create" | "pools.update" => {
            if let Some(account) = body["policy"]["substrate"]["account"].as_str() {
                also.push((Permission::KubernetesManage, Scope::ProviderAccount(id(account))));
            }
        }
        "loadBalancers.create" => {
            let pool = body["poolId"].as_str().expect("poolId");
            also.push((Permission::LoadBalancersManage, Scope::Pool(id(pool))));
            lb_targets(&mut also);
        }
        "loadBalancers.update" => lb_targets(&mut also),
        _ => {}
    }
    also
}

/// SPEC §3: a list's parent (`providerAccountId`, `clusterId`) is answered as a `get` of
/// it would be: the permission of that `get`, on the parent.
fn parent_get(parent: &Target) -> (Permission, Scope) {
    let scope = object_scope(parent).expect("a parent object");
    let permission = match parent {
        Target::ProviderAccount(..) => Permission::ProviderAccountsRead,
        Target::Cluster(..) => Permission::KubernetesRead,
        other => panic!("a list inside {other:?}: add its get's permission here"),
    };
    (permission, scope)
}

/// Bodies besides the examples, each run by every caller like the examples, with the
/// answer an allowed caller gets: a global load balancer aimed at the fixture's two
/// regional ones (created), and the regional example retargeted at another load balancer
/// (authorized on the target before it is refused, since a regional one takes no load
/// balancers).
fn extra_cases() -> Vec<(&'static str, Value, &'static str)> {
    let global = serde_json::json!({
        "tenantId": ex::TENANT,
        "poolId": ex::POOL,
        "providerAccountId": ex::ACCOUNT,
        "name": "matrix-global",
        "type": "global",
        "globalSettings": { "targetProtocol": "https", "targetPort": 443 },
        "domains": [{ "name": "example.com", "isManaged": true }],
        "targets": { "loadBalancerIds": [ex::LOAD_BALANCER, OTHER_LB] },
        "requestId": "matrix-global-1"
    });
    let retarget = serde_json::json!({
        "tenantId": ex::TENANT,
        "loadBalancerId": ex::LOAD_BALANCER,
        "targets": { "loadBalancerIds": [OTHER_LB] }
    });
    vec![
        ("loadBalancers.create", global, "OK"),
        ("loadBalancers.update", retarget, "INVALID_ARGUMENT"),
    ]
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

fn expected_for(grants: Option<&[Grant]>, method: &Method, body: &Value) -> Expect {
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
    let target = method.check(body).expect("the body is valid");
    if let Target::List { within: Some(parent), .. } = &target {
        let (permission, scope) = parent_get(parent);
        if !allows(grants, permission, &chain_of(&scope)) {
            return Expect::Denied;
        }
    }
    if matches!(target, Target::List { .. }) {
        let (_, _, objects) = fixture_list(method);
        let visible = objects
            .iter()
            .filter(|o| allows(grants, permission, &chain_of(o)))
            .map(scope_id)
            .collect();
        return Expect::Answered(Some(visible));
    }
    let also = also_scopes(method, body)
        .iter()
        .all(|(permission, scope)| allows(grants, *permission, &chain_of(scope)));
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
        // Issue 29, item 2: a grant on the account but not the pool may not book the pool.
        (
            "editor on the account",
            vec![grant(Role::Editor, Scope::ProviderAccount(id(ex::ACCOUNT)))],
        ),
        // Issue 29, item 2: a grant on a load balancer but not on the ones it would target.
        (
            "editor on the load balancer",
            vec![grant(Role::Editor, Scope::LoadBalancer(id(ex::LOAD_BALANCER)))],
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
    assert_answer_is(h, method, token, body, expect, who, None).await;
}

/// As [`assert_answer`], an allowed call answering `allowed_code` when given.
async fn assert_answer_is(
    h: &Harness,
    method: &Method,
    token: Option<&str>,
    body: &Value,
    expect: &Expect,
    who: &str,
    allowed_code: Option<&str>,
) {
    let name = method.info.id().to_string();
    let a = h.call(&name, token, body).await;
    let ok = match expect {
        Expect::Unauthenticated => a.status == 401 && a.code() == "UNAUTHENTICATED",
        Expect::Denied => a.status == 403 && a.code() == "PERMISSION_DENIED",
        Expect::NotFound => a.status == 404 && a.code() == "NOT_FOUND",
        Expect::Answered(list) => {
            let fixture = FIXTURE_ANSWERS.iter().find(|(m, _)| *m == name).map(|(_, c)| *c);
            let code = allowed_code.or(fixture).unwrap_or("OK");
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
    let body = matrix_body(method);
    body_by_every_caller(store, method, body, None).await;
}

/// One body of a method, by every caller, on a fresh fixture in `store`; an allowed call
/// answers `allowed_code` when given.
async fn body_by_every_caller(
    store: S,
    method: &'static Method,
    body: Value,
    allowed_code: Option<&'static str>,
) {
    let h = Harness::on(store).await;
    let mut tokens = Vec::new();
    for (who, grants) in profiles() {
        tokens.push((who, Some(grants.clone()), Some(h.token(grants).await)));
    }
    tokens.push(("no token", None, None));
    let revoked = h.revoked_token(vec![grant(Role::Operator, Scope::System)]).await;
    tokens.push(("a revoked token", None, Some(revoked)));
    for (who, grants, token) in &tokens {
        let expect = expected_for(grants.as_deref(), method, &body);
        assert_answer_is(&h, method, token.as_deref(), &body, &expect, who, allowed_code).await;
    }
}

async fn matrix_on(backend: Backend) {
    // The methods with a second authorization are exactly those SPEC §3 names.
    let also: Vec<String> = tenant_methods()
        .filter(|m| !m.also_authorization().is_empty())
        .map(|m| m.info.id().to_string())
        .collect();
    assert_eq!(also, ALSO_METHODS);
    // Each of them is called with a body naming such an object.
    for name in ALSO_METHODS {
        let method = tenant_methods().find(|m| m.info.id().to_string() == *name).expect("declared");
        let named = std::iter::once(matrix_body(method))
            .chain(extra_cases().into_iter().filter(|c| c.0 == *name).map(|c| c.1))
            .any(|body| !also_scopes(method, &body).is_empty());
        assert!(named, "{name}: no body of the matrix names another object");
    }
    for (name, body, code) in extra_cases() {
        let method = tenant_methods().find(|m| m.info.id().to_string() == name).expect("declared");
        run(backend, |store| body_by_every_caller(store, method, body.clone(), Some(code))).await;
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
