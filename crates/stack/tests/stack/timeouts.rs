//! Issue 20, item 9 (SPEC §13): the server cuts off a client that takes more than 10 s to
//! send its headers — even one that keeps sending a byte every few seconds — and closes
//! a keep-alive connection left idle, but never one whose request is in flight. Real
//! connections on loopback; every wait is bounded in count, and nothing asserts a
//! duration: only whether the server closed the connection.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use bc_stack::Served;
use bc_stack::conn::{ConnectionLimits, HEADER_TIMEOUT};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A router with a quick route and one that answers after `slow`.
fn router(slow: Duration) -> Router {
    Router::new().route("/", get(|| async { "ok" })).route(
        "/slow",
        get(move || async move {
            tokio::time::sleep(slow).await;
            "slow ok"
        }),
    )
}

/// Serves `router` with `limits` on a loopback port.
async fn serve(router: Router, limits: ConnectionLimits) -> (Served, std::net::SocketAddr) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("loopback");
    let addr = listener.local_addr().expect("address");
    let mut served = Served::default();
    served.http_limited(listener, router, limits);
    (served, addr)
}

/// What a read within `wait` finds: `Some(bytes)` (empty when the server closed the
/// connection), or `None` when nothing came.
async fn read_within(stream: &mut TcpStream, wait: Duration) -> Option<Vec<u8>> {
    let mut buf = vec![0; 4096];
    match tokio::time::timeout(wait, stream.read(&mut buf)).await {
        Err(_) => None,
        Ok(Ok(n)) => Some(buf[..n].to_vec()),
        // A reset is a close too.
        Ok(Err(_)) => Some(Vec::new()),
    }
}

/// Reads one whole small answer (headers and a short body arrive in one read or two).
async fn answer(stream: &mut TcpStream) -> String {
    let mut got = Vec::new();
    for _ in 0..20 {
        match read_within(stream, Duration::from_secs(5)).await {
            Some(bytes) if !bytes.is_empty() => got.extend(bytes),
            _ => break,
        }
        if String::from_utf8_lossy(&got).contains("ok") {
            break;
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test]
async fn a_client_trickling_its_headers_is_disconnected() {
    let (served, addr) = serve(router(Duration::ZERO), ConnectionLimits::default()).await;
    // The server answers a client that sends its request at once.
    let mut prompt = TcpStream::connect(addr).await.expect("connect");
    prompt.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("write");
    assert!(answer(&mut prompt).await.starts_with("HTTP/1.1 200"), "a prompt client is served");

    // One byte of a long header every 2 s: never complete before the limit.
    let request = format!("GET / HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\n\r\n", "a".repeat(200));
    let mut slow = TcpStream::connect(addr).await.expect("connect");
    let gap = Duration::from_secs(2);
    let most = (HEADER_TIMEOUT.as_secs() / gap.as_secs()) as usize * 3;
    let mut closed_after = None;
    for (sent, byte) in request.as_bytes().iter().take(most).enumerate() {
        if slow.write_all(&[*byte]).await.is_err() {
            closed_after = Some(sent);
            break;
        }
        match read_within(&mut slow, gap).await {
            None => {}
            Some(bytes) if bytes.is_empty() => {
                closed_after = Some(sent + 1);
                break;
            }
            Some(bytes) => {
                panic!("an answer to half a header: {}", String::from_utf8_lossy(&bytes))
            }
        }
    }
    let sent = closed_after.expect("the trickling client is still connected");
    assert!(sent < request.len(), "cut off before its headers were complete ({sent} bytes)");
    // Closed on our side too: the server's lingering close of them (LINGER_TIME of reads)
    // ends at once instead of holding the shutdown.
    drop((slow, prompt));
    served.shutdown().await;
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_but_never_one_in_flight() {
    let limits = ConnectionLimits { idle: Duration::from_secs(1), ..ConnectionLimits::default() };
    let (served, addr) = serve(router(Duration::from_secs(3)), limits).await;
    let mut conn = TcpStream::connect(addr).await.expect("connect");
    // A request running longer than the idle limit is answered: it is in flight.
    conn.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("write");
    let first = answer(&mut conn).await;
    assert!(first.starts_with("HTTP/1.1 200") && first.contains("slow ok"), "{first}");
    // The connection is kept alive for the next request...
    conn.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("write");
    assert!(answer(&mut conn).await.starts_with("HTTP/1.1 200"), "kept alive");
    // ...and closed once left idle.
    let mut closed = false;
    for _ in 0..30 {
        match read_within(&mut conn, Duration::from_secs(1)).await {
            None => {}
            Some(bytes) if bytes.is_empty() => {
                closed = true;
                break;
            }
            Some(bytes) => panic!("unasked bytes: {}", String::from_utf8_lossy(&bytes)),
        }
    }
    assert!(closed, "the idle connection is still open after 30 s");
    // Closed on our side too: the server's lingering close ends at once.
    drop(conn);
    served.shutdown().await;
}
