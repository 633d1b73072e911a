//! bc-sim's integration tests, in one binary: the simulated DigitalOcean, GKE and Kubernetes faces and the simulated bcd: the model's rules, each face over loopback HTTP against the providers' documents (DigitalOcean's OpenAPI, GKE's discovery document) and real clients (kubectl, the official Kubernetes and Google Python clients), chaos, persistence and `deploy/`.
//!
//! One test binary per crate, not one per file: each debug test binary links the whole
//! dependency tree (~140 MB), so a binary per file cost CI minutes of linking and gigabytes
//! of disk. A new test file goes in this directory as `tests/sim/<file>.rs` with a
//! `mod <file>;` line below; nextest names its tests `<file>::<test>`.

mod bcd;
mod chaos;
mod conformance_apiserver;
mod conformance_do;
mod conformance_kube;
mod deploy;
mod do_api;
mod do_schema;
mod gke_api;
mod gke_python;
mod gke_schema;
mod kube_http;
mod kubectl;
mod model;
mod persist;
mod python_client;
