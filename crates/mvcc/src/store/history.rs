//! Reading the change history back: the events of a range of revisions, straight from the
//! backend's rows (which are keyed by revision), for watchers that start in the past or
//! fell behind the live feed.
//!
//! Invariants: a chunk always ends on a whole main revision, so every revision's events
//! reach a watcher together; it holds at most [`CHUNK_REVISIONS`] revisions, as etcd's
//! catch-up, and about `max_bytes` of encoded events (more only when one revision is
//! larger), so a response stays within what clients accept (4 MiB by default for gRPC
//! clients other than Go's) even with previous values attached; revisions below the
//! compaction revision are refused rather than answered with a partial history.

use oxcd_api::mvccpb::Event;
use oxcd_storage::schema;

use super::{Store, decode_kv, delete_event, put_event, row_revision};
use crate::revision::Revision;
use crate::{MvccError, Result};

/// Revisions per chunk at most (etcd's watchers catch up 1,000 revisions at a time).
pub const CHUNK_REVISIONS: i64 = 1000;

/// What an event adds to a response beside its key and value: the field tags, lengths
/// and revisions (a bound, not an exact count).
const EVENT_OVERHEAD: usize = 48;

/// One chunk of history.
#[derive(Debug, Default)]
pub struct History {
    /// Events in revision order.
    pub events: Vec<Event>,
    /// The last revision this chunk covers: every event at or below it (and at or above
    /// the asked start) is in `events`.
    pub through: i64,
}

impl Store {
    /// The events of revisions `from..=to`, stopping after [`CHUNK_REVISIONS`] revisions
    /// or after the revision at which the chunk reached `max_bytes` of encoded events. Fails with `Compacted` when `from`
    /// is below the compaction revision (as etcd, a watch from the compaction revision
    /// itself is served).
    pub fn history(&self, from: i64, to: i64, max_bytes: usize) -> Result<History> {
        let _gate = self.gate.read().unwrap_or_else(|p| p.into_inner());
        let tx = {
            let idx = self.index_read();
            if from < idx.compact_rev {
                return Err(MvccError::Compacted);
            }
            // Opened while the compaction revision is known to be at most `from`: a
            // compaction that starts later deletes rows only in a later commit.
            self.backend.begin_read()?
        };
        let mut out = History {
            events: Vec::new(),
            through: to,
        };
        if from > to {
            out.through = from - 1;
            return Ok(out);
        }
        let table = tx
            .open_table(schema::KEY)
            .map_err(|e| self.backend.err(e))?;
        let lower = Revision::new(from, 0).to_bytes(false);
        let upper = Revision::new(to + 1, 0).to_bytes(false);
        let mut bytes = 0usize;
        for row in table
            .range::<&[u8]>(lower.as_slice()..upper.as_slice())
            .map_err(|e| self.backend.err(e))?
        {
            let (k, v) = row.map_err(|e| self.backend.err(e))?;
            let (rev, tombstone) = row_revision(k.value())?;
            let full = bytes >= max_bytes || rev.main - from >= CHUNK_REVISIONS;
            if full && out.events.last().and_then(mod_rev) != Some(rev.main) {
                out.through = rev.main - 1;
                break;
            }
            let kv = decode_kv(rev, v.value())?;
            bytes += kv.key.len() + kv.value.len() + EVENT_OVERHEAD;
            out.events.push(if tombstone {
                delete_event(kv.key, rev.main)
            } else {
                put_event(kv)
            });
        }
        Ok(out)
    }
}

fn mod_rev(e: &Event) -> Option<i64> {
    e.kv.as_ref().map(|kv| kv.mod_revision)
}
