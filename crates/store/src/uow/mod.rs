//! `Store::commit`: one transaction applying a unit of work — its fences, its writes in
//! order (each by the module of its aggregate), its work-queue entries, then its events.
//!
//! Invariant: all of it or none of it. Every condition (lease held, generation CAS, free
//! name, existing row) is a `WHERE` clause or constraint of the statement that writes,
//! and a quota row is locked before its rule decides on it (`quotas`), so no
//! read-then-write race exists; the first failing condition rolls everything back. Fences come first, as `UPDATE`s of the lease row, so the row stays
//! locked to the commit and a takeover cannot land between the check and the commit.
//! Event `seq`s are assigned in commit order: on PostgreSQL the insert happens under a
//! transaction-scoped advisory lock held to commit, because a sequence alone hands out
//! numbers in insert order, and a relay reading `seq > last` could otherwise skip an event
//! whose transaction committed after a later-numbered one; SQLite has a single writer.

mod accounts;
mod agents;
mod bookings;
mod clusters;
mod ledger;
mod load_balancers;
mod pools;
mod quotas;
mod substrates;

use bc_domain::StoreError;
use bc_domain::model::NewEvent;
use bc_domain::ports::{Committed, Enqueue, Fence, UnitOfWork, Write};
use sea_orm::{ConnectionTrait, DatabaseTransaction, DbBackend, Value};

use crate::error::{TxError, conflict};
use crate::sql::{self, Row, json, s, ts};
use crate::store::{SqlStore, exec};

/// The advisory lock key that orders event inserts on PostgreSQL ("bc-event" in ASCII).
const EVENT_LOCK_KEY: i64 = 0x6263_2d65_7665_6e74;

/// The result of one step of a commit.
type Tx<T> = Result<T, TxError>;

/// The transaction a unit of work runs in.
type Txn = DatabaseTransaction;

impl SqlStore {
    /// Applies `uow` atomically, retrying the whole transaction on transient errors; a
    /// create's replay is rolled back and answered as [`Committed::replayed`].
    pub(crate) async fn commit_uow(&self, uow: &UnitOfWork) -> Result<Committed, StoreError> {
        self.write("commit", || async {
            let txn = self.begin().await?;
            let r = self.apply(&txn, uow).await;
            match Self::finish(txn, r).await {
                Err(TxError::Replayed(first)) => {
                    Ok(Committed { event_seqs: Vec::new(), replayed: Some(first) })
                }
                other => other,
            }
        })
        .await
    }

    async fn apply(&self, txn: &Txn, uow: &UnitOfWork) -> Tx<Committed> {
        for f in &uow.fences {
            self.check_fence(txn, f).await?;
        }
        for w in &uow.writes {
            self.apply_write(txn, w).await?;
        }
        for e in &uow.enqueue {
            self.enqueue_on(txn, e).await?;
        }
        let mut event_seqs = Vec::with_capacity(uow.events.len());
        if !uow.events.is_empty() && self.backend == DbBackend::Postgres {
            let lock =
                self.st("SELECT pg_advisory_xact_lock(?)", vec![Value::from(EVENT_LOCK_KEY)]);
            exec(txn, lock).await?;
        }
        for e in &uow.events {
            event_seqs.push(self.insert_event(txn, e).await?);
        }
        Ok(Committed { event_seqs, replayed: None })
    }

    /// Runs one conditional write, by the module of its aggregate; `Err` aborts the unit
    /// of work.
    async fn apply_write(&self, txn: &Txn, w: &Write) -> Tx<()> {
        match w {
            Write::InsertPool(_)
            | Write::UpdatePool { .. }
            | Write::SetQuota { .. }
            | Write::BookQuota { .. } => pools::apply(self, txn, w).await,
            Write::InsertAccount(_) | Write::DeleteAccount { .. } => {
                accounts::apply(self, txn, w).await
            }
            Write::PutSubstrate(_) => substrates::apply(self, txn, w).await,
            Write::InsertCluster(_)
            | Write::UpdateCluster { .. }
            | Write::SetClusterStatus { .. }
            | Write::SetClusterNodes { .. }
            | Write::InsertNodePool(_)
            | Write::UpdateNodePool { .. }
            | Write::SetNodePoolStatus { .. } => clusters::apply(self, txn, w).await,
            Write::InsertLoadBalancer(_)
            | Write::UpdateLoadBalancer { .. }
            | Write::SetLoadBalancerStatus { .. }
            | Write::ReleaseLoadBalancerQuota { .. } => load_balancers::apply(self, txn, w).await,
            Write::PutNode(_)
            | Write::Heartbeat { .. }
            | Write::EndNode { .. }
            | Write::InsertJoinToken(_)
            | Write::RevokeJoinTokens { .. }
            | Write::InsertApiToken(_)
            | Write::RevokeApiToken { .. } => agents::apply(self, txn, w).await,
            Write::InsertBooking(_) | Write::EndBooking { .. } => {
                bookings::apply(self, txn, w).await
            }
            Write::OpenBilling(_)
            | Write::CloseBilling { .. }
            | Write::PutIdempotency(_)
            | Write::AdvanceRelayCursor { .. } => ledger::apply(self, txn, w).await,
        }
    }

    /// Fails with `LeaseLost` unless the fence's owner holds its lease; the `UPDATE`
    /// (a no-op on the values) locks the lease row until the commit ends.
    async fn check_fence(&self, txn: &Txn, f: &Fence) -> Tx<()> {
        let (st, lost) = match f {
            Fence::Work { kind, key, owner } => (
                self.st(
                    "UPDATE work_queue SET lease_owner = lease_owner \
                     WHERE kind = ? AND item_key = ? AND lease_owner = ?",
                    vec![s(kind.as_str()), s(key), s(owner)],
                ),
                format!("{owner} no longer holds work item {kind} {key}"),
            ),
            Fence::Singleton { name, owner } => (
                self.st(
                    "UPDATE leases SET owner = owner WHERE name = ? AND owner = ?",
                    vec![s(name), s(owner)],
                ),
                format!("{owner} no longer holds lease {name}"),
            ),
        };
        if exec(txn, st).await? == 0 { Err(StoreError::LeaseLost(lost).into()) } else { Ok(()) }
    }

    async fn insert_event(&self, txn: &Txn, e: &NewEvent) -> Tx<u64> {
        let st = self.st(
            "INSERT INTO events (event_id, tenant_id, subject, kind, time_ms, data) \
             VALUES (?, ?, ?, ?, ?, ?) RETURNING seq",
            vec![
                s(&e.event_id),
                s(&e.tenant_id),
                s(&e.subject),
                s(&e.kind),
                ts(e.time),
                json(&e.data)?,
            ],
        );
        let row = txn
            .query_one_raw(st)
            .await
            .map_err(conflict(|| format!("event {}", e.event_id), "event"))?
            .ok_or_else(|| StoreError::internal("INSERT … RETURNING gave no row"))?;
        Ok(Row(&row).u64("seq")?)
    }

    /// Adds or merges a queue entry inside `txn` (see `crate::queue` for the semantics):
    /// unleased, the earliest due time wins; leased, the earliest enqueued time goes to
    /// `requeue_at` and the holder's `complete` makes it the next due time.
    pub(crate) async fn enqueue_on(&self, txn: &impl ConnectionTrait, e: &Enqueue) -> Tx<()> {
        let least = sql::least(self.backend);
        let st = self.st(
            &format!(
                "INSERT INTO work_queue \
                 (kind, item_key, not_before, attempts, lease_owner, lease_until, last_error, requeue_at) \
                 VALUES (?, ?, ?, 0, NULL, NULL, NULL, NULL) \
                 ON CONFLICT (kind, item_key) DO UPDATE SET \
                 not_before = CASE WHEN work_queue.lease_owner IS NULL \
                   THEN {least}(work_queue.not_before, excluded.not_before) \
                   ELSE work_queue.not_before END, \
                 requeue_at = CASE WHEN work_queue.lease_owner IS NULL THEN NULL \
                   ELSE {least}(COALESCE(work_queue.requeue_at, excluded.not_before), \
                                excluded.not_before) END"
            ),
            vec![s(e.kind.as_str()), s(&e.key), ts(e.not_before)],
        );
        exec(txn, st).await?;
        Ok(())
    }

    /// After a CAS update touched `n` rows: fine when 1; otherwise a read inside the same
    /// transaction tells a stale generation (the row exists) from a missing row.
    async fn cas_outcome(
        &self,
        txn: &Txn,
        n: u64,
        table: &str,
        id_col: &str,
        id: &str,
        noun: &str,
    ) -> Tx<()> {
        if n > 0 {
            return Ok(());
        }
        if self.exists(txn, table, id_col, id).await? {
            Err(StoreError::Stale(format!("{noun} {id}")).into())
        } else {
            Err(StoreError::NotFound(format!("{noun} {id}")).into())
        }
    }

    /// Whether a row with `id_col = id` exists, read inside the transaction.
    async fn exists(&self, txn: &Txn, table: &str, id_col: &str, id: &str) -> Tx<bool> {
        let st =
            self.st(&format!("SELECT 1 AS present FROM {table} WHERE {id_col} = ?"), vec![s(id)]);
        Ok(txn.query_one_raw(st).await?.is_some())
    }

    /// A count read inside the transaction (`n` of `SELECT COUNT(*) AS n …`).
    async fn count_in(&self, txn: &Txn, text: &str, values: Vec<Value>) -> Tx<u64> {
        match txn.query_one_raw(self.st(text, values)).await? {
            Some(r) => Ok(Row(&r).u64("n")?),
            None => Ok(0),
        }
    }
}

/// A write that must touch a row: zero rows means the row is missing.
fn must_touch(n: u64, what: impl FnOnce() -> String) -> Tx<()> {
    if n == 0 { Err(StoreError::NotFound(what()).into()) } else { Ok(()) }
}

/// Optional JSON text.
fn opt_json<T: serde::Serialize>(v: &Option<T>) -> Result<Value, StoreError> {
    match v {
        Some(x) => json(x),
        None => Ok(Value::from(None::<String>)),
    }
}

/// A write dispatched to a module that does not own it: a bug in `apply_write`.
fn misrouted(w: &Write) -> TxError {
    StoreError::internal(format!("write routed to the wrong aggregate: {w:?}")).into()
}
