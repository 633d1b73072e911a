//! The registry holds every method of SPEC §4–§12, with the SPEC's kind and
//! authorization, and every declaration is coherent with the checks and Cedar's schema.

use std::collections::BTreeSet;

use bc_api::authz::CedarAuthorizer;
use bc_api::registry;
use bc_api::registry::{Authorization, ResourceType};
use bc_domain::model::{Grant, Role, Scope};
use bc_domain::ports::Decision;
use bc_domain::{ClusterId, LoadBalancerId, NodePoolId, PoolId, ProviderAccountId, TokenId};

use crate::common::tenant;

/// SPEC §4–§12: every method, its kind and its authorization.
const CONTRACT: &[(&str, &str, &str)] = &[
    ("pools.create", "write", "compute:pools:manage @ compute-tenant"),
    ("pools.get", "read", "compute:pools:read @ pool"),
    ("pools.list", "read", "compute:pools:read @ pool"),
    ("pools.update", "write", "compute:pools:manage @ pool"),
    ("pools.archive", "write", "compute:pools:manage @ pool"),
    ("quotas.set", "write", "compute:quotas:manage @ compute-system"),
    ("quotas.list", "read", "compute:pools:read @ pool"),
    ("providerAccounts.create", "write", "compute:provider-accounts:manage @ compute-tenant"),
    ("providerAccounts.get", "read", "compute:provider-accounts:read @ provider-account"),
    ("providerAccounts.list", "read", "compute:provider-accounts:read @ provider-account"),
    ("providerAccounts.delete", "write", "compute:provider-accounts:manage @ provider-account"),
    ("kubernetesSubstrates.get", "read", "compute:kubernetes:read @ compute-tenant"),
    ("kubernetesClusters.create", "write", "compute:kubernetes:manage @ provider-account"),
    ("kubernetesClusters.get", "read", "compute:kubernetes:read @ kubernetes-cluster"),
    ("kubernetesClusters.list", "read", "compute:kubernetes:read @ kubernetes-cluster"),
    ("kubernetesClusters.upgrade", "write", "compute:kubernetes:manage @ kubernetes-cluster"),
    ("kubernetesClusters.delete", "write", "compute:kubernetes:manage @ kubernetes-cluster"),
    ("kubernetesNodePools.create", "write", "compute:kubernetes:manage @ kubernetes-cluster"),
    ("kubernetesNodePools.get", "read", "compute:kubernetes:read @ kubernetes-node-pool"),
    ("kubernetesNodePools.list", "read", "compute:kubernetes:read @ kubernetes-node-pool"),
    ("kubernetesNodePools.resize", "write", "compute:kubernetes:manage @ kubernetes-node-pool"),
    ("kubernetesNodePools.delete", "write", "compute:kubernetes:manage @ kubernetes-node-pool"),
    ("loadBalancers.create", "write", "compute:load-balancers:manage @ provider-account"),
    ("loadBalancers.get", "read", "compute:load-balancers:read @ provider-load-balancer"),
    ("loadBalancers.list", "read", "compute:load-balancers:read @ provider-load-balancer"),
    ("loadBalancers.update", "write", "compute:load-balancers:manage @ provider-load-balancer"),
    ("loadBalancers.delete", "write", "compute:load-balancers:manage @ provider-load-balancer"),
    ("bookings.create", "write", "compute:bookings:manage @ pool"),
    ("bookings.end", "write", "compute:bookings:manage @ pool"),
    ("bookings.list", "read", "compute:bookings:read @ pool"),
    ("billing.usage", "read", "compute:billing:read @ compute-tenant"),
    ("events.list", "read", "compute:events:read @ compute-tenant"),
    ("agents.join", "write", "join token"),
    ("agents.heartbeat", "write", "node credential"),
];

#[test]
fn every_method_of_the_contract_is_registered_with_its_kind_and_authorization() {
    let registered: BTreeSet<(String, String, String)> = registry()
        .methods()
        .iter()
        .map(|m| {
            let i = &m.info;
            (i.id().to_string(), i.kind.as_str().to_owned(), i.authorization.to_string())
        })
        .collect();
    let contract: BTreeSet<(String, String, String)> =
        CONTRACT.iter().map(|(m, k, a)| (m.to_string(), k.to_string(), a.to_string())).collect();
    let missing: Vec<_> = contract.difference(&registered).collect();
    let extra: Vec<_> = registered.difference(&contract).collect();
    assert!(missing.is_empty() && extra.is_empty(), "missing {missing:#?}\nnot in SPEC {extra:#?}");
}

#[test]
fn every_method_has_the_pages_and_facts_the_docs_need() {
    let pages: BTreeSet<&str> = registry().resources().iter().map(|r| r.page).collect();
    let expected = [
        "kubernetes-substrates",
        "kubernetes-node-pools",
        "load-balancers",
        "pools",
        "quotas",
        "provider-accounts",
        "kubernetes-clusters",
        "bookings",
        "billing",
        "events",
        "agents",
    ];
    assert_eq!(pages, expected.into_iter().collect());
    for m in registry().methods() {
        let i = &m.info;
        assert_eq!(i.path(), format!("/api/compute/{}/{}", i.resource.name, i.name));
        assert!(i.description.len() > 80, "{}: describe it", i.id());
        assert!(!i.resource.module.is_empty());
    }
}

#[test]
fn every_example_passes_its_methods_checks() {
    for m in registry().methods() {
        if let Err(e) = m.check(m.example()) {
            panic!("{}: example refused: {:?} {}", m.info.id(), e.field(), e.message());
        }
    }
}

#[test]
fn input_schemas_are_self_contained_and_refuse_unknown_fields() {
    for m in registry().methods() {
        let s = m.input_schema();
        assert!(!s.to_string().contains("$ref"), "{}: {s}", m.info.id());
        assert_eq!(s["additionalProperties"], false, "{}", m.info.id());
        assert!(
            !m.output_schema().to_string().contains("\"null\""),
            "{}: outputs omit, never null",
            m.info.id()
        );
    }
}

/// A chain whose first element is of type `on`, for asking Cedar about `on`.
fn chain_for(on: ResourceType) -> Vec<Scope> {
    let t = Scope::Tenant(tenant("acme"));
    let a = Scope::ProviderAccount(ProviderAccountId::generate(1, 1));
    let c = Scope::KubernetesCluster(ClusterId::generate(1, 2));
    match on {
        ResourceType::ComputeSystem => vec![Scope::System],
        ResourceType::ComputeTenant => vec![t, Scope::System],
        ResourceType::Pool => vec![Scope::Pool(PoolId::generate(1, 3)), t, Scope::System],
        ResourceType::ProviderAccount => vec![a, t, Scope::System],
        ResourceType::KubernetesCluster => vec![c, a, t, Scope::System],
        ResourceType::KubernetesNodePool => {
            vec![Scope::KubernetesNodePool(NodePoolId::generate(1, 4)), c, a, t, Scope::System]
        }
        ResourceType::ProviderLoadBalancer => {
            vec![Scope::LoadBalancer(LoadBalancerId::generate(1, 5)), a, t, Scope::System]
        }
    }
}

#[test]
fn every_authorization_is_one_the_cedar_schema_admits() {
    let cedar = CedarAuthorizer::new();
    let root = [Grant { role: Role::Operator, scope: Scope::System, tenant_id: None }];
    for m in registry().methods() {
        let Authorization::Permission { permission, on } = m.info.authorization else { continue };
        let decision = cedar.decide(&TokenId::generate(1, 1), &root, permission, &chain_for(on));
        assert!(
            matches!(decision, Ok(Decision::Allow(_))),
            "{}: {} on {} is refused by the schema: {decision:?}",
            m.info.id(),
            permission.as_str(),
            on.as_str()
        );
    }
}
