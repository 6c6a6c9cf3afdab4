//! The data-directory lock: one process per data dir, enforced with an OS file lock.
//!
//! The lock is advisory (flock) on `<dir>/member/.lock` and released by the OS when the
//! holder exits, even after `kill -9`, so a crash never leaves a stale lock behind.

use std::fs::{File, OpenOptions};
use std::path::Path;

use crate::{Result, StorageError};

/// Holds the data-dir lock for as long as it lives.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Takes the lock on `dir`, creating the directory if needed. Fails at once (never
    /// waits) when another process holds it.
    pub fn acquire(dir: &Path) -> Result<DirLock> {
        std::fs::create_dir_all(dir).map_err(|e| StorageError::io(dir, e))?;
        let path = dir.join(".lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| StorageError::io(&path, e))?;
        match file.try_lock() {
            Ok(()) => Ok(DirLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => Err(StorageError::Locked {
                path: dir.display().to_string(),
                lock_file: path.display().to_string(),
            }),
            Err(std::fs::TryLockError::Error(e)) => Err(StorageError::io(&path, e)),
        }
    }
}

/// Whether another process holds a record lock on the file at `path`: etcd takes one
/// (an open file description lock, which POSIX record locks conflict with) on each WAL
/// segment it has open, so a running etcd member's WAL answers true. Nothing is kept
/// locked afterwards.
pub fn record_locked_elsewhere(path: &Path) -> Result<bool> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| StorageError::io(path, e))?;
    match rustix::fs::fcntl_lock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(false),
        Err(e) if e == rustix::io::Errno::AGAIN || e == rustix::io::Errno::ACCESS => Ok(true),
        Err(e) => Err(StorageError::io(path, e.into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_is_refused_and_freed_on_drop() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = DirLock::acquire(dir.path()).expect("first lock");
        let err = DirLock::acquire(dir.path()).expect_err("second lock must fail");
        assert!(matches!(err, StorageError::Locked { .. }), "{err}");
        drop(first);
        DirLock::acquire(dir.path()).expect("lock after release");
    }
}
