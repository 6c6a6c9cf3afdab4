//! The snapshot file a restore reads, checked as etcdutl checks it: a file whose size
//! is 32 past a multiple of 512 ends with the sha256 of what comes before it (etcd's
//! snapshot trailer; a bbolt file is whole pages, so a bare backend file never does).
//! Without a trailer, `--skip-hash-check` is required; with one, the hash must match
//! unless `--skip-hash-check` is given. The trailer is never part of the database.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use oxcd_go::os::path_error;
use sha2::{Digest, Sha256};

/// Bytes of the sha256 trailer.
const TRAILER: u64 = 32;

/// An opened snapshot file.
#[derive(Debug)]
pub struct Source {
    /// The file.
    pub path: PathBuf,
    /// Bytes of the database: the file less its trailer, if it has one.
    pub db_len: u64,
    file: File,
    trailer: Option<[u8; 32]>,
}

impl Source {
    /// Opens `path` and reads its trailer, failing as etcdutl fails (`open <path>: ...`,
    /// `seek <path>: invalid argument` for a file shorter than a trailer).
    pub fn open(path: &Path) -> Result<Source, String> {
        let file = File::open(path).map_err(|e| path_error("open", path, &e))?;
        let len = file
            .metadata()
            .map_err(|e| path_error("stat", path, &e))?
            .len();
        if len < TRAILER {
            return Err(path_error(
                "seek",
                path,
                &std::io::Error::from_raw_os_error(22),
            ));
        }
        let has_trailer = len % 512 == TRAILER;
        let trailer = if has_trailer {
            let mut t = [0u8; 32];
            file.read_exact_at(&mut t, len - TRAILER)
                .map_err(|e| path_error("read", path, &e))?;
            Some(t)
        } else {
            None
        };
        Ok(Source {
            path: path.to_path_buf(),
            db_len: if has_trailer { len - TRAILER } else { len },
            file,
            trailer,
        })
    }

    /// Whether [`Source::verify`] has a hash to compute (otherwise it answers at once).
    pub fn has_hash_to_check(&self, skip_hash_check: bool) -> bool {
        self.trailer.is_some() && !skip_hash_check
    }

    /// etcdutl's integrity check: the trailer must be there and match, unless
    /// `skip_hash_check`.
    pub fn verify(&self, skip_hash_check: bool) -> Result<(), String> {
        let Some(expected) = self.trailer else {
            if skip_hash_check {
                return Ok(());
            }
            return Err("snapshot missing hash but --skip-hash-check=false".into());
        };
        if skip_hash_check {
            return Ok(());
        }
        let mut h = Sha256::new();
        let mut at = 0u64;
        let mut buf = vec![0u8; 1 << 20];
        while at < self.db_len {
            let want = buf.len().min((self.db_len - at) as usize);
            let n = self
                .file
                .read_at(&mut buf[..want], at)
                .map_err(|e| path_error("read", &self.path, &e))?;
            if n == 0 {
                return Err(path_error(
                    "read",
                    &self.path,
                    &std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
                ));
            }
            h.update(&buf[..n]);
            at += n as u64;
        }
        let got: [u8; 32] = h.finalize().into();
        if got != expected {
            return Err(format!(
                "expected sha256 {}, got {}",
                go_bytes(&expected),
                go_bytes(&got)
            ));
        }
        Ok(())
    }
}

/// A byte slice as Go's `%v` prints it: `[1 2 3]`.
fn go_bytes(b: &[u8]) -> String {
    let items: Vec<String> = b.iter().map(u8::to_string).collect();
    format!("[{}]", items.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailer_rules_and_messages() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("s.db");
        let db = vec![7u8; 8192];
        let mut with = db.clone();
        with.extend_from_slice(&Sha256::digest(&db));
        std::fs::write(&p, &with).expect("write");
        let s = Source::open(&p).expect("open");
        assert_eq!(s.db_len, 8192);
        s.verify(false).expect("hash matches");

        with[100] ^= 1;
        std::fs::write(&p, &with).expect("write");
        let msg = Source::open(&p)
            .and_then(|s| s.verify(false))
            .expect_err("mismatch");
        assert!(msg.starts_with("expected sha256 ["), "{msg}");
        assert!(msg.contains("], got ["), "{msg}");
        Source::open(&p)
            .and_then(|s| s.verify(true))
            .expect("skipped");

        std::fs::write(&p, &db).expect("write");
        let s = Source::open(&p).expect("open");
        assert_eq!(s.db_len, 8192);
        assert_eq!(
            s.verify(false).expect_err("missing"),
            "snapshot missing hash but --skip-hash-check=false"
        );
        s.verify(true).expect("skipped");

        std::fs::write(&p, b"tiny").expect("write");
        assert_eq!(
            Source::open(&p).expect_err("tiny"),
            format!("seek {}: invalid argument", p.display())
        );
        assert_eq!(go_bytes(&[167, 0, 9]), "[167 0 9]");
    }
}
