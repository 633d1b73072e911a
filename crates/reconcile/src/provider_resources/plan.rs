//! The decisions of the `vps.provider-resources` reconciler for load balancers (SPEC
//! §11), as pure functions of (desired, observed, now) → (the next provider call, the
//! status to record with its events and ledger writes, the next wake-up).
//!
//! Invariant: nothing here does I/O. A create is always preceded by recording the intent
//! (the state that says a create may have been sent, with the time it was), and after
//! that intent no create is decided before a listing taken after the create it
//! announced was over — `call_timeout` after the intent, or, once a failure that surely
//! made nothing (a 429, say) was recorded, the moment of that record — shows no load
//! balancer carrying this one's ownership tag — so a crash, a lost answer or a retry
//! never makes a second provider object. An absence in a listing is never taken as
//! proof of deletion: a GET confirms it first. A refused create or update is not
//! retried until the desired state changes (its generation moves).

use std::time::Duration;

use bc_domain::model::{LoadBalancer, LoadBalancerSpec};
use bc_domain::ports::{
    LoadBalancerRequest, ProviderLoadBalancer, ProviderLoadBalancerKind,
    ProviderLoadBalancerStatus, ProviderTargets,
};
use bc_domain::{LoadBalancerId, ProviderError, ResourceState, Timestamp};

use crate::observe::Listing;
use crate::reconciler::Outcome;

/// The event types of SPEC §11 and contracts.md.
pub mod events {
    /// It became ready.
    pub const READY: &str = "vps.load-balancer.ready";
    /// It went to `error`.
    pub const ERROR: &str = "vps.load-balancer.error";
    /// It was deleted (and its quota unit released).
    pub const DELETED: &str = "vps.load-balancer.deleted";
    /// It was deleted at the provider behind our back and is being made again.
    pub const RECREATED: &str = "vps.load-balancer.recreated";
}

/// The provider tag that marks a load balancer as this one's (DigitalOcean tags allow
/// letters, digits, `:`, `-` and `_`; ids are lower-case Crockford base32 with `_`).
/// Set at create (tags are create-only), it is what "found by name" checks before
/// adopting an object: a same-named load balancer without it is the tenant's.
pub fn ownership_tag(id: &LoadBalancerId) -> String {
    format!("better-compute:{id}")
}

/// How long to wait for what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timing {
    /// The first look after a create or change (DigitalOcean takes one to three minutes
    /// to make a load balancer active, research/digitalocean.md §7).
    pub poll_min: Duration,
    /// Looks back off (half the time waited so far) up to this.
    pub poll_max: Duration,
    /// At steady state, how old a shared listing may be: the resync period, so an
    /// account costs one listing per resync, not one call per object.
    pub steady_listing_age: Duration,
    /// How long to wait for a target load balancer to be made.
    pub targets_wait: Duration,
    /// How long after a create's intent a listing must start before its absences count:
    /// an allowance for the clocks of replicas (and the provider's list) being a little
    /// apart, so a listing that began before a create — on any replica — is never
    /// taken as proof that the create did not happen.
    pub listing_margin: Duration,
    /// The longest a provider call may be in flight (the DigitalOcean adapter's request
    /// timeout): a create sent after its intent may land until then, so no listing
    /// started before it is over — on any replica, the one that sent it may have died
    /// — can prove the create absent.
    pub call_timeout: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            poll_min: Duration::from_secs(10),
            poll_max: Duration::from_secs(60),
            steady_listing_age: Duration::from_secs(600),
            targets_wait: Duration::from_secs(15),
            listing_margin: Duration::from_secs(2),
            call_timeout: Duration::from_secs(30),
        }
    }
}

/// Why the desired provider object cannot be stated yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocked {
    /// A target load balancer has no provider id yet: wait for it.
    Waiting(String),
    /// A target load balancer is deleted, or not one this one can target: the
    /// tenant must change the targets.
    Invalid(String),
}

/// What is known of the provider object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// Not looked (a load balancer never sent to the provider needs no look).
    NotLooked,
    /// Ours, as listed or as a call answered.
    Found(ProviderLoadBalancer),
    /// A load balancer of this name that does not carry our tag: the tenant's.
    Foreign(ProviderLoadBalancer),
    /// Missing from a listing taken at `listed_at` (not proof that it is gone).
    Absent {
        /// When the listing was taken.
        listed_at: Timestamp,
    },
    /// A GET of the recorded id answered 404.
    Gone,
}

/// Which provider object of a listing is `lb`'s: the recorded id; else the one carrying
/// its ownership tag (made before a crash kept us from recording its id); else a
/// same-named one without the tag, which is the tenant's.
pub fn find(lb: &LoadBalancer, listing: &Listing<ProviderLoadBalancer>) -> Observed {
    let tag = ownership_tag(&lb.load_balancer_id);
    if let Some(id) = &lb.provider_load_balancer_id
        && let Some(p) = listing.with_id(id)
    {
        return Observed::Found(p.clone());
    }
    if let Some(p) = listing.with_tag(&tag) {
        return Observed::Found(p.clone());
    }
    match listing.named(lb.name.as_str()) {
        Some(p) => Observed::Foreign(p.clone()),
        None => Observed::Absent { listed_at: listing.listed_at },
    }
}

/// What a reconcile needs to look at before it decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Nothing: the load balancer was never sent to the provider.
    Nothing,
    /// The account's listing, at most this old.
    Listing(Duration),
    /// No listing can be trusted yet (the last write is too recent for any listing to
    /// be known to start after it): look again after this long.
    Wait(Duration),
}

/// The message of a re-create's intent (the object was deleted at the provider).
const RECREATING: &str = "re-creating: the load balancer was deleted at the provider";

/// Whether a re-create's intent is recorded: the recorded id is the gone object's, and
/// a create may be in flight, so the object is guarded like a first create (a listing
/// surely taken after the create, the event once).
fn recreating(lb: &LoadBalancer) -> bool {
    lb.provider_load_balancer_id.is_some()
        && lb.status.state != ResourceState::Ready
        && lb.status.message.as_deref().is_some_and(|m| m.starts_with(RECREATING))
}

/// How the message of a create's intent ends once that create failed in a way that
/// surely made nothing ([`made_nothing`]): no create of it is in flight, so what any
/// earlier attempt made is in every listing that started after this write.
pub const MADE_NOTHING: &str = " (the last attempt made nothing; looking before trying again)";

/// Whether a create that failed with `e` surely made nothing: the provider throttled it
/// (a 429 is answered before any work is done) or refused the credentials, or it was
/// never sent (the account's budget, or the adapter's own rate limit, held it back). Not
/// a 5xx — a gateway's 502 or 504 can answer while the create goes on behind it — and not
/// a call whose answer never came (a timeout): either may still land, so the intent's
/// `call_timeout` stands for them.
pub fn made_nothing(e: &ProviderError) -> bool {
    matches!(
        e,
        ProviderError::RateLimited { .. }
            | ProviderError::OverBudget { .. }
            | ProviderError::Unauthorized
    )
}

/// Whether the last create surely made nothing, recorded by [`create_made_nothing`].
fn nothing_in_flight(lb: &LoadBalancer) -> bool {
    lb.status.message.as_deref().is_some_and(|m| m.ends_with(MADE_NOTHING))
}

/// The change recording that the create announced by the intent surely made nothing
/// ([`made_nothing`]): the intent's state and message, marked [`MADE_NOTHING`]. Its time
/// is the moment the call failed, so the next look needs a listing that started after it
/// (plus `listing_margin`) — not one `call_timeout` after the intent, the allowance for a
/// create that may still be in flight, which this one is not. Always written, since its
/// time is what that listing is judged by.
pub fn create_made_nothing(lb: &LoadBalancer) -> Change {
    let intent = lb.status.message.as_deref().unwrap_or("creating at the provider");
    let intent = intent.strip_suffix(MADE_NOTHING).unwrap_or(intent);
    let mut c = to(lb, lb.status.state, Some(format!("{intent}{MADE_NOTHING}")));
    c.intent = true;
    c
}

/// Whether the state records that a create may have been sent (the intent), so a
/// listing must be consulted before another.
fn maybe_sent(lb: &LoadBalancer) -> bool {
    lb.provider_load_balancer_id.is_some() || lb.status.state != ResourceState::Pending
}

/// What `lb` must see first. A load balancer being made or changed needs a listing that
/// started after its last status write (the change sent, the id recorded) — and, while
/// no provider id is recorded, at least `call_timeout + listing_margin` after the
/// intent, since a listing taken while the create that followed it was still in flight
/// may have missed it (or `listing_margin` after the write recording that the create
/// surely made nothing, [`create_made_nothing`]: nothing is in flight); one
/// shared listing answers every such object of the account. It also needs one newer
/// than its previous look: at most half its current [`poll`] wait old, which is less
/// than the time since that look (that time was at least the wait that look computed,
/// half the time waited by then, so at least a third of the time waited now). Else a
/// listing taken after the last write but before the provider finished would answer
/// every look until the steady listing age ran out, since waiting writes nothing. A
/// converged one accepts the steady listing age.
pub fn need(lb: &LoadBalancer, now: Timestamp, timing: &Timing) -> Need {
    if !maybe_sent(lb) {
        return Need::Nothing;
    }
    let steady = matches!(lb.status.state, ResourceState::Ready | ResourceState::Error)
        && lb.status.observed_generation == lb.generation
        && !lb.delete_requested;
    if steady {
        return Need::Listing(timing.steady_listing_age);
    }
    // With an id, an absence is confirmed by a GET before anything is decided on it, so
    // a listing that started after the last write will do (one from the same instant
    // may predate the call that write followed); without one, an absence is what allows
    // a (second) create, and only a listing that surely started after the create the
    // intent announced was over — whatever became of its answer, on whichever replica's
    // clock — may say so.
    let margin = match lb.provider_load_balancer_id {
        Some(_) if !recreating(lb) => Duration::from_millis(1),
        _ if nothing_in_flight(lb) => timing.listing_margin,
        _ => timing.call_timeout + timing.listing_margin,
    };
    let margin = i128::try_from(margin.as_millis()).unwrap_or(i128::MAX).max(1);
    let since = (now - lb.status.updated_at).whole_milliseconds() - margin;
    match u64::try_from(since) {
        Ok(ms) => Need::Listing(
            Duration::from_millis(ms).min(poll(lb, now, timing) / 2).min(timing.steady_listing_age),
        ),
        Err(_) => Need::Wait(Duration::from_millis(u64::try_from(-since).unwrap_or(u64::MAX))),
    }
}

/// A status to record, with what comes with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The new state.
    pub state: ResourceState,
    /// What to fix or wait for.
    pub message: Option<String>,
    /// The generation converged (kept unless this change converges one).
    pub observed_generation: u64,
    /// The provider id, when it is (newly) known.
    pub provider_id: Option<String>,
    /// The public IP, when known.
    pub ip: Option<String>,
    /// The event this change reports, if any.
    pub event: Option<&'static str>,
    /// Whether it records a call's intent or acceptance (a create about to go, an
    /// update the provider took): always written, even when it reads the same as what
    /// is stored, because its time is what later listings are judged by (one taken
    /// before the latest create attempt or update cannot speak for it).
    pub intent: bool,
}

impl Change {
    /// Whether recording it changes what is stored (an event or an intent always
    /// counts).
    pub fn changes(&self, lb: &LoadBalancer) -> bool {
        self.intent
            || self.event.is_some()
            || self.state != lb.status.state
            || self.message != lb.status.message
            || self.observed_generation != lb.status.observed_generation
            || self
                .provider_id
                .as_ref()
                .is_some_and(|p| lb.provider_load_balancer_id.as_ref() != Some(p))
            || self.ip.as_ref().is_some_and(|ip| lb.ip.as_ref() != Some(ip))
    }

    /// Whether this write makes the load balancer `deleted`.
    pub fn deletes(&self) -> bool {
        self.state == ResourceState::Deleted
    }
}

/// The next step of a reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// No call: record `change` (if it changes anything) and answer `outcome`.
    Settle {
        /// What to record.
        change: Option<Change>,
        /// When to look again.
        outcome: Outcome,
    },
    /// GET this provider id: the listing did not show it.
    Confirm {
        /// Provider id.
        id: String,
    },
    /// Record `intent` first, then create.
    Create {
        /// The intent (state, message, event) recorded before the call.
        intent: Change,
        /// The whole object.
        request: LoadBalancerRequest,
    },
    /// Replace the provider object whole.
    Update {
        /// Provider id.
        id: String,
        /// The whole object.
        request: LoadBalancerRequest,
    },
    /// Record `intent` (if any) first, then delete.
    Delete {
        /// Provider id.
        id: String,
        /// `deleting`, unless already.
        intent: Option<Change>,
    },
}

/// Everything one decision reads.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    /// The stored row (desired state and last observed status).
    pub lb: &'a LoadBalancer,
    /// The whole provider object it asks for, or why it cannot be stated yet.
    pub desired: Result<LoadBalancerRequest, Blocked>,
    /// What is known of the provider object.
    pub observed: Observed,
    /// Now.
    pub now: Timestamp,
    /// Waits.
    pub timing: &'a Timing,
}

/// The whole provider object `spec` asks for, under `name`, with its targets resolved
/// and its ownership tag.
pub fn desired_request(
    id: &LoadBalancerId,
    name: &str,
    spec: &LoadBalancerSpec,
    targets: ProviderTargets,
) -> LoadBalancerRequest {
    LoadBalancerRequest {
        name: name.to_owned(),
        kind: ProviderLoadBalancerKind::from(spec.kind),
        region: spec.region.clone(),
        forwarding_rules: spec.forwarding_rules.clone(),
        health_check: spec.health_check.clone(),
        sticky_sessions: spec.sticky_sessions.clone(),
        targets,
        size_unit: spec.size_unit,
        redirect_http_to_https: spec.redirect_http_to_https,
        global_settings: spec.global_settings.clone(),
        domains: spec.domains.clone().unwrap_or_default(),
        tags: vec![ownership_tag(id)],
    }
}

/// `r` in the one form both sides are compared in: what a provider answers for "left
/// to its default" (one size unit, no sticky sessions, empty priorities) made explicit,
/// lists whose order means nothing sorted, and the create-only fields (kind, tags)
/// dropped.
fn normal(r: &LoadBalancerRequest) -> LoadBalancerRequest {
    let global = r.kind.is_global();
    let mut n = r.clone();
    n.kind = ProviderLoadBalancerKind::Regional;
    n.tags.clear();
    n.size_unit = if global { None } else { Some(r.size_unit.unwrap_or(1)) };
    if n.sticky_sessions.as_ref().is_some_and(|s| s.kind == "none") {
        n.sticky_sessions = None;
    }
    n.forwarding_rules.sort_by_key(|f| {
        (f.entry_protocol.as_str(), f.entry_port, f.target_protocol.as_str(), f.target_port)
    });
    n.domains.sort_by(|a, b| a.name.cmp(&b.name));
    match &mut n.targets {
        ProviderTargets::DropletIds(ids) => ids.sort_unstable(),
        ProviderTargets::LoadBalancerIds(ids) => ids.sort_unstable(),
        ProviderTargets::Tag(_) => {}
    }
    if let Some(g) = &mut n.global_settings
        && g.region_priorities.as_ref().is_some_and(|m| m.is_empty())
    {
        g.region_priorities = None;
    }
    n
}

/// Whether the provider holds what `desired` asks for: the one rule deciding whether an
/// update is sent.
pub fn converged(desired: &LoadBalancerRequest, observed: &LoadBalancerRequest) -> bool {
    normal(desired) == normal(observed)
}

/// The update to send: the whole desired object, with the create-only fields as the
/// provider holds them (its exact kind, its tags).
pub fn update_request(
    desired: &LoadBalancerRequest,
    observed: &LoadBalancerRequest,
) -> LoadBalancerRequest {
    LoadBalancerRequest {
        kind: observed.kind.clone(),
        tags: observed.tags.clone(),
        ..desired.clone()
    }
}

/// The wait before looking at a converging load balancer again: half the time it has
/// waited so far, within `[poll_min, poll_max]`.
pub fn poll(lb: &LoadBalancer, now: Timestamp, timing: &Timing) -> Duration {
    let waited = u64::try_from((now - lb.status.updated_at).whole_milliseconds()).unwrap_or(0);
    Duration::from_millis(waited / 2).clamp(timing.poll_min, timing.poll_max)
}

/// The state of a load balancer being made or changed: `provisioning` until it was
/// first ready, `updating` after (SPEC: ready → updating → ready).
fn being_made(lb: &LoadBalancer) -> ResourceState {
    if lb.ready_at.is_some() { ResourceState::Updating } else { ResourceState::Provisioning }
}

/// A change from the stored status to `state` with `message`, keeping what it does not
/// name.
fn to(lb: &LoadBalancer, state: ResourceState, message: Option<String>) -> Change {
    Change {
        state,
        message,
        observed_generation: lb.status.observed_generation,
        provider_id: None,
        ip: None,
        event: None,
        intent: false,
    }
}

/// `to`, with the event of `state` when entering it.
fn entering(lb: &LoadBalancer, state: ResourceState, message: Option<String>) -> Change {
    let mut c = to(lb, state, message);
    if lb.status.state != state {
        c.event = match state {
            ResourceState::Ready => Some(events::READY),
            ResourceState::Error => Some(events::ERROR),
            ResourceState::Deleted => Some(events::DELETED),
            _ => None,
        };
    }
    c
}

/// How the message of a refusal starts: an `error` with it, at the current generation,
/// is a refusal not to be retried until the generation moves.
pub const REFUSED: &str = "refused by the provider: ";

/// The change recording a refusal by the provider: `error` with its message, for this
/// generation (so it is not retried until the desired state changes).
pub fn refused(lb: &LoadBalancer, message: &str) -> Change {
    let mut c = entering(lb, ResourceState::Error, Some(format!("{REFUSED}{message}")));
    c.observed_generation = lb.generation;
    if lb.status.message != c.message {
        c.event = Some(events::ERROR);
    }
    c
}

/// The change recording the deletion.
pub fn deleted(lb: &LoadBalancer) -> Change {
    entering(lb, ResourceState::Deleted, None)
}

/// What to record when the load balancer's account cannot be reached (`why`: it was
/// deleted), and how the activation ends. Nothing can be asked of the provider: a
/// deletion ends the row with the reason (what the provider may still hold is past this
/// system's reach); anything else is `error` naming the account, at the current
/// generation, until the tenant deletes the load balancer.
pub fn unreachable(lb: &LoadBalancer, why: &str) -> (Change, Outcome) {
    if lb.delete_requested {
        return (entering(lb, ResourceState::Deleted, Some(why.to_owned())), Outcome::Gone);
    }
    let mut c = entering(lb, ResourceState::Error, Some(why.to_owned()));
    c.observed_generation = lb.generation;
    (c, Outcome::Steady)
}

/// The change after the provider accepted an update: converging until a listing taken
/// after it shows the object as asked and active.
pub fn updated(lb: &LoadBalancer, observed: &ProviderLoadBalancer) -> Change {
    let mut c = to(lb, being_made(lb), Some("applying the change at the provider".into()));
    c.provider_id = Some(observed.id.clone());
    // Written even when a previous update's status reads the same: a listing cached
    // between the two PUTs must not pass for one taken after this one.
    c.intent = true;
    c
}

/// The message of a load balancer whose change the provider turned away as busy. Fixed
/// (the provider's words carry a request id), so being turned away again writes
/// nothing and the poll wait keeps growing from when the wait began.
pub const BUSY: &str =
    "waiting for the provider to finish an earlier change before sending this one";

/// The change recording that the provider turned an update or a delete away as busy
/// with an earlier change (one change at a time; one resize a minute): still being
/// changed or deleted, saying what it waits for — never `error`, and no failure: the
/// call is made again at the next poll, so it lands within one poll of the provider
/// allowing it.
pub fn busy(lb: &LoadBalancer) -> Change {
    let state = if lb.delete_requested { ResourceState::Deleting } else { being_made(lb) };
    to(lb, state, Some(BUSY.into()))
}

/// Decides the next step.
pub fn plan(i: &Input<'_>) -> Next {
    let lb = i.lb;
    if lb.delete_requested {
        let intent = (lb.status.state != ResourceState::Deleting)
            .then(|| to(lb, ResourceState::Deleting, Some("deleting at the provider".into())));
        return match (&i.observed, &lb.provider_load_balancer_id) {
            (Observed::Found(p), _) => Next::Delete { id: p.id.clone(), intent },
            // Not listed: a DELETE of the recorded id answers 404 when it is gone, for
            // the price of the GET that would confirm it.
            (Observed::Absent { .. }, Some(id)) => Next::Delete { id: id.clone(), intent },
            // Never sent, gone, or nothing of ours in a listing taken after the intent.
            _ => Next::Settle { change: Some(deleted(lb)), outcome: Outcome::Gone },
        };
    }
    let desired = match &i.desired {
        Ok(d) => d,
        Err(Blocked::Waiting(why)) => {
            return Next::Settle {
                change: Some(to(lb, lb.status.state, Some(why.clone()))),
                outcome: Outcome::Converging { after: i.timing.targets_wait },
            };
        }
        Err(Blocked::Invalid(why)) => {
            let mut c = entering(lb, ResourceState::Error, Some(why.clone()));
            c.observed_generation = lb.generation;
            return Next::Settle { change: Some(c), outcome: Outcome::Steady };
        }
    };
    // Refused for this generation: wait for the tenant, unless our object shows up
    // (a refused create whose earlier attempt did go through).
    let refused_now = lb.status.state == ResourceState::Error
        && lb.status.observed_generation == lb.generation
        && lb.status.message.as_deref().is_some_and(|m| m.starts_with(REFUSED));
    match &i.observed {
        Observed::Foreign(p) => {
            let why = format!(
                "a load balancer named {} (provider id {}) exists in the account and was not \
                 made by this system: rename or delete it at the provider, or rename this one",
                p.spec.name, p.id
            );
            let mut c = entering(lb, ResourceState::Error, Some(why));
            c.observed_generation = lb.generation;
            Next::Settle { change: Some(c), outcome: Outcome::Steady }
        }
        Observed::Found(p) => found(i, p, desired, refused_now),
        Observed::Absent { .. } => match &lb.provider_load_balancer_id {
            Some(id) => Next::Confirm { id: id.clone() },
            None if refused_now => Next::Settle { change: None, outcome: Outcome::Steady },
            None => create(lb, desired, None),
        },
        Observed::NotLooked => create(lb, desired, None),
        Observed::Gone if refused_now => Next::Settle { change: None, outcome: Outcome::Steady },
        Observed::Gone => {
            // It existed (we recorded its id) and a GET says it no longer does: desired
            // state wins, and the tenant is told.
            create(lb, desired, Some(RECREATING))
        }
    }
}

/// Create, after recording the intent (and, for a re-creation, its event).
fn create(lb: &LoadBalancer, desired: &LoadBalancerRequest, why: Option<&str>) -> Next {
    let message = why.unwrap_or("creating at the provider");
    let mut intent = to(lb, being_made(lb), Some(message.into()));
    intent.intent = true;
    // One event per re-creation, however many attempts it takes.
    if why.is_some() && !recreating(lb) {
        intent.event = Some(events::RECREATED);
    }
    Next::Create { intent, request: desired.clone() }
}

fn found(
    i: &Input<'_>,
    p: &ProviderLoadBalancer,
    desired: &LoadBalancerRequest,
    refused_now: bool,
) -> Next {
    let lb = i.lb;
    let adopt = |mut c: Change| {
        if lb.provider_load_balancer_id.as_ref() != Some(&p.id) {
            c.provider_id = Some(p.id.clone());
        }
        c.ip = p.ip.clone();
        c
    };
    let converging = |c: Change| Next::Settle {
        change: Some(adopt(c)),
        outcome: Outcome::Converging { after: poll(lb, i.now, i.timing) },
    };
    if !converged(desired, &p.spec) {
        if refused_now {
            return Next::Settle {
                change: Some(adopt(to(lb, lb.status.state, lb.status.message.clone()))),
                outcome: Outcome::Steady,
            };
        }
        if p.status == ProviderLoadBalancerStatus::New {
            // Every change is refused as busy while it is still being made.
            return converging(to(
                lb,
                being_made(lb),
                Some("waiting for the provider to finish making it before changing it".into()),
            ));
        }
        return Next::Update { id: p.id.clone(), request: update_request(desired, &p.spec) };
    }
    match &p.status {
        ProviderLoadBalancerStatus::Active => {
            let mut c = entering(lb, ResourceState::Ready, None);
            c.observed_generation = lb.generation;
            Next::Settle { change: Some(adopt(c)), outcome: Outcome::Steady }
        }
        ProviderLoadBalancerStatus::New => converging(to(
            lb,
            being_made(lb),
            Some("waiting for the provider to make it active".into()),
        )),
        ProviderLoadBalancerStatus::Errored => {
            let why = "the provider reports the load balancer as errored; it is looked at again at the next resync";
            let mut c = entering(lb, ResourceState::Error, Some(why.into()));
            c.observed_generation = lb.generation;
            Next::Settle { change: Some(adopt(c)), outcome: Outcome::Steady }
        }
        ProviderLoadBalancerStatus::Unknown(s) => {
            converging(to(lb, being_made(lb), Some(format!("the provider reports status {s:?}"))))
        }
    }
}
