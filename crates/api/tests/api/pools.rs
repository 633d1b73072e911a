//! `pools.*` and `quotas.*` (SPEC §4): what each call records — the pool, its substrate
//! row, its event and its work item in one unit of work — and what it refuses.

use std::sync::Arc;

use bc_api::authz::CedarAuthorizer;
use bc_api::methods::examples as ex;
use bc_domain::model::{QuotaResource, Role, Scope};
use bc_domain::ports::{PageRequest, ReadScope, UnitOfWork, WorkKind, Write};
use bc_domain::{PoolId, ResourceState};
use serde_json::{Value, json};

use crate::common::repos::*;
use crate::common::{
    Harness, S, acme, example, grant, id, sim_config, tenant, test_settings, with, without,
};

bc_store::store_suite!(
    create_records_the_pool_its_substrate_event_and_work,
    create_without_substrate_records_only_the_pool,
    create_refuses_taken_names_and_foreign_accounts,
    new_pools_get_the_default_quota,
    list_pages_by_id_and_shows_only_readable_pools,
    a_kept_page_is_answered_until_a_pool_changes_whoever_changes_it,
    under_object_policies_no_callers_page_is_answered_to_another,
    update_follows_the_allowed_changes,
    update_adds_and_removes_the_substrate,
    concurrent_updates_with_one_generation_let_one_win,
    archive_is_idempotent_and_tears_the_substrate_down,
    quotas_are_set_by_operators_and_listed,
    writes_poke_the_work_wake_up,
);

fn create_body(name: &str) -> Value {
    with(&without(&example("pools.create"), "requestId"), "name", json!(name))
}

async fn create_records_the_pool_its_substrate_event_and_work(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let pool = h.call("pools.create", Some(&t), &create_body("web")).await.ok();
    assert_eq!((pool["state"].as_str(), pool["generation"].as_u64()), (Some("active"), Some(1)));
    assert_eq!(pool["tenantId"], ex::TENANT);
    assert_eq!(pool["policy"], example("pools.create")["policy"]);
    assert!(pool.get("archivedAt").is_none(), "unset outputs are omitted: {pool}");
    let pool_id: PoolId = pool["poolId"].as_str().unwrap().parse().unwrap();
    // kubernetesSubstrates.get answers `pending` at once.
    let body = json!({ "tenantId": ex::TENANT, "poolId": pool_id });
    let sub = h.call("kubernetesSubstrates.get", Some(&t), &body).await.ok();
    assert_eq!(sub["state"], "pending");
    assert_eq!(sub["mode"], "create");
    assert_eq!(sub["providerAccountId"], ex::ACCOUNT);
    assert!(sub.get("clusterId").is_none(), "{sub}");
    // Its work item, due now, and its event on the pool's subject.
    let work = h.store.work_get(WorkKind::Substrates, pool_id.as_str()).await.unwrap();
    assert_eq!(work.expect("a work item").not_before, h.now());
    let events = h.store.event_list(&tenant(ex::TENANT), None, 0, 100).await.unwrap();
    let e = events.iter().find(|e| e.subject == format!("compute.pools.{pool_id}")).unwrap();
    assert_eq!(e.kind, "kubernetes.substrate.pending");
    let got = h.call("pools.get", Some(&t), &body).await.ok();
    assert_eq!(got, pool);
}

async fn create_without_substrate_records_only_the_pool(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let mut body = create_body("plain");
    body["policy"] = json!({ "flavors": [{ "name": "cpu", "size": "s-1vcpu-2gb", "count": 1 }] });
    let pool = h.call("pools.create", Some(&t), &body).await.ok();
    assert_eq!(pool["policy"]["upgrades"], "drain", "the default is drain");
    let pool_id = pool["poolId"].as_str().unwrap();
    let get = json!({ "tenantId": ex::TENANT, "poolId": pool_id });
    h.call("kubernetesSubstrates.get", Some(&t), &get).await.err("NOT_FOUND");
    assert_eq!(h.store.work_get(WorkKind::Substrates, pool_id).await.unwrap(), None);
}

async fn create_refuses_taken_names_and_foreign_accounts(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    // The fixture's pool is `main`.
    let taken = h.call("pools.create", Some(&t), &create_body("main")).await;
    assert!(taken.err("ALREADY_EXISTS").contains("main"));
    // Another tenant's account is as absent as a missing one; nothing is made.
    let mut body = create_body("web");
    body["policy"]["substrate"]["account"] = json!("acct_01jq3k5v9x8y7z6w5v4t3s2000");
    let a = h.call("pools.create", Some(&t), &body).await;
    assert!(a.err("NOT_FOUND").contains("policy.substrate.account"), "{}", a.text);
    let list = h.call("pools.list", Some(&t), &json!({ "tenantId": ex::TENANT })).await.ok();
    assert_eq!(list["pools"].as_array().unwrap().len(), 1, "nothing was made: {list}");
    // Cross-field rules name every violated field.
    let mut dup = create_body("dup");
    dup["policy"]["flavors"][1]["name"] = json!("cpu");
    let a = h.call("pools.create", Some(&t), &dup).await;
    a.err("INVALID_ARGUMENT");
    assert_eq!(a.field(), Some("policy.flavors[1].name"));
}

async fn new_pools_get_the_default_quota(s: S) {
    let mut settings = test_settings();
    settings.default_pool_quotas.insert(QuotaResource::LoadBalancers, 3);
    let h = Harness::with(s, sim_config(), |api| api.settings(settings)).await;
    let t = h.operator().await;
    let pool = h.call("pools.create", Some(&t), &create_body("web")).await.ok();
    let body = json!({ "tenantId": ex::TENANT, "poolId": pool["poolId"] });
    let quotas = h.call("quotas.list", Some(&t), &body).await.ok();
    assert_eq!(
        quotas,
        json!({ "quotas": [{ "resource": "loadBalancers", "limit": 3, "used": 0 }] })
    );
}

async fn list_pages_by_id_and_shows_only_readable_pools(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let mut made = vec![ex::POOL.to_owned()];
    for i in 0..4 {
        let p = h.call("pools.create", Some(&t), &create_body(&format!("p{i}"))).await.ok();
        made.push(p["poolId"].as_str().unwrap().to_owned());
    }
    let mut seen = Vec::new();
    let mut body = json!({ "tenantId": ex::TENANT, "pageSize": 2 });
    for _ in 0..10 {
        let page = h.call("pools.list", Some(&t), &body).await.ok();
        let items = page["pools"].as_array().unwrap();
        assert!(items.len() <= 2);
        seen.extend(items.iter().map(|p| p["poolId"].as_str().unwrap().to_owned()));
        match page.get("nextPageToken") {
            Some(next) => body["pageToken"] = next.clone(),
            None => break,
        }
    }
    assert_eq!(seen, made, "every pool once, by id");
    // A token of another list is refused, naming pageToken.
    let lbs = json!({ "tenantId": ex::TENANT, "pageSize": 1 });
    let lb_page = h.call("loadBalancers.list", Some(&t), &lbs).await.ok();
    let foreign = json!({ "tenantId": ex::TENANT, "pageToken": lb_page["nextPageToken"] });
    let a = h.call("pools.list", Some(&t), &foreign).await;
    a.err("INVALID_ARGUMENT");
    assert_eq!(a.field(), Some("pageToken"));
    // A viewer of two pools sees those two, and archived ones only when asked.
    let scoped = h
        .token(vec![
            grant(Role::Viewer, Scope::Pool(id(&made[1]))),
            grant(Role::Viewer, Scope::Pool(id(&made[3]))),
        ])
        .await;
    let archive = json!({ "tenantId": ex::TENANT, "poolId": made[3] });
    h.call("pools.archive", Some(&t), &archive).await.ok();
    let list = json!({ "tenantId": ex::TENANT });
    let page = h.call("pools.list", Some(&scoped), &list).await.ok();
    let ids: Vec<&str> =
        page["pools"].as_array().unwrap().iter().map(|p| p["poolId"].as_str().unwrap()).collect();
    assert_eq!(ids, [made[1].as_str()]);
    let all = with(&list, "includeArchived", json!(true));
    let page = h.call("pools.list", Some(&scoped), &all).await.ok();
    assert_eq!(page["pools"].as_array().unwrap().len(), 2);
    // The store agrees (the same scope type serves both).
    let store_page = h
        .store
        .pool_list(&tenant(ex::TENANT), &ReadScope::Tenant, false, &PageRequest::first(100))
        .await
        .unwrap();
    assert_eq!(store_page.items.len(), 4);
}

/// `pools.list` answers a page it answered before while the tenant's pools' version
/// stands (`bc_api::list_cache`); a change committed by anyone — here straight into the
/// store, as another replica or process would — shows in the very next list.
async fn a_kept_page_is_answered_until_a_pool_changes_whoever_changes_it(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    h.store.count_statement_shapes(true);
    let page_reads = || h.store.stats().shapes.get("SELECT … FROM pools").copied().unwrap_or(0);
    let list = json!({ "tenantId": ex::TENANT });
    let first = h.call("pools.list", Some(&t), &list).await.ok();
    let read = page_reads();
    assert!(read > 0, "the first list reads its page");
    let again = h.call("pools.list", Some(&t), &list).await.ok();
    assert_eq!(again, first);
    assert_eq!(page_reads(), read, "an unchanged page is not read again");
    // Another page (another size) is read: the key is every input that shapes a page.
    let other = h.call("pools.list", Some(&t), &with(&list, "pageSize", json!(1))).await.ok();
    assert_eq!(other["pools"], first["pools"]);
    assert_eq!(page_reads(), read + 1);

    // An update committed outside this API shows at once.
    let pool = h.store.pool_get_any(&id(ex::POOL)).await.unwrap().unwrap();
    let mut policy = pool.policy.clone();
    policy.flavors[0].count = Some(7);
    let changed = bc_domain::recipes::pool_changed(&pool, policy.clone(), None, h.now());
    h.store.commit(changed.uow).await.unwrap();
    let after = h.call("pools.list", Some(&t), &list).await.ok();
    assert_eq!(after["pools"][0]["policy"]["flavors"][0]["count"], 7, "{after}");
    assert_eq!(after["pools"][0]["generation"], pool.generation + 1);

    // So does a pool inserted outside it, and the next unchanged list is kept again.
    let new = bc_domain::recipes::NewPool {
        pool_id: id("pool_01jz0000000000000000000zzz"),
        tenant_id: tenant(ex::TENANT),
        name: "added".parse().unwrap(),
        policy: bc_domain::policy::PoolPolicy { substrate: None, ..policy },
    };
    let added = bc_domain::recipes::pool_created(new, &Default::default(), None, h.now());
    h.store.commit(added.uow).await.unwrap();
    let after = h.call("pools.list", Some(&t), &list).await.ok();
    assert_eq!(after["pools"].as_array().unwrap().len(), 2, "{after}");
    let read = page_reads();
    assert_eq!(h.call("pools.list", Some(&t), &list).await.ok(), after);
    assert_eq!(page_reads(), read);
}

/// Under object policies a page depends on who asks, beyond the readable scope: nothing
/// is kept, so a caller whose policy hides a pool never gets the page another caller with
/// the same scope was answered (`access::filters_items`).
async fn under_object_policies_no_callers_page_is_answered_to_another(s: S) {
    let (plain, token) = crate::common::new_token(vec![grant(Role::Viewer, acme())]);
    let forbid = format!(
        r#"forbid(principal == Token::"{}", action, resource == Pool::"{}");"#,
        token.token_id,
        ex::POOL
    );
    let cedar = Arc::new(CedarAuthorizer::with_policies(&forbid).expect("valid policy"));
    let h =
        Harness::with(s, sim_config(), |api| api.settings(test_settings()).authorizer(cedar)).await;
    h.store.commit(UnitOfWork::new().write(Write::InsertApiToken(token))).await.unwrap();
    let other = h.token(vec![grant(Role::Viewer, acme())]).await;
    let list = json!({ "tenantId": ex::TENANT });
    let seen = h.call("pools.list", Some(&other), &list).await.ok();
    assert_eq!(seen["pools"].as_array().unwrap().len(), 1, "{seen}");
    let hidden = h.call("pools.list", Some(&plain), &list).await.ok();
    assert_eq!(hidden["pools"], json!([]), "the forbidden pool is listed: {hidden}");
    // And the other way round: the hidden caller's page is not the other's either.
    let seen = h.call("pools.list", Some(&other), &list).await.ok();
    assert_eq!(seen["pools"].as_array().unwrap().len(), 1, "{seen}");
}

async fn update_follows_the_allowed_changes(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let update = example("pools.update");
    // Flavors and the version change in place; the generation is bumped.
    let mut changed = update.clone();
    changed["policy"]["flavors"][0]["count"] = json!(5);
    changed["policy"]["substrate"]["cluster"]["create"]["version"] = json!("1.33.1-do.0");
    let pool = h.call("pools.update", Some(&t), &changed).await.ok();
    assert_eq!(pool["generation"], 2);
    assert_eq!(pool["policy"]["flavors"][0]["count"], 5);
    let due = h.work_due_now(WorkKind::Substrates, ex::POOL).await;
    assert!(due, "the substrate reconciler converges it");
    // The same policy again is no change.
    let same = with(&changed, "expectedGeneration", json!(2));
    assert_eq!(h.call("pools.update", Some(&t), &same).await.ok()["generation"], 2);
    // Refused: another account, create → adopt, another region, HA off; each named. The
    // other account is one of the tenant's (an absent one is not found, naming the field).
    let mut absent = without(&changed, "expectedGeneration");
    absent["policy"]["substrate"]["account"] = json!("acct_01jq3k5v9x8y7z6w5v4t3s2999");
    let message = h.call("pools.update", Some(&t), &absent).await.err("NOT_FOUND");
    assert!(message.contains("policy.substrate.account"), "{message}");
    let other = bc_store::testing::account(&tenant(ex::TENANT), "second");
    let other_id = other.provider_account_id.to_string();
    h.store.commit(UnitOfWork::new().write(Write::InsertAccount(other))).await.unwrap();
    let refusals = [
        ("account", json!(other_id)),
        ("cluster", json!({ "adopt": { "providerClusterId": "abc" } })),
    ];
    for (field, value) in refusals {
        let mut body = without(&changed, "expectedGeneration");
        body["policy"]["substrate"][field] = value;
        let message = h.call("pools.update", Some(&t), &body).await.err("FAILED_PRECONDITION");
        assert!(message.contains("remove the substrate first"), "{message}");
    }
    let mut moved = without(&changed, "expectedGeneration");
    moved["policy"]["substrate"]["cluster"]["create"]["region"] = json!("ams3");
    let message = h.call("pools.update", Some(&t), &moved).await.err("FAILED_PRECONDITION");
    assert!(message.contains("region"), "{message}");
    // A stale generation changes nothing.
    let stale = with(&changed, "expectedGeneration", json!(1));
    h.call("pools.update", Some(&t), &stale).await.err("ABORTED");
    let get = json!({ "tenantId": ex::TENANT, "poolId": ex::POOL });
    assert_eq!(h.call("pools.get", Some(&t), &get).await.ok()["generation"], 2);
}

async fn update_adds_and_removes_the_substrate(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let mut body = create_body("bare");
    body["policy"] = json!({ "flavors": [{ "name": "cpu", "size": "s-1vcpu-2gb", "count": 1 }] });
    let pool = h.call("pools.create", Some(&t), &body).await.ok();
    let pool_id = pool["poolId"].as_str().unwrap().to_owned();
    let get = json!({ "tenantId": ex::TENANT, "poolId": pool_id });
    // Adding one records it pending.
    let mut add = json!({ "tenantId": ex::TENANT, "poolId": pool_id, "policy": example("pools.create")["policy"] });
    h.call("pools.update", Some(&t), &add).await.ok();
    assert_eq!(h.call("kubernetesSubstrates.get", Some(&t), &get).await.ok()["state"], "pending");
    // Removing it: only the pool changes; the reconciler tears the substrate down, and
    // until it is deleted a new one is refused.
    let remove = json!({ "tenantId": ex::TENANT, "poolId": pool_id, "policy": body["policy"] });
    h.call("pools.update", Some(&t), &remove).await.ok();
    let sub = h.call("kubernetesSubstrates.get", Some(&t), &get).await.ok();
    assert_eq!(sub["state"], "pending", "the reconciler moves it to deleting");
    let message = h.call("pools.update", Some(&t), &add).await.err("FAILED_PRECONDITION");
    assert!(message.contains("wait until it is deleted"), "{message}");
    // Once the reconciler has deleted it, a new one may be set.
    let pool_id: PoolId = pool_id.parse().unwrap();
    let mut row = h.store.substrate_get_any(&pool_id).await.unwrap().unwrap();
    row.state = ResourceState::Deleted;
    let put = bc_domain::ports::UnitOfWork::new().write(bc_domain::ports::Write::PutSubstrate(row));
    h.store.commit(put).await.unwrap();
    add["policy"]["flavors"][0]["count"] = json!(2);
    h.call("pools.update", Some(&t), &add).await.ok();
    assert_eq!(h.call("kubernetesSubstrates.get", Some(&t), &get).await.ok()["state"], "pending");
}

async fn concurrent_updates_with_one_generation_let_one_win(s: S) {
    let h = Arc::new(Harness::on(s).await);
    let t = h.operator().await;
    let mut calls = Vec::new();
    // Counts the fixture's policy does not have, so every call is a change.
    for n in 11..=16 {
        let (h, t) = (h.clone(), t.clone());
        let mut body = example("pools.update");
        body["policy"]["flavors"][0]["count"] = json!(n);
        calls.push(tokio::spawn(async move {
            h.call("pools.update", Some(&t), &body).await.code().to_owned()
        }));
    }
    let mut codes = Vec::new();
    for c in calls {
        codes.push(c.await.unwrap());
    }
    assert_eq!(codes.iter().filter(|c| *c == "OK").count(), 1, "{codes:?}");
    assert!(codes.iter().all(|c| c == "OK" || c == "ABORTED"), "{codes:?}");
}

async fn archive_is_idempotent_and_tears_the_substrate_down(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let body = json!({ "tenantId": ex::TENANT, "poolId": ex::POOL });
    let first = h.call("pools.archive", Some(&t), &body).await.ok();
    assert_eq!(
        (first["state"].as_str(), first["generation"].as_u64()),
        (Some("archived"), Some(2))
    );
    assert!(first["archivedAt"].is_string());
    assert!(h.work_due_now(WorkKind::Substrates, ex::POOL).await, "its substrate is torn down");
    let again = h.call("pools.archive", Some(&t), &body).await.ok();
    assert_eq!(again, first, "archiving an archived pool returns it unchanged");
    // Its name is free again, and it takes no policy change.
    h.call("pools.create", Some(&t), &create_body("main")).await.ok();
    let message =
        h.call("pools.update", Some(&t), &example("pools.update")).await.err("FAILED_PRECONDITION");
    assert!(message.contains("archived"), "{message}");
}

async fn quotas_are_set_by_operators_and_listed(s: S) {
    let h = Harness::on(s).await;
    let operator = h.operator().await;
    let editor = h.token(vec![grant(Role::Editor, acme())]).await;
    let set = example("quotas.set");
    h.call("quotas.set", Some(&editor), &set).await.err("PERMISSION_DENIED");
    // The fixture pool's quota is 5 with the fixture's load balancers booked; one more
    // books one.
    h.call("loadBalancers.create", Some(&operator), &example("loadBalancers.create")).await.ok();
    let row = h.call("quotas.set", Some(&operator), &with(&set, "limit", json!(0))).await.ok();
    let used = crate::common::FIXTURE_LBS_BOOKED + 1;
    assert_eq!(row, json!({ "resource": "loadBalancers", "limit": 0, "used": used }));
    let list = json!({ "tenantId": ex::TENANT, "poolId": ex::POOL });
    let quotas = h.call("quotas.list", Some(&editor), &list).await.ok();
    assert_eq!(quotas["quotas"], json!([row]));
    // A quota of another tenant's pool is not found, even for an operator of the system.
    let theirs = json!({ "tenantId": ex::TENANT, "poolId": crate::common::OTHER_POOL, "resource": "loadBalancers", "limit": 1 });
    h.call("quotas.set", Some(&operator), &theirs).await.err("NOT_FOUND");
}

async fn writes_poke_the_work_wake_up(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let woken = h.work.notified();
    tokio::pin!(woken);
    woken.as_mut().enable();
    h.call("pools.create", Some(&t), &create_body("web")).await.ok();
    // Bounded: a missing poke fails the test instead of hanging it.
    tokio::time::timeout(std::time::Duration::from_secs(10), woken)
        .await
        .expect("the commit that enqueued work poked the wake-up");
    // A read pokes nothing.
    let quiet = h.work.notified();
    tokio::pin!(quiet);
    quiet.as_mut().enable();
    h.call("pools.get", Some(&t), &json!({ "tenantId": ex::TENANT, "poolId": ex::POOL }))
        .await
        .ok();
    let poked = futures::poll!(quiet.as_mut());
    assert!(poked.is_pending(), "a read does not wake the reconcilers");
}
