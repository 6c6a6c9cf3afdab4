//! A slog drain that forwards raft-rs's log lines to `tracing`.

use slog::{Drain, Level, OwnedKVList, Record};

/// Forwards slog records to tracing under the `raft` target.
pub struct TracingDrain;

impl Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &Record<'_>, values: &OwnedKVList) -> Result<(), slog::Never> {
        let mut kv = KvText(String::new());
        let _ = slog::KV::serialize(&record.kv(), record, &mut kv);
        let _ = slog::KV::serialize(values, record, &mut kv);
        match record.level() {
            Level::Critical | Level::Error => {
                tracing::error!(target: "raft", "{}{}", record.msg(), kv.0)
            }
            Level::Warning => tracing::warn!(target: "raft", "{}{}", record.msg(), kv.0),
            Level::Info => tracing::info!(target: "raft", "{}{}", record.msg(), kv.0),
            Level::Debug | Level::Trace => {
                tracing::debug!(target: "raft", "{}{}", record.msg(), kv.0)
            }
        }
        Ok(())
    }
}

struct KvText(String);

impl slog::Serializer for KvText {
    fn emit_arguments(&mut self, key: slog::Key, val: &std::fmt::Arguments<'_>) -> slog::Result {
        use std::fmt::Write;
        let _ = write!(self.0, " {key}={val}");
        Ok(())
    }
}

/// A logger for raft-rs that writes through tracing.
pub fn raft_logger() -> slog::Logger {
    slog::Logger::root(TracingDrain.fuse(), slog::o!())
}
