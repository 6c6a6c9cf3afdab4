//! An oxcd member's data dir written back as etcd's, for the reverse binary swap
//! (`oxcdutl swap-to-etcd`, issue 35): etcd 3.5 started on it with the flags oxcd ran
//! with continues as the same member.
//!
//! From the stopped member's backend and WAL:
//! - `snap/db`: the backend in etcd's bbolt format ([`crate::backup::etcd_file`]), its
//!   `meta/consistent_index` and `term` the index and term the backend applied;
//! - `snap/<term>-<index>.snap`: a raft snapshot at that index with the configuration
//!   in force there and etcd's v2 store of the members and cluster version as its data
//!   (what etcd 3.5 restores its membership from);
//! - `wal/`: etcd's WAL with the same member and cluster ids, that snapshot, the log's
//!   entries after it and the hard state (its commit at least the snapshot's index).
//!
//! Only a log in etcd's vocabulary can be written back: a cluster that began as oxcd's
//! wrote entries etcd cannot read. Crash safety as for the adoption: built beside
//! (`wal.etcd-swapping`, `snap.etcd-swapping`), marked complete, then oxcd's
//! directories are renamed to `wal.oxcd-before-etcd` and `snap.oxcd-before-etcd` and the
//! new ones put in their place; running the command again finishes an interrupted swap.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use oxcd_raft::persist::{self, WalMetadata};
use oxcd_raft::{ConfState, Entry, HardState, Snapshot};
use oxcd_storage::backend::Backend;
use oxcd_storage::lock::DirLock;
use oxcd_storage::schema;
use oxcd_storage::wal::{DEFAULT_SEGMENT_SIZE, Wal};

use super::adopt::MemberDirs;
use super::snap_files::{self, SnapFileError};
use super::swap::{self, beside};
use super::wal::{self, EtcdWalError, Metadata, NewWal, SnapshotPoint};
use crate::backup::etcd_file::{EtcdFileError, EtcdFileSource};
use crate::backup::v2store;
use crate::machine::vocabulary::{LogVocabulary, Vocabulary};

/// The suffix oxcd's directories get once swapped out.
pub const KEPT: &str = "oxcd-before-etcd";
/// The suffix of the directories being built.
const STAGING: &str = "etcd-swapping";
/// The mark that both are built, beside the snap directory.
const COMPLETE: &str = "etcd-swapping.complete";

/// Why the data dir could not be written as etcd's.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The dir holds etcd's data already.
    #[error("{0} already holds etcd's data")]
    AlreadyEtcds(PathBuf),
    /// The log is in oxcd's vocabulary.
    #[error(
        "this member's log is in oxcd's vocabulary, which etcd cannot read: the log moves to etcd's when the cluster version is 3.5 (etcdctl downgrade enable 3.5); swap once this member has applied that switch"
    )]
    OxcdVocabulary,
    /// The log switches vocabulary after what the backend applied.
    #[error(
        "the log switches vocabulary at index {0}, after what this member applied: start it once more to apply the switch, then swap"
    )]
    UnappliedSwitch(u64),
    /// The recorded vocabulary cannot be read.
    #[error(transparent)]
    Vocabulary(#[from] crate::machine::vocabulary::VocabularyError),
    /// oxcd's files of an earlier swap are in the way.
    #[error(
        "{0} holds oxcd's files from an earlier swap: move or remove it before swapping to etcd again"
    )]
    KeptExists(PathBuf),
    /// The log lacks entries the backend has not applied.
    #[error("the WAL holds no entry {0}, which the backend has not applied")]
    MissingEntry(u64),
    /// The WAL, the backend or the lock failed.
    #[error(transparent)]
    Storage(#[from] oxcd_storage::StorageError),
    /// A WAL record does not decode.
    #[error(transparent)]
    Raft(#[from] oxcd_raft::RaftError),
    /// The backend could not be written in etcd's format.
    #[error(transparent)]
    EtcdFile(#[from] EtcdFileError),
    /// etcd's WAL could not be written.
    #[error(transparent)]
    EtcdWal(#[from] EtcdWalError),
    /// The snapshot file could not be written.
    #[error(transparent)]
    Snap(#[from] SnapFileError),
    /// The built directories could not be put in place.
    #[error(transparent)]
    Place(#[from] swap::PlaceError),
    /// A file or directory operation failed.
    #[error(transparent)]
    Io(#[from] crate::backup::path_io::PathIoError),
}

use crate::backup::path_io::io;

/// What was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exported {
    /// The member's id.
    pub member_id: u64,
    /// The cluster's id.
    pub cluster_id: u64,
    /// The snapshot's index (the backend's applied index).
    pub applied: u64,
    /// Entries written after it.
    pub entries: usize,
}

/// Writes the stopped oxcd member's data in `dirs` as etcd's (finishing an interrupted
/// swap first); `member` is the directory whose lock a running member holds.
pub fn swap_to_etcd(member: &Path, dirs: &MemberDirs) -> Result<Option<Exported>, ExportError> {
    let _lock = DirLock::acquire(member)?;
    let marker = dirs.snap.with_file_name(COMPLETE);
    if marker.exists() {
        finish(dirs, &marker)?;
        return Ok(None);
    }
    if dirs.hold_etcds() {
        return Err(ExportError::AlreadyEtcds(dirs.snap.join("db")));
    }
    for dir in [&dirs.wal, &dirs.snap] {
        let kept = beside(dir, KEPT);
        if kept.exists() {
            return Err(ExportError::KeptExists(kept));
        }
        let staging = beside(dir, STAGING);
        if staging.exists() {
            std::fs::remove_dir_all(&staging).map_err(io(&staging))?;
        }
    }
    let exported = build(dirs)?;
    swap::mark_complete(&marker)?;
    finish(dirs, &marker)?;
    Ok(Some(exported))
}

/// Builds etcd's directories beside oxcd's.
fn build(dirs: &MemberDirs) -> Result<Exported, ExportError> {
    let (wal, replay) = Wal::open(&dirs.wal, DEFAULT_SEGMENT_SIZE)?;
    drop(wal);
    let meta = WalMetadata::decode(&replay.metadata)?;
    let mut hard_state = match &replay.hard_state {
        Some(b) => persist::decode_hard_state(b)?,
        None => HardState::default(),
    };
    let backend = Backend::open(&dirs.snap.join("db"))?;
    let source = EtcdFileSource::open(&backend)?;
    let recorded = LogVocabulary::parse(source.meta(schema::META_LOG_VOCABULARY))?;
    if recorded.vocabulary != Vocabulary::Etcd {
        return Err(ExportError::OxcdVocabulary);
    }
    let (index, term) = source.position()?;
    let conf = source.conf_state()?.unwrap_or_else(|| ConfState {
        voters: meta.initial_conf.voters.clone(),
        ..Default::default()
    });
    let mut entries: Vec<Entry> = Vec::new();
    for (i, b) in &replay.entries {
        if *i > index {
            let e = persist::decode_entry(*i, b)?;
            if oxcd_raft::node::format::switched_to(&e.data).is_some() {
                return Err(ExportError::UnappliedSwitch(*i));
            }
            entries.push(e);
        }
    }
    if let Some(first) = entries.first()
        && first.index != index + 1
    {
        return Err(ExportError::MissingEntry(index + 1));
    }
    hard_state.commit = hard_state.commit.max(index);

    let staged_snap = beside(&dirs.snap, STAGING);
    std::fs::create_dir_all(&staged_snap).map_err(io(&staged_snap))?;
    let db_path = staged_snap.join("db");
    let file = std::fs::File::create(&db_path).map_err(io(&db_path))?;
    let mut out = source.stream(|_| std::io::BufWriter::with_capacity(8 << 20, file))?;
    out.flush().map_err(io(&db_path))?;
    out.get_ref().sync_all().map_err(io(&db_path))?;
    drop(out);
    let (members, removed) = source.members()?;
    let mut snapshot = Snapshot {
        data: v2store::write(
            &members,
            &removed,
            source.cluster_version().as_deref(),
            index,
        )
        .into(),
        ..Default::default()
    };
    snapshot.mut_metadata().index = index;
    snapshot.mut_metadata().term = term;
    snapshot.mut_metadata().set_conf_state(conf.clone());
    if index > 0 {
        snap_files::write(&staged_snap, &snapshot)?;
    }
    crate::backup::path_io::sync_dir(&staged_snap)?;

    let staged_wal = beside(&dirs.wal, STAGING);
    wal::write(
        &staged_wal,
        &NewWal {
            metadata: Metadata {
                node_id: meta.member_id,
                cluster_id: meta.cluster_id,
            },
            snapshot: (SnapshotPoint { index, term }, &conf),
            hard_state: &hard_state,
            entries: &entries,
        },
    )?;
    Ok(Exported {
        member_id: meta.member_id,
        cluster_id: meta.cluster_id,
        applied: index,
        entries: entries.len(),
    })
}

/// Puts etcd's directories in place of oxcd's, which are kept beside.
fn finish(dirs: &MemberDirs, marker: &Path) -> Result<(), ExportError> {
    Ok(swap::put_in_place(
        &[&dirs.wal, &dirs.snap],
        STAGING,
        KEPT,
        marker,
    )?)
}
