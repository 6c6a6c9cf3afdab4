//! Logging set up as etcd's `--logger zap`: one JSON object per line with `level`, `ts`,
//! `caller`, `msg` and the event's fields, on stderr (or stdout) — so scripts that parse
//! etcd's logs, or wait for "ready to serve client requests", keep working.

use std::fmt::Write as _;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Formats events as etcd's zap JSON lines.
pub struct ZapJson;

struct Fields {
    msg: String,
    rest: String,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        if field.name() == "message" {
            self.msg = text;
        } else {
            let _ = write!(self.rest, ",{}:{}", json_str(field.name()), json_str(&text));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.msg = value.to_string();
        } else {
            let _ = write!(self.rest, ",{}:{}", json_str(field.name()), json_str(value));
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        let _ = write!(self.rest, ",{}:{value}", json_str(field.name()));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        let _ = write!(self.rest, ",{}:{value}", json_str(field.name()));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        let _ = write!(self.rest, ",{}:{value}", json_str(field.name()));
    }
}

fn json_str(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

fn level_name(l: &Level) -> &'static str {
    match *l {
        Level::ERROR => "error",
        Level::WARN => "warn",
        Level::INFO => "info",
        Level::DEBUG => "debug",
        Level::TRACE => "debug",
    }
}

/// The current time as RFC 3339 with milliseconds, UTC (zap's ISO8601 encoder).
fn now_rfc3339() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

impl<S, N> FormatEvent<S, N> for ZapJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let meta = event.metadata();
        let mut f = Fields {
            msg: String::new(),
            rest: String::new(),
        };
        event.record(&mut f);
        let caller = match (meta.file(), meta.line()) {
            (Some(file), Some(line)) => {
                format!("{}:{line}", file.rsplit("/src/").next().unwrap_or(file))
            }
            _ => meta.target().to_string(),
        };
        writeln!(
            w,
            "{{\"level\":\"{}\",\"ts\":\"{}\",\"caller\":{},\"msg\":{}{}}}",
            level_name(meta.level()),
            now_rfc3339(),
            json_str(&caller),
            json_str(&f.msg),
            f.rest
        )
    }
}

/// Where logs go (`--log-outputs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// stderr (etcd's `default` and `stderr`).
    Stderr,
    /// stdout.
    Stdout,
}

/// Installs the global logger: etcd's zap JSON at `level` (`debug`, `info`, `warn`,
/// `error`, `panic`, `fatal`), unless `RUST_LOG` is set, which wins.
pub fn init(level: &str, output: Output) {
    let level = match level {
        "debug" => "debug",
        "warn" => "warn",
        "error" | "dpanic" | "panic" | "fatal" => "error",
        _ => "info",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!("{level},h2=warn,hyper=warn,tower=warn"))
    });
    let builder = tracing_subscriber::fmt()
        .event_format(ZapJson)
        .with_env_filter(filter);
    let _ = match output {
        Output::Stderr => builder.with_writer(std::io::stderr).try_init(),
        Output::Stdout => builder.with_writer(std::io::stdout).try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_shape() {
        let ts = now_rfc3339();
        assert_eq!(ts.len(), "2026-11-22T12:00:06.499Z".len(), "{ts}");
        assert!(ts.starts_with("20") && ts.ends_with('Z'), "{ts}");
    }
}
