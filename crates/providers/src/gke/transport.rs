//! The HTTP transport of one GKE account: it takes a call from the account's budget,
//! sends the request with a fresh access token, re-mints once when the API answers 401,
//! and hands every failed answer to the one classification of GKE answers,
//! [`crate::classify::gke`].
//!
//! Invariant: the access token is only ever in the `Authorization` header (marked
//! sensitive) and is scrubbed from every message; every message names method, path,
//! status and Google's message.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bc_domain::ProviderError;
use bc_domain::ports::{Clock, ProviderResult};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::auth::{AccessToken, TokenSource};
use crate::classify::gke::{Failure, classify};
use crate::digitalocean::SharedBucket;
use crate::digitalocean::rate_limit::{Acquire, RateLimitConfig, TokenBucket};
use crate::http::failure_kind;

/// The transport of one account.
pub(crate) struct Transport {
    client: reqwest::Client,
    api_url: String,
    tokens: TokenSource,
    bucket: SharedBucket,
    clock: Arc<dyn Clock>,
    max_wait: Duration,
}

impl Transport {
    pub(crate) fn new(
        client: reqwest::Client,
        api_url: &str,
        tokens: TokenSource,
        rate_limit: &RateLimitConfig,
        bucket: Option<SharedBucket>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let bucket = bucket
            .unwrap_or_else(|| Arc::new(Mutex::new(TokenBucket::new(rate_limit, clock.now()))));
        Self {
            client,
            api_url: api_url.trim_end_matches('/').to_owned(),
            tokens,
            bucket,
            clock,
            max_wait: rate_limit.max_wait,
        }
    }

    pub(crate) fn bucket(&self) -> SharedBucket {
        self.bucket.clone()
    }

    /// Records that cluster `holder`'s credentials carry `token`.
    pub(crate) fn hand_token(&self, holder: &str, token: &AccessToken) {
        self.tokens.hand(holder, token, self.clock.now());
    }

    /// Cluster `holder` refused the token its credentials carry: forgets the account's
    /// token if it is still that one.
    pub(crate) fn invalidate_token_of(&self, holder: &str) {
        self.tokens.invalidate_for(holder);
    }

    /// Whether a token that expires at `expires_at` is due for replacement now.
    pub(crate) fn token_due(&self, expires_at: bc_domain::Timestamp) -> bool {
        !super::auth::fresh_until(expires_at, self.clock.now())
    }

    /// A token for the account (for the clusters' Kubernetes APIs too).
    pub(crate) async fn token(&self) -> ProviderResult<AccessToken> {
        self.tokens.token(self.clock.now()).await
    }

    async fn acquire(&self) -> ProviderResult<()> {
        let decision =
            self.bucket.lock().unwrap_or_else(|e| e.into_inner()).try_acquire(self.clock.now());
        match decision {
            Acquire::Granted(wait) => {
                if !wait.is_zero() {
                    tokio::time::sleep(wait.min(self.max_wait)).await;
                }
                Ok(())
            }
            Acquire::Denied(wait) => Err(ProviderError::RateLimited {
                retry_after_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }

    /// Sends one request; a 401 re-mints the token and sends once more.
    pub(crate) async fn send<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> ProviderResult<T> {
        let mut reminted = false;
        loop {
            // Every request spends from the caller's budget (GKE counts requests per
            // minute per project), the re-sent one after a re-mint too.
            bc_domain::ports::admit_request().await?;
            self.acquire().await?;
            let token = self.token().await?;
            let mut auth = HeaderValue::from_str(&format!("Bearer {}", token.token.expose()))
                .map_err(|_| ProviderError::Transient {
                    message: "the token endpoint answered a token that is no header value".into(),
                })?;
            auth.set_sensitive(true);
            let url = format!("{}{}", self.api_url, path);
            let mut req = self.client.request(method.clone(), &url).header(AUTHORIZATION, auth);
            if let Some(body) = body {
                req = req.header(CONTENT_TYPE, "application/json").body(body.to_string());
            }
            let resp = req.send().await.map_err(|e| ProviderError::Transient {
                message: format!("{method} {path}: {}", failure_kind(&e)),
            })?;
            let status = resp.status();
            let retry_after_secs = resp
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|s| s.trim().parse().ok());
            let text = resp.text().await.map_err(|e| ProviderError::Transient {
                message: format!("{method} {path}: {}", failure_kind(&e)),
            })?;
            if status.is_success() {
                return serde_json::from_str(&text).map_err(|e| ProviderError::Transient {
                    message: format!(
                        "{method} {path}: {}: response body did not parse: {e}",
                        status.as_u16()
                    ),
                });
            }
            if status == StatusCode::UNAUTHORIZED && !reminted {
                // An expired or revoked token: one fresh mint, then the answer stands.
                self.tokens.invalidate(&token.token);
                reminted = true;
                continue;
            }
            if status == StatusCode::TOO_MANY_REQUESTS {
                let wait = time::Duration::seconds(
                    i64::try_from(retry_after_secs.unwrap_or(10)).unwrap_or(10),
                );
                let now = self.clock.now();
                self.bucket.lock().unwrap_or_else(|e| e.into_inner()).pause_until(now + wait);
            }
            let failure = Failure {
                method: method.as_str(),
                path,
                status: status.as_u16(),
                body: &text,
                retry_after_secs,
            };
            let error = classify(&failure, &[token.token.expose()]);
            tracing::debug!(%method, path, status = status.as_u16(), error = %error, "GKE request failed");
            return Err(error);
        }
    }
}
