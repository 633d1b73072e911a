//! `cargo xtask bench sim`: throughput of the simulated cloud — HTTP face requests per
//! second over loopback, creating and paging through load balancers, the DigitalOcean
//! adapter's calls over loopback, and a cluster's Kubernetes API through the kube adapter
//! in process as the substrate reconciler uses it (`bc_sim::testing::Cloud`, what the
//! reconcilers' tests and benchmark run on) — so end-to-end tests and reconciler
//! benchmarks know what the simulator and the wire cost. The HTTP face is
//! set against DigitalOcean's own limit of 250 requests per minute per token
//! (research/peers.md §4): the simulator must never be what a budgeted client waits on.
//! `--quick`: three smaller runs instead of five.
//!
//! Invariant: measures and emits only (bc_testkit::bench); asserts nothing about time.
//! Every loop is bounded in count. Rate limits are raised so the simulator's throttling
//! does not skew it.

use std::sync::Arc;
use std::time::Instant;

use bc_domain::ports::{KubernetesProvider, LoadBalancerProvider};
use bc_sim::config::{RateLimits, SimConfig};
use bc_sim::testing::Cloud;
use bc_testkit::bench::{self, Against, Better, Figure, Reference};
use serde_json::json;

/// The benchmark's name in the report.
const BENCH: &str = "sim";
/// The simulator's token.
const T: &str = bc_sim::config::DEFAULT_TOKEN;
/// Concurrent HTTP clients for the GETs.
const IN_FLIGHT: usize = 16;
/// DigitalOcean's rate limit per token, per second (250 per minute; peers.md §4).
const DO_PER_SECOND: f64 = 250.0 / 60.0;

/// Counts per run.
struct Plan {
    runs: usize,
    /// HTTP GETs and adapter `options()` calls per run.
    requests: usize,
    /// Load balancers created over HTTP per run.
    load_balancers: usize,
    /// Adapter listings of every load balancer per run.
    listings: usize,
    /// Pools whose four substrate objects are applied per run.
    kube_pools: usize,
}

const FULL: Plan =
    Plan { runs: 5, requests: 2_000, load_balancers: 200, listings: 20, kube_pools: 500 };
const QUICK: Plan =
    Plan { runs: 3, requests: 500, load_balancers: 50, listings: 5, kube_pools: 100 };

/// Items per second since `started`.
fn rate(items: usize, started: Instant) -> f64 {
    items as f64 / started.elapsed().as_secs_f64().max(1e-9)
}

#[tokio::main]
async fn main() {
    bc_sim::install_crypto();
    let plan = if bench::quick() { &QUICK } else { &FULL };
    let config = SimConfig {
        rate_limits: RateLimits { per_hour: u32::MAX, per_minute: u32::MAX },
        ..SimConfig::default()
    };
    let cloud = Cloud::with_config(config).await;
    let http = reqwest::Client::new();
    let base = cloud.server.url();
    let adapter = cloud.provider(T);
    let kube = Kube::new(&cloud).await;

    let mut samples: [Vec<f64>; 7] = Default::default();
    let mut created = 0;
    for run in 0..plan.runs {
        // Simple authenticated GETs, IN_FLIGHT at a time.
        let started = Instant::now();
        let mut tasks = Vec::new();
        for w in 0..IN_FLIGHT {
            let (http, base) = (http.clone(), base.clone());
            let n = plan.requests / IN_FLIGHT + usize::from(w < plan.requests % IN_FLIGHT);
            tasks.push(tokio::spawn(async move {
                for _ in 0..n {
                    let r = http
                        .get(format!("{base}/v2/kubernetes/options"))
                        .bearer_auth(T)
                        .send()
                        .await;
                    let _ = r.expect("request").bytes().await;
                }
            }));
        }
        for t in tasks {
            t.await.expect("worker");
        }
        samples[0].push(rate(plan.requests, started));

        // Create load balancers over HTTP, one at a time, then page through them all.
        let started = Instant::now();
        for _ in 0..plan.load_balancers {
            let body = json!({
                "name": format!("lb-{created}"), "region": "nyc1", "droplet_ids": [1],
                "forwarding_rules": [{"entry_protocol": "http", "entry_port": 80, "target_protocol": "http", "target_port": 80}],
            });
            created += 1;
            let r = http
                .post(format!("{base}/v2/load_balancers"))
                .bearer_auth(T)
                .json(&body)
                .send()
                .await;
            let _ = r.expect("request").bytes().await;
        }
        samples[1].push(rate(plan.load_balancers, started));
        let started = Instant::now();
        let mut url = Some(format!("{base}/v2/load_balancers?per_page=200"));
        let mut pages = 0;
        while let Some(u) = url.take() {
            let v: serde_json::Value = http
                .get(u)
                .bearer_auth(T)
                .send()
                .await
                .expect("request")
                .json()
                .await
                .expect("json");
            pages += 1;
            url = v["links"]["pages"]["next"].as_str().map(str::to_owned);
            assert!(pages <= created / 200 + 2, "paging does not end");
        }
        samples[2].push(rate(pages, started));

        // The DigitalOcean adapter (every page of a list, decoded).
        let started = Instant::now();
        for _ in 0..plan.listings {
            let _ = adapter.list().await.expect("list");
        }
        samples[3].push(rate(plan.listings, started));
        let started = Instant::now();
        for _ in 0..plan.requests {
            let _ = adapter.options().await.expect("options");
        }
        samples[4].push(rate(plan.requests, started));

        let (create, no_op) = kube.apply_twice(run * plan.kube_pools, plan.kube_pools).await;
        samples[5].push(create);
        samples[6].push(no_op);
    }
    let [get, post, pages, listings, options, create, no_op] = samples;
    let lbs = plan.runs * plan.load_balancers;
    let figure = |name: &str, unit: &'static str, s: Vec<f64>| {
        Figure::new(BENCH, name, unit, Better::Higher, s)
    };
    bench::emit(
        &figure(&format!("HTTP GET /v2/kubernetes/options, {IN_FLIGHT} in flight"), "req/s", get)
            .against(Against::constant(
                Reference::Peer,
                "DigitalOcean's limit: 250 requests/min per token",
                DO_PER_SECOND,
            )),
    );
    bench::emit(&figure("HTTP POST /v2/load_balancers, one at a time", "req/s", post));
    bench::emit(&figure(
        &format!("HTTP list pages (per_page 200; up to {lbs} load balancers)"),
        "pages/s",
        pages,
    ));
    bench::emit(&figure(
        &format!("DigitalOcean adapter list of every load balancer (up to {lbs})"),
        "lists/s",
        listings,
    ));
    bench::emit(&figure("DigitalOcean adapter options()", "calls/s", options));
    bench::emit(&figure("kube adapter apply_owned, creating", "objects/s", create.clone()));
    bench::emit(&figure("kube adapter apply_owned, no-op", "objects/s", no_op).against(Against {
        reference: Reference::Baseline,
        name: "apply_owned creating (same runs)".into(),
        samples: create,
    }));
}

/// A simulated cluster's Kubernetes API through the kube adapter, in process.
struct Kube {
    client: Arc<dyn bc_domain::ports::ClusterClient>,
}

impl Kube {
    /// A running cluster of `cloud` and a client connected to it.
    async fn new(cloud: &Cloud) -> Self {
        use bc_domain::model::SecretString;
        use bc_domain::ports::ClusterApi;
        use bc_sim::testing;
        let id = testing::create_cluster(&cloud.sim, "bench", testing::standard_pools());
        testing::run_until_running(&cloud.sim, &cloud.clock, &id);
        let kubeconfig = SecretString::new(testing::kubeconfig(&cloud.sim, &id));
        let client = cloud.clusters().connect(&kubeconfig).await.expect("connect");
        Kube { client }
    }

    /// Per pool `first..first + pools` the Namespace, the join Secret, the bcd
    /// ServiceAccount and DaemonSet, applied with the ownership rule (read, then create or
    /// apply), then the same again (all no-ops): objects per second of each pass.
    async fn apply_twice(&self, first: usize, pools: usize) -> (f64, f64) {
        use bc_sim::testing;
        let substrate = |i: usize| {
            let mut s = testing::Substrate::new("http://127.0.0.1:9", "tok");
            s.pool = format!("p{i}");
            s.namespace = format!("bc-p{i}");
            s
        };
        let mut rates = [0.0; 2];
        for r in &mut rates {
            let started = Instant::now();
            let mut objects = 0;
            for i in first..first + pools {
                let s = substrate(i);
                for o in s.objects() {
                    self.client.apply_owned(&o, &testing::owner(&s.pool)).await.expect("apply");
                    objects += 1;
                }
            }
            *r = rate(objects, started);
        }
        (rates[0], rates[1])
    }
}
