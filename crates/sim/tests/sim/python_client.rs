//! The official Kubernetes Python client (`kubernetes`, Debian's `python3-kubernetes`)
//! reaches a simulated cluster as it would DOKS: `config.load_kube_config` on the
//! kubeconfig the simulated DigitalOcean serves, urllib3 verifying the server against the
//! CA the kubeconfig carries (and refusing it when the kubeconfig carries another
//! simulator's CA), then `list_node`, `create_namespaced_config_map` and
//! `read_namespaced_config_map` with the bearer token; and objects read back as a Kubernetes
//! API server writes them (Go's `omitempty` rules, the server's defaults), a server-side
//! apply that changes nothing changing nothing. A python3 that imports `kubernetes`
//! must be installed (`.ci/run` installs `python3-kubernetes` where missing); under
//! `BC_REQUIRE_SERVICES=1` or `CI=true` a missing one fails this test.

use bc_sim::testing::{self, ClusterEnv, ScratchDir};

const SCRIPT: &str = r#"
import json, sys, urllib3
from kubernetes import client, config
config.load_kube_config(config_file=sys.argv[1])
api = client.CoreV1Api()
try:
    nodes = sorted(n.metadata.name for n in api.list_node().items)
    cm = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="py"), data={"k": "v"})
    api.create_namespaced_config_map("default", cm)
    back = api.read_namespaced_config_map("py", "default")
    print(json.dumps({"nodes": nodes, "data": back.data, "rv": back.metadata.resource_version}))
except urllib3.exceptions.MaxRetryError as e:
    print(json.dumps({"tls_error": str(e.reason)}))
"#;

/// A python3 that imports the `kubernetes` package: Debian's (`/usr/bin/python3`, where
/// `python3-kubernetes` installs it) or the first on PATH.
fn python_with_client() -> Option<std::path::PathBuf> {
    let on_path = testing::required_tool("python3", "it runs the Kubernetes Python client")?;
    let imports = |p: &std::path::Path| {
        std::process::Command::new(p)
            .args(["-c", "import kubernetes"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let found = [std::path::PathBuf::from("/usr/bin/python3"), on_path]
        .into_iter()
        .find(|p| p.is_file() && imports(p));
    if found.is_none() {
        assert!(
            !bc_testkit::services_required(),
            "no python3 imports `kubernetes`, but it is required ({} or CI=true); .ci/run \
             installs python3-kubernetes",
            bc_testkit::REQUIRE_SERVICES_VAR
        );
        eprintln!("skipped: no python3 imports `kubernetes`");
    }
    found
}

async fn run(python: &std::path::Path, script: &str, kubeconfig: &str) -> serde_json::Value {
    let dir = ScratchDir::new("bc-sim-python");
    let file = dir.path().join("kubeconfig");
    std::fs::write(&file, kubeconfig).unwrap();
    let out = testing::bounded(
        tokio::process::Command::new(python)
            .arg("-c")
            .arg(script)
            .arg(&file)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// The kubeconfig the simulated DigitalOcean serves for the cluster.
async fn served_kubeconfig(env: &ClusterEnv) -> String {
    let r = env.served.get(&format!("/v2/kubernetes/clusters/{}/kubeconfig", env.id)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.text
}

#[tokio::test]
async fn the_python_client_uses_the_served_kubeconfig_and_verifies_the_ca() {
    let Some(python) = python_with_client() else { return };
    let env = ClusterEnv::start().await;
    let kubeconfig = served_kubeconfig(&env).await;
    let got = run(&python, SCRIPT, &kubeconfig).await;
    assert_eq!(got["nodes"], serde_json::json!(env.node_names(None)), "{got}");
    assert_eq!(got["data"], serde_json::json!({"k": "v"}), "{got}");
    assert!(got["rv"].as_str().is_some_and(|rv| !rv.is_empty()), "{got}");

    // The same kubeconfig with another simulator's CA: the client refuses the server.
    let other = ClusterEnv::start().await;
    let b64 = |pem: &str| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(pem)
    };
    let (ours, theirs) = (b64(&env.ca_pem()), b64(&other.ca_pem()));
    assert!(kubeconfig.contains(&ours), "the kubeconfig carries the simulator's CA");
    let got = run(&python, SCRIPT, &kubeconfig.replace(&ours, &theirs)).await;
    assert!(
        got["tls_error"].as_str().is_some_and(|e| e.contains("CERTIFICATE_VERIFY_FAILED")),
        "another simulator's CA does not vouch for it: {got}"
    );
}

const WIRE_SCRIPT: &str = r#"
import json, sys
from kubernetes import client, config, dynamic, watch
config.load_kube_config(config_file=sys.argv[1])
api_client = client.ApiClient()
apps = client.AppsV1Api(api_client)
dyn = dynamic.DynamicClient(api_client)
daemonsets = dyn.resources.get(api_version="apps/v1", kind="DaemonSet")
out = {}
for name, tolerations in [("py-untainted", []),
        ("py-tainted", [{"key": "gpu", "operator": "Equal", "value": "", "effect": "NoSchedule"}])]:
    body = {"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "default", "labels": {}},
        "spec": {"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"nodeSelector": {"example.com/none": "x"}, "tolerations": tolerations,
                    "containers": [{"name": "c", "image": "busybox", "env": [],
                        "resources": {"limits": {"memory": "0.5Gi"}}}]}}}}
    # This client sends an apply body only as text (JSON is YAML).
    apply = lambda: dyn.server_side_apply(daemonsets, body=json.dumps(body), name=name,
        namespace="default", field_manager="py")
    apply()
    read = json.loads(apps.read_namespaced_daemon_set(name, "default", _preload_content=False).data)
    again = apply().to_dict()
    dyn.patch(daemonsets, body={"metadata": {"labels": {"changed": "yes"}}}, name=name,
        namespace="default", content_type="application/merge-patch+json")
    rv = read["metadata"]["resourceVersion"]
    events = [(e["type"], e["raw_object"]["metadata"].get("labels", {}).get("changed"))
        for e in watch.Watch().stream(apps.list_namespaced_daemon_set, "default",
            field_selector="metadata.name=" + name, resource_version=rv, timeout_seconds=1)]
    out[name] = {"read": read, "again_rv": again["metadata"]["resourceVersion"],
        "again_managed": again["metadata"]["managedFields"], "events": events}
print(json.dumps(out))
"#;

/// The official Python client reads objects back as a Kubernetes API server writes them:
/// a DaemonSet applied server-side (its dynamic client) with `tolerations: []`, or a
/// toleration whose `value` is `""`, comes back without them (nor the empty `labels` and
/// `env`), its `0.5Gi` limit as `512Mi`, the defaults filled in (`imagePullPolicy:
/// Always` for an untagged image); applying it again keeps its resourceVersion and
/// managedFields, and a watch from that version sees only the next change.
#[tokio::test]
async fn the_python_client_reads_objects_as_go_encodes_them_and_a_no_op_apply_changes_nothing() {
    let Some(python) = python_with_client() else { return };
    let env = ClusterEnv::start().await;
    let got = run(&python, WIRE_SCRIPT, &served_kubeconfig(&env).await).await;
    for name in ["py-untainted", "py-tainted"] {
        let g = &got[name];
        let read = &g["read"];
        let pod = &read["spec"]["template"]["spec"];
        if name == "py-untainted" {
            assert!(pod.get("tolerations").is_none(), "{pod}");
        } else {
            assert!(pod["tolerations"][0].get("value").is_none(), "{pod}");
            assert_eq!(pod["tolerations"][0]["key"], "gpu");
        }
        assert!(read["metadata"].get("labels").is_none(), "{}", read["metadata"]);
        let c = &pod["containers"][0];
        assert!(c.get("env").is_none(), "{c}");
        assert_eq!(c["resources"], serde_json::json!({"limits": {"memory": "512Mi"}}));
        assert_eq!(c["imagePullPolicy"], "Always");
        assert_eq!(pod["restartPolicy"], "Always");
        assert_eq!(pod["dnsPolicy"], "ClusterFirst");
        assert_eq!(read["spec"]["updateStrategy"]["type"], "RollingUpdate");
        assert_eq!(read["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(g["again_rv"], read["metadata"]["resourceVersion"], "{name}: a no-op apply");
        assert_eq!(g["again_managed"].as_array().map(Vec::len), Some(1), "{g}");
        assert_eq!(
            g["again_managed"][0]["time"], read["metadata"]["managedFields"][0]["time"],
            "{name}: no new managedFields time"
        );
        assert_eq!(g["events"], serde_json::json!([["MODIFIED", "yes"]]), "{name}");
    }
}
