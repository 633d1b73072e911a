//! Writes of substrates: the substrate reconciler records the whole observed row.
//!
//! Invariants: a substrate belongs to an existing pool (foreign key), one per pool; the
//! reconciler holding the pool's work lease fences the write (`Fence::Work`), so a
//! replica whose lease was taken over cannot overwrite the new holder's row; a row
//! written `deleted` ends its pool's nodes in the same transaction (SPEC §9: node
//! credentials end with their substrate), so none stays live for ever.

use bc_domain::ResourceState;
use bc_domain::model::Substrate;
use bc_domain::ports::Write;
use sea_orm::{ConnectionTrait as _, Value};

use super::{Tx, Txn, misrouted, opt_json};
use crate::error::conflict;
use crate::sql::{enum_text, opt_u64v, os, s, ts, u64v};
use crate::store::{SqlStore, exec};

pub(super) async fn apply(store: &SqlStore, txn: &Txn, w: &Write) -> Tx<()> {
    let Write::PutSubstrate(x) = w else { return Err(misrouted(w)) };
    if x.state != bc_domain::ResourceState::Deleted && names_account_anew(store, txn, x).await? {
        super::accounts::require_live(store, txn, &x.provider_account_id).await?;
    }
    let q = store.st(
        "INSERT INTO substrates (pool_id, tenant_id, provider_account_id, mode, \
         cluster_id, state, message, nodes_listed, nodes_joined, waiting_to_join, \
         upgrade, observed_generation, refused_generation, created_at, updated_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
         ON CONFLICT (pool_id) DO UPDATE SET tenant_id = excluded.tenant_id, \
         provider_account_id = excluded.provider_account_id, mode = excluded.mode, \
         cluster_id = excluded.cluster_id, state = excluded.state, \
         message = excluded.message, nodes_listed = excluded.nodes_listed, \
         nodes_joined = excluded.nodes_joined, \
         waiting_to_join = excluded.waiting_to_join, upgrade = excluded.upgrade, \
         observed_generation = excluded.observed_generation, \
         refused_generation = excluded.refused_generation, \
         updated_at = excluded.updated_at",
        vec![
            s(&x.pool_id),
            s(&x.tenant_id),
            s(&x.provider_account_id),
            s(enum_text(&x.mode)?),
            os(x.cluster_id.as_ref()),
            s(x.state.as_str()),
            os(x.message.as_ref()),
            Value::from(i64::from(x.nodes_listed)),
            Value::from(i64::from(x.nodes_joined)),
            opt_json(&x.waiting_to_join)?,
            opt_json(&x.upgrade)?,
            u64v(x.observed_generation)?,
            opt_u64v(x.refused_generation)?,
            ts(x.created_at),
            ts(x.updated_at),
        ],
    );
    let parent = format!("pool {}", x.pool_id);
    exec(txn, q).await.map_err(conflict(|| "substrate".into(), &parent))?;
    if x.state == ResourceState::Deleted {
        let end = store.st(
            "UPDATE nodes SET ended_at = ? WHERE pool_id = ? AND ended_at IS NULL",
            vec![ts(x.updated_at), s(&x.pool_id)],
        );
        exec(txn, end).await?;
    }
    Ok(())
}

/// Whether writing `x` puts a substrate on its account for the first time (a new row, or
/// one moved from another account): only that must find the account live. A status
/// written on a row already on it must go through, so a reconciler can record that the
/// account was deleted under it, and tear down.
async fn names_account_anew(store: &SqlStore, txn: &Txn, x: &Substrate) -> Tx<bool> {
    let q = store.st(
        "SELECT 1 AS present FROM substrates WHERE pool_id = ? AND provider_account_id = ?",
        vec![s(&x.pool_id), s(&x.provider_account_id)],
    );
    Ok(txn.query_one_raw(q).await?.is_none())
}
