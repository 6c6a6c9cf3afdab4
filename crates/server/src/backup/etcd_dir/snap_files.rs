//! etcd's raft snapshot files, `member/snap/<term:016x>-<index:016x>.snap`, as etcd
//! 3.5.16's snapshotter reads and writes them (`server/etcdserver/api/snap/
//! snapshotter.go`, `snappb/snap.proto`): a `snappb.Snapshot` whose `data` is the
//! encoded raftpb `Snapshot` (its metadata, and etcd's v2 store as its data) and whose
//! `crc` is the CRC-32C of that data.
//!
//! The snapshot etcd starts from is the newest file that reads back whole and whose
//! index and term are a snapshot record of the WAL (`LoadNewestAvailable`). etcd renames
//! a file that does not read to `.broken`; here it is passed over and left as it is
//! (etcd's files are not changed).

use crate::backup::path_io::io;
use std::path::{Path, PathBuf};

use oxcd_raft::Snapshot;
use oxcd_raft::persist;
use prost::Message as _;

use super::wal::SnapshotPoint;

/// `snappb.Snapshot`.
#[derive(Clone, PartialEq, prost::Message)]
struct SnapFile {
    #[prost(uint32, tag = "1")]
    crc: u32,
    #[prost(bytes = "vec", tag = "2")]
    data: Vec<u8>,
}

/// Why a snapshot file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SnapFileError {
    /// A file or directory operation failed.
    #[error(transparent)]
    Io(#[from] crate::backup::path_io::PathIoError),
    /// The file is empty or has no data (etcd's `ErrEmptySnapshot`).
    #[error("snap: empty snapshot")]
    Empty,
    /// The data's CRC is not the file's (etcd's `ErrCRCMismatch`).
    #[error("snap: crc mismatch")]
    Crc,
    /// The file does not decode.
    #[error("snap: {0}")]
    Undecodable(String),
}

fn name_of(point: SnapshotPoint) -> String {
    format!("{:016x}-{:016x}.snap", point.term, point.index)
}

/// The point a file's name gives.
fn point_of(name: &str) -> Option<SnapshotPoint> {
    let (term, index) = name.strip_suffix(".snap")?.split_once('-')?;
    Some(SnapshotPoint {
        term: u64::from_str_radix(term, 16).ok()?,
        index: u64::from_str_radix(index, 16).ok()?,
    })
}

/// Reads the snapshot file at `path`.
pub fn read(path: &Path) -> Result<Snapshot, SnapFileError> {
    let bytes = std::fs::read(path).map_err(io(path))?;
    if bytes.is_empty() {
        return Err(SnapFileError::Empty);
    }
    let file = SnapFile::decode(bytes.as_slice())
        .map_err(|e| SnapFileError::Undecodable(e.to_string()))?;
    if file.data.is_empty() || file.crc == 0 {
        return Err(SnapFileError::Empty);
    }
    if crc32c::crc32c(&file.data) != file.crc {
        return Err(SnapFileError::Crc);
    }
    persist::decode_snapshot(&file.data).map_err(|e| SnapFileError::Undecodable(e.to_string()))
}

/// The newest snapshot in `dir` that reads back whole and is one of `points` (None:
/// there is none).
pub fn newest_of(dir: &Path, points: &[SnapshotPoint]) -> Result<Option<Snapshot>, SnapFileError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(io(dir)(source).into()),
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| point_of(n).is_some())
        .collect();
    names.sort();
    for name in names.iter().rev() {
        let path = dir.join(name);
        match read(&path) {
            Ok(snap) => {
                let m = snap.get_metadata();
                let here = SnapshotPoint {
                    index: m.index,
                    term: m.term,
                };
                if points.contains(&here) {
                    return Ok(Some(snap));
                }
            }
            Err(e) => tracing::warn!(path = %path.display(), "passing over a snapshot file: {e}"),
        }
    }
    Ok(None)
}

/// Writes `snap` into `dir` under etcd's name for it, durably.
pub fn write(dir: &Path, snap: &Snapshot) -> Result<PathBuf, SnapFileError> {
    let m = snap.get_metadata();
    let path = dir.join(name_of(SnapshotPoint {
        index: m.index,
        term: m.term,
    }));
    let data = persist::encode_snapshot(snap);
    let bytes = SnapFile {
        crc: crc32c::crc32c(&data),
        data,
    }
    .encode_to_vec();
    let file = std::fs::File::create(&path).map_err(io(&path))?;
    use std::io::Write as _;
    (&file).write_all(&bytes).map_err(io(&path))?;
    file.sync_all().map_err(io(&path))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(index: u64, term: u64) -> Snapshot {
        let mut s = Snapshot {
            data: b"{}".to_vec().into(),
            ..Default::default()
        };
        s.mut_metadata().index = index;
        s.mut_metadata().term = term;
        s.mut_metadata().mut_conf_state().voters = vec![1, 2];
        s
    }

    #[test]
    fn the_newest_readable_file_the_wal_knows_is_taken() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), &snapshot(10, 2)).expect("write");
        write(dir.path(), &snapshot(20, 2)).expect("write");
        let broken = write(dir.path(), &snapshot(30, 3)).expect("write");
        let mut bytes = std::fs::read(&broken).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&broken, bytes).expect("write");
        assert!(matches!(read(&broken), Err(SnapFileError::Crc)));
        let points = [
            SnapshotPoint { index: 10, term: 2 },
            SnapshotPoint { index: 30, term: 3 },
        ];
        let taken = newest_of(dir.path(), &points).expect("read").expect("one");
        assert_eq!(taken.get_metadata().index, 10);
        assert_eq!(taken.get_metadata().get_conf_state().voters, vec![1, 2]);
        assert!(newest_of(dir.path(), &[]).expect("read").is_none());
    }
}
