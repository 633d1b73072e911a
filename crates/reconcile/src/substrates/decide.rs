//! The substrate reconciler's pure decisions: whether a pool's substrate is to be
//! converged or torn down, the records it makes (cluster rows), the state and message
//! a run ends in, and the row it writes — all from (desired, observed, now), without
//! I/O.
//!
//! Invariants: the state only moves as `ResourceState::transition` allows (a refused
//! move keeps the current state rather than inventing one); `provisioning` is shown
//! until the substrate was first `ready` (its `observed_generation` is then the pool
//! generation it converged), `updating` after; `ready` carries the join message (SPEC
//! §6: the 15-minute wait) and nothing else; no message carries a secret.

use std::collections::BTreeSet;
use std::time::Duration;

use bc_domain::model::{
    ClusterMode, ClusterOrigin, KubernetesCluster, Node, ObservedStatus, Pool, PoolState,
    Substrate, UpgradeWait,
};
use bc_domain::policy::{ClusterPolicy, CreateClusterPolicy, PoolPolicy, SubstratePolicy};
use bc_domain::ports::ProviderCluster;
use bc_domain::recipes::{NewCluster, new_cluster_row};
use bc_domain::rules::join::JoinReport;
use bc_domain::{
    ClusterId, ObjectName, PoolId, ResourceState, SubstrateNaming, Timestamp, substrate_base_name,
};

use crate::shared::same_cause;

/// What a pool wants of its substrate now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// The pool is archived, gone, or its policy has no substrate: tear it down.
    Teardown,
    /// Converge to this policy.
    Converge(&'a PoolPolicy, &'a SubstratePolicy),
}

/// What `pool` (if it still exists) wants of its substrate.
pub fn target(pool: Option<&Pool>) -> Target<'_> {
    match pool {
        Some(p) if p.state == PoolState::Active => match &p.policy.substrate {
            Some(s) => Target::Converge(&p.policy, s),
            None => Target::Teardown,
        },
        _ => Target::Teardown,
    }
}

/// Where a run got to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Everything is in place.
    Ready,
    /// Something is being made or changed; look again after `after`.
    Converging {
        /// What it waits for.
        message: String,
        /// When to look again.
        after: Duration,
    },
    /// Something to fix (the message says what); looked at again with backoff.
    Error {
        /// What is wrong and how to resolve it.
        message: String,
    },
    /// The provider refused a call (a 4xx that retrying cannot fix): shown as `error`,
    /// and not asked again until the pool's policy changes (SPEC §6).
    Refused {
        /// The refusal, with the provider's words and how to resolve it.
        message: String,
    },
}

impl Progress {
    /// Converging with `message`, looking again after `after`.
    pub fn converging(message: impl Into<String>, after: Duration) -> Self {
        Progress::Converging { message: message.into(), after }
    }

    /// An error with `message`.
    pub fn error(message: impl Into<String>) -> Self {
        Progress::Error { message: message.into() }
    }

    /// A refusal with `message`.
    pub fn refused(message: impl Into<String>) -> Self {
        Progress::Refused { message: message.into() }
    }

    /// What it waits for or what is wrong (empty when ready).
    pub fn message(&self) -> &str {
        match self {
            Progress::Ready => "",
            Progress::Converging { message, .. }
            | Progress::Error { message }
            | Progress::Refused { message } => message,
        }
    }
}

/// The message of the refusal that stands at `pool_generation`, if one does: the
/// substrate is in `error` from a refusal recorded at that generation, so the run asks
/// the provider nothing (the call would be refused again) until the policy changes.
pub fn standing_refusal(sub: &Substrate, pool_generation: u64) -> Option<&str> {
    (sub.state == ResourceState::Error && sub.refused_generation == Some(pool_generation))
        .then(|| sub.message.as_deref().unwrap_or_default())
}

/// The state and message a converge run ends in, and the pool generation it counts as
/// converged.
pub fn converged_state(
    current: &Substrate,
    progress: &Progress,
    join: Option<&JoinReport>,
    pool_generation: u64,
) -> (ResourceState, Option<String>, u64) {
    let (state, message, generation) = match progress {
        Progress::Ready => {
            (ResourceState::Ready, join.and_then(|j| j.message.clone()), pool_generation)
        }
        Progress::Converging { message, .. } => {
            let state = if current.observed_generation == 0 {
                ResourceState::Provisioning
            } else {
                ResourceState::Updating
            };
            (state, Some(message.clone()), current.observed_generation)
        }
        Progress::Error { message } | Progress::Refused { message } => {
            (ResourceState::Error, Some(message.clone()), current.observed_generation)
        }
    };
    let state = if current.state.can_transition(state) { state } else { current.state };
    (state, message, generation)
}

/// The substrate row after a run: `state`, `message`, and what the run observed (`join`
/// when the cluster's Nodes were listed, else the previous counts), the drain wait, the
/// converged generation.
pub fn next_row(
    current: &Substrate,
    state: ResourceState,
    message: Option<String>,
    join: Option<&JoinReport>,
    upgrade: Option<UpgradeWait>,
    observed_generation: u64,
    now: Timestamp,
) -> Substrate {
    let mut next = current.clone();
    next.state = state;
    // The same cause answered again (a new request id, say) is not a change.
    if state != current.state || !same_cause(message.as_deref(), current.message.as_deref()) {
        next.message = message;
    }
    if let Some(j) = join {
        next.nodes_listed = j.nodes_listed;
        next.nodes_joined = j.nodes_joined;
        next.waiting_to_join = j.waiting_to_join;
    }
    if state == ResourceState::Deleted {
        next.waiting_to_join = None;
    }
    next.upgrade = upgrade;
    next.observed_generation = observed_generation;
    if next != *current {
        next.updated_at = now;
    }
    next
}

/// The name of the cluster a create-mode substrate makes: `cluster.create.name`, else
/// `bc-<pool>` (`bc-<d>` where the provider's names are short, see [`SubstrateNaming`]).
pub fn cluster_name(
    pool: &PoolId,
    naming: SubstrateNaming,
    create: &CreateClusterPolicy,
) -> Result<ObjectName, String> {
    match &create.name {
        None => Ok(naming.cluster_name(pool)),
        Some(n) => ObjectName::parse(n).map_err(|e| {
            format!("policy.substrate.cluster.create.name {n:?} is not a valid name: {e}")
        }),
    }
}

/// The `kubernetesClusters` row a create-mode substrate records before it asks the
/// provider (origin `created`, the pool in `substratePoolIds`).
pub fn created_cluster_row(
    sub: &Substrate,
    create: &CreateClusterPolicy,
    name: ObjectName,
    id: ClusterId,
    now: Timestamp,
) -> KubernetesCluster {
    let new = NewCluster {
        cluster_id: id,
        tenant_id: sub.tenant_id.clone(),
        provider_account_id: sub.provider_account_id.clone(),
        name,
        region: create.region.clone(),
        version: Some(create.version.clone()),
        high_availability: create.high_availability,
        mode: ClusterMode::Standard,
    };
    KubernetesCluster { substrate_pool_ids: vec![sub.pool_id.clone()], ..new_cluster_row(new, now) }
}

/// The row an adopted provider cluster gets (origin `adopted`), named after it when
/// its name is a valid name, else `adopted-<its id>`; `fallback` picks the second form
/// (the first was taken).
pub fn adopted_cluster_row(
    sub: &Substrate,
    observed: &ProviderCluster,
    id: ClusterId,
    fallback: bool,
    now: Timestamp,
) -> KubernetesCluster {
    let derived = || {
        let tail: String = observed
            .id
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .map(|c| c.to_ascii_lowercase())
            .take(40)
            .collect();
        ObjectName::parse(&format!("adopted-{tail}"))
            .unwrap_or_else(|_| substrate_base_name(&sub.pool_id))
    };
    let name = match ObjectName::parse(&observed.name) {
        Ok(n) if !fallback => n,
        _ => derived(),
    };
    KubernetesCluster {
        cluster_id: id,
        tenant_id: sub.tenant_id.clone(),
        provider_account_id: sub.provider_account_id.clone(),
        name,
        region: observed.region.clone(),
        desired_version: None,
        high_availability: observed.high_availability,
        mode: ClusterMode::Standard,
        origin: ClusterOrigin::Adopted,
        substrate_pool_ids: vec![sub.pool_id.clone()],
        delete_requested: false,
        generation: 1,
        created_at: now,
        provider_cluster_id: Some(observed.id.clone()),
        version: Some(observed.version.clone()),
        nodes: None,
        status: ObservedStatus::pending(now),
    }
}

/// Whether a policy's cluster part matches the substrate's recorded mode (the API
/// refuses a switch; a substrate that finds one says so rather than guess).
pub fn mode_matches(sub: &Substrate, policy: &SubstratePolicy) -> bool {
    matches!(
        (&policy.cluster, sub.mode),
        (ClusterPolicy::Create(_), bc_domain::model::SubstrateMode::Create)
            | (ClusterPolicy::Adopt(_), bc_domain::model::SubstrateMode::Adopt)
    )
}

/// How long a joined node the cluster no longer lists keeps its credential after its last
/// sign of life (its join or latest heartbeat; bcd heartbeats every 30 s): long enough that
/// a Node briefly missing from a listing (re-registered by its kubelet, listed mid-way
/// through a replacement) costs nothing, short enough that the nodes an autoscaler removes
/// do not pile up with valid credentials.
pub const UNLISTED_NODE_GRACE: Duration = Duration::from_secs(600);

/// The joined nodes whose credentials end at `now`: those the cluster does not list
/// (`listed`: the Node names it lists with the pool's label) that have shown no sign of
/// life for `grace`. A node still heartbeating keeps its credential, listed or not (its
/// bcd runs, so the node is there); one that joins again after its end is live again.
pub fn nodes_to_end<'a>(
    joined: &'a [Node],
    listed: &BTreeSet<&str>,
    now: Timestamp,
    grace: Duration,
) -> Vec<&'a Node> {
    let grace = time::Duration::try_from(grace).unwrap_or(time::Duration::MAX);
    joined
        .iter()
        .filter(|n| !listed.contains(n.node_name.as_str()))
        .filter(|n| {
            let last_sign = n.last_heartbeat_at.map_or(n.joined_at, |h| h.max(n.joined_at));
            now - last_sign >= grace
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bc_domain::model::{SubstrateMode, WaitingToJoin};
    use bc_domain::{NodeId, ProviderAccountId, TenantId};

    fn node(name: &str, joined_s: i64, heartbeat_s: Option<i64>) -> Node {
        let at = |s: i64| Timestamp::from_unix_ms(1_800_000_000_000 + s * 1000);
        Node {
            node_id: NodeId::generate(1, u128::from(name.len() as u64)),
            pool_id: PoolId::parse("pool_01hq3k5v9x8y7z6w5v4t3s2r1q").unwrap(),
            node_name: name.into(),
            provider_node_id: None,
            bcd_version: "test".into(),
            credential_hash: format!("hash-{name}"),
            joined_at: at(joined_s),
            last_heartbeat_at: heartbeat_s.map(at),
        }
    }

    #[test]
    fn an_unlisted_node_ends_once_silent_for_the_grace_and_a_listed_one_never() {
        let at = |s: i64| Timestamp::from_unix_ms(1_800_000_000_000 + s * 1000);
        let grace = Duration::from_secs(600);
        let joined = vec![
            node("kept", 0, None),
            node("gone-silent", 0, Some(100)),
            node("gone-beating", 0, Some(1_000)),
            node("gone-new", 900, None),
        ];
        let listed: BTreeSet<&str> = ["kept"].into_iter().collect();
        let names = |now| -> Vec<&str> {
            nodes_to_end(&joined, &listed, now, grace)
                .iter()
                .map(|n| n.node_name.as_str())
                .collect()
        };
        // Within the grace of every sign of life: nothing ends.
        assert!(names(at(650)).is_empty());
        // 600 s after its last heartbeat: the silent one ends; the one still heartbeating,
        // the one that joined late and the listed one (silent for ever) stay.
        assert_eq!(names(at(700)), ["gone-silent"]);
        assert_eq!(names(at(1_500)), ["gone-silent", "gone-new"]);
        assert_eq!(names(at(1_600)), ["gone-silent", "gone-beating", "gone-new"]);
        assert_eq!(names(at(1_000_000)), ["gone-silent", "gone-beating", "gone-new"]);
        // A node listed again is never ended, however long silent.
        let all: BTreeSet<&str> = joined.iter().map(|n| n.node_name.as_str()).collect();
        assert!(nodes_to_end(&joined, &all, at(1_000_000), grace).is_empty());
    }

    fn sub(state: ResourceState, observed_generation: u64) -> Substrate {
        let t = Timestamp::from_unix_ms(1_800_000_000_000);
        Substrate {
            pool_id: PoolId::parse("pool_01hq3k5v9x8y7z6w5v4t3s2r1q").unwrap(),
            tenant_id: TenantId::parse("acme").unwrap(),
            provider_account_id: ProviderAccountId::generate(1, 1),
            mode: SubstrateMode::Create,
            cluster_id: None,
            state,
            message: None,
            nodes_listed: 0,
            nodes_joined: 0,
            waiting_to_join: None,
            upgrade: None,
            observed_generation,
            refused_generation: None,
            created_at: t,
            updated_at: t,
        }
    }

    #[test]
    fn converging_is_provisioning_until_first_ready_then_updating() {
        let p = Progress::converging("making", Duration::from_secs(1));
        assert_eq!(
            converged_state(&sub(ResourceState::Pending, 0), &p, None, 3).0,
            ResourceState::Provisioning
        );
        assert_eq!(
            converged_state(&sub(ResourceState::Error, 0), &p, None, 3).0,
            ResourceState::Provisioning
        );
        let (s, m, g) = converged_state(&sub(ResourceState::Ready, 2), &p, None, 3);
        assert_eq!((s, m.as_deref(), g), (ResourceState::Updating, Some("making"), 2));
        let (s, _, g) =
            converged_state(&sub(ResourceState::Updating, 2), &Progress::Ready, None, 3);
        assert_eq!((s, g), (ResourceState::Ready, 3));
        // A deleted substrate never comes back.
        assert_eq!(
            converged_state(&sub(ResourceState::Deleted, 2), &Progress::Ready, None, 3).0,
            ResourceState::Deleted
        );
    }

    #[test]
    fn ready_carries_only_the_join_message_and_errors_keep_the_generation() {
        let join = JoinReport {
            nodes_listed: 2,
            nodes_joined: 1,
            waiting_to_join: Some(WaitingToJoin { nodes: 1, since: Timestamp::EPOCH }),
            message: Some("check bcd".into()),
        };
        let (s, m, _) =
            converged_state(&sub(ResourceState::Ready, 1), &Progress::Ready, Some(&join), 1);
        assert_eq!((s, m.as_deref()), (ResourceState::Ready, Some("check bcd")));
        let (s, m, g) = converged_state(
            &sub(ResourceState::Ready, 1),
            &Progress::error("fix it"),
            Some(&join),
            2,
        );
        assert_eq!((s, m.as_deref(), g), (ResourceState::Error, Some("fix it"), 1));
        let row = next_row(
            &sub(ResourceState::Ready, 1),
            s,
            m,
            Some(&join),
            None,
            g,
            Timestamp::from_unix_ms(5),
        );
        assert_eq!(
            (row.nodes_listed, row.nodes_joined, row.waiting_to_join),
            (2, 1, join.waiting_to_join)
        );
    }

    #[test]
    fn archive_or_a_policy_without_substrate_tears_down() {
        let t = Timestamp::from_unix_ms(1);
        let policy: PoolPolicy = serde_json::from_value(serde_json::json!({
            "substrate": {"kind": "kubernetes", "account": "acct_0000000001000000000000001a",
                "cluster": {"create": {"region": "nyc1"}}}, "flavors": []}))
        .unwrap();
        let mut pool = Pool {
            pool_id: PoolId::parse("pool_01hq3k5v9x8y7z6w5v4t3s2r1q").unwrap(),
            tenant_id: TenantId::parse("acme").unwrap(),
            name: ObjectName::parse("web").unwrap(),
            policy,
            state: PoolState::Active,
            generation: 1,
            created_at: t,
            updated_at: t,
            archived_at: None,
        };
        assert!(matches!(target(Some(&pool)), Target::Converge(..)));
        pool.state = PoolState::Archived;
        assert_eq!(target(Some(&pool)), Target::Teardown);
        pool.state = PoolState::Active;
        pool.policy.substrate = None;
        assert_eq!(target(Some(&pool)), Target::Teardown);
        assert_eq!(target(None), Target::Teardown);
    }

    #[test]
    fn an_unchanged_row_keeps_its_time() {
        let s = sub(ResourceState::Ready, 1);
        let same = next_row(&s, s.state, None, None, None, 1, Timestamp::from_unix_ms(9));
        assert_eq!(same, s);
    }
}
