//! The GKE adapter's cluster sessions and single-node calls against the simulator's GKE
//! face over loopback, on the simulator's `ManualClock`: a `ClusterSession` over the
//! adapter renews the cluster's access token before the token's hour is up (never
//! waiting for the cluster's 401); an hour of steady calls by several sessions and the
//! account's listing mints one token, and a token the clusters refuse is replaced once,
//! not once per session; a single node is never deleted on GKE — refused before GKE is
//! asked, since GKE's API has no call for one node.
//!
//! Invariant kept: what is asserted is counted by the simulator's per-route counters
//! (tokens minted, clusters read), never timed.

use std::sync::Arc;

use bc_domain::ProviderError;
use bc_domain::ports::{Clock, ClusterClient, ClusterSession, KubernetesProvider, NodePoolRequest};
use bc_providers::gke::Gke;
use bc_providers::kube::KubeClusterApi;
use bc_sim::SimConfig;
use bc_sim::gke_api::routes;
use bc_sim::model::routes::key;
use bc_sim::testing::{self, Served, bounded};

fn count(w: &Served, method: &str, route: &str) -> u64 {
    w.sim.state().model().request_count(&key(method, route))
}

/// A running zonal cluster with one pool of one node; its id.
async fn running_cluster(w: &Served, gke: &Gke) -> String {
    running_cluster_named(w, gke, "s1").await
}

/// A running zonal cluster `name` with one pool of one node; its id.
async fn running_cluster_named(w: &Served, gke: &Gke, name: &str) -> String {
    let pool =
        NodePoolRequest { size: "e2-medium".into(), ..testing::node_pool_request("alpha", 1) };
    let mut req = testing::cluster_request(name, vec![pool]);
    req.region = "us-central1-a".into();
    req.version = "latest".into();
    crate::common::running_cluster(w, gke, &req).await
}

#[tokio::test]
async fn a_session_renews_the_access_token_before_the_cluster_would_refuse_it() {
    bounded(async {
        let w = Served::start(SimConfig::default()).await;
        let gke = Arc::new(w.gke_adapter());
        let id = running_cluster(&w, &gke).await;
        let session = ClusterSession::new(gke.clone(), Arc::new(KubeClusterApi::new()), &id);
        let c: &dyn ClusterClient = &session;
        assert_eq!(c.list_nodes("").await.expect("nodes").len(), 1);
        let expires_at = gke.credentials(&id).await.expect("credentials").expires_at;
        let expires_at = expires_at.expect("GKE's credentials say when they expire");
        let mints = || count(&w, "POST", routes::TOKEN);
        let reads = || count(&w, "GET", routes::CLUSTER);
        let (minted, read) = (mints(), reads());

        // 100 s before the token expires (inside the renewal margin), the cluster would
        // still take it; the session renews it anyway.
        let left = (expires_at - w.clock.now()).whole_seconds();
        assert!(left > 300, "the token has more than the margin left: {left} s");
        w.step(left - 100);
        assert_eq!(c.list_nodes("").await.expect("nodes").len(), 1);
        assert_eq!(mints(), minted + 1, "a new token is minted before the old one expires");
        assert_eq!(reads(), read + 1, "the session asked the adapter for credentials again");

        // Past the first token's expiry the renewed one serves: nothing more is minted.
        w.step(200);
        assert_eq!(c.list_nodes("").await.expect("nodes").len(), 1);
        assert_eq!((mints(), reads()), (minted + 1, read + 1));
    })
    .await;
}

/// A simulator, one account's adapter, three running clusters of the account and a
/// connected session with each.
async fn three_sessions() -> (Served, Arc<Gke>, Vec<ClusterSession>) {
    let w = Served::start(SimConfig::default()).await;
    let gke = Arc::new(w.gke_adapter());
    let mut sessions = Vec::new();
    for name in ["s1", "s2", "s3"] {
        let id = running_cluster_named(&w, &gke, name).await;
        let session = ClusterSession::new(gke.clone(), Arc::new(KubeClusterApi::new()), &id);
        assert_eq!(session.list_nodes("").await.expect("nodes").len(), 1);
        sessions.push(session);
    }
    (w, gke, sessions)
}

#[tokio::test]
async fn an_hour_of_steady_calls_mints_one_token_for_the_account() {
    bounded(async {
        let (w, gke, sessions) = three_sessions().await;
        let mints = || count(&w, "POST", routes::TOKEN);
        let minted = mints();
        assert_eq!(minted, 1, "one token made the clusters and connected the sessions");

        // The reconcilers' steady hour, 30 s at a time: the account's clusters listed
        // every 5 minutes (their Nodes counted through each cluster's API), each session
        // used every step. The token is an hour's; the adapter replaces it once, 5
        // minutes before it expires, and every session renews onto that one.
        for step in 0..120 {
            w.step(30);
            if step % 10 == 0 {
                assert_eq!(gke.list_clusters().await.expect("list").len(), 3);
            }
            for s in &sessions {
                assert_eq!(s.list_nodes("").await.expect("nodes").len(), 1);
            }
        }
        assert_eq!(mints() - minted, 1, "one mint in an hour of steady calls");
    })
    .await;
}

#[tokio::test]
async fn a_token_the_clusters_refuse_is_replaced_once_not_once_per_session() {
    bounded(async {
        let (w, _, sessions) = three_sessions().await;
        let mints = || count(&w, "POST", routes::TOKEN);
        let reads = || count(&w, "GET", routes::CLUSTER);
        let (minted, read) = (mints(), reads());

        // Google revokes the account's token: every session's next call is refused (401)
        // and reconnects. The first one's refusal replaces the account's token; the
        // others were refused the same old token and take the new one, rather than each
        // forgetting the token the previous session just got.
        w.sim.state().model().gke_revoke_tokens();
        for s in &sessions {
            assert_eq!(s.list_nodes("").await.expect("nodes after a reconnect").len(), 1);
        }
        assert_eq!(mints(), minted + 1, "one new token for the account");
        assert_eq!(reads(), read + 3, "each session asked for its cluster's credentials again");

        // And that one token serves every session from then on.
        for s in &sessions {
            assert_eq!(s.list_nodes("").await.expect("nodes").len(), 1);
        }
        assert_eq!((mints(), reads()), (minted + 1, read + 3));
    })
    .await;
}

#[tokio::test]
async fn one_node_is_never_deleted_on_gke_and_gke_is_not_asked() {
    bounded(async {
        let w = Served::start(SimConfig::default()).await;
        let gke = w.gke_adapter();
        for replace in [false, true] {
            let e = gke.delete_node("c-id", "alpha", "node-1", false, replace).await.unwrap_err();
            let ProviderError::Refused { message } = &e else { panic!("{e:?}") };
            assert!(message.contains("one node") && message.contains("node pool"), "{message}");
            assert!(!e.is_retryable());
        }
        // Refused before any call: no token minted, no cluster read.
        assert_eq!(count(&w, "POST", routes::TOKEN), 0);
        assert_eq!(count(&w, "GET", routes::CLUSTERS), 0);
        assert_eq!(count(&w, "GET", routes::CLUSTER), 0);
    })
    .await;
}
