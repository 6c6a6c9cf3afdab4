//! Writes the backend as etcd 3.5 keeps its own: a bbolt file with etcd's ten buckets and
//! etcd's encodings, from one read transaction (a consistent point in time). This is
//! what `Maintenance.Snapshot` streams and `etcdctl snapshot restore` reads.
//!
//! Most tables are etcd's already (`key`, `lease`, `auth`, `authUsers`, `authRoles`) and
//! are copied row by row; the `key` table streams, so memory does not grow with the
//! database. The rest is translated:
//! - `meta`: `consistent_index` and `term` big-endian (oxcd keeps them little-endian),
//!   the conf state as etcd's JSON, the compaction revisions as they are;
//! - `alarm`: oxcd keeps alarms as `alarm/<id>/<type>` meta rows; etcd as encoded
//!   `AlarmMember` keys;
//! - `members`, `members_removed`: keyed by unpadded hex id, members as etcd's JSON;
//! - `cluster`: the cluster version and the downgrade, as the cluster recorded them;
//! - `meta`: also the storage version, once this member set one.

use std::fs::File;
use std::io::Write;

use oxcd_api::oxcdpb::MemberInfo;
use oxcd_bbolt::{BoltWriter, WriteError};
use oxcd_storage::StorageError;
use oxcd_storage::backend::redb;
use oxcd_storage::backend::{Backend, ReadTx};
use oxcd_storage::schema;
use oxcd_storage::tables::TABLES;
use prost::Message as _;
use redb::{ReadTransaction, ReadableTable};

/// The cluster version written in the `cluster` bucket when the cluster has not
/// decided one yet.
const UNDECIDED_CLUSTER_VERSION: &[u8] = b"3.5.0";

/// Key/value rows of one bucket.
type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// Why the backend could not be written in etcd's format.
#[derive(Debug, thiserror::Error)]
pub enum EtcdFileError {
    /// The backend could not be read.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The bbolt file could not be written (or its writer failed).
    #[error(transparent)]
    Write(#[from] WriteError),
    /// A table of etcd's is not among the backend's.
    #[error("backend: no table {0}")]
    NoTable(String),
    /// An alarm row whose key does not read.
    #[error("backend: unreadable alarm row {0:?}")]
    Alarm(String),
    /// A member row that does not decode.
    #[error("backend: undecodable member: {0}")]
    Member(prost::DecodeError),
    /// A removed member's key that is no id.
    #[error(transparent)]
    RemovedId(oxcd_mvcc::MvccError),
    /// A meta number (consistent index, term) that is not 8 bytes.
    #[error("backend: a meta number is not 8 bytes")]
    MetaNumber,
    /// The conf state does not decode.
    #[error(transparent)]
    ConfState(oxcd_raft::RaftError),
}

/// Writes the backend's current state to `file` in etcd's format; returns the file and
/// the database's size in bytes (bbolt's `tx.Size()`, what etcd streams before the
/// sha256).
pub fn write_etcd_file(backend: &Backend, file: File) -> Result<(File, u64), EtcdFileError> {
    let source = EtcdFileSource::open(backend)?;
    let mut w = BoltWriter::new(file)?;
    source.write_buckets(&mut w)?;
    Ok(w.finish()?)
}

/// Streams the backend's current state in etcd's format ([`EtcdFileSource::stream`]).
pub fn stream_etcd_file<W: Write>(
    backend: &Backend,
    open: impl FnOnce(u64) -> W,
) -> Result<W, EtcdFileError> {
    EtcdFileSource::open(backend)?.stream(open)
}

/// One read transaction of the backend: a consistent point in time, written in etcd's
/// format, and described as a raft snapshot describes its data (the index and term
/// applied, the configuration, the members and the cluster version there).
pub struct EtcdFileSource<'b> {
    backend: &'b Backend,
    tx: ReadTx,
    meta: Vec<(String, Vec<u8>)>,
}

impl<'b> EtcdFileSource<'b> {
    /// Opens a read transaction of `backend`.
    pub fn open(backend: &'b Backend) -> Result<EtcdFileSource<'b>, EtcdFileError> {
        let db = |e: redb::Error| EtcdFileError::Storage(backend.err(e));
        let tx = backend.begin_read()?;
        let meta =
            Backend::meta_with_prefix(&tx.open_table(schema::META).map_err(|e| db(e.into()))?, "")
                .map_err(db)?;
        Ok(EtcdFileSource { backend, tx, meta })
    }

    /// The index and term last applied (0 when none is recorded).
    pub fn position(&self) -> Result<(u64, u64), EtcdFileError> {
        let number = |k: &str| match meta_value(&self.meta, k) {
            Some(b) => le(b),
            None => Ok(0),
        };
        Ok((
            number(schema::META_CONSISTENT_INDEX)?,
            number(schema::META_CONSISTENT_TERM)?,
        ))
    }

    /// The raft configuration in force, once one was recorded.
    pub fn conf_state(&self) -> Result<Option<oxcd_raft::ConfState>, EtcdFileError> {
        meta_value(&self.meta, schema::META_CONF_STATE)
            .map(oxcd_raft::persist::decode_conf_state)
            .transpose()
            .map_err(EtcdFileError::ConfState)
    }

    /// The members, each with the name and client URLs it published, and the ids
    /// removed.
    pub fn members(&self) -> Result<(Vec<MemberInfo>, Vec<u64>), EtcdFileError> {
        let db = |e: redb::Error| EtcdFileError::Storage(self.backend.err(e));
        let mut attributes = crate::domains::membership::attributes_by_id(&self.meta);
        let mut members = Vec::new();
        let table = self
            .tx
            .open_table(schema::MEMBERS)
            .map_err(|e| db(e.into()))?;
        for row in table.iter().map_err(|e| db(e.into()))? {
            let (_, v) = row.map_err(|e| db(e.into()))?;
            let mut m = MemberInfo::decode(v.value()).map_err(EtcdFileError::Member)?;
            if let Some(a) = attributes.remove(&m.id) {
                m.name = a.name;
                m.client_urls = a.client_urls;
            }
            members.push(m);
        }
        let mut removed = Vec::new();
        let table = self
            .tx
            .open_table(schema::MEMBERS_REMOVED)
            .map_err(|e| db(e.into()))?;
        for row in table.iter().map_err(|e| db(e.into()))? {
            let (k, _) = row.map_err(|e| db(e.into()))?;
            removed.push(
                crate::domains::membership::table::id_of(k.value())
                    .map_err(EtcdFileError::RemovedId)?,
            );
        }
        Ok((members, removed))
    }

    /// The meta value at `key`, as oxcd keeps it.
    pub fn meta(&self, key: &str) -> Option<&[u8]> {
        meta_value(&self.meta, key)
    }

    /// The cluster version, once the cluster decided one.
    pub fn cluster_version(&self) -> Option<String> {
        meta_value(&self.meta, schema::META_CLUSTER_VERSION)
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }

    /// Streams the state in etcd's format, every byte in order, into the writer `open`
    /// makes when told the database's size: two passes over the one read transaction,
    /// the first to learn where the pages fall (the metas, first in the file, name the
    /// last), the second to write. Nothing but the pages in flight is held.
    pub fn stream<W: Write>(&self, open: impl FnOnce(u64) -> W) -> Result<W, EtcdFileError> {
        let mut plan = BoltWriter::plan();
        self.write_buckets(&mut plan)?;
        let layout = plan.layout()?;
        let mut w = BoltWriter::with_layout(open(layout.size()), layout)?;
        self.write_buckets(&mut w)?;
        Ok(w.finish_stream()?)
    }

    /// Every bucket of etcd's, in bbolt's byte order.
    fn write_buckets<W: Write>(&self, w: &mut BoltWriter<W>) -> Result<(), EtcdFileError> {
        let db = |e: redb::Error| EtcdFileError::Storage(self.backend.err(e));
        put_rows(w, b"alarm", &alarms(&self.meta)?)?;
        for name in [
            schema::AUTH_NAME,
            schema::AUTH_ROLES_NAME,
            schema::AUTH_USERS_NAME,
        ] {
            copy_table(w, &self.tx, name, db)?;
        }
        put_rows(w, b"cluster", &cluster_rows(&self.meta))?;
        copy_table(w, &self.tx, schema::KEY_NAME, db)?;
        copy_table(w, &self.tx, schema::LEASE_NAME, db)?;
        let (members, removed) = self.members()?;
        let mut member_rows: Rows = members
            .iter()
            .map(|m| {
                let json =
                    crate::domains::membership::etcd_json::member_json(m, &m.name, &m.client_urls);
                (format!("{:x}", m.id).into_bytes(), json.into_bytes())
            })
            .collect();
        member_rows.sort();
        let mut removed_rows: Rows = removed
            .iter()
            .map(|id| (format!("{id:x}").into_bytes(), b"removed".to_vec()))
            .collect();
        removed_rows.sort();
        put_rows(w, b"members", &member_rows)?;
        put_rows(w, b"members_removed", &removed_rows)?;
        put_rows(w, b"meta", &etcd_meta(&self.meta)?)
    }
}

/// A little-endian meta number.
fn le(b: &[u8]) -> Result<u64, EtcdFileError> {
    let a: [u8; 8] = b.try_into().map_err(|_| EtcdFileError::MetaNumber)?;
    Ok(u64::from_le_bytes(a))
}

fn put_rows<W: Write>(
    w: &mut BoltWriter<W>,
    bucket: &[u8],
    rows: &[(Vec<u8>, Vec<u8>)],
) -> Result<(), EtcdFileError> {
    w.bucket(bucket)?;
    for (k, v) in rows {
        w.put(k, v)?;
    }
    Ok(())
}

/// Copies a table kept in etcd's encoding, row by row (`db` names a backend error).
fn copy_table<W: Write>(
    w: &mut BoltWriter<W>,
    tx: &ReadTransaction,
    name: &str,
    db: impl Fn(redb::Error) -> EtcdFileError,
) -> Result<(), EtcdFileError> {
    let spec = TABLES
        .iter()
        .find(|t| t.name == name)
        .ok_or_else(|| EtcdFileError::NoTable(name.to_string()))?;
    w.bucket(name.as_bytes())?;
    let mut failed = None;
    spec.scan(tx, |k, v| match w.put(k, v) {
        Ok(()) => true,
        Err(e) => {
            failed = Some(EtcdFileError::Write(e));
            false
        }
    })
    .map_err(db)?;
    failed.map_or(Ok(()), Err)
}

/// oxcd's `alarm/<member id hex>/<type>` meta rows as etcd's `alarm` bucket.
fn alarms(meta: &[(String, Vec<u8>)]) -> Result<Rows, EtcdFileError> {
    let mut rows = Vec::new();
    for (k, _) in meta
        .iter()
        .filter(|(k, _)| k.starts_with(schema::META_ALARM_PREFIX))
    {
        let alarm =
            crate::machine::alarms::parse(k).ok_or_else(|| EtcdFileError::Alarm(k.clone()))?;
        rows.push((alarm.encode_to_vec(), Vec::new()));
    }
    rows.sort();
    Ok(rows)
}

/// etcd's `cluster` bucket: the cluster version, and the downgrade once one was enabled.
fn cluster_rows(meta: &[(String, Vec<u8>)]) -> Rows {
    let mut rows = vec![(
        b"clusterVersion".to_vec(),
        meta_value(meta, schema::META_CLUSTER_VERSION)
            .unwrap_or(UNDECIDED_CLUSTER_VERSION)
            .to_vec(),
    )];
    if let Some(d) = meta_value(meta, schema::META_DOWNGRADE) {
        rows.push((b"downgrade".to_vec(), d.to_vec()));
    }
    rows
}

/// The value of meta row `key`, if there is one.
fn meta_value<'a>(meta: &'a [(String, Vec<u8>)], key: &str) -> Option<&'a [u8]> {
    meta.iter()
        .find(|(m, _)| m == key)
        .map(|(_, v)| v.as_slice())
}

/// oxcd's meta rows as etcd's `meta` bucket (sorted).
fn etcd_meta(meta: &[(String, Vec<u8>)]) -> Result<Rows, EtcdFileError> {
    let get = |k: &str| meta_value(meta, k);
    let mut rows = Vec::new();
    if let Some(cs) = get(schema::META_CONF_STATE) {
        let cs = oxcd_raft::persist::decode_conf_state(cs).map_err(EtcdFileError::ConfState)?;
        rows.push((b"confState".to_vec(), conf_state_json(&cs)));
    }
    if let Some(ci) = get(schema::META_CONSISTENT_INDEX) {
        rows.push((b"consistent_index".to_vec(), le(ci)?.to_be_bytes().to_vec()));
    }
    for k in [
        schema::META_FINISHED_COMPACT,
        schema::META_SCHEDULED_COMPACT,
    ] {
        if let Some(v) = get(k) {
            rows.push((k.as_bytes().to_vec(), v.to_vec()));
        }
    }
    if let Some(v) = get(schema::META_STORAGE_VERSION) {
        rows.push((b"storageVersion".to_vec(), v.to_vec()));
    }
    if let Some(t) = get(schema::META_CONSISTENT_TERM) {
        let term = le(t)?;
        if term > 0 {
            rows.push((b"term".to_vec(), term.to_be_bytes().to_vec()));
        }
    }
    rows.sort();
    Ok(rows)
}

/// etcd's JSON of a `raftpb.ConfState`, fields in Go's order: the four lists when not
/// empty, `auto_leave` always.
fn conf_state_json(cs: &oxcd_raft::ConfState) -> Vec<u8> {
    let mut out = String::from("{");
    for (name, ids) in [
        ("voters", cs.get_voters()),
        ("learners", cs.get_learners()),
        ("voters_outgoing", cs.get_voters_outgoing()),
        ("learners_next", cs.get_learners_next()),
    ] {
        if !ids.is_empty() {
            let list: Vec<String> = ids.iter().map(u64::to_string).collect();
            out.push_str(&format!(r#""{name}":[{}],"#, list.join(",")));
        }
    }
    out.push_str(&format!(r#""auto_leave":{}}}"#, cs.get_auto_leave()));
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conf_state_json_is_etcds() {
        let mut cs = oxcd_raft::ConfState::default();
        cs.set_voters(vec![13668033151171901709]);
        assert_eq!(
            String::from_utf8(conf_state_json(&cs)).expect("utf8"),
            r#"{"voters":[13668033151171901709],"auto_leave":false}"#
        );
    }
}
