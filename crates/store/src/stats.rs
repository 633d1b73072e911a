//! What a store has sent to its database, counted: statements, transactions begun, and
//! per named write its attempts, its misses (a conditional write that touched no row) and
//! the time it ran (after waiting its turn at SQLite's write gate). The benchmarks read
//! these to say what one activation or one provider call costs in round trips — a
//! measure that, unlike wall time, does not move with the machine's load.
//!
//! Invariant: counting never changes what is sent; every statement of the crate is built
//! by `SqlStore::st`, every transaction by `SqlStore::begin`, every write runs through
//! `SqlStore::write`, and each call on the pool itself counts its checkout where it is
//! made, so the totals are exact (a retried
//! attempt counts again: it was sent again).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// One named write's totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Attempts (a single statement or a whole transaction each).
    pub attempts: u64,
    /// Single-statement conditional writes that touched no row (a lease held elsewhere,
    /// a compare-and-swap that lost).
    pub misses: u64,
    /// Time spent running them, their turn at the write gate already taken.
    pub busy: Duration,
}

/// The totals of one store (shared by its clones), since it was opened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Statements sent (each one round trip to the database).
    pub statements: u64,
    /// Transactions begun (each adds a `BEGIN` and a `COMMIT` or `ROLLBACK` round trip).
    pub transactions: u64,
    /// Connections taken from the pool: one per transaction and one per statement sent
    /// outside a transaction. sqlx pings each one as it goes back (and, unless the store
    /// turns it off, as it is handed out): a round trip each.
    pub checkouts: u64,
    /// Per named write.
    pub writes: BTreeMap<&'static str, WriteStats>,
    /// Statements by shape (`UPDATE work_queue SET lease_owner`, `SELECT … FROM
    /// load_balancers`: see [`shape`]), counted only while
    /// `SqlStore::count_statement_shapes` is on (the benchmarks' breakdown); else empty.
    pub shapes: BTreeMap<String, u64>,
}

impl StoreStats {
    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &StoreStats) -> StoreStats {
        let writes = self
            .writes
            .iter()
            .map(|(k, v)| {
                let then = earlier.writes.get(k).copied().unwrap_or_default();
                let d = WriteStats {
                    attempts: v.attempts - then.attempts,
                    misses: v.misses - then.misses,
                    busy: v.busy.saturating_sub(then.busy),
                };
                (*k, d)
            })
            .filter(|(_, d)| d.attempts > 0)
            .collect();
        let shapes = self
            .shapes
            .iter()
            .map(|(k, n)| (k.clone(), n - earlier.shapes.get(k).copied().unwrap_or(0)))
            .filter(|(_, n)| *n > 0)
            .collect();
        StoreStats {
            statements: self.statements - earlier.statements,
            transactions: self.transactions - earlier.transactions,
            checkouts: self.checkouts - earlier.checkouts,
            writes,
            shapes,
        }
    }

    /// Write attempts of every name together.
    pub fn write_attempts(&self) -> u64 {
        self.writes.values().map(|w| w.attempts).sum()
    }

    /// Time spent running writes of every name together.
    pub fn write_busy(&self) -> Duration {
        self.writes.values().map(|w| w.busy).sum()
    }
}

/// The live counters behind [`StoreStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    statements: AtomicU64,
    transactions: AtomicU64,
    checkouts: AtomicU64,
    writes: Mutex<BTreeMap<&'static str, WriteStats>>,
    /// Whether statements are also counted by shape (off in service: it costs a lock and
    /// a string per statement).
    pub(crate) by_shape: AtomicBool,
    shapes: Mutex<BTreeMap<String, u64>>,
}

impl Counters {
    pub(crate) fn statement(&self, text: &str) {
        self.statements.fetch_add(1, Ordering::Relaxed);
        if self.by_shape.load(Ordering::Relaxed) {
            let mut shapes = self.shapes.lock().unwrap_or_else(|e| e.into_inner());
            *shapes.entry(shape(text)).or_default() += 1;
        }
    }

    pub(crate) fn transaction(&self) {
        self.transactions.fetch_add(1, Ordering::Relaxed);
        self.checkout();
    }

    pub(crate) fn checkout(&self) {
        self.checkouts.fetch_add(1, Ordering::Relaxed);
    }

    fn named(&self, name: &'static str, f: impl FnOnce(&mut WriteStats)) {
        f(self.writes.lock().unwrap_or_else(|e| e.into_inner()).entry(name).or_default());
    }

    pub(crate) fn ran(&self, name: &'static str, busy: Duration) {
        self.named(name, |w| {
            w.attempts += 1;
            w.busy += busy;
        });
    }

    pub(crate) fn miss(&self, name: &'static str) {
        self.named(name, |w| w.misses += 1);
    }

    pub(crate) fn snapshot(&self) -> StoreStats {
        StoreStats {
            statements: self.statements.load(Ordering::Relaxed),
            transactions: self.transactions.load(Ordering::Relaxed),
            checkouts: self.checkouts.load(Ordering::Relaxed),
            writes: self.writes.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            shapes: self.shapes.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        }
    }
}

/// A statement's shape: its verb and table, and for an `UPDATE` the first column it sets
/// (`UPDATE work_queue SET lease_owner` is a claim, `… (fence)` a fence — a column set to
/// itself, which only locks the row — and `SET attempts` a requeue);
/// a `SELECT` without a table keeps its first expression (`SELECT pg_advisory_xact_lock`).
/// Never a bound value: statements carry `?` placeholders, not data.
pub fn shape(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().take(64).collect();
    let verb = words.first().copied().unwrap_or("").to_ascii_uppercase();
    let after = |key: &str| {
        let i = words.iter().position(|w| w.eq_ignore_ascii_case(key))?;
        words.get(i + 1).map(|w| w.trim_end_matches(|c: char| !c.is_alphanumeric() && c != '_'))
    };
    let name = |w: Option<&str>| {
        w.map(|w| w.split('(').next().unwrap_or(w).to_owned()).unwrap_or_default()
    };
    match verb.as_str() {
        "UPDATE" => {
            let column = name(after("SET"));
            // `SET c = c` (or `= table.c`) changes nothing: it locks rows, a fence.
            let set = words.iter().position(|w| w.eq_ignore_ascii_case("SET"));
            let value = set.and_then(|i| words.get(i + 3)).map(|w| w.trim_end_matches(','));
            let fence = value.is_some_and(|v| v == column || v.ends_with(&format!(".{column}")));
            let table = name(words.get(1).copied());
            format!("UPDATE {table} SET {column}{}", if fence { " (fence)" } else { "" })
        }
        "INSERT" => format!("INSERT INTO {}", name(after("INTO"))),
        "DELETE" => format!("DELETE FROM {}", name(after("FROM"))),
        "SELECT" | "WITH" => match after("FROM") {
            Some(table) => format!("{verb} … FROM {}", name(Some(table))),
            None => format!("{verb} {}", name(words.get(1).copied())),
        },
        _ => verb,
    }
}

#[cfg(test)]
mod tests {
    use super::shape;

    #[test]
    fn a_shape_names_the_verb_and_table_never_a_value() {
        let fence =
            "UPDATE work_queue SET lease_owner = lease_owner WHERE kind = ? AND item_key = ?";
        assert_eq!(shape(fence), "UPDATE work_queue SET lease_owner (fence)");
        let fences = "UPDATE work_queue SET lease_owner = work_queue.lease_owner FROM (VALUES (?, ?, ?)) AS v";
        assert_eq!(shape(fences), "UPDATE work_queue SET lease_owner (fence)");
        let claim = "UPDATE work_queue SET lease_owner = ?, lease_until = ? WHERE kind = ?";
        assert_eq!(shape(claim), "UPDATE work_queue SET lease_owner");
        let settle = "UPDATE work_queue SET \
                      attempts = CASE v.column6 WHEN 0 THEN 0 END FROM (VALUES (?, ?)) AS v";
        assert_eq!(shape(settle), "UPDATE work_queue SET attempts");
        let read =
            "SELECT load_balancer_id, name FROM load_balancers WHERE load_balancer_id IN (?, ?)";
        assert_eq!(shape(read), "SELECT … FROM load_balancers");
        assert_eq!(shape("INSERT INTO events (event_id) VALUES (?)"), "INSERT INTO events");
        assert_eq!(shape("DELETE FROM leases WHERE name = ?"), "DELETE FROM leases");
        assert_eq!(shape("SELECT pg_advisory_xact_lock(?)"), "SELECT pg_advisory_xact_lock");
    }
}
