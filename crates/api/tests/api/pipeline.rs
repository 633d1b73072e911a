//! The pipeline a handler sits behind, seen from inside: what a handler receives (the
//! object looked up, a list's readable scope), how its errors are answered, and operator
//! policies; on a registry of probe methods that echo what they were given.

use std::sync::{Arc, LazyLock};

use bc_api::access::{Access, Resolved};
use bc_api::authz::CedarAuthorizer;
use bc_api::methods::examples as ex;
use bc_api::methods::load_balancers::LoadBalancerRef;
use bc_api::methods::node_pools::KubernetesNodePoolsListInput;
use bc_api::methods::pools::{PoolRef, PoolsListInput};
use bc_api::registry::{Authorization, Kind, Method, MethodInfo, Registry, Resource, ResourceType};
use bc_api::{ApiError, Call, Ctx};
use bc_domain::StoreError;
use bc_domain::model::{Role, Scope};
use bc_domain::ports::{Permission, ReadScope};
use serde_json::{Value, json};

use crate::common::{Harness, OTHER_LB, S, acme, grant, id, sim_config, test_settings};

static PROBE: Resource =
    Resource { name: "probe", page: "probe", module: "test", description: "Probes." };

/// What a handler was handed, as JSON.
fn describe(access: &Access) -> Value {
    let ids = |set: Vec<String>| Value::from(set);
    match access {
        Access::Object(Resolved::Pool(p)) => json!({ "pool": p.pool_id.as_str() }),
        Access::Object(Resolved::LoadBalancer(l)) => json!({ "loadBalancer": l.name.as_str() }),
        Access::List { scope: ReadScope::Tenant, parent } => {
            json!({ "all": true, "parent": parent.as_ref().map(|p| format!("{:?}", p.chain()[0])) })
        }
        Access::List { scope: ReadScope::Granted(s), .. } => json!({
            "pools": ids(s.pools.iter().map(|x| x.to_string()).collect()),
            "accounts": ids(s.accounts.iter().map(|x| x.to_string()).collect()),
            "clusters": ids(s.clusters.iter().map(|x| x.to_string()).collect()),
            "loadBalancers": ids(s.load_balancers.iter().map(|x| x.to_string()).collect()),
        }),
        other => json!({ "other": format!("{other:?}") }),
    }
}

async fn echo<I>(_ctx: Ctx, call: Call<I>) -> Result<Value, ApiError> {
    Ok(describe(&call.access))
}

const fn probe(name: &'static str, permission: Permission, on: ResourceType) -> MethodInfo {
    MethodInfo {
        resource: &PROBE,
        name,
        kind: Kind::Read,
        authorization: Authorization::on(permission, on),
        description: "A probe.",
    }
}

static PROBES: LazyLock<Registry> = LazyLock::new(|| {
    Registry::new(vec![
        Method::declare_custom::<PoolRef, Value, _>(
            probe("pool", Permission::PoolsRead, ResourceType::Pool),
            echo,
        ),
        Method::declare_custom::<PoolsListInput, Value, _>(
            probe("pools", Permission::PoolsRead, ResourceType::Pool),
            echo,
        ),
        Method::declare_custom::<KubernetesNodePoolsListInput, Value, _>(
            probe("nodePools", Permission::KubernetesRead, ResourceType::KubernetesNodePool),
            echo,
        ),
        Method::declare_custom::<LoadBalancerRef, Value, _>(
            probe(
                "loadBalancer",
                Permission::LoadBalancersRead,
                ResourceType::ProviderLoadBalancer,
            ),
            echo,
        ),
        Method::declare_custom::<PoolRef, Value, _>(
            probe("stale", Permission::PoolsRead, ResourceType::Pool),
            |_: Ctx, _: Call<PoolRef>| async {
                Err::<Value, _>(ApiError::from(StoreError::Stale(format!("pool {}", ex::POOL))))
            },
        ),
        Method::declare_custom::<PoolRef, Value, _>(
            probe("panics", Permission::PoolsRead, ResourceType::Pool),
            |_: Ctx, _: Call<PoolRef>| async {
                if std::hint::black_box(true) {
                    panic!("a library's bug on the request path");
                }
                Ok::<Value, ApiError>(Value::Null)
            },
        ),
        Method::declare_custom::<PoolRef, Value, _>(
            probe("broken", Permission::PoolsRead, ResourceType::Pool),
            |_: Ctx, _: Call<PoolRef>| async {
                Err::<Value, _>(ApiError::from(StoreError::internal("SELECT secret FROM accounts")))
            },
        ),
    ])
});

async fn harness(s: S) -> Harness {
    Harness::with(s, sim_config(), |api| api.settings(test_settings()).registry(&PROBES)).await
}

bc_store::store_suite!(
    a_handler_gets_the_object_it_was_authorized_on,
    a_list_gets_the_scope_its_caller_may_read,
    handler_errors_are_answered_by_the_one_mapping,
    operator_policies_decide_beside_the_grants,
    a_panicking_handler_is_answered_internal_with_an_error_id,
);

fn pool_ref() -> Value {
    json!({ "tenantId": ex::TENANT, "poolId": ex::POOL })
}

async fn a_handler_gets_the_object_it_was_authorized_on(s: S) {
    let h = harness(s).await;
    let viewer = h.token(vec![grant(Role::Viewer, Scope::Pool(id(ex::POOL)))]).await;
    let a = h.call("probe.pool", Some(&viewer), &pool_ref()).await;
    assert_eq!(a.json, json!({ "pool": ex::POOL }), "{}", a.text);
    let lb_viewer =
        h.token(vec![grant(Role::Viewer, Scope::ProviderAccount(id(ex::ACCOUNT)))]).await;
    let body = json!({ "tenantId": ex::TENANT, "loadBalancerId": ex::LOAD_BALANCER });
    let a = h.call("probe.loadBalancer", Some(&lb_viewer), &body).await;
    assert_eq!(a.json, json!({ "loadBalancer": "main-lb" }), "{}", a.text);
}

async fn a_list_gets_the_scope_its_caller_may_read(s: S) {
    let h = harness(s).await;
    let list = json!({ "tenantId": ex::TENANT });
    let tenant_viewer = h.token(vec![grant(Role::Viewer, acme())]).await;
    assert_eq!(h.call("probe.pools", Some(&tenant_viewer), &list).await.json["all"], true);
    let scoped = h
        .token(vec![
            grant(Role::Viewer, Scope::Pool(id(ex::POOL))),
            grant(Role::Editor, Scope::LoadBalancer(id(OTHER_LB))),
        ])
        .await;
    let a = h.call("probe.pools", Some(&scoped), &list).await;
    assert_eq!(a.json["pools"], json!([ex::POOL]), "{}", a.text);
    assert_eq!(a.json["loadBalancers"], json!([]), "a load balancer grant reads no pools");
    // Inside a cluster the caller may read as a whole (through its account), all of it.
    let nodes = json!({ "tenantId": ex::TENANT, "clusterId": ex::CLUSTER });
    let account_viewer =
        h.token(vec![grant(Role::Viewer, Scope::ProviderAccount(id(ex::ACCOUNT)))]).await;
    let a = h.call("probe.nodePools", Some(&account_viewer), &nodes).await;
    assert_eq!(a.json["all"], true, "{}", a.text);
    assert!(a.json["parent"].as_str().is_some_and(|p| p.contains(ex::CLUSTER)));
    // A cluster the caller may not read is refused as its `get` would be (SPEC §3).
    let a = h.call("probe.nodePools", Some(&scoped), &nodes).await;
    assert_eq!((a.status.as_u16(), a.code()), (403, "PERMISSION_DENIED"), "{}", a.text);
}

async fn handler_errors_are_answered_by_the_one_mapping(s: S) {
    let h = harness(s).await;
    let viewer = h.token(vec![grant(Role::Viewer, acme())]).await;
    let stale = h.call("probe.stale", Some(&viewer), &pool_ref()).await;
    assert_eq!((stale.status.as_u16(), stale.code()), (409, "ABORTED"));
    let broken = h.call("probe.broken", Some(&viewer), &pool_ref()).await;
    assert_eq!((broken.status.as_u16(), broken.code()), (500, "INTERNAL"));
    let message = broken.json["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("internal error (error id err_"), "{message}");
    assert!(!broken.text.contains("SELECT"), "never SQL: {}", broken.text);
}

async fn operator_policies_decide_beside_the_grants(s: S) {
    let viewer_grants = vec![grant(Role::Viewer, acme())];
    let (plain, token) = crate::common::new_token(viewer_grants);
    let forbid = format!(
        r#"forbid(principal == Token::"{}", action == Action::"compute:pools:read", resource);"#,
        token.token_id
    );
    let cedar = Arc::new(CedarAuthorizer::with_policies(&forbid).expect("valid policy"));
    let h = Harness::with(s, sim_config(), |api| {
        api.settings(test_settings()).registry(&PROBES).authorizer(cedar)
    })
    .await;
    use bc_domain::ports::{Store, UnitOfWork, Write};
    h.store.commit(UnitOfWork::new().write(Write::InsertApiToken(token))).await.expect("token");
    let a = h.call("probe.pool", Some(&plain), &pool_ref()).await;
    assert_eq!((a.status.as_u16(), a.code()), (403, "PERMISSION_DENIED"), "{}", a.text);
    let other = h.token(vec![grant(Role::Viewer, acme())]).await;
    assert_eq!(h.call("probe.pool", Some(&other), &pool_ref()).await.status, 200);
}

/// Issue 29, item 3: a panic on a request path is caught and answered as a JSON
/// `INTERNAL` with an error id (and logged), never a dropped connection; the server goes on
/// answering.
async fn a_panicking_handler_is_answered_internal_with_an_error_id(s: S) {
    let h = harness(s).await;
    let viewer = h.token(vec![grant(Role::Viewer, acme())]).await;
    let a = h.call("probe.panics", Some(&viewer), &pool_ref()).await;
    assert_eq!((a.status.as_u16(), a.code()), (500, "INTERNAL"), "{}", a.text);
    let message = a.json["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("internal error (error id err_"), "{message}");
    assert!(!a.text.contains("library's bug"), "the panic's text is logged, not answered");
    let after = h.call("probe.pool", Some(&viewer), &pool_ref()).await;
    assert_eq!(after.status, 200, "{}", after.text);
}
