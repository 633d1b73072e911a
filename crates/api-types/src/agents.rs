//! `agents.*` (SPEC §9): bcd joins its pool and heartbeats: the resource and its
//! endpoints; the wire types are bc-domain's ([`bc_domain::agent`]), shared with bcd. Invariant: optional input fields are left out when unset
//! and output fields are read back as the server writes them, so a type here round-trips
//! through the wire; what a method does is bc-api's.

use bc_domain::agent::{HeartbeatRequest, HeartbeatResponse, JoinRequest, JoinResponse};

use crate::endpoint::{Input, endpoint};
use crate::meta::{Authorization, Kind, MethodInfo, Resource};

/// The resource.
pub static AGENTS: Resource = Resource {
    name: "agents",
    page: "agents",
    module: "kubernetes",
    description: "The node agent bcd runs on every Node of a pool substrate (its DaemonSet selects the pool's label) and calls these methods to join the pool and to say it is alive. It joins with the substrate's join token and its pod's projected ServiceAccount token (audience: the server's public URL), which proves which node it runs on, and heartbeats with the node credential the join returns. bcd reads the join token and the server's URL from `BCD_JOIN_TOKEN` and `BCD_SERVER_URL` (the join Secret's keys `joinToken` and `serverUrl`) and its node name from `NODE_NAME`, and retries with backoff while the server is unreachable. It refuses a plain `http://` server URL unless `BCD_INSECURE_HTTP=1` (the join token would travel in clear), which the DaemonSet sets, from the Secret's `insecureHttp` key, only when the server's `--public-url` is itself `http://`; `bc-api serve` warns at start when that URL is `http://` and not loopback.",
};

impl Input for JoinRequest {}
impl Input for HeartbeatRequest {}

endpoint!(
    /// `agents.join`.
    Join = MethodInfo {
        resource: &AGENTS,
        name: "join",
        kind: Kind::Write,
        authorization: Authorization::JoinToken,
        description: "Joins the node nodeName to the pool whose substrate holds joinToken, and returns nodeId, poolId, nodeCredential (the node's own credential for heartbeats, returned this once) and heartbeatSeconds. A bad, revoked or rotated join token is UNAUTHENTICATED; a node name the cluster does not list with the pool's label is FAILED_PRECONDITION; serviceAccountToken is reviewed with the cluster's TokenReview API: a token that is expired, for another audience, or not of the substrate's bcd ServiceAccount is UNAUTHENTICATED, and one bound to another node than nodeName is PERMISSION_DENIED; and so is any join once the pool's substrate is being torn down (the pool archived, or its policy without a substrate). Joining again with the same node name keeps the node's nodeId and replaces its credential. Joins are rate-limited per join token and per client address: RESOURCE_EXHAUSTED with Retry-After. The cluster's Nodes are read at most once per 5 seconds per substrate, so a Node added since may be refused once and join on bcd's next attempt. Authenticated by the join token in the body, not by an API token.",
    };
    JoinRequest => JoinResponse
);

endpoint!(
    /// `agents.heartbeat`.
    Heartbeat = MethodInfo {
        resource: &AGENTS,
        name: "heartbeat",
        kind: Kind::Write,
        authorization: Authorization::NodeCredential,
        description: "Records that the node whose credential is the bearer token is alive, and returns heartbeatSeconds, the interval to call again at. A missing, unknown or replaced credential is UNAUTHENTICATED, and so is every credential of a pool whose substrate is being torn down: node credentials end with their substrate. Authenticated by Authorization: Bearer <nodeCredential>.",
    };
    HeartbeatRequest => HeartbeatResponse
);
