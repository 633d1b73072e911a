//! The cloud model: accounts (one per accepted token) holding clusters, node pools,
//! nodes, load balancers, volumes and snapshots; request admission (auth, rate limits,
//! the seeded chaos mode, injected faults, refusals, per-endpoint counters, per-token
//! call log); and the clock-driven transitions.
//!
//! Invariant: the model never reads a clock. Every operation takes `now` and first calls
//! [`Model::advance`], which applies every transition whose due time has passed (in due
//! order, each next step due relative to the previous one), so a test stepping a
//! `ManualClock` sees exactly the states a real client polling at those instants would.

pub mod catalog;
pub mod chaos;
pub mod gke;
pub mod kubernetes;
pub mod load_balancer;
pub mod rate;
pub mod routes;

use std::collections::{BTreeMap, VecDeque};

use bc_domain::Timestamp;

use crate::SimConfig;
use crate::config::RateLimits;

pub use chaos::{CallPeaks, ChaosCounts};
pub use kubernetes::{
    AssociatedResources, Cluster, ClusterCreate, ClusterState, ClusterUpdate, Credentials,
    MaintenancePolicy, Node, NodePool, NodePoolSpec, NodeState, Selection, TaintSpec,
};
pub use load_balancer::{
    Domain, Firewall, ForwardingRule, GlbSettings, HealthCheck, LbStatus, LbType, LoadBalancer,
    LoadBalancerSpec, StickySessions,
};
pub use rate::RateHeaders;

/// An error answer of the simulated API: status, DigitalOcean error id, message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// The error body's `id`, e.g. `not_found`.
    pub id: &'static str,
    /// The error body's `message`.
    pub message: String,
    /// `retry-after` seconds (burst rate limit and injected 429s).
    pub retry_after: Option<u64>,
}

impl ApiError {
    fn new(status: u16, id: &'static str, message: impl Into<String>) -> Self {
        Self { status, id, message: message.into(), retry_after: None }
    }
    /// 400 `bad_request`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "bad_request", message)
    }
    /// 401 `unauthorized`.
    pub fn unauthorized() -> Self {
        Self::new(401, "unauthorized", "Unable to authenticate you")
    }
    /// 403 `forbidden`.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "forbidden", message)
    }
    /// 404 `not_found`.
    pub fn not_found() -> Self {
        Self::new(404, "not_found", "The resource you were accessing could not be found.")
    }
    /// 422 `unprocessable_entity`.
    pub fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(422, "unprocessable_entity", message)
    }
    /// 429 `too_many_requests`.
    pub fn too_many_requests(retry_after: Option<u64>) -> Self {
        Self { retry_after, ..Self::new(429, "too_many_requests", "API rate limit exceeded.") }
    }
    /// 500 `server_error`.
    pub fn server_error() -> Self {
        Self::new(500, "server_error", "Server was unable to give you a response.")
    }

    /// The error body every face renders (research §1): `{id, message, request_id}`.
    pub fn body(&self, request_id: &str) -> serde_json::Value {
        serde_json::json!({"id": self.id, "message": self.message, "request_id": request_id})
    }
}

/// A failure injected for the next requests to one endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// 500 `server_error`.
    ServerError,
    /// 429 `too_many_requests` with `retry-after`.
    TooManyRequests {
        /// The `retry-after` seconds sent.
        retry_after: u64,
    },
}

/// How long the HTTP face withholds a lost answer ([`Model::lose_answers`]): longer
/// than any client's request timeout, bounded so a test's server still winds down.
pub const LOST_ANSWER_HOLD: std::time::Duration = std::time::Duration::from_secs(120);

/// The outcome of admitting one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// The rate-limit headers to send (every response carries them).
    pub rate: RateHeaders,
    /// `Ok` when the request may proceed to its operation.
    pub result: Result<(), ApiError>,
}

/// A volume or volume snapshot, injected by tests as a cluster's associated resource.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Volume {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
    /// The cluster it belongs to.
    pub cluster_id: String,
}

/// One account: what one token sees.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Account {
    /// Clusters, in creation order.
    pub clusters: Vec<Cluster>,
    /// Load balancers, in creation order.
    pub load_balancers: Vec<LoadBalancer>,
    /// Volumes.
    pub volumes: Vec<Volume>,
    /// Volume snapshots.
    pub volume_snapshots: Vec<Volume>,
    // Request bookkeeping, not the cloud: a restart starts it over.
    #[serde(skip)]
    window: rate::RateWindow,
    #[serde(skip)]
    calls: chaos::CallLog,
    /// Custom scopes (`kubernetes:read`, …); `None` = a full-access token.
    scopes: Option<std::collections::BTreeSet<String>>,
    /// What the last advance left due; [`Settled::Unknown`] again after any change.
    #[serde(skip)]
    pub(crate) settled: Settled,
}

/// Until when an account has nothing to advance: every call advances every account, so a
/// full pass over the objects of all accounts on each call made the simulator's cost per
/// call grow with its size (10,000 load balancers and 1,000 clusters: the reconcile bench
/// spent most of its time there). Every way to change an account ([`Model::account`],
/// [`Model::account_mut`], [`Model::accounts_mut`]) resets it to `Unknown`, except an
/// object added with nothing else changed, which only brings it forward to the new
/// object's due time ([`Settled::with_due`]): each of 10,000 load balancers created
/// made the next call walk the account again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Settled {
    /// Changed since the last pass (or never passed): the next advance walks it.
    #[default]
    Unknown,
    /// Nothing comes due before this time.
    Until(Timestamp),
    /// Nothing is due at all.
    Idle,
}

impl Settled {
    /// What is left due after an object due at `due` (if ever) joined an account
    /// settled as `self`, nothing else having changed.
    pub(crate) fn with_due(self, due: Option<Timestamp>) -> Self {
        match (self, due) {
            (s, None) | (s @ Settled::Unknown, _) => s,
            (Settled::Idle, Some(d)) => Settled::Until(d),
            (Settled::Until(t), Some(d)) => Settled::Until(t.min(d)),
        }
    }
}

impl Account {
    /// The earliest pending transition (what [`Model::advance`] would apply first).
    fn next_due(&self) -> Option<Timestamp> {
        let clusters = self.clusters.iter().flat_map(|c| {
            let nodes = c.node_pools.iter().flat_map(|p| p.nodes.iter().filter_map(|n| n.due));
            c.due.into_iter().chain(nodes)
        });
        let lbs = self.load_balancers.iter().filter_map(load_balancer::pending_due);
        clusters.chain(lbs).min()
    }
}

/// What of the model a restart keeps: every account with its objects (not its request
/// bookkeeping), the id and address counters (so no id or address is handed out twice),
/// and the API address of each cluster.
#[derive(serde::Serialize)]
pub(crate) struct SavedRef<'a> {
    accounts: &'a BTreeMap<String, Account>,
    ids: &'a Ids,
    endpoints: BTreeMap<String, String>,
    gke: &'a gke::Gke,
}

/// [`SavedRef`] read back.
#[derive(serde::Deserialize)]
pub(crate) struct Saved {
    accounts: BTreeMap<String, Account>,
    ids: Ids,
    endpoints: BTreeMap<String, String>,
    #[serde(default)]
    gke: gke::Gke,
}

/// Id and address generators.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Ids {
    counter: u64,
    next_droplet: u64,
    next_ip: u32,
}

impl Ids {
    /// A random UUID (v4 layout).
    pub(crate) fn uuid(&mut self) -> String {
        let r: u128 = ulid::Ulid::generate().into();
        // The ULID's random bits mixed with a counter: unique within this process even
        // when many ids are made in one millisecond, and no visible timestamp prefix.
        self.counter += 1;
        let a = splitmix64((r as u64) ^ self.counter);
        let b = splitmix64(((r >> 64) as u64) ^ a.rotate_left(17));
        let mut n = (u128::from(a) << 64) | u128::from(b);
        n = (n & !(0xF << 76)) | (0x4 << 76);
        n = (n & !(0x3 << 62)) | (0x2 << 62);
        let h = format!("{n:032x}");
        format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
    }
    /// A fresh droplet id.
    pub(crate) fn droplet(&mut self) -> u64 {
        self.next_droplet += 1;
        self.next_droplet
    }
    /// A fresh public IPv4 (counting up in 104.16.0.0/12-like space).
    pub(crate) fn ipv4(&mut self) -> String {
        self.next_ip += 1;
        let n = self.next_ip;
        format!("104.{}.{}.{}", 16 + (n >> 16) % 16, (n >> 8) & 0xFF, n & 0xFF)
    }
    /// A fresh public IPv6.
    pub(crate) fn ipv6(&mut self) -> String {
        self.next_ip += 1;
        format!("2604:a880:400:d1::{:x}", self.next_ip)
    }
    /// A short random lowercase suffix for node names.
    pub(crate) fn suffix(&mut self) -> String {
        self.counter += 1;
        let r: u128 = ulid::Ulid::generate().into();
        let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789";
        let mut x = splitmix64((r as u64) ^ self.counter);
        (0..5)
            .map(|_| {
                let c = alphabet[(x % 36) as usize] as char;
                x /= 36;
                c
            })
            .collect()
    }
}

pub(crate) fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Transition delays as `time::Duration`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Delays {
    pub(crate) cluster_provision: time::Duration,
    pub(crate) node_provision: time::Duration,
    pub(crate) node_delete: time::Duration,
    pub(crate) cluster_upgrade: time::Duration,
    pub(crate) cluster_delete: time::Duration,
    pub(crate) load_balancer_provision: time::Duration,
    pub(crate) load_balancer_resize_every: time::Duration,
}

fn dur(d: std::time::Duration) -> time::Duration {
    time::Duration::milliseconds(i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 2))
}

/// Makes a cluster's API endpoint: given the cluster id (and the URL it had before a
/// restart, to bind again when it can), binds its listener and answers its URL (`None`:
/// no listener, the cluster gets DigitalOcean's URL).
#[derive(Clone)]
pub struct EndpointAllocator(pub std::sync::Arc<AllocateEndpoint>);

/// What an [`EndpointAllocator`] runs.
pub type AllocateEndpoint = dyn Fn(&str, Option<&str>) -> Option<String> + Send + Sync;

impl std::fmt::Debug for EndpointAllocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EndpointAllocator")
    }
}

/// The simulated cloud's state.
#[derive(Debug, Clone)]
pub struct Model {
    pub(crate) delays: Delays,
    rate_limits: RateLimits,
    pub(crate) accounts: BTreeMap<String, Account>,
    pub(crate) ids: Ids,
    base_url: Option<String>,
    /// The TLS identity of the simulator (its CA goes into every kubeconfig).
    pub(crate) tls: std::sync::Arc<crate::tls::SimTls>,
    /// Makes a cluster's API endpoint (its own TLS listener) when the simulator serves.
    endpoint_allocator: Option<EndpointAllocator>,
    /// The API endpoint of each cluster that has its own listener.
    endpoints: BTreeMap<String, String>,
    /// The endpoints clusters had before a restart, until they are bound again.
    previous_endpoints: BTreeMap<String, String>,
    counters: BTreeMap<String, u64>,
    faults: BTreeMap<String, VecDeque<Fault>>,
    lost_answers: BTreeMap<String, usize>,
    chaos: Option<chaos::ChaosState>,
    refusals: BTreeMap<String, String>,
    pub(crate) brief_not_found: Option<time::Duration>,
    pub(crate) list_lag: Option<time::Duration>,
    /// GKE's clusters, operations, keys and tokens (over the shared clusters).
    pub(crate) gke: gke::Gke,
}

impl Model {
    /// A cloud with one empty account per configured token.
    pub fn new(config: &SimConfig) -> Self {
        let d = &config.delays;
        Self {
            delays: Delays {
                cluster_provision: dur(d.cluster_provision),
                node_provision: dur(d.node_provision),
                node_delete: dur(d.node_delete),
                cluster_upgrade: dur(d.cluster_upgrade),
                cluster_delete: dur(d.cluster_delete),
                load_balancer_provision: dur(d.load_balancer_provision),
                load_balancer_resize_every: dur(d.load_balancer_resize_every),
            },
            rate_limits: config.rate_limits.clone(),
            accounts: config.tokens.iter().map(|t| (t.clone(), Account::default())).collect(),
            ids: Ids { counter: 0, next_droplet: 400_000_000, next_ip: 0 },
            base_url: None,
            tls: std::sync::Arc::default(),
            endpoint_allocator: None,
            endpoints: BTreeMap::new(),
            previous_endpoints: BTreeMap::new(),
            counters: BTreeMap::new(),
            faults: BTreeMap::new(),
            lost_answers: BTreeMap::new(),
            chaos: config.chaos.clone().map(chaos::ChaosState::new),
            refusals: BTreeMap::new(),
            brief_not_found: None,
            list_lag: None,
            gke: gke::Gke::default(),
        }
    }

    /// Adds an account for `token` (no-op if it exists).
    pub fn add_token(&mut self, token: &str) {
        self.accounts.entry(token.to_owned()).or_default();
    }

    /// Adds an account whose token carries only `scopes` (`<resource>:<verb>`, e.g.
    /// `kubernetes:read`, `load_balancer:update`); requests outside them answer 403.
    pub fn add_scoped_token(&mut self, token: &str, scopes: &[&str]) {
        let a = self.accounts.entry(token.to_owned()).or_default();
        a.scopes = Some(scopes.iter().map(|s| (*s).to_owned()).collect());
    }

    /// Whether `token` is an accepted account token.
    pub fn accepts(&self, token: &str) -> bool {
        self.accounts.contains_key(token)
    }

    /// Records where the DigitalOcean face listens (the base of its `links`).
    pub fn set_base_url(&mut self, base_url: Option<String>) {
        self.base_url = base_url;
    }

    /// Sets (or, with `None`, clears) what makes each new cluster's API endpoint: the
    /// served simulator binds one TLS listener per cluster and answers its URL.
    pub fn set_endpoint_allocator(&mut self, allocator: Option<EndpointAllocator>) {
        self.endpoint_allocator = allocator;
    }

    /// Gives every cluster without an endpoint one from the allocator (clusters made
    /// before the simulator was served, or restored: those at their old address when it
    /// is free).
    pub fn allocate_endpoints(&mut self) {
        let Some(alloc) = self.endpoint_allocator.clone() else { return };
        let ids: Vec<String> =
            self.accounts.values().flat_map(|a| a.clusters.iter().map(|c| c.id.clone())).collect();
        for id in ids {
            if self.endpoints.contains_key(&id) {
                continue;
            }
            let previous = self.previous_endpoints.remove(&id);
            if let Some(url) = (alloc.0)(&id, previous.as_deref()) {
                self.endpoints.insert(id, url);
            }
        }
    }

    pub(crate) fn allocate_endpoint(&mut self, cluster_id: &str) {
        if let Some(alloc) = &self.endpoint_allocator
            && let Some(url) = (alloc.0)(cluster_id, None)
        {
            self.endpoints.insert(cluster_id.to_owned(), url);
        }
    }

    /// What of the model a restart keeps (crate::persist), to serialize.
    pub(crate) fn saved(&self) -> SavedRef<'_> {
        let mut endpoints = self.previous_endpoints.clone();
        endpoints.extend(self.endpoints.iter().map(|(k, v)| (k.clone(), v.clone())));
        SavedRef { accounts: &self.accounts, ids: &self.ids, endpoints, gke: &self.gke }
    }

    /// Takes back what [`Self::saved`] kept: the accounts (replacing configured ones of
    /// the same token), the id counters, and each cluster's old API address (bound
    /// again by [`Self::allocate_endpoints`] when the simulator serves).
    pub(crate) fn restore(&mut self, saved: Saved) {
        self.accounts.extend(saved.accounts);
        self.ids = saved.ids;
        self.previous_endpoints = saved.endpoints;
        let per_minute = self.gke.per_minute();
        self.gke = saved.gke;
        self.gke.set_per_minute(per_minute);
    }

    /// The API endpoint of a cluster (its kubeconfig `server`): its own TLS listener
    /// (`https://127.0.0.1:PORT`) when the simulator serves, else the URL DigitalOcean
    /// would give it (`https://<id>.k8s.ondigitalocean.com`, which a client routed in
    /// process reaches: `testing::Cloud`).
    pub fn cluster_endpoint(&self, cluster_id: &str) -> String {
        match self.endpoints.get(cluster_id) {
            Some(url) => url.clone(),
            None => format!("https://{cluster_id}.k8s.ondigitalocean.com"),
        }
    }

    /// The cluster whose API endpoint is `url`, if any.
    pub fn cluster_of_endpoint(&self, url: &str) -> Option<String> {
        let url = url.trim_end_matches('/');
        self.endpoints.iter().find(|(_, u)| u.as_str() == url).map(|(id, _)| id.clone())
    }

    /// The CA certificate (PEM) the simulator's TLS listeners chain to.
    pub fn ca_pem(&self) -> String {
        self.tls.ca_pem().to_owned()
    }

    // ----- admission -------------------------------------------------------------------

    /// Admits one request to `route_key` (`"<METHOD> <template>"`, see [`routes::key`])
    /// by `token`: counts it, authenticates it (401), logs it for the token's call
    /// peaks, applies the token's rate limits (429) and scopes (403), then the chaos
    /// mode (500/429), injected faults (500/429) and refusals (422).
    pub fn admit(&mut self, token: Option<&str>, route_key: &str, now: Timestamp) -> Admission {
        *self.counters.entry(route_key.to_owned()).or_default() += 1;
        let limits = self.rate_limits.clone();
        // The rate window and call log only: no object changes, so `settled` stands.
        let Some(account) = token.and_then(|t| self.accounts.get_mut(t)) else {
            let rate = RateHeaders {
                limit: limits.per_hour,
                remaining: limits.per_hour,
                reset: now.unix_ms() / 1000,
            };
            return Admission { rate, result: Err(ApiError::unauthorized()) };
        };
        account.calls.record(now);
        let (rate, throttle) = account.window.admit(&limits, now);
        let missing_scope = match (&account.scopes, routes::scope(route_key)) {
            (Some(have), Some(need)) => !have.contains(need),
            _ => false,
        };
        let result = match throttle {
            Some(rate::Throttle::Hourly) => Err(ApiError::too_many_requests(None)),
            Some(rate::Throttle::Burst { retry_after }) => {
                Err(ApiError::too_many_requests(Some(retry_after)))
            }
            None if missing_scope => {
                Err(ApiError::forbidden("You are not authorized to perform this operation"))
            }
            None => match self.chaos.as_mut().and_then(|c| c.fault(now)) {
                Some(e) => Err(e),
                None => self.injected(route_key),
            },
        };
        Admission { rate, result }
    }

    fn injected(&mut self, route_key: &str) -> Result<(), ApiError> {
        if let Some(q) = self.faults.get_mut(route_key)
            && let Some(f) = q.pop_front()
        {
            return Err(match f {
                Fault::ServerError => ApiError::server_error(),
                Fault::TooManyRequests { retry_after } => {
                    ApiError::too_many_requests(Some(retry_after))
                }
            });
        }
        if let Some(message) = self.refusals.get(route_key) {
            return Err(ApiError::unprocessable(message.clone()));
        }
        Ok(())
    }

    // ----- fault injection and counters ------------------------------------------------

    /// The next `n` requests to `route_key` fail with `fault` (queued after any already
    /// injected).
    pub fn inject_failures(&mut self, route_key: &str, n: usize, fault: Fault) {
        let q = self.faults.entry(route_key.to_owned()).or_default();
        q.extend(std::iter::repeat_n(fault, n));
    }

    /// The next `n` requests to `route_key` that succeed lose their answer: the change
    /// is made, and the caller never hears of it (what a crash or a dropped connection
    /// right after the provider acted looks like). The HTTP face withholds the response
    /// for [`LOST_ANSWER_HOLD`] (a client times out first, or dies waiting).
    pub fn lose_answers(&mut self, route_key: &str, n: usize) {
        *self.lost_answers.entry(route_key.to_owned()).or_default() += n;
    }

    /// Whether the answer of this successful request to `route_key` is lost (takes one
    /// of [`Model::lose_answers`]).
    pub fn take_lost_answer(&mut self, route_key: &str) -> bool {
        match self.lost_answers.get_mut(route_key) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    }

    /// Turns the chaos mode on with `chaos` (a fresh sequence and counts), or off.
    pub fn set_chaos(&mut self, chaos: Option<crate::config::Chaos>) {
        self.chaos = chaos.map(chaos::ChaosState::new);
    }

    /// How many faults the chaos mode answered since it was turned on (zero when off).
    pub fn chaos_counts(&self) -> ChaosCounts {
        self.chaos.as_ref().map(|c| c.counts).unwrap_or_default()
    }

    /// The busiest windows of `token`'s calls so far (every call that named it,
    /// whatever the answer), or `None` for an unknown token.
    pub fn call_peaks(&self, token: &str) -> Option<CallPeaks> {
        self.accounts.get(token).map(|a| a.calls.peaks)
    }

    /// Every request to `route_key` is refused with 422 and `message` until
    /// [`Model::clear_refusal`].
    pub fn refuse(&mut self, route_key: &str, message: &str) {
        self.refusals.insert(route_key.to_owned(), message.to_owned());
    }

    /// Stops refusing `route_key`.
    pub fn clear_refusal(&mut self, route_key: &str) {
        self.refusals.remove(route_key);
    }

    /// Drops every injected failure, lost answer and refusal (not the chaos mode).
    pub fn clear_faults(&mut self) {
        self.faults.clear();
        self.lost_answers.clear();
        self.refusals.clear();
        self.gke.clear_faults();
    }

    /// For `window` after an object is created, GETs of that one object answer 404
    /// (DigitalOcean's brief read-after-create gap, research §8.2). `None` turns it off.
    pub fn set_brief_not_found(&mut self, window: Option<std::time::Duration>) {
        self.brief_not_found = window.map(dur);
    }

    /// For `lag` after an object is created, list endpoints leave it out (eventual list
    /// consistency, research §9 chaos knobs). `None` turns it off.
    pub fn set_list_lag(&mut self, lag: Option<std::time::Duration>) {
        self.list_lag = lag.map(dur);
    }

    /// How many requests `route_key` received since the last reset.
    pub fn request_count(&self, route_key: &str) -> u64 {
        self.counters.get(route_key).copied().unwrap_or(0)
    }

    /// Every counter, by route key.
    pub fn request_counts(&self) -> BTreeMap<String, u64> {
        self.counters.clone()
    }

    /// Total requests over every route.
    pub fn total_requests(&self) -> u64 {
        self.counters.values().sum()
    }

    /// The request counters, to count a request of a face that admits on its own.
    pub(crate) fn counters_mut(&mut self) -> &mut BTreeMap<String, u64> {
        &mut self.counters
    }

    /// Zeroes every counter.
    pub fn reset_request_counts(&mut self) {
        self.counters.clear();
    }

    /// The current rate-limit headers of `token` (without counting a request).
    pub fn rate_headers(&self, token: &str, now: Timestamp) -> Option<RateHeaders> {
        self.accounts.get(token).map(|a| a.window.headers(&self.rate_limits, now))
    }

    // ----- time ------------------------------------------------------------------------

    /// Applies every transition due at or before `now`.
    pub fn advance(&mut self, now: Timestamp) {
        let delays = self.delays;
        let Self { accounts, ids, gke, .. } = self;
        gke.settle(accounts, now);
        for account in accounts.values_mut() {
            match account.settled {
                Settled::Until(t) if now < t => continue,
                Settled::Idle => continue,
                _ => {}
            }
            kubernetes::advance_account(account, ids, &delays, now);
            load_balancer::advance_account(account, ids, now);
            account.settled = account.next_due().map_or(Settled::Idle, Settled::Until);
        }
    }

    /// The account of `token` (401 when unknown), after advancing to `now`, to change.
    pub(crate) fn account(
        &mut self,
        token: &str,
        now: Timestamp,
    ) -> Result<&mut Account, ApiError> {
        self.advance(now);
        self.account_mut(token).ok_or_else(ApiError::unauthorized)
    }

    /// The account of `token` (401 when unknown), after advancing to `now`, to read.
    pub(crate) fn account_ref(
        &mut self,
        token: &str,
        now: Timestamp,
    ) -> Result<&Account, ApiError> {
        self.advance(now);
        self.accounts.get(token).ok_or_else(ApiError::unauthorized)
    }

    /// The account of `token`, to change (its next advance walks it again).
    pub(crate) fn account_mut(&mut self, token: &str) -> Option<&mut Account> {
        let a = self.accounts.get_mut(token)?;
        a.settled = Settled::Unknown;
        Some(a)
    }

    /// Every account, to change (their next advance walks them again).
    pub(crate) fn accounts_mut(&mut self) -> impl Iterator<Item = &mut Account> {
        for a in self.accounts.values_mut() {
            a.settled = Settled::Unknown;
        }
        self.accounts.values_mut()
    }

    /// Whether an object created at `created` is still in the brief-404 window.
    pub(crate) fn hidden(&self, created: Timestamp, now: Timestamp) -> bool {
        self.brief_not_found.is_some_and(|w| now - created < w)
    }

    /// Whether an object created at `created` is still missing from lists.
    pub(crate) fn lagging(&self, created: Timestamp, now: Timestamp) -> bool {
        self.list_lag.is_some_and(|w| now - created < w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_added_objects_due_time_only_brings_a_settled_account_forward() {
        let at = |s: i64| Timestamp::from_unix_ms(s * 1_000);
        assert_eq!(Settled::Idle.with_due(Some(at(5))), Settled::Until(at(5)));
        assert_eq!(Settled::Until(at(3)).with_due(Some(at(5))), Settled::Until(at(3)));
        assert_eq!(Settled::Until(at(9)).with_due(Some(at(5))), Settled::Until(at(5)));
        assert_eq!(Settled::Unknown.with_due(Some(at(5))), Settled::Unknown, "walked anyway");
        assert_eq!(Settled::Until(at(9)).with_due(None), Settled::Until(at(9)));
        assert_eq!(Settled::Idle.with_due(None), Settled::Idle);
    }
}
