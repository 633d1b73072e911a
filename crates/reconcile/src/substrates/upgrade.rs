//! Create mode: moves the cluster to `cluster.create.version` — at once with `upgrades:
//! immediate`, after the pool's bookings end with `drain`. The control plane goes
//! first; where the provider upgrades node pools one by one (GKE), each pool then
//! follows it, one operation at a time.
//!
//! Invariant — **drains are safe**: an `upgrades: drain` upgrade is asked for only after
//! the wait is recorded on the substrate row (which makes the store refuse new
//! bookings) and a count taken after that record finds no active booking; where pools
//! are upgraded one by one the wait stays recorded until the last pool's upgrade is
//! asked, since those are what replace the nodes.

use std::sync::Arc;

use bc_domain::ProviderError;
use bc_domain::model::{KubernetesCluster, ProviderAccount, UpgradeWait};
use bc_domain::policy::{CreateClusterPolicy, PoolPolicy};
use bc_domain::ports::{PoolUpgrades, ProviderCluster, ProviderImpl, ProviderNodePool, UnitOfWork};
use bc_domain::rules::drain::{
    UpgradeDecision, control_plane_offer, pool_behind, upgrade_decision, wants_upgrade,
};

use super::decide::{self, Progress};
use super::{Run, failed};
use crate::reconciler::ReconcileError;
use crate::shared::{pool_upgrade_key, waits};

/// What the next upgrade call moves: the control plane, or one node pool after it.
#[derive(Clone, Copy)]
enum Step<'a> {
    ControlPlane,
    Pool(&'a ProviderNodePool),
}

impl Run<'_> {
    /// The run's progress when a call of the upgrade failed: a refusal (or refused
    /// credentials) ends the drain, so bookings are taken again while the substrate
    /// shows the error; a transient failure keeps it and is retried.
    fn upgrade_failed(&mut self, e: ProviderError) -> Result<Option<Progress>, ReconcileError> {
        let progress = failed(e)?;
        self.upgrade = None;
        Ok(Some(progress))
    }

    /// Create mode: moves the cluster toward `cluster.create.version`, draining first
    /// when the policy says so.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn upgrade(
        &mut self,
        policy: &PoolPolicy,
        create: &CreateClusterPolicy,
        cluster: &KubernetesCluster,
        pc: &ProviderCluster,
        account: &ProviderAccount,
        provider: &Arc<dyn ProviderImpl>,
        waiting: &mut Vec<String>,
    ) -> Result<Option<Progress>, ReconcileError> {
        let pool_upgrades = provider.offer().pool_upgrades;
        // `latest` resolved once, when the cluster was made (SPEC §6).
        let (step, desired, running, offered) = if wants_upgrade(&create.version, &pc.version) {
            let desired = create.version.as_str();
            let offered = match self.r.upgrades.recent(account, &pc.version, desired, self.now) {
                Some(o) => o,
                None => {
                    let o = match provider.kubernetes().available_upgrades(&pc.id).await {
                        Ok(o) => o,
                        Err(e) => return self.upgrade_failed(e),
                    };
                    self.r.upgrades.record(account, &pc.version, desired, self.now, o.clone());
                    o
                }
            };
            (Step::ControlPlane, desired, pc.version.as_str(), offered)
        } else if let Some(p) = pool_behind(pool_upgrades, pc) {
            // The control plane runs its version: this pool follows it.
            let running = p.version.as_deref().unwrap_or_default();
            (Step::Pool(p), pc.version.as_str(), running, control_plane_offer(pc))
        } else {
            self.upgrade = None;
            return Ok(None);
        };
        let pool = self.pool_id();
        let since = self.sub.upgrade.as_ref().map(|u| u.since);
        let mut active = self.deps.store.booking_count_active(&pool, self.now).await?;
        let mut decision =
            upgrade_decision(policy.upgrades, desired, running, &offered, active, since, self.now);
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
                running,
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
                let k = provider.kubernetes();
                let (key, what, more) = match step {
                    Step::ControlPlane => (
                        pc.id.clone(),
                        format!("cluster {}", cluster.name),
                        // The pools follow by their own operations.
                        pool_upgrades == PoolUpgrades::OneByOne && !pc.node_pools.is_empty(),
                    ),
                    Step::Pool(p) => (
                        pool_upgrade_key(&pc.id, &p.id),
                        format!("node pool {} of cluster {}", p.name, cluster.name),
                        pc.node_pools.iter().any(|o| {
                            o.id != p.id && o.version.as_deref() != Some(pc.version.as_str())
                        }),
                    ),
                };
                if !self.r.upgrades.under_way(&key, &version, self.now) {
                    self.act.ensure_held(self.deps).await?;
                    let asked = match step {
                        Step::ControlPlane => k.upgrade_cluster(&pc.id, &version).await,
                        Step::Pool(p) => k.upgrade_node_pool(&pc.id, &p.id, &version).await,
                    };
                    if let Err(e) = asked {
                        return self.upgrade_failed(e);
                    }
                    self.r.upgrades.asked(&key, &version, self.now);
                }
                if let Step::ControlPlane = step {
                    self.r.upgrades.forget(account, &pc.version);
                }
                self.deps.observer.invalidate(account);
                // A drain lasts until the last call that replaces nodes is asked.
                self.upgrade = match self.upgrade.take() {
                    Some(w) if more => Some(w),
                    _ => None,
                };
                waiting.push(format!("upgrading {what} to {version}"));
                Ok(Some(Progress::converging(waiting.join("; "), waits::CLUSTER)))
            }
        }
    }
}
