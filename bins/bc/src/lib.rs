//! `bc`, the command-line tool of the Better Compute API, on bc-client: a command for every
//! method of the catalogue (generated, with the methods' descriptions as help), plus
//! `login`, `wait`, `events tail` and `completions`.
//!
//! Invariants: every failure is one line on standard error naming the field when there is
//! one, and the exit code says its class ([`exit`]); the token is never printed.

pub mod commands;
pub mod config;
pub mod render;
pub mod watch;

use std::io::{IsTerminal, Write as _};
use std::path::Path;
use std::time::Duration;

use bc_client::api::{self, Entry};
use bc_client::{Client, Error, ErrorCode};
use clap::{Arg, ArgAction, ArgMatches, Command};
use serde_json::{Map, Value};

use crate::config::Config;
use crate::render::Format;

/// The exit codes, by class of failure.
pub mod exit {
    /// Done (and `wait`: the state was reached).
    pub const OK: i32 = 0;
    /// Failed: an error state (`wait`), an internal error, an unreadable answer.
    pub const FAILED: i32 = 1;
    /// The command line or the input is wrong (`INVALID_ARGUMENT`, `PAYLOAD_TOO_LARGE`).
    pub const USAGE: i32 = 2;
    /// `wait` ran out of time.
    pub const TIMEOUT: i32 = 3;
    /// No valid token, or it lacks the permission (`UNAUTHENTICATED`, `PERMISSION_DENIED`).
    pub const AUTH: i32 = 4;
    /// The object does not exist (`NOT_FOUND`).
    pub const NOT_FOUND: i32 = 5;
    /// The object's state forbids it (`FAILED_PRECONDITION`, `ALREADY_EXISTS`, `ABORTED`).
    pub const CONFLICT: i32 = 6;
    /// A quota or the rate limit (`RESOURCE_EXHAUSTED`).
    pub const EXHAUSTED: i32 = 7;
    /// The server could not be reached or is unavailable (`UNAVAILABLE`).
    pub const UNAVAILABLE: i32 = 8;
}

/// Why a command failed: the line to print and the exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The exit code ([`exit`]).
    pub code: i32,
    /// One line.
    pub message: String,
}

impl Failure {
    /// A usage error (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Self { code: exit::USAGE, message: message.into() }
    }

    /// Any other failure (exit 1).
    pub fn other(message: impl Into<String>) -> Self {
        Self { code: exit::FAILED, message: message.into() }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        let code = match &e {
            Error::Api(a) => match a.code {
                ErrorCode::InvalidArgument | ErrorCode::PayloadTooLarge => exit::USAGE,
                ErrorCode::Unauthenticated | ErrorCode::PermissionDenied => exit::AUTH,
                ErrorCode::NotFound => exit::NOT_FOUND,
                ErrorCode::FailedPrecondition | ErrorCode::AlreadyExists | ErrorCode::Aborted => {
                    exit::CONFLICT
                }
                ErrorCode::ResourceExhausted => exit::EXHAUSTED,
                ErrorCode::Unavailable => exit::UNAVAILABLE,
                ErrorCode::Internal => exit::FAILED,
            },
            Error::Transport { .. } => exit::UNAVAILABLE,
            Error::Config(_) => exit::USAGE,
            Error::Decode { .. } => exit::FAILED,
        };
        // One line: the server's messages are, but a transport chain may not be.
        Failure { code, message: e.to_string().replace('\n', " ") }
    }
}

/// What the exit codes mean, for `bc --help`.
const EXIT_HELP: &str = "Configuration: the URL and the token always come from one place: --api-url/--token (else BC_API_URL/BC_TOKEN), else ./.bc-dev/ (a `bc-api dev` directory, used only when it holds both and its URL is loopback, or with --dev), else ~/.config/bc/config.toml (bc login). --tenant/BC_TENANT overrides the tenant. -v says which was used.

Exit codes: 0 done; 1 failed (or `wait` saw the error state); 2 usage or invalid input; 3 `wait` timed out; 4 unauthenticated or permission denied; 5 not found; 6 the state forbids it (failed precondition, already exists, aborted); 7 quota or rate limit; 8 server unreachable or unavailable.";

/// The whole command tree.
pub fn cli() -> Command {
    let mut root = Command::new("bc")
        .about("The Better Compute API from the command line: one command per method")
        .version(env!("CARGO_PKG_VERSION"))
        .subcommand_required(true)
        .arg_required_else_help(true)
        .after_long_help(EXIT_HELP)
        .arg(global("api-url", "URL", "The API's base URL [env: BC_API_URL]"))
        .arg(global("token", "TOKEN", "The API token [env: BC_TOKEN]"))
        .arg(global("tenant", "TENANT", "The tenant to act in [env: BC_TENANT]"))
        .arg(
            Arg::new("dev")
                .long("dev")
                .global(true)
                .action(ArgAction::SetTrue)
                .help("Use ./.bc-dev/'s URL and token even when its URL is not loopback"),
        )
        .arg(
            Arg::new("verbose")
                .short('v')
                .long("verbose")
                .global(true)
                .action(ArgAction::SetTrue)
                .help("Say on standard error where the URL and token came from"),
        )
        .arg(
            Arg::new("output")
                .short('o')
                .long("output")
                .global(true)
                .value_name("FORMAT")
                .value_parser(["table", "json", "yaml", "id"])
                .default_value("table")
                .help("table, json, yaml, or id (the object's id only, for scripts)"),
        );
    let catalogue = api::catalogue();
    let mut resources: Vec<&'static api::Resource> = Vec::new();
    for e in &catalogue {
        if !resources.iter().any(|r| r.name == e.info.resource.name) {
            resources.push(e.info.resource);
        }
    }
    for resource in resources {
        let mut cmd = Command::new(commands::resource_command(resource))
            .about(commands::first_sentence(resource.description))
            .long_about(commands::plain(resource.description))
            .subcommand_required(true)
            .arg_required_else_help(true);
        let kebab = commands::kebab(resource.name);
        if kebab != commands::resource_command(resource) {
            cmd = cmd.visible_alias(kebab);
        }
        for e in catalogue.iter().filter(|e| e.info.resource.name == resource.name) {
            cmd = cmd.subcommand(commands::method_command(e));
        }
        if resource.name == api::events::EVENTS.name {
            cmd = cmd.subcommand(watch::tail_command());
        }
        root = root.subcommand(cmd);
    }
    root.subcommand(watch::wait_command())
        .subcommand(
            Command::new("login")
                .about(
                    "Saves the API URL, token and tenant to ~/.config/bc/config.toml (mode 0600)",
                )
                .arg(
                    Arg::new("print-path")
                        .long("print-path")
                        .action(ArgAction::SetTrue)
                        .help("Only print where the file is"),
                ),
        )
        .subcommand(
            Command::new("completions")
                .about("Prints shell completions: bc completions bash > /etc/bash_completion.d/bc")
                .arg(
                    Arg::new("shell")
                        .required(true)
                        .value_parser(clap::value_parser!(clap_complete::Shell)),
                ),
        )
}

fn global(name: &'static str, value: &'static str, help: &'static str) -> Arg {
    Arg::new(name).long(name).global(true).value_name(value).help(help)
}

/// What a command runs with.
pub struct Run {
    /// The configuration in force.
    pub config: Config,
    /// The output format.
    pub format: Format,
    /// Colour and a spinner: standard output is a terminal and `NO_COLOR` is unset.
    pub tty: bool,
}

impl Run {
    /// A client of the configured server.
    pub fn client(&self) -> Result<Client, Failure> {
        let url = self.config.api_url.as_deref().ok_or_else(|| {
            Failure::usage("no API URL: pass --api-url, set BC_API_URL, or run `bc login`")
        })?;
        let mut builder = Client::builder(url);
        if let Some(token) = &self.config.token {
            builder = builder.token(token);
        }
        Ok(builder.build()?)
    }

    /// Prints `text` to standard output.
    pub fn print(&self, text: &str) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }
}

/// Runs `bc` with `args` (the first is the program name) in directory `cwd`; the exit code.
pub async fn main(args: Vec<String>, cwd: &Path) -> i32 {
    let matches = match cli().try_get_matches_from(args) {
        Ok(m) => m,
        Err(e) => {
            let code = if e.use_stderr() { exit::USAGE } else { exit::OK };
            let _ = e.print();
            return code;
        }
    };
    match run(&matches, cwd).await {
        Ok(code) => code,
        Err(f) => {
            eprintln!("bc: {}", f.message);
            f.code
        }
    }
}

async fn run(m: &ArgMatches, cwd: &Path) -> Result<i32, Failure> {
    let flags = Config {
        api_url: m.get_one::<String>("api-url").cloned(),
        token: m.get_one::<String>("token").cloned(),
        tenant: m.get_one::<String>("tenant").cloned(),
    };
    let (name, sub) = m.subcommand().expect("a subcommand is required");
    if name == "completions" {
        let shell = *sub.get_one::<clap_complete::Shell>("shell").expect("required");
        clap_complete::generate(shell, &mut cli(), "bc", &mut std::io::stdout());
        return Ok(exit::OK);
    }
    if name == "login" {
        return login(flags, sub.get_flag("print-path"));
    }
    let resolved = config::resolve(flags, cwd, m.get_flag("dev"))?;
    if m.get_flag("verbose") {
        for note in &resolved.notes {
            eprintln!("bc: {note}");
        }
        eprintln!("bc: the API URL and token from {}", resolved.source);
    }
    let config = resolved.config;
    let format = Format::parse(m.get_one::<String>("output").map_or("table", String::as_str))
        .expect("clap checked the format");
    let tty = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let run = Run { config, format, tty };
    if name == "wait" {
        return watch::wait(&run, sub).await;
    }
    let (method, mm) = sub.subcommand().expect("a method is required");
    let catalogue = api::catalogue();
    if method == "tail" {
        return watch::tail(&run, mm).await;
    }
    let entry = catalogue
        .iter()
        .find(|e| {
            commands::resource_command(e.info.resource) == name
                && commands::kebab(e.info.name) == method
        })
        .expect("every command comes from the catalogue");
    call(&run, entry, mm).await
}

/// Runs one method command.
async fn call(run: &Run, entry: &Entry, m: &ArgMatches) -> Result<i32, Failure> {
    let client = run.client()?;
    let body = commands::body(entry, m, run.config.tenant.as_deref())?;
    let resource = entry.info.resource.name;
    let answer = if entry.info.name == "list" && body.get("pageToken").is_none() {
        all_pages(&client, entry, body.clone()).await?
    } else {
        client.call_value(&entry.info, body.clone()).await?
    };
    let watching = m.try_get_one::<bool>("watch").ok().flatten().copied().unwrap_or(false);
    if watching {
        // Every print of a watch in the same shape (one JSON document per line).
        run.print(&render::render_watched(run.format, resource, &answer, run.tty));
        watch::watch(run, &client, entry, body, answer).await?;
    } else {
        run.print(&render::render(run.format, resource, &answer, run.tty));
    }
    Ok(exit::OK)
}

/// A list method's every page, joined into one answer `{"<items>": [...]}`.
async fn all_pages(client: &Client, entry: &Entry, mut body: Value) -> Result<Value, Failure> {
    let mut key = None;
    let mut items = Vec::new();
    // Bounded: a page token that never ends would be a server bug, not a reason to hang.
    for _ in 0..100_000 {
        let page = client.call_value(&entry.info, body.clone()).await?;
        let Value::Object(mut map) = page else {
            return Err(Failure::other(format!(
                "{}: the answer is not an object",
                entry.info.id()
            )));
        };
        let next = map.remove("nextPageToken");
        if let Some((k, Value::Array(page_items))) = map.into_iter().find(|(_, v)| v.is_array()) {
            key = Some(k);
            items.extend(page_items);
        }
        match next {
            Some(token) => body["pageToken"] = token,
            None => break,
        }
    }
    let mut out = Map::new();
    out.insert(key.unwrap_or_else(|| entry.info.resource.name.to_owned()), Value::Array(items));
    Ok(Value::Object(out))
}

/// `bc login`: checks nothing secret into the terminal; saves the configuration.
fn login(flags: Config, print_path: bool) -> Result<i32, Failure> {
    let path = config::user_config_path()
        .ok_or_else(|| Failure::usage("no HOME or XDG_CONFIG_HOME to keep the configuration in"))?;
    if print_path {
        println!("{}", path.display());
        return Ok(exit::OK);
    }
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let config = Config {
        api_url: flags.api_url.or_else(|| env("BC_API_URL")),
        token: flags.token.or_else(|| env("BC_TOKEN")),
        tenant: flags.tenant.or_else(|| env("BC_TENANT")),
    };
    if config.api_url.is_none() || config.token.is_none() {
        return Err(Failure::usage(
            "bc login needs --api-url and --token (or BC_API_URL and BC_TOKEN); --tenant is optional",
        ));
    }
    config::write(&path, &config)?;
    println!("saved to {} (readable by you only)", path.display());
    Ok(exit::OK)
}

/// The longest duration `bc` takes (a year): beyond it a deadline could overflow the clock.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Parses `10m`, `90s`, `2h`, `500ms` or a number of seconds, at most [`MAX_DURATION`];
/// never wraps or panics, whatever the number.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let too_long = || format!("{text:?} is longer than a year (8760h)");
    let n: u64 = match n.parse() {
        Ok(n) => n,
        Err(_) if !n.is_empty() => return Err(too_long()),
        Err(_) => return Err(format!("{text:?} is not a duration like 10m or 30s")),
    };
    let secs = match unit {
        "" | "s" => Some(Duration::from_secs(n)),
        "ms" => Some(Duration::from_millis(n)),
        "m" => n.checked_mul(60).map(Duration::from_secs),
        "h" => n.checked_mul(3600).map(Duration::from_secs),
        _ => return Err(format!("{text:?}: the unit is ms, s, m or h")),
    };
    secs.filter(|d| *d <= MAX_DURATION).ok_or_else(too_long)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_past_a_year_are_refused_without_wrapping() {
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("8760h"), Ok(MAX_DURATION));
        for huge in [
            "18446744073709551615s",
            "18446744073709551615m",
            "307445734561825861h",
            "99999999999999999999999s",
            "8761h",
        ] {
            let e = parse_duration(huge).expect_err(huge);
            assert!(e.contains("longer than a year"), "{huge}: {e}");
        }
        assert!(parse_duration("soon").unwrap_err().contains("not a duration"));
    }
}
