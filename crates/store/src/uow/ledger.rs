//! Writes of the ledger: billing intervals, idempotency records and relay cursors.
//!
//! Invariant: at most one open interval per `(meter, resource)`, opening and closing are
//! idempotent; an idempotency key answers for 24 hours exactly as `rules::idempotency`
//! says (an older record is replaced, a live one refuses with the reason); a relay cursor
//! only moves forward.

use bc_domain::StoreError;
use bc_domain::model::IdempotencyRecord;
use bc_domain::ports::Write;
use bc_domain::rules::idempotency::{self, Replay};
use sea_orm::{ConnectionTrait, Value};

use super::{Tx, Txn, misrouted};
use crate::error::TxError;
use crate::rows::{IDEMPOTENCY, idempotency as decode_idempotency};
use crate::sql::{self, json, ots, s, ts, u64v};
use crate::store::{SqlStore, exec};

/// Most billing opens in one statement of a batch (7 values each).
const OPENS_PER_INSERT: usize = 250;

/// `OpenBilling` writes — one, or a batch's — in one `INSERT` per chunk. The unique
/// (meter, resource, open_key) index holds one open interval; an open that meets one is
/// a no-op, which makes the write idempotent (within one statement too).
pub(super) async fn open_billings(store: &SqlStore, txn: &Txn, writes: &[&Write]) -> Tx<()> {
    for chunk in writes.chunks(OPENS_PER_INSERT) {
        let mut values = Vec::with_capacity(chunk.len() * 7);
        for w in chunk {
            let Write::OpenBilling(b) = w else { return Err(misrouted(w)) };
            let open_key = b.end.is_none().then_some(1i64);
            values.extend([
                s(&b.meter),
                s(&b.resource),
                s(&b.tenant_id),
                s(&b.pool_id),
                ts(b.start),
                ots(b.end),
                Value::from(open_key),
            ]);
        }
        let rows = vec!["(?, ?, ?, ?, ?, ?, ?)"; chunk.len()].join(", ");
        let q = store.st(
            &format!(
                "INSERT INTO billing_intervals \
                 (meter, resource, tenant_id, pool_id, start_at, end_at, open_key) \
                 VALUES {rows} ON CONFLICT DO NOTHING"
            ),
            values,
        );
        exec(txn, q).await?;
    }
    Ok(())
}

pub(super) async fn apply(store: &SqlStore, txn: &Txn, w: &Write) -> Tx<()> {
    match w {
        Write::OpenBilling(_) => open_billings(store, txn, &[w]).await,
        Write::CloseBilling { meter, resource, at } => {
            let q = store.st(
                "UPDATE billing_intervals SET end_at = ?, open_key = NULL \
                 WHERE meter = ? AND resource = ? AND open_key = 1",
                vec![ts(*at), s(meter), s(resource)],
            );
            exec(txn, q).await?;
            Ok(())
        }
        Write::PutIdempotency(r) => put_idempotency(store, txn, r).await,
        Write::AdvanceRelayCursor { publisher, seq } => {
            let greatest = sql::greatest(store.backend);
            let q = store.st(
                &format!(
                    "INSERT INTO relay_cursors (publisher, last_seq) VALUES (?, ?) \
                     ON CONFLICT (publisher) DO UPDATE SET \
                     last_seq = {greatest}(relay_cursors.last_seq, excluded.last_seq)"
                ),
                vec![s(publisher), u64v(*seq)?],
            );
            exec(txn, q).await?;
            Ok(())
        }
        _ => Err(misrouted(w)),
    }
}

/// The records of one create or of a batch of creates (distinct keys), each inserted or
/// put in place of an expired record of its key, in one statement. Whether every one was
/// written: when not (a live record of a key: a repeat, or another body), a batch's
/// caller commits each create on its own, where [`put_idempotency`] answers the repeat
/// or refuses the other body.
pub(super) async fn put_idempotencies(
    store: &SqlStore,
    txn: &Txn,
    records: &[&IdempotencyRecord],
) -> Tx<bool> {
    let rows = vec!["(?, ?, ?, ?, ?, ?)"; records.len()].join(", ");
    let mut values = Vec::with_capacity(records.len() * 6);
    for r in records {
        values.extend([
            s(&r.tenant_id),
            s(&r.method),
            s(&r.request_id),
            s(&r.body_hash),
            json(&r.response)?,
            ts(r.created_at),
        ]);
    }
    // `excluded.created_at - WINDOW_MS` is `expired_at_or_before(created_at)` of each
    // record: a record of the key created at or before it has expired and is replaced.
    let q = store.st(
        &format!(
            "INSERT INTO idempotency (tenant_id, method, request_id, body_hash, response, \
             created_at) VALUES {rows} \
             ON CONFLICT (tenant_id, method, request_id) DO UPDATE SET \
             body_hash = excluded.body_hash, response = excluded.response, \
             created_at = excluded.created_at WHERE idempotency.created_at <= \
             excluded.created_at - {window}",
            window = idempotency::WINDOW_MS
        ),
        values,
    );
    Ok(exec(txn, q).await? == records.len() as u64)
}

/// Inserts, or replaces a record of the key that expired; a live record of the key ends
/// the commit as a replay (same body: `TxError::Replayed`, answered `Ok`) or fails it with
/// `RequestIdReused` (another body).
async fn put_idempotency(store: &SqlStore, txn: &Txn, r: &IdempotencyRecord) -> Tx<()> {
    if put_idempotencies(store, txn, &[r]).await? {
        return Ok(());
    }
    let read = store.st(
        &format!(
            "SELECT {IDEMPOTENCY} FROM idempotency \
             WHERE tenant_id = ? AND method = ? AND request_id = ?"
        ),
        vec![s(&r.tenant_id), s(&r.method), s(&r.request_id)],
    );
    let Some(row) = txn.query_one_raw(read).await? else {
        return Err(
            StoreError::internal("idempotency upsert changed nothing and found no row").into()
        );
    };
    let first = decode_idempotency(&row)?;
    match idempotency::replay(Some(&first), &r.body_hash, r.created_at) {
        Replay::Repeat(_) => Err(TxError::Replayed(Box::new(first))),
        Replay::Reused => {
            let msg = idempotency::reused_message(&r.method, &r.request_id);
            Err(StoreError::RequestIdReused(msg).into())
        }
        // The upsert refused the row because it was live; the rule agrees unless the two
        // bounds drifted apart, which is a bug.
        Replay::Create => Err(StoreError::internal("idempotency window rules disagree").into()),
    }
}
