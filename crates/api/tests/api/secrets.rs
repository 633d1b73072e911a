//! No secret in any answer, log line or error (SPEC §5, §9, brief): every harness checks
//! its own answers and log lines when dropped (see `common`); this test drives every path
//! that handles a provider token, a join token or a node credential — accepted, refused,
//! misplaced, malformed — and checks the scan itself finds a planted leak.

use bc_api::methods::examples as ex;
use bc_sim::testing::TEST_TOKEN;
use serde_json::json;

use crate::common::{Capture, Harness, S};

bc_store::store_suite!(secrets_never_reach_an_answer_or_a_log_line);

async fn secrets_never_reach_an_answer_or_a_log_line(s: S) {
    let h = Harness::on(s).await;
    let t = h.operator().await;
    let refused = "dop_v1_refused_by_the_provider_0001";
    let spaced = "dop_v1_has a space";
    h.capture.secret(refused);
    h.capture.secret(spaced);
    let account = |name: &str, credentials: serde_json::Value| json!({ "tenantId": ex::TENANT, "provider": "digitalocean", "name": name, "credentials": credentials });
    // Accepted, refused by the provider, refused by its shape, sent where an object or
    // an enum was expected, and sent with an unknown field beside it.
    h.call("providerAccounts.create", Some(&t), &account("good", json!({ "token": TEST_TOKEN })))
        .await
        .ok();
    let bodies = [
        account("refused", json!({ "token": refused })),
        account("spaced", json!({ "token": spaced })),
        account("misplaced", json!(refused)),
        account("extra", json!({ "token": refused, "scope": refused })),
        json!({ "tenantId": ex::TENANT, "provider": refused, "name": "enum", "credentials": { "token": refused } }),
        json!({ "tenantId": ex::TENANT, "provider": "digitalocean", "name": refused, "credentials": { "token": refused } }),
    ];
    for body in bodies {
        let a = h.call("providerAccounts.create", Some(&t), &body).await;
        assert!(a.status.is_client_error(), "{}", a.text);
    }
    // A node credential issued by a join, used, replaced; join tokens good and bad.
    let node = h.node_credential().await;
    h.call("agents.heartbeat", Some(&node), &json!({})).await.ok();
    h.call("agents.heartbeat", Some(&format!("{node}x")), &json!({})).await;
    let join = json!({ "joinToken": "bcj_never_issued_token", "nodeName": "n1", "bcdVersion": "1",
            "serviceAccountToken": "sa" });
    h.capture.secret("bcj_never_issued_token");
    assert_eq!(h.call("agents.join", None, &join).await.status, 401);
    let misplaced = json!({ "joinToken": ["bcj_never_issued_token"], "nodeName": "n1", "bcdVersion": "1",
            "serviceAccountToken": "sa" });
    assert_eq!(h.call("agents.join", None, &misplaced).await.status, 400);
    // The capture saw the traffic (so an empty scan means something).
    assert!(h.capture.logs().contains("answered"), "the log lines were captured");
    assert_eq!(h.capture.leaks(), Vec::<(String, String)>::new());
    // And the scan finds a leak where there is one.
    let planted = Capture::default();
    planted.secret("dop_v1_planted");
    planted.log("token=dop_v1_planted");
    assert_eq!(planted.leaks().len(), 1);
}
