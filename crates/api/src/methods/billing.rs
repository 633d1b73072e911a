//! `billing.usage` (SPEC §12): what a tenant is billed for, exact to the second.

use bc_api_types::billing as api;
pub use bc_api_types::billing::*;

use bc_domain::FieldViolation;
use bc_domain::ports::{PAGE_SIZE_MAX, PageRequest};
use bc_domain::rules::billing::usage as usage_lines;
use serde_json::{Value, json};

use super::examples as ex;
use crate::access::Target;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::registry::{Call, Method, MethodInput};

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

pub(crate) fn methods() -> Vec<Method> {
    vec![Method::declare(api::Usage, usage)]
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
