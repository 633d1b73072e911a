//! `bc-reconciler`: the reconcilers (SPEC §13) against `--database-url`, as one replica
//! of many — replicas share the work queue through leases, so several may run on one
//! PostgreSQL. Thin by design: flags (each also an environment variable; the
//! per-account provider-call budget is `--budget-per-minute`/`--budget-per-hour`) in, then
//! `bc_stack` wires and runs the runtime, the event relay (to NATS with `--nats-url`)
//! and the idempotency purge until SIGINT/SIGTERM.
//!
//! Exit codes: 0 after a signal (in-flight activations finished, leases released), 1 on
//! an error (one line naming it, never a secret), 2 on bad flags.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use bc_domain::ports::WorkKind;
use bc_stack::wire::{self, Adapters, ReconcileOptions, Served};
use bc_stack::{BudgetArgs, SharedArgs};
use clap::Parser;

/// The reconcilers of the Better Compute control plane.
#[derive(Debug, Parser)]
#[command(name = "bc-reconciler", version, about)]
struct Cli {
    #[command(flatten)]
    shared: SharedArgs,
    /// Run only this kind (repeatable): kubernetes.substrates, kubernetes.clusters,
    /// kubernetes.nodepools, vps.provider-resources (or substrates, clusters, nodepools,
    /// provider-resources).
    #[arg(long = "only", env = "BC_ONLY", value_delimiter = ',', value_parser = parse_kind)]
    only: Vec<WorkKind>,
    /// Activations of one kind running at once.
    #[arg(long, env = "BC_CONCURRENCY")]
    concurrency: Option<usize>,
    /// This replica's id (its lease owner name); unique per replica. Default: host name
    /// and a random suffix.
    #[arg(long, env = "BC_REPLICA_ID")]
    replica_id: Option<String>,
    #[command(flatten)]
    budget: BudgetArgs,
    /// The longest an object — converging, or in error — waits before it is looked at
    /// again, in seconds. Default: each reconciler's own wait, made for a real provider's
    /// minutes (30 s for a cluster being made); for a simulated provider whose changes
    /// take seconds (bc-sim).
    #[arg(long, env = "BC_WAIT_MAX_SECONDS", value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    wait_max_seconds: Option<u64>,
}

/// A kind by its queue name or its short name.
fn parse_kind(s: &str) -> Result<WorkKind, String> {
    WorkKind::parse(s)
        .or_else(|| WorkKind::ALL.into_iter().find(|k| k.as_str().rsplit('.').next() == Some(s)))
        .ok_or_else(|| {
            let known: Vec<&str> = WorkKind::ALL.iter().map(|k| k.as_str()).collect();
            format!("unknown kind {s:?} (known: {})", known.join(", "))
        })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let format = cli.shared.log_format;
    bc_stack::logs::run_main("bc-reconciler", format, run(cli))
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let shared = cli.shared;
    let url =
        shared.database_url.as_deref().context("--database-url (BC_DATABASE_URL) is required")?;
    let key = shared.secret_key.as_deref().context(
        "--secret-key (BC_SECRET_KEY) is required: the key bc-api seals provider credentials with",
    )?;
    let public_url = shared
        .public_url
        .clone()
        .context("--public-url (BC_PUBLIC_URL) is required: the API URL bcd calls")?;
    let store = Arc::new(bc_stack::db::open(url).await?);
    let adapters = Adapters::real(store, key, &shared.provider_urls())?;
    let replica = cli.replica_id.unwrap_or_else(|| wire::replica_id("bc-reconciler"));
    let mut options = ReconcileOptions::new(&replica, &public_url, &shared.bcd_image);
    options.kinds = cli.only;
    options.concurrency = cli.concurrency;
    options.budget = cli.budget.config();
    options.wait_max = cli.wait_max_seconds.map(std::time::Duration::from_secs);
    let work = Arc::default();
    let rt = wire::runtime(&adapters, &options, work)?;
    let kinds: Vec<String> = rt.kinds().iter().map(|k| k.to_string()).collect();
    let mut served = Served::default();
    served.reconcilers(rt);
    if let Some(relay) = wire::relay(&adapters, &replica, None, shared.nats_url.as_deref()).await? {
        served.relay(relay, None);
    }
    served.idempotency_purge(&adapters, &replica);
    tracing::info!(%replica, kinds = %kinds.join(","), "bc-reconciler running");
    served.until_signal().await;
    Ok(())
}
