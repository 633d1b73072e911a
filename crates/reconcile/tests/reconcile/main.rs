//! bc-reconcile's tests, in one binary (one per crate: each debug test binary links the whole
//! dependency tree): the substrate, tenant-cluster and node-pool reconcilers on both
//! providers, their fault schedules, the load balancer reconciler on every path, the
//! runtime's scheduling, leases and shutdown, the shared budget and observer, the outbox
//! relay — against the simulator through the production adapters and the real store on
//! a stepped clock.

mod churn;
mod clusters;
mod common;
mod edges28b;
mod faults;
mod gke_edges;
mod gke_upgrades;
mod kubernetes_faults;
mod leases;
mod lifecycle_faults;
mod listings;
mod load_balancers;
mod no_write;
mod ownership;
mod refusals;
mod relay;
mod replicas;
mod request_budget;
mod resize_window;
mod runtime;
mod sessions;
mod silent_api;
mod steady;
mod substrates;
mod teardown;
mod upgrades;
