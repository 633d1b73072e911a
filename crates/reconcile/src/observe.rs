//! Provider access for reconcilers: the budgeted provider instance of an account, and
//! the account's clusters and load balancers as one shared, paginated listing.
//!
//! Invariant: at steady state an account is observed with list calls shared by all its
//! objects, never one GET per object per resync (DESIGN.md, "Observe in bulk"); a
//! listing may be older than `max_age` never, an absence seen in a listing is not
//! proof that an object is gone (confirm with a GET before re-creating it), and a
//! cluster listed with its Nodes unread speaks for none of its pools' counts. The
//! [`SharedObserver`] hands every caller of an account one budgeted provider and one
//! listing per kind, taken by one caller at a time; no observer makes a call with a
//! deleted account (SPEC §5).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use bc_domain::Timestamp;
use bc_domain::model::ProviderAccount;
use bc_domain::ports::{
    Clock, ProviderCluster, ProviderImpl, ProviderLoadBalancer, ProviderRegistry,
};
use bc_domain::{ProviderAccountId, ProviderError};

use crate::budget::{Budget, BudgetedProvider};
use crate::forward::ProviderCall;

/// One listing of an account's objects of one kind.
#[derive(Debug, Clone)]
pub struct Listing<T> {
    /// The objects, as the provider listed them.
    pub items: Vec<T>,
    /// When the list was taken (when the call started: an object made after this
    /// instant may be missing from it).
    pub listed_at: Timestamp,
    /// Where each object is, built on the first lookup (see [`Lookup`]).
    lookup: OnceLock<Lookup>,
}

/// Where a listing's objects are, by provider id, by tag and by name: the first of
/// each in listing order, as a walk would find it. Built once per listing, which one
/// account's every object looks itself up in — a walk per object cost the square of
/// the account's size (10,000 load balancers, 10,000 walks of 10,000).
#[derive(Debug, Clone, Default)]
struct Lookup {
    by_id: HashMap<String, usize>,
    by_tag: HashMap<String, usize>,
    by_name: HashMap<String, usize>,
}

impl<T> Listing<T> {
    /// The listing of `items`, taken at `listed_at`.
    pub fn new(items: Vec<T>, listed_at: Timestamp) -> Self {
        Self { items, listed_at, lookup: OnceLock::new() }
    }

    /// Whether the listing was taken at most `max_age` before `now`. One stamped after
    /// `now` (the clock stepped back since) is never fresh: its age is unknown.
    pub fn fresh(&self, now: Timestamp, max_age: Duration) -> bool {
        let age = now - self.listed_at;
        !age.is_negative()
            && age <= time::Duration::try_from(max_age).unwrap_or(time::Duration::MAX)
    }
}

impl Listing<ProviderCluster> {
    /// Cluster `id` when this listing speaks for it: listed, with its Nodes read. A
    /// cluster listed with `nodes_unread` (its API did not answer the provider adapter
    /// that counts its pools' nodes through it) shows no count a steady object may
    /// compare with what it recorded — taken as one, it would read as a resize to undo,
    /// a flip to `updating` and an event. Like a cluster the listing does not show, it
    /// is read by a GET, which fails (a retried activation: the object keeps its state
    /// and its recorded counts) until its API answers again.
    pub fn cluster(&self, id: &str) -> Option<&ProviderCluster> {
        self.items.iter().find(|c| c.id == id && c.nodes_unread.is_none())
    }
}

impl Listing<ProviderLoadBalancer> {
    fn lookup(&self) -> &Lookup {
        self.lookup.get_or_init(|| {
            let mut l = Lookup::default();
            for (i, p) in self.items.iter().enumerate() {
                l.by_id.entry(p.id.clone()).or_insert(i);
                l.by_name.entry(p.spec.name.clone()).or_insert(i);
                for t in &p.spec.tags {
                    l.by_tag.entry(t.clone()).or_insert(i);
                }
            }
            l
        })
    }

    /// The first load balancer listed with provider id `id`.
    pub fn with_id(&self, id: &str) -> Option<&ProviderLoadBalancer> {
        self.lookup().by_id.get(id).map(|&i| &self.items[i])
    }

    /// The first load balancer listed carrying `tag`.
    pub fn with_tag(&self, tag: &str) -> Option<&ProviderLoadBalancer> {
        self.lookup().by_tag.get(tag).map(|&i| &self.items[i])
    }

    /// The first load balancer listed named `name`.
    pub fn named(&self, name: &str) -> Option<&ProviderLoadBalancer> {
        self.lookup().by_name.get(name).map(|&i| &self.items[i])
    }
}

/// How old a listing may be to speak for an object whose row was last written at
/// `written` (by this replica or another): at most `max_age`, and never older than that
/// write — a listing taken before it (another replica's create, resize or upgrade, whose
/// listing this replica never saw invalidated) cannot show what the write did. A write
/// stamped after `now` (a clock step) leaves no listing old enough.
pub fn max_age_since(written: Timestamp, now: Timestamp, max_age: Duration) -> Duration {
    let since = Duration::try_from(now - written).unwrap_or(Duration::ZERO);
    since.min(max_age)
}

/// Refuses a deleted account (or one whose credentials were erased) before any call is
/// made with it: whichever reconciler asks, a deleted account reaches no provider.
fn usable(account: &ProviderAccount) -> Result<(), ProviderError> {
    match account.unreachable() {
        Some(message) => Err(ProviderError::Refused { message }),
        None => Ok(()),
    }
}

/// Provider access shared by every reconciler of a process.
#[async_trait]
pub trait Observer: Send + Sync {
    /// The provider implementation of `account` (the same instance, so the same budget,
    /// for every caller).
    async fn provider(
        &self,
        account: &ProviderAccount,
    ) -> Result<Arc<dyn ProviderImpl>, ProviderError>;
    /// The account's clusters (with their node pools), listed at most `max_age` ago.
    async fn clusters(
        &self,
        account: &ProviderAccount,
        max_age: Duration,
    ) -> Result<Arc<Listing<ProviderCluster>>, ProviderError>;
    /// The account's load balancers, listed at most `max_age` ago.
    async fn load_balancers(
        &self,
        account: &ProviderAccount,
        max_age: Duration,
    ) -> Result<Arc<Listing<ProviderLoadBalancer>>, ProviderError>;
    /// Forgets the account's listings (after a write that changes what they show).
    fn invalidate(&self, account: &ProviderAccount);
    /// Whether the account's budget would grant a call now (`OverBudget` with the wait
    /// if not), taking nothing: for a reconciler that records an intent before a call,
    /// so it records none it cannot send. Observers without a budget say yes.
    async fn can_call(&self, _account: &ProviderAccount) -> Result<(), ProviderError> {
        Ok(())
    }
}

/// The simplest observer: every listing is taken fresh from the registry's provider (no
/// sharing, no budget). Correct, but it spends one list call per question; the runtime's
/// shared observer replaces it where calls are budgeted.
pub struct UnsharedObserver {
    registry: Arc<dyn ProviderRegistry>,
    clock: Arc<dyn Clock>,
}

impl UnsharedObserver {
    /// An observer over `registry`.
    pub fn new(registry: Arc<dyn ProviderRegistry>, clock: Arc<dyn Clock>) -> Self {
        Self { registry, clock }
    }
}

#[async_trait]
impl Observer for UnsharedObserver {
    async fn provider(
        &self,
        account: &ProviderAccount,
    ) -> Result<Arc<dyn ProviderImpl>, ProviderError> {
        usable(account)?;
        self.registry.provider_for(account).await
    }

    async fn clusters(
        &self,
        account: &ProviderAccount,
        _max_age: Duration,
    ) -> Result<Arc<Listing<ProviderCluster>>, ProviderError> {
        let provider = self.provider(account).await?;
        let items = provider.kubernetes().list_clusters().await?;
        Ok(Arc::new(Listing::new(items, self.clock.now())))
    }

    async fn load_balancers(
        &self,
        account: &ProviderAccount,
        _max_age: Duration,
    ) -> Result<Arc<Listing<ProviderLoadBalancer>>, ProviderError> {
        let provider = self.provider(account).await?;
        let items = provider.load_balancers().list().await?;
        Ok(Arc::new(Listing::new(items, self.clock.now())))
    }

    fn invalidate(&self, _account: &ProviderAccount) {}
}

/// One cached listing and the lock that lets one caller at a time refresh it.
struct Shared<T> {
    latest: Mutex<Option<Arc<Listing<T>>>>,
    refresh: tokio::sync::Mutex<()>,
    /// Bumped by every [`Shared::forget`]: a list call that was under way when a write
    /// went out may predate it, so its answer is not kept.
    epoch: AtomicU64,
}

impl<T> Default for Shared<T> {
    fn default() -> Self {
        Self {
            latest: Mutex::new(None),
            refresh: tokio::sync::Mutex::new(()),
            epoch: AtomicU64::new(0),
        }
    }
}

impl<T: Send + Sync> Shared<T> {
    fn fresh(&self, now: Timestamp, max_age: Duration) -> Option<Arc<Listing<T>>> {
        let latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        latest.as_ref().filter(|l| l.fresh(now, max_age)).cloned()
    }

    /// The cached listing if fresh enough, else a new one from `list`. Callers that
    /// arrive while a list is under way wait for it and take its answer when it is fresh
    /// enough for them, so a burst of callers costs one list call.
    async fn get<F, Fut>(
        &self,
        clock: &dyn Clock,
        max_age: Duration,
        list: F,
    ) -> Result<Arc<Listing<T>>, ProviderError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Vec<T>, ProviderError>>,
    {
        if let Some(l) = self.fresh(clock.now(), max_age) {
            return Ok(l);
        }
        let _turn = self.refresh.lock().await;
        if let Some(l) = self.fresh(clock.now(), max_age) {
            return Ok(l);
        }
        let listed_at = clock.now();
        let epoch = self.epoch.load(Ordering::SeqCst);
        let listing = Arc::new(Listing::new(list().await?, listed_at));
        let mut latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        if self.epoch.load(Ordering::SeqCst) == epoch {
            *latest = Some(listing.clone());
        }
        Ok(listing)
    }

    fn forget(&self) {
        let mut latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        self.epoch.fetch_add(1, Ordering::SeqCst);
        *latest = None;
    }
}

/// An account's cached listings.
#[derive(Default)]
struct Listings {
    clusters: Shared<ProviderCluster>,
    load_balancers: Shared<ProviderLoadBalancer>,
}

impl Listings {
    fn forget(&self) {
        self.clusters.forget();
        self.load_balancers.forget();
    }

    /// Forgets what a write of `call` may have changed: a load balancer's write the
    /// load balancers' listing only (the clusters' stays: at 1,000 clusters a listing
    /// is five calls, and every load balancer created had cost the clusters' readers
    /// one), any other write both.
    fn forget_after(&self, call: ProviderCall) {
        if call.writes_load_balancers_only() {
            self.load_balancers.forget();
        } else {
            self.forget();
        }
    }
}

/// What the observer keeps of one account.
struct AccountView {
    /// The sealed credentials the provider was opened with: a rotated token seals
    /// differently, and then the account is opened again.
    sealed: Vec<u8>,
    provider: Arc<dyn ProviderImpl>,
    listings: Arc<Listings>,
}

/// The observer of a reconciler process: per account, one provider instance that
/// spends the account's [`Budget`] on every call, and one shared listing per kind.
pub struct SharedObserver {
    registry: Arc<dyn ProviderRegistry>,
    budget: Arc<dyn Budget>,
    clock: Arc<dyn Clock>,
    accounts: Mutex<HashMap<ProviderAccountId, Arc<AccountView>>>,
}

impl SharedObserver {
    /// Providers from `registry`, every call budgeted by `budget`.
    pub fn new(
        registry: Arc<dyn ProviderRegistry>,
        budget: Arc<dyn Budget>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self { registry, budget, clock, accounts: Mutex::new(HashMap::new()) }
    }

    fn cached(&self, account: &ProviderAccount) -> Option<Arc<AccountView>> {
        let accounts = self.accounts.lock().unwrap_or_else(|e| e.into_inner());
        accounts
            .get(&account.provider_account_id)
            .filter(|v| v.sealed == account.credentials.0)
            .cloned()
    }

    async fn view(&self, account: &ProviderAccount) -> Result<Arc<AccountView>, ProviderError> {
        if let Err(e) = usable(account) {
            // Nothing of a deleted account is kept either.
            self.accounts
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&account.provider_account_id);
            return Err(e);
        }
        if let Some(v) = self.cached(account) {
            return Ok(v);
        }
        let inner = self.registry.provider_for(account).await?;
        let listings = Arc::new(Listings::default());
        let stale = listings.clone();
        // After any write, whatever its outcome (an unanswered one may have taken
        // effect), the listings it may have changed may no longer show the account as
        // it is.
        let provider: Arc<dyn ProviderImpl> = Arc::new(
            BudgetedProvider::new(
                inner,
                self.budget.clone(),
                account.provider_account_id.clone(),
                self.clock.clone(),
            )
            .on_write(Arc::new(move |call| stale.forget_after(call))),
        );
        let view =
            Arc::new(AccountView { sealed: account.credentials.0.clone(), provider, listings });
        let mut accounts = self.accounts.lock().unwrap_or_else(|e| e.into_inner());
        // Two first callers may both open the account; keep the first, so every caller
        // shares one instance from here on.
        let kept = accounts
            .entry(account.provider_account_id.clone())
            .and_modify(|v| {
                if v.sealed != view.sealed {
                    *v = view.clone();
                }
            })
            .or_insert(view);
        Ok(kept.clone())
    }
}

#[async_trait]
impl Observer for SharedObserver {
    async fn provider(
        &self,
        account: &ProviderAccount,
    ) -> Result<Arc<dyn ProviderImpl>, ProviderError> {
        Ok(self.view(account).await?.provider.clone())
    }

    async fn clusters(
        &self,
        account: &ProviderAccount,
        max_age: Duration,
    ) -> Result<Arc<Listing<ProviderCluster>>, ProviderError> {
        let view = self.view(account).await?;
        let provider = view.provider.clone();
        view.listings
            .clusters
            .get(self.clock.as_ref(), max_age, || async move {
                provider.kubernetes().list_clusters().await
            })
            .await
    }

    async fn load_balancers(
        &self,
        account: &ProviderAccount,
        max_age: Duration,
    ) -> Result<Arc<Listing<ProviderLoadBalancer>>, ProviderError> {
        let view = self.view(account).await?;
        let provider = view.provider.clone();
        view.listings
            .load_balancers
            .get(
                self.clock.as_ref(),
                max_age,
                || async move { provider.load_balancers().list().await },
            )
            .await
    }

    async fn can_call(&self, account: &ProviderAccount) -> Result<(), ProviderError> {
        self.budget.peek(&account.provider_account_id, self.clock.now()).await
    }

    fn invalidate(&self, account: &ProviderAccount) {
        if let Some(v) = self.cached(account) {
            v.listings.forget();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_unix_ms(1_800_000_000_000 + s * 1000)
    }

    #[test]
    fn a_listing_from_the_future_is_never_fresh() {
        let l = Listing::<()>::new(vec![], at(100));
        let max = Duration::from_secs(300);
        assert!(l.fresh(at(100), max));
        assert!(l.fresh(at(400), max));
        assert!(!l.fresh(at(401), max));
        // The clock stepped back 10 minutes after the list: its age is unknown.
        assert!(!l.fresh(at(100 - 600), max));
        assert!(!l.fresh(at(99), max));
    }

    fn listed(id: &str, nodes_unread: Option<&str>) -> ProviderCluster {
        ProviderCluster {
            id: id.into(),
            name: format!("bc-{id}"),
            region: "europe-west1-b".into(),
            version: "1.33.5-gke.1000000".into(),
            state: bc_domain::ports::ProviderClusterState::Running,
            mode: bc_domain::model::ClusterMode::Standard,
            message: None,
            endpoint: Some("https://203.0.113.7".into()),
            high_availability: false,
            tags: vec![],
            auto_upgrade: true,
            surge_upgrade: true,
            maintenance_window: None,
            node_pools: vec![],
            nodes: None,
            nodes_unread: nodes_unread.map(str::to_owned),
            created_at: None,
        }
    }

    fn lb(id: &str, name: &str, tags: &[&str]) -> ProviderLoadBalancer {
        ProviderLoadBalancer {
            id: id.into(),
            status: bc_domain::ports::ProviderLoadBalancerStatus::Active,
            ip: None,
            spec: bc_domain::ports::LoadBalancerRequest {
                tags: tags.iter().map(|t| (*t).to_owned()).collect(),
                ..bc_sim::testing::lb_request(name)
            },
            created_at: None,
        }
    }

    #[test]
    fn a_load_balancers_listing_finds_the_first_of_each_id_tag_and_name_as_a_walk_would() {
        let items = vec![lb("1", "web", &["a"]), lb("2", "web", &["a", "b"]), lb("1", "api", &[])];
        let l = Listing::new(items, at(0));
        let id = |p: Option<&ProviderLoadBalancer>| p.map(|p| p.id.clone());
        assert_eq!(l.with_id("1").map(|p| p.spec.name.clone()), Some("web".into()));
        assert_eq!(id(l.with_tag("a")), Some("1".into()));
        assert_eq!(id(l.with_tag("b")), Some("2".into()));
        assert_eq!(id(l.named("web")), Some("1".into()));
        assert_eq!(id(l.named("api")), Some("1".into()));
        assert_eq!((id(l.with_id("3")), id(l.with_tag("c")), id(l.named("x"))), (None, None, None));
    }

    #[test]
    fn a_cluster_listed_with_its_nodes_unread_is_read_by_a_get_not_from_the_listing() {
        let unread = "the nodes of cluster bc-b could not be counted through its API (503)";
        let l = Listing::new(vec![listed("a", None), listed("b", Some(unread))], at(0));
        assert_eq!(l.cluster("a").map(|c| c.id.as_str()), Some("a"), "read: it speaks for a");
        assert!(l.cluster("b").is_none(), "listed, but its pools' counts are unknown");
        assert!(l.cluster("c").is_none(), "not listed");
    }

    #[test]
    fn a_listing_older_than_the_rows_last_write_never_speaks_for_it() {
        let max = Duration::from_secs(300);
        // Written long ago: the steady bound.
        assert_eq!(max_age_since(at(0), at(1_000), max), max);
        // Written 20 s ago (by any replica): only a listing taken since will do.
        assert_eq!(max_age_since(at(980), at(1_000), max), Duration::from_secs(20));
        let before_the_write = Listing::<()>::new(vec![], at(970));
        assert!(!before_the_write.fresh(at(1_000), max_age_since(at(980), at(1_000), max)));
        let after_the_write = Listing::<()>::new(vec![], at(990));
        assert!(after_the_write.fresh(at(1_000), max_age_since(at(980), at(1_000), max)));
        // A write stamped in the future (a clock step): no cached listing will do.
        assert_eq!(max_age_since(at(2_000), at(1_000), max), Duration::ZERO);
    }
}
