//! Server configuration as etcd 3.5 reads it (etcdmain/config.go, embed/config.go,
//! pkg/flags), with etcd's error texts:
//!
//! 1. The command line, parsed as Go's `flag` package does (`--flag value`,
//!    `--flag=value`, `-flag`, booleans without a separate value). `-h`/`--help` and
//!    `--version` end loading right there, as etcd prints and exits before anything else.
//! 2. With `--config-file` (or `ETCD_CONFIG_FILE`), the YAML file alone: every other flag
//!    and every `ETCD_*` variable is ignored, as in etcd.
//! 3. Otherwise each flag not given on the command line is read from `ETCD_<FLAG>` (empty
//!    variables do not count); a variable shadowed by a given flag is fatal; unknown
//!    `ETCD_*` variables are warned about; `ETCD_VERSION` is never used.
//! 4. etcd's checks (embed.Config.Validate), then the oxcd support check, then, for a
//!    member without a WAL yet, etcd's bootstrap checks of `--initial-cluster`.
//!
//! Invariant: a flag whose feature is not built yet never passes silently: a non-default
//! value stops the server with a "not supported yet" message ([`table::Support`]).

mod file;
pub mod table;
pub mod value;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
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
    /// `-h`/`--help` was asked for (print [`usage`], exit 0).
    pub help: bool,
    /// Read from a config file (flags and variables ignored).
    from_file: bool,
    /// Old flags of etcd's `ignored` list given on the command line.
    ignored_set: Vec<&'static str>,
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

/// etcd's default `--initial-cluster` (`embed.NewConfig`).
const DEFAULT_INITIAL_CLUSTER: &str = "default=http://localhost:2380";

/// Parses the command line, the `ETCD_*` environment (`env` looks a variable up,
/// `env_keys` lists the names present) and the config file.
pub fn load(
    args: &[String],
    env: &dyn Fn(&str) -> Option<String>,
    env_keys: &[String],
) -> Result<Loaded, ConfigError> {
    let mut cfg = Config::empty();
    let mut warnings = Vec::new();
    parse_args(args, &mut cfg, &mut warnings)?;
    if cfg.help || cfg.version() {
        return Ok(Loaded {
            config: cfg,
            warnings,
        });
    }
    // etcd reads ETCD_CONFIG_FILE on its own, before deciding whether to look at any
    // other variable.
    let file = match cfg.explicit("config-file") {
        Some(p) if !p.is_empty() => Some((p.to_string(), Source::Flag)),
        _ => env("ETCD_CONFIG_FILE")
            .filter(|p| !p.is_empty())
            .map(|p| (p, Source::Env)),
    };
    if let Some((path, source)) = file {
        let mut fc = Config::empty();
        fc.from_file = true;
        fc.values.insert("config-file", (path.clone(), source));
        file::apply(&path, &mut fc, &mut warnings)?;
        warnings.push(format!(
            "loaded server configuration from {path:?}, other configuration command line flags and environment variables will be ignored if provided"
        ));
        cfg = fc;
    } else {
        apply_env(&mut cfg, env, env_keys, &mut warnings)?;
    }
    validate(&cfg)?;
    check_support(&cfg, &mut warnings)?;
    if !has_wal(&cfg.wal_dir()) {
        cfg.verify_bootstrap()?;
    }
    Ok(Loaded {
        config: cfg,
        warnings,
    })
}

/// Go's `FlagSet.Parse` over etcd's flags.
fn parse_args(
    args: &[String],
    cfg: &mut Config,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    let mut i = 0;
    while i < args.len() {
        let s = &args[i];
        if s.len() < 2 || !s.starts_with('-') {
            break;
        }
        let mut minuses = 1;
        if s.as_bytes()[1] == b'-' {
            minuses = 2;
            if s.len() == 2 {
                i += 1;
                break;
            }
        }
        let body = &s[minuses..];
        if body.is_empty() || body.starts_with('-') || body.starts_with('=') {
            return Err(err(format!("bad flag syntax: {s}")));
        }
        i += 1;
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (body, None),
        };
        if let Some(old) = table::IGNORED.iter().find(|f| **f == name) {
            // IsBoolFlag: never takes the next argument.
            warnings.push(format!("flag -{old} is no longer supported - ignoring"));
            cfg.ignored_set.push(old);
            continue;
        }
        let Some(flag) = table::find(name) else {
            if name == "help" || name == "h" {
                cfg.help = true;
                return Ok(());
            }
            return Err(err(format!("flag provided but not defined: -{name}")));
        };
        if flag.kind == Kind::Bool {
            let v = inline.unwrap_or_else(|| "true".into());
            if let Err(r) = value::check(flag, &v) {
                return Err(err(format!("invalid boolean value {v:?} for -{name}: {r}")));
            }
            cfg.values.insert(flag.name, (v, Source::Flag));
            continue;
        }
        let v = match inline {
            Some(v) => v,
            None => {
                let v = args
                    .get(i)
                    .ok_or_else(|| err(format!("flag needs an argument: -{name}")))?;
                i += 1;
                v.clone()
            }
        };
        if let Err(r) = value::check(flag, &v) {
            return Err(err(format!("invalid value {v:?} for flag -{name}: {r}")));
        }
        cfg.values.insert(flag.name, (v, Source::Flag));
    }
    if let Some(first) = args.get(i) {
        return Err(err(format!("'{first}' is not a valid flag")));
    }
    Ok(())
}

/// pkg/flags.SetFlagsFromEnv and verifyEnv.
fn apply_env(
    cfg: &mut Config,
    env: &dyn Fn(&str) -> Option<String>,
    env_keys: &[String],
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    let mut used: HashSet<String> = HashSet::new();
    // etcdmain unsets ETCD_VERSION before looking at the environment.
    if let Some(v) = env("ETCD_VERSION").filter(|v| !v.is_empty()) {
        warnings.push(format!(
            "cannot set special environment variable ETCD_VERSION={v}"
        ));
        used.insert("ETCD_VERSION".into());
    }
    let mut already_set: HashSet<String> = cfg
        .values
        .iter()
        .filter(|(_, (_, s))| *s == Source::Flag)
        .map(|(n, _)| table::env_name(n))
        .collect();
    already_set.extend(cfg.ignored_set.iter().map(|n| table::env_name(n)));
    // VisitAll goes in name order; a bad value is reported after the conflict check,
    // the last one winning.
    let mut names: Vec<&'static str> = table::FLAGS
        .iter()
        .map(|f| f.name)
        .chain(table::IGNORED.iter().copied())
        .filter(|n| *n != "version")
        .collect();
    names.sort_unstable();
    let mut bad_value = None;
    for name in names {
        let key = table::env_name(name);
        if already_set.contains(&key) || used.contains(&key) {
            continue;
        }
        let Some(v) = env(&key).filter(|v| !v.is_empty()) else {
            continue;
        };
        used.insert(key.clone());
        let Some(flag) = table::find(name) else {
            warnings.push(format!("flag -{name} is no longer supported - ignoring"));
            continue;
        };
        match value::check(flag, &v) {
            Ok(()) => {
                cfg.values.insert(flag.name, (v, Source::Env));
            }
            Err(r) => bad_value = Some(err(format!("invalid value {v:?} for {key}: {r}"))),
        }
    }
    for key in env_keys {
        if used.contains(key) {
            continue;
        }
        if already_set.contains(key) {
            return Err(err(format!(
                "conflicting environment variable {key:?} is shadowed by corresponding command-line flag (either unset environment variable or disable flag)"
            )));
        }
        if key.starts_with("ETCD_") && key != "ETCD_UNSUPPORTED_ARCH" {
            let v = env(key).unwrap_or_default();
            warnings.push(format!("unrecognized environment variable {key}={v}"));
        }
    }
    match bad_value {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// A non-default value of a flag whose feature is missing stops the server.
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
    if cfg.str("metrics") == "extensive" {
        return Err(err(
            "--metrics=\"extensive\" is not supported yet by oxcd (no gRPC histograms); remove it or set it to \"basic\"",
        ));
    }
    if cfg.str("log-format") != "json" {
        return Err(err(format!(
            "--log-format={:?} is not supported yet by oxcd; use json",
            cfg.str("log-format")
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
        Kind::Duration => {
            value::parse_duration(v).is_some()
                && value::parse_duration(v) == value::parse_duration(flag.default)
        }
        Kind::Uint | Kind::Uint32 => {
            value::parse_go_uint(v, 64).ok() == value::parse_go_uint(flag.default, 64).ok()
        }
        Kind::Int => value::parse_go_int(v, 64).ok() == value::parse_go_int(flag.default, 64).ok(),
        Kind::Urls => v.is_empty() || v == flag.default,
        Kind::Str => v == flag.default,
    }
}

/// zap's level names (`zapcore.Level.UnmarshalText`).
fn zap_level(v: &str) -> Option<&'static str> {
    Some(match v.to_ascii_lowercase().as_str() {
        "debug" => "debug",
        "info" | "" => "info",
        "warn" => "warn",
        "error" => "error",
        "dpanic" => "dpanic",
        "panic" => "panic",
        "fatal" => "fatal",
        _ => return None,
    })
}

/// embed.Config.Validate, in etcd's order.
fn validate(cfg: &Config) -> Result<(), ConfigError> {
    // setupLogging.
    match cfg.str("logger") {
        "zap" => {}
        "capnslog" => return Err(err("--logger=capnslog is removed in v3.5")),
        other => return Err(err(format!("unknown logger option {other:?}"))),
    }
    let outputs: Vec<&str> = cfg.str("log-outputs").split(',').collect();
    if outputs.len() > 1 && outputs.contains(&"default") {
        return Err(err("multi logoutput for \"default\" is not supported yet"));
    }
    if zap_level(cfg.str("log-level")).is_none() {
        return Err(err(format!(
            "unrecognized level: {:?}",
            cfg.str("log-level")
        )));
    }
    for name in [
        "listen-peer-urls",
        "listen-client-urls",
        "listen-client-http-urls",
        "listen-metrics-urls",
    ] {
        for u in cfg.parsed_urls(name)? {
            if u.scheme == "unix" || u.scheme == "unixs" {
                continue;
            }
            let (host, _) = value::split_host_port(&u.host).map_err(err)?;
            if host != "localhost" && host.parse::<std::net::IpAddr>().is_err() {
                return Err(err(format!("expected IP in URL for binding ({u})")));
            }
        }
    }
    for name in ["initial-advertise-peer-urls", "advertise-client-urls"] {
        if name == "advertise-client-urls" && cfg.advertise_client_unset() {
            continue;
        }
        let urls = cfg.parsed_urls(name)?;
        for u in &urls {
            let why = match value::split_host_port(&u.host) {
                Err(e) => Some(e),
                Ok((h, _)) if h.is_empty() => Some(format!("unexpected empty host ({u})")),
                Ok(_) => None,
            };
            if let Some(why) = why {
                let all: Vec<String> = urls.iter().map(value::GoUrl::text).collect();
                return Err(err(format!(
                    "--{name} {:?} must be \"host:port\" ({why})",
                    all.join(",")
                )));
            }
        }
    }
    let state = cfg.str("initial-cluster-state");
    if state != "new" && state != "existing" {
        return Err(err(format!("unexpected clusterState {state:?}")));
    }
    let bootstrap_sources = [
        !cfg.str("discovery").is_empty(),
        !cfg.initial_cluster_text().is_empty(),
        !cfg.str("discovery-srv").is_empty(),
    ];
    if bootstrap_sources.iter().filter(|b| **b).count() > 1 {
        return Err(err(
            "multiple discovery or bootstrap flags are set. Choose one of \"initial-cluster\", \"discovery\" or \"discovery-srv\"",
        ));
    }
    let (tick, election) = (cfg.uint("heartbeat-interval"), cfg.uint("election-timeout"));
    if tick == 0 {
        return Err(err(format!(
            "--heartbeat-interval must be >0 (set to {tick}ms)"
        )));
    }
    if election == 0 {
        return Err(err(format!(
            "--election-timeout must be >0 (set to {election}ms)"
        )));
    }
    if tick.saturating_mul(5) > election {
        return Err(err(format!(
            "--election-timeout[{election}ms] should be at least as 5 times as --heartbeat-interval[{tick}ms]"
        )));
    }
    if election > 50_000 {
        return Err(err(format!(
            "--election-timeout[{election}ms] is too long, and should be set less than 50000ms"
        )));
    }
    if cfg.advertise_client_unset() {
        return Err(err(
            "--advertise-client-urls is required when --listen-client-urls is set explicitly",
        ));
    }
    match cfg.str("auto-compaction-mode") {
        "" | "periodic" | "revision" => {}
        other => {
            return Err(err(format!("unknown auto-compaction-mode {other:?}")));
        }
    }
    if cfg.bool("experimental-enable-lease-checkpoint-persist")
        && !cfg.bool("experimental-enable-lease-checkpoint")
    {
        return Err(err(
            "setting experimental-enable-lease-checkpoint-persist requires experimental-enable-lease-checkpoint",
        ));
    }
    let hash_check = cfg.str("experimental-compact-hash-check-time");
    if value::parse_duration(hash_check).is_none_or(|d| d.is_zero()) {
        return Err(err(format!(
            "--experimental-compact-hash-check-time must be >0 (set to {hash_check})"
        )));
    }
    let tls_version = |name: &str| -> Result<u8, ConfigError> {
        match cfg.str(name) {
            "" => Ok(0),
            "TLS1.2" => Ok(12),
            "TLS1.3" => Ok(13),
            other => Err(err(format!(
                "unexpected TLS version {other:?} (must be one of: TLS1.2, TLS1.3)"
            ))),
        }
    };
    let (min, max) = (
        tls_version("tls-min-version")?,
        tls_version("tls-max-version")?,
    );
    if max != 0 && min > max {
        return Err(err(format!(
            "min version ({}) is greater than max version ({})",
            cfg.str("tls-min-version"),
            cfg.str("tls-max-version")
        )));
    }
    if min == 13 && !cfg.str("cipher-suites").is_empty() {
        return Err(err(
            "cipher suites cannot be configured when only TLS1.3 is enabled",
        ));
    }
    Ok(())
}

/// Whether `dir` holds WAL segments (etcd's `wal.Exist`): a member that has one restarts
/// from it and ignores the `--initial-cluster*` flags.
fn has_wal(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with(".wal"))
    })
}

/// Go's `%q` of a `[]string`.
fn go_quote_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

impl Config {
    fn empty() -> Config {
        Config {
            values: HashMap::new(),
            help: false,
            from_file: false,
            ignored_set: Vec::new(),
        }
    }

    /// The value of a flag (its default when unset; a URL flag set to "" keeps its
    /// default, as etcd's `UniqueURLs` do).
    pub fn str(&self, name: &str) -> &str {
        let default = || table::find(name).map(|f| f.default).unwrap_or("");
        match self.values.get(name) {
            Some((v, _))
                if v.is_empty() && table::find(name).is_some_and(|f| f.kind == Kind::Urls) =>
            {
                default()
            }
            Some((v, _)) => v,
            None => default(),
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

    /// An unsigned value (validated at parse time; Go's number syntax).
    pub fn uint(&self, name: &str) -> u64 {
        value::parse_go_uint(self.str(name), 64).unwrap_or(0)
    }

    /// A signed value.
    pub fn int(&self, name: &str) -> i64 {
        value::parse_go_int(self.str(name), 64).unwrap_or(0)
    }

    /// A boolean value.
    pub fn bool(&self, name: &str) -> bool {
        value::parse_bool(self.str(name)).unwrap_or(false)
    }

    /// A duration value (`None` if negative).
    pub fn duration(&self, name: &str) -> Option<Duration> {
        value::parse_duration(self.str(name))
    }

    fn parsed_urls(&self, name: &str) -> Result<Vec<value::GoUrl>, ConfigError> {
        let text = self.str(name);
        if text.is_empty() {
            return Ok(Vec::new());
        }
        value::parse_urls(text).map_err(err)
    }

    /// A URL list as etcd keeps it: trimmed, scheme lower-cased, de-duplicated, sorted.
    pub fn urls(&self, name: &str) -> Vec<String> {
        self.parsed_urls(name)
            .map(|us| us.iter().map(value::GoUrl::text).collect())
            .unwrap_or_default()
    }

    /// etcd drops the default advertise client URLs when only the listen URLs were given
    /// (by flag or variable; a config file keeps the default).
    fn advertise_client_unset(&self) -> bool {
        !self.from_file
            && self.explicit("listen-client-urls").is_some()
            && self.explicit("advertise-client-urls").is_none()
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

    fn wal_dir(&self) -> PathBuf {
        match self.explicit("wal-dir") {
            Some(w) if !w.is_empty() => PathBuf::from(w),
            _ => self.data_dir().join("member").join("wal"),
        }
    }

    /// The log level (lower case), `--debug` meaning debug.
    pub fn log_level(&self) -> &str {
        if self.bool("debug") {
            return "debug";
        }
        zap_level(self.str("log-level")).unwrap_or("info")
    }

    /// `--initial-cluster` as etcd resolves it: the given text, else etcd's default
    /// `default=http://localhost:2380`, which a member not named `default` turns into
    /// `<name>=<each --initial-advertise-peer-urls>` (UpdateDefaultClusterFromName).
    fn initial_cluster_text(&self) -> String {
        let discovery = !self.str("discovery").is_empty() || !self.str("discovery-srv").is_empty();
        let text = match self.explicit("initial-cluster") {
            Some(t) => t.to_string(),
            None if discovery => String::new(),
            None => DEFAULT_INITIAL_CLUSTER.to_string(),
        };
        let name = self.str("name");
        if name != "default" && text == DEFAULT_INITIAL_CLUSTER {
            return self
                .urls("initial-advertise-peer-urls")
                .iter()
                .map(|u| format!("{name}={u}"))
                .collect::<Vec<_>>()
                .join(",");
        }
        text
    }

    /// `--initial-cluster` as (name, sorted peer URLs), in order of first appearance
    /// (etcd's `types.NewURLsMap`).
    pub fn initial_cluster(&self) -> Result<Vec<(String, Vec<String>)>, ConfigError> {
        let text = self.initial_cluster_text();
        let mut members: Vec<(String, Vec<String>)> = Vec::new();
        for part in text.split(',').filter(|p| !p.is_empty()) {
            let (name, url) = part.split_once('=').unwrap_or((part, ""));
            match members.iter_mut().find(|(n, _)| n == name) {
                Some((_, urls)) => urls.push(url.to_string()),
                None => members.push((name.to_string(), vec![url.to_string()])),
            }
        }
        for (_, urls) in &mut members {
            let mut parsed = Vec::new();
            for u in urls.iter() {
                let url = value::parse_url(u.trim())
                    .map_err(|e| err(format!("error setting up initial cluster: {e}")))?;
                parsed.push(url.text());
            }
            parsed.sort();
            *urls = parsed;
        }
        Ok(members)
    }

    /// etcd's checks of a new member's `--initial-cluster` (config.VerifyBootstrap):
    /// it lists this member, with exactly its advertised peer URLs, and no URL twice.
    pub fn verify_bootstrap(&self) -> Result<(), ConfigError> {
        let members = self.initial_cluster()?;
        let name = self.str("name");
        let Some((_, urls)) = members.iter().find(|(n, _)| n == name) else {
            return Err(err(format!(
                "couldn't find local name {name:?} in the initial cluster configuration"
            )));
        };
        let advertised = self.urls("initial-advertise-peer-urls");
        if &advertised != urls {
            let why = if advertised.len() != urls.len() {
                format!(
                    "len({}) != len({})",
                    go_quote_list(&advertised),
                    go_quote_list(urls)
                )
            } else {
                let (a, b) = advertised
                    .iter()
                    .zip(urls)
                    .find(|(a, b)| a != b)
                    .unwrap_or((&advertised[0], &urls[0]));
                format!("resolved urls: {a:?} != {b:?}")
            };
            let ap = advertised.join(",");
            let missing: Vec<String> = urls
                .iter()
                .filter(|u| !advertised.contains(u))
                .map(|u| format!("{name}={u}"))
                .collect();
            if !missing.is_empty() {
                return Err(err(format!(
                    "--initial-cluster has {} but missing from --initial-advertise-peer-urls={ap} ({why})",
                    missing.join(",")
                )));
            }
            let extra: Vec<&str> = advertised
                .iter()
                .filter(|u| !urls.contains(u))
                .map(String::as_str)
                .collect();
            let mine: Vec<String> = advertised.iter().map(|u| format!("{name}={u}")).collect();
            if !extra.is_empty() {
                return Err(err(format!(
                    "--initial-advertise-peer-urls has {} but missing from --initial-cluster={}",
                    extra.join(","),
                    mine.join(",")
                )));
            }
            return Err(err(format!(
                "failed to resolve {ap} to match --initial-cluster={} ({why})",
                mine.join(",")
            )));
        }
        let mut seen = HashSet::new();
        if members
            .iter()
            .flat_map(|(_, us)| us)
            .any(|u| !seen.insert(u))
        {
            let mut pairs: Vec<String> = members
                .iter()
                .flat_map(|(n, us)| us.iter().map(move |u| format!("{n}={u}")))
                .collect();
            pairs.sort();
            return Err(err(format!(
                "initial cluster {} has duplicate url",
                pairs.join(",")
            )));
        }
        Ok(())
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
        s.initial_cluster_existing = self.str("initial-cluster-state") == "existing";
        // The 3.6 name wins when both are given (etcd 3.6 deprecates the other).
        s.snapshot_catchup_entries = match self.explicit("snapshot-catchup-entries") {
            Some(_) => self.uint("snapshot-catchup-entries"),
            None => self.uint("experimental-snapshot-catchup-entries"),
        };
        s.initial_corrupt_check = self.bool("experimental-initial-corrupt-check");
        s.corrupt_check_time = ["experimental-corrupt-check-time", "corrupt-check-time"]
            .iter()
            .filter_map(|f| self.duration(f))
            .max()
            .unwrap_or_default();
        s
    }
}

/// The `--help` text.
pub fn usage() -> String {
    let mut out = String::from(
        "Usage:\n\n  oxcd [flags]\n    Start an oxcd member (etcd v3 compatible).\n\n  oxcd --version\n    Show the version of oxcd and of the etcd API it speaks.\n\n  oxcd -h | --help\n    Show this help.\n\n  oxcd --config-file\n    Path to the server configuration file. Note that if a configuration file is provided, other command line flags and environment variables will be ignored.\n\nFlags (each also read from ETCD_<FLAG>, e.g. ETCD_DATA_DIR, when not given on the command line):\n",
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
