//! The work queue with leases, and the named singleton leases.
//!
//! Invariant: at any instant an entry has at most one holder — `claim` takes only due
//! entries whose lease is absent or expired, in a single statement (PostgreSQL: rows
//! locked `FOR UPDATE SKIP LOCKED` so concurrent claimers pass each other; SQLite: one
//! conditional `UPDATE … RETURNING` under the single writer lock). Every follow-up
//! (`complete`, `fail`, `requeue`, `extend`) acts only while `lease_owner` is the caller,
//! so a replica whose lease was taken over cannot disturb the new holder. An enqueue that
//! lands while the entry is leased records its time in `requeue_at` (the earliest such),
//! leaving `not_before` alone; `complete` then keeps the entry, unleased, due at
//! `requeue_at` — exactly the time asked for, even a future one — instead of deleting work
//! that arrived during the run. A claim clears `requeue_at`: the new run starts after every
//! enqueue so far and re-reads everything. A singleton lease likewise has one holder,
//! taken over only once expired, by one conditional upsert.

use async_trait::async_trait;
use bc_domain::ports::{
    Enqueue, Lease, Leases, Page, PageRequest, QueueStatus, Settle, Settlement, StoreResult,
    WorkItem, WorkKind, WorkQueue, settle_each,
};
use bc_domain::{StoreError, Timestamp};
use sea_orm::{ConnectionTrait, DbBackend, Value};

use crate::rows::{self, LEASE, WORK};
use crate::sql::{self, placeholders, s, ts};
use crate::store::{PointRead, SqlStore};

/// Claimable now: due, and not leased or the lease expired (binds `now` twice).
const CLAIMABLE: &str = "not_before <= ? AND (lease_until IS NULL OR lease_until < ?)";

#[async_trait]
impl WorkQueue for SqlStore {
    async fn enqueue(&self, item: Enqueue) -> StoreResult<()> {
        self.write("enqueue", || {
            self.counters.checkout();
            self.enqueue_on(&self.db, &item)
        })
        .await
    }

    async fn claim(
        &self,
        owner: &str,
        kinds: &[WorkKind],
        max: u32,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> StoreResult<Vec<WorkItem>> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let mut filter = String::from(CLAIMABLE);
        let mut inner = vec![ts(now), ts(now)];
        if !kinds.is_empty() {
            filter.push_str(&format!(" AND kind IN ({})", placeholders(kinds.len())));
            inner.extend(kinds.iter().map(|k| s(k.as_str())));
        }
        inner.push(Value::from(i64::from(max)));
        let text = match self.backend {
            DbBackend::Postgres => format!(
                "UPDATE work_queue SET lease_owner = ?, lease_until = ?, requeue_at = NULL \
                 WHERE (kind, item_key) IN (SELECT kind, item_key FROM work_queue WHERE {filter} \
                 ORDER BY not_before LIMIT ? FOR UPDATE SKIP LOCKED) RETURNING {WORK}"
            ),
            _ => format!(
                "UPDATE work_queue SET lease_owner = ?, lease_until = ?, requeue_at = NULL \
                 WHERE rowid IN (SELECT rowid FROM work_queue WHERE {filter} \
                 ORDER BY not_before LIMIT ?) RETURNING {WORK}"
            ),
        };
        let mut values = vec![s(owner), ts(lease_until)];
        values.extend(inner);
        let st = self.st(&text, values);
        let mut items = self
            .write("claim", || async {
                self.counters.checkout();
                let rows = self.db.query_all_raw(st.clone()).await?;
                Ok(rows.iter().map(rows::work).collect::<Result<Vec<_>, _>>()?)
            })
            .await?;
        // RETURNING gives no order; hand items out oldest-due first.
        items.sort_by(|a, b| (a.not_before, a.kind, &a.key).cmp(&(b.not_before, b.kind, &b.key)));
        Ok(items)
    }

    async fn complete(&self, kind: WorkKind, key: &str, owner: &str) -> StoreResult<bool> {
        // Two single statements, no transaction needed: only the holder changes the lease
        // and only an enqueue sets `requeue_at`, so if the delete missed because of
        // `requeue_at`, the update below still finds the row held by `owner`.
        let del = self.st(
            "DELETE FROM work_queue WHERE kind = ? AND item_key = ? AND lease_owner = ? \
             AND requeue_at IS NULL",
            vec![s(kind.as_str()), s(key), s(owner)],
        );
        if self.touch("complete", del).await? {
            return Ok(true);
        }
        // Enqueued during the run: keep it, unleased, due when that enqueue asked.
        let keep = self.st(
            "UPDATE work_queue SET not_before = requeue_at, requeue_at = NULL, \
             lease_owner = NULL, lease_until = NULL, attempts = 0, last_error = NULL \
             WHERE kind = ? AND item_key = ? AND lease_owner = ? AND requeue_at IS NOT NULL",
            vec![s(kind.as_str()), s(key), s(owner)],
        );
        self.touch("complete", keep).await
    }

    async fn fail(
        &self,
        kind: WorkKind,
        key: &str,
        owner: &str,
        error: &str,
        retry_at: Timestamp,
    ) -> StoreResult<bool> {
        self.release_until("fail", true, kind, key, owner, error, retry_at).await
    }

    async fn defer(
        &self,
        kind: WorkKind,
        key: &str,
        owner: &str,
        why: &str,
        at: Timestamp,
    ) -> StoreResult<bool> {
        // `fail` without the count: the item did not fail, it waited its turn.
        self.release_until("defer", false, kind, key, owner, why, at).await
    }

    async fn requeue(
        &self,
        kind: WorkKind,
        key: &str,
        owner: &str,
        at: Timestamp,
    ) -> StoreResult<bool> {
        let text = format!(
            "UPDATE work_queue SET attempts = 0, last_error = NULL, not_before = {}, \
             requeue_at = NULL, lease_owner = NULL, lease_until = NULL \
             WHERE kind = ? AND item_key = ? AND lease_owner = ?",
            self.earliest_of_requeue()
        );
        let v = vec![ts(at), ts(at), s(kind.as_str()), s(key), s(owner)];
        self.touch("requeue", self.st(&text, v)).await
    }

    async fn extend(
        &self,
        kind: WorkKind,
        key: &str,
        owner: &str,
        lease_until: Timestamp,
    ) -> StoreResult<bool> {
        let st = self.st(
            "UPDATE work_queue SET lease_until = ? WHERE kind = ? AND item_key = ? \
             AND lease_owner = ?",
            vec![ts(lease_until), s(kind.as_str()), s(key), s(owner)],
        );
        self.touch("extend", st).await
    }

    async fn work_get(&self, kind: WorkKind, key: &str) -> StoreResult<Option<WorkItem>> {
        // A point read grouped with the other reads of the kind arriving together (each
        // activation's lease check before its provider calls): one query for many.
        let how = PointRead {
            table: "work_queue",
            columns: WORK,
            within: Some(("kind", kind.as_str())),
            key: "item_key",
            decode: rows::work,
            key_of: |w| w.key.clone(),
        };
        let Some(group) = self.groups.work.get(&kind) else {
            return Err(StoreError::internal(format!("no read group for kind {kind}")));
        };
        self.read_grouped(group, how, key.to_owned()).await
    }

    async fn queue_status(&self, now: Timestamp) -> StoreResult<Vec<QueueStatus>> {
        let mut out = Vec::with_capacity(WorkKind::ALL.len());
        for kind in WorkKind::ALL {
            let k = || s(kind.as_str());
            let depth = "SELECT COUNT(*) AS n FROM work_queue WHERE kind = ?";
            let due =
                format!("SELECT COUNT(*) AS n FROM work_queue WHERE kind = ? AND {CLAIMABLE}");
            let failing = "SELECT COUNT(*) AS n FROM work_queue \
                           WHERE kind = ? AND last_error IS NOT NULL";
            let oldest = format!(
                "SELECT {WORK} FROM work_queue WHERE kind = ? AND {CLAIMABLE} \
                 ORDER BY not_before LIMIT 1"
            );
            out.push(QueueStatus {
                kind,
                depth: self.count(depth, vec![k()]).await?,
                due: self.count(&due, vec![k(), ts(now), ts(now)]).await?,
                failing: self.count(failing, vec![k()]).await?,
                oldest_due: self.one(&oldest, vec![k(), ts(now), ts(now)], rows::work).await?,
            });
        }
        Ok(out)
    }

    async fn work_list_failing(
        &self,
        kind: WorkKind,
        page: &PageRequest<String>,
    ) -> StoreResult<Page<WorkItem, String>> {
        let q = format!("SELECT {WORK} FROM work_queue WHERE kind = ? AND last_error IS NOT NULL");
        let v = vec![s(kind.as_str())];
        self.page(&q, v, "item_key", page, rows::work, |w| w.key.clone()).await
    }

    async fn release(&self, kind: WorkKind, key: &str, owner: &str) -> StoreResult<bool> {
        // The entry was due when claimed, so its `not_before` is already past: keeping it
        // (or an earlier enqueue of the run) leaves it due at once for the next claimer.
        let least = sql::least(self.backend);
        let st = self.st(
            &format!(
                "UPDATE work_queue SET lease_owner = NULL, lease_until = NULL, \
                 not_before = CASE WHEN requeue_at IS NULL THEN not_before \
                 ELSE {least}(not_before, requeue_at) END, requeue_at = NULL \
                 WHERE kind = ? AND item_key = ? AND lease_owner = ?"
            ),
            vec![s(kind.as_str()), s(key), s(owner)],
        );
        self.touch("release", st).await
    }

    async fn settle(&self, batch: &[Settlement]) -> StoreResult<Vec<bool>> {
        let mut held = Vec::with_capacity(batch.len());
        for chunk in batch.chunks(SETTLE_CHUNK) {
            held.extend(self.settle_chunk(chunk).await?);
        }
        Ok(held)
    }

    async fn next_due(&self, kind: WorkKind) -> StoreResult<Option<Timestamp>> {
        // Claimable once due and once its lease (if any) has ended: `lease_until < now`.
        let q = "SELECT MIN(CASE WHEN lease_until IS NOT NULL AND lease_until >= not_before \
                 THEN lease_until + 1 ELSE not_before END) AS n FROM work_queue WHERE kind = ?";
        let found = self.one(q, vec![s(kind.as_str())], |r| crate::sql::Row(r).opt_ts("n")).await?;
        Ok(found.flatten())
    }
}

#[async_trait]
impl Leases for SqlStore {
    async fn lease_acquire(
        &self,
        name: &str,
        owner: &str,
        now: Timestamp,
        until: Timestamp,
    ) -> StoreResult<bool> {
        let st = self.st(
            "INSERT INTO leases (name, owner, lease_until) VALUES (?, ?, ?) \
             ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, \
             lease_until = excluded.lease_until \
             WHERE leases.owner = excluded.owner OR leases.lease_until < ?",
            vec![s(name), s(owner), ts(until), ts(now)],
        );
        self.touch("lease_acquire", st).await
    }

    async fn lease_release(&self, name: &str, owner: &str) -> StoreResult<bool> {
        let st =
            self.st("DELETE FROM leases WHERE name = ? AND owner = ?", vec![s(name), s(owner)]);
        self.touch("lease_release", st).await
    }

    async fn lease_get(&self, name: &str) -> StoreResult<Option<Lease>> {
        let q = format!("SELECT {LEASE} FROM leases WHERE name = ?");
        self.one(&q, vec![s(name)], rows::lease).await
    }
}

/// Most settlements in one statement (6 values each: far below either backend's limit
/// on bound values).
const SETTLE_CHUNK: usize = 500;

impl SqlStore {
    /// Settles `chunk` in one statement: an `UPDATE … FROM (VALUES …)` joining each row
    /// to its settlement on kind, key and owner, so each lands only while its owner holds
    /// it — the same condition and the same columns as `requeue`, `fail` and `defer`,
    /// which it is row by row. The rows it returned are the ones held. A batch naming
    /// one item twice (two claims of it by this replica) goes one by one instead, so each
    /// answer stays its own.
    async fn settle_chunk(&self, chunk: &[Settlement]) -> StoreResult<Vec<bool>> {
        let mut keys = std::collections::HashSet::with_capacity(chunk.len());
        if chunk.len() == 1 || !chunk.iter().all(|x| keys.insert((x.kind, x.key.as_str()))) {
            return settle_each(self, chunk).await;
        }
        let mut values = Vec::with_capacity(chunk.len() * 6);
        for x in chunk {
            // column5: the `last_error` (NULL for a requeue); column6: the attempts rule
            // (0 reset, 1 count one more, 2 keep).
            let (at, error, attempts) = match &x.how {
                Settle::Requeue { at } => (*at, None, 0i64),
                Settle::Fail { error, at } => (*at, Some(error.as_str()), 1),
                Settle::Defer { why, at } => (*at, Some(why.as_str()), 2),
            };
            values.extend([
                s(x.kind.as_str()),
                s(&x.key),
                s(&x.owner),
                ts(at),
                sql::os(error),
                Value::from(attempts),
            ]);
        }
        let rows = vec!["(?, ?, ?, ?, ?, ?)"; chunk.len()].join(", ");
        let least = sql::least(self.backend);
        let text = format!(
            "UPDATE work_queue SET \
             attempts = CASE v.column6 WHEN 0 THEN 0 WHEN 1 THEN work_queue.attempts + 1 \
               ELSE work_queue.attempts END, \
             last_error = v.column5, \
             not_before = CASE WHEN work_queue.requeue_at IS NULL THEN v.column4 \
               ELSE {least}(work_queue.requeue_at, v.column4) END, \
             requeue_at = NULL, lease_owner = NULL, lease_until = NULL \
             FROM (VALUES {rows}) AS v \
             WHERE work_queue.kind = v.column1 AND work_queue.item_key = v.column2 \
             AND work_queue.lease_owner = v.column3 \
             RETURNING work_queue.kind AS kind, work_queue.item_key AS item_key"
        );
        let st = self.st(&text, values);
        let done: std::collections::HashSet<(String, String)> = self
            .write("settle", || async {
                self.counters.checkout();
                let rows = self.db.query_all_raw(st.clone()).await?;
                let r = rows.iter().map(|r| {
                    let r = sql::Row(r);
                    Ok((r.string("kind")?, r.string("item_key")?))
                });
                Ok(r.collect::<Result<_, StoreError>>()?)
            })
            .await?;
        let held: Vec<bool> = chunk
            .iter()
            .map(|x| done.contains(&(x.kind.as_str().to_owned(), x.key.clone())))
            .collect();
        let misses = held.iter().filter(|h| !**h).count();
        for _ in 0..misses {
            self.counters.miss("settle");
        }
        Ok(held)
    }

    /// The next due time of a run that ends wanting another at `?` (bound twice): that
    /// time, or the earlier one enqueued during the run.
    fn earliest_of_requeue(&self) -> String {
        let least = sql::least(self.backend);
        format!("CASE WHEN requeue_at IS NULL THEN ? ELSE {least}(requeue_at, ?) END")
    }

    /// Ends `owner`'s run of an item that must run again at `at` (or earlier, when a
    /// change enqueued during the run asked for an earlier time — it wins over the wait):
    /// `why` as `last_error`, lease dropped, and one more attempt counted when
    /// `counts_attempt` (a failure; a budget deferral is not one). Whether `owner` held it.
    #[allow(clippy::too_many_arguments)]
    async fn release_until(
        &self,
        name: &'static str,
        counts_attempt: bool,
        kind: WorkKind,
        key: &str,
        owner: &str,
        why: &str,
        at: Timestamp,
    ) -> StoreResult<bool> {
        let attempts = if counts_attempt { "attempts = attempts + 1, " } else { "" };
        let text = format!(
            "UPDATE work_queue SET {attempts}last_error = ?, \
             not_before = {}, requeue_at = NULL, lease_owner = NULL, lease_until = NULL \
             WHERE kind = ? AND item_key = ? AND lease_owner = ?",
            self.earliest_of_requeue()
        );
        let v = vec![s(why), ts(at), ts(at), s(kind.as_str()), s(key), s(owner)];
        self.touch(name, self.st(&text, v)).await
    }

    /// Runs a single conditional update; whether it touched a row.
    pub(crate) async fn touch(
        &self,
        name: &'static str,
        st: sea_orm::Statement,
    ) -> StoreResult<bool> {
        let touched = self
            .write(name, || async {
                self.counters.checkout();
                Ok(self.db.execute_raw(st.clone()).await?.rows_affected() > 0)
            })
            .await?;
        if !touched {
            self.counters.miss(name);
        }
        Ok(touched)
    }
}
