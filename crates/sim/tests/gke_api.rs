//! The GKE face and token endpoint over HTTP on loopback, checked against Google's words
//! (research/gke.md): the JWT-bearer grant, clusters, node pools, operations, serverConfig,
//! the wire (enums as names or numbers, zero values left out), errors, limits and faults.

#[allow(unused_imports)]
use GkeFault as _;
use bc_sim::SimConfig;
use bc_sim::gke_api::routes;
use bc_sim::model::gke::auth::{self, GOOGLE_TOKEN_URL};
use bc_sim::model::gke::{GkeFault, SIM_PROJECT};
use bc_sim::model::routes::key;
use bc_sim::testing::{Reply, Served, bounded, send};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const P: &str = "/v1/projects/bc-sim-project/locations";

async fn served() -> Served {
    Served::start(SimConfig::default()).await
}

async fn call(s: &Served, method: Method, path: &str, token: &str, body: Option<Value>) -> Reply {
    let mut rb = s.http.request(method, s.url(path)).bearer_auth(token);
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    send(rb).await
}

async fn grant(s: &Served, assertion: &str) -> (StatusCode, Value) {
    let form = format!(
        "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={assertion}"
    );
    let rb = s.http.post(s.gke_token_url()).body(form);
    send(rb.header("content-type", "application/x-www-form-urlencoded")).await.parts()
}

fn issued(s: &Served, key_json: &str) -> auth::IssuedKey {
    let key: Value = serde_json::from_str(key_json).unwrap();
    let kid = key["private_key_id"].as_str().unwrap();
    s.sim.state().model().gke_keys().into_iter().find(|k| k.kid == kid).unwrap()
}

fn claims(k: &auth::IssuedKey, now: i64, aud: &str, lifetime: i64) -> Value {
    json!({"iss": k.client_email, "scope": "https://www.googleapis.com/auth/cloud-platform",
           "aud": aud, "iat": now, "exp": now + lifetime})
}

fn now_s(s: &Served) -> i64 {
    bc_domain::ports::Clock::now(&*s.clock).unix_ms() / 1000
}

// ----- token endpoint ------------------------------------------------------------------------

#[tokio::test]
async fn the_token_endpoint_grants_assertions_signed_by_issued_keys_padded_or_not() {
    bounded(async {
        let s = served().await;
        let key_json = s.gke_key();
        let file: Value = serde_json::from_str(&key_json).unwrap();
        assert_eq!(file["type"], "service_account");
        assert_eq!(file["project_id"], SIM_PROJECT);
        assert_eq!(file["token_uri"], s.gke_token_url());
        assert!(file["private_key"].as_str().unwrap().starts_with("-----BEGIN PRIVATE KEY-----"));
        assert!(
            file["client_email"]
                .as_str()
                .unwrap()
                .ends_with("@bc-sim-project.iam.gserviceaccount.com")
        );
        let k = issued(&s, &key_json);
        for (padded, aud) in [(false, GOOGLE_TOKEN_URL.to_owned()), (true, s.gke_token_url())] {
            let jwt = auth::sign(&k, &claims(&k, now_s(&s), &aud, 3600), padded);
            assert_eq!(jwt.split('.').nth(2).unwrap().ends_with('='), padded);
            let (status, body) = grant(&s, &jwt).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            assert_eq!(body["expires_in"], 3600);
            assert_eq!(body["token_type"], "Bearer");
            let token = body["access_token"].as_str().unwrap();
            let r = call(&s, Method::GET, &format!("{P}/-/clusters"), token, None).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        }
        assert_eq!(s.sim.state().model().request_count(&key("POST", routes::TOKEN)), 2);
    })
    .await;
}

#[tokio::test]
async fn the_token_endpoint_refuses_bad_signatures_deleted_keys_bad_times_and_audiences() {
    bounded(async {
        let s = served().await;
        let a = issued(&s, &s.gke_key());
        let b = issued(&s, &s.gke_key());
        let now = now_s(&s);
        // Signed by b's material under a's key id.
        let forged = auth::sign(
            &auth::IssuedKey { kid: a.kid.clone(), ..b.clone() },
            &claims(&a, now, GOOGLE_TOKEN_URL, 3600),
            false,
        );
        let too_long = auth::sign(&a, &claims(&a, now, GOOGLE_TOKEN_URL, 3601), false);
        let expired = auth::sign(&a, &claims(&a, now - 7200, GOOGLE_TOKEN_URL, 3600), false);
        let elsewhere = auth::sign(&a, &claims(&a, now, "https://example.com/token", 3600), false);
        for (jwt, says) in [
            (forged.as_str(), "Invalid JWT Signature."),
            (too_long.as_str(), "short-lived token (60 minutes)"),
            (expired.as_str(), "short-lived token (60 minutes)"),
            (elsewhere.as_str(), "audience"),
            ("not-a-jwt", "Invalid JWT"),
        ] {
            let (status, body) = grant(&s, jwt).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
            assert_eq!(body["error"], "invalid_grant");
            let d = body["error_description"].as_str().unwrap();
            assert!(d.contains(says), "{d}");
        }
        let ok = auth::sign(&b, &claims(&b, now, GOOGLE_TOKEN_URL, 3600), false);
        assert!(s.sim.state().model().gke_delete_key(&b.kid));
        let (status, body) = grant(&s, &ok).await;
        assert_eq!(
            (status, body["error_description"].as_str()),
            (StatusCode::BAD_REQUEST, Some("Invalid JWT Signature."))
        );
    })
    .await;
}

#[tokio::test]
async fn the_api_answers_401_in_googles_envelope_without_or_after_its_token() {
    bounded(async {
        let s = served().await;
        let token = s.gke_access_token().await;
        let path = format!("{P}/us-central1/clusters");
        assert_eq!(call(&s, Method::GET, &path, &token, None).await.status, StatusCode::OK);
        for t in ["ya29.unknown", ""] {
            let (status, body) = call(&s, Method::GET, &path, t, None).await.parts();
            assert_eq!(status, StatusCode::UNAUTHORIZED);
            assert_eq!(body["error"]["status"], "UNAUTHENTICATED");
            assert_eq!(body["error"]["code"], 401);
        }
        s.step(3601);
        assert_eq!(
            call(&s, Method::GET, &path, &token, None).await.status,
            StatusCode::UNAUTHORIZED
        );
    })
    .await;
}
