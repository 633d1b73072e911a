//! The Kubernetes objects a substrate puts into its cluster (SPEC §6, §9): the pool's
//! Namespace `bc-<pool>`, the `bcd-join` Secret, the `bcd` ServiceAccount and the `bcd`
//! DaemonSet — as manifests a real API server accepts — and the checks that tell an
//! object already in place (no write) from one to apply.
//!
//! Invariants: every manifest carries `better-compute.dev/substrate-pool=<pool id>` and
//! `app.kubernetes.io/managed-by=better-compute`; the DaemonSet's selector is a subset of
//! its pod template's labels and never changes (a real API server refuses a changed
//! selector), its `nodeSelector` is the pool label (bcd never runs on the tenant's own
//! nodes) and it tolerates exactly the flavors' taints; the join token appears only in
//! the Secret manifest, whose `Debug` hides it; bcd gets `BCD_INSECURE_HTTP=1` exactly
//! when the server's public URL is plain `http://` (SPEC §9), by the Secret's optional
//! `insecureHttp` key.

use std::collections::BTreeSet;

use base64::Engine as _;
use bc_domain::PoolId;
use bc_domain::agent::{
    ENV_INSECURE_HTTP, ENV_NODE_NAME, ENV_SERVICE_ACCOUNT_TOKEN_FILE, SECRET_ENV,
    SECRET_KEY_INSECURE_HTTP, SECRET_KEY_JOIN_TOKEN, SECRET_KEY_SERVER_URL,
    SERVICE_ACCOUNT_TOKEN_DIR, SERVICE_ACCOUNT_TOKEN_FILE, SERVICE_ACCOUNT_TOKEN_PATH,
    SERVICE_ACCOUNT_TOKEN_SECONDS, is_plain_http,
};
use bc_domain::model::SecretString;
use bc_domain::name::{
    BCD_NAME, JOIN_SECRET_NAME, LABEL_MANAGED_BY, LABEL_SUBSTRATE_POOL, MANAGED_BY_VALUE,
    substrate_namespace,
};
use bc_domain::policy::{Flavor, Taint};
use bc_domain::ports::cluster::ownership;
use bc_domain::ports::{
    KubeObject, NamespacedObject, ObjectKind, ObjectMeta, ObjectRef, OwnerLabel, Ownership,
    object_in_place,
};
use bc_domain::token::sha256_hex;
use serde_json::{Value, json};

/// The pod label that ties the DaemonSet's selector to its pods.
pub const APP_NAME_LABEL: &str = "app.kubernetes.io/name";

/// The owner label of the pool's objects.
pub fn owner(pool: &PoolId) -> OwnerLabel {
    OwnerLabel { key: LABEL_SUBSTRATE_POOL.to_owned(), value: pool.as_str().to_owned() }
}

/// A reference to one of the pool's objects (`Namespace` is cluster-scoped).
pub fn object_ref(pool: &PoolId, kind: ObjectKind) -> ObjectRef {
    let ns = substrate_namespace(pool);
    match kind {
        ObjectKind::Namespace => ObjectRef { kind, namespace: None, name: ns },
        ObjectKind::Secret => {
            ObjectRef { kind, namespace: Some(ns), name: JOIN_SECRET_NAME.into() }
        }
        ObjectKind::ServiceAccount | ObjectKind::DaemonSet => {
            ObjectRef { kind, namespace: Some(ns), name: BCD_NAME.into() }
        }
    }
}

/// The order objects are applied in (each one's dependencies first); teardown deletes in
/// the reverse order, the Namespace last.
pub const APPLY_ORDER: [ObjectKind; 4] =
    [ObjectKind::Namespace, ObjectKind::ServiceAccount, ObjectKind::Secret, ObjectKind::DaemonSet];

fn labels(pool: &PoolId) -> Value {
    json!({LABEL_SUBSTRATE_POOL: pool.as_str(), LABEL_MANAGED_BY: MANAGED_BY_VALUE})
}

fn manifest(pool: &PoolId, kind: ObjectKind, fields: Value) -> KubeObject {
    let object = object_ref(pool, kind);
    let mut metadata = json!({"name": object.name, "labels": labels(pool)});
    if let Some(ns) = &object.namespace {
        metadata["namespace"] = json!(ns);
    }
    let mut manifest =
        json!({"apiVersion": kind.api_version(), "kind": kind.kind(), "metadata": metadata});
    if let (Value::Object(m), Value::Object(extra)) = (&mut manifest, fields) {
        m.extend(extra);
    }
    KubeObject { object, manifest }
}

/// The pool's Namespace.
pub fn namespace(pool: &PoolId) -> KubeObject {
    manifest(pool, ObjectKind::Namespace, json!({}))
}

/// bcd's ServiceAccount (bcd needs no API rights: it only calls the server).
pub fn service_account(pool: &PoolId) -> KubeObject {
    manifest(pool, ObjectKind::ServiceAccount, json!({"automountServiceAccountToken": false}))
}

/// The value of the Secret's `insecureHttp` key: there (`1`) only for an `http://`
/// public URL, which bcd refuses without it.
const INSECURE_HTTP_VALUE: &str = "1";

/// The `bcd-join` Secret: the join token and the server's public URL (SPEC §9 keys), and
/// `insecureHttp: 1` when that URL is plain `http://`.
pub fn join_secret(pool: &PoolId, token: &SecretString, server_url: &str) -> KubeObject {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let mut data = json!({
        SECRET_KEY_JOIN_TOKEN: b64(token.expose()),
        SECRET_KEY_SERVER_URL: b64(server_url),
    });
    if is_plain_http(server_url) {
        data[SECRET_KEY_INSECURE_HTTP] = json!(b64(INSECURE_HTTP_VALUE));
    }
    manifest(pool, ObjectKind::Secret, json!({"type": "Opaque", "data": data}))
}

/// The distinct taints of the flavors, in a stable order, as tolerations.
pub fn tolerations(flavors: &[Flavor]) -> Vec<Value> {
    let taints: BTreeSet<&Taint> = flavors.iter().flat_map(|f| f.taints.iter()).collect();
    taints
        .into_iter()
        .map(|t| {
            json!({"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect.as_str()})
        })
        .collect()
}

/// The pod's security context: the Pod Security Standards' `restricted` profile asks a
/// non-root user and the runtime's default seccomp profile. No `runAsUser`: the image
/// `cargo xtask image` builds names a numeric non-root user, which the kubelet checks
/// against `runAsNonRoot` (an image that would run as root is refused, not run).
fn pod_security_context() -> Value {
    json!({"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}})
}

/// The container's security context (`restricted`, plus a read-only root filesystem:
/// bcd writes no file).
fn container_security_context() -> Value {
    json!({
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "capabilities": {"drop": ["ALL"]},
    })
}

/// bcd's requests and limits, in canonical quantities (what an API server stores, so the
/// applied manifest reads back unchanged): it holds one connection and heartbeats.
fn bcd_resources() -> Value {
    json!({"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}})
}

/// The volume of the pod's projected ServiceAccount token: bound to the pod (and so to
/// its node), for the audience `server_url` (SPEC §9: what bcd proves its node with; a
/// token for the cluster's own API would not do, and this one opens nothing there).
const TOKEN_VOLUME: &str = "bcd-token";

/// bcd's DaemonSet: on the pool's Nodes only, tolerating the flavors' taints, with the
/// join Secret's keys and the node's name in its env and the pod's projected
/// ServiceAccount token (audience `server_url`) mounted, hardened to the Pod Security
/// Standards' `restricted` profile with small resource requests and limits.
pub fn daemonset(pool: &PoolId, flavors: &[Flavor], image: &str, server_url: &str) -> KubeObject {
    let mut env: Vec<Value> = SECRET_ENV
        .iter()
        .map(|(var, key)| {
            json!({"name": var, "valueFrom": {"secretKeyRef": {"name": JOIN_SECRET_NAME, "key": key}}})
        })
        .collect();
    // Set only when the Secret has the key, i.e. the public URL is http:// (SPEC §9).
    env.push(json!({"name": ENV_INSECURE_HTTP, "valueFrom": {"secretKeyRef":
        {"name": JOIN_SECRET_NAME, "key": SECRET_KEY_INSECURE_HTTP, "optional": true}}}));
    env.push(json!({"name": ENV_NODE_NAME,
        "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}}));
    env.push(json!({"name": ENV_SERVICE_ACCOUNT_TOKEN_FILE, "value": SERVICE_ACCOUNT_TOKEN_FILE}));
    let selector = json!({APP_NAME_LABEL: BCD_NAME, LABEL_SUBSTRATE_POOL: pool.as_str()});
    let mut pod_labels = labels(pool);
    pod_labels[APP_NAME_LABEL] = json!(BCD_NAME);
    manifest(
        pool,
        ObjectKind::DaemonSet,
        json!({"spec": {
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "serviceAccountName": BCD_NAME,
                    "automountServiceAccountToken": false,
                    "nodeSelector": {LABEL_SUBSTRATE_POOL: pool.as_str()},
                    "tolerations": tolerations(flavors),
                    "securityContext": pod_security_context(),
                    "volumes": [{"name": TOKEN_VOLUME, "projected": {"sources": [{
                        "serviceAccountToken": {
                            "audience": server_url,
                            "expirationSeconds": SERVICE_ACCOUNT_TOKEN_SECONDS,
                            "path": SERVICE_ACCOUNT_TOKEN_PATH,
                        }}]}}],
                    "containers": [{
                        "name": BCD_NAME,
                        "image": image,
                        "env": env,
                        "volumeMounts": [{"name": TOKEN_VOLUME,
                            "mountPath": SERVICE_ACCOUNT_TOKEN_DIR, "readOnly": true}],
                        "securityContext": container_security_context(),
                        "resources": bcd_resources(),
                    }],
                },
            },
        }}),
    )
}

/// Whether a Secret we own holds a token whose hash is `live_token_hash` and the
/// `server_url` (with `insecureHttp` exactly when that URL is `http://`), with our labels
/// (its values are digests: `ObjectMeta::content`).
pub fn secret_in_place(
    meta: &ObjectMeta,
    pool: &PoolId,
    live_token_hash: Option<&str>,
    server_url: &str,
) -> bool {
    let digest = |k: &str| meta.content.pointer(&format!("/data/{k}")).and_then(Value::as_str);
    let want_labels = json!({"metadata": {"labels": labels(pool)}, "type": "Opaque"});
    live_token_hash.is_some_and(|h| digest(SECRET_KEY_JOIN_TOKEN) == Some(h))
        && digest(SECRET_KEY_SERVER_URL) == Some(sha256_hex(server_url.as_bytes()).as_str())
        && digest(SECRET_KEY_INSECURE_HTTP).map(str::to_owned)
            == is_plain_http(server_url).then(|| sha256_hex(INSECURE_HTTP_VALUE.as_bytes()))
        && object_in_place(ObjectKind::Secret, &want_labels, &meta.content)
}

/// The join token's digest as the Secret holds it (look it up as a live token's hash).
pub fn secret_token_digest(meta: &ObjectMeta) -> Option<String> {
    meta.content
        .pointer(&format!("/data/{SECRET_KEY_JOIN_TOKEN}"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The substrate's `error` message for an object of ours held by someone else.
pub fn foreign_message(object: &ObjectRef, owner_value: Option<&str>, pool: &PoolId) -> String {
    let carries = match owner_value {
        Some(other) => format!("it carries {LABEL_SUBSTRATE_POOL}={other}, another pool's"),
        None => format!("it has no {LABEL_SUBSTRATE_POOL} label"),
    };
    format!(
        "{object} exists in the cluster but was not made by this pool's substrate ({carries}), so it is never changed or deleted: delete or rename it, or remove the substrate from pool {pool}; the substrate recovers by itself once it is gone"
    )
}

/// What the cluster itself makes in every Namespace (the ServiceAccount controller's
/// `default`, the root-CA publisher's `kube-root-ca.crt`): deleting the Namespace takes
/// nothing of the tenant's with them.
const MADE_BY_THE_CLUSTER: [(&str, &str); 2] =
    [("ServiceAccount", "default"), ("ConfigMap", "kube-root-ca.crt")];

/// The objects in the pool's Namespace that this system did not make (SPEC §6: such a
/// Namespace is left in place). Ours are those with our owner label, those owned
/// (`ownerReferences`, at any depth) by one of ours — bcd's pods and the DaemonSet's
/// revisions, also while the garbage collector is removing them after the DaemonSet —
/// and what the cluster makes in every Namespace.
pub fn foreign_in_namespace<'a>(
    pool: &PoolId,
    objects: &'a [NamespacedObject],
) -> Vec<&'a NamespacedObject> {
    let owner = owner(pool);
    let named_ours: Vec<ObjectRef> = APPLY_ORDER.iter().map(|k| object_ref(pool, *k)).collect();
    let mut ours: BTreeSet<&str> = BTreeSet::new();
    let mine = |o: &NamespacedObject, ours: &BTreeSet<&str>| {
        ownership(&o.labels, &owner) == Ownership::Ours
            || MADE_BY_THE_CLUSTER.contains(&(o.kind.as_str(), o.name.as_str()))
            || o.owners.iter().any(|r| {
                ours.contains(r.uid.as_str())
                    || named_ours.iter().any(|n| n.kind.kind() == r.kind && n.name == r.name)
            })
    };
    // Owners before the owned, whatever the listing's order: grow the set until it holds.
    loop {
        let before = ours.len();
        for o in objects {
            if let Some(uid) = o.uid.as_deref()
                && mine(o, &ours)
            {
                ours.insert(uid);
            }
        }
        if ours.len() == before {
            break;
        }
    }
    objects
        .iter()
        .filter(|o| !(o.uid.as_deref().is_some_and(|u| ours.contains(u)) || mine(o, &ours)))
        .collect()
}

/// The message (and event text) of a Namespace left in place because of `foreign`.
pub fn namespace_kept_message(pool: &PoolId, foreign: &[&NamespacedObject]) -> String {
    let mut names: Vec<String> = foreign.iter().map(|o| o.to_string()).collect();
    names.sort();
    let more = names.len().saturating_sub(10);
    names.truncate(10);
    let mut listed = names.join(", ");
    if more > 0 {
        listed.push_str(&format!(" and {more} more"));
    }
    format!(
        "Namespace {} was left in place: it holds objects this system did not make ({listed}), which deleting it would delete; delete it once they are no longer needed",
        substrate_namespace(pool)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bc_domain::policy::TaintEffect;

    fn pool() -> PoolId {
        PoolId::parse("pool_01hq3k5v9x8y7z6w5v4t3s2r1q").unwrap()
    }

    fn flavor(name: &str, taints: &[(&str, &str)]) -> Flavor {
        Flavor {
            name: name.into(),
            size: "s-2vcpu-4gb".into(),
            count: Some(1),
            auto_scale: None,
            labels: Default::default(),
            taints: taints
                .iter()
                .map(|(k, v)| Taint {
                    key: (*k).into(),
                    value: (*v).into(),
                    effect: TaintEffect::NoSchedule,
                })
                .collect(),
        }
    }

    #[test]
    fn every_object_carries_our_labels_in_the_pools_namespace() {
        let p = pool();
        let token = SecretString::new("bcj_x");
        for o in [
            namespace(&p),
            service_account(&p),
            join_secret(&p, &token, "https://bc"),
            daemonset(&p, &[], "bcd:1", "https://bc"),
        ] {
            let l = &o.manifest["metadata"]["labels"];
            assert_eq!(l[LABEL_SUBSTRATE_POOL], p.as_str(), "{:?}", o.object);
            assert_eq!(l[LABEL_MANAGED_BY], MANAGED_BY_VALUE);
            assert_eq!(o.manifest["kind"], o.object.kind.kind());
            assert_eq!(o.object, object_ref(&p, o.object.kind));
        }
        assert_eq!(namespace(&p).object.name, "bc-pool-01hq3k5v9x8y7z6w5v4t3s2r1q");
        assert!(
            !format!("{:?}", join_secret(&p, &token, "u")).contains("YmNqX3g"),
            "Debug hides the token"
        );
    }

    #[test]
    fn the_daemonset_selects_its_pods_runs_on_pool_nodes_and_tolerates_flavor_taints() {
        let p = pool();
        let ds = daemonset(
            &p,
            &[flavor("a", &[("gpu", "")]), flavor("b", &[("gpu", ""), ("x", "y")])],
            "img",
            "https://bc.example",
        );
        let spec = &ds.manifest["spec"];
        let selector = &spec["selector"]["matchLabels"];
        let pod = &spec["template"]["metadata"]["labels"];
        assert!(
            bc_domain::ports::manifest_in_place(selector, pod),
            "the selector matches the template's labels"
        );
        assert_eq!(
            spec["template"]["spec"]["nodeSelector"],
            json!({LABEL_SUBSTRATE_POOL: p.as_str()})
        );
        let tol = spec["template"]["spec"]["tolerations"].as_array().unwrap();
        assert_eq!(tol.len(), 2, "distinct taints once each: {tol:?}");
        let c = &spec["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], "img");
        let env: Vec<&str> =
            c["env"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
        assert_eq!(
            env,
            vec![
                "BCD_SERVER_URL",
                "BCD_JOIN_TOKEN",
                "BCD_INSECURE_HTTP",
                "NODE_NAME",
                "BCD_SERVICE_ACCOUNT_TOKEN_FILE"
            ]
        );
        assert_eq!(
            c["env"][1]["valueFrom"]["secretKeyRef"],
            json!({"name": "bcd-join", "key": "joinToken"})
        );
        assert_eq!(
            c["env"][2]["valueFrom"]["secretKeyRef"],
            json!({"name": "bcd-join", "key": "insecureHttp", "optional": true})
        );
        assert_eq!(c["env"][3]["valueFrom"]["fieldRef"]["fieldPath"], "spec.nodeName");
        // Issue 29, item 4 (SPEC §9): the pod's projected token, for the server's URL, at
        // the file bcd reads.
        let volume = &spec["template"]["spec"]["volumes"][0];
        assert_eq!(
            volume["projected"]["sources"][0]["serviceAccountToken"],
            json!({"audience": "https://bc.example", "expirationSeconds": 3600, "path": "token"})
        );
        let mount = &c["volumeMounts"][0];
        assert_eq!((&mount["name"], &mount["readOnly"]), (&volume["name"], &json!(true)));
        assert_eq!(
            format!("{}/token", mount["mountPath"].as_str().unwrap()),
            c["env"][4]["value"].as_str().unwrap()
        );
    }

    /// Issue 20, item 8 (SPEC §9): bcd gets BCD_INSECURE_HTTP=1 (the Secret's optional
    /// key the DaemonSet maps) exactly when the public URL is plain http://.
    #[test]
    fn insecure_http_is_set_only_for_an_http_public_url() {
        let (p, token) = (pool(), SecretString::new("bcj_live"));
        let hash = sha256_hex(b"bcj_live");
        for (url, insecure) in [("http://10.0.0.1:8080", true), ("https://bc.example", false)] {
            let s = join_secret(&p, &token, url);
            let value = s.manifest["data"].get("insecureHttp");
            assert_eq!(value, insecure.then(|| json!("MQ==")).as_ref(), "{url}");
            let meta = ObjectMeta::of(ObjectKind::Secret, &s.manifest);
            assert!(secret_in_place(&meta, &p, Some(&hash), url), "{url}");
        }
        // A Secret written before (no key) for an http:// URL is applied again.
        let mut old = join_secret(&p, &token, "http://10.0.0.1:8080");
        old.manifest["data"].as_object_mut().unwrap().remove("insecureHttp");
        let meta = ObjectMeta::of(ObjectKind::Secret, &old.manifest);
        assert!(!secret_in_place(&meta, &p, Some(&hash), "http://10.0.0.1:8080"));
    }

    #[test]
    fn a_secret_is_in_place_only_with_the_live_token_and_the_url() {
        let p = pool();
        let token = SecretString::new("bcj_live");
        let s = join_secret(&p, &token, "https://bc.example");
        let meta = ObjectMeta::of(ObjectKind::Secret, &s.manifest);
        let hash = sha256_hex(b"bcj_live");
        assert_eq!(secret_token_digest(&meta).as_deref(), Some(hash.as_str()));
        assert!(secret_in_place(&meta, &p, Some(&hash), "https://bc.example"));
        assert!(!secret_in_place(&meta, &p, None, "https://bc.example"), "token not live");
        assert!(!secret_in_place(&meta, &p, Some(&hash), "https://moved.example"), "URL changed");
        assert!(!secret_in_place(&meta, &p, Some(&sha256_hex(b"other")), "https://bc.example"));
    }

    #[test]
    fn the_foreign_message_names_the_object_and_the_way_out() {
        let r = object_ref(&pool(), ObjectKind::DaemonSet);
        let m = foreign_message(&r, None, &pool());
        assert!(m.contains("DaemonSet bc-pool-01hq3k5v9x8y7z6w5v4t3s2r1q/bcd"), "{m}");
        assert!(
            m.contains("delete or rename it") && m.contains("no better-compute.dev/substrate-pool"),
            "{m}"
        );
        assert!(foreign_message(&r, Some("pool_x"), &pool()).contains("another pool's"));
    }

    fn obj(
        kind: &str,
        name: &str,
        uid: &str,
        ours: bool,
        owners: &[(&str, &str, &str)],
    ) -> NamespacedObject {
        let mut labels = std::collections::BTreeMap::new();
        if ours {
            labels.insert(LABEL_SUBSTRATE_POOL.to_owned(), pool().to_string());
        }
        NamespacedObject {
            kind: kind.into(),
            name: name.into(),
            uid: Some(uid.into()),
            labels,
            owners: owners
                .iter()
                .map(|(k, n, u)| bc_domain::ports::OwnerReference {
                    kind: (*k).into(),
                    name: (*n).into(),
                    uid: (*u).into(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_namespace_holds_foreign_objects_only_when_something_is_neither_ours_nor_the_clusters() {
        let listed = vec![
            // The owned before their owner, as a listing may give them.
            obj("Pod", "bcd-x1", "p1", false, &[("DaemonSet", "bcd", "ds")]),
            obj("ControllerRevision", "bcd-7f", "cr", false, &[("DaemonSet", "bcd", "ds")]),
            obj("DaemonSet", "bcd", "ds", true, &[]),
            obj("ServiceAccount", "bcd", "sa", true, &[]),
            obj("ServiceAccount", "default", "sa0", false, &[]),
            obj("ConfigMap", "kube-root-ca.crt", "cm0", false, &[]),
            // A pod of a DaemonSet of ours already deleted (the collector is at work).
            obj("Pod", "bcd-old", "p0", false, &[("DaemonSet", "bcd", "gone")]),
        ];
        assert!(foreign_in_namespace(&pool(), &listed).is_empty());

        let mut with_tenants = listed.clone();
        with_tenants.push(obj("ConfigMap", "app-config", "t1", false, &[]));
        with_tenants.push(obj("Deployment", "web", "t2", false, &[]));
        with_tenants.push(obj("ReplicaSet", "web-5d", "t3", false, &[("Deployment", "web", "t2")]));
        // Another pool's label is not ours either.
        let mut other = obj("Secret", "theirs", "t4", false, &[]);
        other.labels.insert(LABEL_SUBSTRATE_POOL.into(), "pool_other".into());
        with_tenants.push(other);
        let foreign: Vec<String> =
            foreign_in_namespace(&pool(), &with_tenants).iter().map(|o| o.to_string()).collect();
        assert_eq!(
            foreign,
            ["ConfigMap app-config", "Deployment web", "ReplicaSet web-5d", "Secret theirs"]
        );
        let f = foreign_in_namespace(&pool(), &with_tenants);
        let m = namespace_kept_message(&pool(), &f);
        assert!(
            m.contains(&substrate_namespace(&pool())) && m.contains("ConfigMap app-config"),
            "{m}"
        );
    }
}
