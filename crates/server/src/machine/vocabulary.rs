//! The vocabulary a member's raft log is written in: oxcd's own entries
//! (`oxcdpb.InternalRequest`, conf changes with oxcd's context), or etcd 3.5's
//! (`InternalRaftRequest` and v2 requests, conf changes with etcd's type numbers and
//! JSON contexts) while etcd members are, or may become, part of the cluster (issue 35).
//! The two cannot be told apart by their bytes, so the log says which one it speaks:
//! a cluster starts in oxcd's (or in etcd's, when it began as an etcd cluster), and a
//! switch entry (`oxcd_raft::node::format`) names the vocabulary of every entry after
//! it. The leader appends switches as the cluster version says
//! ([`crate::domains::version::vocabulary`]); the raft core keeps proposals written
//! before a switch from landing after it.
//!
//! The vocabulary is part of the applied state: recorded in the backend
//! (`meta/oxcd_log_vocabulary`) in the transaction that applies the switch, carried by
//! snapshots, and published to the parts that behave differently in each
//! ([`LiveVocabulary`]: proposers, leases, the peer transport and service).
//!
//! Invariants: every member reads each entry in the vocabulary it was written in; an
//! etcd member never receives an entry in oxcd's vocabulary (nothing at or below the
//! last switch to etcd's: the log is compacted past it and the transport drops it).

use std::sync::Arc;

use oxcd_mvcc::{MvccError, Store};
use oxcd_storage::StorageError;
use oxcd_storage::backend::Backend;
use oxcd_storage::schema::META_LOG_VOCABULARY;
use tokio::sync::watch;

/// The vocabulary of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Vocabulary {
    /// oxcd's own entries.
    #[default]
    Oxcd,
    /// etcd 3.5's entries.
    Etcd,
}

impl Vocabulary {
    /// The log format raft knows it by.
    pub fn format(self) -> u8 {
        match self {
            Vocabulary::Oxcd => 1,
            Vocabulary::Etcd => 2,
        }
    }

    /// The vocabulary of raft's log format `format`.
    pub fn of_format(format: u8) -> Option<Vocabulary> {
        match format {
            1 => Some(Vocabulary::Oxcd),
            2 => Some(Vocabulary::Etcd),
            _ => None,
        }
    }

    /// Its name in the recorded form and in metrics.
    pub fn name(self) -> &'static str {
        match self {
            Vocabulary::Oxcd => "oxcd",
            Vocabulary::Etcd => "etcd",
        }
    }
}

/// The vocabulary of the log after the applied index, and where it began.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LogVocabulary {
    /// The vocabulary.
    pub vocabulary: Vocabulary,
    /// The index of the switch entry it began at (0: the log began in it).
    pub since: u64,
}

/// Why the recorded vocabulary cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum VocabularyError {
    /// The backend failed.
    #[error(transparent)]
    Backend(#[from] MvccError),
    /// It names none.
    #[error("meta/{META_LOG_VOCABULARY} holds {0:?}, which names no log vocabulary")]
    Unknown(String),
}

impl LogVocabulary {
    /// A log that began in `vocabulary`.
    pub fn from_start(vocabulary: Vocabulary) -> LogVocabulary {
        LogVocabulary {
            vocabulary,
            since: 0,
        }
    }

    /// The vocabulary `store` recorded (oxcd's from the start when none was).
    pub fn of(store: &Store) -> Result<LogVocabulary, VocabularyError> {
        let recorded = store.read_meta(META_LOG_VOCABULARY)?;
        Self::parse(recorded.as_deref())
    }

    /// Reads the recorded form: absent (oxcd's from the start), `etcd` (etcd's from the
    /// start), or `<name>@<index>` (since the switch at that index).
    pub fn parse(recorded: Option<&[u8]>) -> Result<LogVocabulary, VocabularyError> {
        let Some(bytes) = recorded else {
            return Ok(LogVocabulary::default());
        };
        let unknown = || VocabularyError::Unknown(String::from_utf8_lossy(bytes).into_owned());
        let text = std::str::from_utf8(bytes).map_err(|_| unknown())?;
        let (name, since) = match text.split_once('@') {
            Some((name, index)) => (name, index.parse().map_err(|_| unknown())?),
            None => (text, 0),
        };
        let vocabulary = match name {
            "oxcd" => Vocabulary::Oxcd,
            "etcd" => Vocabulary::Etcd,
            _ => return Err(unknown()),
        };
        Ok(LogVocabulary { vocabulary, since })
    }

    /// The recorded form ([`LogVocabulary::parse`]; None: nothing recorded).
    pub fn recorded(self) -> Option<Vec<u8>> {
        match (self.vocabulary, self.since) {
            (Vocabulary::Oxcd, 0) => None,
            (v, 0) => Some(v.name().as_bytes().to_vec()),
            (v, since) => Some(format!("{}@{since}", v.name()).into_bytes()),
        }
    }

    /// Records it in `backend` (outside the apply path: at bootstrap, or in a backend
    /// made from etcd's).
    pub fn record(self, backend: &Backend) -> Result<(), StorageError> {
        backend.set_local_meta(META_LOG_VOCABULARY, self.recorded().as_deref())
    }
}

/// The log's vocabulary as this member has applied it, for the parts that act on it;
/// cheap to clone. Set only by the apply thread.
#[derive(Clone)]
pub struct LiveVocabulary(Arc<watch::Sender<LogVocabulary>>);

impl std::fmt::Debug for LiveVocabulary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LiveVocabulary").field(&self.log()).finish()
    }
}

impl LiveVocabulary {
    /// Starts at `now`.
    pub fn new(now: LogVocabulary) -> LiveVocabulary {
        LiveVocabulary(Arc::new(watch::Sender::new(now)))
    }

    /// The vocabulary now.
    pub fn get(&self) -> Vocabulary {
        self.0.borrow().vocabulary
    }

    /// The vocabulary now and where it began.
    pub fn log(&self) -> LogVocabulary {
        *self.0.borrow()
    }

    /// Follows it.
    pub fn subscribe(&self) -> watch::Receiver<LogVocabulary> {
        self.0.subscribe()
    }

    /// Publishes what the apply thread applied.
    pub fn set(&self, now: LogVocabulary) {
        self.0.send_if_modified(|v| {
            let changed = *v != now;
            *v = now;
            changed
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_forms_read_back() {
        for v in [
            LogVocabulary::default(),
            LogVocabulary::from_start(Vocabulary::Etcd),
            LogVocabulary {
                vocabulary: Vocabulary::Etcd,
                since: 812,
            },
            LogVocabulary {
                vocabulary: Vocabulary::Oxcd,
                since: 9,
            },
        ] {
            assert_eq!(LogVocabulary::parse(v.recorded().as_deref()).ok(), Some(v));
        }
        assert_eq!(
            LogVocabulary::parse(Some(b"etcd")).ok(),
            Some(LogVocabulary::from_start(Vocabulary::Etcd))
        );
        assert!(LogVocabulary::parse(Some(b"klingon")).is_err());
        assert!(LogVocabulary::parse(Some(b"etcd@x")).is_err());
    }

    #[test]
    fn formats_name_vocabularies() {
        for v in [Vocabulary::Oxcd, Vocabulary::Etcd] {
            assert_eq!(Vocabulary::of_format(v.format()), Some(v));
        }
        assert_eq!(Vocabulary::of_format(0), None);
    }
}
