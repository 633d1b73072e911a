//! Keeping a simulated cloud across restarts (`bc-api dev` keeps it under `.bc-dev/`):
//! a snapshot holds the model (accounts with their clusters, node pools, nodes, load
//! balancers, volumes; the id and address counters; each cluster's API address), the
//! Kubernetes objects of every cluster, what the simulated bcd agents did, and the
//! simulator's CA — so kubeconfigs handed out before a restart keep working against
//! the same addresses, with the same token and CA.
//!
//! Invariants: a snapshot is written whole or not at all (a temporary file in the same
//! directory, synced, then renamed over the old one), readable by its owner only (it
//! holds the CA's key and the account tokens); a file that does not read is an error
//! naming it, never an empty cloud in its place; request bookkeeping (counters, rate
//! windows, injected faults, watch history) is not state and starts over.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bc_domain::ports::Clock;
use serde_json::Value;

use crate::bcd::JoinOutcome;
use crate::tls::{CaMaterial, SimTls};
use crate::{Sim, SimConfig, SimState, model};

/// The snapshot format; another is refused.
pub const VERSION: u64 = 1;

/// Why a simulated cloud could not be kept or read back.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a snapshot this simulator reads.
    #[error("{path} is not a saved simulated cloud this version reads: {why}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What does not read.
        why: String,
    },
    /// The snapshot could not be written.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// What a snapshot holds, to write.
#[derive(serde::Serialize)]
struct SnapshotRef<'a> {
    version: u64,
    ca: &'a CaMaterial,
    model: Value,
    kube: Value,
    agents: Vec<(String, String, JoinOutcome)>,
}

/// A snapshot read back.
#[derive(serde::Deserialize)]
struct Snapshot {
    version: u64,
    ca: CaMaterial,
    model: model::Saved,
    kube: Value,
    agents: Vec<(String, String, JoinOutcome)>,
}

impl Sim {
    /// The whole simulated cloud as a snapshot (JSON).
    pub fn snapshot(&self) -> Vec<u8> {
        snapshot(&self.state)
    }

    /// A simulator whose cloud is the one `snapshot` holds, with `config`'s knobs (its
    /// tokens are accepted besides the snapshot's accounts); `Err` says what does not
    /// read.
    pub fn restore(
        config: SimConfig,
        clock: Arc<dyn Clock>,
        snapshot: &[u8],
    ) -> Result<Sim, String> {
        let saved: Snapshot =
            serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_slice(snapshot))
                .map_err(|e| {
                // The place only, never the value found there: it may be a token.
                let (at, inner) = (e.path().to_string(), e.inner());
                let what = match inner.classify() {
                    serde_json::error::Category::Data => "not what this simulator writes",
                    _ => "not JSON",
                };
                format!("{at}: {what} (line {}, column {})", inner.line(), inner.column())
            })?;
        if saved.version != VERSION {
            return Err(format!("format {} (this simulator reads {VERSION})", saved.version));
        }
        let objects = crate::kube::store::Objects::from_saved(&saved.kube)?;
        let tls = SimTls::with_ca(saved.ca).map_err(|e| format!("ca: {e}"))?;
        let sim = Sim::with_tls(config, clock, Arc::new(tls));
        sim.state.model().restore(saved.model);
        sim.state.kube.replace_all(objects);
        sim.state.bcd.restore(saved.agents);
        Ok(sim)
    }

    /// The simulator kept in `path`: restored from it when it exists, else a new one.
    pub fn open(
        config: SimConfig,
        clock: Arc<dyn Clock>,
        path: &Path,
    ) -> Result<Sim, PersistError> {
        match std::fs::read(path) {
            Ok(bytes) => Sim::restore(config, clock, &bytes)
                .map_err(|why| PersistError::Invalid { path: path.to_owned(), why }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Sim::new(config, clock)),
            Err(source) => Err(PersistError::Read { path: path.to_owned(), source }),
        }
    }

    /// Keeps the cloud in `path`: every `every` — or, for a cloud so large that a
    /// snapshot takes long, ten times as long as the last one took, so keeping it costs
    /// at most a tenth of a core — a snapshot is written when it differs from the last
    /// one written (so bursts of changes make one write), and once more by
    /// [`Keeper::finish`].
    pub fn keep_in(&self, path: impl Into<PathBuf>, every: Duration) -> Keeper {
        let keeper = Arc::new(Kept {
            state: self.state.clone(),
            path: path.into(),
            last: Mutex::new(Vec::new()),
        });
        let kept = keeper.clone();
        let task = tokio::spawn(async move {
            let mut wait = every;
            loop {
                tokio::time::sleep(wait).await;
                let kept = kept.clone();
                let started = std::time::Instant::now();
                let saved = tokio::task::spawn_blocking(move || kept.save()).await;
                if let Ok(Err(e)) = saved {
                    tracing::warn!(error = %e, "could not keep the simulated cloud");
                }
                wait = every.max(started.elapsed() * 10);
            }
        });
        Keeper { kept: keeper, task }
    }
}

fn snapshot(state: &SimState) -> Vec<u8> {
    // One lock at a time (never one inside another), each held only while its part is
    // read. Serializing maps of strings, numbers and JSON values cannot fail.
    let model = serde_json::to_value(state.model().saved()).unwrap_or_default();
    let kube = state.kube.copy_all().to_saved();
    let snapshot = SnapshotRef {
        version: VERSION,
        ca: state.tls.ca(),
        model,
        kube,
        agents: state.bcd.saved(),
    };
    serde_json::to_vec(&snapshot).unwrap_or_default()
}

/// What a [`Keeper`] and its task share.
struct Kept {
    state: Arc<SimState>,
    path: PathBuf,
    /// The last snapshot written.
    last: Mutex<Vec<u8>>,
}

impl Kept {
    /// Writes a snapshot if it differs from the last one written; whether it wrote.
    fn save(&self) -> Result<bool, PersistError> {
        // Taken under the lock, so an older snapshot is never written after a newer one.
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let bytes = snapshot(&self.state);
        if *last == bytes {
            return Ok(false);
        }
        // Whole or not at all, owner-only from creation: it holds the CA's key.
        bc_agent::write_private(&self.path, &bytes)
            .map_err(|source| PersistError::Write { path: self.path.clone(), source })?;
        *last = bytes;
        Ok(true)
    }
}

/// Keeps a simulated cloud in a file (see [`Sim::keep_in`]); dropping it stops the
/// periodic writes without a last one.
pub struct Keeper {
    kept: Arc<Kept>,
    task: tokio::task::JoinHandle<()>,
}

impl Keeper {
    /// Writes a snapshot now if the cloud changed since the last one; whether it wrote.
    pub fn save(&self) -> Result<bool, PersistError> {
        self.kept.save()
    }

    /// Stops the periodic writes and writes the last snapshot.
    pub async fn finish(mut self) -> Result<(), PersistError> {
        self.task.abort();
        let _ = (&mut self.task).await;
        let kept = self.kept.clone();
        match tokio::task::spawn_blocking(move || kept.save()).await {
            Ok(saved) => saved.map(|_| ()),
            // The blocking pool is gone (the runtime is shutting down): write here.
            Err(_) => self.kept.save().map(|_| ()),
        }
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.task.abort();
    }
}
