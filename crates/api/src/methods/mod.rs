//! The methods of the contract (SPEC §4–§12), one file per resource: its description, its
//! wire types (camelCase, unknown fields refused, optional outputs omitted, times RFC 3339
//! in UTC with milliseconds) and one [`Method::declare`] per method.
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

use bc_domain::ResourceState;

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

/// The state an object shows: `deleting` from the moment its deletion is asked for
/// (desired state) until a reconciler records it `deleted`.
pub(crate) fn shown_state(delete_requested: bool, observed: ResourceState) -> ResourceState {
    if delete_requested && observed != ResourceState::Deleted {
        ResourceState::Deleting
    } else {
        observed
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

/// A list answer: `{"<key>": [...], "nextPageToken"?}` (SPEC §2), the key being the
/// resource's path segment.
macro_rules! list_output {
    ($(#[$doc:meta])* $name:ident, $field:ident, $item:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            /// One page of items, by id.
            pub $field: Vec<$item>,
            /// Pass as `pageToken` for the next page; present while more remain.
            #[serde(skip_serializing_if = "Option::is_none")]
            pub next_page_token: Option<crate::page::PageToken>,
        }

        impl $name {
            /// The answer of `method` for a store page, each item shown by `show`.
            pub fn of<T, K: bc_domain::ports::CursorKey>(
                method: crate::registry::MethodId,
                page: bc_domain::ports::Page<T, K>,
                show: impl Fn(T) -> $item,
            ) -> Self {
                let next_page_token = crate::page::next_token(method, &page);
                Self { $field: page.items.into_iter().map(show).collect(), next_page_token }
            }
        }
    };
}
pub(crate) use list_output;

/// An input naming one object of a tenant, `{tenantId, <id>}`, acting on that object.
macro_rules! object_ref {
    ($(#[$doc:meta])* $name:ident, $field:ident: $id:ty, $target:ident, $key:literal = $example:expr) => {
        $(#[$doc])*
        #[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct $name {
            /// The object's tenant.
            pub tenant_id: bc_domain::TenantId,
            /// The object.
            pub $field: $id,
        }

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

/// A list input (SPEC §2): `tenantId`, the list's own filters, `pageSize`, `pageToken`.
macro_rules! list_input {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident: $ty:ty,)* }) => {
        $(#[$doc])*
        #[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct $name {
            /// The tenant.
            pub tenant_id: bc_domain::TenantId,
            $($(#[$fdoc])* pub $field: $ty,)*
            /// Items per page.
            #[serde(default)]
            pub page_size: Option<crate::page::PageSize>,
            /// `nextPageToken` of the previous page.
            #[serde(default)]
            pub page_token: Option<crate::page::PageToken>,
        }

        impl $name {
            /// The store page this call of `method` asks for.
            pub fn page<K: bc_domain::ports::CursorKey>(
                &self,
                method: crate::registry::MethodId,
            ) -> Result<bc_domain::ports::PageRequest<K>, crate::error::ApiError> {
                crate::page::page_request(method, self.page_size, self.page_token.as_ref())
            }
        }
    };
}
pub(crate) use list_input;
