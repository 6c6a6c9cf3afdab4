//! The learner benchmark's markdown report: the settings, one table per round with etcd
//! and oxcd side by side and the oxcd/etcd ratios, what was odd (term or leader
//! changes, failed writes or promotions), and over several rounds the median ratios.

use std::fmt::Write as _;

use super::{LearnerArgs, Outcome};
use crate::versus::table::{Compared, Num, Text, met, mib, round_table, rounds_table};
use crate::versus::{Bench, Round};

const NUMBERS: [Num<Outcome>; 16] = [
    (
        "**catch-up: MemberAdd → MemberPromote accepted, s**",
        |o| Some(o.catchup_secs),
        2,
        true,
    ),
    (
        "learner first answered Status, s after MemberAdd",
        |o| o.learner_status_secs,
        2,
        true,
    ),
    (
        "learner served every fill key, s after MemberAdd",
        |o| o.learner_all_keys_secs,
        2,
        true,
    ),
    (
        "write p50 during catch-up, ms",
        |o| Some(o.during.p50_ms),
        2,
        true,
    ),
    (
        "**write p99 during catch-up, ms**",
        |o| Some(o.during.p99_ms),
        2,
        true,
    ),
    (
        "write max during catch-up, ms",
        |o| Some(o.during.max_ms),
        2,
        true,
    ),
    (
        "write p99 from MemberAdd until the learner served every key, ms",
        |o| o.until_served.as_ref().map(|w| w.p99_ms),
        2,
        true,
    ),
    (
        "baseline write p50 (before MemberAdd), ms",
        |o| Some(o.baseline.p50_ms),
        2,
        true,
    ),
    (
        "baseline write p99 (before MemberAdd), ms",
        |o| Some(o.baseline.p99_ms),
        2,
        true,
    ),
    (
        "baseline write p99 (every put before MemberAdd), ms",
        |o| Some(o.baseline_all.p99_ms),
        2,
        true,
    ),
    (
        "write p99 during catch-up / baseline p99",
        |o| (o.baseline.p99_ms > 0.0).then(|| o.during.p99_ms / o.baseline.p99_ms),
        2,
        false,
    ),
    (
        "write p99 until served / baseline p99",
        |o| {
            let until = o.until_served.as_ref()?;
            (o.baseline.p99_ms > 0.0).then(|| until.p99_ms / o.baseline.p99_ms)
        },
        2,
        false,
    ),
    (
        "fill, MiB/s of values",
        |o| Some(o.fill.mib_per_sec()),
        1,
        true,
    ),
    ("fill, s", |o| Some(o.fill.secs), 1, true),
    (
        "leader data dir after catch-up (du), MiB",
        |o| Some(mib(o.leader_du_bytes)),
        1,
        true,
    ),
    (
        "learner data dir after catch-up (du), MiB",
        |o| Some(mib(o.learner_du_bytes)),
        1,
        true,
    ),
];

const TEXTS: [Text<Outcome>; 8] = [
    ("background puts during catch-up: ok / failed", |o| {
        format!("{} / {}", o.during.ok, o.during.failed())
    }),
    ("baseline window: ok / failed puts", |o| {
        format!(
            "{:.1} s: {} / {}",
            o.baseline.secs,
            o.baseline.ok,
            o.baseline.failed()
        )
    }),
    ("every put before MemberAdd: ok / failed puts", |o| {
        format!(
            "{:.1} s: {} / {}",
            o.baseline_all.secs,
            o.baseline_all.ok,
            o.baseline_all.failed()
        )
    }),
    ("promotions refused as not in sync (every 100 ms)", |o| {
        o.promote_refused.to_string()
    }),
    ("promotions failed otherwise", |o| {
        o.promote_errors.values().sum::<u64>().to_string()
    }),
    ("leader term before → after", |o| {
        format!("{} → {}", o.term_before, o.term_after)
    }),
    ("term or leader changed during catch-up", |o| {
        match (o.term_changed(), o.leader_changed()) {
            (false, false) => "no".into(),
            (true, false) => "**term changed**".into(),
            (_, true) => "**leader changed**".into(),
        }
    }),
    ("fill puts (retried)", |o| {
        format!("{} ({})", o.fill.puts, o.fill.retried)
    }),
];

/// One round's table, the targets and what was odd.
fn round(md: &mut String, n: usize, r: &Round<Outcome>) {
    round_table(md, n, r, &NUMBERS, &TEXTS);
    if let (Some(e), Some(o)) = (r.of("etcd"), r.of("oxcd")) {
        let catchup = o.catchup_secs / e.catchup_secs;
        let _ = writeln!(
            md,
            "\nTargets: catch-up ≤ 0.5x etcd's: {:.2}x, {}; write p99 during catch-up ≤ etcd's: \
             {:.2} vs {:.2} ms, {}; leader's term unchanged: {}.",
            catchup,
            met(catchup <= 0.5),
            o.during.p99_ms,
            e.during.p99_ms,
            met(o.during.p99_ms <= e.during.p99_ms),
            met(!o.term_changed()),
        );
    }
    notes(md, r);
}

/// What was odd in a round: term or leader changes, failures.
fn notes(md: &mut String, r: &Round<Outcome>) {
    let mut lines = Vec::new();
    for o in &r.0 {
        for c in &o.term_changes {
            lines.push(format!(
                "{}: at {:.2} s after MemberAdd the first leader reported term {}, leader {}",
                o.system, c.at_secs, c.term, c.leader
            ));
        }
        if o.leader_after != o.leader_before {
            lines.push(format!(
                "{}: leader {} before, {} after",
                o.system, o.leader_before, o.leader_after
            ));
        }
        for (e, n) in &o.promote_errors {
            lines.push(format!("{}: MemberPromote failed {n}x: {e}", o.system));
        }
        for (e, n) in &o.during.errors {
            lines.push(format!(
                "{}: {n} background puts failed during catch-up: {e}",
                o.system
            ));
        }
        for (e, n) in &o.baseline_all.errors {
            lines.push(format!(
                "{}: {n} background puts failed before MemberAdd: {e}",
                o.system
            ));
        }
        if o.status_failures > 0 {
            lines.push(format!(
                "{}: {} Status polls of the leader failed during catch-up",
                o.system, o.status_failures
            ));
        }
        if o.learner_all_keys_secs.is_none() {
            lines.push(format!(
                "{}: the promoted learner did not serve all {} fill keys within 60 s",
                o.system, o.fill.puts
            ));
        }
    }
    crate::versus::table::notes(md, &lines);
}

/// The rows of the rounds table.
const COMPARED: [Compared<Outcome>; 3] = [
    ("catch-up time", |o| Some(o.catchup_secs)),
    ("write p99 during catch-up", |o| Some(o.during.p99_ms)),
    ("baseline write p99", |o| Some(o.baseline.p99_ms)),
];

/// Renders the report. `versions`: (system, binary, its `--version`).
pub fn markdown(
    date: &str,
    a: &LearnerArgs,
    versions: &[(String, String, String)],
    rounds: &[Round<Outcome>],
) -> String {
    let s = a.settings();
    let mut md = String::new();
    let _ = writeln!(md, "# Learner catch-up: oxcd vs etcd — {date}\n");
    if let Some(b) = &a.learner_binary {
        let _ = writeln!(
            md,
            "**The learner runs `{}`, not the system's own binary** (`--learner-binary`).\n",
            b.display()
        );
    }
    let _ = writeln!(
        md,
        "Per system, one after the other, data under `{}` (the same disk): 3 members on \
         loopback (heartbeat {} ms, election {} ms, snapshot count {}, quota {} GiB, \
         fsync on); {} MiB written to the leader as {} puts of unique keys `fill/<n>` with \
         {} B incompressible values ({} concurrent puts over {} connections); {} s later \
         {} writers (a connection each, to the leader) put {} B values at {} puts/s in \
         all. After {} s of that, t0: MemberAdd of a learner on the leader, then its \
         process started with `--initial-cluster-state existing` and every member in \
         `--initial-cluster`; MemberPromote on the leader every 100 ms until accepted: \
         t1. Both systems accept a promotion once the learner's match index reaches 90% \
         of the leader's (etcd's rule), so catch-up = t1 - t0 means the same on both. \
         Writes during catch-up: the background puts that finished in [t0, t1], and \
         (the writers going on) until the learner served every fill key; \
         baseline: those of as many seconds before t0 (at most {} s), and all those \
         before t0. The learner's Status and its count of the fill keys (serializable) \
         are polled from t0 until they answer, past t1 if need be. The first \
         leader's Status polled every 250 ms from t0 to t1 for term and leader changes. \
         Load from `oxcd-bench learner-catchup` in one process on the same machine ({} \
         cores). The members' logs are kept in `<dir>/round<N>-<system>/`.\n",
        a.dir().display(),
        s.heartbeat_ms,
        s.election_ms,
        s.snapshot_count,
        s.quota_bytes >> 30,
        a.data_mb,
        a.fill_puts(),
        a.value_size,
        a.fill_clients,
        a.fill_conns,
        a.settle_secs,
        a.writers,
        a.write_value_size,
        a.write_rate,
        a.baseline_secs,
        a.baseline_secs,
        crate::versus::table::cores(),
    );
    crate::versus::table::binaries(&mut md, versions);
    for (i, r) in rounds.iter().enumerate() {
        round(&mut md, i + 1, r);
    }
    if rounds.len() > 1 {
        rounds_table(&mut md, rounds, &COMPARED, "lower is better");
    }
    md
}
