//! A Python client reaches a simulated cluster's API as it would DOKS: Python's `ssl`
//! (the TLS stack the official `kubernetes` Python client uses through urllib3) verifies
//! the server against the CA the kubeconfig carries — and refuses it against another
//! simulator's CA — then lists nodes with the bearer token. python3 must be installed;
//! under `BC_REQUIRE_SERVICES=1` or `CI=true` a missing python3 fails this test.

use bc_sim::testing::{self, ClusterEnv, ScratchDir};

const SCRIPT: &str = r#"
import http.client, json, ssl, sys, urllib.parse
server, ca_file, token = sys.argv[1:4]
u = urllib.parse.urlparse(server)
ctx = ssl.create_default_context(cafile=ca_file)
conn = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=20)
try:
    conn.request("GET", "/api/v1/nodes", headers={"Authorization": "Bearer " + token})
    r = conn.getresponse()
    body = json.load(r)
    print(json.dumps({"status": r.status, "nodes": sorted(n["metadata"]["name"] for n in body["items"])}))
except ssl.SSLCertVerificationError as e:
    print(json.dumps({"verify_error": e.verify_message}))
"#;

async fn run(python: &std::path::Path, server: &str, ca: &str, token: &str) -> serde_json::Value {
    let dir = ScratchDir::new("bc-sim-python");
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca).unwrap();
    let out = testing::bounded(
        tokio::process::Command::new(python)
            .arg("-c")
            .arg(SCRIPT)
            .arg(server)
            .arg(&ca_file)
            .arg(token)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[tokio::test]
async fn python_verifies_the_cluster_against_the_kubeconfig_ca() {
    let Some(python) =
        testing::required_tool("python3", "it checks the TLS face as Python clients do")
    else {
        return;
    };
    let env = ClusterEnv::start().await;
    let server = env.server(testing::Face::Tls);
    let got = run(&python, &server, &env.ca_pem(), &env.token).await;
    assert_eq!(got["status"], 200, "{got}");
    assert_eq!(got["nodes"], serde_json::json!(env.node_names(None)));

    let other = ClusterEnv::start().await;
    let got = run(&python, &server, &other.ca_pem(), &env.token).await;
    assert!(got["verify_error"].is_string(), "another simulator's CA does not vouch for it: {got}");
}
