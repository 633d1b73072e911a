//! `billing.usage` (SPEC §12): what a tenant is billed for, exact to the second: the
//! resource, its methods' wire types and their endpoints. Invariant: optional input
//! fields are left out when unset and output fields are read back as the server writes
//! them, so a type here round-trips through the wire; what a method does is bc-api's.

use bc_domain::ports::Permission;
use bc_domain::rules::billing::UsageLine;
use bc_domain::{TenantId, Timestamp};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::endpoint::{Input, endpoint};
use crate::meta::{Kind, Resource, ResourceType};

/// The resource.
pub static BILLING: Resource = Resource {
    name: "billing",
    page: "billing",
    module: "billing",
    description: "Usage a tenant is billed for, computed from the intervals the reconcilers record as resources change state: a load balancer bills `vps.load-balancer.hours` from the first time it is `ready` until it is deleted. Quantities are hours as a decimal, exact to the second.",
};

/// Input of `billing.usage`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BillingUsageInput {
    /// The tenant.
    pub tenant_id: TenantId,
    /// Start of the window (inclusive).
    pub from: Timestamp,
    /// End of the window (exclusive).
    pub to: Timestamp,
    /// Only this meter, e.g. vps.load-balancer.hours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128), regex(pattern = r"^[a-z0-9][a-z0-9.-]*$"))]
    pub meter: Option<String>,
}

/// Output of `billing.usage`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BillingUsageOutput {
    /// One line per resource and meter in use within the window.
    pub lines: Vec<UsageLine>,
}

impl Input for BillingUsageInput {}

endpoint!(
    /// `billing.usage`.
    Usage = BILLING.method("usage", Kind::Read, Permission::BillingRead, ResourceType::ComputeTenant, "Returns lines: [{ meter, resource, poolId, quantity, from, to }], one for each resource and meter in use within the window [from, to): quantity is the hours of use within the window, as a decimal with 6 digits, exact to the second, and from and to are that use clipped to the window. With meter, only that meter's, e.g. vps.load-balancer.hours. from must be before to. Decided as compute:billing:read on the tenant.");
    BillingUsageInput => BillingUsageOutput
);
