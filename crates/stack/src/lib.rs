//! bc-stack: the composition root of the binaries. It turns configuration (the flags of
//! SPEC §13) into a running system — the store, the real adapters (DigitalOcean over
//! reqwest, clusters over `kube`), the API router, the reconciler runtime, the event
//! relay — and it is `bc-api dev`: the simulated cloud in process with those same real
//! adapters pointed at it over loopback HTTP(S).
//!
//! Invariant: the binaries and the end-to-end tests build the system through these
//! functions only, so what a test runs is what an operator runs; no global state, so one
//! process may hold several stacks (the tests do).

pub mod config;
pub mod conn;
pub mod db;
pub mod dev;
pub mod logs;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tokens;
pub mod wire;

pub use config::{ApiArgs, BudgetArgs, LogFormat, SharedArgs};
pub use dev::{DevOptions, DevStack};
pub use wire::{Adapters, ReconcileOptions, Served};
