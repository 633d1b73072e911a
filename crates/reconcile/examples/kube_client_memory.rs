//! What one connected cluster client holds (issue 31, item 3): the live heap bytes of N
//! clients made by the production kube adapter over the network path (`kube::Client`
//! with its own rustls configuration, root store of the kubeconfig's CA, hyper
//! connection pool and request buffer, and the worker task the buffer spawns), each
//! from a kubeconfig as DigitalOcean hands it out (a bearer token and the cluster's CA
//! inline). No cluster is called: this is what a client costs while it is only held.
//!
//! Usage: `cargo run -p bc-reconcile --example kube_client_memory -- [N]` (default 1,000).
//!
//! Invariant: counting never changes what is allocated; the figure is allocator bytes
//! (live after − live before, over N), not resident pages.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use bc_domain::model::SecretString;
use bc_domain::ports::ClusterApi as _;
use bc_providers::kube::KubeClusterApi;
use tracking_allocator::{AllocationGroupId, AllocationRegistry, AllocationTracker, Allocator};

/// The system allocator, every block counted (`tracking-allocator`, as the reconcile
/// benchmark's).
#[global_allocator]
static ALLOCATOR: Allocator<std::alloc::System> = Allocator::system();

static LIVE: AtomicI64 = AtomicI64::new(0);

struct Live;

impl AllocationTracker for Live {
    fn allocated(&self, _addr: usize, _object: usize, wrapped: usize, _g: AllocationGroupId) {
        LIVE.fetch_add(wrapped as i64, Ordering::Relaxed);
    }
    fn deallocated(
        &self,
        _addr: usize,
        _object: usize,
        wrapped: usize,
        _source: AllocationGroupId,
        _current: AllocationGroupId,
    ) {
        LIVE.fetch_sub(wrapped as i64, Ordering::Relaxed);
    }
}

/// A kubeconfig as DigitalOcean's `GET …/kubeconfig?type=token` has it: cluster `i`.
fn kubeconfig(i: usize, ca_data: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {ca_data}\n    server: https://c-{i}.k8s.ondigitalocean.com\n  name: do-c-{i}\ncontexts:\n- context:\n    cluster: do-c-{i}\n    user: do-c-{i}-admin\n  name: do-c-{i}\ncurrent-context: do-c-{i}\nusers:\n- name: do-c-{i}-admin\n  user:\n    token: dop_v1_{i:064}\n"
    )
}

fn live() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

fn main() {
    if AllocationRegistry::set_global_tracker(Live).is_ok() {
        AllocationRegistry::enable_tracking();
    }
    let n: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1_000);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio");
    rt.block_on(async {
        let ca = bc_sim::tls::SimTls::default().ca_data();
        let api = KubeClusterApi::new();
        // One first, so what is made once per process (the crypto provider, the
        // runtime's first task slots) is not counted per client.
        let first = api.connect(&SecretString::new(kubeconfig(n, &ca))).await.expect("connect");
        let settle = || tokio::time::sleep(Duration::from_millis(200));
        settle().await;
        let mut clients = Vec::with_capacity(n);
        let before = live();
        for i in 0..n {
            let kc = SecretString::new(kubeconfig(i, &ca));
            clients.push(api.connect(&kc).await.expect("connect"));
        }
        // The buffers' workers are spawned tasks: let them start.
        settle().await;
        let held = live() - before;
        drop(clients);
        settle().await;
        let left = live() - before;
        drop(first);
        let per = held as f64 / n as f64;
        println!(
            "{n} kube clients held: {:.2} MiB, {:.1} KiB per client",
            held as f64 / 1048576.0,
            per / 1024.0
        );
        println!("after dropping them: {:.3} MiB still live", left as f64 / 1048576.0);
        // Of that, the TLS configuration alone (what `kube` builds for each client:
        // crypto provider, the CA as root store, session resumption cache).
        let mut configs = Vec::with_capacity(n);
        let before = live();
        for i in 0..n {
            let kc = ::kube::config::Kubeconfig::from_yaml(&kubeconfig(i, &ca)).expect("yaml");
            let options = ::kube::config::KubeConfigOptions::default();
            let config =
                ::kube::Config::from_custom_kubeconfig(kc, &options).await.expect("config");
            let tls = ::kube::client::ConfigExt::rustls_client_config(&config).expect("tls");
            configs.push(tls);
        }
        let tls = live() - before;
        println!(
            "of which their rustls client configurations: {:.1} KiB per client",
            tls as f64 / n as f64 / 1024.0
        );
    });
}
