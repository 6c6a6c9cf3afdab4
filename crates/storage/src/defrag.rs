//! Defragmentation that does not stop the member: the backend is copied into a fresh
//! file while reads and writes go on, the copy catches up with what was written in the
//! meantime, and only the last catch-up (a few rows) runs with writers held. Then the
//! fresh file is renamed over the old one and takes its place.
//!
//! etcd's defragmentation holds every read and write of the member for the whole copy;
//! on a large database that is seconds to minutes. Here the pause is one small catch-up
//! and one fsync.
//!
//! How a catch-up knows what changed, table by table:
//! - `key`: rows are written once, at revisions above every existing row, and only a
//!   compaction's background deletions (held back while a defragmentation runs) or a
//!   snapshot install removes them. So a catch-up copies the rows past the last one
//!   copied, and, when the compaction marks moved, makes the rows copied before equal to
//!   the source's by walking both in step.
//! - every other table is small (meta, leases, auth, members) and is copied whole.
//! - a snapshot install replaces everything: a defragmentation that sees one starts over.
//!
//! Invariants:
//! - The fresh file is complete and fsynced before it is renamed over the old one, and
//!   the rename is fsynced in the directory: a crash at any point leaves either the old
//!   file (and a leftover temporary file, removed at the next open) or the new one.
//! - The last catch-up runs with the write gate held exclusively, so no write lands in
//!   the old file after it was read, and none is lost.
//! - Readers are never held: before the swap they read the old file, which holds every
//!   commit up to then; after it, the new one.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use redb::{
    Database, Durability, ReadTransaction, ReadableDatabase, ReadableTable, WriteTransaction,
};

use crate::backend::{Backend, create_database, defrag_temp_path as temp_path};
use crate::tables::{KeyKind, TABLES, TableSpec};
use crate::{Result, StorageError, schema};

/// Suffix of the fresh file while it is being written, next to the backend file.
/// A catch-up that copied fewer key rows than this is small enough to repeat with
/// writers held.
const SMALL_CATCH_UP: u64 = 2_000;
/// Catch-ups before the held one, at most (a member written faster than it copies
/// still ends, with a longer pause).
const MAX_ROUNDS: u32 = 8;
/// Bytes of key rows copied in one transaction of the fresh file.
#[cfg(not(test))]
const CHUNK_BYTES: usize = 64 << 20;
/// Small in unit tests, so that copies span many transactions.
#[cfg(test)]
const CHUNK_BYTES: usize = 64 << 10;
/// Attempts when snapshot installs keep restarting the copy.
const MAX_ATTEMPTS: u32 = 3;

/// What a defragmentation did.
#[derive(Debug, Clone)]
pub struct DefragReport {
    /// File size before, in bytes.
    pub size_before: u64,
    /// File size after, in bytes.
    pub size_after: u64,
    /// Catch-ups made while writes went on.
    pub rounds: u32,
    /// How long writers were held.
    pub paused: Duration,
    /// How long it took in all.
    pub took: Duration,
}

/// Where a copy stands: the last key row copied and the compaction marks it saw.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Mark {
    last_key: Option<Vec<u8>>,
    compaction: (Option<Vec<u8>>, Option<Vec<u8>>),
}

impl Backend {
    /// Rewrites the backend file compactly, to its live data, while the member keeps
    /// serving (see the module doc). One at a time: a second call waits for the first.
    pub fn defragment(&self) -> Result<DefragReport> {
        let _one = self
            .defragmenting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // A compaction's background deletions wait: a row deleted behind the copy's
        // position would stay in the copy, unseen by the catch-ups (they look for new
        // rows and for moved compaction marks).
        let _no_deletions = self.hold_row_deletions();
        let temp = temp_path(self.path());
        for _ in 0..MAX_ATTEMPTS {
            match self.defragment_once(&temp) {
                Ok(Some(report)) => return Ok(report),
                Ok(None) => {
                    let _ = std::fs::remove_file(&temp);
                }
                Err(e) => {
                    let _ = std::fs::remove_file(&temp);
                    return Err(e);
                }
            }
        }
        Err(self.err("defragmentation abandoned: snapshot installs kept replacing the data"))
    }

    /// One attempt; None when a snapshot install replaced the data during the copy.
    fn defragment_once(&self, temp: &Path) -> Result<Option<DefragReport>> {
        let started = Instant::now();
        let size_before = self.file_len();
        let installs = self.installs.load(Ordering::Acquire);
        let _ = std::fs::remove_file(temp);
        let fresh = create_database(temp)?;
        let mut mark = Mark::default();
        let mut rounds = 0;
        loop {
            let old = self.database();
            let src = old.begin_read().map_err(|e| self.err(e))?;
            // Durable: the fsync that writes the bulk of the copy out happens here, while
            // writes go on, not in the held round.
            let (next, copied) =
                catch_up(&src, &fresh, &mark, Durability::Immediate).map_err(|e| self.err(e))?;
            let compacted = next.compaction != mark.compaction;
            mark = next;
            rounds += 1;
            if self.installs.load(Ordering::Acquire) != installs {
                return Ok(None);
            }
            if (rounds > 1 && copied < SMALL_CATCH_UP && !compacted) || rounds >= MAX_ROUNDS {
                break;
            }
        }
        let gate = self
            .write_gate
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let held = Instant::now();
        if self.installs.load(Ordering::Acquire) != installs {
            return Ok(None);
        }
        let old = self.database();
        let src = old.begin_read().map_err(|e| self.err(e))?;
        catch_up(&src, &fresh, &mark, Durability::Immediate).map_err(|e| self.err(e))?;
        drop(src);
        std::fs::rename(temp, self.path()).map_err(|e| StorageError::io(self.path(), e))?;
        // From the rename on, the fresh file is the one a restart opens: it must be the
        // one written to, whatever happens next.
        let retired = self.replace_database(fresh);
        drop(gate);
        let paused = held.elapsed();
        let synced = sync_dir(self.path());
        // Closing the old file may write to it; not while writers are held. Readers
        // still in it keep what they read.
        drop(retired);
        drop(old);
        synced?;
        Ok(Some(DefragReport {
            size_before,
            size_after: self.file_len(),
            rounds,
            paused,
            took: started.elapsed(),
        }))
    }
}

/// Why an offline defragmentation failed.
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    /// The data directory holds no backend (etcd's text).
    #[error("open {}: no such file or directory", .0.display())]
    NoBackend(PathBuf),
    /// The directory is locked, or the backend could not be opened or defragmented.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Defragments the backend of the data directory `data_dir`, which no server may be
/// using (its lock is taken first, and a held lock is an error at once, where etcdutl
/// waits for it): `oxcdutl defrag --data-dir` and `oxcdctl defrag --data-dir`.
pub fn offline(data_dir: &str) -> std::result::Result<DefragReport, OfflineError> {
    let dir = Path::new(data_dir);
    let db = dir.join("member").join("snap").join("db");
    if !db.is_file() {
        return Err(OfflineError::NoBackend(db));
    }
    let _lock = crate::lock::DirLock::acquire(&dir.join("member"))?;
    let backend = Backend::open(&db)?;
    Ok(backend.defragment()?)
}

/// fsyncs the directory holding `path`, so a rename in it is durable.
fn sync_dir(path: &Path) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StorageError::io(dir, e))
}

/// Brings `dst` to `src`'s state, knowing it was brought to the state `since` describes
/// before; returns where it stands now and how many key rows were copied past `since`.
/// The key rows go in transactions of about [`CHUNK_BYTES`], each committed with
/// `durability`: a bulk copy made durable in one fsync would write gigabytes at once and
/// hold up the member's own WAL syncs behind it.
fn catch_up(
    src: &ReadTransaction,
    dst: &Database,
    since: &Mark,
    durability: Durability,
) -> std::result::Result<(Mark, u64), redb::Error> {
    let now = mark_of(src)?;
    let begin = || -> std::result::Result<WriteTransaction, redb::Error> {
        let mut tx = dst.begin_write()?;
        tx.set_durability(durability)?;
        Ok(tx)
    };
    if now.compaction != since.compaction
        && let Some(last) = &since.last_key
    {
        let tx = begin()?;
        equalize_keys_up_to(src, &tx, last)?;
        tx.commit()?;
    }
    let mut cursor = since.last_key.clone();
    let mut copied = 0;
    loop {
        let tx = begin()?;
        let (n, last, done) = copy_keys_after(src, &tx, cursor.as_deref())?;
        copied += n;
        cursor = last.or(cursor);
        if done {
            for spec in TABLES.iter().filter(|t| t.name != schema::KEY_NAME) {
                replace_table(src, &tx, spec)?;
            }
            tx.commit()?;
            return Ok((now, copied));
        }
        tx.commit()?;
    }
}

/// The last key row and the compaction marks of `tx`.
fn mark_of(tx: &ReadTransaction) -> std::result::Result<Mark, redb::Error> {
    let last_key = tx
        .open_table(schema::KEY)?
        .last()?
        .map(|(k, _)| k.value().to_vec());
    let meta = tx.open_table(schema::META)?;
    let get = |k: &str| -> std::result::Result<Option<Vec<u8>>, redb::Error> {
        Ok(meta.get(k)?.map(|v| v.value().to_vec()))
    };
    Ok(Mark {
        last_key,
        compaction: (
            get(schema::META_FINISHED_COMPACT)?,
            get(schema::META_SCHEDULED_COMPACT)?,
        ),
    })
}

/// Copies the key rows after `after` (from the first when None), up to about
/// [`CHUNK_BYTES`]; returns how many, the last one copied, and whether none is left.
fn copy_keys_after(
    src: &ReadTransaction,
    dst: &WriteTransaction,
    after: Option<&[u8]>,
) -> std::result::Result<(u64, Option<Vec<u8>>, bool), redb::Error> {
    let from = src.open_table(schema::KEY)?;
    let mut to = dst.open_table(schema::KEY)?;
    let lower = after.map_or(Bound::Unbounded, Bound::Excluded);
    let (mut n, mut bytes, mut last) = (0, 0, None);
    for row in from.range::<&[u8]>((lower, Bound::Unbounded))? {
        let (k, v) = row?;
        if bytes >= CHUNK_BYTES {
            return Ok((n, last, false));
        }
        to.insert(k.value(), v.value())?;
        bytes += k.value().len() + v.value().len();
        n += 1;
        last = Some(k.value().to_vec());
    }
    Ok((n, last, true))
}

/// Makes `dst`'s key rows up to `last` (included) equal to `src`'s, walking both in key
/// order: rows only in `dst` are removed, rows missing or different are written.
fn equalize_keys_up_to(
    src: &ReadTransaction,
    dst: &WriteTransaction,
    last: &[u8],
) -> std::result::Result<(), redb::Error> {
    let from = src.open_table(schema::KEY)?;
    let mut to = dst.open_table(schema::KEY)?;
    let mut doomed = Vec::new();
    let mut fixes = Vec::new();
    {
        let mut theirs = from.range::<&[u8]>(..=last)?.peekable();
        for row in to.range::<&[u8]>(..=last)? {
            let (k, v) = row?;
            loop {
                match theirs.peek() {
                    Some(Ok((tk, _))) if tk.value() < k.value() => {
                        if let Some(Ok((tk, tv))) = theirs.next() {
                            fixes.push((tk.value().to_vec(), tv.value().to_vec()));
                        }
                    }
                    Some(Ok(_)) | None => break,
                    Some(Err(_)) => {
                        if let Some(Err(e)) = theirs.next() {
                            return Err(e.into());
                        }
                    }
                }
            }
            match theirs.peek() {
                Some(Ok((tk, tv))) if tk.value() == k.value() => {
                    if tv.value() != v.value() {
                        fixes.push((k.value().to_vec(), tv.value().to_vec()));
                    }
                    theirs.next();
                }
                _ => doomed.push(k.value().to_vec()),
            }
        }
        for row in theirs {
            let (tk, tv) = row?;
            fixes.push((tk.value().to_vec(), tv.value().to_vec()));
        }
    }
    for k in doomed {
        to.remove(k.as_slice())?;
    }
    for (k, v) in fixes {
        to.insert(k.as_slice(), v.as_slice())?;
    }
    Ok(())
}

/// Replaces table `spec` of `dst` with `src`'s rows.
fn replace_table(
    src: &ReadTransaction,
    dst: &WriteTransaction,
    spec: &TableSpec,
) -> std::result::Result<(), redb::Error> {
    match spec.keys {
        KeyKind::Bytes => {
            dst.delete_table(spec.bytes())?;
            let mut to = dst.open_table(spec.bytes())?;
            for row in src.open_table(spec.bytes())?.iter()? {
                let (k, v) = row?;
                to.insert(k.value(), v.value())?;
            }
        }
        KeyKind::Text => {
            dst.delete_table(spec.text())?;
            let mut to = dst.open_table(spec.text())?;
            for row in src.open_table(spec.text())?.iter()? {
                let (k, v) = row?;
                to.insert(k.value(), v.value())?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
