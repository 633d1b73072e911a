//! Issue 12, security bullet 5 — the time of a token check does not depend on how much
//! of a token matches. Checked by structure, never by a stopwatch (the measured figure —
//! prefix-matching vs unrelated tokens — is the benchmark report's):
//! - a presented API token, node credential or join token is never compared with
//!   anything stored: it is hashed (SHA-256) and the hash looked up (an indexed
//!   equality in the store). A record whose stored "hash" is the plaintext itself opens
//!   nothing, and one holding the SHA-256 does;
//! - every `==` on a secret type of bc-domain (`SecretString`, `ApiTokenSecret`) is the
//!   constant-time `ct_eq` (no derived, byte-by-byte `PartialEq`), and the
//!   authentication code compares no strings at all.

use bc_api::auth::{agent_secret_lookup_hash, api_token_lookup_hash};
use bc_domain::model::{Role, Scope};
use bc_domain::ports::{Store as _, UnitOfWork, Write};
use bc_domain::token::sha256_hex;
use bc_store::testing as rows;
use serde_json::json;

use crate::common::{Harness, S, grant, new_token};

bc_store::store_suite!(a_presented_token_is_only_ever_looked_up_by_its_sha256);

async fn a_presented_token_is_only_ever_looked_up_by_its_sha256(s: S) {
    let h = Harness::on(s).await;
    let grants = vec![grant(Role::Operator, Scope::System)];
    let body = json!({ "tenantId": bc_api::methods::examples::TENANT });
    // Stored under its plaintext instead of its hash: a server comparing the presented
    // token with stored values would let it in.
    let (plain, mut record) = new_token(grants.clone());
    record.token_hash = plain.clone();
    h.store.commit(UnitOfWork::new().write(Write::InsertApiToken(record))).await.expect("token");
    assert_eq!(h.call("pools.list", Some(&plain), &body).await.status, 401);
    // Stored under its SHA-256, the one lookup key.
    let (plain, record) = new_token(grants);
    assert_eq!(record.token_hash, sha256_hex(plain.as_bytes()));
    assert_eq!(api_token_lookup_hash(&plain).as_deref(), Some(record.token_hash.as_str()));
    h.store.commit(UnitOfWork::new().write(Write::InsertApiToken(record))).await.expect("token");
    h.call("pools.list", Some(&plain), &body).await.ok();
    // The same for node credentials: stored as plaintext, refused; as SHA-256, let in.
    let credential = "nc_timing_probe_credential";
    h.capture.secret(credential);
    let mut node = rows::node(&crate::common::id(bc_api::methods::examples::POOL), "probe-1");
    node.credential_hash = credential.to_owned();
    h.store.commit(UnitOfWork::new().write(Write::PutNode(node.clone()))).await.expect("node");
    assert_eq!(h.call("agents.heartbeat", Some(credential), &json!({})).await.status, 401);
    node.credential_hash = sha256_hex(credential.as_bytes());
    assert_eq!(agent_secret_lookup_hash(credential), Some(node.credential_hash.clone()));
    h.store.commit(UnitOfWork::new().write(Write::PutNode(node))).await.expect("node");
    h.call("agents.heartbeat", Some(credential), &json!({})).await.ok();
}

/// The source of a file of the workspace.
fn source(path: &str) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn secret_types_compare_in_constant_time_and_authentication_compares_nothing() {
    for (file, ty) in [
        ("crates/domain/src/token.rs", "SecretString"),
        ("crates/domain/src/token.rs", "ApiTokenSecret"),
    ] {
        let src = source(file);
        let decl = format!("pub struct {ty}(");
        let at = src.find(&decl).unwrap_or_else(|| panic!("{ty} in {file}"));
        let derive = src[..at].rfind("#[derive(").expect("a derive");
        assert!(
            !src[derive..at].contains("PartialEq"),
            "{ty} derives PartialEq: a byte-by-byte comparison of a secret"
        );
        let imp = format!("impl PartialEq for {ty} {{");
        let body = &src[src.find(&imp).unwrap_or_else(|| panic!("{ty} has no PartialEq"))..];
        let body = &body[..body.find("\n}").expect("end of impl")];
        assert!(body.contains("ct_eq("), "{ty}'s == is not ct_eq: {body}");
    }
    // The authentication paths hash and look up; they compare no strings.
    for file in ["crates/api/src/auth.rs", "crates/api/src/methods/agents.rs"] {
        let src = source(file);
        let code = src.split("#[cfg(test)]").next().expect("code");
        let compares: Vec<&str> =
            code.lines().filter(|l| l.contains("==") || l.contains("!=")).collect();
        assert!(compares.is_empty(), "{file} compares values: {compares:?}");
        assert!(code.contains("lookup_hash"), "{file} authenticates by hash");
    }
}
