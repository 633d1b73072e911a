//! `agents.join` and `agents.heartbeat` (SPEC §9) against a simulated cluster: the join
//! token is looked up by its hash, the node must be listed by the pool's cluster with the
//! pool label right now, the pod's projected ServiceAccount token must be bound to that
//! node (the cluster's TokenReview), and the node credential is handed out once.

use axum::body::Body;
use axum::http::Request;
use bc_api::methods::examples as ex;
use bc_domain::model::JoinToken;
use bc_domain::name::LABEL_SUBSTRATE_POOL;
use bc_domain::ports::{UnitOfWork, Write};
use bc_domain::token::sha256_hex;
use bc_domain::{ClusterId, PoolId, ResourceState};
use bc_sim::testing::{create_cluster, node_pool, run_until_running};
use bc_store::testing as rows;
use serde_json::{Value, json};

use crate::common::repos::*;
use crate::common::{Harness, S, example, id, without};

bc_store::store_suite!(
    a_listed_node_joins_and_heartbeats,
    joining_again_keeps_the_node_and_replaces_its_credential,
    unlisted_nodes_and_bad_tokens_are_refused,
    node_credentials_end_with_their_substrate,
    nodes_no_longer_join_a_substrate_that_was_removed,
    a_burst_of_joins_lists_the_cluster_once_and_bad_tokens_never,
    joins_are_limited_per_join_token_and_per_client_address,
    a_pod_of_one_node_cannot_join_as_another,
    expired_or_other_audience_tokens_are_refused,
    joins_arriving_together_call_clusters_a_bounded_number_at_once,
);

/// A running simulated cluster behind the example pool's substrate, with `nodes` labelled
/// for the pool and one node pool of the tenant's own; returns the join token and the
/// names of the pool's nodes and of the tenant's.
pub(crate) async fn substrate_cluster(
    h: &Harness,
    nodes: i64,
) -> (String, Vec<String>, Vec<String>) {
    let pool: PoolId = id(ex::POOL);
    let cluster_id = create_cluster(
        &h.sim,
        "bc-substrate",
        vec![
            node_pool("bc-pool-cpu", nodes, &[(LABEL_SUBSTRATE_POOL, ex::POOL)]),
            node_pool("tenants-own", 1, &[]),
        ],
    );
    run_until_running(&h.sim, &h.clock, &cluster_id);
    let names = |label: Option<(&str, &str)>| {
        let now = bc_domain::ports::Clock::now(h.clock.as_ref());
        let listed = h.sim.state().model().cluster_nodes(&cluster_id, now).expect("cluster");
        let mut names: Vec<String> = listed
            .into_iter()
            .filter(|n| label.is_none_or(|(k, v)| n.labels.get(k).is_some_and(|x| x == v)))
            .map(|n| n.name)
            .collect();
        names.sort();
        names
    };
    let ours = names(Some((LABEL_SUBSTRATE_POOL, ex::POOL)));
    let theirs: Vec<String> = names(None).into_iter().filter(|n| !ours.contains(n)).collect();
    let token = format!("bcj_{}", rows::uniq());
    h.capture.secret(&token);
    let mut substrate = h.store.substrate_get_any(&pool).await.unwrap().unwrap();
    substrate.cluster_id = Some(id(ex::CLUSTER));
    let cluster: ClusterId = id(ex::CLUSTER);
    let uow = UnitOfWork::new()
        .write(Write::PutSubstrate(substrate))
        .write(Write::SetClusterStatus {
            cluster_id: cluster,
            provider_cluster_id: Some(cluster_id),
            version: None,
            status: rows::status(ResourceState::Ready),
        })
        .write(Write::InsertJoinToken(JoinToken {
            pool_id: pool,
            token_hash: sha256_hex(token.as_bytes()),
            created_at: rows::t(0),
            revoked_at: None,
        }));
    h.store.commit(uow).await.unwrap();
    (token, ours, theirs)
}

/// A join body whose ServiceAccount token proves nothing (for joins refused before the
/// cluster reviews it).
pub(crate) fn join_body(token: &str, node: &str) -> Value {
    join_body_with(token, node, "not-a-projected-token")
}

fn join_body_with(token: &str, node: &str, sa_token: &str) -> Value {
    json!({ "joinToken": token, "nodeName": node, "providerNodeId": "digitalocean://1",
        "bcdVersion": "0.1.0", "serviceAccountToken": sa_token })
}

/// The simulated cluster behind the example pool.
async fn provider_cluster(h: &Harness) -> String {
    let cluster = h.store.cluster_get_any(&id(ex::CLUSTER)).await.unwrap().unwrap();
    cluster.provider_cluster_id.expect("made at the provider")
}

/// The projected token (for `audience`, valid `seconds`) of a pod of ServiceAccount
/// `namespace/sa` on `node`, as the kubelet writes it; marked as a secret.
async fn pod_token(
    h: &Harness,
    (namespace, sa): (&str, &str),
    node: &str,
    audience: &str,
    seconds: i64,
) -> String {
    let cluster = provider_cluster(h).await;
    let token = bc_sim::kube::tokens::pod_token_on(
        h.sim.state(),
        &cluster,
        (namespace, sa),
        node,
        audience,
        seconds,
    )
    .expect("minted");
    h.capture.secret(&token);
    token
}

/// The token of the substrate's bcd pod on `node`, for the server's public URL.
async fn bcd_token(h: &Harness, node: &str) -> String {
    let ns = bc_domain::name::substrate_namespace(&id(ex::POOL));
    pod_token(h, (&ns, "bcd"), node, bc_api::DEFAULT_PUBLIC_URL, 3600).await
}

/// A join body of the bcd pod on `node`: its own projected token.
pub(crate) async fn proven_body(h: &Harness, token: &str, node: &str) -> Value {
    join_body_with(token, node, &bcd_token(h, node).await)
}

/// Joins `node` with `token` (200 expected) and returns the node credential, marked as a
/// secret no log or other answer may carry.
async fn join(h: &Harness, token: &str, node: &str) -> String {
    let joined = h.call("agents.join", None, &proven_body(h, token, node).await).await.ok();
    let credential = joined["nodeCredential"].as_str().unwrap().to_owned();
    h.capture.secret(&credential);
    credential
}

async fn a_listed_node_joins_and_heartbeats(s: S) {
    let h = Harness::on(s).await;
    let (token, ours, _) = substrate_cluster(&h, 2).await;
    assert_eq!(ours.len(), 2);
    let joined = h.call("agents.join", None, &proven_body(&h, &token, &ours[0]).await).await.ok();
    let credential = joined["nodeCredential"].as_str().unwrap().to_owned();
    h.capture.secret(&credential);
    assert_eq!(
        (joined["poolId"].as_str(), joined["heartbeatSeconds"].as_u64()),
        (Some(ex::POOL), Some(30))
    );
    let node = h.store.node_find_by_name(&id(ex::POOL), &ours[0]).await.unwrap().unwrap();
    assert_eq!(node.credential_hash, sha256_hex(credential.as_bytes()), "only the hash is stored");
    assert_eq!(joined["nodeId"], node.node_id.as_str());
    // The substrate reconciler recounts nodesJoined.
    assert!(h.work_due_now(bc_domain::ports::WorkKind::Substrates, ex::POOL).await);
    let beat = h.call("agents.heartbeat", Some(&credential), &json!({})).await.ok();
    assert_eq!(beat, json!({ "heartbeatSeconds": 30 }));
    let node = h.store.node_get(&node.node_id).await.unwrap().unwrap();
    assert_eq!(node.last_heartbeat_at, Some(h.now()));
}

async fn joining_again_keeps_the_node_and_replaces_its_credential(s: S) {
    let h = Harness::on(s).await;
    let (token, ours, _) = substrate_cluster(&h, 1).await;
    let first = h.call("agents.join", None, &proven_body(&h, &token, &ours[0]).await).await.ok();
    let again = h.call("agents.join", None, &proven_body(&h, &token, &ours[0]).await).await.ok();
    for a in [&first, &again] {
        h.capture.secret(a["nodeCredential"].as_str().unwrap());
    }
    assert_eq!(again["nodeId"], first["nodeId"]);
    assert_ne!(again["nodeCredential"], first["nodeCredential"]);
    let old = first["nodeCredential"].as_str().unwrap();
    assert_eq!(h.call("agents.heartbeat", Some(old), &json!({})).await.status, 401);
    let new = again["nodeCredential"].as_str().unwrap();
    h.call("agents.heartbeat", Some(new), &json!({})).await.ok();
}

async fn unlisted_nodes_and_bad_tokens_are_refused(s: S) {
    let h = Harness::on(s).await;
    // Before the cluster is recorded at the provider, no node can be checked.
    let early = format!("bcj_{}", rows::uniq());
    h.capture.secret(&early);
    let uow = UnitOfWork::new().write(Write::InsertJoinToken(JoinToken {
        pool_id: id(ex::POOL),
        token_hash: sha256_hex(early.as_bytes()),
        created_at: rows::t(0),
        revoked_at: None,
    }));
    h.store.commit(uow).await.unwrap();
    let m = h.call("agents.join", None, &join_body(&early, "n1")).await.err("FAILED_PRECONDITION");
    assert!(m.contains("not recorded yet"), "{m}");
    let (token, ours, theirs) = substrate_cluster(&h, 1).await;
    // A node of the tenant's own pool, and a node the cluster does not list.
    for name in [theirs[0].as_str(), "ghost-node"] {
        let m =
            h.call("agents.join", None, &join_body(&token, name)).await.err("FAILED_PRECONDITION");
        assert!(m.contains(LABEL_SUBSTRATE_POOL), "{m}");
    }
    // A revoked token, or one never issued, is the same 401.
    let revoke = Write::RevokeJoinTokens { pool_id: id(ex::POOL), at: h.now() };
    h.store.commit(UnitOfWork::new().write(revoke)).await.unwrap();
    let revoked = h.call("agents.join", None, &join_body(&token, &ours[0])).await;
    let unknown = h.call("agents.join", None, &join_body("bcj_unknown", &ours[0])).await;
    assert_eq!((revoked.status.as_u16(), revoked.text.clone()), (401, unknown.text.clone()));
}

/// Issue 20, item 4 (SPEC §9): once the pool is archived, its substrate's teardown has
/// begun: a join with the still-live join token is FAILED_PRECONDITION (before any call
/// to the cluster) and the heartbeat of a node that joined is UNAUTHENTICATED; when the
/// reconciler records the substrate `deleted`, the node rows are ended, not live for ever.
async fn node_credentials_end_with_their_substrate(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let (token, ours, _) = substrate_cluster(&h, 2).await;
    let credential = join(&h, &token, &ours[0]).await;
    h.call("agents.heartbeat", Some(&credential), &json!({})).await.ok();
    let pool = json!({ "tenantId": ex::TENANT, "poolId": ex::POOL });
    h.call("pools.archive", Some(&t), &pool).await.ok();
    let beat = h.call("agents.heartbeat", Some(&credential), &json!({})).await;
    assert_eq!((beat.status.as_u16(), beat.code()), (401, "UNAUTHENTICATED"), "{}", beat.text);
    let m =
        h.call("agents.join", None, &join_body(&token, &ours[1])).await.err("FAILED_PRECONDITION");
    assert!(m.contains("torn down"), "{m}");
    // The reconciler ends the teardown: the node's row is ended with the substrate.
    let mut substrate = h.store.substrate_get_any(&id(ex::POOL)).await.unwrap().unwrap();
    substrate.state = ResourceState::Deleted;
    h.store.commit(UnitOfWork::new().write(Write::PutSubstrate(substrate))).await.unwrap();
    let hash = sha256_hex(credential.as_bytes());
    assert_eq!(h.store.node_find_by_credential_hash(&hash).await.unwrap(), None);
}

/// Issue 20, item 4: a policy without its substrate starts the teardown as archiving does.
async fn nodes_no_longer_join_a_substrate_that_was_removed(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let (token, ours, _) = substrate_cluster(&h, 1).await;
    let credential = join(&h, &token, &ours[0]).await;
    let mut update = without(&example("pools.update"), "expectedGeneration");
    update["policy"].as_object_mut().unwrap().remove("substrate");
    h.call("pools.update", Some(&t), &update).await.ok();
    let m =
        h.call("agents.join", None, &join_body(&token, &ours[0])).await.err("FAILED_PRECONDITION");
    assert!(m.contains("torn down"), "{m}");
    let beat = h.call("agents.heartbeat", Some(&credential), &json!({})).await;
    assert_eq!(beat.status, 401, "{}", beat.text);
}

/// The cluster's count of Node listings (over either of the simulator's faces).
async fn node_listings(h: &Harness) -> u64 {
    let cluster = h.store.cluster_get_any(&id(ex::CLUSTER)).await.unwrap().unwrap();
    let provider_id = cluster.provider_cluster_id.expect("made at the provider");
    h.sim.state().kube.request_count(&provider_id, "list nodes")
}

/// Issue 20, item 3 (SPEC §9): a good join token lists the cluster's Nodes at most once
/// per few seconds per substrate, however many join; a bad one costs a hash and no call.
async fn a_burst_of_joins_lists_the_cluster_once_and_bad_tokens_never(s: S) {
    let h = Harness::on(s).await;
    let (token, ours, theirs) = substrate_cluster(&h, 3).await;
    for n in 0..20 {
        let bad = format!("bcj_guess_{n}");
        h.call("agents.join", None, &join_body(&bad, &ours[0])).await.err("UNAUTHENTICATED");
    }
    assert_eq!(node_listings(&h).await, 0, "a bad token makes no call to the cluster");
    for name in ours.iter().chain(ours.iter()) {
        join(&h, &token, name).await;
    }
    h.call("agents.join", None, &join_body(&token, &theirs[0])).await.err("FAILED_PRECONDITION");
    assert_eq!(node_listings(&h).await, 1, "7 joins within the listing's seconds, one listing");
}

/// A join request from `peer`, as the server sees it on a connection from there.
fn join_from(peer: &str, token: &str, node: &str) -> Request<Body> {
    let mut req = Request::post("/api/compute/agents/join")
        .header("content-type", "application/json")
        .body(Body::from(join_body(token, node).to_string()))
        .unwrap();
    let addr: std::net::SocketAddr = peer.parse().unwrap();
    req.extensions_mut().insert(axum::extract::ConnectInfo(addr));
    req
}

/// Issue 20, item 3 (SPEC §9): `agents.join` is limited per join token and per client
/// address, `RESOURCE_EXHAUSTED` with `Retry-After`; each key has its own budget.
async fn joins_are_limited_per_join_token_and_per_client_address(s: S) {
    let limit = |burst| bc_api::ratelimit::RateLimit {
        burst: std::num::NonZeroU32::new(burst).unwrap(),
        replenish_every: std::time::Duration::from_secs(3600),
    };
    let join_rate_limit =
        Some(bc_api::ratelimit::JoinRateLimit { per_token: limit(2), per_address: limit(3) });
    let settings = bc_api::Settings { join_rate_limit, ..crate::common::test_settings() };
    let h = Harness::with(s, crate::common::sim_config(), |api| api.settings(settings)).await;
    let (token, ours, _) = substrate_cluster(&h, 1).await;
    for _ in 0..2 {
        join(&h, &token, &ours[0]).await;
    }
    let third = h.call("agents.join", None, &join_body(&token, &ours[0])).await;
    assert!(third.err("RESOURCE_EXHAUSTED").contains("join token"), "{}", third.text);
    assert!(third.headers.contains_key("retry-after"), "{:?}", third.headers);
    // Another token has its own budget (this one is unknown: 401, counted apart).
    h.call("agents.join", None, &join_body("bcj_other", &ours[0])).await.err("UNAUTHENTICATED");
    // One address guessing a new token each time is stopped by the address's limit.
    for n in 0..3 {
        let a = h.send(join_from("203.0.113.7:40000", &format!("bcj_guess_{n}"), "n")).await;
        a.err("UNAUTHENTICATED");
    }
    let fourth = h.send(join_from("203.0.113.7:40001", "bcj_guess_x", "n")).await;
    assert!(fourth.err("RESOURCE_EXHAUSTED").contains("address"), "{}", fourth.text);
    assert!(fourth.headers.contains_key("retry-after"));
    h.send(join_from("198.51.100.2:40000", "bcj_guess_y", "n")).await.err("UNAUTHENTICATED");
}

/// Issue 29, item 4 (SPEC §9): the join token says only "a pod of this substrate"; the
/// pod's projected token names its node. A bcd pod of node A claiming node B is refused
/// and B's credential keeps working; so is a pod of another ServiceAccount on B, and a
/// bcd of another namespace.
async fn a_pod_of_one_node_cannot_join_as_another(s: S) {
    let h = Harness::on(s).await;
    let (token, ours, _) = substrate_cluster(&h, 2).await;
    let (a, b) = (&ours[0], &ours[1]);
    let b_credential = join(&h, &token, b).await;
    let b_node = h.store.node_find_by_name(&id(ex::POOL), b).await.unwrap().unwrap();

    let a_pod = bcd_token(&h, a).await;
    let taken = h.call("agents.join", None, &join_body_with(&token, b, &a_pod)).await;
    let m = taken.err("PERMISSION_DENIED");
    assert!(m.contains(&format!("node {a}, not on node {b}")), "{m}");
    assert!(!taken.text.contains(&a_pod), "the answer quotes no token");
    let ns = bc_domain::name::substrate_namespace(&id(ex::POOL));
    let audience = bc_api::DEFAULT_PUBLIC_URL;
    let other_sa = pod_token(&h, (&ns, "default"), b, audience, 3600).await;
    let other_ns = pod_token(&h, ("tenant-apps", "bcd"), b, audience, 3600).await;
    for sa_token in [other_sa, other_ns, "not-a-projected-token".to_owned()] {
        let r = h.call("agents.join", None, &join_body_with(&token, b, &sa_token)).await;
        r.err("UNAUTHENTICATED");
    }
    // B's credential and row are as B's own join left them.
    h.call("agents.heartbeat", Some(&b_credential), &json!({})).await.ok();
    let after = h.store.node_find_by_name(&id(ex::POOL), b).await.unwrap().unwrap();
    assert_eq!(after.credential_hash, b_node.credential_hash);
    // A joins as itself.
    join(&h, &token, a).await;
}

/// Issue 29, item 4: a token for another audience (the cluster's own API, say) or past
/// its expiry does not prove a node.
async fn expired_or_other_audience_tokens_are_refused(s: S) {
    let h = Harness::on(s).await;
    let (token, ours, _) = substrate_cluster(&h, 1).await;
    let ns = bc_domain::name::substrate_namespace(&id(ex::POOL));
    let node = &ours[0];
    let cluster_audience = bc_sim::kube::tokens::ISSUER;
    let elsewhere = pod_token(&h, (&ns, "bcd"), node, cluster_audience, 3600).await;
    let m = h
        .call("agents.join", None, &join_body_with(&token, node, &elsewhere))
        .await
        .err("UNAUTHENTICATED");
    assert!(m.contains("audiences"), "{m}");
    let short = pod_token(&h, (&ns, "bcd"), node, bc_api::DEFAULT_PUBLIC_URL, 600).await;
    bc_sim::testing::step(&h.clock, 601);
    let m = h
        .call("agents.join", None, &join_body_with(&token, node, &short))
        .await
        .err("UNAUTHENTICATED");
    assert!(m.contains("expired"), "{m}");
    assert_eq!(h.store.node_find_by_name(&id(ex::POOL), node).await.unwrap(), None);
}

/// The clusters' port, counting the connections being made at once (each held a while,
/// so that calls arriving together overlap).
#[derive(Default)]
struct CountingClusters {
    inner: std::sync::OnceLock<std::sync::Arc<dyn bc_domain::ports::ClusterApi>>,
    now: std::sync::atomic::AtomicUsize,
    most: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl bc_domain::ports::ClusterApi for CountingClusters {
    async fn connect(
        &self,
        kubeconfig: &bc_domain::model::SecretString,
    ) -> Result<std::sync::Arc<dyn bc_domain::ports::ClusterClient>, bc_domain::ports::ClusterError>
    {
        use std::sync::atomic::Ordering::SeqCst;
        let now = self.now.fetch_add(1, SeqCst) + 1;
        self.most.fetch_max(now, SeqCst);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let client = self.inner.get().expect("wrapped").connect(kubeconfig).await;
        self.now.fetch_sub(1, SeqCst);
        client
    }
}

/// Issue 31, item 3: the joins of a whole fleet's agents arriving together call the
/// clusters' APIs at most `CLUSTER_CALLS_AT_ONCE` at a time (each builds a client of
/// its cluster: built all at once, they took `bc-api` past 200 MiB in the memory
/// benchmark), and every one of them still joins.
async fn joins_arriving_together_call_clusters_a_bounded_number_at_once(s: S) {
    let counting = std::sync::Arc::new(CountingClusters::default());
    let wrap = counting.clone();
    let h = Harness::with_clusters(s, move |inner| {
        let _ = wrap.inner.set(inner);
        wrap
    })
    .await;
    let at_once = bc_api::methods::agents::CLUSTER_CALLS_AT_ONCE;
    let (token, ours, _) = substrate_cluster(&h, (3 * at_once) as i64).await;
    let mut bodies = Vec::new();
    for name in &ours {
        bodies.push(proven_body(&h, &token, name).await);
    }
    let joins = bodies.iter().map(|b| h.call("agents.join", None, b));
    for answer in futures::future::join_all(joins).await {
        let credential = answer.ok()["nodeCredential"].as_str().unwrap().to_owned();
        h.capture.secret(&credential);
    }
    let most = counting.most.load(std::sync::atomic::Ordering::SeqCst);
    assert!(most <= at_once, "{most} connections to clusters made at once (at most {at_once})");
}
