//! The real `kubectl` against a simulated cluster, with only the kubeconfig the simulated
//! DigitalOcean serves (`GET /v2/kubernetes/clusters/{id}/kubeconfig`): what a dev-mode
//! user does first must work as against DOKS — `version`, `api-resources`, `get nodes`,
//! `apply` (client- and server-side, with kubectl's default validation), `get pods -A`,
//! `label`, `get -w`, `delete`, and an invalid object refused with 422.
//!
//! Each test cites the kubectl/Kubernetes behaviour it encodes. kubectl must be installed
//! (`.ci/run` installs it where missing); under `BC_REQUIRE_SERVICES=1` or `CI=true` a
//! missing kubectl fails these tests instead of skipping them.

use std::time::Duration;

use bc_domain::name::LABEL_SUBSTRATE_POOL;
use bc_domain::ports::ObjectKind;
use bc_sim::testing::{self, ClusterEnv, JoinServer, Kubectl, Substrate, ToolRun};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

/// A running cluster (pool `bc-p1`: 2 nodes with our label; `own`: 1 node) and kubectl
/// given the kubeconfig its DigitalOcean face serves, or `None` when kubectl is missing
/// and not required.
async fn setup() -> Option<(ClusterEnv, Kubectl)> {
    let env = ClusterEnv::start().await;
    let r = env.served.get(&format!("/v2/kubernetes/clusters/{}/kubeconfig", env.id)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let kubectl = Kubectl::new(&r.text)?;
    Some((env, kubectl))
}

fn ok(r: &ToolRun, what: &str) {
    assert!(r.ok(), "{what}: exit {:?}\nstdout:\n{}\nstderr:\n{}", r.code, r.stdout, r.stderr);
}

/// The rows of kubectl's table output (header dropped), split on whitespace.
fn rows(out: &str) -> Vec<Vec<String>> {
    out.lines().skip(1).map(|l| l.split_whitespace().map(str::to_owned).collect()).collect()
}

/// Manifests as one YAML stream (JSON documents are YAML).
fn stream(objects: &[Value]) -> String {
    objects.iter().map(|o| format!("---\n{o}\n")).collect()
}

/// `kubectl version` reports the cluster's version (from `/version`), and
/// `kubectl api-resources` lists every served kind with its short names, group and scope
/// (from aggregated discovery, `apidiscovery.k8s.io/v2`, as kubectl 1.30+ asks for it).
#[tokio::test]
async fn version_and_api_resources() {
    let Some((env, k)) = setup().await else { return };
    let r = k.run(&["version", "-o", "json"]).await;
    ok(&r, "version");
    let v: Value = serde_json::from_str(&r.stdout).expect("version JSON");
    let want = env.sim.state().model().cluster_kubernetes_version(&env.id).unwrap();
    assert_eq!(v["serverVersion"]["gitVersion"], want.as_str());

    let r = k.run(&["api-resources"]).await;
    ok(&r, "api-resources");
    let table = rows(&r.stdout);
    for (name, short, version, namespaced, kind) in [
        ("pods", "po", "v1", "true", "Pod"),
        ("nodes", "no", "v1", "false", "Node"),
        ("persistentvolumes", "pv", "v1", "false", "PersistentVolume"),
        ("namespaces", "ns", "v1", "false", "Namespace"),
        ("configmaps", "cm", "v1", "true", "ConfigMap"),
        ("services", "svc", "v1", "true", "Service"),
        ("events", "ev", "v1", "true", "Event"),
        ("serviceaccounts", "sa", "v1", "true", "ServiceAccount"),
        ("daemonsets", "ds", "apps/v1", "true", "DaemonSet"),
        ("deployments", "deploy", "apps/v1", "true", "Deployment"),
    ] {
        assert!(
            table.iter().any(|row| row == &[name, short, version, namespaced, kind]),
            "{name} missing from:\n{}",
            r.stdout
        );
    }
    assert!(table.iter().any(|row| row == &["secrets", "v1", "true", "Secret"]), "{}", r.stdout);
    assert_eq!(table.len(), 11, "nothing unserved is advertised:\n{}", r.stdout);
}

/// `kubectl get nodes -o wide -l …` prints the server's Table (columns of the node
/// printer, wide ones included) for the selected nodes only.
#[tokio::test]
async fn get_nodes_wide_by_label() {
    let Some((env, k)) = setup().await else { return };
    let selector = format!("{LABEL_SUBSTRATE_POOL}={}", testing::POOL);
    let r = k.run(&["get", "nodes", "-o", "wide", "-l", &selector]).await;
    ok(&r, "get nodes");
    let header: Vec<&str> = r.stdout.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "STATUS",
            "ROLES",
            "AGE",
            "VERSION",
            "INTERNAL-IP",
            "EXTERNAL-IP",
            "OS-IMAGE",
            "KERNEL-VERSION",
            "CONTAINER-RUNTIME"
        ],
        "{}",
        r.stdout
    );
    let table = rows(&r.stdout);
    let names: Vec<&str> = table.iter().map(|row| row[0].as_str()).collect();
    assert_eq!(names, env.node_names(Some((LABEL_SUBSTRATE_POOL, testing::POOL))));
    let version = env.sim.state().model().cluster_kubernetes_version(&env.id).unwrap();
    for row in &table {
        assert_eq!(row[1], "Ready");
        assert_eq!(row[4], version);
        assert!(row[5].starts_with("10."), "internal IP {row:?}");
    }
    // The well-known and DOKS labels are there to select by.
    let r = k
        .run(&[
            "get",
            "nodes",
            "-l",
            "node.kubernetes.io/instance-type=s-2vcpu-4gb,doks.digitalocean.com/node-pool=own",
            "-o",
            "name",
        ])
        .await;
    ok(&r, "get by DOKS labels");
    assert_eq!(r.stdout.lines().count(), 1, "{}", r.stdout);
}

/// `kubectl apply -f` (client-side: GET, then POST with `fieldValidation=Strict`, then
/// strategic merge patches computed from the OpenAPI v3 documents), `get pods -A`,
/// `apply --server-side` (and its conflict, in Kubernetes' words), `label` (a JSON merge
/// patch) and `delete -f`, on what the substrate reconciler applies.
#[tokio::test]
async fn apply_get_label_and_delete_the_substrate_objects() {
    let Some((env, k)) = setup().await else { return };
    let join = JoinServer::start().await;
    let substrate = Substrate::new(join.url(), "tok");
    let manifests: Vec<Value> = substrate.objects().into_iter().map(|o| o.manifest).collect();
    let file = k.dir().join("substrate.yaml");
    std::fs::write(&file, stream(&manifests)).unwrap();
    let file = file.to_str().unwrap();

    let r = k.run(&["apply", "-f", file]).await;
    ok(&r, "apply");
    assert_eq!(
        r.stdout.lines().collect::<Vec<_>>(),
        [
            "namespace/bc-p1 created",
            "secret/bcd-join created",
            "serviceaccount/bcd created",
            "daemonset.apps/bcd created"
        ]
    );
    assert!(!r.stderr.contains("warning"), "no patch warnings: {}", r.stderr);
    // The DaemonSet controller put one pod on each node of the pool; their bcd has not
    // joined yet, so they run but are not Ready.
    let r = k.run(&["get", "pods", "-A"]).await;
    ok(&r, "get pods -A");
    let pods = rows(&r.stdout);
    assert_eq!(pods.len(), 2, "{}", r.stdout);
    for p in &pods {
        assert_eq!(
            (p[0].as_str(), p[2].as_str(), p[3].as_str()),
            ("bc-p1", "0/1", "Running"),
            "{p:?}"
        );
    }
    testing::settle(&env.sim).await;
    let r = k.run(&["get", "pods", "-n", "bc-p1", "-o", "wide"]).await;
    ok(&r, "get pods after the join");
    let pods = rows(&r.stdout);
    assert!(pods.iter().all(|p| p[1] == "1/1" && p[2] == "Running"), "{}", r.stdout);
    let mut on: Vec<&str> = pods.iter().map(|p| p[6].as_str()).collect();
    on.sort();
    assert_eq!(on, env.node_names(Some((LABEL_SUBSTRATE_POOL, testing::POOL))));
    let r = k.run(&["get", "ds", "-n", "bc-p1"]).await;
    ok(&r, "get ds");
    assert_eq!(rows(&r.stdout)[0][1..6], ["2", "2", "2", "2", "2"], "{}", r.stdout);

    // A changed image: `configured`, patched without a client-side warning; the pods
    // are replaced (RollingUpdate).
    let changed = stream(&manifests).replace("bcd:sim", "bcd:v2");
    std::fs::write(k.dir().join("substrate.yaml"), changed).unwrap();
    let r = k.run(&["apply", "-f", file]).await;
    ok(&r, "re-apply");
    assert!(r.stdout.contains("daemonset.apps/bcd configured"), "{}", r.stdout);
    assert!(r.stdout.contains("serviceaccount/bcd unchanged"), "{}", r.stdout);
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
    let ds = env.stored(ObjectKind::DaemonSet, Some("bc-p1"), "bcd").unwrap();
    assert_eq!(ds["spec"]["template"]["spec"]["containers"][0]["image"], "bcd:v2");
    let r = k
        .run(&["get", "pods", "-n", "bc-p1", "-o", "jsonpath={.items[*].spec.containers[0].image}"])
        .await;
    ok(&r, "pod images");
    assert_eq!(r.stdout.split_whitespace().collect::<Vec<_>>(), ["bcd:v2", "bcd:v2"]);

    // Server-side apply by another manager of a field kubectl-client-side-apply set: 409,
    // the conflict named per field with list keys, as Kubernetes words it.
    let ssa = stream(&manifests).replace("bcd:sim", "bcd:v3");
    std::fs::write(k.dir().join("ssa.yaml"), ssa).unwrap();
    let ssa_file = k.dir().join("ssa.yaml");
    let ssa_file = ssa_file.to_str().unwrap();
    let r = k.run(&["apply", "--server-side", "--field-manager=tenant", "-f", ssa_file]).await;
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains(
            "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1: .spec.template.spec.containers[name=\"bcd\"].image"
        ),
        "{}",
        r.stderr
    );
    let r = k
        .run(&[
            "apply",
            "--server-side",
            "--field-manager=tenant",
            "--force-conflicts",
            "-f",
            ssa_file,
        ])
        .await;
    ok(&r, "forced server-side apply");
    assert!(r.stdout.contains("daemonset.apps/bcd serverside-applied"), "{}", r.stdout);
    let ds = env.stored(ObjectKind::DaemonSet, Some("bc-p1"), "bcd").unwrap();
    assert_eq!(ds["spec"]["template"]["spec"]["containers"][0]["image"], "bcd:v3");

    // `kubectl label`: a merge patch; the label is added to what is there.
    let r = k.run(&["label", "namespace", "bc-p1", "team=platform"]).await;
    ok(&r, "label");
    assert_eq!(r.stdout.trim(), "namespace/bc-p1 labeled");
    let ns = env.stored(ObjectKind::Namespace, None, "bc-p1").unwrap();
    assert_eq!(ns["metadata"]["labels"]["team"], "platform");
    assert_eq!(ns["metadata"]["labels"][LABEL_SUBSTRATE_POOL], testing::POOL);

    // `kubectl delete -f`: each object, then `--wait` sees them gone. (Contents before
    // their namespace: the simulator finishes a namespace's deletion at once, where DOKS
    // takes a few seconds, so contents listed after it would already be gone.)
    let mut reversed = manifests.clone();
    reversed.reverse();
    std::fs::write(k.dir().join("teardown.yaml"), stream(&reversed)).unwrap();
    let teardown = k.dir().join("teardown.yaml");
    let r = k.run(&["delete", "-f", teardown.to_str().unwrap()]).await;
    ok(&r, "delete");
    assert_eq!(
        r.stdout.lines().collect::<Vec<_>>(),
        [
            "daemonset.apps \"bcd\" deleted",
            "serviceaccount \"bcd\" deleted",
            "secret \"bcd-join\" deleted",
            "namespace \"bc-p1\" deleted"
        ]
    );
    assert!(env.stored(ObjectKind::Namespace, None, "bc-p1").is_none());
    let r = k.run(&["get", "pods", "-A", "-o", "name"]).await;
    ok(&r, "no pods left");
    assert_eq!(r.stdout.trim(), "");
}

/// A DaemonSet with no pod to run (its node selector matches no node, so its status
/// settles at once), tolerating `tolerations`, asking for `0.1` CPU and `1024Mi`.
fn idle_daemonset(name: &str, tolerations: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "default", "annotations": {}},
        "spec": {"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"nodeSelector": {"example.com/none": "x"}, "tolerations": tolerations,
                    "hostNetwork": false, "automountServiceAccountToken": false,
                    "containers": [{"name": "c", "image": "busybox:1.36", "args": [],
                        "resources": {"requests": {"cpu": "0.1", "memory": "1024Mi"}}}]}}}})
}

/// Objects come back as a Kubernetes API server writes them with Go's `encoding/json`
/// (the `omitempty` rules of `k8s.io/api` v0.33) and with the API server's defaults:
/// `kubectl apply --server-side` of a DaemonSet with `tolerations: []`, or with a
/// toleration whose `value` is `""`, reads back (`kubectl get -o json`) without
/// `tolerations` or `value` (nor the empty `annotations`, `args`, `hostNetwork: false`),
/// with `automountServiceAccountToken: false` kept (a pointer), quantities canonical and
/// `SetDefaults_DaemonSet`/`_PodSpec`/`_Container` filled in. Applying it again changes
/// nothing: same resourceVersion and managedFields, and a watch from that version (`get
/// --raw …?watch=true`) sees only the next real change.
#[tokio::test]
async fn applied_objects_read_back_as_go_encodes_them_and_a_no_op_apply_changes_nothing() {
    let Some((_env, k)) = setup().await else { return };
    let tainted = json!([{"key": "gpu", "operator": "Equal", "value": "", "effect": "NoSchedule"}]);
    for (name, tolerations) in [("untainted", json!([])), ("tainted", tainted)] {
        let body = idle_daemonset(name, tolerations).to_string();
        let apply = ["apply", "--server-side", "--field-manager=bc", "-f", "-", "-o", "json"];
        let r = k.run_with(&apply, Some(&body)).await;
        ok(&r, "apply --server-side");
        let r = k.run(&["get", "daemonset", name, "-n", "default", "-o", "json"]).await;
        ok(&r, "get -o json");
        let ds: Value = serde_json::from_str(&r.stdout).expect("JSON");
        let pod = &ds["spec"]["template"]["spec"];
        match name {
            "untainted" => assert!(pod.get("tolerations").is_none(), "{pod}"),
            _ => assert_eq!(
                pod["tolerations"],
                json!([{"key": "gpu", "operator": "Equal", "effect": "NoSchedule"}])
            ),
        }
        assert!(ds["metadata"].get("annotations").is_none(), "{}", ds["metadata"]);
        assert!(pod.get("hostNetwork").is_none(), "{pod}");
        assert_eq!(pod["automountServiceAccountToken"], false);
        let c = &pod["containers"][0];
        assert!(c.get("args").is_none(), "{c}");
        assert_eq!(c["resources"], json!({"requests": {"cpu": "100m", "memory": "1Gi"}}));
        for (field, want) in [
            ("imagePullPolicy", json!("IfNotPresent")),
            ("terminationMessagePath", json!("/dev/termination-log")),
            ("terminationMessagePolicy", json!("File")),
        ] {
            assert_eq!(c[field], want, "{field}");
        }
        for (field, want) in [
            ("restartPolicy", json!("Always")),
            ("dnsPolicy", json!("ClusterFirst")),
            ("schedulerName", json!("default-scheduler")),
            ("terminationGracePeriodSeconds", json!(30)),
            ("securityContext", json!({})),
        ] {
            assert_eq!(pod[field], want, "{field}");
        }
        assert_eq!(
            ds["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
        );
        assert_eq!(ds["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(ds["spec"]["template"]["metadata"]["creationTimestamp"], Value::Null);

        let rv = ds["metadata"]["resourceVersion"].as_str().expect("rv").to_owned();
        let r = k.run_with(&apply, Some(&body)).await;
        ok(&r, "apply again");
        let again: Value = serde_json::from_str(&r.stdout).expect("JSON");
        assert_eq!(again["metadata"]["resourceVersion"], rv.as_str(), "a no-op apply");
        assert_eq!(again["metadata"]["managedFields"], ds["metadata"]["managedFields"]);
        let r = k.run(&["label", "daemonset", name, "-n", "default", "changed=yes"]).await;
        ok(&r, "label");
        let url = format!(
            "/apis/apps/v1/namespaces/default/daemonsets?watch=true&resourceVersion={rv}&timeoutSeconds=1&fieldSelector=metadata.name%3D{name}"
        );
        let r = k.run(&["get", "--raw", &url]).await;
        ok(&r, "watch");
        let events: Vec<Value> =
            r.stdout.lines().map(|l| serde_json::from_str(l).expect("event")).collect();
        assert_eq!(events.len(), 1, "only the label's change: {events:#?}");
        assert_eq!(events[0]["type"], "MODIFIED");
        assert_eq!(events[0]["object"]["metadata"]["labels"]["changed"], "yes");
    }
}

/// What a real API server refuses, kubectl reports as it would from DOKS: a DaemonSet
/// whose selector does not match its template (here: none) is 422 Invalid, client- and
/// server-side; an unknown field fails kubectl's strict validation (400); a bad name is
/// 422 with the RFC 1123 rule.
#[tokio::test]
async fn an_invalid_object_is_refused_with_422() {
    let Some((env, k)) = setup().await else { return };
    let broken = json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "broken", "namespace": "default"},
        "spec": {"template": {"metadata": {"labels": {"app": "broken"}},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}});
    let want = "The DaemonSet \"broken\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"broken\"}: `selector` does not match template `labels`";
    for mode in [&["apply", "-f", "-"][..], &["apply", "--server-side", "-f", "-"]] {
        let r = k.run_with(mode, Some(&broken.to_string())).await;
        assert_eq!(r.code, Some(1), "{mode:?}: {}", r.stdout);
        assert!(r.stderr.contains(want), "{mode:?}: {}", r.stderr);
    }
    assert!(env.stored(ObjectKind::DaemonSet, Some("default"), "broken").is_none());

    let unknown = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "default"}, "data": {"a": "b"}, "dataa": {}});
    let r = k.run_with(&["apply", "-f", "-"], Some(&unknown.to_string())).await;
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("strict decoding error: unknown field \"dataa\""), "{}", r.stderr);

    let bad_name =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "Bad_Name"}});
    let r = k.run_with(&["apply", "-f", "-"], Some(&bad_name.to_string())).await;
    assert_eq!(r.code, Some(1));
    assert!(
        r.stderr.contains("The Namespace \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 label"),
        "{}",
        r.stderr
    );
}

/// `kubectl get -w` lists, then watches from the list's resourceVersion: a namespace
/// made after it starts shows up, and its deletion shows it Terminating. Bounded: each
/// line is awaited at most 20 s and the watch has its own request timeout.
#[tokio::test]
async fn get_watch_sees_changes() {
    let Some((env, k)) = setup().await else { return };
    let mut child = k.spawn(&["get", "namespaces", "--watch", "--request-timeout=60s"]);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    let mut wait_for = async |what: &str, seen: &mut Vec<String>| loop {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("no {what:?} within 20 s; saw {seen:#?}"))
            .expect("read")
            .unwrap_or_else(|| panic!("watch ended before {what:?}; saw {seen:#?}"));
        seen.push(line.clone());
        if line
            .split_whitespace()
            .collect::<Vec<_>>()
            .starts_with(&what.split(' ').collect::<Vec<_>>())
        {
            return line;
        }
    };
    wait_for("kube-system Active", &mut seen).await;
    let late = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "late"}});
    env.apply_as("kubectl", &late, false);
    wait_for("late Active", &mut seen).await;
    let r = k.run(&["delete", "namespace", "late"]).await;
    ok(&r, "delete");
    wait_for("late Terminating", &mut seen).await;
    child.kill().await.expect("stop the watch");
}

/// kubectl's typed imperative creates send protobuf (`application/vnd.kubernetes.protobuf`,
/// the `k8s\0` envelope): `create namespace`, `create configmap`, `create secret generic`
/// and `create serviceaccount` work as against DOKS.
#[tokio::test]
async fn imperative_creates_in_protobuf() {
    let Some((env, k)) = setup().await else { return };
    for args in [
        &["create", "namespace", "demo"][..],
        &["create", "configmap", "cfg", "-n", "demo", "--from-literal=a=1"],
        &["create", "secret", "generic", "sec", "-n", "demo", "--from-literal=token=s3cr3t"],
        &["create", "serviceaccount", "robot", "-n", "demo"],
    ] {
        let r = k.run(args).await;
        ok(&r, &args.join(" "));
    }
    let ns = env.stored(ObjectKind::Namespace, None, "demo").unwrap();
    assert_eq!(ns["metadata"]["labels"]["kubernetes.io/metadata.name"], "demo");
    let cm = env
        .sim
        .state()
        .kube
        .get(&env.id, bc_sim::kube::Resource::ConfigMap, Some("demo"), "cfg")
        .unwrap();
    assert_eq!(cm["data"], json!({"a": "1"}));
    let secret = env.stored(ObjectKind::Secret, Some("demo"), "sec").unwrap();
    assert_eq!(secret["data"]["token"], "czNjcjN0", "base64 of the bytes sent");
    assert_eq!(secret["type"], "Opaque");
    assert!(env.stored(ObjectKind::ServiceAccount, Some("demo"), "robot").is_some());
}
