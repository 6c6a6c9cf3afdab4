//! Every etcd 3.5 server flag (plus the 3.6 names operators already use), with etcd's
//! default and what oxcd does with it. Later work flips a flag to `Supported` here.

/// How a flag's value is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Free text.
    Str,
    /// `true`/`false`; `--flag` alone means true.
    Bool,
    /// Unsigned integer (Go `uint`, 64 bits).
    Uint,
    /// Unsigned 32-bit integer (etcd's `Uint32Value`, which reports strconv's own error).
    Uint32,
    /// Signed integer.
    Int,
    /// A Go duration (`5s`, `2h`).
    Duration,
    /// Comma-separated URLs, each validated as etcd does.
    Urls,
}

/// What oxcd does with a flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// The feature exists and the value is used.
    Supported,
    /// A tuning knob of etcd's internals with no equivalent here: a non-default value is
    /// accepted with a warning that it has no effect.
    NoEffect,
    /// The feature is not built yet: a non-default value stops the server.
    NotYet,
}

/// One flag.
#[derive(Debug, Clone, Copy)]
pub struct Flag {
    /// Name without dashes.
    pub name: &'static str,
    /// etcd's default, as text.
    pub default: &'static str,
    /// Value kind.
    pub kind: Kind,
    /// What oxcd does with it.
    pub support: Support,
}

use Kind::*;
use Support::*;

const fn f(name: &'static str, default: &'static str, kind: Kind, support: Support) -> Flag {
    Flag {
        name,
        default,
        kind,
        support,
    }
}

/// The flag table.
pub const FLAGS: &[Flag] = &[
    // Member
    f("name", "default", Str, Supported),
    f("data-dir", "", Str, Supported),
    f("wal-dir", "", Str, Supported),
    f("snapshot-count", "100000", Uint, Supported),
    f("heartbeat-interval", "100", Uint, Supported),
    f("election-timeout", "1000", Uint, Supported),
    f("initial-election-tick-advance", "true", Bool, NoEffect),
    f("listen-peer-urls", "http://localhost:2380", Urls, Supported),
    f(
        "listen-client-urls",
        "http://localhost:2379",
        Urls,
        Supported,
    ),
    f("listen-client-http-urls", "", Urls, NotYet),
    f("max-snapshots", "5", Uint, Supported),
    f("max-wals", "5", Uint, Supported),
    f("quota-backend-bytes", "0", Int, Supported),
    f("backend-bbolt-freelist-type", "map", Str, NoEffect),
    f("backend-batch-interval", "0s", Duration, NoEffect),
    f("backend-batch-limit", "0", Int, NoEffect),
    f("max-txn-ops", "128", Uint, Supported),
    f("max-request-bytes", "1572864", Uint, Supported),
    f("max-concurrent-streams", "4294967295", Uint32, NoEffect),
    f("grpc-keepalive-min-time", "5s", Duration, NoEffect),
    f("grpc-keepalive-interval", "2h0m0s", Duration, NoEffect),
    f("grpc-keepalive-timeout", "20s", Duration, NoEffect),
    f("socket-reuse-port", "false", Bool, NotYet),
    f("socket-reuse-address", "false", Bool, NotYet),
    f("unsafe-no-fsync", "false", Bool, NotYet),
    f("raft-read-timeout", "5s", Duration, NoEffect),
    f("raft-write-timeout", "5s", Duration, NoEffect),
    // Clustering
    f(
        "initial-advertise-peer-urls",
        "http://localhost:2380",
        Urls,
        Supported,
    ),
    f("initial-cluster", "", Str, Supported),
    f("initial-cluster-state", "new", Str, Supported),
    f("initial-cluster-token", "etcd-cluster", Str, Supported),
    f(
        "advertise-client-urls",
        "http://localhost:2379",
        Urls,
        Supported,
    ),
    f("discovery", "", Str, NotYet),
    f("discovery-fallback", "proxy", Str, NotYet),
    f("discovery-proxy", "", Str, NotYet),
    f("discovery-srv", "", Str, NotYet),
    f("discovery-srv-name", "", Str, NotYet),
    f("discovery-token", "", Str, NotYet),
    f("discovery-endpoints", "", Str, NotYet),
    f("strict-reconfig-check", "true", Bool, Supported),
    f("pre-vote", "true", Bool, Supported),
    f("auto-compaction-retention", "0", Str, NotYet),
    f("auto-compaction-mode", "periodic", Str, NotYet),
    f("enable-v2", "false", Bool, NotYet),
    f("v2-deprecation", "not-yet", Str, NoEffect),
    f("max-learners", "1", Uint, NotYet),
    // Security
    f("cert-file", "", Str, NotYet),
    f("key-file", "", Str, NotYet),
    f("client-cert-file", "", Str, NotYet),
    f("client-key-file", "", Str, NotYet),
    f("client-cert-auth", "false", Bool, NotYet),
    f("client-crl-file", "", Str, NotYet),
    f("client-cert-allowed-hostname", "", Str, NotYet),
    f("trusted-ca-file", "", Str, NotYet),
    f("auto-tls", "false", Bool, NotYet),
    f("self-signed-cert-validity", "1", Uint, NotYet),
    f("peer-cert-file", "", Str, NotYet),
    f("peer-key-file", "", Str, NotYet),
    f("peer-client-cert-file", "", Str, NotYet),
    f("peer-client-key-file", "", Str, NotYet),
    f("peer-client-cert-auth", "false", Bool, NotYet),
    f("peer-trusted-ca-file", "", Str, NotYet),
    f("peer-cert-allowed-cn", "", Str, NotYet),
    f("peer-cert-allowed-hostname", "", Str, NotYet),
    f("peer-auto-tls", "false", Bool, NotYet),
    f("peer-crl-file", "", Str, NotYet),
    f("cipher-suites", "", Str, NotYet),
    f("tls-min-version", "TLS1.2", Str, NotYet),
    f("tls-max-version", "", Str, NotYet),
    f("cors", "*", Str, NoEffect),
    f("host-whitelist", "*", Str, NoEffect),
    // Auth
    f("auth-token", "simple", Str, NotYet),
    f("bcrypt-cost", "10", Uint, NotYet),
    f("auth-token-ttl", "300", Uint, NotYet),
    // Profiling, monitoring, logging
    f("enable-pprof", "false", Bool, NotYet),
    // oxcd has no HTTP/JSON gateway: `false` is what it does anyway.
    f("enable-grpc-gateway", "true", Bool, NoEffect),
    f("metrics", "basic", Str, Supported),
    f("listen-metrics-urls", "", Urls, NotYet),
    f("logger", "zap", Str, Supported),
    f("log-outputs", "default", Str, Supported),
    f("log-level", "info", Str, Supported),
    f("log-format", "json", Str, Supported),
    f("enable-log-rotation", "false", Bool, NotYet),
    f(
        "log-rotation-config-json",
        "{\"maxsize\": 100, \"maxage\": 0, \"maxbackups\": 0, \"localtime\": false, \"compress\": false}",
        Str,
        NotYet,
    ),
    f("debug", "false", Bool, Supported),
    f("log-package-levels", "", Str, NoEffect),
    // v2 proxy (deprecated in etcd)
    f("proxy", "off", Str, NotYet),
    f("proxy-failure-wait", "5000", Uint, NotYet),
    f("proxy-refresh-interval", "30000", Uint, NotYet),
    f("proxy-dial-timeout", "1000", Uint, NotYet),
    f("proxy-write-timeout", "5000", Uint, NotYet),
    f("proxy-read-timeout", "0", Uint, NotYet),
    // Experimental (3.5 names) and their 3.6 successors
    f(
        "experimental-initial-corrupt-check",
        "false",
        Bool,
        Supported,
    ),
    f("experimental-corrupt-check-time", "0s", Duration, Supported),
    f(
        "experimental-compact-hash-check-enabled",
        "false",
        Bool,
        NotYet,
    ),
    f(
        "experimental-compact-hash-check-time",
        "1m0s",
        Duration,
        NotYet,
    ),
    f("experimental-enable-v2v3", "", Str, NotYet),
    f(
        "experimental-enable-lease-checkpoint",
        "false",
        Bool,
        NotYet,
    ),
    f(
        "experimental-enable-lease-checkpoint-persist",
        "false",
        Bool,
        NotYet,
    ),
    f("experimental-compaction-batch-limit", "1000", Int, NoEffect),
    f(
        "experimental-compaction-sleep-interval",
        "10ms",
        Duration,
        NoEffect,
    ),
    f(
        "experimental-peer-skip-client-san-verification",
        "false",
        Bool,
        NotYet,
    ),
    f(
        "experimental-watch-progress-notify-interval",
        "10m0s",
        Duration,
        NotYet,
    ),
    f(
        "experimental-warning-apply-duration",
        "100ms",
        Duration,
        NoEffect,
    ),
    f(
        "experimental-warning-unary-request-duration",
        "300ms",
        Duration,
        NoEffect,
    ),
    f(
        "experimental-bootstrap-defrag-threshold-megabytes",
        "0",
        Uint,
        NotYet,
    ),
    f(
        "experimental-txn-mode-write-with-shared-buffer",
        "true",
        Bool,
        NoEffect,
    ),
    f(
        "experimental-enable-distributed-tracing",
        "false",
        Bool,
        NotYet,
    ),
    f(
        "experimental-distributed-tracing-address",
        "localhost:4317",
        Str,
        NotYet,
    ),
    f(
        "experimental-distributed-tracing-service-name",
        "etcd",
        Str,
        NotYet,
    ),
    f(
        "experimental-distributed-tracing-instance-id",
        "",
        Str,
        NotYet,
    ),
    f(
        "experimental-distributed-tracing-sampling-rate",
        "0",
        Int,
        NotYet,
    ),
    f("experimental-max-learners", "1", Uint, NotYet),
    f(
        "experimental-snapshot-catchup-entries",
        "5000",
        Uint,
        Supported,
    ),
    f("experimental-memory-mlock", "false", Bool, NoEffect),
    f("experimental-downgrade-check-time", "5s", Duration, NotYet),
    f(
        "experimental-stop-grpc-service-on-defrag",
        "false",
        Bool,
        NotYet,
    ),
    f(
        "experimental-wait-cluster-ready-timeout",
        "5s",
        Duration,
        NotYet,
    ),
    f("feature-gates", "", Str, NotYet),
    f("watch-progress-notify-interval", "10m0s", Duration, NotYet),
    f("corrupt-check-time", "0s", Duration, Supported),
    f("compact-hash-check-time", "1m0s", Duration, NotYet),
    f("snapshot-catchup-entries", "5000", Uint, Supported),
    f("force-new-cluster", "false", Bool, NotYet),
    // Meta
    f("config-file", "", Str, Supported),
    f("version", "false", Bool, Supported),
];

/// Flags of etcd v2 that etcd 3.5 still accepts (without an argument) and ignores with a
/// warning (`ignored` in etcdmain/config.go).
pub const IGNORED: &[&str] = &[
    "cluster-active-size",
    "cluster-remove-delay",
    "cluster-sync-interval",
    "config",
    "force",
    "max-result-buffer",
    "max-retry-attempts",
    "peer-heartbeat-interval",
    "peer-election-timeout",
    "retry-interval",
    "snapshot",
    "v",
    "vv",
];

/// Looks a flag up by name.
pub fn find(name: &str) -> Option<&'static Flag> {
    FLAGS.iter().find(|f| f.name == name)
}

/// The `ETCD_*` variable for a flag.
pub fn env_name(flag: &str) -> String {
    format!("ETCD_{}", flag.to_uppercase().replace('-', "_"))
}
