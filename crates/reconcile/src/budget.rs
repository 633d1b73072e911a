//! The provider-call budget of each account, and the provider decorator that spends it.
//!
//! Invariant: every HTTP request an adapter sends for a call a reconciler makes through
//! [`BudgetedProvider`] (the forwarding decorator of `crate::forward` with the [`Spend`]
//! hook) first takes one call from its account's [`Budget`] (each page of a listing, each
//! retry: the provider counts requests, not port calls); a 429 from the provider pauses
//! that budget until the reset the provider named. With [`StoreBudget`] the budget is one
//! row in the store shared by every replica (decided by `bc_domain::rules::budget`,
//! written by compare-and-swap), so replicas together never spend more than one account's
//! limit; [`LocalBudget`] keeps the same rule in memory for a single process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bc_domain::ports::{Clock, ProviderImpl, ProviderResult, RequestGate, Store, StoredBudget};
use bc_domain::rules::budget::{self, BudgetConfig, BudgetState};
use bc_domain::{ProviderAccountId, ProviderError, Timestamp};

use crate::forward::{CallHook, Forward, ProviderCall};
use crate::together::Together;

/// How often a [`StoreBudget`] re-reads and retries when other replicas keep winning
/// the compare-and-swap, before it reports the store as contended.
const CAS_ATTEMPTS: usize = 16;

/// Where an account's provider calls are counted.
#[async_trait]
pub trait Budget: Send + Sync {
    /// Takes one call from `account`'s budget at `now`. A denial is
    /// `ProviderError::OverBudget` with the wait the budget names (the runtime retries
    /// the item then, without counting a failure); a budget that cannot be read is
    /// `Transient`.
    async fn acquire(&self, account: &ProviderAccountId, now: Timestamp) -> ProviderResult<()>;
    /// The provider answered 429: no call of `account` before `until`, on any replica.
    async fn pause(&self, account: &ProviderAccountId, until: Timestamp) -> ProviderResult<()>;
    /// Whether a call of `account` would be granted at `now`, taking nothing: `Ok`, or
    /// the `OverBudget` denial `acquire` would answer. A look, not a promise (another
    /// caller may take the call first); for callers that must record something before a
    /// call only if the call can go.
    async fn peek(&self, account: &ProviderAccountId, now: Timestamp) -> ProviderResult<()>;
}

fn denied(wait_ms: u64) -> ProviderError {
    ProviderError::OverBudget { retry_after_ms: wait_ms }
}

/// One process's budgets, in memory (tests, and a single process that owns its
/// accounts alone). Two processes with a `LocalBudget` each spend twice the limit.
#[derive(Debug, Default)]
pub struct LocalBudget {
    config: BudgetConfig,
    states: Mutex<HashMap<ProviderAccountId, BudgetState>>,
}

impl LocalBudget {
    /// Budgets of `config` per account.
    pub fn new(config: BudgetConfig) -> Self {
        Self { config, states: Mutex::new(HashMap::new()) }
    }
}

#[async_trait]
impl Budget for LocalBudget {
    async fn acquire(&self, account: &ProviderAccountId, now: Timestamp) -> ProviderResult<()> {
        let mut states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        let state = states.entry(account.clone()).or_default();
        *state = budget::acquire(&self.config, state, now, 1).map_err(denied)?;
        Ok(())
    }

    async fn pause(&self, account: &ProviderAccountId, until: Timestamp) -> ProviderResult<()> {
        let mut states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        let state = states.entry(account.clone()).or_default();
        *state = budget::pause(state, until);
        Ok(())
    }

    async fn peek(&self, account: &ProviderAccountId, now: Timestamp) -> ProviderResult<()> {
        let states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        let state = states.get(account).copied().unwrap_or_default();
        budget::acquire(&self.config, &state, now, 1).map(|_| ()).map_err(denied)
    }
}

/// Budgets shared by every replica through the store: read, decide with the one rule,
/// write back only if nobody wrote in between (else read again). The last row seen is
/// cached, so a replica alone on an account pays no read. Within one process the updates
/// of an account take turns: concurrent activations of the same replica would otherwise
/// race each other's compare-and-swap (all but one losing, re-reading and trying again,
/// quadratic in the concurrency, and past [`CAS_ATTEMPTS`] reporting contention no other
/// replica caused); only other replicas can now make a swap miss. The updates waiting
/// for the turn go together (`crate::together`): each decided with the one rule in the
/// order they were asked, as if each had its turn, and one compare-and-swap writes what
/// they came to — one store write for many provider requests, not one each.
pub struct StoreBudget {
    store: Arc<dyn Store>,
    config: BudgetConfig,
    seen: Mutex<HashMap<ProviderAccountId, StoredBudget>>,
    turns: Mutex<HashMap<ProviderAccountId, Arc<Turn>>>,
}

/// The turn an account's updates take in this process, and the updates waiting for it.
type Turn = Together<Change, ProviderResult<()>>;

/// One update of an account's budget: a call taken at a time, or a pause until a time.
#[derive(Debug, Clone, Copy)]
enum Change {
    Acquire(Timestamp),
    Pause(Timestamp),
}

impl StoreBudget {
    /// Budgets of `config` per account, kept in `store`.
    pub fn new(store: Arc<dyn Store>, config: BudgetConfig) -> Self {
        Self { store, config, seen: Mutex::new(HashMap::new()), turns: Mutex::new(HashMap::new()) }
    }

    /// The turn this process's updates of `account` take.
    fn turn(&self, account: &ProviderAccountId) -> Arc<Turn> {
        let mut turns = self.turns.lock().unwrap_or_else(|e| e.into_inner());
        turns.entry(account.clone()).or_default().clone()
    }

    fn cached(&self, account: &ProviderAccountId) -> Option<StoredBudget> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).get(account).copied()
    }

    fn remember(&self, account: &ProviderAccountId, seen: Option<StoredBudget>) {
        let mut map = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        match seen {
            Some(s) => map.insert(account.clone(), s),
            None => map.remove(account),
        };
    }

    /// The budget after `change`, or its denial (which changes nothing).
    fn decide(&self, state: &BudgetState, change: Change) -> Result<BudgetState, ProviderError> {
        match change {
            Change::Acquire(now) => budget::acquire(&self.config, state, now, 1).map_err(denied),
            Change::Pause(until) => Ok(budget::pause(state, until)),
        }
    }

    /// Applies `change` to the account's budget, with the other changes of this process
    /// waiting for the account's turn.
    async fn update(&self, account: &ProviderAccountId, change: Change) -> ProviderResult<()> {
        let turn = self.turn(account);
        let run = |changes: Vec<Change>| self.update_all(account, changes);
        turn.call(change, run, || {
            Err(ProviderError::Transient { message: "the budget update was interrupted".into() })
        })
        .await
    }

    /// Applies `changes` in order by one compare-and-swap: each decided on the state the
    /// ones before it left (a denial writes nothing), the result written only if nobody
    /// wrote since it was read — else read again and decide every change again. Each
    /// change's answer, in order.
    async fn update_all(
        &self,
        account: &ProviderAccountId,
        changes: Vec<Change>,
    ) -> Vec<ProviderResult<()>> {
        let key = account.as_str();
        let unavailable = |e: bc_domain::StoreError| ProviderError::Transient {
            message: format!("the provider budget of account {account} could not be read: {e}"),
        };
        let every = |e: ProviderError| changes.iter().map(|_| Err(e.clone())).collect();
        // Try the row last seen first: alone on an account, it is still current.
        let mut current = match self.cached(account) {
            Some(c) => Some(c),
            None => match self.store.budget_get(key).await {
                Ok(c) => c,
                Err(e) => return every(unavailable(e)),
            },
        };
        for _ in 0..CAS_ATTEMPTS {
            let mut state = current.map(|c| c.state).unwrap_or_default();
            let mut answers = Vec::with_capacity(changes.len());
            for change in &changes {
                answers.push(self.decide(&state, *change).map(|next| state = next));
            }
            if answers.iter().all(Result::is_err) {
                self.remember(account, current);
                return answers;
            }
            let expected = current.map(|c| c.version);
            match self.store.budget_put(key, expected, &state).await {
                Ok(true) => {
                    let version = expected.map_or(1, |v| v + 1);
                    self.remember(account, Some(StoredBudget { state, version }));
                    return answers;
                }
                Ok(false) => {}
                Err(e) => return every(unavailable(e)),
            }
            current = match self.store.budget_get(key).await {
                Ok(c) => c,
                Err(e) => return every(unavailable(e)),
            };
        }
        self.remember(account, None);
        every(ProviderError::Transient {
            message: format!("the provider budget of account {account} is contended; retry"),
        })
    }
}

#[async_trait]
impl Budget for StoreBudget {
    async fn acquire(&self, account: &ProviderAccountId, now: Timestamp) -> ProviderResult<()> {
        self.update(account, Change::Acquire(now)).await
    }

    async fn pause(&self, account: &ProviderAccountId, until: Timestamp) -> ProviderResult<()> {
        self.update(account, Change::Pause(until)).await
    }

    async fn peek(&self, account: &ProviderAccountId, now: Timestamp) -> ProviderResult<()> {
        // The row last seen is at most as booked as the stored one (windows only fill
        // up), so a denial it gives is the store's too; a grant is checked again there.
        let state = match self.cached(account) {
            Some(c) => c.state,
            None => self
                .store
                .budget_get(account.as_str())
                .await
                .map_err(|e| ProviderError::Transient {
                    message: format!(
                        "the provider budget of account {account} could not be read: {e}"
                    ),
                })?
                .map(|c| c.state)
                .unwrap_or_default(),
        };
        budget::acquire(&self.config, &state, now, 1).map(|_| ()).map_err(denied)
    }
}

/// The gate through which an adapter's every request takes one call from the account's
/// budget.
struct AccountGate {
    budget: Arc<dyn Budget>,
    account: ProviderAccountId,
    clock: Arc<dyn Clock>,
}

#[async_trait]
impl RequestGate for AccountGate {
    async fn admit(&self) -> ProviderResult<()> {
        self.budget.acquire(&self.account, self.clock.now()).await
    }
}

/// The budget as a [`CallHook`]: every request a call sends first takes one from its
/// account's budget (through the call's [`RequestGate`]), a 429 it meets pauses that
/// budget for every replica, and after every call that may change the provider's objects
/// `written` runs, whatever its outcome.
pub struct Spend {
    gate: Arc<AccountGate>,
    written: Option<Arc<dyn Fn(ProviderCall) + Send + Sync>>,
}

#[async_trait]
impl CallHook for Spend {
    type Ticket = ();

    /// Nothing is taken per call: the gate takes one per request the call sends.
    async fn before(&self, _: ProviderCall) -> ProviderResult<()> {
        Ok(())
    }

    fn request_gate(&self) -> Option<Arc<dyn RequestGate>> {
        Some(self.gate.clone())
    }

    async fn after(
        &self,
        call: ProviderCall,
        (): (),
        outcome: Result<(), &ProviderError>,
    ) -> ProviderResult<()> {
        if let Err(ProviderError::RateLimited { retry_after_ms }) = outcome {
            let ms = i64::try_from(*retry_after_ms).unwrap_or(i64::MAX / 2);
            let g = &self.gate;
            let until = g.clock.now() + time::Duration::milliseconds(ms);
            // The call's own answer matters more than recording the pause; a failed
            // write only means the next caller meets the 429 itself.
            if let Err(e) = g.budget.pause(&g.account, until).await {
                tracing::warn!(account = %g.account, error = %e, "could not pause the provider budget");
            }
        }
        if call.writes()
            && let Some(w) = &self.written
        {
            w(call);
        }
        Ok(())
    }
}

/// A provider whose every request first takes one call from its account's budget, and
/// whose 429 answers pause that budget for every replica. A call an adapter answers from
/// its cache (`credentials` still fresh) sends nothing and spends nothing.
pub type BudgetedProvider = Forward<Spend>;

impl Forward<Spend> {
    /// `inner`, spending from `budget` as `account`.
    pub fn new(
        inner: Arc<dyn ProviderImpl>,
        budget: Arc<dyn Budget>,
        account: ProviderAccountId,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self::with_hook(
            inner,
            Spend { gate: Arc::new(AccountGate { budget, account, clock }), written: None },
        )
    }

    /// `self`, calling `written` with the call after every call that may change the
    /// provider's objects, whatever its outcome (a failed or unanswered write may still
    /// have taken effect): what keeps a cached listing from outliving a write.
    pub fn on_write(mut self, written: Arc<dyn Fn(ProviderCall) + Send + Sync>) -> Self {
        self.hook_mut().written = Some(written);
        self
    }
}
