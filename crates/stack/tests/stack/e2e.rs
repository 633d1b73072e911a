//! End to end through the HTTP API of a dev stack: the real DigitalOcean adapter and the
//! real kube adapter against the simulator over loopback, the reconcilers and the relay
//! in process, on SQLite and on PostgreSQL (create mode with a flavor change and a drain
//! upgrade held by a booking); the copy-paste tour the banner prints, run as
//! printed by a shell; events over Server-Sent Events and, with a nats-server, NATS.
//!
//! Invariants: every wait is a bounded count of short polls (never an assertion on
//! elapsed time); the simulator runs the fastest delays; each test has its own directory,
//! database and ports, and stops its stack.

use std::collections::BTreeSet;

use bc_stack::dev::{DEV_TENANT, DevStack};
use bc_stack::testing::{self, Backend, Scratch, sim_get, substrate_in, wait_for};
use futures::StreamExt as _;
use serde_json::{Value, json};

/// The Server-Sent Events of tenant `dev` until one of type `until` for `subject_part`
/// arrives (bounded by the count of reads and a per-read limit).
async fn sse_until(
    api: String,
    token: String,
    subject_part: String,
    until: &'static str,
) -> Vec<Value> {
    let client = bc_client::Client::new(&api, &token).expect("client");
    let query = bc_client::api::events::StreamQuery {
        tenant_id: DEV_TENANT.parse().expect("a tenant id"),
        subject: None,
    };
    let mut stream = client.events(query, None);
    let mut events = Vec::new();
    for _ in 0..10_000 {
        let Ok(Some(event)) =
            tokio::time::timeout(std::time::Duration::from_secs(120), stream.next()).await
        else {
            break;
        };
        let v = serde_json::to_value(event.expect("the stream delivers")).expect("event json");
        let done =
            v["type"] == until && v["subject"].as_str().is_some_and(|s| s.contains(&subject_part));
        events.push(v);
        if done {
            return events;
        }
    }
    events
}

fn types_for(events: &[Value], subject_part: &str) -> BTreeSet<String> {
    events
        .iter()
        .filter(|e| e["subject"].as_str().is_some_and(|s| s.contains(subject_part)))
        .filter_map(|e| e["type"].as_str().map(str::to_owned))
        .collect()
}

/// The create-mode flow: account → pool with 2 flavors → substrate ready with its nodes
/// listed and joined → a load balancer ready → billed hours → a flavor's count changed →
/// `updating` → ready → load balancer deleted → archive → `deleted`, and the simulator
/// holds nothing of ours; the events arrive over SSE (and NATS when it runs).
async fn create_mode(backend: Backend) {
    let scratch = Scratch::new("bc-e2e-create");
    let Some(mut options) = testing::options(backend, scratch.path()).await else { return };
    let nats_url = if backend == Backend::Postgres { bc_testkit::nats_url() } else { None };
    options.nats_url = nats_url.clone();
    let stack = DevStack::start(options).await.expect("dev stack");
    let account = stack.account_id.clone();

    let nats = match &nats_url {
        Some(url) => {
            let client = async_nats::connect(url.as_str()).await.expect("nats");
            Some(client.subscribe("compute.>").await.expect("subscribe"))
        }
        None => None,
    };

    let pool = stack
        .call(
            "pools.create",
            json!({"tenantId": DEV_TENANT, "name": "flow", "policy": {
                "substrate": {"kind": "kubernetes", "account": account, "cluster": {"create": {"region": "nyc1", "version": "1.32.6-do.1"}}},
                "flavors": [{"name": "cpu", "size": "s-2vcpu-4gb", "count": 2},
                            {"name": "big", "size": "s-4vcpu-8gb", "count": 1}]}}),
        )
        .await
        .expect("pools.create");
    let pool_id = pool["poolId"].as_str().expect("poolId").to_owned();
    let sse = tokio::spawn(sse_until(
        stack.api_url.clone(),
        stack.token.clone(),
        pool_id.clone(),
        "kubernetes.substrate.deleted",
    ));
    let sub = json!({"tenantId": DEV_TENANT, "poolId": pool_id});
    let ready = wait_for(
        &stack,
        "3 nodes listed and joined",
        "kubernetesSubstrates.get",
        sub.clone(),
        |v| v["state"] == "ready" && v["nodesListed"] == 3 && v["nodesJoined"] == 3,
    )
    .await;
    assert!(ready.get("waitingToJoin").is_none(), "{ready}");
    let cluster_id = ready["clusterId"].as_str().expect("clusterId").to_owned();
    let cluster = stack
        .call("kubernetesClusters.get", json!({"tenantId": DEV_TENANT, "clusterId": cluster_id}))
        .await
        .expect("kubernetesClusters.get");
    let provider_cluster =
        cluster["providerClusterId"].as_str().expect("providerClusterId").to_owned();

    let lb = stack
        .call(
            "loadBalancers.create",
            json!({"tenantId": DEV_TENANT, "poolId": pool_id, "providerAccountId": account,
                   "name": "web", "type": "regional", "region": "nyc1",
                   "forwardingRules": [{"entryProtocol": "http", "entryPort": 80, "targetProtocol": "http", "targetPort": 8080}],
                   "targets": {"tag": "web"}}),
        )
        .await
        .expect("loadBalancers.create");
    let lb_id = lb["loadBalancerId"].as_str().expect("id").to_owned();
    let lb_ref = json!({"tenantId": DEV_TENANT, "loadBalancerId": lb_id});
    let lb_ready = wait_for(&stack, "lb ready", "loadBalancers.get", lb_ref.clone(), |v| {
        v["state"] == "ready"
    })
    .await;
    let provider_lb = lb_ready["providerLoadBalancerId"].as_str().expect("provider id").to_owned();
    let usage = wait_for(
        &stack,
        "the load balancer's hours billed",
        "billing.usage",
        json!({"tenantId": DEV_TENANT, "from": "2026-01-01T00:00:00.000Z", "to": "2100-01-01T00:00:00.000Z"}),
        |v| v["lines"].as_array().is_some_and(|l| l.iter().any(|x| x["resource"] == lb_id.as_str())),
    )
    .await;
    let line = usage["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["resource"] == lb_id.as_str())
        .unwrap()
        .clone();
    assert_eq!(line["meter"], "vps.load-balancer.hours", "{line}");
    assert_eq!(line["poolId"], pool_id.as_str(), "{line}");

    // A flavor's count changed: updating, then ready with the new node joined.
    let current = stack.call("pools.get", sub.clone()).await.expect("pools.get");
    let mut policy = current["policy"].clone();
    policy["flavors"][0]["count"] = json!(3);
    stack
        .call(
            "pools.update",
            json!({"tenantId": DEV_TENANT, "poolId": pool_id, "policy": policy,
                   "expectedGeneration": current["generation"]}),
        )
        .await
        .expect("pools.update");
    wait_for(&stack, "4 nodes listed and joined", "kubernetesSubstrates.get", sub.clone(), |v| {
        v["state"] == "ready" && v["nodesListed"] == 4 && v["nodesJoined"] == 4
    })
    .await;
    let listed = stack
        .call(
            "events.list",
            json!({"tenantId": DEV_TENANT, "subject": format!("compute.pools.{pool_id}")}),
        )
        .await
        .expect("events.list");
    let types = types_for(listed["events"].as_array().expect("events"), &pool_id);
    assert!(types.contains("kubernetes.substrate.updating"), "{types:?}");

    // A drain upgrade held by a booking: `upgrade` shown, new bookings refused naming it,
    // the provider asked only once the booking ends.
    let booking = stack
        .call("bookings.create", json!({"tenantId": DEV_TENANT, "poolId": pool_id}))
        .await
        .expect("bookings.create");
    let booking_id = booking["bookingId"].as_str().expect("bookingId").to_owned();
    let current = stack.call("pools.get", sub.clone()).await.expect("pools.get");
    let mut policy = current["policy"].clone();
    policy["substrate"]["cluster"]["create"]["version"] = json!("1.33.1-do.0");
    stack
        .call(
            "pools.update",
            json!({"tenantId": DEV_TENANT, "poolId": pool_id, "policy": policy,
                   "expectedGeneration": current["generation"]}),
        )
        .await
        .expect("pools.update (version)");
    let held = wait_for(&stack, "the drain waits", "kubernetesSubstrates.get", sub.clone(), |v| {
        v["upgrade"]["version"] == "1.33.1-do.0"
    })
    .await;
    assert_eq!(held["state"], "updating", "{held}");
    let refused = stack
        .call("bookings.create", json!({"tenantId": DEV_TENANT, "poolId": pool_id}))
        .await
        .expect_err("a booking while the drain waits");
    let refused = refused.to_string();
    assert!(
        refused.contains("FAILED_PRECONDITION") && refused.contains("1.33.1-do.0"),
        "{refused}"
    );
    let doks = format!("/v2/kubernetes/clusters/{provider_cluster}");
    assert_eq!(sim_get(&stack, &doks).await["kubernetes_cluster"]["version"], "1.32.6-do.1");
    stack
        .call("bookings.end", json!({"tenantId": DEV_TENANT, "bookingId": booking_id}))
        .await
        .expect("bookings.end");
    wait_for(&stack, "upgraded and ready", "kubernetesSubstrates.get", sub.clone(), |v| {
        v["state"] == "ready" && v.get("upgrade").is_none()
    })
    .await;
    assert_eq!(sim_get(&stack, &doks).await["kubernetes_cluster"]["version"], "1.33.1-do.0");
    let again = stack
        .call("bookings.create", json!({"tenantId": DEV_TENANT, "poolId": pool_id}))
        .await
        .expect("bookings accepted again");
    stack
        .call("bookings.end", json!({"tenantId": DEV_TENANT, "bookingId": again["bookingId"]}))
        .await
        .expect("bookings.end");

    stack.call("loadBalancers.delete", lb_ref.clone()).await.expect("loadBalancers.delete");
    wait_for(&stack, "lb deleted", "loadBalancers.get", lb_ref, |v| v["state"] == "deleted").await;
    stack.call("pools.archive", sub.clone()).await.expect("pools.archive");
    substrate_in(&stack, &pool_id, "deleted").await;

    // The simulator holds no object of ours.
    let clusters = sim_get(&stack, "/v2/kubernetes/clusters").await;
    let ids: Vec<&str> = clusters["kubernetes_clusters"]
        .as_array()
        .map(|a| a.iter().filter_map(|c| c["id"].as_str()).collect())
        .unwrap_or_default();
    assert!(!ids.contains(&provider_cluster.as_str()), "cluster still there: {clusters}");
    let lbs = sim_get(&stack, "/v2/load_balancers").await;
    let lb_ids: Vec<&str> = lbs["load_balancers"]
        .as_array()
        .map(|a| a.iter().filter_map(|c| c["id"].as_str()).collect())
        .unwrap_or_default();
    assert!(!lb_ids.contains(&provider_lb.as_str()), "load balancer still there: {lbs}");

    let streamed = sse.await.expect("sse task");
    let types = types_for(&streamed, &pool_id);
    for t in [
        "kubernetes.substrate.provisioning",
        "kubernetes.substrate.ready",
        "kubernetes.substrate.deleted",
    ] {
        assert!(types.contains(t), "SSE lacks {t}: {types:?}");
    }
    let lb_types = types_for(&streamed, &lb_id);
    assert!(lb_types.contains("vps.load-balancer.ready"), "SSE lacks the lb: {lb_types:?}");

    if let Some(mut sub) = nats {
        let mut seen = BTreeSet::new();
        for _ in 0..10_000 {
            let Ok(Some(msg)) =
                tokio::time::timeout(std::time::Duration::from_secs(60), sub.next()).await
            else {
                break;
            };
            if !msg.subject.as_str().contains(&pool_id) {
                continue;
            }
            let v: Value = serde_json::from_slice(&msg.payload).expect("event json");
            let t = v["type"].as_str().unwrap_or_default().to_owned();
            seen.insert(t.clone());
            if t == "kubernetes.substrate.deleted" {
                break;
            }
        }
        assert!(seen.contains("kubernetes.substrate.ready"), "NATS: {seen:?}");
        assert!(seen.contains("kubernetes.substrate.deleted"), "NATS: {seen:?}");
    }
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_mode_on_sqlite() {
    create_mode(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_mode_on_postgres_with_nats() {
    create_mode(Backend::Postgres).await;
}

/// Every command of the banner's tour, run by bash exactly as printed (each retried a
/// bounded number of times while what it shows is still on its way), in order; then the
/// three pools it made (two on DigitalOcean, one on GKE) reach `ready`, and the load
/// balancer and the autopilot cluster too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_printed_tour_works_as_printed() {
    if !(testing::have("curl") && testing::have("kubectl") && testing::have("bash")) {
        return;
    }
    let scratch = Scratch::new("bc-e2e-tour");
    let options = testing::options(Backend::Sqlite, scratch.path()).await.expect("sqlite");
    let stack = DevStack::start(options).await.expect("dev stack");
    let made = testing::run_printed_tour(&stack, &stack.tour(), None).await;
    substrate_in(&stack, &made.pool, "ready").await;
    substrate_in(&stack, &made.adopted, "ready").await;
    wait_for(
        &stack,
        "lb ready",
        "loadBalancers.get",
        json!({"tenantId": DEV_TENANT, "loadBalancerId": made.lb}),
        |v| v["state"] == "ready",
    )
    .await;
    testing::gke_made_ready(&stack, &made).await;
    stack.stop().await;
}
