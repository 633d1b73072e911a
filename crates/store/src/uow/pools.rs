//! Writes of pools, and the routing of their quota rows' writes to `quotas`.
//!
//! Invariant: a tenant's active pool names are unique (`active_name`), and a pool's
//! desired state changes only under generation CAS.

use bc_domain::model::{Pool, PoolState};
use bc_domain::ports::Write;
use sea_orm::Value;

use super::{Tx, Txn, misrouted, quotas};
use crate::error::conflict;
use crate::sql::{enum_text, json, os, ots, s, ts, u64v};
use crate::store::{SqlStore, exec};

pub(super) async fn apply(store: &SqlStore, txn: &Txn, w: &Write) -> Tx<()> {
    match w {
        Write::InsertPool(p) => insert(store, txn, p).await,
        Write::UpdatePool { pool, expected_generation } => {
            update(store, txn, pool, *expected_generation).await
        }
        Write::SetQuota { pool_id, resource, limit } => {
            quotas::set_limit(store, txn, pool_id, *resource, *limit).await
        }
        Write::BookQuota { pool_id, resource } => {
            quotas::book(store, txn, pool_id, *resource).await
        }
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
    raise_list_version(store, txn, p).await
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
    store.cas_outcome(txn, n, "pools", "pool_id", p.pool_id.as_str(), "pool").await?;
    raise_list_version(store, txn, p).await
}

/// Raises the version of `p`'s tenant's pools ([`bc_domain::ports::PoolRepo::pool_list_version`])
/// in the transaction that changed `p`, so no reader sees the change under the old version.
/// Pools change rarely, so the one row per tenant this locks until the commit costs little.
async fn raise_list_version(store: &SqlStore, txn: &Txn, p: &Pool) -> Tx<()> {
    let q = store.st(
        "INSERT INTO list_versions (tenant_id, list, version) VALUES (?, ?, 1) \
         ON CONFLICT (tenant_id, list) DO UPDATE SET version = list_versions.version + 1",
        vec![s(&p.tenant_id), s(POOLS_LIST)],
    );
    exec(txn, q).await?;
    Ok(())
}

/// The `list` of the pools' row in `list_versions`.
pub(crate) const POOLS_LIST: &str = "pools";
