//! How database errors become [`StoreError`]s, and the named retry wrapper every
//! transaction runs in.
//!
//! Invariant: a retry re-runs the whole transaction from `BEGIN` (never a statement inside
//! one), only for errors the database itself calls transient (SQLite busy/locked,
//! PostgreSQL serialization failure or deadlock), a bounded number of times; everything
//! else is classified once, here.

use std::future::Future;
use std::time::Duration;

use bc_domain::StoreError;
use bc_domain::model::IdempotencyRecord;
use sea_orm::{DbErr, RuntimeErr, sqlx};

/// Most attempts of one transaction (the first run included).
const MAX_ATTEMPTS: u32 = 10;
/// Upper bound of the random pause before a retry, growing with the attempt number.
const BACKOFF_STEP_MS: u64 = 5;

/// Why a transaction attempt ends without committing: worth another attempt, final, or
/// a create's replay.
#[derive(Debug)]
pub(crate) enum TxError {
    /// The database asked us to try again (busy, serialization failure, deadlock).
    Retry(String),
    /// Final.
    Fail(StoreError),
    /// Not a failure: the unit of work stored a create's `requestId` that a request with
    /// the same body stored first. It is rolled back, and the commit answers `Ok` with
    /// this record (`Committed::replayed`).
    Replayed(Box<IdempotencyRecord>),
}

impl From<StoreError> for TxError {
    fn from(e: StoreError) -> Self {
        TxError::Fail(e)
    }
}

impl From<DbErr> for TxError {
    fn from(e: DbErr) -> Self {
        match classify(&e) {
            Class::Transient => TxError::Retry(e.to_string()),
            _ => TxError::Fail(to_store_error(e)),
        }
    }
}

/// What kind of failure a database error is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// A unique or primary key refused the row.
    Unique,
    /// A foreign key found no parent row.
    ForeignKey,
    /// Busy / locked / serialization failure / deadlock: retry the transaction.
    Transient,
    /// The database cannot be reached.
    Unavailable,
    /// The database is up but refuses to store anything more: disk full, file or
    /// transaction read-only. Reads still work; the write changed nothing.
    NotWritable,
    /// Anything else.
    Other,
}

fn sqlx_error(e: &DbErr) -> Option<&sqlx::Error> {
    match e {
        DbErr::Conn(RuntimeErr::SqlxError(x))
        | DbErr::Exec(RuntimeErr::SqlxError(x))
        | DbErr::Query(RuntimeErr::SqlxError(x)) => Some(x),
        _ => None,
    }
}

/// Classifies by the database's own error code, read with the rules of the backend that
/// raised it (the two code spaces overlap: PostgreSQL's SQLSTATE 22021 read as a SQLite
/// number would look like "busy").
pub(crate) fn classify(e: &DbErr) -> Class {
    if let DbErr::ConnectionAcquire(_) | DbErr::Conn(_) = e {
        return Class::Unavailable;
    }
    let Some(x) = sqlx_error(e) else { return Class::Other };
    match x {
        sqlx::Error::Database(d) => {
            let code = d.code().map(|c| c.into_owned()).unwrap_or_default();
            if d.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
                classify_sqlite(&code)
            } else if d.try_downcast_ref::<sqlx::postgres::PgDatabaseError>().is_some() {
                classify_postgres(&code)
            } else {
                Class::Other
            }
        }
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => Class::Unavailable,
        _ => Class::Other,
    }
}

/// SQLite's extended result codes: 2067 unique, 1555 primary key, 787 foreign key; the
/// primary code (low byte) 5 busy or 6 locked is transient, 8 read-only and 13 full (and
/// 778, the write(2) that failed, typically for want of space) refuse writes, whatever
/// the extension.
pub(crate) fn classify_sqlite(code: &str) -> Class {
    match code.parse::<u32>() {
        Ok(2067 | 1555) => Class::Unique,
        Ok(787) => Class::ForeignKey,
        Ok(778) => Class::NotWritable,
        Ok(n) if matches!(n & 0xff, 5 | 6) => Class::Transient,
        Ok(n) if matches!(n & 0xff, 8 | 13) => Class::NotWritable,
        _ => Class::Other,
    }
}

/// PostgreSQL's SQLSTATEs: 23505 unique, 23503 foreign key, 40001 serialization failure
/// and 40P01 deadlock are transient, class 08 (connection), 57P01/57P02/57P03 (admin or
/// crash shutdown, cannot connect now) and 53300 (too many connections) unavailable,
/// 53100 (disk full) and 25006 (read-only transaction, a standby) not writable;
/// everything else (42501 privilege, 22021 bad byte sequence, …) is final.
pub(crate) fn classify_postgres(code: &str) -> Class {
    match code {
        "23505" => Class::Unique,
        "23503" => Class::ForeignKey,
        "40001" | "40P01" => Class::Transient,
        "53100" | "25006" => Class::NotWritable,
        c if c.starts_with("08") || matches!(c, "57P01" | "57P02" | "57P03" | "53300") => {
            Class::Unavailable
        }
        _ => Class::Other,
    }
}

/// A database error as a store error when no better context is known.
pub(crate) fn to_store_error(e: DbErr) -> StoreError {
    match classify(&e) {
        Class::Unavailable => StoreError::Unavailable(e.to_string()),
        Class::NotWritable => StoreError::NotWritable(e.to_string()),
        Class::Unique => StoreError::AlreadyExists("row".into()),
        Class::ForeignKey => StoreError::NotFound("referenced row".into()),
        Class::Transient => StoreError::Unavailable(format!("database busy: {e}")),
        Class::Other => StoreError::internal(e.to_string()),
    }
}

/// Maps a unique violation to `AlreadyExists(what)` and a foreign-key violation to
/// `NotFound(parent)`, the two conflicts a caller can act on.
pub(crate) fn conflict(
    what: impl FnOnce() -> String,
    parent: &str,
) -> impl FnOnce(DbErr) -> TxError {
    move |e| match classify(&e) {
        Class::Unique => TxError::Fail(StoreError::AlreadyExists(what())),
        Class::ForeignKey => TxError::Fail(StoreError::NotFound(parent.to_owned())),
        _ => TxError::from(e),
    }
}

/// Runs `attempt` (one whole transaction) until it succeeds, fails for good, or
/// [`MAX_ATTEMPTS`] transient failures happened; waits a small random pause between
/// attempts so that colliding writers spread out. `name` labels the logs.
pub(crate) async fn with_retry<T, F, Fut>(
    name: &'static str,
    mut attempt: F,
) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, TxError>>,
{
    let mut n = 0;
    loop {
        n += 1;
        match attempt().await {
            Ok(v) => return Ok(v),
            Err(TxError::Fail(e)) => return Err(e),
            // Only a commit stores `requestId`s, and it answers a replay itself.
            Err(TxError::Replayed(_)) => {
                return Err(StoreError::internal(format!("{name}: a replay outside a commit")));
            }
            Err(TxError::Retry(why)) if n >= MAX_ATTEMPTS => {
                tracing::warn!(transaction = name, attempts = n, "giving up: {why}");
                return Err(StoreError::Unavailable(format!(
                    "{name}: database busy after {n} attempts"
                )));
            }
            Err(TxError::Retry(why)) => {
                tracing::debug!(transaction = name, attempt = n, "retrying: {why}");
                let cap = BACKOFF_STEP_MS * u64::from(n);
                tokio::time::sleep(Duration::from_millis(jitter(cap))).await;
            }
        }
    }
}

/// A random number of milliseconds in `0..=cap`.
fn jitter(cap: u64) -> u64 {
    use rand::RngExt;
    rand::rng().random_range(0..=cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_backend_is_read_by_its_own_codes() {
        // PostgreSQL: privilege, bad byte sequence and division by zero are final. Read
        // as SQLite numbers their low byte is 5 ("busy"): the old single table retried
        // them ten times and reported the store unavailable.
        for code in ["42501", "22021", "22022"] {
            assert_eq!(classify_postgres(code), Class::Other, "{code}");
            assert_eq!(classify_sqlite(code), Class::Transient, "{code} as a SQLite number");
        }
        assert_eq!(classify_postgres("23505"), Class::Unique);
        assert_eq!(classify_postgres("23503"), Class::ForeignKey);
        assert_eq!(classify_postgres("40001"), Class::Transient);
        assert_eq!(classify_postgres("40P01"), Class::Transient);
        assert_eq!(classify_postgres("08006"), Class::Unavailable);
        assert_eq!(classify_postgres("57P01"), Class::Unavailable);
        assert_eq!(classify_postgres("57P02"), Class::Unavailable);
        assert_eq!(classify_postgres("53300"), Class::Unavailable);
        assert_eq!(classify_postgres("53100"), Class::NotWritable);
        assert_eq!(classify_postgres("25006"), Class::NotWritable);
        // SQLite: full, read-only (plain and extended), a failed write(2).
        for code in ["13", "8", "264", "520", "1032", "778"] {
            assert_eq!(classify_sqlite(code), Class::NotWritable, "{code}");
        }
        // SQLite: busy, busy-recovery, busy-snapshot, locked; unique, primary key, FK.
        for code in ["5", "261", "517", "6", "262"] {
            assert_eq!(classify_sqlite(code), Class::Transient, "{code}");
        }
        assert_eq!(classify_sqlite("2067"), Class::Unique);
        assert_eq!(classify_sqlite("1555"), Class::Unique);
        assert_eq!(classify_sqlite("787"), Class::ForeignKey);
        assert_eq!(classify_sqlite("19"), Class::Other);
    }

    #[tokio::test]
    async fn retries_transient_errors_then_gives_up() {
        let mut calls = 0;
        let r: Result<(), _> = with_retry("test", || {
            calls += 1;
            async { Err(TxError::Retry("busy".into())) }
        })
        .await;
        assert!(matches!(r, Err(StoreError::Unavailable(_))));
        assert_eq!(calls, MAX_ATTEMPTS);
    }

    #[tokio::test]
    async fn does_not_retry_final_errors() {
        let mut calls = 0;
        let r: Result<(), _> = with_retry("test", || {
            calls += 1;
            async { Err(TxError::Fail(StoreError::Stale("pool".into()))) }
        })
        .await;
        assert_eq!(r, Err(StoreError::Stale("pool".into())));
        assert_eq!(calls, 1);
    }

    #[tokio::test]
    async fn returns_the_first_success() {
        let mut calls = 0;
        let r = with_retry("test", || {
            calls += 1;
            let ok = calls == 3;
            async move { if ok { Ok(7) } else { Err(TxError::Retry("busy".into())) } }
        })
        .await;
        assert_eq!(r, Ok(7));
        assert_eq!(calls, 3);
    }
}
