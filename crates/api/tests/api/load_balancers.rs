//! `loadBalancers.*` (SPEC §11): regional and global shapes, the quota unit booked in the
//! same transaction (with a limit of N, N concurrent creates succeed), updates checked
//! whole, deletes recorded as desired state.

use std::sync::Arc;

use async_trait::async_trait;
use bc_api::methods::examples as ex;
use bc_domain::model::{LoadBalancerType, ProviderAccount, QuotaResource, Role, Scope};
use bc_domain::ports::{
    AccountCredentials, KubernetesProvider, LoadBalancerProvider, ProviderImpl, ProviderOffer,
    ProviderRegistry, ProviderResult, WorkKind,
};
use bc_domain::{LoadBalancerId, PoolId};
use serde_json::{Value, json};

use crate::common::repos::*;
use crate::common::{
    EXAMPLE_POOL_LBS, FIXTURE_LBS_BOOKED, Harness, OTHER_LB, S, example, grant, id, sim_config,
    test_settings, with, without,
};

bc_store::store_suite!(
    a_regional_load_balancer_is_recorded_with_its_quota_unit,
    regional_and_global_take_different_fields,
    a_global_load_balancer_targets_regional_ones_of_its_account,
    no_quota_row_grants_none,
    with_a_limit_of_n_exactly_n_concurrent_creates_succeed,
    updates_are_checked_whole_and_deletes_are_idempotent,
    lists_filter_by_pool_account_and_grants,
    the_adapters_declaration_decides_which_load_balancers_an_account_takes,
    a_repeated_create_answers_first_where_its_handler_would_now_refuse,
    a_create_reads_no_idempotency_record_before_it_commits,
);

fn create_body(name: &str) -> Value {
    with(&without(&example("loadBalancers.create"), "requestId"), "name", json!(name))
}

fn global_body(name: &str, targets: Value) -> Value {
    json!({
        "tenantId": ex::TENANT,
        "poolId": ex::POOL,
        "providerAccountId": ex::ACCOUNT,
        "name": name,
        "type": "global",
        "globalSettings": { "targetProtocol": "https", "targetPort": 443, "cdn": true },
        "domains": [{ "name": "example.com", "isManaged": true }],
        "targets": targets
    })
}

async fn used(h: &Harness, pool: &PoolId) -> u32 {
    let q = h.store.quota_get(pool, QuotaResource::LoadBalancers).await.unwrap();
    q.map_or(0, |q| q.used)
}

async fn a_regional_load_balancer_is_recorded_with_its_quota_unit(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let lb = h.call("loadBalancers.create", Some(&t), &create_body("web")).await.ok();
    assert_eq!((lb["state"].as_str(), lb["type"].as_str()), (Some("pending"), Some("regional")));
    assert_eq!(
        lb["healthCheck"],
        json!({ "protocol": "http", "port": 80, "path": "/", "checkIntervalSeconds": 10,
                "responseTimeoutSeconds": 5, "healthyThreshold": 5, "unhealthyThreshold": 3 })
    );
    assert!(lb.get("ip").is_none() && lb.get("readyAt").is_none());
    assert_eq!(used(&h, &id(ex::POOL)).await, FIXTURE_LBS_BOOKED + 1);
    let lb_id = lb["loadBalancerId"].as_str().unwrap();
    assert!(h.store.work_get(WorkKind::ProviderResources, lb_id).await.unwrap().is_some());
    // A live name of the account is taken, and a refused create books nothing.
    h.call("loadBalancers.create", Some(&t), &create_body("main-lb")).await.err("ALREADY_EXISTS");
    assert_eq!(used(&h, &id(ex::POOL)).await, FIXTURE_LBS_BOOKED + 1);
    // An archived pool books nothing.
    h.call("pools.archive", Some(&t), &json!({ "tenantId": ex::TENANT, "poolId": ex::POOL }))
        .await
        .ok();
    h.call("loadBalancers.create", Some(&t), &create_body("late")).await.err("FAILED_PRECONDITION");
}

/// A create's repeat is recognised when it commits (issue 31: a read fewer per create),
/// and where the handler refuses before any commit, the record is read then: a repeat
/// still gets the first answer (SPEC §2), another body still `ALREADY_EXISTS`, and a
/// request never answered still gets the handler's refusal.
async fn a_repeated_create_answers_first_where_its_handler_would_now_refuse(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let body = with(&create_body("kept"), "requestId", json!("kept-1"));
    let first = h.call("loadBalancers.create", Some(&t), &body).await.ok();
    let booked = used(&h, &id(ex::POOL)).await;
    h.call("pools.archive", Some(&t), &json!({ "tenantId": ex::TENANT, "poolId": ex::POOL }))
        .await
        .ok();
    let again = h.call("loadBalancers.create", Some(&t), &body).await.ok();
    assert_eq!(again, first, "the repeat answers as the first call did");
    let other = with(&body, "name", json!("other"));
    let message = h.call("loadBalancers.create", Some(&t), &other).await.err("ALREADY_EXISTS");
    assert!(message.contains("requestId"), "{message}");
    let fresh = with(&other, "requestId", json!("kept-2"));
    h.call("loadBalancers.create", Some(&t), &fresh).await.err("FAILED_PRECONDITION");
    assert_eq!(used(&h, &id(ex::POOL)).await, booked, "nothing more booked");
}

/// The `requestId` of a create is checked by the commit that stores its answer, not by a
/// read before the handler: no statement reads the idempotency table on the way.
async fn a_create_reads_no_idempotency_record_before_it_commits(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    h.store.count_statement_shapes(true);
    let before = h.store.stats();
    let body = with(&create_body("counted"), "requestId", json!("counted-1"));
    h.call("loadBalancers.create", Some(&t), &body).await.ok();
    let shapes = h.store.stats().since(&before).shapes;
    let reads: u64 = shapes
        .iter()
        .filter(|(s, _)| s.starts_with("SELECT") && s.contains("idempotency"))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(reads, 0, "{shapes:?}");
    assert_eq!(shapes.get("INSERT INTO idempotency"), Some(&1), "{shapes:?}");
}

async fn regional_and_global_take_different_fields(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let regional = create_body("r");
    let global = global_body("g", json!({ "tag": "web" }));
    let cases: Vec<(Value, &str)> = vec![
        (without(&regional, "region"), "region"),
        (with(&regional, "forwardingRules", json!([])), "forwardingRules"),
        (with(&regional, "targets", json!({})), "targets"),
        (with(&regional, "targets", json!({ "tag": "a", "dropletIds": [1] })), "targets"),
        (
            with(&regional, "targets", json!({ "loadBalancerIds": [ex::LOAD_BALANCER] })),
            "targets.loadBalancerIds",
        ),
        (with(&regional, "domains", json!([{ "name": "a.com", "isManaged": false }])), "domains"),
        (
            with(
                &regional,
                "forwardingRules",
                json!([{ "entryProtocol": "udp", "entryPort": 53, "targetProtocol": "tcp", "targetPort": 53 }]),
            ),
            "forwardingRules[0].targetProtocol",
        ),
        (with(&global, "region", json!("nyc1")), "region"),
        (without(&global, "globalSettings"), "globalSettings"),
        (without(&global, "domains"), "domains"),
        (with(&global, "sizeUnit", json!(2)), "sizeUnit"),
        (
            with(&global, "globalSettings", json!({ "targetProtocol": "tcp", "targetPort": 443 })),
            "globalSettings.targetProtocol",
        ),
        (
            with(
                &global,
                "globalSettings",
                json!({ "targetProtocol": "http", "targetPort": 8080 }),
            ),
            "globalSettings.targetPort",
        ),
    ];
    for (body, field) in cases {
        let a = h.call("loadBalancers.create", Some(&t), &body).await;
        assert_eq!((a.code(), a.field()), ("INVALID_ARGUMENT", Some(field)), "{body}: {}", a.text);
    }
    let booked = FIXTURE_LBS_BOOKED;
    assert_eq!(used(&h, &id(ex::POOL)).await, booked, "no refused create booked a unit");
    let made = h.call("loadBalancers.create", Some(&t), &global).await.ok();
    assert!(made.get("region").is_none(), "{made}");
    assert_eq!(made["forwardingRules"], json!([]));
}

async fn a_global_load_balancer_targets_regional_ones_of_its_account(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let targets = json!({ "loadBalancerIds": [ex::LOAD_BALANCER, OTHER_LB] });
    let g = h.call("loadBalancers.create", Some(&t), &global_body("g1", targets)).await.ok();
    // A global one is no target, nor one of another tenant, nor one being deleted.
    let del = json!({ "tenantId": ex::TENANT, "loadBalancerId": OTHER_LB });
    h.call("loadBalancers.delete", Some(&t), &del).await.ok();
    let bad = [
        json!([g["loadBalancerId"]]),
        json!([ex::LOAD_BALANCER, "lb_01jq3k5v9x8y7z6w5v4t3s2000"]),
        json!([OTHER_LB]),
    ];
    for (i, ids) in bad.into_iter().enumerate() {
        let body = global_body(&format!("bad{i}"), json!({ "loadBalancerIds": ids }));
        let a = h.call("loadBalancers.create", Some(&t), &body).await;
        if i == 1 {
            // An absent one is authorized like any id in a body (SPEC §3): not found.
            let message = a.err("NOT_FOUND");
            assert!(message.contains("targets.loadBalancerIds"), "{message}");
            continue;
        }
        a.err("INVALID_ARGUMENT");
        assert_eq!(a.field(), Some("targets.loadBalancerIds[0]"), "{}", a.text);
    }
}

async fn no_quota_row_grants_none(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let mut pool_body = without(&example("pools.create"), "requestId");
    pool_body["name"] = json!("no-quota");
    let pool = h.call("pools.create", Some(&t), &pool_body).await.ok();
    let body = with(&create_body("lb"), "poolId", pool["poolId"].clone());
    let message = h.call("loadBalancers.create", Some(&t), &body).await.err("RESOURCE_EXHAUSTED");
    assert!(message.contains("quotas.set"), "{message}");
    let a = h.call("loadBalancers.create", Some(&t), &body).await;
    assert_eq!(a.status, 429);
}

async fn with_a_limit_of_n_exactly_n_concurrent_creates_succeed(s: S) {
    let h = Arc::new(Harness::on(s).await);
    let t = h.operator().await;
    // The fixture's load balancers hold units of the limit already: 3 are left.
    let fresh = 3;
    let limit = FIXTURE_LBS_BOOKED + fresh;
    let set = json!({ "tenantId": ex::TENANT, "poolId": ex::POOL, "resource": "loadBalancers", "limit": limit });
    h.call("quotas.set", Some(&t), &set).await.ok();
    let mut calls = Vec::new();
    for i in 0..8 {
        let (h, t) = (h.clone(), t.clone());
        calls.push(tokio::spawn(async move {
            let a = h.call("loadBalancers.create", Some(&t), &create_body(&format!("c{i}"))).await;
            a.code().to_owned()
        }));
    }
    let mut codes = Vec::new();
    for c in calls {
        codes.push(c.await.unwrap());
    }
    assert_eq!(codes.iter().filter(|c| *c == "OK").count(), fresh as usize, "{codes:?}");
    assert!(codes.iter().all(|c| c == "OK" || c == "RESOURCE_EXHAUSTED"), "{codes:?}");
    assert_eq!(used(&h, &id(ex::POOL)).await, limit);
    let list = json!({ "tenantId": ex::TENANT, "poolId": ex::POOL });
    let lbs = h.call("loadBalancers.list", Some(&t), &list).await.ok();
    let shown = lbs["loadBalancers"].as_array().unwrap().len();
    assert_eq!(shown, EXAMPLE_POOL_LBS.len() + fresh as usize);
}

async fn updates_are_checked_whole_and_deletes_are_idempotent(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let update = example("loadBalancers.update");
    let lb = h.call("loadBalancers.update", Some(&t), &update).await.ok();
    assert_eq!(lb["targets"], json!({ "dropletIds": [3164444, 3164445] }));
    assert_eq!((lb["generation"].as_u64(), lb["name"].as_str()), (Some(2), Some("main-lb")));
    h.call("loadBalancers.update", Some(&t), &update).await.err("ABORTED");
    // Renamed; the result is checked whole; type and region are fixed.
    let base = json!({ "tenantId": ex::TENANT, "loadBalancerId": ex::LOAD_BALANCER });
    let renamed =
        h.call("loadBalancers.update", Some(&t), &with(&base, "name", json!("front"))).await.ok();
    assert_eq!(renamed["name"], "front");
    h.call("loadBalancers.update", Some(&t), &with(&base, "name", json!("other-lb")))
        .await
        .err("ALREADY_EXISTS");
    let a =
        h.call("loadBalancers.update", Some(&t), &with(&base, "forwardingRules", json!([]))).await;
    assert_eq!((a.code(), a.field()), ("INVALID_ARGUMENT", Some("forwardingRules")));
    let a = h.call("loadBalancers.update", Some(&t), &with(&base, "region", json!("ams3"))).await;
    assert_eq!((a.code(), a.field()), ("INVALID_ARGUMENT", Some("region")));
    let a = h
        .call(
            "loadBalancers.update",
            Some(&t),
            &with(&base, "domains", json!([{ "name": "a.com", "isManaged": true }])),
        )
        .await;
    assert_eq!((a.code(), a.field()), ("INVALID_ARGUMENT", Some("domains")));
    // Delete: deleting, idempotent, and no other change after it.
    let gone = h.call("loadBalancers.delete", Some(&t), &base).await.ok();
    assert_eq!(gone["state"], "deleting");
    let lb_id: LoadBalancerId = id(ex::LOAD_BALANCER);
    let stored = h.store.load_balancer_get_any(&lb_id).await.unwrap().unwrap();
    assert!(stored.delete_requested && !stored.quota_released, "the reconciler releases it");
    assert_eq!(h.call("loadBalancers.delete", Some(&t), &base).await.ok(), gone);
    h.call("loadBalancers.update", Some(&t), &with(&base, "name", json!("again")))
        .await
        .err("FAILED_PRECONDITION");
}

async fn lists_filter_by_pool_account_and_grants(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let ids = |v: &Value| -> Vec<String> {
        v["loadBalancers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["loadBalancerId"].as_str().unwrap().to_owned())
            .collect()
    };
    let all = h.call("loadBalancers.list", Some(&t), &json!({ "tenantId": ex::TENANT })).await.ok();
    assert_eq!(ids(&all), [ex::LOAD_BALANCER, OTHER_LB]);
    let other_pool = json!({ "tenantId": ex::TENANT, "poolId": "pool_01jq3k5v9x8y7z6w5v4t3s2000" });
    assert!(ids(&h.call("loadBalancers.list", Some(&t), &other_pool).await.ok()).is_empty());
    let one = h.token(vec![grant(Role::Viewer, Scope::LoadBalancer(id(OTHER_LB)))]).await;
    let mine =
        h.call("loadBalancers.list", Some(&one), &json!({ "tenantId": ex::TENANT })).await.ok();
    assert_eq!(ids(&mine), [OTHER_LB]);
    let get = json!({ "tenantId": ex::TENANT, "loadBalancerId": ex::LOAD_BALANCER });
    h.call("loadBalancers.get", Some(&one), &get).await.err("PERMISSION_DENIED");
}

/// What the test's adapters declare, changed between calls.
type Declared = Arc<std::sync::Mutex<Vec<LoadBalancerType>>>;

/// A registry whose providers declare only the load balancer types in [`Declared`];
/// everything else is the inner (simulated DigitalOcean) provider's.
struct Offers(Arc<dyn ProviderRegistry>, Declared);

/// A provider declaring only some load balancer types.
struct Declares(Arc<dyn ProviderImpl>, Declared);

#[async_trait]
impl ProviderImpl for Declares {
    fn offer(&self) -> ProviderOffer {
        let types = self.1.lock().unwrap().clone();
        ProviderOffer { load_balancer_types: types, ..self.0.offer() }
    }
    async fn check_credentials(&self) -> ProviderResult<()> {
        self.0.check_credentials().await
    }
    fn kubernetes(&self) -> &dyn KubernetesProvider {
        self.0.kubernetes()
    }
    fn load_balancers(&self) -> &dyn LoadBalancerProvider {
        self.0.load_balancers()
    }
}

#[async_trait]
impl ProviderRegistry for Offers {
    async fn provider_for(
        &self,
        account: &ProviderAccount,
    ) -> ProviderResult<Arc<dyn ProviderImpl>> {
        Ok(Arc::new(Declares(self.0.provider_for(account).await?, self.1.clone())))
    }
    async fn provider_for_credentials(
        &self,
        credentials: &AccountCredentials,
    ) -> ProviderResult<Arc<dyn ProviderImpl>> {
        let inner = self.0.provider_for_credentials(credentials).await?;
        Ok(Arc::new(Declares(inner, self.1.clone())))
    }
}

/// SPEC §5/§11: what an account's adapter declares decides, not the provider's name — a
/// `digitalocean` account whose adapter declares no global load balancers (or none at
/// all) is refused as a `gke` one is, naming the provider, what it lacks and the account,
/// booking and recording nothing.
async fn the_adapters_declaration_decides_which_load_balancers_an_account_takes(s: S) {
    let declared: Declared = Arc::default();
    let d = declared.clone();
    let h = Harness::with_providers(
        s,
        sim_config(),
        |r| Arc::new(Offers(r, d)),
        |api| api.settings(test_settings()),
    )
    .await;
    let t = h.operator().await;
    let list = json!({ "tenantId": ex::TENANT });
    let count = async |h: &Harness| {
        let all = h.call("loadBalancers.list", Some(&t), &list).await.ok();
        all["loadBalancers"].as_array().unwrap().len()
    };
    let (before, booked) = (count(&h).await, used(&h, &id(ex::POOL)).await);
    let none = "digitalocean offers no load balancers";
    let cases = [
        (
            vec![LoadBalancerType::Regional],
            None,
            Some("digitalocean offers no global load balancers"),
        ),
        (vec![], Some(none), Some(none)),
    ];
    let mut made = 0;
    for (i, (types, regional, global)) in cases.into_iter().enumerate() {
        *declared.lock().unwrap() = types;
        let tries = [
            (create_body(&format!("web{i}")), regional),
            (global_body(&format!("edge{i}"), json!({ "tag": "web" })), global),
        ];
        for (body, refusal) in tries {
            let a = h.call("loadBalancers.create", Some(&t), &body).await;
            let Some(want) = refusal else {
                a.ok();
                made += 1;
                continue;
            };
            let message = a.err("FAILED_PRECONDITION");
            assert!(message.contains(want), "{message}");
            assert!(message.contains(ex::ACCOUNT), "names the account: {message}");
        }
    }
    assert_eq!(made, 1);
    assert_eq!(count(&h).await, before + made, "only what was offered is recorded");
    assert_eq!(used(&h, &id(ex::POOL)).await, booked + 1, "a refusal books nothing");
}
