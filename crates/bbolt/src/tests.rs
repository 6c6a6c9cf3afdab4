//! Round trips: what the writer writes, the reader reads back, whatever the sizes.

use super::*;

type Buckets = Vec<(Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>)>;

fn write(buckets: &Buckets) -> (tempfile::TempDir, std::path::PathBuf, u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let file = std::fs::File::create(&path).expect("create");
    let mut w = BoltWriter::new(file).expect("writer");
    for (name, kvs) in buckets {
        w.bucket(name).expect("bucket");
        for (k, v) in kvs {
            w.put(k, v).expect("put");
        }
    }
    let (_, size) = w.finish().expect("finish");
    (dir, path, size)
}

fn read(path: &std::path::Path) -> Buckets {
    let r = BoltReader::open(path).expect("open");
    let mut out = Vec::new();
    for (name, root) in r.buckets().expect("buckets") {
        let mut kvs = Vec::new();
        r.for_each(&root, &mut |k, v| {
            kvs.push((k.to_vec(), v.to_vec()));
            Ok(())
        })
        .expect("walk");
        out.push((name, kvs));
    }
    out
}

fn keys(n: usize, value_len: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..n)
        .map(|i| {
            let k = format!("key{i:08}").into_bytes();
            let v = (0..value_len).map(|j| (i + j) as u8).collect();
            (k, v)
        })
        .collect()
}

#[test]
fn round_trips_at_every_shape() {
    for (n, value_len) in [
        (0, 0),
        (1, 0),
        (1, 5000),
        (3, 20_000),
        (200, 10),
        (5000, 100),
        (60_000, 24),
        (300, 3000),
    ] {
        let buckets: Buckets = vec![
            (b"alarm".to_vec(), vec![]),
            (b"key".to_vec(), keys(n, value_len)),
            (b"meta".to_vec(), keys(3, 8)),
        ];
        let (_dir, path, size) = write(&buckets);
        assert_eq!(read(&path), buckets, "{n} keys of {value_len} B");
        let len = std::fs::metadata(&path).expect("stat").len();
        assert_eq!(len, size, "file length is pgid pages");
    }
}

/// The same calls to any writer: the buckets, in order.
fn replay<W: std::io::Write>(w: &mut BoltWriter<W>, buckets: &Buckets) {
    for (name, kvs) in buckets {
        w.bucket(name).expect("bucket");
        for (k, v) in kvs {
            w.put(k, v).expect("put");
        }
    }
}

#[test]
fn a_planned_stream_is_the_file_byte_for_byte() {
    for (n, value_len) in [(0, 0), (1, 5000), (3, 20_000), (5000, 100), (300, 3000)] {
        let buckets: Buckets = vec![
            (b"alarm".to_vec(), vec![]),
            (b"key".to_vec(), keys(n, value_len)),
            (b"meta".to_vec(), keys(3, 8)),
        ];
        let (_dir, path, size) = write(&buckets);
        let mut plan = BoltWriter::plan();
        replay(&mut plan, &buckets);
        let layout = plan.layout().expect("layout");
        assert_eq!(layout.size(), size);
        let mut w = BoltWriter::with_layout(Vec::new(), layout).expect("stream");
        replay(&mut w, &buckets);
        let streamed = w.finish_stream().expect("finish");
        assert!(
            streamed == std::fs::read(&path).expect("read"),
            "{n} keys of {value_len} B"
        );
    }
}

#[test]
fn a_stream_that_strays_from_its_plan_is_refused() {
    let buckets: Buckets = vec![(b"key".to_vec(), keys(5000, 100))];
    let mut plan = BoltWriter::plan();
    replay(&mut plan, &buckets);
    let layout = plan.layout().expect("layout");
    let mut w = BoltWriter::with_layout(Vec::new(), layout).expect("stream");
    replay(&mut w, &vec![(b"key".to_vec(), keys(6000, 100))]);
    let err = w.finish_stream().expect_err("more pages than planned");
    assert!(err.to_string().contains("differed from the plan"), "{err}");
}

#[test]
fn out_of_order_and_oversized_input_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = std::fs::File::create(dir.path().join("db")).expect("create");
    let mut w = BoltWriter::new(file).expect("writer");
    assert!(w.put(b"k", b"v").is_err(), "put before a bucket");
    w.bucket(b"b").expect("bucket");
    w.put(b"k2", b"v").expect("put");
    assert!(w.put(b"k1", b"v").is_err());
    assert!(w.put(b"k2", b"v").is_err());
    assert!(w.put(b"", b"v").is_err());
    assert!(w.put(&vec![b'x'; page::MAX_KEY_SIZE + 1], b"v").is_err());
    assert!(w.bucket(b"a").is_err(), "bucket names must increase");
}

#[test]
fn key_order_is_kept_across_pages() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = std::fs::File::create(dir.path().join("db")).expect("create");
    let mut w = BoltWriter::new(file).expect("writer");
    w.bucket(b"b").expect("bucket");
    for (k, v) in keys(1000, 100) {
        w.put(&k, &v).expect("put");
    }
    assert!(w.put(b"key00000005", b"v").is_err());
}

#[test]
fn damage_is_an_error_not_a_panic() {
    let buckets: Buckets = vec![(b"key".to_vec(), keys(5000, 100))];
    let (_dir, path, size) = write(&buckets);
    let good = std::fs::read(&path).expect("read");
    // Truncated: the metas still name pages past the end.
    std::fs::write(&path, &good[..good.len() / 2]).expect("write");
    let r = BoltReader::open(&path).expect("metas are intact");
    let err = r
        .buckets()
        .and_then(|b| {
            for (_, root) in b {
                r.for_each(&root, &mut |_, _| Ok(()))?;
            }
            Ok(())
        })
        .expect_err("a truncated file");
    assert!(err.to_string().contains("page"), "{err}");
    // Both metas broken.
    let mut bad = good.clone();
    bad[16] ^= 0xff;
    bad[page::PAGE_SIZE + 16] ^= 0xff;
    std::fs::write(&path, &bad).expect("write");
    assert_eq!(
        BoltReader::open(&path).err().map(|e| e.to_string()),
        Some("invalid database".to_string())
    );
    // Every single-byte flip in the data pages: an error or a (different) read, never a
    // panic.
    for at in (2 * page::PAGE_SIZE..size as usize).step_by(1009) {
        let mut flipped = good.clone();
        flipped[at] ^= 0x5a;
        std::fs::write(&path, &flipped).expect("write");
        if let Ok(r) = BoltReader::open(&path)
            && let Ok(b) = r.buckets()
        {
            for (_, root) in b {
                let _ = r.for_each(&root, &mut |_, _| Ok(()));
            }
        }
    }
    // Too small.
    std::fs::write(&path, &good[..100]).expect("write");
    assert!(BoltReader::open(&path).is_err());
}
