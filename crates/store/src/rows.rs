//! Row decoders: one function per record turning a result row into a bc-domain value,
//! with the column list each `SELECT` uses.
//!
//! Invariant: the column lists here and the decoders agree by construction (each
//! decoder reads exactly the columns of its list), so a query can never select one shape
//! and decode another.

use bc_domain::model::{
    ApiToken, BillingInterval, Booking, ClusterNodes, Event, IdempotencyRecord, JoinToken,
    KubernetesCluster, LoadBalancer, Node, NodePool, ObservedStatus, Pool, ProviderAccount, Quota,
    SealedSecret, Substrate,
};
use bc_domain::ports::{Lease, WorkItem, WorkKind};
use bc_domain::{StoreError, TenantId};
use sea_orm::QueryResult;

use crate::sql::Row;

type R<T> = Result<T, StoreError>;

/// Columns of `pools`.
pub(crate) const POOL: &str =
    "pool_id, tenant_id, name, policy, state, generation, created_at, updated_at, archived_at";

pub(crate) fn pool(q: &QueryResult) -> R<Pool> {
    let r = Row(q);
    Ok(Pool {
        pool_id: r.parse("pool_id")?,
        tenant_id: r.parse("tenant_id")?,
        name: r.parse("name")?,
        policy: r.json("policy")?,
        state: r.enumv("state")?,
        generation: r.u64("generation")?,
        created_at: r.ts("created_at")?,
        updated_at: r.ts("updated_at")?,
        archived_at: r.opt_ts("archived_at")?,
    })
}

/// Columns of `quotas`.
pub(crate) const QUOTA: &str = "resource, quota_limit, used";

pub(crate) fn quota(q: &QueryResult) -> R<Quota> {
    let r = Row(q);
    let name = r.string("resource")?;
    let resource = bc_domain::model::QuotaResource::parse(&name)
        .ok_or_else(|| StoreError::internal(format!("unknown quota resource {name:?}")))?;
    Ok(Quota { resource, limit: r.u32("quota_limit")?, used: r.u32("used")? })
}

/// Columns of `provider_accounts`.
pub(crate) const ACCOUNT: &str = "provider_account_id, tenant_id, provider, name, project_id, credentials, created_at, deleted_at";

pub(crate) fn account(q: &QueryResult) -> R<ProviderAccount> {
    let r = Row(q);
    Ok(ProviderAccount {
        provider_account_id: r.parse("provider_account_id")?,
        tenant_id: r.parse("tenant_id")?,
        provider: r.enumv("provider")?,
        name: r.parse("name")?,
        project_id: r.opt_string("project_id")?,
        credentials: SealedSecret(r.bytes("credentials")?),
        created_at: r.ts("created_at")?,
        deleted_at: r.opt_ts("deleted_at")?,
    })
}

/// Columns of `substrates`.
pub(crate) const SUBSTRATE: &str = "pool_id, tenant_id, provider_account_id, mode, cluster_id, \
     state, message, nodes_listed, nodes_joined, waiting_to_join, upgrade, observed_generation, \
     refused_generation, created_at, updated_at";

pub(crate) fn substrate(q: &QueryResult) -> R<Substrate> {
    let r = Row(q);
    Ok(Substrate {
        pool_id: r.parse("pool_id")?,
        tenant_id: r.parse("tenant_id")?,
        provider_account_id: r.parse("provider_account_id")?,
        mode: r.enumv("mode")?,
        cluster_id: r.opt_parse("cluster_id")?,
        state: r.enumv("state")?,
        message: r.opt_string("message")?,
        nodes_listed: r.u32("nodes_listed")?,
        nodes_joined: r.u32("nodes_joined")?,
        waiting_to_join: r.opt_json("waiting_to_join")?,
        upgrade: r.opt_json("upgrade")?,
        observed_generation: r.u64("observed_generation")?,
        refused_generation: r.opt_u64("refused_generation")?,
        created_at: r.ts("created_at")?,
        updated_at: r.ts("updated_at")?,
    })
}

/// Columns of `kubernetes_clusters`.
pub(crate) const CLUSTER: &str = "cluster_id, tenant_id, provider_account_id, name, region, \
     desired_version, high_availability, mode, origin, substrate_pool_ids, delete_requested, \
     generation, created_at, provider_cluster_id, running_version, state, message, observed_generation, \
     updated_at, nodes_listed, nodes_ready";

fn status(r: &Row<'_>) -> R<ObservedStatus> {
    Ok(ObservedStatus {
        state: r.enumv("state")?,
        message: r.opt_string("message")?,
        observed_generation: r.u64("observed_generation")?,
        updated_at: r.ts("updated_at")?,
    })
}

pub(crate) fn cluster(q: &QueryResult) -> R<KubernetesCluster> {
    let r = Row(q);
    Ok(KubernetesCluster {
        cluster_id: r.parse("cluster_id")?,
        tenant_id: r.parse("tenant_id")?,
        provider_account_id: r.parse("provider_account_id")?,
        name: r.parse("name")?,
        region: r.string("region")?,
        desired_version: r.opt_string("desired_version")?,
        high_availability: r.bool("high_availability")?,
        mode: r.enumv("mode")?,
        origin: r.enumv("origin")?,
        substrate_pool_ids: r.json("substrate_pool_ids")?,
        delete_requested: r.bool("delete_requested")?,
        generation: r.u64("generation")?,
        created_at: r.ts("created_at")?,
        provider_cluster_id: r.opt_string("provider_cluster_id")?,
        version: r.opt_string("running_version")?,
        nodes: match (r.opt_u64("nodes_listed")?, r.opt_u64("nodes_ready")?) {
            (Some(listed), Some(ready)) => Some(ClusterNodes {
                listed: u32::try_from(listed).unwrap_or(u32::MAX),
                ready: u32::try_from(ready).unwrap_or(u32::MAX),
            }),
            _ => None,
        },
        status: status(&r)?,
    })
}

/// Columns of `node_pools`.
pub(crate) const NODE_POOL: &str = "node_pool_id, cluster_id, tenant_id, name, size, scale, \
     labels, taints, managed_by, origin, delete_requested, generation, created_at, \
     provider_node_pool_id, nodes_listed, \
     nodes_ready, state, message, observed_generation, updated_at";

pub(crate) fn node_pool(q: &QueryResult) -> R<NodePool> {
    let r = Row(q);
    Ok(NodePool {
        node_pool_id: r.parse("node_pool_id")?,
        cluster_id: r.parse("cluster_id")?,
        tenant_id: r.parse("tenant_id")?,
        name: r.string("name")?,
        size: r.string("size")?,
        scale: r.json("scale")?,
        labels: r.json("labels")?,
        taints: r.json("taints")?,
        managed_by: r.opt_parse("managed_by")?,
        origin: r.enumv("origin")?,
        delete_requested: r.bool("delete_requested")?,
        generation: r.u64("generation")?,
        created_at: r.ts("created_at")?,
        provider_node_pool_id: r.opt_string("provider_node_pool_id")?,
        nodes_listed: r.u32("nodes_listed")?,
        nodes_ready: r.u32("nodes_ready")?,
        state: r.enumv("state")?,
        message: r.opt_string("message")?,
        observed_generation: r.u64("observed_generation")?,
        updated_at: r.ts("updated_at")?,
    })
}

/// Columns of `load_balancers`.
pub(crate) const LOAD_BALANCER: &str = "load_balancer_id, tenant_id, pool_id, \
     provider_account_id, name, spec, generation, created_at, delete_requested, \
     provider_load_balancer_id, ip, state, message, observed_generation, updated_at, ready_at, \
     deleted_at, quota_released";

pub(crate) fn load_balancer(q: &QueryResult) -> R<LoadBalancer> {
    let r = Row(q);
    Ok(LoadBalancer {
        load_balancer_id: r.parse("load_balancer_id")?,
        tenant_id: r.parse("tenant_id")?,
        pool_id: r.parse("pool_id")?,
        provider_account_id: r.parse("provider_account_id")?,
        name: r.parse("name")?,
        spec: r.json("spec")?,
        generation: r.u64("generation")?,
        created_at: r.ts("created_at")?,
        delete_requested: r.bool("delete_requested")?,
        provider_load_balancer_id: r.opt_string("provider_load_balancer_id")?,
        ip: r.opt_string("ip")?,
        status: status(&r)?,
        ready_at: r.opt_ts("ready_at")?,
        deleted_at: r.opt_ts("deleted_at")?,
        quota_released: r.bool("quota_released")?,
    })
}

/// Columns of `nodes`.
pub(crate) const NODE: &str = "node_id, pool_id, node_name, provider_node_id, bcd_version, \
     credential_hash, joined_at, last_heartbeat_at";

pub(crate) fn node(q: &QueryResult) -> R<Node> {
    let r = Row(q);
    Ok(Node {
        node_id: r.parse("node_id")?,
        pool_id: r.parse("pool_id")?,
        node_name: r.string("node_name")?,
        provider_node_id: r.opt_string("provider_node_id")?,
        bcd_version: r.string("bcd_version")?,
        credential_hash: r.string("credential_hash")?,
        joined_at: r.ts("joined_at")?,
        last_heartbeat_at: r.opt_ts("last_heartbeat_at")?,
    })
}

/// Columns of `bookings`.
pub(crate) const BOOKING: &str =
    "booking_id, tenant_id, pool_id, node_name, state, created_at, ends_at, ended_at";

pub(crate) fn booking(q: &QueryResult) -> R<Booking> {
    let r = Row(q);
    Ok(Booking {
        booking_id: r.parse("booking_id")?,
        tenant_id: r.parse("tenant_id")?,
        pool_id: r.parse("pool_id")?,
        node_name: r.opt_string("node_name")?,
        state: r.enumv("state")?,
        created_at: r.ts("created_at")?,
        ends_at: r.opt_ts("ends_at")?,
        ended_at: r.opt_ts("ended_at")?,
    })
}

/// Columns of `join_tokens`.
pub(crate) const JOIN_TOKEN: &str = "pool_id, token_hash, created_at, revoked_at";

pub(crate) fn join_token(q: &QueryResult) -> R<JoinToken> {
    let r = Row(q);
    Ok(JoinToken {
        pool_id: r.parse("pool_id")?,
        token_hash: r.string("token_hash")?,
        created_at: r.ts("created_at")?,
        revoked_at: r.opt_ts("revoked_at")?,
    })
}

/// Columns of `api_tokens`.
pub(crate) const API_TOKEN: &str = "token_id, token_hash, grants, created_at, revoked_at";

pub(crate) fn api_token(q: &QueryResult) -> R<ApiToken> {
    let r = Row(q);
    Ok(ApiToken {
        token_id: r.parse("token_id")?,
        token_hash: r.string("token_hash")?,
        grants: r.json("grants")?,
        created_at: r.ts("created_at")?,
        revoked_at: r.opt_ts("revoked_at")?,
    })
}

/// Columns of `billing_intervals` (with the interval number, the page key).
pub(crate) const BILLING: &str =
    "interval_id, meter, resource, tenant_id, pool_id, start_at, end_at";

/// An interval and its number.
pub(crate) fn billing(q: &QueryResult) -> R<(u64, BillingInterval)> {
    let r = Row(q);
    let interval = BillingInterval {
        meter: r.string("meter")?,
        resource: r.string("resource")?,
        tenant_id: r.parse("tenant_id")?,
        pool_id: r.parse("pool_id")?,
        start: r.ts("start_at")?,
        end: r.opt_ts("end_at")?,
    };
    Ok((r.u64("interval_id")?, interval))
}

/// Columns of `events`.
pub(crate) const EVENT: &str = "seq, event_id, tenant_id, subject, kind, time_ms, data";

pub(crate) fn event(q: &QueryResult) -> R<Event> {
    let r = Row(q);
    Ok(Event {
        event_id: r.parse("event_id")?,
        seq: r.u64("seq")?,
        tenant_id: r.parse("tenant_id")?,
        subject: r.string("subject")?,
        kind: r.string("kind")?,
        time: r.ts("time_ms")?,
        data: r.json("data")?,
    })
}

/// Columns of `idempotency`.
pub(crate) const IDEMPOTENCY: &str =
    "tenant_id, method, request_id, body_hash, response, created_at";

pub(crate) fn idempotency(q: &QueryResult) -> R<IdempotencyRecord> {
    let r = Row(q);
    Ok(IdempotencyRecord {
        tenant_id: r.parse::<TenantId>("tenant_id")?,
        method: r.string("method")?,
        request_id: r.string("request_id")?,
        body_hash: r.string("body_hash")?,
        response: r.json("response")?,
        created_at: r.ts("created_at")?,
    })
}

/// Columns of `work_queue`.
pub(crate) const WORK: &str =
    "kind, item_key, not_before, attempts, lease_owner, lease_until, last_error";

pub(crate) fn work(q: &QueryResult) -> R<WorkItem> {
    let r = Row(q);
    let kind = r.string("kind")?;
    Ok(WorkItem {
        kind: WorkKind::parse(&kind)
            .ok_or_else(|| StoreError::internal(format!("unknown work kind {kind:?}")))?,
        key: r.string("item_key")?,
        not_before: r.ts("not_before")?,
        attempts: r.u32("attempts")?,
        lease_owner: r.opt_string("lease_owner")?,
        lease_until: r.opt_ts("lease_until")?,
        last_error: r.opt_string("last_error")?,
    })
}

/// Columns of `leases`.
pub(crate) const LEASE: &str = "name, owner, lease_until";

pub(crate) fn lease(q: &QueryResult) -> R<Lease> {
    let r = Row(q);
    Ok(Lease { name: r.string("name")?, owner: r.string("owner")?, until: r.ts("lease_until")? })
}
