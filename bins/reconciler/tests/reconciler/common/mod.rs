//! Shared by the process-level fault tests of `bc-reconciler`: a dev stack with no
//! reconcilers of its own on the PostgreSQL of `cargo xtask test`, `bc-reconciler`
//! child processes (killed in `Drop`), a seeded random source, a mixed workload (load
//! balancers and Kubernetes substrates on several simulated accounts, with creates,
//! updates and deletes in rounds), and the books: what the store and the simulator must
//! agree on once everything converged.
//!
//! Invariants: every wait is a bounded count of short polls ending in a failure that
//! names the last disagreement — never an assertion on elapsed time; the books are read
//! from outside the reconcilers (the store's rows and the simulator's model), so a
//! reconciler bug cannot hide itself.

#![allow(dead_code)] // each test binary uses its own part

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use bc_domain::model::{BillingInterval, LoadBalancer, METER_LOAD_BALANCER_HOURS, QuotaResource};
use bc_domain::ports::{
    ClusterRepo, LedgerRepo, LoadBalancerRepo, PageRequest, PoolRepo, SubstrateRepo, WorkQueue,
};
use bc_domain::{NodePoolState, PoolId, ResourceState, TenantId, Timestamp};
use bc_stack::dev::{DEV_TENANT, DevStack};
use bc_stack::testing::{self, Backend, Scratch};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_bc-reconciler");

/// One `bc-reconciler` process, SIGKILLed when dropped.
pub struct Replica(pub Child);

impl Replica {
    /// SIGKILL (no signal handler runs, no lease is released) and reap.
    pub fn kill(mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a `bc-reconciler` on the stack's database and simulator, its log appended to
/// `log`.
pub fn replica(stack: &DevStack, url: &str, id: &str, log: &Path) -> Replica {
    replica_with(stack, url, id, log, &[])
}

/// [`replica`] with more flags (e.g. a smaller `--budget-per-minute`).
pub fn replica_with(stack: &DevStack, url: &str, id: &str, log: &Path, flags: &[&str]) -> Replica {
    let file =
        std::fs::OpenOptions::new().create(true).append(true).open(log).expect("replica log");
    Replica(
        Command::new(BIN)
            .env_clear()
            .env("BC_DATABASE_URL", url)
            .env("BC_SECRET_KEY", &stack.secret_key)
            .env("BC_PUBLIC_URL", &stack.api_url)
            .env("BC_DIGITALOCEAN_API_URL", &stack.sim_url)
            .args(["--replica-id", id, "--concurrency", "16"])
            // The simulator's changes take seconds (`testing::options`' delays): look again
            // at its pace, as dev mode's in-process reconcilers do.
            .args(["--wait-max-seconds", "1"])
            .args(flags)
            .stderr(Stdio::from(file))
            .spawn()
            .expect("bc-reconciler starts"),
    )
}

/// A dev stack on a fresh PostgreSQL database with no reconcilers, `extra` more
/// simulated accounts; `None` without PostgreSQL (the test returns early).
pub async fn stack(scratch: &Scratch, extra: usize) -> Option<(DevStack, String, Vec<String>)> {
    let mut options = testing::options(Backend::Postgres, scratch.path()).await?;
    let url = options.database_url.clone().expect("postgres url");
    options.reconcile = false;
    let tokens: Vec<String> = (1..=extra).map(|i| format!("dop_v1_faults_{i}")).collect();
    options.extra_sim_tokens = tokens.clone();
    let stack = DevStack::start(options).await.expect("dev stack");
    Some((stack, url, tokens))
}

/// Panics with `why`, after printing the lines of `log` that name the first id in it
/// (`lb_…`, `pool_…`, `cl_…`, `np_…`) and the log's last lines.
pub fn fail_with_log(why: &str, log: &Path) -> ! {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let id = why.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).find(|w| {
        ["lb_", "pool_", "cl_", "np_", "cluster_", "nodepool_"].iter().any(|p| w.starts_with(p))
    });
    if let Some(id) = id {
        eprintln!("--- log lines naming {id}:");
        for line in text.lines().filter(|l| l.contains(id)).take(200) {
            eprintln!("{line}");
        }
    }
    eprintln!("--- last log lines:");
    let lines: Vec<&str> = text.lines().collect();
    for line in &lines[lines.len().saturating_sub(40)..] {
        eprintln!("{line}");
    }
    panic!("never converged; last disagreement: {why}");
}

/// A small seeded random source (SplitMix64): the schedule of a run is its seed.
pub struct Rng(u64);

impl Rng {
    /// A source seeded by `$var` when set, else by the clock; prints the seed so a
    /// failing run can be replayed with `var=SEED`.
    pub fn from_env(var: &str) -> Self {
        let seed = std::env::var(var).ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
        eprintln!("seed: {seed} (replay with {var}={seed})");
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// Whether the long variants run (`cargo xtask test --soak`).
pub fn soak() -> bool {
    std::env::var("BC_SOAK").is_ok_and(|v| v == "1")
}

/// A load balancer pool of the workload.
struct LbPool {
    id: String,
    account: String,
    name: String,
    /// Live load balancers (ids), oldest first.
    live: Vec<String>,
}

/// A Kubernetes substrate pool of the workload.
struct K8sPool {
    id: String,
}

/// The workload: load balancer pools and Kubernetes substrates over several accounts,
/// changed in rounds of creates, updates and deletes.
pub struct Workload {
    /// Account id → simulator token.
    pub tokens: BTreeMap<String, String>,
    lb_pools: Vec<LbPool>,
    k8s: Vec<K8sPool>,
    /// Every load balancer the workload made (live or deleted).
    made: Vec<String>,
    /// Creates refused (quota still booked by a deletion not yet finished).
    pub refused: usize,
    rounds: usize,
}

fn lb_body(pool: &str, account: &str, name: &str, port: u32) -> Value {
    json!({"tenantId": DEV_TENANT, "poolId": pool, "providerAccountId": account, "name": name,
           "type": "regional", "region": "nyc1",
           "forwardingRules": [{"entryProtocol": "http", "entryPort": 80, "targetProtocol": "http", "targetPort": port}],
           "targets": {"tag": "web"}})
}

impl Workload {
    /// Makes `extra_tokens.len()` more provider accounts, two pools of `per_pool` load
    /// balancers on each account, and a Kubernetes substrate (two flavors) on each of
    /// the first `substrates` accounts.
    pub async fn start(
        stack: &DevStack,
        extra_tokens: &[String],
        per_pool: usize,
        substrates: usize,
    ) -> Self {
        let mut tokens = BTreeMap::from([(stack.account_id.clone(), stack.sim_token.clone())]);
        for (i, t) in extra_tokens.iter().enumerate() {
            let made = stack
                .call(
                    "providerAccounts.create",
                    json!({"tenantId": DEV_TENANT, "provider": "digitalocean",
                           "name": format!("faults-{i}"), "credentials": {"token": t}}),
                )
                .await
                .expect("providerAccounts.create");
            tokens.insert(made["providerAccountId"].as_str().expect("id").to_owned(), t.clone());
        }
        let accounts: Vec<String> = tokens.keys().cloned().collect();
        let mut lb_pools = Vec::new();
        let mut made = Vec::new();
        for (a, account) in accounts.iter().enumerate() {
            for k in 0..2 {
                let name = format!("lb{a}x{k}");
                let pool = stack
                    .call(
                        "pools.create",
                        json!({"tenantId": DEV_TENANT, "name": name, "policy": {}}),
                    )
                    .await
                    .expect("pools.create");
                let id = pool["poolId"].as_str().expect("poolId").to_owned();
                let mut live = Vec::new();
                for n in 0..per_pool {
                    let lb = stack
                        .call(
                            "loadBalancers.create",
                            lb_body(&id, account, &format!("{name}-{n}"), 8080),
                        )
                        .await
                        .expect("loadBalancers.create");
                    live.push(lb["loadBalancerId"].as_str().expect("id").to_owned());
                }
                made.extend(live.iter().cloned());
                lb_pools.push(LbPool { id, account: account.clone(), name, live });
            }
        }
        let mut k8s = Vec::new();
        for (a, account) in accounts.iter().enumerate().take(substrates) {
            let pool = stack
                .call(
                    "pools.create",
                    json!({"tenantId": DEV_TENANT, "name": format!("k{a}"), "policy": {
                        "substrate": {"kind": "kubernetes", "account": account,
                                      "cluster": {"create": {"region": "nyc1", "version": "1.32.6-do.1"}}},
                        "flavors": [{"name": "cpu", "size": "s-2vcpu-4gb", "count": 1},
                                    {"name": "mem", "size": "s-4vcpu-8gb", "count": 1}]}}),
                )
                .await
                .expect("pools.create with a substrate");
            k8s.push(K8sPool { id: pool["poolId"].as_str().expect("poolId").to_owned() });
        }
        Self { tokens, lb_pools, k8s, made, refused: 0, rounds: 0 }
    }

    /// One round of changes: in every load balancer pool, one load balancer's target
    /// port changes, the oldest is deleted (every other round) and a new one is made;
    /// in every substrate, a flavor's count flips, and on rounds 1 and 2 a flavor goes
    /// and another comes.
    pub async fn round(&mut self, stack: &DevStack) {
        let r = self.rounds;
        self.rounds += 1;
        for p in &mut self.lb_pools {
            if let Some(lb) = p.live.get(r % p.live.len().max(1)).cloned() {
                let port = 9000 + r as u32;
                stack
                    .call(
                        "loadBalancers.update",
                        json!({"tenantId": DEV_TENANT, "loadBalancerId": lb,
                               "forwardingRules": [{"entryProtocol": "http", "entryPort": 80,
                                                    "targetProtocol": "http", "targetPort": port}]}),
                    )
                    .await
                    .expect("loadBalancers.update");
            }
            if r.is_multiple_of(2) && p.live.len() > 1 {
                let gone = p.live.remove(0);
                stack
                    .call(
                        "loadBalancers.delete",
                        json!({"tenantId": DEV_TENANT, "loadBalancerId": gone}),
                    )
                    .await
                    .expect("loadBalancers.delete");
            }
            let body = lb_body(&p.id, &p.account, &format!("{}-r{r}", p.name), 8080);
            match stack.call("loadBalancers.create", body).await {
                Ok(lb) => {
                    let id = lb["loadBalancerId"].as_str().expect("id").to_owned();
                    self.made.push(id.clone());
                    p.live.push(id);
                }
                // The pool's quota is still booked by a deletion the reconcilers have
                // not finished: a refusal, not a failure.
                Err(e) if e.to_string().contains("RESOURCE_EXHAUSTED") => self.refused += 1,
                Err(e) => panic!("loadBalancers.create: {e}"),
            }
        }
        for k in &self.k8s {
            let current = stack
                .call("pools.get", json!({"tenantId": DEV_TENANT, "poolId": k.id}))
                .await
                .expect("pools.get");
            let mut policy = current["policy"].clone();
            let flavors = policy["flavors"].as_array_mut().expect("flavors");
            flavors[0]["count"] = json!(if r.is_multiple_of(2) { 2 } else { 1 });
            match r {
                1 => flavors.retain(|f| f["name"] != "mem"),
                2 => flavors.push(json!({"name": "edge", "size": "s-2vcpu-4gb", "count": 1})),
                _ => {}
            }
            stack
                .call(
                    "pools.update",
                    json!({"tenantId": DEV_TENANT, "poolId": k.id, "policy": policy,
                           "expectedGeneration": current["generation"]}),
                )
                .await
                .expect("pools.update");
        }
    }

    /// How many load balancers the workload holds live.
    pub fn live_load_balancers(&self) -> usize {
        self.lb_pools.iter().map(|p| p.live.len()).sum()
    }

    /// The books: `Ok` when the store and the simulator agree that everything
    /// converged, else the first disagreement.
    pub async fn books(&self, stack: &DevStack) -> Result<String, String> {
        books(
            stack,
            &self.tokens,
            &self.made,
            &self.lb_pools.iter().map(|p| p.id.clone()).collect::<Vec<_>>(),
            &self.k8s.iter().map(|k| k.id.clone()).collect::<Vec<_>>(),
            self.live_load_balancers(),
        )
        .await
    }

    /// Waits (bounded) until the books balance; `Err` with the last disagreement.
    pub async fn converge(&self, stack: &DevStack) -> Result<String, String> {
        let mut last = String::new();
        for i in 0..testing::POLLS {
            match self.books(stack).await {
                Ok(summary) => return Ok(summary),
                Err(e) => last = e,
            }
            if i % 100 == 99 {
                eprintln!("still converging: {last}");
            }
            tokio::time::sleep(testing::POLL).await;
        }
        Err(last)
    }
}

fn tenant() -> TenantId {
    TenantId::parse(DEV_TENANT).expect("tenant")
}

/// The rows of `made` (deleted ones too); `Err` names a row the store holds that the
/// workload never made, or one of `made` it lost.
async fn all_load_balancers(
    stack: &DevStack,
    made: &[String],
) -> Result<Vec<LoadBalancer>, String> {
    let store = stack.adapters.store.as_ref();
    let mut rows = Vec::new();
    for id in made {
        let id = bc_domain::LoadBalancerId::parse(id).expect("id");
        rows.push(
            store
                .load_balancer_get_any(&id)
                .await
                .expect("load_balancer_get_any")
                .ok_or(format!("{id} lost"))?,
        );
    }
    if let Some(stray) = swept_load_balancers(stack)
        .await
        .into_iter()
        .find(|l| !made.iter().any(|m| m == l.load_balancer_id.as_str()))
    {
        return Err(format!("a load balancer nobody made: {}", stray.load_balancer_id));
    }
    Ok(rows)
}

/// Every load balancer row not yet deleted.
async fn swept_load_balancers(stack: &DevStack) -> Vec<LoadBalancer> {
    let store = stack.adapters.store.as_ref();
    let mut out = Vec::new();
    let mut page = PageRequest::first(500);
    loop {
        let got = store.load_balancer_sweep(&page).await.expect("load_balancer_sweep");
        out.extend(got.items);
        match got.next {
            Some(c) => page = PageRequest { after: Some(c), limit: 500 },
            None => return out,
        }
    }
}

async fn all_billing(stack: &DevStack) -> Vec<BillingInterval> {
    let store = stack.adapters.store.as_ref();
    let far = Timestamp::from_unix_ms(4_102_444_800_000); // 2100
    let mut out = Vec::new();
    let mut page = PageRequest::first(500);
    loop {
        let got = store
            .billing_list(&tenant(), Timestamp::EPOCH, far, None, &page)
            .await
            .expect("billing_list");
        out.extend(got.items);
        match got.next {
            Some(c) => page = PageRequest { after: Some(c), limit: 500 },
            None => return out,
        }
    }
}

/// See [`Workload::books`].
async fn books(
    stack: &DevStack,
    tokens: &BTreeMap<String, String>,
    made: &[String],
    lb_pools: &[String],
    k8s_pools: &[String],
    expect_live: usize,
) -> Result<String, String> {
    let store = stack.adapters.store.as_ref();
    let now = stack.adapters.clock.now();
    let lbs = all_load_balancers(stack, made).await?;
    let (live, deleted): (Vec<&LoadBalancer>, Vec<&LoadBalancer>) =
        lbs.iter().partition(|l| !l.delete_requested);
    if live.len() != expect_live {
        return Err(format!("{} live load balancers in the store, {expect_live} made", live.len()));
    }
    for l in &live {
        if l.status.state != ResourceState::Ready || l.status.observed_generation != l.generation {
            let work = store
                .work_get(
                    bc_domain::ports::WorkKind::ProviderResources,
                    l.load_balancer_id.as_str(),
                )
                .await
                .expect("work_get");
            return Err(format!(
                "{} {:?} ({:?}) at generation {} of {}, provider id {:?}; work item {work:?}",
                l.load_balancer_id,
                l.status.state,
                l.status.message,
                l.status.observed_generation,
                l.generation,
                l.provider_load_balancer_id
            ));
        }
    }
    for l in &deleted {
        if l.status.state != ResourceState::Deleted || !l.quota_released {
            return Err(format!(
                "{} deleting: {:?}, quota released {}",
                l.load_balancer_id, l.status.state, l.quota_released
            ));
        }
    }
    // The simulator: exactly the live ones, once each, as recorded.
    let mut sim_count = 0;
    for (account, token) in tokens {
        let held = stack.sim.state().model().list_load_balancers(token, now).expect("account");
        sim_count += held.len();
        let mut names = BTreeSet::new();
        for h in &held {
            if !names.insert(h.name.clone()) {
                return Err(format!("duplicate load balancer {:?} at the simulator", h.name));
            }
        }
        let want: Vec<&&LoadBalancer> =
            live.iter().filter(|l| l.provider_account_id.as_str() == account).collect();
        let want_names: BTreeSet<String> =
            want.iter().map(|l| l.name.as_str().to_owned()).collect();
        if names != want_names {
            let orphans: Vec<_> = names.difference(&want_names).collect();
            let missing: Vec<_> = want_names.difference(&names).collect();
            return Err(format!("account {account}: orphans {orphans:?}, missing {missing:?}"));
        }
        for l in want {
            let h = held.iter().find(|h| h.name == l.name.as_str()).expect("by name");
            if l.provider_load_balancer_id.as_deref() != Some(h.id.as_str()) {
                return Err(format!(
                    "{} recorded {:?}, held {}",
                    l.load_balancer_id, l.provider_load_balancer_id, h.id
                ));
            }
            let want_port = l.spec.forwarding_rules.first().map(|r| r.target_port);
            let held_port = h.forwarding_rules.first().map(|r| r.target_port);
            if want_port != held_port {
                return Err(format!(
                    "{}: port {held_port:?} held, {want_port:?} wanted",
                    l.load_balancer_id
                ));
            }
        }
    }
    // Quotas: a unit per live load balancer, none for the deleted.
    for pool in lb_pools {
        let pool_id = PoolId::parse(pool).expect("pool id");
        let used = store
            .quota_get(&pool_id, QuotaResource::LoadBalancers)
            .await
            .expect("quota_get")
            .map_or(0, |q| q.used);
        let in_pool = live.iter().filter(|l| l.pool_id == pool_id).count();
        if used as usize != in_pool {
            return Err(format!("pool {pool}: quota used {used}, {in_pool} live"));
        }
    }
    // Billing: one interval per load balancer that was ever ready, closed once deleted.
    let billing = all_billing(stack).await;
    let lb_meter: Vec<&BillingInterval> =
        billing.iter().filter(|b| b.meter == METER_LOAD_BALANCER_HOURS).collect();
    for l in &lbs {
        let of: Vec<_> =
            lb_meter.iter().filter(|b| b.resource == l.load_balancer_id.as_str()).collect();
        let want = usize::from(l.ready_at.is_some());
        if of.len() != want {
            return Err(format!(
                "{}: {} billing intervals, ready at {:?}",
                l.load_balancer_id,
                of.len(),
                l.ready_at
            ));
        }
        if let Some(b) = of.first()
            && b.end.is_some() != l.delete_requested
        {
            return Err(format!(
                "{}: interval end {:?}, deleted {}",
                l.load_balancer_id, b.end, l.delete_requested
            ));
        }
    }
    if let Some(stray) =
        lb_meter.iter().find(|b| !lbs.iter().any(|l| l.load_balancer_id.as_str() == b.resource))
    {
        return Err(format!("a billing interval of no load balancer: {}", stray.resource));
    }
    // Kubernetes: each substrate ready on one cluster at the simulator, whose node pools
    // are exactly the live ones recorded, once each, at the recorded sizes.
    let mut clusters = 0;
    let mut node_pools = 0;
    for pool in k8s_pools {
        let pool_id = PoolId::parse(pool).expect("pool id");
        let sub =
            store.substrate_get_any(&pool_id).await.expect("substrate").ok_or("no substrate")?;
        if sub.state != ResourceState::Ready {
            return Err(format!("substrate {pool}: {:?} {:?}", sub.state, sub.message));
        }
        let cluster_id = sub.cluster_id.ok_or("substrate without a cluster")?;
        let cluster =
            store.cluster_get_any(&cluster_id).await.expect("cluster").ok_or("no cluster")?;
        let token = &tokens[cluster.provider_account_id.as_str()];
        let held = stack.sim.state().model().list_clusters(token, now).expect("account");
        let named: Vec<_> = held.iter().filter(|c| c.name == cluster.name.as_str()).collect();
        if named.len() != 1 {
            return Err(format!(
                "{} clusters named {} at the simulator",
                named.len(),
                cluster.name.as_str()
            ));
        }
        let held_cluster = named[0];
        if cluster.provider_cluster_id.as_deref() != Some(held_cluster.id.as_str()) {
            return Err(format!(
                "cluster {cluster_id}: recorded {:?}",
                cluster.provider_cluster_id
            ));
        }
        clusters += 1;
        let mut rows = Vec::new();
        let mut page = PageRequest::first(100);
        loop {
            let got =
                store.node_pool_list_by_cluster(&cluster_id, &page).await.expect("node pools");
            rows.extend(got.items);
            match got.next {
                Some(c) => page = PageRequest { after: Some(c), limit: 100 },
                None => break,
            }
        }
        let live_rows: Vec<_> = rows.iter().filter(|n| !n.delete_requested).collect();
        for n in &rows {
            let done = if n.delete_requested {
                n.state == NodePoolState::Deleted
            } else {
                n.state == NodePoolState::Ready && n.observed_generation == n.generation
            };
            if !done {
                return Err(format!(
                    "node pool {} {:?} at {} of {}",
                    n.name, n.state, n.observed_generation, n.generation
                ));
            }
        }
        let held_pools: Vec<_> = held_cluster.node_pools.iter().filter(|p| !p.deleting).collect();
        let held_names: BTreeSet<&str> = held_pools.iter().map(|p| p.name.as_str()).collect();
        if held_names.len() != held_pools.len() {
            return Err(format!("duplicate node pools at the simulator: {held_names:?}"));
        }
        let want_names: BTreeSet<&str> = live_rows.iter().map(|n| n.name.as_str()).collect();
        if held_names != want_names {
            return Err(format!(
                "cluster {cluster_id}: node pools held {held_names:?}, live {want_names:?}"
            ));
        }
        for n in &live_rows {
            let h = held_pools.iter().find(|p| p.name == n.name).expect("by name");
            if n.provider_node_pool_id.as_deref() != Some(h.id.as_str())
                || bc_domain::policy::Scale::Count(h.count) != n.scale
            {
                return Err(format!(
                    "node pool {}: recorded {:?} {:?}, held {} x{}",
                    n.name, n.provider_node_pool_id, n.scale, h.id, h.count
                ));
            }
        }
        node_pools += live_rows.len();
    }
    Ok(format!(
        "{} live and {} deleted load balancers ({sim_count} at the simulator), {} billing intervals, {clusters} clusters with {node_pools} node pools",
        live.len(),
        deleted.len(),
        lb_meter.len()
    ))
}
