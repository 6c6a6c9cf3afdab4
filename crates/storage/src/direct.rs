//! Sequential writes of a large file that bypass the page cache.
//!
//! A received snapshot is as large as the backend and is read back once, when it is
//! installed. Copied through the page cache it costs a CPU second or more per GiB (every
//! page freshly allocated and copied into) that the member's other work needs. A
//! [`DirectWriter`] opens the file with `O_DIRECT` and writes from one aligned buffer,
//! so the disk reads it straight from memory; where the filesystem refuses `O_DIRECT`
//! (tmpfs on older kernels, some network filesystems) it writes through the page cache
//! with the same buffer.
//!
//! Invariant: every `O_DIRECT` write is a whole number of [`ALIGN`] blocks at an
//! aligned offset, from an aligned address. The file's last partial block is written
//! padded with zeros and the file is then cut to its true length.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Alignment of `O_DIRECT` buffers, offsets and lengths: the largest logical block size
/// of common disks.
pub const ALIGN: usize = 4096;
/// Bytes gathered before each write: large enough that the disk streams, small enough
/// that a write does not hold the writer for long.
const BUFFER: usize = 1 << 20;
/// What Linux answers an `O_DIRECT` open or write a filesystem does not support.
const EINVAL: i32 = rustix::io::Errno::INVAL.raw_os_error();

/// A file being written from start to end, without the page cache where possible.
pub struct DirectWriter {
    file: File,
    direct: bool,
    /// `BUFFER + ALIGN` bytes; the aligned window starts at `start`.
    buf: Vec<u8>,
    start: usize,
    /// Bytes waiting in the window.
    filled: usize,
    /// Bytes already written to the file.
    written: u64,
}

impl DirectWriter {
    /// Creates (or truncates) the file at `path`.
    pub fn create(path: &Path) -> io::Result<DirectWriter> {
        let open = |flags: i32| {
            OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(true)
                .custom_flags(flags)
                .open(path)
        };
        let direct_flag = rustix::fs::OFlags::DIRECT.bits() as i32;
        let (file, direct) = match open(direct_flag) {
            Ok(f) => (f, true),
            Err(e) if e.raw_os_error() == Some(EINVAL) => (open(0)?, false),
            Err(e) => return Err(e),
        };
        let buf = vec![0u8; BUFFER + ALIGN];
        let start = buf.as_ptr().align_offset(ALIGN);
        if start >= ALIGN {
            return Err(io::Error::other("cannot align a write buffer"));
        }
        Ok(DirectWriter {
            file,
            direct,
            buf,
            start,
            filled: 0,
            written: 0,
        })
    }

    /// Appends `data`.
    pub fn write(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let n = (BUFFER - self.filled).min(data.len());
            let at = self.start + self.filled;
            self.buf[at..at + n].copy_from_slice(&data[..n]);
            self.filled += n;
            data = &data[n..];
            if self.filled == BUFFER {
                self.write_window(BUFFER)?;
            }
        }
        Ok(())
    }

    /// Writes the first `len` bytes of the window (a multiple of [`ALIGN`] when direct).
    fn write_window(&mut self, len: usize) -> io::Result<()> {
        let window = &self.buf[self.start..self.start + len];
        match self.file.write_all(window) {
            // A filesystem that opens O_DIRECT files but refuses their writes: go on
            // through the page cache (a refused write wrote nothing).
            Err(e) if self.direct && e.raw_os_error() == Some(EINVAL) => {
                let flags = rustix::fs::fcntl_getfl(&self.file)?;
                rustix::fs::fcntl_setfl(&self.file, flags - rustix::fs::OFlags::DIRECT)?;
                self.direct = false;
                self.file.write_all(window)?;
            }
            res => res?,
        }
        self.written += len as u64;
        self.filled = 0;
        Ok(())
    }

    /// Writes what is left, syncs the file and returns it with its length.
    pub fn finish(mut self) -> io::Result<(File, u64)> {
        let len = self.written + self.filled as u64;
        if self.filled > 0 {
            if self.direct {
                let padded = self.filled.div_ceil(ALIGN) * ALIGN;
                let from = self.start + self.filled;
                self.buf[from..self.start + padded].fill(0);
                self.write_window(padded)?;
                self.file.set_len(len)?;
            } else {
                let filled = self.filled;
                self.write_window(filled)?;
            }
        }
        self.file.sync_all()?;
        Ok((self.file, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_every_byte_whatever_the_chunking() {
        let dir = tempfile::tempdir().expect("tempdir");
        for total in [
            0usize,
            1,
            ALIGN - 1,
            ALIGN,
            BUFFER,
            BUFFER + 3,
            2 * BUFFER + ALIGN + 7,
        ] {
            let data: Vec<u8> = (0..total).map(|i| (i * 31 % 251) as u8).collect();
            let path = dir.path().join(format!("f{total}"));
            let mut w = DirectWriter::create(&path).expect("create");
            for piece in data.chunks(100_003) {
                w.write(piece).expect("write");
            }
            let (_, len) = w.finish().expect("finish");
            assert_eq!(len, total as u64);
            assert_eq!(std::fs::read(&path).expect("read"), data, "{total} bytes");
        }
    }

    #[test]
    fn truncates_an_existing_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, vec![9u8; 3 * ALIGN]).expect("write");
        let mut w = DirectWriter::create(&path).expect("create");
        w.write(b"short").expect("write");
        w.finish().expect("finish");
        assert_eq!(std::fs::read(&path).expect("read"), b"short");
    }
}
