//! The big-range benchmark's markdown report: per round, etcd's Range against oxcd's
//! Range and RangeStream (time and the member's RSS growth), and the keys-only reads;
//! the targets of issue 34 (a full range's RSS growth ≤ 1/10 of etcd's Range at no more
//! time; keys-only ≥ 3x etcd's speed) checked against oxcd's stream.

use std::fmt::Write as _;

use super::{BigRangeArgs, Outcome};
use crate::versus::Round;
use crate::versus::table::{
    Compared, Num, Text, binaries, cores, met, ratio, round_table, rounds_table, x,
};

const NUMBERS: [Num<Outcome>; 8] = [
    ("full Range, s", |o| Some(o.full_range.secs), 2, true),
    (
        "full Range, RSS growth MiB",
        |o| Some(o.full_range.rss_growth_mib),
        0,
        true,
    ),
    (
        "full RangeStream (oxcd), s",
        |o| o.full_stream.as_ref().map(|r| r.secs),
        2,
        false,
    ),
    (
        "full RangeStream (oxcd), RSS growth MiB",
        |o| o.full_stream.as_ref().map(|r| r.rss_growth_mib),
        0,
        false,
    ),
    (
        "keys-only Range, s",
        |o| Some(o.keys_only_range.secs),
        3,
        true,
    ),
    (
        "keys-only RangeStream (oxcd), s",
        |o| o.keys_only_stream.as_ref().map(|r| r.secs),
        3,
        false,
    ),
    (
        "keys read by the keys-only Range",
        |o| Some(o.keys_only_range.keys as f64),
        0,
        false,
    ),
    ("load, s", |o| Some(o.load_secs), 1, true),
];

const TEXTS: [Text<Outcome>; 1] = [("errors", |o| {
    [
        &o.full_range.error,
        &o.full_stream.as_ref().and_then(|r| r.error.clone()),
        &o.keys_only_range.error,
    ]
    .iter()
    .filter_map(|e| e.as_ref())
    .map(|e| e.chars().take(60).collect::<String>())
    .collect::<Vec<_>>()
    .join("; ")
})];

const COMPARED: [Compared<Outcome>; 4] = [
    ("full range time (oxcd stream / etcd Range)", |o| {
        o.full_stream
            .as_ref()
            .map(|r| r.secs)
            .or(Some(o.full_range.secs))
    }),
    ("full range RSS growth (oxcd stream / etcd Range)", |o| {
        o.full_stream
            .as_ref()
            .map(|r| r.rss_growth_mib)
            .or(Some(o.full_range.rss_growth_mib))
    }),
    ("keys-only time (oxcd stream / etcd Range)", |o| {
        o.keys_only_stream
            .as_ref()
            .map(|r| r.secs)
            .or(Some(o.keys_only_range.secs))
    }),
    ("keys-only time (oxcd Range / etcd Range)", |o| {
        Some(o.keys_only_range.secs)
    }),
];

pub fn markdown(
    date: &str,
    a: &BigRangeArgs,
    versions: &[(String, String, String)],
    rounds: &[Round<Outcome>],
) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# oxcd vs etcd — a large range at once, {date}\n");
    let _ = writeln!(
        md,
        "One member each on loopback, one system after the other, {} cores. {} MiB of \
         {} KiB values under `big/`, then {} keys of 16 B under `small/`. A full range \
         of `big/` (etcd: Range; oxcd: Range and RangeStream), the member's peak RSS \
         reset before and read after; a keys-only range of `small/`, best of {}.\n",
        cores(),
        a.mib,
        a.value_kib,
        a.small_keys,
        a.repeats
    );
    binaries(&mut md, versions);
    for (i, r) in rounds.iter().enumerate() {
        round_table(&mut md, i + 1, r, &NUMBERS, &TEXTS);
        if let (Some(e), Some(o)) = (r.of("etcd"), r.of("oxcd"))
            && let (Some(fs), Some(ks)) = (&o.full_stream, &o.keys_only_stream)
        {
            let rss = ratio(Some(fs.rss_growth_mib), Some(e.full_range.rss_growth_mib));
            let time = ratio(Some(fs.secs), Some(e.full_range.secs));
            let keys = ratio(Some(e.keys_only_range.secs), Some(ks.secs));
            let _ = writeln!(
                md,
                "\nTargets: full range RSS growth (stream) ≤ 0.1x etcd's Range: {}, {}; its \
                 time ≤ etcd's: {}, {}; keys-only speed (stream) ≥ 3x etcd's: {}, {}.",
                x(rss),
                met(rss.is_some_and(|v| v <= 0.1)),
                x(time),
                met(time.is_some_and(|v| v <= 1.0)),
                x(keys),
                met(keys.is_some_and(|v| v >= 3.0)),
            );
        }
    }
    if rounds.len() > 1 {
        rounds_table(&mut md, rounds, &COMPARED, "lower is better");
    }
    md
}
