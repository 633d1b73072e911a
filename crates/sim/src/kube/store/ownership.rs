//! Field ownership (`managedFields`): which manager owns which field after an update
//! or an apply, what an apply conflicts with, and the entries as clients send them.
//!
//! Invariant: an apply never takes a changed field from another manager without
//! `force`; the conflict names each field.

use std::collections::{BTreeMap, BTreeSet};

use bc_domain::time::Timestamp;
use serde_json::Value;

use super::types::{Managed, Operation, SERVER_METADATA};
use crate::kube::error::{Cause, KubeError};
use crate::kube::fields::{self, FieldPath, Seg};
use crate::kube::resource::Resource;
use crate::kube::schema::Ty;

/// Whether `p` names an associative list item.
pub(super) fn is_item(p: &[Seg]) -> bool {
    matches!(p.last(), Some(Seg::Key(_)))
}

/// Whether `p` names a key field of an associative list item (`containers[name="c"].name`).
pub(super) fn is_key_field(p: &[Seg]) -> bool {
    match p {
        [.., Seg::Key(kvs), Seg::Field(f)] => kvs.iter().any(|(k, _)| k == f),
        _ => false,
    }
}

pub(super) fn set_manager(
    managed: &mut Vec<Managed>,
    manager: &str,
    operation: Operation,
    fields: BTreeSet<FieldPath>,
    now: Timestamp,
) {
    match managed.iter_mut().find(|m| m.manager == manager && m.operation == operation) {
        Some(m) => {
            if m.fields != fields {
                m.time = now;
            }
            m.fields = fields;
        }
        None => managed.push(Managed { manager: manager.to_owned(), operation, time: now, fields }),
    }
}

/// The ownership after an `Update` by `manager` from `old` to `new` (both contents):
/// what it changed or added becomes its alone; what it removed, nobody's.
pub(super) fn update_ownership(
    resource: Resource,
    old: &Value,
    new: &Value,
    mut managed: Vec<Managed>,
    manager: &str,
    now: Timestamp,
) -> Vec<Managed> {
    let ty = Ty::Root(resource);
    let before = fields::leaves(&without_ownerless(old), ty);
    let after = fields::leaves(&without_ownerless(new), ty);
    let changed: BTreeSet<FieldPath> =
        after.iter().filter(|(p, l)| before.get(*p) != Some(*l)).map(|(p, _)| p.clone()).collect();
    if changed.is_empty() && before.len() == after.len() {
        return managed;
    }
    for m in &mut managed {
        if !(m.manager == manager && m.operation == Operation::Update) {
            m.fields.retain(|f| !changed.contains(f));
        }
    }
    let mut mine = managed
        .iter()
        .find(|m| m.manager == manager && m.operation == Operation::Update)
        .map(|m| m.fields.clone())
        .unwrap_or_default();
    mine.extend(changed);
    set_manager(&mut managed, manager, Operation::Update, mine, now);
    managed
}

/// The content as ownership sees it: without name and namespace (nobody owns those).
pub(super) fn without_ownerless(content: &Value) -> Value {
    let mut c = content.clone();
    strip_for_ownership(&mut c);
    c
}

pub(super) fn strip_for_ownership(content: &mut Value) {
    if let Some(m) = content.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("name");
        m.remove("namespace");
        m.remove("generateName");
        for f in SERVER_METADATA {
            m.remove(*f);
        }
    }
}

pub(super) fn same_ownership(a: &[Managed], b: &[Managed]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.manager == y.manager && x.operation == y.operation && x.fields == y.fields
        })
}

/// `managedFields` as a client handed them over.
pub(super) fn parse_managed(given: &Value, now: Timestamp) -> Vec<Managed> {
    given
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let manager = e.get("manager").and_then(Value::as_str)?.to_owned();
            let operation = match e.get("operation").and_then(Value::as_str) {
                Some("Apply") => Operation::Apply,
                _ => Operation::Update,
            };
            let fields = fields::parse_fields_v1(e.get("fieldsV1")?)?;
            let time = e
                .get("time")
                .and_then(Value::as_str)
                .and_then(|t| Timestamp::parse_rfc3339(t).ok())
                .unwrap_or(now);
            Some(Managed { manager, operation, time, fields })
        })
        .collect()
}

pub(super) fn conflict_error(
    resource: Resource,
    name: &str,
    conflicts: &[(Managed, FieldPath)],
) -> KubeError {
    // How the apiserver prints a manager: an Update manager with its API version.
    let who = |m: &Managed| match m.operation {
        Operation::Apply => format!("\"{}\"", m.manager),
        Operation::Update => format!("\"{}\" using {}", m.manager, resource.api_version()),
    };
    let causes: Vec<Cause> = conflicts
        .iter()
        .map(|(m, p)| Cause {
            reason: "FieldManagerConflict".into(),
            message: format!("conflict with {}", who(m)),
            field: fields::display(p),
        })
        .collect();
    let message = match conflicts {
        [(m, p)] => format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            who(m),
            fields::display(p)
        ),
        many => {
            let mut by: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (m, p) in many {
                by.entry(who(m)).or_default().push(fields::display(p));
            }
            let mut lines = Vec::new();
            for (m, paths) in by {
                lines.push(format!("conflicts with {m}:"));
                lines.extend(paths.into_iter().map(|p| format!("- {p}")));
            }
            format!("Apply failed with {} conflicts: {}", many.len(), lines.join("\n"))
        }
    };
    let mut e = KubeError::new(409, "Conflict", message).about(resource, name);
    e.details.causes = causes;
    e
}
