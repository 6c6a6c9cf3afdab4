//! The apply path's write transaction, shared by every module that keeps replicated state
//! (MVCC, alarms, member attributes; later leases, auth and membership), each in its own
//! tables.
//!
//! Invariants:
//! - One [`BatchTx`] per applied batch of log entries; [`BatchTx::commit`] writes the raft
//!   position the batch reaches in the same transaction as the data, so the backend never
//!   holds data without the index that produced it (or the reverse).
//! - Nothing written through a batch is visible to readers before `commit` returns.

use redb::ReadableTable as _;
use redb::{Table, TableDefinition};

use crate::backend::{Backend, WriteTx};
use crate::{Result, schema};

/// A write transaction on the backend, for one batch of applied entries.
pub struct BatchTx<'b> {
    backend: &'b Backend,
    tx: WriteTx<'b>,
}

impl Backend {
    /// Starts the write transaction of one applied batch.
    pub fn begin_batch(&self) -> Result<BatchTx<'_>> {
        Ok(BatchTx {
            backend: self,
            tx: self.begin_write()?,
        })
    }

    /// [`Backend::begin_batch`] if no other write transaction is open and no
    /// defragmentation holds writers; None instead of waiting.
    pub fn try_begin_batch(&self) -> Result<Option<BatchTx<'_>>> {
        Ok(self
            .try_begin_write()?
            .map(|tx| BatchTx { backend: self, tx }))
    }
}

impl<'b> BatchTx<'b> {
    /// The backend this batch writes to.
    pub fn backend(&self) -> &'b Backend {
        self.backend
    }

    /// Opens a byte-keyed table. A table is open at most once at a time per batch.
    pub fn open(
        &self,
        def: TableDefinition<'static, &'static [u8], &'static [u8]>,
    ) -> Result<Table<'_, &'static [u8], &'static [u8]>> {
        self.tx.open_table(def).map_err(|e| self.backend.err(e))
    }

    fn meta(&self) -> Result<Table<'_, &'static str, &'static [u8]>> {
        self.tx
            .open_table(schema::META)
            .map_err(|e| self.backend.err(e))
    }

    /// Writes a meta value.
    pub fn put_meta(&self, key: &str, value: &[u8]) -> Result<()> {
        self.meta()?
            .insert(key, value)
            .map_err(|e| self.backend.err(e))?;
        Ok(())
    }

    /// Reads a meta value written by this batch or before it.
    pub fn get_meta(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let meta = self.meta()?;
        let value = meta.get(key).map_err(|e| self.backend.err(e))?;
        Ok(value.map(|v| v.value().to_vec()))
    }

    /// Deletes a meta value (nothing if absent).
    pub fn delete_meta(&self, key: &str) -> Result<()> {
        self.meta()?.remove(key).map_err(|e| self.backend.err(e))?;
        Ok(())
    }

    /// Every meta key starting with `prefix`, as this batch sees them, in key order.
    pub fn meta_keys(&self, prefix: &str) -> Result<Vec<String>> {
        let rows =
            Backend::meta_with_prefix(&self.meta()?, prefix).map_err(|e| self.backend.err(e))?;
        Ok(rows.into_iter().map(|(k, _)| k).collect())
    }

    /// Commits the batch with the raft position it brings the state to; `durable` forces
    /// an fsync of the backend.
    pub fn commit(self, index: u64, term: u64, durable: bool) -> Result<()> {
        self.put_meta(
            schema::META_CONSISTENT_INDEX,
            index.to_le_bytes().as_slice(),
        )?;
        self.put_meta(schema::META_CONSISTENT_TERM, term.to_le_bytes().as_slice())?;
        self.backend.commit(self.tx, durable)
    }
}
