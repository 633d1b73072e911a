//! A simulated cloud kept across a restart (`bc_sim::persist`): restored from its
//! snapshot and served again, it answers as before — the same clusters, node pools,
//! nodes and load balancers; the same Kubernetes objects (uid, resourceVersion, fields),
//! with resource versions growing on; new ids and addresses never handed out twice —
//! and a kubeconfig from before the restart still works (same CA, token and address).
//! A snapshot file is written whole, readable by its owner only; one that does not
//! read is an error naming it.

use bc_domain::ports::Clock as _;
use bc_sim::persist::PersistError;
use bc_sim::testing::{self, Reply, TEST_TOKEN};
use bc_sim::{Sim, SimConfig, SimServer};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use reqwest::Method;
use serde_json::Value;

/// The most clock steps a wait takes.
const MAX_STEPS: usize = 60;

struct Up {
    sim: Sim,
    server: SimServer,
    http: reqwest::Client,
}

async fn serve(sim: Sim) -> Up {
    let server = sim.serve("127.0.0.1:0".parse().unwrap()).await.expect("serve");
    let http = testing::http_client();
    Up { sim, server, http }
}

impl Up {
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Reply {
        let mut rb = self
            .http
            .request(method, format!("{}{path}", self.server.url()))
            .bearer_auth(TEST_TOKEN);
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        testing::send(rb).await
    }

    async fn get(&self, path: &str) -> Value {
        let r = self.call(Method::GET, path, None).await;
        assert_eq!(r.status, 200, "GET {path}: {}", r.text);
        r.json()
    }
}

fn droplets(cluster: &Value) -> Vec<String> {
    let pools = cluster["node_pools"].as_array().into_iter().flatten();
    let nodes = pools.flat_map(|p| p["nodes"].as_array().into_iter().flatten());
    nodes.filter_map(|n| n["droplet_id"].as_str().map(str::to_owned)).collect()
}

#[tokio::test]
async fn a_restored_cloud_answers_as_before_and_old_kubeconfigs_work() {
    let clock = testing::clock();
    let up = serve(Sim::new(SimConfig::default(), clock.clone())).await;
    let r =
        up.call(Method::POST, "/v2/kubernetes/clusters", Some(testing::cluster_body("kept"))).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let id = r.json()["kubernetes_cluster"]["id"].as_str().unwrap().to_owned();
    let path = format!("/v2/kubernetes/clusters/{id}");
    for _ in 0..MAX_STEPS {
        let c = up.get(&path).await["kubernetes_cluster"].clone();
        if c["status"]["state"] == "running" && droplets(&c).len() == 2 {
            break;
        }
        testing::step(&clock, 10);
    }
    let before = up.get(&path).await;
    assert_eq!(droplets(&before["kubernetes_cluster"]).len(), 2, "{before}");
    let lb = up.call(Method::POST, "/v2/load_balancers", Some(testing::lb_body("kept-lb"))).await;
    assert_eq!(lb.status, 202, "{}", lb.text);
    let lb_id = lb.json()["load_balancer"]["id"].as_str().unwrap().to_owned();
    let lb_before = up.get(&format!("/v2/load_balancers/{lb_id}")).await;

    // A kubeconfig handed out before the restart, and an object written with it.
    let r = up.call(Method::GET, &format!("{path}/kubeconfig"), None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let kubeconfig = r.text;
    let cms = Api::<ConfigMap>::namespaced(testing::kube_client(&kubeconfig).await, "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("kept".into());
    cm.data = Some([("a".to_owned(), "b".to_owned())].into());
    let made = testing::bounded(cms.create(&PostParams::default(), &cm)).await.expect("create");

    let snapshot = up.sim.snapshot();
    let old_ca = up.sim.state().tls.ca_pem().to_owned();
    up.server.shutdown().await;
    drop(up.sim);

    let restored = Sim::restore(SimConfig::default(), clock.clone(), &snapshot).expect("restores");
    assert_eq!(restored.state().tls.ca_pem(), old_ca, "the CA is kept");
    let up = serve(restored).await;
    assert_eq!(up.get(&path).await, before, "the cluster answers as before");
    assert_eq!(up.get(&format!("/v2/load_balancers/{lb_id}")).await, lb_before);

    // The old kubeconfig: same address, CA and token; the object as it was.
    let cms = Api::<ConfigMap>::namespaced(testing::kube_client(&kubeconfig).await, "default");
    let got = testing::bounded(cms.get("kept")).await.expect("the old kubeconfig works");
    assert_eq!(got.metadata.uid, made.metadata.uid);
    assert_eq!(got.metadata.resource_version, made.metadata.resource_version);
    assert_eq!(got.metadata.managed_fields, made.metadata.managed_fields);
    assert_eq!(got.data, made.data);
    let mut cm2 = ConfigMap::default();
    cm2.metadata.name = Some("after".into());
    let after = testing::bounded(cms.create(&PostParams::default(), &cm2)).await.expect("create");
    let rv = |c: &ConfigMap| c.metadata.resource_version.clone().unwrap().parse::<u64>().unwrap();
    assert!(rv(&after) > rv(&made), "resource versions grow on: {} then {}", rv(&made), rv(&after));

    // New ids and addresses are not ones handed out before.
    let r =
        up.call(Method::POST, "/v2/kubernetes/clusters", Some(testing::cluster_body("new"))).await;
    let new_id = r.json()["kubernetes_cluster"]["id"].as_str().unwrap().to_owned();
    for _ in 0..MAX_STEPS {
        let c = up.get(&format!("/v2/kubernetes/clusters/{new_id}")).await;
        if droplets(&c["kubernetes_cluster"]).len() == 2 {
            let old = droplets(&before["kubernetes_cluster"]);
            let new = droplets(&c["kubernetes_cluster"]);
            assert!(new.iter().all(|d| !old.contains(d)), "droplets {old:?} then {new:?}");
            up.server.shutdown().await;
            return;
        }
        testing::step(&clock, 10);
    }
    panic!("the new cluster's nodes did not run");
}

#[tokio::test]
async fn a_kept_file_is_whole_private_and_read_back_and_a_bad_one_is_named() {
    let dir = std::env::temp_dir().join(format!("bc-sim-persist-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("sim.json");
    let _ = std::fs::remove_file(&file);
    let clock = testing::clock();

    // Nothing kept yet: a new, empty cloud.
    let sim = Sim::open(SimConfig::default(), clock.clone(), &file).expect("opens");
    let keeper = sim.keep_in(&file, std::time::Duration::from_secs(3600));
    let c = sim.state().model().create_cluster(
        TEST_TOKEN,
        testing::cluster_create("kept", "latest", vec![testing::node_pool("p", 1, &[])]),
        clock.now(),
    );
    let id = c.expect("cluster").id;
    assert!(keeper.save().expect("writes"), "a change is written");
    assert!(!keeper.save().expect("checks"), "no change, no write");
    keeper.finish().await.expect("last write");
    let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["sim.json"], "no temporary file is left");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "it holds the CA's key: owner only");
    }
    let again = Sim::open(SimConfig::default(), clock.clone(), &file).expect("reads back");
    let got = again.state().model().get_cluster(TEST_TOKEN, &id, clock.now());
    assert_eq!(got.expect("the cluster is kept").name, "kept");

    // A secret where a number belongs: the error names the place, not the value.
    std::fs::write(&file, b"{\"version\": 1, \"ca\": \"dop_v1_secret\"}").unwrap();
    match Sim::open(SimConfig::default(), clock, &file) {
        Err(PersistError::Invalid { path, why }) => {
            assert_eq!(path, file);
            assert!(why.starts_with("ca: "), "names the field: {why}");
            assert!(!why.contains("dop_v1_secret"), "{why}");
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a bad file read as a cloud"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}
