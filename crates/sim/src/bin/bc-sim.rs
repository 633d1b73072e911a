//! `bc-sim`: the simulator on its own — DigitalOcean's v2 API, GKE's v1 API and token
//! endpoint on one loopback listener, a Kubernetes API per cluster — kept in a state file
//! when asked. `--gke-key-out FILE` writes a service-account key (project
//! `bc-sim-project`) this simulator's token endpoint accepts.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bc_domain::ports::SystemClock;
use bc_sim::{Sim, SimConfig};
use clap::Parser;

/// The simulated cloud, served on loopback.
#[derive(Parser)]
#[command(name = "bc-sim", version)]
struct Args {
    /// Where to listen (loopback only).
    #[arg(long, default_value = "127.0.0.1:8090")]
    listen: std::net::SocketAddr,
    /// Keep the simulated cloud in this file (restored from it when it exists).
    #[arg(long)]
    state: Option<PathBuf>,
    /// Write a GKE service-account key this simulator accepts to this file (mode 0600).
    #[arg(long)]
    gke_key_out: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    if !args.listen.ip().is_loopback() {
        return Err(
            format!("--listen {}: the simulator listens on loopback only", args.listen).into()
        );
    }
    let clock = Arc::new(SystemClock);
    let sim = match &args.state {
        Some(path) => Sim::open(SimConfig::default(), clock, path)?,
        None => Sim::new(SimConfig::default(), clock),
    };
    let server = sim.serve(args.listen).await?;
    let keeper = args.state.as_ref().map(|p| sim.keep_in(p, Duration::from_secs(1)));
    println!("DigitalOcean API: {}/v2 (token {})", server.url(), bc_sim::config::DEFAULT_TOKEN);
    println!("GKE API: {}/v1", server.url());
    println!("GCP token URL: {}/token", server.url());
    if let Some(path) = &args.gke_key_out {
        bc_agent::write_private(path, sim.gke_key(bc_sim::model::gke::SIM_PROJECT).as_bytes())
            .map_err(|e| format!("--gke-key-out {}: {e}", path.display()))?;
        println!("GKE service-account key: {}", path.display());
    }
    tokio::signal::ctrl_c().await?;
    if let Some(k) = keeper {
        k.finish().await?;
    }
    server.shutdown().await;
    Ok(())
}
