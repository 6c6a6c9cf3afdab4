//! A file or directory operation that failed, with the path it was on: the one I/O
//! error the binary swap and a received etcd snapshot report (`<path>: <cause>`); and
//! the directory sync they make new entries durable with.

use std::path::{Path, PathBuf};

/// A file or directory operation on `path` failed.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct PathIoError {
    /// The path.
    pub path: PathBuf,
    /// The failure.
    pub source: std::io::Error,
}

/// Turns an I/O failure on `path` into a [`PathIoError`] (for `map_err`).
pub fn io(path: &Path) -> impl FnOnce(std::io::Error) -> PathIoError + '_ {
    move |source| PathIoError {
        path: path.to_path_buf(),
        source,
    }
}

/// Makes the entries of directory `dir` durable.
pub fn sync_dir(dir: &Path) -> Result<(), PathIoError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))
}
