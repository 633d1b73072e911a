//! The flags of SPEC §13, each also read from its environment variable, shared by
//! `bc-api` and `bc-reconciler` (declared once, flattened into both).
//!
//! Invariant: a secret given by flag or environment (`--secret-key`) is never printed:
//! clap hides its value in help output, and `Debug` of these structs redacts it.

use std::net::SocketAddr;

use bc_domain::model::QuotaResource;

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
    #[arg(long, env = "BC_DATABASE_URL", global = true)]
    pub database_url: Option<String>,
    /// The server's secret key (base64 of 32 bytes): encrypts provider credentials.
    #[arg(long, env = "BC_SECRET_KEY", hide_env_values = true, global = true)]
    pub secret_key: Option<String>,
    /// The public URL bcd calls (written into each cluster's join Secret).
    #[arg(long, env = "BC_PUBLIC_URL", global = true)]
    pub public_url: Option<String>,
    /// The bcd container image the DaemonSet runs.
    #[arg(long, env = "BC_BCD_IMAGE", default_value = DEFAULT_BCD_IMAGE, global = true)]
    pub bcd_image: String,
    /// DigitalOcean's API base URL.
    #[arg(long, env = "BC_DIGITALOCEAN_API_URL", default_value = bc_providers::digitalocean::DEFAULT_BASE_URL, global = true)]
    pub digitalocean_api_url: String,
    /// Also publish events to this NATS JetStream server.
    #[arg(long, env = "BC_NATS_URL", global = true)]
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
            .field("nats_url", &self.nats_url.as_deref().map(redact_url))
            .field("log_format", &self.log_format)
            .finish()
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
    fn quotas_parse_and_name_what_is_wrong() {
        assert_eq!(parse_quota("loadBalancers=5"), Ok((QuotaResource::LoadBalancers, 5)));
        assert!(parse_quota("volumes=1").unwrap_err().contains("volumes"));
        assert!(parse_quota("loadBalancers=x").unwrap_err().contains("\"x\""));
        assert!(parse_quota("loadBalancers").unwrap_err().contains("RESOURCE=N"));
    }

    #[test]
    fn passwords_in_urls_are_redacted() {
        assert_eq!(redact_url("postgres://bc:hunter2@db/bc"), "postgres://bc:***@db/bc");
        assert_eq!(redact_url("sqlite://.bc-dev/bc.db"), "sqlite://.bc-dev/bc.db");
    }
}
