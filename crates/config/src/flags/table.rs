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

use super::value::{
    flag_text, go_duration_ok, parse_bool, parse_go_int, parse_go_uint, parse_urls,
};

const fn f(name: &'static str, default: &'static str, kind: Kind, support: Support) -> Flag {
    Flag {
        name,
        default,
        kind,
        support,
    }
}

/// Declares the flag table ([`FLAGS`]) and, for each flag, a typed key in [`key`]
/// named after it (`--max-txn-ops` is `key::MAX_TXN_OPS`), so that code reading the
/// configuration names flags the compiler checks, with the value type of their kind.
macro_rules! flags {
    ($( $id:ident = ($name:literal, $default:expr, $kind:ident, $support:ident), )*) => {
        /// The flag table: the one source of etcd's defaults.
        pub const FLAGS: &[Flag] = &[ $( f($name, $default, $kind, $support), )* ];

        /// A typed key for every flag of [`FLAGS`].
        pub mod key {
            #![allow(missing_docs)]
            use super::super::typed::*;
            $( pub const $id: Key<marker!($kind)> = Key::new($name); )*
        }
    };
}

/// The value type a flag kind reads as.
macro_rules! marker {
    (Str) => {
        Text
    };
    (Bool) => {
        Boolean
    };
    (Uint) => {
        Unsigned
    };
    (Uint32) => {
        Unsigned
    };
    (Int) => {
        Signed
    };
    (Duration) => {
        GoDuration
    };
    (Urls) => {
        UrlList
    };
}

flags! {
    // Member
    NAME = ("name", "default", Str, Supported),
    DATA_DIR = ("data-dir", "", Str, Supported),
    WAL_DIR = ("wal-dir", "", Str, Supported),
    // etcd 3.6's default (3.5: 100000).
    SNAPSHOT_COUNT = ("snapshot-count", "10000", Uint, Supported),
    HEARTBEAT_INTERVAL = ("heartbeat-interval", "100", Uint, Supported),
    ELECTION_TIMEOUT = ("election-timeout", "1000", Uint, Supported),
    INITIAL_ELECTION_TICK_ADVANCE = ("initial-election-tick-advance", "true", Bool, NoEffect),
    LISTEN_PEER_URLS = ("listen-peer-urls", "http://localhost:2380", Urls, Supported),
    LISTEN_CLIENT_URLS = ("listen-client-urls", "http://localhost:2379", Urls, Supported),
    LISTEN_CLIENT_HTTP_URLS = ("listen-client-http-urls", "", Urls, Supported),
    MAX_SNAPSHOTS = ("max-snapshots", "5", Uint, Supported),
    MAX_WALS = ("max-wals", "5", Uint, Supported),
    QUOTA_BACKEND_BYTES = ("quota-backend-bytes", "0", Int, Supported),
    BACKEND_BBOLT_FREELIST_TYPE = ("backend-bbolt-freelist-type", "map", Str, NoEffect),
    BACKEND_BATCH_INTERVAL = ("backend-batch-interval", "0s", Duration, NoEffect),
    BACKEND_BATCH_LIMIT = ("backend-batch-limit", "0", Int, NoEffect),
    MAX_TXN_OPS = ("max-txn-ops", "128", Uint, Supported),
    MAX_REQUEST_BYTES = ("max-request-bytes", "1572864", Uint, Supported),
    MAX_CONCURRENT_STREAMS = ("max-concurrent-streams", "4294967295", Uint32, Supported),
    GRPC_KEEPALIVE_MIN_TIME = ("grpc-keepalive-min-time", "5s", Duration, NoEffect),
    GRPC_KEEPALIVE_INTERVAL = ("grpc-keepalive-interval", "2h0m0s", Duration, NoEffect),
    GRPC_KEEPALIVE_TIMEOUT = ("grpc-keepalive-timeout", "20s", Duration, NoEffect),
    SOCKET_REUSE_PORT = ("socket-reuse-port", "false", Bool, NotYet),
    SOCKET_REUSE_ADDRESS = ("socket-reuse-address", "false", Bool, NotYet),
    UNSAFE_NO_FSYNC = ("unsafe-no-fsync", "false", Bool, Supported),
    RAFT_READ_TIMEOUT = ("raft-read-timeout", "5s", Duration, NoEffect),
    RAFT_WRITE_TIMEOUT = ("raft-write-timeout", "5s", Duration, NoEffect),
    // Clustering
    INITIAL_ADVERTISE_PEER_URLS = ("initial-advertise-peer-urls", "http://localhost:2380", Urls, Supported),
    INITIAL_CLUSTER = ("initial-cluster", "", Str, Supported),
    INITIAL_CLUSTER_STATE = ("initial-cluster-state", "new", Str, Supported),
    INITIAL_CLUSTER_TOKEN = ("initial-cluster-token", "etcd-cluster", Str, Supported),
    ADVERTISE_CLIENT_URLS = ("advertise-client-urls", "http://localhost:2379", Urls, Supported),
    DISCOVERY = ("discovery", "", Str, NotYet),
    DISCOVERY_FALLBACK = ("discovery-fallback", "proxy", Str, NotYet),
    DISCOVERY_PROXY = ("discovery-proxy", "", Str, NotYet),
    DISCOVERY_SRV = ("discovery-srv", "", Str, Supported),
    DISCOVERY_SRV_NAME = ("discovery-srv-name", "", Str, Supported),
    DISCOVERY_TOKEN = ("discovery-token", "", Str, Supported),
    DISCOVERY_ENDPOINTS = ("discovery-endpoints", "", Str, Supported),
    STRICT_RECONFIG_CHECK = ("strict-reconfig-check", "true", Bool, Supported),
    PRE_VOTE = ("pre-vote", "true", Bool, Supported),
    AUTO_COMPACTION_RETENTION = ("auto-compaction-retention", "0", Str, Supported),
    AUTO_COMPACTION_MODE = ("auto-compaction-mode", "periodic", Str, Supported),
    ENABLE_V2 = ("enable-v2", "false", Bool, NotYet),
    V2_DEPRECATION = ("v2-deprecation", "not-yet", Str, NoEffect),
    MAX_LEARNERS = ("max-learners", "1", Uint, Supported),
    // Security
    CERT_FILE = ("cert-file", "", Str, Supported),
    KEY_FILE = ("key-file", "", Str, Supported),
    CLIENT_CERT_FILE = ("client-cert-file", "", Str, NotYet),
    CLIENT_KEY_FILE = ("client-key-file", "", Str, NotYet),
    CLIENT_CERT_AUTH = ("client-cert-auth", "false", Bool, Supported),
    CLIENT_CRL_FILE = ("client-crl-file", "", Str, Supported),
    CLIENT_CERT_ALLOWED_HOSTNAME = ("client-cert-allowed-hostname", "", Str, Supported),
    TRUSTED_CA_FILE = ("trusted-ca-file", "", Str, Supported),
    AUTO_TLS = ("auto-tls", "false", Bool, Supported),
    SELF_SIGNED_CERT_VALIDITY = ("self-signed-cert-validity", "1", Uint, Supported),
    PEER_CERT_FILE = ("peer-cert-file", "", Str, Supported),
    PEER_KEY_FILE = ("peer-key-file", "", Str, Supported),
    PEER_CLIENT_CERT_FILE = ("peer-client-cert-file", "", Str, Supported),
    PEER_CLIENT_KEY_FILE = ("peer-client-key-file", "", Str, Supported),
    PEER_CLIENT_CERT_AUTH = ("peer-client-cert-auth", "false", Bool, Supported),
    PEER_TRUSTED_CA_FILE = ("peer-trusted-ca-file", "", Str, Supported),
    PEER_CERT_ALLOWED_CN = ("peer-cert-allowed-cn", "", Str, Supported),
    PEER_CERT_ALLOWED_HOSTNAME = ("peer-cert-allowed-hostname", "", Str, Supported),
    PEER_AUTO_TLS = ("peer-auto-tls", "false", Bool, Supported),
    PEER_CRL_FILE = ("peer-crl-file", "", Str, Supported),
    CIPHER_SUITES = ("cipher-suites", "", Str, Supported),
    TLS_MIN_VERSION = ("tls-min-version", "TLS1.2", Str, Supported),
    TLS_MAX_VERSION = ("tls-max-version", "", Str, Supported),
    CORS = ("cors", "*", Str, NoEffect),
    HOST_WHITELIST = ("host-whitelist", "*", Str, NoEffect),
    // Auth
    AUTH_TOKEN = ("auth-token", "simple", Str, Supported),
    BCRYPT_COST = ("bcrypt-cost", "10", Uint, Supported),
    AUTH_TOKEN_TTL = ("auth-token-ttl", "300", Uint, Supported),
    // oxcd's own: how long a password checked good with bcrypt is taken without it
    // (auth/password_cache.rs); `0s` checks bcrypt every time, as etcd.
    AUTH_PASSWORD_CACHE_TTL = ("auth-password-cache-ttl", "5m0s", Duration, Supported),
    // oxcd's own: the leader promotes a learner once it has caught up
    // (membership/auto_promote.rs).
    AUTO_PROMOTE_LEARNERS = ("auto-promote-learners", "false", Bool, Supported),
    // oxcd's own: the bytes of multi-key Range answers being read or sent at once; past
    // it a range is refused with "etcdserver: too many requests" (0: a quarter of the
    // member's memory; machine/range_budget.rs).
    MAX_INFLIGHT_RANGE_BYTES = ("max-inflight-range-bytes", "0", Uint, Supported),
    // oxcd's own: the etcd release the member acts as, `3.6` or `3.5` (for a rolling
    // downgrade to 3.5 behaviour and back; domains/version/release.rs).
    EMULATED_VERSION = ("emulated-version", "3.6", Str, Supported),
    // Profiling, monitoring, logging
    ENABLE_PPROF = ("enable-pprof", "false", Bool, Supported),
    // oxcd has no HTTP/JSON gateway: `false` is what it does anyway.
    ENABLE_GRPC_GATEWAY = ("enable-grpc-gateway", "true", Bool, Supported),
    METRICS = ("metrics", "basic", Str, Supported),
    LISTEN_METRICS_URLS = ("listen-metrics-urls", "", Urls, Supported),
    LOGGER = ("logger", "zap", Str, Supported),
    LOG_OUTPUTS = ("log-outputs", "default", Str, Supported),
    LOG_LEVEL = ("log-level", "info", Str, Supported),
    LOG_FORMAT = ("log-format", "json", Str, Supported),
    ENABLE_LOG_ROTATION = ("enable-log-rotation", "false", Bool, NotYet),
    LOG_ROTATION_CONFIG_JSON = ("log-rotation-config-json", "{\"maxsize\": 100, \"maxage\": 0, \"maxbackups\": 0, \"localtime\": false, \"compress\": false}", Str, NotYet),
    DEBUG = ("debug", "false", Bool, Supported),
    LOG_PACKAGE_LEVELS = ("log-package-levels", "", Str, NoEffect),
    // v2 proxy (deprecated in etcd)
    PROXY = ("proxy", "off", Str, NotYet),
    PROXY_FAILURE_WAIT = ("proxy-failure-wait", "5000", Uint, NotYet),
    PROXY_REFRESH_INTERVAL = ("proxy-refresh-interval", "30000", Uint, NotYet),
    PROXY_DIAL_TIMEOUT = ("proxy-dial-timeout", "1000", Uint, NotYet),
    PROXY_WRITE_TIMEOUT = ("proxy-write-timeout", "5000", Uint, NotYet),
    PROXY_READ_TIMEOUT = ("proxy-read-timeout", "0", Uint, NotYet),
    // Experimental (3.5 names) and their 3.6 successors
    EXPERIMENTAL_INITIAL_CORRUPT_CHECK = ("experimental-initial-corrupt-check", "false", Bool, Supported),
    EXPERIMENTAL_CORRUPT_CHECK_TIME = ("experimental-corrupt-check-time", "0s", Duration, Supported),
    EXPERIMENTAL_COMPACT_HASH_CHECK_ENABLED = ("experimental-compact-hash-check-enabled", "false", Bool, NotYet),
    EXPERIMENTAL_COMPACT_HASH_CHECK_TIME = ("experimental-compact-hash-check-time", "1m0s", Duration, NotYet),
    EXPERIMENTAL_ENABLE_V2V3 = ("experimental-enable-v2v3", "", Str, NotYet),
    // oxcd replicates keepalives: a lease keeps its remaining TTL across leader changes
    // without checkpoints.
    EXPERIMENTAL_ENABLE_LEASE_CHECKPOINT = ("experimental-enable-lease-checkpoint", "false", Bool, NoEffect),
    EXPERIMENTAL_ENABLE_LEASE_CHECKPOINT_PERSIST = ("experimental-enable-lease-checkpoint-persist", "false", Bool, NoEffect),
    EXPERIMENTAL_COMPACTION_BATCH_LIMIT = ("experimental-compaction-batch-limit", "1000", Int, NoEffect),
    EXPERIMENTAL_COMPACTION_SLEEP_INTERVAL = ("experimental-compaction-sleep-interval", "10ms", Duration, NoEffect),
    EXPERIMENTAL_PEER_SKIP_CLIENT_SAN_VERIFICATION = ("experimental-peer-skip-client-san-verification", "false", Bool, Supported),
    EXPERIMENTAL_WATCH_PROGRESS_NOTIFY_INTERVAL = ("experimental-watch-progress-notify-interval", "10m0s", Duration, Supported),
    EXPERIMENTAL_WARNING_APPLY_DURATION = ("experimental-warning-apply-duration", "100ms", Duration, Supported),
    EXPERIMENTAL_WARNING_UNARY_REQUEST_DURATION = ("experimental-warning-unary-request-duration", "0s", Duration, NoEffect),
    EXPERIMENTAL_BOOTSTRAP_DEFRAG_THRESHOLD_MEGABYTES = ("experimental-bootstrap-defrag-threshold-megabytes", "0", Uint, NotYet),
    EXPERIMENTAL_TXN_MODE_WRITE_WITH_SHARED_BUFFER = ("experimental-txn-mode-write-with-shared-buffer", "true", Bool, NoEffect),
    EXPERIMENTAL_ENABLE_DISTRIBUTED_TRACING = ("experimental-enable-distributed-tracing", "false", Bool, NotYet),
    EXPERIMENTAL_DISTRIBUTED_TRACING_ADDRESS = ("experimental-distributed-tracing-address", "localhost:4317", Str, NotYet),
    EXPERIMENTAL_DISTRIBUTED_TRACING_SERVICE_NAME = ("experimental-distributed-tracing-service-name", "etcd", Str, NotYet),
    EXPERIMENTAL_DISTRIBUTED_TRACING_INSTANCE_ID = ("experimental-distributed-tracing-instance-id", "", Str, NotYet),
    EXPERIMENTAL_DISTRIBUTED_TRACING_SAMPLING_RATE = ("experimental-distributed-tracing-sampling-rate", "0", Int, NotYet),
    EXPERIMENTAL_SNAPSHOT_CATCHUP_ENTRIES = ("experimental-snapshot-catchup-entries", "5000", Uint, Supported),
    EXPERIMENTAL_MEMORY_MLOCK = ("experimental-memory-mlock", "false", Bool, NoEffect),
    EXPERIMENTAL_DOWNGRADE_CHECK_TIME = ("experimental-downgrade-check-time", "5s", Duration, Supported),
    EXPERIMENTAL_STOP_GRPC_SERVICE_ON_DEFRAG = ("experimental-stop-grpc-service-on-defrag", "false", Bool, Supported),
    // etcd 3.6: the gates (features.rs) and the experimental flags' new names
    // (renamed.rs).
    FEATURE_GATES = ("feature-gates", "", Str, Supported),
    WATCH_PROGRESS_NOTIFY_INTERVAL = ("watch-progress-notify-interval", "10m0s", Duration, Supported),
    CORRUPT_CHECK_TIME = ("corrupt-check-time", "0s", Duration, Supported),
    COMPACT_HASH_CHECK_TIME = ("compact-hash-check-time", "1m0s", Duration, NotYet),
    SNAPSHOT_CATCHUP_ENTRIES = ("snapshot-catchup-entries", "5000", Uint, Supported),
    COMPACTION_BATCH_LIMIT = ("compaction-batch-limit", "1000", Int, NoEffect),
    COMPACTION_SLEEP_INTERVAL = ("compaction-sleep-interval", "10ms", Duration, NoEffect),
    WARNING_APPLY_DURATION = ("warning-apply-duration", "100ms", Duration, Supported),
    WARNING_UNARY_REQUEST_DURATION = ("warning-unary-request-duration", "0s", Duration, NoEffect),
    BOOTSTRAP_DEFRAG_THRESHOLD_MEGABYTES = ("bootstrap-defrag-threshold-megabytes", "0", Uint, NotYet),
    MEMORY_MLOCK = ("memory-mlock", "false", Bool, NoEffect),
    DOWNGRADE_CHECK_TIME = ("downgrade-check-time", "5s", Duration, Supported),
    PEER_SKIP_CLIENT_SAN_VERIFICATION = ("peer-skip-client-san-verification", "false", Bool, Supported),
    ENABLE_DISTRIBUTED_TRACING = ("enable-distributed-tracing", "false", Bool, NotYet),
    DISTRIBUTED_TRACING_ADDRESS = ("distributed-tracing-address", "localhost:4317", Str, NotYet),
    DISTRIBUTED_TRACING_SERVICE_NAME = ("distributed-tracing-service-name", "etcd", Str, NotYet),
    DISTRIBUTED_TRACING_INSTANCE_ID = ("distributed-tracing-instance-id", "", Str, NotYet),
    DISTRIBUTED_TRACING_SAMPLING_RATE = ("distributed-tracing-sampling-rate", "0", Int, NotYet),
    FORCE_NEW_CLUSTER = ("force-new-cluster", "false", Bool, Supported),
    // Meta
    CONFIG_FILE = ("config-file", "", Str, Supported),
    VERSION = ("version", "false", Bool, Supported),
}

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

/// Checks `value` for `flag`; the error is the reason Go's flag package would give.
pub fn check(flag: &Flag, value: &str) -> Result<(), String> {
    match flag.kind {
        Kind::Str => check_choice(flag.name, value),
        Kind::Bool => parse_bool(value)
            .map(|_| ())
            .ok_or_else(|| "parse error".to_string()),
        Kind::Uint => parse_go_uint(value, 64).map(|_| ()).map_err(flag_text),
        // etcd's uint32Value.Set returns strconv's error unchanged.
        Kind::Uint32 => parse_go_uint(value, 32)
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Kind::Int => parse_go_int(value, 64).map(|_| ()).map_err(flag_text),
        Kind::Duration => {
            if go_duration_ok(value) {
                Ok(())
            } else {
                Err("parse error".to_string())
            }
        }
        // etcd's UniqueURLs accept "" (the flag keeps its default).
        Kind::Urls if value.is_empty() => Ok(()),
        Kind::Urls => parse_urls(value).map(|_| ()),
    }
}

/// The values of etcd's selective flags (`flags.SelectiveStringValue` and
/// `SelectiveStringsValue`); other string flags are free text at parse time.
pub fn choices(name: &str) -> Option<&'static [&'static str]> {
    Some(match name {
        "initial-cluster-state" => &["new", "existing"],
        "discovery-fallback" => &["exit", "proxy"],
        "proxy" => &["off", "readonly", "on"],
        "v2-deprecation" => &[
            "not-yet",
            "write-only",
            "write-only-skip-check",
            "write-only-drop-data",
            "gone",
        ],
        _ => return None,
    })
}

fn check_choice(name: &str, value: &str) -> Result<(), String> {
    if name == "feature-gates" {
        return crate::features::parse(value)
            .map(|_| ())
            .map_err(|e| e.to_string());
    }
    let Some(valid) = choices(name) else {
        return Ok(());
    };
    if name == "v2-deprecation" {
        // SelectiveStringsValue: a comma list, each one valid.
        for v in value.split(',') {
            if !valid.contains(&v) {
                return Err(format!("invalid value {v:?}"));
            }
        }
        return Ok(());
    }
    if valid.contains(&value) {
        Ok(())
    } else {
        Err("invalid value".to_string())
    }
}
