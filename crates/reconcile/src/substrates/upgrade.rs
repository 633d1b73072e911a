//! Create mode: moves the cluster to `cluster.create.version` — at once with `upgrades:
//! immediate`, after the pool's bookings end with `drain`.
//!
//! Invariant — **drains are safe**: an `upgrades: drain` upgrade is asked for only after
//! the wait is recorded on the substrate row (which makes the store refuse new
//! bookings) and a count taken after that record finds no active booking.

use std::sync::Arc;

use bc_domain::ProviderError;
use bc_domain::model::{KubernetesCluster, ProviderAccount, UpgradeWait};
use bc_domain::policy::{CreateClusterPolicy, PoolPolicy};
use bc_domain::ports::{ProviderCluster, ProviderImpl, UnitOfWork};
use bc_domain::rules::drain::{UpgradeDecision, upgrade_decision, wants_upgrade};

use super::decide::{self, Progress};
use super::{Run, failed};
use crate::reconciler::ReconcileError;
use crate::shared::waits;

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
        let desired = create.version.as_str();
        // `latest` resolved once, when the cluster was made (SPEC §6).
        if !wants_upgrade(desired, &pc.version) {
            self.upgrade = None;
            return Ok(None);
        }
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
                self.act.ensure_held(self.deps).await?;
                if let Err(e) = provider.kubernetes().upgrade_cluster(&pc.id, &version).await {
                    return self.upgrade_failed(e);
                }
                self.r.upgrades.forget(account, &pc.version);
                self.deps.observer.invalidate(account);
                self.upgrade = None;
                waiting.push(format!("upgrading cluster {} to {version}", cluster.name));
                Ok(Some(Progress::converging(waiting.join("; "), waits::CLUSTER)))
            }
        }
    }
}
