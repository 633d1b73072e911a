//! Issue 29, item 5 (SPEC §9): a flood of bad joins through a shared proxy never keeps a
//! valid join token's nodes from joining. Failed joins are what an address is limited
//! on; `--trusted-proxy` names the proxies whose `X-Forwarded-For` is believed.

use axum::body::Body;
use axum::http::Request;
use bc_api::client_addr::{TrustedProxies, parse_trusted_proxy};
use serde_json::Value;

use crate::agents::{join_body, proven_body, substrate_cluster};
use crate::common::{Harness, S, sim_config, test_settings};

bc_store::store_suite!(
    a_flood_of_bad_joins_through_a_proxy_leaves_valid_joins_through,
    a_trusted_proxys_forwarded_address_is_what_failures_are_counted_by,
    an_untrusted_proxys_forwarded_address_is_not_believed,
);

/// The proxy every request of these tests comes through.
const PROXY: &str = "127.0.0.1:41000";

/// `agents.join` with `body` over a connection from `peer`, forwarded for `forwarded`.
fn join_via(peer: &str, forwarded: Option<&str>, body: &Value) -> Request<Body> {
    let mut req =
        Request::post("/api/compute/agents/join").header("content-type", "application/json");
    if let Some(f) = forwarded {
        req = req.header("x-forwarded-for", f);
    }
    let mut req = req.body(Body::from(body.to_string())).unwrap();
    let addr: std::net::SocketAddr = peer.parse().unwrap();
    req.extensions_mut().insert(axum::extract::ConnectInfo(addr));
    req
}

/// 200 joins with bad tokens from the proxy's address (as many as the default limit of
/// an address's failures, twice over), then a valid join from behind it: 200.
async fn a_flood_of_bad_joins_through_a_proxy_leaves_valid_joins_through(s: S) {
    // The server's default join limits (the tests' settings turn the others off).
    let h = Harness::with(s, sim_config(), |api| api.settings(test_settings())).await;
    let (token, ours, _) = substrate_cluster(&h, 1).await;
    let mut limited = 0;
    for n in 0..200 {
        let bad = join_body(&format!("bcj_flood_{n}"), &ours[0]);
        let a = h.send(join_via(PROXY, Some("203.0.113.7"), &bad)).await;
        match a.code() {
            "UNAUTHENTICATED" => {}
            "RESOURCE_EXHAUSTED" => limited += 1,
            other => panic!("a bad join answered {other}: {}", a.text),
        }
    }
    assert!(limited > 0, "the flood's address is limited");
    let valid = proven_body(&h, &token, &ours[0]).await;
    let a = h.send(join_via(PROXY, Some("198.51.100.1"), &valid)).await;
    let joined = a.ok();
    h.capture.secret(joined["nodeCredential"].as_str().unwrap());
}

/// A server with an address's failures limited to 3, and these trusted proxies.
async fn limited_to_3(s: S, trusted_proxies: TrustedProxies) -> Harness {
    let limit = |burst| bc_api::ratelimit::RateLimit {
        burst: std::num::NonZeroU32::new(burst).unwrap(),
        replenish_every: std::time::Duration::from_secs(3600),
    };
    let join_rate_limit =
        Some(bc_api::ratelimit::JoinRateLimit { per_token: limit(100), per_address: limit(3) });
    let settings = bc_api::Settings { join_rate_limit, trusted_proxies, ..test_settings() };
    Harness::with(s, sim_config(), |api| api.settings(settings)).await
}

/// A join with a bad token.
fn bad(n: &str) -> Value {
    join_body(&format!("bcj_guess_{n}"), "node-1")
}

/// Three bad joins through the proxy for `forwarded`: each refused, none limited yet.
async fn three_bad_joins(h: &Harness, forwarded: &str) {
    for n in 0..3 {
        h.send(join_via(PROXY, Some(forwarded), &bad(&n.to_string()))).await.err("UNAUTHENTICATED");
    }
}

/// With the proxy trusted, failures are counted by the address it forwards for: the
/// flooding client is limited and another client behind the same proxy is not.
async fn a_trusted_proxys_forwarded_address_is_what_failures_are_counted_by(s: S) {
    let trusted = TrustedProxies::new(vec![parse_trusted_proxy("127.0.0.0/8").unwrap()]);
    let h = limited_to_3(s, trusted).await;
    three_bad_joins(&h, "203.0.113.7").await;
    let over = h.send(join_via(PROXY, Some("203.0.113.7"), &bad("x"))).await;
    assert!(over.err("RESOURCE_EXHAUSTED").contains("address"), "{}", over.text);
    assert!(over.headers.contains_key("retry-after"));
    // Another client of the proxy has its own count; a client writing the flooder's
    // address before its own is counted as its own.
    h.send(join_via(PROXY, Some("198.51.100.2"), &bad("y"))).await.err("UNAUTHENTICATED");
    let spoof = "203.0.113.7, 198.51.100.3";
    h.send(join_via(PROXY, Some(spoof), &bad("z"))).await.err("UNAUTHENTICATED");
    // A peer that is no trusted proxy is counted as itself, whatever it forwards.
    let direct = "192.0.2.9:5000";
    for n in 0..3 {
        let forwarded = format!("198.51.100.{}", 10 + n);
        h.send(join_via(direct, Some(&forwarded), &bad("d"))).await.err("UNAUTHENTICATED");
    }
    h.send(join_via(direct, Some("198.51.100.99"), &bad("d"))).await.err("RESOURCE_EXHAUSTED");
}

/// Without `--trusted-proxy`, `X-Forwarded-For` is anyone's to write: the proxy's own
/// address is what every client behind it is counted as.
async fn an_untrusted_proxys_forwarded_address_is_not_believed(s: S) {
    let h = limited_to_3(s, TrustedProxies::default()).await;
    three_bad_joins(&h, "203.0.113.7").await;
    h.send(join_via(PROXY, Some("198.51.100.2"), &bad("y"))).await.err("RESOURCE_EXHAUSTED");
}
