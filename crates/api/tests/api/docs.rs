//! The committed reference docs and OpenAPI document are exactly what the registry
//! generates, and the kubernetesSubstrates page reads like the seed's, field for field.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use bc_api::docs::{generated_files, openapi};
use bc_api::registry;

fn reference_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/reference")
}

#[test]
fn committed_reference_docs_are_what_the_registry_generates() {
    let dir = reference_dir();
    let files = generated_files(registry(), &bc_providers::offers());
    for (path, generated) in &files {
        let committed = std::fs::read_to_string(dir.join(path)).unwrap_or_default();
        assert!(
            committed == *generated,
            "docs/reference/{path} differs from what the registry generates: run `cargo xtask docs` and commit the result"
        );
    }
    let on_disk: BTreeSet<String> = std::fs::read_dir(dir.join("api"))
        .expect("docs/reference/api exists")
        .map(|e| format!("api/{}", e.expect("entry").file_name().to_string_lossy()))
        .collect();
    let expected: BTreeSet<String> =
        files.iter().map(|(p, _)| p.clone()).filter(|p| p.starts_with("api/")).collect();
    assert_eq!(on_disk, expected, "stale or missing pages: run `cargo xtask docs`");
}

/// The seed's page for `kubernetesSubstrates.get` (../shared/seed/000_8b4c8279947ccef0.txt),
/// line by line, as it reads once rendered.
const SEED: &[&str] = &[
    "A pool substrate is the managed Kubernetes cluster behind a pool whose policy has a `substrate` (`kind: 'kubernetes'`, an `account`, and `cluster: { create }` or `cluster: { adopt }`). The `kubernetes.substrates` reconciler records it here: it creates the cluster with one node pool per flavor (or adopts an existing cluster and adds the flavors' node pools to it, named `bc-<pool>-<flavor>` so they never collide with the tenant's own pools), server-side applies bcd's DaemonSet with a hosted join token, and the cluster's Nodes join the pool. Every object it applies carries the label `better-compute.dev/substrate-pool=<pool id>`; on an adopted cluster an object of the same name it did not create is never taken over or deleted. There is nothing to call to create or delete a substrate: change the pool's policy, or archive the pool to tear it down.",
    "All 1 methods are served by bc-api ",
    "| Method | Kind | Authorization | Phase | Status |",
    "get | read | compute:kubernetes:read @ compute-tenant | v1.0 | registered |",
    "POST /api/compute/kubernetesSubstrates/get",
    "Returns the pool's substrate: poolId, tenantId, providerAccountId, mode (create or adopt), the clusterId of its kubernetesClusters row once recorded, state (pending, provisioning, ready, updating, error, deleting, deleted) with a message when there is something to fix or wait for, nodesListed and nodesJoined (the substrate's Nodes the cluster last listed, and of them the ones whose bcd joined the pool), waitingToJoin ({ nodes, since }: how many listed Nodes have no joined bcd, and since when none has joined; after 15 minutes the message says what to check, while the state stays ready), and upgrade ({ version, since }) while an upgrades: 'drain' upgrade waits for bookings to end. It never returns the join token, its id or a credential. A pool without a substrate is NOT_FOUND. Decided as compute:kubernetes:read on the pool owner's tenant.",
    "- Kind: read",
    "- Authorization: compute:kubernetes:read@compute-tenant",
    "- Module: kubernetes",
    "- Phase: v1.0 (registered)",
    "Input",
    "| Field | Type | Required | Constraints |",
    "tenantId | string | yes | at most 128 characters; matches ^[A-Za-z0-9._:-]{1,128}$ |",
    "poolId | string | yes | at most 57 characters; matches ^pool_[0-9a-hjkmnp-tv-z]{26,52}$ |",
];

#[test]
fn kubernetes_substrates_page_reads_like_the_seed() {
    let page = std::fs::read_to_string(reference_dir().join("api/kubernetes-substrates.md"))
        .expect("the page is committed");
    assert!(page.contains(SEED[0]), "the resource description is the seed's, Markdown and all");
    // Rendered, code spans lose their backticks: compare the text a reader sees.
    let rendered = page.replace('`', "");
    let mut from = 0;
    for line in &SEED[1..] {
        let at = rendered[from..]
            .find(line)
            .unwrap_or_else(|| panic!("missing, or out of the seed's order: {line}"));
        from += at + line.len();
    }
    let inputs =
        rendered.lines().filter(|l| l.starts_with("| ") && l.contains(" | string | ")).count();
    assert_eq!(inputs, 2, "exactly the seed's two input fields");
}

#[test]
fn node_pool_and_load_balancer_pages_keep_the_seeds_descriptions() {
    let read = |p: &str| std::fs::read_to_string(reference_dir().join(p)).expect("committed");
    assert!(read("api/kubernetes-node-pools.md").contains("Node pools are the groups of worker nodes of a `standard` Kubernetes cluster ([kubernetesClusters](/docs/reference/api/kubernetes-clusters)); an `autopilot` cluster has none, because the provider runs its nodes."));
    assert!(read("api/load-balancers.md").contains("A load balancer books one `loadBalancers` quota on the pool (no quota row grants none) and bills `vps.load-balancer.hours` from `ready` until deleted."));
}

#[test]
fn openapi_is_3_1_with_every_method_and_resolvable_references() {
    let doc = openapi(registry());
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().expect("paths");
    for m in registry().methods() {
        let op = &paths[&m.info.path()]["post"];
        assert_eq!(op["x-authorization"], m.info.authorization.to_string());
        assert_eq!(op["x-kind"], m.info.kind.as_str());
    }
    let schemas = doc["components"]["schemas"].as_object().expect("schemas");
    let text = doc.to_string();
    for reference in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = &reference[..reference.find('"').expect("closing quote")];
        assert!(schemas.contains_key(name), "dangling $ref {name}");
    }
}
