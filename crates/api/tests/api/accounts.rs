//! `providerAccounts.*` (SPEC §5): the token is checked at the provider before anything
//! is stored, stored sealed the way every registry opens it, and never returned.

use bc_api::methods::examples as ex;
use bc_domain::ProviderAccountId;
use bc_domain::ports::ProviderCredentials;
use bc_sim::testing::TEST_TOKEN;
use serde_json::{Value, json};

use crate::common::repos::*;
use crate::common::{Harness, S, sim_config, test_settings};

bc_store::store_suite!(
    create_checks_the_token_then_stores_it_sealed,
    a_refused_token_stores_nothing,
    get_list_and_delete,
    a_deleted_account_keeps_no_credentials_and_takes_no_new_objects,
);

fn create_body(name: &str, token: &str) -> Value {
    json!({
        "tenantId": ex::TENANT,
        "provider": "digitalocean",
        "name": name,
        "credentials": { "token": token }
    })
}

async fn create_checks_the_token_then_stores_it_sealed(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let account =
        h.call("providerAccounts.create", Some(&t), &create_body("second", TEST_TOKEN)).await.ok();
    let keys: Vec<&String> = account.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["providerAccountId", "tenantId", "provider", "name", "createdAt"]);
    // Stored sealed, opened by the one function every registry uses, bound to its row.
    let id: ProviderAccountId = account["providerAccountId"].as_str().unwrap().parse().unwrap();
    let stored = h.store.account_get_any(&id).await.unwrap().unwrap();
    assert!(!String::from_utf8_lossy(&stored.credentials.0).contains(TEST_TOKEN));
    let opened = ProviderCredentials::unseal(h.secrets.as_ref(), &stored).expect("opens");
    assert_eq!(opened.token.expose(), TEST_TOKEN);
    let mut moved = stored.clone();
    moved.provider_account_id = ex::ACCOUNT.parse().unwrap();
    assert!(ProviderCredentials::unseal(h.secrets.as_ref(), &moved).is_err(), "bound to its row");
    // The check was a call at the provider.
    let key = bc_sim::model::routes::key("GET", bc_sim::model::routes::ACCOUNT);
    let checks = h.sim.state().model().request_count(&key);
    assert!(checks >= 1, "{checks}");
    // The account works: a cluster on it is accepted.
    let mut cluster = crate::common::example("kubernetesClusters.create");
    cluster["providerAccountId"] = json!(id);
    h.call("kubernetesClusters.create", Some(&t), &cluster).await.ok();
}

async fn a_refused_token_stores_nothing(s: S) {
    let h = Harness::with(s, sim_config(), |api| api.settings(test_settings())).await;
    let t = h.operator().await;
    let refused = "dop_v1_not_an_account_of_the_simulator";
    h.capture.secret(refused);
    let a = h.call("providerAccounts.create", Some(&t), &create_body("nope", refused)).await;
    let message = a.err("FAILED_PRECONDITION");
    assert!(message.contains("refused"), "{message}");
    let list =
        h.call("providerAccounts.list", Some(&t), &json!({ "tenantId": ex::TENANT })).await.ok();
    assert_eq!(list["providerAccounts"].as_array().unwrap().len(), 1, "only the fixture's: {list}");
    // A token no HTTP header could carry is refused before the provider is asked.
    let a = h.call("providerAccounts.create", Some(&t), &create_body("nope", "a b")).await;
    a.err("INVALID_ARGUMENT");
    assert_eq!(a.field(), Some("credentials.token"));
}

async fn get_list_and_delete(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let get = json!({ "tenantId": ex::TENANT, "providerAccountId": ex::ACCOUNT });
    let account = h.call("providerAccounts.get", Some(&t), &get).await.ok();
    assert_eq!(account["name"], "primary");
    assert!(account.get("credentials").is_none());
    // Refused while clusters and load balancers remain, naming them.
    let message =
        h.call("providerAccounts.delete", Some(&t), &get).await.err("FAILED_PRECONDITION");
    assert!(message.contains("cluster") || message.contains("load balancer"), "{message}");
    // An account with nothing on it goes, and is then not found.
    let made =
        h.call("providerAccounts.create", Some(&t), &create_body("spare", TEST_TOKEN)).await.ok();
    let spare = json!({ "tenantId": ex::TENANT, "providerAccountId": made["providerAccountId"] });
    assert_eq!(h.call("providerAccounts.delete", Some(&t), &spare).await.ok(), made);
    h.call("providerAccounts.get", Some(&t), &spare).await.err("NOT_FOUND");
    let list =
        h.call("providerAccounts.list", Some(&t), &json!({ "tenantId": ex::TENANT })).await.ok();
    assert_eq!(list["providerAccounts"], json!([account]));
}

/// Issue 29, item 6: deleting an account erases its sealed credentials in the same
/// transaction, and a create that read the account live before the delete committed (its
/// unit of work committed after) leaves nothing live on the deleted account.
async fn a_deleted_account_keeps_no_credentials_and_takes_no_new_objects(s: S) {
    use bc_domain::model::QuotaResource;
    use bc_domain::ports::{UnitOfWork, Write};
    use bc_store::testing as rows;

    let h = Harness::on(s).await;
    let t = h.operator().await;
    let made =
        h.call("providerAccounts.create", Some(&t), &create_body("doomed", TEST_TOKEN)).await.ok();
    let id: ProviderAccountId = made["providerAccountId"].as_str().unwrap().parse().unwrap();
    // What a create read before the delete: the account, live.
    let live = h.store.account_get_any(&id).await.unwrap().expect("stored");
    assert!(!live.credentials.0.is_empty());
    let spare = json!({ "tenantId": ex::TENANT, "providerAccountId": id });
    h.call("providerAccounts.delete", Some(&t), &spare).await.ok();
    let row = h.store.account_get_any(&id).await.unwrap().expect("kept as deleted");
    assert!(row.deleted_at.is_some());
    assert!(row.credentials.0.is_empty(), "the sealed credentials are erased with the delete");
    // The creates that raced the delete commit their units of work now: each is refused.
    let pool = h.store.pool_get(&live.tenant_id, &ex::POOL.parse().unwrap()).await.unwrap();
    let pool = pool.expect("the fixture's pool");
    let lb = rows::load_balancer(&pool, &live, "raced-lb");
    let cluster = rows::cluster(&live, "raced-cluster");
    let substrate = rows::substrate(&pool, &live, None);
    let units = [
        UnitOfWork::new().write(Write::InsertLoadBalancer(lb.clone())).write(Write::BookQuota {
            pool_id: pool.pool_id.clone(),
            resource: QuotaResource::LoadBalancers,
        }),
        UnitOfWork::new().write(Write::InsertCluster(cluster.clone())),
        UnitOfWork::new().write(Write::PutSubstrate(substrate)),
    ];
    for (i, uow) in units.into_iter().enumerate() {
        let e = h.store.commit(uow).await.expect_err("nothing is created on a deleted account");
        assert!(e.to_string().contains(id.as_str()), "unit {i}: {e}");
    }
    assert!(
        h.store.load_balancer_get(&live.tenant_id, &lb.load_balancer_id).await.unwrap().is_none()
    );
    assert!(h.store.cluster_get(&live.tenant_id, &cluster.cluster_id).await.unwrap().is_none());
    let substrate = h.store.substrate_get_any(&pool.pool_id).await.unwrap();
    let on_deleted = substrate.as_ref().is_some_and(|s| s.provider_account_id == id);
    assert!(!on_deleted, "{substrate:?}");
}
