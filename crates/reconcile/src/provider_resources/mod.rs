//! `vps.provider-resources`: load balancers on the tenant's provider accounts (SPEC §11),
//! converged through `ProviderImpl::load_balancers`. This file is the I/O shell: it
//! reads the row and what the provider shows, asks [`plan`] what to do, makes that one
//! call, and records the outcome; every decision is in [`plan`].
//!
//! Invariant: each activation re-reads everything (no "what changed" hint); every
//! status write is one fenced unit of work carrying its event, its billing write and
//! its quota release, so a replica that lost the lease records nothing and a repeated
//! run records nothing twice (billing opens once, on the first `ready`; the quota unit
//! is released once, by the store's marker, when `deleted`).

pub mod plan;

use std::sync::Arc;

use async_trait::async_trait;
use bc_domain::id::EventId;
use bc_domain::model::LoadBalancerType;
use bc_domain::model::{
    BillingInterval, LoadBalancer, METER_LOAD_BALANCER_HOURS, NewEvent, ObservedStatus, subjects,
};
use bc_domain::ports::{LoadBalancerRequest, ProviderTargets, UnitOfWork, WorkKind, Write};
use bc_domain::rules::billing::{should_close_billing, should_open_billing};
use bc_domain::{LoadBalancerId, ProviderError, ResourceState};

use crate::reconciler::{Activation, Deps, Outcome, ReconcileError, Reconciler};
use crate::shared::{Entropy, OsEntropy, live_account};
use plan::{Blocked, Change, Need, Next, Observed, Timing};

/// How many decide-call rounds one activation makes at most (the longest path is:
/// confirm an absence, find it gone, create, record what the create answered).
const MAX_STEPS: usize = 6;

/// The load balancer reconciler.
#[derive(Clone)]
pub struct LoadBalancers {
    timing: Timing,
    entropy: Arc<dyn Entropy>,
}

impl Default for LoadBalancers {
    /// DigitalOcean-scale waits, the operating system's randomness.
    fn default() -> Self {
        Self::new(Timing::default(), Arc::new(OsEntropy))
    }
}

impl std::fmt::Debug for LoadBalancers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadBalancers").field("timing", &self.timing).finish_non_exhaustive()
    }
}

impl LoadBalancers {
    /// A reconciler with these waits, drawing event ids from `entropy`.
    pub fn new(timing: Timing, entropy: Arc<dyn Entropy>) -> Self {
        Self { timing, entropy }
    }

    /// The whole provider object `lb` asks for: its spec with the targets resolved to
    /// provider ids (a global load balancer targets regional ones of this system, which
    /// must have been made first).
    async fn desired(
        &self,
        deps: &Deps,
        lb: &LoadBalancer,
    ) -> Result<Result<LoadBalancerRequest, Blocked>, ReconcileError> {
        let t = &lb.spec.targets;
        let targets = if let Some(tag) = &t.tag {
            ProviderTargets::Tag(tag.clone())
        } else if let Some(ids) = &t.droplet_ids {
            ProviderTargets::DropletIds(ids.clone())
        } else if let Some(ids) = &t.load_balancer_ids {
            let mut provider_ids = Vec::with_capacity(ids.len());
            for id in ids {
                match target(deps, lb, id).await? {
                    Ok(p) => provider_ids.push(p),
                    Err(blocked) => return Ok(Err(blocked)),
                }
            }
            ProviderTargets::LoadBalancerIds(provider_ids)
        } else {
            return Ok(Err(Blocked::Invalid(
                "targets: set exactly one of loadBalancerIds, tag or dropletIds".into(),
            )));
        };
        Ok(Ok(plan::desired_request(&lb.load_balancer_id, lb.name.as_str(), &lb.spec, targets)))
    }

    /// Records `change` (if it changes anything) in one fenced unit of work, with its
    /// event, billing and quota writes; then mirrors it into `lb`, so the next decision
    /// of this activation starts from what is stored.
    async fn record(
        &self,
        deps: &Deps,
        a: &Activation,
        lb: &mut LoadBalancer,
        change: Change,
    ) -> Result<(), ReconcileError> {
        // The activation's time, as every reconciler records (a look after a later call
        // still takes a listing newer than half its poll wait, so an earlier stamp
        // cannot let a stale listing speak for the call).
        self.record_at(deps, a, lb, change, a.now).await
    }

    /// [`Self::record`] stamped `now` (a later instant of the activation: when a call
    /// came back).
    async fn record_at(
        &self,
        deps: &Deps,
        a: &Activation,
        lb: &mut LoadBalancer,
        change: Change,
        now: bc_domain::Timestamp,
    ) -> Result<(), ReconcileError> {
        if !change.changes(lb) {
            return Ok(());
        }
        let prev = lb.status.state;
        // `deleted` is reached through `deleting`, even when nothing had to be called
        // in between.
        let path = if change.deletes() && prev != ResourceState::Deleting {
            prev.transition(ResourceState::Deleting).and_then(|s| s.transition(change.state))
        } else {
            prev.transition(change.state)
        };
        let state = path.map_err(|e| {
            ReconcileError::Other(format!("load balancer {}: {e}", lb.load_balancer_id))
        })?;
        let first_ready = should_open_billing(prev, state, lb.ready_at);
        let status = ObservedStatus {
            state,
            message: change.message.clone(),
            observed_generation: change.observed_generation,
            updated_at: now,
        };
        let id = lb.load_balancer_id.clone();
        let mut uow =
            UnitOfWork::new().fenced(a.fence.clone()).write(Write::SetLoadBalancerStatus {
                load_balancer_id: id.clone(),
                provider_load_balancer_id: change.provider_id.clone(),
                ip: change.ip.clone(),
                status: status.clone(),
                ready_at: first_ready.then_some(now),
                deleted_at: change.deletes().then_some(now),
            });
        if first_ready {
            uow = uow.write(Write::OpenBilling(BillingInterval {
                meter: METER_LOAD_BALANCER_HOURS.into(),
                resource: id.to_string(),
                tenant_id: lb.tenant_id.clone(),
                pool_id: lb.pool_id.clone(),
                start: now,
                end: None,
            }));
        }
        if should_close_billing(state) {
            uow = uow
                .write(Write::CloseBilling {
                    meter: METER_LOAD_BALANCER_HOURS.into(),
                    resource: id.to_string(),
                    at: now,
                })
                .write(Write::ReleaseLoadBalancerQuota { load_balancer_id: id.clone() });
        }
        if let Some(kind) = change.event {
            uow = uow.event(event(&*self.entropy, lb, &change, kind, now));
        }
        deps.store.commit(uow).await?;
        if change.deletes() {
            lb.deleted_at = Some(now);
        }
        lb.status = status;
        if let Some(p) = change.provider_id {
            lb.provider_load_balancer_id = Some(p);
        }
        if let Some(ip) = change.ip {
            lb.ip = Some(ip);
        }
        if first_ready {
            lb.ready_at = Some(now);
        }
        Ok(())
    }
}

/// The provider id of target `id` of `lb`, or why there is none to use.
async fn target(
    deps: &Deps,
    lb: &LoadBalancer,
    id: &LoadBalancerId,
) -> Result<Result<String, Blocked>, ReconcileError> {
    let invalid = |why: &str| {
        Ok(Err(Blocked::Invalid(format!(
            "target load balancer {id} {why}: change targets.loadBalancerIds"
        ))))
    };
    let Some(t) = deps.store.load_balancer_get_any(id).await? else {
        return invalid("does not exist");
    };
    if t.deleted_at.is_some() || t.delete_requested {
        return invalid("is deleted");
    }
    if t.provider_account_id != lb.provider_account_id || t.spec.kind != LoadBalancerType::Regional
    {
        return invalid("is not a regional load balancer of the same account");
    }
    Ok(match t.provider_load_balancer_id {
        Some(p) => Ok(p),
        None => Err(Blocked::Waiting(format!(
            "waiting for target load balancer {id} to be made at the provider"
        ))),
    })
}

/// The outbox event of `change`: what happened, never a secret.
fn event(
    entropy: &dyn Entropy,
    lb: &LoadBalancer,
    change: &Change,
    kind: &str,
    now: bc_domain::Timestamp,
) -> NewEvent {
    let mut data = serde_json::json!({
        "loadBalancerId": lb.load_balancer_id,
        "name": lb.name,
        "state": change.state,
    });
    let provider_id = change.provider_id.as_ref().or(lb.provider_load_balancer_id.as_ref());
    for (key, value) in [
        ("message", change.message.as_ref()),
        ("providerLoadBalancerId", provider_id),
        ("ip", change.ip.as_ref().or(lb.ip.as_ref())),
    ] {
        if let Some(v) = value {
            data[key] = serde_json::Value::String(v.clone());
        }
    }
    NewEvent {
        event_id: EventId::generate(u64::try_from(now.unix_ms()).unwrap_or(0), entropy.u128()),
        tenant_id: lb.tenant_id.clone(),
        subject: subjects::load_balancer(&lb.load_balancer_id),
        kind: kind.to_owned(),
        time: now,
        data,
    }
}

#[async_trait]
impl Reconciler for LoadBalancers {
    fn kind(&self) -> WorkKind {
        WorkKind::ProviderResources
    }

    async fn reconcile(&self, deps: &Deps, a: &Activation) -> Result<Outcome, ReconcileError> {
        // A key that is no load balancer id names nothing this reconciler could converge.
        let Ok(id) = a.key().parse::<LoadBalancerId>() else { return Ok(Outcome::Gone) };
        let Some(mut lb) = deps.store.load_balancer_get_any(&id).await? else {
            return Ok(Outcome::Gone);
        };
        if lb.deleted_at.is_some() {
            return Ok(Outcome::Gone);
        }
        let account_id = lb.provider_account_id.clone();
        let account =
            match live_account(&account_id, deps.store.account_get_any(&account_id).await?) {
                Ok(a) => a,
                Err(why) => {
                    let (change, outcome) = plan::unreachable(&lb, &why);
                    self.record(deps, a, &mut lb, change).await?;
                    return Ok(outcome);
                }
            };
        let desired = self.desired(deps, &lb).await?;
        let mut observed = match plan::need(&lb, a.now, &self.timing) {
            Need::Nothing => Observed::NotLooked,
            Need::Wait(after) => return Ok(Outcome::Converging { after }),
            Need::Listing(max_age) => {
                let listing = deps.observer.load_balancers(&account, max_age).await?;
                plan::find(&lb, &listing)
            }
        };
        let provider = deps.observer.provider(&account).await?;
        // What the adapter declares it offers decides (SPEC §11: none on GKE), before
        // any call; a deletion goes on whatever the offer says.
        if !lb.delete_requested
            && let Some(m) = provider.offer().lacks_load_balancer(lb.spec.kind)
        {
            let change = plan::refused(&lb, &m);
            self.record(deps, a, &mut lb, change).await?;
            return Ok(Outcome::Steady);
        }
        let lbs = provider.load_balancers();
        for _ in 0..MAX_STEPS {
            let input = plan::Input {
                lb: &lb,
                desired: desired.clone(),
                observed,
                now: a.now,
                timing: &self.timing,
            };
            observed = match plan::plan(&input) {
                Next::Settle { change, outcome } => {
                    if let Some(c) = change {
                        self.record(deps, a, &mut lb, c).await?;
                    }
                    return Ok(outcome);
                }
                Next::Confirm { id } => match lbs.get(&id).await {
                    Ok(p) => Observed::Found(p),
                    Err(ProviderError::NotFound) => Observed::Gone,
                    Err(e) => return Err(e.into()),
                },
                Next::Create { intent, request } => {
                    // An intent is recorded only for a create that can go now: a
                    // recorded intent makes the next attempt wait for a newer listing.
                    deps.observer.can_call(&account).await?;
                    // The intent first: after a crash from here on, the next run looks
                    // for what this create may have made before it makes anything.
                    self.record(deps, a, &mut lb, intent).await?;
                    a.ensure_held(deps).await?;
                    match lbs.create(&request).await {
                        Ok(p) => Observed::Found(p),
                        Err(e) if plan::made_nothing(&e) => {
                            // Nothing is in flight: stamped now, the next look takes a
                            // listing from after it, not one a call timeout after the
                            // intent (if this write is lost, the intent's wait stands).
                            let over = deps.clock.now();
                            let change = plan::create_made_nothing(&lb);
                            self.record_at(deps, a, &mut lb, change, over).await?;
                            return Err(e.into());
                        }
                        Err(e) => return self.call_failed(deps, a, &mut lb, e).await,
                    }
                }
                Next::Update { id, request } => {
                    a.ensure_held(deps).await?;
                    match lbs.update(&id, &request).await {
                        Ok(p) => {
                            let change = plan::updated(&lb, &p);
                            self.record(deps, a, &mut lb, change).await?;
                            return Ok(self.converging(a, &lb));
                        }
                        Err(ProviderError::NotFound) => Observed::Gone,
                        Err(ProviderError::Busy { message }) => {
                            return self.busy(deps, a, &mut lb, &message).await;
                        }
                        Err(e) => return self.call_failed(deps, a, &mut lb, e).await,
                    }
                }
                Next::Delete { id, intent } => {
                    if let Some(c) = intent {
                        self.record(deps, a, &mut lb, c).await?;
                    }
                    a.ensure_held(deps).await?;
                    match lbs.delete(&id).await {
                        Ok(()) | Err(ProviderError::NotFound) => {
                            let change = plan::deleted(&lb);
                            self.record(deps, a, &mut lb, change).await?;
                            return Ok(Outcome::Gone);
                        }
                        Err(ProviderError::Busy { message }) => {
                            return self.busy(deps, a, &mut lb, &message).await;
                        }
                        Err(e) => return self.call_failed(deps, a, &mut lb, e).await,
                    }
                }
            };
        }
        // Not settled within the bound (a provider answering inconsistently): look again.
        Ok(self.converging(a, &lb))
    }
}

impl LoadBalancers {
    /// The waits.
    pub fn timing(&self) -> &Timing {
        &self.timing
    }

    fn converging(&self, a: &Activation, lb: &LoadBalancer) -> Outcome {
        Outcome::Converging { after: plan::poll(lb, a.now, &self.timing) }
    }

    /// A call the provider did not carry out: a refusal is the object's own error
    /// (recorded, not retried until its desired state changes); anything else — busy
    /// (see [`Self::busy`] for updates and deletes), throttled, 5xx, a lost answer —
    /// goes back to the runtime to retry with backoff.
    async fn call_failed(
        &self,
        deps: &Deps,
        a: &Activation,
        lb: &mut LoadBalancer,
        e: ProviderError,
    ) -> Result<Outcome, ReconcileError> {
        match e {
            ProviderError::Refused { message } => {
                let change = plan::refused(lb, &message);
                self.record(deps, a, lb, change).await?;
                Ok(Outcome::Steady)
            }
            other => Err(other.into()),
        }
    }

    /// The provider turned an update or a delete away as busy with an earlier change:
    /// a wait at the object's poll pace ([`plan::busy`]), not a failure. The provider
    /// names no end to it (a resize may wait a minute), and the runtime's failure
    /// backoff, doubling all through such a wait, would send the call again up to that
    /// long after it was allowed. (A create is never answered busy; were it, its intent
    /// must stay as recorded, so it goes to [`Self::call_failed`].)
    async fn busy(
        &self,
        deps: &Deps,
        a: &Activation,
        lb: &mut LoadBalancer,
        message: &str,
    ) -> Result<Outcome, ReconcileError> {
        tracing::debug!(load_balancer = %lb.load_balancer_id, message, "provider busy: waiting");
        self.record(deps, a, lb, plan::busy(lb)).await?;
        Ok(self.converging(a, lb))
    }
}
