//! The comparison's markdown report: one table of throughput and latency per workload,
//! then watch delivery, CPU per request and resources, each with the oxcd/etcd ratio;
//! the cost of auth on each system; over several rounds, every round's ratios and their
//! median. Ratios and medians are [`crate::versus::table`]'s, as in every report.

use std::fmt::Write as _;

use super::CompareArgs;
use super::matrix::{Case, Cases, Outcome};
use crate::cluster::Settings;
use crate::stats::Report;
use crate::versus::Round;
use crate::versus::table::{self, median, mib, ratio, x};

/// A figure the tables compare: one above zero (zero reads as not measured).
fn positive(v: Option<f64>) -> Option<f64> {
    v.filter(|v| *v > 0.0)
}

/// Reads one figure of a system's outcome.
type Figure = fn(&Outcome) -> f64;

/// The figure of one system, or "-" when that system did not run.
fn cell(o: Option<&Outcome>, f: Figure, digits: usize) -> (String, Option<f64>) {
    match o.map(f) {
        Some(v) => (format!("{v:.digits$}"), Some(v)),
        None => ("-".to_string(), None),
    }
}

/// A case's figure on one system: "unsupported" when the system lacks the service, "-"
/// when the case did not run.
fn show(r: &Option<Report>, c: &Option<Case>, f: &dyn Fn(&Report) -> f64, d: usize) -> String {
    match (r, c) {
        (Some(r), _) => format!("{:.d$}", f(r)),
        (None, Some(c)) if c.unsupported.is_some() => "unsupported".to_string(),
        _ => "-".to_string(),
    }
}

/// Renders the report.
pub fn markdown(
    date: &str,
    s: &Settings,
    a: &CompareArgs,
    outcomes: &[(String, Outcome)],
) -> String {
    let find = |n: &str| outcomes.iter().find(|(k, _)| k == n).map(|(_, o)| o);
    let (etcd, oxcd) = (find("etcd"), find("oxcd"));
    let mut md = String::new();
    let _ = writeln!(md, "# oxcd vs etcd — {date}\n");
    let _ = writeln!(
        md,
        "3 members each on loopback, one system after the other, data dirs on the same disk \
         ({}); heartbeat {} ms, election {} ms, snapshot count {}, fsync on (both defaults). \
         Load from `oxcd-bench compare --scale {}` in one process on the same machine \
         ({} cores); connections spread over the three members. etcd: `{}`.\n",
        a.dir.display(),
        s.heartbeat_ms,
        s.election_ms,
        s.snapshot_count,
        a.scale,
        table::cores(),
        a.etcd.display(),
    );
    let _ = writeln!(
        md,
        "| workload | etcd req/s | oxcd req/s | ratio | etcd p99 ms | oxcd p99 ms | ratio (lower is better) | failed etcd/oxcd |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|");
    let names: Vec<String> = outcomes
        .first()
        .map(|(_, o)| o.cases.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    for name in &names {
        let case = |o: Option<&Outcome>| {
            o.and_then(|o| o.cases.iter().find(|c| &c.name == name))
                .cloned()
        };
        let (ce, co) = (case(etcd), case(oxcd));
        let rep = |c: &Option<Case>| c.as_ref().and_then(|c| c.report.clone());
        let (re, ro) = (rep(&ce), rep(&co));
        let qps = |r: &Report| r.qps;
        let p99 = |r: &Report| r.latency_ms.p99;
        let v = |r: &Option<Report>, f: &dyn Fn(&Report) -> f64| positive(r.as_ref().map(f));
        let failed = |r: &Option<Report>| {
            r.as_ref()
                .map(|r| r.failed.to_string())
                .unwrap_or("-".into())
        };
        let _ = writeln!(
            md,
            "| {name} | {} | {} | {} | {} | {} | {} | {}/{} |",
            show(&re, &ce, &qps, 0),
            show(&ro, &co, &qps, 0),
            x(ratio(v(&ro, &qps), v(&re, &qps))),
            show(&re, &ce, &p99, 2),
            show(&ro, &co, &p99, 2),
            x(ratio(v(&ro, &p99), v(&re, &p99))),
            failed(&re),
            failed(&ro),
        );
    }
    events_table(&mut md, &names, etcd, oxcd);
    cpu_table(&mut md, &names, etcd, oxcd);
    let loaded = etcd.or(oxcd).map(|o| o.loaded_keys).unwrap_or(0);
    let _ = writeln!(
        md,
        "\n| resource (after loading {loaded} keys, 16 B keys, 128 B values) | etcd | oxcd | ratio (lower is better) |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|");
    let rows: [(&str, Figure, usize); 7] = [
        (
            "peak RSS of the largest member, MiB",
            |o| mib(o.peak_rss_bytes),
            1,
        ),
        (
            "data dir of the largest member, MiB",
            |o| mib(o.data_bytes),
            1,
        ),
        (
            "  the same, disk blocks taken (du), MiB",
            |o| mib(o.data_blocks_bytes),
            1,
        ),
        (
            "data dir of the largest member after compaction and defrag, MiB",
            |o| mib(o.data_bytes_defragmented),
            1,
        ),
        (
            "  the same, disk blocks taken (du), MiB",
            |o| mib(o.data_blocks_bytes_defragmented),
            1,
        ),
        (
            "follower restart until it serves the keys, s",
            |o| o.restart_secs,
            2,
        ),
        (
            "load time (txns of 100 puts, 100 clients), s",
            |o| o.load.total_secs,
            2,
        ),
    ];
    for (label, f, digits) in rows {
        let (es, ev) = cell(etcd, f, digits);
        let (os, ov) = cell(oxcd, f, digits);
        let rt = x(ratio(positive(ov), positive(ev)));
        let _ = writeln!(md, "| {label} | {es} | {os} | {rt} |");
    }
    md
}

/// (oxcd/etcd of case `name`'s rate: events per second where it counts them, else
/// requests per second; oxcd/etcd of its p99 latency), when both systems ran it.
/// One round's oxcd/etcd ratios of a workload: rate, p50, p99, and the members' CPU per
/// request.
struct Ratios([Option<f64>; 4]);

fn ratios(r: &Round<Cases>, name: &str) -> Option<Ratios> {
    let case = |system: &str| r.of(system)?.1.iter().find(|c| c.name == name);
    let (e, o) = (case("etcd")?, case("oxcd")?);
    let (er, or) = (e.report.as_ref()?, o.report.as_ref()?);
    let rate = |r: &Report| r.extra.get("events/sec").copied().unwrap_or(r.qps);
    Some(Ratios([
        ratio(Some(rate(or)), Some(rate(er))),
        ratio(Some(or.latency_ms.p50), Some(er.latency_ms.p50)),
        ratio(Some(or.latency_ms.p99), Some(er.latency_ms.p99)),
        ratio(o.members_cpu_us, e.members_cpu_us),
    ]))
}

/// Every round's oxcd/etcd ratios of each workload, and their median: what one noisy
/// round cannot tell.
pub fn rounds_table(md: &mut String, rounds: &[Round<Cases>]) {
    let names: Vec<String> = rounds
        .first()
        .and_then(|r| r.0.first())
        .map(|Cases(_, cases)| cases.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    let _ = writeln!(
        md,
        "\n{} rounds, the systems' order alternating. Rate: events/s for the watch rows that \
         count events, else req/s. CPU: the members' CPU time per request.\n",
        rounds.len()
    );
    let _ = writeln!(
        md,
        "| workload | rate ratio per round | median | p50 ratio per round (lower is better) \
         | median | p99 ratio per round (lower is better) | median | CPU ratio per round \
         (lower is better) | median |"
    );
    let _ = writeln!(md, "|---|---|---:|---|---:|---|---:|---|---:|");
    for name in &names {
        let per: Vec<Ratios> = rounds.iter().filter_map(|r| ratios(r, name)).collect();
        if per.is_empty() {
            continue;
        }
        let mut row = format!("| {name} |");
        for i in 0..4 {
            let list = per.iter().map(|p| x(p.0[i])).collect::<Vec<_>>().join(", ");
            let mid = x(median(per.iter().filter_map(|p| p.0[i]).collect()));
            let _ = write!(row, " {list} | {mid} |");
        }
        let _ = writeln!(md, "{row}");
    }
}

/// The rows measured with auth off and again with auth on.
const AUTH_PAIRS: [(&str, &str); 2] = [
    (
        "put, 1000 clients / 100 conns",
        "auth: put, 1000 clients / 100 conns",
    ),
    (
        "range linearizable, 1000 clients / 100 conns",
        "auth: range linearizable, 1000 clients / 100 conns",
    ),
];

/// The cost of auth on each system: its req/s with auth on over its req/s with auth off
/// (1.00x: auth costs nothing), every round and the median.
pub fn auth_cost_table(md: &mut String, rounds: &[Round<Cases>]) {
    let on_off = |r: &Round<Cases>, system: &str, off: &str, on: &str| {
        let cases = r.of(system)?;
        let (off, on) = (cases.report(off)?, cases.report(on)?);
        ratio(Some(on.qps), Some(off.qps))
    };
    let mut rows = Vec::new();
    for (off, on) in AUTH_PAIRS {
        let mut cells = Vec::new();
        for system in ["etcd", "oxcd"] {
            let per: Vec<f64> = rounds
                .iter()
                .filter_map(|r| on_off(r, system, off, on))
                .collect();
            let list = per
                .iter()
                .map(|v| x(Some(*v)))
                .collect::<Vec<_>>()
                .join(", ");
            cells.push(format!("{list} | {}", x(median(per))));
        }
        if !cells.iter().all(|c| c.starts_with(" |")) {
            rows.push(format!("| {off} | {} |", cells.join(" | ")));
        }
    }
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "
The cost of auth: req/s with auth on (a user with a role granting every key, a \
         simple token) over req/s with auth off, each system against itself.\n"
    );
    let _ = writeln!(
        md,
        "| workload | etcd on/off per round | median | oxcd on/off per round | median |"
    );
    let _ = writeln!(md, "|---|---|---:|---|---:|");
    for r in rows {
        let _ = writeln!(md, "{r}");
    }
}

/// The watch rows' delivery: events per second (from the first put to the last event
/// counted) and events received of those expected, for each case that reports them.
fn events_table(md: &mut String, names: &[String], etcd: Option<&Outcome>, oxcd: Option<&Outcome>) {
    let extra = |o: Option<&Outcome>, name: &String, key: &str| {
        o.and_then(|o| o.cases.iter().find(|c| &c.name == name))
            .and_then(|c| c.report.as_ref())
            .and_then(|r| r.extra.get(key).copied())
    };
    let rows: Vec<&String> = names
        .iter()
        .filter(|n| {
            extra(etcd, n, "events/sec")
                .or(extra(oxcd, n, "events/sec"))
                .is_some()
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "\n| watch delivery | etcd events/s | oxcd events/s | ratio | etcd received/expected | oxcd received/expected |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|");
    let show = |v: Option<f64>| v.map(|v| format!("{v:.0}")).unwrap_or("-".into());
    for name in rows {
        let (e, o) = (
            extra(etcd, name, "events/sec"),
            extra(oxcd, name, "events/sec"),
        );
        let got = |sys| {
            format!(
                "{}/{}",
                show(extra(sys, name, "events received")),
                show(extra(sys, name, "events expected"))
            )
        };
        let _ = writeln!(
            md,
            "| {name} | {} | {} | {} | {} | {} |",
            show(e),
            show(o),
            x(ratio(positive(o), positive(e))),
            got(etcd),
            got(oxcd),
        );
    }
}

/// CPU time per request: the three members together, and the load generator, which
/// shares the machine's cores with them (what it uses bounds what any server can reach).
fn cpu_table(md: &mut String, names: &[String], etcd: Option<&Outcome>, oxcd: Option<&Outcome>) {
    let _ = writeln!(
        md,
        "\n| CPU per request, µs | etcd members | oxcd members | ratio (lower is better) | in the kernel: etcd | oxcd | load generator with etcd | with oxcd |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for name in names {
        let find = |o: &Outcome| o.cases.iter().find(|c| &c.name == name).cloned();
        let (ce, co) = (etcd.and_then(find), oxcd.and_then(find));
        let (ce, co) = (ce.as_ref(), co.as_ref());
        let fig = |c: Option<&Case>, f: fn(&Case) -> Option<f64>| c.and_then(f);
        let members = |c: &Case| c.members_cpu_us;
        let bench = |c: &Case| c.bench_cpu_us;
        let kernel = |c: &Case| c.members_kernel_cpu_us;
        let (me, mo) = (fig(ce, members), fig(co, members));
        if me.is_none() && mo.is_none() {
            continue;
        }
        let show = |v: Option<f64>| v.map(|v| format!("{v:.0}")).unwrap_or("-".into());
        let _ = writeln!(
            md,
            "| {name} | {} | {} | {} | {} | {} | {} | {} |",
            show(me),
            show(mo),
            x(ratio(positive(mo), positive(me))),
            show(fig(ce, kernel)),
            show(fig(co, kernel)),
            show(fig(ce, bench)),
            show(fig(co, bench)),
        );
    }
}
