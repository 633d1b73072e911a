//! The HTTP client both halves of a GKE account use — the token source and the API
//! transport — and how a request that got no status is described.
//!
//! Invariant: no redirect is followed (one could carry a bearer or an assertion
//! elsewhere), and no message names the URL (it may carry ids the caller did not ask to
//! print).

use std::time::Duration;

use bc_domain::ProviderError;
use bc_domain::ports::ProviderResult;

/// An HTTP client as both halves use it: bounded, and never following a redirect (one
/// could carry the bearer elsewhere).
pub(crate) fn client(connect: Duration, request: Duration) -> ProviderResult<reqwest::Client> {
    crate::install_crypto_provider();
    reqwest::Client::builder()
        .connect_timeout(connect)
        .timeout(request)
        .user_agent(concat!("better-compute/", env!("CARGO_PKG_VERSION")))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| ProviderError::Transient {
            message: format!("could not build the HTTP client: {e}"),
        })
}

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
