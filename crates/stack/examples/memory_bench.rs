//! `cargo xtask bench memory`: the peak RSS of the real `bc-api` and `bc-reconciler`
//! release binaries, each its own process, once N load balancers and N/10 Kubernetes
//! substrates made through the API have converged at the simulator (issue 12, item 1;
//! issue 31, item 3: ≤ 200 MiB each at N = 10,000).
//!
//! Per run: a dev stack supplies the database (a fresh PostgreSQL database when
//! `BC_TEST_POSTGRES_URL` is set, else a SQLite file), the simulated cloud (zero delays,
//! one simulated account per 25 load balancers, so DigitalOcean's per-token budget —
//! bursts of 40 — never paces the converge), its simulated bcd agents and the operator
//! token; its own API and reconcilers stay idle. `bc-api serve` and `bc-reconciler` then
//! run as child processes on that database; the load balancers and the substrates' pools
//! (one per [`LBS_PER_SUBSTRATE`] load balancers, [`FLAVORS`] node pools each, spread
//! over the accounts) are made through `bc-api` over HTTP, the run waits until every load
//! balancer is `ready` (listed through the API), every substrate is `ready` (read from
//! the store) and every substrate node's bcd has joined through `bc-api`, and each
//! process's `VmHWM` is read from `/proc/<pid>/status`. The simulator — the DigitalOcean
//! API and every simulated cluster's Kubernetes API (a TLS listener per cluster, which
//! the reconciler's and the API's kube clients reach over loopback) — runs in this
//! process, so the simulated clusters' memory is never counted as the reconciler's; it
//! is reported apart (this process's `VmHWM`). The binaries are `BC_API_BIN` /
//! `BC_RECONCILER_BIN` when set, else this workspace's release builds (built first, so
//! they match the source).
//!
//! Invariant: every wait is a bounded count of short polls; child processes are killed
//! on every path (in `Drop`); every address is loopback.
//!
//! Usage: `cargo xtask bench memory [-- --quick]`; by hand, `--sizes 100,1000,10000`,
//! `--repeat 3`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bc_domain::ResourceState;
use bc_domain::model::{Grant, Role, Scope};
use bc_domain::ports::{PageRequest, SubstrateRepo as _};
use bc_sim::config::Delays;
use bc_stack::dev::{DEV_TENANT, DevStack};
use bc_stack::testing::{self, Backend, Scratch};
use bc_testkit::bench::{Against, Better, Figure, Reference, emit};
use futures::{StreamExt as _, TryStreamExt as _};
use serde_json::{Value, json};

/// Load balancers per simulated account (under the budget's burst of 40 calls).
const PER_ACCOUNT: usize = 25;
/// One Kubernetes substrate per this many load balancers (the reconcile benchmark's
/// N/10: 1,000 substrates at N = 10,000).
const LBS_PER_SUBSTRATE: usize = 10;
/// The flavors of each substrate (a node pool of one node each), as the reconcile
/// benchmark's three.
const FLAVORS: [(&str, &str); 3] =
    [("cpu", "s-2vcpu-4gb"), ("mem", "s-4vcpu-8gb"), ("arm", "s-2vcpu-4gb")];
/// API calls in flight while making the objects.
const IN_FLIGHT: usize = 16;
/// Operator tokens the creates are spread over: the API limits each token to 100
/// requests a second (bursts of 100), which alone would pace 11,000 creates at 110 s; a
/// fleet of clients holds many tokens.
const CALLERS: usize = 8;
/// How many times one call is tried while it is answered 429.
const RATE_LIMITED_TRIES: u32 = 60;
/// Polls of the converge wait (at [`POLL`] each): ten minutes, and a tenth of a second
/// more per load balancer (`n / 5` more polls).
const POLLS: usize = 1_200;
const POLL: Duration = Duration::from_millis(500);
/// The target of issue 31, item 3, for each binary's peak RSS.
const TARGET_MIB: f64 = 200.0;

/// A child process, killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Proc {
    /// Its peak resident set (`VmHWM`), in MiB.
    fn peak_rss_mib(&self) -> f64 {
        bc_testkit::bench::peak_rss_mib(Some(self.0.id()))
    }

    /// Fails naming `what` if the process has exited.
    fn alive(&mut self, what: &str, log: &Path) -> anyhow::Result<()> {
        if let Some(status) = self.0.try_wait()? {
            let tail = std::fs::read_to_string(log).unwrap_or_default();
            let tail: Vec<&str> = tail.lines().rev().take(20).collect();
            anyhow::bail!("{what} exited ({status}); its log ends:\n{}", tail.join("\n"));
        }
        Ok(())
    }
}

/// The two binaries: from the environment, or this workspace's release builds.
fn binaries() -> anyhow::Result<(PathBuf, PathBuf)> {
    if let (Ok(api), Ok(rec)) = (std::env::var("BC_API_BIN"), std::env::var("BC_RECONCILER_BIN")) {
        return Ok((api.into(), rec.into()));
    }
    // target/release/examples/memory_bench → target/release/
    let exe = std::env::current_exe()?;
    let dir = exe.parent().and_then(Path::parent).map(Path::to_path_buf);
    let dir = dir.ok_or_else(|| anyhow::anyhow!("no target directory above {}", exe.display()))?;
    let profile = dir.file_name().and_then(|n| n.to_str()).unwrap_or("release").to_owned();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(cargo);
    build.args(["build", "--quiet", "-p", "bc-api-bin", "-p", "bc-reconciler", "--bins"]);
    if profile == "release" {
        build.arg("--release");
    }
    let status = build.status()?;
    anyhow::ensure!(status.success(), "building bc-api and bc-reconciler failed: {status}");
    Ok((dir.join("bc-api"), dir.join("bc-reconciler")))
}

fn zero_delays() -> Delays {
    let z = Duration::ZERO;
    Delays {
        cluster_provision: z,
        node_provision: z,
        node_delete: z,
        cluster_upgrade: z,
        cluster_delete: z,
        load_balancer_provision: z,
        load_balancer_resize_every: Duration::from_secs(60),
    }
}

/// How many of the tenant's load balancers are `ready`, and how many there are: every
/// page of `loadBalancers.list` (500 a page, the most the API gives), through the client.
async fn lbs_ready(api: &bc_client::Client) -> anyhow::Result<(usize, usize)> {
    use bc_client::api::load_balancers::{self, LoadBalancersListInput};
    let input = LoadBalancersListInput {
        tenant_id: DEV_TENANT.parse()?,
        pool_id: None,
        provider_account_id: None,
        page_size: bc_client::api::PageSize::new(500),
        page_token: None,
    };
    let all: Vec<_> = api.list(load_balancers::List, input).try_collect().await?;
    let ready = all.iter().filter(|l| l.state == ResourceState::Ready).count();
    Ok((ready, all.len()))
}

/// How many substrates are `ready`: swept from the store page by page (the API reads a
/// substrate by its pool only, one call each).
async fn substrates_ready(stack: &DevStack) -> anyhow::Result<usize> {
    let store = &stack.adapters.store;
    let mut ready = 0;
    let mut page = PageRequest::first(500);
    for _ in 0..10_000 {
        let p = store.substrate_sweep(&page).await?;
        ready += p.items.iter().filter(|s| s.state == ResourceState::Ready).count();
        match p.next {
            Some(next) => page = PageRequest { after: Some(next), limit: 500 },
            None => break,
        }
    }
    Ok(ready)
}

/// How many simulated nodes' bcd have joined through `bc-api`, as the simulator saw it.
fn nodes_joined(stack: &DevStack) -> usize {
    stack.sim.state().bcd.join_outcomes().values().filter(|o| o.joined).count()
}

/// A free loopback port (bound, read, released: `bc-api` binds it next).
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// What one run measured.
struct Run {
    api_mib: f64,
    reconciler_mib: f64,
    /// This process: the simulated cloud (every cluster's Kubernetes API), the dev
    /// stack's idle API and the harness.
    simulator_mib: f64,
    converge_s: f64,
}

/// Calls every body of `calls` (`(method, body)`) through `apis` in turn, [`IN_FLIGHT`]
/// at a time; the answers in order, or the first error.
async fn call_all(
    apis: &[bc_client::Client],
    calls: Vec<(&'static str, Value)>,
) -> anyhow::Result<Vec<Value>> {
    let answers: Vec<_> = futures::stream::iter(calls.into_iter().enumerate())
        .map(|(i, (method, body))| {
            let api = &apis[i % apis.len()];
            async move { api.call_method(method, body).await }
        })
        .buffered(IN_FLIGHT)
        .collect()
        .await;
    Ok(answers.into_iter().collect::<Result<Vec<_>, _>>()?)
}

/// The `field` of each answer (an id).
fn ids(answers: &[Value], field: &str) -> anyhow::Result<Vec<String>> {
    answers
        .iter()
        .map(|a| {
            a[field].as_str().map(str::to_owned).ok_or_else(|| anyhow::anyhow!("no {field} in {a}"))
        })
        .collect()
}

async fn run_once(n: usize, bins: &(PathBuf, PathBuf)) -> anyhow::Result<Run> {
    let scratch = Scratch::new("bc-memory-bench");
    let postgres = bc_testkit::postgres_url().is_some();
    let backend = if postgres { Backend::Postgres } else { Backend::Sqlite };
    let mut options = testing::options(backend, scratch.path())
        .await
        .ok_or_else(|| anyhow::anyhow!("no PostgreSQL"))?;
    options.reconcile = false;
    options.delays = zero_delays();
    // The simulated agents look for nodes to join once a second: every round also
    // refreshes every simulated cluster, which at a thousand clusters every 100 ms (the
    // tests' pace) would take this process's cores from the binaries it measures.
    options.bcd_every = Duration::from_secs(1);
    let accounts = n.div_ceil(PER_ACCOUNT);
    let substrates = n / LBS_PER_SUBSTRATE;
    let tokens: Vec<String> = (1..accounts).map(|i| format!("dop_v1_memory_{i}")).collect();
    options.extra_sim_tokens = tokens.clone();
    let db_url = options.database_url.clone();
    let stack = DevStack::start(options).await?;
    let db_url = db_url
        .unwrap_or_else(|| format!("sqlite://{}?mode=rwc", stack.dir.join("bc.db").display()));

    let port = free_port()?;
    let api_url = format!("http://127.0.0.1:{port}");
    let common = |cmd: &mut Command| {
        cmd.env_clear()
            .env("BC_DATABASE_URL", &db_url)
            .env("BC_SECRET_KEY", &stack.secret_key)
            .env("BC_DIGITALOCEAN_API_URL", &stack.sim_url)
            .env("BC_PUBLIC_URL", &api_url)
            .stdout(Stdio::null());
    };
    let api_log = scratch.path().join("bc-api.log");
    let mut cmd = Command::new(&bins.0);
    common(&mut cmd);
    let mut api_proc = Proc(
        cmd.args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--default-pool-quota", &format!("loadBalancers={n}")])
            .stderr(Stdio::from(std::fs::File::create(&api_log)?))
            .spawn()?,
    );
    // A 429 (the API's per-token rate limit) is waited out as its `Retry-After` says
    // and retried, a bounded number of times, as the client does for every caller (a
    // refused call stored nothing).
    let retry = bc_client::Retry {
        attempts: RATE_LIMITED_TRIES,
        max_wait: Duration::from_secs(10),
        default_wait: Duration::from_secs(1),
    };
    let client =
        |token: &str| bc_client::Client::builder(&api_url).token(token).retry(retry).build();
    let api = client(&stack.token)?;
    // The creators, each with an operator token of its own (made as the dev stack makes
    // its own); the converge wait lists with the dev stack's token.
    let mut creators = Vec::new();
    for _ in 0..CALLERS {
        let grants = vec![Grant { role: Role::Operator, scope: Scope::System, tenant_id: None }];
        let a = &stack.adapters;
        let (_, token) =
            bc_stack::tokens::create(a.store.as_ref(), a.clock.as_ref(), grants).await?;
        creators.push(client(&token)?);
    }
    let http = reqwest::Client::new();
    let mut up = false;
    for _ in 0..200 {
        api_proc.alive("bc-api", &api_log)?;
        if let Ok(r) = http.get(format!("{api_url}/readyz")).send().await
            && r.status().is_success()
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::ensure!(up, "bc-api never became ready at {api_url}");
    let rec_log = scratch.path().join("bc-reconciler.log");
    let mut cmd = Command::new(&bins.1);
    common(&mut cmd);
    let mut rec_proc = Proc(
        cmd.args(["--replica-id", "memory-bench"])
            // The simulator's changes take no time: look again at its pace, as dev mode's
            // in-process reconcilers do, rather than at a real provider's minutes (30 s
            // for a cluster being made), which would measure the waits, not the work.
            .args(["--wait-max-seconds", "1"])
            .stderr(Stdio::from(std::fs::File::create(&rec_log)?))
            .spawn()?,
    );

    let made = call_all(
        &creators,
        tokens
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let body = json!({"tenantId": DEV_TENANT, "provider": "digitalocean",
                       "name": format!("memory-{i}"), "credentials": {"token": t}});
                ("providerAccounts.create", body)
            })
            .collect(),
    )
    .await?;
    let mut account_ids = vec![stack.account_id.clone()];
    account_ids.extend(ids(&made, "providerAccountId")?);
    let pool = api
        .call_method(
            "pools.create",
            json!({"tenantId": DEV_TENANT, "name": "memory", "policy": {}}),
        )
        .await?;
    let pool_id = pool["poolId"].as_str().unwrap_or_default().to_owned();

    let started = Instant::now();
    // The substrates first (they take the longest), spread over the accounts.
    let flavors: Vec<Value> = FLAVORS
        .iter()
        .map(|(name, size)| json!({"name": name, "size": size, "count": 1}))
        .collect();
    let pools = (0..substrates)
        .map(|i| {
            let account = &account_ids[i % accounts];
            let body = json!({"tenantId": DEV_TENANT, "name": format!("k8s-{i}"), "policy": {
                "substrate": {"kind": "kubernetes", "account": account,
                              "cluster": {"create": {"region": "nyc1"}}},
                "flavors": flavors}});
            ("pools.create", body)
        })
        .collect();
    call_all(&creators, pools).await?;
    let lbs = (0..n)
        .map(|i| {
            let body = json!({"tenantId": DEV_TENANT, "poolId": pool_id,
                "providerAccountId": account_ids[i % accounts], "name": format!("lb-{i}"),
                "type": "regional", "region": "nyc1",
                "forwardingRules": [{"entryProtocol": "http", "entryPort": 80,
                                     "targetProtocol": "http", "targetPort": 8080}],
                "targets": {"tag": "web"}});
            ("loadBalancers.create", body)
        })
        .collect();
    call_all(&creators, lbs).await?;
    let created_s = started.elapsed().as_secs_f64();

    // Converged: every load balancer ready, then every substrate, then every node joined
    // (each looked at only once the one before holds).
    let nodes = substrates * FLAVORS.len();
    let mut last = String::new();
    let mut done = false;
    for _ in 0..POLLS + n / 5 {
        api_proc.alive("bc-api", &api_log)?;
        rec_proc.alive("bc-reconciler", &rec_log)?;
        let (lbs, listed) = lbs_ready(&api).await?;
        last = format!("{lbs} of {listed} load balancers ready");
        if lbs >= n {
            let subs = substrates_ready(&stack).await?;
            last = format!("{last}, {subs} of {substrates} substrates ready");
            if subs >= substrates {
                let joined = nodes_joined(&stack);
                last = format!("{last}, {joined} of {nodes} nodes joined");
                if joined >= nodes {
                    done = true;
                    break;
                }
            }
        }
        tokio::time::sleep(POLL).await;
    }
    anyhow::ensure!(done, "not converged: {last}");
    let run = Run {
        api_mib: api_proc.peak_rss_mib(),
        reconciler_mib: rec_proc.peak_rss_mib(),
        simulator_mib: bc_testkit::bench::peak_rss_mib(None),
        converge_s: started.elapsed().as_secs_f64(),
    };
    eprintln!("memory N={n}: made in {created_s:.1} s; converged: {last}");
    drop(rec_proc);
    drop(api_proc);
    stack.stop().await;
    Ok(run)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let flag =
        |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let quick = args.iter().any(|a| a == "--quick");
    let sizes: Vec<usize> = flag("--sizes")
        .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| if quick { vec![100] } else { vec![100, 1_000, 10_000] });
    let repeat: Option<usize> = flag("--repeat").and_then(|s| s.parse().ok());
    let started = Instant::now();
    let bins = binaries()?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let backend = if bc_testkit::postgres_url().is_some() { "postgres" } else { "sqlite" };
    println!("# memory benchmark ({} mode, {backend})", if quick { "quick" } else { "full" });
    for n in sizes {
        let times = repeat.unwrap_or(if n <= 100 && !quick { 3 } else { 1 });
        let mut runs = Vec::new();
        for _ in 0..times {
            let run = rt.block_on(run_once(n, &bins))?;
            eprintln!(
                "memory N={n}: bc-api {:.1} MiB, bc-reconciler {:.1} MiB, this process \
                 (simulator) {:.1} MiB, converged in {:.1} s",
                run.api_mib, run.reconciler_mib, run.simulator_mib, run.converge_s
            );
            runs.push(run);
        }
        let at = format!("{backend} · {n} LBs + {} substrates converged", n / LBS_PER_SUBSTRATE);
        let col = |f: fn(&Run) -> f64| runs.iter().map(f).collect::<Vec<_>>();
        let target = || Against::constant(Reference::Target, "issue 31: ≤ 200 MiB", TARGET_MIB);
        emit(
            &Figure::new(
                "memory",
                format!("{at} · bc-api peak RSS (VmHWM)"),
                "MiB",
                Better::Lower,
                col(|r| r.api_mib),
            )
            .against(target()),
        );
        emit(
            &Figure::new(
                "memory",
                format!("{at} · bc-reconciler peak RSS (VmHWM)"),
                "MiB",
                Better::Lower,
                col(|r| r.reconciler_mib),
            )
            .against(target()),
        );
        emit(&Figure::new(
            "memory",
            format!("{at} · the bench process (simulated cloud and clusters) peak RSS (VmHWM)"),
            "MiB",
            Better::Lower,
            col(|r| r.simulator_mib),
        ));
        emit(&Figure::new(
            "memory",
            format!("{at} · converge through the API, processes (wall)"),
            "s",
            Better::Lower,
            col(|r| r.converge_s),
        ));
    }
    eprintln!("memory bench: {:.1} s wall", started.elapsed().as_secs_f64());
    Ok(())
}
