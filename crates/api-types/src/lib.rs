//! bc-api-types: the API's methods as data — each method's facts (resource, name, kind,
//! authorization, description) and its input and output types, one module per resource.
//!
//! The server ([bc-api]) binds a handler to each [`Endpoint`]; the client (bc-client) and
//! the `bc` CLI call the same endpoints with the same types, so a method declared here is
//! in all three without a second copy of a struct.
//!
//! Invariant: pure data and serde — no I/O, no server (the only dependencies are
//! bc-domain, serde and schemars). Inputs serialize without the optional fields left
//! unset, so what a client sends is what the server's schema accepts.
//!
//! [bc-api]: https://docs.rs/bc-api

pub mod agents;
pub mod billing;
pub mod bookings;
pub mod clusters;
pub mod endpoint;
pub mod events;
pub mod load_balancers;
pub mod meta;
pub mod node_pools;
pub mod page;
pub mod pools;
pub mod provider_accounts;
pub mod quotas;
pub mod schema;
pub mod substrates;

pub use endpoint::{Endpoint, Entry, Input, Output};
pub use meta::{Authentication, Authorization, Kind, MethodId, MethodInfo, Resource, ResourceType};
pub use page::{ListInput, ListOutput, PageSize, PageToken};

/// Every method, in the reference docs' order of resources (the server's registry is
/// exactly these, each with its handler).
pub fn catalogue() -> Vec<Entry> {
    vec![
        Entry::of::<pools::Create>(),
        Entry::of::<pools::Get>(),
        Entry::of::<pools::List>(),
        Entry::of::<pools::Update>(),
        Entry::of::<pools::Archive>(),
        Entry::of::<quotas::Set>(),
        Entry::of::<quotas::List>(),
        Entry::of::<provider_accounts::Create>(),
        Entry::of::<provider_accounts::Get>(),
        Entry::of::<provider_accounts::List>(),
        Entry::of::<provider_accounts::Delete>(),
        Entry::of::<substrates::Get>(),
        Entry::of::<clusters::Create>(),
        Entry::of::<clusters::Get>(),
        Entry::of::<clusters::List>(),
        Entry::of::<clusters::Upgrade>(),
        Entry::of::<clusters::Delete>(),
        Entry::of::<node_pools::Create>(),
        Entry::of::<node_pools::Get>(),
        Entry::of::<node_pools::List>(),
        Entry::of::<node_pools::Resize>(),
        Entry::of::<node_pools::Delete>(),
        Entry::of::<load_balancers::Create>(),
        Entry::of::<load_balancers::Get>(),
        Entry::of::<load_balancers::List>(),
        Entry::of::<load_balancers::Update>(),
        Entry::of::<load_balancers::Delete>(),
        Entry::of::<bookings::Create>(),
        Entry::of::<bookings::End>(),
        Entry::of::<bookings::List>(),
        Entry::of::<billing::Usage>(),
        Entry::of::<events::List>(),
        Entry::of::<agents::Join>(),
        Entry::of::<agents::Heartbeat>(),
    ]
}

/// The method of the catalogue whose id is `id` (`pools.create`).
pub fn find(id: &str) -> Option<&'static Entry> {
    static ALL: std::sync::LazyLock<Vec<Entry>> = std::sync::LazyLock::new(catalogue);
    ALL.iter().find(|e| {
        let m = e.info.id();
        id.split_once('.') == Some((m.resource, m.name))
    })
}

/// The state an object shows: `deleting` from the moment its deletion is asked for
/// (desired state) until a reconciler records it `deleted`.
pub fn shown_state(
    delete_requested: bool,
    observed: bc_domain::ResourceState,
) -> bc_domain::ResourceState {
    if delete_requested && observed != bc_domain::ResourceState::Deleted {
        bc_domain::ResourceState::Deleting
    } else {
        observed
    }
}
