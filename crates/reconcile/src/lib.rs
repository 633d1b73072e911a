//! bc-reconcile: the reconcilers of DESIGN.md ("Reconcilers") and the runtime that
//! schedules them, on the ports of `bc-domain` only (no adapter types).
//!
//! Invariant: a reconciler is handed a key and nothing else — no "what changed" hint.
//! Each activation re-reads the desired and observed state and derives the whole diff, so
//! running it twice, after a crash, or on another replica changes nothing; and every
//! commit it makes carries the fence of the lease it holds
//! ([`bc_domain::ports::Fence`]), so a replica that lost its lease writes nothing.

pub mod budget;
pub mod clusters;
pub mod forward;
pub mod kinds;
pub mod node_pools;
pub mod observe;
pub mod provider_resources;
pub mod reconciler;
pub mod relay;
pub mod runtime;
pub mod shared;
pub mod substrates;
#[cfg(feature = "testing")]
pub mod testing;
mod together;

pub use budget::{Budget, BudgetedProvider, LocalBudget, Spend, StoreBudget};
pub use forward::{CallHook, Forward, ForwardRegistry, ProviderCall};
pub use kinds::{reconciler_of, reconcilers};
pub use observe::{Listing, Observer, SharedObserver, UnsharedObserver};
pub use provider_resources::LoadBalancers;
pub use reconciler::{Activation, Deps, Outcome, ReconcileError, Reconciler, Settings};
pub use relay::{BroadcastPublisher, Relay, RelayConfig};
pub use runtime::{Runtime, RuntimeConfig, RuntimeStatus};
pub use shared::{Entropy, OsEntropy};
