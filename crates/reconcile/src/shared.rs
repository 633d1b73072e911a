//! What the Kubernetes reconcilers (substrates, clusters, node pools) share: injected
//! randomness, outbox events, how a provider failure becomes either the object's own
//! recorded error or a retried activation, the waits they requeue with, and the
//! per-process caches that keep steady-state activations from spending provider calls
//! (cluster sessions, available-upgrade checks).
//!
//! Invariants: a provider refusal or refused credentials are the object's own error
//! (recorded, shown, retried on the object's terms); throttling, 5xx and timeouts are
//! never shown as refusals — they are `Err(ReconcileError::Provider)`, which the runtime
//! retries with backoff. Caches only ever save calls: a stale or lost cache entry costs
//! one call, never a wrong decision.

pub mod records;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bc_domain::model::{KubernetesCluster, NewEvent, NodePool, ProviderAccount, subjects};
use bc_domain::ports::{ClusterApi, ClusterSession, KubernetesVersion, ProviderImpl};
use bc_domain::{
    EventId, NodePoolState, ProviderAccountId, ProviderError, ResourceState, TenantId, Timestamp,
};

use crate::reconciler::ReconcileError;

/// A source of random bits (injected, so tests can make runs repeatable; join tokens
/// need a cryptographic source in production: [`OsEntropy`]).
pub trait Entropy: Send + Sync {
    /// 256 random bits.
    fn bytes32(&self) -> [u8; 32];

    /// 128 random bits (event ids).
    fn u128(&self) -> u128 {
        let b = self.bytes32();
        let mut half = [0u8; 16];
        half.copy_from_slice(&b[..16]);
        u128::from_le_bytes(half)
    }
}

/// The operating system's randomness, through `rand`'s thread-local CSPRNG.
#[derive(Debug, Clone, Copy, Default)]
pub struct OsEntropy;

impl Entropy for OsEntropy {
    fn bytes32(&self) -> [u8; 32] {
        rand::random()
    }
}

/// An outbox event of `kind` on `subject`, at `now`, with a fresh id.
pub fn event(
    entropy: &dyn Entropy,
    tenant: &TenantId,
    subject: String,
    kind: &str,
    data: serde_json::Value,
    now: Timestamp,
) -> NewEvent {
    let ms = u64::try_from(now.unix_ms()).unwrap_or(0);
    NewEvent {
        event_id: EventId::generate(ms, entropy.u128()),
        tenant_id: tenant.clone(),
        subject,
        kind: kind.to_owned(),
        time: now,
        data,
    }
}

/// `kubernetes.cluster.<state>` on the cluster's subject, for the states SPEC §8 reports
/// (`ready`, `error`, `deleted`); `None` for the others.
pub fn cluster_event(
    entropy: &dyn Entropy,
    cluster: &KubernetesCluster,
    state: ResourceState,
    message: Option<&str>,
    now: Timestamp,
) -> Option<NewEvent> {
    if !matches!(state, ResourceState::Ready | ResourceState::Error | ResourceState::Deleted) {
        return None;
    }
    let mut data = serde_json::json!({"clusterId": cluster.cluster_id, "name": cluster.name,
        "state": state.as_str()});
    if let Some(m) = message {
        data["message"] = serde_json::json!(m);
    }
    let kind = format!("kubernetes.cluster.{}", state.as_str());
    Some(event(
        entropy,
        &cluster.tenant_id,
        subjects::cluster(&cluster.cluster_id),
        &kind,
        data,
        now,
    ))
}

/// `kubernetes.nodepool.<state>` on its cluster's subject, for `ready`, `error` and
/// `deleted` (SPEC §8); `None` for the other states.
pub fn node_pool_event(entropy: &dyn Entropy, row: &NodePool, now: Timestamp) -> Option<NewEvent> {
    if !matches!(row.state, NodePoolState::Ready | NodePoolState::Error | NodePoolState::Deleted) {
        return None;
    }
    let mut data = serde_json::json!({"clusterId": row.cluster_id, "nodePoolId": row.node_pool_id,
        "name": row.name, "state": row.state.as_str()});
    if let Some(m) = &row.message {
        data["message"] = serde_json::json!(m);
    }
    if let Some(p) = &row.managed_by {
        data["managedBy"] = serde_json::json!(p);
    }
    let kind = format!("kubernetes.nodepool.{}", row.state.as_str());
    Some(event(entropy, &row.tenant_id, subjects::cluster(&row.cluster_id), &kind, data, now))
}

/// Whether two status messages name the same cause: equal once the per-request noise
/// providers put in their answers (DigitalOcean's `(request "ID")`) is taken out, so a
/// refusal answered again is not a new cause (SPEC §6: one event per cause).
pub fn same_cause(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => without_request_ids(a) == without_request_ids(b),
        (a, b) => a == b,
    }
}

fn without_request_ids(message: &str) -> String {
    const OPEN: &str = "(request \"";
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(i) = rest.find(OPEN) {
        let after = &rest[i + OPEN.len()..];
        let Some(j) = after.find("\")") else { break };
        out.push_str(&rest[..i]);
        rest = &after[j + 2..];
    }
    out.push_str(rest);
    out
}

/// The account an object names, when its objects can still be reached at the provider;
/// else why not. A deleted account (SPEC §5: its sealed credentials are erased in the
/// delete's transaction) is never used for a provider call again, whatever object names
/// it, so an object left on it — by a create that raced the delete on a store from before
/// the store re-checked it — is unreachable, and says so naming the account.
pub fn live_account(
    id: &ProviderAccountId,
    account: Option<ProviderAccount>,
) -> Result<ProviderAccount, String> {
    match account {
        Some(a) => match a.unreachable() {
            Some(why) => Err(why),
            None => Ok(a),
        },
        None => Err(format!("provider account {id} does not exist")),
    }
}

/// What a failed provider call means for the object that made it.
pub fn own_error(e: ProviderError) -> Result<String, ReconcileError> {
    match e {
        // A 4xx retrying cannot fix: the object's error, with the provider's words.
        ProviderError::Refused { message } => Ok(message),
        ProviderError::Unauthorized => Ok(
            "the provider refused the account's credentials: update the provider account's token"
                .to_owned(),
        ),
        // Throttling, 5xx, timeouts (and an unexpected 404): retried by the runtime.
        other => Err(ReconcileError::Provider(other)),
    }
}

/// How long to wait before looking again, by what is awaited.
pub mod waits {
    use std::time::Duration;

    /// A cluster being created, upgraded or deleted (minutes at DigitalOcean).
    pub const CLUSTER: Duration = Duration::from_secs(30);
    /// Node pools being created, resized or removed.
    pub const NODE_POOL: Duration = Duration::from_secs(20);
    /// Kubernetes objects just applied, nodes waiting to join, a drain waiting for
    /// bookings to end.
    pub const SHORT: Duration = Duration::from_secs(60);
    /// An object in `error`: the cause is the tenant's to fix (or the provider's to
    /// clear); look again without hammering the provider.
    pub const ERROR: Duration = Duration::from_secs(120);
}

/// How old a shared account listing may be on a steady-state activation.
pub const STEADY_LISTING_MAX_AGE: Duration = Duration::from_secs(300);

/// How long what the provider offers a running version is trusted for one desired
/// version (an upgrade in waiting asks again at most this often).
pub const UPGRADE_CHECK_EVERY: time::Duration = time::Duration::hours(1);

/// How long a cluster's session is kept after its last use: longer than the steady
/// resync (ten minutes, +10 % jitter), so a cluster this process keeps reconciling keeps
/// its client (reconnecting costs GKE a cluster read for the kubeconfig), while one it no
/// longer reconciles — deleted through another replica, its work taken by another — lets
/// its client, connection pool and buffers go.
pub const SESSION_IDLE: time::Duration = time::Duration::minutes(15);

/// How many cluster sessions are kept at most, the least recently used going first: what
/// the runtime holds for kube clients stays bounded (about 29 KiB each, measured by
/// bc-reconcile's `kube_client_memory` example: ~29 MiB at this bound) whatever the
/// number of clusters.
pub const SESSIONS_KEPT: usize = 1024;

/// Connected cluster sessions, one per provider cluster, kept across activations so a
/// steady-state activation mints no kubeconfig and builds no client
/// (`ClusterSession` renews the credentials when they are due or the cluster refuses
/// them).
///
/// Bounded: a session unused for [`SESSION_IDLE`] goes, and at most [`SESSIONS_KEPT`]
/// are kept, so the kube clients held (TLS configuration, connection pool, request
/// buffer and its worker task) follow the clusters in work, not every cluster ever
/// seen. A dropped session costs a reconnect, never a wrong decision. A session is made
/// again when the account's provider instance changed (its credentials were rotated), so
/// none speaks with an account's old credentials.
pub struct Sessions {
    kept: Mutex<Kept>,
    idle: time::Duration,
    capacity: usize,
}

/// A session's key: the provider account and the provider cluster id.
type SessionKey = (String, String);

/// The kept sessions, and the same keys ordered by last use, so the idle and the least
/// recently used are found at the front without a scan (a lookup costs O(log n) however
/// many sessions are kept).
#[derive(Default)]
struct Kept {
    by_cluster: HashMap<SessionKey, KeptSession>,
    by_use: BTreeSet<(Timestamp, SessionKey)>,
}

/// A kept session, the provider instance it was made with, and when it was last used.
struct KeptSession {
    provider: Arc<dyn ProviderImpl>,
    session: Arc<ClusterSession>,
    used: Timestamp,
}

impl Kept {
    fn remove(&mut self, key: &SessionKey) {
        if let Some(k) = self.by_cluster.remove(key) {
            self.by_use.remove(&(k.used, key.clone()));
        }
    }

    /// Drops the sessions idle for `idle` or more at `now`, and those used after `now` (a
    /// clock stepped back: their age is unknown): the oldest from the front of the use
    /// order, the "future" ones from its back.
    fn prune(&mut self, now: Timestamp, idle: time::Duration) {
        while let Some((used, key)) = self.by_use.first().cloned() {
            if used <= now && now - used < idle {
                break;
            }
            self.remove(&key);
        }
        while let Some((used, key)) = self.by_use.last().cloned() {
            if used <= now {
                break;
            }
            self.remove(&key);
        }
    }
}

impl Default for Sessions {
    fn default() -> Self {
        Self::bounded(SESSION_IDLE, SESSIONS_KEPT)
    }
}

impl Sessions {
    /// Sessions kept for `idle` after their last use, at most `capacity` of them.
    pub fn bounded(idle: time::Duration, capacity: usize) -> Self {
        Self { kept: Mutex::new(Kept::default()), idle, capacity: capacity.max(1) }
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The session with provider cluster `cluster_id` of `account`, used at `now`.
    pub fn get(
        &self,
        account: &ProviderAccount,
        provider: Arc<dyn ProviderImpl>,
        api: Arc<dyn ClusterApi>,
        cluster_id: &str,
        now: Timestamp,
    ) -> Arc<ClusterSession> {
        let key = (account.provider_account_id.to_string(), cluster_id.to_owned());
        let mut kept = self.kept();
        kept.prune(now, self.idle);
        let Kept { by_cluster, by_use } = &mut *kept;
        if let Some(k) = by_cluster.get_mut(&key)
            && same_instance(&k.provider, &provider)
        {
            by_use.remove(&(k.used, key.clone()));
            by_use.insert((now, key));
            k.used = now;
            return k.session.clone();
        }
        kept.remove(&key);
        let session = Arc::new(ClusterSession::new(provider.clone(), api, cluster_id));
        kept.by_use.insert((now, key.clone()));
        kept.by_cluster.insert(key, KeptSession { provider, session: session.clone(), used: now });
        while kept.by_cluster.len() > self.capacity {
            let Some((_, oldest)) = kept.by_use.first().cloned() else { break };
            kept.remove(&oldest);
        }
        session
    }

    /// Forgets the session of a cluster (deleted, or its credentials given up).
    pub fn forget(&self, account: &ProviderAccount, cluster_id: &str) {
        let key = (account.provider_account_id.to_string(), cluster_id.to_owned());
        self.kept().remove(&key);
    }

    /// How many sessions are kept.
    pub fn len(&self) -> usize {
        self.kept().by_cluster.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether `a` and `b` are one provider instance (the observer hands out one per account
/// and makes another when the account's sealed credentials change).
fn same_instance(a: &Arc<dyn ProviderImpl>, b: &Arc<dyn ProviderImpl>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

/// What a provider offered: when it was asked, and the offered versions.
type Offer = (Timestamp, Vec<KubernetesVersion>);

/// The versions the provider last offered, per provider account, running version and
/// desired version, with when they were asked. What a cluster may upgrade to depends on
/// the version it runs, not on the cluster, so every cluster of an account running one
/// version toward one desired version shares one check per
/// [`UPGRADE_CHECK_EVERY`] — one call per version per hour, not one per cluster. A new
/// desired version is asked about afresh: the tenant may name a version the provider
/// began offering since the last check.
#[derive(Default)]
pub struct UpgradeChecks {
    by_version: Mutex<HashMap<(String, String, String), Offer>>,
    /// Per provider cluster (or node pool, [`pool_upgrade_key`]): the version an upgrade
    /// was last asked to, and when. Bounded: an entry goes once it no longer says
    /// anything ([`UPGRADE_SETTLE`] after it was asked, or asked at a time after `now`).
    asked: Mutex<HashMap<String, (String, Timestamp)>>,
}

/// How long an upgrade the provider accepted is waited for before it is asked again while
/// the cluster still shows its old version (DigitalOcean may go on answering `running` at
/// the old version for a while after `POST /upgrade`).
pub const UPGRADE_SETTLE: time::Duration = time::Duration::minutes(10);

impl UpgradeChecks {
    /// Records that cluster `cluster_id` was asked to upgrade to `version` at `now`.
    pub fn asked(&self, cluster_id: &str, version: &str, now: Timestamp) {
        let mut map = self.asked.lock().unwrap_or_else(|e| e.into_inner());
        // Clusters that settled or went are never asked about again: what no longer makes
        // an upgrade under way goes, so the map holds at most the last UPGRADE_SETTLE's.
        map.retain(|_, (_, at)| *at <= now && now - *at < UPGRADE_SETTLE);
        map.insert(cluster_id.to_owned(), (version.to_owned(), now));
    }

    /// Whether cluster `cluster_id` was asked to upgrade to `version` within
    /// [`UPGRADE_SETTLE`] of `now`: then the upgrade is under way, not to be asked again.
    pub fn under_way(&self, cluster_id: &str, version: &str, now: Timestamp) -> bool {
        let map = self.asked.lock().unwrap_or_else(|e| e.into_inner());
        map.get(cluster_id)
            .is_some_and(|(v, at)| v == version && *at <= now && now - *at < UPGRADE_SETTLE)
    }

    /// The upgrades offered in `account` to clusters running `running`, if asked for
    /// `desired` within [`UPGRADE_CHECK_EVERY`] of `now`.
    pub fn recent(
        &self,
        account: &ProviderAccount,
        running: &str,
        desired: &str,
        now: Timestamp,
    ) -> Option<Vec<KubernetesVersion>> {
        let map = self.by_version.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&Self::key(account, running, desired))
            .filter(|(at, _)| now - *at < UPGRADE_CHECK_EVERY && *at <= now)
            .map(|(_, offered)| offered.clone())
    }

    /// Records what the provider offered, asked for `desired`.
    pub fn record(
        &self,
        account: &ProviderAccount,
        running: &str,
        desired: &str,
        now: Timestamp,
        offered: Vec<KubernetesVersion>,
    ) {
        let mut map = self.by_version.lock().unwrap_or_else(|e| e.into_inner());
        // What `recent` would no longer answer goes (versions no cluster runs any more).
        map.retain(|_, (at, _)| *at <= now && now - *at < UPGRADE_CHECK_EVERY);
        map.insert(Self::key(account, running, desired), (now, offered));
    }

    /// Forgets what was offered for `running` (after an upgrade was asked, the next
    /// decision asks again), whatever it was asked for.
    pub fn forget(&self, account: &ProviderAccount, running: &str) {
        let mut map = self.by_version.lock().unwrap_or_else(|e| e.into_inner());
        let acct = account.provider_account_id.to_string();
        map.retain(|(a, r, _), _| !(*a == acct && r == running));
    }

    fn key(account: &ProviderAccount, running: &str, desired: &str) -> (String, String, String) {
        (account.provider_account_id.to_string(), running.to_owned(), desired.to_owned())
    }
}

/// The key [`UpgradeChecks::asked`] records a node pool's own upgrade under (where the
/// provider upgrades pools one by one): apart from its cluster's control plane.
pub fn pool_upgrade_key(cluster_id: &str, node_pool_id: &str) -> String {
    format!("{cluster_id}/nodePools/{node_pool_id}")
}

/// `after` as the runtime's wait.
pub fn converging(after: Duration) -> crate::reconciler::Outcome {
    crate::reconciler::Outcome::Converging { after }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upgrade_asked_is_under_way_for_its_version_until_it_settles() {
        let c = UpgradeChecks::default();
        let t0 = Timestamp::from_unix_ms(1_800_000_000_000);
        assert!(!c.under_way("c1", "1.33.1-do.0", t0));
        c.asked("c1", "1.33.1-do.0", t0);
        assert!(c.under_way("c1", "1.33.1-do.0", t0 + time::Duration::minutes(9)));
        assert!(!c.under_way("c1", "1.32.6-do.1", t0), "another version");
        assert!(!c.under_way("c2", "1.33.1-do.0", t0), "another cluster");
        assert!(!c.under_way("c1", "1.33.1-do.0", t0 + UPGRADE_SETTLE), "asked again once settled");
        assert!(!c.under_way("c1", "1.33.1-do.0", t0 - time::Duration::seconds(1)), "a clock step");
    }

    #[test]
    fn upgrades_asked_are_forgotten_once_they_settle_so_the_map_stays_bounded() {
        let c = UpgradeChecks::default();
        let t0 = Timestamp::from_unix_ms(1_800_000_000_000);
        // A thousand clusters, each asked once, a minute apart, then never again (they
        // settled or were deleted).
        for i in 0..1000 {
            c.asked(&format!("c{i}"), "1.33.1-do.0", t0 + time::Duration::minutes(i));
        }
        let held = c.asked.lock().unwrap().len();
        let window = usize::try_from(UPGRADE_SETTLE.whole_minutes()).unwrap();
        assert!(held <= window, "{held} entries held; at most the last {window} minutes' matter");
        let last = t0 + time::Duration::minutes(999);
        assert!(c.under_way("c999", "1.33.1-do.0", last), "the recent one still guards");
        // A clock stepped back: entries from the future say nothing and go too.
        c.asked("x", "1.33.1-do.0", t0);
        assert_eq!(c.asked.lock().unwrap().len(), 1);
    }

    #[test]
    fn causes_compare_without_request_ids() {
        let a = r#"DELETE /x: 422 (request "r1") cluster is locked"#;
        let b = r#"DELETE /x: 422 (request "r2") cluster is locked"#;
        let c = r#"DELETE /x: 422 (request "r3") cluster is gone"#;
        assert!(same_cause(Some(a), Some(b)));
        assert!(!same_cause(Some(a), Some(c)));
        assert!(!same_cause(Some(a), None));
        assert!(same_cause(None, None));
        assert!(same_cause(Some("open (request \"x"), Some("open (request \"x")));
    }

    struct Fixed(u8);
    impl Entropy for Fixed {
        fn bytes32(&self) -> [u8; 32] {
            [self.0; 32]
        }
    }

    #[test]
    fn refusals_are_the_objects_and_throttling_is_retried() {
        let refused = ProviderError::Refused { message: "POST x: 422 bad size".into() };
        assert_eq!(own_error(refused).unwrap(), "POST x: 422 bad size");
        assert!(own_error(ProviderError::Unauthorized).unwrap().contains("credentials"));
        for retried in [
            ProviderError::RateLimited { retry_after_ms: 1000 },
            ProviderError::Transient { message: "500".into() },
            ProviderError::NotFound,
        ] {
            assert!(matches!(own_error(retried), Err(ReconcileError::Provider(_))));
        }
    }

    #[test]
    fn events_get_fresh_ids_at_their_time() {
        let now = Timestamp::from_unix_ms(1_800_000_000_000);
        let t = TenantId::parse("acme").unwrap();
        let a = event(&Fixed(1), &t, "s".into(), "k", serde_json::json!({}), now);
        let b = event(&Fixed(2), &t, "s".into(), "k", serde_json::json!({}), now);
        assert_ne!(a.event_id, b.event_id);
        assert_eq!((a.time, a.kind.as_str(), a.subject.as_str()), (now, "k", "s"));
    }

    #[test]
    fn upgrade_checks_expire_follow_the_running_version_and_are_per_account() {
        let account = |n: u128| bc_domain::model::ProviderAccount {
            provider_account_id: bc_domain::ProviderAccountId::generate(1, n),
            tenant_id: TenantId::parse("acme").unwrap(),
            provider: bc_domain::model::ProviderKind::Digitalocean,
            name: bc_domain::ObjectName::parse("main").unwrap(),
            project_id: None,
            credentials: bc_domain::model::SealedSecret(vec![]),
            created_at: Timestamp::EPOCH,
            deleted_at: None,
        };
        let (a, b) = (account(1), account(2));
        let c = UpgradeChecks::default();
        let t0 = Timestamp::from_unix_ms(1_800_000_000_000);
        let v = vec![KubernetesVersion {
            slug: "1.33.1-do.0".into(),
            kubernetes_version: "1.33.1".into(),
        }];
        let latest = "latest";
        c.record(&a, "1.32.6-do.1", latest, t0, v.clone());
        let soon = t0 + time::Duration::minutes(59);
        assert_eq!(c.recent(&a, "1.32.6-do.1", latest, soon), Some(v));
        assert_eq!(c.recent(&a, "1.32.6-do.1", latest, t0 + UPGRADE_CHECK_EVERY), None);
        assert_eq!(c.recent(&a, "1.33.1-do.0", latest, t0), None);
        assert_eq!(c.recent(&a, "1.32.6-do.1", "1.33.1-do.0", t0), None, "a new goal asks");
        assert_eq!(c.recent(&b, "1.32.6-do.1", latest, t0), None, "another account asks itself");
        c.forget(&a, "1.32.6-do.1");
        assert_eq!(c.recent(&a, "1.32.6-do.1", latest, t0), None);
    }
}
