//! Writes of Kubernetes clusters and their node pools.
//!
//! Invariant: live names are unique per account (clusters) and per cluster (node pools);
//! desired fields change only under generation CAS and observed fields only through the
//! `Set…Status` writes, so neither kind of write can undo the other; an observed provider
//! id or running version, once known, is never erased by a write that does not know it.

use bc_domain::model::{KubernetesCluster, NodePool};
use bc_domain::ports::Write;
use bc_domain::{NodePoolState, ResourceState};
use sea_orm::Value;

use super::{Tx, Txn, misrouted, must_touch};
use crate::error::conflict;
use crate::sql::{enum_text, json, opt_u64v, os, s, ts, u64v};
use crate::store::{SqlStore, exec};

pub(super) async fn apply(store: &SqlStore, txn: &Txn, w: &Write) -> Tx<()> {
    match w {
        Write::InsertCluster(c) => insert(store, txn, c).await,
        Write::UpdateCluster { cluster, expected_generation } => {
            update(store, txn, cluster, *expected_generation).await
        }
        Write::SetClusterNodes { cluster_id, nodes } => {
            let q = store.st(
                "UPDATE kubernetes_clusters SET nodes_listed = ?, nodes_ready = ? \
                 WHERE cluster_id = ?",
                vec![u64v(u64::from(nodes.listed))?, u64v(u64::from(nodes.ready))?, s(cluster_id)],
            );
            must_touch(exec(txn, q).await?, || format!("cluster {cluster_id}"))
        }
        Write::SetClusterStatus { cluster_id, provider_cluster_id, version, status } => {
            let q = store.st(
                "UPDATE kubernetes_clusters SET \
                 provider_cluster_id = COALESCE(?, provider_cluster_id), \
                 running_version = COALESCE(?, running_version), state = ?, message = ?, \
                 observed_generation = ?, updated_at = ?, \
                 live_name = CASE WHEN ? THEN NULL ELSE name END WHERE cluster_id = ?",
                vec![
                    os(provider_cluster_id.as_ref()),
                    os(version.as_ref()),
                    s(status.state.as_str()),
                    os(status.message.as_ref()),
                    u64v(status.observed_generation)?,
                    ts(status.updated_at),
                    Value::from(status.state == ResourceState::Deleted),
                    s(cluster_id),
                ],
            );
            must_touch(exec(txn, q).await?, || format!("cluster {cluster_id}"))
        }
        Write::InsertNodePool(np) => insert_node_pool(store, txn, np).await,
        Write::UpdateNodePool { node_pool: np, expected_generation } => {
            let q = store.st(
                "UPDATE node_pools SET scale = ?, labels = ?, taints = ?, \
                 delete_requested = ?, generation = ? WHERE node_pool_id = ? AND generation = ?",
                vec![
                    json(&np.scale)?,
                    json(&np.labels)?,
                    json(&np.taints)?,
                    Value::from(np.delete_requested),
                    u64v(np.generation)?,
                    s(&np.node_pool_id),
                    u64v(*expected_generation)?,
                ],
            );
            let n = exec(txn, q).await?;
            let id = np.node_pool_id.as_str();
            store.cas_outcome(txn, n, "node_pools", "node_pool_id", id, "node pool").await
        }
        Write::SetNodePoolStatus {
            node_pool_id,
            provider_node_pool_id,
            nodes_listed,
            nodes_ready,
            state,
            message,
            observed_generation,
            updated_at,
        } => {
            let q = store.st(
                "UPDATE node_pools SET \
                 provider_node_pool_id = COALESCE(?, provider_node_pool_id), \
                 nodes_listed = ?, nodes_ready = ?, state = ?, message = ?, \
                 observed_generation = ?, updated_at = ?, \
                 live_name = CASE WHEN ? THEN NULL ELSE name END WHERE node_pool_id = ?",
                vec![
                    os(provider_node_pool_id.as_ref()),
                    Value::from(i64::from(*nodes_listed)),
                    Value::from(i64::from(*nodes_ready)),
                    s(state.as_str()),
                    os(message.as_ref()),
                    u64v(*observed_generation)?,
                    ts(*updated_at),
                    Value::from(*state == NodePoolState::Deleted),
                    s(node_pool_id),
                ],
            );
            must_touch(exec(txn, q).await?, || format!("node pool {node_pool_id}"))
        }
        _ => Err(misrouted(w)),
    }
}

async fn insert(store: &SqlStore, txn: &Txn, c: &KubernetesCluster) -> Tx<()> {
    let live = (c.status.state != ResourceState::Deleted).then(|| c.name.to_string());
    if live.is_some() {
        super::accounts::require_live(store, txn, &c.provider_account_id).await?;
    }
    let q = store.st(
        "INSERT INTO kubernetes_clusters (cluster_id, tenant_id, provider_account_id, \
         name, live_name, region, desired_version, high_availability, mode, origin, \
         substrate_pool_ids, delete_requested, generation, created_at, provider_cluster_id, \
         running_version, state, message, observed_generation, updated_at, nodes_listed, \
         nodes_ready) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        vec![
            s(&c.cluster_id),
            s(&c.tenant_id),
            s(&c.provider_account_id),
            s(&c.name),
            os(live),
            s(&c.region),
            os(c.desired_version.as_ref()),
            Value::from(c.high_availability),
            s(enum_text(&c.mode)?),
            s(enum_text(&c.origin)?),
            json(&c.substrate_pool_ids)?,
            Value::from(c.delete_requested),
            u64v(c.generation)?,
            ts(c.created_at),
            os(c.provider_cluster_id.as_ref()),
            os(c.version.as_ref()),
            s(c.status.state.as_str()),
            os(c.status.message.as_ref()),
            u64v(c.status.observed_generation)?,
            ts(c.status.updated_at),
            opt_u64v(c.nodes.map(|n| u64::from(n.listed)))?,
            opt_u64v(c.nodes.map(|n| u64::from(n.ready)))?,
        ],
    );
    let what = || format!("cluster {} in account {}", c.name, c.provider_account_id);
    let parent = format!("provider account {}", c.provider_account_id);
    exec(txn, q).await.map_err(conflict(what, &parent))?;
    Ok(())
}

/// The desired fields a tenant may change: name, desired version, high availability
/// (SPEC §4 allows false → true; the rules refuse the reverse before this write), the
/// substrate pools using it, and whether its deletion is asked for.
async fn update(
    store: &SqlStore,
    txn: &Txn,
    c: &KubernetesCluster,
    expected_generation: u64,
) -> Tx<()> {
    let q = store.st(
        "UPDATE kubernetes_clusters SET name = ?, \
         live_name = CASE WHEN state <> 'deleted' THEN ? ELSE NULL END, \
         desired_version = ?, high_availability = ?, substrate_pool_ids = ?, \
         delete_requested = ?, generation = ? WHERE cluster_id = ? AND generation = ?",
        vec![
            s(&c.name),
            s(&c.name),
            os(c.desired_version.as_ref()),
            Value::from(c.high_availability),
            json(&c.substrate_pool_ids)?,
            Value::from(c.delete_requested),
            u64v(c.generation)?,
            s(&c.cluster_id),
            u64v(expected_generation)?,
        ],
    );
    let what = || format!("cluster {} in account {}", c.name, c.provider_account_id);
    let n = exec(txn, q).await.map_err(conflict(what, "cluster"))?;
    let id = c.cluster_id.as_str();
    store.cas_outcome(txn, n, "kubernetes_clusters", "cluster_id", id, "cluster").await
}

async fn insert_node_pool(store: &SqlStore, txn: &Txn, np: &NodePool) -> Tx<()> {
    let live = (np.state != NodePoolState::Deleted).then(|| np.name.clone());
    let q = store.st(
        "INSERT INTO node_pools (node_pool_id, cluster_id, tenant_id, name, live_name, \
         size, scale, labels, taints, managed_by, origin, delete_requested, generation, \
         created_at, provider_node_pool_id, nodes_listed, nodes_ready, state, message, \
         observed_generation, updated_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        vec![
            s(&np.node_pool_id),
            s(&np.cluster_id),
            s(&np.tenant_id),
            s(&np.name),
            os(live),
            s(&np.size),
            json(&np.scale)?,
            json(&np.labels)?,
            json(&np.taints)?,
            os(np.managed_by.as_ref()),
            s(enum_text(&np.origin)?),
            Value::from(np.delete_requested),
            u64v(np.generation)?,
            ts(np.created_at),
            os(np.provider_node_pool_id.as_ref()),
            Value::from(i64::from(np.nodes_listed)),
            Value::from(i64::from(np.nodes_ready)),
            s(np.state.as_str()),
            os(np.message.as_ref()),
            u64v(np.observed_generation)?,
            ts(np.updated_at),
        ],
    );
    let what = || format!("node pool {} in cluster {}", np.name, np.cluster_id);
    let parent = format!("cluster {}", np.cluster_id);
    exec(txn, q).await.map_err(conflict(what, &parent))?;
    Ok(())
}
