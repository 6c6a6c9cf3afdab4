//! `robustness`: runs a scenario against real `oxcd` processes and checks the history.
//!
//! ```text
//! robustness --duration 60s --faults kill,pause,partition --seed 42
//! robustness --scenario pause-leader --duration 20s
//! ```
//! Prints the operations (ok / failed / indeterminate), the faults injected, and a last
//! line `linearizable: ok` or `linearizable: VIOLATION (<file>)`; exits 1 on a violation.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use oxcd_testkit::faults::Fault;
use oxcd_testkit::scenario;

#[derive(Parser, Debug)]
#[command(about = "Checks oxcd for linearizability under kills, pauses and partitions")]
struct Args {
    /// How long to run the workload: 90s, 10m, or seconds.
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    duration: Duration,
    /// Faults to inject, comma-separated: kill, pause, partition (ignored with --scenario).
    #[arg(long, value_delimiter = ',', default_value = "kill,pause,partition")]
    faults: Vec<Fault>,
    /// A named scenario instead of --faults (see --list).
    #[arg(long)]
    scenario: Option<String>,
    /// Seed for the fault schedule and the clients' choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The oxcd binary (default: next to this one).
    #[arg(long)]
    binary: Option<PathBuf>,
    /// Where violations, and the data of a failed run, are written.
    #[arg(long, default_value = "target/robustness")]
    out: PathBuf,
    /// List the named scenarios and exit.
    #[arg(long)]
    list: bool,
    /// Client and peer traffic over TLS (certificates made for the run).
    #[arg(long)]
    tls: bool,
    /// Keep the members' data, logs and the history (history.json, watches.json) of a
    /// run that passed too, for check-history.
    #[arg(long)]
    keep: bool,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().map_err(|_| format!("bad duration {s:?}"))?;
    match unit {
        "" | "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "ms" => Ok(Duration::from_millis(n)),
        _ => Err(format!("bad duration {s:?}: use 90s, 10m or 500ms")),
    }
}

fn default_binary() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("oxcd")))
        .unwrap_or_else(|| PathBuf::from("oxcd"))
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    if args.list {
        for n in scenario::NAMES {
            println!("{n}");
        }
        return ExitCode::SUCCESS;
    }
    let s = match &args.scenario {
        Some(name) => match scenario::named(name, args.seed) {
            Some(s) => s,
            None => {
                eprintln!(
                    "unknown scenario {name:?}; known: {}",
                    scenario::NAMES.join(", ")
                );
                return ExitCode::from(2);
            }
        },
        None => scenario::custom(args.faults.clone(), args.seed),
    };
    let s = scenario::Scenario {
        tls: s.tls || args.tls,
        keep: args.keep,
        ..s
    };
    let binary = args.binary.clone().unwrap_or_else(default_binary);
    if !binary.exists() {
        eprintln!(
            "robustness: {} not found; build it first (cargo build --release --bin oxcd) or pass --binary",
            binary.display()
        );
        return ExitCode::from(2);
    }
    println!(
        "scenario {} on {} member(s), seed {}, {:?}, faults {:?}",
        s.name, s.members, args.seed, args.duration, s.plan.faults
    );
    if s.leases {
        return match scenario::run_leases(&s, &binary, args.duration, &args.out).await {
            Ok(r) => {
                println!("faults injected: {}", r.faults.len());
                for f in &r.faults {
                    println!("  {f}");
                }
                match r.result {
                    Ok(summary) => {
                        println!("checked: {summary:?}");
                        println!("leases and watches: ok");
                        ExitCode::SUCCESS
                    }
                    Err(reason) => {
                        println!("leases and watches: VIOLATION: {reason}");
                        ExitCode::from(1)
                    }
                }
            }
            Err(e) => {
                eprintln!("robustness: {e}");
                ExitCode::from(2)
            }
        };
    }
    let report = match scenario::run(&s, &binary, args.duration, &args.out).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("robustness: {e}");
            return ExitCode::from(2);
        }
    };
    println!(
        "operations: {} ok, {} failed, {} indeterminate",
        report.ok, report.failed, report.indeterminate
    );
    println!(
        "faults injected: {} (snapshots installed by members: {})",
        report.faults.len(),
        report.snapshots
    );
    for f in &report.faults {
        println!("  {f}");
    }
    let l = report.leases;
    println!(
        "leases: {} granted, {} puts with a lease, {} revoked, {} expired with keys",
        l.granted, l.puts, l.revoked, l.expired
    );
    let auth_ok = match &report.auth {
        None => true,
        Some(Ok((d, settled))) => {
            println!(
                "auth: {} grant changes ({} settled by a read); users' writes {} granted, {} denied; reads {} granted, {} denied; {} refused as auth-store-old",
                d.changes,
                d.settled_by_read,
                d.writes_granted,
                d.writes_denied,
                d.reads_granted,
                d.reads_denied,
                d.old_revision
            );
            println!(
                "auth: {} acknowledged user writes found at their revision; every member's HashKV {} and state hash (auth included) {} equal",
                settled.verified_writes, settled.hash_kv, settled.state_hash
            );
            println!("auth decisions: ok");
            true
        }
        Some(Err(e)) => {
            println!("auth decisions: VIOLATION: {e}");
            println!("data and logs kept in {}", report.data.display());
            false
        }
    };
    if let Some(storm) = &report.storm {
        println!(
            "storm: {} ranges served, {} refused (too many requests), {} failed; {} connections churned",
            storm.served, storm.refused, storm.failed, storm.connections
        );
    }
    let hashes_ok = match &report.hashes {
        None => true,
        Some(Ok(line)) => {
            println!("mixed cluster: {line}");
            true
        }
        Some(Err(e)) => {
            println!("mixed cluster: VIOLATION: {e}");
            println!("data and logs kept in {}", report.data.display());
            false
        }
    };
    let watch_ok = match &report.watch {
        Ok(w) => {
            println!(
                "watches: {} watchers, {} events, {} resumed, {} bookmarks, {} compacted; {} revisions replayed, {} reads matched{}",
                w.watchers,
                w.events,
                w.resumed,
                w.progress,
                w.compacted,
                w.revisions,
                w.reads,
                if w.fresh_reference {
                    ", reference: a watch from revision 1"
                } else {
                    ""
                }
            );
            println!("watch checks: ok");
            true
        }
        Err(e) => {
            println!("watch checks: VIOLATION: {e}");
            println!("data and logs kept in {}", report.data.display());
            false
        }
    };
    match &report.result {
        Ok(summary) => {
            println!(
                "checked: {} linearized, {} serializable reads, final revision {}",
                summary.linearized, summary.serializable, summary.final_rev
            );
            println!("linearizable: ok");
            if args.keep {
                println!("data, logs and history kept in {}", report.data.display());
            }
            if watch_ok && auth_ok && hashes_ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err((reason, file)) => {
            println!("{reason}");
            println!("data and logs kept in {}", report.data.display());
            println!("linearizable: VIOLATION ({})", file.display());
            ExitCode::from(1)
        }
    }
}
