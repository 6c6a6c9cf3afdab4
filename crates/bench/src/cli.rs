//! The command line, shaped like etcd's `benchmark` tool: global connection and
//! concurrency flags, then one subcommand per workload.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// A load generator for etcd v3 endpoints (oxcd or etcd), after etcd's `benchmark`.
#[derive(Debug, Parser)]
#[command(name = "oxcd-bench", version)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every workload takes.
#[derive(Debug, Clone, Args)]
pub struct Global {
    /// gRPC endpoints, comma separated; connections are spread over them in turn.
    #[arg(
        long,
        global = true,
        value_delimiter = ',',
        default_value = "127.0.0.1:2379"
    )]
    pub endpoints: Vec<String>,
    /// Total number of gRPC connections.
    #[arg(long, global = true, default_value_t = 1)]
    pub conns: usize,
    /// Total number of concurrent clients (tasks sharing the connections).
    #[arg(long, global = true, default_value_t = 1)]
    pub clients: usize,
    /// Send every request to the current leader only.
    #[arg(long, global = true)]
    pub target_leader: bool,
    /// username[:password] for authentication (the password is asked for when missing).
    #[arg(long, global = true)]
    pub user: Option<String>,
    /// Dial timeout in seconds.
    #[arg(long, global = true, default_value_t = 2)]
    pub dial_timeout: u64,
    /// Verify the servers' certificates with this CA bundle (TLS for every endpoint).
    #[arg(long, global = true)]
    pub cacert: Option<PathBuf>,
    /// Identify with this TLS client certificate.
    #[arg(long, global = true)]
    pub cert: Option<PathBuf>,
    /// The key of --cert.
    #[arg(long = "key", id = "tls_key", global = true)]
    pub key_file: Option<PathBuf>,
    /// Skip verifying the servers' certificates (testing only).
    #[arg(long, global = true)]
    pub insecure_skip_tls_verify: bool,
    /// Print the result as one JSON object instead of text.
    #[arg(long, global = true)]
    pub json: bool,
}

/// The workloads.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Benchmark put.
    Put(PutArgs),
    /// Benchmark range.
    Range(RangeArgs),
    /// Benchmark txns of puts.
    TxnPut(TxnPutArgs),
    /// Benchmark a mix of read txns and write txns.
    TxnMixed(TxnMixedArgs),
    /// Benchmark watch: watcher creation and event delivery under puts.
    Watch(WatchArgs),
    /// Benchmark the latency from a put to its event on a watcher.
    WatchLatency(WatchLatencyArgs),
    /// Benchmark lease keep-alive round trips.
    LeaseKeepalive(LeaseArgs),
    /// Benchmark logins (Auth.Authenticate) of one user.
    Authenticate(AuthenticateArgs),
    /// Start a 3-member etcd and a 3-member oxcd on loopback, one after the other, run
    /// the same matrix on each and write a markdown report with the ratios.
    Compare(crate::compare::CompareArgs),
    /// Add a learner to a filled 3-member etcd and then oxcd, promote it as soon as
    /// it is in sync, and report the catch-up time, the writes' latency meanwhile and
    /// the leader's term.
    LearnerCatchup(crate::learner::LearnerArgs),
    /// Fill etcd and then oxcd with history, and report snapshot save throughput,
    /// restore time (etcdutl, oxcdutl) and the writes' pause during a defragmentation.
    Backup(crate::backup::BackupArgs),
    /// Load etcd's and then oxcd's JSON gateway with HTTP clients (puts, ranges) and
    /// time their `/metrics` scrapes.
    Gateway(crate::gateway::GatewayArgs),
}

/// Key and value shape shared by the writing workloads.
#[derive(Debug, Clone, Args)]
pub struct KeyArgs {
    /// Key size in bytes.
    #[arg(long, default_value_t = 8)]
    pub key_size: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 8)]
    pub val_size: usize,
    /// How many distinct keys are written.
    #[arg(long, default_value_t = 1)]
    pub key_space_size: u64,
    /// Write keys in order instead of at random.
    #[arg(long)]
    pub sequential_keys: bool,
}

#[derive(Debug, Clone, Args)]
pub struct PutArgs {
    #[command(flatten)]
    pub keys: KeyArgs,
    /// Total number of puts.
    #[arg(long, default_value_t = 10_000)]
    pub total: u64,
    /// Maximum puts per second over all clients (0: unlimited).
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
    /// Watchers kept open during the run, each on one key of the key space (distinct
    /// keys while the space allows), 100 per stream, streams spread over the connections.
    #[arg(long, default_value_t = 0)]
    pub watchers: u64,
}

#[derive(Debug, Clone, Args)]
pub struct AuthenticateArgs {
    /// The user to log in as.
    #[arg(long)]
    pub name: String,
    /// Its password.
    #[arg(long)]
    pub password: String,
    /// Total number of logins.
    #[arg(long, default_value_t = 1_000)]
    pub total: u64,
    /// Maximum logins per second (0: unlimited).
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
}

#[derive(Debug, Clone, Args)]
pub struct RangeArgs {
    /// The key, or the start of the range.
    pub key: String,
    /// The end of the range (exclusive); none for a single key.
    pub end: Option<String>,
    /// Total number of ranges.
    #[arg(long, default_value_t = 10_000)]
    pub total: u64,
    /// Maximum ranges per second (0: unlimited).
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
    /// l (linearizable) or s (serializable).
    #[arg(long, default_value = "l")]
    pub consistency: String,
    /// Maximum keys returned (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub limit: i64,
    /// Return keys only.
    #[arg(long)]
    pub keys_only: bool,
    /// Return the count only.
    #[arg(long)]
    pub count_only: bool,
}

#[derive(Debug, Clone, Args)]
pub struct TxnPutArgs {
    #[command(flatten)]
    pub keys: KeyArgs,
    /// Total number of txns.
    #[arg(long, default_value_t = 10_000)]
    pub total: u64,
    /// Puts per txn.
    #[arg(long, default_value_t = 1)]
    pub txn_ops: usize,
    /// Maximum txns per second (0: unlimited).
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
}

#[derive(Debug, Clone, Args)]
pub struct TxnMixedArgs {
    #[command(flatten)]
    pub keys: KeyArgs,
    /// Total number of txns.
    #[arg(long, default_value_t = 10_000)]
    pub total: u64,
    /// Reads per write.
    #[arg(long, default_value_t = 1.0)]
    pub rw_ratio: f64,
    /// l or s for the reads.
    #[arg(long, default_value = "l")]
    pub consistency: String,
    /// Maximum txns per second (0: unlimited).
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
}

#[derive(Debug, Clone, Args)]
pub struct WatchArgs {
    /// Watch streams (spread over the connections).
    #[arg(long, default_value_t = 10)]
    pub streams: usize,
    /// Watchers per stream.
    #[arg(long, default_value_t = 10)]
    pub watch_per_stream: usize,
    /// How many distinct keys are watched.
    #[arg(long, default_value_t = 100)]
    pub watched_key_total: u64,
    /// Puts per second on the watched keys.
    #[arg(long, default_value_t = 100)]
    pub put_rate: u64,
    /// Total puts on the watched keys.
    #[arg(long, default_value_t = 1000)]
    pub put_total: u64,
    /// Key size in bytes.
    #[arg(long, default_value_t = 32)]
    pub key_size: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 32)]
    pub val_size: usize,
}

#[derive(Debug, Clone, Args)]
pub struct WatchLatencyArgs {
    /// Watch streams, all on one key.
    #[arg(long, default_value_t = 10)]
    pub streams: usize,
    /// Watchers per stream.
    #[arg(long, default_value_t = 10)]
    pub watchers_per_stream: usize,
    /// Puts per second.
    #[arg(long, default_value_t = 100)]
    pub put_rate: u64,
    /// Total puts.
    #[arg(long, default_value_t = 1000)]
    pub put_total: u64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 32)]
    pub val_size: usize,
}

#[derive(Debug, Clone, Args)]
pub struct LeaseArgs {
    /// Total keep-alive round trips.
    #[arg(long, default_value_t = 10_000)]
    pub total: u64,
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn a_range_key_and_the_tls_key_flag_do_not_collide() {
        let cli = Cli::try_parse_from([
            "oxcd-bench",
            "--key",
            "k.pem",
            "range",
            "foo",
            "fop",
            "--consistency",
            "s",
        ])
        .expect("parses");
        assert_eq!(cli.global.key_file, Some(PathBuf::from("k.pem")));
        match cli.command {
            Command::Range(r) => {
                assert_eq!(r.key, "foo");
                assert_eq!(r.end.as_deref(), Some("fop"));
                assert_eq!(r.consistency, "s");
            }
            other => panic!("parsed as {other:?}"),
        }
    }
}
