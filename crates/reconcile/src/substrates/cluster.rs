//! The substrate's cluster: created for the pool (create mode) or adopted (adopt mode),
//! observed, and its row kept in step with the substrate.
//!
//! Invariant — **crash-safe names**: the create-mode cluster row (its derived name) is
//! committed before the provider call that makes it, and a row without a provider id
//! that an earlier run recorded looks that name up — carrying the pool's tag — before it
//! creates, so a crash never makes a second cluster; a same-named cluster without the
//! tag is never taken over. A row this run committed has had no create sent: it creates
//! without a listing, and a refused create looks the name up to say whose it is.
//! **Desired state wins**: a created cluster the provider no longer has is made again
//! under the same row and name (one `kubernetes.cluster.recreated` event); an adopted
//! one that is gone is the substrate's error naming it, never re-created.

use std::collections::BTreeMap;
use std::sync::Arc;

use bc_domain::SubstrateNaming;
use bc_domain::model::{ClusterMode, KubernetesCluster, NewEvent, ProviderAccount, subjects};
use bc_domain::policy::{AdoptClusterPolicy, CreateClusterPolicy};
use bc_domain::ports::{
    CreateClusterRequest, NodePoolRequest, ProviderCluster, ProviderImpl, UnitOfWork, WorkKind,
    Write,
};
use bc_domain::rules::plan::{cluster_created_for, substrate_tag_for, substrate_tag_pool};
use bc_domain::{ClusterId, PoolId, ProviderError, ResourceState, StoreError, Timestamp};

use super::decide::{self, Progress};
use super::{Run, failed};
use crate::observe::max_age_since;
use crate::reconciler::ReconcileError;
use crate::shared::records::{cluster_status, with_a_first_node};
use crate::shared::{Entropy, STEADY_LISTING_MAX_AGE, cluster_event, event, waits};

impl Run<'_> {
    /// The provider cluster: from the shared listing while the substrate is steady (a
    /// listing's silence, or a cluster listed with its Nodes unread, read by a GET), else
    /// by a GET. `None` when it is gone.
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
            let max_age = max_age_since(self.sub.updated_at, self.now, STEADY_LISTING_MAX_AGE);
            match self.deps.observer.clusters(account, max_age).await {
                Ok(listing) => {
                    if let Some(c) = listing.cluster(id) {
                        return Ok(Ok(Some(c.clone())));
                    }
                }
                Err(e) => return failed(e).map(Err),
            }
        }
        match provider.kubernetes().get_cluster(id).await {
            Ok(c) => Ok(Ok(Some(c))),
            Err(ProviderError::NotFound) => Ok(Ok(None)),
            Err(e) => failed(e).map(Err),
        }
    }

    /// Create mode: the recorded row, then the provider cluster (found by its name or
    /// created with the flavors' pools), then its observation.
    pub(super) async fn created_cluster(
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
        // Whether no create of the row was ever sent: this run records it.
        let fresh = cluster.is_none();
        let cluster = match cluster {
            Some(c) => c,
            None => {
                let naming = SubstrateNaming::of(&provider.offer());
                let name = match decide::cluster_name(&self.sub.pool_id, naming, create) {
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
                let sent = if fresh { Sent::Never } else { Sent::Maybe { previous: None } };
                return self
                    .make_cluster(create, &cluster, desired, account, provider, sent)
                    .await
                    .map(Err);
            }
        };
        match self.observe_cluster(account, provider, &id).await? {
            Ok(Some(pc)) => Ok(Ok(pc)),
            // Deleted behind our back: desired state wins (SPEC §6, as for load
            // balancers) — made again under the recorded name, found by it if a
            // re-creation's answer was lost. Archiving the pool is how to stop it.
            Ok(None) => self
                .make_cluster(
                    create,
                    &cluster,
                    desired,
                    account,
                    provider,
                    Sent::Maybe { previous: Some(&id) },
                )
                .await
                .map(Err),
            Err(stop) => Ok(Err(stop)),
        }
    }

    /// Finds the recorded cluster name at the provider (a create whose answer was lost),
    /// or creates the cluster with the flavors' pools. A row no create was ever sent for
    /// ([`Sent::Never`]) creates without looking first — a listing of every cluster of
    /// the account, several requests of its budget once it holds hundreds — and looks the
    /// name up only when the provider refuses it (both refuse a taken name: DigitalOcean
    /// 422, GKE 409), to say whose it is. `previous` (in [`Sent::Maybe`]): the provider
    /// id of the cluster it replaces (deleted behind our back), whose replacement is an
    /// event in the commit recording the new id — so a lost answer found again later is
    /// still one event.
    async fn make_cluster(
        &mut self,
        create: &CreateClusterPolicy,
        cluster: &KubernetesCluster,
        desired: &[NodePoolRequest],
        account: &ProviderAccount,
        provider: &Arc<dyn ProviderImpl>,
        sent: Sent<'_>,
    ) -> Result<Progress, ReconcileError> {
        let tag = substrate_tag_for(&self.pool_id(), SubstrateNaming::of(&provider.offer()));
        let previous = match sent {
            Sent::Never => None,
            Sent::Maybe { previous } => {
                if let Some(found) = self.named(cluster, &tag, account).await? {
                    match found {
                        Ok(made) => {
                            return self.made(cluster, desired, account, made, previous).await;
                        }
                        Err(taken) => return Ok(taken),
                    }
                }
                previous
            }
        };
        // The rows of the first pools are the intents of the pools in the create call.
        self.sync_rows(cluster, desired, Some(&[]), &BTreeMap::new()).await?;
        let req = CreateClusterRequest {
            name: cluster.name.to_string(),
            region: create.region.clone(),
            version: create.version.clone(),
            high_availability: create.high_availability,
            mode: cluster.mode,
            tags: vec![tag.clone()],
            node_pools: with_a_first_node(desired.to_vec()),
        };
        self.act.ensure_held(self.deps).await?;
        let made = match provider.kubernetes().create_cluster(&req).await {
            Ok(made) => made,
            Err(ProviderError::Refused { message }) => {
                // Perhaps the name is taken: whose it is says what to do.
                return match self.named(cluster, &tag, account).await? {
                    Some(Ok(made)) => self.made(cluster, desired, account, made, previous).await,
                    Some(Err(taken)) => Ok(taken),
                    None => Ok(Progress::refused(message)),
                };
            }
            Err(e) => return failed(e),
        };
        self.deps.observer.invalidate(account);
        self.made(cluster, desired, account, made, previous).await
    }

    /// The cluster of the row's name in a listing taken now: `Ok` when it carries the
    /// pool's tag (ours: a create whose answer was lost), `Err` with the substrate's
    /// error when someone else's has the name (never taken over), `None` when no
    /// cluster has it.
    async fn named(
        &self,
        cluster: &KubernetesCluster,
        tag: &str,
        account: &ProviderAccount,
    ) -> Result<Option<Result<ProviderCluster, Progress>>, ReconcileError> {
        let listing = match self.deps.observer.clusters(account, std::time::Duration::ZERO).await {
            Ok(l) => l,
            Err(e) => return failed(e).map(|p| Some(Err(p))),
        };
        let Some(c) = listing.items.iter().find(|c| c.name == cluster.name.as_str()) else {
            return Ok(None);
        };
        if c.tags.iter().any(|t| t == tag) {
            return Ok(Some(Ok(c.clone())));
        }
        Ok(Some(Err(Progress::error(format!(
            "a cluster named {} ({}) already exists in the provider account and was not made for this pool: set policy.substrate.cluster.create.name to another name, or adopt that cluster",
            c.name, c.id
        )))))
    }

    /// Records the provider cluster made (or found) for the row, and its pools' rows.
    async fn made(
        &mut self,
        cluster: &KubernetesCluster,
        desired: &[NodePoolRequest],
        account: &ProviderAccount,
        made: ProviderCluster,
        previous: Option<&str>,
    ) -> Result<Progress, ReconcileError> {
        let status = cluster_status(cluster, ResourceState::Provisioning, None, self.now)
            .unwrap_or_else(|| cluster.status.clone());
        let mut uow = UnitOfWork::new().write(Write::SetClusterStatus {
            cluster_id: cluster.cluster_id.clone(),
            provider_cluster_id: Some(made.id.clone()),
            version: Some(made.version.clone()),
            status,
        });
        if let Some(old) = previous {
            uow = uow.event(cluster_recreated(&*self.r.entropy, cluster, old, &made.id, self.now));
        }
        self.commit(uow).await?;
        if let Some(old) = previous {
            // The gone cluster's API session (its credentials) is of no further use.
            self.r.sessions.forget(account, old);
        }
        let mut c = cluster.clone();
        c.provider_cluster_id = Some(made.id.clone());
        c.status.state = ResourceState::Provisioning;
        self.cluster = Some(c);
        self.sync_rows(cluster, desired, Some(&made.node_pools), &BTreeMap::new()).await?;
        let waiting = match previous {
            Some(old) => format!(
                "cluster {} ({old}) was deleted at the provider outside this system: made again as {}, waiting for the provider to provision it (archive the pool to stop it)",
                cluster.name, made.id
            ),
            None => {
                format!("waiting for cluster {} to be provisioned by the provider", cluster.name)
            }
        };
        Ok(Progress::converging(waiting, waits::CLUSTER))
    }

    /// Adopt mode: the provider cluster, and its row (this pool added to a live row of
    /// it, or a new `adopted` row).
    pub(super) async fn adopted_cluster(
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
            Err(e) => return failed(e).map(Err),
        };
        if pc.mode == ClusterMode::Autopilot {
            // SPEC §6: a substrate's cluster is standard; the provider runs an autopilot
            // cluster's nodes, so there is no node pool of ours to add to it.
            return Ok(Err(Progress::refused(format!(
                "cluster {} ({id}) is an autopilot cluster, which takes no node pools: adopt a standard cluster, or let the substrate create one (policy.substrate.cluster.create)",
                pc.name
            ))));
        }
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

    /// The pool another substrate created cluster `pc` (recorded as `row`) for, if one
    /// did: its tag says so, or a live create-mode substrate uses the row.
    async fn created_for(
        &self,
        pc: &ProviderCluster,
        row: Option<&KubernetesCluster>,
    ) -> Result<Option<PoolId>, ReconcileError> {
        let pool = self.pool_id();
        if let Some(owner) =
            pc.tags.iter().filter_map(|t| substrate_tag_pool(t)).find(|p| *p != pool)
        {
            return Ok(Some(owner));
        }
        let Some(row) = row else { return Ok(None) };
        let users = self.deps.store.substrate_list_by_cluster(&row.cluster_id).await?;
        Ok(cluster_created_for(&users, Some(&pool)).cloned())
    }

    async fn record_adoption(
        &mut self,
        pc: &ProviderCluster,
    ) -> Result<Result<KubernetesCluster, Progress>, ReconcileError> {
        let account = self.sub.provider_account_id.clone();
        let mut existing = self.deps.store.cluster_find_by_provider_id(&account, &pc.id).await?;
        let pool = self.pool_id();
        if let Some(owner) = self.created_for(pc, existing.as_ref()).await? {
            // SPEC §6: the cluster goes with the pool it was made for (archiving that pool
            // deletes it), so no other pool may run on it.
            return Ok(Err(Progress::refused(format!(
                "cluster {} ({}) was created for pool {owner} and is deleted with it: add a flavor to pool {owner} instead of adopting its cluster",
                pc.name, pc.id
            ))));
        }
        if let Some(row) = existing.as_ref().filter(|r| r.delete_requested) {
            // It would be deleted under the pool anyway, then reported gone.
            return Ok(Err(Progress::refused(format!(
                "cluster {} ({}) is being deleted (kubernetesClusters.delete of {} is pending): adopt another cluster",
                pc.name, pc.id, row.cluster_id
            ))));
        }
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

    /// The create-mode cluster row follows its substrate's state.
    pub(super) fn cluster_status(
        &self,
        mut uow: UnitOfWork,
        c: &KubernetesCluster,
        state: ResourceState,
        message: Option<String>,
    ) -> UnitOfWork {
        let Some(status) = cluster_status(c, state, message.clone(), self.now) else {
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
}

/// `kubernetes.cluster.recreated` on the cluster's subject: the provider cluster
/// `previous` was deleted behind our back and `made` replaces it under the same name.
fn cluster_recreated(
    entropy: &dyn Entropy,
    cluster: &KubernetesCluster,
    previous: &str,
    made: &str,
    now: Timestamp,
) -> NewEvent {
    let data = serde_json::json!({
        "clusterId": cluster.cluster_id,
        "name": cluster.name,
        "previousProviderClusterId": previous,
        "providerClusterId": made,
        "poolIds": cluster.substrate_pool_ids,
    });
    event(
        entropy,
        &cluster.tenant_id,
        subjects::cluster(&cluster.cluster_id),
        "kubernetes.cluster.recreated",
        data,
        now,
    )
}

/// Whether a create of a cluster row may have been sent before this run.
#[derive(Debug, Clone, Copy)]
enum Sent<'a> {
    /// The row was recorded by this run: no create of it was ever sent.
    Never,
    /// An earlier run recorded the row, so its create may have gone out (its answer
    /// lost): the name is looked up first. `previous`: the provider id of the cluster
    /// it replaces, when made again after a deletion behind our back.
    Maybe {
        /// The gone cluster's provider id.
        previous: Option<&'a str>,
    },
}
