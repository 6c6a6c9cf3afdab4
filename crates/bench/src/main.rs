//! oxcd-bench: etcd `benchmark`-style load against any etcd v3 endpoints; `compare`,
//! the side-by-side run of oxcd and etcd; `learner-catchup`, a learner added to each;
//! `backup`, snapshot save, restore and defragmentation on each; `gateway`, the JSON
//! gateway and `/metrics` on each. The subcommands and their dispatch are
//! [`oxcd_bench::cli`]'s; this file starts the runtime and prints a workload's report.
//!
//! Exit status: 0 on a finished run (failed requests are reported, not fatal; an
//! unsupported workload prints "unsupported: ..."), 1 when the run could not start.

use clap::Parser;

/// mimalloc, as the server: the load generator shares the cores with the members it
/// measures, so the less it spends per request and event the better it measures them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use oxcd_bench::cli::{self, Cli};
use oxcd_bench::stats::Report;

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
    let result = rt.block_on(cli::run(&cli));
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
