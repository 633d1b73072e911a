//! Following objects: `--watch` on get commands, `bc wait KIND ID --for KEY=VALUE` and
//! `bc events tail`, all on the event stream (SPEC §12), which wakes them when the
//! object's subject has news; a slow poll covers changes that publish no event (a
//! substrate's node counts).
//!
//! Invariants: `wait` ends by itself — reached (0), the error state (1) or its timeout
//! (3); on a terminal it shows a spinner with the current state on standard error, and
//! otherwise prints one plain line per change, so logs stay readable.

use std::io::{IsTerminal, Write as _};
use std::time::Duration;

use bc_client::api::events::StreamQuery;
use bc_client::api::{self, Entry};
use bc_client::{Client, ErrorCode, EventStream};
use clap::{Arg, ArgMatches, Command};
use futures::{FutureExt, StreamExt};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::{Failure, Run, commands, exit, render};

/// How often a followed object is read again when no event came.
const POLL: Duration = Duration::from_secs(2);
/// How often the spinner turns.
const SPIN: Duration = Duration::from_millis(120);

/// The event subject of an object (SPEC §12), from its resource and what `get` answered.
fn subject(resource: &str, object: &Value) -> Option<String> {
    let id = |k: &str| object.get(k).and_then(Value::as_str).map(str::to_owned);
    match resource {
        "loadBalancers" => id("loadBalancerId").map(|i| format!("compute.load-balancers.{i}")),
        "kubernetesClusters" | "kubernetesNodePools" => {
            id("clusterId").map(|i| format!("compute.kubernetes.clusters.{i}"))
        }
        _ => id("poolId").map(|i| format!("compute.pools.{i}")),
    }
}

/// The tenant's event stream for `subject`, as a wake-up.
fn wake_ups(client: &Client, tenant: &Value, subject: Option<String>) -> Option<EventStream> {
    let tenant = tenant.as_str()?.parse().ok()?;
    Some(client.events(StreamQuery { tenant_id: tenant, subject }, None))
}

/// Waits for the next event (and takes every one already there) or `limit`, whichever
/// comes first; an error of the stream ends it (the poll goes on).
async fn next_wake(events: &mut Option<EventStream>, limit: Duration) {
    let Some(stream) = events else {
        tokio::time::sleep(limit).await;
        return;
    };
    match tokio::time::timeout(limit, stream.next()).await {
        Ok(Some(Ok(_))) => while let Some(Some(Ok(_))) = stream.next().now_or_never() {},
        Ok(Some(Err(_)) | None) => *events = None,
        Err(_) => {}
    }
}

/// `--watch`: prints the object again each time it changes, until interrupted.
pub async fn watch(
    run: &Run,
    client: &Client,
    entry: &Entry,
    body: Value,
    first: Value,
) -> Result<(), Failure> {
    let resource = entry.info.resource.name;
    let mut events = wake_ups(client, &body["tenantId"], subject(resource, &first));
    let mut last = first;
    loop {
        next_wake(&mut events, POLL).await;
        let now = client.call_value(&entry.info, body.clone()).await?;
        if now != last {
            run.print(&render::render_watched(run.format, resource, &now, run.tty));
            last = now;
        }
    }
}

/// The resources `wait` knows: those with a `get`, by their command's singular name.
fn waitable() -> Vec<(String, Entry)> {
    api::catalogue()
        .into_iter()
        .filter(commands::is_get)
        .map(|e| {
            let name = commands::resource_command(e.info.resource);
            (name.strip_suffix('s').unwrap_or(&name).to_owned(), e)
        })
        .collect()
}

/// `bc wait`.
pub fn wait_command() -> Command {
    let kinds: Vec<String> = waitable().into_iter().map(|(k, _)| k).collect();
    Command::new("wait")
        .about("Waits until an object's field has a value: bc wait substrate POOL --for state=ready --timeout 10m")
        .long_about("Waits until an object's field has a value, e.g. bc wait substrate POOL --for state=ready --timeout 10m. Exits 0 once it has it, 1 when the object is in the error state instead, 2 on a usage error and 3 when the timeout passes first. Shows a spinner with the current value on a terminal, one line per change otherwise.")
        .arg(Arg::new("kind").required(true).value_parser(clap::builder::PossibleValuesParser::new(kinds)).help("What to wait for"))
        .arg(Arg::new("id").required(true).value_name("ID").help("Its id (a substrate's is its pool's)"))
        .arg(Arg::new("for").long("for").value_name("KEY=VALUE").default_value("state=ready").help("The field and the value to wait for"))
        .arg(Arg::new("timeout").long("timeout").value_name("DURATION").default_value("10m").help("Give up after this long (e.g. 90s, 10m, 1h): exit 3"))
}

/// One line about the object's progress (the message when it has one).
fn progress(kind: &str, id: &str, key: &str, value: &str, object: &Value) -> String {
    let message = object.get("message").and_then(Value::as_str).map(|m| format!(" — {m}"));
    format!("{kind} {id}: {key}={value}{}", message.unwrap_or_default())
}

/// `bc wait KIND ID --for KEY=VALUE --timeout D`.
pub async fn wait(run: &Run, m: &ArgMatches) -> Result<i32, Failure> {
    let kind = m.get_one::<String>("kind").expect("required");
    let id = m.get_one::<String>("id").expect("required");
    let (key, want) = m
        .get_one::<String>("for")
        .and_then(|f| f.split_once('='))
        .ok_or_else(|| Failure::usage("--for takes KEY=VALUE, e.g. state=ready"))?;
    let timeout = crate::parse_duration(m.get_one::<String>("timeout").expect("defaulted"))
        .map_err(|e| Failure::usage(format!("--timeout: {e}")))?;
    let (_, entry) = waitable().into_iter().find(|(k, _)| k == kind).expect("clap checked it");
    let id_field = commands::positional(&entry).expect("a get names its object");
    let tenant = run.config.tenant.clone().ok_or_else(|| {
        Failure::usage("no tenant: pass --tenant, set BC_TENANT, or run `bc login --tenant …`")
    })?;
    let body = json!({ "tenantId": tenant, id_field.name: id });
    let client = run.client()?;
    let resource = entry.info.resource.name;
    let spinner = std::io::stderr().is_terminal();
    let deadline = Instant::now() + timeout;
    let mut events = None;
    let mut shown = String::new();
    let mut frame = 0usize;
    loop {
        let object = match client.call_value(&entry.info, body.clone()).await {
            Ok(o) => o,
            // Waiting for a deletion: gone is reached.
            Err(e) if e.code() == Some(ErrorCode::NotFound) && want == "deleted" => {
                clear(spinner);
                eprintln!("{kind} {id}: gone");
                return Ok(exit::OK);
            }
            Err(e) => {
                clear(spinner);
                return Err(e.into());
            }
        };
        if events.is_none() {
            events = wake_ups(&client, &body["tenantId"], subject(resource, &object));
        }
        let value = match object.get(key) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => "-".into(),
            Some(other) => other.to_string(),
        };
        let line = progress(kind, id, key, &value, &object);
        if line != shown && !spinner {
            eprintln!("{line}");
        }
        shown = line;
        if value == want {
            clear(spinner);
            run.print(&render::render(run.format, resource, &object, run.tty));
            return Ok(exit::OK);
        }
        if key == "state" && value == "error" {
            clear(spinner);
            eprintln!("bc: {shown}");
            return Ok(exit::FAILED);
        }
        // Turn the spinner until the next read is due.
        let next = Instant::now() + POLL;
        loop {
            let now = Instant::now();
            if now >= deadline {
                clear(spinner);
                eprintln!(
                    "bc: timed out after {} waiting for {kind} {id}: {key}={value} (want {want})",
                    m.get_one::<String>("timeout").expect("defaulted")
                );
                return Ok(exit::TIMEOUT);
            }
            if now >= next {
                break;
            }
            let slice = if spinner { SPIN } else { next - now };
            let slice = slice.min(deadline - now).min(next - now);
            if spinner {
                let marks = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
                eprint!("\r\x1b[2K{} {shown}", marks[frame % marks.len()]);
                let _ = std::io::stderr().flush();
                frame += 1;
            }
            let before = Instant::now();
            next_wake(&mut events, slice).await;
            // An event: read now rather than at the next poll.
            if Instant::now() < before + slice && events.is_some() {
                break;
            }
        }
    }
}

/// Clears the spinner's line.
fn clear(spinner: bool) {
    if spinner {
        eprint!("\r\x1b[2K");
        let _ = std::io::stderr().flush();
    }
}

/// `bc events tail`.
pub fn tail_command() -> Command {
    Command::new("tail")
        .about("Prints the tenant's events as they happen (GET /api/compute/events/stream), resuming after a dropped connection")
        .arg(Arg::new("subject").long("subject").value_name("SUBJECT").help("Only this subject's events, e.g. compute.pools.<poolId>"))
        .arg(Arg::new("after").long("after").value_name("SEQ").value_parser(clap::value_parser!(u64)).help("Start after this seq (default: from the first)"))
        .arg(Arg::new("count").short('n').long("count").value_name("N").value_parser(clap::value_parser!(u64)).help("Stop after N events"))
}

/// `bc events tail [--subject S] [--after SEQ] [-n N]`.
pub async fn tail(run: &Run, m: &ArgMatches) -> Result<i32, Failure> {
    let tenant = run.config.tenant.as_deref().ok_or_else(|| {
        Failure::usage("no tenant: pass --tenant, set BC_TENANT, or run `bc login --tenant …`")
    })?;
    let tenant_id = tenant.parse().map_err(|e| Failure::usage(format!("--tenant: {e}")))?;
    let query = StreamQuery { tenant_id, subject: m.get_one::<String>("subject").cloned() };
    let client = run.client()?;
    let mut stream = client.events(query, m.get_one::<u64>("after").copied());
    let count = m.get_one::<u64>("count").copied();
    let mut seen = 0u64;
    let mut header = run.format == render::Format::Table;
    while count.is_none_or(|c| seen < c) {
        let Some(event) = stream.next().await else { break };
        let event = serde_json::to_value(event?).map_err(|e| Failure::other(e.to_string()))?;
        let text = match run.format {
            render::Format::Table => {
                let table = render::table("events", &json!({ "events": [event] }), run.tty);
                let mut lines = table.lines();
                let head = lines.next().unwrap_or_default().to_owned();
                let row: String = lines.collect();
                if std::mem::take(&mut header) {
                    format!("{head}\n{row}\n")
                } else {
                    format!("{row}\n")
                }
            }
            f => render::render_watched(f, "events", &event, run.tty),
        };
        run.print(&text);
        seen += 1;
    }
    Ok(exit::OK)
}
