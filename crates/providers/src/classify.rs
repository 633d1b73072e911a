//! The one classification of provider and cluster API failures, per face: what a failed
//! DigitalOcean answer means as a [`ProviderError`] (`digitalocean`), what a failed GKE
//! or Google token-endpoint answer means (`gke`), and what a
//! Kubernetes `Status` means as an [`ObjectError`] / [`ClusterError`] (`kubernetes`).
//!
//! Invariant: only the adapters classify — the reqwest and kube adapters, through these
//! functions, whoever answers them (DigitalOcean, a cluster, the simulator in tests); no
//! message built here carries a secret it was asked to scrub (the provider token; a
//! cluster's credentials and the values of the Secret sent to it, which a server's
//! validation message may quote), and none is longer than the cap.

use bc_domain::ProviderError;
use bc_domain::Timestamp;
use bc_domain::ports::{ClusterError, ObjectError};

/// The longest provider text a message quotes (an HTML error page must not flood logs).
pub const MESSAGE_CAP: usize = 200;

/// `text` with every occurrence of `secret` replaced, then cut to [`MESSAGE_CAP`]
/// characters — in that order, so a secret straddling the cut leaves no prefix behind.
pub fn scrub_then_cut(text: &str, secret: &str) -> String {
    scrub_all_then_cut(text, &[secret])
}

/// [`scrub_then_cut`] of every one of `secrets`, the longest first (so a secret holding
/// another is replaced whole); empty ones are skipped.
pub fn scrub_all_then_cut(text: &str, secrets: &[&str]) -> String {
    let mut secrets: Vec<&str> = secrets.iter().copied().filter(|s| !s.is_empty()).collect();
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let clean = secrets.iter().fold(text.to_owned(), |t, s| t.replace(s, "[redacted]"));
    clean.trim().chars().take(MESSAGE_CAP).collect::<String>().trim_end().to_owned()
}

/// DigitalOcean's answers (research/digitalocean.md §1, §2).
pub mod digitalocean {
    use serde::Deserialize;

    use super::*;

    /// The message DigitalOcean sends on a 403 while a load balancer still applies an
    /// earlier change (research §1): one change at a time, so it is `Busy`.
    pub const BUSY_MARKER: &str = "can't be updated while it processes previous actions";

    /// The message of the 422 refusing a second load balancer resize within a minute
    /// (research §5: "resize at most once per minute"; the wording is the simulator's,
    /// research has no verbatim body): the same PUT succeeds a minute later — the load
    /// balancer is busy with its earlier resize, one a minute — so it is `Busy`, not the
    /// tenant's error (and not `Transient`: the runtime's failure backoff, doubling
    /// through the minute, sent it up to a minute after it was allowed).
    pub const RESIZE_MARKER: &str = "can only be resized once per minute";

    /// The message of DOKS's 422 to a node-pool change while its cluster is busy with
    /// another operation (research §8.5: such edits, e.g. while the cluster upgrades,
    /// are reported to fail with 422; unconfirmed, no verbatim body — the wording is the
    /// simulator's). One change at a time: `Busy`.
    pub const DOKS_BUSY_MARKER: &str = "while the cluster is busy with another operation";

    /// One failed answer, as any face received it.
    #[derive(Debug, Clone, Copy)]
    pub struct Failure<'a> {
        /// The request's method.
        pub method: &'a str,
        /// The request's path.
        pub path: &'a str,
        /// HTTP status (not 2xx).
        pub status: u16,
        /// The body, as text (`{id, message, request_id}` JSON, or anything a proxy sent).
        pub body: &'a str,
        /// The `x-request-id` header.
        pub request_id: Option<&'a str>,
        /// The `retry-after` header, in seconds.
        pub retry_after_secs: Option<u64>,
        /// The `ratelimit-reset` header, in Unix seconds.
        pub ratelimit_reset: Option<i64>,
    }

    /// The error body of research §1.
    #[derive(Debug, Default, Deserialize)]
    struct ErrorBody {
        #[serde(default)]
        message: Option<String>,
        #[serde(default)]
        request_id: Option<String>,
    }

    /// How long a 429 asks the caller to wait, in milliseconds: `retry-after` seconds,
    /// else until `ratelimit-reset`, never less than a second (a reset already past still
    /// means "not now").
    pub fn rate_limit_wait_ms(
        retry_after_secs: Option<u64>,
        ratelimit_reset: Option<i64>,
        now: Timestamp,
    ) -> u64 {
        let ms = match (retry_after_secs, ratelimit_reset) {
            (Some(secs), _) => secs.saturating_mul(1000),
            (None, Some(reset)) => {
                u64::try_from(reset.saturating_mul(1000).saturating_sub(now.unix_ms())).unwrap_or(0)
            }
            (None, None) => 0,
        };
        ms.max(1000)
    }

    /// The class of a failed answer: 401 `Unauthorized`; 404 `NotFound`; 429
    /// `RateLimited` with [`rate_limit_wait_ms`]; the load balancer's busy 403, its
    /// resize-too-soon 422 and DOKS's busy-cluster 422 `Busy`; any other 4xx
    /// `Refused`; 5xx and the rest `Transient`. Messages read
    /// `METHOD PATH: STATUS (request "ID") MESSAGE` as godo writes them, with `secret`
    /// scrubbed from everything the provider sent.
    pub fn classify(f: &Failure<'_>, secret: &str, now: Timestamp) -> ProviderError {
        let parsed: ErrorBody = serde_json::from_str(f.body).unwrap_or_default();
        // godo keeps a non-JSON body as the message.
        let provider_message = match parsed.message.filter(|m| !m.trim().is_empty()) {
            Some(m) => scrub_then_cut(&m, secret),
            None => scrub_then_cut(f.body, secret),
        };
        let request_id = parsed
            .request_id
            .filter(|r| !r.is_empty())
            .or_else(|| f.request_id.map(str::to_owned))
            .map(|r| scrub_then_cut(&r, secret));
        let (method, path, status) = (f.method, f.path, f.status);
        let message = match &request_id {
            Some(id) => format!("{method} {path}: {status} (request \"{id}\") {provider_message}"),
            None => format!("{method} {path}: {status} {provider_message}"),
        };
        match status {
            401 => ProviderError::Unauthorized,
            404 => ProviderError::NotFound,
            429 => ProviderError::RateLimited {
                retry_after_ms: rate_limit_wait_ms(f.retry_after_secs, f.ratelimit_reset, now),
            },
            403 if provider_message.contains(BUSY_MARKER) => ProviderError::Busy { message },
            422 if provider_message.contains(DOKS_BUSY_MARKER) => ProviderError::Busy { message },
            422 if provider_message.contains(RESIZE_MARKER) => ProviderError::Busy { message },
            400..=499 => ProviderError::Refused { message },
            _ => ProviderError::Transient { message },
        }
    }

    /// What a 404 of a cluster's kubeconfig means, given what a GET of the cluster then
    /// answered: the cluster exists, so its kubeconfig is not served yet (research §8.1,
    /// it is provisioning) and a later retry succeeds — `Transient`, not "gone"; the
    /// cluster is gone too — `NotFound`; the GET failed — that failure.
    pub fn kubeconfig_not_found(
        cluster_id: &str,
        cluster: Result<(), ProviderError>,
    ) -> ProviderError {
        match cluster {
            Ok(()) => ProviderError::Transient {
                message: format!(
                    "the kubeconfig of cluster {cluster_id} is not served yet (the cluster is \
                     still provisioning); retry later"
                ),
            },
            Err(e) => e,
        }
    }
}

/// Google Kubernetes Engine's answers and its token endpoint's (research/gke.md §1, §4).
pub mod gke {
    use serde::Deserialize;

    use super::*;

    /// One failed answer of the GKE API.
    #[derive(Debug, Clone, Copy)]
    pub struct Failure<'a> {
        /// The request's method.
        pub method: &'a str,
        /// The request's path.
        pub path: &'a str,
        /// HTTP status (not 2xx).
        pub status: u16,
        /// The body (Google's error envelope, or anything a proxy sent).
        pub body: &'a str,
        /// The `retry-after` header, in seconds.
        pub retry_after_secs: Option<u64>,
    }

    #[derive(Debug, Default, Deserialize)]
    struct Envelope {
        #[serde(default)]
        error: Option<Status>,
    }

    #[derive(Debug, Default, Deserialize)]
    struct Status {
        #[serde(default)]
        message: Option<String>,
        #[serde(default)]
        status: Option<String>,
        #[serde(default)]
        errors: Vec<Reason>,
    }

    #[derive(Debug, Default, Deserialize)]
    struct Reason {
        #[serde(default)]
        reason: Option<String>,
    }

    /// How long a 429 without `retry-after` waits: GKE enforces its per-minute limit
    /// "at intervals of every 100 seconds", so a few seconds' backoff is the start.
    pub const RATE_LIMIT_WAIT_MS: u64 = 10_000;
    /// How long a per-minute quota 403 waits: the rest of the minute, at most.
    pub const QUOTA_MINUTE_WAIT_MS: u64 = 60_000;

    /// The class of a failed answer, decided once: 400 `failedPrecondition` (GKE's
    /// "Cluster is running incompatible operation …": one change at a time) `Busy`;
    /// a per-minute quota 403 (`rateLimitExceeded`) and 429 `RateLimited`; 401
    /// `Unauthorized` (the transport re-mints once before it gives up); 404 `NotFound`;
    /// 409 `ABORTED` (a stale etag: read again) `Transient`; any other 4xx — invalid
    /// input, a real quota refusal ("Insufficient regional quota"), a missing permission,
    /// "Already exists" — `Refused`; 5xx and the rest `Transient`. Messages read
    /// `METHOD PATH: STATUS STATUS_NAME MESSAGE (reason)` with `secrets` scrubbed.
    pub fn classify(f: &Failure<'_>, secrets: &[&str]) -> ProviderError {
        let parsed = serde_json::from_str::<Envelope>(f.body).unwrap_or_default().error;
        let parsed = parsed.unwrap_or_default();
        let reason = parsed.errors.iter().find_map(|r| r.reason.clone()).unwrap_or_default();
        let status_name = parsed.status.clone().unwrap_or_default();
        let provider_message = match parsed.message.filter(|m| !m.trim().is_empty()) {
            Some(m) => scrub_all_then_cut(&m, secrets),
            None => scrub_all_then_cut(f.body, secrets),
        };
        let (method, path, status) = (f.method, f.path, f.status);
        let mut message = format!("{method} {path}: {status}");
        for part in [status_name.as_str(), provider_message.as_str()] {
            if !part.is_empty() {
                message.push(' ');
                message.push_str(part);
            }
        }
        if !reason.is_empty() {
            message.push_str(&format!(" ({})", scrub_all_then_cut(&reason, secrets)));
        }
        let busy = reason == "failedPrecondition" || status_name == "FAILED_PRECONDITION";
        let per_minute = matches!(
            reason.as_str(),
            "rateLimitExceeded" | "userRateLimitExceeded" | "RATE_LIMIT_EXCEEDED"
        ) || provider_message.contains("per minute");
        match status {
            400 if busy => ProviderError::Busy { message },
            401 => ProviderError::Unauthorized,
            403 if per_minute => {
                ProviderError::RateLimited { retry_after_ms: QUOTA_MINUTE_WAIT_MS }
            }
            404 => ProviderError::NotFound,
            409 if status_name == "ABORTED" => ProviderError::Transient { message },
            429 => ProviderError::RateLimited {
                retry_after_ms: f
                    .retry_after_secs
                    .map_or(RATE_LIMIT_WAIT_MS, |s| s.saturating_mul(1000).max(1000)),
            },
            400..=499 => ProviderError::Refused { message },
            _ => ProviderError::Transient { message },
        }
    }

    /// The token endpoint's error body (RFC 6749 §5.2).
    #[derive(Debug, Default, Deserialize)]
    struct TokenError {
        #[serde(default)]
        error: Option<String>,
        #[serde(default)]
        error_description: Option<String>,
    }

    /// The class of a failed access-token request: `invalid_grant` and the other 4xx
    /// are the key refused — `Refused` with the endpoint's reason, so an account check
    /// can say why (a deleted key, a bad signature, a clock out of step); 429 and 5xx
    /// `RateLimited`/`Transient` (google-auth retries exactly those).
    pub fn classify_token(status: u16, body: &str, secrets: &[&str]) -> ProviderError {
        let parsed: TokenError = serde_json::from_str(body).unwrap_or_default();
        let what = match (parsed.error, parsed.error_description) {
            (Some(e), Some(d)) => format!("{e}: {d}"),
            (Some(e), None) => e,
            (None, Some(d)) => d,
            (None, None) => body.to_owned(),
        };
        let what = scrub_all_then_cut(&what, secrets);
        let message = format!("POST token: {status} {what}");
        match status {
            429 => ProviderError::RateLimited { retry_after_ms: RATE_LIMIT_WAIT_MS },
            400..=499 => ProviderError::Refused {
                message: format!("the token endpoint refused the service account's key: {message}"),
            },
            _ => ProviderError::Transient { message },
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn f(status: u16, body: &str) -> ProviderError {
            let failure = Failure {
                method: "POST",
                path: "/v1/projects/p/locations/us-central1/clusters/c1/nodePools",
                status,
                body,
                retry_after_secs: None,
            };
            classify(&failure, &["ya29.SECRET"])
        }

        fn envelope(code: u16, status: &str, reason: &str, message: &str) -> String {
            serde_json::json!({"error": {"code": code, "message": message, "status": status,
                "errors": [{"message": message, "domain": "global", "reason": reason}]}})
            .to_string()
        }

        #[test]
        fn gke_answers_are_classified_once() {
            let busy = envelope(
                400,
                "FAILED_PRECONDITION",
                "failedPrecondition",
                "Cluster is running incompatible operation operation-1731137433803-29e34938.",
            );
            let ProviderError::Busy { message } = f(400, &busy) else { panic!("{busy}") };
            assert!(message.contains("incompatible operation") && message.contains("400"));
            assert!(f(400, &busy).is_retryable());
            let bad = envelope(
                400,
                "INVALID_ARGUMENT",
                "badRequest",
                "Invalid value for field \"node_pool.name\"",
            );
            assert!(matches!(f(400, &bad), ProviderError::Refused { .. }));
            let ap = envelope(
                400,
                "INVALID_ARGUMENT",
                "badRequest",
                "Autopilot node pools cannot be accessed or modified.",
            );
            assert!(matches!(f(400, &ap), ProviderError::Refused { .. }));
            let quota = envelope(
                403,
                "PERMISSION_DENIED",
                "forbidden",
                "Insufficient regional quota to satisfy request: resource \"CPUS\"",
            );
            assert!(
                matches!(f(403, &quota), ProviderError::Refused { .. }),
                "a real quota refusal"
            );
            let minute = envelope(
                403,
                "PERMISSION_DENIED",
                "rateLimitExceeded",
                "Quota exceeded for quota metric 'Requests' and limit 'Requests per minute'",
            );
            assert_eq!(
                f(403, &minute),
                ProviderError::RateLimited { retry_after_ms: QUOTA_MINUTE_WAIT_MS }
            );
            assert!(matches!(
                f(429, &envelope(429, "RESOURCE_EXHAUSTED", "rateLimitExceeded", "slow down")),
                ProviderError::RateLimited { .. }
            ));
            assert_eq!(
                f(401, &envelope(401, "UNAUTHENTICATED", "authError", "bad token")),
                ProviderError::Unauthorized
            );
            assert_eq!(
                f(
                    404,
                    &envelope(
                        404,
                        "NOT_FOUND",
                        "notFound",
                        "Not found: projects/p/locations/l/clusters/c."
                    )
                ),
                ProviderError::NotFound
            );
            assert!(matches!(
                f(
                    409,
                    &envelope(409, "ALREADY_EXISTS", "alreadyExists", "Already exists: projects/p")
                ),
                ProviderError::Refused { .. }
            ));
            assert!(matches!(
                f(409, &envelope(409, "ABORTED", "aborted", "etag mismatch")),
                ProviderError::Transient { .. }
            ));
            assert!(matches!(f(503, "<html>oops</html>"), ProviderError::Transient { .. }));
            // The bearer a proxy might echo never survives.
            let ProviderError::Refused { message } = f(400, "Bearer ya29.SECRET rejected") else {
                panic!()
            };
            assert!(!message.contains("ya29.SECRET"), "{message}");
        }

        #[test]
        fn token_endpoint_refusals_carry_their_reason_without_the_key() {
            let body = r#"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#;
            let ProviderError::Refused { message } = classify_token(400, body, &["eyJ.assertion"])
            else {
                panic!()
            };
            assert!(message.contains("invalid_grant: Invalid JWT Signature."), "{message}");
            let echo =
                r#"{"error":"invalid_request","error_description":"bad assertion eyJ.assertion"}"#;
            let e = classify_token(400, echo, &["eyJ.assertion"]).to_string();
            assert!(!e.contains("eyJ.assertion"), "{e}");
            assert!(matches!(classify_token(503, "", &[]), ProviderError::Transient { .. }));
            assert!(matches!(classify_token(429, "", &[]), ProviderError::RateLimited { .. }));
        }
    }
}

/// The Kubernetes API's answers (research/kube-wire.md "404 and 409 bodies").
pub mod kubernetes {
    use super::*;

    /// The class of a failed call answered with a metav1 `Status`, decided on `reason`
    /// first as the kube client does, then on `code`:
    /// `NotFound` (404), `AlreadyExists` (409 on create), `Conflict` (409: a field
    /// manager conflict or a failed precondition), `Unauthorized` (401: the token is
    /// expired or revoked) → [`ClusterError::Credentials`], 429 and 5xx →
    /// [`ClusterError::Unreachable`], any other 4xx → [`ClusterError::Refused`].
    /// `message` is the server's, with `secrets` scrubbed: it names objects, and a
    /// validation message may quote a value sent (a Secret's join token) or a proxy's
    /// page the request's credentials.
    pub fn classify_status(
        code: u16,
        reason: &str,
        message: &str,
        secrets: &[&str],
    ) -> ObjectError {
        let msg = format!("{} ({code} {reason})", super::scrub_all_then_cut(message, secrets));
        match (reason, code) {
            ("NotFound", _) => ObjectError::NotFound,
            ("AlreadyExists", _) => ObjectError::AlreadyExists,
            ("Conflict", _) | (_, 409) => ObjectError::Conflict(msg),
            ("Unauthorized", _) | (_, 401) => ObjectError::Failed(ClusterError::Credentials(msg)),
            (_, 429 | 500..=599) => ObjectError::Failed(ClusterError::Unreachable(msg)),
            // A 404 without `reason` is not a Kubernetes answer (a plain proxy page):
            // kube itself does not read it as NotFound, so neither do we.
            _ => ObjectError::Failed(ClusterError::Refused(msg)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::digitalocean::{Failure, classify, kubeconfig_not_found};
    use super::kubernetes::classify_status;
    use super::*;

    fn now() -> Timestamp {
        Timestamp::from_unix_ms(1_800_000_000_000)
    }

    fn failure(status: u16, body: &str) -> Failure<'_> {
        Failure {
            method: "PUT",
            path: "/v2/load_balancers/x",
            status,
            body,
            request_id: None,
            retry_after_secs: None,
            ratelimit_reset: None,
        }
    }

    fn c(status: u16, body: &str) -> ProviderError {
        classify(&failure(status, body), "", now())
    }

    #[test]
    fn digitalocean_statuses_map_to_classes() {
        let unauthorized = r#"{"id":"unauthorized","message":"Unable to authenticate you"}"#;
        assert_eq!(c(401, unauthorized), ProviderError::Unauthorized);
        assert_eq!(c(404, r#"{"id":"not_found"}"#), ProviderError::NotFound);
        let f = Failure {
            request_id: Some("rid-1"),
            ..failure(422, r#"{"id":"unprocessable_entity","message":"name is not unique"}"#)
        };
        let ProviderError::Refused { message } = classify(&f, "", now()) else { panic!() };
        assert_eq!(message, "PUT /v2/load_balancers/x: 422 (request \"rid-1\") name is not unique");
        assert!(matches!(c(400, "error parsing request body"), ProviderError::Refused { .. }));
        let forbidden =
            r#"{"id":"forbidden","message":"You are not authorized to perform this operation"}"#;
        assert!(matches!(c(403, forbidden), ProviderError::Refused { .. }), "only busy is retried");
        let busy = r#"{"id":"forbidden","message":"Load Balancer can't be updated while it processes previous actions","request_id":"r9"}"#;
        let ProviderError::Busy { message } = c(403, busy) else { panic!() };
        assert!(message.contains("(request \"r9\")"));
        let too_soon = r#"{"id":"unprocessable_entity","message":"Load Balancer can only be resized once per minute"}"#;
        assert!(matches!(c(422, too_soon), ProviderError::Busy { .. }), "a resize retried later");
        let cluster_busy = r#"{"id":"unprocessable_entity","message":"node pools cannot be changed while the cluster is busy with another operation (upgrading); try again when it is done"}"#;
        assert!(
            matches!(c(422, cluster_busy), ProviderError::Busy { .. }),
            "a node-pool change retried once the cluster is done"
        );
        assert!(matches!(c(500, ""), ProviderError::Transient { .. }));
        assert!(matches!(c(503, "<html>"), ProviderError::Transient { .. }));
    }

    #[test]
    fn rate_limited_wait_comes_from_retry_after_then_reset() {
        let f = |retry: Option<u64>, reset: Option<i64>| {
            classify(
                &Failure { retry_after_secs: retry, ratelimit_reset: reset, ..failure(429, "") },
                "",
                now(),
            )
        };
        assert_eq!(
            f(Some(29), Some(1_800_000_600)),
            ProviderError::RateLimited { retry_after_ms: 29_000 }
        );
        assert_eq!(
            f(None, Some(1_800_000_042)),
            ProviderError::RateLimited { retry_after_ms: 42_000 }
        );
        assert_eq!(
            f(None, Some(1_700_000_000)),
            ProviderError::RateLimited { retry_after_ms: 1_000 }
        );
        assert_eq!(f(None, None), ProviderError::RateLimited { retry_after_ms: 1_000 });
    }

    #[test]
    fn a_token_straddling_the_cut_is_scrubbed_before_it() {
        let token = "dop_v1_0123456789abcdef0123456789abcdef";
        // The token starts 10 characters before the cap: cut first, a 10-character prefix
        // of it would survive.
        let body = format!("{}{token} and more", "x".repeat(MESSAGE_CAP - 10));
        for b in [body.clone(), serde_json::json!({"id": "x", "message": body}).to_string()] {
            let ProviderError::Refused { message } = classify(&failure(418, &b), token, now())
            else {
                panic!()
            };
            assert!(!message.contains(&token[..10]), "{message}");
            assert!(message.contains("[redacted]"), "{message}");
        }
        assert_eq!(scrub_then_cut(&"y".repeat(500), token).chars().count(), MESSAGE_CAP);
    }

    #[test]
    fn a_kubeconfig_404_is_not_ready_unless_the_cluster_is_gone() {
        assert!(matches!(kubeconfig_not_found("c1", Ok(())), ProviderError::Transient { .. }));
        assert_eq!(
            kubeconfig_not_found("c1", Err(ProviderError::NotFound)),
            ProviderError::NotFound
        );
        assert_eq!(
            kubeconfig_not_found("c1", Err(ProviderError::Unauthorized)),
            ProviderError::Unauthorized
        );
    }

    #[test]
    fn a_cluster_status_is_scrubbed_of_every_secret_given() {
        let (token, b64) = ("bcj_join_token_0123456789", "YmNqX2pvaW5fdG9rZW5fMDEyMzQ1Njc4OQ==");
        let message = format!("data[joinToken]: Invalid value: {b64} ({token}), bearer kt-1234");
        let ObjectError::Failed(ClusterError::Refused(m)) =
            classify_status(422, "Invalid", &message, &[token, b64, "kt-1234", ""])
        else {
            panic!()
        };
        assert!(!m.contains(token) && !m.contains(b64) && !m.contains("kt-1234"), "{m}");
        assert_eq!(m.matches("[redacted]").count(), 3, "{m}");
    }

    #[test]
    fn kubernetes_statuses_map_on_reason_then_code() {
        assert_eq!(classify_status(404, "NotFound", "x", &[]), ObjectError::NotFound);
        assert_eq!(classify_status(409, "AlreadyExists", "x", &[]), ObjectError::AlreadyExists);
        assert!(
            matches!(classify_status(409, "Conflict", "m", &[]), ObjectError::Conflict(m) if m == "m (409 Conflict)")
        );
        assert!(matches!(
            classify_status(401, "Unauthorized", "Unauthorized", &[]),
            ObjectError::Failed(ClusterError::Credentials(_))
        ));
        for (code, reason) in
            [(500, "InternalError"), (503, "ServiceUnavailable"), (429, "TooManyRequests")]
        {
            assert!(matches!(
                classify_status(code, reason, "m", &[]),
                ObjectError::Failed(ClusterError::Unreachable(_))
            ));
        }
        for (code, reason) in [(403, "Forbidden"), (400, "BadRequest"), (422, "Invalid"), (404, "")]
        {
            assert!(matches!(
                classify_status(code, reason, "m", &[]),
                ObjectError::Failed(ClusterError::Refused(_))
            ));
        }
    }
}
