//! `Store::commit`: one transaction applying a unit of work — its writes in order, its
//! work-queue entries, then its events.
//!
//! Invariant: all of it or none of it. Every condition (generation CAS, free name, quota
//! unit, existing row) is a `WHERE` clause or constraint of the statement that writes, so
//! no read-then-write race exists; the first failing condition rolls everything back.
//! Event `seq`s are assigned in commit order: on PostgreSQL the insert happens under a
//! transaction-scoped advisory lock held to commit, because a sequence alone hands out
//! numbers in insert order, and a relay reading `seq > last` could otherwise skip an event
//! whose transaction committed after a later-numbered one; SQLite has a single writer.

use bc_domain::StoreError;
use bc_domain::model::{NewEvent, PoolState, QuotaResource};
use bc_domain::ports::{Committed, Enqueue, UnitOfWork, Write};
use bc_domain::{PoolId, ResourceState};
use sea_orm::{ConnectionTrait, DatabaseTransaction, DbBackend, Value};

use crate::error::{TxError, conflict};
use crate::sql::{self, Row, enum_text, json, os, ots, s, ts, u64v};
use crate::store::{SqlStore, exec};

/// The advisory lock key that orders event inserts on PostgreSQL ("bc-event" in ASCII).
const EVENT_LOCK_KEY: i64 = 0x6263_2d65_7665_6e74;

type Tx<T> = Result<T, TxError>;

impl SqlStore {
    /// Applies `uow` atomically, retrying the whole transaction on transient errors.
    pub(crate) async fn commit_uow(&self, uow: &UnitOfWork) -> Result<Committed, StoreError> {
        self.write("commit", || async {
            let txn = self.begin().await?;
            let r = self.apply(&txn, uow).await;
            Self::finish(txn, r).await
        })
        .await
    }

    async fn apply(&self, txn: &DatabaseTransaction, uow: &UnitOfWork) -> Tx<Committed> {
        for w in &uow.writes {
            self.apply_write(txn, w).await?;
        }
        for e in &uow.enqueue {
            self.enqueue_on(txn, e).await?;
        }
        let mut event_seqs = Vec::with_capacity(uow.events.len());
        if !uow.events.is_empty() && self.backend == DbBackend::Postgres {
            let lock =
                self.st("SELECT pg_advisory_xact_lock(?)", vec![Value::from(EVENT_LOCK_KEY)]);
            exec(txn, lock).await?;
        }
        for e in &uow.events {
            event_seqs.push(self.insert_event(txn, e).await?);
        }
        Ok(Committed { event_seqs })
    }

    async fn insert_event(&self, txn: &DatabaseTransaction, e: &NewEvent) -> Tx<u64> {
        let st = self.st(
            "INSERT INTO events (event_id, tenant_id, subject, kind, time_ms, data) \
             VALUES (?, ?, ?, ?, ?, ?) RETURNING seq",
            vec![
                s(&e.event_id),
                s(&e.tenant_id),
                s(&e.subject),
                s(&e.kind),
                ts(e.time),
                json(&e.data)?,
            ],
        );
        let row = txn
            .query_one_raw(st)
            .await
            .map_err(conflict(|| format!("event {}", e.event_id), "event"))?
            .ok_or_else(|| StoreError::Internal("INSERT … RETURNING gave no row".into()))?;
        Ok(Row(&row).u64("seq")?)
    }

    /// Adds or merges a queue entry inside `txn` (see `crate::queue` for the semantics).
    pub(crate) async fn enqueue_on(&self, txn: &impl ConnectionTrait, e: &Enqueue) -> Tx<()> {
        let least = sql::least(self.backend);
        let st = self.st(
            &format!(
                "INSERT INTO work_queue \
                 (kind, item_key, not_before, attempts, lease_owner, lease_until, last_error, requeued) \
                 VALUES (?, ?, ?, 0, NULL, NULL, NULL, FALSE) \
                 ON CONFLICT (kind, item_key) DO UPDATE SET \
                 not_before = {least}(work_queue.not_before, excluded.not_before), \
                 requeued = (work_queue.lease_owner IS NOT NULL)"
            ),
            vec![s(&e.kind), s(&e.key), ts(e.not_before)],
        );
        exec(txn, st).await?;
        Ok(())
    }

    /// Runs one conditional write; `Err` aborts the unit of work.
    async fn apply_write(&self, txn: &DatabaseTransaction, w: &Write) -> Tx<()> {
        match w {
            Write::InsertPool(p) => {
                let active = (p.state == PoolState::Active).then(|| p.name.to_string());
                let st = self.st(
                    "INSERT INTO pools (pool_id, tenant_id, name, active_name, policy, state, \
                     generation, created_at, updated_at, archived_at) \
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    vec![
                        s(&p.pool_id),
                        s(&p.tenant_id),
                        s(&p.name),
                        os(active),
                        json(&p.policy)?,
                        s(enum_text(&p.state)?),
                        u64v(p.generation)?,
                        ts(p.created_at),
                        ts(p.updated_at),
                        ots(p.archived_at),
                    ],
                );
                let what = || format!("pool {} of tenant {}", p.name, p.tenant_id);
                exec(txn, st).await.map_err(conflict(what, "pool"))?;
            }
            Write::UpdatePool { pool: p, expected_generation } => {
                let st = self.st(
                    "UPDATE pools SET active_name = CASE WHEN ? THEN name ELSE NULL END, \
                     policy = ?, state = ?, generation = ?, updated_at = ?, archived_at = ? \
                     WHERE pool_id = ? AND generation = ?",
                    vec![
                        Value::from(p.state == PoolState::Active),
                        json(&p.policy)?,
                        s(enum_text(&p.state)?),
                        u64v(p.generation)?,
                        ts(p.updated_at),
                        ots(p.archived_at),
                        s(&p.pool_id),
                        u64v(*expected_generation)?,
                    ],
                );
                let what = || format!("pool {} of tenant {}", p.name, p.tenant_id);
                let n = exec(txn, st).await.map_err(conflict(what, "pool"))?;
                self.cas_outcome(txn, n, "pools", "pool_id", p.pool_id.as_str(), "pool").await?;
            }
            Write::SetQuota { pool_id, resource, limit } => {
                let st = self.st(
                    "INSERT INTO quotas (pool_id, resource, quota_limit, used) VALUES (?, ?, ?, 0) \
                     ON CONFLICT (pool_id, resource) DO UPDATE SET quota_limit = excluded.quota_limit",
                    vec![s(pool_id), s(resource.as_str()), Value::from(i64::from(*limit))],
                );
                let parent = format!("pool {pool_id}");
                exec(txn, st).await.map_err(conflict(|| "quota".into(), &parent))?;
            }
            Write::BookQuota { pool_id, resource } => {
                let st = self.st(
                    "UPDATE quotas SET used = used + 1 \
                     WHERE pool_id = ? AND resource = ? AND used < quota_limit",
                    vec![s(pool_id), s(resource.as_str())],
                );
                if exec(txn, st).await? == 0 {
                    return Err(self.quota_refusal(txn, pool_id, *resource).await);
                }
            }
            Write::ReleaseQuota { pool_id, resource } => {
                let st = self.st(
                    "UPDATE quotas SET used = used - 1 WHERE pool_id = ? AND resource = ? AND used > 0",
                    vec![s(pool_id), s(resource.as_str())],
                );
                exec(txn, st).await?;
            }
            Write::InsertAccount(a) => {
                let live = a.deleted_at.is_none().then(|| a.name.to_string());
                let st = self.st(
                    "INSERT INTO provider_accounts (provider_account_id, tenant_id, provider, name, \
                     live_name, credentials, created_at, deleted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    vec![
                        s(&a.provider_account_id),
                        s(&a.tenant_id),
                        s(a.provider.as_str()),
                        s(&a.name),
                        os(live),
                        Value::from(a.credentials.0.clone()),
                        ts(a.created_at),
                        ots(a.deleted_at),
                    ],
                );
                let what = || format!("provider account {} of tenant {}", a.name, a.tenant_id);
                exec(txn, st).await.map_err(conflict(what, "provider account"))?;
            }
            Write::DeleteAccount { provider_account_id: id, at } => {
                let st = self.st(
                    "UPDATE provider_accounts SET deleted_at = COALESCE(deleted_at, ?), \
                     live_name = NULL WHERE provider_account_id = ?",
                    vec![ts(*at), s(id)],
                );
                must_touch(exec(txn, st).await?, || format!("provider account {id}"))?;
            }
            Write::PutSubstrate(x) => {
                let st = self.st(
                    "INSERT INTO substrates (pool_id, tenant_id, provider_account_id, mode, \
                     cluster_id, state, message, nodes_listed, nodes_joined, waiting_to_join, \
                     upgrade, observed_generation, created_at, updated_at) \
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
                     ON CONFLICT (pool_id) DO UPDATE SET tenant_id = excluded.tenant_id, \
                     provider_account_id = excluded.provider_account_id, mode = excluded.mode, \
                     cluster_id = excluded.cluster_id, state = excluded.state, \
                     message = excluded.message, nodes_listed = excluded.nodes_listed, \
                     nodes_joined = excluded.nodes_joined, \
                     waiting_to_join = excluded.waiting_to_join, upgrade = excluded.upgrade, \
                     observed_generation = excluded.observed_generation, \
                     updated_at = excluded.updated_at",
                    vec![
                        s(&x.pool_id),
                        s(&x.tenant_id),
                        s(&x.provider_account_id),
                        s(enum_text(&x.mode)?),
                        os(x.cluster_id.as_ref()),
                        s(x.state.as_str()),
                        os(x.message.as_ref()),
                        Value::from(i64::from(x.nodes_listed)),
                        Value::from(i64::from(x.nodes_joined)),
                        opt_json(&x.waiting_to_join)?,
                        opt_json(&x.upgrade)?,
                        u64v(x.observed_generation)?,
                        ts(x.created_at),
                        ts(x.updated_at),
                    ],
                );
                let parent = format!("pool {}", x.pool_id);
                exec(txn, st).await.map_err(conflict(|| "substrate".into(), &parent))?;
            }
            Write::InsertCluster(c) => {
                let live = (c.status.state != ResourceState::Deleted).then(|| c.name.to_string());
                let st = self.st(
                    "INSERT INTO kubernetes_clusters (cluster_id, tenant_id, provider_account_id, \
                     name, live_name, region, desired_version, high_availability, mode, origin, \
                     substrate_pool_ids, generation, created_at, provider_cluster_id, \
                     running_version, state, message, observed_generation, updated_at) \
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    vec![
                        s(&c.cluster_id),
                        s(&c.tenant_id),
                        s(&c.provider_account_id),
                        s(&c.name),
                        os(live),
                        s(&c.region),
                        os(c.desired_version.as_ref()),
                        Value::from(c.high_availability),
                        s(enum_text(&c.mode)?),
                        s(enum_text(&c.origin)?),
                        json(&c.substrate_pool_ids)?,
                        u64v(c.generation)?,
                        ts(c.created_at),
                        os(c.provider_cluster_id.as_ref()),
                        os(c.version.as_ref()),
                        s(c.status.state.as_str()),
                        os(c.status.message.as_ref()),
                        u64v(c.status.observed_generation)?,
                        ts(c.status.updated_at),
                    ],
                );
                let what = || format!("cluster {} in account {}", c.name, c.provider_account_id);
                let parent = format!("provider account {}", c.provider_account_id);
                exec(txn, st).await.map_err(conflict(what, &parent))?;
            }
            Write::UpdateCluster { cluster: c, expected_generation } => {
                let st = self.st(
                    "UPDATE kubernetes_clusters SET name = ?, \
                     live_name = CASE WHEN state <> 'deleted' THEN ? ELSE NULL END, \
                     desired_version = ?, substrate_pool_ids = ?, generation = ? \
                     WHERE cluster_id = ? AND generation = ?",
                    vec![
                        s(&c.name),
                        s(&c.name),
                        os(c.desired_version.as_ref()),
                        json(&c.substrate_pool_ids)?,
                        u64v(c.generation)?,
                        s(&c.cluster_id),
                        u64v(*expected_generation)?,
                    ],
                );
                let what = || format!("cluster {} in account {}", c.name, c.provider_account_id);
                let n = exec(txn, st).await.map_err(conflict(what, "cluster"))?;
                let id = c.cluster_id.as_str();
                self.cas_outcome(txn, n, "kubernetes_clusters", "cluster_id", id, "cluster")
                    .await?;
            }
            Write::SetClusterStatus { cluster_id, provider_cluster_id, version, status } => {
                let st = self.st(
                    "UPDATE kubernetes_clusters SET \
                     provider_cluster_id = COALESCE(?, provider_cluster_id), \
                     running_version = COALESCE(?, running_version), state = ?, message = ?, \
                     observed_generation = ?, updated_at = ?, \
                     live_name = CASE WHEN ? THEN NULL ELSE name END WHERE cluster_id = ?",
                    vec![
                        os(provider_cluster_id.as_ref()),
                        os(version.as_ref()),
                        s(status.state.as_str()),
                        os(status.message.as_ref()),
                        u64v(status.observed_generation)?,
                        ts(status.updated_at),
                        Value::from(status.state == ResourceState::Deleted),
                        s(cluster_id),
                    ],
                );
                must_touch(exec(txn, st).await?, || format!("cluster {cluster_id}"))?;
            }
            Write::InsertNodePool(np) => {
                let live = (np.state != bc_domain::NodePoolState::Deleted).then(|| np.name.clone());
                let st = self.st(
                    "INSERT INTO node_pools (node_pool_id, cluster_id, tenant_id, name, live_name, \
                     size, scale, labels, taints, managed_by, generation, created_at, \
                     provider_node_pool_id, nodes_listed, nodes_ready, state, message, \
                     observed_generation, updated_at) \
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    vec![
                        s(&np.node_pool_id),
                        s(&np.cluster_id),
                        s(&np.tenant_id),
                        s(&np.name),
                        os(live),
                        s(&np.size),
                        json(&np.scale)?,
                        json(&np.labels)?,
                        json(&np.taints)?,
                        os(np.managed_by.as_ref()),
                        u64v(np.generation)?,
                        ts(np.created_at),
                        os(np.provider_node_pool_id.as_ref()),
                        Value::from(i64::from(np.nodes_listed)),
                        Value::from(i64::from(np.nodes_ready)),
                        s(np.state.as_str()),
                        os(np.message.as_ref()),
                        u64v(np.observed_generation)?,
                        ts(np.updated_at),
                    ],
                );
                let what = || format!("node pool {} in cluster {}", np.name, np.cluster_id);
                let parent = format!("cluster {}", np.cluster_id);
                exec(txn, st).await.map_err(conflict(what, &parent))?;
            }
            Write::UpdateNodePool { node_pool: np, expected_generation } => {
                let st = self.st(
                    "UPDATE node_pools SET scale = ?, labels = ?, taints = ?, generation = ? \
                     WHERE node_pool_id = ? AND generation = ?",
                    vec![
                        json(&np.scale)?,
                        json(&np.labels)?,
                        json(&np.taints)?,
                        u64v(np.generation)?,
                        s(&np.node_pool_id),
                        u64v(*expected_generation)?,
                    ],
                );
                let n = exec(txn, st).await?;
                let id = np.node_pool_id.as_str();
                self.cas_outcome(txn, n, "node_pools", "node_pool_id", id, "node pool").await?;
            }
            Write::SetNodePoolStatus {
                node_pool_id,
                provider_node_pool_id,
                nodes_listed,
                nodes_ready,
                state,
                message,
                observed_generation,
                updated_at,
            } => {
                let st = self.st(
                    "UPDATE node_pools SET \
                     provider_node_pool_id = COALESCE(?, provider_node_pool_id), \
                     nodes_listed = ?, nodes_ready = ?, state = ?, message = ?, \
                     observed_generation = ?, updated_at = ?, \
                     live_name = CASE WHEN ? THEN NULL ELSE name END WHERE node_pool_id = ?",
                    vec![
                        os(provider_node_pool_id.as_ref()),
                        Value::from(i64::from(*nodes_listed)),
                        Value::from(i64::from(*nodes_ready)),
                        s(state.as_str()),
                        os(message.as_ref()),
                        u64v(*observed_generation)?,
                        ts(*updated_at),
                        Value::from(*state == bc_domain::NodePoolState::Deleted),
                        s(node_pool_id),
                    ],
                );
                must_touch(exec(txn, st).await?, || format!("node pool {node_pool_id}"))?;
            }
            Write::InsertLoadBalancer(lb) => {
                let live = lb.deleted_at.is_none().then(|| lb.name.to_string());
                let st = self.st(
                    "INSERT INTO load_balancers (load_balancer_id, tenant_id, pool_id, \
                     provider_account_id, name, live_name, spec, generation, created_at, \
                     delete_requested, provider_load_balancer_id, ip, state, message, \
                     observed_generation, updated_at, ready_at, deleted_at) \
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    vec![
                        s(&lb.load_balancer_id),
                        s(&lb.tenant_id),
                        s(&lb.pool_id),
                        s(&lb.provider_account_id),
                        s(&lb.name),
                        os(live),
                        json(&lb.spec)?,
                        u64v(lb.generation)?,
                        ts(lb.created_at),
                        Value::from(lb.delete_requested),
                        os(lb.provider_load_balancer_id.as_ref()),
                        os(lb.ip.as_ref()),
                        s(lb.status.state.as_str()),
                        os(lb.status.message.as_ref()),
                        u64v(lb.status.observed_generation)?,
                        ts(lb.status.updated_at),
                        ots(lb.ready_at),
                        ots(lb.deleted_at),
                    ],
                );
                let what =
                    || format!("load balancer {} in account {}", lb.name, lb.provider_account_id);
                let parent = format!("pool {} or account {}", lb.pool_id, lb.provider_account_id);
                exec(txn, st).await.map_err(conflict(what, &parent))?;
            }
            Write::UpdateLoadBalancer { load_balancer: lb, expected_generation } => {
                let st = self.st(
                    "UPDATE load_balancers SET name = ?, \
                     live_name = CASE WHEN deleted_at IS NULL THEN ? ELSE NULL END, spec = ?, \
                     delete_requested = ?, generation = ? \
                     WHERE load_balancer_id = ? AND generation = ?",
                    vec![
                        s(&lb.name),
                        s(&lb.name),
                        json(&lb.spec)?,
                        Value::from(lb.delete_requested),
                        u64v(lb.generation)?,
                        s(&lb.load_balancer_id),
                        u64v(*expected_generation)?,
                    ],
                );
                let what =
                    || format!("load balancer {} in account {}", lb.name, lb.provider_account_id);
                let n = exec(txn, st).await.map_err(conflict(what, "load balancer"))?;
                let id = lb.load_balancer_id.as_str();
                let t = "load_balancers";
                self.cas_outcome(txn, n, t, "load_balancer_id", id, "load balancer").await?;
            }
            Write::SetLoadBalancerStatus {
                load_balancer_id,
                provider_load_balancer_id,
                ip,
                status,
                ready_at,
                deleted_at,
            } => {
                // Observed facts accumulate: a provider id, IP, first-ready time or deletion
                // once recorded is not erased by a later write that does not know it.
                let st = self.st(
                    "UPDATE load_balancers SET \
                     provider_load_balancer_id = COALESCE(?, provider_load_balancer_id), \
                     ip = COALESCE(?, ip), state = ?, message = ?, observed_generation = ?, \
                     updated_at = ?, ready_at = COALESCE(ready_at, ?), \
                     live_name = CASE WHEN COALESCE(deleted_at, ?) IS NULL THEN name ELSE NULL END, \
                     deleted_at = COALESCE(deleted_at, ?) WHERE load_balancer_id = ?",
                    vec![
                        os(provider_load_balancer_id.as_ref()),
                        os(ip.as_ref()),
                        s(status.state.as_str()),
                        os(status.message.as_ref()),
                        u64v(status.observed_generation)?,
                        ts(status.updated_at),
                        ots(*ready_at),
                        ots(*deleted_at),
                        ots(*deleted_at),
                        s(load_balancer_id),
                    ],
                );
                must_touch(exec(txn, st).await?, || format!("load balancer {load_balancer_id}"))?;
            }
            Write::PutNode(n) => {
                let st = self.st(
                    "INSERT INTO nodes (node_id, pool_id, node_name, provider_node_id, bcd_version, \
                     credential_hash, joined_at, last_heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) \
                     ON CONFLICT (pool_id, node_name) DO UPDATE SET node_id = excluded.node_id, \
                     provider_node_id = excluded.provider_node_id, \
                     bcd_version = excluded.bcd_version, \
                     credential_hash = excluded.credential_hash, joined_at = excluded.joined_at, \
                     last_heartbeat_at = excluded.last_heartbeat_at",
                    vec![
                        s(&n.node_id),
                        s(&n.pool_id),
                        s(&n.node_name),
                        os(n.provider_node_id.as_ref()),
                        s(&n.bcd_version),
                        s(&n.credential_hash),
                        ts(n.joined_at),
                        ots(n.last_heartbeat_at),
                    ],
                );
                let parent = format!("pool {}", n.pool_id);
                exec(txn, st).await.map_err(conflict(|| format!("node {}", n.node_id), &parent))?;
            }
            Write::Heartbeat { node_id, at } => {
                let st = self.st(
                    "UPDATE nodes SET last_heartbeat_at = ? WHERE node_id = ?",
                    vec![ts(*at), s(node_id)],
                );
                must_touch(exec(txn, st).await?, || format!("node {node_id}"))?;
            }
            Write::InsertBooking(b) => {
                let st = self.st(
                    "INSERT INTO bookings (booking_id, tenant_id, pool_id, node_name, state, \
                     created_at, ends_at, ended_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    vec![
                        s(&b.booking_id),
                        s(&b.tenant_id),
                        s(&b.pool_id),
                        os(b.node_name.as_ref()),
                        s(enum_text(&b.state)?),
                        ts(b.created_at),
                        ots(b.ends_at),
                        ots(b.ended_at),
                    ],
                );
                let parent = format!("pool {}", b.pool_id);
                let what = || format!("booking {}", b.booking_id);
                exec(txn, st).await.map_err(conflict(what, &parent))?;
            }
            Write::EndBooking { booking_id, at } => {
                let st = self.st(
                    "UPDATE bookings SET state = 'ended', ended_at = COALESCE(ended_at, ?) \
                     WHERE booking_id = ?",
                    vec![ts(*at), s(booking_id)],
                );
                must_touch(exec(txn, st).await?, || format!("booking {booking_id}"))?;
            }
            Write::InsertJoinToken(t) => {
                let st = self.st(
                    "INSERT INTO join_tokens (token_hash, pool_id, created_at, revoked_at) \
                     VALUES (?, ?, ?, ?)",
                    vec![s(&t.token_hash), s(&t.pool_id), ts(t.created_at), ots(t.revoked_at)],
                );
                let parent = format!("pool {}", t.pool_id);
                exec(txn, st).await.map_err(conflict(|| "join token".into(), &parent))?;
            }
            Write::RevokeJoinTokens { pool_id, at } => {
                let st = self.st(
                    "UPDATE join_tokens SET revoked_at = ? WHERE pool_id = ? AND revoked_at IS NULL",
                    vec![ts(*at), s(pool_id)],
                );
                exec(txn, st).await?;
            }
            Write::InsertApiToken(t) => {
                let st = self.st(
                    "INSERT INTO api_tokens (token_id, token_hash, grants, created_at, revoked_at) \
                     VALUES (?, ?, ?, ?, ?)",
                    vec![
                        s(&t.token_id),
                        s(&t.token_hash),
                        json(&t.grants)?,
                        ts(t.created_at),
                        ots(t.revoked_at),
                    ],
                );
                let what = || format!("api token {}", t.token_id);
                exec(txn, st).await.map_err(conflict(what, "api token"))?;
            }
            Write::RevokeApiToken { token_id, at } => {
                let st = self.st(
                    "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE token_id = ?",
                    vec![ts(*at), s(token_id)],
                );
                must_touch(exec(txn, st).await?, || format!("api token {token_id}"))?;
            }
            Write::OpenBilling(b) => {
                // The unique (meter, resource, open_key) index holds one open interval; a
                // second open is a no-op, which makes the write idempotent.
                let open_key = b.end.is_none().then_some(1i64);
                let st = self.st(
                    "INSERT INTO billing_intervals \
                     (meter, resource, tenant_id, pool_id, start_at, end_at, open_key) \
                     VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    vec![
                        s(&b.meter),
                        s(&b.resource),
                        s(&b.tenant_id),
                        s(&b.pool_id),
                        ts(b.start),
                        ots(b.end),
                        Value::from(open_key),
                    ],
                );
                exec(txn, st).await?;
            }
            Write::CloseBilling { meter, resource, at } => {
                let st = self.st(
                    "UPDATE billing_intervals SET end_at = ?, open_key = NULL \
                     WHERE meter = ? AND resource = ? AND open_key = 1",
                    vec![ts(*at), s(meter), s(resource)],
                );
                exec(txn, st).await?;
            }
            Write::PutIdempotency(r) => {
                let st = self.st(
                    "INSERT INTO idempotency (tenant_id, method, request_id, body_hash, response, \
                     created_at) VALUES (?, ?, ?, ?, ?, ?)",
                    vec![
                        s(&r.tenant_id),
                        s(&r.method),
                        s(&r.request_id),
                        s(&r.body_hash),
                        json(&r.response)?,
                        ts(r.created_at),
                    ],
                );
                let what = || format!("request {} of {}", r.request_id, r.method);
                exec(txn, st).await.map_err(conflict(what, "tenant"))?;
            }
        }
        Ok(())
    }

    /// After a CAS update touched `n` rows: fine when 1; otherwise a read inside the same
    /// transaction tells a stale generation (the row exists) from a missing row.
    async fn cas_outcome(
        &self,
        txn: &DatabaseTransaction,
        n: u64,
        table: &str,
        id_col: &str,
        id: &str,
        noun: &str,
    ) -> Tx<()> {
        if n > 0 {
            return Ok(());
        }
        let st =
            self.st(&format!("SELECT 1 AS present FROM {table} WHERE {id_col} = ?"), vec![s(id)]);
        match txn.query_one_raw(st).await? {
            Some(_) => Err(StoreError::Stale(format!("{noun} {id}")).into()),
            None => Err(StoreError::NotFound(format!("{noun} {id}")).into()),
        }
    }

    /// Why a quota unit could not be booked: exhausted, or no row at all.
    async fn quota_refusal(
        &self,
        txn: &DatabaseTransaction,
        pool_id: &PoolId,
        resource: QuotaResource,
    ) -> TxError {
        let st = self.st(
            "SELECT quota_limit, used FROM quotas WHERE pool_id = ? AND resource = ?",
            vec![s(pool_id), s(resource.as_str())],
        );
        let r = resource.as_str();
        match txn.query_one_raw(st).await {
            Ok(Some(row)) => {
                let limit = Row(&row).i64("quota_limit").unwrap_or_default();
                StoreError::Conflict(format!(
                    "quota {r} exhausted on pool {pool_id} (limit {limit})"
                ))
                .into()
            }
            Ok(None) => StoreError::Conflict(format!("no quota {r} on pool {pool_id}")).into(),
            Err(e) => e.into(),
        }
    }
}

/// A write that must touch a row: zero rows means the row is missing.
fn must_touch(n: u64, what: impl FnOnce() -> String) -> Tx<()> {
    if n == 0 { Err(StoreError::NotFound(what()).into()) } else { Ok(()) }
}

/// Optional JSON text.
fn opt_json<T: serde::Serialize>(v: &Option<T>) -> Result<Value, StoreError> {
    match v {
        Some(x) => json(x),
        None => Ok(Value::from(None::<String>)),
    }
}
