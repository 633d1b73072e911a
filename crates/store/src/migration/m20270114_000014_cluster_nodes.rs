//! Migration 14: `kubernetes_clusters.nodes_listed` and `nodes_ready`, an autopilot
//! cluster's nodes as last counted from the cluster (SPEC §7: the provider runs them and
//! they belong to no node pool, so the cluster row is where their count lives).
//!
//! Invariant: NULL for every existing row and for every standard cluster (its nodes are
//! counted on its node pools); nothing earlier changes.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

#[derive(DeriveMigrationName)]
pub(super) struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite's ALTER TABLE adds one at a time.
        for column in ["nodes_listed", "nodes_ready"] {
            m.alter_table(
                Table::alter()
                    .table("kubernetes_clusters")
                    .add_column(big_integer_null(column))
                    .take(),
            )
            .await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // Plain text: both backends take it (the builder's drop quotes the name twice).
        for column in ["nodes_listed", "nodes_ready"] {
            m.get_connection()
                .execute_unprepared(&format!(
                    "ALTER TABLE kubernetes_clusters DROP COLUMN {column}"
                ))
                .await?;
        }
        Ok(())
    }
}
