//! bc-conformance: the provider adapters' contract — what the reconcilers rely on the
//! DigitalOcean adapter and the kube adapter to do — as one run against any
//! DigitalOcean-shaped API: real DigitalOcean (`cargo xtask conformance`, like a
//! Terraform provider's acceptance tests) or the simulator (this crate's tests, so CI
//! runs every check). One entry point, [`cli`], serves both.
//!
//! Invariants: everything a run makes is named under [`NAME_PREFIX`] and tagged [`TAG`],
//! and the sweeper ([`sweep`]) removes whatever carries both, before the run and after it
//! whatever happened (a failed check, SIGINT or SIGTERM), so only a killed run leaves
//! objects, and the next run's first sweep removes them; nothing without both is ever
//! deleted. Every wait is bounded in time and in count. The token is never
//! printed.

pub mod contract;
pub mod ledger;
pub mod sweep;
pub mod wait;

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use bc_domain::ProviderError;
use bc_domain::model::SecretString;
use bc_domain::ports::{ClusterError, ProviderImpl, SystemClock};
use bc_providers::digitalocean::{DEFAULT_BASE_URL, DigitalOcean, DigitalOceanConfig};
use bc_providers::kube::KubeClusterApi;

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

/// The last line of a run without a token.
pub const SKIPPED: &str = "skipped";

/// The last line of a run whose every check held.
pub const PASSED: &str = "passed";

/// The usage text of the command.
pub const USAGE: &str = "\
usage: bc-conformance [--digitalocean-api-url URL] [--sweep-only]

Runs the provider adapters' contract against DigitalOcean with the token in
BC_CONFORMANCE_DIGITALOCEAN_TOKEN (region: BC_CONFORMANCE_DIGITALOCEAN_REGION, default
nyc1): a one-node cluster of the cheapest size, a second node pool resized and deleted,
a regional load balancer created, updated and deleted, and our Namespace, Secret,
ServiceAccount and DaemonSet applied in the cluster; then deletes everything. Objects are
named bc-conf-<run>-… and tagged bc-conformance; a sweeper deletes whatever carries both,
first and last. Ctrl-C stops the run and sweeps (a second one abandons the sweep:
run --sweep-only later). Without the token it prints `skipped` and exits 0.

  --digitalocean-api-url URL   another DigitalOcean-shaped API (the simulator)
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

/// What the command line asks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Args {
    /// `--digitalocean-api-url`: the API's base URL (without `/v2`).
    pub api_url: Option<String>,
    /// `--sweep-only`.
    pub sweep_only: bool,
    /// `--help`.
    pub help: bool,
}

impl Args {
    /// Parses the arguments after the program name.
    pub fn parse(args: &[String]) -> Result<Self> {
        let mut out = Self::default();
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            match arg.as_str() {
                "--digitalocean-api-url" => match it.next() {
                    Some(url) => out.api_url = Some(url.clone()),
                    None => {
                        return Err(ConformanceError::Usage(
                            "--digitalocean-api-url needs a URL".into(),
                        ));
                    }
                },
                "--sweep-only" => out.sweep_only = true,
                "--help" | "-h" => out.help = true,
                other => match other.strip_prefix("--digitalocean-api-url=") {
                    Some(url) => out.api_url = Some(url.to_owned()),
                    None => {
                        return Err(ConformanceError::Usage(format!("unknown argument `{other}`")));
                    }
                },
            }
        }
        if let Some(url) = &out.api_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(ConformanceError::Usage(format!(
                "--digitalocean-api-url: {url:?} is not an http(s) URL"
            )));
        }
        Ok(out)
    }
}

/// What a run needs, read from the arguments and the environment.
pub struct Settings {
    /// The API token (never printed).
    pub token: SecretString,
    /// The region of everything made.
    pub region: String,
    /// The API's base URL.
    pub api_url: String,
    /// Only sweep.
    pub sweep_only: bool,
    /// The waits' bounds.
    pub deadlines: Deadlines,
}

/// What to do: skip (saying why) or run.
pub enum Plan {
    /// No token: the line to print before [`SKIPPED`].
    Skip(String),
    /// Run with these settings.
    Run(Settings),
}

/// Decides from `args` and the variables `var` reads (an empty value counts as unset).
pub fn plan(args: &Args, var: &dyn Fn(&str) -> Option<String>) -> Result<Plan> {
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
    Ok(Plan::Run(Settings {
        token: SecretString::new(token.trim()),
        region,
        api_url: args.api_url.clone().unwrap_or_else(|| DEFAULT_BASE_URL.to_owned()),
        sweep_only: args.sweep_only,
        deadlines: Deadlines::digitalocean(),
    }))
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
    let config = DigitalOceanConfig::with_base_url(settings.api_url.clone());
    let adapter = DigitalOcean::new(config, &settings.token, Arc::new(SystemClock))
        .map_err(|error| ConformanceError::Provider { step: "adapter".into(), error })?;
    let provider: Arc<dyn ProviderImpl> = Arc::new(adapter);
    let unix_secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let id = run_id(unix_secs, rand::random());
    let _ = writeln!(
        out,
        "conformance: DigitalOcean API {}, region {}, run {NAME_PREFIX}{id}, tag {TAG}",
        settings.api_url, settings.region
    );
    let first =
        unless_interrupted(sweep::sweep(provider.as_ref(), &settings.deadlines, "before", out))
            .await;
    if settings.sweep_only {
        return first;
    }
    first?;
    let mut ledger = ledger::Ledger::default();
    let mut ctx = contract::Ctx {
        provider: provider.clone(),
        clusters: Arc::new(KubeClusterApi::new()),
        region: settings.region.clone(),
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
        assert_eq!((s.region.as_str(), s.api_url.as_str()), ("ams3", DEFAULT_BASE_URL));
        assert_eq!(s.token.expose(), "dop_v1_x");
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
