//! `bc-api`: the HTTP API (SPEC §13) — `serve [--reconcile]`, `dev`, `migrate`,
//! `token create|revoke|list`. Thin by design: it parses flags (each also an environment
//! variable), then hands them to `bc_stack`, which wires and runs everything.
//!
//! Exit codes: 0 after SIGINT/SIGTERM or a finished task, 1 on an error (printed as one
//! line naming what is wrong, never a secret), 2 on bad flags (clap).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use bc_domain::TenantId;
use bc_domain::model::{Grant, Role, Scope};
use bc_stack::wire::{self, Adapters, ReconcileOptions, Served};
use bc_stack::{ApiArgs, BudgetArgs, DevOptions, DevStack, SharedArgs};
use clap::{Parser, Subcommand};

/// The Better Compute Kubernetes and provider-resources control plane: the API.
#[derive(Debug, Parser)]
#[command(name = "bc-api", version, about)]
struct Cli {
    #[command(flatten)]
    shared: SharedArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the API (on PostgreSQL or SQLite; add --reconcile to run the reconcilers too).
    Serve {
        #[command(flatten)]
        api: ApiArgs,
        /// Run the reconcilers (and the event relay) in this process.
        #[arg(long, env = "BC_RECONCILE")]
        reconcile: bool,
        // The reconcilers' per-account provider-call budget (with --reconcile).
        #[command(flatten)]
        budget: BudgetArgs,
    },
    /// Everything on this machine with no setup: SQLite in ./.bc-dev, the simulated cloud,
    /// the reconcilers, a tenant `dev` and its token.
    Dev {
        /// Address to listen on.
        #[arg(long, env = "BC_LISTEN", default_value = bc_stack::config::DEFAULT_LISTEN)]
        listen: std::net::SocketAddr,
        /// The state directory (database, key, token, the simulated cloud, simulator.json).
        #[arg(long, env = "BC_DEV_DIR", default_value = ".bc-dev")]
        dir: PathBuf,
        /// Start over: remove the state directory first.
        #[arg(long)]
        fresh: bool,
        /// Drive the tour itself (a pool with a substrate, a load balancer, an adopted
        /// cluster) until everything is ready, print the billing usage, and keep serving.
        #[arg(long)]
        demo: bool,
    },
    /// Apply the database migrations and exit.
    Migrate,
    /// API tokens (printed once; stored as a hash).
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Make a token holding one role on a scope; prints it once.
    Create {
        /// The tenant.
        #[arg(long)]
        tenant: String,
        /// viewer, editor or operator.
        #[arg(long)]
        role: String,
        /// The scope (default `compute-tenant/<tenant>`): `compute-system`,
        /// `pool/<id>`, `provider-account/<id>`, `provider-load-balancer/<id>`, …
        #[arg(long)]
        scope: Option<String>,
    },
    /// Revoke a token by its id (`tok_…`).
    Revoke {
        /// The token id.
        id: String,
    },
    /// List every token: id, active or revoked, when made, grants (never a secret).
    List,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let format = cli.shared.log_format;
    bc_stack::logs::run_main("bc-api", format, run(cli))
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let shared = cli.shared;
    match cli.command {
        Command::Serve { api, reconcile, budget } => serve(shared, api, reconcile, budget).await,
        Command::Dev { listen, dir, fresh, demo } => {
            let mut options = DevOptions::new(dir);
            options.listen = listen;
            options.fresh = fresh;
            options.nats_url = shared.nats_url.clone();
            options.database_url = shared.database_url.clone();
            let stack = DevStack::start(options).await?;
            println!("{}", stack.banner());
            if demo {
                bc_stack::dev::demo(&stack).await?;
            }
            stack.until_signal().await;
            Ok(())
        }
        Command::Migrate => {
            let url = database_url(&shared)?;
            bc_stack::db::open(url).await?;
            println!("migrated: the schema is at {}", bc_stack::db::newest_migration());
            Ok(())
        }
        Command::Token { command } => token(&shared, command).await,
    }
}

fn database_url(shared: &SharedArgs) -> anyhow::Result<&str> {
    shared.database_url.as_deref().context("--database-url (BC_DATABASE_URL) is required")
}

fn secret_key(shared: &SharedArgs) -> anyhow::Result<&str> {
    shared.secret_key.as_deref().context(
        "--secret-key (BC_SECRET_KEY) is required outside dev mode: base64 of 32 random bytes, e.g. `head -c32 /dev/urandom | base64`",
    )
}

async fn serve(
    shared: SharedArgs,
    api: ApiArgs,
    reconcile: bool,
    budget: BudgetArgs,
) -> anyhow::Result<()> {
    let key = secret_key(&shared)?;
    // A bad policy file stops the start before anything listens (SPEC §3).
    let authorizer = bc_stack::config::policy_authorizer(api.policy_file.as_deref())?;
    let listener = wire::bind(api.listen).await?;
    let store = Arc::new(bc_stack::db::open(database_url(&shared)?).await?);
    let adapters = Adapters::real(store, key, &shared.provider_urls())?;
    let public_url = shared.public_url.clone().unwrap_or_else(|| format!("http://{}", api.listen));
    if let Some(warning) = bc_stack::config::public_url_warning(&public_url) {
        tracing::warn!("{warning}");
    }
    let settings = bc_api::Settings {
        default_pool_quotas: api.default_pool_quota.iter().copied().collect(),
        public_url: public_url.clone(),
        trusted_proxies: bc_api::client_addr::TrustedProxies::new(api.trusted_proxy.clone()),
        ..bc_api::Settings::default()
    };
    let (work, events) = (Arc::default(), Arc::default());
    let mut served = Served::default();
    served.http(
        listener,
        wire::api_router_authorized(
            &adapters,
            settings,
            authorizer.map(|a| a as Arc<dyn bc_domain::ports::Authorizer>),
            budget.config(),
            Arc::clone(&work),
            Arc::clone(&events),
            served.cancel.clone(),
        ),
    );
    if reconcile {
        let replica = wire::replica_id("bc-api");
        let mut options = ReconcileOptions::new(&replica, &public_url, &shared.bcd_image);
        options.budget = budget.config();
        served.reconcilers(wire::runtime(&adapters, &options, work.clone())?);
        if let Some(relay) =
            wire::relay(&adapters, &replica, Some(events), shared.nats_url.as_deref()).await?
        {
            served.relay(relay, Some(work));
        }
        served.idempotency_purge(&adapters, &replica);
    }
    tracing::info!(listen = %api.listen, %public_url, reconcile, "bc-api serving");
    served.until_signal().await;
    Ok(())
}

async fn token(shared: &SharedArgs, command: TokenCommand) -> anyhow::Result<()> {
    let store = bc_stack::db::open(database_url(shared)?).await?;
    let clock = bc_domain::ports::SystemClock;
    match command {
        TokenCommand::Create { tenant, role, scope } => {
            let tenant = TenantId::parse(&tenant)
                .map_err(|e| anyhow::anyhow!("--tenant {tenant:?}: {e}"))?;
            let role: Role = serde_json::from_value(serde_json::Value::String(role.clone()))
                .map_err(|_| anyhow::anyhow!("--role {role:?}: one of viewer, editor, operator"))?;
            let scope = match scope {
                None => Scope::Tenant(tenant.clone()),
                Some(s) => Scope::parse(&s).map_err(|e| anyhow::anyhow!("--scope {s:?}: {e}"))?,
            };
            let tenant_id = (scope != Scope::System).then_some(tenant);
            let (id, plain) =
                bc_stack::tokens::create(&store, &clock, vec![Grant { role, scope, tenant_id }])
                    .await?;
            eprintln!("token {id} made; it is printed once, below:");
            println!("{plain}");
        }
        TokenCommand::Revoke { id } => {
            let parsed = bc_domain::TokenId::parse(&id)
                .map_err(|e| anyhow::anyhow!("token id {id:?}: {e}"))?;
            if !bc_stack::tokens::revoke(&store, &clock, &parsed).await? {
                bail!("no token {id}");
            }
            println!("revoked {id}");
        }
        TokenCommand::List => {
            for line in bc_stack::tokens::list(&store).await? {
                println!("{line}");
            }
        }
    }
    Ok(())
}
