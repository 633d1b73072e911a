//! Migrations when several processes start at once on a fresh database — what a first
//! install on Kubernetes does (deploy/: the migration Job, two bc-api and two
//! bc-reconciler replicas, every one of them migrating at start).
//!
//! Invariant checked: concurrent `migrate` calls, each from its own connection pool (as
//! separate processes have), all succeed and leave every migration applied once; none
//! fails on a table another one is creating. Loops are bounded; nothing is timed.

use std::sync::Arc;

use bc_domain::ports::Store as _;
use bc_store::SqlStore;
use bc_store::migration::Migrator;
use bc_store::testing::TempDir;
use sea_orm::sqlx;
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

/// Makes every connection of `store`'s pool read the schema of `nodes`, all at once, so
/// each one caches the schema as it is now.
async fn every_connection_reads_the_schema(store: &SqlStore) {
    let pool = store.connection().get_sqlite_connection_pool();
    let mut held = Vec::new();
    for _ in 0..pool.options().get_max_connections() {
        let mut conn = pool.acquire().await.expect("a pooled connection");
        sqlx::query("SELECT * FROM nodes LIMIT 0").fetch_all(&mut *conn).await.expect("read");
        held.push(conn);
    }
}

/// SQLite parses `ALTER TABLE` against the schema its connection last read and does not
/// check it again: a pooled connection that looked before another connection or process
/// changed the schema fails a migration with "duplicate column name" or "no such
/// column" (CI saw the second, once, on the store's migration test). Every migration run
/// goes through one connection that reads the schema first.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pooled_connections_that_saw_an_older_schema_do_not_fail_a_migration() {
    let dir = TempDir::new();
    let url = format!("sqlite://{}?mode=rwc", dir.0.join("store.db").display());
    let store = SqlStore::connect(&url).await.expect("connect");
    // Another process on the same file.
    let other = SqlStore::connect(&url).await.expect("connect");
    for round in 0..3 {
        every_connection_reads_the_schema(&store).await;
        other.migrate_down(1).await.expect("the other process rolls the newest back");
        store.migrate().await.unwrap_or_else(|e| panic!("round {round}: migrate: {e:?}"));
        every_connection_reads_the_schema(&store).await;
        other.migrate_down(1).await.expect("the other process rolls the newest back");
        every_connection_reads_the_schema(&store).await;
        other.migrate().await.expect("the other process applies it again");
        store.migrate_down(1).await.unwrap_or_else(|e| panic!("round {round}: down: {e:?}"));
        store.migrate().await.unwrap_or_else(|e| panic!("round {round}: up again: {e:?}"));
    }
    store.ready().await.expect("every migration applied");
}
