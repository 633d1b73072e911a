//! The harness of the API tests: the real router on a real store (each backend of
//! `bc_store::testing`), the simulator behind the production DigitalOcean and kube
//! adapters as the provider and cluster ports,
//! the example tenant's objects stored under exactly the ids the method examples name, a
//! second tenant, and tokens made for any grants.
//!
//! Invariants: each `Harness` has its own database and simulator; the objects' scope
//! chains are written out here by hand, apart from the code under test, so the
//! authorization tests compare Cedar's answers with an independent statement of SPEC §3.
//! Every response body and every log line a harness sees is kept, and when the harness is
//! dropped it checks that none carries a secret the test made (provider tokens, join
//! tokens, node credentials) — so every test of the suite is also a leak test.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use bc_api::methods::examples as ex;
use bc_api::methods::load_balancers::LoadBalancersCreateInput;
use bc_api::{Api, MethodInput, Ports, Settings};
use bc_domain::model::*;
use bc_domain::policy::PoolPolicy;
use bc_domain::ports::SubstrateRepo as _;
use bc_domain::ports::{
    ClusterApi, ManualClock, ProviderCredentials, ProviderRegistry, SecretBox, Store, UnitOfWork,
    WorkKind, WorkQueue as _, Write,
};
use bc_domain::recipes;
use bc_domain::token::{ApiTokenSecret, sha256_hex};
use bc_domain::*;
use bc_sim::testing::{Cloud, TEST_TOKEN};
use bc_sim::{Sim, SimConfig};
use bc_store::testing as rows;
use bc_store::{AeadSecretBox, SqlStore};
use serde_json::Value;
use tokio::sync::Notify;
use tower::ServiceExt;
use tracing::instrument::WithSubscriber;

/// A second tenant, with objects of its own.
pub const OTHER_TENANT: &str = "globex";
/// A second load balancer of the example tenant, on the example account.
pub const OTHER_LB: &str = "lb_01jq3k5v9x8y7z6w5v4t3s2r2b";
/// The other tenant's pool.
pub const OTHER_POOL: &str = "pool_01jq3k5v9x8y7z6w5v4t3s2r9q";
/// The provider token the `providerAccounts.create` example carries (the simulator
/// accepts it as a second account).
pub const EXAMPLE_PROVIDER_TOKEN: &str = "dop_v1_0123456789abcdef";
/// The example pool's quota of load balancers.
pub const EXAMPLE_LB_QUOTA: u32 = 5;
/// The example pool's load balancers the fixture creates, `(id, name)`: each books one
/// unit of the pool's `loadBalancers` quota, as `loadBalancers.create` does.
pub const EXAMPLE_POOL_LBS: [(&str, &str); 2] =
    [(ex::LOAD_BALANCER, "main-lb"), (OTHER_LB, "other-lb")];
/// The units of the example pool's `loadBalancers` quota the fixture books.
pub const FIXTURE_LBS_BOOKED: u32 = EXAMPLE_POOL_LBS.len() as u32;
/// When the substrate reconciler's fixture run asked to look at the example pool's
/// substrate again, after the harness's start: until then its work is not due, so a write
/// that wakes the reconciler shows as the item being due at once.
pub const FIXTURE_SUBSTRATE_LOOK: ::time::Duration = ::time::Duration::seconds(30);

/// The store every behaviour test runs on (one per backend, by `store_suite!`).
pub type S = Arc<SqlStore>;

/// The simulator the tests use: the example provider token is a second account.
pub fn sim_config() -> SimConfig {
    SimConfig {
        tokens: vec![TEST_TOKEN.to_owned(), EXAMPLE_PROVIDER_TOKEN.to_owned()],
        ..SimConfig::default()
    }
}

/// Settings of the tests: no rate limit unless a test asks for one.
pub fn test_settings() -> Settings {
    Settings { rate_limit: None, ..Settings::default() }
}

/// What a harness saw: response bodies, log lines, and the secrets its test made.
#[derive(Clone, Default)]
pub struct Capture {
    logs: Arc<Mutex<Vec<u8>>>,
    responses: Arc<Mutex<Vec<(String, String)>>>,
    secrets: Arc<Mutex<Vec<String>>>,
}

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.logs.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Capture {
    type Writer = Capture;
    fn make_writer(&'a self) -> Capture {
        self.clone()
    }
}

impl Capture {
    /// Remembers a secret the test made; no response or log line may carry it (but the
    /// one join answer that hands out a node credential).
    pub fn secret(&self, s: &str) {
        self.secrets.lock().unwrap().push(s.to_owned());
    }

    /// Every log line so far.
    pub fn logs(&self) -> String {
        String::from_utf8_lossy(&self.logs.lock().unwrap()).into_owned()
    }

    /// Keeps an answer the test read some other way (over real HTTP, see
    /// [`Harness::serve`]), so the leak scan sees it too.
    pub fn response(&self, path: &str, body: &str) {
        self.responses.lock().unwrap().push((path.to_owned(), body.to_owned()));
    }

    /// Logs a line as the API would (to test the scan itself).
    pub fn log(&self, line: &str) {
        let mut me = self.clone();
        let _ = writeln!(me, "{line}");
    }

    /// The places a secret appears where it must not: `(where, secret)`.
    pub fn leaks(&self) -> Vec<(String, String)> {
        let secrets = self.secrets.lock().unwrap().clone();
        let logs = self.logs();
        let responses = self.responses.lock().unwrap().clone();
        let mut out = Vec::new();
        for secret in secrets {
            if logs.contains(&secret) {
                out.push(("a log line".to_owned(), secret.clone()));
            }
            for (path, body) in &responses {
                // The join answer is the one place a node credential is handed out.
                let issued = path.ends_with("/agents/join")
                    && serde_json::from_str::<Value>(body)
                        .is_ok_and(|v| v["nodeCredential"] == secret.as_str());
                if body.contains(&secret) && !issued {
                    out.push((format!("the answer of {path}"), secret.clone()));
                }
            }
        }
        out
    }
}

/// The API on a fresh store holding the fixture.
pub struct Harness {
    /// The store.
    pub store: S,
    /// The router.
    pub app: Router,
    /// The simulated cloud behind the provider and cluster ports (and its adapters).
    pub cloud: Cloud,
    /// Its simulator.
    pub sim: Sim,
    /// The clock the API and the simulator share.
    pub clock: Arc<ManualClock>,
    /// The server's secret box (to seal fixture credentials as the API does).
    pub secrets: Arc<AeadSecretBox>,
    /// The work wake-up the API pokes.
    pub work: Arc<Notify>,
    /// The events wake-up the streams wait on.
    pub events: Arc<Notify>,
    /// What the harness saw.
    pub capture: Capture,
    dispatch: tracing::Dispatch,
}

impl Drop for Harness {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let leaks = self.capture.leaks();
        assert!(leaks.is_empty(), "secrets leaked: {leaks:?}");
    }
}

/// A harness's router served on loopback (see [`Harness::serve`]); aborted on drop.
pub struct Served {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A response, read whole.
pub struct Answer {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// Body as JSON (`Null` when it is not JSON).
    pub json: Value,
    /// Body as text.
    pub text: String,
}

impl Answer {
    /// The error code of an error answer, `OK` for a 200.
    pub fn code(&self) -> &str {
        if self.status == StatusCode::OK {
            return "OK";
        }
        self.json["error"]["code"].as_str().unwrap_or("")
    }

    /// The field an input error names.
    pub fn field(&self) -> Option<&str> {
        self.json["error"]["field"].as_str()
    }

    /// Panics unless the answer is a 200.
    #[track_caller]
    pub fn ok(self) -> Value {
        assert_eq!(self.status, StatusCode::OK, "{}", self.text);
        self.json
    }

    /// Panics unless the answer is the error `code`; returns its message.
    #[track_caller]
    pub fn err(&self, code: &str) -> String {
        assert_eq!(self.code(), code, "{} {}", self.status, self.text);
        self.json["error"]["message"].as_str().unwrap_or_default().to_owned()
    }
}

impl Harness {
    /// The contract's API with test settings on `store`.
    pub async fn on(store: S) -> Self {
        Self::with(store, sim_config(), |api| api.settings(test_settings())).await
    }

    /// The API built by `build` from the contract's defaults, over a simulator with
    /// `config`, on `store` holding the fixture.
    pub async fn with(store: S, config: SimConfig, build: impl FnOnce(Api) -> Api) -> Self {
        Self::with_providers(store, config, |r| r, build).await
    }

    /// [`Self::with`] with the provider registry `wrap` makes of the DigitalOcean one.
    pub async fn with_providers(
        store: S,
        config: SimConfig,
        wrap: impl FnOnce(Arc<dyn ProviderRegistry>) -> Arc<dyn ProviderRegistry>,
        build: impl FnOnce(Api) -> Api,
    ) -> Self {
        Self::with_cloud_providers(store, config, |_, r| wrap(r), build).await
    }

    /// [`Self::with_providers`] where `wrap` also sees the simulated cloud (its GKE face's
    /// URLs).
    pub async fn with_cloud_providers(
        store: S,
        config: SimConfig,
        wrap: impl FnOnce(&Cloud, Arc<dyn ProviderRegistry>) -> Arc<dyn ProviderRegistry>,
        build: impl FnOnce(Api) -> Api,
    ) -> Self {
        Self::with_ports(store, config, wrap, |c| c, build).await
    }

    /// [`Self::on`] with the clusters' port `wrap` makes of the simulated clusters'.
    pub async fn with_clusters(
        store: S,
        wrap: impl FnOnce(Arc<dyn ClusterApi>) -> Arc<dyn ClusterApi>,
    ) -> Self {
        let build = |api: Api| api.settings(test_settings());
        Self::with_ports(store, sim_config(), |_, r| r, wrap, build).await
    }

    /// The harness with the provider registry and the clusters' port `wrap` and
    /// `wrap_clusters` make of the simulated cloud's.
    async fn with_ports(
        store: S,
        config: SimConfig,
        wrap: impl FnOnce(&Cloud, Arc<dyn ProviderRegistry>) -> Arc<dyn ProviderRegistry>,
        wrap_clusters: impl FnOnce(Arc<dyn ClusterApi>) -> Arc<dyn ClusterApi>,
        build: impl FnOnce(Api) -> Api,
    ) -> Self {
        let cloud = Cloud::with_config(config).await;
        let (sim, clock) = (cloud.sim.clone(), cloud.clock.clone());
        let secrets = Arc::new(AeadSecretBox::new(&[7u8; 32]).expect("key"));
        let ports = Ports {
            store: store.clone(),
            clock: clock.clone(),
            providers: wrap(&cloud, cloud.providers(secrets.clone())),
            clusters: wrap_clusters(cloud.clusters()),
            secrets: secrets.clone(),
        };
        let (work, events) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let api = Api::new(ports).work_notify(work.clone()).events_notify(events.clone());
        let api = build(api);
        let default_quotas = api.current_settings().default_pool_quotas.clone();
        let app = api.router();
        let capture = Capture::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(capture.clone())
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .finish();
        let dispatch = tracing::Dispatch::new(subscriber);
        let h = Harness { store, app, cloud, sim, clock, secrets, work, events, capture, dispatch };
        // (The example's token is printed in the docs: public, so not scanned for.)
        h.capture.secret(TEST_TOKEN);
        h.fixture(&default_quotas).await;
        h
    }

    /// The time now.
    pub fn now(&self) -> Timestamp {
        bc_domain::ports::Clock::now(self.clock.as_ref())
    }

    /// Sends a request, keeping its answer and its log lines.
    pub async fn send(&self, req: Request<Body>) -> Answer {
        let path = req.uri().path().to_owned();
        let resp = self
            .app
            .clone()
            .oneshot(req)
            .with_subscriber(self.dispatch.clone())
            .await
            .expect("infallible");
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 24).await.expect("body");
        let text = String::from_utf8_lossy(&bytes).into_owned();
        self.capture.responses.lock().unwrap().push((path, text.clone()));
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Answer { status, headers, json, text }
    }

    /// Serves the router on a loopback TCP port (real HTTP through hyper), its log lines
    /// captured as [`Harness::send`]'s are; the server stops when the answer is dropped.
    pub async fn serve(&self) -> Served {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("loopback");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let dispatch = self.dispatch.clone();
        // Each connection runs on its own task: the subscriber is attached per request.
        let app = self.app.clone().layer(axum::middleware::from_fn(
            move |req: Request<Body>, next: axum::middleware::Next| {
                let dispatch = dispatch.clone();
                async move { next.run(req).with_subscriber(dispatch).await }
            },
        ));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Served { url, task }
    }

    /// Sends a request and returns the response unread (a stream).
    pub async fn open(&self, req: Request<Body>) -> axum::response::Response {
        self.app.clone().oneshot(req).with_subscriber(self.dispatch.clone()).await.expect("ok")
    }

    /// `POST path` with a bearer token (if any) and a raw body.
    pub async fn post_raw(&self, path: &str, token: Option<&str>, body: impl Into<Body>) -> Answer {
        let mut req = Request::post(path).header("content-type", "application/json");
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        self.send(req.body(body.into()).expect("request")).await
    }

    /// `POST /api/compute/<resource>/<method>` with a JSON body.
    pub async fn call(&self, method: &str, token: Option<&str>, body: &Value) -> Answer {
        let path = format!("/api/compute/{}", method.replacen('.', "/", 1));
        self.post_raw(&path, token, body.to_string()).await
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> Answer {
        self.send(Request::get(path).body(Body::empty()).expect("request")).await
    }

    /// Whether the work of `(kind, key)` is due now — a write just woke its reconciler —
    /// rather than merely queued (the fixture's substrate work waits
    /// [`FIXTURE_SUBSTRATE_LOOK`]).
    pub async fn work_due_now(&self, kind: WorkKind, key: &str) -> bool {
        let item = self.store.work_get(kind, key).await.expect("the work queue");
        item.is_some_and(|w| w.not_before <= self.now())
    }

    /// Runs the production reconciler of `kind` once, as its runtime would, on the oldest
    /// due item of that kind — claimed, run under its lease, then released — against the
    /// harness's store, simulator and clock: the writes only a reconciler makes, made by
    /// the reconciler. Returns the item's key and the run's outcome.
    pub async fn reconcile_once(
        &self,
        kind: WorkKind,
    ) -> (String, Result<bc_reconcile::Outcome, bc_reconcile::ReconcileError>) {
        let now = self.now();
        let owner = "harness-reconciler";
        let lease = now + ::time::Duration::minutes(5);
        let claimed = self.store.claim(owner, &[kind], 1, now, lease).await.expect("claim");
        let item = claimed.into_iter().next().expect("an item of that kind is due");
        let providers: Arc<dyn ProviderRegistry> = self.cloud.providers(self.secrets.clone());
        let deps = bc_reconcile::Deps {
            store: self.store.clone(),
            observer: Arc::new(bc_reconcile::UnsharedObserver::new(providers, self.clock.clone())),
            clusters: self.cloud.clusters(),
            clock: self.clock.clone(),
            settings: bc_reconcile::Settings {
                public_url: "http://127.0.0.1:9/compute".into(),
                bcd_image: "registry.example/bcd:test".into(),
            },
        };
        let fence = item.fence().expect("leased");
        let activation = bc_reconcile::Activation { item: item.clone(), fence, now };
        let reconciler = bc_reconcile::reconciler_of(kind, Arc::new(bc_reconcile::OsEntropy));
        let outcome = reconciler.reconcile(&deps, &activation).await;
        self.store.release(kind, &item.key, owner).await.expect("release");
        (item.key, outcome)
    }

    /// Stores a token holding `grants` and returns its plaintext.
    pub async fn token(&self, grants: Vec<Grant>) -> String {
        let (plain, token) = new_token(grants);
        self.store
            .commit(UnitOfWork::new().write(Write::InsertApiToken(token)))
            .await
            .expect("token");
        plain
    }

    /// A token holding `operator` on `compute-system`.
    pub async fn operator(&self) -> String {
        self.token(vec![grant(Role::Operator, Scope::System)]).await
    }

    /// Stores a token holding `grants`, revokes it, and returns its plaintext.
    pub async fn revoked_token(&self, grants: Vec<Grant>) -> String {
        let (plain, token) = new_token(grants);
        let id = token.token_id.clone();
        let uow = UnitOfWork::new()
            .write(Write::InsertApiToken(token))
            .write(Write::RevokeApiToken { token_id: id, at: rows::t(0) });
        self.store.commit(uow).await.expect("revoked token");
        plain
    }

    /// Stores a joined node of the example pool and returns its credential.
    pub async fn node_credential(&self) -> String {
        let credential = bc_domain::agent::new_node_credential(rand::random());
        let plain = credential.expose().to_owned();
        self.capture.secret(&plain);
        let mut node = rows::node(&id(ex::POOL), "pool-gpu-1");
        node.credential_hash = sha256_hex(plain.as_bytes());
        self.store.commit(UnitOfWork::new().write(Write::PutNode(node))).await.expect("node");
        plain
    }

    /// Credentials of `token` sealed for account `id`, as `providerAccounts.create` seals
    /// them.
    pub fn sealed(&self, id: &ProviderAccountId, token: &str) -> SealedSecret {
        let creds = ProviderCredentials::new(SecretString::new(token)).expect("token");
        SealedSecret(self.secrets.seal(&creds.to_plaintext(), id.as_str().as_bytes()).unwrap())
    }

    /// Commits one write of the fixture.
    async fn commit_fixture(&self, uow: UnitOfWork) {
        self.store.commit(uow).await.expect("fixture");
    }

    /// The example tenant's objects (the ids the examples name, names the examples do
    /// not use) and the other tenant's pool, each written by the recipe its create method
    /// calls — so quotas are booked, events written and work enqueued exactly as the API
    /// would (new pools get the API's `default_quotas`) — then what an operator and the
    /// substrate reconciler write on top: the example pool's `loadBalancers` quota
    /// (`quotas.set`, before its load balancers book it) and the substrate as observed
    /// (`provisioning`, with its event).
    async fn fixture(&self, default_quotas: &BTreeMap<QuotaResource, u32>) {
        let now = self.now();
        let acme = tenant(ex::TENANT);
        let mut account = rows::account(&acme, "primary");
        account.provider_account_id = id(ex::ACCOUNT);
        account.created_at = now;
        account.credentials = self.sealed(&account.provider_account_id, TEST_TOKEN);
        let account_id = account.provider_account_id.clone();
        self.commit_fixture(UnitOfWork::new().write(Write::InsertAccount(account))).await;
        let started =
            recipes::StartedSubstrate { account: account_id.clone(), event_id: rows::id() };
        let new = recipes::NewPool {
            pool_id: id(ex::POOL),
            tenant_id: acme.clone(),
            name: rows::name("main"),
            policy: example_policy(),
        };
        let made = recipes::pool_created(new, default_quotas, Some(&started), now);
        let pool = made.record;
        self.commit_fixture(made.uow).await;
        let theirs = recipes::NewPool {
            pool_id: id(OTHER_POOL),
            tenant_id: tenant(OTHER_TENANT),
            name: rows::name("main"),
            policy: PoolPolicy::default(),
        };
        self.commit_fixture(recipes::pool_created(theirs, default_quotas, None, now).uow).await;
        let quota = Write::SetQuota {
            pool_id: pool.pool_id.clone(),
            resource: QuotaResource::LoadBalancers,
            limit: EXAMPLE_LB_QUOTA,
        };
        self.commit_fixture(UnitOfWork::new().write(quota)).await;
        // The substrate reconciler's first run: it claims the pool's work, commits its
        // observation under that lease — the row, and the event of its state's move (the
        // one builder it uses) — and, converging, asks for a later look.
        let owner = "fixture-substrate-reconciler";
        let lease = now + ::time::Duration::minutes(1);
        let claimed = self.store.claim(owner, &[WorkKind::Substrates], 1, now, lease).await;
        let claimed = claimed.expect("claim");
        assert_eq!(claimed.len(), 1, "the example pool's substrate work is due");
        let fence = claimed[0].fence().expect("leased");
        let pending = self.store.substrate_get_any(&pool.pool_id).await.unwrap().expect("pending");
        let observed = Substrate {
            state: ResourceState::Provisioning,
            message: Some("creating".into()),
            nodes_listed: 3,
            nodes_joined: 1,
            waiting_to_join: Some(WaitingToJoin { nodes: 2, since: now }),
            observed_generation: pool.generation,
            updated_at: now,
            ..pending
        };
        let event = recipes::substrate_event(&observed, rows::id(), now);
        let uow = UnitOfWork::new().write(Write::PutSubstrate(observed)).event(event);
        self.commit_fixture(uow.fenced(fence)).await;
        let again = now + FIXTURE_SUBSTRATE_LOOK;
        let held = self.store.requeue(WorkKind::Substrates, ex::POOL, owner, again).await;
        assert!(held.expect("requeue"), "the fixture held the lease");
        let new = recipes::NewCluster {
            cluster_id: id(ex::CLUSTER),
            tenant_id: acme.clone(),
            provider_account_id: account_id.clone(),
            name: rows::name("main-cluster"),
            region: "nyc1".into(),
            version: None,
            high_availability: false,
            mode: ClusterMode::Standard,
        };
        // Its first node pool, with labels and a taint.
        let shape = rows::node_pool(&recipes::new_cluster_row(new.clone(), now), "cpu");
        let node_pool = NodePool {
            labels: shape.labels,
            taints: shape.taints,
            ..NodePool::pending(
                id(ex::NODE_POOL),
                id(ex::CLUSTER),
                acme.clone(),
                shape.name,
                shape.size,
                shape.scale,
                now,
            )
        };
        self.commit_fixture(recipes::cluster_created(new, vec![node_pool], now).uow).await;
        let example: LoadBalancersCreateInput =
            serde_json::from_value(<LoadBalancersCreateInput as MethodInput>::example())
                .expect("example parses");
        for (lb_id, name) in EXAMPLE_POOL_LBS {
            let new = recipes::NewLoadBalancer {
                load_balancer_id: id(lb_id),
                tenant_id: acme.clone(),
                pool_id: pool.pool_id.clone(),
                provider_account_id: account_id.clone(),
                name: rows::name(name),
                spec: example.spec(),
            };
            self.commit_fixture(recipes::load_balancer_created(new, now).uow).await;
        }
        let mut booking = rows::booking(&pool, None);
        booking.booking_id = id(ex::BOOKING);
        booking.node_name = None;
        booking.created_at = now;
        self.commit_fixture(UnitOfWork::new().write(Write::InsertBooking(booking))).await;
    }
}

/// The policy of the `pools.create` example (a substrate on the example account).
pub fn example_policy() -> PoolPolicy {
    let example = <bc_api::methods::pools::PoolsCreateInput as MethodInput>::example();
    serde_json::from_value(example["policy"].clone()).expect("the example policy parses")
}

/// A new token and its stored record.
pub fn new_token(grants: Vec<Grant>) -> (String, ApiToken) {
    let secret = ApiTokenSecret::generate(rand::random());
    let token = ApiToken {
        token_id: rows::id(),
        token_hash: secret.hash(),
        grants,
        created_at: rows::t(0),
        revoked_at: None,
    };
    (secret.expose().to_owned(), token)
}

/// Parses an id (test data is valid).
pub fn id<K: IdKind>(s: &str) -> Id<K> {
    Id::parse(s).expect("valid id")
}

/// A tenant id.
pub fn tenant(s: &str) -> TenantId {
    rows::tenant(s)
}

/// A role on a scope of the example tenant.
pub fn grant(role: Role, scope: Scope) -> Grant {
    let tenant_id = match &scope {
        Scope::System => None,
        Scope::Tenant(t) => Some(t.clone()),
        _ => Some(tenant(ex::TENANT)),
    };
    Grant { role, scope, tenant_id }
}

/// The example tenant's scope.
pub fn acme() -> Scope {
    Scope::Tenant(tenant(ex::TENANT))
}

/// The scope chain of each fixture object, written out by hand (SPEC §3's tree).
pub fn chain_of(object: &Scope) -> Vec<Scope> {
    let account = Scope::ProviderAccount(id(ex::ACCOUNT));
    let cluster = Scope::KubernetesCluster(id(ex::CLUSTER));
    let up: Vec<Scope> = match object {
        Scope::System => vec![],
        Scope::Tenant(_) => vec![Scope::System],
        Scope::Pool(_) | Scope::ProviderAccount(_) => vec![acme(), Scope::System],
        Scope::KubernetesCluster(_) | Scope::LoadBalancer(_) => {
            vec![account, acme(), Scope::System]
        }
        Scope::KubernetesNodePool(_) => vec![cluster, account, acme(), Scope::System],
    };
    std::iter::once(object.clone()).chain(up).collect()
}

/// `body` with its top-level keys in reverse order (the same body to a reader; another
/// byte sequence on the wire).
pub fn reordered(body: &Value) -> String {
    let map = body.as_object().expect("an object");
    let fields: Vec<String> =
        map.iter().rev().map(|(k, v)| format!("{}:{}", Value::from(k.as_str()), v)).collect();
    format!("{{{}}}", fields.join(","))
}

/// `body` with `field` set to `value`.
pub fn with(body: &Value, field: &str, value: Value) -> Value {
    let mut b = body.clone();
    b[field] = value;
    b
}

/// One step of a path into a JSON document.
#[derive(Debug, Clone)]
pub enum Step {
    /// An object's key.
    Key(String),
    /// An array's index.
    Index(usize),
}

/// The JSON path of `steps`, as errors name fields: `policy.flavors[0].name`.
pub fn path_text(steps: &[Step]) -> String {
    let mut out = String::new();
    for s in steps {
        match s {
            Step::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// `body` with the value at `path` replaced by `value`.
pub fn set_at(body: &Value, path: &[Step], value: Value) -> Value {
    let mut body = body.clone();
    let mut at = &mut body;
    for step in path {
        at = match step {
            Step::Key(k) => &mut at[k.as_str()],
            Step::Index(i) => &mut at[*i],
        };
    }
    *at = value;
    body
}

/// Every field of `example` under `schema`, with its schema: `(path, schema, value)`.
pub fn fields(
    schema: &Value,
    example: &Value,
    path: Vec<Step>,
    out: &mut Vec<(Vec<Step>, Value, Value)>,
) {
    let schema = unwrap_nullable(schema);
    if !path.is_empty() {
        out.push((path.clone(), schema.clone(), example.clone()));
    }
    match example {
        Value::Object(map) => {
            let mut props =
                schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
            // Externally tagged enums: the variant the example uses.
            for branch in schema.get("oneOf").and_then(Value::as_array).into_iter().flatten() {
                if let Some(p) = branch.get("properties").and_then(Value::as_object) {
                    props.extend(p.clone());
                }
            }
            for (key, value) in map {
                if let Some(sub) = props.get(key) {
                    let mut p = path.clone();
                    p.push(Step::Key(key.clone()));
                    fields(sub, value, p, out);
                }
            }
        }
        Value::Array(items) => {
            if let (Some(first), Some(item_schema)) = (items.first(), schema.get("items")) {
                let mut p = path;
                p.push(Step::Index(0));
                fields(item_schema, first, p, out);
            }
        }
        _ => {}
    }
}

/// The schema of a nullable field's non-null branch (an `Option` is `anyOf [T, null]`).
fn unwrap_nullable(schema: &Value) -> &Value {
    match schema.get("anyOf").and_then(Value::as_array) {
        Some(b) => b.iter().find(|x| x.get("type") != Some(&Value::from("null"))).unwrap_or(schema),
        None => schema,
    }
}

/// `body` without `field`.
pub fn without(body: &Value, field: &str) -> Value {
    let mut b = body.clone();
    b.as_object_mut().expect("an object").remove(field);
    b
}

/// The example body of `method`.
pub fn example(method: &str) -> Value {
    let (resource, name) = method.split_once('.').expect("resource.method");
    bc_api::registry().find(resource, name).expect("a method").example().clone()
}

/// How many of each row kind a test counts.
pub type Counts = BTreeMap<&'static str, usize>;

/// The store's read traits, for tests that look at what a call recorded.
pub mod repos {
    pub use bc_domain::ports::{
        AccountRepo, AgentRepo, ClusterRepo, LedgerRepo, LoadBalancerRepo, PoolRepo, Store,
        SubstrateRepo, WorkQueue,
    };
}
