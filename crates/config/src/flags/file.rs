//! `--config-file`: etcd's YAML configuration, read as etcd 3.5 reads it (sigs.k8s.io/yaml
//! into `embed.configYAML`): keys are etcd's JSON tags, values are typed as etcd's Go
//! fields are (numbers for durations, in nanoseconds; lists for `log-outputs`; comma
//! strings for URLs), the first type error in key order stops, and the TLS flags live in
//! the `client-transport-security` / `peer-transport-security` sections. Keys etcd does
//! not know are ignored (with a warning here).

use serde_yaml::Value;

use super::table::{self, Kind};
use super::{Config, ConfigError, Source, err};

/// The Go type of a configYAML field, as json.Unmarshal names it in its errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GoType {
    Str(&'static str),
    Strings,
    Bool,
    Unsigned(&'static str, u32),
    Signed(&'static str, u32),
    Duration,
}

impl GoType {
    fn name(self) -> &'static str {
        match self {
            GoType::Str(n) | GoType::Unsigned(n, _) | GoType::Signed(n, _) => n,
            GoType::Strings => "[]string",
            GoType::Bool => "bool",
            GoType::Duration => "time.Duration",
        }
    }
}

fn go_type(flag: &table::Flag) -> GoType {
    match flag.name {
        "snapshot-count" | "experimental-snapshot-catchup-entries" | "snapshot-catchup-entries" => {
            GoType::Unsigned("uint64", 64)
        }
        "max-concurrent-streams" => GoType::Unsigned("uint32", 32),
        "quota-backend-bytes" => GoType::Signed("int64", 64),
        "v2-deprecation" => GoType::Str("config.V2DeprecationEnum"),
        "log-outputs"
        | "cipher-suites"
        | "client-cert-allowed-hostname"
        | "peer-cert-allowed-cn"
        | "peer-cert-allowed-hostname" => GoType::Strings,
        _ => match flag.kind {
            Kind::Str | Kind::Urls => GoType::Str("string"),
            Kind::Bool => GoType::Bool,
            Kind::Uint => GoType::Unsigned("uint", 64),
            Kind::Uint32 => GoType::Unsigned("uint32", 32),
            Kind::Int => GoType::Signed("int", 64),
            Kind::Duration => GoType::Duration,
        },
    }
}

/// Flags that are not top-level keys of etcd's YAML (set elsewhere or not at all).
const NOT_TOP_LEVEL: &[&str] = &[
    "config-file",
    "version",
    "raft-read-timeout",
    "raft-write-timeout",
    "client-crl-file",
    "peer-crl-file",
    "cert-file",
    "key-file",
    "client-cert-file",
    "client-key-file",
    "client-cert-auth",
    "trusted-ca-file",
    "auto-tls",
    "client-cert-allowed-hostname",
    "peer-cert-file",
    "peer-key-file",
    "peer-client-cert-file",
    "peer-client-key-file",
    "peer-client-cert-auth",
    "peer-trusted-ca-file",
    "peer-auto-tls",
    "peer-cert-allowed-cn",
    "peer-cert-allowed-hostname",
    "socket-reuse-port",
    "socket-reuse-address",
    "experimental-snapshot-catchup-entries",
    "experimental-peer-skip-client-san-verification",
];

/// The flag a top-level key sets.
fn top_level_flag(key: &str) -> Option<&'static table::Flag> {
    if key == "experimental-snapshot-catch-up-entries" {
        return table::find("experimental-snapshot-catchup-entries");
    }
    if NOT_TOP_LEVEL.contains(&key) {
        return None;
    }
    table::find(key)
}

/// etcd's `securityConfig` keys and the flags they set (client, peer); `None` where
/// no flag exists.
const SECURITY: &[(&str, Option<&str>, &str)] = &[
    ("allowed-cn", None, "peer-cert-allowed-cn"),
    (
        "allowed-hostname",
        Some("client-cert-allowed-hostname"),
        "peer-cert-allowed-hostname",
    ),
    ("auto-tls", Some("auto-tls"), "peer-auto-tls"),
    ("cert-file", Some("cert-file"), "peer-cert-file"),
    (
        "client-cert-auth",
        Some("client-cert-auth"),
        "peer-client-cert-auth",
    ),
    (
        "client-cert-file",
        Some("client-cert-file"),
        "peer-client-cert-file",
    ),
    (
        "client-key-file",
        Some("client-key-file"),
        "peer-client-key-file",
    ),
    ("key-file", Some("key-file"), "peer-key-file"),
    (
        "trusted-ca-file",
        Some("trusted-ca-file"),
        "peer-trusted-ca-file",
    ),
];

/// The keys etcdmain reads into its own `configProxy`.
const PROXY_KEYS: &[&str] = &[
    "discovery-fallback",
    "proxy",
    "proxy-dial-timeout",
    "proxy-failure-wait",
    "proxy-read-timeout",
    "proxy-refresh-interval",
    "proxy-write-timeout",
];

/// etcd's URL keys, in the order etcd converts them, with the name its error uses.
const URL_KEYS: &[(&str, &str)] = &[
    ("listen-peer-urls", "listen-peer-urls"),
    ("listen-client-urls", "listen-client-urls"),
    ("listen-client-http-urls", "listen-client-http-urls"),
    ("initial-advertise-peer-urls", "initial-advertise-peer-urls"),
    // sic: etcd names the wrong flag in this message.
    ("advertise-client-urls", "advertise-peer-urls"),
    ("listen-metrics-urls", "listen-metrics-urls"),
];

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Sequence(_) => "array",
        Value::Mapping(_) => "object",
        Value::Tagged(t) => json_kind(&t.value),
    }
}

fn untag(v: &Value) -> &Value {
    match v {
        Value::Tagged(t) => untag(&t.value),
        other => other,
    }
}

fn type_error(what: String, strukt: &str, field: &str, ty: &str) -> ConfigError {
    err(format!(
        "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {what} into Go struct field {strukt}.{field} of type {ty}"
    ))
}

/// YAML 1.1 booleans (sigs.k8s.io/yaml reads YAML 1.1; serde_yaml leaves them strings).
fn yaml11_bool(s: &str) -> Option<bool> {
    match s {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            Some(true)
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            Some(false)
        }
        _ => None,
    }
}

/// A scalar as sigs.k8s.io/yaml hands it to a string field.
fn as_string(v: &Value) -> Option<String> {
    match untag(v) {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Converts one YAML value to the flag's text form, or json.Unmarshal's error.
/// `Ok(None)` is a null (the field keeps its default).
fn convert(
    v: &Value,
    ty: GoType,
    strukt: &str,
    field: &str,
) -> Result<Option<String>, ConfigError> {
    let v = untag(v);
    if matches!(v, Value::Null) {
        return Ok(None);
    }
    let mismatch = || type_error(json_kind(v).to_string(), strukt, field, ty.name());
    match ty {
        GoType::Str(_) => as_string(v).map(Some).ok_or_else(mismatch),
        GoType::Strings => {
            let Value::Sequence(items) = v else {
                return Err(mismatch());
            };
            let mut out = Vec::new();
            for item in items {
                match untag(item) {
                    Value::Null => out.push(String::new()),
                    other => match as_string(other) {
                        Some(s) => out.push(s),
                        None => {
                            return Err(type_error(
                                json_kind(other).to_string(),
                                strukt,
                                field,
                                "string",
                            ));
                        }
                    },
                }
            }
            Ok(Some(out.join(",")))
        }
        GoType::Bool => match v {
            Value::Bool(b) => Ok(Some(b.to_string())),
            Value::String(s) => yaml11_bool(s)
                .map(|b| Some(b.to_string()))
                .ok_or_else(mismatch),
            _ => Err(mismatch()),
        },
        GoType::Unsigned(_, _) | GoType::Signed(_, _) | GoType::Duration => {
            let Value::Number(n) = v else {
                return Err(mismatch());
            };
            let bad = || type_error(format!("number {n}"), strukt, field, ty.name());
            let int: i128 = if let Some(i) = n.as_i64() {
                i128::from(i)
            } else if let Some(u) = n.as_u64() {
                i128::from(u)
            } else {
                match n.as_f64() {
                    Some(f) if f.fract() == 0.0 && f.abs() < 1e38 => f as i128,
                    _ => return Err(bad()),
                }
            };
            let (lo, hi): (i128, i128) = match ty {
                GoType::Unsigned(_, bits) => (0, (1i128 << bits) - 1),
                GoType::Signed(_, bits) => (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1),
                _ => (i128::from(i64::MIN), i128::from(i64::MAX)),
            };
            if int < lo || int > hi {
                return Err(bad());
            }
            Ok(Some(if ty == GoType::Duration {
                // Nanoseconds; negative durations are kept as Go prints them.
                if int < 0 {
                    format!("-{}ns", -int)
                } else {
                    format!("{int}ns")
                }
            } else {
                int.to_string()
            }))
        }
    }
}

fn set(cfg: &mut Config, flag: &'static table::Flag, text: String) {
    cfg.values.insert(flag.name, (text, Source::File));
}

/// Reads `path` into `cfg` (a fresh configuration: with a config file etcd ignores the
/// other flags and the environment).
pub fn apply(path: &str, cfg: &mut Config, warnings: &mut Vec<String>) -> Result<(), ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        let why = match e.kind() {
            std::io::ErrorKind::NotFound => "no such file or directory".to_string(),
            std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
            _ => e.to_string(),
        };
        err(format!("open {path}: {why}"))
    })?;
    let doc: Value = serde_yaml::from_str(&text)
        .map_err(|e| err(format!("error converting YAML to JSON: yaml: {e}")))?;
    let map = match untag(&doc) {
        Value::Null => return Ok(()),
        Value::Mapping(m) => m,
        other => {
            return Err(err(format!(
                "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type embed.configYAML",
                json_kind(other)
            )));
        }
    };
    // sigs.k8s.io/yaml goes through a JSON object, whose keys Go sorts; json.Unmarshal
    // reports the first type error.
    let mut entries: Vec<(String, &Value)> = map
        .iter()
        .filter_map(|(k, v)| as_string(k).map(|k| (k, v)))
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut proxy_entries = Vec::new();
    for (key, v) in &entries {
        let key = key.as_str();
        match key {
            "client-transport-security" | "peer-transport-security" => {
                security(cfg, key, v)?;
                continue;
            }
            "socket-options" => {
                socket_options(cfg, v)?;
                continue;
            }
            _ => {}
        }
        if PROXY_KEYS.contains(&key) {
            proxy_entries.push((key, *v));
            continue;
        }
        let Some(flag) = top_level_flag(key) else {
            warnings.push(format!("config file {path:?}: unknown key {key:?} ignored"));
            continue;
        };
        if let Some(text) = convert(v, go_type(flag), "configYAML", key)? {
            set(cfg, flag, text);
        }
    }
    // etcd converts the URL strings after unmarshaling; a bad one ends the process.
    for (key, what) in URL_KEYS {
        let Some(text) = cfg.explicit_raw(key) else {
            continue;
        };
        if text.is_empty() {
            continue;
        }
        if let Err(e) = super::value::parse_urls(text) {
            return Err(err(format!("unexpected error setting up {what}: {e}")));
        }
    }
    if cfg.explicit(table::key::INITIAL_CLUSTER_STATE) == Some("") {
        cfg.values.remove("initial-cluster-state");
    }
    // etcdmain's second pass over the file, into configProxy.
    for (key, v) in proxy_entries {
        let Some(flag) = table::find(key) else {
            continue;
        };
        let Some(text) = convert(v, go_type(flag), "configProxy", key)? else {
            continue;
        };
        if text.is_empty() {
            continue;
        }
        if let Some(valid) = super::table::choices(key)
            && !valid.contains(&text.as_str())
        {
            let what = if key == "proxy" {
                "proxyFlag"
            } else {
                "discovery-fallback flag"
            };
            return Err(err(format!(
                "unexpected error setting up {what}: invalid value"
            )));
        }
        set(cfg, flag, text);
    }
    Ok(())
}

fn security(cfg: &mut Config, section: &str, v: &Value) -> Result<(), ConfigError> {
    let v = untag(v);
    let sec = match v {
        Value::Null => return Ok(()),
        Value::Mapping(m) => m,
        other => {
            return Err(type_error(
                json_kind(other).to_string(),
                "configYAML",
                section,
                "embed.securityConfig",
            ));
        }
    };
    let peer = section.starts_with("peer");
    let mut entries: Vec<(String, &Value)> = sec
        .iter()
        .filter_map(|(k, v)| as_string(k).map(|k| (k, v)))
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (key, sv) in entries {
        let Some((_, client_flag, peer_flag)) = SECURITY.iter().find(|(k, _, _)| *k == key) else {
            continue;
        };
        let field = format!("{section}.{key}");
        let ty = match key.as_str() {
            "allowed-cn" | "allowed-hostname" => GoType::Strings,
            "auto-tls" | "client-cert-auth" => GoType::Bool,
            _ => GoType::Str("string"),
        };
        let Some(text) = convert(sv, ty, "securityConfig", &field)? else {
            continue;
        };
        let name = if peer { Some(*peer_flag) } else { *client_flag };
        match name.and_then(table::find) {
            Some(flag) => set(cfg, flag, text),
            None if text.is_empty() => {}
            None => {
                return Err(err(format!(
                    "{field} is not supported yet by oxcd (the feature is not built); remove it"
                )));
            }
        }
    }
    Ok(())
}

fn socket_options(cfg: &mut Config, v: &Value) -> Result<(), ConfigError> {
    let v = untag(v);
    let opts = match v {
        Value::Null => return Ok(()),
        Value::Mapping(m) => m,
        other => {
            return Err(type_error(
                json_kind(other).to_string(),
                "configYAML",
                "socket-options",
                "transport.SocketOpts",
            ));
        }
    };
    for (k, sv) in opts {
        let Some(key) = as_string(k) else { continue };
        let flag = match key.as_str() {
            "reuse-address" => "socket-reuse-address",
            "reuse-port" => "socket-reuse-port",
            _ => continue,
        };
        let field = format!("socket-options.{key}");
        if let Some(text) = convert(sv, GoType::Bool, "SocketOpts", &field)?
            && let Some(flag) = table::find(flag)
        {
            set(cfg, flag, text);
        }
    }
    Ok(())
}
