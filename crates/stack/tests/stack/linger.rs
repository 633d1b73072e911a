//! Issue 29, item 9: a body over the limit is answered `413`, and a client that sends
//! its whole body before it reads anything (as Python's `urllib` does) reads that `413`
//! — the server lingers on closing, reading what the client still sends, instead of
//! resetting the connection under the answer.
//!
//! Invariants: loopback only; the client's reads and writes have timeouts; the stack is
//! stopped.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use bc_stack::dev::{DEV_TENANT, DevStack};
use bc_stack::testing::{self, Backend, Scratch};

/// A body of 16 MiB: more than the limit, and more than loopback's socket buffers hold,
/// so the client is still writing when the server has answered.
const BODY: usize = 16 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_sends_its_whole_body_first_reads_the_413() {
    let scratch = Scratch::new("bc-linger");
    let options = testing::options(Backend::Sqlite, scratch.path()).await.expect("sqlite");
    let stack = DevStack::start(options).await.expect("dev stack");
    let addr = stack.api_url.trim_start_matches("http://").to_owned();
    let token = stack.token.clone();
    let answer = tokio::task::spawn_blocking(move || {
        let mut conn = TcpStream::connect(&addr).expect("connect");
        conn.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let head = format!(
            "POST /api/compute/pools/list HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {BODY}\r\n\r\n"
        );
        conn.write_all(head.as_bytes()).expect("headers");
        // {"tenantId":"dev","x":"aaaa…"} padded to BODY bytes, all sent before reading.
        let start = format!("{{\"tenantId\":\"{DEV_TENANT}\",\"x\":\"");
        let mut body = start.into_bytes();
        body.resize(BODY - 2, b'a');
        body.extend_from_slice(b"\"}");
        conn.write_all(&body).map_err(|e| format!("sending the body: {e}"))?;
        let mut answer = Vec::new();
        conn.read_to_end(&mut answer).map_err(|e| format!("reading the answer: {e}"))?;
        Ok::<_, String>(String::from_utf8_lossy(&answer).into_owned())
    })
    .await
    .expect("client");
    let answer = answer.expect("the client sent its body and read an answer, not a reset");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("PAYLOAD_TOO_LARGE"), "{answer}");
    stack.stop().await;
}
