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
pub mod renamed;
pub mod table;
pub mod typed;
pub mod value;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use table::{Kind, Support, key};
use typed::{Key, ValueType};

use oxcd_transport::{TlsInfo, TlsOptions, TlsVersion};

use crate::auto_compaction::{self, AutoCompaction};
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
/// etcd's progress notification interval, used when the flag is zero or negative.
const DEFAULT_PROGRESS_NOTIFY: Duration = Duration::from_secs(600);

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
    let file = match cfg.explicit(key::CONFIG_FILE) {
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
    check_renamed(&cfg, &mut warnings)?;
    check_support(&cfg, &mut warnings)?;
    let restart = has_wal(&cfg.wal_dir());
    // etcd reads --initial-cluster, then the retention, then checks the cluster.
    if !restart {
        cfg.initial_cluster()?;
    }
    cfg.auto_compaction()?;
    // With discovery the cluster is known once DNS or the discovery service answers
    // (crate::start::discovery).
    if !restart
        && cfg.get(key::DISCOVERY_SRV).is_empty()
        && cfg.get(key::DISCOVERY_ENDPOINTS).is_empty()
    {
        cfg.verify_bootstrap()?;
    }
    check_auth_token(&cfg, &mut warnings)?;
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
            if let Err(r) = table::check(flag, &v) {
                return Err(err(format!(
                    "invalid boolean value {} for -{name}: {r}",
                    q(&v)
                )));
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
        if let Err(r) = table::check(flag, &v) {
            return Err(err(format!(
                "invalid value {} for flag -{name}: {r}",
                q(&v)
            )));
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
        match table::check(flag, &v) {
            Ok(()) => {
                cfg.values.insert(flag.name, (v, Source::Env));
            }
            Err(r) => bad_value = Some(err(format!("invalid value {} for {key}: {r}", q(&v)))),
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

/// etcd 3.6's checks of its renamed flags and gates, and its deprecation warnings (in
/// the flag table's order; etcd logs them in a map's order).
fn check_renamed(cfg: &Config, warnings: &mut Vec<String>) -> Result<(), ConfigError> {
    for (old, new) in renamed::RENAMED {
        if cfg.explicit_raw(old).is_some() && cfg.explicit_raw(new).is_some() {
            return Err(err(renamed::both_given(old, new)));
        }
    }
    let gates_value = cfg.get(key::FEATURE_GATES);
    let from_flag = crate::features::FeatureGates::from_named(
        &crate::features::parse(gates_value).unwrap_or_default(),
    );
    let gates = cfg.feature_gates();
    for (flag, gate) in crate::features::EXPERIMENTAL_FLAGS {
        // etcd's test is a substring of the flag's text.
        if let Some(v) = cfg.explicit_raw(flag)
            && gates_value.contains(gate)
        {
            let on = from_flag.enabled(gate);
            let flag_on = value::parse_bool(v).unwrap_or_default();
            return Err(err(renamed::gate_both_given(flag, flag_on, gate, on)));
        }
    }
    let unary_old = cfg.get(key::EXPERIMENTAL_WARNING_UNARY_REQUEST_DURATION);
    let unary_new = cfg.get(key::WARNING_UNARY_REQUEST_DURATION);
    let nonzero = |d: Option<Duration>| d.is_some_and(|d| !d.is_zero());
    if nonzero(unary_old) && nonzero(unary_new) {
        return Err(err(renamed::UNARY_DURATION_BOTH));
    }
    if nonzero(unary_old) {
        warnings.push(renamed::UNARY_DURATION_WARNING.to_string());
    }
    for (flag, warning) in renamed::DEPRECATED {
        if cfg.explicit_raw(flag).is_some() {
            warnings.push(warning.to_string());
        }
    }
    for gate in ["CompactHashCheck", "SetMemberLocalAddr"] {
        if gates.enabled(gate) {
            return Err(err(format!(
                "--feature-gates={gate}=true is not supported yet by oxcd (the feature is not built); remove it"
            )));
        }
    }
    if !gates_value.is_empty() {
        warnings.push(gates.describe());
    }
    Ok(())
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
    if emulated_version(cfg.get(key::EMULATED_VERSION)).is_none() {
        return Err(err(format!(
            "--emulated-version={:?} is not supported: oxcd acts as etcd 3.6 or 3.5",
            cfg.get(key::EMULATED_VERSION)
        )));
    }
    let cost = cfg.get(key::BCRYPT_COST);
    if !(4..=31).contains(&cost) {
        warnings.push(format!(
            "--bcrypt-cost={cost} is outside bcrypt's 4..31: the default cost 10 is used (as etcd)"
        ));
    }
    if cfg.get(key::LOG_FORMAT) != "json" {
        return Err(err(format!(
            "--log-format={:?} is not supported yet by oxcd; use json",
            cfg.get(key::LOG_FORMAT)
        )));
    }
    for out in cfg.get(key::LOG_OUTPUTS).split(',') {
        if !matches!(out, "default" | "stderr" | "stdout") {
            return Err(err(format!(
                "--log-outputs={out:?} is not supported yet by oxcd; use default, stderr or stdout"
            )));
        }
    }
    Ok(())
}

/// The release `--emulated-version` names (`3.5` or `3.6`), as `X.Y.0`; None for any
/// other value.
pub fn emulated_version(text: &str) -> Option<oxcd_go::semver::Version> {
    match text {
        "3.5" => Some(oxcd_go::semver::Version::new(3, 5, 0)),
        "3.6" => Some(oxcd_go::semver::Version::new(3, 6, 0)),
        _ => None,
    }
}

/// `--auth-token` and its JWT key files, read as etcd reads them when it makes its
/// server (after the bootstrap checks), with its start-up errors; oxcd reads them here,
/// before anything is created, and again when the member starts.
fn check_auth_token(cfg: &Config, warnings: &mut Vec<String>) -> Result<(), ConfigError> {
    let (_, token_warnings) =
        oxcd_auth::provider::TokenProvider::from_flag(cfg.get(key::AUTH_TOKEN), Duration::ZERO)
            .map_err(|e| err(e.to_string()))?;
    warnings.extend(token_warnings);
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
    match cfg.get(key::LOGGER) {
        "zap" => {}
        "capnslog" => return Err(err("--logger=capnslog is removed in v3.5")),
        other => return Err(err(format!("unknown logger option {}", q(other)))),
    }
    let outputs: Vec<&str> = cfg.get(key::LOG_OUTPUTS).split(',').collect();
    if outputs.len() > 1 && outputs.contains(&"default") {
        return Err(err("multi logoutput for \"default\" is not supported yet"));
    }
    if zap_level(cfg.get(key::LOG_LEVEL)).is_none() {
        return Err(err(format!(
            "unrecognized level: {}",
            q(cfg.get(key::LOG_LEVEL))
        )));
    }
    for k in [
        key::LISTEN_PEER_URLS,
        key::LISTEN_CLIENT_URLS,
        key::LISTEN_CLIENT_HTTP_URLS,
        key::LISTEN_METRICS_URLS,
    ] {
        for u in cfg.parsed_urls(k.name)? {
            if u.scheme == "unix" || u.scheme == "unixs" {
                continue;
            }
            let (host, _) = value::split_host_port(&u.host).map_err(err)?;
            if host != "localhost" && host.parse::<std::net::IpAddr>().is_err() {
                return Err(err(format!("expected IP in URL for binding ({u})")));
            }
        }
    }
    for k in [key::INITIAL_ADVERTISE_PEER_URLS, key::ADVERTISE_CLIENT_URLS] {
        let name = k.name;
        if name == key::ADVERTISE_CLIENT_URLS.name && cfg.advertise_client_unset() {
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
    let state = cfg.get(key::INITIAL_CLUSTER_STATE);
    if state != "new" && state != "existing" {
        return Err(err(format!("unexpected clusterState {}", q(state))));
    }
    let bootstrap_sources = [
        !cfg.get(key::DISCOVERY).is_empty() || !cfg.get(key::DISCOVERY_ENDPOINTS).is_empty(),
        !cfg.initial_cluster_text().is_empty(),
        !cfg.get(key::DISCOVERY_SRV).is_empty(),
    ];
    // etcd 3.6's v3 discovery takes both or neither.
    if cfg.get(key::DISCOVERY_TOKEN).is_empty() != cfg.get(key::DISCOVERY_ENDPOINTS).is_empty() {
        return Err(err(
            "both --discovery-token and --discovery-endpoints must be set",
        ));
    }
    if bootstrap_sources.iter().filter(|b| **b).count() > 1 {
        return Err(err(
            "multiple discovery or bootstrap flags are set. Choose one of \"initial-cluster\", \"discovery\" or \"discovery-srv\"",
        ));
    }
    let (tick, election) = (
        cfg.get(key::HEARTBEAT_INTERVAL),
        cfg.get(key::ELECTION_TIMEOUT),
    );
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
    match cfg.get(key::AUTO_COMPACTION_MODE) {
        "" | "periodic" | "revision" => {}
        other => {
            return Err(err(format!("unknown auto-compaction-mode {other:?}")));
        }
    }
    if cfg.get(key::EXPERIMENTAL_ENABLE_LEASE_CHECKPOINT_PERSIST)
        && !cfg.get(key::EXPERIMENTAL_ENABLE_LEASE_CHECKPOINT)
    {
        return Err(err(
            "setting experimental-enable-lease-checkpoint-persist requires experimental-enable-lease-checkpoint",
        ));
    }
    let hash_check = key::EXPERIMENTAL_COMPACT_HASH_CHECK_TIME;
    if cfg.get(hash_check).is_none_or(|d| d.is_zero()) {
        return Err(err(format!(
            "--experimental-compact-hash-check-time must be >0 (set to {})",
            cfg.text(hash_check.name)
        )));
    }
    cfg.tls_options()?;
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
    let quoted: Vec<String> = items.iter().map(|s| oxcd_go::quote::quote_str(s)).collect();
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

    /// The value of a typed flag (its default when unset).
    pub fn get<T: ValueType>(&self, k: Key<T>) -> T::Value<'_> {
        T::read(self, k.name)
    }

    /// The text of the flag called `name` (its default when unset; a URL flag set to ""
    /// keeps its default, as etcd's `UniqueURLs` do); `None` if no flag has that name.
    /// For code that goes over the whole table; everything else reads typed keys.
    pub fn raw(&self, name: &str) -> Option<&str> {
        let flag = table::find(name)?;
        Some(match self.values.get(name) {
            Some((v, _)) if v.is_empty() && flag.kind == Kind::Urls => flag.default,
            Some((v, _)) => v,
            None => flag.default,
        })
    }

    /// The text of a flag known to exist (keys are made from the table).
    fn text(&self, name: &'static str) -> &str {
        self.raw(name).unwrap_or_default()
    }

    /// The value when set by flag, variable or file.
    pub fn explicit<T>(&self, k: Key<T>) -> Option<&str> {
        self.explicit_raw(k.name)
    }

    fn explicit_raw(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(|(v, _)| v.as_str())
    }

    /// A flag etcd 3.6 renamed: the old name's value when it was given (etcd 3.6 copies
    /// it over the new one), else the new name's.
    pub fn renamed<T: ValueType>(&self, old: Key<T>, new: Key<T>) -> T::Value<'_> {
        if self.explicit(old).is_some() {
            self.get(old)
        } else {
            self.get(new)
        }
    }

    /// The feature gates: `--feature-gates`, with the experimental flags 3.6 maps onto
    /// gates (checked when the configuration was loaded).
    pub fn feature_gates(&self) -> crate::features::FeatureGates {
        let named = crate::features::parse(self.get(key::FEATURE_GATES)).unwrap_or_default();
        let mut gates = crate::features::FeatureGates::from_named(&named);
        for (flag, gate) in crate::features::EXPERIMENTAL_FLAGS {
            if let Some(v) = self.explicit_raw(flag)
                && let Some(on) = value::parse_bool(v)
            {
                gates.set(gate, on);
            }
        }
        gates
    }

    /// Where a value came from (`name`: a flag of the table).
    pub fn source(&self, name: &str) -> Source {
        self.values
            .get(name)
            .map(|(_, s)| *s)
            .unwrap_or(Source::Default)
    }

    fn parsed_urls(&self, name: &'static str) -> Result<Vec<value::GoUrl>, ConfigError> {
        let text = self.text(name);
        if text.is_empty() {
            return Ok(Vec::new());
        }
        value::parse_urls(text).map_err(err)
    }

    /// etcd drops the default advertise client URLs when only the listen URLs were given
    /// (by flag or variable; a config file keeps the default).
    fn advertise_client_unset(&self) -> bool {
        !self.from_file
            && self.explicit(key::LISTEN_CLIENT_URLS).is_some()
            && self.explicit(key::ADVERTISE_CLIENT_URLS).is_none()
    }

    /// `--version` was asked for.
    pub fn version(&self) -> bool {
        self.get(key::VERSION)
    }

    /// `--data-dir`, or etcd's `<name>.etcd`.
    pub fn data_dir(&self) -> PathBuf {
        match self.explicit(key::DATA_DIR) {
            Some(d) if !d.is_empty() => PathBuf::from(d),
            _ => PathBuf::from(format!("{}.etcd", self.get(key::NAME))),
        }
    }

    fn wal_dir(&self) -> PathBuf {
        match self.explicit(key::WAL_DIR) {
            Some(w) if !w.is_empty() => PathBuf::from(w),
            _ => self.data_dir().join("member").join("wal"),
        }
    }

    /// The log level (lower case), `--debug` meaning debug.
    pub fn log_level(&self) -> &str {
        if self.get(key::DEBUG) {
            return "debug";
        }
        zap_level(self.get(key::LOG_LEVEL)).unwrap_or("info")
    }

    /// `--initial-cluster` as etcd resolves it: the given text, else etcd's default
    /// `default=http://localhost:2380`, which a member not named `default` turns into
    /// `<name>=<each --initial-advertise-peer-urls>` (UpdateDefaultClusterFromName).
    fn initial_cluster_text(&self) -> String {
        let discovery = !self.get(key::DISCOVERY).is_empty()
            || !self.get(key::DISCOVERY_SRV).is_empty()
            || !self.get(key::DISCOVERY_ENDPOINTS).is_empty();
        let text = match self.explicit(key::INITIAL_CLUSTER) {
            Some(t) => t.to_string(),
            None if discovery => String::new(),
            None => DEFAULT_INITIAL_CLUSTER.to_string(),
        };
        let name = self.get(key::NAME);
        if name != "default" && text == DEFAULT_INITIAL_CLUSTER {
            return self
                .get(key::INITIAL_ADVERTISE_PEER_URLS)
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
        parse_initial_cluster(&self.initial_cluster_text())
            .map_err(|e| err(format!("error setting up initial cluster: {e}")))
    }

    /// etcd's checks of a new member's `--initial-cluster` (config.VerifyBootstrap):
    /// it lists this member, with exactly its advertised peer URLs, and no URL twice.
    pub fn verify_bootstrap(&self) -> Result<(), ConfigError> {
        let members = self.initial_cluster()?;
        let advertised = self.get(key::INITIAL_ADVERTISE_PEER_URLS);
        verify_bootstrap(self.get(key::NAME), &members, &advertised).map_err(err)
    }

    /// `--auto-compaction-mode` and `--auto-compaction-retention` as etcd reads them
    /// (None: off), or etcd's error.
    pub fn auto_compaction(&self) -> Result<Option<AutoCompaction>, ConfigError> {
        auto_compaction::parse(
            self.get(key::AUTO_COMPACTION_MODE),
            self.get(key::AUTO_COMPACTION_RETENTION),
        )
        .map_err(err)
    }

    /// etcd's defaults: every flag unset.
    pub fn defaults() -> Config {
        Config::empty()
    }

    /// What the member needs to start.
    pub fn settings(&self) -> Settings {
        let name = self.get(key::NAME);
        let path = |k: Key<typed::Text>| {
            Some(self.get(k))
                .filter(|p| !p.is_empty())
                .map(PathBuf::from)
        };
        let list = |k: Key<typed::Text>| -> Vec<String> {
            self.get(k)
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()
        };
        let options = self.tls_options().unwrap_or_default();
        Settings {
            name: name.to_string(),
            data_dir: self.data_dir(),
            wal_dir: path(key::WAL_DIR),
            listen_client_urls: self.get(key::LISTEN_CLIENT_URLS),
            listen_client_http_urls: self.get(key::LISTEN_CLIENT_HTTP_URLS),
            advertise_client_urls: self.get(key::ADVERTISE_CLIENT_URLS),
            peer_urls: self.get(key::INITIAL_ADVERTISE_PEER_URLS),
            listen_peer_urls: self.get(key::LISTEN_PEER_URLS),
            initial_cluster: self.initial_cluster().unwrap_or_default(),
            initial_cluster_existing: self.get(key::INITIAL_CLUSTER_STATE) == "existing",
            initial_cluster_token: self.get(key::INITIAL_CLUSTER_TOKEN).to_string(),
            max_txn_ops: self.get(key::MAX_TXN_OPS) as usize,
            max_request_bytes: self.get(key::MAX_REQUEST_BYTES) as usize,
            snapshot_count: self.get(key::SNAPSHOT_COUNT),
            snapshot_catchup_entries: self.renamed(
                key::EXPERIMENTAL_SNAPSHOT_CATCHUP_ENTRIES,
                key::SNAPSHOT_CATCHUP_ENTRIES,
            ),
            heartbeat: Duration::from_millis(self.get(key::HEARTBEAT_INTERVAL)),
            election_timeout: Duration::from_millis(self.get(key::ELECTION_TIMEOUT)),
            pre_vote: self.get(key::PRE_VOTE),
            unsafe_no_fsync: self.get(key::UNSAFE_NO_FSYNC),
            enable_pprof: self.get(key::ENABLE_PPROF),
            // Checked when the configuration was loaded.
            emulated_version: emulated_version(self.get(key::EMULATED_VERSION))
                .unwrap_or(oxcd_go::semver::Version::new(3, 6, 0)),
            stop_grpc_service_on_defrag: self.feature_gates().enabled("StopGRPCServiceOnDefrag"),
            feature_gates: self.feature_gates(),
            max_wals: self.get(key::MAX_WALS) as usize,
            quota_backend_bytes: self.get(key::QUOTA_BACKEND_BYTES),
            initial_corrupt_check: self.feature_gates().enabled("InitialCorruptCheck"),
            corrupt_check_time: self
                .renamed(
                    key::EXPERIMENTAL_CORRUPT_CHECK_TIME,
                    key::CORRUPT_CHECK_TIME,
                )
                .unwrap_or_default(),
            warning_apply_duration: self
                .renamed(
                    key::EXPERIMENTAL_WARNING_APPLY_DURATION,
                    key::WARNING_APPLY_DURATION,
                )
                .unwrap_or(std::time::Duration::from_millis(100)),
            downgrade_check_time: self
                .renamed(
                    key::EXPERIMENTAL_DOWNGRADE_CHECK_TIME,
                    key::DOWNGRADE_CHECK_TIME,
                )
                .unwrap_or_default(),
            // Zero or less is etcd's default.
            watch_progress_notify_interval: self
                .renamed(
                    key::EXPERIMENTAL_WATCH_PROGRESS_NOTIFY_INTERVAL,
                    key::WATCH_PROGRESS_NOTIFY_INTERVAL,
                )
                .filter(|d| !d.is_zero())
                .unwrap_or(DEFAULT_PROGRESS_NOTIFY),
            listen_metrics_urls: self.get(key::LISTEN_METRICS_URLS),
            client_tls: TlsInfo {
                cert_file: path(key::CERT_FILE),
                key_file: path(key::KEY_FILE),
                trusted_ca_file: path(key::TRUSTED_CA_FILE),
                client_cert_auth: self.get(key::CLIENT_CERT_AUTH),
                crl_file: path(key::CLIENT_CRL_FILE),
                allowed_hostnames: list(key::CLIENT_CERT_ALLOWED_HOSTNAME),
                options: options.clone(),
                ..TlsInfo::default()
            },
            client_auto_tls: self.get(key::AUTO_TLS),
            peer_tls: TlsInfo {
                cert_file: path(key::PEER_CERT_FILE),
                key_file: path(key::PEER_KEY_FILE),
                client_cert_file: path(key::PEER_CLIENT_CERT_FILE),
                client_key_file: path(key::PEER_CLIENT_KEY_FILE),
                trusted_ca_file: path(key::PEER_TRUSTED_CA_FILE),
                client_cert_auth: self.get(key::PEER_CLIENT_CERT_AUTH),
                crl_file: path(key::PEER_CRL_FILE),
                allowed_cn: list(key::PEER_CERT_ALLOWED_CN),
                allowed_hostnames: list(key::PEER_CERT_ALLOWED_HOSTNAME),
                options,
                ..TlsInfo::default()
            },
            peer_auto_tls: self.get(key::PEER_AUTO_TLS),
            self_signed_cert_validity: self
                .get(key::SELF_SIGNED_CERT_VALIDITY)
                .min(u64::from(u32::MAX)) as u32,
            peer_skip_client_san_verification: self.renamed(
                key::EXPERIMENTAL_PEER_SKIP_CLIENT_SAN_VERIFICATION,
                key::PEER_SKIP_CLIENT_SAN_VERIFICATION,
            ),
            peer_source_ip: None,
            // etcd: zero is its default TTL; a cost bcrypt refuses is its default cost.
            auth_token: self.get(key::AUTH_TOKEN).to_string(),
            auth_token_ttl: Duration::from_secs(match self.get(key::AUTH_TOKEN_TTL) {
                0 => 300,
                ttl => ttl,
            }),
            bcrypt_cost: u32::try_from(self.get(key::BCRYPT_COST))
                .ok()
                .filter(|cost| (4..=31).contains(cost))
                .unwrap_or(10),
            auth_password_cache_ttl: self.get(key::AUTH_PASSWORD_CACHE_TTL).unwrap_or_default(),
            strict_reconfig_check: self.get(key::STRICT_RECONFIG_CHECK),
            max_learners: self.get(key::MAX_LEARNERS).min(u64::from(u32::MAX)) as u32,
            force_new_cluster: self.get(key::FORCE_NEW_CLUSTER),
            auto_promote_learners: self.get(key::AUTO_PROMOTE_LEARNERS),
            max_inflight_range_bytes: self.get(key::MAX_INFLIGHT_RANGE_BYTES),
            enable_grpc_gateway: self.get(key::ENABLE_GRPC_GATEWAY),
            discovery_srv: self.get(key::DISCOVERY_SRV).to_string(),
            discovery_srv_name: self.get(key::DISCOVERY_SRV_NAME).to_string(),
            discovery_endpoints: self
                .get(key::DISCOVERY_ENDPOINTS)
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(str::to_string)
                .collect(),
            discovery_token: self.get(key::DISCOVERY_TOKEN).to_string(),
            max_concurrent_streams: self
                .get(key::MAX_CONCURRENT_STREAMS)
                .min(u64::from(u32::MAX)) as u32,
            // As etcd: any other value is basic.
            metrics_extensive: self.get(key::METRICS) == "extensive",
            // Checked when the configuration was loaded.
            auto_compaction: self.auto_compaction().ok().flatten(),
            auto_compaction_revision_interval: auto_compaction::REVISION_INTERVAL,
        }
    }

    /// `--cipher-suites`, `--tls-min-version`, `--tls-max-version`, checked as etcd
    /// checks them (and refused where oxcd lacks a suite).
    fn tls_options(&self) -> Result<TlsOptions, ConfigError> {
        let version = |k: Key<typed::Text>| TlsVersion::parse(self.get(k)).map_err(|e| err(e.0));
        let options = TlsOptions {
            cipher_suites: self
                .get(key::CIPHER_SUITES)
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
            min_version: version(key::TLS_MIN_VERSION)?.unwrap_or(TlsVersion::Tls12),
            max_version: version(key::TLS_MAX_VERSION)?,
        };
        options.validate().map_err(|e| err(e.0))?;
        Ok(options)
    }
}

/// etcd's `types.NewURLsMap` on an `--initial-cluster` text: (name, sorted peer URLs),
impl Settings {
    /// etcd's defaults (the flag table's) for a member called `name` in `data_dir`,
    /// alone in its cluster. (Here, beside the table the defaults come from, so that the
    /// settings do not depend on the flags.)
    pub fn new(name: &str, data_dir: std::path::PathBuf) -> Settings {
        let mut s = Config::defaults().settings();
        s.name = name.to_string();
        s.data_dir = data_dir;
        s.initial_cluster = vec![(name.to_string(), s.peer_urls.clone())];
        s
    }
}

/// in order of first appearance; the error is the first bad URL's.
pub fn parse_initial_cluster(text: &str) -> Result<Vec<(String, Vec<String>)>, String> {
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
            parsed.push(value::parse_url(u.trim())?.text());
        }
        parsed.sort();
        *urls = parsed;
    }
    Ok(members)
}

/// etcd's `config.VerifyBootstrap` with etcd's messages: `members` (from
/// [`parse_initial_cluster`]) lists the member `name`, with exactly its `advertised` peer
/// URLs (sorted), and no URL twice.
pub fn verify_bootstrap(
    name: &str,
    members: &[(String, Vec<String>)],
    advertised: &[String],
) -> Result<(), String> {
    let Some((_, urls)) = members.iter().find(|(n, _)| n == name) else {
        return Err(format!(
            "couldn't find local name {} in the initial cluster configuration",
            q(name)
        ));
    };
    if advertised != urls.as_slice() {
        let why = if advertised.len() != urls.len() {
            format!(
                "len({}) != len({})",
                go_quote_list(advertised),
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
            return Err(format!(
                "--initial-cluster has {} but missing from --initial-advertise-peer-urls={ap} ({why})",
                missing.join(",")
            ));
        }
        let extra: Vec<&str> = advertised
            .iter()
            .filter(|u| !urls.contains(u))
            .map(String::as_str)
            .collect();
        let mine: Vec<String> = advertised.iter().map(|u| format!("{name}={u}")).collect();
        if !extra.is_empty() {
            return Err(format!(
                "--initial-advertise-peer-urls has {} but missing from --initial-cluster={}",
                extra.join(","),
                mine.join(",")
            ));
        }
        return Err(format!(
            "failed to resolve {ap} to match --initial-cluster={} ({why})",
            mine.join(",")
        ));
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
        return Err(format!(
            "initial cluster {} has duplicate url",
            pairs.join(",")
        ));
    }
    Ok(())
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

/// Go's `%q` of `s`: how etcd's and Go's flag package's texts quote a value.
fn q(s: &str) -> String {
    oxcd_go::quote::quote_str(s)
}

#[cfg(test)]
mod tests;
