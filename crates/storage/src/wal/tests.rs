use super::*;
use std::fs::OpenOptions;

fn open(dir: &Path) -> (Wal, Replay) {
    Wal::open(dir, 4096).expect("open wal")
}

fn write_entries(wal: &mut Wal, range: std::ops::RangeInclusive<u64>) {
    for i in range {
        wal.append_entry(i, format!("entry-{i}").as_bytes());
        if i % 50 == 0 {
            wal.sync().expect("sync");
        }
    }
    wal.set_hard_state(b"hs");
    wal.sync().expect("sync");
}

#[test]
fn create_append_reopen() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("wal");
    let mut wal = Wal::create(&dir, b"meta", 4096).expect("create");
    write_entries(&mut wal, 1..=500);
    assert!(wal.segment_count() > 1, "segments should roll at 4 KiB");
    drop(wal);
    let (_, replay) = open(&dir);
    assert_eq!(replay.metadata, b"meta");
    assert_eq!(replay.hard_state.as_deref(), Some(&b"hs"[..]));
    assert_eq!(replay.entries.len(), 500);
    assert_eq!(replay.entries[499], (500, b"entry-500".to_vec()));
    assert!(replay.repaired.is_none());
}

#[test]
fn overwritten_suffix_is_dropped() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("wal");
    let mut wal = Wal::create(&dir, b"m", DEFAULT_SEGMENT_SIZE).expect("create");
    write_entries(&mut wal, 1..=10);
    wal.append_entry(6, b"new-6");
    wal.sync().expect("sync");
    drop(wal);
    let (_, replay) = open(&dir);
    assert_eq!(replay.entries.len(), 6);
    assert_eq!(replay.entries[5], (6, b"new-6".to_vec()));
}

/// Where written data ends in `buf`: past it there are only zeroes.
fn data_end(buf: &[u8]) -> usize {
    buf.iter().rposition(|b| *b != 0).map_or(0, |p| p + 1)
}

/// The newest segment's path and where its records end.
fn newest_segment(dir: &Path) -> (PathBuf, usize) {
    let seg = list_segments(dir).expect("list").pop().expect("segment");
    let bytes = std::fs::read(&seg.path).expect("read");
    (seg.path, data_end(&bytes))
}

fn write_at(path: &Path, offset: u64, bytes: &[u8]) {
    let f = OpenOptions::new().write(true).open(path).expect("open");
    f.write_all_at(bytes, offset).expect("write");
}

/// A closed WAL of 64 MiB segments holding entries `1..=n`; the temp dir owns it.
fn closed_wal(n: u64) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("wal");
    let mut wal = Wal::create(&dir, b"m", DEFAULT_SEGMENT_SIZE).expect("create");
    write_entries(&mut wal, 1..=n);
    drop(wal);
    (tmp, dir)
}

/// After a repair that kept entries 1..=20, 21 and 22 append and replay cleanly.
fn appends_after_repair(dir: &Path) {
    let (mut wal, replay) = open(dir);
    assert!(replay.repaired.is_some());
    assert_eq!(replay.entries.len(), 20, "only the last write was torn");
    // New records may be shorter than the torn one: nothing of it may follow them.
    write_entries(&mut wal, 21..=22);
    drop(wal);
    let (_, replay) = open(dir);
    assert_eq!(replay.entries.len(), 22);
    assert_eq!(replay.entries[20], (21, b"entry-21".to_vec()));
    assert!(replay.repaired.is_none());
}

#[test]
fn segments_are_preallocated() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("wal");
    let mut wal = Wal::create(&dir, b"m", 1 << 20).expect("create");
    write_entries(&mut wal, 1..=3);
    drop(wal);
    let (path, data) = newest_segment(&dir);
    assert_eq!(std::fs::metadata(&path).expect("meta").len(), 1 << 20);
    assert!(data > 0 && data < 4096, "{data}");
    let (_, replay) = Wal::open(&dir, 1 << 20).expect("open");
    assert_eq!(replay.entries.len(), 3);
    assert!(replay.repaired.is_none(), "reserved zeroes are no damage");
}

#[test]
fn a_segment_written_without_reservation_is_reserved_on_open() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("wal");
    let mut wal = Wal::create(&dir, b"m", 1 << 20).expect("create");
    write_entries(&mut wal, 1..=3);
    drop(wal);
    // As a WAL written before segments were reserved, or on a file system without
    // fallocate: the file ends with the data.
    let (path, data) = newest_segment(&dir);
    let f = OpenOptions::new().write(true).open(&path).expect("open");
    f.set_len(data as u64).expect("truncate");
    drop(f);
    let (mut wal, replay) = Wal::open(&dir, 1 << 20).expect("open");
    assert!(replay.repaired.is_none());
    assert_eq!(std::fs::metadata(&path).expect("meta").len(), 1 << 20);
    write_entries(&mut wal, 4..=5);
    drop(wal);
    let (_, replay) = Wal::open(&dir, 1 << 20).expect("open");
    assert_eq!(replay.entries.len(), 5);
}

#[test]
fn torn_tail_in_a_reserved_segment_is_repaired_and_appendable() {
    let (_tmp, dir) = closed_wal(20);
    let (path, before) = newest_segment(&dir);
    let (mut wal, _) = open(&dir);
    // A large last write whose later sectors never reached the disk.
    wal.append_entry(21, &[7u8; 3000]);
    wal.sync().expect("sync");
    drop(wal);
    let (_, after) = newest_segment(&dir);
    let boundary = before.div_ceil(512) * 512 + 512;
    assert!(boundary < after);
    write_at(&path, boundary as u64, &vec![0u8; after - boundary]);
    appends_after_repair(&dir);
}

#[test]
fn file_cut_short_is_repaired() {
    let (_tmp, dir) = closed_wal(20);
    // A segment that grows as written (no fallocate), torn: the last record is cut in half.
    let (path, data) = newest_segment(&dir);
    let f = OpenOptions::new().write(true).open(&path).expect("open");
    f.set_len(data as u64 - 3).expect("truncate");
    drop(f);
    appends_after_repair(&dir);
}

#[test]
fn data_after_a_zeroed_gap_refuses_to_open() {
    let (_tmp, dir) = closed_wal(20);
    // Something written far past the records: the zeroes before it are not the end.
    let (path, data) = newest_segment(&dir);
    write_at(&path, data as u64 + 8192, b"late");
    let err = Wal::open(&dir, DEFAULT_SEGMENT_SIZE).expect_err("must refuse");
    assert!(matches!(err, StorageError::CorruptWal { .. }), "{err}");
}

#[test]
fn corrupt_record_in_the_middle_refuses_to_open() {
    let (_tmp, dir) = closed_wal(50);
    let (path, data) = newest_segment(&dir);
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[data / 2] ^= 0x40;
    std::fs::write(&path, &bytes).expect("write");
    let err = Wal::open(&dir, DEFAULT_SEGMENT_SIZE).expect_err("must refuse");
    let msg = err.to_string();
    assert!(matches!(err, StorageError::CorruptWal { .. }), "{msg}");
    assert!(
        msg.contains(&path.display().to_string()),
        "names the file: {msg}"
    );
}

#[test]
fn corrupt_older_segment_refuses_to_open() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("wal");
    let mut wal = Wal::create(&dir, b"m", 4096).expect("create");
    write_entries(&mut wal, 1..=900);
    drop(wal);
    let segs = list_segments(&dir).expect("list");
    assert!(segs.len() > 2);
    // Truncating an older segment loses synced data: never a "torn tail".
    let f = OpenOptions::new()
        .write(true)
        .open(&segs[0].path)
        .expect("open");
    let len = f.metadata().expect("meta").len();
    f.set_len(len - 5).expect("truncate");
    drop(f);
    let err = Wal::open(&dir, 4096).expect_err("must refuse");
    assert!(
        err.to_string()
            .contains(&segs[0].path.display().to_string()),
        "{err}"
    );
}

/// A WAL in `dir` holding entries 1..=400 with a snapshot mark at 300, synced.
fn marked_at_300(dir: &Path) -> Wal {
    let mut wal = Wal::create(dir, b"m", 4096).expect("create");
    write_entries(&mut wal, 1..=400);
    wal.mark_snapshot(300, b"snap");
    wal.sync().expect("sync");
    wal
}

/// The segment files in `dir`, in order.
fn segment_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    files.sort();
    files
}

#[test]
fn snapshot_mark_and_purge() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("wal");
    let mut wal = marked_at_300(&dir);
    let before = wal.segment_count();
    let removed = wal.purge(300, 1).expect("purge");
    assert!(removed > 0 && wal.segment_count() == before - removed);
    // The files go on the purge thread, oldest first.
    wal.finish_purges();
    assert_eq!(segment_files(&dir).len(), wal.segment_count());
    write_entries(&mut wal, 401..=410);
    drop(wal);
    let (_, replay) = open(&dir);
    assert_eq!(replay.snapshot, Some((300, b"snap".to_vec())));
    assert_eq!(replay.entries.first().map(|e| e.0), Some(301));
    assert_eq!(replay.entries.last().map(|e| e.0), Some(410));
    assert_eq!(replay.hard_state.as_deref(), Some(&b"hs"[..]));
}

/// A purge whose first deletion fails deletes nothing after it, then or later: a later
/// segment gone would leave a gap that recovery refuses. The WAL still opens.
#[test]
fn a_failed_deletion_keeps_every_later_segment() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("wal");
    let mut wal = marked_at_300(&dir);
    let files = segment_files(&dir);
    // The purge's first deletion fails: its file is already gone.
    std::fs::remove_file(&files[0]).expect("remove");
    let removed = wal.purge(300, 1).expect("purge");
    assert!(removed > 0, "nothing let go");
    write_entries(&mut wal, 401..=800);
    wal.mark_snapshot(700, b"snap2");
    wal.sync().expect("sync");
    assert!(wal.purge(700, 1).expect("purge") > 0);
    wal.finish_purges();
    let left = segment_files(&dir);
    assert_eq!(left[..files.len() - 1], files[1..]);
    drop(wal);
    let (_, replay) = open(&dir);
    assert_eq!(replay.snapshot, Some((700, b"snap2".to_vec())));
    assert_eq!(replay.entries.last().map(|e| e.0), Some(800));
}

#[test]
fn metadata_is_readable_without_replay() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("wal");
    assert_eq!(Wal::read_metadata(&dir).expect("none"), None);
    let mut wal = Wal::create(&dir, b"identity", 4096).expect("create");
    write_entries(&mut wal, 1..=500);
    drop(wal);
    assert_eq!(
        Wal::read_metadata(&dir).expect("read").as_deref(),
        Some(&b"identity"[..])
    );
}

#[test]
fn installed_snapshot_voids_earlier_entries() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("wal");
    let mut wal = Wal::create(&dir, b"m", 4096).expect("create");
    // A follower holds 1..=50, some of them never committed, then receives a snapshot
    // at 40 from a leader whose log differs: everything before it is void.
    write_entries(&mut wal, 1..=50);
    wal.install_snapshot(40, b"snap");
    wal.sync().expect("sync");
    drop(wal);
    let (mut wal, replay) = open(&dir);
    assert_eq!(replay.snapshot, Some((40, b"snap".to_vec())));
    assert!(replay.entries.is_empty(), "stale 41..=50 are gone");
    // Far beyond the old log: the next entries follow the snapshot.
    wal.install_snapshot(5000, b"snap2");
    write_entries(&mut wal, 5001..=5010);
    drop(wal);
    let (_, replay) = open(&dir);
    assert_eq!(replay.snapshot, Some((5000, b"snap2".to_vec())));
    assert_eq!(replay.entries.first().map(|e| e.0), Some(5001));
    assert_eq!(replay.entries.len(), 10);
}

/// Replay lets go of the entries a mark covers as soon as it reads the mark; a gap
/// right after the mark is still refused, not taken for a log that starts later.
#[test]
fn a_gap_after_a_mark_refuses_to_open() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("wal");
    let mut wal = marked_at_300(&dir);
    wal.mark_snapshot(400, b"snap2");
    wal.append_entry(405, b"entry-405");
    wal.sync().expect("sync");
    drop(wal);
    let err = Wal::open(&dir, 4096).expect_err("a gap after the mark");
    assert!(
        err.to_string().contains("entries 401 to 404 are missing"),
        "{err}"
    );
}

/// Opened from an index, the replay keeps the entries from it on and the newest one
/// before it as the anchor; at or below the mark it changes nothing.
#[test]
fn opened_from_an_index_the_log_starts_at_its_anchor() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("wal");
    drop(marked_at_300(&dir));
    let (_, replay) = Wal::open_from(&dir, 4096, 350).expect("open");
    assert_eq!(replay.anchor, Some((349, b"entry-349".to_vec())));
    assert_eq!(replay.entries.first().map(|e| e.0), Some(350));
    assert_eq!(replay.entries.len(), 51);
    assert_eq!(replay.snapshot.as_ref().map(|s| s.0), Some(300));
    for keep_from in [0, 250, 301] {
        let (_, replay) = Wal::open_from(&dir, 4096, keep_from).expect("open");
        assert_eq!(replay.anchor, None, "keep_from {keep_from}");
        assert_eq!(replay.entries.first().map(|e| e.0), Some(301));
    }
    // Without a mark, the same.
    let dir2 = tmp.path().join("wal2");
    let mut wal = Wal::create(&dir2, b"m", 4096).expect("create");
    write_entries(&mut wal, 1..=100);
    drop(wal);
    let (_, replay) = Wal::open_from(&dir2, 4096, 90).expect("open");
    assert_eq!(replay.anchor.map(|a| a.0), Some(89));
    assert_eq!(replay.entries.len(), 11);
}

/// Records larger than the replay's read window, across its edges, replay whole; a
/// torn write of such a record at the end is still cut away.
#[test]
fn records_larger_than_the_read_window_replay() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("wal");
    let mut wal = Wal::create(&dir, b"m", DEFAULT_SEGMENT_SIZE).expect("create");
    let big = |i: u64| vec![i as u8 + 1; (3 << 20) / 2 + i as usize * 1000];
    for i in 1..=5 {
        wal.append_entry(i, &big(i));
        wal.sync().expect("sync");
    }
    drop(wal);
    let (_, replay) = open_big(&dir);
    assert_eq!(replay.entries.len(), 5);
    for (i, data) in &replay.entries {
        assert_eq!(data, &big(*i));
    }
    // The last record's second half never reached the disk.
    let (path, end) = newest_segment(&dir);
    let half = big(5).len() / 2;
    write_at(&path, (end - half) as u64, &vec![0u8; half]);
    let (_, replay) = open_big(&dir);
    assert_eq!(replay.entries.len(), 4);
    assert!(replay.repaired.is_some());
}

fn open_big(dir: &Path) -> (Wal, Replay) {
    Wal::open(dir, DEFAULT_SEGMENT_SIZE).expect("open wal")
}
