//! `kubernetes.substrates` against the simulator's direct faces and the real SQLite
//! store, stepped on a manual clock (no sleeps): create and adopt modes, ownership,
//! join tokens and accounting, flavor changes, upgrades, teardown.

use bc_domain::ResourceState;
use bc_domain::name::{LABEL_SUBSTRATE_POOL, substrate_namespace};
use bc_domain::ports::{Clock, ClusterRepo, LedgerRepo, ObjectKind};
use bc_reconcile::testing::{Env, create_policy, flavor};
use bc_sim::testing::NODE_SIZE;

fn kube_object(
    env: &Env,
    cluster: &str,
    kind: ObjectKind,
    ns: Option<&str>,
    name: &str,
) -> Option<serde_json::Value> {
    env.sim.state().kube.get_object(cluster, kind, ns, name)
}

#[tokio::test]
async fn create_mode_makes_the_cluster_pools_objects_and_nodes_join() {
    let env = Env::start().await;
    let policy = create_policy(
        &env.account.provider_account_id,
        "latest",
        vec![flavor("cpu", NODE_SIZE, 2)],
    );
    let pool = env.create_pool("web", policy).await;
    let s = env.until_substrate(&pool.pool_id, ResourceState::Ready, 40).await;
    assert_eq!((s.nodes_listed, s.nodes_joined, s.waiting_to_join), (2, 2, None), "{s:?}");
    let cluster = env.store.cluster_get_any(s.cluster_id.as_ref().unwrap()).await.unwrap().unwrap();
    let pid = cluster.provider_cluster_id.clone().unwrap();
    assert_eq!(cluster.name.as_str(), format!("bc-{}", pool.pool_id.dashed()));
    let ns = substrate_namespace(&pool.pool_id);
    for (kind, nsref, name) in [
        (ObjectKind::Namespace, None, ns.as_str()),
        (ObjectKind::Secret, Some(ns.as_str()), "bcd-join"),
        (ObjectKind::ServiceAccount, Some(ns.as_str()), "bcd"),
        (ObjectKind::DaemonSet, Some(ns.as_str()), "bcd"),
    ] {
        let o =
            kube_object(&env, &pid, kind, nsref, name).unwrap_or_else(|| panic!("{kind:?} {name}"));
        assert_eq!(o["metadata"]["labels"][LABEL_SUBSTRATE_POOL], pool.pool_id.as_str());
    }
    let events = env.store.event_list(&env.tenant, None, 0, 100).await.unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert!(kinds.contains(&"kubernetes.substrate.provisioning"), "{kinds:?}");
    assert!(kinds.contains(&"kubernetes.substrate.ready"), "{kinds:?}");
    assert!(kinds.contains(&"kubernetes.nodepool.ready"), "{kinds:?}");
    assert!(!serde_json::to_string(&events).unwrap().contains("bcj_"), "no join token in events");
}
