//! `cargo xtask bench sim`: throughput of the simulated cloud — HTTP face requests per
//! second over loopback, paging through many load balancers, and direct-face calls — so
//! end-to-end tests and reconciler benchmarks know what the simulator itself costs.
//!
//! Invariant: measures only; asserts nothing about time (benchmarks are never timed
//! assertions). Rate limits are raised so the simulator's throttling does not skew it.

use std::sync::Arc;
use std::time::Instant;

use bc_domain::ports::SystemClock;
use bc_domain::ports::{KubernetesProvider, LoadBalancerProvider};
use bc_sim::Sim;
use bc_sim::config::{RateLimits, SimConfig};
use bc_sim::direct::DirectProvider;
use serde_json::json;

const T: &str = bc_sim::config::DEFAULT_TOKEN;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.windows(2).find(|w| w[0] == name).and_then(|w| w[1].parse().ok()).unwrap_or(default)
}

fn report(what: &str, n: usize, started: Instant) {
    let secs = started.elapsed().as_secs_f64();
    println!("{what:<44} {n:>7} in {secs:>8.3} s = {:>10.0}/s", n as f64 / secs.max(1e-9));
}

#[tokio::main]
async fn main() {
    bc_sim::install_crypto();
    let requests = arg("--requests", 5_000);
    let lbs = arg("--load-balancers", 1_000);
    let config = SimConfig {
        rate_limits: RateLimits { per_hour: u32::MAX, per_minute: u32::MAX },
        ..SimConfig::default()
    };
    let sim = Sim::new(config, Arc::new(SystemClock));
    let server = sim.serve("127.0.0.1:0".parse().expect("addr")).await.expect("serve");
    let http = reqwest::Client::new();
    let base = server.url();

    // 1. Simple authenticated GETs, 16 in flight.
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..16 {
        let (http, base) = (http.clone(), base.clone());
        let n = requests / 16 + usize::from(w < requests % 16);
        tasks.push(tokio::spawn(async move {
            for _ in 0..n {
                let r =
                    http.get(format!("{base}/v2/kubernetes/options")).bearer_auth(T).send().await;
                let _ = r.expect("request").bytes().await;
            }
        }));
    }
    for t in tasks {
        t.await.expect("worker");
    }
    report("HTTP GET /v2/kubernetes/options", requests, started);

    // 2. Create many load balancers over HTTP, then page through them all.
    let started = Instant::now();
    for i in 0..lbs {
        let body = json!({
            "name": format!("lb-{i}"), "region": "nyc1", "droplet_ids": [1],
            "forwarding_rules": [{"entry_protocol": "http", "entry_port": 80, "target_protocol": "http", "target_port": 80}],
        });
        let r =
            http.post(format!("{base}/v2/load_balancers")).bearer_auth(T).json(&body).send().await;
        let _ = r.expect("request").bytes().await;
    }
    report("HTTP POST /v2/load_balancers", lbs, started);
    let started = Instant::now();
    let mut url = Some(format!("{base}/v2/load_balancers?per_page=200"));
    let mut pages = 0;
    while let Some(u) = url.take() {
        let v: serde_json::Value =
            http.get(u).bearer_auth(T).send().await.expect("request").json().await.expect("json");
        pages += 1;
        url = v["links"]["pages"]["next"].as_str().map(str::to_owned);
    }
    report("HTTP list pages (per_page 200)", pages, started);

    // 3. The direct face.
    let direct = DirectProvider::new(sim.state().clone(), T);
    let started = Instant::now();
    for _ in 0..100 {
        let _ = direct.list().await.expect("list");
    }
    report(&format!("direct list of {lbs} load balancers"), 100, started);
    let started = Instant::now();
    for _ in 0..requests {
        let _ = direct.options().await.expect("options");
    }
    report("direct options()", requests, started);
    println!("requests counted: {}", sim.state().model().total_requests());

    kube_direct(arg("--objects", 10_000)).await;
}

/// The Kubernetes direct face, as the substrate reconciler uses it: per pool a Namespace,
/// the join Secret, the bcd ServiceAccount and DaemonSet, applied with the ownership rule
/// (read, then create or apply), then the same again (all no-ops).
async fn kube_direct(objects: usize) {
    use bc_domain::model::SecretString;
    use bc_domain::ports::ClusterApi;
    use bc_sim::testing;
    let (sim, clock) = testing::sim(SimConfig::default());
    let id = testing::create_cluster(&sim, "bench", testing::standard_pools());
    testing::run_until_running(&sim, &clock, &id);
    let api = bc_sim::kube::direct::DirectClusterApi::new(sim.state().clone());
    let kubeconfig = SecretString::new(testing::kubeconfig(&sim, &id));
    let client = api.connect(&kubeconfig).await.expect("connect");
    let pools = objects.div_ceil(4);
    let substrate = |i: usize| {
        let mut s = testing::Substrate::new("http://127.0.0.1:9", "tok");
        s.pool = format!("p{i}");
        s.namespace = format!("bc-p{i}");
        s
    };
    for pass in ["apply_owned (create)", "apply_owned (no-op)"] {
        let started = Instant::now();
        for i in 0..pools {
            let s = substrate(i);
            for o in s.objects() {
                client.apply_owned(&o, &testing::owner(&s.pool)).await.expect("apply");
            }
        }
        report(&format!("direct kube {pass}"), pools * 4, started);
    }
}
