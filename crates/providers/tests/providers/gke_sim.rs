//! The GKE adapter against the simulator's GKE face and token endpoint over loopback:
//! accounts checked by minting and listing, the key's own `token_uri` never used, tokens
//! cached, clusters and node pools through the port with counts read as totals, one
//! operation at a time answered as `Busy`, autopilot node-pool calls refused before GKE is
//! asked — with time stepped on the simulator's `ManualClock`.
//!
//! Invariant kept: what the adapter reports is what the simulated GKE holds, and calls
//! are counted by the simulator's per-route counters, never by timing.

use std::sync::Arc;

use bc_domain::ProviderError;
use bc_domain::model::{ClusterMode, ProviderKind, SecretString};
use bc_domain::ports::{
    AccountCredentials, Clock, CreateClusterRequest, ProviderClusterState, ProviderCredentials,
    ProviderImpl, ProviderResult,
};
use bc_providers::gke::{Gke, GkeConfig};
use bc_sim::SimConfig;
use bc_sim::gke_api::routes;
use bc_sim::model::routes::key;
use bc_sim::testing::{self, Served, bounded};
use serde_json::{Value, json};

/// An adapter for the account of key file `key` (its own budget).
fn adapter_for(w: &Served, key: &str) -> ProviderResult<Gke> {
    let checked = ProviderCredentials::service_account(SecretString::new(key), None)
        .check(ProviderKind::Gke)
        .expect("the simulator's key is a key");
    let AccountCredentials::ServiceAccount(sa) = checked else { unreachable!("gke") };
    let config = GkeConfig::with_urls(w.gke_api_url(), w.gke_token_url());
    Gke::new(&config, &sa, w.clock.clone() as Arc<dyn Clock>, None)
}

/// The simulator's key with its `token_uri` aimed at an address nothing answers: the
/// adapter mints at its configured URL only.
fn key_aimed_elsewhere(w: &Served) -> String {
    let mut key: Value = serde_json::from_str(&w.gke_key()).unwrap();
    key["token_uri"] = json!("http://127.0.0.1:9/elsewhere");
    key.to_string()
}

/// Pool `name` of `count` nodes of a GKE machine type.
fn pool(name: &str, count: u32) -> bc_domain::ports::NodePoolRequest {
    bc_domain::ports::NodePoolRequest {
        size: "e2-standard-4".into(),
        ..testing::node_pool_request(name, count)
    }
}

fn count(w: &Served, method: &str, route: &str) -> u64 {
    w.sim.state().model().request_count(&key(method, route))
}

#[tokio::test]
async fn an_account_is_checked_by_minting_a_token_and_listing_clusters() {
    bounded(async {
        let w = Served::start(SimConfig::default()).await;
        let key = key_aimed_elsewhere(&w);
        let a = adapter_for(&w, &key).unwrap();
        a.check_credentials().await.expect("the key's token_uri is never used");
        a.check_credentials().await.unwrap();
        assert_eq!(count(&w, "POST", routes::TOKEN), 1, "one token, cached");
        assert_eq!(count(&w, "GET", routes::CLUSTERS), 2);
        assert_eq!(a.project(), "bc-sim-project");

        // A deleted key: the endpoint's reason, without the key.
        let kid = serde_json::from_str::<Value>(&key).unwrap()["private_key_id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(w.sim.state().model().gke_delete_key(&kid));
        let fresh = adapter_for(&w, &key).unwrap();
        let e = fresh.check_credentials().await.unwrap_err();
        let ProviderError::Refused { message } = &e else { panic!("{e:?}") };
        assert!(message.contains("invalid_grant"), "{message}");
        assert!(!message.contains("PRIVATE KEY"), "{message}");
    })
    .await;
}

#[tokio::test]
async fn clusters_and_node_pools_through_the_port() {
    bounded(async {
        let w = Served::start(SimConfig::default()).await;
        let a = adapter_for(&w, &w.gke_key()).unwrap();
        let k = a.kubernetes();
        let mut req = CreateClusterRequest {
            tags: vec!["better-compute-cluster-test".into()],
            ..testing::cluster_request("c1", vec![pool("alpha", 2)])
        };
        req.region = "us-central1-a".into();
        req.version = "latest".into();
        let made = k.create_cluster(&req).await.unwrap();
        assert_eq!(made.name, "c1");
        assert_eq!(made.mode, ClusterMode::Standard);
        assert!(!made.id.is_empty());
        assert!(made.tags.contains(&"better-compute-cluster-test".to_owned()), "{:?}", made.tags);
        // One operation at a time: a change while the create runs is busy, not refused.
        let three = pool("alpha", 3);
        let busy = k.update_node_pool(&made.id, "alpha", &three).await.unwrap_err();
        assert!(matches!(busy, ProviderError::Busy { .. }) && busy.is_retryable(), "{busy:?}");
        for _ in 0..20 {
            w.step(60);
            if k.get_cluster(&made.id).await.unwrap().state == ProviderClusterState::Running {
                break;
            }
        }
        let running = k.get_cluster(&made.id).await.unwrap();
        assert_eq!(running.state, ProviderClusterState::Running);
        assert!(running.endpoint.is_some());
        // The zonal cluster's pool of 2 is 2 Nodes, counted from the cluster's API.
        let pools = k.list_node_pools(&made.id).await.unwrap();
        assert_eq!(pools.len(), 1);
        assert_eq!((pools[0].id.as_str(), pools[0].count), ("alpha", 2), "{pools:?}");

        // Resized to 3 (a total), then read back as 3.
        // As a reconciler does: ask again after each step until the pool is as asked (a
        // call makes one change at a time, and one asked while another runs is Busy).
        let resize = pool("alpha", 3);
        let mut named = None;
        for _ in 0..20 {
            match k.update_node_pool(&made.id, "alpha", &resize).await {
                Ok(p) if p.count == 3 => break,
                Ok(_) | Err(ProviderError::Busy { .. }) => {
                    // While the resize runs the cluster is RECONCILING, its message the
                    // operation GKE is at (not just "being upgraded").
                    let c = k.get_cluster(&made.id).await.unwrap();
                    if c.state == ProviderClusterState::Upgrading {
                        named = c.message;
                    }
                    w.step(60)
                }
                Err(e) => panic!("{e:?}"),
            }
        }
        assert_eq!(
            named.as_deref(),
            Some("GKE is resizing node pool alpha (SET_NODE_POOL_SIZE)"),
            "the operation in flight is named"
        );
        assert_eq!(k.get_node_pool(&made.id, "alpha").await.unwrap().count, 3);
        assert!(count(&w, "POST", routes::SET_SIZE) >= 1);

        // Credentials reach the cluster's API with the endpoint, CA and a token.
        let creds = k.credentials(&made.id).await.unwrap();
        assert!(creds.expires_at.is_some());
        let kubeconfig = creds.kubeconfig.expose();
        assert!(kubeconfig.contains("certificate-authority-data") && !kubeconfig.contains("exec"));

        // Deleted: gone once the operation is done.
        k.delete_cluster(&made.id).await.unwrap();
        for _ in 0..20 {
            w.step(60);
            if k.get_cluster(&made.id).await == Err(ProviderError::NotFound) {
                break;
            }
        }
        assert_eq!(k.get_cluster(&made.id).await.unwrap_err(), ProviderError::NotFound);
    })
    .await;
}

#[tokio::test]
async fn autopilot_clusters_have_no_node_pools_and_gke_is_not_asked() {
    bounded(async {
        let w = Served::start(SimConfig::default()).await;
        let a = adapter_for(&w, &w.gke_key()).unwrap();
        let k = a.kubernetes();
        let mut req = testing::cluster_request("auto1", vec![]);
        req.mode = ClusterMode::Autopilot;
        req.region = "us-central1-a".into();
        let zonal = k.create_cluster(&req).await.unwrap_err();
        assert!(matches!(&zonal, ProviderError::Refused { message } if message.contains("regional")));
        req.region = "us-central1".into();
        req.version = "latest".into();
        let made = k.create_cluster(&req).await.unwrap();
        assert_eq!(made.mode, ClusterMode::Autopilot);
        let before = count(&w, "GET", routes::NODE_POOLS);
        let e = k.list_node_pools(&made.id).await.unwrap_err();
        assert!(
            matches!(&e, ProviderError::Refused { message } if message.contains("Autopilot node pools")),
            "{e:?}"
        );
        let e = k.create_node_pool(&made.id, &pool("p", 1)).await;
        assert!(matches!(e, Err(ProviderError::Refused { .. })));
        assert_eq!(count(&w, "GET", routes::NODE_POOLS), before, "refused here");
        assert_eq!(count(&w, "POST", routes::NODE_POOLS), 0, "refused here");
    })
    .await;
}

/// Steps the simulator a minute at a time until the cluster runs (no operation on it).
async fn until_running(w: &Served, k: &dyn bc_domain::ports::KubernetesProvider, id: &str) {
    for _ in 0..30 {
        if k.get_cluster(id).await.unwrap().state == ProviderClusterState::Running {
            return;
        }
        w.step(60);
    }
    panic!("cluster {id} never ran: {:?}", k.get_cluster(id).await);
}

/// A standard cluster `c1` at `version` with pools `a` and `b`, made and running.
async fn running_cluster(
    w: &Served,
    k: &dyn bc_domain::ports::KubernetesProvider,
    version: &str,
) -> String {
    let mut req = testing::cluster_request("c1", vec![pool("a", 1), pool("b", 1)]);
    req.region = "us-central1-a".into();
    req.version = version.into();
    let made = k.create_cluster(&req).await.unwrap();
    until_running(w, k, &made.id).await;
    made.id
}

/// A cluster in a release channel is offered only its channel's versions
/// (ServerConfig.channels[].validVersions): before, every `validMasterVersions`, so a
/// REGULAR cluster at 1.34.9 was offered RAPID's 1.35.7 too, which GKE then refuses for
/// it ("Master version … is unsupported"). New clusters, which the adapter enrolls in
/// REGULAR, are offered REGULAR's.
#[tokio::test]
async fn upgrades_and_new_clusters_are_offered_their_release_channels_versions() {
    bounded(async {
        let w = Served::start(SimConfig::default()).await;
        let a = adapter_for(&w, &w.gke_key()).unwrap();
        let k = a.kubernetes();
        let (old, new) = ("1.34.9-gke.1341000", "1.35.6-gke.1062000");
        let id = running_cluster(&w, k, old).await;
        let offered: Vec<String> =
            k.available_upgrades(&id).await.unwrap().into_iter().map(|v| v.slug).collect();
        assert_eq!(offered, vec![new.to_owned()]);
        // Each version offered is one GKE takes.
        k.upgrade_cluster(&id, new).await.unwrap();
        let options = k.options_in("us-central1-a").await.unwrap();
        let slugs: Vec<&str> = options.versions.iter().map(|v| v.slug.as_str()).collect();
        assert_eq!(slugs, [new, old], "REGULAR's, newest first");
    })
    .await;
}

/// The control plane upgrades alone, and each pool follows by its own UPGRADE_NODES
/// operation (nodePools.update `nodeVersion`), one at a time, never above the control
/// plane; one asked while another operation runs is `Busy`.
#[tokio::test]
async fn pools_follow_the_control_plane_one_by_one() {
    bounded(async {
        let w = Served::start(SimConfig::default()).await;
        let a = adapter_for(&w, &w.gke_key()).unwrap();
        let k = a.kubernetes();
        assert_eq!(a.offer().pool_upgrades, bc_domain::ports::PoolUpgrades::OneByOne);
        let (old, new) = ("1.34.9-gke.1341000", "1.35.6-gke.1062000");
        let id = running_cluster(&w, k, old).await;

        // A pool cannot go above the control plane.
        let above = k.upgrade_node_pool(&id, "a", new).await.unwrap_err();
        assert!(
            matches!(&above, ProviderError::Refused { message } if message.contains("master version")),
            "{above:?}"
        );

        // The control plane first (its version changes when its operation ends); a
        // pool's upgrade while it runs is busy, not refused.
        k.upgrade_cluster(&id, new).await.unwrap();
        let busy = k.upgrade_node_pool(&id, "a", old).await.unwrap_err();
        assert!(matches!(busy, ProviderError::Busy { .. }), "{busy:?}");
        until_running(&w, k, &id).await;
        let c = k.get_cluster(&id).await.unwrap();
        assert_eq!(c.version, new);
        let versions = |c: &bc_domain::ports::ProviderCluster| -> Vec<Option<String>> {
            c.node_pools.iter().map(|p| p.version.clone()).collect()
        };
        assert_eq!(versions(&c), vec![Some(old.to_owned()), Some(old.to_owned())]);

        // Then each pool, one operation at a time.
        k.upgrade_node_pool(&id, "a", new).await.unwrap();
        let busy = k.upgrade_node_pool(&id, "b", new).await.unwrap_err();
        assert!(matches!(busy, ProviderError::Busy { .. }), "{busy:?}");
        until_running(&w, k, &id).await;
        k.upgrade_node_pool(&id, "b", new).await.unwrap();
        until_running(&w, k, &id).await;
        let c = k.get_cluster(&id).await.unwrap();
        assert_eq!(versions(&c), vec![Some(new.to_owned()), Some(new.to_owned())]);
        assert_eq!(w.sim.state().model().gke_operations_started("UPGRADE_NODES"), 2);
    })
    .await;
}

/// GKE reports no current size of a node pool, so the adapter counts each pool's Nodes
/// through the cluster's own API, in a listing too. A running cluster whose API does not
/// answer is listed with its Nodes unread (`nodes_unread` naming it) — the listing, which
/// every object of the account is observed by, does not fail for it, and every other
/// cluster is listed with its counts — while a GET of it, or of its pool, fails as a
/// retried (`Transient`) error: its caller would act on the count. Once the API answers,
/// both read the count again.
#[tokio::test]
async fn a_cluster_whose_api_does_not_answer_is_listed_with_its_nodes_unread() {
    bounded(async {
        let w = Served::start(SimConfig::default()).await;
        let a = adapter_for(&w, &w.gke_key()).unwrap();
        let k = a.kubernetes();
        let silent = running_cluster(&w, k, "latest").await;
        let mut req = testing::cluster_request("c2", vec![pool("beta", 2)]);
        req.region = "us-central1-a".into();
        req.version = "latest".into();
        let answering = k.create_cluster(&req).await.unwrap().id;
        until_running(&w, k, &answering).await;
        let kube = &w.sim.state().kube;
        let kube_id = kube
            .cluster_ids()
            .into_iter()
            .find(|id| id.replace('-', "") == silent)
            .expect("the cluster's API");
        kube.inject_failures(&kube_id, None, 1_000, 503);

        let listed = k.list_clusters().await.expect("one silent API does not fail the listing");
        let of = |id: &str| listed.iter().find(|c| c.id == id).cloned().expect("listed");
        let unread = of(&silent).nodes_unread.expect("its nodes are unread");
        assert!(unread.contains("c1") && unread.contains("could not be counted"), "{unread}");
        let c2 = of(&answering);
        assert_eq!(c2.nodes_unread, None);
        let beta: Vec<_> = c2.node_pools.iter().map(|p| (p.count, p.nodes.len())).collect();
        assert_eq!(beta, [(2, 2)], "counted from its Nodes");

        for e in [
            k.get_cluster(&silent).await.unwrap_err(),
            k.get_node_pool(&silent, "a").await.unwrap_err(),
        ] {
            assert!(
                matches!(&e, ProviderError::Transient { message } if message.contains("c1")),
                "{e:?}"
            );
        }

        kube.clear_faults();
        let listed = k.list_clusters().await.unwrap();
        let c1 = listed.iter().find(|c| c.id == silent).expect("listed");
        assert_eq!(c1.nodes_unread, None);
        let counts: Vec<_> = c1.node_pools.iter().map(|p| (p.count, p.nodes.len())).collect();
        assert_eq!(counts, [(1, 1), (1, 1)]);
        assert_eq!(k.get_node_pool(&silent, "a").await.unwrap().count, 1);
    })
    .await;
}
