//! The store port: read repositories per aggregate, one unit of work for writes, the
//! work queue, singleton leases and the shared provider-call budgets.
//!
//! Writes are values: a [`UnitOfWork`] lists conditional writes, outbox events and queue
//! entries, and [`Store::commit`] applies all of it in one transaction or none of it. So a
//! state change, its event and its work item can never be seen apart, and every condition
//! (generation compare-and-swap, a free name, a quota unit, a lease still held) is checked
//! inside that same transaction.
//!
//! Reads come in three shapes, one per user:
//! - **Tenant-scoped** (`…_get(tenant, id)`, `…_list(tenant, scope, …)`) for the API: an
//!   object of another tenant is `None` (SPEC §2: `NOT_FOUND`), and a list returns only
//!   what the caller's [`ReadScope`] covers, filtered and paged inside the query.
//! - **Unscoped by id** (`…_get_any(id)`) for reconcilers, which act for every tenant.
//! - **Sweeps** (`…_sweep(page)`, `…_list_by_account(account, page)`) for reconcilers:
//!   every live (not `deleted`) row of a kind, across tenants, or of one provider account.
//!
//! Contract every implementation keeps (the shared store test suite checks it):
//! - `commit` fails as a whole with `LeaseLost` when a fence no longer holds, `Stale` when
//!   a CAS generation does not match, `NotFound` when its row is missing, `AlreadyExists`
//!   on a unique key (name, id), `QuotaExhausted` when a quota has no free unit or no row,
//!   `Conflict` when another stated condition fails; nothing of it is then visible.
//! - Every list is ordered by its key and paged inside its query by [`PageRequest`]; none
//!   loads a whole table, and a page is short only when it is the last.
//! - Events get a global, strictly increasing `seq` in commit order: a reader that has
//!   seen `seq` n has seen every event with a smaller `seq` that will ever exist.

mod error;
mod page;
mod queue;
mod scope;
mod write;

use async_trait::async_trait;

pub use error::{InternalDetail, StoreError};
pub use page::{CursorKey, PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX, Page, PageCursor, PageRequest};
pub use queue::{
    Enqueue, Fence, LEASE_IDEMPOTENCY_PURGE, LEASE_OUTBOX_RELAY, Lease, QueueStatus, WorkItem,
    WorkKind,
};
pub use scope::{GrantedIds, ReadScope};
pub use write::{Committed, UnitOfWork, Write};

use crate::id::{
    BookingId, ClusterId, LoadBalancerId, NodeId, NodePoolId, PoolId, ProviderAccountId, TokenId,
};
use crate::model::{
    ApiToken, BillingInterval, Booking, BookingState, Event, IdempotencyRecord, JoinToken,
    KubernetesCluster, LoadBalancer, Node, NodePool, Pool, ProviderAccount, Quota, QuotaResource,
    Substrate,
};
use crate::name::{ObjectName, TenantId};
use crate::rules::budget::BudgetState;
use crate::time::Timestamp;

/// Result alias of the store port.
pub type StoreResult<T> = Result<T, StoreError>;

/// Filters of `cluster_list`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterFilter {
    /// Only this account's.
    pub provider_account_id: Option<ProviderAccountId>,
    /// Include `deleted` ones (they say so in `status.state`).
    pub include_deleted: bool,
}

/// Filters of `load_balancer_list`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadBalancerFilter {
    /// Only this pool's.
    pub pool_id: Option<PoolId>,
    /// Only this account's.
    pub provider_account_id: Option<ProviderAccountId>,
    /// Include deleted ones (they carry `deleted_at`).
    pub include_deleted: bool,
}

/// Reads of pools and quotas.
#[async_trait]
pub trait PoolRepo: Send + Sync {
    /// A pool of `tenant`; `None` if absent or another tenant's.
    async fn pool_get(&self, tenant: &TenantId, pool_id: &PoolId) -> StoreResult<Option<Pool>>;
    /// A pool by id, whatever its tenant (reconcilers).
    async fn pool_get_any(&self, pool_id: &PoolId) -> StoreResult<Option<Pool>>;
    /// A tenant's active pool by name.
    async fn pool_find_by_name(
        &self,
        tenant: &TenantId,
        name: &ObjectName,
    ) -> StoreResult<Option<Pool>>;
    /// A tenant's pools that `scope` covers (pool grants), active ones unless
    /// `include_archived`.
    async fn pool_list(
        &self,
        tenant: &TenantId,
        scope: &ReadScope,
        include_archived: bool,
        page: &PageRequest<PoolId>,
    ) -> StoreResult<Page<Pool, PoolId>>;
    /// The version of `tenant`'s pools: a number that every commit inserting or updating
    /// one of them raises, in that commit (0 before the first). A page of
    /// [`PoolRepo::pool_list`] read after reading version `v` is at least as new as `v`,
    /// so a page kept under `v` may be answered again while the version is still `v`.
    async fn pool_list_version(&self, tenant: &TenantId) -> StoreResult<u64>;
    /// A pool's quota row.
    async fn quota_get(
        &self,
        pool_id: &PoolId,
        resource: QuotaResource,
    ) -> StoreResult<Option<Quota>>;
    /// A pool's quota rows (one per resource at most).
    async fn quota_list(&self, pool_id: &PoolId) -> StoreResult<Vec<Quota>>;
}

/// Reads of provider accounts.
#[async_trait]
pub trait AccountRepo: Send + Sync {
    /// An account of `tenant` (deleted ones too; callers check `deleted_at`); `None` if
    /// absent or another tenant's.
    async fn account_get(
        &self,
        tenant: &TenantId,
        id: &ProviderAccountId,
    ) -> StoreResult<Option<ProviderAccount>>;
    /// An account by id, whatever its tenant (reconcilers; deleted ones too).
    async fn account_get_any(&self, id: &ProviderAccountId)
    -> StoreResult<Option<ProviderAccount>>;
    /// A tenant's live accounts that `scope` covers (account grants).
    async fn account_list(
        &self,
        tenant: &TenantId,
        scope: &ReadScope,
        page: &PageRequest<ProviderAccountId>,
    ) -> StoreResult<Page<ProviderAccount, ProviderAccountId>>;
    /// Every live account, across tenants (reconcilers observing accounts in bulk).
    async fn account_sweep(
        &self,
        page: &PageRequest<ProviderAccountId>,
    ) -> StoreResult<Page<ProviderAccount, ProviderAccountId>>;
}

/// Reads of substrates.
#[async_trait]
pub trait SubstrateRepo: Send + Sync {
    /// The substrate of a pool of `tenant`; `None` if absent or another tenant's.
    async fn substrate_get(
        &self,
        tenant: &TenantId,
        pool_id: &PoolId,
    ) -> StoreResult<Option<Substrate>>;
    /// A pool's substrate, whatever its tenant (reconcilers).
    async fn substrate_get_any(&self, pool_id: &PoolId) -> StoreResult<Option<Substrate>>;
    /// Substrates on a cluster (a handful at most).
    async fn substrate_list_by_cluster(
        &self,
        cluster_id: &ClusterId,
    ) -> StoreResult<Vec<Substrate>>;
    /// Every live (not `deleted`) substrate, across tenants.
    async fn substrate_sweep(
        &self,
        page: &PageRequest<PoolId>,
    ) -> StoreResult<Page<Substrate, PoolId>>;
    /// The live substrates of one provider account.
    async fn substrate_list_by_account(
        &self,
        account: &ProviderAccountId,
        page: &PageRequest<PoolId>,
    ) -> StoreResult<Page<Substrate, PoolId>>;
}

/// Reads of clusters and node pools.
#[async_trait]
pub trait ClusterRepo: Send + Sync {
    /// A cluster of `tenant`; `None` if absent or another tenant's.
    async fn cluster_get(
        &self,
        tenant: &TenantId,
        id: &ClusterId,
    ) -> StoreResult<Option<KubernetesCluster>>;
    /// A cluster by id, whatever its tenant (reconcilers).
    async fn cluster_get_any(&self, id: &ClusterId) -> StoreResult<Option<KubernetesCluster>>;
    /// A tenant's clusters that `scope` covers (cluster grants, and account grants for
    /// the account's clusters), filtered by `filter`.
    async fn cluster_list(
        &self,
        tenant: &TenantId,
        scope: &ReadScope,
        filter: &ClusterFilter,
        page: &PageRequest<ClusterId>,
    ) -> StoreResult<Page<KubernetesCluster, ClusterId>>;
    /// The live cluster row of a provider cluster in an account.
    async fn cluster_find_by_provider_id(
        &self,
        account: &ProviderAccountId,
        provider_cluster_id: &str,
    ) -> StoreResult<Option<KubernetesCluster>>;
    /// Live (not deleted) clusters of an account.
    async fn cluster_count_live_by_account(&self, account: &ProviderAccountId) -> StoreResult<u64>;
    /// Every live cluster, across tenants.
    async fn cluster_sweep(
        &self,
        page: &PageRequest<ClusterId>,
    ) -> StoreResult<Page<KubernetesCluster, ClusterId>>;
    /// The live clusters of one provider account.
    async fn cluster_list_by_account(
        &self,
        account: &ProviderAccountId,
        page: &PageRequest<ClusterId>,
    ) -> StoreResult<Page<KubernetesCluster, ClusterId>>;
    /// A node pool of `tenant`; `None` if absent or another tenant's.
    async fn node_pool_get(
        &self,
        tenant: &TenantId,
        id: &NodePoolId,
    ) -> StoreResult<Option<NodePool>>;
    /// A node pool by id, whatever its tenant (reconcilers).
    async fn node_pool_get_any(&self, id: &NodePoolId) -> StoreResult<Option<NodePool>>;
    /// The node pools of a cluster of `tenant` that `scope` covers (node-pool grants,
    /// cluster grants, and account grants for the cluster's account); `deleted` ones only
    /// if `include_deleted`.
    async fn node_pool_list(
        &self,
        tenant: &TenantId,
        cluster_id: &ClusterId,
        scope: &ReadScope,
        include_deleted: bool,
        page: &PageRequest<NodePoolId>,
    ) -> StoreResult<Page<NodePool, NodePoolId>>;
    /// The live node pools of a cluster, whatever its tenant (reconcilers).
    async fn node_pool_list_by_cluster(
        &self,
        cluster_id: &ClusterId,
        page: &PageRequest<NodePoolId>,
    ) -> StoreResult<Page<NodePool, NodePoolId>>;
    /// Every live node pool, across tenants.
    async fn node_pool_sweep(
        &self,
        page: &PageRequest<NodePoolId>,
    ) -> StoreResult<Page<NodePool, NodePoolId>>;
}

/// Reads of load balancers.
#[async_trait]
pub trait LoadBalancerRepo: Send + Sync {
    /// A load balancer of `tenant`; `None` if absent or another tenant's.
    async fn load_balancer_get(
        &self,
        tenant: &TenantId,
        id: &LoadBalancerId,
    ) -> StoreResult<Option<LoadBalancer>>;
    /// A load balancer by id, whatever its tenant (reconcilers).
    async fn load_balancer_get_any(&self, id: &LoadBalancerId)
    -> StoreResult<Option<LoadBalancer>>;
    /// A tenant's load balancers that `scope` covers (load-balancer grants, and account
    /// grants for the account's load balancers), filtered by `filter`.
    async fn load_balancer_list(
        &self,
        tenant: &TenantId,
        scope: &ReadScope,
        filter: &LoadBalancerFilter,
        page: &PageRequest<LoadBalancerId>,
    ) -> StoreResult<Page<LoadBalancer, LoadBalancerId>>;
    /// The load balancer of a provider id in an account (the live one first).
    async fn load_balancer_find_by_provider_id(
        &self,
        account: &ProviderAccountId,
        provider_load_balancer_id: &str,
    ) -> StoreResult<Option<LoadBalancer>>;
    /// Live load balancers of an account.
    async fn load_balancer_count_live_by_account(
        &self,
        account: &ProviderAccountId,
    ) -> StoreResult<u64>;
    /// Every live (not deleted) load balancer, across tenants.
    async fn load_balancer_sweep(
        &self,
        page: &PageRequest<LoadBalancerId>,
    ) -> StoreResult<Page<LoadBalancer, LoadBalancerId>>;
    /// The live load balancers of one provider account.
    async fn load_balancer_list_by_account(
        &self,
        account: &ProviderAccountId,
        page: &PageRequest<LoadBalancerId>,
    ) -> StoreResult<Page<LoadBalancer, LoadBalancerId>>;
}

/// Reads of nodes, join tokens and API tokens.
#[async_trait]
pub trait AgentRepo: Send + Sync {
    /// A node by id.
    async fn node_get(&self, id: &NodeId) -> StoreResult<Option<Node>>;
    /// A node by pool and name.
    async fn node_find_by_name(
        &self,
        pool_id: &PoolId,
        node_name: &str,
    ) -> StoreResult<Option<Node>>;
    /// A node by its credential hash, while its credential is live: not ended by its
    /// substrate's teardown (SPEC §9; see `Write::PutSubstrate`).
    async fn node_find_by_credential_hash(&self, hash: &str) -> StoreResult<Option<Node>>;
    /// A pool's joined nodes that are live (not ended by a teardown).
    async fn node_list_by_pool(
        &self,
        pool_id: &PoolId,
        page: &PageRequest<NodeId>,
    ) -> StoreResult<Page<Node, NodeId>>;
    /// A live join token by hash.
    async fn join_token_find(&self, hash: &str) -> StoreResult<Option<JoinToken>>;
    /// An API token by hash (revoked ones too; callers check `revoked_at`).
    async fn api_token_find(&self, hash: &str) -> StoreResult<Option<ApiToken>>;
    /// An API token by id.
    async fn api_token_get(&self, id: &TokenId) -> StoreResult<Option<ApiToken>>;
    /// Every API token of the deployment, revoked ones too, by id (`bc-api token list`:
    /// an operator's view, so not tenant-scoped).
    async fn api_token_sweep(
        &self,
        page: &PageRequest<TokenId>,
    ) -> StoreResult<Page<ApiToken, TokenId>>;
}

/// Reads of bookings.
#[async_trait]
pub trait BookingRepo: Send + Sync {
    /// A booking of `tenant`; `None` if absent or another tenant's.
    async fn booking_get(&self, tenant: &TenantId, id: &BookingId) -> StoreResult<Option<Booking>>;
    /// A pool's bookings of `tenant`, optionally only those in `state` at `now` (SPEC
    /// §10: a booking past its `endsAt` counts as ended, as
    /// `rules::drain::booking_state_at` says; the stored `state` is returned as stored).
    async fn booking_list(
        &self,
        tenant: &TenantId,
        pool_id: &PoolId,
        state: Option<BookingState>,
        now: Timestamp,
        page: &PageRequest<BookingId>,
    ) -> StoreResult<Page<Booking, BookingId>>;
    /// Bookings of a pool stored `active` and not past `endsAt` at `now`.
    async fn booking_count_active(&self, pool_id: &PoolId, now: Timestamp) -> StoreResult<u64>;
}

/// Reads of billing intervals, events, relay cursors and idempotency records.
#[async_trait]
pub trait LedgerRepo: Send + Sync {
    /// A tenant's intervals overlapping `[from, to)`, optionally of one meter, paged in
    /// the order they were opened (the key is the store's interval number).
    async fn billing_list(
        &self,
        tenant: &TenantId,
        from: Timestamp,
        to: Timestamp,
        meter: Option<&str>,
        page: &PageRequest<u64>,
    ) -> StoreResult<Page<BillingInterval, u64>>;
    /// A tenant's events after `after_seq`, optionally of one subject, at most `limit`.
    async fn event_list(
        &self,
        tenant: &TenantId,
        subject: Option<&str>,
        after_seq: u64,
        limit: u32,
    ) -> StoreResult<Vec<Event>>;
    /// All events after `after_seq` (the outbox relay), at most `limit`.
    async fn event_list_all(&self, after_seq: u64, limit: u32) -> StoreResult<Vec<Event>>;
    /// The last `seq` a publisher delivered (`Write::AdvanceRelayCursor`); 0 if none yet.
    async fn relay_cursor(&self, publisher: &str) -> StoreResult<u64>;
    /// The stored create result of a `requestId`, while it is live at `now` (24 hours,
    /// `rules::idempotency`); an older record is `None` even before the purge drops it.
    async fn idempotency_get(
        &self,
        tenant: &TenantId,
        method: &str,
        request_id: &str,
        now: Timestamp,
    ) -> StoreResult<Option<IdempotencyRecord>>;
    /// Drops records created before `before`; returns how many. Run it under the
    /// `LEASE_IDEMPOTENCY_PURGE` singleton lease.
    async fn idempotency_purge(&self, before: Timestamp) -> StoreResult<u64>;
}

/// The work queue with leases.
#[async_trait]
pub trait WorkQueue: Send + Sync {
    /// Adds or merges an entry (see [`Enqueue`]); outside a unit of work.
    async fn enqueue(&self, item: Enqueue) -> StoreResult<()>;
    /// Claims up to `max` due items (not leased, or lease expired) of the given kinds
    /// (all kinds when empty) for `owner` until `lease_until`, oldest due first.
    async fn claim(
        &self,
        owner: &str,
        kinds: &[WorkKind],
        max: u32,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> StoreResult<Vec<WorkItem>>;
    /// Done: removes the item if `owner` still holds it, unless it was enqueued again
    /// since the claim (then it stays, unleased, due at the earliest time enqueued during
    /// the run). Returns whether `owner` held it.
    async fn complete(&self, kind: WorkKind, key: &str, owner: &str) -> StoreResult<bool>;
    /// Failed: attempts + 1, `last_error`, due again at `retry_at` (or earlier, if enqueued
    /// during the run for an earlier time), lease dropped.
    async fn fail(
        &self,
        kind: WorkKind,
        key: &str,
        owner: &str,
        error: &str,
        retry_at: Timestamp,
    ) -> StoreResult<bool>;
    /// Could not run yet (the account's provider-call budget had no call to spare):
    /// `why` as `last_error`, due again at `at` (or earlier, if enqueued during the run
    /// for an earlier time), lease dropped — attempts kept, so waiting for the budget
    /// neither counts as a failure nor forgets the failures before it. Returns whether
    /// `owner` held it.
    async fn defer(
        &self,
        kind: WorkKind,
        key: &str,
        owner: &str,
        why: &str,
        at: Timestamp,
    ) -> StoreResult<bool>;
    /// Succeeded but wants another run at `at` (or earlier, if enqueued during the run for
    /// an earlier time); attempts reset, lease dropped.
    async fn requeue(
        &self,
        kind: WorkKind,
        key: &str,
        owner: &str,
        at: Timestamp,
    ) -> StoreResult<bool>;
    /// Extends `owner`'s lease.
    async fn extend(
        &self,
        kind: WorkKind,
        key: &str,
        owner: &str,
        lease_until: Timestamp,
    ) -> StoreResult<bool>;
    /// An item as stored.
    async fn work_get(&self, kind: WorkKind, key: &str) -> StoreResult<Option<WorkItem>>;
    /// The queue of every kind at `now`, in [`WorkKind::ALL`] order.
    async fn queue_status(&self, now: Timestamp) -> StoreResult<Vec<QueueStatus>>;
    /// The entries of `kind` whose last attempt failed, by key.
    async fn work_list_failing(
        &self,
        kind: WorkKind,
        page: &PageRequest<String>,
    ) -> StoreResult<Page<WorkItem, String>>;
    /// Gives `owner`'s lease up without an outcome (a replica shutting down mid-run):
    /// the entry stays, due at once (its due time was reached when it was claimed, or
    /// earlier if enqueued during the run), attempts and `last_error` kept. Returns
    /// whether `owner` held it.
    async fn release(&self, kind: WorkKind, key: &str, owner: &str) -> StoreResult<bool>;
    /// When the next entry of `kind` becomes claimable: its due time, or just after its
    /// lease ends when that is later (leased entries included, expired leases too);
    /// `None` when the kind has no entries. For drivers that step a clock to the next
    /// thing to do.
    async fn next_due(&self, kind: WorkKind) -> StoreResult<Option<Timestamp>>;
    /// Settles many runs at once, each exactly as its own [`WorkQueue::requeue`],
    /// [`WorkQueue::fail`] or [`WorkQueue::defer`] would (each only while its owner holds
    /// it; one that does not changes nothing and answers `false`); whether each owner
    /// held its item, in order. A store may do it in fewer round trips than one per item;
    /// this default does one each.
    async fn settle(&self, batch: &[Settlement]) -> StoreResult<Vec<bool>> {
        settle_each(self, batch).await
    }
}

/// [`WorkQueue::settle`] one item at a time, through `requeue`, `fail` and `defer`.
pub async fn settle_each<Q: WorkQueue + ?Sized>(
    queue: &Q,
    batch: &[Settlement],
) -> StoreResult<Vec<bool>> {
    let mut held = Vec::with_capacity(batch.len());
    for s in batch {
        let (kind, key, owner) = (s.kind, s.key.as_str(), s.owner.as_str());
        held.push(match &s.how {
            Settle::Requeue { at } => queue.requeue(kind, key, owner, *at).await?,
            Settle::Fail { error, at } => queue.fail(kind, key, owner, error, *at).await?,
            Settle::Defer { why, at } => queue.defer(kind, key, owner, why, *at).await?,
        });
    }
    Ok(held)
}

/// How a run ended, for [`WorkQueue::settle`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settle {
    /// As [`WorkQueue::requeue`].
    Requeue {
        /// Due again at.
        at: Timestamp,
    },
    /// As [`WorkQueue::fail`].
    Fail {
        /// The `last_error`.
        error: String,
        /// Due again at.
        at: Timestamp,
    },
    /// As [`WorkQueue::defer`].
    Defer {
        /// The `last_error`.
        why: String,
        /// Due again at.
        at: Timestamp,
    },
}

/// One item's settle in a [`WorkQueue::settle`] batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settlement {
    /// The item's kind.
    pub kind: WorkKind,
    /// The item's key.
    pub key: String,
    /// The lease holder that ran it.
    pub owner: String,
    /// How the run ended.
    pub how: Settle,
}

/// A provider-call budget as stored (see [`BudgetRepo`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredBudget {
    /// The state `rules::budget` decides on.
    pub state: BudgetState,
    /// Bumped by every write; the compare-and-swap key.
    pub version: u64,
}

/// Shared provider-call budgets, one per key (a provider account id): the state of
/// `rules::budget`, read and replaced by compare-and-swap, so every replica takes calls
/// from the one budget and none can overspend it.
#[async_trait]
pub trait BudgetRepo: Send + Sync {
    /// The budget of `key`; `None` before its first write.
    async fn budget_get(&self, key: &str) -> StoreResult<Option<StoredBudget>>;
    /// Writes `state` if the stored version is `expected` (`None`: no row yet), as
    /// version `expected + 1` (1 for a new row). Returns whether it wrote; `false` means
    /// another writer went first: read again and decide again.
    async fn budget_put(
        &self,
        key: &str,
        expected: Option<u64>,
        state: &BudgetState,
    ) -> StoreResult<bool>;
}

/// Named singleton leases: one holder at a time, taken over once expired.
#[async_trait]
pub trait Leases: Send + Sync {
    /// Takes or renews lease `name` for `owner` until `until`: succeeds when nobody holds
    /// it, `owner` already does, or the holder's lease ended before `now`. Returns
    /// whether `owner` holds it now.
    async fn lease_acquire(
        &self,
        name: &str,
        owner: &str,
        now: Timestamp,
        until: Timestamp,
    ) -> StoreResult<bool>;
    /// Gives the lease up if `owner` holds it; returns whether it did.
    async fn lease_release(&self, name: &str, owner: &str) -> StoreResult<bool>;
    /// The lease as stored (possibly expired).
    async fn lease_get(&self, name: &str) -> StoreResult<Option<Lease>>;
}

/// The whole store: every repository, the unit of work, the queue, the leases, the
/// shared provider budgets.
#[async_trait]
pub trait Store:
    PoolRepo
    + AccountRepo
    + SubstrateRepo
    + ClusterRepo
    + LoadBalancerRepo
    + AgentRepo
    + BookingRepo
    + LedgerRepo
    + WorkQueue
    + Leases
    + BudgetRepo
{
    /// Applies a unit of work atomically (see the module contract).
    async fn commit(&self, uow: UnitOfWork) -> StoreResult<Committed>;
    /// Whether the store is reachable and migrated (`/readyz`).
    async fn ready(&self) -> StoreResult<()>;
}
