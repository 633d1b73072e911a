//! `SqlStore`: the connection pool, how it is opened on each backend, and the read
//! helpers the repositories share.
//!
//! Invariant: every SQLite connection runs with foreign keys on and a busy timeout, a
//! file database in WAL mode; an in-memory database has exactly one connection that is
//! never closed, so every task sees the same database for the store's lifetime.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bc_domain::StoreError;
use bc_domain::ports::{Page, PageCursor, PageRequest};
use sea_orm::sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
use sea_orm::{
    ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DatabaseTransaction, DbBackend,
    QueryResult, SqliteTransactionMode, TransactionOptions, TransactionTrait, Value,
};
use sea_orm_migration::MigratorTrait;

use bc_domain::model::{IdempotencyRecord, LoadBalancer, Pool, ProviderAccount};
use bc_domain::ports::{Committed, UnitOfWork, WorkItem, WorkKind};

use crate::error::{TxError, to_store_error, with_retry};
use crate::group::Group;
use crate::migration::Migrator;
use crate::migration::lock::MigrationLock;
use crate::sql::{self, SqlKey};
use crate::stats::{Counters, StoreStats};

/// How long a SQLite connection waits for another writer before reporting busy.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Pooled connections to a SQLite file (one writer at a time, readers in parallel).
const SQLITE_FILE_CONNECTIONS: u32 = 8;
/// Pooled connections to PostgreSQL per store.
const POSTGRES_CONNECTIONS: u32 = 10;
/// Prepared statements each PostgreSQL connection keeps (sqlx's default is 100, least
/// recently used out). Grouped calls (`crate::group`) have one statement text per batch
/// size — an `IN (…)` or `VALUES` list of 1 to 500 — on top of the store's fixed ones;
/// one pushed out is prepared again, a round trip more, so the cache holds them all.
pub const POSTGRES_STATEMENT_CACHE: usize = 1_000;
/// A pooled PostgreSQL connection idle this long is pinged before it is handed out; one
/// used more recently passed its release ping within this time.
pub const POSTGRES_PING_IF_IDLE: Duration = Duration::from_secs(1);
/// How long a PostgreSQL call waits for a pooled connection, making one included (sqlx
/// runs the TCP connect and the handshake inside the same deadline, retrying a refused
/// connection until it passes). An outage must answer `UNAVAILABLE` within a second or
/// two, not hang the caller; a healthy pool hands out a connection in microseconds.
pub const POSTGRES_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a SQLite call waits for a pooled connection: a local file is never "down",
/// so a wait here is contention only, worth sitting out.
pub const SQLITE_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);

/// How a store connects: the bounds on waiting for the database.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreOptions {
    /// Longest wait for a pooled connection, connecting included; past it the call fails
    /// with `StoreError::Unavailable`. `None`: [`POSTGRES_ACQUIRE_TIMEOUT`] or
    /// [`SQLITE_ACQUIRE_TIMEOUT`] by backend.
    pub acquire_timeout: Option<Duration>,
    /// Ping every connection as it is handed out, as sqlx does by default (the store's
    /// setting until issue 31, kept to measure against): a round trip per checkout. Off,
    /// only a PostgreSQL connection idle [`POSTGRES_PING_IF_IDLE`] or longer is pinged.
    pub ping_every_checkout: bool,
    /// Send each commit and each point read alone, one round trip (or transaction) per
    /// call, as before they were grouped (`crate::group`): kept to measure against.
    pub one_call_at_a_time: bool,
    /// PostgreSQL: take the event lock in a statement of its own before the events'
    /// insert, as before issue 31's fourth round (a round trip more per transaction with
    /// events): kept to measure against. Off, the insert takes it itself.
    pub event_lock_apart: bool,
}

/// The sea-orm adapter of the bc-domain `Store` port, on SQLite or PostgreSQL.
#[derive(Debug, Clone)]
pub struct SqlStore {
    pub(crate) db: DatabaseConnection,
    pub(crate) backend: DbBackend,
    /// SQLite only: writers of this process take turns here. SQLite admits one writer at
    /// a time anyway; queueing in-process wakes the next writer as soon as the lock is
    /// free, where SQLite's busy handler would poll with sleeps of up to 100 ms. Other
    /// processes on the same file still meet the busy timeout and the retry wrapper.
    write_gate: Option<Arc<tokio::sync::Mutex<()>>>,
    /// See [`SqlStore::enforce_index_plans`].
    plan_check: Arc<AtomicBool>,
    /// What this store (and its clones) sent to the database: [`SqlStore::stats`].
    pub(crate) counters: Arc<Counters>,
    /// The calls sent in batches when they arrive together (`crate::group`), unless
    /// [`StoreOptions::one_call_at_a_time`].
    pub(crate) groups: Arc<Groups>,
    pub(crate) grouped: bool,
    /// See [`StoreOptions::event_lock_apart`].
    pub(crate) event_lock_apart: bool,
}

/// Most units of work committed in one transaction. A batch's transaction holds its
/// units' lease rows (their fences) and written rows until it commits, and a statement
/// waiting on one of them (a lease renewal, an enqueue by the API) holds a pooled
/// connection meanwhile: kept small, so a batch stays a few dozen statements and such a
/// wait stays short. Measured, converging batches average under 3 units; the cap binds
/// only in bursts.
const COMMITS_PER_BATCH: usize = 16;
/// Commit batches at PostgreSQL at once. A batch's statements go one round trip at a
/// time, and with one batch in flight the commits of the reconcile benchmark were
/// 81–93 % of its wall on PostgreSQL, the cores a third idle; a second lane overlaps two
/// batches' round trips (the event lock still orders their events, and batches that
/// touch the same rows wait for each other, or retry on a deadlock, as two replicas'
/// do). SQLite keeps one: its one writer takes one transaction at a time anyway.
const POSTGRES_COMMIT_LANES: usize = 2;
/// Most keys read in one `IN (…)` query (one bound value each).
const READS_PER_BATCH: usize = 500;

/// A group of point reads by key, each answered with its row or `None`.
pub(crate) type Reads<T> = Arc<Group<String, Result<Option<T>, StoreError>>>;

/// The store's grouped calls: unit-of-work commits, and the point reads every
/// activation makes (its object, the object's account, and its work item's lease before
/// each provider call), the last one group per kind.
pub(crate) struct Groups {
    pub(crate) commits: Arc<Group<UnitOfWork, Result<Committed, StoreError>>>,
    pub(crate) load_balancers: Reads<LoadBalancer>,
    pub(crate) accounts: Reads<ProviderAccount>,
    pub(crate) work: std::collections::BTreeMap<WorkKind, Reads<WorkItem>>,
    /// The API's reads of a call's pool (`pool_get`).
    pub(crate) pools: Reads<Pool>,
    /// The API's reads of a create's `requestId` (`idempotency_get`), by tenant, method
    /// and request id.
    pub(crate) idempotency:
        Arc<Group<IdempotencyKey, Result<Option<IdempotencyRecord>, StoreError>>>,
}

/// The key of an idempotency record: tenant, method, request id.
pub(crate) type IdempotencyKey = (String, String, String);

impl Groups {
    /// The groups of a store on `backend`.
    fn on(backend: DbBackend) -> Self {
        let lanes = if backend == DbBackend::Postgres { POSTGRES_COMMIT_LANES } else { 1 };
        Self {
            commits: Arc::new(Group::with_lanes(COMMITS_PER_BATCH, lanes)),
            load_balancers: Arc::new(Group::new(READS_PER_BATCH)),
            accounts: Arc::new(Group::new(READS_PER_BATCH)),
            work: WorkKind::ALL
                .into_iter()
                .map(|k| (k, Arc::new(Group::new(READS_PER_BATCH))))
                .collect(),
            pools: Arc::new(Group::new(READS_PER_BATCH)),
            idempotency: Arc::new(Group::new(READS_PER_BATCH)),
        }
    }
}

impl std::fmt::Debug for Groups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Groups").finish_non_exhaustive()
    }
}

/// How one point read is made: `SELECT {columns} FROM {table} WHERE [{column} = ? AND]
/// {key} IN (…)`, each row decoded and matched back to its key.
pub(crate) struct PointRead<T> {
    pub(crate) table: &'static str,
    pub(crate) columns: &'static str,
    /// A column every row read shares, and its value (the kind of a work item): the key
    /// is unique within it.
    pub(crate) within: Option<(&'static str, &'static str)>,
    pub(crate) key: &'static str,
    pub(crate) decode: fn(&QueryResult) -> Result<T, StoreError>,
    pub(crate) key_of: fn(&T) -> String,
}

impl<T> Clone for PointRead<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for PointRead<T> {}

impl<T> PointRead<T> {
    /// `{column} = ? AND ` and its value, when the read is within one value of a column.
    fn within_clause(&self) -> (String, Vec<Value>) {
        match self.within {
            Some((column, value)) => (format!("{column} = ? AND "), vec![sql::s(value)]),
            None => (String::new(), Vec::new()),
        }
    }
}

/// A grouped call whose batch ended without answering it (the process is stopping).
pub(crate) fn interrupted() -> StoreError {
    StoreError::Unavailable("the batch this call went in was interrupted".into())
}

impl SqlStore {
    /// Opens `url` (`sqlite::memory:`, `sqlite://path?mode=rwc`, `postgres://…`) and runs
    /// the migrations. Connection failures are `Unavailable`.
    pub async fn connect(url: &str) -> Result<SqlStore, StoreError> {
        Self::connect_with(url, &StoreOptions::default()).await
    }

    /// [`SqlStore::connect`] with explicit [`StoreOptions`].
    pub async fn connect_with(url: &str, options: &StoreOptions) -> Result<SqlStore, StoreError> {
        let store = Self::connect_unmigrated_with(url, options).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// Opens `url` without migrating (for `bc-api migrate` style tools and tests).
    pub async fn connect_unmigrated(url: &str) -> Result<SqlStore, StoreError> {
        Self::connect_unmigrated_with(url, &StoreOptions::default()).await
    }

    /// [`SqlStore::connect_unmigrated`] with explicit [`StoreOptions`].
    pub async fn connect_unmigrated_with(
        url: &str,
        options: &StoreOptions,
    ) -> Result<SqlStore, StoreError> {
        let sqlite = url.starts_with("sqlite:");
        let default_wait = if sqlite { SQLITE_ACQUIRE_TIMEOUT } else { POSTGRES_ACQUIRE_TIMEOUT };
        let mut opts = ConnectOptions::new(url.to_owned());
        // sea-orm's `connect_timeout` is the same sqlx pool deadline: set both so neither
        // default can stretch the other.
        let wait = options.acquire_timeout.unwrap_or(default_wait);
        opts.sqlx_logging(false).acquire_timeout(wait).connect_timeout(wait);
        // sqlx pings every connection as it goes back to the pool, and by default again as
        // it is handed out: two round trips around each statement outside a transaction,
        // the store's most common call (issue 31's profile). The ping at release stays (a
        // connection that died is dropped there); the one at acquire is kept only for a
        // PostgreSQL connection idle long enough for its server to have gone away since
        // (a restart, a proxy's idle cut), so one that died is dropped and replaced rather
        // than handed to a caller. A SQLite connection is a thread of this process over a
        // local file: it cannot hang up, and is never pinged before use.
        if options.ping_every_checkout {
            opts.test_before_acquire(true);
        } else if sqlite {
            opts.test_before_acquire(false);
        } else {
            opts.test_before_acquire_if_idle_for(POSTGRES_PING_IF_IDLE);
        }
        if sqlite {
            let memory = url.contains(":memory:") || url.contains("mode=memory");
            opts.map_sqlx_sqlite_opts(move |o| {
                let o = o.foreign_keys(true).busy_timeout(SQLITE_BUSY_TIMEOUT);
                if memory {
                    o
                } else {
                    // WAL lets readers run beside the one writer; NORMAL sync is durable
                    // across application crashes, which is what WAL mode guarantees anyway.
                    o.journal_mode(SqliteJournalMode::Wal).synchronous(SqliteSynchronous::Normal)
                }
            });
            if memory {
                // One connection that never idles out or expires: an in-memory database
                // lives exactly as long as its connection.
                opts.max_connections(1).min_connections(1).idle_timeout(None).max_lifetime(None);
            } else {
                opts.max_connections(SQLITE_FILE_CONNECTIONS);
            }
        } else {
            opts.max_connections(POSTGRES_CONNECTIONS);
            opts.map_sqlx_postgres_opts(|o| o.statement_cache_capacity(POSTGRES_STATEMENT_CACHE));
        }
        let db = Database::connect(opts).await.map_err(|e| match to_store_error(e) {
            StoreError::Internal(d) => StoreError::Unavailable(d.for_logs().to_owned()),
            other => other,
        })?;
        let backend = db.get_database_backend();
        let write_gate =
            (backend == DbBackend::Sqlite).then(|| Arc::new(tokio::sync::Mutex::new(())));
        Ok(SqlStore {
            db,
            backend,
            write_gate,
            plan_check: Arc::new(AtomicBool::new(false)),
            counters: Arc::default(),
            groups: Arc::new(Groups::on(backend)),
            grouped: !options.one_call_at_a_time,
            event_lock_apart: options.event_lock_apart,
        })
    }

    /// Applies every pending migration (idempotent), holding the migration lock
    /// (`migration::lock`) so that processes starting together on one database apply
    /// each migration once.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let lock = MigrationLock::acquire(&self.db).await?;
        let result = self.run_migrations(None).await;
        lock.release().await;
        result
    }

    /// Rolls back the newest `steps` applied migrations, holding the migration lock (for
    /// tools and tests: the services only ever migrate up).
    pub async fn migrate_down(&self, steps: u32) -> Result<(), StoreError> {
        let lock = MigrationLock::acquire(&self.db).await?;
        let result = self.run_migrations(Some(steps)).await;
        lock.release().await;
        result
    }

    /// Applies every pending migration (`down: None`) or rolls back the newest `down`.
    ///
    /// On SQLite the whole run is one transaction on one connection that reads the schema
    /// before anything else: SQLite parses `ALTER TABLE` against the schema its connection
    /// last read and never checks it again, so a pooled connection that looked before
    /// another connection or process changed the schema would fail the run with "no such
    /// column" or "duplicate column name". One transaction also makes a failed run leave
    /// nothing half-applied. PostgreSQL runs each migration in a transaction of its own
    /// (sea-orm-migration's default there) and has no such cache.
    async fn run_migrations(&self, down: Option<u32>) -> Result<(), StoreError> {
        async fn run<C: sea_orm::ConnectionTrait>(
            db: &C,
            down: Option<u32>,
        ) -> Result<(), sea_orm::DbErr>
        where
            for<'c> &'c C: sea_orm::IntoDatabaseExecutor<'c>,
        {
            match down {
                None => Migrator::up(db, None).await,
                Some(steps) => Migrator::down(db, Some(steps)).await,
            }
        }
        if self.backend != DbBackend::Sqlite {
            return run(&self.db, down).await.map_err(to_store_error);
        }
        self.write("migrate", || async {
            let txn = self.begin().await?;
            let result = async {
                txn.execute_unprepared("SELECT count(*) FROM sqlite_schema").await?;
                run(&txn, down).await?;
                Ok(())
            }
            .await;
            Self::finish(txn, result).await
        })
        .await
    }

    /// A handle on the same pool and counters that sends each commit and point read alone
    /// (as [`StoreOptions::one_call_at_a_time`]): calls of one process then meet at the
    /// database as separate transactions, as calls of two processes do — what a test of
    /// concurrent commits needs, since a grouped store runs one commit batch at a time.
    pub fn ungrouped(&self) -> SqlStore {
        SqlStore { grouped: false, ..self.clone() }
    }

    /// The backend in use.
    pub fn backend(&self) -> DbBackend {
        self.backend
    }

    /// What this store has sent to the database so far (statements, transactions, named
    /// writes): the benchmarks' measure of round trips per unit of work.
    pub fn stats(&self) -> StoreStats {
        self.counters.snapshot()
    }

    /// Counts statements by shape too ([`StoreStats::shapes`]): the benchmarks' list of
    /// where an activation's statements go. Off by default (a lock per statement).
    pub fn count_statement_shapes(&self, on: bool) {
        self.counters.by_shape.store(on, Ordering::Relaxed);
    }

    /// The underlying connection pool (for tools and tests; the ports are the API).
    pub fn connection(&self) -> &DatabaseConnection {
        &self.db
    }

    /// Test support for the "no lookup scans a table" rule: while on (SQLite only; a
    /// no-op on PostgreSQL), every repository read first asks `EXPLAIN QUERY PLAN` and
    /// fails with `Internal` naming the query (in its detail, for logs) if SQLite would
    /// `SCAN` a table or an index instead of searching it. Costs one extra query per read,
    /// so keep it off in service.
    pub fn enforce_index_plans(&self, on: bool) {
        self.plan_check.store(on, Ordering::Relaxed);
    }

    /// Refuses a read whose SQLite plan scans (see [`SqlStore::enforce_index_plans`]).
    async fn check_plan(&self, text: &str, values: &[Value]) -> Result<(), StoreError> {
        if self.backend != DbBackend::Sqlite || !self.plan_check.load(Ordering::Relaxed) {
            return Ok(());
        }
        let explain = self.st(&format!("EXPLAIN QUERY PLAN {text}"), values.to_vec());
        let rows = self.db.query_all_raw(explain).await.map_err(to_store_error)?;
        let scans: Vec<String> = rows
            .iter()
            .filter_map(|r| r.try_get::<String>("", "detail").ok())
            .filter(|d| d.starts_with("SCAN "))
            .collect();
        if scans.is_empty() {
            Ok(())
        } else {
            Err(StoreError::internal(format!("query {text:?} would scan: {scans:?}")))
        }
    }

    /// Closes the pool.
    pub async fn close(self) -> Result<(), StoreError> {
        self.db.close().await.map_err(to_store_error)
    }

    /// Whether the database answers and every migration is applied.
    pub(crate) async fn check_ready(&self) -> Result<(), StoreError> {
        self.db.ping().await.map_err(to_store_error)?;
        let pending = Migrator::get_pending_migrations(&self.db).await.map_err(to_store_error)?;
        if pending.is_empty() {
            Ok(())
        } else {
            Err(StoreError::Unavailable(format!("{} migrations pending", pending.len())))
        }
    }

    /// Runs a write — one statement or one whole transaction per call of `attempt` —
    /// through the retry wrapper, each attempt inside the SQLite write gate.
    pub(crate) async fn write<T, F, Fut>(
        &self,
        name: &'static str,
        mut attempt: F,
    ) -> Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, TxError>>,
    {
        with_retry(name, || {
            // Futures are lazy: creating it here runs nothing before the gate is held.
            let fut = attempt();
            let gate = self.write_gate.clone();
            let counters = self.counters.clone();
            async move {
                let _turn = match &gate {
                    Some(g) => Some(g.lock().await),
                    None => None,
                };
                let started = std::time::Instant::now();
                let r = fut.await;
                counters.ran(name, started.elapsed());
                r
            }
        })
        .await
    }

    /// Starts a write transaction. SQLite gets `BEGIN IMMEDIATE`, so the write lock is
    /// taken (waiting up to the busy timeout) before the first read; a deferred transaction
    /// that read first could not upgrade after another writer committed. The only place a
    /// transaction begins (`clippy.toml` forbids the raw call elsewhere): call it inside
    /// [`SqlStore::write`], so the whole transaction is what the retry re-runs.
    #[allow(clippy::disallowed_methods)]
    pub(crate) async fn begin(&self) -> Result<DatabaseTransaction, TxError> {
        let opts = TransactionOptions {
            sqlite_transaction_mode: (self.backend == DbBackend::Sqlite)
                .then_some(SqliteTransactionMode::Immediate),
            ..Default::default()
        };
        self.counters.transaction();
        Ok(self.db.begin_with_options(opts).await?)
    }

    /// Commits `txn` when `result` is `Ok`, rolls it back otherwise.
    pub(crate) async fn finish<T>(
        txn: DatabaseTransaction,
        result: Result<T, TxError>,
    ) -> Result<T, TxError> {
        match result {
            Ok(v) => {
                txn.commit().await?;
                Ok(v)
            }
            Err(e) => {
                // The rollback's own failure changes nothing: the work is undone either way.
                let _ = txn.rollback().await;
                Err(e)
            }
        }
    }

    /// A statement for this backend.
    pub(crate) fn st(&self, text: &str, values: Vec<Value>) -> sea_orm::Statement {
        self.counters.statement(text);
        sql::stmt(self.backend, text, values)
    }

    /// At most one row.
    pub(crate) async fn one<T>(
        &self,
        text: &str,
        values: Vec<Value>,
        decode: fn(&QueryResult) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        self.check_plan(text, &values).await?;
        self.counters.checkout();
        let row = self.db.query_one_raw(self.st(text, values)).await.map_err(to_store_error)?;
        row.as_ref().map(decode).transpose()
    }

    /// All rows (callers bound them with `LIMIT` or a key).
    pub(crate) async fn all<T>(
        &self,
        text: &str,
        values: Vec<Value>,
        decode: fn(&QueryResult) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        self.check_plan(text, &values).await?;
        self.counters.checkout();
        let rows = self.db.query_all_raw(self.st(text, values)).await.map_err(to_store_error)?;
        rows.iter().map(decode).collect()
    }

    /// The row of `key` read as `how` says, in one `IN (…)` query with the other reads
    /// of its group that arrive while an earlier batch is at the database
    /// (`crate::group`): as fresh as a read of its own, one round trip for many.
    pub(crate) async fn read_grouped<T: Clone + Send + 'static>(
        &self,
        group: &Reads<T>,
        how: PointRead<T>,
        key: String,
    ) -> Result<Option<T>, StoreError> {
        if !self.grouped {
            let (within, mut values) = how.within_clause();
            let text =
                format!("SELECT {} FROM {} WHERE {within}{} = ?", how.columns, how.table, how.key);
            values.push(sql::s(key.as_str()));
            return self.one(&text, values, how.decode).await;
        }
        let store = self.clone();
        let run = move |keys: Vec<String>| {
            let store = store.clone();
            async move { store.read_batch(how, keys).await }
        };
        group.call(key, run).await.unwrap_or_else(|| Err(interrupted()))
    }

    /// One query for the rows of `keys` (each asked once); an answer per key, in order.
    async fn read_batch<T: Clone>(
        &self,
        how: PointRead<T>,
        keys: Vec<String>,
    ) -> Vec<Result<Option<T>, StoreError>> {
        let mut unique: Vec<&String> = keys.iter().collect();
        unique.sort();
        unique.dedup();
        let (within, mut values) = how.within_clause();
        let text = format!(
            "SELECT {} FROM {} WHERE {within}{} IN ({})",
            how.columns,
            how.table,
            how.key,
            sql::placeholders(unique.len())
        );
        values.extend(unique.iter().map(|k| sql::s(k.as_str())));
        match self.all(&text, values, how.decode).await {
            Ok(rows) => {
                let found: std::collections::HashMap<String, T> =
                    rows.into_iter().map(|r| ((how.key_of)(&r), r)).collect();
                keys.iter().map(|k| Ok(found.get(k).cloned())).collect()
            }
            Err(e) => keys.iter().map(|_| Err(e.clone())).collect(),
        }
    }

    /// Commits `uow` in one transaction with the other units of work that arrive while an
    /// earlier batch is committing (`crate::group`).
    pub(crate) async fn commit_grouped(&self, uow: UnitOfWork) -> Result<Committed, StoreError> {
        if !self.grouped {
            return self.commit_uow(&uow).await;
        }
        let store = self.clone();
        let run = move |batch: Vec<UnitOfWork>| {
            let store = store.clone();
            async move { store.commit_batch(batch).await }
        };
        self.groups.commits.call(uow, run).await.unwrap_or_else(|| Err(interrupted()))
    }

    /// A count.
    pub(crate) async fn count(&self, text: &str, values: Vec<Value>) -> Result<u64, StoreError> {
        self.check_plan(text, &values).await?;
        self.counters.checkout();
        let row = self.db.query_one_raw(self.st(text, values)).await.map_err(to_store_error)?;
        match row {
            Some(r) => sql::Row(&r).u64("n"),
            None => Ok(0),
        }
    }

    /// One page: `base` is a query with a `WHERE` clause, which the page extends with
    /// `AND <key_col> > ?` (the cursor's key, or below every key on the first page, so
    /// even that reads an index range) and orders by `key_col`, fetching one extra row to
    /// know whether more remain.
    pub(crate) async fn page<T, K: SqlKey>(
        &self,
        base: &str,
        mut values: Vec<Value>,
        key_col: &str,
        page: &PageRequest<K>,
        decode: fn(&QueryResult) -> Result<T, StoreError>,
        key_of: fn(&T) -> K,
    ) -> Result<Page<T, K>, StoreError> {
        // A zero limit would make paging impossible (no last key); treat it as one.
        let limit = page.limit.max(1) as usize;
        let text = format!("{base} AND {key_col} > ? ORDER BY {key_col} LIMIT ?");
        values.push(page.after.as_ref().map_or_else(K::lowest, |c| c.key().value()));
        values.push(Value::from(limit as i64 + 1));
        let mut items = self.all(&text, values, decode).await?;
        let more = items.len() > limit;
        items.truncate(limit);
        let next = if more { items.last().map(|t| PageCursor::after(key_of(t))) } else { None };
        Ok(Page { items, next })
    }
}

/// Executes a statement in a transaction, returning rows affected.
pub(crate) async fn exec(
    txn: &impl ConnectionTrait,
    st: sea_orm::Statement,
) -> Result<u64, sea_orm::DbErr> {
    Ok(txn.execute_raw(st).await?.rows_affected())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_plan_check_catches_a_scan() {
        let s = SqlStore::connect("sqlite::memory:").await.unwrap();
        s.enforce_index_plans(true);
        let by_name = "SELECT pool_id FROM pools WHERE name = ?";
        let e = s.count(by_name, vec![sql::s("web")]).await.unwrap_err();
        let StoreError::Internal(d) = &e else { panic!("{e:?}") };
        assert!(d.for_logs().contains("SCAN"), "{e:?}");
        // What a caller would see names neither the query nor the table.
        assert!(!e.to_string().contains("pools") && !e.to_string().contains("SCAN"), "{e}");
        // An indexed lookup passes; with the check off, anything runs.
        let by_tenant = "SELECT COUNT(*) AS n FROM pools WHERE tenant_id = ?";
        assert_eq!(s.count(by_tenant, vec![sql::s("acme")]).await.unwrap(), 0);
        s.enforce_index_plans(false);
        let all = "SELECT COUNT(*) AS n FROM pools WHERE name = ?";
        assert_eq!(s.count(all, vec![sql::s("web")]).await.unwrap(), 0);
    }
}
