//! The harness of the API tests: the real router on the real SQLite store
//! (`sqlite::memory:`), with the example tenant's objects stored under exactly the ids the
//! method examples name, a second tenant, and tokens made for any grants.
//!
//! Invariant: each `Harness` has its own database; the objects' scope chains are written
//! out here by hand, apart from the code under test, so the authorization tests compare
//! Cedar's answers with an independent statement of SPEC §3.
// TODO(issue 7): build the records with bc_store::testing's builders once they move there.

#![allow(dead_code)]

use std::sync::Arc;

use async_trait::async_trait;
use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use base64::Engine as _;
use bc_api::methods::examples as ex;
use bc_api::methods::load_balancers::LoadBalancersCreateInput;
use bc_api::{MethodInput, Settings};
use bc_domain::model::*;
use bc_domain::policy::{PoolPolicy, Scale};
use bc_domain::ports::{
    Clock, ManualClock, ProviderImpl, ProviderRegistry, ProviderResult, Store, UnitOfWork, Write,
};
use bc_domain::*;
use bc_store::{AeadSecretBox, SqlStore};
use serde_json::Value;
use tower::ServiceExt;

/// A second tenant, with objects of its own.
pub const OTHER_TENANT: &str = "globex";
/// A second load balancer of the example tenant, on the example account.
pub const OTHER_LB: &str = "lb_01jq3k5v9x8y7z6w5v4t3s2r2b";
/// The other tenant's pool.
pub const OTHER_POOL: &str = "pool_01jq3k5v9x8y7z6w5v4t3s2r9q";

/// The fixed start of the tests' clock.
pub fn t0() -> Timestamp {
    Timestamp::from_unix_ms(1_764_000_000_000)
}

/// A provider registry for tests that never reach a provider: any use is refused.
pub struct NoProviders;

#[async_trait]
impl ProviderRegistry for NoProviders {
    async fn provider_for(&self, _: &ProviderAccount) -> ProviderResult<Arc<dyn ProviderImpl>> {
        Err(ProviderError::Unauthorized)
    }
    async fn provider_for_token(
        &self,
        _: ProviderKind,
        _: &SecretString,
    ) -> ProviderResult<Arc<dyn ProviderImpl>> {
        Err(ProviderError::Unauthorized)
    }
}

/// The API on a fresh store holding the fixture.
pub struct Harness {
    /// The store.
    pub store: Arc<SqlStore>,
    /// The router.
    pub app: Router,
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
    /// The error code of an error answer.
    pub fn code(&self) -> &str {
        self.json["error"]["code"].as_str().unwrap_or("")
    }
    /// Whether the call reached the not-yet-written handler (passed every check).
    pub fn reached_handler(&self) -> bool {
        self.status == StatusCode::SERVICE_UNAVAILABLE
            && self.json["error"]["message"].as_str().is_some_and(|m| m.contains("not served yet"))
    }
}

/// Settings of the tests: no rate limit unless a test asks for one.
pub fn test_settings() -> Settings {
    Settings { rate_limit: None, ..Settings::default() }
}

impl Harness {
    /// The contract's API with test settings.
    pub async fn new() -> Self {
        Self::with(|api| api.settings(test_settings())).await
    }

    /// The API built by `build` from the contract's defaults.
    pub async fn with(build: impl FnOnce(bc_api::Api) -> bc_api::Api) -> Self {
        let store = Arc::new(SqlStore::connect("sqlite::memory:").await.expect("store"));
        let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(t0()));
        let secrets = Arc::new(AeadSecretBox::new(&[7u8; 32]).expect("key"));
        let api = bc_api::Api::new(store.clone(), clock, Arc::new(NoProviders), secrets);
        let app = build(api).router();
        let h = Harness { store, app };
        h.store.commit(fixture()).await.expect("fixture");
        h
    }

    /// Sends a request.
    pub async fn send(&self, req: Request<Body>) -> Answer {
        let resp = self.app.clone().oneshot(req).await.expect("infallible");
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 24).await.expect("body");
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Answer { status, headers, json, text }
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

    /// Stores a token holding `grants` and returns its plaintext.
    pub async fn token(&self, grants: Vec<Grant>) -> String {
        let (plain, token) = new_token(grants);
        self.store
            .commit(UnitOfWork::new().write(Write::InsertApiToken(token)))
            .await
            .expect("token");
        plain
    }

    /// Stores a token holding `grants`, revokes it, and returns its plaintext.
    pub async fn revoked_token(&self, grants: Vec<Grant>) -> String {
        let (plain, token) = new_token(grants);
        let id = token.token_id.clone();
        let uow = UnitOfWork::new()
            .write(Write::InsertApiToken(token))
            .write(Write::RevokeApiToken { token_id: id, at: t0() });
        self.store.commit(uow).await.expect("revoked token");
        plain
    }

    /// Stores a joined node of the example pool and returns its credential.
    pub async fn node_credential(&self) -> String {
        let credential = format!("nc_{}", random_b64());
        let node = Node {
            node_id: NodeId::generate(1, rand::random()),
            pool_id: id(ex::POOL),
            node_name: "pool-gpu-1".into(),
            provider_node_id: None,
            bcd_version: "0.1.0".into(),
            credential_hash: bc_api::auth::node_credential_lookup_hash(&credential).expect("shape"),
            joined_at: t0(),
            last_heartbeat_at: None,
        };
        self.store.commit(UnitOfWork::new().write(Write::PutNode(node))).await.expect("node");
        credential
    }
}

fn random_b64() -> String {
    let bytes: [u8; 32] = rand::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A new token (`bc_` + 43 base64url) and its stored record.
pub fn new_token(grants: Vec<Grant>) -> (String, ApiToken) {
    let plain = format!("bc_{}", random_b64());
    let token = ApiToken {
        token_id: TokenId::generate(1, rand::random()),
        token_hash: bc_api::auth::api_token_lookup_hash(&plain).expect("shape"),
        grants,
        created_at: t0(),
        revoked_at: None,
    };
    (plain, token)
}

/// Parses an id (test data is valid).
pub fn id<K: IdKind>(s: &str) -> Id<K> {
    Id::parse(s).expect("valid id")
}

/// A tenant id.
pub fn tenant(s: &str) -> TenantId {
    TenantId::parse(s).expect("valid tenant")
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

fn pool(pool_id: &str, tenant_id: &str) -> Pool {
    Pool {
        pool_id: id(pool_id),
        tenant_id: tenant(tenant_id),
        name: ObjectName::parse("web").expect("name"),
        policy: PoolPolicy::default(),
        state: PoolState::Active,
        generation: 1,
        created_at: t0(),
        updated_at: t0(),
        archived_at: None,
    }
}

fn status() -> ObservedStatus {
    ObservedStatus {
        state: ResourceState::Pending,
        message: None,
        observed_generation: 0,
        updated_at: t0(),
    }
}

fn load_balancer(lb_id: &str, name: &str) -> LoadBalancer {
    let example: LoadBalancersCreateInput =
        serde_json::from_value(<LoadBalancersCreateInput as MethodInput>::example())
            .expect("example parses");
    LoadBalancer {
        load_balancer_id: id(lb_id),
        tenant_id: tenant(ex::TENANT),
        pool_id: id(ex::POOL),
        provider_account_id: id(ex::ACCOUNT),
        name: ObjectName::parse(name).expect("name"),
        spec: example.spec(),
        generation: 1,
        created_at: t0(),
        delete_requested: false,
        provider_load_balancer_id: None,
        ip: None,
        status: status(),
        ready_at: None,
        deleted_at: None,
        quota_released: false,
    }
}

/// The example tenant's objects (the ids the examples name) and the other tenant's pool.
fn fixture() -> UnitOfWork {
    let account = ProviderAccount {
        provider_account_id: id(ex::ACCOUNT),
        tenant_id: tenant(ex::TENANT),
        provider: ProviderKind::Digitalocean,
        name: ObjectName::parse("main").expect("name"),
        credentials: SealedSecret(vec![1, 2, 3]),
        created_at: t0(),
        deleted_at: None,
    };
    let cluster = KubernetesCluster {
        cluster_id: id(ex::CLUSTER),
        tenant_id: tenant(ex::TENANT),
        provider_account_id: id(ex::ACCOUNT),
        name: ObjectName::parse("prod").expect("name"),
        region: "nyc1".into(),
        desired_version: None,
        high_availability: false,
        mode: ClusterMode::Standard,
        origin: ClusterOrigin::Created,
        substrate_pool_ids: vec![],
        delete_requested: false,
        generation: 1,
        created_at: t0(),
        provider_cluster_id: None,
        version: None,
        status: status(),
    };
    let node_pool = NodePool {
        node_pool_id: id(ex::NODE_POOL),
        cluster_id: id(ex::CLUSTER),
        tenant_id: tenant(ex::TENANT),
        name: "workers".into(),
        size: "s-2vcpu-4gb".into(),
        scale: Scale::Count(3),
        labels: Default::default(),
        taints: vec![],
        managed_by: None,
        origin: bc_domain::model::NodePoolOrigin::Created,
        delete_requested: false,
        generation: 1,
        created_at: t0(),
        provider_node_pool_id: None,
        nodes_listed: 0,
        nodes_ready: 0,
        state: NodePoolState::Pending,
        message: None,
        observed_generation: 0,
        updated_at: t0(),
    };
    let booking = Booking {
        booking_id: id(ex::BOOKING),
        tenant_id: tenant(ex::TENANT),
        pool_id: id(ex::POOL),
        node_name: None,
        state: BookingState::Active,
        created_at: t0(),
        ends_at: None,
        ended_at: None,
    };
    UnitOfWork::new()
        .write(Write::InsertPool(pool(ex::POOL, ex::TENANT)))
        .write(Write::InsertPool(pool(OTHER_POOL, OTHER_TENANT)))
        .write(Write::InsertAccount(account))
        .write(Write::InsertCluster(cluster))
        .write(Write::InsertNodePool(node_pool))
        .write(Write::InsertLoadBalancer(load_balancer(ex::LOAD_BALANCER, "web-lb")))
        .write(Write::InsertLoadBalancer(load_balancer(OTHER_LB, "other-lb")))
        .write(Write::InsertBooking(booking))
}
