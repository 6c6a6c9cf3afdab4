//! The command line, shaped like etcd's `benchmark` tool: the global connection and
//! concurrency flags ([`Global`]), then one subcommand per workload or side-by-side
//! benchmark, each with the flags its own module defines; [`run`] dispatches to it.
//! Nothing else in the crate depends on this file.

use clap::{Parser, Subcommand};

use crate::backup::BackupArgs;
use crate::big_range::BigRangeArgs;
use crate::compare::CompareArgs;
use crate::conns::{self, Global};
use crate::floor::FloorArgs;
use crate::gateway::GatewayArgs;
use crate::learner::LearnerArgs;
use crate::overload::OverloadArgs;
use crate::scale::ScaleArgs;
use crate::stats::Report;
use crate::workloads::auth::{self, AuthenticateArgs};
use crate::workloads::kv::{self, PutArgs, RangeArgs};
use crate::workloads::lease::{self, LeaseArgs};
use crate::workloads::txn::{self, TxnMixedArgs, TxnPutArgs};
use crate::workloads::watch::{self, WatchArgs, WatchLatencyArgs};
use crate::{compare, versus};

/// A load generator for etcd v3 endpoints (oxcd or etcd), after etcd's `benchmark`.
#[derive(Debug, Parser)]
#[command(name = "oxcd-bench", version)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
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
    Compare(CompareArgs),
    /// Add a learner to a filled 3-member etcd and then oxcd, promote it as soon as
    /// it is in sync, and report the catch-up time, the writes' latency meanwhile and
    /// the leader's term.
    LearnerCatchup(LearnerArgs),
    /// Fill etcd and then oxcd with history, and report snapshot save throughput,
    /// restore time (etcdutl, oxcdutl) and the writes' pause during a defragmentation.
    Backup(BackupArgs),
    /// Load etcd's and then oxcd's JSON gateway with HTTP clients (puts, ranges) and
    /// time their `/metrics` scrapes.
    Gateway(GatewayArgs),
    /// Load 1 GiB of values and 1 M small keys into etcd and then oxcd, and time a full
    /// range (etcd: Range; oxcd: Range and RangeStream) with the member's RSS growth,
    /// and a keys-only range.
    BigRange(BigRangeArgs),
    /// Load 128 MiB into a 3-member etcd and then oxcd, and storm the leader with
    /// clients ranging over all of it: its memory, elections, and the latency of small
    /// puts and lease calls beside the storm.
    Overload(OverloadArgs),
    /// A large database (16 GiB by default) in etcd and then oxcd, each also at a small
    /// one: load, put and range p99 at 1000 clients, compaction, restart, a learner's
    /// catch-up, snapshot save and restore.
    Scale(ScaleArgs),
    /// What this machine allows a single client's put at best, with no server: a
    /// durable 4 KiB write and a loopback round trip, and their sum for a 3-member put.
    Floor(FloorArgs),
}

/// Runs the command: a workload's report to print, or none for a side-by-side
/// benchmark, which writes and prints its own report.
pub async fn run(cli: &Cli) -> Result<Option<Report>, String> {
    match &cli.command {
        Command::Compare(a) => compare::run(a).await.map(|()| None),
        Command::LearnerCatchup(a) => versus::run(a).await.map(|()| None),
        Command::Backup(a) => versus::run(a).await.map(|()| None),
        Command::Gateway(a) => versus::run(a).await.map(|()| None),
        Command::BigRange(a) => versus::run(a).await.map(|()| None),
        Command::Overload(a) => versus::run(a).await.map(|()| None),
        Command::Scale(a) => versus::run(a).await.map(|()| None),
        Command::Floor(a) => crate::floor::run(a).map(|_| None),
        command => workload(&cli.global, command).await.map(Some),
    }
}

/// Runs a workload over the connections the global flags ask for.
async fn workload(g: &Global, command: &Command) -> Result<Report, String> {
    let conns = conns::open(g).await?;
    let clients = g.clients.max(1);
    match command {
        Command::Put(a) => kv::put(a, clients, &conns).await,
        Command::Range(a) => kv::range(a, clients, &conns).await,
        Command::TxnPut(a) => Ok(txn::txn_put(a, clients, &conns).await),
        Command::TxnMixed(a) => txn::txn_mixed(a, clients, &conns).await,
        Command::Watch(a) => watch::watch(a, clients, &conns).await,
        Command::WatchLatency(a) => watch::watch_latency(a, &conns).await,
        Command::LeaseKeepalive(a) => lease::keepalive(a, clients, &conns).await,
        Command::Authenticate(a) => Ok(auth::authenticate(a, clients, &conns).await),
        Command::Compare(_)
        | Command::LearnerCatchup(_)
        | Command::Backup(_)
        | Command::Gateway(_)
        | Command::BigRange(_)
        | Command::Overload(_)
        | Command::Scale(_)
        | Command::Floor(_) => Err("a side-by-side benchmark is not a workload".into()),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

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
