//! `bcd`: the node agent of SPEC §9. Thin by design: it reads its flags and environment
//! (`BCD_SERVER_URL`, `BCD_JOIN_TOKEN`, `NODE_NAME`, mapped in by the DaemonSet), sets up
//! logging and signal handling, and runs `bc_agent::run` until SIGTERM/SIGINT.
//!
//! Exit codes: 0 after a signal, 1 when the server refuses the join token for good (the
//! kubelet restarts the container, which then reads the current join Secret), 2 on a
//! missing variable.

use std::process::ExitCode;

use bc_agent::{AgentClient, AgentConfig, AgentState, TokioPause};
use clap::Parser;
use tokio_util::sync::CancellationToken;

/// The bcd node agent: joins the pool named by its join token and heartbeats.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Log format.
    #[arg(long, env = "BC_LOG_FORMAT", value_parser = ["text", "json"], default_value = "text")]
    log_format: String,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if args.log_format == "json" {
        logs.json().init();
    } else {
        logs.init();
    }
    let config = match AgentConfig::from_env(|k| std::env::var(k).ok()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("bcd: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("bcd: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(agent(config))
}

async fn agent(config: AgentConfig) -> ExitCode {
    let client = match AgentClient::new(&config.server_url) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("bcd: {e}");
            return ExitCode::from(2);
        }
    };
    let shutdown = CancellationToken::new();
    // The handlers are installed here, before the agent's first line is logged: a task
    // that installed them itself ran only at the agent's first pause, and a SIGTERM sent
    // on seeing that line (as the kubelet may) could meet the default action and kill the
    // process instead of stopping it (bcd's sigterm test failed so, exit status None).
    let signals = Signals::install();
    tokio::spawn(stop_on_signal(signals, shutdown.clone()));
    let (state, _) =
        tokio::sync::watch::channel(AgentState::Joining { attempt: 0, last_error: None });
    match bc_agent::run(&client, &config, &TokioPause, rand::random::<f64>, &shutdown, &state).await
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bcd: {e}");
            ExitCode::from(1)
        }
    }
}

/// SIGTERM's and SIGINT's handlers, installed when made (tokio registers a signal's
/// handler when its stream is created, not when it is first awaited).
struct Signals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn install() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Signals {
                term: signal(SignalKind::terminate()).ok(),
                int: signal(SignalKind::interrupt()).ok(),
            }
        }
        #[cfg(not(unix))]
        {
            Signals {}
        }
    }
}

/// Cancels `shutdown` on SIGTERM (what the kubelet sends) or SIGINT.
async fn stop_on_signal(signals: Signals, shutdown: CancellationToken) {
    #[cfg(unix)]
    {
        let Signals { term, int } = signals;
        let wait = |s: Option<tokio::signal::unix::Signal>| async move {
            match s {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = wait(term) => {}
            () = wait(int) => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = signals;
        let _ = tokio::signal::ctrl_c().await;
    }
    tracing::info!("stopping");
    shutdown.cancel();
}
