//! `deploy/`, the control plane's Kubernetes manifests: `kubectl kustomize
//! deploy/overlays/example` renders, and every rendered object is one a real API server
//! takes. The kinds a simulated cluster serves are applied to one with the real kubectl
//! (`apply --server-side`, whose default strict validation refuses unknown fields), so
//! they go through the simulator's decoding into the `k8s-openapi` types, its defaults
//! and its validation; the PodDisruptionBudgets and the Job, kinds it does not serve, are
//! decoded strictly through their own `k8s-openapi` types by the same decoder, and the
//! Job's pod template is applied as the Pod it makes. Every pod template (read back)
//! passes the Pod Security Standards' `restricted` profile. Then what the manifests
//! promise: replicas, probes, budgets, configuration, scrape annotations.
//!
//! kubectl must be installed (`.ci/run` installs it); under `BC_REQUIRE_SERVICES=1` or
//! `CI=true` a missing kubectl fails this test instead of skipping it.

use bc_sim::kube::decode::{self, FieldValidation};
use bc_sim::kube::{Resource, pod_security};
use bc_sim::testing::{ClusterEnv, Kubectl, ToolRun};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::{Value, json};

/// The overlay the test renders, from this crate's directory.
const OVERLAY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/overlays/example");

fn ok(r: &ToolRun, what: &str) {
    assert!(r.ok(), "{what}: exit {:?}\nstdout:\n{}\nstderr:\n{}", r.code, r.stdout, r.stderr);
}

/// Manifests as one YAML stream (JSON documents are YAML).
fn stream(objects: &[&Value]) -> String {
    objects.iter().map(|o| format!("---\n{o}\n")).collect()
}

fn kind(o: &Value) -> &str {
    o["kind"].as_str().unwrap_or_default()
}

fn name(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or_default()
}

/// The rendered object of `kind` named `name`.
fn find<'a>(objects: &'a [Value], k: &str, n: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| kind(o) == k && name(o) == n)
        .unwrap_or_else(|| panic!("no {k} {n} in the rendered manifests"))
}

/// Whether every `matchLabels` pair is among `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let pairs = selector["matchLabels"].as_object().expect("matchLabels");
    !pairs.is_empty() && pairs.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The one container of a pod template.
fn container(template: &Value) -> &Value {
    let cs = template["spec"]["containers"].as_array().expect("containers");
    assert_eq!(cs.len(), 1, "{template}");
    &cs[0]
}

#[tokio::test]
async fn the_example_overlay_renders_objects_a_real_api_server_takes() {
    let env = ClusterEnv::start().await;
    let r = env.served.get(&format!("/v2/kubernetes/clusters/{}/kubeconfig", env.id)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let Some(k) = Kubectl::new(&r.text) else { return };
    let rendered = k.run(&["kustomize", OVERLAY]).await;
    ok(&rendered, "kubectl kustomize deploy/overlays/example");
    let objects: Vec<Value> =
        serde_saphyr::from_multiple(&rendered.stdout).expect("the rendered YAML");
    let mut kinds: Vec<&str> = objects.iter().map(kind).collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "ConfigMap",
            "Deployment",
            "Deployment",
            "Job",
            "Namespace",
            "PodDisruptionBudget",
            "PodDisruptionBudget",
            "Secret",
            "Service",
            "ServiceAccount"
        ]
    );

    // The served kinds, through the simulated API server with kubectl's strict validation.
    let (served, unserved): (Vec<&Value>, Vec<&Value>) = objects.iter().partition(|o| {
        Resource::from_type(o["apiVersion"].as_str().unwrap_or_default(), kind(o)).is_some()
    });
    let r = k
        .run_with(
            &["apply", "--server-side", "--field-manager=deploy", "-f", "-"],
            Some(&stream(&served)),
        )
        .await;
    ok(&r, "apply --server-side of the served kinds");
    // The rest strictly through their own types; the Job's template as the Pod it makes.
    let mut templates: Vec<(String, Value)> = Vec::new();
    for o in unserved {
        let decoded = match kind(o) {
            "PodDisruptionBudget" => {
                decode::decode_as::<PodDisruptionBudget>(o.clone(), FieldValidation::Strict)
            }
            "Job" => decode::decode_as::<Job>(o.clone(), FieldValidation::Strict),
            other => panic!("{other} is neither served nor checked by its type"),
        };
        let decoded = decoded.unwrap_or_else(|e| panic!("{} {}: {}", kind(o), name(o), e.message));
        assert!(decoded.warnings.is_empty(), "{:?}", decoded.warnings);
        if kind(o) == "Job" {
            let template = &o["spec"]["template"];
            let pod = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("{}-template", name(o)),
                    "namespace": o["metadata"]["namespace"], "labels": template["metadata"]["labels"]},
                "spec": template["spec"]});
            let r =
                k.run_with(&["apply", "--server-side", "-f", "-"], Some(&pod.to_string())).await;
            ok(&r, "the Job's pod template as a Pod");
            templates.push((format!("Job {}", name(o)), template.clone()));
        }
    }
    // Unknown fields fail both ways (the checks above can fail).
    let mut typo = find(&objects, "Deployment", "bc-api").clone();
    typo["spec"]["template"]["spec"]["containers"][0]["readinessProb"] = json!({});
    let r = k.run_with(&["apply", "--server-side", "-f", "-"], Some(&typo.to_string())).await;
    assert_eq!(r.code, Some(1), "{}", r.stdout);
    assert!(r.stderr.contains("unknown field"), "{}", r.stderr);
    let mut typo = find(&objects, "PodDisruptionBudget", "bc-api").clone();
    typo["spec"]["minAvailabel"] = json!(1);
    let e = decode::decode_as::<PodDisruptionBudget>(typo, FieldValidation::Strict).unwrap_err();
    assert!(e.message.contains("unknown field \"spec.minAvailabel\""), "{}", e.message);

    // Every pod template, as the server stored it, passes the restricted profile.
    for n in ["bc-api", "bc-reconciler"] {
        let r = k.run(&["get", "deployment", n, "-n", "better-compute", "-o", "json"]).await;
        ok(&r, "get deployment");
        let stored: Value = serde_json::from_str(&r.stdout).expect("JSON");
        templates.push((format!("Deployment {n}"), stored["spec"]["template"].clone()));
    }
    for (what, t) in &templates {
        let violations = pod_security::restricted(&t["metadata"], &t["spec"]);
        assert!(violations.is_empty(), "{what}: {violations:#?}");
        let c = container(t);
        assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true, "{what}");
        for r in ["cpu", "memory"] {
            assert!(c["resources"]["requests"][r].is_string(), "{what}: requests.{r}");
        }
        assert_eq!(t["spec"]["automountServiceAccountToken"], false, "{what}");
    }
    let ns = find(&objects, "Namespace", "better-compute");
    assert_eq!(ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted");

    // Configuration: the ConfigMap and the Secret hold exactly their keys, and every
    // container that reads them names the generated (hashed) objects.
    let config = objects.iter().find(|o| kind(o) == "ConfigMap").expect("ConfigMap");
    let secret = objects.iter().find(|o| kind(o) == "Secret").expect("Secret");
    let keys = |o: &Value| o["data"].as_object().expect("data").keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(config), ["BC_BCD_IMAGE", "BC_NATS_URL", "BC_PUBLIC_URL"]);
    assert_eq!(keys(secret), ["BC_DATABASE_URL", "BC_SECRET_KEY"]);
    for n in ["bc-api", "bc-reconciler"] {
        let c = container(&find(&objects, "Deployment", n)["spec"]["template"]);
        assert_eq!(
            c["envFrom"],
            json!([{"configMapRef": {"name": name(config)}}, {"secretRef": {"name": name(secret)}}]),
            "{n}"
        );
    }

    // bc-api: replicas, probes on its port, scrape annotations, Service, budget.
    let api = find(&objects, "Deployment", "bc-api");
    let replicas = api["spec"]["replicas"].as_i64().expect("replicas");
    assert!(replicas >= 2, "bc-api replicas {replicas}");
    let t = &api["spec"]["template"];
    let c = container(t);
    assert_eq!(c["args"], json!(["serve"]));
    assert_eq!(c["ports"], json!([{"name": "http", "containerPort": 8080}]));
    assert!(
        c["env"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "BC_LISTEN", "value": "0.0.0.0:8080"}))
    );
    assert_eq!(c["readinessProbe"]["httpGet"], json!({"path": "/readyz", "port": "http"}));
    assert_eq!(c["livenessProbe"]["httpGet"], json!({"path": "/healthz", "port": "http"}));
    assert_eq!(
        t["metadata"]["annotations"],
        json!({"prometheus.io/scrape": "true", "prometheus.io/port": "8080", "prometheus.io/path": "/metrics"})
    );
    assert!(selects(&api["spec"]["selector"], &t["metadata"]["labels"]));
    let svc = find(&objects, "Service", "bc-api");
    assert!(selects(&json!({"matchLabels": svc["spec"]["selector"]}), &t["metadata"]["labels"]));
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], "http");
    let pdb = find(&objects, "PodDisruptionBudget", "bc-api");
    assert!(selects(&pdb["spec"]["selector"], &t["metadata"]["labels"]));
    let min = pdb["spec"]["minAvailable"].as_i64().expect("minAvailable");
    assert!((1..replicas).contains(&min), "a drain can go on: {min} of {replicas}");

    // bc-reconciler: replicas, one lease owner name per pod, its budget.
    let rec = find(&objects, "Deployment", "bc-reconciler");
    assert!(rec["spec"]["replicas"].as_i64().expect("replicas") >= 2);
    let t = &rec["spec"]["template"];
    assert!(container(t)["env"].as_array().unwrap().contains(&json!({"name": "BC_REPLICA_ID",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})));
    let pdb = find(&objects, "PodDisruptionBudget", "bc-reconciler");
    assert!(selects(&pdb["spec"]["selector"], &t["metadata"]["labels"]));

    // The migration Job runs bc-api's image (`bc-api migrate`) on the Secret's database.
    let job = find(&objects, "Job", "bc-migrate");
    let jc = container(&job["spec"]["template"]);
    assert_eq!(jc["args"], json!(["migrate"]));
    assert_eq!(jc["image"], container(&api["spec"]["template"])["image"]);
    assert_eq!(jc["env"][1]["valueFrom"]["secretKeyRef"]["name"], name(secret));
}
