//! Issue 29, item 8 (SPEC §3): lists and event reads honour object-level policies — an
//! operator's `forbid` on one load balancer hides it from `get`, from `loadBalancers.list`
//! and from the tenant's events, for a caller whose tenant-wide grant allows the rest.

use std::sync::Arc;

use bc_api::authz::CedarAuthorizer;
use bc_api::methods::examples as ex;
use bc_domain::LoadBalancerId;
use bc_domain::ports::UnitOfWork;
use bc_domain::recipes;
use bc_store::testing as rows;
use serde_json::json;

use crate::common::repos::*;
use crate::common::{Harness, S, id, sim_config, tenant, test_settings};

bc_store::store_suite!(a_forbid_on_one_load_balancer_hides_it_from_get_list_and_events);

async fn a_forbid_on_one_load_balancer_hides_it_from_get_list_and_events(s: S) {
    let hidden: LoadBalancerId = rows::id();
    let forbid = format!(r#"forbid(principal, action, resource == LoadBalancer::"{hidden}");"#);
    let cedar = Arc::new(CedarAuthorizer::with_policies(&forbid).expect("valid policy"));
    let h =
        Harness::with(s, sim_config(), |api| api.settings(test_settings()).authorizer(cedar)).await;
    let tenant = tenant(ex::TENANT);
    let pool = h.store.pool_get(&tenant, &id(ex::POOL)).await.unwrap().unwrap();
    let account = h.store.account_get_any(&id(ex::ACCOUNT)).await.unwrap().unwrap();
    // Both made by `loadBalancers.create`'s recipe, as the API makes them.
    let create = |id: LoadBalancerId, name: &str| {
        let new = recipes::NewLoadBalancer {
            load_balancer_id: id,
            tenant_id: tenant.clone(),
            pool_id: pool.pool_id.clone(),
            provider_account_id: account.provider_account_id.clone(),
            name: name.parse().unwrap(),
            spec: rows::lb_spec(),
        };
        recipes::load_balancer_created(new, h.now())
    };
    let (secret, shown) = (create(hidden.clone(), "hidden"), create(rows::id(), "shown"));
    h.store.commit(secret.uow).await.unwrap();
    h.store.commit(shown.uow).await.unwrap();
    let shown = shown.record;
    let subject = |lb: &LoadBalancerId| format!("compute.load-balancers.{lb}");
    let uow = UnitOfWork::new()
        .event(rows::event(&tenant, &subject(&hidden)))
        .event(rows::event(&tenant, &subject(&shown.load_balancer_id)))
        .event(rows::event(&tenant, &format!("compute.pools.{}", ex::POOL)));
    h.store.commit(uow).await.unwrap();
    let operator = h.operator().await;

    let get = |lb: &LoadBalancerId| json!({"tenantId": ex::TENANT, "loadBalancerId": lb});
    h.call("loadBalancers.get", Some(&operator), &get(&hidden)).await.err("PERMISSION_DENIED");
    h.call("loadBalancers.get", Some(&operator), &get(&shown.load_balancer_id)).await.ok();

    let listed =
        h.call("loadBalancers.list", Some(&operator), &json!({"tenantId": ex::TENANT})).await.ok();
    let ids: Vec<&str> = listed["loadBalancers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["loadBalancerId"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&shown.load_balancer_id.as_str()), "{listed}");
    assert!(!ids.contains(&hidden.as_str()), "the forbidden load balancer is listed: {listed}");

    let events =
        h.call("events.list", Some(&operator), &json!({"tenantId": ex::TENANT})).await.ok();
    let subjects: Vec<&str> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["subject"].as_str().unwrap())
        .collect();
    assert!(subjects.contains(&subject(&shown.load_balancer_id).as_str()), "{events}");
    assert!(subjects.contains(&format!("compute.pools.{}", ex::POOL).as_str()), "{events}");
    assert!(
        !subjects.contains(&subject(&hidden).as_str()),
        "the forbidden load balancer's events are read: {events}"
    );
}
