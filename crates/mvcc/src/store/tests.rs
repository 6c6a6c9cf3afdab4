use super::*;

fn open(dir: &std::path::Path) -> Store {
    let backend = Arc::new(Backend::open(&dir.join("db")).expect("backend"));
    Store::open(backend).expect("store")
}

fn put(store: &Store, index: u64, kvs: &[(&str, &str)]) -> i64 {
    let (_, written) = store
        .write_batch(index, 1, false, |batch| {
            let mut txn = batch.txn()?;
            for (k, v) in kvs {
                txn.put(k.as_bytes(), v.as_bytes(), 0)?;
            }
            Ok(txn.end())
        })
        .expect("put batch");
    written.rev
}

fn del(store: &Store, index: u64, key: &str, end: &str) -> Written {
    store
        .write_batch(index, 1, false, |batch| {
            let mut txn = batch.txn()?;
            txn.delete_range(KeyRange::new(key.as_bytes(), end.as_bytes()))?;
            Ok(txn.end())
        })
        .expect("delete batch")
        .1
}

/// Applies a compaction to `rev` in a batch of its own at raft `index`.
fn compact(store: &Store, index: u64, rev: i64, durable: bool) {
    store
        .write_batch(index, 1, durable, |batch| batch.compact(rev))
        .expect("compact");
}

/// Rows of the key table, as committed.
fn key_rows(store: &Store) -> usize {
    let tx = store.backend().begin_read().expect("read");
    let t = tx.open_table(schema::KEY).expect("table");
    t.iter().expect("iter").count()
}

/// How long a test waits for a compaction's rows to be deleted.
const DELETED_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

fn get(store: &Store, key: &str, rev: i64) -> Option<KeyValue> {
    let r = store
        .range(
            KeyRange::new(key.as_bytes(), b""),
            RangeOptions {
                rev,
                ..Default::default()
            },
        )
        .expect("range");
    r.kvs.into_iter().next()
}

#[test]
fn revisions_versions_and_history() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    assert_eq!(store.current_rev(), 1, "a fresh store is at revision 1");
    assert_eq!(put(&store, 1, &[("a", "1")]), 2);
    assert_eq!(put(&store, 2, &[("a", "2"), ("b", "x")]), 3);
    let a = get(&store, "a", 0).expect("a");
    assert_eq!(
        (
            a.create_revision,
            a.mod_revision,
            a.version,
            a.value.as_slice()
        ),
        (2, 3, 2, &b"2"[..])
    );
    assert_eq!(get(&store, "a", 2).expect("a@2").value, b"1");
    assert_eq!(del(&store, 3, "a", "").rev, 4);
    assert!(get(&store, "a", 0).is_none());
    assert_eq!(put(&store, 4, &[("a", "3")]), 5);
    let a = get(&store, "a", 0).expect("a again");
    assert_eq!(
        (a.create_revision, a.version),
        (5, 1),
        "version restarts after delete"
    );
    // Deleting nothing does not consume a revision.
    assert_eq!(del(&store, 5, "zzz", "").rev, 5);
    assert!(matches!(
        store.range(
            KeyRange::new(b"a", b""),
            RangeOptions {
                rev: 9,
                ..Default::default()
            }
        ),
        Err(MvccError::FutureRev)
    ));
}

#[test]
fn ranges_count_and_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    put(
        &store,
        1,
        &[("k1", "a"), ("k2", "b"), ("k3", "c"), ("z", "d")],
    );
    let r = store
        .range(
            KeyRange::new(b"k", b"l"),
            RangeOptions {
                limit: 2,
                ..Default::default()
            },
        )
        .expect("range");
    assert_eq!((r.kvs.len(), r.count, r.rev), (2, 3, 2));
    let r = store
        .range(KeyRange::new(b"k2", b"\0"), RangeOptions::default())
        .expect("from key");
    assert_eq!(r.count, 3);
    let r = store
        .range(
            KeyRange::new(b"\0", b"\0"),
            RangeOptions {
                count_only: true,
                ..Default::default()
            },
        )
        .expect("all");
    assert_eq!((r.count, r.kvs.len()), (4, 0));
    let r = store
        .range(KeyRange::new(b"z", b"a"), RangeOptions::default())
        .expect("inverted");
    assert_eq!(r.count, 0);
}

#[test]
fn compaction_and_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let store = open(dir.path());
        put(&store, 1, &[("a", "1")]); // 2
        put(&store, 2, &[("a", "2")]); // 3
        put(&store, 3, &[("b", "1")]); // 4
        del(&store, 4, "b", ""); // 5
        put(&store, 5, &[("a", "3")]); // 6
        compact(&store, 6, 5, true);
        assert!(matches!(
            store.range(
                KeyRange::new(b"a", b""),
                RangeOptions {
                    rev: 4,
                    ..Default::default()
                }
            ),
            Err(MvccError::Compacted)
        ));
        assert_eq!(get(&store, "a", 5).expect("a@5").value, b"2");
        let tx = store.backend().begin_batch().expect("batch");
        let mut batch = store.begin_apply(&tx, true);
        assert!(matches!(batch.compact(5), Err(MvccError::Compacted)));
        assert!(matches!(batch.compact(7), Err(MvccError::FutureRev)));
    }
    let store = open(dir.path());
    assert_eq!(store.current_rev(), 6);
    assert_eq!(store.compact_rev(), 5);
    assert_eq!(store.consistent_index(), 6);
    assert_eq!(get(&store, "a", 5).expect("a@5 after restart").value, b"2");
    let a = get(&store, "a", 0).expect("a");
    assert_eq!((a.version, a.create_revision), (3, 2));
    assert!(get(&store, "b", 0).is_none());
    // Rows: a@3 (kept for reads at 5), b's delete at 5 (the compaction revision: a watch
    // from there still sees it, as in etcd), a@6; b's put at 4 is gone (in the
    // background: waited for).
    assert!(store.wait_compacted(5, DELETED_WITHIN));
    assert_eq!(key_rows(&store), 3);
}

#[test]
fn txn_reads_its_own_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    let tx = store.backend().begin_batch().expect("batch");
    let mut batch = store.begin_apply(&tx, true);
    let mut txn = batch.txn().expect("txn");
    txn.put(b"x", b"1", 0).expect("put");
    txn.put(b"x", b"2", 0).expect("put");
    let r = txn
        .range(KeyRange::new(b"x", b""), RangeOptions::default())
        .expect("range");
    assert_eq!(
        (r.kvs[0].value.as_slice(), r.kvs[0].version, r.rev),
        (&b"2"[..], 2, 2)
    );
    // Not visible outside before commit.
    assert!(get(&store, "x", 0).is_none());
    assert_eq!(txn.end(), 2);
    let written = batch.finish();
    tx.commit(1, 1, false).expect("commit");
    // Committed but not yet published: readers still see revision 1.
    assert!(get(&store, "x", 0).is_none());
    store.publish(&written, 1);
    assert_eq!(get(&store, "x", 0).expect("x").version, 2);
    assert_eq!(store.consistent_index(), 1);
}

/// (type, key, mod revision, version, lease) of each event.
fn summary(events: &[oxcd_api::mvccpb::Event]) -> Vec<(i32, &[u8], i64, i64, i64)> {
    events
        .iter()
        .map(|e| {
            let kv = e.kv.as_ref().expect("kv");
            (
                e.r#type,
                kv.key.as_slice(),
                kv.mod_revision,
                kv.version,
                kv.lease,
            )
        })
        .collect()
}

#[test]
fn writes_record_their_events_in_revision_order() {
    use oxcd_api::mvccpb::event::EventType;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    put(&store, 1, &[("a", "1")]); // 2
    let (_, written) = store
        .write_batch(2, 1, false, |batch| {
            let mut txn = batch.txn()?;
            txn.put(b"a", b"2", 7)?;
            txn.put(b"b", b"1", 0)?;
            txn.end();
            let mut txn = batch.txn()?;
            txn.put(b"c", b"1", 0)?;
            Ok(txn.end())
        })
        .expect("batch");
    assert_eq!(written.rev, 4);
    let seen = summary(written.events.as_deref().unwrap_or_default());
    let put = EventType::Put as i32;
    assert_eq!(
        seen,
        vec![
            (put, &b"a"[..], 3, 2, 7),
            (put, &b"b"[..], 3, 1, 0),
            (put, &b"c"[..], 4, 1, 0),
        ]
    );
    // A delete carries the key and the delete's revision only; deleting nothing records
    // nothing and takes no revision.
    let gone = del(&store, 3, "a", "c");
    assert_eq!(gone.rev, 5);
    let deletes = summary(gone.events.as_deref().unwrap_or_default());
    let del_t = EventType::Delete as i32;
    assert_eq!(
        deletes,
        vec![(del_t, &b"a"[..], 5, 0, 0), (del_t, &b"b"[..], 5, 0, 0)]
    );
    let nothing = del(&store, 4, "x", "");
    assert_eq!((nothing.rev, nothing.events.map(|e| e.len())), (5, Some(0)));
}

#[test]
fn history_replays_the_events_of_a_revision_range_in_whole_revisions() {
    use oxcd_api::mvccpb::event::EventType;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    put(&store, 1, &[("a", "1")]); // 2
    put(&store, 2, &[("b", "1"), ("c", "1")]); // 3
    del(&store, 3, "a", "c"); // 4: a and b
    put(&store, 4, &[("a", "2")]); // 5
    let all = store.history(2, 5, usize::MAX).expect("history");
    assert_eq!(all.through, 5);
    let put_t = EventType::Put as i32;
    let del_t = EventType::Delete as i32;
    assert_eq!(
        summary(&all.events),
        vec![
            (put_t, &b"a"[..], 2, 1, 0),
            (put_t, &b"b"[..], 3, 1, 0),
            (put_t, &b"c"[..], 3, 1, 0),
            (del_t, &b"a"[..], 4, 0, 0),
            (del_t, &b"b"[..], 4, 0, 0),
            (put_t, &b"a"[..], 5, 1, 0),
        ]
    );
    // A small byte budget still ends on a whole revision: revision 3's two events stay
    // together.
    let chunk = store.history(3, 5, 1).expect("chunk");
    assert_eq!(chunk.through, 3);
    assert_eq!(chunk.events.len(), 2);
    let next = store.history(chunk.through + 1, 5, 1).expect("next chunk");
    assert_eq!((next.through, next.events.len()), (4, 2));
    // Nothing to read: an empty chunk that covers up to `to`.
    let none = store.history(6, 5, usize::MAX).expect("empty");
    assert_eq!((none.through, none.events.len()), (5, 0));
    compact(&store, 5, 4, false);
    assert!(matches!(
        store.history(3, 5, usize::MAX),
        Err(MvccError::Compacted)
    ));
    let from_compaction = store.history(4, 5, usize::MAX).expect("from compaction");
    assert_eq!(from_compaction.through, 5);
}

#[test]
fn history_chunks_hold_at_most_a_thousand_revisions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    for i in 1..=2500u64 {
        put(&store, i, &[("k", "v")]); // revisions 2..=2501
    }
    let first = store.history(2, 2501, usize::MAX).expect("history");
    assert_eq!((first.through, first.events.len()), (1001, 1000));
    let second = store.history(1002, 2501, usize::MAX).expect("history");
    assert_eq!(second.through, 2001);
    let last = store.history(2002, 2501, usize::MAX).expect("history");
    assert_eq!((last.through, last.events.len()), (2501, 500));
}

/// A store holding more than two threads' shares of rows (`k000000`...), and how many.
fn long_store() -> (tempfile::TempDir, Store, usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    let n = ROWS_PER_THREAD * 2 + 100;
    let keys: Vec<String> = (0..n).map(|i| format!("k{i:06}")).collect();
    let kvs: Vec<(&str, &str)> = keys.iter().map(|k| (k.as_str(), "v")).collect();
    put(&store, 1, &kvs);
    (dir, store, n)
}

#[test]
fn a_visitor_that_says_no_stops_the_read() {
    let (_dir, store, n) = long_store();
    for threads in [1, 2] {
        let seen = std::sync::atomic::AtomicUsize::new(0);
        let read = store.range_encoded(
            KeyRange::new(b"k", b"l"),
            RangeOptions::default(),
            usize::MAX,
            threads,
            || (),
            |_, _| seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < 10,
        );
        assert!(
            matches!(read, Err(MvccError::ReadStopped)),
            "{threads} threads"
        );
        let seen = seen.into_inner();
        assert!(
            seen < n,
            "the read stopped early ({seen} of {n} rows visited)"
        );
    }
}

#[test]
fn a_long_range_read_in_shares_by_threads_is_the_rows_in_order() {
    let (_dir, store, n) = long_store();
    let read = |threads: usize, take: usize| {
        store
            .range_encoded(
                KeyRange::new(b"k", b"l"),
                RangeOptions::default(),
                take,
                threads,
                Vec::new,
                |rows: &mut Vec<Vec<u8>>, row| {
                    rows.push(row.to_vec());
                    true
                },
            )
            .expect("range")
    };
    let (one, parts) = read(1, usize::MAX);
    assert_eq!(parts.len(), 1);
    let rows: Vec<Vec<u8>> = parts.concat();
    assert_eq!((one.count, one.found, rows.len()), (n, n, n));
    let first = KeyValue::decode(rows[0].as_slice()).expect("row");
    assert_eq!(first.key, b"k000000");
    // Three shares of at least ROWS_PER_THREAD rows do not fit: two threads read.
    let (three, parts) = read(3, usize::MAX);
    assert_eq!((parts.len(), three.count), (2, n));
    assert_eq!(parts.concat(), rows);
    // A cut answer is split by what is taken, not by what was found.
    let (cut, parts) = read(4, ROWS_PER_THREAD * 2 - 1);
    assert_eq!((parts.len(), cut.found), (1, n));
    assert_eq!(parts.concat(), rows[..ROWS_PER_THREAD * 2 - 1]);
}

#[test]
fn reads_racing_compactions_to_the_newest_revision_find_every_row() {
    // A compaction to a revision written after a reader's lookup deletes the rows the
    // lookup found unless the reader's transaction was begun with the lookup.
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(open(dir.path()));
    let keys: Vec<String> = (0..8).map(|i| format!("k{i}")).collect();
    let mut index = 0;
    for k in &keys {
        index += 1;
        put(&store, index, &[(k.as_str(), "v")]);
    }
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (store, done) = (store.clone(), done.clone());
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while !done.load(Ordering::Relaxed) {
                    let r = store
                        .range(KeyRange::new(b"k", b"l"), RangeOptions::default())
                        .expect("a read at the current revision never fails");
                    assert_eq!(r.kvs.len(), 8, "every key is found");
                    let (enc, parts) = store
                        .range_encoded(
                            KeyRange::new(b"k", b"l"),
                            RangeOptions::default(),
                            usize::MAX,
                            2,
                            Vec::new,
                            |p: &mut Vec<usize>, row| {
                                p.push(row.len());
                                true
                            },
                        )
                        .expect("an encoded read never fails either");
                    assert_eq!((enc.found, parts.concat().len()), (8, 8));
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    for round in 0..3000 {
        index += 1;
        let rev = put(&store, index, &[(keys[round % keys.len()].as_str(), "w")]);
        index += 1;
        compact(&store, index, rev, false);
    }
    done.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().expect("reader") > 0);
    }
}

#[test]
fn a_bumped_and_scheduled_compaction_is_finished_at_open() {
    // What `snapshot restore --bump-revision 100 --mark-compacted` leaves: an empty row
    // at {latest + 100, 0} and scheduledCompactRev there, finishedCompactRev untouched.
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    put(&store, 1, &[("a", "1")]);
    let latest = put(&store, 2, &[("a", "2"), ("b", "x")]);
    let bumped = latest + 100;
    let marker = Revision::new(bumped, 0).to_bytes(false);
    let tx = store.backend().begin_batch().expect("batch");
    tx.open(schema::KEY)
        .expect("key table")
        .insert(marker.as_slice(), &[][..])
        .expect("marker row");
    tx.put_meta(schema::META_SCHEDULED_COMPACT, &marker)
        .expect("scheduled");
    tx.commit(2, 1, true).expect("commit");
    drop(store);

    let store = open(dir.path());
    assert_eq!(store.current_rev(), bumped);
    assert_eq!(store.compact_rev(), bumped, "the compaction was finished");
    assert!(matches!(
        store.range(
            KeyRange::new(b"a", b""),
            RangeOptions {
                rev: latest,
                ..Default::default()
            }
        ),
        Err(MvccError::Compacted)
    ));
    let a = get(&store, "a", 0).expect("a survives the compaction");
    assert_eq!((a.mod_revision, a.version), (latest, 2));
    let all = store
        .range(KeyRange::new(b"\0", b"\0"), RangeOptions::default())
        .expect("all keys");
    assert_eq!(all.count, 2, "the marker row is no key anyone reads");
    assert_eq!(put(&store, 3, &[("c", "1")]), bumped + 1);
    drop(store);
    let store = open(dir.path());
    assert_eq!(
        (store.current_rev(), store.compact_rev()),
        (bumped + 1, bumped)
    );
}

/// `n` puts spread over `keys` keys, one revision each, in one batch; the last revision.
fn fill(store: &Store, index: u64, n: usize, keys: usize) -> i64 {
    let (_, written) = store
        .write_batch(index, 1, false, |batch| {
            for i in 0..n {
                let mut txn = batch.txn()?;
                txn.put(format!("k{:05}", i % keys).as_bytes(), b"v", 0)?;
                txn.end();
            }
            Ok(())
        })
        .expect("fill");
    written.rev
}

#[test]
fn a_compactions_rows_go_in_the_background_over_many_transactions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    let last = fill(&store, 1, 25_000, 1_000);
    let held = store.backend().hold_row_deletions();
    compact(&store, 2, last, false);
    // Applied: reads below it refused at once; its rows not deleted yet.
    assert!(matches!(
        store.range(
            KeyRange::new(b"k", b""),
            RangeOptions {
                rev: last - 1,
                ..Default::default()
            }
        ),
        Err(MvccError::Compacted)
    ));
    assert_eq!(key_rows(&store), 25_000);
    assert_eq!(
        store.backend().state_hash_at_index().expect("hash"),
        None,
        "not comparable while rows are being deleted"
    );
    // Writes go on meanwhile.
    assert_eq!(put(&store, 3, &[("k00000", "new")]), last + 1);
    drop(held);
    assert!(store.wait_compacted(last, DELETED_WITHIN));
    // 999 keys at their last revision below `last`, k00999 at `last` itself, and the
    // new put.
    assert_eq!(key_rows(&store), 1_001);
    let tx = store.backend().begin_read().expect("read");
    assert_eq!(
        Backend::read_meta(&tx, schema::META_FINISHED_COMPACT).expect("meta"),
        Some(Revision::new(last, 0).to_bytes(false))
    );
    assert!(
        store
            .backend()
            .state_hash_at_index()
            .expect("hash")
            .is_some()
    );
    assert_eq!(get(&store, "k00001", 0).expect("k00001").version, 25);
    assert_eq!(get(&store, "k00000", 0).expect("k00000").value, b"new");
}

#[test]
fn a_compaction_stopped_mid_way_is_finished_at_the_next_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let last = {
        let store = open(dir.path());
        let last = fill(&store, 1, 25_000, 1_000);
        let held = store.backend().hold_row_deletions();
        compact(&store, 2, last, true);
        drop(held);
        // Dropped at once: the deleter stops wherever it got to.
        last
    };
    let store = open(dir.path());
    assert_eq!(store.compact_rev(), last);
    assert!(store.wait_compacted(last, DELETED_WITHIN));
    assert_eq!(key_rows(&store), 1_000);
    assert_eq!(get(&store, "k00999", 0).expect("k00999").mod_revision, last);
}

#[test]
fn a_later_compaction_takes_over_an_unfinished_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    let first = fill(&store, 1, 20_000, 100);
    let held = store.backend().hold_row_deletions();
    compact(&store, 2, first - 10_000, false);
    let last = fill(&store, 3, 5_000, 100);
    compact(&store, 4, last, false);
    drop(held);
    assert!(store.wait_compacted(last, DELETED_WITHIN));
    assert_eq!(key_rows(&store), 100);
    assert_eq!(get(&store, "k00042", 0).expect("k00042").version, 250);
}
