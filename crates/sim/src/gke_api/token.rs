//! `POST /token`: Google's OAuth 2.0 token endpoint for the JWT-bearer grant (RFC 7523,
//! research/gke.md §1). The assertion's audience may be Google's token URL (google-auth
//! always sends it) or this endpoint's own URL (gcp_auth and yup-oauth2 send their
//! `token_uri`).
//!
//! Invariant: the answer is `{access_token, expires_in, token_type}` or 400
//! `{error, error_description}`; the assertion itself never appears in an answer.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Form;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::SimState;
use crate::model::gke::auth::GOOGLE_TOKEN_URL;
use crate::model::routes::key;

const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

fn refuse(error: &str, description: &str) -> Response {
    let body = json!({"error": error, "error_description": description});
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

/// The token endpoint.
pub async fn token(
    State(s): State<Arc<SimState>>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let now = s.clock.now();
    let own = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(|h| [format!("http://{h}/token"), format!("https://{h}/token")]);
    let mut model = s.model();
    *model.counters_mut().entry(key("POST", super::routes::TOKEN)).or_default() += 1;
    if form.get("grant_type").map(String::as_str) != Some(JWT_BEARER) {
        return refuse(
            "unsupported_grant_type",
            "Invalid grant_type: expected urn:ietf:params:oauth:grant-type:jwt-bearer.",
        );
    }
    let Some(assertion) = form.get("assertion") else {
        return refuse("invalid_request", "Missing required parameter: assertion");
    };
    let mut audiences = vec![GOOGLE_TOKEN_URL];
    if let Some(own) = &own {
        audiences.extend(own.iter().map(String::as_str));
    }
    match model.gke_grant(assertion, &audiences, now) {
        Ok((token, expires_in)) => (
            StatusCode::OK,
            axum::Json(
                json!({"access_token": token, "expires_in": expires_in, "token_type": "Bearer"}),
            ),
        )
            .into_response(),
        Err(e) => refuse("invalid_grant", &e.0),
    }
}
