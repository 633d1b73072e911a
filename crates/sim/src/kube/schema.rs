//! How the served kinds' lists merge: which lists are associative (keyed by `name`,
//! `containerPort`+`protocol`, …), which are sets and which are atomic — the
//! `+listType`/`+listMapKey` and `+patchMergeKey`/`+patchStrategy` markers of the
//! Kubernetes types, for the fields of the kinds a simulated cluster serves.
//!
//! Invariant: one table, read by server-side apply (field paths like
//! `.spec.template.spec.containers[name="c"].image`), by strategic merge patch, and by the
//! OpenAPI documents (as `x-kubernetes-list-*` and `x-kubernetes-patch-*` extensions) —
//! so kubectl computes its patches with the same keys the server merges them by. A list
//! the table does not name is atomic, as structured-merge-diff treats untyped lists.

use super::Resource;

/// A list's merge semantics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListType {
    /// Replaced as a whole (`+listType=atomic`).
    Atomic,
    /// A set of scalars (`+listType=set`).
    Set,
    /// Items keyed by these fields (`+listType=map`, `+listMapKey=…`).
    Map(&'static [&'static str]),
}

/// What the table says about one list field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListInfo {
    /// Server-side apply semantics.
    pub list: ListType,
    /// Strategic merge patch key (`+patchMergeKey`), for lists of objects.
    pub merge_key: Option<&'static str>,
    /// `+patchStrategy` (`merge`, `merge,retainKeys`), when not replace.
    pub strategy: Option<&'static str>,
}

const fn map(keys: &'static [&'static str], merge_key: &'static str) -> ListInfo {
    ListInfo { list: ListType::Map(keys), merge_key: Some(merge_key), strategy: Some("merge") }
}

const ATOMIC: ListInfo = ListInfo { list: ListType::Atomic, merge_key: None, strategy: None };
const MERGED_SET: ListInfo =
    ListInfo { list: ListType::Set, merge_key: None, strategy: Some("merge") };

/// A node of the type graph, as far as list semantics need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    /// An object of a served kind.
    Root(Resource),
    /// `ObjectMeta`.
    ObjectMeta,
    /// `DaemonSetSpec` / `DeploymentSpec`.
    WorkloadSpec,
    /// `PodTemplateSpec`.
    PodTemplateSpec,
    /// `PodSpec`.
    PodSpec,
    /// `Container` (also init and ephemeral containers).
    Container,
    /// `Volume`.
    Volume,
    /// `ServiceSpec`.
    ServiceSpec,
    /// `NodeSpec`.
    NodeSpec,
    /// `NodeStatus`.
    NodeStatus,
    /// `PodStatus`.
    PodStatus,
    /// Anything else: its lists are atomic.
    Other,
}

impl Ty {
    /// The OpenAPI component schema name of this type, when it has one of its own.
    pub fn schema_name(self) -> Option<&'static str> {
        Some(match self {
            Ty::ObjectMeta => "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
            Ty::PodTemplateSpec => "io.k8s.api.core.v1.PodTemplateSpec",
            Ty::PodSpec => "io.k8s.api.core.v1.PodSpec",
            Ty::Container => "io.k8s.api.core.v1.Container",
            Ty::ServiceSpec => "io.k8s.api.core.v1.ServiceSpec",
            Ty::NodeSpec => "io.k8s.api.core.v1.NodeSpec",
            Ty::NodeStatus => "io.k8s.api.core.v1.NodeStatus",
            Ty::PodStatus => "io.k8s.api.core.v1.PodStatus",
            _ => return None,
        })
    }

    /// The list fields of this type with their semantics (every other list is atomic).
    pub fn lists(self) -> &'static [(&'static str, ListInfo)] {
        const OBJECT_META: &[(&str, ListInfo)] =
            &[("finalizers", MERGED_SET), ("ownerReferences", map(&["uid"], "uid"))];
        const POD_SPEC: &[(&str, ListInfo)] = &[
            ("containers", map(&["name"], "name")),
            ("initContainers", map(&["name"], "name")),
            ("ephemeralContainers", map(&["name"], "name")),
            (
                "volumes",
                ListInfo {
                    list: ListType::Map(&["name"]),
                    merge_key: Some("name"),
                    strategy: Some("merge,retainKeys"),
                },
            ),
            ("imagePullSecrets", map(&["name"], "name")),
            ("hostAliases", map(&["ip"], "ip")),
            (
                "topologySpreadConstraints",
                map(&["topologyKey", "whenUnsatisfiable"], "topologyKey"),
            ),
            ("schedulingGates", map(&["name"], "name")),
            ("tolerations", ATOMIC),
        ];
        const CONTAINER: &[(&str, ListInfo)] = &[
            ("env", map(&["name"], "name")),
            ("ports", map(&["containerPort", "protocol"], "containerPort")),
            ("volumeMounts", map(&["mountPath"], "mountPath")),
            ("volumeDevices", map(&["devicePath"], "devicePath")),
        ];
        const SERVICE_SPEC: &[(&str, ListInfo)] = &[("ports", map(&["port", "protocol"], "port"))];
        const NODE_SPEC: &[(&str, ListInfo)] = &[("podCIDRs", MERGED_SET), ("taints", ATOMIC)];
        const NODE_STATUS: &[(&str, ListInfo)] =
            &[("addresses", map(&["type"], "type")), ("conditions", map(&["type"], "type"))];
        const POD_STATUS: &[(&str, ListInfo)] = &[("conditions", map(&["type"], "type"))];
        match self {
            Ty::ObjectMeta => OBJECT_META,
            Ty::PodSpec => POD_SPEC,
            Ty::Container => CONTAINER,
            Ty::ServiceSpec => SERVICE_SPEC,
            Ty::NodeSpec => NODE_SPEC,
            Ty::NodeStatus => NODE_STATUS,
            Ty::PodStatus => POD_STATUS,
            _ => &[],
        }
    }

    /// The type of field `name` of an object of this type.
    pub fn field(self, name: &str) -> Ty {
        match (self, name) {
            (_, "metadata") if matches!(self, Ty::Root(_) | Ty::PodTemplateSpec) => Ty::ObjectMeta,
            (Ty::Root(r), "spec") => match r {
                Resource::DaemonSet | Resource::Deployment => Ty::WorkloadSpec,
                Resource::Pod => Ty::PodSpec,
                Resource::Service => Ty::ServiceSpec,
                Resource::Node => Ty::NodeSpec,
                _ => Ty::Other,
            },
            (Ty::Root(Resource::Node), "status") => Ty::NodeStatus,
            (Ty::Root(Resource::Pod), "status") => Ty::PodStatus,
            (Ty::WorkloadSpec, "template") => Ty::PodTemplateSpec,
            (Ty::PodTemplateSpec, "spec") => Ty::PodSpec,
            _ => Ty::Other,
        }
    }

    /// The semantics of list field `name`, and the type of its items.
    pub fn list(self, name: &str) -> (ListInfo, Ty) {
        let info = self.lists().iter().find(|(n, _)| *n == name).map(|(_, i)| *i).unwrap_or(ATOMIC);
        let item = match (self, name) {
            (Ty::PodSpec, "containers" | "initContainers" | "ephemeralContainers") => Ty::Container,
            (Ty::PodSpec, "volumes") => Ty::Volume,
            _ => Ty::Other,
        };
        (info, item)
    }

    /// Every type that has list semantics or a schema of its own (for the OpenAPI
    /// extensions).
    pub fn all() -> &'static [Ty] {
        &[
            Ty::ObjectMeta,
            Ty::PodTemplateSpec,
            Ty::PodSpec,
            Ty::Container,
            Ty::ServiceSpec,
            Ty::NodeSpec,
            Ty::NodeStatus,
            Ty::PodStatus,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containers_are_keyed_by_name_and_tolerations_are_atomic() {
        let pod = Ty::Root(Resource::DaemonSet).field("spec").field("template").field("spec");
        assert_eq!(pod, Ty::PodSpec);
        let (info, item) = pod.list("containers");
        assert_eq!(info.list, ListType::Map(&["name"]));
        assert_eq!(item, Ty::Container);
        assert_eq!(item.list("ports").0.list, ListType::Map(&["containerPort", "protocol"]));
        assert_eq!(pod.list("tolerations").0.list, ListType::Atomic);
        assert_eq!(Ty::Other.list("anything").0.list, ListType::Atomic);
    }
}
