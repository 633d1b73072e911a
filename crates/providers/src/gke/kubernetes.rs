//! GKE through the [`KubernetesProvider`] port: clusters (standard and autopilot), node
//! pools by name, upgrades, server config, and credentials for a cluster's own API.
//!
//! Invariant: GKE runs one operation at a time per cluster, so a port call that needs
//! several (a node pool's labels, then its autoscaling, then its size) makes the first
//! that is still needed and answers with the state after it; the next call finds that
//! change done and makes the next, and one asked while an operation runs is `Busy` —
//! every call converges from what GKE has, and none waits on an operation, so a crash
//! resumes by reading. A create is by a name the caller recorded before; the cluster is
//! then found by that name. Node-pool calls on an autopilot cluster are refused here,
//! before GKE is asked.

use async_trait::async_trait;
use bc_domain::model::{ClusterMode, ClusterNodes, SecretString};
use bc_domain::ports::{
    AssociatedResources, ClusterCredentials, CreateClusterRequest, KubernetesProvider,
    KubernetesVersion, NamedResource, NodePoolRequest, ProviderBacked, ProviderCluster,
    ProviderNode, ProviderNodePool, ProviderNodeState, ProviderOptions, ProviderResult,
    UpdateClusterRequest,
};
use bc_domain::{ProviderError, Timestamp};
use reqwest::Method;
use serde_json::{Value, json};

use super::Gke;
use super::auth::AccessToken;
use super::wire::{
    self, Cluster, ClusterList, NodePool, Operation, PoolNodes, ServerConfig, is_zone, labels_of,
};
use crate::digitalocean::seg;
use bc_domain::ports::{ClusterApi, ClusterNode};
use std::collections::BTreeMap;

/// The refusal of `delete_node`: GKE's API cannot delete or replace one node.
pub const NO_SINGLE_NODE: &str = "GKE cannot delete or replace one node: its API has no call for \
     one node (a node pool shrinks by setSize, and GKE picks which nodes go); resize the node \
     pool instead";

/// The message of the local refusal of node-pool calls on autopilot clusters (GKE's own
/// words, research/gke.md §5).
pub const AUTOPILOT_POOLS: &str = "Autopilot node pools cannot be accessed or modified.";

/// What a read does with a standard cluster that serves but whose API does not answer,
/// so its pools' node counts cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Silent {
    /// Fail, retried: a GET, whose caller decides from this cluster's counts (resize,
    /// `ready`), and only this cluster's object waits for its API.
    Fail,
    /// Answer the cluster with its Nodes unread (`ProviderCluster::nodes_unread`): a
    /// listing, which every object of the account is observed by — one silent API must
    /// not stop them all.
    Mark,
}

/// An autopilot cluster's node count: every Node its API lists, and the ready ones.
fn counted(nodes: &[ClusterNode]) -> ClusterNodes {
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    ClusterNodes {
        listed: count(nodes.len()),
        ready: count(nodes.iter().filter(|n| n.ready).count()),
    }
}

impl Gke {
    fn located(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, (String, String)>> {
        self.located.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn remember(&self, c: &Cluster) {
        if !c.id.is_empty() {
            self.located().insert(c.id.clone(), (c.location.clone(), c.name.clone()));
        }
    }

    fn location_path(&self, location: &str) -> String {
        format!("/v1/projects/{}/locations/{}", seg(&self.project), seg(location))
    }

    fn cluster_path(&self, location: &str, name: &str) -> String {
        format!("{}/clusters/{}", self.location_path(location), seg(name))
    }

    pub(super) async fn list_wire(&self) -> ProviderResult<Vec<Cluster>> {
        let path = format!("{}/clusters", self.location_path("-"));
        let list: ClusterList = self.transport.send(Method::GET, &path, None).await?;
        if !list.missing_zones.is_empty() {
            // A partial list must never look like deleted clusters.
            return Err(ProviderError::Transient {
                message: format!(
                    "GET {path}: GKE could not read zones {}; refusing a partial list",
                    list.missing_zones.join(", ")
                ),
            });
        }
        for c in &list.clusters {
            self.remember(c);
        }
        Ok(list.clusters)
    }

    /// Where cluster `id` is: remembered, else found by listing every location.
    async fn locate(&self, id: &str) -> ProviderResult<(String, String)> {
        if let Some(l) = self.located().get(id).cloned() {
            return Ok(l);
        }
        self.list_wire().await?;
        self.located().get(id).cloned().ok_or(ProviderError::NotFound)
    }

    /// Cluster `id` as GKE has it; `NotFound` when its name now holds another cluster.
    async fn cluster(&self, id: &str) -> ProviderResult<(Cluster, String)> {
        let (location, name) = self.locate(id).await?;
        let path = self.cluster_path(&location, &name);
        let c: Cluster = self.transport.send(Method::GET, &path, None).await?;
        if c.id != id {
            self.located().remove(id);
            return Err(ProviderError::NotFound);
        }
        Ok((c, path))
    }

    /// A standard cluster's wire form and path; autopilot is refused locally.
    async fn standard(&self, id: &str) -> ProviderResult<(Cluster, String)> {
        let (c, path) = self.cluster(id).await?;
        if c.autopilot.enabled {
            return Err(ProviderError::Refused { message: AUTOPILOT_POOLS.into() });
        }
        Ok((c, path))
    }

    async fn pool(
        &self,
        cluster_id: &str,
        name: &str,
    ) -> ProviderResult<(Cluster, NodePool, String)> {
        let (c, path) = self.standard(cluster_id).await?;
        let pool =
            c.node_pools.iter().find(|p| p.name == name).cloned().ok_or(ProviderError::NotFound)?;
        Ok((c, pool, format!("{path}/nodePools/{}", seg(name))))
    }

    async fn op(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> ProviderResult<Operation> {
        self.transport.send(method, path, body).await
    }

    /// The Nodes of `c` matching `label_selector` (every Node when empty), read through
    /// the cluster's own API. `Ok(None)` when there is no API to ask: none served yet,
    /// or a cluster not serving (being made or deleted) whose API does not answer — no
    /// resize can have happened before it served, so its pools' initial counts are what
    /// is being made. `Err(why)` when a serving cluster's API does not answer: what it
    /// holds is then unknown, never a number.
    async fn read_nodes(
        &self,
        c: &Cluster,
        label_selector: &str,
    ) -> Result<Option<Vec<ClusterNode>>, String> {
        if c.endpoint.is_empty() {
            return Ok(None);
        }
        let read = async {
            let creds = self.kubeconfig(c).await.map_err(|e| e.to_string())?;
            let client =
                self.clusters.connect(&creds.kubeconfig).await.map_err(|e| e.to_string())?;
            client.list_nodes(label_selector).await.map_err(|e| e.to_string())
        };
        match read.await {
            Ok(nodes) => Ok(Some(nodes)),
            Err(_) if !wire::serves(&c.status) => Ok(None),
            Err(e) => {
                tracing::debug!(cluster = %c.name, error = %e, "reading the cluster's nodes failed");
                Err(format!(
                    "the nodes of cluster {} could not be counted through its API ({e}); GKE reports no current node-pool size",
                    c.name
                ))
            }
        }
    }

    /// The Nodes of each node pool of a standard cluster, counted from the cluster's own
    /// API by GKE's `cloud.google.com/gke-nodepool` label: GKE's API reports no current
    /// size of a pool (NodePool has only `initialNodeCount`; Cluster's
    /// `currentNodeCount` is deprecated, cluster-wide, and says "Call Kubernetes API
    /// directly"; research/gke.md §2, §6). `Ok(None)` and `Err(why)` as
    /// [`Self::read_nodes`] says.
    async fn node_counts(&self, c: &Cluster) -> Result<Option<PoolNodes>, String> {
        let Some(nodes) = self.read_nodes(c, NODE_POOL_LABEL).await? else { return Ok(None) };
        let mut counts = PoolNodes::new();
        for n in nodes {
            let Some(pool) = n.labels.get(NODE_POOL_LABEL) else { continue };
            // A Node is the pool's node by its `gce://` provider id (its instance), known
            // once the kubelet registered; ready or still coming up.
            let state =
                if n.ready { ProviderNodeState::Running } else { ProviderNodeState::Provisioning };
            counts.entry(pool.clone()).or_default().push(ProviderNode {
                id: n.provider_id.clone().unwrap_or_else(|| n.name.clone()),
                name: n.name,
                state,
                droplet_id: None,
            });
        }
        Ok(Some(counts))
    }

    /// [`Self::node_counts`] for a read whose caller acts on one cluster's counts (a GET
    /// of the cluster or of its pools, a pool's update): a count that cannot be read is
    /// a retried error of that one call.
    async fn known_counts(&self, c: &Cluster) -> ProviderResult<Option<PoolNodes>> {
        self.node_counts(c)
            .await
            .map_err(|why| ProviderError::Transient { message: format!("{why}; retry later") })
    }

    /// The port's cluster, its pools' counts read from its Nodes (an autopilot
    /// cluster's, all its Nodes). A standard cluster whose API does not answer fails the
    /// read with [`Silent::Fail`] (a GET), and is answered with its Nodes unread
    /// (`nodes_unread`; its pools' `count` GKE's initial one, `nodes` empty) with
    /// [`Silent::Mark`] (a listing). An autopilot cluster's are marked either way: its
    /// node count decides no call, and its readers keep the count they have.
    async fn port_cluster(&self, c: Cluster, silent: Silent) -> ProviderResult<ProviderCluster> {
        let working = c.status == "RECONCILING";
        let (location, name) = (c.location.clone(), c.name.clone());
        let mut pc = if c.autopilot.enabled {
            // Every Node its API lists: GKE makes and removes them as workloads need
            // them, in pools no call may read (research/gke.md §5); read from the cluster
            // rather than the deprecated `currentNodeCount`, which GKE's API says to
            // replace by the Kubernetes API.
            let read = self.read_nodes(&c, "").await;
            let mut pc = c.into_port(None);
            match read {
                Ok(nodes) => pc.nodes = nodes.map(|n| counted(&n)),
                Err(why) => pc.nodes_unread = Some(why),
            }
            pc
        } else {
            match silent {
                Silent::Fail => {
                    let counts = self.known_counts(&c).await?;
                    c.into_port(counts.as_ref())
                }
                Silent::Mark => match self.node_counts(&c).await {
                    Ok(counts) => c.into_port(counts.as_ref()),
                    Err(why) => {
                        let mut pc = c.into_port(None);
                        pc.nodes_unread = Some(why);
                        pc
                    }
                },
            }
        };
        if working && pc.message.is_none() {
            pc.message = self.operation_at_work(&location, &name).await;
        }
        Ok(pc)
    }

    /// What GKE's operation in flight on cluster `name` does, in words: a `RECONCILING`
    /// cluster says only that some work is under way, its operation says which.
    async fn operation_at_work(&self, location: &str, name: &str) -> Option<String> {
        let path = format!("{}/operations", self.location_path(location));
        let list: wire::OperationList = self.transport.send(Method::GET, &path, None).await.ok()?;
        let op = list.operations.iter().find(|o| o.in_flight() && o.targets(name))?;
        Some(format!("GKE is {}", op.describe()))
    }

    /// The port's pool, its count read from its Nodes.
    async fn port_pool(&self, c: &Cluster, p: NodePool) -> ProviderResult<ProviderNodePool> {
        let counts = self.known_counts(c).await?;
        Ok(p.into_port(&c.location, &c.locations, counts.as_ref()))
    }

    /// A kubeconfig for `c`'s API: its endpoint, GKE's CA and a fresh access token.
    async fn kubeconfig(&self, c: &Cluster) -> ProviderResult<ClusterCredentials> {
        Ok(self.kubeconfig_and_token(c).await?.0)
    }

    /// [`Self::kubeconfig`], and the access token it carries.
    async fn kubeconfig_and_token(
        &self,
        c: &Cluster,
    ) -> ProviderResult<(ClusterCredentials, AccessToken)> {
        if c.endpoint.is_empty() || c.master_auth.cluster_ca_certificate.is_empty() {
            return Err(ProviderError::Transient {
                message: format!(
                    "the API of cluster {} is not served yet (the cluster is {}); retry later",
                    c.id, c.status
                ),
            });
        }
        let token = self.transport.token().await?;
        let server = if c.endpoint.contains("://") {
            c.endpoint.clone()
        } else {
            format!("https://{}", c.endpoint)
        };
        // The endpoint, GKE's CA (already base64 of the PEM, as
        // `certificate-authority-data` wants it) and an access token — no exec plugin.
        // JSON is YAML.
        let kubeconfig = json!({
            "apiVersion": "v1", "kind": "Config", "current-context": c.name,
            "clusters": [{"name": c.name, "cluster": {"server": server,
                "certificate-authority-data": c.master_auth.cluster_ca_certificate}}],
            "users": [{"name": "better-compute", "user": {"token": token.token.expose()}}],
            "contexts": [{"name": c.name, "context": {"cluster": c.name, "user": "better-compute"}}],
        });
        let creds = ClusterCredentials {
            kubeconfig: SecretString::new(kubeconfig.to_string()),
            expires_at: Some(token.expires_at),
        };
        Ok((creds, token))
    }
}

/// Whether two label sets are the same, an empty value counting as absent: proto3 JSON
/// may leave a zero value out, and a change that only adds or drops one would be asked
/// for again on every call.
fn same_labels(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> bool {
    let set = |m: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        m.iter().filter(|(_, v)| !v.is_empty()).map(|(k, v)| (k.clone(), v.clone())).collect()
    };
    set(a) == set(b)
}

/// The release channel every cluster this adapter makes is enrolled in: its versions are
/// the ones offered for new clusters and upgrades (GKE refuses others for the channel).
pub const RELEASE_CHANNEL: &str = "REGULAR";
/// The CSI driver of GKE's persistent disks.
pub const PD_CSI_DRIVER: &str = "pd.csi.storage.gke.io";

/// What deleting a GKE cluster in `location` of `project` leaves in Compute Engine, named
/// as GCE names it, from what the cluster records (`backed`):
/// - per Service of type LoadBalancer, its forwarding rule `a<uid without dashes>` cut
///   to 32 characters (`cloudprovider.DefaultLoadBalancerName`, which GCE's service
///   controller names its load balancer by; research/gke.md §9), in the cluster's
///   region, named `<namespace>/<name>` as the rule's description names the Service,
///   with the addresses it was given;
/// - per PersistentVolume on a persistent disk, the disk: a `pd.csi.storage.gke.io`
///   volume's handle is the disk's own path (`projects/<p>/zones/<z>/disks/<name>`), an
///   in-tree `gcePersistentDisk` names the disk in its zone; named by the disk and the
///   claim it served. Volumes of other drivers (Filestore, local) are not disks and are
///   left out.
pub fn leftovers(project: &str, location: &str, backed: &ProviderBacked) -> AssociatedResources {
    let region = if is_zone(location) {
        location.rsplit_once('-').map_or(location, |(r, _)| r)
    } else {
        location
    };
    let retained_load_balancers = backed
        .load_balancer_services
        .iter()
        .map(|s| {
            let rule: String = format!("a{}", s.uid.replace('-', "")).chars().take(32).collect();
            let mut name = format!("{}/{}", s.namespace, s.name);
            if !s.ingress.is_empty() {
                name = format!("{name} ({})", s.ingress.join(", "));
            }
            NamedResource {
                id: format!("projects/{project}/regions/{region}/forwardingRules/{rule}"),
                name,
            }
        })
        .collect();
    let volumes = backed
        .persistent_volumes
        .iter()
        .filter_map(|v| {
            let id = match (&v.csi_driver, &v.volume_handle, &v.gce_pd_name) {
                (Some(driver), Some(handle), _) if driver == PD_CSI_DRIVER => handle.clone(),
                (_, _, Some(pd)) => match &v.zone {
                    Some(zone) => format!("projects/{project}/zones/{zone}/disks/{pd}"),
                    None => pd.clone(),
                },
                _ => return None,
            };
            let disk = id.rsplit('/').next().unwrap_or(&id).to_owned();
            let name = match &v.claim {
                Some(claim) => format!("{disk} (claim {claim})"),
                None => disk,
            };
            Some(NamedResource { id, name })
        })
        .collect();
    AssociatedResources {
        load_balancers: Vec::new(),
        retained_load_balancers,
        volumes,
        volume_snapshots: Vec::new(),
    }
}

/// GKE's label naming a Node's pool.
pub const NODE_POOL_LABEL: &str = "cloud.google.com/gke-nodepool";

/// Whether version `a` (`1.35.7-gke.1150000`) is newer than `b`, by their numbers.
fn newer(a: &str, b: &str) -> bool {
    let nums = |v: &str| -> Vec<u64> {
        v.split(['.', '-']).filter_map(|p| p.trim_start_matches("gke").parse().ok()).collect()
    };
    nums(a) > nums(b)
}

fn version(slug: &str) -> KubernetesVersion {
    KubernetesVersion {
        slug: slug.to_owned(),
        kubernetes_version: slug.split('-').next().unwrap_or(slug).to_owned(),
    }
}

#[async_trait]
impl KubernetesProvider for Gke {
    async fn list_clusters(&self) -> ProviderResult<Vec<ProviderCluster>> {
        // Each cluster's pools counted from its Nodes, as a GET does: a listing that
        // reported GKE's `initialNodeCount` instead read every resized pool as its first
        // size, and a steady substrate read from it flapped to `updating`.
        // One cluster whose API does not answer is listed with its Nodes unread rather
        // than failing the listing, which every object of the account is observed by.
        let mut out = Vec::new();
        for c in self.list_wire().await? {
            out.push(self.port_cluster(c, Silent::Mark).await?);
        }
        Ok(out)
    }

    async fn get_cluster(&self, id: &str) -> ProviderResult<ProviderCluster> {
        let (c, _) = self.cluster(id).await?;
        self.port_cluster(c, Silent::Fail).await
    }

    async fn create_cluster(&self, req: &CreateClusterRequest) -> ProviderResult<ProviderCluster> {
        let location = req.region.as_str();
        let mut cluster = json!({"name": req.name, "releaseChannel": {"channel": RELEASE_CHANNEL}});
        if !req.version.is_empty() {
            cluster["initialClusterVersion"] = json!(req.version);
        }
        if !req.tags.is_empty() {
            cluster["resourceLabels"] = json!(labels_of(&req.tags));
        }
        match req.mode {
            ClusterMode::Autopilot => {
                if is_zone(location) {
                    return Err(ProviderError::Refused {
                        message: format!(
                            "autopilot clusters are regional: {location} is a zone, use its region"
                        ),
                    });
                }
                cluster["autopilot"] = json!({"enabled": true});
            }
            ClusterMode::Standard => {
                // Before the cluster exists its zones are unknown: a zonal cluster has one,
                // a regional one GKE's default three.
                let zones = if is_zone(location) { 1 } else { 3 };
                let pools: Vec<Value> = req
                    .node_pools
                    .iter()
                    .map(|p| wire::node_pool_body(p, zones))
                    .collect::<ProviderResult<_>>()?;
                cluster["nodePools"] = Value::Array(pools);
            }
        }
        let path = format!("{}/clusters", self.location_path(location));
        let _: Operation = self.op(Method::POST, &path, Some(&json!({"cluster": cluster}))).await?;
        // The cluster exists (PROVISIONING) as soon as the operation starts: read it by
        // the name given, which is how a retry after a crash finds it too.
        let c: Cluster =
            self.transport.send(Method::GET, &self.cluster_path(location, &req.name), None).await?;
        self.remember(&c);
        Ok(c.into_port(None))
    }

    async fn update_cluster(
        &self,
        id: &str,
        req: &UpdateClusterRequest,
    ) -> ProviderResult<ProviderCluster> {
        let (c, path) = self.cluster(id).await?;
        if req.name != c.name {
            return Err(ProviderError::Refused {
                message: format!("GKE cluster names cannot change ({} to {})", c.name, req.name),
            });
        }
        if req.high_availability == Some(true) && is_zone(&c.location) {
            return Err(ProviderError::Refused {
                message: format!(
                    "a zonal GKE cluster ({}) cannot become regional: create a regional cluster",
                    c.location
                ),
            });
        }
        // Labels replace whole: GKE's own (`goog-…`) are kept as they are.
        let mut labels: std::collections::BTreeMap<String, String> = c
            .resource_labels
            .iter()
            .filter(|(k, _)| k.starts_with("goog-"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        labels.extend(labels_of(&req.tags));
        if !same_labels(&labels, &c.resource_labels) {
            let body = json!({"resourceLabels": labels, "labelFingerprint": c.label_fingerprint});
            let _: Operation =
                self.op(Method::POST, &format!("{path}:setResourceLabels"), Some(&body)).await?;
            return self.get_cluster(id).await;
        }
        // Upgrade settings and maintenance windows follow the release channel.
        Ok(c.into_port(None))
    }

    async fn delete_cluster(&self, id: &str) -> ProviderResult<()> {
        let (_, path) = self.cluster(id).await?;
        let _: Operation = self.op(Method::DELETE, &path, None).await?;
        Ok(())
    }

    async fn associated_resources(&self, id: &str) -> ProviderResult<AssociatedResources> {
        // GKE has no call listing what a cluster made in Compute Engine (research/gke.md
        // §11), and deleting the cluster leaves what its controllers made after it was
        // created: each Service of type LoadBalancer's forwarding rule (with its target
        // pool and firewall rules) and each PersistentVolume's persistent disk. So they
        // are read from the cluster's own API before it goes — what the cluster records
        // of them is what GCE holds — and named as GCE names them (see `leftovers`).
        // None of them is ours to delete: a selective delete names no load balancer.
        let (c, _) = self.cluster(id).await?;
        if c.endpoint.is_empty() || c.status != "RUNNING" {
            // Never served (nothing was made through it), or not reachable now: a
            // cluster that cannot come back must still be deletable, so what it made
            // cannot be named.
            return Ok(AssociatedResources::default());
        }
        let creds = self.kubeconfig(&c).await?;
        let read = async {
            let client = self.clusters.connect(&creds.kubeconfig).await?;
            client.list_provider_backed().await
        };
        let backed = read.await.map_err(|e| match e {
            bc_domain::ports::ClusterError::Provider(p) => p,
            // A running cluster whose API does not answer now may answer later: the
            // teardown waits rather than forget what the cluster made.
            other => ProviderError::Transient {
                message: format!(
                    "reading cluster {}'s Services and PersistentVolumes: {other}",
                    c.name
                ),
            },
        })?;
        Ok(leftovers(&self.project, &c.location, &backed))
    }

    async fn delete_cluster_selective(
        &self,
        id: &str,
        load_balancer_ids: &[String],
    ) -> ProviderResult<()> {
        if !load_balancer_ids.is_empty() {
            return Err(ProviderError::Refused { message: "gke offers no load balancers".into() });
        }
        self.delete_cluster(id).await
    }

    async fn list_node_pools(&self, cluster_id: &str) -> ProviderResult<Vec<ProviderNodePool>> {
        let (c, _) = self.standard(cluster_id).await?;
        let pools = c.node_pools.clone();
        let counts = self.known_counts(&c).await?;
        Ok(pools
            .into_iter()
            .map(|p| p.into_port(&c.location, &c.locations, counts.as_ref()))
            .collect())
    }

    async fn get_node_pool(
        &self,
        cluster_id: &str,
        node_pool_id: &str,
    ) -> ProviderResult<ProviderNodePool> {
        let (c, p, _) = self.pool(cluster_id, node_pool_id).await?;
        self.port_pool(&c, p).await
    }

    async fn create_node_pool(
        &self,
        cluster_id: &str,
        req: &NodePoolRequest,
    ) -> ProviderResult<ProviderNodePool> {
        let (c, path) = self.standard(cluster_id).await?;
        let mut pool = wire::node_pool_body(req, 1)?;
        // One zone, so the per-zone count is the pool's total (a zonal cluster's pools
        // are there anyway).
        if let Some(zone) = c.locations.first().filter(|_| !is_zone(&c.location)) {
            pool["locations"] = json!([zone]);
        }
        let _: Operation = self
            .op(Method::POST, &format!("{path}/nodePools"), Some(&json!({"nodePool": pool})))
            .await?;
        let (c, p, _) = self.pool(cluster_id, &req.name).await?;
        self.port_pool(&c, p).await
    }

    async fn update_node_pool(
        &self,
        cluster_id: &str,
        node_pool_id: &str,
        req: &NodePoolRequest,
    ) -> ProviderResult<ProviderNodePool> {
        let (c, p, path) = self.pool(cluster_id, node_pool_id).await?;
        let have = self.port_pool(&c, p.clone()).await?;
        let zones = wire::zones(&p, &c.location, &c.locations);
        // 1. Labels, taints and tags, in place (they replace whole).
        let wanted_labels = labels_of(&req.tags);
        let have_labels: std::collections::BTreeMap<_, _> = p
            .config
            .resource_labels
            .iter()
            .filter(|(k, _)| !k.starts_with("goog-"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !same_labels(&have.labels, &req.labels)
            || have.taints != req.taints
            || !same_labels(&have_labels, &wanted_labels)
        {
            let mut resource = p.config.resource_labels.clone();
            resource.retain(|k, _| k.starts_with("goog-"));
            resource.extend(wanted_labels);
            let body = json!({
                "labels": {"labels": req.labels},
                "taints": {"taints": wire::taints_body(&req.taints)},
                "resourceLabels": {"labels": resource},
            });
            let _: Operation = self.op(Method::PUT, &path, Some(&body)).await?;
            return self.get_node_pool(cluster_id, node_pool_id).await;
        }
        // 2. Autoscaling (pool-wide bounds).
        let bounds = have.auto_scale.then_some((have.min_nodes, have.max_nodes));
        if bounds != req.auto_scale {
            let autoscaling = match req.auto_scale {
                Some((min, max)) => json!({"enabled": true, "totalMinNodeCount": min,
                    "totalMaxNodeCount": max, "locationPolicy": "BALANCED"}),
                None => json!({}),
            };
            let body = json!({"autoscaling": autoscaling});
            let _: Operation =
                self.op(Method::POST, &format!("{path}:setAutoscaling"), Some(&body)).await?;
            return self.get_node_pool(cluster_id, node_pool_id).await;
        }
        // 3. The size of a fixed pool (never of an autoscaled one: its count is GKE's).
        if let (None, Some(count)) = (req.auto_scale, req.count)
            && count != have.count
        {
            let body = json!({"nodeCount": wire::per_zone(count, zones, "count")?});
            let _: Operation =
                self.op(Method::POST, &format!("{path}:setSize"), Some(&body)).await?;
            return self.get_node_pool(cluster_id, node_pool_id).await;
        }
        Ok(have)
    }

    async fn delete_node_pool(&self, cluster_id: &str, node_pool_id: &str) -> ProviderResult<()> {
        let (_, _, path) = self.pool(cluster_id, node_pool_id).await?;
        let _: Operation = self.op(Method::DELETE, &path, None).await?;
        Ok(())
    }

    async fn delete_node(
        &self,
        _cluster_id: &str,
        _node_pool_id: &str,
        _node_id: &str,
        _skip_drain: bool,
        _replace: bool,
    ) -> ProviderResult<()> {
        // GKE's v1 API (google/container/v1/cluster_service.proto, service
        // ClusterManager) has no call for one node: a pool shrinks by setSize, and GKE
        // picks which nodes go; the instances belong to Compute Engine's managed instance
        // groups. Refused whatever the ids, without asking GKE.
        Err(ProviderError::Refused { message: NO_SINGLE_NODE.into() })
    }

    async fn available_upgrades(&self, cluster_id: &str) -> ProviderResult<Vec<KubernetesVersion>> {
        let (c, _) = self.cluster(cluster_id).await?;
        let path = format!("{}/serverConfig", self.location_path(&c.location));
        let config: ServerConfig = self.transport.send(Method::GET, &path, None).await?;
        // A cluster enrolled in a release channel moves only within it
        // (ServerConfig.channels[].validVersions); the adapter enrolls every cluster it
        // makes, and an adopted one may be in any channel or none.
        Ok(config
            .master_versions_for(&c.release_channel.channel)
            .iter()
            .filter(|v| newer(v, &c.current_master_version))
            .map(|v| version(v))
            .collect())
    }

    async fn upgrade_cluster(&self, cluster_id: &str, version: &str) -> ProviderResult<()> {
        // The control plane only (UPGRADE_MASTER): each node pool has its own version and
        // follows by `upgrade_node_pool` (the offer says `OneByOne`).
        let (_, path) = self.cluster(cluster_id).await?;
        let body = json!({"masterVersion": version});
        let _: Operation =
            self.op(Method::POST, &format!("{path}:updateMaster"), Some(&body)).await?;
        Ok(())
    }

    async fn upgrade_node_pool(
        &self,
        cluster_id: &str,
        node_pool_id: &str,
        version: &str,
    ) -> ProviderResult<()> {
        // nodePools.update with `nodeVersion` (UpdateNodePoolRequest.node_version): an
        // UPGRADE_NODES operation; GKE refuses a version above the control plane's, and
        // one asked while another operation runs on the cluster is `Busy`.
        let (_, _, path) = self.pool(cluster_id, node_pool_id).await?;
        let body = json!({"nodeVersion": version});
        let _: Operation = self.op(Method::PUT, &path, Some(&body)).await?;
        Ok(())
    }

    async fn options(&self) -> ProviderResult<ProviderOptions> {
        Err(ProviderError::Refused {
            message: "GKE's versions are per location: ask for a location's options".into(),
        })
    }

    async fn options_in(&self, region: &str) -> ProviderResult<ProviderOptions> {
        let path = format!("{}/serverConfig", self.location_path(region));
        let config: ServerConfig = self.transport.send(Method::GET, &path, None).await?;
        // What a cluster made here may run: the channel it is enrolled in offers these.
        let mut versions = config.master_versions_for(RELEASE_CHANNEL).to_vec();
        versions.sort_by(|a, b| {
            if newer(a, b) {
                std::cmp::Ordering::Less
            } else if newer(b, a) {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        });
        Ok(ProviderOptions {
            // The location answered for, so it is offered.
            regions: vec![region.to_owned()],
            versions: versions.iter().map(|v| version(v)).collect(),
            // Machine types are Compute Engine's list; GKE's API has none.
            sizes: Vec::new(),
        })
    }

    async fn credentials(&self, cluster_id: &str) -> ProviderResult<ClusterCredentials> {
        let (c, _) = self.cluster(cluster_id).await?;
        let (creds, token) = self.kubeconfig_and_token(&c).await?;
        // Which token this cluster's session holds: its refusal forgets that one only.
        self.transport.hand_token(cluster_id, &token);
        Ok(creds)
    }

    fn credentials_due(&self, expires_at: Timestamp) -> bool {
        // The kubeconfig's token is the account's cached one: due when that is.
        self.transport.token_due(expires_at)
    }

    fn invalidate_credentials(&self, cluster_id: &str) {
        // The cluster refused the token its credentials carry: if the account's token is
        // still that one the next call mints another; if another session already
        // replaced it, that newer one serves (one mint per refused token, not per
        // session).
        self.transport.invalidate_token_of(cluster_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_by_their_numbers() {
        assert!(newer("1.36.3-gke.1640000", "1.35.7-gke.1150000"));
        assert!(newer("1.35.7-gke.1150001", "1.35.7-gke.1150000"));
        assert!(newer("1.35.10-gke.1", "1.35.9-gke.1"));
        assert!(!newer("1.35.7-gke.1150000", "1.35.7-gke.1150000"));
        assert_eq!(version("1.35.7-gke.1150000").kubernetes_version, "1.35.7");
    }

    #[test]
    fn leftovers_are_named_as_gce_names_them() {
        use bc_domain::ports::{LoadBalancerService, PersistentVolumeInfo};
        let pv = |name: &str| PersistentVolumeInfo { name: name.into(), ..Default::default() };
        let backed = ProviderBacked {
            load_balancer_services: vec![LoadBalancerService {
                namespace: "shop".into(),
                name: "web".into(),
                uid: "0f3c6a2e-9b1d-4c7e-8a5f-1d2e3f4a5b6c".into(),
                ingress: vec!["34.118.1.2".into()],
            }],
            persistent_volumes: vec![
                PersistentVolumeInfo {
                    csi_driver: Some(PD_CSI_DRIVER.into()),
                    volume_handle: Some("projects/p/zones/us-central1-b/disks/pvc-1".into()),
                    claim: Some("shop/data".into()),
                    ..pv("pvc-1")
                },
                PersistentVolumeInfo {
                    gce_pd_name: Some("old-disk".into()),
                    zone: Some("us-central1-c".into()),
                    ..pv("legacy")
                },
                // Not a persistent disk: Filestore's driver.
                PersistentVolumeInfo {
                    csi_driver: Some("filestore.csi.storage.gke.io".into()),
                    volume_handle: Some("modeInstance/us-central1/fs/vol1".into()),
                    ..pv("shared")
                },
            ],
        };
        let a = leftovers("p", "us-central1-a", &backed);
        assert!(a.load_balancers.is_empty(), "none is deleted with the cluster");
        assert_eq!(
            a.retained_load_balancers,
            [NamedResource {
                // "a" + the uid without dashes, cut to 32 characters.
                id: "projects/p/regions/us-central1/forwardingRules/a0f3c6a2e9b1d4c7e8a5f1d2e3f4a5b6"
                    .into(),
                name: "shop/web (34.118.1.2)".into(),
            }]
        );
        assert_eq!(
            a.volumes,
            [
                NamedResource {
                    id: "projects/p/zones/us-central1-b/disks/pvc-1".into(),
                    name: "pvc-1 (claim shop/data)".into(),
                },
                NamedResource {
                    id: "projects/p/zones/us-central1-c/disks/old-disk".into(),
                    name: "old-disk".into(),
                },
            ]
        );
        // A regional cluster's forwarding rules are in its region.
        let a = leftovers("p", "europe-west1", &backed);
        assert!(a.retained_load_balancers[0].id.starts_with("projects/p/regions/europe-west1/"));
    }
}
