//! Black-box conformance of a simulated cluster's API with what a Kubernetes API server
//! does (the API concepts, server-side apply, field validation and printing pages of
//! kubernetes.io, and the apiserver's own messages), over its TLS face with the real
//! `kube` client and raw HTTP. Each test names the behaviour it encodes; none is written
//! from what our adapter sends.

use std::time::Duration;

use bc_domain::ports::ObjectKind;
use bc_sim::kube::store::WATCH_HISTORY;
use bc_sim::testing::{self, ClusterEnv, bounded};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use reqwest::Method;
use serde_json::{Value, json};

fn api_error(e: kube::Error) -> Box<kube::core::Status> {
    match e {
        kube::Error::Api(s) => s,
        other => panic!("not a Status: {other:?}"),
    }
}

fn ds(name: &str, image: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": name}}, "template": {"metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "c", "image": image}]}}}})
}

/// API concepts, "Discovering the API" and "OpenAPI": `/version` names the cluster's
/// version; `/api` and `/apis` answer the legacy documents to a plain JSON Accept and
/// `APIGroupDiscoveryList` (apidiscovery.k8s.io/v2) when asked for it; `/openapi/v3`
/// names one document per group-version, fetched by its `hash` URL.
#[tokio::test]
async fn version_discovery_and_openapi() {
    let env = ClusterEnv::start().await;
    let (s, v) = env.get("/version").await.parts();
    assert_eq!(s, 200);
    let want = env.sim.state().model().cluster_kubernetes_version(&env.id).unwrap();
    assert_eq!(v["gitVersion"], want.as_str());
    assert_eq!(v["major"], "1");
    // /version answers without a token too (system:public-info-viewer).
    let r = testing::send(env.http.get(format!("{}/version", env.base))).await;
    assert_eq!(r.status, 200);

    let (_, legacy) = env.get("/api").await.parts();
    assert_eq!(legacy["kind"], "APIVersions");
    assert_eq!(legacy["versions"], json!(["v1"]));
    let (_, groups) = env.get("/apis").await.parts();
    assert_eq!(groups["groups"][0]["name"], "apps");
    let accept =
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
    let r = testing::send(
        env.http.get(format!("{}/apis", env.base)).bearer_auth(&env.token).header("accept", accept),
    )
    .await;
    assert_eq!(
        r.header("content-type"),
        Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
    );
    let agg = r.json();
    assert_eq!(agg["kind"], "APIGroupDiscoveryList");
    let resources: Vec<&str> = agg["items"][0]["versions"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["resource"].as_str().unwrap())
        .collect();
    assert_eq!(resources, ["daemonsets", "deployments"]);
    let (_, v1) = env.get("/api/v1").await.parts();
    let nodes =
        v1["resources"].as_array().unwrap().iter().find(|r| r["name"] == "nodes").unwrap().clone();
    assert_eq!(nodes["namespaced"], false);
    assert!(nodes["verbs"].as_array().unwrap().contains(&json!("watch")));

    let (_, root) = env.get("/openapi/v3").await.parts();
    let url = root["paths"]["apis/apps/v1"]["serverRelativeURL"].as_str().unwrap().to_owned();
    assert!(url.starts_with("/openapi/v3/apis/apps/v1?hash="), "{url}");
    let r = env.get(&url).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("cache-control"), Some("public, immutable"));
    let doc = r.json();
    assert!(doc["components"]["schemas"]["io.k8s.api.apps.v1.DaemonSet"].is_object());
}

/// API concepts, "Efficient detection of changes": a watch from a list's
/// resourceVersion sees every later change in order; bookmarks (asked for with
/// `allowWatchBookmarks`) carry a resourceVersion to resume from; a resourceVersion
/// older than the history kept answers an ERROR event with a 410 `Expired` Status.
#[tokio::test]
async fn watch_resumes_from_a_resource_version_sends_bookmarks_and_expires() {
    let env = ClusterEnv::start().await;
    let client = env.kube().await;
    let cms = Api::<ConfigMap>::namespaced(client.clone(), "default");
    let list = bounded(cms.list(&ListParams::default())).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    for name in ["a", "b"] {
        env.apply_as(
            "tenant",
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"k": name}}),
            false,
        );
    }
    env.apply_as(
        "tenant",
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "a", "namespace": "default"}, "data": {"k": "changed"}}),
        false,
    );
    let mut events =
        bounded(cms.watch(&WatchParams::default().timeout(10), &rv)).await.unwrap().boxed();
    let mut seen = Vec::new();
    let mut bookmark = None;
    while bookmark.is_none() {
        let e = tokio::time::timeout(Duration::from_secs(15), events.try_next())
            .await
            .expect("an event within 15 s")
            .expect("event")
            .expect("stream open");
        match e {
            WatchEvent::Added(o) => seen.push(format!("ADDED {}", o.metadata.name.unwrap())),
            WatchEvent::Modified(o) => seen.push(format!("MODIFIED {}", o.metadata.name.unwrap())),
            WatchEvent::Deleted(o) => seen.push(format!("DELETED {}", o.metadata.name.unwrap())),
            WatchEvent::Bookmark(b) => bookmark = Some(b.metadata.resource_version),
            WatchEvent::Error(e) => panic!("{e:?}"),
        }
    }
    // The namespace's kube-root-ca.crt was there before the list; only what came after.
    assert_eq!(seen, ["ADDED a", "ADDED b", "MODIFIED a"]);
    let bookmark: u64 = bookmark.unwrap().parse().unwrap();
    assert!(bookmark >= rv.parse().unwrap());

    // More changes than the history keeps: the old version is gone.
    for i in 0..=WATCH_HISTORY {
        env.apply_as(
            "tenant",
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "default"}, "data": {"k": i.to_string()}}),
            false,
        );
    }
    let mut events =
        bounded(cms.watch(&WatchParams::default().timeout(10), &rv)).await.unwrap().boxed();
    let first = tokio::time::timeout(Duration::from_secs(15), events.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let WatchEvent::Error(e) = first else { panic!("{first:?}") };
    assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
}

/// API concepts, "Retrieving large results sets in chunks": `limit` cuts a list, the
/// `continue` token of its metadata gets the rest, `remainingItemCount` counts it.
#[tokio::test]
async fn lists_come_in_chunks() {
    let env = ClusterEnv::start().await;
    for i in 0..5 {
        env.apply_as("tenant", &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("n{i}")}}), false);
    }
    let api = Api::<Namespace>::all(env.kube().await);
    let first = bounded(api.list(&ListParams::default().limit(3))).await.unwrap();
    assert_eq!(first.items.len(), 3);
    assert_eq!(first.metadata.remaining_item_count, Some(6), "4 system + 5 ns - 3");
    let token = first.metadata.continue_.clone().unwrap();
    let rest =
        bounded(api.list(&ListParams::default().limit(10).continue_token(&token))).await.unwrap();
    assert_eq!(rest.items.len(), 6);
    assert!(rest.metadata.continue_.is_none());
    let mut names: Vec<String> =
        first.items.iter().chain(&rest.items).map(|n| n.metadata.name.clone().unwrap()).collect();
    names.dedup();
    assert_eq!(names.len(), 9, "no repeats, none missed");
    // Field selectors: metadata.name; an unsupported field is a 400.
    let one = bounded(api.list(&ListParams::default().fields("metadata.name=n3"))).await.unwrap();
    assert_eq!(one.items.len(), 1);
    let e = api_error(
        bounded(api.list(&ListParams::default().fields("spec.bogus=x"))).await.unwrap_err(),
    );
    assert_eq!((e.code, e.message.as_str()), (400, "field label not supported: spec.bogus"));
}

/// The apiserver's messages: NotFound names the group-qualified resource
/// (`daemonsets.apps "x" not found`) with the group in `details`; a replace whose
/// resourceVersion is stale is 409 "the object has been modified"; AlreadyExists on a
/// taken name; Invalid (422) lists each cause with its field.
#[tokio::test]
async fn not_found_conflict_already_exists_and_invalid_in_the_apiservers_words() {
    let env = ClusterEnv::start().await;
    let client = env.kube().await;
    let dss = Api::<DaemonSet>::namespaced(client.clone(), "default");
    let e = api_error(bounded(dss.get("x")).await.unwrap_err());
    assert_eq!(
        (e.code, e.reason.as_str(), e.message.as_str()),
        (404, "NotFound", "daemonsets.apps \"x\" not found")
    );
    let (_, raw) = env.get("/apis/apps/v1/namespaces/default/daemonsets/x").await.parts();
    assert_eq!(raw["details"], json!({"name": "x", "group": "apps", "kind": "daemonsets"}));

    let d: DaemonSet = serde_json::from_value(ds("d", "i:1")).unwrap();
    let made = bounded(dss.create(&PostParams::default(), &d)).await.unwrap();
    let e = api_error(bounded(dss.create(&PostParams::default(), &d)).await.unwrap_err());
    assert_eq!(
        (e.code, e.reason.as_str(), e.message.as_str()),
        (409, "AlreadyExists", "daemonsets.apps \"d\" already exists")
    );
    // The DaemonSet controller writes its status meanwhile: a replace must carry the
    // resourceVersion it read last.
    let mut stale = made.clone();
    let mut fresh = bounded(dss.get("d")).await.unwrap();
    fresh.spec.template.spec.as_mut().unwrap().containers[0].image = Some("i:2".into());
    bounded(dss.replace("d", &PostParams::default(), &fresh)).await.unwrap();
    stale.spec.template.spec.as_mut().unwrap().containers[0].image = Some("i:3".into());
    let e = api_error(bounded(dss.replace("d", &PostParams::default(), &stale)).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        "Operation cannot be fulfilled on daemonsets.apps \"d\": the object has been modified; please apply your changes to the latest version and try again"
    );

    let mut bad = ds("bad", "");
    bad["spec"]["selector"] = json!({"matchLabels": {"app": "other"}});
    bad["spec"]["template"]["spec"]["containers"][0]["env"] =
        json!([{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s"}}}]);
    let bad: DaemonSet = serde_json::from_value(bad).unwrap();
    let e = api_error(bounded(dss.create(&PostParams::default(), &bad)).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(e.message.starts_with("DaemonSet.apps \"bad\" is invalid: ["), "{}", e.message);
    let details = e.details.unwrap();
    let fields: Vec<(&str, &str)> =
        details.causes.iter().map(|c| (c.reason.as_str(), c.field.as_str())).collect();
    assert_eq!(
        fields,
        [
            ("FieldValueInvalid", "spec.template.metadata.labels"),
            ("FieldValueRequired", "spec.template.spec.containers[0].image"),
            (
                "FieldValueRequired",
                "spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef.key"
            ),
        ]
    );
    assert_eq!((details.kind.as_str(), details.group.as_str()), ("DaemonSet", "apps"));
}

/// "Server-Side Apply", conflicts and managers: a field set by another manager (here
/// one list item's field, addressed by its key) conflicts without `force`, naming the
/// field as Kubernetes prints it; forcing takes exactly that field; `managedFields`
/// records per manager what each owns. YAML bodies are taken as well as JSON.
#[tokio::test]
async fn server_side_apply_conflicts_per_field_and_force_takes_exactly_it() {
    let env = ClusterEnv::start().await;
    let yaml = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: d\nspec:\n  selector:\n    matchLabels: {app: d}\n  template:\n    metadata:\n      labels: {app: d}\n    spec:\n      containers:\n      - name: c\n        image: i:1\n      - name: side\n        image: s:1\n";
    let r = env
        .raw(
            Method::PATCH,
            "/apis/apps/v1/namespaces/default/daemonsets/d?fieldManager=alice",
            Some("application/apply-patch+yaml"),
            Some(yaml.into()),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let api = Api::<DaemonSet>::namespaced(env.kube().await, "default");
    let bob = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"},
        "spec": {"template": {"spec": {"containers": [{"name": "side", "image": "s:2"}]}}}});
    let e = api_error(
        bounded(api.patch("d", &PatchParams::apply("bob"), &Patch::Apply(&bob))).await.unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        "Apply failed with 1 conflict: conflict with \"alice\": .spec.template.spec.containers[name=\"side\"].image"
    );
    let forced = bounded(api.patch("d", &PatchParams::apply("bob").force(), &Patch::Apply(&bob)))
        .await
        .unwrap();
    let containers = forced.spec.template.spec.unwrap().containers;
    assert_eq!(
        containers.iter().map(|c| c.image.clone().unwrap()).collect::<Vec<_>>(),
        ["i:1", "s:2"]
    );
    let managed = forced.metadata.managed_fields.unwrap();
    let alice = managed.iter().find(|m| m.manager.as_deref() == Some("alice")).unwrap();
    let fields = serde_json::to_value(&alice.fields_v1).unwrap();
    let side = &fields["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"side\"}"];
    assert!(side.get("f:image").is_none(), "alice lost the image: {side}");
    assert!(side.get("f:name").is_some(), "and kept the rest: {side}");
    // Alice re-applies without the sidecar: it stays, bob still holds a field of it.
    let alice_again = yaml.replace("      - name: side\n        image: s:1\n", "");
    let r = env
        .raw(
            Method::PATCH,
            "/apis/apps/v1/namespaces/default/daemonsets/d?fieldManager=alice",
            Some("application/apply-patch+yaml"),
            Some(alice_again),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["spec"]["template"]["spec"]["containers"].as_array().unwrap().len(), 2);
}

/// "Update API objects in place using kubectl patch": a JSON merge patch sets and
/// (with null) removes map entries; a strategic merge patch merges `containers` by
/// name and deletes one with `$patch: delete`, where a merge patch would replace the
/// list; a JSON patch `test` that fails applies nothing (422).
#[tokio::test]
async fn merge_strategic_and_json_patches() {
    let env = ClusterEnv::start().await;
    let api = Api::<DaemonSet>::namespaced(env.kube().await, "default");
    let mut d = ds("d", "i:1");
    d["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "side", "image": "s:1"}));
    d["metadata"]["labels"] = json!({"a": "1", "b": "2"});
    bounded(api.create(&PostParams::default(), &serde_json::from_value(d).unwrap())).await.unwrap();
    let pp = PatchParams::default();
    let m = bounded(api.patch(
        "d",
        &pp,
        &Patch::Merge(json!({"metadata": {"labels": {"a": null, "c": "3"}}})),
    ))
    .await
    .unwrap();
    let labels = m.metadata.labels.unwrap();
    assert_eq!(labels.keys().collect::<Vec<_>>(), ["b", "c"]);
    let smp = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i:2"}, {"name": "side", "$patch": "delete"}]}}}});
    let s = bounded(api.patch("d", &pp, &Patch::Strategic(smp))).await.unwrap();
    let cs = s.spec.template.spec.unwrap().containers;
    assert_eq!(
        cs.iter().map(|c| (c.name.as_str(), c.image.clone().unwrap())).collect::<Vec<_>>(),
        [("c", "i:2".to_owned())]
    );
    let before = s.metadata.labels.clone();
    let ops = json!([{"op": "test", "path": "/metadata/labels/b", "value": "9"},
        {"op": "replace", "path": "/metadata/labels/c", "value": "4"}]);
    let r = env
        .raw(
            Method::PATCH,
            "/apis/apps/v1/namespaces/default/daemonsets/d",
            Some("application/json-patch+json"),
            Some(ops.to_string()),
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(bounded(api.get("d")).await.unwrap().metadata.labels, before, "nothing applied");
}

/// Server-side printing: asked for a Table, a list answers the printer's columns (for
/// nodes: Name, Status, Roles, Age, Version, then the wide ones at priority 1) and one
/// row per object, with its metadata.
#[tokio::test]
async fn tables_have_the_printers_columns() {
    let env = ClusterEnv::start().await;
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    let r = testing::send(
        env.http
            .get(format!("{}/api/v1/nodes", env.base))
            .bearer_auth(&env.token)
            .header("accept", accept),
    )
    .await;
    assert_eq!(r.header("content-type"), Some("application/json;as=Table;v=v1;g=meta.k8s.io"));
    let t = r.json();
    assert_eq!(t["kind"], "Table");
    let cols: Vec<(&str, u64)> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["priority"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        &cols[..6],
        [("Name", 0), ("Status", 0), ("Roles", 0), ("Age", 0), ("Version", 0), ("Internal-IP", 1)]
    );
    let rows = t["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["cells"][1], "Ready");
    assert_eq!(rows[0]["object"]["kind"], "PartialObjectMetadata");
    let r = testing::send(
        env.http
            .get(format!("{}/api/v1/namespaces", env.base))
            .bearer_auth(&env.token)
            .header("accept", accept),
    )
    .await;
    let t = r.json();
    let names: Vec<&str> =
        t["rows"].as_array().unwrap().iter().map(|r| r["cells"][0].as_str().unwrap()).collect();
    assert_eq!(names, ["default", "kube-node-lease", "kube-public", "kube-system"]);
    assert_eq!(t["rows"][0]["cells"][1], "Active");
}

/// A cluster that looks like DOKS: nodes carry the well-known and DOKS labels, capacity
/// from their size, the kubelet's version and addresses; every namespace has its
/// `default` ServiceAccount and `kube-root-ca.crt`; the DaemonSet controller puts one pod
/// per eligible node (its nodeSelector, tolerations for taints) and reports counts; a
/// Background delete of the DaemonSet takes its pods, an Orphan one leaves them, and a
/// new DaemonSet selecting them adopts them.
#[tokio::test]
async fn nodes_system_objects_and_the_daemonset_controller() {
    let env = ClusterEnv::running(vec![
        testing::with_taint(
            testing::node_pool("gpu", 2, &[("pool", "gpu")]),
            "gpu",
            "true",
            "NoSchedule",
        ),
        testing::node_pool("cpu", 1, &[("pool", "cpu")]),
    ])
    .await;
    let (_, nodes) = env.get("/api/v1/nodes").await.parts();
    let n = &nodes["items"][0];
    let labels = &n["metadata"]["labels"];
    for key in [
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/region",
        "doks.digitalocean.com/node-id",
        "doks.digitalocean.com/node-pool",
        "doks.digitalocean.com/node-pool-id",
        "doks.digitalocean.com/version",
    ] {
        assert!(labels[key].is_string(), "{key}: {labels}");
    }
    assert_eq!(labels["node.kubernetes.io/instance-type"], testing::NODE_SIZE);
    assert_eq!(n["status"]["capacity"]["cpu"], "2");
    assert!(n["status"]["nodeInfo"]["kubeletVersion"].as_str().unwrap().starts_with("v1."));
    assert!(n["metadata"]["creationTimestamp"].is_string());
    let types: Vec<&str> = n["status"]["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["Hostname", "InternalIP", "ExternalIP"]);
    assert!(env.stored(ObjectKind::ServiceAccount, Some("kube-system"), "default").is_some());

    let mut d = ds("agent", "a:1");
    d["spec"]["template"]["spec"]["nodeSelector"] = json!({"pool": "gpu"});
    d["spec"]["template"]["spec"]["containers"][0]["resources"] =
        json!({"limits": {"cpu": "100m", "memory": "64Mi"}});
    let api = Api::<DaemonSet>::namespaced(env.kube().await, "default");
    bounded(api.create(&PostParams::default(), &serde_json::from_value(d.clone()).unwrap()))
        .await
        .unwrap();
    let status = bounded(api.get("agent")).await.unwrap().status.unwrap();
    assert_eq!(
        (status.desired_number_scheduled, status.current_number_scheduled),
        (0, 0),
        "the gpu taint is not tolerated"
    );
    d["spec"]["template"]["spec"]["tolerations"] =
        json!([{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]);
    bounded(api.patch("agent", &PatchParams::apply("t").force(), &Patch::Apply(&d))).await.unwrap();
    let status = bounded(api.get("agent")).await.unwrap().status.unwrap();
    assert_eq!(
        (status.desired_number_scheduled, status.current_number_scheduled, status.number_ready),
        (2, 2, 2)
    );
    let pods = || async {
        let (_, p) = env.get("/api/v1/namespaces/default/pods").await.parts();
        p["items"].as_array().unwrap().len()
    };
    assert_eq!(pods().await, 2);
    bounded(api.delete("agent", &DeleteParams::orphan())).await.unwrap();
    assert_eq!(pods().await, 2, "orphaned pods stay");
    // A new DaemonSet with the same selector adopts the orphans (the controller's
    // ClaimPods) rather than making a second pod per node; a Background delete then takes
    // them with it.
    let again = bounded(api.create(&PostParams::default(), &serde_json::from_value(d).unwrap()))
        .await
        .unwrap();
    let uid = again.metadata.uid.unwrap();
    let (_, p) = env.get("/api/v1/namespaces/default/pods").await.parts();
    let items = p["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "adopted, none made: {p}");
    assert!(
        items.iter().all(|p| p["metadata"]["ownerReferences"][0]["uid"] == uid.as_str()
            && p["metadata"]["ownerReferences"][0]["controller"] == true
            && p["status"]["qosClass"] == "Guaranteed"),
        "{p}"
    );
    bounded(api.delete("agent", &DeleteParams::background())).await.unwrap();
    assert_eq!(pods().await, 0, "the adopted pods went with it");
}
