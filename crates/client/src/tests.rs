//! The client against a small axum server on loopback that answers as the API would (the
//! end-to-end tests run it against the real server): retries, request ids, paging, error
//! bodies and the event stream's resumption.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use bc_api_types::pools::{self, PoolRef, PoolsCreateInput, PoolsListInput};
use bc_domain::model::{Pool, PoolState};
use bc_domain::policy::PoolPolicy;
use bc_domain::{ErrorCode, ObjectName, PoolId, TenantId, Timestamp};
use futures::{StreamExt, TryStreamExt};
use serde_json::{Value, json};

use crate::{Client, Error, Retry};

/// Serves `app` on a loopback port until the test ends; returns its URL.
async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

fn quick() -> Retry {
    Retry { attempts: 3, max_wait: Duration::from_secs(5), default_wait: Duration::from_millis(10) }
}

fn client(url: &str) -> Client {
    Client::builder(url).token("bc_tok_test").retry(quick()).build().unwrap()
}

fn pool(n: u128) -> Pool {
    let t = Timestamp::from_unix_ms(1_798_000_000_000);
    Pool {
        pool_id: PoolId::generate(1, n),
        tenant_id: TenantId::parse("dev").unwrap(),
        name: ObjectName::parse("web").unwrap(),
        policy: PoolPolicy::default(),
        state: PoolState::Active,
        generation: 1,
        created_at: t,
        updated_at: t,
        archived_at: None,
    }
}

fn pool_ref() -> PoolRef {
    PoolRef { tenant_id: TenantId::parse("dev").unwrap(), pool_id: PoolId::generate(1, 1) }
}

/// Appends `item` to `log`; how many it holds now.
fn push<T>(log: &Mutex<Vec<T>>, item: T) -> usize {
    let mut log = log.lock().unwrap();
    log.push(item);
    log.len()
}

fn error_body(code: &str, field: Option<&str>) -> Value {
    let mut e = json!({ "code": code, "message": "no" });
    if let Some(f) = field {
        e["field"] = json!(f);
    }
    json!({ "error": e })
}

#[tokio::test]
async fn a_429_is_retried_after_its_retry_after_then_answered() {
    let seen = Arc::new(Mutex::new(Vec::<Option<String>>::new()));
    let s = seen.clone();
    let app = Router::new().route(
        "/api/compute/pools/get",
        post(move |headers: HeaderMap| {
            let s = s.clone();
            async move {
                let auth = headers.get("authorization").map(|v| v.to_str().unwrap().to_owned());
                let n = push(&s, auth);
                if n == 1 {
                    let body = error_body("RESOURCE_EXHAUSTED", None).to_string();
                    (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1")], body).into_response()
                } else {
                    axum::Json(pool(1)).into_response()
                }
            }
        }),
    );
    let url = serve(app).await;
    let got = client(&url).call(pools::Get, pool_ref()).await.unwrap();
    assert_eq!(got, pool(1));
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2, "one retry");
    assert!(seen.iter().all(|a| a.as_deref() == Some("Bearer bc_tok_test")));
}

#[tokio::test]
async fn retries_are_bounded_and_end_with_the_typed_error() {
    let count = Arc::new(Mutex::new(0u32));
    let c = count.clone();
    let app = Router::new().route(
        "/api/compute/pools/get",
        post(move || {
            let c = c.clone();
            async move {
                *c.lock().unwrap() += 1;
                (StatusCode::SERVICE_UNAVAILABLE, error_body("UNAVAILABLE", None).to_string())
            }
        }),
    );
    let url = serve(app).await;
    let e = client(&url).call(pools::Get, pool_ref()).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Unavailable));
    assert_eq!(*count.lock().unwrap(), quick().attempts);
}

#[tokio::test]
async fn a_retry_after_beyond_the_longest_wait_is_not_waited_for() {
    let app = Router::new().route(
        "/api/compute/pools/get",
        post(|| async {
            let body = error_body("RESOURCE_EXHAUSTED", None).to_string();
            (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "3600")], body)
        }),
    );
    let url = serve(app).await;
    let Error::Api(e) = client(&url).call(pools::Get, pool_ref()).await.unwrap_err() else {
        panic!("an API error")
    };
    assert_eq!(e.code, ErrorCode::ResourceExhausted);
    assert_eq!(e.retry_after, Some(Duration::from_secs(3600)));
}

#[tokio::test]
async fn an_input_error_names_its_field_and_is_not_retried() {
    let count = Arc::new(Mutex::new(0u32));
    let c = count.clone();
    let app = Router::new().route(
        "/api/compute/pools/get",
        post(move || {
            let c = c.clone();
            async move {
                *c.lock().unwrap() += 1;
                let body = error_body("INVALID_ARGUMENT", Some("poolId")).to_string();
                (StatusCode::BAD_REQUEST, body)
            }
        }),
    );
    let url = serve(app).await;
    let e = client(&url).call(pools::Get, pool_ref()).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::InvalidArgument));
    assert_eq!(e.field(), Some("poolId"));
    assert_eq!(e.to_string(), "INVALID_ARGUMENT: no (field poolId)");
    assert_eq!(*count.lock().unwrap(), 1);
}

#[tokio::test]
async fn a_create_gets_one_request_id_kept_across_its_retries() {
    let bodies = Arc::new(Mutex::new(Vec::<Value>::new()));
    let b = bodies.clone();
    let app = Router::new().route(
        "/api/compute/pools/create",
        post(move |axum::Json(body): axum::Json<Value>| {
            let b = b.clone();
            async move {
                let n = push(&b, body);
                if n == 1 {
                    (StatusCode::SERVICE_UNAVAILABLE, error_body("UNAVAILABLE", None).to_string())
                        .into_response()
                } else {
                    axum::Json(pool(1)).into_response()
                }
            }
        }),
    );
    let url = serve(app).await;
    let input = PoolsCreateInput {
        tenant_id: TenantId::parse("dev").unwrap(),
        name: ObjectName::parse("web").unwrap(),
        policy: PoolPolicy::default(),
        request_id: None,
    };
    client(&url).call(pools::Create, input).await.unwrap();
    let bodies = bodies.lock().unwrap();
    assert_eq!(bodies.len(), 2);
    let id = bodies[0]["requestId"].as_str().expect("a request id was added");
    assert!(id.starts_with("bc-"), "{id}");
    assert_eq!(bodies[1]["requestId"], bodies[0]["requestId"], "the retry repeats it");
    assert!(bodies[0].get("pageToken").is_none());
}

#[tokio::test]
async fn list_streams_every_page_and_unset_options_are_left_out() {
    let bodies = Arc::new(Mutex::new(Vec::<Value>::new()));
    let b = bodies.clone();
    let app = Router::new().route(
        "/api/compute/pools/list",
        post(move |axum::Json(body): axum::Json<Value>| {
            let b = b.clone();
            async move {
                push(&b, body.clone());
                let answer = match body.get("pageToken").and_then(Value::as_str) {
                    None => json!({ "pools": [pool(1), pool(2)], "nextPageToken": "p2" }),
                    Some("p2") => json!({ "pools": [pool(3)], "nextPageToken": "p3" }),
                    Some(_) => json!({ "pools": [] }),
                };
                axum::Json(answer)
            }
        }),
    );
    let url = serve(app).await;
    let input = PoolsListInput {
        tenant_id: TenantId::parse("dev").unwrap(),
        include_archived: false,
        page_size: None,
        page_token: None,
    };
    let all: Vec<Pool> = client(&url).list(pools::List, input).try_collect().await.unwrap();
    assert_eq!(all, vec![pool(1), pool(2), pool(3)]);
    let bodies = bodies.lock().unwrap();
    assert_eq!(bodies.len(), 3);
    assert_eq!(bodies[0], json!({ "tenantId": "dev", "includeArchived": false }));
    assert_eq!(bodies[2]["pageToken"], "p3");
}

fn event(seq: u64) -> Value {
    json!({
        "eventId": format!("evt_01jq3k5v9x8y7z6w5v4t3s2r{seq:02}"),
        "seq": seq, "tenantId": "dev", "subject": "compute.pools.x",
        "type": "kubernetes.substrate.ready", "time": "2026-12-02T12:57:15.123Z", "data": {}
    })
}

#[tokio::test]
async fn the_event_stream_resumes_with_last_event_id_after_a_dropped_connection() {
    let seen = Arc::new(Mutex::new(Vec::<Option<String>>::new()));
    let s = seen.clone();
    let app = Router::new().route(
        "/api/compute/events/stream",
        get(move |headers: HeaderMap| {
            let s = s.clone();
            async move {
                let last = headers.get("last-event-id").map(|v| v.to_str().unwrap().to_owned());
                push(&s, last.clone());
                // Each connection sends the events after Last-Event-ID, at most two, then
                // drops: the client must come back for the rest.
                let after: u64 = last.map(|l| l.parse().unwrap()).unwrap_or(0);
                let body: String = (after + 1..=(after + 2).min(5))
                    .map(|seq| format!(": keep-alive\n\nid: {seq}\ndata: {}\n\n", event(seq)))
                    .collect();
                ([("content-type", "text/event-stream")], body)
            }
        }),
    );
    let url = serve(app).await;
    let query = bc_api_types::events::StreamQuery {
        tenant_id: TenantId::parse("dev").unwrap(),
        subject: None,
    };
    let events: Vec<u64> =
        client(&url).events(query, None).take(5).map(|e| e.unwrap().seq).collect().await;
    assert_eq!(events, vec![1, 2, 3, 4, 5], "each once, in order");
    let seen = seen.lock().unwrap();
    assert_eq!(seen[..3], [None, Some("2".to_owned()), Some("4".to_owned())]);
}

#[tokio::test]
async fn the_event_stream_ends_on_a_refusal() {
    let app = Router::new().route(
        "/api/compute/events/stream",
        get(|| async {
            (StatusCode::UNAUTHORIZED, error_body("UNAUTHENTICATED", None).to_string())
        }),
    );
    let url = serve(app).await;
    let query = bc_api_types::events::StreamQuery {
        tenant_id: TenantId::parse("dev").unwrap(),
        subject: None,
    };
    let all: Vec<_> = client(&url).events(query, None).collect().await;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].as_ref().unwrap_err().code(), Some(ErrorCode::Unauthenticated));
}

#[tokio::test]
async fn the_event_stream_keeps_a_character_split_between_two_reads() {
    let mut data = event(1);
    data["data"] = json!({ "message": "café ☕" });
    let frame = format!("id: 1\ndata: {data}\n\n").into_bytes();
    // Cut inside the ☕'s three bytes; the halves go out apart, so they are read apart.
    let cut = frame.windows(3).position(|w| w == "☕".as_bytes()).unwrap() + 1;
    let (first, rest) = (frame[..cut].to_vec(), frame[cut..].to_vec());
    let app = Router::new().route(
        "/api/compute/events/stream",
        get(move || {
            let (first, rest) = (first.clone(), rest.clone());
            async move {
                let halves = futures::stream::iter([first, rest]).then(|half| async move {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Ok::<_, std::io::Error>(half)
                });
                ([("content-type", "text/event-stream")], axum::body::Body::from_stream(halves))
            }
        }),
    );
    let url = serve(app).await;
    let query = bc_api_types::events::StreamQuery {
        tenant_id: TenantId::parse("dev").unwrap(),
        subject: None,
    };
    let got = client(&url).events(query, None).next().await.unwrap().unwrap();
    assert_eq!(got.data["message"], "café ☕");
}
