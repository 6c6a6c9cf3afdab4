//! oxcd-bench: etcd `benchmark`-style load against any etcd v3 endpoints; `compare`,
//! the side-by-side run of oxcd and etcd; `learner-catchup`, a learner added to each;
//! `backup`, snapshot save, restore and defragmentation on each; `gateway`, the JSON
//! gateway and `/metrics` on each.
//!
//! Exit status: 0 on a finished run (failed requests are reported, not fatal; an
//! unsupported workload prints "unsupported: ..."), 1 when the run could not start.

use clap::Parser;

/// mimalloc, as the server: the load generator shares the cores with the members it
/// measures, so the less it spends per request and event the better it measures them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use oxcd_bench::cli::{Cli, Command};
use oxcd_bench::stats::Report;
use oxcd_bench::workloads::{auth, kv, lease, txn, watch};
use oxcd_bench::{backup, compare, conns, gateway, learner};

async fn workload(cli: &Cli) -> Result<Report, String> {
    let g = &cli.global;
    let conns = conns::open(g).await?;
    let clients = g.clients.max(1);
    match &cli.command {
        Command::Put(a) => kv::put(a, clients, &conns).await,
        Command::Range(a) => kv::range(a, clients, &conns).await,
        Command::TxnPut(a) => Ok(txn::txn_put(a, clients, &conns).await),
        Command::TxnMixed(a) => txn::txn_mixed(a, clients, &conns).await,
        Command::Watch(a) => watch::watch(a, clients, &conns).await,
        Command::WatchLatency(a) => watch::watch_latency(a, &conns).await,
        Command::LeaseKeepalive(a) => lease::keepalive(a, clients, &conns).await,
        Command::Authenticate(a) => Ok(auth::authenticate(a, clients, &conns).await),
        Command::Compare(_) => Err("compare is not a workload".into()),
        Command::LearnerCatchup(_) => Err("learner-catchup is not a workload".into()),
        Command::Backup(_) => Err("backup is not a workload".into()),
        Command::Gateway(_) => Err("gateway is not a workload".into()),
    }
}

fn print(json: bool, r: &Report) {
    if json {
        match serde_json::to_string(r) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("oxcd-bench: {e}"),
        }
    } else {
        print!("{}", r.text());
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("oxcd-bench: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async {
        if let Command::Compare(a) = &cli.command {
            return compare::run(a).await.map(|()| None);
        }
        if let Command::LearnerCatchup(a) = &cli.command {
            return learner::run(a).await.map(|()| None);
        }
        if let Command::Backup(a) = &cli.command {
            return backup::run(a).await.map(|()| None);
        }
        if let Command::Gateway(a) = &cli.command {
            return gateway::run(a).await.map(|()| None);
        }
        workload(&cli).await.map(Some)
    });
    match result {
        Ok(Some(r)) => {
            print(cli.global.json, &r);
            std::process::ExitCode::SUCCESS
        }
        Ok(None) => std::process::ExitCode::SUCCESS,
        Err(e) if e.starts_with("unsupported") => {
            if cli.global.json {
                println!("{}", serde_json::json!({ "unsupported": e }));
            } else {
                println!("{e}");
            }
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("oxcd-bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
