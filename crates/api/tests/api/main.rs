//! bc-api's tests, in one binary: the registry against SPEC §4–§12, the generated docs,
//! authentication, the authorization matrix, the error mapping, the service endpoints,
//! and property tests of the input checks — in process, through the real router, on the
//! real SQLite store.

mod authn;
mod authz_matrix;
mod common;
mod docs;
mod errors;
mod pipeline;
mod properties;
mod registry;
mod service;
