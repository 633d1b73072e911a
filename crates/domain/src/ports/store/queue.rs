//! The work queue's and the leases' vocabulary: the reconciler kinds, queue entries, the
//! queue's status, singleton leases and the fence a unit of work can carry.
//!
//! Invariant: a kind is one of the four reconcilers of DESIGN.md, spelled as SPEC names
//! them; the store refuses to decode any other, so a typo can never enqueue work that no
//! reconciler claims.

use std::fmt;

use crate::time::Timestamp;

/// A reconciler kind: what a work item asks to converge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorkKind {
    /// `kubernetes.substrates` (key: a pool id).
    Substrates,
    /// `kubernetes.clusters` (key: a cluster id).
    Clusters,
    /// `kubernetes.nodepools` (key: a node pool id).
    NodePools,
    /// `vps.provider-resources` (key: a load balancer id).
    ProviderResources,
}

impl WorkKind {
    /// Every kind.
    pub const ALL: [WorkKind; 4] = [
        WorkKind::Substrates,
        WorkKind::Clusters,
        WorkKind::NodePools,
        WorkKind::ProviderResources,
    ];

    /// The name, as `bc-reconciler --only KIND` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkKind::Substrates => "kubernetes.substrates",
            WorkKind::Clusters => "kubernetes.clusters",
            WorkKind::NodePools => "kubernetes.nodepools",
            WorkKind::ProviderResources => "vps.provider-resources",
        }
    }

    /// Parses the name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl fmt::Display for WorkKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A work-queue entry to add, deduplicated per `(kind, key)`. Unleased, the entry keeps
/// the earliest due time; while leased, the earliest enqueued time is kept apart and
/// becomes the due time when the holder completes (so a run that schedules its own next
/// run at a later time gets exactly that time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enqueue {
    /// Reconciler kind.
    pub kind: WorkKind,
    /// Object key, e.g. a pool id.
    pub key: String,
    /// Due time.
    pub not_before: Timestamp,
}

/// A claimed or stored work item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkItem {
    /// Reconciler kind.
    pub kind: WorkKind,
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

impl WorkItem {
    /// The fence of this item's lease, for the holder's commits; `None` if unleased.
    pub fn fence(&self) -> Option<Fence> {
        self.lease_owner.as_ref().map(|owner| Fence::work(self.kind, &self.key, owner))
    }
}

/// The queue of one kind at a moment, for status pages and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueStatus {
    /// The kind.
    pub kind: WorkKind,
    /// Entries in all.
    pub depth: u64,
    /// Entries claimable now (due, and not leased or lease expired).
    pub due: u64,
    /// Entries whose last attempt failed (`last_error` set).
    pub failing: u64,
    /// The claimable entry that has been due longest: how far behind the kind is.
    pub oldest_due: Option<WorkItem>,
}

/// The outbox relay's singleton lease (one relay publishes at a time).
pub const LEASE_OUTBOX_RELAY: &str = "outbox-relay";
/// The idempotency purge's singleton lease.
pub const LEASE_IDEMPOTENCY_PURGE: &str = "idempotency-purge";

/// A named singleton lease: a job that must run once per deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// Name, e.g. [`LEASE_OUTBOX_RELAY`].
    pub name: String,
    /// The holder.
    pub owner: String,
    /// Until when it holds unless renewed.
    pub until: Timestamp,
}

/// A lease a unit of work requires its committer to still hold: the commit checks it
/// first, inside its transaction, and fails as a whole with `StoreError::LeaseLost` if
/// `owner` no longer holds it. Holding is by owner alone: a lease is lost only when
/// another replica takes it over (or it is completed, failed, released), and the check
/// locks the lease row, so a takeover cannot slip in before the commit ends. Owners must
/// be unique per replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fence {
    /// The work-queue lease of `(kind, key)`.
    Work {
        /// Kind.
        kind: WorkKind,
        /// Key.
        key: String,
        /// Holder.
        owner: String,
    },
    /// A singleton lease.
    Singleton {
        /// Lease name.
        name: String,
        /// Holder.
        owner: String,
    },
}

impl Fence {
    /// The fence of a work-queue lease (see also [`WorkItem::fence`]).
    pub fn work(kind: WorkKind, key: impl Into<String>, owner: impl Into<String>) -> Self {
        Fence::Work { kind, key: key.into(), owner: owner.into() }
    }

    /// The fence of a singleton lease, e.g. [`LEASE_OUTBOX_RELAY`].
    pub fn singleton(name: impl Into<String>, owner: impl Into<String>) -> Self {
        Fence::Singleton { name: name.into(), owner: owner.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_their_names() {
        for k in WorkKind::ALL {
            assert_eq!(WorkKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(WorkKind::parse("kubernetes.nodePools"), None);
        assert_eq!(WorkKind::NodePools.to_string(), "kubernetes.nodepools");
    }

    #[test]
    fn only_a_leased_item_has_a_fence() {
        let mut w = WorkItem {
            kind: WorkKind::Clusters,
            key: "cluster_x".into(),
            not_before: Timestamp::EPOCH,
            attempts: 0,
            lease_owner: None,
            lease_until: None,
            last_error: None,
        };
        assert_eq!(w.fence(), None);
        w.lease_owner = Some("r1".into());
        assert_eq!(
            w.fence(),
            Some(Fence::Work {
                kind: WorkKind::Clusters,
                key: "cluster_x".into(),
                owner: "r1".into()
            })
        );
    }
}
