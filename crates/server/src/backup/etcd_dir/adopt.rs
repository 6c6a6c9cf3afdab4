//! An etcd 3.5 member's data dir adopted in place, when oxcd starts on it with the flags
//! etcd ran with (the binary swap, issue 35): the same member of the same cluster, at
//! the state etcd applied, rejoining its peers.
//!
//! What etcd left (`member/wal`, `member/snap` with `db` and `.snap` files; a dir from
//! `etcdutl` or etcdctl 3.4's `snapshot restore` alike) is read as etcd reads it on
//! restart ([`super::wal`], [`super::snap_files`]): the newest snapshot the WAL knows,
//! the entries after it, the hard state, the member and cluster ids. From it:
//! - the backend: etcd's bbolt `db` imported ([`crate::backup::etcd_import`]),
//!   positioned at the index and term the database applied (`meta/consistent_index`,
//!   `meta/term`), the log's vocabulary recorded as etcd's. The membership, the
//!   configuration and the cluster version are what etcd 3.5 boots with: the snapshot's
//!   (its v2 store, its metadata), then what the entries up to the applied index changed
//!   (conf changes the membership accepts, published attributes, cluster versions). The
//!   backend's own copies are not trusted: etcdctl 3.4's restore leaves the old
//!   cluster's `confState` there;
//! - oxcd's WAL: the same ids, the snapshot as its start, the entries after it as they
//!   are (etcd's entries, which the member applies in etcd's vocabulary), the hard state
//!   (term and vote too: a member must never vote twice in a term).
//!
//! Crash safety: both are built beside etcd's (`wal.oxcd-adopting`,
//! `snap.oxcd-adopting`), made durable, and marked complete (`oxcd-adopting.complete`
//! beside `snap`); only then are etcd's directories renamed to `wal.etcd-before-oxcd`
//! and `snap.etcd-before-oxcd` and the new ones put in their place. A start that finds
//! the mark finishes the renames; one that finds unmarked staging removes it and starts
//! over. etcd's files are never changed or removed: the operator removes them.
//!
//! Refused: a WAL another process holds locked (etcd is running on the dir), and etcd's
//! files of an earlier swap still present.

use std::path::{Path, PathBuf};

use oxcd_api::oxcdpb::MemberInfo;
use oxcd_bbolt::{BoltReader, ReadError};
use oxcd_raft::persist::{self, WalMetadata};
use oxcd_raft::{ConfChangeType, ConfState, Entry, EntryType, SnapshotMetadata};
use oxcd_storage::backend::Backend;
use oxcd_storage::wal::{DEFAULT_SEGMENT_SIZE, Wal};

use super::snap_files::{self, SnapFileError};
use super::swap::{self, beside};
use super::wal::{EtcdWal, EtcdWalError, SnapshotPoint};
use crate::backup::etcd_import::{self, Import, ImportError};
use crate::backup::v2store::{self, V2StoreError};
use crate::domains::membership::bootstrap::InitialCluster;
use crate::domains::membership::etcd_conf_change::{self, UnreadableChange};
use crate::machine::etcd_entries::{self, EtcdEntry};

/// The suffix etcd's directories get once adopted.
pub const KEPT: &str = "etcd-before-oxcd";
/// The suffix of the directories being built.
const STAGING: &str = "oxcd-adopting";
/// The mark that both are built, beside the snap directory.
const COMPLETE: &str = "oxcd-adopting.complete";

/// Why an etcd data dir could not be adopted.
#[derive(Debug, thiserror::Error)]
pub enum AdoptError {
    /// etcd still runs on the dir.
    #[error(
        "etcd's WAL file {0} is locked by another process: stop the etcd member before starting oxcd on its data dir"
    )]
    InUse(PathBuf),
    /// etcd's files of an earlier swap are in the way.
    #[error(
        "{0} holds etcd's files from an earlier swap: move or remove it before oxcd adopts this data dir again"
    )]
    KeptExists(PathBuf),
    /// No backend beside the WAL.
    #[error("etcd's data dir has no backend at {0}")]
    NoBackend(PathBuf),
    /// etcd's WAL could not be read.
    #[error("etcd's WAL in {dir}: {source}")]
    Wal {
        /// The WAL directory.
        dir: PathBuf,
        /// What failed.
        source: EtcdWalError,
    },
    /// A snapshot file could not be read.
    #[error("etcd's snapshot: {0}")]
    Snap(#[from] SnapFileError),
    /// The snapshot's v2 store could not be read.
    #[error(transparent)]
    V2Store(#[from] V2StoreError),
    /// The backend's `meta` bucket could not be read.
    #[error("etcd's backend {path}: {source}")]
    Meta {
        /// The database.
        path: PathBuf,
        /// What failed.
        source: ReadError,
    },
    /// The backend is behind the snapshot the WAL starts from.
    #[error("etcd's backend applied index {applied}, below its snapshot's {snapshot}")]
    BackendBehind {
        /// The backend's consistent index.
        applied: u64,
        /// The snapshot's index.
        snapshot: u64,
    },
    /// A conf change entry could not be read.
    #[error("etcd's conf change at index {index}: {source}")]
    ConfChange {
        /// Its index.
        index: u64,
        /// Why.
        source: UnreadableChange,
    },
    /// The backend could not be imported.
    #[error(transparent)]
    Import(#[from] ImportError),
    /// The new backend or WAL failed.
    #[error(transparent)]
    Storage(#[from] oxcd_storage::StorageError),
    /// The membership could not be written.
    #[error(transparent)]
    Mvcc(#[from] oxcd_mvcc::MvccError),
    /// The built directories could not be put in place.
    #[error(transparent)]
    Place(#[from] swap::PlaceError),
    /// A file or directory operation failed.
    #[error(transparent)]
    Io(#[from] crate::backup::path_io::PathIoError),
}

use crate::backup::path_io::io;

/// The member's directories: its WAL's and its snap directory (the backend's).
#[derive(Debug, Clone)]
pub struct MemberDirs {
    /// The WAL directory.
    pub wal: PathBuf,
    /// The snap directory, with `db`.
    pub snap: PathBuf,
}

impl MemberDirs {
    fn marker(&self) -> PathBuf {
        self.snap.with_file_name(COMPLETE)
    }

    /// Whether these hold an etcd member's data: a bbolt backend or etcd's WAL.
    pub fn hold_etcds(&self) -> bool {
        BoltReader::open(&self.snap.join("db")).is_ok() || EtcdWal::is_etcds(&self.wal)
    }
}

/// What was adopted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Adopted {
    /// The member's id.
    pub member_id: u64,
    /// The cluster's id.
    pub cluster_id: u64,
    /// The index the backend applied.
    pub applied: u64,
    /// The last entry of the log.
    pub last_index: u64,
}

/// Adopts the etcd data in `dirs` if there is any (a start interrupted after the new
/// directories were complete is finished); returns what was adopted, None when the
/// directories are oxcd's or empty.
pub fn adopt_if_etcds(dirs: &MemberDirs) -> Result<Option<Adopted>, AdoptError> {
    if dirs.marker().exists() {
        tracing::warn!("finishing the adoption of etcd's data dir that a stop interrupted");
        finish(dirs)?;
        return Ok(None);
    }
    for dir in [&dirs.wal, &dirs.snap] {
        let staging = beside(dir, STAGING);
        if staging.exists() {
            std::fs::remove_dir_all(&staging).map_err(io(&staging))?;
        }
    }
    if !dirs.hold_etcds() {
        return Ok(None);
    }
    let adopted = build(dirs)?;
    finish(dirs)?;
    tracing::warn!(
        member = %format!("{:x}", adopted.member_id),
        cluster = %format!("{:x}", adopted.cluster_id),
        applied = adopted.applied,
        last_index = adopted.last_index,
        kept = %beside(&dirs.snap, KEPT).display(),
        "adopted etcd's data dir: this member continues as the same member of its cluster; etcd's files are kept beside for the operator to remove"
    );
    Ok(Some(adopted))
}

/// Builds the new directories beside etcd's and marks them complete.
fn build(dirs: &MemberDirs) -> Result<Adopted, AdoptError> {
    let wal_error = |source| AdoptError::Wal {
        dir: dirs.wal.clone(),
        source,
    };
    if dirs.wal.exists() {
        for item in std::fs::read_dir(&dirs.wal).map_err(io(&dirs.wal))? {
            let path = item.map_err(io(&dirs.wal))?.path();
            if path.extension().is_some_and(|e| e == "wal")
                && oxcd_storage::lock::record_locked_elsewhere(&path)?
            {
                return Err(AdoptError::InUse(path));
            }
        }
    }
    for dir in [&dirs.wal, &dirs.snap] {
        let kept = beside(dir, KEPT);
        if kept.exists() {
            return Err(AdoptError::KeptExists(kept));
        }
    }
    let db = dirs.snap.join("db");
    if !db.exists() {
        return Err(AdoptError::NoBackend(db));
    }
    let log = EtcdWal::read(&dirs.wal).map_err(wal_error)?;
    let points = log.snapshots().map_err(wal_error)?;
    let snapshot = snap_files::newest_of(&dirs.snap, &points)?;
    let (start, start_conf) = match &snapshot {
        Some(s) => (
            SnapshotPoint {
                index: s.get_metadata().index,
                term: s.get_metadata().term,
            },
            s.get_metadata().get_conf_state().clone(),
        ),
        None => (SnapshotPoint::default(), ConfState::default()),
    };
    let state = log.read_from(start).map_err(wal_error)?;
    let position = DbPosition::read(&db)?;
    if position.applied < start.index {
        return Err(AdoptError::BackendBehind {
            applied: position.applied,
            snapshot: start.index,
        });
    }
    // As etcd 3.5 boots: the membership and configuration of the snapshot, then every
    // change applied after it (the backend's copies of both may be another cluster's,
    // in a dir etcdctl 3.4's restore wrote).
    let mut cluster = match &snapshot {
        Some(s) => v2store::read(&s.data)?,
        None => v2store::V2Cluster::default(),
    };
    let conf = replay(
        start_conf.clone(),
        &mut cluster,
        &state.entries,
        position.applied,
    )?;
    let term = match position.term {
        Some(term) => term,
        None => term_at(&state.entries, position.applied).unwrap_or(start.term),
    };

    let staged_snap = beside(&dirs.snap, STAGING);
    std::fs::create_dir_all(&staged_snap).map_err(io(&staged_snap))?;
    let staged_db = staged_snap.join("db");
    let db_len = std::fs::metadata(&db).map_err(io(&db))?.len();
    etcd_import::write(
        &db,
        db_len,
        &staged_db,
        Import {
            bump: 0,
            cluster: true,
        },
    )?;
    let members = {
        let backend = Backend::open(&staged_db)?;
        etcd_import::record_etcd_snapshot(
            &backend,
            (position.applied, term, &persist::encode_conf_state(&conf)),
            &cluster,
        )?;
        cluster
            .membership
            .members
            .values()
            .cloned()
            .collect::<Vec<_>>()
    };

    let staged_wal = beside(&dirs.wal, STAGING);
    let cluster = InitialCluster {
        me: state.metadata.node_id,
        cluster_id: state.metadata.cluster_id,
        members: members
            .into_iter()
            .map(|m| MemberInfo {
                client_urls: Vec::new(),
                ..m
            })
            .collect(),
        joins_etcd: true,
    };
    let metadata = WalMetadata {
        member_id: state.metadata.node_id,
        cluster_id: state.metadata.cluster_id,
        initial_conf: start_conf.clone(),
        members: cluster.encode(),
    };
    let mut wal = Wal::create(&staged_wal, &metadata.encode(), DEFAULT_SEGMENT_SIZE)?;
    if start.index > 0 {
        let mark = SnapshotMetadata {
            index: start.index,
            term: start.term,
            conf_state: Some(start_conf).into(),
            ..Default::default()
        };
        wal.install_snapshot(start.index, &persist::encode_snapshot_meta(&mark));
    }
    for e in &state.entries {
        wal.append_entry(e.index, &persist::encode_entry(e));
    }
    wal.set_hard_state(&persist::encode_hard_state(&state.hard_state));
    wal.sync()?;
    drop(wal);
    crate::backup::path_io::sync_dir(&staged_wal)?;
    crate::backup::path_io::sync_dir(&staged_snap)?;
    swap::mark_complete(&dirs.marker())?;
    Ok(Adopted {
        member_id: state.metadata.node_id,
        cluster_id: state.metadata.cluster_id,
        applied: position.applied,
        last_index: state.entries.last().map_or(start.index, |e| e.index),
    })
}

/// Puts the built directories in place of etcd's, which are kept beside.
fn finish(dirs: &MemberDirs) -> Result<(), AdoptError> {
    Ok(swap::put_in_place(
        &[&dirs.wal, &dirs.snap],
        STAGING,
        KEPT,
        &dirs.marker(),
    )?)
}

/// Where etcd's backend stands: the index and term it applied (etcd 3.5 keeps both in
/// `meta`; 3.4 only the index).
struct DbPosition {
    applied: u64,
    term: Option<u64>,
}

impl DbPosition {
    fn read(db: &Path) -> Result<DbPosition, AdoptError> {
        let meta_error = |source| AdoptError::Meta {
            path: db.to_path_buf(),
            source,
        };
        let reader = BoltReader::open(db).map_err(meta_error)?;
        let bucket = reader.bucket(b"meta").map_err(meta_error)?;
        let mut position = DbPosition {
            applied: 0,
            term: None,
        };
        let number = |v: &[u8]| v.try_into().ok().map(u64::from_be_bytes);
        reader
            .for_each(&bucket, &mut |k, v| {
                match k {
                    b"consistent_index" => position.applied = number(v).unwrap_or(0),
                    b"term" => position.term = number(v),
                    _ => {}
                }
                Ok(())
            })
            .map_err(meta_error)?;
        Ok(position)
    }
}

/// `conf` and `cluster` with what `entries` up to `upto` changed applied, as etcd's
/// apply does: each conf change its membership accepts (a refused one changes
/// nothing), each member's published attributes, the cluster version. Returns the
/// configuration.
fn replay(
    mut conf: ConfState,
    cluster: &mut v2store::V2Cluster,
    entries: &[Entry],
    upto: u64,
) -> Result<ConfState, AdoptError> {
    use oxcd_api::oxcdpb::internal_request::Op;
    for e in entries.iter().filter(|e| e.index <= upto) {
        if e.get_entry_type() != EntryType::EntryConfChange {
            // A normal entry etcd cannot read stops the member when it applies it.
            if let Ok(EtcdEntry::Request { op, .. }) = etcd_entries::read(&e.data) {
                match op {
                    Op::MemberAttributes(a) => {
                        // Into the member's row too, as applying the entry writes it:
                        // else a member that adopted its dir after the entry and one
                        // that applied it hold different rows (a false CORRUPT).
                        cluster.membership.set_attributes(&a);
                        cluster.attributes.retain(|x| x.id != a.id);
                        cluster.attributes.push(a);
                    }
                    Op::ClusterVersionSet(v) => cluster.version = Some(v.ver),
                    _ => {}
                }
            }
            continue;
        }
        let read = etcd_conf_change::read(&e.data).map_err(|source| AdoptError::ConfChange {
            index: e.index,
            source,
        })?;
        if cluster.membership.validate(&read.change).is_err() {
            continue;
        }
        cluster.membership.apply(&read.change);
        let Some(cc) = read.raft else { continue };
        let id = cc.node_id;
        conf.voters.retain(|v| *v != id);
        conf.learners.retain(|v| *v != id);
        match cc.get_change_type() {
            ConfChangeType::AddNode => conf.voters.push(id),
            ConfChangeType::AddLearnerNode => conf.learners.push(id),
            ConfChangeType::RemoveNode => {}
        }
    }
    let members = &cluster.membership.members;
    cluster.attributes.retain(|a| members.contains_key(&a.id));
    Ok(conf)
}

/// The term of the entry at `index`, when `entries` hold it.
fn term_at(entries: &[Entry], index: u64) -> Option<u64> {
    entries.iter().find(|e| e.index == index).map(|e| e.term)
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxcd_api::oxcdpb::internal_request::Op;
    use oxcd_api::oxcdpb::{ConfChangeContext, MemberAttributes};

    fn entry(index: u64, kind: EntryType, data: Vec<u8>) -> Entry {
        let mut e = Entry::default();
        e.set_entry_type(kind);
        e.index = index;
        e.term = 2;
        e.data = data.into();
        e
    }

    /// A member added by a conf change, then its attributes published: the row the
    /// adoption records is the one a member applying both entries writes
    /// (`MembershipState::set_attributes`), attributes included.
    #[test]
    fn published_attributes_reach_the_members_row() {
        let member = MemberInfo {
            id: 0xa,
            name: "m0".into(),
            peer_urls: vec!["http://127.0.0.1:2380".into()],
            ..Default::default()
        };
        let ctx = ConfChangeContext {
            member: Some(member.clone()),
            ..Default::default()
        };
        let attrs = MemberAttributes {
            id: 0xa,
            name: "m0".into(),
            client_urls: vec!["http://127.0.0.1:2379".into()],
        };
        let add = etcd_conf_change::write(1, ConfChangeType::AddNode, 0xa, &ctx);
        let publish =
            etcd_entries::write(2, Op::MemberAttributes(attrs.clone()), None).expect("entry");
        let entries = [
            entry(1, EntryType::EntryConfChange, add),
            entry(2, EntryType::EntryNormal, publish),
        ];
        let mut adopted = v2store::V2Cluster::default();
        let conf = replay(ConfState::default(), &mut adopted, &entries, 2).expect("replay");
        assert_eq!(conf.voters, [0xa]);
        let mut applied = crate::domains::membership::MembershipState::default();
        applied.members.insert(0xa, member);
        applied.set_attributes(&attrs);
        assert_eq!(adopted.membership.members, applied.members);
        assert_eq!(
            adopted.membership.members[&0xa].client_urls,
            attrs.client_urls
        );
        assert_eq!(adopted.attributes, [attrs]);
        // Only up to the applied index: an entry after it is left to the apply.
        let mut early = v2store::V2Cluster::default();
        replay(ConfState::default(), &mut early, &entries, 1).expect("replay");
        assert!(early.membership.members[&0xa].client_urls.is_empty());
    }
}
