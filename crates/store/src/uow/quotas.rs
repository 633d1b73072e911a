//! A pool's quota rows: setting a limit, booking a unit and releasing one — the only
//! place the store touches `quotas.used`, each change decided by its rule in
//! `bc_domain::rules::quota` (`set_limit`, `book`, `release`) on the row as it is.
//!
//! Invariant: the row a rule decides on cannot change before its result is written — it
//! is locked for the transaction (PostgreSQL: `SELECT … FOR UPDATE`, or the row lock of
//! the booking's own `UPDATE`; SQLite: the write transaction's lock, taken at `BEGIN
//! IMMEDIATE`) — so with a limit of N exactly N concurrent bookings commit, a release
//! never takes `used` below zero, and a new limit keeps `used`. A booking is one
//! conditional `UPDATE … RETURNING` (the condition is `book`'s, and the row it returns is
//! held to `book` again); only a refused one reads the row, for the rule to say why.

use bc_domain::model::{Quota, QuotaResource};
use bc_domain::rules::quota;
use bc_domain::{PoolId, StoreError};
use sea_orm::{ConnectionTrait, DbBackend, Value};

use super::{Tx, Txn};
use crate::error::{TxError, conflict};
use crate::sql::{Row, s};
use crate::store::{SqlStore, exec};

/// The pool's quota row for `resource`, locked until the transaction ends.
async fn locked(
    store: &SqlStore,
    txn: &Txn,
    pool_id: &PoolId,
    resource: QuotaResource,
) -> Tx<Option<Quota>> {
    let lock = if store.backend == DbBackend::Postgres { " FOR UPDATE" } else { "" };
    let read = store.st(
        &format!(
            "SELECT {} FROM quotas WHERE pool_id = ? AND resource = ?{lock}",
            crate::rows::QUOTA
        ),
        vec![s(pool_id), s(resource.as_str())],
    );
    Ok(txn.query_one_raw(read).await?.as_ref().map(crate::rows::quota).transpose()?)
}

/// Writes the row a rule decided (it exists and is locked).
async fn put(store: &SqlStore, txn: &Txn, pool_id: &PoolId, q: Quota) -> Tx<()> {
    let write = store.st(
        "UPDATE quotas SET quota_limit = ?, used = ? WHERE pool_id = ? AND resource = ?",
        vec![
            Value::from(i64::from(q.limit)),
            Value::from(i64::from(q.used)),
            s(pool_id),
            s(q.resource.as_str()),
        ],
    );
    exec(txn, write).await?;
    Ok(())
}

/// `quotas.set` and a new pool's default quotas: the row with `limit`, `used` kept
/// (`rules::quota::set_limit`).
pub(super) async fn set_limit(
    store: &SqlStore,
    txn: &Txn,
    pool_id: &PoolId,
    resource: QuotaResource,
    limit: u32,
) -> Tx<()> {
    let existing = locked(store, txn, pool_id, resource).await?;
    let next = quota::set_limit(existing, resource, limit);
    if existing.is_some() {
        return put(store, txn, pool_id, next).await;
    }
    let insert = store.st(
        "INSERT INTO quotas (pool_id, resource, quota_limit, used) VALUES (?, ?, ?, ?) \
         ON CONFLICT (pool_id, resource) DO NOTHING",
        vec![
            s(pool_id),
            s(resource.as_str()),
            Value::from(i64::from(next.limit)),
            Value::from(i64::from(next.used)),
        ],
    );
    let parent = format!("pool {pool_id}");
    let n = exec(txn, insert).await.map_err(conflict(|| "quota".into(), &parent))?;
    if n == 0 {
        // Another transaction made the row after the read found none: run the whole unit
        // again, so the rule decides on that row, locked.
        return Err(TxError::Retry(format!("quota of pool {pool_id} made while setting it")));
    }
    Ok(())
}

/// Books one unit (`rules::quota::book`), or refuses with its reason: `RESOURCE_EXHAUSTED`.
///
/// One statement when it books (every create of a load balancer books): `used + 1` where
/// `used < quota_limit`, which is `book`'s condition, written in the `UPDATE` so that the
/// check and the write are one step on the locked row (PostgreSQL re-checks the
/// condition on the row as committed when it waited for a concurrent booking's lock).
/// The row it returns is held to `book` again, so the two can never disagree unseen: a
/// disagreement is an internal error and the transaction rolls back. A refused booking
/// reads the row (locked) and lets `book` say why.
pub(super) async fn book(
    store: &SqlStore,
    txn: &Txn,
    pool_id: &PoolId,
    resource: QuotaResource,
) -> Tx<()> {
    let booking = store.st(
        &format!(
            "UPDATE quotas SET used = used + 1 \
             WHERE pool_id = ? AND resource = ? AND used < quota_limit RETURNING {}",
            crate::rows::QUOTA
        ),
        vec![s(pool_id), s(resource.as_str())],
    );
    if let Some(row) = txn.query_one_raw(booking).await? {
        let booked = crate::rows::quota(&row)?;
        let before = booked.used.checked_sub(1).map(|used| Quota { used, ..booked });
        return match before.map(|b| quota::book(Some(b))) {
            Some(Ok(next)) if next == booked => Ok(()),
            other => Err(StoreError::internal(format!(
                "quota booking of pool {pool_id}: the statement wrote {booked:?}, the rule says {other:?}"
            ))
            .into()),
        };
    }
    let row = locked(store, txn, pool_id, resource).await?;
    match quota::book(row) {
        Err(e) => Err(StoreError::QuotaExhausted(e).into()),
        // A release committed between the two statements: decide again, from the start.
        Ok(_) => Err(TxError::Retry(format!("quota of pool {pool_id} released while booking"))),
    }
}

/// Books `count` units on each pool's `resource` row — a batch of creates' bookings,
/// grouped by pool — in one `UPDATE … FROM (VALUES …) … RETURNING`: `used + count`
/// where that stays within `quota_limit`, which is `book`'s condition applied `count`
/// times in a row, so it books exactly when `count` bookings one after another would
/// all book. Each row it returns is held to `book` again, as [`book`] does. Whether every
/// pool booked: when not (one has no row, or too few units free), the caller commits each
/// create on its own, where [`book`] says why.
pub(super) async fn book_each(
    store: &SqlStore,
    txn: &Txn,
    resource: QuotaResource,
    counts: &[(&PoolId, u32)],
) -> Tx<bool> {
    let rows = vec!["(?, ?)"; counts.len()].join(", ");
    let mut values = Vec::with_capacity(counts.len() * 2);
    for (pool_id, count) in counts {
        values.extend([s(pool_id), Value::from(i64::from(*count))]);
    }
    values.push(s(resource.as_str()));
    let booking = store.st(
        &format!(
            "UPDATE quotas SET used = quotas.used + v.column2 FROM (VALUES {rows}) AS v \
             WHERE quotas.pool_id = v.column1 AND quotas.resource = ? \
             AND quotas.used + v.column2 <= quotas.quota_limit RETURNING pool_id, {}",
            crate::rows::QUOTA
        ),
        values,
    );
    let booked = txn.query_all_raw(booking).await?;
    if booked.len() != counts.len() {
        return Ok(false);
    }
    for row in &booked {
        let after = crate::rows::quota(row)?;
        let booked: PoolId = Row(row).parse("pool_id")?;
        let Some((pool_id, count)) = counts.iter().find(|(p, _)| **p == booked) else {
            return Err(StoreError::internal("a booking returned a pool it was not given").into());
        };
        let mut rule = after.used.checked_sub(*count).map(|used| Quota { used, ..after });
        for _ in 0..*count {
            rule = rule.and_then(|q| quota::book(Some(q)).ok());
        }
        if rule != Some(after) {
            return Err(StoreError::internal(format!(
                "quota booking of {count} on pool {pool_id}: the statement wrote {after:?}, the rule says {rule:?}"
            ))
            .into());
        }
    }
    Ok(true)
}

/// Releases one unit (`rules::quota::release`: never below zero); a pool without the
/// row has nothing to release.
pub(super) async fn release(
    store: &SqlStore,
    txn: &Txn,
    pool_id: &PoolId,
    resource: QuotaResource,
) -> Tx<()> {
    match locked(store, txn, pool_id, resource).await? {
        Some(row) => put(store, txn, pool_id, quota::release(row)).await,
        None => Ok(()),
    }
}
