//! `bc-sim`: serves the simulated cloud (DigitalOcean API + per-cluster Kubernetes APIs +
//! simulated bcd agents) on a real socket with the wall clock, for `bc-api dev` and
//! manual poking with curl.
//!
//! Invariant: thin — parse flags, build the `Sim`, serve, print where; no logic here.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bc_domain::ports::SystemClock;
use bc_sim::config::Delays;
use bc_sim::{Sim, SimConfig};
use clap::{Parser, ValueEnum};

/// Delay presets.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum DelayPreset {
    /// Seconds-scale transitions.
    Fast,
    /// DigitalOcean-like minutes.
    Realistic,
}

/// Serve the simulated cloud.
#[derive(Debug, Parser)]
#[command(name = "bc-sim", about = "A simulated DigitalOcean API and per-cluster Kubernetes API")]
struct Args {
    /// Address to listen on (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:8089")]
    listen: SocketAddr,
    /// Transition delays.
    #[arg(long, value_enum, default_value = "fast")]
    delays: DelayPreset,
    /// Account token(s) the DigitalOcean face accepts (repeatable).
    #[arg(long = "token", env = "BC_SIM_TOKEN")]
    tokens: Vec<String>,
    /// Serve the DigitalOcean face over https (with the simulator's CA) instead of http.
    #[arg(long)]
    https: bool,
    /// Where to write the simulator's CA certificate (PEM), for `curl --cacert`.
    #[arg(long, default_value = "bc-sim-ca.pem")]
    ca_file: std::path::PathBuf,
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse();
    let mut config = SimConfig {
        delays: match args.delays {
            DelayPreset::Fast => Delays::fast(),
            DelayPreset::Realistic => Delays::realistic(),
        },
        ..SimConfig::default()
    };
    if !args.tokens.is_empty() {
        config.tokens = args.tokens;
    }
    let tokens = config.tokens.clone();
    let sim = Sim::new(config, Arc::new(SystemClock));
    let options = bc_sim::ServeOptions { https: args.https };
    let server = sim.serve_with(args.listen, options).await?;
    let _bcd = bc_sim::bcd::spawn(sim.state().clone(), Duration::from_millis(500));
    std::fs::write(&args.ca_file, sim.state().tls.ca_pem())?;
    println!("DigitalOcean API: {}", server.url());
    println!("CA certificate (cluster APIs are https): {}", args.ca_file.display());
    for t in &tokens {
        println!("token: {t}");
    }
    tokio::signal::ctrl_c().await?;
    Ok(())
}
