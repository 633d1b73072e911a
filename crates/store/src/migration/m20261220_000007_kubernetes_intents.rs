//! Migration 7: what the cluster and node-pool reconcilers need to tell apart.
//!
//! - `kubernetes_clusters.delete_requested` and `node_pools.delete_requested`: the
//!   desired "delete" of `kubernetesClusters.delete` / `kubernetesNodePools.delete`,
//!   written under generation CAS like every desired field (a status write of a
//!   reconciler can never undo it, as it could if "delete" were a state).
//! - `node_pools.origin`: `created` (made through this system) or `provider` (a
//!   provider's own pool, recorded read-only by the cluster reconciler). Existing rows
//!   were all made here.
//!
//! Invariant: nothing an earlier migration created changes meaning; SQLite takes one
//! column per `ALTER TABLE`, so each column is its own statement.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

#[derive(DeriveMigrationName)]
pub(super) struct Migration;

/// The added columns: table, column.
const FLAGS: &[(&str, &str)] =
    &[("kubernetes_clusters", "delete_requested"), ("node_pools", "delete_requested")];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for (table, col) in FLAGS {
            m.alter_table(
                Table::alter().table(*table).add_column(boolean(*col).default(false)).take(),
            )
            .await?;
        }
        m.alter_table(
            Table::alter().table("node_pools").add_column(text("origin").default("created")).take(),
        )
        .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let db = m.get_connection();
        db.execute_unprepared("ALTER TABLE node_pools DROP COLUMN origin").await?;
        for (table, col) in FLAGS {
            db.execute_unprepared(&format!("ALTER TABLE {table} DROP COLUMN {col}")).await?;
        }
        Ok(())
    }
}
