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
