//! `ClusterClient::review_token` (the real `kube` client's TokenReview) against the
//! simulated clusters' projected ServiceAccount tokens (issue 29, item 4; SPEC §9): a
//! token the kubelet minted for a pod is authenticated with the pod's and node's names
//! in `user.extra`, as a real API server answers; an expired, wrong-audience, forged or
//! orphaned token is `authenticated: false` with the server's reason, never an error.

use bc_domain::model::SecretString;
use bc_domain::ports::{ClusterApi, ClusterClient, TokenReview};
use bc_domain::rules::node_proof::{
    EXTRA_CREDENTIAL_ID, EXTRA_NODE_NAME, EXTRA_NODE_UID, EXTRA_POD_NAME, EXTRA_POD_UID,
};
use bc_providers::kube::KubeClusterApi;
use bc_sim::kube::Resource;
use bc_sim::kube::tokens::{self, pod_token_on};
use bc_sim::testing::{self, ClusterEnv, Face, bounded};

const AUDIENCE: &str = "https://bc.example";

async fn client(env: &ClusterEnv, face: Face) -> std::sync::Arc<dyn ClusterClient> {
    let api = match face {
        Face::InProcess => {
            KubeClusterApi::in_process(testing::cluster_routes(env.sim.state().clone()))
        }
        _ => KubeClusterApi::new(),
    };
    let kubeconfig = SecretString::new(env.kubeconfig_on(face));
    bounded(api.connect(&kubeconfig)).await.unwrap()
}

/// The names of the cluster's nodes, sorted.
fn nodes(env: &ClusterEnv) -> Vec<String> {
    let now = bc_domain::ports::Clock::now(env.clock.as_ref());
    let mut names: Vec<String> = env
        .sim
        .state()
        .model()
        .cluster_nodes(&env.id, now)
        .unwrap()
        .into_iter()
        .map(|n| n.name)
        .collect();
    names.sort();
    names
}

async fn review(c: &dyn ClusterClient, token: &str, audience: &str) -> TokenReview {
    bounded(c.review_token(&SecretString::new(token), &[audience.to_owned()])).await.unwrap()
}

fn uid(env: &ClusterEnv, r: Resource, ns: Option<&str>, name: &str) -> String {
    let o = env.sim.state().kube.get(&env.id, r, ns, name).unwrap();
    o["metadata"]["uid"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_projected_token_is_reviewed_as_an_api_server_does_on_every_face() {
    let env = ClusterEnv::start().await;
    let node = nodes(&env)[0].clone();
    let state = env.sim.state();
    let token =
        pod_token_on(state, &env.id, ("bc-p1", "bcd"), &node, AUDIENCE, 3600).expect("minted");
    // The claims are Kubernetes' (pkg/serviceaccount/claims.go), bound to pod and node.
    let payload = token.split('.').nth(1).unwrap();
    use base64::Engine as _;
    let claims: serde_json::Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).unwrap(),
    )
    .unwrap();
    let pod = format!("bcd-{node}");
    assert_eq!(claims["sub"], "system:serviceaccount:bc-p1:bcd");
    assert_eq!(claims["aud"], serde_json::json!([AUDIENCE]));
    assert_eq!(claims["iss"], tokens::ISSUER);
    assert_eq!(claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(), 3600);
    assert_eq!(claims["nbf"], claims["iat"]);
    let k = &claims["kubernetes.io"];
    assert_eq!(k["namespace"], "bc-p1");
    assert_eq!(k["pod"]["name"], pod.as_str());
    assert_eq!(k["pod"]["uid"], uid(&env, Resource::Pod, Some("bc-p1"), &pod).as_str());
    assert_eq!(k["node"]["name"], node.as_str());
    assert_eq!(k["node"]["uid"], uid(&env, Resource::Node, None, &node).as_str());
    let sa_uid = uid(&env, Resource::ServiceAccount, Some("bc-p1"), "bcd");
    assert_eq!(k["serviceaccount"], serde_json::json!({"name": "bcd", "uid": sa_uid}));

    for face in [Face::Tls, Face::PathPrefixed, Face::InProcess] {
        let c = client(&env, face).await;
        let r = review(c.as_ref(), &token, AUDIENCE).await;
        assert!(r.authenticated, "{face:?}: {r:?}");
        assert_eq!(r.username, "system:serviceaccount:bc-p1:bcd");
        assert_eq!(r.uid, sa_uid);
        assert_eq!(
            r.groups,
            ["system:serviceaccounts", "system:serviceaccounts:bc-p1", "system:authenticated"]
        );
        assert_eq!(r.audiences, [AUDIENCE]);
        assert_eq!(r.extra[EXTRA_NODE_NAME], [node.as_str()]);
        assert_eq!(r.extra[EXTRA_NODE_UID], [k["node"]["uid"].as_str().unwrap()]);
        assert_eq!(r.extra[EXTRA_POD_NAME], [pod.as_str()]);
        assert_eq!(r.extra[EXTRA_POD_UID], [k["pod"]["uid"].as_str().unwrap()]);
        assert_eq!(
            r.extra[EXTRA_CREDENTIAL_ID],
            [format!("JTI={}", claims["jti"].as_str().unwrap())]
        );
        assert_eq!(r.error, None);
    }
    assert_eq!(state.kube.request_count(&env.id, tokens::REVIEW_OP), 3);
}

#[tokio::test]
async fn expired_other_audience_forged_and_orphaned_tokens_are_not_authenticated() {
    let env = ClusterEnv::start().await;
    let node = nodes(&env)[0].clone();
    let state = env.sim.state();
    let c = client(&env, Face::InProcess).await;
    let token = pod_token_on(state, &env.id, ("bc-p1", "bcd"), &node, AUDIENCE, 600).unwrap();
    assert!(review(c.as_ref(), &token, AUDIENCE).await.authenticated);

    let other = review(c.as_ref(), &token, "https://elsewhere.example").await;
    assert!(!other.authenticated && other.username.is_empty(), "{other:?}");
    assert!(other.error.as_deref().unwrap().contains("is invalid for the target audiences"));

    // A token with its signature changed, and one that is no JWT at all.
    let mut forged = token.clone();
    forged.truncate(token.len() - 4);
    forged.push_str("AAAA");
    for bad in [forged.as_str(), "not-a-jwt"] {
        let r = review(c.as_ref(), bad, AUDIENCE).await;
        assert!(!r.authenticated && r.error.is_some(), "{r:?}");
    }

    // Past `exp`: expired.
    testing::step(&env.clock, 601);
    let expired = review(c.as_ref(), &token, AUDIENCE).await;
    assert!(!expired.authenticated, "{expired:?}");
    assert!(expired.error.as_deref().unwrap().contains("service account token has expired"));

    // A token whose pod is gone is invalidated.
    let fresh = pod_token_on(state, &env.id, ("bc-p1", "bcd"), &node, AUDIENCE, 3600).unwrap();
    let pod = format!("bcd-{node}");
    let pre = bc_domain::ports::Preconditions::default();
    let now = bc_domain::ports::Clock::now(env.clock.as_ref());
    state.kube.delete(&env.id, Resource::Pod, Some("bc-p1"), &pod, &pre, now).unwrap();
    let orphaned = review(c.as_ref(), &fresh, AUDIENCE).await;
    assert!(!orphaned.authenticated, "{orphaned:?}");
    assert!(orphaned.error.as_deref().unwrap().contains("invalidated"), "{orphaned:?}");
    // No token is minted for a pod that is gone.
    assert!(tokens::mint(state, &env.id, "bc-p1", &pod, &[AUDIENCE.into()], 3600).is_err());
}
