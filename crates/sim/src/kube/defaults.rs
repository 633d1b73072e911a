//! The defaults a Kubernetes API server fills in when it stores an object of a served
//! kind (the `SetDefaults_*` functions of `k8s.io/kubernetes/pkg/apis/*/v1` and the
//! admission that every cluster runs), so what a client reads back is what it would read
//! from DOKS: a DaemonSet's `updateStrategy` and `revisionHistoryLimit`, a pod template's
//! `restartPolicy`, `dnsPolicy`, `schedulerName`, a container's `imagePullPolicy` and
//! termination message settings, a Namespace's `kubernetes.io/metadata.name` label, a
//! Secret's `type`, a Service's cluster IP and port protocol.
//!
//! Invariant: a default only fills what is absent (never overrides a value the client
//! set), except the namespace name label, which the server always sets; applying the
//! defaults twice changes nothing.

use serde_json::{Map, Value, json};

use super::Resource;

fn obj(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    v.as_object_mut().expect("just made an object")
}

fn or_insert(m: &mut Map<String, Value>, k: &str, v: Value) {
    m.entry(k.to_owned()).or_insert(v);
}

/// Fills the defaults of an object of `resource` (`content` has no `apiVersion`/`kind`),
/// `cluster_ip` allocating a Service's address when it has none.
pub fn apply(resource: Resource, content: &mut Value, cluster_ip: &mut dyn FnMut() -> String) {
    match resource {
        Resource::Namespace => namespace(content),
        Resource::Secret => {
            or_insert(obj(content), "type", json!("Opaque"));
        }
        Resource::DaemonSet => daemonset(content),
        Resource::Deployment => deployment(content),
        Resource::Pod => {
            if let Some(spec) = content.get_mut("spec") {
                pod_spec(spec, true);
            }
        }
        Resource::Service => service(content, cluster_ip),
        Resource::ServiceAccount | Resource::ConfigMap | Resource::Event | Resource::Node => {}
    }
}

fn namespace(content: &mut Value) {
    let name = content.pointer("/metadata/name").and_then(Value::as_str).map(str::to_owned);
    if let Some(name) = name {
        let meta = obj(obj(content).entry("metadata").or_insert(Value::Null));
        let labels = obj(meta.entry("labels").or_insert(Value::Null));
        labels.insert("kubernetes.io/metadata.name".into(), json!(name));
    }
    let spec = obj(obj(content).entry("spec").or_insert(Value::Null));
    or_insert(spec, "finalizers", json!(["kubernetes"]));
}

fn daemonset(content: &mut Value) {
    let spec = obj(obj(content).entry("spec").or_insert(Value::Null));
    let strategy = obj(spec.entry("updateStrategy").or_insert(Value::Null));
    or_insert(strategy, "type", json!("RollingUpdate"));
    if strategy.get("type") == Some(&json!("RollingUpdate")) {
        let rolling = obj(strategy.entry("rollingUpdate").or_insert(Value::Null));
        or_insert(rolling, "maxUnavailable", json!(1));
        or_insert(rolling, "maxSurge", json!(0));
    }
    or_insert(spec, "revisionHistoryLimit", json!(10));
    template(spec);
}

fn deployment(content: &mut Value) {
    let spec = obj(obj(content).entry("spec").or_insert(Value::Null));
    or_insert(spec, "replicas", json!(1));
    let strategy = obj(spec.entry("strategy").or_insert(Value::Null));
    or_insert(strategy, "type", json!("RollingUpdate"));
    if strategy.get("type") == Some(&json!("RollingUpdate")) {
        let rolling = obj(strategy.entry("rollingUpdate").or_insert(Value::Null));
        or_insert(rolling, "maxUnavailable", json!("25%"));
        or_insert(rolling, "maxSurge", json!("25%"));
    }
    or_insert(spec, "revisionHistoryLimit", json!(10));
    or_insert(spec, "progressDeadlineSeconds", json!(600));
    template(spec);
}

fn template(spec: &mut Map<String, Value>) {
    if let Some(t) = spec.get_mut("template").and_then(Value::as_object_mut)
        && let Some(pod) = t.get_mut("spec")
    {
        pod_spec(pod, false);
    }
}

/// A pod spec (of a Pod, or of a template when `pod` is false: the admission defaults —
/// service account, tolerations, priority — apply to Pods only).
fn pod_spec(spec: &mut Value, pod: bool) {
    let s = obj(spec);
    or_insert(s, "restartPolicy", json!("Always"));
    or_insert(s, "terminationGracePeriodSeconds", json!(30));
    or_insert(s, "dnsPolicy", json!("ClusterFirst"));
    or_insert(s, "securityContext", json!({}));
    or_insert(s, "schedulerName", json!("default-scheduler"));
    if pod {
        or_insert(s, "serviceAccountName", json!("default"));
        let sa = s.get("serviceAccountName").cloned().unwrap_or(json!("default"));
        or_insert(s, "serviceAccount", sa);
        or_insert(s, "enableServiceLinks", json!(true));
        or_insert(s, "priority", json!(0));
        or_insert(s, "preemptionPolicy", json!("PreemptLowerPriority"));
    }
    for list in ["containers", "initContainers"] {
        for c in s.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
            container(c);
        }
    }
    for v in s.get_mut("volumes").and_then(Value::as_array_mut).into_iter().flatten() {
        for source in ["secret", "configMap"] {
            if let Some(src) = v.get_mut(source).and_then(Value::as_object_mut) {
                or_insert(src, "defaultMode", json!(420));
            }
        }
    }
}

fn container(c: &mut Value) {
    let c = obj(c);
    let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
    // `:latest` or no tag (a digest pins the image): Always, else IfNotPresent.
    let tag = image.rsplit_once('/').map_or(image, |(_, last)| last);
    let pull = if image.contains('@') {
        "IfNotPresent"
    } else {
        match tag.rsplit_once(':') {
            Some((_, "latest")) | None => "Always",
            Some(_) => "IfNotPresent",
        }
    };
    or_insert(c, "imagePullPolicy", json!(pull));
    or_insert(c, "terminationMessagePath", json!("/dev/termination-log"));
    or_insert(c, "terminationMessagePolicy", json!("File"));
    or_insert(c, "resources", json!({}));
    for p in c.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten() {
        or_insert(obj(p), "protocol", json!("TCP"));
    }
    for e in c.get_mut("env").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(f) = e.pointer_mut("/valueFrom/fieldRef").and_then(Value::as_object_mut) {
            or_insert(f, "apiVersion", json!("v1"));
        }
    }
}

fn service(content: &mut Value, cluster_ip: &mut dyn FnMut() -> String) {
    let spec = obj(obj(content).entry("spec").or_insert(Value::Null));
    or_insert(spec, "type", json!("ClusterIP"));
    or_insert(spec, "sessionAffinity", json!("None"));
    let external = spec.get("type") == Some(&json!("ExternalName"));
    if !external {
        if !spec.contains_key("clusterIP") {
            spec.insert("clusterIP".into(), json!(cluster_ip()));
        }
        let ip = spec.get("clusterIP").cloned().unwrap_or(Value::Null);
        or_insert(spec, "clusterIPs", json!([ip]));
        or_insert(spec, "ipFamilies", json!(["IPv4"]));
        or_insert(spec, "ipFamilyPolicy", json!("SingleStack"));
        or_insert(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    for p in spec.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten() {
        let p = obj(p);
        or_insert(p, "protocol", json!("TCP"));
        if let Some(port) = p.get("port").cloned() {
            or_insert(p, "targetPort", port);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemonset_and_template_defaults_fill_only_what_is_missing() {
        let mut ds = json!({"metadata":{"name":"d"},"spec":{"template":{"spec":{"containers":[
            {"name":"a","image":"bcd:1.2","env":[{"name":"N","valueFrom":{"fieldRef":{"fieldPath":"spec.nodeName"}}}]},
            {"name":"b","image":"busybox","imagePullPolicy":"Never"}]}}}});
        apply(Resource::DaemonSet, &mut ds, &mut || unreachable!());
        let once = ds.clone();
        apply(Resource::DaemonSet, &mut ds, &mut || unreachable!());
        assert_eq!(ds, once, "idempotent");
        let spec = &ds["spec"];
        assert_eq!(
            spec["updateStrategy"],
            json!({"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":1,"maxSurge":0}})
        );
        assert_eq!(spec["revisionHistoryLimit"], 10);
        let pod = &spec["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Always");
        assert_eq!(pod["containers"][0]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(pod["containers"][1]["imagePullPolicy"], "Never");
        assert_eq!(pod["containers"][0]["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
        assert!(pod.get("serviceAccountName").is_none(), "templates get no admission defaults");
    }

    #[test]
    fn namespace_label_and_service_address() {
        let mut ns =
            json!({"metadata":{"name":"n","labels":{"kubernetes.io/metadata.name":"spoofed"}}});
        apply(Resource::Namespace, &mut ns, &mut || unreachable!());
        assert_eq!(ns["metadata"]["labels"]["kubernetes.io/metadata.name"], "n");
        let mut svc = json!({"metadata":{"name":"s"},"spec":{"ports":[{"port":80}]}});
        apply(Resource::Service, &mut svc, &mut || "10.245.0.10".into());
        assert_eq!(svc["spec"]["clusterIP"], "10.245.0.10");
        assert_eq!(svc["spec"]["ports"][0], json!({"port":80,"protocol":"TCP","targetPort":80}));
    }
}
