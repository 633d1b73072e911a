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
    tokio::spawn(stop_on_signal(shutdown.clone()));
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

/// Cancels `shutdown` on SIGTERM (what the kubelet sends) or SIGINT.
async fn stop_on_signal(shutdown: CancellationToken) {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
    tracing::info!("stopping");
    shutdown.cancel();
}
