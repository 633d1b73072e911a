//! Test support (cargo feature `testing`): the one fixture of each thing that tests here
//! and in other crates (providers, reconcilers, the API) need — a stopped clock, a
//! simulator on it, served on loopback with an HTTP client, a running cluster with its
//! kubeconfig and a `kube` client, request builders for the model, the provider ports
//! and the wire, a recording join endpoint, the substrate objects bcd needs, and bounded
//! waits.
//!
//! Invariant: every helper panics with a clear message on failure (it is for tests, not
//! for serving), every wait is bounded in steps or time, and every server it starts
//! binds loopback and stops when its handle is dropped.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bc_domain::agent::{
    ENV_NODE_NAME, JOIN_PATH, JoinResponse, SECRET_ENV, SECRET_KEY_JOIN_TOKEN,
    SECRET_KEY_SERVER_URL,
};
use bc_domain::model::{
    ClusterMode, Domain, ForwardingRule, GlobalSettings, HealthCheck, LoadBalancerType, Protocol,
    SecretString,
};
use bc_domain::name::{
    BCD_NAME, JOIN_SECRET_NAME, LABEL_MANAGED_BY, LABEL_SUBSTRATE_POOL, MANAGED_BY_VALUE,
};
use bc_domain::ports::{
    CreateClusterRequest, KubeObject, LoadBalancerRequest, ManualClock, NodePoolRequest,
    ObjectKind, ObjectRef, OwnerLabel, ProviderLoadBalancerKind, ProviderTargets,
};
use bc_domain::{NodeId, PoolId, Timestamp};
use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::model::{ClusterCreate, NodePoolSpec, NodeState, TaintSpec, routes};
use crate::{Sim, SimConfig, SimServer};

pub use crate::config::DEFAULT_TOKEN as TEST_TOKEN;
pub use crate::install_crypto;
pub use cloud::{Cloud, adapter_config, cluster_routes};
pub use on::{Call, ControllersMade, OnProvider};

mod cloud;
mod on;

/// Where [`clock`] starts (RFC 3339).
pub const START: &str = "2026-12-02T12:00:00Z";

/// The node size every helper pool uses.
pub const NODE_SIZE: &str = "s-2vcpu-4gb";

/// How far [`run_until_running`] moves the clock per step.
pub const RUN_STEP: time::Duration = time::Duration::seconds(60);

/// How many steps [`run_until_running`] takes before it gives up.
pub const RUN_MAX_STEPS: usize = 30;

/// How long [`bounded`] lets one network call take before the test fails.
pub const CALL_BOUND: Duration = Duration::from_secs(20);

/// The label value (pool) the fixtures' substrate node pools and objects carry.
pub const POOL: &str = "p1";

/// The pool id the [`JoinServer`] answers with.
pub const JOINED_POOL_ID: &str = "pool_01hq3k5v9x8y7z6w5v4t3s2r1q";

/// Fails the test instead of hanging it when `f` takes longer than [`CALL_BOUND`] (the
/// `kube` client has no read timeout by default, research/kube-wire.md gotcha 5).
pub async fn bounded<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(CALL_BOUND, f).await.expect("call did not finish within CALL_BOUND")
}

// ----- clock and simulator -----------------------------------------------------------------

/// A manual clock stopped at [`START`].
pub fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(Timestamp::parse_rfc3339(START).expect("START is RFC 3339")))
}

/// A simulator with `config` on a fresh [`clock`] (not served: see [`Served`]), and that
/// clock.
pub fn sim(config: SimConfig) -> (Sim, Arc<ManualClock>) {
    let clock = clock();
    (Sim::new(config, clock.clone()), clock)
}

/// Moves `clock` forward by `secs` seconds.
pub fn step(clock: &ManualClock, secs: i64) {
    clock.advance(time::Duration::seconds(secs));
}

// ----- model-level builders ----------------------------------------------------------------

/// A node pool request: `count` nodes of [`NODE_SIZE`] named `name`, with `labels`
/// (present even when empty) and no taints.
pub fn node_pool(name: &str, count: i64, labels: &[(&str, &str)]) -> NodePoolSpec {
    NodePoolSpec {
        name: Some(name.into()),
        size: Some(NODE_SIZE.into()),
        count: Some(count),
        labels: Some(labels.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()),
        ..Default::default()
    }
}

/// `spec` with one more taint `key=value:effect`.
pub fn with_taint(mut spec: NodePoolSpec, key: &str, value: &str, effect: &str) -> NodePoolSpec {
    spec.taints.get_or_insert_with(Vec::new).push(TaintSpec {
        key: Some(key.into()),
        value: Some(value.into()),
        effect: Some(effect.into()),
    });
    spec
}

/// A cluster create body for the model: `name` in `nyc1` at `version`, with `pools`.
pub fn cluster_create(name: &str, version: &str, pools: Vec<NodePoolSpec>) -> ClusterCreate {
    ClusterCreate {
        name: Some(name.into()),
        region: Some("nyc1".into()),
        version: Some(version.into()),
        node_pools: Some(pools),
        ..Default::default()
    }
}

/// Creates cluster `name` (region `nyc1`, version `latest`, node pools `pools`) on the
/// [`TEST_TOKEN`] account at the simulator's current time; returns its id. The cluster
/// starts provisioning: see [`run_until_running`].
pub fn create_cluster(sim: &Sim, name: &str, pools: Vec<NodePoolSpec>) -> String {
    let now = sim.state().clock.now();
    match sim.state().model().create_cluster(TEST_TOKEN, cluster_create(name, "latest", pools), now)
    {
        Ok(c) => c.id,
        Err(e) => panic!("creating test cluster {name:?}: {e:?}"),
    }
}

/// Whether the cluster's API serves and every node of every pool is running.
fn fully_running(sim: &Sim, cluster_id: &str) -> bool {
    let now = sim.state().clock.now();
    let mut model = sim.state().model();
    model.cluster_is_running(cluster_id, now)
        && model.find_cluster(cluster_id, now).is_some_and(|c| {
            c.node_pools.iter().all(|p| p.nodes.iter().all(|n| n.state == NodeState::Running))
        })
}

/// Steps `clock` (the simulator's clock) by [`RUN_STEP`] until the cluster's API serves
/// and all its nodes run; panics after [`RUN_MAX_STEPS`] steps. With the default (fast)
/// delays one step is enough, so a provisioning cluster ends exactly one minute later.
pub fn run_until_running(sim: &Sim, clock: &ManualClock, cluster_id: &str) {
    for _ in 0..RUN_MAX_STEPS {
        if fully_running(sim, cluster_id) {
            return;
        }
        clock.advance(RUN_STEP);
    }
    assert!(
        fully_running(sim, cluster_id),
        "cluster {cluster_id} is not running with all its nodes after {RUN_MAX_STEPS} steps of \
         {RUN_STEP}"
    );
}

/// A kubeconfig YAML of the cluster as the DigitalOcean face serves it (it points at the
/// HTTP face once the simulator is served), but carrying the cluster's standing token,
/// which never expires, so a test may hold it across any simulated time; panics if the
/// cluster is unknown.
pub fn kubeconfig(sim: &Sim, cluster_id: &str) -> String {
    match sim.state().model().standing_kubeconfig(cluster_id) {
        Some(yaml) => yaml,
        None => panic!("kubeconfig of unknown test cluster {cluster_id}"),
    }
}

// ----- provider-port builders --------------------------------------------------------------

/// A fixed-size node pool request: `count` nodes of [`NODE_SIZE`], labelled
/// `bc/pool=<name>`, tagged `bc`, no taints.
pub fn node_pool_request(name: &str, count: u32) -> NodePoolRequest {
    NodePoolRequest {
        name: name.into(),
        size: NODE_SIZE.into(),
        count: Some(count),
        auto_scale: None,
        labels: BTreeMap::from([("bc/pool".to_owned(), name.to_owned())]),
        taints: vec![],
        tags: vec!["bc".into()],
    }
}

/// A standard cluster request: `name` in `nyc1` at `latest`, tagged `bc`, no HA.
pub fn cluster_request(name: &str, node_pools: Vec<NodePoolRequest>) -> CreateClusterRequest {
    CreateClusterRequest {
        name: name.into(),
        region: "nyc1".into(),
        version: "latest".into(),
        high_availability: false,
        mode: ClusterMode::Standard,
        tags: vec!["bc".into()],
        node_pools,
    }
}

/// A regional load balancer in `nyc1`: HTTP 80 → 8080 to droplets 101 and 102, default
/// health check, one size unit, no tags.
pub fn lb_request(name: &str) -> LoadBalancerRequest {
    LoadBalancerRequest {
        name: name.into(),
        kind: ProviderLoadBalancerKind::from(LoadBalancerType::Regional),
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
        targets: ProviderTargets::DropletIds(vec![101, 102]),
        size_unit: Some(1),
        redirect_http_to_https: false,
        global_settings: None,
        domains: vec![],
        tags: vec![],
    }
}

/// A global load balancer: HTTP to port 80 with the CDN on, `nyc1` preferred, failover at
/// 50 %, managed domain `app.example.com`, targeting the regional load balancers
/// `targets`.
pub fn global_lb_request(name: &str, targets: &[&str]) -> LoadBalancerRequest {
    LoadBalancerRequest {
        name: name.into(),
        kind: ProviderLoadBalancerKind::Global,
        region: None,
        forwarding_rules: vec![],
        health_check: HealthCheck::default(),
        sticky_sessions: None,
        targets: ProviderTargets::LoadBalancerIds(
            targets.iter().map(|t| (*t).to_owned()).collect(),
        ),
        size_unit: None,
        redirect_http_to_https: false,
        global_settings: Some(GlobalSettings {
            target_protocol: Protocol::Http,
            target_port: 80,
            cdn: true,
            region_priorities: Some(BTreeMap::from([("nyc1".to_owned(), 1)])),
            failover_threshold: Some(50),
        }),
        domains: vec![Domain {
            name: "app.example.com".into(),
            is_managed: true,
            certificate_id: None,
        }],
        tags: vec![],
    }
}

// ----- wire bodies for the DigitalOcean face ------------------------------------------------

/// A cluster create body: `name` in `nyc1` at `latest`, one pool `workers` of two
/// [`NODE_SIZE`] nodes.
pub fn cluster_body(name: &str) -> Value {
    json!({
        "name": name, "region": "nyc1", "version": "latest",
        "node_pools": [{"name": "workers", "size": NODE_SIZE, "count": 2}],
    })
}

/// A forwarding rule body: HTTP 80 → 8080.
pub fn rule_body() -> Value {
    json!({"entry_protocol": "http", "entry_port": 80, "target_protocol": "http", "target_port": 8080})
}

/// A regional load balancer body in `nyc1` with [`rule_body`] and one droplet.
pub fn lb_body(name: &str) -> Value {
    json!({"name": name, "region": "nyc1", "forwarding_rules": [rule_body()], "droplet_ids": [3164444]})
}

// ----- HTTP --------------------------------------------------------------------------------

/// One HTTP answer, read whole.
#[derive(Debug)]
pub struct Reply {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// Body text.
    pub text: String,
}

impl Reply {
    /// The body as JSON; panics (naming the body) when it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?}", self.text))
    }

    /// Status and JSON body (`null` for an empty body).
    pub fn parts(&self) -> (StatusCode, Value) {
        (self.status, if self.text.is_empty() { Value::Null } else { self.json() })
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A reqwest client for loopback (no proxy from the environment).
pub fn http_client() -> reqwest::Client {
    install_crypto();
    reqwest::Client::builder().no_proxy().build().expect("HTTP client")
}

/// A reqwest client for loopback that trusts only the CA `ca_pem` (the simulator's:
/// [`bc_sim::Sim`]'s cluster APIs and https DigitalOcean face present certificates it
/// signed).
pub fn http_client_trusting(ca_pem: &str) -> reqwest::Client {
    install_crypto();
    let ca = reqwest::Certificate::from_pem(ca_pem.as_bytes()).expect("CA PEM");
    reqwest::Client::builder().no_proxy().tls_certs_only([ca]).build().expect("HTTP client")
}

/// Sends `rb` (bounded) and reads the whole answer.
pub async fn send(rb: reqwest::RequestBuilder) -> Reply {
    let r = bounded(rb.send()).await.expect("request");
    let status = r.status();
    let headers = r.headers().clone();
    let text = bounded(r.text()).await.expect("body");
    Reply { status, headers, text }
}

/// A simulator served on loopback with its clock and an HTTP client: the harness of every
/// test of the HTTP faces and of the adapters over them.
pub struct Served {
    /// The simulator.
    pub sim: Sim,
    /// Its clock.
    pub clock: Arc<ManualClock>,
    /// The listener (stops on drop).
    pub server: SimServer,
    /// A loopback HTTP client.
    pub http: reqwest::Client,
}

impl Served {
    /// Serves a new simulator with `config` on `127.0.0.1:0` (the DigitalOcean face
    /// over plain http, each cluster's API over TLS).
    pub async fn start(config: SimConfig) -> Self {
        Self::start_with(config, crate::ServeOptions::default()).await
    }

    /// [`Self::start`] with serve options (the DigitalOcean face over https).
    pub async fn start_with(config: SimConfig, options: crate::ServeOptions) -> Self {
        install_crypto();
        let (sim, clock) = sim(config);
        let addr = "127.0.0.1:0".parse().expect("addr");
        let server = sim.serve_with(addr, options).await.expect("serve");
        let http = http_client_trusting(sim.state().tls.ca_pem());
        Self { sim, clock, server, http }
    }

    /// The simulator's CA certificate (PEM).
    pub fn ca_pem(&self) -> String {
        self.sim.state().tls.ca_pem().to_owned()
    }

    /// Moves the clock forward by `secs` seconds.
    pub fn step(&self, secs: i64) {
        step(&self.clock, secs);
    }

    /// `path` on the server (an absolute URL is kept as is).
    pub fn url(&self, path: &str) -> String {
        if path.starts_with("http") {
            path.to_owned()
        } else {
            format!("{}{path}", self.server.url())
        }
    }

    /// `method path` with bearer `token` (none when `None`) and an optional JSON body.
    pub async fn call_as(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Reply {
        let mut rb = self.http.request(method, self.url(path));
        if let Some(t) = token {
            rb = rb.bearer_auth(t);
        }
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        send(rb).await
    }

    /// `method path` with [`TEST_TOKEN`] and an optional JSON body.
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Reply {
        self.call_as(method, path, Some(TEST_TOKEN), body).await
    }

    /// `GET path` with [`TEST_TOKEN`].
    pub async fn get(&self, path: &str) -> Reply {
        self.call(Method::GET, path, None).await
    }

    /// The GKE API's base URL (clients append `/v1/…`; Google's Python client takes it as
    /// `client_options={"api_endpoint": …}`).
    pub fn gke_api_url(&self) -> String {
        self.server.url()
    }

    /// The OAuth 2.0 token endpoint (`…/token`).
    pub fn gke_token_url(&self) -> String {
        format!("{}{}", self.server.url(), crate::gke_api::routes::TOKEN)
    }

    /// A new service-account key of [`crate::model::gke::SIM_PROJECT`] the token endpoint
    /// accepts (the key file's JSON; its `token_uri` is [`Self::gke_token_url`]).
    pub fn gke_key(&self) -> String {
        self.sim.gke_key(crate::model::gke::SIM_PROJECT)
    }

    /// The production GKE adapter of a new key of [`crate::model::gke::SIM_PROJECT`],
    /// aimed at this simulator's API and token endpoint, on its clock, with its own
    /// request budget.
    pub fn gke_adapter(&self) -> bc_providers::gke::Gke {
        use bc_domain::ports::{AccountCredentials, ProviderCredentials};
        let text = bc_domain::model::SecretString::new(self.gke_key());
        let checked = ProviderCredentials::service_account(text, None)
            .check(bc_domain::model::ProviderKind::Gke)
            .expect("the simulator's key is a key");
        let AccountCredentials::ServiceAccount(account) = checked else { unreachable!("gke") };
        let config =
            bc_providers::gke::GkeConfig::with_urls(self.gke_api_url(), self.gke_token_url());
        bc_providers::gke::Gke::new(&config, &account, self.clock.clone(), None).expect("adapter")
    }

    /// An access token for a new key of [`crate::model::gke::SIM_PROJECT`], minted over the
    /// wire by the token endpoint (valid for an hour of the simulator's clock).
    pub async fn gke_access_token(&self) -> String {
        let key: Value = serde_json::from_str(&self.gke_key()).expect("key JSON");
        let kid = key["private_key_id"].as_str().expect("kid").to_owned();
        let issued = self.sim.state().model().gke_keys().into_iter().find(|k| k.kid == kid);
        let issued = issued.expect("the key just issued");
        let now = bc_domain::ports::Clock::now(&*self.clock).unix_ms() / 1000;
        let claims = serde_json::json!({
            "iss": issued.client_email,
            "scope": "https://www.googleapis.com/auth/cloud-platform",
            "aud": crate::model::gke::auth::GOOGLE_TOKEN_URL,
            "iat": now,
            "exp": now + 3600,
        });
        let assertion = crate::model::gke::auth::sign(&issued, &claims, false);
        let (status, body) = self.gke_grant(&assertion).await;
        assert_eq!(status, StatusCode::OK, "token endpoint: {body}");
        body["access_token"].as_str().expect("access_token").to_owned()
    }

    /// The token endpoint's answer to a JWT-bearer grant of `assertion`.
    pub async fn gke_grant(&self, assertion: &str) -> (StatusCode, Value) {
        // Base64url and dots need no form escaping.
        let form = format!(
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={assertion}"
        );
        let rb = self.http.post(self.gke_token_url()).body(form);
        send(rb.header("content-type", "application/x-www-form-urlencoded")).await.parts()
    }

    /// `method path` on the GKE face with bearer `token` and a JSON `body`; a `path`
    /// without a leading `/` is under [`GKE_LOCATIONS`] (`us-central1/clusters`).
    pub async fn gke_call(
        &self,
        method: Method,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> Reply {
        let path =
            if path.starts_with('/') { path.to_owned() } else { format!("{GKE_LOCATIONS}/{path}") };
        let mut rb = self.http.request(method, self.url(&path)).bearer_auth(token);
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        send(rb).await
    }

    /// Requests the DigitalOcean face received on `method template`.
    pub fn count(&self, method: &str, template: &str) -> u64 {
        self.sim.state().model().request_count(&routes::key(method, template))
    }
}

// ----- a running cluster --------------------------------------------------------------------

/// The GKE face's locations of [`crate::model::gke::SIM_PROJECT`]: `{GKE_LOCATIONS}/-/clusters`
/// lists every cluster of the project.
pub const GKE_LOCATIONS: &str = "/v1/projects/bc-sim-project/locations";

/// A served simulator with one cluster, its Kubernetes API base URL, bearer token and
/// kubeconfig: the harness of the Kubernetes face and of the cluster adapters.
pub struct ClusterEnv {
    /// The served simulator.
    pub served: Served,
    /// The cluster id.
    pub id: String,
    /// The cluster API's bearer token (the one in the kubeconfig).
    pub token: String,
    /// The cluster's API endpoint, `https://127.0.0.1:PORT` (its own TLS listener).
    pub base: String,
}

impl std::ops::Deref for ClusterEnv {
    type Target = Served;
    fn deref(&self) -> &Served {
        &self.served
    }
}

/// Where a client reaches a simulated cluster's API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Face {
    /// Its own TLS address, `https://127.0.0.1:PORT`, as the kubeconfig says (DOKS-like).
    Tls,
    /// The plain-http path `http://127.0.0.1:PORT/k8s/<id>` on the DigitalOcean listener
    /// (a `server` with a path prefix).
    PathPrefixed,
    /// The address DigitalOcean would give it, `https://<id>.k8s.ondigitalocean.com`,
    /// reached in process ([`Cloud::clusters`]: no socket).
    InProcess,
}

/// The pools of [`ClusterEnv::start`]: `bc-p1` (2 nodes, the [`POOL`] label, `gpu=true`,
/// `tier=a`) and the tenant's `own` (1 node, `tier=b`, no pool label).
pub fn standard_pools() -> Vec<NodePoolSpec> {
    vec![
        node_pool("bc-p1", 2, &[(LABEL_SUBSTRATE_POOL, POOL), ("gpu", "true"), ("tier", "a")]),
        node_pool("own", 1, &[("tier", "b")]),
    ]
}

impl ClusterEnv {
    /// A cluster of [`standard_pools`], running.
    pub async fn start() -> Self {
        Self::running(standard_pools()).await
    }

    /// A cluster of `pools`, running.
    pub async fn running(pools: Vec<NodePoolSpec>) -> Self {
        let env = Self::provisioning(pools).await;
        env.run();
        env
    }

    /// A cluster of `pools`, still provisioning (its API answers 503 until [`Self::run`]).
    pub async fn provisioning(pools: Vec<NodePoolSpec>) -> Self {
        let served = Served::start(SimConfig::default()).await;
        let id = create_cluster(&served.sim, "c1", pools);
        let token = served.sim.state().model().cluster_api_token(&id).expect("cluster token");
        let base = served.sim.state().model().cluster_endpoint(&id);
        Self { served, id, token, base }
    }

    /// Steps the clock until the cluster and its nodes run.
    pub fn run(&self) {
        run_until_running(&self.sim, &self.clock, &self.id);
    }

    /// The kubeconfig the DigitalOcean face serves now (its token is the current one).
    pub fn kubeconfig(&self) -> String {
        kubeconfig(&self.sim, &self.id)
    }

    /// The real `kube` client from [`Self::kubeconfig`].
    pub async fn kube(&self) -> kube::Client {
        kube_client(&self.kubeconfig()).await
    }

    /// The API server URL of cluster `id` on `face`.
    pub fn server_of(&self, face: Face, id: &str) -> String {
        match face {
            Face::Tls => self.sim.state().model().cluster_endpoint(id),
            Face::PathPrefixed => format!("{}/k8s/{id}", self.server.url()),
            Face::InProcess => format!("https://{id}.k8s.ondigitalocean.com"),
        }
    }

    /// The API server URL of this cluster on `face`.
    pub fn server(&self, face: Face) -> String {
        self.server_of(face, &self.id)
    }

    /// [`Self::kubeconfig`] with its `server` on `face`.
    pub fn kubeconfig_on(&self, face: Face) -> String {
        self.kubeconfig().replace(&self.server(Face::Tls), &self.server(face))
    }

    /// One raw request to the cluster API: `path_and_query` is appended verbatim to
    /// [`Self::base`], with bearer `token` when given.
    pub async fn raw_as(
        &self,
        method: Method,
        path_and_query: &str,
        content_type: Option<&str>,
        body: Option<String>,
        token: Option<&str>,
    ) -> Reply {
        let mut rb = self.http.request(method, format!("{}{path_and_query}", self.base));
        if let Some(t) = token {
            rb = rb.bearer_auth(t);
        }
        if let Some(ct) = content_type {
            rb = rb.header("content-type", ct);
        }
        if let Some(b) = body {
            rb = rb.body(b);
        }
        send(rb).await
    }

    /// One raw request with the cluster's token.
    pub async fn raw(
        &self,
        method: Method,
        path_and_query: &str,
        content_type: Option<&str>,
        body: Option<String>,
    ) -> Reply {
        self.raw_as(method, path_and_query, content_type, body, Some(&self.token)).await
    }

    /// GET with no query and no body, as kube's `get` sends it.
    pub async fn get(&self, path: &str) -> Reply {
        self.raw(Method::GET, path, None, None).await
    }

    /// PATCH as kube's apply sends it: `path` then `query` (e.g.
    /// `?&fieldManager=better-compute`), compact JSON body, apply-patch+yaml.
    pub async fn apply(&self, path: &str, query: &str, body: &Value) -> Reply {
        self.raw(
            Method::PATCH,
            &format!("{path}{query}"),
            Some("application/apply-patch+yaml"),
            Some(body.to_string()),
        )
        .await
    }

    /// DELETE as kube's delete sends it: `path?`, JSON content type, body `{}`.
    pub async fn delete(&self, path: &str) -> Reply {
        self.raw(Method::DELETE, &format!("{path}?"), Some("application/json"), Some("{}".into()))
            .await
    }

    /// The names of the Nodes a `labelSelector` selects over HTTP, sorted.
    pub async fn nodes(&self, selector: &str) -> Vec<String> {
        let rb = self
            .http
            .get(format!("{}/api/v1/nodes", self.base))
            .bearer_auth(&self.token)
            .query(&[("labelSelector", selector)]);
        let r = send(rb).await;
        assert_eq!(r.status, 200, "{selector}: {}", r.text);
        let v = r.json();
        assert_eq!(v["kind"], "NodeList");
        let mut names: Vec<String> = v["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|n| n["metadata"]["name"].as_str().expect("name").to_owned())
            .collect();
        names.sort();
        names
    }

    /// The names of the cluster's nodes carrying `label=value` (every node when `None`),
    /// from the model, sorted.
    pub fn node_names(&self, label: Option<(&str, &str)>) -> Vec<String> {
        let now = self.sim.state().clock.now();
        let nodes = self.sim.state().model().cluster_nodes(&self.id, now).expect("cluster");
        let mut names: Vec<String> = nodes
            .into_iter()
            .filter(|n| label.is_none_or(|(k, v)| n.labels.get(k).is_some_and(|x| x == v)))
            .map(|n| n.name)
            .collect();
        names.sort();
        names
    }

    /// The value of a stored object (straight from the store, no request counted).
    pub fn stored(&self, kind: ObjectKind, ns: Option<&str>, name: &str) -> Option<Value> {
        self.sim.state().kube.get_object(&self.id, kind, ns, name)
    }

    /// Applies `manifest` as field manager `manager` (say `kubectl`) straight into the
    /// store, e.g. an object the tenant made.
    pub fn apply_as(&self, manager: &str, manifest: &Value, force: bool) -> Value {
        let now = self.sim.state().clock.now();
        match self.sim.state().kube.apply_manifest(&self.id, manager, manifest, force, now) {
            Ok(a) => a.object,
            Err(e) => panic!("applying {manifest} as {manager}: {e}"),
        }
    }
}

/// A `kube` client from kubeconfig YAML, as research/kube-wire.md "Connecting" says:
/// proxy settings from the environment dropped (gotcha 2), no built-in retry (gotcha 1).
/// Build it inside the test's runtime.
pub async fn kube_client(kubeconfig: &str) -> kube::Client {
    install_crypto();
    let kc = kube::config::Kubeconfig::from_yaml(kubeconfig).expect("kubeconfig YAML");
    let mut config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .expect("kubeconfig");
    config.proxy_url = None;
    config.default_retry = false;
    kube::Client::try_from(config).expect("kube client")
}

// ----- cluster objects ---------------------------------------------------------------------

/// The owner label of pool `pool`.
pub fn owner(pool: &str) -> OwnerLabel {
    OwnerLabel { key: LABEL_SUBSTRATE_POOL.into(), value: pool.into() }
}

/// A reference to object `name` of `kind` (in `ns`).
pub fn object_ref(kind: ObjectKind, ns: Option<&str>, name: &str) -> ObjectRef {
    ObjectRef { kind, namespace: ns.map(str::to_owned), name: name.into() }
}

/// `kind` `ns`/`name` carrying pool `pool`'s labels, with `fields` merged in at the top
/// (e.g. `{"data": …}`, `{"spec": …}`).
pub fn owned_object(
    kind: ObjectKind,
    ns: Option<&str>,
    name: &str,
    pool: &str,
    fields: Value,
) -> KubeObject {
    let mut metadata = json!({"name": name,
        "labels": {LABEL_SUBSTRATE_POOL: pool, LABEL_MANAGED_BY: MANAGED_BY_VALUE}});
    if let Some(ns) = ns {
        metadata["namespace"] = json!(ns);
    }
    let mut manifest =
        json!({"apiVersion": kind.api_version(), "kind": kind.kind(), "metadata": metadata});
    if let (Value::Object(m), Value::Object(extra)) = (&mut manifest, fields) {
        m.extend(extra);
    }
    KubeObject { object: object_ref(kind, ns, name), manifest }
}

/// Namespace `name` carrying pool `pool`'s labels.
pub fn namespace_object(name: &str, pool: &str) -> KubeObject {
    owned_object(ObjectKind::Namespace, None, name, pool, json!({}))
}

/// The `spec` of a bcd DaemonSet as SPEC §6/§9 describe it: `nodeSelector` (when
/// given), `tolerations`, and a container mapping [`SECRET_ENV`] from the join Secret
/// and [`ENV_NODE_NAME`] from the pod's `spec.nodeName`.
pub fn bcd_daemonset_spec(node_selector: Option<Value>, tolerations: &[Value]) -> Value {
    let mut env: Vec<Value> = SECRET_ENV
        .iter()
        .map(|(var, key)| {
            json!({"name": var, "valueFrom": {"secretKeyRef": {"name": JOIN_SECRET_NAME, "key": key}}})
        })
        .collect();
    env.push(
        json!({"name": ENV_NODE_NAME, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}),
    );
    // The projected token bcd proves its node with (SPEC §9), at the file it reads by
    // default, for the cluster's own audience (these tests' join servers review nothing).
    let mut pod = json!({
        "serviceAccountName": BCD_NAME,
        "volumes": [{"name": "bcd-token", "projected": {"sources": [{"serviceAccountToken":
            {"path": bc_domain::agent::SERVICE_ACCOUNT_TOKEN_PATH,
             "expirationSeconds": bc_domain::agent::SERVICE_ACCOUNT_TOKEN_SECONDS}}]}}],
        "containers": [{"name": BCD_NAME, "image": "bcd:sim", "env": env,
            "volumeMounts": [{"name": "bcd-token", "readOnly": true,
                "mountPath": bc_domain::agent::SERVICE_ACCOUNT_TOKEN_DIR}]}],
    });
    if let Some(sel) = node_selector {
        pod["nodeSelector"] = sel;
    }
    if !tolerations.is_empty() {
        pod["tolerations"] = Value::Array(tolerations.to_vec());
    }
    json!({"selector": {"matchLabels": {"app": BCD_NAME}},
        "template": {"metadata": {"labels": {"app": BCD_NAME}}, "spec": pod}})
}

/// What the substrate reconciler applies in a cluster for one pool (SPEC §6): its
/// Namespace, the join Secret, the bcd ServiceAccount and DaemonSet.
#[derive(Debug, Clone)]
pub struct Substrate {
    /// The pool (owner label value and DaemonSet node selector).
    pub pool: String,
    /// The namespace.
    pub namespace: String,
    /// The server URL written into the Secret.
    pub server_url: String,
    /// The join token written into the Secret.
    pub join_token: String,
    /// Whether to include the Secret.
    pub with_secret: bool,
    /// The DaemonSet's tolerations.
    pub tolerations: Vec<Value>,
}

impl Substrate {
    /// Pool [`POOL`] in namespace `bc-p1`, joining `server_url` with `join_token`, with
    /// its Secret and no tolerations.
    pub fn new(server_url: &str, join_token: &str) -> Self {
        Self {
            pool: POOL.into(),
            namespace: format!("bc-{POOL}"),
            server_url: server_url.into(),
            join_token: join_token.into(),
            with_secret: true,
            tolerations: Vec::new(),
        }
    }

    /// The objects, in apply order: Namespace, Secret (when included), ServiceAccount,
    /// DaemonSet.
    pub fn objects(&self) -> Vec<KubeObject> {
        let (pool, ns) = (self.pool.as_str(), Some(self.namespace.as_str()));
        let mut out = vec![namespace_object(&self.namespace, pool)];
        if self.with_secret {
            out.push(owned_object(
                ObjectKind::Secret,
                ns,
                JOIN_SECRET_NAME,
                pool,
                json!({"type": "Opaque", "stringData": {
                    SECRET_KEY_SERVER_URL: self.server_url, SECRET_KEY_JOIN_TOKEN: self.join_token}}),
            ));
        }
        out.push(owned_object(ObjectKind::ServiceAccount, ns, BCD_NAME, pool, json!({})));
        let spec = bcd_daemonset_spec(Some(json!({LABEL_SUBSTRATE_POOL: pool})), &self.tolerations);
        out.push(owned_object(ObjectKind::DaemonSet, ns, BCD_NAME, pool, json!({"spec": spec})));
        out
    }

    /// Applies [`Self::objects`] straight into the store of `cluster_id`, as field
    /// manager `better-compute` (forced).
    pub fn apply_direct(&self, sim: &Sim, cluster_id: &str) {
        let now = sim.state().clock.now();
        for o in self.objects() {
            let manager = bc_domain::name::FIELD_MANAGER;
            if let Err(e) =
                sim.state().kube.apply_manifest(cluster_id, manager, &o.manifest, true, now)
            {
                panic!("applying {}: {e}", o.object);
            }
        }
    }
}

// ----- bcd -----------------------------------------------------------------------------------

/// Simulated bcd rounds until one makes no call (at most 50); the calls made.
pub async fn settle(sim: &Sim) -> usize {
    let mut total = 0;
    for _ in 0..50 {
        let n = bounded(crate::bcd::run_once(sim.state())).await;
        if n == 0 {
            return total;
        }
        total += n;
    }
    panic!("bcd did not settle in 50 rounds");
}

/// A join endpoint on loopback (`POST /api/compute/agents/join`) that records every body
/// and answers a [`JoinResponse`] (the same `nodeId` for the same node name, pool
/// [`JOINED_POOL_ID`]) with status 201, or the status set by [`Self::answer`].
#[derive(Clone)]
pub struct JoinServer {
    calls: Arc<Mutex<Vec<Value>>>,
    status: Arc<Mutex<Option<u16>>>,
    url: String,
    _task: Arc<AbortOnDrop>,
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The node id the [`JoinServer`] gives `node_name`.
pub fn joined_node_id(node_name: &str) -> NodeId {
    NodeId::generate(1_800_000_000_000, u128::from(crate::fnv1a(node_name)))
}

impl JoinServer {
    /// Serves on `127.0.0.1:0`.
    pub async fn start() -> Self {
        use axum::extract::State;
        type Shared = (Arc<Mutex<Vec<Value>>>, Arc<Mutex<Option<u16>>>);
        async fn join(
            State((calls, status)): State<Shared>,
            axum::Json(body): axum::Json<Value>,
        ) -> (axum::http::StatusCode, axum::Json<Value>) {
            calls.lock().unwrap_or_else(|e| e.into_inner()).push(body.clone());
            let code = status.lock().unwrap_or_else(|e| e.into_inner()).unwrap_or(201);
            let name = body["nodeName"].as_str().unwrap_or_default();
            let answer = JoinResponse {
                node_id: joined_node_id(name),
                pool_id: PoolId::parse(JOINED_POOL_ID).expect("pool id"),
                node_credential: SecretString::new(format!("cred-{name}")),
                heartbeat_seconds: 30,
            };
            let status = axum::http::StatusCode::from_u16(code).expect("status");
            (status, axum::Json(serde_json::to_value(answer).expect("answer")))
        }
        let calls = Arc::new(Mutex::new(Vec::new()));
        let status = Arc::new(Mutex::new(None));
        let app = axum::Router::new()
            .route(JOIN_PATH, axum::routing::post(join))
            .with_state((calls.clone(), status.clone()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { calls, status, url, _task: Arc::new(AbortOnDrop(task)) }
    }

    /// The server URL (what the join Secret names).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Every join body received, in order.
    pub fn calls(&self) -> Vec<Value> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The node names that called, sorted (repeats kept).
    pub fn callers(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .calls()
            .iter()
            .map(|c| c["nodeName"].as_str().unwrap_or_default().to_owned())
            .collect();
        v.sort();
        v
    }

    /// Answers `status` from now on (`None`: 201 again).
    pub fn answer(&self, status: Option<u16>) {
        *self.status.lock().unwrap_or_else(|e| e.into_inner()) = status;
    }
}

// ----- scenarios every cluster face must pass --------------------------------------------

/// The ownership rule under races (SPEC §6: an object we did not make is never taken
/// over or deleted), through `api` — the kube adapter, over TLS or in process — on
/// `env`'s cluster, with the tenant acting between the client's read and its write:
/// - the tenant creates the object we are about to create: it stays theirs, unlabelled,
///   and we report it `Foreign`;
/// - the tenant replaces our object by one of theirs before our delete: theirs survives,
///   `Foreign`;
/// - someone changes our object before our delete: it is read again and deleted.
pub async fn check_ownership_races(env: &ClusterEnv, api: &dyn bc_domain::ports::ClusterApi) {
    use crate::kube::Resource;
    use bc_domain::ports::{ApplyOutcome, DeleteOutcome};

    let client = bounded(api.connect(&SecretString::new(env.kubeconfig()))).await.expect("connect");
    let ns = |name: &str| object_ref(ObjectKind::Namespace, None, name);
    let theirs = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": {"team": "tenant"}}})
    };
    // The labels clients set (the server's own `kubernetes.io/metadata.name` left out).
    let labels = |name: &str| {
        env.stored(ObjectKind::Namespace, None, name).map(|o| {
            let mut l = o["metadata"]["labels"].clone();
            l.as_object_mut().map(|m| m.remove("kubernetes.io/metadata.name"));
            l
        })
    };
    let cluster = env.id.clone();

    // Create racing the tenant's create.
    let manifest = theirs("race-create");
    env.sim.state().interleave.before_next_kube_write(&cluster, Resource::Namespace, {
        let cluster = cluster.clone();
        move |s| {
            let now = s.clock.now();
            s.kube
                .apply_manifest(&cluster, "kubectl", &manifest, false, now)
                .expect("tenant create");
        }
    });
    let outcome = bounded(client.apply_owned(&namespace_object("race-create", POOL), &owner(POOL)))
        .await
        .expect("apply_owned");
    assert_eq!(outcome, ApplyOutcome::Foreign { owner: None }, "the tenant's object is theirs");
    assert_eq!(labels("race-create"), Some(json!({"team": "tenant"})), "our labels not merged in");

    // Delete racing the tenant's replacement.
    let ours = namespace_object("race-delete", POOL);
    let made = bounded(client.apply_owned(&ours, &owner(POOL))).await.expect("apply_owned");
    assert_eq!(made, ApplyOutcome::Created);
    let manifest = theirs("race-delete");
    env.sim.state().interleave.before_next_kube_write(&cluster, Resource::Namespace, {
        let cluster = cluster.clone();
        move |s| {
            let now = s.clock.now();
            let pre = bc_domain::ports::Preconditions::default();
            s.kube
                .delete(&cluster, Resource::Namespace, None, "race-delete", &pre, now)
                .expect("tenant delete");
            s.kube
                .apply_manifest(&cluster, "kubectl", &manifest, false, now)
                .expect("tenant create");
        }
    });
    let outcome =
        bounded(client.delete_owned(&ns("race-delete"), &owner(POOL))).await.expect("delete");
    assert_eq!(outcome, DeleteOutcome::Foreign { owner: None });
    assert_eq!(labels("race-delete"), Some(json!({"team": "tenant"})), "theirs survives");

    // Delete racing a change of our own object: read again, still ours, deleted.
    let ours = namespace_object("race-change", POOL);
    bounded(client.apply_owned(&ours, &owner(POOL))).await.expect("apply_owned");
    let touched = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "race-change", "annotations": {"seen": "yes"}}});
    env.sim.state().interleave.before_next_kube_write(&cluster, Resource::Namespace, {
        let cluster = cluster.clone();
        move |s| {
            let now = s.clock.now();
            s.kube.apply_manifest(&cluster, "kubectl", &touched, false, now).expect("annotate");
        }
    });
    let outcome =
        bounded(client.delete_owned(&ns("race-change"), &owner(POOL))).await.expect("delete");
    assert_eq!(outcome, DeleteOutcome::Deleted);
    assert_eq!(labels("race-change"), None);
}

/// A cluster token that expires or is revoked (the simulator revokes it) does not strand
/// a [`bc_domain::ports::ClusterSession`]: the call that meets the 401 drops the cached
/// kubeconfig at `provider`, mints a new one, and succeeds — one extra kubeconfig GET.
pub async fn check_session_recovers_from_a_revoked_token(
    env: &ClusterEnv,
    provider: Arc<dyn bc_domain::ports::ProviderImpl>,
    api: Arc<dyn bc_domain::ports::ClusterApi>,
) {
    use bc_domain::ports::{ClusterClient, ClusterSession};

    let session = ClusterSession::new(provider, api, &env.id);
    let selector = format!("{LABEL_SUBSTRATE_POOL}={POOL}");
    let before = bounded(session.list_nodes(&selector)).await.expect("list nodes");
    assert_eq!(env.count("GET", routes::KUBECONFIG), 1, "minted once");
    bounded(session.list_nodes(&selector)).await.expect("list nodes");
    assert_eq!(env.count("GET", routes::KUBECONFIG), 1, "reused");

    env.sim.state().model().revoke_cluster_token(&env.id).expect("cluster");
    let after = bounded(session.list_nodes(&selector)).await.expect("recovered");
    assert_eq!(after, before);
    assert_eq!(env.count("GET", routes::KUBECONFIG), 2, "minted again after the 401");
}

// ----- real clients ----------------------------------------------------------------------

/// A tool a test runs (kubectl, python3): its path, or `None` after a "skipped" line on
/// stderr; when services are required (`BC_REQUIRE_SERVICES`, `CI=true`, as
/// `cargo xtask test --require-services` sets) a missing tool fails the test instead, so
/// CI cannot go green without running it.
pub fn required_tool(name: &str, why: &str) -> Option<std::path::PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file())
    });
    match found {
        Some(p) => Some(p),
        None if bc_testkit::services_required() => panic!(
            "{name} not found on PATH, but it is required ({} or CI=true): {why}; .ci/run \
             installs it",
            bc_testkit::REQUIRE_SERVICES_VAR
        ),
        None => {
            eprintln!("skipped: {name} not found on PATH ({why})");
            None
        }
    }
}

/// What one run of a tool printed and how it ended.
#[derive(Debug)]
pub struct ToolRun {
    /// Exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl ToolRun {
    /// Whether it exited 0.
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }
}

/// A scratch directory removed on drop.
pub struct ScratchDir(std::path::PathBuf);

impl ScratchDir {
    /// A new empty directory under the system temp dir.
    pub fn new(prefix: &str) -> Self {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("{prefix}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Self(dir)
    }

    /// Its path.
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The real `kubectl`, pointed at one simulated cluster by the kubeconfig the simulator
/// served and nothing else: its own kubeconfig file, cache and home directories, no
/// proxy settings from the environment.
pub struct Kubectl {
    bin: std::path::PathBuf,
    dir: ScratchDir,
}

/// How long one kubectl run may take before the test fails.
pub const KUBECTL_BOUND: Duration = Duration::from_secs(60);

impl Kubectl {
    /// kubectl with `kubeconfig`, or `None` when kubectl is missing (see
    /// [`required_tool`]).
    pub fn new(kubeconfig: &str) -> Option<Self> {
        let bin = required_tool("kubectl", "the kubectl conformance tests run it")?;
        let dir = ScratchDir::new("bc-sim-kubectl");
        std::fs::write(dir.path().join("kubeconfig"), kubeconfig).expect("kubeconfig file");
        Some(Self { bin, dir })
    }

    /// The scratch directory (for manifests).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(&self.bin);
        c.arg("--kubeconfig")
            .arg(self.dir.path().join("kubeconfig"))
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .args(args)
            .env("HOME", self.dir.path())
            .env_remove("KUBECONFIG")
            .kill_on_drop(true);
        for v in
            ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
        {
            c.env_remove(v);
        }
        c
    }

    /// Runs `kubectl args…` with `stdin` (bounded by [`KUBECTL_BOUND`]).
    pub async fn run_with(&self, args: &[&str], stdin: Option<&str>) -> ToolRun {
        use tokio::io::AsyncWriteExt as _;
        let mut c = self.command(args);
        c.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = c.spawn().expect("start kubectl");
        let mut input = child.stdin.take().expect("stdin");
        let text = stdin.unwrap_or_default().to_owned();
        let out = tokio::time::timeout(KUBECTL_BOUND, async move {
            let _ = input.write_all(text.as_bytes()).await;
            drop(input);
            child.wait_with_output().await
        })
        .await
        .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish within {KUBECTL_BOUND:?}"))
        .expect("kubectl output");
        ToolRun {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs `kubectl args…`.
    pub async fn run(&self, args: &[&str]) -> ToolRun {
        self.run_with(args, None).await
    }

    /// Starts `kubectl args…` in the background (a `get -w`), its output piped; it is
    /// killed when the child is dropped.
    pub fn spawn(&self, args: &[&str]) -> tokio::process::Child {
        let mut c = self.command(args);
        c.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        c.spawn().expect("start kubectl")
    }
}
