//! How raft state is written into WAL records: entries, hard state, snapshot marks, and
//! the member metadata written when the WAL is created.

use protobuf::Message as _;
use raft::prelude::{ConfState, Entry, HardState, SnapshotMetadata};

use crate::RaftError;

/// Identity recorded when a member's WAL is created; never changes afterwards.
#[derive(Debug, Clone, PartialEq)]
pub struct WalMetadata {
    /// This member's id.
    pub member_id: u64,
    /// The cluster's id.
    pub cluster_id: u64,
    /// The voters the cluster was bootstrapped with.
    pub initial_conf: ConfState,
    /// The bootstrap member list, encoded by the caller (opaque here).
    pub members: Vec<u8>,
}

impl WalMetadata {
    /// Encodes: member id, cluster id (u64 LE each), the ConfState message's length
    /// (u32 LE) and bytes, then the member list.
    pub fn encode(&self) -> Vec<u8> {
        let conf = self.initial_conf.write_to_bytes().unwrap_or_default();
        let mut out = Vec::new();
        out.extend_from_slice(&self.member_id.to_le_bytes());
        out.extend_from_slice(&self.cluster_id.to_le_bytes());
        out.extend_from_slice(&(conf.len() as u32).to_le_bytes());
        out.extend_from_slice(&conf);
        out.extend_from_slice(&self.members);
        out
    }

    /// Decodes what [`WalMetadata::encode`] wrote.
    pub fn decode(b: &[u8]) -> Result<WalMetadata, RaftError> {
        let short = || RaftError::Decode("metadata record too short".into());
        let field = |from: usize, len: usize| b.get(from..from + len).ok_or_else(short);
        let u64_at = |i: usize| -> Result<u64, RaftError> {
            Ok(u64::from_le_bytes(
                field(i, 8)?.try_into().map_err(|_| short())?,
            ))
        };
        let (member_id, cluster_id) = (u64_at(0)?, u64_at(8)?);
        let conf_len = u32::from_le_bytes(field(16, 4)?.try_into().map_err(|_| short())?) as usize;
        let initial_conf = ConfState::parse_from_bytes(field(20, conf_len)?)
            .map_err(|e| RaftError::Decode(e.to_string()))?;
        let members = b[20 + conf_len..].to_vec();
        Ok(WalMetadata {
            member_id,
            cluster_id,
            initial_conf,
            members,
        })
    }
}

/// Encodes a raft entry for the WAL.
pub fn encode_entry(e: &Entry) -> Vec<u8> {
    e.write_to_bytes().unwrap_or_default()
}

/// Decodes a WAL entry record, checking it holds the index it was filed under.
pub fn decode_entry(index: u64, b: &[u8]) -> Result<Entry, RaftError> {
    let e = Entry::parse_from_bytes(b)
        .map_err(|err| RaftError::Decode(format!("entry {index}: {err}")))?;
    if e.index != index {
        return Err(RaftError::Decode(format!(
            "entry filed under {index} holds index {}",
            e.index
        )));
    }
    Ok(e)
}

/// Encodes a raft message for a peer.
pub fn encode_message(m: &raft::prelude::Message) -> Vec<u8> {
    m.write_to_bytes().unwrap_or_default()
}

/// Decodes a raft message from a peer.
pub fn decode_message(b: &[u8]) -> Result<raft::prelude::Message, RaftError> {
    raft::prelude::Message::parse_from_bytes(b)
        .map_err(|e| RaftError::Decode(format!("raft message: {e}")))
}

/// Decodes one entry of a peer's message, wherever it sits in the log.
pub fn decode_sent_entry(b: &[u8]) -> Result<Entry, RaftError> {
    Entry::parse_from_bytes(b).map_err(|e| RaftError::Decode(format!("raft entry: {e}")))
}

/// Encodes a membership change (a conf change entry's data).
pub fn encode_conf_change(cc: &raft::prelude::ConfChange) -> Vec<u8> {
    cc.write_to_bytes().unwrap_or_default()
}

/// Decodes a conf change entry's data.
pub fn decode_conf_change(b: &[u8]) -> Result<raft::prelude::ConfChange, RaftError> {
    raft::prelude::ConfChange::parse_from_bytes(b)
        .map_err(|e| RaftError::Decode(format!("conf change: {e}")))
}

/// Encodes a configuration (the backend keeps the applied one).
pub fn encode_conf_state(cs: &ConfState) -> Vec<u8> {
    cs.write_to_bytes().unwrap_or_default()
}

/// Decodes what [`encode_conf_state`] wrote.
pub fn decode_conf_state(b: &[u8]) -> Result<ConfState, RaftError> {
    ConfState::parse_from_bytes(b).map_err(|e| RaftError::Decode(format!("conf state: {e}")))
}

/// Encodes a hard state.
pub fn encode_hard_state(hs: &HardState) -> Vec<u8> {
    hs.write_to_bytes().unwrap_or_default()
}

/// Decodes a hard state.
pub fn decode_hard_state(b: &[u8]) -> Result<HardState, RaftError> {
    HardState::parse_from_bytes(b).map_err(|e| RaftError::Decode(format!("hard state: {e}")))
}

/// Encodes snapshot metadata (index, term, conf state).
pub fn encode_snapshot_meta(m: &SnapshotMetadata) -> Vec<u8> {
    m.write_to_bytes().unwrap_or_default()
}

/// Decodes snapshot metadata.
pub fn decode_snapshot_meta(b: &[u8]) -> Result<SnapshotMetadata, RaftError> {
    SnapshotMetadata::parse_from_bytes(b)
        .map_err(|e| RaftError::Decode(format!("snapshot mark: {e}")))
}

/// Encodes a raft snapshot (metadata and data), as etcd's `.snap` files hold it.
pub fn encode_snapshot(s: &raft::prelude::Snapshot) -> Vec<u8> {
    s.write_to_bytes().unwrap_or_default()
}

/// Decodes a raft snapshot.
pub fn decode_snapshot(b: &[u8]) -> Result<raft::prelude::Snapshot, RaftError> {
    raft::prelude::Snapshot::parse_from_bytes(b)
        .map_err(|e| RaftError::Decode(format!("snapshot: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trip() {
        let cs = ConfState {
            voters: vec![1, 2, 3],
            ..Default::default()
        };
        let m = WalMetadata {
            member_id: 7,
            cluster_id: 9,
            initial_conf: cs,
            members: b"members".to_vec(),
        };
        assert_eq!(WalMetadata::decode(&m.encode()).expect("decode"), m);
        assert!(WalMetadata::decode(b"short").is_err());
    }

    #[test]
    fn entry_index_is_checked() {
        let e = Entry {
            index: 5,
            term: 2,
            ..Default::default()
        };
        let b = encode_entry(&e);
        assert_eq!(decode_entry(5, &b).expect("entry").term, 2);
        assert!(decode_entry(6, &b).is_err());
    }
}
