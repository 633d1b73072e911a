//! bc-reconcile's tests, in one binary: the load balancer reconciler on every path, the
//! runtime's scheduling, leases and shutdown, the shared budget and observer, the outbox
//! relay — against the simulator through the production adapters and the real store on
//! a stepped clock.

mod common;
mod faults;
mod load_balancers;
mod no_write;
mod relay;
mod replicas;
mod runtime;
mod service;
