//! The run loop of a bcd process: read the environment the DaemonSet maps in, join,
//! heartbeat on the interval the server names, rejoin when the server no longer knows
//! the node credential, retry with capped jittered backoff while the server is
//! unreachable, and stop when told to.
//!
//! Invariant: the loop never spins — every retry waits a [`Backoff`] delay, every
//! heartbeat at least a second — and a refused join token ends it with an error (the
//! kubelet then restarts the container, which reads the rotated Secret afresh: an env
//! var mapped from a Secret is fixed for a container's life).

use std::future::Future;
use std::time::Duration;

use bc_domain::agent::{
    ENV_INSECURE_HTTP, ENV_JOIN_TOKEN, ENV_NODE_NAME, ENV_SERVER_URL,
    ENV_SERVICE_ACCOUNT_TOKEN_FILE, JoinRequest, SERVICE_ACCOUNT_TOKEN_FILE, is_plain_http,
};
use bc_domain::id::{NodeId, PoolId};
use bc_domain::model::SecretString;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;
use crate::client::{AgentClient, CallError};

/// What a bcd process runs with.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The server's public URL (`BCD_SERVER_URL`).
    pub server_url: String,
    /// The substrate's join token (`BCD_JOIN_TOKEN`); its `Debug` is redacted.
    pub join_token: SecretString,
    /// The node's Kubernetes name (`NODE_NAME`).
    pub node_name: String,
    /// The file holding the pod's projected ServiceAccount token
    /// (`BCD_SERVICE_ACCOUNT_TOKEN_FILE`, else the DaemonSet's mount): read afresh for
    /// every join, since the kubelet renews it.
    pub service_account_token_file: std::path::PathBuf,
    /// The node's provider id, when known.
    pub provider_node_id: Option<String>,
    /// The agent's version, sent on join.
    pub bcd_version: String,
    /// Retry policy.
    pub backoff: Backoff,
}

/// Why bcd cannot start with its environment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A missing or empty environment variable.
    #[error(
        "{0} is not set (the bcd DaemonSet maps it from the bcd-join Secret or the pod's spec.nodeName)"
    )]
    Missing(&'static str),
    /// A plain `http://` server URL without [`ENV_INSECURE_HTTP`]`=1` (SPEC §9).
    #[error(
        "BCD_SERVER_URL {0} is plain http://: the join token would travel in clear; serve the API over https://, or set BCD_INSECURE_HTTP=1 (dev and tests only)"
    )]
    PlainHttp(String),
}

impl AgentConfig {
    /// Reads `BCD_SERVER_URL`, `BCD_JOIN_TOKEN` and `NODE_NAME` through `get` (the
    /// process environment in the binary, a map in tests); a plain `http://` server URL
    /// only with `BCD_INSECURE_HTTP=1`.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let var = |name: &'static str| {
            get(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
                .ok_or(ConfigError::Missing(name))
        };
        let (server_url, join_token) = (var(ENV_SERVER_URL)?, var(ENV_JOIN_TOKEN)?);
        let node_name = var(ENV_NODE_NAME)?;
        let insecure = get(ENV_INSECURE_HTTP).is_some_and(|v| v.trim() == "1");
        if is_plain_http(&server_url) && !insecure {
            return Err(ConfigError::PlainHttp(server_url));
        }
        let token_file = get(ENV_SERVICE_ACCOUNT_TOKEN_FILE)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| SERVICE_ACCOUNT_TOKEN_FILE.to_owned());
        Ok(Self {
            server_url,
            join_token: SecretString::new(join_token),
            node_name,
            service_account_token_file: token_file.into(),
            provider_node_id: None,
            bcd_version: env!("CARGO_PKG_VERSION").to_owned(),
            backoff: Backoff::default(),
        })
    }

    /// The join body, with the projected token as the file holds it now; an error names
    /// the file (never its content).
    fn join_request(&self) -> Result<JoinRequest, String> {
        let file = &self.service_account_token_file;
        let token = std::fs::read_to_string(file).map_err(|e| {
            format!(
                "cannot read the pod's ServiceAccount token at {} ({ENV_SERVICE_ACCOUNT_TOKEN_FILE}; the DaemonSet mounts it as a projected volume): {e}",
                file.display()
            )
        })?;
        let token = token.trim();
        if token.is_empty() {
            return Err(format!("the ServiceAccount token file {} is empty", file.display()));
        }
        Ok(JoinRequest {
            join_token: self.join_token.clone(),
            node_name: self.node_name.clone(),
            provider_node_id: self.provider_node_id.clone(),
            bcd_version: self.bcd_version.clone(),
            service_account_token: SecretString::new(token),
        })
    }
}

/// Where the agent is, published on a watch channel (for logs, probes and tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentState {
    /// Not joined yet; `attempt` failed joins so far and the last error.
    Joining {
        /// Failed attempts so far.
        attempt: u32,
        /// Why the last one failed.
        last_error: Option<String>,
    },
    /// Joined; heartbeating.
    Joined {
        /// The node's id.
        node_id: NodeId,
        /// The pool it joined.
        pool_id: PoolId,
        /// Heartbeats the server accepted since this join.
        heartbeats: u64,
        /// Joins so far in this process (1 for the first).
        joins: u64,
    },
    /// Stopped on request.
    Stopped,
}

/// Why the loop ended other than on request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// The server refused the join for good (bad or revoked token, or a request it
    /// will never accept); restarting with a fresh Secret is the fix.
    #[error("join refused: {0}")]
    JoinRefused(CallError),
}

/// How the loop waits (tokio's sleep in the binary; a recorder in tests, so tests
/// never sleep).
pub trait Pause: Send + Sync {
    /// Waits `d`.
    fn pause(&self, d: Duration) -> impl Future<Output = ()> + Send;
}

/// Waits with `tokio::time::sleep`.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioPause;

impl Pause for TokioPause {
    fn pause(&self, d: Duration) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(d)
    }
}

/// The shortest heartbeat interval honoured, whatever the server says.
const MIN_HEARTBEAT: Duration = Duration::from_secs(1);

/// Runs the agent until `shutdown` is cancelled (then `Ok`) or the join is refused for
/// good. `jitter` yields fractions in `[0, 1)` for the backoff.
pub async fn run<P: Pause>(
    client: &AgentClient,
    config: &AgentConfig,
    pause: &P,
    mut jitter: impl FnMut() -> f64 + Send,
    shutdown: &CancellationToken,
    state: &watch::Sender<AgentState>,
) -> Result<(), RunError> {
    let mut joins = 0u64;
    'join: loop {
        let mut attempt = 0u32;
        let joined = loop {
            // The kubelet writes the token before the container starts; a missing one
            // is a misconfigured pod, retried in case it is being written.
            let failed = match config.join_request() {
                Err(why) => why,
                Ok(request) => {
                    let called = tokio::select! {
                        () = shutdown.cancelled() => break 'join,
                        r = client.join(&request) => r,
                    };
                    match called {
                        Ok(j) => break j,
                        Err(e) if e.is_unauthenticated() || !e.is_retryable() => {
                            tracing::error!(error = %e, "join refused; exiting so a restart reads the current join Secret");
                            return Err(RunError::JoinRefused(e));
                        }
                        Err(e) => e.to_string(),
                    }
                }
            };
            tracing::warn!(error = %failed, attempt, "join failed; retrying");
            state.send_replace(AgentState::Joining {
                attempt: attempt + 1,
                last_error: Some(failed),
            });
            if !wait(pause, config.backoff.delay(attempt, jitter()), shutdown).await {
                break 'join;
            }
            attempt = attempt.saturating_add(1);
        };
        joins += 1;
        tracing::info!(node_id = %joined.node_id, pool_id = %joined.pool_id, "joined");
        let mut heartbeats = 0u64;
        let publish = |heartbeats| AgentState::Joined {
            node_id: joined.node_id.clone(),
            pool_id: joined.pool_id.clone(),
            heartbeats,
            joins,
        };
        state.send_replace(publish(heartbeats));
        let mut every = Duration::from_secs(u64::from(joined.heartbeat_seconds)).max(MIN_HEARTBEAT);
        let mut failures = 0u32;
        loop {
            let delay = if failures == 0 {
                every
            } else {
                config.backoff.delay(failures - 1, jitter()).min(every)
            };
            if !wait(pause, delay, shutdown).await {
                break 'join;
            }
            let outcome = tokio::select! {
                () = shutdown.cancelled() => break 'join,
                r = client.heartbeat(&joined.node_credential) => r,
            };
            match outcome {
                Ok(h) => {
                    heartbeats += 1;
                    failures = 0;
                    every = Duration::from_secs(u64::from(h.heartbeat_seconds)).max(MIN_HEARTBEAT);
                    state.send_replace(publish(heartbeats));
                }
                Err(e) if e.is_unauthenticated() => {
                    // The credential was replaced (another join of this node name) or
                    // the node was removed: join again with the token.
                    tracing::warn!(error = %e, "heartbeat refused; joining again");
                    continue 'join;
                }
                Err(e) => {
                    failures = failures.saturating_add(1);
                    tracing::warn!(error = %e, failures, "heartbeat failed; retrying");
                }
            }
        }
    }
    state.send_replace(AgentState::Stopped);
    Ok(())
}

/// Waits `d` unless `shutdown` comes first; whether the wait ran out.
async fn wait<P: Pause>(pause: &P, d: Duration, shutdown: &CancellationToken) -> bool {
    tokio::select! {
        () = shutdown.cancelled() => false,
        () = pause.pause(d) => true,
    }
}
