//! bc-domain: the pure core of the Better Compute Kubernetes and provider-resources
//! control plane — ids, names, policies, state machines, rules and ports.
//!
//! Invariant: no I/O. Nothing in this crate's dependency tree opens a socket, a file or
//! a database, or reads the clock; time comes in as an argument or through
//! [`ports::Clock`].

pub mod agent;
pub mod error;
pub mod id;
pub mod kube_wire;
pub mod model;
pub mod name;
#[cfg(feature = "schema")]
pub mod one_of;
pub mod policy;
pub mod ports;
pub mod recipes;
pub mod rules;
#[cfg(feature = "schema")]
pub mod schema;
pub mod state;
pub mod time;
pub mod token;

pub use error::{Error, ErrorCode, FieldViolation};
pub use id::*;
pub use name::*;
pub use ports::{ProviderError, StoreError};
pub use state::{NodePoolState, ResourceState};
pub use time::{TimeError, Timestamp};
