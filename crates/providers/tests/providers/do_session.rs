//! The DigitalOcean adapter's cluster sessions against the simulator over loopback, on
//! its `ManualClock`: a kubeconfig's token lives the `expiry_seconds` the adapter asks
//! (an hour), after which DigitalOcean's cluster API refuses it with 401, so a
//! `ClusterSession` over the adapter renews its kubeconfig inside the refresh margin,
//! before the token expires, never waiting for the refusal.
//!
//! Invariant kept: what is asserted is counted by the simulator's per-route counters
//! (kubeconfigs fetched), never timed.

use std::sync::Arc;

use bc_domain::ports::{
    Clock, ClusterApi, ClusterClient, ClusterError, ClusterSession, KubernetesProvider,
};
use bc_providers::kube::KubeClusterApi;
use bc_sim::SimConfig;
use bc_sim::model::routes;
use bc_sim::testing::{self, Served, bounded};

use crate::common::{self, adapter};

/// A running cluster with one pool of one node; its id.
async fn running_cluster(w: &Served, a: &bc_providers::digitalocean::DigitalOcean) -> String {
    let req = testing::cluster_request("s1", vec![testing::node_pool_request("alpha", 1)]);
    common::running_cluster(w, a, &req).await
}

#[tokio::test]
async fn a_kubeconfig_token_is_refused_once_it_expires() {
    bounded(async {
        let w = Served::start(SimConfig::default()).await;
        let a = Arc::new(adapter(&w));
        let id = running_cluster(&w, &a).await;
        let creds = a.credentials(&id).await.expect("credentials");
        let expires_at = creds.expires_at.expect("DigitalOcean's kubeconfigs say when they expire");
        let client = KubeClusterApi::new().connect(&creds.kubeconfig).await.expect("connect");
        assert_eq!(client.list_nodes("").await.expect("nodes").len(), 1);

        let left = (expires_at - w.clock.now()).whole_seconds();
        w.step(left);
        let err = client.list_nodes("").await.expect_err("an expired token is refused");
        assert!(matches!(err, ClusterError::Credentials(_)), "{err:?}");
    })
    .await;
}

#[tokio::test]
async fn a_session_renews_the_kubeconfig_before_the_cluster_would_refuse_it() {
    bounded(async {
        let w = Served::start(SimConfig::default()).await;
        let a = Arc::new(adapter(&w));
        let id = running_cluster(&w, &a).await;
        let session = ClusterSession::new(a.clone(), Arc::new(KubeClusterApi::new()), &id);
        let c: &dyn ClusterClient = &session;
        assert_eq!(c.list_nodes("").await.expect("nodes").len(), 1);
        let expires_at = a.credentials(&id).await.expect("credentials").expires_at;
        let expires_at = expires_at.expect("DigitalOcean's kubeconfigs say when they expire");
        let fetched = || w.count("GET", routes::KUBECONFIG);
        let before = fetched();

        // 100 s before the token expires (inside the 300 s margin) the cluster would still
        // take it; the session fetches a new kubeconfig anyway.
        let left = (expires_at - w.clock.now()).whole_seconds();
        assert!(left > 300, "the token has more than the margin left: {left} s");
        w.step(left - 100);
        assert_eq!(c.list_nodes("").await.expect("nodes").len(), 1);
        assert_eq!(fetched(), before + 1, "a new kubeconfig before the old one expires");

        // Past the first token's expiry the renewed one serves: nothing more is fetched.
        w.step(200);
        assert_eq!(c.list_nodes("").await.expect("nodes").len(), 1);
        assert_eq!(fetched(), before + 1);
    })
    .await;
}
