//! The HTTP transport of one DigitalOcean account: it takes a token from the account's
//! bucket, sends the request with the bearer token, feeds the `ratelimit-*` headers back
//! into the bucket, and classifies every failure once, in [`classify`].
//!
//! Invariant: the token is only ever in the `Authorization` header (marked sensitive);
//! no message built here formats a request or a header, so no error or log line can carry
//! it. Every message names method, path, status, the provider's message and request id.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bc_domain::ports::Clock;
use bc_domain::{ProviderError, Timestamp};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::rate_limit::{Acquire, RateLimitConfig, TokenBucket};
use super::wire::ErrorBody;
use bc_domain::model::SecretString;
use bc_domain::ports::ProviderResult;

/// The message DigitalOcean sends on a 403 while a load balancer still applies an earlier
/// change (research §1): retrying later succeeds, so it is `Transient`, not `Refused`.
const BUSY_MARKER: &str = "can't be updated while it processes previous actions";

/// The bucket of one account, shared by every caller of that account.
pub type SharedBucket = Arc<Mutex<TokenBucket>>;

/// A response that passed classification (2xx). Not `Debug`: the body may be a
/// kubeconfig.
pub(crate) struct Reply {
    pub status: StatusCode,
    pub body: String,
}

impl Reply {
    /// Decodes the JSON body; a body that does not parse is the provider's fault or a
    /// proxy's, so it is `Transient` (a retry may get a good answer).
    pub(crate) fn json<T: DeserializeOwned>(
        &self,
        method: &Method,
        path: &str,
    ) -> ProviderResult<T> {
        serde_json::from_str(&self.body).map_err(|e| ProviderError::Transient {
            message: format!(
                "{method} {path}: {}: response body did not parse: {e}",
                self.status.as_u16()
            ),
        })
    }
}

/// The transport of one account.
pub(crate) struct Transport {
    client: reqwest::Client,
    base_url: String,
    auth: HeaderValue,
    /// Kept only to scrub it from error messages (see `send`).
    token: SecretString,
    bucket: SharedBucket,
    clock: Arc<dyn Clock>,
    max_wait: Duration,
}

impl Transport {
    pub(crate) fn new(
        base_url: &str,
        token: &SecretString,
        connect_timeout: Duration,
        request_timeout: Duration,
        rate_limit: &RateLimitConfig,
        bucket: Option<SharedBucket>,
        clock: Arc<dyn Clock>,
    ) -> ProviderResult<Self> {
        crate::install_crypto_provider();
        let mut auth =
            HeaderValue::from_str(&format!("Bearer {}", token.expose())).map_err(|_| {
                // The value is not echoed: it is the token.
                ProviderError::Refused {
                    message: "the DigitalOcean token has invalid characters".into(),
                }
            })?;
        auth.set_sensitive(true);
        let client = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .timeout(request_timeout)
            .user_agent(concat!("better-compute/", env!("CARGO_PKG_VERSION")))
            // The API never redirects; following one could carry the token elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ProviderError::Transient {
                message: format!("could not build the HTTP client: {}", error_chain(&e)),
            })?;
        let bucket = bucket
            .unwrap_or_else(|| Arc::new(Mutex::new(TokenBucket::new(rate_limit, clock.now()))));
        Ok(Self {
            client,
            base_url: base_url.trim_end_matches('/').to_owned(),
            auth,
            token: token.clone(),
            bucket,
            clock,
            max_wait: rate_limit.max_wait,
        })
    }

    pub(crate) fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    pub(crate) fn bucket(&self) -> SharedBucket {
        self.bucket.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TokenBucket> {
        self.bucket.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a token from the account's bucket, waiting at most `max_wait` for it.
    async fn acquire(&self) -> ProviderResult<()> {
        // The guard is dropped at the end of this statement, before any await.
        let decision = self.lock().try_acquire(self.clock.now());
        match decision {
            Acquire::Granted(wait) => {
                if !wait.is_zero() {
                    // The token is reserved for us; wait its turn (≤ max_wait), then send.
                    tokio::time::sleep(wait.min(self.max_wait)).await;
                }
                Ok(())
            }
            Acquire::Denied(wait) => {
                Err(ProviderError::RateLimited { retry_after_ms: millis(wait) })
            }
        }
    }

    /// Sends one request and returns the 2xx reply, or the classified error.
    pub(crate) async fn send(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> ProviderResult<Reply> {
        self.acquire().await?;
        let url = format!("{}{}", self.base_url, path);
        let mut req =
            self.client.request(method.clone(), &url).header(AUTHORIZATION, self.auth.clone());
        if !query.is_empty() {
            req = req.query(query);
        }
        if let Some(body) = body {
            req = req.header(CONTENT_TYPE, "application/json").body(body.to_string());
        }
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => return Err(transport_error(&method, path, &e)),
        };
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = match resp.text().await {
            Ok(t) => t,
            Err(e) => return Err(transport_error(&method, path, &e)),
        };
        let now = self.clock.now();
        let limits = RateHeaders::from_headers(&headers);
        {
            let mut bucket = self.lock();
            bucket.observe(limits.remaining, limits.reset, now);
            if status == StatusCode::TOO_MANY_REQUESTS {
                // Every caller of this account waits, not only this one.
                let wait = limits.retry_after(now);
                bucket.pause_until(now + time::Duration::milliseconds(millis(wait) as i64));
            }
        }
        if status.is_success() {
            return Ok(Reply { status, body: text });
        }
        let error = scrub(
            classify(&method, path, status.as_u16(), &headers, &text, now),
            self.token.expose(),
        );
        tracing::debug!(%method, path, status = status.as_u16(), error = %error, "DigitalOcean request failed");
        Err(error)
    }

    /// GET and decode.
    pub(crate) async fn get_json<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> ProviderResult<T> {
        self.send(Method::GET, path, query, None).await?.json(&Method::GET, path)
    }

    /// A request with a JSON body whose reply is decoded.
    pub(crate) async fn send_json<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: &Value,
    ) -> ProviderResult<T> {
        let reply = self.send(method.clone(), path, &[], Some(body)).await?;
        reply.json(&method, path)
    }
}

/// The rate-limit headers of one response (names are case-insensitive in `HeaderMap`).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct RateHeaders {
    pub remaining: Option<u64>,
    pub reset: Option<Timestamp>,
    pub retry_after_secs: Option<u64>,
}

impl RateHeaders {
    pub(crate) fn from_headers(h: &HeaderMap) -> Self {
        let num = |name: &str| -> Option<u64> {
            h.get(name).and_then(|v| v.to_str().ok()).and_then(|s| s.trim().parse().ok())
        };
        Self {
            remaining: num("ratelimit-remaining"),
            reset: num("ratelimit-reset")
                .and_then(|s| i64::try_from(s).ok())
                .map(|s| Timestamp::from_unix_ms(s.saturating_mul(1000))),
            retry_after_secs: num("retry-after"),
        }
    }

    /// How long a 429 asks us to wait: `retry-after` seconds, else until
    /// `ratelimit-reset`, and never less than a second (a reset already past still means
    /// "not now").
    pub(crate) fn retry_after(&self, now: Timestamp) -> Duration {
        let wait = match (self.retry_after_secs, self.reset) {
            (Some(secs), _) => Duration::from_secs(secs),
            (None, Some(reset)) => {
                Duration::from_millis((reset - now).whole_milliseconds().max(0) as u64)
            }
            (None, None) => Duration::ZERO,
        };
        wait.max(Duration::from_secs(1))
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The one classification of DigitalOcean failures (DESIGN.md "Ports").
pub(crate) fn classify(
    method: &Method,
    path: &str,
    status: u16,
    headers: &HeaderMap,
    body: &str,
    now: Timestamp,
) -> ProviderError {
    let parsed: ErrorBody = serde_json::from_str(body).unwrap_or_default();
    let provider_message = parsed
        .message
        .filter(|m| !m.is_empty())
        // godo keeps a non-JSON body as the message; cap it so an HTML error page does
        // not flood logs.
        .unwrap_or_else(|| body.chars().take(200).collect::<String>().trim().to_owned());
    let request_id = parsed
        .request_id
        .filter(|r| !r.is_empty())
        .or_else(|| headers.get("x-request-id").and_then(|v| v.to_str().ok()).map(str::to_owned));
    let message = match &request_id {
        Some(id) => format!("{method} {path}: {status} (request \"{id}\") {provider_message}"),
        None => format!("{method} {path}: {status} {provider_message}"),
    };
    match status {
        401 => ProviderError::Unauthorized,
        404 => ProviderError::NotFound,
        429 => {
            let wait = RateHeaders::from_headers(headers).retry_after(now);
            ProviderError::RateLimited { retry_after_ms: millis(wait) }
        }
        403 if provider_message.contains(BUSY_MARKER) => ProviderError::Transient { message },
        400..=499 => ProviderError::Refused { message },
        _ => ProviderError::Transient { message },
    }
}

/// Removes the token from a message, in case a proxy or debugging server echoed the
/// request headers into its error body (the message quotes the body).
fn scrub(e: ProviderError, token: &str) -> ProviderError {
    if token.is_empty() {
        return e;
    }
    let clean = |m: String| m.replace(token, "[redacted]");
    match e {
        ProviderError::Refused { message } => ProviderError::Refused { message: clean(message) },
        ProviderError::Transient { message } => {
            ProviderError::Transient { message: clean(message) }
        }
        other => other,
    }
}

/// A failure before a status arrived: timeouts and connection errors are `Transient`.
fn transport_error(method: &Method, path: &str, e: &reqwest::Error) -> ProviderError {
    let what = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    ProviderError::Transient { message: format!("{method} {path}: {what}: {}", error_chain(e)) }
}

/// The error and its sources, without the URL (the URL holds no secret, but the path is
/// already in the message).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        Timestamp::from_unix_ms(1_800_000_000_000)
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn c(status: u16, h: &HeaderMap, body: &str) -> ProviderError {
        classify(&Method::PUT, "/v2/load_balancers/x", status, h, body, now())
    }

    #[test]
    fn statuses_map_to_classes() {
        let none = HeaderMap::new();
        assert_eq!(
            c(401, &none, r#"{"id":"unauthorized","message":"Unable to authenticate you"}"#),
            ProviderError::Unauthorized
        );
        assert_eq!(c(404, &none, r#"{"id":"not_found"}"#), ProviderError::NotFound);
        let ProviderError::Refused { message } = c(
            422,
            &headers(&[("x-request-id", "rid-1")]),
            r#"{"id":"unprocessable_entity","message":"name is not unique"}"#,
        ) else {
            panic!()
        };
        assert_eq!(message, "PUT /v2/load_balancers/x: 422 (request \"rid-1\") name is not unique");
        assert!(matches!(
            c(400, &none, "error parsing request body"),
            ProviderError::Refused { .. }
        ));
        assert!(matches!(
            c(403, &none, r#"{"id":"forbidden","message":"You do not have access"}"#),
            ProviderError::Refused { .. }
        ));
        let busy = r#"{"id":"forbidden","message":"Load Balancer can't be updated while it processes previous actions","request_id":"r9"}"#;
        let ProviderError::Transient { message } = c(403, &none, busy) else { panic!() };
        assert!(message.contains("(request \"r9\")"));
        assert!(matches!(c(500, &none, ""), ProviderError::Transient { .. }));
        assert!(matches!(c(503, &none, "<html>"), ProviderError::Transient { .. }));
    }

    #[test]
    fn rate_limited_wait_comes_from_retry_after_then_reset() {
        let h = headers(&[("retry-after", "29"), ("ratelimit-reset", "1800000600")]);
        assert_eq!(c(429, &h, ""), ProviderError::RateLimited { retry_after_ms: 29_000 });
        let h = headers(&[("RateLimit-Reset", "1800000042")]);
        assert_eq!(c(429, &h, ""), ProviderError::RateLimited { retry_after_ms: 42_000 });
        let h = headers(&[("ratelimit-reset", "1700000000")]);
        assert_eq!(c(429, &h, ""), ProviderError::RateLimited { retry_after_ms: 1_000 });
        assert_eq!(
            c(429, &HeaderMap::new(), ""),
            ProviderError::RateLimited { retry_after_ms: 1_000 }
        );
    }
}
