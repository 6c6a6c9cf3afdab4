//! Backend snapshots: the whole applied state as one byte stream, for a member that fell
//! behind the leader's compacted log.
//!
//! The sender takes a [`Dump`] (a redb read transaction, so a consistent point in time
//! that writers keep moving past) and streams it in chunks. The receiver writes the chunks
//! to a [`SnapshotFile`] under `member/snap/`, named by the raft index the dump was taken
//! at, and fsyncs it before raft hears of the snapshot. [`Backend::install`] later
//! replaces every table with the file's rows in one durable transaction, so a crash
//! leaves either the old state or the new one.
//!
//! Format: records `[table u8][key len u32 LE][key][value len u32 LE][value]`, where the
//! table byte is the tag of a table in [`TABLES`] (every registered table is carried),
//! then a trailer `[0u8][crc32c of everything before, u32 LE]`.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use redb::{ReadTransaction, ReadableDatabase, ReadableTable};

use crate::backend::Backend;
use crate::direct::DirectWriter;
use crate::tables::{Replacement, RowError, TABLES};
use crate::{Result, StorageError, schema};

const TRAILER: u8 = 0;
/// Suffix of a complete snapshot file.
const SUFFIX: &str = ".snapdata";
/// Suffix of a snapshot received as a whole backend (a redb file, made from what an
/// etcd leader sent): installed by putting the file in place, not by copying rows.
const DB_SUFFIX: &str = ".snapdb";

/// A consistent read of the whole backend, ready to stream.
pub struct Dump {
    tx: crate::backend::ReadTx,
    path: PathBuf,
    /// Keeps the backend's commits durable while the dump is read (see
    /// [`crate::backend`]).
    _open: crate::backend::DumpOpen,
}

fn u64_meta(tx: &ReadTransaction, key: &str) -> std::result::Result<u64, redb::Error> {
    Ok(Backend::read_meta(tx, key)?
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
        .unwrap_or(0))
}

fn push_record(out: &mut Vec<u8>, table: u8, key: &[u8], value: &[u8]) {
    out.push(table);
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(value);
}

impl Backend {
    /// Takes a consistent dump of the current state.
    pub fn dump(&self) -> Result<Dump> {
        Ok(Dump {
            _open: self.dump_open(),
            tx: self.begin_read()?,
            path: self.path().to_path_buf(),
        })
    }

    /// Replaces every table with the rows of the snapshot file at `path`, in one durable
    /// transaction, after checking the file's checksum; a snapshot that is a whole
    /// backend ([`snapshot_db_path`]) is put in place of this one instead. Returns the
    /// raft (index, term) the new state is at.
    pub fn install(&self, path: &Path) -> Result<(u64, u64)> {
        if path.to_string_lossy().ends_with(DB_SUFFIX) {
            return self.install_database(path);
        }
        let io = |e| StorageError::io(path, e);
        let len = std::fs::metadata(path).map_err(io)?.len();
        let mut r = BufReader::with_capacity(1 << 20, File::open(path).map_err(io)?);
        let bad = |reason: String| StorageError::Backend {
            path: path.display().to_string(),
            reason: format!("snapshot file is damaged: {reason}"),
        };
        let tx = self.begin_write()?;
        {
            let mut tables = Replacement::begin(&tx).map_err(|e| self.err(e))?;
            let mut rd = Checked {
                r: &mut r,
                crc: 0,
                read: 0,
                path,
            };
            let mut buf = Vec::new();
            loop {
                rd.next(1, &mut buf)?;
                let table = buf[0];
                if table == TRAILER {
                    let want = rd.crc;
                    rd.next(4, &mut buf)?;
                    let got = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
                    if got != want || rd.read != len {
                        return Err(bad(format!("checksum {got:08x}, computed {want:08x}")));
                    }
                    break;
                }
                let klen = rd.len(&mut buf)?;
                if klen as u64 > len {
                    return Err(bad(format!("key of {klen} bytes")));
                }
                rd.next(klen, &mut buf)?;
                let key = std::mem::take(&mut buf);
                let vlen = rd.len(&mut buf)?;
                if vlen as u64 > len {
                    return Err(bad(format!("value of {vlen} bytes")));
                }
                rd.next(vlen, &mut buf)?;
                match tables.insert(table, &key, &buf) {
                    Ok(()) => {}
                    Err(RowError::Backend(e)) => return Err(self.err(e)),
                    Err(e) => return Err(bad(e.to_string())),
                }
            }
        }
        let position = {
            let m = tx.open_table(schema::META).map_err(|e| self.err(e))?;
            let get = |k: &str| -> Result<u64> {
                Ok(m.get(k)
                    .map_err(|e| self.err(e))?
                    .and_then(|v| v.value().try_into().ok())
                    .map(u64::from_le_bytes)
                    .unwrap_or(0))
            };
            (
                get(schema::META_CONSISTENT_INDEX)?,
                get(schema::META_CONSISTENT_TERM)?,
            )
        };
        self.commit(tx, true)?;
        self.installs
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Ok(position)
    }
}

impl Backend {
    /// Puts the complete backend at `path` in place of this one: every table made sure
    /// of, the file renamed over this backend's (atomic: a crash leaves the old file or
    /// the new one) and the rename made durable, then writers let in again. Readers in
    /// the old file keep what they read. Returns the raft (index, term) it is at.
    fn install_database(&self, path: &Path) -> Result<(u64, u64)> {
        let db = crate::backend::create_database(path)?;
        let err = |e: redb::Error| StorageError::Backend {
            path: path.display().to_string(),
            reason: e.to_string(),
        };
        let tx = db.begin_write().map_err(|e| err(e.into()))?;
        crate::tables::create_all(&tx).map_err(err)?;
        tx.commit().map_err(|e| err(e.into()))?;
        let position = {
            let tx = db.begin_read().map_err(|e| err(e.into()))?;
            (
                u64_meta(&tx, schema::META_CONSISTENT_INDEX).map_err(err)?,
                u64_meta(&tx, schema::META_CONSISTENT_TERM).map_err(err)?,
            )
        };
        let gate = self
            .write_gate
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        std::fs::rename(path, self.path()).map_err(|e| StorageError::io(self.path(), e))?;
        let retired = self.replace_database(db);
        drop(gate);
        if let Some(dir) = self.path().parent() {
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| StorageError::io(dir, e))?;
        }
        drop(retired);
        self.installs
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Ok(position)
    }
}

impl Dump {
    /// The raft (index, term) of the state in this dump.
    pub fn position(&self) -> Result<(u64, u64)> {
        let err = |e: redb::Error| StorageError::Backend {
            path: self.path.display().to_string(),
            reason: e.to_string(),
        };
        Ok((
            u64_meta(&self.tx, schema::META_CONSISTENT_INDEX).map_err(err)?,
            u64_meta(&self.tx, schema::META_CONSISTENT_TERM).map_err(err)?,
        ))
    }

    /// The raft configuration recorded with that position, encoded by oxcd-raft (None:
    /// a backend from before membership changes).
    pub fn conf_state(&self) -> Result<Option<Vec<u8>>> {
        Backend::read_meta(&self.tx, schema::META_CONF_STATE).map_err(|e| StorageError::Backend {
            path: self.path.display().to_string(),
            reason: e.to_string(),
        })
    }

    /// Streams the dump to `sink` in chunks of about `chunk` bytes, trailer included.
    /// Stops early, returning false, when `sink` returns false (the receiver went away).
    pub fn write_to(self, chunk: usize, mut sink: impl FnMut(Vec<u8>) -> bool) -> Result<bool> {
        let err = |e: &dyn std::fmt::Display| StorageError::Backend {
            path: self.path.display().to_string(),
            reason: e.to_string(),
        };
        let mut crc = 0u32;
        let mut out = Vec::with_capacity(chunk + 4096);
        let mut flush = |out: &mut Vec<u8>, crc: &mut u32| -> bool {
            *crc = crc32c::crc32c_append(*crc, out);
            sink(std::mem::replace(out, Vec::with_capacity(chunk + 4096)))
        };
        for spec in TABLES {
            let all_sent = spec
                .scan(&self.tx, |k, v| {
                    push_record(&mut out, spec.tag, k, v);
                    out.len() < chunk || flush(&mut out, &mut crc)
                })
                .map_err(|e| err(&e))?;
            if !all_sent {
                return Ok(false);
            }
        }
        out.push(TRAILER);
        let total = crc32c::crc32c_append(crc, &out);
        out.extend_from_slice(&total.to_le_bytes());
        Ok(flush(&mut out, &mut crc))
    }
}

/// Reads exact byte counts while keeping the running checksum.
struct Checked<'a, R> {
    r: &'a mut R,
    crc: u32,
    read: u64,
    path: &'a Path,
}

impl<R: Read> Checked<'_, R> {
    fn next(&mut self, n: usize, buf: &mut Vec<u8>) -> Result<()> {
        buf.resize(n, 0);
        self.r
            .read_exact(buf)
            .map_err(|e| StorageError::io(self.path, e))?;
        self.crc = crc32c::crc32c_append(self.crc, buf);
        self.read += n as u64;
        Ok(())
    }

    fn len(&mut self, buf: &mut Vec<u8>) -> Result<usize> {
        self.next(4, buf)?;
        Ok(u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize)
    }
}

/// A snapshot being received into `dir`, written past the page cache
/// ([`DirectWriter`]): it is read back once, at install.
pub struct SnapshotFile {
    tmp: PathBuf,
    done: PathBuf,
    out: Option<DirectWriter>,
    finished: bool,
}

/// The file a complete snapshot at raft `index` is kept in, under `dir`.
pub fn snapshot_path(dir: &Path, index: u64) -> PathBuf {
    dir.join(format!("{index:016x}{SUFFIX}"))
}

/// The file a snapshot at raft `index` received as a whole backend is kept in.
pub fn snapshot_db_path(dir: &Path, index: u64) -> PathBuf {
    dir.join(format!("{index:016x}{DB_SUFFIX}"))
}

/// Complete snapshot files in `dir` (both kinds), as (raft index, path), oldest first.
pub fn list_snapshots(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StorageError::io(dir, e)),
    };
    let mut found = Vec::new();
    for ent in rd {
        let ent = ent.map_err(|e| StorageError::io(dir, e))?;
        let name = ent.file_name();
        let Some(hex) = name
            .to_str()
            .and_then(|n| n.strip_suffix(SUFFIX).or_else(|| n.strip_suffix(DB_SUFFIX)))
        else {
            continue;
        };
        if let Ok(index) = u64::from_str_radix(hex, 16) {
            found.push((index, ent.path()));
        }
    }
    found.sort();
    Ok(found)
}

impl SnapshotFile {
    /// Starts receiving the snapshot at raft `index` into `dir`.
    pub fn create(dir: &Path, index: u64) -> Result<SnapshotFile> {
        std::fs::create_dir_all(dir).map_err(|e| StorageError::io(dir, e))?;
        let done = snapshot_path(dir, index);
        let tmp = done.with_extension("tmp");
        let out = DirectWriter::create(&tmp).map_err(|e| StorageError::io(&tmp, e))?;
        Ok(SnapshotFile {
            tmp,
            done,
            out: Some(out),
            finished: false,
        })
    }

    /// Appends a chunk.
    pub fn write(&mut self, chunk: &[u8]) -> Result<()> {
        let Some(out) = self.out.as_mut() else {
            return Ok(());
        };
        out.write(chunk).map_err(|e| StorageError::io(&self.tmp, e))
    }

    /// Syncs the file and gives it its final name; returns that path.
    pub fn finish(mut self) -> Result<PathBuf> {
        let tmp = self.tmp.clone();
        let io = |e| StorageError::io(&tmp, e);
        let Some(out) = self.out.take() else {
            return Err(io(std::io::Error::other("snapshot file already closed")));
        };
        out.finish().map_err(io)?;
        std::fs::rename(&self.tmp, &self.done).map_err(io)?;
        if let Some(dir) = self.done.parent() {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| StorageError::io(dir, e))?;
        }
        self.finished = true;
        Ok(self.done.clone())
    }
}

impl Drop for SnapshotFile {
    fn drop(&mut self) {
        if !self.finished {
            // Unfinished: nothing refers to the temporary file.
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend_with(dir: &Path, name: &str, rows: &[(&[u8], &[u8])], index: u64) -> Backend {
        let b = Backend::open(&dir.join(name)).expect("open");
        let tx = b.begin_write().expect("write");
        {
            let mut t = tx.open_table(schema::KEY).expect("key");
            for (k, v) in rows {
                t.insert(*k, *v).expect("insert");
            }
            let mut m = tx.open_table(schema::META).expect("meta");
            m.insert(
                schema::META_CONSISTENT_INDEX,
                index.to_le_bytes().as_slice(),
            )
            .expect("ci");
            m.insert(schema::META_CONSISTENT_TERM, 3u64.to_le_bytes().as_slice())
                .expect("ct");
        }
        b.commit(tx, true).expect("commit");
        b
    }

    fn stream_to_file(from: &Backend, dir: &Path, chunk: usize) -> PathBuf {
        let dump = from.dump().expect("dump");
        let (index, _) = dump.position().expect("position");
        let mut f = SnapshotFile::create(dir, index).expect("create");
        assert!(
            dump.write_to(chunk, |c| f.write(&c).is_ok())
                .expect("write")
        );
        f.finish().expect("finish")
    }

    #[test]
    fn dump_install_round_trip_replaces_everything() {
        let dir = tempfile::tempdir().expect("tempdir");
        let big = vec![7u8; 5000];
        let src = backend_with(
            dir.path(),
            "a.db",
            &[(b"k1", b"v1"), (b"k2", big.as_slice())],
            42,
        );
        let dst = backend_with(dir.path(), "b.db", &[(b"old", b"gone")], 7);
        let path = stream_to_file(&src, &dir.path().join("snap"), 64);
        assert_eq!(
            list_snapshots(&dir.path().join("snap")).expect("list"),
            vec![(42, path.clone())]
        );
        assert_eq!(dst.install(&path).expect("install"), (42, 3));
        let tx = dst.begin_read().expect("read");
        let t = tx.open_table(schema::KEY).expect("key");
        assert!(t.get(b"old".as_slice()).expect("get").is_none());
        assert_eq!(
            t.get(b"k2".as_slice()).expect("get").expect("k2").value(),
            big.as_slice()
        );
    }

    #[test]
    fn commits_are_durable_only_while_a_dump_is_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = backend_with(dir.path(), "a.db", &[(b"k1", b"v1")], 42);
        assert!(!src.commits_forced_durable());
        let dump = src.dump().expect("dump");
        let second = src.dump().expect("dump");
        assert!(src.commits_forced_durable());
        drop(dump);
        assert!(src.commits_forced_durable());
        assert!(second.write_to(64, |_| true).expect("write"));
        assert!(!src.commits_forced_durable());
    }

    #[test]
    fn damaged_file_is_refused_and_state_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = backend_with(dir.path(), "a.db", &[(b"k1", b"v1")], 42);
        let dst = backend_with(dir.path(), "b.db", &[(b"old", b"kept")], 7);
        let path = stream_to_file(&src, &dir.path().join("snap"), 1 << 20);
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[8] ^= 0x40;
        std::fs::write(&path, &bytes).expect("write");
        let err = dst.install(&path).expect_err("damaged");
        assert!(err.to_string().contains("damaged"), "{err}");
        let tx = dst.begin_read().expect("read");
        let t = tx.open_table(schema::KEY).expect("key");
        assert!(t.get(b"old".as_slice()).expect("get").is_some());
    }
}
