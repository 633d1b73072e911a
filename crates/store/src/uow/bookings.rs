//! Writes of bookings.
//!
//! Invariant: a booking is inserted only while no drain upgrade waits on its pool (SPEC
//! §6, §10), checked by the inserting statement under a lock of the pool's substrate
//! row, so a booking and a drain never miss each other; the refusal is the message of
//! `rules::drain::booking_refused_by_upgrade`, the one rule that words it.

use bc_domain::StoreError;
use bc_domain::model::{Booking, UpgradeWait};
use bc_domain::ports::Write;
use bc_domain::rules::drain::booking_refused_by_upgrade;
use sea_orm::{ConnectionTrait, DbBackend};

use super::{Tx, Txn, misrouted, must_touch};
use crate::error::conflict;
use crate::sql::{Row, enum_text, os, ots, s, ts};
use crate::store::{SqlStore, exec};

pub(super) async fn apply(store: &SqlStore, txn: &Txn, w: &Write) -> Tx<()> {
    match w {
        Write::InsertBooking(b) => insert(store, txn, b).await,
        Write::EndBooking { booking_id, at } => {
            let q = store.st(
                "UPDATE bookings SET state = 'ended', ended_at = COALESCE(ended_at, ?) \
                 WHERE booking_id = ?",
                vec![ts(*at), s(booking_id)],
            );
            must_touch(exec(txn, q).await?, || format!("booking {booking_id}"))
        }
        _ => Err(misrouted(w)),
    }
}

async fn insert(store: &SqlStore, txn: &Txn, b: &Booking) -> Tx<()> {
    if store.backend == DbBackend::Postgres {
        // Under read committed, the NOT EXISTS below could read before a drain commits
        // and the drain's count of active bookings run before this booking commits: each
        // would miss the other. Locking the substrate row orders them — a drain's write
        // waits for this booking to commit (and its count sees it), or this booking waits
        // for the drain and the NOT EXISTS, a new statement, sees it. (SQLite has one
        // writer at a time: its insert always sees the last committed drain.)
        let lock = store
            .st("SELECT upgrade FROM substrates WHERE pool_id = ? FOR SHARE", vec![s(&b.pool_id)]);
        txn.query_one_raw(lock).await?;
    }
    let q = store.st(
        "INSERT INTO bookings (booking_id, tenant_id, pool_id, node_name, state, \
         created_at, ends_at, ended_at) SELECT ?, ?, ?, ?, ?, ?, ?, ? \
         WHERE NOT EXISTS (SELECT 1 FROM substrates WHERE pool_id = ? AND upgrade IS NOT NULL)",
        vec![
            s(&b.booking_id),
            s(&b.tenant_id),
            s(&b.pool_id),
            os(b.node_name.as_ref()),
            s(enum_text(&b.state)?),
            ts(b.created_at),
            ots(b.ends_at),
            ots(b.ended_at),
            s(&b.pool_id),
        ],
    );
    let parent = format!("pool {}", b.pool_id);
    let what = || format!("booking {}", b.booking_id);
    if exec(txn, q).await.map_err(conflict(what, &parent))? > 0 {
        return Ok(());
    }
    // Nothing inserted: a drain waits. Read it for the message.
    let read = store.st("SELECT upgrade FROM substrates WHERE pool_id = ?", vec![s(&b.pool_id)]);
    let wait: Option<UpgradeWait> = match txn.query_one_raw(read).await? {
        Some(row) => Row(&row).opt_json("upgrade")?,
        None => None,
    };
    let refusal = booking_refused_by_upgrade(&b.pool_id, wait.as_ref())
        .err()
        .map(|e| e.message)
        .unwrap_or_else(|| format!("pool {} is draining for an upgrade", b.pool_id));
    Err(StoreError::Conflict(refusal).into())
}
