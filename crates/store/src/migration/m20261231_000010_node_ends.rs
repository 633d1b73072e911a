//! Migration 10: `nodes.ended_at`, when a node's credential stopped being valid because its
//! substrate was torn down (SPEC §9: node credentials end with their substrate). A node
//! joining again under the same name (a new substrate of the pool) clears it.
//!
//! Invariant: NULL for every existing row (they stay as they were); nothing earlier
//! changes.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

#[derive(DeriveMigrationName)]
pub(super) struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter().table("nodes").add_column(big_integer_null("ended_at")).take(),
        )
        .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // Plain text: both backends take it (the builder's drop quotes the name twice).
        m.get_connection().execute_unprepared("ALTER TABLE nodes DROP COLUMN ended_at").await?;
        Ok(())
    }
}
