//! `bc-api dev`: everything on one machine with no setup (SPEC §13). SQLite in a
//! directory kept across runs, a generated secret key kept there, the simulated cloud
//! in process on loopback — reached by the REAL DigitalOcean adapter over HTTP and the
//! REAL kube adapter over TLS with the simulator's CA — the reconcilers and the relay in
//! process, the tenant `dev` with an operator token, a simulated DigitalOcean account and
//! a simulated GKE account (its service-account key in [`GKE_KEY`]), `loadBalancers=5`
//! for new pools, and simulated nodes whose bcd joins this server.
//!
//! Invariants: a second start on the same directory keeps the database, the key, the
//! token and the simulated cloud (its clusters, node pools, load balancers, cluster
//! objects and CA, saved in [`SIM_STATE`] on change and at shutdown; the simulator's
//! and each cluster API's address too, when they are free), so what was made before —
//! and kubeconfigs handed out — carry on; every address is loopback;
//! [`DevStack::tour`] is the list of shell commands the banner prints, so the test that
//! runs them runs exactly what a user copies.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use bc_api::Settings;
use bc_domain::TenantId;
use bc_domain::model::{Grant, QuotaResource, Role, Scope};
use bc_domain::ports::{Clock, SystemClock};
use bc_reconcile::provider_resources::plan::Timing;
use bc_sim::config::{DEFAULT_TOKEN, Delays};
use bc_sim::persist::Keeper;
use bc_sim::{Sim, SimConfig, SimServer};
use bc_store::AeadSecretBox;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::config::ProviderUrls;
use crate::wire::{self, Adapters, ReconcileOptions, Served};

/// The tenant dev mode makes.
pub const DEV_TENANT: &str = "dev";
/// The name of the simulated DigitalOcean account.
pub const DEV_ACCOUNT_NAME: &str = "simulated";
/// The name of the simulated GKE account.
pub const DEV_GKE_ACCOUNT_NAME: &str = "simulated-gke";
/// The file in the state directory holding the simulated GKE account's service-account
/// key (a key the simulator issued and accepts; mode 0600).
pub const GKE_KEY: &str = "gke-key.json";
/// The default quota of load balancers per pool.
pub const DEV_LOAD_BALANCERS: u32 = 5;
/// The file in the state directory that keeps the simulated cloud.
pub const SIM_STATE: &str = "sim-state.json";
/// How often the simulated cloud is checked for changes to save.
const SIM_SAVE_EVERY: Duration = Duration::from_secs(1);

/// What a dev stack looks like.
#[derive(Clone)]
pub struct DevOptions {
    /// The state directory (`./.bc-dev`).
    pub dir: PathBuf,
    /// Start over: remove the directory first.
    pub fresh: bool,
    /// The API's address (`127.0.0.1:0` picks a free port).
    pub listen: SocketAddr,
    /// Another database instead of the directory's SQLite (the tests' PostgreSQL).
    pub database_url: Option<String>,
    /// The simulator's transition delays.
    pub delays: Delays,
    /// Whether the simulated nodes' bcd can reach this server.
    pub bcd_reaches_server: bool,
    /// Also publish events to NATS.
    pub nats_url: Option<String>,
    /// How often the simulated bcd agents look at their Secrets.
    pub bcd_every: Duration,
    /// Run the reconcilers in process (the tests of `bc-reconciler` turn this off).
    pub reconcile: bool,
    /// How often bcd is told to heartbeat.
    pub heartbeat_seconds: u32,
    /// The clock of the whole stack and the simulator (`None`: the wall clock).
    pub clock: Option<Arc<dyn Clock>>,
    /// Extra account tokens the simulator accepts (each one more simulated account).
    pub extra_sim_tokens: Vec<String>,
}

impl DevOptions {
    /// The defaults: `./.bc-dev`, `127.0.0.1:8080`, delays of a few seconds.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            fresh: false,
            listen: crate::config::DEFAULT_LISTEN.parse().expect("a socket address"),
            database_url: None,
            delays: watchable_delays(),
            bcd_reaches_server: true,
            nats_url: None,
            bcd_every: Duration::from_millis(500),
            reconcile: true,
            heartbeat_seconds: 30,
            clock: None,
            extra_sim_tokens: Vec::new(),
        }
    }
}

/// Delays of a few seconds, so every state can be watched going by.
pub fn watchable_delays() -> Delays {
    let s = Duration::from_secs;
    Delays {
        cluster_provision: s(6),
        node_provision: s(3),
        node_delete: s(2),
        cluster_upgrade: s(6),
        cluster_delete: s(3),
        load_balancer_provision: s(4),
        load_balancer_resize_every: s(60),
    }
}

/// A running dev stack.
pub struct DevStack {
    /// The API's base URL (`http://127.0.0.1:8080`).
    pub api_url: String,
    /// The simulator's DigitalOcean API base URL.
    pub sim_url: String,
    /// The simulator's account token.
    pub sim_token: String,
    /// The operator token of tenant `dev`.
    pub token: String,
    /// The simulated DigitalOcean account's id.
    pub account_id: String,
    /// The simulated GKE account's id.
    pub gke_account_id: String,
    /// The simulator's GKE API base URL (clients append `/v1/…`).
    pub gke_api_url: String,
    /// The simulator's OAuth 2.0 token endpoint.
    pub gcp_token_url: String,
    /// The state directory.
    pub dir: PathBuf,
    /// The simulated cloud.
    pub sim: Sim,
    /// The adapters (the tests read the store through them).
    pub adapters: Adapters,
    /// The work wake-up (another in-process runtime may share it).
    pub work: Arc<Notify>,
    /// The secret key (base64), for other processes on the same database.
    pub secret_key: String,
    /// The operator's client of this stack's API, made once: building one loads the
    /// system's CA certificates, which a caller polling every 100 ms would do ten times a
    /// second.
    client: bc_client::Client,
    served: Served,
    sim_server: SimServer,
    bcd: bc_sim::bcd::Background,
    keeper: Keeper,
}

impl DevStack {
    /// Starts everything and bootstraps the tenant, token and account.
    pub async fn start(options: DevOptions) -> anyhow::Result<Self> {
        let dir = options.dir.clone();
        if options.fresh && dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        // The port first: a taken port fails before anything else starts.
        let listener = wire::bind(options.listen).await?;
        let api_addr = listener.local_addr()?;
        let api_url = format!("http://{api_addr}");

        let key = secret_key(&dir)?;
        let url = match &options.database_url {
            Some(u) => u.clone(),
            None => format!("sqlite://{}?mode=rwc", dir.join("bc.db").display()),
        };
        let store = Arc::new(crate::db::open(&url).await?);

        let sim_config = SimConfig {
            delays: options.delays.clone(),
            tokens: std::iter::once(DEFAULT_TOKEN.to_owned())
                .chain(options.extra_sim_tokens.iter().cloned())
                .collect(),
            bcd_reaches_server: options.bcd_reaches_server,
            ..SimConfig::default()
        };
        let clock: Arc<dyn Clock> = options.clock.clone().unwrap_or_else(|| Arc::new(SystemClock));
        let kept = dir.join(SIM_STATE);
        let sim = Sim::open(sim_config, clock.clone(), &kept).with_context(|| {
            format!("the simulated cloud kept in {} (--fresh starts over)", dir.display())
        })?;
        let sim_server = serve_sim(&sim, &dir).await?;
        let sim_url = sim_server.url();
        let urls = ProviderUrls::simulator(&sim_url);
        write_private(&dir.join("sim-ca.pem"), sim.state().tls.ca_pem())?;
        let keeper = sim.keep_in(kept, SIM_SAVE_EVERY);
        let bcd = bc_sim::bcd::spawn(sim.state().clone(), options.bcd_every);

        let adapters = Adapters::real_with_clock(store, &key, &urls, clock)?;
        let (work, events) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let settings = Settings {
            default_pool_quotas: BTreeMap::from([(
                QuotaResource::LoadBalancers,
                DEV_LOAD_BALANCERS,
            )]),
            heartbeat_seconds: options.heartbeat_seconds,
            public_url: api_url.clone(),
            ..Settings::default()
        };
        // Everything a client of this server reads from `dir` is there before it serves:
        // one that waits for `/healthz` and then reads `token` finds it.
        let token = operator_token(&dir, &adapters).await?;
        // What `bc` reads in a directory holding `.bc-dev/` (the token is in `token`).
        write_private(
            &dir.join("bc.toml"),
            &format!("api_url = \"{api_url}\"\ntenant = \"{DEV_TENANT}\"\n"),
        )?;
        // The simulated GKE account's key: issued once and kept (the simulated cloud keeps
        // the keys it issued across restarts, as it keeps the account's clusters).
        let gke_key = dir.join(GKE_KEY);
        if !gke_key.exists() {
            write_private(&gke_key, &sim.gke_key(bc_sim::model::gke::SIM_PROJECT))?;
        }
        write_private(
            &dir.join("simulator.json"),
            &serde_json::to_string_pretty(&json!({
                "digitaloceanApiUrl": sim_url,
                "token": DEFAULT_TOKEN,
                "gkeApiUrl": urls.gke,
                "gcpTokenUrl": urls.gcp_token,
                "gkeServiceAccountKeyFile": gke_key,
            }))?,
        )?;
        let mut served = Served::default();
        let router = wire::api_router(
            &adapters,
            settings,
            work.clone(),
            events.clone(),
            served.cancel.clone(),
        );
        served.http(listener, router);
        let replica = wire::replica_id("dev");
        if options.reconcile {
            let mut ro = ReconcileOptions::new(&replica, &api_url, "bc-sim/bcd:dev");
            ro.load_balancer_timing = Some(quick_load_balancers());
            ro.wait_max = Some(SIM_WAIT_MAX);
            served.reconcilers(wire::runtime(&adapters, &ro, work.clone())?);
            if let Some(relay) =
                wire::relay(&adapters, &replica, Some(events.clone()), options.nats_url.as_deref())
                    .await?
            {
                served.relay(relay, Some(work.clone()));
            }
            served.idempotency_purge(&adapters, &replica);
        }

        let client = bc_client::Client::new(&api_url, &token)?;
        let mut stack = Self {
            api_url,
            sim_url: sim_url.clone(),
            sim_token: DEFAULT_TOKEN.to_owned(),
            token,
            account_id: String::new(),
            gke_account_id: String::new(),
            gke_api_url: urls.gke.clone(),
            gcp_token_url: urls.gcp_token.clone(),
            dir: dir.clone(),
            sim,
            adapters,
            work,
            secret_key: key,
            client,
            served,
            sim_server,
            bcd,
            keeper,
        };
        let digitalocean =
            json!({ "provider": "digitalocean", "credentials": { "token": DEFAULT_TOKEN } });
        stack.account_id = stack.simulated_account(DEV_ACCOUNT_NAME, digitalocean).await?;
        stack.gke_account_id = stack.simulated_gke_account().await?;
        Ok(stack)
    }

    /// The account `name` of tenant `dev`, if it exists.
    async fn find_account(&self, name: &str) -> anyhow::Result<Option<String>> {
        let listed = self.call("providerAccounts.list", json!({ "tenantId": DEV_TENANT })).await?;
        Ok(listed["providerAccounts"].as_array().and_then(|a| {
            a.iter()
                .find(|x| x["name"] == name)
                .and_then(|x| x["providerAccountId"].as_str().map(str::to_owned))
        }))
    }

    /// The simulated account `name` of tenant `dev`: found by name, or made through the
    /// API from `account` (`{provider, credentials}`).
    async fn simulated_account(&self, name: &str, account: Value) -> anyhow::Result<String> {
        if let Some(id) = self.find_account(name).await? {
            return Ok(id);
        }
        let mut body = json!({ "tenantId": DEV_TENANT, "name": name });
        body.as_object_mut()
            .expect("an object")
            .extend(account.as_object().cloned().context("an account is {provider, credentials}")?);
        let made = self.call("providerAccounts.create", body).await?;
        made["providerAccountId"]
            .as_str()
            .map(str::to_owned)
            .context("providerAccounts.create answered without an id")
    }

    /// The simulated GKE account: found by name, or made with the key in [`GKE_KEY`]
    /// (written before the server serves, so a user can make the same account with
    /// `bc accounts create --service-account-key @.bc-dev/gke-key.json`).
    async fn simulated_gke_account(&self) -> anyhow::Result<String> {
        if let Some(id) = self.find_account(DEV_GKE_ACCOUNT_NAME).await? {
            return Ok(id);
        }
        let path = self.dir.join(GKE_KEY);
        let key = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let gke = json!({ "provider": "gke", "credentials": { "serviceAccountKey": key } });
        self.simulated_account(DEV_GKE_ACCOUNT_NAME, gke).await
    }

    /// A client of this stack's API as the operator (retrying `429`/`503` as they say).
    pub fn client(&self) -> anyhow::Result<bc_client::Client> {
        Ok(self.client.clone())
    }

    /// Calls method `method` (`pools.create`) of this stack's API as the operator, with
    /// the JSON body `body` (a create gets a `requestId` unless it has one).
    pub async fn call(&self, method: &str, body: Value) -> anyhow::Result<Value> {
        Ok(self.client.call_method(method, body).await?)
    }

    /// The tenant.
    pub fn tenant(&self) -> TenantId {
        TenantId::parse(DEV_TENANT).expect("a tenant id")
    }

    /// The console's sign-in link (SPEC §14): the token and tenant travel in the URL's
    /// fragment, which the browser never sends; the page takes them out of the address
    /// bar at once and keeps them in the tab's sessionStorage.
    pub fn console_link(&self) -> String {
        format!("{}/console#token={}&tenant={DEV_TENANT}", self.api_url, self.token)
    }

    /// What `bc-api dev` prints first.
    pub fn banner(&self) -> String {
        let dir = self.dir.display();
        let mut out = String::new();
        out.push_str("bc-api dev: the control plane on a simulated cloud\n\n");
        out.push_str(&format!("  API            {}\n", self.api_url));
        out.push_str(&format!("  console        {}\n", self.console_link()));
        out.push_str(&format!("  OpenAPI        {}/api/openapi.json\n", self.api_url));
        out.push_str(&format!("  tenant         {DEV_TENANT}\n"));
        out.push_str(&format!(
            "  token          {}   (operator on compute-system; also in {dir}/token)\n",
            self.token
        ));
        out.push_str(&format!("  account        {}   (simulated DigitalOcean, loadBalancers={DEV_LOAD_BALANCERS} per pool)\n", self.account_id));
        out.push_str(&format!(
            "  GKE account    {}   (simulated GKE: standard and autopilot clusters, no load balancers)\n",
            self.gke_account_id
        ));
        out.push_str(&format!(
            "  simulator      {}   token {}   (also in {dir}/simulator.json)\n",
            self.sim_url, self.sim_token
        ));
        out.push_str(&format!(
            "  simulated GKE  {}/v1   token URL {}   key {dir}/{GKE_KEY}\n",
            self.gke_api_url, self.gcp_token_url
        ));
        out.push_str(&format!(
            "  data           {dir}/bc.db and {dir}/{SIM_STATE} (kept across runs; --fresh starts over)\n\n"
        ));
        out.push_str("Try it with bc (`cargo install --path bins/bc`; in this directory it needs no configuration):\n\n");
        for (what, cmd) in self.bc_tour() {
            out.push_str(&format!("# {what}\n{cmd}\n\n"));
        }
        out.push_str("Or with curl (copy-paste, in this directory; jq not needed):\n\n");
        for (what, cmd) in self.tour() {
            out.push_str(&format!("# {what}\n{cmd}\n\n"));
        }
        out.push_str("Ctrl-C stops the server; the data stays.\n");
        out
    }

    /// The curl tour: `(what it does, the shell command)`, in order; later commands use
    /// the shell variables earlier ones set.
    pub fn tour(&self) -> Vec<(&'static str, String)> {
        let dir = self.dir.display();
        let auth = r#"-H "authorization: Bearer $TOKEN" -H 'content-type: application/json'"#;
        let first = |key: &str| format!(r#"grep -o '"{key}":"[^"]*"' | head -1 | cut -d'"' -f4"#);
        vec![
            (
                "the API, your token and the simulated accounts (DigitalOcean and GKE)",
                format!(
                    "API={} TOKEN=$(cat {dir}/token) ACCOUNT={} GKE={} DO={} DOTOKEN={}",
                    self.api_url,
                    self.account_id,
                    self.gke_account_id,
                    self.sim_url,
                    self.sim_token
                ),
            ),
            (
                "a pool with a Kubernetes substrate: a cluster of two flavors is made for it",
                format!(
                    r#"POOL=$(curl -sf $API/api/compute/pools/create {auth} -d '{{"tenantId":"dev","name":"demo-'$RANDOM'","policy":{{"substrate":{{"kind":"kubernetes","account":"'$ACCOUNT'","cluster":{{"create":{{"region":"nyc1"}}}}}},"flavors":[{{"name":"cpu","size":"s-2vcpu-4gb","count":2}},{{"name":"big","size":"s-4vcpu-8gb","count":1}}]}}}}' | {}) && echo $POOL"#,
                    first("poolId")
                ),
            ),
            (
                "its substrate: pending, provisioning, then ready with its nodes joined (run again to watch)",
                format!(
                    r#"curl -sf $API/api/compute/kubernetesSubstrates/get {auth} -d '{{"tenantId":"dev","poolId":"'$POOL'"}}'"#
                ),
            ),
            (
                "a load balancer for the pool (the pool has a quota of 5)",
                format!(
                    r#"LB=$(curl -sf $API/api/compute/loadBalancers/create {auth} -d '{{"tenantId":"dev","poolId":"'$POOL'","providerAccountId":"'$ACCOUNT'","name":"web","type":"regional","region":"nyc1","forwardingRules":[{{"entryProtocol":"http","entryPort":80,"targetProtocol":"http","targetPort":8080}}],"targets":{{"tag":"web"}}}}' | {}) && echo $LB"#,
                    first("loadBalancerId")
                ),
            ),
            (
                "the load balancer: new, then ready",
                format!(
                    r#"curl -sf $API/api/compute/loadBalancers/get {auth} -d '{{"tenantId":"dev","loadBalancerId":"'$LB'"}}'"#
                ),
            ),
            (
                OWN_CLUSTER,
                format!(
                    r#"CLUSTER=$(curl -sf $DO/v2/kubernetes/clusters -H "authorization: Bearer $DOTOKEN" -H 'content-type: application/json' -d '{{"name":"mine-'$RANDOM'","region":"nyc1","version":"latest","node_pools":[{{"name":"workers","size":"s-2vcpu-4gb","count":2}}]}}' | {}) && echo $CLUSTER"#,
                    first("id")
                ),
            ),
            (
                LOOK_INSIDE,
                format!(
                    r#"curl -sf $DO/v2/kubernetes/clusters/$CLUSTER/kubeconfig -H "authorization: Bearer $DOTOKEN" > {dir}/mine.kubeconfig && kubectl --kubeconfig {dir}/mine.kubeconfig get nodes -o wide"#
                ),
            ),
            (
                "adopt it: a second pool whose substrate is that cluster",
                format!(
                    r#"ADOPTED=$(curl -sf $API/api/compute/pools/create {auth} -d '{{"tenantId":"dev","name":"adopted-'$RANDOM'","policy":{{"substrate":{{"kind":"kubernetes","account":"'$ACCOUNT'","cluster":{{"adopt":{{"providerClusterId":"'$CLUSTER'"}}}}}},"flavors":[{{"name":"cpu","size":"s-2vcpu-4gb","count":1}}]}}}}' | {}) && echo $ADOPTED"#,
                    first("poolId")
                ),
            ),
            (
                "the adopted substrate",
                format!(
                    r#"curl -sf $API/api/compute/kubernetesSubstrates/get {auth} -d '{{"tenantId":"dev","poolId":"'$ADOPTED'"}}'"#
                ),
            ),
            (
                GKE_AUTOPILOT,
                format!(
                    r#"AUTO=$(curl -sf $API/api/compute/kubernetesClusters/create {auth} -d '{{"tenantId":"dev","providerAccountId":"'$GKE'","name":"auto-'$RANDOM'","region":"{GKE_REGION}","version":"latest","mode":"autopilot","nodePools":[]}}' | {}) && echo $AUTO"#,
                    first("clusterId")
                ),
            ),
            (
                GKE_SUBSTRATE,
                format!(
                    r#"GKEPOOL=$(curl -sf $API/api/compute/pools/create {auth} -d '{{"tenantId":"dev","name":"gke-'$RANDOM'","policy":{{"substrate":{{"kind":"kubernetes","account":"'$GKE'","cluster":{{"create":{{"region":"{GKE_ZONE}"}}}}}},"flavors":[{{"name":"cpu","size":"{GKE_SIZE}","count":2}}]}}}}' | {}) && echo $GKEPOOL"#,
                    first("poolId")
                ),
            ),
            (
                "the autopilot cluster: provisioning, then ready (GKE sizes its nodes itself)",
                format!(
                    r#"curl -sf $API/api/compute/kubernetesClusters/get {auth} -d '{{"tenantId":"dev","clusterId":"'$AUTO'"}}'"#
                ),
            ),
            (
                "the substrate on GKE: ready with its two nodes joined (run again to watch)",
                format!(
                    r#"curl -sf $API/api/compute/kubernetesSubstrates/get {auth} -d '{{"tenantId":"dev","poolId":"'$GKEPOOL'"}}'"#
                ),
            ),
            (
                "the billing usage so far",
                format!(
                    r#"curl -sf $API/api/compute/billing/usage {auth} -d '{{"tenantId":"dev","from":"2026-01-01T00:00:00.000Z","to":"2100-01-01T00:00:00.000Z"}}'"#
                ),
            ),
        ]
    }

    /// The tour with `bc`: the same steps as [`DevStack::tour`], each a shell command run
    /// in the directory holding `.bc-dev/` (so `bc` finds the server, token and tenant).
    pub fn bc_tour(&self) -> Vec<(&'static str, String)> {
        // The simulator is reached with curl in both tours: the same two steps.
        let own_cluster: Vec<_> = self
            .tour()
            .into_iter()
            .filter(|(what, _)| *what == OWN_CLUSTER || *what == LOOK_INSIDE)
            .collect();
        let mut steps = vec![
            (
                "the simulated accounts, DigitalOcean and GKE (bc reads the API URL, token and tenant from .bc-dev/)",
                format!(
                    "bc accounts list && ACCOUNT={} GKE={} DO={} DOTOKEN={}",
                    self.account_id, self.gke_account_id, self.sim_url, self.sim_token
                ),
            ),
            (
                "a pool with a Kubernetes substrate: a cluster of two flavors is made for it",
                r#"POOL=$(bc pools create --name demo-$RANDOM --policy '{"substrate":{"kind":"kubernetes","account":"'$ACCOUNT'","cluster":{"create":{"region":"nyc1"}}},"flavors":[{"name":"cpu","size":"s-2vcpu-4gb","count":2},{"name":"big","size":"s-4vcpu-8gb","count":1}]}' -o id) && echo $POOL"#.to_owned(),
            ),
            (
                "its substrate going pending, provisioning, then ready with its nodes joined",
                "bc wait substrate $POOL --for state=ready --timeout 10m".to_owned(),
            ),
            (
                "a load balancer for the pool (the pool has a quota of 5)",
                r#"LB=$(bc lb create --pool $POOL --account $ACCOUNT --name web --type regional --region nyc1 --forwarding-rules '[{"entryProtocol":"http","entryPort":80,"targetProtocol":"http","targetPort":8080}]' --targets '{"tag":"web"}' -o id) && echo $LB"#.to_owned(),
            ),
            ("the load balancer, once ready", "bc wait lb $LB --timeout 5m".to_owned()),
        ];
        steps.extend(own_cluster);
        steps.extend([
            (
                "adopt it: a second pool whose substrate is that cluster",
                r#"ADOPTED=$(bc pools create --name adopted-$RANDOM --policy '{"substrate":{"kind":"kubernetes","account":"'$ACCOUNT'","cluster":{"adopt":{"providerClusterId":"'$CLUSTER'"}}},"flavors":[{"name":"cpu","size":"s-2vcpu-4gb","count":1}]}' -o id) && echo $ADOPTED"#.to_owned(),
            ),
            ("the adopted substrate", "bc substrates get $ADOPTED".to_owned()),
            (
                GKE_AUTOPILOT,
                format!("AUTO=$(bc clusters create --account $GKE --name auto-$RANDOM --region {GKE_REGION} --version latest --mode autopilot --node-pools '[]' -o id) && echo $AUTO"),
            ),
            (
                GKE_SUBSTRATE,
                format!(r#"GKEPOOL=$(bc pools create --name gke-$RANDOM --policy '{{"substrate":{{"kind":"kubernetes","account":"'$GKE'","cluster":{{"create":{{"region":"{GKE_ZONE}"}}}}}},"flavors":[{{"name":"cpu","size":"{GKE_SIZE}","count":2}}]}}' -o id) && echo $GKEPOOL"#),
            ),
            (
                "the autopilot cluster, once ready (GKE sizes its nodes itself)",
                "bc wait cluster $AUTO --timeout 10m".to_owned(),
            ),
            (
                "the substrate on GKE, once ready with its two nodes joined",
                "bc wait substrate $GKEPOOL --for state=ready --timeout 10m && bc substrates get $GKEPOOL".to_owned(),
            ),
            ("what happened to the first pool", "bc events list --subject compute.pools.$POOL".to_owned()),
            (
                "the billing usage so far",
                "bc billing usage --from 2026-01-01T00:00:00.000Z --to 2100-01-01T00:00:00.000Z".to_owned(),
            ),
        ]);
        steps
    }

    /// Stops everything (in-flight requests and activations finish), then saves the
    /// simulated cloud a last time (a failure to is logged: the last periodic save
    /// stands).
    pub async fn stop(self) {
        let Self { served, sim_server, bcd, keeper, .. } = self;
        served.shutdown().await;
        stop_sim(sim_server, bcd, keeper).await
    }

    /// Runs until SIGINT/SIGTERM, then stops (as [`Self::stop`]).
    pub async fn until_signal(self) {
        let Self { served, sim_server, bcd, keeper, .. } = self;
        served.until_signal().await;
        stop_sim(sim_server, bcd, keeper).await
    }
}

/// Serves the simulator where the last run of this directory did (`simulator.json`),
/// so the URL a user copied keeps working, or on any free port when that one is taken.
async fn serve_sim(sim: &Sim, dir: &Path) -> anyhow::Result<SimServer> {
    let any: SocketAddr = "127.0.0.1:0".parse().expect("loopback");
    let before = std::fs::read_to_string(dir.join("simulator.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .and_then(|v| v["digitaloceanApiUrl"].as_str().map(str::to_owned))
        .and_then(|url| url.strip_prefix("http://")?.parse::<SocketAddr>().ok())
        .filter(|addr| addr.ip().is_loopback());
    if let Some(addr) = before
        && let Ok(server) = sim.serve(addr).await
    {
        return Ok(server);
    }
    sim.serve(any).await.context("starting the simulator")
}

/// Stops the simulated agents and the simulator, then saves the cloud a last time.
async fn stop_sim(sim_server: SimServer, bcd: bc_sim::bcd::Background, keeper: Keeper) {
    drop(bcd);
    sim_server.shutdown().await;
    if let Err(e) = keeper.finish().await {
        tracing::error!(error = %e, "could not save the simulated cloud at shutdown");
    }
}

/// The tours' step that makes a cluster in the simulator (the same in both tours).
const OWN_CLUSTER: &str = "a cluster of your own, made directly in the simulated DigitalOcean";
/// The tours' step that looks inside it with kubectl.
const LOOK_INSIDE: &str = "look inside it with kubectl (once it is running, a few seconds)";
/// The tours' step that makes an autopilot cluster on the GKE account.
const GKE_AUTOPILOT: &str =
    "an autopilot cluster on the simulated GKE account (regional: GKE places its nodes)";
/// The tours' step that makes a pool with a substrate on the GKE account.
const GKE_SUBSTRATE: &str =
    "a pool with a substrate on GKE: a zonal cluster with one node pool per flavor";
/// The simulated GKE's region for autopilot clusters (autopilot takes regions only).
const GKE_REGION: &str = "us-central1";
/// A zone of it, for the substrate's zonal cluster (a fixed count is the pool's total).
const GKE_ZONE: &str = "us-central1-a";
/// A machine type the simulated GKE offers.
const GKE_SIZE: &str = "e2-standard-2";

/// The longest a converging object, or one in `error`, waits in dev mode before its
/// reconciler looks again: the simulator's clusters and node pools change in seconds, not
/// the minutes the reconcilers' own waits (30 s for a cluster, 2 minutes and more for an
/// object in error) are made for; and a user who fixes what an error names (deletes the
/// foreign object it names) sees it taken up in seconds.
pub const SIM_WAIT_MAX: Duration = Duration::from_secs(1);

/// Load balancer polling for the simulator's seconds-scale delays.
fn quick_load_balancers() -> Timing {
    Timing {
        poll_min: Duration::from_secs(1),
        poll_max: Duration::from_secs(5),
        ..Timing::default()
    }
}

/// The operator token kept in `dir/token`, or a new one (written there).
async fn operator_token(dir: &Path, adapters: &Adapters) -> anyhow::Result<String> {
    let path = dir.join("token");
    if let Ok(kept) = std::fs::read_to_string(&path)
        && crate::tokens::is_live(adapters.store.as_ref(), &kept).await?
    {
        return Ok(kept.trim().to_owned());
    }
    let grants = vec![Grant { role: Role::Operator, scope: Scope::System, tenant_id: None }];
    let (_, plain) =
        crate::tokens::create(adapters.store.as_ref(), adapters.clock.as_ref(), grants).await?;
    write_private(&path, &format!("{plain}\n"))?;
    Ok(plain)
}

/// The key kept in `dir/secret.key`, made on first use.
fn secret_key(dir: &Path) -> anyhow::Result<String> {
    let path = dir.join("secret.key");
    if let Ok(kept) = std::fs::read_to_string(&path) {
        return Ok(kept.trim().to_owned());
    }
    let key = AeadSecretBox::generate_base64_key().map_err(|e| anyhow::anyhow!("{e}"))?;
    write_private(&path, &format!("{key}\n"))?;
    Ok(key)
}

/// Writes `text` to `path`, readable by its owner only (it may hold a secret), whole or
/// not at all ([`bc_agent::write_private`]).
fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    bc_agent::write_private(path, text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

/// `bc-api dev --demo`: drives the tour through the API on both providers — on
/// DigitalOcean a pool with a substrate, a load balancer, a cluster made in the simulator
/// and adopted by a second pool; on GKE an autopilot cluster and a pool with a substrate —
/// printing one
/// line per object as its state changes (a spinner between changes), until everything is
/// ready; then prints the billing usage so far. Gives up after ten minutes.
pub async fn demo(stack: &DevStack) -> anyhow::Result<()> {
    use std::io::Write as _;
    let suffix = format!("{:04x}", rand::random::<u16>());
    let account = stack.account_id.as_str();
    let pool = stack
        .call(
            "pools.create",
            json!({"tenantId": DEV_TENANT, "name": format!("demo-{suffix}"), "policy": {
                "substrate": {"kind": "kubernetes", "account": account, "cluster": {"create": {"region": "nyc1"}}},
                "flavors": [{"name": "cpu", "size": "s-2vcpu-4gb", "count": 2},
                            {"name": "big", "size": "s-4vcpu-8gb", "count": 1}]}}),
        )
        .await?;
    let pool_id = pool["poolId"].as_str().context("pools.create: no poolId")?.to_owned();
    let lb = stack
        .call(
            "loadBalancers.create",
            json!({"tenantId": DEV_TENANT, "poolId": pool_id, "providerAccountId": account,
                   "name": format!("web-{suffix}"), "type": "regional", "region": "nyc1",
                   "forwardingRules": [{"entryProtocol": "http", "entryPort": 80, "targetProtocol": "http", "targetPort": 8080}],
                   "targets": {"tag": "web"}}),
        )
        .await?;
    let lb_id = lb["loadBalancerId"].as_str().context("loadBalancers.create: no id")?.to_owned();
    let made = reqwest::Client::new()
        .post(format!("{}/v2/kubernetes/clusters", stack.sim_url))
        .bearer_auth(&stack.sim_token)
        .json(&json!({"name": format!("mine-{suffix}"), "region": "nyc1", "version": "latest",
                      "node_pools": [{"name": "workers", "size": "s-2vcpu-4gb", "count": 2}]}))
        .send()
        .await?
        .error_for_status()?
        .json::<Value>()
        .await?;
    let cluster =
        made["kubernetes_cluster"]["id"].as_str().context("simulator: no cluster id")?.to_owned();
    let adopted = stack
        .call(
            "pools.create",
            json!({"tenantId": DEV_TENANT, "name": format!("adopted-{suffix}"), "policy": {
                "substrate": {"kind": "kubernetes", "account": account, "cluster": {"adopt": {"providerClusterId": cluster}}},
                "flavors": [{"name": "cpu", "size": "s-2vcpu-4gb", "count": 1}]}}),
        )
        .await?;
    let adopted_id = adopted["poolId"].as_str().context("pools.create: no poolId")?.to_owned();
    let gke = stack.gke_account_id.as_str();
    let auto = stack
        .call(
            "kubernetesClusters.create",
            json!({"tenantId": DEV_TENANT, "providerAccountId": gke, "name": format!("auto-{suffix}"),
                   "region": GKE_REGION, "version": "latest", "mode": "autopilot", "nodePools": []}),
        )
        .await?;
    let auto_id =
        auto["clusterId"].as_str().context("kubernetesClusters.create: no id")?.to_owned();
    let gke_pool = stack
        .call(
            "pools.create",
            json!({"tenantId": DEV_TENANT, "name": format!("gke-{suffix}"), "policy": {
                "substrate": {"kind": "kubernetes", "account": gke, "cluster": {"create": {"region": GKE_ZONE}}},
                "flavors": [{"name": "cpu", "size": GKE_SIZE, "count": 2}]}}),
        )
        .await?;
    let gke_pool_id = gke_pool["poolId"].as_str().context("pools.create: no poolId")?.to_owned();

    let objects = [
        (
            format!("substrate of pool {pool_id}"),
            "kubernetesSubstrates.get",
            json!({"tenantId": DEV_TENANT, "poolId": pool_id}),
        ),
        (
            format!("load balancer {lb_id}"),
            "loadBalancers.get",
            json!({"tenantId": DEV_TENANT, "loadBalancerId": lb_id}),
        ),
        (
            format!("substrate of pool {adopted_id} (adopting {cluster})"),
            "kubernetesSubstrates.get",
            json!({"tenantId": DEV_TENANT, "poolId": adopted_id}),
        ),
        (
            format!("autopilot cluster {auto_id} (GKE)"),
            "kubernetesClusters.get",
            json!({"tenantId": DEV_TENANT, "clusterId": auto_id}),
        ),
        (
            format!("substrate of pool {gke_pool_id} (GKE)"),
            "kubernetesSubstrates.get",
            json!({"tenantId": DEV_TENANT, "poolId": gke_pool_id}),
        ),
    ];
    let mut last: Vec<String> = vec![String::new(); objects.len()];
    let spinner = ['|', '/', '-', '\\'];
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
    for tick in 0..1200u32 {
        let mut ready = 0;
        for (i, (what, method, body)) in objects.iter().enumerate() {
            let v = stack.call(method, body.clone()).await?;
            let state = v["state"].as_str().unwrap_or("?").to_owned();
            let detail = match (v["nodesListed"].as_u64(), v["nodesJoined"].as_u64()) {
                (Some(l), Some(j)) => format!(" (nodes listed {l}, joined {j})"),
                _ => String::new(),
            };
            let line = format!("{state}{detail}");
            if line != last[i] {
                if tty {
                    print!("\r\x1b[2K");
                }
                let message = v["message"].as_str().map(|m| format!(" — {m}")).unwrap_or_default();
                println!("{what}: {line}{message}");
                last[i] = line;
            }
            if state == "ready" {
                ready += 1;
            }
        }
        if ready == objects.len() {
            break;
        }
        if tty {
            print!("\r{} waiting…", spinner[tick as usize % spinner.len()]);
            let _ = std::io::stdout().flush();
        }
        if tick == 1199 {
            anyhow::bail!("the demo did not reach ready in ten minutes");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    if tty {
        print!("\r\x1b[2K");
    }
    println!("everything is ready.");
    // The load balancer's billing opens when it turns ready; its first line shows once
    // the interval has a length (bounded: a few polls).
    let window = json!({"tenantId": DEV_TENANT, "from": "2026-01-01T00:00:00.000Z", "to": "2100-01-01T00:00:00.000Z"});
    let mut usage = stack.call("billing.usage", window.clone()).await?;
    for _ in 0..20 {
        if usage["lines"].as_array().is_some_and(|l| !l.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        usage = stack.call("billing.usage", window.clone()).await?;
    }
    println!("billing usage so far: {usage}");
    Ok(())
}
