//! The `Authorizer` port: decides whether a token's grants allow a permission on a
//! concrete resource, given the resource's scope chain (leaf first, `compute-system` last).
//!
//! Invariant: a decision depends only on its arguments (the engine's policies are fixed
//! when it is built), so the caller decides which resource to ask about and when.

use serde::{Deserialize, Serialize};

use crate::id::TokenId;
use crate::model::{Grant, Scope};

/// The permissions of SPEC §3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Permission {
    /// `compute:pools:read`.
    #[serde(rename = "compute:pools:read")]
    PoolsRead,
    /// `compute:pools:manage`.
    #[serde(rename = "compute:pools:manage")]
    PoolsManage,
    /// `compute:provider-accounts:read`.
    #[serde(rename = "compute:provider-accounts:read")]
    ProviderAccountsRead,
    /// `compute:provider-accounts:manage`.
    #[serde(rename = "compute:provider-accounts:manage")]
    ProviderAccountsManage,
    /// `compute:kubernetes:read`.
    #[serde(rename = "compute:kubernetes:read")]
    KubernetesRead,
    /// `compute:kubernetes:manage`.
    #[serde(rename = "compute:kubernetes:manage")]
    KubernetesManage,
    /// `compute:load-balancers:read`.
    #[serde(rename = "compute:load-balancers:read")]
    LoadBalancersRead,
    /// `compute:load-balancers:manage`.
    #[serde(rename = "compute:load-balancers:manage")]
    LoadBalancersManage,
    /// `compute:bookings:read`.
    #[serde(rename = "compute:bookings:read")]
    BookingsRead,
    /// `compute:bookings:manage`.
    #[serde(rename = "compute:bookings:manage")]
    BookingsManage,
    /// `compute:billing:read`.
    #[serde(rename = "compute:billing:read")]
    BillingRead,
    /// `compute:events:read`.
    #[serde(rename = "compute:events:read")]
    EventsRead,
    /// `compute:quotas:manage`.
    #[serde(rename = "compute:quotas:manage")]
    QuotasManage,
}

impl Permission {
    /// Every permission, in SPEC §3's order.
    pub const ALL: [Permission; 13] = [
        Permission::PoolsRead,
        Permission::PoolsManage,
        Permission::ProviderAccountsRead,
        Permission::ProviderAccountsManage,
        Permission::KubernetesRead,
        Permission::KubernetesManage,
        Permission::LoadBalancersRead,
        Permission::LoadBalancersManage,
        Permission::BookingsRead,
        Permission::BookingsManage,
        Permission::BillingRead,
        Permission::EventsRead,
        Permission::QuotasManage,
    ];

    /// The textual form, e.g. `compute:pools:read`.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::PoolsRead => "compute:pools:read",
            Permission::PoolsManage => "compute:pools:manage",
            Permission::ProviderAccountsRead => "compute:provider-accounts:read",
            Permission::ProviderAccountsManage => "compute:provider-accounts:manage",
            Permission::KubernetesRead => "compute:kubernetes:read",
            Permission::KubernetesManage => "compute:kubernetes:manage",
            Permission::LoadBalancersRead => "compute:load-balancers:read",
            Permission::LoadBalancersManage => "compute:load-balancers:manage",
            Permission::BookingsRead => "compute:bookings:read",
            Permission::BookingsManage => "compute:bookings:manage",
            Permission::BillingRead => "compute:billing:read",
            Permission::EventsRead => "compute:events:read",
            Permission::QuotasManage => "compute:quotas:manage",
        }
    }
}

/// An authorization decision, with the grants that allowed it (for audit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed; the reasons name the deciding policies.
    Allow(Vec<String>),
    /// Denied.
    Deny,
}

impl Decision {
    /// Whether it allows.
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allow(_))
    }
}

/// Decides permissions (implemented with Cedar in bc-api).
pub trait Authorizer: Send + Sync {
    /// Whether the token `principal`, holding `grants`, may use `permission` on the
    /// resource whose scope chain is `chain` (the resource first, each element inside the
    /// next, ending with `compute-system`). The principal's id lets operator policies name
    /// a token; the grants are the token's own (SPEC §3).
    fn authorize(
        &self,
        principal: &TokenId,
        grants: &[Grant],
        permission: Permission,
        chain: &[Scope],
    ) -> Decision;

    /// Whether policies beyond the grants may decide on single objects (an operator's
    /// `forbid` on one load balancer), so that a permission held on a tenant does not
    /// make each object in it readable: lists then ask about each object (SPEC §3).
    /// Assumed so unless the engine knows better.
    fn has_object_policies(&self) -> bool {
        true
    }
}
