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
