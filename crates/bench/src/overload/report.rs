//! The overload benchmark's markdown report: per round, each system's leader under the
//! storm of large ranges (its peak RSS, the ranges served and refused, elections) and
//! the small puts and lease calls beside it, calm and in the storm.

use std::fmt::Write as _;

use super::{Outcome, OverloadArgs};
use crate::versus::Round;
use crate::versus::table::{Compared, Num, Text, binaries, cores, round_table, rounds_table};

const NUMBERS: [Num<Outcome>; 17] = [
    (
        "leader's peak RSS in the storm, MiB",
        |o| Some(o.peak_rss_mib),
        0,
        true,
    ),
    (
        "leader's RSS before the storm, MiB",
        |o| Some(o.rss_before_mib),
        0,
        false,
    ),
    ("ranges served", |o| Some(o.ranges.ok as f64), 0, false),
    (
        "ranges refused (too many requests)",
        |o| Some(o.ranges.refused as f64),
        0,
        false,
    ),
    (
        "MiB served by the ranges",
        |o| Some(o.ranges.mib_served),
        0,
        false,
    ),
    (
        "range p50, ms",
        |o| Some(o.ranges.latency.latency_ms.p50),
        0,
        true,
    ),
    (
        "put p50 calm, ms",
        |o| Some(o.calm.puts.latency_ms.p50),
        2,
        true,
    ),
    (
        "put p99 calm, ms",
        |o| Some(o.calm.puts.latency_ms.p99),
        2,
        true,
    ),
    (
        "put p50 in the storm, ms",
        |o| Some(o.storm.puts.latency_ms.p50),
        2,
        true,
    ),
    (
        "put p99 in the storm, ms",
        |o| Some(o.storm.puts.latency_ms.p99),
        2,
        true,
    ),
    (
        "put max in the storm, ms",
        |o| Some(o.storm.puts.latency_ms.max),
        1,
        true,
    ),
    (
        "lease grant+revoke p99 calm, ms",
        |o| Some(o.calm.leases.latency_ms.p99),
        2,
        true,
    ),
    (
        "lease grant+revoke p99 in the storm, ms",
        |o| Some(o.storm.leases.latency_ms.p99),
        2,
        true,
    ),
    (
        "puts failed in the storm",
        |o| Some(o.storm.puts.failed as f64),
        0,
        false,
    ),
    (
        "slow watchers open",
        |o| Some(o.slow_watchers as f64),
        0,
        false,
    ),
    (
        "idle connections open",
        |o| Some(o.idle_conns as f64),
        0,
        false,
    ),
    (
        "elections in the storm (term after - before)",
        |o| Some(o.term_after.saturating_sub(o.term_before) as f64),
        0,
        false,
    ),
];

const TEXTS: [Text<Outcome>; 2] = [
    ("leader running after the storm", |o| {
        if o.survived { "yes" } else { "no" }.to_string()
    }),
    ("other range errors", |o| {
        o.ranges
            .errors
            .iter()
            .map(|(e, n)| format!("{n}x {}", e.chars().take(60).collect::<String>()))
            .collect::<Vec<_>>()
            .join("; ")
    }),
];

const COMPARED: [Compared<Outcome>; 3] = [
    ("leader's peak RSS in the storm", |o| Some(o.peak_rss_mib)),
    ("put p99 in the storm", |o| {
        Some(o.storm.puts.latency_ms.p99)
    }),
    ("lease grant+revoke p99 in the storm", |o| {
        Some(o.storm.leases.latency_ms.p99)
    }),
];

pub fn markdown(
    date: &str,
    a: &OverloadArgs,
    versions: &[(String, String, String)],
    rounds: &[Round<Outcome>],
) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# oxcd vs etcd — a storm of large ranges, {date}\n");
    let _ = writeln!(
        md,
        "3 members each on loopback, one system after the other, {} cores. {} MiB of {} KiB \
         values under `big/`. On the leader: a calm window of {} s (one writer, 100-byte puts \
         at 100/s; one client granting and revoking a lease at 10/s), then as long with {} \
         clients each ranging over all of `big/` again and again (a refused range retried \
         after 50 ms), {} watch streams that stop reading (64 KiB windows) on keys a \
         second writer puts 300-byte values to at 100/s, and {} new connections left idle after the HTTP/2 preface. oxcd runs with `--max-inflight-range-bytes` = {} MiB; etcd has no \
         such bound.\n",
        cores(),
        a.mib,
        a.value_kib,
        a.secs,
        a.rangers,
        a.slow_watchers,
        a.idle_conns,
        a.oxcd_bound_mib,
    );
    binaries(&mut md, versions);
    for (i, r) in rounds.iter().enumerate() {
        round_table(&mut md, i + 1, r, &NUMBERS, &TEXTS);
    }
    if rounds.len() > 1 {
        rounds_table(&mut md, rounds, &COMPARED, "lower is better");
    }
    md
}
