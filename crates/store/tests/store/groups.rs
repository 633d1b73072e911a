//! Grouped calls (issue 31): units of work that arrive together commit in one
//! transaction, and point reads that arrive together go in one query — each call still
//! answered exactly as alone.
//!
//! Invariant checked: a batch changes how many round trips the calls take, never what
//! they do: every unit of a batch commits with its own events, a unit that would fail
//! alone fails alone (its lost lease or stale generation leaves nothing of it, and nothing
//! of the others is lost), and every read answers its own key. No test sleeps; the calls
//! are started together and their outcomes counted.

use std::collections::HashSet;
use std::sync::Arc;

use bc_domain::StoreError;
use bc_domain::model::*;
use bc_domain::ports::*;
use bc_domain::{LoadBalancerId, ResourceState};
use bc_store::testing::*;
use bc_store::{SqlStore, store_suite};
use futures::future::join_all;

// On one thread, so that the calls a test starts together are all waiting before their
// batch starts (`store_suite!`'s `current_thread`).
store_suite!(
    current_thread:
    units_of_work_that_arrive_together_share_a_transaction,
    a_unit_that_fails_in_a_batch_fails_alone,
    point_reads_that_arrive_together_share_a_query,
    work_item_reads_that_arrive_together_share_a_query_within_their_kind,
    billing_opens_after_statuses_go_together_and_open_once,
    load_balancer_creates_that_arrive_together_write_each_kind_once,
    a_create_that_fails_in_a_batch_of_creates_fails_alone,
);

type S = Arc<SqlStore>;

const K: WorkKind = WorkKind::ProviderResources;
const N: usize = 40;

/// A pool, an account and `n` load balancers, each with a work item claimed by `owner`.
async fn world(s: &S, n: usize, owner: &str) -> (Vec<LoadBalancer>, Vec<WorkItem>) {
    let acme = tenant("acme");
    let p = pool(&acme, "web");
    let a = account(&acme, "main");
    let lbs: Vec<_> = (0..n).map(|i| load_balancer(&p, &a, &format!("lb-{i}"))).collect();
    let mut uow =
        UnitOfWork::new().write(Write::InsertPool(p.clone())).write(Write::InsertAccount(a));
    for l in &lbs {
        uow = uow.write(Write::InsertLoadBalancer(l.clone())).enqueue(
            K,
            l.load_balancer_id.as_str(),
            t(0),
        );
    }
    s.commit(uow).await.unwrap();
    let items = s.claim(owner, &[K], n as u32, t(10), t(1_000)).await.unwrap();
    assert_eq!(items.len(), n);
    (lbs, items)
}

/// What a reconciler commits for `item`: its load balancer's new status and an event,
/// fenced by the item's lease.
fn status_change(l: &LoadBalancer, fence: Fence, message: &str) -> UnitOfWork {
    UnitOfWork::new()
        .fenced(fence)
        .write(Write::SetLoadBalancerStatus {
            load_balancer_id: l.load_balancer_id.clone(),
            provider_load_balancer_id: Some(format!("p-{}", l.name)),
            ip: None,
            status: ObservedStatus {
                state: ResourceState::Provisioning,
                message: Some(message.into()),
                observed_generation: 1,
                updated_at: t(20),
            },
            ready_at: None,
            deleted_at: None,
        })
        .event(event(&l.tenant_id, &format!("lb.{}", l.name)))
}

fn fence_of(items: &[WorkItem], l: &LoadBalancer) -> Fence {
    let item = items.iter().find(|i| i.key == l.load_balancer_id.as_str()).unwrap();
    item.fence().unwrap()
}

async fn units_of_work_that_arrive_together_share_a_transaction(s: S) {
    let (lbs, items) = world(&s, N, "r1").await;
    let before = s.stats();
    let commits = lbs.iter().map(|l| s.commit(status_change(l, fence_of(&items, l), "made")));
    let answers = join_all(commits).await;
    let spent = s.stats().since(&before);
    let mut seqs = Vec::new();
    for a in answers {
        let c = a.expect("every unit commits");
        assert_eq!(c.event_seqs.len(), 1, "{c:?}");
        seqs.extend(c.event_seqs);
    }
    assert_eq!(seqs.iter().collect::<HashSet<_>>().len(), N, "one seq per event");
    // Alone, each unit is a transaction of its own: N of them.
    assert!(spent.transactions <= (N / 4) as u64, "grouped: {} for {N}", spent.transactions);
    let stored: Vec<u64> =
        s.event_list_all(0, 1_000).await.unwrap().iter().map(|e| e.seq).collect();
    seqs.sort_unstable();
    assert_eq!(stored, seqs, "the events are the units' own, once each");
    // Alone, each unit is three statements (fence, status, event).
    assert!(spent.statements <= (N / 2) as u64, "grouped: {} for {N}", spent.statements);
    for l in &lbs {
        let got = s.load_balancer_get_any(&l.load_balancer_id).await.unwrap().unwrap();
        assert_eq!(got.status.message.as_deref(), Some("made"));
        assert_eq!(got.provider_load_balancer_id, Some(format!("p-{}", l.name)));
    }
    // Observed facts accumulate in a batch as alone: a status that does not know the
    // provider id keeps it, and the first ready time stays the first.
    for (message, ready) in [("ready", 30), ("again", 40)] {
        let units = lbs.iter().map(|l| {
            let mut u = status_change(l, fence_of(&items, l), message);
            if let Some(Write::SetLoadBalancerStatus {
                provider_load_balancer_id, ready_at, ..
            }) = u.writes.first_mut()
            {
                *provider_load_balancer_id = None;
                *ready_at = Some(t(ready));
            }
            s.commit(u)
        });
        assert!(join_all(units).await.iter().all(Result::is_ok));
    }
    for l in &lbs {
        let got = s.load_balancer_get_any(&l.load_balancer_id).await.unwrap().unwrap();
        assert_eq!(got.status.message.as_deref(), Some("again"));
        assert_eq!(got.provider_load_balancer_id, Some(format!("p-{}", l.name)));
        assert_eq!(got.ready_at, Some(t(30)));
    }
}

async fn a_unit_that_fails_in_a_batch_fails_alone(s: S) {
    let (lbs, items) = world(&s, N, "r1").await;
    // Unit 7 is fenced by a lease nobody holds; unit 12 changes the spec at a stale
    // generation; unit 20 writes the status of a load balancer that does not exist.
    // Every other unit commits, whatever batch it lands in.
    let (lost, stale, missing) = (7, 12, 20);
    let nowhere =
        load_balancer(&pool(&tenant("acme"), "gone"), &account(&tenant("acme"), "x"), "x");
    let units = lbs.iter().enumerate().map(|(i, l)| match i {
        _ if i == missing => status_change(&nowhere, fence_of(&items, l), "missing"),
        _ if i == lost => {
            let f = Fence::work(K, l.load_balancer_id.as_str(), "r1#gone");
            status_change(l, f, "lost")
        }
        _ if i == stale => {
            let mut changed = l.clone();
            changed.generation = 3;
            status_change(l, fence_of(&items, l), "stale")
                .write(Write::UpdateLoadBalancer { load_balancer: changed, expected_generation: 2 })
        }
        _ => status_change(l, fence_of(&items, l), "made"),
    });
    let answers = join_all(units.map(|u| s.commit(u))).await;
    let mut kept = 0;
    for (i, a) in answers.into_iter().enumerate() {
        match i {
            _ if i == lost => assert!(matches!(a, Err(StoreError::LeaseLost(_))), "{a:?}"),
            _ if i == stale => assert!(matches!(a, Err(StoreError::Stale(_))), "{a:?}"),
            _ if i == missing => assert!(matches!(a, Err(StoreError::NotFound(_))), "{a:?}"),
            _ => {
                assert_eq!(a.unwrap().event_seqs.len(), 1);
                kept += 1;
            }
        }
    }
    assert_eq!(kept, N - 3);
    assert_eq!(s.event_list_all(0, 1_000).await.unwrap().len(), N - 3, "no event of a failed unit");
    for (i, l) in lbs.iter().enumerate() {
        let got = s.load_balancer_get_any(&l.load_balancer_id).await.unwrap().unwrap();
        let want = if [lost, stale, missing].contains(&i) { None } else { Some("made") };
        assert_eq!(got.status.message.as_deref(), want, "load balancer {i}");
        assert_eq!(got.generation, 1);
    }
}

async fn point_reads_that_arrive_together_share_a_query(s: S) {
    let (lbs, _) = world(&s, N, "r1").await;
    let missing: Vec<LoadBalancerId> = (0..5).map(|_| id()).collect();
    let mut asked: Vec<(LoadBalancerId, Option<&LoadBalancer>)> =
        lbs.iter().map(|l| (l.load_balancer_id.clone(), Some(l))).collect();
    asked.extend(missing.iter().map(|m| (m.clone(), None)));
    // Every load balancer twice, so a batch also meets a key asked twice.
    asked.extend(lbs.iter().map(|l| (l.load_balancer_id.clone(), Some(l))));
    let before = s.stats();
    let got = join_all(asked.iter().map(|(id, _)| s.load_balancer_get_any(id))).await;
    let spent = s.stats().since(&before);
    for ((id, want), got) in asked.iter().zip(got) {
        assert_eq!(got.unwrap().as_ref(), *want, "{id}");
    }
    assert!(spent.statements <= (asked.len() / 4) as u64, "grouped: {}", spent.statements);
    // Accounts too; an unknown one is `None`.
    let a = lbs[0].provider_account_id.clone();
    let reads = [a.clone(), missing_account(), a.clone()];
    let got = join_all(reads.iter().map(|id| s.account_get_any(id))).await;
    let got: Vec<_> = got.into_iter().map(|r| r.unwrap().map(|x| x.provider_account_id)).collect();
    assert_eq!(got, vec![Some(a.clone()), None, Some(a)]);
}

async fn work_item_reads_that_arrive_together_share_a_query_within_their_kind(s: S) {
    let (lbs, items) = world(&s, N, "r1").await;
    // The same key under another kind, unleased: a read of one kind never answers with
    // the other's row.
    let other = WorkKind::Substrates;
    let shared = lbs[0].load_balancer_id.as_str();
    s.commit(UnitOfWork::new().enqueue(other, shared, t(0))).await.unwrap();
    let mut asked: Vec<(WorkKind, String)> = items.iter().map(|i| (K, i.key.clone())).collect();
    asked.push((K, "no-such-item".into()));
    asked.push((other, shared.to_owned()));
    asked.extend(items.iter().map(|i| (K, i.key.clone())));
    let before = s.stats();
    let got = join_all(asked.iter().map(|(k, key)| s.work_get(*k, key))).await;
    let spent = s.stats().since(&before);
    for ((kind, key), got) in asked.iter().zip(got) {
        let got = got.unwrap();
        match (kind, key.as_str()) {
            (_, "no-such-item") => assert_eq!(got, None),
            (k, _) if *k == other => {
                let w = got.expect("the other kind's item");
                assert_eq!((w.kind, w.lease_owner), (other, None));
            }
            _ => {
                let w = got.expect("claimed item");
                assert_eq!((w.kind, w.key.as_str()), (K, key.as_str()));
                assert!(w.lease_owner.as_deref().is_some_and(|o| o.starts_with("r1")));
            }
        }
    }
    assert!(spent.statements <= (asked.len() / 4) as u64, "grouped: {}", spent.statements);
}

/// A load balancer's first `ready`: its status, then its billing interval opened.
fn first_ready(l: &LoadBalancer, fence: Fence) -> UnitOfWork {
    let mut u = status_change(l, fence, "ready");
    u.writes.push(Write::OpenBilling(BillingInterval {
        meter: METER_LOAD_BALANCER_HOURS.into(),
        resource: l.load_balancer_id.to_string(),
        tenant_id: l.tenant_id.clone(),
        pool_id: l.pool_id.clone(),
        start: t(20),
        end: None,
    }));
    u
}

async fn billing_opens_after_statuses_go_together_and_open_once(s: S) {
    let (lbs, items) = world(&s, N, "r1").await;
    let before = s.stats();
    // Every unit twice over (a repeated first `ready`: the second open is a no-op).
    for _ in 0..2 {
        let units = lbs.iter().map(|l| s.commit(first_ready(l, fence_of(&items, l))));
        assert!(join_all(units).await.iter().all(Result::is_ok));
    }
    let spent = s.stats().since(&before);
    // Alone, each unit is four statements (fence, status, billing open, event).
    assert!(spent.statements <= (N / 2) as u64 * 2, "grouped: {}", spent.statements);
    let tenant = lbs[0].tenant_id.clone();
    let page = PageRequest::first(1_000);
    let open = s.billing_list(&tenant, t(0), t(1_000), None, &page).await.unwrap().items;
    let resources: Vec<_> = open.iter().map(|b| b.resource.clone()).collect();
    let distinct: HashSet<_> = resources.iter().collect();
    assert_eq!((resources.len(), distinct.len()), (N, N), "one open interval each");
    assert!(open.iter().all(|b| b.end.is_none() && b.start == t(20)));
}

/// A pool with a `loadBalancers` quota of `limit` and an account, for creates.
async fn create_world(s: &S, limit: u32) -> (Pool, ProviderAccount) {
    let acme = tenant("acme");
    let (p, a) = (pool(&acme, "web"), account(&acme, "main"));
    let uow = UnitOfWork::new()
        .write(Write::InsertPool(p.clone()))
        .write(Write::InsertAccount(a.clone()))
        .write(Write::SetQuota {
            pool_id: p.pool_id.clone(),
            resource: QuotaResource::LoadBalancers,
            limit,
        });
    s.commit(uow).await.unwrap();
    (p, a)
}

/// What `loadBalancers.create` commits: its `requestId` record first, the load balancer,
/// its quota unit and its work item.
fn create(p: &Pool, a: &ProviderAccount, name: &str, request: &str, body: &str) -> UnitOfWork {
    let lb = load_balancer(p, a, name);
    let record = IdempotencyRecord {
        tenant_id: p.tenant_id.clone(),
        method: "loadBalancers.create".into(),
        request_id: request.into(),
        body_hash: body.into(),
        response: serde_json::json!({ "loadBalancerId": lb.load_balancer_id.as_str() }),
        created_at: t(0),
    };
    UnitOfWork::new()
        .write(Write::PutIdempotency(record))
        .write(Write::InsertLoadBalancer(lb.clone()))
        .write(Write::BookQuota {
            pool_id: p.pool_id.clone(),
            resource: QuotaResource::LoadBalancers,
        })
        .enqueue(K, lb.load_balancer_id.as_str(), t(0))
}

fn created_id(uow: &UnitOfWork) -> LoadBalancerId {
    match &uow.writes[1] {
        Write::InsertLoadBalancer(lb) => lb.load_balancer_id.clone(),
        w => panic!("not a create: {w:?}"),
    }
}

async fn load_balancer_creates_that_arrive_together_write_each_kind_once(s: S) {
    let (p, a) = create_world(&s, N as u32).await;
    let units: Vec<UnitOfWork> =
        (0..N).map(|i| create(&p, &a, &format!("lb-{i}"), &format!("r-{i}"), "h")).collect();
    let before = s.stats();
    let answers = join_all(units.iter().map(|u| s.commit(u.clone()))).await;
    let spent = s.stats().since(&before);
    for a in answers {
        assert_eq!(a.expect("every create commits"), Committed::default());
    }
    // Alone, each create is four statements (record, row, booking, work item); in a batch
    // of creates, four for all of them.
    assert!(spent.statements <= N as u64, "grouped: {} for {N}", spent.statements);
    assert_eq!(
        s.quota_get(&p.pool_id, QuotaResource::LoadBalancers).await.unwrap().unwrap().used,
        N as u32
    );
    for (i, u) in units.iter().enumerate() {
        let id = created_id(u);
        let lb = s.load_balancer_get_any(&id).await.unwrap().expect("recorded");
        assert_eq!(lb.name.as_str(), format!("lb-{i}"));
        assert!(s.work_get(K, id.as_str()).await.unwrap().is_some(), "its work item");
        let rec =
            s.idempotency_get(&p.tenant_id, "loadBalancers.create", &format!("r-{i}"), t(1)).await;
        assert_eq!(rec.unwrap().expect("its record").response["loadBalancerId"], id.as_str());
    }
}

async fn a_create_that_fails_in_a_batch_of_creates_fails_alone(s: S) {
    // Room for N - 4 of the N fresh creates; among the others, a repeat of the first
    // create (same requestId and body), a requestId reused with another body, and a name
    // the first create took. Whatever batches they land in, each is answered as alone.
    let (p, a) = create_world(&s, N as u32 - 4).await;
    let first = create(&p, &a, "lb-0", "r-0", "h");
    s.commit(first.clone()).await.unwrap();
    let mut units: Vec<UnitOfWork> =
        (1..N).map(|i| create(&p, &a, &format!("lb-{i}"), &format!("r-{i}"), "h")).collect();
    let repeat = create(&p, &a, "lb-0", "r-0", "h");
    let reused = create(&p, &a, "lb-other", "r-0", "another body");
    let taken = create(&p, &a, "lb-0", "r-taken", "h");
    units.extend([repeat, reused, taken]);
    let answers = join_all(units.iter().map(|u| s.commit(u.clone()))).await;
    let (mut made, mut exhausted) = (0, 0);
    for (i, a) in answers.into_iter().enumerate() {
        match i {
            _ if i == N - 1 => {
                let replayed = a.unwrap().replayed.expect("the repeat replays");
                assert_eq!(replayed.response["loadBalancerId"], created_id(&first).as_str());
            }
            _ if i == N => assert!(matches!(a, Err(StoreError::RequestIdReused(_))), "{a:?}"),
            // Its row is written before its booking: the name refuses it first.
            _ if i == N + 1 => assert!(matches!(a, Err(StoreError::AlreadyExists(_))), "{a:?}"),
            _ => {
                let kept = match a {
                    Ok(c) => {
                        assert_eq!(c, Committed::default());
                        made += 1;
                        true
                    }
                    Err(StoreError::QuotaExhausted(_)) => {
                        exhausted += 1;
                        false
                    }
                    Err(e) => panic!("create {i}: {e:?}"),
                };
                let id = created_id(&units[i]);
                let row = s.load_balancer_get_any(&id).await.unwrap();
                let work = s.work_get(K, id.as_str()).await.unwrap();
                assert_eq!((row.is_some(), work.is_some()), (kept, kept), "create {i}");
            }
        }
    }
    assert_eq!((made, exhausted), (N - 5, 4), "exactly the limit books");
    let used = s.quota_get(&p.pool_id, QuotaResource::LoadBalancers).await.unwrap().unwrap().used;
    assert_eq!(used, N as u32 - 4);
    for u in &units[N - 1..] {
        let id = created_id(u);
        assert!(s.load_balancer_get_any(&id).await.unwrap().is_none(), "nothing of {id}");
    }
}
