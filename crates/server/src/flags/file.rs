//! `--config-file`: etcd's YAML configuration, keyed by flag names. Lists become
//! comma-separated values; the `client-transport-security` and `peer-transport-security`
//! sections map to the TLS flags (`peer-` prefixed for the latter).

use serde_yaml::Value;

use super::{Config, ConfigError, err};

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Null => Some(String::new()),
        Value::Sequence(items) => Some(
            items
                .iter()
                .filter_map(scalar)
                .collect::<Vec<_>>()
                .join(","),
        ),
        _ => None,
    }
}

/// Reads `path` and applies it over flags and environment.
pub fn apply(path: &str, cfg: &mut Config, warnings: &mut Vec<String>) -> Result<(), ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| err(format!("cannot read config file {path:?}: {e}")))?;
    let doc: Value =
        serde_yaml::from_str(&text).map_err(|e| err(format!("config file {path:?}: {e}")))?;
    let Value::Mapping(map) = doc else {
        if doc.is_null() {
            return Ok(());
        }
        return Err(err(format!(
            "config file {path:?}: expected a mapping of flag names to values"
        )));
    };
    for (k, v) in &map {
        let Some(key) = k.as_str() else { continue };
        if let ("client-transport-security" | "peer-transport-security", Value::Mapping(sec)) =
            (key, v)
        {
            let prefix = if key.starts_with("peer") { "peer-" } else { "" };
            for (sk, sv) in sec {
                let Some(sk) = sk.as_str() else { continue };
                let name = format!("{prefix}{}", sk.trim_start_matches("peer-"));
                set(cfg, &name, sv, path, warnings)?;
            }
            continue;
        }
        set(cfg, key, v, path, warnings)?;
    }
    Ok(())
}

fn set(
    cfg: &mut Config,
    key: &str,
    v: &Value,
    path: &str,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    let Some(text) = scalar(v) else {
        warnings.push(format!(
            "config file {path:?}: key {key:?} has an unsupported value shape; ignored"
        ));
        return Ok(());
    };
    if !cfg.set_from_file(key, text)? {
        warnings.push(format!("config file {path:?}: unknown key {key:?} ignored"));
    }
    Ok(())
}
