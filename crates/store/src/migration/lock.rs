//! The migration lock: one migrating process per database at a time, across processes.
//!
//! Invariant: `SqlStore::migrate` holds it from before it reads which migrations are
//! pending until the last one is recorded, so processes that start together on a fresh
//! database (a first install: the migration Job and every replica migrating at start)
//! apply each migration once, and the others find nothing pending instead of failing on
//! a table being created. On PostgreSQL it is a session advisory lock on a connection of
//! its own, so the lock dies with the process; on a SQLite file it is an exclusive lock
//! on a file beside the database, which the OS releases when the process dies. An
//! in-memory SQLite database has one connection and one process: no lock.

use std::path::PathBuf;

use bc_domain::StoreError;
use sea_orm::sqlx::{self, Connection as _};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};

use crate::error::to_store_error;

/// The advisory lock key of migrations: `bc-store migrations` read as a number, so no
/// other lock of this database is likely to share it.
const ADVISORY_KEY: i64 = 0x6263_2d6d_6967_7261;

/// A held migration lock; released when dropped (PostgreSQL: the session ends).
pub(crate) enum MigrationLock {
    /// In-memory SQLite: nothing to hold.
    None,
    /// The PostgreSQL session that holds the advisory lock.
    Postgres(sqlx::PgConnection),
    /// The locked file beside a SQLite database.
    File(std::fs::File),
}

impl MigrationLock {
    /// Waits for the lock of `db`'s database and takes it.
    pub(crate) async fn acquire(db: &DatabaseConnection) -> Result<Self, StoreError> {
        match db.get_database_backend() {
            DbBackend::Postgres => {
                let pool = db.get_postgres_connection_pool();
                // Off the pool: a session lock on a pooled connection would outlive this
                // call, held by whichever caller got that connection next.
                let mut conn = pool
                    .acquire()
                    .await
                    .map_err(|e| StoreError::Unavailable(format!("migration lock: {e}")))?
                    .detach();
                sqlx::query("SELECT pg_advisory_lock($1)")
                    .bind(ADVISORY_KEY)
                    .execute(&mut conn)
                    .await
                    .map_err(|e| StoreError::Unavailable(format!("migration lock: {e}")))?;
                Ok(Self::Postgres(conn))
            }
            _ => match sqlite_file(db).await? {
                None => Ok(Self::None),
                Some(path) => {
                    let mut name = path.into_os_string();
                    name.push(".migrate-lock");
                    let file = tokio::task::spawn_blocking(move || {
                        let file = std::fs::OpenOptions::new()
                            .create(true)
                            .truncate(false)
                            .write(true)
                            .open(&name)?;
                        file.lock()?;
                        Ok::<_, std::io::Error>(file)
                    })
                    .await
                    .map_err(|e| StoreError::internal(format!("migration lock task: {e}")))?
                    .map_err(|e| StoreError::Unavailable(format!("migration lock file: {e}")))?;
                    Ok(Self::File(file))
                }
            },
        }
    }

    /// Releases the lock (also released on drop, when the session or file closes).
    pub(crate) async fn release(self) {
        match self {
            Self::None => {}
            // Closing the session releases its advisory locks.
            Self::Postgres(conn) => {
                let _ = conn.close().await;
            }
            Self::File(file) => {
                let _ = file.unlock();
            }
        }
    }
}

/// The file of a SQLite database (`None` in memory), as SQLite itself names it.
async fn sqlite_file(db: &DatabaseConnection) -> Result<Option<PathBuf>, StoreError> {
    let row = db
        .query_one_raw(Statement::from_string(
            DbBackend::Sqlite,
            "SELECT file FROM pragma_database_list WHERE name = 'main'",
        ))
        .await
        .map_err(to_store_error)?;
    let file = row.and_then(|r| r.try_get::<String>("", "file").ok()).unwrap_or_default();
    Ok((!file.is_empty()).then(|| PathBuf::from(file)))
}
