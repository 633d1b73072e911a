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

/// The error and its sources (at most six), joined, each line once: a request's or a
/// build's cause is in its sources, and a transport error often repeats its source's text
/// (hyper's and tower's wrappers do), which would only lengthen the message. Neither names
/// a secret: credentials travel only in headers.
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(err) = cur {
        if parts.len() >= 6 {
            break;
        }
        let text = err.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cur = err.source();
    }
    parts.join(": ")
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

#[cfg(test)]
mod tests {
    use super::error_chain;

    /// An error whose text and source are given.
    #[derive(Debug)]
    struct Chained(String, Option<Box<Chained>>);

    impl std::fmt::Display for Chained {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }

    impl std::error::Error for Chained {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
        }
    }

    /// A chain of `texts`, the first outermost.
    fn chain(texts: &[&str]) -> Chained {
        texts
            .iter()
            .rev()
            .fold(None, |inner, t| Some(Chained((*t).to_owned(), inner.map(Box::new))))
            .expect("at least one text")
    }

    #[test]
    fn a_cause_whose_text_is_already_said_is_left_out() {
        let e = chain(&[
            "client error (Connect)",
            "tcp connect error",
            "Connection refused",
            "Connection refused",
        ]);
        assert_eq!(
            error_chain(&e),
            "client error (Connect): tcp connect error: Connection refused"
        );
        let wrapped = chain(&["service error: connection closed", "connection closed"]);
        assert_eq!(error_chain(&wrapped), "service error: connection closed");
    }

    #[test]
    fn at_most_six_causes_are_joined() {
        let e = chain(&["a0", "b1", "c2", "d3", "e4", "f5", "g6", "h7"]);
        assert_eq!(error_chain(&e), "a0: b1: c2: d3: e4: f5");
    }
}
