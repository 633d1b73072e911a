//! `bookings.*`, `billing.usage`, `events.list` and the event stream (SPEC §10, §12).

use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use bc_api::methods::examples as ex;
use bc_domain::model::{BillingInterval, Role, Scope, UpgradeWait};
use bc_domain::ports::{UnitOfWork, WorkKind, Write};
use bc_domain::{PoolId, Timestamp};
use bc_store::testing as rows;
use http_body_util::BodyExt;
use serde_json::{Value, json};

use crate::common::repos::*;
use crate::common::{
    Harness, S, example, grant, id, sim_config, tenant, test_settings, with, without,
};

bc_store::store_suite!(
    bookings_are_refused_while_a_drain_waits,
    bookings_end_and_are_listed_by_their_state_now,
    billing_usage_is_exact_to_the_second_and_clipped,
    events_are_listed_by_subject_after_a_seq,
    the_stream_sends_events_in_order_and_resumes_after_the_last_id,
    the_stream_is_authorized_like_events_list,
    the_stream_ends_within_seconds_of_its_tokens_revocation,
    a_token_holds_at_most_eight_open_streams,
    the_stream_ends_when_the_server_shuts_down,
);

async fn set_upgrade(h: &Harness, upgrade: Option<UpgradeWait>) {
    let pool: PoolId = id(ex::POOL);
    let mut row = h.store.substrate_get_any(&pool).await.unwrap().unwrap();
    row.upgrade = upgrade;
    h.store.commit(UnitOfWork::new().write(Write::PutSubstrate(row))).await.unwrap();
}

async fn bookings_are_refused_while_a_drain_waits(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let body = without(&example("bookings.create"), "requestId");
    set_upgrade(&h, Some(UpgradeWait { version: "1.33.1-do.0".into(), since: h.now() })).await;
    let message = h.call("bookings.create", Some(&t), &body).await.err("FAILED_PRECONDITION");
    assert!(message.contains("1.33.1-do.0"), "the refusal names the upgrade: {message}");
    set_upgrade(&h, None).await;
    let booking = h.call("bookings.create", Some(&t), &body).await.ok();
    assert_eq!(booking["state"], "active");
    assert_eq!(booking["endsAt"], "2026-12-02T18:00:00.000Z");
    let past = with(&body, "endsAt", json!("2026-12-01T00:00:00.000Z"));
    let a = h.call("bookings.create", Some(&t), &past).await;
    assert_eq!((a.code(), a.field()), ("INVALID_ARGUMENT", Some("endsAt")));
}

async fn bookings_end_and_are_listed_by_their_state_now(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let body = without(&example("bookings.create"), "requestId");
    let timed = h.call("bookings.create", Some(&t), &body).await.ok();
    let end = json!({ "tenantId": ex::TENANT, "bookingId": ex::BOOKING });
    let ended = h.call("bookings.end", Some(&t), &end).await.ok();
    assert_eq!(ended["state"], "ended");
    assert!(ended["endedAt"].is_string());
    assert!(h.work_due_now(WorkKind::Substrates, ex::POOL).await, "a drain may go on");
    assert_eq!(h.call("bookings.end", Some(&t), &end).await.ok(), ended, "idempotent");
    let list = |state: &str| json!({ "tenantId": ex::TENANT, "poolId": ex::POOL, "state": state });
    let ids = |v: Value| -> Vec<String> {
        v["bookings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["bookingId"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        ids(h.call("bookings.list", Some(&t), &list("active")).await.ok()),
        [timed["bookingId"].as_str().unwrap()]
    );
    // Past its endsAt a booking counts as ended, and shows so.
    h.clock.advance(time::Duration::hours(7));
    assert!(ids(h.call("bookings.list", Some(&t), &list("active")).await.ok()).is_empty());
    let all = h.call("bookings.list", Some(&t), &list("ended")).await.ok();
    assert_eq!(all["bookings"].as_array().unwrap().len(), 2);
    assert!(all["bookings"].as_array().unwrap().iter().all(|b| b["state"] == "ended"));
}

async fn billing_usage_is_exact_to_the_second_and_clipped(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let at = |iso: &str| Timestamp::parse_rfc3339(iso).unwrap();
    let interval = |resource: &str, start: &str, end: Option<&str>| BillingInterval {
        meter: "vps.load-balancer.hours".into(),
        resource: resource.into(),
        tenant_id: tenant(ex::TENANT),
        pool_id: id(ex::POOL),
        start: at(start),
        end: end.map(at),
    };
    let uow = UnitOfWork::new()
        .write(Write::OpenBilling(interval(ex::LOAD_BALANCER, "2026-11-30T23:00:00Z", None)))
        .write(Write::CloseBilling {
            meter: "vps.load-balancer.hours".into(),
            resource: ex::LOAD_BALANCER.into(),
            at: at("2026-12-01T01:30:00.999Z"),
        })
        .write(Write::OpenBilling(interval(crate::common::OTHER_LB, "2026-12-01T12:00:00Z", None)));
    h.store.commit(uow).await.unwrap();
    let body = json!({ "tenantId": ex::TENANT, "from": "2026-12-01T00:00:00Z", "to": "2026-12-02T00:00:00Z" });
    let usage = h.call("billing.usage", Some(&t), &body).await.ok();
    assert_eq!(
        usage["lines"],
        json!([
            { "meter": "vps.load-balancer.hours", "resource": ex::LOAD_BALANCER, "poolId": ex::POOL,
              "quantity": "1.500000", "from": "2026-12-01T00:00:00.000Z", "to": "2026-12-01T01:30:00.000Z" },
            { "meter": "vps.load-balancer.hours", "resource": crate::common::OTHER_LB, "poolId": ex::POOL,
              "quantity": "12.000000", "from": "2026-12-01T12:00:00.000Z", "to": "2026-12-02T00:00:00.000Z" }
        ])
    );
    let other_meter = with(&body, "meter", json!("vps.droplet.hours"));
    assert_eq!(h.call("billing.usage", Some(&t), &other_meter).await.ok()["lines"], json!([]));
}

async fn write_events(h: &Harness, subjects: &[&str]) {
    let mut uow = UnitOfWork::new();
    for subject in subjects {
        uow = uow.event(rows::event(&tenant(ex::TENANT), subject));
    }
    uow = uow.event(rows::event(&tenant(crate::common::OTHER_TENANT), "compute.pools.theirs"));
    h.store.commit(uow).await.unwrap();
}

/// The example tenant's events the fixture wrote — its pool's substrate, `pending` as
/// `pools.create` writes it, then `provisioning` as the substrate reconciler observes it
/// — as `events.list` shows them.
async fn fixture_events(h: &Harness, t: &str) -> Vec<Value> {
    let all = h.call("events.list", Some(t), &json!({ "tenantId": ex::TENANT })).await.ok();
    let events = all["events"].as_array().unwrap().clone();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(kinds, ["kubernetes.substrate.pending", "kubernetes.substrate.provisioning"]);
    events
}

/// The `seq`s of `events`.
fn seqs(events: &[Value]) -> Vec<u64> {
    events.iter().map(|e| e["seq"].as_u64().expect("a seq")).collect()
}

async fn events_are_listed_by_subject_after_a_seq(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let fixture = fixture_events(&h, &t).await;
    write_events(&h, &["compute.pools.a", "compute.pools.b", "compute.pools.a"]).await;
    let all = h.call("events.list", Some(&t), &json!({ "tenantId": ex::TENANT })).await.ok();
    let events = all["events"].as_array().unwrap().clone();
    assert_eq!(events[..fixture.len()], fixture[..], "the fixture's come first");
    let events = events[fixture.len()..].to_vec();
    assert_eq!(events.len(), 3, "only the tenant's");
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let keys: Vec<&str> = events[0].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["eventId", "seq", "tenantId", "subject", "type", "time", "data"]);
    let a = json!({ "tenantId": ex::TENANT, "subject": "compute.pools.a", "afterSeq": seqs[0] });
    let got = h.call("events.list", Some(&t), &a).await.ok();
    assert_eq!(got["events"].as_array().unwrap().len(), 1);
    assert_eq!(got["events"][0]["seq"], seqs[2]);
    let one = json!({ "tenantId": ex::TENANT, "limit": 1 });
    assert_eq!(
        h.call("events.list", Some(&t), &one).await.ok()["events"].as_array().unwrap().len(),
        1
    );
}

/// Opens the stream with `token`, resuming after `last` if given.
async fn open(
    h: &Harness,
    token: &str,
    query: &str,
    last: Option<u64>,
) -> axum::response::Response {
    let mut req = Request::get(format!("/api/compute/events/stream?{query}"))
        .header("authorization", format!("Bearer {token}"));
    if let Some(seq) = last {
        req = req.header("last-event-id", seq.to_string());
    }
    h.open(req.body(Body::empty()).unwrap()).await
}

/// A stream's events as they arrive.
struct Events {
    body: Body,
    text: String,
    taken: usize,
}

impl Events {
    fn of(resp: axum::response::Response) -> Self {
        Self { body: resp.into_body(), text: String::new(), taken: 0 }
    }

    /// The next `n` events (bounded in time: a missing event fails the test).
    async fn next(&mut self, n: usize) -> Vec<Value> {
        let read = async {
            loop {
                let events: Vec<Value> = self
                    .text
                    .split("\n\n")
                    .filter_map(|block| block.lines().find_map(|l| l.strip_prefix("data: ")))
                    .filter_map(|d| serde_json::from_str(d).ok())
                    .collect();
                if events.len() >= self.taken + n {
                    let new = events[self.taken..self.taken + n].to_vec();
                    self.taken += n;
                    return new;
                }
                let frame =
                    self.body.frame().await.expect("the stream stays open").expect("a frame");
                if let Ok(data) = frame.into_data() {
                    self.text.push_str(&String::from_utf8_lossy(&data));
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(10), read).await.expect("the events arrived")
    }
}

async fn the_stream_sends_events_in_order_and_resumes_after_the_last_id(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let fixture = fixture_events(&h, &t).await;
    write_events(&h, &["compute.pools.a", "compute.pools.b"]).await;
    let resp = open(&h, &t, "tenantId=acme", None).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut stream = Events::of(resp);
    // Opened without a last id, it starts at the tenant's first event.
    let from_start = stream.next(fixture.len() + 2).await;
    assert_eq!(seqs(&from_start[..fixture.len()]), seqs(&fixture));
    let first = from_start[fixture.len()..].to_vec();
    assert_eq!(
        (first[0]["subject"].as_str(), first[1]["subject"].as_str()),
        (Some("compute.pools.a"), Some("compute.pools.b"))
    );
    // A new event wakes the stream (the in-process relay pokes the events wake-up).
    write_events(&h, &["compute.pools.c"]).await;
    h.events.notify_waiters();
    let third = stream.next(1).await;
    assert_eq!(third[0]["subject"], "compute.pools.c");
    drop(stream);
    // Reconnecting with the last id seen misses nothing and repeats nothing.
    let last = first[1]["seq"].as_u64().unwrap();
    let mut again = Events::of(open(&h, &t, "tenantId=acme", Some(last)).await);
    assert_eq!(again.next(1).await[0]["seq"], third[0]["seq"]);
    // A subject narrows it; an event written by another process (no poke) arrives by
    // polling.
    let only_b = open(&h, &t, "tenantId=acme&subject=compute.pools.b", None).await;
    let mut only_b = Events::of(only_b);
    assert_eq!(only_b.next(1).await[0]["subject"], "compute.pools.b");
    write_events(&h, &["compute.pools.a", "compute.pools.b"]).await;
    let later = only_b.next(1).await;
    assert_eq!(later[0]["subject"], "compute.pools.b");
    assert!(later[0]["seq"].as_u64() > first[1]["seq"].as_u64());
}

async fn the_stream_is_authorized_like_events_list(s: S) {
    let h = Harness::on(s).await;
    let viewer = h.token(vec![grant(Role::Viewer, crate::common::acme())]).await;
    let pool_only = h.token(vec![grant(Role::Viewer, Scope::Pool(id(ex::POOL)))]).await;
    let theirs = h.token(vec![grant(Role::Viewer, Scope::Tenant(tenant("globex")))]).await;
    let req = Request::get("/api/compute/events/stream?tenantId=acme").body(Body::empty()).unwrap();
    assert_eq!(h.open(req).await.status(), 401);
    assert_eq!(open(&h, &theirs, "tenantId=acme", None).await.status(), 403);
    assert_eq!(open(&h, &pool_only, "tenantId=acme", None).await.status(), 403);
    assert_eq!(open(&h, &viewer, "tenantId=acme", None).await.status(), 200);
    for (query, last) in [
        ("tenantId=acme", Some("x")),
        ("subject=a", None),
        ("tenantId=acme&subject=a%20b", None),
        ("tenantId=acme&x=1", None),
    ] {
        let mut req = Request::get(format!("/api/compute/events/stream?{query}"))
            .header("authorization", format!("Bearer {viewer}"));
        if let Some(l) = last {
            req = req.header("last-event-id", l);
        }
        let a = h.send(req.body(Body::empty()).unwrap()).await;
        assert_eq!((a.status.as_u16(), a.code()), (400, "INVALID_ARGUMENT"), "{query}: {}", a.text);
    }
}

/// Issue 20, item 2: the stream checks its token again while it runs (SPEC §12: within 5
/// seconds of the revocation it ends), not once at the start.
async fn the_stream_ends_within_seconds_of_its_tokens_revocation(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let n = fixture_events(&h, &t).await.len();
    write_events(&h, &["compute.pools.a"]).await;
    let mut stream = Events::of(open(&h, &t, "tenantId=acme", None).await);
    assert_eq!(stream.next(n + 1).await[n]["subject"], "compute.pools.a");
    let hash = bc_api::auth::api_token_lookup_hash(&t).expect("a token");
    let token_id = h.store.api_token_find(&hash).await.unwrap().expect("stored").token_id;
    let revoke = Write::RevokeApiToken { token_id, at: h.now() };
    h.store.commit(UnitOfWork::new().write(revoke)).await.unwrap();
    // Bounded: the re-check runs every 5 s, so the body ends well within this.
    let ended = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(frame) = stream.body.frame().await {
            frame.expect("a frame");
        }
    })
    .await;
    assert!(ended.is_ok(), "the stream of a revoked token is still open after 20 s");
    // And it opens no new one.
    assert_eq!(open(&h, &t, "tenantId=acme", None).await.status(), 401);
}

/// Issue 20, item 2: a token holds at most 8 open streams; the 9th is RESOURCE_EXHAUSTED
/// and closing one frees its place.
async fn a_token_holds_at_most_eight_open_streams(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let other = h.operator().await;
    let mut open_streams = Vec::new();
    for _ in 0..8 {
        let resp = open(&h, &t, "tenantId=acme", None).await;
        assert_eq!(resp.status(), 200);
        open_streams.push(resp);
    }
    let ninth = open(&h, &t, "tenantId=acme", None).await;
    assert_eq!(ninth.status(), 429);
    let body = ninth.into_body().collect().await.unwrap().to_bytes();
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["error"]["code"], "RESOURCE_EXHAUSTED");
    assert_eq!(open(&h, &other, "tenantId=acme", None).await.status(), 200, "per token");
    open_streams.pop();
    assert_eq!(open(&h, &t, "tenantId=acme", None).await.status(), 200, "a place was freed");
}

/// A graceful shutdown waits for every response to end, and a stream's never would: the
/// streams end when the server's shutdown token is cancelled, so a console (or `bc events
/// tail`) left open does not keep `bc-api` from stopping.
async fn the_stream_ends_when_the_server_shuts_down(s: S) {
    let stop = tokio_util::sync::CancellationToken::new();
    let token = stop.clone();
    let h =
        Harness::with(s, sim_config(), |api| api.settings(test_settings()).shutdown(token)).await;
    let t = h.operator().await;
    let n = fixture_events(&h, &t).await.len();
    write_events(&h, &["compute.pools.a"]).await;
    let mut stream = Events::of(open(&h, &t, "tenantId=acme", None).await);
    assert_eq!(stream.next(n + 1).await[n]["subject"], "compute.pools.a");
    stop.cancel();
    let ended = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(frame) = stream.body.frame().await {
            frame.expect("a frame");
        }
    })
    .await;
    assert!(ended.is_ok(), "the stream is still open 20 s after the shutdown began");
}
