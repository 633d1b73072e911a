//! The shared error types: the API error codes of SPEC §2 (transport-agnostic; the one
//! mapping to HTTP responses lives in bc-api and uses [`ErrorCode::http_status`]), the
//! provider error classes of DESIGN.md, and the store's errors.
//!
//! Invariant: no message built here carries a secret; callers pass only names and ids.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::IdempotencyRecord;
use crate::rules::quota::QuotaError;

/// The API error codes of SPEC §2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// Input fails its constraints; body not JSON; unknown field.
    InvalidArgument,
    /// Valid input, but the current state forbids it.
    FailedPrecondition,
    /// No valid credential.
    Unauthenticated,
    /// Credential valid, permission missing.
    PermissionDenied,
    /// Object absent or not owned by the tenant; unknown method.
    NotFound,
    /// Name taken; `requestId` reused with another body.
    AlreadyExists,
    /// `expectedGeneration` does not match.
    Aborted,
    /// Body over 1 MiB.
    PayloadTooLarge,
    /// Quota exhausted or absent; caller rate limit.
    ResourceExhausted,
    /// A bug.
    Internal,
    /// The store is unreachable.
    Unavailable,
}

impl ErrorCode {
    /// The HTTP status SPEC §2 assigns to this code.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::InvalidArgument | ErrorCode::FailedPrecondition => 400,
            ErrorCode::Unauthenticated => 401,
            ErrorCode::PermissionDenied => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::AlreadyExists | ErrorCode::Aborted => 409,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::ResourceExhausted => 429,
            ErrorCode::Internal => 500,
            ErrorCode::Unavailable => 503,
        }
    }

    /// The wire name, e.g. `NOT_FOUND`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgument => "INVALID_ARGUMENT",
            ErrorCode::FailedPrecondition => "FAILED_PRECONDITION",
            ErrorCode::Unauthenticated => "UNAUTHENTICATED",
            ErrorCode::PermissionDenied => "PERMISSION_DENIED",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::AlreadyExists => "ALREADY_EXISTS",
            ErrorCode::Aborted => "ABORTED",
            ErrorCode::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            ErrorCode::ResourceExhausted => "RESOURCE_EXHAUSTED",
            ErrorCode::Internal => "INTERNAL",
            ErrorCode::Unavailable => "UNAVAILABLE",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One violated input constraint, with the JSON path of the field
/// (`policy.flavors[1].name`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldViolation {
    /// JSON path of the field.
    pub field: String,
    /// What is wrong, in words a caller can act on.
    pub message: String,
}

impl FieldViolation {
    /// A violation at `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: field.into(), message: message.into() }
    }
}

/// An error of the application layer: a code, a caller-facing message, and the field
/// for input errors. `Display` prints only the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    /// The API error code.
    pub code: ErrorCode,
    /// The caller-facing message (never a secret, never SQL).
    pub message: String,
    /// The JSON path of the offending input field, for input errors.
    pub field: Option<String>,
}

impl Error {
    /// An error with a code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), field: None }
    }
    /// `INVALID_ARGUMENT` naming a field.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: ErrorCode::InvalidArgument,
            message: message.into(),
            field: Some(field.into()),
        }
    }
    /// `INVALID_ARGUMENT` from the first of several violations (all are listed in the message).
    pub fn from_violations(violations: &[FieldViolation]) -> Self {
        let first =
            violations.first().cloned().unwrap_or_else(|| FieldViolation::new("", "invalid input"));
        let message = violations
            .iter()
            .map(|v| format!("{}: {}", v.field, v.message))
            .collect::<Vec<_>>()
            .join("; ");
        Self { code: ErrorCode::InvalidArgument, message, field: Some(first.field) }
    }
    /// `FAILED_PRECONDITION`.
    pub fn failed_precondition(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::FailedPrecondition, message)
    }
    /// `NOT_FOUND`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }
    /// `ALREADY_EXISTS`.
    pub fn already_exists(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::AlreadyExists, message)
    }
    /// `ABORTED` for a generation mismatch.
    pub fn aborted(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Aborted, message)
    }
    /// `RESOURCE_EXHAUSTED`.
    pub fn exhausted(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::ResourceExhausted, message)
    }
    /// `INTERNAL`, with a message safe to show (the detail goes to logs, not here).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }
    /// `UNAVAILABLE`.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unavailable, message)
    }
}

/// The provider error classes of DESIGN.md, decided once, in the adapter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The object does not exist (or no longer does).
    #[error("not found at the provider")]
    NotFound,
    /// A 4xx that retrying cannot fix, with the provider's message.
    #[error("refused by the provider: {message}")]
    Refused {
        /// The provider's message.
        message: String,
    },
    /// Throttled: try again after this many milliseconds.
    #[error("rate limited by the provider; retry in {retry_after_ms} ms")]
    RateLimited {
        /// How long to wait, in milliseconds.
        retry_after_ms: u64,
    },
    /// Not sent: the account's provider-call budget (this control plane's own, shared
    /// by its replicas) has no call to spare for this many milliseconds. Unlike a
    /// failure, retrying after the wait is all there is to do.
    #[error("over the account's provider-call budget; retry in {retry_after_ms} ms")]
    OverBudget {
        /// How long until the budget frees a call, in milliseconds.
        retry_after_ms: u64,
    },
    /// The account's credentials were refused.
    #[error("the provider refused the account's credentials")]
    Unauthorized,
    /// Worth retrying: 5xx, timeouts, connection errors, "busy" answers.
    #[error("transient provider error: {message}")]
    Transient {
        /// What happened (no secrets).
        message: String,
    },
}

impl ProviderError {
    /// Whether a later retry of the same request may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ProviderError::RateLimited { .. }
                | ProviderError::OverBudget { .. }
                | ProviderError::Transient { .. }
        )
    }
}

/// The detail of an internal store error: for logs only. `Display` prints a fixed text,
/// so formatting the error for a caller can never show database text or SQL; `Debug` and
/// [`InternalDetail::for_logs`] give the detail to whoever writes the log line.
#[derive(Clone, PartialEq, Eq)]
pub struct InternalDetail(String);

impl InternalDetail {
    /// The detail (may name tables, columns or SQL): write it to logs, never to a caller.
    pub fn for_logs(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for InternalDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for InternalDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("internal store error")
    }
}

/// Errors of the store port. Every message but [`StoreError::Internal`]'s detail names
/// only ids, names and rules, so it is safe to show.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The row looked up does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// A unique constraint refused the write (a name or an id taken).
    #[error("{0} already exists")]
    AlreadyExists(String),
    /// A create's `requestId` was used within the idempotency window with another body
    /// (SPEC §2: `ALREADY_EXISTS`, distinct from a taken name).
    #[error("{0}")]
    RequestIdReused(String),
    /// A create's `requestId` was used within the idempotency window with the same body,
    /// by a request that committed first: answer with the stored response.
    #[error("request {} of {} was already made", .0.request_id, .0.method)]
    RequestReplayed(Box<IdempotencyRecord>),
    /// A compare-and-swap on a generation failed: someone else wrote first.
    #[error("{0} was changed concurrently")]
    Stale(String),
    /// A conditional write's condition on current state did not hold
    /// (`FAILED_PRECONDITION`); the message says what to do.
    #[error("{0}")]
    Conflict(String),
    /// No quota unit could be booked: the pool's row is exhausted or absent
    /// (`RESOURCE_EXHAUSTED`, through [`crate::rules::quota`]).
    #[error("{0}")]
    QuotaExhausted(QuotaError),
    /// A fenced unit of work was committed by a holder whose lease another replica took
    /// over (or that was released); nothing of it was applied.
    #[error("lease lost: {0}")]
    LeaseLost(String),
    /// The database is unreachable.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The database answers but refuses writes (disk full, read-only file or server):
    /// nothing of the write was applied, reads still work. The detail is for logs.
    #[error("store not writable: {0}")]
    NotWritable(String),
    /// Anything else: a bug or a corrupt row. `Display` is fixed; the detail is for logs.
    #[error("{0}")]
    Internal(InternalDetail),
}

impl StoreError {
    /// An internal error whose `detail` (database text, SQL) is kept for logs only.
    pub fn internal(detail: impl Into<String>) -> Self {
        StoreError::Internal(InternalDetail(detail.into()))
    }
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(what) => Error::not_found(format!("{what} not found")),
            StoreError::AlreadyExists(what) => {
                Error::already_exists(format!("{what} already exists"))
            }
            StoreError::RequestIdReused(msg) => Error::already_exists(msg),
            StoreError::RequestReplayed(r) => Error::already_exists(format!(
                "request {} of {} was already made",
                r.request_id, r.method
            )),
            StoreError::Stale(what) => Error::aborted(format!("{what} was changed concurrently")),
            StoreError::Conflict(msg) => Error::failed_precondition(msg),
            StoreError::QuotaExhausted(q) => q.into(),
            StoreError::LeaseLost(what) => Error::aborted(format!("lease lost: {what}")),
            StoreError::Unavailable(_) => Error::unavailable("the store is unavailable"),
            // The detail may name the file: the caller learns what and what still works.
            StoreError::NotWritable(_) => Error::unavailable(
                "the store cannot accept writes now (its storage is full or read-only); \
                 nothing was changed, reads still work; try again later",
            ),
            // The detail may name tables or SQL: keep it out of the caller's message.
            StoreError::Internal(_) => Error::internal("internal error"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_spec_statuses() {
        assert_eq!(ErrorCode::InvalidArgument.http_status(), 400);
        assert_eq!(ErrorCode::FailedPrecondition.http_status(), 400);
        assert_eq!(ErrorCode::Aborted.http_status(), 409);
        assert_eq!(ErrorCode::ResourceExhausted.http_status(), 429);
        assert_eq!(serde_json::to_string(&ErrorCode::NotFound).unwrap(), "\"NOT_FOUND\"");
        assert_eq!(ErrorCode::PayloadTooLarge.as_str(), "PAYLOAD_TOO_LARGE");
    }

    #[test]
    fn internal_store_detail_is_for_logs_only() {
        let s = StoreError::internal("SELECT * FROM secrets");
        // Formatting the store error itself (as a handler might) shows no SQL.
        assert_eq!(s.to_string(), "internal store error");
        let StoreError::Internal(d) = &s else { unreachable!() };
        assert_eq!(d.for_logs(), "SELECT * FROM secrets");
        assert!(format!("{s:?}").contains("SELECT"), "the detail reaches logs");
        let e: Error = s.into();
        assert_eq!(e.code, ErrorCode::Internal);
        assert!(!e.message.contains("SELECT"));
    }

    #[test]
    fn store_errors_map_to_their_spec_codes() {
        use crate::model::QuotaResource;
        let quota = StoreError::QuotaExhausted(QuotaError::Exhausted {
            resource: QuotaResource::LoadBalancers,
            limit: 2,
            used: 2,
        });
        assert_eq!(Error::from(quota).code, ErrorCode::ResourceExhausted);
        let absent = StoreError::QuotaExhausted(QuotaError::Absent);
        assert_eq!(Error::from(absent).code, ErrorCode::ResourceExhausted);
        let reused = StoreError::RequestIdReused("requestId r1 was used with another body".into());
        assert_eq!(Error::from(reused).code, ErrorCode::AlreadyExists);
        assert_eq!(
            Error::from(StoreError::Conflict("x".into())).code,
            ErrorCode::FailedPrecondition
        );
        assert_eq!(Error::from(StoreError::LeaseLost("x".into())).code, ErrorCode::Aborted);
    }

    #[test]
    fn violations_name_the_first_field() {
        let e = Error::from_violations(&[
            FieldViolation::new("policy.flavors[1].name", "duplicate"),
            FieldViolation::new("name", "bad"),
        ]);
        assert_eq!(e.field.as_deref(), Some("policy.flavors[1].name"));
        assert!(e.message.contains("name: bad"));
    }
}
