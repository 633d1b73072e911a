//! The read repositories of the `Store` port on `SqlStore`.
//!
//! Invariant: every method is one indexed query — a key probe, or a page bounded by
//! `LIMIT` over an index ordered by its key (see the migrations) — so none scans a table
//! to find a row; tenant-scoped reads filter by tenant in the same query, and scoped
//! lists apply the caller's [`ReadScope`] inside it, so a page is never short because of
//! filtering afterwards.

use async_trait::async_trait;
use bc_domain::model::{
    ApiToken, BillingInterval, Booking, BookingState, Event, IdempotencyRecord, JoinToken,
    KubernetesCluster, LoadBalancer, Node, NodePool, Pool, ProviderAccount, Quota, QuotaResource,
    Substrate,
};
use bc_domain::ports::{
    AccountRepo, AgentRepo, BookingRepo, ClusterFilter, ClusterRepo, GrantedIds, LedgerRepo,
    LoadBalancerFilter, LoadBalancerRepo, Page, PageCursor, PageRequest, PoolRepo, ReadScope,
    StoreResult, SubstrateRepo,
};
use bc_domain::rules::idempotency;
use bc_domain::{
    BookingId, ClusterId, LoadBalancerId, NodeId, NodePoolId, ObjectName, PoolId,
    ProviderAccountId, TenantId, Timestamp, TokenId,
};
use sea_orm::Value;

use crate::rows::{self, *};
use crate::sql::{self, placeholders, s, ts, u64v};
use crate::store::{IdempotencyKey, PointRead, SqlStore};
use std::collections::{BTreeMap, HashMap};

impl SqlStore {
    /// The idempotency records of `keys` (live or not), one query per tenant and method
    /// among them (`request_id IN (…)` under the primary key); an answer per key, in
    /// order.
    async fn idempotency_batch(
        &self,
        keys: Vec<IdempotencyKey>,
    ) -> Vec<StoreResult<Option<IdempotencyRecord>>> {
        let mut scopes: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
        for (tenant, method, request_id) in &keys {
            scopes.entry((tenant, method)).or_default().push(request_id);
        }
        let mut found = HashMap::new();
        let mut failed = HashMap::new();
        for ((tenant, method), mut ids) in scopes {
            ids.sort_unstable();
            ids.dedup();
            let q = format!(
                "SELECT {IDEMPOTENCY} FROM idempotency \
                 WHERE tenant_id = ? AND method = ? AND request_id IN ({})",
                placeholders(ids.len())
            );
            let mut v = vec![s(tenant), s(method)];
            v.extend(ids.iter().map(s));
            match self.all(&q, v, rows::idempotency).await {
                Ok(records) => found.extend(records.into_iter().map(|r| {
                    ((r.tenant_id.to_string(), r.method.clone(), r.request_id.clone()), r)
                })),
                Err(e) => {
                    failed.insert((tenant.to_owned(), method.to_owned()), e);
                }
            }
        }
        keys.iter()
            .map(|k| match failed.get(&(k.0.clone(), k.1.clone())) {
                Some(e) => Err(e.clone()),
                None => Ok(found.get(k).cloned()),
            })
            .collect()
    }
}

/// A list's restriction to what a [`ReadScope`] covers.
enum Scoped {
    /// No restriction.
    All,
    /// ` AND (…)` with its values.
    Clause(String, Vec<Value>),
    /// The scope covers nothing: the page is empty without a query.
    Nothing,
}

/// The restriction of `scope`: `alternatives` lists, for granted ids, `(sql with {} for
/// the ids' placeholders, ids)`; a row is readable if any alternative holds.
fn scoped<'a>(
    scope: &ReadScope,
    alternatives: impl FnOnce(&GrantedIds) -> Vec<(&'a str, Vec<Value>)>,
) -> Scoped {
    let ReadScope::Granted(granted) = scope else { return Scoped::All };
    let mut parts = Vec::new();
    let mut values = Vec::new();
    for (sql, ids) in alternatives(granted).into_iter().filter(|(_, ids)| !ids.is_empty()) {
        parts.push(sql.replace("{}", &placeholders(ids.len())));
        values.extend(ids);
    }
    if parts.is_empty() {
        Scoped::Nothing
    } else {
        Scoped::Clause(format!(" AND ({})", parts.join(" OR ")), values)
    }
}

/// Bound values of a set of ids.
fn ids<T: AsRef<str>>(set: impl IntoIterator<Item = T>) -> Vec<Value> {
    set.into_iter().map(s).collect()
}

/// An empty page.
fn empty<T, K>() -> Page<T, K> {
    Page { items: Vec::new(), next: None }
}

/// Appends the scope's clause to a query, or says the page is empty.
fn restrict(q: &mut String, v: &mut Vec<Value>, scope: Scoped) -> bool {
    match scope {
        Scoped::All => true,
        Scoped::Clause(c, ids) => {
            q.push_str(&c);
            v.extend(ids);
            true
        }
        Scoped::Nothing => false,
    }
}

#[async_trait]
impl PoolRepo for SqlStore {
    async fn pool_get(&self, tenant: &TenantId, pool_id: &PoolId) -> StoreResult<Option<Pool>> {
        // Every API call on a pool, and every load balancer create, authorizes on its
        // pool: grouped (`crate::group`) by id; another tenant's is absent.
        let how = PointRead {
            table: "pools",
            columns: POOL,
            within: None,
            key: "pool_id",
            decode: rows::pool,
            key_of: |p| p.pool_id.to_string(),
        };
        let pool = self.read_grouped(&self.groups.pools, how, pool_id.to_string()).await?;
        Ok(pool.filter(|p| p.tenant_id == *tenant))
    }

    async fn pool_get_any(&self, pool_id: &PoolId) -> StoreResult<Option<Pool>> {
        let q = format!("SELECT {POOL} FROM pools WHERE pool_id = ?");
        self.one(&q, vec![s(pool_id)], rows::pool).await
    }

    async fn pool_find_by_name(
        &self,
        tenant: &TenantId,
        name: &ObjectName,
    ) -> StoreResult<Option<Pool>> {
        let q = format!("SELECT {POOL} FROM pools WHERE tenant_id = ? AND active_name = ?");
        self.one(&q, vec![s(tenant), s(name)], rows::pool).await
    }

    async fn pool_list(
        &self,
        tenant: &TenantId,
        scope: &ReadScope,
        include_archived: bool,
        page: &PageRequest<PoolId>,
    ) -> StoreResult<Page<Pool, PoolId>> {
        let mut q = format!("SELECT {POOL} FROM pools WHERE tenant_id = ?");
        let mut v = vec![s(tenant)];
        if !include_archived {
            q.push_str(" AND state = 'active'");
        }
        let scope = scoped(scope, |g| vec![("pool_id IN ({})", ids(&g.pools))]);
        if !restrict(&mut q, &mut v, scope) {
            return Ok(empty());
        }
        self.page(&q, v, "pool_id", page, rows::pool, |p| p.pool_id.clone()).await
    }

    async fn pool_list_version(&self, tenant: &TenantId) -> StoreResult<u64> {
        let q = "SELECT version FROM list_versions WHERE tenant_id = ? AND list = ?";
        let values = vec![s(tenant), s(crate::uow::POOLS_LIST)];
        let version = self.one(q, values, |r| crate::sql::Row(r).u64("version")).await?;
        Ok(version.unwrap_or(0))
    }

    async fn quota_get(
        &self,
        pool_id: &PoolId,
        resource: QuotaResource,
    ) -> StoreResult<Option<Quota>> {
        let q = format!("SELECT {QUOTA} FROM quotas WHERE pool_id = ? AND resource = ?");
        self.one(&q, vec![s(pool_id), s(resource.as_str())], rows::quota).await
    }

    async fn quota_list(&self, pool_id: &PoolId) -> StoreResult<Vec<Quota>> {
        let q = format!("SELECT {QUOTA} FROM quotas WHERE pool_id = ? ORDER BY resource");
        self.all(&q, vec![s(pool_id)], rows::quota).await
    }
}

#[async_trait]
impl AccountRepo for SqlStore {
    async fn account_get(
        &self,
        tenant: &TenantId,
        id: &ProviderAccountId,
    ) -> StoreResult<Option<ProviderAccount>> {
        // Every API call on an account's objects authorizes on it: the grouped read of
        // `account_get_any`; another tenant's is absent.
        let account = self.account_get_any(id).await?;
        Ok(account.filter(|a| a.tenant_id == *tenant))
    }

    async fn account_get_any(
        &self,
        id: &ProviderAccountId,
    ) -> StoreResult<Option<ProviderAccount>> {
        // Every activation reads its object's account: grouped (`crate::group`).
        let how = PointRead {
            table: "provider_accounts",
            columns: ACCOUNT,
            within: None,
            key: "provider_account_id",
            decode: rows::account,
            key_of: |a| a.provider_account_id.to_string(),
        };
        self.read_grouped(&self.groups.accounts, how, id.to_string()).await
    }

    async fn account_list(
        &self,
        tenant: &TenantId,
        scope: &ReadScope,
        page: &PageRequest<ProviderAccountId>,
    ) -> StoreResult<Page<ProviderAccount, ProviderAccountId>> {
        let mut q = format!(
            "SELECT {ACCOUNT} FROM provider_accounts WHERE tenant_id = ? AND deleted_at IS NULL"
        );
        let mut v = vec![s(tenant)];
        let alts = scoped(scope, |g| vec![("provider_account_id IN ({})", ids(&g.accounts))]);
        if !restrict(&mut q, &mut v, alts) {
            return Ok(empty());
        }
        self.page(&q, v, "provider_account_id", page, rows::account, account_key).await
    }

    async fn account_sweep(
        &self,
        page: &PageRequest<ProviderAccountId>,
    ) -> StoreResult<Page<ProviderAccount, ProviderAccountId>> {
        let q = format!("SELECT {ACCOUNT} FROM provider_accounts WHERE deleted_at IS NULL");
        self.page(&q, vec![], "provider_account_id", page, rows::account, account_key).await
    }
}

fn account_key(a: &ProviderAccount) -> ProviderAccountId {
    a.provider_account_id.clone()
}

fn substrate_key(x: &Substrate) -> PoolId {
    x.pool_id.clone()
}

#[async_trait]
impl SubstrateRepo for SqlStore {
    async fn substrate_get(
        &self,
        tenant: &TenantId,
        pool_id: &PoolId,
    ) -> StoreResult<Option<Substrate>> {
        let q = format!("SELECT {SUBSTRATE} FROM substrates WHERE pool_id = ? AND tenant_id = ?");
        self.one(&q, vec![s(pool_id), s(tenant)], rows::substrate).await
    }

    async fn substrate_get_any(&self, pool_id: &PoolId) -> StoreResult<Option<Substrate>> {
        let q = format!("SELECT {SUBSTRATE} FROM substrates WHERE pool_id = ?");
        self.one(&q, vec![s(pool_id)], rows::substrate).await
    }

    async fn substrate_list_by_cluster(
        &self,
        cluster_id: &ClusterId,
    ) -> StoreResult<Vec<Substrate>> {
        // A cluster carries a handful of pools at most; the index bounds the read.
        let q = format!("SELECT {SUBSTRATE} FROM substrates WHERE cluster_id = ? ORDER BY pool_id");
        self.all(&q, vec![s(cluster_id)], rows::substrate).await
    }

    async fn substrate_sweep(
        &self,
        page: &PageRequest<PoolId>,
    ) -> StoreResult<Page<Substrate, PoolId>> {
        let q = format!("SELECT {SUBSTRATE} FROM substrates WHERE state <> 'deleted'");
        self.page(&q, vec![], "pool_id", page, rows::substrate, substrate_key).await
    }

    async fn substrate_list_by_account(
        &self,
        account: &ProviderAccountId,
        page: &PageRequest<PoolId>,
    ) -> StoreResult<Page<Substrate, PoolId>> {
        let q = format!(
            "SELECT {SUBSTRATE} FROM substrates \
             WHERE provider_account_id = ? AND state <> 'deleted'"
        );
        self.page(&q, vec![s(account)], "pool_id", page, rows::substrate, substrate_key).await
    }
}

fn cluster_key(c: &KubernetesCluster) -> ClusterId {
    c.cluster_id.clone()
}

fn node_pool_key(n: &NodePool) -> NodePoolId {
    n.node_pool_id.clone()
}

#[async_trait]
impl ClusterRepo for SqlStore {
    async fn cluster_get(
        &self,
        tenant: &TenantId,
        id: &ClusterId,
    ) -> StoreResult<Option<KubernetesCluster>> {
        let q = format!(
            "SELECT {CLUSTER} FROM kubernetes_clusters WHERE cluster_id = ? AND tenant_id = ?"
        );
        self.one(&q, vec![s(id), s(tenant)], rows::cluster).await
    }

    async fn cluster_get_any(&self, id: &ClusterId) -> StoreResult<Option<KubernetesCluster>> {
        let q = format!("SELECT {CLUSTER} FROM kubernetes_clusters WHERE cluster_id = ?");
        self.one(&q, vec![s(id)], rows::cluster).await
    }

    async fn cluster_list(
        &self,
        tenant: &TenantId,
        scope: &ReadScope,
        filter: &ClusterFilter,
        page: &PageRequest<ClusterId>,
    ) -> StoreResult<Page<KubernetesCluster, ClusterId>> {
        let mut q = format!("SELECT {CLUSTER} FROM kubernetes_clusters WHERE tenant_id = ?");
        let mut v = vec![s(tenant)];
        if let Some(a) = &filter.provider_account_id {
            q.push_str(" AND provider_account_id = ?");
            v.push(s(a));
        }
        if !filter.include_deleted {
            q.push_str(" AND state <> 'deleted'");
        }
        let alts = scoped(scope, |g| {
            vec![
                ("cluster_id IN ({})", ids(&g.clusters)),
                ("provider_account_id IN ({})", ids(&g.accounts)),
            ]
        });
        if !restrict(&mut q, &mut v, alts) {
            return Ok(empty());
        }
        self.page(&q, v, "cluster_id", page, rows::cluster, cluster_key).await
    }

    async fn cluster_find_by_provider_id(
        &self,
        account: &ProviderAccountId,
        provider_cluster_id: &str,
    ) -> StoreResult<Option<KubernetesCluster>> {
        let q = format!(
            "SELECT {CLUSTER} FROM kubernetes_clusters WHERE provider_account_id = ? \
             AND provider_cluster_id = ? AND state <> 'deleted' ORDER BY cluster_id LIMIT 1"
        );
        self.one(&q, vec![s(account), s(provider_cluster_id)], rows::cluster).await
    }

    async fn cluster_count_live_by_account(&self, account: &ProviderAccountId) -> StoreResult<u64> {
        let q = "SELECT COUNT(*) AS n FROM kubernetes_clusters \
                 WHERE provider_account_id = ? AND state <> 'deleted'";
        self.count(q, vec![s(account)]).await
    }

    async fn cluster_sweep(
        &self,
        page: &PageRequest<ClusterId>,
    ) -> StoreResult<Page<KubernetesCluster, ClusterId>> {
        let q = format!("SELECT {CLUSTER} FROM kubernetes_clusters WHERE state <> 'deleted'");
        self.page(&q, vec![], "cluster_id", page, rows::cluster, cluster_key).await
    }

    async fn cluster_list_by_account(
        &self,
        account: &ProviderAccountId,
        page: &PageRequest<ClusterId>,
    ) -> StoreResult<Page<KubernetesCluster, ClusterId>> {
        let q = format!(
            "SELECT {CLUSTER} FROM kubernetes_clusters \
             WHERE provider_account_id = ? AND state <> 'deleted'"
        );
        self.page(&q, vec![s(account)], "cluster_id", page, rows::cluster, cluster_key).await
    }

    async fn node_pool_get(
        &self,
        tenant: &TenantId,
        id: &NodePoolId,
    ) -> StoreResult<Option<NodePool>> {
        let q =
            format!("SELECT {NODE_POOL} FROM node_pools WHERE node_pool_id = ? AND tenant_id = ?");
        self.one(&q, vec![s(id), s(tenant)], rows::node_pool).await
    }

    async fn node_pool_get_any(&self, id: &NodePoolId) -> StoreResult<Option<NodePool>> {
        let q = format!("SELECT {NODE_POOL} FROM node_pools WHERE node_pool_id = ?");
        self.one(&q, vec![s(id)], rows::node_pool).await
    }

    async fn node_pool_list(
        &self,
        tenant: &TenantId,
        cluster_id: &ClusterId,
        scope: &ReadScope,
        include_deleted: bool,
        page: &PageRequest<NodePoolId>,
    ) -> StoreResult<Page<NodePool, NodePoolId>> {
        let mut q =
            format!("SELECT {NODE_POOL} FROM node_pools WHERE cluster_id = ? AND tenant_id = ?");
        let mut v = vec![s(cluster_id), s(tenant)];
        if !include_deleted {
            q.push_str(" AND state <> 'deleted'");
        }
        let alts = scoped(scope, |g| {
            vec![
                ("node_pool_id IN ({})", ids(&g.node_pools)),
                ("cluster_id IN ({})", ids(&g.clusters)),
                (
                    "EXISTS (SELECT 1 FROM kubernetes_clusters c \
                     WHERE c.cluster_id = node_pools.cluster_id \
                     AND c.provider_account_id IN ({}))",
                    ids(&g.accounts),
                ),
            ]
        });
        if !restrict(&mut q, &mut v, alts) {
            return Ok(empty());
        }
        self.page(&q, v, "node_pool_id", page, rows::node_pool, node_pool_key).await
    }

    async fn node_pool_list_by_cluster(
        &self,
        cluster_id: &ClusterId,
        page: &PageRequest<NodePoolId>,
    ) -> StoreResult<Page<NodePool, NodePoolId>> {
        let q = format!(
            "SELECT {NODE_POOL} FROM node_pools WHERE cluster_id = ? AND state <> 'deleted'"
        );
        self.page(&q, vec![s(cluster_id)], "node_pool_id", page, rows::node_pool, node_pool_key)
            .await
    }

    async fn node_pool_sweep(
        &self,
        page: &PageRequest<NodePoolId>,
    ) -> StoreResult<Page<NodePool, NodePoolId>> {
        let q = format!("SELECT {NODE_POOL} FROM node_pools WHERE state <> 'deleted'");
        self.page(&q, vec![], "node_pool_id", page, rows::node_pool, node_pool_key).await
    }
}

fn load_balancer_key(l: &LoadBalancer) -> LoadBalancerId {
    l.load_balancer_id.clone()
}

#[async_trait]
impl LoadBalancerRepo for SqlStore {
    async fn load_balancer_get(
        &self,
        tenant: &TenantId,
        id: &LoadBalancerId,
    ) -> StoreResult<Option<LoadBalancer>> {
        let q = format!(
            "SELECT {LOAD_BALANCER} FROM load_balancers WHERE load_balancer_id = ? AND tenant_id = ?"
        );
        self.one(&q, vec![s(id), s(tenant)], rows::load_balancer).await
    }

    async fn load_balancer_get_any(
        &self,
        id: &LoadBalancerId,
    ) -> StoreResult<Option<LoadBalancer>> {
        // Every activation of a load balancer starts here: grouped (`crate::group`).
        let how = PointRead {
            table: "load_balancers",
            columns: LOAD_BALANCER,
            within: None,
            key: "load_balancer_id",
            decode: rows::load_balancer,
            key_of: |l| l.load_balancer_id.to_string(),
        };
        self.read_grouped(&self.groups.load_balancers, how, id.to_string()).await
    }

    async fn load_balancer_list(
        &self,
        tenant: &TenantId,
        scope: &ReadScope,
        filter: &LoadBalancerFilter,
        page: &PageRequest<LoadBalancerId>,
    ) -> StoreResult<Page<LoadBalancer, LoadBalancerId>> {
        let mut q = format!("SELECT {LOAD_BALANCER} FROM load_balancers WHERE tenant_id = ?");
        let mut v = vec![s(tenant)];
        if let Some(p) = &filter.pool_id {
            q.push_str(" AND pool_id = ?");
            v.push(s(p));
        }
        if let Some(a) = &filter.provider_account_id {
            q.push_str(" AND provider_account_id = ?");
            v.push(s(a));
        }
        if !filter.include_deleted {
            q.push_str(" AND deleted_at IS NULL");
        }
        let alts = scoped(scope, |g| {
            vec![
                ("load_balancer_id IN ({})", ids(&g.load_balancers)),
                ("provider_account_id IN ({})", ids(&g.accounts)),
            ]
        });
        if !restrict(&mut q, &mut v, alts) {
            return Ok(empty());
        }
        self.page(&q, v, "load_balancer_id", page, rows::load_balancer, load_balancer_key).await
    }

    async fn load_balancer_find_by_provider_id(
        &self,
        account: &ProviderAccountId,
        provider_load_balancer_id: &str,
    ) -> StoreResult<Option<LoadBalancer>> {
        // Prefer the live row if a deleted one ever carried the same provider id.
        let q = format!(
            "SELECT {LOAD_BALANCER} FROM load_balancers WHERE provider_account_id = ? \
             AND provider_load_balancer_id = ? \
             ORDER BY CASE WHEN deleted_at IS NULL THEN 0 ELSE 1 END, load_balancer_id LIMIT 1"
        );
        self.one(&q, vec![s(account), s(provider_load_balancer_id)], rows::load_balancer).await
    }

    async fn load_balancer_count_live_by_account(
        &self,
        account: &ProviderAccountId,
    ) -> StoreResult<u64> {
        let q = "SELECT COUNT(*) AS n FROM load_balancers \
                 WHERE provider_account_id = ? AND deleted_at IS NULL";
        self.count(q, vec![s(account)]).await
    }

    async fn load_balancer_sweep(
        &self,
        page: &PageRequest<LoadBalancerId>,
    ) -> StoreResult<Page<LoadBalancer, LoadBalancerId>> {
        let q = format!("SELECT {LOAD_BALANCER} FROM load_balancers WHERE deleted_at IS NULL");
        self.page(&q, vec![], "load_balancer_id", page, rows::load_balancer, load_balancer_key)
            .await
    }

    async fn load_balancer_list_by_account(
        &self,
        account: &ProviderAccountId,
        page: &PageRequest<LoadBalancerId>,
    ) -> StoreResult<Page<LoadBalancer, LoadBalancerId>> {
        let q = format!(
            "SELECT {LOAD_BALANCER} FROM load_balancers \
             WHERE provider_account_id = ? AND deleted_at IS NULL"
        );
        let v = vec![s(account)];
        self.page(&q, v, "load_balancer_id", page, rows::load_balancer, load_balancer_key).await
    }
}

#[async_trait]
impl AgentRepo for SqlStore {
    async fn node_get(&self, id: &NodeId) -> StoreResult<Option<Node>> {
        let q = format!("SELECT {NODE} FROM nodes WHERE node_id = ?");
        self.one(&q, vec![s(id)], rows::node).await
    }

    async fn node_find_by_name(
        &self,
        pool_id: &PoolId,
        node_name: &str,
    ) -> StoreResult<Option<Node>> {
        let q = format!("SELECT {NODE} FROM nodes WHERE pool_id = ? AND node_name = ?");
        self.one(&q, vec![s(pool_id), s(node_name)], rows::node).await
    }

    async fn node_find_by_credential_hash(&self, hash: &str) -> StoreResult<Option<Node>> {
        let q = format!(
            "SELECT {NODE} FROM nodes WHERE credential_hash = ? AND ended_at IS NULL ORDER BY node_id LIMIT 1"
        );
        self.one(&q, vec![s(hash)], rows::node).await
    }

    async fn node_list_by_pool(
        &self,
        pool_id: &PoolId,
        page: &PageRequest<NodeId>,
    ) -> StoreResult<Page<Node, NodeId>> {
        let q = format!("SELECT {NODE} FROM nodes WHERE pool_id = ? AND ended_at IS NULL");
        self.page(&q, vec![s(pool_id)], "node_id", page, rows::node, |n| n.node_id.clone()).await
    }

    async fn join_token_find(&self, hash: &str) -> StoreResult<Option<JoinToken>> {
        let q = format!(
            "SELECT {JOIN_TOKEN} FROM join_tokens WHERE token_hash = ? AND revoked_at IS NULL"
        );
        self.one(&q, vec![s(hash)], rows::join_token).await
    }

    async fn api_token_find(&self, hash: &str) -> StoreResult<Option<ApiToken>> {
        let q = format!("SELECT {API_TOKEN} FROM api_tokens WHERE token_hash = ?");
        self.one(&q, vec![s(hash)], rows::api_token).await
    }

    async fn api_token_get(&self, id: &TokenId) -> StoreResult<Option<ApiToken>> {
        let q = format!("SELECT {API_TOKEN} FROM api_tokens WHERE token_id = ?");
        self.one(&q, vec![s(id)], rows::api_token).await
    }

    async fn api_token_sweep(
        &self,
        page: &PageRequest<TokenId>,
    ) -> StoreResult<Page<ApiToken, TokenId>> {
        // Every row: `1 = 1` only gives the paging clause its `AND`.
        let q = format!("SELECT {API_TOKEN} FROM api_tokens WHERE 1 = 1");
        self.page(&q, vec![], "token_id", page, rows::api_token, |t| t.token_id.clone()).await
    }
}

#[async_trait]
impl BookingRepo for SqlStore {
    async fn booking_get(&self, tenant: &TenantId, id: &BookingId) -> StoreResult<Option<Booking>> {
        let q = format!("SELECT {BOOKING} FROM bookings WHERE booking_id = ? AND tenant_id = ?");
        self.one(&q, vec![s(id), s(tenant)], rows::booking).await
    }

    async fn booking_list(
        &self,
        tenant: &TenantId,
        pool_id: &PoolId,
        state: Option<BookingState>,
        now: Timestamp,
        page: &PageRequest<BookingId>,
    ) -> StoreResult<Page<Booking, BookingId>> {
        let mut q = format!("SELECT {BOOKING} FROM bookings WHERE pool_id = ? AND tenant_id = ?");
        let mut v = vec![s(pool_id), s(tenant)];
        // `rules::drain::booking_is_active` in SQL: stored active and not past `endsAt`
        // (a booking ending at `now` has ended).
        match state {
            None => {}
            Some(BookingState::Active) => {
                q.push_str(" AND state = 'active' AND (ends_at IS NULL OR ends_at > ?)");
                v.push(ts(now));
            }
            Some(BookingState::Ended) => {
                q.push_str(" AND (state <> 'active' OR ends_at <= ?)");
                v.push(ts(now));
            }
        }
        self.page(&q, v, "booking_id", page, rows::booking, |b| b.booking_id.clone()).await
    }

    async fn booking_count_active(&self, pool_id: &PoolId, now: Timestamp) -> StoreResult<u64> {
        let q = "SELECT COUNT(*) AS n FROM bookings WHERE pool_id = ? AND state = 'active' \
                 AND (ends_at IS NULL OR ends_at > ?)";
        self.count(q, vec![s(pool_id), ts(now)]).await
    }
}

#[async_trait]
impl LedgerRepo for SqlStore {
    async fn billing_list(
        &self,
        tenant: &TenantId,
        from: Timestamp,
        to: Timestamp,
        meter: Option<&str>,
        page: &PageRequest<u64>,
    ) -> StoreResult<Page<BillingInterval, u64>> {
        // Overlap of [start, end) with [from, to); an open interval extends to infinity.
        let mut q = format!(
            "SELECT {BILLING} FROM billing_intervals WHERE tenant_id = ? AND start_at < ? \
             AND (end_at IS NULL OR end_at > ?)"
        );
        let mut v = vec![s(tenant), ts(to), ts(from)];
        if let Some(m) = meter {
            q.push_str(" AND meter = ?");
            v.push(s(m));
        }
        let numbered = self.page(&q, v, "interval_id", page, rows::billing, |(n, _)| *n).await?;
        Ok(Page {
            items: numbered.items.into_iter().map(|(_, interval)| interval).collect(),
            next: numbered.next.map(|c| PageCursor::after(*c.key())),
        })
    }

    async fn event_list(
        &self,
        tenant: &TenantId,
        subject: Option<&str>,
        after_seq: u64,
        limit: u32,
    ) -> StoreResult<Vec<Event>> {
        let mut q = format!("SELECT {EVENT} FROM events WHERE tenant_id = ? AND seq > ?");
        let mut v = vec![s(tenant), u64v(after_seq)?];
        if let Some(sub) = subject {
            q.push_str(" AND subject = ?");
            v.push(s(sub));
        }
        q.push_str(" ORDER BY seq LIMIT ?");
        v.push(Value::from(i64::from(limit)));
        self.all(&q, v, rows::event).await
    }

    async fn event_list_all(&self, after_seq: u64, limit: u32) -> StoreResult<Vec<Event>> {
        let q = format!("SELECT {EVENT} FROM events WHERE seq > ? ORDER BY seq LIMIT ?");
        self.all(&q, vec![u64v(after_seq)?, Value::from(i64::from(limit))], rows::event).await
    }

    async fn relay_cursor(&self, publisher: &str) -> StoreResult<u64> {
        let q = "SELECT last_seq AS n FROM relay_cursors WHERE publisher = ?";
        self.count(q, vec![s(publisher)]).await
    }

    async fn idempotency_get(
        &self,
        tenant: &TenantId,
        method: &str,
        request_id: &str,
        now: Timestamp,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        let expired = idempotency::expired_at_or_before(now);
        if !self.grouped {
            let q = format!(
                "SELECT {IDEMPOTENCY} FROM idempotency \
                 WHERE tenant_id = ? AND method = ? AND request_id = ? AND created_at > ?"
            );
            let v = vec![s(tenant), s(method), s(request_id), ts(expired)];
            return self.one(&q, v, rows::idempotency).await;
        }
        // Every create with a `requestId` reads it first: grouped (`crate::group`), each
        // caller holding the record to its own `now`.
        let key = (tenant.to_string(), method.to_owned(), request_id.to_owned());
        let store = self.clone();
        let run = move |keys: Vec<IdempotencyKey>| {
            let store = store.clone();
            async move { store.idempotency_batch(keys).await }
        };
        let found = self.groups.idempotency.call(key, run).await;
        let record = found.unwrap_or_else(|| Err(crate::store::interrupted()))?;
        Ok(record.filter(|r| r.created_at > expired))
    }

    async fn idempotency_purge(&self, before: Timestamp) -> StoreResult<u64> {
        let st = self.st("DELETE FROM idempotency WHERE created_at < ?", vec![sql::ts(before)]);
        self.write("idempotency_purge", || async {
            self.counters.checkout();
            Ok(crate::store::exec(&self.db, st.clone()).await?)
        })
        .await
    }
}
