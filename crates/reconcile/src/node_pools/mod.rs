//! `kubernetes.nodepools` (SPEC §8): converges a tenant's node pool of a standard
//! cluster — made (after its cluster), resized, removed — and reports it; the cluster
//! reconciler is woken on every state move so the cluster re-derives `updating`,
//! `ready` or `error`.
//!
//! Invariants: rows with `managedBy` (a substrate's) and the provider's own pools are
//! never acted on here, nor are the pools of a cluster not made yet (they go into its
//! create, which the cluster reconciler asks); a pool's name is recorded (the row) before it is made, and a
//! row without a provider id looks its name up before it creates, so a lost answer
//! never makes a second pool; a refusal is the pool's `error` and is not asked again
//! until the tenant changes or deletes the pool; throttling and 5xx are retried by the
//! runtime and never shown as refusals.

pub mod decide;

use std::sync::Arc;

use async_trait::async_trait;
use bc_domain::model::{ClusterMode, NodePool, NodePoolOrigin, ProviderAccount};
use bc_domain::ports::{ProviderImpl, ProviderNodePool, UnitOfWork, WorkKind, Write};
use bc_domain::{NodePoolId, NodePoolState, ProviderError, ResourceState};

use crate::reconciler::{Activation, Deps, Outcome, ReconcileError, Reconciler};
use crate::shared::records::{node_pool_request, node_pool_tag};
use crate::shared::{
    Entropy, STEADY_LISTING_MAX_AGE, converging, live_account, node_pool_event, own_error, waits,
};
use decide::Next;

/// The `kubernetes.nodepools` reconciler.
pub struct NodePoolReconciler {
    entropy: Arc<dyn Entropy>,
}

impl NodePoolReconciler {
    /// A reconciler drawing event ids from `entropy`.
    pub fn new(entropy: Arc<dyn Entropy>) -> Self {
        Self { entropy }
    }
}

/// A status to write for a row.
struct Status {
    provider_id: Option<String>,
    state: NodePoolState,
    message: Option<String>,
    listed: u32,
    ready: u32,
    observed_generation: u64,
}

impl NodePoolReconciler {
    /// Commits the row's status if it changed, with its event when the state moved and
    /// a wake-up of its cluster.
    async fn record(
        &self,
        deps: &Deps,
        act: &Activation,
        row: &NodePool,
        s: Status,
    ) -> Result<(), ReconcileError> {
        let state = if row.state.can_transition(s.state) { s.state } else { row.state };
        let provider_id = s.provider_id.or_else(|| row.provider_node_pool_id.clone());
        let same = row.state == state
            && row.message == s.message
            && row.provider_node_pool_id == provider_id
            && (row.nodes_listed, row.nodes_ready) == (s.listed, s.ready)
            && row.observed_generation == s.observed_generation;
        if same {
            return Ok(());
        }
        let mut uow = UnitOfWork::new().write(Write::SetNodePoolStatus {
            node_pool_id: row.node_pool_id.clone(),
            provider_node_pool_id: provider_id.clone(),
            nodes_listed: s.listed,
            nodes_ready: s.ready,
            state,
            message: s.message.clone(),
            observed_generation: s.observed_generation,
            updated_at: act.now,
        });
        if state != row.state {
            let moved = NodePool {
                state,
                message: s.message,
                provider_node_pool_id: provider_id,
                ..row.clone()
            };
            if let Some(e) = node_pool_event(&*self.entropy, &moved, act.now) {
                uow = uow.event(e);
            }
        }
        // The cluster re-derives `updating`/`ready`/`error` from its pools' rows.
        uow = uow.enqueue(WorkKind::Clusters, row.cluster_id.as_str(), act.now);
        deps.store.commit(uow.fenced(act.fence.clone())).await?;
        Ok(())
    }

    /// The pool's error: shown, stamped with the generation it happened at.
    async fn refused(
        &self,
        deps: &Deps,
        act: &Activation,
        row: &NodePool,
        message: String,
    ) -> Result<Outcome, ReconcileError> {
        let status = held(row, None, NodePoolState::Error, message, row.generation);
        self.record(deps, act, row, status).await?;
        Ok(Outcome::Steady)
    }

    /// The provider is busy with an earlier change of the cluster (SPEC §8): the pool
    /// waits, `updating` (still `pending` if never made) with the provider's words, and
    /// the change is asked again after a short wait. Never an `error`.
    async fn busy(
        &self,
        deps: &Deps,
        act: &Activation,
        row: &NodePool,
        message: String,
    ) -> Result<Outcome, ReconcileError> {
        let state = match row.state {
            NodePoolState::Pending | NodePoolState::Deleting => row.state,
            _ => NodePoolState::Updating,
        };
        let status = Status {
            provider_id: row.provider_node_pool_id.clone(),
            state,
            message: Some(format!(
                "waiting for the provider to finish an earlier change: {message}"
            )),
            listed: row.nodes_listed,
            ready: row.nodes_ready,
            observed_generation: row.observed_generation,
        };
        self.record(deps, act, row, status).await?;
        Ok(converging(waits::NODE_POOL))
    }

    /// Closes a row: `deleting` (if not yet), then `deleted`.
    async fn closed(
        &self,
        deps: &Deps,
        act: &Activation,
        row: &NodePool,
    ) -> Result<Outcome, ReconcileError> {
        let mut row = row.clone();
        if row.state != NodePoolState::Deleting {
            self.record(deps, act, &row, gone(&row, NodePoolState::Deleting)).await?;
            row.state = NodePoolState::Deleting;
            row.message = None;
            row.nodes_listed = 0;
            row.nodes_ready = 0;
        }
        self.record(deps, act, &row, gone(&row, NodePoolState::Deleted)).await?;
        Ok(Outcome::Gone)
    }

    /// The provider pool of the row: from the shared listing while the row is steady
    /// (a listing's silence, or its cluster listed with its Nodes unread, read by a GET),
    /// else by a GET.
    async fn observe(
        &self,
        deps: &Deps,
        account: &ProviderAccount,
        provider: &Arc<dyn ProviderImpl>,
        cluster_id: &str,
        row: &NodePool,
        id: &str,
    ) -> Result<Option<ProviderNodePool>, ProviderError> {
        let steady = row.state == NodePoolState::Ready && row.observed_generation == row.generation;
        if steady {
            let max_age = crate::observe::max_age_since(
                row.updated_at,
                deps.clock.now(),
                STEADY_LISTING_MAX_AGE,
            );
            let listing = deps.observer.clusters(account, max_age).await?;
            let found =
                listing.cluster(cluster_id).and_then(|c| c.node_pools.iter().find(|p| p.id == id));
            if let Some(p) = found {
                return Ok(Some(p.clone()));
            }
        }
        match provider.kubernetes().get_node_pool(cluster_id, id).await {
            Ok(p) => Ok(Some(p)),
            Err(ProviderError::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A status that keeps the row's node counts, with `message`.
fn held(
    row: &NodePool,
    provider_id: Option<String>,
    state: NodePoolState,
    message: String,
    observed_generation: u64,
) -> Status {
    Status {
        provider_id,
        state,
        message: Some(message),
        listed: row.nodes_listed,
        ready: row.nodes_ready,
        observed_generation,
    }
}

fn gone(row: &NodePool, state: NodePoolState) -> Status {
    Status {
        provider_id: None,
        state,
        message: None,
        listed: 0,
        ready: 0,
        observed_generation: row.observed_generation,
    }
}

/// Returns the pool's refusal (or retries the rest).
macro_rules! provider {
    ($this:expr, $deps:expr, $act:expr, $row:expr, $e:expr) => {
        match $e {
            Ok(v) => v,
            Err(ProviderError::Busy { message }) => {
                return $this.busy($deps, $act, $row, message).await;
            }
            Err(e) => return $this.refused($deps, $act, $row, own_error(e)?).await,
        }
    };
}

#[async_trait]
impl Reconciler for NodePoolReconciler {
    fn kind(&self) -> WorkKind {
        WorkKind::NodePools
    }

    async fn reconcile(&self, deps: &Deps, act: &Activation) -> Result<Outcome, ReconcileError> {
        let Ok(id) = NodePoolId::parse(act.key()) else { return Ok(Outcome::Gone) };
        let Some(row) = deps.store.node_pool_get_any(&id).await? else { return Ok(Outcome::Gone) };
        // A substrate's pools are its reconciler's; the provider's own are read-only.
        if row.state == NodePoolState::Deleted
            || row.managed_by.is_some()
            || row.origin == NodePoolOrigin::Provider
        {
            return Ok(Outcome::Gone);
        }
        let cluster = deps.store.cluster_get_any(&row.cluster_id).await?;
        let Some(cluster) = cluster.filter(|c| c.status.state != ResourceState::Deleted) else {
            return self.closed(deps, act, &row).await;
        };
        if cluster.mode == ClusterMode::Autopilot {
            if decide::refused_at_this_generation(&row) && !row.delete_requested {
                return Ok(Outcome::Steady);
            }
            if row.delete_requested {
                return self.closed(deps, act, &row).await;
            }
            let m = format!(
                "cluster {} is an autopilot cluster, which has no node pools: delete this node pool",
                cluster.name
            );
            return self.refused(deps, act, &row, m).await;
        }
        let Some(pid) = cluster.provider_cluster_id.clone() else {
            // Not made yet: the pool is part of the cluster's create, which the cluster
            // reconciler asks (again, if a refusal stood) with the pool as it is now, or
            // without it once deleted; it wakes this row when the cluster is made.
            let wake =
                UnitOfWork::new().enqueue(WorkKind::Clusters, cluster.cluster_id.as_str(), act.now);
            deps.store.commit(wake.fenced(act.fence.clone())).await?;
            return Ok(Outcome::Steady);
        };
        let id = &cluster.provider_account_id;
        let account = match live_account(id, deps.store.account_get_any(id).await?) {
            Ok(a) => a,
            // Nothing can be asked of the provider: a deletion only closes the row, as
            // the cluster's does.
            Err(_) if row.delete_requested => return self.closed(deps, act, &row).await,
            Err(why) => return self.refused(deps, act, &row, why).await,
        };
        let provider = provider!(self, deps, act, &row, deps.observer.provider(&account).await);
        let k = provider.kubernetes();

        let tag = node_pool_tag(&row.node_pool_id);
        if row.delete_requested {
            let known = match &row.provider_node_pool_id {
                Some(p) => Some(p.clone()),
                // A create whose answer was lost: ours carries our tag; a pool of that
                // name without it is someone else's and stays.
                None => provider!(self, deps, act, &row, k.list_node_pools(&pid).await)
                    .into_iter()
                    .find(|p| p.name == row.name && p.tags.contains(&tag))
                    .map(|p| p.id),
            };
            let Some(npid) = known else { return self.closed(deps, act, &row).await };
            if row.state == NodePoolState::Deleting {
                match k.get_node_pool(&pid, &npid).await {
                    Err(ProviderError::NotFound) => return self.closed(deps, act, &row).await,
                    Err(e) => return self.refused(deps, act, &row, own_error(e)?).await,
                    Ok(_) => return Ok(converging(waits::NODE_POOL)),
                }
            }
            act.ensure_held(deps).await?;
            match k.delete_node_pool(&pid, &npid).await {
                Ok(()) | Err(ProviderError::NotFound) => {}
                Err(e) => return self.refused(deps, act, &row, own_error(e)?).await,
            }
            deps.observer.invalidate(&account);
            let mut s = gone(&row, NodePoolState::Deleting);
            s.provider_id = Some(npid);
            self.record(deps, act, &row, s).await?;
            return Ok(converging(waits::NODE_POOL));
        }
        if decide::refused_at_this_generation(&row) {
            return Ok(Outcome::Steady);
        }

        let observed = match &row.provider_node_pool_id {
            Some(npid) => provider!(
                self,
                deps,
                act,
                &row,
                self.observe(deps, &account, &provider, &pid, &row, npid).await
            ),
            // A create whose answer was lost: look the recorded name up first, and take
            // only a pool carrying our tag.
            None => {
                let listed = provider!(self, deps, act, &row, k.list_node_pools(&pid).await);
                match listed.into_iter().find(|p| p.name == row.name) {
                    Some(p) if !p.tags.contains(&tag) => {
                        let m = format!(
                            "a node pool named {} ({}) already exists in cluster {} and was not made through this system: it is never changed or deleted here; delete this node pool and create it with another name",
                            p.name, p.id, cluster.name
                        );
                        return self.refused(deps, act, &row, m).await;
                    }
                    found => found,
                }
            }
        };
        let observed = match observed {
            Some(p) => p,
            None => {
                act.ensure_held(deps).await?;
                let made = provider!(
                    self,
                    deps,
                    act,
                    &row,
                    k.create_node_pool(&pid, &node_pool_request(&row)).await
                );
                deps.observer.invalidate(&account);
                made
            }
        };
        let next = decide::next(&row, &observed);
        if let Next::Update(req) = &next {
            act.ensure_held(deps).await?;
            provider!(self, deps, act, &row, k.update_node_pool(&pid, &observed.id, req).await);
            deps.observer.invalidate(&account);
        }
        let (state, listed, ready, observed_generation) =
            decide::status(&row, Some(&observed), &next);
        let status = Status {
            provider_id: Some(observed.id.clone()),
            state,
            message: None,
            listed,
            ready,
            observed_generation,
        };
        self.record(deps, act, &row, status).await?;
        Ok(match next {
            Next::Ready => Outcome::Steady,
            _ => converging(waits::NODE_POOL),
        })
    }
}
