//! `bc-sim`: serves the simulated cloud (DigitalOcean API + per-cluster Kubernetes APIs +
//! simulated bcd agents) on a real socket with the wall clock, for `bc-api dev` and
//! manual poking with curl.
//!
//! Invariant: thin — parse flags, build the `Sim`, serve, print where; no logic here.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bc_domain::ports::SystemClock;
use bc_sim::config::{Chaos, Delays};
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
    /// Chaos: this share of calls (0.0–1.0) answers 500 (seeded by `--chaos-seed`).
    #[arg(long, value_name = "RATIO", value_parser = ratio)]
    chaos_server_errors: Option<f64>,
    /// Chaos: one window of 429s (with retry-after) in every this many seconds.
    #[arg(long, value_name = "SECONDS")]
    chaos_throttle_every: Option<u64>,
    /// Chaos: how long each 429 window lasts, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 5)]
    chaos_throttle_for: u64,
    /// Chaos: the seed of the 5xx draws and the 429 windows.
    #[arg(long, default_value_t = 1)]
    chaos_seed: u64,
}

/// A share between 0 and 1.
fn ratio(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|r| (0.0..=1.0).contains(r))
        .ok_or_else(|| format!("{s:?} is not a ratio between 0.0 and 1.0"))
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
    if args.chaos_server_errors.is_some() || args.chaos_throttle_every.is_some() {
        let mut chaos =
            Chaos::server_errors(args.chaos_server_errors.unwrap_or(0.0), args.chaos_seed);
        if let Some(every) = args.chaos_throttle_every {
            chaos = chaos.with_throttle_bursts(
                Duration::from_secs(every),
                Duration::from_secs(args.chaos_throttle_for),
            );
        }
        config.chaos = Some(chaos);
    }
    if !args.tokens.is_empty() {
        config.tokens = args.tokens;
    }
    let tokens = config.tokens.clone();
    let sim = Sim::new(config, Arc::new(SystemClock));
    let options = bc_sim::ServeOptions { https: args.https, ..Default::default() };
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
