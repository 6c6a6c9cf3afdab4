//! The physical half of a compaction: deleting the key rows a compaction made
//! unreachable, on a thread of its own, in small transactions between the apply loop's.
//!
//! A compaction is applied in two steps, as etcd applies it. In the apply batch, the
//! logical step: the index forgets the revisions below the compaction revision (reads
//! and watches below it are refused from then on) and `scheduledCompactRev` is written.
//! Here, once that batch committed, the physical step: the rows below the compaction
//! revision that the index no longer holds are deleted, at most [`SCAN_ROWS`] rows looked
//! at per transaction with a pause of [`PAUSE`] after each, and the last transaction
//! writes `finishedCompactRev`. Writes go on meanwhile: deleting 1.5 million revisions in
//! the apply loop held them for 7 seconds. (etcd deletes 1,000 revisions per batch with
//! 10 ms pauses.)
//!
//! Invariants:
//! - Only unreachable rows go: main revision below the job's (rows at it stay, as in
//!   etcd) and not in the revisions the index kept. No read looks for them: reads and
//!   watches below the compaction revision are refused, HashKV skips them.
//! - Only the newest job matters: the index forgets at a later compaction every revision
//!   it forgot at an earlier one, so the later job deletes every row the earlier one
//!   would. A new job starts again from the first row.
//! - A job starts only after the batch that scheduled it committed, so no row is gone
//!   before the compaction is recorded; rows go in revision order.
//! - A member stopped mid-job finishes it at its next start (scheduled above finished).
//! - Until a job ends, the key rows and `finishedCompactRev` depend on this member's
//!   progress: the state hash is not compared then
//!   ([`Backend::state_hash_at_index`]).
//! - Each transaction holds [`Backend::hold_row_deletions`]: a defragmentation or a
//!   snapshot install, which hold it for their whole run, never see a row vanish.

use std::collections::HashSet;
use std::ops::Bound;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use oxcd_storage::backend::Backend;
use oxcd_storage::backend::redb::ReadableTable;
use oxcd_storage::schema;

use super::compaction_stats::CompactionStats;
use crate::revision::Revision;

/// Key rows looked at per transaction at most.
const SCAN_ROWS: usize = 10_000;
/// The pause after each transaction, so the apply loop's transactions go first.
const PAUSE: Duration = Duration::from_millis(10);
/// The pause after a failed transaction (a full disk, say) before trying again.
const RETRY: Duration = Duration::from_secs(1);

/// Rows to delete: those below `rev` whose revision is not in `keep`.
#[derive(Debug)]
pub(crate) struct Job {
    pub rev: i64,
    pub keep: HashSet<Revision>,
}

#[derive(Debug, Default)]
struct State {
    /// Scheduled by an apply batch not yet committed.
    staged: Option<Job>,
    /// The job being done.
    job: Option<Arc<Job>>,
    /// Bumped with every new job: a transaction's outcome counts only for its job.
    generation: u64,
    /// Where the job's next transaction starts (None: at the first row).
    cursor: Option<Vec<u8>>,
    /// When the job began.
    began: Option<Instant>,
    /// The newest compaction whose rows are all deleted.
    finished: i64,
    stop: bool,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    backend: Arc<Backend>,
    stats: Arc<CompactionStats>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The background deleter of one store; stopped (and joined) when dropped.
#[derive(Debug)]
pub(crate) struct RowDeleter {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl RowDeleter {
    /// Starts the deleter of `backend`, whose rows below `finished` are already gone,
    /// timing its work into `stats`.
    pub fn start(backend: Arc<Backend>, finished: i64, stats: Arc<CompactionStats>) -> RowDeleter {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                finished,
                ..State::default()
            }),
            changed: Condvar::new(),
            backend,
            stats,
        });
        let worker = shared.clone();
        let thread = std::thread::Builder::new()
            .name("compaction-rows".into())
            .spawn(move || run(&worker))
            .ok();
        if thread.is_none() {
            tracing::error!(
                "could not start the compaction's row deleter; rows stay until restart"
            );
        }
        RowDeleter { shared, thread }
    }

    /// Keeps `job` until [`RowDeleter::activate_staged`] (its batch committed).
    pub fn stage(&self, job: Job) {
        self.shared.state().staged = Some(job);
    }

    /// Starts the staged job, if any.
    pub fn activate_staged(&self) {
        let mut st = self.shared.state();
        if let Some(job) = st.staged.take() {
            begin(&mut st, job);
            self.shared.changed.notify_all();
        }
    }

    /// Forgets every job and starts `job` if given, over a state whose rows below
    /// `finished` are gone (after a snapshot install; the caller holds the row
    /// deletions, so no transaction of the old job is under way).
    pub fn reset(&self, finished: i64, job: Option<Job>) {
        let mut st = self.shared.state();
        st.staged = None;
        st.job = None;
        st.cursor = None;
        st.generation += 1;
        st.finished = finished;
        if let Some(job) = job {
            begin(&mut st, job);
        }
        self.shared.changed.notify_all();
    }

    /// Waits until the rows of the compaction at `rev` are deleted, at most `timeout`;
    /// whether they are.
    pub fn wait_finished(&self, rev: i64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.state();
        while st.finished < rev && !st.stop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            st = self
                .shared
                .changed
                .wait_timeout(st, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        st.finished >= rev
    }
}

impl Drop for RowDeleter {
    fn drop(&mut self) {
        self.shared.state().stop = true;
        self.shared.changed.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn begin(st: &mut State, job: Job) {
    st.job = Some(Arc::new(job));
    st.cursor = None;
    st.began = Some(Instant::now());
    st.generation += 1;
}

/// The deleter's loop: one transaction of the current job at a time.
fn run(shared: &Shared) {
    loop {
        let (job, cursor, generation) = {
            let mut st = shared.state();
            while st.job.is_none() && !st.stop {
                st = shared
                    .changed
                    .wait(st)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            match &st.job {
                Some(job) if !st.stop => (job.clone(), st.cursor.clone(), st.generation),
                _ => return,
            }
        };
        let outcome = {
            let _held = shared.backend.hold_row_deletions();
            // A reset (snapshot install) waits for the hold: check the job is still ours.
            if shared.state().generation != generation {
                continue;
            }
            let started = Instant::now();
            let outcome = delete_some(&shared.backend, &job, cursor.as_deref());
            if let Ok((_, deleted)) = &outcome {
                shared.stats.db_paused(started.elapsed(), *deleted);
            }
            outcome.map(|(next, _)| next)
        };
        let pause = match outcome {
            Ok(next) => {
                let mut st = shared.state();
                if st.generation == generation {
                    match next {
                        Some(cursor) => st.cursor = Some(cursor),
                        None => {
                            st.job = None;
                            st.cursor = None;
                            st.finished = st.finished.max(job.rev);
                            if let Some(began) = st.began.take() {
                                shared.stats.finished(began.elapsed());
                            }
                            shared.changed.notify_all();
                            tracing::info!(
                                compact_revision = job.rev,
                                "finished scheduled compaction"
                            );
                        }
                    }
                }
                PAUSE
            }
            Err(e) => {
                tracing::warn!(compact_revision = job.rev, error = %e, "failed to delete compacted rows; retrying");
                RETRY
            }
        };
        let st = shared.state();
        if st.stop {
            return;
        }
        drop(
            shared
                .changed
                .wait_timeout_while(st, pause, |st| !st.stop)
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
    }
}

/// One transaction of `job` from after `cursor`: the next cursor, or None when the job
/// is done (and `finishedCompactRev` written); and the rows it deleted.
fn delete_some(
    backend: &Backend,
    job: &Job,
    cursor: Option<&[u8]>,
) -> oxcd_storage::Result<(Option<Vec<u8>>, u64)> {
    let tx = backend.begin_write()?;
    let upper = Revision::new(job.rev, 0).to_bytes(false);
    let lower = cursor.map_or(Bound::Unbounded, Bound::Excluded);
    let mut last = None;
    let mut scanned = 0;
    let deleted;
    {
        let mut table = tx.open_table(schema::KEY).map_err(|e| backend.err(e))?;
        let mut doomed = Vec::new();
        for row in table
            .range::<&[u8]>((lower, Bound::Excluded(upper.as_slice())))
            .map_err(|e| backend.err(e))?
        {
            let (k, _) = row.map_err(|e| backend.err(e))?;
            let k = k.value();
            let kept = Revision::from_bytes(k).is_some_and(|(r, _)| job.keep.contains(&r));
            if !kept {
                doomed.push(k.to_vec());
            }
            last = Some(k.to_vec());
            scanned += 1;
            if scanned == SCAN_ROWS {
                break;
            }
        }
        deleted = doomed.len() as u64;
        for k in doomed {
            table.remove(k.as_slice()).map_err(|e| backend.err(e))?;
        }
    }
    let done = scanned < SCAN_ROWS;
    if done {
        let rev = Revision::new(job.rev, 0).to_bytes(false);
        tx.open_table(schema::META)
            .map_err(|e| backend.err(e))?
            .insert(schema::META_FINISHED_COMPACT, rev.as_slice())
            .map_err(|e| backend.err(e))?;
    }
    // The job's last transaction commits durably: once a compaction is finished (what a
    // physical Compact waits for), the file holds it, whenever the member stops next
    // (offline tools read the file; a restart would otherwise redo the deletions).
    backend.commit(tx, done)?;
    Ok((if done { None } else { last }, deleted))
}
