//! The server's integration tests, in one test binary so the workspace links (and
//! monomorphizes the gRPC clients) once instead of once per file. Each module is one
//! area; they start real `oxcd` processes or in-process servers on real sockets.

mod common;

mod auth;
mod auth_jwt;
mod auth_jwt_parity;
mod auth_parity;
mod auto_compaction;
mod bootstrap_checks;
mod cli;
mod client_http_urls;
mod cluster;
mod cluster_processes;
mod config_etcd_compat;
mod corruption;
mod crash;
mod defrag;
mod discovery_v3;
mod etcd_backup_format;
mod etcd_migration;
mod etcd_peer;
mod etcd_peer_tls;
mod etcd_snapshot_crash;
mod etcd_swap;
mod etcdctl_compat;
mod faults;
mod gateway_client;
mod gateway_parity;
mod grpc_health;
mod kv_etcd_client;
mod lease;
mod lease_metrics;
mod lease_parity;
mod lease_ttl_vs_etcd;
mod lock_election_client;
mod lock_election_parity;
mod max_streams;
mod membership;
mod membership_changes;
mod metrics_health;
mod mvcc_metrics;
mod peer_direct;
mod pprof;
mod quota;
mod quota_parity;
mod range_budget;
mod range_stream;
mod srv_discovery;
mod tls;
mod tls_cluster;
mod unsafe_no_fsync;
mod versions;
mod watch;
mod watch_parity;
