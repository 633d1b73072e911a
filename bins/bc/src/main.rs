//! `bc`: parses the command line and runs it ([`bc_cli::main`]); the exit code says how
//! it went (see `bc --help`).

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let code = bc_cli::main(std::env::args().collect(), &cwd).await;
    std::process::exit(code);
}
