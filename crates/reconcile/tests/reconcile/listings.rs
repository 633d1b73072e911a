//! The production observer's cached listings and the writes that forget them: a load
//! balancer's write forgets the load balancers' listing only; any other write forgets
//! both (a cluster's delete may take its load balancers along, a node's change moves
//! the droplets a load balancer's tag targets). Through the real DigitalOcean adapter
//! against the simulator, the list calls counted at the simulator.

use std::time::Duration;

use bc_reconcile::testing::Env;
use bc_sim::model::routes;
use bc_sim::testing::{cluster_request, lb_request, node_pool_request};

/// Longer than the test runs: only a write makes a listing stale here.
const MAX_AGE: Duration = Duration::from_secs(600);

/// (cluster list requests, load balancer list requests) made so far.
fn lists(env: &Env) -> (u64, u64) {
    (env.count("GET", routes::CLUSTERS), env.count("GET", routes::LOAD_BALANCERS))
}

/// Before: every write forgot both listings, so each load balancer created made the
/// substrates' next read list every cluster again (at 1,000 clusters, five calls; a
/// 10,000-object converge sent 916–1,143 cluster list requests, 46 after).
#[tokio::test]
async fn a_load_balancers_write_keeps_the_clusters_listing_and_a_clusters_write_forgets_both() {
    let env = Env::start().await;
    let (observer, account) = (env.deps.observer.clone(), &env.account);
    let read_both = async || {
        observer.clusters(account, MAX_AGE).await.expect("clusters");
        observer.load_balancers(account, MAX_AGE).await.expect("load balancers");
    };
    read_both().await;
    read_both().await;
    assert_eq!(lists(&env), (1, 1), "a fresh listing is read again from the cache");

    let provider = observer.provider(account).await.expect("provider");
    provider.load_balancers().create(&lb_request("web")).await.expect("create");
    read_both().await;
    assert_eq!(lists(&env), (1, 2), "a load balancer's create forgets only their listing");

    let req = cluster_request("c", vec![node_pool_request("p", 1)]);
    provider.kubernetes().create_cluster(&req).await.expect("create");
    read_both().await;
    assert_eq!(lists(&env), (2, 3), "a cluster's create forgets both listings");
}
