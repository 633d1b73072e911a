//! `billing.usage` (SPEC §12): what a tenant is billed for, exact to the second.

use bc_domain::ports::{PAGE_SIZE_MAX, PageRequest, Permission};
use bc_domain::rules::billing::{UsageLine, usage as usage_lines};
use bc_domain::{FieldViolation, TenantId, Timestamp};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::examples as ex;
use crate::access::Target;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::registry::{Call, Kind, Method, MethodInput, Resource, ResourceType};

pub(crate) static BILLING: Resource = Resource {
    name: "billing",
    page: "billing",
    module: "billing",
    description: "Usage a tenant is billed for, computed from the intervals the reconcilers record as resources change state: a load balancer bills `vps.load-balancer.hours` from the first time it is `ready` until it is deleted. Quantities are hours as a decimal, exact to the second.",
};

/// Input of `billing.usage`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BillingUsageInput {
    /// The tenant.
    pub tenant_id: TenantId,
    /// Start of the window (inclusive).
    pub from: Timestamp,
    /// End of the window (exclusive).
    pub to: Timestamp,
    /// Only this meter, e.g. vps.load-balancer.hours.
    #[serde(default)]
    #[schemars(length(max = 128), regex(pattern = r"^[a-z0-9][a-z0-9.-]*$"))]
    pub meter: Option<String>,
}

impl MethodInput for BillingUsageInput {
    fn target(&self) -> Target {
        Target::Tenant(self.tenant_id.clone())
    }
    fn validate(&self) -> Vec<FieldViolation> {
        if self.from < self.to {
            Vec::new()
        } else {
            vec![FieldViolation::new("to", format!("must be after from ({})", self.from))]
        }
    }
    fn example() -> Value {
        json!({
            "tenantId": ex::TENANT,
            "from": "2026-12-01T00:00:00.000Z",
            "to": "2027-01-01T00:00:00.000Z",
            "meter": "vps.load-balancer.hours"
        })
    }
}

/// Output of `billing.usage`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BillingUsageOutput {
    /// One line per resource and meter in use within the window.
    pub lines: Vec<UsageLine>,
}

pub(crate) fn methods() -> Vec<Method> {
    vec![Method::declare::<BillingUsageInput, BillingUsageOutput>(
        BILLING.method("usage", Kind::Read, Permission::BillingRead, ResourceType::ComputeTenant, "Returns lines: [{ meter, resource, poolId, quantity, from, to }], one for each resource and meter in use within the window [from, to): quantity is the hours of use within the window, as a decimal with 6 digits, exact to the second, and from and to are that use clipped to the window. With meter, only that meter's, e.g. vps.load-balancer.hours. from must be before to. Decided as compute:billing:read on the tenant."),
        usage,
    )]
}

async fn usage(ctx: Ctx, call: Call<BillingUsageInput>) -> Result<BillingUsageOutput, ApiError> {
    let input = &call.input;
    let meter = input.meter.as_deref();
    // Every interval overlapping the window, read a page at a time (the store's query is
    // bounded by the window; the rule merges a resource's intervals into one line).
    let mut intervals = Vec::new();
    let mut next = Some(PageRequest::first(PAGE_SIZE_MAX));
    while let Some(page) = next {
        let got =
            ctx.store.billing_list(&input.tenant_id, input.from, input.to, meter, &page).await?;
        next = got.next_request(PAGE_SIZE_MAX);
        intervals.extend(got.items);
    }
    let lines = usage_lines(&intervals, input.from, input.to, meter, ctx.now());
    Ok(BillingUsageOutput { lines })
}
