//! `providerAccounts.*` (SPEC §5): the token is checked at the provider before anything
//! is stored, stored sealed the way every registry opens it, and never returned.

use bc_api::methods::examples as ex;
use bc_domain::ProviderAccountId;
use std::sync::Arc;

use bc_domain::model::{ProviderKind, SecretString};
use bc_domain::ports::{
    AccountCredentials, Clock, ProviderCredentials, ProviderRegistry, SecretBox, SystemClock,
    UnitOfWork, Write,
};
use bc_providers::gke::{GkeConfig, GkeRegistry};
use bc_providers::registry::Providers;
use bc_sim::testing::TEST_TOKEN;
use bc_store::AeadSecretBox;
use serde_json::{Value, json};

use crate::common::repos::*;
use crate::common::{Harness, S, sim_config, test_settings};
use bc_sim::testing::Cloud;

bc_store::store_suite!(
    create_checks_the_token_then_stores_it_sealed,
    a_refused_token_stores_nothing,
    get_list_and_delete,
    a_malformed_service_account_key_is_invalid_and_never_echoed,
    a_gke_account_offers_what_gke_offers,
    a_gke_account_is_checked_by_minting_a_token_and_listing_clusters,
    a_deleted_account_keeps_no_credentials_and_takes_no_new_objects,
);

/// A throwaway RSA key made for the adapter's tests, as the text of a key file.
fn gke_key_file() -> String {
    let pem = include_str!("../../../providers/tests/data/gke-test-key.pem");
    json!({"type": "service_account", "project_id": "bc-test-project", "private_key_id": "0123abcd",
        "private_key": pem, "client_email": "bc@bc-test-project.iam.gserviceaccount.com",
        "token_uri": "http://127.0.0.1:9/never-used"})
    .to_string()
}

/// The lines of the key's PEM body: none may appear anywhere.
fn key_lines() -> Vec<String> {
    let pem = include_str!("../../../providers/tests/data/gke-test-key.pem");
    pem.lines().filter(|l| !l.starts_with("-----")).map(str::to_owned).collect()
}

async fn a_malformed_service_account_key_is_invalid_and_never_echoed(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    for line in key_lines() {
        h.capture.secret(&line);
    }
    let marker = "SECRETMARKERSECRET";
    h.capture.secret(marker);
    let body = |credentials: Value| json!({"tenantId": ex::TENANT, "provider": "gke", "name": "g", "credentials": credentials});
    // Not JSON; a PKCS#1 key; the key's text with its private key cut short.
    let pkcs1 = gke_key_file().replace("BEGIN PRIVATE KEY", "BEGIN RSA PRIVATE KEY");
    let cut = {
        let mut v: Value = serde_json::from_str(&gke_key_file()).unwrap();
        v["private_key"] =
            json!(format!("-----BEGIN PRIVATE KEY-----\n{marker}\n-----END PRIVATE KEY-----\n"));
        v.to_string()
    };
    for key in [format!("not a key {marker}"), pkcs1, cut] {
        let a = h
            .call("providerAccounts.create", Some(&t), &body(json!({"serviceAccountKey": key})))
            .await;
        let message = a.err("INVALID_ARGUMENT");
        assert_eq!(a.field(), Some("credentials.serviceAccountKey"), "{message}");
        assert!(!message.contains(marker) && !message.contains("MII"), "{message}");
    }
    // A DigitalOcean document for a gke account, and the other way round, name the field.
    let a = h.call("providerAccounts.create", Some(&t), &body(json!({"token": "dop_v1_x"}))).await;
    a.err("INVALID_ARGUMENT");
    assert_eq!(a.field(), Some("credentials"));
    let mut other = create_body("d", TEST_TOKEN);
    other["credentials"] = json!({"serviceAccountKey": gke_key_file()});
    let a = h.call("providerAccounts.create", Some(&t), &other).await;
    a.err("INVALID_ARGUMENT");
    assert_eq!(a.field(), Some("credentials"));
    // A project id that is not one.
    let bad = json!({"serviceAccountKey": gke_key_file(), "projectId": "Not A Project"});
    let a = h.call("providerAccounts.create", Some(&t), &body(bad)).await;
    a.err("INVALID_ARGUMENT");
    assert_eq!(a.field(), Some("credentials.projectId"));
    let list =
        h.call("providerAccounts.list", Some(&t), &json!({ "tenantId": ex::TENANT })).await.ok();
    assert_eq!(list["providerAccounts"].as_array().unwrap().len(), 1, "only the fixture's: {list}");
}

/// Every provider of a server: the simulator's DigitalOcean, and GKE at an address
/// nothing answers (what is checked here is decided from GKE's declaration, before any
/// call).
fn with_gke(
    digitalocean: Arc<dyn ProviderRegistry>,
    secrets: Arc<dyn SecretBox>,
) -> Arc<dyn ProviderRegistry> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let gke = GkeRegistry::new(
        GkeConfig::with_urls("http://127.0.0.1:9", "http://127.0.0.1:9/token"),
        secrets,
        clock,
    );
    Arc::new(
        Providers::new()
            .with(ProviderKind::Digitalocean, digitalocean)
            .with(ProviderKind::Gke, Arc::new(gke)),
    )
}

async fn a_gke_account_offers_what_gke_offers(s: S) {
    let secrets: Arc<dyn SecretBox> = Arc::new(AeadSecretBox::new(&[7u8; 32]).expect("key"));
    let h = Harness::with_providers(
        s,
        sim_config(),
        |r| with_gke(r, secrets),
        |api| api.settings(test_settings()),
    )
    .await;
    let t = h.operator().await;
    for line in key_lines() {
        h.capture.secret(&line);
    }
    // A gke account, sealed as providerAccounts.create seals one.
    let acme: bc_domain::TenantId = ex::TENANT.parse().unwrap();
    let mut account = bc_store::testing::account(&acme, "google");
    account.provider = ProviderKind::Gke;
    let creds = ProviderCredentials::service_account(SecretString::new(gke_key_file()), None)
        .check(ProviderKind::Gke)
        .expect("the test key");
    account.project_id = creds.project_id().map(str::to_owned);
    let id = account.provider_account_id.clone();
    account.credentials = bc_domain::model::SealedSecret(
        h.secrets.seal(&creds.to_plaintext(), id.as_str().as_bytes()).unwrap(),
    );
    h.store.commit(UnitOfWork::new().write(Write::InsertAccount(account))).await.unwrap();
    let get = json!({ "tenantId": ex::TENANT, "providerAccountId": id });
    let shown = h.call("providerAccounts.get", Some(&t), &get).await.ok();
    assert_eq!(shown["provider"], "gke");
    assert_eq!(shown["projectId"], "bc-test-project");
    // No load balancers on gke: refused naming the provider.
    let mut lb = crate::common::example("loadBalancers.create");
    lb["providerAccountId"] = json!(id);
    let message = h.call("loadBalancers.create", Some(&t), &lb).await.err("FAILED_PRECONDITION");
    assert!(message.contains("gke offers no load balancers"), "{message}");
    // Names of more than 40 characters are GKE's to refuse: refused here, naming the field.
    let mut cluster = crate::common::example("kubernetesClusters.create");
    cluster["providerAccountId"] = json!(id);
    cluster["name"] = json!("a".repeat(41));
    let a = h.call("kubernetesClusters.create", Some(&t), &cluster).await;
    let message = a.err("INVALID_ARGUMENT");
    assert_eq!(a.field(), Some("name"), "{message}");
    // Autopilot is offered (the contract's other mode).
    let autopilot = json!({"tenantId": ex::TENANT, "providerAccountId": id, "name": "auto",
        "region": "us-central1", "mode": "autopilot", "nodePools": []});
    let made = h.call("kubernetesClusters.create", Some(&t), &autopilot).await.ok();
    assert_eq!(made["mode"], "autopilot");
}

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
    let opened = AccountCredentials::unseal(h.secrets.as_ref(), &stored).expect("opens");
    assert_eq!(opened, AccountCredentials::Token(SecretString::new(TEST_TOKEN)));
    let mut moved = stored.clone();
    moved.provider_account_id = ex::ACCOUNT.parse().unwrap();
    assert!(AccountCredentials::unseal(h.secrets.as_ref(), &moved).is_err(), "bound to its row");
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

/// Every provider of a server on the simulated cloud: its DigitalOcean and its GKE face.
fn with_sim_gke(
    cloud: &Cloud,
    digitalocean: Arc<dyn ProviderRegistry>,
) -> Arc<dyn ProviderRegistry> {
    let secrets: Arc<dyn SecretBox> = Arc::new(AeadSecretBox::new(&[7u8; 32]).expect("key"));
    let config = GkeConfig::with_urls(cloud.gke_api_url(), cloud.gke_token_url());
    let gke = GkeRegistry::new(config, secrets, cloud.clock.clone() as Arc<dyn Clock>);
    Arc::new(
        Providers::new()
            .with(ProviderKind::Digitalocean, digitalocean)
            .with(ProviderKind::Gke, Arc::new(gke)),
    )
}

async fn a_gke_account_is_checked_by_minting_a_token_and_listing_clusters(s: S) {
    let h = Harness::with_cloud_providers(s, sim_config(), with_sim_gke, |api| {
        api.settings(test_settings())
    })
    .await;
    let t = h.operator().await;
    let key = h.cloud.gke_key();
    let file: Value = serde_json::from_str(&key).unwrap();
    let pem = file["private_key"].as_str().unwrap();
    for line in pem.lines().filter(|l| !l.starts_with("-----")) {
        h.capture.secret(line);
    }
    let body = json!({"tenantId": ex::TENANT, "provider": "gke", "name": "google",
        "credentials": {"serviceAccountKey": key}});
    let made = h.call("providerAccounts.create", Some(&t), &body).await.ok();
    assert_eq!(made["provider"], "gke");
    assert_eq!(made["projectId"], "bc-sim-project");
    let tokens = h
        .sim
        .state()
        .model()
        .request_count(&bc_sim::model::routes::key("POST", bc_sim::gke_api::routes::TOKEN));
    let lists = h
        .sim
        .state()
        .model()
        .request_count(&bc_sim::model::routes::key("GET", bc_sim::gke_api::routes::CLUSTERS));
    assert!(tokens >= 1 && lists >= 1, "tokens {tokens}, lists {lists}");
    // Sealed like a DigitalOcean token, and opened by the one function every registry uses.
    let id: ProviderAccountId = made["providerAccountId"].as_str().unwrap().parse().unwrap();
    let stored = h.store.account_get_any(&id).await.unwrap().unwrap();
    assert!(!String::from_utf8_lossy(&stored.credentials.0).contains("PRIVATE KEY"));
    let opened = AccountCredentials::unseal(h.secrets.as_ref(), &stored).expect("opens");
    assert_eq!(opened.project_id(), Some("bc-sim-project"));
    // A key the token endpoint no longer knows: FAILED_PRECONDITION with its reason.
    let kid = file["private_key_id"].as_str().unwrap();
    assert!(h.sim.state().model().gke_delete_key(kid));
    let mut again = body.clone();
    again["name"] = json!("google-2");
    let message =
        h.call("providerAccounts.create", Some(&t), &again).await.err("FAILED_PRECONDITION");
    assert!(message.contains("invalid_grant"), "{message}");
}

/// Issue 29, item 6: deleting an account erases its sealed credentials in the same
/// transaction, and a create that read the account live before the delete committed (its
/// unit of work committed after) leaves nothing live on the deleted account.
async fn a_deleted_account_keeps_no_credentials_and_takes_no_new_objects(s: S) {
    use bc_domain::ports::{UnitOfWork, Write};
    use bc_domain::recipes;
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
    // Each create's own recipe (bc-domain's), as the API builds it.
    let now = h.now();
    let lb = recipes::load_balancer_created(
        recipes::NewLoadBalancer {
            load_balancer_id: rows::id(),
            tenant_id: live.tenant_id.clone(),
            pool_id: pool.pool_id.clone(),
            provider_account_id: id.clone(),
            name: "raced-lb".parse().unwrap(),
            spec: rows::lb_spec(),
        },
        now,
    );
    let cluster = recipes::cluster_created(
        recipes::NewCluster {
            cluster_id: rows::id(),
            tenant_id: live.tenant_id.clone(),
            provider_account_id: id.clone(),
            name: "raced-cluster".parse().unwrap(),
            region: "nyc1".into(),
            version: None,
            high_availability: false,
            mode: bc_domain::model::ClusterMode::Autopilot,
        },
        vec![],
        now,
    );
    let substrate = rows::substrate(&pool, &live, None);
    let (lb, cluster, units) = (
        lb.record,
        cluster.record.0,
        [lb.uow, cluster.uow, UnitOfWork::new().write(Write::PutSubstrate(substrate))],
    );
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
