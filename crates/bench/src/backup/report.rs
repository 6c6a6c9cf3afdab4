//! The backup benchmark's markdown report: the settings (disk, data size, load), one
//! table per round with etcd and oxcd side by side and the oxcd/etcd ratios, the
//! targets, what failed, and over several rounds each ratio's median.

use std::fmt::Write as _;

use super::{BackupArgs, Outcome, defrag};
use crate::load::Window;
use crate::versus::table::{Compared, Num, Text, met, mib, ratio, round_table, rounds_table};
use crate::versus::{Bench, Round};

const NUMBERS: [Num<Outcome>; 19] = [
    (
        "**snapshot save, MB/s of database**",
        |o| o.snapshot.mb_per_sec(),
        1,
        true,
    ),
    (
        "snapshot save, MB/s of live values",
        live_mb_per_sec,
        1,
        true,
    ),
    (
        "snapshot save, s",
        |o| o.snapshot.error.is_none().then_some(o.snapshot.secs),
        2,
        true,
    ),
    (
        "snapshot file, MiB",
        |o| Some(mib(o.snapshot.file_bytes)),
        1,
        true,
    ),
    ("**restore, s**", |o| o.restore.secs, 2, true),
    (
        "restored data dir (du), MiB",
        |o| o.restore.secs.map(|_| mib(o.restore.du_bytes)),
        1,
        true,
    ),
    ("defrag call, s", |o| o.defrag.secs, 2, true),
    (
        "database before defrag (Status), MiB",
        |o| Some(mib(o.defrag.db_bytes_before)),
        1,
        true,
    ),
    (
        "database after defrag (Status), MiB",
        |o| Some(mib(o.defrag.db_bytes_after)),
        1,
        true,
    ),
    (
        "**longest stretch of defrag without a successful put, ms**",
        |o| Some(o.defrag.stall_ms),
        1,
        true,
    ),
    (
        "longest write in flight during defrag (failed ones end at their timeout), ms",
        |o| some_puts(&o.defrag.during).map(|w| w.max_ms),
        1,
        true,
    ),
    (
        "write p99 during defrag, ms",
        |o| some_puts(&o.defrag.during).map(|w| w.p99_ms),
        2,
        true,
    ),
    (
        "write p99 before defrag (baseline), ms",
        |o| some_puts(&o.defrag.baseline).map(|w| w.p99_ms),
        2,
        true,
    ),
    (
        "write max before defrag (baseline), ms",
        |o| some_puts(&o.defrag.baseline).map(|w| w.max_ms),
        1,
        true,
    ),
    (
        "write max, puts sent in the 1 s after defrag, ms",
        |o| some_puts(&o.defrag.after).map(|w| w.max_ms),
        1,
        true,
    ),
    (
        "baseline puts/s",
        |o| Some(o.defrag.baseline.ok as f64 / o.defrag.baseline.secs.max(1e-9)),
        0,
        true,
    ),
    (
        "fill + overwrite, MiB/s of values",
        |o| {
            let bytes = o.fill.value_bytes + o.overwrite.value_bytes;
            Some(mib(bytes) / (o.fill.secs + o.overwrite.secs).max(1e-9))
        },
        1,
        true,
    ),
    ("compaction, s", |o| Some(o.compaction_secs), 2, true),
    (
        "database after fill and compaction (Status), MiB",
        |o| Some(mib(o.db_bytes_filled)),
        1,
        true,
    ),
];

const TEXTS: [Text<Outcome>; 5] = [
    ("snapshot: sha256 trailer", |o| match &o.snapshot.error {
        Some(e) => format!("**failed: {e}**"),
        None if o.snapshot.sha256_ok => format!("ok ({} messages)", o.snapshot.messages),
        None => "**wrong**".into(),
    }),
    ("restore", |o| match (&o.restore.note, o.restore.secs) {
        (Some(note), _) => note.clone(),
        (None, _) => format!("`{}`", o.restore.tool),
    }),
    (
        "defrag: puts in flight during it, ok / failed",
        |o| match &o.defrag.error {
            Some(e) => format!("**defrag failed: {e}**"),
            None => format!("{} / {}", o.defrag.during.ok, o.defrag.during.failed()),
        },
    ),
    ("failed puts, whole defrag run (of all)", |o| {
        let all = &o.defrag.all;
        let failed = all.failed();
        let text = format!("{failed} (of {})", all.ok + failed);
        if failed > 0 {
            format!("**{text}**")
        } else {
            text
        }
    }),
    ("live fill keys; compacted at revision", |o| {
        format!("{}; {}", o.live_keys, o.compacted_revision)
    }),
];

/// The live values' bytes (every fill key holds one) per second of the save, in MB:
/// the same data on both systems, whatever the size of their snapshot files.
fn live_mb_per_sec(o: &Outcome) -> Option<f64> {
    let secs = o.snapshot.mb_per_sec().map(|_| o.snapshot.secs)?;
    Some(o.fill.value_bytes as f64 / 1e6 / secs)
}

/// A window's figures, when any put finished in it.
fn some_puts(w: &Window) -> Option<&Window> {
    (w.ok > 0).then_some(w)
}

/// The rows of the rounds table.
const COMPARED: [Compared<Outcome>; 6] = [
    ("snapshot save, MB/s of database (higher is better)", |o| {
        o.snapshot.mb_per_sec()
    }),
    (
        "snapshot save, MB/s of live values (higher is better)",
        live_mb_per_sec,
    ),
    ("restore time", |o| o.restore.secs),
    ("writes held during defrag", |o| Some(o.defrag.stall_ms)),
    ("longest write during defrag", |o| {
        some_puts(&o.defrag.during).map(|w| w.max_ms)
    }),
    ("defrag call time", |o| o.defrag.secs),
];

/// The targets of a round both systems ran in.
fn targets(md: &mut String, e: &Outcome, o: &Outcome) {
    let show = |r: Option<f64>, ok: fn(f64) -> bool| match r {
        Some(r) => format!("{r:.2}x, {}", met(ok(r))),
        None => "not measured".into(),
    };
    let pause = |x: &Outcome| Some(x.defrag.stall_ms);
    // The target is oxcd's: writes go on while it defragments (etcd's fail by design).
    let failed = o.defrag.all.failed();
    let _ = writeln!(
        md,
        "\nTargets: snapshot MB/s ≥ 1x etcd's: {} (of live values, i.e. by time for the same \
         data: {}); restore time ≤ 1x etcd's: {}; longest stretch of defrag without a successful \
         put ≤ 0.1x etcd's: {}; no failed oxcd put: {}.",
        show(
            ratio(o.snapshot.mb_per_sec(), e.snapshot.mb_per_sec()),
            |r| { r >= 1.0 }
        ),
        show(ratio(live_mb_per_sec(o), live_mb_per_sec(e)), |r| r >= 1.0),
        show(ratio(o.restore.secs, e.restore.secs), |r| r <= 1.0),
        show(ratio(pause(o), pause(e)), |r| r <= 0.1),
        met(failed == 0),
    );
}

/// Failures of a round, by system.
fn notes(md: &mut String, r: &Round<Outcome>) {
    let mut lines = Vec::new();
    for o in &r.0 {
        let d = &o.defrag;
        for (label, w) in [("before", &d.baseline), ("during", &d.during)] {
            for (e, n) in &w.errors {
                lines.push(format!("{}: {n} puts failed {label} defrag: {e}", o.system));
            }
        }
        for (e, n) in &d.after.errors {
            lines.push(format!("{}: {n} puts failed after defrag: {e}", o.system));
        }
        if o.fill.retried + o.overwrite.retried > 0 {
            lines.push(format!(
                "{}: {} fill puts were sent again after failing",
                o.system,
                o.fill.retried + o.overwrite.retried
            ));
        }
    }
    crate::versus::table::notes(md, &lines);
}

/// Renders the report. `versions`: (system, binary, its `--version`).
pub fn markdown(
    date: &str,
    a: &BackupArgs,
    versions: &[(String, String, String)],
    rounds: &[Round<Outcome>],
) -> String {
    let s = a.settings();
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Snapshot, restore and defragmentation: oxcd vs etcd — {date}\n"
    );
    let _ = writeln!(
        md,
        "Per system, one after the other, data under `{}` on {} (the same disk for both \
         systems, the snapshot and the restored dir): {} on loopback \
         (heartbeat {} ms, election {} ms, snapshot count {}, quota {} GiB, fsync on). \
         Data: {} MiB of live values, {} puts of unique keys with {} B incompressible \
         values, then the first {} keys written again and the history compacted at the \
         last revision (physical), so the database holds about 1.5x the live data ({} \
         concurrent puts over {} connections). On the leader then: **snapshot save** as \
         `etcdctl snapshot save` does it (one Maintenance.Snapshot stream, every message \
         written to a file, fsync, rename; MB/s of database = the file's bytes but its \
         32-byte sha256 trailer / s, which favours the larger file: etcd's snapshot is its \
         whole bbolt file, free pages included; MB/s of live values = the live values' \
         bytes / s, the same data on both; 1 MB = 10^6 B), the trailer checked after; **restore**: `etcdutl` (etcd) or \
         `oxcdutl` (oxcd), found beside the server binary, run as `snapshot restore \
         <file> --data-dir <new dir>` and timed from start to exit, the dir then \
         removed; **defrag under writes**: {} writers over {} connections put {} B \
         values in a closed loop, {}; after {} s, one \
         Maintenance.Defragment call (no client deadline), the writers going on {} s \
         after it. Every put is kept with its send and finish times: \"during defrag\" \
         are the puts in flight at some moment of the call; the longest stretch of the \
         call in which no put succeeded is how long the writers were held (a put that \
         timed out does not end it: etcd's clients give up before its defragmentation \
         ends). Load from `oxcd-bench backup` in one process on \
         the same machine ({} cores). Logs (members', restore's) are kept in \
         `<dir>/round<N>-<system>/`.\n",
        a.dir().display(),
        crate::versus::disk_of(&a.dir()),
        match a.members.max(1) {
            1 => "1 member".to_string(),
            n => format!("{n} members, the leader measured"),
        },
        s.heartbeat_ms,
        s.election_ms,
        s.snapshot_count,
        s.quota_bytes >> 30,
        a.data_mb,
        a.fill_puts(),
        a.value_size,
        a.fill_puts() / 2,
        a.fill_clients,
        a.fill_conns,
        a.writers,
        a.write_conns,
        a.write_value_size,
        match a.write_rate {
            0 => "as fast as answered".to_string(),
            r => format!("at {r} puts/s in all"),
        },
        a.baseline_secs,
        defrag::TAIL.as_secs(),
        crate::versus::table::cores(),
    );
    crate::versus::table::binaries(&mut md, versions);
    for (i, r) in rounds.iter().enumerate() {
        round_table(&mut md, i + 1, r, &NUMBERS, &TEXTS);
        if let (Some(e), Some(o)) = (r.of("etcd"), r.of("oxcd")) {
            targets(&mut md, e, o);
        }
        notes(&mut md, r);
    }
    if rounds.len() > 1 {
        rounds_table(
            &mut md,
            rounds,
            &COMPARED,
            "lower is better but for the snapshot's MB/s",
        );
    }
    md
}
