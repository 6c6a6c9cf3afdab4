//! Where a restore is built and how it appears: all or nothing.
//!
//! The member's files (`member/snap/db`, and `member/wal` unless `--wal-dir` is given)
//! are written under `<data-dir>/member.restore-tmp`, synced, and renamed to
//! `<data-dir>/member` last; a separate `--wal-dir` is built as `<wal-dir>.restore-tmp.wal`
//! beside it and renamed into place after the member directory (so a crash between the
//! two renames leaves a complete backend whose member, started, creates its WAL from
//! its flags as any new member: nothing half-restored is ever started from). A failed
//! restore removes what it built, and the data dir if it created it. etcd instead
//! writes in place and leaves a partial `member/snap/db` behind on failure, which a
//! later start could take for data.

use std::fs::File;
use std::path::{Path, PathBuf};

use oxcd_go::os::path_error;

/// The name of the member directory being built, inside the data dir.
pub const MEMBER_TMP: &str = "member.restore-tmp";

/// A restore being built.
#[derive(Debug)]
pub struct Staging {
    data_dir: PathBuf,
    created_data_dir: bool,
    member_tmp: PathBuf,
    /// `--wal-dir` and where it is built, when given outside the member directory.
    wal: Option<(PathBuf, PathBuf)>,
    /// Where the WAL is built when it belongs inside the member directory.
    wal_inside: PathBuf,
    done: bool,
}

impl Staging {
    /// Creates the directories to build in. `data_dir` must be absent or empty and
    /// `wal_dir` absent (the caller checked, with etcd's messages).
    pub fn begin(data_dir: &Path, wal_dir: Option<&Path>) -> Result<Staging, String> {
        let created_data_dir = !data_dir.exists();
        let member_tmp = data_dir.join(MEMBER_TMP);
        // A `--wal-dir` inside the member directory is built in its place there.
        let inside = wal_dir.and_then(|w| w.strip_prefix(data_dir.join("member")).ok());
        let mut s = Staging {
            data_dir: data_dir.to_path_buf(),
            created_data_dir,
            wal_inside: member_tmp.join(inside.unwrap_or(Path::new("wal"))),
            member_tmp,
            wal: None,
            done: false,
        };
        std::fs::create_dir_all(s.member_tmp.join("snap"))
            .map_err(|e| path_error("mkdir", &s.member_tmp, &e))?;
        if let Some(w) = wal_dir.filter(|_| inside.is_none()) {
            let name = w
                .file_name()
                .map_or_else(|| "wal".to_string(), |n| n.to_string_lossy().into_owned());
            // The WAL's own code builds `<dir stem>.tmp` first: here `<name>.restore-tmp.tmp`.
            let tmp = w.with_file_name(format!("{name}.restore-tmp.wal"));
            if let Some(parent) = tmp.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|e| path_error("mkdir", parent, &e))?;
            }
            if tmp.exists() {
                std::fs::remove_dir_all(&tmp).map_err(|e| path_error("remove", &tmp, &e))?;
            }
            s.wal = Some((w.to_path_buf(), tmp));
        }
        Ok(s)
    }

    /// Where the backend is written.
    pub fn backend_path(&self) -> PathBuf {
        self.member_tmp.join("snap").join("db")
    }

    /// Where the WAL is written (created by the WAL's own code, which builds it under a
    /// temporary name too).
    pub fn wal_path(&self) -> PathBuf {
        match &self.wal {
            Some((_, tmp)) => tmp.clone(),
            None => self.wal_inside.clone(),
        }
    }

    /// Makes the restore appear: syncs what was built and renames it into place.
    pub fn commit(mut self) -> Result<(), String> {
        sync_tree(&self.member_tmp)?;
        if let Some((_, tmp)) = &self.wal {
            sync_tree(tmp)?;
        }
        let member = self.data_dir.join("member");
        std::fs::rename(&self.member_tmp, &member)
            .map_err(|e| path_error("rename", &self.member_tmp, &e))?;
        sync_dir(&self.data_dir)?;
        if let Some((wal, tmp)) = &self.wal {
            std::fs::rename(tmp, wal).map_err(|e| path_error("rename", tmp, &e))?;
            sync_dir(wal.parent().unwrap_or(Path::new(".")))?;
        }
        if self.created_data_dir
            && let Some(parent) = self.data_dir.parent().filter(|p| !p.as_os_str().is_empty())
        {
            sync_dir(parent)?;
        }
        self.done = true;
        Ok(())
    }
}

impl Drop for Staging {
    /// A restore that did not commit leaves nothing behind.
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let _ = std::fs::remove_dir_all(&self.member_tmp);
        if let Some((_, tmp)) = &self.wal {
            let _ = std::fs::remove_dir_all(tmp);
            let _ = std::fs::remove_dir_all(tmp.with_extension("tmp"));
        }
        if self.created_data_dir {
            let _ = std::fs::remove_dir(&self.data_dir);
        }
    }
}

/// fsyncs every file and directory under `dir`, and `dir` itself.
fn sync_tree(dir: &Path) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| path_error("open", dir, &e))?;
    for entry in entries {
        let entry = entry.map_err(|e| path_error("readdirent", dir, &e))?;
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|e| path_error("stat", &path, &e))?;
        if kind.is_dir() {
            sync_tree(&path)?;
        } else if kind.is_file() {
            File::open(&path)
                .and_then(|f| f.sync_all())
                .map_err(|e| path_error("fsync", &path, &e))?;
        }
    }
    sync_dir(dir)
}

fn sync_dir(dir: &Path) -> Result<(), String> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| path_error("fsync", dir, &e))
}
