//! Migration 5: the work queue.
//!
//! Invariant: one entry per `(kind, key)`; due entries are found through the
//! `not_before` index; `requeued` records an enqueue that arrived while the entry was
//! leased, so completing that lease keeps the entry instead of losing the new work.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

use super::index;

#[derive(DeriveMigrationName)]
pub(super) struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table("work_queue")
                .if_not_exists()
                .col(text("kind"))
                .col(text("item_key"))
                .col(big_integer("not_before"))
                .col(big_integer("attempts"))
                .col(text_null("lease_owner"))
                .col(big_integer_null("lease_until"))
                .col(text_null("last_error"))
                .col(boolean("requeued"))
                .primary_key(Index::create().col("kind").col("item_key"))
                .take(),
        )
        .await?;
        m.create_index(index("work_queue", "not_before", &["not_before"])).await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table("work_queue").if_exists().take()).await?;
        Ok(())
    }
}
