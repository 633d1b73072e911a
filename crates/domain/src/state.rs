//! State machines of substrates, clusters, node pools and load balancers (SPEC §6–§11).
//!
//! Invariant: [`ResourceState::transition`] and [`NodePoolState::transition`] are the only
//! way code should change a stored state; they refuse illegal moves, and `deleted` is
//! terminal.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The states of substrates, clusters and load balancers.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ResourceState {
    /// Recorded; nothing made yet.
    Pending,
    /// Being made at the provider.
    Provisioning,
    /// Converged.
    Ready,
    /// A change or upgrade is converging.
    Updating,
    /// Something to fix (see the message); retried with backoff.
    Error,
    /// Being torn down.
    Deleting,
    /// Gone (terminal).
    Deleted,
}

/// The states of node pools.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum NodePoolState {
    /// Recorded; not yet at the provider.
    Pending,
    /// Converged.
    Ready,
    /// A resize is converging.
    Updating,
    /// Being removed.
    Deleting,
    /// Gone (terminal).
    Deleted,
    /// Refused or failing (see the message).
    Error,
}

/// A refused state change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("illegal state transition from {from} to {to}")]
pub struct IllegalTransition {
    /// The current state.
    pub from: String,
    /// The requested state.
    pub to: String,
}

impl ResourceState {
    /// Every state, for exhaustive tests.
    pub const ALL: [ResourceState; 7] = [
        ResourceState::Pending,
        ResourceState::Provisioning,
        ResourceState::Ready,
        ResourceState::Updating,
        ResourceState::Error,
        ResourceState::Deleting,
        ResourceState::Deleted,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceState::Pending => "pending",
            ResourceState::Provisioning => "provisioning",
            ResourceState::Ready => "ready",
            ResourceState::Updating => "updating",
            ResourceState::Error => "error",
            ResourceState::Deleting => "deleting",
            ResourceState::Deleted => "deleted",
        }
    }

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Live states are all but `deleting` and `deleted`.
    pub fn is_live(self) -> bool {
        !matches!(self, ResourceState::Deleting | ResourceState::Deleted)
    }

    /// Whether moving to `to` is allowed. Staying put is always allowed except out of
    /// nothing: it is how an idempotent reconcile re-reports its state.
    pub fn can_transition(self, to: ResourceState) -> bool {
        use ResourceState::*;
        if self == to {
            return true;
        }
        match (self, to) {
            (Deleted, _) => false,
            (Pending, Provisioning) | (Provisioning, Ready) => true,
            (Ready, Updating) | (Updating, Ready) => true,
            // An adopted cluster already runs: pending may go straight to ready, and a
            // policy change caught while provisioning converges as part of it.
            (Pending, Ready) | (Pending, Updating) | (Provisioning, Updating) => true,
            // Any live state may fail; error leaves when its cause is gone.
            (s, Error) if s.is_live() => true,
            (Error, Pending | Provisioning | Ready | Updating) => true,
            // Teardown starts from anywhere live and may fail and be retried.
            (s, Deleting) if s.is_live() => true,
            (Deleting, Error) => true,
            (Deleting, Deleted) => true,
            _ => false,
        }
    }

    /// The move to `to`, or why it is illegal.
    pub fn transition(self, to: ResourceState) -> Result<ResourceState, IllegalTransition> {
        if self.can_transition(to) {
            Ok(to)
        } else {
            Err(IllegalTransition { from: self.to_string(), to: to.to_string() })
        }
    }
}

impl fmt::Display for ResourceState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl NodePoolState {
    /// Every state, for exhaustive tests.
    pub const ALL: [NodePoolState; 6] = [
        NodePoolState::Pending,
        NodePoolState::Ready,
        NodePoolState::Updating,
        NodePoolState::Deleting,
        NodePoolState::Deleted,
        NodePoolState::Error,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            NodePoolState::Pending => "pending",
            NodePoolState::Ready => "ready",
            NodePoolState::Updating => "updating",
            NodePoolState::Deleting => "deleting",
            NodePoolState::Deleted => "deleted",
            NodePoolState::Error => "error",
        }
    }

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Whether moving to `to` is allowed.
    pub fn can_transition(self, to: NodePoolState) -> bool {
        use NodePoolState::*;
        if self == to {
            return true;
        }
        match (self, to) {
            (Deleted, _) => false,
            (Pending, Ready) | (Ready, Updating) | (Updating, Ready) | (Pending, Updating) => true,
            (Pending | Ready | Updating, Error) => true,
            (Error, Pending | Ready | Updating) => true,
            (Pending | Ready | Updating | Error, Deleting) => true,
            (Deleting, Error) | (Deleting, Deleted) => true,
            _ => false,
        }
    }

    /// The move to `to`, or why it is illegal.
    pub fn transition(self, to: NodePoolState) -> Result<NodePoolState, IllegalTransition> {
        if self.can_transition(to) {
            Ok(to)
        } else {
            Err(IllegalTransition { from: self.to_string(), to: to.to_string() })
        }
    }
}

impl fmt::Display for NodePoolState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_documented_path_is_legal() {
        use ResourceState::*;
        let path = [Pending, Provisioning, Ready, Updating, Ready, Error, Ready, Deleting, Deleted];
        for w in path.windows(2) {
            assert!(w[0].can_transition(w[1]), "{} -> {}", w[0], w[1]);
        }
        assert!(Deleted.transition(Pending).is_err());
        assert!(Deleted.transition(Error).is_err());
        assert!(Ready.transition(Pending).is_err());
        assert!(Deleting.transition(Ready).is_err());
        assert_eq!(ResourceState::parse("updating"), Some(Updating));
        assert_eq!(serde_json::to_string(&Provisioning).unwrap(), "\"provisioning\"");
    }

    #[test]
    fn node_pools() {
        use NodePoolState::*;
        assert!(Pending.can_transition(Ready));
        assert!(Error.can_transition(Deleting));
        assert!(!Deleted.can_transition(Pending));
        assert!(!Deleting.can_transition(Ready));
    }

    proptest! {
        #[test]
        fn sequences_never_leave_deleted(moves in proptest::collection::vec(0usize..7, 1..40)) {
            let mut s = ResourceState::Pending;
            let mut seen_deleted = false;
            for m in moves {
                if let Ok(next) = s.transition(ResourceState::ALL[m]) { s = next; }
                if seen_deleted { prop_assert_eq!(s, ResourceState::Deleted); }
                seen_deleted |= s == ResourceState::Deleted;
            }
        }

        #[test]
        fn node_pool_sequences_never_leave_deleted(moves in proptest::collection::vec(0usize..6, 1..40)) {
            let mut s = NodePoolState::Pending;
            let mut seen_deleted = false;
            for m in moves {
                if let Ok(next) = s.transition(NodePoolState::ALL[m]) { s = next; }
                if seen_deleted { prop_assert_eq!(s, NodePoolState::Deleted); }
                seen_deleted |= s == NodePoolState::Deleted;
            }
        }
    }
}
