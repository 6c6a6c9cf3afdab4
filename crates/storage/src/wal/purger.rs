//! Deletes the segment files a purge let go, on a thread of its own: unlinking a 64 MiB
//! file and syncing the directory took the raft loop tens of milliseconds at a time
//! (and a purge after a large load unlinks dozens), during which no write was
//! acknowledged.
//!
//! Invariants: files are deleted in the order they were handed over, oldest first, by
//! one thread, so a crash at any point leaves the segments on disk contiguous (a
//! prefix already gone); a segment handed over is never written again. Once a deletion
//! fails, nothing after it is deleted (deleting a later one would leave a gap, which
//! recovery refuses): the segments left are older than the snapshot, and a member that
//! restarts with them reads them as segments before it. Dropping the purger finishes
//! the deletions handed over before it returns.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

/// The deleting thread of one WAL directory, started at the first purge.
#[derive(Debug)]
pub(super) struct Purger {
    dir: PathBuf,
    running: Option<(mpsc::Sender<Vec<PathBuf>>, JoinHandle<()>)>,
}

impl Purger {
    /// The purger of the WAL in `dir`.
    pub(super) fn new(dir: &Path) -> Purger {
        Purger {
            dir: dir.to_path_buf(),
            running: None,
        }
    }

    /// Deletes `files` (in this order) and then syncs the directory, after every file
    /// handed over before; on the caller's thread if no thread can be started.
    pub(super) fn delete(&mut self, files: Vec<PathBuf>) {
        if self.running.is_none() {
            let (tx, rx) = mpsc::channel::<Vec<PathBuf>>();
            let dir = self.dir.clone();
            let spawned = std::thread::Builder::new()
                .name("wal-purge".into())
                .spawn(move || {
                    for batch in rx {
                        if !delete_now(&dir, &batch) {
                            return;
                        }
                    }
                });
            match spawned {
                Ok(handle) => self.running = Some((tx, handle)),
                Err(e) => {
                    tracing::warn!("cannot start the WAL purge thread ({e}); purging inline");
                    delete_now(&self.dir, &files);
                    return;
                }
            }
        }
        if let Some((tx, _)) = &self.running
            && let Err(mpsc::SendError(files)) = tx.send(files)
        {
            // The thread stopped at a failed deletion: these stay too.
            tracing::warn!(
                "WAL purges stopped after a failed deletion; {} more segments left",
                files.len()
            );
        }
    }

    /// Waits until every deletion handed over is done.
    pub(super) fn finish(&mut self) {
        if let Some((tx, handle)) = self.running.take() {
            drop(tx);
            let _ = handle.join();
        }
    }
}

impl Drop for Purger {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Deletes `files` in order, then syncs `dir` so the deletions are durable; false if a
/// deletion failed (the files after it are left).
fn delete_now(dir: &Path, files: &[PathBuf]) -> bool {
    for path in files {
        if let Err(e) = std::fs::remove_file(path) {
            tracing::warn!(path = %path.display(), "cannot delete a purged WAL segment: {e}; later segments are kept so that those on disk stay contiguous");
            return false;
        }
    }
    if let Err(e) = super::sync_dir(dir) {
        tracing::warn!("cannot sync the WAL directory after a purge: {e}");
    }
    true
}
