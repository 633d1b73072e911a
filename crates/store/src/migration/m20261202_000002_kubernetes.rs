//! Migration 2: substrates, Kubernetes clusters, node pools and load balancers.
//!
//! Invariant: names are unique among live rows of their scope (clusters and load
//! balancers per account, node pools per cluster) through `live_name`; every lookup the
//! repositories make (by provider-side id, by cluster, by pool, live rows per account)
//! has an index.

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
                .table("substrates")
                .if_not_exists()
                .col(text("pool_id").primary_key())
                .col(text("tenant_id"))
                .col(text("provider_account_id"))
                .col(text("mode"))
                .col(text_null("cluster_id"))
                .col(text("state"))
                .col(text_null("message"))
                .col(big_integer("nodes_listed"))
                .col(big_integer("nodes_joined"))
                .col(text_null("waiting_to_join"))
                .col(text_null("upgrade"))
                .col(big_integer("observed_generation"))
                .col(big_integer("created_at"))
                .col(big_integer("updated_at"))
                .foreign_key(&mut fk("substrates", "pool_id", "pools", "pool_id"))
                .take(),
        )
        .await?;
        m.create_index(index("substrates", "cluster_id", &["cluster_id", "pool_id"])).await?;

        m.create_table(
            Table::create()
                .table("kubernetes_clusters")
                .if_not_exists()
                .col(text("cluster_id").primary_key())
                .col(text("tenant_id"))
                .col(text("provider_account_id"))
                .col(text("name"))
                .col(text_null("live_name"))
                .col(text("region"))
                .col(text_null("desired_version"))
                .col(boolean("high_availability"))
                .col(text("mode"))
                .col(text("origin"))
                .col(text("substrate_pool_ids"))
                .col(big_integer("generation"))
                .col(big_integer("created_at"))
                .col(text_null("provider_cluster_id"))
                .col(text_null("running_version"))
                .col(text("state"))
                .col(text_null("message"))
                .col(big_integer("observed_generation"))
                .col(big_integer("updated_at"))
                .foreign_key(&mut fk(
                    "kubernetes_clusters",
                    "provider_account_id",
                    "provider_accounts",
                    "provider_account_id",
                ))
                .take(),
        )
        .await?;
        let t = "kubernetes_clusters";
        m.create_index(unique(t, "account_live_name", &["provider_account_id", "live_name"]))
            .await?;
        m.create_index(index(t, "tenant_id", &["tenant_id", "cluster_id"])).await?;
        m.create_index(index(t, "provider_id", &["provider_account_id", "provider_cluster_id"]))
            .await?;
        m.create_index(index(t, "account_state", &["provider_account_id", "state"])).await?;

        m.create_table(
            Table::create()
                .table("node_pools")
                .if_not_exists()
                .col(text("node_pool_id").primary_key())
                .col(text("cluster_id"))
                .col(text("tenant_id"))
                .col(text("name"))
                .col(text_null("live_name"))
                .col(text("size"))
                .col(text("scale"))
                .col(text("labels"))
                .col(text("taints"))
                .col(text_null("managed_by"))
                .col(big_integer("generation"))
                .col(big_integer("created_at"))
                .col(text_null("provider_node_pool_id"))
                .col(big_integer("nodes_listed"))
                .col(big_integer("nodes_ready"))
                .col(text("state"))
                .col(text_null("message"))
                .col(big_integer("observed_generation"))
                .col(big_integer("updated_at"))
                .foreign_key(&mut fk(
                    "node_pools",
                    "cluster_id",
                    "kubernetes_clusters",
                    "cluster_id",
                ))
                .take(),
        )
        .await?;
        m.create_index(unique("node_pools", "cluster_live_name", &["cluster_id", "live_name"]))
            .await?;
        m.create_index(index("node_pools", "cluster_id", &["cluster_id", "node_pool_id"])).await?;

        m.create_table(
            Table::create()
                .table("load_balancers")
                .if_not_exists()
                .col(text("load_balancer_id").primary_key())
                .col(text("tenant_id"))
                .col(text("pool_id"))
                .col(text("provider_account_id"))
                .col(text("name"))
                .col(text_null("live_name"))
                .col(text("spec"))
                .col(big_integer("generation"))
                .col(big_integer("created_at"))
                .col(boolean("delete_requested"))
                .col(text_null("provider_load_balancer_id"))
                .col(text_null("ip"))
                .col(text("state"))
                .col(text_null("message"))
                .col(big_integer("observed_generation"))
                .col(big_integer("updated_at"))
                .col(big_integer_null("ready_at"))
                .col(big_integer_null("deleted_at"))
                .foreign_key(&mut fk("load_balancers", "pool_id", "pools", "pool_id"))
                .foreign_key(&mut fk(
                    "load_balancers",
                    "provider_account_id",
                    "provider_accounts",
                    "provider_account_id",
                ))
                .take(),
        )
        .await?;
        let t = "load_balancers";
        m.create_index(unique(t, "account_live_name", &["provider_account_id", "live_name"]))
            .await?;
        m.create_index(index(t, "tenant_id", &["tenant_id", "load_balancer_id"])).await?;
        m.create_index(index(t, "pool_id", &["pool_id", "load_balancer_id"])).await?;
        m.create_index(index(
            t,
            "provider_id",
            &["provider_account_id", "provider_load_balancer_id"],
        ))
        .await?;
        m.create_index(index(t, "account_deleted", &["provider_account_id", "deleted_at"])).await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for t in ["load_balancers", "node_pools", "kubernetes_clusters", "substrates"] {
            m.drop_table(Table::drop().table(t).if_exists().take()).await?;
        }
        Ok(())
    }
}
