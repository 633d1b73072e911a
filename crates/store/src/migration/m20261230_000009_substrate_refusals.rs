//! Migration 9: `substrates.refused_generation`, the pool generation at which the
//! provider refused a call of the substrate (SPEC §6 "A refusal …"): while the pool stays
//! at that generation the refused call is not made again. `NULL`: no refusal stands.
//!
//! Invariant: nothing an earlier migration created changes meaning; existing rows have
//! no refusal recorded.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

#[derive(DeriveMigrationName)]
pub(super) struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter()
                .table("substrates")
                .add_column(big_integer_null("refused_generation"))
                .take(),
        )
        .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let db = m.get_connection();
        db.execute_unprepared("ALTER TABLE substrates DROP COLUMN refused_generation").await?;
        Ok(())
    }
}
