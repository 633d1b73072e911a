//! `agents.*` (SPEC §9): bcd joins its pool with the join token and heartbeats with the
//! node credential it got back. The wire types are bc-domain's ([`bc_domain::agent`]),
//! shared with bcd, the simulator's bcd and the substrate reconciler.
//!
//! Invariants: a join token is looked up by its hash only, and a node joins only when
//! its pool's cluster lists it with the pool label (read live through the cluster's API,
//! not from a record, within the last [`NODE_LISTING_TTL`]); the node credential exists
//! in plaintext only in the join answer — its hash is what is stored; once the teardown
//! of a pool's substrate begins, none of its nodes joins or heartbeats (SPEC §9); joins
//! are limited per valid join token (here, after the lookup: a bad token costs a hash
//! and an indexed read) and, on failure, per client address (in the dispatch, believing
//! `X-Forwarded-For` from trusted proxies only), and a substrate's
//! cluster is asked for its Nodes at most once per [`NODE_LISTING_TTL`], however many
//! join; a node joins only as the node its pod's projected ServiceAccount token is bound
//! to, by the cluster's TokenReview of that token for the server's public URL, from the
//! substrate's own `bcd` ServiceAccount (SPEC §9) — so the join token alone names no
//! node.

use std::time::{Duration, Instant};

use bc_api_types::agents as api;
pub use bc_api_types::agents::*;
use bc_domain::PoolId;
use bc_domain::agent::{
    HeartbeatRequest, HeartbeatResponse, JoinRequest, JoinResponse, new_node_credential,
};
use bc_domain::model::ProviderAccount;
use bc_domain::model::{JoinToken, Node, Substrate};
use bc_domain::name::{BCD_NAME, LABEL_SUBSTRATE_POOL, substrate_namespace};
use bc_domain::ports::{ClusterClient, ClusterError, ClusterSession, UnitOfWork, WorkKind, Write};
use bc_domain::rules::join::teardown_begun;
use bc_domain::rules::node_proof::{NodeProofRefusal, proven_node};
use bc_domain::token::sha256_hex;
use serde_json::{Value, json};

use crate::access::Target;
use crate::auth::{Caller, agent_secret_lookup_hash, refused};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::registry::{Call, Method, MethodInput};

impl MethodInput for JoinRequest {
    fn target(&self) -> Target {
        Target::Agent
    }
    fn example() -> Value {
        json!({
            "joinToken": "the-join-token-from-the-secret",
            "nodeName": "pool-gpu-1",
            "providerNodeId": "digitalocean://3164444",
            "bcdVersion": "0.1.0",
            "serviceAccountToken": "the-pods-projected-serviceaccount-token"
        })
    }
}

impl MethodInput for HeartbeatRequest {
    fn target(&self) -> Target {
        Target::Agent
    }
    fn example() -> Value {
        json!({})
    }
}

pub(crate) fn methods() -> Vec<Method> {
    vec![Method::declare(api::Join, join), Method::declare(api::Heartbeat, heartbeat)]
}

/// How long a substrate's Node listing answers every join (SPEC §9: a good join token
/// lists the cluster's Nodes at most once per few seconds per substrate). A Node the
/// cluster added since is found by bcd's next attempt.
pub const NODE_LISTING_TTL: Duration = Duration::from_secs(5);

/// How many of the joins' calls to clusters' APIs (a Node listing, a TokenReview) run at
/// once; the rest wait their turn. Each builds a client of its cluster (its kubeconfig
/// from the provider, a TLS configuration, a connection): when the whole fleet's agents
/// join together — 3,000 nodes within seconds once 1,000 substrates converge — building
/// them all at once took `bc-api` from 121 MiB to 158–241 MiB at its peak (the memory
/// benchmark, issue 31, item 3). A waiting join holds only its request.
pub const CLUSTER_CALLS_AT_ONCE: usize = 16;

/// The one answer for a join token that does not open a pool (as for API tokens: no
/// failure tells another apart).
fn bad_join_token() -> ApiError {
    ApiError::unauthenticated("the join token is not valid: read it again from the join Secret")
}

/// A join that cannot be decided yet, because the pool's cluster is not there yet.
fn not_ready(pool: &JoinToken, what: &str) -> ApiError {
    ApiError::failed_precondition(format!("pool {}: {what}; bcd retries until it is", pool.pool_id))
}

/// Whether the teardown of the pool's substrate began (or the pool is gone): from then
/// on its nodes neither join nor heartbeat (SPEC §9). Returns the substrate row read.
async fn torn_down(ctx: &Ctx, pool_id: &PoolId) -> Result<(bool, Option<Substrate>), ApiError> {
    let pool = ctx.store.pool_get_any(pool_id).await?;
    let substrate = ctx.store.substrate_get_any(pool_id).await?;
    let ended = pool.is_none_or(|p| teardown_begun(&p, substrate.as_ref()));
    Ok((ended, substrate))
}

/// The pool's cluster as the provider knows it: its account and provider cluster id.
async fn pool_cluster(
    ctx: &Ctx,
    token: &JoinToken,
    substrate: Option<Substrate>,
) -> Result<(ProviderAccount, String), ApiError> {
    let cluster_id = substrate
        .and_then(|s| s.cluster_id)
        .ok_or_else(|| not_ready(token, "its cluster is not recorded yet"))?;
    let cluster = ctx
        .store
        .cluster_get_any(&cluster_id)
        .await?
        .ok_or_else(|| not_ready(token, "its cluster is not recorded yet"))?;
    let provider_cluster_id = cluster
        .provider_cluster_id
        .clone()
        .ok_or_else(|| not_ready(token, "its cluster is not made at the provider yet"))?;
    let account = ctx
        .store
        .account_get_any(&cluster.provider_account_id)
        .await?
        .filter(|a| a.deleted_at.is_none())
        .ok_or_else(|| not_ready(token, "its provider account is gone"))?;
    Ok((account, provider_cluster_id))
}

/// A session with the pool's cluster, with the credentials its provider hands out.
async fn session(
    ctx: &Ctx,
    account: &ProviderAccount,
    provider_cluster_id: &str,
    what: &str,
) -> Result<ClusterSession, ApiError> {
    let provider =
        ctx.providers.provider_for(account).await.map_err(|e| ApiError::provider(what, &e))?;
    Ok(ClusterSession::new(provider, ctx.clusters.clone(), provider_cluster_id))
}

/// A turn to call a cluster's API (at most [`CLUSTER_CALLS_AT_ONCE`] at once), held
/// until dropped.
async fn cluster_turn(ctx: &Ctx) -> Result<tokio::sync::SemaphorePermit<'_>, ApiError> {
    // The semaphore is never closed; should it be, the join is refused as unavailable.
    ctx.cluster_calls
        .acquire()
        .await
        .map_err(|_| ApiError::unavailable("the server is shutting down; try again"))
}

/// A failed call to the pool's cluster, as the join answers it.
fn cluster_failed(what: &str, e: ClusterError) -> ApiError {
    match e {
        ClusterError::Provider(p) => ApiError::provider(what, &p),
        other => {
            tracing::info!(error = %other, "{what}");
            ApiError::unavailable(format!("{what}: the cluster's API did not answer; try again"))
        }
    }
}

/// The names of the Nodes the pool's cluster lists with the pool's label, read through
/// the cluster's API with the credentials its provider hands out — at most once per
/// [`NODE_LISTING_TTL`] for a substrate (the answer, or the failure, is shared meanwhile).
async fn listed_nodes(
    ctx: &Ctx,
    pool_id: &PoolId,
    account: ProviderAccount,
    provider_cluster_id: String,
) -> Result<Vec<String>, ApiError> {
    // Every join of the substrate within a few seconds reads the one listing: a burst of
    // joins (a DaemonSet starting) makes one call to the cluster, not one each.
    let key = format!("{pool_id}/{provider_cluster_id}");
    let list = || async move {
        let what = "listing the cluster's nodes";
        let _turn = cluster_turn(ctx).await?;
        let session = session(ctx, &account, &provider_cluster_id, what).await?;
        let selector = format!("{LABEL_SUBSTRATE_POOL}={pool_id}");
        let nodes = session.list_nodes(&selector).await.map_err(|e| cluster_failed(what, e))?;
        Ok(nodes.into_iter().map(|n| n.name).collect())
    };
    ctx.node_listings.get_or(&key, Instant::now(), list).await
}

/// Whether the pod's projected ServiceAccount token proves `input.node_name`: the
/// cluster's TokenReview for the server's public URL, of the substrate's `bcd`
/// ServiceAccount, bound to that node (SPEC §9).
async fn prove_node(
    ctx: &Ctx,
    input: &JoinRequest,
    pool_id: &PoolId,
    account: &ProviderAccount,
    provider_cluster_id: &str,
) -> Result<(), ApiError> {
    let what = "reviewing the pod's ServiceAccount token";
    let _turn = cluster_turn(ctx).await?;
    let session = session(ctx, account, provider_cluster_id, what).await?;
    let audience = ctx.settings.public_url.clone();
    let review = session
        .review_token(&input.service_account_token, std::slice::from_ref(&audience))
        .await
        .map_err(|e| cluster_failed(what, e))?;
    let namespace = substrate_namespace(pool_id);
    proven_node(&review, &audience, &namespace, BCD_NAME, &input.node_name).map(drop).map_err(
        |refusal| {
            // The cluster's words are its own; they never carry the token, but make sure.
            let message =
                refusal.to_string().replace(input.service_account_token.expose(), "[token]");
            match refusal {
                NodeProofRefusal::OtherNode { .. } => ApiError::permission_denied(message),
                _ => ApiError::unauthenticated(message),
            }
        },
    )
}

async fn join(ctx: Ctx, call: Call<JoinRequest>) -> Result<JoinResponse, ApiError> {
    let input = &call.input;
    let hash = agent_secret_lookup_hash(input.join_token.expose()).ok_or_else(bad_join_token)?;
    let token = ctx.store.join_token_find(&hash).await?.ok_or_else(bad_join_token)?;
    // Valid tokens only: a guess is its address's failure (in the dispatch), and keys
    // of guesses would only fill the limiter.
    ctx.limit_join_token(&hash)?;
    let (ended, substrate) = torn_down(&ctx, &token.pool_id).await?;
    if ended {
        return Err(ApiError::failed_precondition(format!(
            "the substrate of pool {} is being torn down (the pool is archived or its policy has no substrate): its nodes no longer join",
            token.pool_id
        )));
    }
    let (account, provider_cluster_id) = pool_cluster(&ctx, &token, substrate).await?;
    let listed =
        listed_nodes(&ctx, &token.pool_id, account.clone(), provider_cluster_id.clone()).await?;
    if !listed.contains(&input.node_name) {
        return Err(ApiError::failed_precondition(format!(
            "node {} is not listed by the cluster of pool {} with the label {LABEL_SUBSTRATE_POOL}={}",
            input.node_name, token.pool_id, token.pool_id
        )));
    }
    prove_node(&ctx, input, &token.pool_id, &account, &provider_cluster_id).await?;
    let credential = new_node_credential(rand::random());
    let now = ctx.now();
    let node = Node {
        node_id: ctx.new_id(),
        pool_id: token.pool_id.clone(),
        node_name: input.node_name.clone(),
        provider_node_id: input.provider_node_id.clone(),
        bcd_version: input.bcd_version.clone(),
        credential_hash: sha256_hex(credential.expose().as_bytes()),
        joined_at: now,
        last_heartbeat_at: None,
    };
    // A join changes the substrate's nodesJoined: its reconciler recounts.
    let uow = UnitOfWork::new().write(Write::PutNode(node)).enqueue(
        WorkKind::Substrates,
        token.pool_id.as_str(),
        now,
    );
    ctx.commit(uow).await?;
    // Joining again keeps the first join's id (the store keeps it by pool and name).
    let stored = ctx.store.node_find_by_name(&token.pool_id, &input.node_name).await?;
    let node_id = stored
        .map(|n| n.node_id)
        .ok_or_else(|| ApiError::internal(format!("node {} vanished", input.node_name)))?;
    Ok(JoinResponse {
        node_id,
        pool_id: token.pool_id,
        node_credential: credential,
        heartbeat_seconds: ctx.settings.heartbeat_seconds,
    })
}

async fn heartbeat(ctx: Ctx, call: Call<HeartbeatRequest>) -> Result<HeartbeatResponse, ApiError> {
    let Caller::Node(node) = &call.caller else {
        return Err(ApiError::internal("agents.heartbeat without a node caller"));
    };
    // A credential ends with its substrate: once the teardown began it is refused like
    // any other that is no longer valid.
    if torn_down(&ctx, &node.pool_id).await?.0 {
        return Err(refused());
    }
    let write = Write::Heartbeat { node_id: node.node_id.clone(), at: ctx.now() };
    ctx.commit(UnitOfWork::new().write(write)).await?;
    Ok(HeartbeatResponse { heartbeat_seconds: ctx.settings.heartbeat_seconds })
}
