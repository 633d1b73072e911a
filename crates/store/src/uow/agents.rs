//! Writes of joined nodes, join tokens and API tokens.
//!
//! Invariant: a node is one row per `(pool, node name)` whose `node_id` and `joined_at`
//! never change after the first join (SPEC §9: joining again is idempotent; only the
//! credential is replaced); a node ended because its cluster stopped listing it stays
//! ended unless it joins again; token hashes are unique; revocations keep the first time.

use bc_domain::model::Node;
use bc_domain::ports::Write;

use super::{Tx, Txn, misrouted, must_touch};
use crate::error::conflict;
use crate::sql::{json, os, ots, s, ts};
use crate::store::{SqlStore, exec};

pub(super) async fn apply(store: &SqlStore, txn: &Txn, w: &Write) -> Tx<()> {
    match w {
        Write::PutNode(n) => put_node(store, txn, n).await,
        Write::Heartbeat { node_id, at } => {
            let q = store.st(
                "UPDATE nodes SET last_heartbeat_at = ? WHERE node_id = ?",
                vec![ts(*at), s(node_id)],
            );
            must_touch(exec(txn, q).await?, || format!("node {node_id}"))
        }
        Write::EndNode { node_id, credential_hash, at } => {
            let q = store.st(
                "UPDATE nodes SET ended_at = ? \
                 WHERE node_id = ? AND credential_hash = ? AND ended_at IS NULL",
                vec![ts(*at), s(node_id), s(credential_hash)],
            );
            exec(txn, q).await?;
            Ok(())
        }
        Write::InsertJoinToken(t) => {
            let q = store.st(
                "INSERT INTO join_tokens (token_hash, pool_id, created_at, revoked_at) \
                 VALUES (?, ?, ?, ?)",
                vec![s(&t.token_hash), s(&t.pool_id), ts(t.created_at), ots(t.revoked_at)],
            );
            let parent = format!("pool {}", t.pool_id);
            exec(txn, q).await.map_err(conflict(|| "join token".into(), &parent))?;
            Ok(())
        }
        Write::RevokeJoinTokens { pool_id, at } => {
            let q = store.st(
                "UPDATE join_tokens SET revoked_at = ? WHERE pool_id = ? AND revoked_at IS NULL",
                vec![ts(*at), s(pool_id)],
            );
            exec(txn, q).await?;
            Ok(())
        }
        Write::InsertApiToken(t) => {
            let q = store.st(
                "INSERT INTO api_tokens (token_id, token_hash, grants, created_at, revoked_at) \
                 VALUES (?, ?, ?, ?, ?)",
                vec![
                    s(&t.token_id),
                    s(&t.token_hash),
                    json(&t.grants)?,
                    ts(t.created_at),
                    ots(t.revoked_at),
                ],
            );
            let what = || format!("api token {}", t.token_id);
            exec(txn, q).await.map_err(conflict(what, "api token"))?;
            Ok(())
        }
        Write::RevokeApiToken { token_id, at } => {
            let q = store.st(
                "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE token_id = ?",
                vec![ts(*at), s(token_id)],
            );
            must_touch(exec(txn, q).await?, || format!("api token {token_id}"))
        }
        _ => Err(misrouted(w)),
    }
}

/// A first join inserts; a join again under the same name keeps `node_id`, `joined_at`
/// and the last heartbeat, and takes the new credential, provider node id and version —
/// and is live again if its substrate's teardown had ended it (a new substrate's join).
async fn put_node(store: &SqlStore, txn: &Txn, n: &Node) -> Tx<()> {
    let q = store.st(
        "INSERT INTO nodes (node_id, pool_id, node_name, provider_node_id, bcd_version, \
         credential_hash, joined_at, last_heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) \
         ON CONFLICT (pool_id, node_name) DO UPDATE SET \
         provider_node_id = excluded.provider_node_id, bcd_version = excluded.bcd_version, \
         credential_hash = excluded.credential_hash, ended_at = NULL",
        vec![
            s(&n.node_id),
            s(&n.pool_id),
            s(&n.node_name),
            os(n.provider_node_id.as_ref()),
            s(&n.bcd_version),
            s(&n.credential_hash),
            ts(n.joined_at),
            ots(n.last_heartbeat_at),
        ],
    );
    let parent = format!("pool {}", n.pool_id);
    exec(txn, q).await.map_err(conflict(|| format!("node {}", n.node_id), &parent))?;
    Ok(())
}
