//! The DigitalOcean wire shapes of model objects (research/digitalocean.md §4.1, §4.2,
//! §5.1): what the HTTP face sends.
//!
//! Invariant: responses carry server-added tags, empty strings (not nulls) for
//! not-yet-known `ipv4`/`endpoint`/node `name`/`droplet_id`, droplet ids as strings on
//! nodes but integers on load balancers, a region slug on clusters and a region object on
//! load balancers (none on GLOBAL ones) — and only fields DigitalOcean's OpenAPI document
//! names for the response (crates/sim/tests/sim/do_schema.rs checks every route), except a
//! load balancer's `tags`, which DigitalOcean sends and its document leaves out.

use bc_domain::Timestamp;
use serde_json::{Value, json};

use crate::model::{Cluster, HealthCheck, LbType, LoadBalancer, Model, NodePool, catalog};

/// `2018-11-15T16:00:11Z` — DigitalOcean's usual second-precision UTC form.
pub fn time(t: Timestamp) -> String {
    let d = t.datetime();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        d.year(),
        u8::from(d.month()),
        d.day(),
        d.hour(),
        d.minute(),
        d.second()
    )
}

/// A node pool.
pub fn node_pool(p: &NodePool, cluster_id: &str) -> Value {
    json!({
        "id": p.id,
        "name": p.name,
        "size": p.size,
        "count": p.count,
        "tags": p.all_tags(cluster_id),
        "labels": p.labels,
        "taints": p.taints.iter().map(|t| json!({
            "key": t.key, "value": t.value, "effect": t.effect.as_str()
        })).collect::<Vec<_>>(),
        "auto_scale": p.auto_scale,
        "min_nodes": p.min_nodes,
        "max_nodes": p.max_nodes,
        "nodes": p.nodes.iter().map(|n| json!({
            "id": n.id,
            "name": n.name,
            "status": {"state": n.state.as_str()},
            "droplet_id": n.droplet_id,
            "created_at": time(n.created_at),
            "updated_at": time(n.updated_at),
        })).collect::<Vec<_>>(),
    })
}

/// A cluster (needs the model for its endpoint).
pub fn cluster(c: &Cluster, m: &Model) -> Value {
    let mut status = json!({"state": c.state.as_str()});
    if !c.message.is_empty() {
        status["message"] = json!(c.message);
    }
    let mut v = json!({
        "id": c.id,
        "name": c.name,
        "region": c.region,
        "version": c.version,
        "cluster_subnet": c.cluster_subnet,
        "service_subnet": c.service_subnet,
        "vpc_uuid": c.vpc_uuid,
        "ipv4": c.ipv4,
        "endpoint": if c.provisioned { m.cluster_endpoint(&c.id) } else { String::new() },
        "tags": c.all_tags(),
        "node_pools": c.node_pools.iter().map(|p| node_pool(p, &c.id)).collect::<Vec<_>>(),
        "maintenance_policy": {
            "start_time": c.maintenance_policy.start_time,
            "duration": c.maintenance_policy.duration,
            "day": c.maintenance_policy.day,
        },
        "auto_upgrade": c.auto_upgrade,
        "status": status,
        "created_at": time(c.created_at),
        "updated_at": time(c.updated_at),
        "surge_upgrade": c.surge_upgrade,
        "registry_enabled": false,
        "ha": c.ha,
        "isolated_workers": c.isolated_workers,
        "worker_subnet_uuid": c.worker_subnet_uuid,
    });
    for (name, block) in &c.addons {
        v[name.as_str()] = block.clone();
    }
    v
}

/// A region object, as load balancer responses carry it.
pub fn region(slug: &str) -> Value {
    json!({
        "name": catalog::region_name(slug),
        "slug": slug,
        "sizes": catalog::SIZES,
        "features": ["backups", "ipv6", "metadata", "install_agent", "storage", "image_transfer"],
        "available": true,
    })
}

/// A health check, by the document's schema (which has no `proxy_protocol`: a request's
/// is kept, not shown).
fn health_check(h: &HealthCheck) -> Value {
    json!({
        "protocol": h.protocol,
        "port": h.port,
        "path": h.path,
        "check_interval_seconds": h.check_interval_seconds,
        "response_timeout_seconds": h.response_timeout_seconds,
        "healthy_threshold": h.healthy_threshold,
        "unhealthy_threshold": h.unhealthy_threshold,
    })
}

/// A load balancer.
pub fn load_balancer(l: &LoadBalancer) -> Value {
    let mut v = json!({
        "id": l.id,
        "name": l.name,
        "ip": l.ip,
        "type": l.kind.as_str(),
        "size_unit": l.size_unit,
        "size": l.size_slug(),
        "algorithm": l.algorithm,
        "status": l.status.as_str(),
        "created_at": time(l.created_at),
        "forwarding_rules": l.forwarding_rules,
        "health_check": health_check(&l.health_check),
        "sticky_sessions": l.sticky_sessions,
        "tag": l.tag,
        "droplet_ids": l.droplet_ids,
        "redirect_http_to_https": l.redirect_http_to_https,
        "enable_proxy_protocol": l.enable_proxy_protocol,
        "enable_backend_keepalive": l.enable_backend_keepalive,
        "http_idle_timeout_seconds": l.http_idle_timeout_seconds,
        "vpc_uuid": l.vpc_uuid,
        "project_id": l.project_id,
        "disable_lets_encrypt_dns_records": l.disable_lets_encrypt_dns_records,
        "firewall": l.firewall,
        "network": l.network,
        "network_stack": l.network_stack,
        "tls_cipher_policy": l.tls_cipher_policy,
        "tags": l.tags,
    });
    if let Some(r) = &l.region {
        v["region"] = region(r);
    }
    if !l.ipv6.is_empty() {
        v["ipv6"] = json!(l.ipv6);
    }
    if l.kind == LbType::Global {
        v["domains"] = l
            .domains
            .iter()
            .map(|d| json!({"name": d.name, "is_managed": d.is_managed, "certificate_id": d.certificate_id}))
            .collect();
        v["glb_settings"] = json!(l.glb_settings);
        v["target_load_balancer_ids"] = json!(l.target_load_balancer_ids);
        if let Some(g) = &l.glb_settings {
            // The document requires at least one forwarding rule on every load balancer;
            // a GLOBAL one has exactly one, implied by its settings.
            v["forwarding_rules"] = json!([{
                "entry_protocol": g.target_protocol, "entry_port": g.target_port,
                "target_protocol": g.target_protocol, "target_port": g.target_port,
            }]);
        }
    }
    v
}
