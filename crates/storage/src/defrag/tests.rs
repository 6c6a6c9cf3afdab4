use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use redb::{ReadableDatabase, ReadableTable};

use super::*;

fn rev_key(main: u64) -> Vec<u8> {
    let mut k = main.to_be_bytes().to_vec();
    k.push(b'_');
    k.extend_from_slice(&0u64.to_be_bytes());
    k
}

fn put_keys(b: &Backend, revs: std::ops::Range<u64>, value_len: usize) {
    let tx = b.begin_write().expect("write");
    {
        let mut t = tx.open_table(schema::KEY).expect("key table");
        for r in revs {
            t.insert(rev_key(r).as_slice(), vec![r as u8; value_len].as_slice())
                .expect("insert");
        }
    }
    b.commit(tx, false).expect("commit");
}

fn delete_keys_and_mark(b: &Backend, revs: std::ops::Range<u64>, mark: u64) {
    let tx = b.begin_write().expect("write");
    {
        let mut t = tx.open_table(schema::KEY).expect("key table");
        for r in revs {
            t.remove(rev_key(r).as_slice()).expect("remove");
        }
        let mut m = tx.open_table(schema::META).expect("meta");
        let at = rev_key(mark);
        m.insert(schema::META_FINISHED_COMPACT, at.as_slice())
            .expect("mark");
    }
    b.commit(tx, false).expect("commit");
}

fn key_rows(b: &Backend) -> Vec<(Vec<u8>, Vec<u8>)> {
    b.rows(schema::KEY).expect("rows")
}

#[test]
fn shrinks_to_the_live_data_and_keeps_every_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = Backend::open(&dir.path().join("db")).expect("open");
    for chunk in 0..20u64 {
        put_keys(&b, chunk * 500..(chunk + 1) * 500, 1000);
    }
    delete_keys_and_mark(&b, 0..9_500, 9_500);
    let rows = key_rows(&b);
    let hash = b.state_hash().expect("hash");
    let report = b.defragment().expect("defragment");
    assert!(
        report.size_after < report.size_before / 4,
        "{} -> {}",
        report.size_before,
        report.size_after
    );
    assert_eq!(key_rows(&b), rows);
    assert_eq!(b.state_hash().expect("hash"), hash);
    assert!(!temp_path(b.path()).exists());
    // Written after: lands in the new file, and survives a reopen.
    put_keys(&b, 10_000..10_010, 10);
    let rows = key_rows(&b);
    let path = b.path().to_path_buf();
    drop(b);
    let b = Backend::open(&path).expect("reopen");
    assert_eq!(key_rows(&b), rows);
}

#[test]
fn writes_during_the_copy_are_all_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = Arc::new(Backend::open(&dir.path().join("db")).expect("open"));
    put_keys(&b, 0..20_000, 200);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (b, stop) = (b.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut next = 20_000u64;
            while !stop.load(Ordering::Acquire) {
                put_keys(&b, next..next + 10, 50);
                next += 10;
            }
            next
        })
    };
    let reports: Vec<DefragReport> = (0..3).map(|_| b.defragment().expect("defrag")).collect();
    stop.store(true, Ordering::Release);
    let end = writer.join().expect("writer");
    let rows = key_rows(&b);
    assert_eq!(rows.len() as u64, end, "rounds: {reports:?}");
    for (i, (k, _)) in rows.iter().enumerate() {
        assert_eq!(k, &rev_key(i as u64));
    }
}

#[test]
fn a_compaction_between_catch_ups_is_carried() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = Backend::open(&dir.path().join("src")).expect("open");
    let dst = create_database(&dir.path().join("dst")).expect("dst");
    put_keys(&src, 0..1_000, 30);
    let read = src.begin_read().expect("read");
    let (mark, copied) = catch_up(&read, &dst, &Mark::default(), Durability::None).expect("c1");
    assert_eq!(copied, 1_000);
    drop(read);
    delete_keys_and_mark(&src, 100..900, 900);
    put_keys(&src, 1_000..1_050, 30);
    let read = src.begin_read().expect("read");
    let (_, copied) = catch_up(&read, &dst, &mark, Durability::None).expect("c2");
    assert_eq!(copied, 50);
    let theirs: Vec<Vec<u8>> = dst
        .begin_read()
        .expect("read dst")
        .open_table(schema::KEY)
        .expect("key")
        .iter()
        .expect("iter")
        .map(|r| r.expect("row").0.value().to_vec())
        .collect();
    let ours: Vec<Vec<u8>> = key_rows(&src).into_iter().map(|(k, _)| k).collect();
    assert_eq!(theirs, ours);
    let meta = dst
        .begin_read()
        .expect("read")
        .open_table(schema::META)
        .expect("meta")
        .get(schema::META_FINISHED_COMPACT)
        .expect("get")
        .map(|v| v.value().to_vec());
    assert_eq!(meta, Some(rev_key(900)));
}

#[test]
fn a_reader_keeps_reading_the_old_file_after_the_swap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = Backend::open(&dir.path().join("db")).expect("open");
    put_keys(&b, 0..2_000, 500);
    let read = b.begin_read().expect("read");
    b.defragment().expect("defragment");
    put_keys(&b, 2_000..2_001, 5);
    let n = read
        .open_table(schema::KEY)
        .expect("key")
        .iter()
        .expect("iter")
        .count();
    assert_eq!(n, 2_000);
    assert_eq!(key_rows(&b).len(), 2_001);
}

#[test]
fn the_file_of_an_interrupted_defragmentation_is_removed_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    drop(Backend::open(&path).expect("open"));
    std::fs::write(temp_path(&path), b"half a copy").expect("write leftover");
    let b = Backend::open(&path).expect("reopen");
    assert!(!temp_path(b.path()).exists());
}
