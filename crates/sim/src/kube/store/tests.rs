//! The store's unit tests: writes, reads and field ownership, as an API server answers.

use bc_domain::kube_wire;
use bc_domain::ports::Preconditions;
use bc_domain::time::Timestamp;
use serde_json::{Value, json};

use super::types::*;
use crate::kube::decode::FieldValidation;
use crate::kube::error::KubeError;
use crate::kube::patch;
use crate::kube::resource::Resource;

fn t() -> Timestamp {
    Timestamp::from_unix_ms(1_800_000_000_000)
}

fn apply(
    o: &mut Objects,
    resource: Resource,
    ns: Option<&str>,
    name: &str,
    body: Value,
    manager: &str,
    force: bool,
) -> Result<Applied, KubeError> {
    o.apply(
        "c1",
        &ApplyRequest { resource, namespace: ns, name, body: &body, manager, force },
        FieldValidation::Strict,
        t(),
    )
}

fn ns(o: &mut Objects, name: &str) {
    apply(o, Resource::Namespace, None, name, json!({"metadata":{"name":name}}), "test", false)
        .unwrap();
}

/// A new Pod is `Pending` with its QoS class whatever status the client sent
/// (the pod strategy's `PrepareForCreate`; "Configure Quality of Service for Pods").
#[test]
fn a_new_pod_is_pending_with_its_qos_class() {
    let mut o = Objects::default();
    ns(&mut o, "n");
    let pod = |name: &str, resources: Value| {
        json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":name,"namespace":"n"},
          "spec":{"containers":[{"name":"c","image":"i:1","resources":resources}]},
          "status":{"phase":"Running"}})
    };
    for (name, resources, qos) in [
        ("b", json!({}), "BestEffort"),
        ("u", json!({"requests":{"cpu":"100m"}}), "Burstable"),
        ("g", json!({"limits":{"cpu":"1","memory":"1Gi"}}), "Guaranteed"),
        ("h", json!({"limits":{"cpu":"1","memory":"1Gi"},"requests":{"cpu":"500m"}}), "Burstable"),
    ] {
        let a = apply(&mut o, Resource::Pod, Some("n"), name, pod(name, resources), "k", false)
            .unwrap();
        assert_eq!(a.object["status"], json!({"phase":"Pending","qosClass":qos}), "{name}");
    }
}

fn bcd_like_daemonset(tolerations: Value) -> Value {
    json!({"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"d","namespace":"n",
        "labels":{"a":"b"}},
        "spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},
            "spec":{"tolerations":tolerations,"automountServiceAccountToken":false,
                "containers":[{"name":"c","image":"i:1","args":[],
                    "resources":{"requests":{"cpu":"0.1","memory":"1024Mi"}}}]}}}})
}

/// Every answer is what the Go types write: each served kind, as created, read, listed
/// and seen by a watch, is a fixed point of `kube_wire::encode`.
#[test]
fn every_answer_is_written_as_the_go_types_write_it() {
    let mut o = Objects::default();
    ns(&mut o, "n");
    let objects = [
        (Resource::Secret, json!({"metadata":{"name":"x","namespace":"n"},"data":{}})),
        (Resource::ServiceAccount, json!({"metadata":{"name":"x","namespace":"n"},"secrets":[]})),
        (Resource::ConfigMap, json!({"metadata":{"name":"x","namespace":"n","annotations":{}}})),
        (
            Resource::Service,
            json!({"metadata":{"name":"x","namespace":"n"},"spec":{"ports":[{"port":80}]}}),
        ),
        (
            Resource::Event,
            json!({"metadata":{"name":"x","namespace":"n"},
            "involvedObject":{"kind":"Pod","namespace":"n","name":"p"},"reason":"R"}),
        ),
        (
            Resource::Pod,
            json!({"metadata":{"name":"x","namespace":"n"},
            "spec":{"containers":[{"name":"c","image":"i","resources":{"limits":{"cpu":"0.5"}}}]}}),
        ),
        (Resource::DaemonSet, bcd_like_daemonset(json!([]))),
        (
            Resource::Deployment,
            json!({"metadata":{"name":"x","namespace":"n"},
            "spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},
                "spec":{"containers":[{"name":"c","image":"i"}]}}}}),
        ),
        (Resource::Node, json!({"metadata":{"name":"x"},"spec":{"taints":[]}})),
    ];
    for (r, body) in objects {
        let name = body["metadata"]["name"].as_str().unwrap().to_owned();
        let made = apply(&mut o, r, r.namespaced().then_some("n"), &name, body, "t", false)
            .unwrap_or_else(|e| panic!("{r:?}: {e:?}"));
        let read = o.get("c1", r, Some("n"), &name).unwrap();
        assert_eq!(made.object, read);
        let mut encoded = read.clone();
        assert!(kube_wire::encode(r.wire(), &mut encoded).is_empty());
        assert_eq!(encoded, read, "{r:?} as answered is as Go writes it");
        assert_eq!(read["apiVersion"], r.api_version());
    }
    let pod = o.get("c1", Resource::Pod, Some("n"), "x").unwrap();
    assert_eq!(pod["spec"]["containers"][0]["resources"]["limits"]["cpu"], "500m");
    let ds = o.get("c1", Resource::DaemonSet, Some("n"), "d").unwrap();
    let spec = &ds["spec"]["template"]["spec"];
    assert!(spec.get("tolerations").is_none(), "{spec}");
    assert_eq!(
        spec["containers"][0]["resources"]["requests"],
        json!({"cpu":"100m","memory":"1Gi"})
    );
    assert!(spec["containers"][0].get("args").is_none());
    assert_eq!(spec["automountServiceAccountToken"], false);
    assert_eq!(ds["spec"]["template"]["metadata"]["creationTimestamp"], Value::Null);
    assert_eq!(ds["status"]["numberReady"], 0);
    assert_eq!(o.get("c1", Resource::Secret, Some("n"), "x").unwrap()["type"], "Opaque");
    for change in o.changes_since("c1", 0).unwrap() {
        let mut encoded = (*change.object).clone();
        kube_wire::encode(change.resource.wire(), &mut encoded);
        assert_eq!(encoded, *change.object, "watch event of {:?}", change.resource);
    }
}

/// A server-side apply that changes nothing changes nothing — including one whose body
/// carries empty `omitempty` fields (`tolerations: []`, a toleration's `value: ""`)
/// over an object stored without them: same resourceVersion, same managedFields time,
/// no watch event.
#[test]
fn a_no_op_apply_with_empty_omitempty_fields_changes_nothing() {
    for tolerations in
        [json!([]), json!([{"key":"gpu","operator":"Equal","value":"","effect":"NoSchedule"}])]
    {
        let mut o = Objects::default();
        ns(&mut o, "n");
        let body = bcd_like_daemonset(tolerations.clone());
        let req = ApplyRequest {
            resource: Resource::DaemonSet,
            namespace: Some("n"),
            name: "d",
            body: &body,
            manager: "bc",
            force: true,
        };
        let at = |minutes| t() + time::Duration::minutes(minutes);
        let first = o.create("c1", &req, FieldValidation::Strict, at(0)).unwrap();
        let applied = o.apply("c1", &req, FieldValidation::Strict, at(5)).unwrap();
        let rv = applied.object["metadata"]["resourceVersion"].clone();
        let managed = applied.object["metadata"]["managedFields"].clone();
        let history = o.changes_since("c1", 0).unwrap().len();
        assert_ne!(first.object["metadata"]["resourceVersion"], rv, "the Apply manager is new");
        for minutes in [10, 20] {
            let again = o.apply("c1", &req, FieldValidation::Strict, at(minutes)).unwrap();
            assert_eq!(again.object["metadata"]["resourceVersion"], rv, "{tolerations}");
            assert_eq!(again.object["metadata"]["managedFields"], managed, "{tolerations}");
            assert_eq!(o.changes_since("c1", 0).unwrap().len(), history, "no watch event");
        }
    }
}

#[test]
fn create_merge_noop_conflict_force() {
    let mut o = Objects::default();
    let nsv =
        json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n","labels":{"a":"1"}}});
    let a = apply(&mut o, Resource::Namespace, None, "n", nsv.clone(), "bc", false).unwrap();
    assert!(a.created);
    let rv = a.object["metadata"]["resourceVersion"].clone();
    let b = apply(&mut o, Resource::Namespace, None, "n", nsv.clone(), "bc", false).unwrap();
    assert!(!b.created);
    assert_eq!(b.object["metadata"]["resourceVersion"], rv);

    let sec = json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"n"},"stringData":{"k":"v"}});
    let s = apply(&mut o, Resource::Secret, Some("n"), "s", sec.clone(), "kubectl", false).unwrap();
    assert_eq!(s.object["data"]["k"], json!("dg=="));
    assert!(s.object.get("stringData").is_none());
    let s2 = apply(&mut o, Resource::Secret, Some("n"), "s", sec, "kubectl", false).unwrap();
    assert_eq!(s.object["metadata"]["resourceVersion"], s2.object["metadata"]["resourceVersion"]);
    let ours = json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"n"},"data":{"k":"eA=="}});
    let e = apply(&mut o, Resource::Secret, Some("n"), "s", ours.clone(), "bc", false).unwrap_err();
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(e.details.causes[0].field, ".data.k");
    assert_eq!(e.details.causes[0].reason, "FieldManagerConflict");
    assert_eq!(e.message, "Apply failed with 1 conflict: conflict with \"kubectl\": .data.k");
    let f = apply(&mut o, Resource::Secret, Some("n"), "s", ours, "bc", true).unwrap();
    assert_eq!(f.object["data"]["k"], json!("eA=="));
}

/// A `data` value wrapped over lines, as `kubectl kustomize` writes a long one, is
/// taken (Go's base64 decoder skips line breaks) and reads back unwrapped; a value
/// that is not base64 once unwrapped is still a 400.
#[test]
fn a_secret_value_wrapped_over_lines_is_taken_and_stored_unwrapped() {
    let mut o = Objects::default();
    ns(&mut o, "n");
    let wrapped = "cG9zdGdyZXM6Ly9iYzpjaGFuZ2UtbWVAcG9zdGdyZXMuYmV0dGVyLWNvbXB1dGUuc3ZjLm\nNsdXN0ZXIubG9jYWw6NTQzMi9iYw==\n";
    let sec = |v: &str| json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"n"},"data":{"url":v,"k":"dg=="}});
    let s = apply(&mut o, Resource::Secret, Some("n"), "s", sec(wrapped), "k", false).unwrap();
    assert_eq!(
        s.object["data"],
        json!({"url": wrapped.replace('\n', ""), "k": "dg=="}),
        "stored as the bytes it holds"
    );
    let e = apply(&mut o, Resource::Secret, Some("n"), "s", sec("no\tbase64\n"), "k", false)
        .unwrap_err();
    assert_eq!(e.code, 400);
    assert!(e.message.contains("illegal base64 data in data.url"), "{}", e.message);
}

#[test]
fn conflicts_are_per_field_in_associative_lists_and_force_takes_exactly_them() {
    let mut o = Objects::default();
    ns(&mut o, "n");
    let ds = |image: &str, extra: Value| {
        let mut c = json!({"name":"c","image":image});
        patch::merge_patch(&mut c, &extra);
        json!({"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"x","namespace":"n"},
          "spec":{"selector":{"matchLabels":{"app":"x"}},"template":{"metadata":{"labels":{"app":"x"}},
          "spec":{"containers":[c]}}}})
    };
    apply(&mut o, Resource::DaemonSet, Some("n"), "x", ds("a:1", json!({})), "x", false).unwrap();
    // Another manager sets the same image (shared) and its own env: no conflict.
    let theirs = ds("a:1", json!({"env":[{"name":"E","value":"1"}]}));
    apply(&mut o, Resource::DaemonSet, Some("n"), "x", theirs, "y", false).unwrap();
    // "x" changes the image: one conflict, named as Kubernetes names it.
    let e = apply(&mut o, Resource::DaemonSet, Some("n"), "x", ds("a:2", json!({})), "x", false)
        .unwrap_err();
    assert_eq!(
        e.message,
        "Apply failed with 1 conflict: conflict with \"y\": .spec.template.spec.containers[name=\"c\"].image"
    );
    let forced =
        apply(&mut o, Resource::DaemonSet, Some("n"), "x", ds("a:2", json!({})), "x", true)
            .unwrap();
    let c = &forced.object["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["image"], "a:2");
    assert_eq!(c["env"], json!([{"name":"E","value":"1"}]), "y keeps its env");
    let managed = forced.object["metadata"]["managedFields"].as_array().unwrap();
    let y = managed.iter().find(|m| m["manager"] == "y").unwrap();
    let yc = &y["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"];
    assert!(yc.get("f:image").is_none(), "the forced field changed hands: {yc}");
    assert!(yc.get("f:env").is_some(), "nothing else did: {yc}");
    // Defaults are nobody's.
    assert_eq!(forced.object["spec"]["revisionHistoryLimit"], 10);
    assert!(
        managed.iter().all(|m| m["fieldsV1"]["f:spec"].get("f:revisionHistoryLimit").is_none())
    );
}

#[test]
fn a_list_item_dropped_from_an_apply_goes_whole_even_with_defaults_in_it() {
    let mut o = Objects::default();
    ns(&mut o, "n");
    let ds = |env: Value| {
        json!({"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"x","namespace":"n"},
          "spec":{"selector":{"matchLabels":{"app":"x"}},"template":{"metadata":{"labels":{"app":"x"}},
          "spec":{"containers":[{"name":"c","image":"i:1","env":env}]}}}})
    };
    let node = json!({"name":"NODE","valueFrom":{"fieldRef":{"fieldPath":"spec.nodeName"}}});
    let a = apply(
        &mut o,
        Resource::DaemonSet,
        Some("n"),
        "x",
        ds(json!([{"name":"A","value":"1"}, node])),
        "m",
        false,
    )
    .unwrap();
    let env = &a.object["spec"]["template"]["spec"]["containers"][0]["env"];
    assert_eq!(env[1]["valueFrom"]["fieldRef"]["apiVersion"], "v1", "defaulted, nobody's");
    let b = apply(
        &mut o,
        Resource::DaemonSet,
        Some("n"),
        "x",
        ds(json!([{"name":"A","value":"1"}])),
        "m",
        false,
    )
    .unwrap();
    assert_eq!(
        b.object["spec"]["template"]["spec"]["containers"][0]["env"],
        json!([{"name":"A","value":"1"}])
    );
}

#[test]
fn an_empty_map_neither_conflicts_nor_wipes_other_managers_fields() {
    let mut o = Objects::default();
    let nsv = json!({"metadata":{"name":"n","labels":{"team":"x"}}});
    apply(&mut o, Resource::Namespace, None, "n", nsv, "kubectl", false).unwrap();
    let ours = json!({"metadata":{"name":"n","labels":{}}});
    let r = apply(&mut o, Resource::Namespace, None, "n", ours.clone(), "bc", false).unwrap();
    assert_eq!(r.object["metadata"]["labels"]["team"], "x");
    let r = apply(&mut o, Resource::Namespace, None, "n", ours, "bc", true).unwrap();
    assert_eq!(r.object["metadata"]["labels"]["team"], "x");
}

#[test]
fn dropped_fields_are_removed_and_namespace_delete_cascades() {
    let mut o = Objects::default();
    ns(&mut o, "n");
    let sa = json!({"metadata":{"labels":{"a":"1","b":"2"}}});
    apply(&mut o, Resource::ServiceAccount, Some("n"), "x", sa, "bc", false).unwrap();
    let sa = json!({"metadata":{"labels":{"a":"1"}}});
    let r = apply(&mut o, Resource::ServiceAccount, Some("n"), "x", sa, "bc", false).unwrap();
    assert_eq!(r.object["metadata"]["labels"], json!({"a":"1"}));
    let e = apply(&mut o, Resource::ServiceAccount, Some("zz"), "x", json!({}), "bc", false)
        .unwrap_err();
    assert_eq!(e.reason, "NotFound");
    let gone = o
        .delete(
            "c1",
            Resource::Namespace,
            None,
            "n",
            &Preconditions::default(),
            Propagation::Background,
            t(),
        )
        .unwrap();
    match gone {
        Deleted::Object(v) => assert_eq!(v["status"]["phase"], json!("Terminating")),
        other => panic!("{other:?}"),
    }
    assert!(o.get("c1", Resource::ServiceAccount, Some("n"), "x").is_err());
}

#[test]
fn create_refuses_a_taken_name_and_replace_and_delete_check_their_preconditions() {
    let mut o = Objects::default();
    let nsv = json!({"metadata":{"name":"n","labels":{"team":"x"}}});
    let req = ApplyRequest {
        resource: Resource::Namespace,
        namespace: None,
        name: "n",
        body: &nsv,
        manager: "bc",
        force: false,
    };
    let made = o.create("c1", &req, FieldValidation::Strict, t()).unwrap();
    assert!(made.created);
    assert_eq!(made.object["metadata"]["managedFields"][0]["operation"], "Update");
    let e = o.create("c1", &req, FieldValidation::Strict, t()).unwrap_err();
    assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(e.message, "namespaces \"n\" already exists");

    let mut stale = made.object.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    stale["metadata"]["labels"]["team"] = json!("y");
    let newer = o
        .update(
            "c1",
            Resource::Namespace,
            None,
            "n",
            Edit::MergePatch(&json!({"metadata":{"labels":{"z":"1"}}})),
            "kubectl",
            FieldValidation::Strict,
            t(),
        )
        .unwrap();
    let e = o
        .update(
            "c1",
            Resource::Namespace,
            None,
            "n",
            Edit::Replace(&stale),
            "kubectl",
            FieldValidation::Strict,
            t(),
        )
        .unwrap_err();
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert!(e.message.contains("the object has been modified"), "{}", e.message);

    let uid = newer.object["metadata"]["uid"].as_str().unwrap().to_owned();
    let rv = newer.object["metadata"]["resourceVersion"].as_str().unwrap().to_owned();
    for pre in [
        Preconditions { uid: Some("other".into()), resource_version: None },
        Preconditions { uid: Some(uid.clone()), resource_version: Some("999".into()) },
    ] {
        let e = o
            .delete("c1", Resource::Namespace, None, "n", &pre, Propagation::Background, t())
            .unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"), "{pre:?}");
        assert!(e.message.contains("Precondition failed"), "{}", e.message);
    }
    let pre = Preconditions { uid: Some(uid), resource_version: Some(rv) };
    o.delete("c1", Resource::Namespace, None, "n", &pre, Propagation::Background, t()).unwrap();
    assert!(o.get("c1", Resource::Namespace, None, "n").is_err());
}

#[test]
fn pages_continue_and_history_compacts() {
    let mut o = Objects::default();
    for i in 0..5 {
        ns(&mut o, &format!("n{i}"));
    }
    let q = Query { limit: 2, ..Query::default() };
    let p1 = o.page("c1", Resource::Namespace, &q).unwrap();
    assert_eq!(p1.items.len(), 2);
    assert_eq!(p1.remaining, 3);
    let q2 = Query { limit: 2, continue_from: p1.next.clone(), ..Query::default() };
    let p2 = o.page("c1", Resource::Namespace, &q2).unwrap();
    assert_eq!(p2.items[0]["metadata"]["name"], "n2");
    let changes = o.changes_since("c1", 0).unwrap();
    assert_eq!(changes.len(), 5);
    for i in 0..WATCH_HISTORY + 10 {
        apply(
            &mut o,
            Resource::Namespace,
            None,
            "n0",
            json!({"metadata":{"labels":{"i":i.to_string()}}}),
            "test",
            false,
        )
        .unwrap();
    }
    let e = o.changes_since("c1", 1).unwrap_err();
    assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
    let e = o.page("c1", Resource::Namespace, &q2).unwrap_err();
    assert_eq!(e.code, 410);
}

/// A read answers from the object rendered at its last change: the server's own
/// in-place changes (a status, a deletion starting, a removal) are shown by the very next
/// read and watch event, never the rendering of before.
#[test]
fn a_read_after_the_servers_own_change_shows_the_change() {
    let mut o = Objects::default();
    ns(&mut o, "n");
    let pod = json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"n"},
      "spec":{"containers":[{"name":"c","image":"i:1"}]}});
    apply(&mut o, Resource::Pod, Some("n"), "p", pod, "k", false).unwrap();
    let read = |o: &Objects| o.get("c1", Resource::Pod, Some("n"), "p").unwrap();
    let rv = |v: &Value| v["metadata"]["resourceVersion"].as_str().unwrap().parse::<u64>().unwrap();
    let first = read(&o);
    assert_eq!(read(&o), first, "two reads of an unchanged object are the same");
    let key = (Resource::Pod, "n".to_owned(), "p".to_owned());

    assert!(!o.set_status("c1", &key, first["status"].clone()), "the same status is no write");
    assert_eq!(read(&o), first);

    assert!(o.set_status("c1", &key, json!({"phase":"Running","qosClass":"BestEffort"})));
    let running = read(&o);
    assert_eq!(running["status"]["phase"], json!("Running"));
    assert!(rv(&running) > rv(&first));
    let last = |o: &Objects| o.changes_since("c1", 0).unwrap().pop().unwrap();
    assert_eq!(*last(&o).object, running, "the watch event is the object as read");
    assert_eq!(last(&o).previous.as_deref(), Some(&first));

    o.mark_terminating("c1", &key, t());
    let terminating = read(&o);
    assert!(terminating["metadata"]["deletionTimestamp"].is_string());
    assert!(rv(&terminating) > rv(&running));

    let gone = o.remove("c1", &key).unwrap();
    assert!(rv(&gone) > rv(&terminating), "a removal is shown at its own resourceVersion");
    assert_eq!(*last(&o).object, gone);
}
