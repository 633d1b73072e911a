//! bc-providers's integration tests, in one binary: the provider adapters (DigitalOcean, GKE, kube) against the simulator over loopback and against wiremock.
//!
//! One test binary per crate, not one per file: each debug test binary links the whole
//! dependency tree (~140 MB), so a binary per file cost CI minutes of linking and gigabytes
//! of disk. A new test file goes in this directory as `tests/providers/<file>.rs` with a
//! `mod <file>;` line below; nextest names its tests `<file>::<test>`.

mod common;
mod digitalocean_sim;
mod digitalocean_wire;
mod do_session;
mod end_to_end;
mod gke_session;
mod gke_sim;
mod kube_secrets;
mod kube_sim;
mod token_review;
