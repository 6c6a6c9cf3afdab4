//! The scale benchmark's markdown report: per round, every figure of each system at the
//! small and the large size, each system's large/small ratio (the target: p99 at most
//! 1.2x its own small figure) and oxcd/etcd at the large size.

use std::fmt::Write as _;

use super::{AtSize, Outcome, ScaleArgs};
use crate::versus::Round;
use crate::versus::table::{binaries, cores, met, mib, ratio, x};

/// A row: label, the figure at one size (none: not measured), its digits.
type Row = (&'static str, fn(&AtSize) -> Option<f64>, usize);

const ROWS: [Row; 15] = [
    ("keys", |s| Some(s.keys as f64), 0),
    ("key versions written", |s| Some(s.key_versions as f64), 0),
    ("load (both passes), s", |s| Some(s.load_secs), 1),
    (
        "database size after the load, MiB",
        |s| Some(mib(s.db_bytes)),
        0,
    ),
    (
        "data dir after the load, MiB",
        |s| Some(mib(s.data_dir_bytes)),
        0,
    ),
    (
        "put p99 at 1000 clients, ms",
        |s| s.put.as_ref().map(|r| r.latency_ms.p99),
        1,
    ),
    ("put rate, /s", |s| s.put.as_ref().map(|r| r.qps), 0),
    (
        "range p99 at 1000 clients (linearizable), ms",
        |s| s.range.as_ref().map(|r| r.latency_ms.p99),
        1,
    ),
    ("range rate, /s", |s| s.range.as_ref().map(|r| r.qps), 0),
    (
        "compaction of half the key versions, s",
        |s| s.compaction_secs,
        1,
    ),
    (
        "database in use after it, MiB",
        |s| Some(mib(s.db_in_use_after_compaction)),
        0,
    ),
    ("restart until serving every key, s", |s| s.restart_secs, 2),
    (
        "learner catch-up (add to promotion), s",
        |s| s.learner_catchup_secs,
        1,
    ),
    (
        "snapshot save, s",
        |s| (s.snapshot.error.is_none()).then_some(s.snapshot.secs),
        1,
    ),
    ("snapshot restore, s", |s| s.restore.secs, 1),
];

fn show(v: Option<f64>, digits: usize) -> String {
    v.map(|v| format!("{v:.digits$}"))
        .unwrap_or_else(|| "-".into())
}

fn round(md: &mut String, n: usize, r: &Round<Outcome>, a: &ScaleArgs) {
    let _ = writeln!(md, "\n## Round {n}: {}\n", r.order().join(", then "));
    let (e, o) = (r.of("etcd"), r.of("oxcd"));
    let (small, large) = (a.small_gib, a.gib);
    let _ = writeln!(
        md,
        "| | etcd {small} GiB | etcd {large} GiB | etcd {large}/{small} | oxcd {small} GiB | oxcd {large} GiB | oxcd {large}/{small} | oxcd/etcd at {large} GiB |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for (label, f, digits) in ROWS {
        let at = |s: Option<&Outcome>, large: bool| {
            s.and_then(|s| {
                if large {
                    Some(&s.large)
                } else {
                    s.small.as_ref()
                }
            })
            .and_then(f)
        };
        let _ = writeln!(
            md,
            "| {label} | {} | {} | {} | {} | {} | {} | {} |",
            show(at(e, false), digits),
            show(at(e, true), digits),
            x(ratio(at(e, true), at(e, false))),
            show(at(o, false), digits),
            show(at(o, true), digits),
            x(ratio(at(o, true), at(o, false))),
            x(ratio(at(o, true), at(e, true))),
        );
    }
    for s in [e, o].into_iter().flatten() {
        for (size, errors) in [
            ("small", s.small.as_ref().map(|x| &x.errors)),
            ("large", Some(&s.large.errors)),
        ] {
            for err in errors.into_iter().flatten() {
                let _ = writeln!(md, "\n- {} at the {size} size: {err}", s.system);
            }
        }
    }
    if let Some(o) = o {
        let p99 = |s: &AtSize, f: fn(&AtSize) -> Option<f64>| f(s);
        let put = |s: &AtSize| s.put.as_ref().map(|r| r.latency_ms.p99);
        let range = |s: &AtSize| s.range.as_ref().map(|r| r.latency_ms.p99);
        if let Some(sm) = &o.small {
            let within = |f: fn(&AtSize) -> Option<f64>| {
                ratio(p99(&o.large, f), p99(sm, f)).is_some_and(|r| r <= 1.2)
            };
            let _ = writeln!(
                md,
                "\noxcd's put p99 at {large} GiB within 1.2x its {small} GiB figure: {}; range p99: {}.",
                met(within(put)),
                met(within(range))
            );
        }
    }
}

pub fn markdown(
    date: &str,
    a: &ScaleArgs,
    versions: &[(String, String, String)],
    rounds: &[Round<Outcome>],
) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Scale: {} GiB against {} GiB — {date}\n",
        a.gib, a.small_gib
    );
    let _ = writeln!(
        md,
        "One member each on loopback (a learner joins it for the catch-up), one system after \
         the other, data dirs on the same disk, {} cores shared with the load. Quota raised \
         to twice the database (at least 8 GiB), snapshot count 10000 on both. The fill: keys \
         of 16 B with values of {} B (the same bytes in every value; neither system \
         compresses), in txns of 100 puts from 16 clients, every key written twice; the \
         compaction at the last revision removes the first version of each. Latency rows: \
         {} puts of 256 B over 100 000 random 8-byte keys, and {} linearizable reads of one \
         fill key, each from 1000 clients over 100 connections.\n",
        cores(),
        a.value_bytes,
        a.requests,
        a.requests
    );
    let _ = writeln!(
        md,
        "\"Database in use\" is Status.dbSizeInUse: etcd's file less its free pages; oxcd \
         reports its file's size there (redb's free pages are not counted without a walk \
         of every tree).\n"
    );
    binaries(&mut md, versions);
    for (i, r) in rounds.iter().enumerate() {
        round(&mut md, i + 1, r, a);
    }
    md
}
