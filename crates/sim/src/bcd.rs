//! The simulated bcd: on every running node that a DaemonSet would schedule onto (its
//! `nodeSelector` matches the node's labels, its tolerations cover the node's
//! NoSchedule/NoExecute taints), read the join token, server URL and node name the
//! DaemonSet maps into its env and call `POST {server}/api/compute/agents/join`, like
//! the real agent, with the wire types of `bc_domain::agent`.
//!
//! Invariant: a node calls only when its pod could really start (DaemonSet scheduled
//! there, Secret and key present, every bcd env var mapped); once it has joined it does
//! not call again until the Secret's token changes; a failed or unreachable join, or an
//! answer that is not a `JoinResponse`, is retried on a later round.

use std::sync::Arc;
use std::time::Duration;

use bc_agent::{AgentClient, CallError};
use bc_domain::agent::{ENV_JOIN_TOKEN, ENV_NODE_NAME, ENV_SERVER_URL, JoinRequest, JoinResponse};
use bc_domain::model::SecretString;
use serde_json::Value;
use tokio::sync::watch;

pub use crate::agents::{Agents, JoinOutcome};
pub use crate::kube::pod_start::schedules_onto;
use crate::kube::pod_start::{PodEnv, ds_name, pod_env_with};
use crate::kube::resource::Resource;
use crate::kube::selector::Selector;
use crate::{SimNode, SimState};

/// What the simulated agent reports as its version.
pub const BCD_VERSION: &str = "sim";

/// One join call to make.
struct Planned {
    cluster: String,
    node: SimNode,
    env: PodEnv,
    /// The pod's projected ServiceAccount token, as the kubelet wrote it.
    service_account_token: String,
}

/// One round: every scheduled bcd that has not joined (or whose token changed) calls
/// the server once. Returns the number of join calls made.
pub async fn run_once(state: &SimState) -> usize {
    let planned = plan(state);
    if planned.is_empty() {
        return 0;
    }
    let mut calls = tokio::task::JoinSet::new();
    for p in planned {
        calls.spawn(async move {
            let result = join(&p).await;
            (p, result)
        });
    }
    let mut made = 0;
    while let Some(done) = calls.join_next().await {
        let Ok((p, result)) = done else { continue };
        made += 1;
        let mut joins = state.bcd.joins_mut();
        let o = joins.entry((p.cluster.clone(), p.node.name.clone())).or_default();
        o.daemonset = p.env.daemonset.clone();
        o.attempts += 1;
        match result {
            Ok((status, answer)) => {
                o.status = Some(status);
                match answer {
                    Ok(answer) => {
                        o.joined = true;
                        o.node_id = Some(answer.node_id);
                        o.token_fingerprint = Some(fingerprint(&p.env.join_token));
                        o.last_error = None;
                    }
                    Err(why) => {
                        o.joined = false;
                        o.token_fingerprint = None;
                        o.last_error = Some(why);
                    }
                }
            }
            Err(e) => {
                o.status = None;
                o.joined = false;
                o.token_fingerprint = None;
                o.last_error = Some(e);
            }
        }
    }
    made
}

/// What the background agents have done so far (see [`spawn`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rounds {
    /// Rounds completed.
    pub rounds: u64,
    /// Join calls made over all rounds.
    pub calls: u64,
    /// Join calls made by the last completed round.
    pub last_round_calls: usize,
}

impl Rounds {
    /// Whether the agents have settled: at least one round ran and the last one made
    /// no call (every scheduled node joined, or is waiting on something a round cannot
    /// fix).
    pub fn settled(&self) -> bool {
        self.rounds > 0 && self.last_round_calls == 0
    }
}

/// The background agents started by [`spawn`]: a round counter to wait on, and the
/// task, aborted on drop.
pub struct Background {
    rounds: watch::Receiver<Rounds>,
    task: tokio::task::JoinHandle<()>,
}

impl Background {
    /// The rounds so far.
    pub fn rounds(&self) -> Rounds {
        *self.rounds.borrow()
    }

    /// Waits until `done` holds for the rounds so far (checked after every round).
    /// Bound the wait with a timeout: the rounds run on wall-clock ticks.
    pub async fn wait_for(&mut self, done: impl FnMut(&Rounds) -> bool) -> Rounds {
        let reached = self.rounds.wait_for(done).await.map(|r| *r);
        // Err: the task is gone (it panicked); report what it reached.
        reached.unwrap_or_else(|_| *self.rounds.borrow())
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Runs [`run_once`] every `every` until the returned [`Background`] is dropped.
pub fn spawn(state: Arc<SimState>, every: Duration) -> Background {
    let (tx, rounds) = watch::channel(Rounds::default());
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(every.max(Duration::from_millis(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let made = run_once(&state).await;
            // The clusters' controllers catch up with what the agents (and the clock) did,
            // so pods turn Ready without waiting for a request.
            for cluster in state.kube.cluster_ids() {
                crate::kube::KubeStore::refresh(&state, &cluster);
            }
            tx.send_modify(|r| {
                r.rounds += 1;
                r.calls += made as u64;
                r.last_round_calls = made;
            });
        }
    });
    Background { rounds, task }
}

/// The simulated agents' one HTTP client, built once: building one per join read and
/// parsed the system's root certificates each time (16 % of the reconcile benchmark's
/// CPU at 1,000 substrates). No connection is kept between calls, as a node's own bcd keeps none with
/// another node's: a restarted server is met on a new connection, as before.
fn agents_http() -> Result<reqwest::Client, String> {
    static HTTP: std::sync::OnceLock<Result<reqwest::Client, String>> = std::sync::OnceLock::new();
    HTTP.get_or_init(|| {
        AgentClient::http_builder().pool_max_idle_per_host(0).build().map_err(|e| e.to_string())
    })
    .clone()
}

/// One join call through the real agent's client (`bc_agent::AgentClient`: one join
/// contract for bcd and its simulation): the HTTP status, and the parsed answer or why
/// it is not one.
async fn join(p: &Planned) -> Result<(u16, Result<JoinResponse, String>), String> {
    let client = AgentClient::with_http(agents_http()?, &p.env.server_url);
    let body = JoinRequest {
        join_token: SecretString::new(p.env.join_token.clone()),
        node_name: p.env.node_name.clone(),
        provider_node_id: Some(p.node.provider_id.clone()),
        bcd_version: BCD_VERSION.to_owned(),
        service_account_token: SecretString::new(p.service_account_token.clone()),
    };
    match client.join_with_status(&body).await {
        Ok((status, answer)) => Ok((status, Ok(answer))),
        Err(CallError::Answered { status, .. }) => {
            Ok((status, Err(format!("join answered {status}"))))
        }
        Err(CallError::BadAnswer(e)) => {
            Ok((200, Err(format!("join answered with a body that is not a JoinResponse: {e}"))))
        }
        Err(e @ CallError::Unreachable(_)) => Err(format!("join call failed: {e}")),
    }
}

/// Decides, without I/O, which nodes call this round, and records why others do not.
fn plan(state: &SimState) -> Vec<Planned> {
    let now = state.clock.now();
    let mut planned = Vec::new();
    for cluster in state.kube.cluster_ids() {
        let daemonsets = state.kube.list(&cluster, Resource::DaemonSet, None, &Selector::default());
        // Without DaemonSets there is nothing to run, unless pods ran before and are
        // now gone (their outcomes are reset below).
        if daemonsets.is_empty() && !state.bcd.joins_mut().keys().any(|(c, _)| *c == cluster) {
            continue;
        }
        // The controllers make the DaemonSet's pods first: a pod's token is bound to it.
        crate::kube::KubeStore::refresh(state, &cluster);
        let nodes = {
            let mut model = state.model();
            model.advance(now);
            if !model.cluster_is_running(&cluster, now) {
                continue;
            }
            model.cluster_nodes(&cluster, now).unwrap_or_default()
        };
        for node in nodes.into_iter().filter(|n| n.ready) {
            let key = (cluster.clone(), node.name.clone());
            let Some(ds) = daemonsets.iter().find(|ds| schedules_onto(ds, &node)) else {
                // No bcd pod here (any more): a pod that comes back is a new process
                // and joins again, as the real agent does.
                if let Some(o) = state.bcd.joins_mut().get_mut(&key)
                    && o.joined
                {
                    o.joined = false;
                    o.token_fingerprint = None;
                    o.last_error = Some("no bcd pod on this node".to_owned());
                }
                continue;
            };
            let env = pod_env(state, &cluster, ds, &node);
            // What the real bcd reads from its projected volume, read before the joins
            // are locked: the cluster's controllers look at the joins while they hold its
            // objects (`KubeStore::write`), so reading objects with the joins held
            // deadlocks against them (lock order: a cluster's objects, then the joins).
            let token = match &env {
                Ok(Some(env)) => Some(pod_token(state, &cluster, ds, &node, &env.token_file)),
                _ => None,
            };
            let mut joins = state.bcd.joins_mut();
            let outcome = joins.entry(key).or_default();
            outcome.daemonset = ds_name(ds);
            let env = match env {
                Ok(Some(env)) => env,
                Ok(None) => {
                    outcome.last_error = Some(format!(
                        "no container maps {ENV_SERVER_URL}, {ENV_JOIN_TOKEN} and {ENV_NODE_NAME}"
                    ));
                    continue;
                }
                Err(why) => {
                    // The pod cannot start (CreateContainerConfigError): nothing calls.
                    outcome.last_error = Some(why);
                    continue;
                }
            };
            if outcome.joined && outcome.token_fingerprint == Some(fingerprint(&env.join_token)) {
                continue;
            }
            if !state.config.bcd_reaches_server {
                outcome.joined = false;
                outcome.last_error = Some("unreachable".to_owned());
                continue;
            }
            // Without the projected token, bcd does not call (and retries).
            let token = match token {
                Some(Ok(t)) => t,
                None => continue,
                Some(Err(why)) => {
                    outcome.joined = false;
                    outcome.token_fingerprint = None;
                    outcome.last_error = Some(why);
                    continue;
                }
            };
            planned.push(Planned {
                cluster: cluster.clone(),
                node,
                env,
                service_account_token: token,
            });
        }
    }
    planned
}

/// The projected ServiceAccount token the kubelet wrote at `file` in the DaemonSet's pod
/// on `node` (see `crate::kube::tokens::projected_token`), or why there is none.
fn pod_token(
    state: &SimState,
    cluster: &str,
    ds: &Value,
    node: &SimNode,
    file: &str,
) -> Result<String, String> {
    let s =
        |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or_default().to_owned();
    let (ns, uid) = (s(ds, "/metadata/namespace"), s(ds, "/metadata/uid"));
    let pods = state.kube.list(cluster, Resource::Pod, Some(&ns), &Selector::default());
    let pod = pods
        .iter()
        .find(|p| {
            s(p, "/spec/nodeName") == node.name
                && p.pointer("/metadata/ownerReferences")
                    .and_then(Value::as_array)
                    .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid.as_str()))
        })
        .ok_or_else(|| format!("no bcd pod on node {} yet", node.name))?;
    let name = s(pod, "/metadata/name");
    crate::kube::tokens::projected_token(state, cluster, &ns, &name, file)?.ok_or_else(|| {
        format!("cannot read the pod's ServiceAccount token at {file}: no projected serviceAccountToken volume is mounted there")
    })
}

/// The env of the DaemonSet's first container that has every bcd variable, resolved
/// from Secrets in the DaemonSet's namespace and the pod's fields on `node`: `Ok(None)`
/// when no container runs bcd, an error when the pod cannot start (a Secret or key it
/// maps is missing: `CreateContainerConfigError`).
pub(crate) fn pod_env(
    state: &SimState,
    cluster: &str,
    ds: &Value,
    node: &SimNode,
) -> Result<Option<PodEnv>, String> {
    let lookup =
        |r: Resource, ns: &str, name: &str| state.kube.get(cluster, r, Some(ns), name).ok();
    pod_env_with(&lookup, ds, node)
}

/// A fingerprint to notice token changes without keeping the token in the outcome.
fn fingerprint(token: &str) -> u64 {
    crate::fnv1a(token)
}
