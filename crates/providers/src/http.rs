//! The HTTP client of the providers' APIs, the one a registry shares among its accounts,
//! and how a request that got no status is described.
//!
//! Invariant: no redirect is followed (one could carry a bearer or an assertion
//! elsewhere), and every account of one registry is served by one client — one copy of
//! the platform's trust anchors and one connection pool — not one each: a client holds
//! its own copy of the roots (about 250 KiB), and `bc-api` at 400 accounts held a
//! hundred of them at once. An account's credentials go in its requests' headers, never
//! in the client.

use std::sync::Mutex;
use std::time::Duration;

use bc_domain::ProviderError;
use bc_domain::ports::ProviderResult;

#[cfg(test)]
thread_local! {
    /// Clients built on this thread (a test's own count: each test runs on a thread of
    /// its own).
    pub(crate) static BUILT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A client bounded by `connect` and `request`, never following a redirect.
pub(crate) fn client(connect: Duration, request: Duration) -> ProviderResult<reqwest::Client> {
    crate::install_crypto_provider();
    #[cfg(test)]
    BUILT.with(|b| b.set(b.get() + 1));
    reqwest::Client::builder()
        .connect_timeout(connect)
        .timeout(request)
        .user_agent(concat!("better-compute/", env!("CARGO_PKG_VERSION")))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| ProviderError::Transient {
            message: format!("could not build the HTTP client: {}", error_chain(&e)),
        })
}

/// What failed before a status arrived, without the URL (it may carry ids the caller did
/// not ask to print).
pub(crate) fn failure_kind(e: &reqwest::Error) -> &'static str {
    if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "request failed"
    }
}

/// The error and its sources (at most six), joined: a request's or a build's cause is in
/// its sources. Neither names a secret: credentials travel only in headers.
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = String::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut depth = 0;
    while let Some(err) = cur {
        if depth > 0 {
            out.push_str(": ");
        }
        out.push_str(&err.to_string());
        cur = err.source();
        depth += 1;
        if depth >= 6 {
            break;
        }
    }
    out
}

/// The client every account of one registry uses, built on first use with the
/// registry's timeouts.
#[derive(Debug)]
pub(crate) struct SharedClient {
    connect: Duration,
    request: Duration,
    built: Mutex<Option<reqwest::Client>>,
}

impl SharedClient {
    /// A client to be built with these timeouts.
    pub(crate) fn new(connect: Duration, request: Duration) -> Self {
        Self { connect, request, built: Mutex::new(None) }
    }

    /// The client (a handle: clones share it).
    pub(crate) fn get(&self) -> ProviderResult<reqwest::Client> {
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = built.as_ref() {
            return Ok(c.clone());
        }
        let c = client(self.connect, self.request)?;
        *built = Some(c.clone());
        Ok(c)
    }
}
