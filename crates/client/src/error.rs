//! The client's one error: the API's own error answer (SPEC §2 `{code, message, field}`,
//! typed), or why no answer was had.
//!
//! Invariant: a message quotes what the server said and which method was called, never
//! the request's body or headers (a create's credentials, the bearer token).

use std::fmt;
use std::time::Duration;

use bc_domain::ErrorCode;
use reqwest::StatusCode;
use serde::Deserialize;

/// An error answer of the API (SPEC §2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The method called, e.g. `pools.get`.
    pub method: String,
    /// The HTTP status.
    pub status: u16,
    /// The code.
    pub code: ErrorCode,
    /// The server's message.
    pub message: String,
    /// The offending input field, as a JSON path (input errors only).
    pub field: Option<String>,
    /// How long the server asked to wait before trying again (`429`, `503`).
    pub retry_after: Option<Duration>,
}

impl fmt::Display for ApiError {
    /// `NOT_FOUND: pool pool_… has no substrate` (with `(field poolId)` for input errors).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)?;
        if let Some(field) = &self.field {
            write!(f, " (field {field})")?;
        }
        Ok(())
    }
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The server answered with an error.
    #[error("{0}")]
    Api(ApiError),
    /// The server could not be reached, or the connection failed mid-answer.
    #[error("{method}: the server could not be reached: {detail}")]
    Transport {
        /// The method called (or `events.stream`).
        method: String,
        /// What failed.
        detail: String,
    },
    /// An answer that is not what the method declares.
    #[error("{method}: unreadable answer: {detail}")]
    Decode {
        /// The method called.
        method: String,
        /// What did not parse.
        detail: String,
    },
    /// The client's own configuration (its URL).
    #[error("configuration: {0}")]
    Config(String),
}

impl Error {
    /// The API's code, for an error answer.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Api(e) => Some(e.code),
            _ => None,
        }
    }

    /// The offending input field, for an input error.
    pub fn field(&self) -> Option<&str> {
        match self {
            Error::Api(e) => e.field.as_deref(),
            _ => None,
        }
    }

    /// A failed request of `method` (the detail of reqwest's error, without the URL's
    /// query, which is harmless but noisy).
    pub(crate) fn transport(method: &str, e: &reqwest::Error) -> Self {
        let mut detail = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            detail = format!("{detail}: {s}");
            source = s.source();
        }
        Error::Transport { method: method.to_owned(), detail }
    }

    /// The error answer of `method`: the API's body when it is one, else the status and
    /// the start of whatever came back (a proxy's page, say).
    pub(crate) fn answered(
        method: &str,
        status: StatusCode,
        body: &[u8],
        retry_after: Option<Duration>,
    ) -> Self {
        #[derive(Deserialize)]
        struct Body {
            error: Inner,
        }
        #[derive(Deserialize)]
        struct Inner {
            code: ErrorCode,
            message: String,
            #[serde(default)]
            field: Option<String>,
        }
        match serde_json::from_slice::<Body>(body) {
            Ok(Body { error }) => Error::Api(ApiError {
                method: method.to_owned(),
                status: status.as_u16(),
                code: error.code,
                message: error.message,
                field: error.field,
                retry_after,
            }),
            Err(_) => {
                let text = String::from_utf8_lossy(body);
                let start: String = text.chars().take(200).collect();
                Error::Decode {
                    method: method.to_owned(),
                    detail: format!("HTTP {status} without the API's error body: {start}"),
                }
            }
        }
    }
}
