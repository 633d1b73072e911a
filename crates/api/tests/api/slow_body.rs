//! Issue 20, item 9 (SPEC §13): a request body that arrives slower than the minimum rate
//! (`bc_api::body`'s `BODY_MIN_RATE` after `BODY_GRACE`) is cut off: the client gets
//! `INVALID_ARGUMENT` and the connection is closed, its body unread. Real HTTP on a
//! loopback port; the wait is bounded in count and nothing asserts a duration.

use std::time::Duration;

use bc_store::testing::{Backend, run};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{Harness, S};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_slower_than_the_minimum_rate_is_cut_off() {
    run(Backend::Memory, trickle_a_body).await;
}

async fn trickle_a_body(s: S) {
    let h = Harness::on(s).await;
    let server = h.serve().await;
    let mut conn = TcpStream::connect(server.url.trim_start_matches("http://")).await.unwrap();
    // agents.join reads its body before any credential (the join token is in it).
    let body = json!({"joinToken": "bcj_x".repeat(40), "nodeName": "n", "bcdVersion": "0.1.0",
        "serviceAccountToken": "sa"})
    .to_string();
    let head = format!(
        "POST /api/compute/agents/join HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let mut closed = false;
    // One byte every 2 s: 30 of them, far fewer than the body, far slower than the rate.
    for byte in body.as_bytes().iter().take(30) {
        if conn.write_all(&[*byte]).await.is_err() {
            closed = true;
            break;
        }
        let mut buf = vec![0; 4096];
        match tokio::time::timeout(Duration::from_secs(2), conn.read(&mut buf)).await {
            Err(_) => {}
            Ok(Ok(0)) | Ok(Err(_)) => {
                closed = true;
                break;
            }
            Ok(Ok(n)) => answer.extend_from_slice(&buf[..n]),
        }
    }
    let answer = String::from_utf8_lossy(&answer).into_owned();
    assert!(answer.starts_with("HTTP/1.1 400"), "no refusal of the slow body: {answer:?}");
    assert!(answer.contains("INVALID_ARGUMENT") && answer.contains("too slowly"), "{answer}");
    assert!(closed, "the connection of the slow body is still open");
}
