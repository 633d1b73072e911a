//! Writes of provider accounts.
//!
//! Invariant: a tenant's live account names are unique (`live_name`), and an account is
//! deleted only while nothing live uses it (SPEC §5) — no live cluster, load balancer or
//! substrate — checked by the deleting statement itself; the delete erases the sealed
//! credentials in the same statement, and every insert of a live object naming an account
//! re-checks in its own transaction that the account is live ([`require_live`]), so a
//! create that raced the delete never leaves a live object on a deleted account.

use bc_domain::model::ProviderAccount;
use bc_domain::ports::Write;
use bc_domain::{ProviderAccountId, StoreError, Timestamp};
use sea_orm::Value;

use super::{Tx, Txn, misrouted};
use crate::error::conflict;
use crate::sql::{os, ots, s, ts};
use crate::store::{SqlStore, exec};
use sea_orm::{ConnectionTrait as _, DbBackend};

pub(super) async fn apply(store: &SqlStore, txn: &Txn, w: &Write) -> Tx<()> {
    match w {
        Write::InsertAccount(a) => insert(store, txn, a).await,
        Write::DeleteAccount { provider_account_id, at } => {
            delete(store, txn, provider_account_id, *at).await
        }
        _ => Err(misrouted(w)),
    }
}

async fn insert(store: &SqlStore, txn: &Txn, a: &ProviderAccount) -> Tx<()> {
    let live = a.deleted_at.is_none().then(|| a.name.to_string());
    let q = store.st(
        "INSERT INTO provider_accounts (provider_account_id, tenant_id, provider, name, \
         live_name, project_id, credentials, created_at, deleted_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        vec![
            s(&a.provider_account_id),
            s(&a.tenant_id),
            s(a.provider.as_str()),
            s(&a.name),
            os(live),
            os(a.project_id.clone()),
            Value::from(a.credentials.0.clone()),
            ts(a.created_at),
            ots(a.deleted_at),
        ],
    );
    let what = || format!("provider account {} of tenant {}", a.name, a.tenant_id);
    exec(txn, q).await.map_err(conflict(what, "provider account"))?;
    Ok(())
}

/// What keeps an account alive: `(one, many, count query)`, each over an index of the
/// account.
const USERS: [(&str, &str, &str); 3] = [
    (
        "cluster",
        "clusters",
        "SELECT COUNT(*) AS n FROM kubernetes_clusters \
         WHERE provider_account_id = ? AND state <> 'deleted'",
    ),
    (
        "load balancer",
        "load balancers",
        "SELECT COUNT(*) AS n FROM load_balancers \
         WHERE provider_account_id = ? AND deleted_at IS NULL",
    ),
    (
        "substrate",
        "substrates",
        "SELECT COUNT(*) AS n FROM substrates WHERE provider_account_id = ? AND state <> 'deleted'",
    ),
];

/// Fails unless account `id` exists and is not deleted, read inside the transaction; on
/// PostgreSQL the row is share-locked until the commit, so a delete waits for this
/// transaction and then sees what it inserted (and one that committed first is seen here).
pub(super) async fn require_live(store: &SqlStore, txn: &Txn, id: &ProviderAccountId) -> Tx<()> {
    let lock = if store.backend == DbBackend::Postgres { " FOR SHARE" } else { "" };
    let q = store.st(
        &format!(
            "SELECT 1 AS present FROM provider_accounts \
             WHERE provider_account_id = ? AND deleted_at IS NULL{lock}"
        ),
        vec![s(id)],
    );
    if txn.query_one_raw(q).await?.is_some() {
        Ok(())
    } else {
        Err(StoreError::NotFound(format!("provider account {id} (deleted)")).into())
    }
}

async fn delete(store: &SqlStore, txn: &Txn, id: &ProviderAccountId, at: Timestamp) -> Tx<()> {
    if store.backend == DbBackend::Postgres {
        // Waits for the creates holding the row (require_live), so the next statement's
        // snapshot sees what they committed.
        let lock = store.st(
            "SELECT 1 AS present FROM provider_accounts WHERE provider_account_id = ? FOR UPDATE",
            vec![s(id)],
        );
        txn.query_one_raw(lock).await?;
    }
    let q = store.st(
        "UPDATE provider_accounts SET deleted_at = COALESCE(deleted_at, ?), live_name = NULL, \
         credentials = ? \
         WHERE provider_account_id = ? \
         AND NOT EXISTS (SELECT 1 FROM kubernetes_clusters \
                         WHERE provider_account_id = ? AND state <> 'deleted') \
         AND NOT EXISTS (SELECT 1 FROM load_balancers \
                         WHERE provider_account_id = ? AND deleted_at IS NULL) \
         AND NOT EXISTS (SELECT 1 FROM substrates \
                         WHERE provider_account_id = ? AND state <> 'deleted')",
        vec![ts(at), Value::from(Vec::<u8>::new()), s(id), s(id), s(id), s(id)],
    );
    if exec(txn, q).await? > 0 {
        return Ok(());
    }
    if !store.exists(txn, "provider_accounts", "provider_account_id", id.as_str()).await? {
        return Err(StoreError::NotFound(format!("provider account {id}")).into());
    }
    let mut remaining = Vec::new();
    for (one, many, count) in USERS {
        match store.count_in(txn, count, vec![s(id)]).await? {
            0 => {}
            1 => remaining.push(format!("1 live {one}")),
            n => remaining.push(format!("{n} live {many}")),
        }
    }
    Err(StoreError::Conflict(format!(
        "provider account {id} is still used by {}: delete those first (a substrate goes with \
         its pool's archive or a policy without substrate)",
        remaining.join(", ")
    ))
    .into())
}
