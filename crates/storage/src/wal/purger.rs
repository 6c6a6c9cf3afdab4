//! Deletes the segment files a purge let go, on a thread of its own: unlinking a 64 MiB
//! file and syncing the directory took the raft loop tens of milliseconds at a time
//! (and a purge after a large load unlinks dozens), during which no write was
//! acknowledged.
//!
//! Invariants: files are deleted in the order they were handed over, oldest first, by
//! one thread, so a crash at any point leaves the segments on disk contiguous (a
//! prefix already gone); a segment handed over is never written again. Dropping the
//! purger finishes the deletions handed over before it returns. A deletion that fails
//! is logged and left: the segment is older than the snapshot, and a member that
//! restarts with it reads it as one more segment before the snapshot.

use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;

/// The deleting thread, started at the first purge.
#[derive(Default)]
pub(super) struct Purger {
    running: Option<(mpsc::Sender<Vec<PathBuf>>, JoinHandle<()>)>,
}

impl std::fmt::Debug for Purger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Purger")
            .field("running", &self.running.is_some())
            .finish()
    }
}

impl Purger {
    /// Deletes `files` (in this order) and then syncs `dir`, after every file handed
    /// over before; deleted on the caller's thread if no thread can be started.
    pub(super) fn delete(&mut self, dir: PathBuf, files: Vec<PathBuf>) {
        if self.running.is_none() {
            let (tx, rx) = mpsc::channel::<Vec<PathBuf>>();
            let thread_dir = dir.clone();
            let spawned = std::thread::Builder::new()
                .name("wal-purge".into())
                .spawn(move || {
                    for batch in rx {
                        delete_now(&thread_dir, &batch);
                    }
                });
            match spawned {
                Ok(handle) => self.running = Some((tx, handle)),
                Err(e) => {
                    tracing::warn!("cannot start the WAL purge thread ({e}); purging inline");
                    return delete_now(&dir, &files);
                }
            }
        }
        if let Some((tx, _)) = &self.running
            && let Err(mpsc::SendError(files)) = tx.send(files)
        {
            // The thread is gone (it panicked): nothing else deletes them.
            tracing::warn!(
                "the WAL purge thread stopped; {} segments left",
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

/// Deletes `files` in order, then syncs `dir` so the deletions are durable.
fn delete_now(dir: &std::path::Path, files: &[PathBuf]) {
    for path in files {
        if let Err(e) = std::fs::remove_file(path) {
            tracing::warn!(path = %path.display(), "cannot delete a purged WAL segment: {e}");
            // Later segments stay too, so that those on disk stay contiguous.
            return;
        }
    }
    if let Err(e) = super::sync_dir(dir) {
        tracing::warn!("cannot sync the WAL directory after a purge: {e}");
    }
}
