//! The storage version of a backend (etcd 3.6's `meta/storageVersion`): which etcd
//! release's format the data is in, as etcd's `UnsafeDetectSchemaVersion` tells it, and
//! its change by the member itself or by `oxcdutl migrate` (never through the apply
//! path: members set it at different times).

use crate::Result;
use crate::backend::Backend;
use crate::schema::{META_CONSISTENT_TERM, META_STORAGE_VERSION};

/// What a backend says of its format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detected {
    /// The recorded version (`3.6.0`).
    Recorded(String),
    /// No version recorded but entries applied: etcd 3.5's format.
    Etcd35,
    /// Nothing applied yet: no version can be told (etcd's `missing term information`).
    Unknown,
}

/// Reads what `backend` says of its format.
pub fn detect(backend: &Backend) -> Result<Detected> {
    let tx = backend.begin_read()?;
    let recorded = Backend::read_meta(&tx, META_STORAGE_VERSION).map_err(|e| backend.err(e))?;
    if let Some(v) = recorded {
        return Ok(Detected::Recorded(String::from_utf8_lossy(&v).into_owned()));
    }
    let term = Backend::read_meta(&tx, META_CONSISTENT_TERM).map_err(|e| backend.err(e))?;
    let applied = term
        .and_then(|raw| <[u8; 8]>::try_from(raw.as_slice()).ok())
        .is_some_and(|t| u64::from_le_bytes(t) != 0);
    Ok(if applied {
        Detected::Etcd35
    } else {
        Detected::Unknown
    })
}

/// Records `version` (`X.Y.0`), or removes the record (None: etcd 3.5's format), and
/// makes it durable.
pub fn set(backend: &Backend, version: Option<&str>) -> Result<()> {
    backend.set_local_meta(META_STORAGE_VERSION, version.map(str::as_bytes))
}
