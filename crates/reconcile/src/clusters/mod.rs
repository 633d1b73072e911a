//! `kubernetes.clusters` (SPEC §7, §8): converges a tenant's cluster — created with its
//! first node pools in the create call, upgraded, given a high-availability control
//! plane, deleted — and keeps every cluster row's state: `updating` while any of its
//! pools converges, `error` naming a refused pool, `ready` otherwise. Adopted clusters
//! are only observed. The provider's own pools are recorded as read-only rows.
//!
//! Invariants: a cluster a substrate created is that substrate reconciler's and is left
//! alone here; the cluster's name is recorded (its row) before it is made, and a row
//! without a provider id looks the name up before it creates; an adopted cluster is
//! never changed or deleted at the provider (its row closes when no substrate uses it);
//! a refused create is recorded once (the cluster and its first pools `error`, stamped
//! at their generations) and not asked again until one of them changes; throttling and
//! 5xx are retried by the runtime, never shown as refusals.

pub mod decide;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bc_domain::model::{
    ClusterMode, ClusterOrigin, KubernetesCluster, NodePool, NodePoolOrigin, ObservedStatus,
    ProviderAccount,
};
use bc_domain::policy::UpgradePolicy;
use bc_domain::ports::{
    CreateClusterRequest, PAGE_SIZE_MAX, PageRequest, ProviderCluster, ProviderClusterState,
    ProviderImpl, UnitOfWork, UpdateClusterRequest, WorkKind, Write,
};
use bc_domain::rules::drain::{UpgradeDecision, pool_behind, upgrade_decision, wants_upgrade};
use bc_domain::rules::plan::cluster_created_for;
use bc_domain::{ClusterId, NodePoolId, NodePoolState, ProviderError, ResourceState};

use crate::reconciler::{Activation, Deps, Outcome, ReconcileError, Reconciler};
use crate::shared::records::{
    cluster_closed, cluster_status, node_pool_request, with_a_first_node,
};
use crate::shared::{
    Entropy, STEADY_LISTING_MAX_AGE, UpgradeChecks, cluster_event, converging, live_account,
    node_pool_event, own_error, pool_upgrade_key, waits,
};
use decide::Derived;

/// The tag every cluster this reconciler creates carries, so a recorded name found at
/// the provider is known to be ours: `better-compute-cluster-<cluster id>`.
pub fn cluster_tag(id: &ClusterId) -> String {
    format!("better-compute-cluster-{}", id.dashed())
}

/// The `kubernetes.clusters` reconciler.
pub struct ClusterReconciler {
    entropy: Arc<dyn Entropy>,
    upgrades: UpgradeChecks,
}

impl ClusterReconciler {
    /// A reconciler drawing event ids from `entropy`.
    pub fn new(entropy: Arc<dyn Entropy>) -> Self {
        Self { entropy, upgrades: UpgradeChecks::default() }
    }
}

/// One activation.
struct Run<'a> {
    r: &'a ClusterReconciler,
    deps: &'a Deps,
    act: &'a Activation,
    row: KubernetesCluster,
}

/// Returns the cluster's own error (or retries the rest).
macro_rules! provider {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            // One change at a time at the provider (SPEC §8): wait, never `error`.
            Err(ProviderError::Busy { message }) => {
                let m = format!("waiting for the provider to finish an earlier change: {message}");
                return Ok((Derived::Converging(m), waits::CLUSTER));
            }
            Err(e) => return own_error(e).map(|m| (Derived::Error(m), waits::ERROR)),
        }
    };
}

impl Run<'_> {
    async fn commit(&self, uow: UnitOfWork) -> Result<(), ReconcileError> {
        if !uow.is_empty() {
            self.deps.store.commit(uow.fenced(self.act.fence.clone())).await?;
        }
        Ok(())
    }

    async fn rows(&self) -> Result<Vec<NodePool>, ReconcileError> {
        let mut out = Vec::new();
        let mut page = PageRequest::first(PAGE_SIZE_MAX);
        loop {
            let p = self.deps.store.node_pool_list_by_cluster(&self.row.cluster_id, &page).await?;
            out.extend(p.items.iter().cloned());
            match p.next_request(PAGE_SIZE_MAX) {
                Some(next) => page = next,
                None => return Ok(out),
            }
        }
    }

    /// Writes the derived state (if it changed) with its event.
    async fn show(&self, derived: &Derived) -> Result<(), ReconcileError> {
        let (state, message) = decide::shown(&self.row, derived);
        let Some(status) = cluster_status(&self.row, state, message.clone(), self.act.now) else {
            return Ok(());
        };
        let moved = status.state != self.row.status.state;
        let mut uow = UnitOfWork::new().write(Write::SetClusterStatus {
            cluster_id: self.row.cluster_id.clone(),
            provider_cluster_id: None,
            version: None,
            status,
        });
        if moved
            && let Some(e) =
                cluster_event(&*self.r.entropy, &self.row, state, message.as_deref(), self.act.now)
        {
            uow = uow.event(e);
        }
        self.commit(uow).await
    }

    /// Closes the row and every live node pool row of it (each through `deleting`).
    async fn close(&self, rows: &[NodePool]) -> Result<Outcome, ReconcileError> {
        let now = self.act.now;
        let mut uow = self.close_rows(UnitOfWork::new(), rows);
        for status in cluster_closed(&self.row, now) {
            let deleted = status.state == ResourceState::Deleted;
            uow = uow.write(Write::SetClusterStatus {
                cluster_id: self.row.cluster_id.clone(),
                provider_cluster_id: None,
                version: None,
                status,
            });
            if deleted
                && let Some(e) =
                    cluster_event(&*self.r.entropy, &self.row, ResourceState::Deleted, None, now)
            {
                uow = uow.event(e);
            }
        }
        self.commit(uow).await?;
        Ok(Outcome::Gone)
    }

    /// Adds to `uow` the closing of `rows` (each through `deleting`), with the
    /// `deleted` event of the pools made through this system.
    fn close_rows(&self, mut uow: UnitOfWork, rows: &[NodePool]) -> UnitOfWork {
        let now = self.act.now;
        for r in rows {
            for state in [NodePoolState::Deleting, NodePoolState::Deleted] {
                if r.state == NodePoolState::Deleting && state == NodePoolState::Deleting {
                    continue;
                }
                uow = uow.write(Write::SetNodePoolStatus {
                    node_pool_id: r.node_pool_id.clone(),
                    provider_node_pool_id: None,
                    nodes_listed: 0,
                    nodes_ready: 0,
                    state,
                    message: None,
                    observed_generation: r.observed_generation,
                    updated_at: now,
                });
            }
            let gone = NodePool { state: NodePoolState::Deleted, message: None, ..r.clone() };
            if r.origin == NodePoolOrigin::Created
                && let Some(e) = node_pool_event(&*self.r.entropy, &gone, now)
            {
                uow = uow.event(e);
            }
        }
        uow
    }

    /// Records that the provider (or this system, for a create no provider could
    /// carry out) refused the cluster's create: the cluster and the first pools that
    /// went with it are `error`, stamped at their generations, so the same create is not
    /// asked again until one of them changes ([`decide::create_refused`]).
    async fn refuse_create(
        &self,
        message: String,
        first: &[&NodePool],
    ) -> Result<Outcome, ReconcileError> {
        let now = self.act.now;
        let status = ObservedStatus {
            state: ResourceState::Error,
            message: Some(message.clone()),
            observed_generation: self.row.generation,
            updated_at: now,
        };
        let mut uow = UnitOfWork::new().write(Write::SetClusterStatus {
            cluster_id: self.row.cluster_id.clone(),
            provider_cluster_id: None,
            version: None,
            status,
        });
        if self.row.status.state != ResourceState::Error
            && let Some(e) = cluster_event(
                &*self.r.entropy,
                &self.row,
                ResourceState::Error,
                Some(&message),
                now,
            )
        {
            uow = uow.event(e);
        }
        for r in first {
            let refused = NodePool {
                state: NodePoolState::Error,
                message: Some(format!(
                    "refused with the create of cluster {}: {message}",
                    self.row.name
                )),
                observed_generation: r.generation,
                ..(*r).clone()
            };
            uow = uow.write(Write::SetNodePoolStatus {
                node_pool_id: r.node_pool_id.clone(),
                provider_node_pool_id: None,
                nodes_listed: 0,
                nodes_ready: 0,
                state: refused.state,
                message: refused.message.clone(),
                observed_generation: refused.observed_generation,
                updated_at: now,
            });
            if r.state != NodePoolState::Error
                && let Some(e) = node_pool_event(&*self.r.entropy, &refused, now)
            {
                uow = uow.event(e);
            }
        }
        self.commit(uow).await?;
        Ok(Outcome::Steady)
    }

    /// The provider cluster by the recorded name, when it carries our tag.
    async fn find_by_name(
        &self,
        account: &ProviderAccount,
    ) -> Result<Result<Option<ProviderCluster>, ProviderError>, ReconcileError> {
        let listing = match self.deps.observer.clusters(account, Duration::ZERO).await {
            Ok(l) => l,
            Err(e) => return Ok(Err(e)),
        };
        Ok(Ok(listing.items.iter().find(|c| c.name == self.row.name.as_str()).cloned()))
    }

    async fn delete(
        &self,
        account: &ProviderAccount,
        provider: &Arc<dyn ProviderImpl>,
        rows: &[NodePool],
    ) -> Result<Outcome, ReconcileError> {
        let tag = cluster_tag(&self.row.cluster_id);
        let id = match &self.row.provider_cluster_id {
            Some(id) => Some(id.clone()),
            None => match self.find_by_name(account).await? {
                Ok(found) => found.filter(|c| c.tags.contains(&tag)).map(|c| c.id),
                Err(e) => {
                    return self
                        .stopped(own_error(e).map(|m| (Derived::Error(m), waits::ERROR))?)
                        .await;
                }
            },
        };
        let Some(id) = id else { return self.close(rows).await };
        let k = provider.kubernetes();
        match k.get_cluster(&id).await {
            Err(ProviderError::NotFound) => return self.close(rows).await,
            Err(e) => {
                return self
                    .stopped(own_error(e).map(|m| (Derived::Error(m), waits::ERROR))?)
                    .await;
            }
            Ok(pc)
                if matches!(
                    pc.state,
                    ProviderClusterState::Deleting | ProviderClusterState::Deleted
                ) => {}
            Ok(_) => {
                self.act.ensure_held(self.deps).await?;
                match k.delete_cluster(&id).await {
                    Ok(()) | Err(ProviderError::NotFound) => {
                        self.deps.observer.invalidate(account);
                    }
                    Err(e) => {
                        return self
                            .stopped(own_error(e).map(|m| (Derived::Error(m), waits::ERROR))?)
                            .await;
                    }
                }
            }
        }
        if let Some(status) = cluster_status(
            &self.row,
            ResourceState::Deleting,
            Some(format!("deleting cluster {}", self.row.name)),
            self.act.now,
        ) {
            let uow = UnitOfWork::new().write(Write::SetClusterStatus {
                cluster_id: self.row.cluster_id.clone(),
                provider_cluster_id: Some(id),
                version: None,
                status,
            });
            self.commit(uow).await?;
        }
        Ok(converging(waits::CLUSTER))
    }

    /// Shows `derived` and answers with its wait.
    async fn stopped(
        &self,
        (derived, after): (Derived, Duration),
    ) -> Result<Outcome, ReconcileError> {
        self.show(&derived).await?;
        Ok(match derived {
            Derived::Ready => Outcome::Steady,
            _ => converging(after),
        })
    }

    /// Creates the cluster with its first pools (or finds the one a lost answer made),
    /// and records the provider ids. The first pools deleted before the cluster was made
    /// are closed here (they leave the create), unless an earlier create that lost its
    /// answer made them: then they are deleted like any pool.
    async fn make(
        &self,
        account: &ProviderAccount,
        provider: &Arc<dyn ProviderImpl>,
        rows: &[NodePool],
    ) -> Result<Outcome, ReconcileError> {
        let (dropped, first): (Vec<&NodePool>, Vec<&NodePool>) =
            decide::tenant_pools(rows).partition(|r| r.delete_requested);
        let dropped: Vec<NodePool> = dropped.into_iter().cloned().collect();
        let tag = cluster_tag(&self.row.cluster_id);
        let found = match self.find_by_name(account).await? {
            Ok(found) => found,
            Err(e) => {
                return self
                    .stopped(own_error(e).map(|m| (Derived::Error(m), waits::ERROR))?)
                    .await;
            }
        };
        // A pool deleted before the cluster was made leaves the create. One an earlier
        // create (whose answer was lost) may have made stays open until the cluster
        // is found or known not to be ours: then the node pool reconciler deletes it.
        if !dropped.is_empty() && !found.as_ref().is_some_and(|c| c.tags.contains(&tag)) {
            self.commit(self.close_rows(UnitOfWork::new(), &dropped)).await?;
        }
        let made = match found {
            Some(c) if c.tags.contains(&tag) => c,
            Some(c) => {
                let m = format!(
                    "a cluster named {} ({}) already exists in the provider account and was not made by this system: delete this cluster and create it with another name",
                    c.name, c.id
                );
                return self.refuse_create(m, &first).await;
            }
            None => {
                let mode = self.row.mode;
                if mode == ClusterMode::Autopilot && provider.offer().lacks_mode(mode).is_some() {
                    let m = format!(
                        "provider account {} offers no autopilot clusters: delete this cluster and create a standard one",
                        self.row.provider_account_id
                    );
                    return self.refuse_create(m, &first).await;
                }
                if mode == ClusterMode::Standard && first.is_empty() {
                    let m = "a standard cluster needs at least one node pool: add one".to_owned();
                    return self.refuse_create(m, &first).await;
                }
                let req = CreateClusterRequest {
                    name: self.row.name.to_string(),
                    region: self.row.region.clone(),
                    version: self
                        .row
                        .desired_version
                        .clone()
                        .unwrap_or_else(|| bc_domain::policy::VERSION_LATEST.to_owned()),
                    high_availability: self.row.high_availability,
                    mode,
                    tags: vec![tag],
                    node_pools: with_a_first_node(
                        first.iter().map(|r| node_pool_request(r)).collect(),
                    ),
                };
                self.act.ensure_held(self.deps).await?;
                match provider.kubernetes().create_cluster(&req).await {
                    Ok(made) => {
                        self.deps.observer.invalidate(account);
                        made
                    }
                    Err(ProviderError::Refused { message }) => {
                        return self.refuse_create(message, &first).await;
                    }
                    Err(e) => {
                        let failed = own_error(e).map(|m| (Derived::Error(m), waits::ERROR))?;
                        return self.stopped(failed).await;
                    }
                }
            }
        };
        let message = format!("cluster {} is being provisioned by the provider", self.row.name);
        // Never made before, so never ready: provisioning, whatever a refusal stamped.
        let status = ObservedStatus {
            state: ResourceState::Provisioning,
            message: Some(message.clone()),
            observed_generation: 0,
            updated_at: self.act.now,
        };
        let mut uow = UnitOfWork::new().write(Write::SetClusterStatus {
            cluster_id: self.row.cluster_id.clone(),
            provider_cluster_id: Some(made.id.clone()),
            version: Some(made.version.clone()),
            status,
        });
        for r in &first {
            let refused = r.state == NodePoolState::Error;
            if let Some(p) = made.node_pools.iter().find(|p| p.name == r.name) {
                uow = uow.write(Write::SetNodePoolStatus {
                    node_pool_id: r.node_pool_id.clone(),
                    provider_node_pool_id: Some(p.id.clone()),
                    nodes_listed: r.nodes_listed,
                    nodes_ready: r.nodes_ready,
                    // A refusal that went with an earlier create does not stand.
                    state: if refused { NodePoolState::Pending } else { r.state },
                    message: if refused { None } else { r.message.clone() },
                    observed_generation: if refused { 0 } else { r.observed_generation },
                    updated_at: self.act.now,
                });
            }
            uow = uow.enqueue(WorkKind::NodePools, r.node_pool_id.as_str(), self.act.now);
        }
        // Found by its name (an earlier create's answer was lost): pools deleted since
        // are in it, and go by the node pool reconciler's delete (found by their tag).
        for r in &dropped {
            uow = uow.enqueue(WorkKind::NodePools, r.node_pool_id.as_str(), self.act.now);
        }
        self.commit(uow).await?;
        Ok(converging(waits::CLUSTER))
    }

    /// The provider cluster: from the shared listing while the row is steady (silence,
    /// or a cluster listed with its Nodes unread, read by a GET), else by a GET.
    async fn observe(
        &self,
        account: &ProviderAccount,
        provider: &Arc<dyn ProviderImpl>,
        id: &str,
    ) -> Result<Option<ProviderCluster>, ProviderError> {
        // An autopilot cluster's nodes are counted from the cluster itself, which a
        // listing does not read: it is read with a GET on every look.
        let steady = self.row.status.state == ResourceState::Ready
            && self.row.status.observed_generation == self.row.generation
            && self.row.mode != ClusterMode::Autopilot;
        if steady {
            let max_age = crate::observe::max_age_since(
                self.row.status.updated_at,
                self.act.now,
                STEADY_LISTING_MAX_AGE,
            );
            let listing = self.deps.observer.clusters(account, max_age).await?;
            if let Some(c) = listing.cluster(id) {
                return Ok(Some(c.clone()));
            }
        }
        match provider.kubernetes().get_cluster(id).await {
            Ok(c) => Ok(Some(c)),
            Err(ProviderError::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A running cluster made here: its version and control plane, then its pools.
    async fn converge_running(
        &self,
        account: &ProviderAccount,
        provider: &Arc<dyn ProviderImpl>,
        pc: &ProviderCluster,
        rows: &[NodePool],
    ) -> Result<(Derived, Duration), ReconcileError> {
        let now = self.act.now;
        // `latest` resolved once, when the cluster was made (SPEC §6).
        let wanted = self.row.desired_version.as_deref().filter(|v| wants_upgrade(v, &pc.version));
        if let Some(desired) = wanted {
            let offered = match self.r.upgrades.recent(account, &pc.version, desired, now) {
                Some(o) => o,
                None => {
                    let o = provider!(provider.kubernetes().available_upgrades(&pc.id).await);
                    self.r.upgrades.record(account, &pc.version, desired, now, o.clone());
                    o
                }
            };
            match upgrade_decision(
                UpgradePolicy::Immediate,
                desired,
                &pc.version,
                &offered,
                0,
                None,
                now,
            ) {
                UpgradeDecision::Upgrade { version } => {
                    // Accepted before and the provider still shows the old version: it is
                    // under way, not to be asked again.
                    if !self.r.upgrades.under_way(&pc.id, &version, now) {
                        self.act.ensure_held(self.deps).await?;
                        provider!(provider.kubernetes().upgrade_cluster(&pc.id, &version).await);
                        self.r.upgrades.asked(&pc.id, &version, now);
                    }
                    self.r.upgrades.forget(account, &pc.version);
                    self.deps.observer.invalidate(account);
                    return Ok((
                        Derived::Converging(format!(
                            "upgrading cluster {} to {version}",
                            self.row.name
                        )),
                        waits::CLUSTER,
                    ));
                }
                UpgradeDecision::Invalid { message } => {
                    return Ok((
                        Derived::Error(message.replace(
                            "policy.substrate.cluster.create.version",
                            "the cluster's version (kubernetesClusters.upgrade)",
                        )),
                        waits::ERROR,
                    ));
                }
                UpgradeDecision::UpToDate | UpgradeDecision::Wait { .. } => {}
            }
        }
        // Where each node pool has its own version (GKE), the pools follow the control
        // plane once it runs its version: one pool, one operation at a time (the provider
        // shows the operation in flight as the cluster's upgrade, so no second is asked).
        if let Some(p) = pool_behind(provider.offer().pool_upgrades, pc) {
            let version = pc.version.as_str();
            let key = pool_upgrade_key(&pc.id, &p.id);
            if !self.r.upgrades.under_way(&key, version, now) {
                self.act.ensure_held(self.deps).await?;
                provider!(provider.kubernetes().upgrade_node_pool(&pc.id, &p.id, version).await);
                self.r.upgrades.asked(&key, version, now);
            }
            self.deps.observer.invalidate(account);
            return Ok((
                Derived::Converging(format!(
                    "upgrading node pool {} of cluster {} to {version}",
                    p.name, self.row.name
                )),
                waits::CLUSTER,
            ));
        }
        if self.row.high_availability && !pc.high_availability {
            let mut req = UpdateClusterRequest::keeping(pc);
            req.high_availability = Some(true);
            self.act.ensure_held(self.deps).await?;
            provider!(provider.kubernetes().update_cluster(&pc.id, &req).await);
            self.deps.observer.invalidate(account);
            return Ok((
                Derived::Converging(format!(
                    "turning on the high-availability control plane of cluster {}",
                    self.row.name
                )),
                waits::CLUSTER,
            ));
        }
        Ok(match decide::from_pools(rows) {
            // A pool's refusal waits for the tenant: the pool's change wakes the cluster.
            Derived::Error(m) => (Derived::Error(m), Duration::ZERO),
            Derived::Converging(m) => (Derived::Converging(m), waits::NODE_POOL),
            Derived::Ready => (Derived::Ready, Duration::ZERO),
        })
    }

    async fn run(&self) -> Result<Outcome, ReconcileError> {
        let rows = self.rows().await?;
        if self.row.origin == ClusterOrigin::Adopted && self.row.substrate_pool_ids.is_empty() {
            // No substrate uses it any more: forget it, touching nothing at the provider.
            return self.close(&rows).await;
        }
        let id = &self.row.provider_account_id;
        let account = match live_account(id, self.deps.store.account_get_any(id).await?) {
            Ok(a) => a,
            Err(_) if self.row.delete_requested => return self.close(&rows).await,
            Err(why) => return self.stopped((Derived::Error(why), waits::ERROR)).await,
        };
        let provider = match self.deps.observer.provider(&account).await {
            Ok(p) => p,
            Err(e) => {
                return self
                    .stopped(own_error(e).map(|m| (Derived::Error(m), waits::ERROR))?)
                    .await;
            }
        };
        if self.row.delete_requested && self.row.origin == ClusterOrigin::Created {
            return self.delete(&account, &provider, &rows).await;
        }
        let Some(id) = self.row.provider_cluster_id.clone() else {
            if decide::create_refused(&self.row, &rows) {
                // Refused as it stands: nothing to ask until the tenant changes it.
                return Ok(Outcome::Steady);
            }
            return self.make(&account, &provider, &rows).await;
        };
        let pc = match self.observe(&account, &provider, &id).await {
            Ok(Some(pc)) => pc,
            Ok(None) => {
                let m = format!(
                    "cluster {} ({id}) no longer exists at the provider: it was deleted outside this system; delete it here",
                    self.row.name
                );
                return self.stopped((Derived::Error(m), waits::ERROR)).await;
            }
            Err(e) => {
                return self
                    .stopped(own_error(e).map(|m| (Derived::Error(m), waits::ERROR))?)
                    .await;
            }
        };
        let ms = u64::try_from(self.act.now.unix_ms()).unwrap_or(0);
        let entropy = &*self.r.entropy;
        let sync =
            decide::provider_rows(&self.row, &rows, &pc.node_pools, self.act.now, &mut || {
                NodePoolId::generate(ms, entropy.u128())
            });
        let mut uow = UnitOfWork::new();
        for w in sync.writes {
            uow = uow.write(w);
        }
        // An autopilot cluster's nodes as counted now (kept when they could not be).
        if let Some(nodes) = pc.nodes.filter(|n| self.row.nodes != Some(*n)) {
            uow = uow
                .write(Write::SetClusterNodes { cluster_id: self.row.cluster_id.clone(), nodes });
        }
        if pc.version != self.row.version.clone().unwrap_or_default() {
            uow = uow.write(Write::SetClusterStatus {
                cluster_id: self.row.cluster_id.clone(),
                provider_cluster_id: None,
                version: Some(pc.version.clone()),
                status: self.row.status.clone(),
            });
        }
        self.commit(uow).await?;
        let step =
            match decide::from_provider(self.row.name.as_str(), &pc.state, pc.message.as_deref()) {
                Some(d @ Derived::Error(_)) => (d, waits::ERROR),
                Some(d) => (d, waits::CLUSTER),
                // Adopted: never changed here, but its state follows the pools made
                // through this system (the substrates wake it when theirs move).
                None if self.row.origin == ClusterOrigin::Adopted => {
                    (decide::from_pools(&rows), Duration::ZERO)
                }
                None => self.converge_running(&account, &provider, &pc, &rows).await?,
            };
        self.show(&step.0).await?;
        Ok(match step {
            (Derived::Ready, _) => Outcome::Steady,
            (_, d) if d.is_zero() => Outcome::Steady,
            (_, after) => converging(after),
        })
    }
}

#[async_trait]
impl Reconciler for ClusterReconciler {
    fn kind(&self) -> WorkKind {
        WorkKind::Clusters
    }

    async fn reconcile(&self, deps: &Deps, act: &Activation) -> Result<Outcome, ReconcileError> {
        let Ok(id) = ClusterId::parse(act.key()) else { return Ok(Outcome::Gone) };
        let Some(row) = deps.store.cluster_get_any(&id).await? else { return Ok(Outcome::Gone) };
        if row.status.state == ResourceState::Deleted {
            return Ok(Outcome::Gone);
        }
        // A cluster a substrate created is converged by the substrate reconciler.
        let substrates = deps.store.substrate_list_by_cluster(&id).await?;
        if cluster_created_for(&substrates, None).is_some() {
            return Ok(Outcome::Gone);
        }
        Run { r: self, deps, act, row }.run().await
    }
}
