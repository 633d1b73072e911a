//! The rules as pure functions: each takes what it decides on (and `now`) as arguments,
//! so every decision the API and the reconcilers make is unit- and property-tested here,
//! without I/O.
//!
//! Invariant: nothing in `rules` reads a clock, a store or a provider; the same inputs
//! always give the same decision.

pub mod billing;
pub mod join;
pub mod plan;
pub mod policy;
pub mod quota;
