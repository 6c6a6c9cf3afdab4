//! etcd 3.6's renames of its `--experimental-*` flags (etcd v3.6.14
//! `server/embed/config.go` `experimentalFlagMigrationMap` and `Validate`,
//! `server/etcdmain/config.go` `deprecatedFlags` and `parse`): both names are accepted;
//! the old one is logged with 3.6's deprecation warning and its value is used; both
//! given is 3.6's error. The flags 3.6 folded into `--feature-gates` warn too.

/// An old flag and the name 3.6 gave it.
pub const RENAMED: &[(&str, &str)] = &[
    (
        "experimental-compact-hash-check-time",
        "compact-hash-check-time",
    ),
    ("experimental-corrupt-check-time", "corrupt-check-time"),
    (
        "experimental-compaction-batch-limit",
        "compaction-batch-limit",
    ),
    (
        "experimental-watch-progress-notify-interval",
        "watch-progress-notify-interval",
    ),
    (
        "experimental-warning-apply-duration",
        "warning-apply-duration",
    ),
    (
        "experimental-bootstrap-defrag-threshold-megabytes",
        "bootstrap-defrag-threshold-megabytes",
    ),
    ("experimental-memory-mlock", "memory-mlock"),
    (
        "experimental-snapshot-catchup-entries",
        "snapshot-catchup-entries",
    ),
    (
        "experimental-compaction-sleep-interval",
        "compaction-sleep-interval",
    ),
    ("experimental-downgrade-check-time", "downgrade-check-time"),
    (
        "experimental-peer-skip-client-san-verification",
        "peer-skip-client-san-verification",
    ),
    (
        "experimental-enable-distributed-tracing",
        "enable-distributed-tracing",
    ),
    (
        "experimental-distributed-tracing-address",
        "distributed-tracing-address",
    ),
    (
        "experimental-distributed-tracing-service-name",
        "distributed-tracing-service-name",
    ),
    (
        "experimental-distributed-tracing-instance-id",
        "distributed-tracing-instance-id",
    ),
    (
        "experimental-distributed-tracing-sampling-rate",
        "distributed-tracing-sampling-rate",
    ),
];

/// The warning etcd 3.6.14 logs for each deprecated flag given, in its words (the texts
/// differ from flag to flag: "3.6" or "v3.6", quoted or not).
pub const DEPRECATED: &[(&str, &str)] = &[
    (
        "max-snapshots",
        "--max-snapshots is deprecated in 3.6 and will be decommissioned in 3.8.",
    ),
    (
        "v2-deprecation",
        "--v2-deprecation is deprecated and scheduled for removal in v3.8. The default value is enforced, ignoring user input.",
    ),
    (
        "experimental-compact-hash-check-enabled",
        "--experimental-compact-hash-check-enabled is deprecated in 3.6 and will be decommissioned in 3.7. Use '--feature-gates=CompactHashCheck=true' instead.",
    ),
    (
        "experimental-compact-hash-check-time",
        "--experimental-compact-hash-check-time is deprecated in 3.6 and will be decommissioned in 3.7. Use '--compact-hash-check-time' instead.",
    ),
    (
        "experimental-txn-mode-write-with-shared-buffer",
        "--experimental-txn-mode-write-with-shared-buffer is deprecated in v3.6 and will be decommissioned in v3.7. Use '--feature-gates=TxnModeWriteWithSharedBuffer=true' instead.",
    ),
    (
        "experimental-corrupt-check-time",
        "--experimental-corrupt-check-time is deprecated in v3.6 and will be decommissioned in v3.7. Use '--corrupt-check-time' instead.",
    ),
    (
        "experimental-compaction-batch-limit",
        "--experimental-compaction-batch-limit is deprecated in v3.6 and will be decommissioned in v3.7. Use '--compaction-batch-limit' instead.",
    ),
    (
        "experimental-watch-progress-notify-interval",
        "--experimental-watch-progress-notify-interval is deprecated in v3.6 and will be decommissioned in v3.7. Use '--watch-progress-notify-interval' instead.",
    ),
    (
        "experimental-warning-apply-duration",
        "--experimental-warning-apply-duration is deprecated in v3.6 and will be decommissioned in v3.7. Use '--warning-apply-duration' instead.",
    ),
    (
        "experimental-bootstrap-defrag-threshold-megabytes",
        "--experimental-bootstrap-defrag-threshold-megabytes is deprecated in v3.6 and will be decommissioned in v3.7. Use '--bootstrap-defrag-threshold-megabytes' instead.",
    ),
    (
        "experimental-memory-mlock",
        "--experimental-memory-mlock is deprecated in v3.6 and will be decommissioned in v3.7. Use '--memory-mlock' instead.",
    ),
    (
        "experimental-snapshot-catchup-entries",
        "--experimental-snapshot-catchup-entries is deprecated in v3.6 and will be decommissioned in v3.7. Use '--snapshot-catchup-entries' instead.",
    ),
    (
        "experimental-compaction-sleep-interval",
        "--experimental-compaction-sleep-interval is deprecated in v3.6 and will be decommissioned in v3.7. Use 'compaction-sleep-interval' instead.",
    ),
    (
        "experimental-downgrade-check-time",
        "--experimental-downgrade-check-time is deprecated in v3.6 and will be decommissioned in v3.7. Use '--downgrade-check-time' instead.",
    ),
    (
        "experimental-enable-distributed-tracing",
        "--experimental-enable-distributed-tracing is deprecated in 3.6 and will be decommissioned in 3.7. Use --enable-distributed-tracing instead.",
    ),
    (
        "experimental-distributed-tracing-address",
        "--experimental-distributed-tracing-address is deprecated in 3.6 and will be decommissioned in 3.7. Use --distributed-tracing-address instead.",
    ),
    (
        "experimental-distributed-tracing-service-name",
        "--experimental-distributed-tracing-service-name is deprecated in 3.6 and will be decommissioned in 3.7. Use --distributed-tracing-service-name instead.",
    ),
    (
        "experimental-distributed-tracing-instance-id",
        "--experimental-distributed-tracing-instance-id is deprecated in 3.6 and will be decommissioned in 3.7. Use --distributed-tracing-instance-id instead.",
    ),
    (
        "experimental-distributed-tracing-sampling-rate",
        "--experimental-distributed-tracing-sampling-rate is deprecated in 3.6 and will be decommissioned in 3.7. Use --distributed-tracing-sampling-rate instead.",
    ),
];

/// The warning for `--experimental-warning-unary-request-duration` (logged when it is
/// the one that sets the value).
pub const UNARY_DURATION_WARNING: &str = "--experimental-warning-unary-request-duration is deprecated, and will be decommissioned in v3.7. Use --warning-unary-request-duration instead.";

/// The error when both unary-duration flags are non-zero.
pub const UNARY_DURATION_BOTH: &str = "both --experimental-warning-unary-request-duration and --warning-unary-request-duration flags are set. Use only --warning-unary-request-duration";

/// etcd 3.6's error when an old flag and its new name are both given.
pub fn both_given(old: &str, new: &str) -> String {
    format!("cannot set --{old} and --{new} at the same time, please use --{new} only")
}

/// etcd 3.6's error when an experimental flag and the gate it became are both given.
pub fn gate_both_given(flag: &str, flag_value: bool, gate: &str, gate_value: bool) -> String {
    format!(
        "cannot specify both flags: --{flag}={flag_value} and --feature-gates={gate}={gate_value} at the same time, please just use --feature-gates={gate}={gate_value}"
    )
}
