//! Rules across the fields of an object, as JSON Schema says them (`oneOf`), for the
//! derived schemas of the types they bind (feature `schema`): the document then states
//! what the API accepts, so a tool generating inputs from it makes only accepted ones.
//!
//! Invariant: these only describe; the types' own validation enforces the rule (naming
//! the field in its words), and a test holds the two to the same verdict. This module
//! imports nothing of the crate, so the types below it may name it.

use schemars::Schema;

/// Says on an object schema that exactly one of `keys` is set (present and not `null`), as
/// JSON Schema's `oneOf` — a rule across fields that the document can state, so a tool
/// generating inputs from it makes only inputs the API accepts. The API's checks leave it
/// to the input's own cross-field validation, which names the field in its words.
pub fn exactly_one_of(schema: &mut Schema, keys: &[&str]) {
    let branches: Vec<serde_json::Value> = keys
        .iter()
        .map(|k| {
            serde_json::json!({
                "required": [k],
                "properties": { *k: { "not": { "type": "null" } } }
            })
        })
        .collect();
    schema.insert("oneOf".into(), branches.into());
}

/// A scale: exactly one of `count` or `autoScale` (SPEC §4, §8).
pub fn count_or_auto_scale(schema: &mut Schema) {
    exactly_one_of(schema, &["count", "autoScale"]);
}

/// Load balancer targets: exactly one kind (SPEC §11).
pub fn one_kind_of_targets(schema: &mut Schema) {
    exactly_one_of(schema, &["tag", "dropletIds", "loadBalancerIds"]);
}
