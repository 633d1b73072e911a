//! `kubernetesSubstrates.get`, `kubernetesClusters.*` and `kubernetesNodePools.*` (SPEC
//! §6–§8): what is shown (exactly the seed's substrate fields), what is recorded, and the
//! refusals that depend on the provider, the cluster's mode and who made a node pool.

use std::sync::Arc;

use async_trait::async_trait;
use bc_api::methods::examples as ex;
use bc_domain::model::{ClusterMode, NodePoolOrigin, ProviderAccount, WaitingToJoin};
use bc_domain::name::SubstrateNaming;
use bc_domain::ports::{
    AccountCredentials, KubernetesProvider, LoadBalancerProvider, ProviderImpl, ProviderOffer,
    ProviderRegistry, ProviderResult, UnitOfWork, WorkKind, Write,
};
use bc_domain::rules::plan::desired_node_pool;
use bc_domain::{ClusterId, NodePoolId, PoolId, ResourceState};
use bc_reconcile::substrates::rows as substrate_rows;
use bc_store::testing as rows;
use serde_json::{Value, json};

use crate::common::repos::*;
use crate::common::{Harness, S, example, id, sim_config, test_settings, with, without};

bc_store::store_suite!(
    a_substrate_shows_exactly_the_seeds_fields,
    a_pool_without_a_substrate_or_of_another_tenant_is_not_found,
    clusters_are_recorded_with_their_first_node_pools,
    autopilot_is_refused_where_the_provider_lacks_it,
    autopilot_is_accepted_where_the_provider_offers_it,
    upgrade_and_delete_clusters,
    a_substrates_cluster_changes_through_its_pool,
    node_pools_are_added_resized_and_deleted,
    substrate_and_provider_node_pools_are_read_only,
    an_autopilot_cluster_has_no_node_pools,
    a_cluster_made_for_a_pool_takes_no_other_pool_and_no_node_pool,
    a_node_pool_name_the_provider_has_is_already_taken,
    a_cluster_being_deleted_is_not_adopted,
    a_known_autopilot_cluster_is_not_adopted,
);

async fn a_substrate_shows_exactly_the_seeds_fields(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let pool_id: PoolId = id(ex::POOL);
    let mut row = h.store.substrate_get_any(&pool_id).await.unwrap().unwrap();
    row.cluster_id = Some(id(ex::CLUSTER));
    row.state = ResourceState::Ready;
    row.message = Some("2 nodes wait".into());
    row.waiting_to_join = Some(WaitingToJoin { nodes: 2, since: rows::t(5) });
    row.upgrade =
        Some(bc_domain::model::UpgradeWait { version: "1.33.1-do.0".into(), since: rows::t(6) });
    h.store.commit(UnitOfWork::new().write(Write::PutSubstrate(row))).await.unwrap();
    let body = json!({ "tenantId": ex::TENANT, "poolId": ex::POOL });
    let sub = h.call("kubernetesSubstrates.get", Some(&t), &body).await.ok();
    let keys: Vec<&str> = sub.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "poolId",
            "tenantId",
            "providerAccountId",
            "mode",
            "clusterId",
            "state",
            "message",
            "nodesListed",
            "nodesJoined",
            "waitingToJoin",
            "upgrade"
        ]
    );
    assert_eq!(sub["waitingToJoin"], json!({ "nodes": 2, "since": "2025-11-24T16:00:00.005Z" }));
    assert_eq!(sub["upgrade"]["version"], "1.33.1-do.0");
    assert_eq!((sub["nodesListed"].as_u64(), sub["nodesJoined"].as_u64()), (Some(3), Some(1)));
}

async fn a_pool_without_a_substrate_or_of_another_tenant_is_not_found(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let theirs = json!({ "tenantId": ex::TENANT, "poolId": crate::common::OTHER_POOL });
    let message = h.call("kubernetesSubstrates.get", Some(&t), &theirs).await.err("NOT_FOUND");
    assert!(message.contains("has no substrate"), "{message}");
}

async fn clusters_are_recorded_with_their_first_node_pools(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let body = without(&example("kubernetesClusters.create"), "requestId");
    let cluster = h.call("kubernetesClusters.create", Some(&t), &body).await.ok();
    assert_eq!(
        (cluster["state"].as_str(), cluster["origin"].as_str(), cluster["mode"].as_str()),
        (Some("pending"), Some("created"), Some("standard"))
    );
    assert!(cluster.get("providerClusterId").is_none() && cluster.get("version").is_none());
    let cluster_id: ClusterId = cluster["clusterId"].as_str().unwrap().parse().unwrap();
    let work = h.store.work_get(WorkKind::Clusters, cluster_id.as_str()).await.unwrap();
    assert!(work.is_some(), "the cluster reconciler makes it");
    let list = json!({ "tenantId": ex::TENANT, "clusterId": cluster_id });
    let pools = h.call("kubernetesNodePools.list", Some(&t), &list).await.ok();
    let pools = pools["kubernetesNodePools"].as_array().unwrap().clone();
    assert_eq!(pools.len(), 1);
    assert_eq!((pools[0]["name"].as_str(), pools[0]["count"].as_u64()), (Some("default"), Some(3)));
    assert_eq!(pools[0]["nodes"], json!({ "listed": 0, "ready": 0 }));
    // A live name is taken in the account.
    h.call("kubernetesClusters.create", Some(&t), &body).await.err("ALREADY_EXISTS");
    // Listing by account, and reading one.
    let by_account = json!({ "tenantId": ex::TENANT, "providerAccountId": ex::ACCOUNT });
    let all = h.call("kubernetesClusters.list", Some(&t), &by_account).await.ok();
    assert_eq!(all["kubernetesClusters"].as_array().unwrap().len(), 2);
    let get = json!({ "tenantId": ex::TENANT, "clusterId": cluster_id });
    assert_eq!(h.call("kubernetesClusters.get", Some(&t), &get).await.ok(), cluster);
    assert!(!h.capture.logs().is_empty());
    // A standard cluster needs a node pool; names of node pools are unique and not bc-.
    let bare = with(&body, "nodePools", json!([]));
    let a = h.call("kubernetesClusters.create", Some(&t), &with(&bare, "name", json!("x"))).await;
    assert_eq!((a.code(), a.field()), ("INVALID_ARGUMENT", Some("nodePools")));
    let pool = json!({ "name": "bc-mine", "size": "s-1vcpu-2gb", "count": 1 });
    let reserved = with(&with(&body, "name", json!("y")), "nodePools", json!([pool]));
    let a = h.call("kubernetesClusters.create", Some(&t), &reserved).await;
    assert_eq!((a.code(), a.field()), ("INVALID_ARGUMENT", Some("nodePools[0].name")));
}

/// A registry whose providers declare autopilot clusters besides what the inner one's
/// offer: the API's acceptance depends on the provider's capabilities alone.
struct OffersAutopilot(Arc<dyn ProviderRegistry>);

/// A provider declaring autopilot; everything else is the inner provider's.
struct Autopilot(Arc<dyn ProviderImpl>);

#[async_trait]
impl ProviderImpl for Autopilot {
    fn offer(&self) -> ProviderOffer {
        let mut offer = self.0.offer();
        offer.cluster_modes.push(ClusterMode::Autopilot);
        offer
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
impl ProviderRegistry for OffersAutopilot {
    async fn provider_for(
        &self,
        account: &ProviderAccount,
    ) -> ProviderResult<Arc<dyn ProviderImpl>> {
        Ok(Arc::new(Autopilot(self.0.provider_for(account).await?)))
    }
    async fn provider_for_credentials(
        &self,
        credentials: &AccountCredentials,
    ) -> ProviderResult<Arc<dyn ProviderImpl>> {
        Ok(Arc::new(Autopilot(self.0.provider_for_credentials(credentials).await?)))
    }
}

fn autopilot_body() -> Value {
    let body = without(&example("kubernetesClusters.create"), "requestId");
    with(&with(&body, "mode", json!("autopilot")), "nodePools", json!([]))
}

async fn autopilot_is_refused_where_the_provider_lacks_it(s: S) {
    // DigitalOcean (the simulator's default) has no autopilot: refused, naming it.
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let a = h.call("kubernetesClusters.create", Some(&t), &autopilot_body()).await;
    let message = a.err("FAILED_PRECONDITION");
    assert!(message.contains("digitalocean") && message.contains("autopilot"), "{message}");
}

async fn autopilot_is_accepted_where_the_provider_offers_it(s: S) {
    // No adapter offers autopilot (DigitalOcean has none): the provider here declares it.
    let offers = |r: Arc<dyn ProviderRegistry>| -> Arc<dyn ProviderRegistry> {
        Arc::new(OffersAutopilot(r))
    };
    let h =
        Harness::with_providers(s, sim_config(), offers, |api| api.settings(test_settings())).await;
    let t = h.operator().await;
    let made = h.call("kubernetesClusters.create", Some(&t), &autopilot_body()).await.ok();
    assert_eq!(made["mode"], "autopilot");
}

async fn upgrade_and_delete_clusters(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let cluster_id: ClusterId = id(ex::CLUSTER);
    // The running version, once observed, bounds what an upgrade may ask for.
    let status = Write::SetClusterStatus {
        cluster_id: cluster_id.clone(),
        provider_cluster_id: Some("do-1".into()),
        version: Some("1.32.1-do.0".into()),
        status: rows::status(ResourceState::Ready),
    };
    h.store.commit(UnitOfWork::new().write(status)).await.unwrap();
    let upgrade = without(&example("kubernetesClusters.upgrade"), "expectedGeneration");
    let message =
        h.call("kubernetesClusters.upgrade", Some(&t), &upgrade).await.err("FAILED_PRECONDITION");
    assert!(message.contains("not newer"), "{message}");
    let newer = with(&upgrade, "version", json!("1.33.1-do.0"));
    let up = h.call("kubernetesClusters.upgrade", Some(&t), &newer).await.ok();
    assert_eq!((up["generation"].as_u64(), up["version"].as_str()), (Some(2), Some("1.32.1-do.0")));
    let stored = h.store.cluster_get_any(&cluster_id).await.unwrap().unwrap();
    assert_eq!(stored.desired_version.as_deref(), Some("1.33.1-do.0"));
    // Asking again is no change.
    assert_eq!(h.call("kubernetesClusters.upgrade", Some(&t), &newer).await.ok()["generation"], 2);
    // Delete: recorded as desired state, shown deleting, idempotent.
    let get = json!({ "tenantId": ex::TENANT, "clusterId": cluster_id });
    let gone = h.call("kubernetesClusters.delete", Some(&t), &get).await.ok();
    assert_eq!((gone["state"].as_str(), gone["generation"].as_u64()), (Some("deleting"), Some(3)));
    assert!(h.store.cluster_get_any(&cluster_id).await.unwrap().unwrap().delete_requested);
    assert_eq!(h.call("kubernetesClusters.delete", Some(&t), &get).await.ok(), gone);
    // A reconcile's status write does not undo it.
    let status = Write::SetClusterStatus {
        cluster_id: cluster_id.clone(),
        provider_cluster_id: None,
        version: None,
        status: rows::status(ResourceState::Ready),
    };
    h.store.commit(UnitOfWork::new().write(status)).await.unwrap();
    assert_eq!(h.call("kubernetesClusters.get", Some(&t), &get).await.ok()["state"], "deleting");
    h.call("kubernetesClusters.upgrade", Some(&t), &newer).await.err("FAILED_PRECONDITION");
    let np = example("kubernetesNodePools.create");
    h.call("kubernetesNodePools.create", Some(&t), &np).await.err("FAILED_PRECONDITION");
}

async fn a_substrates_cluster_changes_through_its_pool(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let pool_id: PoolId = id(ex::POOL);
    let mut row = h.store.substrate_get_any(&pool_id).await.unwrap().unwrap();
    row.cluster_id = Some(id(ex::CLUSTER));
    h.store.commit(UnitOfWork::new().write(Write::PutSubstrate(row))).await.unwrap();
    let get = json!({ "tenantId": ex::TENANT, "clusterId": ex::CLUSTER });
    let message =
        h.call("kubernetesClusters.delete", Some(&t), &get).await.err("FAILED_PRECONDITION");
    assert!(message.contains(ex::POOL) && message.contains("archive the pool"), "{message}");
    // A cluster made by `kubernetesClusters.create` and known to the provider (the
    // cluster reconciler's status write), then adopted by a new pool: the substrate
    // reconciler itself records the adoption on the cluster's row.
    let body = with(
        &without(&example("kubernetesClusters.create"), "requestId"),
        "name",
        json!("adoptee"),
    );
    let made = h.call("kubernetesClusters.create", Some(&t), &body).await.ok();
    let cluster_id: ClusterId = made["clusterId"].as_str().unwrap().parse().unwrap();
    let pools = vec![bc_sim::testing::node_pool("default", 1, &[])];
    let pid = bc_sim::testing::create_cluster(&h.sim, "adoptee", pools);
    known_to_the_provider(&h, &cluster_id, &pid).await;
    let mut policy = example("pools.create")["policy"].clone();
    policy["substrate"]["cluster"] = json!({ "adopt": { "providerClusterId": pid } });
    let create = with(&without(&example("pools.create"), "requestId"), "name", json!("adopter"));
    let adopter = h.call("pools.create", Some(&t), &with(&create, "policy", policy)).await.ok();
    let adopter: PoolId = adopter["poolId"].as_str().unwrap().parse().unwrap();
    let (key, outcome) = h.reconcile_once(WorkKind::Substrates).await;
    assert_eq!(key, adopter.as_str(), "the adopter's substrate is the one due");
    let cluster = h.store.cluster_get_any(&cluster_id).await.unwrap().unwrap();
    assert_eq!(cluster.substrate_pool_ids, vec![adopter.clone()], "{outcome:?}");
    assert_eq!(cluster.generation, 2, "recorded under the cluster's generation");
    let upgrade = with(
        &without(&example("kubernetesClusters.upgrade"), "expectedGeneration"),
        "clusterId",
        json!(cluster_id),
    );
    let message =
        h.call("kubernetesClusters.upgrade", Some(&t), &upgrade).await.err("FAILED_PRECONDITION");
    assert!(message.contains("policy") && message.contains(adopter.as_str()), "{message}");
    let get = json!({ "tenantId": ex::TENANT, "clusterId": cluster_id });
    let message =
        h.call("kubernetesClusters.delete", Some(&t), &get).await.err("FAILED_PRECONDITION");
    assert!(
        message.contains(adopter.as_str()) && message.contains("archive the pool"),
        "{message}"
    );
}

async fn node_pools_are_added_resized_and_deleted(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let body = without(&example("kubernetesNodePools.create"), "requestId");
    let np = h.call("kubernetesNodePools.create", Some(&t), &body).await.ok();
    assert_eq!(np["autoScale"], json!({ "min": 1, "max": 5 }));
    assert!(np.get("count").is_none() && np.get("managedBy").is_none());
    assert_eq!(np["labels"], json!({ "tier": "batch" }));
    let np_id: NodePoolId = np["nodePoolId"].as_str().unwrap().parse().unwrap();
    assert!(h.store.work_get(WorkKind::NodePools, np_id.as_str()).await.unwrap().is_some());
    h.call("kubernetesNodePools.create", Some(&t), &body).await.err("ALREADY_EXISTS");
    let labelled = with(
        &with(&body, "name", json!("x")),
        "labels",
        json!({ "better-compute.dev/flavor": "a" }),
    );
    let a = h.call("kubernetesNodePools.create", Some(&t), &labelled).await;
    assert_eq!(
        (a.code(), a.field()),
        ("INVALID_ARGUMENT", Some(r#"labels["better-compute.dev/flavor"]"#))
    );
    // Resize: exactly one of count and autoScale; generation CAS.
    let resize =
        json!({ "tenantId": ex::TENANT, "nodePoolId": np_id, "count": 4, "expectedGeneration": 1 });
    let resized = h.call("kubernetesNodePools.resize", Some(&t), &resize).await.ok();
    assert_eq!((resized["count"].as_u64(), resized["generation"].as_u64()), (Some(4), Some(2)));
    h.call("kubernetesNodePools.resize", Some(&t), &resize).await.err("ABORTED");
    let both =
        with(&without(&resize, "expectedGeneration"), "autoScale", json!({ "min": 1, "max": 2 }));
    let a = h.call("kubernetesNodePools.resize", Some(&t), &both).await;
    assert_eq!((a.code(), a.field()), ("INVALID_ARGUMENT", Some("count")));
    let inverted =
        json!({ "tenantId": ex::TENANT, "nodePoolId": np_id, "autoScale": { "min": 3, "max": 2 } });
    let a = h.call("kubernetesNodePools.resize", Some(&t), &inverted).await;
    assert_eq!((a.code(), a.field()), ("INVALID_ARGUMENT", Some("autoScale.max")));
    // Delete: deleting, idempotent, then nothing else.
    let del = json!({ "tenantId": ex::TENANT, "nodePoolId": np_id });
    let gone = h.call("kubernetesNodePools.delete", Some(&t), &del).await.ok();
    assert_eq!(gone["state"], "deleting");
    assert_eq!(h.call("kubernetesNodePools.delete", Some(&t), &del).await.ok(), gone);
    let again = without(&resize, "expectedGeneration");
    h.call("kubernetesNodePools.resize", Some(&t), &again).await.err("FAILED_PRECONDITION");
}

async fn substrate_and_provider_node_pools_are_read_only(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    // The provider's own pool: made at the provider by the tenant (no ownership tag), and
    // recorded read-only by a run of the cluster reconciler once the cluster is known there.
    let pools = vec![bc_sim::testing::node_pool("their-own", 1, &[])];
    let pid = bc_sim::testing::create_cluster(&h.sim, "main-cluster", pools);
    known_to_the_provider(&h, &id(ex::CLUSTER), &pid).await;
    let (key, outcome) = h.reconcile_once(WorkKind::Clusters).await;
    assert_eq!(key, ex::CLUSTER, "{outcome:?}");
    // A substrate's row of the example pool's first flavor, as the substrate reconciler
    // decides it (recorded before the provider makes that pool), committed as it commits.
    let cluster = h.store.cluster_get_any(&id(ex::CLUSTER)).await.unwrap().unwrap();
    let all = bc_domain::ports::PageRequest::first(100);
    let live = h.store.node_pool_list_by_cluster(&cluster.cluster_id, &all).await.unwrap().items;
    let pool: PoolId = id(ex::POOL);
    let flavor = &crate::common::example_policy().flavors[0];
    let desired = desired_node_pool(&pool, SubstrateNaming::LONG, flavor).expect("a flavor");
    let inputs = substrate_rows::Inputs {
        pool: &pool,
        cluster: &cluster,
        desired: std::slice::from_ref(&desired),
        rows: &live,
        observed: Some(&[]),
        refused: &Default::default(),
        now: h.now(),
    };
    let mut uow = UnitOfWork::new();
    uow.writes = substrate_rows::sync(&inputs, &mut || rows::id()).writes;
    h.store.commit(uow).await.unwrap();
    let after = h.store.node_pool_list_by_cluster(&cluster.cluster_id, &all).await.unwrap().items;
    let managed = after.iter().find(|r| r.managed_by.as_ref() == Some(&pool)).unwrap().clone();
    let theirs = after.iter().find(|r| r.origin == NodePoolOrigin::Provider).unwrap().clone();
    assert_eq!(theirs.name, "their-own", "{after:?}");
    let list = json!({ "tenantId": ex::TENANT, "clusterId": ex::CLUSTER });
    let page = h.call("kubernetesNodePools.list", Some(&t), &list).await.ok();
    let shown: Vec<Value> = page["kubernetesNodePools"].as_array().unwrap().clone();
    assert_eq!(shown.len(), 3, "the provider's own pools are listed too");
    assert_eq!(shown.iter().filter(|p| p["managedBy"] == ex::POOL).count(), 1);
    for (np, words) in [(&managed, "change that pool's flavors"), (&theirs, "provider's own")] {
        let body = json!({ "tenantId": ex::TENANT, "nodePoolId": np.node_pool_id, "count": 2 });
        let m =
            h.call("kubernetesNodePools.resize", Some(&t), &body).await.err("FAILED_PRECONDITION");
        assert!(m.contains(words), "{m}");
        let del = json!({ "tenantId": ex::TENANT, "nodePoolId": np.node_pool_id });
        let m =
            h.call("kubernetesNodePools.delete", Some(&t), &del).await.err("FAILED_PRECONDITION");
        assert!(m.contains(words), "{m}");
    }
    // The provider's own pools keep their names: a new pool of that name is refused.
    let taken = with(
        &without(&example("kubernetesNodePools.create"), "requestId"),
        "name",
        json!("their-own"),
    );
    h.call("kubernetesNodePools.create", Some(&t), &taken).await.err("ALREADY_EXISTS");
}

async fn an_autopilot_cluster_has_no_node_pools(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let auto = autopilot_cluster(&h).await;
    let body = with(
        &without(&example("kubernetesNodePools.create"), "requestId"),
        "clusterId",
        json!(auto.cluster_id),
    );
    let message =
        h.call("kubernetesNodePools.create", Some(&t), &body).await.err("FAILED_PRECONDITION");
    assert!(message.contains("autopilot"), "{message}");
}

/// The example cluster, made for the example pool's substrate (create mode) and known to
/// the provider as `provider_cluster_id`.
async fn made_for_the_example_pool(h: &Harness, provider_cluster_id: &str) {
    let mut sub = h.store.substrate_get_any(&id(ex::POOL)).await.unwrap().unwrap();
    assert_eq!(sub.mode, bc_domain::model::SubstrateMode::Create);
    sub.cluster_id = Some(id(ex::CLUSTER));
    let made = Write::SetClusterStatus {
        cluster_id: id(ex::CLUSTER),
        provider_cluster_id: Some(provider_cluster_id.into()),
        version: None,
        status: rows::status(ResourceState::Ready),
    };
    h.store.commit(UnitOfWork::new().write(Write::PutSubstrate(sub)).write(made)).await.unwrap();
}

/// SPEC §6, §8: a cluster created for a pool's substrate goes with that pool — a tenant's
/// node pool on it, or another pool adopting it (at create, or added by an update), is
/// FAILED_PRECONDITION naming the pool; adopting a cluster no pool made is accepted.
async fn a_cluster_made_for_a_pool_takes_no_other_pool_and_no_node_pool(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    made_for_the_example_pool(&h, "c-made").await;
    let np = without(&example("kubernetesNodePools.create"), "requestId");
    let m = h.call("kubernetesNodePools.create", Some(&t), &np).await.err("FAILED_PRECONDITION");
    assert!(m.contains(ex::POOL) && m.contains("add a flavor"), "{m}");
    let adopt = |cluster: &str| {
        let mut policy = example("pools.create")["policy"].clone();
        policy["substrate"]["cluster"] = json!({ "adopt": { "providerClusterId": cluster } });
        policy
    };
    let create = without(&example("pools.create"), "requestId");
    let other = with(&with(&create, "name", json!("other")), "policy", adopt("c-made"));
    let m = h.call("pools.create", Some(&t), &other).await.err("FAILED_PRECONDITION");
    assert!(m.contains(ex::POOL) && m.contains("c-made"), "{m}");
    let mut bare_policy = example("pools.create")["policy"].clone();
    bare_policy.as_object_mut().unwrap().remove("substrate");
    let bare = with(&with(&create, "name", json!("bare")), "policy", bare_policy);
    let bare = h.call("pools.create", Some(&t), &bare).await.ok();
    let update =
        json!({ "tenantId": ex::TENANT, "poolId": bare["poolId"], "policy": adopt("c-made") });
    let m = h.call("pools.update", Some(&t), &update).await.err("FAILED_PRECONDITION");
    assert!(m.contains(ex::POOL), "{m}");
    // What refuses is whose cluster it is: one no pool made may be adopted.
    let theirs = with(&with(&create, "name", json!("theirs")), "policy", adopt("c-theirs"));
    h.call("pools.create", Some(&t), &theirs).await.ok();
}

/// SPEC §8: a node pool's name is its provider-side name, and the provider's own pools
/// count — one the tenant made at the provider (no row, no ownership tag) makes the name
/// ALREADY_EXISTS at create, and nothing is recorded.
async fn a_node_pool_name_the_provider_has_is_already_taken(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let pools = vec![bc_sim::testing::node_pool("extra", 1, &[])];
    let pid = bc_sim::testing::create_cluster(&h.sim, "main-cluster", pools);
    let made = Write::SetClusterStatus {
        cluster_id: id(ex::CLUSTER),
        provider_cluster_id: Some(pid),
        version: None,
        status: rows::status(ResourceState::Ready),
    };
    h.store.commit(UnitOfWork::new().write(made)).await.unwrap();
    let body = without(&example("kubernetesNodePools.create"), "requestId");
    let extra = with(&body, "name", json!("extra"));
    let m = h.call("kubernetesNodePools.create", Some(&t), &extra).await.err("ALREADY_EXISTS");
    assert!(m.contains("extra") && m.contains("another name"), "{m}");
    let list = json!({ "tenantId": ex::TENANT, "clusterId": ex::CLUSTER });
    let page = h.call("kubernetesNodePools.list", Some(&t), &list).await.ok();
    let names: Vec<&str> = page["kubernetesNodePools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(!names.contains(&"extra"), "nothing recorded: {names:?}");
    // A name the provider does not have is taken as before.
    h.call("kubernetesNodePools.create", Some(&t), &body).await.ok();
}

/// A cluster whose deletion is pending (`kubernetesClusters.delete`) is adopted by no
/// pool, at create or by an update: FAILED_PRECONDITION naming the pending deletion.
async fn a_cluster_being_deleted_is_not_adopted(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let made = Write::SetClusterStatus {
        cluster_id: id(ex::CLUSTER),
        provider_cluster_id: Some("c-going".into()),
        version: None,
        status: rows::status(ResourceState::Ready),
    };
    h.store.commit(UnitOfWork::new().write(made)).await.unwrap();
    let delete = json!({ "tenantId": ex::TENANT, "clusterId": ex::CLUSTER });
    h.call("kubernetesClusters.delete", Some(&t), &delete).await.ok();
    let mut policy = example("pools.create")["policy"].clone();
    policy["substrate"]["cluster"] = json!({ "adopt": { "providerClusterId": "c-going" } });
    let create = without(&example("pools.create"), "requestId");
    let other = with(&with(&create, "name", json!("other")), "policy", policy.clone());
    let m = h.call("pools.create", Some(&t), &other).await.err("FAILED_PRECONDITION");
    assert!(m.contains("c-going") && m.contains("being deleted"), "{m}");
    let mut bare_policy = example("pools.create")["policy"].clone();
    bare_policy.as_object_mut().unwrap().remove("substrate");
    let bare = with(&with(&create, "name", json!("bare")), "policy", bare_policy);
    let bare = h.call("pools.create", Some(&t), &bare).await.ok();
    let update = json!({ "tenantId": ex::TENANT, "poolId": bare["poolId"], "policy": policy });
    let m = h.call("pools.update", Some(&t), &update).await.err("FAILED_PRECONDITION");
    assert!(m.contains("being deleted"), "{m}");
}

/// SPEC §6: a substrate's cluster is standard, so adopting an autopilot cluster this
/// system knows is FAILED_PRECONDITION at `pools.create` and at `pools.update`, naming
/// the field and the mode.
async fn a_known_autopilot_cluster_is_not_adopted(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let auto = autopilot_cluster(&h).await;
    known_to_the_provider(&h, &auto.cluster_id, "c-auto").await;
    let mut policy = example("pools.create")["policy"].clone();
    policy["substrate"]["cluster"] = json!({ "adopt": { "providerClusterId": "c-auto" } });
    let create = without(&example("pools.create"), "requestId");
    let other = with(&with(&create, "name", json!("other")), "policy", policy.clone());
    let m = h.call("pools.create", Some(&t), &other).await.err("FAILED_PRECONDITION");
    assert!(m.contains("c-auto") && m.contains("autopilot"), "{m}");
    assert!(m.contains("policy.substrate.cluster.adopt.providerClusterId"), "{m}");
    let mut bare_policy = example("pools.create")["policy"].clone();
    bare_policy.as_object_mut().unwrap().remove("substrate");
    let bare = with(&with(&create, "name", json!("bare")), "policy", bare_policy);
    let bare = h.call("pools.create", Some(&t), &bare).await.ok();
    let update = json!({ "tenantId": ex::TENANT, "poolId": bare["poolId"], "policy": policy });
    let m = h.call("pools.update", Some(&t), &update).await.err("FAILED_PRECONDITION");
    assert!(m.contains("autopilot"), "{m}");
}

/// The cluster reconciler's status write once the provider runs cluster `cluster_id` as
/// `provider_cluster_id`.
async fn known_to_the_provider(h: &Harness, cluster_id: &ClusterId, provider_cluster_id: &str) {
    let known = Write::SetClusterStatus {
        cluster_id: cluster_id.clone(),
        provider_cluster_id: Some(provider_cluster_id.into()),
        version: None,
        status: rows::status(ResourceState::Ready),
    };
    h.store.commit(UnitOfWork::new().write(known)).await.unwrap();
}

/// An autopilot cluster of the example account, as `kubernetesClusters.create` records
/// it where the provider offers the mode (its recipe).
async fn autopilot_cluster(h: &Harness) -> bc_domain::model::KubernetesCluster {
    let account = h.store.account_get_any(&id(ex::ACCOUNT)).await.unwrap().unwrap();
    let new = bc_domain::recipes::NewCluster {
        cluster_id: rows::id(),
        tenant_id: account.tenant_id.clone(),
        provider_account_id: account.provider_account_id.clone(),
        name: "auto".parse().unwrap(),
        region: "nyc1".into(),
        version: None,
        high_availability: false,
        mode: ClusterMode::Autopilot,
    };
    let made = bc_domain::recipes::cluster_created(new, vec![], h.now());
    h.store.commit(made.uow).await.unwrap();
    made.record.0
}
