//! The `Authorizer` port on Cedar (research/cedar.md): the scope tree of SPEC §3 as entity
//! types, permissions as actions nested into the role groups viewer ⊂ editor ⊂ operator,
//! one template per role, each grant a template-linked policy, and the operator's own
//! policies beside them.
//!
//! Invariants: the schema, the templates and the operator policies are validated strictly
//! once, when the authorizer is built (a typo in a role group is an error, not a silent
//! Deny); per request only the caller's grants whose scope lies on the resource's chain
//! are linked, so a decision costs the same whatever else the token holds; entities are
//! built with the schema, without which action groups never match.

use std::collections::HashMap;
use std::str::FromStr;

use bc_domain::TokenId;
use bc_domain::model::{Grant, Role, Scope};
use bc_domain::ports::{Authorizer, Decision, Permission};
use cedar_policy::{
    Context, Entities, Entity, EntityId, EntityTypeName, EntityUid, PolicyId, PolicySet, Request,
    Schema, SlotId, Template, ValidationMode, Validator,
};

/// The Cedar schema: the scope tree and the permissions of SPEC §3. Each action lists
/// the entity types it may be asked about: its objects' own type and every container, since
/// creates and lists are decided on the container (and a load balancer's create also on
/// the pool whose quota it books, SPEC §3).
pub const CEDAR_SCHEMA: &str = r#"
entity Token, System;
entity Tenant in [System];
entity Pool, ProviderAccount in [Tenant];
entity KubernetesCluster, LoadBalancer in [ProviderAccount];
entity KubernetesNodePool in [KubernetesCluster];

action "role:operator";
action "role:editor" in ["role:operator"];
action "role:viewer" in ["role:editor"];

action "compute:pools:read", "compute:bookings:read" in ["role:viewer"]
  appliesTo { principal: [Token], resource: [System, Tenant, Pool] };
action "compute:pools:manage", "compute:bookings:manage" in ["role:editor"]
  appliesTo { principal: [Token], resource: [System, Tenant, Pool] };
action "compute:provider-accounts:read" in ["role:viewer"]
  appliesTo { principal: [Token], resource: [System, Tenant, ProviderAccount] };
action "compute:provider-accounts:manage" in ["role:editor"]
  appliesTo { principal: [Token], resource: [System, Tenant, ProviderAccount] };
action "compute:kubernetes:read" in ["role:viewer"]
  appliesTo { principal: [Token],
              resource: [System, Tenant, ProviderAccount, KubernetesCluster, KubernetesNodePool] };
action "compute:kubernetes:manage" in ["role:editor"]
  appliesTo { principal: [Token],
              resource: [System, Tenant, ProviderAccount, KubernetesCluster, KubernetesNodePool] };
action "compute:load-balancers:read" in ["role:viewer"]
  appliesTo { principal: [Token], resource: [System, Tenant, ProviderAccount, LoadBalancer] };
action "compute:load-balancers:manage" in ["role:editor"]
  appliesTo { principal: [Token], resource: [System, Tenant, Pool, ProviderAccount, LoadBalancer] };
action "compute:billing:read" in ["role:viewer"]
  appliesTo { principal: [Token], resource: [System, Tenant] };
action "compute:events:read" in ["role:viewer"]
  appliesTo { principal: [Token],
              resource: [System, Tenant, Pool, ProviderAccount, KubernetesCluster,
                         KubernetesNodePool, LoadBalancer] };
action "compute:quotas:manage" in ["role:operator"]
  appliesTo { principal: [Token], resource: [System, Tenant] };
"#;

/// The roles and their template ids.
const ROLES: [(Role, &str); 3] =
    [(Role::Viewer, "tpl:viewer"), (Role::Editor, "tpl:editor"), (Role::Operator, "tpl:operator")];

/// Why an authorizer could not be built: the operator's policies do not parse or do not
/// validate against the schema (or, a bug, the built-in schema or templates do not).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("authorization policies: {0}")]
pub struct PolicyError(String);

/// The entity type names, parsed once.
#[derive(Debug, Clone)]
struct Types {
    token: EntityTypeName,
    action: EntityTypeName,
    system: EntityTypeName,
    tenant: EntityTypeName,
    pool: EntityTypeName,
    account: EntityTypeName,
    cluster: EntityTypeName,
    node_pool: EntityTypeName,
    load_balancer: EntityTypeName,
}

impl Types {
    fn new() -> Result<Self, String> {
        let t = |name: &str| EntityTypeName::from_str(name).map_err(|e| e.to_string());
        Ok(Self {
            token: t("Token")?,
            action: t("Action")?,
            system: t("System")?,
            tenant: t("Tenant")?,
            pool: t("Pool")?,
            account: t("ProviderAccount")?,
            cluster: t("KubernetesCluster")?,
            node_pool: t("KubernetesNodePool")?,
            load_balancer: t("LoadBalancer")?,
        })
    }

    /// The entity of a scope: `compute-system` is the one `System`, the others by kind.
    /// Built from parts, so no id ever needs escaping.
    fn scope(&self, scope: &Scope) -> EntityUid {
        let (type_name, id) = match scope {
            Scope::System => (&self.system, "compute-system"),
            Scope::Tenant(t) => (&self.tenant, t.as_str()),
            Scope::Pool(p) => (&self.pool, p.as_str()),
            Scope::ProviderAccount(a) => (&self.account, a.as_str()),
            Scope::KubernetesCluster(c) => (&self.cluster, c.as_str()),
            Scope::KubernetesNodePool(n) => (&self.node_pool, n.as_str()),
            Scope::LoadBalancer(l) => (&self.load_balancer, l.as_str()),
        };
        EntityUid::from_type_name_and_id(type_name.clone(), EntityId::new(id))
    }
}

/// Cedar behind the [`Authorizer`] port.
#[derive(Debug, Clone)]
pub struct CedarAuthorizer {
    types: Types,
    schema: Schema,
    /// The role templates and the operator's policies; grants are linked into a clone.
    base: PolicySet,
    /// Whether operator policies exist: without them, a request no grant reaches is Deny
    /// without asking Cedar.
    has_operator_policies: bool,
}

impl CedarAuthorizer {
    /// The authorizer with the role templates only.
    pub fn new() -> Self {
        Self::with_policies("").expect("the built-in schema and templates validate")
    }

    /// The authorizer with the operator's own policies (Cedar text) beside the role
    /// templates, e.g. `forbid(principal == Token::"tok_…", action, resource);`. They are
    /// validated strictly against [`CEDAR_SCHEMA`]; warnings count as errors.
    pub fn with_policies(operator_policies: &str) -> Result<Self, PolicyError> {
        let err = |what: &str, e: &dyn std::fmt::Display| PolicyError(format!("{what}: {e}"));
        let (schema, _) =
            Schema::from_cedarschema_str(CEDAR_SCHEMA).map_err(|e| err("schema", &e))?;
        let mut base = PolicySet::new();
        for (role, id) in ROLES {
            let src = format!(
                "permit(principal == ?principal, action in Action::\"role:{}\", resource in ?resource);",
                role_name(role)
            );
            let template = Template::parse(Some(PolicyId::new(id)), src)
                .map_err(|e| err("role template", &e))?;
            base.add_template(template).map_err(|e| err("role template", &e))?;
        }
        let operator = PolicySet::from_str(operator_policies).map_err(|e| {
            let at = e.iter().find_map(|p| first_line(operator_policies, p));
            PolicyError(format!("operator policies{}: {e}", at_line(at)))
        })?;
        if operator.templates().next().is_some() {
            return Err(PolicyError("operator policies may not be templates".into()));
        }
        let mut has_operator_policies = false;
        for (n, policy) in operator.policies().enumerate() {
            base.add(policy.new_id(PolicyId::new(format!("operator:{n}"))))
                .map_err(|e| err("operator policies", &e))?;
            has_operator_policies = true;
        }
        let result = Validator::new(schema.clone()).validate(&base, ValidationMode::Strict);
        if !result.validation_passed() || result.validation_warnings().next().is_some() {
            // Only the operator's policies can fail (the templates are tested): each
            // problem names its line of the operator's text.
            let problems = result
                .validation_errors()
                .map(|e| format!("{}{e}", line_prefix(first_line(operator_policies, e))))
                .chain(
                    result
                        .validation_warnings()
                        .map(|w| format!("{}{w}", line_prefix(first_line(operator_policies, w)))),
                )
                .collect::<Vec<_>>()
                .join("; ");
            return Err(PolicyError(format!("do not validate against the schema: {problems}")));
        }
        let types = Types::new().map_err(|e| err("entity types", &e))?;
        Ok(Self { types, schema, base, has_operator_policies })
    }

    /// Decides, reporting Cedar's own errors (a request the schema refuses, a link that
    /// fails) as `Err` so tests can tell them from a plain Deny.
    pub fn decide(
        &self,
        principal: &TokenId,
        grants: &[Grant],
        permission: Permission,
        chain: &[Scope],
    ) -> Result<Decision, String> {
        let Some(resource) = chain.first() else { return Ok(Decision::Deny) };
        let types = &self.types;
        let principal_uid = EntityUid::from_type_name_and_id(
            types.token.clone(),
            EntityId::new(principal.as_str()),
        );
        let mut policies = self.base.clone();
        let mut linked = 0;
        // Only the grants on the resource's chain can allow: the others are not linked,
        // so a decision costs the same whatever else the token holds.
        for (i, grant) in grants.iter().enumerate().filter(|(_, g)| chain.contains(&g.scope)) {
            let template = ROLES.iter().find(|(r, _)| *r == grant.role).map(|(_, id)| *id);
            let template = template.ok_or("unknown role")?;
            policies
                .link(
                    PolicyId::new(template),
                    PolicyId::new(format!("grant:{i}")),
                    HashMap::from([
                        (SlotId::principal(), principal_uid.clone()),
                        (SlotId::resource(), types.scope(&grant.scope)),
                    ]),
                )
                .map_err(|e| format!("linking grant {i}: {e}"))?;
            linked += 1;
        }
        if linked == 0 && !self.has_operator_policies {
            return Ok(Decision::Deny);
        }
        let uids: Vec<EntityUid> = chain.iter().map(|s| types.scope(s)).collect();
        let entities = uids.iter().enumerate().map(|(i, u)| {
            Entity::new_no_attrs(u.clone(), uids.get(i + 1).into_iter().cloned().collect())
        });
        let entities = Entities::from_entities(entities, Some(&self.schema))
            .map_err(|e| format!("entities of {}: {e}", resource.to_scope_string()))?;
        let action = EntityUid::from_type_name_and_id(
            types.action.clone(),
            EntityId::new(permission.as_str()),
        );
        let request = Request::new(
            principal_uid,
            action,
            uids[0].clone(),
            Context::empty(),
            Some(&self.schema),
        )
        .map_err(|e| format!("{} on {}: {e}", permission.as_str(), resource.to_scope_string()))?;
        let response =
            cedar_policy::Authorizer::new().is_authorized(&request, &policies, &entities);
        Ok(match response.decision() {
            cedar_policy::Decision::Allow => {
                // Cedar gives the deciding policies as a set: sorted, an audit line is stable.
                let mut reasons: Vec<String> =
                    response.diagnostics().reason().map(|id| id.to_string()).collect();
                reasons.sort();
                Decision::Allow(reasons)
            }
            cedar_policy::Decision::Deny => Decision::Deny,
        })
    }
}

impl Default for CedarAuthorizer {
    fn default() -> Self {
        Self::new()
    }
}

impl Authorizer for CedarAuthorizer {
    fn authorize(
        &self,
        principal: &TokenId,
        grants: &[Grant],
        permission: Permission,
        chain: &[Scope],
    ) -> Decision {
        // A request the schema refuses (a permission asked about a type it does not apply
        // to) is a Deny: e.g. `compute:pools:read` on a grant's provider account.
        self.decide(principal, grants, permission, chain).unwrap_or(Decision::Deny)
    }

    fn has_object_policies(&self) -> bool {
        // The role templates decide by scope containment only: without the operator's
        // own policies, a permission on a container holds on everything in it.
        self.has_operator_policies
    }
}

/// The 1-based line of `text` where `diagnostic`'s first label points, if it has one.
fn first_line(text: &str, diagnostic: &dyn miette::Diagnostic) -> Option<usize> {
    let offset = diagnostic.labels()?.next()?.offset();
    Some(text.get(..offset).unwrap_or(text).matches('\n').count() + 1)
}

/// ` at line N` for a known line.
fn at_line(line: Option<usize>) -> String {
    line.map(|n| format!(" at line {n}")).unwrap_or_default()
}

/// `line N: ` for a known line.
fn line_prefix(line: Option<usize>) -> String {
    line.map(|n| format!("line {n}: ")).unwrap_or_default()
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Viewer => "viewer",
        Role::Editor => "editor",
        Role::Operator => "operator",
    }
}
