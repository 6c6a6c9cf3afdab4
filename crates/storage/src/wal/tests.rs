use super::*;

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

#[test]
fn torn_tail_is_repaired_and_appendable() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("wal");
    let mut wal = Wal::create(&dir, b"m", DEFAULT_SEGMENT_SIZE).expect("create");
    write_entries(&mut wal, 1..=20);
    drop(wal);
    let seg = list_segments(&dir).expect("list").pop().expect("segment");
    let len = std::fs::metadata(&seg.path).expect("meta").len();
    // A torn final write: the last record is cut in half.
    let f = OpenOptions::new()
        .write(true)
        .open(&seg.path)
        .expect("open");
    f.set_len(len - 3).expect("truncate");
    drop(f);
    let (mut wal, replay) = open(&dir);
    assert!(replay.repaired.is_some());
    assert_eq!(
        replay.entries.len(),
        20,
        "only the hard state record was torn"
    );
    write_entries(&mut wal, 21..=22);
    drop(wal);
    let (_, replay) = open(&dir);
    assert_eq!(replay.entries.len(), 22);
    assert!(replay.repaired.is_none());
}

#[test]
fn zeroed_tail_is_repaired() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("wal");
    let mut wal = Wal::create(&dir, b"m", DEFAULT_SEGMENT_SIZE).expect("create");
    write_entries(&mut wal, 1..=3);
    drop(wal);
    let seg = list_segments(&dir).expect("list").pop().expect("segment");
    let mut f = OpenOptions::new()
        .append(true)
        .open(&seg.path)
        .expect("open");
    f.write_all(&[0u8; 4096]).expect("zeros");
    drop(f);
    let (_, replay) = open(&dir);
    assert!(replay.repaired.is_some());
    assert_eq!(replay.entries.len(), 3);
}

#[test]
fn corrupt_record_in_the_middle_refuses_to_open() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("wal");
    let mut wal = Wal::create(&dir, b"m", DEFAULT_SEGMENT_SIZE).expect("create");
    write_entries(&mut wal, 1..=50);
    drop(wal);
    let seg = list_segments(&dir).expect("list").pop().expect("segment");
    let mut bytes = std::fs::read(&seg.path).expect("read");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&seg.path, &bytes).expect("write");
    let err = Wal::open(&dir, DEFAULT_SEGMENT_SIZE).expect_err("must refuse");
    let msg = err.to_string();
    assert!(matches!(err, StorageError::CorruptWal { .. }), "{msg}");
    assert!(
        msg.contains(&seg.path.display().to_string()),
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

#[test]
fn snapshot_mark_and_purge() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("wal");
    let mut wal = Wal::create(&dir, b"m", 4096).expect("create");
    write_entries(&mut wal, 1..=400);
    wal.mark_snapshot(300, b"snap");
    wal.sync().expect("sync");
    let before = wal.segment_count();
    let removed = wal.purge(300, 1).expect("purge");
    assert!(removed > 0 && wal.segment_count() == before - removed);
    write_entries(&mut wal, 401..=410);
    drop(wal);
    let (_, replay) = open(&dir);
    assert_eq!(replay.snapshot, Some((300, b"snap".to_vec())));
    assert_eq!(replay.entries.first().map(|e| e.0), Some(301));
    assert_eq!(replay.entries.last().map(|e| e.0), Some(410));
    assert_eq!(replay.hard_state.as_deref(), Some(&b"hs"[..]));
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
