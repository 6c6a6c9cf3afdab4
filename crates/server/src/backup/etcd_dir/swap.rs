//! Directories built beside a member's, put in their place (the binary swap, both ways):
//! once the built ones are durable a mark says so, then each old directory is renamed
//! aside (`<dir>.<kept>`) and the built one (`<dir>.<staging>`) renamed into its place,
//! each rename made durable, and the mark removed last. Finding the mark after a crash,
//! the same steps finish what is left: each is done only if its source is still there.

use std::path::{Path, PathBuf};

/// Why the built directories could not be put in place.
#[derive(Debug, thiserror::Error)]
pub enum PlaceError {
    /// A directory kept aside by an earlier swap is in the way.
    #[error("{0} holds the files of an earlier swap: move or remove it first")]
    KeptExists(PathBuf),
    /// A file or directory operation failed.
    #[error(transparent)]
    Io(#[from] crate::backup::path_io::PathIoError),
}

use crate::backup::path_io::{io, sync_dir};

/// `dir` with `.suffix` added to its name.
pub fn beside(dir: &Path, suffix: &str) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".");
    name.push(suffix);
    dir.with_file_name(name)
}

/// Marks the built directories complete (durably): from now on they go in place.
pub fn mark_complete(marker: &Path) -> Result<(), PlaceError> {
    std::fs::File::create(marker)
        .and_then(|f| f.sync_all())
        .map_err(io(marker))?;
    match marker.parent() {
        Some(parent) => Ok(sync_dir(parent)?),
        None => Ok(()),
    }
}

/// Puts each `<dir>.<staging>` in place of `dir` (kept as `<dir>.<kept>`), then removes
/// `marker`.
pub fn put_in_place(
    dirs: &[&Path],
    staging: &str,
    kept: &str,
    marker: &Path,
) -> Result<(), PlaceError> {
    for dir in dirs {
        let built = beside(dir, staging);
        if !built.exists() {
            continue;
        }
        if dir.exists() {
            let aside = beside(dir, kept);
            if aside.exists() {
                return Err(PlaceError::KeptExists(aside));
            }
            std::fs::rename(dir, &aside).map_err(io(dir))?;
        }
        std::fs::rename(&built, dir).map_err(io(&built))?;
        if let Some(parent) = dir.parent() {
            sync_dir(parent)?;
        }
    }
    std::fs::remove_file(marker).map_err(io(marker))?;
    match marker.parent() {
        Some(parent) => Ok(sync_dir(parent)?),
        None => Ok(()),
    }
}
