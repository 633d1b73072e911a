//! The Pod Security Standards' `restricted` profile (which includes `baseline`), checked
//! as `k8s.io/pod-security-admission/policy` checks a pod spec, for tests of what we run
//! on clusters: the bcd DaemonSet a substrate applies (tenant clusters may enforce the
//! profile on its namespace) and the control plane's own manifests in `deploy/`. The
//! simulated API server does not enforce it.
//!
//! Invariant: one function per check of the admission plugin, named by its check id,
//! each reading only the fields that check reads, with "unset" meaning what it means
//! there (e.g. `allowPrivilegeEscalation` unset is a violation; `runAsNonRoot` unset in a
//! container is fine when the pod sets it). Rules follow pod-security-admission at
//! Kubernetes v1.33 (the `latest` profile version), without its relaxation for pods in a
//! user namespace (`hostUsers: false`), which none of ours asks for: stricter, never
//! looser.

use serde_json::Value;

/// One check a pod spec fails: the check's id and what is wrong, as the admission
/// plugin words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The check's id (`runAsNonRoot`, `capabilities_restricted`, …).
    pub check: &'static str,
    /// What is wrong, naming the containers or fields.
    pub detail: String,
}

/// One check: what is wrong with the pod (`metadata`, `spec`), if anything.
type Check = fn(&Value, &Value) -> Option<String>;

/// The violations of the `restricted` profile (baseline checks included) by the pod
/// `metadata` (its annotations) and `spec`; empty when the pod passes.
pub fn restricted(metadata: &Value, spec: &Value) -> Vec<Violation> {
    let checks: [(&'static str, Check); 17] = [
        // baseline
        ("hostProcess", host_process),
        ("hostNamespaces", host_namespaces),
        ("privileged", privileged),
        ("hostPorts", host_ports),
        ("appArmorProfile", app_armor),
        ("seLinuxOptions", se_linux),
        ("procMount", proc_mount),
        ("sysctls", sysctls),
        ("hostProbesAndHostLifecycle", host_probes),
        ("seccompProfile_baseline", seccomp_baseline),
        ("capabilities_baseline", capabilities_baseline),
        // restricted
        ("restrictedVolumes", restricted_volumes),
        ("allowPrivilegeEscalation", allow_privilege_escalation),
        ("runAsNonRoot", run_as_non_root),
        ("runAsUser", run_as_user),
        ("seccompProfile_restricted", seccomp_restricted),
        ("capabilities_restricted", capabilities_restricted),
    ];
    checks
        .into_iter()
        .filter_map(|(check, f)| f(metadata, spec).map(|detail| Violation { check, detail }))
        .collect()
}

/// Every container of the spec: init, regular and ephemeral (the plugin visits all three).
fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .flat_map(|k| spec.get(k).and_then(Value::as_array).into_iter().flatten())
}

fn name(c: &Value) -> &str {
    c.get("name").and_then(Value::as_str).unwrap_or("")
}

/// `securityContext.<path>` of a pod spec or a container.
fn sc<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    v.pointer(&format!("/securityContext/{path}")).filter(|v| !v.is_null())
}

fn is_true(v: Option<&Value>) -> bool {
    v.and_then(Value::as_bool) == Some(true)
}

/// `"container \"a\""` or `"containers \"a\", \"b\""`, or `None` when `names` is empty.
fn containers_named(names: &[&str]) -> Option<String> {
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    match quoted.len() {
        0 => None,
        1 => Some(format!("container {}", quoted[0])),
        _ => Some(format!("containers {}", quoted.join(", "))),
    }
}

/// The containers for which `bad` holds.
fn bad_containers(spec: &Value, bad: impl Fn(&Value) -> bool) -> Vec<&str> {
    containers(spec).filter(|c| bad(c)).map(name).collect()
}

fn host_process(_: &Value, spec: &Value) -> Option<String> {
    let hp = |v: &Value| is_true(sc(v, "windowsOptions/hostProcess"));
    let mut who = bad_containers(spec, hp);
    if hp(spec) {
        who.insert(0, "pod");
    }
    (!who.is_empty()).then(|| format!("{} must not set hostProcess=true", who.join(" and ")))
}

fn host_namespaces(_: &Value, spec: &Value) -> Option<String> {
    let set: Vec<String> = ["hostNetwork", "hostPID", "hostIPC"]
        .into_iter()
        .filter(|k| is_true(spec.get(*k)))
        .map(|k| format!("{k}=true"))
        .collect();
    (!set.is_empty()).then(|| format!("pod must not set {}", set.join(", ")))
}

fn privileged(_: &Value, spec: &Value) -> Option<String> {
    let who = bad_containers(spec, |c| is_true(sc(c, "privileged")));
    containers_named(&who).map(|w| format!("{w} must not set securityContext.privileged=true"))
}

fn host_ports(_: &Value, spec: &Value) -> Option<String> {
    let who = bad_containers(spec, |c| {
        c.get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|p| p.get("hostPort").and_then(Value::as_i64).is_some_and(|port| port != 0))
    });
    containers_named(&who).map(|w| format!("{w} must not use hostPort"))
}

fn app_armor(metadata: &Value, spec: &Value) -> Option<String> {
    let allowed = |v: &Value| {
        sc(v, "appArmorProfile/type")
            .and_then(Value::as_str)
            .is_none_or(|t| t == "RuntimeDefault" || t == "Localhost")
    };
    let mut bad: Vec<String> = Vec::new();
    if !allowed(spec) {
        bad.push("pod".into());
    }
    bad.extend(bad_containers(spec, |c| !allowed(c)).into_iter().map(|n| format!("{n:?}")));
    let annotations = metadata.get("annotations").and_then(Value::as_object);
    for (k, v) in annotations.into_iter().flatten() {
        let value = v.as_str().unwrap_or("");
        if k.starts_with("container.apparmor.security.beta.kubernetes.io/")
            && value != "runtime/default"
            && !value.starts_with("localhost/")
        {
            bad.push(format!("annotation {k}={value}"));
        }
    }
    (!bad.is_empty()).then(|| {
        format!(
            "{} must not set an AppArmor profile other than RuntimeDefault or Localhost",
            bad.join(", ")
        )
    })
}

fn se_linux(_: &Value, spec: &Value) -> Option<String> {
    const TYPES: [&str; 5] =
        ["", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"];
    let bad = |v: &Value| {
        let field = |f: &str| sc(v, &format!("seLinuxOptions/{f}")).and_then(Value::as_str);
        !TYPES.contains(&field("type").unwrap_or(""))
            || !field("user").unwrap_or("").is_empty()
            || !field("role").unwrap_or("").is_empty()
    };
    let mut who = bad_containers(spec, bad);
    if bad(spec) {
        who.insert(0, "pod");
    }
    (!who.is_empty()).then(|| {
        format!("{} must not set a seLinuxOptions type other than the container types, nor a user or role", who.join(", "))
    })
}

fn proc_mount(_: &Value, spec: &Value) -> Option<String> {
    let who = bad_containers(spec, |c| {
        sc(c, "procMount").and_then(Value::as_str).is_some_and(|m| m != "Default")
    });
    containers_named(&who).map(|w| format!("{w} must not set securityContext.procMount"))
}

fn sysctls(_: &Value, spec: &Value) -> Option<String> {
    const SAFE: [&str; 10] = [
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    ];
    let unsafe_names: Vec<&str> = sc(spec, "sysctls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("name").and_then(Value::as_str))
        .filter(|n| !SAFE.contains(n))
        .collect();
    (!unsafe_names.is_empty()).then(|| format!("forbidden sysctls {}", unsafe_names.join(", ")))
}

fn host_probes(_: &Value, spec: &Value) -> Option<String> {
    let handlers = |c: &Value| -> Vec<Value> {
        let mut out = Vec::new();
        for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
            out.extend(c.get(probe).cloned());
        }
        for hook in ["postStart", "preStop"] {
            out.extend(c.pointer(&format!("/lifecycle/{hook}")).cloned());
        }
        out
    };
    let who = bad_containers(spec, |c| {
        handlers(c).iter().any(|h| {
            ["/httpGet/host", "/tcpSocket/host"]
                .iter()
                .any(|p| h.pointer(p).and_then(Value::as_str).is_some_and(|s| !s.is_empty()))
        })
    });
    containers_named(&who).map(|w| format!("{w} must not set a host in probes or lifecycle hooks"))
}

fn seccomp_type(v: &Value) -> Option<&str> {
    sc(v, "seccompProfile/type").and_then(Value::as_str)
}

fn seccomp_baseline(_: &Value, spec: &Value) -> Option<String> {
    let unconfined = |v: &Value| seccomp_type(v) == Some("Unconfined");
    let mut who = bad_containers(spec, unconfined);
    if unconfined(spec) {
        who.insert(0, "pod");
    }
    (!who.is_empty()).then(|| {
        format!(
            "{} must not set securityContext.seccompProfile.type to \"Unconfined\"",
            who.join(", ")
        )
    })
}

fn added_capabilities(c: &Value) -> impl Iterator<Item = &str> {
    sc(c, "capabilities/add")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

fn capabilities_baseline(_: &Value, spec: &Value) -> Option<String> {
    const ALLOWED: [&str; 13] = [
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    ];
    let who = bad_containers(spec, |c| added_capabilities(c).any(|a| !ALLOWED.contains(&a)));
    containers_named(&who).map(|w| format!("{w} must not add capabilities beyond the default set"))
}

fn restricted_volumes(_: &Value, spec: &Value) -> Option<String> {
    const ALLOWED: [&str; 8] = [
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    ];
    let bad: Vec<&str> = spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| !ALLOWED.iter().any(|k| v.get(*k).is_some_and(|source| !source.is_null())))
        .map(name)
        .collect();
    (!bad.is_empty()).then(|| format!("volumes {bad:?} have restricted types"))
}

fn allow_privilege_escalation(_: &Value, spec: &Value) -> Option<String> {
    let who = bad_containers(spec, |c| {
        sc(c, "allowPrivilegeEscalation").and_then(Value::as_bool) != Some(false)
    });
    containers_named(&who)
        .map(|w| format!("{w} must set securityContext.allowPrivilegeEscalation=false"))
}

fn run_as_non_root(_: &Value, spec: &Value) -> Option<String> {
    let pod = sc(spec, "runAsNonRoot").and_then(Value::as_bool);
    let explicit_false =
        bad_containers(spec, |c| sc(c, "runAsNonRoot").and_then(Value::as_bool) == Some(false));
    let mut setters: Vec<String> = Vec::new();
    if pod == Some(false) {
        setters.push("pod".into());
    }
    setters.extend(containers_named(&explicit_false));
    if !setters.is_empty() {
        return Some(format!(
            "{} must not set securityContext.runAsNonRoot=false",
            setters.join(" and ")
        ));
    }
    let implicit = bad_containers(spec, |c| pod != Some(true) && sc(c, "runAsNonRoot").is_none());
    containers_named(&implicit)
        .map(|w| format!("pod or {w} must set securityContext.runAsNonRoot=true"))
}

fn run_as_user(_: &Value, spec: &Value) -> Option<String> {
    let root = |v: &Value| sc(v, "runAsUser").and_then(Value::as_i64) == Some(0);
    let mut who: Vec<String> = Vec::new();
    if root(spec) {
        who.push("pod".into());
    }
    who.extend(containers_named(&bad_containers(spec, root)));
    (!who.is_empty()).then(|| format!("{} must not set runAsUser=0", who.join(" and ")))
}

fn seccomp_restricted(_: &Value, spec: &Value) -> Option<String> {
    let valid = |t: &str| t == "RuntimeDefault" || t == "Localhost";
    let pod = seccomp_type(spec);
    let mut setters: Vec<String> = Vec::new();
    if pod.is_some_and(|t| !valid(t)) {
        setters.push("pod".into());
    }
    setters.extend(containers_named(&bad_containers(spec, |c| {
        seccomp_type(c).is_some_and(|t| !valid(t))
    })));
    if !setters.is_empty() {
        return Some(format!(
            "{} must not set securityContext.seccompProfile.type to a profile other than \"RuntimeDefault\" or \"Localhost\"",
            setters.join(" and ")
        ));
    }
    let pod_set = pod.is_some_and(valid);
    let implicit = bad_containers(spec, |c| !pod_set && seccomp_type(c).is_none());
    containers_named(&implicit).map(|w| {
        format!("pod or {w} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"")
    })
}

fn capabilities_restricted(_: &Value, spec: &Value) -> Option<String> {
    let mut details = Vec::new();
    let missing_drop = bad_containers(spec, |c| {
        !sc(c, "capabilities/drop")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|d| d.as_str() == Some("ALL"))
    });
    if let Some(w) = containers_named(&missing_drop) {
        details.push(format!("{w} must set securityContext.capabilities.drop=[\"ALL\"]"));
    }
    let adding = bad_containers(spec, |c| added_capabilities(c).any(|a| a != "NET_BIND_SERVICE"));
    if let Some(w) = containers_named(&adding) {
        details.push(format!("{w} must not add capabilities other than NET_BIND_SERVICE"));
    }
    (!details.is_empty()).then(|| details.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A pod spec that passes: the settings the bcd DaemonSet and deploy/ use.
    fn passing() -> Value {
        json!({
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "volumes": [{"name": "tmp", "emptyDir": {}}],
            "containers": [{
                "name": "app",
                "image": "i",
                "ports": [{"containerPort": 8080}],
                "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8080}},
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "readOnlyRootFilesystem": true,
                    "capabilities": {"drop": ["ALL"]},
                },
            }],
        })
    }

    fn checks_failed(spec: &Value) -> Vec<&'static str> {
        restricted(&json!({}), spec).into_iter().map(|v| v.check).collect()
    }

    fn with(mut spec: Value, pointer: &str, value: Value) -> Value {
        *spec.pointer_mut(pointer).unwrap_or_else(|| panic!("{pointer}")) = value;
        spec
    }

    #[test]
    fn a_hardened_pod_passes_and_each_loosening_fails_its_own_check() {
        assert_eq!(checks_failed(&passing()), Vec::<&str>::new());
        let c = "/containers/0/securityContext";
        let cases: Vec<(Value, &str)> = vec![
            (
                with(passing(), &format!("{c}/allowPrivilegeEscalation"), json!(true)),
                "allowPrivilegeEscalation",
            ),
            (
                with(passing(), &format!("{c}/capabilities"), json!({"drop": ["NET_RAW"]})),
                "capabilities_restricted",
            ),
            (
                with(
                    passing(),
                    &format!("{c}/capabilities"),
                    json!({"drop": ["ALL"], "add": ["NET_BIND_SERVICE", "NET_ADMIN"]}),
                ),
                "capabilities_restricted",
            ),
            (with(passing(), "/securityContext/runAsNonRoot", json!(false)), "runAsNonRoot"),
            (
                with(
                    passing(),
                    "/securityContext",
                    json!({"seccompProfile": {"type": "RuntimeDefault"}}),
                ),
                "runAsNonRoot",
            ),
            (
                with(passing(), "/securityContext/seccompProfile", json!({"type": "Unconfined"})),
                "seccompProfile_restricted",
            ),
            (
                with(passing(), "/securityContext", json!({"runAsNonRoot": true})),
                "seccompProfile_restricted",
            ),
            (
                with(passing(), "/volumes/0", json!({"name": "h", "hostPath": {"path": "/"}})),
                "restrictedVolumes",
            ),
            (
                with(
                    passing(),
                    "/containers/0/ports/0",
                    json!({"containerPort": 80, "hostPort": 80}),
                ),
                "hostPorts",
            ),
            (with(passing(), &format!("{c}/readOnlyRootFilesystem"), json!(null)), ""),
        ];
        for (spec, check) in cases {
            let failed = checks_failed(&spec);
            if check.is_empty() {
                assert!(
                    failed.is_empty(),
                    "readOnlyRootFilesystem is not part of the profile: {failed:?}"
                );
            } else {
                assert!(failed.contains(&check), "{check} not failed by {spec}: {failed:?}");
            }
        }
        // Unset in a container is a violation where the plugin says so.
        let bare = json!({"containers": [{"name": "a", "image": "i"}]});
        let failed = checks_failed(&bare);
        for check in [
            "allowPrivilegeEscalation",
            "runAsNonRoot",
            "seccompProfile_restricted",
            "capabilities_restricted",
        ] {
            assert!(failed.contains(&check), "{check}: {failed:?}");
        }
        let v = restricted(&json!({}), &bare);
        let ape = v.iter().find(|v| v.check == "allowPrivilegeEscalation").unwrap();
        assert_eq!(
            ape.detail,
            "container \"a\" must set securityContext.allowPrivilegeEscalation=false"
        );
        // Init containers count too; host namespaces and privileged are baseline failures.
        let init = with(passing(), "/volumes", json!([]));
        let mut init = init;
        init["initContainers"] =
            json!([{"name": "migrate", "image": "i", "securityContext": {"privileged": true}}]);
        init["hostNetwork"] = json!(true);
        let failed = checks_failed(&init);
        for check in
            ["privileged", "hostNamespaces", "allowPrivilegeEscalation", "capabilities_restricted"]
        {
            assert!(failed.contains(&check), "{check}: {failed:?}");
        }
    }
}
