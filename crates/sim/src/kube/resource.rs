//! The kinds a simulated cluster serves and what discovery says of each: group, version,
//! plural, singular, kind, scope, short names, categories and verbs, as a DOKS API
//! server lists them.
//!
//! Invariant: one table. Routing, discovery (`/api`, `/apis`, aggregated), OpenAPI,
//! error messages (`daemonsets.apps "x" not found`) and the typed decoding of bodies all
//! read it, so what discovery promises is what the routes serve.

use bc_domain::kube_wire;
use bc_domain::ports::ObjectKind;

/// The resources the simulated API serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    /// `v1` Namespace.
    Namespace,
    /// `v1` Secret.
    Secret,
    /// `v1` ServiceAccount.
    ServiceAccount,
    /// `apps/v1` DaemonSet.
    DaemonSet,
    /// `v1` Node (registered from the model's nodes).
    Node,
    /// `v1` Pod.
    Pod,
    /// `v1` ConfigMap.
    ConfigMap,
    /// `v1` Service.
    Service,
    /// `v1` Event.
    Event,
    /// `apps/v1` Deployment.
    Deployment,
    /// `v1` PersistentVolume (cluster-scoped; what a GKE cluster's disks are seen as).
    PersistentVolume,
}

/// Every served resource, in discovery order (core first, then `apps`).
pub const ALL: &[Resource] = &[
    Resource::ConfigMap,
    Resource::Event,
    Resource::Namespace,
    Resource::Node,
    Resource::PersistentVolume,
    Resource::Pod,
    Resource::Secret,
    Resource::ServiceAccount,
    Resource::Service,
    Resource::DaemonSet,
    Resource::Deployment,
];

/// The verbs every resource serves (namespaces: no `deletecollection`, as upstream).
const VERBS: &[&str] =
    &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];
const NAMESPACE_VERBS: &[&str] = &["create", "delete", "get", "list", "patch", "update", "watch"];

impl Resource {
    /// The URL plural.
    pub fn plural(self) -> &'static str {
        match self {
            Resource::Namespace => "namespaces",
            Resource::Secret => "secrets",
            Resource::ServiceAccount => "serviceaccounts",
            Resource::DaemonSet => "daemonsets",
            Resource::Node => "nodes",
            Resource::Pod => "pods",
            Resource::ConfigMap => "configmaps",
            Resource::Service => "services",
            Resource::Event => "events",
            Resource::Deployment => "deployments",
            Resource::PersistentVolume => "persistentvolumes",
        }
    }

    /// `kind`.
    pub fn kind(self) -> &'static str {
        match self {
            Resource::Namespace => "Namespace",
            Resource::Secret => "Secret",
            Resource::ServiceAccount => "ServiceAccount",
            Resource::DaemonSet => "DaemonSet",
            Resource::Node => "Node",
            Resource::Pod => "Pod",
            Resource::ConfigMap => "ConfigMap",
            Resource::Service => "Service",
            Resource::Event => "Event",
            Resource::Deployment => "Deployment",
            Resource::PersistentVolume => "PersistentVolume",
        }
    }

    /// The singular name (lower-case kind).
    pub fn singular(self) -> String {
        self.kind().to_ascii_lowercase()
    }

    /// The API group (`""` for the core group).
    pub fn group(self) -> &'static str {
        match self {
            Resource::DaemonSet | Resource::Deployment => "apps",
            _ => "",
        }
    }

    /// The served version.
    pub fn version(self) -> &'static str {
        "v1"
    }

    /// `apiVersion`: `v1` or `apps/v1`.
    pub fn api_version(self) -> &'static str {
        match self.group() {
            "" => "v1",
            _ => "apps/v1",
        }
    }

    /// `<plural>.<group>` (`daemonsets.apps`), or the plural alone in the core group: how
    /// the apiserver names a resource in NotFound, AlreadyExists and Conflict messages.
    pub fn qualified(self) -> String {
        match self.group() {
            "" => self.plural().to_owned(),
            g => format!("{}.{g}", self.plural()),
        }
    }

    /// `<Kind>.<group>` (`DaemonSet.apps`), or the kind alone in the core group: how the
    /// apiserver names a kind in Invalid messages.
    pub fn qualified_kind(self) -> String {
        match self.group() {
            "" => self.kind().to_owned(),
            g => format!("{}.{g}", self.kind()),
        }
    }

    /// Whether objects live in a namespace.
    pub fn namespaced(self) -> bool {
        !matches!(self, Resource::Namespace | Resource::Node | Resource::PersistentVolume)
    }

    /// Short names (`kubectl get ds`).
    pub fn short_names(self) -> &'static [&'static str] {
        match self {
            Resource::Namespace => &["ns"],
            Resource::Node => &["no"],
            Resource::Pod => &["po"],
            Resource::ConfigMap => &["cm"],
            Resource::Service => &["svc"],
            Resource::Event => &["ev"],
            Resource::ServiceAccount => &["sa"],
            Resource::DaemonSet => &["ds"],
            Resource::Deployment => &["deploy"],
            Resource::PersistentVolume => &["pv"],
            Resource::Secret => &[],
        }
    }

    /// Categories (`kubectl get all`).
    pub fn categories(self) -> &'static [&'static str] {
        match self {
            Resource::Pod | Resource::Service | Resource::DaemonSet | Resource::Deployment => {
                &["all"]
            }
            _ => &[],
        }
    }

    /// The verbs served.
    pub fn verbs(self) -> &'static [&'static str] {
        match self {
            Resource::Namespace => NAMESPACE_VERBS,
            _ => VERBS,
        }
    }

    /// The Go type of its objects in the generated field table (how its objects are
    /// decoded, encoded and defaulted: `bc_domain::kube_wire`).
    pub fn wire(self) -> kube_wire::Ty {
        static WIRE: std::sync::OnceLock<Vec<(Resource, kube_wire::Ty)>> =
            std::sync::OnceLock::new();
        let all = WIRE.get_or_init(|| {
            ALL.iter()
                .map(|r| {
                    let t = kube_wire::root(r.api_version(), r.kind());
                    (*r, t.expect("every served kind is in the table"))
                })
                .collect()
        });
        all.iter().find(|(r, _)| *r == self).map(|(_, t)| *t).expect("every resource is in ALL")
    }

    /// The Go type of its `status`, if the kind has one.
    pub fn status_wire(self) -> Option<kube_wire::Ty> {
        self.wire().struct_of("status")
    }

    /// The resource of a port object kind.
    pub fn of(kind: ObjectKind) -> Self {
        match kind {
            ObjectKind::Namespace => Resource::Namespace,
            ObjectKind::Secret => Resource::Secret,
            ObjectKind::ServiceAccount => Resource::ServiceAccount,
            ObjectKind::DaemonSet => Resource::DaemonSet,
        }
    }

    /// The resource of an `apiVersion`/`kind` pair.
    pub fn from_type(api_version: &str, kind: &str) -> Option<Self> {
        ALL.iter().copied().find(|r| r.api_version() == api_version && r.kind() == kind)
    }

    /// The resource a URL names: `group` (`""` for `/api/v1`), version and plural.
    pub fn from_path(group: &str, version: &str, plural: &str) -> Option<Self> {
        ALL.iter()
            .copied()
            .find(|r| r.group() == group && r.version() == version && r.plural() == plural)
    }

    /// The resources of one group, in discovery order.
    pub fn in_group(group: &str) -> impl Iterator<Item = Resource> + '_ {
        ALL.iter().copied().filter(move |r| r.group() == group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_the_apiserver_writes_them() {
        assert_eq!(Resource::DaemonSet.qualified(), "daemonsets.apps");
        assert_eq!(Resource::Secret.qualified(), "secrets");
        assert_eq!(Resource::Deployment.qualified_kind(), "Deployment.apps");
        assert_eq!(Resource::from_path("apps", "v1", "daemonsets"), Some(Resource::DaemonSet));
        assert_eq!(Resource::from_path("", "v1", "daemonsets"), None);
        assert_eq!(Resource::from_type("v1", "Pod"), Some(Resource::Pod));
        for r in ALL {
            assert_eq!(Resource::from_type(r.api_version(), r.kind()), Some(*r));
            assert_eq!(r.wire().name().rsplit('.').next(), Some(r.kind()));
        }
        assert_eq!(Resource::Secret.status_wire(), None);
        assert_eq!(
            Resource::DaemonSet.status_wire().map(|t| t.name()),
            Some("apps/v1.DaemonSetStatus")
        );
    }
}
