//! Replaying a WAL's segments when it is opened ([`super::Wal::open`]): every record is
//! read and checked in order, through a window of the file rather than the whole
//! segment (64 MiB) at once, and the entries the member will hold are collected.
//!
//! What is kept, so that a restart's memory is that of the log the member runs with and
//! not that of every segment on disk:
//! - entries a snapshot mark covers are let go as soon as the mark is read (the kept
//!   segments before the newest mark may hold `--max-wals` × 64 MiB of them);
//! - with a `keep_from` index (the state machine's applied index less the catch-up
//!   entries), the entries before it are let go as they are read, all but the newest,
//!   which is returned apart as the log's anchor ([`Replay::anchor`]).
//!
//! Invariants: the entries returned are contiguous and follow the anchor, or the mark,
//! or start the log; a gap, a broken chain or a bad record anywhere but in the torn tail
//! of the newest segment is an error naming the file and offset.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::record::{self, DecodeError, RecordKind};
use crate::{Result, StorageError};

/// Everything a WAL held when it was opened.
#[derive(Debug, Default)]
pub struct Replay {
    /// Member metadata written at creation.
    pub metadata: Vec<u8>,
    /// The newest hard state, if any was written.
    pub hard_state: Option<Vec<u8>>,
    /// The newest snapshot mark: (index, caller's bytes).
    pub snapshot: Option<(u64, Vec<u8>)>,
    /// Opened with `keep_from` above the mark: the newest entry before `keep_from`
    /// (index, bytes). It is committed and applied; the log starts at it, and
    /// [`Replay::entries`] follow it.
    pub anchor: Option<(u64, Vec<u8>)>,
    /// Entries after the anchor (else after the snapshot mark), contiguous, with
    /// overwritten suffixes already dropped.
    pub entries: Vec<(u64, Vec<u8>)>,
    /// Set when a torn tail was cut off: which file, from which offset, how many bytes.
    pub repaired: Option<String>,
}

/// Where a segment's records end.
pub(super) struct SegmentEnd {
    /// The chain CRC after its last record.
    pub crc: u32,
    /// The offset after its last record.
    pub data_end: u64,
    /// Bytes of a torn write after it (zero when only zeroes follow).
    pub torn_bytes: u64,
}

/// How a segment is replayed.
pub(super) struct SegmentRead {
    /// The oldest segment: its CRC record starts the chain.
    pub first: bool,
    /// The newest segment: a torn write at its end is cut away, not an error.
    pub last: bool,
    /// The chain CRC before it.
    pub crc: u32,
    /// Entries before this index are let go as they are read, but for the newest.
    pub keep_from: u64,
}

/// Bytes read from a segment at a time.
const READ_CHUNK: usize = 1 << 20;

/// A forward-moving window over one segment file.
struct SegmentReader<'a> {
    path: &'a Path,
    file: File,
    len: usize,
    /// The file offset of `window[0]`.
    base: usize,
    window: Vec<u8>,
}

impl<'a> SegmentReader<'a> {
    fn open(path: &'a Path) -> Result<SegmentReader<'a>> {
        let file = File::open(path).map_err(|e| StorageError::io(path, e))?;
        let len = file
            .metadata()
            .map_err(|e| StorageError::io(path, e))?
            .len() as usize;
        Ok(SegmentReader {
            path,
            file,
            len,
            base: 0,
            window: Vec::new(),
        })
    }

    /// Where written data ends: past it the file holds only zeroes (read backwards).
    fn data_end(&self) -> Result<usize> {
        let mut chunk = vec![0u8; READ_CHUNK];
        let mut end = self.len;
        while end > 0 {
            let start = end.saturating_sub(READ_CHUNK);
            let part = &mut chunk[..end - start];
            self.file
                .read_exact_at(part, start as u64)
                .map_err(|e| StorageError::io(self.path, e))?;
            if let Some(p) = part.iter().rposition(|b| *b != 0) {
                return Ok(start + p + 1);
            }
            end = start;
        }
        Ok(0)
    }

    /// The bytes from `off` on: at least `want` of them, unless the file ends first.
    /// Offsets only move forward; what lies before `off` is let go.
    fn bytes(&mut self, off: usize, want: usize) -> Result<&[u8]> {
        let want_end = off.saturating_add(want).min(self.len);
        if off < self.base || off > self.base + self.window.len() {
            self.window.clear();
            self.base = off;
        }
        if want_end > self.base + self.window.len() {
            self.window.drain(..off - self.base);
            self.base = off;
            let have_end = off + self.window.len();
            let read_end = want_end.max(off + READ_CHUNK).min(self.len);
            let old = self.window.len();
            self.window.resize(read_end - off, 0);
            self.file
                .read_exact_at(&mut self.window[old..], have_end as u64)
                .map_err(|e| StorageError::io(self.path, e))?;
        }
        Ok(&self.window[off - self.base..])
    }
}

/// Replays one segment into `replay`; returns where its records end.
pub(super) fn replay_segment(
    path: &Path,
    how: SegmentRead,
    replay: &mut Replay,
) -> Result<SegmentEnd> {
    let corrupt = |offset: usize, reason: String| StorageError::CorruptWal {
        path: path.display().to_string(),
        offset: offset as u64,
        reason,
    };
    let mut reader = SegmentReader::open(path)?;
    let written = reader.data_end()?;
    let len = reader.len;
    let mut crc = how.crc;
    let mut off = 0usize;
    while off < len {
        let head = reader.bytes(off, record::HEADER_LEN)?;
        let want = match head.get(..4) {
            Some(l) => {
                let payload = u32::from_le_bytes([l[0], l[1], l[2], l[3]]);
                record::HEADER_LEN + payload.min(record::MAX_PAYLOAD) as usize
            }
            None => record::HEADER_LEN,
        };
        let rest = reader.bytes(off, want)?;
        let rec = match record::decode(rest, crc) {
            Ok(r) => r,
            // The reserved, never written rest of the segment. In a closed segment, lost
            // records would show as a broken chain at the start of the next one.
            Err(_) if off > 0 && written <= off => break,
            Err(err) if how.last && off > 0 && is_torn_tail(rest, off, written, &err) => break,
            Err(DecodeError::Truncated) => return Err(corrupt(off, "record cut short".into())),
            Err(DecodeError::Bad(reason)) => return Err(corrupt(off, reason)),
        };
        if off == 0 {
            if rec.kind != RecordKind::Crc {
                return Err(corrupt(
                    0,
                    "segment does not start with a crc record".into(),
                ));
            }
            if !how.first && rec.payload != crc.to_le_bytes() {
                return Err(corrupt(0, "crc chain broken between segments".into()));
            }
        }
        match rec.kind {
            RecordKind::Crc => {}
            RecordKind::Metadata => replay.metadata = rec.payload.to_vec(),
            RecordKind::HardState => replay.hard_state = Some(rec.payload.to_vec()),
            RecordKind::Snapshot | RecordKind::SnapshotInstall => {
                let (index, data) = split_indexed(rec.payload)
                    .ok_or_else(|| corrupt(off, "short snapshot record".into()))?;
                if rec.kind == RecordKind::SnapshotInstall {
                    replay.entries.clear();
                } else {
                    forget_entries_to(&mut replay.entries, index);
                }
                replay.snapshot = Some((index, data.to_vec()));
            }
            RecordKind::Entry => {
                let (index, data) = split_indexed(rec.payload)
                    .ok_or_else(|| corrupt(off, "short entry record".into()))?;
                push_entry(&mut replay.entries, index, data, how.keep_from)
                    .map_err(|r| corrupt(off, r.to_string()))?;
            }
        }
        crc = rec.crc;
        off += rec.len;
    }
    Ok(SegmentEnd {
        crc,
        data_end: off as u64,
        torn_bytes: written.saturating_sub(off) as u64,
    })
}

/// Decides whether damage at `off` in the newest segment is a torn write: nothing was
/// written after the broken record (`data_end`: only zeroes follow), and the record is
/// cut short by the end of the file or one of its pieces between 512-byte sector
/// boundaries is all zeroes (a sector the crash never wrote). `rest` holds the file
/// from `off` on, at least to the record's end when the file reaches that far.
fn is_torn_tail(rest: &[u8], off: usize, data_end: usize, err: &DecodeError) -> bool {
    if *err == DecodeError::Truncated {
        return true;
    }
    if rest.len() < record::HEADER_LEN {
        return false;
    }
    let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    let rec_len = record::HEADER_LEN + len;
    if off + rec_len < data_end || rec_len > rest.len() {
        return false;
    }
    let mut start = off;
    let end = off + rec_len;
    while start < end {
        let stop = ((start / 512 + 1) * 512).min(end);
        if rest[start - off..stop - off].iter().all(|b| *b == 0) {
            return true;
        }
        start = stop;
    }
    false
}

/// (index, the rest) of an entry or snapshot record's payload.
fn split_indexed(payload: &[u8]) -> Option<(u64, &[u8])> {
    let (head, rest) = payload.split_at_checked(8)?;
    Some((u64::from_le_bytes(head.try_into().ok()?), rest))
}

/// An entry record that does not follow the entries replayed before it.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("entry {index} follows {last}: entries are missing")]
struct EntryGap {
    /// The record's index.
    index: u64,
    /// The last index replayed before it.
    last: u64,
}

/// Lets go of the replayed entries a snapshot mark at `index` covers, as soon as the mark
/// is read. Entries stay contiguous, so a gap after the mark is still found
/// ([`super::Wal::open`] checks that the first one follows the mark).
fn forget_entries_to(entries: &mut Vec<(u64, Vec<u8>)>, index: u64) {
    let covered = entries.partition_point(|(i, _)| *i <= index);
    entries.drain(..covered);
}

/// Adds the entry at `index` after those replayed, replacing the suffix it overwrites.
/// Before `keep_from` it replaces them all: only the newest such entry is kept.
fn push_entry(
    entries: &mut Vec<(u64, Vec<u8>)>,
    index: u64,
    data: &[u8],
    keep_from: u64,
) -> std::result::Result<(), EntryGap> {
    if let Some((first, _)) = entries.first() {
        let first = *first;
        let last = first + entries.len() as u64 - 1;
        if index > last + 1 {
            return Err(EntryGap { index, last });
        }
        if index < first || index < keep_from {
            entries.clear();
        } else {
            entries.truncate((index - first) as usize);
        }
    }
    entries.push((index, data.to_vec()));
    Ok(())
}
