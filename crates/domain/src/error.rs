//! The application layer's error: the API error codes of SPEC §2 (transport-agnostic: the
//! one mapping to HTTP statuses and responses lives in bc-api's `error` module),
//! field violations and [`Error`]. The ports' own errors live beside their ports
//! ([`crate::ports::ProviderError`], [`crate::ports::StoreError`]) and are re-exported
//! at the crate root.
//!
//! Invariants: this module imports nothing of the crate (every layer may use it); no
//! message built here carries a secret — callers pass only names and ids.

use std::fmt;

use serde::{Deserialize, Serialize};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_have_their_wire_names() {
        assert_eq!(serde_json::to_string(&ErrorCode::NotFound).unwrap(), "\"NOT_FOUND\"");
        assert_eq!(ErrorCode::PayloadTooLarge.as_str(), "PAYLOAD_TOO_LARGE");
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
