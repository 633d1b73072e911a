//! The store port: read repositories per aggregate, one unit of work for writes, and the
//! work queue.
//!
//! Writes are values: a [`UnitOfWork`] lists conditional writes, outbox events and queue
//! entries, and [`Store::commit`] applies all of it in one transaction or none of it. So a
//! state change, its event and its work item can never be seen apart, and every condition
//! (generation compare-and-swap, a free name, a quota unit) is checked inside that same
//! transaction.
//!
//! Contract every implementation keeps (the shared store test suite checks it):
//! - `commit` fails as a whole with `Stale` when a CAS generation does not match,
//!   `NotFound` when its row is missing, `AlreadyExists` on a unique key (name, id),
//!   `Conflict` when a quota has no free unit or no row; nothing of it is then visible.
//! - Every list is ordered by id and paged by [`PageRequest`]; none loads a whole table.
//! - Events get a global, strictly increasing `seq` in commit order.

use async_trait::async_trait;

use crate::error::StoreError;
use crate::id::{
    BookingId, ClusterId, LoadBalancerId, NodeId, NodePoolId, PoolId, ProviderAccountId, TokenId,
};
use crate::model::{
    ApiToken, BillingInterval, Booking, Event, IdempotencyRecord, JoinToken, KubernetesCluster,
    LoadBalancer, NewEvent, Node, NodePool, ObservedStatus, Pool, ProviderAccount, Quota,
    QuotaResource, Substrate,
};
use crate::name::{ObjectName, TenantId};
use crate::state::NodePoolState;
use crate::time::Timestamp;

/// Result alias of the store port.
pub type StoreResult<T> = Result<T, StoreError>;

/// A page request: items with id greater than `after`, at most `limit` of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    /// The last id of the previous page.
    pub after: Option<String>,
    /// Most items (the API caps it at 500).
    pub limit: u32,
}

impl PageRequest {
    /// The first page of `limit` items.
    pub fn first(limit: u32) -> Self {
        Self { after: None, limit }
    }
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    /// Items, in id order.
    pub items: Vec<T>,
    /// The id to pass as `after` for the next page, while more remain.
    pub next_after: Option<String>,
}

/// A conditional write inside a [`UnitOfWork`].
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// Insert a pool; `AlreadyExists` if the tenant has an active pool of that name.
    InsertPool(Pool),
    /// Replace a pool's desired state (policy, state, archivedAt, generation) if its stored
    /// generation is `expected_generation`; the record carries the new generation.
    UpdatePool {
        /// The new record.
        pool: Pool,
        /// The generation it must have now.
        expected_generation: u64,
    },
    /// Create or change a quota row's limit (keeps `used`).
    SetQuota {
        /// Pool.
        pool_id: PoolId,
        /// Resource.
        resource: QuotaResource,
        /// New limit.
        limit: u32,
    },
    /// Book one unit: `used = used + 1 where used < limit`; `Conflict` when none is free
    /// or no row exists.
    BookQuota {
        /// Pool.
        pool_id: PoolId,
        /// Resource.
        resource: QuotaResource,
    },
    /// Release one unit, never below zero; no-op without a row.
    ReleaseQuota {
        /// Pool.
        pool_id: PoolId,
        /// Resource.
        resource: QuotaResource,
    },
    /// Insert a provider account; `AlreadyExists` on a live name of the tenant.
    InsertAccount(ProviderAccount),
    /// Soft-delete an account.
    DeleteAccount {
        /// Account.
        provider_account_id: ProviderAccountId,
        /// When.
        at: Timestamp,
    },
    /// Insert or replace a pool's substrate row.
    PutSubstrate(Substrate),
    /// Insert a cluster row; `AlreadyExists` on a live name in the account.
    InsertCluster(KubernetesCluster),
    /// Replace a cluster's desired fields (name, desired version, substrate pools,
    /// generation) under CAS.
    UpdateCluster {
        /// The new record (status fields ignored).
        cluster: KubernetesCluster,
        /// The generation it must have now.
        expected_generation: u64,
    },
    /// Write a cluster's observed fields only.
    SetClusterStatus {
        /// Cluster.
        cluster_id: ClusterId,
        /// Provider id, once known.
        provider_cluster_id: Option<String>,
        /// Running version, once known.
        version: Option<String>,
        /// Observed state.
        status: ObservedStatus,
    },
    /// Insert a node pool row; `AlreadyExists` on a live name in the cluster.
    InsertNodePool(NodePool),
    /// Replace a node pool's desired fields (scale, labels, taints, generation) under CAS.
    UpdateNodePool {
        /// The new record (status fields ignored).
        node_pool: NodePool,
        /// The generation it must have now.
        expected_generation: u64,
    },
    /// Write a node pool's observed fields only.
    SetNodePoolStatus {
        /// Node pool.
        node_pool_id: NodePoolId,
        /// Provider id, once known.
        provider_node_pool_id: Option<String>,
        /// Nodes listed.
        nodes_listed: u32,
        /// Nodes running.
        nodes_ready: u32,
        /// State.
        state: NodePoolState,
        /// Message.
        message: Option<String>,
        /// Generation converged.
        observed_generation: u64,
        /// When.
        updated_at: Timestamp,
    },
    /// Insert a load balancer; `AlreadyExists` on a live name in the account.
    InsertLoadBalancer(LoadBalancer),
    /// Replace a load balancer's desired fields (name, spec, delete_requested,
    /// generation) under CAS.
    UpdateLoadBalancer {
        /// The new record (status fields ignored).
        load_balancer: LoadBalancer,
        /// The generation it must have now.
        expected_generation: u64,
    },
    /// Write a load balancer's observed fields only.
    SetLoadBalancerStatus {
        /// Load balancer.
        load_balancer_id: LoadBalancerId,
        /// Provider id, once known.
        provider_load_balancer_id: Option<String>,
        /// Public IP.
        ip: Option<String>,
        /// Observed state.
        status: ObservedStatus,
        /// First ready (kept once set).
        ready_at: Option<Timestamp>,
        /// Deleted.
        deleted_at: Option<Timestamp>,
    },
    /// Insert or replace a node by `(pool, node_name)`.
    PutNode(Node),
    /// Record a heartbeat.
    Heartbeat {
        /// Node.
        node_id: NodeId,
        /// When.
        at: Timestamp,
    },
    /// Insert a booking.
    InsertBooking(Booking),
    /// End a booking (idempotent).
    EndBooking {
        /// Booking.
        booking_id: BookingId,
        /// When.
        at: Timestamp,
    },
    /// Insert a join token.
    InsertJoinToken(JoinToken),
    /// Revoke every live join token of a pool.
    RevokeJoinTokens {
        /// Pool.
        pool_id: PoolId,
        /// When.
        at: Timestamp,
    },
    /// Insert an API token.
    InsertApiToken(ApiToken),
    /// Revoke an API token (idempotent).
    RevokeApiToken {
        /// Token.
        token_id: TokenId,
        /// When.
        at: Timestamp,
    },
    /// Open a billing interval unless one is open for `(meter, resource)` (idempotent).
    OpenBilling(BillingInterval),
    /// Close the open interval of `(meter, resource)` at `at`, if any (idempotent).
    CloseBilling {
        /// Meter.
        meter: String,
        /// Resource id.
        resource: String,
        /// End.
        at: Timestamp,
    },
    /// Store the first response of a create call; `AlreadyExists` if the key is taken.
    PutIdempotency(IdempotencyRecord),
}

/// A work-queue entry to add (deduplicated per `(kind, key)`, keeping the earliest due
/// time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enqueue {
    /// Reconciler kind, e.g. `kubernetes.substrates`.
    pub kind: String,
    /// Object key, e.g. a pool id.
    pub key: String,
    /// Due time.
    pub not_before: Timestamp,
}

/// Everything one transaction writes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UnitOfWork {
    /// Conditional writes, applied in order.
    pub writes: Vec<Write>,
    /// Outbox events.
    pub events: Vec<NewEvent>,
    /// Work-queue entries.
    pub enqueue: Vec<Enqueue>,
}

impl UnitOfWork {
    /// An empty unit of work.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds a write.
    pub fn write(mut self, w: Write) -> Self {
        self.writes.push(w);
        self
    }
    /// Adds an event.
    pub fn event(mut self, e: NewEvent) -> Self {
        self.events.push(e);
        self
    }
    /// Adds a work-queue entry.
    pub fn enqueue(
        mut self,
        kind: impl Into<String>,
        key: impl Into<String>,
        not_before: Timestamp,
    ) -> Self {
        self.enqueue.push(Enqueue { kind: kind.into(), key: key.into(), not_before });
        self
    }
    /// Whether it writes nothing.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.events.is_empty() && self.enqueue.is_empty()
    }
}

/// What a commit assigned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Committed {
    /// The `seq` of each event, in the order given.
    pub event_seqs: Vec<u64>,
}

/// A claimed or stored work item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkItem {
    /// Reconciler kind.
    pub kind: String,
    /// Object key.
    pub key: String,
    /// Due time.
    pub not_before: Timestamp,
    /// Failed attempts since the last success.
    pub attempts: u32,
    /// The replica holding the lease.
    pub lease_owner: Option<String>,
    /// Lease expiry.
    pub lease_until: Option<Timestamp>,
    /// Last failure (no secrets).
    pub last_error: Option<String>,
}

/// Filters of `load_balancer_list`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadBalancerFilter {
    /// Only this pool's.
    pub pool_id: Option<PoolId>,
    /// Only this account's.
    pub provider_account_id: Option<ProviderAccountId>,
    /// Include deleted ones.
    pub include_deleted: bool,
}

/// Reads of pools and quotas.
#[async_trait]
pub trait PoolRepo: Send + Sync {
    /// A pool by id, whatever its tenant (reconcilers); callers check the tenant.
    async fn pool_get(&self, pool_id: &PoolId) -> StoreResult<Option<Pool>>;
    /// A tenant's active pool by name.
    async fn pool_find_by_name(
        &self,
        tenant: &TenantId,
        name: &ObjectName,
    ) -> StoreResult<Option<Pool>>;
    /// A tenant's pools.
    async fn pool_list(
        &self,
        tenant: &TenantId,
        include_archived: bool,
        page: &PageRequest,
    ) -> StoreResult<Page<Pool>>;
    /// A pool's quota row.
    async fn quota_get(
        &self,
        pool_id: &PoolId,
        resource: QuotaResource,
    ) -> StoreResult<Option<Quota>>;
    /// A pool's quota rows.
    async fn quota_list(&self, pool_id: &PoolId) -> StoreResult<Vec<Quota>>;
}

/// Reads of provider accounts.
#[async_trait]
pub trait AccountRepo: Send + Sync {
    /// An account by id (deleted ones too; callers check `deleted_at`).
    async fn account_get(&self, id: &ProviderAccountId) -> StoreResult<Option<ProviderAccount>>;
    /// A tenant's live accounts.
    async fn account_list(
        &self,
        tenant: &TenantId,
        page: &PageRequest,
    ) -> StoreResult<Page<ProviderAccount>>;
}

/// Reads of substrates.
#[async_trait]
pub trait SubstrateRepo: Send + Sync {
    /// A pool's substrate.
    async fn substrate_get(&self, pool_id: &PoolId) -> StoreResult<Option<Substrate>>;
    /// Substrates on a cluster.
    async fn substrate_list_by_cluster(
        &self,
        cluster_id: &ClusterId,
    ) -> StoreResult<Vec<Substrate>>;
}

/// Reads of clusters and node pools.
#[async_trait]
pub trait ClusterRepo: Send + Sync {
    /// A cluster by id.
    async fn cluster_get(&self, id: &ClusterId) -> StoreResult<Option<KubernetesCluster>>;
    /// A tenant's clusters, optionally of one account.
    async fn cluster_list(
        &self,
        tenant: &TenantId,
        account: Option<&ProviderAccountId>,
        page: &PageRequest,
    ) -> StoreResult<Page<KubernetesCluster>>;
    /// The live cluster row of a provider cluster in an account.
    async fn cluster_find_by_provider_id(
        &self,
        account: &ProviderAccountId,
        provider_cluster_id: &str,
    ) -> StoreResult<Option<KubernetesCluster>>;
    /// Live (not deleted) clusters of an account (for `providerAccounts.delete`).
    async fn cluster_count_live_by_account(&self, account: &ProviderAccountId) -> StoreResult<u64>;
    /// A node pool by id.
    async fn node_pool_get(&self, id: &NodePoolId) -> StoreResult<Option<NodePool>>;
    /// A cluster's node pools.
    async fn node_pool_list_by_cluster(
        &self,
        cluster_id: &ClusterId,
        page: &PageRequest,
    ) -> StoreResult<Page<NodePool>>;
}

/// Reads of load balancers.
#[async_trait]
pub trait LoadBalancerRepo: Send + Sync {
    /// A load balancer by id.
    async fn load_balancer_get(&self, id: &LoadBalancerId) -> StoreResult<Option<LoadBalancer>>;
    /// A tenant's load balancers.
    async fn load_balancer_list(
        &self,
        tenant: &TenantId,
        filter: &LoadBalancerFilter,
        page: &PageRequest,
    ) -> StoreResult<Page<LoadBalancer>>;
    /// The load balancer of a provider id in an account.
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
}

/// Reads of nodes, join tokens, bookings and API tokens.
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
    /// A node by its credential hash.
    async fn node_find_by_credential_hash(&self, hash: &str) -> StoreResult<Option<Node>>;
    /// A pool's joined nodes.
    async fn node_list_by_pool(
        &self,
        pool_id: &PoolId,
        page: &PageRequest,
    ) -> StoreResult<Page<Node>>;
    /// A live join token by hash.
    async fn join_token_find(&self, hash: &str) -> StoreResult<Option<JoinToken>>;
    /// An API token by hash (revoked ones too; callers check `revoked_at`).
    async fn api_token_find(&self, hash: &str) -> StoreResult<Option<ApiToken>>;
    /// An API token by id.
    async fn api_token_get(&self, id: &TokenId) -> StoreResult<Option<ApiToken>>;
}

/// Reads of bookings.
#[async_trait]
pub trait BookingRepo: Send + Sync {
    /// A booking by id.
    async fn booking_get(&self, id: &BookingId) -> StoreResult<Option<Booking>>;
    /// A pool's bookings.
    async fn booking_list(
        &self,
        pool_id: &PoolId,
        page: &PageRequest,
    ) -> StoreResult<Page<Booking>>;
    /// Bookings of a pool stored `active` and not past `endsAt` at `now`.
    async fn booking_count_active(&self, pool_id: &PoolId, now: Timestamp) -> StoreResult<u64>;
}

/// Reads of billing intervals, events and idempotency records.
#[async_trait]
pub trait LedgerRepo: Send + Sync {
    /// A tenant's intervals overlapping `[from, to)`, optionally of one meter.
    async fn billing_list(
        &self,
        tenant: &TenantId,
        from: Timestamp,
        to: Timestamp,
        meter: Option<&str>,
    ) -> StoreResult<Vec<BillingInterval>>;
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
    /// A stored create result.
    async fn idempotency_get(
        &self,
        tenant: &TenantId,
        method: &str,
        request_id: &str,
    ) -> StoreResult<Option<IdempotencyRecord>>;
    /// Drops records created before `before`; returns how many.
    async fn idempotency_purge(&self, before: Timestamp) -> StoreResult<u64>;
}

/// The work queue with leases.
#[async_trait]
pub trait WorkQueue: Send + Sync {
    /// Adds or merges an entry (keeps the earliest due time); outside a unit of work.
    async fn enqueue(&self, item: Enqueue) -> StoreResult<()>;
    /// Claims up to `max` due items (not leased, or lease expired) of the given kinds
    /// (all kinds when empty) for `owner` until `lease_until`.
    async fn claim(
        &self,
        owner: &str,
        kinds: &[String],
        max: u32,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> StoreResult<Vec<WorkItem>>;
    /// Done: removes the item if `owner` still holds it, unless it was re-enqueued
    /// since the claim (then it stays, due, unleased). Returns whether `owner` held it.
    async fn complete(&self, kind: &str, key: &str, owner: &str) -> StoreResult<bool>;
    /// Failed: attempts + 1, `last_error`, due again at `retry_at`, lease dropped.
    async fn fail(
        &self,
        kind: &str,
        key: &str,
        owner: &str,
        error: &str,
        retry_at: Timestamp,
    ) -> StoreResult<bool>;
    /// Succeeded but wants another run at `at` (attempts reset, lease dropped).
    async fn requeue(&self, kind: &str, key: &str, owner: &str, at: Timestamp)
    -> StoreResult<bool>;
    /// Extends `owner`'s lease.
    async fn extend(
        &self,
        kind: &str,
        key: &str,
        owner: &str,
        lease_until: Timestamp,
    ) -> StoreResult<bool>;
    /// An item as stored.
    async fn work_get(&self, kind: &str, key: &str) -> StoreResult<Option<WorkItem>>;
}

/// The whole store: every repository, the unit of work, the queue.
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
{
    /// Applies a unit of work atomically (see the module contract).
    async fn commit(&self, uow: UnitOfWork) -> StoreResult<Committed>;
    /// Whether the store is reachable and migrated (`/readyz`).
    async fn ready(&self) -> StoreResult<()>;
}
