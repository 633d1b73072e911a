//! Projected ServiceAccount tokens of the simulated clusters, and their TokenReview API
//! (`POST /apis/authentication.k8s.io/v1/tokenreviews`): what the kubelet writes into a
//! pod's `projected.sources[].serviceAccountToken` volume (a TokenRequest bound to the
//! pod and its node), and how the API server authenticates such a token for whoever
//! asks.
//!
//! The tokens are JWTs signed ES256 with a key of the cluster's own, carrying the claims
//! of Kubernetes' `pkg/serviceaccount/claims.go`: `iss`, `sub`
//! (`system:serviceaccount:<ns>:<sa>`), `aud`, `exp`/`iat`/`nbf`, `jti` and
//! `kubernetes.io: {namespace, node: {name, uid}, pod: {name, uid}, serviceaccount:
//! {name, uid}}`.
//!
//! Invariant: a review authenticates a token only when its signature is this cluster's,
//! it is within `nbf`..`exp` at the clock's now, one of its audiences is asked for (the
//! API server's own when none is), and its ServiceAccount, pod and node still exist with
//! the uids it names — otherwise `status.authenticated` is false with `status.error` set,
//! as a real API server answers (never an HTTP error). Keys live as long as the
//! simulator process: after a restart, earlier tokens fail review as after a key
//! rotation, and the kubelet (here: [`projected_token`]) mints new ones.

use std::collections::BTreeMap;
use std::sync::Mutex;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _,
    UnparsedPublicKey,
};
use serde_json::{Value, json};

use super::{KubeError, Resource};
use crate::SimState;

/// The issuer of every simulated cluster's tokens (a cluster's default
/// `--service-account-issuer`), and the API server's own audience.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The shortest `expirationSeconds` a TokenRequest takes (Kubernetes: 10 minutes).
pub const MIN_EXPIRATION_SECONDS: i64 = 600;

/// The default `expirationSeconds` of a projected token (one hour).
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;

/// The counter key of TokenReview requests.
pub const REVIEW_OP: &str = "create tokenreviews";

/// Each cluster's signing key, made on first use.
#[derive(Default)]
pub struct TokenIssuer {
    keys: Mutex<BTreeMap<String, std::sync::Arc<EcdsaKeyPair>>>,
}

impl std::fmt::Debug for TokenIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenIssuer")
    }
}

impl TokenIssuer {
    fn key(&self, cluster: &str) -> Result<std::sync::Arc<EcdsaKeyPair>, String> {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = keys.get(cluster) {
            return Ok(k.clone());
        }
        let rng = SystemRandom::new();
        let made = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| "cannot make a signing key".to_owned())?;
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, made.as_ref(), &rng)
            .map_err(|_| "cannot read the signing key".to_owned())?;
        let key = std::sync::Arc::new(key);
        keys.insert(cluster.to_owned(), key.clone());
        Ok(key)
    }
}

/// The key id of a public key (as the API server's: a digest of it).
fn key_id(key: &EcdsaKeyPair) -> String {
    URL_SAFE_NO_PAD.encode(&bc_domain::token::sha256_hex(key.public_key().as_ref())[..32])
}

fn unix_now(state: &SimState) -> i64 {
    state.clock.now().unix_ms().div_euclid(1000)
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

/// What a TokenRequest bound to a pod needs of the cluster's objects.
struct Bound {
    namespace: String,
    service_account: (String, String),
    pod: (String, String),
    node: (String, String),
}

fn bound_to(state: &SimState, cluster: &str, namespace: &str, pod: &str) -> Result<Bound, String> {
    let get = |r: Resource, ns: Option<&str>, name: &str| state.kube.get(cluster, r, ns, name).ok();
    let p = get(Resource::Pod, Some(namespace), pod)
        .ok_or_else(|| format!("pods \"{pod}\" not found"))?;
    let sa = match text(&p, "/spec/serviceAccountName") {
        "" => "default",
        sa => sa,
    };
    let account = get(Resource::ServiceAccount, Some(namespace), sa)
        .ok_or_else(|| format!("serviceaccounts \"{sa}\" not found"))?;
    let node_name = text(&p, "/spec/nodeName");
    if node_name.is_empty() {
        return Err(format!("pod \"{pod}\" is not scheduled to a node yet"));
    }
    let node = get(Resource::Node, None, node_name)
        .ok_or_else(|| format!("nodes \"{node_name}\" not found"))?;
    Ok(Bound {
        namespace: namespace.to_owned(),
        service_account: (sa.to_owned(), text(&account, "/metadata/uid").to_owned()),
        pod: (pod.to_owned(), text(&p, "/metadata/uid").to_owned()),
        node: (node_name.to_owned(), text(&node, "/metadata/uid").to_owned()),
    })
}

/// A token for the ServiceAccount of pod `namespace/pod` of `cluster`, bound to the pod
/// and its node, for `audiences`, valid `seconds` from the clock's now (a TokenRequest
/// with a pod `boundObjectRef`, as the kubelet makes one).
pub fn mint(
    state: &SimState,
    cluster: &str,
    namespace: &str,
    pod: &str,
    audiences: &[String],
    seconds: i64,
) -> Result<String, String> {
    if seconds < MIN_EXPIRATION_SECONDS {
        return Err(format!(
            "spec.expirationSeconds: Invalid value: {seconds}: may not specify a duration less than 10 minutes"
        ));
    }
    let b = bound_to(state, cluster, namespace, pod)?;
    let now = unix_now(state);
    let claims = json!({
        "aud": audiences,
        "exp": now + seconds,
        "iat": now,
        "iss": ISSUER,
        "jti": ulid::Ulid::generate().to_string().to_lowercase(),
        "kubernetes.io": {
            "namespace": b.namespace,
            "node": {"name": b.node.0, "uid": b.node.1},
            "pod": {"name": b.pod.0, "uid": b.pod.1},
            "serviceaccount": {"name": b.service_account.0, "uid": b.service_account.1},
        },
        "nbf": now,
        "sub": bc_domain::rules::node_proof::service_account_username(&b.namespace, &b.service_account.0),
    });
    let key = state.tokens.key(cluster)?;
    let header = json!({"alg": "ES256", "kid": key_id(&key)});
    let signed = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let signature = key
        .sign(&SystemRandom::new(), signed.as_bytes())
        .map_err(|_| "cannot sign the token".to_owned())?;
    Ok(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref())))
}

/// The token the kubelet writes at `file` in a container of pod `namespace/pod`: the
/// pod's projected `serviceAccountToken` source whose volume the container mounts so
/// that `mountPath/path` is `file`, minted with its `audience` (the API server's when
/// unset) and `expirationSeconds`. `Ok(None)` when no such projection is mounted there.
pub fn projected_token(
    state: &SimState,
    cluster: &str,
    namespace: &str,
    pod: &str,
    file: &str,
) -> Result<Option<String>, String> {
    let p = state
        .kube
        .get(cluster, Resource::Pod, Some(namespace), pod)
        .map_err(|_| format!("pods \"{pod}\" not found"))?;
    let list = |v: &Value, ptr: &str| v.pointer(ptr).and_then(Value::as_array).cloned();
    let volumes = list(&p, "/spec/volumes").unwrap_or_default();
    for c in list(&p, "/spec/containers").unwrap_or_default() {
        for m in list(&c, "/volumeMounts").unwrap_or_default() {
            let Some(volume) = volumes.iter().find(|v| v["name"] == m["name"]) else { continue };
            for source in list(volume, "/projected/sources").unwrap_or_default() {
                let Some(t) = source.get("serviceAccountToken") else { continue };
                let at = format!(
                    "{}/{}",
                    text(&m, "/mountPath").trim_end_matches('/'),
                    text(t, "/path")
                );
                if at != file {
                    continue;
                }
                let audience = match text(t, "/audience") {
                    "" => ISSUER,
                    a => a,
                };
                let seconds = t
                    .get("expirationSeconds")
                    .and_then(Value::as_i64)
                    .unwrap_or(DEFAULT_EXPIRATION_SECONDS);
                return mint(state, cluster, namespace, pod, &[audience.to_owned()], seconds)
                    .map(Some);
            }
        }
    }
    Ok(None)
}

/// Why a token is not authenticated (the union authenticator's wording).
fn invalid(why: &str) -> String {
    format!("[invalid bearer token, {why}]")
}

/// The claims of `token` if it is signed with `cluster`'s key.
fn verified_claims(state: &SimState, cluster: &str, token: &str) -> Result<Value, String> {
    let malformed = || invalid("square/go-jose: compact JWS format must have three parts");
    let mut parts = token.split('.');
    let (Some(h), Some(c), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed());
    };
    let signature = URL_SAFE_NO_PAD.decode(s).map_err(|_| malformed())?;
    let key = state.tokens.key(cluster)?;
    UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, key.public_key().as_ref())
        .verify(format!("{h}.{c}").as_bytes(), &signature)
        .map_err(|_| invalid("square/go-jose: error in cryptographic primitive"))?;
    let claims = URL_SAFE_NO_PAD.decode(c).map_err(|_| malformed())?;
    serde_json::from_slice(&claims).map_err(|_| malformed())
}

/// The status of a review of `token` for `audiences` at `cluster` (empty: the API
/// server's own audience).
pub fn review(state: &SimState, cluster: &str, token: &str, audiences: &[String]) -> Value {
    match authenticate(state, cluster, token, audiences) {
        Ok(status) => status,
        Err(error) => json!({"user": {}, "error": error}),
    }
}

fn authenticate(
    state: &SimState,
    cluster: &str,
    token: &str,
    audiences: &[String],
) -> Result<Value, String> {
    let claims = verified_claims(state, cluster, token)?;
    if text(&claims, "/iss") != ISSUER {
        return Err(invalid("token issuer is not trusted"));
    }
    let now = unix_now(state);
    let num = |k: &str| claims.get(k).and_then(Value::as_i64);
    match (num("exp"), num("nbf")) {
        (Some(exp), _) if now > exp => {
            return Err(invalid("service account token has expired"));
        }
        (_, Some(nbf)) if now < nbf => {
            return Err(invalid("service account token is not valid yet"));
        }
        (None, _) => return Err(invalid("service account token has no expiry")),
        _ => {}
    }
    let token_auds: Vec<String> = match claims.get("aud") {
        Some(Value::String(a)) => vec![a.clone()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        _ => Vec::new(),
    };
    let wanted = if audiences.is_empty() { vec![ISSUER.to_owned()] } else { audiences.to_vec() };
    let matched: Vec<String> = wanted.iter().filter(|a| token_auds.contains(a)).cloned().collect();
    if matched.is_empty() {
        return Err(invalid(&format!(
            "token audiences {token_auds:?} is invalid for the target audiences {wanted:?}"
        )));
    }
    let k = |p: &str| text(&claims, &format!("/kubernetes.io{p}")).to_owned();
    let namespace = k("/namespace");
    let (sa, sa_uid) = (k("/serviceaccount/name"), k("/serviceaccount/uid"));
    let (pod, pod_uid) = (k("/pod/name"), k("/pod/uid"));
    let (node, node_uid) = (k("/node/name"), k("/node/uid"));
    let uid_of = |r: Resource, ns: Option<&str>, name: &str| {
        state.kube.get(cluster, r, ns, name).ok().map(|o| text(&o, "/metadata/uid").to_owned())
    };
    let invalidated = || invalid("service account token has been invalidated");
    match uid_of(Resource::ServiceAccount, Some(&namespace), &sa) {
        None => return Err(invalid(&format!("serviceaccounts \"{sa}\" not found"))),
        Some(uid) if uid != sa_uid => {
            return Err(invalid(&format!(
                "service account UID ({uid}) does not match claim ({sa_uid})"
            )));
        }
        Some(_) => {}
    }
    if !pod.is_empty() && uid_of(Resource::Pod, Some(&namespace), &pod) != Some(pod_uid.clone()) {
        return Err(invalidated());
    }
    if !node.is_empty() && uid_of(Resource::Node, None, &node) != Some(node_uid.clone()) {
        return Err(invalidated());
    }
    let mut extra = serde_json::Map::new();
    extra.insert(
        bc_domain::rules::node_proof::EXTRA_CREDENTIAL_ID.into(),
        json!([format!("JTI={}", text(&claims, "/jti"))]),
    );
    if !node.is_empty() {
        extra.insert(bc_domain::rules::node_proof::EXTRA_NODE_NAME.into(), json!([node]));
        extra.insert(bc_domain::rules::node_proof::EXTRA_NODE_UID.into(), json!([node_uid]));
    }
    if !pod.is_empty() {
        extra.insert(bc_domain::rules::node_proof::EXTRA_POD_NAME.into(), json!([pod]));
        extra.insert(bc_domain::rules::node_proof::EXTRA_POD_UID.into(), json!([pod_uid]));
    }
    Ok(json!({
        "authenticated": true,
        "user": {
            "username": bc_domain::rules::node_proof::service_account_username(&namespace, &sa),
            "uid": sa_uid,
            "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{namespace}"), "system:authenticated"],
            "extra": extra,
        },
        "audiences": matched,
    }))
}

/// Answers a TokenReview create (`body`: the TokenReview sent) as the API server does:
/// 201 with the review, its spec echoed and its status filled.
pub fn create_review(state: &SimState, cluster: &str, body: &Value) -> Result<Value, KubeError> {
    let kind_ok = body.get("kind").is_none_or(|k| k == "TokenReview");
    if !kind_ok {
        return Err(KubeError::bad_request("the body is not a TokenReview"));
    }
    let spec = body.get("spec").cloned().unwrap_or(json!({}));
    let token = spec.get("token").and_then(Value::as_str).unwrap_or_default();
    if token.is_empty() {
        return Err(KubeError::new(
            422,
            "Invalid",
            "TokenReview.authentication.k8s.io \"\" is invalid: spec.token: Required value: token must not be empty",
        ));
    }
    let audiences: Vec<String> = spec
        .get("audiences")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    Ok(json!({
        "kind": "TokenReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": null},
        "spec": spec,
        "status": review(state, cluster, token, &audiences),
    }))
}

/// A token of a pod of ServiceAccount `namespace/service_account` running on `node` of
/// `cluster`, for `audience`, valid `seconds`: the namespace, the ServiceAccount and the
/// pod (`<service_account>-<node>`) are made as `kubectl` would when absent, then the
/// kubelet's TokenRequest is minted. What a test hands a joining bcd of its own.
pub fn pod_token_on(
    state: &SimState,
    cluster: &str,
    (namespace, service_account): (&str, &str),
    node: &str,
    audience: &str,
    seconds: i64,
) -> Result<String, String> {
    // The cluster's controllers register its Nodes (as a running cluster has them).
    super::KubeStore::refresh(state, cluster);
    let now = state.clock.now();
    let pod = format!("{service_account}-{node}");
    let manifests = [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": service_account, "namespace": namespace}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": namespace},
            "spec": {"nodeName": node, "serviceAccountName": service_account,
                "automountServiceAccountToken": false,
                "containers": [{"name": "bcd", "image": "bcd"}]}}),
    ];
    for m in &manifests {
        let s = |p: &str| m.pointer(p).and_then(Value::as_str).unwrap_or_default();
        let resource = Resource::from_type(s("/apiVersion"), s("/kind"))
            .ok_or_else(|| "unsupported kind".to_owned())?;
        let ns = (resource != Resource::Namespace).then_some(namespace);
        if state.kube.get(cluster, resource, ns, s("/metadata/name")).is_err() {
            state
                .kube
                .apply_manifest(cluster, "kubectl", m, false, now)
                .map_err(|e| format!("{}: {}", s("/kind"), e.message))?;
        }
    }
    mint(state, cluster, namespace, &pod, &[audience.to_owned()], seconds)
}
