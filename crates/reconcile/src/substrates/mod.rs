//! `kubernetes.substrates` (SPEC §6): converges a pool's substrate — the cluster it
//! creates or adopts, one node pool per flavor, the pool's Namespace, join Secret,
//! ServiceAccount and bcd DaemonSet, join accounting, upgrades — and tears it down when
//! the pool is archived or its policy drops the substrate.
//!
//! This module is the async shell: it reads (store, provider, cluster), calls, and
//! commits what the pure parts decide (`decide`, `rows`, `objects`, and bc-domain's
//! `rules::{plan, join, drain}`).
//!
//! Invariants:
//! - **Crash-safe names.** The cluster row (create mode) and each node pool row are
//!   committed before the provider call that makes them; a run that finds a recorded
//!   name without a provider id looks the name up before it creates, so a crash never
//!   makes a second cluster or node pool.
//! - **Ownership first.** Every Kubernetes object is read before it is applied or
//!   deleted; one without our label, or with another pool's, is never touched and puts
//!   the substrate in `error` naming it; it recovers on the run after the tenant removes
//!   it. Node pools of the tenant are never planned (`rules::plan`).
//! - **Quiet when converged.** A ready substrate re-derives everything and writes
//!   nothing: objects are applied only when not in place, rows and the substrate row
//!   only when they changed; its provider reads come from the shared account listing.
//! - **Drains are safe.** An `upgrades: drain` upgrade is asked for only after the wait
//!   is recorded on the substrate row (which makes the store refuse new bookings) and a
//!   count taken after that record finds no active booking.
//! - **Secrets stay put.** The join token exists in plaintext only in the Secret
//!   manifest sent to the cluster; the store keeps its hash, and the Secret is compared
//!   through digests.

pub mod decide;
pub mod objects;
pub mod rows;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use async_trait::async_trait;
use bc_domain::model::{
    JoinToken, KubernetesCluster, NewEvent, Pool, ProviderAccount, Substrate, UpgradeWait, subjects,
};
use bc_domain::name::LABEL_SUBSTRATE_POOL;
use bc_domain::policy::{
    AdoptClusterPolicy, ClusterPolicy, CreateClusterPolicy, Flavor, PoolPolicy,
};
use bc_domain::ports::cluster::ownership;
use bc_domain::ports::{
    ApplyOutcome, ClusterClient, ClusterError, ClusterSession, CreateClusterRequest, DeleteOutcome,
    NodePoolRequest, ObjectKind, Ownership, PAGE_SIZE_MAX, PageRequest, ProviderCluster,
    ProviderClusterState, ProviderImpl, UnitOfWork, UpdateClusterRequest, WorkKind, Write,
};
use bc_domain::rules::drain::{UpgradeDecision, upgrade_decision};
use bc_domain::rules::join::{JoinReport, waiting_to_join};
use bc_domain::rules::plan::{
    NodePoolStep, desired_node_pool, is_our_node_pool, node_pool_conflicts, plan_node_pools,
    substrate_tag,
};
use bc_domain::token::{join_token, sha256_hex};
use bc_domain::{
    ClusterId, NodePoolId, PoolId, ProviderError, ResourceState, StoreError, Timestamp,
};

use crate::reconciler::{Activation, Deps, Outcome, ReconcileError, Reconciler};
use crate::shared::{
    Entropy, STEADY_LISTING_MAX_AGE, Sessions, UpgradeChecks, cluster_event, converging, event,
    node_pool_event, own_error, waits,
};
use decide::{Progress, Target};

/// The `kubernetes.substrates` reconciler.
pub struct SubstrateReconciler {
    entropy: Arc<dyn Entropy>,
    sessions: Sessions,
    upgrades: UpgradeChecks,
}

impl SubstrateReconciler {
    /// A reconciler drawing join tokens and ids from `entropy`.
    pub fn new(entropy: Arc<dyn Entropy>) -> Self {
        Self { entropy, sessions: Sessions::default(), upgrades: UpgradeChecks::default() }
    }
}

#[async_trait]
impl Reconciler for SubstrateReconciler {
    fn kind(&self) -> WorkKind {
        WorkKind::Substrates
    }

    async fn reconcile(
        &self,
        deps: &Deps,
        activation: &Activation,
    ) -> Result<Outcome, ReconcileError> {
        let Ok(pool_id) = PoolId::parse(activation.key()) else { return Ok(Outcome::Gone) };
        let Some(sub) = deps.store.substrate_get_any(&pool_id).await? else {
            return Ok(Outcome::Gone);
        };
        if sub.state == ResourceState::Deleted {
            return Ok(Outcome::Gone);
        }
        let pool = deps.store.pool_get_any(&pool_id).await?;
        let mut run = Run {
            r: self,
            deps,
            act: activation,
            now: activation.now,
            upgrade: sub.upgrade.clone(),
            sub,
            join: None,
            cluster: None,
            running_version: None,
            pool_generation: pool.as_ref().map_or(0, |p| p.generation),
        };
        match decide::target(pool.as_ref()) {
            Target::Teardown => run.teardown().await,
            Target::Converge(policy, _) => {
                let progress = run.converge(policy).await?;
                run.finish(progress).await
            }
        }
    }
}

/// Returns the object's own error as the run's progress, or the retried error.
macro_rules! provider {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return own_error(e).map(Progress::error),
        }
    };
    (stop $e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return own_error(e).map(|m| Some(Progress::error(m))),
        }
    };
}

/// Returns early with the progress when a step stops the run.
macro_rules! step {
    ($e:expr) => {
        if let Some(stop) = $e {
            return Ok(stop);
        }
    };
}

/// The outcome of a cluster API failure: the substrate's error when retrying cannot fix
/// it, else a retried activation.
fn cluster_failure(e: ClusterError) -> Result<Progress, ReconcileError> {
    match e {
        ClusterError::Provider(p) => own_error(p).map(Progress::error),
        ClusterError::Refused(m) => Ok(Progress::error(format!("the cluster's API refused: {m}"))),
        other => Err(ReconcileError::Other(other.to_string())),
    }
}

/// One activation's state.
struct Run<'a> {
    r: &'a SubstrateReconciler,
    deps: &'a Deps,
    act: &'a Activation,
    now: Timestamp,
    /// The substrate row as last committed.
    sub: Substrate,
    /// The drain wait the run ends with.
    upgrade: Option<UpgradeWait>,
    /// The join report, once Nodes were listed.
    join: Option<JoinReport>,
    /// The cluster row, once known.
    cluster: Option<KubernetesCluster>,
    /// The provider cluster's running version, once observed.
    running_version: Option<String>,
    /// The pool's generation (what "converged" is measured against).
    pool_generation: u64,
}

impl Run<'_> {
    fn pool_id(&self) -> PoolId {
        self.sub.pool_id.clone()
    }

    async fn commit(&self, uow: UnitOfWork) -> Result<(), ReconcileError> {
        if uow.is_empty() {
            return Ok(());
        }
        self.deps.store.commit(uow.fenced(self.act.fence.clone())).await?;
        Ok(())
    }

    fn substrate_event(&self, row: &Substrate) -> NewEvent {
        let mut data = serde_json::json!({"poolId": row.pool_id, "state": row.state.as_str()});
        if let Some(c) = &row.cluster_id {
            data["clusterId"] = serde_json::json!(c);
        }
        if let Some(m) = &row.message {
            data["message"] = serde_json::json!(m);
        }
        let kind = format!("kubernetes.substrate.{}", row.state.as_str());
        event(&*self.r.entropy, &row.tenant_id, subjects::pool(&row.pool_id), &kind, data, self.now)
    }

    /// Adds the substrate row `next` (and its state event, if the state moved) to `uow`.
    fn with_row(&self, mut uow: UnitOfWork, next: &Substrate) -> UnitOfWork {
        if *next != self.sub {
            uow = uow.write(Write::PutSubstrate(next.clone()));
        }
        if next.state != self.sub.state {
            uow = uow.event(self.substrate_event(next));
        }
        uow
    }

    /// Commits the substrate in `state` with `message` now (before a provider call that
    /// must not happen unrecorded).
    async fn save(
        &mut self,
        state: ResourceState,
        message: Option<String>,
        extra: UnitOfWork,
    ) -> Result<(), ReconcileError> {
        let generation = self.sub.observed_generation;
        let next = decide::next_row(
            &self.sub,
            state,
            message,
            None,
            self.upgrade.clone(),
            generation,
            self.now,
        );
        let uow = self.with_row(extra, &next);
        self.commit(uow).await?;
        self.sub = next;
        Ok(())
    }

    async fn account(&self) -> Result<Option<ProviderAccount>, ReconcileError> {
        let a = self.deps.store.account_get_any(&self.sub.provider_account_id).await?;
        Ok(a.filter(|a| a.deleted_at.is_none()))
    }

    /// The live node pool rows of a cluster.
    async fn cluster_rows(
        &self,
        cluster: &ClusterId,
    ) -> Result<Vec<bc_domain::model::NodePool>, ReconcileError> {
        let mut out = Vec::new();
        let mut page = PageRequest::first(PAGE_SIZE_MAX);
        loop {
            let p = self.deps.store.node_pool_list_by_cluster(cluster, &page).await?;
            out.extend(p.items.iter().cloned());
            match p.next_request(PAGE_SIZE_MAX) {
                Some(next) => page = next,
                None => return Ok(out),
            }
        }
    }

    /// Brings the substrate's node pool rows in line with `desired` and what the provider
    /// lists; commits at once (rows are intents that must precede provider calls).
    async fn sync_rows(
        &self,
        cluster: &KubernetesCluster,
        desired: &[NodePoolRequest],
        observed: Option<&[bc_domain::ports::ProviderNodePool]>,
        refused: &BTreeMap<String, String>,
    ) -> Result<(), ReconcileError> {
        let rows = self.cluster_rows(&cluster.cluster_id).await?;
        let pool = self.pool_id();
        let inputs = rows::Inputs {
            pool: &pool,
            cluster,
            desired,
            rows: &rows,
            observed,
            refused,
            now: self.now,
        };
        let entropy = &*self.r.entropy;
        let ms = u64::try_from(self.now.unix_ms()).unwrap_or(0);
        let sync = rows::sync(&inputs, &mut || NodePoolId::generate(ms, entropy.u128()));
        let mut uow = UnitOfWork::new();
        for w in sync.writes {
            uow = uow.write(w);
        }
        for m in &sync.moved {
            if let Some(e) = node_pool_event(entropy, &m.row, self.now) {
                uow = uow.event(e);
            }
        }
        self.commit(uow).await
    }

    /// The provider cluster: from the shared listing while the substrate is steady (a
    /// listing's silence confirmed by a GET), else by a GET. `None` when it is gone.
    async fn observe_cluster(
        &self,
        account: &ProviderAccount,
        provider: &Arc<dyn ProviderImpl>,
        id: &str,
    ) -> Result<Result<Option<ProviderCluster>, Progress>, ReconcileError> {
        let steady = self.sub.state == ResourceState::Ready
            && self.sub.upgrade.is_none()
            && self.sub.observed_generation == self.pool_generation;
        if steady {
            match self.deps.observer.clusters(account, STEADY_LISTING_MAX_AGE).await {
                Ok(listing) => {
                    if let Some(c) = listing.items.iter().find(|c| c.id == id) {
                        return Ok(Ok(Some(c.clone())));
                    }
                }
                Err(e) => return own_error(e).map(|m| Err(Progress::error(m))),
            }
        }
        match provider.kubernetes().get_cluster(id).await {
            Ok(c) => Ok(Ok(Some(c))),
            Err(ProviderError::NotFound) => Ok(Ok(None)),
            Err(e) => own_error(e).map(|m| Err(Progress::error(m))),
        }
    }

    // ----- converge ------------------------------------------------------------------

    async fn converge(&mut self, policy: &PoolPolicy) -> Result<Progress, ReconcileError> {
        let Some(sp) = &policy.substrate else { return Ok(Progress::error("no substrate")) };
        if !decide::mode_matches(&self.sub, sp) {
            return Ok(Progress::error(format!(
                "the substrate was made in {:?} mode and the policy now asks for the other: remove the substrate from the pool's policy, wait for it to be deleted, then add it again",
                self.sub.mode
            )));
        }
        let Some(account) = self.account().await? else {
            return Ok(Progress::error(format!(
                "provider account {} no longer exists: give the pool's substrate another account",
                self.sub.provider_account_id
            )));
        };
        let provider = provider!(self.deps.observer.provider(&account).await);
        let desired: Vec<NodePoolRequest> =
            policy.flavors.iter().filter_map(|f| desired_node_pool(&self.pool_id(), f)).collect();
        let pc = match &sp.cluster {
            ClusterPolicy::Create(create) => {
                match self.created_cluster(create, &desired, &account, &provider).await? {
                    Ok(pc) => pc,
                    Err(stop) => return Ok(stop),
                }
            }
            ClusterPolicy::Adopt(adopt) => match self.adopted_cluster(adopt, &provider).await? {
                Ok(pc) => pc,
                Err(stop) => return Ok(stop),
            },
        };
        let cluster = self.cluster.clone().expect("the cluster row is known by now");
        self.running_version = Some(pc.version.clone());
        self.sync_rows(&cluster, &desired, Some(&pc.node_pools), &BTreeMap::new()).await?;
        match &pc.state {
            ProviderClusterState::Provisioning => {
                return Ok(Progress::converging(
                    format!(
                        "waiting for cluster {} to be provisioned by the provider",
                        cluster.name
                    ),
                    waits::CLUSTER,
                ));
            }
            ProviderClusterState::Upgrading => {
                return Ok(Progress::converging(
                    format!("cluster {} is being upgraded by the provider", cluster.name),
                    waits::CLUSTER,
                ));
            }
            ProviderClusterState::Error => {
                return Ok(Progress::error(format!(
                    "the provider reports cluster {} ({}) in error{}: see the provider's console, or archive the pool to remove it",
                    cluster.name,
                    pc.id,
                    pc.message.as_ref().map(|m| format!(" ({m})")).unwrap_or_default()
                )));
            }
            ProviderClusterState::Deleting | ProviderClusterState::Deleted => {
                return Ok(Progress::error(format!(
                    "cluster {} ({}) is being deleted at the provider outside this system: archive the pool or remove its substrate",
                    cluster.name, pc.id
                )));
            }
            _ => {}
        }
        let mut waiting: Vec<String> = Vec::new();
        step!(
            self.node_pools(
                &cluster,
                &desired,
                &policy.flavors,
                &pc,
                &account,
                &provider,
                &mut waiting
            )
            .await?
        );
        if let ClusterPolicy::Create(create) = &sp.cluster {
            if create.high_availability && !pc.high_availability {
                let mut req = UpdateClusterRequest::keeping(&pc);
                req.high_availability = Some(true);
                provider!(provider.kubernetes().update_cluster(&pc.id, &req).await);
                self.deps.observer.invalidate(&account);
                waiting.push("turning on the high-availability control plane".into());
            }
            if waiting.is_empty() {
                step!(
                    self.upgrade(policy, create, &cluster, &pc, &account, &provider, &mut waiting)
                        .await?
                );
            }
        }
        let session =
            self.r.sessions.get(&account, provider.clone(), self.deps.clusters.clone(), &pc.id);
        step!(self.objects(&session, &policy.flavors, &mut waiting).await?);
        step!(self.nodes(&session).await?);
        Ok(match waiting.is_empty() {
            true => Progress::Ready,
            false => {
                let after = if waiting.iter().any(|w| w.contains("node pool")) {
                    waits::NODE_POOL
                } else {
                    waits::SHORT
                };
                Progress::converging(waiting.join("; "), after)
            }
        })
    }

    /// Create mode: the recorded row, then the provider cluster (found by its name or
    /// created with the flavors' pools), then its observation.
    async fn created_cluster(
        &mut self,
        create: &CreateClusterPolicy,
        desired: &[NodePoolRequest],
        account: &ProviderAccount,
        provider: &Arc<dyn ProviderImpl>,
    ) -> Result<Result<ProviderCluster, Progress>, ReconcileError> {
        let cluster = match self.sub.cluster_id.clone() {
            Some(id) => self.deps.store.cluster_get_any(&id).await?,
            None => None,
        };
        let cluster = match cluster {
            Some(c) => c,
            None => {
                let name = match decide::cluster_name(&self.sub.pool_id, create) {
                    Ok(n) => n,
                    Err(m) => return Ok(Err(Progress::error(m))),
                };
                let ms = u64::try_from(self.now.unix_ms()).unwrap_or(0);
                let id = ClusterId::generate(ms, self.r.entropy.u128());
                let row = decide::created_cluster_row(
                    &self.sub,
                    create,
                    name.clone(),
                    id.clone(),
                    self.now,
                );
                let mut next = self.sub.clone();
                next.cluster_id = Some(id);
                let message = format!("creating cluster {name}");
                let state = if self.sub.state == ResourceState::Pending {
                    ResourceState::Provisioning
                } else {
                    self.sub.state
                };
                let mut extra = UnitOfWork::new().write(Write::InsertCluster(row.clone()));
                extra = extra.write(Write::PutSubstrate(next.clone()));
                let before = self.sub.clone();
                self.sub = next;
                match self.save(state, Some(message), extra).await {
                    Ok(()) => {}
                    Err(ReconcileError::Store(StoreError::AlreadyExists(_))) => {
                        self.sub = before;
                        return Ok(Err(Progress::error(format!(
                            "a cluster named {name} is already recorded in provider account {}: set policy.substrate.cluster.create.name to another name",
                            self.sub.provider_account_id
                        ))));
                    }
                    Err(e) => {
                        self.sub = before;
                        return Err(e);
                    }
                }
                row
            }
        };
        self.cluster = Some(cluster.clone());
        let id = match &cluster.provider_cluster_id {
            Some(id) => id.clone(),
            None => {
                return self
                    .make_cluster(create, &cluster, desired, account, provider)
                    .await
                    .map(Err);
            }
        };
        match self.observe_cluster(account, provider, &id).await? {
            Ok(Some(pc)) => Ok(Ok(pc)),
            Ok(None) => Ok(Err(Progress::error(format!(
                "cluster {} ({id}) no longer exists at the provider: it was deleted outside this system; archive the pool or remove its substrate, then add it again",
                cluster.name
            )))),
            Err(stop) => Ok(Err(stop)),
        }
    }

    /// Finds the recorded cluster name at the provider (a create whose answer was lost),
    /// or creates the cluster with the flavors' pools.
    async fn make_cluster(
        &mut self,
        create: &CreateClusterPolicy,
        cluster: &KubernetesCluster,
        desired: &[NodePoolRequest],
        account: &ProviderAccount,
        provider: &Arc<dyn ProviderImpl>,
    ) -> Result<Progress, ReconcileError> {
        let tag = substrate_tag(&self.pool_id());
        let listing =
            provider!(self.deps.observer.clusters(account, std::time::Duration::ZERO).await);
        let found = listing.items.iter().find(|c| c.name == cluster.name.as_str()).cloned();
        let made = match found {
            Some(c) if c.tags.contains(&tag) => c,
            Some(c) => {
                return Ok(Progress::error(format!(
                    "a cluster named {} ({}) already exists in the provider account and was not made for this pool: set policy.substrate.cluster.create.name to another name, or adopt that cluster",
                    c.name, c.id
                )));
            }
            None => {
                // The rows of the first pools are the intents of the pools in the create call.
                self.sync_rows(cluster, desired, Some(&[]), &BTreeMap::new()).await?;
                let req = CreateClusterRequest {
                    name: cluster.name.to_string(),
                    region: create.region.clone(),
                    version: create.version.clone(),
                    high_availability: create.high_availability,
                    mode: cluster.mode,
                    tags: vec![tag],
                    node_pools: desired.to_vec(),
                };
                let made = provider!(provider.kubernetes().create_cluster(&req).await);
                self.deps.observer.invalidate(account);
                made
            }
        };
        let status = decide::cluster_status(cluster, ResourceState::Provisioning, None, self.now)
            .unwrap_or_else(|| cluster.status.clone());
        let uow = UnitOfWork::new().write(Write::SetClusterStatus {
            cluster_id: cluster.cluster_id.clone(),
            provider_cluster_id: Some(made.id.clone()),
            version: Some(made.version.clone()),
            status,
        });
        self.commit(uow).await?;
        let mut c = cluster.clone();
        c.provider_cluster_id = Some(made.id.clone());
        c.status.state = ResourceState::Provisioning;
        self.cluster = Some(c);
        self.sync_rows(cluster, desired, Some(&made.node_pools), &BTreeMap::new()).await?;
        Ok(Progress::converging(
            format!("waiting for cluster {} to be provisioned by the provider", cluster.name),
            waits::CLUSTER,
        ))
    }

    /// Adopt mode: the provider cluster, and its row (this pool added to a live row of
    /// it, or a new `adopted` row).
    async fn adopted_cluster(
        &mut self,
        adopt: &AdoptClusterPolicy,
        provider: &Arc<dyn ProviderImpl>,
    ) -> Result<Result<ProviderCluster, Progress>, ReconcileError> {
        let id = adopt.provider_cluster_id.as_str();
        let pc = match provider.kubernetes().get_cluster(id).await {
            Ok(c) => c,
            Err(ProviderError::NotFound) => {
                return Ok(Err(Progress::error(format!(
                    "cluster {id} does not exist in provider account {}: check policy.substrate.cluster.adopt.providerClusterId",
                    self.sub.provider_account_id
                ))));
            }
            Err(e) => return own_error(e).map(|m| Err(Progress::error(m))),
        };
        let row = match self.sub.cluster_id.clone() {
            Some(cid) => self.deps.store.cluster_get_any(&cid).await?,
            None => None,
        };
        let row = match row {
            Some(r) => r,
            None => match self.record_adoption(&pc).await? {
                Ok(r) => r,
                Err(stop) => return Ok(Err(stop)),
            },
        };
        self.cluster = Some(row);
        Ok(Ok(pc))
    }

    async fn record_adoption(
        &mut self,
        pc: &ProviderCluster,
    ) -> Result<Result<KubernetesCluster, Progress>, ReconcileError> {
        let account = self.sub.provider_account_id.clone();
        let mut existing = self.deps.store.cluster_find_by_provider_id(&account, &pc.id).await?;
        let pool = self.pool_id();
        let mut fallback = false;
        // At most: a row inserted under the cluster's name, lost to another pool adopting
        // it at the same moment (then joined), then one under the fallback name.
        for _ in 0..3 {
            let (row, write) = match &existing {
                Some(r) if r.substrate_pool_ids.contains(&pool) => (r.clone(), None),
                Some(r) => {
                    let mut next = r.clone();
                    next.substrate_pool_ids.push(pool.clone());
                    next.generation += 1;
                    (
                        next.clone(),
                        Some(Write::UpdateCluster {
                            cluster: next,
                            expected_generation: r.generation,
                        }),
                    )
                }
                None => {
                    let ms = u64::try_from(self.now.unix_ms()).unwrap_or(0);
                    let id = ClusterId::generate(ms, self.r.entropy.u128());
                    let row = decide::adopted_cluster_row(&self.sub, pc, id, fallback, self.now);
                    (row.clone(), Some(Write::InsertCluster(row)))
                }
            };
            let mut next = self.sub.clone();
            next.cluster_id = Some(row.cluster_id.clone());
            let mut extra =
                UnitOfWork::new().enqueue(WorkKind::Clusters, row.cluster_id.as_str(), self.now);
            if let Some(w) = write {
                extra = extra.write(w);
            }
            extra = extra.write(Write::PutSubstrate(next.clone()));
            let before = self.sub.clone();
            self.sub = next;
            let state = if before.state == ResourceState::Pending {
                ResourceState::Provisioning
            } else {
                before.state
            };
            match self.save(state, Some(format!("adopting cluster {}", pc.name)), extra).await {
                Ok(()) => return Ok(Ok(row)),
                Err(ReconcileError::Store(StoreError::AlreadyExists(_)))
                    if existing.is_none() && !fallback =>
                {
                    self.sub = before;
                    // Another pool adopting the same cluster may have recorded it just
                    // now: join its row rather than record the cluster twice; only a
                    // name held by some other cluster falls back to another name.
                    existing =
                        self.deps.store.cluster_find_by_provider_id(&account, &pc.id).await?;
                    fallback = existing.is_none();
                }
                Err(e) => {
                    self.sub = before;
                    return Err(e);
                }
            }
        }
        Ok(Err(Progress::error(format!(
            "cluster {} ({}) cannot be recorded: its name is taken by another cluster of the account",
            pc.name, pc.id
        ))))
    }

    /// The flavors' node pools: conflicts, the plan's calls, and what is still coming.
    #[allow(clippy::too_many_arguments)]
    async fn node_pools(
        &self,
        cluster: &KubernetesCluster,
        desired: &[NodePoolRequest],
        flavors: &[Flavor],
        pc: &ProviderCluster,
        account: &ProviderAccount,
        provider: &Arc<dyn ProviderImpl>,
        waiting: &mut Vec<String>,
    ) -> Result<Option<Progress>, ReconcileError> {
        let pool = self.pool_id();
        let steps = plan_node_pools(&pool, flavors, &pc.node_pools);
        let mut refused = BTreeMap::new();
        for s in &steps {
            let k = provider.kubernetes();
            let done = match s {
                NodePoolStep::Create(req) => k.create_node_pool(&pc.id, req).await.map(|_| ()),
                NodePoolStep::Update { node_pool_id, request } => {
                    k.update_node_pool(&pc.id, node_pool_id, request).await.map(|_| ())
                }
                // Already gone (or still draining from an earlier delete): done.
                NodePoolStep::Delete { node_pool_id, .. } => {
                    match k.delete_node_pool(&pc.id, node_pool_id).await {
                        Err(ProviderError::NotFound) => Ok(()),
                        other => other,
                    }
                }
            };
            if let Err(e) = done {
                refused.insert(s.name().to_owned(), own_error(e)?);
            }
        }
        if !steps.is_empty() {
            self.deps.observer.invalidate(account);
        }
        if let Some((name, message)) = refused.iter().next() {
            self.sync_rows(cluster, desired, Some(&pc.node_pools), &refused).await?;
            return Ok(Some(Progress::error(format!(
                "the provider refused node pool {name}: {message}; change or remove that flavor in the pool's policy"
            ))));
        }
        if let Some(c) = node_pool_conflicts(&pool, flavors, &pc.node_pools).first() {
            return Ok(Some(Progress::error(c.message(&pool))));
        }
        let pending: BTreeSet<&str> = steps
            .iter()
            .map(NodePoolStep::name)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .chain(
                desired
                    .iter()
                    .filter(|d| {
                        !pc.node_pools.iter().any(|p| {
                            p.name == d.name
                                && is_our_node_pool(&pool, p)
                                && rows::pool_converged(p, d)
                        })
                    })
                    .map(|d| d.name.as_str()),
            )
            .collect();
        if !pending.is_empty() {
            waiting.push(format!(
                "waiting for node pool{} {} to be made, changed or removed by the provider",
                if pending.len() == 1 { "" } else { "s" },
                pending.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
        Ok(None)
    }

    /// Create mode: moves the cluster toward `cluster.create.version`, draining first
    /// when the policy says so.
    #[allow(clippy::too_many_arguments)]
    async fn upgrade(
        &mut self,
        policy: &PoolPolicy,
        create: &CreateClusterPolicy,
        cluster: &KubernetesCluster,
        pc: &ProviderCluster,
        account: &ProviderAccount,
        provider: &Arc<dyn ProviderImpl>,
        waiting: &mut Vec<String>,
    ) -> Result<Option<Progress>, ReconcileError> {
        let desired = create.version.as_str();
        if desired == pc.version {
            self.upgrade = None;
            return Ok(None);
        }
        let offered = match self.r.upgrades.recent(account, &pc.version, self.now) {
            Some(o) => o,
            None => {
                let o = match provider.kubernetes().available_upgrades(&pc.id).await {
                    Ok(o) => o,
                    Err(e) => return own_error(e).map(|m| Some(Progress::error(m))),
                };
                self.r.upgrades.record(account, &pc.version, self.now, o.clone());
                o
            }
        };
        let pool = self.pool_id();
        let since = self.sub.upgrade.as_ref().map(|u| u.since);
        let mut active = self.deps.store.booking_count_active(&pool, self.now).await?;
        let mut decision = upgrade_decision(
            policy.upgrades,
            desired,
            &pc.version,
            &offered,
            active,
            since,
            self.now,
        );
        if let UpgradeDecision::Upgrade { version } = &decision
            && policy.upgrades == bc_domain::policy::UpgradePolicy::Drain
            && self.sub.upgrade.as_ref().is_none_or(|u| u.version != *version)
        {
            // Record the wait first: from that commit on the store refuses new bookings,
            // so a count taken after it cannot miss one made meanwhile.
            self.upgrade = Some(UpgradeWait { version: version.clone(), since: self.now });
            let message = format!(
                "draining pool {pool} before upgrading cluster {} to {version}",
                cluster.name
            );
            let state = decide::converged_state(
                &self.sub,
                &Progress::converging("", waits::SHORT),
                None,
                0,
            )
            .0;
            self.save(state, Some(message), UnitOfWork::new()).await?;
            active = self.deps.store.booking_count_active(&pool, self.now).await?;
            decision = upgrade_decision(
                policy.upgrades,
                desired,
                &pc.version,
                &offered,
                active,
                Some(self.now),
                self.now,
            );
        }
        match decision {
            UpgradeDecision::UpToDate => {
                self.upgrade = None;
                Ok(None)
            }
            UpgradeDecision::Invalid { message } => {
                self.upgrade = None;
                Ok(Some(Progress::error(message)))
            }
            UpgradeDecision::Wait { version, since } => {
                self.upgrade = Some(UpgradeWait { version: version.clone(), since });
                Ok(Some(Progress::converging(
                    format!(
                        "waiting for {active} active booking{} of pool {pool} to end before upgrading cluster {} to {version} (upgrades: drain); new bookings are refused meanwhile",
                        if active == 1 { "" } else { "s" },
                        cluster.name
                    ),
                    waits::SHORT,
                )))
            }
            UpgradeDecision::Upgrade { version } => {
                provider!(stop provider.kubernetes().upgrade_cluster(&pc.id, &version).await);
                self.r.upgrades.forget(account, &pc.version);
                self.deps.observer.invalidate(account);
                self.upgrade = None;
                waiting.push(format!("upgrading cluster {} to {version}", cluster.name));
                Ok(Some(Progress::converging(waiting.join("; "), waits::CLUSTER)))
            }
        }
    }

    /// The pool's Namespace, ServiceAccount, join Secret and DaemonSet, each applied
    /// only when it is not in place, never over someone else's.
    async fn objects(
        &self,
        session: &ClusterSession,
        flavors: &[Flavor],
        waiting: &mut Vec<String>,
    ) -> Result<Option<Progress>, ReconcileError> {
        let pool = self.pool_id();
        let owner = objects::owner(&pool);
        let settings = &self.deps.settings;
        let mut applied = Vec::new();
        for kind in objects::APPLY_ORDER {
            let r = objects::object_ref(&pool, kind);
            let meta = match session.read_object(&r).await {
                Ok(m) => m,
                Err(e) => return cluster_failure(e).map(Some),
            };
            if let Some(m) = &meta
                && let Ownership::Foreign(o) = ownership(&m.labels, &owner)
            {
                return Ok(Some(Progress::error(objects::foreign_message(
                    &r,
                    o.as_deref(),
                    &pool,
                ))));
            }
            let object = match kind {
                ObjectKind::Secret => {
                    let live = match meta.as_ref().and_then(objects::secret_token_digest) {
                        Some(d) => self
                            .deps
                            .store
                            .join_token_find(&d)
                            .await?
                            .filter(|t| t.pool_id == pool)
                            .map(|t| t.token_hash),
                        None => None,
                    };
                    if meta.as_ref().is_some_and(|m| {
                        objects::secret_in_place(m, &pool, live.as_deref(), &settings.public_url)
                    }) {
                        continue;
                    }
                    // Gone, altered, or holding a revoked token: a new token, its hash
                    // stored (the old revoked) before the Secret carries it.
                    let token = join_token(self.r.entropy.bytes32());
                    let uow = UnitOfWork::new()
                        .write(Write::RevokeJoinTokens { pool_id: pool.clone(), at: self.now })
                        .write(Write::InsertJoinToken(JoinToken {
                            pool_id: pool.clone(),
                            token_hash: sha256_hex(token.expose().as_bytes()),
                            created_at: self.now,
                            revoked_at: None,
                        }));
                    self.commit(uow).await?;
                    objects::join_secret(&pool, &token, &settings.public_url)
                }
                ObjectKind::Namespace => objects::namespace(&pool),
                ObjectKind::ServiceAccount => objects::service_account(&pool),
                ObjectKind::DaemonSet => objects::daemonset(&pool, flavors, &settings.bcd_image),
            };
            // Compared as a server answers it (never as sent: a real server leaves out
            // empty `omitempty` fields such as `tolerations: []`).
            if kind != ObjectKind::Secret
                && meta.as_ref().is_some_and(|m| {
                    bc_domain::ports::object_in_place(kind, &object.manifest, &m.content)
                })
            {
                continue;
            }
            match session.apply_owned(&object, &owner).await {
                Ok(ApplyOutcome::Foreign { owner: o }) => {
                    return Ok(Some(Progress::error(objects::foreign_message(
                        &r,
                        o.as_deref(),
                        &pool,
                    ))));
                }
                Ok(_) => applied.push(r.to_string()),
                Err(e) => return cluster_failure(e).map(Some),
            }
        }
        if !applied.is_empty() {
            waiting.push(format!("applied {}", applied.join(", ")));
        }
        Ok(None)
    }

    /// Lists the pool's Nodes and accounts for their joins.
    async fn nodes(
        &mut self,
        session: &ClusterSession,
    ) -> Result<Option<Progress>, ReconcileError> {
        let pool = self.pool_id();
        let listed = match session.list_nodes(&format!("{LABEL_SUBSTRATE_POOL}={pool}")).await {
            Ok(n) => n,
            Err(e) => return cluster_failure(e).map(Some),
        };
        let listed: Vec<String> = listed.into_iter().map(|n| n.name).collect();
        let mut joined = BTreeSet::new();
        let mut last_join: Option<Timestamp> = None;
        let mut page = PageRequest::first(PAGE_SIZE_MAX);
        loop {
            let p = self.deps.store.node_list_by_pool(&pool, &page).await?;
            for n in &p.items {
                if listed.contains(&n.node_name) {
                    last_join = last_join.max(Some(n.joined_at));
                }
                joined.insert(n.node_name.clone());
            }
            match p.next_request(PAGE_SIZE_MAX) {
                Some(next) => page = next,
                None => break,
            }
        }
        self.join =
            Some(waiting_to_join(&listed, &joined, self.sub.waiting_to_join, last_join, self.now));
        Ok(None)
    }

    /// Records where a converge run got to.
    async fn finish(&mut self, progress: Progress) -> Result<Outcome, ReconcileError> {
        let (state, message, generation) =
            decide::converged_state(&self.sub, &progress, self.join.as_ref(), self.pool_generation);
        let next = decide::next_row(
            &self.sub,
            state,
            message.clone(),
            self.join.as_ref(),
            self.upgrade.clone(),
            generation,
            self.now,
        );
        let mut uow = self.with_row(UnitOfWork::new(), &next);
        if self.sub.mode == bc_domain::model::SubstrateMode::Create
            && let Some(c) = &self.cluster
        {
            let shown = if state == ResourceState::Ready { None } else { message.clone() };
            uow = self.cluster_status(uow, c, state, shown);
        }
        self.commit(uow).await?;
        self.sub = next;
        Ok(match progress {
            Progress::Ready if self.sub.waiting_to_join.is_some() => converging(waits::SHORT),
            Progress::Ready => Outcome::Steady,
            Progress::Converging { after, .. } => converging(after),
            Progress::Error { .. } => converging(waits::ERROR),
        })
    }

    /// The create-mode cluster row follows its substrate's state.
    fn cluster_status(
        &self,
        mut uow: UnitOfWork,
        c: &KubernetesCluster,
        state: ResourceState,
        message: Option<String>,
    ) -> UnitOfWork {
        let Some(status) = decide::cluster_status(c, state, message.clone(), self.now) else {
            return uow;
        };
        let moved = status.state != c.status.state;
        uow = uow.write(Write::SetClusterStatus {
            cluster_id: c.cluster_id.clone(),
            provider_cluster_id: c.provider_cluster_id.clone(),
            version: self.running_version.clone(),
            status,
        });
        if moved
            && let Some(e) = cluster_event(&*self.r.entropy, c, state, message.as_deref(), self.now)
        {
            uow = uow.event(e);
        }
        uow
    }

    // ----- teardown ------------------------------------------------------------------

    async fn teardown(&mut self) -> Result<Outcome, ReconcileError> {
        if self.sub.state != ResourceState::Deleting {
            self.upgrade = None;
            self.save(
                ResourceState::Deleting,
                Some("tearing the substrate down".into()),
                UnitOfWork::new(),
            )
            .await?;
        }
        let cluster = match self.sub.cluster_id.clone() {
            Some(id) => self
                .deps
                .store
                .cluster_get_any(&id)
                .await?
                .filter(|c| c.status.state != ResourceState::Deleted),
            None => None,
        };
        let account = self.account().await?;
        let progress = match (cluster, account) {
            (Some(cluster), Some(account)) => {
                self.cluster = Some(cluster.clone());
                let provider = match self.deps.observer.provider(&account).await {
                    Ok(p) => p,
                    Err(e) => {
                        return self.teardown_stopped(own_error(e).map(Progress::error)?).await;
                    }
                };
                match self.sub.mode {
                    bc_domain::model::SubstrateMode::Create => {
                        self.teardown_created(&cluster, &account, &provider).await?
                    }
                    bc_domain::model::SubstrateMode::Adopt => {
                        self.teardown_adopted(&cluster, &account, &provider).await?
                    }
                }
            }
            // Nothing recorded (or nothing reachable any more): only our records remain.
            (Some(cluster), None) => {
                self.forget_cluster(&cluster, None).await?;
                None
            }
            (None, _) => None,
        };
        match progress {
            Some(p) => self.teardown_stopped(p).await,
            None => {
                let pool = self.pool_id();
                let uow = UnitOfWork::new()
                    .write(Write::RevokeJoinTokens { pool_id: pool, at: self.now });
                self.save(ResourceState::Deleted, None, uow).await?;
                Ok(Outcome::Gone)
            }
        }
    }

    async fn teardown_stopped(&mut self, p: Progress) -> Result<Outcome, ReconcileError> {
        let (state, message, after) = match p {
            Progress::Error { message } => (ResourceState::Error, message, waits::ERROR),
            Progress::Converging { message, after } => (ResourceState::Deleting, message, after),
            Progress::Ready => (ResourceState::Deleting, String::new(), waits::SHORT),
        };
        self.save(state, Some(message), UnitOfWork::new()).await?;
        Ok(converging(after))
    }

    /// Marks the cluster's rows deleted (create mode: the cluster is gone) or takes the
    /// pool off an adopted cluster's row.
    async fn forget_cluster(
        &self,
        cluster: &KubernetesCluster,
        observed: Option<&[bc_domain::ports::ProviderNodePool]>,
    ) -> Result<(), ReconcileError> {
        self.sync_rows(cluster, &[], observed, &BTreeMap::new()).await?;
        let pool = self.pool_id();
        let uow = match self.sub.mode {
            bc_domain::model::SubstrateMode::Create => {
                let mut uow = UnitOfWork::new();
                for status in decide::cluster_closed(cluster, self.now) {
                    let deleted = status.state == ResourceState::Deleted;
                    uow = uow.write(Write::SetClusterStatus {
                        cluster_id: cluster.cluster_id.clone(),
                        provider_cluster_id: None,
                        version: None,
                        status,
                    });
                    if deleted
                        && let Some(e) = cluster_event(
                            &*self.r.entropy,
                            cluster,
                            ResourceState::Deleted,
                            None,
                            self.now,
                        )
                    {
                        uow = uow.event(e);
                    }
                }
                uow
            }
            bc_domain::model::SubstrateMode::Adopt => {
                let mut next = cluster.clone();
                next.substrate_pool_ids.retain(|p| *p != pool);
                if next.substrate_pool_ids.len() == cluster.substrate_pool_ids.len() {
                    return Ok(());
                }
                next.generation += 1;
                UnitOfWork::new()
                    .write(Write::UpdateCluster {
                        cluster: next,
                        expected_generation: cluster.generation,
                    })
                    .enqueue(WorkKind::Clusters, cluster.cluster_id.as_str(), self.now)
            }
        };
        self.commit(uow).await
    }

    /// Create mode: our objects, then the cluster with exactly the load balancers the
    /// provider associates with it; volumes and snapshots are named in an event.
    async fn teardown_created(
        &mut self,
        cluster: &KubernetesCluster,
        account: &ProviderAccount,
        provider: &Arc<dyn ProviderImpl>,
    ) -> Result<Option<Progress>, ReconcileError> {
        let id = match &cluster.provider_cluster_id {
            Some(id) => Some(id.clone()),
            // A create whose answer was lost: find it by the recorded name.
            None => {
                let listing = provider!(stop self.deps.observer.clusters(account, std::time::Duration::ZERO).await);
                let tag = substrate_tag(&self.pool_id());
                listing
                    .items
                    .iter()
                    .find(|c| c.name == cluster.name.as_str() && c.tags.contains(&tag))
                    .map(|c| c.id.clone())
            }
        };
        let Some(id) = id else {
            self.forget_cluster(cluster, None).await?;
            return Ok(None);
        };
        let pc = match provider.kubernetes().get_cluster(&id).await {
            Ok(pc) => pc,
            Err(ProviderError::NotFound) => {
                self.r.sessions.forget(account, &id);
                self.forget_cluster(cluster, None).await?;
                return Ok(None);
            }
            Err(e) => return own_error(e).map(|m| Some(Progress::error(m))),
        };
        if matches!(pc.state, ProviderClusterState::Deleting | ProviderClusterState::Deleted) {
            return Ok(Some(Progress::converging(
                format!("waiting for cluster {} to be deleted", cluster.name),
                waits::CLUSTER,
            )));
        }
        if pc.state == ProviderClusterState::Running {
            // Best effort: the cluster goes next, and what it holds with it.
            let session =
                self.r.sessions.get(account, provider.clone(), self.deps.clusters.clone(), &id);
            let _ = self.delete_objects(&session).await;
        }
        let assoc = provider!(stop provider.kubernetes().associated_resources(&id).await);
        let lbs: Vec<String> = assoc.load_balancers.iter().map(|l| l.id.clone()).collect();
        match provider.kubernetes().delete_cluster_selective(&id, &lbs).await {
            Ok(()) | Err(ProviderError::NotFound) => {}
            Err(e) => return own_error(e).map(|m| Some(Progress::error(m))),
        }
        self.deps.observer.invalidate(account);
        self.sync_rows(cluster, &[], Some(&pc.node_pools), &BTreeMap::new()).await?;
        let mut uow =
            self.cluster_status(UnitOfWork::new(), cluster, ResourceState::Deleting, None);
        if !assoc.volumes.is_empty() || !assoc.volume_snapshots.is_empty() {
            let named = |v: &[bc_domain::ports::NamedResource]| {
                v.iter()
                    .map(|r| serde_json::json!({"id": r.id, "name": r.name}))
                    .collect::<Vec<_>>()
            };
            let data = serde_json::json!({"poolId": self.sub.pool_id, "clusterId": cluster.cluster_id,
                "providerClusterId": id, "volumes": named(&assoc.volumes),
                "volumeSnapshots": named(&assoc.volume_snapshots),
                "message": "the cluster's volumes and volume snapshots are left at the provider (they keep billing): delete them there if they are not needed"});
            uow = uow.event(event(
                &*self.r.entropy,
                &self.sub.tenant_id,
                subjects::pool(&self.sub.pool_id),
                "kubernetes.substrate.resources-retained",
                data,
                self.now,
            ));
        }
        self.commit(uow).await?;
        Ok(Some(Progress::converging(
            format!("deleting cluster {} and its load balancers", cluster.name),
            waits::CLUSTER,
        )))
    }

    /// Adopt mode: our objects and our node pools only; the tenant's stay.
    async fn teardown_adopted(
        &mut self,
        cluster: &KubernetesCluster,
        account: &ProviderAccount,
        provider: &Arc<dyn ProviderImpl>,
    ) -> Result<Option<Progress>, ReconcileError> {
        let Some(id) = cluster.provider_cluster_id.clone() else {
            self.forget_cluster(cluster, None).await?;
            return Ok(None);
        };
        let pc = match provider.kubernetes().get_cluster(&id).await {
            Ok(pc) => pc,
            Err(ProviderError::NotFound) => {
                self.r.sessions.forget(account, &id);
                self.forget_cluster(cluster, None).await?;
                return Ok(None);
            }
            Err(e) => return own_error(e).map(|m| Some(Progress::error(m))),
        };
        let mut foreign = None;
        if matches!(pc.state, ProviderClusterState::Running | ProviderClusterState::Degraded) {
            let session =
                self.r.sessions.get(account, provider.clone(), self.deps.clusters.clone(), &id);
            match self.delete_objects(&session).await {
                Ok(f) => foreign = f,
                Err(e) => return cluster_failure(e).map(Some),
            }
        }
        let pool = self.pool_id();
        let steps = plan_node_pools(&pool, &[], &pc.node_pools);
        for s in &steps {
            if let NodePoolStep::Delete { node_pool_id, name } = s {
                match provider.kubernetes().delete_node_pool(&id, node_pool_id).await {
                    Ok(()) | Err(ProviderError::NotFound) => {}
                    Err(e) => {
                        let m = own_error(e)?;
                        return Ok(Some(Progress::error(format!(
                            "the provider refused to delete node pool {name}: {m}"
                        ))));
                    }
                }
            }
        }
        if !steps.is_empty() {
            self.deps.observer.invalidate(account);
        }
        self.sync_rows(cluster, &[], Some(&pc.node_pools), &BTreeMap::new()).await?;
        if let Some(f) = foreign {
            return Ok(Some(Progress::error(f)));
        }
        if !steps.is_empty() {
            let names: Vec<&str> = steps.iter().map(NodePoolStep::name).collect();
            return Ok(Some(Progress::converging(
                format!("deleting node pools {}", names.join(", ")),
                waits::NODE_POOL,
            )));
        }
        self.r.sessions.forget(account, &id);
        self.forget_cluster(cluster, Some(&pc.node_pools)).await?;
        Ok(None)
    }

    /// Deletes our DaemonSet, Secret and ServiceAccount, then our Namespace unless
    /// something of someone else's is in it (which deleting the Namespace would take
    /// along). Returns the message naming a foreign object left in place.
    async fn delete_objects(
        &self,
        session: &ClusterSession,
    ) -> Result<Option<String>, ClusterError> {
        let pool = self.pool_id();
        let owner = objects::owner(&pool);
        let mut foreign = None;
        for kind in objects::APPLY_ORDER.iter().rev() {
            let r = objects::object_ref(&pool, *kind);
            if *kind == ObjectKind::Namespace && foreign.is_some() {
                break;
            }
            if let DeleteOutcome::Foreign { owner: o } = session.delete_owned(&r, &owner).await? {
                foreign.get_or_insert_with(|| objects::foreign_message(&r, o.as_deref(), &pool));
            }
        }
        Ok(foreign)
    }
}

/// The pools' flavors as stored (used by tests to build expectations).
pub fn desired_pools(pool: &Pool) -> Vec<NodePoolRequest> {
    pool.policy.flavors.iter().filter_map(|f| desired_node_pool(&pool.pool_id, f)).collect()
}
