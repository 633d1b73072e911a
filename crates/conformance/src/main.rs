//! `bc-conformance`: the provider adapters' contract against DigitalOcean (or any
//! DigitalOcean-shaped API), as `cargo xtask conformance` runs it.
//!
//! Invariant: thin — the arguments and the environment go to [`bc_conformance::cli`],
//! its exit code comes back; no logic here.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let var = |name: &str| std::env::var(name).ok();
    let mut out = std::io::stdout();
    ExitCode::from(bc_conformance::cli(&args, &var, &mut out).await)
}
