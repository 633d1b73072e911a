//! Migration 4: billing intervals, the event outbox and idempotency records.
//!
//! Invariant: at most one open interval per `(meter, resource)` (`open_key` is 1 while
//! open and NULL once closed, under a unique index); `events.seq` is an autoincrement /
//! identity key, the global order of the outbox; `event_id` is unique.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

use super::{index, unique};

#[derive(DeriveMigrationName)]
pub(super) struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table("billing_intervals")
                .if_not_exists()
                .col(big_pk_auto("interval_id"))
                .col(text("meter"))
                .col(text("resource"))
                .col(text("tenant_id"))
                .col(text("pool_id"))
                .col(big_integer("start_at"))
                .col(big_integer_null("end_at"))
                .col(big_integer_null("open_key"))
                .take(),
        )
        .await?;
        let t = "billing_intervals";
        m.create_index(unique(t, "open", &["meter", "resource", "open_key"])).await?;
        m.create_index(index(t, "tenant_start", &["tenant_id", "start_at"])).await?;

        m.create_table(
            Table::create()
                .table("events")
                .if_not_exists()
                .col(big_pk_auto("seq"))
                .col(text("event_id"))
                .col(text("tenant_id"))
                .col(text("subject"))
                .col(text("kind"))
                .col(big_integer("time_ms"))
                .col(text("data"))
                .take(),
        )
        .await?;
        m.create_index(unique("events", "event_id", &["event_id"])).await?;
        m.create_index(index("events", "tenant_seq", &["tenant_id", "seq"])).await?;
        m.create_index(index("events", "tenant_subject_seq", &["tenant_id", "subject", "seq"]))
            .await?;

        m.create_table(
            Table::create()
                .table("idempotency")
                .if_not_exists()
                .col(text("tenant_id"))
                .col(text("method"))
                .col(text("request_id"))
                .col(text("body_hash"))
                .col(text("response"))
                .col(big_integer("created_at"))
                .primary_key(Index::create().col("tenant_id").col("method").col("request_id"))
                .take(),
        )
        .await?;
        m.create_index(index("idempotency", "created_at", &["created_at"])).await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for t in ["idempotency", "events", "billing_intervals"] {
            m.drop_table(Table::drop().table(t).if_exists().take()).await?;
        }
        Ok(())
    }
}
