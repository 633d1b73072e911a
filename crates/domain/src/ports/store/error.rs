//! The store port's error: what a read or a commit can fail with, and its one mapping to
//! the application's [`Error`] codes.
//!
//! Invariant: every message but [`StoreError::Internal`]'s detail names only ids, names
//! and rules, so it is safe to show; the detail reaches logs only. A success is never an
//! error here: a create's replayed `requestId` is [`super::Committed::replayed`].

use std::fmt;

use crate::error::Error;
use crate::rules::quota::QuotaError;

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
    use crate::error::ErrorCode;

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
}
