//! The error of the HTTP layer and its one mapping to responses (SPEC §2):
//! `{"error":{"code","message","field"?}}` with the status the code names.
//!
//! Invariants: this file is the only place that turns an error into a status and a body;
//! an `INTERNAL` answer carries a fixed message and an error id, while the detail (which
//! may name SQL or a stack) goes only to the log line carrying the same id; no message
//! built here includes a credential (callers pass names and ids only).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bc_domain::{Error as DomainError, ErrorCode, FieldViolation, ProviderError, StoreError};
use serde::Serialize;

/// The code of an error answer: one of SPEC §2's, or the transport's own 405.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// A code of SPEC §2.
    Spec(ErrorCode),
    /// A known method path called with a verb other than POST.
    MethodNotAllowed,
}

impl Code {
    /// The wire name, e.g. `NOT_FOUND`.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Spec(c) => c.as_str(),
            Code::MethodNotAllowed => "METHOD_NOT_ALLOWED",
        }
    }

    /// The HTTP status: SPEC §2's table (the only one; bc-domain's codes know no
    /// transport).
    pub fn status(self) -> StatusCode {
        match self {
            Code::Spec(c) => match c {
                ErrorCode::InvalidArgument | ErrorCode::FailedPrecondition => {
                    StatusCode::BAD_REQUEST
                }
                ErrorCode::Unauthenticated => StatusCode::UNAUTHORIZED,
                ErrorCode::PermissionDenied => StatusCode::FORBIDDEN,
                ErrorCode::NotFound => StatusCode::NOT_FOUND,
                ErrorCode::AlreadyExists | ErrorCode::Aborted => StatusCode::CONFLICT,
                ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
                ErrorCode::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
                ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
                ErrorCode::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            },
            Code::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        }
    }
}

/// The fixed message of every `INTERNAL` answer (the error id follows it).
pub const INTERNAL_MESSAGE: &str = "internal error";

/// An error answer of the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    code: Code,
    message: String,
    field: Option<String>,
    retry_after_secs: Option<u64>,
    /// For `INTERNAL`: what happened, for the log only.
    detail: Option<String>,
}

impl ApiError {
    /// An error with a SPEC code and a caller-facing message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code: Code::Spec(code),
            message: message.into(),
            field: None,
            retry_after_secs: None,
            detail: None,
        }
    }

    /// `INVALID_ARGUMENT` naming the field (a JSON path such as `policy.flavors[1].name`).
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: Some(field.into()), ..Self::new(ErrorCode::InvalidArgument, message) }
    }

    /// `INVALID_ARGUMENT` about the body as a whole (not JSON, not an object).
    pub fn invalid_body(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArgument, message)
    }

    /// `UNAUTHENTICATED`.
    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unauthenticated, message)
    }

    /// `PERMISSION_DENIED`.
    pub fn permission_denied(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::PermissionDenied, message)
    }

    /// `NOT_FOUND`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    /// `FAILED_PRECONDITION`: valid input the current state forbids (say how to proceed).
    pub fn failed_precondition(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::FailedPrecondition, message)
    }

    /// `ABORTED`: the object changed since the caller read it (`expectedGeneration`).
    pub fn aborted(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Aborted, message)
    }

    /// `UNAVAILABLE`: something this call depends on cannot be reached; try again.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unavailable, message)
    }

    /// A provider's answer to a call made on behalf of the caller (checking a token,
    /// reading a cluster's nodes), as SPEC §2 codes: a refusal is `FAILED_PRECONDITION`
    /// saying `what` was refused, throttling and outages are `UNAVAILABLE`. The provider's
    /// own text is logged, never answered (it may quote what the caller sent).
    pub fn provider(what: &str, e: &ProviderError) -> Self {
        tracing::info!(error = %e, "{what}");
        match e {
            ProviderError::Unauthorized => {
                Self::failed_precondition(format!("{what}: the provider refused the credentials"))
            }
            ProviderError::Refused { .. } | ProviderError::NotFound => {
                Self::failed_precondition(format!("{what}: the provider refused the request"))
            }
            // The account's provider budget (its own or the provider's 429) says when:
            // the caller is told, as a rate limit is.
            ProviderError::RateLimited { retry_after_ms }
            | ProviderError::OverBudget { retry_after_ms } => Self {
                retry_after_secs: Some(retry_after_ms.div_ceil(1000).max(1)),
                ..Self::unavailable(format!(
                    "{what}: the provider account's call budget is spent for now; try again later"
                ))
            },
            ProviderError::Busy { .. } | ProviderError::Transient { .. } => {
                Self::unavailable(format!("{what}: the provider could not be reached; try again"))
            }
        }
    }

    /// [`ApiError::provider`] for checking credentials the caller is creating an account
    /// with (SPEC §5: refused credentials are FAILED_PRECONDITION "with the provider's
    /// reason, scrubbed"): a refusal carries the provider's words, which the adapter has
    /// already scrubbed of the credentials and cut short.
    pub fn provider_refusal(what: &str, e: &ProviderError) -> Self {
        match e {
            ProviderError::Refused { message } => {
                tracing::info!(error = %e, "{what}");
                Self::failed_precondition(format!("{what}: the provider refused: {message}"))
            }
            other => Self::provider(what, other),
        }
    }

    /// `RESOURCE_EXHAUSTED` with a `Retry-After` of `secs` seconds.
    pub fn rate_limited(secs: u64) -> Self {
        Self::rate_limited_for("this token", secs)
    }

    /// `RESOURCE_EXHAUSTED` with a `Retry-After` of `secs` seconds, for the rate limit of
    /// `whose` (e.g. "this join token", "this address").
    pub fn rate_limited_for(whose: &str, secs: u64) -> Self {
        Self {
            retry_after_secs: Some(secs.max(1)),
            ..Self::new(
                ErrorCode::ResourceExhausted,
                format!("rate limit of {whose} exceeded; retry in {} s", secs.max(1)),
            )
        }
    }

    /// `PAYLOAD_TOO_LARGE` for a body over `limit` bytes.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            ErrorCode::PayloadTooLarge,
            format!("the body is over {} bytes ({} MiB)", limit, limit / (1024 * 1024)),
        )
    }

    /// 405 for a verb other than POST on a method's path.
    pub fn method_not_allowed(path: &str) -> Self {
        Self {
            code: Code::MethodNotAllowed,
            ..Self::new(ErrorCode::InvalidArgument, format!("{path} takes POST only"))
        }
    }

    /// `INTERNAL`: `detail` is logged with an error id; the caller sees neither the detail
    /// nor anything but [`INTERNAL_MESSAGE`] and that id.
    pub fn internal(detail: impl Into<String>) -> Self {
        Self { detail: Some(detail.into()), ..Self::new(ErrorCode::Internal, INTERNAL_MESSAGE) }
    }

    /// The code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The caller-facing message (for `INTERNAL`, before the error id is added).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The JSON path of the offending field, for input errors.
    pub fn field(&self) -> Option<&str> {
        self.field.as_deref()
    }
}

impl From<DomainError> for ApiError {
    fn from(e: DomainError) -> Self {
        if e.code == ErrorCode::Internal {
            return ApiError::internal(e.message);
        }
        Self { field: e.field, ..Self::new(e.code, e.message) }
    }
}

impl From<FieldViolation> for ApiError {
    fn from(v: FieldViolation) -> Self {
        ApiError::invalid(v.field, v.message)
    }
}

impl From<StoreError> for ApiError {
    /// The store's errors as SPEC §2 codes; only here does a `Stale` become `ABORTED`.
    fn from(e: StoreError) -> Self {
        match e {
            // Keeps the database's text for the log, never for the caller.
            StoreError::Internal(detail) => ApiError::internal(format!("store: {detail}")),
            other => DomainError::from(other).into(),
        }
    }
}

/// The body of an error answer.
#[derive(Serialize)]
struct Body<'a> {
    error: Inner<'a>,
}

#[derive(Serialize)]
struct Inner<'a> {
    code: &'static str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
}

/// A random id for an internal error, to find its log line.
fn error_id() -> String {
    let n: u128 = rand::random();
    format!("err_{}", ulid::Ulid(n).to_string().to_ascii_lowercase())
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let message = match &self.detail {
            Some(detail) => {
                let id = error_id();
                tracing::error!(error_id = %id, detail = %detail, "internal error");
                format!("{INTERNAL_MESSAGE} (error id {id})")
            }
            None => self.message.clone(),
        };
        let body = Body {
            error: Inner { code: self.code.as_str(), message: &message, field: self.field() },
        };
        let bytes = serde_json::to_vec(&body).unwrap_or_else(|_| b"{}".to_vec());
        let mut resp = (self.code.status(), bytes).into_response();
        let headers = resp.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(secs) = self.retry_after_secs {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if self.code == Code::MethodNotAllowed {
            headers.insert(header::ALLOW, HeaderValue::from_static("POST"));
        }
        // Lets the metrics layer label the request without parsing the body.
        resp.extensions_mut().insert(self.code);
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body_of(resp: Response) -> serde_json::Value {
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 16).await.unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn internal_hides_the_detail_and_gives_an_id() {
        let resp = ApiError::from(StoreError::internal("SELECT secret FROM t")).into_response();
        assert_eq!(resp.status(), 500);
        let body = body_of(resp).await;
        let msg = body["error"]["message"].as_str().unwrap();
        assert!(msg.starts_with("internal error (error id err_"), "{msg}");
        assert!(!msg.contains("SELECT"));
        assert_eq!(body["error"]["code"], "INTERNAL");
    }

    #[test]
    fn every_spec_code_has_its_spec_status() {
        let table = [
            (ErrorCode::InvalidArgument, 400),
            (ErrorCode::FailedPrecondition, 400),
            (ErrorCode::Unauthenticated, 401),
            (ErrorCode::PermissionDenied, 403),
            (ErrorCode::NotFound, 404),
            (ErrorCode::AlreadyExists, 409),
            (ErrorCode::Aborted, 409),
            (ErrorCode::PayloadTooLarge, 413),
            (ErrorCode::ResourceExhausted, 429),
            (ErrorCode::Internal, 500),
            (ErrorCode::Unavailable, 503),
        ];
        for (code, status) in table {
            assert_eq!(Code::Spec(code).status().as_u16(), status, "{code}");
        }
    }

    #[tokio::test]
    async fn codes_map_to_statuses_and_headers() {
        let stale = ApiError::from(StoreError::Stale("pool pool_x".into())).into_response();
        assert_eq!(stale.status(), 409);
        assert_eq!(body_of(stale).await["error"]["code"], "ABORTED");
        let limited = ApiError::rate_limited(3).into_response();
        assert_eq!(limited.status(), 429);
        assert_eq!(limited.headers()[header::RETRY_AFTER], "3");
        let verb = ApiError::method_not_allowed("/api/compute/pools/get").into_response();
        assert_eq!(verb.status(), 405);
        assert_eq!(verb.headers()[header::ALLOW], "POST");
        let invalid = ApiError::invalid("poolId", "bad").into_response();
        let body = body_of(invalid).await;
        assert_eq!(
            body,
            serde_json::json!({"error":{"code":"INVALID_ARGUMENT","message":"bad","field":"poolId"}})
        );
        let unavailable = ApiError::from(StoreError::Unavailable("conn refused 10.0.0.1".into()));
        assert_eq!(unavailable.code().status(), 503);
        assert!(!unavailable.message().contains("10.0.0.1"));
        let full = ApiError::from(StoreError::NotWritable(
            "error returned from database: (code: 13) database or disk is full /var/bc.db".into(),
        ));
        assert_eq!(full.code().status(), 503);
        assert_eq!(full.code().as_str(), "UNAVAILABLE");
        assert!(full.message().contains("cannot accept writes"), "{}", full.message());
        assert!(!full.message().contains("/var") && !full.message().contains("code"));
        let spent = ProviderError::OverBudget { retry_after_ms: 2_500 };
        let spent = ApiError::provider("listing", &spent).into_response();
        assert_eq!(spent.status(), 503);
        assert_eq!(spent.headers()[header::RETRY_AFTER], "3");
    }
}
