//! bc-api's tests, in one binary: the registry against SPEC §4–§12, the generated docs,
//! authentication, the authorization matrix, the rules every method keeps (input checks,
//! idempotency, generations), each resource's behaviour, the event stream, the error
//! mapping, the service endpoints, secrets, and property tests of the input checks — in
//! process, through the real router, on the real store (SQLite and PostgreSQL), with the
//! production DigitalOcean and kube adapters on the simulator as the provider and the
//! clusters.

mod accounts;
mod agents;
mod authn;
mod authz_matrix;
mod bounds;
mod common;
mod contract;
mod docs;
mod errors;
mod hostile;
mod join_flood;
mod kubernetes;
mod layers;
mod ledger;
mod load_balancers;
mod object_policies;
mod object_policies_lists;
mod openapi;
mod pipeline;
mod pools;
mod properties;
mod recipes_only;
mod registry;
mod secrets;
mod service;
mod slow_body;
mod token_checks;
mod twins;
