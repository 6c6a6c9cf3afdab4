//! The MVCC store over the redb backend: reads at a revision, and batched writes that
//! record the events they make (the change feed watchers are fed from).

use std::cell::Cell;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use oxcd_api::mvccpb::event::EventType;
use oxcd_api::mvccpb::{Event, KeyValue};
use oxcd_storage::backend::redb::{ReadOnlyTable, ReadTransaction, ReadableTable, Table};
use oxcd_storage::backend::{Backend, ReadTx};
use oxcd_storage::batch::BatchTx;
use oxcd_storage::schema;
use prost::Message;

use crate::index::{KeyRange, Matches, TreeIndex};
use crate::key_index::Found;
use crate::revision::Revision;
use crate::{MvccError, Result};
use counts::{OpCounts, Tally};
use row_deleter::{Job, RowDeleter};

/// Options of a range read.
#[derive(Debug, Clone, Copy, Default)]
pub struct RangeOptions {
    /// At most this many keys (0: all).
    pub limit: usize,
    /// Read at this revision (0 or less: the current one).
    pub rev: i64,
    /// Only count the keys.
    pub count_only: bool,
}

/// What a range read returns.
#[derive(Debug, Clone, Default)]
pub struct RangeResult {
    /// The key-values, in key order.
    pub kvs: Vec<KeyValue>,
    /// How many keys the range holds at the read revision (regardless of the limit).
    pub count: usize,
    /// The store's current revision when read.
    pub rev: i64,
}

/// A page of a range ([`Store::range_page`]).
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// The key-values, in key order.
    pub kvs: Vec<KeyValue>,
    /// Whether the range holds more keys after them.
    pub more: bool,
    /// The store's current revision when read.
    pub rev: i64,
    /// The revision read at.
    pub at: i64,
}

/// The key table as a read transaction sees it.
type KeyTable = ReadOnlyTable<&'static [u8], &'static [u8]>;

/// A share of a long answer's rows smaller than this is not worth a thread of its own.
pub const ROWS_PER_THREAD: usize = 16_384;

/// What [`Store::range_encoded`] read besides the rows it handed out.
#[derive(Debug, Clone, Copy, Default)]
pub struct EncodedRange {
    /// How many keys the range holds at the read revision (regardless of the limit).
    pub count: usize,
    /// The store's current revision when read.
    pub rev: i64,
    /// Keys the index found (up to the asked limit): more than were handed out means the
    /// caller's `take` cut the answer short.
    pub found: usize,
}

/// The key index and the compaction point, guarded together so that a reader's check
/// against the compaction revision and its index lookup see the same state.
///
/// A compaction changes both before its batch commits and deletes rows: so a reader
/// begins its read transactions under the same read lock as its lookup (or check), and
/// the rows of every revision it found are in them (the compaction's commit, which
/// deletes rows, comes after the lock is released).
#[derive(Debug, Default)]
struct IndexState {
    tree: TreeIndex,
    compact_rev: i64,
}

/// The MVCC store.
#[derive(Debug)]
pub struct Store {
    backend: Arc<Backend>,
    // std RwLock: never held across an await or across backend I/O by readers.
    index: RwLock<IndexState>,
    current_rev: AtomicI64,
    /// The raft index of the last applied entry readers see: the one published applied
    /// index of the member, which linearizable reads wait on.
    applied: tokio::sync::watch::Sender<u64>,
    /// Held shared by readers, exclusively while a snapshot replaces the state.
    gate: RwLock<()>,
    /// Deletes the rows of applied compactions in the background.
    rows: RowDeleter,
    /// The operations etcd's metrics count.
    counts: OpCounts,
    /// What its compactions took.
    compactions: Arc<compaction_stats::CompactionStats>,
}

/// The revision of a row of the key table and whether it is a tombstone.
fn row_revision(key: &[u8]) -> Result<(Revision, bool)> {
    Revision::from_bytes(key)
        .ok_or_else(|| MvccError::Corrupt(Revision::default(), "bad row key".into()))
}

/// The event of a put: the key-value as written.
fn put_event(kv: KeyValue) -> Event {
    Event {
        r#type: EventType::Put as i32,
        kv: Some(kv),
        prev_kv: None,
    }
}

/// The event of a delete, as etcd makes it: only the key and the delete's revision.
fn delete_event(key: Vec<u8>, rev: i64) -> Event {
    Event {
        r#type: EventType::Delete as i32,
        kv: Some(KeyValue {
            key,
            mod_revision: rev,
            ..Default::default()
        }),
        prev_kv: None,
    }
}

fn decode_kv(rev: Revision, bytes: &[u8]) -> Result<KeyValue> {
    KeyValue::decode(bytes).map_err(|e| MvccError::Corrupt(rev, e.to_string()))
}

/// Hands `visit` each row of `found`, in order, as stored (an encoded `KeyValue`), with
/// its revision.
fn visit_rows<T: ReadableTable<&'static [u8], &'static [u8]>>(
    table: &T,
    found: &[(Vec<u8>, Found)],
    backend: &Backend,
    mut visit: impl FnMut(Revision, &[u8]) -> Result<()>,
) -> Result<()> {
    for (_, f) in found {
        let key = f.modified.to_bytes(false);
        let row = table.get(key.as_slice()).map_err(|e| backend.err(e))?;
        let row = row.ok_or_else(|| MvccError::Corrupt(f.modified, "row missing".into()))?;
        visit(f.modified, row.value())?;
    }
    Ok(())
}

fn read_rows<T: ReadableTable<&'static [u8], &'static [u8]>>(
    table: &T,
    found: &[(Vec<u8>, Found)],
    backend: &Backend,
) -> Result<Vec<KeyValue>> {
    let mut kvs = Vec::with_capacity(found.len());
    visit_rows(table, found, backend, |rev, row| {
        kvs.push(decode_kv(rev, row)?);
        Ok(())
    })?;
    Ok(kvs)
}

/// What [`load`] rebuilt from the backend.
struct Loaded {
    index: IndexState,
    /// The current revision: the newest row's, or a compaction's if above it.
    current: i64,
    consistent_index: u64,
    /// A compaction scheduled above the finished one (0: none), to finish now.
    scheduled: i64,
}

/// Reads the applied state's position and rebuilds the key index from the rows, as etcd
/// does: every row of the key table is indexed, a row with an empty value too (`oxcdutl
/// snapshot restore --bump-revision` writes one, as etcdutl does, to raise the revision;
/// its empty key is below every key a request can name, so no read sees it).
fn load(backend: &Backend) -> Result<Loaded> {
    let tx = backend.begin_read()?;
    let meta_u64 = |k: &str| -> Result<u64> {
        let v = Backend::read_meta(&tx, k).map_err(|e| backend.err(e))?;
        Ok(v.and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
            .unwrap_or(0))
    };
    let consistent_index = meta_u64(schema::META_CONSISTENT_INDEX)?;
    let compact_rev = Backend::read_meta(&tx, schema::META_FINISHED_COMPACT)
        .map_err(|e| backend.err(e))?
        .and_then(|b| Revision::from_bytes(&b))
        .map(|(r, _)| r.main)
        // Never compacted: -1, as etcd, so that compacting at revision 0 succeeds once.
        .unwrap_or(-1);
    let mut tree = TreeIndex::default();
    let mut current = 1i64;
    let table = tx.open_table(schema::KEY).map_err(|e| backend.err(e))?;
    for row in table.iter().map_err(|e| backend.err(e))? {
        let (k, v) = row.map_err(|e| backend.err(e))?;
        let (rev, tombstone) = row_revision(k.value())?;
        let kv = decode_kv(rev, v.value())?;
        if tombstone {
            tree.tombstone(&kv.key, rev);
        } else {
            tree.restore_put(
                &kv.key,
                rev,
                Revision::new(kv.create_revision, 0),
                kv.version,
            );
        }
        current = current.max(rev.main);
    }
    let scheduled = Backend::read_meta(&tx, schema::META_SCHEDULED_COMPACT)
        .map_err(|e| backend.err(e))?
        .and_then(|b| Revision::from_bytes(&b))
        .map_or(0, |(r, _)| r.main);
    current = current.max(compact_rev).max(scheduled);
    drop(table);
    Ok(Loaded {
        index: IndexState { tree, compact_rev },
        current,
        consistent_index,
        scheduled: if scheduled > compact_rev {
            scheduled
        } else {
            0
        },
    })
}

impl Store {
    /// Opens the store and rebuilds the key index from the backend's rows; a compaction
    /// scheduled but not finished (left by a stop mid-way, or by `snapshot restore
    /// --mark-compacted`, etcd's or oxcd's) is applied to the index and its rows deleted
    /// in the background, as etcd resumes it at start.
    pub fn open(backend: Arc<Backend>) -> Result<Store> {
        let loaded = load(&backend)?;
        let finished = loaded.index.compact_rev;
        let compactions = Arc::new(compaction_stats::CompactionStats::default());
        let rows = RowDeleter::start(backend.clone(), finished, compactions.clone());
        let store = Store {
            backend,
            index: RwLock::new(loaded.index),
            current_rev: AtomicI64::new(loaded.current),
            applied: tokio::sync::watch::Sender::new(loaded.consistent_index),
            gate: RwLock::new(()),
            rows,
            counts: OpCounts::default(),
            compactions,
        };
        if loaded.scheduled > 0 {
            let job = store.resume_compaction(loaded.scheduled);
            store.rows.reset(finished, Some(job));
        }
        Ok(store)
    }

    /// What its compactions took ([`compaction_stats`]).
    pub fn compactions(&self) -> &compaction_stats::CompactionStats {
        &self.compactions
    }

    /// The operations etcd's metrics count ([`counts`]); reads outside a write are
    /// added by the caller that serves them.
    pub fn counts(&self) -> &OpCounts {
        &self.counts
    }

    /// Applies to the index a compaction to `rev` found scheduled above the finished one;
    /// the job that deletes its rows.
    fn resume_compaction(&self, rev: i64) -> Job {
        let mut idx = self.index_write();
        idx.compact_rev = rev;
        let keep = idx.tree.compact(rev);
        tracing::info!(
            scheduled_compact_revision = rev,
            "resume scheduled compaction"
        );
        Job { rev, keep }
    }

    /// Waits until the rows of the compaction at `rev` are deleted here, at most
    /// `timeout`: what `Compact` with `physical` waits for. Whether they are.
    pub fn wait_compacted(&self, rev: i64, timeout: std::time::Duration) -> bool {
        self.rows.wait_finished(rev, timeout)
    }

    /// Replaces the whole state with the snapshot file at `path` (received from the
    /// leader) and rebuilds the index. Readers wait meanwhile; none sees a mix of the old
    /// index and the new rows. Returns the raft (index, term) of the new state; its index
    /// is published ([`Store::publish_index`]) by the caller once the state kept beside the
    /// store is reloaded too.
    pub fn install_snapshot(&self, path: &std::path::Path) -> Result<(u64, u64)> {
        let _exclusive = self.gate.write().unwrap_or_else(|p| p.into_inner());
        // The old state's row deletions stop here; the new state's start after.
        let _no_deletions = self.backend.hold_row_deletions();
        let position = self.backend.install(path)?;
        let loaded = load(&self.backend)?;
        let finished = loaded.index.compact_rev;
        *self.index_write() = loaded.index;
        self.current_rev.store(loaded.current, Ordering::Release);
        let job = (loaded.scheduled > 0).then(|| self.resume_compaction(loaded.scheduled));
        self.rows.reset(finished, job);
        Ok(position)
    }

    fn index_read(&self) -> RwLockReadGuard<'_, IndexState> {
        // A panic while holding the lock leaves consistent data (updates are single calls).
        self.index.read().unwrap_or_else(|p| p.into_inner())
    }

    fn index_write(&self) -> RwLockWriteGuard<'_, IndexState> {
        self.index.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a write could take the key index now without waiting (no range is
    /// reading it): for a writer that must not wait behind a long read.
    pub fn index_free(&self) -> bool {
        matches!(
            self.index.try_write(),
            Ok(_) | Err(std::sync::TryLockError::Poisoned(_))
        )
    }

    /// The newest committed revision.
    pub fn current_rev(&self) -> i64 {
        self.current_rev.load(Ordering::Acquire)
    }

    /// Keys live now (`etcd_debugging_mvcc_keys_total`).
    pub fn live_keys(&self) -> usize {
        self.index_read().tree.live()
    }

    /// The compaction revision.
    pub fn compact_rev(&self) -> i64 {
        self.index_read().compact_rev
    }

    /// The raft index of the last applied entry whose effects are committed and published.
    pub fn consistent_index(&self) -> u64 {
        *self.applied.borrow()
    }

    /// The published applied index, to wait on (a linearizable read waits until it
    /// reaches the leader's commit index).
    pub fn applied_index(&self) -> tokio::sync::watch::Receiver<u64> {
        self.applied.subscribe()
    }

    /// Publishes `index` as applied after a snapshot was installed.
    pub fn publish_index(&self, index: u64) {
        self.applied.send_replace(index);
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<Backend> {
        &self.backend
    }

    /// Looks `range` up in the index as of `cur`: the keys to read (none when only
    /// counting) and how many keys the range holds.
    fn lookup(
        &self,
        range: KeyRange<'_>,
        opts: RangeOptions,
        cur: i64,
    ) -> Result<(Matches, usize)> {
        find(&self.index_read(), range, opts, cur)
    }

    /// [`Store::lookup`] at the current revision (returned first), and `readers(keys
    /// found)` read transactions begun under the same index lock, which hold the rows of
    /// the revisions found (see [`IndexState`]). The current revision is read under the
    /// lock too: one read before it could be below a compaction made since.
    fn lookup_and_begin(
        &self,
        range: KeyRange<'_>,
        opts: RangeOptions,
        readers: impl FnOnce(usize) -> usize,
    ) -> Result<(i64, Matches, usize, Vec<ReadTx>)> {
        let idx = self.index_read();
        let cur = self.current_rev();
        let (found, count) = find(&idx, range, opts, cur)?;
        let txs = (0..readers(found.len()))
            .map(|_| self.backend.begin_read())
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok((cur, found, count, txs))
    }

    /// Reads `range` at a committed revision.
    pub fn range(&self, range: KeyRange<'_>, opts: RangeOptions) -> Result<RangeResult> {
        let mut kvs = Vec::new();
        let read = self.read_committed(
            range,
            opts,
            |found| usize::from(found > 0),
            |taken, txs| {
                if let Some(tx) = txs.first() {
                    kvs = self.with_key_table_in(tx, |t| read_rows(t, taken, &self.backend))?;
                }
                Ok(())
            },
        )?;
        Ok(RangeResult {
            kvs,
            count: read.count,
            rev: read.rev,
        })
    }

    /// A page of `range` at a committed revision, for a read that goes through a long
    /// range in steps (KV.RangeStream): at most `limit` keys (at least one), found by
    /// walking the index only that far (the range's total is not counted). Their rows
    /// are read, unless `keys_only`: then the keys come from the index alone, with their
    /// revisions and version and neither value nor lease, as etcd 3.7's fast keys-only
    /// range gives them.
    pub fn range_page(
        &self,
        range: KeyRange<'_>,
        rev: i64,
        limit: usize,
        keys_only: bool,
    ) -> Result<Page> {
        let _gate = self.gate.read().unwrap_or_else(|p| p.into_inner());
        let limit = limit.max(1);
        let (cur, at, found, more, tx) = {
            let idx = self.index_read();
            let cur = self.current_rev();
            let at = check_read_rev(rev, cur, idx.compact_rev)?;
            let mut found: Matches = Vec::new();
            let mut more = false;
            idx.tree.visit(range, at, |k, f| {
                if found.len() == limit {
                    more = true;
                    return false;
                }
                found.push((k.to_vec(), f));
                true
            });
            // Begun under the index lock: the rows match the revisions found.
            let tx = if keys_only || found.is_empty() {
                None
            } else {
                Some(self.backend.begin_read()?)
            };
            (cur, at, found, more, tx)
        };
        let kvs = match tx {
            Some(tx) => self.with_key_table_in(&tx, |t| read_rows(t, &found, &self.backend))?,
            None => found
                .into_iter()
                .map(|(key, f)| KeyValue {
                    key,
                    create_revision: f.created.main,
                    mod_revision: f.modified.main,
                    version: f.version,
                    ..KeyValue::default()
                })
                .collect(),
        };
        Ok(Page {
            kvs,
            more,
            rev: cur,
            at,
        })
    }

    /// Reads `range` at a committed revision as [`Store::range`] does, but hands each of
    /// the first `take` rows to `visit` as stored (an encoded `mvccpb.KeyValue`) instead
    /// of decoding it: a response can carry the bytes without building every key-value.
    ///
    /// A long answer is read by up to `threads` threads at once (the caller's and
    /// scoped ones), each over a consecutive share of at least [`ROWS_PER_THREAD`] rows,
    /// into its own part made by `part`; the parts come back in row order. Each share
    /// has its own read transaction, begun with the lookup (see [`IndexState`]).
    ///
    /// `visit` returning false stops the read: it then ends with
    /// [`MvccError::ReadStopped`].
    pub fn range_encoded<P: Send>(
        &self,
        range: KeyRange<'_>,
        opts: RangeOptions,
        take: usize,
        threads: usize,
        part: impl Fn() -> P + Sync,
        visit: impl Fn(&mut P, &[u8]) -> bool + Sync,
    ) -> Result<(EncodedRange, Vec<P>)> {
        let mut parts = Vec::new();
        let shares = |found: usize| match take.min(found) {
            0 => 0,
            rows => threads.min(rows / ROWS_PER_THREAD).max(1),
        };
        let read = self.read_committed(range, opts, shares, |found, txs| {
            let taken = &found[..take.min(found.len())];
            let read_share = |tx: &ReadTransaction, rows: &[(Vec<u8>, Found)]| -> Result<P> {
                self.with_key_table_in(tx, |table| {
                    let mut p = part();
                    visit_rows(table, rows, &self.backend, |_, row| {
                        match visit(&mut p, row) {
                            true => Ok(()),
                            false => Err(MvccError::ReadStopped),
                        }
                    })?;
                    Ok(p)
                })
            };
            let mut shares = taken.chunks(taken.len().div_ceil(txs.len().max(1)).max(1));
            let mut txs = txs.into_iter();
            let (Some(first_tx), Some(first)) = (txs.next(), shares.next()) else {
                return Ok(());
            };
            if txs.len() == 0 {
                parts.push(read_share(&first_tx, first)?);
                return Ok(());
            }
            let read_share = &read_share;
            std::thread::scope(|s| {
                // A share whose thread cannot be made is read here, after the first.
                let others: Vec<_> = txs
                    .zip(shares)
                    .map(|(tx, rows)| {
                        std::thread::Builder::new()
                            .name("oxcd-range".into())
                            .spawn_scoped(s, move || read_share(&tx, rows))
                            .map_err(|_| rows)
                    })
                    .collect();
                parts.push(read_share(&first_tx, first)?);
                for other in others {
                    parts.push(match other {
                        Ok(handle) => handle
                            .join()
                            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?,
                        Err(rows) => read_share(&first_tx, rows)?,
                    });
                }
                Ok(())
            })
        })?;
        Ok((read, parts))
    }

    /// Looks `range` up at the committed revision and hands `read` the keys found (up
    /// to the limit asked) and `readers(keys found)` read transactions begun with the
    /// lookup, with the gate held so that no snapshot replaces the rows.
    fn read_committed(
        &self,
        range: KeyRange<'_>,
        opts: RangeOptions,
        readers: impl FnOnce(usize) -> usize,
        read: impl FnOnce(&[(Vec<u8>, Found)], Vec<ReadTx>) -> Result<()>,
    ) -> Result<EncodedRange> {
        let _gate = self.gate.read().unwrap_or_else(|p| p.into_inner());
        let (rev, found, count, txs) = self.lookup_and_begin(range, opts, readers)?;
        let out = EncodedRange {
            count,
            rev,
            found: found.len(),
        };
        if !found.is_empty() {
            read(&found, txs)?;
        }
        Ok(out)
    }

    /// etcd's HashKV: CRC-32C over the table name `key` and then every row (revision
    /// key, encoded value) at or below `rev` (0: the current revision), where rows at or
    /// below the compaction revision count only if a compaction at `rev` would keep them.
    /// Same rows and rules as etcd, so the hash equals etcd's for the same history.
    /// Returns (hash, compact revision, revision).
    pub fn hash_kv(&self, rev: i64) -> Result<(u32, i64, i64)> {
        let _gate = self.gate.read().unwrap_or_else(|p| p.into_inner());
        let (compact_rev, rev, keep, tx) = {
            let idx = self.index_read();
            let cur = self.current_rev();
            let rev = check_read_rev(rev, cur, idx.compact_rev)?;
            // Begun under the lock: the rows match the compaction state read (see
            // [`IndexState`]).
            let tx = self.backend.begin_read()?;
            (idx.compact_rev, rev, idx.tree.keep(rev), tx)
        };
        let upper = Revision::new(rev + 1, 0).to_bytes(false);
        let h = self.with_key_table_in(&tx, |table| {
            let mut h = crc32c::crc32c(b"key");
            for row in table
                .range::<&[u8]>(..upper.as_slice())
                .map_err(|e| self.backend.err(e))?
            {
                let (k, v) = row.map_err(|e| self.backend.err(e))?;
                let below_compaction = Revision::from_bytes(k.value()).is_some_and(|(r, _)| {
                    r.main <= compact_rev && !keep.is_empty() && !keep.contains(&r)
                });
                if below_compaction {
                    continue;
                }
                h = crc32c::crc32c_append(h, k.value());
                h = crc32c::crc32c_append(h, v.value());
            }
            Ok(h)
        })?;
        Ok((h, compact_rev, rev))
    }

    /// A hash of the whole applied state (every replicated table, less the raft
    /// position, which members reach at different times), for Maintenance.Hash.
    pub fn hash_all(&self) -> Result<u32> {
        // After the last compaction's rows are gone: until then they depend on this
        // member's progress.
        self.rows
            .wait_finished(self.compact_rev(), std::time::Duration::from_secs(60));
        Ok(self.backend.state_hash()?)
    }

    /// The meta value under `key`, as of the last commit.
    pub fn read_meta(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let tx = self.backend.begin_read()?;
        Ok(Backend::read_meta(&tx, key).map_err(|e| self.backend.err(e))?)
    }

    /// Every meta value whose key starts with `prefix`, in key order.
    pub fn read_meta_prefix(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>> {
        let tx = self.backend.begin_read()?;
        let meta = tx
            .open_table(schema::META)
            .map_err(|e| self.backend.err(e))?;
        Ok(Backend::meta_with_prefix(&meta, prefix).map_err(|e| self.backend.err(e))?)
    }

    /// Every live key that holds a lease, with the lease, as of the last commit: what the
    /// lessor rebuilds its key lists from at start and after a snapshot.
    pub fn leased_keys(&self) -> Result<Vec<(Vec<u8>, i64)>> {
        let _shared = self.gate.read().unwrap_or_else(|p| p.into_inner());
        // Rows come in revision order: the last row of a key is its current state.
        let mut current: std::collections::HashMap<Vec<u8>, i64> = Default::default();
        self.with_key_table(|table| {
            for row in table.iter().map_err(|e| self.backend.err(e))? {
                let (k, v) = row.map_err(|e| self.backend.err(e))?;
                let (rev, tombstone) = row_revision(k.value())?;
                let kv = decode_kv(rev, v.value())?;
                if tombstone || kv.lease == 0 {
                    current.remove(&kv.key);
                } else {
                    current.insert(kv.key, kv.lease);
                }
            }
            Ok(())
        })?;
        let mut out: Vec<_> = current.into_iter().collect();
        out.sort();
        Ok(out)
    }

    /// Runs `read` over the key table in a read transaction of its own.
    fn with_key_table<R>(&self, read: impl FnOnce(&KeyTable) -> Result<R>) -> Result<R> {
        self.with_key_table_in(&*self.backend.begin_read()?, read)
    }

    /// Runs `read` over the key table as `tx` sees it.
    fn with_key_table_in<R>(
        &self,
        tx: &ReadTransaction,
        read: impl FnOnce(&KeyTable) -> Result<R>,
    ) -> Result<R> {
        let table = tx
            .open_table(schema::KEY)
            .map_err(|e| self.backend.err(e))?;
        read(&table)
    }

    /// Starts the MVCC part of an applied batch, writing in `tx`; its events are
    /// recorded only when `record_events` (someone watches).
    pub fn begin_apply<'a>(&'a self, tx: &'a BatchTx<'_>, record_events: bool) -> ApplyBatch<'a> {
        ApplyBatch {
            store: self,
            tx,
            rev: self.current_rev(),
            events: record_events.then(Vec::new),
        }
    }

    /// Runs `f` in a batch of its own, commits it at raft position (`index`, `term`) and
    /// publishes it: for tools, tests and benchmarks that write outside the apply thread.
    pub fn write_batch<T>(
        &self,
        index: u64,
        term: u64,
        durable: bool,
        f: impl FnOnce(&mut ApplyBatch<'_>) -> Result<T>,
    ) -> Result<(T, Written)> {
        let tx = self.backend.begin_batch()?;
        let mut batch = self.begin_apply(&tx, true);
        let out = f(&mut batch)?;
        let written = batch.finish();
        tx.commit(index, term, durable)?;
        self.publish(&written, index);
        Ok((out, written))
    }

    /// Makes a batch's revision visible to readers, once its transaction committed
    /// at raft `index`.
    pub fn publish(&self, written: &Written, index: u64) {
        self.current_rev.store(written.rev, Ordering::Release);
        self.applied.send_replace(index);
        // A compaction in the batch: its rows can go now that it is recorded.
        self.rows.activate_staged();
    }
}

/// Looks `range` up in `idx` as of `cur`: the keys to read (none when only counting)
/// and how many keys the range holds.
fn find(
    idx: &IndexState,
    range: KeyRange<'_>,
    opts: RangeOptions,
    cur: i64,
) -> Result<(Matches, usize)> {
    let at = check_read_rev(opts.rev, cur, idx.compact_rev)?;
    let limit = if opts.count_only { 1 } else { opts.limit };
    let (mut found, count) = idx.tree.range(range, at, limit);
    if opts.count_only {
        found.clear();
    }
    Ok((found, count))
}

fn check_read_rev(asked: i64, cur: i64, compact_rev: i64) -> Result<i64> {
    let at = if asked <= 0 { cur } else { asked };
    if at > cur {
        return Err(MvccError::FutureRev);
    }
    if at < compact_rev {
        return Err(MvccError::Compacted);
    }
    Ok(at)
}

/// What a finished batch wrote: the revision it reached and its events in revision order.
/// [`Store::publish`] makes the revision visible after the transaction commits; only
/// then may the events be handed to watchers.
#[derive(Debug, Default)]
pub struct Written {
    /// The store's revision after the batch.
    pub rev: i64,
    /// Every change of the batch, in revision order (deletes carry the key and the
    /// revision of the delete); `None` when the batch did not record them.
    pub events: Option<Vec<Event>>,
}

/// The MVCC writes of one applied batch, in the batch's backend transaction.
pub struct ApplyBatch<'a> {
    store: &'a Store,
    tx: &'a BatchTx<'a>,
    rev: i64,
    events: Option<Vec<Event>>,
}

impl<'a> ApplyBatch<'a> {
    /// The revision after the requests applied so far in this batch.
    pub fn rev(&self) -> i64 {
        self.rev
    }

    /// Starts one write request: all its changes share one main revision.
    pub fn txn(&mut self) -> Result<TxnWrite<'_>> {
        let table = self.tx.open(schema::KEY)?;
        let begin_rev = self.rev;
        Ok(TxnWrite {
            store: self.store,
            table,
            rev: &mut self.rev,
            events: self.events.as_mut(),
            begin_rev,
            changes: 0,
            tally: Cell::new(Tally::default()),
        })
    }

    /// Compacts history before `rev`: later reads below it fail with `Compacted`. The
    /// index forgets the revisions below `rev` now and `scheduledCompactRev` is written in
    /// the batch; the rows are deleted in the background once the batch is published
    /// (see [`row_deleter`]).
    pub fn compact(&mut self, rev: i64) -> Result<()> {
        let keep = {
            let mut idx = self.store.index_write();
            if rev <= idx.compact_rev {
                return Err(MvccError::Compacted);
            }
            if rev > self.rev {
                return Err(MvccError::FutureRev);
            }
            idx.compact_rev = rev;
            let started = std::time::Instant::now();
            let keep = idx.tree.compact(rev);
            self.store.compactions.index_paused(started.elapsed());
            keep
        };
        let rev_bytes = Revision::new(rev, 0).to_bytes(false);
        self.tx
            .put_meta(schema::META_SCHEDULED_COMPACT, rev_bytes.as_slice())?;
        self.store.rows.stage(Job { rev, keep });
        // etcd reads a key after compacting, for the revision it answers with (v3.6.14
        // server/etcdserver/apply/apply.go Compaction): a Range its metrics count.
        self.store.counts.add_range();
        Ok(())
    }

    /// Ends the batch: what it wrote, for [`Store::publish`] after the commit.
    pub fn finish(self) -> Written {
        Written {
            rev: self.rev,
            events: self.events,
        }
    }
}

/// One write request in progress: reads see its own earlier changes.
pub struct TxnWrite<'b> {
    store: &'b Store,
    table: Table<'b, &'static [u8], &'static [u8]>,
    rev: &'b mut i64,
    events: Option<&'b mut Vec<Event>>,
    begin_rev: i64,
    changes: i64,
    /// What etcd's transaction would have counted so far ([`counts`]).
    tally: Cell<Tally>,
}

impl TxnWrite<'_> {
    /// Tallies a Range call where etcd makes one (see [`counts`]).
    pub fn count_range(&self) {
        let mut t = self.tally.get();
        t.ranges += 1;
        self.tally.set(t);
    }

    /// Adds what was tallied so far to the store's counts, as etcd does when one of its
    /// transactions ends (a Txn request is two of etcd's: its compares', then its
    /// writes'); the write goes on.
    pub fn end_counted(&self) {
        self.store.counts.add(self.tally.take());
    }

    fn read_at(&self) -> i64 {
        if self.changes > 0 {
            self.begin_rev + 1
        } else {
            self.begin_rev
        }
    }

    /// The revision reads in this request see.
    pub fn rev(&self) -> i64 {
        self.read_at()
    }

    /// Reads `range` as of this request so far.
    pub fn range(&self, range: KeyRange<'_>, opts: RangeOptions) -> Result<RangeResult> {
        let rev = self.read_at();
        let (found, count) = self.store.lookup(range, opts, rev)?;
        let kvs = read_rows(&self.table, &found, &self.store.backend)?;
        Ok(RangeResult { kvs, count, rev })
    }

    /// The key's current value's metadata in this request, if live.
    pub fn get(&self, key: &[u8]) -> Option<Found> {
        self.store.index_read().tree.get(key, self.read_at())
    }

    /// Puts `key`; returns the revision written.
    pub fn put(&mut self, key: &[u8], value: &[u8], lease: i64) -> Result<Revision> {
        let main = self.begin_rev + 1;
        let rev = Revision::new(main, self.changes);
        let mut idx = self.store.index_write();
        let prior = idx.tree.get(key, main);
        let kv = KeyValue {
            key: key.to_vec(),
            create_revision: prior.map(|f| f.created.main).unwrap_or(main),
            mod_revision: main,
            version: prior.map(|f| f.version).unwrap_or(0) + 1,
            value: value.to_vec(),
            lease,
        };
        let bytes = kv.encode_to_vec();
        self.table
            .insert(rev.to_bytes(false).as_slice(), bytes.as_slice())
            .map_err(|e| self.store.backend.err(e))?;
        idx.tree.put(key, rev);
        self.changes += 1;
        let mut t = self.tally.get();
        t.puts += 1;
        t.put_bytes += (key.len() + value.len()) as u64;
        self.tally.set(t);
        if let Some(events) = self.events.as_deref_mut() {
            events.push(put_event(kv));
        }
        Ok(rev)
    }

    /// Deletes the keys live in `range`; returns the deleted keys.
    pub fn delete_range(&mut self, range: KeyRange<'_>) -> Result<Vec<Vec<u8>>> {
        let mut t = self.tally.get();
        t.deletes += 1;
        self.tally.set(t);
        let main = self.begin_rev + 1;
        let mut idx = self.store.index_write();
        let (live, _) = idx.tree.range(range, main, 0);
        let mut deleted = Vec::with_capacity(live.len());
        for (key, _) in live {
            let rev = Revision::new(main, self.changes);
            let tomb = KeyValue {
                key: key.clone(),
                ..Default::default()
            }
            .encode_to_vec();
            self.table
                .insert(rev.to_bytes(true).as_slice(), tomb.as_slice())
                .map_err(|e| self.store.backend.err(e))?;
            idx.tree.tombstone(&key, rev);
            self.changes += 1;
            if let Some(events) = self.events.as_deref_mut() {
                events.push(delete_event(key.clone(), main));
            }
            deleted.push(key);
        }
        Ok(deleted)
    }

    /// Ends the request; returns the revision it produced (the prior one if it changed nothing).
    pub fn end(self) -> i64 {
        self.end_counted();
        if self.changes > 0 {
            *self.rev = self.begin_rev + 1;
        }
        *self.rev
    }
}

pub mod compaction_stats;
pub mod counts;
mod history;
mod row_deleter;

pub use history::History;

#[cfg(test)]
mod tests;
