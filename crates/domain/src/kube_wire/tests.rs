//! The encoder against the generated table: each rule of Go's `encoding/json` that the
//! table's field rules drive, on the fields of the real types.

use serde_json::{Value, json};

use super::*;

fn ds() -> Ty {
    root("apps/v1", "DaemonSet").expect("the table has DaemonSet")
}

fn encoded(t: Ty, mut v: Value) -> Value {
    let problems = encode(t, &mut v);
    assert!(problems.is_empty(), "{problems:?}");
    v
}

fn normalised(t: Ty, mut v: Value) -> Value {
    let problems = normalise(t, &mut v);
    assert!(problems.is_empty(), "{problems:?}");
    v
}

fn daemonset(pod_spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": pod_spec}}})
}

#[test]
fn every_served_kind_and_answer_type_is_in_the_table() {
    for (v, k) in [
        ("v1", "Namespace"),
        ("v1", "Secret"),
        ("v1", "ServiceAccount"),
        ("v1", "Node"),
        ("v1", "Pod"),
        ("v1", "ConfigMap"),
        ("v1", "Service"),
        ("v1", "Event"),
        ("apps/v1", "DaemonSet"),
        ("apps/v1", "Deployment"),
        ("v1", "PodList"),
        ("apps/v1", "DaemonSetList"),
        ("v1", "Status"),
        ("meta.k8s.io/v1", "Table"),
    ] {
        assert!(root(v, k).is_some(), "{v} {k}");
    }
    assert!(ty("meta/v1.WatchEvent").is_some());
    assert!(root("batch/v1", "Job").is_none());
    assert!(SOURCE.repos.iter().any(|(r, tag, commit, _)| *r == "kubernetes/api"
        && tag.starts_with("v0.")
        && commit.len() == 40));
}

#[test]
fn empty_omitempty_fields_go_and_pointers_to_zero_stay() {
    let given = daemonset(json!({
        "tolerations": [{"key": "gpu", "operator": "Equal", "value": "", "effect": "NoSchedule"}],
        "hostNetwork": false,
        "nodeSelector": {},
        "automountServiceAccountToken": false,
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "c", "image": "i", "args": [], "env": [{"name": "X", "value": ""}]}],
    }));
    let n = normalised(ds(), given);
    let pod = &n["spec"]["template"]["spec"];
    assert_eq!(
        pod["tolerations"],
        json!([{"key": "gpu", "operator": "Equal", "effect": "NoSchedule"}])
    );
    assert!(pod.get("hostNetwork").is_none(), "a non-pointer false is left out: {pod}");
    assert!(pod.get("nodeSelector").is_none(), "an empty map is left out: {pod}");
    assert_eq!(pod["automountServiceAccountToken"], false, "a pointer to false stays");
    assert_eq!(pod["terminationGracePeriodSeconds"], 0, "a pointer to zero stays");
    assert_eq!(pod["containers"][0], json!({"name": "c", "image": "i", "env": [{"name": "X"}]}));
    let none = normalised(ds(), daemonset(json!({"tolerations": [], "containers": []})));
    let pod = &none["spec"]["template"]["spec"];
    assert!(pod.get("tolerations").is_none(), "{pod}");
    assert_eq!(pod["containers"], json!([]), "`containers` has no omitempty: [] stays");
}

#[test]
fn encode_writes_every_field_go_writes_and_never_leaves_out_a_struct() {
    let e = encoded(ds(), daemonset(json!({"containers": [{"name": "c", "image": "i"}]})));
    assert_eq!(
        e["spec"]["template"]["metadata"],
        json!({"labels": {"a": "b"}, "creationTimestamp": null}),
        "a zero metav1.Time is written as null"
    );
    assert_eq!(e["spec"]["updateStrategy"], json!({}), "an omitempty struct is still written");
    assert_eq!(
        e["status"],
        json!({"currentNumberScheduled": 0, "numberMisscheduled": 0,
            "desiredNumberScheduled": 0, "numberReady": 0}),
        "non-omitempty numbers are written as zero"
    );
    let c = &e["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["resources"], json!({}));
    assert!(c.get("imagePullPolicy").is_none(), "omitempty strings are not invented");
    // A non-omitempty field absent is written as its zero (Node's `Port` is no omitempty).
    let node = encoded(root("v1", "Node").unwrap(), json!({"metadata": {"name": "n"}}));
    assert_eq!(node["status"]["daemonEndpoints"], json!({"kubeletEndpoint": {"Port": 0}}));
    assert_eq!(node["status"]["nodeInfo"]["machineID"], "");
    let event = encoded(root("v1", "Event").unwrap(), json!({"metadata": {"name": "e"}}));
    assert_eq!(event["reportingComponent"], "");
    assert_eq!(event["eventTime"], Value::Null);
    assert_eq!(event["involvedObject"], json!({}));
}

#[test]
fn quantities_and_times_take_their_marshal_json_form() {
    let pod = root("v1", "Pod").unwrap();
    let v = normalised(
        pod,
        json!({"spec": {"containers": [{"name": "c", "resources": {
            "limits": {"cpu": "0.1", "memory": "1024Mi"}, "requests": {"cpu": "1000m"}}}]},
            "status": {"startTime": "2024-01-01T01:02:03.456+02:00"}}),
    );
    assert_eq!(
        v["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "100m", "memory": "1Gi"}, "requests": {"cpu": "1"}})
    );
    assert_eq!(v["status"]["startTime"], "2023-12-31T23:02:03Z");
    let ev = normalised(
        root("v1", "Event").unwrap(),
        json!({"eventTime": "2024-01-01T00:00:00.1234567Z"}),
    );
    assert_eq!(ev["eventTime"], "2024-01-01T00:00:00.123456Z");
    let mut bad =
        json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "lots"}}}]}});
    let problems = normalise(pod, &mut bad);
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].path, "spec.containers[0].resources.limits.cpu");
    assert!(problems[0].message.starts_with("quantities must match"), "{problems:?}");
}

#[test]
fn unknown_fields_stay_and_both_functions_are_idempotent() {
    let given = daemonset(json!({"futureField": {"x": []}, "containers": [{"name": "c"}],
        "tolerations": []}));
    let e = encoded(ds(), given.clone());
    assert_eq!(e["spec"]["template"]["spec"]["futureField"], json!({"x": []}));
    assert_eq!(encoded(ds(), e.clone()), e);
    assert_eq!(normalised(ds(), e.clone()), e, "normalise keeps what encode wrote");
    let n = normalised(ds(), given);
    assert_eq!(normalised(ds(), n.clone()), n);
}

#[test]
fn visit_reaches_nested_structs_parents_first() {
    let mut v = daemonset(json!({"containers": [{"name": "a"}, {"name": "b"}]}));
    let mut seen = Vec::new();
    visit(ds(), &mut v, &mut |t, m| {
        seen.push(t.name());
        if t.name() == "core/v1.PodSpec" {
            m.insert("initContainers".into(), json!([{"name": "init"}]));
        }
    });
    let containers = seen.iter().filter(|n| **n == "core/v1.Container").count();
    assert_eq!(containers, 3, "what a parent adds is visited: {seen:?}");
    assert_eq!(seen[0], "apps/v1.DaemonSet");
}

#[test]
fn unset_is_what_go_defaulting_code_tests() {
    let pod_spec = ty("core/v1.PodSpec").unwrap();
    let policy = pod_spec.field("dnsPolicy").unwrap();
    assert!(policy.is_unset(None) && policy.is_unset(Some(&json!(""))));
    assert!(!policy.is_unset(Some(&json!("Default"))));
    let grace = pod_spec.field("terminationGracePeriodSeconds").unwrap();
    assert!(grace.is_pointer());
    assert!(!grace.is_unset(Some(&json!(0))), "a pointer to zero is set");
    assert_eq!(pod_spec.struct_of("containers").map(Ty::name), Some("core/v1.Container"));
    let port = ty("core/v1.ContainerPort").unwrap().field("protocol").unwrap();
    assert_eq!(port.default, Some("\"TCP\""));
}
