//! The seeded chaos mode and the lost-answer fault, over raw HTTP and through the
//! DigitalOcean adapter: the same seed fails the same calls whoever makes them (one
//! admission rule), a throttle window answers 429 with `retry-after` to every call, and
//! each token's call log counts every call — answered or not — so a client's budget can
//! be checked from outside.

use std::time::Duration;

use bc_domain::ProviderError;
use bc_domain::model::SecretString;
use bc_domain::ports::{Clock as _, ProviderImpl};
use bc_providers::digitalocean::{DigitalOcean, DigitalOceanConfig};
use bc_sim::config::{Chaos, SimConfig};
use bc_sim::model::routes;
use bc_sim::testing::{self, Cloud, Served, TEST_TOKEN};
use reqwest::{Method, StatusCode};

fn chaotic(chaos: Chaos) -> SimConfig {
    SimConfig { chaos: Some(chaos), ..SimConfig::default() }
}

#[tokio::test]
async fn the_same_seed_fails_the_same_calls_whoever_makes_them() {
    let calls = 200; // inside the burst limit of 250 a minute: the clock stands still
    let served = Served::start(chaotic(Chaos::server_errors(0.2, 42))).await;
    let mut http = Vec::new();
    for _ in 0..calls {
        let r = served.get(routes::LOAD_BALANCERS).await;
        assert!(
            r.status == StatusCode::OK || r.status == StatusCode::INTERNAL_SERVER_ERROR,
            "only 200 or 500: {}",
            r.status
        );
        if r.status == StatusCode::INTERNAL_SERVER_ERROR {
            assert_eq!(r.json()["id"], "server_error", "DigitalOcean's error body");
            assert!(r.header("x-request-id").is_some());
        }
        http.push(r.status == StatusCode::OK);
    }
    let failed = http.iter().filter(|ok| !**ok).count();
    assert!((20..=60).contains(&failed), "{failed} of {calls} near 20 %");
    assert_eq!(served.sim.state().model().chaos_counts().server_errors, failed as u64);

    let cloud = Cloud::with_config(chaotic(Chaos::server_errors(0.2, 42))).await;
    let adapter = cloud.provider(TEST_TOKEN);
    let mut seen = Vec::new();
    for _ in 0..calls {
        match adapter.load_balancers().list().await {
            Ok(_) => seen.push(true),
            Err(ProviderError::Transient { message }) => {
                assert!(message.contains("500"), "a 500 classified as transient: {message}");
                seen.push(false);
            }
            Err(e) => panic!("only transient failures: {e:?}"),
        }
    }
    assert_eq!(seen, http, "one rule, one sequence");
}

#[tokio::test]
async fn a_throttle_window_answers_429_with_retry_after_to_every_call() {
    // A window as long as its period: always throttled.
    let chaos = Chaos::server_errors(0.0, 9)
        .with_throttle_bursts(Duration::from_secs(30), Duration::from_secs(30));
    let served = Cloud::with_config(chaotic(chaos)).await;
    for _ in 0..5 {
        let r = served.call(Method::POST, routes::LOAD_BALANCERS, None).await;
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.json()["id"], "too_many_requests");
        let retry: u64 = r.header("retry-after").expect("retry-after").parse().expect("seconds");
        assert!((1..=30).contains(&retry), "retry-after {retry} within the window");
    }
    let adapter = served.provider(TEST_TOKEN);
    let e = adapter.load_balancers().list().await.unwrap_err();
    assert!(matches!(e, ProviderError::RateLimited { .. }), "{e:?}");
    let mut model = served.sim.state().model();
    assert_eq!(model.chaos_counts().throttled, 6);
    assert!(model.list_load_balancers(TEST_TOKEN, served.clock.now()).unwrap().is_empty());
    let peaks = model.call_peaks(TEST_TOKEN).expect("known token");
    assert_eq!((peaks.total, peaks.minute), (6, 6), "throttled calls count for the budget");
    assert_eq!(model.call_peaks("dop_v1_unknown"), None);
}

#[tokio::test]
async fn chaos_turns_off_and_is_off_by_default() {
    let served = Served::start(SimConfig::default()).await;
    for _ in 0..50 {
        assert_eq!(served.get(routes::LOAD_BALANCERS).await.status, StatusCode::OK);
    }
    served.sim.state().model().set_chaos(Some(Chaos::server_errors(1.0, 1)));
    assert_eq!(served.get(routes::LOAD_BALANCERS).await.status, StatusCode::INTERNAL_SERVER_ERROR);
    served.sim.state().model().set_chaos(None);
    assert_eq!(served.get(routes::LOAD_BALANCERS).await.status, StatusCode::OK);
    assert_eq!(served.sim.state().model().call_peaks(TEST_TOKEN).unwrap().total, 52);
}

#[tokio::test]
async fn a_lost_answer_makes_the_change_and_says_nothing() {
    let served = Cloud::start().await;
    let key = routes::key("POST", routes::LOAD_BALANCERS);
    served.sim.state().model().lose_answers(&key, 1);
    let body = serde_json::json!({"name": "lost-1", "region": "nyc1",
        "forwarding_rules": [{"entry_protocol": "http", "entry_port": 80,
                              "target_protocol": "http", "target_port": 8080}]});
    let sent = served
        .http
        .post(served.url(routes::LOAD_BALANCERS))
        .bearer_auth(TEST_TOKEN)
        .json(&body)
        .timeout(Duration::from_millis(500))
        .send()
        .await;
    assert!(sent.is_err_and(|e| e.is_timeout()), "no answer before the client's timeout");
    let listed = served.get(routes::LOAD_BALANCERS).await.json();
    let names: Vec<&str> = listed["load_balancers"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|l| l["name"].as_str())
        .collect();
    assert_eq!(names, ["lost-1"], "the create took effect");

    // Through the adapter (its request timeout cut to the client's above): the change
    // made, a transient error, then answers again.
    let config = DigitalOceanConfig {
        request_timeout: Duration::from_millis(500),
        ..served.adapter_config()
    };
    let token = SecretString::new(TEST_TOKEN);
    let adapter = DigitalOcean::new(config, &token, served.clock.clone()).expect("adapter");
    served.sim.state().model().lose_answers(&key, 1);
    let e = adapter.load_balancers().create(&testing::lb_request("lost-2")).await.unwrap_err();
    assert!(
        matches!(&e, ProviderError::Transient { message } if message.contains("timed out")),
        "{e:?}"
    );
    let made = adapter.load_balancers().create(&testing::lb_request("kept-3")).await;
    assert!(made.is_ok(), "one answer lost, not more: {made:?}");
    let names: Vec<String> =
        adapter.load_balancers().list().await.unwrap().into_iter().map(|l| l.spec.name).collect();
    assert_eq!(names, ["lost-1", "lost-2", "kept-3"]);
}
