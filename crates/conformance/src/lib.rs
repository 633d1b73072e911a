//! bc-conformance: the provider adapters' contract — what the reconcilers rely on a
//! provider adapter (DigitalOcean's or GKE's) and the kube adapter to do — as one run
//! against any DigitalOcean- or GKE-shaped API: the real provider (`cargo xtask
//! conformance [--provider gke]`, like a Terraform provider's acceptance tests) or the
//! simulator (this crate's tests, so CI runs every check). One entry point, [`cli`],
//! serves both.
//!
//! Invariants: everything a run makes is named under [`NAME_PREFIX`] and tagged [`TAG`],
//! and the sweeper ([`sweep`]) removes whatever carries both, before the run and after it
//! whatever happened (a failed check, SIGINT or SIGTERM), so only a killed run leaves
//! objects, and the next run's first sweep removes them; nothing without both is ever
//! deleted. Every wait is bounded in time and in count. The token and the
//! service-account key are never printed.

pub mod contract;
pub mod ledger;
pub mod sweep;
pub mod wait;

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use bc_domain::ProviderError;
use bc_domain::model::{ProviderKind, SecretString};
use bc_domain::ports::{
    AccountCredentials, ClusterError, ProviderCredentials, ProviderImpl, ServiceAccount,
    SystemClock,
};
use bc_providers::digitalocean::{DEFAULT_BASE_URL, DigitalOcean, DigitalOceanConfig};
use bc_providers::gke::{Gke, GkeConfig};
use bc_providers::kube::KubeClusterApi;

pub use contract::{NodeMatch, Target};
pub use wait::Deadlines;

/// The variable holding the DigitalOcean API token; without it the run is skipped.
pub const TOKEN_VAR: &str = "BC_CONFORMANCE_DIGITALOCEAN_TOKEN";

/// The variable choosing the region (default [`DEFAULT_REGION`]).
pub const REGION_VAR: &str = "BC_CONFORMANCE_DIGITALOCEAN_REGION";

/// The region when [`REGION_VAR`] is unset: it offers DOKS and size-unit load balancers.
pub const DEFAULT_REGION: &str = "nyc1";

/// Every object a run makes is named `<NAME_PREFIX><run id>-…`.
pub const NAME_PREFIX: &str = "bc-conf-";

/// The tag every object a run makes carries (clusters, node pools, load balancers).
pub const TAG: &str = "bc-conformance";

/// The cheapest node size DOKS offers (1 vCPU, 2 GiB: the smallest DOKS accepts).
pub const NODE_SIZE: &str = "s-1vcpu-2gb";

/// The variable naming the GKE service-account key file; without it a GKE run is
/// skipped.
pub const GKE_KEY_VAR: &str = "BC_CONFORMANCE_GKE_KEY_FILE";

/// The variable choosing the GKE zone of the standard cluster (default
/// [`GKE_DEFAULT_LOCATION`]); the autopilot cluster goes to the zone's region.
pub const GKE_LOCATION_VAR: &str = "BC_CONFORMANCE_GKE_LOCATION";

/// The zone when [`GKE_LOCATION_VAR`] is unset.
pub const GKE_DEFAULT_LOCATION: &str = "us-central1-a";

/// GKE's default machine type, the node size of a GKE run.
pub const GKE_NODE_SIZE: &str = "e2-medium";

/// GKE's label naming a Node's node pool.
pub const GKE_NODE_POOL_LABEL: &str = "cloud.google.com/gke-nodepool";

/// The last line of a run without credentials.
pub const SKIPPED: &str = "skipped";

/// The last line of a run whose every check held.
pub const PASSED: &str = "passed";

/// The usage text of the command.
pub const USAGE: &str = "\
usage: bc-conformance [--provider digitalocean|gke] [--digitalocean-api-url URL]
                      [--gke-api-url URL] [--gcp-token-url URL] [--sweep-only]

Runs the provider adapters' contract against one provider: a one-node cluster of a
small size, a second node pool resized and deleted, a regional load balancer created,
updated and deleted (where the provider offers one), an autopilot cluster (where it
offers them), and our Namespace, Secret, ServiceAccount and DaemonSet applied in the
cluster and refused where a tenant's stand; then deletes everything and prints the bill
at list prices. Objects are named bc-conf-<run>-… and tagged (GKE: labelled)
bc-conformance; a sweeper deletes whatever carries both, first and last. Ctrl-C stops
the run and sweeps (a second one abandons the sweep: run --sweep-only later).

DigitalOcean (the default): the token in BC_CONFORMANCE_DIGITALOCEAN_TOKEN (region:
BC_CONFORMANCE_DIGITALOCEAN_REGION, default nyc1). GKE: the service-account key file
named by BC_CONFORMANCE_GKE_KEY_FILE (zone of the standard cluster:
BC_CONFORMANCE_GKE_LOCATION, default us-central1-a; the autopilot cluster goes to its
region). Without them it prints `skipped` and exits 0.

  --provider P                 digitalocean (default) or gke
  --digitalocean-api-url URL   another DigitalOcean-shaped API (the simulator)
  --gke-api-url URL            another GKE-shaped API (the simulator; without /v1)
  --gcp-token-url URL          its OAuth 2.0 token endpoint (the key's token_uri is never used)
  --sweep-only                 only delete what earlier runs left";

/// The one error type of a run: which step failed and how.
#[derive(Debug, thiserror::Error)]
pub enum ConformanceError {
    /// The provider refused or failed a call the contract needs.
    #[error("{step}: provider: {error}")]
    Provider {
        /// The step.
        step: String,
        /// The adapter's classified error.
        error: ProviderError,
    },
    /// The cluster's API refused or failed a call.
    #[error("{step}: cluster API: {error}")]
    Cluster {
        /// The step.
        step: String,
        /// The adapter's classified error.
        error: ClusterError,
    },
    /// An answer broke the contract.
    #[error("{step}: {message}")]
    Check {
        /// The step.
        step: String,
        /// What was expected and what came.
        message: String,
    },
    /// A wait ran out of time or polls.
    #[error("{step}: gave up after {:.0} s and {polls} looks (last seen: {last})", waited.as_secs_f64())]
    Timeout {
        /// What was awaited.
        step: String,
        /// How long it waited.
        waited: Duration,
        /// How many times it looked.
        polls: u32,
        /// What it saw last.
        last: String,
    },
    /// The command line or the environment is wrong.
    #[error("{0}")]
    Usage(String),
    /// SIGINT or SIGTERM arrived.
    #[error("interrupted")]
    Interrupted,
}

/// A run's result.
pub type Result<T> = std::result::Result<T, ConformanceError>;

/// A failed check at `step` saying `message`.
pub fn check(step: &str, message: impl Into<String>) -> ConformanceError {
    ConformanceError::Check { step: step.to_owned(), message: message.into() }
}

/// `Ok` when `cond`, else a failed check at `step`.
pub fn ensure(cond: bool, step: &str, message: impl FnOnce() -> String) -> Result<()> {
    if cond { Ok(()) } else { Err(check(step, message())) }
}

/// The provider a run is against.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Provider {
    /// DigitalOcean (the default).
    #[default]
    DigitalOcean,
    /// Google Kubernetes Engine.
    Gke,
}

/// What the command line asks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Args {
    /// `--provider`.
    pub provider: Provider,
    /// `--digitalocean-api-url`: the API's base URL (without `/v2`).
    pub api_url: Option<String>,
    /// `--gke-api-url`: GKE's base URL (without `/v1`).
    pub gke_api_url: Option<String>,
    /// `--gcp-token-url`: the OAuth 2.0 token endpoint.
    pub gcp_token_url: Option<String>,
    /// `--sweep-only`.
    pub sweep_only: bool,
    /// `--help`.
    pub help: bool,
}

/// The flags that take a value.
const VALUED: [&str; 4] =
    ["--provider", "--digitalocean-api-url", "--gke-api-url", "--gcp-token-url"];

impl Args {
    /// Parses the arguments after the program name.
    pub fn parse(args: &[String]) -> Result<Self> {
        let mut out = Self::default();
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if VALUED.contains(&f) => (f, Some(v.to_owned())),
                _ => (arg.as_str(), None),
            };
            if VALUED.contains(&flag) {
                let Some(value) = inline.or_else(|| it.next().cloned()) else {
                    return Err(ConformanceError::Usage(format!("{flag} needs a value")));
                };
                match flag {
                    "--provider" => {
                        out.provider = match value.as_str() {
                            "digitalocean" => Provider::DigitalOcean,
                            "gke" => Provider::Gke,
                            other => {
                                return Err(ConformanceError::Usage(format!(
                                    "--provider: {other:?} is not digitalocean or gke"
                                )));
                            }
                        }
                    }
                    "--digitalocean-api-url" => out.api_url = Some(http_url(flag, value)?),
                    "--gke-api-url" => out.gke_api_url = Some(http_url(flag, value)?),
                    _ => out.gcp_token_url = Some(http_url(flag, value)?),
                }
                continue;
            }
            match flag {
                "--sweep-only" => out.sweep_only = true,
                "--help" | "-h" => out.help = true,
                other => {
                    return Err(ConformanceError::Usage(format!("unknown argument `{other}`")));
                }
            }
        }
        let (do_url, gke_urls) =
            (out.api_url.is_some(), out.gke_api_url.is_some() || out.gcp_token_url.is_some());
        match out.provider {
            Provider::DigitalOcean if gke_urls => Err(ConformanceError::Usage(
                "--gke-api-url and --gcp-token-url go with --provider gke".into(),
            )),
            Provider::Gke if do_url => Err(ConformanceError::Usage(
                "--digitalocean-api-url goes with --provider digitalocean".into(),
            )),
            _ => Ok(out),
        }
    }
}

/// `url` when it is an http(s) URL, else a usage error naming `flag`.
fn http_url(flag: &str, url: String) -> Result<String> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(url)
    } else {
        Err(ConformanceError::Usage(format!("{flag}: {url:?} is not an http(s) URL")))
    }
}

/// The account a run uses (never printed: it holds the token or the key).
pub enum Account {
    /// A DigitalOcean token and the API it is for.
    DigitalOcean {
        /// The API token.
        token: SecretString,
        /// The API's base URL.
        api_url: String,
    },
    /// A GKE service account and the API and token endpoint it is for.
    Gke {
        /// The checked key and its project.
        account: Box<ServiceAccount>,
        /// GKE's base URL.
        api_url: String,
        /// The token endpoint.
        token_url: String,
    },
}

impl Account {
    /// The API's base URL.
    pub fn api_url(&self) -> &str {
        match self {
            Self::DigitalOcean { api_url, .. } | Self::Gke { api_url, .. } => api_url,
        }
    }

    /// The provider's name, for what a run prints.
    pub fn provider(&self) -> &'static str {
        match self {
            Self::DigitalOcean { .. } => "DigitalOcean",
            Self::Gke { .. } => "GKE",
        }
    }
}

/// What a run needs, read from the arguments and the environment.
pub struct Settings {
    /// The account.
    pub account: Account,
    /// Where and of what size the run makes things.
    pub target: Target,
    /// Only sweep.
    pub sweep_only: bool,
    /// The waits' bounds.
    pub deadlines: Deadlines,
}

/// What to do: skip (saying why) or run.
pub enum Plan {
    /// No credentials: the line to print before [`SKIPPED`].
    Skip(String),
    /// Run with these settings.
    Run(Box<Settings>),
}

/// Decides from `args` and the variables `var` reads (an empty value counts as unset).
pub fn plan(args: &Args, var: &dyn Fn(&str) -> Option<String>) -> Result<Plan> {
    match args.provider {
        Provider::DigitalOcean => plan_digitalocean(args, var),
        Provider::Gke => plan_gke(args, var),
    }
}

fn plan_digitalocean(args: &Args, var: &dyn Fn(&str) -> Option<String>) -> Result<Plan> {
    let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
    let Some(token) = set(TOKEN_VAR) else {
        return Ok(Plan::Skip(format!(
            "conformance: set {TOKEN_VAR} to a DigitalOcean API token (read and write on \
             kubernetes, load_balancer and tag) to run the contract against DigitalOcean \
             (optional: {REGION_VAR}, default {DEFAULT_REGION}); it bills a few cents"
        )));
    };
    let region = set(REGION_VAR).unwrap_or_else(|| DEFAULT_REGION.to_owned());
    if !region.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()) {
        return Err(ConformanceError::Usage(format!(
            "{REGION_VAR}: {region:?} is not a region slug (lower-case letters and digits)"
        )));
    }
    Ok(Plan::Run(Box::new(Settings {
        account: Account::DigitalOcean {
            token: SecretString::new(token.trim()),
            api_url: args.api_url.clone().unwrap_or_else(|| DEFAULT_BASE_URL.to_owned()),
        },
        target: Target {
            location: region,
            autopilot_region: None,
            node_size: NODE_SIZE,
            nodes: NodeMatch::Droplets,
            prices: ledger::DIGITALOCEAN,
        },
        sweep_only: args.sweep_only,
        deadlines: Deadlines::digitalocean(),
    })))
}

fn plan_gke(args: &Args, var: &dyn Fn(&str) -> Option<String>) -> Result<Plan> {
    let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
    let Some(path) = set(GKE_KEY_VAR) else {
        return Ok(Plan::Skip(format!(
            "conformance: set {GKE_KEY_VAR} to the path of a GKE service-account key file \
             (a role with container.clusters.* and container.operations.*) to run the \
             contract against GKE (optional: {GKE_LOCATION_VAR}, a zone, default \
             {GKE_DEFAULT_LOCATION}); it bills a few cents"
        )));
    };
    let path = path.trim();
    // The file's text is never quoted: an unreadable file is named by its path and why.
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConformanceError::Usage(format!("{GKE_KEY_VAR}: cannot read {path:?}: {}", e.kind()))
    })?;
    let checked = ProviderCredentials::service_account(SecretString::new(text), None)
        .check(ProviderKind::Gke)
        .map_err(|e| ConformanceError::Usage(format!("{GKE_KEY_VAR} ({path}): {e}")))?;
    let AccountCredentials::ServiceAccount(account) = checked else {
        return Err(ConformanceError::Usage(format!("{GKE_KEY_VAR}: not a service-account key")));
    };
    let zone = set(GKE_LOCATION_VAR).unwrap_or_else(|| GKE_DEFAULT_LOCATION.to_owned());
    let region = zone
        .rsplit_once('-')
        .map(|(r, _)| r.to_owned())
        .filter(|r| r.contains('-'))
        .filter(|_| zone.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
        .ok_or_else(|| {
            ConformanceError::Usage(format!(
                "{GKE_LOCATION_VAR}: {zone:?} is not a zone such as {GKE_DEFAULT_LOCATION} \
                 (the standard cluster is zonal; the autopilot one goes to its region)"
            ))
        })?;
    Ok(Plan::Run(Box::new(Settings {
        account: Account::Gke {
            account: Box::new(account),
            api_url: args
                .gke_api_url
                .clone()
                .unwrap_or_else(|| bc_providers::gke::DEFAULT_API_URL.to_owned()),
            token_url: args
                .gcp_token_url
                .clone()
                .unwrap_or_else(|| bc_providers::gke::DEFAULT_TOKEN_URL.to_owned()),
        },
        target: Target {
            location: zone,
            autopilot_region: Some(region),
            node_size: GKE_NODE_SIZE,
            nodes: NodeMatch::PoolLabel {
                label: GKE_NODE_POOL_LABEL,
                provider_id_prefix: "gce://",
            },
            prices: ledger::GKE,
        },
        sweep_only: args.sweep_only,
        deadlines: Deadlines::gke(),
    })))
}

/// The adapter of `account`, on the wall clock.
pub fn adapter(account: &Account) -> Result<Arc<dyn ProviderImpl>> {
    let failed = |error| ConformanceError::Provider { step: "adapter".into(), error };
    Ok(match account {
        Account::DigitalOcean { token, api_url } => {
            let config = DigitalOceanConfig::with_base_url(api_url.clone());
            Arc::new(DigitalOcean::new(config, token, Arc::new(SystemClock)).map_err(failed)?)
        }
        Account::Gke { account, api_url, token_url } => {
            let config = GkeConfig::with_urls(api_url.clone(), token_url.clone());
            Arc::new(Gke::new(&config, account, Arc::new(SystemClock), None).map_err(failed)?)
        }
    })
}

/// A new run id: seconds since the epoch and 20 random bits, base 36, lower case (a
/// valid DigitalOcean and Kubernetes name part).
pub fn run_id(unix_secs: u64, random: u32) -> String {
    let b36 = bc_testkit::base36;
    format!("{}{}", b36(u128::from(unix_secs)), b36(u128::from(random & 0xf_ffff)))
}

/// The command: parses `args`, reads `var`, and runs (or skips, or only sweeps),
/// writing progress and the bill to `out`. Returns the exit code: 0 when skipped or
/// passed, 1 when a check failed, 2 on a usage error.
pub async fn cli(args: &[String], var: &dyn Fn(&str) -> Option<String>, out: &mut dyn Write) -> u8 {
    let parsed = match Args::parse(args) {
        Ok(a) => a,
        Err(e) => {
            let _ = writeln!(out, "conformance: {e}\n\n{USAGE}");
            return 2;
        }
    };
    if parsed.help {
        let _ = writeln!(out, "{USAGE}");
        return 0;
    }
    let settings = match plan(&parsed, var) {
        Ok(Plan::Skip(why)) => {
            let _ = writeln!(out, "{why}\n{SKIPPED}");
            return 0;
        }
        Ok(Plan::Run(s)) => s,
        Err(e) => {
            let _ = writeln!(out, "conformance: {e}");
            return 2;
        }
    };
    match run(&settings, out).await {
        Ok(()) => {
            let _ = writeln!(out, "{PASSED}");
            0
        }
        Err(e) => {
            let _ = writeln!(out, "FAILED: {e}");
            1
        }
    }
}

/// One run with `settings`: sweep, the contract, sweep again (also after a failure),
/// and the bill. The first failure is the result.
pub async fn run(settings: &Settings, out: &mut dyn Write) -> Result<()> {
    bc_providers::install_crypto_provider();
    let provider = adapter(&settings.account)?;
    let unix_secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let id = run_id(unix_secs, rand::random());
    let _ = writeln!(
        out,
        "conformance: {} API {}, location {}, run {NAME_PREFIX}{id}, tag {TAG}",
        settings.account.provider(),
        settings.account.api_url(),
        settings.target.location
    );
    let first =
        unless_interrupted(sweep::sweep(provider.as_ref(), &settings.deadlines, "before", out))
            .await;
    if settings.sweep_only {
        return first;
    }
    first?;
    let mut ledger = ledger::Ledger::new(settings.target.prices);
    let mut ctx = contract::Ctx {
        provider: provider.clone(),
        clusters: Arc::new(KubeClusterApi::new()),
        target: settings.target.clone(),
        prefix: format!("{NAME_PREFIX}{id}"),
        deadlines: settings.deadlines.clone(),
        ledger: &mut ledger,
        out: &mut *out,
    };
    let result = unless_interrupted(contract::run(&mut ctx)).await;
    if let Err(e) = &result {
        let _ = writeln!(out, "conformance: {e}; sweeping what is left");
    }
    // A second interrupt abandons the sweep (the next run's first sweep, or
    // `--sweep-only`, finishes it).
    let last =
        unless_interrupted(sweep::sweep(provider.as_ref(), &settings.deadlines, "after", out))
            .await;
    ledger.sweep_closes_all();
    let _ = write!(out, "{}", ledger.bill());
    result.and(last)
}

/// `work`, unless SIGINT (Ctrl-C) or SIGTERM comes first: then `work` is dropped where
/// it stands and the answer is [`ConformanceError::Interrupted`]. An object whose create
/// was in flight may still appear; the next run's first sweep finds it.
pub async fn unless_interrupted<T>(
    work: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).ok();
    let terminated = async {
        match term.as_mut() {
            Some(t) => {
                t.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        r = work => r,
        _ = tokio::signal::ctrl_c() => Err(ConformanceError::Interrupted),
        () = terminated => Err(ConformanceError::Interrupted),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn arguments_parse_and_bad_ones_are_named() {
        let a = Args::parse(&args(&["--digitalocean-api-url", "http://127.0.0.1:1"])).unwrap();
        assert_eq!(a.api_url.as_deref(), Some("http://127.0.0.1:1"));
        let a = Args::parse(&args(&["--sweep-only", "--digitalocean-api-url=https://x"])).unwrap();
        assert!(a.sweep_only);
        assert_eq!(a.api_url.as_deref(), Some("https://x"));
        let e = Args::parse(&args(&["--digitalocean-api-url", "ftp://x"])).unwrap_err();
        assert!(e.to_string().contains("--digitalocean-api-url"), "{e}");
        let e = Args::parse(&args(&["--frob"])).unwrap_err();
        assert!(e.to_string().contains("--frob"), "{e}");
        assert!(Args::parse(&args(&["--digitalocean-api-url"])).is_err());
        let a = Args::parse(&args(&[
            "--provider=gke",
            "--gke-api-url",
            "http://127.0.0.1:1",
            "--gcp-token-url=http://127.0.0.1:1/token",
        ]))
        .unwrap();
        assert_eq!(a.provider, Provider::Gke);
        assert_eq!(a.gcp_token_url.as_deref(), Some("http://127.0.0.1:1/token"));
        let e = Args::parse(&args(&["--provider", "aws"])).unwrap_err();
        assert!(e.to_string().contains("--provider"), "{e}");
        let e = Args::parse(&args(&["--gke-api-url", "http://x"])).unwrap_err();
        assert!(e.to_string().contains("--provider gke"), "{e}");
        let e = Args::parse(&args(&["--provider", "gke", "--digitalocean-api-url", "http://x"]))
            .unwrap_err();
        assert!(e.to_string().contains("--digitalocean-api-url"), "{e}");
    }

    #[test]
    fn a_gke_run_needs_a_readable_key_file_and_a_zone_and_never_quotes_the_key() {
        let gke = Args { provider: Provider::Gke, ..Args::default() };
        let none = |_: &str| None;
        let Ok(Plan::Skip(why)) = plan(&gke, &none) else { panic!("not a skip") };
        assert!(why.contains(GKE_KEY_VAR) && why.contains(GKE_LOCATION_VAR), "{why}");
        let missing = |k: &str| (k == GKE_KEY_VAR).then(|| "/nonexistent/key.json".to_owned());
        let Err(e) = plan(&gke, &missing) else { panic!("accepted") };
        assert!(e.to_string().contains(GKE_KEY_VAR) && e.to_string().contains("not found"), "{e}");
        let dir = std::env::temp_dir().join(format!("bc-conformance-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bad = dir.join("bad.json");
        std::fs::write(&bad, "{\"private_key\": \"s3cr3t-key-text\"}").unwrap();
        let bad_path = bad.to_string_lossy().into_owned();
        let var = |k: &str| (k == GKE_KEY_VAR).then(|| bad_path.clone());
        let Err(e) = plan(&gke, &var) else { panic!("accepted") };
        assert!(e.to_string().contains(GKE_KEY_VAR), "{e}");
        assert!(!e.to_string().contains("s3cr3t"), "the key is never quoted: {e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn no_token_is_a_skip_naming_the_variable_and_a_token_is_a_run() {
        let none = |_: &str| None;
        let Ok(Plan::Skip(why)) = plan(&Args::default(), &none) else { panic!("not a skip") };
        assert!(why.contains(TOKEN_VAR) && why.contains(REGION_VAR), "{why}");
        let blank = |_: &str| Some("  ".to_owned());
        assert!(matches!(plan(&Args::default(), &blank), Ok(Plan::Skip(_))));
        let vars = |k: &str| match k {
            TOKEN_VAR => Some("dop_v1_x".to_owned()),
            REGION_VAR => Some("ams3".to_owned()),
            _ => None,
        };
        let Ok(Plan::Run(s)) = plan(&Args::default(), &vars) else { panic!("not a run") };
        let Account::DigitalOcean { token, api_url } = &s.account else { panic!("not DO") };
        assert_eq!((s.target.location.as_str(), api_url.as_str()), ("ams3", DEFAULT_BASE_URL));
        assert_eq!(token.expose(), "dop_v1_x");
        let bad = |k: &str| match k {
            TOKEN_VAR => Some("t".to_owned()),
            _ => Some("NYC 1".to_owned()),
        };
        let Err(e) = plan(&Args::default(), &bad) else { panic!("accepted") };
        assert!(e.to_string().contains(REGION_VAR), "{e}");
    }

    #[test]
    fn run_ids_are_lower_case_base36() {
        let id = run_id(1_796_000_000, 0xabcde);
        assert!(id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()), "{id}");
        assert_ne!(run_id(1, 2), run_id(1, 3));
    }
}
