//! The load balancer rules of SPEC §11 that span fields: what a regional and a global load
//! balancer each take, exactly one kind of targets, protocol pairs.
//!
//! Invariant: [`validate_load_balancer`] reports every violation of a whole spec, each
//! with its JSON path, so a create and an update (checked after the change is applied to
//! the stored spec) are held to one rule. Single-field limits (ports, item counts, sizes)
//! are the wire types' schema constraints and are not repeated here.

use crate::error::FieldViolation;
use crate::model::{LoadBalancerSpec, LoadBalancerType, MAX_FORWARDING_RULES, Protocol, Targets};
use crate::policy::SLUG_PATTERN;
use crate::rules::policy::slug_problem;

/// The target ports a global load balancer may use.
pub const GLOBAL_TARGET_PORTS: [u32; 2] = [80, 443];

/// Every cross-field violation of a load balancer spec, with paths under `prefix` (empty
/// for top-level fields).
pub fn validate_load_balancer(spec: &LoadBalancerSpec, prefix: &str) -> Vec<FieldViolation> {
    let at = |field: &str| {
        if prefix.is_empty() { field.to_owned() } else { format!("{prefix}.{field}") }
    };
    let mut out = Vec::new();
    let mut refuse =
        |field: &str, message: String| out.push(FieldViolation::new(at(field), message));
    match spec.kind {
        LoadBalancerType::Regional => {
            match &spec.region {
                None => {
                    refuse("region", "a regional load balancer needs a region, e.g. nyc1".into())
                }
                Some(r) if slug_problem(r).is_some() => refuse(
                    "region",
                    format!("must be a provider region slug matching {SLUG_PATTERN}"),
                ),
                Some(_) => {}
            }
            if spec.forwarding_rules.is_empty() {
                refuse(
                    "forwardingRules",
                    format!(
                        "a regional load balancer needs 1 to {MAX_FORWARDING_RULES} forwarding rules"
                    ),
                );
            }
            for (i, rule) in spec.forwarding_rules.iter().enumerate() {
                let udp_in = rule.entry_protocol == Protocol::Udp;
                let udp_out = rule.target_protocol == Protocol::Udp;
                if udp_in != udp_out {
                    refuse(
                        &format!("forwardingRules[{i}].targetProtocol"),
                        "udp pairs with udp: entry and target protocol must both be udp or neither"
                            .into(),
                    );
                }
                if rule.target_protocol == Protocol::Http3 {
                    refuse(
                        &format!("forwardingRules[{i}].targetProtocol"),
                        "http3 is an entry protocol only; use http, https, http2, tcp or udp"
                            .into(),
                    );
                }
            }
            if spec.targets.load_balancer_ids.is_some() {
                refuse(
                    "targets.loadBalancerIds",
                    "only a global load balancer targets load balancers".into(),
                );
            }
            if spec.global_settings.is_some() {
                refuse("globalSettings", "only a global load balancer takes globalSettings".into());
            }
            if spec.domains.is_some() {
                refuse("domains", "only a global load balancer takes domains".into());
            }
        }
        LoadBalancerType::Global => {
            if spec.region.is_some() {
                refuse("region", "a global load balancer has no region".into());
            }
            if !spec.forwarding_rules.is_empty() {
                refuse(
                    "forwardingRules",
                    "a global load balancer has no forwarding rules; set globalSettings".into(),
                );
            }
            if spec.size_unit.is_some() {
                refuse("sizeUnit", "a global load balancer cannot be scaled".into());
            }
            match &spec.global_settings {
                None => {
                    refuse("globalSettings", "a global load balancer needs globalSettings".into())
                }
                Some(g) => {
                    if !matches!(
                        g.target_protocol,
                        Protocol::Http | Protocol::Https | Protocol::Http2
                    ) {
                        refuse(
                            "globalSettings.targetProtocol",
                            "must be http, https or http2".into(),
                        );
                    }
                    if !GLOBAL_TARGET_PORTS.contains(&g.target_port) {
                        refuse("globalSettings.targetPort", "must be 80 or 443".into());
                    }
                }
            }
            if spec.domains.as_ref().is_none_or(Vec::is_empty) {
                refuse("domains", "a global load balancer needs at least one domain".into());
            }
        }
    }
    let set = target_kinds(&spec.targets);
    if set != 1 {
        let kinds = match spec.kind {
            LoadBalancerType::Regional => "tag or dropletIds",
            LoadBalancerType::Global => "loadBalancerIds, tag or dropletIds",
        };
        refuse("targets", format!("set exactly one of {kinds}"));
    }
    if let Some(s) = &spec.sticky_sessions
        && s.kind == "none"
        && (s.cookie_name.is_some() || s.cookie_ttl_seconds.is_some())
    {
        refuse(
            "stickySessions",
            "cookieName and cookieTtlSeconds go with type cookies only".into(),
        );
    }
    out
}

/// How many kinds of targets are set.
fn target_kinds(t: &Targets) -> usize {
    usize::from(t.tag.is_some())
        + usize::from(t.droplet_ids.is_some())
        + usize::from(t.load_balancer_ids.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::StickySessions;

    /// A spec from its wire form (SPEC §11), so the fixture reads like a request.
    fn spec(json: serde_json::Value) -> LoadBalancerSpec {
        serde_json::from_value(json).expect("a well-typed spec")
    }

    fn regional() -> LoadBalancerSpec {
        spec(serde_json::json!({
            "type": "regional", "region": "nyc1", "sizeUnit": 1, "targets": { "tag": "web" },
            "forwardingRules": [
                { "entryProtocol": "http", "entryPort": 80, "targetProtocol": "http", "targetPort": 8080 }
            ]
        }))
    }

    fn global() -> LoadBalancerSpec {
        spec(serde_json::json!({
            "type": "global", "targets": { "tag": "web" },
            "globalSettings": { "targetProtocol": "http", "targetPort": 80 },
            "domains": [{ "name": "example.com", "isManaged": true }]
        }))
    }

    fn fields(spec: &LoadBalancerSpec) -> Vec<String> {
        validate_load_balancer(spec, "").into_iter().map(|v| v.field).collect()
    }

    #[test]
    fn valid_specs_pass() {
        assert!(fields(&regional()).is_empty());
        assert!(fields(&global()).is_empty());
    }

    #[test]
    fn regional_rules() {
        let mut s = regional();
        s.region = None;
        s.forwarding_rules[0].entry_protocol = Protocol::Udp;
        s.targets.droplet_ids = Some(vec![1]);
        s.domains = Some(vec![]);
        assert_eq!(
            fields(&s),
            ["region", "forwardingRules[0].targetProtocol", "domains", "targets"]
        );
        let mut s = regional();
        s.forwarding_rules.clear();
        s.sticky_sessions = Some(StickySessions {
            kind: "none".into(),
            cookie_name: Some("c".into()),
            cookie_ttl_seconds: None,
        });
        assert_eq!(fields(&s), ["forwardingRules", "stickySessions"]);
    }

    #[test]
    fn global_rules() {
        let mut s = global();
        s.region = Some("nyc1".into());
        s.size_unit = Some(2);
        s.global_settings.as_mut().unwrap().target_port = 8080;
        s.domains = None;
        s.targets = Targets::default_for_test();
        let got = validate_load_balancer(&s, "spec");
        let got: Vec<_> = got.iter().map(|v| v.field.as_str()).collect();
        assert_eq!(
            got,
            [
                "spec.region",
                "spec.sizeUnit",
                "spec.globalSettings.targetPort",
                "spec.domains",
                "spec.targets"
            ]
        );
    }

    impl Targets {
        fn default_for_test() -> Self {
            Targets { tag: None, droplet_ids: None, load_balancer_ids: None }
        }
    }
}
