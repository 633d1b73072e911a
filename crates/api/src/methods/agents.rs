//! `agents.*` (SPEC §9): bcd joins its pool with the join token and heartbeats with the
//! node credential it got back.

use bc_domain::{NodeId, PoolId};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::bookings::NODE_NAME_PATTERN;
use super::not_served;
use super::provider_accounts::SecretInput;
use crate::access::Target;
use crate::registry::{Authorization, Kind, Method, MethodInfo, MethodInput, Resource};

pub(crate) static AGENTS: Resource = Resource {
    name: "agents",
    page: "agents",
    module: "kubernetes",
    description: "The node agent bcd runs on every Node of a pool substrate (its DaemonSet selects the pool's label) and calls these methods to join the pool and to say it is alive. It joins with the substrate's join token and heartbeats with the node credential the join returns. bcd reads the join token and the server's URL from `BCD_JOIN_TOKEN` and `BCD_SERVER_URL` (the join Secret's keys `joinToken` and `serverUrl`) and its node name from `NODE_NAME`, and retries with backoff while the server is unreachable.",
};

/// Input of `agents.join`. Its `joinToken` is the credential.
// TODO(issue 7): use bc-domain's join request/answer types when they land there.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentsJoinInput {
    /// The substrate's join token (from the join Secret).
    pub join_token: SecretInput,
    /// The Kubernetes node name (`spec.nodeName`).
    #[schemars(length(max = 253), regex(pattern = NODE_NAME_PATTERN))]
    pub node_name: String,
    /// The provider's id of the node, if bcd knows it.
    #[serde(default)]
    #[schemars(length(max = 256))]
    pub provider_node_id: Option<String>,
    /// bcd's version.
    #[schemars(length(max = 64), regex(pattern = r"^[A-Za-z0-9._+-]+$"))]
    pub bcd_version: String,
}

impl MethodInput for AgentsJoinInput {
    fn target(&self) -> Target {
        Target::Agent
    }
    fn example() -> Value {
        json!({
            "joinToken": "the-join-token-from-the-secret",
            "nodeName": "pool-gpu-1",
            "providerNodeId": "3164444",
            "bcdVersion": "0.1.0"
        })
    }
}

/// Output of `agents.join`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentsJoinOutput {
    /// The node's id (kept when it joins again).
    pub node_id: NodeId,
    /// The pool it joined.
    pub pool_id: PoolId,
    /// The node's own credential for heartbeats, returned this once.
    pub node_credential: String,
    /// How often to heartbeat.
    pub heartbeat_seconds: u32,
}

/// Input of `agents.heartbeat`: nothing; the bearer credential says who.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentsHeartbeatInput {}

impl MethodInput for AgentsHeartbeatInput {
    fn target(&self) -> Target {
        Target::Agent
    }
    fn example() -> Value {
        json!({})
    }
}

/// Output of `agents.heartbeat`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentsHeartbeatOutput {
    /// How often to heartbeat.
    pub heartbeat_seconds: u32,
}

pub(crate) fn methods() -> Vec<Method> {
    vec![
        Method::declare::<AgentsJoinInput, AgentsJoinOutput>(
            MethodInfo {
                resource: &AGENTS,
                name: "join",
                kind: Kind::Write,
                authorization: Authorization::JoinToken,
                description: "Joins the node nodeName to the pool whose substrate holds joinToken, and returns nodeId, poolId, nodeCredential (the node's own credential for heartbeats, returned this once) and heartbeatSeconds. A bad, revoked or rotated join token is UNAUTHENTICATED; a node name the cluster does not list with the pool's label is FAILED_PRECONDITION. Joining again with the same node name keeps the node's nodeId and replaces its credential. Authenticated by the join token in the body, not by an API token.",
            },
            not_served,
        ),
        Method::declare::<AgentsHeartbeatInput, AgentsHeartbeatOutput>(
            MethodInfo {
                resource: &AGENTS,
                name: "heartbeat",
                kind: Kind::Write,
                authorization: Authorization::NodeCredential,
                description: "Records that the node whose credential is the bearer token is alive, and returns heartbeatSeconds, the interval to call again at. A missing, unknown or replaced credential is UNAUTHENTICATED. Authenticated by Authorization: Bearer <nodeCredential>.",
            },
            not_served,
        ),
    ]
}
