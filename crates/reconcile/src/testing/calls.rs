//! The provider calls the reconcilers of an [`super::Env`] made, by kind, counted where
//! they reach the adapter (under the budget and the listing cache): what a test asks
//! instead of a provider's route, so one assertion holds on every provider.
//!
//! Invariant: every call that reaches the adapter is counted once, whatever its answer;
//! a call the budget refuses never reaches it and is not counted.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use bc_domain::ports::ProviderResult;

use crate::forward::{CallHook, ProviderCall};

/// Calls by kind.
#[derive(Debug, Default)]
pub struct CallCounts(Mutex<BTreeMap<ProviderCall, u64>>);

impl CallCounts {
    /// How many `call`s were made.
    pub fn of(&self, call: ProviderCall) -> u64 {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).get(&call).copied().unwrap_or(0)
    }
}

#[async_trait]
impl CallHook for CallCounts {
    type Ticket = ();
    async fn before(&self, call: ProviderCall) -> ProviderResult<()> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()).entry(call).or_default() += 1;
        Ok(())
    }
}
