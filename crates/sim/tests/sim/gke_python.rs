//! Google's own Python clients against the GKE face: `google-auth` service-account
//! credentials from a key the simulator issued (whose `token_uri` is the simulator's)
//! mint a token at `/token`, and `google-cloud-container`'s ClusterManagerClient (REST
//! transport, `$alt=json;enum-encoding=int`, pointed at the simulator with
//! `client_options.api_endpoint`) makes every call the face serves — and sees Google's
//! exception classes. The interpreter is `BC_GKE_PYTHON` (set by `.ci/run`, which installs
//! the clients with `.ci/gke-python`), else `/opt/bc-ci/gke-python/bin/python3`; under
//! `BC_REQUIRE_SERVICES=1` or `CI=true` a missing one fails this test.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bc_sim::SimConfig;
use bc_sim::testing::{self, ScratchDir, Served};
use serde_json::{Value, json};

const SCRIPT: &str = r#"
import json, sys, time
from google.oauth2 import service_account, credentials as oauth
from google.auth.transport.requests import Request
from google.cloud import container_v1 as c
from google.api_core import exceptions as ex
from google.api_core.client_options import ClientOptions
from google.auth.exceptions import RefreshError

key, endpoint, moving = sys.argv[1], sys.argv[2], sys.argv[3]
sa = service_account.Credentials.from_service_account_file(
    key, scopes=["https://www.googleapis.com/auth/cloud-platform"])
sa.refresh(Request())  # the JWT-bearer grant at the key's token_uri
out = {"token": sa.token.startswith("ya29."), "expiry": sa.expiry is not None}
client = c.ClusterManagerClient(transport="rest", credentials=oauth.Credentials(sa.token),
                                client_options=ClientOptions(api_endpoint=endpoint))
P = "projects/bc-sim-project/locations"

def wait(loc, op):
    for _ in range(2000):
        o = client.get_operation(request=dict(name=f"{P}/{loc}/operations/{op.name}"))
        if o.status == c.Operation.Status.DONE:
            return o
        time.sleep(0.01)
    raise RuntimeError("operation never done: " + op.name)

def err(f):
    try:
        f()
        return None
    except ex.GoogleAPICallError as e:
        return [type(e).__name__, e.message, getattr(e, "reason", None)]
    except RefreshError as e:
        return [type(e).__name__, str(e), None]

cfg = client.get_server_config(request=dict(name=f"{P}/us-central1"))
out["default_version"] = cfg.default_cluster_version
out["channels"] = [ch.channel.name for ch in cfg.channels]

Z = f"{P}/us-central1-a"
C = f"{Z}/clusters/py1"
cluster = c.Cluster(
    name="py1",
    release_channel=c.ReleaseChannel(channel=c.ReleaseChannel.Channel.REGULAR),
    resource_labels={"bc-substrate-pool": "p1"},
    node_pools=[c.NodePool(
        name="cpu", initial_node_count=1,
        config=c.NodeConfig(machine_type="e2-standard-4",
                            labels={"better-compute.dev/flavor": "cpu"},
                            taints=[c.NodeTaint(key="bc/gpu", value="true",
                                                effect=c.NodeTaint.Effect.NO_SCHEDULE)]),
        autoscaling=c.NodePoolAutoscaling(enabled=True, min_node_count=1, max_node_count=4),
        management=c.NodeManagement(auto_upgrade=True, auto_repair=True))])
op = client.create_cluster(request=dict(parent=Z, cluster=cluster))
out["create"] = [op.operation_type.name, op.status.name]
out["busy"] = err(lambda: client.set_labels(request=dict(name=C, resource_labels={}, label_fingerprint="x")))
open(moving, "w").close()  # only now may the simulator's clock move: the create is still running
out["create_done"] = wait("us-central1-a", op).status.name
got = client.get_cluster(request=dict(name=C))
out["cluster"] = [got.status.name, bool(got.endpoint), bool(got.master_auth.cluster_ca_certificate),
                  got.node_pools[0].config.taints[0].effect.name, got.current_master_version]
out["list_all"] = [x.name for x in client.list_clusters(request=dict(parent=f"{P}/-")).clusters]
out["exists"] = err(lambda: client.create_cluster(request=dict(parent=Z, cluster=c.Cluster(name="py1", initial_node_count=1))))
out["not_found"] = err(lambda: client.get_cluster(request=dict(name=f"{Z}/clusters/nope")))
out["bad_name"] = err(lambda: client.create_cluster(request=dict(parent=Z, cluster=c.Cluster(name="Bad_Name", initial_node_count=1))))
out["bad_version"] = err(lambda: client.create_cluster(request=dict(parent=Z, cluster=c.Cluster(name="v", initial_node_count=1, initial_cluster_version="1.20"))))
wait("us-central1-a", client.set_labels(request=dict(name=C, resource_labels={"a": "b"}, label_fingerprint=got.label_fingerprint)))
out["labels"] = dict(client.get_cluster(request=dict(name=C)).resource_labels)
wait("us-central1-a", client.create_node_pool(request=dict(parent=C, node_pool=c.NodePool(name="extra", initial_node_count=2))))
out["pools"] = [p.name for p in client.list_node_pools(request=dict(parent=C)).node_pools]
N = f"{C}/nodePools/extra"
wait("us-central1-a", client.set_node_pool_size(request=dict(name=N, node_count=1)))
wait("us-central1-a", client.set_node_pool_autoscaling(request=dict(name=N, autoscaling=c.NodePoolAutoscaling(enabled=True, max_node_count=3))))
wait("us-central1-a", client.update_node_pool(request=dict(name=N, labels=c.NodeLabels(labels={"x": "y"}))))
out["no_fields"] = err(lambda: client.update_node_pool(request=dict(name=N, labels=c.NodeLabels(labels={}))))
out["stale_etag"] = err(lambda: client.update_node_pool(request=dict(name=N, labels=c.NodeLabels(labels={"x": "z"}), etag="stale")))
pool = client.get_node_pool(request=dict(name=N))
out["pool"] = [pool.status.name, dict(pool.config.labels), pool.autoscaling.max_node_count, pool.max_pods_constraint.max_pods_per_node]
up = client.update_cluster(request=dict(name=C, update=c.ClusterUpdate(desired_master_version="latest")))
out["ops"] = len(client.list_operations(request=dict(parent=Z)).operations) >= 6
client.cancel_operation(request=dict(name=f"{Z}/operations/{up.name}"))
out["cancelled"] = wait("us-central1-a", up).status.name
wait("us-central1-a", client.update_master(request=dict(name=C, master_version="-")))
wait("us-central1-a", client.delete_node_pool(request=dict(name=N)))
out["pool_gone"] = err(lambda: client.get_node_pool(request=dict(name=N)))
A = f"{P}/us-central1/clusters/ap1"
wait("us-central1", client.create_cluster(request=dict(parent=f"{P}/us-central1", cluster=c.Cluster(name="ap1", autopilot=c.Autopilot(enabled=True)))))
out["autopilot_pools"] = err(lambda: client.list_node_pools(request=dict(parent=A)))
wait("us-central1-a", client.delete_cluster(request=dict(name=C)))
out["gone"] = err(lambda: client.get_cluster(request=dict(name=C)))
bad = c.ClusterManagerClient(transport="rest", credentials=oauth.Credentials("ya29.unknown"),
                             client_options=ClientOptions(api_endpoint=endpoint))
out["unauthenticated"] = err(lambda: bad.list_clusters(request=dict(parent=f"{P}/-")))
print(json.dumps(out))
"#;

/// The interpreter with Google's clients: `BC_GKE_PYTHON`, else `.ci/gke-python`'s default.
fn python() -> Option<PathBuf> {
    let candidate = std::env::var_os("BC_GKE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/bc-ci/gke-python/bin/python3"));
    let imports = std::process::Command::new(&candidate)
        .args(["-c", "import google.cloud.container_v1, google.oauth2.service_account"])
        .output()
        .is_ok_and(|o| o.status.success());
    if imports {
        return Some(candidate);
    }
    assert!(
        !bc_testkit::services_required(),
        "{} does not import google-cloud-container, but it is required ({} or CI=true); \
         .ci/run installs it with .ci/gke-python",
        candidate.display(),
        bc_testkit::REQUIRE_SERVICES_VAR
    );
    eprintln!("skipped: no python with google-cloud-container (run .ci/gke-python)");
    None
}

#[tokio::test]
async fn googles_python_client_makes_every_call_and_sees_googles_exceptions() {
    let Some(python) = python() else { return };
    let s = Served::start(SimConfig::default()).await;
    // google-auth signs its grant with the machine's time, which the simulator's clock
    // must be near (as Google's is) for the grant to be in its timeframe.
    s.clock.set(bc_domain::ports::Clock::now(&bc_domain::ports::SystemClock));
    let dir = ScratchDir::new("bc-sim-gke-python");
    let key = dir.path().join("key.json");
    std::fs::write(&key, s.gke_key()).unwrap();
    // The simulator's clock moves while the client polls its operations (bounded: the
    // script gives up after 2000 polls), but only once the script has seen the create
    // still running: before, a loaded machine let the clock finish the create before the
    // "busy" call was made, and that call then succeeded.
    let moving = dir.path().join("moving");
    let stop = Arc::new(AtomicBool::new(false));
    let ticker = {
        let (clock, stop, moving) = (s.clock.clone(), stop.clone(), moving.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if moving.exists() {
                    testing::step(&clock, 1);
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
    };
    let out = testing::bounded(
        tokio::process::Command::new(&python)
            .arg("-c")
            .arg(SCRIPT)
            .arg(&key)
            .arg(s.gke_api_url())
            .arg(&moving)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("python runs");
    stop.store(true, Ordering::Relaxed);
    ticker.await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let class = |k: &str| v[k][0].clone();
    // api-core prefixes the message with the request's method and URL.
    let says = |k: &str, m: &str| {
        let text = v[k][1].as_str().unwrap_or_default();
        assert!(text.ends_with(&format!(": {m}")), "{k}: {text}");
    };
    assert_eq!((v["token"].clone(), v["expiry"].clone()), (json!(true), json!(true)));
    assert_eq!(v["default_version"], "1.35.6-gke.1062000");
    assert_eq!(v["channels"], json!(["RAPID", "REGULAR", "STABLE", "EXTENDED"]));
    assert_eq!(v["create"], json!(["CREATE_CLUSTER", "PENDING"]));
    assert_eq!(class("busy"), "BadRequest");
    assert!(
        v["busy"][1]
            .as_str()
            .unwrap()
            .contains(": Cluster is running incompatible operation operation-"),
        "{v}"
    );
    assert_eq!(v["busy"][2], "CLUSTER_ALREADY_HAS_OPERATION");
    assert_eq!(v["create_done"], "DONE");
    assert_eq!(v["cluster"], json!(["RUNNING", true, true, "NO_SCHEDULE", "1.35.6-gke.1062000"]));
    assert_eq!(v["list_all"], json!(["py1"]));
    assert_eq!(class("exists"), "Conflict");
    says("exists", "Already exists: projects/bc-sim-project/locations/us-central1-a/clusters/py1.");
    assert_eq!(class("not_found"), "NotFound");
    says("not_found", "Not found: projects/bc-sim-project/locations/us-central1-a/clusters/nope.");
    assert_eq!(class("bad_name"), "BadRequest");
    says("bad_version", "Master version \"1.20\" is unsupported.");
    assert_eq!(v["labels"], json!({"a": "b"}));
    assert_eq!(v["pools"], json!(["cpu", "extra"]));
    assert_eq!(class("no_fields"), "BadRequest");
    assert_eq!(class("stale_etag"), "Conflict");
    assert_eq!(v["pool"], json!(["RUNNING", {"x": "y"}, 3, 110]));
    assert_eq!(v["ops"], true);
    assert_eq!(v["cancelled"], "DONE");
    assert_eq!(class("pool_gone"), "NotFound");
    assert_eq!(class("autopilot_pools"), "BadRequest");
    says("autopilot_pools", "Autopilot node pools cannot be accessed or modified.");
    assert_eq!(class("gone"), "NotFound");
    // A 401 makes the client refresh its credentials, which a bare token cannot.
    assert_eq!(class("unauthenticated"), "RefreshError");
}
