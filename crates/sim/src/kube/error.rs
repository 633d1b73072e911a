//! metav1 `Status` errors of the simulated Kubernetes API.
//!
//! Invariant: every error carries `reason` (kube 5 decides not-found and conflict on
//! `reason` alone, research/kube-wire.md) and the HTTP status equals `code`.

use bc_domain::kube_wire;
use serde_json::{Value, json};

use super::Resource;

/// One `details.causes[]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// e.g. `FieldManagerConflict`.
    pub reason: String,
    /// Human-readable.
    pub message: String,
    /// e.g. `.data.k`.
    pub field: String,
}

/// A failed Kubernetes API call, rendered as a metav1 Status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct KubeError {
    /// HTTP status and `code`.
    pub code: u16,
    /// `reason`, e.g. `NotFound`, `Conflict`, `Unauthorized`.
    pub reason: String,
    /// `message`.
    pub message: String,
    /// `details` (boxed: errors travel in `Result`s and should stay small).
    pub details: Box<Details>,
}

/// `details` of a Status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Details {
    /// `details.name`.
    pub name: Option<String>,
    /// `details.group` (absent for the core group).
    pub group: Option<String>,
    /// `details.kind`: the resource plural (NotFound, Conflict, AlreadyExists) or the
    /// kind (Invalid), as the apiserver writes it.
    pub kind: Option<String>,
    /// `details.causes`.
    pub causes: Vec<Cause>,
}

impl KubeError {
    /// A bare error.
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self { code, reason: reason.to_owned(), message: message.into(), details: Box::default() }
    }

    /// Adds `details.name`/`details.kind`.
    pub fn on(mut self, plural: &str, name: &str) -> Self {
        self.details.kind = Some(plural.to_owned());
        self.details.name = Some(name.to_owned());
        self
    }

    /// 404 `<plural> "<name>" not found`.
    pub fn not_found(plural: &str, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{plural} \"{name}\" not found")).on(plural, name)
    }

    /// Adds `details` naming an object of `resource`: its name, group and plural.
    pub fn about(mut self, resource: Resource, name: &str) -> Self {
        self.details.kind = Some(resource.plural().to_owned());
        self.details.name = Some(name.to_owned());
        self.details.group = (!resource.group().is_empty()).then(|| resource.group().to_owned());
        self
    }

    /// 404 `daemonsets.apps "x" not found` (the group-qualified resource, as the
    /// apiserver names it).
    pub fn missing(resource: Resource, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{} \"{name}\" not found", resource.qualified()))
            .about(resource, name)
    }

    /// 409 `AlreadyExists`: `daemonsets.apps "x" already exists`.
    pub fn already_exists(resource: Resource, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", resource.qualified()),
        )
        .about(resource, name)
    }

    /// 409 `Conflict` on a write from a stale resourceVersion (an optimistic-concurrency
    /// failure), in the apiserver's words.
    pub fn modified(resource: Resource, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again",
                resource.qualified()
            ),
        )
        .about(resource, name)
    }

    /// 410 `Expired` (`Gone`): a resourceVersion or continue token too old to serve.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 405 `MethodNotAllowed`.
    pub fn method_not_allowed(method: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method})"),
        )
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// Whether this is a 404 NotFound.
    pub fn is_not_found(&self) -> bool {
        self.reason == "NotFound"
    }

    /// The Status JSON body.
    pub fn to_status(&self) -> Value {
        let mut details = serde_json::Map::new();
        if let Some(n) = &self.details.name {
            details.insert("name".into(), json!(n));
        }
        if let Some(g) = &self.details.group {
            details.insert("group".into(), json!(g));
        }
        if let Some(k) = &self.details.kind {
            details.insert("kind".into(), json!(k));
        }
        if !self.details.causes.is_empty() {
            let causes: Vec<Value> = self
                .details
                .causes
                .iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect();
            details.insert("causes".into(), Value::Array(causes));
        }
        let mut v = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if !details.is_empty() {
            v["details"] = Value::Object(details);
        }
        status_body(v)
    }
}

/// A metav1 Status body as the Go type writes it (`omitempty` fields empty left out, such
/// as a core resource's `details.group`).
pub fn status_body(mut v: Value) -> Value {
    static STATUS: std::sync::OnceLock<kube_wire::Ty> = std::sync::OnceLock::new();
    let t = *STATUS.get_or_init(|| kube_wire::ty("meta/v1.Status").expect("in the table"));
    kube_wire::encode(t, &mut v);
    v
}
