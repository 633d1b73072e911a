//! What the simulated bcd agents did, per node: the record the simulated bcd writes
//! after each join call and the clusters' controllers read (a bcd pod is Ready once its
//! agent joined), kept across a restart.
//!
//! Invariants: an outcome never holds the join token, only its fingerprint; **lock
//! order** — a cluster's objects (`KubeStore`) are locked before the joins, never while
//! the joins are held (the clusters' controllers read the joins inside a write of the
//! objects), checked on every lock of the objects ([`joins_held_here`]).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::sync::{Mutex, MutexGuard};

use bc_domain::NodeId;

/// What one node's simulated bcd did so far.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct JoinOutcome {
    /// The DaemonSet (`namespace/name`) whose pod this is.
    pub daemonset: String,
    /// HTTP status of the last join call (`None`: none answered yet).
    pub status: Option<u16>,
    /// `nodeId` from the last successful answer.
    pub node_id: Option<NodeId>,
    /// Join calls made.
    pub attempts: u32,
    /// Whether the last call succeeded (2xx) with the current token.
    pub joined: bool,
    /// Why the last round did not join: `unreachable`, a missing Secret, a transport
    /// error, the server's answer…
    pub last_error: Option<String>,
    /// Fingerprint of the token the node joined with (never the token itself).
    pub(crate) token_fingerprint: Option<u64>,
}

/// What the simulated agents did, per (cluster id, node name).
#[derive(Debug, Default)]
pub struct Agents {
    joins: Mutex<BTreeMap<(String, String), JoinOutcome>>,
}

thread_local! {
    /// How many join guards this thread holds.
    static JOINS_HELD: Cell<u32> = const { Cell::new(0) };
}

/// Whether this thread holds the joins now: then locking a cluster's objects would take
/// the two locks in the order that deadlocks against the clusters' controllers (c6e1c52).
pub(crate) fn joins_held_here() -> bool {
    JOINS_HELD.with(|h| h.get() > 0)
}

/// The joins, locked, counted as held by this thread until dropped.
pub(crate) struct JoinsGuard<'a> {
    guard: MutexGuard<'a, BTreeMap<(String, String), JoinOutcome>>,
}

impl Deref for JoinsGuard<'_> {
    type Target = BTreeMap<(String, String), JoinOutcome>;
    fn deref(&self) -> &Self::Target {
        &self.guard
    }
}

impl DerefMut for JoinsGuard<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.guard
    }
}

impl Drop for JoinsGuard<'_> {
    fn drop(&mut self) {
        JOINS_HELD.with(|h| h.set(h.get().saturating_sub(1)));
    }
}

impl Agents {
    /// The outcomes, locked (the simulated bcd writes them).
    pub(crate) fn joins_mut(&self) -> JoinsGuard<'_> {
        let guard = self.joins.lock().unwrap_or_else(|e| e.into_inner());
        JOINS_HELD.with(|h| h.set(h.get() + 1));
        JoinsGuard { guard }
    }

    /// What each simulated bcd did, per (cluster id, node name).
    pub fn join_outcomes(&self) -> BTreeMap<(String, String), JoinOutcome> {
        self.joins_mut().clone()
    }

    /// Whether the bcd on `node` of `cluster` has joined with the current token.
    pub fn joined(&self, cluster: &str, node: &str) -> bool {
        self.joins_mut().get(&(cluster.to_owned(), node.to_owned())).is_some_and(|o| o.joined)
    }

    /// Every outcome, to keep across a restart (crate::persist): a node that joined does
    /// not join again until its Secret's token changes.
    pub(crate) fn saved(&self) -> Vec<(String, String, JoinOutcome)> {
        self.joins_mut().iter().map(|((c, n), o)| (c.clone(), n.clone(), o.clone())).collect()
    }

    /// Takes back what [`Self::saved`] kept.
    pub(crate) fn restore(&self, saved: Vec<(String, String, JoinOutcome)>) {
        self.joins_mut().extend(saved.into_iter().map(|(c, n, o)| ((c, n), o)));
    }

    /// A fingerprint of what the agents of `cluster` have reached (which joined, why the
    /// others did not), to notice a change without comparing outcomes.
    pub fn fingerprint(&self, cluster: &str) -> u64 {
        let joins = self.joins_mut();
        let mut text = String::new();
        // The cluster's outcomes only (keys sort by cluster first): asked on every request
        // to a cluster's API, so it must not walk every cluster's nodes.
        let from = (cluster.to_owned(), String::new());
        for ((_, node), o) in joins.range(from..).take_while(|((c, _), _)| c == cluster) {
            text.push_str(&format!("{node}:{}:{:?};", o.joined, o.last_error));
        }
        crate::fnv1a(&text)
    }
}
