//! The gateway benchmark's markdown report: the settings, one table per round with etcd
//! and oxcd side by side and the oxcd/etcd ratios, the targets (gateway put and range
//! at least 2x etcd's throughput, a scrape faster than etcd's), and over several rounds
//! the median ratios.

use std::fmt::Write as _;

use super::{GatewayArgs, Outcome};
use crate::versus::Round;
use crate::versus::table::{
    Compared, Num, Text, binaries, cores, met, ratio, round_table, rounds_table, x,
};

const NUMBERS: [Num<Outcome>; 10] = [
    ("**gateway put, req/s**", |o| Some(o.put.per_sec), 0, true),
    ("gateway put p50, ms", |o| Some(o.put.p50_ms), 2, true),
    ("gateway put p99, ms", |o| Some(o.put.p99_ms), 2, true),
    (
        "**gateway range, req/s**",
        |o| Some(o.range.per_sec),
        0,
        true,
    ),
    ("gateway range p50, ms", |o| Some(o.range.p50_ms), 2, true),
    ("gateway range p99, ms", |o| Some(o.range.p99_ms), 2, true),
    (
        "**/metrics scrape p50, ms**",
        |o| Some(o.scrape.p50_ms),
        2,
        true,
    ),
    (
        "/metrics scrape p99, ms",
        |o| Some(o.scrape.p99_ms),
        2,
        true,
    ),
    (
        "/metrics scrapes per second",
        |o| Some(o.scrape.per_sec),
        0,
        true,
    ),
    (
        "/metrics size, KiB",
        |o| Some(o.scrape_bytes as f64 / 1024.0),
        1,
        true,
    ),
];

const TEXTS: [Text<Outcome>; 3] = [
    ("put: ok / failed", |o| {
        format!("{} / {}", o.put.ok, o.put.failed)
    }),
    ("range: ok / failed", |o| {
        format!("{} / {}", o.range.ok, o.range.failed)
    }),
    ("first failure", |o| {
        o.put
            .first_error
            .clone()
            .or(o.range.first_error.clone())
            .map(|e| e.chars().take(80).collect())
            .unwrap_or_else(|| "none".into())
    }),
];

const COMPARED: [Compared<Outcome>; 3] = [
    ("gateway put, req/s", |o| Some(o.put.per_sec)),
    ("gateway range, req/s", |o| Some(o.range.per_sec)),
    ("/metrics scrape p50, ms", |o| Some(o.scrape.p50_ms)),
];

/// The report of every round.
pub fn markdown(
    date: &str,
    a: &GatewayArgs,
    versions: &[(String, String, String)],
    rounds: &[Round<Outcome>],
) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# oxcd vs etcd — the JSON gateway and /metrics, {date}\n"
    );
    let _ = writeln!(
        md,
        "{} member(s) each on loopback, one system after the other, {} cores; {} HTTP/1.1 \
         clients, each on its own keep-alive connection, for {} s per workload (puts of \
         {} B values over 1,000 keys per client, then ranges of one key); then {} \
         `/metrics` scrapes one after the other. The load generator runs on the same \
         machine.\n",
        a.members,
        cores(),
        a.clients,
        a.secs,
        a.value_size,
        a.scrapes
    );
    binaries(&mut md, versions);
    for (i, r) in rounds.iter().enumerate() {
        round_table(&mut md, i + 1, r, &NUMBERS, &TEXTS);
        if let (Some(e), Some(o)) = (r.of("etcd"), r.of("oxcd")) {
            let put = ratio(Some(o.put.per_sec), Some(e.put.per_sec));
            let range = ratio(Some(o.range.per_sec), Some(e.range.per_sec));
            let scrape = ratio(Some(o.scrape.p50_ms), Some(e.scrape.p50_ms));
            let _ = writeln!(
                md,
                "\nTargets: gateway put ≥ 2x etcd's: {}, {}; range ≥ 2x: {}, {}; a scrape \
                 faster than etcd's: {}, {}.",
                x(put),
                met(put.is_some_and(|v| v >= 2.0)),
                x(range),
                met(range.is_some_and(|v| v >= 2.0)),
                x(scrape),
                met(scrape.is_some_and(|v| v < 1.0)),
            );
        }
    }
    if rounds.len() > 1 {
        rounds_table(
            &mut md,
            rounds,
            &COMPARED,
            "throughput: higher is better; scrape time: lower is better",
        );
    }
    md
}
