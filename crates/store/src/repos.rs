//! The read repositories of the `Store` port on `SqlStore`.
//!
//! Invariant: every method is one indexed query — a key probe, or a page bounded by
//! `LIMIT` over an index ordered by id (see the migrations) — so none scans a table to
//! find a row.

use async_trait::async_trait;
use bc_domain::model::{
    ApiToken, BillingInterval, Booking, Event, IdempotencyRecord, JoinToken, KubernetesCluster,
    LoadBalancer, Node, NodePool, Pool, PoolState, ProviderAccount, Quota, QuotaResource,
    Substrate,
};
use bc_domain::ports::{
    AccountRepo, AgentRepo, BookingRepo, ClusterRepo, LedgerRepo, LoadBalancerFilter,
    LoadBalancerRepo, Page, PageRequest, PoolRepo, StoreResult, SubstrateRepo,
};
use bc_domain::{
    BookingId, ClusterId, LoadBalancerId, NodeId, NodePoolId, ObjectName, PoolId,
    ProviderAccountId, TenantId, Timestamp, TokenId,
};
use sea_orm::Value;

use crate::rows::{self, *};
use crate::sql::{self, enum_text, s, ts, u64v};
use crate::store::SqlStore;

#[async_trait]
impl PoolRepo for SqlStore {
    async fn pool_get(&self, pool_id: &PoolId) -> StoreResult<Option<Pool>> {
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
        include_archived: bool,
        page: &PageRequest,
    ) -> StoreResult<Page<Pool>> {
        let mut q = format!("SELECT {POOL} FROM pools WHERE tenant_id = ?");
        let mut v = vec![s(tenant)];
        if !include_archived {
            q.push_str(" AND state = ?");
            v.push(s(enum_text(&PoolState::Active)?));
        }
        self.page(&q, v, "pool_id", page, rows::pool, |p| p.pool_id.to_string()).await
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
    async fn account_get(&self, id: &ProviderAccountId) -> StoreResult<Option<ProviderAccount>> {
        let q = format!("SELECT {ACCOUNT} FROM provider_accounts WHERE provider_account_id = ?");
        self.one(&q, vec![s(id)], rows::account).await
    }

    async fn account_list(
        &self,
        tenant: &TenantId,
        page: &PageRequest,
    ) -> StoreResult<Page<ProviderAccount>> {
        let q = format!(
            "SELECT {ACCOUNT} FROM provider_accounts WHERE tenant_id = ? AND deleted_at IS NULL"
        );
        self.page(&q, vec![s(tenant)], "provider_account_id", page, rows::account, |a| {
            a.provider_account_id.to_string()
        })
        .await
    }
}

#[async_trait]
impl SubstrateRepo for SqlStore {
    async fn substrate_get(&self, pool_id: &PoolId) -> StoreResult<Option<Substrate>> {
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
}

#[async_trait]
impl ClusterRepo for SqlStore {
    async fn cluster_get(&self, id: &ClusterId) -> StoreResult<Option<KubernetesCluster>> {
        let q = format!("SELECT {CLUSTER} FROM kubernetes_clusters WHERE cluster_id = ?");
        self.one(&q, vec![s(id)], rows::cluster).await
    }

    async fn cluster_list(
        &self,
        tenant: &TenantId,
        account: Option<&ProviderAccountId>,
        page: &PageRequest,
    ) -> StoreResult<Page<KubernetesCluster>> {
        let mut q = format!("SELECT {CLUSTER} FROM kubernetes_clusters WHERE tenant_id = ?");
        let mut v = vec![s(tenant)];
        if let Some(a) = account {
            q.push_str(" AND provider_account_id = ?");
            v.push(s(a));
        }
        self.page(&q, v, "cluster_id", page, rows::cluster, |c| c.cluster_id.to_string()).await
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

    async fn node_pool_get(&self, id: &NodePoolId) -> StoreResult<Option<NodePool>> {
        let q = format!("SELECT {NODE_POOL} FROM node_pools WHERE node_pool_id = ?");
        self.one(&q, vec![s(id)], rows::node_pool).await
    }

    async fn node_pool_list_by_cluster(
        &self,
        cluster_id: &ClusterId,
        page: &PageRequest,
    ) -> StoreResult<Page<NodePool>> {
        let q = format!("SELECT {NODE_POOL} FROM node_pools WHERE cluster_id = ?");
        self.page(&q, vec![s(cluster_id)], "node_pool_id", page, rows::node_pool, |n| {
            n.node_pool_id.to_string()
        })
        .await
    }
}

#[async_trait]
impl LoadBalancerRepo for SqlStore {
    async fn load_balancer_get(&self, id: &LoadBalancerId) -> StoreResult<Option<LoadBalancer>> {
        let q = format!("SELECT {LOAD_BALANCER} FROM load_balancers WHERE load_balancer_id = ?");
        self.one(&q, vec![s(id)], rows::load_balancer).await
    }

    async fn load_balancer_list(
        &self,
        tenant: &TenantId,
        filter: &LoadBalancerFilter,
        page: &PageRequest,
    ) -> StoreResult<Page<LoadBalancer>> {
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
        self.page(&q, v, "load_balancer_id", page, rows::load_balancer, |l| {
            l.load_balancer_id.to_string()
        })
        .await
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
        let q =
            format!("SELECT {NODE} FROM nodes WHERE credential_hash = ? ORDER BY node_id LIMIT 1");
        self.one(&q, vec![s(hash)], rows::node).await
    }

    async fn node_list_by_pool(
        &self,
        pool_id: &PoolId,
        page: &PageRequest,
    ) -> StoreResult<Page<Node>> {
        let q = format!("SELECT {NODE} FROM nodes WHERE pool_id = ?");
        self.page(&q, vec![s(pool_id)], "node_id", page, rows::node, |n| n.node_id.to_string())
            .await
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
}

#[async_trait]
impl BookingRepo for SqlStore {
    async fn booking_get(&self, id: &BookingId) -> StoreResult<Option<Booking>> {
        let q = format!("SELECT {BOOKING} FROM bookings WHERE booking_id = ?");
        self.one(&q, vec![s(id)], rows::booking).await
    }

    async fn booking_list(
        &self,
        pool_id: &PoolId,
        page: &PageRequest,
    ) -> StoreResult<Page<Booking>> {
        let q = format!("SELECT {BOOKING} FROM bookings WHERE pool_id = ?");
        self.page(&q, vec![s(pool_id)], "booking_id", page, rows::booking, |b| {
            b.booking_id.to_string()
        })
        .await
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
    ) -> StoreResult<Vec<BillingInterval>> {
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
        q.push_str(" ORDER BY start_at, interval_id");
        self.all(&q, v, rows::billing).await
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

    async fn idempotency_get(
        &self,
        tenant: &TenantId,
        method: &str,
        request_id: &str,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        let q = format!(
            "SELECT {IDEMPOTENCY} FROM idempotency \
             WHERE tenant_id = ? AND method = ? AND request_id = ?"
        );
        self.one(&q, vec![s(tenant), s(method), s(request_id)], rows::idempotency).await
    }

    async fn idempotency_purge(&self, before: Timestamp) -> StoreResult<u64> {
        let st = self.st("DELETE FROM idempotency WHERE created_at < ?", vec![sql::ts(before)]);
        self.write("idempotency_purge", || async {
            Ok(crate::store::exec(&self.db, st.clone()).await?)
        })
        .await
    }
}
