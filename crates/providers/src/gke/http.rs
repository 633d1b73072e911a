//! How a GKE request that got no status is described (both halves of an account — the
//! token source and the API transport — share one client, `crate::http`).
//!
//! Invariant: no message names the URL (it may carry ids the caller did not ask to
//! print).

/// What failed before a status arrived, without the URL.
pub(crate) fn failure_kind(e: &reqwest::Error) -> &'static str {
    if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "request failed"
    }
}
