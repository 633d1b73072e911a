//! bc-conformance's tests, in one binary (one per crate: each debug test binary links the
//! whole dependency tree): the adapters' contract run against the simulator through the
//! DigitalOcean and the GKE adapter, and the command's usage errors.

mod against_simulator;
mod common;
mod gke_against_simulator;
