//! The defaults a Kubernetes API server (1.33, the newest minor the simulator serves)
//! fills in when it stores an object of a served kind, each ported from its Go source:
//!
//! - the declarative `+default=` markers of the `k8s.io/api` types (in the generated
//!   field table, `kube_wire::Field::default`: a container port's and a service port's
//!   `protocol: TCP`, a gRPC probe's `service: ""`, …), which `zz_generated.defaults.go`
//!   applies where the field is unset;
//! - the `SetDefaults_*` functions of `k8s.io/kubernetes` `pkg/apis/core/v1/defaults.go`
//!   and `pkg/apis/apps/v1/defaults.go`, each named where it is ported, called for every
//!   struct of their type the object holds (as the generated `SetObjectDefaults_<Kind>`
//!   functions call them), `SetDefaults_ResourceList` on every `ResourceList`;
//! - the conversion to `v1` (`serviceAccount` mirrors `serviceAccountName`), what the
//!   registry strategies set (a Namespace's `kubernetes` finalizer, a Service's cluster
//!   IP and IP families) and the admission every cluster runs on Pods (ServiceAccount,
//!   DefaultTolerationSeconds, Priority).
//!
//! Invariant: a default only fills what Go's defaulting code sees as unset (absent, null,
//! or the zero of a field that is no pointer) and never overrides a value, except the
//! namespace name label, which the server always sets; applying the defaults twice
//! changes nothing.

use bc_domain::kube_wire::{self, Ty, quantity::Quantity};
use serde_json::{Map, Value, json};

use super::Resource;

fn obj(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    v.as_object_mut().expect("just made an object")
}

/// Sets `m[k]` to `v` when Go would see it unset (absent, null, `""`, `0`, `false`;
/// `is_unset` of the table decides for a field that is a pointer: only absent or null).
fn or_insert(ty: Ty, m: &mut Map<String, Value>, k: &str, v: Value) {
    let unset = match ty.field(k) {
        Some(f) => f.is_unset(m.get(k)),
        None => m.get(k).is_none_or(Value::is_null),
    };
    if unset {
        m.insert(k.to_owned(), v);
    }
}

fn wire(name: &str) -> Ty {
    kube_wire::ty(name).expect("a type of the generated table")
}

/// Fills the defaults of an object of `resource` (`content` has no `apiVersion`/`kind`),
/// `cluster_ip` allocating a Service's address when it has none.
pub fn apply(resource: Resource, content: &mut Value, cluster_ip: &mut dyn FnMut() -> String) {
    let root = resource.wire();
    let m = obj(content);
    match resource {
        Resource::Namespace => namespace(m),
        // SetDefaults_Secret.
        Resource::Secret => or_insert(root, m, "type", json!("Opaque")),
        Resource::DaemonSet => daemonset(m),
        Resource::Deployment => deployment(m),
        Resource::Pod => pod(m),
        Resource::Service => service(m, cluster_ip),
        Resource::PersistentVolume => persistent_volume(m),
        // SetDefaults_ConfigMap makes `data` an empty map: nothing a client sees
        // (`data` is omitempty). Node, Event and ServiceAccount have no kind defaults.
        Resource::ConfigMap | Resource::ServiceAccount | Resource::Event | Resource::Node => {}
    }
    kube_wire::visit(root, content, &mut nested);
}

/// The defaults of a status the server (its controllers, the kubelet) writes: the nested
/// types' (`SetDefaults_NodeStatus`, `SetDefaults_NamespaceStatus`,
/// `SetDefaults_ResourceList`).
pub fn status(resource: Resource, status: &mut Value) {
    if let Some(t) = resource.status_wire() {
        kube_wire::visit(t, status, &mut nested);
    }
}

/// The defaults of one struct of type `ty` (the object's own, then its fields' as the
/// visit reaches them).
fn nested(ty: Ty, m: &mut Map<String, Value>) {
    for f in ty.fields() {
        if let Some(d) = f.default
            && f.is_unset(m.get(f.json))
            && let Ok(v) = serde_json::from_str(d)
        {
            m.insert(f.json.to_owned(), v);
        }
        if f.go_type == "ResourceList" {
            resource_list(m.get_mut(f.json));
        }
    }
    match ty.name() {
        "core/v1.PodSpec" => pod_spec(ty, m),
        "core/v1.Container" | "core/v1.EphemeralContainer" => container(ty, m),
        // SetDefaults_Volume: a volume with no source is an emptyDir.
        "core/v1.Volume" if m.iter().all(|(k, v)| k == "name" || v.is_null()) => {
            m.insert("emptyDir".into(), json!({}));
        }
        // SetDefaults_{Secret,ConfigMap,DownwardAPI,Projected}VolumeSource: 0644.
        "core/v1.SecretVolumeSource"
        | "core/v1.ConfigMapVolumeSource"
        | "core/v1.DownwardAPIVolumeSource"
        | "core/v1.ProjectedVolumeSource" => or_insert(ty, m, "defaultMode", json!(420)),
        // SetDefaults_ServiceAccountTokenProjection: an hour.
        "core/v1.ServiceAccountTokenProjection" => {
            or_insert(ty, m, "expirationSeconds", json!(3600));
        }
        // SetDefaults_HostPathVolumeSource: HostPathUnset, a pointer to "".
        "core/v1.HostPathVolumeSource" => or_insert(ty, m, "type", json!("")),
        // SetDefaults_PersistentVolumeClaimSpec (an ephemeral volume's claim template).
        "core/v1.PersistentVolumeClaimSpec" => or_insert(ty, m, "volumeMode", json!("Filesystem")),
        "core/v1.Probe" => {
            // SetDefaults_Probe.
            or_insert(ty, m, "timeoutSeconds", json!(1));
            or_insert(ty, m, "periodSeconds", json!(10));
            or_insert(ty, m, "successThreshold", json!(1));
            or_insert(ty, m, "failureThreshold", json!(3));
        }
        "core/v1.HTTPGetAction" => {
            // SetDefaults_HTTPGetAction.
            or_insert(ty, m, "path", json!("/"));
            or_insert(ty, m, "scheme", json!("HTTP"));
        }
        // SetDefaults_ObjectFieldSelector.
        "core/v1.ObjectFieldSelector" => or_insert(ty, m, "apiVersion", json!("v1")),
        // SetDefaults_NodeStatus: allocatable is the capacity when not given.
        "core/v1.NodeStatus" => {
            if m.get("allocatable").is_none_or(Value::is_null)
                && let Some(c) = m.get("capacity").filter(|c| !c.is_null()).cloned()
            {
                m.insert("allocatable".into(), c);
            }
        }
        // SetDefaults_NamespaceStatus.
        "core/v1.NamespaceStatus" => or_insert(ty, m, "phase", json!("Active")),
        _ => {}
    }
}

/// SetDefaults_ResourceList: every quantity rounded up to milli scale.
fn resource_list(list: Option<&mut Value>) {
    let Some(Value::Object(list)) = list else { return };
    for v in list.values_mut() {
        if let Some(mut q) = v.as_str().and_then(|s| Quantity::parse(s).ok())
            && q.round_up(-3).is_ok()
        {
            *v = Value::String(q.to_wire());
        }
    }
}

/// SetDefaults_Namespace: the `kubernetes.io/metadata.name` label, always the name; and
/// the `kubernetes` finalizer the namespace strategy's `PrepareForCreate` sets.
fn namespace(m: &mut Map<String, Value>) {
    let name = m.get("metadata").and_then(|x| x.get("name")).and_then(Value::as_str);
    if let Some(name) = name.filter(|n| !n.is_empty()).map(str::to_owned) {
        let meta = obj(m.entry("metadata").or_insert(Value::Null));
        let labels = obj(meta.entry("labels").or_insert(Value::Null));
        labels.insert("kubernetes.io/metadata.name".into(), json!(name));
    }
    let spec = obj(m.entry("spec").or_insert(Value::Null));
    if spec.get("finalizers").is_none_or(|f| f.as_array().is_none_or(Vec::is_empty)) {
        spec.insert("finalizers".into(), json!(["kubernetes"]));
    }
}

/// The `spec` of a workload, made an object if absent.
fn spec_of(m: &mut Map<String, Value>) -> &mut Map<String, Value> {
    obj(m.entry("spec").or_insert(Value::Null))
}

/// SetDefaults_DaemonSet (apps/v1).
fn daemonset(m: &mut Map<String, Value>) {
    let spec_ty = wire("apps/v1.DaemonSetSpec");
    let strategy_ty = wire("apps/v1.DaemonSetUpdateStrategy");
    let rolling_ty = wire("apps/v1.RollingUpdateDaemonSet");
    let spec = spec_of(m);
    let strategy = obj(spec.entry("updateStrategy").or_insert(Value::Null));
    or_insert(strategy_ty, strategy, "type", json!("RollingUpdate"));
    if strategy.get("type") == Some(&json!("RollingUpdate")) {
        let rolling = obj(strategy.entry("rollingUpdate").or_insert(Value::Null));
        or_insert(rolling_ty, rolling, "maxUnavailable", json!(1));
        or_insert(rolling_ty, rolling, "maxSurge", json!(0));
    }
    or_insert(spec_ty, spec, "revisionHistoryLimit", json!(10));
}

/// SetDefaults_Deployment (apps/v1).
fn deployment(m: &mut Map<String, Value>) {
    let spec_ty = wire("apps/v1.DeploymentSpec");
    let strategy_ty = wire("apps/v1.DeploymentStrategy");
    let rolling_ty = wire("apps/v1.RollingUpdateDeployment");
    let spec = spec_of(m);
    or_insert(spec_ty, spec, "replicas", json!(1));
    let strategy = obj(spec.entry("strategy").or_insert(Value::Null));
    or_insert(strategy_ty, strategy, "type", json!("RollingUpdate"));
    if strategy.get("type") == Some(&json!("RollingUpdate")) {
        let rolling = obj(strategy.entry("rollingUpdate").or_insert(Value::Null));
        or_insert(rolling_ty, rolling, "maxUnavailable", json!("25%"));
        or_insert(rolling_ty, rolling, "maxSurge", json!("25%"));
    }
    or_insert(spec_ty, spec, "revisionHistoryLimit", json!(10));
    or_insert(spec_ty, spec, "progressDeadlineSeconds", json!(600));
}

/// SetDefaults_PodSpec (every pod spec: a Pod's and a template's), and the conversion
/// to v1, which writes the deprecated `serviceAccount` as `serviceAccountName`.
fn pod_spec(ty: Ty, s: &mut Map<String, Value>) {
    or_insert(ty, s, "dnsPolicy", json!("ClusterFirst"));
    or_insert(ty, s, "restartPolicy", json!("Always"));
    or_insert(ty, s, "securityContext", json!({}));
    or_insert(ty, s, "terminationGracePeriodSeconds", json!(30));
    or_insert(ty, s, "schedulerName", json!("default-scheduler"));
    // Convert_v1_PodSpec_To_core_PodSpec takes the deprecated name when the new one is
    // empty; Convert_core_PodSpec_To_v1_PodSpec writes it back as both.
    let text = |s: &Map<String, Value>, k: &str| {
        s.get(k).and_then(Value::as_str).filter(|v| !v.is_empty()).map(str::to_owned)
    };
    if let Some(sa) = text(s, "serviceAccountName").or_else(|| text(s, "serviceAccount")) {
        s.insert("serviceAccountName".into(), json!(sa));
        s.insert("serviceAccount".into(), json!(sa));
    } else {
        s.remove("serviceAccount");
    }
}

/// SetDefaults_Container: the pull policy by the image's tag (`Always` for `latest`,
/// which an image without tag or digest is; else `IfNotPresent`), the termination
/// message path and policy.
fn container(ty: Ty, c: &mut Map<String, Value>) {
    let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
    or_insert(ty, c, "imagePullPolicy", json!(pull_policy(image)));
    or_insert(ty, c, "terminationMessagePath", json!("/dev/termination-log"));
    or_insert(ty, c, "terminationMessagePolicy", json!("File"));
}

/// `parsers.ParseImageName`'s tag: the tag of the last path segment, `latest` when there
/// is neither a tag nor a digest, none when the image does not parse (empty).
fn pull_policy(image: &str) -> &'static str {
    if image.trim().is_empty() {
        return "IfNotPresent";
    }
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    let last = name.rsplit_once('/').map_or(name, |(_, last)| last);
    let tag = match last.rsplit_once(':') {
        Some((_, tag)) => tag,
        None if digest.is_none() => "latest",
        None => "",
    };
    if tag == "latest" { "Always" } else { "IfNotPresent" }
}

/// SetDefaults_Pod, then the admission every cluster runs on Pods: ServiceAccount (the
/// `default` service account), DefaultTolerationSeconds (five minutes on not-ready and
/// unreachable nodes), Priority (priority 0, `PreemptLowerPriority`).
fn pod(m: &mut Map<String, Value>) {
    let ty = wire("core/v1.PodSpec");
    let s = spec_of(m);
    // SetDefaults_Pod: a container's requests default to its limits.
    for list in ["containers", "initContainers"] {
        for c in s.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
            let Some(r) = c.get_mut("resources").and_then(Value::as_object_mut) else { continue };
            let Some(limits) = r.get("limits").and_then(Value::as_object).cloned() else {
                continue;
            };
            let requests = obj(r.entry("requests").or_insert(Value::Null));
            for (k, v) in limits {
                requests.entry(k).or_insert(v);
            }
        }
    }
    or_insert(ty, s, "enableServiceLinks", json!(true));
    // SetDefaults_Pod: with the host's network, a port's hostPort is its containerPort.
    if s.get("hostNetwork") == Some(&json!(true)) {
        for list in ["containers", "initContainers"] {
            for c in s.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
                for p in c.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten() {
                    let p = obj(p);
                    if p.get("hostPort").and_then(Value::as_i64).unwrap_or(0) == 0
                        && let Some(port) = p.get("containerPort").cloned()
                    {
                        p.insert("hostPort".into(), port);
                    }
                }
            }
        }
    }
    or_insert(ty, s, "serviceAccountName", json!("default"));
    let tolerations = s.entry("tolerations").or_insert_with(|| json!([]));
    if let Some(list) = tolerations.as_array_mut() {
        for key in ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] {
            let tolerated = list.iter().any(|t| {
                let f = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or_default();
                let effect_ok = f("effect").is_empty() || f("effect") == "NoExecute";
                let key_ok = f("key") == key || (f("key").is_empty() && f("operator") == "Exists");
                effect_ok && key_ok
            });
            if !tolerated {
                list.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute",
                    "tolerationSeconds": 300}));
            }
        }
    }
    or_insert(ty, s, "priority", json!(0));
    or_insert(ty, s, "preemptionPolicy", json!("PreemptLowerPriority"));
}

/// SetDefaults_PersistentVolume: a volume is `Retain`ed when released and a
/// `Filesystem` unless it says otherwise.
fn persistent_volume(m: &mut Map<String, Value>) {
    let ty = wire("core/v1.PersistentVolumeSpec");
    let spec = spec_of(m);
    or_insert(ty, spec, "persistentVolumeReclaimPolicy", json!("Retain"));
    or_insert(ty, spec, "volumeMode", json!("Filesystem"));
}

/// SetDefaults_Service, and what the service registry allocates: a cluster IP (unless
/// `ExternalName` or headless), its families and policy.
fn service(m: &mut Map<String, Value>, cluster_ip: &mut dyn FnMut() -> String) {
    let ty = wire("core/v1.ServiceSpec");
    let port_ty = wire("core/v1.ServicePort");
    let spec = spec_of(m);
    or_insert(ty, spec, "sessionAffinity", json!("None"));
    match spec.get("sessionAffinity").and_then(Value::as_str) {
        Some("None") => {
            spec.remove("sessionAffinityConfig");
        }
        Some("ClientIP") => {
            let timeout = spec
                .get("sessionAffinityConfig")
                .and_then(|c| c.pointer("/clientIP/timeoutSeconds"))
                .filter(|t| !t.is_null());
            if timeout.is_none() {
                spec.insert(
                    "sessionAffinityConfig".into(),
                    json!({"clientIP": {"timeoutSeconds": 10800}}),
                );
            }
        }
        _ => {}
    }
    or_insert(ty, spec, "type", json!("ClusterIP"));
    for p in spec.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten() {
        let p = obj(p);
        if let Some(port) = p.get("port").cloned()
            && port_ty.field("targetPort").is_some_and(|f| f.is_unset(p.get("targetPort")))
        {
            p.insert("targetPort".into(), port);
        }
    }
    let kind = spec.get("type").and_then(Value::as_str).unwrap_or_default().to_owned();
    let has_external_ips =
        spec.get("externalIPs").and_then(Value::as_array).is_some_and(|a| !a.is_empty());
    // service.ExternallyAccessible.
    if kind == "LoadBalancer" || kind == "NodePort" || (kind == "ClusterIP" && has_external_ips) {
        or_insert(ty, spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if ["NodePort", "LoadBalancer", "ClusterIP"].contains(&kind.as_str()) {
        or_insert(ty, spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if kind == "LoadBalancer" {
        or_insert(ty, spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    if kind != "ExternalName" {
        if spec.get("clusterIP").and_then(Value::as_str).is_none_or(str::is_empty) {
            spec.insert("clusterIP".into(), json!(cluster_ip()));
        }
        let ip = spec.get("clusterIP").cloned().unwrap_or(Value::Null);
        or_insert(ty, spec, "clusterIPs", json!([ip]));
        or_insert(ty, spec, "ipFamilies", json!(["IPv4"]));
        or_insert(ty, spec, "ipFamilyPolicy", json!("SingleStack"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaulted(resource: Resource, mut v: Value) -> Value {
        apply(resource, &mut v, &mut || "10.245.0.10".into());
        v
    }

    #[test]
    fn daemonset_and_template_defaults_fill_only_what_is_missing() {
        let ds = json!({"metadata":{"name":"d"},"spec":{"template":{"spec":{
            "serviceAccountName": "bcd",
            "containers":[
            {"name":"a","image":"bcd:1.2","imagePullPolicy":"",
                "env":[{"name":"N","valueFrom":{"fieldRef":{"fieldPath":"spec.nodeName"}}}],
                "ports":[{"containerPort":80}],
                "resources":{"limits":{"cpu":"100u"}},
                "readinessProbe":{"httpGet":{"port":8080}}},
            {"name":"b","image":"busybox","imagePullPolicy":"Never"}]}}}});
        let once = defaulted(Resource::DaemonSet, ds);
        assert_eq!(defaulted(Resource::DaemonSet, once.clone()), once, "idempotent");
        let spec = &once["spec"];
        assert_eq!(
            spec["updateStrategy"],
            json!({"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":1,"maxSurge":0}})
        );
        assert_eq!(spec["revisionHistoryLimit"], 10);
        let pod = &spec["template"]["spec"];
        for (k, v) in [
            ("restartPolicy", json!("Always")),
            ("dnsPolicy", json!("ClusterFirst")),
            ("schedulerName", json!("default-scheduler")),
            ("terminationGracePeriodSeconds", json!(30)),
            ("securityContext", json!({})),
            ("serviceAccount", json!("bcd")),
        ] {
            assert_eq!(pod[k], v, "{k}");
        }
        let a = &pod["containers"][0];
        assert_eq!(a["imagePullPolicy"], "IfNotPresent", "an empty policy is unset");
        assert_eq!(a["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(a["terminationMessagePolicy"], "File");
        assert_eq!(a["ports"][0]["protocol"], "TCP", "the +default marker");
        assert_eq!(a["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
        assert_eq!(a["resources"]["limits"]["cpu"], "1m", "SetDefaults_ResourceList");
        assert_eq!(
            a["readinessProbe"],
            json!({"httpGet":{"port":8080,"path":"/","scheme":"HTTP"},"timeoutSeconds":1,
                "periodSeconds":10,"successThreshold":1,"failureThreshold":3})
        );
        assert!(a["resources"].get("requests").is_none(), "templates get no Pod defaults");
        assert_eq!(pod["containers"][1]["imagePullPolicy"], "Never");
        assert!(pod.get("enableServiceLinks").is_none(), "templates get no Pod defaults");
        assert!(pod.get("priority").is_none(), "templates get no admission defaults");
    }

    #[test]
    fn pull_policy_by_tag_as_parse_image_name_reads_it() {
        for (image, want) in [
            ("bcd", "Always"),
            ("bcd:latest", "Always"),
            ("registry:5000/bcd", "Always"),
            ("registry:5000/bcd:1.2", "IfNotPresent"),
            ("bcd@sha256:abc", "IfNotPresent"),
            ("bcd:latest@sha256:abc", "Always"),
            ("", "IfNotPresent"),
        ] {
            assert_eq!(pull_policy(image), want, "{image}");
        }
    }

    #[test]
    fn pods_get_pod_and_admission_defaults() {
        let p = defaulted(
            Resource::Pod,
            json!({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i:1",
                "resources":{"limits":{"cpu":"1"}}}],
                "volumes":[{"name":"v"},{"name":"h","hostPath":{"path":"/x"}}]}}),
        );
        let s = &p["spec"];
        assert_eq!(s["containers"][0]["resources"]["requests"], json!({"cpu":"1"}));
        assert_eq!(s["enableServiceLinks"], true);
        assert_eq!(
            (s["serviceAccountName"].as_str(), s["serviceAccount"].as_str()),
            (Some("default"), Some("default"))
        );
        assert_eq!(s["tolerations"].as_array().map(Vec::len), Some(2));
        assert_eq!(s["tolerations"][0]["tolerationSeconds"], 300);
        assert_eq!(
            (s["priority"].clone(), s["preemptionPolicy"].clone()),
            (json!(0), json!("PreemptLowerPriority"))
        );
        assert_eq!(s["volumes"][0], json!({"name":"v","emptyDir":{}}));
        assert_eq!(s["volumes"][1]["hostPath"], json!({"path":"/x","type":""}));
    }

    #[test]
    fn namespace_label_secret_type_and_service_address() {
        let ns = defaulted(
            Resource::Namespace,
            json!({"metadata":{"name":"n","labels":{"kubernetes.io/metadata.name":"spoofed"}}}),
        );
        assert_eq!(ns["metadata"]["labels"]["kubernetes.io/metadata.name"], "n");
        assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(defaulted(Resource::Secret, json!({"type": ""}))["type"], "Opaque");
        let svc = defaulted(
            Resource::Service,
            json!({"metadata":{"name":"s"},"spec":{"type":"LoadBalancer","ports":[{"port":80,"targetPort":0}]}}),
        );
        let spec = &svc["spec"];
        assert_eq!(spec["clusterIP"], "10.245.0.10");
        assert_eq!(spec["ports"][0], json!({"port":80,"protocol":"TCP","targetPort":80}));
        assert_eq!(spec["externalTrafficPolicy"], "Cluster");
        assert_eq!(spec["allocateLoadBalancerNodePorts"], true);
        assert_eq!(spec["sessionAffinity"], "None");
    }

    #[test]
    fn node_status_allocatable_is_its_capacity() {
        let mut st = json!({"capacity": {"cpu": "2", "memory": "4096Mi"}});
        status(Resource::Node, &mut st);
        assert_eq!(st["allocatable"], st["capacity"]);
    }
}
