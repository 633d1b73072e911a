//! The DigitalOcean face over real loopback HTTP with a plain reqwest client: envelopes,
//! status codes, pagination, error bodies and ids, auth, headers, kubeconfig/credentials
//! (research/digitalocean.md §1–§5, §9). Time moves only by stepping a `ManualClock`.

use std::collections::HashSet;

use bc_domain::Timestamp;
use bc_sim::config::{RateLimits, SimConfig};
use bc_sim::model::{Fault, routes};
use bc_sim::testing::{self, Served, TEST_TOKEN as T};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// The shared cluster body, its pool labelled `role=bc` and tainted
/// `dedicated=bc:NoSchedule`.
fn cluster_body(name: &str) -> Value {
    let mut body = testing::cluster_body(name);
    body["node_pools"][0]["labels"] = json!({"role": "bc"});
    body["node_pools"][0]["taints"] =
        json!([{"key": "dedicated", "value": "bc", "effect": "NoSchedule"}]);
    body
}

fn assert_error(status: StatusCode, body: &Value, want_status: u16, want_id: &str) {
    assert_eq!(status.as_u16(), want_status, "{body}");
    assert_eq!(body["id"], want_id, "{body}");
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert!(body["request_id"].as_str().is_some_and(|m| !m.is_empty()));
}

#[tokio::test]
async fn cluster_lifecycle_envelopes_and_statuses() {
    let h = Served::start(SimConfig::default()).await;
    let r = h.call_as(Method::POST, routes::CLUSTERS, Some(T), Some(cluster_body("alpha"))).await;
    assert_eq!(r.status, StatusCode::CREATED);
    for name in ["x-request-id", "ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"] {
        assert!(r.headers.contains_key(name), "{name}");
    }
    let v: Value = r.json();
    let c = &v["kubernetes_cluster"];
    let id = c["id"].as_str().unwrap().to_owned();
    assert_eq!(c["status"]["state"], "provisioning");
    assert_eq!(c["status"]["message"], "provisioning");
    assert_eq!((c["ipv4"].as_str(), c["endpoint"].as_str()), (Some(""), Some("")));
    assert_eq!(c["region"], "nyc1");
    assert_eq!(c["version"], "1.33.1-do.0");
    assert!(c["tags"].as_array().unwrap().contains(&json!(format!("k8s:{id}"))));
    let pool = &c["node_pools"][0];
    let tags = pool["tags"].as_array().unwrap();
    assert!(tags.contains(&json!("k8s")) && tags.contains(&json!("k8s:worker")));
    assert_eq!(pool["nodes"][0]["name"], "");
    assert_eq!(pool["nodes"][0]["droplet_id"], "");
    assert_eq!(pool["nodes"][0]["status"]["state"], "provisioning");
    assert_eq!(pool["taints"][0]["effect"], "NoSchedule");

    // Kubeconfig and credentials: 404 until running.
    let r = h
        .call_as(Method::GET, &format!("/v2/kubernetes/clusters/{id}/kubeconfig"), Some(T), None)
        .await;
    let rid = r.headers["x-request-id"].to_str().unwrap().to_owned();
    let (status, body) = (r.status, r.json());
    assert_error(status, &body, 404, "not_found");
    assert_eq!(body["request_id"], rid.as_str());
    let (s, b) = h
        .call(Method::GET, &format!("/v2/kubernetes/clusters/{id}/credentials"), None)
        .await
        .parts();
    assert_error(s, &b, 404, "not_found");

    h.step(2);
    let (s, v) = h.call(Method::GET, &format!("/v2/kubernetes/clusters/{id}"), None).await.parts();
    assert_eq!(s, StatusCode::OK);
    let c = &v["kubernetes_cluster"];
    assert_eq!(c["status"]["state"], "running");
    // The cluster's API is served over TLS at the root of its own loopback address.
    let endpoint = h.sim.state().model().cluster_endpoint(&id);
    assert!(endpoint.starts_with("https://127.0.0.1:"), "{endpoint}");
    assert_eq!(c["endpoint"], endpoint.as_str());
    assert!(!c["ipv4"].as_str().unwrap().is_empty());
    let node = &c["node_pools"][0]["nodes"][0];
    assert!(node["name"].as_str().unwrap().starts_with("workers-"));
    assert!(node["droplet_id"].as_str().unwrap().parse::<u64>().is_ok());

    let r = h
        .call_as(
            Method::GET,
            &format!("/v2/kubernetes/clusters/{id}/kubeconfig?expiry_seconds=600"),
            Some(T),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.headers["content-type"], "application/yaml");
    let yaml = r.text.clone();
    assert!(yaml.contains(&format!("server: \"{endpoint}\"")));
    assert!(yaml.contains("current-context: \"do-nyc1-alpha\""));
    assert!(yaml.contains("- name: \"do-nyc1-alpha-admin\""));
    let token_line = yaml.lines().find_map(|l| l.trim().strip_prefix("token: ")).unwrap();
    let kubeconfig_token: String = serde_json::from_str(token_line).unwrap();
    let now = h.sim.state().clock.now();
    assert!(h.sim.state().model().cluster_accepts(&id, Some(&kubeconfig_token), now));
    let (s, cr) = h
        .call(Method::GET, &format!("/v2/kubernetes/clusters/{id}/credentials"), None)
        .await
        .parts();
    assert_eq!(s, StatusCode::OK);
    assert_eq!(cr["server"], endpoint.as_str());
    let token = cr["token"].as_str().unwrap();
    assert_ne!(token, kubeconfig_token, "each request hands out a token of its own");
    assert!(h.sim.state().model().cluster_accepts(&id, Some(token), now));
    assert!(cr["client_certificate_data"].is_null() && cr["client_key_data"].is_null());
    assert!(!cr["certificate_authority_data"].as_str().unwrap().is_empty());
    assert!(Timestamp::parse_rfc3339(cr["expires_at"].as_str().unwrap()).is_ok());

    // Update (202), upgrades (null at the newest version), bad upgrade (422), options.
    let (s, v) = h
        .call(
            Method::PUT,
            &format!("/v2/kubernetes/clusters/{id}"),
            Some(json!({"name": "alpha", "tags": ["team"]})),
        )
        .await
        .parts();
    assert_eq!(s, StatusCode::ACCEPTED);
    assert_eq!(v["kubernetes_cluster"]["tags"], json!(["team", "k8s", format!("k8s:{id}")]));
    let (s, v) =
        h.call(Method::GET, &format!("/v2/kubernetes/clusters/{id}/upgrades"), None).await.parts();
    assert_eq!(s, StatusCode::OK);
    assert!(v["available_upgrade_versions"].is_null(), "{v}");
    let (s, v) =
        h.call(Method::GET, &format!("/v2/kubernetes/clusters/{id}/user"), None).await.parts();
    assert_eq!(s, StatusCode::OK);
    assert!(v["kubernetes_cluster_user"]["username"].is_string());
    let (s, v) = h
        .call(Method::GET, &format!("/v2/kubernetes/clusters/{id}/status_messages"), None)
        .await
        .parts();
    assert_eq!((s, v), (StatusCode::OK, json!({"messages": []})));
    let (s, v) = h
        .call(
            Method::POST,
            &format!("/v2/kubernetes/clusters/{id}/upgrade"),
            Some(json!({"version": "1.31.9-do.0"})),
        )
        .await
        .parts();
    assert_error(s, &v, 422, "unprocessable_entity");
    assert_eq!(v["message"], "invalid upgrade path");

    // Node pools: list (no paging), create 201, get, update 202, delete node 202, delete 204.
    let (s, v) = h
        .call(Method::GET, &format!("/v2/kubernetes/clusters/{id}/node_pools"), None)
        .await
        .parts();
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["node_pools"].as_array().unwrap().len(), 1);
    let (s, v) = h
        .call(
            Method::POST,
            &format!("/v2/kubernetes/clusters/{id}/node_pools"),
            Some(json!({"name": "extra", "size": "c-4", "count": 1})),
        )
        .await
        .parts();
    assert_eq!(s, StatusCode::CREATED);
    let pid = v["node_pool"]["id"].as_str().unwrap().to_owned();
    assert_eq!(v["node_pool"]["nodes"][0]["status"]["state"], "provisioning");
    let (s, v) = h
        .call(
            Method::PUT,
            &format!("/v2/kubernetes/clusters/{id}/node_pools/{pid}"),
            Some(json!({"name": "extra", "count": 2})),
        )
        .await
        .parts();
    assert_eq!(s, StatusCode::ACCEPTED);
    assert_eq!(v["node_pool"]["count"], 2);
    h.step(1);
    let (_, v) = h
        .call(Method::GET, &format!("/v2/kubernetes/clusters/{id}/node_pools/{pid}"), None)
        .await
        .parts();
    let nid = v["node_pool"]["nodes"][0]["id"].as_str().unwrap().to_owned();
    let r = h
        .call_as(
            Method::DELETE,
            &format!(
                "/v2/kubernetes/clusters/{id}/node_pools/{pid}/nodes/{nid}?skip_drain=1&replace=1"
            ),
            Some(T),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED);
    let (_, v) = h
        .call(Method::GET, &format!("/v2/kubernetes/clusters/{id}/node_pools/{pid}"), None)
        .await
        .parts();
    assert_eq!(v["node_pool"]["count"], 2);
    assert_eq!(v["node_pool"]["nodes"][0]["status"]["state"], "deleting");
    let r = h
        .call_as(
            Method::DELETE,
            &format!("/v2/kubernetes/clusters/{id}/node_pools/{pid}"),
            Some(T),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert!(r.text.clone().is_empty());

    // Delete: 204, deleting, then 404.
    let r =
        h.call_as(Method::DELETE, &format!("/v2/kubernetes/clusters/{id}"), Some(T), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let (_, v) = h.call(Method::GET, &format!("/v2/kubernetes/clusters/{id}"), None).await.parts();
    assert_eq!(v["kubernetes_cluster"]["status"]["state"], "deleting");
    h.step(1);
    let (s, v) = h.call(Method::GET, &format!("/v2/kubernetes/clusters/{id}"), None).await.parts();
    assert_error(s, &v, 404, "not_found");
}

#[tokio::test]
async fn options_and_upgrade_envelopes() {
    let h = Served::start(SimConfig::default()).await;
    let (s, v) = h.call(Method::GET, routes::OPTIONS, None).await.parts();
    assert_eq!(s, StatusCode::OK);
    let o = &v["options"];
    assert_eq!(o["regions"].as_array().unwrap().len(), 10);
    assert!(
        o["regions"].as_array().unwrap().contains(&json!({"name": "Frankfurt 1", "slug": "fra1"}))
    );
    assert!(
        o["sizes"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "gpu-h100x1-80gb", "slug": "gpu-h100x1-80gb"}))
    );
    let slugs: Vec<&str> =
        o["versions"].as_array().unwrap().iter().map(|v| v["slug"].as_str().unwrap()).collect();
    assert_eq!(slugs, vec!["1.33.1-do.0", "1.32.6-do.1", "1.31.9-do.0"]);
    assert_eq!(o["versions"][1]["kubernetes_version"], "1.32.6");

    let mut body = cluster_body("old");
    body["version"] = json!("1.31.9-do.0");
    let (_, v) = h.call(Method::POST, routes::CLUSTERS, Some(body)).await.parts();
    let id = v["kubernetes_cluster"]["id"].as_str().unwrap().to_owned();
    h.step(2);
    let (_, v) =
        h.call(Method::GET, &format!("/v2/kubernetes/clusters/{id}/upgrades"), None).await.parts();
    let ups: Vec<&str> = v["available_upgrade_versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["slug"].as_str().unwrap())
        .collect();
    assert_eq!(ups, vec!["1.32.5-do.0", "1.32.6-do.1"]);
    let r = h
        .call_as(
            Method::POST,
            &format!("/v2/kubernetes/clusters/{id}/upgrade"),
            Some(T),
            Some(json!({"version": "1.32.6-do.1"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED);
    assert!(r.text.clone().is_empty());
    let (_, v) = h.call(Method::GET, &format!("/v2/kubernetes/clusters/{id}"), None).await.parts();
    assert_eq!(v["kubernetes_cluster"]["status"]["state"], "upgrading");
    h.step(2);
    let (_, v) = h.call(Method::GET, &format!("/v2/kubernetes/clusters/{id}"), None).await.parts();
    assert_eq!(v["kubernetes_cluster"]["version"], "1.32.6-do.1");
    assert_eq!(v["kubernetes_cluster"]["status"]["state"], "running");
}

#[tokio::test]
async fn load_balancer_lifecycle_over_http() {
    let h = Served::start(SimConfig::default()).await;
    let (s, v) =
        h.call(Method::POST, routes::LOAD_BALANCERS, Some(testing::lb_body("web"))).await.parts();
    assert_eq!(s, StatusCode::ACCEPTED);
    let lb = &v["load_balancer"];
    let id = lb["id"].as_str().unwrap().to_owned();
    assert_eq!((lb["status"].as_str(), lb["ip"].as_str()), (Some("new"), Some("")));
    assert_eq!(lb["region"]["slug"], "nyc1");
    assert_eq!(lb["region"]["name"], "New York 1");
    assert_eq!(lb["type"], "REGIONAL");
    assert_eq!((lb["size_unit"].as_u64(), lb["size"].as_str()), (Some(1), Some("lb-small")));
    assert_eq!(lb["droplet_ids"], json!([3164444]));
    assert_eq!(lb["tag"], "");
    assert_eq!(
        lb["health_check"],
        json!({"protocol": "http", "port": 80, "path": "/", "check_interval_seconds": 10, "response_timeout_seconds": 5, "healthy_threshold": 5, "unhealthy_threshold": 3})
    );
    assert_eq!(lb["sticky_sessions"], json!({"type": "none"}));

    let (s, v) = h
        .call(Method::PUT, &format!("/v2/load_balancers/{id}"), Some(testing::lb_body("web")))
        .await
        .parts();
    assert_error(s, &v, 403, "forbidden");
    h.step(1);
    let (s, v) = h.call(Method::GET, &format!("/v2/load_balancers/{id}"), None).await.parts();
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["load_balancer"]["status"], "active");
    assert!(!v["load_balancer"]["ip"].as_str().unwrap().is_empty());
    let mut renamed = testing::lb_body("web2");
    renamed["region"] = v["load_balancer"]["region"].clone(); // a GET's region object is accepted back
    let (s, v) =
        h.call(Method::PUT, &format!("/v2/load_balancers/{id}"), Some(renamed)).await.parts();
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["load_balancer"]["name"], "web2");

    let (s, v) =
        h.call(Method::POST, routes::LOAD_BALANCERS, Some(testing::lb_body("web2"))).await.parts();
    assert_error(s, &v, 422, "unprocessable_entity");
    assert_eq!(v["message"], "name is not unique");

    let (s, v) = h
        .call(Method::POST, routes::LOAD_BALANCERS, Some(json!({"name": "g", "type": "GLOBAL", "target_load_balancer_ids": [id], "domains": [{"name": "x.example.com", "is_managed": false}]})))
        .await.parts();
    assert_eq!(s, StatusCode::ACCEPTED);
    let g = &v["load_balancer"];
    assert!(g.get("region").is_none());
    assert_eq!(g["forwarding_rules"][0]["target_port"], 80, "the one implied rule");
    assert_eq!(g["domains"][0]["name"], "x.example.com");
    assert_eq!(g["glb_settings"]["target_protocol"], "http");

    let r = h.call_as(Method::DELETE, &format!("/v2/load_balancers/{id}"), Some(T), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let (s, v) = h.call(Method::GET, &format!("/v2/load_balancers/{id}"), None).await.parts();
    assert_error(s, &v, 404, "not_found");
}

#[tokio::test]
async fn pagination_across_pages() {
    let h = Served::start(SimConfig::default()).await;
    for i in 0..45 {
        let (s, _) = h
            .call(
                Method::POST,
                routes::LOAD_BALANCERS,
                Some(testing::lb_body(&format!("lb-{i:02}"))),
            )
            .await
            .parts();
        assert_eq!(s, StatusCode::ACCEPTED);
    }
    let base = format!("{}/v2/load_balancers", h.server.url());
    let (_, p1) = h.call(Method::GET, "/v2/load_balancers?per_page=20", None).await.parts();
    assert_eq!(p1["meta"]["total"], 45);
    assert_eq!(p1["load_balancers"].as_array().unwrap().len(), 20);
    let pages = &p1["links"]["pages"];
    assert!(pages.get("first").is_none() && pages.get("prev").is_none());
    assert_eq!(pages["next"], format!("{base}?page=2&per_page=20").as_str());
    assert_eq!(pages["last"], format!("{base}?page=3&per_page=20").as_str());

    let (_, p2) = h.call(Method::GET, pages["next"].as_str().unwrap(), None).await.parts();
    let pages2 = &p2["links"]["pages"];
    assert_eq!(pages2["first"], format!("{base}?page=1&per_page=20").as_str());
    assert_eq!(pages2["prev"], format!("{base}?page=1&per_page=20").as_str());
    assert_eq!(pages2["next"], format!("{base}?page=3&per_page=20").as_str());
    let (_, p3) = h.call(Method::GET, pages2["last"].as_str().unwrap(), None).await.parts();
    assert_eq!(p3["load_balancers"].as_array().unwrap().len(), 5);
    let pages3 = &p3["links"]["pages"];
    assert!(pages3.get("next").is_none() && pages3.get("last").is_none());
    assert_eq!(pages3["prev"], format!("{base}?page=2&per_page=20").as_str());

    // Following `next` until absent visits every object once (bounded loop).
    let mut seen = HashSet::new();
    let mut url = Some("/v2/load_balancers?per_page=20".to_owned());
    for _ in 0..10 {
        let Some(u) = url.take() else { break };
        let (_, v) = h.call(Method::GET, &u, None).await.parts();
        for lb in v["load_balancers"].as_array().unwrap() {
            assert!(seen.insert(lb["id"].as_str().unwrap().to_owned()));
        }
        url = v["links"]["pages"]["next"].as_str().map(str::to_owned);
    }
    assert_eq!(seen.len(), 45);

    // Default 20 per page; per_page capped at 200; one page → empty links.
    let (_, d) = h.call(Method::GET, "/v2/load_balancers", None).await.parts();
    assert_eq!(d["load_balancers"].as_array().unwrap().len(), 20);
    let (_, all) = h.call(Method::GET, "/v2/load_balancers?per_page=500", None).await.parts();
    assert_eq!(all["load_balancers"].as_array().unwrap().len(), 45);
    assert_eq!(all["links"], json!({}));
    let (_, c) = h.call(Method::GET, "/v2/kubernetes/clusters", None).await.parts();
    assert_eq!(c, json!({"kubernetes_clusters": [], "links": {}, "meta": {"total": 0}}));
}

#[tokio::test]
async fn errors_auth_and_headers() {
    let h = Served::start(SimConfig::default()).await;
    for token in [None, Some("dop_v1_wrong")] {
        let r = h.call_as(Method::GET, routes::CLUSTERS, token, None).await;
        assert!(
            r.headers.contains_key("x-request-id") && r.headers.contains_key("ratelimit-remaining")
        );
        let (s, b) = (r.status, r.json());
        assert_error(s, &b, 401, "unauthorized");
        assert_eq!(b["message"], "Unable to authenticate you");
    }
    let (s, b) = h.call(Method::GET, routes::ACCOUNT, None).await.parts();
    assert_eq!(s, StatusCode::OK);
    assert_eq!(b["account"]["status"], "active");
    let (s, b) = h.call(Method::GET, "/v2/droplets", None).await.parts();
    assert_error(s, &b, 404, "not_found");
    let (s, b) = h.call(Method::PATCH, routes::LOAD_BALANCERS, None).await.parts();
    assert_error(s, &b, 404, "not_found");
    let (s, b) = h
        .call(Method::GET, "/v2/kubernetes/clusters/00000000-0000-4000-8000-000000000000", None)
        .await
        .parts();
    assert_error(s, &b, 404, "not_found");
    let r =
        testing::send(h.http.post(h.url(routes::CLUSTERS)).bearer_auth(T).body("{not json")).await;
    let (s, b) = (r.status, r.json());
    assert_error(s, &b, 400, "bad_request");
    let (s, b) = h.call(Method::POST, routes::CLUSTERS, Some(json!({"name": "x"}))).await.parts();
    assert_error(s, &b, 422, "unprocessable_entity");

    // Remaining counts down per request; request ids differ.
    let r1 = h.call_as(Method::GET, routes::CLUSTERS, Some(T), None).await;
    let r2 = h.call_as(Method::GET, routes::CLUSTERS, Some(T), None).await;
    let rem = |r: &testing::Reply| {
        r.headers["ratelimit-remaining"].to_str().unwrap().parse::<u32>().unwrap()
    };
    assert_eq!(rem(&r1), rem(&r2) + 1);
    assert_ne!(r1.headers["x-request-id"], r2.headers["x-request-id"]);
    assert_eq!(r1.headers["ratelimit-limit"], "5000");

    // Injected faults: 429 with retry-after, then 500, then through. Counted per route.
    let key = routes::key("GET", routes::LOAD_BALANCERS);
    h.sim.state().model().reset_request_counts();
    h.sim.state().model().inject_failures(&key, 1, Fault::TooManyRequests { retry_after: 9 });
    h.sim.state().model().inject_failures(&key, 1, Fault::ServerError);
    let r = h.call_as(Method::GET, routes::LOAD_BALANCERS, Some(T), None).await;
    assert_eq!(r.headers["retry-after"], "9");
    let (s, b) = (r.status, r.json());
    assert_error(s, &b, 429, "too_many_requests");
    let (s, b) = h.call(Method::GET, routes::LOAD_BALANCERS, None).await.parts();
    assert_error(s, &b, 500, "server_error");
    let (s, _) = h.call(Method::GET, routes::LOAD_BALANCERS, None).await.parts();
    assert_eq!(s, StatusCode::OK);
    let (s, _) =
        h.call(Method::GET, &format!("{}?page=2", routes::LOAD_BALANCERS), None).await.parts();
    assert_eq!(s, StatusCode::OK);
    assert_eq!(h.sim.state().model().request_count(&key), 4);
    let (s, _) = h.call(Method::GET, "/v2/load_balancers/abc", None).await.parts();
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(h.sim.state().model().request_count(&routes::key("GET", routes::LOAD_BALANCER)), 1);
}

#[tokio::test]
async fn burst_limit_sends_retry_after() {
    let config = SimConfig {
        rate_limits: RateLimits { per_hour: 100, per_minute: 2 },
        ..SimConfig::default()
    };
    let h = Served::start(config).await;
    for _ in 0..2 {
        assert_eq!(h.call(Method::GET, routes::OPTIONS, None).await.parts().0, StatusCode::OK);
    }
    let r = h.call_as(Method::GET, routes::OPTIONS, Some(T), None).await;
    assert_eq!(r.headers["retry-after"], "60");
    assert_eq!(r.headers["ratelimit-remaining"], "98");
    let (s, b) = (r.status, r.json());
    assert_error(s, &b, 429, "too_many_requests");
    assert_eq!(b["message"], "API rate limit exceeded.");
    h.step(60);
    assert_eq!(h.call(Method::GET, routes::OPTIONS, None).await.parts().0, StatusCode::OK);
}

#[tokio::test]
async fn associated_resources_over_http() {
    let h = Served::start(SimConfig::default()).await;
    let mut ids = Vec::new();
    for name in ["a", "b"] {
        let (_, v) = h.call(Method::POST, routes::CLUSTERS, Some(cluster_body(name))).await.parts();
        let id = v["kubernetes_cluster"]["id"].as_str().unwrap().to_owned();
        let mut lb = testing::lb_body(&format!("lb-{name}"));
        lb["tags"] = json!([format!("k8s:{id}")]);
        let (_, l) = h.call(Method::POST, routes::LOAD_BALANCERS, Some(lb)).await.parts();
        let vol = h.sim.state().model().inject_volume(T, &id, &format!("pvc-{name}")).unwrap();
        ids.push((id, l["load_balancer"]["id"].as_str().unwrap().to_owned(), vol));
    }
    let (a, a_lb, a_vol) = &ids[0];
    let (s, v) = h
        .call(
            Method::GET,
            &format!("/v2/kubernetes/clusters/{a}/destroy_with_associated_resources"),
            None,
        )
        .await
        .parts();
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        v,
        json!({"load_balancers": [{"id": a_lb, "name": "lb-a"}], "volumes": [{"id": a_vol, "name": "pvc-a"}], "volume_snapshots": []})
    );
    let r = h
        .call_as(
            Method::DELETE,
            &format!("/v2/kubernetes/clusters/{a}/destroy_with_associated_resources/selective"),
            Some(T),
            Some(json!({"volumes": [a_vol]})),
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(
        h.call(Method::GET, &format!("/v2/load_balancers/{a_lb}"), None).await.parts().0,
        StatusCode::OK
    );
    let (b, b_lb, _) = &ids[1];
    let r = h
        .call_as(
            Method::DELETE,
            &format!("/v2/kubernetes/clusters/{b}/destroy_with_associated_resources/dangerous"),
            Some(T),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(
        h.call(Method::GET, &format!("/v2/load_balancers/{b_lb}"), None).await.parts().0,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn droplets_and_rules_endpoints_and_list_lag() {
    let h = Served::start(SimConfig::default()).await;
    let mut tagged = testing::lb_body("tagged");
    tagged["droplet_ids"] = json!([]);
    tagged["tag"] = json!("web");
    let (_, v) = h.call(Method::POST, routes::LOAD_BALANCERS, Some(tagged)).await.parts();
    let tagged_id = v["load_balancer"]["id"].as_str().unwrap().to_owned();
    let (_, v) =
        h.call(Method::POST, routes::LOAD_BALANCERS, Some(testing::lb_body("ids"))).await.parts();
    let ids_id = v["load_balancer"]["id"].as_str().unwrap().to_owned();
    h.step(1);
    let (s, v) = h
        .call(
            Method::POST,
            &format!("/v2/load_balancers/{tagged_id}/droplets"),
            Some(json!({"droplet_ids": [5]})),
        )
        .await
        .parts();
    assert_error(s, &v, 422, "unprocessable_entity");
    let r = h
        .call_as(
            Method::POST,
            &format!("/v2/load_balancers/{ids_id}/droplets"),
            Some(T),
            Some(json!({"droplet_ids": [5]})),
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    h.step(1);
    let rule = json!({"forwarding_rules": [{"entry_protocol": "tcp", "entry_port": 5432, "target_protocol": "tcp", "target_port": 5432}]});
    let r = h
        .call_as(
            Method::POST,
            &format!("/v2/load_balancers/{ids_id}/forwarding_rules"),
            Some(T),
            Some(rule),
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let (_, v) = h.call(Method::GET, &format!("/v2/load_balancers/{ids_id}"), None).await.parts();
    assert_eq!(v["load_balancer"]["droplet_ids"], json!([3164444, 5]));
    assert_eq!(v["load_balancer"]["forwarding_rules"].as_array().unwrap().len(), 2);

    // CDN cache purge: GLOBAL only.
    let (s, v) =
        h.call(Method::DELETE, &format!("/v2/load_balancers/{ids_id}/cache"), None).await.parts();
    assert_error(s, &v, 422, "unprocessable_entity");
    let (_, v) = h
        .call(
            Method::POST,
            routes::LOAD_BALANCERS,
            Some(json!({"name": "g", "type": "GLOBAL", "target_load_balancer_ids": [ids_id]})),
        )
        .await
        .parts();
    let g = v["load_balancer"]["id"].as_str().unwrap().to_owned();
    let r =
        h.call_as(Method::DELETE, &format!("/v2/load_balancers/{g}/cache"), Some(T), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    h.step(1);

    // Eventual list consistency: a fresh object is missing from lists for a while.
    h.sim.state().model().set_list_lag(Some(std::time::Duration::from_secs(1)));
    let (_, _) =
        h.call(Method::POST, routes::LOAD_BALANCERS, Some(testing::lb_body("late"))).await.parts();
    let (_, v) = h.call(Method::GET, routes::LOAD_BALANCERS, None).await.parts();
    assert_eq!(v["meta"]["total"], 3);
    h.step(1);
    let (_, v) = h.call(Method::GET, routes::LOAD_BALANCERS, None).await.parts();
    assert_eq!(v["meta"]["total"], 4);
}
