//! Migration 6: what the API's scoped lists and the reconcilers' sweeps, fences and
//! singleton jobs read and write.
//!
//! - `work_queue.requeue_at` replaces the `requeued` flag: the earliest time enqueued while
//!   an entry is leased, kept apart from `not_before` so that the holder's completion
//!   makes exactly that time the next due time (a future-dated enqueue used to collapse to
//!   "due now"). Rows flagged `requeued` carry their due time over.
//! - `load_balancers.quota_released`: the marker that releases a load balancer's quota
//!   unit exactly once. Rows already deleted count as released.
//! - `leases` (named singleton leases) and `relay_cursors` (each publisher's last `seq`).
//! - Indexes: live-only partial indexes for the sweeps (every live row of a kind, and of
//!   one account), the failing and due entries of each queue kind, and the tenant's
//!   billing intervals by number.
//!
//! Invariant: nothing an earlier migration created changes meaning; partial indexes are
//! written as SQL both backends accept (`CREATE INDEX … WHERE …`), and each `WHERE` is the
//! literal predicate the sweeps repeat, so both planners can use them.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

use super::index;

#[derive(DeriveMigrationName)]
pub(super) struct Migration;

/// Partial indexes: name, table, columns, predicate.
const PARTIAL: &[(&str, &str, &str, &str)] = &[
    ("substrates_live", "substrates", "pool_id", "state <> 'deleted'"),
    ("substrates_account_live", "substrates", "provider_account_id, pool_id", "state <> 'deleted'"),
    ("kubernetes_clusters_live", "kubernetes_clusters", "cluster_id", "state <> 'deleted'"),
    (
        "kubernetes_clusters_account_live",
        "kubernetes_clusters",
        "provider_account_id, cluster_id",
        "state <> 'deleted'",
    ),
    ("node_pools_live", "node_pools", "node_pool_id", "state <> 'deleted'"),
    ("load_balancers_live", "load_balancers", "load_balancer_id", "deleted_at IS NULL"),
    (
        "load_balancers_account_live",
        "load_balancers",
        "provider_account_id, load_balancer_id",
        "deleted_at IS NULL",
    ),
    ("provider_accounts_live", "provider_accounts", "provider_account_id", "deleted_at IS NULL"),
    ("work_queue_failing", "work_queue", "kind, item_key", "last_error IS NOT NULL"),
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let db = m.get_connection();

        m.alter_table(
            Table::alter().table("work_queue").add_column(big_integer_null("requeue_at")).take(),
        )
        .await?;
        db.execute_unprepared("UPDATE work_queue SET requeue_at = not_before WHERE requeued")
            .await?;
        db.execute_unprepared("ALTER TABLE work_queue DROP COLUMN requeued").await?;
        m.create_index(index("work_queue", "kind_not_before", &["kind", "not_before"])).await?;

        m.alter_table(
            Table::alter()
                .table("load_balancers")
                .add_column(boolean("quota_released").default(false))
                .take(),
        )
        .await?;
        db.execute_unprepared(
            "UPDATE load_balancers SET quota_released = TRUE WHERE deleted_at IS NOT NULL",
        )
        .await?;

        m.create_table(
            Table::create()
                .table("leases")
                .if_not_exists()
                .col(text("name").primary_key())
                .col(text("owner"))
                .col(big_integer("lease_until"))
                .take(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table("relay_cursors")
                .if_not_exists()
                .col(text("publisher").primary_key())
                .col(big_integer("last_seq"))
                .take(),
        )
        .await?;

        m.create_index(index(
            "billing_intervals",
            "tenant_interval",
            &["tenant_id", "interval_id"],
        ))
        .await?;
        for (name, table, cols, predicate) in PARTIAL {
            db.execute_unprepared(&format!(
                "CREATE INDEX IF NOT EXISTS {name} ON {table} ({cols}) WHERE {predicate}"
            ))
            .await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let db = m.get_connection();
        for (name, ..) in PARTIAL {
            db.execute_unprepared(&format!("DROP INDEX IF EXISTS {name}")).await?;
        }
        db.execute_unprepared("DROP INDEX IF EXISTS billing_intervals_tenant_interval").await?;
        for t in ["relay_cursors", "leases"] {
            m.drop_table(Table::drop().table(t).if_exists().take()).await?;
        }
        db.execute_unprepared("ALTER TABLE load_balancers DROP COLUMN quota_released").await?;
        db.execute_unprepared("DROP INDEX IF EXISTS work_queue_kind_not_before").await?;
        m.alter_table(
            Table::alter()
                .table("work_queue")
                .add_column(boolean("requeued").default(false))
                .take(),
        )
        .await?;
        db.execute_unprepared("UPDATE work_queue SET requeued = (requeue_at IS NOT NULL)").await?;
        db.execute_unprepared("ALTER TABLE work_queue DROP COLUMN requeue_at").await?;
        Ok(())
    }
}
