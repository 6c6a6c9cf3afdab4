//! `--feature-gates` as etcd 3.6 reads it (`pkg/featuregate`, `server/features`): the
//! gates etcd 3.6 and 3.7 know, their defaults and stages, the parser with etcd's error
//! texts, and the mapping of 3.6's experimental flags onto their gates.
//!
//! oxcd knows 3.7's two gates too (`FastLeaseKeepAlive`, `PriorityRequest`), which an
//! etcd 3.6 refuses as unrecognized: an operator coming from 3.7 keeps their flags.
//!
//! Invariant: a value etcd refuses is refused with etcd's text; the enabled set is the
//! defaults, then `AllAlpha`/`AllBeta` for the gates of their stage not named, then the
//! gates named.

use std::collections::BTreeMap;

use oxcd_go::strconv::parse_bool;

/// A gate's maturity, as etcd labels it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Off by default, may change.
    Alpha,
    /// On or off by default, tested.
    Beta,
}

impl Stage {
    /// etcd's label (`ALPHA`, `BETA`).
    pub fn label(self) -> &'static str {
        match self {
            Stage::Alpha => "ALPHA",
            Stage::Beta => "BETA",
        }
    }
}

/// One gate.
#[derive(Debug, Clone, Copy)]
pub struct Gate {
    /// Its name.
    pub name: &'static str,
    /// Whether it is on unless set.
    pub default: bool,
    /// Its stage.
    pub stage: Stage,
}

/// The generic gate that turns on every alpha gate not named.
pub const ALL_ALPHA: &str = "AllAlpha";
/// The generic gate that turns on every beta gate not named.
pub const ALL_BETA: &str = "AllBeta";

/// Every gate etcd 3.6 and 3.7 know, the two generic ones first.
pub const GATES: &[Gate] = &[
    gate(ALL_ALPHA, false, Stage::Alpha),
    gate(ALL_BETA, false, Stage::Beta),
    gate("CompactHashCheck", false, Stage::Alpha),
    gate("FastLeaseKeepAlive", true, Stage::Beta),
    gate("InitialCorruptCheck", false, Stage::Alpha),
    gate("LeaseCheckpoint", false, Stage::Alpha),
    gate("LeaseCheckpointPersist", false, Stage::Alpha),
    gate("PriorityRequest", false, Stage::Alpha),
    gate("SetMemberLocalAddr", false, Stage::Alpha),
    gate("StopGRPCServiceOnDefrag", false, Stage::Alpha),
    gate("TxnModeWriteWithSharedBuffer", true, Stage::Beta),
];

const fn gate(name: &'static str, default: bool, stage: Stage) -> Gate {
    Gate {
        name,
        default,
        stage,
    }
}

/// etcd 3.6's experimental flags that set a gate (`server/embed/config.go`
/// `SetFeatureGatesFromExperimentalFlags`): flag name, gate.
pub const EXPERIMENTAL_FLAGS: &[(&str, &str)] = &[
    (
        "experimental-compact-hash-check-enabled",
        "CompactHashCheck",
    ),
    ("experimental-enable-lease-checkpoint", "LeaseCheckpoint"),
    (
        "experimental-enable-lease-checkpoint-persist",
        "LeaseCheckpointPersist",
    ),
    ("experimental-initial-corrupt-check", "InitialCorruptCheck"),
    (
        "experimental-stop-grpc-service-on-defrag",
        "StopGRPCServiceOnDefrag",
    ),
    (
        "experimental-txn-mode-write-with-shared-buffer",
        "TxnModeWriteWithSharedBuffer",
    ),
];

/// Why a `--feature-gates` value is refused (etcd's texts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    /// `Name` without `=value`.
    #[error("missing bool value for {0}")]
    MissingValue(String),
    /// A value that is not a Go bool.
    #[error("invalid value of {name}={value}, err: {reason}")]
    InvalidValue {
        /// The gate.
        name: String,
        /// The value given.
        value: String,
        /// strconv's error.
        reason: String,
    },
    /// A gate nobody knows.
    #[error("unrecognized feature gate: {0}")]
    Unrecognized(String),
}

/// The gates a member runs with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureGates {
    /// The gates named by `--feature-gates` (or an experimental flag), with their values.
    named: BTreeMap<&'static str, bool>,
}

/// The value of `--feature-gates`, as `featureGate.Set` reads it: the gates named.
pub fn parse(value: &str) -> Result<Vec<(&'static str, bool)>, GateError> {
    let mut named = Vec::new();
    for item in value.split(',') {
        if item.is_empty() {
            continue;
        }
        let mut parts = item.splitn(2, '=');
        let name = parts.next().unwrap_or_default().trim();
        let Some(v) = parts.next() else {
            return Err(GateError::MissingValue(name.to_string()));
        };
        let v = v.trim();
        let on = parse_bool(v).map_err(|e| GateError::InvalidValue {
            name: name.to_string(),
            value: v.to_string(),
            reason: e.to_string(),
        })?;
        let Some(gate) = GATES.iter().find(|g| g.name == name) else {
            return Err(GateError::Unrecognized(name.to_string()));
        };
        named.push((gate.name, on));
    }
    Ok(named)
}

impl FeatureGates {
    /// The gates `named` sets (later names win).
    pub fn from_named(named: &[(&'static str, bool)]) -> FeatureGates {
        FeatureGates {
            named: named.iter().copied().collect(),
        }
    }

    /// Whether `name` was set explicitly.
    pub fn is_named(&self, name: &str) -> bool {
        self.named.contains_key(name)
    }

    /// Sets `name` (an experimental flag's gate).
    pub fn set(&mut self, name: &'static str, on: bool) {
        self.named.insert(name, on);
    }

    /// Whether gate `name` is on.
    pub fn enabled(&self, name: &str) -> bool {
        let Some(gate) = GATES.iter().find(|g| g.name == name) else {
            return false;
        };
        if let Some(on) = self.named.get(gate.name) {
            return *on;
        }
        let all = match gate.stage {
            _ if gate.name == ALL_ALPHA || gate.name == ALL_BETA => None,
            Stage::Alpha => self.named.get(ALL_ALPHA),
            Stage::Beta => self.named.get(ALL_BETA),
        };
        all.copied().unwrap_or(gate.default)
    }

    /// Every gate, with whether it is on (the `etcd_server_feature_enabled` metric).
    pub fn all(&self) -> Vec<(Gate, bool)> {
        GATES.iter().map(|g| (*g, self.enabled(g.name))).collect()
    }

    /// etcd's log of the gates set: `feature gates: map[A:true B:false]`.
    pub fn describe(&self) -> String {
        let items: Vec<String> = self.named.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        format!("feature gates: map[{}]", items.join(" "))
    }
}

/// The help text of `--feature-gates`: each known gate, sorted.
pub fn help() -> String {
    let mut lines: Vec<String> = GATES
        .iter()
        .map(|g| {
            format!(
                "{}=true|false ({} - default={})",
                g.name,
                g.stage.label(),
                g.default
            )
        })
        .collect();
    lines.sort();
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    // etcd v3.6.14 pkg/featuregate/feature_gate_test.go TestFeatureGateFlag, the texts.
    #[test]
    fn values_are_read_as_etcd_reads_them() {
        assert_eq!(
            parse("InitialCorruptCheck=true,,StopGRPCServiceOnDefrag = 1"),
            Ok(vec![
                ("InitialCorruptCheck", true),
                ("StopGRPCServiceOnDefrag", true)
            ])
        );
        assert_eq!(parse(""), Ok(vec![]));
        assert_eq!(
            parse("InitialCorruptCheck").map_err(|e| e.to_string()),
            Err("missing bool value for InitialCorruptCheck".into())
        );
        assert_eq!(
            parse("InitialCorruptCheck=x").map_err(|e| e.to_string()),
            Err(
                "invalid value of InitialCorruptCheck=x, err: strconv.ParseBool: parsing \"x\": invalid syntax"
                    .into()
            )
        );
        assert_eq!(
            parse("Foo=true").map_err(|e| e.to_string()),
            Err("unrecognized feature gate: Foo".into())
        );
    }

    #[test]
    fn all_alpha_turns_on_the_alpha_gates_not_named() {
        let g = FeatureGates::from_named(&[(ALL_ALPHA, true), ("LeaseCheckpoint", false)]);
        assert!(g.enabled("InitialCorruptCheck"));
        assert!(!g.enabled("LeaseCheckpoint"));
        assert!(g.enabled("TxnModeWriteWithSharedBuffer"), "beta default");
        let d = FeatureGates::default();
        assert!(!d.enabled("StopGRPCServiceOnDefrag"));
        assert!(d.enabled("FastLeaseKeepAlive"));
        assert_eq!(d.all().iter().filter(|(_, on)| *on).count(), 2);
    }
}
