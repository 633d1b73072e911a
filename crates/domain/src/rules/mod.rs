//! The rules as pure functions: each takes what it decides on (and `now`) as arguments,
//! so every decision the API and the reconcilers make is unit- and property-tested here,
//! without I/O.
//!
//! Invariant: nothing in `rules` reads a clock, a store or a provider; the same inputs
//! always give the same decision.
//!
//! - [`policy`]: pool policy and name validation with JSON paths, and which policy
//!   changes are refused (SPEC §4).
//! - [`quota`]: booking, releasing and setting quota units (SPEC §4, §11).
//! - [`budget`]: the provider-call budget of an account (sliding minute and hour
//!   windows, the provider's pause), shared by replicas through the store.
//! - [`billing`]: usage lines exact to the second, and when a load balancer's billing
//!   opens and closes (SPEC §11, §12).
//! - [`join`]: `nodesListed`/`nodesJoined`/`waitingToJoin` and the 15-minute message
//!   (SPEC §6).
//! - [`node_proof`]: which node a joining bcd proves it runs on (SPEC §9).
//! - [`plan`]: the flavor → provider node-pool plan that never touches the tenant's
//!   pools (SPEC §6).
//! - [`load_balancer`]: what regional and global load balancers take (SPEC §11).
//! - [`drain`]: the next upgrade step, drain waits, active bookings and the refusal of
//!   bookings while a drain waits (SPEC §6, §10).
//! - [`idempotency`]: the 24-hour `requestId` window and what a repeated create gets
//!   (SPEC §2).

pub mod billing;
pub mod budget;
pub mod drain;
pub mod idempotency;
pub mod join;
pub mod load_balancer;
pub mod node_proof;
pub mod plan;
pub mod policy;
pub mod quota;
