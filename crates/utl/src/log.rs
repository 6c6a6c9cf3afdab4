//! etcdutl's log lines on stderr: zap's console encoding (time, level, caller, message,
//! then the fields as JSON), so operators and scripts see the lines they know.

use std::io::Write;

/// A log field's value.
pub enum Field<'a> {
    /// A string.
    Str(&'a str),
    /// A number.
    Num(u64),
    /// A list of strings.
    List(&'a [String]),
}

fn json(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// Writes one `info` line to stderr: `<time>\tinfo\t<caller>\t<msg>\t{"k": v, ...}`.
pub fn info(caller: &str, msg: &str, fields: &[(&str, Field<'_>)]) {
    line("info", caller, msg, fields);
}

/// Writes one `warn` line to stderr, as [`info`].
pub fn warn(caller: &str, msg: &str, fields: &[(&str, Field<'_>)]) {
    line("warn", caller, msg, fields);
}

/// Writes one `error` line to stderr, as [`info`].
pub fn error(caller: &str, msg: &str, fields: &[(&str, Field<'_>)]) {
    line("error", caller, msg, fields);
}

fn line(level: &str, caller: &str, msg: &str, fields: &[(&str, Field<'_>)]) {
    let fields: Vec<String> = fields
        .iter()
        .map(|(k, v)| {
            let v = match v {
                Field::Str(s) => json(s),
                Field::Num(n) => n.to_string(),
                Field::List(l) => {
                    let items: Vec<String> = l.iter().map(|s| json(s)).collect();
                    format!("[{}]", items.join(", "))
                }
            };
            format!("{}: {v}", json(k))
        })
        .collect();
    let time = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ");
    let mut out = format!("{time}\t{level}\t{caller}\t{msg}");
    if !fields.is_empty() {
        out.push_str(&format!("\t{{{}}}", fields.join(", ")));
    }
    let _ = writeln!(std::io::stderr(), "{out}");
}
