//! A batch of load balancer creates (the API's, arriving together) committed with one
//! statement per kind of write — their `requestId` records, their rows, their quota
//! bookings, their work items — instead of one per create each (issue 31: a create's
//! transaction was four statements, a round trip each on PostgreSQL).
//!
//! Invariant: the batch keeps exactly what committing its creates one after another
//! would, or nothing: each multi-row write holds every row to the condition its single
//! write holds one row to (a live account, a free quota unit, no live record of the
//! key), and when any row misses, the batch is given up and each create committed on
//! its own (`SqlStore::commit_batch`), which answers it as it would have been answered
//! alone. The creates of a batch touch distinct keys and distinct rows but for the quota
//! rows, which book `count` units at once exactly when `count` bookings in a row would.

use std::collections::HashSet;

use bc_domain::PoolId;
use bc_domain::model::{IdempotencyRecord, LoadBalancer, QuotaResource};
use bc_domain::ports::{Enqueue, UnitOfWork, Write};

use super::{Tx, Txn, ledger, load_balancers, quotas};
use crate::store::SqlStore;

/// The writes of a batch of load balancer creates, by kind.
pub(super) struct Creates<'a> {
    records: Vec<&'a IdempotencyRecord>,
    load_balancers: Vec<&'a LoadBalancer>,
    /// Units booked per pool, in the order the pools first appear.
    bookings: Vec<(&'a PoolId, u32)>,
    work: Vec<&'a Enqueue>,
}

/// The batch as load balancer creates, when it is two or more of them and nothing else:
/// each unit's writes are its `requestId` record (optional), its live load balancer and
/// one booking of the `loadBalancers` quota of the load balancer's pool, with one work
/// item and no fence or event; no two share a `requestId` key or a work item (each would
/// meet the other's row in the same statement). Else `None`: the batch goes unit by unit.
pub(super) fn together(batch: &[UnitOfWork]) -> Option<Creates<'_>> {
    if batch.len() < 2 {
        return None;
    }
    let mut c = Creates {
        records: Vec::new(),
        load_balancers: Vec::new(),
        bookings: Vec::new(),
        work: Vec::new(),
    };
    let (mut keys, mut items) = (HashSet::new(), HashSet::new());
    for uow in batch {
        if !uow.fences.is_empty() || !uow.events.is_empty() {
            return None;
        }
        let [work] = uow.enqueue.as_slice() else { return None };
        let (record, lb, pool) = match uow.writes.as_slice() {
            [
                Write::PutIdempotency(r),
                Write::InsertLoadBalancer(lb),
                Write::BookQuota { pool_id, resource },
            ] if *resource == QuotaResource::LoadBalancers => (Some(r), lb, pool_id),
            [Write::InsertLoadBalancer(lb), Write::BookQuota { pool_id, resource }]
                if *resource == QuotaResource::LoadBalancers =>
            {
                (None, lb, pool_id)
            }
            _ => return None,
        };
        if lb.deleted_at.is_some() || *pool != lb.pool_id {
            return None;
        }
        if let Some(r) = record {
            if !keys.insert((&r.tenant_id, &r.method, &r.request_id)) {
                return None;
            }
            c.records.push(r);
        }
        if !items.insert((work.kind, &work.key)) {
            return None;
        }
        c.load_balancers.push(lb);
        c.work.push(work);
        // A batch is at most `COMMITS_PER_BATCH` (16) units: a scan keeps the pools'
        // first-seen order without a map beside the list.
        match c.bookings.iter_mut().find(|(p, _)| *p == pool) {
            Some((_, count)) => *count += 1,
            None => c.bookings.push((pool, 1)),
        }
    }
    Some(c)
}

/// Applies the creates' writes, one statement per kind, in the order each unit has them
/// (records first, so a repeat is found before its name meets the first call's load
/// balancer). Whether every write of every create held: when not, nothing of it may be
/// kept and each create must be committed on its own.
pub(super) async fn apply(store: &SqlStore, txn: &Txn, c: &Creates<'_>) -> Tx<bool> {
    if !c.records.is_empty() && !ledger::put_idempotencies(store, txn, &c.records).await? {
        return Ok(false);
    }
    if !load_balancers::insert_live(store, txn, &c.load_balancers).await? {
        return Ok(false);
    }
    if !quotas::book_each(store, txn, QuotaResource::LoadBalancers, &c.bookings).await? {
        return Ok(false);
    }
    store.enqueue_each(txn, &c.work).await?;
    Ok(true)
}
