//! Migration 1: pools, their quotas, and provider accounts.
//!
//! Invariant: a tenant has at most one active pool and one live account per name
//! (`active_name` / `live_name` are NULL once archived / deleted, so the unique index
//! ignores those rows); a quota row belongs to an existing pool.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

use super::{fk, index, unique};

#[derive(DeriveMigrationName)]
pub(super) struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table("pools")
                .if_not_exists()
                .col(text("pool_id").primary_key())
                .col(text("tenant_id"))
                .col(text("name"))
                .col(text_null("active_name"))
                .col(text("policy"))
                .col(text("state"))
                .col(big_integer("generation"))
                .col(big_integer("created_at"))
                .col(big_integer("updated_at"))
                .col(big_integer_null("archived_at"))
                .take(),
        )
        .await?;
        m.create_index(unique("pools", "tenant_active_name", &["tenant_id", "active_name"]))
            .await?;
        m.create_index(index("pools", "tenant_id", &["tenant_id", "pool_id"])).await?;

        m.create_table(
            Table::create()
                .table("quotas")
                .if_not_exists()
                .col(text("pool_id"))
                .col(text("resource"))
                .col(big_integer("quota_limit"))
                .col(big_integer("used"))
                .primary_key(Index::create().col("pool_id").col("resource"))
                .foreign_key(&mut fk("quotas", "pool_id", "pools", "pool_id"))
                .take(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table("provider_accounts")
                .if_not_exists()
                .col(text("provider_account_id").primary_key())
                .col(text("tenant_id"))
                .col(text("provider"))
                .col(text("name"))
                .col(text_null("live_name"))
                .col(blob("credentials"))
                .col(big_integer("created_at"))
                .col(big_integer_null("deleted_at"))
                .take(),
        )
        .await?;
        m.create_index(unique(
            "provider_accounts",
            "tenant_live_name",
            &["tenant_id", "live_name"],
        ))
        .await?;
        m.create_index(index(
            "provider_accounts",
            "tenant_id",
            &["tenant_id", "provider_account_id"],
        ))
        .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for t in ["provider_accounts", "quotas", "pools"] {
            m.drop_table(Table::drop().table(t).if_exists().take()).await?;
        }
        Ok(())
    }
}
