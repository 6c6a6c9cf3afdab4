//! What a member needs to start, independent of how it was configured (flags, env, YAML).

use std::path::PathBuf;
use std::time::Duration;

use oxcd_transport::TlsInfo;

use crate::auto_compaction::AutoCompaction;

use crate::quota::Quota;

/// Member settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `--name`.
    pub name: String,
    /// `--data-dir`.
    pub data_dir: PathBuf,
    /// `--wal-dir` (default `<data-dir>/member/wal`).
    pub wal_dir: Option<PathBuf>,
    /// `--listen-client-urls`.
    pub listen_client_urls: Vec<String>,
    /// `--listen-client-http-urls`: URLs that serve HTTP only (the gateway, health,
    /// metrics, version); the client URLs then serve gRPC only.
    pub listen_client_http_urls: Vec<String>,
    /// `--advertise-client-urls`.
    pub advertise_client_urls: Vec<String>,
    /// `--initial-advertise-peer-urls` (identity of this member).
    pub peer_urls: Vec<String>,
    /// `--listen-peer-urls` (bound only when the cluster has other members).
    pub listen_peer_urls: Vec<String>,
    /// `--initial-cluster`: every member's name and peer URLs (used only to bootstrap).
    pub initial_cluster: Vec<(String, Vec<String>)>,
    /// `--initial-cluster-state existing` (false: `new`).
    pub initial_cluster_existing: bool,
    /// `--initial-cluster-token`.
    pub initial_cluster_token: String,
    /// `--max-txn-ops`.
    pub max_txn_ops: usize,
    /// `--max-request-bytes`.
    pub max_request_bytes: usize,
    /// `--snapshot-count`.
    pub snapshot_count: u64,
    /// `--experimental-snapshot-catchup-entries`: entries kept below a snapshot for
    /// followers slightly behind.
    pub snapshot_catchup_entries: u64,
    /// `--heartbeat-interval`.
    pub heartbeat: Duration,
    /// `--election-timeout`.
    pub election_timeout: Duration,
    /// `--pre-vote`.
    pub pre_vote: bool,
    /// `--experimental-stop-grpc-service-on-defrag`: gRPC's health service says
    /// NOT_SERVING while this member defragments.
    pub stop_grpc_service_on_defrag: bool,
    /// `--emulated-version`: the etcd release (major and minor, patch 0) the member acts
    /// as, 3.6 or 3.5.
    pub emulated_version: oxcd_go::semver::Version,
    /// `--feature-gates` (with the experimental flags etcd 3.6 maps onto gates).
    pub feature_gates: crate::features::FeatureGates,
    /// `--enable-pprof`: `/debug/pprof/` on the client port's HTTP side.
    pub enable_pprof: bool,
    /// `--unsafe-no-fsync`: the WAL is written without fdatasync (data loss on power
    /// loss or a kernel crash; a killed process loses nothing the kernel has).
    pub unsafe_no_fsync: bool,
    /// `--max-wals`.
    pub max_wals: usize,
    /// `--quota-backend-bytes` (0: etcd's default of 2 GiB; negative: no quota).
    pub quota_backend_bytes: i64,
    /// `--experimental-initial-corrupt-check`: compare HashKV with peers before serving.
    pub initial_corrupt_check: bool,
    /// `--experimental-corrupt-check-time` (zero: off): the leader compares periodically.
    pub corrupt_check_time: Duration,
    /// `--warning-apply-duration` (3.5: `--experimental-warning-apply-duration`): an
    /// apply taking longer is logged and counted in `etcd_server_slow_apply_total`.
    pub warning_apply_duration: Duration,
    /// `--downgrade-check-time` (3.5: `--experimental-downgrade-check-time`; zero: never):
    /// how often the leader checks whether every member has made an enabled downgrade,
    /// and cancels it once they have.
    pub downgrade_check_time: Duration,
    /// `--experimental-watch-progress-notify-interval` (3.6: `--watch-progress-notify-interval`):
    /// how often idle watchers that asked for it get a progress notification.
    pub watch_progress_notify_interval: Duration,
    /// `--listen-metrics-urls`: `/metrics` and `/health` only (plain or https, with the
    /// client TLS settings, as etcd).
    pub listen_metrics_urls: Vec<String>,
    /// Client port TLS (`--cert-file`, `--key-file`, `--trusted-ca-file`,
    /// `--client-cert-auth`, `--client-crl-file`, `--client-cert-allowed-hostname`,
    /// `--cipher-suites`, `--tls-min-version`, `--tls-max-version`).
    pub client_tls: TlsInfo,
    /// `--auto-tls`: a self-signed client certificate when none is given.
    pub client_auto_tls: bool,
    /// Peer port TLS (`--peer-*` files and checks, the same versions and suites).
    pub peer_tls: TlsInfo,
    /// `--peer-auto-tls`: a self-signed peer certificate when none is given.
    pub peer_auto_tls: bool,
    /// `--self-signed-cert-validity`, in years.
    pub self_signed_cert_validity: u32,
    /// `--experimental-peer-skip-client-san-verification`.
    pub peer_skip_client_san_verification: bool,
    /// The local address peer connections are made from (`OXCD_PEER_SOURCE_IP`; not an
    /// etcd setting). The robustness suite gives each member its own loopback address so
    /// that its partitioning proxy can tell which member a connection comes from.
    pub peer_source_ip: Option<std::net::IpAddr>,
    /// `--auth-token`: `simple`, `jwt,<options>` or empty (read by
    /// [`oxcd_auth::provider::TokenProvider::from_flag`]).
    pub auth_token: String,
    /// `--auth-token-ttl`: how long a simple token lives after its last use.
    pub auth_token_ttl: Duration,
    /// `--bcrypt-cost` (etcd's default where bcrypt would refuse it).
    pub bcrypt_cost: u32,
    /// `--auth-password-cache-ttl` (oxcd's own): how long a password checked good is
    /// taken without bcrypt (zero: always bcrypt, as etcd).
    pub auth_password_cache_ttl: Duration,
    /// `--strict-reconfig-check`: refuse membership changes that could lose quorum.
    pub strict_reconfig_check: bool,
    /// `--max-learners` (`--experimental-max-learners`).
    pub max_learners: u32,
    /// `--force-new-cluster`: restart as a one-member cluster with this member's data.
    pub force_new_cluster: bool,
    /// `--auto-promote-learners` (oxcd's own): the leader promotes caught-up learners.
    pub auto_promote_learners: bool,
    /// `--max-inflight-range-bytes` (oxcd's own): the bytes of multi-key Range answers
    /// being read or sent at once (0: the server picks a quarter of its memory).
    pub max_inflight_range_bytes: u64,
    /// `--enable-grpc-gateway`: etcd's JSON gateway at `/v3/` (and `/v3beta/`) on the
    /// client port.
    pub enable_grpc_gateway: bool,
    /// `--discovery-srv`: the domain whose SRV records give a new member its initial
    /// cluster (`_etcd-server-ssl._tcp`, `_etcd-server._tcp`).
    pub discovery_srv: String,
    /// `--discovery-srv-name`: the suffix of those services' names.
    pub discovery_srv_name: String,
    /// `--discovery-endpoints` (etcd 3.6's v3 discovery): client endpoints of the
    /// cluster through which a new member finds its peers.
    pub discovery_endpoints: Vec<String>,
    /// `--discovery-token`: the name of this cluster's registrations there.
    pub discovery_token: String,
    /// `--max-concurrent-streams`: streams one client connection may have open (HTTP/2),
    /// and calls the gateway may have in flight (etcd's gateway is one such connection).
    pub max_concurrent_streams: u32,
    /// `--metrics extensive`: gRPC handling-time histograms too.
    pub metrics_extensive: bool,
    /// `--auto-compaction-mode` and `--auto-compaction-retention` as etcd reads them
    /// (None: off, a retention of zero).
    pub auto_compaction: Option<AutoCompaction>,
    /// How often revision-mode auto-compaction looks at the revision: etcd's 5 minutes
    /// ([`crate::auto_compaction::REVISION_INTERVAL`]). Not a flag: tests shorten it.
    pub auto_compaction_revision_interval: Duration,
}

impl Settings {
    /// The WAL directory.
    pub fn wal_dir(&self) -> PathBuf {
        self.wal_dir
            .clone()
            .unwrap_or_else(|| self.data_dir.join("member").join("wal"))
    }

    /// The backend file (etcd's path, so operators find it where they expect).
    pub fn backend_path(&self) -> PathBuf {
        self.snap_dir().join("db")
    }

    /// Where snapshots received from the leader wait to be installed.
    pub fn snap_dir(&self) -> PathBuf {
        self.data_dir.join("member").join("snap")
    }

    /// The backend quota: etcd's 2 GiB default when unset (0), none when negative.
    pub fn quota(&self) -> Quota {
        Quota::from_flag(self.quota_backend_bytes)
    }

    /// etcd's request timeout: 5 s plus two election timeouts.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(5) + 2 * self.election_timeout
    }
}
