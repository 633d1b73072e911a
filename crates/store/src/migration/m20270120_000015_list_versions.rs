//! Migration 15: `list_versions`, one counter per tenant and list that every commit
//! changing an object of that list raises in the same transaction (issue 31: the API keeps
//! a page it answered and answers it again while the counter has not moved).
//!
//! Invariant: a missing row is version 0, so existing databases need no backfill; nothing
//! earlier changes.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

#[derive(DeriveMigrationName)]
pub(super) struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table("list_versions")
                .if_not_exists()
                .col(text("tenant_id"))
                .col(text("list"))
                .col(big_integer("version"))
                .primary_key(Index::create().col("tenant_id").col("list"))
                .take(),
        )
        .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table("list_versions").if_exists().take()).await?;
        Ok(())
    }
}
