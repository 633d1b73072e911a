//! Writes of load balancers, and the release of the quota unit each one booked.
//!
//! Invariant: live names are unique per account; desired fields change only under
//! generation CAS; observed facts accumulate (a provider id, IP, first-ready time or
//! deletion once recorded is not erased by a later write that does not know it); and a
//! load balancer gives its quota unit back at most once (`quota_released`).

use bc_domain::model::{LoadBalancer, QuotaResource};
use bc_domain::ports::Write;
use bc_domain::{LoadBalancerId, PoolId, StoreError};
use sea_orm::{ConnectionTrait, DbBackend, Value};

use super::{Tx, Txn, misrouted, must_touch, quotas};
use crate::error::{TxError, conflict};
use crate::sql::{Row, json, os, ots, s, ts, u64v};
use crate::store::{SqlStore, exec};

pub(super) async fn apply(store: &SqlStore, txn: &Txn, w: &Write) -> Tx<()> {
    match w {
        Write::InsertLoadBalancer(lb) => insert(store, txn, lb).await,
        Write::UpdateLoadBalancer { load_balancer: lb, expected_generation } => {
            let q = store.st(
                "UPDATE load_balancers SET name = ?, \
                 live_name = CASE WHEN deleted_at IS NULL THEN ? ELSE NULL END, spec = ?, \
                 delete_requested = ?, generation = ? \
                 WHERE load_balancer_id = ? AND generation = ?",
                vec![
                    s(&lb.name),
                    s(&lb.name),
                    json(&lb.spec)?,
                    Value::from(lb.delete_requested),
                    u64v(lb.generation)?,
                    s(&lb.load_balancer_id),
                    u64v(*expected_generation)?,
                ],
            );
            let what =
                || format!("load balancer {} in account {}", lb.name, lb.provider_account_id);
            let n = exec(txn, q).await.map_err(conflict(what, "load balancer"))?;
            let id = lb.load_balancer_id.as_str();
            let t = "load_balancers";
            store.cas_outcome(txn, n, t, "load_balancer_id", id, "load balancer").await
        }
        Write::SetLoadBalancerStatus { load_balancer_id, .. } => {
            let touched = set_statuses(store, txn, &[w]).await?;
            must_touch(u64::from(touched), || format!("load balancer {load_balancer_id}"))
        }
        Write::ReleaseLoadBalancerQuota { load_balancer_id } => {
            release_quota(store, txn, load_balancer_id).await
        }
        _ => Err(misrouted(w)),
    }
}

/// Most status writes in one statement of a batch (9 values each).
const STATUSES_PER_UPDATE: usize = 400;

/// `SetLoadBalancerStatus` writes — one, or a batch's — in one `UPDATE … FROM (VALUES
/// …)` per chunk: observed facts accumulate (a provider id, IP, first-ready time or
/// deletion once recorded is kept by a write that does not know it). The caller passes
/// writes of distinct load balancers only. Whether every row was there (in a batch, a
/// missing one fails its unit alone, on its own retry).
pub(super) async fn set_statuses(store: &SqlStore, txn: &Txn, writes: &[&Write]) -> Tx<bool> {
    for chunk in writes.chunks(STATUSES_PER_UPDATE) {
        let mut values = Vec::with_capacity(chunk.len() * 9);
        for w in chunk {
            let Write::SetLoadBalancerStatus {
                load_balancer_id,
                provider_load_balancer_id,
                ip,
                status,
                ready_at,
                deleted_at,
            } = w
            else {
                return Err(misrouted(w));
            };
            values.extend([
                s(load_balancer_id),
                os(provider_load_balancer_id.as_ref()),
                os(ip.as_ref()),
                s(status.state.as_str()),
                os(status.message.as_ref()),
                u64v(status.observed_generation)?,
                ts(status.updated_at),
                ots(*ready_at),
                ots(*deleted_at),
            ]);
        }
        let rows = vec!["(?, ?, ?, ?, ?, ?, ?, ?, ?)"; chunk.len()].join(", ");
        let q = store.st(
            &format!(
                "UPDATE load_balancers SET \
                 provider_load_balancer_id = \
                   COALESCE(v.column2, load_balancers.provider_load_balancer_id), \
                 ip = COALESCE(v.column3, load_balancers.ip), state = v.column4, \
                 message = v.column5, observed_generation = v.column6, updated_at = v.column7, \
                 ready_at = COALESCE(load_balancers.ready_at, v.column8), \
                 live_name = CASE WHEN COALESCE(load_balancers.deleted_at, v.column9) IS NULL \
                   THEN load_balancers.name ELSE NULL END, \
                 deleted_at = COALESCE(load_balancers.deleted_at, v.column9) \
                 FROM (VALUES {rows}) AS v WHERE load_balancers.load_balancer_id = v.column1"
            ),
            values,
        );
        if exec(txn, q).await? < chunk.len() as u64 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Inserts `lb`; a live one only on a live account, as [`insert_live`] inserts a batch
/// (one statement where a check and an insert were two; on PostgreSQL the account row is
/// share-locked until the commit, as `accounts::require_live` locks it, so a delete of
/// the account waits for this transaction and then sees what it inserted).
async fn insert(store: &SqlStore, txn: &Txn, lb: &LoadBalancer) -> Tx<()> {
    if lb.deleted_at.is_none() {
        if !insert_live(store, txn, &[lb]).await? {
            let id = &lb.provider_account_id;
            return Err(StoreError::NotFound(format!("provider account {id} (deleted)")).into());
        }
        return Ok(());
    }
    // A deleted row has no account to be live on.
    let q = store.st(
        &format!("INSERT INTO load_balancers ({COLUMNS}) VALUES ({})", PLACEHOLDERS.join(", ")),
        row_values(lb)?,
    );
    exec(txn, q).await.map_err(|e| conflict_of(&[lb], e))?;
    Ok(())
}

/// A failed insert of `lbs` as [`conflict`] maps it, naming the load balancer and its pool
/// and account when it is one, else how many (the names are built only on a failure).
fn conflict_of(lbs: &[&LoadBalancer], e: sea_orm::DbErr) -> TxError {
    match lbs {
        [lb] => {
            let what =
                || format!("load balancer {} in account {}", lb.name, lb.provider_account_id);
            conflict(what, &format!("pool {} or account {}", lb.pool_id, lb.provider_account_id))(e)
        }
        _ => conflict(|| format!("one of {} load balancers", lbs.len()), "a pool or account")(e),
    }
}

/// The columns of a load balancer's row, in the order of [`row_values`].
const COLUMNS: &str = "load_balancer_id, tenant_id, pool_id, provider_account_id, name, \
    live_name, spec, generation, created_at, delete_requested, provider_load_balancer_id, ip, \
    state, message, observed_generation, updated_at, ready_at, deleted_at, quota_released";

/// One placeholder per column of [`COLUMNS`].
const PLACEHOLDERS: [&str; 19] = ["?"; 19];

/// Live load balancers — one, or a batch of creates' — inserted in one statement, each
/// only on a live account: the rows come from a join with the accounts' live rows,
/// share-locked on PostgreSQL. Whether every one was inserted: when not (an account gone
/// or deleted), [`insert`] names the account, and a batch's caller commits each create on
/// its own.
pub(super) async fn insert_live(store: &SqlStore, txn: &Txn, lbs: &[&LoadBalancer]) -> Tx<bool> {
    let mut values = Vec::with_capacity(lbs.len() * PLACEHOLDERS.len());
    for lb in lbs {
        if lb.deleted_at.is_some() {
            return Err(StoreError::internal("a deleted load balancer among creates").into());
        }
        values.extend(row_values(lb)?);
    }
    let row = format!("({})", PLACEHOLDERS.join(", "));
    let rows = vec![row.as_str(); lbs.len()].join(", ");
    let picked: Vec<String> = (1..=PLACEHOLDERS.len()).map(|i| format!("v.column{i}")).collect();
    let lock = if store.backend == DbBackend::Postgres { " FOR SHARE OF a" } else { "" };
    let q = store.st(
        &format!(
            "INSERT INTO load_balancers ({COLUMNS}) SELECT {} FROM (VALUES {rows}) AS v \
             JOIN provider_accounts AS a ON a.provider_account_id = v.column4 \
             AND a.deleted_at IS NULL{lock}",
            picked.join(", ")
        ),
        values,
    );
    let inserted = exec(txn, q).await.map_err(|e| conflict_of(lbs, e))?;
    Ok(inserted == lbs.len() as u64)
}

/// A load balancer's row, in the order of [`COLUMNS`] (`live_name` set while it is not
/// deleted).
fn row_values(lb: &LoadBalancer) -> Tx<Vec<Value>> {
    let live = lb.deleted_at.is_none().then(|| lb.name.to_string());
    Ok(vec![
        s(&lb.load_balancer_id),
        s(&lb.tenant_id),
        s(&lb.pool_id),
        s(&lb.provider_account_id),
        s(&lb.name),
        os(live),
        json(&lb.spec)?,
        u64v(lb.generation)?,
        ts(lb.created_at),
        Value::from(lb.delete_requested),
        os(lb.provider_load_balancer_id.as_ref()),
        os(lb.ip.as_ref()),
        s(lb.status.state.as_str()),
        os(lb.status.message.as_ref()),
        u64v(lb.status.observed_generation)?,
        ts(lb.status.updated_at),
        ots(lb.ready_at),
        ots(lb.deleted_at),
        Value::from(lb.quota_released),
    ])
}

/// Marks the row released; only the write that flips the marker gives the unit back
/// (`quotas::release`).
async fn release_quota(store: &SqlStore, txn: &Txn, id: &LoadBalancerId) -> Tx<()> {
    let mark = store.st(
        "UPDATE load_balancers SET quota_released = TRUE \
         WHERE load_balancer_id = ? AND NOT quota_released RETURNING pool_id",
        vec![s(id)],
    );
    let Some(row) = txn.query_one_raw(mark).await? else {
        return if store.exists(txn, "load_balancers", "load_balancer_id", id.as_str()).await? {
            Ok(())
        } else {
            Err(StoreError::NotFound(format!("load balancer {id}")).into())
        };
    };
    let pool_id: PoolId = Row(&row).parse("pool_id")?;
    quotas::release(store, txn, &pool_id, QuotaResource::LoadBalancers).await
}
