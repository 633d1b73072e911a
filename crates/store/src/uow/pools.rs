//! Writes of pools and their quota rows.
//!
//! Invariant: a tenant's active pool names are unique (`active_name`), a pool's desired
//! state changes only under generation CAS, and a quota unit is booked only while
//! `used < limit` — the refusal is the `rules::quota` error, the one rule that says why.

use bc_domain::PoolId;
use bc_domain::StoreError;
use bc_domain::model::{Pool, PoolState, QuotaResource};
use bc_domain::ports::Write;
use bc_domain::rules::quota;
use sea_orm::{ConnectionTrait, Value};

use super::{Tx, Txn, misrouted};
use crate::error::{TxError, conflict};
use crate::sql::{enum_text, json, os, ots, s, ts, u64v};
use crate::store::{SqlStore, exec};

pub(super) async fn apply(store: &SqlStore, txn: &Txn, w: &Write) -> Tx<()> {
    match w {
        Write::InsertPool(p) => insert(store, txn, p).await,
        Write::UpdatePool { pool, expected_generation } => {
            update(store, txn, pool, *expected_generation).await
        }
        Write::SetQuota { pool_id, resource, limit } => {
            let q = store.st(
                "INSERT INTO quotas (pool_id, resource, quota_limit, used) VALUES (?, ?, ?, 0) \
                 ON CONFLICT (pool_id, resource) DO UPDATE SET quota_limit = excluded.quota_limit",
                vec![s(pool_id), s(resource.as_str()), Value::from(i64::from(*limit))],
            );
            let parent = format!("pool {pool_id}");
            exec(txn, q).await.map_err(conflict(|| "quota".into(), &parent))?;
            Ok(())
        }
        Write::BookQuota { pool_id, resource } => book(store, txn, pool_id, *resource).await,
        _ => Err(misrouted(w)),
    }
}

async fn insert(store: &SqlStore, txn: &Txn, p: &Pool) -> Tx<()> {
    let active = (p.state == PoolState::Active).then(|| p.name.to_string());
    let q = store.st(
        "INSERT INTO pools (pool_id, tenant_id, name, active_name, policy, state, \
         generation, created_at, updated_at, archived_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        vec![
            s(&p.pool_id),
            s(&p.tenant_id),
            s(&p.name),
            os(active),
            json(&p.policy)?,
            s(enum_text(&p.state)?),
            u64v(p.generation)?,
            ts(p.created_at),
            ts(p.updated_at),
            ots(p.archived_at),
        ],
    );
    let what = || format!("pool {} of tenant {}", p.name, p.tenant_id);
    exec(txn, q).await.map_err(conflict(what, "pool"))?;
    Ok(())
}

async fn update(store: &SqlStore, txn: &Txn, p: &Pool, expected_generation: u64) -> Tx<()> {
    let q = store.st(
        "UPDATE pools SET active_name = CASE WHEN ? THEN name ELSE NULL END, \
         policy = ?, state = ?, generation = ?, updated_at = ?, archived_at = ? \
         WHERE pool_id = ? AND generation = ?",
        vec![
            Value::from(p.state == PoolState::Active),
            json(&p.policy)?,
            s(enum_text(&p.state)?),
            u64v(p.generation)?,
            ts(p.updated_at),
            ots(p.archived_at),
            s(&p.pool_id),
            u64v(expected_generation)?,
        ],
    );
    let what = || format!("pool {} of tenant {}", p.name, p.tenant_id);
    let n = exec(txn, q).await.map_err(conflict(what, "pool"))?;
    store.cas_outcome(txn, n, "pools", "pool_id", p.pool_id.as_str(), "pool").await
}

/// `used = used + 1 WHERE used < limit`; when no row changed, the row read in the same
/// transaction goes through `rules::quota::book` for the reason.
async fn book(store: &SqlStore, txn: &Txn, pool_id: &PoolId, resource: QuotaResource) -> Tx<()> {
    let q = store.st(
        "UPDATE quotas SET used = used + 1 WHERE pool_id = ? AND resource = ? AND used < quota_limit",
        vec![s(pool_id), s(resource.as_str())],
    );
    if exec(txn, q).await? > 0 {
        return Ok(());
    }
    let read = store.st(
        &format!("SELECT {} FROM quotas WHERE pool_id = ? AND resource = ?", crate::rows::QUOTA),
        vec![s(pool_id), s(resource.as_str())],
    );
    let row = txn.query_one_raw(read).await?.as_ref().map(crate::rows::quota).transpose()?;
    match quota::book(row) {
        Err(e) => Err(StoreError::QuotaExhausted(e).into()),
        // A unit was released between the update and the read: run the whole unit of
        // work again rather than refuse a booking the rule allows.
        Ok(_) => Err(TxError::Retry(format!("quota of pool {pool_id} changed while booking"))),
    }
}
