//! The HTTP server's connections and their time limits (SPEC §13): a client that takes
//! more than [`HEADER_TIMEOUT`] to send a request's headers, or leaves a keep-alive
//! connection idle for more than [`IDLE_TIMEOUT`], is disconnected. (A body slower than
//! bc-api's minimum rate is cut off where it is read, `bc_api`'s body reading.)
//!
//! Invariant: a connection is never cut while a request is in flight (from the call of
//! the service until its response body is dropped — an event stream may run for hours);
//! between requests exactly one deadline applies: the idle one until the first byte of
//! the next request, then the header one, counted from that byte. The deadline is
//! enforced in the connection's reads, so a client trickling bytes cannot push it back.
//! A connection the server closes sends its end first, then reads and discards what the
//! client still sends — at most [`LINGER_BYTES`] for [`LINGER_TIME`] — before it closes
//! (as nginx's lingering close): closing a socket with unread bytes resets it, and the
//! reset can destroy the answer the client has not read yet (a `413` for a body the
//! server refused by its `Content-Length`).

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::extract::{ConnectInfo, Request};
use axum::middleware::Next;
use axum::response::Response;
use axum::serve::{IncomingStream, Listener};
use http_body_util::BodyExt as _;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};

/// The longest a client may take to send a request's headers, from their first byte.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest a connection may stay idle between requests.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a closing connection goes on reading what the client still sends (a
/// lingering close): a client that sends its whole body before it reads — Python's
/// `urllib` — then reads the `413` it was sent instead of a reset.
pub const LINGER_TIME: Duration = Duration::from_secs(5);
/// The most a closing connection reads and discards.
pub const LINGER_BYTES: u64 = 64 << 20;

/// A connection's time limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// See [`HEADER_TIMEOUT`].
    pub header: Duration,
    /// See [`IDLE_TIMEOUT`].
    pub idle: Duration,
}

impl Default for ConnectionLimits {
    /// [`HEADER_TIMEOUT`] and [`IDLE_TIMEOUT`].
    fn default() -> Self {
        Self { header: HEADER_TIMEOUT, idle: IDLE_TIMEOUT }
    }
}

/// What a connection is doing, as far as its deadline is concerned.
#[derive(Debug)]
struct Activity {
    /// Requests whose responses are not yet finished.
    in_flight: usize,
    /// When the connection last became idle (accepted, or its last response ended).
    idle_since: Instant,
    /// When the first byte of the next request's headers arrived.
    head_since: Option<Instant>,
}

/// One connection's activity, shared by its reads and its requests.
#[derive(Debug)]
pub struct Watch {
    limits: ConnectionLimits,
    activity: Mutex<Activity>,
}

impl Watch {
    fn new(limits: ConnectionLimits, now: Instant) -> Self {
        let activity = Activity { in_flight: 0, idle_since: now, head_since: None };
        Self { limits, activity: Mutex::new(activity) }
    }

    fn activity(&self) -> std::sync::MutexGuard<'_, Activity> {
        self.activity.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// When the connection is to be cut unless a request starts: `None` while one is in
    /// flight.
    fn deadline(&self) -> Option<Instant> {
        let a = self.activity();
        if a.in_flight > 0 {
            return None;
        }
        Some(match a.head_since {
            Some(head) => head + self.limits.header,
            None => a.idle_since + self.limits.idle,
        })
    }

    /// Bytes arrived at `now`: between requests, the next request's headers began.
    fn read(&self, now: Instant) {
        let mut a = self.activity();
        if a.in_flight == 0 && a.head_since.is_none() {
            a.head_since = Some(now);
        }
    }

    /// A request's headers are in: no deadline until its response ends.
    fn begin(&self) {
        let mut a = self.activity();
        a.in_flight += 1;
        a.head_since = None;
    }

    /// A response ended at `now`; with none left in flight the connection is idle.
    fn end(&self, now: Instant) {
        let mut a = self.activity();
        a.in_flight = a.in_flight.saturating_sub(1);
        if a.in_flight == 0 {
            a.idle_since = now;
            a.head_since = None;
        }
    }
}

/// Ends a request on its connection's [`Watch`] when dropped (with the response body).
struct InFlight(Arc<Watch>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.end(Instant::now());
    }
}

/// A TCP listener whose connections keep [`ConnectionLimits`].
#[derive(Debug)]
pub struct LimitedListener {
    inner: TcpListener,
    limits: ConnectionLimits,
}

impl LimitedListener {
    /// Connections of `inner`, held to `limits`.
    pub fn new(inner: TcpListener, limits: ConnectionLimits) -> Self {
        Self { inner, limits }
    }
}

impl Listener for LimitedListener {
    type Io = LimitedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (io, addr) = Listener::accept(&mut self.inner).await;
        let now = Instant::now();
        let watch = Arc::new(Watch::new(self.limits, now));
        let timer = Box::pin(tokio::time::sleep_until(now));
        (LimitedStream { io, watch, timer, linger: None }, addr)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Listener::local_addr(&self.inner)
    }
}

/// A connection that fails its reads once its deadline passes (hyper then closes it).
#[derive(Debug)]
pub struct LimitedStream {
    io: TcpStream,
    watch: Arc<Watch>,
    timer: Pin<Box<Sleep>>,
    /// Once closing: how much more it reads and discards (until the timer fires).
    linger: Option<u64>,
}

impl LimitedStream {
    /// `TimedOut` when the deadline has passed; otherwise the timer is set to wake the
    /// reader at it.
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(deadline) = self.watch.deadline() else { return false };
        if self.timer.deadline() != deadline {
            self.timer.as_mut().reset(deadline);
        }
        self.timer.as_mut().poll(cx).is_ready()
    }
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "the client was too slow or idle too long")
}

impl AsyncRead for LimitedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // Checked before reading too: a client trickling bytes always has one ready.
        if this.expired(cx) {
            return Poll::Ready(Err(timed_out()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.watch.read(Instant::now());
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending if this.expired(cx) => Poll::Ready(Err(timed_out())),
            other => other,
        }
    }
}

impl AsyncWrite for LimitedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    /// Sends this end's close, then lingers: reads and discards until the client closes
    /// too, [`LINGER_BYTES`] are read or [`LINGER_TIME`] has passed.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.linger.is_none() {
            std::task::ready!(Pin::new(&mut this.io).poll_shutdown(cx))?;
            this.timer.as_mut().reset(Instant::now() + LINGER_TIME);
            this.linger = Some(LINGER_BYTES);
        }
        let mut scratch = [0u8; 16 * 1024];
        loop {
            let Some(left) = this.linger.as_mut() else { return Poll::Ready(Ok(())) };
            if *left == 0 || this.timer.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Ok(()));
            }
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut this.io).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if !buf.filled().is_empty() => {
                    *left = left.saturating_sub(buf.filled().len() as u64);
                }
                // The client closed too, or the connection failed: nothing more to wait for.
                Poll::Ready(_) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// What each request learns of its connection: the peer's address and the connection's
/// [`Watch`].
#[derive(Debug, Clone)]
pub struct Peer {
    /// The client's address.
    pub addr: SocketAddr,
    watch: Arc<Watch>,
}

impl Connected<IncomingStream<'_, LimitedListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, LimitedListener>) -> Self {
        Self { addr: *stream.remote_addr(), watch: stream.io().watch.clone() }
    }
}

/// Middleware: marks the request in flight on its connection until its response body is
/// dropped, and hands the handlers the peer's address as `ConnectInfo<SocketAddr>` (what
/// bc-api limits `agents.join` by).
pub async fn track(mut req: Request, next: Next) -> Response {
    let Some(ConnectInfo(peer)) = req.extensions().get::<ConnectInfo<Peer>>().cloned() else {
        return next.run(req).await;
    };
    req.extensions_mut().insert(ConnectInfo(peer.addr));
    peer.watch.begin();
    let in_flight = InFlight(peer.watch);
    let (parts, body) = next.run(req).await.into_parts();
    // The guard rides in the body, so the request ends when hyper has sent (or dropped)
    // the last byte, however long a stream runs.
    let body = body.map_frame(move |frame| {
        let _held = &in_flight;
        frame
    });
    Response::from_parts(parts, axum::body::Body::new(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_deadline_between_requests_none_during_one() {
        let t0 = Instant::now();
        let limits = ConnectionLimits::default();
        let w = Watch::new(limits, t0);
        assert_eq!(w.deadline(), Some(t0 + IDLE_TIMEOUT), "idle from the accept");
        let first_byte = t0 + Duration::from_secs(30);
        w.read(first_byte);
        w.read(first_byte + Duration::from_secs(5));
        assert_eq!(w.deadline(), Some(first_byte + HEADER_TIMEOUT), "headers from the first byte");
        w.begin();
        w.read(first_byte + Duration::from_secs(6));
        assert_eq!(w.deadline(), None, "a request in flight is never cut");
        let done = t0 + Duration::from_secs(3600);
        w.end(done);
        assert_eq!(w.deadline(), Some(done + IDLE_TIMEOUT), "idle again once it ended");
    }
}
