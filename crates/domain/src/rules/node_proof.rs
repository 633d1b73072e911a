//! Which node a joining bcd proves it runs on (SPEC §9): the cluster's TokenReview of the
//! pod's projected ServiceAccount token names the pod's ServiceAccount and the node the
//! token is bound to; the join is for that node only, and only from the substrate's own
//! `bcd` ServiceAccount.
//!
//! Invariant: a node is proven only by a review that authenticated the token for the
//! server's audience, of the substrate's namespace and ServiceAccount, bound to a node
//! (`authentication.kubernetes.io/node-name`) equal to the name claimed; no refusal
//! message carries the token.

use std::fmt;

use crate::ports::TokenReview;

/// `user.extra` key of the node a bound token's pod runs on (Kubernetes'
/// `serviceaccount.NodeNameKey`).
pub const EXTRA_NODE_NAME: &str = "authentication.kubernetes.io/node-name";
/// `user.extra` key of the node's uid.
pub const EXTRA_NODE_UID: &str = "authentication.kubernetes.io/node-uid";
/// `user.extra` key of the pod a bound token belongs to.
pub const EXTRA_POD_NAME: &str = "authentication.kubernetes.io/pod-name";
/// `user.extra` key of the pod's uid.
pub const EXTRA_POD_UID: &str = "authentication.kubernetes.io/pod-uid";
/// `user.extra` key of the token's id (`JTI=<jti>`).
pub const EXTRA_CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";
/// The prefix of a ServiceAccount's user name (`system:serviceaccount:<ns>:<name>`).
pub const SERVICE_ACCOUNT_USER_PREFIX: &str = "system:serviceaccount:";

/// A ServiceAccount's user name, as Kubernetes' `serviceaccount.MakeUsername` makes it.
pub fn service_account_username(namespace: &str, name: &str) -> String {
    format!("{SERVICE_ACCOUNT_USER_PREFIX}{namespace}:{name}")
}

/// The pod a reviewed token proves: the node it runs on and its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProvenPod {
    /// The pod's name.
    pub pod_name: String,
    /// The node it is bound to.
    pub node_name: String,
}

/// Why a reviewed token does not prove the node claimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeProofRefusal {
    /// The cluster did not authenticate the token (expired, of another audience, its
    /// pod gone, not a token of this cluster); the cluster's reason.
    NotAuthenticated(String),
    /// Authenticated, but not for the server's audience.
    OtherAudience {
        /// The audience the server asked for.
        wanted: String,
    },
    /// Not a token of the substrate's `bcd` ServiceAccount.
    OtherServiceAccount {
        /// Whose it is (`user.username`).
        username: String,
        /// Whose it must be.
        wanted: String,
    },
    /// The token is bound to no node (not a pod's projected token).
    Unbound,
    /// Bound to another node than the one claimed.
    OtherNode {
        /// The node the token is bound to.
        bound: String,
        /// The `nodeName` claimed.
        claimed: String,
    },
}

impl fmt::Display for NodeProofRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotAuthenticated(why) if why.is_empty() => {
                f.write_str("the cluster did not authenticate serviceAccountToken")
            }
            Self::NotAuthenticated(why) => {
                write!(f, "the cluster did not authenticate serviceAccountToken: {why}")
            }
            Self::OtherAudience { wanted } => write!(
                f,
                "serviceAccountToken is not for the audience {wanted}: the DaemonSet's projected token must name the server's public URL"
            ),
            Self::OtherServiceAccount { username, wanted } => write!(
                f,
                "serviceAccountToken is {username}'s, not {wanted}'s: only the substrate's bcd pods join"
            ),
            Self::Unbound => f.write_str(
                "serviceAccountToken is bound to no node: send the pod's projected ServiceAccount token",
            ),
            Self::OtherNode { bound, claimed } => write!(
                f,
                "serviceAccountToken belongs to a pod on node {bound}, not on node {claimed}: a node joins only as itself"
            ),
        }
    }
}

/// The one value of `key` in a review's `user.extra`.
fn extra<'a>(review: &'a TokenReview, key: &str) -> Option<&'a str> {
    match review.extra.get(key).map(Vec::as_slice) {
        Some([one]) if !one.is_empty() => Some(one.as_str()),
        _ => None,
    }
}

/// Whether `review` proves a pod of `namespace`/`service_account` on `claimed_node`,
/// for `audience` (the server's public URL).
pub fn proven_node(
    review: &TokenReview,
    audience: &str,
    namespace: &str,
    service_account: &str,
    claimed_node: &str,
) -> Result<ProvenPod, NodeProofRefusal> {
    if !review.authenticated {
        return Err(NodeProofRefusal::NotAuthenticated(review.error.clone().unwrap_or_default()));
    }
    if !review.audiences.iter().any(|a| a == audience) {
        return Err(NodeProofRefusal::OtherAudience { wanted: audience.to_owned() });
    }
    let wanted = service_account_username(namespace, service_account);
    if review.username != wanted {
        return Err(NodeProofRefusal::OtherServiceAccount {
            username: review.username.clone(),
            wanted,
        });
    }
    let (Some(node), Some(pod)) = (extra(review, EXTRA_NODE_NAME), extra(review, EXTRA_POD_NAME))
    else {
        return Err(NodeProofRefusal::Unbound);
    };
    if node != claimed_node {
        return Err(NodeProofRefusal::OtherNode {
            bound: node.to_owned(),
            claimed: claimed_node.to_owned(),
        });
    }
    Ok(ProvenPod { pod_name: pod.to_owned(), node_name: node.to_owned() })
}

#[cfg(test)]
mod tests {
    use super::*;

    const AUD: &str = "https://bc.example";

    fn review(user: &str, node: Option<&str>) -> TokenReview {
        let mut r = TokenReview {
            authenticated: true,
            username: user.into(),
            uid: "sa-uid".into(),
            groups: vec!["system:serviceaccounts".into(), "system:authenticated".into()],
            audiences: vec![AUD.into()],
            ..TokenReview::default()
        };
        r.extra.insert(EXTRA_POD_NAME.into(), vec!["bcd-x1".into()]);
        if let Some(n) = node {
            r.extra.insert(EXTRA_NODE_NAME.into(), vec![n.into()]);
        }
        r
    }

    fn ours(node: Option<&str>) -> TokenReview {
        review(&service_account_username("bc-p1", "bcd"), node)
    }

    #[test]
    fn a_bound_token_of_the_substrates_bcd_proves_its_own_node_only() {
        let proven = proven_node(&ours(Some("n1")), AUD, "bc-p1", "bcd", "n1").unwrap();
        assert_eq!(proven, ProvenPod { pod_name: "bcd-x1".into(), node_name: "n1".into() });
        let other = proven_node(&ours(Some("n1")), AUD, "bc-p1", "bcd", "n2").unwrap_err();
        assert_eq!(other, NodeProofRefusal::OtherNode { bound: "n1".into(), claimed: "n2".into() });
        assert!(other.to_string().contains("node n1, not on node n2"), "{other}");
        assert_eq!(
            proven_node(&ours(None), AUD, "bc-p1", "bcd", "n1"),
            Err(NodeProofRefusal::Unbound)
        );
    }

    #[test]
    fn another_service_account_audience_or_an_unauthenticated_token_is_refused() {
        let theirs = review("system:serviceaccount:bc-p2:bcd", Some("n1"));
        assert!(matches!(
            proven_node(&theirs, AUD, "bc-p1", "bcd", "n1"),
            Err(NodeProofRefusal::OtherServiceAccount { .. })
        ));
        let default_sa = review("system:serviceaccount:bc-p1:default", Some("n1"));
        assert!(proven_node(&default_sa, AUD, "bc-p1", "bcd", "n1").is_err());
        let mut other_aud = ours(Some("n1"));
        other_aud.audiences = vec!["https://kubernetes.default.svc".into()];
        assert_eq!(
            proven_node(&other_aud, AUD, "bc-p1", "bcd", "n1"),
            Err(NodeProofRefusal::OtherAudience { wanted: AUD.into() })
        );
        let refused = TokenReview {
            error: Some("service account token has expired".into()),
            ..TokenReview::default()
        };
        let e = proven_node(&refused, AUD, "bc-p1", "bcd", "n1").unwrap_err();
        assert!(e.to_string().ends_with("service account token has expired"), "{e}");
        // Two node names in extra are not one bound node.
        let mut two = ours(Some("n1"));
        two.extra.insert(EXTRA_NODE_NAME.into(), vec!["n1".into(), "n2".into()]);
        assert_eq!(proven_node(&two, AUD, "bc-p1", "bcd", "n1"), Err(NodeProofRefusal::Unbound));
    }
}
