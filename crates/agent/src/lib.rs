//! bc-agent: the node agent bcd's side of SPEC §9 — the HTTP client of `agents/join` and
//! `agents/heartbeat`, the backoff it retries with, and the run loop of a bcd process.
//! The `bcd` binary is this loop behind flags; the simulator's bcd makes its join calls
//! with the same [`AgentClient`], so both speak exactly one wire (the types of
//! `bc_domain::agent`). It also holds [`write_private`], the owner-only atomic file write
//! of every crate above it (the lowest crate of theirs that may do I/O: bc-domain is
//! pure).
//!
//! Invariant: neither the join token nor the node credential appears in a log line, an
//! error message or a `Debug` output; every wait is capped and jittered, and the loop
//! stops promptly when told to.

pub mod backoff;
pub mod client;
pub mod private_file;
pub mod run;

pub use backoff::Backoff;
pub use client::{AgentClient, CallError};
pub use private_file::write_private;
pub use run::{AgentConfig, AgentState, ConfigError, Pause, RunError, TokioPause, run};

/// Installs ring as rustls's process-wide crypto provider, once. reqwest is built with
/// `rustls-no-provider` (no aws-lc) and panics at `Client::build` without one.
pub fn install_crypto() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // An error means another provider is installed already, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
