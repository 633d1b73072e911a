//! `kubernetes.substrates` (SPEC §6): converges a pool's substrate — the cluster it
//! creates or adopts, one node pool per flavor, the pool's Namespace, join Secret,
//! ServiceAccount and bcd DaemonSet, join accounting, upgrades — and tears it down when
//! the pool is archived or its policy drops the substrate.
//!
//! This file is the activation: it reads the substrate and its pool, runs the phases in
//! order and records where the run got to. Each phase is a file that keeps one rule:
//! - `cluster`: the cluster, created (recorded before it is made) or adopted;
//! - `node_pools`: one node pool per flavor, rows recorded before the calls;
//! - `upgrade`: the version, draining bookings first when the policy says so;
//! - `in_cluster`: the pool's objects in the cluster (ownership first) and the joins;
//! - `teardown`: archive or a policy without substrate, leaving nothing of ours;
//!
//! and the pure parts decide: `decide` (states, rows of clusters), `rows` (node pool
//! rows), `objects` (manifests), and bc-domain's `rules::{plan, join, drain}`.
//!
//! Invariant — **quiet when converged**: a ready substrate re-derives everything and
//! writes nothing (objects are applied only when not in place, rows and the substrate
//! row only when they changed); its provider reads come from the shared account listing.

pub mod decide;
pub mod objects;
pub mod rows;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use bc_domain::model::{
    KubernetesCluster, NewEvent, Pool, ProviderAccount, Substrate, UpgradeWait,
};
use bc_domain::policy::{ClusterPolicy, PoolPolicy};
use bc_domain::ports::{
    ClusterError, ClusterSession, NodePoolRequest, ProviderClusterState, ProviderImpl, UnitOfWork,
    UpdateClusterRequest, WorkKind, Write,
};
use bc_domain::rules::join::JoinReport;
use bc_domain::rules::plan::desired_node_pool;
use bc_domain::{PoolId, ProviderError, ResourceState, SubstrateNaming, Timestamp};

use crate::reconciler::{Activation, Deps, Outcome, ReconcileError, Reconciler};
use crate::shared::{Entropy, Sessions, UpgradeChecks, converging, live_account, own_error, waits};
use decide::{Progress, Target};

/// Returns the object's own error as the run's progress, or the retried error.
macro_rules! provider {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return $crate::substrates::failed(e),
        }
    };
    (stop $e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return $crate::substrates::failed(e).map(Some),
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

/// What a failed provider call means for the run: the provider's refusal (not asked
/// again at this pool generation), refused credentials (the substrate's error, looked
/// at again once the account's token may have changed), or a retried activation.
fn failed(e: ProviderError) -> Result<Progress, ReconcileError> {
    match e {
        ProviderError::Refused { message } => Ok(Progress::refused(message)),
        other => own_error(other).map(Progress::error),
    }
}

/// The outcome of a cluster API failure: the substrate's error when retrying cannot fix
/// it, else a retried activation.
fn cluster_failure(e: ClusterError) -> Result<Progress, ReconcileError> {
    match e {
        ClusterError::Provider(p) => failed(p),
        ClusterError::Refused(m) => Ok(Progress::error(format!("the cluster's API refused: {m}"))),
        other => Err(ReconcileError::Other(other.to_string())),
    }
}

mod cluster;
mod in_cluster;
mod node_pools;
mod teardown;
mod upgrade;

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
            kept_namespace: None,
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
    /// Why teardown left the pool's Namespace in place, when it did (its event).
    kept_namespace: Option<String>,
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
        let ms = u64::try_from(self.now.unix_ms()).unwrap_or(0);
        let id = bc_domain::EventId::generate(ms, self.r.entropy.u128());
        bc_domain::recipes::substrate_event(row, id, self.now)
    }

    /// Adds the substrate row `next` to `uow`, with its state event when the state moved
    /// or an `error` has a new cause.
    fn with_row(&self, mut uow: UnitOfWork, next: &Substrate) -> UnitOfWork {
        if *next != self.sub {
            uow = uow.write(Write::PutSubstrate(next.clone()));
        }
        let new_cause = next.state == ResourceState::Error && next.message != self.sub.message;
        if next.state != self.sub.state || new_cause {
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

    /// The kept session with provider cluster `cluster_id` (`Sessions::get`): the one
    /// place a run finds it.
    fn session(
        &self,
        account: &ProviderAccount,
        provider: &Arc<dyn ProviderImpl>,
        cluster_id: &str,
    ) -> Arc<ClusterSession> {
        self.r.sessions.get(
            account,
            provider.clone(),
            self.deps.clusters.clone(),
            cluster_id,
            self.now,
        )
    }

    /// The substrate's account, or why its objects cannot be reached (`live_account`).
    async fn account(&self) -> Result<Result<ProviderAccount, String>, ReconcileError> {
        let id = &self.sub.provider_account_id;
        Ok(live_account(id, self.deps.store.account_get_any(id).await?))
    }

    async fn converge(&mut self, policy: &PoolPolicy) -> Result<Progress, ReconcileError> {
        let Some(sp) = &policy.substrate else { return Ok(Progress::error("no substrate")) };
        if let Some(m) = decide::standing_refusal(&self.sub, self.pool_generation) {
            return Ok(Progress::refused(m));
        }
        if !decide::mode_matches(&self.sub, sp) {
            return Ok(Progress::error(format!(
                "the substrate was made in {:?} mode and the policy now asks for the other: remove the substrate from the pool's policy, wait for it to be deleted, then add it again",
                self.sub.mode
            )));
        }
        let account = match self.account().await? {
            Ok(a) => a,
            Err(why) => {
                return Ok(Progress::error(format!(
                    "{why}: give the pool's substrate another account"
                )));
            }
        };
        let provider = provider!(self.deps.observer.provider(&account).await);
        let naming = SubstrateNaming::of(&provider.offer());
        let desired: Vec<NodePoolRequest> = policy
            .flavors
            .iter()
            .filter_map(|f| desired_node_pool(&self.pool_id(), naming, f))
            .collect();
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
        let rows =
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
                    crate::clusters::decide::at_work(cluster.name.as_str(), pc.message.as_deref()),
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
                let next = match sp.cluster {
                    ClusterPolicy::Create(_) => {
                        "it is made again once gone; archive the pool to stop that"
                    }
                    ClusterPolicy::Adopt(_) => "archive the pool or remove its substrate",
                };
                return Ok(Progress::error(format!(
                    "cluster {} ({}) is being deleted at the provider outside this system: {next}",
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
                &rows,
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
                self.act.ensure_held(self.deps).await?;
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
        let session = self.session(&account, &provider, &pc.id);
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

    /// Records where a converge run got to.
    async fn finish(&mut self, progress: Progress) -> Result<Outcome, ReconcileError> {
        let (state, message, generation) =
            decide::converged_state(&self.sub, &progress, self.join.as_ref(), self.pool_generation);
        // A refusal stands at this pool generation; anything else ends one.
        let refused = matches!(progress, Progress::Refused { .. }).then_some(self.pool_generation);
        // An error or a standing refusal stops the run before any upgrade (nothing goes
        // on until it is fixed), so a drain wait recorded earlier ends with it: bookings
        // are taken again (as when the upgrade call itself fails so); the drain is
        // recorded again, before any upgrade, once the run gets there.
        if matches!(progress, Progress::Refused { .. } | Progress::Error { .. }) {
            self.upgrade = None;
        }
        let current = Substrate { refused_generation: refused, ..self.sub.clone() };
        let next = decide::next_row(
            &current,
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
            Progress::Error { message } => Outcome::Failing { after: waits::ERROR, message },
            // Nothing to look at until the policy changes, which enqueues the substrate.
            Progress::Refused { .. } => Outcome::Steady,
        })
    }
}

/// The pools' flavors as stored, named as `naming` says (used by tests to build
/// expectations).
pub fn desired_pools(pool: &Pool, naming: SubstrateNaming) -> Vec<NodePoolRequest> {
    pool.policy.flavors.iter().filter_map(|f| desired_node_pool(&pool.pool_id, naming, f)).collect()
}
