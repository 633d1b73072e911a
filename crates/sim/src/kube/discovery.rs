//! What every client reads first: `/version`, legacy discovery (`/api`, `/api/v1`,
//! `/apis`, `/apis/<group>`, `/apis/<group>/<version>`) and aggregated discovery
//! (`apidiscovery.k8s.io/v2` and `v2beta1`, chosen by the `Accept` header as kubectl 1.27+
//! asks for it), all generated from the one resource table.
//!
//! Invariant: discovery lists exactly the resources the routes serve, with the verbs they
//! serve.

use serde_json::{Value, json};

use super::resource::{ALL, Resource};

/// The aggregated-discovery media types, newest first.
pub const AGGREGATED: &[&str] = &["v2", "v2beta1"];

/// `/version` for a cluster at `git_version` (`v1.32.6`).
pub fn version(git_version: &str) -> Value {
    let v = git_version.trim_start_matches('v');
    let mut parts = v.split('.');
    let major = parts.next().unwrap_or("1");
    let minor = parts.next().unwrap_or("0");
    json!({
        "major": major,
        "minor": minor,
        "gitVersion": git_version,
        "gitCommit": format!("{:016x}{:016x}{:08x}", crate::fnv1a(git_version), crate::fnv1a(v), crate::fnv1a(major) as u32),
        "gitTreeState": "clean",
        "buildDate": "2025-06-17T18:38:12Z",
        "goVersion": "go1.23.10",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// The groups served, besides the core group: `(group, version)`.
pub fn groups() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for r in ALL {
        if !r.group().is_empty() && !out.contains(&(r.group(), r.version())) {
            out.push((r.group(), r.version()));
        }
    }
    out
}

/// `/api`.
pub fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "10.245.0.1:443"}],
    })
}

fn group_json(group: &str, version: &str) -> Value {
    let gv = json!({"groupVersion": format!("{group}/{version}"), "version": version});
    json!({"name": group, "versions": [gv.clone()], "preferredVersion": gv})
}

/// `/apis`.
pub fn group_list() -> Value {
    let groups: Vec<Value> = groups().into_iter().map(|(g, v)| group_json(g, v)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`, if served.
pub fn group(group: &str) -> Option<Value> {
    let (g, v) = groups().into_iter().find(|(g, _)| *g == group)?;
    let mut out = group_json(g, v);
    out["kind"] = json!("APIGroup");
    out["apiVersion"] = json!("v1");
    Some(out)
}

/// `/api/v1` or `/apis/<group>/<version>`, if served.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let resources: Vec<Value> = Resource::in_group(group)
        .filter(|r| r.version() == version)
        .map(|r| {
            let mut v = json!({
                "name": r.plural(),
                "singularName": r.singular(),
                "namespaced": r.namespaced(),
                "kind": r.kind(),
                "verbs": r.verbs(),
            });
            if !r.short_names().is_empty() {
                v["shortNames"] = json!(r.short_names());
            }
            if !r.categories().is_empty() {
                v["categories"] = json!(r.categories());
            }
            v
        })
        .collect();
    if resources.is_empty() {
        return None;
    }
    let group_version =
        if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
    )
}

fn discovery_version(group: &str, version: &str) -> Value {
    let resources: Vec<Value> = Resource::in_group(group)
        .filter(|r| r.version() == version)
        .map(|r| {
            let mut v = json!({
                "resource": r.plural(),
                "responseKind": {"group": group, "version": version, "kind": r.kind()},
                "scope": if r.namespaced() { "Namespaced" } else { "Cluster" },
                "singularResource": r.singular(),
                "verbs": r.verbs(),
            });
            if !r.short_names().is_empty() {
                v["shortNames"] = json!(r.short_names());
            }
            if !r.categories().is_empty() {
                v["categories"] = json!(r.categories());
            }
            v
        })
        .collect();
    json!({"version": version, "resources": resources, "freshness": "Current"})
}

/// Aggregated discovery of `/api` (`core`) or `/apis`, as `apidiscovery.k8s.io/<v>`.
pub fn aggregated(core: bool, discovery_version_name: &str) -> Value {
    let items: Vec<Value> = if core {
        vec![
            json!({"metadata": {"creationTimestamp": null}, "versions": [discovery_version("", "v1")]}),
        ]
    } else {
        groups()
            .into_iter()
            .map(|(g, v)| {
                json!({"metadata": {"name": g, "creationTimestamp": null},
                    "versions": [discovery_version(g, v)]})
            })
            .collect()
    };
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{discovery_version_name}"),
        "metadata": {},
        "items": items,
    })
}

/// The aggregated-discovery version an `Accept` header asks for, if any (the first one
/// listed that is served).
pub fn wants_aggregated(accept: &str) -> Option<&'static str> {
    for part in accept.split(',') {
        let params: Vec<&str> = part.split(';').map(str::trim).collect();
        if !params.contains(&"g=apidiscovery.k8s.io")
            || !params.contains(&"as=APIGroupDiscoveryList")
        {
            continue;
        }
        for v in AGGREGATED {
            if params.contains(&format!("v={v}").as_str()) {
                return Some(v);
            }
        }
    }
    None
}

/// The content type of an aggregated-discovery answer.
pub fn aggregated_content_type(v: &str) -> String {
    format!("application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_132_accept_header_picks_v2() {
        let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(wants_aggregated(accept), Some("v2"));
        assert_eq!(wants_aggregated("application/json, */*"), None);
        let apis = aggregated(false, "v2");
        assert_eq!(apis["items"][0]["metadata"]["name"], "apps");
        let core = aggregated(true, "v2");
        let pods = core["items"][0]["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "pods")
            .unwrap()
            .clone();
        assert_eq!(pods["scope"], "Namespaced");
        assert_eq!(pods["shortNames"], json!(["po"]));
        assert_eq!(resource_list("apps", "v1").unwrap()["groupVersion"], "apps/v1");
        assert!(resource_list("batch", "v1").is_none());
        assert_eq!(version("v1.32.6")["minor"], "32");
    }
}
