//! Server-side printing: the `meta.k8s.io/v1` Table a client gets when it asks for one
//! (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, what `kubectl get` sends),
//! with the columns of the apiserver's printers for nodes, pods, namespaces, DaemonSets,
//! Deployments, Services, Secrets, ConfigMaps, ServiceAccounts and events.
//!
//! Invariant: cells are computed from the objects and the simulator's clock only; a
//! column with priority 1 is one kubectl shows only with `-o wide`.

use serde_json::{Map, Value, json};

use super::Resource;
use bc_domain::time::Timestamp;

/// What each row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Include {
    /// Nothing.
    None,
    /// `PartialObjectMetadata` (the default).
    #[default]
    Metadata,
    /// The whole object.
    Object,
}

impl Include {
    /// Parses `includeObject`.
    pub fn parse(v: Option<&str>) -> Self {
        match v {
            Some("None") => Include::None,
            Some("Object") => Include::Object,
            _ => Include::Metadata,
        }
    }
}

/// The Table version an `Accept` header asks for (`v1` or `v1beta1`), if any.
pub fn wants_table(accept: &str) -> Option<&'static str> {
    for part in accept.split(',') {
        let params: Vec<&str> = part.split(';').map(str::trim).collect();
        if params.contains(&"as=Table") && params.contains(&"g=meta.k8s.io") {
            if params.contains(&"v=v1") {
                return Some("v1");
            }
            if params.contains(&"v=v1beta1") {
                return Some("v1beta1");
            }
        }
    }
    None
}

/// The content type of a Table answer.
pub fn content_type(v: &str) -> String {
    format!("application/json;as=Table;v={v};g=meta.k8s.io")
}

struct Column {
    name: &'static str,
    ty: &'static str,
    format: &'static str,
    priority: u8,
    description: &'static str,
}

const fn col(
    name: &'static str,
    ty: &'static str,
    priority: u8,
    description: &'static str,
) -> Column {
    Column { name, ty, format: "", priority, description }
}

const NAME: Column = Column {
    name: "Name",
    ty: "string",
    format: "name",
    priority: 0,
    description: "Name must be unique within a namespace.",
};
const AGE: Column = col(
    "Age",
    "string",
    0,
    "CreationTimestamp is a timestamp representing the server time when this object was created.",
);

fn columns(resource: Resource) -> Vec<Column> {
    match resource {
        Resource::Node => vec![
            NAME,
            col("Status", "string", 0, "The status of the node"),
            col("Roles", "string", 0, "The roles of the node"),
            AGE,
            col("Version", "string", 0, "Kubelet Version reported by the node."),
            col(
                "Internal-IP",
                "string",
                1,
                "List of addresses reachable to the node. Queried from cloud provider, if available.",
            ),
            col(
                "External-IP",
                "string",
                1,
                "List of addresses reachable to the node. Queried from cloud provider, if available.",
            ),
            col(
                "OS-Image",
                "string",
                1,
                "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
            ),
            col(
                "Kernel-Version",
                "string",
                1,
                "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
            ),
            col(
                "Container-Runtime",
                "string",
                1,
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
            ),
        ],
        Resource::Pod => vec![
            NAME,
            col(
                "Ready",
                "string",
                0,
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            col("Status", "string", 0, "The aggregate status of the containers in this pod."),
            col(
                "Restarts",
                "string",
                0,
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            ),
            AGE,
            col(
                "IP",
                "string",
                1,
                "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
            ),
            col(
                "Node",
                "string",
                1,
                "NodeName is a request to schedule this pod onto a specific node.",
            ),
            col(
                "Nominated Node",
                "string",
                1,
                "nominatedNodeName is set only when this pod preempts other pods on the node.",
            ),
            col(
                "Readiness Gates",
                "string",
                1,
                "If specified, all readiness gates will be evaluated for pod readiness.",
            ),
        ],
        Resource::Namespace => {
            vec![NAME, col("Status", "string", 0, "The status of the namespace"), AGE]
        }
        Resource::DaemonSet => vec![
            NAME,
            col(
                "Desired",
                "integer",
                0,
                "The total number of nodes that should be running the daemon pod.",
            ),
            col(
                "Current",
                "integer",
                0,
                "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
            ),
            col(
                "Ready",
                "integer",
                0,
                "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.",
            ),
            col(
                "Up-to-date",
                "integer",
                0,
                "The total number of nodes that are running updated daemon pod",
            ),
            col(
                "Available",
                "integer",
                0,
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available.",
            ),
            col(
                "Node Selector",
                "string",
                0,
                "NodeSelector is a selector which must be true for the pod to fit on a node.",
            ),
            AGE,
            col("Containers", "string", 1, "Names of each container in the template."),
            col("Images", "string", 1, "Images referenced by each container in the template."),
            col(
                "Selector",
                "string",
                1,
                "A label query over pods that are managed by the daemon set.",
            ),
        ],
        Resource::Deployment => vec![
            NAME,
            col("Ready", "string", 0, "Number of the pod with ready state"),
            col(
                "Up-to-date",
                "string",
                0,
                "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
            ),
            col(
                "Available",
                "string",
                0,
                "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
            ),
            AGE,
            col("Containers", "string", 1, "Names of each container in the template."),
            col("Images", "string", 1, "Images referenced by each container in the template."),
            col(
                "Selector",
                "string",
                1,
                "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.",
            ),
        ],
        Resource::Service => vec![
            NAME,
            col("Type", "string", 0, "type determines how the Service is exposed."),
            col(
                "Cluster-IP",
                "string",
                0,
                "clusterIP is the IP address of the service and is usually assigned randomly.",
            ),
            col(
                "External-IP",
                "string",
                0,
                "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
            ),
            col("Port(s)", "string", 0, "The list of ports that are exposed by this service."),
            AGE,
            col(
                "Selector",
                "string",
                1,
                "Route service traffic to pods with label keys and values matching this selector.",
            ),
        ],
        // kubectl's persistentVolumeColumnDefinitions (pkg/printers/internalversion).
        Resource::PersistentVolume => vec![
            NAME,
            col(
                "Capacity",
                "string",
                0,
                "capacity is the description of the persistent volume's resources and capacity.",
            ),
            col(
                "Access Modes",
                "string",
                0,
                "accessModes contains all ways the volume can be mounted.",
            ),
            col(
                "Reclaim Policy",
                "string",
                0,
                "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim.",
            ),
            col(
                "Status",
                "string",
                0,
                "phase indicates if a volume is available, bound to a claim, or released by a claim.",
            ),
            col(
                "Claim",
                "string",
                0,
                "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim.",
            ),
            col(
                "StorageClass",
                "string",
                0,
                "storageClassName is the name of StorageClass to which this persistent volume belongs.",
            ),
            col(
                "VolumeAttributesClass",
                "string",
                0,
                "Name of VolumeAttributesClass to which this persistent volume belongs.",
            ),
            col(
                "Reason",
                "string",
                0,
                "reason is a brief CamelCase string that describes any failure.",
            ),
            AGE,
            col(
                "VolumeMode",
                "string",
                1,
                "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state.",
            ),
        ],
        Resource::Secret => vec![
            NAME,
            col("Type", "string", 0, "Used to facilitate programmatic handling of secret data."),
            col("Data", "string", 0, "Data contains the secret data."),
            AGE,
        ],
        Resource::ConfigMap => {
            vec![NAME, col("Data", "string", 0, "Data contains the configuration data."), AGE]
        }
        Resource::ServiceAccount => vec![
            NAME,
            col(
                "Secrets",
                "string",
                0,
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
            ),
            AGE,
        ],
        Resource::Event => vec![
            col(
                "Last Seen",
                "string",
                0,
                "The time at which the most recent occurrence of this event was recorded.",
            ),
            col(
                "Type",
                "string",
                0,
                "Type of this event (Normal, Warning), new types could be added in the future.",
            ),
            col(
                "Reason",
                "string",
                0,
                "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
            ),
            col("Object", "string", 0, "The object that this event is about."),
            col(
                "Message",
                "string",
                0,
                "A human-readable description of the status of this operation.",
            ),
        ],
    }
}

/// Go's `duration.HumanDuration`, as the printers write ages.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let secs = secs.max(0);
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 { format!("{minutes}m") } else { format!("{minutes}m{s}s") };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 { format!("{hours}h") } else { format!("{hours}h{m}m") };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 { format!("{}d", hours / 24) } else { format!("{}d{h}h", hours / 24) };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

fn age(o: &Value, field: &str, now: Timestamp) -> String {
    match o.pointer(field).and_then(Value::as_str).and_then(|t| Timestamp::parse_rfc3339(t).ok()) {
        Some(t) => human_duration((now.unix_ms() - t.unix_ms()) / 1000),
        None => "<unknown>".into(),
    }
}

fn s<'a>(o: &'a Value, p: &str) -> &'a str {
    o.pointer(p).and_then(Value::as_str).unwrap_or_default()
}

fn n(o: &Value, p: &str) -> i64 {
    o.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

fn none_if_empty(v: String) -> String {
    if v.is_empty() { "<none>".into() } else { v }
}

fn map_string(m: Option<&Value>) -> String {
    let parts: Vec<String> = m
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    parts.join(",")
}

fn containers(o: &Value) -> (String, String) {
    let cs = o
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = cs.iter().map(|c| s(c, "/name")).collect();
    let images: Vec<&str> = cs.iter().map(|c| s(c, "/image")).collect();
    (names.join(","), images.join(","))
}

fn cells(resource: Resource, o: &Value, now: Timestamp) -> Vec<Value> {
    let name = s(o, "/metadata/name").to_owned();
    let created = age(o, "/metadata/creationTimestamp", now);
    match resource {
        Resource::Node => {
            let conditions = o
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let ready = conditions
                .iter()
                .find(|c| s(c, "/type") == "Ready")
                .map(|c| s(c, "/status") == "True");
            let mut status = match ready {
                Some(true) => "Ready".to_owned(),
                Some(false) => "NotReady".to_owned(),
                None => "Unknown".to_owned(),
            };
            if o.pointer("/spec/unschedulable") == Some(&Value::Bool(true)) {
                status.push_str(",SchedulingDisabled");
            }
            let roles: Vec<&str> = o
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter_map(|(k, _)| k.strip_prefix("node-role.kubernetes.io/"))
                .collect();
            let addr = |ty: &str| {
                o.pointer("/status/addresses")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .find(|a| s(a, "/type") == ty)
                    .map(|a| s(a, "/address").to_owned())
                    .unwrap_or_else(|| "<none>".into())
            };
            vec![
                json!(name),
                json!(status),
                json!(none_if_empty(roles.join(","))),
                json!(created),
                json!(s(o, "/status/nodeInfo/kubeletVersion")),
                json!(addr("InternalIP")),
                json!(addr("ExternalIP")),
                json!(s(o, "/status/nodeInfo/osImage")),
                json!(s(o, "/status/nodeInfo/kernelVersion")),
                json!(s(o, "/status/nodeInfo/containerRuntimeVersion")),
            ]
        }
        Resource::Pod => {
            let total = o.pointer("/spec/containers").and_then(Value::as_array).map_or(0, Vec::len);
            let statuses = o
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let ready =
                statuses.iter().filter(|c| c.get("ready") == Some(&Value::Bool(true))).count();
            let restarts: i64 = statuses.iter().map(|c| n(c, "/restartCount")).sum();
            let mut status = s(o, "/status/phase").to_owned();
            for c in &statuses {
                if let Some(reason) = c.pointer("/state/waiting/reason").and_then(Value::as_str) {
                    status = reason.to_owned();
                }
            }
            if o.pointer("/metadata/deletionTimestamp").is_some() {
                status = "Terminating".into();
            }
            vec![
                json!(name),
                json!(format!("{ready}/{total}")),
                json!(status),
                json!(restarts.to_string()),
                json!(created),
                json!(none_if_empty(s(o, "/status/podIP").to_owned())),
                json!(none_if_empty(s(o, "/spec/nodeName").to_owned())),
                json!("<none>"),
                json!("<none>"),
            ]
        }
        Resource::Namespace => vec![json!(name), json!(s(o, "/status/phase")), json!(created)],
        Resource::DaemonSet => {
            let (names, images) = containers(o);
            vec![
                json!(name),
                json!(n(o, "/status/desiredNumberScheduled")),
                json!(n(o, "/status/currentNumberScheduled")),
                json!(n(o, "/status/numberReady")),
                json!(n(o, "/status/updatedNumberScheduled")),
                json!(n(o, "/status/numberAvailable")),
                json!(none_if_empty(map_string(o.pointer("/spec/template/spec/nodeSelector")))),
                json!(created),
                json!(names),
                json!(images),
                json!(map_string(o.pointer("/spec/selector/matchLabels"))),
            ]
        }
        Resource::Deployment => {
            let (names, images) = containers(o);
            vec![
                json!(name),
                json!(format!("{}/{}", n(o, "/status/readyReplicas"), n(o, "/spec/replicas"))),
                json!(n(o, "/status/updatedReplicas").to_string()),
                json!(n(o, "/status/availableReplicas").to_string()),
                json!(created),
                json!(names),
                json!(images),
                json!(map_string(o.pointer("/spec/selector/matchLabels"))),
            ]
        }
        Resource::Service => {
            let ports: Vec<String> = o
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|p| {
                    let node_port = p
                        .get("nodePort")
                        .and_then(Value::as_i64)
                        .map(|np| format!(":{np}"))
                        .unwrap_or_default();
                    format!("{}{node_port}/{}", n(p, "/port"), s(p, "/protocol"))
                })
                .collect();
            let external: Vec<String> = o
                .pointer("/status/loadBalancer/ingress")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|i| s(i, "/ip").to_owned())
                .collect();
            let external = match s(o, "/spec/type") {
                "LoadBalancer" if external.is_empty() => "<pending>".to_owned(),
                _ => none_if_empty(external.join(",")),
            };
            vec![
                json!(name),
                json!(s(o, "/spec/type")),
                json!(none_if_empty(s(o, "/spec/clusterIP").to_owned())),
                json!(external),
                json!(none_if_empty(ports.join(","))),
                json!(created),
                json!(none_if_empty(map_string(o.pointer("/spec/selector")))),
            ]
        }
        Resource::PersistentVolume => {
            let modes: Vec<&str> = o
                .pointer("/spec/accessModes")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|m| match m.as_str().unwrap_or_default() {
                    "ReadWriteOnce" => "RWO",
                    "ReadOnlyMany" => "ROX",
                    "ReadWriteMany" => "RWX",
                    "ReadWriteOncePod" => "RWOP",
                    other => other,
                })
                .collect();
            let claim = match s(o, "/spec/claimRef/name") {
                "" => String::new(),
                n => format!("{}/{n}", s(o, "/spec/claimRef/namespace")),
            };
            vec![
                json!(name),
                json!(s(o, "/spec/capacity/storage")),
                json!(modes.join(",")),
                json!(s(o, "/spec/persistentVolumeReclaimPolicy")),
                json!(s(o, "/status/phase")),
                json!(claim),
                json!(s(o, "/spec/storageClassName")),
                json!(none_if_empty(s(o, "/spec/volumeAttributesClassName").to_owned())),
                json!(s(o, "/status/reason")),
                json!(created),
                json!(s(o, "/spec/volumeMode")),
            ]
        }
        Resource::Secret => {
            let data = o.get("data").and_then(Value::as_object).map_or(0, Map::len);
            vec![json!(name), json!(s(o, "/type")), json!(data.to_string()), json!(created)]
        }
        Resource::ConfigMap => {
            let data = ["data", "binaryData"]
                .iter()
                .map(|f| o.get(*f).and_then(Value::as_object).map_or(0, Map::len))
                .sum::<usize>();
            vec![json!(name), json!(data.to_string()), json!(created)]
        }
        Resource::ServiceAccount => {
            let secrets = o.get("secrets").and_then(Value::as_array).map_or(0, Vec::len);
            vec![json!(name), json!(secrets.to_string()), json!(created)]
        }
        Resource::Event => {
            let last = if o.pointer("/lastTimestamp").and_then(Value::as_str).is_some() {
                age(o, "/lastTimestamp", now)
            } else {
                age(o, "/metadata/creationTimestamp", now)
            };
            let object = format!(
                "{}/{}",
                s(o, "/involvedObject/kind").to_ascii_lowercase(),
                s(o, "/involvedObject/name")
            );
            vec![
                json!(last),
                json!(s(o, "/type")),
                json!(s(o, "/reason")),
                json!(object),
                json!(s(o, "/message")),
            ]
        }
    }
}

fn partial(o: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o.get("metadata").cloned().unwrap_or(Value::Null)})
}

/// A Table of `items` (objects of `resource`), at resourceVersion `rv`.
pub fn table(
    resource: Resource,
    items: &[Value],
    now: Timestamp,
    include: Include,
    version: &str,
    rv: u64,
    next: Option<&str>,
) -> Value {
    let defs: Vec<Value> = columns(resource)
        .iter()
        .map(|c| {
            json!({"name": c.name, "type": c.ty, "format": c.format, "description": c.description, "priority": c.priority})
        })
        .collect();
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let mut row = json!({"cells": cells(resource, o, now)});
            match include {
                Include::None => {}
                Include::Metadata => row["object"] = partial(o),
                Include::Object => row["object"] = o.clone(),
            }
            row
        })
        .collect();
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if let Some(c) = next {
        metadata["continue"] = json!(c);
    }
    let mut t = json!({
        "kind": "Table",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": metadata,
        "columnDefinitions": defs,
        "rows": rows,
    });
    // As the Go type writes it (v1beta1's Table has the same fields): a row without its
    // object says `"object": null`, a column's empty format `""`.
    if let Some(ty) = bc_domain::kube_wire::ty("meta/v1.Table") {
        bc_domain::kube_wire::encode(ty, &mut t);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_as_kubectl_prints_them() {
        for (secs, want) in [
            (5, "5s"),
            (119, "119s"),
            (150, "2m30s"),
            (600, "10m"),
            (7200, "120m"),
            (3 * 3600 + 60, "3h1m"),
            (50 * 3600, "2d2h"),
            (400 * 86400, "400d"),
        ] {
            assert_eq!(human_duration(secs), want, "{secs}");
        }
    }

    #[test]
    fn accept_for_tables() {
        assert_eq!(
            wants_table(
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
            ),
            Some("v1")
        );
        assert_eq!(wants_table("application/json"), None);
    }
}
