//! The work queue with leases.
//!
//! Invariant: at any instant an entry has at most one holder — `claim` takes only due
//! entries whose lease is absent or expired, in a single statement (PostgreSQL: rows
//! locked `FOR UPDATE SKIP LOCKED` so concurrent claimers pass each other; SQLite: one
//! conditional `UPDATE … RETURNING` under the single writer lock). Every follow-up
//! (`complete`, `fail`, `requeue`, `extend`) acts only while `lease_owner` is the caller,
//! so a replica whose lease was taken over cannot disturb the new holder. An enqueue that
//! lands while the entry is leased sets `requeued`; `complete` then keeps the entry (due,
//! unleased) instead of deleting work that arrived during the run.

use async_trait::async_trait;
use bc_domain::Timestamp;
use bc_domain::ports::{Enqueue, StoreResult, WorkItem, WorkQueue};
use sea_orm::{ConnectionTrait, DbBackend, Value};

use crate::rows::{self, WORK};
use crate::sql::{self, placeholders, s, ts};
use crate::store::SqlStore;

#[async_trait]
impl WorkQueue for SqlStore {
    async fn enqueue(&self, item: Enqueue) -> StoreResult<()> {
        self.write("enqueue", || self.enqueue_on(&self.db, &item)).await
    }

    async fn claim(
        &self,
        owner: &str,
        kinds: &[String],
        max: u32,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> StoreResult<Vec<WorkItem>> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let mut filter =
            String::from("not_before <= ? AND (lease_until IS NULL OR lease_until < ?)");
        let mut inner = vec![ts(now), ts(now)];
        if !kinds.is_empty() {
            filter.push_str(&format!(" AND kind IN ({})", placeholders(kinds.len())));
            inner.extend(kinds.iter().map(s));
        }
        inner.push(Value::from(i64::from(max)));
        let text = match self.backend {
            DbBackend::Postgres => format!(
                "UPDATE work_queue SET lease_owner = ?, lease_until = ?, requeued = FALSE \
                 WHERE (kind, item_key) IN (SELECT kind, item_key FROM work_queue WHERE {filter} \
                 ORDER BY not_before LIMIT ? FOR UPDATE SKIP LOCKED) RETURNING {WORK}"
            ),
            _ => format!(
                "UPDATE work_queue SET lease_owner = ?, lease_until = ?, requeued = FALSE \
                 WHERE rowid IN (SELECT rowid FROM work_queue WHERE {filter} \
                 ORDER BY not_before LIMIT ?) RETURNING {WORK}"
            ),
        };
        let mut values = vec![s(owner), ts(lease_until)];
        values.extend(inner);
        let st = self.st(&text, values);
        let mut items = self
            .write("claim", || async {
                let rows = self.db.query_all_raw(st.clone()).await?;
                Ok(rows.iter().map(rows::work).collect::<Result<Vec<_>, _>>()?)
            })
            .await?;
        // RETURNING gives no order; hand items out oldest-due first.
        items.sort_by(|a, b| (a.not_before, &a.kind, &a.key).cmp(&(b.not_before, &b.kind, &b.key)));
        Ok(items)
    }

    async fn complete(&self, kind: &str, key: &str, owner: &str) -> StoreResult<bool> {
        // Two single statements, no transaction needed: only the holder changes the lease
        // and only an enqueue sets `requeued`, so if the delete missed because of
        // `requeued`, the update below still finds the row held by `owner`.
        let del = self.st(
            "DELETE FROM work_queue WHERE kind = ? AND item_key = ? AND lease_owner = ? \
             AND NOT requeued",
            vec![s(kind), s(key), s(owner)],
        );
        if self.touch("complete", del).await? {
            return Ok(true);
        }
        // Re-enqueued during the run: keep it, due, for the next claimer.
        let keep = self.st(
            "UPDATE work_queue SET lease_owner = NULL, lease_until = NULL, \
             requeued = FALSE, attempts = 0, last_error = NULL \
             WHERE kind = ? AND item_key = ? AND lease_owner = ? AND requeued",
            vec![s(kind), s(key), s(owner)],
        );
        self.touch("complete", keep).await
    }

    async fn fail(
        &self,
        kind: &str,
        key: &str,
        owner: &str,
        error: &str,
        retry_at: Timestamp,
    ) -> StoreResult<bool> {
        let least = sql::least(self.backend);
        // A change enqueued during the failed run is worth trying at once, backoff or not.
        let text = format!(
            "UPDATE work_queue SET attempts = attempts + 1, last_error = ?, \
             not_before = CASE WHEN requeued THEN {least}(not_before, ?) ELSE ? END, \
             lease_owner = NULL, lease_until = NULL, requeued = FALSE \
             WHERE kind = ? AND item_key = ? AND lease_owner = ?"
        );
        let st =
            self.st(&text, vec![s(error), ts(retry_at), ts(retry_at), s(kind), s(key), s(owner)]);
        self.touch("fail", st).await
    }

    async fn requeue(
        &self,
        kind: &str,
        key: &str,
        owner: &str,
        at: Timestamp,
    ) -> StoreResult<bool> {
        let least = sql::least(self.backend);
        let text = format!(
            "UPDATE work_queue SET attempts = 0, last_error = NULL, \
             not_before = CASE WHEN requeued THEN {least}(not_before, ?) ELSE ? END, \
             lease_owner = NULL, lease_until = NULL, requeued = FALSE \
             WHERE kind = ? AND item_key = ? AND lease_owner = ?"
        );
        let st = self.st(&text, vec![ts(at), ts(at), s(kind), s(key), s(owner)]);
        self.touch("requeue", st).await
    }

    async fn extend(
        &self,
        kind: &str,
        key: &str,
        owner: &str,
        lease_until: Timestamp,
    ) -> StoreResult<bool> {
        let st = self.st(
            "UPDATE work_queue SET lease_until = ? WHERE kind = ? AND item_key = ? \
             AND lease_owner = ?",
            vec![ts(lease_until), s(kind), s(key), s(owner)],
        );
        self.touch("extend", st).await
    }

    async fn work_get(&self, kind: &str, key: &str) -> StoreResult<Option<WorkItem>> {
        let q = format!("SELECT {WORK} FROM work_queue WHERE kind = ? AND item_key = ?");
        self.one(&q, vec![s(kind), s(key)], rows::work).await
    }
}

impl SqlStore {
    /// Runs a single conditional update; whether it touched a row.
    async fn touch(&self, name: &'static str, st: sea_orm::Statement) -> StoreResult<bool> {
        self.write(name, || async {
            Ok(self.db.execute_raw(st.clone()).await?.rows_affected() > 0)
        })
        .await
    }
}
