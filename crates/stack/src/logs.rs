//! Logging setup: `tracing` to stderr as text or JSON, filtered by `RUST_LOG` (default
//! `info`).
//!
//! Invariant: this only chooses the format; what is logged is decided where it happens,
//! and no code path in the stack logs a secret (tokens, keys, kubeconfigs) — the
//! end-to-end tests scan the captured logs for the ones they make.

use crate::config::LogFormat;

/// Installs the global subscriber (once; later calls are ignored).
pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => logs.json().try_init(),
        LogFormat::Text => logs.try_init(),
    };
}

/// A binary's `main`: logs in `format`, a multi-threaded tokio runtime, `body` run to the
/// end; an error printed once as `<program>: <error and its causes>` with exit status 1.
pub fn run_main<F>(program: &str, format: LogFormat, body: F) -> std::process::ExitCode
where
    F: std::future::Future<Output = anyhow::Result<()>>,
{
    init(format);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{program}: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(body) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{program}: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
