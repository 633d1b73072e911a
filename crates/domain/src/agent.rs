//! The bcd agent contract of SPEC §9, shared by everything on either side of it: the
//! substrate reconciler (which writes the join Secret and maps it into the DaemonSet),
//! the API (which serves `agents/join` and `agents/heartbeat`), the real `bcd` binary and
//! the simulator's bcd.
//!
//! Invariant: one definition of every name and shape on this wire — env var names,
//! Secret keys, paths, request and answer bodies — and no `Debug` of these types prints
//! the join token or the node credential.

use std::fmt;

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
/// The join method's path, below the server URL.
pub const JOIN_PATH: &str = "/api/compute/agents/join";
/// The heartbeat method's path, below the server URL.
pub const HEARTBEAT_PATH: &str = "/api/compute/agents/heartbeat";

/// The env a bcd container gets from the join Secret: `(env var, Secret key)`, in the
/// order the DaemonSet lists them.
pub const SECRET_ENV: [(&str, &str); 2] =
    [(ENV_SERVER_URL, SECRET_KEY_SERVER_URL), (ENV_JOIN_TOKEN, SECRET_KEY_JOIN_TOKEN)];

/// `POST agents/join` body.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JoinRequest {
    /// The substrate's join token, from the Secret.
    #[serde(serialize_with = "SecretString::serialize_exposed")]
    pub join_token: SecretString,
    /// The node's Kubernetes name.
    pub node_name: String,
    /// The node's `spec.providerID` (e.g. `digitalocean://<droplet id>`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_node_id: Option<String>,
    /// The agent's version.
    pub bcd_version: String,
}

impl fmt::Debug for JoinRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinRequest")
            .field("join_token", &self.join_token)
            .field("node_name", &self.node_name)
            .field("provider_node_id", &self.provider_node_id)
            .field("bcd_version", &self.bcd_version)
            .finish()
    }
}

/// `agents/join` answer.
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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatRequest {}

/// `agents/heartbeat` answer (SPEC §9 leaves it open): the interval the server wants
/// next, so an operator can change it without restarting agents.
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
    fn join_request_is_the_spec_body_and_debug_hides_the_token() {
        let r = JoinRequest {
            join_token: SecretString::new("bcj_secret"),
            node_name: "n1".into(),
            provider_node_id: None,
            bcd_version: "1.0".into(),
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v, json!({"joinToken": "bcj_secret", "nodeName": "n1", "bcdVersion": "1.0"}));
        assert_eq!(serde_json::from_value::<JoinRequest>(v).unwrap(), r);
        assert!(!format!("{r:?}").contains("bcj_secret"));
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
