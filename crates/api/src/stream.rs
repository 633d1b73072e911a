//! `GET /api/compute/events/stream?tenantId=…&subject=…` (SPEC §12): the tenant's events
//! as Server-Sent Events, read from the store's outbox, resumable with `Last-Event-ID`.
//!
//! Invariants: each event goes out once per connection, in `seq` order, with `id: <seq>`,
//! so a client that reconnects with the last id it saw misses nothing and sees nothing
//! twice (the outbox's `seq` is global and increasing in commit order); a connection holds
//! at most one batch of events in memory and reads the next only when the client has
//! taken the last (the body is pulled, not pushed); it wakes on the events wake-up and
//! otherwise polls at most [`POLL`] apart, so events committed by other processes
//! arrive too; idle connections get a keep-alive comment. Authentication, the rate limit
//! and authorization are those of every method (`compute:events:read @ compute-tenant`),
//! and they are not decided once: the token is read and authorized again at least every
//! [`RECHECK`], and the stream ends when it no longer passes; a token holds at most
//! [`MAX_STREAMS_PER_TOKEN`] open streams; every stream ends when the server shuts down
//! (`Api::shutdown`), so a client holding one open never keeps the server from stopping.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::LazyLock;
use std::time::Duration;

use axum::extract::{Query, Request, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use bc_domain::model::{Event, INTEGER_MAX};
use bc_domain::{ErrorCode, StoreError, TenantId, TokenId};
use futures::Stream;
use regex::Regex;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::access::{self, Target};
use crate::auth::{Caller, authenticate};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::metrics::MethodLabel;
use crate::ratelimit::Slot;
use bc_api_types::events::{EVENTS, STREAM, SUBJECT_MAX, SUBJECT_PATTERN, StreamQuery};

pub use bc_api_types::events::{LAST_EVENT_ID, STREAM_PATH};

/// The longest wait between two reads of the outbox.
pub const POLL: Duration = Duration::from_secs(1);
/// How often an idle connection gets a keep-alive comment.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The longest a stream runs on its token without reading it again: within this of the
/// token's revocation (or the loss of its grant) the stream ends (SPEC §12).
pub const RECHECK: Duration = Duration::from_secs(5);
/// Most event streams one token holds open at once (SPEC §12; per API process).
pub const MAX_STREAMS_PER_TOKEN: usize = 8;
/// Events read (and held) per batch.
pub const BATCH: u32 = 100;

/// Where a connection is: what it has read and not yet sent, where to read next, and
/// whose token it runs on.
struct Cursor {
    ctx: Ctx,
    token: TokenId,
    tenant: TenantId,
    subject: Option<String>,
    after: u64,
    pending: VecDeque<Event>,
    /// When the token is next checked again.
    recheck_at: Instant,
    /// The token's count of open streams, given back when the connection ends.
    _slot: Slot,
}

impl Cursor {
    /// The next event, waiting for one as long as it takes; `None` once the token no
    /// longer opens the stream (revoked, or its grants no longer allow it).
    async fn next(mut self) -> Option<(SseEvent, Self)> {
        loop {
            if Instant::now() >= self.recheck_at {
                match self.still_allowed().await {
                    Ok(true) => self.recheck_at = Instant::now() + RECHECK,
                    Ok(false) => return None,
                    // Tried again at the next poll; the outbox cannot be read either.
                    Err(e) => tracing::warn!(error = %e, "events stream: checking the token"),
                }
            }
            if self.ctx.shutdown.as_ref().is_some_and(CancellationToken::is_cancelled) {
                return None;
            }
            if let Some(event) = self.pending.pop_front() {
                self.after = event.seq;
                return Some((frame(&event), self));
            }
            // Registered before the read, so a poke between the read and the wait counts.
            let notified = self.ctx.events_notify.clone().map(Notify::notified_owned);
            tokio::pin!(notified);
            if let Some(n) = notified.as_mut().as_pin_mut() {
                n.enable();
            }
            let read = self
                .ctx
                .store
                .event_list(&self.tenant, self.subject.as_deref(), self.after, BATCH)
                .await;
            match read {
                Ok(events) if !events.is_empty() => {
                    self.pending.extend(events);
                    continue;
                }
                Ok(_) => {}
                // Logged and tried again at the next poll; the client keeps its place.
                Err(e) => tracing::warn!(error = %e, "events stream: reading the outbox"),
            }
            let shutdown = self.ctx.shutdown.clone();
            let stopping = async move {
                match shutdown {
                    Some(token) => token.cancelled_owned().await,
                    None => std::future::pending().await,
                }
            };
            let wait = async {
                match notified.as_pin_mut() {
                    Some(n) => {
                        let _ = tokio::time::timeout(POLL, n).await;
                    }
                    None => tokio::time::sleep(POLL).await,
                }
            };
            tokio::select! {
                () = wait => {}
                () = stopping => return None,
            }
        }
    }

    /// Whether the token, read again, still opens this stream: not revoked, and its
    /// grants still allow `compute:events:read` on the tenant.
    async fn still_allowed(&self) -> Result<bool, StoreError> {
        let token = self.ctx.store.api_token_get(&self.token).await?;
        let Some(token) = token.filter(|t| t.revoked_at.is_none()) else { return Ok(false) };
        let target = Target::Tenant(self.tenant.clone());
        Ok(access::authorize(&self.ctx, &STREAM, &Caller::Token(token), target).await.is_ok())
    }
}

/// One event on the wire: `id: <seq>`, `data: <the event's JSON>`.
fn frame(event: &Event) -> SseEvent {
    let data = serde_json::to_string(event).unwrap_or_else(|_| "{}".into());
    SseEvent::default().id(event.seq.to_string()).data(data)
}

/// The `Last-Event-ID` a reconnecting client sent: the `seq` to resume after, a whole
/// number up to [`INTEGER_MAX`] (the bound `events.list` declares for `afterSeq`).
fn last_event_id(headers: &HeaderMap) -> Result<u64, ApiError> {
    let Some(value) = headers.get(LAST_EVENT_ID) else { return Ok(0) };
    value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|seq| *seq <= INTEGER_MAX)
        .ok_or_else(|| {
            ApiError::invalid(
                "Last-Event-ID",
                format!("must be the seq of an event: a whole number from 0 to {INTEGER_MAX}"),
            )
        })
}

/// Checks `subject` as `events.list` documents it.
fn check_subject(subject: Option<&str>) -> Result<(), ApiError> {
    static RE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(SUBJECT_PATTERN).expect("the subject pattern compiles"));
    let Some(s) = subject else { return Ok(()) };
    if s.chars().count() > SUBJECT_MAX || !RE.is_match(s) {
        return Err(ApiError::invalid(
            "subject",
            format!("must be at most {SUBJECT_MAX} characters matching {SUBJECT_PATTERN}"),
        ));
    }
    Ok(())
}

/// `GET /api/compute/events/stream`.
pub(crate) async fn serve(State(ctx): State<Ctx>, req: Request) -> Response {
    // The body is not `Sync`, and a GET has none: keep only the head across the awaits.
    let (req, _) = req.into_parts();
    let result = async {
        let ctx = &ctx;
        let how = STREAM.authorization.authentication();
        let caller = authenticate(ctx.store.as_ref(), how, &req.headers).await?;
        ctx.rate_limit(caller.rate_key())?;
        let Query(query) = Query::<StreamQuery>::try_from_uri(&req.uri)
            .map_err(|e| ApiError::invalid_body(format!("the query string: {}", e.body_text())))?;
        check_subject(query.subject.as_deref())?;
        let after = last_event_id(&req.headers)?;
        access::authorize(ctx, &STREAM, &caller, Target::Tenant(query.tenant_id.clone())).await?;
        let Caller::Token(token) = caller else {
            return Err(ApiError::internal("the event stream without an API token"));
        };
        let slot = ctx.streams.try_open(token.token_id.as_str(), MAX_STREAMS_PER_TOKEN).ok_or_else(
            || {
                ApiError::new(
                    ErrorCode::ResourceExhausted,
                    format!(
                        "token {} holds {MAX_STREAMS_PER_TOKEN} open event streams already: close one first",
                        token.token_id
                    ),
                )
            },
        )?;
        Ok::<_, ApiError>(Cursor {
            ctx: ctx.clone(),
            token: token.token_id,
            tenant: query.tenant_id,
            subject: query.subject,
            after,
            pending: VecDeque::new(),
            recheck_at: Instant::now() + RECHECK,
            _slot: slot,
        })
    }
    .await;
    let mut resp = match result {
        Ok(cursor) => Sse::new(events(cursor))
            .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
            .into_response(),
        Err(e) => e.into_response(),
    };
    resp.extensions_mut().insert(MethodLabel(EVENTS.name, STREAM.name));
    resp
}

/// The stream of a connection's events, ending only when its token no longer opens it.
fn events(cursor: Cursor) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    futures::stream::unfold(cursor, |c| async move {
        let (event, c) = c.next().await?;
        Some((Ok(event), c))
    })
}
