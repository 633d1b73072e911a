//! The HTTP client of the agent methods (SPEC §9): `POST {server}/api/compute/agents/join`
//! and `POST {server}/api/compute/agents/heartbeat`, with the bodies of
//! `bc_domain::agent`.
//!
//! Invariant: an error says what went wrong with the call (unreachable, the server's
//! error code and message, an unreadable answer) and never quotes what was sent — the
//! join token travels in the body and the node credential in a header, and neither is
//! ever part of a message.

use std::time::Duration;

use bc_domain::agent::{
    HEARTBEAT_PATH, HeartbeatRequest, HeartbeatResponse, JOIN_PATH, JoinRequest, JoinResponse,
};
use bc_domain::model::SecretString;
use serde::de::DeserializeOwned;

/// Why an agent call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The server could not be reached (connect, TLS or timeout).
    #[error("server unreachable: {0}")]
    Unreachable(String),
    /// The server answered with an error (SPEC §2 body: code and message).
    #[error("server answered {status} {code}: {message}")]
    Answered {
        /// HTTP status.
        status: u16,
        /// The error code (`UNAUTHENTICATED`, `FAILED_PRECONDITION`, …), or `UNKNOWN`
        /// when the body was not the API's error body.
        code: String,
        /// The server's message.
        message: String,
    },
    /// A success status with a body that is not the expected answer.
    #[error("unreadable answer: {0}")]
    BadAnswer(String),
}

impl CallError {
    /// The credential was refused (401): a join token that is unknown or revoked, or a
    /// node credential replaced by a later join.
    pub fn is_unauthenticated(&self) -> bool {
        matches!(self, CallError::Answered { status: 401, .. })
    }

    /// Worth retrying unchanged: the server is unreachable, overloaded or failing (429,
    /// 5xx), or the node is not listed by its cluster yet (FAILED_PRECONDITION: a node
    /// that just booted may run bcd before the reconciler's listing shows it).
    pub fn is_retryable(&self) -> bool {
        match self {
            CallError::Unreachable(_) => true,
            CallError::Answered { status, code, .. } => {
                *status == 429 || *status >= 500 || code == "FAILED_PRECONDITION"
            }
            CallError::BadAnswer(_) => true,
        }
    }
}

/// A client of one server's agent methods.
#[derive(Debug, Clone)]
pub struct AgentClient {
    http: reqwest::Client,
    server_url: String,
}

impl AgentClient {
    /// A client of the server at `server_url` (the join Secret's `serverUrl`), with
    /// bounded connect and request times and no redirects (a credential stays with the
    /// server it was meant for).
    pub fn new(server_url: &str) -> Result<Self, CallError> {
        let http = Self::http_builder()
            .build()
            .map_err(|e| CallError::Unreachable(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self::with_http(http, server_url))
    }

    /// The HTTP settings of every agent client: bounded connect and request times, no
    /// redirects. For a caller that shares one built client among many agents (building
    /// one reads and parses the system's root certificates).
    pub fn http_builder() -> reqwest::ClientBuilder {
        crate::install_crypto();
        reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(15))
            .redirect(reqwest::redirect::Policy::none())
    }

    /// A client of the server at `server_url` over `http`, built from
    /// [`Self::http_builder`].
    pub fn with_http(http: reqwest::Client, server_url: &str) -> Self {
        Self { http, server_url: server_url.trim_end_matches('/').to_owned() }
    }

    /// The server URL calls go to.
    pub fn server_url(&self) -> &str {
        &self.server_url
    }

    /// `agents/join`.
    pub async fn join(&self, request: &JoinRequest) -> Result<JoinResponse, CallError> {
        self.join_with_status(request).await.map(|(_, answer)| answer)
    }

    /// `agents/join`, with the success status the server answered (the simulated bcd
    /// records it, as a kubelet's log would show it).
    pub async fn join_with_status(
        &self,
        request: &JoinRequest,
    ) -> Result<(u16, JoinResponse), CallError> {
        let req = self.http.post(format!("{}{JOIN_PATH}", self.server_url)).json(request);
        self.send_with_status(req).await
    }

    /// `agents/heartbeat` as the node holding `credential`.
    pub async fn heartbeat(
        &self,
        credential: &SecretString,
    ) -> Result<HeartbeatResponse, CallError> {
        let req = self
            .http
            .post(format!("{}{HEARTBEAT_PATH}", self.server_url))
            .bearer_auth(credential.expose())
            .json(&HeartbeatRequest {});
        self.send(req).await
    }

    async fn send<T: DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<T, CallError> {
        self.send_with_status(req).await.map(|(_, answer)| answer)
    }

    async fn send_with_status<T: DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<(u16, T), CallError> {
        let resp = req.send().await.map_err(unreachable)?;
        let status = resp.status().as_u16();
        let body = resp.bytes().await.map_err(unreachable)?;
        if (200..300).contains(&status) {
            return serde_json::from_slice(&body)
                .map(|answer| (status, answer))
                .map_err(|e| CallError::BadAnswer(e.to_string()));
        }
        let (code, message) = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| {
                let e = v.get("error")?;
                Some((e.get("code")?.as_str()?.to_owned(), e.get("message")?.as_str()?.to_owned()))
            })
            .unwrap_or_else(|| ("UNKNOWN".to_owned(), format!("HTTP {status}")));
        Err(CallError::Answered { status, code, message })
    }
}

/// A transport failure with its causes ("error sending request: … Connection refused"):
/// reqwest's own text stops at the outermost layer. The URL is left out (it is the
/// server's public URL, but an error never needs it), and no cause can carry a header or
/// body, so no credential.
fn unreachable(e: reqwest::Error) -> CallError {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    CallError::Unreachable(text)
}
