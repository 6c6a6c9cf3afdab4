//! The write-ahead log: the durable raft log of one member.
//!
//! Layout: `<dir>/<seq:016x>-<first_index:016x>.wal` segment files, numbered without
//! gaps. A segment opens with a CRC record (continuing the checksum chain), the member
//! metadata, and the latest snapshot mark and hard state, so the newest segments alone
//! always describe the member. Segments are preallocated to the size limit
//! ([`segment_file`]): records are written after the last one, into zeroes; a segment whose
//! data reached the limit is closed at the next sync and a new one started.
//!
//! Durability: [`Wal::sync`] writes every buffered record with one `write` and one
//! `fdatasync`; only then may the caller act on them (acknowledge, send, apply).
//!
//! Recovery ([`Wal::open`]): every segment is read and checked; a segment's data ends where
//! only zeroes follow. In the newest segment a record cut short, or one with zeroed
//! sectors and nothing written after it, is a torn write that was never synced (so never
//! acknowledged) and is cut away. Any other damage — a bad CRC with valid data
//! after it, a gap, an older segment that does not decode — stops recovery with
//! [`StorageError::CorruptWal`] naming the file and offset: refusing to start is better
//! than silently dropping acknowledged writes.

mod purger;
pub mod record;
mod replay;
mod segment_file;

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use record::RecordKind;
pub use replay::Replay;
use replay::{SegmentRead, replay_segment};

use crate::timing::WalStats;
use crate::{Result, StorageError};

/// Default segment size (as etcd's): 64 MiB.
pub const DEFAULT_SEGMENT_SIZE: u64 = 64 << 20;

/// One segment file's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Segment {
    seq: u64,
    first_index: u64,
    path: PathBuf,
}

fn segment_name(seq: u64, first_index: u64) -> String {
    format!("{seq:016x}-{first_index:016x}.wal")
}

fn parse_segment_name(name: &str) -> Option<(u64, u64)> {
    let stem = name.strip_suffix(".wal")?;
    let (seq, index) = stem.split_once('-')?;
    if seq.len() != 16 || index.len() != 16 {
        return None;
    }
    Some((
        u64::from_str_radix(seq, 16).ok()?,
        u64::from_str_radix(index, 16).ok()?,
    ))
}

/// An open write-ahead log.
#[derive(Debug)]
pub struct Wal {
    dir: PathBuf,
    segment_size: u64,
    segments: Vec<Segment>,
    file: File,
    file_len: u64,
    crc: u32,
    pending: Vec<u8>,
    metadata: Vec<u8>,
    hard_state: Option<Vec<u8>>,
    snapshot: Option<(u64, Vec<u8>)>,
    last_index: u64,
    /// Where write-and-fdatasync times and bytes written are reported.
    stats: Arc<WalStats>,
    /// `--unsafe-no-fsync`: records are written but never fdatasync'd.
    no_fsync: bool,
    /// Deletes purged segments off this thread.
    purger: purger::Purger,
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StorageError::io(dir, e))
}

fn snapshot_payload(index: u64, data: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(8 + data.len());
    p.extend_from_slice(&index.to_le_bytes());
    p.extend_from_slice(data);
    p
}

impl Wal {
    /// Whether `dir` holds a WAL.
    pub fn exists(dir: &Path) -> bool {
        std::fs::read_dir(dir)
            .map(|rd| {
                rd.flatten()
                    .any(|e| parse_segment_name(&e.file_name().to_string_lossy()).is_some())
            })
            .unwrap_or(false)
    }

    /// Creates a new WAL in `dir` (which must not hold one) with the member `metadata`.
    /// The directory appears atomically: it is built under a temporary name and renamed.
    pub fn create(dir: &Path, metadata: &[u8], segment_size: u64) -> Result<Wal> {
        let parent = dir.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(|e| StorageError::io(parent, e))?;
        let tmp = dir.with_extension("tmp");
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(|e| StorageError::io(&tmp, e))?;
        }
        std::fs::create_dir_all(&tmp).map_err(|e| StorageError::io(&tmp, e))?;
        let name = segment_name(0, 0);
        let mut buf = Vec::new();
        let crc = record::encode(&mut buf, 0, RecordKind::Crc, &0u32.to_le_bytes());
        let crc = record::encode(&mut buf, crc, RecordKind::Metadata, metadata);
        segment_file::write_new(&tmp.join(&name), &buf, segment_size)?;
        sync_dir(&tmp)?;
        std::fs::rename(&tmp, dir).map_err(|e| StorageError::io(dir, e))?;
        sync_dir(parent)?;
        let path = dir.join(&name);
        let file = segment_file::open_for_writes(&path)?;
        Ok(Wal {
            dir: dir.to_path_buf(),
            segment_size,
            segments: vec![Segment {
                seq: 0,
                first_index: 0,
                path,
            }],
            file,
            file_len: buf.len() as u64,
            crc,
            pending: Vec::new(),
            metadata: metadata.to_vec(),
            stats: Arc::default(),
            no_fsync: false,
            hard_state: None,
            snapshot: None,
            last_index: 0,
            purger: purger::Purger::new(dir),
        })
    }

    /// Reads only the member metadata (from the newest segment's header records), without
    /// replaying the log. `None` when `dir` holds no WAL.
    pub fn read_metadata(dir: &Path) -> Result<Option<Vec<u8>>> {
        if !Wal::exists(dir) {
            return Ok(None);
        }
        let segments = list_segments(dir)?;
        let Some(last) = segments.last() else {
            return Ok(None);
        };
        let mut head = Vec::new();
        File::open(&last.path)
            .and_then(|f| f.take(1 << 20).read_to_end(&mut head))
            .map_err(|e| StorageError::io(&last.path, e))?;
        let corrupt = |offset: usize, reason: String| StorageError::CorruptWal {
            path: last.path.display().to_string(),
            offset: offset as u64,
            reason,
        };
        let first = record::decode(&head, 0).map_err(|e| corrupt(0, format!("{e:?}")))?;
        let second = record::decode(&head[first.len..], first.crc)
            .map_err(|e| corrupt(first.len, format!("{e:?}")))?;
        if first.kind != RecordKind::Crc || second.kind != RecordKind::Metadata {
            return Err(corrupt(
                0,
                "segment does not start with crc and metadata records".into(),
            ));
        }
        Ok(Some(second.payload.to_vec()))
    }

    /// Opens the WAL in `dir`, replays it, repairs a torn tail, and returns it ready to
    /// append, with every entry after the newest snapshot mark.
    pub fn open(dir: &Path, segment_size: u64) -> Result<(Wal, Replay)> {
        Wal::open_from(dir, segment_size, 0)
    }

    /// [`Wal::open`] for a member whose state machine needs only the entries from
    /// `keep_from` on: those before it are let go as they are read, but for the newest
    /// one, returned as [`Replay::anchor`] (the log in memory starts there).
    pub fn open_from(dir: &Path, segment_size: u64, keep_from: u64) -> Result<(Wal, Replay)> {
        let segments = list_segments(dir)?;
        let mut replay = Replay::default();
        let mut crc = 0u32;
        let mut end_of_last = 0u64;
        let mut torn_bytes = 0u64;
        for (i, seg) in segments.iter().enumerate() {
            let how = SegmentRead {
                first: i == 0,
                last: i + 1 == segments.len(),
                crc,
                keep_from,
            };
            let end = replay_segment(&seg.path, how, &mut replay)?;
            crc = end.crc;
            end_of_last = end.data_end;
            torn_bytes = end.torn_bytes;
        }
        let last = segments.last().ok_or_else(|| StorageError::CorruptWal {
            path: dir.display().to_string(),
            offset: 0,
            reason: "no segment files".into(),
        })?;
        let snap_index = replay.snapshot.as_ref().map(|(i, _)| *i);
        if let Some(snap_index) = snap_index {
            replay.entries.retain(|(i, _)| *i > snap_index);
        }
        // The newest entry before `keep_from`, when the log starts there.
        if let Some((first, _)) = replay.entries.first()
            && *first < keep_from
            && *first > snap_index.unwrap_or(0) + 1
        {
            replay.anchor = Some(replay.entries.remove(0));
        }
        if let Some(snap_index) = snap_index
            && replay.anchor.is_none()
            && let Some((first, _)) = replay.entries.first()
            && *first != snap_index + 1
        {
            return Err(StorageError::CorruptWal {
                path: dir.display().to_string(),
                offset: 0,
                reason: format!(
                    "entries {} to {} are missing after snapshot",
                    snap_index + 1,
                    first - 1
                ),
            });
        }
        let file = segment_file::open_for_writes(&last.path)?;
        if torn_bytes > 0 {
            // Cut the torn tail off so that new records follow the last good one, with
            // zeroes after them.
            file.set_len(end_of_last)
                .map_err(|e| StorageError::io(&last.path, e))?;
            let msg = format!(
                "{}: cut a torn tail of {torn_bytes} bytes at offset {end_of_last}",
                last.path.display(),
            );
            tracing::warn!("wal: {msg}");
            replay.repaired = Some(msg);
        }
        // Also reserves the newest segment of a WAL written before segments were.
        segment_file::preallocate(&file, &last.path, segment_size);
        file.sync_all()
            .map_err(|e| StorageError::io(&last.path, e))?;
        let last_index = replay
            .entries
            .last()
            .map(|(i, _)| *i)
            .or(replay.snapshot.as_ref().map(|(i, _)| *i))
            .unwrap_or(0);
        let wal = Wal {
            dir: dir.to_path_buf(),
            segment_size,
            segments,
            file,
            file_len: end_of_last,
            crc,
            pending: Vec::new(),
            metadata: replay.metadata.clone(),
            hard_state: replay.hard_state.clone(),
            snapshot: replay.snapshot.clone(),
            last_index,
            stats: Arc::default(),
            no_fsync: false,
            purger: purger::Purger::new(dir),
        };
        Ok((wal, replay))
    }

    fn push(&mut self, kind: RecordKind, payload: &[u8]) {
        self.crc = record::encode(&mut self.pending, self.crc, kind, payload);
    }

    /// Buffers a log entry. Appending index `i` at or below the last index overwrites the
    /// old suffix from `i` on (raft log conflict resolution); replay honours that.
    pub fn append_entry(&mut self, index: u64, data: &[u8]) {
        let mut p = Vec::with_capacity(8 + data.len());
        p.extend_from_slice(&index.to_le_bytes());
        p.extend_from_slice(data);
        self.push(RecordKind::Entry, &p);
        self.last_index = index;
    }

    /// Buffers a new hard state.
    pub fn set_hard_state(&mut self, data: &[u8]) {
        self.push(RecordKind::HardState, data);
        self.hard_state = Some(data.to_vec());
    }

    /// Buffers the installation of a snapshot received from the leader: the log restarts
    /// after `index` and every entry recorded before is void.
    pub fn install_snapshot(&mut self, index: u64, data: &[u8]) {
        self.push(RecordKind::SnapshotInstall, &snapshot_payload(index, data));
        self.snapshot = Some((index, data.to_vec()));
        self.last_index = index;
    }

    /// Buffers a snapshot mark: entries up to `index` are held by the backend.
    pub fn mark_snapshot(&mut self, index: u64, data: &[u8]) {
        self.push(RecordKind::Snapshot, &snapshot_payload(index, data));
        self.snapshot = Some((index, data.to_vec()));
        self.last_index = self.last_index.max(index);
    }

    /// `--unsafe-no-fsync`, as etcd's `SetUnsafeNoFsync`: from now on [`Wal::sync`]
    /// writes records without `fdatasync`. They survive the process being killed (the
    /// kernel has them) but not a power loss or a kernel crash; no fsync time is
    /// observed.
    pub fn set_unsafe_no_fsync(&mut self) {
        self.no_fsync = true;
    }

    /// Reports write-and-fdatasync times and bytes written to `stats` from now on.
    pub fn report_to(&mut self, stats: Arc<WalStats>) {
        self.stats = stats;
    }

    /// Whether records are buffered and not yet durable.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Writes all buffered records with one write and one fdatasync. On return they are
    /// durable. Starts a new segment afterwards if this one has grown past the limit.
    pub fn sync(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let path = &self.segments[self.segments.len() - 1].path;
        let started = Instant::now();
        let no_fsync = self.no_fsync;
        if let Err(e) = self
            .file
            .write_all_at(&self.pending, self.file_len)
            .and_then(|_| {
                if no_fsync {
                    Ok(())
                } else {
                    self.file.sync_data()
                }
            })
        {
            // Leave no half-written record behind for the next write to follow: zero what
            // this one may have written (best effort; recovery would repair it anyway).
            let zeroes = vec![0u8; self.pending.len()];
            let _ = self.file.write_all_at(&zeroes, self.file_len);
            self.pending.clear();
            return Err(StorageError::io(path, e));
        }
        if !no_fsync {
            self.stats.fsyncs.observe(started.elapsed());
        }
        self.stats
            .written
            .fetch_add(self.pending.len() as u64, Ordering::Relaxed);
        self.file_len += self.pending.len() as u64;
        self.pending.clear();
        if self.file_len >= self.segment_size {
            self.cut()?;
        }
        Ok(())
    }

    /// Closes the current segment and starts the next one, self-describing.
    fn cut(&mut self) -> Result<()> {
        let seq = self.segments[self.segments.len() - 1].seq + 1;
        let first_index = self.last_index + 1;
        let path = self.dir.join(segment_name(seq, first_index));
        let tmp = path.with_extension("tmp");
        let mut buf = Vec::new();
        let mut crc = record::encode(&mut buf, self.crc, RecordKind::Crc, &self.crc.to_le_bytes());
        crc = record::encode(&mut buf, crc, RecordKind::Metadata, &self.metadata);
        if let Some((index, data)) = &self.snapshot {
            crc = record::encode(
                &mut buf,
                crc,
                RecordKind::Snapshot,
                &snapshot_payload(*index, data),
            );
        }
        if let Some(hs) = &self.hard_state {
            crc = record::encode(&mut buf, crc, RecordKind::HardState, hs);
        }
        segment_file::write_new(&tmp, &buf, self.segment_size)?;
        std::fs::rename(&tmp, &path).map_err(|e| StorageError::io(&path, e))?;
        sync_dir(&self.dir)?;
        self.file = segment_file::open_for_writes(&path)?;
        self.file_len = buf.len() as u64;
        self.crc = crc;
        self.segments.push(Segment {
            seq,
            first_index,
            path,
        });
        Ok(())
    }

    /// Lets go of old segments whose entries all lie at or below `upto` (and at or below
    /// the newest snapshot mark), keeping at least `keep` segments; their files are
    /// deleted, oldest first, on a thread of this WAL's ([`purger`]). Returns how many
    /// were let go.
    pub fn purge(&mut self, upto: u64, keep: usize) -> Result<usize> {
        let limit = upto.min(self.snapshot.as_ref().map(|(i, _)| *i).unwrap_or(0));
        let mut gone = Vec::new();
        while self.segments.len() > keep.max(1) {
            // Segment 0 holds entries below segments[1].first_index.
            if self.segments[1].first_index > limit + 1 {
                break;
            }
            gone.push(self.segments.remove(0).path);
        }
        let removed = gone.len();
        if removed > 0 {
            self.purger.delete(gone);
        }
        Ok(removed)
    }

    /// Waits until the files of every purge so far are deleted.
    pub fn finish_purges(&mut self) {
        self.purger.finish();
    }

    /// Number of segment files.
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// The WAL directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

fn list_segments(dir: &Path) -> Result<Vec<Segment>> {
    let rd = std::fs::read_dir(dir).map_err(|e| StorageError::io(dir, e))?;
    let mut segments = Vec::new();
    for e in rd {
        let e = e.map_err(|e| StorageError::io(dir, e))?;
        let name = e.file_name().to_string_lossy().to_string();
        if let Some((seq, first_index)) = parse_segment_name(&name) {
            segments.push(Segment {
                seq,
                first_index,
                path: e.path(),
            });
        } else if name.ends_with(".tmp") {
            // An unfinished segment cut: it was never in use.
            let _ = std::fs::remove_file(e.path());
        }
    }
    segments.sort_by_key(|s| s.seq);
    for w in segments.windows(2) {
        if w[1].seq != w[0].seq + 1 {
            return Err(StorageError::CorruptWal {
                path: w[1].path.display().to_string(),
                offset: 0,
                reason: format!("segment sequence gap after {}", w[0].path.display()),
            });
        }
    }
    Ok(segments)
}

#[cfg(test)]
mod tests;
