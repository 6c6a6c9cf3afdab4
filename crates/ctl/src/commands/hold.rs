//! What `lock` and `elect` share, as etcdctl 3.4 runs them on clientv3's concurrency
//! sessions: a session lease kept alive in the background, the interrupt (SIGINT or
//! SIGTERM) that ends a hold, and Go's texts for a child command's failure.

use std::time::Duration;

use oxcd_client::{Client, LeaseKeeper};
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::fail::{Fail, exit};

/// clientv3's session TTL when none (or a non-positive one) is given.
const DEFAULT_TTL: i64 = 60;

/// etcdctl's text when an interrupt ends a wait (Go's `context.Canceled`).
pub const CANCELED: &str = "context canceled";

/// A session: a lease granted for the command and renewed until it ends. As etcdctl,
/// the lease is left to expire when the command exits (never revoked).
pub struct LeaseSession {
    keeper: LeaseKeeper,
}

impl LeaseSession {
    /// Grants a lease of `ttl` seconds (60 when `ttl` is not positive) and keeps it alive.
    pub async fn grant(client: &Client, ttl: i64) -> Result<LeaseSession, Fail> {
        let ttl = if ttl > 0 { ttl } else { DEFAULT_TTL };
        let resp = client
            .lease_grant(ttl, 0)
            .await
            .map_err(|e| Fail::new(exit::ERROR, e.to_string()))?;
        Ok(LeaseSession {
            keeper: client.keep_lease_alive(resp.id, resp.ttl),
        })
    }

    /// The lease.
    pub fn id(&self) -> i64 {
        self.keeper.id()
    }

    /// Resolves once the lease is gone (the server said so at a renewal).
    pub async fn expired(&self) {
        while self.keeper.alive() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// SIGINT and SIGTERM, caught for the whole command (so a child command's run is not
/// cut short: etcdctl goes on with it and releases afterwards).
pub struct Interrupts {
    int: Signal,
    term: Signal,
}

impl Interrupts {
    /// Starts catching both signals.
    pub fn catch() -> Result<Interrupts, Fail> {
        let hook = |kind| {
            signal(kind).map_err(|e| Fail::new(exit::ERROR, format!("cannot catch signals: {e}")))
        };
        Ok(Interrupts {
            int: hook(SignalKind::interrupt())?,
            term: hook(SignalKind::terminate())?,
        })
    }

    /// Resolves at the next SIGINT or SIGTERM.
    pub async fn recv(&mut self) {
        tokio::select! {
            _ = self.int.recv() => {}
            _ = self.term.recv() => {}
        }
    }
}

/// Go's text for a signal that ended a child (`signal: killed`).
fn signal_name(sig: i32) -> String {
    let name = match sig {
        1 => "hangup",
        2 => "interrupt",
        3 => "quit",
        4 => "illegal instruction",
        5 => "trace/breakpoint trap",
        6 => "aborted",
        7 => "bus error",
        8 => "floating point exception",
        9 => "killed",
        10 => "user defined signal 1",
        11 => "segmentation fault",
        12 => "user defined signal 2",
        13 => "broken pipe",
        14 => "alarm clock",
        15 => "terminated",
        n => return format!("signal {n}"),
    };
    name.to_string()
}

/// Go's `exec.ExitError` text for a failed child's status, or `None` when it succeeded.
pub fn exit_error(st: std::process::ExitStatus) -> Option<String> {
    use std::os::unix::process::ExitStatusExt;
    if st.success() {
        return None;
    }
    Some(match (st.code(), st.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) if st.core_dumped() => format!("signal: {} (core dumped)", signal_name(s)),
        (None, Some(s)) => format!("signal: {}", signal_name(s)),
        (None, None) => "exit status -1".to_string(),
    })
}

/// Go's text for a child that could not be started.
pub fn spawn_error(program: &str, e: &std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::NotFound && !program.contains('/') {
        return format!(
            "exec: {}: executable file not found in $PATH",
            oxcd_go::quote::quote_str(program)
        );
    }
    format!("fork/exec {program}: {}", oxcd_go::os::errno_text(e))
}
