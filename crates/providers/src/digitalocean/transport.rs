//! The HTTP transport of one DigitalOcean account: it takes a token from the account's
//! bucket, sends the request with the bearer token, feeds the `ratelimit-*` headers back
//! into the bucket, and hands every failed answer to the one classification of
//! DigitalOcean answers, [`crate::classify::digitalocean`].
//!
//! Invariant: the token is only ever in the `Authorization` header (marked sensitive);
//! no message built here formats a request or a header, and the classification scrubs
//! the token from what the provider sent before cutting it, so no error or log line can
//! carry it. Every message names method, path, status, the provider's message and
//! request id.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bc_domain::ports::Clock;
use bc_domain::{ProviderError, Timestamp};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::rate_limit::{Acquire, RateLimitConfig, TokenBucket};
use crate::classify::digitalocean::{self, Failure};
use crate::http::{error_chain, failure_kind};
use bc_domain::model::SecretString;
use bc_domain::ports::ProviderResult;

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
        client: reqwest::Client,
        base_url: &str,
        token: &SecretString,
        rate_limit: &RateLimitConfig,
        bucket: Option<SharedBucket>,
        clock: Arc<dyn Clock>,
    ) -> ProviderResult<Self> {
        let mut auth =
            HeaderValue::from_str(&format!("Bearer {}", token.expose())).map_err(|_| {
                // The value is not echoed: it is the token.
                ProviderError::Refused {
                    message: "the DigitalOcean token has invalid characters".into(),
                }
            })?;
        auth.set_sensitive(true);
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
        // Every request spends from the caller's budget (each page of a list too: the
        // per-token limit counts requests), then from this account's local bucket.
        bc_domain::ports::admit_request().await?;
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
            bucket.observe(limits.remaining, limits.reset(), now);
            if status == StatusCode::TOO_MANY_REQUESTS {
                // Every caller of this account waits, not only this one.
                let wait_ms = digitalocean::rate_limit_wait_ms(
                    limits.retry_after_secs,
                    limits.reset_secs,
                    now,
                );
                let wait_ms = i64::try_from(wait_ms).unwrap_or(i64::MAX);
                bucket.pause_until(now + time::Duration::milliseconds(wait_ms));
            }
        }
        if status.is_success() {
            return Ok(Reply { status, body: text });
        }
        let failure = Failure {
            method: method.as_str(),
            path,
            status: status.as_u16(),
            body: &text,
            request_id: headers.get("x-request-id").and_then(|v| v.to_str().ok()),
            retry_after_secs: limits.retry_after_secs,
            ratelimit_reset: limits.reset_secs,
        };
        let error = digitalocean::classify(&failure, self.token.expose(), now);
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
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RateHeaders {
    pub remaining: Option<u64>,
    /// `ratelimit-reset`, Unix seconds.
    pub reset_secs: Option<i64>,
    pub retry_after_secs: Option<u64>,
}

impl RateHeaders {
    pub(crate) fn from_headers(h: &HeaderMap) -> Self {
        let num = |name: &str| -> Option<u64> {
            h.get(name).and_then(|v| v.to_str().ok()).and_then(|s| s.trim().parse().ok())
        };
        Self {
            remaining: num("ratelimit-remaining"),
            reset_secs: num("ratelimit-reset").and_then(|s| i64::try_from(s).ok()),
            retry_after_secs: num("retry-after"),
        }
    }

    /// `ratelimit-reset` as a time.
    pub(crate) fn reset(&self) -> Option<Timestamp> {
        self.reset_secs.map(|s| Timestamp::from_unix_ms(s.saturating_mul(1000)))
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A failure before a status arrived: timeouts and connection errors are `Transient`.
fn transport_error(method: &Method, path: &str, e: &reqwest::Error) -> ProviderError {
    let what = failure_kind(e);
    ProviderError::Transient { message: format!("{method} {path}: {what}: {}", error_chain(e)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_headers_are_read_whatever_their_case() {
        let mut h = HeaderMap::new();
        h.insert("RateLimit-Remaining", HeaderValue::from_static("12"));
        h.insert("ratelimit-reset", HeaderValue::from_static("1800000042"));
        h.insert("Retry-After", HeaderValue::from_static(" 29 "));
        let r = RateHeaders::from_headers(&h);
        assert_eq!(
            r,
            RateHeaders {
                remaining: Some(12),
                reset_secs: Some(1_800_000_042),
                retry_after_secs: Some(29)
            }
        );
        assert_eq!(r.reset(), Some(Timestamp::from_unix_ms(1_800_000_042_000)));
        assert_eq!(RateHeaders::from_headers(&HeaderMap::new()), RateHeaders::default());
    }
}
