//! A method's declared facts: its resource, name, kind, authorization and description
//! (SPEC §2: every method is registered with this metadata).
//!
//! Invariant: these are plain data, shared by the server (which routes, authorizes and
//! documents from them), the client and the CLI; nothing here knows how a method runs.

use std::fmt;

use bc_domain::ports::Permission;

/// The phase every method of this contract belongs to.
pub const PHASE: &str = "v1.0";
/// The status every declared method has.
pub const STATUS: &str = "registered";

/// Whether a method changes state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Reads only.
    Read,
    /// Records desired state (and returns at once).
    Write,
}

impl Kind {
    /// `read` or `write`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Write => "write",
        }
    }
}

/// The scope types of SPEC §3: what a permission is checked on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResourceType {
    /// `compute-system`.
    ComputeSystem,
    /// `compute-tenant`.
    ComputeTenant,
    /// `pool`.
    Pool,
    /// `provider-account`.
    ProviderAccount,
    /// `kubernetes-cluster`.
    KubernetesCluster,
    /// `kubernetes-node-pool`.
    KubernetesNodePool,
    /// `provider-load-balancer`.
    ProviderLoadBalancer,
}

impl ResourceType {
    /// The textual form, e.g. `compute-tenant`.
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceType::ComputeSystem => "compute-system",
            ResourceType::ComputeTenant => "compute-tenant",
            ResourceType::Pool => "pool",
            ResourceType::ProviderAccount => "provider-account",
            ResourceType::KubernetesCluster => "kubernetes-cluster",
            ResourceType::KubernetesNodePool => "kubernetes-node-pool",
            ResourceType::ProviderLoadBalancer => "provider-load-balancer",
        }
    }

    /// The type of a scope.
    pub fn of(scope: &bc_domain::model::Scope) -> Self {
        use bc_domain::model::Scope;
        match scope {
            Scope::System => ResourceType::ComputeSystem,
            Scope::Tenant(_) => ResourceType::ComputeTenant,
            Scope::Pool(_) => ResourceType::Pool,
            Scope::ProviderAccount(_) => ResourceType::ProviderAccount,
            Scope::KubernetesCluster(_) => ResourceType::KubernetesCluster,
            Scope::KubernetesNodePool(_) => ResourceType::KubernetesNodePool,
            Scope::LoadBalancer(_) => ResourceType::ProviderLoadBalancer,
        }
    }
}

/// How a method authenticates its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authentication {
    /// `Authorization: Bearer <api token>` (every tenant method).
    ApiToken,
    /// The join token in the body (`agents.join`); the handler checks it.
    JoinToken,
    /// `Authorization: Bearer <node credential>` (`agents.heartbeat`).
    NodeCredential,
}

/// Who may call a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authorization {
    /// An API token whose grants allow `permission` on the method's resource of type `on`.
    Permission {
        /// The permission.
        permission: Permission,
        /// The type of the resource it is checked on.
        on: ResourceType,
    },
    /// The join token in the body (`agents.join`).
    JoinToken,
    /// A node credential (`agents.heartbeat`).
    NodeCredential,
}

impl Authorization {
    /// `permission @ resource-type`.
    pub const fn on(permission: Permission, on: ResourceType) -> Self {
        Authorization::Permission { permission, on }
    }

    /// How the caller authenticates.
    pub fn authentication(self) -> Authentication {
        match self {
            Authorization::Permission { .. } => Authentication::ApiToken,
            Authorization::JoinToken => Authentication::JoinToken,
            Authorization::NodeCredential => Authentication::NodeCredential,
        }
    }
}

impl fmt::Display for Authorization {
    /// `compute:kubernetes:read @ compute-tenant`, `join token`, `node credential`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Authorization::Permission { permission, on } => {
                write!(f, "{} @ {}", permission.as_str(), on.as_str())
            }
            Authorization::JoinToken => f.write_str("join token"),
            Authorization::NodeCredential => f.write_str("node credential"),
        }
    }
}

/// A second authorization a call needs when its input names another object it acts on
/// (SPEC §3: a pool's substrate acts on a provider account, so `pools.create` and
/// `pools.update` with a substrate also need `compute:kubernetes:manage` there). Declared
/// with the method's input (bc-api's `MethodInput::ALSO`), which names the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlsoAuthorization {
    /// The permission needed on that object.
    pub permission: Permission,
    /// The type of the object.
    pub on: ResourceType,
    /// The input field naming it, as a JSON path (`policy.substrate.account`).
    pub field: &'static str,
}

impl fmt::Display for AlsoAuthorization {
    /// `compute:kubernetes:manage @ provider-account (policy.substrate.account)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} @ {} ({})", self.permission.as_str(), self.on.as_str(), self.field)
    }
}

/// A resource of the API: one path segment, one reference page.
#[derive(Debug, PartialEq, Eq)]
pub struct Resource {
    /// The path segment and list key, e.g. `kubernetesSubstrates`.
    pub name: &'static str,
    /// The reference page's file name, e.g. `kubernetes-substrates`.
    pub page: &'static str,
    /// The module its methods belong to, e.g. `kubernetes`.
    pub module: &'static str,
    /// What it is, in the reference docs' voice (Markdown).
    pub description: &'static str,
}

impl Resource {
    /// The facts of a method of this resource, checked as `permission @ on`.
    pub const fn method(
        &'static self,
        name: &'static str,
        kind: Kind,
        permission: Permission,
        on: ResourceType,
        description: &'static str,
    ) -> MethodInfo {
        MethodInfo {
            resource: self,
            name,
            kind,
            authorization: Authorization::on(permission, on),
            description,
        }
    }
}

/// A method's declared facts.
#[derive(Debug, Clone, Copy)]
pub struct MethodInfo {
    /// Its resource.
    pub resource: &'static Resource,
    /// Its name, e.g. `get`.
    pub name: &'static str,
    /// Read or write.
    pub kind: Kind,
    /// Who may call it.
    pub authorization: Authorization,
    /// What it does, in the reference docs' voice.
    pub description: &'static str,
}

impl MethodInfo {
    /// `POST` path: `/api/compute/<resource>/<method>`.
    pub fn path(&self) -> String {
        format!("/api/compute/{}/{}", self.resource.name, self.name)
    }

    /// The method's id, e.g. `pools.create`.
    pub fn id(&self) -> MethodId {
        MethodId { resource: self.resource.name, name: self.name }
    }
}

/// A method's id, `<resource>.<method>` (metrics label, idempotency key, page tokens).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MethodId {
    /// The resource, e.g. `pools`.
    pub resource: &'static str,
    /// The method, e.g. `create`.
    pub name: &'static str,
}

impl fmt::Display for MethodId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.resource, self.name)
    }
}
