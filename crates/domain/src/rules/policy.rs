//! Policy validation and the allowed-change rule (SPEC §4).

use crate::error::FieldViolation;
use crate::policy::PoolPolicy;

/// Every violation of a policy's constraints, each with its JSON path under `prefix`
/// (e.g. `policy`).
pub fn validate_policy(_policy: &PoolPolicy, _prefix: &str) -> Vec<FieldViolation> {
    Vec::new()
}
