//! Migration 3: joined nodes, bookings, join tokens and API tokens.
//!
//! Invariant: a node name is unique within its pool, token hashes are unique, and every
//! credential lookup (node credential hash, token hash) is an index probe.

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
                .table("nodes")
                .if_not_exists()
                .col(text("node_id").primary_key())
                .col(text("pool_id"))
                .col(text("node_name"))
                .col(text_null("provider_node_id"))
                .col(text("bcd_version"))
                .col(text("credential_hash"))
                .col(big_integer("joined_at"))
                .col(big_integer_null("last_heartbeat_at"))
                .foreign_key(&mut fk("nodes", "pool_id", "pools", "pool_id"))
                .take(),
        )
        .await?;
        m.create_index(unique("nodes", "pool_node_name", &["pool_id", "node_name"])).await?;
        m.create_index(index("nodes", "pool_id", &["pool_id", "node_id"])).await?;
        m.create_index(index("nodes", "credential_hash", &["credential_hash"])).await?;

        m.create_table(
            Table::create()
                .table("bookings")
                .if_not_exists()
                .col(text("booking_id").primary_key())
                .col(text("tenant_id"))
                .col(text("pool_id"))
                .col(text_null("node_name"))
                .col(text("state"))
                .col(big_integer("created_at"))
                .col(big_integer_null("ends_at"))
                .col(big_integer_null("ended_at"))
                .foreign_key(&mut fk("bookings", "pool_id", "pools", "pool_id"))
                .take(),
        )
        .await?;
        m.create_index(index("bookings", "pool_id", &["pool_id", "booking_id"])).await?;
        m.create_index(index("bookings", "pool_state", &["pool_id", "state"])).await?;

        m.create_table(
            Table::create()
                .table("join_tokens")
                .if_not_exists()
                .col(text("token_hash").primary_key())
                .col(text("pool_id"))
                .col(big_integer("created_at"))
                .col(big_integer_null("revoked_at"))
                .foreign_key(&mut fk("join_tokens", "pool_id", "pools", "pool_id"))
                .take(),
        )
        .await?;
        m.create_index(index("join_tokens", "pool_id", &["pool_id", "revoked_at"])).await?;

        m.create_table(
            Table::create()
                .table("api_tokens")
                .if_not_exists()
                .col(text("token_id").primary_key())
                .col(text("token_hash"))
                .col(text("grants"))
                .col(big_integer("created_at"))
                .col(big_integer_null("revoked_at"))
                .take(),
        )
        .await?;
        m.create_index(unique("api_tokens", "token_hash", &["token_hash"])).await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for t in ["api_tokens", "join_tokens", "bookings", "nodes"] {
            m.drop_table(Table::drop().table(t).if_exists().take()).await?;
        }
        Ok(())
    }
}
