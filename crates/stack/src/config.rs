//! The flags of SPEC §13, each also read from its environment variable, shared by
//! `bc-api` and `bc-reconciler` (declared once, flattened into both).
//!
//! Invariants: a secret given by flag or environment (`--secret-key`) is never printed:
//! clap hides its value in help output, and `Debug` of these structs redacts it. A
//! provider-call budget above what the provider allows a token, or of zero, is refused
//! at parse time with an error naming the flag, so no process runs with one.

use std::net::SocketAddr;
use std::time::Duration;

use bc_domain::model::QuotaResource;
use bc_domain::rules::budget::{BudgetConfig, DEFAULT_PER_HOUR, DEFAULT_PER_MINUTE};
use bc_providers::digitalocean::{DigitalOceanConfig, RateLimitConfig};

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// The flags every server binary takes.
#[derive(Clone, clap::Args)]
pub struct SharedArgs {
    /// Database: `sqlite://PATH?mode=rwc` or `postgres://…`.
    #[arg(long, env = "BC_DATABASE_URL", hide_env_values = true, global = true)]
    pub database_url: Option<String>,
    /// The server's secret key (base64 of 32 bytes): encrypts provider credentials.
    #[arg(long, env = "BC_SECRET_KEY", hide_env_values = true, global = true)]
    pub secret_key: Option<String>,
    /// The public URL bcd calls (written into each cluster's join Secret).
    #[arg(long, env = "BC_PUBLIC_URL", global = true)]
    pub public_url: Option<String>,
    /// The bcd container image the DaemonSet runs, as published from `cargo xtask image`:
    /// `skopeo copy oci-archive:target/image/bcd.oci.tar docker://REGISTRY/bcd:TAG`, then
    /// REGISTRY/bcd:TAG here (nothing is published under the default).
    #[arg(long, env = "BC_BCD_IMAGE", default_value = DEFAULT_BCD_IMAGE, global = true)]
    pub bcd_image: String,
    /// DigitalOcean's API base URL.
    #[arg(long, env = "BC_DIGITALOCEAN_API_URL", default_value = bc_providers::digitalocean::DEFAULT_BASE_URL, global = true)]
    pub digitalocean_api_url: String,
    /// Google Kubernetes Engine's API base URL (without `/v1`).
    #[arg(long, env = "BC_GKE_API_URL", default_value = bc_providers::gke::DEFAULT_API_URL, global = true)]
    pub gke_api_url: String,
    /// The OAuth 2.0 token endpoint GKE accounts' access tokens are minted at (a service
    /// account key's own `token_uri` is never used).
    #[arg(long, env = "BC_GCP_TOKEN_URL", default_value = bc_providers::gke::DEFAULT_TOKEN_URL, global = true)]
    pub gcp_token_url: String,
    /// The longest one DigitalOcean request may take, in seconds (the adapter's whole-request
    /// timeout). A load balancer create whose outcome is unknown is looked for only after
    /// this long (it may land until then), so a provider answering in milliseconds — a
    /// simulator on this host — may be given less.
    #[arg(long, env = "BC_DIGITALOCEAN_TIMEOUT_SECONDS", value_name = "SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..), global = true)]
    pub digitalocean_timeout_seconds: u64,
    /// Also publish events to this NATS JetStream server.
    #[arg(long, env = "BC_NATS_URL", hide_env_values = true, global = true)]
    pub nats_url: Option<String>,
    /// Log format.
    #[arg(long, env = "BC_LOG_FORMAT", value_enum, default_value = "text", global = true)]
    pub log_format: LogFormat,
}

impl std::fmt::Debug for SharedArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedArgs")
            .field("database_url", &self.database_url.as_deref().map(redact_url))
            .field("secret_key", &self.secret_key.as_ref().map(|_| "<redacted>"))
            .field("public_url", &self.public_url)
            .field("bcd_image", &self.bcd_image)
            .field("digitalocean_api_url", &self.digitalocean_api_url)
            .field("gke_api_url", &self.gke_api_url)
            .field("gcp_token_url", &self.gcp_token_url)
            .field("digitalocean_timeout_seconds", &self.digitalocean_timeout_seconds)
            .field("nats_url", &self.nats_url.as_deref().map(redact_url))
            .field("log_format", &self.log_format)
            .finish()
    }
}

impl SharedArgs {
    /// The providers' URLs these flags name.
    pub fn provider_urls(&self) -> ProviderUrls {
        ProviderUrls {
            digitalocean: self.digitalocean_api_url.clone(),
            gke: self.gke_api_url.clone(),
            gcp_token: self.gcp_token_url.clone(),
            digitalocean_timeout: Duration::from_secs(self.digitalocean_timeout_seconds),
        }
    }
}

/// Where the providers' APIs are: server configuration, never tenant input (SPEC §5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderUrls {
    /// DigitalOcean's API base URL (without `/v2`).
    pub digitalocean: String,
    /// GKE's API base URL (without `/v1`).
    pub gke: String,
    /// The OAuth 2.0 token endpoint of GKE accounts.
    pub gcp_token: String,
    /// The DigitalOcean adapter's whole-request timeout.
    pub digitalocean_timeout: Duration,
}

impl ProviderUrls {
    /// Every provider's face of one simulator at `url` (its DigitalOcean `/v2/…`, its
    /// GKE `/v1/…` and its token endpoint `/token` share one listener).
    pub fn simulator(url: &str) -> Self {
        let url = url.trim_end_matches('/');
        Self {
            digitalocean: url.to_owned(),
            gke: url.to_owned(),
            gcp_token: format!("{url}/token"),
            digitalocean_timeout: DigitalOceanConfig::default().request_timeout,
        }
    }
}

/// The flags of the API server (`serve` and `dev`).
#[derive(Debug, Clone, clap::Args)]
pub struct ApiArgs {
    /// Address to listen on.
    #[arg(long, env = "BC_LISTEN", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// A quota row every new pool gets, `RESOURCE=N` (repeatable).
    #[arg(long = "default-pool-quota", env = "BC_DEFAULT_POOL_QUOTA", value_delimiter = ',', value_parser = parse_quota)]
    pub default_pool_quota: Vec<(QuotaResource, u32)>,
    /// Cedar policies of the operator's own, beside the roles' (SPEC §3), e.g.
    /// `forbid(principal, action, resource == LoadBalancer::"lb_…");`; validated against
    /// the schema at start.
    #[arg(long = "policy-file", env = "BC_POLICY_FILE", value_name = "FILE")]
    pub policy_file: Option<std::path::PathBuf>,
    /// A proxy in front of this server whose `X-Forwarded-For` names the client (SPEC
    /// §9: what `agents.join`'s failures are counted by), as `ADDRESS/BITS` or one
    /// address (repeatable; comma-separated in the environment).
    #[arg(long = "trusted-proxy", env = "BC_TRUSTED_PROXY", value_name = "CIDR", value_delimiter = ',', value_parser = bc_api::client_addr::parse_trusted_proxy)]
    pub trusted_proxy: Vec<bc_api::client_addr::IpNet>,
}

/// The authorizer of `--policy-file`: the role templates and the file's policies,
/// validated against the schema; `None` without a file. A file that cannot be read, does
/// not parse or does not validate is an error naming the file and the line.
pub fn policy_authorizer(
    file: Option<&std::path::Path>,
) -> anyhow::Result<Option<std::sync::Arc<bc_api::authz::CedarAuthorizer>>> {
    let Some(file) = file else { return Ok(None) };
    let text = std::fs::read_to_string(file)
        .map_err(|e| anyhow::anyhow!("--policy-file {}: {e}", file.display()))?;
    let authorizer = bc_api::authz::CedarAuthorizer::with_policies(&text)
        .map_err(|e| anyhow::anyhow!("--policy-file {}: {e}", file.display()))?;
    Ok(Some(std::sync::Arc::new(authorizer)))
}

/// The per-account provider-call budget of the reconcilers (`bc-reconciler`, and
/// `bc-api serve --reconcile`): shared by every replica through the store, so it bounds
/// the calls of all of them together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::Args)]
pub struct BudgetArgs {
    /// Provider calls per account in any sliding minute, all replicas together: 1 to
    /// DigitalOcean's 250 per token [default: 240].
    #[arg(long = "budget-per-minute", env = "BC_BUDGET_PER_MINUTE", value_name = "N", value_parser = parse_budget_per_minute)]
    pub per_minute: Option<u32>,
    /// Provider calls per account in any sliding hour, all replicas together: 1 to
    /// DigitalOcean's 5000 per token [default: 4800].
    #[arg(long = "budget-per-hour", env = "BC_BUDGET_PER_HOUR", value_name = "N", value_parser = parse_budget_per_hour)]
    pub per_hour: Option<u32>,
}

impl BudgetArgs {
    /// The budget: the default's shape ([`BudgetConfig::limits`]) at the limits given,
    /// the default's where none is.
    pub fn config(&self) -> BudgetConfig {
        BudgetConfig::limits(
            self.per_minute.unwrap_or(DEFAULT_PER_MINUTE),
            self.per_hour.unwrap_or(DEFAULT_PER_HOUR),
        )
    }
}

/// Parses `--budget-per-minute`: a whole number from 1 to the provider's per-minute
/// limit of a token.
pub fn parse_budget_per_minute(s: &str) -> Result<u32, String> {
    parse_budget(s, RateLimitConfig::default().per_minute, "minute")
}

/// Parses `--budget-per-hour`: a whole number from 1 to the provider's per-hour limit of
/// a token.
pub fn parse_budget_per_hour(s: &str) -> Result<u32, String> {
    parse_budget(s, RateLimitConfig::default().per_hour, "hour")
}

/// A budget of 1..=`max` calls per `window`. Zero would stop every reconciler for good;
/// above `max` the provider itself answers 429 before the budget says no, so both are
/// refused rather than clamped.
fn parse_budget(s: &str, max: u32, window: &str) -> Result<u32, String> {
    let n: u32 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a whole number of calls per {window}"))?;
    if n == 0 || n > max {
        return Err(format!(
            "{n} calls per {window} is out of range: at least 1, at most {max} (DigitalOcean's limit per token)"
        ));
    }
    Ok(n)
}

/// The default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// The default bcd image.
pub const DEFAULT_BCD_IMAGE: &str = "ghcr.io/better-compute/bcd:latest";

/// Parses `loadBalancers=5`.
pub fn parse_quota(s: &str) -> Result<(QuotaResource, u32), String> {
    let (name, n) = s.split_once('=').ok_or("expected RESOURCE=N, e.g. loadBalancers=5")?;
    let resource = QuotaResource::parse(name.trim())
        .ok_or_else(|| format!("unknown quota resource {name:?} (known: loadBalancers)"))?;
    let n = n.trim().parse().map_err(|_| format!("quota limit {n:?} is not a whole number"))?;
    Ok((resource, n))
}

/// The warning `bc-api serve` logs at start when bcd would call `public_url` in clear:
/// a plain `http://` URL whose host is not loopback (SPEC §9; bcd refuses it without
/// `BCD_INSECURE_HTTP=1`, which the DaemonSet then sets, so join tokens cross the network
/// unencrypted). `None` for `https://` and for loopback (dev mode, tests).
pub fn public_url_warning(public_url: &str) -> Option<String> {
    if !bc_domain::agent::is_plain_http(public_url) {
        return None;
    }
    let parsed = reqwest::Url::parse(public_url.trim()).ok()?;
    let host = parsed.host_str()?.trim_start_matches('[').trim_end_matches(']');
    let loopback = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    };
    (!loopback).then(|| {
        format!(
            "the public URL {} is plain http:// and not loopback: bcd sends its join token and node credential there in clear; serve the API behind https:// and set --public-url to it",
            redact_url(public_url)
        )
    })
}

/// A URL with its password (if any) replaced, for logs.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}{user}:***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_http_public_url_off_loopback_is_warned_of() {
        for url in ["http://203.0.113.5:8080", "http://api.internal", "http://0.0.0.0:8080"] {
            assert!(public_url_warning(url).is_some_and(|w| w.contains(url)), "{url}");
        }
        for url in
            ["https://api.example", "http://127.0.0.1:8080", "http://localhost", "http://[::1]:80"]
        {
            assert_eq!(public_url_warning(url), None, "{url}");
        }
    }

    #[test]
    fn quotas_parse_and_name_what_is_wrong() {
        assert_eq!(parse_quota("loadBalancers=5"), Ok((QuotaResource::LoadBalancers, 5)));
        assert!(parse_quota("volumes=1").unwrap_err().contains("volumes"));
        assert!(parse_quota("loadBalancers=x").unwrap_err().contains("\"x\""));
        assert!(parse_quota("loadBalancers").unwrap_err().contains("RESOURCE=N"));
    }

    fn urls_from(args: &[&str]) -> Result<ProviderUrls, String> {
        use clap::Parser as _;
        let argv = std::iter::once("bin").chain(args.iter().copied());
        WithShared::try_parse_from(argv)
            .map(|w| w.shared.provider_urls())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_digitalocean_timeout_defaults_to_the_adapters_and_takes_whole_seconds() {
        let default = DigitalOceanConfig::default().request_timeout;
        assert_eq!(urls_from(&[]).map(|u| u.digitalocean_timeout), Ok(default));
        assert_eq!(ProviderUrls::simulator("http://127.0.0.1:9").digitalocean_timeout, default);
        let short = urls_from(&["--digitalocean-timeout-seconds", "5"]).expect("5 s");
        assert_eq!(short.digitalocean_timeout, Duration::from_secs(5));
        for bad in ["0", "-1", "soon"] {
            let flag = format!("--digitalocean-timeout-seconds={bad}");
            let e = urls_from(&[&flag]).expect_err(bad);
            assert!(e.contains("--digitalocean-timeout-seconds"), "{bad}: {e}");
        }
    }

    /// A binary's flags in miniature: the budget flattened as the binaries do.
    #[derive(Debug, clap::Parser)]
    struct WithBudget {
        #[command(flatten)]
        budget: BudgetArgs,
    }

    fn budget_from(args: &[&str]) -> Result<BudgetConfig, String> {
        use clap::Parser as _;
        let argv = std::iter::once("bin").chain(args.iter().copied());
        WithBudget::try_parse_from(argv).map(|w| w.budget.config()).map_err(|e| e.to_string())
    }

    #[test]
    fn budgets_default_to_the_default_and_take_the_limits_given() {
        assert_eq!(budget_from(&[]), Ok(BudgetConfig::default()));
        assert_eq!(
            budget_from(&["--budget-per-minute", "240", "--budget-per-hour", "4800"]),
            Ok(BudgetConfig::default())
        );
        let small = budget_from(&["--budget-per-minute", "20"]).expect("20 a minute");
        assert_eq!((small.minute.limit, small.hour.limit), (20, 4_800));
        let hourly = budget_from(&["--budget-per-hour", "5000"]).expect("DigitalOcean's own");
        assert_eq!((hourly.minute.limit, hourly.hour.limit), (240, 5_000));
        assert_eq!(budget_from(&["--budget-per-minute", "250"]).map(|c| c.minute.limit), Ok(250));
    }

    #[test]
    fn budgets_of_zero_or_above_the_providers_limit_are_refused_naming_the_flag() {
        for (flag, bad) in [
            ("--budget-per-minute", "0"),
            ("--budget-per-minute", "251"),
            ("--budget-per-minute", "-3"),
            ("--budget-per-minute", "many"),
            ("--budget-per-hour", "0"),
            ("--budget-per-hour", "5001"),
        ] {
            let e = budget_from(&[&format!("{flag}={bad}")]).expect_err(bad);
            assert!(e.contains(flag), "{flag} {bad}: {e}");
            assert!(e.contains(bad), "{flag} {bad}: {e}");
        }
        let e = parse_budget_per_minute("251").unwrap_err();
        assert!(e.contains("at most 250") && e.contains("per minute"), "{e}");
        let e = parse_budget_per_hour("0").unwrap_err();
        assert!(e.contains("at least 1") && e.contains("at most 5000"), "{e}");
        assert!(parse_budget_per_hour("x").unwrap_err().contains("whole number"));
    }

    /// The shared flags in miniature, as the binaries flatten them.
    #[derive(Debug, clap::Parser)]
    struct WithShared {
        #[command(flatten)]
        shared: SharedArgs,
    }

    /// Issue 29, item 9: `--help` never prints a value taken from the environment for a
    /// flag that may hold a password or a key (SPEC §13).
    #[test]
    fn help_never_shows_the_values_of_secret_bearing_environment_variables() {
        use clap::CommandFactory as _;
        let cmd = WithShared::command();
        for id in ["database_url", "secret_key", "nats_url"] {
            let arg = cmd.get_arguments().find(|a| a.get_id() == id).expect(id);
            assert!(arg.get_env().is_some(), "{id} is also an environment variable");
            assert!(arg.is_hide_env_values_set(), "--help would print {id}'s value");
        }
    }

    #[test]
    fn passwords_in_urls_are_redacted() {
        assert_eq!(redact_url("postgres://bc:hunter2@db/bc"), "postgres://bc:***@db/bc");
        assert_eq!(redact_url("sqlite://.bc-dev/bc.db"), "sqlite://.bc-dev/bc.db");
    }
}
