//! The GKE face and token endpoint over HTTP on loopback, checked against Google's words
//! (research/gke.md): the JWT-bearer grant, clusters, node pools, operations, serverConfig,
//! the wire (enums as names or numbers, zero values left out), errors, limits and faults.

use bc_sim::SimConfig;
use bc_sim::gke_api::routes;
use bc_sim::model::gke::auth::{self, GOOGLE_TOKEN_URL};
use bc_sim::model::gke::{ClusterName, GkeError, GkeFault, SIM_PROJECT};
use bc_sim::model::routes::key;
use bc_sim::testing::{GKE_LOCATIONS, Reply, Served, bounded, send};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const P: &str = GKE_LOCATIONS;

async fn served() -> Served {
    Served::start(SimConfig::default()).await
}

async fn call(s: &Served, method: Method, path: &str, token: &str, body: Option<Value>) -> Reply {
    s.gke_call(method, path, token, body).await
}

async fn grant(s: &Served, assertion: &str) -> (StatusCode, Value) {
    s.gke_grant(assertion).await
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

// ----- clusters, node pools, operations -------------------------------------------------------

struct Gke {
    s: Served,
    token: String,
}

impl Gke {
    async fn start() -> Self {
        let s = served().await;
        let token = s.gke_access_token().await;
        Self { s, token }
    }
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        self.s.gke_call(method, path, &self.token, body).await.parts()
    }
    async fn ok(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        let (status, v) = self.call(method, path, body).await;
        assert_eq!(status, StatusCode::OK, "{path}: {v}");
        v
    }
    async fn get(&self, path: &str) -> Value {
        self.ok(Method::GET, path, None).await
    }
    async fn create(&self, location: &str, cluster: Value) -> Value {
        self.ok(Method::POST, &format!("{location}/clusters"), Some(json!({"cluster": cluster})))
            .await
    }
}

fn standard(name: &str, count: i64) -> Value {
    json!({"name": name, "nodePools": [{"name": "cpu", "initialNodeCount": count,
        "config": {"machineType": "e2-standard-4", "labels": {"better-compute.dev/flavor": "cpu"},
                   "taints": [{"key": "bc/gpu", "value": "true", "effect": "NO_SCHEDULE"}]}}]})
}

#[tokio::test]
async fn a_zonal_cluster_provisions_by_operation_and_serves_its_kubernetes_api_to_the_token() {
    bounded(async {
        let g = Gke::start().await;
        let op = g.create("us-central1-a", standard("c1", 2)).await;
        assert_eq!(op["operationType"], "CREATE_CLUSTER");
        assert_eq!(op["status"], "PENDING");
        let name = op["name"].as_str().unwrap();
        assert!(name.starts_with("operation-"), "{name}");
        assert!(op["selfLink"].as_str().unwrap().contains("/zones/us-central1-a/operations/"));
        assert!(!op["selfLink"].as_str().unwrap().contains("bc-sim-project"), "links carry the project number");
        let c = g.get("us-central1-a/clusters/c1").await;
        assert_eq!(c["status"], "PROVISIONING");
        assert!(c.get("endpoint").is_none() && c.get("masterAuth").is_none(), "{c}");
        // One operation at a time, in GKE's words.
        let (status, e) = g.call(Method::POST, "us-central1-a/clusters/c1:setResourceLabels",
            Some(json!({"resourceLabels": {"a": "b"}, "labelFingerprint": c["labelFingerprint"]}))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(e["error"]["status"], "FAILED_PRECONDITION");
        assert_eq!(e["error"]["errors"][0]["reason"], "failedPrecondition");
        assert_eq!(e["error"]["message"], format!("Cluster is running incompatible operation {name}."));
        g.s.step(1);
        assert_eq!(g.get(&format!("us-central1-a/operations/{name}")).await["status"], "RUNNING");
        g.s.step(2);
        let done = g.get(&format!("us-central1-a/operations/{name}")).await;
        assert_eq!(done["status"], "DONE");
        assert!(done.get("endTime").is_some() && done.get("error").is_none());
        let c = g.get("us-central1-a/clusters/c1").await;
        assert_eq!(c["status"], "RUNNING");
        assert_eq!(c["locations"], json!(["us-central1-a"]));
        let pool = &c["nodePools"][0];
        assert_eq!(pool["initialNodeCount"], 2);
        assert_eq!(pool["maxPodsConstraint"]["maxPodsPerNode"], "110", "int64 as a string");
        assert_eq!(pool["config"]["resourceLabels"]["goog-gke-node-pool-provisioning-model"], "on-demand");
        assert!(pool.get("nodeCount").is_none());
        let endpoint = c["endpoint"].as_str().unwrap();
        use base64::Engine as _;
        let ca = base64::engine::general_purpose::STANDARD
            .decode(c["masterAuth"]["clusterCaCertificate"].as_str().unwrap())
            .unwrap();
        let ca = String::from_utf8(ca).unwrap();
        assert_eq!(ca, g.s.ca_pem());
        let kube = bc_sim::testing::http_client_trusting(&ca);
        let nodes = format!("https://{endpoint}/api/v1/nodes");
        let r = send(kube.get(&nodes).bearer_auth(&g.token)).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        let items = r.json()["items"].as_array().unwrap().clone();
        assert_eq!(items.len(), 2);
        for n in &items {
            let labels = &n["metadata"]["labels"];
            assert_eq!(labels["cloud.google.com/gke-nodepool"], "cpu");
            assert_eq!(labels["node.kubernetes.io/instance-type"], "e2-standard-4");
            assert_eq!(labels["topology.kubernetes.io/zone"], "us-central1-a");
            assert_eq!(labels["topology.kubernetes.io/region"], "us-central1");
            assert_eq!(labels["better-compute.dev/flavor"], "cpu");
            assert_eq!(n["spec"]["taints"][0]["key"], "bc/gpu");
            let name = n["metadata"]["name"].as_str().unwrap();
            assert!(name.starts_with("gke-c1-cpu-"), "{name}");
            let pid = n["spec"]["providerID"].as_str().unwrap();
            assert_eq!(pid, format!("gce://bc-sim-project/us-central1-a/{name}"));
        }
        let r = send(kube.get(&nodes).bearer_auth("ya29.unknown")).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        assert_eq!(g.s.sim.state().model().request_count(&key("POST", routes::CLUSTERS)), 1);
    })
    .await;
}

#[tokio::test]
async fn a_regional_cluster_counts_nodes_per_zone_and_resizes_per_zone() {
    bounded(async {
        let g = Gke::start().await;
        g.create("us-central1", standard("r1", 1)).await;
        g.s.step(3);
        let c = g.get("us-central1/clusters/r1").await;
        assert_eq!(c["locations"].as_array().unwrap().len(), 3);
        let id = cluster_id(&g);
        let nodes =
            g.s.sim
                .state()
                .model()
                .cluster_nodes(&id, bc_domain::ports::Clock::now(&*g.s.clock))
                .unwrap();
        assert_eq!(nodes.len(), 3, "one per zone");
        let zones: std::collections::BTreeSet<_> =
            nodes.iter().map(|n| n.labels["topology.kubernetes.io/zone"].clone()).collect();
        assert_eq!(zones.len(), 3);
        let op = g
            .ok(
                Method::POST,
                "us-central1/clusters/r1/nodePools/cpu:setSize",
                Some(json!({"nodeCount": 2})),
            )
            .await;
        assert_eq!(op["operationType"], "SET_NODE_POOL_SIZE");
        assert_eq!(g.get("us-central1/clusters/r1/nodePools/cpu").await["status"], "RECONCILING");
        g.s.step(3);
        let id = cluster_id(&g);
        let nodes =
            g.s.sim
                .state()
                .model()
                .cluster_nodes(&id, bc_domain::ports::Clock::now(&*g.s.clock))
                .unwrap();
        assert_eq!(nodes.len(), 6);
        let pool = g.get("us-central1/clusters/r1/nodePools/cpu").await;
        assert_eq!(
            (pool["status"].as_str(), pool["initialNodeCount"].as_i64()),
            (Some("RUNNING"), Some(1))
        );
    })
    .await;
}

fn cluster_id(g: &Gke) -> String {
    let now = bc_domain::ports::Clock::now(&*g.s.clock);
    let mut m = g.s.sim.state().model();
    let all = m.gke_clusters(SIM_PROJECT, "-", now).unwrap();
    all[0].model.as_ref().unwrap().id.clone()
}

#[tokio::test]
async fn names_labels_and_conflicts_are_refused_in_gkes_words() {
    bounded(async {
        let g = Gke::start().await;
        let long = "a".repeat(41);
        for (cluster, says) in [
            (standard(&long, 1), "Must be a match of regex"),
            (standard("1abc", 1), "Invalid value for field \"cluster.name\""),
            (json!({"name": "ok", "resourceLabels": {"better-compute.dev/x": "y"}, "initialNodeCount": 1}), "label key"),
            (json!({"name": "ok"}), "initial_node_count must be greater than zero"),
            (json!({"name": "ok", "initialClusterVersion": "1.20", "initialNodeCount": 1}), "Master version \"1.20\" is unsupported."),
        ] {
            let (status, e) = g.call(Method::POST, "us-central1-a/clusters", Some(json!({"cluster": cluster}))).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");
            assert_eq!(e["error"]["status"], "INVALID_ARGUMENT");
            assert!(e["error"]["message"].as_str().unwrap().contains(says), "{e}");
        }
        let (status, e) = g.call(Method::POST, "us-central1-a/clusters", Some(json!({"cluster": {"name": "p", "nodePools": [{"name": "32-by-1-pool", "initialNodeCount": 1}]}}))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(e["error"]["message"], "Invalid value for field \"node_pool.name\": \"32-by-1-pool\". Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?)' (only alphanumerics and '-' allowed, must start with a letter and end with an alphanumeric, and must be no longer than 40 characters).");
        g.create("us-central1-a", standard("dup", 1)).await;
        let (status, e) = g.call(Method::POST, "us-central1-a/clusters", Some(json!({"cluster": standard("dup", 1)}))).await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert_eq!(e["error"]["message"], "Already exists: projects/bc-sim-project/locations/us-central1-a/clusters/dup.");
        let (status, e) = g.call(Method::GET, "us-central1-a/clusters/nope", None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(e["error"]["message"], "Not found: projects/bc-sim-project/locations/us-central1-a/clusters/nope.");
        assert_eq!(e["error"]["errors"][0]["reason"], "notFound");
    })
    .await;
}

#[tokio::test]
async fn labels_need_the_current_fingerprint_and_change_it() {
    bounded(async {
        let g = Gke::start().await;
        g.create("us-central1-a", standard("l1", 1)).await;
        g.s.step(3);
        let fp = g.get("us-central1-a/clusters/l1").await["labelFingerprint"]
            .as_str()
            .unwrap()
            .to_owned();
        let (status, _) = g
            .call(
                Method::POST,
                "us-central1-a/clusters/l1:setResourceLabels",
                Some(json!({"resourceLabels": {"a": "b"}})),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let op = g
            .ok(
                Method::POST,
                "us-central1-a/clusters/l1:setResourceLabels",
                Some(
                    json!({"resourceLabels": {"bc-substrate-pool": "p1"}, "labelFingerprint": fp}),
                ),
            )
            .await;
        assert_eq!(op["operationType"], "SET_LABELS");
        g.s.step(2);
        let c = g.get("us-central1-a/clusters/l1").await;
        assert_eq!(c["resourceLabels"]["bc-substrate-pool"], "p1");
        assert_ne!(c["labelFingerprint"].as_str().unwrap(), fp);
        let (status, e) = g
            .call(
                Method::POST,
                "us-central1-a/clusters/l1:setResourceLabels",
                Some(json!({"resourceLabels": {}, "labelFingerprint": fp})),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");
    })
    .await;
}

#[tokio::test]
async fn node_pools_update_wholesale_check_etags_and_versions_and_delete() {
    bounded(async {
        let g = Gke::start().await;
        g.create("us-central1-a", standard("n1", 1)).await;
        g.s.step(3);
        let op = g.ok(Method::POST, "us-central1-a/clusters/n1/nodePools", Some(json!({"nodePool": {"name": "extra", "initialNodeCount": 1, "autoscaling": {"enabled": true, "maxNodeCount": 3}}}))).await;
        assert_eq!(op["operationType"], "CREATE_NODE_POOL");
        assert_eq!(g.get("us-central1-a/clusters/n1/nodePools/extra").await["status"], "PROVISIONING");
        g.s.step(2);
        let list = g.get("us-central1-a/clusters/n1/nodePools").await;
        assert_eq!(list["nodePools"].as_array().unwrap().len(), 2);
        let extra = g.get("us-central1-a/clusters/n1/nodePools/extra").await;
        assert_eq!(extra["autoscaling"], json!({"enabled": true, "maxNodeCount": 3, "locationPolicy": "BALANCED"}));
        let (status, e) = g.call(Method::PUT, "us-central1-a/clusters/n1/nodePools/cpu", Some(json!({"labels": {}}))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(e["error"]["message"].as_str().unwrap().starts_with("At least one of ['node_version'"), "{e}");
        let (status, e) = g.call(Method::PUT, "us-central1-a/clusters/n1/nodePools/cpu", Some(json!({"labels": {"labels": {"x": "y"}}, "etag": "stale"}))).await;
        assert_eq!((status, e["error"]["status"].as_str()), (StatusCode::CONFLICT, Some("ABORTED")));
        let (status, e) = g.call(Method::PUT, "us-central1-a/clusters/n1/nodePools/cpu", Some(json!({"nodeVersion": "1.35.7-gke.1150000"}))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(e["error"]["message"].as_str().unwrap().contains("cannot be greater than current master version"), "{e}");
        let etag = g.get("us-central1-a/clusters/n1/nodePools/cpu").await["etag"].clone();
        g.ok(Method::PUT, "us-central1-a/clusters/n1/nodePools/cpu", Some(json!({"labels": {"labels": {"x": "y"}}, "taints": {"taints": [{"key": "t", "effect": "NO_EXECUTE"}]}, "etag": etag}))).await;
        g.s.step(2);
        let pool = g.get("us-central1-a/clusters/n1/nodePools/cpu").await;
        assert_eq!(pool["config"]["labels"], json!({"x": "y"}), "replaced wholesale");
        assert_eq!(pool["config"]["taints"], json!([{"key": "t", "effect": "NO_EXECUTE"}]));
        let op = g.ok(Method::DELETE, "us-central1-a/clusters/n1/nodePools/extra", None).await;
        assert_eq!(op["operationType"], "DELETE_NODE_POOL");
        assert_eq!(g.get("us-central1-a/clusters/n1/nodePools/extra").await["status"], "STOPPING");
        g.s.step(3);
        let (status, _) = g.call(Method::GET, "us-central1-a/clusters/n1/nodePools/extra", None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        // The cluster goes: STOPPING, then 404.
        g.ok(Method::DELETE, "us-central1-a/clusters/n1", None).await;
        assert_eq!(g.get("us-central1-a/clusters/n1").await["status"], "STOPPING");
        g.s.step(2);
        assert_eq!(g.call(Method::GET, "us-central1-a/clusters/n1", None).await.0, StatusCode::NOT_FOUND);
    })
    .await;
}

#[tokio::test]
async fn the_master_upgrades_by_alias_and_refuses_unsupported_versions() {
    bounded(async {
        let g = Gke::start().await;
        g.create(
            "us-central1-a",
            json!({"name": "u1", "initialClusterVersion": "1.34", "initialNodeCount": 1}),
        )
        .await;
        g.s.step(3);
        let c = g.get("us-central1-a/clusters/u1").await;
        assert_eq!(c["currentMasterVersion"], "1.34.9-gke.1341000");
        assert_eq!(c["releaseChannel"]["channel"], "STABLE", "the most mature channel offering it");
        assert_eq!(c["nodePools"][0]["name"], "default-pool");
        let (status, e) = g
            .call(
                Method::POST,
                "us-central1-a/clusters/u1:updateMaster",
                Some(json!({"masterVersion": "1.99"})),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(e["error"]["message"], "Master version \"1.99\" is unsupported.");
        let op = g
            .ok(
                Method::PUT,
                "us-central1-a/clusters/u1",
                Some(json!({"update": {"desiredMasterVersion": "latest"}})),
            )
            .await;
        assert_eq!(op["operationType"], "UPGRADE_MASTER");
        assert_eq!(g.get("us-central1-a/clusters/u1").await["status"], "RECONCILING");
        g.s.step(3);
        let c = g.get("us-central1-a/clusters/u1").await;
        assert_eq!(
            (c["status"].as_str(), c["currentMasterVersion"].as_str()),
            (Some("RUNNING"), Some("1.34.9-gke.1341000"))
        );
        let cfg = g.get("us-central1-a/serverConfig").await;
        assert_eq!(cfg["validMasterVersions"].as_array().unwrap().len(), 4);
        assert_eq!(cfg["channels"].as_array().unwrap().len(), 4);
    })
    .await;
}

#[tokio::test]
async fn enums_are_numbers_when_the_request_asks_for_them() {
    bounded(async {
        let g = Gke::start().await;
        let body = json!({"cluster": {"name": "e1", "releaseChannel": {"channel": 1}, "nodePools": [{"name": "p", "initialNodeCount": "1",
            "config": {"taints": [{"key": "k", "effect": 3}]}}]}});
        let op = g.ok(Method::POST, "us-central1-a/clusters?%24alt=json%3Benum-encoding%3Dint", Some(body)).await;
        assert_eq!((op["operationType"].as_i64(), op["status"].as_i64()), (Some(1), Some(1)));
        g.s.step(3);
        let c = g.get("us-central1-a/clusters/e1?$alt=json;enum-encoding=int").await;
        assert_eq!(c["status"], 2);
        assert_eq!(c["releaseChannel"]["channel"], 1);
        assert_eq!(c["nodePools"][0]["config"]["taints"][0]["effect"], 3);
        assert_eq!(g.get("us-central1-a/clusters/e1").await["nodePools"][0]["config"]["taints"][0]["effect"], "NO_EXECUTE");
    })
    .await;
}

#[tokio::test]
async fn autopilot_is_regional_hides_its_node_pools_and_lists_with_the_rest() {
    bounded(async {
        let g = Gke::start().await;
        let (status, _) = g
            .call(
                Method::POST,
                "us-central1-a/clusters",
                Some(json!({"cluster": {"name": "ap", "autopilot": {"enabled": true}}})),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        g.create("us-central1", json!({"name": "ap", "autopilot": {"enabled": true}})).await;
        g.create("europe-west1-b", standard("z", 1)).await;
        g.s.step(3);
        let c = g.get("us-central1/clusters/ap").await;
        assert_eq!(c["autopilot"]["enabled"], true);
        assert!(c.get("nodePools").is_none());
        for (method, path, body) in [
            (Method::GET, "us-central1/clusters/ap/nodePools", None),
            (Method::GET, "us-central1/clusters/ap/nodePools/default-pool", None),
            (
                Method::POST,
                "us-central1/clusters/ap/nodePools",
                Some(json!({"nodePool": {"name": "x", "initialNodeCount": 1}})),
            ),
            (
                Method::POST,
                "us-central1/clusters/ap/nodePools/default-pool:setSize",
                Some(json!({"nodeCount": 1})),
            ),
        ] {
            let (status, e) = g.call(method, path, body).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{path}");
            assert_eq!(
                e["error"]["message"],
                "Autopilot node pools cannot be accessed or modified."
            );
            assert_eq!(e["error"]["errors"][0]["reason"], "badRequest");
        }
        let all = g.get("-/clusters").await;
        assert_eq!(all["clusters"].as_array().unwrap().len(), 2);
        assert_eq!(g.get("us-central1/clusters").await["clusters"].as_array().unwrap().len(), 1);
    })
    .await;
}

#[tokio::test]
async fn faults_limits_and_stockouts_answer_as_google_does() {
    bounded(async {
        let g = Gke::start().await;
        let create = key("POST", routes::CLUSTERS);
        g.s.sim.state().model().gke_inject(&create, 1, GkeFault::Quota);
        g.s.sim.state().model().gke_inject(&create, 1, GkeFault::Unavailable);
        let (status, e) = g
            .call(
                Method::POST,
                "us-central1-a/clusters",
                Some(json!({"cluster": standard("f1", 1)})),
            )
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert!(e["error"]["message"].as_str().unwrap().starts_with("Insufficient regional quota"));
        let (status, _) = g
            .call(
                Method::POST,
                "us-central1-a/clusters",
                Some(json!({"cluster": standard("f1", 1)})),
            )
            .await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        g.s.sim.state().model().gke_inject(&create, 1, GkeFault::Stockout);
        let op = g.create("us-central1-a", standard("f1", 1)).await;
        g.s.step(3);
        let op = g.get(&format!("us-central1-a/operations/{}", op["name"].as_str().unwrap())).await;
        assert_eq!(op["status"], "DONE");
        assert!(op["statusMessage"].as_str().unwrap().contains("does not have enough resources"));
        assert_eq!(op["clusterConditions"][0]["code"], "GCE_STOCKOUT");
        assert_eq!(op["error"]["code"], 8);
        assert_eq!(g.get("us-central1-a/clusters/f1/nodePools/cpu").await["status"], "ERROR");
        g.s.sim.state().model().set_gke_rate_limit(3);
        let mut statuses = Vec::new();
        for _ in 0..4 {
            statuses.push(g.call(Method::GET, "us-central1-a/clusters", None).await.0);
        }
        assert_eq!(statuses.last(), Some(&StatusCode::TOO_MANY_REQUESTS));
        g.s.step(60);
        assert_eq!(g.call(Method::GET, "us-central1-a/clusters", None).await.0, StatusCode::OK);
        assert!(g.s.sim.state().model().request_count(&key("GET", routes::CLUSTERS)) >= 5);
    })
    .await;
}

#[tokio::test]
async fn gke_state_survives_a_restart() {
    bounded(async {
        let g = Gke::start().await;
        g.create("us-central1-a", standard("keep", 1)).await;
        g.s.step(3);
        let snapshot = g.s.sim.snapshot();
        let clock = bc_sim::testing::clock();
        let sim = bc_sim::Sim::restore(SimConfig::default(), clock.clone(), &snapshot).unwrap();
        bc_sim::testing::step(&clock, 10);
        let mut m = sim.state().model();
        let now = bc_domain::ports::Clock::now(&*clock);
        let c = m
            .gke_cluster(
                &ClusterName { project: SIM_PROJECT, location: "us-central1-a", name: "keep" },
                now,
            )
            .unwrap();
        assert_eq!(c.status(), "RUNNING");
        assert_eq!(m.gke_keys().len(), 1);
    })
    .await;
}

#[tokio::test]
async fn autopilot_nodes_come_and_go_with_workload_pods_not_daemonset_pods() {
    bounded(async {
        let g = Gke::start().await;
        g.create("us-central1", json!({"name": "ap", "autopilot": {"enabled": true}})).await;
        g.s.step(3);
        let c = g.get("us-central1/clusters/ap").await;
        let ca = String::from_utf8(base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            c["masterAuth"]["clusterCaCertificate"].as_str().unwrap(),
        ).unwrap()).unwrap();
        let base = format!("https://{}", c["endpoint"].as_str().unwrap());
        let kube = bc_sim::testing::http_client_trusting(&ca);
        let nodes = || async {
            let r = send(kube.get(format!("{base}/api/v1/nodes")).bearer_auth(&g.token)).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.text);
            r.json()["items"].as_array().unwrap().len()
        };
        assert_eq!(nodes().await, 0, "no workload, no nodes");
        let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {"metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "a", "image": "busybox"}]}}}});
        let r = send(kube.post(format!("{base}/apis/apps/v1/namespaces/default/daemonsets")).bearer_auth(&g.token).json(&ds)).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
        g.s.step(5);
        assert_eq!(nodes().await, 0, "a DaemonSet alone adds no node");
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "work", "namespace": "default"},
            "spec": {"containers": [{"name": "w", "image": "busybox"}]}});
        let r = send(kube.post(format!("{base}/api/v1/namespaces/default/pods")).bearer_auth(&g.token).json(&pod)).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
        nodes().await;
        g.s.step(5);
        assert_eq!(nodes().await, 1, "a workload pod brings a node");
        g.s.step(5);
        assert_eq!(nodes().await, 1, "the DaemonSet's pod on it adds none");
        let r = send(kube.delete(format!("{base}/api/v1/namespaces/default/pods/work")).bearer_auth(&g.token)).await;
        assert!(r.status.is_success(), "{}", r.text);
        nodes().await;
        g.s.step(5);
        assert_eq!(nodes().await, 0, "the node goes with the workload");
    })
    .await;
}

#[tokio::test]
async fn a_lost_answer_leaves_the_change_made() {
    bounded(async {
        let g = Gke::start().await;
        g.s.sim.state().model().lose_answers(&key("POST", routes::CLUSTERS), 1);
        let impatient = reqwest::Client::builder()
            .timeout(std::time::Duration::from_millis(500))
            .build()
            .unwrap();
        let r = impatient
            .post(g.s.url(&format!("{P}/us-central1-a/clusters")))
            .bearer_auth(&g.token)
            .json(&json!({"cluster": standard("lost", 1)}))
            .send()
            .await;
        assert!(r.is_err(), "the answer is withheld");
        assert_eq!(g.get("us-central1-a/clusters/lost").await["name"], "lost");
    })
    .await;
}

#[tokio::test]
async fn a_standing_refusal_answers_every_call_in_googles_envelope_until_lifted() {
    bounded(async {
        let g = Gke::start().await;
        g.create("us-central1-a", standard("s1", 1)).await;
        g.s.step(3);
        let route = key("POST", routes::NODE_POOLS);
        let why = "Required \"container.clusters.update\" permission(s) for \
                   \"projects/bc-sim-project/locations/us-central1-a/clusters/s1\".";
        g.s.sim.state().model().gke_inject(&route, 1, GkeFault::Unavailable);
        g.s.sim.state().model().gke_refuse(&route, GkeError::forbidden(why));
        let path = "us-central1-a/clusters/s1/nodePools";
        let pool = json!({"nodePool": {"name": "more", "initialNodeCount": 1}});
        let (status, _) = g.call(Method::POST, path, Some(pool.clone())).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "an injected fault answers first");
        for _ in 0..3 {
            let (status, e) = g.call(Method::POST, path, Some(pool.clone())).await;
            assert_eq!(status, StatusCode::FORBIDDEN);
            let e = &e["error"];
            assert_eq!(
                (e["code"].as_i64(), e["status"].as_str()),
                (Some(403), Some("PERMISSION_DENIED"))
            );
            assert_eq!(
                (e["message"].as_str(), e["errors"][0]["reason"].as_str()),
                (Some(why), Some("forbidden"))
            );
        }
        assert_eq!(g.get(path).await["nodePools"].as_array().unwrap().len(), 1, "nothing made");
        assert_eq!(g.call(Method::GET, path, None).await.0, StatusCode::OK, "other routes answer");
        g.s.sim.state().model().gke_clear_refusal(&route);
        let op = g.ok(Method::POST, path, Some(pool)).await;
        assert_eq!(op["operationType"], "CREATE_NODE_POOL");
    })
    .await;
}

#[tokio::test]
async fn gke_at_work_on_its_own_degraded_or_in_error_shows_and_refuses_as_gke_does() {
    bounded(async {
        let g = Gke::start().await;
        g.create("us-central1-a", standard("h1", 1)).await;
        g.s.step(3);
        let gke_id = g.get("us-central1-a/clusters/h1").await["id"].as_str().unwrap().to_owned();
        let force = |status: &str, message: &str| {
            let now = bc_domain::ports::Clock::now(&*g.s.clock);
            g.s.sim.state().model().gke_force_status(&gke_id, status, message, now)
        };
        let running = async || {
            let ops = g.get("us-central1-a/operations").await["operations"].clone();
            let ops = ops.as_array().unwrap().clone();
            ops.into_iter().filter(|o| o["status"] != "DONE").collect::<Vec<_>>()
        };
        let cluster = "us-central1-a/clusters/h1";
        let (pools, more) = (
            "us-central1-a/clusters/h1/nodePools",
            json!({"nodePool": {"name": "more", "initialNodeCount": 1}}),
        );
        // GKE auto-upgrades it: RECONCILING, under an operation no caller started, and
        // every change meanwhile refused in GKE's words.
        assert!(force("RECONCILING", ""));
        assert_eq!(g.get(cluster).await["status"], "RECONCILING");
        let ops = running().await;
        assert_eq!(ops.len(), 1, "{ops:?}");
        assert_eq!(ops[0]["operationType"], "UPGRADE_MASTER");
        let (status, e) = g.call(Method::POST, pools, Some(more.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let op = ops[0]["name"].as_str().unwrap();
        assert_eq!(
            e["error"]["message"],
            format!("Cluster is running incompatible operation {op}.")
        );
        g.s.step(600);
        assert_eq!(g.get(cluster).await["status"], "RECONCILING", "until forced again");
        assert_eq!(g.s.sim.state().model().gke_operations_started("UPGRADE_MASTER"), 0);
        // DEGRADED and ERROR, with GKE's message; GKE's own operation is over.
        let m = "Node pool \"cpu\" cannot reach the control plane.";
        assert!(force("DEGRADED", m));
        let c = g.get(cluster).await;
        assert_eq!(
            (c["status"].as_str(), c["statusMessage"].as_str()),
            (Some("DEGRADED"), Some(m))
        );
        assert_eq!(c["conditions"][0]["message"], m);
        assert!(running().await.is_empty());
        assert!(force("ERROR", "The cluster is unusable."));
        let c = g.get(cluster).await;
        assert_eq!(
            (c["status"].as_str(), c["statusMessage"].as_str()),
            (Some("ERROR"), Some("The cluster is unusable."))
        );
        // RUNNING again: no message, changes made.
        assert!(force("RUNNING", "ignored"));
        let c = g.get(cluster).await;
        assert_eq!(c["status"], "RUNNING");
        assert!(c.get("statusMessage").is_none() && c.get("conditions").is_none(), "{c}");
        assert_eq!(
            g.ok(Method::POST, pools, Some(more)).await["operationType"],
            "CREATE_NODE_POOL"
        );
        // GKE starts no work of its own beside a caller's, nor forces what it never shows.
        assert!(!force("RECONCILING", ""));
        assert!(!force("PROVISIONING", ""));
        let now = bc_domain::ports::Clock::now(&*g.s.clock);
        assert!(!g.s.sim.state().model().gke_force_status("nosuch", "ERROR", "", now));
    })
    .await;
}

#[tokio::test]
async fn the_autoscaler_moves_an_autoscaled_pool_within_its_limits_without_an_operation() {
    bounded(async {
        let g = Gke::start().await;
        let auto = json!({"name": "a1", "nodePools": [{"name": "cpu", "initialNodeCount": 1,
            "autoscaling": {"enabled": true, "minNodeCount": 1, "maxNodeCount": 2}}]});
        g.create("us-central1", auto).await;
        g.s.step(3);
        let id = cluster_id(&g);
        let now = || bc_domain::ports::Clock::now(&*g.s.clock);
        let nodes = |g: &Gke| g.s.sim.state().model().cluster_nodes(&id, now()).unwrap().len();
        assert_eq!(nodes(&g), 3);
        let path = "us-central1/clusters/a1/nodePools/cpu";
        let before = g.get(path).await;
        let ops = g.get("us-central1/operations").await["operations"].as_array().unwrap().len();
        g.s.sim.state().model().gke_autoscale(&id, "cpu", 6, now()).expect("within 3..6");
        g.s.step(3);
        assert_eq!(nodes(&g), 6);
        assert_eq!(g.get(path).await, before, "no size field, the same etag");
        let after = g.get("us-central1/operations").await["operations"].as_array().unwrap().len();
        assert_eq!(after, ops, "the autoscaler runs no operation");
        for outside in [7, 0, 4] {
            let moved = g.s.sim.state().model().gke_autoscale(&id, "cpu", outside, now());
            assert!(moved.is_err(), "{outside}: {moved:?}");
        }
        // Total limits hold the pool's nodes in all; setting them keeps the count inside.
        let total = json!({"autoscaling": {"enabled": true, "totalMinNodeCount": 0, "totalMaxNodeCount": 9}});
        g.ok(Method::POST, &format!("{path}:setAutoscaling"), Some(total)).await;
        g.s.step(3);
        assert_eq!(nodes(&g), 6, "inside the new limits: unchanged");
        g.s.sim.state().model().gke_autoscale(&id, "cpu", 0, now()).expect("within 0..9");
        g.s.step(3);
        assert_eq!(nodes(&g), 0);
        // A pool without autoscaling is left alone.
        g.create("us-central1-a", standard("z1", 1)).await;
        g.s.step(3);
        let z1 = g.get("us-central1-a/clusters/z1").await["id"].as_str().unwrap().to_owned();
        let moved = g.s.sim.state().model().gke_autoscale(&z1, "cpu", 2, now());
        assert!(moved.unwrap_err().contains("autoscaling off"));
    })
    .await;
}
