//! The contract: what the reconcilers rely on a provider adapter and the kube adapter to
//! do, checked on the smallest billable objects — a one-node cluster of a small size; a
//! second node pool made, resized and deleted; where the provider offers them (as its
//! [`ProviderOffer`](bc_domain::ports::ProviderOffer) declares), a regional load balancer
//! of one size unit made, changed and deleted and an autopilot cluster made, refusing
//! node pools, and deleted; and in the cluster the
//! substrate's Namespace, Secret, ServiceAccount and DaemonSet, built by the
//! reconciler's own builders (`bc_reconcile::substrates::objects`), applied server-side
//! through the real kube adapter, read back "in place" by the reconciler's rule, and
//! refused where a tenant's object of that name stands.
//!
//! Invariant: every object made is named under the run's prefix and tagged
//! [`crate::TAG`], entered in the ledger when the call that made it answers, and
//! deleted by the step that made it (the cluster by [`run`], last, whatever happened
//! once it exists) — or, when a check fails first, left to the sweeper; every wait is
//! bounded ([`crate::wait`]).

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use bc_domain::model::SecretString;
use bc_domain::model::{ClusterMode, ForwardingRule, HealthCheck, LoadBalancerType, Protocol};
use bc_domain::name::LABEL_SUBSTRATE_POOL;
use bc_domain::policy::VERSION_LATEST;
use bc_domain::ports::ProviderNodePool;
use bc_domain::ports::{
    ApplyOutcome, ClusterApi, ClusterClient, ClusterSession, CreateClusterRequest, DeleteOutcome,
    KubeObject, KubernetesProvider, LoadBalancerProvider, LoadBalancerRequest, NodePoolRequest,
    ObjectKind, ObjectMeta, OwnerLabel, ProviderCluster, ProviderClusterState, ProviderImpl,
    ProviderLoadBalancerKind, ProviderLoadBalancerStatus, ProviderNodeState, ProviderResult,
    ProviderTargets, object_in_place,
};
use bc_domain::{PoolId, ProviderError};
use bc_reconcile::substrates::objects;
use serde_json::json;

use crate::ledger::{CONTROL_PLANE, LB_SIZE_UNIT, Ledger, PriceList};
use crate::wait::{Deadlines, Seen, busy, not_yet, until, until_gone};
use crate::{ConformanceError, Result, TAG, check, ensure};

/// The server URL the join Secret names (nothing calls it: bcd runs on no node, see
/// [`BCD_IMAGE`]).
pub const SERVER_URL: &str = "https://bc.conformance.invalid";

/// The image the DaemonSet names. No pod is made from it: the DaemonSet selects the
/// pool's label, which the run's nodes do not carry, so nothing is pulled or joined.
pub const BCD_IMAGE: &str = "ghcr.io/better-compute/bcd:conformance";

/// The label a tenant's objects carry instead of ours.
pub const TENANT_LABEL: &str = "conformance.better-compute.dev/tenant";

/// How a provider's nodes are matched with the cluster's Nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeMatch {
    /// The provider lists a pool's nodes with their droplets (DigitalOcean); a Node's
    /// provider id is `digitalocean://<droplet id>`.
    Droplets,
    /// The provider lists no nodes (GKE: a pool's size is its Nodes); a pool's Nodes
    /// carry `label=<pool name>` and a provider id starting with `provider_id_prefix`.
    PoolLabel {
        /// The label naming a Node's pool.
        label: &'static str,
        /// How the provider ids of its Nodes start.
        provider_id_prefix: &'static str,
    },
}

/// Where and of what a run makes its objects.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The location of the standard cluster and the load balancer.
    pub location: String,
    /// Where the autopilot cluster goes (a region), if the provider offers autopilot.
    pub autopilot_region: Option<String>,
    /// The node size of every pool.
    pub node_size: &'static str,
    /// How nodes are matched.
    pub nodes: NodeMatch,
    /// The list prices of the bill.
    pub prices: PriceList,
}

/// What a run works with.
pub struct Ctx<'a> {
    /// The provider adapter.
    pub provider: Arc<dyn ProviderImpl>,
    /// The kube adapter.
    pub clusters: Arc<dyn ClusterApi>,
    /// Where and of what.
    pub target: Target,
    /// The run's name prefix (`bc-conf-<run id>`).
    pub prefix: String,
    /// The waits' bounds.
    pub deadlines: Deadlines,
    /// What was made.
    pub ledger: &'a mut Ledger,
    /// Progress lines.
    pub out: &'a mut dyn Write,
}

impl Ctx<'_> {
    fn say(&mut self, line: &str) {
        let _ = writeln!(self.out, "{line}");
    }
}

/// A provider failure at `step`.
fn provider(step: &str) -> impl Fn(ProviderError) -> ConformanceError + '_ {
    move |error| ConformanceError::Provider { step: step.to_owned(), error }
}

/// A cluster API failure at `step`.
fn cluster(step: &str) -> impl Fn(bc_domain::ports::ClusterError) -> ConformanceError + '_ {
    move |error| ConformanceError::Cluster { step: step.to_owned(), error }
}

fn secs(since: Instant) -> String {
    format!("{:.1} s", since.elapsed().as_secs_f64())
}

/// The whole contract; each cluster is deleted whatever happens once it exists.
pub async fn run(ctx: &mut Ctx<'_>) -> Result<()> {
    options(ctx).await?;
    let offer = ctx.provider.offer();
    let made = create_cluster(ctx).await?;
    let result = async {
        let running = wait_running(ctx, &made).await?;
        node_pools(ctx, &running).await?;
        if offer.load_balancer_types.contains(&LoadBalancerType::Regional) {
            let droplet = running
                .node_pools
                .iter()
                .flat_map(|p| &p.nodes)
                .find_map(|n| n.droplet_id.as_deref().and_then(|d| d.parse::<u64>().ok()))
                .ok_or_else(|| check("cluster", "no running node has a numeric droplet id"))?;
            load_balancer(ctx, droplet).await?;
        } else {
            ctx.say("--   load balancer: the provider offers none through the port");
        }
        cluster_objects(ctx, &running).await
    }
    .await;
    let deleted = delete_cluster(ctx, &made).await;
    result.and(deleted)?;
    match ctx.target.autopilot_region.clone() {
        Some(region) if offer.cluster_modes.contains(&ClusterMode::Autopilot) => {
            autopilot(ctx, &region).await
        }
        _ => Ok(()),
    }
}

/// Options: the region, the cheapest size and a version are offered.
async fn options(ctx: &mut Ctx<'_>) -> Result<()> {
    let step = "options";
    let (location, size) = (ctx.target.location.clone(), ctx.target.node_size);
    let o = ctx.provider.kubernetes().options_in(&location).await.map_err(provider(step))?;
    ensure(o.regions.contains(&location), step, || {
        format!("region {location} is not offered for clusters: {}", o.regions.join(", "))
    })?;
    // A provider that lists no sizes (GKE: machine types are Compute Engine's) is
    // checked by the create.
    ensure(o.sizes.is_empty() || o.sizes.iter().any(|s| s == size), step, || {
        format!("size {size} is not offered: {}", o.sizes.join(", "))
    })?;
    let newest = o.versions.first().ok_or_else(|| check(step, "no version is offered"))?;
    let line =
        format!("ok   options: region {location}, size {size}, newest version {}", newest.slug);
    ctx.say(&line);
    Ok(())
}

/// A fixed pool of `count` nodes of `size`, tagged [`TAG`], without labels (so the
/// substrate's DaemonSet selects none of its nodes).
fn pool_request(name: &str, size: &str, count: u32) -> NodePoolRequest {
    NodePoolRequest {
        name: name.to_owned(),
        size: size.to_owned(),
        count: Some(count),
        auto_scale: None,
        labels: BTreeMap::new(),
        taints: vec![],
        tags: vec![TAG.to_owned()],
    }
}

/// Creates the one-node cluster and checks the answer.
async fn create_cluster(ctx: &mut Ctx<'_>) -> Result<ProviderCluster> {
    let step = "cluster create";
    let name = format!("{}-c", ctx.prefix);
    let pool = format!("{}-p1", ctx.prefix);
    let (location, size) = (ctx.target.location.clone(), ctx.target.node_size);
    let req = CreateClusterRequest {
        name: name.clone(),
        region: location.clone(),
        version: VERSION_LATEST.to_owned(),
        high_availability: false,
        mode: ClusterMode::Standard,
        tags: vec![TAG.to_owned()],
        node_pools: vec![pool_request(&pool, size, 1)],
    };
    let made = ctx.provider.kubernetes().create_cluster(&req).await.map_err(provider(step))?;
    ctx.ledger.made(&made.id, &format!("cluster {name}"), CONTROL_PLANE, 1);
    ctx.ledger.made(&made.id, &format!("node pool {pool}"), size, 1);
    ensure(made.name == name && made.region == location, step, || {
        format!("asked {name} in {location}, got {} in {}", made.name, made.region)
    })?;
    ensure(made.tags == [TAG], step, || {
        format!("tags {:?}, want [{TAG}] (server tags stripped)", made.tags)
    })?;
    let pools: Vec<_> =
        made.node_pools.iter().map(|p| (p.name.as_str(), p.size.as_str(), p.count)).collect();
    ensure(pools == [(pool.as_str(), size, 1)], step, || {
        format!("node pools {pools:?}, want one pool {pool} of 1 × {size}")
    })?;
    ensure(made.state == ProviderClusterState::Provisioning, step, || {
        format!("state {:?} right after create, want Provisioning", made.state)
    })?;
    let line = format!("ok   cluster {name} ({}): created, provisioning", made.id);
    ctx.say(&line);
    Ok(made)
}

/// Waits until the cluster runs with every node running on a droplet, and lists it.
async fn wait_running(ctx: &mut Ctx<'_>, made: &ProviderCluster) -> Result<ProviderCluster> {
    let step = "cluster running";
    let started = Instant::now();
    let k = ctx.provider.kubernetes();
    let d = &ctx.deadlines;
    let matching = &ctx.target.nodes;
    let running = until(step, d.cluster, d.pause_max, || async {
        match k.get_cluster(&made.id).await {
            Ok(c) if c.state == ProviderClusterState::Error => {
                Err(check(step, format!("the cluster failed: {:?}", c.message)))
            }
            Ok(c) => {
                let nodes: Vec<_> = c.node_pools.iter().flat_map(|p| &p.nodes).collect();
                // A provider that lists no nodes has them counted in each pool.
                let ready = c.state == ProviderClusterState::Running
                    && c.endpoint.is_some()
                    && c.node_pools.iter().all(|p| pool_ready(matching, p, 1));
                let states: Vec<_> = nodes.iter().map(|n| &n.state).collect();
                Ok(if ready {
                    Seen::Done(c)
                } else {
                    Seen::NotYet(format!("{:?}, nodes {states:?}", c.state))
                })
            }
            // A GET right after the create may not find it yet (research §8 gotcha 2).
            Err(ProviderError::NotFound) => Ok(Seen::NotYet("not found yet".into())),
            Err(e) => not_yet(step, e),
        }
    })
    .await?;
    let listed = k.list_clusters().await.map_err(provider("cluster list"))?;
    ensure(listed.iter().any(|c| c.id == made.id), "cluster list", || {
        format!("{} is not in the account's list", made.id)
    })?;
    let line = format!(
        "ok   cluster {}: running version {} with 1 node after {}; listed",
        running.name,
        running.version,
        secs(started)
    );
    ctx.say(&line);
    Ok(running)
}

/// Whether pool `p` has `count` nodes, all running: listed with their droplets, or (a
/// provider that lists none) counted.
fn pool_ready(matching: &NodeMatch, p: &ProviderNodePool, count: u32) -> bool {
    match matching {
        NodeMatch::Droplets => {
            usize::try_from(count).is_ok_and(|c| p.nodes.len() == c)
                && p.nodes
                    .iter()
                    .all(|n| n.state == ProviderNodeState::Running && n.droplet_id.is_some())
        }
        NodeMatch::PoolLabel { .. } => p.count == count,
    }
}

/// Waits until pool `pool_id` has `count` nodes, all running.
async fn wait_pool(ctx: &mut Ctx<'_>, cluster_id: &str, pool_id: &str, count: u32) -> Result<()> {
    let step = format!("node pool with {count} running node(s)");
    let k = ctx.provider.kubernetes();
    let d = &ctx.deadlines;
    let matching = &ctx.target.nodes;
    until(&step, d.node_pool, d.pause_max, || async {
        match k.get_node_pool(cluster_id, pool_id).await {
            Ok(p) => {
                let states: Vec<_> = p.nodes.iter().map(|n| &n.state).collect();
                let done = p.count == count && pool_ready(matching, &p, count);
                Ok(if done {
                    Seen::Done(())
                } else {
                    Seen::NotYet(format!("count {}, nodes {states:?}", p.count))
                })
            }
            Err(ProviderError::NotFound) => Ok(Seen::NotYet("not found yet".into())),
            Err(e) => not_yet(&step, e),
        }
    })
    .await
}

/// A second pool: made with one node, resized to two, listed, deleted until 404. A
/// provider that runs one operation at a time per cluster answers `Busy` while an earlier
/// one runs; each change is asked again until it is taken.
async fn node_pools(ctx: &mut Ctx<'_>, cluster: &ProviderCluster) -> Result<()> {
    let started = Instant::now();
    let p = ctx.provider.clone();
    let k = p.kubernetes();
    let d = ctx.deadlines.clone();
    let size = ctx.target.node_size;
    let name = format!("{}-p2", ctx.prefix);
    let step = "node pool create";
    let made = until(step, d.busy, d.pause_max, || async {
        match k.create_node_pool(&cluster.id, &pool_request(&name, size, 1)).await {
            Ok(made) => Ok(Seen::Done(made)),
            Err(e) => busy(step, e),
        }
    })
    .await?;
    ctx.ledger.made(&made.id, &format!("node pool {name}"), size, 1);
    // The count is checked once the nodes run: a provider that counts a pool's Nodes
    // answers 0 until they join.
    let got = (made.name.as_str(), made.size.as_str(), made.auto_scale);
    ensure(got == (name.as_str(), size, false), step, || {
        format!("answered {got:?}, want ({name}, {size}, fixed)")
    })?;
    ensure(made.tags == [TAG], step, || format!("tags {:?}, want [{TAG}]", made.tags))?;
    wait_pool(ctx, &cluster.id, &made.id, 1).await?;

    let step = "node pool resize";
    let resized = until(step, d.busy, d.pause_max, || async {
        match k.update_node_pool(&cluster.id, &made.id, &pool_request(&name, size, 2)).await {
            Ok(p) => Ok(Seen::Done(p)),
            Err(e) => not_yet(step, e),
        }
    })
    .await?;
    ctx.ledger.resized(&made.id, 2);
    ensure(resized.name == name && !resized.auto_scale, step, || {
        format!("answered {} (autoscaled: {}) after a resize", resized.name, resized.auto_scale)
    })?;
    wait_pool(ctx, &cluster.id, &made.id, 2).await?;
    let pools = k.list_node_pools(&cluster.id).await.map_err(provider("node pool list"))?;
    let mut names: Vec<_> = pools.iter().map(|p| p.name.clone()).collect();
    names.sort();
    let first = format!("{}-p1", ctx.prefix);
    ensure(names == [first.clone(), name.clone()], "node pool list", || {
        format!("pools {names:?}, want [{first}, {name}]")
    })?;

    let step = "node pool delete";
    until(step, d.busy, d.pause_max, || async {
        match k.delete_node_pool(&cluster.id, &made.id).await {
            Ok(()) => Ok(Seen::Done(())),
            Err(e) => not_yet(step, e),
        }
    })
    .await?;
    until_gone(
        step,
        &d,
        || k.get_node_pool(&cluster.id, &made.id),
        |p| Some(format!("{} node(s) left", p.nodes.len().max(p.count as usize))),
    )
    .await?;
    ctx.ledger.gone(&made.id);
    let line = format!(
        "ok   node pool {name}: created with 1 node, resized to 2, listed, deleted ({})",
        secs(started)
    );
    ctx.say(&line);
    Ok(())
}

/// An autopilot cluster in `region`: made without node pools, running with an endpoint,
/// every node-pool call refused (the provider runs its nodes), deleted until gone.
async fn autopilot(ctx: &mut Ctx<'_>, region: &str) -> Result<()> {
    let started = Instant::now();
    let p = ctx.provider.clone();
    let k = p.kubernetes();
    let d = ctx.deadlines.clone();
    let name = format!("{}-a", ctx.prefix);
    let step = "autopilot create";
    let req = CreateClusterRequest {
        name: name.clone(),
        region: region.to_owned(),
        version: VERSION_LATEST.to_owned(),
        high_availability: true,
        mode: ClusterMode::Autopilot,
        tags: vec![TAG.to_owned()],
        node_pools: vec![],
    };
    let made = k.create_cluster(&req).await.map_err(provider(step))?;
    ctx.ledger.made(&made.id, &format!("autopilot cluster {name}"), CONTROL_PLANE, 1);
    let result = async {
        ensure(made.mode == ClusterMode::Autopilot && made.node_pools.is_empty(), step, || {
            format!("mode {:?} with pools {:?}, want autopilot without", made.mode, made.node_pools)
        })?;
        let step = "autopilot running";
        until(step, d.cluster, d.pause_max, || async {
            match k.get_cluster(&made.id).await {
                Ok(c) if c.state == ProviderClusterState::Error => {
                    Err(check(step, format!("the cluster failed: {:?}", c.message)))
                }
                Ok(c) if c.state == ProviderClusterState::Running && c.endpoint.is_some() => {
                    Ok(Seen::Done(()))
                }
                Ok(c) => Ok(Seen::NotYet(format!("{:?}", c.state))),
                Err(ProviderError::NotFound) => Ok(Seen::NotYet("not found yet".into())),
                Err(e) => not_yet(step, e),
            }
        })
        .await?;
        let step = "autopilot node pools";
        let refused = |r: ProviderResult<()>| matches!(r, Err(ProviderError::Refused { .. }));
        let listed = k.list_node_pools(&made.id).await.map(|_| ());
        let created =
            k.create_node_pool(&made.id, &pool_request("p", ctx.target.node_size, 1)).await;
        ensure(refused(listed.clone()) && refused(created.clone().map(|_| ())), step, || {
            format!("list: {listed:?}, create: {:?}; want both refused", created.map(|p| p.id))
        })
    }
    .await;
    let deleted = delete_cluster(ctx, &made).await;
    result.and(deleted)?;
    let line = format!(
        "ok   autopilot cluster {name} in {region}: running, node pools refused, deleted ({})",
        secs(started)
    );
    ctx.say(&line);
    Ok(())
}

/// A regional load balancer of one size unit: HTTP 80 → 8080 to `droplet`, tagged.
fn lb_request(name: &str, region: &str, droplet: u64) -> LoadBalancerRequest {
    LoadBalancerRequest {
        name: name.to_owned(),
        kind: ProviderLoadBalancerKind::from(LoadBalancerType::Regional),
        region: Some(region.to_owned()),
        forwarding_rules: vec![ForwardingRule {
            entry_protocol: Protocol::Http,
            entry_port: 80,
            target_protocol: Protocol::Http,
            target_port: 8080,
            certificate_id: None,
            tls_passthrough: false,
        }],
        health_check: HealthCheck::default(),
        sticky_sessions: None,
        targets: ProviderTargets::DropletIds(vec![droplet]),
        size_unit: Some(1),
        redirect_http_to_https: false,
        global_settings: None,
        domains: vec![],
        tags: vec![TAG.to_owned()],
    }
}

/// The load balancer: made (answer equal to the request), active, replaced whole with
/// another target port (retrying while it is busy), read back, listed, deleted to 404.
async fn load_balancer(ctx: &mut Ctx<'_>, droplet: u64) -> Result<()> {
    let started = Instant::now();
    let p = ctx.provider.clone();
    let lbs: &dyn LoadBalancerProvider = p.load_balancers();
    let name = format!("{}-lb", ctx.prefix);
    let req = lb_request(&name, &ctx.target.location, droplet);
    let step = "load balancer create";
    let made = lbs.create(&req).await.map_err(provider(step))?;
    ctx.ledger.made(&made.id, &format!("load balancer {name}"), LB_SIZE_UNIT, 1);
    ensure(made.spec == req, step, || {
        format!("what came back differs from what was asked: {:?} vs {req:?}", made.spec)
    })?;
    let step = "load balancer active";
    let d = ctx.deadlines.clone();
    until(step, d.load_balancer, d.pause_max, || async {
        match lbs.get(&made.id).await {
            Ok(l) if l.status == ProviderLoadBalancerStatus::Errored => {
                Err(check(step, "the load balancer errored"))
            }
            Ok(l) if l.status == ProviderLoadBalancerStatus::Active && l.ip.is_some() => {
                Ok(Seen::Done(()))
            }
            Ok(l) => Ok(Seen::NotYet(format!("{:?}, ip {:?}", l.status, l.ip))),
            Err(ProviderError::NotFound) => Ok(Seen::NotYet("not found yet".into())),
            Err(e) => not_yet(step, e),
        }
    })
    .await?;

    let step = "load balancer update";
    let mut changed = req.clone();
    changed.forwarding_rules[0].target_port = 8081;
    let updated = until(step, d.busy, d.pause_max, || async {
        match lbs.update(&made.id, &changed).await {
            Ok(l) => Ok(Seen::Done(l)),
            // "can't be updated while it processes previous actions" is a 403 the
            // adapter classifies as transient.
            Err(e) => not_yet(step, e),
        }
    })
    .await?;
    ensure(updated.spec == changed, step, || {
        format!("the answer is not the whole object asked: {:?} vs {changed:?}", updated.spec)
    })?;
    let again = lbs.get(&made.id).await.map_err(provider("load balancer get"))?;
    ensure(again.spec == changed, "load balancer get", || {
        format!("the change did not stick: {:?}", again.spec)
    })?;
    let listed = lbs.list().await.map_err(provider("load balancer list"))?;
    ensure(listed.iter().any(|l| l.id == made.id), "load balancer list", || {
        format!("{} is not in the account's list", made.id)
    })?;

    let step = "load balancer delete";
    until(step, d.busy, d.pause_max, || async {
        match lbs.delete(&made.id).await {
            Ok(()) => Ok(Seen::Done(())),
            Err(e) => not_yet(step, e),
        }
    })
    .await?;
    until_gone(step, &d, || lbs.get(&made.id), |l| Some(format!("{:?}", l.status))).await?;
    ctx.ledger.gone(&made.id);
    let line = format!(
        "ok   load balancer {name}: created as asked, active, updated whole, read back, listed, deleted ({})",
        secs(started)
    );
    ctx.say(&line);
    Ok(())
}

/// One of a pool's four objects, as the substrate reconciler builds it.
fn build(pool: &PoolId, kind: ObjectKind, token: &SecretString) -> KubeObject {
    match kind {
        ObjectKind::Namespace => objects::namespace(pool),
        ObjectKind::ServiceAccount => objects::service_account(pool),
        ObjectKind::Secret => objects::join_secret(pool, token, SERVER_URL),
        ObjectKind::DaemonSet => objects::daemonset(pool, &[], BCD_IMAGE, SERVER_URL),
    }
}

/// The reconciler's rule for "already in place, no write": the Secret by its digests,
/// the others by `object_in_place` (bc-reconcile's substrates reconciler decides so).
fn in_place(
    kind: ObjectKind,
    object: &KubeObject,
    meta: &ObjectMeta,
    pool: &PoolId,
    token: &SecretString,
) -> bool {
    match kind {
        ObjectKind::Secret => {
            let hash = bc_domain::token::sha256_hex(token.expose().as_bytes());
            objects::secret_in_place(meta, pool, Some(&hash), SERVER_URL)
        }
        _ => object_in_place(kind, &object.manifest, &meta.content),
    }
}

/// An object as read without what the cluster writes by itself — `status`,
/// `resourceVersion`, `managedFields` (a DaemonSet's controller updates its status at any
/// time) — so two reads compare equal unless a client changed the object.
fn settled(meta: &ObjectMeta) -> serde_json::Value {
    let mut v = meta.content.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("status");
    }
    if let Some(m) = v.get_mut("metadata").and_then(serde_json::Value::as_object_mut) {
        m.remove("resourceVersion");
        m.remove("managedFields");
    }
    v
}

/// `object` as a tenant made it: our names, the tenant's label instead of ours.
fn tenants(mut object: KubeObject) -> KubeObject {
    object.manifest["metadata"]["labels"] = json!({TENANT_LABEL: "tenant"});
    object
}

fn tenant_owner() -> OwnerLabel {
    OwnerLabel { key: TENANT_LABEL.to_owned(), value: "tenant".to_owned() }
}

async fn read(c: &dyn ClusterClient, object: &KubeObject, step: &str) -> Result<ObjectMeta> {
    c.read_object(&object.object)
        .await
        .map_err(cluster(step))?
        .ok_or_else(|| check(step, format!("{} is not there", object.object)))
}

/// Deletes `object` as `owner` and waits until it is gone (a Namespace terminates).
async fn delete_until_gone(
    c: &dyn ClusterClient,
    d: &Deadlines,
    object: &KubeObject,
    owner: &OwnerLabel,
) -> Result<()> {
    let step = format!("delete {}", object.object);
    let outcome = c.delete_owned(&object.object, owner).await.map_err(cluster(&step))?;
    ensure(outcome == DeleteOutcome::Deleted, &step, || format!("{outcome:?}, want Deleted"))?;
    until(&step, d.cluster_api, d.pause_max, || async {
        match c.read_object(&object.object).await {
            Ok(None) => Ok(Seen::Done(())),
            Ok(Some(_)) => Ok(Seen::NotYet("still there".into())),
            Err(e) => Err(cluster(&step)(e)),
        }
    })
    .await
}

/// In the cluster, through a `ClusterSession` over the kube adapter with the kubeconfig
/// the provider mints: our four objects created, in place, re-applied without change;
/// a tenant's objects of the same names refused (never changed or deleted); then all
/// deleted.
async fn cluster_objects(ctx: &mut Ctx<'_>, running: &ProviderCluster) -> Result<()> {
    let cluster_id = running.id.as_str();
    let started = Instant::now();
    let d = ctx.deadlines.clone();
    let k: &dyn KubernetesProvider = ctx.provider.kubernetes();
    let step = "kubeconfig";
    until(step, d.cluster_api, d.pause_max, || async {
        match k.credentials(cluster_id).await {
            Ok(_) => Ok(Seen::Done(())),
            Err(e) => not_yet(step, e),
        }
    })
    .await?;
    let session = ClusterSession::new(ctx.provider.clone(), ctx.clusters.clone(), cluster_id);
    let c: &dyn ClusterClient = &session;
    // The first pool's nodes are Nodes of the cluster, matched across the two APIs by
    // their provider id (DigitalOcean: each node's droplet) or by their pool's label
    // (GKE, whose API names no nodes).
    let step = "nodes";
    let first = &running.node_pools[0];
    let matching = ctx.target.nodes.clone();
    let want: Vec<(String, String)> = first
        .nodes
        .iter()
        .map(|n| {
            let droplet = n.droplet_id.clone().unwrap_or_default();
            (n.name.clone(), format!("digitalocean://{droplet}"))
        })
        .collect();
    until(step, d.cluster_api, d.pause_max, || async {
        let seen = match &matching {
            NodeMatch::Droplets => {
                let nodes = c.list_nodes("").await.map_err(cluster(step))?;
                let listed: Vec<(String, String)> = nodes
                    .into_iter()
                    .map(|n| (n.name, n.provider_id.unwrap_or_default()))
                    .collect();
                if want.iter().all(|w| listed.contains(w)) {
                    Seen::Done(())
                } else {
                    Seen::NotYet(format!("Nodes {listed:?}, want {want:?} among them"))
                }
            }
            NodeMatch::PoolLabel { label, provider_id_prefix } => {
                let selector = format!("{label}={}", first.name);
                let nodes = c.list_nodes(&selector).await.map_err(cluster(step))?;
                let ids: Vec<String> =
                    nodes.into_iter().map(|n| n.provider_id.unwrap_or_default()).collect();
                if ids.len() == 1 && ids.iter().all(|i| i.starts_with(provider_id_prefix)) {
                    Seen::Done(())
                } else {
                    Seen::NotYet(format!(
                        "Nodes of {selector} with provider ids {ids:?}, want one under {provider_id_prefix}"
                    ))
                }
            }
        };
        Ok(seen)
    })
    .await?;

    let seed = rand::random::<u128>();
    let unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
    let ours = PoolId::generate(unix_ms, seed);
    let theirs = PoolId::generate(unix_ms, seed.wrapping_add(1));
    let token = SecretString::new(format!("bcj_conformance_{:x}", rand::random::<u64>()));
    let owner = objects::owner(&ours);

    for kind in objects::APPLY_ORDER {
        let o = build(&ours, kind, &token);
        let step = format!("apply {}", o.object);
        let outcome = c.apply_owned(&o, &owner).await.map_err(cluster(&step))?;
        ensure(outcome == ApplyOutcome::Created, &step, || format!("{outcome:?}, want Created"))?;
        let meta = read(c, &o, &step).await?;
        ensure(in_place(kind, &o, &meta, &ours, &token), &step, || {
            format!("not in place as read back: {:?}", meta.content)
        })?;
    }
    for kind in objects::APPLY_ORDER {
        let o = build(&ours, kind, &token);
        let step = format!("re-apply {}", o.object);
        // The first apply after a create adds an Apply entry to managedFields; the
        // second must change nothing.
        for _ in 0..2 {
            let outcome = c.apply_owned(&o, &owner).await.map_err(cluster(&step))?;
            ensure(outcome == ApplyOutcome::Applied, &step, || {
                format!("{outcome:?}, want Applied")
            })?;
        }
        let before = read(c, &o, &step).await?;
        c.apply_owned(&o, &owner).await.map_err(cluster(&step))?;
        let after = read(c, &o, &step).await?;
        ensure(settled(&after) == settled(&before), &step, || {
            format!("a re-apply of the same manifest changed it: {:?}", after.content)
        })?;
        ensure(in_place(kind, &o, &after, &ours, &token), &step, || "not in place".into())?;
    }
    let line = format!(
        "ok   cluster objects: {}'s Namespace, ServiceAccount, Secret, DaemonSet created, in place, re-applied without change",
        ours
    );
    ctx.say(&line);

    // A tenant's objects under the names pool `theirs` would use.
    for kind in objects::APPLY_ORDER {
        let o = tenants(build(&theirs, kind, &token));
        let step = format!("tenant's {}", o.object);
        let outcome = c.apply_owned(&o, &tenant_owner()).await.map_err(cluster(&step))?;
        ensure(outcome == ApplyOutcome::Created, &step, || format!("{outcome:?}, want Created"))?;
    }
    for kind in objects::APPLY_ORDER {
        let o = build(&theirs, kind, &token);
        let step = format!("foreign {}", o.object);
        let before = read(c, &o, &step).await?;
        let outcome = c.apply_owned(&o, &objects::owner(&theirs)).await.map_err(cluster(&step))?;
        ensure(outcome == ApplyOutcome::Foreign { owner: None }, &step, || {
            format!("apply: {outcome:?}, want Foreign without owner")
        })?;
        let outcome =
            c.delete_owned(&o.object, &objects::owner(&theirs)).await.map_err(cluster(&step))?;
        ensure(outcome == DeleteOutcome::Foreign { owner: None }, &step, || {
            format!("delete: {outcome:?}, want Foreign without owner")
        })?;
        let after = read(c, &o, &step).await?;
        ensure(
            settled(&after) == settled(&before) && !after.labels.contains_key(LABEL_SUBSTRATE_POOL),
            &step,
            || format!("the tenant's object was changed: labels {:?}", after.labels),
        )?;
    }
    // Our Namespace, seen by another pool: another pool's, never taken over.
    let ns = build(&ours, ObjectKind::Namespace, &token);
    let step = "another pool's Namespace";
    let outcome = c.apply_owned(&ns, &objects::owner(&theirs)).await.map_err(cluster(step))?;
    let want = ApplyOutcome::Foreign { owner: Some(ours.as_str().to_owned()) };
    ensure(outcome == want, step, || format!("{outcome:?}, want {want:?}"))?;
    ctx.say("ok   foreign objects: a tenant's Namespace, ServiceAccount, Secret, DaemonSet of those names refused, not changed, not deleted");

    for kind in objects::APPLY_ORDER.iter().rev() {
        delete_until_gone(c, &d, &build(&ours, *kind, &token), &owner).await?;
    }
    for kind in objects::APPLY_ORDER.iter().rev() {
        delete_until_gone(c, &d, &tenants(build(&theirs, *kind, &token)), &tenant_owner()).await?;
    }
    let line = format!("ok   cluster objects: ours and the tenant's deleted ({})", secs(started));
    ctx.say(&line);
    Ok(())
}

/// Deletes the cluster and waits until the provider answers 404.
async fn delete_cluster(ctx: &mut Ctx<'_>, made: &ProviderCluster) -> Result<()> {
    let started = Instant::now();
    let step = "cluster delete";
    let p = ctx.provider.clone();
    let k = p.kubernetes();
    let d = ctx.deadlines.clone();
    crate::sweep::delete_cluster(k, &d, &made.id, step).await?;
    until_gone(step, &d, || k.get_cluster(&made.id), crate::sweep::cluster_left).await?;
    ctx.ledger.gone(&made.id);
    let line = format!("ok   cluster {}: deleted ({})", made.name, secs(started));
    ctx.say(&line);
    Ok(())
}
