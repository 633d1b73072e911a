//! Issue 29, item 8 continued (SPEC §3): a node-pool list honours object-level policies
//! as the pool, load balancer, cluster and account lists do — an operator's `forbid` on
//! one node pool hides it from `get` and from `kubernetesNodePools.list`.

use std::sync::Arc;

use bc_api::authz::CedarAuthorizer;
use bc_api::methods::examples as ex;
use bc_domain::NodePoolId;
use bc_domain::recipes::node_pool_created;
use bc_store::testing as rows;
use serde_json::json;

use crate::common::repos::*;
use crate::common::{Harness, S, id, sim_config, test_settings};

bc_store::store_suite!(a_forbid_on_one_node_pool_hides_it_from_get_and_list);

async fn a_forbid_on_one_node_pool_hides_it_from_get_and_list(s: S) {
    let hidden: NodePoolId = rows::id();
    let forbid =
        format!(r#"forbid(principal, action, resource == KubernetesNodePool::"{hidden}");"#);
    let cedar = Arc::new(CedarAuthorizer::with_policies(&forbid).expect("valid policy"));
    let h =
        Harness::with(s, sim_config(), |api| api.settings(test_settings()).authorizer(cedar)).await;
    let cluster = h.store.cluster_get_any(&id(ex::CLUSTER)).await.unwrap().unwrap();
    let mut secret = rows::node_pool(&cluster, "hidden");
    secret.node_pool_id = hidden.clone();
    let shown = rows::node_pool(&cluster, "shown");
    // Both made by `kubernetesNodePools.create`'s recipe, as the API makes them.
    for row in [secret, shown.clone()] {
        h.store.commit(node_pool_created(row, h.now()).uow).await.unwrap();
    }
    let operator = h.operator().await;

    let get = |np: &NodePoolId| json!({"tenantId": ex::TENANT, "nodePoolId": np});
    let a = h.call("kubernetesNodePools.get", Some(&operator), &get(&hidden)).await;
    a.err("PERMISSION_DENIED");
    h.call("kubernetesNodePools.get", Some(&operator), &get(&shown.node_pool_id)).await.ok();

    let list = json!({"tenantId": ex::TENANT, "clusterId": ex::CLUSTER});
    let listed = h.call("kubernetesNodePools.list", Some(&operator), &list).await.ok();
    let ids: Vec<&str> = listed["kubernetesNodePools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["nodePoolId"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&shown.node_pool_id.as_str()), "{listed}");
    assert!(!ids.contains(&hidden.as_str()), "the forbidden node pool is listed: {listed}");
}
