//! Opening the database for a binary: connect, refuse a schema newer than this binary,
//! then apply this binary's pending migrations.
//!
//! Invariant: a binary never runs against a schema it does not know — an older binary
//! started after a newer one migrated stops with a message naming the versions, before
//! it reads or writes a row.

use bc_store::SqlStore;
use bc_store::migration::Migrator;
use sea_orm_migration::MigratorTrait;

/// Why the database could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// Connecting or migrating failed.
    #[error("database: {0}")]
    Store(#[from] bc_domain::StoreError),
    /// Reading the migration table failed.
    #[error("database: reading the applied migrations: {0}")]
    Migrations(String),
    /// The database was migrated by a newer binary.
    #[error(
        "the database schema is newer than this binary: it has migration(s) {unknown:?} this \
         binary does not know (its newest is {newest:?}); run the newer bc-api/bc-reconciler, \
         or restore a backup taken before the upgrade"
    )]
    SchemaTooNew {
        /// Applied migrations this binary does not have.
        unknown: Vec<String>,
        /// This binary's newest migration.
        newest: String,
    },
}

/// The migrations applied to the database that this binary does not know.
pub async fn unknown_migrations(store: &SqlStore) -> Result<Vec<String>, DbError> {
    let known: Vec<String> = Migrator::migrations().iter().map(|m| m.name().to_owned()).collect();
    let applied = Migrator::get_migration_models(store.connection())
        .await
        .map_err(|e| DbError::Migrations(e.to_string()))?;
    Ok(applied.into_iter().map(|m| m.version).filter(|v| !known.contains(v)).collect())
}

/// The newest migration this binary carries.
pub fn newest_migration() -> String {
    Migrator::migrations().last().map(|m| m.name().to_owned()).unwrap_or_default()
}

/// Connects to `url`, refuses a newer schema, and applies pending migrations.
pub async fn open(url: &str) -> Result<SqlStore, DbError> {
    let store = SqlStore::connect_unmigrated(url).await?;
    let unknown = unknown_migrations(&store).await?;
    if !unknown.is_empty() {
        return Err(DbError::SchemaTooNew { unknown, newest: newest_migration() });
    }
    store.migrate().await?;
    Ok(store)
}
