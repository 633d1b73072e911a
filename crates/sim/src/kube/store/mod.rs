//! The objects of every simulated cluster and the writes that change them, as an API
//! server's registry carries them out: create (POST), replace (PUT), JSON merge, JSON
//! and strategic merge patch, server-side apply with per-field ownership, delete with
//! preconditions and propagation; each write decoded through the kind's type, defaulted,
//! encoded as the Go type writes it (`bc_domain::kube_wire`: what is stored is what a
//! real API server would answer, so every answer — get, list, watch, write — is), then
//! validated, recorded in `managedFields` and in the cluster's watch history.
//!
//! Invariants: an apply never takes a changed field from another field manager without
//! `force` (409 Conflict naming each field); a write that changes nothing leaves the
//! object — including its `resourceVersion` and `managedFields` times — exactly as it was
//! and records no event (compared as encoded: `tolerations: []` over an object without
//! them is no change); a create never touches an existing object (409 AlreadyExists); a
//! replace or delete whose resourceVersion/uid precondition does not match leaves the
//! object (409 Conflict); `status` is the server's (clients' writes never change it);
//! resource versions only grow, and every change is one event in the history watches
//! read.
//!
//! Split by what it does: `types` (what is stored), `read`, `write`, `ownership`
//! (managedFields), `encode` (bodies in, objects out as the Go types write them), `list`
//! (field selectors, continue tokens) and `persist`; each imports only the ones below
//! it.

mod encode;
mod list;
mod ownership;
mod persist;
mod read;
mod types;
mod write;

pub(crate) use encode::{labels_of, qos_class, render};
pub use list::FieldSelector;
pub use types::{
    Applied, ApplyRequest, Change, ControllerState, Deleted, Edit, EventType, Operation, Page,
    Propagation, Query, WATCH_HISTORY,
};
pub(crate) use types::{Ids, Key, Objects};

#[cfg(test)]
mod tests;
