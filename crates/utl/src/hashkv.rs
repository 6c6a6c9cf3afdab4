//! `hashkv <filename> [--rev]`: etcd's KV history hash of a backend or snapshot file,
//! as etcdutl 3.6 computes it (`v3.6.14:etcdutl/etcdutl/hashkv_command.go`, which opens
//! the file as a store and calls `HashByRev`; `server/storage/mvcc/hash.go`
//! `unsafeHashByRev`, `kvHasher`): a CRC-32C over the bucket name `key`, then every row
//! of that bucket (revision key, value) at or below the revision, where rows at or below
//! the compaction revision count only if the index keeps them at that revision (each
//! key's newest revision unless it deleted the key: etcd's `treeIndex.Keep`), the same
//! rule as a member's HashKV, so the two agree; a tombstone at the compaction revision
//! is left out, as etcd does. Where a member answers HashKV at exactly a compaction's
//! revision from the hash it took when compacting (etcd's `hashStorage`), a file has
//! none: like etcdutl, the tool computes it afresh, with that compaction as its own.

use std::collections::HashMap;
use std::path::Path;

use oxcd_bbolt::BoltReader;

use crate::status::Format;

/// A revision key: main and sub revision, big-endian, around `_`.
const REV_LEN: usize = 17;
/// A tombstone's revision key ends with this mark.
const TOMBSTONE: u8 = b't';

/// What `hashkv` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvHash {
    /// The hash.
    pub hash: u32,
    /// The revision hashed up to.
    pub hash_revision: i64,
    /// The compaction revision (-1: never compacted).
    pub compact_revision: i64,
}

/// Why a file could not be hashed (etcd's texts where etcd has them).
#[derive(Debug, thiserror::Error)]
pub enum HashKvError {
    /// The file is missing or unreadable (`stat <path>: ...`).
    #[error("{0}")]
    Stat(String),
    /// The file is not a readable bbolt backend.
    #[error(transparent)]
    Read(#[from] oxcd_bbolt::ReadError),
    /// The revision asked is compacted.
    #[error("mvcc: required revision has been compacted")]
    Compacted,
    /// The revision asked is above the file's.
    #[error("mvcc: required revision is a future revision")]
    FutureRevision,
}

/// The main revision of a revision key (None: not one).
fn main_rev(key: &[u8]) -> Option<i64> {
    let bytes: [u8; 8] = key.get(..8)?.try_into().ok()?;
    (key.len() >= REV_LEN).then(|| i64::from_be_bytes(bytes))
}

/// The user key a `key` bucket value (an mvccpb.KeyValue) holds.
fn user_key(value: &[u8]) -> Vec<u8> {
    use prost::Message;
    oxcd_api::mvccpb::KeyValue::decode(value)
        .map(|kv| kv.key)
        .unwrap_or_default()
}

/// A compaction mark in `meta` (`scheduledCompactRev`, `finishedCompactRev`).
fn meta_rev(db: &BoltReader, name: &[u8]) -> Result<Option<i64>, HashKvError> {
    let Ok(meta) = db.bucket(b"meta") else {
        return Ok(None);
    };
    let mut found = None;
    db.for_each(&meta, &mut |k, v| {
        if k == name {
            found = main_rev(v);
        }
        Ok(())
    })?;
    Ok(found)
}

/// The hash of the file at `path` at revision `rev` (0: its latest).
pub fn hash_kv(path: &Path, rev: i64) -> Result<KvHash, HashKvError> {
    std::fs::metadata(path)
        .map_err(|e| HashKvError::Stat(oxcd_go::os::path_error("stat", path, &e)))?;
    let db = BoltReader::open(path)?;
    // As a store opened on the file: a scheduled compaction is the compaction revision.
    let compact = meta_rev(&db, b"scheduledCompactRev")?
        .into_iter()
        .chain(meta_rev(&db, b"finishedCompactRev")?)
        .max()
        .unwrap_or(-1);
    let mut rows: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    if let Ok(key) = db.bucket(b"key") {
        db.for_each(&key, &mut |k, v| {
            rows.push((k.to_vec(), v.to_vec()));
            Ok(())
        })?;
    }
    let current = rows
        .last()
        .and_then(|(k, _)| main_rev(k))
        .unwrap_or(1)
        .max(compact);
    let rev = if rev <= 0 { current } else { rev };
    if rev < compact {
        return Err(HashKvError::Compacted);
    }
    if rev > current {
        return Err(HashKvError::FutureRevision);
    }
    // etcd keeps, of the rows at or below the compaction, those its index would keep
    // at the revision hashed (`kvindex.Keep(rev)`): each key's newest row at or below
    // it, unless that row deleted the key; with nothing kept, every row counts.
    let mut newest: HashMap<Vec<u8>, usize> = HashMap::new();
    for (i, (k, v)) in rows.iter().enumerate() {
        if main_rev(k).is_some_and(|m| m <= rev) {
            newest.insert(user_key(v), i);
        }
    }
    let kept: std::collections::HashSet<usize> = newest
        .into_values()
        .filter(|&i| rows[i].0.get(REV_LEN) != Some(&TOMBSTONE))
        .collect();
    let mut hash = crc32c::crc32c(b"key");
    for (i, (k, v)) in rows.iter().enumerate() {
        let Some(main) = main_rev(k) else { continue };
        if main > rev || (main <= compact && !kept.is_empty() && !kept.contains(&i)) {
            continue;
        }
        // A tombstone at the compaction revision is left out: etcd before 3.5.16
        // deleted it when compacting, later releases keep it (hash.go WriteKeyValue).
        if main == compact && k.get(REV_LEN) == Some(&TOMBSTONE) {
            continue;
        }
        hash = crc32c::crc32c_append(hash, k);
        hash = crc32c::crc32c_append(hash, v);
    }
    Ok(KvHash {
        hash,
        hash_revision: rev,
        compact_revision: compact,
    })
}

/// `h` printed in `format` (v3.6.14 etcdutl/etcdutl/printer*.go `DBHashKV`), or
/// etcdutl's refusal of the format.
pub fn print(h: &KvHash, format: Format) -> Result<String, String> {
    let cells = vec![
        h.hash.to_string(),
        h.hash_revision.to_string(),
        h.compact_revision.to_string(),
    ];
    Ok(match format {
        Format::Simple => format!("{}\n", cells.join(", ")),
        Format::Table => {
            crate::table::render(&["hash", "hash revision", "compact revision"], &[cells])
        }
        Format::Json => format!(
            "{{\"hash\":{},\"hashRevision\":{},\"compactRevision\":{}}}\n",
            h.hash, h.hash_revision, h.compact_revision
        ),
        Format::Fields => format!(
            "\"Hash\" : {}\n\"Hash revision\" : {}\n\"Compact revision\" : {}\n",
            h.hash, h.hash_revision, h.compact_revision
        ),
        Format::Protobuf => return Err("protobuf not supported as output format".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_as_etcdutl_3_6() {
        let h = KvHash {
            hash: 1084519789,
            hash_revision: 9,
            compact_revision: -1,
        };
        assert_eq!(
            print(&h, Format::Simple).as_deref(),
            Ok("1084519789, 9, -1\n")
        );
        assert_eq!(
            print(&h, Format::Json).as_deref(),
            Ok("{\"hash\":1084519789,\"hashRevision\":9,\"compactRevision\":-1}\n")
        );
        assert_eq!(
            print(&h, Format::Fields).as_deref(),
            Ok("\"Hash\" : 1084519789\n\"Hash revision\" : 9\n\"Compact revision\" : -1\n")
        );
        assert!(print(&h, Format::Protobuf).is_err());
    }
}
