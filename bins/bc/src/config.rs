//! Where `bc` finds its server, token and tenant: the flags, then `BC_API_URL` /
//! `BC_TOKEN` / `BC_TENANT`, then a dev stack's `.bc-dev/` in the current directory, then
//! `~/.config/bc/config.toml` (written by `bc login`).
//!
//! Invariants: a URL and its token always come from the same source, so a server named by
//! a checked-out directory never receives the user's token; `.bc-dev/` is used only when
//! it holds both and its URL is loopback, or with `--dev`. The config file holds a token,
//! so it is written readable by its owner only (mode 0600, its directory 0700); the token
//! is never printed, not even by `bc login`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::Failure;

/// The dev stack's state directory `bc-api dev` makes, holding `bc.toml` and `token`.
pub const DEV_DIR: &str = ".bc-dev";
/// The file in [`DEV_DIR`] with the dev server's URL and tenant (no token).
pub const DEV_CONFIG: &str = "bc.toml";

/// What `bc` calls with: the URL and token from one source ([`choose`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The API's base URL, e.g. `http://127.0.0.1:8080`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_url: Option<String>,
    /// The API token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The tenant the commands act in, unless a command's input names another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

impl Config {
    /// Fills what `self` lacks from `other` (flags over the environment: one source).
    fn or(self, other: Config) -> Config {
        Config {
            api_url: self.api_url.or(other.api_url),
            token: self.token.or(other.token),
            tenant: self.tenant.or(other.tenant),
        }
    }
}

/// `$XDG_CONFIG_HOME/bc/config.toml`, or `~/.config/bc/config.toml`.
pub fn user_config_path() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(x) => PathBuf::from(x),
        None => PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?).join(".config"),
    };
    Some(base.join("bc").join("config.toml"))
}

/// Reads a config file; a missing file is an empty config.
fn read(path: &Path) -> Result<Config, Failure> {
    match std::fs::read_to_string(path) {
        Ok(text) => toml::from_str(&text)
            .map_err(|e| Failure::usage(format!("{}: {}", path.display(), e.message()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Config::default()),
        Err(e) => Err(Failure::usage(format!("reading {}: {e}", path.display()))),
    }
}

/// Where the URL and token in force came from: always one source for both, so a server
/// named by one source never receives a token from another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `--api-url`/`--token`, else `BC_API_URL`/`BC_TOKEN`: what the user typed or exported.
    CommandLine,
    /// `./.bc-dev/` (a `bc-api dev` directory): holds both and names a loopback URL, or
    /// `--dev` was passed.
    Dev,
    /// `~/.config/bc/config.toml` (written by `bc login`).
    User(PathBuf),
    /// Nothing names a server.
    None,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::CommandLine => f.write_str(
                "the command line and environment (--api-url/--token, BC_API_URL/BC_TOKEN)",
            ),
            Source::Dev => write!(f, "./{DEV_DIR}/"),
            Source::User(p) => write!(f, "{}", p.display()),
            Source::None => f.write_str("nowhere (no URL configured)"),
        }
    }
}

/// The configuration in force, where it came from, and why other sources were passed over
/// (for `-v`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The URL, token and tenant to call with.
    pub config: Config,
    /// Where the URL and the token came from.
    pub source: Source,
    /// Sources passed over, each with why (one line each).
    pub notes: Vec<String>,
}

/// The dev stack's config when `dir` holds `.bc-dev/` (URL and tenant from its `bc.toml`,
/// the token from it or from its `token` file); `None` when there is no `bc.toml`.
fn dev(dir: &Path) -> Result<Option<Config>, Failure> {
    let dev = dir.join(DEV_DIR);
    if !dev.join(DEV_CONFIG).is_file() {
        return Ok(None);
    }
    let mut config = read(&dev.join(DEV_CONFIG))?;
    if config.token.is_none() {
        config.token = std::fs::read_to_string(dev.join("token")).ok().map(|t| t.trim().to_owned());
    }
    Ok(Some(config))
}

/// Whether `url` names this machine: `localhost` or a loopback address, by scheme
/// `http` or `https`. Anything unparseable is not loopback.
pub fn is_loopback(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://")) else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    // Userinfo would hide the real host after an `@`: such a URL is not a dev server's.
    if authority.contains('@') {
        return false;
    }
    let host = if let Some(v6) = authority.strip_prefix('[') {
        match v6.split_once(']') {
            Some((h, _)) => h,
            None => return false,
        }
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    };
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Picks the one source of the URL and token: the command line and environment when they
/// name either; else `./.bc-dev/` when `force_dev`, or when it holds both and its URL is
/// loopback; else the user's config. The tenant is `explicit`'s when given, else the
/// chosen source's. Pure: the caller reads the files and the environment.
pub fn choose(
    explicit: Config,
    dev: Option<Config>,
    user: Option<(PathBuf, Config)>,
    force_dev: bool,
) -> Result<Resolved, Failure> {
    let mut notes = Vec::new();
    let tenant = explicit.tenant.clone();
    let pick = |config: Config, source: Source, notes: Vec<String>| Resolved {
        config: Config { tenant: tenant.clone().or(config.tenant), ..config },
        source,
        notes,
    };
    if force_dev {
        let Some(d) = dev else {
            return Err(Failure::usage(format!("--dev: no ./{DEV_DIR}/{DEV_CONFIG} here")));
        };
        if d.api_url.is_none() || d.token.is_none() {
            return Err(Failure::usage(format!(
                "--dev: ./{DEV_DIR}/ must hold both the URL ({DEV_CONFIG}) and the token"
            )));
        }
        if explicit.api_url.is_some() || explicit.token.is_some() {
            notes.push("--dev: the command line's URL and token are not used".to_owned());
        }
        return Ok(pick(d, Source::Dev, notes));
    }
    if explicit.api_url.is_some() || explicit.token.is_some() {
        if explicit.api_url.is_none() {
            return Err(Failure::usage(
                "--token or BC_TOKEN needs its server from the same place: pass --api-url or set BC_API_URL",
            ));
        }
        return Ok(pick(explicit, Source::CommandLine, notes));
    }
    if let Some(d) = dev {
        match (&d.api_url, &d.token) {
            (Some(url), Some(_)) if is_loopback(url) => return Ok(pick(d, Source::Dev, notes)),
            (Some(_), Some(_)) => notes.push(format!(
                "./{DEV_DIR}/ ignored: its URL is not loopback (pass --dev to use it)"
            )),
            _ => notes.push(format!(
                "./{DEV_DIR}/ ignored: it does not hold both a URL and a token (pass --dev to use it)"
            )),
        }
    }
    match user {
        Some((path, config)) if config.api_url.is_some() => {
            Ok(pick(config, Source::User(path), notes))
        }
        Some((path, config)) => {
            if config.token.is_some() {
                notes.push(format!("{} ignored: it holds a token but no URL", path.display()));
            }
            Ok(pick(Config::default(), Source::None, notes))
        }
        None => Ok(pick(Config::default(), Source::None, notes)),
    }
}

/// The config in force: see [`choose`]; reads the environment (`BC_API_URL`, `BC_TOKEN`,
/// `BC_TENANT`, flags first), `.bc-dev/` in `cwd` and the user's config file.
pub fn resolve(flags: Config, cwd: &Path, force_dev: bool) -> Result<Resolved, Failure> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let from_env =
        Config { api_url: env("BC_API_URL"), token: env("BC_TOKEN"), tenant: env("BC_TENANT") };
    let user = match user_config_path() {
        Some(p) => {
            let c = read(&p)?;
            Some((p, c))
        }
        None => None,
    };
    choose(flags.or(from_env), dev(cwd)?, user, force_dev)
}

/// Writes `config` to `path` readable by its owner only ([`bc_agent::write_private`]),
/// making its directory (owner-only) if needed.
pub fn write(path: &Path, config: &Config) -> Result<(), Failure> {
    let fail =
        |what: &str, e: std::io::Error| Failure::other(format!("{what} {}: {e}", path.display()));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| fail("creating the directory of", e))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
    }
    let text = toml::to_string(config).map_err(|e| Failure::other(format!("the config: {e}")))?;
    // It holds the token: owner-only from creation, and replaced whole.
    bc_agent::write_private(path, text.as_bytes()).map_err(|e| fail("writing", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(url: Option<&str>, token: Option<&str>, tenant: Option<&str>) -> Config {
        Config {
            api_url: url.map(Into::into),
            token: token.map(Into::into),
            tenant: tenant.map(Into::into),
        }
    }

    fn user() -> Option<(PathBuf, Config)> {
        Some((
            PathBuf::from("/h/config.toml"),
            c(Some("https://api.example"), Some("bc_user"), Some("u")),
        ))
    }

    #[test]
    fn loopback_is_localhost_or_a_loopback_address() {
        for yes in
            ["http://127.0.0.1:8080", "http://localhost", "https://[::1]:9/x", "http://127.9.9.9/"]
        {
            assert!(is_loopback(yes), "{yes}");
        }
        for no in [
            "https://elsewhere",
            "http://127.0.0.1.evil.example",
            "http://127.0.0.1@evil.example",
            "http://10.0.0.1:8080",
            "ftp://127.0.0.1",
            "127.0.0.1:8080",
        ] {
            assert!(!is_loopback(no), "{no}");
        }
    }

    #[test]
    fn a_dev_directory_without_its_token_never_gets_the_users() {
        let r = choose(
            Config::default(),
            Some(c(Some("http://127.0.0.1:1"), None, None)),
            user(),
            false,
        )
        .expect("resolves");
        assert_eq!(r.config.api_url.as_deref(), Some("https://api.example"));
        assert_eq!(r.config.token.as_deref(), Some("bc_user"));
        assert_eq!(r.source, Source::User(PathBuf::from("/h/config.toml")));
        assert!(r.notes[0].contains("both"), "{:?}", r.notes);
    }

    #[test]
    fn a_dev_directory_naming_a_remote_server_is_used_only_with_dev() {
        let remote = c(Some("https://elsewhere"), Some("bc_repo"), Some("r"));
        let r = choose(Config::default(), Some(remote.clone()), user(), false).expect("resolves");
        assert_eq!(r.config.token.as_deref(), Some("bc_user"));
        assert!(r.notes[0].contains("not loopback"));
        let r = choose(Config::default(), Some(remote), user(), true).expect("resolves");
        assert_eq!(
            (r.config.api_url.as_deref(), r.config.token.as_deref()),
            (Some("https://elsewhere"), Some("bc_repo"))
        );
        assert_eq!(r.source, Source::Dev);
    }

    #[test]
    fn the_command_lines_url_takes_only_the_command_lines_token() {
        let r =
            choose(c(Some("https://other"), None, None), None, user(), false).expect("resolves");
        assert_eq!(r.config.token, None, "the user's token is not sent to a URL named elsewhere");
        assert_eq!(r.config.tenant, None, "nor its tenant");
        let e =
            choose(c(None, Some("bc_env"), None), None, user(), false).expect_err("a token alone");
        assert_eq!(e.code, crate::exit::USAGE);
    }

    #[test]
    fn a_loopback_dev_directory_with_both_wins_over_the_users_config() {
        let d = c(Some("http://127.0.0.1:8080"), Some("bc_dev"), Some("dev"));
        let r = choose(c(None, None, Some("t")), Some(d), user(), false).expect("resolves");
        assert_eq!(r.source, Source::Dev);
        assert_eq!(r.config.token.as_deref(), Some("bc_dev"));
        assert_eq!(r.config.tenant.as_deref(), Some("t"), "an explicit tenant still wins");
    }
}
