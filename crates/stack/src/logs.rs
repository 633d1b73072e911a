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
