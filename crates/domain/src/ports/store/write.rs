//! Writes as values: the conditional [`Write`]s of a [`UnitOfWork`], its outbox events,
//! its work-queue entries and the leases it is fenced by.
//!
//! Invariant: every condition a write states is checked by the store inside the commit's
//! transaction, by the statement that writes (a `WHERE` clause or a constraint), so no
//! read-then-write race exists; the first condition that fails rolls back all of it.

use crate::id::{
    BookingId, ClusterId, LoadBalancerId, NodeId, NodePoolId, PoolId, ProviderAccountId, TokenId,
};
use crate::model::{
    ApiToken, BillingInterval, Booking, ClusterNodes, IdempotencyRecord, JoinToken,
    KubernetesCluster, LoadBalancer, NewEvent, Node, NodePool, ObservedStatus, Pool,
    ProviderAccount, QuotaResource, Substrate,
};
use crate::state::NodePoolState;
use crate::time::Timestamp;

use super::queue::{Enqueue, Fence, WorkKind};

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
    /// Create or change a quota row's limit, as `rules::quota::set_limit` decides (keeps
    /// `used`).
    SetQuota {
        /// Pool.
        pool_id: PoolId,
        /// Resource.
        resource: QuotaResource,
        /// New limit.
        limit: u32,
    },
    /// Book one unit, as `rules::quota::book` decides on the row (locked for the
    /// transaction); `QuotaExhausted` (its error) when none is free or no row exists.
    BookQuota {
        /// Pool.
        pool_id: PoolId,
        /// Resource.
        resource: QuotaResource,
    },
    /// Release the `loadBalancers` unit a load balancer booked on its pool, exactly once:
    /// the first such write marks the row (`quota_released`) and releases one unit
    /// (`rules::quota::release`: never below zero); every later one is a no-op, however often a reconcile repeats it.
    /// `NotFound` if the load balancer does not exist.
    ReleaseLoadBalancerQuota {
        /// The load balancer.
        load_balancer_id: LoadBalancerId,
    },
    /// Insert a provider account; `AlreadyExists` on a live name of the tenant.
    InsertAccount(ProviderAccount),
    /// Soft-delete an account (idempotent), only while no live cluster, load balancer
    /// or substrate uses it (SPEC §5): else `Conflict` naming what remains.
    DeleteAccount {
        /// Account.
        provider_account_id: ProviderAccountId,
        /// When.
        at: Timestamp,
    },
    /// Insert or replace a pool's substrate row. A row written `deleted` also ends the
    /// pool's joined nodes (their credentials stop authenticating; SPEC §9).
    PutSubstrate(Substrate),
    /// Insert a cluster row; `AlreadyExists` on a live name in the account.
    InsertCluster(KubernetesCluster),
    /// Replace a cluster's desired fields (name, desired version, high availability,
    /// substrate pools, delete requested, generation) under CAS.
    UpdateCluster {
        /// The new record (status fields ignored).
        cluster: KubernetesCluster,
        /// The generation it must have now.
        expected_generation: u64,
    },
    /// Write an autopilot cluster's observed node count only.
    SetClusterNodes {
        /// Cluster.
        cluster_id: ClusterId,
        /// Its nodes as last counted.
        nodes: ClusterNodes,
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
    /// Replace a node pool's desired fields (scale, labels, taints, delete requested,
    /// generation) under CAS.
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
    /// Record a join by `(pool, node_name)`. A first join inserts the node; joining again
    /// with the same name (SPEC §9: idempotent) keeps the stored `node_id` and
    /// `joined_at` and replaces the credential hash, provider node id and bcd version,
    /// so the old credential stops working. Read the node back for its id.
    PutNode(Node),
    /// Record a heartbeat.
    Heartbeat {
        /// Node.
        node_id: NodeId,
        /// When.
        at: Timestamp,
    },
    /// End a node's credential because its cluster no longer lists it (SPEC §9), only
    /// while the node still holds `credential_hash`: a join again in between (a new
    /// credential) keeps the node live. Idempotent.
    EndNode {
        /// Node.
        node_id: NodeId,
        /// The credential hash read when the end was decided.
        credential_hash: String,
        /// When.
        at: Timestamp,
    },
    /// Insert a booking, only while no drain upgrade waits on its pool (SPEC §6, §10):
    /// else `Conflict` with the message of `rules::drain::booking_refused_by_upgrade`.
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
    /// Store the first response of a create call under its `requestId`. A record of the
    /// key older than the 24-hour window is replaced. A live one of the same body means a
    /// twin request committed first: nothing of the unit of work is applied and the
    /// commit answers with that record ([`Committed::replayed`]); of another body, the
    /// commit fails with `RequestIdReused` (`ALREADY_EXISTS`). It is its unit of work's
    /// first write, so a twin is recognised before the names it took refuse the rest.
    PutIdempotency(IdempotencyRecord),
    /// Move a publisher's durable cursor forward to `seq` (never back): the last event
    /// `seq` it delivered, so a relay resumes there after a restart. Fence it with the
    /// relay's singleton lease.
    AdvanceRelayCursor {
        /// Publisher name, e.g. `nats`.
        publisher: String,
        /// The last delivered `seq`.
        seq: u64,
    },
}

/// Everything one transaction writes, and the leases it requires.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UnitOfWork {
    /// Leases the committer must still hold; checked first.
    pub fences: Vec<Fence>,
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
    /// Requires the committer to still hold a lease (see [`Fence`]).
    pub fn fenced(mut self, fence: Fence) -> Self {
        self.fences.push(fence);
        self
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
        kind: WorkKind,
        key: impl Into<String>,
        not_before: Timestamp,
    ) -> Self {
        self.enqueue.push(Enqueue { kind, key: key.into(), not_before });
        self
    }
    /// Whether it writes nothing and checks no lease.
    pub fn is_empty(&self) -> bool {
        self.fences.is_empty()
            && self.writes.is_empty()
            && self.events.is_empty()
            && self.enqueue.is_empty()
    }
}

/// What a commit did: applied, with what it assigned, or nothing because it was a
/// create's replay.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Committed {
    /// The `seq` of each event, in the order given (none when `replayed`).
    pub event_seqs: Vec<u64>,
    /// Set when nothing was applied because the unit of work stored a create's
    /// `requestId` (`Write::PutIdempotency`) that a request with the same body stored
    /// first: that request's record, whose response answers this one too (SPEC §2).
    pub replayed: Option<Box<IdempotencyRecord>>,
}
