//! Configurations rebuilt when their files change.
//!
//! Each use looks at the files' identity (inode, size, modification time, following
//! symlinks, so Kubernetes' atomic `..data` swaps count): a change rebuilds the
//! configuration, which then serves every later connection. A rebuild that fails (a
//! rotation caught half written, a bad file) keeps the last good configuration and is
//! logged once per change; it is tried again when the files change again.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::TlsError;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    len: u64,
    modified: Option<SystemTime>,
}

fn stamps(files: &[PathBuf]) -> Vec<Option<Stamp>> {
    files
        .iter()
        .map(|f| {
            std::fs::metadata(f).ok().map(|m| Stamp {
                ino: m.ino(),
                len: m.len(),
                modified: m.modified().ok(),
            })
        })
        .collect()
}

type Build<T> = Box<dyn Fn() -> Result<T, TlsError> + Send + Sync>;

/// A `T` built from `files`, rebuilt when they change.
pub(super) struct Reloading<T> {
    what: &'static str,
    files: Vec<PathBuf>,
    build: Build<T>,
    state: Mutex<(Vec<Option<Stamp>>, Arc<T>)>,
}

impl<T> Reloading<T> {
    /// Builds the first `T`; an error here is a start-up error.
    pub(super) fn new(
        what: &'static str,
        files: Vec<PathBuf>,
        build: Build<T>,
    ) -> Result<Self, TlsError> {
        let seen = stamps(&files);
        let first = build()?;
        Ok(Reloading {
            what,
            files,
            build,
            state: Mutex::new((seen, Arc::new(first))),
        })
    }

    /// The current `T`, rebuilt first if a file changed.
    pub(super) fn get(&self) -> Arc<T> {
        let now = stamps(&self.files);
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.0 != now {
            state.0 = now;
            match (self.build)() {
                Ok(t) => {
                    state.1 = Arc::new(t);
                    tracing::info!(files = ?self.files, "{}: TLS files changed; new connections use them", self.what);
                }
                Err(e) => tracing::warn!(
                    "{}: TLS files changed but cannot be used ({e}); still using the previous ones",
                    self.what
                ),
            }
        }
        state.1.clone()
    }
}
