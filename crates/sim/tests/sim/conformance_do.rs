//! Black-box conformance of the served DigitalOcean face against
//! research/digitalocean.md, one test per documented fact, driven over loopback with a
//! plain reqwest client (and raw TCP where header spelling matters), time stepped on a
//! `ManualClock`.
//!
//! The reference is the document, never what our adapter sends: each test names the
//! section it checks, so a failing test points at the line of the document it breaks.

use bc_sim::SimConfig;
use bc_sim::config::RateLimits;
use bc_sim::testing::{self, Reply, Served as H, TEST_TOKEN};
use reqwest::Method;
use serde_json::{Value, json};
use testing::{cluster_body, lb_body, rule_body as rule};

/// The most clock steps any wait below takes (each of a few seconds), so a broken
/// transition fails the test instead of hanging it.
const MAX_STEPS: usize = 60;

/// The waits of these tests, on the shared served simulator.
trait Waits {
    async fn create_cluster(&self, body: Value) -> Value;
    async fn running_cluster(&self, body: Value) -> Value;
    async fn wait_cluster(&self, id: &str, done: impl Fn(&Value) -> bool) -> Value;
    async fn running_cluster_wait(&self, id: &str) -> Value;
    async fn create_lb(&self, body: Value) -> Value;
    async fn active_lb(&self, body: Value) -> Value;
}

impl Waits for H {
    async fn create_cluster(&self, body: Value) -> Value {
        let r = self.call(Method::POST, "/v2/kubernetes/clusters", Some(body)).await;
        assert_eq!(r.status, 201, "{}", r.text);
        r.json()["kubernetes_cluster"].clone()
    }

    /// Creates a cluster and steps the clock until it and all its nodes run.
    async fn running_cluster(&self, body: Value) -> Value {
        let id = self.create_cluster(body).await["id"].as_str().expect("id").to_owned();
        self.wait_cluster(&id, |c| {
            c["status"]["state"] == "running"
                && c["node_pools"].as_array().is_some_and(|ps| {
                    ps.iter().all(|p| {
                        p["nodes"]
                            .as_array()
                            .is_some_and(|ns| ns.iter().all(|n| n["status"]["state"] == "running"))
                    })
                })
        })
        .await
    }

    /// Steps the clock (bounded) until the cluster satisfies `done`; returns it.
    async fn wait_cluster(&self, id: &str, done: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..MAX_STEPS {
            let r = self.get(&format!("/v2/kubernetes/clusters/{id}")).await;
            assert_eq!(r.status, 200, "{}", r.text);
            let c = r.json()["kubernetes_cluster"].clone();
            if done(&c) {
                return c;
            }
            self.step(5);
        }
        panic!("cluster {id} never reached the awaited state in {MAX_STEPS} steps");
    }

    async fn running_cluster_wait(&self, id: &str) -> Value {
        self.wait_cluster(id, |c| c["status"]["state"] == "running").await
    }

    async fn create_lb(&self, body: Value) -> Value {
        let r = self.call(Method::POST, "/v2/load_balancers", Some(body)).await;
        assert_eq!(r.status, 202, "{}", r.text);
        r.json()["load_balancer"].clone()
    }

    /// Creates a load balancer and steps past its provisioning (and busy) window.
    async fn active_lb(&self, body: Value) -> Value {
        let id = self.create_lb(body).await["id"].as_str().expect("id").to_owned();
        for _ in 0..MAX_STEPS {
            self.step(5);
            let l =
                self.get(&format!("/v2/load_balancers/{id}")).await.json()["load_balancer"].clone();
            if l["status"] == "active" {
                return l;
            }
        }
        panic!("load balancer {id} never became active");
    }
}

fn global_body(name: &str) -> Value {
    json!({
        "name": name, "type": "GLOBAL",
        "glb_settings": {"target_protocol": "http", "target_port": 80},
        "domains": [{"name": "example.com", "is_managed": true}],
        "droplet_ids": [3164444],
    })
}

/// The error body of §1: `{id, message, request_id}` with `id` matching the status.
fn assert_error(r: &Reply, status: u16, id: &str) {
    assert_eq!(r.status, status, "{}", r.text);
    let b = r.json();
    assert_eq!(b["id"], id, "{b}");
    assert!(b["message"].as_str().is_some_and(|m| !m.is_empty()), "{b}");
    assert!(b["request_id"].as_str().is_some_and(|m| !m.is_empty()), "{b}");
}

fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12])
        && parts.iter().all(|p| p.chars().all(|c| c.is_ascii_hexdigit()))
}

fn is_rfc3339_utc(s: &str) -> bool {
    s.ends_with('Z')
        && time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).is_ok()
}

fn str_of<'a>(v: &'a Value, what: &str) -> &'a str {
    v.as_str().unwrap_or_else(|| panic!("{what} is not a string: {v}"))
}

// ----- §0 conventions -----------------------------------------------------------------------

/// §0: one object → singular key, a collection → plural key (clusters, pools, LBs).
#[tokio::test]
async fn envelopes_are_singular_for_one_object_and_plural_for_collections() {
    let h = H::start(SimConfig::default()).await;
    let c = h.create_cluster(cluster_body("env")).await;
    let id = str_of(&c["id"], "id");
    assert!(
        h.get(&format!("/v2/kubernetes/clusters/{id}")).await.json()["kubernetes_cluster"]
            .is_object()
    );
    assert!(h.get("/v2/kubernetes/clusters").await.json()["kubernetes_clusters"].is_array());
    let pools = h.get(&format!("/v2/kubernetes/clusters/{id}/node_pools")).await.json();
    assert!(pools["node_pools"].is_array(), "{pools}");
    let pid = str_of(&pools["node_pools"][0]["id"], "pool id");
    let p = h.get(&format!("/v2/kubernetes/clusters/{id}/node_pools/{pid}")).await.json();
    assert!(p["node_pool"].is_object(), "{p}");
    let l = h.create_lb(lb_body("env-lb")).await;
    let lid = str_of(&l["id"], "lb id");
    assert!(h.get(&format!("/v2/load_balancers/{lid}")).await.json()["load_balancer"].is_object());
    assert!(h.get("/v2/load_balancers").await.json()["load_balancers"].is_array());
}

/// §0/§4.4: `/credentials` and `GET …/destroy_with_associated_resources` are bare objects.
#[tokio::test]
async fn credentials_and_associated_resources_are_bare_objects() {
    let h = H::start(SimConfig::default()).await;
    let c = h.running_cluster(cluster_body("bare")).await;
    let id = str_of(&c["id"], "id");
    let cred = h.get(&format!("/v2/kubernetes/clusters/{id}/credentials")).await;
    assert_eq!(cred.status, 200, "{}", cred.text);
    let cred = cred.json();
    for k in ["server", "certificate_authority_data", "token", "expires_at"] {
        assert!(cred.get(k).is_some(), "credentials lack {k}: {cred}");
    }
    let assoc =
        h.get(&format!("/v2/kubernetes/clusters/{id}/destroy_with_associated_resources")).await;
    assert_eq!(assoc.status, 200, "{}", assoc.text);
    let assoc = assoc.json();
    for k in ["load_balancers", "volumes", "volume_snapshots"] {
        assert!(assoc[k].is_array(), "associated resources lack {k}: {assoc}");
    }
}

/// §0/§4.4: `/kubeconfig` is YAML text served as `application/yaml`, context
/// `do-<region>-<name>`, server = the cluster endpoint, an `-admin` user with a token.
#[tokio::test]
async fn kubeconfig_is_yaml_served_as_application_yaml() {
    let h = H::start(SimConfig::default()).await;
    let c = h.running_cluster(cluster_body("yaml")).await;
    let id = str_of(&c["id"], "id");
    let r = h.get(&format!("/v2/kubernetes/clusters/{id}/kubeconfig")).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.header("content-type").is_some_and(|t| t.starts_with("application/yaml")));
    assert!(serde_json::from_str::<Value>(&r.text).is_err(), "kubeconfig must be YAML, not JSON");
    assert!(r.text.contains("kind: Config"), "{}", r.text);
    assert!(r.text.contains("do-nyc1-yaml"), "{}", r.text);
    assert!(r.text.contains("do-nyc1-yaml-admin"), "{}", r.text);
    assert!(r.text.contains("token:"), "{}", r.text);
    assert!(r.text.contains(str_of(&c["endpoint"], "endpoint")), "server must be the endpoint");
}

/// §0: successful DELETEs answer 204 with an empty body.
#[tokio::test]
async fn successful_deletes_are_204_with_empty_body() {
    let h = H::start(SimConfig::default()).await;
    let c = h.running_cluster(cluster_body("del")).await;
    let id = str_of(&c["id"], "id");
    let pool = h
        .call(
            Method::POST,
            &format!("/v2/kubernetes/clusters/{id}/node_pools"),
            Some(json!({"name": "extra", "size": testing::NODE_SIZE, "count": 1})),
        )
        .await
        .json();
    let pid = str_of(&pool["node_pool"]["id"], "pool id");
    let l = h.active_lb(lb_body("del-lb")).await;
    let lid = str_of(&l["id"], "lb id");
    let g = h.active_lb(global_body("del-glb")).await;
    let gid = str_of(&g["id"], "glb id");
    for (path, body) in [
        (format!("/v2/load_balancers/{lid}/droplets"), Some(json!({"droplet_ids": [3164444]}))),
        (format!("/v2/load_balancers/{gid}/cache"), None),
        (format!("/v2/kubernetes/clusters/{id}/node_pools/{pid}"), None),
        (format!("/v2/load_balancers/{lid}"), None),
        (format!("/v2/kubernetes/clusters/{id}"), None),
    ] {
        let r = h.call(Method::DELETE, &path, body).await;
        assert_eq!(r.status, 204, "DELETE {path}: {}", r.text);
        assert!(r.text.is_empty(), "DELETE {path} has a body: {:?}", r.text);
    }
}

/// §0/§9: every response — success, error, unknown route, YAML — carries an
/// `x-request-id` UUID.
#[tokio::test]
async fn every_response_carries_an_x_request_id_uuid() {
    let h = H::start(SimConfig::default()).await;
    let c = h.running_cluster(cluster_body("rid")).await;
    let id = str_of(&c["id"], "id");
    let mut replies = vec![
        h.get("/v2/kubernetes/clusters").await,
        h.get(&format!("/v2/kubernetes/clusters/{id}/kubeconfig")).await,
        h.get("/v2/kubernetes/clusters/00000000-0000-4000-8000-000000000000").await,
        h.get("/v2/no/such/route").await,
        h.call(Method::POST, "/v2/load_balancers", Some(json!({}))).await,
        testing::send(h.http.get(h.url("/v2/kubernetes/clusters"))).await,
    ];
    replies.push(h.call(Method::DELETE, &format!("/v2/kubernetes/clusters/{id}"), None).await);
    let mut seen = std::collections::HashSet::new();
    for r in &replies {
        let rid =
            r.header("x-request-id").unwrap_or_else(|| panic!("no x-request-id ({})", r.status));
        assert!(is_uuid(rid), "x-request-id {rid:?} is not a UUID");
        assert!(seen.insert(rid.to_owned()), "request id {rid} repeated");
    }
}

/// §0: ids are UUID strings; timestamps are RFC 3339 UTC.
#[tokio::test]
async fn ids_are_uuids_and_timestamps_rfc3339_utc() {
    let h = H::start(SimConfig::default()).await;
    let c = h.running_cluster(cluster_body("ids")).await;
    assert!(is_uuid(str_of(&c["id"], "cluster id")));
    assert!(is_rfc3339_utc(str_of(&c["created_at"], "created_at")));
    assert!(is_rfc3339_utc(str_of(&c["updated_at"], "updated_at")));
    let p = &c["node_pools"][0];
    assert!(is_uuid(str_of(&p["id"], "pool id")));
    let n = &p["nodes"][0];
    assert!(is_uuid(str_of(&n["id"], "node id")));
    assert!(is_rfc3339_utc(str_of(&n["created_at"], "node created_at")));
    let l = h.create_lb(lb_body("ids-lb")).await;
    assert!(is_uuid(str_of(&l["id"], "lb id")));
    assert!(is_rfc3339_utc(str_of(&l["created_at"], "lb created_at")));
    let cred =
        h.get(&format!("/v2/kubernetes/clusters/{}/credentials", str_of(&c["id"], "id"))).await;
    assert!(is_rfc3339_utc(str_of(&cred.json()["expires_at"], "expires_at")));
}

/// §0: a DOKS cluster's `region` is a slug string.
#[tokio::test]
async fn cluster_region_is_a_slug_string() {
    let h = H::start(SimConfig::default()).await;
    let c = h.create_cluster(cluster_body("slug")).await;
    assert_eq!(c["region"], "nyc1");
}

/// §0/§8.7: a load balancer's `region` is a slug in the request but a full region object
/// `{name, slug, sizes[], features[], available}` in responses.
#[tokio::test]
async fn lb_region_is_a_slug_in_requests_and_an_object_in_responses() {
    let h = H::start(SimConfig::default()).await;
    let l = h.create_lb(lb_body("region-lb")).await;
    let r = &l["region"];
    assert_eq!(r["slug"], "nyc1", "{l}");
    assert!(r["name"].as_str().is_some_and(|n| !n.is_empty()), "{r}");
    assert!(r["sizes"].is_array() && r["features"].is_array(), "{r}");
    assert!(r["available"].is_boolean(), "{r}");
    let lid = str_of(&l["id"], "id");
    let got = h.get(&format!("/v2/load_balancers/{lid}")).await.json();
    assert_eq!(got["load_balancer"]["region"]["slug"], "nyc1");
}

/// §0/§8.7: droplet ids are integers in load balancer objects but strings on DOKS nodes.
#[tokio::test]
async fn droplet_ids_are_ints_on_lbs_and_strings_on_doks_nodes() {
    let h = H::start(SimConfig::default()).await;
    let l = h.create_lb(lb_body("ints")).await;
    assert_eq!(l["droplet_ids"], json!([3164444]));
    assert!(l["droplet_ids"][0].is_u64());
    let c = h.running_cluster(cluster_body("strings")).await;
    for n in c["node_pools"][0]["nodes"].as_array().expect("nodes") {
        let d = str_of(&n["droplet_id"], "node droplet_id");
        assert!(!d.is_empty() && d.chars().all(|c| c.is_ascii_digit()), "droplet_id {d:?}");
    }
}

// ----- §1 errors ----------------------------------------------------------------------------

/// §1: a missing or wrong bearer token → 401 `unauthorized` "Unable to authenticate you".
#[tokio::test]
async fn bad_or_missing_token_is_401_unauthorized() {
    let h = H::start(SimConfig::default()).await;
    let missing = testing::send(h.http.get(h.url("/v2/kubernetes/clusters"))).await;
    let wrong =
        testing::send(h.http.get(h.url("/v2/load_balancers")).bearer_auth("dop_v1_nope")).await;
    for r in [missing, wrong] {
        assert_error(&r, 401, "unauthorized");
        assert_eq!(r.json()["message"], "Unable to authenticate you");
    }
}

/// §1: unknown ids → 404 `not_found` (cluster, pool, node, LB, credentials).
#[tokio::test]
async fn unknown_ids_are_404_not_found() {
    let h = H::start(SimConfig::default()).await;
    let c = h.create_cluster(cluster_body("nf")).await;
    let id = str_of(&c["id"], "id");
    let pid = str_of(&c["node_pools"][0]["id"], "pool id");
    let ghost = "00000000-0000-4000-8000-000000000000";
    let r = h
        .call(
            Method::POST,
            &format!("/v2/kubernetes/clusters/{ghost}/node_pools"),
            Some(json!({"name": "p", "size": testing::NODE_SIZE, "count": 1})),
        )
        .await;
    assert_error(&r, 404, "not_found");
    for (m, path) in [
        (Method::GET, format!("/v2/kubernetes/clusters/{ghost}")),
        (Method::GET, format!("/v2/kubernetes/clusters/{id}/node_pools/{ghost}")),
        (Method::DELETE, format!("/v2/kubernetes/clusters/{id}/node_pools/{pid}/nodes/{ghost}")),
        (Method::GET, format!("/v2/load_balancers/{ghost}")),
        (Method::DELETE, format!("/v2/load_balancers/{ghost}")),
        (Method::GET, format!("/v2/kubernetes/clusters/{ghost}/credentials")),
    ] {
        let r = h.call(m, &path, None).await;
        assert_error(&r, 404, "not_found");
    }
}

/// §1: validation errors → 422 `unprocessable_entity`.
#[tokio::test]
async fn validation_errors_are_422_unprocessable_entity() {
    let h = H::start(SimConfig::default()).await;
    let r = h
        .call(Method::POST, "/v2/kubernetes/clusters", Some(json!({"name": "x", "region": "nyc1"})))
        .await;
    assert_error(&r, 422, "unprocessable_entity");
    let mut bad_region = cluster_body("r");
    bad_region["region"] = json!("mars1");
    assert_error(
        &h.call(Method::POST, "/v2/kubernetes/clusters", Some(bad_region)).await,
        422,
        "unprocessable_entity",
    );
}

/// §1: a body that cannot be parsed → 400 `bad_request` ("error parsing request body").
#[tokio::test]
async fn unparsable_json_is_400_bad_request() {
    let h = H::start(SimConfig::default()).await;
    for path in ["/v2/kubernetes/clusters", "/v2/load_balancers"] {
        let rb = h
            .http
            .post(h.url(path))
            .bearer_auth(TEST_TOKEN)
            .header("content-type", "application/json")
            .body("{not json");
        let r = testing::send(rb).await;
        assert_error(&r, 400, "bad_request");
        let msg = r.json()["message"].as_str().unwrap_or_default().to_owned();
        assert!(msg.contains("error parsing request body"), "{msg}");
    }
}

/// §1/§5.2/§8.5: an LB PUT while a previous change is applied → 403 `forbidden` "Load
/// Balancer can't be updated while it processes previous actions"; later it succeeds.
#[tokio::test]
async fn lb_put_while_busy_is_403_with_the_busy_message() {
    let h = H::start(SimConfig::default()).await;
    let l = h.create_lb(lb_body("busy")).await;
    let lid = str_of(&l["id"], "id");
    let r = h.call(Method::PUT, &format!("/v2/load_balancers/{lid}"), Some(lb_body("busy"))).await;
    assert_error(&r, 403, "forbidden");
    assert_eq!(
        r.json()["message"],
        "Load Balancer can't be updated while it processes previous actions"
    );
    h.step(120);
    let r = h.call(Method::PUT, &format!("/v2/load_balancers/{lid}"), Some(lb_body("busy"))).await;
    assert_eq!(r.status, 200, "{}", r.text);
    // The PUT itself starts a new change: an immediate second PUT is busy again.
    let r = h.call(Method::PUT, &format!("/v2/load_balancers/{lid}"), Some(lb_body("busy"))).await;
    assert_error(&r, 403, "forbidden");
}

// ----- §2 rate limits -----------------------------------------------------------------------

/// §2: every response carries `ratelimit-limit`, `ratelimit-remaining`,
/// `ratelimit-reset`, spelled lower-case on the wire (read over raw TCP, since HTTP
/// libraries normalise header names).
#[tokio::test]
async fn rate_limit_headers_are_on_every_response_in_lower_case() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let h = H::start(SimConfig::default()).await;
    for (path, auth) in
        [("/v2/kubernetes/clusters", true), ("/v2/nowhere", true), ("/v2/load_balancers", false)]
    {
        let mut s = tokio::net::TcpStream::connect(h.server.addr).await.expect("connect");
        let auth =
            if auth { format!("Authorization: Bearer {TEST_TOKEN}\r\n") } else { String::new() };
        let req = format!("GET {path} HTTP/1.1\r\nHost: sim\r\n{auth}Connection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.expect("write");
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await.expect("read");
        let raw = String::from_utf8_lossy(&raw);
        let head = raw.split("\r\n\r\n").next().unwrap_or_default();
        for name in
            ["ratelimit-limit: ", "ratelimit-remaining: ", "ratelimit-reset: ", "x-request-id: "]
        {
            assert!(
                head.contains(&format!("\r\n{name}")),
                "{path}: no lower-case {name:?} in\n{head}"
            );
        }
    }
}

/// §2: `ratelimit-remaining` decreases per request; `ratelimit-reset` is the epoch second
/// when the oldest counted request expires (one hour after it), so it moves in small
/// steps as requests age out.
#[tokio::test]
async fn remaining_decreases_and_reset_is_when_the_oldest_request_expires() {
    let h = H::start(SimConfig::default()).await;
    let start =
        bc_domain::Timestamp::parse_rfc3339(testing::START).expect("start").unix_ms() / 1000;
    let num = |r: &Reply, n: &str| -> i64 {
        r.header(n).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("no {n}"))
    };
    let a = h.get("/v2/kubernetes/clusters").await;
    assert_eq!(num(&a, "ratelimit-limit"), 5000);
    assert_eq!(num(&a, "ratelimit-remaining"), 4999);
    assert_eq!(num(&a, "ratelimit-reset"), start + 3600);
    h.step(30);
    let b = h.get("/v2/kubernetes/clusters").await;
    assert_eq!(num(&b, "ratelimit-remaining"), 4998);
    assert_eq!(num(&b, "ratelimit-reset"), start + 3600, "the oldest request still counts");
    // One hour after the first request it ages out: reset moves to the second's expiry.
    h.step(3600 - 30);
    let c = h.get("/v2/kubernetes/clusters").await;
    assert_eq!(num(&c, "ratelimit-reset"), start + 30 + 3600);
    assert_eq!(num(&c, "ratelimit-remaining"), 4998, "one aged out, one added");
}

/// §2: tripping the per-minute burst limit → 429 `too_many_requests` with `retry-after`
/// even while hourly quota remains; once the minute passes requests succeed again.
#[tokio::test]
async fn burst_limit_is_429_with_retry_after_while_hourly_quota_remains() {
    let h = H::start(SimConfig {
        rate_limits: RateLimits { per_hour: 100, per_minute: 3 },
        ..SimConfig::default()
    })
    .await;
    for _ in 0..3 {
        assert_eq!(h.get("/v2/load_balancers").await.status, 200);
    }
    let r = h.get("/v2/load_balancers").await;
    assert_error(&r, 429, "too_many_requests");
    assert_eq!(r.json()["message"], "API rate limit exceeded.");
    let wait: i64 = r.header("retry-after").and_then(|v| v.parse().ok()).expect("retry-after");
    assert!((1..=60).contains(&wait), "retry-after {wait}");
    let remaining: i64 =
        r.header("ratelimit-remaining").and_then(|v| v.parse().ok()).expect("remaining");
    assert!(remaining > 0, "hourly quota remains, yet remaining is {remaining}");
    h.step(wait);
    assert_eq!(h.get("/v2/load_balancers").await.status, 200);
}

/// §2: using up the hourly quota → 429 with `ratelimit-remaining: 0` until requests age
/// out an hour later.
#[tokio::test]
async fn hourly_limit_is_429_until_requests_age_out() {
    let h = H::start(SimConfig {
        rate_limits: RateLimits { per_hour: 4, per_minute: 250 },
        ..SimConfig::default()
    })
    .await;
    for i in 0..4 {
        let r = h.get("/v2/load_balancers").await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("ratelimit-remaining"), Some((3 - i).to_string().as_str()));
        h.step(60);
    }
    let r = h.get("/v2/load_balancers").await;
    assert_error(&r, 429, "too_many_requests");
    assert_eq!(r.header("ratelimit-remaining"), Some("0"));
    assert_eq!(r.header("ratelimit-limit"), Some("4"));
    h.step(3600);
    assert_eq!(h.get("/v2/load_balancers").await.status, 200);
}

// ----- §3 pagination ------------------------------------------------------------------------

async fn make_lbs(h: &H, n: usize) {
    for i in 0..n {
        h.create_lb(lb_body(&format!("page-{i:03}"))).await;
    }
}

fn pages(v: &Value) -> serde_json::Map<String, Value> {
    v["links"]["pages"].as_object().cloned().unwrap_or_default()
}

/// §3: `per_page` defaults to 20; `meta.total` counts everything; page 1 has
/// `next`/`last` (full URLs with `page=N`) but no `first`/`prev`.
#[tokio::test]
async fn lists_page_20_by_default_with_meta_total_and_next_last_links() {
    let h = H::start(SimConfig::default()).await;
    make_lbs(&h, 45).await;
    let v = h.get("/v2/load_balancers").await.json();
    assert_eq!(v["load_balancers"].as_array().map(Vec::len), Some(20));
    assert_eq!(v["meta"]["total"], 45);
    let p = pages(&v);
    assert!(!p.contains_key("first") && !p.contains_key("prev"), "{p:?}");
    let next = str_of(&p["next"], "next");
    assert!(next.starts_with("http") && next.contains("page=2"), "{next}");
    assert!(str_of(&p["last"], "last").contains("page=3"));
    // A middle page has all four; following `next` reaches the last page, which has no
    // `next`/`last`.
    let v2 = h.get(next).await.json();
    let p2 = pages(&v2);
    for k in ["first", "prev", "next", "last"] {
        assert!(p2.contains_key(k), "page 2 lacks {k}: {p2:?}");
    }
    let v3 = h.get(str_of(&p2["next"], "next")).await.json();
    assert_eq!(v3["load_balancers"].as_array().map(Vec::len), Some(5));
    let p3 = pages(&v3);
    assert!(!p3.contains_key("next") && !p3.contains_key("last"), "{p3:?}");
    assert!(p3.contains_key("first") && p3.contains_key("prev"), "{p3:?}");
}

/// §3: `per_page` is capped at 200.
#[tokio::test]
async fn per_page_is_capped_at_200() {
    let h = H::start(SimConfig {
        rate_limits: RateLimits { per_hour: 5000, per_minute: 1000 },
        ..SimConfig::default()
    })
    .await;
    make_lbs(&h, 201).await;
    let v = h.get("/v2/load_balancers?per_page=500").await.json();
    assert_eq!(v["load_balancers"].as_array().map(Vec::len), Some(200));
    assert_eq!(v["meta"]["total"], 201);
    assert!(pages(&v).contains_key("next"));
}

/// §3: when everything fits on one page there are no page links (`links` is `{}`), and
/// the cluster list has `meta.total` too.
#[tokio::test]
async fn a_single_page_has_no_page_links() {
    let h = H::start(SimConfig::default()).await;
    h.create_cluster(cluster_body("one")).await;
    let v = h.get("/v2/kubernetes/clusters").await.json();
    assert_eq!(v["meta"]["total"], 1);
    assert!(pages(&v).is_empty(), "{v}");
    let v = h.get("/v2/kubernetes/clusters?page=1&per_page=1").await.json();
    assert!(pages(&v).is_empty(), "{v}");
}

/// §3: `GET …/node_pools` is not paged: all pools, no `meta`, paging params ignored.
#[tokio::test]
async fn node_pool_list_is_not_paged() {
    let h = H::start(SimConfig::default()).await;
    let c = h.create_cluster(cluster_body("pools")).await;
    let id = str_of(&c["id"], "id");
    for i in 0..2 {
        let r = h
            .call(
                Method::POST,
                &format!("/v2/kubernetes/clusters/{id}/node_pools"),
                Some(json!({"name": format!("p{i}"), "size": testing::NODE_SIZE, "count": 1})),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
    }
    let v =
        h.get(&format!("/v2/kubernetes/clusters/{id}/node_pools?per_page=1&page=1")).await.json();
    assert_eq!(v["node_pools"].as_array().map(Vec::len), Some(3), "{v}");
    assert!(v.get("meta").is_none(), "{v}");
}

// ----- §4 DOKS ------------------------------------------------------------------------------

/// §4.4/§8.1: create → 201, `provisioning` (message "provisioning"), empty `ipv4` and
/// `endpoint`, every node `provisioning` with empty `name` and `droplet_id`.
#[tokio::test]
async fn cluster_create_is_201_provisioning_with_blank_addresses_and_nodes() {
    let h = H::start(SimConfig::default()).await;
    let c = h.create_cluster(cluster_body("fresh")).await;
    assert_eq!(c["status"]["state"], "provisioning");
    assert_eq!(c["status"]["message"], "provisioning");
    assert_eq!(c["ipv4"], "");
    assert_eq!(c["endpoint"], "");
    let nodes = c["node_pools"][0]["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 2);
    for n in nodes {
        assert_eq!(n["status"]["state"], "provisioning");
        assert_eq!(n["name"], "");
        assert_eq!(n["droplet_id"], "");
    }
}

/// §4.1/§4.4: the server adds `k8s` and `k8s:<cluster id>` to the cluster's tags.
#[tokio::test]
async fn cluster_tags_include_k8s_and_k8s_id() {
    let h = H::start(SimConfig::default()).await;
    let mut b = cluster_body("tags");
    b["tags"] = json!(["team-a"]);
    let c = h.create_cluster(b).await;
    let id = str_of(&c["id"], "id");
    let tags: Vec<&str> =
        c["tags"].as_array().expect("tags").iter().filter_map(Value::as_str).collect();
    for t in ["team-a", "k8s", &format!("k8s:{id}")] {
        assert!(tags.contains(&t), "{tags:?} lacks {t}");
    }
}

/// §4.1/§8.11: custom tags starting with `k8s` are refused at creation.
#[tokio::test]
async fn custom_tags_starting_with_k8s_are_refused() {
    let h = H::start(SimConfig::default()).await;
    let mut b = cluster_body("k8stag");
    b["tags"] = json!(["k8s-mine"]);
    let r = h.call(Method::POST, "/v2/kubernetes/clusters", Some(b)).await;
    assert_error(&r, 422, "unprocessable_entity");
}

/// §4.1: on create `version` may be a minor (`1.32` → its newest patch) or `latest`.
#[tokio::test]
async fn create_version_may_be_a_minor_or_latest() {
    let h = H::start(SimConfig::default()).await;
    let opts = h.get("/v2/kubernetes/options").await.json();
    let newest = str_of(&opts["options"]["versions"][0]["slug"], "newest").to_owned();
    let c = h.create_cluster(cluster_body("latest")).await;
    assert_eq!(c["version"], newest.as_str());
    let second = str_of(&opts["options"]["versions"][1]["slug"], "second").to_owned();
    let minor: String = second.split('.').take(2).collect::<Vec<_>>().join(".");
    let mut b = cluster_body("minor");
    b["version"] = json!(minor);
    assert_eq!(h.create_cluster(b).await["version"], second.as_str());
}

/// §4.4: GET of an unknown cluster → 404.
#[tokio::test]
async fn get_unknown_cluster_is_404() {
    let h = H::start(SimConfig::default()).await;
    let r = h.get("/v2/kubernetes/clusters/11111111-1111-4111-8111-111111111111").await;
    assert_error(&r, 404, "not_found");
}

/// §4.3/§9: once provisioned the cluster is `running` with `ipv4`, an endpoint, and named
/// nodes with droplet ids, all `running`.
#[tokio::test]
async fn provisioned_cluster_runs_with_ipv4_endpoint_and_named_nodes() {
    let h = H::start(SimConfig::default()).await;
    let c = h.running_cluster(cluster_body("ready")).await;
    assert!(c["ipv4"].as_str().is_some_and(|s| !s.is_empty()), "{c}");
    assert!(c["endpoint"].as_str().is_some_and(|s| s.starts_with("http")), "{c}");
    for n in c["node_pools"][0]["nodes"].as_array().expect("nodes") {
        assert!(n["name"].as_str().is_some_and(|s| !s.is_empty()), "{n}");
        assert!(n["droplet_id"].as_str().is_some_and(|s| !s.is_empty()), "{n}");
    }
}

/// §4.4: PUT → 202 `{kubernetes_cluster}`; tags replace the user tags and the server
/// tags come back (echoing them is harmless).
#[tokio::test]
async fn cluster_put_is_202_and_tags_replace_with_server_tags_readded() {
    let h = H::start(SimConfig::default()).await;
    let mut b = cluster_body("put");
    b["tags"] = json!(["old"]);
    let c = h.create_cluster(b).await;
    let id = str_of(&c["id"], "id");
    let r = h
        .call(
            Method::PUT,
            &format!("/v2/kubernetes/clusters/{id}"),
            Some(json!({"name": "put-renamed", "tags": ["new", "k8s", format!("k8s:{id}")]})),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.text);
    let c = r.json()["kubernetes_cluster"].clone();
    assert_eq!(c["name"], "put-renamed");
    let tags: Vec<&str> =
        c["tags"].as_array().expect("tags").iter().filter_map(Value::as_str).collect();
    assert!(tags.contains(&"new") && !tags.contains(&"old"), "{tags:?}");
    assert!(tags.contains(&"k8s") && tags.contains(&format!("k8s:{id}").as_str()), "{tags:?}");
    // Region and version cannot change through PUT.
    let r = h
        .call(
            Method::PUT,
            &format!("/v2/kubernetes/clusters/{id}"),
            Some(json!({"name": "put", "region": "fra1"})),
        )
        .await;
    assert_error(&r, 422, "unprocessable_entity");
}

/// §4.4: DELETE → 204; the cluster then disappears (404), and a DELETE of a missing
/// cluster is 404.
#[tokio::test]
async fn cluster_delete_is_204_then_404() {
    let h = H::start(SimConfig::default()).await;
    let c = h.running_cluster(cluster_body("gone")).await;
    let id = str_of(&c["id"], "id");
    let path = format!("/v2/kubernetes/clusters/{id}");
    let r = h.call(Method::DELETE, &path, None).await;
    assert_eq!(r.status, 204, "{}", r.text);
    let mut status = 0;
    for _ in 0..MAX_STEPS {
        status = h.get(&path).await.status.as_u16();
        if status == 404 {
            break;
        }
        h.step(1);
    }
    assert_eq!(status, 404, "the cluster never disappeared");
    assert_error(&h.call(Method::DELETE, &path, None).await, 404, "not_found");
}

/// §4.4/§8.1: kubeconfig and credentials are 404 until the cluster has provisioned.
#[tokio::test]
async fn kubeconfig_and_credentials_are_404_until_running() {
    let h = H::start(SimConfig::default()).await;
    let c = h.create_cluster(cluster_body("early")).await;
    let id = str_of(&c["id"], "id");
    for what in ["kubeconfig", "credentials"] {
        let r = h.get(&format!("/v2/kubernetes/clusters/{id}/{what}")).await;
        assert_error(&r, 404, "not_found");
    }
    h.running_cluster_wait(id).await;
    for what in ["kubeconfig", "credentials"] {
        assert_eq!(h.get(&format!("/v2/kubernetes/clusters/{id}/{what}")).await.status, 200);
    }
}

/// §4.4: credentials carry server, base64 CA, null deprecated client cert/key, a token,
/// and `expires_at` 7 days out when `expiry_seconds` is 0/absent (else that many seconds).
#[tokio::test]
async fn credentials_fields_and_seven_day_default_expiry() {
    use base64::Engine as _;
    let h = H::start(SimConfig::default()).await;
    let c = h.running_cluster(cluster_body("cred")).await;
    let id = str_of(&c["id"], "id");
    let now = h.sim.state().clock.now().unix_ms() / 1000;
    let expiry = |v: &Value| {
        bc_domain::Timestamp::parse_rfc3339(str_of(&v["expires_at"], "expires_at"))
            .expect("ts")
            .unix_ms()
            / 1000
            - now
    };
    for q in ["", "?expiry_seconds=0"] {
        let v = h.get(&format!("/v2/kubernetes/clusters/{id}/credentials{q}")).await.json();
        assert_eq!(v["server"], c["endpoint"]);
        let ca = base64::engine::general_purpose::STANDARD
            .decode(str_of(&v["certificate_authority_data"], "ca"))
            .expect("base64 CA");
        assert!(String::from_utf8_lossy(&ca).contains("BEGIN CERTIFICATE"));
        assert!(v["client_certificate_data"].is_null() && v["client_key_data"].is_null(), "{v}");
        assert!(v["token"].as_str().is_some_and(|t| !t.is_empty()));
        assert_eq!(expiry(&v), 7 * 24 * 3600, "{q}");
    }
    let v =
        h.get(&format!("/v2/kubernetes/clusters/{id}/credentials?expiry_seconds=600")).await.json();
    assert_eq!(expiry(&v), 600);
}

/// §4.4/§8.13: `/upgrades` is `{available_upgrade_versions: null}` when up to date, and
/// lists `{slug, kubernetes_version, supported_features[]}` otherwise.
#[tokio::test]
async fn upgrades_are_null_when_up_to_date() {
    let h = H::start(SimConfig::default()).await;
    let c = h.create_cluster(cluster_body("newest")).await;
    let id = str_of(&c["id"], "id");
    let r = h.get(&format!("/v2/kubernetes/clusters/{id}/upgrades")).await;
    assert_eq!(r.status, 200);
    let v = r.json();
    assert!(v.get("available_upgrade_versions").is_some_and(Value::is_null), "{v}");
    let mut b = cluster_body("older");
    let opts = h.get("/v2/kubernetes/options").await.json();
    b["version"] = opts["options"]["versions"][1]["slug"].clone();
    let old = h.create_cluster(b).await;
    let v = h
        .get(&format!("/v2/kubernetes/clusters/{}/upgrades", str_of(&old["id"], "id")))
        .await
        .json();
    let up = &v["available_upgrade_versions"][0];
    assert!(up["slug"].is_string() && up["kubernetes_version"].is_string(), "{v}");
    assert!(up["supported_features"].is_array(), "{v}");
}

/// §4.4/§8.9: an upgrade that skips a minor, or leaves a minor from other than its latest
/// patch, is 422 "invalid upgrade path".
#[tokio::test]
async fn invalid_upgrade_path_is_422() {
    let h = H::start(SimConfig::default()).await;
    let opts = h.get("/v2/kubernetes/options").await.json();
    let versions: Vec<String> = opts["options"]["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .filter_map(|v| v["slug"].as_str().map(str::to_owned))
        .collect();
    assert!(versions.len() >= 3, "{versions:?}");
    let mut b = cluster_body("skip");
    b["version"] = json!(versions[2]);
    let c = h.running_cluster(b).await;
    let id = str_of(&c["id"], "id");
    let r = h
        .call(
            Method::POST,
            &format!("/v2/kubernetes/clusters/{id}/upgrade"),
            Some(json!({"version": versions[0]})),
        )
        .await;
    assert_error(&r, 422, "unprocessable_entity");
    assert!(r.json()["message"].as_str().is_some_and(|m| m.contains("invalid upgrade path")));
    // From an older patch of a minor, the next minor is refused too (fixture: a version
    // not offered for new clusters).
    let mut b = cluster_body("patch");
    b["version"] = json!(versions[1]);
    let c = h.running_cluster(b).await;
    let id = str_of(&c["id"], "id");
    assert!(h.sim.state().model().force_cluster_version(id, "1.32.5-do.0"));
    let r = h
        .call(
            Method::POST,
            &format!("/v2/kubernetes/clusters/{id}/upgrade"),
            Some(json!({"version": versions[0]})),
        )
        .await;
    assert_error(&r, 422, "unprocessable_entity");
    assert!(r.json()["message"].as_str().is_some_and(|m| m.contains("invalid upgrade path")));
}

/// §4.4/§4.3: a valid upgrade → 202 with no body; the cluster is `upgrading`, then
/// `running` at the new version.
#[tokio::test]
async fn upgrade_is_202_without_body_then_upgrading_then_new_version() {
    let h = H::start(SimConfig::default()).await;
    let opts = h.get("/v2/kubernetes/options").await.json();
    let mut b = cluster_body("up");
    b["version"] = opts["options"]["versions"][1]["slug"].clone();
    let c = h.running_cluster(b).await;
    let id = str_of(&c["id"], "id");
    let ups = h.get(&format!("/v2/kubernetes/clusters/{id}/upgrades")).await.json();
    let to = str_of(&ups["available_upgrade_versions"][0]["slug"], "slug").to_owned();
    let r = h
        .call(
            Method::POST,
            &format!("/v2/kubernetes/clusters/{id}/upgrade"),
            Some(json!({"version": to})),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.text);
    assert!(r.text.is_empty(), "{:?}", r.text);
    let now = h.get(&format!("/v2/kubernetes/clusters/{id}")).await.json();
    assert_eq!(now["kubernetes_cluster"]["status"]["state"], "upgrading");
    let done = h.wait_cluster(id, |c| c["status"]["state"] == "running").await;
    assert_eq!(done["version"], to.as_str());
}

/// §4.4: `/options` lists regions `{name, slug}`, versions `{slug, kubernetes_version,
/// supported_features}` (latest patch of the three newest minors) and sizes `{name, slug}`.
#[tokio::test]
async fn options_list_regions_versions_and_sizes() {
    let h = H::start(SimConfig::default()).await;
    let r = h.get("/v2/kubernetes/options").await;
    assert_eq!(r.status, 200);
    let o = r.json()["options"].clone();
    for k in ["regions", "sizes"] {
        let list = o[k].as_array().unwrap_or_else(|| panic!("no {k}: {o}"));
        assert!(!list.is_empty());
        assert!(list.iter().all(|e| e["name"].is_string() && e["slug"].is_string()), "{k}: {o}");
    }
    assert!(o["regions"].as_array().expect("regions").iter().any(|r| r["slug"] == "nyc1"));
    let versions = o["versions"].as_array().expect("versions");
    assert_eq!(versions.len(), 3, "{o}");
    let mut minors = std::collections::HashSet::new();
    for v in versions {
        let slug = str_of(&v["slug"], "slug");
        assert!(slug.contains("-do."), "{slug}");
        assert!(slug.starts_with(str_of(&v["kubernetes_version"], "kubernetes_version")));
        assert!(v["supported_features"].is_array());
        minors.insert(slug.split('.').take(2).collect::<Vec<_>>().join("."));
    }
    assert_eq!(minors.len(), 3, "one version per minor");
}

/// §4.4: add pool → 201 `{node_pool}` with `provisioning` nodes, blank names/droplet ids;
/// the pool's tags include `k8s`, `k8s:<cluster id>` and `k8s:worker`.
#[tokio::test]
async fn node_pool_create_is_201_with_server_tags_including_k8s_worker() {
    let h = H::start(SimConfig::default()).await;
    let c = h.running_cluster(cluster_body("np")).await;
    let id = str_of(&c["id"], "id");
    let r = h
        .call(
            Method::POST,
            &format!("/v2/kubernetes/clusters/{id}/node_pools"),
            Some(json!({"name": "more", "size": testing::NODE_SIZE, "count": 2, "tags": ["mine"]})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let p = r.json()["node_pool"].clone();
    let tags: Vec<&str> =
        p["tags"].as_array().expect("tags").iter().filter_map(Value::as_str).collect();
    for t in ["mine", "k8s", "k8s:worker", &format!("k8s:{id}")] {
        assert!(tags.contains(&t), "{tags:?} lacks {t}");
    }
    for n in p["nodes"].as_array().expect("nodes") {
        assert_eq!(n["status"]["state"], "provisioning");
        assert_eq!(n["name"], "");
        assert_eq!(n["droplet_id"], "");
    }
}

/// §4.4/§8.8: pool PUT → 202 `{node_pool}` (resize); `size` is immutable (422).
#[tokio::test]
async fn node_pool_put_is_202_and_size_is_immutable() {
    let h = H::start(SimConfig::default()).await;
    let c = h.running_cluster(cluster_body("resize")).await;
    let id = str_of(&c["id"], "id");
    let pid = str_of(&c["node_pools"][0]["id"], "pool id");
    let path = format!("/v2/kubernetes/clusters/{id}/node_pools/{pid}");
    let r = h.call(Method::PUT, &path, Some(json!({"name": "workers", "count": 3}))).await;
    assert_eq!(r.status, 202, "{}", r.text);
    let p = r.json()["node_pool"].clone();
    assert_eq!(p["count"], 3);
    assert_eq!(p["nodes"].as_array().map(Vec::len), Some(3));
    let r = h
        .call(Method::PUT, &path, Some(json!({"name": "workers", "count": 3, "size": "c-4"})))
        .await;
    assert_error(&r, 422, "unprocessable_entity");
}

/// §4.4: pool DELETE → 204; nodes drain and delete, then the pool is 404.
#[tokio::test]
async fn node_pool_delete_is_204_then_404_after_draining() {
    let h = H::start(SimConfig::default()).await;
    let c = h.running_cluster(cluster_body("dp")).await;
    let id = str_of(&c["id"], "id");
    let pid = str_of(&c["node_pools"][0]["id"], "pool id");
    let path = format!("/v2/kubernetes/clusters/{id}/node_pools/{pid}");
    let r = h.call(Method::DELETE, &path, None).await;
    assert_eq!(r.status, 204, "{}", r.text);
    let mut status = 0;
    for _ in 0..MAX_STEPS {
        let r = h.get(&path).await;
        status = r.status.as_u16();
        if status == 404 {
            break;
        }
        for n in r.json()["node_pool"]["nodes"].as_array().into_iter().flatten() {
            assert!(matches!(n["status"]["state"].as_str(), Some("draining" | "deleting")), "{n}");
        }
        h.step(1);
    }
    assert_eq!(status, 404, "the deleted pool never disappeared");
}

/// §4.4: delete one node → 202; `replace=1` keeps the count and adds a replacement,
/// otherwise the pool shrinks by one; `skip_drain=1` skips `draining`.
#[tokio::test]
async fn delete_node_is_202_with_skip_drain_and_replace_semantics() {
    let h = H::start(SimConfig::default()).await;
    let c = h.running_cluster(cluster_body("dn")).await;
    let id = str_of(&c["id"], "id");
    let pool = &c["node_pools"][0];
    let pid = str_of(&pool["id"], "pool id");
    let n0 = str_of(&pool["nodes"][0]["id"], "node 0").to_owned();
    let n1 = str_of(&pool["nodes"][1]["id"], "node 1").to_owned();
    let pool_path = format!("/v2/kubernetes/clusters/{id}/node_pools/{pid}");
    let node = |n: &str| format!("{pool_path}/nodes/{n}");
    let state_of = |p: &Value, n: &str| -> String {
        p["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|x| x["id"] == n)
            .map(|x| x["status"]["state"].as_str().unwrap_or("").to_owned())
            .unwrap_or_default()
    };

    let r = h.call(Method::DELETE, &format!("{}?replace=1", node(&n0)), None).await;
    assert_eq!(r.status, 202, "{}", r.text);
    assert!(r.text.is_empty(), "{:?}", r.text);
    let p = h.get(&pool_path).await.json()["node_pool"].clone();
    assert_eq!(p["count"], 2, "replace keeps the count");
    assert_eq!(state_of(&p, &n0), "draining", "drained first without skip_drain");
    assert!(
        p["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .any(|n| n["status"]["state"] == "provisioning"),
        "a replacement is provisioning: {p}"
    );

    let r = h.call(Method::DELETE, &format!("{}?skip_drain=1", node(&n1)), None).await;
    assert_eq!(r.status, 202, "{}", r.text);
    let p = h.get(&pool_path).await.json()["node_pool"].clone();
    assert_eq!(p["count"], 1, "without replace the pool shrinks");
    assert_eq!(state_of(&p, &n1), "deleting", "skip_drain skips draining");
}

/// §4.4/§8.10/§9: associated resources are the LBs tagged `k8s:<cluster id>` (plus
/// volumes/snapshots); plain DELETE leaves them; `selective` removes only listed ids;
/// `dangerous` removes all.
#[tokio::test]
async fn associated_resources_list_selective_and_dangerous() {
    let h = H::start(SimConfig::default()).await;
    let mut made = Vec::new();
    for name in ["plain", "sel", "dang"] {
        let c = h.create_cluster(cluster_body(name)).await;
        let id = str_of(&c["id"], "id").to_owned();
        let mut lbs = Vec::new();
        for i in 0..2 {
            let mut b = lb_body(&format!("{name}-lb{i}"));
            b["tags"] = json!([format!("k8s:{id}")]);
            lbs.push(str_of(&h.create_lb(b).await["id"], "lb id").to_owned());
        }
        made.push((id, lbs));
    }
    let hr = &h;
    let lb_status = |id: &str| {
        let p = format!("/v2/load_balancers/{id}");
        async move { hr.get(&p).await.status }
    };
    let (plain, plain_lbs) = &made[0];
    let v = h
        .get(&format!("/v2/kubernetes/clusters/{plain}/destroy_with_associated_resources"))
        .await
        .json();
    let listed: Vec<&str> = v["load_balancers"]
        .as_array()
        .expect("lbs")
        .iter()
        .filter_map(|l| l["id"].as_str())
        .collect();
    assert_eq!(listed, plain_lbs.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(v["load_balancers"][0]["name"].is_string(), "{v}");
    assert_eq!(
        h.call(Method::DELETE, &format!("/v2/kubernetes/clusters/{plain}"), None).await.status,
        204
    );
    for l in plain_lbs {
        assert_eq!(lb_status(l).await, 200, "plain DELETE must leave LBs behind");
    }
    let (sel, sel_lbs) = &made[1];
    let r = h
        .call(
            Method::DELETE,
            &format!("/v2/kubernetes/clusters/{sel}/destroy_with_associated_resources/selective"),
            Some(json!({"load_balancers": [sel_lbs[0]], "volumes": [], "volume_snapshots": []})),
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text);
    assert_eq!(lb_status(&sel_lbs[0]).await, 404);
    assert_eq!(lb_status(&sel_lbs[1]).await, 200, "unlisted resources survive");
    let (dang, dang_lbs) = &made[2];
    let r = h
        .call(
            Method::DELETE,
            &format!("/v2/kubernetes/clusters/{dang}/destroy_with_associated_resources/dangerous"),
            None,
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text);
    for l in dang_lbs {
        assert_eq!(lb_status(l).await, 404);
    }
}

/// §8.13/§4.2: `labels` of a pool created without labels come back `null`; a cluster
/// carries no `registries` (DigitalOcean's OpenAPI document names it for reads only, and
/// not for create and update answers, so none carries it).
#[tokio::test]
async fn empty_labels_come_back_null() {
    let h = H::start(SimConfig::default()).await;
    let c = h.create_cluster(cluster_body("nulls")).await;
    assert!(c["node_pools"][0].get("labels").is_some_and(Value::is_null), "{c}");
    assert!(c.get("registries").is_none(), "{c}");
}

/// §4.2: taints in godo's capitalised spelling (`Key`/`Value`/`Effect`) are accepted and
/// rendered lower-case; an unknown effect is 422.
#[tokio::test]
async fn taints_accept_godo_capitalised_keys_and_check_the_effect() {
    let h = H::start(SimConfig::default()).await;
    let c = h.create_cluster(cluster_body("taints")).await;
    let id = str_of(&c["id"], "id");
    let path = format!("/v2/kubernetes/clusters/{id}/node_pools");
    let body = |effect: &str| {
        json!({"name": format!("t-{effect}"), "size": testing::NODE_SIZE, "count": 1,
               "taints": [{"Key": "dedicated", "Value": "bc", "Effect": effect}]})
    };
    let r = h.call(Method::POST, &path, Some(body("NoSchedule"))).await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(
        r.json()["node_pool"]["taints"],
        json!([{"key": "dedicated", "value": "bc", "effect": "NoSchedule"}])
    );
    assert_error(
        &h.call(Method::POST, &path, Some(body("Sometimes"))).await,
        422,
        "unprocessable_entity",
    );
}

// ----- §5 load balancers --------------------------------------------------------------------

/// §5.2: create → 202 `{load_balancer}` with `status: new`, `ip: ""`; later `active`
/// with an ip.
#[tokio::test]
async fn lb_create_is_202_new_with_empty_ip_then_active() {
    let h = H::start(SimConfig::default()).await;
    let l = h.create_lb(lb_body("new")).await;
    assert_eq!(l["status"], "new");
    assert_eq!(l["ip"], "");
    let l = h.active_lb(lb_body("new2")).await;
    assert!(l["ip"].as_str().is_some_and(|ip| !ip.is_empty()), "{l}");
}

/// §5.1: health check defaults — protocol http, port 80, path `/`, interval 10,
/// timeout 5, healthy 5, unhealthy 3; size/sticky/tag/idle defaults too.
#[tokio::test]
async fn lb_health_check_and_other_defaults() {
    let h = H::start(SimConfig::default()).await;
    let l = h.create_lb(lb_body("defaults")).await;
    let hc = &l["health_check"];
    assert_eq!(hc["protocol"], "http");
    assert_eq!(hc["port"], 80);
    assert_eq!(hc["path"], "/");
    assert_eq!(hc["check_interval_seconds"], 10);
    assert_eq!(hc["response_timeout_seconds"], 5);
    assert_eq!(hc["healthy_threshold"], 5);
    assert_eq!(hc["unhealthy_threshold"], 3);
    assert_eq!(l["sticky_sessions"]["type"], "none");
    assert_eq!(l["size_unit"], 1);
    assert_eq!(l["size"], "lb-small");
    assert_eq!(l["type"], "REGIONAL");
    assert_eq!(l["tag"], "");
    assert_eq!(l["http_idle_timeout_seconds"], 60);
    for k in ["redirect_http_to_https", "enable_proxy_protocol", "enable_backend_keepalive"] {
        assert_eq!(l[k], false, "{k}");
    }
}

/// §5.2/§8.6: PUT → 200 `{load_balancer}`, a full replacement: omitted fields reset to
/// their defaults.
#[tokio::test]
async fn lb_put_is_200_full_replace_resetting_omitted_fields() {
    let h = H::start(SimConfig::default()).await;
    let mut b = lb_body("replace");
    b["health_check"] = json!({"protocol": "tcp", "port": 8080, "healthy_threshold": 3});
    b["sticky_sessions"] = json!({"type": "cookies", "cookie_name": "c", "cookie_ttl_seconds": 60});
    b["firewall"] = json!({"allow": ["ip:1.2.3.4"], "deny": []});
    b["redirect_http_to_https"] = json!(true);
    b["http_idle_timeout_seconds"] = json!(120);
    let l = h.active_lb(b).await;
    assert_eq!(l["health_check"]["port"], 8080);
    let lid = str_of(&l["id"], "id");
    let r = h
        .call(
            Method::PUT,
            &format!("/v2/load_balancers/{lid}"),
            Some(json!({"name": "replace", "region": "nyc1", "forwarding_rules": [rule()], "tag": "web"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let l = r.json()["load_balancer"].clone();
    assert_eq!(l["health_check"]["protocol"], "http");
    assert_eq!(l["health_check"]["port"], 80);
    assert_eq!(l["health_check"]["healthy_threshold"], 5);
    assert_eq!(l["sticky_sessions"]["type"], "none");
    assert_eq!(l["firewall"]["allow"], json!([]));
    assert_eq!(l["redirect_http_to_https"], false);
    assert_eq!(l["http_idle_timeout_seconds"], 60);
    assert_eq!(l["droplet_ids"], json!([]), "omitted droplet_ids reset");
    assert_eq!(l["tag"], "web");
    assert_eq!(l["status"], "active", "a PUT does not reprovision");
}

/// §5.1/§6: LB names are unique per account → 422 `name is not unique`.
#[tokio::test]
async fn lb_duplicate_name_is_422_name_is_not_unique() {
    let h = H::start(SimConfig::default()).await;
    h.create_lb(lb_body("twin")).await;
    let r = h.call(Method::POST, "/v2/load_balancers", Some(lb_body("twin"))).await;
    assert_error(&r, 422, "unprocessable_entity");
    assert!(r.json()["message"].as_str().is_some_and(|m| m.contains("name is not unique")));
}

/// §5.1/§9: `droplet_ids` and `tag` together → 422.
#[tokio::test]
async fn lb_droplet_ids_with_tag_is_422() {
    let h = H::start(SimConfig::default()).await;
    let mut b = lb_body("both");
    b["tag"] = json!("web");
    assert_error(
        &h.call(Method::POST, "/v2/load_balancers", Some(b)).await,
        422,
        "unprocessable_entity",
    );
}

/// §5.1/§9: GLOBAL with a region → 422; regional without a region → 422.
#[tokio::test]
async fn lb_global_with_region_and_regional_without_region_are_422() {
    let h = H::start(SimConfig::default()).await;
    let mut g = global_body("glb-region");
    g["region"] = json!("nyc1");
    assert_error(
        &h.call(Method::POST, "/v2/load_balancers", Some(g)).await,
        422,
        "unprocessable_entity",
    );
    for kind in [None, Some("REGIONAL"), Some("REGIONAL_NETWORK")] {
        let mut b = lb_body("no-region");
        b.as_object_mut().expect("obj").remove("region");
        if let Some(k) = kind {
            b["type"] = json!(k);
            b["forwarding_rules"] = json!([{"entry_protocol": "tcp", "entry_port": 80, "target_protocol": "tcp", "target_port": 80}]);
        }
        assert_error(
            &h.call(Method::POST, "/v2/load_balancers", Some(b)).await,
            422,
            "unprocessable_entity",
        );
    }
}

/// §5.3: a GLOBAL response has no `region`, `droplet_ids` as given, `tag: ""`, `ip: ""`,
/// `size: lb-small`, `size_unit: 1`, `status: new`, `glb_settings` and its domains. Where
/// §5.3 (a doctl fixture) differs from DigitalOcean's OpenAPI document, the document
/// wins: one forwarding rule (it requires at least one; a GLOBAL balancer's is implied by
/// its settings), the protocol lower-case (its enum), domains without `status`.
#[tokio::test]
async fn lb_global_response_shape() {
    let h = H::start(SimConfig::default()).await;
    let mut b = global_body("glb");
    b.as_object_mut().expect("obj").remove("droplet_ids");
    let g = h.create_lb(b).await;
    assert!(g.get("region").is_none(), "{g}");
    assert_eq!(g["type"], "GLOBAL");
    let implied = json!([{"entry_protocol": "http", "entry_port": 80,
                          "target_protocol": "http", "target_port": 80}]);
    assert_eq!(g["forwarding_rules"], implied);
    assert_eq!(g["droplet_ids"], json!([]));
    assert_eq!(g["tag"], "");
    assert_eq!(g["ip"], "");
    assert_eq!(g["size"], "lb-small");
    assert_eq!(g["size_unit"], 1);
    assert_eq!(g["status"], "new");
    assert_eq!(g["glb_settings"]["target_protocol"], "http");
    assert_eq!(g["domains"][0]["name"], "example.com");
    assert!(g["domains"][0].get("status").is_none(), "{g}");
}

/// §5.1/§5.2/§7: resizing again within a minute of the last resize → 422; after a
/// minute it is allowed.
#[tokio::test]
async fn lb_resize_within_a_minute_is_422() {
    let h = H::start(SimConfig::default()).await;
    let l = h.active_lb(lb_body("resize")).await;
    let lid = str_of(&l["id"], "id");
    let path = format!("/v2/load_balancers/{lid}");
    let sized = |n: u32| {
        let mut b = lb_body("resize");
        b["size_unit"] = json!(n);
        b
    };
    let r = h.call(Method::PUT, &path, Some(sized(2))).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["load_balancer"]["size_unit"], 2);
    // Past the busy window (so a 403 cannot mask it) but inside the minute.
    h.step(20);
    let r = h.call(Method::PUT, &path, Some(sized(3))).await;
    assert_error(&r, 422, "unprocessable_entity");
    h.step(60);
    assert_eq!(h.call(Method::PUT, &path, Some(sized(3))).await.status, 200);
}

/// §5.2: DELETE → 204, then GET → 404.
#[tokio::test]
async fn lb_delete_is_204_then_404() {
    let h = H::start(SimConfig::default()).await;
    let l = h.create_lb(lb_body("bye")).await;
    let path = format!("/v2/load_balancers/{}", str_of(&l["id"], "id"));
    let r = h.call(Method::DELETE, &path, None).await;
    assert_eq!(r.status, 204);
    assert!(r.text.is_empty());
    assert_error(&h.get(&path).await, 404, "not_found");
}

/// §5.2/§1: add/remove droplets and forwarding rules → 204; droplets on a tag-based LB
/// → 422; an empty droplet list → 422 "need to provide either a tag or a list of
/// droplets".
#[tokio::test]
async fn lb_droplets_and_rules_endpoints() {
    let h = H::start(SimConfig::default()).await;
    let l = h.active_lb(lb_body("ops")).await;
    let lid = str_of(&l["id"], "id");
    let r = h
        .call(
            Method::POST,
            &format!("/v2/load_balancers/{lid}/droplets"),
            Some(json!({"droplet_ids": [7]})),
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text);
    h.step(20);
    let tcp = json!({"entry_protocol": "tcp", "entry_port": 9000, "target_protocol": "tcp", "target_port": 9000});
    let r = h
        .call(
            Method::POST,
            &format!("/v2/load_balancers/{lid}/forwarding_rules"),
            Some(json!({"forwarding_rules": [tcp]})),
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text);
    h.step(20);
    let got = h.get(&format!("/v2/load_balancers/{lid}")).await.json()["load_balancer"].clone();
    assert_eq!(got["droplet_ids"], json!([3164444, 7]));
    assert_eq!(got["forwarding_rules"].as_array().map(Vec::len), Some(2));
    let r = h
        .call(
            Method::POST,
            &format!("/v2/load_balancers/{lid}/droplets"),
            Some(json!({"droplet_ids": []})),
        )
        .await;
    assert_error(&r, 422, "unprocessable_entity");
    assert!(
        r.json()["message"]
            .as_str()
            .is_some_and(|m| m.contains("need to provide either a tag or a list of droplets"))
    );

    let mut b = lb_body("tagged");
    b.as_object_mut().expect("obj").remove("droplet_ids");
    b["tag"] = json!("web");
    let t = h.active_lb(b).await;
    let r = h
        .call(
            Method::POST,
            &format!("/v2/load_balancers/{}/droplets", str_of(&t["id"], "id")),
            Some(json!({"droplet_ids": [7]})),
        )
        .await;
    assert_error(&r, 422, "unprocessable_entity");
}

/// §5.2: `type`, `network`, `network_stack`, `vpc_uuid` and `region` cannot change in a PUT.
#[tokio::test]
async fn lb_put_cannot_change_create_only_fields() {
    let h = H::start(SimConfig::default()).await;
    let l = h.active_lb(lb_body("fixed")).await;
    let lid = str_of(&l["id"], "id");
    let path = format!("/v2/load_balancers/{lid}");
    let mut region = lb_body("fixed");
    region["region"] = json!("fra1");
    let mut kind = lb_body("fixed");
    kind["type"] = json!("REGIONAL_NETWORK");
    let mut net = lb_body("fixed");
    net["network"] = json!("INTERNAL");
    for b in [region, kind, net] {
        assert_error(&h.call(Method::PUT, &path, Some(b)).await, 422, "unprocessable_entity");
    }
}

/// §5.2: the documented update recipe — GET, modify, PUT the whole object — works: the
/// GET body (region object, `size` next to `size_unit`, read-only fields) is accepted
/// back and only the modified field changes.
#[tokio::test]
async fn lb_put_of_the_whole_get_object_round_trips() {
    let h = H::start(SimConfig::default()).await;
    let mut b = lb_body("roundtrip");
    b["size_unit"] = json!(2);
    let l = h.active_lb(b).await;
    let lid = str_of(&l["id"], "id");
    let path = format!("/v2/load_balancers/{lid}");
    let mut whole = h.get(&path).await.json()["load_balancer"].clone();
    whole["redirect_http_to_https"] = json!(true);
    let r = h.call(Method::PUT, &path, Some(whole.clone())).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let got = r.json()["load_balancer"].clone();
    assert_eq!(got["redirect_http_to_https"], true);
    for k in ["size_unit", "droplet_ids", "forwarding_rules", "health_check", "region", "tags"] {
        assert_eq!(got[k], whole[k], "{k} changed");
    }
    // The same for a GLOBAL load balancer (no region, its one implied rule).
    let g = h.active_lb(global_body("roundtrip-glb")).await;
    let gpath = format!("/v2/load_balancers/{}", str_of(&g["id"], "id"));
    let whole = h.get(&gpath).await.json()["load_balancer"].clone();
    let r = h.call(Method::PUT, &gpath, Some(whole)).await;
    assert_eq!(r.status, 200, "{}", r.text);
}

/// §5.1: `size` and `size_unit` are mutually exclusive in a create request.
#[tokio::test]
async fn lb_create_with_size_and_size_unit_is_422() {
    let h = H::start(SimConfig::default()).await;
    let mut b = lb_body("both-sizes");
    b["size"] = json!("lb-small");
    b["size_unit"] = json!(1);
    assert_error(
        &h.call(Method::POST, "/v2/load_balancers", Some(b)).await,
        422,
        "unprocessable_entity",
    );
    // The deprecated slug alone maps to node counts: lb-medium = 3.
    let mut b = lb_body("medium");
    b["size"] = json!("lb-medium");
    let l = h.create_lb(b).await;
    assert_eq!((l["size"].as_str(), l["size_unit"].as_u64()), (Some("lb-medium"), Some(3)));
}

/// §5.1/§5.3/§9: more LB validation 422s — no forwarding rules on a regional LB, more
/// than 10 droplet ids, reserved ports 50053–50055, udp paired with non-udp, idle
/// timeout outside 30–600, a scaled GLOBAL LB, GLOBAL backends of two kinds.
#[tokio::test]
async fn lb_validation_422s() {
    let h = H::start(SimConfig::default()).await;
    let target = h.create_lb(lb_body("target")).await;
    let mut cases = Vec::new();
    let mut b = lb_body("v");
    b["forwarding_rules"] = json!([]);
    cases.push(("no rules", b));
    let mut b = lb_body("v");
    b["droplet_ids"] = json!((1..=11).collect::<Vec<u64>>());
    cases.push(("11 droplets", b));
    let mut b = lb_body("v");
    b["forwarding_rules"][0]["entry_port"] = json!(50054);
    cases.push(("reserved port", b));
    let mut b = lb_body("v");
    b["forwarding_rules"] = json!([{"entry_protocol": "udp", "entry_port": 53, "target_protocol": "tcp", "target_port": 53}]);
    cases.push(("udp to tcp", b));
    let mut b = lb_body("v");
    b["http_idle_timeout_seconds"] = json!(10);
    cases.push(("idle timeout", b));
    let mut b = global_body("v");
    b["size_unit"] = json!(2);
    cases.push(("scaled GLOBAL", b));
    let mut b = global_body("v");
    b["target_load_balancer_ids"] = json!([target["id"]]);
    cases.push(("mixed GLOBAL backends", b));
    for (what, b) in cases {
        let r = h.call(Method::POST, "/v2/load_balancers", Some(b)).await;
        assert_eq!(r.status, 422, "{what}: {}", r.text);
        assert_eq!(r.json()["id"], "unprocessable_entity", "{what}");
    }
}

/// §5.1/§9: a DUALSTACK load balancer gets an `ipv6` once active.
#[tokio::test]
async fn lb_dualstack_gets_ipv6_when_active() {
    let h = H::start(SimConfig::default()).await;
    let mut b = lb_body("dual");
    b["network_stack"] = json!("DUALSTACK");
    let l = h.active_lb(b).await;
    assert!(l["ipv6"].as_str().is_some_and(|v| v.contains(':')), "{l}");
    assert_eq!(l["network_stack"], "DUALSTACK");
}

/// §5.3: a GLOBAL LB without `glb_settings` gets the one implicit rule, HTTP → 80.
#[tokio::test]
async fn lb_global_default_settings_are_http_to_port_80() {
    let h = H::start(SimConfig::default()).await;
    let mut b = global_body("glb-default");
    b.as_object_mut().expect("obj").remove("glb_settings");
    let g = h.create_lb(b).await;
    assert_eq!(g["glb_settings"]["target_protocol"], "http");
    assert_eq!(g["glb_settings"]["target_port"], 80);
}

/// §4.1: defaults of a cluster created without options — `auto_upgrade` and
/// `surge_upgrade` false, `ha` false below 1.36, a maintenance policy with a read-only
/// `duration`, a VPC and subnets.
#[tokio::test]
async fn cluster_create_defaults() {
    let h = H::start(SimConfig::default()).await;
    let c = h.create_cluster(cluster_body("defaults")).await;
    assert_eq!(c["auto_upgrade"], false);
    assert_eq!(c["surge_upgrade"], false);
    assert_eq!(c["ha"], false);
    let mp = &c["maintenance_policy"];
    assert!(mp["start_time"].is_string() && mp["day"].is_string(), "{mp}");
    assert_eq!(mp["duration"], "4h0m0s");
    assert!(is_uuid(str_of(&c["vpc_uuid"], "vpc_uuid")));
    assert_eq!(c["registry_enabled"], false);
}

/// §9: create 422s — no node pools, a pool with count 0 (no autoscale), an unknown size,
/// an unknown version, a pool missing `size`.
#[tokio::test]
async fn cluster_create_validation_422s() {
    let h = H::start(SimConfig::default()).await;
    let pool = |extra: Value| {
        let mut p = json!({"name": "p", "size": testing::NODE_SIZE, "count": 1});
        for (k, v) in extra.as_object().expect("obj") {
            if v.is_null() {
                p.as_object_mut().expect("obj").remove(k);
            } else {
                p[k] = v.clone();
            }
        }
        let mut b = cluster_body("v");
        b["node_pools"] = json!([p]);
        b
    };
    let mut no_pools = cluster_body("v");
    no_pools["node_pools"] = json!([]);
    let mut bad_version = cluster_body("v");
    bad_version["version"] = json!("0.1.0-do.0");
    for (what, b) in [
        ("no pools", no_pools),
        ("count 0", pool(json!({"count": 0}))),
        ("unknown size", pool(json!({"size": "s-999"}))),
        ("missing size", pool(json!({"size": null}))),
        ("unknown version", bad_version),
    ] {
        let r = h.call(Method::POST, "/v2/kubernetes/clusters", Some(b)).await;
        assert_eq!(r.status, 422, "{what}: {}", r.text);
        assert_eq!(r.json()["id"], "unprocessable_entity", "{what}");
    }
}

/// §4.1: HA cannot be disabled once on, and an HA control plane has no `ipv4`.
#[tokio::test]
async fn cluster_ha_cannot_be_disabled_and_has_no_ipv4() {
    let h = H::start(SimConfig::default()).await;
    let mut b = cluster_body("ha");
    b["ha"] = json!(true);
    let c = h.running_cluster(b).await;
    assert_eq!(c["ha"], true);
    assert_eq!(c["ipv4"], "", "not set for HA control planes");
    let id = str_of(&c["id"], "id");
    let r = h
        .call(
            Method::PUT,
            &format!("/v2/kubernetes/clusters/{id}"),
            Some(json!({"name": "ha", "ha": false})),
        )
        .await;
    assert_error(&r, 422, "unprocessable_entity");
}

/// §4.4: downgrades are impossible (422).
#[tokio::test]
async fn downgrade_is_422() {
    let h = H::start(SimConfig::default()).await;
    let opts = h.get("/v2/kubernetes/options").await.json();
    let older = opts["options"]["versions"][1]["slug"].clone();
    let c = h.running_cluster(cluster_body("down")).await;
    let id = str_of(&c["id"], "id");
    let r = h
        .call(
            Method::POST,
            &format!("/v2/kubernetes/clusters/{id}/upgrade"),
            Some(json!({"version": older})),
        )
        .await;
    assert_error(&r, 422, "unprocessable_entity");
}

/// §4.2/§4.4: `min_nodes`/`max_nodes` are 0 without autoscale; with autoscale an explicit
/// count outside [min, max] falls back to `min_nodes`; renaming a pool does not rename
/// its existing nodes.
#[tokio::test]
async fn node_pool_autoscale_bounds_and_rename() {
    let h = H::start(SimConfig::default()).await;
    let c = h.running_cluster(cluster_body("as")).await;
    let id = str_of(&c["id"], "id");
    let p = &c["node_pools"][0];
    assert_eq!(
        (p["auto_scale"].as_bool(), p["min_nodes"].as_u64(), p["max_nodes"].as_u64()),
        (Some(false), Some(0), Some(0))
    );
    let names: Vec<Value> =
        p["nodes"].as_array().expect("nodes").iter().map(|n| n["name"].clone()).collect();
    let path = format!("/v2/kubernetes/clusters/{id}/node_pools/{}", str_of(&p["id"], "pool id"));
    let r = h
        .call(
            Method::PUT,
            &path,
            Some(json!({"name": "renamed", "count": 9, "auto_scale": true, "min_nodes": 2, "max_nodes": 4})),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.text);
    let p = r.json()["node_pool"].clone();
    assert_eq!(p["name"], "renamed");
    assert_eq!(p["count"], 2, "count outside [min, max] falls back to min_nodes");
    assert_eq!((p["min_nodes"].as_u64(), p["max_nodes"].as_u64()), (Some(2), Some(4)));
    let now: Vec<Value> =
        p["nodes"].as_array().expect("nodes").iter().map(|n| n["name"].clone()).collect();
    assert_eq!(now, names, "existing nodes keep their names");
}

/// §4.4: the deprecated recycle `POST …/node_pools/{id}/recycle {nodes:[id]}` → 202:
/// the listed node is replaced (the count stays); an unknown node is 404.
#[tokio::test]
async fn node_pool_recycle_is_202_and_replaces_the_nodes() {
    let h = H::start(SimConfig::default()).await;
    let c = h.running_cluster(cluster_body("recycle")).await;
    let id = str_of(&c["id"], "id");
    let p = &c["node_pools"][0];
    let pool_path =
        format!("/v2/kubernetes/clusters/{id}/node_pools/{}", str_of(&p["id"], "pool id"));
    let n0 = p["nodes"][0]["id"].clone();
    let r =
        h.call(Method::POST, &format!("{pool_path}/recycle"), Some(json!({"nodes": [n0]}))).await;
    assert_eq!(r.status, 202, "{}", r.text);
    let p = h.get(&pool_path).await.json()["node_pool"].clone();
    assert_eq!(p["count"], 2);
    let old = p["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["id"] == n0)
        .cloned()
        .expect("old node");
    assert_eq!(old["status"]["state"], "draining");
    assert!(
        p["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .any(|n| n["status"]["state"] == "provisioning")
    );
    let r = h
        .call(
            Method::POST,
            &format!("{pool_path}/recycle"),
            Some(json!({"nodes": ["00000000-0000-4000-8000-000000000000"]})),
        )
        .await;
    assert_error(&r, 404, "not_found");
    // Its scope is `kubernetes:delete` (§4.4), not the `kubernetes:update` of other pool
    // changes.
    let updater = "dop_v1_updater";
    h.sim.state().model().add_scoped_token(updater, &["kubernetes:read", "kubernetes:update"]);
    let r = testing::send(
        h.http
            .post(h.url(&format!("{pool_path}/recycle")))
            .bearer_auth(updater)
            .json(&json!({"nodes": [p["nodes"][1]["id"]]})),
    )
    .await;
    assert_error(&r, 403, "forbidden");
}

/// §4.4: cluster user `{kubernetes_cluster_user: {username, groups[]}}` and status
/// messages `{messages: [...]}`.
#[tokio::test]
async fn cluster_user_and_status_messages_envelopes() {
    let h = H::start(SimConfig::default()).await;
    let c = h.create_cluster(cluster_body("user")).await;
    let id = str_of(&c["id"], "id");
    let u = h.get(&format!("/v2/kubernetes/clusters/{id}/user")).await;
    assert_eq!(u.status, 200);
    let u = u.json();
    assert!(u["kubernetes_cluster_user"]["username"].is_string(), "{u}");
    assert!(u["kubernetes_cluster_user"]["groups"].is_array(), "{u}");
    let m = h
        .get(&format!("/v2/kubernetes/clusters/{id}/status_messages?since=2026-01-01T00:00:00Z"))
        .await;
    assert_eq!(m.status, 200);
    assert!(m.json()["messages"].is_array());
}

/// §4.3/§9: an injected `error` state shows with its `status.message` (fixture: the
/// model's fault injection).
#[tokio::test]
async fn error_state_carries_its_message() {
    let h = H::start(SimConfig::default()).await;
    let c = h.create_cluster(cluster_body("err")).await;
    let id = str_of(&c["id"], "id");
    assert!(h.sim.state().model().force_cluster_state(
        id,
        bc_sim::model::ClusterState::Error,
        "droplet create failed"
    ));
    let c =
        h.get(&format!("/v2/kubernetes/clusters/{id}")).await.json()["kubernetes_cluster"].clone();
    assert_eq!(c["status"], json!({"state": "error", "message": "droplet create failed"}));
}

/// §1/§9: an injected 500 answers `server_error` in the usual error body (fixture: the
/// model's fault injection on pool PUT, as DOKS#16 saw).
#[tokio::test]
async fn injected_server_error_is_500_server_error() {
    let h = H::start(SimConfig::default()).await;
    let c = h.create_cluster(cluster_body("five")).await;
    let id = str_of(&c["id"], "id");
    let pid = str_of(&c["node_pools"][0]["id"], "pool id");
    let key = bc_sim::model::routes::key("PUT", bc_sim::model::routes::NODE_POOL);
    h.sim.state().model().inject_failures(&key, 1, bc_sim::model::Fault::ServerError);
    let path = format!("/v2/kubernetes/clusters/{id}/node_pools/{pid}");
    let body = json!({"name": "workers", "count": 3});
    assert_error(&h.call(Method::PUT, &path, Some(body.clone())).await, 500, "server_error");
    assert_eq!(h.call(Method::PUT, &path, Some(body)).await.status, 202);
}

/// §2: limits are counted per token — one token's burst does not throttle another.
#[tokio::test]
async fn rate_limits_are_per_token() {
    let other = "dop_v1_other";
    let h = H::start(SimConfig {
        rate_limits: RateLimits { per_hour: 100, per_minute: 2 },
        tokens: vec![TEST_TOKEN.to_owned(), other.to_owned()],
        ..SimConfig::default()
    })
    .await;
    for _ in 0..2 {
        assert_eq!(h.get("/v2/load_balancers").await.status, 200);
    }
    assert_eq!(h.get("/v2/load_balancers").await.status, 429);
    let r = testing::send(h.http.get(h.url("/v2/load_balancers")).bearer_auth(other)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("ratelimit-remaining"), Some("99"));
}

/// §2: with the default limits (5,000/hour, 250/minute) the 251st request inside a
/// minute is 429 with `retry-after`.
#[tokio::test]
async fn default_burst_limit_is_250_per_minute() {
    let h = H::start(SimConfig::default()).await;
    for i in 0..250 {
        let r = h.get("/v2/load_balancers").await;
        assert_eq!(r.status, 200, "request {i}: {}", r.text);
    }
    let r = h.get("/v2/load_balancers").await;
    assert_error(&r, 429, "too_many_requests");
    assert!(r.header("retry-after").is_some());
    assert_eq!(r.header("ratelimit-remaining"), Some("4750"));
}

/// §0/§4.4 scopes: a custom-scoped token without the needed `<resource>:<verb>` is
/// refused (403, unconfirmed in the document) while one with it passes.
#[tokio::test]
async fn scoped_tokens_need_the_endpoint_scope() {
    let h = H::start(SimConfig::default()).await;
    let scoped = "dop_v1_readonly";
    h.sim.state().model().add_scoped_token(scoped, &["kubernetes:read"]);
    let ok = testing::send(h.http.get(h.url("/v2/kubernetes/clusters")).bearer_auth(scoped)).await;
    assert_eq!(ok.status, 200, "{}", ok.text);
    let no = testing::send(
        h.http.post(h.url("/v2/kubernetes/clusters")).bearer_auth(scoped).json(&cluster_body("s")),
    )
    .await;
    assert_error(&no, 403, "forbidden");
    let no = testing::send(h.http.get(h.url("/v2/load_balancers")).bearer_auth(scoped)).await;
    assert_error(&no, 403, "forbidden");
}

/// DigitalOcean's `cluster.yml` (openapi `resources/kubernetes/models`) and its response
/// example: a cluster shows every optional block — control-plane firewall, autoscaler
/// configuration, SSO, routing agent, the GPU/RDMA/CoreDNS/P2P plugins — with its
/// defaults when the create left it out, plus `isolated_workers` and the worker subnet;
/// what a create sets is echoed; the NVIDIA plugin is on for a cluster with an NVIDIA GPU
/// pool ("enabled by default for clusters with an Nvidia GPU node pool").
#[tokio::test]
async fn cluster_objects_carry_every_documented_block_with_defaults() {
    let h = H::start(SimConfig::default()).await;
    let c = h.create_cluster(cluster_body("plain")).await;
    for (block, want) in [
        ("control_plane_firewall", json!({"enabled": false, "allowed_addresses": []})),
        ("sso", json!({"enabled": false, "required": false})),
        ("routing_agent", json!({"enabled": false})),
        ("amd_gpu_device_plugin", json!({"enabled": false})),
        ("amd_gpu_device_metrics_exporter_plugin", json!({"enabled": false})),
        ("nvidia_gpu_device_plugin", json!({"enabled": false})),
        ("rdma_shared_dev_plugin", json!({"enabled": false})),
        ("coredns_autoscaler", json!({"enabled": false})),
        ("p2p_oci_registry_plugin", json!({"enabled": false})),
    ] {
        assert_eq!(c[block], want, "{block}");
    }
    assert!(c["cluster_autoscaler_configuration"].is_object());
    assert_eq!(c["isolated_workers"], false);
    assert!(is_uuid(str_of(&c["worker_subnet_uuid"], "worker_subnet_uuid")));
    assert_eq!(c["registry_enabled"], false);

    let mut body = cluster_body("gpu");
    body["node_pools"][0]["size"] = json!("gpu-h100x1-80gb");
    body["routing_agent"] = json!({"enabled": true});
    body["control_plane_firewall"] = json!({"enabled": true, "allowed_addresses": ["1.2.3.4/32"]});
    body["cluster_autoscaler_configuration"] = json!({"scale_down_utilization_threshold": 0.65, "scale_down_unneeded_time": "1m0s", "expanders": ["priority", "random"]});
    body["sso"] =
        json!({"enabled": true, "issuer_url": "https://sso.example.com", "client_id": "doks"});
    let c = h.create_cluster(body).await;
    assert_eq!(c["nvidia_gpu_device_plugin"], json!({"enabled": true}));
    assert_eq!(c["routing_agent"], json!({"enabled": true}));
    assert_eq!(c["control_plane_firewall"]["allowed_addresses"], json!(["1.2.3.4/32"]));
    assert_eq!(c["cluster_autoscaler_configuration"]["expanders"], json!(["priority", "random"]));
    assert_eq!(c["sso"]["issuer_url"], "https://sso.example.com");

    // SSO: `required` only with `enabled`; issuer and client required when enabled.
    let mut bad = cluster_body("bad");
    bad["sso"] = json!({"enabled": true});
    let r = h.call(Method::POST, "/v2/kubernetes/clusters", Some(bad)).await;
    assert_error(&r, 422, "unprocessable_entity");
    let mut bad = cluster_body("bad");
    bad["cluster_autoscaler_configuration"] = json!({"expanders": ["fastest"]});
    let r = h.call(Method::POST, "/v2/kubernetes/clusters", Some(bad)).await;
    assert_error(&r, 422, "unprocessable_entity");
}

/// research/digitalocean.md §5.1 (`tag`: "droplet tag") and §4.1/§4.2 (the server tags
/// clusters' and pools' droplets `k8s`, `k8s:<cluster id>`, `k8s:worker`): a load balancer
/// targeted by tag lists the ids of the droplets carrying the tag — for `k8s:<cluster
/// id>`, the cluster's nodes — and follows them as nodes come and go; a GET→PUT round
/// trip of it is accepted.
#[tokio::test]
async fn a_tag_targeted_load_balancer_lists_the_tagged_droplets() {
    let h = H::start(SimConfig::default()).await;
    let c = h.running_cluster(cluster_body("tagged")).await;
    let id = str_of(&c["id"], "id").to_owned();
    let mut nodes: Vec<u64> = c["node_pools"][0]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| str_of(&n["droplet_id"], "droplet_id").parse().unwrap())
        .collect();
    nodes.sort_unstable();
    let mut body = lb_body("by-tag");
    body.as_object_mut().unwrap().remove("droplet_ids");
    body["tag"] = json!(format!("k8s:{id}"));
    let lb = h.active_lb(body).await;
    assert_eq!(lb["droplet_ids"], json!(nodes));
    assert_eq!(lb["tag"], format!("k8s:{id}"));

    // A GET→PUT round trip (both `tag` and the listed `droplet_ids`) is no second backend.
    let lb_id = str_of(&lb["id"], "id").to_owned();
    let r = h.call(Method::PUT, &format!("/v2/load_balancers/{lb_id}"), Some(lb.clone())).await;
    assert_eq!(r.status, 200, "{}", r.text);

    // A pool grows: its new droplet joins the list once it exists.
    let pool = str_of(&c["node_pools"][0]["id"], "id").to_owned();
    let r = h
        .call(
            Method::PUT,
            &format!("/v2/kubernetes/clusters/{id}/node_pools/{pool}"),
            Some(json!({"name": "workers", "count": 3})),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.text);
    h.step(60);
    let r = h.get(&format!("/v2/load_balancers/{lb_id}")).await;
    assert_eq!(r.json()["load_balancer"]["droplet_ids"].as_array().unwrap().len(), 3);
}
