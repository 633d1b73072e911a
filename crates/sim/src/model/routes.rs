//! Route templates of the DigitalOcean face, shared by the HTTP router, the request
//! counters and fault injection.
//!
//! Invariant: a counter or fault key is always `"<METHOD> <template>"` built from these
//! constants, so the HTTP face (which registers exactly these paths) counts and fails an
//! operation under the key a test names.

/// `/v2/kubernetes/clusters`.
pub const CLUSTERS: &str = "/v2/kubernetes/clusters";
/// One cluster.
pub const CLUSTER: &str = "/v2/kubernetes/clusters/{cluster_id}";
/// Associated resources.
pub const ASSOCIATED: &str =
    "/v2/kubernetes/clusters/{cluster_id}/destroy_with_associated_resources";
/// Delete with the listed associated resources.
pub const ASSOCIATED_SELECTIVE: &str =
    "/v2/kubernetes/clusters/{cluster_id}/destroy_with_associated_resources/selective";
/// Delete with every associated resource.
pub const ASSOCIATED_DANGEROUS: &str =
    "/v2/kubernetes/clusters/{cluster_id}/destroy_with_associated_resources/dangerous";
/// Kubeconfig.
pub const KUBECONFIG: &str = "/v2/kubernetes/clusters/{cluster_id}/kubeconfig";
/// Credentials.
pub const CREDENTIALS: &str = "/v2/kubernetes/clusters/{cluster_id}/credentials";
/// Available upgrades.
pub const UPGRADES: &str = "/v2/kubernetes/clusters/{cluster_id}/upgrades";
/// Start an upgrade.
pub const UPGRADE: &str = "/v2/kubernetes/clusters/{cluster_id}/upgrade";
/// Node pools of a cluster.
pub const NODE_POOLS: &str = "/v2/kubernetes/clusters/{cluster_id}/node_pools";
/// One node pool.
pub const NODE_POOL: &str = "/v2/kubernetes/clusters/{cluster_id}/node_pools/{node_pool_id}";
/// One node.
pub const NODE: &str =
    "/v2/kubernetes/clusters/{cluster_id}/node_pools/{node_pool_id}/nodes/{node_id}";
/// Recycle (replace) nodes of a pool (deprecated, still served).
pub const NODE_POOL_RECYCLE: &str =
    "/v2/kubernetes/clusters/{cluster_id}/node_pools/{node_pool_id}/recycle";
/// Options.
pub const OPTIONS: &str = "/v2/kubernetes/options";
/// Load balancers.
pub const LOAD_BALANCERS: &str = "/v2/load_balancers";
/// One load balancer.
pub const LOAD_BALANCER: &str = "/v2/load_balancers/{lb_id}";
/// Droplets of a load balancer.
pub const LOAD_BALANCER_DROPLETS: &str = "/v2/load_balancers/{lb_id}/droplets";
/// Forwarding rules of a load balancer.
pub const LOAD_BALANCER_RULES: &str = "/v2/load_balancers/{lb_id}/forwarding_rules";
/// Purge a GLOBAL load balancer's CDN cache.
pub const LOAD_BALANCER_CACHE: &str = "/v2/load_balancers/{lb_id}/cache";
/// The cluster's user.
pub const CLUSTER_USER: &str = "/v2/kubernetes/clusters/{cluster_id}/user";
/// The cluster's status messages.
pub const STATUS_MESSAGES: &str = "/v2/kubernetes/clusters/{cluster_id}/status_messages";
/// The account (a cheap authenticated read clients use to check a token).
pub const ACCOUNT: &str = "/v2/account";
/// Every `(method, template)` the HTTP face serves (the router registers exactly these):
/// what the DigitalOcean response-schema extract covers and its test exercises.
pub const SERVED: &[(&str, &str)] = &[
    ("GET", CLUSTERS),
    ("POST", CLUSTERS),
    ("GET", CLUSTER),
    ("PUT", CLUSTER),
    ("DELETE", CLUSTER),
    ("GET", ASSOCIATED),
    ("DELETE", ASSOCIATED_SELECTIVE),
    ("DELETE", ASSOCIATED_DANGEROUS),
    ("GET", KUBECONFIG),
    ("GET", CREDENTIALS),
    ("GET", UPGRADES),
    ("POST", UPGRADE),
    ("GET", NODE_POOLS),
    ("POST", NODE_POOLS),
    ("GET", NODE_POOL),
    ("PUT", NODE_POOL),
    ("DELETE", NODE_POOL),
    ("DELETE", NODE),
    ("POST", NODE_POOL_RECYCLE),
    ("GET", OPTIONS),
    ("GET", CLUSTER_USER),
    ("GET", STATUS_MESSAGES),
    ("GET", ACCOUNT),
    ("GET", LOAD_BALANCERS),
    ("POST", LOAD_BALANCERS),
    ("GET", LOAD_BALANCER),
    ("PUT", LOAD_BALANCER),
    ("DELETE", LOAD_BALANCER),
    ("DELETE", LOAD_BALANCER_CACHE),
    ("POST", LOAD_BALANCER_DROPLETS),
    ("DELETE", LOAD_BALANCER_DROPLETS),
    ("POST", LOAD_BALANCER_RULES),
    ("DELETE", LOAD_BALANCER_RULES),
];

/// The key for requests no route matched.
pub const UNMATCHED: &str = "(unmatched)";

/// The counter/fault key of `method` on `template`, e.g. `POST /v2/kubernetes/clusters`.
pub fn key(method: &str, template: &str) -> String {
    format!("{method} {template}")
}

/// `template` with its `{…}` segments replaced by `ids`, in order (a missing id leaves
/// the segment as it is): the path a request of that route has.
pub fn fill(template: &str, ids: &[&str]) -> String {
    let mut ids = ids.iter();
    template
        .split('/')
        .map(|seg| {
            let param = seg.starts_with('{') && seg.ends_with('}');
            match ids.clone().next().filter(|_| param) {
                Some(id) => {
                    ids.next();
                    (*id).to_owned()
                }
                None => seg.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The token scope a route needs (research §0/§4.4/§5.2): GET → `read`, POST →
/// `create`, PUT → `update`, DELETE → `delete`, except node-pool and node changes and
/// upgrades (`kubernetes:update`), the deprecated node recycle (`kubernetes:delete`),
/// kubeconfig/credentials (`kubernetes:access_cluster`) and a load balancer's
/// droplets/rules (`load_balancer:update`). `None` for routes
/// any valid token may call.
pub fn scope(route_key: &str) -> Option<&'static str> {
    let (method, template) = route_key.split_once(' ')?;
    let verb = |m: &str| match m {
        "GET" => Some("read"),
        "POST" => Some("create"),
        "PUT" | "PATCH" => Some("update"),
        "DELETE" => Some("delete"),
        _ => None,
    };
    let s = match template {
        KUBECONFIG | CREDENTIALS => "kubernetes:access_cluster",
        NODE_POOL_RECYCLE => "kubernetes:delete",
        NODE_POOLS | NODE_POOL | NODE | UPGRADE if method != "GET" => "kubernetes:update",
        LOAD_BALANCER_DROPLETS | LOAD_BALANCER_RULES => "load_balancer:update",
        t if t.starts_with("/v2/kubernetes/") => match verb(method)? {
            "read" => "kubernetes:read",
            "create" => "kubernetes:create",
            "update" => "kubernetes:update",
            _ => "kubernetes:delete",
        },
        t if t.starts_with("/v2/load_balancers") => match verb(method)? {
            "read" => "load_balancer:read",
            "create" => "load_balancer:create",
            "update" => "load_balancer:update",
            _ => "load_balancer:delete",
        },
        _ => return None,
    };
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_fill_in_order() {
        assert_eq!(fill(NODE, &["c", "p", "n"]), "/v2/kubernetes/clusters/c/node_pools/p/nodes/n");
        assert_eq!(fill(CLUSTERS, &[]), CLUSTERS);
        assert_eq!(fill(NODE_POOL, &["c"]), "/v2/kubernetes/clusters/c/node_pools/{node_pool_id}");
    }
}
