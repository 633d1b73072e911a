//! The simulated Kubernetes face over real loopback HTTP, driven by raw reqwest to pin
//! the wire details of research/kube-wire.md: Status errors with `reason`, apply
//! create/merge/no-op, conflicts, selectors with `+`-encoded spaces, deletes.

use std::collections::BTreeMap;

use bc_domain::ports::Clock;
use bc_sim::testing::{self, ClusterEnv};
use serde_json::{Value, json};

/// A served simulator with one cluster of two pools (gpu and plain), not yet running.
async fn setup() -> (ClusterEnv, String) {
    let gpu = testing::with_taint(
        testing::node_pool("gpu", 2, &[("gpu", "true"), ("tier", "a")]),
        "gpu",
        "true",
        "NoSchedule",
    );
    let env =
        ClusterEnv::provisioning(vec![gpu, testing::node_pool("plain", 1, &[("tier", "b")])]).await;
    let id = env.id.clone();
    (env, id)
}

fn assert_status(v: &Value, code: u16, reason: &str) {
    assert_eq!(v["kind"], "Status", "{v}");
    assert_eq!(v["reason"], reason, "{v}");
    assert_eq!(v["code"], code, "{v}");
}

#[tokio::test]
async fn gate_unknown_routes_and_auth() {
    let (env, _) = setup().await;
    // Provisioning: the API is not up yet.
    let (s, v) = env.get("/api/v1/namespaces").await.parts();
    assert_eq!(s, 503);
    assert_status(&v, 503, "ServiceUnavailable");
    env.run();
    let (s, v) = env.get("/api/v1/namespaces?").await.parts();
    assert_eq!(s, 200);
    assert_eq!(v["kind"], "NamespaceList");
    assert!(v["metadata"]["resourceVersion"].is_string());
    // A new cluster has the system namespaces and nothing else.
    let names: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "kube-node-lease", "kube-public", "kube-system"]);

    for path in [
        "/api/v1/persistentvolumeclaims",
        "/apis/batch/v1/namespaces/x/jobs/y",
        "/api/v1/namespaces/x/configmaps/y",
        "/openapi/v2",
    ] {
        let (s, v) = env.get(path).await.parts();
        assert_eq!(s, 404, "{path}");
        assert_status(&v, 404, "NotFound");
    }

    let resp = env.http.get(format!("{}/api/v1/nodes", env.base)).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    assert_status(&resp.json().await.unwrap(), 401, "Unauthorized");
    let resp = env
        .http
        .get(format!("{}/k8s/no-such-cluster/api/v1/nodes", env.server.url()))
        .bearer_auth(&env.token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    assert_status(&resp.json().await.unwrap(), 404, "NotFound");

    let (s, v) = env.get("/api/v1/namespaces/missing").await.parts();
    assert_eq!(s, 404);
    assert_status(&v, 404, "NotFound");
    assert_eq!(v["details"]["kind"], "namespaces");
    assert_eq!(v["details"]["name"], "missing");
}

#[tokio::test]
async fn apply_creates_merges_and_is_a_no_op_when_unchanged() {
    let (env, _) = setup().await;
    env.run();
    let ns = json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"bc-p1","labels":{"better-compute.dev/substrate-pool":"p1"}}});
    let (s, created) =
        env.apply("/api/v1/namespaces/bc-p1", "?&fieldManager=better-compute", &ns).await.parts();
    assert_eq!(s, 201);
    let rv = created["metadata"]["resourceVersion"].clone();
    assert!(created["metadata"]["uid"].is_string());
    assert!(created["metadata"]["creationTimestamp"].is_string());
    assert_eq!(created["status"]["phase"], "Active");
    assert_eq!(created["metadata"]["managedFields"][0]["manager"], "better-compute");
    assert_eq!(created["metadata"]["managedFields"][0]["operation"], "Apply");

    let (s, again) = env
        .apply("/api/v1/namespaces/bc-p1", "?&force=true&fieldManager=better-compute", &ns)
        .await
        .parts();
    assert_eq!(s, 200);
    assert_eq!(again["metadata"]["resourceVersion"], rv, "nothing changed");

    let mut changed = ns.clone();
    changed["metadata"]["labels"]["extra"] = json!("1");
    let (s, merged) = env
        .apply("/api/v1/namespaces/bc-p1", "?&fieldManager=better-compute", &changed)
        .await
        .parts();
    assert_eq!(s, 200);
    let (old, new) = (
        rv.as_str().unwrap().parse::<u64>().unwrap(),
        merged["metadata"]["resourceVersion"].as_str().unwrap().parse::<u64>().unwrap(),
    );
    assert!(new > old);
    assert_eq!(merged["metadata"]["uid"], created["metadata"]["uid"]);
    assert_eq!(merged["metadata"]["labels"]["extra"], "1");

    // Secret stringData is folded into base64 data.
    let secret = json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"bcd-join","namespace":"bc-p1"},"stringData":{"joinToken":"abc"}});
    let (s, v) = env
        .apply(
            "/api/v1/namespaces/bc-p1/secrets/bcd-join",
            "?&fieldManager=better-compute",
            &secret,
        )
        .await
        .parts();
    assert_eq!(s, 201);
    assert_eq!(v["data"]["joinToken"], "YWJj");
    assert!(v.get("stringData").is_none());

    // Listing by label.
    let resp = env
        .http
        .get(format!("{}/api/v1/namespaces", env.base))
        .bearer_auth(&env.token)
        .query(&[("labelSelector", "better-compute.dev/substrate-pool in (p1,p2)")])
        .send()
        .await
        .unwrap();
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["items"].as_array().unwrap().len(), 1);

    // Wrong patch type, missing field manager, mismatched name: Status errors.
    let resp = env
        .http
        .patch(format!("{}/api/v1/namespaces/bc-p1?fieldManager=x", env.base))
        .bearer_auth(&env.token)
        .header("content-type", "application/xml")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 415);
    assert_status(&resp.json().await.unwrap(), 415, "UnsupportedMediaType");
    let (s, v) = env.apply("/api/v1/namespaces/bc-p1", "?", &ns).await.parts();
    assert_eq!(s, 422);
    assert_status(&v, 422, "Invalid");
    let (s, v) = env.apply("/api/v1/namespaces/other", "?&fieldManager=x", &ns).await.parts();
    assert_eq!(s, 400);
    assert_status(&v, 400, "BadRequest");
    // A namespaced object needs its namespace.
    let (s, v) = env
        .apply(
            "/api/v1/namespaces/nope/serviceaccounts/bcd",
            "?&fieldManager=x",
            &json!({"metadata":{"name":"bcd"}}),
        )
        .await
        .parts();
    assert_eq!(s, 404);
    assert_status(&v, 404, "NotFound");
}

#[tokio::test]
async fn another_managers_field_conflicts_without_force() {
    let (env, id) = setup().await;
    env.run();
    let now = env.clock.now();
    let kube = &env.sim.state().kube;
    kube.apply_manifest(
        &id,
        "kubectl",
        &json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n"}}),
        false,
        now,
    )
    .unwrap();
    kube.apply_manifest(
        &id,
        "kubectl",
        &json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"n"},"data":{"k":"eA=="}}),
        false,
        now,
    )
    .unwrap();
    let ours = json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"n"},"data":{"k":"eQ=="}});
    let (s, v) = env
        .apply("/api/v1/namespaces/n/secrets/s", "?&fieldManager=better-compute", &ours)
        .await
        .parts();
    assert_eq!(s, 409);
    assert_status(&v, 409, "Conflict");
    let cause = &v["details"]["causes"][0];
    assert_eq!(cause["reason"], "FieldManagerConflict");
    assert_eq!(cause["field"], ".data.k");
    assert!(cause["message"].as_str().unwrap().contains("kubectl"));
    // An unchanged value is shared, not a conflict.
    let same = json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"n"},"data":{"k":"eA=="}});
    let (s, _) = env
        .apply("/api/v1/namespaces/n/secrets/s", "?&fieldManager=better-compute", &same)
        .await
        .parts();
    assert_eq!(s, 200);
    let (s, v) = env
        .apply("/api/v1/namespaces/n/secrets/s", "?&force=true&fieldManager=better-compute", &ours)
        .await
        .parts();
    assert_eq!(s, 200);
    assert_eq!(v["data"]["k"], "eQ==");
}

#[tokio::test]
async fn nodes_come_from_the_model_and_select_by_label() {
    let (env, _) = setup().await;
    env.run();
    let all = env.nodes("").await;
    assert_eq!(all.len(), 3);
    let gpu = env.nodes("gpu=true").await;
    assert_eq!(gpu.len(), 2);
    assert_eq!(env.nodes("gpu==true").await, gpu);
    assert_eq!(env.nodes("tier in (a,c)").await, gpu);
    assert_eq!(env.nodes("tier notin (a)").await.len(), 1);
    assert_eq!(env.nodes("gpu").await, gpu);
    assert_eq!(env.nodes("!gpu").await.len(), 1);
    assert_eq!(env.nodes("gpu!=true").await.len(), 1);
    assert_eq!(env.nodes("gpu=true,tier=b").await.len(), 0);
    assert_eq!(env.nodes("tier in (a, b),doks.digitalocean.com/node-pool").await.len(), 3);

    let resp = env
        .http
        .get(format!("{}/api/v1/nodes", env.base))
        .bearer_auth(&env.token)
        .query(&[("labelSelector", "tier in (a")])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    assert_status(&resp.json().await.unwrap(), 400, "BadRequest");

    let (s, node) = env.get(&format!("/api/v1/nodes/{}", gpu[0])).await.parts();
    assert_eq!(s, 200);
    assert_eq!(node["kind"], "Node");
    assert!(node["spec"]["providerID"].as_str().unwrap().starts_with("digitalocean://"));
    assert_eq!(
        node["spec"]["taints"][0],
        json!({"key":"gpu","value":"true","effect":"NoSchedule"})
    );
    let conditions = node["status"]["conditions"].as_array().unwrap();
    let ready = conditions.iter().find(|c| c["type"] == "Ready").unwrap();
    assert_eq!(ready["status"], "True");
    let labels: BTreeMap<String, String> =
        serde_json::from_value(node["metadata"]["labels"].clone()).unwrap();
    assert_eq!(labels.get("gpu").map(String::as_str), Some("true"));
    let (s, v) = env.get("/api/v1/nodes/none").await.parts();
    assert_eq!(s, 404);
    assert_status(&v, 404, "NotFound");
}

#[tokio::test]
async fn delete_returns_the_object_or_a_status_and_cascades() {
    let (env, _) = setup().await;
    env.run();
    let fm = "?&fieldManager=better-compute";
    env.apply("/api/v1/namespaces/n", fm, &json!({"metadata":{"name":"n"}})).await.parts();
    env.apply("/api/v1/namespaces/n/serviceaccounts/bcd", fm, &json!({"metadata":{"name":"bcd"}}))
        .await
        .parts();
    let ds = json!({"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"bcd","namespace":"n"},"spec":{"selector":{"matchLabels":{"app":"bcd"}},"template":{"metadata":{"labels":{"app":"bcd"}},"spec":{"containers":[{"name":"bcd","image":"bcd"}]}}}});
    let (s, v) = env.apply("/apis/apps/v1/namespaces/n/daemonsets/bcd", fm, &ds).await.parts();
    assert_eq!(s, 201);
    assert_eq!(v["metadata"]["generation"], 1);
    let (s, list) = env.get("/apis/apps/v1/namespaces/n/daemonsets?").await.parts();
    assert_eq!((s.as_u16(), list["kind"].as_str()), (200, Some("DaemonSetList")));
    assert_eq!(list["items"].as_array().unwrap().len(), 1);

    let (s, v) = env
        .raw(reqwest::Method::DELETE, "/api/v1/namespaces/n/serviceaccounts/bcd?", None, None)
        .await
        .parts();
    assert_eq!(s, 200);
    assert_eq!(v["kind"], "Status");
    assert_eq!(v["status"], "Success");
    let (s, v) = env
        .raw(reqwest::Method::DELETE, "/api/v1/namespaces/n/serviceaccounts/bcd?", None, None)
        .await
        .parts();
    assert_eq!(s, 404);
    assert_status(&v, 404, "NotFound");

    let (s, v) = env.raw(reqwest::Method::DELETE, "/api/v1/namespaces/n", None, None).await.parts();
    assert_eq!(s, 200);
    assert_eq!(v["kind"], "Namespace");
    assert_eq!(v["status"]["phase"], "Terminating");
    assert!(v["metadata"]["deletionTimestamp"].is_string());
    let (s, _) = env.get("/api/v1/namespaces/n").await.parts();
    assert_eq!(s, 404);
    let (s, _) = env.get("/apis/apps/v1/namespaces/n/daemonsets/bcd").await.parts();
    assert_eq!(s, 404, "the namespace took its DaemonSet with it");

    let (s, v) = env.raw(reqwest::Method::PUT, "/api/v1/nodes", None, None).await.parts();
    assert_eq!(s, 405);
    assert_status(&v, 405, "MethodNotAllowed");
}

#[tokio::test]
async fn requests_are_counted_and_failures_injected() {
    let (env, id) = setup().await;
    env.run();
    let kube = &env.sim.state().kube;
    let fm = "?&fieldManager=better-compute";
    env.apply("/api/v1/namespaces/n", fm, &json!({"metadata":{"name":"n"}})).await.parts();
    env.get("/api/v1/namespaces/n").await.parts();
    env.get("/api/v1/namespaces/n").await.parts();
    env.nodes("").await;
    env.get("/api/v1/namespaces/n/persistentvolumeclaims").await.parts();
    assert_eq!(kube.request_count(&id, "apply namespaces"), 1);
    assert_eq!(kube.request_count(&id, "get namespaces"), 2);
    assert_eq!(kube.request_count(&id, "list nodes"), 1);
    assert_eq!(kube.request_count(&id, bc_sim::kube::UNMATCHED), 1);

    kube.inject_failures(&id, Some("get namespaces"), 1, 500);
    let (s, v) = env.get("/api/v1/namespaces/n").await.parts();
    assert_eq!(s, 500);
    assert_status(&v, 500, "InternalError");
    let (s, _) = env.get("/api/v1/namespaces/n").await.parts();
    assert_eq!(s, 200, "one failure only");
    kube.inject_failures(&id, None, 1, 403);
    let (s, v) = env.get("/api/v1/nodes").await.parts();
    assert_eq!(s, 403);
    assert_status(&v, 403, "Forbidden");
    kube.inject_failures(&id, None, 5, 429);
    kube.clear_faults();
    assert_eq!(env.get("/api/v1/nodes").await.parts().0, 200);
}
