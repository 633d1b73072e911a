//! List queries: field selectors (the fields each resource supports, as the API server
//! does) and continue tokens.
//!
//! Invariant: a continue token from before the history's compaction is 410 Gone, like
//! the API server's.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::kube::error::KubeError;
use crate::kube::resource::Resource;

/// A field selector: `a=b`, `a==b`, `a!=b`, comma = AND.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses `s` for `resource`; a field the resource does not index is 400, with the
    /// apiserver's words.
    pub fn parse(s: &str, resource: Resource) -> Result<Self, KubeError> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, eq, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(KubeError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            if !Self::supported(resource).contains(&field) {
                return Err(KubeError::bad_request(format!("field label not supported: {field}")));
            }
            out.push((field.to_owned(), eq, value.trim().to_owned()));
        }
        Ok(Self(out))
    }

    pub(super) fn supported(resource: Resource) -> &'static [&'static str] {
        match resource {
            Resource::Pod => &[
                "metadata.name",
                "metadata.namespace",
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
            ],
            Resource::Event => &[
                "metadata.name",
                "metadata.namespace",
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type",
            ],
            Resource::Secret => &["metadata.name", "metadata.namespace", "type"],
            Resource::Node => &["metadata.name", "spec.unschedulable"],
            Resource::Namespace => &["metadata.name", "status.phase"],
            _ => &["metadata.name", "metadata.namespace"],
        }
    }

    /// Whether the rendered object `o` is selected.
    pub fn matches(&self, o: &Value) -> bool {
        self.0.iter().all(|(field, eq, want)| {
            let pointer = format!("/{}", field.replace('.', "/"));
            let have = match o.pointer(&pointer) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) => n.to_string(),
                // An absent field reads as its zero value (`spec.unschedulable=false`).
                _ if field == "spec.unschedulable" => "false".to_owned(),
                _ => String::new(),
            };
            (have == *want) == *eq
        })
    }
}

/// A `continue` token as the apiserver makes it: base64 of
/// `{"v":"meta.k8s.io/v1","rv":N,"start":"<ns>/<name>\u0000"}`.
pub(super) fn encode_continue(rv: u64, ns: &str, name: &str) -> String {
    let token = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{ns}/{name}\u{0}")});
    base64::engine::general_purpose::STANDARD.encode(token.to_string())
}

/// The (namespace, name) a page continues after; a token from before a compaction is
/// 410 Gone, an unreadable one 400.
pub(super) fn decode_continue(token: &str, compacted: u64) -> Result<(String, String), KubeError> {
    let bad = || {
        KubeError::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let bytes = base64::engine::general_purpose::STANDARD.decode(token).map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    if rv < compacted {
        return Err(KubeError::expired(
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
        ));
    }
    let start = v.get("start").and_then(Value::as_str).ok_or_else(bad)?;
    let start = start.trim_end_matches('\u{0}');
    let (ns, name) = start.split_once('/').ok_or_else(bad)?;
    Ok((ns.to_owned(), name.to_owned()))
}
