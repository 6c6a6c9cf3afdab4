//! The in-memory log a member starts with: empty for a new member, or rebuilt from what
//! its disk replayed (the WAL's, or a simulated disk's, [`Replay`]).
//!
//! Invariants: the rebuilt log starts at the newest snapshot mark (or, replayed from an
//! anchor, at that applied entry) and holds the entries after it and the newest hard
//! state; its commit index is at least the snapshot's index and the state machine's
//! applied index (both committed); a state machine ahead of the log's last entry is
//! refused.

use oxcd_storage::wal::Replay;
use raft::prelude::{ConfChange, ConfChangeType, ConfState, Entry, EntryType};

use super::NodeConfig;
use super::core::snapshot_of;
use crate::RaftError;
use crate::disk::LogDisk;
use crate::log_store::LogCore;
use crate::persist::{self, WalMetadata};

/// The log and WAL metadata of a member created from `cfg`: with
/// `cfg.bootstrap_contexts`, the log holds one committed conf change per initial voter,
/// at term 1 (etcd's bootstrap), for the state machine to apply like any other.
pub fn fresh(cfg: &NodeConfig) -> (LogCore, WalMetadata) {
    let cs = ConfState {
        voters: cfg.voters.clone(),
        ..Default::default()
    };
    let meta = WalMetadata {
        member_id: cfg.id,
        cluster_id: cfg.cluster_id,
        initial_conf: cs.clone(),
        members: cfg.members.clone(),
    };
    let mut core = LogCore {
        conf_state: cs,
        ..Default::default()
    };
    for (i, (id, context)) in cfg.bootstrap_contexts.iter().enumerate() {
        let mut cc = ConfChange::default();
        cc.set_change_type(ConfChangeType::AddNode);
        cc.node_id = *id;
        cc.context = context.clone().into();
        let mut e = Entry::default();
        e.set_entry_type(EntryType::EntryConfChange);
        e.index = i as u64 + 1;
        e.term = 1;
        e.data = persist::encode_conf_change(&cc).into();
        core.entries.push(e);
    }
    if !core.entries.is_empty() {
        core.hard_state.term = 1;
        core.hard_state.commit = core.entries.len() as u64;
    }
    (core, meta)
}

/// Writes a fresh log's bootstrap entries and hard state to `disk` and syncs them (the
/// WAL as [`fresh`] made it; nothing to write without bootstrap entries).
pub fn write_fresh(disk: &mut impl LogDisk, log: &LogCore) -> Result<(), RaftError> {
    if log.entries.is_empty() {
        return Ok(());
    }
    for e in &log.entries {
        disk.append_entry(e.index, &persist::encode_entry(e));
    }
    disk.set_hard_state(&persist::encode_hard_state(&log.hard_state));
    disk.sync()
}

/// The log that `replay` (of the disk called `where_` in errors) holds, for a member
/// started from `cfg`.
pub fn recover(
    cfg: &NodeConfig,
    mut replay: Replay,
    where_: &str,
) -> Result<(LogCore, WalMetadata), RaftError> {
    let meta = WalMetadata::decode(&replay.metadata)?;
    if meta.member_id != cfg.id {
        return Err(RaftError::Decode(format!(
            "WAL in {where_} belongs to member {:x}, not {:x}",
            meta.member_id, cfg.id
        )));
    }
    let mut core = LogCore {
        conf_state: meta.initial_conf.clone(),
        ..Default::default()
    };
    if let Some((_, b)) = &replay.snapshot {
        let sm = persist::decode_snapshot_meta(b)?;
        core.apply_snapshot(&sm);
        core.snapshot = Some(snapshot_of(sm));
    }
    if let Some(b) = &replay.hard_state {
        core.hard_state = persist::decode_hard_state(b)?;
        // A snapshot is committed state; the hard state synced with it may be older.
        core.hard_state.commit = core.hard_state.commit.max(core.start.0);
        if core.hard_state.term < core.start.1 {
            core.hard_state.term = core.start.1;
            core.hard_state.vote = 0;
        }
    }
    // Replayed from an anchor (an applied entry after the mark): the log starts there.
    let anchor = match replay.anchor.take() {
        Some((index, data)) => {
            let e = persist::decode_entry(index, &data)?;
            core.start = (e.index, e.term);
            core.hard_state.commit = core.hard_state.commit.max(e.index);
            Some(e.index)
        }
        None => None,
    };
    // Each record's bytes are dropped as soon as it is decoded, and the decoded entries
    // move into the log: one copy of the log in memory at a time.
    let raw = std::mem::take(&mut replay.entries);
    let mut entries = Vec::with_capacity(raw.len());
    for (index, data) in raw {
        entries.push(persist::decode_entry(index, &data)?);
    }
    core.append_owned(entries)?;
    // The state machine's configuration, unless the WAL holds a snapshot it has not
    // installed yet (whose configuration is newer).
    if let Some(conf) = &cfg.conf_state
        && cfg.applied >= core.start.0
    {
        core.conf_state = conf.clone();
    }
    // What raft-rs sends a member that needs entries before the anchor (the backend's
    // dump replaces its position when it is sent).
    if let Some(meta) = anchor.and_then(|index| core.snapshot_meta_at(index)) {
        core.snapshot = Some(snapshot_of(meta));
    }
    // The state machine may have applied (durably) entries whose commit index was not
    // yet synced in a hard state: they were committed, so the commit index is at least it.
    if cfg.applied > core.hard_state.commit {
        if cfg.applied > core.last_index() {
            return Err(RaftError::Decode(format!(
                "the backend has applied index {} but the WAL in {where_} ends at {}: the WAL is missing entries",
                cfg.applied,
                core.last_index()
            )));
        }
        core.hard_state.commit = cfg.applied;
    }
    Ok((core, meta))
}

/// etcd's `--force-new-cluster` on a rebuilt log: entries not known to be committed are
/// dropped, and committed conf changes are appended that remove every other member (and
/// add this one, with `self_context`, if it is not a member), at the current term, with
/// the commit index moved to the last of them. The state machine applies them like any
/// conf change, so this member ends alone in its configuration, with all its data.
/// Returns the entries appended, which the caller must write with the hard state.
pub fn force_new_cluster(
    core: &mut LogCore,
    cfg: &NodeConfig,
    self_context: Vec<u8>,
) -> Result<Vec<Entry>, RaftError> {
    let commit = core.hard_state.commit;
    // The members once every committed conf change is applied.
    let mut ids: std::collections::BTreeSet<u64> = core
        .conf_state
        .voters
        .iter()
        .chain(&core.conf_state.learners)
        .copied()
        .collect();
    let from = cfg.applied.max(core.start.0);
    for e in core
        .entries
        .iter()
        .filter(|e| e.index > from && e.index <= commit)
    {
        if e.get_entry_type() != EntryType::EntryConfChange {
            continue;
        }
        let cc = persist::decode_conf_change(&e.data)?;
        match cc.get_change_type() {
            ConfChangeType::AddNode | ConfChangeType::AddLearnerNode => ids.insert(cc.node_id),
            ConfChangeType::RemoveNode => ids.remove(&cc.node_id),
        };
    }
    let keep = (commit - core.start.0) as usize;
    core.entries.truncate(keep);
    let term = core.hard_state.term.max(core.start.1);
    let mut changes: Vec<ConfChange> = ids
        .iter()
        .filter(|id| **id != cfg.id)
        .map(|id| {
            let mut cc = ConfChange::default();
            cc.set_change_type(ConfChangeType::RemoveNode);
            cc.node_id = *id;
            cc
        })
        .collect();
    if !ids.contains(&cfg.id) {
        let mut cc = ConfChange::default();
        cc.set_change_type(ConfChangeType::AddNode);
        cc.node_id = cfg.id;
        cc.context = self_context.into();
        changes.push(cc);
    }
    let mut added = Vec::new();
    for (i, cc) in changes.iter().enumerate() {
        let mut e = Entry::default();
        e.set_entry_type(EntryType::EntryConfChange);
        e.index = commit + 1 + i as u64;
        e.term = term;
        e.data = persist::encode_conf_change(cc).into();
        added.push(e);
    }
    core.entries.extend(added.iter().cloned());
    core.hard_state.term = term;
    core.hard_state.commit = core.last_index();
    Ok(added)
}
