//! The direct face: `bc_domain::ports::ProviderImpl` (with its Kubernetes and load
//! balancer halves) straight on the model, no HTTP, for fast reconciler tests.
//!
//! Invariant: every call goes through the same admission as an HTTP request — counted
//! under the same `"<METHOD> <route template>"` key, rate-limited, subject to the same
//! injected faults and refusals — and its errors are classified by the same function as
//! the HTTP adapter's (`bc_domain::classify::digitalocean`), fed the same error body and
//! headers the HTTP face would send, so a test here sees the classes production sees.

use std::sync::Arc;

use async_trait::async_trait;
use bc_domain::classify::digitalocean::{self, Failure};
use bc_domain::model::{
    ClusterMode, Domain, ForwardingRule, GlobalSettings, HealthCheck, HealthCheckProtocol,
    Protocol, ProviderAccount, ProviderKind, SecretString, StickySessions,
};
use bc_domain::ports::{
    AssociatedResources, ClusterCredentials, CreateClusterRequest, KubernetesProvider,
    KubernetesVersion, LoadBalancerProvider, LoadBalancerRequest, MaintenanceWindow, NamedResource,
    NodePoolRequest, ProviderCapabilities, ProviderCluster, ProviderClusterState,
    ProviderCredentials, ProviderImpl, ProviderLoadBalancer, ProviderLoadBalancerKind,
    ProviderLoadBalancerStatus, ProviderNode, ProviderNodePool, ProviderNodeState, ProviderOptions,
    ProviderRegistry, ProviderResult, ProviderTargets, SecretBox, UpdateClusterRequest,
};
use bc_domain::{ProviderError, Timestamp};

use crate::SimState;
use crate::model::{self, ApiError, Model, catalog, routes};

/// One simulated account's provider API, in process.
#[derive(Clone)]
pub struct DirectProvider {
    state: Arc<SimState>,
    token: String,
}

impl DirectProvider {
    /// The account of `token` (which must be one the simulator accepts for calls to
    /// succeed; otherwise every call is `Unauthorized`).
    pub fn new(state: Arc<SimState>, token: impl Into<String>) -> Self {
        Self { state, token: token.into() }
    }

    /// The shared state (for fault injection from tests).
    pub fn state(&self) -> &Arc<SimState> {
        &self.state
    }

    /// One call as the HTTP face would take it: admitted (counted, authenticated,
    /// rate-limited, faults and refusals applied) under `method template`, then run on
    /// the model; a failure is rendered as the HTTP face renders it (error body, request
    /// id, rate-limit headers) and classified by the one classification of DigitalOcean
    /// answers, exactly as the reqwest adapter classifies it.
    fn call<T>(
        &self,
        method: &str,
        template: &str,
        ids: &[&str],
        f: impl FnOnce(&mut Model, &str, Timestamp) -> Result<T, ApiError>,
    ) -> ProviderResult<T> {
        let now = self.state.clock.now();
        let mut m = self.state.model();
        let request_id = m.ids.uuid();
        let admission = m.admit(Some(&self.token), &routes::key(method, template), now);
        let path = routes::fill(template, ids);
        let classify = |e: ApiError| {
            let body = e.body(&request_id).to_string();
            let failure = Failure {
                method,
                path: &path,
                status: e.status,
                body: &body,
                request_id: Some(&request_id),
                retry_after_secs: e.retry_after,
                ratelimit_reset: Some(admission.rate.reset),
            };
            digitalocean::classify(&failure, &self.token, now)
        };
        admission.result.clone().map_err(classify)?;
        let out = f(&mut m, &self.token, now).map_err(classify)?;
        if m.take_lost_answer(&routes::key(method, template)) {
            return Err(ProviderError::Transient {
                message: format!("{method} {path}: no answer (the connection was lost)"),
            });
        }
        Ok(out)
    }
}

fn cluster_state(s: model::ClusterState) -> ProviderClusterState {
    use model::ClusterState as S;
    match s {
        S::Provisioning => ProviderClusterState::Provisioning,
        S::Running => ProviderClusterState::Running,
        S::Degraded => ProviderClusterState::Degraded,
        S::Error => ProviderClusterState::Error,
        S::Upgrading => ProviderClusterState::Upgrading,
        S::Deleting => ProviderClusterState::Deleting,
        S::Deleted => ProviderClusterState::Deleted,
    }
}

fn pool_out(p: &model::NodePool) -> ProviderNodePool {
    use model::NodeState as N;
    ProviderNodePool {
        id: p.id.clone(),
        name: p.name.clone(),
        size: p.size.clone(),
        count: p.count,
        auto_scale: p.auto_scale,
        min_nodes: p.min_nodes,
        max_nodes: p.max_nodes,
        labels: p.labels.clone().unwrap_or_default(),
        taints: p.taints.clone(),
        tags: p.tags.clone(),
        nodes: p
            .nodes
            .iter()
            .map(|n| ProviderNode {
                id: n.id.clone(),
                name: n.name.clone(),
                state: match n.state {
                    N::Provisioning => ProviderNodeState::Provisioning,
                    N::Running => ProviderNodeState::Running,
                    N::Draining => ProviderNodeState::Draining,
                    N::Deleting => ProviderNodeState::Deleting,
                },
                droplet_id: (!n.droplet_id.is_empty()).then(|| n.droplet_id.clone()),
            })
            .collect(),
    }
}

fn cluster_out(c: &model::Cluster, m: &Model) -> ProviderCluster {
    ProviderCluster {
        id: c.id.clone(),
        name: c.name.clone(),
        region: c.region.clone(),
        version: c.version.clone(),
        state: cluster_state(c.state),
        message: (!c.message.is_empty()).then(|| c.message.clone()),
        endpoint: c.provisioned.then(|| m.cluster_endpoint(&c.id)),
        high_availability: c.ha,
        tags: c.tags.clone(),
        auto_upgrade: c.auto_upgrade,
        surge_upgrade: c.surge_upgrade,
        maintenance_window: Some(MaintenanceWindow {
            start_time: c.maintenance_policy.start_time.clone(),
            day: c.maintenance_policy.day.clone(),
        }),
        node_pools: c.node_pools.iter().map(pool_out).collect(),
        created_at: Some(c.created_at),
    }
}

fn pool_spec(r: &NodePoolRequest) -> model::NodePoolSpec {
    model::NodePoolSpec {
        name: Some(r.name.clone()),
        size: (!r.size.is_empty()).then(|| r.size.clone()),
        count: r.count.map(i64::from),
        tags: Some(r.tags.clone()),
        labels: Some(r.labels.clone()),
        taints: Some(
            r.taints
                .iter()
                .map(|t| model::TaintSpec {
                    key: Some(t.key.clone()),
                    value: Some(t.value.clone()),
                    effect: Some(t.effect.as_str().to_owned()),
                })
                .collect(),
        ),
        auto_scale: Some(r.auto_scale.is_some()),
        min_nodes: r.auto_scale.map(|(min, _)| i64::from(min)),
        max_nodes: r.auto_scale.map(|(_, max)| i64::from(max)),
    }
}

fn named(v: Vec<(String, String)>) -> Vec<NamedResource> {
    v.into_iter().map(|(id, name)| NamedResource { id, name }).collect()
}

fn version(slug: &str) -> KubernetesVersion {
    KubernetesVersion {
        slug: slug.to_owned(),
        kubernetes_version: catalog::VersionSlug::parse(slug)
            .map(|v| v.kubernetes_version())
            .unwrap_or_default(),
    }
}

fn hc_protocol(p: HealthCheckProtocol) -> &'static str {
    match p {
        HealthCheckProtocol::Http => "http",
        HealthCheckProtocol::Https => "https",
        HealthCheckProtocol::Tcp => "tcp",
    }
}

fn protocol(s: &str) -> Protocol {
    serde_json::from_value(serde_json::Value::String(s.to_ascii_lowercase()))
        .unwrap_or(Protocol::Http)
}

fn lb_spec(r: &LoadBalancerRequest) -> model::LoadBalancerSpec {
    let (tag, droplet_ids, targets) = match &r.targets {
        ProviderTargets::Tag(t) => (Some(t.clone()), None, None),
        ProviderTargets::DropletIds(d) => (None, Some(d.clone()), None),
        ProviderTargets::LoadBalancerIds(l) => (None, None, Some(l.clone())),
    };
    let hc = &r.health_check;
    model::LoadBalancerSpec {
        name: Some(r.name.clone()),
        kind: Some(
            match &r.kind {
                ProviderLoadBalancerKind::Regional => "REGIONAL",
                ProviderLoadBalancerKind::RegionalNetwork => "REGIONAL_NETWORK",
                ProviderLoadBalancerKind::Global => "GLOBAL",
                ProviderLoadBalancerKind::Unknown(s) => s,
            }
            .to_owned(),
        ),
        region: r.region.clone().map(serde_json::Value::String),
        size_unit: r.size_unit.map(i64::from),
        forwarding_rules: Some(
            r.forwarding_rules
                .iter()
                .map(|f| model::ForwardingRule {
                    entry_protocol: f.entry_protocol.as_str().to_owned(),
                    entry_port: f.entry_port,
                    target_protocol: f.target_protocol.as_str().to_owned(),
                    target_port: f.target_port,
                    certificate_id: f.certificate_id.clone().unwrap_or_default(),
                    tls_passthrough: f.tls_passthrough,
                })
                .collect(),
        ),
        health_check: Some(model::load_balancer::HealthCheckSpec {
            protocol: Some(hc_protocol(hc.protocol).to_owned()),
            port: Some(i64::from(hc.port)),
            path: Some(hc.path.clone()),
            check_interval_seconds: Some(i64::from(hc.check_interval_seconds)),
            response_timeout_seconds: Some(i64::from(hc.response_timeout_seconds)),
            healthy_threshold: Some(i64::from(hc.healthy_threshold)),
            unhealthy_threshold: Some(i64::from(hc.unhealthy_threshold)),
            proxy_protocol: None,
        }),
        sticky_sessions: r.sticky_sessions.as_ref().map(|s| model::StickySessions {
            kind: s.kind.clone(),
            cookie_name: s.cookie_name.clone(),
            cookie_ttl_seconds: s.cookie_ttl_seconds,
        }),
        droplet_ids,
        tag,
        target_load_balancer_ids: targets,
        tags: Some(r.tags.clone()),
        redirect_http_to_https: Some(r.redirect_http_to_https),
        glb_settings: r.global_settings.as_ref().map(|g| model::GlbSettings {
            target_protocol: g.target_protocol.as_str().to_owned(),
            target_port: g.target_port,
            cdn: model::load_balancer::Cdn { is_enabled: g.cdn },
            region_priorities: g.region_priorities.clone(),
            failover_threshold: g.failover_threshold,
        }),
        domains: (!r.domains.is_empty()).then(|| {
            r.domains
                .iter()
                .map(|d| model::load_balancer::DomainSpec {
                    name: Some(d.name.clone()),
                    is_managed: d.is_managed,
                    certificate_id: d.certificate_id.clone(),
                })
                .collect()
        }),
        ..Default::default()
    }
}

fn lb_out(l: &model::LoadBalancer) -> ProviderLoadBalancer {
    let global = l.kind == model::LbType::Global;
    let targets = if !l.target_load_balancer_ids.is_empty() {
        ProviderTargets::LoadBalancerIds(l.target_load_balancer_ids.clone())
    } else if !l.tag.is_empty() {
        ProviderTargets::Tag(l.tag.clone())
    } else {
        ProviderTargets::DropletIds(l.droplet_ids.clone())
    };
    let hc = &l.health_check;
    ProviderLoadBalancer {
        id: l.id.clone(),
        status: match l.status {
            model::LbStatus::New => ProviderLoadBalancerStatus::New,
            model::LbStatus::Active => ProviderLoadBalancerStatus::Active,
            model::LbStatus::Errored => ProviderLoadBalancerStatus::Errored,
        },
        ip: (!l.ip.is_empty()).then(|| l.ip.clone()),
        spec: LoadBalancerRequest {
            name: l.name.clone(),
            kind: match l.kind {
                model::LbType::Regional => ProviderLoadBalancerKind::Regional,
                model::LbType::RegionalNetwork => ProviderLoadBalancerKind::RegionalNetwork,
                model::LbType::Global => ProviderLoadBalancerKind::Global,
            },
            region: l.region.clone(),
            forwarding_rules: l
                .forwarding_rules
                .iter()
                .map(|f| ForwardingRule {
                    entry_protocol: protocol(&f.entry_protocol),
                    entry_port: f.entry_port,
                    target_protocol: protocol(&f.target_protocol),
                    target_port: f.target_port,
                    certificate_id: (!f.certificate_id.is_empty())
                        .then(|| f.certificate_id.clone()),
                    tls_passthrough: f.tls_passthrough,
                })
                .collect(),
            health_check: HealthCheck {
                protocol: match hc.protocol.as_str() {
                    "https" => HealthCheckProtocol::Https,
                    "tcp" => HealthCheckProtocol::Tcp,
                    _ => HealthCheckProtocol::Http,
                },
                port: hc.port,
                path: hc.path.clone(),
                check_interval_seconds: hc.check_interval_seconds,
                response_timeout_seconds: hc.response_timeout_seconds,
                healthy_threshold: hc.healthy_threshold,
                unhealthy_threshold: hc.unhealthy_threshold,
            },
            // DigitalOcean shows `{type: none}` for "no sticky sessions".
            sticky_sessions: (l.sticky_sessions.kind != "none").then(|| StickySessions {
                kind: l.sticky_sessions.kind.clone(),
                cookie_name: l.sticky_sessions.cookie_name.clone(),
                cookie_ttl_seconds: l.sticky_sessions.cookie_ttl_seconds,
            }),
            targets,
            size_unit: (!global).then_some(l.size_unit),
            redirect_http_to_https: l.redirect_http_to_https,
            global_settings: l.glb_settings.as_ref().map(|g| GlobalSettings {
                target_protocol: protocol(&g.target_protocol),
                target_port: g.target_port,
                cdn: g.cdn.is_enabled,
                region_priorities: g.region_priorities.clone(),
                failover_threshold: g.failover_threshold,
            }),
            domains: l
                .domains
                .iter()
                .map(|d| Domain {
                    name: d.name.clone(),
                    is_managed: d.is_managed,
                    certificate_id: (!d.certificate_id.is_empty())
                        .then(|| d.certificate_id.clone()),
                })
                .collect(),
            tags: l.tags.clone(),
        },
        created_at: Some(l.created_at),
    }
}

#[async_trait]
impl KubernetesProvider for DirectProvider {
    async fn list_clusters(&self) -> ProviderResult<Vec<ProviderCluster>> {
        self.call("GET", routes::CLUSTERS, &[], |m, t, now| {
            let all = m.list_clusters(t, now)?;
            Ok(all.iter().map(|c| cluster_out(c, m)).collect())
        })
    }

    async fn get_cluster(&self, id: &str) -> ProviderResult<ProviderCluster> {
        self.call("GET", routes::CLUSTER, &[id], |m, t, now| {
            let c = m.get_cluster(t, id, now)?;
            Ok(cluster_out(&c, m))
        })
    }

    async fn create_cluster(&self, req: &CreateClusterRequest) -> ProviderResult<ProviderCluster> {
        let autopilot = req.mode == ClusterMode::Autopilot;
        if autopilot && !self.state.config.offer_autopilot {
            return Err(ProviderError::Refused {
                message: "autopilot clusters are not offered by this provider".into(),
            });
        }
        let body = model::ClusterCreate {
            name: Some(req.name.clone()),
            region: Some(req.region.clone()),
            version: Some(req.version.clone()),
            node_pools: Some(req.node_pools.iter().map(pool_spec).collect()),
            tags: Some(req.tags.clone()),
            ha: Some(req.high_availability),
            autopilot,
            ..Default::default()
        };
        self.call("POST", routes::CLUSTERS, &[], |m, t, now| {
            let c = m.create_cluster(t, body, now)?;
            Ok(cluster_out(&c, m))
        })
    }

    async fn update_cluster(
        &self,
        id: &str,
        req: &UpdateClusterRequest,
    ) -> ProviderResult<ProviderCluster> {
        let body = model::ClusterUpdate {
            name: Some(req.name.clone()),
            tags: Some(req.tags.clone()),
            ha: req.high_availability,
            auto_upgrade: req.auto_upgrade,
            surge_upgrade: req.surge_upgrade,
            maintenance_policy: req.maintenance_window.as_ref().map(|w| model::MaintenancePolicy {
                start_time: w.start_time.clone(),
                day: w.day.clone(),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.call("PUT", routes::CLUSTER, &[id], |m, t, now| {
            let c = m.update_cluster(t, id, body, now)?;
            Ok(cluster_out(&c, m))
        })
    }

    async fn delete_cluster(&self, id: &str) -> ProviderResult<()> {
        self.call("DELETE", routes::CLUSTER, &[id], |m, t, now| m.delete_cluster(t, id, now))
    }

    async fn associated_resources(&self, id: &str) -> ProviderResult<AssociatedResources> {
        self.call("GET", routes::ASSOCIATED, &[id], |m, t, now| {
            let a = m.associated_resources(t, id, now)?;
            Ok(AssociatedResources {
                load_balancers: named(a.load_balancers),
                volumes: named(a.volumes),
                volume_snapshots: named(a.volume_snapshots),
            })
        })
    }

    async fn delete_cluster_selective(
        &self,
        id: &str,
        load_balancer_ids: &[String],
    ) -> ProviderResult<()> {
        let sel =
            model::Selection { load_balancers: load_balancer_ids.to_vec(), ..Default::default() };
        self.call("DELETE", routes::ASSOCIATED_SELECTIVE, &[id], |m, t, now| {
            m.delete_cluster_selective(t, id, &sel, now)
        })
    }

    async fn list_node_pools(&self, cluster_id: &str) -> ProviderResult<Vec<ProviderNodePool>> {
        self.call("GET", routes::NODE_POOLS, &[cluster_id], |m, t, now| {
            Ok(m.list_node_pools(t, cluster_id, now)?.iter().map(pool_out).collect())
        })
    }

    async fn get_node_pool(
        &self,
        cluster_id: &str,
        node_pool_id: &str,
    ) -> ProviderResult<ProviderNodePool> {
        self.call("GET", routes::NODE_POOL, &[cluster_id, node_pool_id], |m, t, now| {
            Ok(pool_out(&m.get_node_pool(t, cluster_id, node_pool_id, now)?))
        })
    }

    async fn create_node_pool(
        &self,
        cluster_id: &str,
        req: &NodePoolRequest,
    ) -> ProviderResult<ProviderNodePool> {
        let spec = pool_spec(req);
        self.call("POST", routes::NODE_POOLS, &[cluster_id], |m, t, now| {
            Ok(pool_out(&m.create_node_pool(t, cluster_id, spec, now)?))
        })
    }

    async fn update_node_pool(
        &self,
        cluster_id: &str,
        node_pool_id: &str,
        req: &NodePoolRequest,
    ) -> ProviderResult<ProviderNodePool> {
        let spec = pool_spec(req);
        self.call("PUT", routes::NODE_POOL, &[cluster_id, node_pool_id], |m, t, now| {
            Ok(pool_out(&m.update_node_pool(t, cluster_id, node_pool_id, spec, now)?))
        })
    }

    async fn delete_node_pool(&self, cluster_id: &str, node_pool_id: &str) -> ProviderResult<()> {
        self.call("DELETE", routes::NODE_POOL, &[cluster_id, node_pool_id], |m, t, now| {
            m.delete_node_pool(t, cluster_id, node_pool_id, now)
        })
    }

    async fn delete_node(
        &self,
        cluster_id: &str,
        node_pool_id: &str,
        node_id: &str,
        skip_drain: bool,
        replace: bool,
    ) -> ProviderResult<()> {
        self.call("DELETE", routes::NODE, &[cluster_id, node_pool_id, node_id], |m, t, now| {
            m.delete_node(t, cluster_id, node_pool_id, node_id, skip_drain, replace, now)
        })
    }

    async fn available_upgrades(&self, cluster_id: &str) -> ProviderResult<Vec<KubernetesVersion>> {
        self.call("GET", routes::UPGRADES, &[cluster_id], |m, t, now| {
            Ok(m.upgrades(t, cluster_id, now)?.into_iter().map(version).collect())
        })
    }

    async fn upgrade_cluster(&self, cluster_id: &str, version: &str) -> ProviderResult<()> {
        self.call("POST", routes::UPGRADE, &[cluster_id], |m, t, now| {
            m.upgrade_cluster(t, cluster_id, version, now)
        })
    }

    async fn options(&self) -> ProviderResult<ProviderOptions> {
        self.call("GET", routes::OPTIONS, &[], |_, _, _| {
            Ok(ProviderOptions {
                regions: catalog::REGIONS.iter().map(|(s, _)| (*s).to_owned()).collect(),
                versions: catalog::offered_versions().into_iter().map(version).collect(),
                sizes: catalog::SIZES.iter().map(|s| (*s).to_owned()).collect(),
            })
        })
    }

    async fn credentials(&self, cluster_id: &str) -> ProviderResult<ClusterCredentials> {
        let minted = self.call("GET", routes::KUBECONFIG, &[cluster_id], |m, t, now| {
            let yaml = m.kubeconfig(t, cluster_id, None, now)?;
            let secs = i64::try_from(model::kubernetes::DEFAULT_EXPIRY_SECONDS).unwrap_or(0);
            Ok(ClusterCredentials {
                kubeconfig: SecretString::new(yaml),
                expires_at: Some(now + time::Duration::seconds(secs)),
            })
        });
        match minted {
            // As the HTTP adapter does: a GET tells "not served yet" from "gone".
            Err(ProviderError::NotFound) => {
                let cluster = self.get_cluster(cluster_id).await.map(|_| ());
                Err(digitalocean::kubeconfig_not_found(cluster_id, cluster))
            }
            other => other,
        }
    }
}

#[async_trait]
impl LoadBalancerProvider for DirectProvider {
    async fn list(&self) -> ProviderResult<Vec<ProviderLoadBalancer>> {
        self.call("GET", routes::LOAD_BALANCERS, &[], |m, t, now| {
            Ok(m.list_load_balancers(t, now)?.iter().map(lb_out).collect())
        })
    }

    async fn get(&self, id: &str) -> ProviderResult<ProviderLoadBalancer> {
        self.call("GET", routes::LOAD_BALANCER, &[id], |m, t, now| {
            Ok(lb_out(&m.get_load_balancer(t, id, now)?))
        })
    }

    async fn create(&self, req: &LoadBalancerRequest) -> ProviderResult<ProviderLoadBalancer> {
        let spec = lb_spec(req);
        self.call("POST", routes::LOAD_BALANCERS, &[], |m, t, now| {
            Ok(lb_out(&m.create_load_balancer(t, spec, now)?))
        })
    }

    async fn update(
        &self,
        id: &str,
        req: &LoadBalancerRequest,
    ) -> ProviderResult<ProviderLoadBalancer> {
        let spec = lb_spec(req);
        self.call("PUT", routes::LOAD_BALANCER, &[id], |m, t, now| {
            Ok(lb_out(&m.update_load_balancer(t, id, spec, now)?))
        })
    }

    async fn delete(&self, id: &str) -> ProviderResult<()> {
        self.call("DELETE", routes::LOAD_BALANCER, &[id], |m, t, now| {
            m.delete_load_balancer(t, id, now)
        })
    }
}

#[async_trait]
impl ProviderImpl for DirectProvider {
    fn capabilities(&self) -> ProviderCapabilities {
        let mut cluster_modes = vec![ClusterMode::Standard];
        if self.state.config.offer_autopilot {
            cluster_modes.push(ClusterMode::Autopilot);
        }
        ProviderCapabilities { cluster_modes }
    }

    async fn check_credentials(&self) -> ProviderResult<()> {
        // The HTTP adapter checks a token with a cheap authenticated read of the account.
        self.call("GET", routes::ACCOUNT, &[], |_, _, _| Ok(()))
    }

    fn kubernetes(&self) -> &dyn KubernetesProvider {
        self
    }

    fn load_balancers(&self) -> &dyn LoadBalancerProvider {
        self
    }
}

/// The direct face as a [`ProviderRegistry`]: each account's sealed credentials are
/// opened the way every registry opens them ([`ProviderCredentials::unseal`]), and its
/// token picks the simulated account, so reconciler tests on the direct face see the
/// same tokens, scopes, rate limits and faults as over HTTP.
pub struct DirectRegistry {
    state: Arc<SimState>,
    secret_box: Arc<dyn SecretBox>,
}

impl DirectRegistry {
    /// A registry over the simulator `state`, opening credentials with `secret_box`.
    pub fn new(state: Arc<SimState>, secret_box: Arc<dyn SecretBox>) -> Self {
        Self { state, secret_box }
    }
}

#[async_trait]
impl ProviderRegistry for DirectRegistry {
    async fn provider_for(
        &self,
        account: &ProviderAccount,
    ) -> ProviderResult<Arc<dyn ProviderImpl>> {
        let creds = ProviderCredentials::unseal(self.secret_box.as_ref(), account)?;
        Ok(Arc::new(DirectProvider::new(self.state.clone(), creds.token.expose())))
    }

    async fn provider_for_token(
        &self,
        _provider: ProviderKind,
        token: &SecretString,
    ) -> ProviderResult<Arc<dyn ProviderImpl>> {
        Ok(Arc::new(DirectProvider::new(self.state.clone(), token.expose())))
    }
}
