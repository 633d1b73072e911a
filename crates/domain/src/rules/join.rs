//! Join accounting of a substrate (SPEC §6): `nodesListed`, `nodesJoined`,
//! `waitingToJoin {nodes, since}` and, after [`WAIT_MESSAGE_AFTER`] of waiting, the
//! message saying what to check; and when a substrate's nodes may no longer join or
//! heartbeat ([`teardown_begun`], SPEC §9).
//!
//! Invariant: only Nodes the cluster lists now count — a joined node that is no longer
//! listed is neither listed nor joined; `since` never moves backwards while the wait
//! lasts and never lies in the future; the message never carries the join token or any
//! credential (it names only node names and well-known object names).

use std::collections::BTreeSet;

use time::Duration;

use crate::model::{Pool, PoolState, Substrate, WaitingToJoin};
use crate::name::{BCD_NAME, JOIN_SECRET_NAME, LABEL_SUBSTRATE_POOL};
use crate::state::ResourceState;
use crate::time::Timestamp;

/// How long Nodes may wait to join before the substrate's message says what to check.
pub const WAIT_MESSAGE_AFTER: Duration = Duration::minutes(15);

/// How many waiting node names a message names (the rest are counted).
pub const NODES_NAMED: usize = 3;

/// Whether a pool's substrate is being torn down, or is gone (SPEC §9: node credentials
/// end with their substrate): the pool is archived, its policy has no substrate any more,
/// or the substrate's row says `deleting` or `deleted`. From that moment no node joins
/// the pool and no node credential of it authenticates, though the reconciler revokes the
/// join token only at the end of the teardown.
pub fn teardown_begun(pool: &Pool, substrate: Option<&Substrate>) -> bool {
    pool.state == PoolState::Archived
        || pool.policy.substrate.is_none()
        || substrate
            .is_some_and(|s| matches!(s.state, ResourceState::Deleting | ResourceState::Deleted))
}

/// The join side of a substrate's report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinReport {
    /// Distinct Nodes the cluster lists with the pool label.
    pub nodes_listed: u32,
    /// Of them, the ones whose bcd joined.
    pub nodes_joined: u32,
    /// Present while some listed Node lacks a joined bcd.
    pub waiting_to_join: Option<WaitingToJoin>,
    /// What to check, once the wait has lasted [`WAIT_MESSAGE_AFTER`].
    pub message: Option<String>,
}

/// The join report from what the cluster lists now (`listed`: node names listed with the
/// pool label; duplicates count once), the node names whose bcd joined (`joined`), the
/// previous report's wait, and when a node of the pool last joined.
///
/// `since` is when the wait began — kept from `previous` while nodes still wait, `now`
/// when a new wait begins — or, if later, `last_join_at` (a join shows the path works,
/// so the clock restarts; SPEC: "since when none has joined"). A `last_join_at` after
/// `now` (clock skew between replicas) counts as `now`. The message appears when
/// `now - since >= WAIT_MESSAGE_AFTER`: at exactly 15 minutes, 15 minutes have passed.
pub fn waiting_to_join(
    listed: &[String],
    joined: &BTreeSet<String>,
    previous: Option<WaitingToJoin>,
    last_join_at: Option<Timestamp>,
    now: Timestamp,
) -> JoinReport {
    let listed: BTreeSet<&str> = listed.iter().map(String::as_str).collect();
    let waiting: Vec<&str> = listed.iter().copied().filter(|n| !joined.contains(*n)).collect();
    let nodes_listed = count(listed.len());
    let nodes_joined = count(listed.len() - waiting.len());
    if waiting.is_empty() {
        return JoinReport { nodes_listed, nodes_joined, waiting_to_join: None, message: None };
    }
    let began = previous.map_or(now, |p| p.since.min(now));
    let since = match last_join_at {
        Some(j) => began.max(j.min(now)),
        None => began,
    };
    let wait = WaitingToJoin { nodes: count(waiting.len()), since };
    let message = (now - since >= WAIT_MESSAGE_AFTER).then(|| wait_message(&waiting, since, now));
    JoinReport { nodes_listed, nodes_joined, waiting_to_join: Some(wait), message }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// What to check when Nodes have waited too long: the bcd pods on those nodes, their
/// reach to the server's public URL, and the join Secret.
fn wait_message(waiting: &[&str], since: Timestamp, now: Timestamp) -> String {
    let minutes = (now - since).whole_minutes();
    let mut named = waiting.iter().take(NODES_NAMED).copied().collect::<Vec<_>>().join(", ");
    if waiting.len() > NODES_NAMED {
        named.push_str(&format!(" and {} more", waiting.len() - NODES_NAMED));
    }
    let nodes = if waiting.len() == 1 { "node" } else { "nodes" };
    format!(
        "{n} {nodes} listed with the label {LABEL_SUBSTRATE_POOL} have had no joined bcd for {minutes} minutes ({named}): \
         check that the pods of the {BCD_NAME} DaemonSet in the pool's namespace are running on those nodes, \
         that they can reach the server's public URL, and that the join Secret {JOIN_SECRET_NAME} is present in that namespace",
        n = waiting.len(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const T0: i64 = 1_798_000_000_000;

    fn at(minutes: i64, ms: i64) -> Timestamp {
        Timestamp::from_unix_ms(T0 + minutes * 60_000 + ms)
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn teardown_begins_with_archive_substrate_removal_or_a_deleting_row() {
        let policy: crate::policy::PoolPolicy = serde_json::from_value(serde_json::json!({
            "substrate": { "kind": "kubernetes", "account": "acct_01jq3k5v9x8y7z6w5v4t3s2r1a",
                           "cluster": { "create": { "region": "nyc1" } } },
            "flavors": [{ "name": "cpu", "size": "s-1vcpu-2gb", "count": 1 }]
        }))
        .unwrap();
        let pool = Pool {
            pool_id: "pool_01jq3k5v9x8y7z6w5v4t3s2r1q".parse().unwrap(),
            tenant_id: "acme".parse().unwrap(),
            name: "web".parse().unwrap(),
            policy: policy.clone(),
            state: PoolState::Active,
            generation: 1,
            created_at: at(0, 0),
            updated_at: at(0, 0),
            archived_at: None,
        };
        let substrate = Substrate::pending(
            pool.pool_id.clone(),
            pool.tenant_id.clone(),
            "acct_01jq3k5v9x8y7z6w5v4t3s2r1a".parse().unwrap(),
            policy.substrate.as_ref().unwrap(),
            at(0, 0),
        );
        assert!(!teardown_begun(&pool, Some(&substrate)));
        assert!(!teardown_begun(&pool, None), "recorded, not yet observed");
        let archived = Pool { state: PoolState::Archived, ..pool.clone() };
        assert!(teardown_begun(&archived, Some(&substrate)));
        let removed = Pool { policy: Default::default(), ..pool.clone() };
        assert!(teardown_begun(&removed, Some(&substrate)));
        for state in [ResourceState::Deleting, ResourceState::Deleted] {
            let row = Substrate { state, ..substrate.clone() };
            assert!(teardown_begun(&pool, Some(&row)), "{state:?}");
        }
        let error = Substrate { state: ResourceState::Error, ..substrate };
        assert!(!teardown_begun(&pool, Some(&error)), "an error is not a teardown");
    }

    #[test]
    fn all_joined_means_no_wait() {
        let r = waiting_to_join(
            &names(&["a", "b"]),
            &set(&["a", "b", "gone"]),
            Some(WaitingToJoin { nodes: 1, since: at(0, 0) }),
            None,
            at(30, 0),
        );
        assert_eq!(
            r,
            JoinReport { nodes_listed: 2, nodes_joined: 2, waiting_to_join: None, message: None }
        );
    }

    #[test]
    fn nothing_listed_means_no_wait() {
        let r = waiting_to_join(&[], &set(&["a"]), None, None, at(0, 0));
        assert_eq!((r.nodes_listed, r.nodes_joined, r.waiting_to_join), (0, 0, None));
    }

    #[test]
    fn a_new_wait_begins_now() {
        let r = waiting_to_join(&names(&["a", "b", "a"]), &set(&["a"]), None, None, at(3, 0));
        assert_eq!((r.nodes_listed, r.nodes_joined), (2, 1));
        assert_eq!(r.waiting_to_join, Some(WaitingToJoin { nodes: 1, since: at(3, 0) }));
        assert_eq!(r.message, None);
    }

    #[test]
    fn the_wait_keeps_its_start_and_a_later_join_restarts_it() {
        let prev = Some(WaitingToJoin { nodes: 2, since: at(0, 0) });
        let r = waiting_to_join(&names(&["a", "b", "c"]), &set(&["c"]), prev, None, at(10, 0));
        assert_eq!(r.waiting_to_join.unwrap().since, at(0, 0));
        // An older join does not move it back...
        let r = waiting_to_join(&names(&["a", "b"]), &set(&[]), prev, Some(at(-5, 0)), at(10, 0));
        assert_eq!(r.waiting_to_join.unwrap().since, at(0, 0));
        // ...a later one moves it forward...
        let r = waiting_to_join(&names(&["a", "b"]), &set(&[]), prev, Some(at(7, 0)), at(20, 0));
        assert_eq!(r.waiting_to_join.unwrap().since, at(7, 0));
        assert_eq!(r.message, None, "13 minutes since the last join");
        // ...but never past now.
        let r = waiting_to_join(&names(&["a"]), &set(&[]), prev, Some(at(99, 0)), at(20, 0));
        assert_eq!(r.waiting_to_join.unwrap().since, at(20, 0));
    }

    #[test]
    fn the_message_appears_at_exactly_fifteen_minutes() {
        let prev = Some(WaitingToJoin { nodes: 1, since: at(0, 0) });
        let listed = names(&["a"]);
        let before = waiting_to_join(&listed, &set(&[]), prev, None, at(15, -1));
        assert_eq!(before.message, None);
        let at15 = waiting_to_join(&listed, &set(&[]), prev, None, at(15, 0));
        let msg = at15.message.expect("message at 15 minutes");
        assert!(msg.contains("1 node listed"), "{msg}");
        assert!(msg.contains("for 15 minutes (a)"), "{msg}");
        assert!(msg.contains("bcd DaemonSet"), "{msg}");
        assert!(msg.contains("public URL"), "{msg}");
        assert!(msg.contains("bcd-join"), "{msg}");
        assert!(!msg.to_lowercase().contains("token"), "{msg}");
        // The state of the report is otherwise unchanged by the message.
        assert_eq!(at15.waiting_to_join, Some(WaitingToJoin { nodes: 1, since: at(0, 0) }));
    }

    #[test]
    fn the_message_names_up_to_three_nodes() {
        let prev = Some(WaitingToJoin { nodes: 5, since: at(0, 0) });
        let listed = names(&["n5", "n1", "n4", "n2", "n3", "ok"]);
        let r = waiting_to_join(&listed, &set(&["ok"]), prev, None, at(40, 0));
        let msg = r.message.unwrap();
        assert!(msg.contains("5 nodes listed"), "{msg}");
        assert!(msg.contains("(n1, n2, n3 and 2 more)"), "{msg}");
        assert!(!msg.contains("n4"), "{msg}");
        assert!(msg.contains("for 40 minutes"), "{msg}");
    }

    #[test]
    fn joined_nodes_no_longer_listed_do_not_count() {
        let r = waiting_to_join(&names(&["a"]), &set(&["b", "c"]), None, None, at(0, 0));
        assert_eq!((r.nodes_listed, r.nodes_joined), (1, 0));
        assert_eq!(r.waiting_to_join.unwrap().nodes, 1);
    }

    proptest! {
        /// Counts agree with set arithmetic, and since is within [previous.since or now, now].
        #[test]
        fn counts_and_since(
            listed in proptest::collection::vec("[a-e]", 0..8),
            joined in proptest::collection::btree_set("[a-g]", 0..6),
            prev_since in proptest::option::of(-60i64..0),
            last_join in proptest::option::of(-90i64..30),
        ) {
            let listed: Vec<String> = listed;
            let now = at(0, 0);
            let previous = prev_since.map(|m| WaitingToJoin { nodes: 1, since: at(m, 0) });
            let r = waiting_to_join(&listed, &joined, previous, last_join.map(|m| at(m, 0)), now);
            let distinct: BTreeSet<&String> = listed.iter().collect();
            let joined_listed = distinct.iter().filter(|n| joined.contains(**n)).count();
            prop_assert_eq!(r.nodes_listed as usize, distinct.len());
            prop_assert_eq!(r.nodes_joined as usize, joined_listed);
            match r.waiting_to_join {
                None => prop_assert_eq!(joined_listed, distinct.len()),
                Some(w) => {
                    prop_assert_eq!(w.nodes as usize, distinct.len() - joined_listed);
                    prop_assert!(w.since <= now);
                    prop_assert!(w.since >= previous.map_or(now, |p| p.since));
                    if let Some(j) = last_join { prop_assert!(w.since >= at(j, 0).min(now)); }
                    prop_assert_eq!(r.message.is_some(), now - w.since >= WAIT_MESSAGE_AFTER);
                }
            }
        }
    }
}
