//! The control plane's own writers, so a simulated cluster looks like a DOKS one: the
//! system namespaces with their `default` ServiceAccount and `kube-root-ca.crt`
//! ConfigMap (and both in every namespace made later), the `kubernetes` Service, the
//! Node objects of the model's nodes (the kubelet's registration), and the DaemonSet
//! controller — one pod per eligible node, status counts — whose pods run the simulated
//! bcd: a pod whose Secret is missing waits in `CreateContainerConfigError`, one whose
//! bcd has not joined is Running but not Ready.
//!
//! Invariant: controllers catch up lazily, on the next request to the cluster (and after
//! each round of the simulated agents), from the changes since their last pass — so a
//! request costs what changed, not the size of the cluster; their writes go through the
//! same store as every client's and appear in watches.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::decode::FieldValidation;
use super::pod_start;
use super::store::{ApplyRequest, EventType, Key, Objects};
use super::{Edit, Resource, kube_time};
use crate::model::catalog;
use crate::{SimNode, SimState};
use bc_domain::time::Timestamp;

/// The namespaces every cluster starts with.
pub const SYSTEM_NAMESPACES: &[&str] =
    &["default", "kube-node-lease", "kube-public", "kube-system"];

const KCM: &str = "kube-controller-manager";
const KUBELET: &str = "kubelet";
const APISERVER: &str = "kube-apiserver";

fn world_fingerprint(nodes: &[SimNode], agents: u64) -> u64 {
    let mut text = format!("{agents};");
    for n in nodes {
        text.push_str(&format!(
            "{}|{}|{}|{:?}|{:?};",
            n.name, n.ready, n.kubelet_version, n.labels, n.taints
        ));
    }
    crate::fnv1a(&text)
}

/// The Pods of `cluster` that are not a DaemonSet's and have not finished: what an
/// Autopilot cluster provisions nodes for (a DaemonSet's pods alone add none).
pub(crate) fn workload_pods(o: &Objects, cluster: &str) -> usize {
    let Some(c) = o.clusters.get(cluster) else { return 0 };
    // Read as stored (content and status are what a rendered Pod carries under
    // `metadata.ownerReferences` and `status.phase`), without rendering every Pod.
    let from = (Resource::Pod, String::new(), String::new());
    c.objects
        .range(from..)
        .take_while(|(k, _)| k.0 == Resource::Pod)
        .filter(|(_, p)| {
            let daemon = p
                .content
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .is_some_and(|refs| refs.iter().any(|r| r["kind"] == "DaemonSet"));
            let phase = p
                .status
                .as_ref()
                .and_then(|s| s.get("phase"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            !daemon && !matches!(phase, "Succeeded" | "Failed")
        })
        .count()
}

/// Lets the controllers of `cluster` catch up with its objects, its model nodes and its
/// agents, at `now`.
pub fn sync(state: &SimState, cluster: &str, nodes: &[SimNode], now: Timestamp) {
    let world = world_fingerprint(nodes, state.bcd.fingerprint(cluster));
    let up_to_date = state.kube.read(cluster, |o| {
        o.clusters.get(cluster).is_some_and(|c| {
            c.controllers.bootstrapped
                && c.controllers.seen == c.last_change
                && c.controllers.world == world
        })
    });
    if up_to_date {
        return;
    }
    let ca = state.tls.ca_pem().to_owned();
    state.kube.write(cluster, |o| {
        let c = o.cluster_mut(cluster);
        let (since, bootstrapped) = (c.controllers.seen, c.controllers.bootstrapped);
        let world_changed = c.controllers.world != world;
        let full = !bootstrapped || world_changed || since < c.compacted;
        let changed: Vec<(Resource, String)> =
            c.changes_after(since).map(|e| (e.resource, e.namespace.clone())).collect();
        if !bootstrapped {
            bootstrap(o, cluster, now);
        }
        // Namespaces made since the last pass get their ServiceAccount and CA bundle.
        let namespaces: Vec<String> = if full {
            names(&o.list(cluster, Resource::Namespace, None, &super::Selector::default()))
        } else {
            added_namespaces(o, cluster, since)
        };
        for ns in &namespaces {
            namespace_defaults(o, cluster, ns, &ca, now);
        }
        if full || changed.iter().any(|(r, _)| *r == Resource::Node) {
            sync_nodes(o, cluster, nodes, now);
        }
        // DaemonSets to reconcile: all on a full pass, else those in namespaces where a
        // DaemonSet, Pod, Secret or ServiceAccount changed.
        let daemonsets = if full {
            o.list(cluster, Resource::DaemonSet, None, &super::Selector::default())
        } else {
            let touched: BTreeSet<&str> = changed
                .iter()
                .filter(|(r, _)| {
                    matches!(
                        r,
                        Resource::DaemonSet
                            | Resource::Pod
                            | Resource::Secret
                            | Resource::ServiceAccount
                    )
                })
                .map(|(_, ns)| ns.as_str())
                .collect();
            touched
                .into_iter()
                .flat_map(|ns| {
                    o.list(cluster, Resource::DaemonSet, Some(ns), &super::Selector::default())
                })
                .collect()
        };
        for ds in daemonsets {
            let lookup = |r: Resource, ns: &str, name: &str| o.get(cluster, r, Some(ns), name).ok();
            let starts: BTreeMap<String, PodStart> = nodes
                .iter()
                .filter(|n| pod_start::schedules_onto(&ds, n))
                .map(|n| {
                    let start = match pod_start::pod_env_with(&lookup, &ds, n) {
                        Ok(Some(_)) => PodStart::Bcd { joined: state.bcd.joined(cluster, &n.name) },
                        Ok(None) => PodStart::Plain,
                        Err(why) => PodStart::Blocked(why),
                    };
                    (n.name.clone(), start)
                })
                .collect();
            run_daemonset(o, cluster, &ds, nodes, &starts, now);
        }
        let c = o.cluster_mut(cluster);
        c.controllers.bootstrapped = true;
        c.controllers.world = world;
        c.controllers.seen = c.last_change;
    });
}

fn names(objects: &[Value]) -> Vec<String> {
    objects
        .iter()
        .filter_map(|n| n.pointer("/metadata/name").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

fn added_namespaces(o: &Objects, cluster: &str, since: u64) -> Vec<String> {
    o.clusters
        .get(cluster)
        .map(|c| {
            c.changes_after(since)
                .filter(|e| e.resource == Resource::Namespace && e.kind == EventType::Added)
                .filter_map(|e| e.object.pointer("/metadata/name").and_then(Value::as_str))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// A controller's create (no field validation: controllers write what they know).
fn create(
    o: &mut Objects,
    cluster: &str,
    manager: &str,
    resource: Resource,
    ns: Option<&str>,
    body: Value,
    now: Timestamp,
) {
    let name =
        body.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
    let req =
        ApplyRequest { resource, namespace: ns, name: &name, body: &body, manager, force: false };
    if let Err(e) = o.create(cluster, &req, FieldValidation::Ignore, now)
        && e.reason != "AlreadyExists"
    {
        tracing::warn!(
            cluster,
            resource = resource.plural(),
            name,
            error = %e,
            "simulated controller could not create"
        );
    }
}

fn bootstrap(o: &mut Objects, cluster: &str, now: Timestamp) {
    for ns in SYSTEM_NAMESPACES {
        create(
            o,
            cluster,
            APISERVER,
            Resource::Namespace,
            None,
            json!({"metadata": {"name": ns}}),
            now,
        );
    }
    let service = json!({
        "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"clusterIP": "10.245.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 443}],
            "sessionAffinity": "None", "type": "ClusterIP"},
    });
    create(o, cluster, APISERVER, Resource::Service, Some("default"), service, now);
}

/// What the ServiceAccount and root-CA-publisher controllers put in every namespace.
fn namespace_defaults(o: &mut Objects, cluster: &str, ns: &str, ca: &str, now: Timestamp) {
    if o.get(cluster, Resource::Namespace, None, ns).is_err() {
        return;
    }
    if o.get(cluster, Resource::ServiceAccount, Some(ns), "default").is_err() {
        create(
            o,
            cluster,
            KCM,
            Resource::ServiceAccount,
            Some(ns),
            json!({"metadata": {"name": "default"}}),
            now,
        );
    }
    if o.get(cluster, Resource::ConfigMap, Some(ns), "kube-root-ca.crt").is_err() {
        let cm = json!({"metadata": {"name": "kube-root-ca.crt",
            "annotations": {"kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."}},
            "data": {"ca.crt": ca}});
        create(o, cluster, KCM, Resource::ConfigMap, Some(ns), cm, now);
    }
}

/// The Node object's content (labels, spec) the kubelet and the cloud controller own.
fn node_content(n: &SimNode, index: usize) -> Value {
    let taints: Vec<Value> = n
        .taints
        .iter()
        .map(|t| {
            let mut v = json!({"key": t.key, "effect": t.effect.as_str()});
            if !t.value.is_empty() {
                v["value"] = json!(t.value);
            }
            v
        })
        .collect();
    let cidr = format!("10.244.{}.0/25", index % 256);
    let mut spec = json!({"providerID": n.provider_id, "podCIDR": cidr, "podCIDRs": [cidr]});
    spec["taints"] = if taints.is_empty() { Value::Null } else { Value::Array(taints) };
    json!({
        "metadata": {
            "name": n.name,
            "labels": n.labels,
            "annotations": {
                "alpha.kubernetes.io/provided-node-ip": n.internal_ip,
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": spec,
    })
}

fn node_status(n: &SimNode, since: Timestamp, now: Timestamp) -> Value {
    let (cpus, mem_gib, gpus) = catalog::size_resources(&n.size);
    let mem_ki = u64::from(mem_gib) * 1024 * 1024 - 60 * 1024;
    let mut capacity = json!({
        "cpu": cpus.to_string(),
        "ephemeral-storage": "82437508Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": format!("{mem_ki}Ki"),
        "pods": "110",
    });
    let mut allocatable = json!({
        "cpu": format!("{}m", u64::from(cpus) * 1000 - 100),
        "ephemeral-storage": "75974186879",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": format!("{}Ki", mem_ki.saturating_sub(mem_ki / 10)),
        "pods": "110",
    });
    if gpus > 0 {
        capacity["nvidia.com/gpu"] = json!(gpus.to_string());
        allocatable["nvidia.com/gpu"] = json!(gpus.to_string());
    }
    let t = kube_time(since);
    let condition = |ty: &str, status: &str, reason: &str, message: &str| json!({"type": ty, "status": status, "lastHeartbeatTime": t, "lastTransitionTime": t, "reason": reason, "message": message});
    let ready = if n.ready {
        condition("Ready", "True", "KubeletReady", "kubelet is posting ready status")
    } else {
        condition(
            "Ready",
            "False",
            "KubeletNotReady",
            "container runtime network not ready: NetworkReady=false",
        )
    };
    let _ = now;
    json!({
        "capacity": capacity,
        "allocatable": allocatable,
        "conditions": [
            condition("NetworkUnavailable", "False", "CiliumIsUp", "Cilium is running on this node"),
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            ready,
        ],
        "addresses": [
            {"type": "Hostname", "address": n.name},
            {"type": "InternalIP", "address": n.internal_ip},
            {"type": "ExternalIP", "address": n.external_ip},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": format!("{:032x}", u128::from(crate::fnv1a(&n.provider_id))),
            "systemUUID": format!("{:032x}", u128::from(crate::fnv1a(&n.name))),
            "bootID": format!("{:032x}", u128::from(crate::fnv1a(&format!("{}{}", n.name, n.ready)))),
            "kernelVersion": "6.1.0-27-amd64",
            "osImage": "Debian GNU/Linux 12 (bookworm)",
            "containerRuntimeVersion": "containerd://1.7.22",
            "kubeletVersion": n.kubelet_version,
            "kubeProxyVersion": n.kubelet_version,
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    })
}

/// Registers the model's nodes as Node objects, keeps the kubelet's fields current, and
/// removes the Node objects (and pods) of nodes that are gone.
fn sync_nodes(o: &mut Objects, cluster: &str, nodes: &[SimNode], now: Timestamp) {
    let stored: BTreeSet<String> = o
        .list(cluster, Resource::Node, None, &super::Selector::default())
        .iter()
        .filter_map(|n| n.pointer("/metadata/name").and_then(Value::as_str).map(str::to_owned))
        .collect();
    for (i, n) in nodes.iter().enumerate() {
        let content = node_content(n, i);
        if stored.contains(&n.name) {
            // A merge patch: the kubelet's labels win, labels others added stay.
            let _ = o.update(
                cluster,
                Resource::Node,
                None,
                &n.name,
                Edit::MergePatch(&content),
                KUBELET,
                FieldValidation::Ignore,
                now,
            );
        } else {
            let mut body = content;
            if body["spec"]["taints"].is_null() {
                body["spec"].as_object_mut().map(|s| s.remove("taints"));
            }
            // Registered when the droplet came up, not when first asked about.
            create(o, cluster, KUBELET, Resource::Node, None, body, n.created_at.min(now));
        }
        let key: Key = (Resource::Node, String::new(), n.name.clone());
        o.set_status(cluster, &key, node_status(n, n.created_at, now));
    }
    let live: BTreeSet<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    for gone in stored.iter().filter(|n| !live.contains(n.as_str())) {
        // The pod garbage collector removes the pods bound to a deleted node.
        let pods: Vec<Key> = o
            .list(cluster, Resource::Pod, None, &super::Selector::default())
            .iter()
            .filter(|p| p.pointer("/spec/nodeName").and_then(Value::as_str) == Some(gone.as_str()))
            .map(pod_key)
            .collect();
        for k in pods {
            o.remove(cluster, &k);
        }
        o.remove(cluster, &(Resource::Node, String::new(), gone.clone()));
    }
}

fn pod_key(p: &Value) -> Key {
    let s = |f: &str| p.pointer(f).and_then(Value::as_str).unwrap_or_default().to_owned();
    (Resource::Pod, s("/metadata/namespace"), s("/metadata/name"))
}

/// How a DaemonSet pod on one node starts.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PodStart {
    /// It runs the simulated bcd: Ready once that bcd has joined.
    Bcd { joined: bool },
    /// Any other workload: Ready when its node is.
    Plain,
    /// It cannot start: a Secret (or key) it maps is missing.
    Blocked(String),
}

/// The tolerations the DaemonSet controller adds to every pod it makes.
fn daemon_tolerations() -> Vec<Value> {
    let mut out = Vec::new();
    for key in ["not-ready", "unreachable"] {
        out.push(json!({"key": format!("node.kubernetes.io/{key}"), "operator": "Exists", "effect": "NoExecute"}));
    }
    for key in ["disk-pressure", "memory-pressure", "pid-pressure", "unschedulable"] {
        out.push(json!({"key": format!("node.kubernetes.io/{key}"), "operator": "Exists", "effect": "NoSchedule"}));
    }
    out
}

/// The controller's claim on orphans (`ClaimPods` in `pkg/controller/controller_ref_manager.go`):
/// a pod in the DaemonSet's namespace that its selector matches and that no controller
/// owns (say one left by an `Orphan` delete of an earlier DaemonSet) is adopted — given a
/// controller reference to this DaemonSet — instead of a second pod being made beside it.
/// A DaemonSet being deleted adopts nothing.
fn adopt_orphans(o: &mut Objects, cluster: &str, ds: &Value, now: Timestamp) {
    if ds.pointer("/metadata/deletionTimestamp").is_some() {
        return;
    }
    let s = |p: &str| ds.pointer(p).and_then(Value::as_str).unwrap_or_default().to_owned();
    let (ns, name, uid) = (s("/metadata/namespace"), s("/metadata/name"), s("/metadata/uid"));
    let sel = ds.pointer("/spec/selector").cloned().unwrap_or(Value::Null);
    let given = |k: &str| {
        sel.get(k).is_some_and(|v| {
            v.as_object().is_some_and(|m| !m.is_empty())
                || v.as_array().is_some_and(|a| !a.is_empty())
        })
    };
    if !given("matchLabels") && !given("matchExpressions") {
        // An empty selector selects nothing for a controller (and is invalid for a DaemonSet).
        return;
    }
    let selector = super::validate::selector_of(&sel);
    let orphans: Vec<Value> = o
        .list(cluster, Resource::Pod, Some(&ns), &selector)
        .into_iter()
        .filter(|p| {
            p.pointer("/metadata/deletionTimestamp").is_none()
                && !p.pointer("/metadata/ownerReferences").and_then(Value::as_array).is_some_and(
                    |refs| refs.iter().any(|r| r.get("controller") == Some(&json!(true))),
                )
        })
        .collect();
    for p in orphans {
        let mut refs = p
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        refs.push(json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name, "uid": uid,
            "controller": true, "blockOwnerDeletion": true}));
        let (_, pns, pname) = pod_key(&p);
        let _ = o.update(
            cluster,
            Resource::Pod,
            Some(&pns),
            &pname,
            Edit::MergePatch(&json!({"metadata": {"ownerReferences": refs}})),
            KCM,
            FieldValidation::Ignore,
            now,
        );
    }
}

/// The pods in `ns` whose `ownerReferences` name the object of `uid`.
fn owned_pods(o: &Objects, cluster: &str, ns: &str, uid: &str) -> Vec<Value> {
    o.list(cluster, Resource::Pod, Some(ns), &super::Selector::default())
        .into_iter()
        .filter(|p| {
            p.pointer("/metadata/ownerReferences").and_then(Value::as_array).is_some_and(|refs| {
                refs.iter().any(|r| r.get("uid").and_then(Value::as_str) == Some(uid))
            })
        })
        .collect()
}

/// Pod name suffixes as Kubernetes makes them (no vowels, no look-alikes).
fn suffix(seed: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut x = crate::fnv1a(seed);
    (0..5)
        .map(|_| {
            let c = ALPHABET[(x % ALPHABET.len() as u64) as usize] as char;
            x /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

fn run_daemonset(
    o: &mut Objects,
    cluster: &str,
    ds: &Value,
    nodes: &[SimNode],
    starts: &BTreeMap<String, PodStart>,
    now: Timestamp,
) {
    let s = |p: &str| ds.pointer(p).and_then(Value::as_str).unwrap_or_default().to_owned();
    let (ns, name, uid) = (s("/metadata/namespace"), s("/metadata/name"), s("/metadata/uid"));
    let generation = ds.pointer("/metadata/generation").and_then(Value::as_u64).unwrap_or(1);
    let rolling =
        ds.pointer("/spec/updateStrategy/type").and_then(Value::as_str) != Some("OnDelete");
    let ready_nodes: BTreeMap<&str, &SimNode> =
        nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let desired: Vec<&SimNode> =
        nodes.iter().filter(|n| pod_start::schedules_onto(ds, n)).collect();
    let hash = format!(
        "{:010x}",
        crate::fnv1a(&ds.pointer("/spec/template").map(Value::to_string).unwrap_or_default())
            & 0xff_ffff_ffff
    );
    adopt_orphans(o, cluster, ds, now);
    let mut pods = owned_pods(o, cluster, &ns, &uid);
    // Pods on nodes no longer eligible, or of an older template (rolling update): gone.
    let desired_names: BTreeSet<&str> = desired.iter().map(|n| n.name.as_str()).collect();
    let mut kept = Vec::new();
    for p in pods.drain(..) {
        let node = p.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or_default();
        let pod_hash = p
            .pointer("/metadata/labels/controller-revision-hash")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let stale = rolling && pod_hash != hash;
        if !desired_names.contains(node) || stale {
            o.remove(cluster, &pod_key(&p));
        } else {
            kept.push(p);
        }
    }
    // One pod per eligible node that has none.
    let template = ds.pointer("/spec/template").cloned().unwrap_or(Value::Null);
    for node in &desired {
        if kept.iter().any(|p| {
            p.pointer("/spec/nodeName").and_then(Value::as_str) == Some(node.name.as_str())
        }) {
            continue;
        }
        if matches!(starts.get(&node.name), Some(PodStart::Blocked(why)) if why.starts_with("serviceaccount"))
        {
            // Admission refuses a pod whose ServiceAccount is missing: none is made.
            continue;
        }
        let pod_name = format!("{name}-{}", suffix(&format!("{uid}/{}/{generation}", node.name)));
        let mut labels = template.pointer("/metadata/labels").cloned().unwrap_or(json!({}));
        labels["controller-revision-hash"] = json!(hash);
        labels["pod-template-generation"] = json!(generation.to_string());
        let mut spec = template.get("spec").cloned().unwrap_or(json!({}));
        let mut tolerations =
            spec.get("tolerations").and_then(Value::as_array).cloned().unwrap_or_default();
        tolerations.extend(daemon_tolerations());
        spec["tolerations"] = Value::Array(tolerations);
        spec["nodeName"] = json!(node.name);
        spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node.name]}]}]}}});
        let mut metadata = json!({
            "name": pod_name,
            "generateName": format!("{name}-"),
            "labels": labels,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name, "uid": uid,
                "controller": true, "blockOwnerDeletion": true}],
        });
        if let Some(a) = template.pointer("/metadata/annotations") {
            metadata["annotations"] = a.clone();
        }
        create(
            o,
            cluster,
            KCM,
            Resource::Pod,
            Some(&ns),
            json!({"metadata": metadata, "spec": spec}),
            now,
        );
    }
    // Pod statuses (the kubelet's) and the DaemonSet's.
    let pods = owned_pods(o, cluster, &ns, &uid);
    let mut ready = 0;
    let mut updated = 0;
    for (i, p) in pods.iter().enumerate() {
        let node_name = p.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or_default();
        let node = ready_nodes.get(node_name);
        let start = starts.get(node_name).cloned().unwrap_or(PodStart::Plain);
        let status = pod_status(p, node.copied(), &start, i);
        if status
            .pointer("/conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
        {
            ready += 1;
        }
        if p.pointer("/metadata/labels/controller-revision-hash").and_then(Value::as_str)
            == Some(hash.as_str())
        {
            updated += 1;
        }
        o.set_status(cluster, &pod_key(p), status);
    }
    let desired_n = desired.len();
    let current = pods.len();
    let mut status = json!({
        "currentNumberScheduled": current,
        "desiredNumberScheduled": desired_n,
        "numberMisscheduled": 0,
        "numberReady": ready,
        "observedGeneration": generation,
        "updatedNumberScheduled": updated,
        "numberAvailable": ready,
    });
    if desired_n > ready {
        status["numberUnavailable"] = json!(desired_n - ready);
    }
    if ready == 0 {
        status.as_object_mut().map(|m| m.remove("numberAvailable"));
    }
    o.set_status(cluster, &(Resource::DaemonSet, ns, name), status);
}

fn pod_status(p: &Value, node: Option<&SimNode>, start: &PodStart, index: usize) -> Value {
    let created = p.pointer("/metadata/creationTimestamp").cloned().unwrap_or(Value::Null);
    let containers =
        p.pointer("/spec/containers").and_then(Value::as_array).cloned().unwrap_or_default();
    let node_ready = node.is_some_and(|n| n.ready);
    let (phase, running, ready, waiting): (&str, bool, bool, Option<(&str, String)>) =
        match (node_ready, start) {
            (false, _) => ("Pending", false, false, Some(("ContainerCreating", String::new()))),
            (true, PodStart::Blocked(why)) => {
                ("Pending", false, false, Some(("CreateContainerConfigError", why.clone())))
            }
            (true, PodStart::Bcd { joined }) => ("Running", true, *joined, None),
            (true, PodStart::Plain) => ("Running", true, true, None),
        };
    let statuses: Vec<Value> = containers
        .iter()
        .map(|c| {
            let state = match &waiting {
                Some((reason, message)) if message.is_empty() => json!({"waiting": {"reason": reason}}),
                Some((reason, message)) => json!({"waiting": {"reason": reason, "message": message}}),
                None => json!({"running": {"startedAt": created}}),
            };
            let image = c.get("image").cloned().unwrap_or(Value::Null);
            let mut s = json!({"name": c.get("name"), "state": state, "ready": ready, "restartCount": 0,
                "image": image, "imageID": "", "started": running});
            if running {
                s["containerID"] = json!(format!("containerd://{:064x}", u128::from(crate::fnv1a(&format!("{}{}", p["metadata"]["uid"], c["name"])))));
            }
            s
        })
        .collect();
    let flag = |b: bool| if b { "True" } else { "False" };
    let cond = |ty: &str, ok: bool| {
        let mut c = json!({"type": ty, "status": flag(ok), "lastProbeTime": null, "lastTransitionTime": created});
        if !ok && (ty == "Ready" || ty == "ContainersReady") {
            c["reason"] = json!("ContainersNotReady");
        }
        c
    };
    let mut status = json!({
        "phase": phase,
        "conditions": [
            cond("PodReadyToStartContainers", running),
            cond("Initialized", true),
            cond("Ready", ready),
            cond("ContainersReady", ready),
            cond("PodScheduled", true),
        ],
        "containerStatuses": statuses,
        "qosClass": super::store::qos_class(p),
        "startTime": created,
    });
    if let Some(n) = node {
        status["hostIP"] = json!(n.internal_ip);
        status["hostIPs"] = json!([{"ip": n.internal_ip}]);
        if running {
            let ip = format!("10.244.{}.{}", index / 200, 10 + index % 200);
            status["podIP"] = json!(ip);
            status["podIPs"] = json!([{"ip": ip}]);
        }
    }
    status
}
