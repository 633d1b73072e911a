//! The provider a parameterised scenario runs on, and what a test needs to know of it to
//! say the same thing on each: a region, machine sizes, two versions in upgrade order, a
//! version it does not offer, and the routes its calls are counted and faulted on.
//!
//! Invariant: this is the one place above the adapters where test code names a
//! provider; a scenario's body asks [`OnProvider`] and never matches on a provider's name.

use bc_domain::model::ProviderKind;

use crate::gke_api::routes as gke;
use crate::model::gke::catalog;
use crate::model::routes as digitalocean;

/// A provider call a scenario counts or faults, by what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// Create a cluster.
    CreateCluster,
    /// Delete a cluster.
    DeleteCluster,
    /// Add a node pool to a cluster.
    CreateNodePool,
    /// Change a node pool (resize, autoscale bounds, labels).
    UpdateNodePool,
    /// Delete a node pool.
    DeleteNodePool,
    /// Ask which versions a cluster may be upgraded to.
    Upgrades,
    /// Upgrade a cluster's control plane.
    Upgrade,
    /// The call that upgrades a node pool's nodes: on GKE each pool's own
    /// (`nodePools.update` with `nodeVersion`); on DigitalOcean the cluster's upgrade,
    /// which takes the nodes with it.
    UpgradeNodePool,
}

/// The simulated provider a scenario runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnProvider {
    /// The DigitalOcean face.
    DigitalOcean,
    /// The GKE face.
    Gke,
}

impl OnProvider {
    /// Its kind.
    pub fn kind(self) -> ProviderKind {
        match self {
            OnProvider::DigitalOcean => ProviderKind::Digitalocean,
            OnProvider::Gke => ProviderKind::Gke,
        }
    }

    /// Where a test's clusters go (on GKE a zone: a zonal cluster's counts are its
    /// pools' sizes).
    pub fn region(self) -> &'static str {
        match self {
            OnProvider::DigitalOcean => "nyc1",
            OnProvider::Gke => "us-central1-a",
        }
    }

    /// A region of several zones (GKE: a regional cluster; DigitalOcean's regions are one
    /// place).
    pub fn multi_zone_region(self) -> &'static str {
        match self {
            OnProvider::DigitalOcean => "nyc1",
            OnProvider::Gke => "us-central1",
        }
    }

    /// The node size a test's pools use.
    pub fn node_size(self) -> &'static str {
        match self {
            OnProvider::DigitalOcean => super::NODE_SIZE,
            OnProvider::Gke => "e2-standard-4",
        }
    }

    /// Another size it offers.
    pub fn other_size(self) -> &'static str {
        match self {
            OnProvider::DigitalOcean => "c-4",
            OnProvider::Gke => "e2-standard-8",
        }
    }

    /// A size it does not offer (a create with it is refused).
    pub fn unknown_size(self) -> &'static str {
        match self {
            OnProvider::DigitalOcean => "s-64vcpu-1tb",
            OnProvider::Gke => "m3-megamem-128",
        }
    }

    /// Two versions it offers, older first, the newer one an upgrade of the older.
    pub fn versions(self) -> (&'static str, &'static str) {
        match self {
            OnProvider::DigitalOcean => ("1.32.6-do.1", "1.33.1-do.0"),
            OnProvider::Gke => (catalog::VERSIONS[2], catalog::VERSIONS[1]),
        }
    }

    /// A well-formed version it does not offer.
    pub fn unknown_version(self) -> &'static str {
        match self {
            OnProvider::DigitalOcean => "1.32.99-do.0",
            OnProvider::Gke => "1.34.99-gke.1",
        }
    }

    /// The routes (`"METHOD template"` keys) `call` goes to.
    pub fn routes(self, call: Call) -> Vec<String> {
        use crate::model::routes::key;
        let pairs: &[(&str, &str)] = match (self, call) {
            (OnProvider::DigitalOcean, Call::CreateCluster) => &[("POST", digitalocean::CLUSTERS)],
            (OnProvider::DigitalOcean, Call::DeleteCluster) => &[
                ("DELETE", digitalocean::CLUSTER),
                ("DELETE", digitalocean::ASSOCIATED_SELECTIVE),
                ("DELETE", digitalocean::ASSOCIATED_DANGEROUS),
            ],
            (OnProvider::DigitalOcean, Call::CreateNodePool) => {
                &[("POST", digitalocean::NODE_POOLS)]
            }
            (OnProvider::DigitalOcean, Call::UpdateNodePool) => &[("PUT", digitalocean::NODE_POOL)],
            (OnProvider::DigitalOcean, Call::DeleteNodePool) => {
                &[("DELETE", digitalocean::NODE_POOL)]
            }
            (OnProvider::DigitalOcean, Call::Upgrades) => &[("GET", digitalocean::UPGRADES)],
            (OnProvider::DigitalOcean, Call::Upgrade | Call::UpgradeNodePool) => {
                &[("POST", digitalocean::UPGRADE)]
            }
            (OnProvider::Gke, Call::CreateCluster) => &[("POST", gke::CLUSTERS)],
            (OnProvider::Gke, Call::DeleteCluster) => &[("DELETE", gke::CLUSTER)],
            (OnProvider::Gke, Call::CreateNodePool) => &[("POST", gke::NODE_POOLS)],
            (OnProvider::Gke, Call::UpdateNodePool) => {
                &[("PUT", gke::NODE_POOL), ("POST", gke::SET_SIZE), ("POST", gke::SET_AUTOSCALING)]
            }
            (OnProvider::Gke, Call::DeleteNodePool) => &[("DELETE", gke::NODE_POOL)],
            (OnProvider::Gke, Call::Upgrades) => &[("GET", gke::SERVER_CONFIG)],
            (OnProvider::Gke, Call::Upgrade) => &[("POST", gke::UPDATE_MASTER)],
            // Shared with label and taint changes (one PUT): count it where none happen.
            (OnProvider::Gke, Call::UpgradeNodePool) => &[("PUT", gke::NODE_POOL)],
        };
        pairs.iter().map(|(m, t)| key(m, t)).collect()
    }
}

/// What the cluster's own controllers made at the provider for one Service of type
/// LoadBalancer and one disk-backed PersistentVolume (see
/// [`OnProvider::cloud_controllers_made`]).
#[derive(Debug, Clone)]
pub struct ControllersMade {
    /// The PersistentVolume as the provider's CSI driver records its disk, to put in the
    /// cluster.
    pub volume: serde_json::Value,
    /// The provider's id of the disk.
    pub disk_id: String,
}

impl OnProvider {
    /// Makes at the provider what its controllers make for cluster `pid` (its provider
    /// id) holding a Service of type LoadBalancer of uid `service_uid` and a
    /// PersistentVolume `pv`, bound to claim `default/data`, on a new disk: DigitalOcean's
    /// load balancer controller makes a load balancer `a<uid>` tagged `k8s:<cluster id>`
    /// (listed among the cluster's associated resources) and its CSI driver a volume
    /// `pv`; GKE's make a forwarding rule and a persistent disk in Compute Engine, which
    /// the simulator does not have — what the cluster records is all there is of them.
    pub async fn cloud_controllers_made(
        self,
        cloud: &super::Cloud,
        pid: &str,
        service_uid: &str,
        pv: &str,
    ) -> ControllersMade {
        use bc_domain::ports::ProviderImpl as _;
        let (driver, disk_id) = match self {
            OnProvider::DigitalOcean => {
                let lbs = cloud.provider(super::TEST_TOKEN);
                let name: String =
                    format!("a{}", service_uid.replace('-', "")).chars().take(32).collect();
                let mut lb = super::lb_request(&name);
                lb.tags = vec![format!("k8s:{pid}")];
                lbs.load_balancers().create(&lb).await.expect("the Service's load balancer");
                let id = cloud
                    .sim
                    .state()
                    .model()
                    .inject_volume(super::TEST_TOKEN, pid, pv)
                    .expect("the volume");
                ("dobs.csi.digitalocean.com", id)
            }
            OnProvider::Gke => (
                "pd.csi.storage.gke.io",
                format!(
                    "projects/{}/zones/{}/disks/{pv}",
                    crate::model::gke::SIM_PROJECT,
                    self.region()
                ),
            ),
        };
        let volume = serde_json::json!({"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": pv, "labels": {"topology.kubernetes.io/zone": self.region()}},
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "standard-rwo",
                "csi": {"driver": driver, "volumeHandle": disk_id, "fsType": "ext4"},
                "claimRef": {"namespace": "default", "name": "data"}}});
        ControllersMade { volume, disk_id }
    }

    /// Whether the provider deletes the load balancer a Service of type LoadBalancer
    /// made when its cluster is deleted with it (DigitalOcean lists it among the
    /// cluster's associated resources; GKE leaves it, to be named).
    pub fn deletes_service_load_balancers(self) -> bool {
        match self {
            OnProvider::DigitalOcean => true,
            OnProvider::Gke => false,
        }
    }
}

/// What the provider does on its own, or refuses for good, that a scenario sets up
/// through the simulator — each in the provider's own shape.
impl OnProvider {
    /// The HTTP status of the provider's standing refusal ([`OnProvider::refuse`]):
    /// DigitalOcean's 422, GKE's 403.
    pub fn refusal_status(self) -> u16 {
        match self {
            OnProvider::DigitalOcean => 422,
            OnProvider::Gke => 403,
        }
    }

    /// Every request for `call` is refused for good, saying `message`, until
    /// [`OnProvider::lift_refusal`]: DigitalOcean answers 422 `unprocessable_entity`
    /// ([`crate::model::Model::refuse`]); GKE 403 PERMISSION_DENIED (`forbidden`) in
    /// Google's error envelope ([`crate::model::Model::gke_refuse`]), what it answers, call
    /// after call, to a caller its IAM role or an organisation policy does not allow.
    pub fn refuse(self, sim: &crate::Sim, call: Call, message: &str) {
        let mut model = sim.state().model();
        for key in self.routes(call) {
            match self {
                OnProvider::DigitalOcean => model.refuse(&key, message),
                OnProvider::Gke => {
                    model.gke_refuse(&key, crate::model::gke::GkeError::forbidden(message))
                }
            }
        }
    }

    /// Stops [`OnProvider::refuse`]'s refusal of `call`.
    pub fn lift_refusal(self, sim: &crate::Sim, call: Call) {
        let mut model = sim.state().model();
        for key in self.routes(call) {
            match self {
                OnProvider::DigitalOcean => model.clear_refusal(&key),
                OnProvider::Gke => model.gke_clear_refusal(&key),
            }
        }
    }

    /// The provider puts cluster `pid` (its provider id) into `state` on its own, with
    /// `message`, until forced again: on DigitalOcean the cluster's `status.state`
    /// ([`crate::model::Model::force_cluster_state`]); on GKE its `status`
    /// ([`crate::model::Model::gke_force_status`]) — `Upgrading` is `RECONCILING` under an
    /// auto-upgrade GKE runs, `Degraded` and `Error` are `DEGRADED` and `ERROR` with
    /// `message` as the status message, `Running` is `RUNNING`. Returns false for an
    /// unknown cluster or a state the provider does not force.
    pub fn force_cluster_state(
        self,
        sim: &crate::Sim,
        pid: &str,
        state: crate::model::kubernetes::ClusterState,
        message: &str,
    ) -> bool {
        use crate::model::kubernetes::ClusterState as S;
        let now = sim.state().clock.now();
        let mut model = sim.state().model();
        match self {
            OnProvider::DigitalOcean => model.force_cluster_state(pid, state, message),
            OnProvider::Gke => {
                let status = match state {
                    S::Running => "RUNNING",
                    S::Upgrading => "RECONCILING",
                    S::Degraded => "DEGRADED",
                    S::Error => "ERROR",
                    _ => return false,
                };
                model.gke_force_status(pid, status, message, now)
            }
        }
    }

    /// The provider's cluster autoscaler moves the first node pool of cluster `pid` (its
    /// provider id), which must autoscale, to `count` nodes within its limits — the
    /// provider's doing, not ours: on DigitalOcean the pool's `count`, on GKE its
    /// instance groups' size ([`crate::model::Model::gke_autoscale`]). Panics if the
    /// provider would not (an unknown cluster, a pool without autoscaling, a count
    /// outside its limits).
    pub fn autoscale_to(self, sim: &crate::Sim, pid: &str, count: u32) {
        let now = sim.state().clock.now();
        let mut model = sim.state().model();
        match self {
            OnProvider::DigitalOcean => {
                let c = model.find_cluster(pid, now).expect("the cluster");
                let np = c.node_pools.first().expect("a node pool");
                assert!(
                    np.auto_scale && (np.min_nodes..=np.max_nodes).contains(&count),
                    "the autoscaler moves an autoscaled pool within its limits: {np:?}"
                );
                let spec = crate::model::NodePoolSpec {
                    name: Some(np.name.clone()),
                    count: Some(i64::from(count)),
                    auto_scale: Some(true),
                    min_nodes: Some(i64::from(np.min_nodes)),
                    max_nodes: Some(i64::from(np.max_nodes)),
                    ..Default::default()
                };
                model
                    .update_node_pool(super::TEST_TOKEN, pid, &np.id.clone(), spec, now)
                    .expect("the autoscaler's resize");
            }
            OnProvider::Gke => {
                let id = model.gke_id_of(pid).expect("the cluster");
                let first = model.gke.cluster(&id).and_then(|g| g.pools.first());
                let pool = first.map(|p| p.name.clone()).expect("a node pool");
                model.gke_autoscale(pid, &pool, count, now).expect("the autoscaler's resize");
            }
        }
    }
}
