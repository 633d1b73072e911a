//! The methods of the contract (SPEC §4–§12), one file per resource: what each input acts
//! on and the rules its schema cannot say ([`crate::registry::MethodInput`]), its example,
//! and one [`Method::declare`] per method binding a handler to a bc-api-types endpoint
//! (the resource's description and wire types are there, re-exported here).
//!
//! The contract's registry instance ([`registry`]) is here, above both the method
//! framework ([`crate::registry`]) and the services ([`crate::ctx`]) the methods use.
//!
//! Invariant: each method's input names what it acts on ([`crate::registry::MethodInput`]),
//! so authorization never depends on a handler remembering to ask.

pub mod agents;
pub mod billing;
pub mod bookings;
pub mod clusters;
pub mod events;
pub mod load_balancers;
pub mod node_pools;
pub mod pools;
pub mod provider_accounts;
pub mod quotas;
pub mod substrates;

use std::fmt::Display;
use std::sync::LazyLock;

pub(crate) use bc_api_types::shown_state;

pub use billing::BillingUsageOutput;
pub use clusters::KubernetesClusterView;
pub use load_balancers::LoadBalancerView;
pub use node_pools::{NodeCounts, NodePoolView};
pub use provider_accounts::ProviderAccountView;
pub use substrates::KubernetesSubstrateView;

use crate::error::ApiError;
use crate::registry::{Method, Registry};

/// The registry of this contract (SPEC §4–§12): every method below, declared once.
pub fn registry() -> &'static Registry {
    static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Registry::new(all()));
    &REGISTRY
}

/// Every method, in the reference docs' order of resources.
pub(crate) fn all() -> Vec<Method> {
    [
        pools::methods(),
        quotas::methods(),
        provider_accounts::methods(),
        substrates::methods(),
        clusters::methods(),
        node_pools::methods(),
        load_balancers::methods(),
        bookings::methods(),
        billing::methods(),
        events::methods(),
        agents::methods(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// `ABORTED` unless `expected` (a caller's `expectedGeneration`) is absent or `current`.
pub(crate) fn check_generation(
    expected: Option<u64>,
    current: u64,
    what: &dyn Display,
) -> Result<(), ApiError> {
    match expected {
        Some(e) if e != current => Err(ApiError::aborted(format!(
            "{what} is at generation {current}, not {e}: read it again and retry"
        ))),
        _ => Ok(()),
    }
}

/// The example tenant and objects the method examples name (OpenAPI examples, and the
/// registry-wide tests, which store objects with exactly these ids).
pub mod examples {
    /// A tenant.
    pub const TENANT: &str = "acme";
    /// A pool of [`TENANT`].
    pub const POOL: &str = "pool_01jq3k5v9x8y7z6w5v4t3s2r1q";
    /// A provider account of [`TENANT`].
    pub const ACCOUNT: &str = "acct_01jq3k5v9x8y7z6w5v4t3s2r1a";
    /// A cluster on [`ACCOUNT`].
    pub const CLUSTER: &str = "cluster_01jq3k5v9x8y7z6w5v4t3s2r1c";
    /// A node pool of [`CLUSTER`].
    pub const NODE_POOL: &str = "nodepool_01jq3k5v9x8y7z6w5v4t3s2r1n";
    /// A load balancer on [`ACCOUNT`] for [`POOL`].
    pub const LOAD_BALANCER: &str = "lb_01jq3k5v9x8y7z6w5v4t3s2r1b";
    /// A booking of [`POOL`].
    pub const BOOKING: &str = "booking_01jq3k5v9x8y7z6w5v4t3s2r1k";
}

/// The `MethodInput` of an input naming one object of a tenant (`{tenantId, <id>}`, the
/// struct declared by bc-api-types), acting on that object.
macro_rules! object_ref {
    ($name:ident, $field:ident: $id:ty, $target:ident, $key:literal = $example:expr) => {
        impl crate::registry::MethodInput for $name {
            fn target(&self) -> crate::access::Target {
                crate::access::Target::$target(self.tenant_id.clone(), self.$field.clone())
            }
            fn example() -> serde_json::Value {
                serde_json::json!({ "tenantId": crate::methods::examples::TENANT, $key: $example })
            }
        }
    };
}
pub(crate) use object_ref;
