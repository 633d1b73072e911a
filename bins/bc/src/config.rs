//! Where `bc` finds its server, token and tenant: the flags, then `BC_API_URL` /
//! `BC_TOKEN` / `BC_TENANT`, then a dev stack's `.bc-dev/` in the current directory, then
//! `~/.config/bc/config.toml` (written by `bc login`).
//!
//! Invariants: the config file holds a token, so it is written readable by its owner only
//! (mode 0600, its directory 0700); the token is never printed, not even by `bc login`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::Failure;

/// The dev stack's state directory `bc-api dev` makes, holding `bc.toml` and `token`.
pub const DEV_DIR: &str = ".bc-dev";
/// The file in [`DEV_DIR`] with the dev server's URL and tenant (no token).
pub const DEV_CONFIG: &str = "bc.toml";

/// What `bc` calls with; each field from the first source that has it.
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
    /// Fills what `self` lacks from `other`.
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

/// The dev stack's config when `dir` holds `.bc-dev/` (URL and tenant from its `bc.toml`,
/// the token from its `token`).
fn dev(dir: &Path) -> Result<Config, Failure> {
    let dev = dir.join(DEV_DIR);
    if !dev.join(DEV_CONFIG).is_file() {
        return Ok(Config::default());
    }
    let mut config = read(&dev.join(DEV_CONFIG))?;
    if config.token.is_none() {
        config.token = std::fs::read_to_string(dev.join("token")).ok().map(|t| t.trim().to_owned());
    }
    Ok(config)
}

/// The config in force: `flags` first, then the environment, `.bc-dev/` in `cwd`, and the
/// user's config file.
pub fn resolve(flags: Config, cwd: &Path) -> Result<Config, Failure> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let from_env =
        Config { api_url: env("BC_API_URL"), token: env("BC_TOKEN"), tenant: env("BC_TENANT") };
    let user = match user_config_path() {
        Some(p) => read(&p)?,
        None => Config::default(),
    };
    Ok(flags.or(from_env).or(dev(cwd)?).or(user))
}

/// Writes `config` to `path` readable by its owner only, making its directory if needed.
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
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    use std::io::Write as _;
    let mut file = options.open(path).map_err(|e| fail("writing", e))?;
    // A file that existed before keeps its mode through `open`: set it.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(|e| fail("restricting", e))?;
    }
    file.write_all(text.as_bytes()).map_err(|e| fail("writing", e))
}
