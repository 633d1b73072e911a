//! What every handler works with: the ports, the settings and the process's own state
//! (ids, rate limiters, wake-ups), as [`Services`] behind the cheap handle [`Ctx`], and
//! the one way a handler commits a unit of work ([`Ctx::commit`]).
//!
//! Invariants: nothing here knows the methods or the pipeline (they sit above it); a
//! write is one [`Ctx::commit`], so its desired state, events and work item are seen
//! together or not at all, and the wake-ups are poked only after a commit that enqueued
//! work or wrote events.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::ops::Deref;
use std::sync::Arc;

use bc_domain::id::{Id, IdKind};
use bc_domain::model::QuotaResource;
use bc_domain::ports::{
    Authorizer, Clock, ClusterApi, Committed, ProviderRegistry, SecretBox, Store, UnitOfWork,
};
use bc_domain::{StoreError, Timestamp};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::body::BODY_LIMIT;
use crate::client_addr::TrustedProxies;
use crate::error::ApiError;
use crate::ids::IdSource;
use crate::ratelimit::{Concurrency, JoinRateLimit, RateLimit, RateLimiter, Recent};

/// Server settings the handlers need (flags of SPEC §13).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The largest request body (SPEC §2: 1 MiB).
    pub body_limit: usize,
    /// The per-caller rate limit; `None` turns it off.
    pub rate_limit: Option<RateLimit>,
    /// How often bcd is told to heartbeat.
    pub heartbeat_seconds: u32,
    /// The quota rows every new pool gets (`--default-pool-quota loadBalancers=N`).
    pub default_pool_quotas: BTreeMap<QuotaResource, u32>,
    /// The limits of `agents.join` per join token and per client address; `None` turns
    /// them off.
    pub join_rate_limit: Option<JoinRateLimit>,
    /// The proxies whose `X-Forwarded-For` names the client address (`--trusted-proxy`).
    pub trusted_proxies: TrustedProxies,
    /// The server's public URL (`--public-url`): what bcd calls, and the audience its
    /// pod's projected ServiceAccount token must name (SPEC §9).
    pub public_url: String,
}

/// The public URL of a server that names none: its default listen address.
pub const DEFAULT_PUBLIC_URL: &str = "http://127.0.0.1:8080";

impl Default for Settings {
    fn default() -> Self {
        Self {
            body_limit: BODY_LIMIT,
            rate_limit: Some(RateLimit::default()),
            heartbeat_seconds: 30,
            default_pool_quotas: BTreeMap::new(),
            join_rate_limit: Some(JoinRateLimit::default()),
            trusted_proxies: TrustedProxies::default(),
            public_url: DEFAULT_PUBLIC_URL.to_owned(),
        }
    }
}

/// The ports and settings every handler works with.
pub struct Services {
    /// The store.
    pub store: Arc<dyn Store>,
    /// The authorization engine.
    pub authorizer: Arc<dyn Authorizer>,
    /// The clock.
    pub clock: Arc<dyn Clock>,
    /// Provider implementations per account.
    pub providers: Arc<dyn ProviderRegistry>,
    /// Reaching clusters' Kubernetes APIs.
    pub clusters: Arc<dyn ClusterApi>,
    /// Encryption of provider credentials at rest.
    pub secrets: Arc<dyn SecretBox>,
    /// Settings.
    pub settings: Settings,
    /// Poked after each commit that enqueued work (the in-process reconcilers wait on it).
    pub work_notify: Option<Arc<Notify>>,
    /// Poked by the in-process event relay; wakes the Server-Sent Events streams.
    pub events_notify: Option<Arc<Notify>>,
    /// Cancelled when the server shuts down: the event streams end then, since a
    /// graceful shutdown waits for every response to finish and theirs never would.
    pub shutdown: Option<CancellationToken>,
    /// New ids, increasing within this process.
    pub(crate) ids: IdSource,
    /// The per-caller rate limiter of [`Settings::rate_limit`], built when the router is.
    pub(crate) limiter: Option<RateLimiter>,
    /// The event streams each token holds open.
    pub(crate) streams: Concurrency,
    /// The limiters of [`Settings::join_rate_limit`] (per join token, per address), built
    /// when the router is.
    pub(crate) join_limiters: Option<(RateLimiter, RateLimiter)>,
    /// Each substrate's Node listing, reused for a few seconds by every join.
    pub(crate) node_listings: Recent<Result<Vec<String>, ApiError>>,
    /// The joins' calls to clusters' APIs running at once (see
    /// `methods::agents::CLUSTER_CALLS_AT_ONCE`).
    pub(crate) cluster_calls: Arc<tokio::sync::Semaphore>,
    /// List pages answered, answered again while their list's version stands.
    pub(crate) list_cache: crate::list_cache::ListCache,
}

/// A handler's view of the services: cheap to clone, shared by every request.
#[derive(Clone)]
pub struct Ctx(Arc<Services>);

impl Ctx {
    /// The handle of `services`.
    pub(crate) fn new(services: Services) -> Self {
        Self(Arc::new(services))
    }

    /// The clock's time.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// A new id of kind `K`, later than every id this process made before.
    pub fn new_id<K: IdKind>(&self) -> Id<K> {
        self.ids.next(self.now())
    }

    /// Counts one request of the caller keyed `key` against the per-caller rate limit.
    pub(crate) fn rate_limit(&self, key: Option<String>) -> Result<(), ApiError> {
        match (&self.limiter, key) {
            (Some(limiter), Some(key)) => limiter.check(&key),
            _ => Ok(()),
        }
    }

    /// Counts one failed `agents.join` from the client address `ip` (SPEC §9: failed
    /// joins are what an address is limited on).
    pub(crate) fn limit_join_address(&self, ip: IpAddr) -> Result<(), ApiError> {
        match &self.join_limiters {
            Some((_, per_address)) => per_address.check(&ip.to_string()),
            None => Ok(()),
        }
    }

    /// Counts one `agents.join` with the valid join token whose hash is `hash` (SPEC §9).
    pub(crate) fn limit_join_token(&self, hash: &str) -> Result<(), ApiError> {
        match &self.join_limiters {
            Some((per_token, _)) => per_token.check(hash),
            None => Ok(()),
        }
    }

    /// Commits `uow` as one transaction, then pokes the work wake-up if it enqueued work
    /// and the events wake-up if it wrote events.
    pub async fn commit(&self, uow: UnitOfWork) -> Result<Committed, ApiError> {
        Ok(self.commit_store(uow).await?)
    }

    /// [`Ctx::commit`] with the store's own error.
    pub(crate) async fn commit_store(&self, uow: UnitOfWork) -> Result<Committed, StoreError> {
        let enqueued = !uow.enqueue.is_empty();
        let evented = !uow.events.is_empty();
        let committed = self.store.commit(uow).await?;
        // A replayed create applied nothing: nothing new to wake anyone for.
        let applied = committed.replayed.is_none();
        if applied
            && enqueued
            && let Some(n) = &self.work_notify
        {
            n.notify_waiters();
        }
        if applied
            && evented
            && let Some(n) = &self.events_notify
        {
            n.notify_waiters();
        }
        Ok(committed)
    }
}

impl Deref for Ctx {
    type Target = Services;
    fn deref(&self) -> &Services {
        &self.0
    }
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx").field("settings", &self.0.settings).finish_non_exhaustive()
    }
}
