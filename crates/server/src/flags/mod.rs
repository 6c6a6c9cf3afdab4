//! Server configuration as etcd reads it: Go-style flags (`--flag value`, `--flag=value`,
//! `-flag`), each also from `ETCD_<FLAG>` when not given on the command line (both set is
//! fatal, unknown `ETCD_*` variables are warned about), and `--config-file` (YAML, etcd's
//! keys) which overrides both. Error texts are etcd's (Go's flag package and pkg/flags).
//!
//! Invariant: a flag whose feature is not built yet never passes silently: a non-default
//! value stops the server with a "not supported yet" message ([`table::Support`]).

mod file;
pub mod table;
pub mod value;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use table::{Kind, Support};

use crate::settings::Settings;

/// Where a value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// etcd's default.
    Default,
    /// The command line.
    Flag,
    /// An `ETCD_*` variable.
    Env,
    /// The `--config-file`.
    File,
}

/// A configuration error: the message to print before exiting non-zero.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// The parsed configuration.
#[derive(Debug, Clone)]
pub struct Config {
    values: HashMap<&'static str, (String, Source)>,
    /// `--help` was asked for.
    pub help: bool,
}

/// A configuration and the warnings to log once logging is up.
#[derive(Debug)]
pub struct Loaded {
    /// The configuration.
    pub config: Config,
    /// Warnings (unknown variables, flags without effect).
    pub warnings: Vec<String>,
}

fn err(msg: impl Into<String>) -> ConfigError {
    ConfigError(msg.into())
}

fn invalid(flag: &table::Flag, v: &str, reason: &str, how: &str) -> ConfigError {
    if flag.kind == Kind::Bool {
        err(format!("invalid boolean value {v:?} for {how}: {reason}"))
    } else {
        err(format!("invalid value {v:?} for {how}: {reason}"))
    }
}

/// Parses the command line, the `ETCD_*` environment (`env` looks a variable up,
/// `env_keys` lists the names present) and the config file.
pub fn load(
    args: &[String],
    env: &dyn Fn(&str) -> Option<String>,
    env_keys: &[String],
) -> Result<Loaded, ConfigError> {
    let mut cfg = Config {
        values: HashMap::new(),
        help: false,
    };
    let mut warnings = Vec::new();
    parse_args(args, &mut cfg)?;
    if cfg.help {
        return Ok(Loaded {
            config: cfg,
            warnings,
        });
    }
    apply_env(&mut cfg, env, env_keys, &mut warnings)?;
    if let Some(path) = cfg.explicit("config-file") {
        let path = path.to_string();
        file::apply(&path, &mut cfg, &mut warnings)?;
        warnings.push(format!(
            "loaded server configuration from {path:?}; other configuration command line flags and environment variables will be ignored if provided"
        ));
    }
    check_support(&cfg, &mut warnings)?;
    validate(&cfg)?;
    Ok(Loaded {
        config: cfg,
        warnings,
    })
}

fn parse_args(args: &[String], cfg: &mut Config) -> Result<(), ConfigError> {
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if arg == "--" {
            if let Some(next) = args.get(i) {
                return Err(err(format!("'{next}' is not a valid flag")));
            }
            break;
        }
        let Some(body) = arg
            .strip_prefix("--")
            .or_else(|| arg.strip_prefix('-'))
            .filter(|b| !b.is_empty())
        else {
            return Err(err(format!("'{arg}' is not a valid flag")));
        };
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (body, None),
        };
        if name == "h" || name == "help" {
            cfg.help = true;
            return Ok(());
        }
        let flag = table::find(name)
            .ok_or_else(|| err(format!("flag provided but not defined: -{name}")))?;
        let v = match inline {
            Some(v) => v,
            None if flag.kind == Kind::Bool => "true".into(),
            None => {
                let v = args
                    .get(i)
                    .ok_or_else(|| err(format!("flag needs an argument: -{name}")))?;
                i += 1;
                v.clone()
            }
        };
        value::check(flag, &v).map_err(|r| invalid(flag, &v, &r, &format!("flag -{name}")))?;
        cfg.values.insert(flag.name, (v, Source::Flag));
    }
    Ok(())
}

fn apply_env(
    cfg: &mut Config,
    env: &dyn Fn(&str) -> Option<String>,
    env_keys: &[String],
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    let mut used = Vec::new();
    for flag in table::FLAGS {
        let key = table::env_name(flag.name);
        let Some(v) = env(&key) else { continue };
        used.push(key.clone());
        if cfg
            .values
            .get(flag.name)
            .is_some_and(|(_, s)| *s == Source::Flag)
        {
            return Err(err(format!(
                "conflicting environment variable {key:?} is shadowed by corresponding command-line flag (either unset environment variable or disable flag)"
            )));
        }
        value::check(flag, &v).map_err(|r| invalid(flag, &v, &r, &key))?;
        cfg.values.insert(flag.name, (v, Source::Env));
    }
    for key in env_keys {
        if key.starts_with("ETCD_") && !used.contains(key) && key != "ETCD_UNSUPPORTED_ARCH" {
            let v = env(key).unwrap_or_default();
            warnings.push(format!("unrecognized environment variable {key}={v}"));
        }
    }
    Ok(())
}

fn check_support(cfg: &Config, warnings: &mut Vec<String>) -> Result<(), ConfigError> {
    for flag in table::FLAGS {
        let Some((v, _)) = cfg.values.get(flag.name) else {
            continue;
        };
        if same_as_default(flag, v) {
            continue;
        }
        match flag.support {
            Support::Supported => {}
            Support::NoEffect => {
                warnings.push(format!("--{} has no effect in oxcd (ignored)", flag.name))
            }
            Support::NotYet => {
                return Err(err(format!(
                    "--{}={v:?} is not supported yet by oxcd (the feature is not built); remove it or set it to {:?}",
                    flag.name, flag.default
                )));
            }
        }
    }
    if cfg.str("initial-cluster-state") == "existing" {
        return Err(err(
            "--initial-cluster-state=existing is not supported yet by oxcd (joining a cluster comes with replication)",
        ));
    }
    if cfg.str("logger") != "zap" {
        return Err(err(format!(
            "--logger={:?} is not supported yet by oxcd; use zap",
            cfg.str("logger")
        )));
    }
    for out in cfg.str("log-outputs").split(',') {
        if !matches!(out, "default" | "stderr" | "stdout") {
            return Err(err(format!(
                "--log-outputs={out:?} is not supported yet by oxcd; use default, stderr or stdout"
            )));
        }
    }
    Ok(())
}

fn same_as_default(flag: &table::Flag, v: &str) -> bool {
    match flag.kind {
        Kind::Bool => value::parse_bool(v) == value::parse_bool(flag.default),
        Kind::Duration => value::parse_duration(v) == value::parse_duration(flag.default),
        Kind::Uint | Kind::Int => v.parse::<i128>().ok() == flag.default.parse::<i128>().ok(),
        Kind::Str | Kind::Urls => v == flag.default,
    }
}

fn validate(cfg: &Config) -> Result<(), ConfigError> {
    let (tick, election) = (cfg.uint("heartbeat-interval"), cfg.uint("election-timeout"));
    if 5 * tick > election {
        return Err(err(format!(
            "--election-timeout[{election}ms] should be at least as 5 times as --heartbeat-interval[{tick}ms]"
        )));
    }
    if election > 50_000 {
        return Err(err(format!(
            "--election-timeout[{election}ms] is too long, and should be set less than 50000ms"
        )));
    }
    if cfg.explicit("listen-client-urls").is_some()
        && cfg.explicit("advertise-client-urls").is_none()
    {
        return Err(err(
            "--advertise-client-urls is required when --listen-client-urls is set explicitly",
        ));
    }
    let members = cfg.initial_cluster()?;
    let name = cfg.str("name");
    let Some((_, urls)) = members.iter().find(|(n, _)| n == name) else {
        return Err(err(format!(
            "couldn't find local name {name:?} in the initial cluster configuration"
        )));
    };
    let mut seen = std::collections::HashSet::new();
    for (_, urls) in &members {
        for u in urls {
            if !seen.insert(u.as_str()) {
                return Err(err(format!("--initial-cluster has duplicate url {u:?}")));
            }
        }
    }
    let mut advertised = cfg.urls("initial-advertise-peer-urls");
    let mut listed = urls.clone();
    advertised.sort();
    listed.sort();
    if advertised != listed {
        return Err(err(format!(
            "--initial-cluster has {name}={} but missing from --initial-advertise-peer-urls={}",
            urls.join(","),
            cfg.str("initial-advertise-peer-urls")
        )));
    }
    Ok(())
}

impl Config {
    /// The value of a flag (its default when unset).
    pub fn str(&self, name: &str) -> &str {
        match self.values.get(name) {
            Some((v, _)) => v,
            None => table::find(name).map(|f| f.default).unwrap_or(""),
        }
    }

    /// The value when set by flag, variable or file.
    pub fn explicit(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(|(v, _)| v.as_str())
    }

    /// Where a value came from.
    pub fn source(&self, name: &str) -> Source {
        self.values
            .get(name)
            .map(|(_, s)| *s)
            .unwrap_or(Source::Default)
    }

    /// An unsigned value (validated at parse time).
    pub fn uint(&self, name: &str) -> u64 {
        self.str(name).parse().unwrap_or(0)
    }

    /// A signed value.
    pub fn int(&self, name: &str) -> i64 {
        self.str(name).parse().unwrap_or(0)
    }

    /// A boolean value.
    pub fn bool(&self, name: &str) -> bool {
        value::parse_bool(self.str(name)).unwrap_or(false)
    }

    /// A comma-separated URL list.
    pub fn urls(&self, name: &str) -> Vec<String> {
        self.str(name)
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// `--version` was asked for.
    pub fn version(&self) -> bool {
        self.bool("version")
    }

    /// `--data-dir`, or etcd's `<name>.etcd`.
    pub fn data_dir(&self) -> PathBuf {
        match self.explicit("data-dir") {
            Some(d) if !d.is_empty() => PathBuf::from(d),
            _ => PathBuf::from(format!("{}.etcd", self.str("name"))),
        }
    }

    /// The log level, `--debug` meaning debug.
    pub fn log_level(&self) -> &str {
        if self.bool("debug") {
            "debug"
        } else {
            self.str("log-level")
        }
    }

    /// `--initial-cluster` as (name, peer URLs); etcd's default is this member alone.
    pub fn initial_cluster(&self) -> Result<Vec<(String, Vec<String>)>, ConfigError> {
        let text = match self.explicit("initial-cluster") {
            Some(t) if !t.is_empty() => t.to_string(),
            _ => format!(
                "{}={}",
                self.str("name"),
                self.str("initial-advertise-peer-urls")
            ),
        };
        let mut members: Vec<(String, Vec<String>)> = Vec::new();
        for part in text.split(',') {
            let (name, url) = part.split_once('=').ok_or_else(|| {
                err(format!(
                    "--initial-cluster: {part:?} is not of the form name=url"
                ))
            })?;
            value::check_url(url).map_err(|e| err(format!("--initial-cluster: {e}")))?;
            match members.iter_mut().find(|(n, _)| n == name) {
                Some((_, urls)) => {
                    if urls.iter().any(|u| u == url) {
                        return Err(err(format!(
                            "--initial-cluster: duplicate URL {url:?} for member {name:?}"
                        )));
                    }
                    urls.push(url.to_string());
                }
                None => members.push((name.to_string(), vec![url.to_string()])),
            }
        }
        Ok(members)
    }

    /// What the member needs to start.
    pub fn settings(&self) -> Settings {
        let mut s = Settings::new(self.str("name"), self.data_dir());
        s.wal_dir = self
            .explicit("wal-dir")
            .filter(|w| !w.is_empty())
            .map(PathBuf::from);
        s.listen_client_urls = self.urls("listen-client-urls");
        s.advertise_client_urls = self.urls("advertise-client-urls");
        s.peer_urls = self.urls("initial-advertise-peer-urls");
        s.listen_peer_urls = self.urls("listen-peer-urls");
        s.initial_cluster = self.initial_cluster().unwrap_or_default();
        s.initial_cluster_token = self.str("initial-cluster-token").to_string();
        s.max_txn_ops = self.uint("max-txn-ops") as usize;
        s.max_request_bytes = self.uint("max-request-bytes") as usize;
        s.snapshot_count = self.uint("snapshot-count");
        s.heartbeat = Duration::from_millis(self.uint("heartbeat-interval"));
        s.election_timeout = Duration::from_millis(self.uint("election-timeout"));
        s.pre_vote = self.bool("pre-vote");
        s.max_wals = self.uint("max-wals") as usize;
        s.quota_backend_bytes = self.int("quota-backend-bytes");
        s
    }

    /// Sets a value from the config file.
    fn set_from_file(&mut self, name: &str, v: String) -> Result<bool, ConfigError> {
        let Some(flag) = table::find(name) else {
            return Ok(false);
        };
        value::check(flag, &v)
            .map_err(|r| invalid(flag, &v, &r, &format!("config file key {name:?}")))?;
        self.values.insert(flag.name, (v, Source::File));
        Ok(true)
    }
}

/// The `--help` text.
pub fn usage() -> String {
    let mut out = String::from(
        "Usage:\n\n  oxcd [flags]\n    Start an oxcd member (etcd v3 compatible).\n\n  oxcd --version\n    Show the version of oxcd and of the etcd API it speaks.\n\n  oxcd -h | --help\n    Show this help.\n\nFlags (each also read from ETCD_<FLAG>, e.g. ETCD_DATA_DIR; --config-file overrides both):\n",
    );
    for f in table::FLAGS {
        let note = match f.support {
            Support::Supported => "",
            Support::NoEffect => "  (accepted; no effect in oxcd)",
            Support::NotYet => "  (not supported yet)",
        };
        out.push_str(&format!("  --{} '{}'{}\n", f.name, f.default, note));
    }
    out
}

#[cfg(test)]
mod tests;
