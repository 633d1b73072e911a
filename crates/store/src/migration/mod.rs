//! The schema, as sea-orm-migration migrations that run unchanged on SQLite and
//! PostgreSQL.
//!
//! Invariant: one migration per file (sea-orm 2 takes a migration's name from its module),
//! and a migration once released is never edited; a change is a new file. Portability
//! rules every file keeps: timestamps are BIGINT unix milliseconds, counters and
//! generations BIGINT, JSON is TEXT, and "unique among live rows" is a plain unique index
//! over a column that is NULL for dead rows (both backends treat NULLs as distinct). The
//! sweeps' live-only indexes are partial indexes, written as the one `CREATE INDEX … WHERE`
//! text both backends accept.

// `MigrationTrait` is declared with `&SchemaManager` (async-trait, late-bound lifetime);
// writing `SchemaManager<'_>` in the impls does not match it, so the lint is off here.
#![allow(elided_lifetimes_in_paths)]

use sea_orm_migration::prelude::*;

pub(crate) mod lock;
mod m20261202_000001_tenancy;
mod m20261202_000002_kubernetes;
mod m20261202_000003_agents;
mod m20261202_000004_ledger;
mod m20261202_000005_work_queue;
mod m20261210_000006_sweeps_and_leases;
mod m20261220_000007_kubernetes_intents;
mod m20261222_000008_provider_budgets;
mod m20261230_000009_substrate_refusals;
mod m20261231_000010_node_ends;
mod m20270101_000011_account_projects;
mod m20270114_000014_cluster_nodes;
mod m20270120_000015_list_versions;

/// Every migration of the store, in order.
pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261202_000001_tenancy::Migration),
            Box::new(m20261202_000002_kubernetes::Migration),
            Box::new(m20261202_000003_agents::Migration),
            Box::new(m20261202_000004_ledger::Migration),
            Box::new(m20261202_000005_work_queue::Migration),
            Box::new(m20261210_000006_sweeps_and_leases::Migration),
            Box::new(m20261220_000007_kubernetes_intents::Migration),
            Box::new(m20261222_000008_provider_budgets::Migration),
            Box::new(m20261230_000009_substrate_refusals::Migration),
            Box::new(m20261231_000010_node_ends::Migration),
            Box::new(m20270101_000011_account_projects::Migration),
            Box::new(m20270114_000014_cluster_nodes::Migration),
            Box::new(m20270120_000015_list_versions::Migration),
        ]
    }
}

/// A (non-unique) index named `<table>_<suffix>` over `cols`.
fn index(table: &'static str, suffix: &str, cols: &[&'static str]) -> IndexCreateStatement {
    let mut i = Index::create();
    i.name(format!("{table}_{suffix}")).table(table).if_not_exists();
    for c in cols {
        i.col(*c);
    }
    i.take()
}

/// A unique index named `<table>_<suffix>` over `cols`.
fn unique(table: &'static str, suffix: &str, cols: &[&'static str]) -> IndexCreateStatement {
    let mut i = index(table, suffix, cols);
    i.unique();
    i
}

/// A foreign key from `table.col` to `parent.parent_col`.
fn fk(
    table: &'static str,
    col: &'static str,
    parent: &'static str,
    parent_col: &'static str,
) -> ForeignKeyCreateStatement {
    ForeignKey::create()
        .name(format!("{table}_{col}_fk"))
        .from(table, col)
        .to(parent, parent_col)
        .on_delete(ForeignKeyAction::Restrict)
        .take()
}
