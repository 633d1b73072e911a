//! Migration 8: `provider_budgets`, the provider-call budget of each account shared by
//! every replica (`BudgetRepo`): each window's booked-until instant and the provider's
//! pause, replaced by compare-and-swap on `version`.
//!
//! Invariant: one row per key; nothing earlier changes.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

#[derive(DeriveMigrationName)]
pub(super) struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table("provider_budgets")
                .if_not_exists()
                .col(text("budget_key").primary_key())
                .col(big_integer("version"))
                .col(big_integer("minute_tat"))
                .col(big_integer("hour_tat"))
                .col(big_integer_null("paused_until"))
                .take(),
        )
        .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table("provider_budgets").if_exists().take()).await?;
        Ok(())
    }
}
