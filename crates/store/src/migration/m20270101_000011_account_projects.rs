//! Migration 11: `provider_accounts.project_id`, the Google Cloud project a `gke` account
//! manages (SPEC §5: `projectId` is shown on the account). It is kept beside the sealed
//! credentials so reading an account never opens them.
//!
//! Invariant: NULL for every existing row (DigitalOcean accounts have no project);
//! nothing earlier changes.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

#[derive(DeriveMigrationName)]
pub(super) struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter().table("provider_accounts").add_column(text_null("project_id")).take(),
        )
        .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // Plain text: both backends take it (the builder's drop quotes the name twice).
        m.get_connection()
            .execute_unprepared("ALTER TABLE provider_accounts DROP COLUMN project_id")
            .await?;
        Ok(())
    }
}
