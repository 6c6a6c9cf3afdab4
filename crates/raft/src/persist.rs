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
}

impl WalMetadata {
    /// Encodes: member id, cluster id (u64 LE each), then the ConfState message.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&self.member_id.to_le_bytes());
        out.extend_from_slice(&self.cluster_id.to_le_bytes());
        out.extend_from_slice(&self.initial_conf.write_to_bytes().unwrap_or_default());
        out
    }

    /// Decodes what [`WalMetadata::encode`] wrote.
    pub fn decode(b: &[u8]) -> Result<WalMetadata, RaftError> {
        if b.len() < 16 {
            return Err(RaftError::Decode("metadata record too short".into()));
        }
        let (ids, conf) = b.split_at(16);
        let member_id = u64::from_le_bytes(
            ids[0..8]
                .try_into()
                .map_err(|_| RaftError::Decode("ids".into()))?,
        );
        let cluster_id = u64::from_le_bytes(
            ids[8..16]
                .try_into()
                .map_err(|_| RaftError::Decode("ids".into()))?,
        );
        let initial_conf =
            ConfState::parse_from_bytes(conf).map_err(|e| RaftError::Decode(e.to_string()))?;
        Ok(WalMetadata {
            member_id,
            cluster_id,
            initial_conf,
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
