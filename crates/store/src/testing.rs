//! Test support for every crate that tests against the store (behind the `testing`
//! feature): a fresh store per test on each backend (SQLite in memory, SQLite file,
//! PostgreSQL with a fresh database), [`store_suite!`](crate::store_suite) to run one
//! async test on all three, and record builders, so the store's, the API's and the
//! reconcilers' tests build rows the same way.
//!
//! Invariant: each test gets a database nobody else touches, so tests run in parallel
//! without seeing each other's rows; the PostgreSQL variant skips (the testkit prints
//! why) when no server was started, and fails when services are required. Builders make
//! valid, live, pending records with fresh ids that sort in creation order.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bc_domain::ClusterId;
use bc_domain::id::{Id, IdKind};
use bc_domain::model::*;
use bc_domain::policy::{PoolPolicy, Scale, Taint, TaintEffect};
use bc_domain::{ObjectName, PoolId, ProviderAccountId, ResourceState, TenantId, Timestamp};
use sea_orm::{ConnectionTrait, Database};

use crate::{SqlStore, StoreOptions};

/// The backends the suite runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `sqlite::memory:` (one connection).
    Memory,
    /// A SQLite file in WAL mode (a pool of connections).
    File,
    /// PostgreSQL from `BC_TEST_POSTGRES_URL`.
    Postgres,
}

/// Runs `test` against a fresh store on `backend`, then cleans up.
pub async fn run<F, Fut>(backend: Backend, test: F)
where
    F: FnOnce(Arc<SqlStore>) -> Fut,
    Fut: Future<Output = ()>,
{
    run_with(backend, &StoreOptions::default(), test).await
}

/// [`run`] with the store opened with `options`.
pub async fn run_with<F, Fut>(backend: Backend, options: &StoreOptions, test: F)
where
    F: FnOnce(Arc<SqlStore>) -> Fut,
    Fut: Future<Output = ()>,
{
    match backend {
        Backend::Memory => {
            let store = SqlStore::connect_with("sqlite::memory:", options).await;
            let store = Arc::new(store.expect("connect"));
            // Every read of the suite must be an index search (checked on SQLite).
            store.enforce_index_plans(true);
            test(store).await;
        }
        Backend::File => {
            let dir = TempDir::new();
            let url = format!("sqlite://{}?mode=rwc", dir.0.join("store.db").display());
            let store = Arc::new(SqlStore::connect_with(&url, options).await.expect("connect"));
            store.enforce_index_plans(true);
            test(store.clone()).await;
            if let Ok(s) = Arc::try_unwrap(store) {
                let _ = s.close().await;
            }
        }
        Backend::Postgres => {
            let Some(url) = bc_testkit::postgres_url() else { return };
            let name = bc_testkit::fresh_database_name("store");
            create_migrated_database(&url, &name).await;
            let admin = Database::connect(url.as_str()).await.expect("connect to postgres");
            let url = bc_testkit::with_database(&url, &name);
            let store = Arc::new(SqlStore::connect_with(&url, options).await.expect("connect"));
            test(store.clone()).await;
            if let Ok(s) = Arc::try_unwrap(store) {
                let _ = s.close().await;
            }
            // Best effort: the server is throwaway anyway.
            let _ = admin
                .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .await;
            let _ = admin.close().await;
        }
    }
}

/// The advisory lock key of the template's build: `bc-store template` read as a number.
const TEMPLATE_LOCK: i64 = 0x6263_7465_6d70_6c74;

/// Creates the database `name` on the server of `admin_url` as a copy of a database with
/// every migration applied, made by the first caller (per server and set of migrations):
/// `CREATE DATABASE … TEMPLATE`, one statement of the server's. Migrating each test's
/// empty database instead cost ~0.2 CPU-s of the server's and ~0.04 of the test's, for
/// every PostgreSQL test of every crate. The test's own store still runs `migrate` at
/// connect (finding nothing pending), and the store's `migrate` tests migrate from an
/// empty database. The copy is made file by file (`STRATEGY FILE_COPY`, PostgreSQL 15+):
/// the default since 15 writes every page of the template to the write-ahead log, ~2.5×
/// the server's CPU for the same database.
///
/// Tests run as processes of their own (nextest), so the first build is serialized across
/// processes by a session advisory lock. The template's name carries a hash of the
/// migrations' names, so a server kept across runs never serves a schema that lacks a
/// migration (one edited in place keeps its name: the throwaway server of
/// `cargo xtask test` is new every run).
async fn create_migrated_database(admin_url: &str, name: &str) {
    use sea_orm::sqlx::{self, Connection as _};
    use sea_orm_migration::MigratorTrait as _;

    // FNV-1a: the same in every process and toolchain, unlike std's hasher.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for m in crate::migration::Migrator::migrations() {
        for b in m.name().bytes().chain([0]) {
            hash = (hash ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    let template = format!("bc_migrated_{hash:016x}");
    let mut conn = sqlx::PgConnection::connect(admin_url).await.expect("connect to postgres");
    if !database_exists(&mut conn, &template).await {
        sqlx::query("SELECT pg_advisory_lock($1)")
            .bind(TEMPLATE_LOCK)
            .execute(&mut conn)
            .await
            .expect("take the template lock");
        if !database_exists(&mut conn, &template).await {
            // Built under another name and renamed when complete: a builder that died
            // half-way leaves no template, only this, which the next builder drops.
            let building = format!("{template}_b");
            ddl(
                &mut conn,
                format!("DROP DATABASE IF EXISTS {building} WITH (FORCE)"),
                "drop a half-built template",
            )
            .await;
            ddl(&mut conn, format!("CREATE DATABASE {building}"), "create the template").await;
            let url = bc_testkit::with_database(admin_url, &building);
            let store = SqlStore::connect(&url).await.expect("migrate the template");
            store.close().await.expect("close the template");
            // PostgreSQL waits (up to 5 s) for the closed sessions to end before renaming.
            ddl(
                &mut conn,
                format!("ALTER DATABASE {building} RENAME TO {template}"),
                "name the template",
            )
            .await;
        }
    }
    let version: i32 = sqlx::query_scalar("SELECT current_setting('server_version_num')::int")
        .fetch_one(&mut conn)
        .await
        .expect("read the server's version");
    let strategy = if version >= 150_000 { " STRATEGY FILE_COPY" } else { "" };
    ddl(&mut conn, format!("CREATE DATABASE {name} TEMPLATE {template}{strategy}"), "create db")
        .await;
    // Closing the session releases the lock.
    let _ = conn.close().await;
}

/// Runs one statement built at run time (a database's name is no bind parameter).
async fn ddl(conn: &mut sea_orm::sqlx::PgConnection, sql: String, what: &str) {
    use sea_orm::sqlx;
    if let Err(e) = sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(conn).await {
        panic!("{what}: {e}");
    }
}

/// Whether the server of `conn` has a database named `name`.
async fn database_exists(conn: &mut sea_orm::sqlx::PgConnection, name: &str) -> bool {
    sea_orm::sqlx::query_scalar::<_, i32>("SELECT 1 FROM pg_database WHERE datname = $1")
        .bind(name)
        .fetch_optional(conn)
        .await
        .expect("read pg_database")
        .is_some()
}

/// A unique directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl Default for TempDir {
    fn default() -> Self {
        Self::new()
    }
}

impl TempDir {
    /// A new empty directory.
    pub fn new() -> Self {
        let p = std::env::temp_dir().join(bc_testkit::fresh_database_name("bc_store_test"));
        std::fs::create_dir_all(&p).expect("temp dir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Generates one `#[tokio::test]` per backend for each named async test function
/// (`async fn name(store: Arc<SqlStore>)`, in scope where the macro is called), in modules
/// `sqlite_memory`, `sqlite_file` and `postgres`.
///
/// `store_suite!(current_thread: …)` runs them on a current-thread runtime instead of
/// four workers: for tests of calls that *arrive together*, which must all be waiting
/// before the batch that takes them starts. With workers, the batch's task can start on
/// another thread while the test is still starting its calls, and how many it takes
/// then depends on the scheduler (a loaded CI machine made such a test fail); on one
/// thread, the batch's task runs only once every call the test started is waiting.
#[macro_export]
macro_rules! store_suite {
    (current_thread: $($t:ident),* $(,)?) => {
        $crate::store_suite!(@suite (flavor = "current_thread"); $($t),*);
    };
    ($($t:ident),* $(,)?) => {
        $crate::store_suite!(@suite (flavor = "multi_thread", worker_threads = 4); $($t),*);
    };
    (@suite $flavor:tt; $($t:ident),*) => {
        mod sqlite_memory {
            $(#[tokio::test $flavor]
            async fn $t() {
                $crate::testing::run($crate::testing::Backend::Memory, super::$t).await
            })*
        }
        mod sqlite_file {
            $(#[tokio::test $flavor]
            async fn $t() {
                $crate::testing::run($crate::testing::Backend::File, super::$t).await
            })*
        }
        mod postgres {
            $(#[tokio::test $flavor]
            async fn $t() {
                $crate::testing::run($crate::testing::Backend::Postgres, super::$t).await
            })*
        }
    };
}

static COUNTER: AtomicU64 = AtomicU64::new(1);

/// A fresh id; ids made later sort later.
pub fn id<K: IdKind>() -> Id<K> {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    Id::generate(1_764_000_000_000 + n, u128::from(n))
}

/// A fresh unique suffix.
pub fn uniq() -> u64 {
    COUNTER.fetch_add(1, Ordering::Relaxed)
}

/// A time `ms` milliseconds after a fixed origin.
pub fn t(ms: i64) -> Timestamp {
    Timestamp::from_unix_ms(1_764_000_000_000 + ms)
}

/// A tenant id.
pub fn tenant(s: &str) -> TenantId {
    TenantId::parse(s).unwrap()
}

/// An object name.
pub fn name(s: &str) -> ObjectName {
    ObjectName::parse(s).unwrap()
}

/// An active pool of `tenant` named `n`.
pub fn pool(tenant_id: &TenantId, n: &str) -> Pool {
    Pool {
        pool_id: id(),
        tenant_id: tenant_id.clone(),
        name: name(n),
        policy: PoolPolicy::default(),
        state: PoolState::Active,
        generation: 1,
        created_at: t(0),
        updated_at: t(0),
        archived_at: None,
    }
}

/// A live provider account of `tenant` named `n`.
pub fn account(tenant_id: &TenantId, n: &str) -> ProviderAccount {
    ProviderAccount {
        provider_account_id: id(),
        tenant_id: tenant_id.clone(),
        provider: ProviderKind::Digitalocean,
        name: name(n),
        project_id: None,
        credentials: SealedSecret(vec![0, 1, 2, 255]),
        created_at: t(0),
        deleted_at: None,
    }
}

/// An observed status.
pub fn status(state: ResourceState) -> ObservedStatus {
    ObservedStatus { state, message: None, observed_generation: 0, updated_at: t(0) }
}

/// A pending created cluster in `acct`.
pub fn cluster(acct: &ProviderAccount, n: &str) -> KubernetesCluster {
    KubernetesCluster {
        cluster_id: id(),
        tenant_id: acct.tenant_id.clone(),
        provider_account_id: acct.provider_account_id.clone(),
        name: name(n),
        region: "nyc1".into(),
        desired_version: Some("1.33.1-do.0".into()),
        high_availability: false,
        mode: ClusterMode::Standard,
        origin: ClusterOrigin::Created,
        substrate_pool_ids: vec![],
        delete_requested: false,
        generation: 1,
        created_at: t(0),
        provider_cluster_id: None,
        version: None,
        nodes: None,
        status: status(ResourceState::Pending),
    }
}

/// A pending node pool of `c`.
pub fn node_pool(c: &KubernetesCluster, n: &str) -> NodePool {
    NodePool {
        labels: BTreeMap::from([("tier".to_string(), "web".to_string())]),
        taints: vec![Taint {
            key: "gpu".into(),
            value: "yes".into(),
            effect: TaintEffect::NoSchedule,
        }],
        ..NodePool::pending(
            id(),
            c.cluster_id.clone(),
            c.tenant_id.clone(),
            n.into(),
            "s-2vcpu-4gb".into(),
            Scale::Count(3),
            t(0),
        )
    }
}

/// A regional load balancer spec.
pub fn lb_spec() -> LoadBalancerSpec {
    LoadBalancerSpec {
        kind: LoadBalancerType::Regional,
        region: Some("nyc1".into()),
        forwarding_rules: vec![ForwardingRule {
            entry_protocol: Protocol::Http,
            entry_port: 80,
            target_protocol: Protocol::Http,
            target_port: 8080,
            certificate_id: None,
            tls_passthrough: false,
        }],
        health_check: HealthCheck::default(),
        sticky_sessions: None,
        targets: Targets { tag: Some("web".into()), droplet_ids: None, load_balancer_ids: None },
        size_unit: Some(1),
        redirect_http_to_https: false,
        global_settings: None,
        domains: None,
    }
}

/// A pending load balancer on `pool` in `acct`.
pub fn load_balancer(p: &Pool, acct: &ProviderAccount, n: &str) -> LoadBalancer {
    LoadBalancer {
        load_balancer_id: id(),
        tenant_id: p.tenant_id.clone(),
        pool_id: p.pool_id.clone(),
        provider_account_id: acct.provider_account_id.clone(),
        name: name(n),
        spec: lb_spec(),
        generation: 1,
        created_at: t(0),
        delete_requested: false,
        provider_load_balancer_id: None,
        ip: None,
        status: status(ResourceState::Pending),
        ready_at: None,
        deleted_at: None,
        quota_released: false,
    }
}

/// A substrate of `p` in `acct`.
pub fn substrate(p: &Pool, acct: &ProviderAccount, cluster_id: Option<ClusterId>) -> Substrate {
    Substrate {
        pool_id: p.pool_id.clone(),
        tenant_id: p.tenant_id.clone(),
        provider_account_id: acct.provider_account_id.clone(),
        mode: SubstrateMode::Create,
        cluster_id,
        state: ResourceState::Provisioning,
        message: Some("creating".into()),
        nodes_listed: 3,
        nodes_joined: 1,
        waiting_to_join: Some(WaitingToJoin { nodes: 2, since: t(5) }),
        upgrade: Some(UpgradeWait { version: "1.34.0-do.0".into(), since: t(6) }),
        observed_generation: 1,
        refused_generation: Some(1),
        created_at: t(0),
        updated_at: t(1),
    }
}

/// A joined node of `pool_id`.
pub fn node(pool_id: &PoolId, node_name: &str) -> Node {
    Node {
        node_id: id(),
        pool_id: pool_id.clone(),
        node_name: node_name.into(),
        provider_node_id: Some("12345".into()),
        bcd_version: "0.1.0".into(),
        credential_hash: format!("hash-{}", uniq()),
        joined_at: t(0),
        last_heartbeat_at: None,
    }
}

/// An active booking of `p`, ending at `ends_at` if given.
pub fn booking(p: &Pool, ends_at: Option<Timestamp>) -> Booking {
    Booking {
        booking_id: id(),
        tenant_id: p.tenant_id.clone(),
        pool_id: p.pool_id.clone(),
        node_name: Some("node-a".into()),
        state: BookingState::Active,
        created_at: t(0),
        ends_at,
        ended_at: None,
    }
}

/// An event of `tenant_id` on `subject`.
pub fn event(tenant_id: &TenantId, subject: &str) -> NewEvent {
    NewEvent {
        event_id: id(),
        tenant_id: tenant_id.clone(),
        subject: subject.into(),
        kind: "vps.test".into(),
        time: t(0),
        data: serde_json::json!({"n": uniq()}),
    }
}

/// An account id that exists nowhere.
pub fn missing_account() -> ProviderAccountId {
    id()
}
