//! `Store::commit`: one transaction applying a unit of work — its fences, its writes in
//! order (each by the module of its aggregate), its work-queue entries, then its events.
//!
//! Invariant: all of it or none of it. Every condition (lease held, generation CAS, free
//! name, existing row) is a `WHERE` clause or constraint of the statement that writes,
//! and a quota row is locked before its rule decides on it (`quotas`), so no
//! read-then-write race exists; the first failing condition rolls everything back. Fences come first, as `UPDATE`s of the lease row, so the row stays
//! locked to the commit and a takeover cannot land between the check and the commit.
//! Event `seq`s are assigned in commit order: on PostgreSQL the insert happens under a
//! transaction-scoped advisory lock held to commit (taken by the insert statement itself),
//! because a sequence alone hands out
//! numbers in insert order, and a relay reading `seq > last` could otherwise skip an event
//! whose transaction committed after a later-numbered one; SQLite has a single writer.
//! Units of work that arrive together may share one transaction (`commit_batch`), each
//! applied exactly as alone; a batch keeps all of them or, if any fails, none, and then
//! commits each on its own. A batch of load balancer creates writes each kind of row in
//! one statement for all of them (`creates`), under the same all-or-none rule.

mod accounts;
mod agents;
mod bookings;
mod clusters;
mod creates;
mod ledger;
mod load_balancers;
mod pools;
mod quotas;
mod substrates;

use bc_domain::StoreError;
use bc_domain::model::NewEvent;
use bc_domain::ports::{Committed, Enqueue, Fence, StoreResult, UnitOfWork, WorkKind, Write};
use sea_orm::{ConnectionTrait, DatabaseTransaction, DbBackend, Value};

use crate::error::{TxError, conflict};
use crate::sql::{self, Row, json, s, ts};
use crate::store::{SqlStore, exec};

pub(crate) use pools::POOLS_LIST;

/// The advisory lock key that orders event inserts on PostgreSQL ("bc-event" in ASCII).
const EVENT_LOCK_KEY: i64 = 0x6263_2d65_7665_6e74;

/// Most work fences checked in one statement of a batch (3 values each).
const FENCES_PER_UPDATE: usize = 500;
/// Most events inserted in one statement of a batch (6 values each).
const EVENTS_PER_INSERT: usize = 250;

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

    /// Commits `batch` (units of work that arrived together) in one transaction: one
    /// `BEGIN`, one `COMMIT`, one connection and (PostgreSQL) one turn at the event lock
    /// for all of them instead of one each. Each unit is applied exactly as alone, in
    /// order, so each sees the ones before it as committed. If any unit fails (a lost
    /// lease, a stale generation, a full quota, a replayed create) nothing of the batch
    /// is kept and every unit is committed again on its own, so each gets the answer it
    /// would have got alone and no unit fails for another's sake. A transaction the
    /// database asks to retry is retried whole; an error of the `COMMIT` itself (whose
    /// outcome may be unknown) is every unit's answer, never a second try.
    pub(crate) async fn commit_batch(&self, batch: Vec<UnitOfWork>) -> Vec<StoreResult<Committed>> {
        if batch.len() == 1 {
            return vec![self.commit_uow(&batch[0]).await];
        }
        let together = self
            .write("commit", || async {
                let txn = self.begin().await?;
                match self.apply_batch(&txn, &batch).await {
                    Ok(Some(done)) => {
                        txn.commit().await?;
                        Ok(Some(done))
                    }
                    // A unit failed: keep nothing, commit each alone.
                    Ok(None) | Err(TxError::Fail(_) | TxError::Replayed(_)) => {
                        let _ = txn.rollback().await;
                        Ok(None)
                    }
                    Err(retry) => {
                        let _ = txn.rollback().await;
                        Err(retry)
                    }
                }
            })
            .await;
        match together {
            Ok(Some(done)) => done.into_iter().map(Ok).collect(),
            Ok(None) => {
                let mut answers = Vec::with_capacity(batch.len());
                for uow in &batch {
                    answers.push(self.commit_uow(uow).await);
                }
                answers
            }
            Err(e) => batch.iter().map(|_| Err(e.clone())).collect(),
        }
    }

    /// The batch's fences (the work leases in one statement), then each unit's writes
    /// and queue entries in order, then every event in one statement under one turn of
    /// the event lock. `None` when a fence does not hold.
    async fn apply_batch(&self, txn: &Txn, batch: &[UnitOfWork]) -> Tx<Option<Vec<Committed>>> {
        if let Some(together) = creates::together(batch) {
            let done = creates::apply(self, txn, &together).await?;
            return Ok(done.then(|| vec![Committed::default(); batch.len()]));
        }
        let mut work = Vec::new();
        for f in batch.iter().flat_map(|u| &u.fences) {
            match f {
                Fence::Work { kind, key, owner } => {
                    work.push((*kind, key.as_str(), owner.as_str()))
                }
                Fence::Singleton { .. } => self.check_fence(txn, f).await?,
            }
        }
        if !self.check_work_fences(txn, work).await? {
            return Ok(None);
        }
        // The units' first writes, when they are load balancer statuses (a reconciler's
        // record), in one statement; then every other write of each unit, in order.
        let hoisted = statuses_first(batch);
        if let Some(writes) = &hoisted
            && !load_balancers::set_statuses(self, txn, writes).await?
        {
            return Ok(None);
        }
        // Then the billing opens that follow those statuses (a first `ready`), in one more.
        let opens = hoisted.as_ref().and_then(|_| opens_second(batch));
        if let Some(writes) = &opens {
            ledger::open_billings(self, txn, writes).await?;
        }
        for uow in batch {
            let status_first =
                matches!(uow.writes.first(), Some(Write::SetLoadBalancerStatus { .. }));
            let open_second = matches!(uow.writes.get(1), Some(Write::OpenBilling(_)));
            let skip = usize::from(hoisted.is_some() && status_first)
                + usize::from(opens.is_some() && status_first && open_second);
            for w in uow.writes.iter().skip(skip) {
                self.apply_write(txn, w).await?;
            }
            for e in &uow.enqueue {
                self.enqueue_on(txn, e).await?;
            }
        }
        let events: Vec<&NewEvent> = batch.iter().flat_map(|u| &u.events).collect();
        let seqs: std::collections::HashMap<String, u64> =
            self.insert_events(txn, &events).await?.into_iter().collect();
        let mut done = Vec::with_capacity(batch.len());
        for uow in batch {
            done.push(Committed { event_seqs: seqs_of(&uow.events, &seqs)?, replayed: None });
        }
        Ok(Some(done))
    }

    /// Whether every fence of `fences` holds, checked (and each lease row locked to the
    /// commit) in one `UPDATE … FROM (VALUES …)` per chunk, as [`Self::check_fence`]
    /// does one at a time.
    async fn check_work_fences(&self, txn: &Txn, fences: Vec<(WorkKind, &str, &str)>) -> Tx<bool> {
        let mut distinct = fences;
        distinct.sort();
        distinct.dedup();
        for chunk in distinct.chunks(FENCES_PER_UPDATE) {
            let rows = vec!["(?, ?, ?)"; chunk.len()].join(", ");
            let values = chunk
                .iter()
                .flat_map(|(k, key, owner)| [s(k.as_str()), s(key), s(owner)])
                .collect();
            let st = self.st(
                &format!(
                    "UPDATE work_queue SET lease_owner = work_queue.lease_owner \
                     FROM (VALUES {rows}) AS v WHERE work_queue.kind = v.column1 \
                     AND work_queue.item_key = v.column2 AND work_queue.lease_owner = v.column3"
                ),
                values,
            );
            if exec(txn, st).await? < chunk.len() as u64 {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Inserts `events` (a unit's, or a batch's) in one statement per
    /// [`EVENTS_PER_INSERT`]; each event's `seq` by its id, in the order given. On
    /// PostgreSQL each statement first takes the event lock (see [`EVENT_LOCK_KEY`]) for
    /// the rest of `txn`, inside the statement itself: the lock costs no round trip of its
    /// own and is held from the insert to the commit, no longer.
    async fn insert_events(&self, txn: &Txn, events: &[&NewEvent]) -> Tx<Vec<(String, u64)>> {
        let mut seqs = Vec::with_capacity(events.len());
        for chunk in events.chunks(EVENTS_PER_INSERT) {
            seqs.extend(self.insert_event_chunk(txn, chunk).await?);
        }
        Ok(seqs)
    }

    async fn insert_event_chunk(&self, txn: &Txn, events: &[&NewEvent]) -> Tx<Vec<(String, u64)>> {
        let rows = vec!["(?, ?, ?, ?, ?, ?)"; events.len()].join(", ");
        let mut values = Vec::with_capacity(events.len() * 6 + 1);
        for e in events {
            values.extend([
                s(&e.event_id),
                s(&e.tenant_id),
                s(&e.subject),
                s(&e.kind),
                ts(e.time),
                json(&e.data)?,
            ]);
        }
        let columns = "events (event_id, tenant_id, subject, kind, time_ms, data)";
        if self.backend == DbBackend::Postgres && self.event_lock_apart {
            let lock =
                self.st("SELECT pg_advisory_xact_lock(?)", vec![Value::from(EVENT_LOCK_KEY)]);
            exec(txn, lock).await?;
        }
        let text = if self.backend == DbBackend::Postgres && !self.event_lock_apart {
            // The lock is the one-time filter of the plan's `Result` node, which is checked
            // before the first row is projected, so before the first `nextval`: every
            // `seq` is drawn under it (`tests::the_event_lock_is_taken_before_any_seq`).
            values.push(Value::from(EVENT_LOCK_KEY));
            format!(
                "INSERT INTO {columns} SELECT * FROM (VALUES {rows}) AS v \
                 WHERE (SELECT pg_advisory_xact_lock(?) IS NULL) IS NOT NULL \
                 RETURNING event_id, seq"
            )
        } else {
            // SQLite's single writer orders the inserts already.
            format!("INSERT INTO {columns} VALUES {rows} RETURNING event_id, seq")
        };
        let found = txn.query_all_raw(self.st(&text, values)).await.map_err(conflict(
            || match events {
                [one] => format!("event {}", one.event_id),
                _ => format!("{} events", events.len()),
            },
            "event",
        ))?;
        let mut seqs = Vec::with_capacity(found.len());
        for r in &found {
            let r = Row(r);
            seqs.push((r.string("event_id")?, r.u64("seq")?));
        }
        Ok(seqs)
    }

    /// A unit's fences, writes and queue entries, not its events (a batch inserts every
    /// unit's events together at its end).
    async fn apply_events_apart(&self, txn: &Txn, uow: &UnitOfWork) -> Tx<Committed> {
        for f in &uow.fences {
            self.check_fence(txn, f).await?;
        }
        for w in &uow.writes {
            self.apply_write(txn, w).await?;
        }
        for e in &uow.enqueue {
            self.enqueue_on(txn, e).await?;
        }
        Ok(Committed { event_seqs: Vec::new(), replayed: None })
    }

    async fn apply(&self, txn: &Txn, uow: &UnitOfWork) -> Tx<Committed> {
        let mut committed = self.apply_events_apart(txn, uow).await?;
        let events: Vec<&NewEvent> = uow.events.iter().collect();
        let seqs: std::collections::HashMap<String, u64> =
            self.insert_events(txn, &events).await?.into_iter().collect();
        committed.event_seqs = seqs_of(&uow.events, &seqs)?;
        Ok(committed)
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

    /// Adds or merges a queue entry inside `txn` (see `crate::queue` for the semantics):
    /// unleased, the earliest due time wins; leased, the earliest enqueued time goes to
    /// `requeue_at` and the holder's `complete` makes it the next due time.
    pub(crate) async fn enqueue_on(&self, txn: &impl ConnectionTrait, e: &Enqueue) -> Tx<()> {
        self.enqueue_each(txn, &[e]).await
    }

    /// [`Self::enqueue_on`] for entries of distinct keys (a batch of creates' work), in
    /// one statement: each row merges with its key's as its own statement would.
    pub(crate) async fn enqueue_each(
        &self,
        txn: &impl ConnectionTrait,
        entries: &[&Enqueue],
    ) -> Tx<()> {
        let least = sql::least(self.backend);
        let rows = vec!["(?, ?, ?, 0, NULL, NULL, NULL, NULL)"; entries.len()].join(", ");
        let mut values = Vec::with_capacity(entries.len() * 3);
        for e in entries {
            values.extend([s(e.kind.as_str()), s(&e.key), ts(e.not_before)]);
        }
        let st = self.st(
            &format!(
                "INSERT INTO work_queue \
                 (kind, item_key, not_before, attempts, lease_owner, lease_until, last_error, requeue_at) \
                 VALUES {rows} \
                 ON CONFLICT (kind, item_key) DO UPDATE SET \
                 not_before = CASE WHEN work_queue.lease_owner IS NULL \
                   THEN {least}(work_queue.not_before, excluded.not_before) \
                   ELSE work_queue.not_before END, \
                 requeue_at = CASE WHEN work_queue.lease_owner IS NULL THEN NULL \
                   ELSE {least}(COALESCE(work_queue.requeue_at, excluded.not_before), \
                                excluded.not_before) END"
            ),
            values,
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

/// The batch's load balancer status writes that are the first write of their unit, when
/// they can go ahead of every other write of the batch without changing any outcome: at
/// least two, no load balancer's status written twice, and no load balancer inserted or
/// changed in the batch (a status write touches only observed columns, which no other
/// write of a unit reads).
fn statuses_first(batch: &[UnitOfWork]) -> Option<Vec<&Write>> {
    let mut firsts = Vec::new();
    let mut ids = std::collections::HashSet::new();
    for uow in batch {
        for (i, w) in uow.writes.iter().enumerate() {
            match w {
                Write::SetLoadBalancerStatus { load_balancer_id, .. } => {
                    if !ids.insert(load_balancer_id) {
                        return None;
                    }
                    if i == 0 {
                        firsts.push(w);
                    }
                }
                Write::InsertLoadBalancer(_) | Write::UpdateLoadBalancer { .. } => return None,
                _ => {}
            }
        }
    }
    (firsts.len() >= 2).then_some(firsts)
}

/// The billing opens that are the second write of units whose first write is a load
/// balancer status (the statuses going first together, [`statuses_first`]): they may go
/// together right after the statuses when moving them ahead of the earlier units' other
/// writes changes nothing — no unit of the batch closes billing, and no interval is
/// opened twice — and at least two go. Else `None`: each in its unit's place.
fn opens_second(batch: &[UnitOfWork]) -> Option<Vec<&Write>> {
    let mut opens = Vec::new();
    let mut keys = std::collections::HashSet::new();
    for uow in batch {
        for (i, w) in uow.writes.iter().enumerate() {
            match w {
                Write::CloseBilling { .. } => return None,
                Write::OpenBilling(b) => {
                    if !keys.insert((&b.meter, &b.resource)) {
                        return None;
                    }
                    let after_status =
                        matches!(uow.writes.first(), Some(Write::SetLoadBalancerStatus { .. }));
                    if i == 1 && after_status {
                        opens.push(w);
                    }
                }
                _ => {}
            }
        }
    }
    (opens.len() >= 2).then_some(opens)
}

/// The `seq` each of `events` got, in their order, from the seqs the insert returned by
/// event id.
fn seqs_of(
    events: &[NewEvent],
    seqs: &std::collections::HashMap<String, u64>,
) -> Result<Vec<u64>, StoreError> {
    events
        .iter()
        .map(|e| {
            seqs.get(e.event_id.as_str())
                .copied()
                .ok_or_else(|| StoreError::internal(format!("event {} got no seq", e.event_id)))
        })
        .collect()
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
