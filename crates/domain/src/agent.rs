//! The bcd agent contract of SPEC §9, shared by everything on either side of it: the
//! substrate reconciler (which writes the join Secret and maps it into the DaemonSet),
//! the API (which serves `agents/join` and `agents/heartbeat`), the real `bcd` binary and
//! the simulator's bcd.
//!
//! Invariant: one definition of every name and shape on this wire — env var names,
//! Secret keys, paths, request and answer bodies — and no `Debug` of these types prints
//! the join token or the node credential.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use crate::id::{NodeId, PoolId};
use crate::model::SecretString;

/// Env var holding the server's public URL (mapped from [`SECRET_KEY_SERVER_URL`]).
pub const ENV_SERVER_URL: &str = "BCD_SERVER_URL";
/// Env var holding the join token (mapped from [`SECRET_KEY_JOIN_TOKEN`]).
pub const ENV_JOIN_TOKEN: &str = "BCD_JOIN_TOKEN";
/// Env var holding the node's name (the pod's `spec.nodeName`, by the downward API).
pub const ENV_NODE_NAME: &str = "NODE_NAME";
/// Key of the join Secret (`bcd-join`) holding the join token.
pub const SECRET_KEY_JOIN_TOKEN: &str = "joinToken";
/// Key of the join Secret holding the server's public URL.
pub const SECRET_KEY_SERVER_URL: &str = "serverUrl";
/// Env var that lets bcd call a plain `http://` server URL when `1` (SPEC §9: the join
/// token would travel in clear, so only for dev and tests).
pub const ENV_INSECURE_HTTP: &str = "BCD_INSECURE_HTTP";
/// Key of the join Secret holding `1` when the server's public URL is `http://` (and
/// absent otherwise): the DaemonSet maps it, optionally, to [`ENV_INSECURE_HTTP`].
pub const SECRET_KEY_INSECURE_HTTP: &str = "insecureHttp";
/// Env var naming the file that holds the pod's projected ServiceAccount token (SPEC §9:
/// what proves which node bcd runs on); [`SERVICE_ACCOUNT_TOKEN_FILE`] when unset.
pub const ENV_SERVICE_ACCOUNT_TOKEN_FILE: &str = "BCD_SERVICE_ACCOUNT_TOKEN_FILE";
/// Where the DaemonSet mounts the projected token's volume.
pub const SERVICE_ACCOUNT_TOKEN_DIR: &str = "/var/run/secrets/better-compute";
/// The token's file in that volume (the projection's `path`).
pub const SERVICE_ACCOUNT_TOKEN_PATH: &str = "token";
/// The token file bcd reads: [`SERVICE_ACCOUNT_TOKEN_DIR`]/[`SERVICE_ACCOUNT_TOKEN_PATH`].
pub const SERVICE_ACCOUNT_TOKEN_FILE: &str = "/var/run/secrets/better-compute/token";
/// How long a projected token lives (`expirationSeconds`; the kubelet renews it at 80%).
pub const SERVICE_ACCOUNT_TOKEN_SECONDS: i64 = 3600;

/// Whether `url` is a plain `http://` URL (its scheme, in any case).
pub fn is_plain_http(url: &str) -> bool {
    url.trim_start().get(..7).is_some_and(|s| s.eq_ignore_ascii_case("http://"))
}
/// The join method's path, below the server URL.
pub const JOIN_PATH: &str = "/api/compute/agents/join";
/// The heartbeat method's path, below the server URL.
pub const HEARTBEAT_PATH: &str = "/api/compute/agents/heartbeat";

/// The env a bcd container gets from the join Secret: `(env var, Secret key)`, in the
/// order the DaemonSet lists them.
pub const SECRET_ENV: [(&str, &str); 2] =
    [(ENV_SERVER_URL, SECRET_KEY_SERVER_URL), (ENV_JOIN_TOKEN, SECRET_KEY_JOIN_TOKEN)];

/// Most characters of a Kubernetes node name (a DNS subdomain).
pub const NODE_NAME_MAX: usize = 253;
/// The rule of Kubernetes node names (a DNS subdomain: dot-separated DNS labels).
pub const NODE_NAME_PATTERN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// Most characters of a join token or a node credential the server reads.
pub const AGENT_SECRET_MAX: usize = 256;
/// Most characters of a provider node id.
pub const PROVIDER_NODE_ID_MAX: usize = 256;
/// Most characters of a bcd version.
pub const BCD_VERSION_MAX: usize = 64;
/// The rule of bcd versions (semver-like, build metadata allowed).
pub const BCD_VERSION_PATTERN: &str = r"^[A-Za-z0-9._+-]+$";
/// The prefix of node credentials.
pub const NODE_CREDENTIAL_PREFIX: &str = "bcn_";

/// A new node credential from 256 random bits the caller draws from the operating system
/// (the domain has no RNG): `bcn_` and 43 base64url characters. Only its
/// [`crate::token::sha256_hex`] is stored; the plaintext goes to the node once.
pub fn new_node_credential(random: [u8; 32]) -> SecretString {
    SecretString::new(format!("{NODE_CREDENTIAL_PREFIX}{}", URL_SAFE_NO_PAD.encode(random)))
}

/// `POST agents/join` body.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JoinRequest {
    /// The substrate's join token, from the Secret.
    #[serde(serialize_with = "SecretString::serialize_exposed")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = AGENT_SECRET_MAX), extend("writeOnly" = true))
    )]
    pub join_token: SecretString,
    /// The node's Kubernetes name (`spec.nodeName`).
    #[cfg_attr(
        feature = "schema",
        schemars(length(max = NODE_NAME_MAX), regex(pattern = NODE_NAME_PATTERN))
    )]
    pub node_name: String,
    /// The node's `spec.providerID` (e.g. `digitalocean://<droplet id>`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = PROVIDER_NODE_ID_MAX)))]
    pub provider_node_id: Option<String>,
    /// The agent's version.
    #[cfg_attr(
        feature = "schema",
        schemars(length(max = BCD_VERSION_MAX), regex(pattern = BCD_VERSION_PATTERN))
    )]
    pub bcd_version: String,
    /// The pod's projected ServiceAccount token (audience: the server's public URL),
    /// which the server reviews with the cluster's TokenReview API: its bound node must
    /// be `nodeName` (SPEC §9).
    #[serde(serialize_with = "SecretString::serialize_exposed")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = SERVICE_ACCOUNT_TOKEN_MAX), extend("writeOnly" = true))
    )]
    pub service_account_token: SecretString,
}

/// Most characters of a projected ServiceAccount token the server reads (a JWT of a few
/// claims is well under 2 KiB).
pub const SERVICE_ACCOUNT_TOKEN_MAX: usize = 8192;

impl fmt::Debug for JoinRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinRequest")
            .field("join_token", &self.join_token)
            .field("service_account_token", &self.service_account_token)
            .field("node_name", &self.node_name)
            .field("provider_node_id", &self.provider_node_id)
            .field("bcd_version", &self.bcd_version)
            .finish()
    }
}

/// `agents/join` answer.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JoinResponse {
    /// The node's id (the same on every join of the same node name).
    pub node_id: NodeId,
    /// The pool it joined.
    pub pool_id: PoolId,
    /// The bearer credential for `agents/heartbeat` (replaced on each join).
    #[serde(serialize_with = "SecretString::serialize_exposed")]
    pub node_credential: SecretString,
    /// How often to heartbeat.
    pub heartbeat_seconds: u32,
}

impl fmt::Debug for JoinResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinResponse")
            .field("node_id", &self.node_id)
            .field("pool_id", &self.pool_id)
            .field("node_credential", &self.node_credential)
            .field("heartbeat_seconds", &self.heartbeat_seconds)
            .finish()
    }
}

/// `POST agents/heartbeat` body: empty (SPEC §9); the node is named by the
/// `Authorization: Bearer <nodeCredential>` header.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatRequest {}

/// `agents/heartbeat` answer (SPEC §9 leaves it open): the interval the server wants
/// next, so an operator can change it without restarting agents.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeartbeatResponse {
    /// How often to heartbeat from now on.
    pub heartbeat_seconds: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_http_is_told_by_its_scheme() {
        for url in ["http://10.0.0.1:8080", "HTTP://api.example", " http://x"] {
            assert!(is_plain_http(url), "{url}");
        }
        for url in ["https://api.example", "http:/x", "httpx://y", "", "ftp://z"] {
            assert!(!is_plain_http(url), "{url}");
        }
    }

    #[test]
    fn node_credentials_are_256_bits_with_their_prefix() {
        let c = new_node_credential([0xfb; 32]);
        assert_eq!(c.expose().len(), NODE_CREDENTIAL_PREFIX.len() + 43);
        assert!(c.expose().starts_with(NODE_CREDENTIAL_PREFIX));
        assert_ne!(new_node_credential([1; 32]), new_node_credential([2; 32]));
        assert!(c.expose().len() <= AGENT_SECRET_MAX);
    }

    #[test]
    fn join_request_is_the_spec_body_and_debug_hides_the_token() {
        let r = JoinRequest {
            join_token: SecretString::new("bcj_secret"),
            node_name: "n1".into(),
            provider_node_id: None,
            bcd_version: "1.0".into(),
            service_account_token: SecretString::new("eyJ.sa.jwt"),
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v,
            json!({"joinToken": "bcj_secret", "nodeName": "n1", "bcdVersion": "1.0",
                "serviceAccountToken": "eyJ.sa.jwt"})
        );
        assert_eq!(serde_json::from_value::<JoinRequest>(v).unwrap(), r);
        let shown = format!("{r:?}");
        assert!(!shown.contains("bcj_secret") && !shown.contains("eyJ.sa.jwt"), "{shown}");
        let extra = json!({"joinToken": "t", "nodeName": "n", "bcdVersion": "v", "x": 1});
        assert!(serde_json::from_value::<JoinRequest>(extra).is_err());
    }

    #[test]
    fn join_response_round_trips_and_debug_hides_the_credential() {
        let v = json!({"nodeId": "node_01hq3k5v9x8y7z6w5v4t3s2r1q", "poolId": "pool_01hq3k5v9x8y7z6w5v4t3s2r1q",
            "nodeCredential": "cred-secret", "heartbeatSeconds": 30});
        let r: JoinResponse = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(serde_json::to_value(&r).unwrap(), v);
        assert!(!format!("{r:?}").contains("cred-secret"));
        let bad = json!({"nodeId": "n1", "poolId": "pool_01hq3k5v9x8y7z6w5v4t3s2r1q",
            "nodeCredential": "c", "heartbeatSeconds": 30});
        assert!(serde_json::from_value::<JoinResponse>(bad).is_err(), "ids are checked");
        assert_eq!(serde_json::to_value(HeartbeatRequest {}).unwrap(), json!({}));
    }
}
