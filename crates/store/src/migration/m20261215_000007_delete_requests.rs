//! Migration 7: deleting a cluster or a node pool is desired state, as it already is for
//! load balancers; and a node pool says who made it.
//!
//! - `kubernetes_clusters.delete_requested`, `node_pools.delete_requested`: set by the
//!   API's delete calls under generation CAS, so a reconcile that is already running can
//!   never undo a delete with a status write.
//! - `node_pools.origin`: `created` (by this system) or `provider` (the provider's own
//!   pool, recorded by the cluster reconciler so lists need no provider call; read-only).
//!
//! Invariant: nothing an earlier migration created changes meaning; existing rows read as
//! before (no delete requested, made by this system).

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

#[derive(DeriveMigrationName)]
pub(super) struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for table in ["kubernetes_clusters", "node_pools"] {
            m.alter_table(
                Table::alter()
                    .table(table)
                    .add_column(boolean("delete_requested").default(false))
                    .take(),
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
        for table in ["kubernetes_clusters", "node_pools"] {
            db.execute_unprepared(&format!("ALTER TABLE {table} DROP COLUMN delete_requested"))
                .await?;
        }
        Ok(())
    }
}
