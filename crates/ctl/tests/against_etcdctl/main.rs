//! oxcdctl compared with etcdctl 3.4, in one test binary (one link of the server and the
//! clients instead of one per file): `parity` runs both CLIs against oxcd members,
//! `vs_etcd` runs both against real etcd 3.4 servers; `etcdctl36` checks what oxcdctl
//! has of etcdctl 3.6 alone.

mod coord;
mod etcdctl36;
mod parity;
mod snapshot;
mod vs_etcd;

use std::process::{Child, Output};
use std::time::{Duration, Instant};

/// Waits up to `limit` for a CLI to exit, killing it after: its exit code (`None` when
/// it was stopped) and what it printed.
fn wait_or_kill(mut child: Child, limit: Duration) -> (Option<i32>, Output) {
    let deadline = Instant::now() + limit;
    let mut code = None;
    while Instant::now() < deadline {
        if let Some(st) = child.try_wait().expect("wait") {
            code = st.code();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if code.is_none() {
        let _ = child.kill();
    }
    (code, child.wait_with_output().expect("output"))
}

/// A CLI's stderr without clientv3's JSON log lines.
fn without_json_logs(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter(|l| !l.starts_with('{'))
        .map(|l| format!("{l}\n"))
        .collect()
}
