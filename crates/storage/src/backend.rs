//! The redb backend: a copy-on-write B-tree file holding the applied state.
//!
//! Writers commit through [`Backend::begin_write`]; most commits are not made durable on
//! their own (the WAL already is), and [`Backend::commit`] makes every `durable_every`-th
//! commit, or any forced one, durable. After a crash redb rolls back to the last durable
//! commit and the WAL replays the rest: that is why the applied index must be written in
//! the same transaction as the data.
//!
//! While a snapshot [`crate::snapshot::Dump`] is being read, every commit is durable:
//! redb's reads of pages not in its cache then cost about twice as much, because each
//! miss looks for buffered pages to write back while non-durable commits have left some,
//! and a dump misses on nearly every page. A durable commit writes that buffer out.

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, TryLockError};

pub use redb;
use redb::{
    Database, Durability, ReadTransaction, ReadableDatabase, ReadableTable, WriteTransaction,
};

use crate::timing::Histogram;
use crate::{Result, StorageError, schema};

/// The backend database.
#[derive(Debug)]
pub struct Backend {
    /// The open database file. Replaced only by [`crate::defrag`], with every writer held
    /// at [`Backend::write_gate`]; a reader clones it and keeps what it read from.
    db: RwLock<Arc<Database>>,
    /// Held shared by every write transaction from begin to commit, and exclusively by a
    /// defragmentation while it copies the last changes and swaps the file.
    pub(crate) write_gate: RwLock<()>,
    /// Held by the one write transaction open at a time (redb allows one), taken after
    /// the write gate: held here so that a writer that must not wait can try it
    /// ([`Backend::try_begin_write`]).
    writer: Mutex<()>,
    path: PathBuf,
    /// Dumps being read (see the module doc).
    dumps: Arc<AtomicUsize>,
    /// Snapshot installs so far: a defragmentation that sees this move starts over.
    pub(crate) installs: AtomicU64,
    /// One defragmentation at a time.
    pub(crate) defragmenting: Mutex<()>,
    /// Held by whatever removes key rows outside the apply loop (a compaction's physical
    /// deletions, one transaction at a time), and by a defragmentation or a snapshot
    /// install for their whole run, so that no row vanishes under their copy. Taken
    /// before the write gate, never after.
    row_deletions: Mutex<()>,
    /// The time of every commit (etcd's backend commit duration).
    commit_timing: Histogram,
}

/// A write transaction on the backend. It holds the backend's write gate until it is
/// committed or dropped, so a defragmentation never swaps the file under it.
pub struct WriteTx<'b> {
    // Dropped first: the transaction ends before the guards are released.
    tx: WriteTransaction,
    _writer: MutexGuard<'b, ()>,
    _gate: RwLockReadGuard<'b, ()>,
}

/// A read transaction on the backend: a consistent snapshot of one commit. It keeps the
/// file it reads open, even after a defragmentation replaced it.
pub struct ReadTx {
    // Dropped before the database it reads.
    tx: ReadTransaction,
    _db: Arc<Database>,
}

impl Deref for ReadTx {
    type Target = ReadTransaction;

    fn deref(&self) -> &ReadTransaction {
        &self.tx
    }
}

impl Deref for WriteTx<'_> {
    type Target = WriteTransaction;

    fn deref(&self) -> &WriteTransaction {
        &self.tx
    }
}

/// Counts one open dump of a [`Backend`] for as long as it lives.
#[derive(Debug)]
pub struct DumpOpen(Arc<AtomicUsize>);

impl Drop for DumpOpen {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn backend_err(path: &Path, e: impl std::fmt::Display) -> StorageError {
    StorageError::Backend {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

/// Opens (or creates) a redb file with oxcd's settings.
pub(crate) fn create_database(path: &Path) -> Result<Database> {
    redb::Builder::new()
        .set_cache_size(CACHE_BYTES)
        .create(path)
        .map_err(|e| backend_err(path, e))
}

/// redb's page cache. Its default (1 GiB) made most of a member's memory after a million
/// keys; reads that miss it are served from the kernel's page cache.
const CACHE_BYTES: usize = 64 << 20;

/// What a fresh member's backend takes once it has applied its bootstrap entries and
/// the leader's first cluster version ([`Backend::size`]: redb's header and allocator
/// pages, a page for each table that holds a row: meta, members, and the pages the
/// commits of those first entries leave; 84-92 KiB measured since the cluster version is
/// replicated, 72 KiB before: how many non-durable commits land before the first durable
/// one, whose freed pages only a durable commit lets redb reuse, varies from run to run).
/// Measured, with a page to spare; the server's quota test checks it on a fresh member.
/// bbolt keeps such small buckets inline in one page, which is why etcd's fresh file is
/// smaller ([`ETCD_EMPTY_SIZE`]).
pub const EMPTY_SIZE: u64 = 96 * 1024;

/// What etcd's empty backend takes: bbolt's meta and freelist pages and the pages of its
/// buckets (etcd 3.5.16's `etcd_mvcc_db_total_size_in_bytes` on a fresh member).
pub const ETCD_EMPTY_SIZE: u64 = 20 * 1024;

/// The replicated state's hash as one commit holds it (see
/// [`Backend::state_hash_at_index`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateHash {
    /// Over every hashed row of every table ([`crate::tables::state_hash`]).
    pub hash: u32,
    /// The raft index the commit holds.
    pub index: u64,
    /// Each table's own hash, in registry order ([`crate::tables::state_hashes`]).
    pub tables: Vec<u32>,
}

impl Backend {
    /// Opens (or creates) the database file at `path` and makes sure every table exists.
    pub fn open(path: &Path) -> Result<Backend> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| StorageError::io(parent, e))?;
        }
        remove_defrag_leftover(path)?;
        let db = create_database(path)?;
        let backend = Backend {
            db: RwLock::new(Arc::new(db)),
            write_gate: RwLock::new(()),
            writer: Mutex::new(()),
            path: path.to_path_buf(),
            dumps: Arc::default(),
            installs: AtomicU64::new(0),
            defragmenting: Mutex::new(()),
            row_deletions: Mutex::new(()),
            commit_timing: Histogram::exponential(0.001, 2.0, 14),
        };
        let tx = backend.begin_write()?;
        crate::tables::create_all(&tx).map_err(|e| backend_err(path, e))?;
        backend.commit(tx, true)?;
        Ok(backend)
    }

    /// Starts a write transaction (waiting while a defragmentation swaps the file or
    /// another write transaction is open).
    pub fn begin_write(&self) -> Result<WriteTx<'_>> {
        let gate = self
            .write_gate
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let writer = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.open_write(gate, writer)
    }

    /// Starts a write transaction if no other is open and no defragmentation holds
    /// writers; None instead of waiting.
    pub fn try_begin_write(&self) -> Result<Option<WriteTx<'_>>> {
        let gate = match self.write_gate.try_read() {
            Ok(gate) => gate,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return Ok(None),
        };
        let writer = match self.writer.try_lock() {
            Ok(writer) => writer,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return Ok(None),
        };
        self.open_write(gate, writer).map(Some)
    }

    fn open_write<'b>(
        &'b self,
        gate: RwLockReadGuard<'b, ()>,
        writer: MutexGuard<'b, ()>,
    ) -> Result<WriteTx<'b>> {
        let tx = self
            .database()
            .begin_write()
            .map_err(|e| backend_err(&self.path, e))?;
        Ok(WriteTx {
            tx,
            _writer: writer,
            _gate: gate,
        })
    }

    /// Commits `tx`; durably (fsync) when `durable` or while a dump is read, otherwise
    /// only visible to readers.
    pub fn commit(&self, tx: WriteTx<'_>, durable: bool) -> Result<()> {
        let WriteTx {
            mut tx,
            _writer,
            _gate,
        } = tx;
        let d = if durable || self.commits_forced_durable() {
            Durability::Immediate
        } else {
            Durability::None
        };
        tx.set_durability(d)
            .map_err(|e| backend_err(&self.path, e))?;
        let started = std::time::Instant::now();
        let done = tx.commit().map_err(|e| backend_err(&self.path, e));
        self.commit_timing.observe(started.elapsed());
        done
    }

    /// The time commits took (etcd's buckets: 1 ms doubling up to 8.192 s).
    pub fn commit_timing(&self) -> &Histogram {
        &self.commit_timing
    }

    /// The database file open now.
    pub(crate) fn database(&self) -> Arc<Database> {
        self.db
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Puts `db` in place of the open database (the caller holds the write gate).
    pub(crate) fn replace_database(&self, db: Database) -> Arc<Database> {
        let mut slot = self
            .db
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        std::mem::replace(&mut *slot, Arc::new(db))
    }

    /// Whether commits are made durable whatever their caller asks (a dump is open).
    pub fn commits_forced_durable(&self) -> bool {
        self.dumps.load(Ordering::Acquire) > 0
    }

    /// Marks a dump open until the returned guard is dropped.
    pub(crate) fn dump_open(&self) -> DumpOpen {
        self.dumps.fetch_add(1, Ordering::AcqRel);
        DumpOpen(self.dumps.clone())
    }

    /// Starts a read transaction: a consistent snapshot of the last commit.
    pub fn begin_read(&self) -> Result<ReadTx> {
        let db = self.database();
        let tx = db.begin_read().map_err(|e| backend_err(&self.path, e))?;
        Ok(ReadTx { tx, _db: db })
    }

    /// The state hash of the last commit (see [`crate::tables::state_hash`]).
    pub fn state_hash(&self) -> Result<u32> {
        let tx = self.begin_read()?;
        crate::tables::state_hash(&tx).map_err(|e| self.err(e))
    }

    /// The state hash of the last commit and the raft index it holds, read together; None
    /// while a compaction's rows are still being deleted (scheduled above finished): the
    /// key rows and the finished mark then depend on how far this member got, not on the
    /// index, so the hash is not comparable with another member's.
    pub fn state_hash_at_index(&self) -> Result<Option<StateHash>> {
        let tx = self.begin_read()?;
        let compaction = |k| {
            Self::read_meta(&tx, k)
                .map_err(|e| self.err(e))
                .map(|v| v.unwrap_or_default())
        };
        if compaction(schema::META_SCHEDULED_COMPACT)? != compaction(schema::META_FINISHED_COMPACT)?
        {
            return Ok(None);
        }
        let (hash, tables) = crate::tables::state_hashes(&tx).map_err(|e| self.err(e))?;
        let index = Self::read_meta(&tx, schema::META_CONSISTENT_INDEX)
            .map_err(|e| self.err(e))?
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
            .unwrap_or(0);
        Ok(Some(StateHash {
            hash,
            index,
            tables,
        }))
    }

    /// Holds back key-row deletions outside the apply loop until the guard is dropped
    /// (see [`Backend`]'s `row_deletions`).
    pub fn hold_row_deletions(&self) -> std::sync::MutexGuard<'_, ()> {
        self.row_deletions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The backend's size in bytes as etcd counts its own (`dbSize`: every page the file
    /// has used, free ones included): the file's allocated blocks, at most its length.
    /// redb grows its file in powers of two below 4 GiB by extending it, and the
    /// extension takes no blocks until pages are written there, so this is what the data
    /// and its free pages take, not up to twice that ([`Backend::file_len`]). Where a
    /// filesystem reports no blocks, the length.
    pub fn size(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&self.path)
            .map(|m| match m.blocks() {
                0 => m.len(),
                blocks => m.len().min(blocks.saturating_mul(512)),
            })
            .unwrap_or(0)
    }

    /// The size the space quota holds against its limit: what the data takes beyond a
    /// fresh member's backend ([`EMPTY_SIZE`]), on top of what etcd's empty backend takes
    /// ([`ETCD_EMPTY_SIZE`]). The same data then counts the same against a quota as in
    /// etcd, however much larger redb's empty file is than bbolt's, so a member given a
    /// quota of a few pages takes what etcd takes. Status and `/metrics` report
    /// [`Backend::size`], what the file takes.
    pub fn quota_size(&self) -> u64 {
        self.size().saturating_sub(EMPTY_SIZE) + ETCD_EMPTY_SIZE
    }

    /// The database file's length in bytes.
    pub fn file_len(&self) -> u64 {
        std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0)
    }

    /// The database file path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Maps any redb error to a storage error naming this file.
    pub fn err(&self, e: impl std::fmt::Display) -> StorageError {
        backend_err(&self.path, e)
    }

    /// Every meta row whose key starts with `prefix`, in key order, from `meta` (the meta
    /// table of a read or a write transaction).
    pub fn meta_with_prefix<T: ReadableTable<&'static str, &'static [u8]>>(
        meta: &T,
        prefix: &str,
    ) -> std::result::Result<Vec<(String, Vec<u8>)>, redb::Error> {
        let mut out = Vec::new();
        for row in meta.range::<&str>(prefix..)? {
            let (k, v) = row?;
            if !k.value().starts_with(prefix) {
                break;
            }
            out.push((k.value().to_string(), v.value().to_vec()));
        }
        Ok(out)
    }

    /// Every row of a byte-keyed table, in key order, as of the last commit (for small
    /// tables loaded whole at start, such as leases).
    pub fn rows(
        &self,
        def: redb::TableDefinition<'static, &'static [u8], &'static [u8]>,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let tx = self.begin_read()?;
        let table = tx.open_table(def).map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in table.iter().map_err(|e| self.err(e))? {
            let (k, v) = row.map_err(|e| self.err(e))?;
            out.push((k.value().to_vec(), v.value().to_vec()));
        }
        Ok(out)
    }

    /// Writes (Some) or deletes (None) a meta value this member keeps for itself, not
    /// through the apply path (the storage version), and commits it durably.
    pub fn set_local_meta(&self, key: &str, value: Option<&[u8]>) -> Result<()> {
        let tx = self.begin_write()?;
        {
            let mut meta = tx.tx.open_table(schema::META).map_err(|e| self.err(e))?;
            match value {
                Some(v) => {
                    meta.insert(key, v).map_err(|e| self.err(e))?;
                }
                None => {
                    meta.remove(key).map_err(|e| self.err(e))?;
                }
            }
        }
        self.commit(tx, true)
    }

    /// Reads a meta value.
    pub fn read_meta(
        tx: &ReadTransaction,
        key: &str,
    ) -> std::result::Result<Option<Vec<u8>>, redb::Error> {
        let t = tx.open_table(schema::META)?;
        Ok(t.get(key)?.map(|v| v.value().to_vec()))
    }
}

/// The suffix of the file an online defragmentation writes ([`crate::defrag`]).
const DEFRAG_SUFFIX: &str = "defrag";

/// The temporary file a defragmentation of `path` writes.
pub(crate) fn defrag_temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".");
    name.push(DEFRAG_SUFFIX);
    path.with_file_name(name)
}

/// Removes what a defragmentation interrupted by a crash left next to `path`.
fn remove_defrag_leftover(path: &Path) -> Result<()> {
    let temp = defrag_temp_path(path);
    match std::fs::remove_file(&temp) {
        Ok(()) => {
            tracing::warn!(path = %temp.display(), "removed the file of an interrupted defragmentation");
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StorageError::io(&temp, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_counts_the_pages_written_at_most_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let b = Backend::open(&dir.path().join("db")).expect("open");
        let tx = b.begin_write().expect("write");
        {
            let mut t = tx.open_table(schema::KEY).expect("key table");
            for i in 0u32..3_000 {
                t.insert(i.to_be_bytes().as_slice(), vec![7u8; 10_000].as_slice())
                    .expect("insert");
            }
        }
        b.commit(tx, true).expect("commit");
        let (size, len) = (b.size(), b.file_len());
        assert!(size >= 30_000_000, "30 MB of values in {size} bytes");
        assert!(size <= len, "size {size} past the file's length {len}");
        eprintln!("30 MB of values: size {size} B, file length {len} B");
    }

    /// Two backends that differ in one row of the members table: their state hashes
    /// differ and the per-table hashes name that table alone; the raft position (an
    /// unhashed meta row) is not state.
    #[test]
    fn a_state_mismatch_names_its_table() {
        let dir = tempfile::tempdir().expect("tempdir");
        let open = |name: &str, row: &[u8]| {
            let b = Backend::open(&dir.path().join(name)).expect("open");
            let tx = b.begin_write().expect("write");
            tx.open_table(schema::MEMBERS)
                .expect("members")
                .insert(7u64.to_be_bytes().as_slice(), row)
                .expect("insert");
            b.commit(tx, true).expect("commit");
            b.set_local_meta(schema::META_CONSISTENT_INDEX, Some(&9u64.to_le_bytes()))
                .expect("index");
            b
        };
        let a = open("a", b"row").state_hash_at_index().expect("hash");
        let b = open("b", b"row with client URLs")
            .state_hash_at_index()
            .expect("hash");
        let (Some(a), Some(b)) = (a, b) else {
            panic!("no compaction is under way")
        };
        assert_eq!((a.index, b.index), (9, 9));
        assert_ne!(a.hash, b.hash);
        assert_eq!(
            crate::tables::differing_tables(&a.tables, &b.tables),
            [schema::MEMBERS_NAME]
        );
        let c = open("c", b"row").state_hash_at_index().expect("hash");
        assert_eq!(c, Some(a));
    }

    #[test]
    fn an_empty_backend_counts_as_etcds_empty_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let b = Backend::open(&dir.path().join("db")).expect("open");
        assert!(
            b.size() <= EMPTY_SIZE,
            "an empty backend takes {}",
            b.size()
        );
        assert_eq!(b.quota_size(), ETCD_EMPTY_SIZE);
    }
}
