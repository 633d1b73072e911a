//! The event stream (SPEC §12): `GET /api/compute/events/stream` read as Server-Sent
//! Events, one [`Event`] per frame, resumed after a dropped connection.
//!
//! Invariants: every event is handed on once, in `seq` order — a reconnection sends
//! `Last-Event-ID` with the last `seq` handed on, and the server sends only later ones;
//! reconnecting is bounded (a run of failed connections with no event between them ends
//! the stream with the last error); an error answer other than `429`/`503` ends it at
//! once (a bad token does not become a retry loop). Frames are cut from the bytes as
//! they come and decoded whole, so a character split across two reads arrives intact;
//! a frame larger than [`MAX_FRAME`] ends the stream rather than growing the buffer.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bc_api_types::events::{LAST_EVENT_ID, STREAM, STREAM_PATH, StreamQuery};
use bc_domain::model::Event;
use futures::Stream;
use futures::stream::BoxStream;
use reqwest::StatusCode;

use crate::{Client, Error};

/// Failed connections in a row (no event between them) before the stream gives up.
const MAX_FAILURES: u32 = 8;
/// The first wait before reconnecting after a failure; doubled each time, up to 5 s.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// The largest frame read: an event carries at most what a request body may (1 MiB,
/// SPEC §2) with its envelope, so anything near 4 MiB is no event of this API.
pub const MAX_FRAME: usize = 4 << 20;

/// The tenant's events as they are committed: a [`Stream`] of `Result<Event, Error>` that
/// ends only after an error.
pub struct EventStream {
    inner: BoxStream<'static, Result<Event, Error>>,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream").finish_non_exhaustive()
    }
}

impl EventStream {
    pub(crate) fn new(client: Client, query: StreamQuery, after_seq: Option<u64>) -> Self {
        let state = State {
            client,
            query,
            last_seq: after_seq,
            conn: None,
            failures: 0,
            ready: VecDeque::new(),
            done: false,
        };
        Self { inner: Box::pin(futures::stream::unfold(state, State::next)) }
    }
}

impl Stream for EventStream {
    type Item = Result<Event, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

/// An open connection and the part of a frame read so far.
struct Conn {
    resp: reqwest::Response,
    frames: Frames,
}

struct State {
    client: Client,
    query: StreamQuery,
    last_seq: Option<u64>,
    conn: Option<Conn>,
    failures: u32,
    ready: VecDeque<Event>,
    done: bool,
}

impl State {
    /// The next event, reconnecting as often as the bounds allow.
    async fn next(mut self) -> Option<(Result<Event, Error>, Self)> {
        if self.done {
            return None;
        }
        loop {
            if let Some(event) = self.ready.pop_front() {
                self.last_seq = Some(event.seq);
                self.failures = 0;
                return Some((Ok(event), self));
            }
            let Some(conn) = self.conn.as_mut() else {
                match self.connect().await {
                    Ok(conn) => self.conn = Some(conn),
                    Err(Fail::Fatal(e)) => return self.end(e),
                    Err(Fail::Again(e, wait)) => {
                        if let Some(end) = self.failed(e, wait).await {
                            return end;
                        }
                    }
                }
                continue;
            };
            match conn.resp.chunk().await {
                Ok(Some(bytes)) => match conn.frames.push(&bytes) {
                    Ok(events) => self.ready.extend(events),
                    Err(e) => return self.end(e),
                },
                // The server closed the connection: resume where we are.
                Ok(None) => {
                    self.conn = None;
                    let e = Error::Transport {
                        method: STREAM.id().to_string(),
                        detail: "the server closed the stream".into(),
                    };
                    if let Some(end) = self.failed(e, None).await {
                        return end;
                    }
                }
                Err(e) => {
                    self.conn = None;
                    let e = Error::transport(&STREAM.id().to_string(), &e);
                    if let Some(end) = self.failed(e, None).await {
                        return end;
                    }
                }
            }
        }
    }

    /// Opens the stream after the last `seq` handed on.
    async fn connect(&self) -> Result<Conn, Fail> {
        let method = STREAM.id().to_string();
        let mut req = self.client.get(STREAM_PATH).query(&self.query);
        if let Some(seq) = self.last_seq {
            req = req.header(LAST_EVENT_ID, seq.to_string());
        }
        let resp =
            req.send().await.map_err(|e| Fail::Again(Error::transport(&method, &e), None))?;
        let status = resp.status();
        if status.is_success() {
            return Ok(Conn { resp, frames: Frames::default() });
        }
        let retry_after = crate::retry_after(resp.headers());
        let body = resp.bytes().await.unwrap_or_default();
        let error = Error::answered(&method, status, &body, retry_after);
        if status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE {
            Err(Fail::Again(error, retry_after))
        } else {
            Err(Fail::Fatal(error))
        }
    }

    /// Counts a failure and waits before the next try; past the bound, the end of the
    /// stream with `error`.
    async fn failed(
        &mut self,
        error: Error,
        wait: Option<Duration>,
    ) -> Option<Option<(Result<Event, Error>, Self)>> {
        self.failures += 1;
        let max_wait = self.client.retry().max_wait;
        let backoff =
            FIRST_BACKOFF.saturating_mul(1 << (self.failures - 1).min(5)).min(MAX_BACKOFF);
        let wait = wait.unwrap_or(backoff);
        if self.failures > MAX_FAILURES || wait > max_wait {
            self.done = true;
            return Some(Some((Err(error), self.take())));
        }
        tokio::time::sleep(wait).await;
        None
    }

    /// Hands on `error` as the stream's last item.
    fn end(mut self, error: Error) -> Option<(Result<Event, Error>, Self)> {
        self.done = true;
        self.conn = None;
        Some((Err(error), self))
    }

    /// Moves the state out of `&mut self` (leaving a finished one behind).
    fn take(&mut self) -> Self {
        State {
            client: self.client.clone(),
            query: self.query.clone(),
            last_seq: self.last_seq,
            conn: self.conn.take(),
            failures: self.failures,
            ready: std::mem::take(&mut self.ready),
            done: self.done,
        }
    }
}

/// Why a connection attempt failed: for good, or worth another try (after the wait the
/// server named, if any).
enum Fail {
    Fatal(Error),
    Again(Error, Option<Duration>),
}

/// The bytes of the frame being read, and how far they were searched for its end.
#[derive(Debug, Default)]
struct Frames {
    buffer: Vec<u8>,
    searched: usize,
}

impl Frames {
    /// Adds the bytes of one read; the events of the frames it completed. A frame that
    /// is not UTF-8 or not an event, or longer than [`MAX_FRAME`], is an error.
    fn push(&mut self, bytes: &[u8]) -> Result<Vec<Event>, Error> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some((end, sep)) = self.frame_end() {
            let frame: Vec<u8> = self.buffer.drain(..end + sep).collect();
            self.searched = 0;
            let frame = std::str::from_utf8(&frame[..end])
                .map_err(|e| decode(format!("a frame is not UTF-8: {e}")))?;
            if let Some(event) = event_of(frame)? {
                events.push(event);
            }
        }
        if self.buffer.len() > MAX_FRAME {
            return Err(decode(format!(
                "a frame is larger than {MAX_FRAME} bytes: no event of this API is"
            )));
        }
        Ok(events)
    }

    /// Where the first complete frame ends and its blank line's length (`\n\n` or
    /// `\r\n\r\n`), searching only what was not searched before.
    fn frame_end(&mut self) -> Option<(usize, usize)> {
        // A separator may straddle the last read: look back three bytes.
        let from = self.searched.saturating_sub(3);
        let found = self.buffer[from..].windows(2).enumerate().find_map(|(i, w)| {
            let at = from + i;
            match w {
                b"\n\n" => Some((at, 2)),
                b"\r\n" if self.buffer[at..].starts_with(b"\r\n\r\n") => Some((at, 4)),
                _ => None,
            }
        });
        if found.is_none() {
            self.searched = self.buffer.len();
        }
        found
    }
}

/// The error of a stream that is not this API's events.
fn decode(detail: String) -> Error {
    Error::Decode { method: STREAM.id().to_string(), detail }
}

/// The event of one frame (its `data` lines joined); `None` for a frame with no `data`
/// (the keep-alive comment).
fn event_of(frame: &str) -> Result<Option<Event>, Error> {
    let mut data = Vec::new();
    for line in frame.lines() {
        if let Some(rest) = line.strip_prefix("data:") {
            data.push(rest.strip_prefix(' ').unwrap_or(rest));
        }
    }
    if data.is_empty() {
        return Ok(None);
    }
    serde_json::from_str(&data.join("\n")).map(Some).map_err(|e| decode(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::{Frames, MAX_FRAME};

    const EVENT: &str = r#"{"eventId":"evt_01jq3k5v9x8y7z6w5v4t3s2r1e","seq":7,"tenantId":"dev","subject":"compute.pools.x","type":"t","time":"2026-12-02T12:57:15.123Z","data":{"message":"café ☕"}}"#;

    #[test]
    fn frames_are_cut_at_blank_lines_and_comments_skipped() {
        let mut frames = Frames::default();
        let text = format!(":\n\nid: 7\ndata: {EVENT}\n\nid: 8\nda");
        let events = frames.push(text.as_bytes()).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].seq, 7);
        assert_eq!(frames.buffer, b"id: 8\nda", "the partial frame waits for the rest");
    }

    #[test]
    fn a_character_or_a_blank_line_split_between_reads_arrives_whole() {
        let text = format!("id: 7\r\ndata: {EVENT}\r\n\r\n");
        let bytes = text.as_bytes();
        // Every cut: inside the ☕'s three bytes, inside the \r\n\r\n, anywhere.
        for cut in 1..bytes.len() {
            let mut frames = Frames::default();
            let mut events = frames.push(&bytes[..cut]).unwrap();
            events.extend(frames.push(&bytes[cut..]).unwrap());
            assert_eq!(events.len(), 1, "cut at {cut}");
            assert_eq!(events[0].data["message"], "café ☕", "cut at {cut}");
        }
    }

    #[test]
    fn a_frame_past_the_bound_is_an_error_not_a_bigger_buffer() {
        let mut frames = Frames::default();
        frames.push(b"data: ").unwrap();
        let chunk = vec![b'a'; 64 << 10];
        let mut pushed = 6;
        let e = loop {
            match frames.push(&chunk) {
                Ok(events) => assert!(events.is_empty()),
                Err(e) => break e,
            }
            pushed += chunk.len();
            assert!(pushed <= MAX_FRAME, "still reading at {pushed} bytes");
        };
        assert!(e.to_string().contains("larger than"), "{e}");
    }
}
