//! Issue 20, item 7: the kube adapter keeps secrets out of messages and runs nothing a
//! kubeconfig asks for. A cluster API (wiremock, plain http on loopback) that quotes in
//! its error the join token of the Secret being written (as a validation message may,
//! in plain text and as sent, base64) and the request's bearer token (as a proxy page
//! may) yields a message without them — the message that becomes a substrate's
//! `message` and its event; and a kubeconfig carrying `exec`, an `auth-provider` or a
//! file path is refused at connect, naming what it carries.

use bc_domain::model::SecretString;
use bc_domain::ports::{ClusterApi, ClusterError, KubeObject, ObjectKind};
use bc_providers::kube::KubeClusterApi;
use bc_sim::testing::{bounded, object_ref, owner};
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const BEARER: &str = "kube-bearer-token-0123456789abcdef";
const JOIN_TOKEN: &str = "bcj_join_token_0123456789abcdefghij";
/// `JOIN_TOKEN` in base64, as the Secret's `data` carries it.
const JOIN_TOKEN_B64: &str = "YmNqX2pvaW5fdG9rZW5fMDEyMzQ1Njc4OWFiY2RlZmdoaWo=";

/// A kubeconfig for `server` whose user is `user` (YAML of the `user:` mapping's body).
fn kubeconfig(server: &str, user: &str, cluster_extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n{cluster_extra}contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n{user}"
    )
}

fn status(code: u16, reason: &str, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(code).set_body_json(json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code
    }))
}

#[tokio::test]
async fn a_cluster_apis_error_is_scrubbed_of_the_join_token_and_the_credentials() {
    let server = MockServer::start().await;
    let secret_path = "/api/v1/namespaces/bc-p1/secrets";
    Mock::given(method("GET"))
        .and(path(format!("{secret_path}/bcd-join")))
        .respond_with(status(404, "NotFound", "secrets \"bcd-join\" not found"))
        .mount(&server)
        .await;
    let quoted = format!(
        "Secret \"bcd-join\" is invalid: data[joinToken]: Invalid value: \"{JOIN_TOKEN_B64}\" ({JOIN_TOKEN}); sent with Authorization: Bearer {BEARER}"
    );
    Mock::given(method("POST"))
        .and(path(secret_path))
        .respond_with(status(422, "Invalid", &quoted))
        .mount(&server)
        .await;
    let kc = kubeconfig(&server.uri(), &format!("    token: {BEARER}\n"), "");
    let client =
        bounded(KubeClusterApi::new().connect(&SecretString::new(kc))).await.expect("connects");
    let secret = KubeObject {
        object: object_ref(ObjectKind::Secret, Some("bc-p1"), "bcd-join"),
        manifest: json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "bcd-join", "namespace": "bc-p1"},
            "type": "Opaque", "data": {"joinToken": JOIN_TOKEN_B64}}),
    };
    let err = bounded(client.apply_owned(&secret, &owner("p1"))).await.unwrap_err();
    let ClusterError::Refused(message) = &err else { panic!("{err:?}") };
    for leaked in [JOIN_TOKEN, JOIN_TOKEN_B64, BEARER] {
        assert!(!message.contains(leaked), "{leaked} in {message}");
    }
    assert!(message.contains("[redacted]") && message.contains("is invalid"), "{message}");
}

#[tokio::test]
async fn kubeconfigs_that_run_programs_or_read_files_are_refused() {
    let server = "https://127.0.0.1:9";
    let exec = "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      args: [\"-c\", \"touch /tmp/pwned\"]\n";
    let auth_provider =
        "    auth-provider:\n      name: oidc\n      config:\n        id-token: x\n";
    let cases = [
        ("exec", kubeconfig(server, exec, "")),
        ("auth-provider", kubeconfig(server, auth_provider, "")),
        ("tokenFile", kubeconfig(server, "    tokenFile: /etc/shadow\n", "")),
        (
            "client-certificate",
            kubeconfig(
                server,
                "    client-certificate: /etc/c.pem\n    client-key-data: eA==\n",
                "",
            ),
        ),
        (
            "client-key",
            kubeconfig(
                server,
                "    client-certificate-data: eA==\n    client-key: /etc/k.pem\n",
                "",
            ),
        ),
        (
            "certificate-authority",
            kubeconfig(server, "    token: t\n", "    certificate-authority: /etc/ca.pem\n"),
        ),
    ];
    let mut wrong = Vec::new();
    for (field, kc) in cases {
        match bounded(KubeClusterApi::new().connect(&SecretString::new(kc))).await {
            Err(ClusterError::Credentials(message)) if message.contains(field) => {}
            Err(e) => wrong.push(format!("{field}: refused without naming it: {e}")),
            Ok(_) => wrong.push(format!("{field}: connected")),
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    let inline = kubeconfig(server, &format!("    token: {BEARER}\n"), "");
    let connected = bounded(KubeClusterApi::new().connect(&SecretString::new(inline))).await;
    assert!(connected.is_ok(), "an inline token is used");
}
