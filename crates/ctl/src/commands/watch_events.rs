//! What the plain `watch` and `watch -i` share: the watch flags, and how one watch
//! response is shown, as etcdctl 3.4 shows it (printed, with the command given after
//! `--` run per event).

use std::process::Stdio;

use oxcd_api::etcdserverpb::WatchResponse;

use crate::args::{Spec, boolean, int64};
use crate::fail::{Fail, exit};
use crate::output::Printer;
use crate::output::simple::event_type;

/// `watch`'s flags, which each `watch -i` line is parsed with too.
pub(super) const FLAGS: &[Spec] = &[
    boolean("interactive", "Interactive mode").short('i'),
    boolean("prefix", "Watch on a prefix if prefix is set"),
    int64("rev", "Revision to start watching"),
    boolean(
        "prev-kv",
        "get the previous key-value pair before the event happens",
    ),
    boolean(
        "progress-notify",
        "get periodic watch progress notification from server",
    ),
];

/// etcd's text for a compacted start revision.
const COMPACTED: &str = "etcdserver: mvcc: required revision has been compacted";

/// Prints one response as etcdctl does and runs `exec` per event; returns whether the
/// watch was canceled.
pub(super) fn show(printer: &Printer, resp: &WatchResponse, exec: &[String]) -> Result<bool, Fail> {
    // clientv3 keeps creation notices to itself.
    if resp.created && !resp.canceled {
        return Ok(false);
    }
    let canceled = resp.canceled || resp.compact_revision != 0;
    if canceled {
        let reason = if resp.compact_revision != 0 {
            COMPACTED.to_string()
        } else {
            resp.cancel_reason.clone()
        };
        eprintln!("watch was canceled ({reason})");
    }
    let rev = resp.header.as_ref().map_or(0, |h| h.revision);
    if resp.events.is_empty() && !canceled && rev != 0 {
        println!("progress notify: {rev}");
    }
    printer
        .watch(resp)
        .map_err(|e| Fail::new(exit::BAD_FEATURE, e))?
        .write();
    if !exec.is_empty() {
        for e in &resp.events {
            let Some(kv) = &e.kv else { continue };
            let status = std::process::Command::new(&exec[0])
                .args(&exec[1..])
                .env("ETCD_WATCH_REVISION", rev.to_string())
                .env(
                    "ETCD_WATCH_EVENT_TYPE",
                    oxcd_go::quote::quote_str(event_type(e.r#type)),
                )
                .env("ETCD_WATCH_KEY", oxcd_go::quote::quote(&kv.key))
                .env("ETCD_WATCH_VALUE", oxcd_go::quote::quote(&kv.value))
                .stdin(Stdio::null())
                .status();
            let failed = match status {
                Ok(st) if st.success() => None,
                Ok(st) => Some(match st.code() {
                    Some(c) => format!("exit status {c}"),
                    None => "signal: killed".to_string(),
                }),
                Err(err) => Some(err.to_string()),
            };
            if let Some(err) = failed {
                let args: Vec<String> = exec.iter().map(|a| oxcd_go::quote::quote_str(a)).collect();
                eprintln!("command [{}] error ({err})", args.join(" "));
                std::process::exit(1);
            }
        }
    }
    Ok(canceled)
}
