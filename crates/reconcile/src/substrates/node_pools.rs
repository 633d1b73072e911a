//! The substrate's node pools: one per flavor, named `bc-<pool>-<flavor>`, planned by
//! `rules::plan`, and their `kubernetesNodePools` rows (`managedBy` = the pool).
//!
//! Invariants: a flavor's row is committed before any call that can make its pool (the
//! name is the intent a restarted reconciler finds it by); a pool the plan did not make
//! — no mark of this pool — is never updated or deleted, only named in the error.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bc_domain::model::{ClusterOrigin, KubernetesCluster, NodePool, ProviderAccount};
use bc_domain::policy::Flavor;
use bc_domain::ports::{
    NodePoolRequest, PAGE_SIZE_MAX, PageRequest, ProviderCluster, ProviderImpl, UnitOfWork,
    WorkKind,
};
use bc_domain::rules::plan::{
    NodePoolStep, is_our_node_pool, node_pool_conflicts, plan_node_pools, pool_settled,
};
use bc_domain::{ClusterId, NodePoolId, ProviderError, SubstrateNaming};

use super::decide::Progress;
use super::{Run, failed, rows};
use crate::reconciler::ReconcileError;
use crate::shared::node_pool_event;
use crate::shared::records::converged_at_its_generation;

impl Run<'_> {
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
    /// Returns the cluster's rows as they were before.
    pub(super) async fn sync_rows(
        &self,
        cluster: &KubernetesCluster,
        desired: &[NodePoolRequest],
        observed: Option<&[bc_domain::ports::ProviderNodePool]>,
        refused: &BTreeMap<String, String>,
    ) -> Result<Vec<NodePool>, ReconcileError> {
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
        // An adopted cluster's state follows its pools (the cluster reconciler's); a
        // created one's follows the substrate.
        if !sync.moved.is_empty() && cluster.origin == ClusterOrigin::Adopted {
            uow = uow.enqueue(WorkKind::Clusters, cluster.cluster_id.as_str(), self.now);
        }
        self.commit(uow).await?;
        Ok(rows)
    }

    /// The flavors' node pools: conflicts, the plan's calls, and what is still coming
    /// (`rows`: the cluster's rows before this run).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn node_pools(
        &self,
        cluster: &KubernetesCluster,
        desired: &[NodePoolRequest],
        rows: &[NodePool],
        flavors: &[Flavor],
        pc: &ProviderCluster,
        account: &ProviderAccount,
        provider: &Arc<dyn ProviderImpl>,
        waiting: &mut Vec<String>,
    ) -> Result<Option<Progress>, ReconcileError> {
        let pool = self.pool_id();
        let naming = SubstrateNaming::of(&provider.offer());
        let steps = plan_node_pools(&pool, naming, flavors, &pc.node_pools);
        let mut refused = BTreeMap::new();
        // Refused credentials are looked at again; the provider's refusals are not.
        let mut all_refusals = true;
        for s in &steps {
            self.act.ensure_held(self.deps).await?;
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
            // Whatever the outcome (a call without an answer may have taken effect), the
            // listing no longer shows the cluster's pools as they are.
            self.deps.observer.invalidate(account);
            if let Err(e) = done {
                let failure = failed(e)?;
                all_refusals &= matches!(failure, Progress::Refused { .. });
                refused.insert(s.name().to_owned(), failure.message().to_owned());
            }
        }
        if let Some((name, message)) = refused.iter().next() {
            self.sync_rows(cluster, desired, Some(&pc.node_pools), &refused).await?;
            let m = format!(
                "the provider refused node pool {name}: {message}; change or remove that flavor in the pool's policy"
            );
            return Ok(Some(if all_refusals { Progress::refused(m) } else { Progress::error(m) }));
        }
        if let Some(c) = node_pool_conflicts(&pool, naming, flavors, &pc.node_pools).first() {
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
                        let before = rows
                            .iter()
                            .find(|r| r.name == d.name && r.managed_by.as_ref() == Some(&pool))
                            .is_some_and(converged_at_its_generation);
                        !pc.node_pools.iter().any(|p| {
                            p.name == d.name
                                && is_our_node_pool(&pool, p)
                                && pool_settled(p, d, before)
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
}
