//! Segment files on disk: a new one written with its header records and preallocated to
//! the segment size, then made durable; the newest one opened for positional writes.
//!
//! Why preallocate: an fdatasync after an append that grows the file must also commit the
//! new size and block allocation; into space reserved beforehand it commits the data only.
//! On ext4 over virtio here that is 96-102 µs instead of 135-140 µs per fsync (median of
//! 2,000 appends of 300 B), and every acknowledged write waits for one. etcd preallocates
//! its segments the same way.
//!
//! Invariant: every byte after a segment's last record is zero — reserved space reads back
//! as zeroes, and a torn write is cut off and the space reserved again — so recovery finds
//! the end of the data without a length field, and garbage after it always means damage.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

use crate::{Result, StorageError};

/// Reserves room for `file` up to `len` bytes, extending its size with zeroes. Best
/// effort: where the file system has no fallocate or the disk has no room for a whole
/// segment, the file grows as it is written instead (slower syncs; the disk-full error
/// then comes from the write that needs the room).
pub(super) fn preallocate(file: &File, path: &Path, len: u64) {
    let current = match file.metadata() {
        Ok(m) => m.len(),
        Err(_) => return,
    };
    if current >= len {
        return;
    }
    let reserve = rustix::fs::fallocate(
        file,
        rustix::fs::FallocateFlags::empty(),
        current,
        len - current,
    );
    if let Err(e) = reserve {
        tracing::warn!(
            path = %path.display(),
            error = %e,
            "wal: cannot preallocate the segment; it grows as it is written"
        );
    }
}

/// Creates `path` holding `header`, reserves `size` bytes for it and makes both durable.
/// The caller renames it into place (and syncs the directory) to publish it.
pub(super) fn write_new(path: &Path, header: &[u8], size: u64) -> Result<()> {
    let mut f = File::create(path).map_err(|e| StorageError::io(path, e))?;
    f.write_all(header).map_err(|e| StorageError::io(path, e))?;
    preallocate(&f, path, size);
    f.sync_all().map_err(|e| StorageError::io(path, e))
}

/// Opens a segment for writing at explicit offsets (not `O_APPEND`: the file's size is
/// the reserved size, not the end of the data).
pub(super) fn open_for_writes(path: &Path) -> Result<File> {
    OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| StorageError::io(path, e))
}
