//! etcd's write-ahead log, read and written as etcd 3.5.16 does (`server/wal/wal.go`,
//! `encoder.go`, `decoder.go`, `walpb/record.proto`):
//! - segment files `<seq:016x>-<index:016x>.wal`, read in sequence order;
//! - a record is a little-endian u64 length (its low 56 bits; a set top bit says the
//!   low 3 bits of the top byte count padding bytes up to 8-byte alignment) and a
//!   `walpb.Record` (`type` 1, `crc` 2, `data` 3);
//! - the CRC is CRC-32C chained over every record's data; a `crc` record (each segment
//!   opens with one) carries the chain's value and restarts it there;
//! - the types: `metadata` (etcdserverpb `Metadata`: node id, cluster id), `entry`
//!   (raftpb `Entry`), `state` (raftpb `HardState`), `crc`, `snapshot` (walpb
//!   `Snapshot`: index, term, configuration);
//! - a segment's data ends at a zero length (its preallocated rest) or at the file's
//!   end. In the newest segment a record cut short, or failing its CRC with a sector of
//!   zeroes in it, is a torn write etcd repairs away on open; it ends the log here.
//!   Damage anywhere else is an error.
//!
//! Reading follows etcd's `ReadAll` from a snapshot: entries after it (a later record of
//! an index replaces the suffix from there), the last hard state, the one metadata, and
//! the snapshot record that must be there.

use std::path::{Path, PathBuf};

use oxcd_raft::persist;
use oxcd_raft::{ConfState, Entry, HardState};
use prost::Message as _;

/// Record types (walpb's).
mod kind {
    pub const METADATA: i64 = 1;
    pub const ENTRY: i64 = 2;
    pub const STATE: i64 = 3;
    pub const CRC: i64 = 4;
    pub const SNAPSHOT: i64 = 5;
}

/// etcd's segment size, to which a new segment is extended with zeroes.
const SEGMENT_BYTES: u64 = 64 << 20;
/// The sector size etcd's torn-write check splits records by.
const SECTOR: usize = 512;

/// `walpb.Record`.
#[derive(Clone, PartialEq, prost::Message)]
struct Record {
    #[prost(int64, tag = "1")]
    kind: i64,
    #[prost(uint32, tag = "2")]
    crc: u32,
    #[prost(bytes = "vec", tag = "3")]
    data: Vec<u8>,
}

/// etcdserverpb `Metadata`: whose log this is.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Metadata {
    /// The member's id.
    #[prost(uint64, tag = "1")]
    pub node_id: u64,
    /// The cluster's id.
    #[prost(uint64, tag = "2")]
    pub cluster_id: u64,
}

/// walpb `Snapshot`: a snapshot's place in the log.
#[derive(Clone, PartialEq, prost::Message)]
struct SnapshotRecord {
    #[prost(uint64, tag = "1")]
    index: u64,
    #[prost(uint64, tag = "2")]
    term: u64,
    /// raftpb `ConfState`, encoded.
    #[prost(bytes = "vec", optional, tag = "3")]
    conf_state: Option<Vec<u8>>,
}

/// Why etcd's WAL could not be read or written (etcd's texts where it has one).
#[derive(Debug, thiserror::Error)]
pub enum EtcdWalError {
    /// A file or directory operation failed.
    #[error(transparent)]
    Io(#[from] crate::backup::path_io::PathIoError),
    /// No segment file.
    #[error("wal: file not found")]
    NoFiles,
    /// Segment numbers with a gap.
    #[error("wal: segment {0} does not follow the one before it")]
    SequenceGap(String),
    /// A record whose CRC is wrong (and not a torn write).
    #[error("{file} at offset {offset}: walpb: crc mismatch")]
    RecordCrc {
        /// The segment.
        file: String,
        /// Where the record starts.
        offset: u64,
    },
    /// A segment's opening CRC does not continue the chain.
    #[error("{file} at offset {offset}: wal: crc mismatch")]
    ChainCrc {
        /// The segment.
        file: String,
        /// Where the record starts.
        offset: u64,
    },
    /// A record that does not decode (and not a torn write).
    #[error("{file} at offset {offset}: {reason}")]
    Undecodable {
        /// The segment.
        file: String,
        /// Where the record starts.
        offset: u64,
        /// What failed.
        reason: String,
    },
    /// Two metadata records differ.
    #[error("wal: conflicting metadata found")]
    MetadataConflict,
    /// The snapshot record at the start index has another term.
    #[error("wal: snapshot mismatch")]
    SnapshotMismatch,
    /// No snapshot record at the start index.
    #[error("wal: snapshot not found")]
    SnapshotNotFound,
    /// An entry after a gap.
    #[error("wal: slice bounds out of range")]
    SliceOutOfRange,
    /// A record type etcd does not have.
    #[error("unexpected block type {0}")]
    UnknownType(i64),
}

/// A snapshot's place in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SnapshotPoint {
    /// Its index.
    pub index: u64,
    /// Its term.
    pub term: u64,
}

/// Every record of a WAL directory, checked, in order.
pub struct EtcdWal {
    records: Vec<Record>,
}

/// What etcd reads from its WAL when it starts from a snapshot.
#[derive(Debug, Clone)]
pub struct WalState {
    /// Whose log it is.
    pub metadata: Metadata,
    /// The last hard state.
    pub hard_state: HardState,
    /// The entries after the snapshot.
    pub entries: Vec<Entry>,
}

use crate::backup::path_io::io as io_error;

/// The segment files of `dir`, in sequence order.
fn segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>, EtcdWalError> {
    let mut found = Vec::new();
    for item in std::fs::read_dir(dir).map_err(io_error(dir))? {
        let item = item.map_err(io_error(dir))?;
        let name = item.file_name().to_string_lossy().into_owned();
        let Some((seq, index)) = name.strip_suffix(".wal").and_then(|s| s.split_once('-')) else {
            continue;
        };
        if let (Ok(seq), Ok(_)) = (u64::from_str_radix(seq, 16), u64::from_str_radix(index, 16)) {
            found.push((seq, item.path()));
        }
    }
    found.sort();
    if found.is_empty() {
        return Err(EtcdWalError::NoFiles);
    }
    for pair in found.windows(2) {
        if pair[1].0 != pair[0].0 + 1 {
            return Err(EtcdWalError::SequenceGap(pair[1].1.display().to_string()));
        }
    }
    Ok(found)
}

/// Whether the record `data` read at `offset` (its frame's data) has a sector of
/// zeroes: a write torn at a sector boundary (etcd's `isTornEntry`).
fn is_torn(data: &[u8], offset: usize) -> bool {
    let mut at = offset;
    let mut rest = data;
    while !rest.is_empty() {
        let len = (SECTOR - at % SECTOR).min(rest.len());
        if rest[..len].iter().all(|b| *b == 0) {
            return true;
        }
        at += len;
        rest = &rest[len..];
    }
    false
}

impl EtcdWal {
    /// Whether `dir` holds etcd's WAL: a segment file whose first record is a
    /// length-framed `crc` record (oxcd's own WAL frames records otherwise).
    pub fn is_etcds(dir: &Path) -> bool {
        let Ok(files) = segments(dir) else {
            return false;
        };
        let Ok(bytes) = std::fs::read(&files[0].1) else {
            return false;
        };
        match EtcdWal::frame(&bytes, 0) {
            Some((len, pad)) => bytes
                .get(8..8 + len)
                .and_then(|d| Record::decode(d).ok())
                .is_some_and(|r| r.kind == kind::CRC && (len + pad) % 8 == 0),
            None => false,
        }
    }

    /// The frame at `at`: the record's length and its padding (None: no frame there).
    fn frame(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
        let field = u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?);
        if field == 0 {
            return None;
        }
        let len = (field & !(0xff << 56)) as usize;
        let pad = if field >> 63 == 1 {
            ((field >> 56) & 0x7) as usize
        } else {
            0
        };
        Some((len, pad))
    }

    /// Reads and checks every record of the WAL in `dir`.
    pub fn read(dir: &Path) -> Result<EtcdWal, EtcdWalError> {
        let files = segments(dir)?;
        let mut records = Vec::new();
        let mut chain = 0u32;
        let last = files.len() - 1;
        for (n, (_, path)) in files.iter().enumerate() {
            let bytes = std::fs::read(path).map_err(io_error(path))?;
            let file = path.display().to_string();
            let newest = n == last;
            let mut at = 0usize;
            while let Some((len, pad)) = EtcdWal::frame(&bytes, at) {
                let offset = at as u64;
                let Some(data) = bytes.get(at + 8..at + 8 + len + pad) else {
                    if newest {
                        break;
                    }
                    return Err(EtcdWalError::Undecodable {
                        file,
                        offset,
                        reason: format!("a record of {len} bytes runs past the file's end"),
                    });
                };
                let record = match Record::decode(&data[..len]) {
                    Ok(r) => r,
                    Err(_) if newest && is_torn(data, at + 8) => break,
                    Err(e) => {
                        return Err(EtcdWalError::Undecodable {
                            file,
                            offset,
                            reason: e.to_string(),
                        });
                    }
                };
                if record.kind == kind::CRC {
                    if chain != 0 && record.crc != chain {
                        return Err(EtcdWalError::ChainCrc { file, offset });
                    }
                    chain = record.crc;
                } else {
                    let next = crc32c::crc32c_append(chain, &record.data);
                    if record.crc != next {
                        if newest && is_torn(data, at + 8) {
                            break;
                        }
                        return Err(EtcdWalError::RecordCrc { file, offset });
                    }
                    chain = next;
                }
                records.push(record);
                at += 8 + len + pad;
            }
        }
        Ok(EtcdWal { records })
    }

    /// Every snapshot record at or below the last hard state's commit index (etcd's
    /// `ValidSnapshotEntries`), oldest first.
    pub fn snapshots(&self) -> Result<Vec<SnapshotPoint>, EtcdWalError> {
        let mut points = Vec::new();
        let mut commit = 0;
        for r in &self.records {
            match r.kind {
                kind::SNAPSHOT => {
                    let s = self.snapshot_record(r)?;
                    points.push(SnapshotPoint {
                        index: s.index,
                        term: s.term,
                    });
                }
                kind::STATE => commit = self.hard_state(r)?.commit,
                _ => {}
            }
        }
        points.retain(|p| p.index <= commit);
        Ok(points)
    }

    fn snapshot_record(&self, r: &Record) -> Result<SnapshotRecord, EtcdWalError> {
        SnapshotRecord::decode(r.data.as_slice()).map_err(|e| self.bad("snapshot", e.to_string()))
    }

    fn hard_state(&self, r: &Record) -> Result<HardState, EtcdWalError> {
        persist::decode_hard_state(&r.data).map_err(|e| self.bad("state", e.to_string()))
    }

    fn bad(&self, what: &str, reason: String) -> EtcdWalError {
        EtcdWalError::Undecodable {
            file: format!("a {what} record"),
            offset: 0,
            reason,
        }
    }

    /// What etcd's `ReadAll` gives when it starts at `start`.
    pub fn read_from(self, start: SnapshotPoint) -> Result<WalState, EtcdWalError> {
        let mut metadata: Option<Vec<u8>> = None;
        let mut hard_state = HardState::default();
        let mut entries: Vec<Entry> = Vec::new();
        let mut matched = false;
        for r in &self.records {
            match r.kind {
                kind::ENTRY => {
                    let e = persist::decode_sent_entry(&r.data)
                        .map_err(|e| self.bad("entry", e.to_string()))?;
                    if e.index > start.index {
                        let up = (e.index - start.index - 1) as usize;
                        if up > entries.len() {
                            return Err(EtcdWalError::SliceOutOfRange);
                        }
                        entries.truncate(up);
                        entries.push(e);
                    }
                }
                kind::STATE => hard_state = self.hard_state(r)?,
                kind::METADATA => {
                    if metadata.as_ref().is_some_and(|m| *m != r.data) {
                        return Err(EtcdWalError::MetadataConflict);
                    }
                    metadata = Some(r.data.clone());
                }
                kind::CRC => {}
                kind::SNAPSHOT => {
                    let s = self.snapshot_record(r)?;
                    if s.index == start.index {
                        if s.term != start.term {
                            return Err(EtcdWalError::SnapshotMismatch);
                        }
                        matched = true;
                    }
                }
                other => return Err(EtcdWalError::UnknownType(other)),
            }
        }
        if !matched {
            return Err(EtcdWalError::SnapshotNotFound);
        }
        let metadata = Metadata::decode(metadata.unwrap_or_default().as_slice())
            .map_err(|e| self.bad("metadata", e.to_string()))?;
        Ok(WalState {
            metadata,
            hard_state,
            entries,
        })
    }
}

/// What a new etcd WAL starts with.
pub struct NewWal<'a> {
    /// Whose log it is.
    pub metadata: Metadata,
    /// The snapshot the log continues from, and the configuration there.
    pub snapshot: (SnapshotPoint, &'a ConfState),
    /// The hard state.
    pub hard_state: &'a HardState,
    /// The entries after the snapshot.
    pub entries: &'a [Entry],
}

/// Appends one record to `out`, chaining `crc` (a `crc` record carries it instead).
fn encode(out: &mut Vec<u8>, crc: &mut u32, kind: i64, data: Vec<u8>) {
    let record_crc = if kind == kind::CRC {
        *crc
    } else {
        *crc = crc32c::crc32c_append(*crc, &data);
        *crc
    };
    let bytes = Record {
        kind,
        crc: record_crc,
        data,
    }
    .encode_to_vec();
    let pad = (8 - bytes.len() % 8) % 8;
    let mut field = bytes.len() as u64;
    if pad != 0 {
        field |= (0x80 | pad as u64) << 56;
    }
    out.extend_from_slice(&field.to_le_bytes());
    out.extend_from_slice(&bytes);
    out.resize(out.len() + pad, 0);
}

/// Writes a new etcd WAL into the directory `dir` (created; it must not exist): one
/// segment, as etcd's `Create` starts it (a `crc` record, the metadata, the empty
/// snapshot), then the snapshot the log continues from, the entries and the hard state,
/// as etcd's restore and `Save` write them; extended with zeroes to etcd's segment size
/// and made durable.
pub fn write(dir: &Path, wal: &NewWal<'_>) -> Result<(), EtcdWalError> {
    let mut out = Vec::new();
    let mut crc = 0u32;
    encode(&mut out, &mut crc, kind::CRC, Vec::new());
    encode(
        &mut out,
        &mut crc,
        kind::METADATA,
        wal.metadata.encode_to_vec(),
    );
    encode(
        &mut out,
        &mut crc,
        kind::SNAPSHOT,
        SnapshotRecord::default().encode_to_vec(),
    );
    let (point, conf) = wal.snapshot;
    if point.index > 0 {
        let record = SnapshotRecord {
            index: point.index,
            term: point.term,
            conf_state: Some(persist::encode_conf_state(conf)),
        };
        encode(&mut out, &mut crc, kind::SNAPSHOT, record.encode_to_vec());
    }
    for e in wal.entries {
        encode(&mut out, &mut crc, kind::ENTRY, persist::encode_entry(e));
    }
    encode(
        &mut out,
        &mut crc,
        kind::STATE,
        persist::encode_hard_state(wal.hard_state),
    );
    std::fs::create_dir(dir).map_err(io_error(dir))?;
    let path = dir.join(format!("{:016x}-{:016x}.wal", 0, 0));
    let file = std::fs::File::create(&path).map_err(io_error(&path))?;
    use std::io::Write as _;
    (&file).write_all(&out).map_err(io_error(&path))?;
    file.set_len(SEGMENT_BYTES.max(out.len() as u64))
        .map_err(io_error(&path))?;
    file.sync_all().map_err(io_error(&path))?;
    Ok(crate::backup::path_io::sync_dir(dir)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxcd_raft::EntryType;

    fn entry(index: u64, term: u64) -> Entry {
        let mut e = Entry::default();
        e.set_entry_type(EntryType::EntryNormal);
        e.index = index;
        e.term = term;
        e.data = vec![index as u8; 3].into();
        e
    }

    fn written(dir: &Path) -> PathBuf {
        let wal = dir.join("wal");
        let conf = ConfState {
            voters: vec![7],
            ..Default::default()
        };
        let hs = HardState {
            term: 3,
            vote: 7,
            commit: 12,
            ..Default::default()
        };
        let entries: Vec<Entry> = (11..=13).map(|i| entry(i, 3)).collect();
        write(
            &wal,
            &NewWal {
                metadata: Metadata {
                    node_id: 7,
                    cluster_id: 9,
                },
                snapshot: (SnapshotPoint { index: 10, term: 2 }, &conf),
                hard_state: &hs,
                entries: &entries,
            },
        )
        .expect("write");
        wal
    }

    #[test]
    fn a_written_wal_reads_back_from_its_snapshot() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = written(dir.path());
        assert!(EtcdWal::is_etcds(&wal));
        let read = EtcdWal::read(&wal).expect("read");
        assert_eq!(
            read.snapshots().expect("snapshots"),
            vec![
                SnapshotPoint::default(),
                SnapshotPoint { index: 10, term: 2 }
            ]
        );
        let state = read
            .read_from(SnapshotPoint { index: 10, term: 2 })
            .expect("state");
        assert_eq!(state.metadata.node_id, 7);
        assert_eq!(state.metadata.cluster_id, 9);
        assert_eq!(state.hard_state.commit, 12);
        assert_eq!(
            state.entries.iter().map(|e| e.index).collect::<Vec<_>>(),
            vec![11, 12, 13]
        );
    }

    #[test]
    fn a_snapshot_not_in_the_log_or_of_another_term_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = written(dir.path());
        let err = EtcdWal::read(&wal)
            .expect("read")
            .read_from(SnapshotPoint { index: 10, term: 1 })
            .expect_err("term");
        assert_eq!(err.to_string(), "wal: snapshot mismatch");
        let err = EtcdWal::read(&wal)
            .expect("read")
            .read_from(SnapshotPoint { index: 11, term: 3 })
            .expect_err("index");
        assert_eq!(err.to_string(), "wal: snapshot not found");
    }

    #[test]
    fn a_flipped_byte_is_a_crc_mismatch_and_a_torn_tail_ends_the_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = written(dir.path());
        let path = segments(&wal).expect("segments")[0].1.clone();
        let clean = std::fs::read(&path).expect("read");
        let mut frames = Vec::new();
        let mut at = 0;
        while let Some((len, pad)) = EtcdWal::frame(&clean, at) {
            frames.push((at, len, pad));
            at += 8 + len + pad;
        }
        // The last byte of the last entry's record (the hard state's comes after it).
        let mut flipped = clean.clone();
        let (entry_at, entry_len, _) = frames[frames.len() - 2];
        flipped[entry_at + 8 + entry_len - 1] ^= 0x40;
        std::fs::write(&path, &flipped).expect("write");
        let err = EtcdWal::read(&wal).err().expect("damage is refused");
        assert!(err.to_string().contains("crc mismatch"), "{err}");
        // The last record's sector zeroed: a torn write, the log ends before it.
        let mut torn = clean.clone();
        let (state_at, state_len, state_pad) = frames[frames.len() - 1];
        for b in &mut torn[state_at + 8..state_at + 8 + state_len + state_pad] {
            *b = 0;
        }
        std::fs::write(&path, &torn).expect("write");
        let state = EtcdWal::read(&wal)
            .expect("read")
            .read_from(SnapshotPoint { index: 10, term: 2 })
            .expect("state");
        assert_eq!(state.entries.len(), 3);
        assert_eq!(state.hard_state.commit, 0, "the torn hard state is gone");
    }
}
