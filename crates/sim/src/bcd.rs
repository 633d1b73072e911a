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

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use base64::Engine as _;
use bc_agent::{AgentClient, CallError};
use bc_domain::NodeId;
use bc_domain::agent::{
    ENV_JOIN_TOKEN, ENV_NODE_NAME, ENV_SERVER_URL, ENV_SERVICE_ACCOUNT_TOKEN_FILE, JoinRequest,
    JoinResponse, SERVICE_ACCOUNT_TOKEN_FILE,
};
use bc_domain::model::SecretString;
use bc_domain::policy::TaintEffect;
use serde_json::Value;
use tokio::sync::watch;

use crate::kube::{Resource, Selector};
use crate::{SimNode, SimState};

/// What the simulated agent reports as its version.
pub const BCD_VERSION: &str = "sim";

/// What one node's simulated bcd did so far.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct JoinOutcome {
    /// The DaemonSet (`namespace/name`) whose pod this is.
    pub daemonset: String,
    /// HTTP status of the last join call (`None`: none answered yet).
    pub status: Option<u16>,
    /// `nodeId` from the last successful answer.
    pub node_id: Option<NodeId>,
    /// Join calls made.
    pub attempts: u32,
    /// Whether the last call succeeded (2xx) with the current token.
    pub joined: bool,
    /// Why the last round did not join: `unreachable`, a missing Secret, a transport
    /// error, the server's answer…
    pub last_error: Option<String>,
    /// Fingerprint of the token the node joined with (never the token itself).
    token_fingerprint: Option<u64>,
}

/// What the simulated agents did, per (cluster id, node name).
#[derive(Debug, Default)]
pub struct Agents {
    joins: Mutex<BTreeMap<(String, String), JoinOutcome>>,
}

impl Agents {
    fn joins_mut(&self) -> MutexGuard<'_, BTreeMap<(String, String), JoinOutcome>> {
        self.joins.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What each simulated bcd did, per (cluster id, node name).
    pub fn join_outcomes(&self) -> BTreeMap<(String, String), JoinOutcome> {
        self.joins_mut().clone()
    }

    /// Whether the bcd on `node` of `cluster` has joined with the current token.
    pub fn joined(&self, cluster: &str, node: &str) -> bool {
        self.joins_mut().get(&(cluster.to_owned(), node.to_owned())).is_some_and(|o| o.joined)
    }

    /// Every outcome, to keep across a restart (crate::persist): a node that joined does
    /// not join again until its Secret's token changes.
    pub(crate) fn saved(&self) -> Vec<(String, String, JoinOutcome)> {
        self.joins_mut().iter().map(|((c, n), o)| (c.clone(), n.clone(), o.clone())).collect()
    }

    /// Takes back what [`Self::saved`] kept.
    pub(crate) fn restore(&self, saved: Vec<(String, String, JoinOutcome)>) {
        self.joins_mut().extend(saved.into_iter().map(|(c, n, o)| ((c, n), o)));
    }

    /// A fingerprint of what the agents of `cluster` have reached (which joined, why the
    /// others did not), to notice a change without comparing outcomes.
    pub fn fingerprint(&self, cluster: &str) -> u64 {
        let joins = self.joins_mut();
        let mut text = String::new();
        for ((c, node), o) in joins.iter() {
            if c == cluster {
                text.push_str(&format!("{node}:{}:{:?};", o.joined, o.last_error));
            }
        }
        crate::fnv1a(&text)
    }
}

/// The env a bcd pod would start with, resolved from its DaemonSet and Secrets.
pub(crate) struct PodEnv {
    daemonset: String,
    server_url: String,
    join_token: String,
    node_name: String,
    /// Where the container reads its projected ServiceAccount token.
    token_file: String,
}

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

/// One join call through the real agent's client (`bc_agent::AgentClient`: one join
/// contract for bcd and its simulation): the HTTP status, and the parsed answer or why
/// it is not one.
async fn join(p: &Planned) -> Result<(u16, Result<JoinResponse, String>), String> {
    let client = AgentClient::new(&p.env.server_url).map_err(|e| e.to_string())?;
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
            // What the real bcd reads from its projected volume; without it, it does not
            // call (and retries).
            let token = match pod_token(state, &cluster, ds, &node, &env.token_file) {
                Ok(t) => t,
                Err(why) => {
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

fn ds_name(ds: &Value) -> String {
    let s = |p: &str| ds.pointer(p).and_then(Value::as_str).unwrap_or_default();
    format!("{}/{}", s("/metadata/namespace"), s("/metadata/name"))
}

/// Whether the DaemonSet's pod would be scheduled onto `node`.
pub fn schedules_onto(ds: &Value, node: &SimNode) -> bool {
    let pod = ds.pointer("/spec/template/spec");
    let selector_ok =
        pod.and_then(|p| p.get("nodeSelector")).and_then(Value::as_object).is_none_or(|sel| {
            sel.iter().all(|(k, v)| {
                v.as_str().is_some_and(|v| node.labels.get(k).map(String::as_str) == Some(v))
            })
        });
    if !selector_ok {
        return false;
    }
    let tolerations: Vec<&Value> = pod
        .and_then(|p| p.get("tolerations"))
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    node.taints
        .iter()
        .filter(|t| matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute))
        .all(|t| tolerations.iter().any(|tol| tolerates(tol, t)))
}

/// Kubernetes toleration matching: an empty effect matches every effect; `Exists` with
/// an empty key matches every taint; `Equal` (the default) needs key and value.
fn tolerates(tol: &Value, taint: &bc_domain::policy::Taint) -> bool {
    let s = |k: &str| tol.get(k).and_then(Value::as_str).unwrap_or_default();
    let effect_ok = s("effect").is_empty() || s("effect") == taint.effect.as_str();
    let key_ok = match s("operator") {
        "Exists" => s("key").is_empty() || s("key") == taint.key,
        "" | "Equal" => s("key") == taint.key && s("value") == taint.value,
        _ => false,
    };
    effect_ok && key_ok
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

/// [`pod_env`] reading objects through `lookup` (resource, namespace, name).
pub(crate) fn pod_env_with(
    lookup: &dyn Fn(Resource, &str, &str) -> Option<Value>,
    ds: &Value,
    node: &SimNode,
) -> Result<Option<PodEnv>, String> {
    let ns = ds.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
    let pod = ds.pointer("/spec/template/spec").cloned().unwrap_or(Value::Null);
    if let Some(sa) = pod.get("serviceAccountName").and_then(Value::as_str)
        && lookup(Resource::ServiceAccount, ns, sa).is_none()
    {
        return Err(format!("serviceaccount {ns}/{sa} not found"));
    }
    let secret = |name: &str| lookup(Resource::Secret, ns, name);
    let containers = pod.get("containers").and_then(Value::as_array).cloned().unwrap_or_default();
    for c in &containers {
        let env = container_env(c, &secret, node)?;
        if let (Some(url), Some(tok), Some(name)) =
            (env.get(ENV_SERVER_URL), env.get(ENV_JOIN_TOKEN), env.get(ENV_NODE_NAME))
        {
            return Ok(Some(PodEnv {
                daemonset: ds_name(ds),
                server_url: url.clone(),
                join_token: tok.clone(),
                node_name: name.clone(),
                token_file: env
                    .get(ENV_SERVICE_ACCOUNT_TOKEN_FILE)
                    .cloned()
                    .unwrap_or_else(|| SERVICE_ACCOUNT_TOKEN_FILE.to_owned()),
            }));
        }
    }
    Ok(None)
}

/// One container's env: `envFrom.secretRef`, then `env` (`value`,
/// `valueFrom.secretKeyRef`, or `valueFrom.fieldRef` of `spec.nodeName`), later entries
/// winning as in Kubernetes.
fn container_env(
    c: &Value,
    secret: &dyn Fn(&str) -> Option<Value>,
    node: &SimNode,
) -> Result<BTreeMap<String, String>, String> {
    let mut env = BTreeMap::new();
    for from in c.get("envFrom").and_then(Value::as_array).into_iter().flatten() {
        let Some(r) = from.get("secretRef") else { continue };
        let name = r.get("name").and_then(Value::as_str).unwrap_or_default();
        let optional = r.get("optional").and_then(Value::as_bool).unwrap_or(false);
        let prefix = from.get("prefix").and_then(Value::as_str).unwrap_or_default();
        match secret(name) {
            Some(s) => {
                for k in secret_keys(&s) {
                    if let Some(v) = secret_value(&s, &k) {
                        env.insert(format!("{prefix}{k}"), v);
                    }
                }
            }
            None if optional => {}
            None => return Err(format!("secret {name:?} not found")),
        }
    }
    for e in c.get("env").and_then(Value::as_array).into_iter().flatten() {
        let Some(name) = e.get("name").and_then(Value::as_str) else { continue };
        if let Some(v) = e.get("value").and_then(Value::as_str) {
            env.insert(name.to_owned(), v.to_owned());
            continue;
        }
        if let Some(path) = e.pointer("/valueFrom/fieldRef/fieldPath").and_then(Value::as_str) {
            // The downward API; the simulated pod has only the field bcd uses.
            if path == "spec.nodeName" {
                env.insert(name.to_owned(), node.name.clone());
            }
            continue;
        }
        let Some(r) = e.pointer("/valueFrom/secretKeyRef") else { continue };
        let sname = r.get("name").and_then(Value::as_str).unwrap_or_default();
        let key = r.get("key").and_then(Value::as_str).unwrap_or_default();
        let optional = r.get("optional").and_then(Value::as_bool).unwrap_or(false);
        match secret(sname).and_then(|s| secret_value(&s, key)) {
            Some(v) => {
                env.insert(name.to_owned(), v);
            }
            None if optional => {}
            None => return Err(format!("secret {sname:?} or its key {key:?} not found")),
        }
    }
    Ok(env)
}

fn secret_keys(s: &Value) -> Vec<String> {
    let mut keys: Vec<String> = ["data", "stringData"]
        .iter()
        .filter_map(|f| s.get(*f).and_then(Value::as_object))
        .flat_map(|m| m.keys().cloned())
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// A Secret value: `stringData` as is, `data` base64-decoded.
fn secret_value(s: &Value, key: &str) -> Option<String> {
    if let Some(v) = s.pointer("/stringData").and_then(|d| d.get(key)).and_then(Value::as_str) {
        return Some(v.to_owned());
    }
    let b64 = s.pointer("/data").and_then(|d| d.get(key)).and_then(Value::as_str)?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    String::from_utf8(bytes).ok()
}

/// A fingerprint to notice token changes without keeping the token in the outcome.
fn fingerprint(token: &str) -> u64 {
    crate::fnv1a(token)
}
