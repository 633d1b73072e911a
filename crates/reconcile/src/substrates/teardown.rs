//! Teardown (archive, or a policy without substrate): our objects, then our node pools
//! (adopt mode) or the cluster with the load balancers the provider associates with it
//! (create mode), then the join tokens revoked and the substrate `deleted`.
//!
//! Invariant: the tenant's own node pools and objects are never touched; volumes,
//! snapshots and load balancers a deleted cluster leaves at the provider are named in an
//! event.

use std::collections::BTreeMap;
use std::sync::Arc;

use bc_domain::SubstrateNaming;
use bc_domain::model::{KubernetesCluster, ProviderAccount, subjects};
use bc_domain::ports::{
    ProviderCluster, ProviderClusterState, ProviderImpl, UnitOfWork, WorkKind, Write,
};
use bc_domain::rules::plan::{NodePoolStep, is_our_node_pool, plan_node_pools, substrate_tag_for};
use bc_domain::{ProviderError, ResourceState};

use super::decide::Progress;
use super::{Run, cluster_failure};
use crate::reconciler::{Outcome, ReconcileError};
use crate::shared::records::cluster_closed;
use crate::shared::{cluster_event, converging, event, own_error, waits};

impl Run<'_> {
    /// One step of teardown; `Gone` once the substrate is `deleted`.
    ///
    /// A teardown that cannot go on stays in `error` (one state, one event per cause,
    /// looked at again with backoff) rather than passing through `deleting` on each look;
    /// it goes back to `deleting` when it can go on.
    pub(super) async fn teardown(&mut self) -> Result<Outcome, ReconcileError> {
        self.upgrade = None;
        if !matches!(self.sub.state, ResourceState::Deleting | ResourceState::Error) {
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
        let account = self.account().await?.ok();
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
                if self.sub.state != ResourceState::Deleting {
                    // `deleted` only through `deleting` (the state machine's one way out).
                    self.save(ResourceState::Deleting, None, UnitOfWork::new()).await?;
                }
                let pool = self.pool_id();
                let mut uow = UnitOfWork::new()
                    .write(Write::RevokeJoinTokens { pool_id: pool, at: self.now });
                // Named once, by the run that ends the teardown (each run before it
                // looked again, in case the tenant emptied the Namespace meanwhile).
                if let Some(message) = self.kept_namespace.take() {
                    let data = serde_json::json!({"poolId": self.sub.pool_id,
                        "clusterId": self.sub.cluster_id,
                        "namespace": bc_domain::name::substrate_namespace(&self.sub.pool_id),
                        "message": message});
                    uow = uow.event(self.retained(data));
                }
                self.save(ResourceState::Deleted, None, uow).await?;
                Ok(Outcome::Gone)
            }
        }
    }

    /// The event naming what teardown leaves in place (`data` says what and why).
    fn retained(&self, data: serde_json::Value) -> bc_domain::model::NewEvent {
        event(
            &*self.r.entropy,
            &self.sub.tenant_id,
            subjects::pool(&self.sub.pool_id),
            "kubernetes.substrate.resources-retained",
            data,
            self.now,
        )
    }

    async fn teardown_stopped(&mut self, p: Progress) -> Result<Outcome, ReconcileError> {
        let (state, message, after) = match p {
            // Teardown has no policy to wait for: its refusals are looked at again.
            Progress::Error { message } | Progress::Refused { message } => {
                (ResourceState::Error, message, waits::ERROR)
            }
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
                for status in cluster_closed(cluster, self.now) {
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

    /// The provider cluster `id` a teardown works on; `None` when the provider no
    /// longer has it.
    async fn cluster_to_tear_down(
        &mut self,
        account: &ProviderAccount,
        provider: &Arc<dyn ProviderImpl>,
        id: &str,
    ) -> Result<Result<Option<ProviderCluster>, Progress>, ReconcileError> {
        match provider.kubernetes().get_cluster(id).await {
            Ok(pc) => Ok(Ok(Some(pc))),
            Err(ProviderError::NotFound) => {
                self.r.sessions.forget(account, id);
                Ok(Ok(None))
            }
            Err(e) => own_error(e).map(|m| Err(Progress::error(m))),
        }
    }

    /// Create mode: every provider cluster of the pool — the recorded id, and whatever
    /// the provider lists under the derived name with the pool's tag (a create or a
    /// re-create whose answer was lost leaves a cluster the row does not name) — goes,
    /// each with exactly the load balancers the provider associates with it.
    async fn teardown_created(
        &mut self,
        cluster: &KubernetesCluster,
        account: &ProviderAccount,
        provider: &Arc<dyn ProviderImpl>,
    ) -> Result<Option<Progress>, ReconcileError> {
        let listing =
            provider!(stop self.deps.observer.clusters(account, std::time::Duration::ZERO).await);
        let tag = substrate_tag_for(&self.pool_id(), SubstrateNaming::of(&provider.offer()));
        let mut ids: Vec<String> = cluster.provider_cluster_id.iter().cloned().collect();
        for c in &listing.items {
            if c.name == cluster.name.as_str() && c.tags.contains(&tag) && !ids.contains(&c.id) {
                ids.push(c.id.clone());
            }
        }
        let mut stopped = None;
        let mut live = false;
        for id in &ids {
            let pc = match self.cluster_to_tear_down(account, provider, id).await? {
                Ok(Some(pc)) => pc,
                Ok(None) => continue,
                Err(stop) => {
                    live = true;
                    stopped.get_or_insert(stop);
                    continue;
                }
            };
            live = true;
            let p = self.delete_created(cluster, account, provider, &pc).await?;
            // An error is what the substrate shows; else the first wait.
            match (&stopped, &p) {
                (Some(Progress::Error { .. }), _) => {}
                (_, Progress::Error { .. }) | (None, _) => stopped = Some(p),
                _ => {}
            }
        }
        if !live {
            self.forget_cluster(cluster, None).await?;
            return Ok(None);
        }
        Ok(stopped)
    }

    /// One provider cluster `pc` of a created substrate: our objects, then the cluster
    /// with exactly the load balancers the provider associates with it; volumes,
    /// snapshots and the load balancers the provider leaves (GKE's) are named in an
    /// event.
    async fn delete_created(
        &mut self,
        cluster: &KubernetesCluster,
        account: &ProviderAccount,
        provider: &Arc<dyn ProviderImpl>,
        pc: &ProviderCluster,
    ) -> Result<Progress, ReconcileError> {
        let id = pc.id.clone();
        if matches!(pc.state, ProviderClusterState::Deleting | ProviderClusterState::Deleted) {
            return Ok(Progress::converging(
                format!("waiting for cluster {} to be deleted", cluster.name),
                waits::CLUSTER,
            ));
        }
        if let Some(users) = self.other_users(cluster, pc).await? {
            return Ok(Progress::error(format!(
                "cluster {} ({id}) is kept while something else uses it ({users}): remove that (or the substrate of that pool) and teardown goes on",
                cluster.name
            )));
        }
        if pc.state == ProviderClusterState::Running {
            // Best effort: the cluster goes next, and what it holds with it.
            let session = self.session(account, provider, &id);
            let _ = self.delete_objects(&session, false).await?;
        }
        let assoc = match provider.kubernetes().associated_resources(&id).await {
            Ok(a) => a,
            Err(e) => return super::failed(e),
        };
        let lbs: Vec<String> = assoc.load_balancers.iter().map(|l| l.id.clone()).collect();
        self.act.ensure_held(self.deps).await?;
        let deleted = provider.kubernetes().delete_cluster_selective(&id, &lbs).await;
        self.deps.observer.invalidate(account);
        match deleted {
            Ok(()) | Err(ProviderError::NotFound) => {}
            Err(e) => return own_error(e).map(Progress::error),
        }
        self.sync_rows(cluster, &[], Some(&pc.node_pools), &BTreeMap::new()).await?;
        let mut uow =
            self.cluster_status(UnitOfWork::new(), cluster, ResourceState::Deleting, None);
        if !assoc.volumes.is_empty()
            || !assoc.volume_snapshots.is_empty()
            || !assoc.retained_load_balancers.is_empty()
        {
            let named = |v: &[bc_domain::ports::NamedResource]| {
                v.iter()
                    .map(|r| serde_json::json!({"id": r.id, "name": r.name}))
                    .collect::<Vec<_>>()
            };
            let data = serde_json::json!({"poolId": self.sub.pool_id, "clusterId": cluster.cluster_id,
                "providerClusterId": id, "volumes": named(&assoc.volumes),
                "volumeSnapshots": named(&assoc.volume_snapshots),
                "loadBalancers": named(&assoc.retained_load_balancers),
                "message": "the cluster's volumes, volume snapshots and the load balancers the provider does not delete with it are left at the provider (they keep billing): delete them there if they are not needed"});
            uow = uow.event(self.retained(data));
        }
        self.commit(uow).await?;
        Ok(Progress::converging(
            format!("deleting cluster {} and its load balancers", cluster.name),
            waits::CLUSTER,
        ))
    }

    /// What uses the pool's cluster besides its own substrate, named (SPEC §6: teardown
    /// never deletes a cluster another substrate or a node pool this system did not
    /// make for the pool still uses): other live substrates, and node pools that are not
    /// this pool's.
    async fn other_users(
        &self,
        cluster: &KubernetesCluster,
        pc: &ProviderCluster,
    ) -> Result<Option<String>, ReconcileError> {
        let pool = self.pool_id();
        let mut users: Vec<String> = self
            .deps
            .store
            .substrate_list_by_cluster(&cluster.cluster_id)
            .await?
            .into_iter()
            .filter(|s| s.pool_id != pool && s.state != ResourceState::Deleted)
            .map(|s| format!("pool {}", s.pool_id))
            .collect();
        users.extend(
            pc.node_pools
                .iter()
                .filter(|p| !is_our_node_pool(&pool, p))
                .map(|p| format!("node pool {} ({})", p.name, p.id)),
        );
        Ok((!users.is_empty()).then(|| users.join(", ")))
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
        let pc = match self.cluster_to_tear_down(account, provider, &id).await? {
            Ok(Some(pc)) => pc,
            Ok(None) => {
                self.forget_cluster(cluster, None).await?;
                return Ok(None);
            }
            Err(stop) => return Ok(Some(stop)),
        };
        let id = pc.id.clone();
        let foreign = match &pc.state {
            ProviderClusterState::Running | ProviderClusterState::Degraded => {
                let session = self.session(account, provider, &id);
                match self.delete_objects(&session, true).await? {
                    Ok(removed) => {
                        self.kept_namespace = removed.kept;
                        removed.foreign
                    }
                    Err(e) => return cluster_failure(e).map(Some),
                }
            }
            // The tenant is deleting it: what we put in it goes with it.
            ProviderClusterState::Deleting | ProviderClusterState::Deleted => {
                self.r.sessions.forget(account, &id);
                self.forget_cluster(cluster, None).await?;
                return Ok(None);
            }
            // Our objects are in a cluster we cannot reach now: forgetting it would
            // leave them in the tenant's cluster for ever, so wait for it.
            other => {
                return Ok(Some(Progress::converging(
                    format!(
                        "waiting for cluster {} ({}, {}) to be running again to remove this pool's objects and node pools from it",
                        cluster.name,
                        id,
                        other.as_str()
                    ),
                    waits::CLUSTER,
                )));
            }
        };
        let pool = self.pool_id();
        let steps = plan_node_pools(&pool, SubstrateNaming::LONG, &[], &pc.node_pools);
        for s in &steps {
            if let NodePoolStep::Delete { node_pool_id, name } = s {
                self.act.ensure_held(self.deps).await?;
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
}
