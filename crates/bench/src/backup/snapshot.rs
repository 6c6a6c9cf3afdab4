//! Snapshot save as `etcdctl snapshot save` does it: one Maintenance.Snapshot stream from
//! one member, every message's bytes appended to `<file>.part`, fsync, rename to `<file>`;
//! then, outside the timed part, the check `snapshot restore` makes: the last 32 bytes
//! are the sha256 of the rest.

use std::io::{BufWriter, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::Instant;

use oxcd_api::etcdserverpb::SnapshotRequest;
use serde::Serialize;
use sha2::{Digest as _, Sha256};

use crate::load;

/// What the snapshot save did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Snapshot {
    /// From the request sent to the file fsynced and renamed.
    pub secs: f64,
    /// The saved file's size: the database and the 32-byte sha256 message.
    pub file_bytes: u64,
    /// Messages received.
    pub messages: u64,
    /// The last 32 bytes are the sha256 of the rest.
    pub sha256_ok: bool,
    /// Why there is no snapshot, when the save failed.
    pub error: Option<String>,
}

/// The sha256 message that ends every snapshot stream.
const SHA256_BYTES: u64 = 32;

impl Snapshot {
    /// The database's bytes (the file without its sha256 trailer).
    pub fn db_bytes(&self) -> u64 {
        self.file_bytes.saturating_sub(SHA256_BYTES)
    }

    /// Database bytes per second, in MB (10^6 bytes); none when the save failed.
    pub fn mb_per_sec(&self) -> Option<f64> {
        (self.error.is_none() && self.secs > 0.0).then(|| self.db_bytes() as f64 / 1e6 / self.secs)
    }

    fn failed(error: String) -> Snapshot {
        Snapshot {
            error: Some(error),
            ..Snapshot::default()
        }
    }
}

/// Saves the snapshot of the member at `url` to `file` and checks its trailer.
pub async fn save(url: &str, file: &Path) -> Snapshot {
    let mut snapshot = match stream_to(url, file).await {
        Ok(s) => s,
        Err(e) => return Snapshot::failed(e),
    };
    let path = file.to_path_buf();
    match tokio::task::spawn_blocking(move || trailer_is_sha256(&path)).await {
        Ok(Ok(ok)) => snapshot.sha256_ok = ok,
        Ok(Err(e)) => snapshot.error = Some(e),
        Err(e) => snapshot.error = Some(e.to_string()),
    }
    snapshot
}

fn part_of(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".part");
    PathBuf::from(name)
}

/// The timed part: the stream into `<file>.part`, fsync, rename.
async fn stream_to(url: &str, file: &Path) -> Result<Snapshot, String> {
    let client = load::connect(url, std::time::Duration::from_secs(60)).await?;
    let part = part_of(file);
    let out = std::fs::File::create(&part).map_err(|e| format!("{}: {e}", part.display()))?;
    let mut out = BufWriter::with_capacity(1 << 20, out);
    let start = Instant::now();
    let mut stream = client
        .maintenance()
        .snapshot(SnapshotRequest {})
        .await
        .map_err(|s| format!("Maintenance.Snapshot: {}", s.message()))?
        .into_inner();
    let (mut bytes, mut messages) = (0u64, 0u64);
    while let Some(m) = stream
        .message()
        .await
        .map_err(|s| format!("Maintenance.Snapshot after {bytes} bytes: {}", s.message()))?
    {
        out.write_all(&m.blob)
            .map_err(|e| format!("{}: {e}", part.display()))?;
        bytes += m.blob.len() as u64;
        messages += 1;
    }
    let out = out
        .into_inner()
        .map_err(|e| format!("{}: {e}", part.display()))?;
    out.sync_all()
        .map_err(|e| format!("fsync {}: {e}", part.display()))?;
    drop(out);
    std::fs::rename(&part, file).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(Snapshot {
        secs: start.elapsed().as_secs_f64(),
        file_bytes: bytes,
        messages,
        sha256_ok: false,
        error: None,
    })
}

/// Whether the last 32 bytes of `file` are the sha256 of the bytes before them.
fn trailer_is_sha256(file: &Path) -> Result<bool, String> {
    let err = |e: std::io::Error| format!("{}: {e}", file.display());
    let mut f = std::fs::File::open(file).map_err(err)?;
    let len = f.metadata().map_err(err)?.len();
    let Some(body) = len.checked_sub(SHA256_BYTES) else {
        return Ok(false);
    };
    let mut hasher = Sha256::new();
    let mut left = body;
    let mut buf = vec![0u8; 1 << 20];
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = f.read(&mut buf[..want]).map_err(err)?;
        if n == 0 {
            return Ok(false);
        }
        hasher.update(&buf[..n]);
        left -= n as u64;
    }
    let mut trailer = [0u8; SHA256_BYTES as usize];
    f.read_exact(&mut trailer).map_err(err)?;
    Ok(hasher.finalize().as_slice() == trailer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trailer_check_finds_a_right_and_a_wrong_sum() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("s.db");
        let body = load::incompressible(7, 3 << 20);
        let mut all = body.clone();
        all.extend_from_slice(&Sha256::digest(&body));
        std::fs::write(&file, &all).expect("write");
        assert_eq!(trailer_is_sha256(&file), Ok(true));
        let last = all.len() - 1;
        all[last] ^= 1;
        std::fs::write(&file, &all).expect("write");
        assert_eq!(trailer_is_sha256(&file), Ok(false));
        std::fs::write(&file, b"short").expect("write");
        assert_eq!(trailer_is_sha256(&file), Ok(false));
        assert!(trailer_is_sha256(&dir.path().join("none")).is_err());
    }

    #[test]
    fn throughput_is_of_the_database_bytes() {
        let s = Snapshot {
            secs: 2.0,
            file_bytes: 4_000_032,
            ..Snapshot::default()
        };
        assert_eq!(s.mb_per_sec(), Some(2.0));
        assert_eq!(Snapshot::failed("x".into()).mb_per_sec(), None);
    }
}
