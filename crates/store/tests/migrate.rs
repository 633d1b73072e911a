//! Migrations when several processes start at once on a fresh database — what a first
//! install on Kubernetes does (deploy/: the migration Job, two bc-api and two
//! bc-reconciler replicas, every one of them migrating at start).
//!
//! Invariant checked: concurrent `migrate` calls, each from its own connection pool (as
//! separate processes have), all succeed and leave every migration applied once; none
//! fails on a table another one is creating. Loops are bounded; nothing is timed.

use std::sync::Arc;

use bc_store::SqlStore;
use bc_store::migration::Migrator;
use bc_store::testing::TempDir;
use sea_orm::{ConnectionTrait, Database};
use sea_orm_migration::MigratorTrait;

/// How many "processes" migrate at once.
const MIGRATORS: usize = 6;

/// Runs [`MIGRATORS`] migrations of `url` at once, each on its own pool; returns the
/// errors.
async fn migrate_at_once(url: &str) -> Vec<String> {
    let mut stores = Vec::new();
    for _ in 0..MIGRATORS {
        stores.push(Arc::new(SqlStore::connect_unmigrated(url).await.expect("connect")));
    }
    let runs: Vec<_> = stores
        .iter()
        .cloned()
        .map(|s| tokio::spawn(async move { s.migrate().await.map_err(|e| e.to_string()) }))
        .collect();
    let mut errors = Vec::new();
    for run in runs {
        if let Err(e) = run.await.expect("migration task") {
            errors.push(e);
        }
    }
    let pending = Migrator::get_pending_migrations(stores[0].connection()).await.expect("read");
    assert!(pending.is_empty(), "{} migrations left pending", pending.len());
    let applied = Migrator::get_applied_migrations(stores[0].connection()).await.expect("read");
    assert_eq!(applied.len(), Migrator::migrations().len(), "each migration recorded once");
    errors
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_migrations_of_a_fresh_postgres_database_all_succeed() {
    let Some(url) = bc_testkit::postgres_url() else { return };
    let name = bc_testkit::fresh_database_name("migrate");
    let admin = Database::connect(url.as_str()).await.expect("connect to postgres");
    admin.execute_unprepared(&format!("CREATE DATABASE {name}")).await.expect("create db");
    let errors = migrate_at_once(&bc_testkit::with_database(&url, &name)).await;
    let _ = admin.execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
    assert!(errors.is_empty(), "concurrent migrations failed: {errors:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_migrations_of_a_fresh_sqlite_file_all_succeed() {
    let dir = TempDir::new();
    let url = format!("sqlite://{}?mode=rwc", dir.0.join("store.db").display());
    let errors = migrate_at_once(&url).await;
    assert!(errors.is_empty(), "concurrent migrations failed: {errors:?}");
}
