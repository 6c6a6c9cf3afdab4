//! etcd's backend (a bbolt file, from etcd 3.4, 3.5 or oxcd's own snapshot) written as
//! an oxcd backend, streamed row by row: one thread reads the file and hands batches of
//! [`FLUSH_BYTES`] of rows to another, which commits each in one redb transaction (the
//! last one durable) while the next is read, and a third writes back to disk what the
//! commits left in the kernel's cache meanwhile; at most three batches are in memory.
//! `oxcdutl snapshot restore` makes a new member's backend this way, and a member of an
//! etcd cluster the backend of a snapshot etcd's leader sent it.
//!
//! - `key`, `lease`, `auth`, `authUsers`, `authRoles`: copied as they are (oxcd keeps
//!   etcd's encodings); every `key` row must be a revision and a `KeyValue` (a row with
//!   an empty value too: a bumped revision's mark);
//! - `meta`: the compaction revisions (`finishedCompactRev`, `scheduledCompactRev`) as
//!   they are; etcd's raft position (`consistent_index`, `term`) and `confState` are
//!   dropped: a restored member starts at index 0 and applies its WAL's bootstrap
//!   entries, which give it its configuration, and a snapshot's position and
//!   configuration are its raft metadata's;
//! - `alarm`: each encoded `AlarmMember` key becomes oxcd's `alarm/<id>/<type>` meta row
//!   (alarms survive a restore, as in etcd);
//! - `members`, `members_removed`, `cluster`: dropped by a restore (the new cluster's
//!   members come from the WAL's bootstrap, as etcd 3.5 replaces them); carried for a
//!   snapshot of the running cluster ([`Import::cluster`]): each member's JSON as oxcd's
//!   member row and its published attributes, each removed id, the cluster version and
//!   the downgrade;
//! - any other bucket: dropped.
//!
//! `--bump-revision N --mark-compacted`, as etcdutl 3.5: a row with an empty value at
//! `{latest.main + N, 0}` (latest: the greatest revision in `key`, `{0, 0}` if none) and
//! `scheduledCompactRev` set to it; the member finishes that compaction when it starts.
//!
//! A backend imported from a raft snapshot an etcd member sent, or from an etcd
//! member's data dir the binary swap adopts, is then made that snapshot
//! ([`record_etcd_snapshot`]): its raft position, configuration, log vocabulary,
//! members and cluster version.

use std::path::Path;

use std::path::PathBuf;

use oxcd_api::etcdserverpb::AlarmMember;
use oxcd_api::oxcdpb::MemberAttributes;
use oxcd_bbolt::{BoltReader, BucketRoot, ReadError};
use oxcd_mvcc::Revision;
use oxcd_storage::StorageError;
use oxcd_storage::backend::Backend;
use oxcd_storage::backend::redb::{TableDefinition, TableHandle};
use oxcd_storage::schema;
use prost::Message as _;

use crate::domains::membership;
use crate::machine::vocabulary::{LogVocabulary, Vocabulary};

/// Rows handed to the writer at a time, each batch one transaction. Small: a redb
/// transaction larger than its write buffer costs far more per row (688 MB restored in
/// 4.0-4.5 s with batches of 2 to 16 MiB, 5.6-6.3 s with 32 MiB).
const FLUSH_BYTES: usize = 8 << 20;

/// What was written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    /// Rows of the key table (the bump's mark included).
    pub key_rows: u64,
    /// The greatest revision in the key table, after the bump.
    pub revision: i64,
}

/// What is carried over besides the data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Import {
    /// Raise the revision by this much (0: no bump).
    pub bump: u64,
    /// Carry the membership, the cluster version and the downgrade (a snapshot of the
    /// running cluster); a restore starts a new cluster and drops them.
    pub cluster: bool,
}

/// Why an etcd backend could not be written as oxcd's (the texts are etcdutl's where it
/// has one).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// Not a bbolt file.
    #[error(
        "snapshot file {path:?} is not a bbolt database (the format of etcd's snapshots and backends): {source}"
    )]
    NotBbolt {
        /// The file.
        path: PathBuf,
        /// The reader's refusal.
        source: ReadError,
    },
    /// The file could not be read.
    #[error("{}", oxcd_go::os::path_error("read", .path, .source))]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A damaged bbolt file.
    #[error("snapshot file {path:?} is damaged: {source}")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is damaged.
        source: ReadError,
    },
    /// A row oxcd cannot load.
    #[error("snapshot file {path:?}: {row}")]
    Row {
        /// The file.
        path: PathBuf,
        /// What is wrong with the row.
        row: BadRow,
    },
    /// The backend could not be written.
    #[error(transparent)]
    Backend(#[from] StorageError),
    /// The thread writing the backend stopped.
    #[error("restore: the backend writer stopped")]
    WriterStopped,
    /// The thread writing the backend panicked.
    #[error("restore: the backend writer panicked")]
    WriterPanicked,
}

/// A row of etcd's backend that oxcd cannot load.
#[derive(Debug, thiserror::Error)]
pub enum BadRow {
    /// A `key` row whose key is not a revision.
    #[error("key row {0:02x?} is not a revision")]
    NotRevision(Vec<u8>),
    /// A `key` row whose value is not a `KeyValue`.
    #[error("key row {key:02x?} does not hold a key-value: {source}")]
    NotKeyValue {
        /// The row's key.
        key: Vec<u8>,
        /// The decoder's error.
        source: prost::DecodeError,
    },
    /// An `alarm` row whose key is not an `AlarmMember`.
    #[error("an alarm that does not decode: {0}")]
    Alarm(prost::DecodeError),
    /// A compaction revision in `meta` that is not a revision.
    #[error("meta {0} is not a revision")]
    MetaNotRevision(String),
    /// A `members` row that is not etcd's member JSON.
    #[error("member {key} is not etcd's member JSON: {source}")]
    Member {
        /// The row's key.
        key: String,
        /// The parser's error.
        source: serde_json::Error,
    },
    /// A `members_removed` key that is not a hex id.
    #[error("removed member {0:?} is not an id")]
    RemovedId(String),
    /// A meta key that is not UTF-8.
    #[error("a meta key is not UTF-8")]
    MetaKey,
}

type Bytes = TableDefinition<'static, &'static [u8], &'static [u8]>;

/// Why a bucket's rows are refused.
type RowCheck = fn(&[u8], &[u8]) -> Result<(), BadRow>;

/// Called with each row of a bucket; an error stops the walk.
type RowVisitor<'a> = dyn FnMut(&[u8], &[u8]) -> Result<(), ImportError> + 'a;

/// Writes the database in the first `db_len` bytes of `src` as an oxcd backend at
/// `dest` (created), carrying what `import` says, as described in the module doc.
pub fn write(src: &Path, db_len: u64, dest: &Path, import: Import) -> Result<Written, ImportError> {
    let db = BoltReader::open_first(src, db_len).map_err(|e| unreadable(src, e))?;
    let buckets = db.buckets().map_err(|e| unreadable(src, e))?;
    let backend = Backend::open(dest)?;
    let (to_writer, batches) = std::sync::mpsc::sync_channel(1);
    let (committed, commits) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| write_back_behind(dest, commits));
        let writer = s.spawn(|| commit_batches(&backend, batches, committed));
        let read = read_rows(&db, src, &buckets, import, Sink::new(to_writer));
        let wrote = writer.join().unwrap_or(Err(ImportError::WriterPanicked));
        // The writer's error first: a reader it stopped only knows that it stopped.
        wrote?;
        read
    })
}

/// Reads every bucket of `db` into `out`, then the bump's rows (see the module doc).
fn read_rows(
    db: &BoltReader,
    src: &Path,
    buckets: &[(Vec<u8>, BucketRoot)],
    import: Import,
    mut out: Sink,
) -> Result<Written, ImportError> {
    let bump = import.bump;
    let bad = |row: BadRow| ImportError::Row {
        path: src.to_path_buf(),
        row,
    };
    let mut latest = None;
    let mut key_rows = 0u64;
    for (name, root) in buckets {
        let table: Option<(Bytes, Option<RowCheck>)> = match name.as_slice() {
            b"key" => Some((schema::KEY, Some(check_key_row))),
            b"lease" => Some((schema::LEASE, None)),
            b"auth" => Some((schema::AUTH, None)),
            b"authUsers" => Some((schema::AUTH_USERS, None)),
            b"authRoles" => Some((schema::AUTH_ROLES, None)),
            _ => None,
        };
        if let Some((table, check)) = table {
            let is_key = name == b"key";
            each(db, src, root, &mut |k, v| {
                if let Some(check) = check {
                    check(k, v).map_err(bad)?;
                }
                if is_key {
                    key_rows += 1;
                    latest = Revision::from_bytes(k).map(|(r, _)| r).max(latest);
                }
                out.put(Table::Bytes(table), k, v)
            })?;
        } else if name == b"alarm" {
            each(db, src, root, &mut |k, _| {
                let a = AlarmMember::decode(k).map_err(|e| bad(BadRow::Alarm(e)))?;
                let key = crate::machine::alarms::key(a.member_id, a.alarm);
                out.put(Table::Meta, key.as_bytes(), &[])
            })?;
        } else if name == b"meta" {
            each(db, src, root, &mut |k, v| {
                let carried = [
                    schema::META_FINISHED_COMPACT,
                    schema::META_SCHEDULED_COMPACT,
                ];
                if carried.iter().any(|c| c.as_bytes() == k) {
                    if Revision::from_bytes(v).is_none() {
                        return Err(bad(BadRow::MetaNotRevision(
                            String::from_utf8_lossy(k).into_owned(),
                        )));
                    }
                    out.put(Table::Meta, k, v)?;
                }
                Ok(())
            })?;
        } else if import.cluster {
            carry_cluster(db, src, name, root, &mut out)?;
        }
    }
    let mut revision = latest.map_or(0, |r| r.main);
    if bump > 0 {
        let bumped = Revision::new(revision.saturating_add(bump as i64), 0).to_bytes(false);
        out.put(Table::Bytes(schema::KEY), &bumped, &[])?;
        out.put(
            Table::Meta,
            schema::META_SCHEDULED_COMPACT.as_bytes(),
            &bumped,
        )?;
        revision = revision.saturating_add(bump as i64);
        key_rows += 1;
    }
    out.finish()?;
    Ok(Written { key_rows, revision })
}

/// Carries the rows of bucket `name` that describe the running cluster: its members,
/// the ids removed from it, its version and downgrade.
fn carry_cluster(
    db: &BoltReader,
    src: &Path,
    name: &[u8],
    root: &BucketRoot,
    out: &mut Sink,
) -> Result<(), ImportError> {
    let bad = |row: BadRow| ImportError::Row {
        path: src.to_path_buf(),
        row,
    };
    match name {
        b"members" => each(db, src, root, &mut |k, v| {
            let m: crate::domains::membership::etcd_json::EtcdMember = serde_json::from_slice(v)
                .map_err(|source| {
                    bad(BadRow::Member {
                        key: String::from_utf8_lossy(k).into_owned(),
                        source,
                    })
                })?;
            // Published: etcd's UpdateAttributes wrote client URLs (a bootstrap member
            // has a name before it publishes, as the row of a member that replayed the
            // same log has, and no attributes row).
            let published = m.client_urls.is_some();
            let member = m.into_info();
            out.put(
                Table::Bytes(schema::MEMBERS),
                &member.id.to_be_bytes(),
                &member.encode_to_vec(),
            )?;
            if published {
                let attrs = MemberAttributes {
                    id: member.id,
                    name: member.name,
                    client_urls: member.client_urls,
                };
                let key = format!("{}{:016x}", schema::META_MEMBER_ATTRIBUTES_PREFIX, attrs.id);
                out.put(Table::Meta, key.as_bytes(), &attrs.encode_to_vec())?;
            }
            Ok(())
        }),
        b"members_removed" => each(db, src, root, &mut |k, _| {
            let text = String::from_utf8_lossy(k);
            let id = u64::from_str_radix(&text, 16)
                .map_err(|_| bad(BadRow::RemovedId(text.clone().into_owned())))?;
            out.put(
                Table::Bytes(schema::MEMBERS_REMOVED),
                &id.to_be_bytes(),
                &[],
            )
        }),
        b"cluster" => each(db, src, root, &mut |k, v| {
            let key = match k {
                b"clusterVersion" => schema::META_CLUSTER_VERSION,
                b"downgrade" => schema::META_DOWNGRADE,
                _ => return Ok(()),
            };
            out.put(Table::Meta, key.as_bytes(), v)
        }),
        _ => Ok(()),
    }
}

/// Calls `f` with each row of the bucket at `root`.
fn each(
    db: &BoltReader,
    src: &Path,
    root: &BucketRoot,
    f: &mut RowVisitor<'_>,
) -> Result<(), ImportError> {
    let mut failed = None;
    let read = db.for_each(root, &mut |k, v| {
        f(k, v).map_err(|e| {
            failed = Some(e);
            ReadError::NoBucket
        })
    });
    match (failed, read) {
        (Some(e), _) => Err(e),
        (None, Err(e)) => Err(unreadable(src, e)),
        (None, Ok(())) => Ok(()),
    }
}

/// A key-table row oxcd can load: a revision key and a `KeyValue` value.
fn check_key_row(k: &[u8], v: &[u8]) -> Result<(), BadRow> {
    if Revision::from_bytes(k).is_none() {
        return Err(BadRow::NotRevision(k.to_vec()));
    }
    oxcd_api::mvccpb::KeyValue::decode(v)
        .map(drop)
        .map_err(|source| BadRow::NotKeyValue {
            key: k.to_vec(),
            source,
        })
}

/// The error for a file the bbolt reader refuses: not bbolt at all, or damaged.
fn unreadable(src: &Path, e: ReadError) -> ImportError {
    let path = src.to_path_buf();
    match e {
        ReadError::Meta(oxcd_bbolt::page::MetaError::Invalid) | ReadError::TooSmall => {
            ImportError::NotBbolt { path, source: e }
        }
        ReadError::Io(source) => ImportError::Read { path, source },
        source => ImportError::Damaged { path, source },
    }
}

/// Which table a row goes to.
#[derive(Clone, Copy)]
enum Table {
    Bytes(Bytes),
    Meta,
}

/// Rows for one transaction: their bytes in one buffer (one allocation per batch, not
/// two per row), and whether it is the last (durable) one.
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
    /// Each row: its table and the lengths of its key and value, in `bytes` in turn.
    rows: Vec<(Table, usize, usize)>,
    last: bool,
}

impl Batch {
    /// Each row: table, key, value.
    fn iter(&self) -> impl Iterator<Item = (Table, &[u8], &[u8])> {
        let mut at = 0;
        self.rows.iter().map(move |&(table, kl, vl)| {
            let k = &self.bytes[at..at + kl];
            let v = &self.bytes[at + kl..at + kl + vl];
            at += kl + vl;
            (table, k, v)
        })
    }
}

/// Rows on their way to the backend: buffered, then handed to the writer in batches.
struct Sink {
    to_writer: std::sync::mpsc::SyncSender<Batch>,
    batch: Batch,
}

impl Sink {
    fn new(to_writer: std::sync::mpsc::SyncSender<Batch>) -> Sink {
        Sink {
            to_writer,
            batch: Batch::default(),
        }
    }

    fn put(&mut self, table: Table, k: &[u8], v: &[u8]) -> Result<(), ImportError> {
        if self.batch.bytes.capacity() == 0 {
            self.batch.bytes.reserve(FLUSH_BYTES + (64 << 10));
        }
        self.batch.bytes.extend_from_slice(k);
        self.batch.bytes.extend_from_slice(v);
        self.batch.rows.push((table, k.len(), v.len()));
        if self.batch.bytes.len() + 64 * self.batch.rows.len() >= FLUSH_BYTES {
            self.hand_over(false)?;
        }
        Ok(())
    }

    /// Hands the buffered rows to the writer; `last` makes their transaction durable.
    fn hand_over(&mut self, last: bool) -> Result<(), ImportError> {
        let mut batch = std::mem::take(&mut self.batch);
        batch.last = last;
        self.to_writer
            .send(batch)
            .map_err(|_| ImportError::WriterStopped)
    }

    /// Hands over what is left, to be written durably with everything before it.
    fn finish(mut self) -> Result<(), ImportError> {
        self.hand_over(true)
    }
}

/// The writer's side: each batch in one transaction, until the reader stops.
fn commit_batches(
    backend: &Backend,
    batches: std::sync::mpsc::Receiver<Batch>,
    committed: std::sync::mpsc::Sender<()>,
) -> Result<(), ImportError> {
    for batch in batches {
        commit(backend, &batch)?;
        let _ = committed.send(());
    }
    Ok(())
}

/// After each commit, writes back to disk what the commits so far left in the kernel's
/// cache (fdatasync on a descriptor of its own), while the writer goes on: the last,
/// durable commit then finds little to sync, where it would otherwise write the whole
/// backend after the CPU work is done. Best effort: that commit reports any I/O error.
fn write_back_behind(dest: &Path, commits: std::sync::mpsc::Receiver<()>) {
    let Ok(file) = std::fs::File::open(dest) else {
        return;
    };
    while commits.recv().is_ok() {
        // Commits made while the last write-back ran are covered by this one.
        while commits.try_recv().is_ok() {}
        if file.sync_data().is_err() {
            return;
        }
    }
}

/// Writes `batch` in one transaction, synced if it is the last.
fn commit(backend: &Backend, batch: &Batch) -> Result<(), ImportError> {
    let be = |e: oxcd_storage::backend::redb::Error| ImportError::Backend(backend.err(e));
    let tx = backend.begin_write()?;
    {
        let mut meta = tx.open_table(schema::META).map_err(|e| be(e.into()))?;
        let mut open: Option<(Bytes, _)> = None;
        for (table, k, v) in batch.iter() {
            match table {
                Table::Meta => {
                    let k = std::str::from_utf8(k).map_err(|_| ImportError::Row {
                        path: backend.path().to_path_buf(),
                        row: BadRow::MetaKey,
                    })?;
                    meta.insert(k, v).map_err(|e| be(e.into()))?;
                }
                Table::Bytes(def) => {
                    if open.as_ref().is_none_or(|(d, _)| d.name() != def.name()) {
                        drop(open.take());
                        open = Some((def, tx.open_table(def).map_err(|e| be(e.into()))?));
                    }
                    if let Some((_, t)) = open.as_mut() {
                        t.insert(k, v).map_err(|e| be(e.into()))?;
                    }
                }
            }
        }
    }
    Ok(backend.commit(tx, batch.last)?)
}

/// Makes the backend imported from an etcd member's bbolt file raft's snapshot at
/// `(index, term)` with the configuration `conf_state` (encoded): its position and
/// configuration, its log in etcd's vocabulary, and the members and cluster version of
/// `cluster` (the raft snapshot's v2 store, which etcd 3.5 boots from: the bbolt file's
/// own copies can be stale).
pub fn record_etcd_snapshot(
    backend: &Backend,
    (index, term, conf_state): (u64, u64, &[u8]),
    cluster: &crate::backup::v2store::V2Cluster,
) -> Result<(), oxcd_mvcc::MvccError> {
    backend.set_local_meta(schema::META_CONSISTENT_INDEX, Some(&index.to_le_bytes()))?;
    backend.set_local_meta(schema::META_CONSISTENT_TERM, Some(&term.to_le_bytes()))?;
    backend.set_local_meta(schema::META_CONF_STATE, Some(conf_state))?;
    LogVocabulary::from_start(Vocabulary::Etcd).record(backend)?;
    membership::table::replace(backend, &cluster.membership, &cluster.attributes)?;
    if let Some(v) = &cluster.version {
        backend.set_local_meta(schema::META_CLUSTER_VERSION, Some(v.as_bytes()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxcd_api::mvccpb::KeyValue;
    use oxcd_bbolt::BoltWriter;
    use oxcd_storage::backend::redb::ReadableTable;

    fn rev(main: i64, tomb: bool) -> Vec<u8> {
        Revision::new(main, 0).to_bytes(tomb)
    }

    /// An etcd 3.5 backend in miniature: every bucket etcd has.
    fn etcd_file(path: &Path) {
        let mut w = BoltWriter::new(std::fs::File::create(path).expect("create")).expect("w");
        let alarm = AlarmMember {
            member_id: 0xbdae9bbc11dd390d,
            alarm: 1,
        };
        let put = |w: &mut BoltWriter, k: &[u8], v: &[u8]| w.put(k, v).expect("put");
        w.bucket(b"alarm").expect("bucket");
        put(&mut w, &alarm.encode_to_vec(), b"");
        w.bucket(b"auth").expect("bucket");
        put(&mut w, b"authEnabled", &[1]);
        w.bucket(b"cluster").expect("bucket");
        put(&mut w, b"clusterVersion", b"3.5.0");
        w.bucket(b"key").expect("bucket");
        let kv = |key: &str, r: i64| {
            KeyValue {
                key: key.into(),
                create_revision: 2,
                mod_revision: r,
                version: r - 1,
                value: b"v".to_vec(),
                lease: 0,
            }
            .encode_to_vec()
        };
        put(&mut w, &rev(2, false), &kv("a", 2));
        put(&mut w, &rev(3, false), &kv("a", 3));
        let tomb = KeyValue {
            key: b"a".to_vec(),
            ..Default::default()
        };
        put(&mut w, &rev(4, true), &tomb.encode_to_vec());
        w.bucket(b"lease").expect("bucket");
        put(&mut w, &7i64.to_be_bytes(), b"\x08\x07\x10\x3c");
        w.bucket(b"members").expect("bucket");
        put(
            &mut w,
            b"bdae9bbc11dd390d",
            br#"{"id":1,"peerURLs":["http://a:1"]}"#,
        );
        w.bucket(b"meta").expect("bucket");
        put(
            &mut w,
            b"confState",
            br#"{"voters":[1],"auto_leave":false}"#,
        );
        put(&mut w, b"consistent_index", &11u64.to_be_bytes());
        put(&mut w, b"finishedCompactRev", &rev(3, false));
        put(&mut w, b"scheduledCompactRev", &rev(3, false));
        put(&mut w, b"term", &2u64.to_be_bytes());
        w.finish().expect("finish");
    }

    fn rows(b: &Backend, def: Bytes) -> Vec<(Vec<u8>, Vec<u8>)> {
        b.rows(def).expect("rows")
    }

    #[test]
    fn etcds_buckets_become_oxcds_tables() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = dir.path().join("etcd.db");
        etcd_file(&src);
        let len = std::fs::metadata(&src).expect("stat").len();
        let dest = dir.path().join("db");
        let written = write(&src, len, &dest, Import::default()).expect("restore");
        assert_eq!(
            written,
            Written {
                key_rows: 3,
                revision: 4
            }
        );
        let b = Backend::open(&dest).expect("open");
        assert_eq!(rows(&b, schema::KEY).len(), 3);
        assert_eq!(rows(&b, schema::LEASE).len(), 1);
        assert_eq!(rows(&b, schema::AUTH), [(b"authEnabled".to_vec(), vec![1])]);
        assert!(
            rows(&b, schema::MEMBERS).is_empty(),
            "members come from the WAL"
        );
        let tx = b.begin_read().expect("read");
        let meta: Vec<String> = tx
            .open_table(schema::META)
            .expect("meta")
            .iter()
            .expect("iter")
            .map(|r| r.expect("row").0.value().to_string())
            .collect();
        assert_eq!(
            meta,
            [
                "alarm/bdae9bbc11dd390d/1",
                "finishedCompactRev",
                "scheduledCompactRev"
            ],
            "the raft position and confState are not carried"
        );
    }

    #[test]
    fn a_snapshot_of_the_running_cluster_carries_its_members_and_version() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = dir.path().join("etcd.db");
        etcd_file(&src);
        let len = std::fs::metadata(&src).expect("stat").len();
        let dest = dir.path().join("db");
        write(
            &src,
            len,
            &dest,
            Import {
                bump: 0,
                cluster: true,
            },
        )
        .expect("import");
        let b = Backend::open(&dest).expect("open");
        let members = rows(&b, schema::MEMBERS);
        assert_eq!(members.len(), 1);
        assert_eq!(members[0].0, 1u64.to_be_bytes());
        let m = oxcd_api::oxcdpb::MemberInfo::decode(members[0].1.as_slice()).expect("member");
        assert_eq!(m.peer_urls, ["http://a:1"]);
        let tx = b.begin_read().expect("read");
        assert_eq!(
            Backend::read_meta(&tx, schema::META_CLUSTER_VERSION).expect("meta"),
            Some(b"3.5.0".to_vec())
        );
    }

    #[test]
    fn a_bump_marks_the_revision_and_schedules_its_compaction() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = dir.path().join("etcd.db");
        etcd_file(&src);
        let len = std::fs::metadata(&src).expect("stat").len();
        let dest = dir.path().join("db");
        let written = write(
            &src,
            len,
            &dest,
            Import {
                bump: 100,
                cluster: false,
            },
        )
        .expect("restore");
        assert_eq!(written.revision, 104, "latest (the tombstone at 4) + 100");
        let b = Backend::open(&dest).expect("open");
        let keys = rows(&b, schema::KEY);
        assert_eq!(keys.last(), Some(&(rev(104, false), Vec::new())));
        let tx = b.begin_read().expect("read");
        assert_eq!(
            Backend::read_meta(&tx, schema::META_SCHEDULED_COMPACT).expect("meta"),
            Some(rev(104, false))
        );
        assert_eq!(
            Backend::read_meta(&tx, schema::META_FINISHED_COMPACT).expect("meta"),
            Some(rev(3, false))
        );
    }
}
